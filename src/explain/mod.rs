//! `smemsync explain`: why every sync of a synchronized kernel exists, as data ([`Report`])
//! that the text, JSON, SVG and HTML renderers draw from.
//!
//! For each inserted sync: the hazards it removes (producer, consumer, buffer, an element and
//! a pair of threads, RAW/WAR/WAW/async, iteration distance), how often it executes and the
//! positions that were the alternatives (`position`). For each pair of conflicting accesses
//! that needed no inserted sync: why (`unneeded`). The picture's rows are the printed output
//! kernel (`timeline`).
//!
//! The report reads the pipeline's results only (`sync::driver::Synchronized`), and the
//! hazard-to-sync attribution through [`attribution`]; it re-derives nothing the placer
//! decided. Complexity: O(syncs · hazards · points) for the positions plus the pairwise
//! conflict tests of `unneeded` (as hazard analysis, O(A²·C)).

pub mod attribution;
pub mod html;
pub mod position;
pub mod render;
pub mod svg;
pub mod timeline;
pub mod unneeded;

use std::collections::HashMap;

use crate::analysis::footprint::{Footprints, Who};
use crate::analysis::hazards::{Carry, Hazard};
use crate::emit::explain::{Namer, buffer_name};
use crate::emit::text::op_label;
use crate::ir::effects::is_sync;
use crate::ir::{EntityRef, Kernel, OpKind, SyncEffect, effects};
use crate::sync::driver::Synchronized;
use crate::sync::{SYMBOLIC_TRIP, SyncModel};
use crate::target::Target;

use attribution::{Attribution, SyncSite, attribute};
use timeline::Timeline;

/// Everything `smemsync explain` says about one kernel.
#[derive(Clone, Debug)]
pub struct Report {
    pub kernel: String,
    pub target: String,
    pub timeline: Timeline,
    pub hazards: Vec<HazardView>,
    pub syncs: Vec<SyncView>,
    /// Sync ops of the output that are not inserted barriers: waits (inserted or the input's),
    /// the input's own barriers, fences, split signals of existing pairs.
    pub marks: Vec<Mark>,
    /// Async copies in flight: from the issuing op's row to the row of the wait completing it.
    pub windows: Vec<Window>,
    pub unneeded: Vec<unneeded::NoSync>,
    pub waits: Vec<WaitView>,
    /// Rows of every sync op a pass inserted (waits, barriers, split halves, fences).
    pub inserted_rows: Vec<usize>,
}

/// One inserted wait (or commit) and why.
#[derive(Clone, Debug)]
pub struct WaitView {
    pub op: String,
    pub row: Option<usize>,
    /// Where it is, as the input reads.
    pub at: String,
    pub why: Vec<String>,
}

/// One hazard, named for a reader.
#[derive(Clone, Debug)]
pub struct HazardView {
    pub kind: &'static str,
    pub buffer: String,
    pub producer: String,
    pub consumer: String,
    /// An async producer: the wait at which its data becomes visible.
    pub visible_at: Option<String>,
    pub src_row: Option<usize>,
    pub dst_row: Option<usize>,
    pub visible_row: Option<usize>,
    /// The loop that carries it, the least distance, and the loop's band.
    pub carried: Option<(String, u32, Option<usize>)>,
    /// An element and two threads that touch it.
    pub example: Option<String>,
    pub intra_warp: bool,
    /// For a hazard that orders no data, the rule that states it (the role barrier before
    /// an elected signal, `emit::explain::ordering_rule`).
    pub rule: Option<&'static str>,
    /// Inserted syncs that remove it (indices into [`Report::syncs`]).
    pub removed_by: Vec<usize>,
    /// The sync it is explained under.
    pub primary: Option<usize>,
    /// Removed by a sync of the input.
    pub existing: bool,
}

impl HazardView {
    /// "same iteration" or "carried by `for …` at distance d".
    pub fn distance(&self) -> String {
        match &self.carried {
            None => "same iteration".into(),
            Some((l, d, _)) => format!("carried by {l} at iteration distance {d}"),
        }
    }
}

/// What kind of sync an inserted sync is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncKindView {
    Barrier,
    WarpSync,
    /// A named barrier over a role arm's threads: its id and thread count.
    Named {
        id: u32,
        count: u32,
    },
    /// A block barrier lowered to a split signal/wait pair (gfx12).
    Split,
}

impl SyncKindView {
    pub fn name(&self) -> String {
        match self {
            SyncKindView::Barrier => "barrier".into(),
            SyncKindView::WarpSync => "warp sync".into(),
            SyncKindView::Named { id, count } => format!("named barrier {id} ({count} threads)"),
            SyncKindView::Split => "split barrier".into(),
        }
    }

