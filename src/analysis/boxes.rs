//! Footprint boxes: for a shared access, one strided interval per dimension of its root
//! buffer (`lo, lo + stride, …, hi`: a range and a congruence) that holds every index the
//! access may touch — over every thread of the block, every
//! iteration of its loops and every value of the parameters. Two accesses of one root buffer
//! whose boxes are disjoint in some dimension touch no common byte, under any iteration
//! relation: the in-flight dataflow ([`crate::analysis::inflight`]) then asks no footprint
//! question for the pair (a copy loop of 128 copies into 128 rows asked 131,000 of them on
//! the 64-thread GEMM, all answered "no").
//!
//! **Model.** The byte model is [`crate::analysis::overlap`]'s: the root buffer is row-major
//! with one element per index tuple, a per-thread index selects one element of the memref
//! (the remaining kept dimensions whole), a collective access touches the whole memref, and
//! a view's `At` index fixes one root index, its `Range` a constant sub-range. Two distinct
//! index tuples within the shape are distinct elements (row-major linearization is injective
//! on the shape), so boxes of one root buffer that lie within its shape and are disjoint in
//! one dimension share no element, hence no byte (one element size per root buffer).
//!
//! **Exactness.** A box is built only where the overlap engine's enumeration would read the
//! same values: intervals are propagated through exactly the ops its evaluator reads
//! (constants, thread registers, the integer binary ops, comparisons, `select`, group
//! membership), `for` induction variables and the iteration values `ir::induction`
//! recognizes (their hulls from [`Ranges`]); any other value (a parameter read by an index,
//! a load, a `while` value, a cast) gives no box. Every intermediate interval must fit `i32`
//! (then the engine's wrapping arithmetic is the integer arithmetic), a divisor must be
//! positive (and constant for `rem`, shifts by constants `0..32`), and every index must lie
//! within its dimension (where the engine finds an index out of range it answers
//! conservatively, with a note; a box never hides one). Without a box for both accesses the
//! caller asks the engine as before. Intervals over-approximate: a box never excludes an
//! index some execution touches, so "apart" is sound; it can only be more precise than an
//! engine answer that was itself conservative.
//!
//! **Complexity.** One interval per value, memoized in a table by value id (each op's
//! interval from its operands': O(1)); a box costs O(dimensions + view depth); recursion is bounded by [`MAX_DEPTH`]
//! (deeper index expressions give no box, whatever the order of the questions: a walk cut
//! there memoizes nothing above the cut). [`Ranges`] is one pass over the kernel, built on
//! first need.
//!
//! Reference: interval abstract interpretation (Cousot & Cousot, POPL 1977), applied to
//! index expressions as in the dependence tests of the GCD/Banerjee family (Banerjee's
//! bounds test: disjoint ranges of one subscript prove independence). The strides are the
//! congruence domain (Granger, "Static analysis of arithmetical congruences", 1989) in the
//! reduced product with intervals, the strided intervals of value-set analysis (Balakrishnan &
//! Reps, CC 2004); disjoint congruences of one subscript are the GCD test's argument.
//! Two boxes are disjoint in a dimension when the ranges are, or when the lows differ modulo
//! the strides' gcd (docs/placement.md, *Strides*).

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::ir::ranges::Ranges;
use crate::ir::*;

/// Index expressions deeper than this get no box (the walk is recursive).
pub const MAX_DEPTH: u32 = 64;

/// A strided interval of `i32` values: `lo, lo + stride, …` up to `hi` (a congruence
/// `x ≡ lo (mod stride)` within `[lo, hi]`). `stride` is 0 exactly when `lo == hi`, and
/// otherwise at least 1 and divides `hi − lo`; stride 1 is the plain interval.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Iv {
    pub lo: i64,
    pub hi: i64,
    pub stride: i64,
}

impl Iv {
    fn point(c: i64) -> Iv {
        Iv { lo: c, hi: c, stride: 0 }
    }

