//! Pairs of conflicting accesses that needed no inserted sync, and why.
//!
//! Every pair of shared accesses in one address space whose kinds can conflict (a write on
//! either side, not two atomics of one kind) and that some path runs in order (source before
//! destination in program order, or both in a common loop) gets one reason:
//! - **ordered by an existing sync**: a hazard the input's own syncs remove (a warp sync: the
//!   pair lies in one warp);
//! - **covered by another**: a hazard the nearest-first pruning dropped (a nearer producer's
//!   hazard is removed by a sync on every path of this one);
//! - **same thread** / **same layout**: the two accesses touch common elements, but each
//!   element from one thread only (per-thread indices, or two collective accesses with one
//!   layout name and shape);
//! - **disjoint slots** / **disjoint elements**: their elements never meet in an iteration
//!   relation that a path runs (different slots of a multi-buffered view, or different
//!   elements).
//!
//! The conflict tests are `analysis::conflicts::pair_conflict` over the same footprints the
//! hazard analysis uses. Complexity: O(A²·C) as hazard analysis; a kernel with more than
//! [`MAX_ACCESSES`] accesses in one address space reports the pairs in summary only.

use std::collections::HashSet;

use crate::analysis::conflicts::{kinds_conflict, pair_conflict};
use crate::analysis::footprint::{AccessRef, Footprints};
use crate::analysis::hazards::{Carry, Hazard, find_all_hazards};
use crate::emit::explain::Namer;
use crate::ir::{Footprint, Kernel, MemRef, Op};
use crate::sync::{Scope, SyncModel};
use crate::target::Target;

use super::attribution::Attribution;

/// Above this many accesses in one address space the pairs are not enumerated.
pub const MAX_ACCESSES: usize = 160;

/// Why a pair needed no inserted sync.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    OrderedByExisting,
    SameWarp,
    CoveredByAnother,
    SameThread,
    SameLayout,
    DisjointSlots,
    DisjointElements,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::OrderedByExisting => "ordered by an existing sync",
            Reason::SameWarp => "same warp",
            Reason::CoveredByAnother => "covered by another",
            Reason::SameThread => "same thread",
            Reason::SameLayout => "same layout",
            Reason::DisjointSlots => "disjoint slots",
            Reason::DisjointElements => "disjoint elements",
        }
    }
}

/// One pair and its reason.
#[derive(Clone, Debug)]
pub struct NoSync {
    pub reason: Reason,
    pub producer: String,
    pub consumer: String,
    pub buffer: String,
    /// "same iteration", "carried by …", "across iterations of …".
    pub relation: String,
    pub detail: String,
}

/// What the analysis reads.
pub struct Ctx<'a> {
    pub k: &'a Kernel,
    pub target: &'a Target,
    pub model: &'a SyncModel<'a>,
    pub names: &'a Namer<'a>,
    pub hazards: &'a [Hazard],
    pub att: &'a Attribution,
}

type Key = (AccessRef, AccessRef, Option<Op>);

fn key(h: &Hazard) -> Key {
    let l = match h.carry {
        Carry::Forward => None,
        Carry::Carried { loop_op, .. } => Some(loop_op),
    };
    (h.src, h.dst, l)
}

fn relation(names: &Namer, h: &Hazard) -> String {
    match h.carry {
        Carry::Forward => "same iteration".into(),
        Carry::Carried {
            loop_op,
            min_distance,
            ..
        } => format!(
            "carried by {} at iteration distance {min_distance}",
            names.op(loop_op)
        ),
    }
}

