//! Questions on accesses that index by an operation of a constant and a loop variable (the
//! shifts of tree reductions and scans: `%s = shr 128, %i`, `%d = shl 1, %i`, under guards
//! like `%t < %s`), decided as one affine question per value of that loop's iteration index.
//!
//! **Formulation.** Such a value is no affine form of the key `k = first + step·i`, but for
//! each fixed `i` it is a constant. If the sides' forms need tables only on the keys of
//! exact domains (constant loops, `LoopDomain::Exact`), the instance set of an access is the
//! disjoint union over the indices `v` of those levels of the instance sets with `i = v`
//! (every instance has exactly one index per level). So a question splits into *pieces*,
//! one per combination of fixed indices of the source's levels and the destination's:
//!
//! - pair conflict: `intersect` and `conflict` are the unions (bitwise or) of the pieces'
//!   masks; some conflicting pair of threads lies in two warps iff it does in some piece,
//!   so `intra_warp` is "some conflict, and every piece with a conflict is intra-warp";
//! - in-flight intersection and self race: "in some piece".
//!
//! In a piece both keys of a shared level are constants: unequal ones (or, at the distance
//! level, a negative or non-multiple difference) make the piece empty before anything is
//! built (`pairs::keys_may_meet`), and equal ones give the distance bit directly
//! (`pairs::distance`). What remains is the affine question the engine decides in a few
//! nodes. Templates are built per access and pin combination, so a pin combination shared
//! by several questions is built once; piece answers are remembered under their
//! `PairKey` like any other question's.
//!
//! This is the split on the loop key that the table encoding (`Builder::table`) leaves to
//! the search (docs/symbolic.md, "Shifts by a loop variable"): a table's 0/1 variables are
//! branched first, and each of the many solves of a question branches through them again.
//!
//! **Falls back** (the unsplit path: tables above the minimum budget, else enumeration)
//! when the question's enumeration is small (fewer than [`MIN_INSTANCES`] thread
//! iterations: cheaper than the pieces' solves), when a table is needed on anything but an
//! exact loop key (a thread id, a `div`/`rem`
//! existential, a periodic key), or when there would be more than [`MAX_PIECES`]
//! combinations. A piece without an encoding, or past the shared budget, makes the whole
//! question fall back (enumeration, exact).
//!
//! **Complexity.** At most [`MAX_PIECES`] pieces, each an affine pair question (a few solves
//! of a problem with the loop keys and tables gone); pieces are built lazily and empty
//! ones cost two template lookups.

use super::bits::Distinct;
use super::pairs::{self, Built, Distance, Keys, Known, Made, Mode, PairQuestion, decide_within, question_at};
use super::solve::Problem;
use crate::analysis::conflicts::PairConflict;
use crate::analysis::footprint::{Footprints, LoopDomain};
use crate::ir::OpKind;

/// Loop levels (positions in the access's loop nest) to split on, with the number of
/// iteration indices of each, sorted by level; `None`: some operation needs a table of
/// something other than an exact loop key (no split).
pub type Levels = Option<Vec<(usize, i64)>>;

/// Most pieces (combinations of fixed iteration indices of both sides, before those that
/// violate the key relation are skipped) a question splits into; beyond it the question is
/// not split.
pub const MAX_PIECES: i64 = 256;

/// Fewest instances (threads × iterations, both sides of a question together) whose
/// enumeration a split replaces: below it enumerating is cheaper than the pieces' solves
/// (measured: `softmax-row` and `layernorm-row`, 128 threads × 7 iterations, took 1.3–1.5×
/// the I refs split; `prefix-scan` and `reduction-tree`, 256 × 8, 0.78–0.88×:
/// docs/performance.md, "shifts").
pub const MIN_INSTANCES: u64 = 2048;

