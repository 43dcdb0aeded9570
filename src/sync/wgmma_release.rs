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
//!    warpgroup's thread says nothing of this one's MMA);
//! 4. both run under the same uniform conditions: the arrival is selected among threads, not
//!    among iterations (`if i > 0` is a delayed release, `analysis::mbar_delayed`'s).
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
    let (rx, ra) = (reach(k, x)?, reach(k, a)?);
    if rx.uniform != ra.uniform {
        return Err("the arrival runs under a condition that is the same in every thread (an iteration guard such as `i > 0`), so not in every iteration of the wgmma".into());
    }
    let (xs, arr) = (rx.threads, ra.threads);
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

/// Whether arrival `a` runs, in an iteration of wgmma-or-other access `x`, in fewer threads
/// than `x` under the same uniform conditions: an election by thread id (not an iteration
/// guard), for E0307's note.
pub(crate) fn is_election(k: &Kernel, x: Op, a: Op) -> bool {
    matches!((reach(k, x), reach(k, a)), (Ok(rx), Ok(ra)) if rx.uniform == ra.uniform && rx.threads != ra.threads)
}

/// The threads that run `o` in one iteration of its innermost `for`, and the uniform
/// conditions around it (`handshake_guards::reach`), or why they are not known.
fn reach(k: &Kernel, o: Op) -> Result<super::handshake_guards::Reach, String> {
    let l = k.parents().ancestors(o).into_iter().find(|&p| matches!(k.ops[p].kind, OpKind::For { .. }));
    super::handshake_guards::reach(k, o, l).map_err(|d| d.message)
}
