//! `pipeline --mode warp-specialized`: the producer/consumer split of a loop's load stage.
//!
//! Input: a kernel of a 1-D block of `N` threads (whole warps) whose top level holds one loop
//! `for %k = lo to hi step 1` with a `stage "load"` of whole-buffer tile copies
//! (`cp_async_tile @b <- %G[..]`, as for `--mode tma`, [`super::pipeline_tma`]). Output: the
//! block grows by one producer warp, threads `[N, N+32)` (group `@producer`), and the loop
//! becomes a role branch (seed 004's warp specialization):
//!
//! ```text
//! %isp = in_group @producer
//! if %isp {                                  // producer: one thread issues every load
//!   if %tid == N { for %p = lo to hi { tma_load @b[%p mod D] <- .., @full[%p mod D] } }
//! } else {                                   // consumers: threads 0..N-1, ids unchanged
//!   for %k = lo to hi { ... the body without its stage, reading slot %k mod D ... }
//!   ... the ops after the loop ...
//! }
//! ```
//!
//! The consumers keep their thread ids (the producer warp is appended, so warp-group
//! alignment of the consumers is kept), and the ops before the loop stay before the branch.
//! The producer runs ahead as far as the `D` slots let it: that is the handshake `sync` places
//! (`sync::handshake`, `sync::handshake_mbar`: per-slot full/empty mbarriers with parities,
//! expect_tx bytes, initial arrivals by the fresh phase); the transform places no sync, and
//! declares only the `@full` storage the TMA loads name.
//!
//! Legality beyond [`super::pipeline`]'s and [`super::pipeline_tma`]'s, each a located error:
//! the loop is the kernel's only pipelined loop and a top-level op (E1347); the block is 1-D,
//! whole warps, and `bdim` is not read (the block grows; E1348); the ops before the loop have
//! no memory or sync effects (the producer warp runs them too; E1349); the loop and the ops
//! after it hold no sync (a block barrier in one role would wait for the other forever;
//! E1350); the loop starts at a bound known to be non-negative (slots are `%k mod D`; E1351);
//! `--prefetch`, if given, is `D - 1` (E1346). Complexity: O(ops of the kernel).

use std::collections::HashMap;

use crate::diag::Diagnostic;
use crate::ir::*;

use super::pipeline::{PipelinedLoop, load_stage_loops, remap_mems, stage_buffers, subtree};
use super::pipeline_tma::{fresh_name, new_full_array, set_tma_slots, stage_to_tma};

/// Threads of the producer role: one warp (NVIDIA; TMA and mbarriers are sm_90's).
pub const PRODUCER_THREADS: u32 = 32;

/// Builds the warp-specialized pipeline of the kernel's loop with a `stage "load"`.
pub fn warp_specialized(
    k: &Kernel,
    stages: u32,
    prefetch: Option<u32>,
) -> Result<(Kernel, Vec<PipelinedLoop>), Vec<Diagnostic>> {
    check_counts(stages, prefetch)?;
    let loops = load_stage_loops(k);
    let Some(&(l, g)) = loops.first() else {
        return super::pipeline::circular_buffer(k, stages);
    };
    let mut errs = Vec::new();
    for &(extra, _) in &loops[1..] {
        errs.push(
            Diagnostic::user("E1347", "warp specialization splits one loop into roles, and this kernel has several with a load stage")
                .with_label(k.span(extra), "a second loop with a load stage")
                .with_label(k.span(l), "the first"),
        );
    }
    if !k.region_ops(k.body()).contains(&l) {
        errs.push(
            Diagnostic::user("E1347", "the loop to warp-specialize must be a top-level op of the kernel")
                .with_label(k.span(l), "this loop is nested")
                .with_help("the role branch is a top-level op: hoist the loop, or use --mode tma"),
        );
    }
    errs.extend(check_block(k));
    errs.extend(check_around(k, l, g));
    let mut out = k.clone();
    let full = new_full_array(&mut out, stages);
    errs.extend(stage_to_tma(&mut out, g, full, None));
    let bufs = match stage_buffers(&out, l, g) {
        Ok(b) => b,
        Err(mut e) => {
            errs.append(&mut e);
            Vec::new()
        }
    };
    if !errs.is_empty() {
        return Err(errs);
    }
    split_roles(&mut out, l, g, &bufs, stages);
    set_tma_slots(&mut out, full);
    Ok((
        out,
        vec![PipelinedLoop {
            loop_op: l,
            buffers: bufs,
            stages,
        }],
    ))
}

