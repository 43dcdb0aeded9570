//! Deep blockers: plain-source pairs whose every hazard a built pair of the same two regions
//! already implies (docs/placement.md, *Dominated hazards of deep accesses*).
//!
//! A pair (source `x`, destination `y`) is *deep* when their region paths part in one region
//! `Q` (different ops of `Q`, not two arms of one op) and each access lies strictly below its
//! ancestor in `Q`: `x` directly in region `R_s`, `y` directly in `R_d`, both below `Q`.
//! Every pair of one [`DeepKey`] (same `R_s`, `R_d`, access kinds and root buffers) then has
//! the same ancestors in `Q` and above: the same forward coverage in `Q` (if any), the same
//! carried arc or whole body per common loop, the same chain above `R_s` and `R_d`. Only the
//! chain segments in `R_s` (the suffix after `x`) and in `R_d` (the prefix before `y`), and
//! the bodies passed whole between, depend on the indices `i_x`, `i_y`; they grow as `i_x`
//! falls and `i_y` rises. So a built pair `(s, d)` of the key with `i_s ≥ i_x`, `i_d ≤ i_y`
//! whose cross-warp hazards cover every hazard kind `(x, y)` could have (forward where a
//! forward path exists; per common loop the arc, or the whole body where the arc is it)
//! implies every hazard of `(x, y)`: its coverage lies inside theirs, and a block barrier at a
//! point of it removes them. `(x, y)`'s conflict questions are not asked.
//!
//! Invariants: the rule is off in kernels with hand-written split or named barriers or
//! mbarrier ops (their syncs order hazards by more than a point of the coverage); `Q` must be
//! a region every thread reaches (not under thread-dependent control, not a `while`
//! condition), so the kept hazard's home is as legal as the dropped one's; neither access may
//! have an index loaded from memory or one on a parameter the engine may not decide (W1510,
//! W0319 name the accesses of kept hazards). Where the blocker's index differs from the
//! pair's, its region (`R_s` or `R_d`) is recorded as *quiet*: the dropped hazard's larger
//! segment there is an optional arc of the placer, which only a region homing hazards reads;
//! hazard finding checks at the end that no kept hazard is homed in a quiet region, and runs
//! again without the rule where one is (`analysis::hazards`).
//! Complexity: per deep pair, one table lookup and a scan of at most [`MAX_ENTRIES`] entries;
//! the implication is decided once per entry.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::analysis::completion_blockers::Blocker;
use crate::ir::{AccessKind, Buffer, Kernel, OpKind, Region};

/// What pairs of one coverage shape share: the regions directly holding the source and the
/// destination, their access kinds and root buffers.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeepKey {
    pub src_region: Region,
    pub dst_region: Region,
    pub src_kind: AccessKind,
    pub dst_kind: AccessKind,
    pub src_buf: Buffer,
    pub dst_buf: Buffer,
}

/// A built pair of a key: its indices in the source's and destination's regions, its
/// cross-warp hazards, and whether they imply the key's pairs (decided on first use).
#[derive(Debug)]
struct Entry {
    i_src: usize,
    i_dst: usize,
    hazards: Blocker,
    implies: Option<bool>,
}

/// The most entries one key keeps (each new one replaces those it dominates).
pub const MAX_ENTRIES: usize = 8;

/// The deep blockers of one kernel.
#[derive(Debug, Default)]
pub struct DeepBlockers {
    table: HashMap<DeepKey, Vec<Entry>>,
    /// Regions a dropped hazard's optional arc was in: no kept hazard may be homed there.
    pub quiet: HashSet<Region>,
    /// Pairs not built.
    pub skipped: usize,
    /// Per region `Q`, whether every thread reaches it (asked once per region).
    reached: HashMap<Region, bool>,
    /// Per access (index into `Footprints::accesses`), whether its index is exact enough
    /// (asked once per access).
    exact: HashMap<usize, bool>,
}

/// Whether `k` has a sync op whose ordering is more than a point of a hazard's coverage:
/// hand-written split or named barriers, mbarrier ops. The rule is off there.
pub fn kernel_excluded(k: &Kernel) -> bool {
    k.ops.values().any(|od| {
        matches!(
            od.kind,
            OpKind::SplitSignal(_)
                | OpKind::SplitWait(_)
                | OpKind::NamedArrive { .. }
                | OpKind::NamedSync { .. }
                | OpKind::MbarInit { .. }
                | OpKind::MbarArrive { .. }
                | OpKind::MbarExpectTx { .. }
                | OpKind::MbarWait { .. }
                | OpKind::MbarInval { .. }
        )
    })
}

