//! Mbarrier handshakes of a single-role TMA pipeline (sm_90): the shape
//! `pipeline --mode tma` builds (`transform::pipeline_tma`), where one elected thread issues
//! TMA loads into the slots of circular buffers and every thread reads them.
//!
//! Recognized shape, per mbarrier array `@M : mbarrier[D]` that TMA loads complete on and that
//! no other op of the kernel names (no init, arrival or wait written by hand), outside any
//! role branch:
//! - every load on `@M` fills a view `view @b[s]` of a buffer with first extent `D` and
//!   completes on `@M[s]`, the same slot operand, with `s = rem X, D`; it runs under
//!   `if (cmp eq tid, C)` (one issuing thread). The loads sharing one slot operand are one
//!   *use* of the slot; every use has the same number `L` of loads;
//! - every read of those buffers goes through a view `view @b[s']` with `s' = rem E, D`.
//!
//! Placed: `mbar_init @M[i], L` for every slot by thread 0 and a block barrier at the top of
//! the kernel; `mbar_arrive @M[s] tx B` right before each load (`B` the bytes of its view),
//! so a phase completes when the use's `L` arrivals and all their bytes are in; and, in the
//! region of each reading view, before the first op that reads through it, one
//! `mbar_wait @M[s'], (E div D) mod 2`. The parity is right when the loads are issued in the
//! order of `X` (load `x` is the `x div D`-th use of slot `x mod D`) and a read of `E` needs
//! load `E` — what the transform guarantees (docs/pipeline.md, "Single-role TMA
//! pipelines"); the barrier that keeps a refill behind the previous use's reads is an
//! ordinary hazard that the barrier placer covers. `smemsync check` re-proves the result with
//! the interpreter. Complexity: O(ops) per array.

use std::collections::HashSet;

use crate::diag::Diagnostic;
use crate::ir::*;
use crate::sync::handshake::{Splice, unsupported};
use crate::sync::handshake_mbar::{elects_one, tma_bytes};
use crate::target::Target;

/// What the pass placed for one array: its syncs (written) and the loads it orders.
pub(crate) struct TmaPlaced {
    pub slots: u64,
    pub written: usize,
    pub loads: Vec<Op>,
}

/// Places the handshakes of every single-role TMA pipeline of `k` (in place).
pub(crate) fn place_single_role(k: &mut Kernel, target: &Target) -> (Vec<TmaPlaced>, Vec<Diagnostic>) {
    let mut placed = Vec::new();
    let mut warnings = Vec::new();
    if !target.mbarrier {
        return (placed, warnings);
    }
    for m in candidate_arrays(k) {
        match place_array(k, m) {
            Ok(Some(p)) => placed.push(p),
            Ok(None) => {}
            Err(d) => warnings.push(*d),
        }
    }
    (placed, warnings)
}

/// Mbarrier arrays named by TMA loads and by nothing else.
fn candidate_arrays(k: &Kernel) -> Vec<Buffer> {
    let mut tma = Vec::new();
    let mut other = HashSet::new();
    k.walk(|o| match &k.ops[o].kind {
        OpKind::TmaLoad { mbar, .. } => tma.push(k.root_buffer(*mbar)),
        OpKind::MbarInit { mbar, .. }
        | OpKind::MbarArrive { mbar, .. }
        | OpKind::MbarExpectTx { mbar, .. }
        | OpKind::MbarWait { mbar, .. }
        | OpKind::MbarInval { mbar, .. } => {
            other.insert(k.root_buffer(*mbar));
        }
        _ => {}
    });
    let mut out = Vec::new();
    for b in tma {
        if !other.contains(&b) && !out.contains(&b) {
            out.push(b);
        }
    }
    out
}

/// Whether `o` lies in an arm of a role branch (`if in_group`, or a role split
/// `analysis::role_split` recognises): `sync::handshake`'s business.
fn in_role(k: &Kernel, parents: &Parents, o: Op) -> bool {
    (parents.ancestors(o).into_iter()).any(|a| crate::analysis::role_split::branch_group(k, a).is_some())
}

