//! Automatic waits for asynchronous copies: where a consumer may touch shared memory an
//! in-flight async access still writes (or reads), insert the weakest wait that completes it.
//!
//! **Contract.** [`plan_waits`] never mutates the kernel: it returns a [`WaitPlacement`], whose
//! plan is the placer's [`SyncPlan`]: edits sorted by program point ("insert this op before op
//! X" / "at the end of region R"), which [`crate::ir::edit::apply`] materializes. Waits
//! already in the input are respected: they are applied by the dataflow like any other op,
//! never weakened, and a wait is added only where the input's own waits leave a conflicting
//! copy in flight (so none is redundant).
//!
//! **Weakest sufficient wait.** The state before a consumer is the in-flight dataflow of
//! [`crate::analysis::inflight`]: per queue, each pending copy execution with its minimum
//! number of younger operations (counters) or younger committed groups over all paths. The
//! consumer needs exactly the pending entries its footprint may overlap
//! ([`crate::analysis::overlap`], exact for slot arithmetic like `rem k, 3` vs `rem (k+2), 3`).
//! For a count-based queue the wait is `N = min age` over the needed entries: every needed
//! entry has at least `N` younger operations on every path, so `c(N)` completes it (in-order
//! completion per counter), and any larger `N` would leave one in flight on some path. Per
//! target: `waitcnt vmcnt(N)` (gfx942/gfx950, counting plain `gload`s too), `loadcnt`,
//! `asynccnt`, `tensorcnt` (gfx12/gfx1250), `cp_async_wait N` (with a `cp_async_commit`
//! inserted first when a needed copy may be uncommitted, and after each run of copies when the
//! kernel commits none), `bulk_wait N`, `wgmma_wait N`, and `wait_tokens` for copies only a
//! token completes. Copies on different queues get independent counts in one wait. A copy
//! still outstanding when the kernel ends is drained at the end of the body.
//! TMA loads need an `mbar_wait` with the phase parity of the copy's mbarrier slot; smemsync
//! does not synthesize parities: a TMA load read before any wait completes it is reported.
//!
//! **Hoisting.** A wait whose copies were all issued before an enclosing loop was entered goes
//! before that loop (executed once, not per iteration), with the count at the loop entry; a
//! second dataflow run places it there and re-plans the rest around it.
//!
//! **Two consecutive waits** on one queue in one region, with nothing between them that
//! issues or commits on that queue, are merged into one at the earlier position with the
//! smaller count (it completes the same entries for the later consumer; one instruction
//! instead of two).
//!
//! **Waits first, then barriers.** A wait orders only the waiting thread's own copies. When a
//! consumer thread may read elements another thread's copy wrote, a barrier must follow the
//! wait: the barrier placer runs after this pass and treats each async write as a write that
//! becomes visible at the waits completing it (the `by_copy` map of
//! [`crate::analysis::inflight::completions`] on the output kernel).
//!
//! **Complexity.** One run of the in-flight dataflow (polynomial: see its module doc) plus
//! O(edits · ops) to merge and sort; no path is enumerated (seed 002's walk is: see
//! [`crate::sync::waits_paths`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::analysis::inflight::{
    Flow, FlowMemo, InFlight, Pending, Queue, Visitor, completions, queue_of,
};
use crate::analysis::overlap::IterTag;
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::text::op_label;
use crate::ir::edit::{Anchor, Edit, EditReason, ProgramPoint, SyncPlan, apply, apply_tracked};
use crate::ir::effects::WaitKind;
use crate::ir::*;
use crate::target::Target;

/// The waits (and commits) to insert, as a plan in program order (edits at one point keep
/// their order: a commit precedes the wait that needs it; each edit's reason says which
/// consumers needed it and which copy executions bound its count), and the in-flight
/// analysis's conservative answers while planning (W0314).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WaitPlacement {
    pub plan: SyncPlan,
    pub warnings: Vec<Diagnostic>,
    /// E0603: TMA loads still in flight at an `mbar_inval` or at the kernel's end
    /// (`sync::tma_unwaited`). No wait is placed for them; a caller refuses the kernel with
    /// them once its other findings are reported ([`plan_waits_memo`] at once, `sync` after
    /// barrier placement, so that a more specific finding on the same copy comes first).
    pub unwaited: Vec<Diagnostic>,
}

/// An edit inserting `kind` at `at`, for the reason `why`.
fn edit(at: ProgramPoint, kind: OpKind, why: String) -> Edit {
    Edit {
        at,
        op: kind,
        reason: EditReason::Other(why),
    }
}

/// What one consumer needs, accumulated over the solver's passes (counts only decrease).
#[derive(Clone, Debug, Default)]
struct Need {
    /// Counter queues and their counts.
    counters: BTreeMap<Queue, u32>,
    /// Group queues: (commit first, N).
    groups: BTreeMap<Queue, (bool, u32)>,
    tokens: BTreeSet<Value>,
    /// Per queue, the binding entries' descriptions.
    why: BTreeMap<Queue, String>,
}

/// Copies (with their queues) to complete before entering a loop, and the consumers inside
/// it that needed them.
type Hoist = (Vec<(Queue, Pending)>, Vec<Op>);

struct Planner {
    /// Keyed by the op the wait goes before (a consumer, or a loop a wait is hoisted out of).
    needs: BTreeMap<Op, Need>,
    diags: Vec<(Op, Op, Diagnostic)>,
    /// E0603 at `mbar_inval`s (`sync::tma_unwaited`), by (inval, copy).
    unwaited: Vec<(Op, Op, Diagnostic)>,
    /// First run: consumers whose needed copies were all issued before some enclosing loop
    /// (the outermost such loop) and the copies.
    hoistable: BTreeMap<Op, (Op, Vec<(Queue, Pending)>)>,
    /// Second run: per loop, the copies to complete before entering it, and for whom.
    hoisted: HashMap<Op, Hoist>,
    /// TMA loads whose slot reuse a cross-role handshake orders (`sync::handshake`): a refill
    /// waits on the `empty` mbarrier for consumers that waited for the previous load, so a
    /// load of the set needs no wait of its own for an earlier load of the set.
    ordered: HashSet<Op>,
}