/// E1342 (too few stages) and E1346 (a prefetch distance other than `D - 1`).
fn check_counts(stages: u32, prefetch: Option<u32>) -> Result<(), Vec<Diagnostic>> {
    if stages < 2 {
        return Err(vec![
            Diagnostic::user("E1342", format!("a pipeline needs at least 2 stages, not {stages}"))
                .with_help("use --stages 2 or more"),
        ]);
    }
    match prefetch {
        Some(p) if p != stages - 1 => Err(vec![
            Diagnostic::user(
                "E1346",
                format!("a warp-specialized pipeline of {stages} stages runs up to {} loads ahead, not {p}", stages - 1),
            )
            .with_help("the producer refills a slot as soon as the consumers release it: drop --prefetch, or change --stages"),
        ]),
        _ => Ok(()),
    }
}

/// E1348: the block must be 1-D whole warps, and `bdim` unread (the block grows).
fn check_block(k: &Kernel) -> Vec<Diagnostic> {
    let mut errs = Vec::new();
    if k.block[1] != 1 || k.block[2] != 1 || !k.block[0].is_multiple_of(PRODUCER_THREADS) {
        errs.push(
            Diagnostic::user(
                "E1348",
                format!("warp specialization appends a producer warp to a 1-D block of whole warps, not block({}, {}, {})", k.block[0], k.block[1], k.block[2]),
            )
            .with_label(k.block_span, "this block"),
        );
    }
    k.walk(|o| {
        if matches!(k.ops[o].kind, OpKind::Special(Special::BlockDim(_))) {
            errs.push(
                Diagnostic::user("E1348", "the kernel reads the block size, which warp specialization changes")
                    .with_label(k.span(o), "reads bdim")
                    .with_help("write the consumers' thread count as a constant"),
            );
        }
    });
    errs
}

/// Whether `o` or an op nested in it has memory or sync effects.
fn has_effects(k: &Kernel, o: Op, sync_only: bool) -> Option<Op> {
    let mut ops = Vec::new();
    subtree(k, o, &mut ops);
    ops.into_iter().find(|&x| {
        let e = effects(k, x);
        e.sync.is_some() || (!sync_only && (!e.shared.is_empty() || !e.global.is_empty()))
    })
}

/// E1349 (effects before the loop), E1350 (syncs in or after it), E1351 (its lower bound).
fn check_around(k: &Kernel, l: Op, g: Op) -> Vec<Diagnostic> {
    let mut errs = Vec::new();
    let top = k.region_ops(k.body());
    let at = top.iter().position(|&o| o == l).unwrap_or(top.len());
    for &o in &top[..at] {
        if let Some(x) = has_effects(k, o, false) {
            errs.push(
                Diagnostic::user("E1349", "an op before the warp-specialized loop touches memory or synchronizes, and the producer warp would run it too")
                    .with_label(k.span(x), "runs in every role")
                    .with_help("move it into the loop or after it (the consumers' arm), or compute it from values only"),
            );
        }
    }
    let body = k.ops[l].regions[0];
    let after = top.get(at + 1..).unwrap_or(&[]);
    for &o in k.region_ops(body).iter().filter(|&&o| o != g).chain(after) {
        if let Some(x) = has_effects(k, o, true) {
            errs.push(
                Diagnostic::user("E1350", "the consumers' code already synchronizes: a block barrier there would wait for the producer warp forever")
                    .with_label(k.span(x), "sync op")
                    .with_help("run `pipeline` on the kernel without syncs; `sync` places the roles' syncs afterwards"),
            );
        }
    }
    let OpKind::For { lo, .. } = &k.ops[l].kind else {
        return errs;
    };
    let nonneg = match lo {
        Operand::Imm(c) => c.as_i64() >= 0,
        Operand::Value(v) => k.param_ranges.get(*v).is_some_and(|(a, _)| a >= 0),
    };
    if !nonneg {
        errs.push(
            Diagnostic::user("E1351", "the warp-specialized loop's lower bound may be negative: its slots are `%k mod D`")
                .with_label(k.span(l), "this loop")
                .with_help("start the loop at a constant >= 0 or a parameter declared `in [0, ..]`"),
        );
    }
    errs
}

/// Slot views `view @b[rem %x, D]` of each of `bufs`, appended to `ops`: the map from each
/// buffer to its view.
fn slot_views(
    k: &mut Kernel,
    bufs: &[Buffer],
    d: u32,
    x: Value,
    ops: &mut Vec<Op>,
) -> HashMap<MemRef, MemRef> {
    let r = k.new_op(
        OpKind::Binary(BinOp::Rem, Operand::Value(x), Operand::int(d as i64)),
        &[ScalarType::I32],
        vec![],
    );
    ops.push(r);
    let s = Operand::Value(k.ops[r].results[0]);
    let mut map = HashMap::new();
    for &b in bufs {
        let (v, op) = k.new_view(MemRef::Buffer(b), vec![ViewIndex::At(s)]);
        ops.push(op);
        map.insert(MemRef::Buffer(b), MemRef::View(v));
    }
    map
}