    /// The CSS class and JSON name.
    pub fn class(&self) -> &'static str {
        match self {
            SyncKindView::Barrier => "barrier",
            SyncKindView::WarpSync => "warp_sync",
            SyncKindView::Named { .. } => "named_barrier",
            SyncKindView::Split => "split_barrier",
        }
    }
}

/// One inserted sync (a plan edit), explained.
#[derive(Clone, Debug)]
pub struct SyncView {
    pub kind: SyncKindView,
    /// The op as printed in the output.
    pub op: String,
    /// The output row of the sync (for a split pair: of its wait).
    pub row: Option<usize>,
    /// A split pair's signal row.
    pub signal_row: Option<usize>,
    /// Where it is, as the input reads.
    pub at: String,
    /// How often it executes per block ("8 times", "once", "every iteration of …").
    pub executes: String,
    /// Every hazard it removes.
    pub removes: Vec<usize>,
    /// Why this position, and the alternatives.
    pub why: Vec<String>,
}

/// A sync op of the output drawn for context.
#[derive(Clone, Debug)]
pub struct Mark {
    pub row: usize,
    pub kind: MarkKind,
    pub op: String,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// A wait on async copies (inserted when `inserted`).
    Wait { inserted: bool },
    /// A sync the input had (barrier, warp sync, named barrier, split half).
    Existing,
    /// A proxy fence or another inserted sync op that is not a barrier.
    Other,
}

/// An async copy in flight.
#[derive(Clone, Debug)]
pub struct Window {
    pub issue_row: usize,
    pub wait_row: usize,
    pub label: String,
}

/// Builds the report of one kernel: `input` as parsed from `src`, `s` the pipeline's result
/// on it.
pub fn explain(
    input: &Kernel,
    src: &str,
    target: &Target,
    s: &Synchronized,
    bounds: &HashMap<String, i64>,
) -> Report {
    let k = s.with_waits();
    let names = Namer::new(k, src)
        .inserted(s.input_ops, &s.kernel)
        .explicit();
    let mut fp = Footprints::new(k, target.warp);
    // Enumerated conflicts name a unit (found only for messages); symbolic ones do not.
    let mut placed = s.placement.hazards.clone();
    crate::analysis::hazards::fill_enumerated_witnesses(&mut fp, &mut placed);
    let fp = fp;
    let mut model = SyncModel::new(k, &fp, bounds);
    model.enable_named(target);
    let att = attribute(&model, k, &s.placement);
    let timeline = Timeline::new(&s.kernel);
    let hazards: Vec<HazardView> = placed
        .iter()
        .enumerate()
        .map(|(i, h)| hazard_view(k, &fp, &names, &timeline, &att, i, h))
        .collect();
    let ctx = position::Ctx {
        model: &model,
        names: &names,
        hazards: &s.placement.hazards,
        att: &att,
    };
    let syncs = att
        .sites
        .iter()
        .enumerate()
        .map(|(i, site)| sync_view(s, &ctx, &timeline, &hazards, i, site))
        .collect();
    let unneeded = unneeded::explain_unneeded(&unneeded::Ctx {
        k,
        target,
        model: &model,
        names: &names,
        hazards: &s.placement.hazards,
        att: &att,
    });
    let waits = wait_views(input, src, s, &timeline);
    let inserted_rows = s
        .inserted()
        .into_iter()
        .filter_map(|o| timeline.row.get(&o).copied())
        .collect();
    Report {
        waits,
        inserted_rows,
        kernel: input.name.clone(),
        target: target.name.to_string(),
        marks: marks(s, &timeline),
        windows: windows(&s.placement.hazards, &timeline, k),
        timeline,
        hazards,
        syncs,
        unneeded,
    }
}

/// "thread 89", "the thread owning layout position 12", "threads of warp 1", ….
pub fn who(w: Who) -> String {
    match w {
        Who::One(t) => format!("thread {t}"),
        Who::Lane { pos, .. } => format!("the thread owning layout position {pos}"),
        Who::Many(Some(w)) => format!("threads of warp {w}"),
        Who::Many(None) => "several threads".into(),
    }
}

/// [`who`] for one access: a layout position names the access's layout, since the same
/// position of two layouts is in general two threads.
fn who_in(k: &Kernel, a: crate::analysis::footprint::AccessRef, w: Who) -> String {
    let layout = effects(k, a.op)
        .shared
        .get(a.index)
        .and_then(|s| match &s.footprint {
            crate::ir::Footprint::Collective { layout } => layout.clone(),
            crate::ir::Footprint::PerThread(_) => None,
        });
    match (w, layout) {
        (Who::Lane { pos, .. }, Some(l)) => {
            format!("the thread owning position {pos} of layout \"{l}\"")
        }
        _ => who(w),
    }
}