thread_local! {
    static FORCE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Splits every splittable question of this thread whatever its size (on), or only those of
/// at least [`MIN_INSTANCES`] (off, the default): tests of the split turn it on on small
/// kernels.
pub fn force_split(on: bool) {
    FORCE.with(|f| f.set(on));
}

/// Whether a question over `inst` instances is worth splitting.
fn worth(inst: u64) -> bool {
    inst >= MIN_INSTANCES || FORCE.with(|f| f.get())
}

/// Search nodes each solve of the relaxed pre-checks may visit (outside the question's
/// budget: a pre-check past it proves nothing and the pieces decide alone).
const PRECHECK_NODES: u64 = 4;

/// The split levels of a side whose forms wanted tables on `wanted` (`Builder::wanted`):
/// each must be the key variable of an exact domain among `keys`.
pub(super) fn levels(fp: &Footprints, ai: usize, p: &Problem, keys: &Keys, wanted: &[usize]) -> Levels {
    let loops = &fp.accesses[ai].loops;
    let mut out: Vec<(usize, i64)> = Vec::new();
    for &w in wanted {
        let j = keys
            .iter()
            .position(|(k, _)| k.as_ref().is_some_and(|k| k.terms.len() == 1 && k.terms[0].0 == w))?;
        let exact = matches!(loops.get(j).and_then(|l| fp.domains.get(l)), Some(LoopDomain::Exact { .. }));
        if !exact {
            return None;
        }
        if !out.iter().any(|&(x, _)| x == j) {
            out.push((j, p.hi[w] - p.lo[w] + 1));
        }
    }
    out.sort_unstable();
    Some(out)
}

/// The split levels of access `ai` (recorded when its template without tables is built).
fn of(fp: &Footprints, ai: usize) -> Levels {
    if let Some(l) = fp.sym_sides.split.borrow().get(&ai) {
        return l.clone();
    }
    let _ = pairs::template(fp, ai, Mode::Plain, &[]);
    fp.sym_sides.split.borrow().get(&ai).cloned().unwrap_or(Some(Vec::new()))
}

/// Number of combinations of indices of `levels`.
fn count(levels: &[(usize, i64)]) -> i64 {
    levels.iter().fold(1i64, |n, &(_, m)| n.saturating_mul(m.max(0)))
}

/// Every combination of indices of `levels`, as pins by level (`None` at the other levels).
fn pins(levels: &[(usize, i64)]) -> Vec<Vec<Option<i64>>> {
    let len = levels.iter().map(|&(j, _)| j + 1).max().unwrap_or(0);
    let mut out = vec![vec![None; len]];
    for &(j, n) in levels {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..n).map(move |v| {
                    let mut q = p.clone();
                    q[j] = Some(v);
                    q
                })
            })
            .collect();
    }
    out
}

/// The pieces of a pair question: the pins of the source and of the destination.
pub(super) struct Plan {
    a: Vec<Vec<Option<i64>>>,
    b: Vec<Vec<Option<i64>>>,
}

/// The number of iteration indices of level `j` of access `ai` where its key there is a
/// variable over an exact domain (the access depends on that loop).
fn exact_level(fp: &Footprints, ai: usize, j: usize) -> Option<i64> {
    let k = fp.k;
    let l = *fp.accesses[ai].loops.get(j)?;
    let Some(LoopDomain::Exact { trip, .. }) = fp.domains.get(&l).copied() else {
        return None;
    };
    let OpKind::For { .. } = k.ops[l].kind else {
        return None;
    };
    let iv = k.region_args(k.ops[l].regions[0])[0];
    (trip > 0 && fp.depends_on(ai, l, iv)).then_some(trip)
}

/// `to`'s levels plus the related levels (before `plen`) that `from` splits on and `to`
/// has a key of an exact domain at: both keys fixed, the pieces whose keys violate the
/// relation are skipped unbuilt and the others have a fixed distance.
fn with_related(fp: &Footprints, to: (usize, &[(usize, i64)]), from: &[(usize, i64)], plen: usize) -> Vec<(usize, i64)> {
    let mut out = to.1.to_vec();
    for &(j, _) in from.iter().filter(|&&(j, _)| j < plen) {
        if !out.iter().any(|&(x, _)| x == j)
            && let Some(n) = exact_level(fp, to.0, j)
        {
            out.push((j, n));
        }
    }
    out.sort_unstable();
    out
}

