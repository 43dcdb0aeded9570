//! A wgmma's shared reads released by one thread per warpgroup (CUTLASS's sm90
//! `PipelineTmaAsync::consumer_release`: every thread of a consumer warpgroup runs
//! `wgmma_commit; wgmma_wait 0`, then one signalling thread of the warpgroup arrives on the
//! `empty` mbarrier, whose count is the number of consumer warpgroups).
//!
//! Why it is sound (docs/async.md, "wgmma completion: the warpgroup"): a wgmma is one MMA of
//! a warpgroup, the aligned 128-thread range `[128 w, 128 w + 128)` (docs/ir.md section 4);
//! the tensor core reads its shared operands once for every thread of it, so a wait of *any*
//! of those threads that completes the wgmma's group (`completed_by`, checked by the caller)
//! returns only after those reads are done, for the whole warpgroup. An arrival by that
//! thread after that wait, in the same iteration, therefore releases the whole warpgroup's
//! reads of that iteration. The rule asks, from the guards of the two ops
//! (`sync::handshake_guards::reach`, the threads that run each in one iteration):
//!
//! 1. the wgmma runs in whole warpgroups: every aligned 128-thread range runs it in all or
//!    none of its threads (a part of a warpgroup issuing a wgmma is not a wgmma);
//! 2. every thread that arrives runs the wgmma (its wait is the one the caller found);
//! 3. every warpgroup that runs the wgmma has a thread that arrives (an arrival of another
//!    warpgroup's thread says nothing of this one's MMA).
//!
//! The arrival counts are `analysis::mbar_protocol`'s: the other role's wait is taken as
//! acquiring these arrivals only where the protocol verified it (or found no value showing
//! it wrong), which replays the count against the arrivals of every round. The interpreter
//! models the same completion (`check::interp::warpgroup`) and is this rule's oracle.
//!
//! Complexity: O(depth x threads x cone) per (wgmma, arrival) pair (two `reach`es).

use crate::ir::*;

/// Threads in a warpgroup.
pub(crate) const WARPGROUP: usize = 128;

/// Whether an arrival `a` that follows the wait completing wgmma `x` for its own threads (the
/// caller's `completed_by`), in `x`'s iteration, releases `x`'s reads for every thread that
/// issues it; else why not, for E0307's note.
pub(crate) fn warpgroup_release(k: &Kernel, x: Op, a: Op) -> Result<(), String> {
    if !matches!(k.ops[x].kind, OpKind::Wgmma { .. }) {
        return Err("only a wgmma's reads are released for the whole warpgroup; any other access is each thread's own, released by an arrival of every thread that made it".into());
    }
    let reach = |o: Op| {
        let l = k.parents().ancestors(o).into_iter().find(|&p| matches!(k.ops[p].kind, OpKind::For { .. }));
        super::handshake_guards::reach(k, o, l).map(|r| r.threads).map_err(|d| d.message)
    };
    let (xs, arr) = (reach(x)?, reach(a)?);
    for (w, (xw, aw)) in xs.chunks(WARPGROUP).zip(arr.chunks(WARPGROUP)).enumerate() {
        let (all, any) = (xw.iter().all(|&t| t), xw.iter().any(|&t| t));
        let lo = w * WARPGROUP;
        if any && !all {
            return Err(format!("the wgmma runs in only some threads of warpgroup {w} (threads {lo} to {}): a wgmma is executed by whole warpgroups", lo + xw.len() - 1));
        }
        if let Some(i) = (xw.iter().zip(aw)).position(|(&xt, &at)| at && !xt) {
            return Err(format!("thread {} arrives but does not run the wgmma: its wait completes none of it", lo + i));
        }
        if all && !aw.iter().any(|&t| t) {
            return Err(format!("no thread of warpgroup {w} (threads {lo} to {}), which runs the wgmma, arrives after its wait: an arrival of another warpgroup says nothing of this one's reads", lo + xw.len() - 1));
        }
    }
    Ok(())
}
