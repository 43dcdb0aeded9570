//! The mbarrier object as placement sees it: which `mbar_*` ops (and TMA loads completing on
//! an mbarrier) read or write the 8-byte mbarrier element, so that the ordinary hazard model
//! (`analysis::hazards`) orders an initialisation before other threads' use of the object and
//! every thread's use before an invalidation (docs/placement.md, "Mbarrier objects").
//!
//! Model (placement only; `ir::effects`, which the checker shares, gives mbarrier ops no
//! shared access, and the checker keeps its own mbarrier semantics):
//! - `mbar_init`, `mbar_inval`: a **write** of the element by the executing thread (the
//!   object's state is created or destroyed);
//! - `mbar_arrive` (with or without `tx`), `mbar_expect_tx`, `mbar_wait`, and the mbarrier
//!   operand of a `tma_load` (its completion updates the object; the issuing thread names
//!   it): a **read** by the executing thread. These operations are atomic on the object and
//!   ordered among themselves by the mbarrier protocol, so two of them never form a hazard;
//!   only an init or an inval does, against any use by another thread.
//!
//! Invariant: the accesses returned for an op are per-thread accesses of a buffer whose
//! element type is `mbarrier`, at the op's own index operands.
//! Complexity: O(1) per op.

use crate::ir::*;

/// The mbarrier-object accesses of `op` (empty for every op that names no mbarrier).
pub fn object_accesses(k: &Kernel, op: Op) -> Vec<SharedAccess> {
    let acc = |mem: &MemRef, kind: AccessKind, index: &[Operand]| SharedAccess {
        mem: *mem,
        kind,
        footprint: Footprint::PerThread(index.to_vec()),
    };
    match &k.ops[op].kind {
        OpKind::MbarInit { mbar, index, .. } | OpKind::MbarInval { mbar, index } => {
            vec![acc(mbar, AccessKind::Write, index)]
        }
        OpKind::MbarArrive { mbar, index, .. }
        | OpKind::MbarExpectTx { mbar, index, .. }
        | OpKind::MbarWait { mbar, index, .. } => vec![acc(mbar, AccessKind::Read, index)],
        OpKind::TmaLoad {
            mbar, mbar_index, ..
        } => vec![acc(mbar, AccessKind::Read, mbar_index)],
        _ => Vec::new(),
    }
}
