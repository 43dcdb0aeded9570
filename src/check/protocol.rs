//! The split/named-barrier protocol verifier: proves over the structured control flow that
//! gfx12 split barriers pair up and that named barriers are used consistently.
//!
//! Split barriers (`barrier_signal id` / `barrier_wait id`). For every id, each program point
//! carries the set of states a thread may be in on some path from the kernel entry: `Idle`
//! (every signal has been waited for) or `Signalled` (a signal awaits its wait). The lattice is
//! the powerset of {Idle, Signalled} per id, joined by union. Transfer: `signal` requires
//! {Idle} (a second signal before the wait is a violation), `wait` requires {Signalled} (a wait
//! with no signal before it hangs); `if` runs both arms from one input and joins (the path that
//! skips an empty else is the else arm); a loop joins the entry with the back edge until a
//! fixpoint (at most three rounds: the lattice has height 2 per id), which covers the path that
//! skips a zero-trip loop. At the kernel exit the state must be {Idle} (no orphan signal).
//! A split barrier involves every thread of the block, so under a thread-dependent condition
//! both arms must leave the barrier in the same state, and no signal or wait may sit inside a
//! thread-dependent loop.
//!
//! Named barriers (`named_arrive id, n` / `named_sync id, n`): every op on one id must agree on
//! `n`; `n` must be a positive multiple of the warp width and at most the block size; ids stay
//! below the target's limit (16); `barrier` uses id 0 on NVIDIA, so named ops on id 0 must count
//! the whole block. Whether `n` threads really arrive in each phase depends on which threads run
//! which branch; the interpreter checks that dynamically.
//!
//! Uniformity comes from the checker's own [`super::uniform`] (loads by their indices, as
//! docs/ir.md defines it), independent of the placer's. Complexity: O(ops · ids · loop depth).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::uniform::{self, Loads, divergent_control};
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::*;

const IDLE: u8 = 1;
const SIGNALLED: u8 = 2;

/// State per split-barrier id: a bitmask of IDLE | SIGNALLED (absent = {IDLE}).
type State = BTreeMap<i32, u8>;

fn get(s: &State, id: i32) -> u8 {
    *s.get(&id).unwrap_or(&IDLE)
}

fn join(a: &State, b: &State) -> State {
    let mut out = a.clone();
    for (&id, &m) in b {
        *out.entry(id).or_insert(IDLE) |= m;
    }
    for (&id, m) in out.iter_mut() {
        if !b.contains_key(&id) {
            *m |= IDLE;
        }
    }
    out
}

/// Checks the split- and named-barrier protocol of a kernel for a warp width.
pub fn check_protocol(k: &Kernel, warp: u32) -> Vec<Diagnostic> {
    let divergent = uniform::thread_dependent(k, Loads::ByIndex);
    let mut v = Protocol {
        k,
        divergent,
        errors: Vec::new(),
        reported: HashSet::new(),
    };
    let end = v.region(k.body(), State::new(), false);
    for (id, m) in &end {
        if m & SIGNALLED != 0 {
            let label = "this signal may be left without a wait";
            let (sig, label) = k
                .ops_in_order()
                .into_iter()
                .find(|&o| k.ops[o].kind == OpKind::SplitSignal(*id))
                .map_or((k.kernel_span, label.to_string()), |o| locate(k, o, label));
            v.errors.push(
                Diagnostic::error(DiagKind::Finding, "P0003", format!("split barrier {id} is signalled but never waited for before the kernel ends"))
                    .with_label(sig, label)
                    .with_help("add a `barrier_wait` before the kernel exits"),
            );
        }
    }
    v.named(warp);
    v.errors
}

/// Where a diagnostic about `op` points (`Kernel::locate`: an op `sync` inserted, such as its
/// lowering's split halves, points at its nearest op with a source).
fn locate(k: &Kernel, op: Op, label: &str) -> (crate::diag::Span, String) {
    k.locate(op, label)
}

struct Protocol<'a> {
    k: &'a Kernel,
    divergent: HashSet<Value>,
    errors: Vec<Diagnostic>,
    reported: HashSet<(Op, &'static str)>,
}