    /// The plain interval `[lo, hi]` (`lo <= hi`).
    pub fn dense(lo: i64, hi: i64) -> Iv {
        Iv { lo, hi, stride: (lo != hi) as i64 }
    }

    /// The interval `[lo, hi]` when it fits `i32` (no wrap-around happened).
    fn fit(lo: i128, hi: i128) -> Option<Iv> {
        Iv::fit_strided(lo, hi, 1)
    }

    /// The values `≡ lo (mod stride)` in `[lo, hi]`, when they fit `i32`; `hi` is lowered
    /// to the last such value. Stride 0 (with `lo < hi`) says nothing: stride 1.
    fn fit_strided(lo: i128, hi: i128, stride: i128) -> Option<Iv> {
        let ok = |x: i128| (i32::MIN as i128..=i32::MAX as i128).contains(&x);
        if !(ok(lo) && ok(hi)) {
            return None;
        }
        let s = stride.abs().max(1);
        let hi = if hi > lo { hi - (hi - lo) % s } else { hi };
        Some(Iv {
            lo: lo as i64,
            hi: hi as i64,
            stride: if hi == lo { 0 } else { s as i64 },
        })
    }

    /// `self + c`.
    fn shift(self, c: i64) -> Iv {
        Iv { lo: self.lo + c, hi: self.hi + c, ..self }
    }

    fn hull(self, o: Iv) -> Iv {
        let lo = self.lo.min(o.lo);
        let s = gcd(gcd(self.stride, o.stride), (self.lo - o.lo).abs());
        Iv::fit_strided(lo as i128, self.hi.max(o.hi) as i128, s as i128).expect("within both")
    }

    /// The constant, when the interval is one value.
    fn konst(self) -> Option<i64> {
        (self.lo == self.hi).then_some(self.lo)
    }

    /// No common value: the ranges are disjoint, or the congruences are incompatible
    /// (`lo`s differing modulo the strides' gcd: the Chinese remainder condition).
    pub fn disjoint(self, o: Iv) -> bool {
        if self.hi < o.lo || o.hi < self.lo {
            return true;
        }
        // A stride of 1 on either side leaves every residue: no gcd to take.
        if self.stride == 1 || o.stride == 1 {
            return false;
        }
        let g = gcd(self.stride, o.stride);
        g > 1 && (self.lo - o.lo) % g != 0
    }
}

/// The greatest common divisor of `|a|` and `|b|` (`gcd(0, b) = |b|`).
fn gcd(a: i64, b: i64) -> i64 {
    gcd128(a as i128, b as i128) as i64
}

/// The box of an access: per root dimension, the interval of indices it may touch.
pub type FootBox = Vec<Iv>;

/// Whether two boxes of one root buffer are known and disjoint in some dimension.
pub fn disjoint(a: &Option<FootBox>, b: &Option<FootBox>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x.iter().zip(y).any(|(p, q)| p.disjoint(*q)),
        _ => false,
    }
}

/// Value intervals of one kernel, memoized, and the boxes built from them.
pub struct Boxes<'k> {
    k: &'k Kernel,
    warp: u32,
    ranges: Option<Ranges>,
    /// Per value index: `None` not computed yet, `Some(None)` no interval.
    vals: Vec<Option<Option<Iv>>>,
    /// [`Boxes::of_op`]'s memo.
    by_op: HashMap<(Op, bool), Arc<[Option<FootBox>]>>,
    /// Walks cut at [`MAX_DEPTH`] so far: a value computed during a cut walk is not
    /// memoized (its answer may depend on the path that reached it).
    cuts: u64,
}

impl<'k> Boxes<'k> {
    /// Boxes of the accesses of `k`, threads in warps of `warp` (the target's).
    pub fn new(k: &'k Kernel, warp: u32) -> Self {
        Boxes {
            k,
            warp,
            ranges: None,
            vals: vec![None; k.values.len()],
            cuts: 0,
            by_op: HashMap::default(),
        }
    }

