//! The block-wide pass of the execution-error obligations (`check/proof_exec.rs`): the walk
//! with one abstract thread standing for every thread of the block, and the per-thread
//! refinement it asks for where that abstract thread is too coarse.
//!
//! What it computes. In the block-wide walk (`Eval::wide`) every thread id is its interval
//! over the block (`%t` is `[0, T)`, `Abs::Var`), a value is one interval that holds the value
//! of every thread, and the mask is one entry for all threads: `MUST` (every thread executes
//! the op), `SOME` (at least one thread does, the others may), `MAY` or `NOT`. Uniform values
//! are evaluated once instead of once per thread. An index whose interval is in range is in
//! range for every thread; a divisor interval without 0 is a non-zero divisor in every
//! thread; a read whose element interval is initialized reads initialized elements in every
//! thread. Where the interval is not enough, [`Eval::at_thread`] recomputes the operand for
//! one thread `t` from its backward slice of value ops (thread ids, `in_group`, binary,
//! unary, comparison and `select` ops), each node met with its block-wide interval; leaves
//! (parameters, region arguments, memory results) keep their block-wide interval. So an
//! obligation is checked thread by thread only where the hull fails, and a write whose
//! element differs per thread initializes each thread's element when every thread executes
//! it (`cp_async @a[%slot, %r, %c]` with `%r, %c` from `%t + 64 * %i`).
//!
//! Invariants (soundness): every interval of the walk holds the value of every thread that
//! executes the op, for every trip and parameter value in range; the recomputation for
//! thread `t` applies the same interval functions (`exec_values`) to operands that hold
//! `t`'s values, so it holds `t`'s value; meeting it with the block-wide interval (narrowed
//! in an `if` arm for the threads that take the arm) keeps that, and an empty meet means `t`
//! does not execute the op. SSA dominance makes the stored interval of every slice node the
//! one of the current iteration. A write counts only when its executor is certain (`MUST`,
//! or `SOME` for one element the same in every thread and for a TMA/TDM issuer) and its view
//! offset is one number. Complexity: O(ops) per walk plus O(T x slice) per refined op;
//! writes refined per thread are memoized by the slice's intervals.
//!
//! Reference: the per-thread walk it stands in front of (docs/checker.md, "Execution
//! errors in the static proof", "The block-wide pass").

use std::rc::Rc;

use super::{Eval, MAY, MUST, Mask, NOT, SOME};
use crate::check::exec_values::{self as ev, Abs, Iv};
use crate::ir::*;

/// Deepest slice the per-thread recomputation follows; deeper operands keep their interval.
const DEPTH: u8 = 24;