impl Plan {
    /// The templates of one side's pieces (looked up once per question, not per piece).
    fn sides(&self, fp: &Footprints, ai: usize, pins: &[Vec<Option<i64>>]) -> Vec<Made> {
        pins.iter().map(|p| pairs::template(fp, ai, Mode::Plain, p)).collect()
    }
}

/// The split of the pair question of `ai` and `bi` with `plen` related levels, or `None`
/// (not split: no side needs it, a side cannot be split, or too many pieces).
pub(super) fn plan(fp: &Footprints, ai: usize, bi: usize, plen: usize) -> Option<Plan> {
    if !worth(pairs::instances(fp, ai).saturating_add(pairs::instances(fp, bi))) {
        return None;
    }
    let (la, lb) = (of(fp, ai)?, of(fp, bi)?);
    if la.is_empty() && lb.is_empty() {
        return None;
    }
    let (la, lb) = (with_related(fp, (ai, &la), &lb, plen), with_related(fp, (bi, &lb), &la, plen));
    if count(&la).saturating_mul(count(&lb)) > MAX_PIECES {
        return None;
    }
    Some(Plan {
        a: pins(&la),
        b: pins(&lb),
    })
}

/// The pair conflict as the union of its pieces' (module doc); `None` to enumerate.
pub(super) fn pair_conflict(
    fp: &Footprints,
    plan: &Plan,
    (ai, bi): (usize, usize),
    rel: (usize, Option<usize>),
) -> Option<PairConflict> {
    let left = pairs::set_budget(fp, ai, bi);
    let mut acc = Acc {
        out: PairConflict::default(),
        intra: true,
        facts: Facts::default(),
    };
    let relaxed_sides = (pairs::template(fp, ai, Mode::Relaxed, &[]), pairs::template(fp, bi, Mode::Relaxed, &[]));
    match question_at(fp, (ai, bi), rel, None, (&relaxed_sides.0, &relaxed_sides.1), left) {
        Some(Built::Nothing) => return Some(acc.out),
        Some(Built::New(_, q)) => {
            acc.facts = relaxed(&q);
            if acc.facts.none {
                return Some(acc.out);
            }
        }
        _ => {}
    }
    let (sa, sb) = (plan.sides(fp, ai, &plan.a), plan.sides(fp, bi, &plan.b));
    for ta in &sa {
        for tb in &sb {
            if let Some(m) = fixed_bit(fp, (ai, bi), rel, (ta, tb))
                && acc.settled(m)
            {
                continue;
            }
            match question_at(fp, (ai, bi), rel, None, (ta, tb), left)? {
                Built::Nothing => {}
                Built::Known(Known::Pair(r)) => acc.merge(&r?),
                Built::Known(Known::Meets(_)) => return None,
                Built::New(_, q) => piece(&q, &mut acc)?,
            }
        }
    }
    acc.out.intra_warp = acc.out.conflict != 0 && acc.intra;
    Some(acc.out)
}

/// The distance bits of the piece `pins` of a pair question, where they follow from the
/// keys alone: `1` without a distance level, the bit of two fixed keys at it
/// (`pairs::question_at` builds the same `Distance::Fixed`); `None` otherwise or where a
/// template is missing.
fn fixed_bit(fp: &Footprints, (ai, bi): (usize, usize), (_, var): (usize, Option<usize>), (ta, tb): (&Made, &Made)) -> Option<u64> {
    let Some(j) = var else { return Some(1) };
    let (Ok(Some(ta)), Ok(Some(tb))) = (ta, tb) else {
        return None;
    };
    let key = |t: &pairs::Template| t.keys.get(j).cloned().flatten().and_then(|k| k.as_const());
    let (x, y) = (key(ta)?, key(tb)?);
    let (la, lb) = (&fp.accesses[ai].loops, &fp.accesses[bi].loops);
    let loops = if la.len() >= lb.len() { la } else { lb };
    match fp.domains.get(loops.get(j)?).copied()? {
        LoopDomain::Exact { step, .. } => Some(pairs::exact_bit(x, y, step)),
        _ => None,
    }
}