    /// Whether `a` and `b` are accesses of one root buffer with boxes disjoint in some
    /// dimension (so they touch no common byte in any execution). `false` says nothing.
    pub fn apart(&mut self, a: &SharedAccess, b: &SharedAccess) -> bool {
        self.k.root_buffer(a.mem) == self.k.root_buffer(b.mem) && disjoint(&self.of(a), &self.of(b))
    }

    /// The boxes of the accesses `accs` of `op` ([`Boxes::of`]), memoized per op and role
    /// (`copy`: its async accesses; otherwise its accesses as a consumer).
    pub fn of_op(&mut self, op: Op, copy: bool, accs: &[SharedAccess]) -> Arc<[Option<FootBox>]> {
        if let Some(b) = self.by_op.get(&(op, copy)) {
            return b.clone();
        }
        let b: Arc<[Option<FootBox>]> = accs.iter().map(|a| self.of(a)).collect();
        self.by_op.insert((op, copy), b.clone());
        b
    }

    /// The box of an access, within its root buffer's shape; `None` when some index has no
    /// interval or may leave its dimension.
    pub fn of(&mut self, a: &SharedAccess) -> Option<FootBox> {
        // Per root dimension: (offset, length, kept, indices).
        let mut dims = self.resolve(a.mem, 0)?;
        if let Footprint::PerThread(ix) = &a.footprint {
            let mut kept = dims.iter_mut().filter(|d| d.2);
            for o in ix {
                let d = kept.next()?;
                let i = self.operand(*o, 0)?;
                if i.lo < 0 || i.hi >= d.1 {
                    return None;
                }
                d.3 = i.shift(d.0);
            }
        }
        Some(dims.into_iter().map(|d| d.3).collect())
    }

    /// A memref chain as per-root-dimension selections `(offset, length, kept, box)`: the
    /// constant window a kept dimension still spans, and the indices each may touch.
    fn resolve(&mut self, m: MemRef, depth: u32) -> Option<Vec<(i64, i64, bool, Iv)>> {
        if depth > MAX_DEPTH {
            return None;
        }
        match m {
            MemRef::Buffer(b) => Some(
                self.k.buffers[b]
                    .shape
                    .iter()
                    .map(|&s| {
                        let s = s as i64;
                        (0, s, true, Iv::dense(0, s - 1))
                    })
                    .collect(),
            ),
            MemRef::View(v) => {
                let k = self.k;
                let vd = &k.views[v];
                let mut dims = self.resolve(vd.base, depth + 1)?;
                let mut kept = (0..dims.len()).filter(|i| dims[*i].2).collect::<Vec<_>>();
                kept.reverse();
                for ix in &vd.indices {
                    let d = kept.pop()?;
                    let (off, len) = (dims[d].0, dims[d].1);
                    match ix {
                        ViewIndex::At(o) => {
                            let i = self.operand(*o, 0)?;
                            if i.lo < 0 || i.hi >= len {
                                return None;
                            }
                            let at = i.shift(off);
                            dims[d] = (off, 1, false, at);
                        }
                        ViewIndex::Range(a, b) => {
                            let (a, b) = (*a as i64, *b as i64);
                            if b > len || a > b {
                                return None;
                            }
                            let span = Iv::dense(off + a, off + b - 1);
                            dims[d] = (off + a, b - a, true, span);
                        }
                    }
                }
                Some(dims)
            }
        }
    }

    /// The interval of an operand's `i32` value over every thread and execution.
    pub fn operand(&mut self, o: Operand, depth: u32) -> Option<Iv> {
        match o {
            Operand::Imm(Scalar::I32(c)) => Some(Iv::point(c as i64)),
            Operand::Imm(Scalar::I1(b)) => Some(Iv::point(b as i64)),
            Operand::Imm(_) => None,
            Operand::Value(v) => self.value(v, depth),
        }
    }

