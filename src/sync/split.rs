//! Lowering block barriers to gfx12 split barriers (`s_barrier_signal -1` / `s_barrier_wait
//! -1`) with as much slack between the halves as the kernel allows.
//!
//! Input: a kernel whose block barriers already remove every hazard (the output of barrier
//! placement). Each `barrier` B becomes `waitcnt dscnt(0); barrier_signal -1` and
//! `barrier_wait -1` such that every op before B stays before the signal and every op after B
//! stays after the wait, except ops that touch no shared memory and are not sync ops, which may
//! sit between the halves: those are the slack a wave spends working instead of waiting.
//!
//! Algorithm, per barrier B at index i of region R:
//! 0. If a loop that step 1 rotates lies right before or after B in R, with only ops between
//!    them that neither touch shared memory nor synchronize, B is dropped: the loop's pairs
//!    already order what precedes B against what follows it (the pre-loop signal follows
//!    every access before the loop and each access after it follows some wait of that phase
//!    or a later one; the post-loop wait follows the last signal, which follows every access
//!    of the loop and before it). Placement counts a monolithic barrier at the top of a loop
//!    body as `trip` phases; rotated, it is `trip + 1`, and that extra phase is the one after
//!    (or before) the loop that B would otherwise repeat.
//! 1. If B is the first op of the body of a loop with uniform bounds, it is *rotated* across
//!    the back edge: a pair is opened before the loop and at the end of each iteration (a
//!    signal), and closed at the top of each iteration and after the loop (a wait). The
//!    sequence on every path is then S (W S)* W, and the window of each pair spans the back
//!    edge, so the end of one iteration overlaps the start of the next.
//! 2. Otherwise the signal and the wait replace B in place.
//! 3. Each signal moves up past the ops before it in its region that neither touch shared
//!    memory (directly or in nested regions, per the effects table) nor synchronize; each wait
//!    moves down likewise. A signal is immediately preceded by `waitcnt dscnt(0)`: the
//!    hardware signal does not wait for the wave's outstanding LDS operations.
//! 4. A `dscnt(0)` before a signal is removed when, on every path, no LDS operation can be
//!    outstanding there (no shared access or mbarrier op since the previous `dscnt(0)` or
//!    `lgkmcnt(0)` wait or `barrier`, or since the kernel's start): a one-bit forward
//!    dataflow (`drop_clean_dscnt`).
//!
//! A split signal already in the input (the user's `barrier_signal ... barrier_wait`, which
//! placement counts as a block barrier at the wait when the window between the halves holds
//! no shared access or sync op, `sync::split_pairs`) gets the same `waitcnt dscnt(0)` before
//! it unless one is right there (`fence_before`), and step 4 drops it again
//! where it finds nothing outstanding: without it an LDS store (or load) of the wave still in
//! flight at the signal is unordered with the accesses after the wait (session 36's L10). A
//! `dscnt(n > 0)` or a wait under a branch does not count. The pipeline asks for the wait only
//! before the signals whose pair covers a hazard (`fence` of [`lower_to_split`]; `None`:
//! before every hand-written signal).
//!
//! gfx1250's named barriers (`named_arrive`/`named_sync`) are the same signal on an id: after
//! the lowering, [`fence_named_barriers`] writes the same wait before each one an LDS
//! operation of the wave may be outstanding at (the dataflow of step 4, counting only the
//! wave's own LDS instructions: async copies never count on `dscnt`).
//!
//! Why this is correct: a shared access before B is before the `dscnt(0)` and the signal, in
//! program order, on every path; one after B is after the wait. Between the halves there are
//! only accesses to registers and global memory, which the barrier never ordered for the
//! hazards it was placed for. Rotation keeps the order on every path: the first iteration's
//! wait matches the signal before the loop, the last iteration's signal the wait after it, a
//! zero-trip loop meets S then W. Pairs never cross: halves never move past another sync op,
//! and signals and waits on id -1 therefore alternate along every path (the protocol verifier,
//! `check::protocol`, re-proves it on the output).
//!
//! Complexity: O(ops) per barrier for the shared-access summary (memoized per op), O(ops)
//! moves in total, O(ops) for the dscnt dataflow (transfer functions memoized per region).

