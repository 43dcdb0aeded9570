//! Register results of asynchronous matrix ops: which values an op *consumes* and which
//! `wgmma` ops' results reach a value through moves only.
//!
//! A `wgmma` writes its accumulator asynchronously (PTX `wgmma.mma_async`): the result
//! registers hold a defined value only after a `wgmma_wait N` that completes the wgmma's
//! group. Until then the value may be *moved* — yielded into a loop's iteration value, passed
//! as a loop's initial value, or handed to another `wgmma` as its accumulator (chaining, which
//! the hardware orders) — but not *consumed* by any other op (arithmetic, a store, a
//! comparison). [`consumed`] lists the values an op consumes; [`RegSources::wgmma_sources`] follows a
//! value back through moves (region arguments, loop and `if` results, yields) to the `wgmma`
//! ops that may have produced it.
//!
//! Invariant: a value produced by anything but a move or a `wgmma` has no sources (its
//! producer consumed the wgmma result and is checked itself). Complexity: O(values) per
//! kernel with the memo; cycles through loop-carried values are cut by the memo's
//! in-progress mark.

use std::collections::{BTreeSet, HashMap};

use crate::ir::*;

/// The values `op` consumes (an IR fact, shared with the checker's interpreter, which may use
/// only `crate::ir`): see [`crate::ir::wgmma::consumed`].
pub use crate::ir::wgmma::consumed;

/// Memoized [`RegSources::wgmma_sources`] over one kernel.
pub struct RegSources<'k> {
    k: &'k Kernel,
    parents: &'k Parents,
    memo: HashMap<Value, Option<BTreeSet<Op>>>,
}

impl<'k> RegSources<'k> {
    pub fn new(k: &'k Kernel) -> Self {
        RegSources {
            k,
            parents: k.parents(),
            memo: HashMap::new(),
        }
    }

    /// The `wgmma` ops whose result may reach `v` through moves only.
    pub fn wgmma_sources(&mut self, v: Value) -> BTreeSet<Op> {
        match self.memo.get(&v) {
            Some(Some(s)) => return s.clone(),
            Some(None) => return BTreeSet::new(),
            None => {}
        }
        self.memo.insert(v, None);
        let mut out = BTreeSet::new();
        for w in self.moved_from(v) {
            match w {
                Source::Wgmma(op) => {
                    out.insert(op);
                }
                Source::Value(u) => out.extend(self.wgmma_sources(u)),
            }
        }
        self.memo.insert(v, Some(out.clone()));
        out
    }

    /// Whether executing `op` accesses (reads or redefines) a value that `wgmma` holds as
    /// register A (`ir::wgmma::register_reads` / `register_writes`): such an op must wait
    /// for every pending execution of `wgmma`.
    pub fn touches_register_a(&self, op: Op, wgmma: Op) -> bool {
        let OpKind::Wgmma { a, .. } = &self.k.ops[wgmma].kind else {
            return false;
        };
        let held: Vec<Value> = a.regs().iter().filter_map(|o| o.value()).collect();
        if held.is_empty() {
            return false;
        }
        let k = self.k;
        crate::ir::wgmma::register_reads(k, op)
            .into_iter()
            .chain(crate::ir::wgmma::register_writes(k, self.parents, op))
            .any(|v| held.contains(&v))
    }

    /// Where `v`'s value comes from by a move (or the wgmma that produced it).
    fn moved_from(&self, v: Value) -> Vec<Source> {
        let k = self.k;
        match k.values[v].def {
            ValueDef::Result(op, i) => match &k.ops[op].kind {
                OpKind::Wgmma { .. } => vec![Source::Wgmma(op)],
                OpKind::For { init, .. } => {
                    let mut s = self.yielded(k.ops[op].regions[0], i);
                    s.extend(operand_value(init.get(i)));
                    s
                }
                OpKind::While { .. } => arg(k.ops[op].regions[0], i, k),
                OpKind::If { .. } => k.ops[op]
                    .regions
                    .iter()
                    .flat_map(|&r| self.yielded(r, i))
                    .collect(),
                _ => Vec::new(),
            },
            ValueDef::RegionArg(r, i) => {
                let Some(owner) = self.parents.region_op[r] else {
                    return Vec::new();
                };
                match &k.ops[owner].kind {
                    // Argument 0 of a `for` body is the induction variable.
                    OpKind::For { init, .. } if i > 0 => {
                        let mut s = self.yielded(r, i - 1);
                        s.extend(operand_value(init.get(i - 1)));
                        s
                    }
                    OpKind::While { init } => {
                        let (cond, body) = (k.ops[owner].regions[0], k.ops[owner].regions[1]);
                        if r == cond {
                            let mut s = self.yielded(body, i);
                            s.extend(operand_value(init.get(i)));
                            s
                        } else {
                            arg(cond, i, k)
                        }
                    }
                    _ => Vec::new(),
                }
            }
            ValueDef::Param(_) => Vec::new(),
        }
    }

    /// The `i`-th operand of the `yield` ending region `r`, if it is a value.
    fn yielded(&self, r: Region, i: usize) -> Vec<Source> {
        match self.k.region_ops(r).last().map(|&o| &self.k.ops[o].kind) {
            Some(OpKind::Yield(vals)) => operand_value(vals.get(i)).collect(),
            _ => Vec::new(),
        }
    }
}

enum Source {
    Wgmma(Op),
    Value(Value),
}

fn operand_value(o: Option<&Operand>) -> impl Iterator<Item = Source> {
    o.and_then(|o| o.value()).map(Source::Value).into_iter()
}

fn arg(r: Region, i: usize, k: &Kernel) -> Vec<Source> {
    k.region_args(r)
        .get(i)
        .map(|a| Source::Value(*a))
        .into_iter()
        .collect()
}
