//! The handshake proof's re-arm rule: with one or several roles waiting on an mbarrier array,
//! a slot's phase may complete again only after every waiter has passed its wait of the
//! phase before (docs/checker.md, "Re-arm after every waiter").
//!
//! A wait `W` on `M[i mod D]` in iteration `i` names phase `i / D` (this use) or the one
//! before (previous use); it hangs when the next phase completes first, and that phase needs
//! every arrival of iteration `t = i + D` (this use) or `t = i` (previous use), since by the
//! balance rule each iteration's arrivals complete one phase. So for every wait `W` on `M` and
//! every arrival op `A` on `M` the rule asks that `A(t)` follow every thread's `W(i)`:
//! - **direct**: `A` runs in `W`'s role, after `W` in the body (or anywhere in it for a
//!   this-use `W`, `t > i`), by the same threads (or a group barrier of the role lies between
//!   a whole-role `W` and an elected `A`);
//! - **one hop**: an arrival `R` on an array `E` follows `W` in its role the same way
//!   ("releases" it), and `A`'s role waits on `E` with a `V` run by a thread that runs `A`,
//!   whose phase needs `R(i)` — a this-use `V` in iteration `j = i`, a previous-use `V` in
//!   `j = i + D_E` — with `V(j)` before `A(t)`: `j < t`, or `j = t` and `V` before `A` in
//!   the body.
//!
//! Longer chains are not followed: the proof declines (the interpreter decides). Invariant
//! assumed from the rest of the proof (induction on the iteration): slots are `i mod D`,
//! each iteration's arrivals complete exactly one phase of its slot. Complexity: per wait
//! one scan of its role's ops, then per (wait, arrival) pair the waits of the arrival's role
//! on the released arrays: O(waits × (ops + arrivals × arrays × waits)) at worst.

use std::collections::{BTreeSet, HashMap};

use super::handshake_proof::{HsOp, Kind, OpIndex, Parity, op_name};
use crate::ir::*;

/// Checks the rule for every (wait, arrival) pair on one array; the reason when some pair
/// shows neither ordering.
/// `index`: the op order and group barriers the proof built (`handshake_proof::OpIndex`).
pub(super) fn rearm_after_waiters(k: &Kernel, ops: &[HsOp], index: &OpIndex) -> Result<(), String> {
    let pos = ops.iter().map(|o| index.order[&o.op]).collect();
    let ctx = Ctx { k, ops, index, pos };
    let mut waits_on: HashMap<(usize, Buffer), Vec<usize>> = HashMap::new();
    let mut arrivals_on: HashMap<Buffer, Vec<usize>> = HashMap::new();
    for (i, o) in ops.iter().enumerate() {
        match o.kind {
            Kind::Wait(_) => waits_on.entry((o.arm, o.mbar)).or_default().push(i),
            Kind::Arrive { .. } => arrivals_on.entry(o.mbar).or_default().push(i),
            _ => {}
        }
    }
    for (wi, w) in ops.iter().enumerate() {
        let Kind::Wait(parity) = w.kind else { continue };
        let released = ctx.released(wi);
        for &ai in arrivals_on.get(&w.mbar).into_iter().flatten() {
            let hop = |e: &Buffer| {
                let vs = waits_on.get(&(ops[ai].arm, *e)).into_iter().flatten();
                vs.into_iter().any(|&vi| ctx.hop(wi, parity, vi, ai))
            };
            if !ctx.direct(wi, parity, ai) && !released.iter().any(hop) {
                return Err(format!(
                    "{} on @{} may re-arm a slot before {} has passed its wait of the phase before: no wait of the arriving role on an array the waiters arrive on afterwards orders it after them, so a waiter can fall two phases behind",
                    op_name(k, ops[ai].op),
                    k.buffers[w.mbar].name,
                    op_name(k, w.op)
                ));
            }
        }
    }
    Ok(())
}

struct Ctx<'a> {
    k: &'a Kernel,
    ops: &'a [HsOp],
    index: &'a OpIndex,
    /// Each of `ops`' position in program order (looked up once: the rule asks it per pair).
    pos: Vec<usize>,
}

impl Ctx<'_> {
    fn pos(&self, i: usize) -> usize {
        self.pos[i]
    }

    /// The slot count `D` of an array.
    fn slots(&self, b: Buffer) -> usize {
        self.k.buffers[b].shape.first().copied().unwrap_or(0) as usize
    }

    /// Whether every thread that runs wait `w` runs, or is followed through a group barrier
    /// by, the arrival `r` of the same role, `r` lying after `w` in the body when `after`.
    fn follows(&self, w: usize, r: usize, after: bool) -> bool {
        let (wo, ro) = (&self.ops[w], &self.ops[r]);
        wo.arm == ro.arm
            && match (wo.elect, ro.elect) {
                (false, false) | (true, false) => true,
                (true, true) => wo.tid.is_some() && wo.tid == ro.tid,
                (false, true) => after && self.index.between(self.k, wo, self.pos(r)),
            }
    }

    /// The arrays an arrival after `w` in its role, released by every thread of `w`, arrives on.
    fn released(&self, w: usize) -> BTreeSet<Buffer> {
        (self.ops.iter().enumerate())
            .filter(|(r, o)| {
                matches!(o.kind, Kind::Arrive { .. }) && self.pos(*r) > self.pos(w) && self.follows(w, *r, true)
            })
            .map(|(_, o)| o.mbar)
            .collect()
    }

    /// Direct: the arrival `a` of iteration `t` runs after `w` of iteration `i` in `w`'s own
    /// threads.
    fn direct(&self, w: usize, parity: Parity, a: usize) -> bool {
        let after = self.pos(a) > self.pos(w);
        (after || parity == Parity::This) && self.follows(w, a, after)
    }

    /// One hop: `v` (a wait on an array released by `w`, in `a`'s role) needs the release of
    /// iteration `i` and precedes `a` of iteration `t` in a thread that runs `a`.
    fn hop(&self, w: usize, parity: Parity, v: usize, a: usize) -> bool {
        let (vo, ao) = (&self.ops[v], &self.ops[a]);
        let Kind::Wait(vp) = vo.kind else { return false };
        let runs_a = match (vo.elect, ao.elect) {
            (false, _) | (true, false) => true,
            (true, true) => vo.tid.is_some() && vo.tid == ao.tid,
        };
        // Iterations relative to `i`: `t` of the arrival, `j` of the wait.
        let t = if parity == Parity::This { self.slots(self.ops[w].mbar) } else { 0 };
        let j = if vp == Parity::This { 0 } else { self.slots(vo.mbar) };
        runs_a && (j < t || j == t && self.pos(v) < self.pos(a))
    }
}