struct NoVisit;
impl Visitor for NoVisit {}

/// Describes a pending execution relative to the consumer.
fn when(tags: &[(Op, IterTag)]) -> String {
    match tags.last() {
        None => "its last execution".into(),
        Some((_, IterTag::Dist(0))) => "this iteration".into(),
        Some((_, IterTag::Dist(1))) => "the previous iteration".into(),
        Some((_, IterTag::Dist(d))) => format!("{d} iterations back"),
        Some((_, IterTag::Pre(_))) => "before the loop".into(),
        Some((_, IterTag::PreLast(_, d))) => {
            format!("{d} iterations before the end of the loop's previous run")
        }
        Some((_, IterTag::Last(0))) => "the last iteration of an earlier loop".into(),
        Some((_, IterTag::Last(d))) => format!("{d} iterations before the end of an earlier loop"),
        Some((_, IterTag::Unknown)) => "an earlier iteration".into(),
    }
}

fn in_scope(flow: &Flow<'_>, def: Op, user: Op) -> bool {
    let p = &flow.overlap.parents;
    let k = flow.k;
    let mut def_regions = Vec::new();
    let mut r = p.op_region[def];
    while let Some(reg) = r {
        def_regions.push(reg);
        match p.region_op[reg] {
            Some(o) if matches!(k.ops[o].kind, OpKind::Stage { .. }) => r = p.op_region[o],
            _ => break,
        }
    }
    let mut r = p.op_region[user];
    while let Some(reg) = r {
        if def_regions.contains(&reg) {
            return true;
        }
        r = p.region_op[reg].and_then(|o| p.op_region[o]);
    }
    false
}

impl Visitor for Planner {
    fn modifies_states(&self) -> bool {
        true
    }

    fn loop_pass(&mut self, flow: &mut Flow<'_>, l: Op) {
        // Needs recorded in an earlier pass over this loop may be stale: recompute them.
        let inside: Vec<Op> = self
            .needs
            .keys()
            .copied()
            .filter(|o| flow.loops_of(*o).contains(&l))
            .collect();
        for o in &inside {
            self.needs.remove(o);
            self.hoistable.remove(o);
        }
        self.diags.retain(|(c, _, _)| !inside.contains(c));
    }

    fn enter_loop(&mut self, flow: &mut Flow<'_>, l: Op, states: &mut [InFlight]) {
        let Some((copies, consumers)) = self.hoisted.get(&l).cloned() else {
            return;
        };
        let mut need = Need::default();
        for st in states.iter() {
            for (q, e, a) in st.iter() {
                if a < 0 || !copies.contains(&(q, flow.pending(e))) {
                    continue;
                }
                let n = a as u32;
                match q {
                    Queue::Counter(_) => {
                        let e = need.counters.entry(q).or_insert(n);
                        *e = (*e).min(n);
                    }
                    _ => {
                        let e = need.groups.entry(q).or_insert((false, n));
                        e.1 = e.1.min(n);
                    }
                }
            }
        }
        for (q, n) in need
            .counters
            .iter()
            .chain(need.groups.iter().map(|(q, (_, n))| (q, n)))
        {
            let list: Vec<String> = consumers.iter().map(|&c| op_label(flow.k, c)).collect();
            need.why.insert(
                *q,
                format!(
                    "{} N={n}: hoisted out of the loop (executed once instead of every iteration): {} read copies issued before the loop",
                    q.name(),
                    list.join(", ")
                ),
            );
        }
        if need.counters.is_empty() && need.groups.is_empty() {
            return;
        }
        for st in states.iter_mut() {
            for (w, _) in need_to_waits(&need) {
                flow.wait(l, &w, st, &mut NoVisit);
            }
        }
        let e = self.needs.entry(l).or_default();
        e.counters.extend(need.counters);
        e.groups.extend(need.groups);
        e.why.extend(need.why);
    }

    fn before(&mut self, flow: &mut Flow<'_>, op: Op, states: &mut [InFlight]) {
        // An invalidated mbarrier must have no TMA load left to complete on it.
        if matches!(flow.k.ops[op].kind, OpKind::MbarInval { .. }) {
            let found = super::tma_unwaited::at_inval(flow, op, states);
            self.unwaited.extend(found.into_iter().map(|(c, d)| (op, c, d)));
        }
        // Every class of paths executes the same wait: its count serves them all (the
        // minimum over their needed entries' ages).
        let mut conflicts = Vec::new();
        for st in states.iter() {
            conflicts.extend(flow.conflicts(op, st));
        }
        if conflicts.is_empty() {
            return;
        }
        let mut by_q: BTreeMap<Queue, Vec<(Pending, i32)>> = BTreeMap::new();
        for (q, p, a) in conflicts {
            by_q.entry(q).or_default().push((p, a));
        }
        if let Some(h) = hoistable(flow, op, &by_q) {
            self.hoistable.insert(op, h);
        }
        // A consumer visited twice in one pass (a `while` condition) keeps the stronger need.
        let mut need = self.needs.remove(&op).unwrap_or_default();
        for (q, list) in by_q {
            match q {
                Queue::Counter(c) => counter_need(flow, c, &list, &mut need),
                Queue::CpAsync | Queue::Bulk | Queue::Wgmma => group_need(flow, q, &list, &mut need),
                Queue::Token => self.token_need(flow, op, &list, &mut need),
                Queue::Mbarrier => self.mbarrier_findings(flow, op, &list),
            }
        }
        self.needs.insert(op, need.clone());
        for st in states.iter_mut() {
            for (w, commits) in need_to_waits(&need) {
                for c in &commits {
                    commit_state(st, *c);
                }
                flow.wait(op, &w, st, &mut NoVisit);
            }
        }
    }
}