/// `X` of a slot operand `rem X, D`.
fn rem_of(k: &Kernel, s: Operand, d: u64) -> Option<Operand> {
    let Operand::Value(v) = s else { return None };
    let ValueDef::Result(o, _) = k.values[v].def else {
        return None;
    };
    match k.ops[o].kind {
        OpKind::Binary(BinOp::Rem, x, Operand::Imm(m)) if m.as_i64() == d as i64 => Some(x),
        _ => None,
    }
}

/// The loads of array `m` grouped by slot operand (a use each), and the buffers they fill.
type Uses = (Vec<(Operand, Vec<Op>)>, HashSet<Buffer>);

fn loads_of(k: &Kernel, m: Buffer, d: u64) -> Result<Option<Uses>, Box<Diagnostic>> {
    let parents = k.parents();
    let mut uses: Vec<(Operand, Vec<Op>)> = Vec::new();
    let mut bufs = HashSet::new();
    for o in k.ops_in_order() {
        let OpKind::TmaLoad { dst, mbar, mbar_index, .. } = &k.ops[o].kind else {
            continue;
        };
        if k.root_buffer(*mbar) != m {
            continue;
        }
        if in_role(k, parents, o) {
            return Ok(None);
        }
        let slot = match dst {
            MemRef::View(v) => match (k.views[*v].base, k.views[*v].indices.first()) {
                (MemRef::Buffer(b), Some(ViewIndex::At(s))) => Some((b, *s)),
                _ => None,
            },
            MemRef::Buffer(_) => None,
        };
        let Some((b, s)) = slot.filter(|(b, s)| {
            k.buffers[*b].shape.first() == Some(&d)
                && mbar_index.as_slice() == [*s]
                && rem_of(k, *s, d).is_some()
        }) else {
            return Err(unsupported(k, o, "a TMA load of a single-role pipeline must fill `view @b[rem X, D]` and complete on the mbarrier of the same slot"));
        };
        let elected = parents.ancestors(o).into_iter().any(|a| {
            matches!(k.ops[a].kind, OpKind::If { cond } if elects_one(k, cond))
        });
        if !elected {
            return Err(unsupported(k, o, "a TMA load of a single-role pipeline must be issued by one thread (`if cmp eq tid, C`)"));
        }
        bufs.insert(b);
        match uses.iter_mut().find(|u| u.0 == s) {
            Some(u) => u.1.push(o),
            None => uses.push((s, vec![o])),
        }
    }
    let counts: HashSet<usize> = uses.iter().map(|u| u.1.len()).collect();
    if counts.len() > 1 {
        return Err(unsupported(k, k.region_ops(k.body())[0], "the uses of a TMA pipeline's slots issue different numbers of loads"));
    }
    Ok(Some((uses, bufs)))
}

/// Places init, arrivals and waits for one array (None: not a single-role pipeline).
fn place_array(k: &mut Kernel, m: Buffer) -> Result<Option<TmaPlaced>, Box<Diagnostic>> {
    let d = *k.buffers[m].shape.first().unwrap_or(&1);
    let Some((uses, bufs)) = loads_of(k, m, d)? else {
        return Ok(None);
    };
    let count = uses.first().map_or(0, |u| u.1.len()) as u32;
    if count == 0 {
        return Ok(None);
    }
    let mut sp = Splice::new(k);
    let mut loads = Vec::new();
    for (_, ops) in &uses {
        for &t in ops {
            let OpKind::TmaLoad { mbar_index, .. } = k.ops[t].kind.clone() else { continue };
            let a = sp.sync(k, OpKind::MbarArrive { mbar: MemRef::Buffer(m), index: mbar_index, tx: Some(tma_bytes(k, t)) }, None);
            sp.before.entry(t).or_default().push(a);
            loads.push(t);
        }
    }
    place_waits(k, &mut sp, m, d, &bufs)?;
    init_at_top(k, &mut sp, m, d, count);
    let written = sp.written;
    sp.apply(k);
    Ok(Some(TmaPlaced { slots: d, written, loads }))
}

