//! Static proof that the mbarrier handshakes between the roles of a warp-specialized kernel
//! never deadlock and that their parities name the right phase, for every trip count
//! (including 0 and fewer than the slot count) — independent of the placer: it reads the IR
//! only (docs/pipeline.md, "What the checker proves").
//!
//! Recognized form: a role branch `if in_group @g` at the kernel's top level whose arms run
//! one loop each, with equal bounds `0 to T step 1`; every mbarrier op and TMA load of an arm
//! lies in its loop, under no condition but `cmp eq tid, C` (one thread, possibly `and`-ed
//! with `true`); slots are `i mod D` and wait parities `(i / D) mod 2` ("this use") or its
//! complement ("the previous use", which a fresh mbarrier passes) as functions of the
//! iteration `i` — whatever their spelling: `ir::iterfn` computes each index and parity as an
//! exact function of `i` (through affine counters, `div`/`rem`/masks, comparisons, `xor`,
//! `select`), and the proof compares it with `i mod D` or `(i / D) mod 2` over a common
//! period (equal there, equal in every iteration); every array is initialised before the branch
//! with one count for all its slots, and a `barrier` follows the inits. Then:
//! 1. **balance**: each iteration's arrivals on an array equal its count, and its expected
//!    transaction bytes the bytes of its TMA loads: each use completes exactly one phase;
//! 2. **parity**: a "this use" wait needs the arrivals of the same iteration, a "previous use"
//!    wait those `D` iterations earlier (none for the first use);
//! 3. **no aliasing**: every thread that waits also arrives later in the same iteration, or
//!    (a wait of the whole role) passes a named barrier of exactly its role's threads before
//!    one elected thread's arrival (docs/checker.md, "Elected arrivals"); and (**re-arm
//!    after every waiter**, `handshake_rearm`) every arrival on an array for the use after
//!    the one a wait names follows that wait in every waiting thread — directly, or through
//!    a wait of the arriving role on an array the waiter arrives on afterwards — so with
//!    several waiting roles none falls two phases behind (docs/checker.md);
//! 4. **no cycle**: the graph of program order within a role and "arrival before a this-use
//!    wait" across roles is acyclic; a cycle is reported as a deadlock with the roles that wait
//!    on each other. By induction on the iteration every wait then completes.
//!
//! More than two roles: an arm whose top level holds a nested role branch (one producer and
//! several consumer groups) contributes that branch's arms as roles, each with its threads;
//! the four arguments above read every role the same way.
//!
//! Anything outside the form is "not proved" with the reason (the interpreter still checks
//! the bounds it is given). Complexity: O(ops + edges) per role branch, with O(log ops) per
//! wait for its group barrier (an index of the accepted barriers by loop body and count).

use std::collections::HashMap;

use crate::diag::{DiagKind, Diagnostic};
use crate::ir::*;

/// The verdict for one role branch with mbarrier handshakes.
#[derive(Clone, Debug)]
pub enum HandshakeVerdict {
    Proved(String),
    NotProved(String),
    /// A deadlock or an unbalanced phase (C0020, C0021).
    Refuted(Box<Diagnostic>),
}

/// Verdicts for every top-level role branch whose arms use mbarriers.
pub fn prove_handshakes(k: &Kernel) -> Vec<HandshakeVerdict> {
    let mut out = Vec::new();
    for (pos, &br) in k.region_ops(k.body()).iter().enumerate() {
        let Some(g) = role_group(k, br) else { continue };
        let arms = [k.ops[br].regions[0], k.ops[br].regions[1]];
        let n_in = k.groups[g].hi.saturating_sub(k.groups[g].lo);
        let threads = [n_in, k.threads().saturating_sub(n_in)];
        if let Some(v) = super::named_proof::prove_named(k, br, threads) {
            out.push(v);
        }
        if !arms.iter().any(|&r| has_mbar(k, r)) {
            continue;
        }
        out.push(match prove_branch(k, br, pos) {
            Ok(v) => v,
            Err(why) => HandshakeVerdict::NotProved(why),
        });
    }
    out
}

