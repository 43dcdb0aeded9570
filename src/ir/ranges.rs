//! Value ranges: for every `i32` value, an interval that holds its exact integer value, and
//! whether its `i32` value is that exact value (no wrap-around can have happened).
//!
//! Why: periodic reasoning (`rem %x, 3` repeats every 3 iterations when `%x` is a polynomial
//! in the loop variable) holds over the integers, but `i32` arithmetic wraps (docs/ir.md), and
//! `(x mod 2^32) mod 3` is not periodic. It stays exact when the divisor is a power of two
//! (it divides 2^32), or when the value provably never leaves the `i32` range — this module
//! decides the latter.
//!
//! The lattice per value is an interval `[lo, hi]` over the integers (`i128`, saturated far
//! outside `i32`). Ring ops (`add`, `sub`, `mul`, `neg`, `shl` by a constant) compose the exact
//! intervals of their operands: their *exact* value is the integer expression, and their `i32`
//! value is congruent to it mod 2^32, so when the exact interval lies within `i32` the two are
//! equal ([`Ranges::exact`]). Every other op produces a fresh value whose interval is derived
//! from its operands' `i32` ranges. Induction variables take `[lo, hi - 1]` of their bounds;
//! scalar parameters their declared range (`%n: i32 in [1, 4096]`) or all of `i32`; thread ids
//! lie in `0..1024` (the verifier's per-block limit on every target).
//!
//! It lives in `ir` beside the effects table because it states facts of the IR's arithmetic
//! semantics that both sides rely on: the placement's footprints and the checker's static
//! proof (which otherwise shares no analysis code with placement).
//! Recognized periodic iteration values (`ir::induction`) take the hull of their values;
//! affine counters the hull of their values up to the loop's last iteration.
//! Complexity: one pass over the ops in program order, O(ops), after induction recognition.

use crate::ir::*;

/// A closed integer interval.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub lo: i128,
    pub hi: i128,
}

const I32: Interval = Interval {
    lo: i32::MIN as i128,
    hi: i32::MAX as i128,
};
const SAT: i128 = 1 << 100;

impl Interval {
    pub fn point(c: i64) -> Interval {
        Interval {
            lo: c as i128,
            hi: c as i128,
        }
    }

    fn new(lo: i128, hi: i128) -> Interval {
        Interval {
            lo: lo.clamp(-SAT, SAT),
            hi: hi.clamp(-SAT, SAT),
        }
    }

    /// Whether every value lies in the `i32` range.
    pub fn fits_i32(self) -> bool {
        self.lo >= I32.lo && self.hi <= I32.hi
    }

    fn hull(self, o: Interval) -> Interval {
        Interval::new(self.lo.min(o.lo), self.hi.max(o.hi))
    }

    /// The product's interval. Bounds lie within ±2^100, so a product may leave `i128`: it
    /// saturates (with the product's sign), then clamps to ±2^100 like every bound.
    fn mul(self, o: Interval) -> Interval {
        let p = [
            self.lo.saturating_mul(o.lo),
            self.lo.saturating_mul(o.hi),
            self.hi.saturating_mul(o.lo),
            self.hi.saturating_mul(o.hi),
        ];
        Interval::new(*p.iter().min().unwrap(), *p.iter().max().unwrap())
    }
}

/// The exact interval and exactness of every value of one kernel.
pub struct Ranges {
    exact_range: SecondaryMap<Value, Interval>,
    /// The recognized periodic iteration values (`ir::induction`); their range is the hull
    /// of the values they take.
    pub inductions: crate::ir::induction::Inductions,
}

impl Ranges {
    /// Computes the ranges of every value of `k`.
    pub fn new(k: &Kernel) -> Ranges {
        let mut r = Ranges {
            exact_range: SecondaryMap::with_default(I32),
            inductions: crate::ir::induction::Inductions::new(k),
        };
        for (i, p) in k.params.iter().enumerate() {
            if let Param::Scalar(v) = p {
                let _ = i;
                if let Some((lo, hi)) = *k.param_ranges.get(*v) {
                    r.exact_range.set(*v, Interval::new(lo as i128, hi as i128));
                }
            }
        }
        k.walk(|op| r.op(k, op));
        r
    }

    /// The `i32` value's interval.
    pub fn range(&self, v: Value) -> Interval {
        let e = *self.exact_range.get(v);
        if e.fits_i32() { e } else { I32 }
    }

