//! Which sync ops the static proof ([`super::proof`]) may stand behind. "Proved" claims more
//! than the absence of races between accesses: the execution it reasons about must exist,
//! so every sync op of the kernel must be one whose deadlock freedom and protocol the proof
//! establishes. Otherwise it declines, and the interpreter runs (and finds a deadlock or a
//! protocol error, if there is one).
//!
//! The rules (async copies other than per-thread `cp_async`/`gather_to_lds` are declined by
//! the proof's preconditions):
//! - `barrier`: not under thread-dependent control (checked by the proof itself), so every
//!   thread executes the same sequence of barriers.
//! - `warp_sync`: every enclosing `if` condition is uniform across each warp (evaluated per
//!   thread of the block; a condition the proof cannot evaluate counts as not warp-uniform),
//!   and no enclosing loop has thread-dependent bounds, so every thread of a warp executes
//!   the same sequence of warp_syncs.
//! - split barriers (`barrier_signal`/`barrier_wait`): the protocol verifier
//!   ([`super::protocol`]) reports nothing, and no split op is under thread-dependent control,
//!   so every thread signals and waits in the same order, each phase pairs up and no signal
//!   is left at exit.
//! - collectives the hardware runs per warp or warpgroup (`.aligned`): a `named_sync` or
//!   `named_arrive` under control that is not uniform across its warp, and a `wgmma`,
//!   `wgmma_commit` or `wgmma_wait` under control that is not uniform across its warpgroup
//!   (4 aligned warps), are declined (the interpreter reports them: C0002, C0003, C0053).
//! - named barriers: only `named_sync id, n` with `n` the block's thread count, no
//!   `named_arrive` on that id, not under thread-dependent control, and a clean protocol: each
//!   thread blocks at every phase, so exactly the block completes each one, like a `barrier`.
//!   Anything else (arrive/sync producer-consumer pairs, partial counts) depends on which
//!   threads run which branch, which the proof does not count.
//! - counter waits and group commits: they never block (every copy completes); what they
//!   complete is the business of `super::proof_async`.
//! - `fence_proxy_async`: without wgmma or TMA there are no async-proxy accesses, so it
//!   orders nothing the proof reasons about and never blocks. A kernel whose race freedom
//!   depends on proxy fences has wgmma or TMA accesses, on which the proof declines: the
//!   fence argument is only ever made by the interpreter (`race`), never behind "proved".
//! - mbarrier ops: only in the single-role TMA pipeline form of [`super::mbar_pipeline`],
//!   which proves that every wait completes and names the phase of its use, or in the
//!   two-role form of [`super::elected_pipeline`] (whose handshakes `handshake_proof`
//!   proves); otherwise declined (their arrival counts and phases are not reasoned about).
//!   In the two-role form a `named_sync id, n` of one role's `n` threads, run by all of them
//!   each iteration and with an id no other role uses, completes with exactly that role.
//!
//! Complexity: O(ops) plus the protocol verifier, plus O(threads) per distinct `if`
//! condition enclosing a `warp_sync`.

use std::collections::HashSet;

use super::elected_pipeline::RolePlan;
use crate::ir::*;

/// Whether a warp-level collective may sit under an `if` on this condition: every aligned
/// group of the given number of threads (a warp, a warpgroup) agrees on it.
pub(super) type WarpUniform<'a> = dyn FnMut(Value, i64) -> bool + 'a;

/// `Ok` when every sync op of `k` is one the proof reasons about (module doc); `Err(why)`
/// names the first that is not. `td` holds the thread-dependent values.
pub(super) fn syncs_reasoned(
    k: &Kernel,
    td: &HashSet<Value>,
    roles: &Result<Option<RolePlan>, String>,
    warp: u32,
    warp_uniform: &mut WarpUniform<'_>,
) -> Result<(), String> {
    // A role branch with mbarriers is read as a two-role pipeline, anything else as a
    // single-role one.
    let (mbar, role_named) = match roles {
        Ok(Some(p)) => (Ok(()), p.named.clone()),
        Err(why) => (Err(why.clone()), HashSet::new()),
        Ok(None) => (
            super::mbar_pipeline::plan(k, td).map(|_| ()),
            HashSet::new(),
        ),
    };
    let mut g = Gate {
        k,
        warp,
        td,
        warp_uniform,
        split_or_named: false,
        mbar,
        role_named,
    };
    g.region(k.body(), Control::default())?;
    if g.split_or_named
        && let Some(d) = super::protocol::check_protocol(k, warp).first()
    {
        return Err(format!(
            "the split/named barrier protocol is not proved ({})",
            d.message
        ));
    }
    Ok(())
}

/// The control an op runs under.
#[derive(Copy, Clone, Default)]
struct Control {
    /// Some threads of the block may skip it.
    block_divergent: bool,
    /// Some threads of a warp may skip it while others of that warp run it.
    warp_divergent: bool,
    /// The same for a warpgroup (4 aligned warps).
    group_divergent: bool,
}

/// Control under which any thread may skip an op.
const DIVERGENT: Control = Control {
    block_divergent: true,
    warp_divergent: true,
    group_divergent: true,
};