/// Every pair that needed no inserted sync, with its reason.
pub fn explain_unneeded(ctx: &Ctx) -> Vec<NoSync> {
    let mut out = Vec::new();
    for (h, hz) in ctx.hazards.iter().enumerate() {
        if ctx.att.existing[h] {
            out.push(existing(ctx, hz));
        }
    }
    let all = find_all_hazards(ctx.k, ctx.target).hazards;
    let kept: HashSet<Key> = ctx.hazards.iter().map(key).collect();
    let mut pairs_with_hazards: HashSet<(AccessRef, AccessRef)> = HashSet::new();
    let mut sites: Vec<crate::sync::Point> = ctx.att.sites.iter().map(|s| s.point).collect();
    sites.extend(ctx.model.existing.iter().copied());
    for hz in &all {
        pairs_with_hazards.insert((hz.src, hz.dst));
        if kept.contains(&key(hz)) {
            continue;
        }
        let by = sites.iter().position(|p| ctx.model.covers(p, hz));
        let point = |p: &crate::sync::Point| {
            ctx.names
                .point(ctx.model.program_point(p.region, p.coord / 2).anchor)
        };
        let detail = match by {
            Some(j) if j < ctx.att.sites.len() => format!(
                "implied by a nearer producer's hazard; sync #{j} ({}) removes both",
                point(&sites[j])
            ),
            Some(j) => {
                let p = sites[j];
                let op = ctx.k.region_ops(p.region).get(p.coord / 2).copied();
                let what = op.map_or_else(|| "a sync of the input".into(), |o| ctx.names.op(o));
                format!("implied by a nearer producer's hazard; the input's {what} removes both")
            }
            None => "implied by a nearer producer's hazard".into(),
        };
        out.push(NoSync {
            reason: Reason::CoveredByAnother,
            producer: ctx.names.op(hz.src.op),
            consumer: ctx.names.op(hz.dst.op),
            buffer: crate::emit::explain::buffer_name(ctx.k, hz),
            relation: relation(ctx.names, hz),
            detail,
        });
    }
    footprint_pairs(ctx, &pairs_with_hazards, &mut out);
    out.sort_by_key(|n| n.reason);
    out
}

fn existing(ctx: &Ctx, hz: &Hazard) -> NoSync {
    let by = super::attribution::covered_by_any(ctx.model, &ctx.model.existing, hz);
    let (reason, detail) = match by {
        Some(p) => {
            let op = ctx.k.region_ops(p.region).get(p.coord / 2).copied();
            let what = op.map_or_else(|| "a sync of the input".into(), |o| ctx.names.op(o));
            if p.scope == Scope::Warp {
                (
                    Reason::SameWarp,
                    format!(
                        "every conflicting pair of threads lies in one warp, and {what} orders them"
                    ),
                )
            } else {
                (Reason::OrderedByExisting, format!("{what} orders them"))
            }
        }
        None => (
            Reason::OrderedByExisting,
            "a sync of the input orders them".into(),
        ),
    };
    NoSync {
        reason,
        producer: ctx.names.op(hz.src.op),
        consumer: ctx.names.op(hz.dst.op),
        buffer: crate::emit::explain::buffer_name(ctx.k, hz),
        relation: relation(ctx.names, hz),
        detail,
    }
}

/// Pairs with no hazard at all: why their footprints never conflict.
fn footprint_pairs(
    ctx: &Ctx,
    with_hazards: &HashSet<(AccessRef, AccessRef)>,
    out: &mut Vec<NoSync>,
) {
    let mut fp = Footprints::new(ctx.k, ctx.target.warp);
    let order = ctx.k.program_order();
    let mut by_space: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
    for (i, a) in fp.accesses.iter().enumerate() {
        by_space.entry(a.space).or_default().push(i);
    }
    for group in by_space.values() {
        if group.len() > MAX_ACCESSES {
            continue;
        }
        for &ai in group {
            for &bi in group {
                let scan = PairScan {
                    ctx,
                    order: &order,
                    with_hazards,
                };
                if let Some(n) = footprint_pair(&scan, &mut fp, ai, bi) {
                    out.push(n);
                }
            }
        }
        fp.clear_caches();
    }
}

/// What [`footprint_pair`] reads besides the footprints: the report's context, the program
/// order of ops, and the pairs that have hazards (explained elsewhere).
struct PairScan<'a> {
    ctx: &'a Ctx<'a>,
    order: &'a rustc_hash::FxHashMap<Op, usize>,
    with_hazards: &'a HashSet<(AccessRef, AccessRef)>,
}

