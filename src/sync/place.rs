//! The optimal placer: fewest barriers executed, then fewest written.
//!
//! Formulation (docs/placement.md): every pending hazard comes with its coverage — a range
//! (or an arc across a loop's back-edge) of gaps in its *home* region, plus ranges in deeper
//! regions on the accesses' chains. Each region's gaps all cost the same (the product of the
//! enclosing trip counts), and a deeper region never costs less. Regions are solved bottom-up
//! (innermost first, Darte & Schreiber, PPoPP 2005: optimal per level):
//!
//! - *Straight-line region*: the home ranges are intervals on a line of gaps. The greedy that
//!   sorts them by right end and stabs the first unstabbed one at its right end is optimal
//!   (classic interval stabbing; the stabbed intervals are pairwise disjoint, a matching lower
//!   bound).
//! - *Loop body*: loop-carried hazards with a conflict at distance 1 are arcs that wrap the
//!   back-edge; hazards carried only at distance ≥ 2 need any gap of the body. Circular-arc
//!   stabbing is solved exactly: some point of the shortest arc `A` is in every solution;
//!   for each point `p` of `A`, cut the circle at `p` and stab the arcs not containing `p`
//!   greedily on the line. The best of these is optimal.
//! - *Nests*: hazards homed in an outer region are first checked against the barriers already
//!   placed in deeper regions (their chain coverage); among the optimal solutions of a deeper
//!   region, one is preferred that also covers the outer hazards passing through it (a
//!   barrier early enough for those entering, late enough for those leaving), at no extra
//!   barrier in that region.
//! - *Conditionals*: a barrier in one arm is not on every path, so it never appears in the
//!   coverage of a hazard that crosses the `if`; hazards inside an arm are homed there. A
//!   region under thread-dependent control is not a candidate: a hazard homed there is
//!   reported (E0303), never hoisted silently.
//!
//! Block barriers are placed first for hazards between warps; then warp-level syncs for the
//! remaining hazards whose conflicting threads all share a warp, also in regions that only
//! whole warps enter (an `if` on a warp-uniform condition), where block barriers are illegal.
//! Complexity: O(H log H) per straight-line region; O(|A| · H log H) per loop body.

use super::{Point, PointIndex, Scope, SyncModel};
use crate::analysis::hazards::Hazard;
use crate::diag::Diagnostic;
use crate::ir::{EntityRef, Region};
use crate::ir::edit::body_len;

/// An arc of gaps on a region's line (`start <= end`) or circle (`start > end`: wraps).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Arc {
    pub start: usize,
    pub end: usize,
}

impl Arc {
    fn contains(&self, g: usize) -> bool {
        if self.start <= self.end {
            self.start <= g && g <= self.end
        } else {
            g >= self.start || g <= self.end
        }
    }
    fn len(&self, m: usize) -> usize {
        if self.start <= self.end {
            self.end - self.start + 1
        } else {
            m - self.start + self.end + 1
        }
    }
}

/// The home ranges of a hazard as an arc of gaps.
pub fn home_arc(h: &Hazard) -> Option<Arc> {
    let gaps: Vec<(usize, usize)> = h
        .home_ranges
        .iter()
        .map(|&(lo, hi)| (lo.div_ceil(2), hi / 2))
        .filter(|(a, b)| a <= b)
        .collect();
    match gaps.as_slice() {
        [] => None,
        [(a, b)] => Some(Arc { start: *a, end: *b }),
        [(0, e), (s, _)] | [(s, _), (0, e)] => Some(Arc { start: *s, end: *e }),
        _ => Some(Arc {
            start: gaps[0].0,
            end: gaps[0].1,
        }),
    }
}

/// Minimum stabbing of intervals on a line (greedy by right end).
fn greedy(mut iv: Vec<(usize, usize)>) -> Vec<usize> {
    iv.sort_by_key(|&(s, e)| (e, s));
    let mut out: Vec<usize> = Vec::new();
    for (s, e) in iv {
        if out.last().is_some_and(|&l| l >= s) {
            continue;
        }
        out.push(e);
    }
    out
}

/// Minimum stabbing of arcs on a circle of `m` gaps (a line when no arc wraps). Exact.
pub fn stab(m: usize, arcs: &[Arc]) -> Vec<usize> {
    stab_allowed(m, arcs, None)
}

