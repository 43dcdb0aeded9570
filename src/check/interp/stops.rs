//! Why an execution stops without a race: the diagnostics for a deadlock (C0002: which sync
//! op a thread waits at, and what another thread does instead), an async copy outstanding
//! when its thread exits or the block ends (C0007), and a run past its step limit (C0009 when
//! something may spin, else the inconclusive C0012).
//!
//! These only describe the state the scheduler found; they change nothing. Complexity:
//! O(threads) per diagnostic.

use super::*;

/// The diagnostic for an execution that ran past its step limit. Only a `while` loop or an
/// mbarrier wait can spin forever; a kernel with neither simply does more work than the limit
/// allows at this size, which is no finding: the check is inconclusive (a usage error).
pub(super) fn step_limit(k: &Kernel, max: u64) -> Diagnostic {
    let spin = k.ops_in_order().into_iter().find(|&o| {
        matches!(
            k.ops[o].kind,
            OpKind::While { .. } | OpKind::MbarWait { .. }
        )
    });
    match spin {
        Some(op) => Diagnostic::error(
            DiagKind::Finding,
            "C0009",
            format!("execution exceeded {max} steps"),
        )
        .with_label(k.span(op), "this may spin forever waiting for another thread")
        .with_help("raise --max-steps if the kernel merely does that much work"),
        None => Diagnostic::user(
            "C0012",
            format!("execution exceeded {max} steps; the check is inconclusive"),
        )
        .with_note("the kernel has no `while` loop or mbarrier wait, so nothing spins: it does more work than the limit at this block size and these bounds")
        .with_help("raise --max-steps, or check smaller --bounds"),
    }
}

impl BlockExec<'_> {
    /// C0007: copy `c` (issued by `op` in thread `t`) is still outstanding.
    pub(super) fn outstanding(&self, _c: u32, op: Option<Op>, t: u32) -> Stop {
        Stop::Deadlock(
            Diagnostic::error(
                DiagKind::Finding,
                "C0007",
                "an async copy is still outstanding when its thread exits",
            )
            .with_label(
                op.map_or(Span::UNDEF, |o| self.k.span(o)),
                format!("issued by thread {t}, never waited for"),
            )
            .with_note("its write may land after the kernel ends; wait for it before the end")
            .with_note(format!("block {}", fmt_xyz(self.bid))),
        )
    }

    /// C0002 when no thread can run: what the first blocked thread waits at, and (where it
    /// helps) what another thread does instead.
    pub(super) fn deadlock(&self) -> Stop {
        let first = self.threads.iter().find_map(|t| match t.status {
            Status::Blocked(b) => Some((t.lin as usize, b)),
            _ => None,
        });
        let Some((t, b)) = first else {
            return Stop::Deadlock(Diagnostic::error(DiagKind::Finding, "C0002", "deadlock"));
        };
        let k = self.k;
        let d = match b {
            Blocked::Barrier(op) => self.barrier_deadlock(t, op),
            Blocked::Warp(op) => self.warp_deadlock(t, op),
            Blocked::Split(id, p, op) => self.split_deadlock(t, (id, p), op),
            Blocked::Warpgroup(wait, mma) => self.warpgroup_deadlock(t, (wait, mma)),
            Blocked::Named(id, op) => {
                let st = self.named.get(&id);
                let (a, c) = st.map_or((0, 0), |s| (s.arrived, s.count));
                Diagnostic::error(DiagKind::Finding, "C0002", format!("deadlock: named barrier {id} phase has {a} of {c} arrivals and never completes"))
                    .with_label(k.span(op), format!("thread {t} waits here"))
            }
            Blocked::Mbar(slot, p, op) => {
                let m = &self.mbar[slot];
                Diagnostic::error(DiagKind::Finding, "C0002", format!("deadlock: mbarrier wait on parity {p} can never complete ({} arrivals and {} transaction bytes pending, {} phases completed)", m.pending, m.tx, m.phases))
                    .with_label(k.span(op), format!("thread {t} waits here"))
            }
        };
        Stop::Deadlock(d.with_note(format!("block {}", fmt_xyz(self.bid))))
    }

    /// Where another thread is instead of the sync op a deadlock waits at.
    pub(super) fn describe(&self, th: &Thread) -> (Span, String) {
        let k = self.k;
        match th.status {
            Status::Exited => (
                k.kernel_span,
                format!(
                    "thread {} {} exits without reaching it",
                    th.lin,
                    fmt_xyz(th.xyz)
                ),
            ),
            Status::Blocked(b2) => {
                let op = blocked_op(b2);
                (
                    k.span(op),
                    format!("thread {} {} waits here instead", th.lin, fmt_xyz(th.xyz)),
                )
            }
            Status::Ready => (Span::UNDEF, String::new()),
        }
    }

    /// A block barrier that not every thread reaches.
    fn barrier_deadlock(&self, t: usize, op: Op) -> Diagnostic {
        let arrived = self.bar.arrived.len();
        let n = self.nthreads;
        let xyz = self.threads[t].xyz;
        let mut d = Diagnostic::error(
            DiagKind::Finding,
            "C0002",
            format!("deadlock: barrier reached by {arrived} of {n} threads"),
        )
        .with_label(
            self.k.span(op),
            format!("thread {t} {} waits here", fmt_xyz(xyz)),
        );
        if let Some(o) = self
            .threads
            .iter()
            .find(|th| th.status != Status::Blocked(Blocked::Barrier(op)))
        {
            let (s, m) = self.describe(o);
            d = d.with_label(s, m);
        }
        d.with_help("a barrier must be reached by every thread of the block: move it out of thread-dependent control")
    }

    /// A `warp_sync` (or register-A `wgmma` or named-barrier rendezvous) that not every
    /// thread of the warp reaches.
    fn warp_deadlock(&self, t: usize, op: Op) -> Diagnostic {
        let k = self.k;
        let w = t / self.warp;
        let what = match k.ops[op].kind {
            OpKind::Wgmma { .. } => "wgmma",
            OpKind::NamedSync { .. } => "named_sync",
            OpKind::NamedArrive { .. } => "named_arrive",
            _ => "warp_sync",
        };
        let mut d = Diagnostic::error(
            DiagKind::Finding,
            "C0002",
            format!("deadlock: {what} not reached by every thread of warp {w}"),
        )
        .with_label(k.span(op), format!("thread {t} waits here"));
        if let Some(o) = self
            .threads
            .iter()
            .filter(|th| th.lin as usize / self.warp == w)
            .find(|th| th.status != Status::Blocked(Blocked::Warp(op)))
        {
            let (s, m) = self.describe(o);
            d = d.with_label(s, m);
        }
        d
    }

    /// A split-barrier wait whose phase never completes.
    fn split_deadlock(&self, t: usize, (id, p): (i32, u64), op: Op) -> Diagnostic {
        let sig = self.split.get(&id).map_or(0, |s| s.signalled);
        let n = self.nthreads;
        let mut d = Diagnostic::error(DiagKind::Finding, "C0002", format!("deadlock: split barrier {id} wait never completes ({sig} of {n} threads signalled phase {p})"))
            .with_label(self.k.span(op), format!("thread {t} waits here"));
        if let Some(o) = self.threads.iter().find(|th| {
            !th.split.contains_key(&id) && !matches!(th.status, Status::Blocked(Blocked::Split(..)))
        }) {
            let (s, m) = self.describe(o);
            d = d.with_label(s, m);
        }
        d
    }
}
