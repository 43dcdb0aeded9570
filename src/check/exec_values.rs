//! Per-thread integer intervals for the static proof's execution-error obligations
//! (`check/proof_exec.rs`): the abstract values the obligations evaluate a kernel with.
//!
//! What it computes: for an `i32`/`i1` op, an interval per thread that holds the value the
//! interpreter would compute in that thread, for every trip and parameter value the
//! intervals of the operands stand for. A value is [`Abs::Uni`] (one number for every
//! thread, known to lie in the interval), [`Abs::Var`] (possibly different per thread, each
//! in the interval) or [`Abs::Per`] (one interval per thread).
//!
//! Invariants: every interval lies within the `i32` range (an `i1` within `[0, 1]`); a ring
//! op whose exact result may leave `i32` wraps, so its result is the whole `i32` range;
//! points are computed with [`BinOp::eval_i32`], the interpreter's semantics (floor
//! `div`/`rem`, shifts by the low 5 bits). Complexity: O(1) per op and thread.

use std::rc::Rc;

use crate::ir::{BinOp, CmpPred, UnOp};

/// A closed interval of `i32` values (held as `i64`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Iv {
    pub lo: i64,
    pub hi: i64,
}

/// Every `i32` value.
pub(super) const TOP: Iv = Iv {
    lo: i32::MIN as i64,
    hi: i32::MAX as i64,
};
/// An `i1` whose value is not known.
pub(super) const BOOL: Iv = Iv { lo: 0, hi: 1 };

impl Iv {
    pub fn point(c: i64) -> Iv {
        Iv { lo: c, hi: c }
    }

    /// The interval, or [`TOP`] when an end leaves the `i32` range (the value wrapped).
    pub fn fit(lo: i128, hi: i128) -> Iv {
        if lo < TOP.lo as i128 || hi > TOP.hi as i128 || lo > hi {
            TOP
        } else {
            Iv {
                lo: lo as i64,
                hi: hi as i64,
            }
        }
    }

    pub fn is_point(self) -> bool {
        self.lo == self.hi
    }

    pub fn hull(self, o: Iv) -> Iv {
        Iv {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }

    pub fn contains(self, x: i64) -> bool {
        self.lo <= x && x <= self.hi
    }

    pub fn within(self, o: Iv) -> bool {
        o.lo <= self.lo && self.hi <= o.hi
    }
}

/// An abstract value over the threads of the block.
#[derive(Clone, Debug)]
pub(super) enum Abs {
    /// The same number in every thread, within the interval.
    Uni(Iv),
    /// Possibly different numbers per thread, each within the interval.
    Var(Iv),
    /// One interval per thread.
    Per(Rc<Vec<Iv>>),
}

impl Abs {
    pub const TOP: Abs = Abs::Var(TOP);

    pub fn at(&self, t: usize) -> Iv {
        match self {
            Abs::Uni(i) | Abs::Var(i) => *i,
            Abs::Per(v) => v[t],
        }
    }

    /// The same intervals with no claim that the value is the same in every thread.
    pub fn not_uniform(self) -> Abs {
        match self {
            Abs::Uni(iv) => Abs::Var(iv),
            other => other,
        }
    }

    /// Whether every thread holds one number (possibly unknown).
    pub fn uniform(&self) -> bool {
        matches!(self, Abs::Uni(_))
    }

    /// Combines operands thread by thread: uniform when all are, per thread when one is.
    pub fn map(args: &[&Abs], n: usize, f: impl Fn(&[Iv]) -> Iv) -> Abs {
        if args.iter().any(|a| matches!(a, Abs::Per(_))) {
            let mut buf = Vec::with_capacity(args.len());
            let v = (0..n)
                .map(|t| {
                    buf.clear();
                    buf.extend(args.iter().map(|a| a.at(t)));
                    f(&buf)
                })
                .collect();
            return Abs::Per(Rc::new(v));
        }
        // One interval per operand, on the stack (every op has at most 5 operands here).
        let mut buf = [TOP; 8];
        let r = if args.len() <= buf.len() {
            for (b, a) in buf.iter_mut().zip(args) {
                *b = a.at(0);
            }
            f(&buf[..args.len()])
        } else {
            f(&args.iter().map(|a| a.at(0)).collect::<Vec<_>>())
        };
        if args.iter().all(|a| a.uniform()) {
            Abs::Uni(r)
        } else {
            Abs::Var(r)
        }
    }

