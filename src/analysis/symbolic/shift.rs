//! Warp shifts of a solution: candidate solutions of a pair question's problem in which one
//! thread variable is moved by whole warps, for the cross-warp question of
//! [`super::pairs`] (docs/symbolic.md, "Solutions moved by whole warps").
//!
//! Given a solution `s` of a problem `P` (boxes and linear constraints `lo ≤ Σ a·x ≤ hi`)
//! whose two threads lie in one warp, `warp_shifts` looks for a vector `δ` with
//! `δ[t] = ±k·W` on one thread variable `t` such that `s + δ` is again a solution. It builds
//! `δ` greedily: a constraint that `s + δ` violates is restored to its value at `s` by moving
//! one variable of it not moved yet (coefficient dividing the change, new value inside its
//! box; larger coefficients first: the quotient of `t div c` rather than its remainder), and
//! the constraints of a moved variable are looked at again. Each variable moves at most once,
//! so one attempt takes at most `n` moves of `O(terms)` each.
//!
//! Invariant: the greedy is only a way to *propose* points. A point is returned only when the
//! caller's `accept` holds of it, and the caller checks it as any other recorded solution
//! (`Problem::satisfied_by` and the warp test): a candidate that is not a solution proves
//! nothing, and when no candidate is accepted the cross-warp problem is solved as before. So
//! an answer given from a shift is the solver's answer (a satisfiable problem), exactly.
//!
//! Complexity: at most `SEEDS` (4) solutions × 2 threads × `SHIFTS` (4) shifts attempts, each
//! `O(n + moves · terms)`, plus one index of the constraints by variable per call.

use super::solve::Problem;

/// Recorded solutions tried as seeds.
const SEEDS: usize = 4;
/// Shifts tried per seed and thread: `±W`, `±2W`.
const SHIFTS: [i64; 4] = [1, -1, 2, -2];

/// The first point `s + δ` ([`shift`]) over the first [`SEEDS`] solutions of `found` whose
/// threads `ta`, `tb` lie in one warp of `w` threads, moving `tb` then `ta` by each of
/// [`SHIFTS`] warps, that `accept` holds of; `None` when there is none.
pub(super) fn warp_shifts(
    p: &Problem,
    found: &[Vec<i64>],
    (ta, tb): (usize, usize),
    w: i64,
    accept: impl Fn(&Vec<i64>) -> bool,
) -> Option<Vec<i64>> {
    let n = p.lo.len();
    let seeds: Vec<&Vec<i64>> = found
        .iter()
        .filter(|s| s.len() >= n && ta < n && tb < n)
        .filter(|s| s[ta].div_euclid(w) == s[tb].div_euclid(w))
        .take(SEEDS)
        .collect();
    if seeds.is_empty() {
        return None;
    }
    let mut occ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, c) in p.cons.iter().enumerate() {
        for &(v, _) in &c.terms {
            occ[v].push(i);
        }
    }
    for s in seeds {
        for t in [tb, ta] {
            for k in SHIFTS {
                if let Some(x) = shift(p, &occ, &s[..n], (t, k * w))
                    && accept(&x)
                {
                    return Some(x);
                }
            }
        }
    }
    None
}

/// `s` with variable `t` moved by `d` and the constraints it breaks mended ([`mend`]);
/// `None` when `t` leaves its box or some broken constraint cannot be mended. The point
/// returned need not satisfy `p`: the caller checks it.
fn shift(p: &Problem, occ: &[Vec<usize>], s: &[i64], (t, d): (usize, i64)) -> Option<Vec<i64>> {
    let mut x = s.to_vec();
    x[t] = x[t].checked_add(d)?;
    if x[t] < p.lo[t] || x[t] > p.hi[t] {
        return None;
    }
    let mut moved = vec![false; x.len()];
    moved[t] = true;
    mend(p, occ, &mut x, &mut moved, occ[t].clone())?;
    Some(x)
}

/// A point of `p` near `s`, a solution of a problem with the same variables and boxes
/// (another constant of some constraint): `s` with the constraints it breaks mended
/// ([`mend`], no variable fixed); `None` when some cannot be. The point returned need not
/// satisfy `p`: the caller checks it.
pub(super) fn repair(p: &Problem, s: &[i64]) -> Option<Vec<i64>> {
    let n = p.lo.len();
    if s.len() != n {
        return None;
    }
    let mut occ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, c) in p.cons.iter().enumerate() {
        for &(v, _) in &c.terms {
            occ[v].push(i);
        }
    }
    let mut x = s.to_vec();
    let mut moved = vec![false; n];
    mend(p, &occ, &mut x, &mut moved, (0..p.cons.len()).rev().collect())?;
    Some(x)
}

