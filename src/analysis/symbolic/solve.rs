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
//! propagation alone usually decides, in a handful of nodes. A node allocates nothing (one
//! stack of saved boxes per search); propagation runs in `i64` where the terms' magnitudes
//! provably fit and in `i128` otherwise, and re-runs only the constraints whose variables'
//! boxes changed since they last ran (exactly the rounds of a full sweep).
//!
//! **Presolve** (elimination, normalization, projection: docs/symbolic.md, "The decision
//! procedure") costs no nodes. A solve runs in two phases (`two_phase`): without
//! coefficient cuts for at most `CUT_AFTER` nodes, then presolved again with them
//! (`Problem::cuts`: equalities such as a `div` quotient equal to a thread id). [`Presolved`]
//! makes each phase's presolve once for solves that differ only in one variable's box, where
//! it provably does not read that box, so that a distance mask's solves share it. Every solve gives the same answer, solution and node count as the plain
//! [`Problem::solve`] (docs/symbolic.md, "Cost of one solve").

use crate::ir::arith::{ceil_div_wide, floor_div_wide, gcd};

/// A linear constraint `lo ≤ Σ coef·var ≤ hi` (an equality when `lo == hi`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lin {
    pub terms: Vec<(usize, i64)>,
    pub lo: i64,
    pub hi: i64,
}

/// Integer variables with boxes and linear constraints over them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Problem {
    pub lo: Vec<i64>,
    pub hi: Vec<i64>,
    pub cons: Vec<Lin>,
}

/// Box width above which [`Problem::eliminate`] prefers a variable for elimination: wider
/// than any thread id, key, unit or bit (only free leaves and their wraps and quotients).
const WIDE: i128 = 1 << 24;