/// [`stab`] using only the gaps `allowed` marks (all when `None`), for arcs whose ends are
/// allowed (`shrink`): the greedy stabs right ends, and the circle search cuts only at
/// allowed gaps of the shortest arc (some allowed gap of it is in every allowed solution).
/// Exact among the allowed solutions.
pub fn stab_allowed(m: usize, arcs: &[Arc], allowed: Option<&[bool]>) -> Vec<usize> {
    if arcs.is_empty() {
        return Vec::new();
    }
    if arcs.iter().all(|a| a.start <= a.end) {
        return greedy(arcs.iter().map(|a| (a.start, a.end)).collect());
    }
    let shortest = arcs
        .iter()
        .min_by_key(|a| a.len(m))
        .copied()
        .expect("non-empty");
    let mut best: Option<Vec<usize>> = None;
    let mut g = shortest.start;
    for _ in 0..shortest.len(m) {
        let p = g;
        if allowed.is_some_and(|a| !a[p]) {
            g = (g + 1) % m;
            continue;
        }
        let cut = |q: usize| (q + m - p - 1) % m;
        let rest: Vec<(usize, usize)> = arcs
            .iter()
            .filter(|a| !a.contains(p))
            .map(|a| (cut(a.start), cut(a.end)))
            .collect();
        let mut sol: Vec<usize> = greedy(rest).into_iter().map(|c| (c + p + 1) % m).collect();
        sol.push(p);
        if best.as_ref().is_none_or(|b| sol.len() < b.len()) {
            best = Some(sol);
        }
        g = (g + 1) % m;
    }
    let mut b = best.expect("the shortest arc has a point");
    b.sort();
    b
}

/// The sub-arc of `a` from its first to its last gap that `allowed` marks (`None`: none).
fn shrink(a: Arc, m: usize, allowed: &[bool]) -> Option<Arc> {
    let len = a.len(m);
    let start = (0..len).map(|d| (a.start + d) % m).find(|&g| allowed[g])?;
    let end = (0..len).map(|d| (a.end + m - d) % m).find(|&g| allowed[g])?;
    Some(Arc { start, end })
}

/// How many optional arcs one region tries (each try is one exact stabbing).
const MAX_OPTIONAL: usize = 64;

/// The optional arcs that cannot change a region's solution: supersets of a required arc
/// that do not turn a line of intervals into a circle. Adding one to the required arcs gives
/// the same stabbing (the greedy by right end stabs the subset first, at a point of both; on
/// a circle the shortest arc stays the same and every cut keeps the containment), so trying
/// it is a no-op that would only take a place in the window of [`MAX_OPTIONAL`] arcs.
/// Queries are O(1) for lines and O(wrapping required arcs) for arcs that wrap.
struct Inert {
    /// `min_end[a]`: the least end of a required line arc starting at `a` or later.
    min_end: Vec<usize>,
    /// The required arcs that wrap the back-edge.
    wraps: Vec<Arc>,
}

impl Inert {
    fn new(m: usize, arcs: &[Arc]) -> Inert {
        let mut min_end = vec![usize::MAX; m + 1];
        let mut wraps = Vec::new();
        for a in arcs {
            if a.start <= a.end {
                let e = &mut min_end[a.start.min(m)];
                *e = (*e).min(a.end);
            } else {
                wraps.push(*a);
            }
        }
        for i in (0..m).rev() {
            min_end[i] = min_end[i].min(min_end[i + 1]);
        }
        Inert { min_end, wraps }
    }

    /// Whether `o` contains a required arc without making a line instance circular.
    fn contains(&self, o: &Arc) -> bool {
        let m = self.min_end.len() - 1;
        if o.start <= o.end {
            let line = self.min_end[o.start.min(m)] <= o.end;
            // A line covering every gap contains the wrapping arcs too.
            let all = o.start == 0 && o.end + 1 >= m && !self.wraps.is_empty();
            return line || all;
        }
        if self.wraps.is_empty() {
            // Every required arc is a line: a wrapping arc would switch to the circle search.
            return false;
        }
        self.min_end[o.start.min(m)] != usize::MAX
            || self.min_end[0] <= o.end
            || self
                .wraps
                .iter()
                .any(|w| w.start >= o.start && w.end <= o.end)
    }
}

