//! Control flow of the execution-error obligations (`check/proof_exec.rs`): `for` loops
//! (concrete first iterations, then one pass for every later iteration with invariant
//! intervals), `if` (one arm, both arms joined, or threads split), `while` (one pass for
//! every iteration). The module doc of `proof_exec` gives the argument; complexity
//! O(concrete iterations x body) per loop, plus one invariant check per loop.

use std::rc::Rc;

use super::{BUDGET, Eval, KNOWN_ITERS, MAY, Mask, NOT, Obligation, SYMBOLIC_ITERS};
use crate::check::exec_values::{Abs, Iv, TOP};
use crate::ir::*;

/// The bounds of one thread's trip count, from its `lo`, `hi` and `step` intervals.
fn trips(lo: Iv, hi: Iv, step: Iv) -> (u64, u64) {
    let count = |span: i64, st: i64| {
        if span <= 0 {
            0
        } else {
            (span as u64).div_ceil(st.max(1) as u64)
        }
    };
    if step.lo <= 0 {
        return (count(hi.lo - lo.hi, step.hi.max(1)), u64::MAX);
    }
    (count(hi.lo - lo.hi, step.hi), count(hi.hi - lo.lo, step.lo))
}

/// Union (`or`) or intersection of two per-buffer bitsets, into `a`.
fn merge(a: &mut [Vec<u64>], b: &[Vec<u64>], union: bool) {
    for (x, y) in a.iter_mut().zip(b) {
        for (p, q) in x.iter_mut().zip(y) {
            *p = if union { *p | *q } else { *p & *q };
        }
    }
}