impl Planner {
    /// The tokens of the needed copies a `wait_tokens` can name here (issued in this
    /// iteration of every enclosing loop, their token in scope); the others are findings.
    fn token_need(&mut self, flow: &mut Flow<'_>, op: Op, list: &[(Pending, i32)], need: &mut Need) {
        for (p, _) in list {
            let xl = flow.loops_of(p.op);
            let recent = xl.iter().all(|l| {
                p.tags
                    .iter()
                    .any(|(tl, tg)| tl == l && *tg == IterTag::Dist(0))
            });
            match flow.k.ops[p.op].results.first() {
                Some(t) if recent && in_scope(flow, p.op, op) => {
                    need.tokens.insert(*t);
                }
                _ => self.diags.push((
                    op,
                    p.op,
                    Diagnostic::error(DiagKind::Finding, "E0601", "a shared access may observe an in-flight async copy that no wait can name here")
                        .with_label(flow.k.span(op), "this access may observe the copy")
                        .with_label(flow.k.span(p.op), "copy issued here (give it a token and wait for it)"),
                )),
            }
        }    }

    /// Findings for TMA loads read before a wait on their mbarrier phase, except between
    /// loads whose slot reuse a placed handshake orders (`ordered`).
    fn mbarrier_findings(&mut self, flow: &mut Flow<'_>, op: Op, list: &[(Pending, i32)]) {
        // A refill whose copy `mbar_protocol` showed issued after the slot's earlier copies
        // completed (`FlowMemo::serial_loads`: J1b's prologue load and its steady refill).
        let list: Vec<(Pending, i32)> = (list.iter()).filter(|(p, _)| !flow.serial_loads(p.op, op)).cloned().collect();
        let list = &list[..];
        if list.is_empty() {
            return;
        }
        if self.ordered.contains(&op) && list.iter().all(|(p, _)| self.ordered.contains(&p.op)) {
            return;
        }
        let help = suggest_mbar_wait(flow, op, list).unwrap_or_else(|| {
            "insert `mbar_wait` on the copy's mbarrier slot with its phase parity before the access".into()
        });
        for (p, _) in list {
            let mut d = Diagnostic::error(DiagKind::Finding, "E0602", "a shared access may observe a TMA load whose mbarrier phase is not waited for")
                .with_label(flow.k.span(op), "this access may observe the copy")
                .with_label(flow.k.span(p.op), "TMA load issued here")
                .with_help(help.clone());
            if let Some(note) = guarded_wait_note(flow, op, p.op) {
                d = d.with_note(note);
            }
            self.diags.push((op, p.op, d));
        }    }
}

/// A note naming a wait on TMA load `copy`'s mbarrier that runs under a guard the access
/// `op` is not under and that `analysis::guards` does not show to hold on every execution:
/// such a wait completes the copy only on the paths that run it (docs/async.md, "Guards that
/// always hold").
fn guarded_wait_note(flow: &Flow<'_>, op: Op, copy: Op) -> Option<String> {
    let k = flow.k;
    let OpKind::TmaLoad { mbar, .. } = &k.ops[copy].kind else { return None };
    let parents = k.parents();
    let op_anc = parents.ancestors(op);
    let mut found = None;
    k.walk(|w| {
        if found.is_some() || !matches!(&k.ops[w].kind, OpKind::MbarWait { mbar: m, .. } if m == mbar) {
            return;
        }
        let guard = parents.ancestors(w).into_iter().find(|&g| {
            matches!(k.ops[g].kind, OpKind::If { .. })
                && !op_anc.contains(&g)
                && !crate::analysis::guards::always_then(k, flow.overlap.ranges(), g)
        });
        found = guard.map(|g| (w, g));
    });
    let (w, g) = found?;
    let cond = match &k.ops[g].kind {
        OpKind::If { cond: Operand::Value(c) } => format!("%{}", k.value_name(*c)),
        _ => "a constant".into(),
    };
    Some(format!(
        "{} runs only under `if {}`, whose condition is not shown to hold on every execution (smemsync reads a guard as absent only where the value ranges prove it always true): the wait is not taken for the paths that skip it",
        op_label(k, w),
        cond
    ))
}

/// The loop a consumer's wait can be hoisted out of, with the needed copies as they are
/// before the loop is entered: the outermost enclosing loop for which every needed copy is
/// counted, committed, and was issued before the loop was entered.
fn hoistable(
    flow: &mut Flow<'_>,
    op: Op,
    by_q: &BTreeMap<Queue, Vec<(Pending, i32)>>,
) -> Option<(Op, Vec<(Queue, Pending)>)> {
    let loops = flow.loops_of(op);
    let mut out_of = None;
    for l in loops.iter().rev() {
        // Issued before `l` was entered: tagged `Pre(j)` on it, or `Unknown` once `j`
        // saturated (a copy outside `l` gets no other tag on it).
        let all_pre = by_q.iter().all(|(q, list)| {
            q.counted()
                && list.iter().all(|(p, a)| {
                    *a >= 0
                        && !flow.loops_of(p.op).contains(l)
                        && p.tags.iter().any(|(tl, tg)| {
                            tl == l && matches!(tg, IterTag::Pre(_) | IterTag::Unknown)
                        })
                })
        });
        if !all_pre {
            break;
        }
        out_of = Some(*l);
    }
    let l = out_of?;
    // The entries as they are before `l` is entered: without the tags of `l` and the
    // loops inside it.
    let inner: Vec<Op> = loops.iter().skip_while(|x| **x != l).copied().collect();
    let copies = by_q
        .iter()
        .flat_map(|(q, list)| {
            list.iter().map(|(p, _)| {
                let tags = p
                    .tags
                    .iter()
                    .filter(|(tl, _)| !inner.contains(tl))
                    .copied()
                    .collect();
                (*q, Pending { op: p.op, tags })
            })
        })
        .collect();
    Some((l, copies))
}