    fn value(&mut self, v: Value, depth: u32) -> Option<Iv> {
        if let Some(Some(r)) = self.vals.get(v.index()) {
            return *r;
        }
        if depth > MAX_DEPTH {
            self.cuts += 1;
            return None;
        }
        let cuts = self.cuts;
        let r = match self.k.values[v].def {
            ValueDef::Param(_) => None,
            ValueDef::RegionArg(r, n) => self.region_arg(v, r, n),
            ValueDef::Result(op, _) => self.result(op, depth),
        };
        // Memoized unless the walk was cut below it (reached by a shorter path, the value
        // may have an interval): the answers do not depend on the order of the questions.
        if self.cuts == cuts
            && let Some(slot) = self.vals.get_mut(v.index())
        {
            *slot = Some(r);
        }
        r
    }

    /// A `for` induction variable (constant positive step) or a recognized iteration value:
    /// the interval [`Ranges`] gives it (the variable's bounds, the value's hull).
    fn region_arg(&mut self, v: Value, r: Region, n: usize) -> Option<Iv> {
        let k = self.k;
        let owner = k.parents().region_op[r]?;
        let OpKind::For { step, .. } = &k.ops[owner].kind else {
            return None;
        };
        let ranges = self.ranges.get_or_insert_with(|| Ranges::new(k));
        if n > 0 && ranges.inductions.get(v).is_none() {
            return None;
        }
        if n == 0 && !matches!(self.operand(*step, 0), Some(s) if s.lo > 0) {
            return None;
        }
        let i = self.ranges.as_ref()?.range(v);
        Iv::fit(i.lo, i.hi)
    }

    fn result(&mut self, op: Op, depth: u32) -> Option<Iv> {
        let k = self.k;
        let [bx, by, bz] = k.block.map(|d| d as i64);
        let threads = k.threads() as i64;
        let warp = self.warp as i64;
        let d = depth + 1;
        match &k.ops[op].kind {
            OpKind::Const(Scalar::I32(c)) => Some(Iv::point(*c as i64)),
            OpKind::Const(Scalar::I1(b)) => Some(Iv::point(*b as i64)),
            OpKind::Special(s) => {
                let upto = |n: i64| Iv::dense(0, n - 1);
                match s {
                    Special::Tid(0) => Some(upto(bx)),
                    Special::Tid(1) => Some(upto(by)),
                    Special::Tid(_) => Some(upto(bz)),
                    Special::LinearTid => Some(upto(threads)),
                    Special::Lane => Some(upto(warp.min(threads))),
                    Special::Warp => Some(upto((threads - 1) / warp + 1)),
                    Special::BlockDim(i) => Some(Iv::point(k.block[*i as usize] as i64)),
                    _ => None,
                }
            }
            OpKind::Binary(b, x, y) => {
                let (x, y) = (self.operand(*x, d)?, self.operand(*y, d)?);
                binary(*b, x, y)
            }
            OpKind::Cmp(_, x, y) => {
                self.operand(*x, d)?;
                self.operand(*y, d)?;
                Some(Iv::dense(0, 1))
            }
            OpKind::Select(c, x, y) => {
                self.operand(*c, d)?;
                Some(self.operand(*x, d)?.hull(self.operand(*y, d)?))
            }
            OpKind::InGroup(_) => Some(Iv::dense(0, 1)),
            _ => None,
        }
    }
}

/// The strided interval of `x op y` over those of its operands, with the overlap engine's
/// semantics (floor `div` and `rem`, arithmetic shifts); `None` where it might wrap around or
/// is not bounded here. The range is [`range`]'s; its stride [`modulus`]'s, or, for a `rem`
/// whose operand spans several quotients, `gcd(stride, divisor)` (`x rem c ≡ x` modulo it).
fn binary(b: BinOp, x: Iv, y: Iv) -> Option<Iv> {
    let iv = range(b, x, y)?;
    if b == BinOp::Rem && x.lo.div_euclid(iv_const(y)?) != x.hi.div_euclid(iv_const(y)?) {
        let c = iv_const(y)? as i128;
        let g = gcd(x.stride, c as i64) as i128;
        let r = (x.lo as i128).rem_euclid(g);
        return Iv::fit_strided(r, c - g + r, g);
    }
    Iv::fit_strided(iv.lo as i128, iv.hi as i128, modulus(b, x, y))
}