/// The level of the region where the region paths of a source (`pa`) and a destination
/// (`pb`) part, where the pair is deep: different ops of that region, each access strictly
/// below its ancestor there. `None` otherwise (one access directly in that region, two
/// arms of one op, one path a prefix of the other).
pub fn deep_parting(pa: &[(Region, usize)], pb: &[(Region, usize)]) -> Option<usize> {
    let j = pa.iter().zip(pb).position(|(x, y)| x != y)?;
    (pa[j].0 == pb[j].0 && j + 1 < pa.len() && j + 1 < pb.len()).then_some(j)
}

impl Entry {
    /// Whether this entry may stand for pair `(i_x, i_y)`: its source no earlier, its
    /// destination no later.
    fn reaches(&self, i_x: usize, i_y: usize) -> bool {
        self.i_src >= i_x && self.i_dst <= i_y
    }

    /// Whether `self` makes `other` useless: it reaches every pair `other` reaches and has
    /// every hazard kind `other` has.
    fn dominates(&self, other: &Entry) -> bool {
        self.reaches(other.i_src, other.i_dst)
            && (self.hazards.forward || !other.hazards.forward)
            && other
                .hazards
                .carried
                .iter()
                .all(|c| self.hazards.carried.contains(c))
    }
}

impl DeepBlockers {
    /// Whether region `q` is reached by every thread, `f` answering on first use.
    pub fn reached(&mut self, q: Region, f: impl FnOnce() -> bool) -> bool {
        *self.reached.entry(q).or_insert_with(f)
    }

    /// Whether access `i`'s index is exact enough, `f` answering on first use.
    pub fn exact(&mut self, i: usize, f: impl FnOnce() -> bool) -> bool {
        *self.exact.entry(i).or_insert_with(f)
    }

    /// Whether a built pair of `key` implies pair `(i_x, i_y)`; `implied` says whether a
    /// blocker's hazards cover every hazard kind the key's pairs could have (asked once per
    /// entry). On success the regions whose segments differ are recorded as quiet.
    pub fn blocks(
        &mut self,
        key: &DeepKey,
        (i_x, i_y): (usize, usize),
        implied: impl Fn(&Blocker) -> bool,
    ) -> bool {
        let Some(entries) = self.table.get_mut(key) else {
            return false;
        };
        // Prefer an entry of the pair's own indices: it needs no quiet region.
        let mut best: Option<(usize, usize)> = None;
        for (n, e) in entries.iter_mut().enumerate() {
            if !e.reaches(i_x, i_y) {
                continue;
            }
            if !*e.implies.get_or_insert_with(|| implied(&e.hazards)) {
                continue;
            }
            let differ = (e.i_src != i_x) as usize + (e.i_dst != i_y) as usize;
            if best.is_none_or(|(_, d)| differ < d) {
                best = Some((n, differ));
            }
        }
        let Some((n, _)) = best else {
            return false;
        };
        let e = &entries[n];
        if e.i_src != i_x {
            self.quiet.insert(key.src_region);
        }
        if e.i_dst != i_y {
            self.quiet.insert(key.dst_region);
        }
        self.skipped += 1;
        true
    }

    /// Records the hazards a built pair `(i_x, i_y)` of `key` gave: `(carrying loop and d1, or
    /// None for the forward hazard; intra_warp)`. Entries it dominates are dropped.
    pub fn record(
        &mut self,
        key: DeepKey,
        (i_x, i_y): (usize, usize),
        hazards: impl Iterator<Item = (Option<(crate::ir::Op, bool)>, bool)>,
    ) {
        let mut b = Blocker::default();
        for (carry, intra_warp) in hazards {
            b.add(carry, intra_warp);
        }
        if !b.forward && b.carried.is_empty() {
            return;
        }
        let e = Entry {
            i_src: i_x,
            i_dst: i_y,
            hazards: b,
            implies: None,
        };
        let entries = self.table.entry(key).or_default();
        if entries.iter().any(|o| o.dominates(&e)) {
            return;
        }
        entries.retain(|o| !e.dominates(o));
        if entries.len() < MAX_ENTRIES {
            entries.push(e);
        }
    }
}