use std::collections::HashMap;

use crate::ir::*;

/// The split id used for the workgroup barrier.
pub const WORKGROUP: i32 = -1;

/// Statistics of one lowering.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SplitStats {
    /// Signal/wait pairs written in the kernel text.
    pub pairs: usize,
    /// For each written signal, the number of ops between it and the next wait in program
    /// order (the slack a wave may overlap with the barrier).
    pub slack: Vec<usize>,
    /// Barriers dropped because the pair of a rotated loop next to them orders the same.
    pub absorbed: usize,
    /// `waitcnt dscnt(0)` waits left out because no LDS operation may be outstanding there.
    pub dscnt_dropped: usize,
    /// `waitcnt dscnt(0)` waits written before gfx1250 named barriers
    /// ([`fence_named_barriers`]).
    pub named_dscnt: usize,
    /// Barrier phases executed per block (split waits, times the trip counts of the loops
    /// around them; parameters at their `--bounds` values or defaults), if every such trip
    /// count is known.
    pub phases: Option<u64>,
    /// When `phases` is unknown: the count as a sum of products of trip counts, the unknown
    /// ones spelled with their loop bounds (`2*n + 1`, `ceil((n - 0) / 64)`); `None` when a
    /// `while` loop encloses a wait.
    pub phases_formula: Option<String>,
}

impl SplitStats {
    pub fn mean_slack(&self) -> f64 {
        if self.slack.is_empty() {
            0.0
        } else {
            self.slack.iter().sum::<usize>() as f64 / self.slack.len() as f64
        }
    }
}

/// Whether an op (with its regions) touches shared memory or synchronizes.
fn pinned(k: &Kernel, op: Op, memo: &mut HashMap<Op, bool>) -> bool {
    if let Some(&b) = memo.get(&op) {
        return b;
    }
    let e = effects(k, op);
    let mut b = !e.shared.is_empty() || e.sync.is_some();
    if !b {
        for &r in &k.ops[op].regions {
            for &c in k.region_ops(r) {
                if pinned(k, c, memo) {
                    b = true;
                    break;
                }
            }
            if b {
                break;
            }
        }
    }
    memo.insert(op, b);
    b
}

/// Whether `l` is a loop whose body opens with a barrier that is rotated (step 1 of the
/// module doc): a `for` with uniform bounds.
fn rotated_loop(k: &Kernel, l: Op, thread_dependent: &dyn Fn(&Operand) -> bool) -> bool {
    match &k.ops[l].kind {
        OpKind::For { lo, hi, step, .. } => {
            let body = k.ops[l].regions[0];
            ![lo, hi, step].iter().any(|o| thread_dependent(o))
                && k.region_ops(body)
                    .first()
                    .is_some_and(|&b| k.ops[b].kind == OpKind::Barrier)
        }
        _ => false,
    }
}

/// Barriers that a rotated loop next to them already provides (step 0 of the module doc):
/// not the first op of a rotated body, and separated from a rotated loop before or after them
/// only by ops that neither touch shared memory nor synchronize.
fn absorbed(
    k: &Kernel,
    parents: &Parents,
    thread_dependent: &dyn Fn(&Operand) -> bool,
    memo: &mut HashMap<Op, bool>,
) -> std::collections::HashSet<Op> {
    let mut out = std::collections::HashSet::new();
    for (r, rd) in k.regions().iter() {
        for (i, &b) in rd.ops().iter().enumerate() {
            if k.ops[b].kind != OpKind::Barrier {
                continue;
            }
            let first_of_rotated = i == 0
                && parents.region_op[r].is_some_and(|l| rotated_loop(k, l, thread_dependent));
            if first_of_rotated {
                continue;
            }
            let before = rd.ops()[..i].iter().rev().find(|&&o| pinned(k, o, memo));
            let after = rd.ops()[i + 1..].iter().find(|&&o| pinned(k, o, memo));
            if [before, after]
                .into_iter()
                .flatten()
                .any(|&l| rotated_loop(k, l, thread_dependent))
            {
                out.insert(b);
            }
        }
    }
    out
}

