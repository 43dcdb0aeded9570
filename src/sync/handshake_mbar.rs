//! Mbarrier handshakes between a producer and a consumer role (sm_90), the second mode of
//! `sync::handshake`: per slot a `full` and an `empty` mbarrier, phase parities from the
//! iteration number, `expect_tx` bytes for TMA loads, and one initialisation before the role
//! branch (docs/pipeline.md, "Mbarrier handshakes").
//!
//! Invariants of the output, for a loop of `T` iterations and `D` slots, iteration `n`
//! (0-based) using slot `s = n mod D` for the `q = n div D`-th time:
//! - `full[s]` completes its `q`-th phase when the producer's arrivals of iteration `n` (and,
//!   for TMA, their transaction bytes) are in; consumers wait on it with parity `q mod 2`;
//! - `empty[s]` completes its `q`-th phase when every consumer thread has arrived after its
//!   reads of iteration `n`; the producer's refill at `n` waits on parity `(q + 1) mod 2`,
//!   which on a fresh mbarrier (q = 0) is the phase before the first and returns at once.
//!
//! Neither role can run two phases ahead of the other on one mbarrier (each refill waits for
//! the consumers of the previous use, each read for the producer of this use), so a parity
//! names one phase. Complexity: O(ops of the two loop bodies).

use crate::diag::Diagnostic;
use crate::analysis::hazards::imm_for_trips;
use crate::ir::*;
use crate::sync::handshake::{Arm, Ctx, Mode, Placed, Slot, Splice, unsupported};

/// Places the mbarrier handshakes; returns the placement and the TMA loads whose slot reuse
/// the `empty` waits order.
pub(crate) fn place(
    k: &mut Kernel,
    cx: &Ctx<'_>,
    tmas: &[Op],
) -> Result<(Placed, Vec<Op>), Box<Diagnostic>> {
    let br = cx.br;
    let full_count = full_arrivals(k, cx, tmas)?;
    let full = match tma_mbarrier(k, cx, tmas)? {
        Some(b) => b,
        None => new_mbarriers(k, "full", cx.d),
    };
    let empty = new_mbarriers(k, "empty", cx.d);
    let mut sp = Splice::new(k);
    init_prologue(k, &mut sp, cx, [(full, full_count), (empty, cx.nc)]);
    let mut per_iter = 0u64;
    let roles = std::iter::once((cx.prod, true)).chain(cx.cons.iter().map(|c| (c, false)));
    for (arm, producer) in roles {
        let p = Phase::new(k, &mut sp, cx, arm, producer)?;
        let (wait_on, arrive_on) = if producer { (empty, full) } else { (full, empty) };
        let wait = OpKind::MbarWait {
            mbar: MemRef::Buffer(wait_on),
            index: vec![p.slot],
            parity: Operand::Value(p.par),
        };
        if producer && !tmas.is_empty() {
            per_iter += issuer_syncs(k, &mut sp, (&wait, full, p.slot), tmas);
        }
        // Every other access (a consumer's reads; a producer's stores, beside its TMA loads
        // too: P12) is acquired by its threads' wait and released by their arrival.
        per_iter += role_syncs(k, &mut sp, (arm, tmas), &wait, (arrive_on, p.slot));
    }
    let written = sp.written;
    sp.apply(k);
    let executed = imm_for_trips(k, cx.prod.lp).map(|t| per_iter * t as u64 + 1);
    Ok((
        Placed {
            branch: br,
            mode: Mode::Mbarrier,
            slots: cx.d,
            written,
            executed,
        },
        tmas.to_vec(),
    ))
}

/// The TMA producer's handshake: before each load, the wait on `empty` (once per region:
/// a later load in the same region runs after it in the same thread) and the arrival on
/// `full` with the load's bytes. Returns the syncs executed per iteration.
fn issuer_syncs(k: &mut Kernel, sp: &mut Splice, (wait, full, slot): (&OpKind, Buffer, Operand), tmas: &[Op]) -> u64 {
    // Only the issuing thread waits: a thread that waits on `empty` but never arrives on
    // `full` is not held back by the consumers and could fall two phases behind, where the
    // parity names the wrong phase.
    let parents = k.parents().clone();
    let mut waited = std::collections::HashSet::new();
    let mut per_iter = 0;
    for &t in tmas {
        if waited.insert(parents.op_region[t]) {
            let w = sp.sync(k, wait.clone(), None);
            sp.before.entry(t).or_default().push(w);
            per_iter += 1;
        }
        let tx = Some(tma_bytes(k, t));
        let a = sp.sync(k, OpKind::MbarArrive { mbar: MemRef::Buffer(full), index: vec![slot], tx }, None);
        sp.before.entry(t).or_default().push(a);
        per_iter += 1;
    }
    per_iter
}

