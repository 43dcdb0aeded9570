//! The synchronization pipeline `smemsync sync` runs: waits, then barriers, then the target's
//! lowering of barriers, then the protocol check.
//!
//! 0. **Cross-role handshakes** (`sync::handshake`): where the arms of a role branch
//!    communicate through a shared buffer, full/empty named barriers or mbarriers; the
//!    later stages see them as syncs of the input.
//! 1. **Waits** (`sync::waits`): where a consumer may observe an in-flight async copy, the
//!    weakest sufficient wait is inserted (largest count per counter class).
//! 2. **Barriers** (`sync::place`, or the naive baseline) on the kernel with its waits: an
//!    async write is a producer at the waits that complete it, so a barrier after the wait
//!    makes other threads' copies visible.
//! 3. **Proxy fences** (`sync::fences`) on sm_90: a `fence_proxy_async` where a generic
//!    shared write reaches an async-proxy access (wgmma, TMA), placed just before a barrier
//!    of step 2 when one publishes the write, so that it adds no barrier.
//! 4. **Split lowering** (`sync::split`) on gfx12 targets: every block barrier becomes a
//!    signal/wait pair with slack, and the protocol verifier (`check::protocol`) re-proves
//!    that pairs alternate on every path. On gfx1250 every named barrier (the input's and
//!    the placed ones) then gets a `waitcnt dscnt(0)` before it where an LDS operation may
//!    be outstanding (`sync::split::fence_named_barriers`).
//!
//! Each stage is planned on the output of the previous one and never mutates its input, but
//! for the kernel [`synchronize_owned`] is given: the handshakes and waits are written into
//! it, so it becomes the kernel placement runs on without a copy ([`synchronize_output`]
//! writes the barriers into it too, for a caller that wants no explanation, and its result's
//! type, `Synchronized<InPlace>`, says that kernel is gone). The
//! ops a stage inserts are new arena entries, so "inserted" is exactly "a sync op whose id the
//! input kernel did not have"; [`without_inserted`] drops one of them (mutation testing).
//! Complexity: the sum of the stages'.

use crate::analysis::uniformity;
use crate::check::protocol::check_protocol;
use crate::diag::Diagnostic;
use crate::ir::edit::{SyncPlan, apply, apply_in_place};
use crate::ir::effects::is_sync;
use std::collections::HashSet;
use crate::ir::*;
use crate::sync::split::{SplitStats, fence_named_barriers, lower_to_split};
use crate::sync::fences::place_fences;
use crate::sync::joint::hoist_waits;
use crate::analysis::inflight::FlowMemo;
use crate::sync::handshake::{Placed, place_handshakes_verified};
use crate::sync::waits::plan_waits_ordered;
use crate::sync::{PlaceMemo, PlaceOptions, Placement, place_barriers_memo};
use crate::target::Target;

/// The result of the pipeline. `W` is what is kept of the kernel barrier placement ran on:
/// the kernel itself ([`Kernel`], the default: [`synchronize`], [`synchronize_owned`]), or
/// [`InPlace`] where the barriers were written into it ([`synchronize_output`]), so a result
/// without that kernel cannot be asked for it.
#[derive(Clone, Debug)]
pub struct Synchronized<W = Kernel> {
    /// The synchronized kernel.
    pub kernel: Kernel,
    /// Waits inserted into the input (anchored in the input kernel).
    pub waits: SyncPlan,
    /// The input with its waits: the kernel barrier placement ran on (its anchors, and the
    /// names explanations give); [`InPlace`] from [`synchronize_output`].
    pub with_waits: W,
    /// Barrier placement on `with_waits` (anchored there).
    pub placement: Placement,
    /// Split-barrier lowering statistics (gfx12 targets).
    pub split: Option<SplitStats>,
    /// Proxy fences inserted after barrier placement (anchored in the kernel with barriers).
    pub fences: SyncPlan,
    /// Number of ops in the input kernel's arena: ops with larger ids were inserted.
    pub input_ops: usize,
    /// Cross-role handshakes placed before the waits (`sync::handshake`).
    pub handshakes: Vec<Placed>,
}

/// What [`synchronize_output`] keeps of the kernel barrier placement ran on: nothing, the
/// barriers were written into it and it became the output.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct InPlace;

