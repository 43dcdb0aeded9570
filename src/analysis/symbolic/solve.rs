//! Bounded integer feasibility: does a conjunction of linear constraints `lo ≤ Σ aᵢ·xᵢ ≤ hi`
//! over integer variables with finite boxes `xᵢ ∈ [lᵢ, uᵢ]` have a solution?
//!
//! **Method.** Bounds propagation to a fixpoint (each constraint tightens every variable's box
//! from the others' extremes, with floor/ceil division; a constraint whose coefficients' gcd
//! divides no value of its range is infeasible), then branching on the variable with the
//! smallest box (every value when at most [`ENUM_WIDTH`], else halves), depth first. Every
//! box is finite, so the search is complete: `Sat` and `Unsat` are exact. This is the bounded
//! special case of integer programming that the Omega test (Pugh 1991) and isl decide for
//! unbounded sets; here every variable is a thread id, a loop key, a div/rem quotient or a
//! bit, all bounded, so branch-and-propagate needs no Fourier–Motzkin projection.
//!
//! **Budget.** Each search visits at most the given number of nodes; past it the answer is
//! [`Answer::Budget`] and the caller falls back to enumeration (never a silent guess).
//! Complexity: O(nodes · rounds · |constraints| · |terms|); on quasi-affine GPU indices
//! propagation alone usually decides, in a handful of nodes.

/// A linear constraint `lo ≤ Σ coef·var ≤ hi` (an equality when `lo == hi`).
#[derive(Clone, Debug, PartialEq)]
pub struct Lin {
    pub terms: Vec<(usize, i64)>,
    pub lo: i64,
    pub hi: i64,
}

/// Integer variables with boxes and linear constraints over them.
#[derive(Clone, Debug, Default)]
pub struct Problem {
    pub lo: Vec<i64>,
    pub hi: Vec<i64>,
    pub cons: Vec<Lin>,
}

/// An eliminated variable: `var = Σ terms + constant`.
type Subst = (usize, Vec<(usize, i64)>, i64);

/// The answer to a feasibility question.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A solution (one value per variable).
    Sat(Vec<i64>),
    Unsat,
    /// The node budget ran out.
    Budget,
}