thread_local! {
    /// Inside the search of a node's re-presolved wide rest (`Problem::wide_rest`).
    static IN_WIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Reusable storage of [`Problem::substitute`]: rewritten terms, and per rewritten
/// constraint its index, its span of `terms` and its new bounds.
#[derive(Default)]
struct Scratch {
    terms: Vec<(usize, i64)>,
    spans: Vec<(usize, usize, usize, i64, i64)>,
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

/// Whether `SMEMSYNC_SYMBOLIC_DUMP` is set (read once: every solve asks).
fn dumping() -> bool {
    static DUMP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DUMP.get_or_init(|| std::env::var_os("SMEMSYNC_SYMBOLIC_DUMP").is_some())
}

/// Prints one solve: its nodes, its answer and its problem (`SMEMSYNC_SYMBOLIC_DUMP`).
fn dump(p: &Problem, r: &Answer, nodes: u64) {
    let a = match r {
        Answer::Sat(_) => "sat",
        Answer::Unsat => "unsat",
        Answer::Budget => "budget",
    };
    eprintln!("  solve: {nodes} nodes, {a}: {p:?}");
}

/// Boxes no wider than this are branched value by value.
pub const ENUM_WIDTH: i64 = 8;
/// Propagation rounds per node before branching anyway.
const ROUNDS: usize = 16;

/// Search nodes a solve spends on the presolve without cuts before it presolves again with
/// them ([`Problem::cuts`]): most questions are decided in a handful of nodes, where finding
/// cuts would only cost (a fifth more instructions on the unrolled GEMMs).
const CUT_AFTER: u64 = 64;

/// A solve in two phases: without cuts, with at most [`CUT_AFTER`] of the budget's nodes;
/// then, if that ran out and budget is left, with cuts and the rest of the budget. Both
/// phases are exact, so the answer is the question's wherever it is not `Budget`.
fn two_phase(budget: &mut u64, mut phase: impl FnMut(bool, &mut u64) -> Answer) -> Answer {
    let mut probe = (*budget).min(CUT_AFTER);
    let given = probe;
    let r = phase(false, &mut probe);
    *budget -= given - probe;
    match r {
        Answer::Budget if *budget > 0 => phase(true, budget),
        r => r,
    }
}

/// Rounds of [`Problem::cuts`] and elimination in the presolve: each round substitutes the
/// equalities the last one found (a quotient equal to a thread id, then the next level).
const CUT_ROUNDS: usize = 4;

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
        fold(&mut t, terms);
        self.cons.push(Lin { terms: t, lo, hi });
    }

    /// Whether the constraints have an integer solution within the boxes, visiting at most
    /// `budget` search nodes (decremented).
    pub fn solve(&self, budget: &mut u64) -> Answer {
        let before = *budget;
        let r = self.solve_inner(budget);
        NODES.with(|n| n.set(n.get() + before - *budget));
        if dumping() {
            dump(self, &r, before - *budget);
        }
        r
    }

    fn solve_inner(&self, budget: &mut u64) -> Answer {
        two_phase(budget, |cut, b| self.phase(cut, b))
    }

    /// One phase of a solve ([`two_phase`]): presolve, with cuts or without, and search.
    fn phase(&self, cut: bool, budget: &mut u64) -> Answer {
        match self.presolve(cut) {
            Reduced { unsat: true, .. } => Answer::Unsat,
            r => r.finish(None, budget),
        }
    }

    /// Steps 1–3 of the decision procedure (elimination, normalization with coefficient
    /// cuts when `cut`, projection): the reduced problem the search runs on, and how to
    /// recover a solution of `self`.
    fn presolve(&self, cut: bool) -> Reduced {
        let (mut p, subst) = self.eliminate();
        let mut r = Reduced {
            shadows: Vec::new(),
            subst,
            clean: true,
            unsat: !p.normalize(),
            p: Problem::default(),
            search: std::cell::Cell::new(None),
            read: Vec::new(),
        };
        for _ in 0..if cut { CUT_ROUNDS } else { 0 } {
            if r.unsat {
                break;
            }
            let Some(cuts) = p.cuts(&mut r.read) else {
                r.unsat = true;
                break;
            };
            if cuts.is_empty() {
                break;
            }
            p.cons.extend(cuts);
            let (q, more) = p.eliminate();
            p = q;
            r.subst.extend(more);
            r.unsat = !p.normalize();
        }
        r.read.sort_unstable();
        r.read.dedup();
        if !r.unsat {
            (r.shadows, r.clean) = p.project();
            r.unsat = !p.normalize();
        }
        r.p = p;
        r
    }

    /// The problem presolved once for solves that differ only in the box of `var`
    /// ([`Presolved::solve`]); the presolve itself is made at the first solve.
    pub fn presolved(&self, var: usize) -> Presolved<'_> {
        Presolved {
            p: self,
            var,
            ready: [std::cell::OnceCell::new(), std::cell::OnceCell::new()],
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
        let mut scratch = Scratch::default();
        loop {
            let found = p.cons.iter().enumerate().find_map(|(i, c)| {
                if c.lo != c.hi {
                    return None;
                }
                let units = c.terms.iter().filter(|(_, a)| a.abs() == 1);
                // A wide variable (a free parameter, a wrap: `symbolic::params`) first, so
                // that the small ones keep their boxes for propagation and branching (and
                // parity stays a gcd of the wide ones' coefficients); else the first.
                let width = |v: usize| p.hi[v] as i128 - p.lo[v] as i128;
                units
                    .clone()
                    .filter(|&&(v, _)| width(v) > WIDE)
                    .max_by_key(|&&(v, _)| (width(v), std::cmp::Reverse(v)))
                    .or_else(|| units.clone().next())
                    .map(|&(v, a)| (i, v, a))
            });
            let Some(at) = found else { break };
            match p.substitute(at, &mut scratch) {
                Some(rec) => subst.push(rec),
                // Coefficients too large to substitute exactly: keep the equality as a
                // constraint (propagation and branching still decide it).
                None => break,
            }
        }
        (p, subst)
    }

    /// Equalities implied by coefficient groups (step 1b of the decision procedure,
    /// docs/symbolic.md): a constraint `lo ≤ g·L + R ≤ hi`, where `g > 1` divides every
    /// coefficient of the linear form `L` (two terms or more) and `R` holds the other terms,
    /// gives `L ∈ [⌈(lo − max R)/g⌉, ⌊(hi − min R)/g⌋]` with `R`'s extremes from the boxes —
    /// exact over the integers. Kept only when that range is one value: an equality that
    /// elimination substitutes (`64·(t − q) + e ∈ [0, 63]` with `e ∈ [0, 63]` is `q = t`,
    /// the quotient of a `div` by 64 that propagation alone decides only by branching on
    /// `t`). `None` when some range is empty (the problem is infeasible). The variables whose
    /// boxes were read go to `read` ([`Reduced::reusable`]). O(|constraints| · |terms|²).
    fn cuts(&self, read: &mut Vec<usize>) -> Option<Vec<Lin>> {
        let free = |x: i64| x <= i64::MIN / 4 || x >= i64::MAX / 4;
        let mut out = Vec::new();
        for c in self.cons.iter().filter(|c| !free(c.lo) && !free(c.hi) && c.terms.len() >= 3) {
            for (i, &(_, a)) in c.terms.iter().enumerate() {
                let g = a.unsigned_abs() as i64;
                // Each modulus once per constraint: at its first term.
                if g <= 1 || c.terms[..i].iter().any(|&(_, b)| b.unsigned_abs() as i64 == g) {
                    continue;
                }
                let (mut n, mut rmin, mut rmax, mut rest) = (0, 0i128, 0i128, false);
                for &(w, b) in &c.terms {
                    if b % g == 0 {
                        n += 1;
                    } else {
                        let (x, y) = (b as i128 * self.lo[w] as i128, b as i128 * self.hi[w] as i128);
                        (rmin, rmax, rest) = (rmin + x.min(y), rmax + x.max(y), true);
                    }
                }
                if n < 2 || !rest {
                    continue;
                }
                let gg = g as i128;
                let lo = -((rmax - c.lo as i128).div_euclid(gg));
                let hi = (c.hi as i128 - rmin).div_euclid(gg);
                read.extend(c.terms.iter().filter(|&&(_, b)| b % g != 0).map(|&(w, _)| w));
                if lo > hi {
                    return None;
                }
                if let Some(v) = (lo == hi).then(|| i64::try_from(lo).ok()).flatten().filter(|&v| !free(v)) {
                    let terms = c.terms.iter().filter(|&&(_, b)| b % g == 0).map(|&(w, b)| (w, b / g)).collect();
                    out.push(Lin { terms, lo: v, hi: v });
                }
            }
        }
        Some(out)
    }

    /// Divides every constraint by the gcd of its coefficients (tightening its bounds to the
    /// multiples: exact over the integers), orients it (first coefficient positive, terms
    /// sorted) and merges constraints on the same linear form into one (the intersection of
    /// their ranges). False when some constraint has no integer solution.
    fn normalize(&mut self) -> bool {
        let mut ok = true;
        self.cons.retain_mut(|c| {
            if !ok {
                return true;
            }
            match normal(c) {
                Some(keep) => keep,
                None => {
                    ok = false;
                    true
                }
            }
        });
        ok && self.merge()
    }

    /// Merges constraints on one linear form into the first of them (the intersection of
    /// their ranges; false when empty), the others keeping their order. Up to 64 constraints
    /// by pairwise comparison, more by sorting their indices by form (no hashing of term
    /// vectors either way).
    fn merge(&mut self) -> bool {
        let n = self.cons.len();
        if n > 64 {
            return self.merge_sorted();
        }
        let mut gone = 0u64;
        for j in 1..n {
            let Some(f) = (0..j).find(|&f| gone & (1 << f) == 0 && self.cons[f].terms == self.cons[j].terms)
            else {
                continue;
            };
            let (lo, hi) = (self.cons[j].lo, self.cons[j].hi);
            let o = &mut self.cons[f];
            o.lo = o.lo.max(lo);
            o.hi = o.hi.min(hi);
            gone |= 1 << j;
            if o.lo > o.hi {
                return false;
            }
        }
        if gone != 0 {
            let mut i = 0;
            self.cons.retain(|_| {
                i += 1;
                gone & (1 << (i - 1)) == 0
            });
        }
        true
    }

    /// [`Problem::merge`] for many constraints: sorting indices by form finds equal forms.
    fn merge_sorted(&mut self) -> bool {
        let out = &mut self.cons;
        let mut order: Vec<u32> = (0..out.len() as u32).collect();
        order.sort_by(|&x, &y| out[x as usize].terms.cmp(&out[y as usize].terms).then(x.cmp(&y)));
        let mut gone = vec![false; out.len()];
        let mut first = usize::MAX;
        for &j in &order {
            let j = j as usize;
            if first == usize::MAX || out[first].terms != out[j].terms {
                first = j;
                continue;
            }
            let (lo, hi) = (out[j].lo, out[j].hi);
            let o = &mut out[first];
            o.lo = o.lo.max(lo);
            o.hi = o.hi.min(hi);
            gone[j] = true;
            if o.lo > o.hi {
                return false;
            }
        }
        let mut i = 0;
        out.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
        true
    }

    /// Projects out, one by one, the variables whose every constraint has a ±1 coefficient
    /// on them: the integer Fourier–Motzkin step is exact there (the Omega test's exact
    /// shadow, Pugh 1991: every lower bound `L` and upper bound `U` of the variable are
    /// integer forms, and an integer lies between them iff `L ≤ U` for every pair). This is
    /// what decides `t₁ < t₂` questions propagation cannot (`t₁ = t₂ + 256·(i₂ − i₁)`
    /// against `0 ≤ t ≤ 255`). Only projections that add few constraints are made. Returns
    /// the projected variables, whose values [`Shadow::value`] recovers.
    fn project(&mut self) -> (Vec<Shadow>, bool) {
        const GROWTH: usize = 8;
        let mut out = Vec::new();
        let limit = self.cons.len() * 2 + 16;
        let mut tally = Vec::new();
        loop {
            self.tally(&mut tally);
            let mut best: Option<(usize, usize)> = None;
            for (v, t) in tally.iter().enumerate() {
                if self.lo[v] == self.hi[v] || !t.unit || t.n == 0 {
                    continue;
                }
                let made = t.nl * t.nu;
                if made <= t.n + GROWTH && best.is_none_or(|(_, m)| made < m) {
                    best = Some((v, made));
                }
            }
            let Some((v, _)) = best else {
                return (out, true);
            };
            if self.cons.len() > limit {
                break;
            }
            match self.project_var(v) {
                Some(sh) => out.push(sh),
                None => break,
            }
        }
        (out, false)
    }

    /// Per variable, over the constraints it occurs in (its first term in each): whether
    /// every coefficient is ±1, how many, and one more than the lower and the upper bounds
    /// they give it. One pass over the terms.
    fn tally(&self, out: &mut Vec<Tally>) {
        out.clear();
        out.resize(self.lo.len(), Tally::default());
        for (i, c) in self.cons.iter().enumerate() {
            for &(v, a) in &c.terms {
                let t = &mut out[v];
                if t.last == i + 1 {
                    continue;
                }
                t.last = i + 1;
                t.unit &= a.abs() == 1;
                t.n += 1;
                let (l, u) = (c.lo > i64::MIN / 4, c.hi < i64::MAX / 4);
                let (l, u) = if a > 0 { (l, u) } else { (u, l) };
                t.nl += l as usize;
                t.nu += u as usize;
            }
        }
    }

    /// Fourier–Motzkin elimination of `v` (every coefficient ±1); `None` (unchanged) on
    /// overflow: every new constraint is computed before any constraint moves.
    fn project_var(&mut self, v: usize) -> Option<Shadow> {
        // Bounds `v ≥ c − R` / `v ≤ c − R` as R's terms negated (a span of `rs`) and `c`;
        // the box first.
        let mut rs: Vec<(usize, i64)> = Vec::new();
        let mut lows: Vec<(usize, usize, i64)> = vec![(0, 0, self.lo[v])];
        let mut ups: Vec<(usize, usize, i64)> = vec![(0, 0, self.hi[v])];
        for c in self.cons.iter().filter(|c| c.terms.iter().any(|(w, _)| *w == v)) {
            let a = c.terms.iter().find(|(w, _)| *w == v)?.1;
            // a·v + R ∈ [lo, hi]; a = ±1: v ∈ [a·lo − a·R, a·hi − a·R] (ordered).
            let start = rs.len();
            rs.extend(c.terms.iter().filter(|(w, _)| *w != v).map(|&(w, b)| (w, -a * b)));
            let span = (start, rs.len());
            let (l, u) = if a > 0 { (c.lo, c.hi) } else { (c.hi, c.lo) };
            let (l, u) = (l.checked_mul(a)?, u.checked_mul(a)?);
            if (a > 0 && c.lo > i64::MIN / 4) || (a < 0 && c.hi < i64::MAX / 4) {
                lows.push((span.0, span.1, l));
            }
            if (a > 0 && c.hi < i64::MAX / 4) || (a < 0 && c.lo > i64::MIN / 4) {
                ups.push((span.0, span.1, u));
            }
        }
        let mut made = Vec::with_capacity(lows.len() * ups.len());
        let mut terms = Vec::new();
        for &(ls, le, lc) in &lows {
            for &(us, ue, uc) in &ups {
                // lc + Lt ≤ uc + Ut  ⇔  Lt − Ut ≤ uc − lc
                terms.clear();
                terms.extend_from_slice(&rs[ls..le]);
                for &(w, b) in &rs[us..ue] {
                    terms.push((w, b.checked_neg()?));
                }
                let hi = uc.checked_sub(lc)?;
                let mut t = Vec::with_capacity(terms.len());
                fold(&mut t, &terms);
                made.push(Lin {
                    terms: t,
                    lo: i64::MIN / 4,
                    hi,
                });
            }
        }
        let (with, mut cons): (Vec<Lin>, Vec<Lin>) = std::mem::take(&mut self.cons)
            .into_iter()
            .partition(|c| c.terms.iter().any(|(w, _)| *w == v));
        cons.extend(made);
        self.cons = cons;
        let shadow = Shadow {
            var: v,
            lo: self.lo[v],
            hi: self.hi[v],
            cons: with,
        };
        self.lo[v] = 0;
        self.hi[v] = 0;
        Some(shadow)
    }

    /// Depth-first branch and propagate. `st.saved` is a stack of box copies shared by the
    /// whole search (a node pushes its propagated boxes once and restores them before each
    /// branch), so a node allocates nothing.
    fn search(&self, st: &mut Search, (lo, hi): (&mut [i64], &mut [i64]), budget: &mut u64) -> Answer {
        if *budget == 0 {
            return Answer::Budget;
        }
        *budget -= 1;
        if !self.propagate(st, lo, hi) {
            return Answer::Unsat;
        }
        if let Some(r) = self.wide_rest(lo, hi, budget) {
            return r;
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
        let (lv, hv) = (lo[v], hi[v]);
        let (n, m) = (lo.len(), self.cons.len());
        let (base, dbase) = (st.saved.len(), st.saved_dirty.len());
        st.saved.extend_from_slice(lo);
        st.saved.extend_from_slice(hi);
        st.saved_dirty.extend_from_slice(&st.dirty);
        // Value by value up to ENUM_WIDTH values, else two halves.
        let mid = lv + (hv - lv) / 2;
        let parts = if hv - lv < ENUM_WIDTH { (hv - lv + 1) as usize } else { 2 };
        let mut out = Answer::Unsat;
        for i in 0..parts {
            let (a, b) = match (parts, i) {
                (2, 0) if hv - lv >= ENUM_WIDTH => (lv, mid),
                (2, _) if hv - lv >= ENUM_WIDTH => (mid + 1, hv),
                _ => (lv + i as i64, lv + i as i64),
            };
            lo.copy_from_slice(&st.saved[base..base + n]);
            hi.copy_from_slice(&st.saved[base + n..base + 2 * n]);
            st.dirty.copy_from_slice(&st.saved_dirty[dbase..dbase + m]);
            lo[v] = a;
            hi[v] = b;
            st.touch(v);
            match self.search(st, (lo, hi), budget) {
                Answer::Sat(s) => {
                    st.saved.truncate(base);
                    st.saved_dirty.truncate(dbase);
                    return Answer::Sat(s);
                }
                Answer::Budget => out = Answer::Budget,
                Answer::Unsat => {}
            }
        }
        st.saved.truncate(base);
        st.saved_dirty.truncate(dbase);
        out
    }

    /// At a node where every variable still open is wide (a free parameter and what is
    /// defined from it: `symbolic::params`), the problem with the fixed variables folded into
    /// the constraints' bounds, presolved again: constraints that became one linear form merge
    /// (`q_a − q_b ∈ [1, 1]` and `[0, 0]`: empty) and gcds apply to the wide variables alone,
    /// which bounds propagation cannot see and halving boxes of 2³² values never reaches.
    /// The same solutions (the folded problem is the node's), so exact. Not nested: `None`
    /// inside such a search, and where some open variable is narrow.
    fn wide_rest(&self, lo: &[i64], hi: &[i64], budget: &mut u64) -> Option<Answer> {
        let width = |v: usize| hi[v] as i128 - lo[v] as i128;
        let open = (0..lo.len()).filter(|&v| width(v) > 0);
        if open.clone().next().is_none() || open.clone().any(|v| width(v) <= WIDE) || IN_WIDE.with(|w| w.get()) {
            return None;
        }
        let mut q = Problem {
            lo: lo.to_vec(),
            hi: hi.to_vec(),
            cons: Vec::with_capacity(self.cons.len()),
        };
        for c in &self.cons {
            let mut fixed = 0i128;
            let terms: Vec<(usize, i64)> = c
                .terms
                .iter()
                .filter(|&&(v, a)| {
                    let f = lo[v] == hi[v];
                    if f {
                        fixed += a as i128 * lo[v] as i128;
                    }
                    !f
                })
                .copied()
                .collect();
            let (l, h) = (c.lo as i128 - fixed, c.hi as i128 - fixed);
            let (Ok(l), Ok(h)) = (i64::try_from(l), i64::try_from(h)) else {
                return None;
            };
            q.cons.push(Lin { terms, lo: l, hi: h });
        }
        IN_WIDE.with(|w| w.set(true));
        let r = q.phase(false, budget);
        IN_WIDE.with(|w| w.set(false));
        Some(r)
    }

    /// Whether `x` (one value per variable) lies in every box and satisfies every
    /// constraint.
    pub fn satisfied_by(&self, x: &[i64]) -> bool {
        x.len() == self.lo.len()
            && x.iter().zip(self.lo.iter().zip(&self.hi)).all(|(v, (l, h))| l <= v && v <= h)
            && self.holds(x)
    }

    fn holds(&self, x: &[i64]) -> bool {
        self.cons.iter().all(|c| {
            let s: i128 = c.terms.iter().map(|&(v, a)| a as i128 * x[v] as i128).sum();
            c.lo as i128 <= s && s <= c.hi as i128
        })
    }

    /// Eliminates variable `v` (coefficient `a = ±1`) through equality `i`; `None` (the
    /// problem unchanged) when a coefficient would overflow. The rewritten constraints are
    /// computed into `scratch` before any is replaced (all or none), then copied over the old
    /// ones' storage: a substitution allocates only its record.
    fn substitute(&mut self, (i, v, a): (usize, usize, i64), scratch: &mut Scratch) -> Option<Subst> {
        let c = &self.cons[i];
        // v = a·(lo − Σ_{w≠v} b_w·w)
        let terms: Vec<(usize, i64)> = c
            .terms
            .iter()
            .filter(|(w, _)| *w != v)
            .map(|&(w, b)| Some((w, a.checked_mul(b)?.checked_neg()?)))
            .collect::<Option<_>>()?;
        let k0 = a.checked_mul(c.lo)?;
        let (arena, spans) = (&mut scratch.terms, &mut scratch.spans);
        arena.clear();
        spans.clear();
        for (j, con) in self.cons.iter().enumerate() {
            if j == i {
                continue;
            }
            let Some(pos) = con.terms.iter().position(|(w, _)| *w == v) else {
                continue;
            };
            let start = arena.len();
            arena.extend_from_slice(&con.terms);
            let b = arena.swap_remove(start + pos).1;
            for &(w, x) in &terms {
                let bt = b.checked_mul(x)?;
                match arena[start..].iter_mut().find(|(y, _)| *y == w) {
                    Some(e) => e.1 = e.1.checked_add(bt)?,
                    None => arena.push((w, bt)),
                }
            }
            let mut end = start;
            for r in start..arena.len() {
                if arena[r].1 != 0 {
                    arena[end] = arena[r];
                    end += 1;
                }
            }
            arena.truncate(end);
            let bk = b.checked_mul(k0)?;
            spans.push((j, start, end, con.lo.checked_sub(bk)?, con.hi.checked_sub(bk)?));
        }
        let (vlo, vhi) = (self.lo[v].checked_sub(k0)?, self.hi[v].checked_sub(k0)?);
        for &(j, start, end, lo, hi) in spans.iter() {
            let con = &mut self.cons[j];
            con.terms.clear();
            con.terms.extend_from_slice(&arena[start..end]);
            (con.lo, con.hi) = (lo, hi);
        }
        // The equality's storage holds its replacement, the box of `v` on the form.
        let mut t = self.cons.swap_remove(i).terms;
        t.clear();
        fold(&mut t, &terms);
        self.cons.push(Lin { terms: t, lo: vlo, hi: vhi });
        self.lo[v] = 0;
        self.hi[v] = 0;
        Some((v, terms, k0))
    }

    /// Tightens the boxes; false when some box empties (infeasible). Rounds over the
    /// constraints in order, as many as [`ROUNDS`], until one changes no box; a constraint
    /// none of whose variables' boxes changed since it last ran (`st.dirty` clear) is
    /// skipped: it would change nothing (its tightening is a function of those boxes), so
    /// every round ends with the boxes and the `changed` flag of a full round.
    fn propagate(&self, st: &mut Search, lo: &mut [i64], hi: &mut [i64]) -> bool {
        for _ in 0..ROUNDS {
            let mut changed = false;
            for (i, c) in self.cons.iter().enumerate() {
                if !st.dirty[i] {
                    continue;
                }
                st.dirty[i] = false;
                st.touched.clear();
                match tighten(c, lo, hi, &mut st.touched) {
                    None => return false,
                    Some(false) => {}
                    Some(true) => {
                        changed = true;
                        for k in 0..st.touched.len() {
                            let v = st.touched[k];
                            st.touch(v);
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        true
    }
}

/// The search's reusable state: which constraints each variable occurs in (`occ[first[v]..
/// first[v + 1]]`), which constraints must run at the next propagation (`dirty`), the
/// variables the last tightening changed, and the stacks of saved boxes and flags.
struct Search {
    first: Vec<u32>,
    occ: Vec<u32>,
    dirty: Vec<bool>,
    touched: Vec<usize>,
    saved: Vec<i64>,
    saved_dirty: Vec<bool>,
}

impl Search {
    /// Occurrence lists of `p`; every constraint dirty (the root runs them all).
    fn new(p: &Problem) -> Search {
        let n = p.lo.len();
        let mut count = vec![0u32; n + 1];
        for c in &p.cons {
            for &(v, _) in &c.terms {
                count[v + 1] += 1;
            }
        }
        for v in 0..n {
            count[v + 1] += count[v];
        }
        let mut fill = count.clone();
        let mut occ = vec![0u32; count[n] as usize];
        for (i, c) in p.cons.iter().enumerate() {
            for &(v, _) in &c.terms {
                occ[fill[v] as usize] = i as u32;
                fill[v] += 1;
            }
        }
        Search {
            first: count,
            occ,
            dirty: vec![true; p.cons.len()],
            touched: Vec::new(),
            saved: Vec::new(),
            saved_dirty: Vec::new(),
        }
    }

    /// Marks the constraints of variable `v` to run: its box changed.
    fn touch(&mut self, v: usize) {
        for k in self.first[v]..self.first[v + 1] {
            self.dirty[self.occ[k as usize] as usize] = true;
        }
    }
}

/// One constraint normalized in place ([`Problem::normalize`]): `Some(false)` when it
/// holds for every value (no terms, range containing 0), `None` when it has no integer
/// solution.
fn normal(c: &mut Lin) -> Option<bool> {
    c.terms.sort_unstable();
    let g = c.terms.iter().fold(0, |g, &(_, a)| gcd(g, a));
    if g == 0 {
        return (c.lo <= 0 && c.hi >= 0).then_some(false);
    }
    let neg = c.terms[0].1 < 0;
    let g = if neg { -g } else { g };
    if g != 1 {
        for t in &mut c.terms {
            t.1 /= g;
        }
    }
    let (a, b) = if neg { (c.hi, c.lo) } else { (c.lo, c.hi) };
    // a/g ≤ form ≤ b/g (reversed for a negative divisor); the "unbounded" sentinels
    // stay sentinels (every form's values are far inside them).
    let free = |x: i64| x <= i64::MIN / 4 || x >= i64::MAX / 4;
    // g ≠ 0 here, so the divisions are defined (`None` would only relax the bound).
    let lo = match ceil64(a, g) {
        Some(x) if !free(a) => x,
        _ => i64::MIN / 4,
    };
    let hi = match floor64(b, g) {
        Some(x) if !free(b) => x,
        _ => i64::MAX / 4,
    };
    if lo > hi {
        return None;
    }
    (c.lo, c.hi) = (lo, hi);
    Some(true)
}

/// Appends `terms` to the empty `t`, folding repeated variables and dropping zero
/// coefficients ([`Problem::add`]'s form).
fn fold(t: &mut Vec<(usize, i64)>, terms: &[(usize, i64)]) {
    for &(v, c) in terms {
        // A sum that would overflow stays two terms of the same variable (still exact).
        match t.iter_mut().find(|(w, x)| *w == v && x.checked_add(c).is_some()) {
            Some(e) => e.1 += c,
            None => t.push((v, c)),
        }
    }
    t.retain(|&(_, c)| c != 0);
}

/// One variable's constraints as projection counts them ([`Problem::tally`]); `last`: one
/// more than the last constraint counted.
#[derive(Clone, Copy)]
struct Tally {
    unit: bool,
    n: usize,
    nl: usize,
    nu: usize,
    last: usize,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            unit: true,
            n: 0,
            nl: 1,
            nu: 1,
            last: 0,
        }
    }
}

/// A presolved problem ([`Problem::presolve`]): the reduced problem, its projected and
/// eliminated variables, whether projection ended for want of candidates (`clean`) and
/// whether normalization found it infeasible; the state of its last search.
struct Reduced {
    p: Problem,
    shadows: Vec<Shadow>,
    subst: Vec<Subst>,
    clean: bool,
    unsat: bool,
    search: std::cell::Cell<Option<Search>>,
    /// The variables whose boxes [`Problem::cuts`] read.
    read: Vec<usize>,
}

impl Reduced {
    /// Searches the reduced problem (with `bx`: the box of one variable replaced) and
    /// recovers a solution of the original.
    fn finish(&self, bx: Option<(usize, i64, i64)>, budget: &mut u64) -> Answer {
        let mut lo = self.p.lo.clone();
        let mut hi = self.p.hi.clone();
        if let Some((v, l, h)) = bx {
            (lo[v], hi[v]) = (l, h);
        }
        // The occurrence lists and stacks of an earlier search of this problem serve again.
        let mut st = self.search.take().unwrap_or_else(|| Search::new(&self.p));
        st.dirty.fill(true);
        let r = self.p.search(&mut st, (&mut lo, &mut hi), budget);
        self.search.set(Some(st));
        match r {
            Answer::Sat(mut x) => {
                for sh in self.shadows.iter().rev() {
                    x[sh.var] = sh.value(&x);
                }
                for (v, terms, c) in self.subst.iter().rev() {
                    let s: i128 = terms.iter().map(|&(w, a)| a as i128 * x[w] as i128).sum();
                    x[*v] = (*c as i128 + s) as i64;
                }
                Answer::Sat(x)
            }
            other => other,
        }
    }

    /// Whether this presolve, made with `var`'s box `[l0, h0]`, is the one of the problem
    /// with that box replaced by `[l, h]`: elimination reads no box but those of the
    /// variables it eliminates, normalization none, and projection only those of the
    /// variables it projects and whether each candidate's box is a single value. So it is
    /// when `var` was neither eliminated nor projected, was a candidate (`l0 < h0`), and
    /// either stays one (`l < h`) or projection stopped for want of candidates (`clean`:
    /// with one candidate fewer it makes the same choices and stops the same way), and no
    /// cut read its box ([`Problem::cuts`]).
    fn reusable(&self, var: usize, (l0, h0): (i64, i64), (l, h): (i64, i64)) -> bool {
        l0 < h0
            && (l < h || self.clean)
            && self.subst.iter().all(|s| s.0 != var)
            && self.shadows.iter().all(|s| s.var != var)
            && !self.read.contains(&var)
    }
}

/// A problem to be solved with several boxes of one variable ([`Problem::presolved`]):
/// presolved once, at the first solve, and reused wherever that is exact
/// (`Reduced::reusable`: the variable neither eliminated nor projected, and its box read by
/// no projection choice and no cut); elsewhere a solve is the plain [`Problem::solve`].
pub struct Presolved<'p> {
    p: &'p Problem,
    var: usize,
    /// The presolves without cuts and with them ([`two_phase`]).
    ready: [std::cell::OnceCell<Reduced>; 2],
}

impl Presolved<'_> {
    /// The problem this presolves.
    pub fn problem(&self) -> &Problem {
        self.p
    }

    /// The variable whose box the solves set.
    pub fn var(&self) -> usize {
        self.var
    }

    /// [`Problem::solve`] of the problem with the box of the variable set to `[lo, hi]`.
    pub fn solve(&self, (lo, hi): (i64, i64), budget: &mut u64) -> Answer {
        let v = self.var;
        let before = *budget;
        let out = two_phase(budget, |cut, b| {
            let r = self.ready[cut as usize].get_or_init(|| self.p.presolve(cut));
            if !r.reusable(v, (self.p.lo[v], self.p.hi[v]), (lo, hi)) {
                let mut q = self.p.clone();
                (q.lo[v], q.hi[v]) = (lo, hi);
                return q.phase(cut, b);
            }
            if r.unsat { Answer::Unsat } else { r.finish(Some((v, lo, hi)), b) }
        });
        NODES.with(|n| n.set(n.get() + before - *budget));
        if dumping() {
            let mut q = self.p.clone();
            (q.lo[v], q.hi[v]) = (lo, hi);
            dump(&q, &out, before - *budget);
        }
        out
    }
}

/// A variable projected out by [`Problem::project`]: its box and the constraints it had.
struct Shadow {
    var: usize,
    lo: i64,
    hi: i64,
    cons: Vec<Lin>,
}

impl Shadow {
    /// The least value of the variable its constraints allow given the others' values (one
    /// exists when the projected problem is satisfied: the projection is exact).
    fn value(&self, x: &[i64]) -> i64 {
        let mut l = self.lo as i128;
        for c in &self.cons {
            let mut a = 0i128;
            let mut r = 0i128;
            for &(w, b) in &c.terms {
                if w == self.var {
                    a = b as i128;
                } else {
                    r += b as i128 * x[w] as i128;
                }
            }
            // a·v ∈ [lo − r, hi − r], a = ±1
            let (lo, hi) = (c.lo as i128 - r, c.hi as i128 - r);
            l = l.max(if a > 0 { lo } else { -hi });
        }
        debug_assert!(l <= self.hi as i128);
        l as i64
    }
}

/// One constraint's bounds propagation; `None` when infeasible, else whether a box changed.
/// In `i64` when the sum of the terms' largest magnitudes is below `2^61` (then every partial
/// sum, and a bound minus one, fits), else in `i128` ([`tighten_wide`]): same result.
fn tighten(c: &Lin, lo: &mut [i64], hi: &mut [i64], touched: &mut Vec<usize>) -> Option<bool> {
    const LIMIT: i64 = 1 << 61;
    let (mut smin, mut smax, mut fixed, mut g, mut mag) = (0i64, 0i64, 0i64, 0i64, 0i64);
    // The widest free term's range, `|a|·(hi − lo)`.
    let mut width = 0i64;
    for &(v, a) in &c.terms {
        let (Some(x), Some(y)) = (a.checked_mul(lo[v]), a.checked_mul(hi[v])) else {
            return tighten_wide(c, lo, hi, touched);
        };
        mag = match mag.checked_add(x.unsigned_abs().max(y.unsigned_abs()).min(LIMIT as u64) as i64) {
            Some(m) if m < LIMIT => m,
            _ => return tighten_wide(c, lo, hi, touched),
        };
        smin += x.min(y);
        smax += x.max(y);
        if lo[v] == hi[v] {
            fixed += x;
        } else {
            width = width.max((x - y).abs());
            if g != 1 {
                // (gcd(1, a) = 1: no division once the gcd is 1.)
                g = gcd(g, a);
            }
        }
    }
    let (clo, chi) = (c.lo, c.hi);
    if clo.unsigned_abs() >= LIMIT as u64 * 2 || chi.unsigned_abs() >= LIMIT as u64 * 2 {
        return tighten_wide(c, lo, hi, touched);
    }
    if smax < clo || smin > chi {
        return None;
    }
    if g > 1 {
        let first = (clo - fixed).div_euclid(g) * g;
        let first = if first < clo - fixed { first + g } else { first };
        if first > chi - fixed {
            return None;
        }
    } else if g == 0 && (fixed < clo || fixed > chi) {
        return None;
    }
    // A term's box tightens only where the others' extremes leave it less room than its
    // range: `a·v ≤ chi − (smin − min a·v)` cuts `v` iff `chi − smin < |a|·(hi − lo)`
    // (likewise from below); with room for the widest, none does.
    if chi - smin >= width && smax - clo >= width {
        return Some(false);
    }
    let mut changed = false;
    for &(v, a) in &c.terms {
        if lo[v] == hi[v] {
            continue;
        }
        let (x, y) = (a * lo[v], a * hi[v]);
        let (rmin, rmax) = (smin - x.min(y), smax - x.max(y));
        let (tlo, thi) = (clo - rmax, chi - rmin);
        let (l, h) = if a > 0 { (tlo, thi) } else { (thi, tlo) };
        // (Division by ±1 without dividing: the same values, `None` where negating overflows.)
        let (nlo, nhi) = match a {
            1 => (Some(l), Some(h)),
            -1 => (l.checked_neg(), h.checked_neg()),
            _ => (ceil64(l, a), floor64(h, a)),
        };
        let (Some(nlo), Some(nhi)) = (nlo, nhi) else {
            continue;
        };
        let nlo = nlo.max(lo[v]);
        let nhi = nhi.min(hi[v]);
        if nlo > nhi {
            return None;
        }
        if nlo != lo[v] || nhi != hi[v] {
            lo[v] = nlo;
            hi[v] = nhi;
            changed = true;
            touched.push(v);
        }
    }
    Some(changed)
}

/// `⌊a / b⌋` in `i64` (`None`: `b = 0` or overflow); no `i128` division.
fn floor64(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let (a, b) = if b < 0 { (a.checked_neg()?, b.checked_neg()?) } else { (a, b) };
    Some(a.div_euclid(b))
}

/// `⌈a / b⌉` in `i64` (`None`: `b = 0` or overflow).
fn ceil64(a: i64, b: i64) -> Option<i64> {
    floor64(a.checked_neg()?, b)?.checked_neg()
}

/// [`tighten`] over `i128`.
fn tighten_wide(c: &Lin, lo: &mut [i64], hi: &mut [i64], touched: &mut Vec<usize>) -> Option<bool> {
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
        let (l, h) = if a > 0 { (tlo, thi) } else { (thi, tlo) };
        // A zero coefficient (never built by `add`) tightens nothing.
        let (Some(nlo), Some(nhi)) = (ceil_div_wide(l, a), floor_div_wide(h, a)) else {
            continue;
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
            touched.push(v);
        }
    }
    Some(changed)
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

    /// Xorshift numbers below `n`.
    fn rng(mut seed: u64) -> impl FnMut(i64) -> i64 {
        move |n: i64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as i64
        }
    }

    /// A random problem: small boxes, coefficients mostly ±1 (so that elimination and
    /// projection run), equalities and one-sided constraints among the others.
    fn random_problem(rnd: &mut impl FnMut(i64) -> i64) -> Problem {
        let mut p = Problem::default();
        let n = 2 + rnd(4) as usize;
        for _ in 0..n {
            let l = rnd(7) - 3;
            p.var(l, l + rnd(9));
        }
        for _ in 0..1 + rnd(4) {
            let mut terms: Vec<(usize, i64)> = Vec::new();
            for v in 0..n {
                if rnd(3) != 0 {
                    terms.push((v, [1, -1, 1, -1, 2, -3, 4, 8][rnd(8) as usize]));
                }
            }
            let l = rnd(15) - 7;
            match rnd(4) {
                0 => p.add(&terms, l, l),
                1 => p.add(&terms, i64::MIN / 4, l),
                _ => p.add(&terms, l, l + rnd(6)),
            }
        }
        p
    }

    fn brute(p: &Problem) -> bool {
        let mut x = p.lo.clone();
        if x.iter().zip(&p.hi).any(|(l, h)| l > h) {
            return false;
        }
        #[expect(clippy::needless_range_loop, reason = "an odometer over three lists")]
        'all: loop {
            if p.holds(&x) {
                return true;
            }
            for i in 0..x.len() {
                if x[i] < p.hi[i] {
                    x[i] += 1;
                    continue 'all;
                }
                x[i] = p.lo[i];
            }
            return false;
        }
    }

    /// A random system shaped like a shared index read back through `div`/`rem`: `t·g + e
    /// = q·g + r` with `r ∈ [0, g)`, plus random range constraints whose coefficients are
    /// multiples of `g` or small (what [`Problem::cuts`] works on).
    fn quotient_problem(rnd: &mut impl FnMut(i64) -> i64) -> Problem {
        let mut p = Problem::default();
        let g = 2 + rnd(3);
        let t = p.var(0, rnd(5));
        let e = p.var(0, g - 1 - rnd(2));
        let q = p.var(-1, 1 + rnd(5));
        let r = p.var(0, g - 1);
        p.add(&[(t, g), (e, 1), (q, -g), (r, -1)], 0, 0);
        let n = p.lo.len();
        for _ in 0..rnd(3) {
            let terms: Vec<(usize, i64)> = (0..n).map(|v| (v, [0, 1, -1, g, -g, 2 * g][rnd(6) as usize])).collect();
            let l = rnd(4 * g) - 2 * g;
            p.add(&terms, l, l + rnd(g + 1));
        }
        p
    }

    #[test]
    fn cuts_agree_with_enumeration_on_quotient_systems() {
        // Presolve with cuts decides every system as enumeration does, and its solutions
        // satisfy the original; some systems are decided by a cut (no branching).
        let mut rnd = rng(0x5bd1_e995_3c6e_f372);
        let (mut cut, mut sat) = (0, 0);
        for _ in 0..800 {
            let p = quotient_problem(&mut rnd);
            let mut read = Vec::new();
            let (mut e, _) = p.eliminate();
            if e.normalize() && e.cuts(&mut read).is_none_or(|c| !c.is_empty()) {
                cut += 1;
            }
            let truth = brute(&p);
            for cut in [true, false] {
                let mut budget = 1u64 << 20;
                let got = p.phase(cut, &mut budget);
                assert_eq!(matches!(got, Answer::Sat(_)), truth, "{p:?}");
                if let Answer::Sat(x) = got {
                    assert!(p.satisfied_by(&x), "{p:?} {x:?}");
                }
            }
            sat += truth as usize;
        }
        assert!(cut > 100 && sat > 100 && sat < 700, "cuts {cut}, sat {sat}");
    }

    #[test]
    fn a_quotient_equal_to_the_thread_is_found_by_a_cut() {
        // 0 ≤ e + 64·(t − q) ≤ 63 with e ∈ [0, 63] is q = t: with t₁ < t₂ and both units
        // equal, the question is infeasible; branching alone decides it by trying threads.
        let mut p = Problem::default();
        let (t1, t2) = (p.var(0, 127), p.var(0, 127));
        let (e1, e2) = (p.var(0, 63), p.var(0, 63));
        let (q1, q2) = (p.var(0, 127), p.var(0, 127));
        let (r1, r2) = (p.var(0, 63), p.var(0, 63));
        let u = p.var(0, 1 << 16);
        p.add(&[(t1, 1), (t2, -1)], i64::MIN / 4, -1);
        p.add(&[(e1, 1), (t1, 64), (q1, -64), (r1, -1)], 0, 0);
        p.add(&[(e2, 1), (t2, 64), (q2, -64), (r2, -1)], 0, 0);
        p.add(&[(u, 1), (q1, -128), (r1, -2)], 0, 1);
        p.add(&[(u, 1), (q2, -128), (r2, -2)], 0, 1);
        let nodes = |cut| {
            let mut budget = 1u64 << 20;
            assert_eq!(p.phase(cut, &mut budget), Answer::Unsat);
            (1u64 << 20) - budget
        };
        let (with, without) = (nodes(true), nodes(false));
        assert!(with * 8 < without, "{with} nodes with cuts, {without} without");
        let mut budget = 1u64 << 20;
        assert_eq!(p.solve(&mut budget), Answer::Unsat);
        assert_eq!((1u64 << 20) - budget, CUT_AFTER + with, "the two phases' nodes");
    }

    #[test]
    fn presolved_solves_equal_plain_solves() {
        // Every solve of a presolved problem (any box of its variable, any budget) gives
        // the plain solve's answer, solution and nodes, whether the presolve is reused or
        // not; both agree with enumeration.
        let mut rnd = rng(0x9e37_79b9_7f4a_7c15);
        let mut reused = 0;
        for _ in 0..600 {
            let p = random_problem(&mut rnd);
            for v in 0..p.lo.len() {
                let pre = p.presolved(v);
                let (l, h) = (p.lo[v], p.hi[v]);
                for _ in 0..4 {
                    let a = l - 1 + rnd(h - l + 3);
                    let b = a + rnd(4) - 1;
                    if a > b {
                        continue;
                    }
                    let mut q = p.clone();
                    (q.lo[v], q.hi[v]) = (a, b);
                    for budget in [1u64 << 20, 3, 1, 0] {
                        let (mut x, mut y) = (budget, budget);
                        let plain = q.solve(&mut x);
                        let re = pre.solve((a, b), &mut y);
                        assert_eq!((&plain, x), (&re, y), "{q:?}");
                        if budget > 1000 {
                            assert_eq!(matches!(plain, Answer::Sat(_)), brute(&q), "{q:?}");
                        }
                    }
                    let r = pre.ready[0].get().expect("presolved at the first solve");
                    reused += r.reusable(v, (l, h), (a, b)) as usize;
                }
            }
        }
        assert!(reused > 500, "the presolve is reused ({reused} times)");
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
