//! Value ranges of TTGIR integers, which decide where the importer's 32-bit holding of `i64`
//! values is exact and where it is not (W1104).
//!
//! `.kir` holds an `i64`/`index` value as its low 32 bits ([`super::intops`]). The ops that
//! depend only on the low bits of their operands (`addi`, `subi`, `muli`, `andi`, `ori`,
//! `xori`, `select`, `trunci`, a yield carried around a loop) are exact whatever the value.
//! Every other use reads the value itself: a signed or unsigned comparison, a division or
//! remainder, `min`/`max`, and a direct use as a loop bound, a shared index or an mbarrier
//! parity. There the low 32 bits equal the value exactly when the value lies in
//! `[-2^31, 2^31)`. [`Converter::int_range`] computes an interval containing every value a
//! TTGIR integer can take, by interval arithmetic over its definition: constants, program
//! ids (`[0, 2^31)`), the declared width of parameters, loop induction variables (between
//! the bounds' ranges), `i64` loop counters advanced by a constant (initial value plus the
//! constant times at most the loop's trip-count bound), and the arithmetic ops, each
//! clamped to its width (a result that may wrap is the width's whole range). Where an `i64`
//! operand's interval is not inside the `i32` range, the importer writes the op as before and
//! warns W1104 at it: the value is not known to be exact. Never silent, never a different
//! value where the proof holds.
//!
//! Invariant: `int_range(v)` contains every value `v` takes in any execution (an
//! over-approximation; a value of unknown provenance gets its width's whole range).
//! Complexity: O(depth) per query, the walk bounded at [`MAX_DEPTH`] definitions.
//! Reference: interval analysis (Cousot & Cousot, "Static determination of dynamic properties
//! of programs", 1976), on MLIR `arith` semantics (mlir.llvm.org/docs/Dialects/ArithOps).

use super::convert::{Converter, Lazy, V, operands};
use crate::diag::Span;

/// An inclusive interval of mathematical integers.
pub(super) type Range = (i128, i128);

/// Definitions followed before a value is taken as its width's whole range.
const MAX_DEPTH: usize = 48;

const I32: Range = (i32::MIN as i128, i32::MAX as i128);

/// The whole range of a `bits`-wide signed integer (`0`: unknown width, taken as 64).
pub(super) fn full(bits: u32) -> Range {
    match bits {
        1 => (-1, 1),
        2..=63 => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
        _ => (i64::MIN as i128, i64::MAX as i128),
    }
}

fn within(r: Range, w: Range) -> bool {
    r.0 >= w.0 && r.1 <= w.1
}

/// `r` when it fits the width `bits`, else the width's whole range (the op may wrap).
fn clamp(r: Range, bits: u32) -> Range {
    let f = full(bits);
    if within(r, f) { r } else { f }
}

fn corners(a: Range, b: Range, f: impl Fn(i128, i128) -> i128) -> Range {
    let c = [f(a.0, b.0), f(a.0, b.1), f(a.1, b.0), f(a.1, b.1)];
    (*c.iter().min().unwrap_or(&0), *c.iter().max().unwrap_or(&0))
}

/// The smallest `2^k - 1` at or above `x` (`x >= 0`).
fn ones_above(x: i128) -> i128 {
    let mut m = 0i128;
    while m < x {
        m = m * 2 + 1;
    }
    m
}

