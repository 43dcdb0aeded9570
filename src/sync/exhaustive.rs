//! The exhaustive placer: a test oracle for small kernels.
//!
//! Searches every set of candidate sync points (every gap, in a region where a sync is
//! legal, that lies in some pending hazard's coverage; block barriers, and warp syncs for
//! intra-warp hazards, also where only whole warps arrive) for the cheapest set that removes every pending hazard, with the same
//! hazard model as the placers. The objective is lexicographic: block barriers executed, warp
//! syncs executed, syncs written. The search branches on the candidates that cover the first
//! uncovered hazard (every minimal cover is reached this way, so this is equivalent to trying
//! all subsets) and prunes branches that cannot beat the best cover found.
//! Complexity: exponential in the number of candidates; refuses more than `max_candidates`.

use std::collections::BTreeSet;

use super::{Point, Scope, SyncModel};
use crate::analysis::hazards::Hazard;

type Cost = (u64, u64, usize);

fn cost_of(model: &SyncModel, p: &Point) -> Cost {
    let w = model.weight[&p.region];
    match p.scope {
        Scope::Block => (w, 0, 1),
        Scope::Warp => (0, w, 1),
    }
}

fn add(a: Cost, b: Cost) -> Cost {
    (a.0.saturating_add(b.0), a.1.saturating_add(b.1), a.2 + b.2)
}

/// Returns the cheapest set of points, or `None` when there are too many candidates.
pub fn place(
    model: &SyncModel,
    hazards: &[Hazard],
    pending: &[usize],
    max_candidates: usize,
) -> Option<Vec<Point>> {
    let mut cands: BTreeSet<Point> = BTreeSet::new();
    for &i in pending {
        let h = &hazards[i];
        for s in h.segments() {
            let block = model.is_legal(s.region);
            if !(block || h.intra_warp && model.is_legal_for(s.region, Scope::Warp)) {
                continue;
            }
            for c in (s.lo.div_ceil(2) * 2..=s.hi).step_by(2) {
                if block && !model.in_split_window(s.region, c / 2) {
                    cands.insert(Point {
                        region: s.region,
                        coord: c,
                        scope: Scope::Block,
                    });
                }
                if h.intra_warp {
                    cands.insert(Point {
                        region: s.region,
                        coord: c,
                        scope: Scope::Warp,
                    });
                }
            }
        }
    }
    if cands.len() > max_candidates {
        return None;
    }
    let cands: Vec<Point> = cands.into_iter().collect();
    let mut best: Option<(Cost, Vec<Point>)> = None;
    let mut cur = Vec::new();
    search(
        model,
        hazards,
        pending,
        &cands,
        &mut cur,
        (0, 0, 0),
        &mut best,
    );
    best.map(|(_, v)| v)
}

fn search(
    model: &SyncModel,
    hazards: &[Hazard],
    pending: &[usize],
    cands: &[Point],
    cur: &mut Vec<Point>,
    cost: Cost,
    best: &mut Option<(Cost, Vec<Point>)>,
) {
    if best.as_ref().is_some_and(|(b, _)| cost >= *b) {
        return;
    }
    let first = pending
        .iter()
        .find(|&&i| !cur.iter().any(|p| model.covers(p, &hazards[i])));
    let Some(&i) = first else {
        *best = Some((cost, cur.clone()));
        return;
    };
    let h = &hazards[i];
    let mut options: Vec<(Cost, Point)> = cands
        .iter()
        .filter(|p| model.covers(p, h))
        .map(|p| (cost_of(model, p), *p))
        .collect();
    options.sort();
    for (c, p) in options {
        cur.push(p);
        search(model, hazards, pending, cands, cur, add(cost, c), best);
        cur.pop();
    }
}