/// The count a counter wait needs for the listed entries (the smallest age), and why.
fn counter_need(flow: &Flow<'_>, c: Counter, list: &[(Pending, i32)], need: &mut Need) {
    let q = Queue::Counter(c);
    let n = list.iter().map(|(_, a)| *a).min().unwrap_or(0).max(0) as u32;
    let e = need.counters.entry(q).or_insert(n);
    *e = (*e).min(n);
    let binding: Vec<String> = list
        .iter()
        .filter(|(_, a)| *a as u32 == *e)
        .map(|(p, _)| format!("{} from {}", op_label(flow.k, p.op), when(&p.tags)))
        .collect();
    need.why.insert(
        q,
        format!(
            "{}({}): needs {} which has only {} younger {} ops on some path, so {} is the largest count that completes it",
            c.name(),
            e,
            binding.join(", "),
            e,
            c.name(),
            e
        ),
    );}

/// The count (and whether a commit must come first) a group wait needs, and why.
fn group_need(flow: &Flow<'_>, q: Queue, list: &[(Pending, i32)], need: &mut Need) {
    let commit = list.iter().any(|(_, a)| *a < 0);
    let n = list
        .iter()
        .map(|(_, a)| if commit { *a + 1 } else { *a })
        .min()
        .unwrap_or(0)
        .max(0) as u32;
    let e = need.groups.entry(q).or_insert((commit, n));
    e.0 |= commit;
    e.1 = e.1.min(n);
    let binding: Vec<String> = list
        .iter()
        .map(|(p, _)| format!("{} from {}", op_label(flow.k, p.op), when(&p.tags)))
        .collect();
    need.why.insert(
        q,
        format!(
            "{} N={}: needs {}{}",
            q.name(),
            e.1,
            binding.join(", "),
            if e.0 {
                " (uncommitted: commit first)"
            } else {
                ""
            }
        ),
    );}

/// The wait a consumer needs for TMA loads, spelled out, when the pattern is nvFuser's circular
/// buffer: the loads inside the consumer's innermost loop complete on slot `rem X, S` of an
/// array of `S` mbarriers, with `X` affine in the induction variable; the load read here was
/// issued `d` iterations earlier, so its slot is `(X - K) mod S` and its phase parity
/// `((X - K) div S) mod 2` with `K = d · step · dX/dk`. Straight-line loads of a slot never
/// waited on before are in its first phase (parity 0). smemsync does not insert these ops
/// itself (they define values, which waits inserted as edits cannot); it says what to write.
fn suggest_mbar_wait(flow: &mut Flow<'_>, consumer: Op, list: &[(Pending, i32)]) -> Option<String> {
    let k = flow.k;
    let (p0, _) = list.first()?;
    let OpKind::TmaLoad {
        mbar, mbar_index, ..
    } = &k.ops[p0.op].kind
    else {
        return None;
    };
    let MemRef::Buffer(mb) = *mbar else {
        return None;
    };
    k.buffers[mb].shape.first()?;
    let loops = flow.loops_of(consumer);
    match loops.last() {
        None => first_phase_wait(flow, consumer, mb, mbar_index),
        Some(&l) => loop_phase_wait(flow, l, list, mb),
    }
}

/// [`suggest_mbar_wait`] for a consumer outside loops: the slot's first phase, if no wait on
/// this mbarrier array precedes the consumer.
fn first_phase_wait(
    flow: &Flow<'_>,
    consumer: Op,
    mb: Buffer,
    mbar_index: &[Operand],
) -> Option<String> {
    let k = flow.k;
    let (mbar, name) = (MemRef::Buffer(mb), &k.buffers[mb].name);
    let idx = mbar_index
        .first()
        .and_then(|o| flow.overlap.eval_at(*o, &HashMap::new(), 0))?;
    let before = k
        .ops_in_order()
        .into_iter()
        .take_while(|o| *o != consumer)
        .any(|o| matches!(&k.ops[o].kind, OpKind::MbarWait { mbar: m, .. } if *m == mbar));
    if before {
        return None;
    }
    Some(format!(
        "insert before the access (the slot's first phase has parity 0):\n  %mb_par = const 0 : i32\n  mbar_wait @{name}[{idx}], %mb_par"
    ))
}

/// [`suggest_mbar_wait`] for a consumer in loop `l`: the slot and parity of the load read
/// here, `d` iterations back, on the array `mb` of mbarriers.
fn loop_phase_wait(
    flow: &mut Flow<'_>,
    l: Op,
    list: &[(Pending, i32)],
    mb: Buffer,
) -> Option<String> {
    let k = flow.k;
    let slots = *k.buffers[mb].shape.first()? as i64;
    let name = &k.buffers[mb].name;
    // The most recent load of the loop that this access needs.
    let d = list
        .iter()
        .filter_map(|(p, _)| match p.tags.iter().find(|(tl, _)| *tl == l) {
            Some((_, IterTag::Dist(d))) if flow.loops_of(p.op).contains(&l) => Some(*d),
            _ => None,
        })
        .min()?;
    let copy = list
        .iter()
        .find(|(p, _)| flow.loops_of(p.op).contains(&l))?
        .0
        .op;
    let OpKind::TmaLoad { mbar_index: ci, .. } = &k.ops[copy].kind else {
        return None;
    };
    let Some(Operand::Value(iv_slot)) = ci.first().copied() else {
        return None;
    };
    let ValueDef::Result(rem_op, _) = k.values[iv_slot].def else {
        return None;
    };
    let OpKind::Binary(BinOp::Rem, Operand::Value(x), m) = k.ops[rem_op].kind else {
        return None;
    };
    if flow.overlap.eval_at(m, &HashMap::new(), 0) != Some(slots) {
        return None;
    }
    let OpKind::For { step, .. } = &k.ops[l].kind else {
        return None;
    };
    let step = flow.overlap.eval_at(*step, &HashMap::new(), 0)?;
    let body = k.ops[l].regions[0];
    let iv = *k.region_args(body).first()?;
    let at = |v: i64| {
        flow.overlap
            .eval_at(Operand::Value(x), &HashMap::from([(iv, v)]), 0)
    };
    let (x0, x1, x2) = (at(0)?, at(1)?, at(2)?);
    if x2 - x1 != x1 - x0 {
        return None;
    }
    let kk = (x1 - x0) * step * d as i64;
    let xn = match k.value_name(x) {
        n if n.starts_with('%') => n,
        n => format!("%{n}"),
    };
    Some(format!(
        "insert before the access (the load read here was issued {d} iteration(s) earlier, on slot ({xn} - {kk}) mod {slots}, in phase ({xn} - {kk}) div {slots}):\n  %mb_x = sub {xn}, {kk}\n  %mb_slot = rem %mb_x, {slots}\n  %mb_ph = div %mb_x, {slots}\n  %mb_par = rem %mb_ph, 2\n  mbar_wait @{name}[%mb_slot], %mb_par"
    ))
}

