//! Joint placement of waits and barriers: a planned wait may move up to the earliest point
//! where it still completes exactly the same copies, so that one barrier after it can also
//! serve the ordinary hazards before that point.
//!
//! **Why.** The wait planner puts each wait just before its first consumer, with the largest
//! count (`sync::waits`). Barrier placement then treats the async write as a producer at the
//! wait. In a triple-buffered loop the refill copies (WAR against the previous iteration's
//! reads) come before the consumer, so a wait after them forces a second barrier: one before
//! the refill, one after the wait. Moved above the refill (and its commit, with the count
//! lowered by one), the same wait lets one barrier serve both: `wait; barrier` per iteration.
//!
//! **Equivalent positions.** Walking up from the wait, a count wait `N` on a queue completes
//! the same copy executions one op earlier when that op is
//! - a commit of its group queue (then `N - 1`, only while `N >= 1`: the copies of the group
//!   it closes are the newest group after it, not completed by `N >= 1`, and do not exist
//!   before it), or an issue on a counter it names (likewise `N - 1`);
//! - an async issue on a group queue (uncommitted copies are never completed by a count);
//! - a plain shared access (load, store, atomic, `local_load`, `local_store`) or a block
//!   barrier: which copies a count wait completes depends only on the issues and commits of
//!   the thread's queue before it, and neither joins, closes or ticks a queue (no counter
//!   smemsync models counts plain LDS accesses); moving the wait above them only makes the
//!   copies complete before those accesses too;
//! - an op without shared-memory or synchronization effect, or a compound op whose body holds
//!   only such ops and group-queue issues.
//!
//! At the start of a `for` body the walk continues before the `for` when nothing in the body
//! issues on, commits or ticks the wait's queues, nothing in it waits, and no other planned
//! edit lies in it: the queue is then the same at the top of every iteration as before the
//! loop, so each iteration's wait completes what the wait before the loop completes (for a
//! zero-trip loop the wait before it is an extra one, which only completes copies earlier).
//! An `if` arm or a `while` loop is not left.
//!
//! Anything else (another sync, a wait, a token wait, an async issue on another condition)
//! stops the walk. Moving a wait earlier only widens the interval between the wait and each
//! consumer, so every hazard the barriers covered stays covered: placement, re-run with every
//! wait at its earliest equivalent point, needs no more barriers than with the waits where the
//! planner put them. smemsync keeps the late positions unless the early ones execute strictly
//! fewer barriers (a late wait lets the copies overlap more work).
//!
//! Complexity: O(ops) per wait for the walk (each loop left is scanned once, with the planned
//! edits), plus one extra placement when a wait can move.

use crate::analysis::inflight::{Queue, queue_of};
use crate::ir::effects::SyncEffect;
use crate::ir::*;
use crate::ir::edit::{Anchor, EditReason, ProgramPoint, SyncPlan};
use crate::target::Target;

/// The queues a count wait names, with their counts (`None` for other ops).
fn wait_counts(kind: &OpKind) -> Option<Vec<(Queue, u32)>> {
    Some(match kind {
        OpKind::CpAsyncWait(n) => vec![(Queue::CpAsync, *n)],
        OpKind::BulkWait(n) => vec![(Queue::Bulk, *n)],
        OpKind::WgmmaWait(n) => vec![(Queue::Wgmma, *n)],
        OpKind::WaitCnt(cs) => cs.iter().map(|(c, n)| (Queue::Counter(*c), *n)).collect(),
        _ => return None,
    })
}

