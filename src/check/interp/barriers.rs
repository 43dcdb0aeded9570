//! The interpreter's synchronization ops: block barriers and `warp_sync`, split barriers
//! (signal/wait per id and phase), named barriers (arrive/sync with a count), mbarriers
//! (init, arrive with transaction bytes, expect_tx, parity wait, inval) and the AMD LDS fence
//! a full `dscnt`/`lgkmcnt` wait or a barrier implies.
//!
//! Each op releases the thread's vector clock into the sync object and the threads it wakes
//! acquire the object's clock (docs/checker.md, the race detector), so every happens-before
//! edge comes from one of these ops. On AMD a split or named barrier's signal releases only
//! the LDS accesses a `dscnt(0)`/`lgkmcnt(0)` wait completed before it (the hardware signal
//! does not wait for them; docs/split-barriers.md). A thread that must wait is marked
//! [`Blocked`](super::Blocked) and returns `Ok(false)`; a protocol error (different barrier
//! ops met, a second signal, counts that disagree) stops the block with C0003/C0008, an
//! mbarrier used uninitialized with C0011. Complexity: O(threads x clock slots) per
//! completing phase.

use super::*;

impl BlockExec<'_> {
    /// The LDS fence of a thread with unfenced LDS accesses (AMD: `s_waitcnt lgkmcnt(0)`).
    pub(super) fn fence(&mut self, th: &mut Thread) {
        if th.lds_unfenced {
            let t = th.lin as usize;
            th.fence_clock = self.race.epoch(t);
            self.race.tick(t);
            th.lds_unfenced = false;
        }
    }

    /// What an AMD barrier signal (`s_barrier_signal`, split or named) releases of the
    /// thread's own accesses: the signal does not wait for the wave's outstanding LDS
    /// operations, so with unfenced ones only those before its last `dscnt(0)`/`lgkmcnt(0)`
    /// wait (the own clock entry is capped at that fence); `None` (everything) otherwise and
    /// on NVIDIA, whose `bar.arrive`/`bar.sync` order the thread's prior shared accesses.
    fn lds_release_cap(&self, th: &Thread) -> Option<u32> {
        (self.amd() && th.lds_unfenced).then_some(th.fence_clock)
    }

    /// `barrier` (`warp` false) or `warp_sync` (`warp` true): always blocks the thread; the
    /// last arrival wakes every thread of the block (warp).
    pub(super) fn arrive_barrier(
        &mut self,
        th: &mut Thread,
        op: Op,
        warp: bool,
    ) -> Result<bool, Stop> {
        let t = th.lin as usize;
        let (bs, need) = if warp {
            let w = t / self.warp;
            let need = (self.nthreads - w * self.warp).min(self.warp);
            (&mut self.warps[w], need)
        } else {
            (&mut self.bar, self.nthreads)
        };
        if let Some(prev) = bs.op
            && prev != op
        {
            let what = if warp { "warp_sync" } else { "barrier" };
            return Err(self.divergent(t, (op, prev), warp, what));
        }
        if bs.arrived.is_empty() && !warp {
            bs.vc = self.race.base();
        }
        bs.op = Some(op);
        bs.arrived.push(t);
        let mut vc = std::mem::take(&mut bs.vc);
        if warp {
            self.race.release(t, &mut vc, None);
        } else {
            self.race.release_barrier(t, &mut vc);
        }
        let bs = if warp {
            &mut self.warps[t / self.warp]
        } else {
            &mut self.bar
        };
        bs.vc = vc;
        th.status = Status::Blocked(if warp {
            Blocked::Warp(op)
        } else {
            Blocked::Barrier(op)
        });
        if bs.arrived.len() == need {
            let arrived = std::mem::take(&mut bs.arrived);
            let vc = std::mem::replace(&mut bs.vc, vec![0; self.race.slots]);
            bs.op = None;
            if warp {
                for w in arrived {
                    self.wake(w, &vc);
                }
            } else {
                self.race.barrier_done(&vc, &arrived);
                for w in arrived {
                    self.wake_acquired(w);
                }
            }
        }
        Ok(false)
    }

    /// C0003: thread `t` arrives at `op` while its block (`warp` false) or warp waits at
    /// `prev`.
    fn divergent(&self, t: usize, (op, prev): (Op, Op), warp: bool, what: &str) -> Stop {
        let bs = if warp { &self.warps[t / self.warp] } else { &self.bar };
        let other = bs.arrived.first().copied().unwrap_or(0);
        let d = Diagnostic::error(DiagKind::Finding, "C0003", format!("divergent {what}: threads meet different {what} ops"))
            .with_label(self.k.span(op), format!("thread {t} arrives here"))
            .with_label(self.k.span(prev), format!("while thread {other} waits here"))
            .with_help("every thread must execute the same sequence of barriers; move the barrier out of thread-dependent control")
            .with_note(format!("block {}", fmt_xyz(self.bid)));
        Stop::Deadlock(d)
    }

    /// The warp rendezvous of a named barrier op (`bar.sync`/`bar.arrive` are `.aligned`
    /// and the hardware counts whole warps): blocks `th` until every thread of its warp has
    /// reached `op`, then answers the warp's threads (C0003 when a thread of the warp reaches
    /// another such op or a `warp_sync` first). It orders nothing by itself.
    fn warp_meet(&mut self, th: &mut Thread, op: Op) -> Result<Option<Vec<usize>>, Stop> {
        let t = th.lin as usize;
        let w = t / self.warp;
        let need = (self.nthreads - w * self.warp).min(self.warp);
        if let Some(prev) = self.warps[w].op
            && prev != op
        {
            return Err(self.divergent(t, (op, prev), true, "warp collective"));
        }
        let bs = &mut self.warps[w];
        bs.op = Some(op);
        bs.arrived.push(t);
        th.status = Status::Blocked(Blocked::Warp(op));
        if bs.arrived.len() < need {
            return Ok(None);
        }
        bs.op = None;
        Ok(Some(std::mem::take(&mut bs.arrived)))
    }

    /// `barrier_signal id`: C0008 on a second signal before the wait; the last signal of a
    /// phase completes it and wakes its waiters.
    pub(super) fn split_signal(&mut self, th: &mut Thread, op: Op, id: i32) -> Result<(), Stop> {
        let t = th.lin as usize;
        if th.split.contains_key(&id) {
            let d = Diagnostic::error(
                DiagKind::Finding,
                "C0008",
                format!("split barrier {id} signalled twice without a wait"),
            )
            .with_label(self.k.span(op), format!("second signal in thread {t}"));
            return Err(Stop::Deadlock(d));
        }
        let own = self.lds_release_cap(th);
        let n = self.nthreads;
        let slots = self.race.slots;
        let st = self.split.entry(id).or_insert_with(|| SplitState {
            vc: vec![0; slots],
            ..SplitState::default()
        });
        st.signal_op = Some(op);
        let p = st.cur;
        let mut vc = std::mem::take(&mut st.vc);
        self.race.release(t, &mut vc, own);
        let st = self.split.get_mut(&id).expect("split state");
        st.vc = vc;
        st.signalled += 1;
        th.split.insert(id, p);
        if st.signalled == n {
            let vc = std::mem::replace(&mut st.vc, vec![0; slots]);
            st.done.push(vc.clone());
            st.cur += 1;
            st.signalled = 0;
            let waiters: Vec<usize> = st
                .waiters
                .iter()
                .filter(|w| w.1 == p)
                .map(|w| w.0)
                .collect();
            st.waiters.retain(|w| w.1 != p);
            for w in waiters {
                self.wake(w, &vc);
            }
        }
        Ok(())
    }

    /// `barrier_wait id`: C0008 without a signal before it; blocks until the thread's phase
    /// completes.
    pub(super) fn split_wait(&mut self, th: &mut Thread, op: Op, id: i32) -> Result<bool, Stop> {
        let t = th.lin as usize;
        let Some(p) = th.split.remove(&id) else {
            let d = Diagnostic::error(
                DiagKind::Finding,
                "C0008",
                format!("split barrier {id} wait without a signal before it"),
            )
            .with_label(self.k.span(op), format!("in thread {t}"));
            return Err(Stop::Deadlock(d));
        };
        let st = self
            .split
            .get_mut(&id)
            .expect("signalled split barrier has state");
        if let Some(vc) = st.done.get(p as usize).cloned() {
            self.race.acquire(t, &vc);
            Ok(true)
        } else {
            st.waiters.push((t, p));
            th.status = Status::Blocked(Blocked::Split(id, p, op));
            Ok(false)
        }
    }

    /// `named_arrive id, count` (`sync` false) or `named_sync id, count` (`sync` true, which
    /// blocks until `count` threads arrived in the phase). Threads arrive by whole warps
    /// ([`Self::warp_meet`]): the phase counts a warp's threads when its last one arrives.
    /// On gfx1250 both are `s_barrier_signal` on the id (and `s_barrier_wait` for a sync):
    /// like a split signal, they release only the LDS accesses a `dscnt(0)` wait completed
    /// (`lds_release_cap`), each member thread its own.
    pub(super) fn named_barrier(
        &mut self,
        th: &mut Thread,
        op: Op,
        (id, count): (u32, u32),
        sync: bool,
    ) -> Result<bool, Stop> {
        let Some(members) = self.warp_meet(th, op)? else {
            return Ok(false);
        };
        let t = th.lin as usize;
        let slots = self.race.slots;
        let st = self.named.entry(id).or_insert_with(|| NamedState {
            vc: vec![0; slots],
            ..NamedState::default()
        });
        if st.arrived > 0 && st.count != count {
            let prev = st.op.unwrap_or(op);
            let d = Diagnostic::error(DiagKind::Finding, "C0008", format!("named barrier {id}: ops of one phase disagree on the thread count ({} vs {count})", st.count))
                .with_label(self.k.span(op), format!("thread {t} arrives expecting {count}"))
                .with_label(self.k.span(prev), format!("an earlier arrival expects {}", st.count));
            return Err(Stop::Deadlock(d));
        }
        st.count = count;
        st.op = Some(op);
        let mut vc = std::mem::take(&mut st.vc);
        for &m in &members {
            let cap = if m == t { self.lds_release_cap(th) } else { self.lds_release_cap(&self.threads[m]) };
            self.race.release(m, &mut vc, cap);
        }
        let st = self.named.get_mut(&id).expect("named state");
        st.vc = vc;
        st.arrived += members.len() as u32;
        let done = st.arrived >= st.count;
        if sync {
            st.waiters.extend(&members);
            for &m in &members {
                self.set_status(th, m, Status::Blocked(Blocked::Named(id, op)));
            }
        } else {
            for &m in &members {
                self.wake_acquired(m);
            }
        }
        if done {
            let st = self.named.get_mut(&id).expect("named state");
            let vc = std::mem::replace(&mut st.vc, vec![0; slots]);
            let waiters = std::mem::take(&mut st.waiters);
            st.arrived = 0;
            st.op = None;
            for w in waiters {
                self.wake(w, &vc);
            }
        }
        Ok(false)
    }

    /// Sets the status of thread `m` (`th` when it is the running one).
    fn set_status(&mut self, th: &mut Thread, m: usize, s: Status) {
        if m == th.lin as usize {
            th.status = s;
        } else {
            self.threads[m].status = s;
        }
    }

    // ---------------------------------------------------------------- mbarriers

    pub(super) fn mbar_slot(
        &self,
        th: &Thread,
        m: MemRef,
        index: &[Operand],
        op: Op,
    ) -> Result<usize, Stop> {
        let (b, e) = self.element(th, m, index, op)?;
        Ok(self.mbar_base[b.index()] + e as usize)
    }

    /// C0011 when the mbarrier is not initialized; a race when its `mbar_init` is not ordered
    /// before this use (the init writes the mbarrier, every use reads it).
    fn mbar_use(&self, th: &Thread, slot: usize, op: Op) -> Result<(), Stop> {
        let m = &self.mbar[slot];
        if !m.init {
            return Err(self.exec_err(
                op,
                "C0011",
                "mbarrier used before `mbar_init` (or after `mbar_inval`)".into(),
            ));
        }
        let (it, clock, iop) = m.init_by;
        let t = th.lin as usize;
        if self.cfg.detect_races && it != t && clock > self.race.get(t, it) {
            let iop = iop.unwrap_or(op);
            let a = Acc {
                thread: it as u32,
                clock,
                op: iop,
                iter: 0,
                kind: AccKind::Write,
                copy: NO_COPY,
                fences: 0,
                buf: crate::check::race::NO_BUFFER,
            };
            let b = Acc {
                thread: th.lin,
                clock: self.race.epoch(t),
                op,
                iter: th.iter,
                kind: AccKind::Read,
                copy: NO_COPY,
                fences: 0,
                buf: crate::check::race::NO_BUFFER,
            };
            let mut w = self.witness(
                Conflict {
                    earlier: a,
                    later: b,
                    missing_fence: false,
                },
                Buffer::new(0),
                0,
            );
            let (buf, idx) = self.mbar_name(slot);
            w.buffer = buf;
            w.index = idx;
            return Err(Stop::Race(Box::new(w)));
        }
        Ok(())
    }

    /// The mbarrier buffer and index of a slot.
    fn mbar_name(&self, slot: usize) -> (String, Vec<u64>) {
        for (b, bd) in self.k.buffers.iter() {
            if bd.elem == ElemType::MBarrier {
                let base = self.mbar_base[b.index()];
                if slot >= base && slot < base + bd.elements() as usize {
                    return (bd.name.clone(), unlinear((slot - base) as u64, &bd.shape));
                }
            }
        }
        (String::new(), Vec::new())
    }

    /// Completes the slot's phase when no arrival and no transaction byte is pending: the
    /// attached TMA copies complete and the waiters wake.
    pub(super) fn mbar_check(&mut self, slot: usize) {
        let n = self.nthreads;
        let m = &mut self.mbar[slot];
        if m.pending > 0 || m.tx != 0 {
            return;
        }
        m.phases += 1;
        m.vc[n + slot] = m.phases;
        m.last_vc = std::mem::replace(&mut m.vc, vec![0; self.race.slots]);
        m.pending = m.count;
        let attached = std::mem::take(&mut m.attached);
        let waiters = std::mem::take(&mut m.waiters);
        let phases = m.phases;
        let vc = m.last_vc.clone();
        for c in attached {
            self.race.complete(c, n + slot, phases);
        }
        for w in waiters {
            self.wake(w, &vc);
        }
    }

    pub(super) fn mbar_init(
        &mut self,
        th: &Thread,
        op: Op,
        (mbar, index): (MemRef, &[Operand]),
        count: u32,
    ) -> Result<(), Stop> {
        let t = th.lin as usize;
        let slot = self.mbar_slot(th, mbar, index, op)?;
        let slots = self.race.slots;
        self.mbar[slot] = MbarState {
            init: true,
            count: count as i64,
            pending: count as i64,
            tx: 0,
            phases: 0,
            vc: vec![0; slots],
            last_vc: vec![0; slots],
            attached: Vec::new(),
            waiters: Vec::new(),
            init_by: (t, self.race.epoch(t), Some(op)),
        };
        Ok(())
    }

    /// `mbar_arrive` (with `tx` transaction bytes expected, if any).
    pub(super) fn mbar_arrive(
        &mut self,
        th: &Thread,
        op: Op,
        (mbar, index): (MemRef, &[Operand]),
        tx: Option<u32>,
    ) -> Result<(), Stop> {
        let slot = self.mbar_slot(th, mbar, index, op)?;
        self.mbar_use(th, slot, op)?;
        let mut vc = std::mem::take(&mut self.mbar[slot].vc);
        self.race.release(th.lin as usize, &mut vc, None);
        let m = &mut self.mbar[slot];
        m.vc = vc;
        m.tx += tx.unwrap_or(0) as i64;
        m.pending -= 1;
        self.mbar_check(slot);
        Ok(())
    }

    pub(super) fn mbar_expect_tx(
        &mut self,
        th: &Thread,
        op: Op,
        (mbar, index): (MemRef, &[Operand]),
        bytes: u32,
    ) -> Result<(), Stop> {
        let slot = self.mbar_slot(th, mbar, index, op)?;
        self.mbar_use(th, slot, op)?;
        self.mbar[slot].tx += bytes as i64;
        self.mbar_check(slot);
        Ok(())
    }

    /// `mbar_wait` on a parity: passes when the phase of that parity has completed (acquiring
    /// it), blocks otherwise.
    pub(super) fn mbar_wait(
        &mut self,
        th: &mut Thread,
        op: Op,
        (mbar, index): (MemRef, &[Operand]),
        parity: &Operand,
    ) -> Result<bool, Stop> {
        let t = th.lin as usize;
        let slot = self.mbar_slot(th, mbar, index, op)?;
        self.mbar_use(th, slot, op)?;
        let p = self.int(th, parity) & 1;
        let m = &mut self.mbar[slot];
        if (m.phases as i64 & 1) != p {
            let vc = m.last_vc.clone();
            self.race.acquire(t, &vc);
            Ok(true)
        } else {
            m.waiters.push(t);
            th.status = Status::Blocked(Blocked::Mbar(slot, p, op));
            Ok(false)
        }
    }

    pub(super) fn mbar_inval(
        &mut self,
        th: &Thread,
        op: Op,
        (mbar, index): (MemRef, &[Operand]),
    ) -> Result<(), Stop> {
        let slot = self.mbar_slot(th, mbar, index, op)?;
        self.mbar[slot].init = false;
        Ok(())
    }
}