struct Gate<'a, 'f> {
    k: &'a Kernel,
    warp: u32,
    td: &'a HashSet<Value>,
    warp_uniform: &'a mut WarpUniform<'f>,
    split_or_named: bool,
    /// Whether the mbarrier ops form the pipeline [`super::mbar_pipeline`] or
    /// [`super::elected_pipeline`] proves, else why not.
    mbar: Result<(), String>,
    /// The named barriers of one role's threads that [`super::elected_pipeline`] accepts.
    role_named: HashSet<Op>,
}

impl Gate<'_, '_> {
    fn region(&mut self, r: Region, ctl: Control) -> Result<(), String> {
        for &op in self.k.region_ops(r) {
            self.aligned(op, ctl)?;
            if let Some(s) = effects(self.k, op).sync {
                self.sync_op(op, &s, ctl)?;
            }
            let inner = self.inner_control(op, ctl);
            for &c in &self.k.ops[op].regions {
                self.region(c, inner)?;
            }
        }
        Ok(())
    }

    /// The control the regions of `op` run under.
    fn inner_control(&mut self, op: Op, ctl: Control) -> Control {
        let od = &self.k.ops[op];
        let td = |o: &Operand| o.value().is_some_and(|v| self.td.contains(&v));
        match &od.kind {
            OpKind::If { cond } if td(cond) => {
                let warp = i64::from(self.warp);
                let mut same = |g| cond.value().is_some_and(|c| (self.warp_uniform)(c, g));
                Control {
                    block_divergent: true,
                    warp_divergent: ctl.warp_divergent || !same(warp),
                    group_divergent: ctl.group_divergent || !same(4 * warp),
                }
            }
            OpKind::For { lo, hi, step, .. } if td(lo) || td(hi) || td(step) => DIVERGENT,
            OpKind::While { .. } if !self.while_uniform(op) => DIVERGENT,
            _ => ctl,
        }
    }

    /// Declines a `.aligned` collective some threads of its warp (named barriers) or
    /// warpgroup (wgmma ops) may skip.
    fn aligned(&self, op: Op, ctl: Control) -> Result<(), String> {
        let scope = match self.k.ops[op].kind {
            OpKind::NamedSync { .. } | OpKind::NamedArrive { .. } if ctl.warp_divergent => "warp",
            OpKind::Wgmma { .. } | OpKind::WgmmaCommit | OpKind::WgmmaWait(_)
                if ctl.group_divergent =>
            {
                "warpgroup"
            }
            _ => return Ok(()),
        };
        Err(format!(
            "{} is under control that is not uniform across its {scope} (its threads must execute it together)",
            super::proof::op_at(self.k, op)
        ))
    }

    fn while_uniform(&self, op: Op) -> bool {
        let cr = self.k.ops[op].regions[0];
        match self.k.region_ops(cr).last().map(|o| &self.k.ops[*o].kind) {
            Some(OpKind::Condition(c)) => !c.value().is_some_and(|v| self.td.contains(&v)),
            _ => false,
        }
    }

    fn sync_op(&mut self, op: Op, s: &SyncEffect, ctl: Control) -> Result<(), String> {
        let name = || super::proof::op_at(self.k, op);
        match s {
            // Uniform control is checked with the barrier intervals.
            // Without async-proxy accesses (a precondition) a proxy fence orders nothing
            // the proof reasons about and never blocks.
            SyncEffect::Barrier
            | SyncEffect::Wait(_)
            | SyncEffect::Commit(_)
            | SyncEffect::ProxyFence => Ok(()),
            SyncEffect::WarpSync if ctl.warp_divergent => Err(format!(
                "{} is under control that is not uniform across its warp (it may deadlock)",
                name()
            )),
            SyncEffect::WarpSync => Ok(()),
            SyncEffect::SplitSignal(_) | SyncEffect::SplitWait(_) if ctl.block_divergent => {
                Err(format!("{} is under thread-dependent control", name()))
            }
            SyncEffect::SplitSignal(_) | SyncEffect::SplitWait(_) => {
                self.split_or_named = true;
                Ok(())
            }
            SyncEffect::NamedSync { count, .. } => {
                self.split_or_named = true;
                self.named_sync(op, *count, ctl)
            }
            SyncEffect::NamedArrive { .. } => Err(format!(
                "{} makes named-barrier phases depend on which threads arrive, which the proof does not count",
                name()
            )),
            SyncEffect::MbarInit
            | SyncEffect::MbarArrive
            | SyncEffect::MbarExpectTx
            | SyncEffect::MbarWait
            | SyncEffect::MbarInval => self.mbar.clone().map_err(|why| {
                format!(
                    "{} is an mbarrier op outside the single- and two-role TMA pipeline forms ({why})",
                    name()
                )
            }),
        }
    }

    /// A `named_sync` is a block barrier when the whole block takes part in every phase (a
    /// `named_arrive` anywhere declines the proof on its own).
    fn named_sync(&self, op: Op, count: u32, ctl: Control) -> Result<(), String> {
        let name = super::proof::op_at(self.k, op);
        if self.role_named.contains(&op) {
            return Ok(());
        }
        if ctl.block_divergent {
            return Err(format!("{name} is under thread-dependent control"));
        }
        if count != self.k.threads() {
            return Err(format!(
                "{name} counts {count} of the block's {} threads, which the proof does not count",
                self.k.threads()
            ));
        }
        Ok(())
    }
}
