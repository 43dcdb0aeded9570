//! Why an inserted sync sits where it does: the positions that would remove the same
//! hazards, what each costs, and the cheaper positions that would not do.
//!
//! For sync `s` the hazards that justify it are those no other inserted sync removes (its
//! *own* hazards; all it removes when it has none). A candidate is a legal point of the
//! placement model (a gap of a region every thread of the block, or of the warp for a warp
//! sync, reaches together) and costs the number of times it executes
//! (`SyncModel::weight_bounds`). The report names: how often `s` executes; the other
//! positions removing its own hazards at the same cost; the cheapest dearer one ("a barrier
//! here executes once instead of 8 times"); the cheapest cheaper one and the hazards it would
//! leave. Complexity: O(points · own hazards · segments) per sync.

use crate::analysis::hazards::{Carry, Hazard};
use crate::emit::explain::Namer;
use crate::ir::edit::body_len;
use crate::sync::{Point, SyncModel};

use super::attribution::Attribution;
use super::hazard_id;

/// What the position analysis reads.
pub struct Ctx<'a> {
    pub model: &'a SyncModel<'a>,
    pub names: &'a Namer<'a>,
    pub hazards: &'a [Hazard],
    pub att: &'a Attribution,
}

/// A candidate point and its cost.
#[derive(Copy, Clone, Debug)]
struct Candidate {
    point: Point,
    weight: u64,
}

fn weight(model: &SyncModel, p: &Point) -> u64 {
    model.weight_bounds.get(&p.region).copied().unwrap_or(1)
}

/// Every legal gap for a sync of `like`'s scope.
fn candidates(model: &SyncModel, like: &Point) -> Vec<Candidate> {
    let k = model.k;
    let mut out = Vec::new();
    for (r, _) in k.regions().iter() {
        if !model.is_legal_for(r, like.scope) || !model.weight_bounds.contains_key(&r) {
            continue;
        }
        for g in 0..=body_len(k, r) {
            let point = Point {
                region: r,
                coord: 2 * g,
                scope: like.scope,
            };
            out.push(Candidate {
                weight: weight(model, &point),
                point,
            });
        }
    }
    out
}

fn times(w: u64) -> String {
    match w {
        1 => "once".into(),
        n if n >= crate::sync::SYMBOLIC_TRIP => {
            "once per iteration of a loop of unknown trip count".into()
        }
        n => format!("{n} times"),
    }
}

fn point_name(ctx: &Ctx, p: &Point) -> String {
    ctx.names
        .point(ctx.model.program_point(p.region, p.coord / 2).anchor)
}

fn ids(hs: &[usize]) -> String {
    hs.iter()
        .map(|&h| hazard_id(h))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The sentences explaining sync `s`'s position.
pub fn why_here(ctx: &Ctx, s: usize) -> Vec<String> {
    let site = &ctx.att.sites[s];
    let me = site.point;
    let all: Vec<usize> = (0..ctx.hazards.len())
        .filter(|&h| ctx.att.covering[h].contains(&s))
        .collect();
    let own: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&h| ctx.att.covering[h].len() == 1)
        .collect();
    let mut out = Vec::new();
    let w = weight(ctx.model, &me);
    out.push(format!("executes {} per block", times(w)));
    shared_hazards(&all, &own, &mut out);
    let target = if own.is_empty() { &all } else { &own };
    if target.is_empty() {
        return out;
    }
    if target.iter().all(|&h| ctx.hazards[h].intra_warp) && me.scope == crate::sync::Scope::Warp {
        out.push(
            "a warp sync suffices: every pair of threads that conflict lies in one warp".into(),
        );
    }
    other_positions(ctx, &me, target, w, &mut out);
    out
}

/// The sentence on the hazards of a sync (`all`) that another inserted sync also removes
/// (those not in `own`), when there are such.
fn shared_hazards(all: &[usize], own: &[usize], out: &mut Vec<String>) {
    if own.is_empty() && !all.is_empty() {
        out.push(format!(
            "every hazard it removes ({}) is also removed by another inserted sync: it shares them",
            ids(all)
        ));
    } else if own.len() < all.len() {
        out.push(format!(
            "needed for {} (no other sync removes them); {} are also removed by another sync",
            ids(own),
            ids(&all
                .iter()
                .copied()
                .filter(|h| !own.contains(h))
                .collect::<Vec<_>>())
        ));
    }
}