fn commit_state(st: &mut InFlight, q: Queue) {
    st.add_to_ages(q, 1);
}

/// The waits (with the commits that must precede them) a need stands for.
fn need_to_waits(n: &Need) -> Vec<(WaitKind, Vec<Queue>)> {
    let mut out = Vec::new();
    if !n.counters.is_empty() {
        out.push((
            WaitKind::Counters(
                n.counters
                    .iter()
                    .filter_map(|(q, v)| match q {
                        Queue::Counter(c) => Some((*c, *v)),
                        _ => None,
                    })
                    .collect(),
            ),
            vec![],
        ));
    }
    for (q, (commit, v)) in &n.groups {
        let w = match q {
            Queue::CpAsync => WaitKind::CpAsyncGroups(*v),
            Queue::Bulk => WaitKind::BulkGroups(*v),
            _ => WaitKind::WgmmaGroups(*v),
        };
        out.push((w, if *commit { vec![*q] } else { vec![] }));
    }
    if !n.tokens.is_empty() {
        out.push((WaitKind::Tokens(n.tokens.iter().copied().collect()), vec![]));
    }
    out
}

fn commit_kind(q: Queue) -> OpKind {
    match q {
        Queue::CpAsync => OpKind::CpAsyncCommit,
        Queue::Bulk => OpKind::BulkCommit,
        _ => OpKind::WgmmaCommit,
    }
}

fn wait_kind_op(w: &WaitKind) -> OpKind {
    match w {
        WaitKind::Counters(c) => OpKind::WaitCnt(c.clone()),
        WaitKind::CpAsyncGroups(n) => OpKind::CpAsyncWait(*n),
        WaitKind::BulkGroups(n) => OpKind::BulkWait(*n),
        WaitKind::WgmmaGroups(n) => OpKind::WgmmaWait(*n),
        WaitKind::Tokens(t) => OpKind::WaitTokens(t.clone()),
    }
}

/// Whether an op issues or commits on a queue, or ticks its counter (recursively).
fn touches_queue(k: &Kernel, target: &Target, op: Op, q: Queue) -> bool {
    if let Some((oq, _)) = queue_of(k, target, op)
        && oq == q
    {
        return true;
    }
    let od = &k.ops[op];
    let own = match (&od.kind, q) {
        (OpKind::GLoad { .. }, Queue::Counter(c)) => target.global_load_counter() == Some(c),
        (OpKind::CpAsyncCommit, Queue::CpAsync)
        | (OpKind::BulkCommit, Queue::Bulk)
        | (OpKind::WgmmaCommit, Queue::Wgmma) => true,
        _ => false,
    };
    own || od.regions.iter().any(|r| {
        k.region_ops(*r)
            .iter()
            .any(|o| touches_queue(k, target, *o, q))
    })
}

/// Inserts commits after each run of group copies of a class the kernel never commits.
fn auto_commits(k: &Kernel, target: &Target) -> Vec<Edit> {
    let mut edits = Vec::new();
    for q in [Queue::CpAsync, Queue::Bulk, Queue::Wgmma] {
        let ops = k.ops_in_order();
        let issues = ops
            .iter()
            .any(|o| queue_of(k, target, *o).map(|(x, _)| x) == Some(q));
        let commits = ops.iter().any(|o| k.ops[*o].kind == commit_kind(q));
        if !issues || commits {
            continue;
        }
        for (r, rd) in k.regions().iter() {
            // The destination of the open run: a run is the copies of one stage into one
            // slot (same memref, same leading index); a different slot starts a new group.
            let mut pending: Option<Op> = None;
            let why = || format!("closes the {} of the copies just issued", q.name());
            for &o in rd.ops() {
                let is_issue = queue_of(k, target, o).map(|(x, _)| x) == Some(q);
                let pure = effects(k, o) == Effects::default()
                    && k.ops[o].regions.is_empty()
                    && !matches!(k.ops[o].kind, OpKind::Yield(_) | OpKind::Condition(_));
                if is_issue {
                    if let Some(prev) = pending
                        && !same_slot(k, prev, o)
                    {
                        edits.push(edit(ProgramPoint::before(o), commit_kind(q), why()));
                    }
                    pending = Some(o);
                } else if pending.is_some() && !pure {
                    edits.push(edit(ProgramPoint::before(o), commit_kind(q), why()));
                    pending = None;
                }
            }
            if pending.is_some() {
                edits.push(edit(ProgramPoint::end(r), commit_kind(q), why()));
            }
        }
    }
    edits
}

/// Whether two group copies write the same slot (same memref and leading index operand).
fn same_slot(k: &Kernel, a: Op, b: Op) -> bool {
    let (ea, eb) = (effects(k, a).shared, effects(k, b).shared);
    match (ea.first(), eb.first()) {
        (Some(x), Some(y)) => {
            let lead = |f: &Footprint| match f {
                Footprint::PerThread(ix) => ix.first().copied(),
                Footprint::Collective { .. } => None,
            };
            x.mem == y.mem && lead(&x.footprint) == lead(&y.footprint)
        }
        _ => false,
    }
}

/// Plans the waits a kernel needs on a target. Returns the edits, or the findings no wait
/// can fix (a TMA load read before its mbarrier is waited on, a tokenless copy).
pub fn plan_waits(k: &Kernel, target: &Target) -> Result<WaitPlacement, Vec<Diagnostic>> {
    plan_waits_memo(k, target, &mut FlowMemo::for_kernel(k))
}