pub(super) fn role_group(k: &Kernel, o: Op) -> Option<Group> {
    let OpKind::If {
        cond: Operand::Value(c),
    } = k.ops[o].kind
    else {
        return None;
    };
    match k.values[c].def {
        ValueDef::Result(d, _) => match k.ops[d].kind {
            OpKind::InGroup(g) => Some(g),
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn has_mbar(k: &Kernel, r: Region) -> bool {
    k.region_ops(r).iter().any(|&o| {
        matches!(
            k.ops[o].kind,
            OpKind::MbarWait { .. } | OpKind::MbarArrive { .. } | OpKind::MbarExpectTx { .. }
        ) || k.ops[o].regions.iter().any(|&c| has_mbar(k, c))
    })
}

/// Parity of a wait: the phase of this use, or of the previous use of the slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Parity {
    This,
    Previous,
}

/// One mbarrier op (or TMA load) of an arm.
#[derive(Clone, Debug)]
pub(super) struct HsOp {
    pub(super) op: Op,
    pub(super) arm: usize,
    /// Threads that execute it per iteration, and whether it is the elected thread only.
    pub(super) threads: u32,
    pub(super) elect: bool,
    /// The elected thread's id (`cmp eq tid, C`: `C`), when `elect`.
    pub(super) tid: Option<i64>,
    pub(super) mbar: Buffer,
    pub(super) kind: Kind,
}

#[derive(Clone, Debug)]
pub(super) enum Kind {
    Wait(Parity),
    Arrive { tx: u64 },
    ExpectTx(u64),
    Tma(u64),
}

fn prove_branch(k: &Kernel, br: Op, pos: usize) -> Result<HandshakeVerdict, String> {
    let mut roles = Vec::new();
    roles_of(k, br, (0..k.threads()).collect(), &mut roles)?;
    let mut ops = Vec::new();
    let mut loops = Vec::new();
    let ranges = crate::ir::ranges::Ranges::new(k);
    for (arm, (region, members)) in roles.iter().enumerate() {
        let (region, n) = (*region, members.len() as u32);
        let mut found = Vec::new();
        collect(k, region, &mut found);
        let mut lp = None;
        let role = Role { arm, n, region, members };
        for o in found {
            ops.push(classify(k, &ranges, o, &role, &mut lp)?);
        }
        loops.push(lp);
    }
    let bounds = |l: &Option<Op>| match l.map(|l| &k.ops[l].kind) {
        Some(OpKind::For { lo, hi, step, .. }) => Some((*lo, *hi, *step)),
        _ => None,
    };
    let b0 = bounds(&loops[0]);
    let same_bounds = |b: Option<(Operand, Operand, Operand)>| match (b, b0) {
        (Some(x), Some(y)) => same(k, x.0, y.0, 0) && same(k, x.1, y.1, 0) && same(k, x.2, y.2, 0),
        _ => false,
    };
    if loops.iter().any(|l| !same_bounds(bounds(l))) {
        return Err("the roles' loops differ or one role has none".into());
    }
    let counts = inits(k, pos)?;
    if let Some(d) = balance(k, br, &ops, &counts)? {
        return Ok(HandshakeVerdict::Refuted(Box::new(d)));
    }
    super::handshake_tx::tx_before_arrival(k, &ops)?;
    released_complete(k, &ops)?;
    let index = OpIndex::new(k);
    super::handshake_release::accesses_released(k, &roles, &ops, &index)?;
    aliasing(k, &ops, &index)?;
    super::handshake_rearm::rearm_after_waiters(k, &ops, &index)?;
    if let Some(cycle) = cycle(k, &ops) {
        return Ok(HandshakeVerdict::Refuted(Box::new(cycle)));
    }
    let arrays: std::collections::BTreeSet<Buffer> = ops.iter().map(|o| o.mbar).collect();
    Ok(HandshakeVerdict::Proved(format!(
        "handshakes of {} mbarrier array(s) proved for every trip count: arrivals and bytes balance each phase, parities name this or the previous use, every waiter arrives, no cycle of waiting roles",
        arrays.len()
    )))
}

/// The roles of a role branch with their thread counts: its two arms, or, where an arm's
/// top level holds a nested role branch, that branch's roles (one producer and several
/// consumer groups). `members` are the linear thread ids reaching `br`.
fn roles_of(k: &Kernel, br: Op, members: Vec<u32>, out: &mut Vec<(Region, Vec<u32>)>) -> Result<(), String> {
    let g = role_group(k, br).ok_or("not a role branch")?;
    let (lo, hi) = (k.groups[g].lo, k.groups[g].hi);
    let (inside, outside): (Vec<u32>, Vec<u32>) = members.into_iter().partition(|t| (lo..hi).contains(t));
    for (&r, m) in k.ops[br].regions.iter().zip([inside, outside]) {
        let nested = (k.region_ops(r).iter().copied()).find(|&o| role_group(k, o).is_some());
        let Some(nb) = nested else {
            out.push((r, m));
            continue;
        };
        let beside = (k.region_ops(r).iter()).filter(|&&o| o != nb).any(|&o| {
            let mut found = Vec::new();
            for &c in &k.ops[o].regions {
                collect(k, c, &mut found);
            }
            !found.is_empty()
                || is_handshake_op(&k.ops[o].kind)
        });
        if beside {
            return Err("mbarrier ops beside a nested role branch".into());
        }
        roles_of(k, nb, m, out)?;
    }
    Ok(())
}

/// An mbarrier op or a TMA load: what the handshake proof follows.
fn is_handshake_op(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::MbarWait { .. }
            | OpKind::MbarArrive { .. }
            | OpKind::MbarExpectTx { .. }
            | OpKind::TmaLoad { .. }
            | OpKind::MbarInit { .. }
            | OpKind::MbarInval { .. }
    )
}

/// Mbarrier ops and TMA loads of a region, in program order.
fn collect(k: &Kernel, r: Region, out: &mut Vec<Op>) {
    for &o in k.region_ops(r) {
        if is_handshake_op(&k.ops[o].kind) {
            out.push(o);
        }
        for &c in &k.ops[o].regions {
            collect(k, c, out);
        }
    }
}

/// One role: its index, thread count and region.
struct Role<'a> {
    arm: usize,
    n: u32,
    region: Region,
    /// The role's linear thread ids (ascending).
    members: &'a [u32],
}

