//! The checker's uniformity: which values may differ between the threads of a block, and
//! which `if`/`for`/`while` ops decide per thread whether (or how often) their regions run.
//! The split/named-barrier protocol ([`super::protocol`]) and the static race proof
//! ([`super::proof`]) both ask it.
//!
//! It is computed here, independently of the placer's `analysis::uniformity` (the checker
//! shares only the IR with placement: docs/checker.md). The facts follow docs/ir.md,
//! "Uniformity", at block level only (no warp-uniform level: the checker's arguments need
//! "the same in every thread of the block" or nothing).
//!
//! Lattice: the set of thread-dependent values, ordered by inclusion, starting empty (all
//! uniform); the analysis only adds values, so it reaches the least fixpoint. Transfer, for a
//! value defined under control that is already thread-dependent (`div`): every result is
//! thread-dependent. Otherwise:
//! - constants, block ids and dimensions, scalar parameters: uniform; `tid.*`, `lane`,
//!   `warp`, the linear thread id and `in_group`: thread-dependent;
//! - arithmetic, comparisons, `select`, casts and `compute`: thread-dependent iff an operand is;
//! - `load`/`gload`: by [`Loads`] — thread-dependent iff an index (or an index of the view it
//!   reads through) is, or always; a `gload` of a global the kernel writes (`gstore`,
//!   `gatomic`, `tma_store`: `ir::effects::written_globals`) always, since that write is not
//!   ordered with the load;
//! - every other op with results (atomics, `local_load`, `wgmma`, copy tokens): thread-dependent;
//! - `for`: the induction variable iff a bound is; iteration value `i` (region argument and
//!   result) iff a bound, initial value `i` or yielded value `i` is; the body runs under
//!   `div` or thread-dependent bounds;
//! - `if`: result `i` iff the condition or either arm's yielded value `i` is; the arms run under
//!   `div` or a thread-dependent condition;
//! - `while`: iteration value `i` (both regions' arguments and the result) iff the condition,
//!   initial value `i` or the body's yielded value `i` is; the condition region runs under
//!   `div`, the body also under a thread-dependent condition. A condition region that does
//!   not end in `condition` counts as a thread-dependent condition.
//!
//! Complexity: O(ops · (loop depth + 1)) — the kernel is re-walked until no value is added,
//! and each walk adds at least one value along a loop-carried chain.

use std::collections::HashSet;

use crate::ir::*;

/// How the value a shared `load` or a global `gload` returns counts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Loads {
    /// As docs/ir.md defines it: uniform when every index, and every index of the views it
    /// reads through, is uniform (every thread reads the same element). The protocol checker
    /// uses this, as the placer does.
    ByIndex,
    /// Always thread-dependent: the static race proof assumes nothing about what memory holds
    /// (docs/checker.md, precondition 3), since the race freedom that would make one element
    /// read the same in every thread is what it is proving.
    ThreadDependent,
}

/// The values of `k` that may differ between threads of one block.
pub fn thread_dependent(k: &Kernel, loads: Loads) -> HashSet<Value> {
    let mut walk = Walk {
        k,
        loads,
        written: crate::ir::effects::written_globals(k),
        td: HashSet::new(),
    };
    loop {
        let before = walk.td.len();
        walk.region(k.body(), false);
        if walk.td.len() == before {
            return walk.td;
        }
    }
}

/// Whether operand `o` is a thread-dependent value (immediates are uniform).
pub fn depends(td: &HashSet<Value>, o: &Operand) -> bool {
    o.value().is_some_and(|v| td.contains(&v))
}

/// Whether `op` is an `if` with a thread-dependent condition, a `for` with a thread-dependent
/// bound, or a `while` with a thread-dependent condition (or none): threads may disagree on
/// which of its regions run, or how often. False for every other op.
pub fn divergent_control(k: &Kernel, td: &HashSet<Value>, op: Op) -> bool {
    let od = &k.ops[op];
    match &od.kind {
        OpKind::If { cond } => depends(td, cond),
        OpKind::For { lo, hi, step, .. } => [lo, hi, step].into_iter().any(|o| depends(td, o)),
        OpKind::While { .. } => while_condition(k, od.regions[0]).is_none_or(|c| depends(td, &c)),
        _ => false,
    }
}