/// A role's handshake for its accesses other than the TMA loads `tmas`: the wait before the
/// first, on the loop body's top level, and after them (and the waits completing them for
/// their own threads, M15) the arrival on `arrive_on`: every thread that runs the loop waits
/// and arrives (the count `full_arrivals` adds for them). Returns the syncs executed per
/// iteration (none without such accesses).
fn role_syncs(k: &mut Kernel, sp: &mut Splice, (arm, tmas): (&Arm, &[Op]), wait: &OpKind, (arrive_on, slot): (Buffer, Operand)) -> u64 {
    let plain: Vec<_> = arm.acc.iter().filter(|a| !tmas.contains(&a.2)).collect();
    let Some(first) = plain.iter().map(|a| a.0).min() else {
        return 0;
    };
    let fo = k.region_ops(arm.body)[first];
    let w = sp.sync(k, wait.clone(), None);
    sp.before.entry(fo).or_default().push(w);
    let accs: Vec<Op> = plain.iter().map(|a| a.2).collect();
    let (after, complete) = crate::sync::handshake::release_point(k, arm, &accs);
    let mut per_iter = 2;
    for c in complete {
        let c = sp.sync(k, c, None);
        sp.after.entry(after).or_default().push(c);
        per_iter += 1;
    }
    let a = sp.sync(k, OpKind::MbarArrive { mbar: MemRef::Buffer(arrive_on), index: vec![slot], tx: None }, None);
    sp.after.entry(after).or_default().push(a);
    per_iter
}

/// One thread initialises every slot's pair of mbarriers; a block barrier right before the
/// role branch publishes the inits.
fn init_prologue(k: &mut Kernel, sp: &mut Splice, cx: &Ctx<'_>, arrays: [(Buffer, u32); 2]) {
    let br = cx.br;
    // One thread initialises every slot's pair; a block barrier publishes the inits.
    let tid = sp.value(k, k.body(), OpKind::Special(Special::LinearTid), ScalarType::I32, "hs_tid");
    let lead = sp.value(
        k,
        k.body(),
        OpKind::Cmp(CmpPred::Eq, Operand::Value(tid), Operand::int(0)),
        ScalarType::I1,
        "hs_lead",
    );
    let init = k.new_region();
    for s in 0..cx.d {
        for (b, n) in arrays {
            let o = k.new_op(
                OpKind::MbarInit {
                    mbar: MemRef::Buffer(b),
                    index: vec![Operand::int(s as i64)],
                    count: n,
                },
                &[],
                vec![],
            );
            k.append(init, o);
            sp.written += 1;
        }
    }
    let e = k.new_region();
    let guard = k.new_op(
        OpKind::If {
            cond: Operand::Value(lead),
        },
        &[],
        vec![init, e],
    );
    let bar = sp.sync(k, OpKind::Barrier, None);
    // Values before the role branch go first; the init and barrier right before it.
    let pre = sp.start.remove(&k.body()).unwrap_or_default();
    sp.before.entry(br).or_default().extend(pre.into_iter().chain([guard, bar]));
}

/// The slot and the parities of one arm's iteration, defined at the top of its loop body.
struct Phase {
    slot: Operand,
    /// The parity to wait for: `q mod 2` (consumer, on `full`), `(q + 1) mod 2` (producer,
    /// on `empty`).
    par: Value,
}