/// Reads one op: its loop (one per arm), guards, slot and parity forms.
fn classify(
    k: &Kernel,
    ranges: &crate::ir::ranges::Ranges,
    o: Op,
    role: &Role,
    lp: &mut Option<Op>,
) -> Result<HsOp, String> {
    let (arm, n, arm_region) = (role.arm, role.n, role.region);
    let parents = k.parents();
    let mut elect = false;
    let mut tid = None;
    let mut this_loop = None;
    let mut cur = o;
    while parents.op_region[cur] != Some(arm_region) {
        let p = parents.parent_op(cur).ok_or("an op outside its arm")?;
        match &k.ops[p].kind {
            OpKind::For { .. } if this_loop.is_none() => this_loop = Some(p),
            // Only the then-arm runs in one thread: the else arm runs in all the others.
            OpKind::If { cond }
                if elects_one(k, *cond) && parents.op_region[cur] == k.ops[p].regions.first().copied() =>
            {
                elect = true;
                tid = elected_tid(k, *cond);
                // An election no thread of the role passes runs nothing (M4): its arrivals
                // must not be counted as one thread's.
                let member = |t: i64| u32::try_from(t).is_ok_and(|t| role.members.binary_search(&t).is_ok());
                if !tid.is_some_and(member) {
                    return Err(format!("no thread of the role passes the election around {}", op_name(k, o)));
                }
            }
            _ => return Err(format!("{} is under a condition or loop the proof does not read", op_name(k, o))),
        }
        cur = p;
    }
    let l = this_loop.ok_or_else(|| format!("{} is outside the role's loop", op_name(k, o)))?;
    if lp.is_some_and(|x| x != l) {
        return Err("a role runs its handshakes in two loops".into());
    }
    *lp = Some(l);
    let OpKind::For { lo, step, .. } = &k.ops[l].kind else {
        return Err("no loop".into());
    };
    if *lo != Operand::int(0) || *step != Operand::int(1) {
        return Err("the proof reads loops `0 to T step 1`".into());
    }
    let iv = k.region_args(k.ops[l].regions[0])[0];
    let max_iter = i64::try_from(ranges.range(iv).hi).unwrap_or(i64::MAX);
    let mut fns = crate::ir::iterfn::IterFns::new(k, &ranges.inductions, l, max_iter)
        .ok_or("the role's loop has no constant bounds")?;
    let (mbar, index, kind) = match &k.ops[o].kind {
        OpKind::MbarWait { mbar, index, parity } => (*mbar, index, Kind::Wait(parity_form(k, &mut fns, *parity, k.root_buffer(*mbar)).ok_or_else(|| format!("the parity of {} is not `(i / D) mod 2` or its complement", op_name(k, o)))?)),
        OpKind::MbarArrive { mbar, index, tx } => (*mbar, index, Kind::Arrive { tx: tx.unwrap_or(0) as u64 }),
        OpKind::MbarExpectTx { mbar, index, bytes } => (*mbar, index, Kind::ExpectTx(*bytes as u64)),
        OpKind::TmaLoad { dst, mbar, mbar_index, .. } => {
            let bytes = k.shape(*dst).iter().product::<u64>() * k.elem(*dst).bytes();
            (*mbar, mbar_index, Kind::Tma(bytes))
        }
        _ => return Err(format!("{} inside a role", op_name(k, o))),
    };
    let b = k.root_buffer(mbar);
    if !matches!(mbar, MemRef::Buffer(_)) || index.len() != 1 || !is_slot(k, &mut fns, index[0], b) {
        return Err(format!("the slot of {} is not `rem %i, D`", op_name(k, o)));
    }
    Ok(HsOp {
        op: o,
        arm,
        threads: if elect { 1 } else { n },
        elect,
        tid,
        mbar: b,
        kind,
    })
}