fn hazard_view(
    k: &Kernel,
    fp: &Footprints,
    names: &Namer,
    tl: &Timeline,
    att: &Attribution,
    i: usize,
    h: &Hazard,
) -> HazardView {
    let carried = match h.carry {
        Carry::Forward => None,
        Carry::Carried {
            loop_op,
            min_distance,
            ..
        } => Some((names.op(loop_op), min_distance, tl.loop_band(loop_op))),
    };
    let example = h.witness.map(|w| {
        format!(
            "{}: {} by {}, {} by {}",
            fp.describe_unit(w.unit),
            verb(k, h, true),
            who_in(k, h.src, w.a),
            verb(k, h, false),
            who_in(k, h.dst, w.b)
        )
    });
    HazardView {
        kind: h.kind.name(),
        buffer: buffer_name(k, h),
        producer: names.op(h.src.op),
        consumer: names.op(h.dst.op),
        visible_at: (h.src_at != h.src.op).then(|| names.op(h.src_at)),
        src_row: tl.row.get(&h.src.op).copied(),
        dst_row: tl.row.get(&h.dst.op).copied(),
        visible_row: (h.src_at != h.src.op)
            .then(|| tl.row.get(&h.src_at).copied())
            .flatten(),
        carried,
        example,
        intra_warp: h.intra_warp,
        rule: crate::emit::explain::ordering_rule(k, h),
        removed_by: att.covering[i].clone(),
        primary: att.primary[i],
        existing: att.existing[i],
    }
}

/// "written"/"read"/… for the source (`first`) or destination access of a hazard.
fn verb(k: &Kernel, h: &Hazard, first: bool) -> &'static str {
    let a = if first { h.src } else { h.dst };
    let e = effects(k, a.op);
    match e.shared.get(a.index).map(|s| s.kind) {
        Some(crate::ir::AccessKind::Read) => "read",
        Some(crate::ir::AccessKind::Write) => "written",
        Some(crate::ir::AccessKind::Atomic(_)) => "updated atomically",
        Some(crate::ir::AccessKind::AsyncWrite(_)) => "copied in",
        Some(crate::ir::AccessKind::AsyncRead(_)) => "read by a copy",
        None => "touched",
    }
}

/// How often a region's ops execute per block.
pub fn executes(model: &SyncModel, names: &Namer, r: crate::ir::Region) -> String {
    let w = model.weight_bounds.get(&r).copied().unwrap_or(1);
    if w >= SYMBOLIC_TRIP {
        let op = model.paths.region_op.get(&r).copied();
        return match op {
            Some(op) => format!("every iteration of {} (trip count unknown)", names.op(op)),
            None => "a number of times the bounds do not fix".into(),
        };
    }
    match w {
        1 => "once".into(),
        n => format!("{n} times"),
    }
}

fn sync_view(
    s: &Synchronized,
    ctx: &position::Ctx,
    tl: &Timeline,
    hazards: &[HazardView],
    i: usize,
    site: &SyncSite,
) -> SyncView {
    let (row, signal_row, split) = find_row(s, tl, site);
    let kind = match (&site.op, split) {
        (OpKind::WarpSync, _) => SyncKindView::WarpSync,
        (OpKind::NamedSync { id, count }, _) => SyncKindView::Named {
            id: *id,
            count: *count,
        },
        (_, true) => SyncKindView::Split,
        _ => SyncKindView::Barrier,
    };
    let op = row.and_then(|r| tl.lines.get(r)).map_or_else(
        || crate::emit::text::print_op_line(s.with_waits(), &site.op),
        |l| l.trim().to_string(),
    );
    let removes = (0..hazards.len())
        .filter(|&h| hazards[h].removed_by.contains(&i))
        .collect();
    let anchor = s.placement.plan.edits[site.edit].at.anchor;
    SyncView {
        kind,
        op,
        row,
        signal_row,
        at: ctx.names.point(anchor),
        executes: executes(ctx.model, ctx.names, site.point.region),
        removes,
        why: position::why_here(ctx, i),
    }
}