/// Lowers every `barrier` of `k` to split signal/wait pairs. `fence`: the hand-written
/// signals that get a `waitcnt dscnt(0)` before them (`None`: all of them).
pub fn lower_to_split(
    k: &Kernel,
    thread_dependent: &dyn Fn(&Operand) -> bool,
    bounds: &HashMap<String, i64>,
    fence: Option<&std::collections::HashSet<Op>>,
) -> (Kernel, SplitStats) {
    let mut out = k.clone();
    let parents = k.parents();
    let mut memo = HashMap::new();
    let drop = absorbed(k, parents, thread_dependent, &mut memo);
    let barriers: Vec<Op> = k
        .ops_in_order()
        .into_iter()
        .filter(|&o| k.ops[o].kind == OpKind::Barrier)
        .collect();
    for b in barriers {
        let Some(r) = parents.op_region[b] else {
            continue;
        };
        let Some((r_, idx)) = out.remove_op(b) else {
            continue;
        };
        debug_assert_eq!(r, r_);
        if drop.contains(&b) {
            continue;
        }
        let owner =
            parents.region_op[r].filter(|&l| idx == 0 && rotated_loop(k, l, thread_dependent));
        if let Some(l) = owner {
            rotate(&mut out, parents, l, r);
        } else {
            let w = new_wait(&mut out);
            out.insert_op(r, idx, w);
            insert_signal(&mut out, r, idx);
        }
    }
    let split_signal = |kind: &OpKind| matches!(kind, OpKind::SplitSignal(_));
    let added = fence_before(&mut out, &split_signal, fence);
    // Slide every signal up and every wait down within its region.
    let regions: Vec<Region> = out.regions().keys().collect();
    for r in regions {
        slide(&mut out, r, &mut memo);
    }
    let dscnt_dropped = drop_clean_dscnt(&mut out, &added);
    let mut stats = stats(&out, bounds);
    stats.absorbed = drop.len();
    stats.dscnt_dropped = dscnt_dropped;
    (out, stats)
}

/// Splits the barrier that opened body `r` of loop `l` across the back edge: a wait at the top
/// of the body and a signal at its end (before a yield), a signal before the loop and a wait
/// after it.
fn rotate(out: &mut Kernel, parents: &Parents, l: Op, r: Region) {
    let Some(outer) = parents.op_region[l] else {
        return;
    };
    let Some(li) = out.region_ops(outer).iter().position(|&o| o == l) else {
        return;
    };
    let w = new_wait(out);
    out.insert_op(r, 0, w);
    let end = out.region_ops(r).len()
        - usize::from(
            out.region_ops(r)
                .last()
                .is_some_and(|&o| matches!(out.ops[o].kind, OpKind::Yield(_))),
        );
    insert_signal(out, r, end);
    let w2 = new_wait(out);
    out.insert_op(outer, li + 1, w2);
    insert_signal(out, outer, li);
}

/// Writes `waitcnt dscnt(0)` before each op of `k` that `signal` accepts, not already right
/// after such a wait, that `only` holds (every one when `None`); the split lowering asks it
/// for the user's split signals (its own signals always have the wait). Placement counts a hand-written pair with a clean window as a block barrier
/// (`SyncModel::must_sync`),
/// and a signal releases only the wave's completed LDS operations: without the wait a store
/// (or load) still outstanding at the signal is unordered with the accesses after the wait.
/// A `dscnt(n > 0)` wait or one under a branch is not enough. The waits that find no LDS
/// operation outstanding are dropped again by [`drop_clean_dscnt`] (by [`fence_named_barriers`] for named barriers).
/// Returns the waits written.
fn fence_before(
    k: &mut Kernel,
    signal: &dyn Fn(&OpKind) -> bool,
    only: Option<&std::collections::HashSet<Op>>,
) -> std::collections::HashSet<Op> {
    let mut added = std::collections::HashSet::new();
    let regions: Vec<Region> = k.regions().keys().collect();
    for r in regions {
        let ops = k.region_ops(r).to_vec();
        let mut with = Vec::with_capacity(ops.len());
        for (i, &o) in ops.iter().enumerate() {
            let fenced = i > 0 && is_dscnt0(k, ops[i - 1]);
            let wanted = only.is_none_or(|f| f.contains(&o));
            if signal(&k.ops[o].kind) && !fenced && wanted {
                let d = k.new_op(OpKind::WaitCnt(vec![(Counter::DsCnt, 0)]), &[], vec![]);
                added.insert(d);
                with.push(d);
            }
            with.push(o);
        }
        if with.len() != ops.len() {
            k.set_region_ops(r, with);
        }
    }
    added
}

