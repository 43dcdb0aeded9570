//! Completion blockers: async sources whose hazards another copy's already imply
//! (docs/placement.md, *Async sources completed together*).
//!
//! An async copy's hazards start at the wait that completes it (`src_at`), so every copy
//! that one wait completes has, with one destination `d`, hazards of the same coverage: the
//! forward one over `(w, d]` and, per common loop, the carried arc (distance 1) or the whole
//! body (distance ≥ 2 only, a superset of the arc; often the arc is the whole body anyway).
//! When an earlier copy of the same region and access kind, completed at the same `w`,
//! already gave a **cross-warp** forward hazard with `d` (if a forward path exists) and, for
//! every common loop that has a carried coverage, a cross-warp carried hazard whose coverage
//! is the smaller of the two (the arc, or the whole body where the arc is the whole body),
//! any block barrier that removes those removes every hazard of the later copy with `d`, and
//! the later pair's hazards are not built: its conflict questions are not asked. Its
//! in-flight checks (E0302) still are.
//!
//! Invariants: the table is per address space and is filled in pair order (sources outer),
//! so a blocker is always a pair built before; only pairs whose hazards were all built are
//! recorded. A copy whose index depends on a loaded value is always built (its W1510 rests
//! on its own hazards).
//! Complexity: one hash lookup per async pair and O(h) per built one (`h` its hazards).

use rustc_hash::FxHashMap as HashMap;

use crate::ir::{AccessKind, Op, Region};

/// What identifies copies with hazards of one coverage towards one destination: the
/// completing point, the destination (index into `Footprints::accesses`), the region
/// directly holding the copy (so that a named barrier's arm holds both or neither) and the
/// copy's access kind (so that the hazard kind and everything read from it agree).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct BlockKey {
    pub at: Op,
    pub dst: usize,
    pub region: Region,
    pub kind: AccessKind,
}

/// The cross-warp hazards with minimal coverage that built pairs of one [`BlockKey`] gave.
#[derive(Clone, Debug, Default)]
pub struct Blocker {
    /// A cross-warp forward hazard.
    pub forward: bool,
    /// Loops carrying a cross-warp hazard, and whether it conflicts at distance 1 (its
    /// coverage is then the arc, else the whole body).
    pub carried: Vec<(Op, bool)>,
    /// Whether it was found to imply the pairs of its key: every pair of one key has the same
    /// paths, so the answer holds for the later ones (and a blocker only grows).
    settled: bool,
}

/// The blockers of one address space.
#[derive(Debug, Default)]
pub struct Blockers {
    table: HashMap<BlockKey, Blocker>,
    /// Per source (index into `Footprints::accesses`), whether its index is known statically.
    own_index: HashMap<usize, bool>,
}

impl Blockers {
    /// Whether a blocker of `key` exists and `implied` accepts it (asked once per key
    /// after it accepts) for source `ai`, whose index `own_index` says is known statically
    /// (asked once per source, and only where a blocker exists).
    pub fn blocks(
        &mut self,
        key: &BlockKey,
        ai: usize,
        own_index: impl FnOnce() -> bool,
        implied: impl FnOnce(&Blocker) -> bool,
    ) -> bool {
        let Some(b) = self.table.get_mut(key) else {
            return false;
        };
        if !b.settled {
            b.settled = implied(b);
        }
        b.settled && *self.own_index.entry(ai).or_insert_with(own_index)
    }

    /// Records the hazards a built pair of `key` gave: `(carrying loop and d1, or None for
    /// the forward hazard; intra_warp)`.
    pub fn record(&mut self, key: BlockKey, hazards: impl Iterator<Item = (Option<(Op, bool)>, bool)>) {
        let b = self.table.entry(key).or_default();
        for (carry, intra_warp) in hazards {
            b.add(carry, intra_warp);
        }
    }
}

impl Blocker {
    /// Adds one built hazard: `(carrying loop and d1, or None for the forward hazard;
    /// intra_warp)`. Intra-warp hazards block nothing (a warp sync removes them).
    pub fn add(&mut self, carry: Option<(Op, bool)>, intra_warp: bool) {
        match carry {
            _ if intra_warp => {}
            None => self.forward = true,
            Some(c) if !self.carried.contains(&c) => self.carried.push(c),
            Some(_) => {}
        }
    }
}
