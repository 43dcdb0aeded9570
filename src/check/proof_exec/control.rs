//! Control flow of the execution-error obligations (`check/proof_exec.rs`): `for` loops
//! (concrete first iterations, then one pass for every later iteration with invariant
//! intervals), `if` (one arm, both arms joined, or threads split), `while` (one pass for
//! every iteration). The module doc of `proof_exec` gives the argument; complexity
//! O(concrete iterations x body) per loop, plus one invariant check per loop.

use std::rc::Rc;

use super::{Eval, KNOWN_ITERS, MAY, Mask, NOT, Obligation, SYMBOLIC_ITERS};
use crate::check::exec_values::{Abs, Iv, TOP};
use crate::ir::*;

/// Per buffer, a bitset of elements.
type Bits = Vec<Vec<u64>>;

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
        let OpKind::For { lo, hi, step, .. } = &od.kind else {
            return;
        };
        let hi_op = *hi;
        // A loop with the same bounds earlier in this region (a sibling) ran its iterations
        // too when this one runs one: what it initialized then holds here.
        let key = (k.op_region(op), [*lo, *hi, *step]);
        let sibling = self.siblings.iter().position(|(kk, _)| *kk == key);
        let sibling = sibling.map(|i| self.siblings.swap_remove(i).1);
        let (lo, hi, step) = (self.operand(lo), self.operand(hi), self.operand(step));
        let n = self.n;
        if let Some(t) = (0..n).find(|&t| mask[t] != NOT && step.at(t).lo <= 0) {
            let s = step.at(t);
            self.not_shown(Obligation::Divisor, op, || {
                format!("loop step in [{}, {}] (thread {t})", s.lo, s.hi)
            });
        }
        let mut cases = self.trip_cases(hi_op, (&lo, &hi, &step), mask);
        if cases.is_some() && self.work > self.limit / 8 {
            // Past 1/8 of the budget loops are not split: a cut the verdict names.
            cases = None;
            self.cut.get_or_insert(op);
        }
        let Some((v, cases)) = cases else {
            let results = self.for_case(op, (&lo, &hi, &step), mask);
            return self.set_results(op, results);
        };
        // One case per trip count below the cap, one for the rest: `hi` is then refined,
        // so conditions on it in the body (`%k + 2 < %kt`) are decided in each case.
        let entry = self.init.clone();
        let saved = self.vals[v.index()].clone();
        let (mut after, mut ran): (Option<Bits>, Option<Bits>) = (None, None);
        let mut results: Option<Vec<Abs>> = None;
        for c in cases {
            let runs = trips(lo.at(0), c, step.at(0)).0 >= 1;
            self.init = entry.clone();
            if let (true, Some(r)) = (runs, &sibling) {
                merge(&mut self.init, r, true);
            }
            self.set(v, Abs::Uni(c));
            let r = self.for_case(op, (&lo, &Abs::Uni(c), &step), mask);
            results = Some(match results {
                None => r,
                Some(p) => p.iter().zip(&r).map(|(a, b)| a.join(b, n)).collect(),
            });
            for (acc, yes) in [(&mut after, true), (&mut ran, runs)] {
                match acc.as_mut() {
                    _ if !yes => {}
                    None => *acc = Some(self.init.clone()),
                    Some(a) => merge(a, &self.init, false),
                }
            }
        }
        self.set(v, saved);
        self.init = after.unwrap_or(entry);
        if let Some(r) = ran {
            self.siblings.push((key, r));
        }
        self.set_results(op, results.unwrap_or_default());
    }

    fn set_results(&mut self, op: Op, results: Vec<Abs>) {
        for (r, a) in self.k.ops[op].results.iter().zip(results) {
            self.set(*r, a);
        }
    }

    /// The cases of a uniform loop whose upper bound is a value and whose trip count is not
    /// one number: that value's interval for each trip count `T` below
    /// [`SYMBOLIC_ITERS`], and for every larger one. None when it does not split.
    fn trip_cases(
        &self,
        hi_op: Operand,
        (lo, hi, step): (&Abs, &Abs, &Abs),
        mask: &Mask,
    ) -> Option<(Value, Vec<Iv>)> {
        let v = hi_op.value()?;
        let (l, h, s) = (lo.at(0), hi.at(0), step.at(0));
        let all = lo.uniform() && hi.uniform() && step.uniform();
        if !self.split || !all || !l.is_point() || !s.is_point() || s.lo <= 0 || self.dry {
            return None;
        }
        if !mask.iter().any(|&m| m != NOT) {
            return None;
        }
        let (tmin, tmax) = trips(l, h, s);
        if tmin == tmax {
            return None;
        }
        let at = |t: u64| l.lo as i128 + t as i128 * s.lo as i128;
        // `hi` within [a, b] and within its interval; None when empty.
        let meet = |a: i128, b: i128| {
            let (a, b) = (a.max(h.lo as i128), b.min(h.hi as i128));
            (a <= b).then(|| Iv::fit(a, b))
        };
        let mut out = Vec::new();
        let last = if tmax <= SYMBOLIC_ITERS { tmax + 1 } else { SYMBOLIC_ITERS };
        for t in tmin..last {
            // T trips: hi <= lo when T = 0, else lo + (T-1)·step < hi <= lo + T·step.
            let c = if t == 0 {
                meet(h.lo as i128, l.lo as i128)
            } else {
                meet(at(t - 1) + 1, at(t))
            };
            out.extend(c);
        }
        if tmax > SYMBOLIC_ITERS {
            out.extend(meet(at(SYMBOLIC_ITERS - 1) + 1, h.hi as i128));
        }
        Some((v, out))
    }

    /// One evaluation of a `for` with these bound intervals; its results' intervals.
    fn for_case(&mut self, op: Op, (lo, hi, step): (&Abs, &Abs, &Abs), mask: &Mask) -> Vec<Abs> {
        let k = self.k;
        let od = &k.ops[op];
        let OpKind::For { init, .. } = &od.kind else {
            return Vec::new();
        };
        let (lo, hi, step) = (lo.clone(), hi.clone(), step.clone());
        let n = self.n;
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
        while done < conc && self.work <= self.limit / 2 && self.exhausted.is_none() {
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
        if done < conc && self.cut.is_none() {
            self.cut = Some(op);
        }
        let mut results = if max_all > done {
            self.later_iterations(op, (&lo, &hi, &step), done, seen, mask, uniform)
        } else {
            seen
        };
        if !uniform {
            // Threads may run different numbers of iterations: a result the same in every
            // thread of one iteration is not the same across threads after the loop.
            results = results.into_iter().map(Abs::not_uniform).collect();
        }
        if let Some(s) = snapshot {
            self.init = s;
        }
        results
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
    /// Returns the loop results' intervals: the invariant joined with the pass's yield.
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
        let y = self.region(body, &gmask);
        self.init = before;
        // The results are the last iteration's yield: the invariant holds at the start of
        // an iteration, so the yield of the pass (a trusted counter's last increment) joins it.
        let y = fit_yield(y, inv.len());
        inv.iter().zip(&y).map(|(a, b)| a.join(b, n)).collect()
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
        // Ranges of recognized periodic values hold for every iteration: never widened.
        let mut trusted = vec![false; cand.len()];
        for round in 0..3 {
            let dry = std::mem::replace(&mut self.dry, true);
            self.bind(args, iv.clone(), &cand);
            let y = self.region(body, mask);
            self.dry = dry;
            let y = fit_yield(y, cand.len());
            let mut stable = true;
            for (i, (c, y)) in cand.iter_mut().zip(&y).enumerate() {
                let kept = (0..n).all(|t| y.at(t).within(c.at(t))) && (!c.uniform() || y.uniform());
                if kept || trusted[i] {
                    continue;
                }
                stable = false;
                let a = args[i + 1];
                *c = match self.ranges.inductions.get(a) {
                    Some(_) if round == 0 => {
                        trusted[i] = true;
                        let r = self.ranges.range(a);
                        Abs::Uni(Iv::fit(r.lo, r.hi))
                    }
                    _ => Abs::TOP,
                };
            }
            if stable {
                return cand;
            }
        }
        cand.iter()
            .zip(&trusted)
            .map(|(c, &t)| if t { c.clone() } else { Abs::TOP })
            .collect()
    }

    pub(super) fn if_op(&mut self, op: Op, cond: &Operand, mask: &Mask) {
        let k = self.k;
        let od = &k.ops[op];
        let c = self.operand(cond);
        let n = self.n;
        let (then, els) = (od.regions.first().copied(), od.regions.get(1).copied());
        let nres = od.results.len();
        let arm = |e: &mut Self, r: Option<Region>, m: &Mask| match r {
            Some(r) => {
                // Within the arm the condition has its outcome: narrow what it compares.
                let saved = e.narrow_for_arm(cond, Some(r) == then);
                let y = fit_yield(e.region(r, m), nres);
                for (v, a) in saved {
                    e.set(v, a);
                }
                y
            }
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
                let (mt, me) = if self.wide {
                    self.wide_arms(cond, mask)
                } else {
                    (side(1), side(0))
                };
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

    /// When `cond` is an integer comparison, narrows its value operands to the intervals in
    /// which it has outcome `holds` (thread by thread; a thread for which it cannot keeps
    /// its interval, it does not run the arm). Returns the previous values.
    fn narrow_for_arm(&mut self, cond: &Operand, holds: bool) -> Vec<(Value, Abs)> {
        let k = self.k;
        let Some(ValueDef::Result(op, 0)) = cond.value().map(|v| k.values[v].def) else {
            return Vec::new();
        };
        let OpKind::Cmp(p, l, r) = &k.ops[op].kind else {
            return Vec::new();
        };
        if !(self.is_int(l) && self.is_int(r)) {
            return Vec::new();
        }
        let (lv, rv) = (self.operand(l), self.operand(r));
        let mut saved = Vec::new();
        for (side, o) in [(1u8, l), (2, r)] {
            let Some(v) = o.value() else { continue };
            if side == 2 && Some(v) == l.value() {
                continue;
            }
            let cur = self.vals[v.index()].clone();
            let nv = Abs::map(&[&cur, &lv, &rv], self.n, |x| {
                crate::check::exec_values::narrow(*p, holds, side, x[0], x[1], x[2]).unwrap_or(x[0])
            });
            saved.push((v, cur));
            self.set(v, nv);
        }
        saved
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