/// Removes each `waitcnt dscnt(0)` just before a split signal that no shared access precedes
/// since the previous `dscnt(0)`/`lgkmcnt(0)` wait or `barrier`, on any path: the wave has no
/// LDS operation outstanding there. A forward dataflow over the structured kernel whose state
/// is one bit, "an LDS operation may be outstanding" (join: or). Each op's transfer function
/// is a [`Fence`] (memoized per region), so a loop's head is its entry or-ed with whether its
/// body may leave an LDS operation outstanding, and every op is walked once: O(ops).
/// Returns the number dropped, not counting those in `added` (written by
/// [`fence_before`] and dropped again: no wait of the input is left out).
fn drop_clean_dscnt(k: &mut Kernel, added: &std::collections::HashSet<Op>) -> usize {
    let mut flow = LdsFlow::new(Outstanding::AnyAccess);
    let mut clean = std::collections::HashSet::new();
    walk_lds(k, k.body(), false, &mut flow, &mut clean);
    let mut dropped = 0;
    let regions: Vec<Region> = k.regions().keys().collect();
    for r in regions {
        let ops = k.region_ops(r).to_vec();
        let next_is_signal = |i: usize| {
            ops.get(i + 1)
                .is_some_and(|&n| k.ops[n].kind == OpKind::SplitSignal(WORKGROUP))
        };
        let keep: Vec<Op> = ops
            .iter()
            .enumerate()
            .filter(|&(i, o)| !(clean.contains(o) && next_is_signal(i)))
            .map(|(_, &o)| o)
            .collect();
        dropped += ops
            .iter()
            .filter(|o| !keep.contains(o) && !added.contains(o))
            .count();
        k.set_region_ops(r, keep);
    }
    dropped
}

/// Writes `waitcnt dscnt(0)` right before each named barrier op (`named_arrive`,
/// `named_sync`) of `k` that an LDS operation of the wave may still be outstanding at, on some
/// path: on gfx1250 a named barrier is `s_barrier_signal` (and `s_barrier_wait`) on its id,
/// and the signal, like the split one, does not wait for the wave's LDS operations, so
/// without the wait a store (or load) still in flight is unordered with the other threads'
/// accesses after the barrier (session 39's P5). Waits are written before every named op
/// not already right after one, then those the dataflow of `walk_lds` (rule
/// `Outstanding::DsOnly`) reaches with nothing outstanding are removed again; removing a
/// wait reached clean changes no state, so the rest stay needed. Returns the waits kept.
/// Complexity: O(ops).
pub fn fence_named_barriers(k: &mut Kernel) -> usize {
    let named = |kind: &OpKind| matches!(kind, OpKind::NamedArrive { .. } | OpKind::NamedSync { .. });
    // Most kernels have none: one scan of the arena, no copy of any region.
    if !k.ops.values().any(|o| named(&o.kind)) {
        return 0;
    }
    let added = fence_before(k, &named, None);
    if added.is_empty() {
        return 0;
    }
    let mut flow = LdsFlow::new(Outstanding::DsOnly);
    let mut clean = std::collections::HashSet::new();
    walk_lds(k, k.body(), false, &mut flow, &mut clean);
    let regions: Vec<Region> = k.regions().keys().collect();
    for r in regions {
        k.retain_ops(r, |o| !(added.contains(o) && clean.contains(o)));
    }
    added.difference(&clean).count()
}

/// Which ops leave an LDS operation outstanding in [`walk_lds`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Outstanding {
    /// Every shared access and mbarrier op (the split lowering's rule).
    AnyAccess,
    /// The wave's own LDS instructions only: an async copy into or out of LDS counts on its
    /// own counter on every AMD target (`Target::async_counter`: tensorcnt, asynccnt,
    /// loadcnt or vmcnt), never on dscnt, so a `dscnt(0)` would not complete it (the
    /// checker's interpreter fences only plain accesses likewise).
    DsOnly,
}