impl Phase {
    fn new(
        k: &mut Kernel,
        sp: &mut Splice,
        cx: &Ctx<'_>,
        arm: &Arm,
        producer: bool,
    ) -> Result<Phase, Box<Diagnostic>> {
        let OpKind::For { lo, step, .. } = k.ops[arm.lp].kind.clone() else {
            return Err(unsupported(k, cx.br, "no loop"));
        };
        let rem = arm.acc.iter().any(|a| a.1 == Slot::Rem);
        let body = arm.body;
        let iv = Operand::Value(arm.iv);
        // n = (i - lo) / step: the iteration number; q = n / D for `rem` slots (step 1).
        let off = if lo == Operand::int(0) {
            iv
        } else {
            Operand::Value(sp.value(k, body, OpKind::Binary(BinOp::Sub, iv, lo), ScalarType::I32, "hs_n"))
        };
        let per = if rem { Operand::int(cx.d as i64) } else { step };
        let q = if per == Operand::int(1) {
            off
        } else {
            Operand::Value(sp.value(k, body, OpKind::Binary(BinOp::Div, off, per), ScalarType::I32, "hs_q"))
        };
        let slot = if rem {
            Operand::Value(sp.value(
                k,
                body,
                OpKind::Binary(BinOp::Rem, iv, Operand::int(cx.d as i64)),
                ScalarType::I32,
                "hs_slot",
            ))
        } else {
            match arm.acc.first().map(|a| a.1) {
                Some(Slot::Const(c)) if arm.acc.iter().all(|a| a.1 == Slot::Const(c)) => Operand::int(c),
                _ => {
                    return Err(unsupported(
                        k,
                        cx.br,
                        "mbarrier handshakes with constant slots need one slot per role",
                    ));
                }
            }
        };
        let par = sp.value(k, body, OpKind::Binary(BinOp::Rem, q, Operand::int(2)), ScalarType::I32, "hs_par");
        if !producer {
            return Ok(Phase { slot, par });
        }
        let par = sp.value(
            k,
            body,
            OpKind::Binary(BinOp::Xor, Operand::Value(par), Operand::int(1)),
            ScalarType::I32,
            "hs_free",
        );
        Ok(Phase { slot, par })
    }
}

/// A new mbarrier array of `d` slots named after `prefix`, not clashing with the kernel's.
fn new_mbarriers(k: &mut Kernel, prefix: &str, d: u64) -> Buffer {
    let name = (0..)
        .map(|i| {
            if i == 0 {
                prefix.to_string()
            } else {
                format!("{prefix}{i}")
            }
        })
        .find(|n| k.buffer_by_name(n).is_none())
        .unwrap_or_default();
    k.buffers.push(BufferData {
        name,
        elem: ElemType::MBarrier,
        shape: vec![d],
        offset: None,
        layout: None,
    })
}

/// The mbarrier array every TMA load completes on, indexed by the load's own slot.
fn tma_mbarrier(k: &Kernel, cx: &Ctx<'_>, tmas: &[Op]) -> Result<Option<Buffer>, Box<Diagnostic>> {
    let mut b = None;
    for &t in tmas {
        let OpKind::TmaLoad {
            dst,
            mbar,
            mbar_index,
            ..
        } = &k.ops[t].kind
        else {
            continue;
        };
        let dslot = match dst {
            MemRef::View(v) => match k.views[*v].indices.first() {
                Some(ViewIndex::At(s)) => Some(*s),
                _ => None,
            },
            MemRef::Buffer(_) => None,
        };
        let MemRef::Buffer(mb) = mbar else {
            return Err(unsupported(k, t, "a TMA load's mbarrier is a view"));
        };
        let ok = k.buffers[*mb].shape.first() == Some(&cx.d)
            && dslot.is_some()
            && mbar_index.first().copied() == dslot;
        if !ok || b.is_some_and(|x| x != *mb) {
            return Err(unsupported(
                k,
                t,
                "TMA loads must complete on one mbarrier array of D slots, at the slot they fill",
            ));
        }
        if has_init(k, *mb) {
            return Err(unsupported(k, t, "the TMA mbarriers are initialised by hand"));
        }
        b = Some(*mb);
    }
    Ok(b)
}

fn has_init(k: &Kernel, b: Buffer) -> bool {
    let mut found = false;
    k.walk(|o| {
        if let OpKind::MbarInit { mbar, .. } = &k.ops[o].kind {
            found |= k.root_buffer(*mbar) == b;
        }
    });
    found
}