impl Synchronized {
    /// The kernel barrier placement ran on.
    pub fn with_waits(&self) -> &Kernel {
        &self.with_waits
    }
}

impl<W> Synchronized<W> {
    /// The inserted sync ops of the final kernel, in program order.
    pub fn inserted(&self) -> Vec<Op> {
        inserted_syncs(&self.kernel, self.input_ops)
    }

    /// The same result keeping `f(with_waits)` instead (a caller that handles both kinds of
    /// result as one type: `Synchronized<Option<Kernel>>`).
    pub fn map_with_waits<V>(self, f: impl FnOnce(W) -> V) -> Synchronized<V> {
        Synchronized {
            kernel: self.kernel,
            waits: self.waits,
            with_waits: f(self.with_waits),
            placement: self.placement,
            split: self.split,
            fences: self.fences,
            input_ops: self.input_ops,
            handshakes: self.handshakes,
        }
    }
}

/// Sync ops of `k` whose ids are at least `input_ops` (created by a pass), in program order.
pub fn inserted_syncs(k: &Kernel, input_ops: usize) -> Vec<Op> {
    k.ops_in_order()
        .into_iter()
        .filter(|&o| o.index() >= input_ops && is_sync(k, o))
        .collect()
}

/// A copy of `k` without the `n`-th inserted sync op (program order), or None if there is no
/// such op.
pub fn without_inserted(k: &Kernel, input_ops: usize, n: usize) -> Option<Kernel> {
    let op = *inserted_syncs(k, input_ops).get(n)?;
    let mut out = k.clone();
    let r = k.parents().op_region[op]?;
    out.retain_ops(r, |&o| o != op);
    Some(out)
}

/// Waits, the kernel with them (`None`: no waits, the kernel itself, not copied), and the
/// barrier placement on it.
type Planned = (SyncPlan, Option<Kernel>, Placement);

/// What the stages of one pipeline run read: the kernel with its handshakes, the target, the
/// placement options.
struct Stages<'a> {
    k: &'a Kernel,
    target: &'a Target,
    opts: &'a PlaceOptions,
}

/// Joint wait and barrier placement (`sync::joint`): the planned waits moved to their
/// earliest equivalent points when barrier placement then executes strictly fewer barriers
/// (or as many, written fewer times). The naive baseline keeps the planner's waits.
fn jointly(
    cx: &Stages<'_>,
    late: Planned,
    early: Option<SyncPlan>,
    memo: &mut PlaceMemo,
) -> Result<Planned, Vec<Diagnostic>> {
    let Some(early) = early else {
        return Ok(late);
    };
    let with_early = apply(cx.k, &early).map_err(|d| vec![d])?;
    let Ok(p) = place_barriers_memo(&with_early, cx.target, cx.opts, memo) else {
        return Ok(late);
    };
    let cost = |s: &crate::sync::Stats| {
        (
            s.barriers_executed,
            s.barriers_written + s.warp_syncs_written,
        )
    };
    Ok(if cost(&p.stats) < cost(&late.2.stats) {
        (early, Some(with_early), p)
    } else {
        late
    })
}

/// Steps 1 and 2: the waits (planned, then jointly moved with the barriers) and the barrier
/// placement on the kernel with them; also the wait planner's conservative answers.
fn waits_and_barriers(
    cx: &Stages<'_>,
    ordered_tma: &HashSet<Op>,
    memo: &mut PlaceMemo,
) -> Result<(Planned, Vec<Diagnostic>), Vec<Diagnostic>> {
    let (k, target) = (cx.k, cx.target);
    let waits = plan_waits_ordered(k, target, &mut memo.flow, ordered_tma)?;
    // The waits moved to their earliest equivalent points (`sync::joint`; the naive baseline
    // keeps the planner's): when some move, a second placement runs, and it reads the first
    // one's footprints.
    let early = (cx.opts.strategy != crate::sync::Strategy::Naive)
        .then(|| hoist_waits(k, target, &waits.plan))
        .flatten();
    if early.is_some() {
        memo.footprints = Some(Box::default());
    }
    // No waits (no async copy): placement runs on `k` itself, and the kernel is not copied
    // (a copy and a drop of the whole kernel were 8% of `sync` on a 10^6-op kernel).
    let with_waits = if waits.plan.is_empty() {
        None
    } else {
        Some(apply(k, &waits.plan).map_err(|d| vec![d])?)
    };
    let placement = place_barriers_memo(with_waits.as_ref().unwrap_or(k), target, cx.opts, memo)?;
    // TMA loads left in flight (E0603) refuse the kernel once placement's own findings, more
    // specific about the same copies (E0602 across roles), had their turn.
    if !waits.unwaited.is_empty() {
        return Err(waits.unwaited);
    }
    let late = (waits.plan, with_waits, placement);
    Ok((jointly(cx, late, early, memo)?, waits.warnings))
}

