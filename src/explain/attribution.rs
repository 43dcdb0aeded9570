//! The one place `smemsync explain` reads which sync removes which hazard: a small interface
//! over the placement's result ([`Attribution`]), so that a change in how placement
//! attributes hazards to syncs (say, lazily, only for `--explain`) touches this file only.
//!
//! Invariants: coverage is recomputed from each inserted sync's point and the hazard's own
//! coverage (`SyncModel::covers`), so every sync that removes a hazard is known even when the
//! placement lists the hazard under one sync only; the *primary* sync of a hazard is the
//! first (program order) that the placement lists it under, else the first that covers it.
//! Complexity: O(syncs · hazards · segments).

use crate::analysis::hazards::Hazard;
use crate::ir::edit::op_positions;
use crate::ir::{Kernel, OpKind, Region};
use crate::sync::{Placement, Point, Scope, SyncModel};

/// One inserted sync of the plan: its edit index, point and op.
#[derive(Clone, Debug)]
pub struct SyncSite {
    pub edit: usize,
    pub point: Point,
    pub op: OpKind,
}

impl SyncSite {
    /// The region and gap of the sync.
    pub fn gap(&self) -> (Region, usize) {
        (self.point.region, self.point.coord / 2)
    }
}

/// Which syncs remove which hazards.
#[derive(Clone, Debug, Default)]
pub struct Attribution {
    /// The inserted syncs, in program order (the plan's numbering).
    pub sites: Vec<SyncSite>,
    /// Per hazard: every inserted sync whose point removes it.
    pub covering: Vec<Vec<usize>>,
    /// Per hazard: the sync it is explained under.
    pub primary: Vec<Option<usize>>,
    /// Per hazard: removed by a sync of the input.
    pub existing: Vec<bool>,
}

/// Reads the placement `p` of kernel `k` (the kernel placement ran on).
pub fn attribute(model: &SyncModel, k: &Kernel, p: &Placement) -> Attribution {
    let pos = op_positions(k);
    let sites: Vec<SyncSite> = p
        .plan
        .edits
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let (region, gap) = e.at.resolve(k, &pos)?;
            let scope = match e.op {
                OpKind::WarpSync => Scope::Warp,
                _ => Scope::Block,
            };
            Some(SyncSite {
                edit: i,
                point: Point {
                    region,
                    coord: 2 * gap,
                    scope,
                },
                op: e.op.clone(),
            })
        })
        .collect();
    let n = p.hazards.len();
    let mut covering = vec![Vec::new(); n];
    for (s, site) in sites.iter().enumerate() {
        for (h, hz) in p.hazards.iter().enumerate() {
            if model.covers(&site.point, hz) {
                covering[h].push(s);
            }
        }
    }
    let mut primary: Vec<Option<usize>> = vec![None; n];
    for (s, site) in sites.iter().enumerate() {
        for &h in p.removes.get(site.edit).into_iter().flatten() {
            if h < n && primary[h].is_none() {
                primary[h] = Some(s);
            }
        }
    }
    for h in 0..n {
        if primary[h].is_none() {
            primary[h] = covering[h].first().copied();
        }
    }
    let mut existing = vec![false; n];
    for &h in &p.existing {
        if h < n {
            existing[h] = true;
        }
    }
    Attribution {
        sites,
        covering,
        primary,
        existing,
    }
}

/// Whether some point of `points` removes `h`.
pub fn covered_by_any(model: &SyncModel, points: &[Point], h: &Hazard) -> Option<Point> {
    points.iter().copied().find(|p| model.covers(p, h))
}
