//! The thread-dependent terms of `analysis::mbar_protocol`'s trace: the values whose per-thread
//! values decide which threads trace alike (docs/async.md, "What `sync` verifies of an
//! mbarrier protocol", *Thread classes*).
//!
//! The trace evaluates, per thread, a fixed set of operands of the ops that hold mbarrier ops:
//! loop bounds and initial iteration values, `if` conditions, the values yielded, mbarrier
//! indices and wait parities. Its evaluation reads the thread only through `Special` and
//! `in_group` ops, and otherwise reads constants, scalar parameters and the trace's
//! environment (region arguments and the results of the `for`/`if` ops it ran).
//!
//! A *term* is a value that depends on the thread and on nothing in the environment (its
//! definitions reach a `Special` or `in_group` op and no region argument or `for`/`if`
//! result). [`terms`] returns the maximal terms under every evaluated operand: those an
//! evaluation reaches before any environment value.
//!
//! Invariant (why equal terms give equal traces): two threads whose terms have equal values
//! (and fail on the same missing parameter) compute the same value for every evaluated
//! operand in equal environments — each operand is built from terms, thread-independent values
//! and environment values — so, by induction over the trace's steps, they take the same arms
//! and iterations, set the same environment and record the same events. The trace therefore
//! runs one representative per class (its smallest thread) and weighs its events by the class
//! size.
//!
//! Complexity: O(ops holding mbarrier ops + the values their operands reach), memoised per
//! value. Independent of `analysis::uniformity` (which answers warp-level questions for the
//! placement); this only needs equality of values, which the evaluation itself provides.

use std::collections::{HashMap, HashSet};

use crate::ir::*;

/// How a value depends on the thread: whether it does, and whether its evaluation reads the
/// trace's environment.
#[derive(Copy, Clone, Debug, Default)]
struct Dep {
    thread: bool,
    env: bool,
}

/// The maximal thread-dependent, environment-free values under the operands the trace
/// evaluates of the ops in `traced` (module doc) and under the values `extra` it evaluates
/// too (the slots of the accesses `mbar_delayed` watches), in a deterministic order.
pub fn terms(k: &Kernel, traced: &HashSet<Op>, extra: &[Value]) -> Vec<Value> {
    let mut ops: Vec<Op> = traced.iter().copied().collect();
    ops.sort_unstable();
    let mut t = Terms { k, dep: HashMap::new(), out: Vec::new(), seen: HashSet::new() };
    for o in ops {
        for v in evaluated(k, o) {
            t.collect(v);
        }
    }
    for &v in extra {
        t.collect(v);
    }
    t.out
}

/// The operands the trace evaluates at op `o` (a traced op).
fn evaluated(k: &Kernel, o: Op) -> Vec<Value> {
    let mut ops: Vec<&Operand> = Vec::new();
    match &k.ops[o].kind {
        OpKind::For { lo, hi, step, init } => ops.extend([lo, hi, step].into_iter().chain(init)),
        OpKind::If { cond } => ops.push(cond),
        OpKind::MbarInit { index, .. }
        | OpKind::MbarArrive { index, .. }
        | OpKind::MbarExpectTx { index, .. } => ops.extend(index),
        OpKind::MbarWait { index, parity, .. } => ops.extend(index.iter().chain([parity])),
        OpKind::TmaLoad { mbar_index, .. } => ops.extend(mbar_index),
        _ => {}
    }
    // The values an arm or a body yields (the `for`/`if` results, the next iteration values).
    for &r in &k.ops[o].regions {
        if let Some(&y) = k.region_ops(r).last()
            && let OpKind::Yield(ys) = &k.ops[y].kind
        {
            ops.extend(ys);
        }
    }
    ops.into_iter().filter_map(|x| if let Operand::Value(v) = x { Some(*v) } else { None }).collect()
}

struct Terms<'k> {
    k: &'k Kernel,
    dep: HashMap<Value, Dep>,
    out: Vec<Value>,
    seen: HashSet<Value>,
}

impl Terms<'_> {
    /// The operands of the op defining `v` that the evaluation may read.
    fn args(&self, v: Value) -> Vec<Value> {
        let ValueDef::Result(d, i) = self.k.values[v].def else {
            return Vec::new();
        };
        let k = self.k;
        let xs: Vec<&Operand> = match &k.ops[d].kind {
            OpKind::Binary(_, x, y) | OpKind::Cmp(_, x, y) => vec![x, y],
            OpKind::Unary(_, x) => vec![x],
            OpKind::Select(c, x, y) => vec![c, x, y],
            // The trace evaluates an `if` result as the taken arm's yield: its condition and
            // both arms' yields.
            OpKind::If { cond } => {
                let arms = k.ops[d].regions.iter().filter_map(|&r| match k.region_ops(r).last().map(|&y| &k.ops[y].kind) {
                    Some(OpKind::Yield(ys)) => ys.get(i),
                    _ => None,
                });
                std::iter::once(cond).chain(arms).collect()
            }
            _ => Vec::new(),
        };
        xs.into_iter().filter_map(|x| if let Operand::Value(v) = x { Some(*v) } else { None }).collect()
    }

    /// How `v` depends on the thread and the environment (the trace's `eval` cases).
    fn dep(&mut self, v: Value) -> Dep {
        if let Some(&d) = self.dep.get(&v) {
            return d;
        }
        let k = self.k;
        let d = match k.values[v].def {
            ValueDef::Param(_) => Dep::default(),
            ValueDef::RegionArg(..) => Dep { thread: false, env: true },
            ValueDef::Result(d, _) => match &k.ops[d].kind {
                OpKind::Special(Special::Bid(_) | Special::BlockDim(_) | Special::GridDim(_)) => Dep::default(),
                OpKind::Special(_) | OpKind::InGroup(_) => Dep { thread: true, env: false },
                OpKind::For { .. } => Dep { thread: false, env: true },
                // Read from the environment where the trace ran the `if`, else evaluated from
                // its condition and yields: never a term itself, its arguments' terms are.
                OpKind::If { .. } => {
                    let thread = self.args(v).into_iter().any(|x| self.dep(x).thread);
                    Dep { thread, env: true }
                }
                _ => self.args(v).into_iter().fold(Dep::default(), |a, x| {
                    let b = self.dep(x);
                    Dep { thread: a.thread || b.thread, env: a.env || b.env }
                }),
            },
        };
        self.dep.insert(v, d);
        d
    }

    /// Adds the maximal terms under `v`.
    fn collect(&mut self, v: Value) {
        if !self.seen.insert(v) {
            return;
        }
        match self.dep(v) {
            Dep { thread: false, .. } => {}
            Dep { env: false, .. } => self.out.push(v),
            _ => {
                for x in self.args(v) {
                    self.collect(x);
                }
            }
        }
    }
}
