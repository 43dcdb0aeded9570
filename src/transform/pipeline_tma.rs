//! `pipeline --mode tma`: a single-role TMA pipeline built from a loop's load stage.
//!
//! The stage copies whole shared buffers from global tiles with `cp_async_tile @b <- %G[..]`
//! (the engine-neutral collective copy: every element of `@b` from the tile at the origin).
//! Each copy becomes one `tma_load` issued by thread 0 (`if %elect`) that completes on slot
//! `s` of a new mbarrier array `@full : mbarrier[D]`, `s` the slot it fills; the stage is then
//! circular-buffered with `D` slots and prefetch distance `P` ([`super::pipeline::Plan`]):
//!
//! ```text
//! for %j = lo to lo+P { if %j < hi { if %elect { tma_load @b[(%j-lo) mod D] <- .., @full[..] } } }
//! for %k = lo to hi {
//!   if %k+P < hi { if %elect { tma_load @b[(%k+P-lo) mod D] <- .., @full[..] } }
//!   ... the rest of the body, reading slot (%k-lo) mod D ...
//! }
//! ```
//!
//! Load `n` (iteration `n = j - lo`) is the `n div D`-th use of its slot, so the slot's
//! mbarrier completes phase `n div D` when that load's bytes are in. The transform declares
//! the mbarrier storage (a `tma_load` names its mbarrier) but places no sync: `sync`
//! initialises the array, arrives with the expected bytes before each load, waits with parity
//! `(n div D) mod 2` before the reads and places the barrier that keeps a refill behind the
//! previous use's reads (`sync::handshake_tma`); `check` re-proves the result.
//!
//! Legality beyond [`super::pipeline`]'s: every shared write of the stage is such a copy of a
//! whole buffer, unmasked (E1345); `cp_async_commit`s of the stage are dropped (the copies are
//! no longer cp.async). Complexity: O(ops of the kernel) per loop.

use crate::diag::Diagnostic;
use crate::ir::*;

use super::pipeline::{PipelinedLoop, circular_buffer_with, load_stage_loops};
use super::pipeline_cp_async::cp_async_plan;

/// E1345: a shared write of the load stage that a TMA load cannot do.
fn not_a_tile(k: &Kernel, o: Op, why: &str) -> Diagnostic {
    Diagnostic::user(
        "E1345",
        "TMA pipelines need every shared write of the load stage to be a whole-buffer tile copy",
    )
    .with_label(k.span(o), why)
    .with_help("write the stage's copies as `cp_async_tile @buf <- %G[%r, %c]` (one per buffer, unmasked), or use --mode cp-async")
}

/// A fresh name for a new buffer or group: `prefix`, `prefix1`, ... (not taken by `taken`).
pub(crate) fn fresh_name(prefix: &str, taken: impl Fn(&str) -> bool) -> String {
    (0..)
        .map(|i| if i == 0 { prefix.to_string() } else { format!("{prefix}{i}") })
        .find(|n| !taken(n))
        .unwrap_or_default()
}

/// Declares `@full : mbarrier[d]` (a fresh name): the storage the TMA loads complete on.
pub(crate) fn new_full_array(k: &mut Kernel, d: u32) -> Buffer {
    let name = fresh_name("full", |n| k.buffer_by_name(n).is_some());
    k.buffers.push(BufferData {
        name,
        elem: ElemType::MBarrier,
        shape: vec![d as u64],
        offset: None,
        layout: None,
    })
}