/// The dataflow's rule and its transfer functions memoized per region.
struct LdsFlow {
    rule: Outstanding,
    memo: HashMap<Region, Fence>,
}

impl LdsFlow {
    fn new(rule: Outstanding) -> LdsFlow {
        LdsFlow {
            rule,
            memo: HashMap::new(),
        }
    }
}

/// What an op (or region) does to "an LDS operation may be outstanding".
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Fence {
    /// Leaves it as it was.
    Keep,
    /// Clears it on every path (a `dscnt(0)` or `lgkmcnt(0)` wait, a `barrier`).
    Clear,
    /// May set it.
    Set,
}

fn clears(k: &Kernel, op: Op) -> bool {
    match &k.ops[op].kind {
        OpKind::Barrier => true,
        OpKind::WaitCnt(cs) => cs
            .iter()
            .any(|&(c, n)| n == 0 && matches!(c, Counter::DsCnt | Counter::LgkmCnt)),
        _ => false,
    }
}

/// Whether an op may leave an LDS operation outstanding: a shared access (under `rule`), or
/// an mbarrier op (mbarriers live in shared memory).
fn touches_lds(k: &Kernel, op: Op, rule: Outstanding) -> bool {
    let e = effects(k, op);
    let counted = |a: &SharedAccess| {
        rule == Outstanding::AnyAccess
            || !matches!(a.kind, AccessKind::AsyncWrite(_) | AccessKind::AsyncRead(_))
    };
    e.shared.iter().any(counted)
        || matches!(
            e.sync,
            Some(
                SyncEffect::MbarInit
                    | SyncEffect::MbarArrive
                    | SyncEffect::MbarExpectTx
                    | SyncEffect::MbarWait
                    | SyncEffect::MbarInval
            )
        )
}

/// The transfer function of region `r` run once, in order.
fn region_fence(k: &Kernel, r: Region, flow: &mut LdsFlow) -> Fence {
    if let Some(&f) = flow.memo.get(&r) {
        return f;
    }
    let mut f = Fence::Keep;
    for &op in k.region_ops(r) {
        match op_fence(k, op, flow) {
            Fence::Keep => {}
            g => f = g,
        }
    }
    flow.memo.insert(r, f);
    f
}

fn op_fence(k: &Kernel, op: Op, flow: &mut LdsFlow) -> Fence {
    let od = &k.ops[op];
    if clears(k, op) {
        return Fence::Clear;
    }
    let fs: Vec<Fence> = od
        .regions
        .iter()
        .map(|&c| region_fence(k, c, flow))
        .collect();
    match &od.kind {
        // Loops may run zero times: they clear nothing for sure.
        OpKind::For { .. } | OpKind::While { .. } => {
            if fs.contains(&Fence::Set) {
                Fence::Set
            } else {
                Fence::Keep
            }
        }
        OpKind::If { .. } if fs.contains(&Fence::Set) => Fence::Set,
        OpKind::If { .. } if fs.iter().all(|&f| f == Fence::Clear) => Fence::Clear,
        OpKind::If { .. } => Fence::Keep,
        _ if !od.regions.is_empty() => fs
            .into_iter()
            .fold(Fence::Keep, |a, f| if f == Fence::Keep { a } else { f }),
        _ if touches_lds(k, op, flow.rule) => Fence::Set,
        _ => Fence::Keep,
    }
}