/// Solves one region: the exact minimum for `arcs`, preferring among minimum solutions one
/// that also stabs the `optional` arcs, tried in order (each kept when the count stays the
/// minimum): outer hazards entering (`[0, x]`) and leaving (`[y, end]`) the region, then
/// intra-warp hazards that a block barrier could remove instead of a warp sync.
fn solve(m: usize, arcs: &[Arc], optional: &[Arc], allowed: Option<&[bool]>) -> Vec<usize> {
    let base = stab_allowed(m, arcs, allowed);
    if base.is_empty() || optional.is_empty() {
        return base;
    }
    let mut acc = arcs.to_vec();
    let mut best = base;
    for o in optional.iter().take(MAX_OPTIONAL) {
        acc.push(*o);
        let sol = stab_allowed(m, &acc, allowed);
        if sol.len() == best.len() {
            best = sol;
        } else {
            acc.pop();
        }
    }
    best
}

/// Places barriers for the pending hazards (see the module doc): block barriers first, then
/// warp syncs, each scope region by region from the deepest.
pub fn place(
    model: &SyncModel,
    hazards: &[Hazard],
    pending: &[usize],
) -> Result<Vec<Point>, Vec<Diagnostic>> {
    let mut regions: Vec<Region> = model.paths.region_depth.keys().copied().collect();
    regions.sort_by_key(|r| (std::cmp::Reverse(model.paths.region_depth[r]), *r));
    let (by_home, through) = by_region(hazards, pending);
    let mut st = Placing::default();
    for scope in [Scope::Block, Scope::Warp] {
        for &q in &regions {
            let Some(homed) = by_home.get(&q) else {
                continue;
            };
            let rh = RegionHazards {
                region: q,
                homed,
                through: through.get(&q).map_or(&[][..], |v| v.as_slice()),
            };
            place_region(model, hazards, &rh, scope, &mut st);
        }
    }
    if st.diags.is_empty() {
        Ok(st.chosen)
    } else {
        Err(st.diags)
    }
}

/// The pending hazards by home region, and by each region their chains pass through.
type ByRegion = std::collections::HashMap<Region, Vec<usize>>;

fn by_region(hazards: &[Hazard], pending: &[usize]) -> (ByRegion, ByRegion) {
    let mut by_home = ByRegion::new();
    let mut through = ByRegion::new();
    for &i in pending {
        by_home.entry(hazards[i].home).or_default().push(i);
        for s in &hazards[i].chain {
            through.entry(s.region).or_default().push(i);
        }
    }
    (by_home, through)
}

/// What `place` has chosen so far, and the hazards it could not place.
#[derive(Default)]
struct Placing {
    chosen: Vec<Point>,
    index: PointIndex,
    diags: Vec<Diagnostic>,
}

/// Places the syncs of `scope` in region `rh.region` for the hazards homed there that the
/// points chosen so far leave uncovered (E0303 where the region cannot take them).
fn place_region(
    model: &SyncModel,
    hazards: &[Hazard],
    rh: &RegionHazards<'_>,
    scope: Scope,
    st: &mut Placing,
) {
    let q = rh.region;
    let wants = |h: &Hazard| match scope {
        Scope::Block => !h.intra_warp,
        Scope::Warp => h.intra_warp,
    };
    let local: Vec<usize> = (rh.homed.iter().copied())
        .filter(|&i| wants(&hazards[i]) && !st.index.covers(&hazards[i]))
        .collect();
    if local.is_empty() {
        return;
    }
    if !model.is_legal_for(q, scope) {
        for &i in &local {
            model.push_unplaceable(&hazards[i], &mut st.diags);
        }
        return;
    }
    let m = body_len(model.k, q) + 1;
    // Gaps inside a hand-written split window take no block barrier (its pair would nest:
    // docs/placement.md, section 8); arcs shrink to their allowed ends.
    let allowed = (scope == Scope::Block)
        .then(|| (0..m).map(|g| !model.in_split_window(q, g)).collect::<Vec<_>>())
        .filter(|a| a.iter().any(|&x| !x));
    let allowed = allowed.as_deref();
    let within = |a: Arc| allowed.map_or(Some(a), |al| shrink(a, m, al));
    let mut arcs: Vec<Arc> = Vec::new();
    for &i in &local {
        let Some(a) = home_arc(&hazards[i]) else {
            continue;
        };
        match within(a) {
            Some(a) => arcs.push(a),
            None => st.diags.push(model.in_window_unplaceable(&hazards[i])),
        }
    }
    let optional = match scope {
        Scope::Block => (block_optional_arcs(hazards, &st.index, rh, &arcs, m).into_iter())
            .filter_map(within)
            .collect(),
        Scope::Warp => Vec::new(),
    };
    for g in solve(m, &arcs, &optional, allowed) {
        let p = Point {
            region: q,
            coord: 2 * g,
            scope,
        };
        st.chosen.push(p);
        st.index.insert(p);
    }
}