/// Rewrites the tile copies of stage `g` into TMA loads completing on `@full[0]` (the slot is
/// set once the buffers have theirs, [`set_tma_slots`]), each under `if %elect` when given;
/// drops the stage's commits. Returns the refusals (E1345).
pub(crate) fn stage_to_tma(k: &mut Kernel, g: Op, full: Buffer, elect: Option<Value>) -> Vec<Diagnostic> {
    let mut errs = Vec::new();
    let mut regions = Vec::new();
    let mut stack: Vec<Op> = vec![g];
    while let Some(o) = stack.pop() {
        for &r in &k.ops[o].regions {
            regions.push(r);
            stack.extend(k.region_ops(r).iter().copied());
        }
    }
    for r in regions {
        let mut kept = Vec::new();
        // Taken out while rewritten: a copy moves into its own `if %elect`.
        for o in k.take_region_ops(r) {
            match k.ops[o].kind.clone() {
                OpKind::CpAsyncCommit => continue,
                OpKind::CpAsyncTile(c) if c.masked => {
                    errs.push(not_a_tile(k, o, "TMA fills out-of-range elements with zeros only when the tensor map says so: smemsync does not emit masked TMA loads"));
                }
                OpKind::CpAsyncTile(c) if matches!(c.dst, MemRef::Buffer(_)) => {
                    k.ops[o].kind = OpKind::TmaLoad {
                        dst: c.dst,
                        src: c.src,
                        origin: c.origin,
                        mbar: MemRef::Buffer(full),
                        mbar_index: vec![Operand::int(0)],
                    };
                    if let Some(e) = elect {
                        let (t, f) = (k.new_region(), k.new_region());
                        k.append(t, o);
                        let i = k.new_op(OpKind::If { cond: Operand::Value(e) }, &[], vec![t, f]);
                        k.op_spans.set(i, k.span(o));
                        kept.push(i);
                        continue;
                    }
                }
                OpKind::CpAsyncTile(_) => {
                    errs.push(not_a_tile(k, o, "this copy fills a view, not a whole buffer"));
                }
                _ if effects(k, o).shared.iter().any(|a| a.kind.writes()) => {
                    errs.push(not_a_tile(k, o, "this write is not a tile copy"));
                }
                _ => {}
            }
            kept.push(o);
        }
        k.set_region_ops(r, kept);
    }
    errs
}

/// Points every TMA load on `full` at the slot its destination view names (`view @b[s]`).
pub(crate) fn set_tma_slots(k: &mut Kernel, full: Buffer) {
    for o in k.ops_in_order() {
        let OpKind::TmaLoad { dst: MemRef::View(v), mbar, .. } = &k.ops[o].kind else {
            continue;
        };
        if *mbar != MemRef::Buffer(full) {
            continue;
        }
        let Some(ViewIndex::At(s)) = k.views[*v].indices.first().copied() else {
            continue;
        };
        if let OpKind::TmaLoad { mbar_index, .. } = &mut k.ops[o].kind {
            *mbar_index = vec![s];
        }
    }
}

/// Defines `%tma_tid = tid.linear` and `%tma_elect = cmp eq %tma_tid, 0` at the kernel's top.
fn elect_thread(k: &mut Kernel) -> Value {
    let taken = |k: &Kernel, n: &str| k.values.keys().any(|v| k.value_names.get(v) == n);
    let t = k.new_op(OpKind::Special(Special::LinearTid), &[ScalarType::I32], vec![]);
    let tv = k.ops[t].results[0];
    let name = fresh_name("tma_tid", |n| taken(k, n));
    k.value_names.set(tv, name);
    let c = k.new_op(
        OpKind::Cmp(CmpPred::Eq, Operand::Value(tv), Operand::int(0)),
        &[ScalarType::I1],
        vec![],
    );
    let cv = k.ops[c].results[0];
    let name = fresh_name("tma_elect", |n| taken(k, n));
    k.value_names.set(cv, name);
    let body = k.body();
    k.splice_ops(body, 0..0, [t, c]);
    cv
}

/// Builds the single-role TMA pipeline of every loop with a `stage "load"`.
pub fn tma_pipeline(
    k: &Kernel,
    stages: u32,
    prefetch: Option<u32>,
) -> Result<(Kernel, Vec<PipelinedLoop>), Vec<Diagnostic>> {
    let mut plan = cp_async_plan(stages, prefetch).map_err(|d| vec![d])?;
    plan.commit_each_stage = false;
    let mut copies = k.clone();
    let loops = load_stage_loops(k);
    let elect = (!loops.is_empty()).then(|| elect_thread(&mut copies));
    let mut errs = Vec::new();
    let mut fulls = Vec::new();
    for (_, g) in loops {
        let full = new_full_array(&mut copies, stages);
        fulls.push(full);
        errs.extend(stage_to_tma(&mut copies, g, full, elect));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let (mut out, done) = circular_buffer_with(&copies, &plan)?;
    for full in fulls {
        set_tma_slots(&mut out, full);
    }
    Ok((out, done))
}