/// What the relaxed question (every table a free variable over its values: more instances
/// than there are) proves absent, for every piece at once.
#[derive(Default)]
struct Facts {
    /// No instance pair at all.
    none: bool,
    /// No pair of different threads.
    no_conflict: bool,
    /// No pair of threads in two warps.
    no_cross: bool,
}

/// The [`Facts`] of a relaxed question: infeasible relaxed problems (a budget or a
/// feasible one proves nothing). Each solve gets [`PRECHECK_NODES`]; the question's budget
/// is left as it was.
fn relaxed(q: &PairQuestion) -> Facts {
    let left = pairs::budget_left();
    let infeasible = |ps: &[Problem]| {
        pairs::set_budget_left(PRECHECK_NODES * ps.len() as u64);
        pairs::any_sat(ps) == Some(false)
    };
    let none = infeasible(std::slice::from_ref(&q.p));
    let (no_conflict, no_cross) = match q.rel {
        Distinct::Threads(ta, tb) => {
            let no_conflict = none || infeasible(&pairs::distinct(&q.p, ta, tb, None));
            (no_conflict, no_conflict)
        }
        _ => (none, none),
    };
    pairs::set_budget_left(left);
    Facts {
        none,
        no_conflict,
        no_cross,
    }
}

/// The pieces decided so far: the masks, whether no piece has a conflicting pair in two
/// warps, and the relaxed question's facts.
struct Acc {
    out: PairConflict,
    intra: bool,
    facts: Facts,
}

impl Acc {
    /// Whether a piece at distance bits `m` can change nothing: no bit, or its bits known
    /// to conflict and no cross-warp pair can matter, or conflicts excluded and its bits
    /// known to intersect.
    fn settled(&self, m: u64) -> bool {
        let (o, f) = (&self.out, &self.facts);
        m == 0
            || (m & !o.conflict == 0 && (!self.intra || f.no_cross))
            || (f.no_conflict && m & !o.intersect == 0)
    }

    fn merge(&mut self, r: &PairConflict) {
        self.out.intersect |= r.intersect;
        self.out.conflict |= r.conflict;
        self.intra &= r.conflict == 0 || r.intra_warp;
    }
}

/// Adds one piece to `acc`. A piece at one distance bit `m` whose threads are variables
/// asks only what can still change the answer: nothing when `m` is a known conflict and no
/// cross-warp pair can matter (one is known, the relaxed question or the guards' thread
/// ranges exclude them); else one solve for an intersection, whose solution may show two
/// threads (and two warps) at once, then the thread and warp splits only where still
/// needed. Any other piece is decided in full (`pairs::decide_within`). `None`: budget.
fn piece(q: &PairQuestion, acc: &mut Acc) -> Option<()> {
    let (Distance::Fixed(m), Distinct::Threads(ta, tb)) = (&q.dist, q.rel) else {
        let r = decide_within(q)?;
        acc.merge(&r);
        return Some(());
    };
    let m = *m;
    let new_x = m & !acc.out.intersect != 0;
    let new_c = m & !acc.out.conflict != 0 && !acc.facts.no_conflict;
    let cross_open = acc.intra && !acc.facts.no_cross && !one_warp(q, ta, tb);
    if acc.settled(m) || (!new_x && !new_c && !cross_open) {
        return Some(());
    }
    let Some(x) = pairs::witness(std::slice::from_ref(&q.p))? else {
        return Some(());
    };
    acc.out.intersect |= m;
    let w = q.warp.max(1);
    let (mut conflict, mut cross) = (x[ta] != x[tb], x[ta] / w != x[tb] / w);
    let mut no_pair = acc.facts.no_conflict;
    if !conflict && new_c {
        match pairs::witness(&pairs::distinct(&q.p, ta, tb, None))? {
            Some(y) => (conflict, cross) = (true, y[ta] / w != y[tb] / w),
            None => no_pair = true,
        }
    }
    if cross_open && !cross && !no_pair && pairs::any_sat(&pairs::cross_warp(q, ta, tb)?)? {
        (conflict, cross) = (true, true);
    }
    if conflict {
        acc.out.conflict |= m;
    }
    if cross {
        acc.intra = false;
    }
    Some(())
}