/// Walks region `r` entered with state `dirty`, recording the `dscnt(0)` waits reached with
/// the state clear; returns the state at its end.
fn walk_lds(
    k: &Kernel,
    r: Region,
    mut dirty: bool,
    flow: &mut LdsFlow,
    clean: &mut std::collections::HashSet<Op>,
) -> bool {
    for &op in k.region_ops(r) {
        let od = &k.ops[op];
        if is_dscnt0(k, op) && !dirty {
            clean.insert(op);
        }
        match &od.kind {
            OpKind::For { .. } | OpKind::While { .. } => {
                // The head joins the entry with the back edge: set when the body may set it.
                let head = dirty || op_fence(k, op, flow) == Fence::Set;
                let mut s = head;
                for &c in &od.regions {
                    s = walk_lds(k, c, s, flow, clean);
                }
                dirty = head;
            }
            OpKind::If { .. } => {
                let mut any = false;
                for &c in &od.regions {
                    any |= walk_lds(k, c, dirty, flow, clean);
                }
                dirty = any;
            }
            _ if !od.regions.is_empty() => {
                for &c in &od.regions {
                    dirty = walk_lds(k, c, dirty, flow, clean);
                }
            }
            _ => match op_fence(k, op, flow) {
                Fence::Keep => {}
                Fence::Clear => dirty = false,
                Fence::Set => dirty = true,
            },
        }
    }
    dirty
}

/// Barrier phases executed per block: every split wait completes one, once per iteration of
/// the loops around it (the rotated lowering's extra phase is its wait before the loop). Each
/// wait contributes a product of trip counts: known ones multiply a constant, unknown ones
/// stay symbolic. Returns the total when every trip count is known, else the formula; `None`
/// for both when a `while` loop encloses a wait.
fn phases(k: &Kernel, bounds: &HashMap<String, i64>) -> (Option<u64>, Option<String>) {
    let parents = k.parents();
    // Symbolic factors (sorted) -> constant multiplier.
    let mut terms: std::collections::BTreeMap<Vec<String>, u64> = Default::default();
    for op in k.ops_in_order() {
        if k.ops[op].kind != OpKind::SplitWait(WORKGROUP) {
            continue;
        }
        let (mut n, mut sym) = (1u64, Vec::new());
        for a in parents.ancestors(op) {
            match k.ops[a].kind {
                OpKind::For { .. } => match super::trip(k, a, Some(bounds)) {
                    Some(t) => n = n.saturating_mul(t),
                    None => sym.push(trip_formula(k, a)),
                },
                OpKind::While { .. } => return (None, None),
                _ => {}
            }
        }
        sym.sort();
        let c = terms.entry(sym).or_insert(0);
        *c = c.saturating_add(n);
    }
    if terms.keys().all(|f| f.is_empty()) {
        return (Some(terms.values().sum()), None);
    }
    let mut parts: Vec<String> = Vec::new();
    for (f, c) in terms.iter().rev() {
        let mut p: Vec<String> = Vec::new();
        if *c != 1 || f.is_empty() {
            p.push(c.to_string());
        }
        p.extend(f.iter().cloned());
        parts.push(p.join("*"));
    }
    (None, Some(parts.join(" + ")))
}

/// A `for` loop's trip count spelled with its bounds' names: `n`, `(n - 1)`,
/// `ceil((n - 0) / 64)`.
fn trip_formula(k: &Kernel, l: Op) -> String {
    let OpKind::For { lo, hi, step, .. } = &k.ops[l].kind else {
        return "?".into();
    };
    let name = |o: &Operand| match o {
        Operand::Imm(s) => s.as_i64().to_string(),
        Operand::Value(v) => k.value_names.get(*v).to_string(),
    };
    let (lo, hi, step) = (name(lo), name(hi), name(step));
    match (lo.as_str(), step.as_str()) {
        ("0", "1") => hi,
        (_, "1") => format!("({hi} - {lo})"),
        _ => format!("ceil(({hi} - {lo}) / {step})"),
    }
}

fn new_wait(k: &mut Kernel) -> Op {
    k.new_op(OpKind::SplitWait(WORKGROUP), &[], vec![])
}

/// Inserts `waitcnt dscnt(0); barrier_signal -1` at position `at` of region `r`.
fn insert_signal(k: &mut Kernel, r: Region, at: usize) {
    let d = k.new_op(OpKind::WaitCnt(vec![(Counter::DsCnt, 0)]), &[], vec![]);
    let s = k.new_op(OpKind::SplitSignal(WORKGROUP), &[], vec![]);
    k.insert_op(r, at, s);
    k.insert_op(r, at, d);
}

fn is_dscnt0(k: &Kernel, op: Op) -> bool {
    k.ops[op].kind == OpKind::WaitCnt(vec![(Counter::DsCnt, 0)])
}

