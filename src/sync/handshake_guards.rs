//! The conditions around a role's pipeline loop, for the handshakes `sync` places
//! (`sync::handshake`): which threads run the loop, and so arrive on the handshake once per
//! iteration, and which uniform conditions decide whether it runs at all (docs/pipeline.md,
//! "Guarded pipeline loops").
//!
//! A role's arrival count must be the number of threads that arrive in every phase. A
//! handshake placed in a loop under `if %t < 100` is run by the threads that pass the guard,
//! not by the whole role (session 39's P10, P10c, P10d: the count was the role's size, fewer
//! threads arrived, the other role waited forever). So the count is read off the guards:
//!
//! - a condition computed from constants and thread specials only (`analysis::role_split`'s
//!   evaluator, which also reads the role branch's own `in_group`) is evaluated in every
//!   thread: the threads that run the op are those passing every such condition on its path
//!   (the then-arm needs it true, the else-arm false);
//! - a *uniform* condition (`analysis::uniformity`: the same value in every thread, e.g. `%n >
//!   3`) runs the op in all or none of those threads; it is kept as a (value, arm) pair, and
//!   the caller requires every role's loop to sit under the same pairs: a loop that runs in
//!   one role and not the other leaves phases that never complete (P10b);
//! - any other condition (thread-dependent through a parameter or a load), a `while` or a
//!   loop on the path: [`Reach`] is refused with the reason and the op (W1300).
//!
//! Invariant: where [`reach`] answers, an op on the path runs, in one execution of the
//! enclosing loops, in exactly `threads` when the uniform conditions hold and in no thread
//! otherwise. Complexity: O(depth × threads × cone) per op.

use crate::diag::Diagnostic;
use crate::ir::*;
use crate::sync::handshake::unsupported;

/// The threads that run an op, and the uniform conditions it runs under.
#[derive(Clone, Debug)]
pub(crate) struct Reach {
    /// One flag per linear thread id of the block.
    pub threads: Vec<bool>,
    /// Uniform `if` conditions on the path, with the arm taken (`true`: then).
    pub uniform: Vec<(Value, bool)>,
}

impl Reach {
    pub fn count(&self) -> u32 {
        self.threads.iter().filter(|&&t| t).count() as u32
    }

    /// Whether every warp of width `w` runs the op in all or none of its threads.
    pub fn whole_warps(&self, w: u32) -> bool {
        (self.threads.chunks(w.max(1) as usize)).all(|c| c.iter().all(|&t| t) || !c.iter().any(|&t| t))
    }
}

/// The threads running `o` and the uniform conditions around it, reading every op above it
/// up to the kernel's body; `through` is a loop the path may cross (the pipeline loop, for an
/// op inside it: its trips are counted per iteration, not here).
pub(crate) fn reach(k: &Kernel, o: Op, through: Option<Op>) -> Result<Reach, Box<Diagnostic>> {
    let parents = k.parents();
    let mut out = Reach {
        threads: vec![true; k.threads() as usize],
        uniform: Vec::new(),
    };
    let mut uni: Option<crate::analysis::uniformity::Uniformity> = None;
    let mut cur = o;
    while let Some(p) = parents.parent_op(cur) {
        let then_arm = parents.op_region[cur] == k.ops[p].regions.first().copied();
        match &k.ops[p].kind {
            OpKind::Stage { .. } => {}
            OpKind::For { .. } if Some(p) == through => {}
            OpKind::If { cond } => {
                if let Some(t) = crate::analysis::role_split::true_threads(k, cond) {
                    for (r, c) in out.threads.iter_mut().zip(t) {
                        *r &= c == then_arm;
                    }
                } else {
                    let u = uni.get_or_insert_with(|| crate::analysis::uniformity::analyze(k));
                    match cond {
                        Operand::Value(v) if u.executor_uniform(&Operand::Value(*v)) => out.uniform.push((*v, then_arm)),
                        _ => {
                            return Err(unsupported(
                                k,
                                p,
                                "a role's pipeline loop is under a condition that depends on the thread and on a value that is not a thread id (a parameter, a loop variable, a load): the threads that arrive on the handshake cannot be counted",
                            ));
                        }
                    }
                }
            }
            _ => {
                return Err(unsupported(
                    k,
                    p,
                    "a role's pipeline loop is inside a loop or `while` of its arm: its handshakes would run a number of times per thread that smemsync does not count",
                ));
            }
        }
        cur = p;
    }
    out.uniform.sort_unstable_by_key(|&(v, a)| (v, a));
    Ok(out)
}

/// The roles' loop reaches, checked against each other: every role runs its loop in some
/// thread, and all under the same uniform conditions (else one role's phases are never
/// matched by the other's: W1300 naming the role branch and the condition's op).
pub(crate) fn matching(k: &Kernel, br: Op, reaches: &[Reach]) -> Result<(), Box<Diagnostic>> {
    if reaches.iter().any(|r| r.count() == 0) {
        return Err(unsupported(
            k,
            br,
            "no thread of a role passes the conditions around its pipeline loop: the other role would wait for arrivals that never come",
        ));
    }
    let first = &reaches[0].uniform;
    if let Some(r) = reaches.iter().find(|r| r.uniform != *first) {
        let odd = (r.uniform.iter().chain(first))
            .find(|x| !(r.uniform.contains(x) && first.contains(x)))
            .and_then(|&(v, _)| match k.values[v].def {
                ValueDef::Result(d, _) => Some(d),
                _ => None,
            });
        let d = unsupported(
            k,
            br,
            "one role's pipeline loop runs under a uniform condition the other role's does not share: for the values where only one loop runs, its handshakes wait for phases the other role never completes",
        );
        return Err(match odd {
            Some(o) => Box::new(d.with_label(k.span(o), "this condition guards one role's loop only")),
            None => d,
        });
    }
    Ok(())
}
