//! TMA loads that no wait completes: still in flight at an `mbar_inval` of their mbarrier or
//! when the kernel ends (E0603; docs/async.md, "Copies in flight at an invalidation or at the
//! kernel's end").
//!
//! A TMA load completes on its mbarrier slot; only an `mbar_wait` that observes that phase
//! orders the copy before anything else. A copy issued but never waited for (Triton's
//! software-pipelined refill whose guard lets the last iteration issue one more load) lands
//! after the loop: on an mbarrier already invalidated (`mbar_inval`: the completion signals
//! an mbarrier that no longer exists, `check`'s C0011) or into shared memory after every
//! thread of the block may have exited. A later shared access of the slot is already a
//! consumer of the in-flight dataflow (E0602); this module makes the two other points
//! consumers too, on the same dataflow state, so what holds for every trip count there
//! (the exit of a loop of symbolic trips keeps every iteration's copies that its guards do
//! not rule out, `Flow::guard_excludes_exit`) holds here.
//!
//! **Rule.** At `mbar_inval @m[i]` every pending entry of the mbarrier queue whose TMA load
//! completes on `@m` (the same root buffer) at an index not provably different (both
//! constant and unequal) is reported; at the kernel's end every pending entry of the queue is.
//! `sync` synthesizes no phase parity, so it refuses (the help names the two fixes) rather
//! than placing the `mbar_wait`.
//!
//! **Not covered: loads in a loop that does not wait on their array** (a prologue loop):
//! skipped ([`refill_or_straight`]), since the dataflow's match of their executions to a later
//! loop's waits is approximate. **Not covered: copies completed by another role.** A load whose mbarrier array some
//! `mbar_wait` in the sibling arm of an `if` enclosing both waits on (a warp-specialized
//! producer, whose consumers wait) is completed by the other role's threads, which the
//! per-thread dataflow does not follow; it is skipped here and left to `mbar_protocol`'s
//! arrival counts and to `check`.
//!
//! Complexity: O(entries · depth) per `mbar_inval` and once at the end (the sibling-arm test
//! walks the ancestors of the copy and of each wait on its array).

use crate::analysis::inflight::{Flow, InFlight, Queue};
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::text::op_label;
use crate::ir::*;

/// E0603 for the TMA loads of `states` still in flight at `mbar_inval` op `inval` on a slot
/// they may complete on.
pub(crate) fn at_inval(flow: &Flow<'_>, inval: Op, states: &[InFlight]) -> Vec<(Op, Diagnostic)> {
    let k = flow.k;
    let OpKind::MbarInval { mbar, index } = &k.ops[inval].kind else {
        return Vec::new();
    };
    let mut out: Vec<(Op, Diagnostic)> = Vec::new();
    for copy in pending_loads(flow, states) {
        let OpKind::TmaLoad { mbar: cm, mbar_index: ci, .. } = &k.ops[copy].kind else {
            continue;
        };
        if k.root_buffer(*cm) != k.root_buffer(*mbar) || provably_apart(k, ci, index) || out.iter().any(|(c, _)| *c == copy) {
            continue;
        }
        let d = Diagnostic::error(DiagKind::Finding, "E0603", "`mbar_inval` of an mbarrier a TMA load may still complete on")
            .with_label(k.span(inval), "the mbarrier is invalidated here")
            .with_label(k.span(copy), "TMA load issued here, completing on it")
            .with_note(format!("no `mbar_wait` completes {} on every path to the invalidation (for every trip count of the loops between them): its copy may land after it", op_label(k, copy)))
            .with_help(HELP);
        out.push((copy, d));
    }
    out
}