/// [`plan_waits`] whose dataflow runs read and grow `memo` (a memo of `k` or of a kernel `k`
/// was derived from by inserting sync ops: see [`FlowMemo`]); the caller passes it on to the
/// placements of the kernel with its waits.
pub fn plan_waits_memo(
    k: &Kernel,
    target: &Target,
    memo: &mut FlowMemo,
) -> Result<WaitPlacement, Vec<Diagnostic>> {
    let p = plan_waits_ordered(k, target, memo, &HashSet::new())?;
    if p.unwaited.is_empty() { Ok(p) } else { Err(p.unwaited) }
}

/// [`plan_waits_memo`] with the TMA loads whose reuse a placed handshake orders
/// (`sync::handshake::Handshakes::ordered_tma`).
pub fn plan_waits_ordered(
    k: &Kernel,
    target: &Target,
    memo: &mut FlowMemo,
    ordered: &HashSet<Op>,
) -> Result<WaitPlacement, Vec<Diagnostic>> {
    // Nothing is ever in flight without an op that issues an async access: no commit, no
    // wait, no finding (the in-flight dataflow and a copy of the kernel were 15% of `sync` on
    // a generated kernel of 10^5 ops without copies).
    if !may_issue_async(k) {
        return Ok(WaitPlacement::default());
    }
    let base = auto_commits(k, target);
    let loop_commits = loop_end_commits(k, target);
    if !loop_commits.is_empty() {
        // Try the loop-end commits on a copy of the memo; keep them only when the plan with
        // them inserts fewer ops (both plans are planned, so both are sound). The findings of
        // the plan without them are never dropped.
        let mut tried_memo = memo.clone();
        let tried = [base.clone(), loop_commits].concat();
        if let Ok(p) = plan_with_commits(k, target, &mut tried_memo, ordered, tried) {
            let mut base_memo = memo.clone();
            let b = plan_with_commits(k, target, &mut base_memo, ordered, base);
            if let Ok(b) = &b
                && b.plan.edits.len() > p.plan.edits.len()
            {
                *memo = tried_memo;
                return Ok(p);
            }
            *memo = base_memo;
            return b;
        }
    }
    plan_with_commits(k, target, memo, ordered, base)
}

/// Commits at the end of each loop body that issues group copies of a queue the kernel
/// commits elsewhere but never inside that body (F6: a double-buffered loop whose prefetch is
/// closed by no commit, so its use in the next iteration would need a commit and a wait of its
/// own, and the kernel's end another pair). Closing the iteration's copies at the end of the
/// body lets the user's own wait at the top of the next iteration complete them. Only a
/// candidate: [`plan_waits_ordered`] keeps these commits when the plan with them is smaller.
/// Kernels that commit none of a queue get [`auto_commits`] instead.
fn loop_end_commits(k: &Kernel, target: &Target) -> Vec<Edit> {
    let mut edits = Vec::new();
    let ops = k.ops_in_order();
    for q in [Queue::CpAsync, Queue::Bulk, Queue::Wgmma] {
        let issues = |o: &Op| queue_of(k, target, *o).map(|(x, _)| x) == Some(q);
        let commits = |o: &Op| k.ops[*o].kind == commit_kind(q);
        if !ops.iter().any(commits) {
            continue;
        }
        for &l in ops.iter() {
            if !matches!(k.ops[l].kind, OpKind::For { .. } | OpKind::While { .. }) {
                continue;
            }
            let body = *k.ops[l].regions.last().expect("a loop owns its body");
            if any_within(k, l, &issues) && !any_within(k, l, &commits) {
                let why = format!(
                    "closes the {} holding the copies this iteration issued, which no commit in the loop closed (a copy never committed before its use)",
                    q.name()
                );
                edits.push(edit(ProgramPoint::end(body), commit_kind(q), why));
            }
        }
    }
    edits
}

/// Whether some op inside `op`'s regions (at any depth) satisfies `f`.
fn any_within(k: &Kernel, op: Op, f: &dyn Fn(&Op) -> bool) -> bool {
    k.ops[op]
        .regions
        .iter()
        .any(|r| k.region_ops(*r).iter().any(|o| f(o) || any_within(k, *o, f)))
}

/// [`plan_waits_ordered`] with the commits `commit_edits` inserted before planning (kept in
/// the plan).
fn plan_with_commits(
    k: &Kernel,
    target: &Target,
    memo: &mut FlowMemo,
    ordered: &HashSet<Op>,
    commit_edits: Vec<Edit>,
) -> Result<WaitPlacement, Vec<Diagnostic>> {
    let commits = SyncPlan {
        edits: commit_edits,
    };
    let kb = apply(k, &commits).map_err(|d| vec![d])?;
    let mut flow = Flow::with_memo(&kb, target, std::mem::take(memo));
    let (pl, exit) = run_planner(&mut flow, ordered);
    if !pl.diags.is_empty() {
        let mut seen = BTreeSet::new();
        let mut d: Vec<Diagnostic> = pl
            .diags
            .into_iter()
            .filter(|(a, _, d)| seen.insert((*a, d.code)))
            .map(|(_, _, d)| d)
            .collect();
        // A refusal that rests on a conservative in-flight answer says so (W0314): the
        // mbarrier queue's E0602 has no wait to place that would have carried the note.
        d.extend(flow.overlap.conservative_warnings());
        return Err(d);
    }
    let mut edits = commits.edits;
    for (op, need) in &pl.needs {
        let why = need.why.values().cloned().collect::<Vec<_>>().join("; ");
        push_waits(&mut edits, ProgramPoint::before(*op), need, |c| {
            format!("closes the {} holding copies the next op needs", c.name())
        }, &why);
    }
    // Drain what is still outstanding when the kernel ends.
    let drain = drain_need(&flow, &exit);
    let at_end = super::tma_unwaited::at_exit(&flow, &exit);
    let warnings = flow.overlap.conservative_warnings();
    *memo = flow.into_memo();
    push_waits(
        &mut edits,
        ProgramPoint::end(k.body()),
        &drain,
        |_| "closes the last group before the kernel ends".into(),
        "drains the copies still outstanding when the kernel ends (the largest count that completes them all)",
    );
    let mut plan = SyncPlan { edits };
    merge_consecutive(k, target, &mut plan);
    plan.sort(k);
    // TMA loads no wait completes before an `mbar_inval` or the kernel's end (E0603).
    let mut unwaited = Vec::new();
    for (_, _, d) in pl.unwaited.into_iter().chain(at_end.into_iter().map(|(c, d)| (c, c, d))) {
        if !unwaited.contains(&d) {
            unwaited.push(d);
        }
    }
    Ok(WaitPlacement { plan, warnings, unwaited })
}