/// One wait per reading view's region and slot, before its first read.
fn place_waits(k: &mut Kernel, sp: &mut Splice, m: Buffer, d: u64, bufs: &HashSet<Buffer>) -> Result<(), Box<Diagnostic>> {
    let parents = k.parents().clone();
    let mut waited: Vec<(Region, Operand)> = Vec::new();
    for o in k.ops_in_order() {
        let e = effects(k, o);
        let Some(a) = e.shared.iter().find(|a| !a.kind.writes() && bufs.contains(&k.root_buffer(a.mem))) else {
            continue;
        };
        let view = match a.mem {
            MemRef::View(v) => Some(v),
            MemRef::Buffer(_) => None,
        };
        let slot = view.and_then(|v| match (k.views[v].base, k.views[v].indices.first()) {
            (MemRef::Buffer(_), Some(ViewIndex::At(s))) => Some(*s),
            _ => None,
        });
        let (Some(v), Some(s), Some(x)) = (view, slot, slot.and_then(|s| rem_of(k, s, d))) else {
            return Err(unsupported(k, o, "a read of a TMA pipeline's buffer must go through `view @b[rem E, D]`"));
        };
        // The view's definition and the op of its region that holds this read.
        let Some(def) = k.ops_in_order().into_iter().find(|&x| matches!(k.ops[x].kind, OpKind::ViewDef(w) if w == v)) else {
            continue;
        };
        let Some(r) = parents.op_region[def] else { continue };
        let mut at = o;
        while parents.op_region[at] != Some(r) {
            match parents.parent_op(at) {
                Some(p) => at = p,
                None => break,
            }
        }
        if parents.op_region[at] != Some(r) || waited.contains(&(r, s)) {
            continue;
        }
        waited.push((r, s));
        let q = k.new_op(OpKind::Binary(BinOp::Div, x, Operand::int(d as i64)), &[ScalarType::I32], vec![]);
        let par = k.new_op(
            OpKind::Binary(BinOp::Rem, Operand::Value(k.ops[q].results[0]), Operand::int(2)),
            &[ScalarType::I32],
            vec![],
        );
        let parity = Operand::Value(k.ops[par].results[0]);
        let w = sp.sync(k, OpKind::MbarWait { mbar: MemRef::Buffer(m), index: vec![s], parity }, None);
        sp.before.entry(at).or_default().extend([q, par, w]);
    }
    Ok(())
}

/// `if tid.linear == 0 { mbar_init @m[i], count ... }; barrier` at the top of the kernel.
fn init_at_top(k: &mut Kernel, sp: &mut Splice, m: Buffer, d: u64, count: u32) {
    let tid = k.new_op(OpKind::Special(Special::LinearTid), &[ScalarType::I32], vec![]);
    let lead = k.new_op(
        OpKind::Cmp(CmpPred::Eq, Operand::Value(k.ops[tid].results[0]), Operand::int(0)),
        &[ScalarType::I1],
        vec![],
    );
    let init = k.new_region();
    for s in 0..d {
        let o = k.new_op(OpKind::MbarInit { mbar: MemRef::Buffer(m), index: vec![Operand::int(s as i64)], count }, &[], vec![]);
        k.append(init, o);
        sp.written += 1;
    }
    let e = k.new_region();
    let guard = k.new_op(OpKind::If { cond: Operand::Value(k.ops[lead].results[0]) }, &[], vec![init, e]);
    let bar = sp.sync(k, OpKind::Barrier, None);
    let top = k.body();
    sp.start.entry(top).or_default().extend([tid, lead, guard, bar]);
}