fn slide(k: &mut Kernel, r: Region, memo: &mut HashMap<Op, bool>) {
    let mut ops = k.region_ops(r).to_vec();
    // Signals (with their dscnt wait) move up.
    let mut i = 0;
    while i < ops.len() {
        if k.ops[ops[i]].kind == OpKind::SplitSignal(WORKGROUP) && i > 0 && is_dscnt0(k, ops[i - 1])
        {
            let mut j = i - 1;
            while j > 0 && !pinned(k, ops[j - 1], memo) {
                j -= 1;
            }
            if j < i - 1 {
                let d = ops.remove(i - 1);
                let s = ops.remove(i - 1);
                ops.insert(j, s);
                ops.insert(j, d);
            }
        }
        i += 1;
    }
    // Waits move down (not past a yield: it ends the region).
    let mut i = ops.len();
    while i > 0 {
        i -= 1;
        if k.ops[ops[i]].kind == OpKind::SplitWait(WORKGROUP) {
            let mut j = i;
            while j + 1 < ops.len()
                && !pinned(k, ops[j + 1], memo)
                && !matches!(k.ops[ops[j + 1]].kind, OpKind::Yield(_))
            {
                j += 1;
            }
            if j > i {
                let w = ops.remove(i);
                ops.insert(j, w);
            }
        }
    }
    k.set_region_ops(r, ops);
}