/// The hazards of one region as `place` scans it: those homed there and those passing through.
struct RegionHazards<'a> {
    region: Region,
    homed: &'a [usize],
    through: &'a [usize],
}

/// The optional arcs of a region for block barriers (`m` gaps, required `arcs`): outer hazards
/// passing through it, prefixes (entering) in increasing order of their end, suffixes
/// (leaving) in decreasing order of their start, so the first feasible one of each kind
/// implies the rest; then the region's intra-warp hazards a block barrier may also remove.
/// Hazards `index` already covers are skipped.
fn block_optional_arcs(
    hazards: &[Hazard],
    index: &PointIndex,
    rh: &RegionHazards<'_>,
    arcs: &[Arc],
    m: usize,
) -> Vec<Arc> {
    let q = rh.region;
    let mut optional: Vec<Arc> = Vec::new();
    let n = m - 1;
    let (mut pre, mut suf) = (Vec::new(), Vec::new());
    for &i in rh.through {
        let h = &hazards[i];
        if h.home == q || h.intra_warp || index.covers(h) {
            continue;
        }
        for s in h.chain.iter().filter(|s| s.region == q) {
            if s.lo == 0 {
                pre.push((s.hi / 2).min(n));
            } else {
                suf.push(s.lo.div_ceil(2).min(n));
            }
        }
    }
    pre.sort_unstable();
    pre.dedup();
    suf.sort_unstable_by(|a, b| b.cmp(a));
    suf.dedup();
    // Arcs that cannot change a solution are not tried and take no place in the window
    // (docs/placement.md, *Nearest-source hazards*).
    let inert = Inert::new(m, arcs);
    optional.extend(
        pre.into_iter()
            .map(|x| Arc { start: 0, end: x })
            .filter(|a| !inert.contains(a))
            .take(MAX_OPTIONAL / 4),
    );
    optional.extend(
        suf.into_iter()
            .map(|y| Arc { start: y, end: n })
            .filter(|a| !inert.contains(a))
            .take(MAX_OPTIONAL / 4),
    );
    optional.extend(
        rh.homed
            .iter()
            .filter(|&&i| hazards[i].intra_warp && !index.covers(&hazards[i]))
            .filter_map(|&i| home_arc(&hazards[i]))
            .filter(|a| !inert.contains(a)),
    );
    optional
}

/// A lower bound on the executed count of inserted block barriers: hazards whose coverages
/// are pairwise disjoint each need their own barrier, costing at least the cheapest legal
/// region of their coverage (docs/placement.md, *The lower bound*).
///
/// The cross-warp pending hazards are taken greedily, costliest homes first (inner loops),
/// then by home region and right end as in interval stabbing; a hazard is taken when its
/// coverage meets no taken one's and some region of it is legal. Whether a coverage meets the
/// taken ones is asked of an interval index per region (`TakenIndex`): O(H log H) in all,
/// the same bound as the pairwise test it replaced (kept as the tests' oracle) at any size.
pub fn lower_bound(model: &SyncModel, hazards: &[Hazard], pending: &[usize]) -> u64 {
    let cand = bound_candidates(model, hazards, pending);
    let cost = |h: &Hazard| bound_cost(model, h);
    let well_formed = cand
        .iter()
        .all(|&i| hazards[i].segments().all(|s| s.lo <= s.hi));
    if well_formed {
        greedy_bound(hazards, &cand, cost)
    } else if cand.len() <= PAIRWISE_CANDIDATES {
        // A segment with `lo > hi` meets the others by the pairwise test's reading of its
        // ends, which the index does not model: decline to the pairwise test (no coverage
        // built by hazard finding is such a segment).
        pairwise_bound(hazards, &cand, cost)
    } else {
        0
    }
}