/// The producer role of loop `l` with stage `g`: `for %p = lo to hi step 1 { slot views;
/// the stage at %p }` under the elected thread (`tid == n`, the first producer thread). The
/// stage's ops are cloned unwrapped: the handshake wants the loads right under the loop.
/// Returns the `tid` op (the caller places it before the role branch) and the role's region.
fn producer_role(k: &mut Kernel, (l, g): (Op, Op), bufs: &[Buffer], d: u32, n: u32) -> (Op, Region) {
    let OpKind::For { lo, hi, step, .. } = k.ops[l].kind.clone() else {
        unreachable!("a for loop")
    };
    let iv = k.region_args(k.ops[l].regions[0])[0];
    let pbody = k.new_region();
    let p = k.new_value(ScalarType::I32, ValueDef::RegionArg(pbody, 0));
    k.push_region_arg(pbody, p);
    let mut pops = Vec::new();
    let mems = slot_views(k, bufs, d, p, &mut pops);
    let mut map = CloneMap {
        values: HashMap::from([(iv, Operand::Value(p))]),
        mems,
    };
    for o in k.region_ops(k.ops[g].regions[0]).to_vec() {
        let c = k.clone_op(o, &mut map);
        pops.push(c);
    }
    k.set_region_ops(pbody, pops);
    let plp = k.new_op(OpKind::For { lo, hi, step, init: vec![] }, &[], vec![pbody]);
    k.op_spans.set(plp, k.span(l));
    let tid = k.new_op(OpKind::Special(Special::Tid(0)), &[ScalarType::I32], vec![]);
    let tidv = Operand::Value(k.ops[tid].results[0]);
    let elect = k.new_op(OpKind::Cmp(CmpPred::Eq, tidv, Operand::int(n as i64)), &[ScalarType::I1], vec![]);
    let (et, ee) = (k.new_region(), k.new_region());
    k.append(et, plp);
    let eif = k.new_op(OpKind::If { cond: Operand::Value(k.ops[elect].results[0]) }, &[], vec![et, ee]);
    let prod = k.new_region();
    k.set_region_ops(prod, vec![elect, eif]);
    (tid, prod)
}

/// Builds the role branch in place of loop `l` (legality checked).
fn split_roles(k: &mut Kernel, l: Op, g: Op, bufs: &[Buffer], d: u32) {
    let n = k.block[0];
    k.block[0] = n + PRODUCER_THREADS;
    let name = fresh_name("producer", |x| k.groups.values().any(|gr| gr.name == x));
    let grp = k.groups.push(GroupData {
        name,
        lo: n,
        hi: n + PRODUCER_THREADS,
    });
    for &b in bufs {
        k.buffers[b].shape.insert(0, d as u64);
    }
    let body = k.ops[l].regions[0];
    let iv = k.region_args(body)[0];
    let (tid, prod) = producer_role(k, (l, g), bufs, d, n);
    // Consumers: the loop without its stage, reading slot %k mod D; then the ops after it.
    let mut top = Vec::new();
    let cmap = slot_views(k, bufs, d, iv, &mut top);
    let mut loop_ops = Vec::new();
    subtree(k, l, &mut loop_ops);
    let mut stage_ops = Vec::new();
    subtree(k, g, &mut stage_ops);
    let consumer_ops: Vec<Op> = (loop_ops.into_iter())
        .filter(|o| !stage_ops.contains(o) && *o != l)
        .collect();
    remap_mems(k, &consumer_ops, &cmap);
    k.retain_ops(body, |&o| o != g);
    k.splice_ops(body, 0..0, top);
    let kbody = k.body();
    let at = k.region_ops(kbody).iter().position(|&o| o == l).expect("top-level loop");
    let cons = k.new_region();
    let tail = k.split_off_ops(kbody, at);
    k.set_region_ops(cons, tail);
    let isp = k.new_op(OpKind::InGroup(grp), &[ScalarType::I1], vec![]);
    let br = k.new_op(OpKind::If { cond: Operand::Value(k.ops[isp].results[0]) }, &[], vec![prod, cons]);
    k.op_spans.set(br, k.span(l));
    for o in [tid, isp, br] {
        k.append(kbody, o);
    }
}