/// A `rem` divisor: a positive constant.
fn iv_const(y: Iv) -> Option<i64> {
    y.konst().filter(|c| *c > 0)
}

/// A modulus `g` such that every value of `x op y` is `≡` the least one (`range(..).lo`, a
/// value some operands give) modulo `g`; 1 where nothing is known. From `x = x.lo + i·sx` and
/// `y = y.lo + j·sy`: sums and differences keep `gcd(sx, sy)`, products
/// `gcd(sx·sy, sx·y.lo, sy·x.lo)`, a floor division or right shift by a constant `c`
/// dividing `sx` keeps `sx / c`, a left shift by `s` gives `sx · 2^s`, a `rem` within one
/// quotient keeps `sx` (it subtracts a constant).
fn modulus(b: BinOp, x: Iv, y: Iv) -> i128 {
    let (sx, sy) = (x.stride as i128, y.stride as i128);
    let g = |a: i128, b: i128| gcd128(a, b);
    let divided = |c: i128| if c > 0 && sx % c == 0 { sx / c } else { 1 };
    let shift = || y.konst().filter(|s| (0..32).contains(s));
    match b {
        BinOp::Add | BinOp::Sub => g(sx, sy),
        BinOp::Mul => g(g(sx * sy, sx * y.lo as i128), sy * x.lo as i128),
        BinOp::Div => y.konst().map_or(1, |c| divided(c as i128)),
        BinOp::Shr => shift().map_or(1, |s| divided(1 << s)),
        BinOp::Shl => shift().map_or(1, |s| sx << s),
        BinOp::Rem => sx,
        _ => 1,
    }
}

/// [`gcd`] over `i128` (products of two strides; `gcd(0, b) = |b|`).
fn gcd128(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i128
}

/// The plain interval of `x op y` (the hull; [`binary`] adds the stride).
fn range(b: BinOp, x: Iv, y: Iv) -> Option<Iv> {
    let (xl, xh, yl, yh) = (x.lo as i128, x.hi as i128, y.lo as i128, y.hi as i128);
    let corners = |f: fn(i128, i128) -> i128| {
        let c = [f(xl, yl), f(xl, yh), f(xh, yl), f(xh, yh)];
        Iv::fit(*c.iter().min()?, *c.iter().max()?)
    };
    let nonneg = x.lo >= 0 && y.lo >= 0;
    let bits = |h: i64| 64 - (h as u64).leading_zeros();
    match b {
        BinOp::Add => Iv::fit(xl + yl, xh + yh),
        BinOp::Sub => Iv::fit(xl - yh, xh - yl),
        BinOp::Mul => corners(|a, b| a * b),
        // Floor division by a positive divisor is monotone in each operand.
        BinOp::Div if y.lo > 0 => corners(|a, b| a.div_euclid(b)),
        BinOp::Rem => {
            let c = iv_const(y)? as i128;
            if xl.div_euclid(c) == xh.div_euclid(c) {
                Iv::fit(xl.rem_euclid(c), xh.rem_euclid(c))
            } else {
                Iv::fit(0, c - 1)
            }
        }
        BinOp::Min => Iv::fit(xl.min(yl), xh.min(yh)),
        BinOp::Max => Iv::fit(xl.max(yl), xh.max(yh)),
        BinOp::And if nonneg => Some(Iv::dense(0, x.hi.min(y.hi))),
        BinOp::Or if nonneg => Iv::fit(xl.max(yl), (1i128 << bits(x.hi.max(y.hi))) - 1),
        BinOp::Xor if nonneg => Iv::fit(0, (1i128 << bits(x.hi.max(y.hi))) - 1),
        BinOp::Shl => {
            let s = y.konst().filter(|s| (0..32).contains(s))?;
            Iv::fit(xl << s, xh << s)
        }
        BinOp::Shr => {
            let s = y.konst().filter(|s| (0..32).contains(s))?;
            Some(Iv::dense(x.lo >> s, x.hi >> s))
        }
        _ => None,
    }
}
