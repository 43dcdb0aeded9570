//! The static proof's footprint of collective accesses (docs/checker.md, "Collective
//! accesses in the static proof"): which thread touches which element of a tile.
//!
//! What it computes: for a collective access (`local_load`/`local_store`, `cp_async_tile`,
//! `gather_to_lds_tile`, wgmma's shared operands) over a view of shape `s` with element
//! strides `st` in its root buffer, the list of `(thread, offset)` pairs it touches, `offset =
//! sum(i_d * st_d)` for the element's index `i` in the view. The proof adds the view's own
//! offset form (slot indices, uniform unknowns) and then treats every pair like one instance
//! of a per-thread access.
//!
//! - A concrete distributed layout (`ir::layout`, a GF(2) linear map) gives each element its
//!   *writer* (writes, copies: one thread per element) and its *holders* (reads: the writer
//!   XOR the span of the layout's broadcast shifts), exactly as the interpreter executes it;
//!   a role-relative layout's layout thread `t` is block thread `first + t` (its group's).
//! - wgmma's operand reads are issued by the warpgroup and performed by the async proxy:
//!   every element is read by [`ANY`] thread, which collides with every thread, itself
//!   included (conservative: no thread is ever "the same thread" as a wgmma read).
//! - An opaque layout gives no footprint (`Ok(None)`): the proof keeps its older rule (one
//!   layout name and one shape on slot views map each element to one thread) for plain
//!   collective accesses, and declines async ones.
//!
//! Invariant: the footprint lists every element of the view at least once, so a tile access
//! is never smaller in the proof than on the machine. Complexity: O(elements x holders) per
//! access, capped at [`TILE_BUDGET`] pairs (beyond it the proof declines).

use crate::ir::layout::{Ownership, ownership};
use crate::ir::*;

/// A thread id standing for "any thread of the block": it is different from every thread,
/// itself included.
pub(super) const ANY: u32 = u32::MAX;

/// A thread id standing for the copy engine that performs TMA loads and stores (the async
/// proxy): different from every thread of the block and from [`ANY`], the same as itself.
/// Two TMA accesses are therefore never paired by the barrier intervals; each is met by the
/// other's in-flight walk (`check/proof_async.rs`), where a pending copy collides with every
/// instance, the engine's included. That covers every pair because no TMA access sits in
/// the `else` arm of an `if` (checked there), so of two TMA ops one follows the other in the
/// region tree.
pub(super) const ENGINE: u32 = u32::MAX - 1;

/// Most `(thread, element)` pairs of one collective access.
const TILE_BUDGET: u64 = 1 << 18;

/// The `(thread, offset)` pairs a collective access touches, or `Ok(None)` when its layout
/// is opaque and the access is not async (the caller keeps the opaque rule); `Err` says why
/// the proof declines.
pub(super) fn tile_footprint(
    k: &Kernel,
    op: Op,
    sa: &SharedAccess,
    (shape, strides): (&[u64], &[u64]),
    warp: u32,
) -> Result<Option<Vec<(u32, i64)>>, String> {
    let elems: u64 = shape.iter().product();
    let Footprint::Collective { layout } = &sa.footprint else {
        return Ok(None);
    };
    let offset = |e: u64| -> i64 {
        let mut rest = e;
        let mut off = 0i64;
        for d in (0..shape.len()).rev() {
            let n = shape[d].max(1);
            off += ((rest % n) * strides[d]) as i64;
            rest /= n;
        }
        off
    };
    if matches!(sa.kind, AccessKind::AsyncRead(AsyncClass::Wgmma)) {
        if elems > TILE_BUDGET {
            return Err(budget(k, op, elems));
        }
        return Ok(Some((0..elems).map(|e| (ANY, offset(e))).collect()));
    }
    if matches!(
        sa.kind,
        AccessKind::AsyncWrite(AsyncClass::Tma) | AccessKind::AsyncRead(AsyncClass::TmaStore)
    ) {
        if elems > TILE_BUDGET {
            return Err(budget(k, op, elems));
        }
        return Ok(Some((0..elems).map(|e| (ENGINE, offset(e))).collect()));
    }
    let owned = match ownership(k, layout.as_deref(), shape, warp) {
        Ownership::Concrete(x) => x,
        Ownership::Opaque(_) if sa.kind.is_async() => {
            return Err(format!(
                "{} is an async tile copy whose layout is opaque (its per-thread footprint is unknown)",
                super::proof::op_at(k, op)
            ));
        }
        Ownership::Opaque(_) => return Ok(None),
    };
    let first = owned.first;
    let m = owned.owners;
    let span: Vec<u32> = if sa.kind.writes() {
        vec![0]
    } else {
        // The span of the broadcast shifts: every holder of an element.
        let mut span = vec![0u32];
        for s in &m.shifts {
            let more: Vec<u32> = span.iter().map(|x| x ^ s).collect();
            span.extend(more);
        }
        span
    };
    if elems.saturating_mul(span.len() as u64) > TILE_BUDGET {
        return Err(budget(k, op, elems * span.len() as u64));
    }
    let mut out = Vec::with_capacity((elems as usize) * span.len());
    for e in 0..elems {
        let w = m.writer(e);
        let off = offset(e);
        out.extend(span.iter().map(|s| (first + (w ^ s), off)));
    }
    Ok(Some(out))
}

fn budget(k: &Kernel, op: Op, n: u64) -> String {
    format!(
        "{} touches {n} (thread, element) pairs, more than the proof enumerates ({TILE_BUDGET})",
        super::proof::op_at(k, op)
    )
}
