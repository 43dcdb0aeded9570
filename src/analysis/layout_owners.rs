//! Who touches each element of a collective access under a concrete layout: the footprint
//! engine's hook into `ir::layout` (docs/ir.md, "Concrete layouts").
//!
//! A write (store, async tile copy) is performed by the element's writer (the lowest holder:
//! Triton masks broadcast duplicates); a read by every holder. A role-relative layout's
//! threads are its group's, from the group's first thread (a multiple of the warp width). The answer per element is a
//! [`Who`] of the footprint lattice: one thread, or several within one warp (the holders
//! differ only in lane bits), or several anywhere. Same-thread and same-warp questions between
//! two accesses then follow from [`Who::conflict`], whatever the encodings: two layouts that
//! give an element to one thread are same-thread for it.
//! Complexity: O(bits²) to build, O(bits) per element (a GF(2) matrix-vector product).

use crate::analysis::footprint::Who;
use crate::ir::layout::{Ownership, OwnerMap, ownership};
use crate::ir::{AccessKind, Kernel};

/// The owner map of one collective access, ready to answer per element.
#[derive(Clone, Debug)]
pub struct ConcreteOwners {
    map: OwnerMap,
    /// The block thread of the layout's thread 0 (a role-relative layout's group start).
    first: u32,
    reads: bool,
    warp: u32,
}

impl ConcreteOwners {
    /// Who touches element `pos` (row-major within the view).
    pub fn who(&self, pos: u64) -> Who {
        let w = self.first + self.map.writer(pos);
        if !self.reads || self.map.shifts.is_empty() {
            Who::One(w)
        } else if self.map.holders_in_one_warp(self.warp) {
            Who::Many(Some(w / self.warp))
        } else {
            Who::Many(None)
        }
    }
}

/// The concrete owners of a collective access of `shape` under `layout`, or `None` when the
/// layout is opaque (undefined, not modelled: `ir::layout::diagnostics` warns about those).
pub fn collective_owners(
    k: &Kernel,
    layout: Option<&str>,
    shape: &[u64],
    warp: u32,
    kind: AccessKind,
) -> Option<ConcreteOwners> {
    match ownership(k, layout, shape, warp) {
        Ownership::Concrete(c) => Some(ConcreteOwners {
            map: c.owners,
            first: c.first,
            reads: kind.reads(),
            warp: warp.max(1),
        }),
        Ownership::Opaque(_) => None,
    }
}
