//! Warp intervals for the static proof ([`super::proof`]): `warp_sync` orders the accesses of
//! the threads of one warp across it, so a pair of accesses that shares a barrier interval
//! but no *warp interval* needs only its pairs of threads from different warps checked.
//!
//! What it computes: for every shared access, the static starts of its warp intervals (kernel
//! entry, a `barrier` or a `warp_sync`) that reach it without crossing a barrier or a
//! `warp_sync` (the dataflow of [`super::proof::starts_cut_by`]); and for each per-thread
//! access its instances with every thread replaced by the first thread of its warp, so that
//! the proof's "two different threads" collision test becomes "two threads of different
//! warps".
//!
//! Invariant (soundness, docs/checker.md "Warp intervals"): `super::proof_syncs` has
//! established, before this is used, that every enclosing `if` of a `warp_sync` is
//! warp-uniform and that no enclosing loop has thread-dependent bounds, and the proof that
//! barriers are not under thread-dependent control; so all threads of one warp execute the
//! same sequence of `barrier`/`warp_sync` ops, and the n-th of them is a rendezvous of the
//! whole warp. An access by thread `t1` after its n-th such op and one by `t2` (same warp)
//! after its m-th with n < m are then ordered through the (n+1)-th; unordered ones follow the
//! same (n-th) op, a common static start. Accesses whose warp-start sets are disjoint are
//! therefore ordered when their threads share a warp. The warp is `linear id div W` with `W`
//! the target's warp width (docs/ir.md section 2); without a target there is no warp
//! ordering (the generic model's warp width is not the hardware's). Async accesses (copies,
//! wgmma operand reads) are never ordered by a `warp_sync` here: their completion is the
//! business of `super::proof_async`.
//!
//! Complexity: one more pass of the interval dataflow, O(instances) to map the instances.

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use super::proof::{Access, Cut, Inst, Starts, starts_cut_by};
use super::proof_tiles::ANY;
use crate::ir::*;
use crate::target::Target;

/// The warp-interval facts of one kernel.
pub(super) struct WarpOrder {
    /// Warp width.
    pub warp: u32,
    /// Warp-interval starts per access op.
    starts: HashMap<Op, Starts>,
    /// Per access, its instances with each thread replaced by its warp's first thread.
    pub values: Vec<Rc<Vec<Inst>>>,
}

impl WarpOrder {
    /// The warp-interval facts, or `None` when no `warp_sync` can order anything: no target
    /// (no hardware warp width) or no `warp_sync` in the kernel.
    pub(super) fn new(
        k: &Kernel,
        target: Option<Target>,
        values: &[Rc<Vec<Inst>>],
    ) -> Option<WarpOrder> {
        let warp = target?.warp.max(1);
        let has = k
            .ops_in_order()
            .into_iter()
            .any(|op| matches!(k.ops[op].kind, OpKind::WarpSync));
        if !has {
            return None;
        }
        let starts = starts_cut_by(k, Cut::BarrierOrWarpSync).0;
        let values = values
            .iter()
            .map(|v| {
                Rc::new(
                    v.iter()
                        .map(|i| Inst {
                            t: if i.t == ANY { ANY } else { i.t - i.t % warp },
                            ..*i
                        })
                        .collect(),
                )
            })
            .collect();
        Some(WarpOrder {
            warp,
            starts,
            values,
        })
    }

    /// Whether `a` and `b` are ordered when executed by threads of one warp: both are
    /// synchronous per-thread accesses and no warp interval holds both.
    pub(super) fn ordered_in_warp(&self, a: &Access, b: &Access) -> bool {
        let sync = |x: &Access| !x.kind.is_async() && x.collective.is_none();
        if !(sync(a) && sync(b)) {
            return false;
        }
        let empty = BTreeSet::new();
        let sa = self.starts.get(&a.op).unwrap_or(&empty);
        let sb = self.starts.get(&b.op).unwrap_or(&empty);
        sa.is_disjoint(sb)
    }

    /// A pair test's finding on warp-mapped instances, said as such: the threads it names
    /// stand for their warps.
    pub(super) fn explain(&self, why: String) -> String {
        format!(
            "{why} (threads of different warps, named by each warp's first thread of {}; within a warp a warp_sync orders the pair)",
            self.warp
        )
    }
}