/// The handshake pass's and the wait planner's warnings joined to the placement's: accesses
/// across the arms of a role branch whose handshakes were placed are ordered by them (the
/// checker re-proves it), so their E0305 warnings are answered; shape mismatches and
/// hand-written handshakes say so (W1300, W1301); the rest count as conservative answers.
fn merge_warnings(
    k: &Kernel,
    hs: &crate::sync::handshake::Handshakes,
    wait_warnings: &[Diagnostic],
    placement: &mut Placement,
) {
    let covered: Vec<crate::diag::Span> = hs.covered.iter().map(|&o| k.span(o)).collect();
    placement.warnings.retain(|w| {
        !(w.code == "E0305" && w.labels.iter().all(|l| covered.contains(&l.span)))
    });
    for w in &hs.warnings {
        if w.code == "W1301" {
            continue;
        }
        placement.warnings.push(w.clone());
        // A redundant hand-written handshake (W1340) is a finding, not a conservative answer.
        if w.code != "W1340" {
            placement.stats.conservative += 1;
        }
    }
    // The wait planner's conservative answers (W0314) count like the placement's.
    for w in wait_warnings {
        if !placement.warnings.iter().any(|x| x.message == w.message) {
            placement.warnings.push(w.clone());
            placement.stats.conservative += 1;
        }
    }
}

/// Steps 3 and 4 on the kernel with waits and barriers: the proxy fences, the split lowering
/// and its protocol check, and the verifier. Returns the kernel, the fences, the split stats.
fn fence_and_lower(
    kernel: Kernel,
    target: &Target,
    opts: &PlaceOptions,
    split_fences: &HashSet<Op>,
) -> Result<(Kernel, SyncPlan, Option<SplitStats>), Vec<Diagnostic>> {
    let mut kernel = kernel;
    let fences = if target.proxy_fence {
        place_fences(&kernel)
    } else {
        SyncPlan::default()
    };
    if !fences.is_empty() {
        apply_in_place(&mut kernel, &fences).map_err(|d| vec![d])?;
    }
    let mut split = None;
    if target.split_barriers {
        // The placer's own uniformity (the checker's protocol check below has its own).
        let u = uniformity::analyze(&kernel);
        let (lowered, stats) = lower_to_split(
            &kernel,
            &|o: &Operand| !u.operand_uniform(o),
            &opts.bounds,
            Some(split_fences),
        );
        let violations = check_protocol(&lowered, target.warp);
        if !violations.is_empty() {
            return Err(violations);
        }
        kernel = lowered;
        split = Some(stats);
    }
    // gfx1250's named barriers are signals on an id that wait for no LDS operation; the
    // checker reads any AMD target so (the library does not refuse a kernel's named
    // barriers on gfx942, where they do not exist: the CLI does, E0170).
    if target.is_amd() {
        let n = fence_named_barriers(&mut kernel);
        if let Some(s) = split.as_mut() {
            s.named_dscnt = n;
        }
    }
    let errs = crate::verify::verify(&kernel);
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok((kernel, fences, split))
}