fn with_counts(kind: &OpKind, counts: &[(Queue, u32)]) -> OpKind {
    match kind {
        OpKind::CpAsyncWait(_) => OpKind::CpAsyncWait(counts[0].1),
        OpKind::BulkWait(_) => OpKind::BulkWait(counts[0].1),
        OpKind::WgmmaWait(_) => OpKind::WgmmaWait(counts[0].1),
        OpKind::WaitCnt(cs) => OpKind::WaitCnt(
            cs.iter()
                .zip(counts)
                .map(|((c, _), (_, n))| (*c, *n))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn commit_queue(kind: &OpKind) -> Option<Queue> {
    match kind {
        OpKind::CpAsyncCommit => Some(Queue::CpAsync),
        OpKind::BulkCommit => Some(Queue::Bulk),
        OpKind::WgmmaCommit => Some(Queue::Wgmma),
        _ => None,
    }
}

/// What crossing `op` (moving a wait from after it to before it) does to the counts: `None`
/// when the wait may not cross it.
fn cross(k: &Kernel, target: &Target, op: Op, counts: &mut [(Queue, u32)]) -> Option<()> {
    let kind = &k.ops[op].kind;
    let lower = |q: Queue, counts: &mut [(Queue, u32)]| -> Option<()> {
        if let Some(e) = counts.iter_mut().find(|(x, _)| *x == q) {
            e.1 = e.1.checked_sub(1)?;
        }
        Some(())
    };
    if let Some(q) = commit_queue(kind) {
        return lower(q, counts);
    }
    if let Some((q, _)) = queue_of(k, target, op) {
        return if q.ticks_on_issue() {
            lower(q, counts)
        } else if q.counted() {
            Some(())
        } else {
            None
        };
    }
    if let OpKind::GLoad { .. } = kind
        && let Some(c) = target.global_load_counter()
    {
        return lower(Queue::Counter(c), counts);
    }
    // Past the async issues above, every shared access left is a plain one: it joins no
    // queue, so crossing it changes no count (see the module doc). Of the syncs, only a
    // block barrier is crossed: it is not an operation of any async queue either.
    match effects(k, op).sync {
        None | Some(SyncEffect::Barrier) => {}
        Some(_) => return None,
    }
    for &r in &k.ops[op].regions {
        for &o in k.region_ops(r) {
            let inner_ok = match queue_of(k, target, o) {
                Some((q, _)) => q.counted() && !q.ticks_on_issue(),
                None => {
                    commit_queue(&k.ops[o].kind).is_none()
                        && !matches!(k.ops[o].kind, OpKind::GLoad { .. })
                        && cross(k, target, o, &mut []).is_some()
                }
            };
            if !inner_ok {
                return None;
            }
        }
    }
    Some(())
}

/// What the walk of one planned wait reads: the kernel, the target, the plan and the wait's
/// index in it.
struct Walk<'a> {
    k: &'a Kernel,
    target: &'a Target,
    plan: &'a SyncPlan,
    parents: &'a Parents,
    own: usize,
}

impl Walk<'_> {
    /// Whether another planned edit is anchored before `o`: it stands between `o` and its
    /// predecessor, and the walk does not cross it (its effect on the counts is not modelled
    /// here).
    fn other_edit(&self, o: Op) -> bool {
        self.plan
            .edits
            .iter()
            .enumerate()
            .any(|(j, x)| j != self.own && x.at.anchor == Anchor::Before(o))
    }

    /// Whether the wait, at the start of the body of the `for` op `lp`, may move to just
    /// before the loop: no op anywhere in the body issues on, commits or ticks one of the
    /// wait's queues, none waits (on any queue), and no other planned edit lies inside it.
    fn leaves_loop(&self, lp: Op, counts: &[(Queue, u32)]) -> bool {
        let (k, target) = (self.k, self.target);
        if !matches!(k.ops[lp].kind, OpKind::For { .. }) || self.other_edit(lp) {
            return false;
        }
        let (mut ops, mut regions) = (Vec::new(), Vec::new());
        subtree(k, lp, &mut ops, &mut regions);
        let ours = |q: Queue| counts.iter().any(|(x, _)| *x == q);
        let touches = |o: Op| {
            let kind = &k.ops[o].kind;
            commit_queue(kind).is_some_and(ours)
                || queue_of(k, target, o).is_some_and(|(q, _)| ours(q))
                || (matches!(kind, OpKind::GLoad { .. })
                    && target
                        .global_load_counter()
                        .is_some_and(|c| ours(Queue::Counter(c))))
                || matches!(effects(k, o).sync, Some(SyncEffect::Wait(_)))
        };
        let inside = |a: Anchor| match a {
            Anchor::Before(o) | Anchor::After(o) => ops.contains(&o),
            Anchor::Start(r) | Anchor::End(r) => regions.contains(&r),
        };
        !ops.iter().any(|&o| touches(o))
            && !self
                .plan
                .edits
                .iter()
                .enumerate()
                .any(|(j, x)| j != self.own && inside(x.at.anchor))
    }

    /// The earliest equivalent position of the wait planned at `anchor` (before the returned
    /// op) and its counts there, or `None` when it cannot move.
    fn earliest(&self, anchor: Anchor, mut counts: Vec<(Queue, u32)>) -> Option<(Op, Vec<(Queue, u32)>)> {
        let k = self.k;
        let (mut region, mut at) = match anchor {
            Anchor::Before(op) => {
                let r = self.parents.op_region[op]?;
                (r, k.region_ops(r).iter().position(|&o| o == op)?)
            }
            Anchor::End(r) => (r, k.region_ops(r).len()),
            // The wait planner anchors only before ops and at region ends.
            Anchor::After(_) | Anchor::Start(_) => return None,
        };
        let start = (region, at);
        loop {
            let ops = k.region_ops(region);
            while at > 0
                && (at == ops.len() || !self.other_edit(ops[at]))
                && cross(k, self.target, ops[at - 1], &mut counts).is_some()
            {
                at -= 1;
            }
            if at > 0 {
                break;
            }
            // At the start of a loop body: up to just before the loop, when nothing in the
            // loop changes which copies the wait completes.
            let Some(lp) = self.parents.region_op[region] else {
                break;
            };
            let Some(outer) = self.parents.op_region[lp] else {
                break;
            };
            if !self.leaves_loop(lp, &counts) {
                break;
            }
            region = outer;
            at = k.region_ops(outer).iter().position(|&o| o == lp)?;
        }
        let ops = k.region_ops(region);
        if (region, at) == start || at == ops.len() {
            return None;
        }
        Some((ops[at], counts))
    }
}

/// The ops and regions nested in `op` (not `op` itself).
fn subtree(k: &Kernel, op: Op, ops: &mut Vec<Op>, regions: &mut Vec<Region>) {
    for &r in &k.ops[op].regions {
        regions.push(r);
        for &o in k.region_ops(r) {
            ops.push(o);
            subtree(k, o, ops, regions);
        }
    }
}

/// The waits of `plan` moved to their earliest equivalent positions (see the module doc), or
/// `None` when none can move. Waits sharing their anchor with another edit (a commit the
/// planner inserted for them) stay.
pub fn hoist_waits(k: &Kernel, target: &Target, plan: &SyncPlan) -> Option<SyncPlan> {
    let parents = k.parents();
    let mut out = plan.clone();
    let mut moved = false;
    for (i, e) in plan.edits.iter().enumerate() {
        let Some(counts) = wait_counts(&e.op) else {
            continue;
        };
        if plan.edits.iter().filter(|x| x.at == e.at).count() > 1 {
            continue;
        }
        let walk = Walk {
            k,
            target,
            plan,
            parents,
            own: i,
        };
        let Some((op, counts)) = walk.earliest(e.at.anchor, counts) else {
            continue;
        };
        out.edits[i].at = ProgramPoint::before(op);
        out.edits[i].op = with_counts(&e.op, &counts);
        out.edits[i].reason = EditReason::Other(format!(
            "{} (moved up to where it completes the same copies, so that one barrier after it also orders the accesses before its first consumer)",
            e.reason.text()
        ));
        moved = true;
    }
    moved.then_some(out)
}