/// The most candidates the pairwise test runs on (quadratic), where the index declines.
const PAIRWISE_CANDIDATES: usize = 4000;

/// The cross-warp pending hazards in the greedy's order: costliest home first, then by home
/// region, then by the right end of the home arc (a stable sort: ties keep `pending`'s order).
fn bound_candidates(model: &SyncModel, hazards: &[Hazard], pending: &[usize]) -> Vec<usize> {
    let mut cand: Vec<usize> = pending
        .iter()
        .copied()
        .filter(|&i| !hazards[i].intra_warp)
        .collect();
    cand.sort_by_cached_key(|&i| {
        let h = &hazards[i];
        (
            std::cmp::Reverse(model.weight_bounds.get(&h.home).copied().unwrap_or(0)),
            h.home,
            home_arc(h).map_or(0, |a| a.end),
        )
    });
    cand
}

/// The cheapest legal region of a hazard's coverage, by its executed count with bounds.
fn bound_cost(model: &SyncModel, h: &Hazard) -> Option<u64> {
    h.segments()
        .filter(|s| model.is_legal(s.region))
        .map(|s| model.weight_bounds[&s.region])
        .min()
}

/// The greedy of [`lower_bound`] over `cand` (in order) with an interval index: every
/// segment's `lo <= hi`. O(C log C) for C candidates of boundedly many segments.
fn greedy_bound(hazards: &[Hazard], cand: &[usize], cost: impl Fn(&Hazard) -> Option<u64>) -> u64 {
    let mut taken = TakenIndex::default();
    let mut lb = 0u64;
    for &i in cand {
        let h = &hazards[i];
        if h.segments().any(|s| taken.meets(s.region, s.lo, s.hi)) {
            continue;
        }
        if let Some(c) = cost(h) {
            for s in h.segments() {
                taken.insert(s.region, s.lo, s.hi);
            }
            lb = lb.saturating_add(c);
        }
    }
    lb
}

/// The greedy of [`lower_bound`] over `cand` (in order) by the pairwise test: a hazard is
/// taken when none of its segments meets a segment of a taken hazard. O(C^2).
fn pairwise_bound(
    hazards: &[Hazard],
    cand: &[usize],
    cost: impl Fn(&Hazard) -> Option<u64>,
) -> u64 {
    let mut picked: Vec<usize> = Vec::new();
    let mut lb = 0u64;
    for &i in cand {
        let h = &hazards[i];
        let disjoint = picked.iter().all(|&j| {
            let o = &hazards[j];
            !h.segments().any(|s| {
                o.segments()
                    .any(|t| s.region == t.region && s.lo <= t.hi && t.lo <= s.hi)
            })
        });
        if !disjoint {
            continue;
        }
        if let Some(c) = cost(h) {
            picked.push(i);
            lb = lb.saturating_add(c);
        }
    }
    lb
}

/// The segments of the hazards taken by the greedy, per region, as the union of their points:
/// disjoint closed intervals keyed by their start. Invariant: the intervals of a region are
/// pairwise disjoint (an insertion merges those it meets), so the one with the greatest start
/// at or before a query's end is the only one that can meet the query: O(log n) a query,
/// amortized O(log n) an insertion.
#[derive(Default)]
struct TakenIndex {
    /// By region index (ids are dense): no hashing a query.
    by_region: Vec<std::collections::BTreeMap<usize, usize>>,
}

impl TakenIndex {
    /// Whether `[lo, hi]` (`lo <= hi`) of `region` meets a taken segment.
    fn meets(&self, region: Region, lo: usize, hi: usize) -> bool {
        self.by_region
            .get(region.index())
            .and_then(|m| m.range(..=hi).next_back())
            .is_some_and(|(_, &end)| end >= lo)
    }