/// The hand-written split signals of `k` (the kernel placement ran on) that need a `waitcnt
/// dscnt(0)` before them: those opening the window of a credited wait
/// (`sync::split_pairs`) whose existing sync point, or that of an op holding it, covers a
/// hazard placement counted as removed by the input's syncs. A signal whose pair orders no
/// hazard needs no wait: nothing after the pair depends on the LDS operations it releases.
/// Complexity: O(credited waits · depth · existing hazards).
fn signals_to_fence(k: &Kernel, p: &Placement) -> HashSet<Op> {
    let credited = crate::sync::split_pairs::credited_waits(k);
    let mut out = HashSet::new();
    if credited.is_empty() || p.existing.is_empty() {
        return out;
    }
    let parents = k.parents();
    // Each credited wait and every op that holds it: the point placement credits may be the
    // wait's own or its loop's (`SyncModel::must_sync`).
    let mut holders: std::collections::HashMap<Op, Vec<Op>> = Default::default();
    for &w in credited.keys() {
        for o in std::iter::once(w).chain(parents.ancestors(w)) {
            holders.entry(o).or_default().push(w);
        }
    }
    for (o, waits) in holders {
        let Some(r) = parents.op_region[o] else {
            continue;
        };
        let Some(i) = k.region_ops(r).iter().position(|&x| x == o) else {
            continue;
        };
        let coord = 2 * i + 1;
        if p.existing.iter().any(|&h| p.hazards[h].covered_by(r, coord)) {
            for w in waits {
                out.extend(credited[&w].iter().copied());
            }
        }
    }
    out
}

/// Runs the pipeline on one kernel (on a copy of it: [`synchronize_owned`] takes the kernel).
pub fn synchronize(
    input: &Kernel,
    target: &Target,
    opts: &PlaceOptions,
) -> Result<Synchronized, Vec<Diagnostic>> {
    synchronize_owned(input.clone(), target, opts)
}

/// [`synchronize`] on a kernel the caller gives up: the handshakes and waits are written into
/// it, and it becomes `Synchronized::with_waits` (moved, never copied), so at most two
/// kernels are alive at once: that one and the output. The result is [`synchronize`]'s.
pub fn synchronize_owned(
    input: Kernel,
    target: &Target,
    opts: &PlaceOptions,
) -> Result<Synchronized, Vec<Diagnostic>> {
    run(input, target, opts)
}

/// [`synchronize_owned`] for a caller that wants the output and no explanation (`sync`
/// without `--explain`): the barriers are written into the kernel placement ran on instead of
/// a copy of it (`ir::edit::apply_in_place`), so one kernel is alive at the end, and the
/// result keeps [`InPlace`] for it. Every other field is [`synchronize_owned`]'s, the
/// output kernel included (the same ops, ids and places).
pub fn synchronize_output(
    input: Kernel,
    target: &Target,
    opts: &PlaceOptions,
) -> Result<Synchronized<InPlace>, Vec<Diagnostic>> {
    run(input, target, opts)
}

/// What the pipeline keeps of the kernel placement ran on next to the output: the kernel
/// (the output made on a copy, [`synchronize_owned`]) or [`InPlace`] (the output made in it,
/// [`synchronize_output`]).
trait Keep: Sized {
    /// The barrier plan applied to `with_waits`: what is kept of it, and the output.
    fn apply_barriers(with_waits: Kernel, plan: &SyncPlan)
    -> Result<(Self, Kernel), Vec<Diagnostic>>;
}

impl Keep for Kernel {
    fn apply_barriers(
        with_waits: Kernel,
        plan: &SyncPlan,
    ) -> Result<(Kernel, Kernel), Vec<Diagnostic>> {
        let out = apply(&with_waits, plan).map_err(|d| vec![d])?;
        Ok((with_waits, out))
    }
}

impl Keep for InPlace {
    fn apply_barriers(
        with_waits: Kernel,
        plan: &SyncPlan,
    ) -> Result<(InPlace, Kernel), Vec<Diagnostic>> {
        let mut out = with_waits;
        apply_in_place(&mut out, plan).map_err(|d| vec![d])?;
        Ok((InPlace, out))
    }
}

/// The pipeline on a kernel it takes; `W` says whether the kernel placement ran on
/// survives next to the output. Where placement leaves hazards under thread-dependent
/// control (E0303, E0305), the pipeline runs again on the kernel with those branches split
/// (`sync::branch_split`, docs/placement.md section 10) and warns W0340 for each; when that
/// fails too, the errors are the input's.
fn run<W: Keep>(
    input: Kernel,
    target: &Target,
    opts: &PlaceOptions,
) -> Result<Synchronized<W>, Vec<Diagnostic>> {
    let (errors, kept) = match run_once(input, target, opts) {
        Ok(s) => return Ok(s),
        Err(failed) => failed,
    };
    let split = kept
        .filter(|_| crate::sync::branch_split::may_repair(&errors))
        .and_then(|k| crate::sync::branch_split::split_branches(&k, target, opts));
    let Some((k, notes)) = split else {
        return Err(errors);
    };
    match run_once::<W>(k, target, opts) {
        Ok(mut s) => {
            s.placement.warnings.splice(0..0, notes);
            Ok(s)
        }
        Err(_) => Err(errors),
    }
}