/// The operand of the `condition` that ends a `while`'s condition region, if it ends so.
fn while_condition(k: &Kernel, cond_region: Region) -> Option<Operand> {
    let last = *k.region_ops(cond_region).last()?;
    match &k.ops[last].kind {
        OpKind::Condition(c) => Some(*c),
        _ => None,
    }
}

/// The values a region's closing `yield` hands on (none without one).
fn yielded(k: &Kernel, r: Region) -> &[Operand] {
    match k.region_ops(r).last().map(|&o| &k.ops[o].kind) {
        Some(OpKind::Yield(vs)) => vs,
        _ => &[],
    }
}

/// One pass over the kernel, adding to `td`.
struct Walk<'a> {
    k: &'a Kernel,
    loads: Loads,
    /// The globals some op of the kernel writes.
    written: HashSet<Global>,
    td: HashSet<Value>,
}

impl Walk<'_> {
    fn dep(&self, o: &Operand) -> bool {
        depends(&self.td, o)
    }

    fn any(&self, os: &[Operand]) -> bool {
        os.iter().any(|o| self.dep(o))
    }

    fn region(&mut self, r: Region, div: bool) {
        for &op in self.k.region_ops(r) {
            self.op(op, div);
        }
    }

    fn op(&mut self, op: Op, div: bool) {
        let k = self.k;
        let od = &k.ops[op];
        let dep = match &od.kind {
            OpKind::Const(_) | OpKind::ViewDef(_) => false,
            OpKind::Special(s) => s.is_thread_dependent(),
            OpKind::InGroup(_) => true,
            OpKind::Binary(_, a, b) | OpKind::Cmp(_, a, b) => self.dep(a) || self.dep(b),
            OpKind::Unary(_, a) | OpKind::Cast(_, a) => self.dep(a),
            OpKind::Select(c, a, b) => self.dep(c) || self.dep(a) || self.dep(b),
            OpKind::Compute { args, .. } => self.any(args),
            OpKind::Load { mem, index } => self.load(Some(*mem), index),
            OpKind::GLoad { global, index } => {
                self.written.contains(global) || self.load(None, index)
            }
            OpKind::For { .. } => return self.for_op(op, div),
            OpKind::If { cond } => return self.if_op(op, div || self.dep(cond)),
            OpKind::While { .. } => return self.while_op(op, div),
            OpKind::Stage { .. } => return self.region(od.regions[0], div),
            _ => true,
        };
        if div || dep {
            self.td.extend(od.results.iter().copied());
        }
    }

    /// A load's result: by [`Loads`], from its indices and those of the views in `mem`'s chain.
    fn load(&self, mem: Option<MemRef>, index: &[Operand]) -> bool {
        if self.loads == Loads::ThreadDependent || self.any(index) {
            return true;
        }
        let mut m = mem;
        while let Some(MemRef::View(v)) = m {
            let vd = &self.k.views[v];
            let at_dep = vd.indices.iter().any(|ix| match ix {
                ViewIndex::At(o) => self.dep(o),
                ViewIndex::Range(..) => false,
            });
            if at_dep {
                return true;
            }
            m = Some(vd.base);
        }
        false
    }

    fn for_op(&mut self, op: Op, div: bool) {
        let k = self.k;
        let od = &k.ops[op];
        let OpKind::For { lo, hi, step, init } = &od.kind else {
            return;
        };
        let body = od.regions[0];
        let args = k.region_args(body);
        let bounds = div || self.dep(lo) || self.dep(hi) || self.dep(step);
        if bounds && let Some(&iv) = args.first() {
            self.td.insert(iv);
        }
        let yields = yielded(k, body);
        for (i, &a) in args.iter().skip(1).enumerate() {
            let y = bounds
                || init.get(i).is_some_and(|o| self.dep(o))
                || yields.get(i).is_some_and(|o| self.dep(o));
            if y {
                self.td.insert(a);
                self.td.extend(od.results.get(i).copied());
            }
        }
        self.region(body, bounds);
    }

    /// An `if` whose arms run under `div` (enclosing control or its own condition).
    fn if_op(&mut self, op: Op, div: bool) {
        let k = self.k;
        let od = &k.ops[op];
        for &arm in &od.regions {
            self.region(arm, div);
        }
        let arms: Vec<&[Operand]> = od.regions.iter().map(|&r| yielded(k, r)).collect();
        for (i, &r) in od.results.iter().enumerate() {
            if div || arms.iter().any(|ys| ys.get(i).is_some_and(|o| self.dep(o))) {
                self.td.insert(r);
            }
        }
    }

    fn while_op(&mut self, op: Op, div: bool) {
        let k = self.k;
        let od = &k.ops[op];
        let OpKind::While { init } = &od.kind else {
            return;
        };
        let (cr, br) = (od.regions[0], od.regions[1]);
        let cond_dep = div || while_condition(k, cr).is_none_or(|c| self.dep(&c));
        let yields = yielded(k, br);
        for (i, o) in init.iter().enumerate() {
            if cond_dep || self.dep(o) || yields.get(i).is_some_and(|y| self.dep(y)) {
                let carried = [
                    k.region_args(cr).get(i),
                    k.region_args(br).get(i),
                    od.results.get(i),
                ];
                self.td.extend(carried.into_iter().flatten().copied());
            }
        }
        self.region(cr, div);
        self.region(br, cond_dep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::parse_kernel;

    /// The named values of `src`'s kernel that are thread-dependent, sorted.
    fn td_names(src: &str, loads: Loads) -> Vec<String> {
        let k = parse_kernel(src).expect("parses");
        assert!(crate::verify::verify(&k).is_empty());
        let td = thread_dependent(&k, loads);
        let mut names: Vec<String> = td.iter().map(|&v| k.value_name(v).to_string()).collect();
        names.sort();
        names
    }

    #[test]
    fn loop_carried_values_follow_what_is_yielded() {
        let src = "kernel @k() block(64) {\n %t = tid.x\n %r = for %i = 0 to 4 step 1 iter(%a = 0) {\n %b = add %a, %t\n yield %b\n }\n %u = for %j = 0 to 4 step 1 iter(%c = 0) {\n %d = add %c, 1\n yield %d\n }\n}";
        assert_eq!(td_names(src, Loads::ByIndex), ["a", "b", "r", "t"]);
    }

    #[test]
    fn a_loop_with_thread_dependent_bounds_makes_its_results_thread_dependent() {
        // Threads that run no iteration keep the initial value, the others the yielded one.
        let src = "kernel @k() block(64) {\n %t = tid.x\n %c = const 5\n %r = for %i = 0 to %t step 1 iter(%a = 0) {\n yield %c\n }\n}";
        assert_eq!(td_names(src, Loads::ByIndex), ["a", "i", "r", "t"]);
    }

    #[test]
    fn if_results_are_judged_one_by_one() {
        let src = "kernel @k(%n: i32) block(64) {\n %t = tid.x\n %p = cmp lt %n, 3\n %x, %y = if %p {\n yield %t, 1\n } else {\n yield 0, 2\n }\n}";
        assert_eq!(td_names(src, Loads::ByIndex), ["t", "x"]);
    }

    #[test]
    fn loads_follow_their_indices_and_views_or_are_always_thread_dependent() {
        let src = "kernel @k() block(64) {\n shared @s : i32[64, 64]\n %t = tid.x\n %a = load @s[0, 1]\n %b = load @s[%t, 1]\n %v = view @s[%t]\n %c = load %v[2]\n}";
        assert_eq!(td_names(src, Loads::ByIndex), ["b", "c", "t"]);
        assert_eq!(td_names(src, Loads::ThreadDependent), ["a", "b", "c", "t"]);
    }
}