    /// Whether the `i32` value of `v` always equals the exact integer value of its ring
    /// expression (no wrap-around), so integer reasoning about it is sound.
    pub fn exact(&self, v: Value) -> bool {
        self.exact_range.get(v).fits_i32()
    }

    fn operand(&self, o: &Operand) -> Interval {
        match o {
            Operand::Imm(Scalar::I32(c)) => Interval::point(*c as i64),
            Operand::Imm(Scalar::I1(b)) => Interval::point(*b as i64),
            Operand::Value(v) => self.range(*v),
            _ => I32,
        }
    }

    /// The exact interval of a ring operand (not clamped to `i32`).
    fn exact_operand(&self, o: &Operand) -> Interval {
        match o {
            Operand::Value(v) => *self.exact_range.get(*v),
            _ => self.operand(o),
        }
    }

    fn op(&mut self, k: &Kernel, op: Op) {
        let od = &k.ops[op];
        if let OpKind::For { lo, hi, .. } = &od.kind {
            let (l, h) = (self.operand(lo), self.operand(hi));
            let iv = Interval::new(l.lo, (h.hi - 1).max(l.lo));
            if let Some(&body) = od.regions.first()
                && let Some(&v) = k.region_args(body).first()
            {
                self.exact_range.set(v, iv);
            }
            for &a in od.regions.first().map_or(&[][..], |&b| &k.region_args(b)[1..]) {
                if let Some(ind) = self.inductions.get(a) {
                    let all = || ind.seq.iter().chain(ind.pre.iter()).copied();
                    let lo = all().min().unwrap_or(0) as i128;
                    let hi = all().max().unwrap_or(0) as i128;
                    // A drifting counter moves by `drift` per period up to the last
                    // iteration the loop's bounds allow (its exact integer value; the `i32`
                    // value equals it while this fits).
                    let periods = (iv.hi - ind.lo as i128).max(0) / ind.iv_period() as i128;
                    let moved = ind.drift as i128 * periods;
                    let r = Interval::new(lo.min(lo + moved), hi.max(hi + moved));
                    self.exact_range.set(a, r);
                }
            }
            return;
        }
        let Some(&res) = od.results.first() else {
            return;
        };
        if k.values[res].ty != ScalarType::I32 && k.values[res].ty != ScalarType::I1 {
            return;
        }
        let r = self.result(k, &od.kind);
        self.exact_range.set(res, r);
    }

    fn result(&self, k: &Kernel, kind: &OpKind) -> Interval {
        let konst = |o: &Operand| {
            let i = self.operand(o);
            (i.lo == i.hi).then_some(i.lo)
        };
        match kind {
            OpKind::Const(c) => Interval::point(c.as_i64()),
            OpKind::Special(s) => special(k, *s),
            OpKind::Cmp(..) | OpKind::InGroup(_) => Interval::new(0, 1),
            OpKind::Select(_, x, y) => self.operand(x).hull(self.operand(y)),
            OpKind::Unary(UnOp::Neg, x) => {
                let e = self.exact_operand(x);
                Interval::new(-e.hi, -e.lo)
            }
            OpKind::Unary(UnOp::Abs, x) => {
                let i = self.operand(x);
                let m = i.lo.abs().max(i.hi.abs());
                if i.lo >= 0 { i } else { Interval::new(0, m) }
            }
            OpKind::Binary(b, x, y) => self.binary(*b, x, y, konst(y)),
            _ => I32,
        }
    }

    fn binary(&self, b: BinOp, x: &Operand, y: &Operand, cy: Option<i128>) -> Interval {
        let (ex, ey) = (self.exact_operand(x), self.exact_operand(y));
        let (rx, ry) = (self.operand(x), self.operand(y));
        match b {
            BinOp::Add => Interval::new(ex.lo + ey.lo, ex.hi + ey.hi),
            BinOp::Sub => Interval::new(ex.lo - ey.hi, ex.hi - ey.lo),
            BinOp::Mul => ex.mul(ey),
            BinOp::Shl => match cy {
                Some(s) => ex.mul(Interval::point(1i64 << (s & 31))),
                None => Interval::new(-SAT, SAT),
            },
            BinOp::Div => match cy {
                Some(c) if c > 0 => Interval::new(rx.lo.div_euclid(c), rx.hi.div_euclid(c)),
                _ => I32,
            },
            BinOp::Rem => match cy {
                Some(c) if c > 0 && rx.lo >= 0 && rx.hi < c => rx,
                Some(c) if c > 0 => Interval::new(0, c - 1),
                Some(c) if c < 0 => Interval::new(c + 1, 0),
                _ => I32,
            },
            BinOp::Min => Interval::new(rx.lo.min(ry.lo), rx.hi.min(ry.hi)),
            BinOp::Max => Interval::new(rx.lo.max(ry.lo), rx.hi.max(ry.hi)),
            BinOp::And if rx.lo >= 0 || ry.lo >= 0 => {
                let m = if rx.lo >= 0 && ry.lo >= 0 {
                    rx.hi.min(ry.hi)
                } else if rx.lo >= 0 {
                    rx.hi
                } else {
                    ry.hi
                };
                Interval::new(0, m)
            }
            BinOp::Or | BinOp::Xor if rx.lo >= 0 && ry.lo >= 0 => {
                let m = rx.hi.max(ry.hi);
                let bits = 128 - m.leading_zeros();
                Interval::new(0, (1i128 << bits) - 1)
            }
            BinOp::Shr => match cy {
                Some(s) => Interval::new(rx.lo >> (s & 31), rx.hi >> (s & 31)),
                None if rx.lo >= 0 => Interval::new(0, rx.hi),
                None => rx,
            },
            _ => I32,
        }
    }
}

