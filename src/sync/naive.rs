//! The naive placer: the conservative baseline (what TVM- and Triton-style passes do).
//!
//! Walking destinations in program order, a block barrier goes immediately before every
//! access that conflicts with an earlier one not yet separated by a barrier (loop-carried
//! conflicts included). Under thread-dependent control the barrier goes before the outermost
//! divergent ancestor when that still orders the accesses; failing that, an intra-warp hazard
//! under warp-uniform control gets a warp sync right before its destination; otherwise the
//! hazard is reported.
//! It uses the same hazard model as the optimal placer, so it is correct, and it is the
//! upper bound the optimal placer must never exceed.
//! Complexity: O(H · B) for H hazards and B barriers placed.

use super::{Point, PointIndex, Scope, SyncModel};
use crate::analysis::hazards::Hazard;
use crate::diag::Diagnostic;

pub fn place(
    model: &SyncModel,
    hazards: &[Hazard],
    pending: &[usize],
) -> Result<Vec<Point>, Vec<Diagnostic>> {
    let k = model.k;
    let rank = k.program_order();
    let mut order = pending.to_vec();
    order.sort_by_key(|&i| {
        (
            rank.get(&hazards[i].dst.op).copied(),
            rank.get(&hazards[i].src_at).copied(),
        )
    });
    let mut chosen: Vec<Point> = Vec::new();
    let mut index = PointIndex::default();
    let mut diags = Vec::new();
    for i in order {
        let h = &hazards[i];
        if index.covers(h) {
            continue;
        }
        let mut op = h.dst.op;
        let mut point = None;
        while let Some((r, idx)) = model.paths.pos(op) {
            if model.is_legal(r) {
                // Outside hand-written split windows: the nearest allowed gap before.
                let g = (0..=idx)
                    .rev()
                    .find(|&g| !model.in_split_window(r, g))
                    .unwrap_or(idx);
                point = Some(Point {
                    region: r,
                    coord: 2 * g,
                    scope: Scope::Block,
                })
                .filter(|p| !model.in_split_window(r, p.coord / 2));
                break;
            }
            match model.paths.region_op.get(&r) {
                Some(&p) => op = p,
                None => break,
            }
        }
        // Where no block barrier can go, an intra-warp hazard gets a warp sync right before
        // its destination when whole warps reach it (a warp-uniform branch).
        if !point.is_some_and(|p| model.covers(&p, h))
            && h.intra_warp
            && let Some((r, idx)) = model.paths.pos(h.dst.op)
            && model.is_legal_for(r, Scope::Warp)
        {
            point = Some(Point {
                region: r,
                coord: 2 * idx,
                scope: Scope::Warp,
            });
        }
        match point {
            Some(p) if model.covers(&p, h) => {
                chosen.push(p);
                index.insert(p);
            }
            _ => diags.push(model.unplaceable(h)),
        }
    }
    if diags.is_empty() {
        Ok(chosen)
    } else {
        Err(diags)
    }
}
