//! Integer arithmetic the analyses share: gcd, lcm and the rounding divisions of the IR's
//! `div`/`rem` (floor semantics, docs/ir.md), also over `i128` for the symbolic solver.
//!
//! Invariants: `gcd` is non-negative; `lcm` saturates instead of wrapping; the divisions
//! return `None` for a zero divisor (and for `i64::MIN / -1`) instead of panicking.
//! Complexity: O(log min(|a|, |b|)) for `gcd`/`lcm`, O(1) for the divisions.

/// The non-negative greatest common divisor; `gcd(a, 0) = |a|`. A result that does not fit
/// (`gcd(i64::MIN, 0)`) is 1, which only weakens an argument that divides by it.
pub fn gcd(a: i64, b: i64) -> i64 {
    let (mut x, mut y) = (a.unsigned_abs(), b.unsigned_abs());
    while y != 0 {
        (x, y) = (y, x % y);
    }
    i64::try_from(x).unwrap_or(1)
}

/// The least common multiple of two periods, saturating at `i64::MAX`; a zero operand stands
/// for "no period" and yields the other one.
pub fn lcm(a: i64, b: i64) -> i64 {
    if a == 0 || b == 0 {
        a.max(b)
    } else {
        (a / gcd(a, b)).saturating_mul(b)
    }
}

/// `⌊a / b⌋` (rounds toward negative infinity, as the IR's `div`); `None` when `b = 0` or the
/// quotient overflows.
pub fn floor_div(a: i64, b: i64) -> Option<i64> {
    i64::try_from(floor_div_wide(a as i128, b as i128)?).ok()
}

/// `⌈a / b⌉`; `None` when `b = 0` or the quotient overflows.
pub fn ceil_div(a: i64, b: i64) -> Option<i64> {
    i64::try_from(ceil_div_wide(a as i128, b as i128)?).ok()
}

/// [`floor_div`] over `i128`: the symbolic solver's bounds arithmetic, where sums of `i64`
/// products are formed without overflow.
pub fn floor_div_wide(a: i128, b: i128) -> Option<i128> {
    let q = a.checked_div(b)?;
    Some(if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

/// [`ceil_div`] over `i128`.
pub fn ceil_div_wide(a: i128, b: i128) -> Option<i128> {
    let q = a.checked_div(b)?;
    Some(if a % b != 0 && ((a < 0) == (b < 0)) {
        q + 1
    } else {
        q
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisions_round_toward_their_infinity() {
        for a in -9i64..=9 {
            for b in [-4i64, -3, -1, 1, 2, 5] {
                let exact = a as f64 / b as f64;
                assert_eq!(floor_div(a, b), Some(exact.floor() as i64), "{a}/{b}");
                assert_eq!(ceil_div(a, b), Some(exact.ceil() as i64), "{a}/{b}");
            }
            assert_eq!(floor_div(a, 0), None);
        }
        assert_eq!(floor_div(i64::MIN, -1), None);
        assert_eq!(ceil_div(i64::MIN, -1), None);
        assert_eq!(floor_div_wide(-7, 2), Some(-4));
        assert_eq!(ceil_div_wide(-7, 2), Some(-3));
        assert_eq!(floor_div_wide(i128::MIN, -1), None);
    }

    #[test]
    fn gcd_and_lcm_of_periods() {
        assert_eq!((gcd(12, -18), gcd(0, 7), gcd(i64::MIN, 0)), (6, 7, 1));
        assert_eq!((lcm(4, 6), lcm(0, 5), lcm(i64::MAX, 2)), (12, 5, i64::MAX));
    }
}