impl Protocol<'_> {
    fn report(&mut self, op: Op, code: &'static str, msg: String, label: &str, help: &str) {
        if self.reported.insert((op, code)) {
            let (span, label) = locate(self.k, op, label);
            self.errors.push(
                Diagnostic::error(DiagKind::Finding, code, msg)
                    .with_label(span, label)
                    .with_help(help),
            );
        }
    }

    fn region(&mut self, r: Region, mut s: State, in_divergent_loop: bool) -> State {
        for &op in self.k.region_ops(r) {
            s = self.op(op, s, in_divergent_loop);
        }
        s
    }

    fn op(&mut self, op: Op, s: State, in_div_loop: bool) -> State {
        let k = self.k;
        let od = &k.ops[op];
        match &od.kind {
            OpKind::SplitSignal(id) | OpKind::SplitWait(id) => {
                let signal = matches!(od.kind, OpKind::SplitSignal(_));
                if in_div_loop {
                    self.report(op, "P0004", "split barrier op inside a loop with thread-dependent bounds".into(),
                        "threads may execute this a different number of times", "hoist the loop bounds so they are uniform, or move the barrier out of the loop");
                }
                let m = get(&s, *id);
                let mut out = s.clone();
                if signal {
                    if m & SIGNALLED != 0 {
                        let msg = if m == SIGNALLED {
                            "signalled again before its wait"
                        } else {
                            "may be signalled again before its wait on some path"
                        };
                        self.report(op, "P0001", format!("split barrier {id} {msg}"), "second signal", "each signal must be followed by a wait on the same id before the next signal");
                    }
                    out.insert(*id, SIGNALLED);
                } else {
                    if m & IDLE != 0 {
                        let msg = if m == IDLE {
                            "is waited for with no signal before it"
                        } else {
                            "may be waited for with no signal before it on some path"
                        };
                        self.report(
                            op,
                            "P0002",
                            format!("split barrier {id} {msg}"),
                            "this wait can hang",
                            "signal the barrier on every path that reaches this wait",
                        );
                    }
                    out.insert(*id, IDLE);
                }
                out
            }
            OpKind::If { .. } => {
                let div = divergent_control(k, &self.divergent, op);
                let a = self.region(od.regions[0], s.clone(), in_div_loop);
                let b = self.region(od.regions[1], s, in_div_loop);
                if div && a != b {
                    self.report(op, "P0005", "the arms of a thread-dependent `if` leave a split barrier in different states".into(),
                        "threads taking different arms would disagree on the barrier", "signal and wait on the same path in both arms, or outside the `if`");
                }
                join(&a, &b)
            }
            OpKind::For { .. } => {
                let div = in_div_loop || divergent_control(k, &self.divergent, op);
                self.fixpoint(od.regions[0], None, s, div)
            }
            OpKind::While { .. } => {
                // The condition region runs at least once; the body zero or more times.
                let div = in_div_loop || divergent_control(k, &self.divergent, op);
                self.fixpoint(od.regions[1], Some(od.regions[0]), s, div)
            }
            OpKind::Stage { .. } => self.region(od.regions[0], s, in_div_loop),
            _ => s,
        }
    }

    /// Loop: state at the head = entry ⊔ back-edge, iterated to a fixpoint; the exit state is
    /// the head state (zero or more iterations), after the condition region for `while`.
    fn fixpoint(&mut self, body: Region, cond: Option<Region>, entry: State, div: bool) -> State {
        let mut head = entry.clone();
        for _ in 0..8 {
            let after_cond = match cond {
                Some(c) => self.region(c, head.clone(), div),
                None => head.clone(),
            };
            let back = self.region(body, after_cond, div);
            let next = join(&entry, &back);
            if next == head {
                break;
            }
            head = next;
        }
        match cond {
            Some(c) => self.region(c, head, div),
            None => head,
        }
    }

    fn named(&mut self, warp: u32) {
        let k = self.k;
        let threads = k.threads();
        let mut first: HashMap<u32, (u32, Op)> = HashMap::new();
        for op in k.ops_in_order() {
            let (id, count) = match k.ops[op].kind {
                OpKind::NamedArrive { id, count } | OpKind::NamedSync { id, count } => (id, count),
                _ => continue,
            };
            if id >= 16 {
                self.report(
                    op,
                    "P0010",
                    format!("named barrier id {id} exceeds the 16 hardware barriers"),
                    "id out of range",
                    "use ids 1..15 (0 is the block barrier on NVIDIA)",
                );
            }
            if count == 0 || count > threads {
                self.report(
                    op,
                    "P0011",
                    format!("named barrier count {count} is not in 1..={threads}"),
                    "bad thread count",
                    "count the threads that arrive on this barrier",
                );
            } else if count % warp != 0 && count != threads {
                self.report(
                    op,
                    "P0012",
                    format!(
                        "named barrier count {count} is not a multiple of the warp width {warp}"
                    ),
                    "partial warp",
                    "named barriers count whole warps",
                );
            }
            if id == 0 && count != threads {
                self.report(
                    op,
                    "P0013",
                    format!(
                        "named barrier 0 is the block barrier: it must count all {threads} threads"
                    ),
                    "id 0 with a partial count",
                    "use an id from 1 to 15",
                );
            }
            match first.get(&id) {
                Some(&(c0, op0)) if c0 != count && self.reported.insert((op, "P0014")) => {
                    self.errors.push(
                        Diagnostic::error(
                            DiagKind::Finding,
                            "P0014",
                            format!(
                                "named barrier {id} is used with thread counts {c0} and {count}"
                            ),
                        )
                        .with_label(k.span(op), format!("counts {count}"))
                        .with_label(k.span(op0), format!("counts {c0}"))
                        .with_help(
                            "every arrive/sync on one id must expect the same number of threads",
                        ),
                    );
                }
                None => {
                    first.insert(id, (count, op));
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::parse_kernel;

    fn codes(src: &str) -> Vec<&'static str> {
        let k = parse_kernel(src).expect("parses");
        assert!(crate::verify::verify(&k).is_empty());
        check_protocol(&k, 32).iter().map(|d| d.code).collect()
    }

    #[test]
    fn paired_signal_and_wait_pass() {
        let c = codes(
            "kernel @k() block(64) {\n barrier_signal -1\n barrier_wait -1\n for %i = 0 to 4 step 1 {\n barrier_signal -1\n barrier_wait -1\n }\n}",
        );
        assert!(c.is_empty(), "{c:?}");
    }

    #[test]
    fn wait_without_signal_and_double_signal_are_violations() {
        assert_eq!(
            codes("kernel @k() block(64) {\n barrier_wait -1\n}"),
            vec!["P0002"]
        );
        assert_eq!(
            codes(
                "kernel @k() block(64) {\n barrier_signal -1\n barrier_signal -1\n barrier_wait -1\n}"
            ),
            vec!["P0001"]
        );
    }

    #[test]
    fn orphan_signal_at_exit_is_reported() {
        assert_eq!(
            codes("kernel @k() block(64) {\n barrier_signal -1\n}"),
            vec!["P0003"]
        );
    }

    #[test]
    fn signal_in_loop_waited_after_it_is_a_double_signal_on_the_back_edge() {
        // Iteration 2 signals again before the wait after the loop.
        let c = codes(
            "kernel @k() block(64) {\n for %i = 0 to 4 step 1 {\n barrier_signal -1\n }\n barrier_wait -1\n}",
        );
        assert!(c.contains(&"P0001"), "{c:?}");
        // The zero-trip path reaches the wait with no signal.
        assert!(c.contains(&"P0002"), "{c:?}");
    }

    #[test]
    fn pair_straddling_the_back_edge_is_proved() {
        // Signal before the loop and at the end of each iteration; wait at the top.
        let c = codes(
            "kernel @k() block(64) {\n barrier_signal -1\n for %i = 0 to 4 step 1 {\n barrier_wait -1\n barrier_signal -1\n }\n barrier_wait -1\n}",
        );
        assert!(c.is_empty(), "{c:?}");
    }

    #[test]
    fn uniform_if_may_hold_the_pair_in_one_arm_but_a_divergent_one_may_not() {
        let uniform = "kernel @k(%n: i32) block(64) {\n %c = cmp lt %n, 4\n if %c {\n barrier_signal -1\n barrier_wait -1\n }\n}";
        assert!(codes(uniform).is_empty());
        let divergent = "kernel @k() block(64) {\n %t = tid.x\n %c = cmp lt %t, 4\n if %c {\n barrier_signal -1\n }\n barrier_wait -1\n}";
        let c = codes(divergent);
        assert!(c.contains(&"P0005") && c.contains(&"P0002"), "{c:?}");
    }

    #[test]
    fn split_barrier_in_thread_dependent_loop_is_reported() {
        let c = codes(
            "kernel @k() block(64) {\n %t = tid.x\n for %i = 0 to %t step 1 {\n barrier_signal -1\n barrier_wait -1\n }\n}",
        );
        assert_eq!(
            c,
            vec!["P0004", "P0004"],
            "both the signal and the wait are reported"
        );
    }

    #[test]
    fn named_barrier_counts_must_agree_and_be_whole_warps() {
        let c = codes(
            "kernel @k() block(128) {\n named_arrive 1, 64\n named_sync 1, 96\n named_sync 2, 48\n named_sync 0, 64\n}",
        );
        assert!(c.contains(&"P0014"), "{c:?}");
        assert!(c.contains(&"P0012"), "{c:?}");
        assert!(c.contains(&"P0013"), "{c:?}");
    }

    #[test]
    fn the_warp_specialized_example_uses_named_barriers_consistently() {
        let src = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/warp-specialized-named-barriers.kir"
        ))
        .expect("example");
        assert!(codes(&src).is_empty());
    }
}