impl Eval<'_> {
    /// Operand `o`'s interval in thread `t` (`None`: `t` does not execute the op).
    pub(super) fn at_thread(&self, o: &Operand, t: usize) -> Option<Iv> {
        self.slice_at(o, t, DEPTH)
    }

    /// The slice's refinable node: `o`'s defining op when `o` is a value that is not
    /// uniform in the walk and the recomputation follows it (`depth` left).
    fn refinable(&self, o: &Operand, depth: u8) -> Option<Op> {
        let Operand::Value(v) = o else {
            return None;
        };
        let stored = &self.vals[v.index()];
        match self.k.values[*v].def {
            ValueDef::Result(op, 0) if !stored.uniform() && depth > 0 => Some(op),
            _ => None,
        }
    }

    /// Appends the block-wide interval (and whether it is uniform) of every node of `o`'s
    /// slice, in the order [`Self::slice_at`] visits them: the recomputation is a function
    /// of these, the memo key of a refined write.
    fn slice_key(&self, o: &Operand, depth: u8, key: &mut Vec<(Iv, bool)>) {
        let a = self.operand(o);
        key.push((a.at(0), a.uniform()));
        let Some(op) = self.refinable(o, depth) else {
            return;
        };
        let kind = &self.k.ops[op].kind;
        let xs: &[&Operand] = match kind {
            OpKind::Binary(_, x, y) | OpKind::Cmp(_, x, y) => &[x, y],
            OpKind::Unary(_, x) => &[x],
            OpKind::Select(c, x, y) => &[c, x, y],
            _ => &[],
        };
        for x in xs {
            self.slice_key(x, depth - 1, key);
        }
    }

    fn slice_at(&self, o: &Operand, t: usize, depth: u8) -> Option<Iv> {
        let s = self.operand(o).at(0);
        let (Some(op), Operand::Value(v)) = (self.refinable(o, depth), o) else {
            return Some(s);
        };
        let k = self.k;
        self.thread_work.set(self.thread_work.get() + 1);
        let i1 = k.values[*v].ty == ScalarType::I1;
        let rec = |x: &Operand| self.slice_at(x, t, depth - 1);
        let r = match &k.ops[op].kind {
            OpKind::Special(sp) => self.special_at(*sp, t),
            OpKind::InGroup(g) => {
                let gd = &k.groups[*g];
                Iv::point((gd.lo as usize..gd.hi as usize).contains(&t) as i64)
            }
            OpKind::Binary(b, x, y) => {
                let (x, y) = (rec(x)?, rec(y)?);
                if i1 {
                    ev::binary_i1(*b, x, y)
                } else {
                    ev::binary(*b, x, y)
                }
            }
            OpKind::Unary(u, x) => ev::unary(*u, rec(x)?, i1),
            OpKind::Cmp(p, x, y) if self.is_int(x) && self.is_int(y) => {
                let (x, y) = (rec(x)?, rec(y)?);
                ev::compare(*p, x, y)
            }
            OpKind::Select(c, x, y) => {
                let (c, x, y) = (rec(c)?, rec(x)?, rec(y)?);
                super::pick(c, x, y)
            }
            _ => return Some(s),
        };
        let (lo, hi) = (r.lo.max(s.lo), r.hi.min(s.hi));
        (lo <= hi).then_some(Iv { lo, hi })
    }

    /// A thread id's value in thread `t` (the per-thread walk's numbering).
    fn special_at(&self, s: Special, t: usize) -> Iv {
        let k = self.k;
        let (bx, by) = (k.block[0].max(1) as usize, k.block[1].max(1) as usize);
        let v = match s {
            Special::Tid(0) => t % bx,
            Special::Tid(1) => (t / bx) % by,
            Special::Tid(_) => t / (bx * by),
            Special::LinearTid => t,
            Special::Lane => t % self.warp,
            Special::Warp => t / self.warp,
            // Uniform specials are never refined (their interval is `Abs::Uni`).
            _ => return self.special(s).at(0),
        };
        Iv::point(v as i64)
    }

    /// A thread id as one interval over the block (a point when every thread has it).
    pub(super) fn special_wide(&self, s: Special) -> Abs {
        let ids = (0..self.threads).map(|t| self.special_at(s, t));
        let h = ids.reduce(Iv::hull).unwrap_or(Iv::point(0));
        if h.is_point() {
            Abs::Uni(h)
        } else {
            Abs::Var(h)
        }
    }

    /// `in_group` as one interval over the block.
    pub(super) fn in_group_wide(&self, g: Group) -> Abs {
        let gd = &self.k.groups[g];
        let (lo, hi) = (gd.lo as usize, (gd.hi as usize).min(self.threads));
        if lo == 0 && hi >= self.threads {
            Abs::Uni(Iv::point(1))
        } else if lo >= hi {
            Abs::Uni(Iv::point(0))
        } else {
            Abs::Var(ev::BOOL)
        }
    }

    /// Whether some thread that may execute has `o` (per thread) failing `ok`; the first
    /// such thread and its interval.
    pub(super) fn thread_fails(&self, o: &Operand, ok: impl Fn(Iv) -> bool) -> Option<(usize, Iv)> {
        (0..self.threads).find_map(|t| self.at_thread(o, t).filter(|&x| !ok(x)).map(|x| (t, x)))
    }

    /// Per thread, the element of a write of one element per thread: `off` plus the
    /// indices times the strides, where every index is one number in range (other threads
    /// are left out: their write initializes nothing known). Memoized by the index values,
    /// the dimensions and the intervals of every slice node: the recomputation reads
    /// nothing else (the slice's ops are those of the index values), so two ops writing
    /// through the same values share the entry.
    pub(super) fn thread_elements(
        &mut self,
        index: &[Operand],
        off: i128,
        dims: (&[u64], &[u64]),
    ) -> Rc<Vec<i128>> {
        let (shape, strides) = dims;
        let mut slice = vec![(Iv::point(off as i64), true)];
        for o in index {
            self.slice_key(o, DEPTH, &mut slice);
        }
        let roots = index.iter().map(|o| o.value()).collect();
        let key = (roots, shape.to_vec(), strides.to_vec(), slice);
        if let Some(r) = self.memo.get(&key) {
            return r.clone();
        }
        let mut out = Vec::new();
        for t in 0..self.threads {
            let mut e = off;
            for (d, o) in index.iter().enumerate() {
                match self.at_thread(o, t) {
                    Some(x) if x.is_point() && x.lo >= 0 && (x.lo as u64) < shape[d] => {
                        e += x.lo as i128 * strides[d] as i128;
                    }
                    _ => {
                        e = -1;
                        break;
                    }
                }
            }
            if e >= 0 {
                out.push(e);
            }
        }
        let r = Rc::new(out);
        self.memo.insert(key, r.clone());
        r
    }

    /// The masks of the arms of an `if` on a condition that differs per thread, in the
    /// block-wide walk: an arm no thread takes is `NOT`; one that every thread executing
    /// the `if` might take is `MAY`, or `SOME` when every thread executes the `if` and some
    /// thread's condition is known to choose it.
    pub(super) fn wide_arms(&self, cond: &Operand, mask: &Mask) -> (Mask, Mask) {
        let m = mask[0];
        let ivs: Vec<Option<Iv>> = (0..self.threads).map(|t| self.at_thread(cond, t)).collect();
        let arm = |want: i64| -> Mask {
            let takes = |x: &Option<Iv>| x.is_some_and(|x| x.contains(want));
            let sure = |x: &Option<Iv>| x.is_some_and(|x| x == Iv::point(want));
            let a = if m == NOT || !ivs.iter().any(takes) {
                NOT
            } else if ivs.iter().all(sure) {
                m
            } else if m == MUST && ivs.iter().any(sure) {
                SOME
            } else {
                m.min(MAY)
            };
            Rc::new(vec![a])
        };
        (arm(1), arm(0))
    }
}
