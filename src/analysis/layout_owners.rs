//! Who touches each element of a collective access under a concrete layout: the footprint
//! engine's hook into `ir::layout` (docs/ir.md, "Concrete layouts").
//!
//! A write (store, async tile copy) is performed by the element's writer (the lowest holder:
//! Triton masks broadcast duplicates); a read by every holder. A role-relative layout's
//! threads are its group's, from the group's first thread (a multiple of the warp width). The answer per element is a
//! [`Who`] of the footprint lattice: one thread, or several within one warp (the holders
//! differ only in lane bits), or several anywhere. Same-thread and same-warp questions between
//! two accesses then follow from [`Who::conflict`], whatever the encodings: two layouts that
//! give an element to one thread are same-thread for it. An opaque layout is one owner per
//! (name, shape, position) only when the name has no definition: an opaque fall-back of a
//! defined encoding may replicate elements ([`CollectiveOwners`]).
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

/// Who owns the elements of one collective access, as far as its layout says.
#[derive(Clone, Debug)]
pub enum CollectiveOwners {
    /// A concrete layout's owners.
    Concrete(ConcreteOwners),
    /// Unknown threads, but one and the same thread per element for every access under this
    /// layout name and view shape ([`Ownership::one_owner_by_name`]): a name without a
    /// definition, or a concrete layout without broadcast.
    ByName,
    /// Unknown threads, one per element in this access's own mapping, shared with no other
    /// access: an opaque fall-back of a defined encoding (which may replicate elements, so
    /// that one name is not one owner).
    Own,
    /// Unknown threads: no layout.
    Unknown,
}

impl CollectiveOwners {
    /// What is left of concrete owners when the enumerator cannot use them exactly (other
    /// threads than exactly the layout's execute): one owner by name for a write (its
    /// writer) or a read without broadcast; a read of broadcast elements (several holders,
    /// some not the writer) only its own mapping.
    pub fn without_concrete(self) -> CollectiveOwners {
        match self {
            CollectiveOwners::Concrete(c) if !c.reads || c.map.shifts.is_empty() => {
                CollectiveOwners::ByName
            }
            CollectiveOwners::Concrete(_) => CollectiveOwners::Own,
            o => o,
        }
    }
}

/// The owners of a collective access of `shape` under `layout`: concrete, or opaque with or
/// without the same-name rule (`ir::layout::diagnostics` warns about opaque fall-backs,
/// which keep only their own mapping).
pub fn collective_owners(
    k: &Kernel,
    layout: Option<&str>,
    shape: &[u64],
    warp: u32,
    kind: AccessKind,
) -> CollectiveOwners {
    match ownership(k, layout, shape, warp) {
        Ownership::Concrete(c) => CollectiveOwners::Concrete(ConcreteOwners {
            map: c.owners,
            first: c.first,
            reads: kind.reads(),
            warp: warp.max(1),
        }),
        _ if layout.is_none() => CollectiveOwners::Unknown,
        Ownership::Opaque(None) => CollectiveOwners::ByName,
        Ownership::Opaque(Some(_)) => CollectiveOwners::Own,
    }
}