/// Pairs written, phases executed and, for each signal, the ops up to the next wait in program
/// order.
pub fn stats(k: &Kernel, bounds: &HashMap<String, i64>) -> SplitStats {
    let order = k.ops_in_order();
    let (phases, phases_formula) = phases(k, bounds);
    let mut s = SplitStats {
        phases,
        phases_formula,
        ..Default::default()
    };
    for (i, &op) in order.iter().enumerate() {
        if k.ops[op].kind == OpKind::SplitSignal(WORKGROUP) {
            s.pairs += 1;
            let gap = order[i + 1..]
                .iter()
                .position(|&o| k.ops[o].kind == OpKind::SplitWait(WORKGROUP))
                .unwrap_or(order.len() - i - 1);
            s.slack.push(gap);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::uniformity;
    use crate::check::protocol::check_protocol;
    use crate::ir::text::print_kernel;
    use crate::reader::parse_kernel;

    fn lower(src: &str) -> (Kernel, SplitStats) {
        let k = parse_kernel(src).expect("parses");
        let u = uniformity::analyze(&k);
        let (out, st) = lower_to_split(&k, &|o: &Operand| !u.operand_uniform(o), &HashMap::new(), None);
        assert!(
            crate::verify::verify(&out).is_empty(),
            "{}",
            print_kernel(&out)
        );
        let p = check_protocol(&out, 32);
        assert!(p.is_empty(), "{p:?}\n{}", print_kernel(&out));
        // Round-trips through the printer.
        let again = parse_kernel(&print_kernel(&out)).expect("reparses");
        assert_eq!(print_kernel(&again), print_kernel(&out));
        (out, st)
    }

    #[test]
    fn straight_line_barrier_gains_the_register_work_between_store_and_load() {
        let (k, st) = lower(
            "kernel @k(%A: global f32[64]) block(64) {\n shared @s : f32[64]\n %t = tid.x\n %x = gload %A[%t]\n store @s[%t], %x\n barrier\n %u = add %t, 1\n %v = rem %u, 64\n %y = load @s[%v]\n}",
        );
        let text = print_kernel(&k);
        let sig = text.find("barrier_signal -1").expect("signal");
        let dscnt = text.find("waitcnt dscnt(0)").expect("dscnt");
        let wait = text.find("barrier_wait -1").expect("wait");
        let store = text.find("store @s").expect("store");
        let load = text.find("load @s[%v]").expect("load");
        assert!(
            store < dscnt && dscnt < sig && sig < wait && wait < load,
            "{text}"
        );
        assert_eq!(st.pairs, 1);
        assert_eq!(
            st.slack,
            vec![2],
            "the add and rem run between signal and wait\n{text}"
        );
    }

    #[test]
    fn barrier_at_loop_top_is_rotated_across_the_back_edge() {
        let (k, st) = lower(
            "kernel @k() block(64) {\n shared @s : f32[64]\n %t = tid.x\n for %i = 0 to 4 step 1 {\n barrier\n %u = add %t, %i\n %v = rem %u, 64\n %y = load @s[%v]\n store @s[%t], %y\n %z = add %t, 3\n }\n}",
        );
        let text = print_kernel(&k);
        assert_eq!(st.pairs, 2, "{text}");
        assert_eq!(text.matches("barrier_wait -1").count(), 2, "{text}");
        // The end-of-body signal moves above the trailing add; the top wait moves below the index math.
        let body = &text[text.find("for %i").expect("loop")..];
        let w = body.find("barrier_wait -1").expect("wait");
        let l = body.find("load @s").expect("load");
        let rem = body.find("rem %u").expect("rem");
        assert!(rem < w && w < l, "{text}");
        let s = body.find("barrier_signal -1").expect("signal");
        let z = body.find("%z = add").expect("z");
        let st_ = body.find("store @s").expect("store");
        assert!(st_ < s && s < z, "{text}");
    }

    #[test]
    fn barriers_next_to_a_rotated_loop_are_absorbed_by_its_pairs() {
        // Before the loop: the pre-loop signal orders what precedes it; after the loop: the
        // post-loop wait orders what follows. A vmcnt wait in between keeps its barrier.
        let (k, st) = lower(
            "kernel @k(%A: global f32[64]) block(64) {\n shared @s : f32[64]\n %t = tid.x\n store @s[%t], 1.0\n barrier\n %q = add %t, 1\n for %i = 0 to 4 step 1 {\n barrier\n %u = add %t, %i\n %v = rem %u, 64\n %y = load @s[%v]\n store @s[%t], %y\n }\n %z = add %t, 2\n barrier\n %w = load @s[%q]\n gather_to_lds @s[%t] <- %A[%t]\n for %j = 0 to 2 step 1 {\n barrier\n %x = load @s[%t]\n }\n waitcnt vmcnt(0)\n barrier\n %x2 = load @s[%q]\n}",
        );
        let text = print_kernel(&k);
        assert_eq!(st.absorbed, 2, "{text}");
        assert_eq!(st.phases, Some(4 + 1 + 2 + 1 + 1), "{text}");
        assert_eq!(text.matches("barrier_signal -1").count(), 5, "{text}");
    }

    #[test]
    fn a_signal_with_no_lds_access_since_the_last_dscnt_wait_gets_none() {
        let (k, st) = lower(
            "kernel @k() block(64) {\n shared @s : f32[64]\n %t = tid.x\n for %i = 0 to 4 step 1 {\n barrier\n %y = load @s[%t]\n %u = add %t, %i\n %v = rem %u, 64\n barrier\n store @s[%v], %y\n barrier\n %z = add %t, 3\n }\n}",
        );
        let text = print_kernel(&k);
        // The pre-loop signal opens the kernel, and the end-of-body signal follows the third
        // barrier's dscnt wait with no access between: neither needs one.
        assert_eq!(st.dscnt_dropped, 2, "{text}");
        assert_eq!(text.matches("waitcnt dscnt(0)").count(), 2, "{text}");
    }

    #[test]
    fn halves_never_pass_a_wait_for_async_copies() {
        let (k, _) = lower(
            "kernel @k(%A: global f32[64]) block(64) {\n shared @s : f32[64]\n %t = tid.x\n gather_to_lds @s[%t] <- %A[%t]\n waitcnt vmcnt(0)\n %q = add %t, 1\n barrier\n %u = rem %q, 64\n %y = load @s[%u]\n}",
        );
        let text = print_kernel(&k);
        let vm = text.find("waitcnt vmcnt(0)").expect("vmcnt");
        let sig = text.find("barrier_signal").expect("signal");
        assert!(vm < sig, "{text}");
    }

    #[test]
    fn every_example_lowers_to_a_verified_protocol() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
        for e in std::fs::read_dir(dir).expect("examples").flatten() {
            // examples/README.md describes the kernels.
            if e.path().extension().is_none_or(|x| x != "kir") {
                continue;
            }
            let src = std::fs::read_to_string(e.path()).expect("read");
            lower(&src);
        }
    }
}