/// E0603 for the TMA loads still in flight when the kernel ends (`exit`: the dataflow's
/// state there).
pub(crate) fn at_exit(flow: &Flow<'_>, exit: &InFlight) -> Vec<(Op, Diagnostic)> {
    let k = flow.k;
    pending_loads(flow, std::slice::from_ref(exit))
        .into_iter()
        .map(|copy| {
            let d = Diagnostic::error(DiagKind::Finding, "E0603", "a TMA load may still be in flight when the kernel ends")
                .with_label(k.span(copy), "TMA load issued here")
                .with_note("no `mbar_wait` completes its last execution on every path to the kernel's end (for every trip count of the loops after it): its copy may write shared memory after every thread of the block has exited")
                .with_help(HELP);
            (copy, d)
        })
        .collect()
}

const HELP: &str = "guard the refill so that the last iteration issues none (Triton: `%i < %n - step`), or wait on its mbarrier slot with its phase parity (`mbar_wait`) after the loop";

/// The TMA loads pending in any of `states`, in op order, except those completed by another
/// role ([`waited_in_a_sibling_arm`]).
fn pending_loads(flow: &Flow<'_>, states: &[InFlight]) -> Vec<Op> {
    let mut copies: Vec<Op> = states
        .iter()
        .flat_map(|st| st.entries(Queue::Mbarrier).map(|(e, _)| flow.entries().op(e)))
        .collect();
    copies.sort();
    copies.dedup();
    copies.retain(|&c| !waited_in_a_sibling_arm(flow.k, c) && refill_or_straight(flow, c));
    copies
}

/// Whether TMA load `copy` lies outside every loop, or in a loop that also waits on its
/// mbarrier array (a pipelined refill). A load in a loop without such a wait (a prologue
/// loop, a loop issuing every slot before another loop waits) is skipped: the dataflow
/// matches its executions to the later loop's waits only approximately, and reporting it
/// refused correct kernels (`tests/inflight_slots.rs`, the `pipeline --mode tma` prologue).
fn refill_or_straight(flow: &Flow<'_>, copy: Op) -> bool {
    let k = flow.k;
    let OpKind::TmaLoad { mbar, .. } = &k.ops[copy].kind else {
        return false;
    };
    let m = k.root_buffer(*mbar);
    let loops = flow.loops_of(copy);
    if loops.is_empty() {
        return true;
    }
    let mut found = false;
    k.walk(|w| {
        if !found && matches!(&k.ops[w].kind, OpKind::MbarWait { mbar: x, .. } if k.root_buffer(*x) == m) {
            found = flow.loops_of(w).iter().any(|l| loops.contains(l));
        }
    });
    found
}

/// Whether two index lists name provably different elements: some position holds two
/// different constants.
fn provably_apart(k: &Kernel, a: &[Operand], b: &[Operand]) -> bool {
    a.iter()
        .zip(b)
        .any(|(x, y)| matches!((k.const_int(*x), k.const_int(*y)), (Some(p), Some(q)) if p != q))
}

/// Whether an `mbar_wait` on TMA load `copy`'s mbarrier array lies in another arm of an `if`
/// that encloses the copy (the waiting threads run the other arm: another role).
fn waited_in_a_sibling_arm(k: &Kernel, copy: Op) -> bool {
    let OpKind::TmaLoad { mbar, .. } = &k.ops[copy].kind else {
        return false;
    };
    let m = k.root_buffer(*mbar);
    let arms = enclosing_arms(k, copy);
    let mut found = false;
    k.walk(|w| {
        if found || !matches!(&k.ops[w].kind, OpKind::MbarWait { mbar: x, .. } if k.root_buffer(*x) == m) {
            return;
        }
        found = enclosing_arms(k, w)
            .iter()
            .any(|(op, r)| arms.iter().any(|(o, q)| o == op && q != r));
    });
    found
}

/// The `if`s enclosing `o` with the arm (region) holding it, innermost first.
fn enclosing_arms(k: &Kernel, o: Op) -> Vec<(Op, Region)> {
    let p = k.parents();
    let mut out = Vec::new();
    let mut cur = o;
    while let Some(r) = p.op_region[cur] {
        let Some(up) = p.region_op[r] else { break };
        if matches!(k.ops[up].kind, OpKind::If { .. }) {
            out.push((up, r));
        }
        cur = up;
    }
    out
}