/// The sentences comparing the sync at `me` (executed `w` times) with the other positions
/// that remove every hazard of `target`: as cheap, dearer, cheaper ([`cheaper`] when none
/// removes them all).
fn other_positions(ctx: &Ctx, me: &Point, target: &[usize], w: u64, out: &mut Vec<String>) {
    let cands = candidates(ctx.model, me);
    let covers = |c: &Candidate, h: usize| ctx.model.covers(&c.point, &ctx.hazards[h]);
    let full: Vec<&Candidate> = cands
        .iter()
        .filter(|c| c.point != *me && target.iter().all(|&h| covers(c, h)))
        .collect();
    let same: Vec<&&Candidate> = full.iter().filter(|c| c.weight == w).collect();
    match same.as_slice() {
        [] => out.push("no other position removes these hazards as cheaply".into()),
        [c] => out.push(format!(
            "one other position removes them as cheaply: {}",
            point_name(ctx, &c.point)
        )),
        [c, .., d] => out.push(format!(
            "{} other positions remove them as cheaply, from {} to {}",
            same.len(),
            point_name(ctx, &c.point),
            point_name(ctx, &d.point)
        )),
    }
    if let Some(c) = full
        .iter()
        .filter(|c| c.weight > w)
        .min_by_key(|c| c.weight)
    {
        out.push(format!(
            "a sync {} would also remove them but executes {} instead of {}",
            point_name(ctx, &c.point),
            times(c.weight),
            times(w)
        ));
    }
    if let Some(c) = full
        .iter()
        .filter(|c| c.weight < w)
        .min_by_key(|c| c.weight)
    {
        out.push(format!(
            "a sync {} would remove them too, executing {}: the placer minimizes the executions of all syncs together, not of each",
            point_name(ctx, &c.point),
            times(c.weight)
        ));
    } else {
        cheaper(ctx, &cands, target, w, out);
    }
}

/// The cheapest cheaper position that removes some of `target`, and what it would leave.
fn cheaper(ctx: &Ctx, cands: &[Candidate], target: &[usize], w: u64, out: &mut Vec<String>) {
    let best = cands
        .iter()
        .filter(|c| c.weight < w)
        .map(|c| {
            let got: Vec<usize> = target
                .iter()
                .copied()
                .filter(|&h| ctx.model.covers(&c.point, &ctx.hazards[h]))
                .collect();
            (c, got)
        })
        .filter(|(_, got)| !got.is_empty())
        .min_by_key(|(c, got)| (std::cmp::Reverse(got.len()), c.weight));
    match best {
        Some((c, got)) => {
            let left: Vec<usize> = target
                .iter()
                .copied()
                .filter(|h| !got.contains(h))
                .collect();
            out.push(format!(
                "a sync {} would execute {} instead of {} but leaves {} ({})",
                point_name(ctx, &c.point),
                times(c.weight),
                times(w),
                ids(&left),
                why_inside(ctx, &left)
            ));
        }
        None if w > 1 => out.push(format!(
            "no position that executes fewer times removes any of them ({})",
            why_inside(ctx, target)
        )),
        None => {}
    }
}

/// Why hazards need a sync inside a loop: the loop that carries them, else "their accesses
/// are in it".
fn why_inside(ctx: &Ctx, hs: &[usize]) -> String {
    let carried = hs.iter().find_map(|&h| match ctx.hazards[h].carry {
        Carry::Carried { loop_op, .. } => Some((h, loop_op)),
        Carry::Forward => None,
    });
    match carried {
        Some((h, l)) => format!(
            "{} crosses the back edge of {}: only a sync in that loop body orders it",
            hazard_id(h),
            ctx.names.op(l)
        ),
        None => {
            "both accesses of each run in every iteration, so must the sync between them".into()
        }
    }
}