    /// The hull of two abstract values (uniform only when both are and they may differ only
    /// as one number does).
    pub fn join(&self, o: &Abs, n: usize) -> Abs {
        Abs::map(&[self, o], n, |v| v[0].hull(v[1]))
    }
}

/// `x op y` on `i32` intervals.
pub(super) fn binary(b: BinOp, x: Iv, y: Iv) -> Iv {
    if x.is_point() && y.is_point() {
        return b.eval_i32(x.lo, y.lo).map_or(TOP, Iv::point);
    }
    let (xl, xh, yl, yh) = (x.lo as i128, x.hi as i128, y.lo as i128, y.hi as i128);
    let corners = |f: &dyn Fn(i128, i128) -> i128| {
        let c = [f(xl, yl), f(xl, yh), f(xh, yl), f(xh, yh)];
        Iv::fit(*c.iter().min().unwrap(), *c.iter().max().unwrap())
    };
    match b {
        BinOp::Add => Iv::fit(xl + yl, xh + yh),
        BinOp::Sub => Iv::fit(xl - yh, xh - yl),
        BinOp::Mul => corners(&|a, c| a * c),
        BinOp::Shl if y.is_point() => corners(&|a, _| a << (y.lo & 31)),
        BinOp::Shr if y.is_point() => Iv {
            lo: x.lo >> (y.lo & 31),
            hi: x.hi >> (y.lo & 31),
        },
        BinOp::Shr if x.lo >= 0 => Iv { lo: 0, hi: x.hi },
        // Floor division is monotone in each operand while the divisor keeps its sign.
        BinOp::Div if y.lo > 0 || y.hi < 0 => {
            corners(&|a, c| crate::ir::arith::floor_div_wide(a, c).unwrap_or(0))
        }
        BinOp::Rem => rem(x, y),
        BinOp::Min => Iv {
            lo: x.lo.min(y.lo),
            hi: x.hi.min(y.hi),
        },
        BinOp::Max => Iv {
            lo: x.lo.max(y.lo),
            hi: x.hi.max(y.hi),
        },
        BinOp::And if x.lo >= 0 || y.lo >= 0 => {
            let m = match (x.lo >= 0, y.lo >= 0) {
                (true, true) => x.hi.min(y.hi),
                (true, false) => x.hi,
                _ => y.hi,
            };
            Iv { lo: 0, hi: m }
        }
        BinOp::Or | BinOp::Xor if x.lo >= 0 && y.lo >= 0 => {
            let m = x.hi.max(y.hi);
            let bits = 64 - m.leading_zeros();
            Iv {
                lo: 0,
                hi: (1i64 << bits) - 1,
            }
        }
        _ => TOP,
    }
}

/// Floor `rem`: in `[0, y)` for a positive divisor (`(y, 0]` for a negative one), and `x`
/// shifted by one multiple when `x` stays within one period.
fn rem(x: Iv, y: Iv) -> Iv {
    if y.is_point() && y.lo > 0 {
        let c = y.lo;
        let (q0, q1) = (x.lo.div_euclid(c), x.hi.div_euclid(c));
        if q0 == q1 {
            return Iv {
                lo: x.lo - q0 * c,
                hi: x.hi - q0 * c,
            };
        }
        return Iv { lo: 0, hi: c - 1 };
    }
    if y.lo > 0 {
        return Iv {
            lo: 0,
            hi: (y.hi - 1).min(if x.lo >= 0 { x.hi } else { i64::MAX }),
        };
    }
    if y.hi < 0 {
        return Iv { lo: y.lo + 1, hi: 0 };
    }
    TOP
}

/// `i1` logic on intervals within `[0, 1]`: exact on points, unknown otherwise.
pub(super) fn binary_i1(b: BinOp, x: Iv, y: Iv) -> Iv {
    if !(x.is_point() && y.is_point()) {
        return BOOL;
    }
    let (a, c) = (x.lo != 0, y.lo != 0);
    let r = match b {
        BinOp::And | BinOp::Mul | BinOp::Min => a && c,
        BinOp::Or | BinOp::Max => a || c,
        BinOp::Xor | BinOp::Add | BinOp::Sub => a ^ c,
        _ => return BOOL,
    };
    Iv::point(r as i64)
}

/// Unary ops on `i32` (`is_i1`: on `i1`) intervals.
pub(super) fn unary(u: UnOp, x: Iv, is_i1: bool) -> Iv {
    match (u, is_i1) {
        (UnOp::Not, true) => Iv {
            lo: 1 - x.hi,
            hi: 1 - x.lo,
        },
        (UnOp::Not, false) => Iv {
            lo: -x.hi - 1,
            hi: -x.lo - 1,
        },
        (UnOp::Neg, false) => Iv::fit(-(x.hi as i128), -(x.lo as i128)),
        (UnOp::Abs, false) if x.lo > i32::MIN as i64 => {
            if x.lo >= 0 {
                x
            } else if x.hi <= 0 {
                Iv { lo: -x.hi, hi: -x.lo }
            } else {
                Iv {
                    lo: 0,
                    hi: x.hi.max(-x.lo),
                }
            }
        }
        (_, true) => BOOL,
        _ => TOP,
    }
}

/// An integer comparison: decided when the intervals do not overlap the wrong way.
pub(super) fn compare(p: CmpPred, x: Iv, y: Iv) -> Iv {
    let (t, f) = (Iv::point(1), Iv::point(0));
    let lt = |a: Iv, b: Iv| {
        if a.hi < b.lo {
            t
        } else if a.lo >= b.hi {
            f
        } else {
            BOOL
        }
    };
    let not = |i: Iv| Iv {
        lo: 1 - i.hi,
        hi: 1 - i.lo,
    };
    match p {
        CmpPred::Lt => lt(x, y),
        CmpPred::Gt => lt(y, x),
        CmpPred::Ge => not(lt(x, y)),
        CmpPred::Le => not(lt(y, x)),
        CmpPred::Eq if x.is_point() && y.is_point() => Iv::point((x.lo == y.lo) as i64),
        CmpPred::Eq if x.hi < y.lo || y.hi < x.lo => f,
        CmpPred::Ne if x.is_point() && y.is_point() => Iv::point((x.lo != y.lo) as i64),
        CmpPred::Ne if x.hi < y.lo || y.hi < x.lo => t,
        _ => BOOL,
    }
}

/// The interval of a select arm given that comparison `l p r` came out `holds`: `side` 1
/// when the arm is `l`, 2 when it is `r`, 0 when neither (unchanged). None: the arm cannot
/// be taken.
pub(super) fn narrow(p: CmpPred, holds: bool, side: u8, arm: Iv, l: Iv, r: Iv) -> Option<Iv> {
    let p = if holds { p } else { negate(p) };
    let (p, other) = match side {
        1 => (p, r),
        2 => (flip(p), l),
        _ => return Some(arm),
    };
    let (mut lo, mut hi) = (arm.lo, arm.hi);
    match p {
        CmpPred::Lt => hi = hi.min(other.hi - 1),
        CmpPred::Le => hi = hi.min(other.hi),
        CmpPred::Gt => lo = lo.max(other.lo + 1),
        CmpPred::Ge => lo = lo.max(other.lo),
        CmpPred::Eq => (lo, hi) = (lo.max(other.lo), hi.min(other.hi)),
        CmpPred::Ne if other.is_point() && lo == other.lo => lo += 1,
        CmpPred::Ne if other.is_point() && hi == other.lo => hi -= 1,
        CmpPred::Ne => {}
    }
    (lo <= hi).then_some(Iv { lo, hi })
}

/// `!(a p b)` as `a p' b`.
fn negate(p: CmpPred) -> CmpPred {
    match p {
        CmpPred::Lt => CmpPred::Ge,
        CmpPred::Ge => CmpPred::Lt,
        CmpPred::Le => CmpPred::Gt,
        CmpPred::Gt => CmpPred::Le,
        CmpPred::Eq => CmpPred::Ne,
        CmpPred::Ne => CmpPred::Eq,
    }
}

/// `a p b` as `b p' a`.
fn flip(p: CmpPred) -> CmpPred {
    match p {
        CmpPred::Lt => CmpPred::Gt,
        CmpPred::Gt => CmpPred::Lt,
        CmpPred::Le => CmpPred::Ge,
        CmpPred::Ge => CmpPred::Le,
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every interval result holds the exact `i32` result of every pair of members.
    #[test]
    fn intervals_hold_every_member_result() {
        let ivs = [
            Iv { lo: -7, hi: 5 },
            Iv { lo: 0, hi: 9 },
            Iv { lo: 3, hi: 3 },
            Iv { lo: -4, hi: -1 },
            Iv { lo: 1, hi: 40 },
        ];
        let ops = [
            BinOp::Add,
            BinOp::Sub,
            BinOp::Mul,
            BinOp::Div,
            BinOp::Rem,
            BinOp::Min,
            BinOp::Max,
            BinOp::And,
            BinOp::Or,
            BinOp::Xor,
            BinOp::Shl,
            BinOp::Shr,
        ];
        for b in ops {
            for x in ivs {
                for y in ivs {
                    let r = binary(b, x, y);
                    for a in x.lo..=x.hi {
                        for c in y.lo..=y.hi {
                            if let Some(v) = b.eval_i32(a, c) {
                                assert!(r.contains(v), "{b:?} {x:?} {y:?}: {a},{c} -> {v}");
                            }
                        }
                    }
                }
            }
        }
        let preds = [CmpPred::Lt, CmpPred::Le, CmpPred::Gt, CmpPred::Ge, CmpPred::Eq, CmpPred::Ne];
        // Narrowing keeps every member of an arm for which the comparison has that outcome.
        for p in preds {
            for (x, y) in ivs.iter().flat_map(|x| ivs.iter().map(move |y| (*x, *y))) {
                for a in x.lo..=x.hi {
                    for c in y.lo..=y.hi {
                        let h = p.holds(a, c);
                        let l = narrow(p, h, 1, x, x, y);
                        assert!(l.is_some_and(|l| l.contains(a)), "{p:?} {x:?} {y:?} {a} {c}");
                        let r = narrow(p, h, 2, y, x, y);
                        assert!(r.is_some_and(|r| r.contains(c)), "{p:?} {x:?} {y:?} {a} {c}");
                    }
                }
            }
        }
        for p in preds {
            for x in ivs {
                for y in ivs {
                    let r = compare(p, x, y);
                    for a in x.lo..=x.hi {
                        for c in y.lo..=y.hi {
                            assert!(r.contains(p.holds(a, c) as i64));
                        }
                    }
                }
            }
        }
    }
}