/// The output row of an inserted sync: the inserted sync op of the right kind closest
/// before the op that follows the plan's point. On split-barrier targets a barrier becomes
/// a wait moved later and a signal moved earlier (`sync::split`): its row is the first
/// inserted split wait from the point on, its signal the nearest signal of that id before
/// the wait in the region, else the region's last (the one on the back edge).
fn find_row(
    s: &Synchronized,
    tl: &Timeline,
    site: &SyncSite,
) -> (Option<usize>, Option<usize>, bool) {
    let k = &s.kernel;
    let placed = s.with_waits().ops.len();
    let (r, g) = site.gap();
    let ops = k.region_ops(r);
    let wops = s.with_waits().region_ops(r);
    let end = crate::ir::edit::body_len(s.with_waits(), r);
    let next = (g < end).then(|| wops[g]);
    let stop = match next {
        Some(n) => ops.iter().position(|&o| o == n).unwrap_or(ops.len()),
        None => crate::ir::edit::body_len(k, r),
    };
    let row = |o: crate::ir::Op| tl.row.get(&o).copied();
    for &o in ops[..stop].iter().rev() {
        if o.index() < placed {
            break;
        }
        match (effects(k, o).sync, &site.op) {
            (Some(SyncEffect::Barrier), OpKind::Barrier)
            | (Some(SyncEffect::WarpSync), OpKind::WarpSync)
            | (Some(SyncEffect::NamedSync { .. }), OpKind::NamedSync { .. }) => {
                return (row(o), None, false);
            }
            _ => {}
        }
    }
    if !matches!(site.op, OpKind::Barrier) {
        return (None, None, false);
    }
    let wait = ops[stop.min(ops.len())..]
        .iter()
        .enumerate()
        .find_map(|(i, &o)| match effects(k, o).sync {
            Some(SyncEffect::SplitWait(id)) if o.index() >= placed => Some((stop + i, id)),
            _ => None,
        });
    let Some((at, id)) = wait else {
        return (None, None, false);
    };
    let is_signal = |o: &crate::ir::Op| matches!(k.ops[*o].kind, OpKind::SplitSignal(j) if j == id);
    let signal = ops[..at]
        .iter()
        .rev()
        .find(|o| is_signal(o))
        .or_else(|| ops[at..].iter().rev().find(|o| is_signal(o)))
        .and_then(|&o| row(o));
    (row(ops[at]), signal, true)
}

/// Sync ops of the output other than the inserted barriers.
fn marks(s: &Synchronized, tl: &Timeline) -> Vec<Mark> {
    let k = &s.kernel;
    let placed = s.with_waits().ops.len();
    let mut out = Vec::new();
    for o in k.ops_in_order() {
        if !is_sync(k, o) {
            continue;
        }
        let Some(&row) = tl.row.get(&o) else {
            continue;
        };
        let kind = match effects(k, o).sync {
            Some(SyncEffect::Wait(_)) | Some(SyncEffect::MbarWait) => MarkKind::Wait {
                inserted: o.index() >= s.input_ops,
            },
            _ if o.index() < s.input_ops => MarkKind::Existing,
            _ if o.index() >= placed => continue,
            _ => MarkKind::Other,
        };
        out.push(Mark {
            row,
            kind,
            op: op_label(k, o).trim_matches('`').to_string(),
        });
    }
    // Inserted ops that are neither barriers nor waits (fences, commits).
    for o in k.ops_in_order() {
        if o.index() < placed || !is_sync(k, o) {
            continue;
        }
        let e = effects(k, o).sync;
        let drawn = matches!(
            e,
            Some(SyncEffect::Barrier)
                | Some(SyncEffect::WarpSync)
                | Some(SyncEffect::NamedSync { .. })
        );
        if let (false, Some(&row)) = (drawn, tl.row.get(&o)) {
            out.push(Mark {
                row,
                kind: MarkKind::Other,
                op: op_label(k, o).trim_matches('`').to_string(),
            });
        }
    }
    out.sort_by_key(|m| m.row);
    out
}

/// Async copies in flight: one window per (copy, completing wait) of the hazards.
fn windows(hazards: &[Hazard], tl: &Timeline, k: &Kernel) -> Vec<Window> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for h in hazards {
        if h.src_at == h.src.op || !seen.insert((h.src.op, h.src_at)) {
            continue;
        }
        let (Some(&a), Some(&b)) = (tl.row.get(&h.src.op), tl.row.get(&h.src_at)) else {
            continue;
        };
        out.push(Window {
            issue_row: a,
            wait_row: b,
            label: format!(
                "{} in flight until {}",
                op_label(k, h.src.op),
                op_label(k, h.src_at)
            ),
        });
    }
    out
}

/// A hazard's short name in the report: `H3`.
pub fn hazard_id(h: usize) -> String {
    format!("H{h}")
}

/// The inserted waits: the wait plan is applied last to the kernel with its handshakes, and
/// `ir::edit::apply` creates one op per edit in plan order, so the i-th edit is op
/// `first + i` of the kernel with waits, `first` counting the input's ops and the handshakes'.
fn wait_views(input: &Kernel, src: &str, s: &Synchronized, tl: &Timeline) -> Vec<WaitView> {
    let names = Namer::new(input, src).explicit();
    let first = s.with_waits().ops.len() - s.waits.edits.len();
    s.waits
        .edits
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let op = crate::ir::Op::new(first + i);
            let row = (op.index() < s.with_waits().ops.len())
                .then(|| tl.row.get(&op).copied())
                .flatten();
            WaitView {
                op: crate::emit::text::print_op_line(input, &e.op),
                row,
                at: names.point(e.at.anchor),
                why: e.reason.text().lines().map(str::to_string).collect(),
            }
        })
        .collect()
}