/// Whether some op of `k` (placed or not) may issue an async access: a copy or a wgmma, the
/// op families whose effects hold one (`analysis::inflight::queue_of` finds a queue for no
/// other op, so without them every in-flight state stays empty).
fn may_issue_async(k: &Kernel) -> bool {
    k.ops.values().any(|od| {
        matches!(
            od.kind.signature().family,
            crate::ir::Family::Copy | crate::ir::Family::Wgmma
        )
    })
}

/// Runs the planner over the kernel (with its automatic commits): a first run, and when some
/// waits can be hoisted out of loops and no finding stops planning, a second run that places
/// them before those loops. Returns the planner of the last run and the state at the exit.
fn run_planner(flow: &mut Flow<'_>, ordered: &HashSet<Op>) -> (Planner, InFlight) {
    let new = |hoisted| Planner {
        needs: BTreeMap::new(),
        diags: Vec::new(),
        unwaited: Vec::new(),
        hoistable: BTreeMap::new(),
        hoisted,
        ordered: ordered.clone(),
    };
    let mut pl = new(HashMap::new());
    let exit = crate::analysis::inflight::join_all(&flow.run(&mut pl));
    // Second run: waits whose copies were all issued before an enclosing loop go before it.
    if pl.hoistable.is_empty() || !pl.diags.is_empty() {
        return (pl, exit);
    }
    let mut hoisted: HashMap<Op, Hoist> = HashMap::new();
    for (c, (l, copies)) in std::mem::take(&mut pl.hoistable) {
        let e = hoisted.entry(l).or_default();
        for x in copies {
            if !e.0.contains(&x) {
                e.0.push(x);
            }
        }
        e.1.push(c);
    }
    let mut pl = new(hoisted);
    let exit = crate::analysis::inflight::join_all(&flow.run(&mut pl));
    (pl, exit)
}

/// Appends the edits of one need at `at`: per wait, the commits that must precede it (each
/// with `commit_why` of its queue), then the wait (with `why`).
fn push_waits(
    edits: &mut Vec<Edit>,
    at: ProgramPoint,
    need: &Need,
    commit_why: impl Fn(Queue) -> String,
    why: &str,
) {
    for (w, cs) in need_to_waits(need) {
        for c in cs {
            edits.push(edit(at, commit_kind(c), commit_why(c)));
        }
        edits.push(edit(at, wait_kind_op(&w), why.to_string()));
    }
}

/// What is still outstanding when the kernel ends, as the need of a wait at its end.
fn drain_need(flow: &Flow<'_>, exit: &InFlight) -> Need {
    let kb = flow.k;
    let mut drain = Need::default();
    for (q, m) in exit.queues() {
        if m.is_empty() {
            continue;
        }
        let ages = || m.iter().map(|(_, a)| *a);
        match q {
            // The largest count that still completes every outstanding copy: younger
            // operations that are not copies (plain global loads) may stay outstanding.
            Queue::Counter(_) => {
                drain
                    .counters
                    .insert(q, ages().min().unwrap_or(0).max(0) as u32);
            }
            Queue::CpAsync | Queue::Bulk | Queue::Wgmma => {
                let commit = ages().any(|a| a < 0);
                let n = if commit {
                    0
                } else {
                    ages().min().unwrap_or(0).max(0) as u32
                };
                drain.groups.insert(q, (commit, n));
            }
            Queue::Token => {
                for p in m.iter().map(|(e, _)| flow.pending(*e)) {
                    if let Some(t) = kb.ops[p.op].results.first()
                        && p.tags.is_empty()
                        && flow.overlap.parents.op_region[p.op] == Some(kb.body())
                    {
                        drain.tokens.insert(*t);
                    }
                }
            }
            Queue::Mbarrier => {}
        }
    }
    drain
}

/// Merges a wait into an earlier one of the same kind in the same region when nothing
/// between them issues or commits on the waited queues (the earlier one, with the smaller
/// count, then completes everything the later one did).
fn merge_consecutive(k: &Kernel, target: &Target, plan: &mut SyncPlan) {
    let parents = k.parents();
    let queues_of = |kind: &OpKind| -> Vec<Queue> {
        match kind {
            OpKind::WaitCnt(cs) => cs.iter().map(|(c, _)| Queue::Counter(*c)).collect(),
            OpKind::CpAsyncWait(_) => vec![Queue::CpAsync],
            OpKind::BulkWait(_) => vec![Queue::Bulk],
            OpKind::WgmmaWait(_) => vec![Queue::Wgmma],
            _ => vec![],
        }
    };
    let mut i = 0;
    while i < plan.edits.len() {
        let Anchor::Before(b) = plan.edits[i].at.anchor else {
            i += 1;
            continue;
        };
        let qs = queues_of(&plan.edits[i].op);
        if qs.is_empty() {
            i += 1;
            continue;
        }
        let Some(r) = parents.op_region[b] else {
            i += 1;
            continue;
        };
        let ops = k.region_ops(r);
        let pos_b = ops.iter().position(|o| *o == b).unwrap_or(0);
        // Find an earlier edit of the same kind in the same region with a clean gap.
        let mut merged = false;
        for j in 0..plan.edits.len() {
            if j == i
                || std::mem::discriminant(&plan.edits[j].op)
                    != std::mem::discriminant(&plan.edits[i].op)
            {
                continue;
            }
            let Anchor::Before(a) = plan.edits[j].at.anchor else {
                continue;
            };
            let Some(pos_a) = ops.iter().position(|o| *o == a) else {
                continue;
            };
            if pos_a >= pos_b || queues_of(&plan.edits[j].op) != qs {
                continue;
            }
            // No commit edit may sit strictly between them either.
            let commit_between = plan.edits.iter().any(|e| {
                matches!(
                    e.op,
                    OpKind::CpAsyncCommit | OpKind::BulkCommit | OpKind::WgmmaCommit
                ) && matches!(e.at.anchor, Anchor::Before(o) if ops[pos_a + 1..=pos_b].contains(&o))
            });
            if commit_between
                || ops[pos_a..pos_b].iter().any(|o| {
                    touches_queue(k, target, *o, qs[0])
                        || qs.iter().any(|q| touches_queue(k, target, *o, *q))
                })
            {
                continue;
            }
            let later = plan.edits[i].clone();
            let e = &mut plan.edits[j];
            e.op = min_kind(&e.op, &later.op);
            e.reason = EditReason::Other(format!(
                "{}; and for {}: {}",
                e.reason.text(),
                op_label(k, b),
                later.reason.text()
            ));
            merged = true;
            break;
        }
        if merged {
            plan.edits.remove(i);
        } else {
            i += 1;
        }
    }
}