    /// Adds `[lo, hi]` (`lo <= hi`) to `region`, merged with the intervals it meets.
    fn insert(&mut self, region: Region, lo: usize, hi: usize) {
        let i = region.index();
        if i >= self.by_region.len() {
            self.by_region.resize_with(i + 1, Default::default);
        }
        let m = &mut self.by_region[i];
        let (mut lo, mut hi) = (lo, hi);
        while let Some((&s, &e)) = m.range(..=hi).next_back() {
            if e < lo {
                break;
            }
            lo = lo.min(s);
            hi = hi.max(e);
            m.remove(&s);
        }
        m.insert(lo, hi);
    }
}

/// The bound as computed before the interval index, but for its size limit (it returned 0
/// past 4000 candidates): the candidates in the greedy's order, each tested against every
/// taken one by [`pairwise_bound`]. The oracle of the tests for [`greedy_bound`].
#[cfg(test)]
fn lower_bound_pairwise(model: &SyncModel, hazards: &[Hazard], pending: &[usize]) -> u64 {
    let cand = bound_candidates(model, hazards, pending);
    pairwise_bound(hazards, &cand, |h| bound_cost(model, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::analysis::footprint::AccessRef;
    use crate::analysis::hazards::{Carry, HazardKind, Paths, Segment};
    use crate::ir::{Kernel, Op};
    use proptest::prelude::*;

    /// Regions of the generated hazard sets.
    const REGIONS: usize = 4;

    /// A hazard homed in region `home` over `home_ranges`, through `chain`.
    fn hazard(
        home: usize,
        home_ranges: Vec<(usize, usize)>,
        chain: Vec<(usize, usize, usize)>,
        intra_warp: bool,
    ) -> Hazard {
        let at = AccessRef {
            op: Op::new(0),
            index: 0,
        };
        Hazard {
            src: at,
            dst: at,
            src_at: Op::new(0),
            kind: HazardKind::Raw,
            carry: Carry::Forward,
            intra_warp,
            witness: None,
            query: None,
            home: Region::new(home),
            home_ranges,
            chain: chain
                .into_iter()
                .map(|(r, lo, hi)| Segment {
                    region: Region::new(r),
                    lo,
                    hi,
                })
                .collect(),
        }
    }

    /// A model of [`REGIONS`] regions with the given legality and executed counts (only the
    /// fields the bound reads are meaningful).
    fn model<'k>(k: &'k Kernel, legal: &[bool], weights: &[u64]) -> SyncModel<'k> {
        let r = |i: usize| Region::new(i);
        SyncModel {
            k,
            paths: std::rc::Rc::new(Paths::new(k)),
            legal: (0..REGIONS).map(|i| (r(i), legal[i])).collect(),
            warp_legal: Default::default(),
            named: Default::default(),
            named_limit: 0,
            weight: (0..REGIONS).map(|i| (r(i), weights[i])).collect(),
            weight_bounds: (0..REGIONS).map(|i| (r(i), weights[i])).collect(),
            existing: Vec::new(),
            stuck: Vec::new(),
            split: Default::default(),
        }
    }

    /// A range of doubled coordinates in a region of up to 40 points; `lo > hi` is rare.
    fn range() -> impl Strategy<Value = (usize, usize)> {
        (0usize..40, 0usize..12, 0u8..50).prop_map(|(lo, len, odd)| {
            if odd == 0 {
                (lo + len + 1, lo)
            } else {
                (lo, (lo + len).min(40))
            }
        })
    }

    fn hazard_strategy() -> impl Strategy<Value = Hazard> {
        (
            0..REGIONS,
            prop::collection::vec(range(), 0..3),
            prop::collection::vec((0..REGIONS, range()), 0..3),
            prop::bool::weighted(0.2),
        )
            .prop_map(|(home, hr, ch, iw)| {
                let chain = ch.into_iter().map(|(r, (lo, hi))| (r, lo, hi)).collect();
                hazard(home, hr, chain, iw)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The indexed greedy gives the bound of the pairwise greedy it replaced, on hazard
        /// sets with overlapping, nested, wrapping and (rarely) inverted ranges, in any
        /// pending order, over legal and illegal regions of any cost.
        #[test]
        fn lower_bound_matches_the_pairwise_oracle(
            hazards in prop::collection::vec(hazard_strategy(), 0..60),
            legal in prop::collection::vec(prop::bool::weighted(0.8), REGIONS),
            weights in prop::collection::vec(prop::sample::select(vec![1u64, 8, 64, u64::MAX]), REGIONS),
            order in any::<prop::sample::Index>(),
        ) {
            let k = Kernel::new("t");
            let m = model(&k, &legal, &weights);
            let mut pending: Vec<usize> = (0..hazards.len()).collect();
            if !pending.is_empty() {
                pending.rotate_left(order.index(hazards.len()));
            }
            prop_assert_eq!(
                lower_bound(&m, &hazards, &pending),
                lower_bound_pairwise(&m, &hazards, &pending)
            );
        }
    }

    /// Past the old limit of 4000 candidates the bound is still the pairwise greedy's (which
    /// returned 0 there): 6000 hazards, half of them pairwise disjoint.
    #[test]
    fn lower_bound_is_exact_past_four_thousand_candidates() {
        let k = Kernel::new("t");
        let m = model(&k, &[true; REGIONS], &[1, 8, 64, 512]);
        let hazards: Vec<Hazard> = (0..6000)
            .map(|i| {
                let lo = 2 * (i / 2) * 4;
                hazard((i / 2) % REGIONS, vec![(lo, lo + 2 + (i % 2) * 2)], Vec::new(), false)
            })
            .collect();
        let pending: Vec<usize> = (0..hazards.len()).collect();
        let lb = lower_bound(&m, &hazards, &pending);
        assert!(lb > 0);
        assert_eq!(lb, lower_bound_pairwise(&m, &hazards, &pending));
    }

    /// The index keeps the union of the taken segments: merged neighbours, nested and
    /// touching intervals.
    #[test]
    fn taken_index_answers_as_the_union() {
        let mut t = TakenIndex::default();
        let r = Region::new(1);
        t.insert(r, 4, 6);
        t.insert(r, 10, 12);
        t.insert(r, 5, 11);
        t.insert(r, 20, 20);
        for p in 0..25 {
            let inside = (4..=12).contains(&p) || p == 20;
            assert_eq!(t.meets(r, p, p), inside, "{p}");
        }
        assert!(t.meets(r, 0, 4) && t.meets(r, 13, 20) && !t.meets(r, 13, 19));
        assert!(!t.meets(Region::new(2), 0, 30));
    }

    #[test]
    fn greedy_stabs_overlapping_intervals_once() {
        assert_eq!(greedy(vec![(1, 3), (2, 4)]), vec![3]);
        assert_eq!(greedy(vec![(1, 2), (3, 4), (2, 3)]).len(), 2);
    }

    #[test]
    fn circular_arcs_are_stabbed_exactly() {
        // Circle of 6 gaps; arcs [4..1] (wrapping) and [1..2] and [3..4]: two points suffice
        // (1 and 4), a cut at 0 would need three.
        let arcs = [
            Arc { start: 4, end: 1 },
            Arc { start: 1, end: 2 },
            Arc { start: 3, end: 4 },
        ];
        let s = stab(6, &arcs);
        assert_eq!(s.len(), 2);
        for a in &arcs {
            assert!(
                s.iter().any(|&g| a.contains(g)),
                "{a:?} not stabbed by {s:?}"
            );
        }
    }

    #[test]
    fn brute_force_agrees_on_small_circles() {
        // All sets of up to 4 arcs on a circle of 5 gaps.
        let m = 5;
        let mut all = Vec::new();
        for s in 0..m {
            for e in 0..m {
                all.push(Arc { start: s, end: e });
            }
        }
        let mut seed = 7u64;
        for _ in 0..400 {
            let mut arcs = Vec::new();
            for _ in 0..4 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                arcs.push(all[(seed >> 33) as usize % all.len()]);
            }
            let got = stab(m, &arcs);
            let mut best = usize::MAX;
            for mask in 0u32..(1 << m) {
                if arcs
                    .iter()
                    .all(|a| (0..m).any(|g| mask & (1 << g) != 0 && a.contains(g)))
                {
                    best = best.min(mask.count_ones() as usize);
                }
            }
            assert_eq!(got.len(), best, "{arcs:?}");
            assert!(arcs.iter().all(|a| got.iter().any(|&g| a.contains(g))));
        }
    }
}