/// Why [`run_once`] failed, and the input kernel where placement refused it before any
/// handshake was written into it (what a branch split may retry on).
type Failed = (Vec<Diagnostic>, Option<Box<Kernel>>);

/// One run of the pipeline (see [`run`]).
fn run_once<W: Keep>(
    mut input: Kernel,
    target: &Target,
    opts: &PlaceOptions,
) -> Result<Synchronized<W>, Failed> {
    let input_ops = input.ops.len();
    // The analyses read the warp width off the kernel's target (`warp`/`lane` in a role
    // split: `analysis::role_split`); a declared target never contradicts this one (E0171).
    input.target = Some(target.name.to_string());
    // The kernel's own mbarrier waits are trusted only where their phases and counts are
    // verified (docs/async.md, "What `sync` verifies of an mbarrier protocol").
    let mv = if target.mbarrier {
        crate::analysis::mbar_protocol::verify(&input, target.warp)
    } else {
        Default::default()
    };
    if !mv.errors.is_empty() {
        return Err((mv.warnings.into_iter().chain(mv.errors).collect(), None));
    }
    let hs = place_handshakes_verified(input, target, mv.unverified.clone(), (mv.keyed_before.clone(), mv.delayed.clone()));
    // E0307: a hand-written cross-role handshake that does not order a conflict of the roles
    // (docs/pipeline.md, "Hand-written handshakes: what `sync` checks").
    if !hs.errors.is_empty() {
        return Err((mv.warnings.into_iter().chain(hs.errors).collect(), None));
    }
    let k = &hs.kernel;
    // One memo of footprint answers for every in-flight dataflow run on `k` and on the
    // kernels derived from it by inserting waits and commits (`FlowMemo`: their ops keep
    // their ids).
    let mut memo = PlaceMemo {
        flow: FlowMemo::for_kernel(k),
        footprints: None,
    };
    memo.flow.ordered_tma = hs.ordered_tma.clone();
    memo.flow.chained_roles = hs.chained.clone();
    memo.flow.unverified_waits = mv.unverified;
    memo.flow.serial_loads = mv.serial_loads;
    // The handshake pass's warnings (W1300: a role branch it could not handle) explain the
    // findings that follow from it.
    let with_hs = |mut e: Vec<Diagnostic>| {
        let mut w: Vec<Diagnostic> = hs
            .warnings
            .iter()
            .filter(|w| w.code != "W1301")
            .chain(&mv.warnings)
            .cloned()
            .collect();
        w.append(&mut e);
        w
    };
    let cx = Stages { k, target, opts };
    let ((waits, with_waits, mut placement), wait_warnings) =
        match waits_and_barriers(&cx, &hs.ordered_tma, &mut memo) {
            Ok(x) => x,
            Err(e) => {
                let e = with_hs(e);
                let kept = hs.placed.is_empty().then(|| Box::new(hs.kernel));
                return Err((e, kept));
            }
        };
    merge_warnings(k, &hs, &wait_warnings, &mut placement);
    // W0318: waits not verified, which ordered nothing here (conservative answers).
    placement.stats.conservative += mv.warnings.len();
    placement.warnings.extend(mv.warnings);
    let with_waits = with_waits.unwrap_or(hs.kernel);
    let split_fences = if target.split_barriers {
        signals_to_fence(&with_waits, &placement)
    } else {
        HashSet::new()
    };
    let (with_waits, with_barriers) =
        W::apply_barriers(with_waits, &placement.plan).map_err(|e| (e, None))?;
    let (mut kernel, fences, split) =
        fence_and_lower(with_barriers, target, opts, &split_fences).map_err(|e| (e, None))?;
    // The output says which target it was synchronized for (warp width, barriers).
    kernel.target = Some(target.name.to_string());
    Ok(Synchronized {
        kernel,
        waits,
        with_waits,
        placement,
        split,
        fences,
        input_ops,
        handshakes: hs.placed,
    })
}