thread_local! {
    /// Search nodes visited by this thread (for tracing and benchmarks).
    pub static NODES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Boxes no wider than this are branched value by value.
pub const ENUM_WIDTH: i64 = 8;
/// Propagation rounds per node before branching anyway.
const ROUNDS: usize = 16;

impl Problem {
    /// A fresh variable in `[lo, hi]`.
    pub fn var(&mut self, lo: i64, hi: i64) -> usize {
        self.lo.push(lo);
        self.hi.push(hi);
        self.lo.len() - 1
    }

    /// Adds `lo ≤ Σ terms ≤ hi`; zero coefficients and repeated variables are folded.
    pub fn add(&mut self, terms: &[(usize, i64)], lo: i64, hi: i64) {
        let mut t: Vec<(usize, i64)> = Vec::with_capacity(terms.len());
        for &(v, c) in terms {
            // A sum that would overflow stays two terms of the same variable (still exact).
            match t.iter_mut().find(|(w, x)| *w == v && x.checked_add(c).is_some()) {
                Some(e) => e.1 += c,
                None => t.push((v, c)),
            }
        }
        t.retain(|&(_, c)| c != 0);
        self.cons.push(Lin { terms: t, lo, hi });
    }

    /// Whether the constraints have an integer solution within the boxes, visiting at most
    /// `budget` search nodes (decremented).
    pub fn solve(&self, budget: &mut u64) -> Answer {
        let before = *budget;
        let r = self.solve_inner(budget);
        NODES.with(|n| n.set(n.get() + before - *budget));
        r
    }

    fn solve_inner(&self, budget: &mut u64) -> Answer {
        let (reduced, subst) = self.eliminate();
        let mut lo = reduced.lo.clone();
        let mut hi = reduced.hi.clone();
        match reduced.search(&mut lo, &mut hi, budget) {
            Answer::Sat(mut x) => {
                for (v, terms, c) in subst.iter().rev() {
                    let s: i128 = terms.iter().map(|&(w, a)| a as i128 * x[w] as i128).sum();
                    x[*v] = (*c as i128 + s) as i64;
                }
                Answer::Sat(x)
            }
            other => other,
        }
    }

    /// Gaussian elimination of equalities through a variable with coefficient ±1 (the
    /// Omega test's first step, exact over the integers): the variable becomes an affine
    /// function of the others, substituted everywhere, its box a constraint on that
    /// function. Returns the reduced problem (eliminated variables fixed at 0, unused) and
    /// the substitutions `v = Σ terms + c` in elimination order.
    fn eliminate(&self) -> (Problem, Vec<Subst>) {
        let mut p = self.clone();
        let mut subst = Vec::new();
        loop {
            let found = p.cons.iter().enumerate().find_map(|(i, c)| {
                if c.lo != c.hi {
                    return None;
                }
                c.terms
                    .iter()
                    .find(|(_, a)| a.abs() == 1)
                    .map(|&(v, a)| (i, v, a))
            });
            let Some((i, v, a)) = found else { break };
            match p.substitute(i, v, a) {
                Some(rec) => subst.push(rec),
                // Coefficients too large to substitute exactly: keep the equality as a
                // constraint (propagation and branching still decide it).
                None => break,
            }
        }
        (p, subst)
    }

    fn search(&self, lo: &mut [i64], hi: &mut [i64], budget: &mut u64) -> Answer {
        if *budget == 0 {
            return Answer::Budget;
        }
        *budget -= 1;
        if !self.propagate(lo, hi) {
            return Answer::Unsat;
        }
        let pick = (0..lo.len())
            .filter(|&i| hi[i] > lo[i])
            .min_by_key(|&i| (hi[i] as i128 - lo[i] as i128, i));
        let Some(v) = pick else {
            return if self.holds(lo) {
                Answer::Sat(lo.to_vec())
            } else {
                Answer::Unsat
            };
        };
        let mut parts: Vec<(i64, i64)> = Vec::new();
        if hi[v] - lo[v] < ENUM_WIDTH {
            parts.extend((lo[v]..=hi[v]).map(|x| (x, x)));
        } else {
            let mid = lo[v] + (hi[v] - lo[v]) / 2;
            parts.push((lo[v], mid));
            parts.push((mid + 1, hi[v]));
        }
        let mut out = Answer::Unsat;
        for (a, b) in parts {
            let (mut l2, mut h2) = (lo.to_vec(), hi.to_vec());
            l2[v] = a;
            h2[v] = b;
            match self.search(&mut l2, &mut h2, budget) {
                Answer::Sat(s) => return Answer::Sat(s),
                Answer::Budget => out = Answer::Budget,
                Answer::Unsat => {}
            }
        }
        out
    }

    fn holds(&self, x: &[i64]) -> bool {
        self.cons.iter().all(|c| {
            let s: i128 = c.terms.iter().map(|&(v, a)| a as i128 * x[v] as i128).sum();
            c.lo as i128 <= s && s <= c.hi as i128
        })
    }

    /// Eliminates variable `v` (coefficient `a = ±1`) through equality `i`; `None` (the
    /// problem unchanged) when a coefficient would overflow.
    fn substitute(&mut self, i: usize, v: usize, a: i64) -> Option<Subst> {
        let c = &self.cons[i];
        // v = a·(lo − Σ_{w≠v} b_w·w)
        let terms: Vec<(usize, i64)> = c
            .terms
            .iter()
            .filter(|(w, _)| *w != v)
            .map(|&(w, b)| Some((w, a.checked_mul(b)?.checked_neg()?)))
            .collect::<Option<_>>()?;
        let k0 = a.checked_mul(c.lo)?;
        let mut cons = self.cons.clone();
        cons.swap_remove(i);
        for con in &mut cons {
            let Some(pos) = con.terms.iter().position(|(w, _)| *w == v) else {
                continue;
            };
            let b = con.terms.swap_remove(pos).1;
            for &(w, t) in &terms {
                let bt = b.checked_mul(t)?;
                match con.terms.iter_mut().find(|(x, _)| *x == w) {
                    Some(e) => e.1 = e.1.checked_add(bt)?,
                    None => con.terms.push((w, bt)),
                }
            }
            con.terms.retain(|&(_, t)| t != 0);
            let bk = b.checked_mul(k0)?;
            con.lo = con.lo.checked_sub(bk)?;
            con.hi = con.hi.checked_sub(bk)?;
        }
        let (vlo, vhi) = (self.lo[v].checked_sub(k0)?, self.hi[v].checked_sub(k0)?);
        self.cons = cons;
        self.add(&terms, vlo, vhi);
        self.lo[v] = 0;
        self.hi[v] = 0;
        Some((v, terms, k0))
    }

    /// Tightens the boxes; false when some box empties (infeasible).
    fn propagate(&self, lo: &mut [i64], hi: &mut [i64]) -> bool {
        for _ in 0..ROUNDS {
            let mut changed = false;
            for c in &self.cons {
                match tighten(c, lo, hi) {
                    None => return false,
                    Some(ch) => changed |= ch,
                }
            }
            if !changed {
                break;
            }
        }
        true
    }
}

/// One constraint's bounds propagation; `None` when infeasible, else whether a box changed.
fn tighten(c: &Lin, lo: &mut [i64], hi: &mut [i64]) -> Option<bool> {
    let (mut smin, mut smax) = (0i128, 0i128);
    let mut g = 0i64;
    let mut fixed = 0i128;
    for &(v, a) in &c.terms {
        let (x, y) = (a as i128 * lo[v] as i128, a as i128 * hi[v] as i128);
        smin += x.min(y);
        smax += x.max(y);
        if lo[v] == hi[v] {
            fixed += x;
        } else {
            g = gcd(g, a);
        }
    }
    let (clo, chi) = (c.lo as i128, c.hi as i128);
    if smax < clo || smin > chi {
        return None;
    }
    // Divisibility: the free part is a multiple of g; some value of [clo-fixed, chi-fixed]
    // must be one.
    if g > 1 {
        let g = g as i128;
        let first = (clo - fixed).div_euclid(g) * g;
        let first = if first < clo - fixed { first + g } else { first };
        if first > chi - fixed {
            return None;
        }
    } else if g == 0 && (fixed < clo || fixed > chi) {
        return None;
    }
    let mut changed = false;
    for &(v, a) in &c.terms {
        if lo[v] == hi[v] {
            continue;
        }
        let (x, y) = (a as i128 * lo[v] as i128, a as i128 * hi[v] as i128);
        let (rmin, rmax) = (smin - x.min(y), smax - x.max(y));
        // a·v ∈ [clo - rmax, chi - rmin]
        let (tlo, thi) = (clo - rmax, chi - rmin);
        let a = a as i128;
        let (nlo, nhi) = if a > 0 {
            (ceil_div(tlo, a), floor_div(thi, a))
        } else {
            (ceil_div(thi, a), floor_div(tlo, a))
        };
        let nlo = nlo.max(lo[v] as i128) as i64;
        let nhi = nhi.min(hi[v] as i128) as i64;
        if nlo > nhi {
            return None;
        }
        if nlo != lo[v] || nhi != hi[v] {
            lo[v] = nlo;
            hi[v] = nhi;
            changed = true;
        }
    }
    Some(changed)
}

fn floor_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn ceil_div(a: i128, b: i128) -> i128 {
    -floor_div(-a, b)
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a.abs() } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sat(p: &Problem) -> bool {
        let mut b = 1 << 20;
        match p.solve(&mut b) {
            Answer::Sat(x) => {
                assert!(p.holds(&x));
                true
            }
            Answer::Unsat => false,
            Answer::Budget => panic!("budget"),
        }
    }

    #[test]
    fn parity_and_ranges() {
        // 2x - 2y = 1 has no integer solution.
        let mut p = Problem::default();
        let (x, y) = (p.var(0, 1000), p.var(0, 1000));
        p.add(&[(x, 2), (y, -2)], 1, 1);
        assert!(!sat(&p));
        // x = 64q + r, 0 ≤ r < 64, x = 130 → q = 2, r = 2.
        let mut p = Problem::default();
        let (x, q, r) = (p.var(0, 255), p.var(0, 3), p.var(0, 63));
        p.add(&[(x, 1), (q, -64), (r, -1)], 0, 0);
        p.add(&[(x, 1)], 130, 130);
        assert!(sat(&p));
        p.add(&[(r, 1)], 3, 63);
        assert!(!sat(&p));
    }

    #[test]
    fn agrees_with_brute_force_on_small_systems() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: i64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as i64
        };
        for _ in 0..400 {
            let mut p = Problem::default();
            let n = 1 + rnd(3) as usize;
            for _ in 0..n {
                let l = rnd(5) - 2;
                p.var(l, l + rnd(6));
            }
            for _ in 0..1 + rnd(3) {
                let terms: Vec<(usize, i64)> =
                    (0..n).map(|v| (v, rnd(9) - 4)).collect();
                let l = rnd(13) - 6;
                p.add(&terms, l, l + rnd(4));
            }
            let mut any = false;
            let mut x = p.lo.clone();
            #[expect(clippy::needless_range_loop, reason = "an odometer over three lists")]
            'all: loop {
                any |= p.holds(&x);
                for i in 0..n {
                    if x[i] < p.hi[i] {
                        x[i] += 1;
                        continue 'all;
                    }
                    x[i] = p.lo[i];
                }
                break;
            }
            assert_eq!(sat(&p), any, "{p:?}");
        }
    }
}
