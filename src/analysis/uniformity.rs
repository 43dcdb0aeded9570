//! Uniformity: which values every thread of the block holds identically, and which regions
//! run under divergent (thread-dependent) control. Follows docs/ir.md, "Uniformity".
//!
//! Lattice per value: `Uniform` ⊑ `ThreadDependent` (join = or of "thread-dependent"); per
//! region: `Converged` ⊑ `Divergent`. Transfer: constants, block ids/dims, scalar parameters
//! are uniform; `tid.*`, `lane`, `warp`, `in_group`, atomics, `local_load`, `wgmma` and async
//! tokens are thread-dependent; arithmetic, `compute`, loads are uniform iff their operands
//! (and a load's view indices) are; a loop's induction variable iff its bounds are; iteration
//! values iff init and yielded values are (a fixpoint over the body); anything defined in a
//! divergent region is thread-dependent. A region is divergent when an enclosing `if`
//! condition, `for` bound or `while` condition is thread-dependent.
//! Complexity: O(ops · loop depth) — each loop is re-walked until its iteration values stop
//! changing, and a value only moves up the lattice once.

use crate::ir::*;

/// The result of the analysis.
#[derive(Clone, Debug)]
pub struct Uniformity {
    thread_dep: SecondaryMap<Value, bool>,
    divergent: SecondaryMap<Region, bool>,
}

impl Uniformity {
    /// Whether every thread of the block holds the same value.
    pub fn is_uniform(&self, v: Value) -> bool {
        !*self.thread_dep.get(v)
    }
    pub fn operand_uniform(&self, o: &Operand) -> bool {
        o.value().is_none_or(|v| self.is_uniform(v))
    }
    /// Whether ops of the region may run in some threads of the block only.
    pub fn is_divergent(&self, r: Region) -> bool {
        *self.divergent.get(r)
    }
}

/// Runs the analysis.
pub fn analyze(k: &Kernel) -> Uniformity {
    let mut u = Uniformity {
        thread_dep: SecondaryMap::with_default(false),
        divergent: SecondaryMap::with_default(false),
    };
    region(k, &mut u, k.body, false);
    u
}

fn mem_uniform(k: &Kernel, u: &Uniformity, m: MemRef) -> bool {
    match m {
        MemRef::Buffer(_) => true,
        MemRef::View(v) => {
            let vd = &k.views[v];
            vd.indices.iter().all(|ix| match ix {
                ViewIndex::At(o) => u.operand_uniform(o),
                ViewIndex::Range(..) => true,
            }) && mem_uniform(k, u, vd.base)
        }
    }
}

fn set(u: &mut Uniformity, v: Value, dep: bool) -> bool {
    let old = *u.thread_dep.get(v);
    if dep && !old {
        u.thread_dep.set(v, true);
        true
    } else {
        false
    }
}

fn region(k: &Kernel, u: &mut Uniformity, r: Region, div: bool) {
    if div {
        u.divergent.set(r, true);
        for &a in &k.regions[r].args {
            set(u, a, true);
        }
    }
    for &op in &k.regions[r].ops {
        self::op(k, u, op, div);
    }
}

fn yields(k: &Kernel, r: Region) -> Vec<Operand> {
    match k.regions[r].ops.last().map(|&o| &k.ops[o].kind) {
        Some(OpKind::Yield(v)) => v.clone(),
        _ => Vec::new(),
    }
}

fn op(k: &Kernel, u: &mut Uniformity, op: Op, div: bool) {
    let od = &k.ops[op];
    let all = |u: &Uniformity, os: &[&Operand]| os.iter().all(|o| u.operand_uniform(o));
    let dep = match &od.kind {
        OpKind::Const(_) => false,
        OpKind::Special(s) => s.is_thread_dependent(),
        OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => !all(u, &[a, b]),
        OpKind::Unary(_, a) | OpKind::Cast(_, a) => !all(u, &[a]),
        OpKind::Select(c, a, b) => !all(u, &[c, a, b]),
        OpKind::InGroup(_) => true,
        OpKind::Compute { args, .. } => !args.iter().all(|o| u.operand_uniform(o)),
        OpKind::Load { mem, index } => {
            !(index.iter().all(|o| u.operand_uniform(o)) && mem_uniform(k, u, *mem))
        }
        OpKind::GLoad { index, .. } => !index.iter().all(|o| u.operand_uniform(o)),
        OpKind::For { lo, hi, step, init } => {
            let body = od.regions[0];
            let bounds = all(u, &[lo, hi, step]);
            let args = k.regions[body].args.clone();
            set(u, args[0], !bounds || div);
            for (a, i) in args[1..].iter().zip(init) {
                set(u, *a, !u.operand_uniform(i) || div);
            }
            loop {
                region(k, u, body, div || !bounds);
                let ys = yields(k, body);
                let mut changed = false;
                for (a, y) in args[1..].iter().zip(&ys) {
                    changed |= set(u, *a, !u.operand_uniform(y));
                }
                if !changed {
                    break;
                }
            }
            let ys = yields(k, body);
            for (i, &res) in od.results.iter().enumerate() {
                let d = args.get(i + 1).is_none_or(|a| !u.is_uniform(*a))
                    || ys.get(i).is_some_and(|y| !u.operand_uniform(y));
                set(u, res, d || div || !bounds);
            }
            return;
        }
        OpKind::If { cond } => {
            let c = u.operand_uniform(cond);
            for &r in &od.regions {
                region(k, u, r, div || !c);
            }
            let (t, e) = (yields(k, od.regions[0]), yields(k, od.regions[1]));
            for (i, &res) in od.results.iter().enumerate() {
                let d = !c
                    || t.get(i).is_some_and(|y| !u.operand_uniform(y))
                    || e.get(i).is_some_and(|y| !u.operand_uniform(y));
                set(u, res, d || div);
            }
            return;
        }
        OpKind::While { init } => {
            let (before, after) = (od.regions[0], od.regions[1]);
            let bargs = k.regions[before].args.clone();
            let aargs = k.regions[after].args.clone();
            for (a, i) in bargs.iter().zip(init) {
                set(u, *a, !u.operand_uniform(i) || div);
            }
            let mut cond_dep = div;
            loop {
                region(k, u, before, div || cond_dep);
                let c = match k.regions[before].ops.last().map(|&o| &k.ops[o].kind) {
                    Some(OpKind::Condition(c)) => u.operand_uniform(c),
                    _ => true,
                };
                let mut changed = !c && !cond_dep;
                cond_dep |= !c;
                for (a, b) in aargs.iter().zip(&bargs) {
                    changed |= set(u, *a, !u.is_uniform(*b) || cond_dep);
                }
                region(k, u, after, div || cond_dep);
                let ys = yields(k, after);
                for (a, y) in bargs.iter().zip(&ys) {
                    changed |= set(u, *a, !u.operand_uniform(y));
                }
                if !changed {
                    break;
                }
            }
            for (i, &res) in od.results.iter().enumerate() {
                set(
                    u,
                    res,
                    cond_dep || bargs.get(i).is_none_or(|a| !u.is_uniform(*a)),
                );
            }
            return;
        }
        OpKind::Stage { .. } => {
            for &r in &od.regions {
                region(k, u, r, div);
            }
            return;
        }
        // Atomics, collective loads, async tokens, wgmma results and anything else with a
        // result are thread-dependent.
        _ => true,
    };
    for &res in &od.results {
        set(u, res, dep || div);
    }
}