/// Arrivals that complete one phase of `full`: one per TMA load and issuing thread, and the
/// producer threads that run the loop when it also writes otherwise (stores: each of them
/// arrives after its last one, `place`).
fn full_arrivals(k: &Kernel, cx: &Ctx<'_>, tmas: &[Op]) -> Result<u32, Box<Diagnostic>> {
    let stores = cx.prod.acc.iter().any(|a| !tmas.contains(&a.2));
    let parents = k.parents();
    let mut n = if stores { cx.np } else { 0 };
    for &t in tmas {
        let mut above = false;
        for a in parents.ancestors(t) {
            if a == cx.br {
                break;
            }
            match &k.ops[a].kind {
                OpKind::For { .. } if a == cx.prod.lp => above = true,
                OpKind::If { cond } if elects_one(k, *cond) => {
                    if !elected_in_role(k, cx, *cond) {
                        return Err(unsupported(
                            k,
                            a,
                            "no thread of the producer role passes this election (`cmp eq tid, C` with C outside the role's threads): its arrivals would never run and the consumers would wait forever",
                        ));
                    }
                }
                // Above the loop: the guards `handshake_guards` reads (counted below).
                _ if above => {}
                _ => {
                    return Err(unsupported(
                        k,
                        t,
                        "a TMA load is under a condition other than `cmp eq tid, C` or in an inner loop",
                    ));
                }
            }
        }
        // The issuers: the threads passing every condition on the load's path (P10: an
        // election and a guard around the loop must both hold).
        let issuers = crate::sync::handshake_guards::reach(k, t, Some(cx.prod.lp))?.count();
        if issuers == 0 {
            return Err(unsupported(k, t, "no thread of the producer role passes every condition around this TMA load: its arrivals would never run and the consumers would wait forever"));
        }
        n += issuers;
    }
    Ok(n)
}

/// Whether the thread `c = cmp eq tid, C` elects is one of the producer role's threads (M4):
/// inside the role group's range for the branch's then-arm, outside it (and in the block)
/// for its else-arm.
fn elected_in_role(k: &Kernel, cx: &Ctx<'_>, c: Operand) -> bool {
    let Some(OpKind::Cmp(_, _, Operand::Imm(id))) = c.value().and_then(|v| match k.values[v].def {
        ValueDef::Result(d, _) => Some(&k.ops[d].kind),
        _ => None,
    }) else {
        return false;
    };
    let Some(g) = crate::sync::handshake::role_group(k, cx.br) else {
        return false;
    };
    let id = id.as_i64();
    let (lo, hi) = (k.groups[g].lo as i64, k.groups[g].hi as i64);
    let then_arm = k.parents().ancestors(cx.prod.lp).into_iter().chain([cx.prod.lp]).any(|o| {
        k.parents().op_region[o] == Some(k.ops[cx.br].regions[0])
    });
    let in_group = (lo..hi).contains(&id);
    (0..k.threads() as i64).contains(&id) && in_group == then_arm
}

/// Whether `c = cmp eq %t, C` with `%t` a thread id (one thread of the block).
pub(crate) fn elects_one(k: &Kernel, c: Operand) -> bool {
    let Some(v) = c.value() else { return false };
    let ValueDef::Result(d, _) = k.values[v].def else {
        return false;
    };
    let OpKind::Cmp(CmpPred::Eq, Operand::Value(x), Operand::Imm(_)) = k.ops[d].kind else {
        return false;
    };
    let ValueDef::Result(s, _) = k.values[x].def else {
        return false;
    };
    match k.ops[s].kind {
        OpKind::Special(Special::LinearTid) => true,
        OpKind::Special(Special::Tid(0)) => k.block[1] == 1 && k.block[2] == 1,
        _ => false,
    }
}

/// Bytes a TMA load writes (its destination view).
pub(crate) fn tma_bytes(k: &Kernel, t: Op) -> u32 {
    let OpKind::TmaLoad { dst, .. } = &k.ops[t].kind else {
        return 0;
    };
    let n: u64 = k.shape(*dst).iter().product::<u64>() * k.elem(*dst).bytes();
    u32::try_from(n).unwrap_or(u32::MAX)
}