impl Eval<'_> {
    pub(super) fn for_loop(&mut self, op: Op, mask: &Mask) {
        let k = self.k;
        let od = &k.ops[op];
        let OpKind::For { lo, hi, step, init } = &od.kind else {
            return;
        };
        let (lo, hi, step) = (self.operand(lo), self.operand(hi), self.operand(step));
        let n = self.n;
        if let Some(t) = (0..n).find(|&t| mask[t] != NOT && step.at(t).lo <= 0) {
            let s = step.at(t);
            self.not_shown(Obligation::Divisor, op, || {
                format!("loop step in [{}, {}] (thread {t})", s.lo, s.hi)
            });
        }
        let tr: Vec<(u64, u64)> = (0..n)
            .map(|t| trips(lo.at(t), hi.at(t), step.at(t)))
            .collect();
        let live = || (0..n).filter(|&t| mask[t] != NOT);
        let min_all = live().map(|t| tr[t].0).min().unwrap_or(0);
        let max_all = live().map(|t| tr[t].1).max().unwrap_or(0);
        let uniform = lo.uniform() && hi.uniform() && step.uniform();
        let cap = if uniform && min_all == max_all {
            KNOWN_ITERS
        } else {
            SYMBOLIC_ITERS
        };
        let stepped = live().all(|t| step.at(t).lo > 0);
        let conc = if self.dry || !stepped { 0 } else { max_all.min(cap) };
        let body = od.regions[0];
        let args = k.region_args(body).to_vec();
        let mut carried: Vec<Abs> = init.iter().map(|o| self.operand(o)).collect();
        let mut seen = carried.clone();
        let mut snapshot = None;
        let mut done = 0;
        while done < conc && self.work <= BUDGET {
            if uniform && done == min_all {
                snapshot = Some(self.init.clone());
            }
            let j = done as i128;
            let iv = Abs::map(&[&lo, &step], n, |v| {
                Iv::fit(v[0].lo as i128 + j * v[1].lo as i128, v[0].hi as i128 + j * v[1].hi as i128)
            });
            let mj: Mask = if uniform {
                mask.clone()
            } else {
                Rc::new((0..n).map(|t| iteration_mask(mask[t], tr[t], done)).collect())
            };
            self.bind(&args, iv, &carried);
            let y = self.region(body, &mj);
            carried = fit_yield(y, carried.len());
            seen = seen.iter().zip(&carried).map(|(a, b)| a.join(b, n)).collect();
            done += 1;
        }
        let results = if max_all > done {
            self.later_iterations(op, (&lo, &hi, &step), done, seen, mask, uniform)
        } else {
            seen
        };
        if let Some(s) = snapshot {
            self.init = s;
        }
        for (r, a) in od.results.iter().zip(results) {
            self.set(*r, a);
        }
    }

    fn bind(&mut self, args: &[Value], iv: Abs, carried: &[Abs]) {
        if let Some(&a) = args.first() {
            self.set(a, iv);
        }
        for (a, c) in args.iter().skip(1).zip(carried) {
            self.set(*a, c.clone());
        }
    }

    /// One pass for every iteration from `done` on: the induction variable's remaining
    /// interval, each iteration argument's invariant; writes count within the pass only.
    /// Returns the loop results' intervals.
    fn later_iterations(
        &mut self,
        op: Op,
        (lo, hi, step): (&Abs, &Abs, &Abs),
        done: u64,
        seen: Vec<Abs>,
        mask: &Mask,
        uniform: bool,
    ) -> Vec<Abs> {
        let n = self.n;
        let body = self.k.ops[op].regions[0];
        let args = self.k.region_args(body).to_vec();
        let j = done as i128;
        let iv = Abs::map(&[lo, hi, step], n, |v| {
            let first = v[0].lo as i128 + j * v[2].lo.max(1) as i128;
            Iv::fit(first, (v[1].hi as i128 - 1).max(first))
        });
        let inv = self.invariant(body, &args, &iv, seen, mask);
        let gmask: Mask = if uniform {
            mask.clone()
        } else {
            Rc::new(mask.iter().map(|&m| m.min(MAY)).collect())
        };
        let before = self.init.clone();
        self.bind(&args, iv, &inv);
        self.region(body, &gmask);
        self.init = before;
        inv
    }

    /// Intervals of the iteration arguments that one iteration preserves: the hull of the
    /// values seen, checked by a dry pass; where it is not preserved, the recognized
    /// periodic value's range (`ir::ranges`), else every `i32`, checked again.
    fn invariant(
        &mut self,
        body: Region,
        args: &[Value],
        iv: &Abs,
        seen: Vec<Abs>,
        mask: &Mask,
    ) -> Vec<Abs> {
        let n = self.n;
        let mut cand = seen;
        if cand.is_empty() {
            return cand;
        }
        for round in 0..3 {
            let dry = std::mem::replace(&mut self.dry, true);
            self.bind(args, iv.clone(), &cand);
            let y = self.region(body, mask);
            self.dry = dry;
            let y = fit_yield(y, cand.len());
            let mut stable = true;
            for (i, (c, y)) in cand.iter_mut().zip(&y).enumerate() {
                let kept = (0..n).all(|t| y.at(t).within(c.at(t))) && (!c.uniform() || y.uniform());
                if !kept {
                    stable = false;
                    let a = args[i + 1];
                    *c = match self.ranges.inductions.get(a) {
                        Some(_) if round == 0 => {
                            let r = self.ranges.range(a);
                            Abs::Uni(Iv::fit(r.lo, r.hi))
                        }
                        _ => Abs::TOP,
                    };
                }
            }
            if stable {
                return cand;
            }
        }
        cand.iter().map(|_| Abs::TOP).collect()
    }

    pub(super) fn if_op(&mut self, op: Op, cond: &Operand, mask: &Mask) {
        let k = self.k;
        let od = &k.ops[op];
        let c = self.operand(cond);
        let n = self.n;
        let (then, els) = (od.regions.first().copied(), od.regions.get(1).copied());
        let nres = od.results.len();
        let arm = |e: &mut Self, r: Option<Region>, m: &Mask| match r {
            Some(r) => fit_yield(e.region(r, m), nres),
            None => vec![Abs::TOP; nres],
        };
        let results: Vec<Abs> = match c {
            Abs::Uni(i) if i.is_point() => {
                let r = if i.lo != 0 { then } else { els };
                arm(self, r, mask)
            }
            Abs::Uni(_) => {
                let before = self.init.clone();
                let y1 = arm(self, then, mask);
                let after_then = std::mem::replace(&mut self.init, before);
                let y2 = arm(self, els, mask);
                merge(&mut self.init, &after_then, false);
                y1.iter().zip(&y2).map(|(a, b)| a.join(b, n)).collect()
            }
            _ => {
                let side = |want: i64| -> Mask {
                    Rc::new(
                        (0..n)
                            .map(|t| match c.at(t) {
                                i if i.is_point() && i.lo == want => mask[t],
                                i if i.is_point() => NOT,
                                _ => mask[t].min(MAY),
                            })
                            .collect(),
                    )
                };
                let (mt, me) = (side(1), side(0));
                let before = self.init.clone();
                let y1 = arm(self, then, &mt);
                let after_then = std::mem::replace(&mut self.init, before);
                let y2 = arm(self, els, &me);
                merge(&mut self.init, &after_then, true);
                y1.iter()
                    .zip(&y2)
                    .map(|(a, b)| {
                        Abs::map(&[&c, a, b], n, |v| super::pick(v[0], v[1], v[2]))
                    })
                    .collect()
            }
        };
        for (r, a) in od.results.iter().zip(results) {
            self.set(*r, a);
        }
    }

    /// `while`: its regions once for every iteration, arguments unknown; writes count within
    /// the pass only.
    pub(super) fn while_loop(&mut self, op: Op, _init: &[Operand], mask: &Mask) {
        let k = self.k;
        let od = &k.ops[op];
        let gmask: Mask = Rc::new(mask.iter().map(|&m| m.min(MAY)).collect());
        let before = self.init.clone();
        for &r in &od.regions {
            for &a in k.region_args(r) {
                self.set(a, Abs::TOP);
            }
            self.region(r, &gmask);
        }
        self.init = before;
        for &r in &od.results {
            self.set(r, Abs::TOP);
        }
    }
}

/// A thread's mask in iteration `j` of a loop whose trip count differs per thread: must
/// while below its least trip count, may while below its greatest.
fn iteration_mask(m: u8, (lo, hi): (u64, u64), j: u64) -> u8 {
    if m == NOT || j >= hi {
        NOT
    } else if j < lo {
        m
    } else {
        MAY
    }
}

/// `yield` operands as `n` values (every `i32` where a region yields none).
fn fit_yield(y: Vec<Abs>, n: usize) -> Vec<Abs> {
    if y.len() == n {
        y
    } else {
        vec![Abs::Var(TOP); n]
    }
}