impl Converter<'_> {
    /// An interval containing every value of the TTGIR integer `name` (of width `bits` when
    /// the definition does not say).
    pub(super) fn int_range(&self, name: &str, bits: u32) -> Range {
        self.range_depth(name, bits, 0)
    }

    fn range_depth(&self, name: &str, bits: u32, d: usize) -> Range {
        if let Some(r) = self.int_ranges.get(name) {
            return *r;
        }
        match self.vals.get(name) {
            Some(V::Lazy(i)) if d < MAX_DEPTH => self.lazy_range(&self.lazies[*i], d),
            Some(V::Kir(_, "i1")) => full(1),
            _ => full(bits),
        }
    }

    /// The interval of a pure op's result from its operands' intervals.
    fn lazy_range(&self, l: &Lazy, d: usize) -> Range {
        let w = if l.ty == "i1" { 1 } else { l.bits };
        if let Some(v) = l.int {
            return (v as i128, v as i128);
        }
        let arg = |k: usize, bits: u32| -> Range {
            l.args
                .get(k)
                .map_or(full(bits), |a| self.range_depth(a, bits, d + 1))
        };
        let lit = |k: usize| l.args.get(k).and_then(|a| self.int_literal(a));
        let (a, b) = (|| arg(0, l.arg_bits), || arg(1, l.arg_bits));
        let r = match (l.op.as_str(), l.args.len()) {
            ("tt.get_program_id", _) => (0, I32.1),
            ("tt.get_num_programs", _) => (1, I32.1),
            ("arith.extsi" | "arith.index_cast", 1) => arg(0, l.arg_bits),
            ("arith.trunci", 1) => arg(0, l.arg_bits),
            ("arith.extui" | "arith.index_castui", 1) => {
                let r = arg(0, l.arg_bits);
                if r.0 >= 0 {
                    r
                } else {
                    (0, (1i128 << l.arg_bits.clamp(1, 64)) - 1)
                }
            }
            ("arith.addi", 2) => corners(a(), b(), |x, y| x + y),
            ("arith.subi", 2) => corners(a(), b(), |x, y| x - y),
            ("arith.muli", 2) => corners(a(), b(), |x, y| x * y),
            ("arith.divsi" | "arith.divui", 2) => match lit(1) {
                // Truncating division by a positive constant is monotone in the dividend.
                Some(c) if c > 0 && (l.op == "arith.divsi" || a().0 >= 0) => {
                    let r = a();
                    (r.0 / c as i128, r.1 / c as i128)
                }
                _ => full(w),
            },
            ("arith.remsi" | "arith.remui", 2) => match lit(1) {
                Some(c) if c > 0 && a().0 >= 0 => (0, (c as i128 - 1).min(a().1)),
                Some(c) if c > 0 && l.op == "arith.remsi" => (1 - c as i128, c as i128 - 1),
                _ => full(w),
            },
            ("arith.andi", 2) => match (a(), b()) {
                (x, y) if x.0 >= 0 && y.0 >= 0 => (0, x.1.min(y.1)),
                (x, _) if x.0 >= 0 => (0, x.1),
                (_, y) if y.0 >= 0 => (0, y.1),
                _ => full(w),
            },
            ("arith.ori" | "arith.xori", 2) => match (a(), b()) {
                (x, y) if x.0 >= 0 && y.0 >= 0 => (0, ones_above(x.1.max(y.1))),
                _ => full(w),
            },
            ("arith.minsi", 2) => (a().0.min(b().0), a().1.min(b().1)),
            ("arith.maxsi", 2) => (a().0.max(b().0), a().1.max(b().1)),
            ("arith.select", 3) => {
                let (x, y) = (arg(1, w), arg(2, w));
                (x.0.min(y.0), x.1.max(y.1))
            }
            _ => full(w),
        };
        clamp(r, w)
    }

    /// The value of an integer constant (any width), if `name` is one.
    pub(super) fn int_literal(&self, name: &str) -> Option<i64> {
        match self.vals.get(name) {
            Some(V::Lazy(i)) => self.lazies.get(*i)?.int,
            _ => None,
        }
    }

    /// W1104 at `span` when the `i64` value `name`, read by `what` (which depends on more
    /// than its low 32 bits), is not shown to lie in the `i32` range.
    pub(super) fn check_i64(&mut self, name: &str, what: &str, span: Span) {
        let r = self.int_range(name, 64);
        if within(r, I32) {
            return;
        }
        let shown = |x: i128| {
            if x == i64::MIN as i128 || x == i64::MAX as i128 {
                "unbounded".to_string()
            } else {
                x.to_string()
            }
        };
        let msg = format!(
            "`%{name}` is an `i64` value that {what} reads, held in `.kir`'s 32 bits: its range [{}, {}] is not shown to fit in `i32`, so the imported value may differ from the kernel's",
            shown(r.0),
            shown(r.1)
        );
        self.warn("W1104", &format!("{name}:{}", span.lo), span, msg);
    }

    /// The checks of a lazy integer op before it is written: its `i64` operands when the op
    /// reads more than their low 32 bits.
    pub(super) fn check_i64_operands(&mut self, l: &Lazy) {
        let low_bits_only = matches!(
            l.op.as_str(),
            "arith.addi"
                | "arith.subi"
                | "arith.muli"
                | "arith.andi"
                | "arith.ori"
                | "arith.xori"
                | "arith.select"
                | "arith.trunci"
                | "arith.index_cast"
                | "arith.constant"
        );
        if l.arg_bits != 64 || low_bits_only || !l.op.starts_with("arith.") {
            return;
        }
        let what = format!("`{}`", l.op);
        for a in l.args.clone() {
            if matches!(self.vals.get(&a), Some(V::Lazy(_) | V::Kir(..))) {
                self.check_i64(&a, &what, l.span);
            }
        }
    }

    /// The ranges of an `scf.for`'s induction variable and of its `i64` iteration values that
    /// a constant advances (`%c' = addi %c, K` yielded), recorded before the body is
    /// converted. `ops` are the loop's operands (`%i`, lo, hi, step, then arg/init pairs),
    /// `tys` the iteration values' types, `iv_ty` the induction variable's type, `yielded`
    /// the body's yield operands.
    pub(super) fn record_loop_ranges(
        &mut self,
        open: usize,
        ops: &[(String, Span)],
        tys: &[String],
        iv_ty: u32,
        yielded: &[(String, Span)],
    ) {
        let [iv, lo, hi, step, ..] = ops else { return };
        let (lo, hi) = (self.int_range(&lo.0, iv_ty), self.int_range(&hi.0, iv_ty));
        let step = self.int_literal(&step.0).filter(|s| *s > 0);
        let Some(step) = step else { return };
        if hi.1 > lo.0 {
            self.int_ranges.insert(iv.0.clone(), (lo.0, hi.1 - 1));
        }
        // At most this many iterations; a counter takes init + K*j for j in 0..=trips.
        let trips = ((hi.1 - lo.0).max(0) + step as i128 - 1) / step as i128;
        let end = self.skip_region(open);
        for (k, pair) in ops[4..].chunks(2).enumerate() {
            let [(arg, _), (init, _)] = pair else { continue };
            if super::types::int_bits(tys.get(k).map_or("", String::as_str)) != 64 {
                continue;
            }
            let Some((y, _)) = yielded.get(k) else { continue };
            let Some(st) = self.def_in(y, open + 1, end) else { continue };
            let o = operands(&st.rest);
            let c = match (st.op.as_str(), o.as_slice()) {
                ("arith.addi", [(x, _), (c, _)]) | ("arith.addi", [(c, _), (x, _)])
                    if x == arg =>
                {
                    self.int_literal(c)
                }
                ("arith.subi", [(x, _), (c, _)]) if x == arg => {
                    self.int_literal(c).and_then(i64::checked_neg)
                }
                _ => None,
            };
            let Some(c) = c else { continue };
            let r0 = self.int_range(init, 64);
            let span = c as i128 * trips;
            let r = (r0.0 + span.min(0), r0.1 + span.max(0));
            if within(r, full(64)) {
                self.int_ranges.insert(arg.clone(), r);
            }
        }
    }
}