/// Mends the constraints in `todo` (and, in turn, those of each variable it moves): one
/// that `x` violates gets one variable not moved yet moved by the step `m` of least
/// magnitude that brings it within its bounds and keeps the variable in its box, the
/// variable of largest coefficient first (the quotient of `t div c` rather than its
/// remainder). Each variable moves at most once: at most `n` moves. `None` when a violated
/// constraint has no such variable.
fn mend(p: &Problem, occ: &[Vec<usize>], x: &mut [i64], moved: &mut [bool], mut todo: Vec<usize>) -> Option<()> {
    while let Some(ci) = todo.pop() {
        let c = &p.cons[ci];
        let now: i128 = c.terms.iter().map(|&(v, a)| a as i128 * x[v] as i128).sum();
        let (lo, hi) = (c.lo as i128 - now, c.hi as i128 - now);
        if lo <= 0 && 0 <= hi {
            continue;
        }
        let pick = c
            .terms
            .iter()
            .filter(|&&(v, _)| !moved[v])
            .filter_map(|&(v, a)| {
                let m = step(a as i128, (lo, hi), (p.lo[v] as i128 - x[v] as i128, p.hi[v] as i128 - x[v] as i128))?;
                Some((v, a, m))
            })
            .max_by_key(|&(v, a, _)| (a.unsigned_abs(), std::cmp::Reverse(v)));
        let (v, _, m) = pick?;
        x[v] = i64::try_from(x[v] as i128 + m).ok()?;
        moved[v] = true;
        todo.extend(occ[v].iter().copied());
    }
    Some(())
}

/// The integer `m` of least magnitude with `a·m` in `[lo, hi]` and `m` in `[mlo, mhi]`
/// (`a ≠ 0`).
fn step(a: i128, (lo, hi): (i128, i128), (mlo, mhi): (i128, i128)) -> Option<i128> {
    let (lo, hi, a) = if a > 0 { (lo, hi, a) } else { (-hi, -lo, -a) };
    let first = (-((-lo).div_euclid(a))).max(mlo);
    let last = hi.div_euclid(a).min(mhi);
    (first <= last).then(|| 0.clamp(first, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `t = 8q + r`, `0 ≤ r ≤ 7`, and the constraint `r = 3`: moving `t` by a warp of 32
    /// moves `q` by 4 and keeps `r`.
    #[test]
    fn a_quotient_follows_its_thread() {
        let mut p = Problem::default();
        let t = p.var(0, 63);
        let q = p.var(0, 7);
        let r = p.var(0, 7);
        p.add(&[(t, 1), (q, -8), (r, -1)], 0, 0);
        p.add(&[(r, 1)], 3, 3);
        let s = vec![3, 0, 3];
        assert!(p.satisfied_by(&s));
        let x = warp_shifts(&p, &[s], (t, t), 32, |x| p.satisfied_by(x)).unwrap();
        assert_eq!(x, vec![35, 4, 3]);
    }

    /// A solution of `t + 16u = 10` repaired for `t + 16u = 74`: `u` (larger coefficient)
    /// moves by 4; for `t + 16u = 75` no single move mends it.
    #[test]
    fn a_moved_constant_is_repaired() {
        let mut p = Problem::default();
        let t = p.var(0, 63);
        let u = p.var(0, 15);
        p.add(&[(t, 1), (u, 16)], 74, 74);
        assert_eq!(repair(&p, &[10, 0]), Some(vec![10, 4]));
        p.cons[0].lo = 75;
        p.cons[0].hi = 75;
        assert_eq!(repair(&p, &[10, 0]), None);
    }

    /// The least step into a window, for both signs of the coefficient.
    #[test]
    fn least_steps() {
        assert_eq!(step(8, (-40, -33), (-10, 10)), Some(-5));
        assert_eq!(step(-8, (33, 40), (-10, 10)), Some(-5));
        assert_eq!(step(8, (1, 7), (-10, 10)), None);
        assert_eq!(step(1, (-3, 5), (-10, 10)), Some(0));
        assert_eq!(step(2, (5, 9), (-10, 3)), Some(3));
        assert_eq!(step(2, (5, 9), (-10, 2)), None);
    }

    /// A thread pinned by a constraint no other variable can absorb gives no point.
    #[test]
    fn a_pinned_thread_gives_nothing() {
        let mut p = Problem::default();
        let t = p.var(0, 63);
        p.add(&[(t, 1)], 5, 5);
        assert!(warp_shifts(&p, &[vec![5]], (t, t), 32, |x| p.satisfied_by(x)).is_none());
    }
}
