//! The values of a parameter with a declared range that `analysis::mbar_protocol`'s trace
//! can tell apart (docs/async.md, "Parameters with a declared range").
//!
//! Where every use of a scalar parameter `%K` in the kernel, or of a sum `%K + c` (also
//! `c + %K`, `%K − c`, constant `c`) used only so, is
//! - a quotient `(%K + c) div B` with a constant `B > 0`, or
//! - the upper bound of a loop `for n = lo to %K + c step s` (constants `lo`, `s > 0`),
//!
//! everything the trace computes from `%K` is a function of those quotients and trip counts
//! (its *key*), so one value of each class of equal keys stands for the whole class: a
//! CUTLASS mainloop over `%K in [64, 8192]` with `%kt = %K div 64` has 128 classes, not 8129
//! values (hostile P3). Any other use (a global index, a comparison, a yield) declines, and
//! the caller searches the parameter as it does one without a range.
//!
//! Invariants: over the declared range no sum `%K + c` leaves `i32` (checked), so each key
//! component is non-decreasing in `%K` (floor division, `ir::BinOp::eval_i32`; a trip count
//! `max(0, ⌈(%K − lo) / s⌉)`), the classes are intervals and "the key differs from the key at
//! `x`" is monotone above `x`: bisection finds each class's start exactly. A loop's counter
//! runs `lo, lo + s, …` whatever `%K` is, so its values are the class's too; the bound keeps
//! `%K + s` within `i32`, so the counter never wraps below it.
//!
//! Complexity: one walk of the kernel's ops and views to read the uses; then
//! O(classes × forms × log(range)) to find the classes, stopped past the cap.

use crate::ir::*;

/// How `%K` reaches the trace: one component of the key.
#[derive(Copy, Clone, Debug, PartialEq)]
struct Form {
    /// The offset `c` of the sum `%K + c` (0 for `%K` itself).
    c: i64,
    kind: Use,
}

/// What the sum is used as.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Use {
    /// `(%K + c) div B`: `B`.
    Div(i64),
    /// The trip count of `for n = lo to %K + c step s`: `(lo, s)`.
    Trips(i64, i64),
}

impl Form {
    fn at(self, x: i64) -> i64 {
        let y = x + self.c;
        match self.kind {
            Use::Div(b) => y.div_euclid(b),
            Use::Trips(lo, s) if y > lo => (y - lo + s - 1) / s,
            Use::Trips(..) => 0,
        }
    }

    /// Whether the form is exact over `[lo, hi]`: no `i32` wrap of the sum, nor of a loop's
    /// counter below it.
    fn fits(self, (lo, hi): (i64, i64)) -> bool {
        let i32s = i32::MIN as i64..=i32::MAX as i64;
        let step = match self.kind {
            Use::Div(_) => 0,
            Use::Trips(_, s) => s,
        };
        i32s.contains(&(lo + self.c)) && i32s.contains(&(hi + self.c + step))
    }
}

/// One value of `p` per class of values the trace cannot tell apart, the least of each, in
/// increasing order, over the declared range `range`: at most `cap + 1` of them (more than
/// `cap` means more classes than that). `None` where `p` has a use other than the forms of
/// the module doc, or one that could wrap over the range.
pub(super) fn representatives(k: &Kernel, p: Value, range: (i64, i64), cap: usize) -> Option<Vec<i64>> {
    let forms = forms(k, p)?;
    if !forms.iter().all(|f| f.fits(range)) {
        return None;
    }
    let key = |x: i64| forms.iter().map(|f| f.at(x)).collect::<Vec<i64>>();
    let (mut x, hi) = range;
    let mut reps = Vec::new();
    loop {
        reps.push(x);
        let kx = key(x);
        if reps.len() > cap || key(hi) == kx {
            return Some(reps);
        }
        // The least `y` in `(x, hi]` whose key differs: the key at `a` equals `kx`, at `b` not.
        let (mut a, mut b) = (x, hi);
        while b - a > 1 {
            let m = a + (b - a) / 2;
            match key(m) == kx {
                true => a = m,
                false => b = m,
            }
        }
        x = b;
    }
}

/// The forms through which `p` is used, every use; `None` where one is of another kind.
fn forms(k: &Kernel, p: Value) -> Option<Vec<Form>> {
    let mut out = Vec::new();
    for o in users(k, p)? {
        if let Some(u) = use_of(k, o, p) {
            out.push(Form { c: 0, kind: u });
            continue;
        }
        let OpKind::Binary(op @ (BinOp::Add | BinOp::Sub), x, y) = &k.ops[o].kind else {
            return None;
        };
        let c = match (op, *x, *y) {
            (_, Operand::Value(v), c) if v == p => k.const_i32(c)?,
            (BinOp::Add, c, Operand::Value(v)) if v == p => k.const_i32(c)?,
            _ => return None,
        };
        let c = if *op == BinOp::Sub { -c } else { c };
        let sum = *k.ops[o].results.first()?;
        for u in users(k, sum)? {
            out.push(Form { c, kind: use_of(k, u, sum)? });
        }
    }
    Some(out)
}

/// How op `o` uses `v`, where that is a quotient's dividend or a loop's upper bound only.
fn use_of(k: &Kernel, o: Op, v: Value) -> Option<Use> {
    match &k.ops[o].kind {
        OpKind::Binary(BinOp::Div, Operand::Value(x), b) if *x == v => Some(Use::Div(k.const_i32(*b).filter(|&b| b > 0)?)),
        OpKind::For { lo, hi: Operand::Value(h), step, init } if *h == v => {
            let mut other = [*lo, *step].into_iter().chain(init.iter().copied());
            if other.any(|x| x == Operand::Value(v)) {
                return None;
            }
            Some(Use::Trips(k.const_i32(*lo)?, k.const_i32(*step).filter(|&s| s > 0)?))
        }
        _ => None,
    }
}

/// The placed ops with `v` among their operands; `None` where a view's index reads it.
fn users(k: &Kernel, v: Value) -> Option<Vec<Op>> {
    let at = |i: &ViewIndex| matches!(i, ViewIndex::At(Operand::Value(x)) if *x == v);
    if k.views.values().any(|d| d.indices.iter().any(at)) {
        return None;
    }
    let mut out = Vec::new();
    k.walk(|o| {
        if k.ops[o].kind.value_uses().contains(&v) {
            out.push(o);
        }
    });
    Some(out)
}