/// Why accesses `ai` and `bi` (in program order, or one op with itself across iterations)
/// need no sync though their kinds conflict, or None when they have a hazard or conflict.
fn footprint_pair(
    scan: &PairScan<'_>,
    fp: &mut Footprints,
    ai: usize,
    bi: usize,
) -> Option<NoSync> {
    let PairScan {
        ctx,
        order,
        with_hazards,
    } = *scan;
    let (a, b) = (fp.accesses[ai].clone(), fp.accesses[bi].clone());
    if !kinds_conflict(a.access.kind, b.access.kind) || with_hazards.contains(&(a.id, b.id)) {
        return None;
    }
    // Each unordered pair once: the source is the earlier one (or, for one op, itself).
    let forward = order.get(&a.id.op)? < order.get(&b.id.op)?;
    if !forward && ai != bi {
        return None;
    }
    let plen = a
        .loops
        .iter()
        .zip(&b.loops)
        .take_while(|(x, y)| x == y)
        .count();
    if !forward && plen == 0 {
        return None;
    }
    let mut conflict = 0u64;
    let mut intersect = 0u64;
    if forward {
        let pc = pair_conflict(fp, ai, bi, plen, None);
        conflict |= pc.conflict;
        intersect |= pc.intersect;
    }
    let across = plen.checked_sub(1).map(|c| {
        let pc = pair_conflict(fp, ai, bi, plen, Some(c));
        (pc.conflict & !1, pc.intersect & !1)
    });
    if let Some((c, i)) = across {
        conflict |= c;
        intersect |= i;
    }
    if conflict != 0 {
        // Conflicting without a hazard: ordered some other way (async completion); not ours
        // to explain.
        return None;
    }
    let (reason, detail) = no_conflict_reason(&a, &b, intersect != 0);
    let relation = match (forward, plen) {
        (true, 0) => "in program order".to_string(),
        (true, _) => "in one iteration and across iterations".to_string(),
        (false, _) => "across iterations".to_string(),
    };
    let buf = |m: MemRef| format!("@{}", ctx.k.buffers[ctx.k.root_buffer(m)].name);
    let (ba, bb) = (buf(a.access.mem), buf(b.access.mem));
    Some(NoSync {
        reason,
        producer: ctx.names.op(a.id.op),
        consumer: ctx.names.op(b.id.op),
        buffer: if ba == bb {
            ba
        } else {
            format!("{ba} (aliased by {bb})")
        },
        relation,
        detail,
    })
}

/// The reason two conflicting kinds of access never conflict on an element: they touch
/// common elements (`intersect`) only from one thread (or through one layout), or different
/// slots, or different elements.
fn no_conflict_reason(
    a: &crate::analysis::footprint::AccessInfo,
    b: &crate::analysis::footprint::AccessInfo,
    intersect: bool,
) -> (Reason, String) {
    let collective = |x: &crate::analysis::footprint::AccessInfo| match &x.access.footprint {
        Footprint::Collective { layout } => layout.clone(),
        Footprint::PerThread(_) => None,
    };
    let sliced = matches!(a.access.mem, MemRef::View(_)) || matches!(b.access.mem, MemRef::View(_));
    if intersect {
        match (collective(a), collective(b)) {
            (Some(x), Some(y)) if x == y => (
                Reason::SameLayout,
                format!(
                    "both use layout \"{x}\": each element is touched by the same thread on both sides"
                ),
            ),
            _ => (
                Reason::SameThread,
                "they touch common elements, each from one thread only: program order orders them"
                    .into(),
            ),
        }
    } else if sliced {
        (
            Reason::DisjointSlots,
            "they touch different slots of the buffer whenever one runs after the other".into(),
        )
    } else {
        (
            Reason::DisjointElements,
            "they never touch a common element".into(),
        )
    }
}