/// Ranges of thread and block ids: ids lie below their dimension; a block has at most 1024
/// threads on every target (the verifier refuses more), a grid at most 2^31 - 1 blocks per
/// dimension.
fn special(k: &Kernel, s: Special) -> Interval {
    let block = |d: u8| (k.block[d.min(2) as usize] as i128).clamp(1, 1024);
    let grid = |d: u8| k.grid_dim(d).map_or((1, i32::MAX as i128), |g| (g as i128, g as i128));
    match s {
        // The checker may run a kernel with an overridden block size: stay within the limit.
        Special::Tid(_) | Special::LinearTid | Special::Warp => Interval::new(0, 1023),
        Special::Lane => Interval::new(0, 63),
        Special::BlockDim(d) => Interval::new(1, block(d).max(1024)),
        Special::GridDim(d) => Interval::new(grid(d).0, grid(d).1),
        Special::Bid(_) => Interval::new(0, i32::MAX as i128),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Products of saturated bounds (2^100 · 2^100 leaves `i128`) saturate with their sign
    /// instead of wrapping (a wrapped bound could land inside `i32` and make a value "exact").
    #[test]
    fn products_of_saturated_bounds_stay_saturated() {
        let big = Interval::new(-SAT, SAT);
        let p = big.mul(big);
        assert_eq!((p.lo, p.hi), (-SAT, SAT));
        let pos = Interval::new(SAT, SAT);
        assert_eq!(pos.mul(pos), Interval::new(SAT, SAT));
        assert_eq!(pos.mul(Interval::new(-SAT, -SAT)), Interval::new(-SAT, -SAT));
        assert!(!big.mul(big).fits_i32());
    }

    #[test]
    fn multiplication_by_a_large_constant_is_not_exact() {
        let src = "kernel @k(%n: i32 = 8) block(4) {\n  for %k = 0 to %n step 1 {\n    \
                   %m = mul %k, -2147483646\n    %s = rem %m, 3\n    %a = add %k, 2\n  }\n}\n";
        let k = crate::reader::parse(src).unwrap().kernels.remove(0);
        let v = |n: &str| {
            k.values
                .iter()
                .find(|(v, _)| {
                    k.value_name(*v).trim_start_matches('%') == n.trim_start_matches('%')
                })
                .unwrap()
                .0
        };
        let r = Ranges::new(&k);
        assert!(!r.exact(v("%m")));
        assert!(r.exact(v("%s")));
        assert_eq!(r.range(v("%s")), Interval::new(0, 2));
        // k < n <= i32::MAX, so k + 2 may exceed i32::MAX on the last iterations.
        assert!(!r.exact(v("%a")));
    }

    #[test]
    fn a_declared_parameter_range_bounds_the_induction_variable() {
        let src = "kernel @k(%n: i32 in [1, 4096] = 8) block(4) {\n  for %k = 0 to %n step 1 {\n    \
                   %a = add %k, 2\n    %m = mul %a, 1000\n  }\n}\n";
        let k = crate::reader::parse(src).unwrap().kernels.remove(0);
        let r = Ranges::new(&k);
        let a = k
            .values
            .iter()
            .find(|(v, _)| k.value_name(*v).trim_start_matches('%') == "m")
            .unwrap()
            .0;
        assert!(r.exact(a));
        assert_eq!(r.range(a), Interval::new(2000, 4097000));
    }
}