/// Whether two operands are the same value in every thread: equal, or results of the same
/// pure op (arithmetic, comparison, select, constant) of operands that are the same — each
/// role computes its trip count `(K + 63) / 64` itself. Thread- or memory-dependent ops are
/// never the same.
pub(super) fn same(k: &Kernel, a: Operand, b: Operand, depth: u32) -> bool {
    if a == b {
        return true;
    }
    let (Some(x), Some(y)) = (def(k, a), def(k, b)) else {
        return false;
    };
    if depth > 16 {
        return false;
    }
    let operands = |kind: &OpKind| {
        let mut v = Vec::new();
        kind.for_each_operand(|o| v.push(o));
        v
    };
    let head = |kind: &OpKind| match kind {
        OpKind::Binary(op, ..) => Some(format!("{op:?}")),
        OpKind::Unary(op, _) => Some(format!("{op:?}")),
        OpKind::Cmp(p, ..) => Some(format!("{p:?}")),
        OpKind::Select(..) => Some(String::new()),
        OpKind::Const(c) => Some(format!("{c:?}")),
        _ => None,
    };
    let (ox, oy) = (operands(x), operands(y));
    head(x).is_some()
        && head(x) == head(y)
        && ox.len() == oy.len()
        && ox.iter().zip(&oy).all(|(p, q)| same(k, *p, *q, depth + 1))
}

pub(super) fn op_name(k: &Kernel, o: Op) -> String {
    format!("the op at byte {}", k.span(o).lo)
}

fn def(k: &Kernel, o: Operand) -> Option<&OpKind> {
    match k.values[o.value()?].def {
        ValueDef::Result(d, _) => Some(&k.ops[d].kind),
        _ => None,
    }
}

fn elects_one(k: &Kernel, c: Operand) -> bool {
    elected_tid(k, c).is_some()
}

/// The linear thread id `C` of a condition `cmp eq tid, C` (possibly `and`-ed with `true`).
fn elected_tid(k: &Kernel, c: Operand) -> Option<i64> {
    // `and %elect, true` (Triton's issue predicate) is `%elect`.
    if let Some(OpKind::Binary(BinOp::And, x, y)) = def(k, c) {
        return match (x, y) {
            (o, Operand::Imm(Scalar::I1(true))) | (Operand::Imm(Scalar::I1(true)), o) => elected_tid(k, *o),
            _ => None,
        };
    }
    let Some(OpKind::Cmp(CmpPred::Eq, x, Operand::Imm(id))) = def(k, c) else {
        return None;
    };
    match def(k, *x) {
        Some(OpKind::Special(Special::LinearTid)) => Some(id.as_i64()),
        Some(OpKind::Special(Special::Tid(0))) if k.block[1] == 1 && k.block[2] == 1 => Some(id.as_i64()),
        _ => None,
    }
}

