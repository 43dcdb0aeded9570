//! Part of the handshake proof's **balance** argument (`check::handshake_proof`,
//! docs/checker.md "Bytes expected before the phase can complete"): balanced arrivals and
//! bytes per iteration make each use complete exactly one phase only if no phase can complete
//! before its bytes are expected. A phase completes once its arrivals are in and no expected
//! byte is pending, so an `mbar_expect_tx` issued by a thread after the arrivals of its use
//! (another lane, or the same thread after its arrival) lets the wait return before the copy
//! lands, and its bytes count toward the next phase.
//!
//! Rule checked: every `mbar_expect_tx` of an arm is followed, later in the same iteration of
//! the arm's loop, by an `mbar_arrive` on the same array by the same threads (the same
//! elected thread, or the whole role). `mbar_arrive ... tx N` expects and arrives at once and
//! needs nothing. Anything else declines the proof ("not proved", with the reason); the
//! interpreter then checks. Complexity: O(ops²) over one role branch's mbarrier ops (a few).

use super::handshake_proof::{HsOp, Kind};
use crate::ir::Kernel;

/// Every `expect_tx` in `ops` (each arm's ops in program order) is followed by an arrival
/// of its own threads on its array, or the reason it is not.
pub(super) fn tx_before_arrival(k: &Kernel, ops: &[HsOp]) -> Result<(), String> {
    for (j, x) in ops.iter().enumerate() {
        if !matches!(x.kind, Kind::ExpectTx(_)) {
            continue;
        }
        let same_threads = |a: &HsOp| a.elect == x.elect && (!x.elect || (x.tid.is_some() && a.tid == x.tid));
        let followed = ops[j + 1..]
            .iter()
            .any(|a| a.arm == x.arm && a.mbar == x.mbar && matches!(a.kind, Kind::Arrive { .. }) && same_threads(a));
        if !followed {
            return Err(format!(
                "{} is not followed by an arrival of its own thread(s) on @{} in the same iteration: the phase may complete before its bytes are expected (bytes not shown to balance each phase)",
                super::handshake_proof::op_name(k, x.op),
                k.buffers[x.mbar].name
            ));
        }
    }
    Ok(())
}