fn min_kind(a: &OpKind, b: &OpKind) -> OpKind {
    match (a, b) {
        (OpKind::WaitCnt(x), OpKind::WaitCnt(y)) => {
            let mut m: BTreeMap<usize, (Counter, u32)> = BTreeMap::new();
            for (c, n) in x.iter().chain(y) {
                let key = Counter::ALL.iter().position(|z| z == c).unwrap_or(0);
                let e = m.entry(key).or_insert((*c, *n));
                e.1 = e.1.min(*n);
            }
            OpKind::WaitCnt(m.into_values().collect())
        }
        (OpKind::CpAsyncWait(x), OpKind::CpAsyncWait(y)) => OpKind::CpAsyncWait(*x.min(y)),
        (OpKind::BulkWait(x), OpKind::BulkWait(y)) => OpKind::BulkWait(*x.min(y)),
        (OpKind::WgmmaWait(x), OpKind::WgmmaWait(y)) => OpKind::WgmmaWait(*x.min(y)),
        _ => a.clone(),
    }
}

/// Plans, applies and explains: the kernel with waits inserted, each wait (inserted or the
/// input's own) followed by comments saying which copies it completes, how many younger
/// operations each has at the wait on every path, and why an inserted wait has its count.
pub fn explain_waits(k: &Kernel, target: &Target) -> Result<String, Vec<Diagnostic>> {
    let plan = plan_waits(k, target)?.plan;
    let applied = apply_tracked(k, &plan).map_err(|d| vec![d])?;
    let out = &applied.kernel;
    let comp = completions(out, target);
    let mut notes: HashMap<Op, Vec<String>> = HashMap::new();
    for (e, op) in plan.edits.iter().zip(&applied.created) {
        notes
            .entry(*op)
            .or_default()
            .push(format!("inserted: {}", e.reason.text()));
    }
    for (w, list) in &comp.by_wait {
        let v = notes.entry(*w).or_default();
        if !applied.created.contains(w) {
            v.push("from the input".into());
            if let Some(n) = largest_safe_count(out, target, *w, &comp) {
                let cur = counts_of(&out.ops[*w].kind).unwrap_or(0);
                v.push(if n == cur {
                    format!("its count {cur} is the largest that keeps every later access safe")
                } else {
                    format!("a count of {n} would also be safe here (the input's {cur} waits for more than needed)")
                });
            }
        }
        for c in list {
            let name = op_label(out, c.copy);
            if c.queue.counted() {
                v.push(format!(
                    "completes {name} from {} (at least {} younger {} on every path)",
                    when(&c.tags),
                    c.age,
                    c.queue.name()
                ));
            } else {
                v.push(format!(
                    "completes {name} from {} (on its {})",
                    when(&c.tags),
                    c.queue.name()
                ));
            }
        }
    }
    for op in out.ops_in_order() {
        if matches!(effects(out, op).sync, Some(SyncEffect::Wait(_)))
            && !comp.by_wait.contains_key(&op)
        {
            notes
                .entry(op)
                .or_default()
                .push("completes no outstanding copy here".into());
        }
    }
    let notes_of = |op: Op| notes.get(&op).cloned().unwrap_or_default();
    Ok(crate::ir::text::print_kernel_annotated(out, &notes_of))
}

/// The count of a single-count wait.
fn counts_of(kind: &OpKind) -> Option<u32> {
    match kind {
        OpKind::WaitCnt(c) if c.len() == 1 => Some(c[0].1),
        OpKind::CpAsyncWait(n) | OpKind::BulkWait(n) | OpKind::WgmmaWait(n) => Some(*n),
        _ => None,
    }
}

/// The largest count a user wait could have with no access observing an in-flight copy and
/// nothing more outstanding at exit (at most 64 above its count). One dataflow per count tried.
fn largest_safe_count(
    k: &Kernel,
    target: &Target,
    w: Op,
    base: &crate::analysis::inflight::Completions,
) -> Option<u32> {
    let cur = counts_of(&k.ops[w].kind)?;
    let with = |n: u32| -> OpKind {
        match &k.ops[w].kind {
            OpKind::WaitCnt(c) => OpKind::WaitCnt(vec![(c[0].0, n)]),
            OpKind::CpAsyncWait(_) => OpKind::CpAsyncWait(n),
            OpKind::BulkWait(_) => OpKind::BulkWait(n),
            _ => OpKind::WgmmaWait(n),
        }
    };
    let mut best = cur;
    let mut m = k.clone();
    for n in cur + 1..=cur + 64 {
        m.ops[w].kind = with(n);
        let c = completions(&m, target);
        let safe = c.hazards.len() <= base.hazards.len()
            && c.outstanding_at_exit.len() <= base.outstanding_at_exit.len();
        if !safe {
            break;
        }
        best = n;
    }
    Some(best)
}