/// The index is `i mod D` in every iteration `i`, with D the array's extent.
pub(super) fn is_slot(k: &Kernel, fns: &mut crate::ir::iterfn::IterFns, o: Operand, b: Buffer) -> bool {
    let d = k.buffers[b].shape.first().copied().unwrap_or(0) as usize;
    match fns.of(o) {
        Some(f) if f.periodic() && d > 0 => {
            let p = f.seq.len() / gcd(f.seq.len(), d) * d;
            (0..p as i64).all(|i| f.at(i) == i % d as i64)
        }
        _ => false,
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The wait parity (its low bit, as the mbarrier reads it) is `(i / D) mod 2` in every
/// iteration `i` (this use) or its complement (the previous use).
pub(super) fn parity_form(k: &Kernel, fns: &mut crate::ir::iterfn::IterFns, o: Operand, b: Buffer) -> Option<Parity> {
    let d = k.buffers[b].shape.first().copied().unwrap_or(0) as usize;
    let f = fns.of(o).filter(|f| f.periodic() && d > 0)?;
    // Both sides are periodic: equal over a common period means equal everywhere.
    let p = f.seq.len() / gcd(f.seq.len(), 2 * d) * 2 * d;
    let this = |i: i64| (i / d as i64) % 2;
    if (0..p as i64).all(|i| f.at(i) & 1 == this(i)) {
        Some(Parity::This)
    } else if (0..p as i64).all(|i| f.at(i) & 1 == 1 - this(i)) {
        Some(Parity::Previous)
    } else {
        None
    }
}

/// Whether init `o` (under top-level op `top`) runs in some thread of the block: each op
/// around it is an `if` on `cmp eq tid, C` (possibly `and`-ed with `true`) with `C` a thread
/// of the block, `o` in its then-arm (session 37's M10: `cmp eq %t, 288` in a 288-thread
/// block runs no init, and every later wait and arrival is on an uninitialised mbarrier).
/// Any other condition, or a loop, is not read: the proof declines.
fn init_runs(k: &Kernel, o: Op, top: Op) -> Result<(), String> {
    let parents = k.parents();
    let mut cur = o;
    let mut chosen = None;
    while cur != top {
        let p = parents.parent_op(cur).ok_or("an init outside the kernel's top level")?;
        let then_arm = parents.op_region[cur] == k.ops[p].regions.first().copied();
        let elected = match &k.ops[p].kind {
            OpKind::If { cond } if then_arm => elected_tid(k, *cond),
            _ => None,
        };
        // Nested elections of two different threads: no thread passes both.
        if let (Some(t), Some(c)) = (elected, chosen)
            && t != c
        {
            return Err(format!("{} is under elections of two different threads ({c} and {t}): the mbarrier is never initialised", op_name(k, o)));
        }
        chosen = chosen.or(elected);
        match elected {
            Some(t) if (0..i64::from(k.threads())).contains(&t) => {}
            Some(t) => return Err(format!("no thread of the block passes the election (thread {t}) around {}: the mbarrier is never initialised", op_name(k, o))),
            None => return Err(format!("{} is under a condition or loop the proof does not read: it is not shown to run", op_name(k, o))),
        }
        cur = p;
    }
    Ok(())
}

/// Each array's arrival count, from `mbar_init`s before the branch (every slot, one count),
/// followed by a `barrier` at the top level before the branch.
pub(super) fn inits(k: &Kernel, pos: usize) -> Result<HashMap<Buffer, u32>, String> {
    let top = &k.region_ops(k.body())[..pos];
    let mut counts: HashMap<Buffer, (u32, Vec<i64>)> = HashMap::new();
    let mut last_init = None;
    for (i, &t) in top.iter().enumerate() {
        let mut found = Vec::new();
        if matches!(k.ops[t].kind, OpKind::MbarInit { .. }) {
            found.push(t);
        }
        for &r in &k.ops[t].regions {
            collect(k, r, &mut found);
        }
        for o in found {
            if let OpKind::MbarInit { mbar, index, count } = &k.ops[o].kind {
                init_runs(k, o, t)?;
                let b = k.root_buffer(*mbar);
                let e = counts.entry(b).or_insert((*count, Vec::new()));
                if e.0 != *count {
                    return Err(format!("the slots of @{} have different counts", k.buffers[b].name));
                }
                if let Some(Operand::Imm(s)) = index.first() {
                    e.1.push(s.as_i64());
                }
                last_init = Some(i);
            }
        }
    }
    let li = last_init.ok_or("no mbarrier is initialised before the roles")?;
    if !top[li + 1..].iter().any(|&o| k.ops[o].kind == OpKind::Barrier) {
        return Err("no `barrier` orders the mbarrier inits before the roles".into());
    }
    let mut out = HashMap::new();
    for (b, (c, mut slots)) in counts {
        slots.sort_unstable();
        slots.dedup();
        let d = k.buffers[b].shape.first().copied().unwrap_or(0) as i64;
        if slots != (0..d).collect::<Vec<_>>() {
            return Err(format!("not every slot of @{} is initialised", k.buffers[b].name));
        }
        out.insert(b, c);
    }
    Ok(out)
}

/// Arrivals and transaction bytes per iteration against the counts (C0021).
fn balance(
    k: &Kernel,
    br: Op,
    ops: &[HsOp],
    counts: &HashMap<Buffer, u32>,
) -> Result<Option<Diagnostic>, String> {
    let mut per: HashMap<Buffer, (u64, i64)> = HashMap::new();
    for o in ops {
        let e = per.entry(o.mbar).or_default();
        match o.kind {
            Kind::Arrive { tx } => {
                e.0 += o.threads as u64;
                e.1 += (tx * o.threads as u64) as i64;
            }
            Kind::ExpectTx(b) => e.1 += (b * o.threads as u64) as i64,
            Kind::Tma(b) => e.1 -= (b * o.threads as u64) as i64,
            Kind::Wait(_) => {}
        }
    }
    for (b, (arrivals, tx)) in per {
        let name = &k.buffers[b].name;
        let c = *counts.get(&b).ok_or_else(|| format!("@{name} is not initialised before the roles"))?;
        if arrivals != c as u64 || tx != 0 {
            let d = Diagnostic::error(
                DiagKind::Finding,
                "C0021",
                format!("each iteration arrives {arrivals} times on @{name}, initialised for {c}, with {tx} transaction bytes unbalanced: its phases and the slot's uses drift apart"),
            )
            .with_label(k.span(br), "role branch")
            .with_note("a wait then names a phase that completes too early, or never");
            return Ok(Some(d));
        }
    }
    Ok(None)
}

/// Every waiting op is followed, in its role's iteration, by an arrival by the same threads,
/// or (a wait of the whole role) by a group barrier of the role and then an elected arrival:
/// each waiter's passage through the barrier holds that arrival, and so the other role, back.
/// One backward pass over `ops` (each arm's ops are in program order): per arm, which kinds
/// of arrival follow, and the last elected arrival, which the first group barrier after the
/// wait must precede.
fn aliasing(k: &Kernel, ops: &[HsOp], index: &OpIndex) -> Result<(), String> {
    let order = &index.order;
    let mut later: HashMap<usize, [bool; 2]> = HashMap::new();
    let mut last_elected: HashMap<usize, usize> = HashMap::new();
    let mut unreleased = None;
    for w in ops.iter().rev() {
        if matches!(w.kind, Kind::Wait(_)) {
            let seen = later.get(&w.arm).copied().unwrap_or_default();
            let behind = |&a: &usize| index.between(k, w, a);
            let ok = seen[usize::from(w.elect)]
                || !w.elect && last_elected.get(&w.arm).is_some_and(behind);
            if !ok {
                unreleased = Some(w.op);
            }
        }
        if matches!(w.kind, Kind::Arrive { .. }) {
            later.entry(w.arm).or_default()[usize::from(w.elect)] = true;
            if w.elect {
                last_elected.entry(w.arm).or_insert(order[&w.op]);
            }
        }
    }
    match unreleased {
        Some(w) => Err(format!(
            "{} waits in threads that never arrive afterwards: they can fall two phases behind, where the parity names the wrong phase",
            op_name(k, w)
        )),
        None => Ok(()),
    }
}

/// Every op's position in program order and the group barriers the rules accept
/// ([`GroupBarriers`]): built once per role branch, O(ops), and read by the aliasing and the
/// re-arm rules (`handshake_rearm`).
pub(super) struct OpIndex {
    pub(super) order: HashMap<Op, usize>,
    barriers: GroupBarriers,
}

impl OpIndex {
    fn new(k: &Kernel) -> OpIndex {
        let ops = k.ops_in_order();
        let order: HashMap<Op, usize> = ops.iter().enumerate().map(|(i, &o)| (o, i)).collect();
        OpIndex {
            barriers: GroupBarriers::new(k, &ops, &order),
            order,
        }
    }

    /// [`GroupBarriers::between`] with this index's positions.
    pub(super) fn between(&self, k: &Kernel, w: &HsOp, a: usize) -> bool {
        let parent = k.parents().parent_op(w.op);
        self.barriers.between(parent, w.threads, self.order[&w.op], a)
    }

    /// Whether a group barrier of `n` threads lies directly in loop `l`'s body after position
    /// `from` and before position `a` ([`GroupBarriers::between`]).
    pub(super) fn group_barrier_between(&self, l: Op, n: u32, from: usize, a: usize) -> bool {
        self.barriers.between(Some(l), n, from, a)
    }
}

/// The group barriers the aliasing rule accepts: a `named_sync id, n` such that every op on
/// `id` is a `named_sync id, n` of the same loop body. Each phase of `id` is then one
/// iteration of exactly the `n` threads of the role that runs that body. Indexed by (body,
/// `n`), positions ascending. O(ops) to build.
struct GroupBarriers {
    at: HashMap<(Option<Op>, u32), Vec<usize>>,
}

impl GroupBarriers {
    fn new(k: &Kernel, ops: &[Op], order: &HashMap<Op, usize>) -> GroupBarriers {
        let parents = k.parents();
        // Per id: the body and count of all its ops, or `None` when they differ.
        let mut ids: HashMap<u32, Option<(Option<Op>, u32)>> = HashMap::new();
        for &o in ops {
            let (id, this) = match k.ops[o].kind {
                OpKind::NamedSync { id, count } => (id, Some((parents.parent_op(o), count))),
                OpKind::NamedArrive { id, .. } => (id, None),
                _ => continue,
            };
            let e = ids.entry(id).or_insert(this);
            if *e != this {
                *e = None;
            }
        }
        let mut at: HashMap<(Option<Op>, u32), Vec<usize>> = HashMap::new();
        for &o in ops {
            if let OpKind::NamedSync { id, count } = k.ops[o].kind
                && ids[&id] == Some((parents.parent_op(o), count))
            {
                at.entry((parents.parent_op(o), count)).or_default().push(order[&o]);
            }
        }
        GroupBarriers { at }
    }

    /// Whether such a barrier of `n` threads (every thread of a role), directly in the body
    /// of the op `parent`, lies there between positions `from` and `a`.
    fn between(&self, parent: Option<Op>, n: u32, from: usize, a: usize) -> bool {
        let Some(at) = self.at.get(&(parent, n)) else {
            return false;
        };
        let after = at.partition_point(|&b| b <= from);
        at.get(after).is_some_and(|&b| b < a)
    }
}

/// A cycle of waits across the roles (C0020), if any.
fn cycle(k: &Kernel, ops: &[HsOp]) -> Option<Diagnostic> {
    let n = ops.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    // This-use waits per mbarrier array and the next op of each arm, found once.
    let mut this_waits: HashMap<Buffer, Vec<usize>> = HashMap::new();
    for (j, o) in ops.iter().enumerate() {
        if matches!(o.kind, Kind::Wait(Parity::This)) {
            this_waits.entry(o.mbar).or_default().push(j);
        }
    }
    let mut next_of_arm: HashMap<usize, usize> = HashMap::new();
    for i in (0..n).rev() {
        // Program order within a role: the next op needs every one of its threads, and some
        // of them ran this one first.
        if let Some(j) = next_of_arm.insert(ops[i].arm, i) {
            succ[i].push(j);
        }
        // An arrival (or TMA completion) on M precedes every this-use wait on M.
        if matches!(ops[i].kind, Kind::Arrive { .. } | Kind::Tma(_) | Kind::ExpectTx(_)) {
            let waits = this_waits.get(&ops[i].mbar).into_iter().flatten();
            succ[i].extend(waits.filter(|&&j| j != i));
        }
    }
    // Iterative DFS with colours.
    let mut colour = vec![0u8; n];
    let mut parent = vec![usize::MAX; n];
    for s in 0..n {
        if colour[s] != 0 {
            continue;
        }
        let mut stack = vec![(s, 0usize)];
        colour[s] = 1;
        while let Some(&mut (v, ref mut e)) = stack.last_mut() {
            if let Some(&w) = succ[v].get(*e) {
                *e += 1;
                if colour[w] == 1 {
                    let mut path = vec![w];
                    let mut x = v;
                    while x != w && x != usize::MAX {
                        path.push(x);
                        x = parent[x];
                    }
                    path.reverse();
                    return Some(deadlock(k, ops, &path));
                }
                if colour[w] == 0 {
                    colour[w] = 1;
                    parent[w] = v;
                    stack.push((w, 0));
                }
            } else {
                colour[v] = 2;
                stack.pop();
            }
        }
    }
    None
}

fn deadlock(k: &Kernel, ops: &[HsOp], path: &[usize]) -> Diagnostic {
    let many = ops.iter().any(|o| o.arm > 1);
    let role = |a: usize| match a {
        _ if many => format!("role {a}"),
        0 => "the group's role".to_string(),
        _ => "the other role".to_string(),
    };
    let steps: Vec<String> = path
        .iter()
        .filter(|&&i| matches!(ops[i].kind, Kind::Wait(_)))
        .map(|&i| format!("{} waits on @{}", role(ops[i].arm), k.buffers[ops[i].mbar].name))
        .collect();
    let mut d = Diagnostic::error(
        DiagKind::Finding,
        "C0020",
        format!("deadlock for every trip count: {} (a cycle)", steps.join(" -> ")),
    );
    for &i in path {
        if matches!(ops[i].kind, Kind::Wait(_)) {
            d = d.with_label(k.span(ops[i].op), format!("{} waits here", role(ops[i].arm)));
        }
    }
    d.with_note("each of these waits needs an arrival that comes after another wait of the cycle in the same iteration")
}


/// Premise of "proved" that a release orders what it hands over (M15): every arrival (without
/// transaction bytes) that follows, in one iteration of its role's loop, an asynchronous
/// access follows that access's completion for its own threads
/// (`sync::handshake_chain::completed_by`, the rule `sync` checks hand-written handshakes
/// with and places its own by). An arrival before it lets the other role reuse the bytes while
/// the copy (`cp_async`, `tma_store`, `wgmma`) is in flight. Every asynchronous access before
/// the arrival counts, whatever buffer and index it names: which bytes an arrival hands over is
/// not known here, so an access to a buffer without slots, or to a slot of another array, is
/// not excused (the premise fails, "not proved", and the interpreter decides).
/// O(arrivals · ops of the loop body).
fn released_complete(k: &Kernel, ops: &[HsOp]) -> Result<(), String> {
    let parents = k.parents();
    for a in ops.iter().filter(|o| matches!(o.kind, Kind::Arrive { tx: 0 })) {
        let Some(l) = parents.ancestors(a.op).into_iter().find(|&p| matches!(k.ops[p].kind, OpKind::For { .. })) else {
            continue;
        };
        let body = k.ops[l].regions[0];
        let mut seq = Vec::new();
        crate::sync::handshake::walk_region(k, body, &mut seq);
        let mut acc = Vec::new();
        crate::sync::handshake::accesses(k, body, &mut acc);
        let Some(pa) = seq.iter().position(|&o| o == a.op) else { continue };
        for x in &acc {
            let Some(px) = seq.iter().position(|&o| o == x.op) else { continue };
            if px > pa || crate::sync::handshake_chain::completion_ops(&k.ops[x.op].kind).is_empty() {
                continue;
            }
            // Only ops that run whenever `x` does, in its iteration: those directly in a
            // region enclosing `x` (a wait under another `if` or in an inner loop completes
            // nothing on the paths that skip it).
            let within = k.parents().enclosing_regions(x.op, Some(body));
            let between = (seq[px + 1..pa].iter().copied()).filter(|&o| parents.op_region[o].is_some_and(|r| within.contains(&r)));
            if crate::sync::handshake_chain::completed_by(k, x.op, between).is_none() {
                return Err(format!("{} releases a slot before {} completes for its own threads", op_name(k, a.op), op_name(k, x.op)));
            }
        }
    }
    Ok(())
}