/// Whether the guards alone keep both thread variables in one warp: the variables' boxes,
/// tightened by the problem's constraints on one of them alone (a guard `t < s` with `s`
/// fixed by the piece), lie in one warp. Sufficient, not necessary.
fn one_warp(q: &PairQuestion, ta: usize, tb: usize) -> bool {
    let w = q.warp.max(1);
    let range = |t: usize| {
        let (mut lo, mut hi) = (q.p.lo[t], q.p.hi[t]);
        for c in &q.p.cons {
            if let [(v, a)] = c.terms[..]
                && v == t
                && a != 0
            {
                // a·t ∈ [c.lo, c.hi] (the unbounded sentinels negate without overflow).
                let (l, h) = if a > 0 { (c.lo, c.hi) } else { (-c.hi, -c.lo) };
                let a = a.abs();
                lo = lo.max(-((-l).div_euclid(a)));
                hi = hi.min(h.div_euclid(a));
            }
        }
        (lo, hi)
    };
    let ((alo, ahi), (blo, bhi)) = (range(ta), range(tb));
    if alo > ahi || blo > bhi || alo < 0 || blo < 0 {
        return alo > ahi || blo > bhi;
    }
    let first = alo / w;
    ahi / w == first && blo / w == first && bhi / w == first
}

/// `pairs::intersects_at` as "in some piece"; `None` to enumerate.
pub(super) fn intersects_at(
    fp: &Footprints,
    plan: &Plan,
    (ai, bi): (usize, usize),
    plen: usize,
    fix: Option<(usize, i64)>,
) -> Option<bool> {
    let left = pairs::set_budget(fp, ai, bi);
    let (sa, sb) = (plan.sides(fp, ai, &plan.a), plan.sides(fp, bi, &plan.b));
    for ta in &sa {
        for tb in &sb {
            let meets = match question_at(fp, (ai, bi), (plen, None), Some(fix), (ta, tb), left)? {
                Built::Nothing => false,
                Built::Known(Known::Meets(r)) => r?,
                Built::Known(Known::Pair(_)) => return None,
                Built::New(key, q) => {
                    let r = pairs::any_sat(std::slice::from_ref(&q.p))?;
                    fp.sym_sides.answers.borrow_mut().insert(key, Known::Meets(Some(r)));
                    r
                }
            };
            if meets {
                return Some(true);
            }
        }
    }
    Some(false)
}

/// The split levels of access `ai`'s self-race question, when it splits.
pub(super) fn self_levels(fp: &Footprints, ai: usize) -> Option<Vec<(usize, i64)>> {
    if !worth(pairs::instances(fp, ai).saturating_mul(2)) {
        return None;
    }
    let l = of(fp, ai)?;
    (!l.is_empty() && count(&l) <= MAX_PIECES).then_some(l)
}

/// `pairs::self_race` as "in some piece" (both sides of a self race share their keys, so a
/// piece fixes one index per level), within the budget set by the caller.
pub(super) fn self_race(fp: &Footprints, ai: usize, levels: &[(usize, i64)]) -> Option<bool> {
    for pins in pins(levels) {
        if pairs::self_race_at(fp, ai, &pins, Mode::Plain)? {
            return Some(true);
        }
    }
    Some(false)
}
