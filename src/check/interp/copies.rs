//! The interpreter's asynchronous copies (docs/ir.md section 4): issue (`cp_async`,
//! `gather_to_lds`, their tile forms, `tdm_load`, `tma_load`, `tma_store`), the engine that
//! performs them, and their completion by group waits, counter waits and token waits.
//!
//! A copy reads its global source at issue; its shared write (or, for a TMA store, its shared
//! read) is *performed* once, by [`BlockExec::perform`], at the moment the engine policy
//! picks; the race detector records the access at issue as spanning issue to completion, so
//! the verdict does not depend on that moment. Invariants: a copy is performed at most once
//! and completed at most once; threads that issue the same tile in the same iteration share
//! one data set and one record. Complexity: O(elements) per copy issued and performed.

use super::*;

impl BlockExec<'_> {
    pub(super) fn new_copy(&mut self, th: &Thread, op: Op, p: PendingCopy) -> u32 {
        let c = self.race.new_copy();
        self.copy_ops.insert(c, (op, th.lin as usize));
        self.copies.insert(c, p);
        self.unperformed.push(c);
        c
    }

    /// Performs a copy's memory effect (once).
    pub(super) fn perform(&mut self, c: u32) -> Result<(), Stop> {
        let Some(p) = self.copies.remove(&c) else {
            return Ok(());
        };
        self.unperformed.retain(|x| *x != c);
        if !p.writes.1.get() {
            p.writes.1.set(true);
            for (b, e, v) in &p.writes.0 {
                self.write_smem(*b, *e, *v);
            }
        }
        if let Some(store) = &p.store {
            self.perform_store(&p, store)?;
        }
        if let Some((slot, bytes)) = p.mbar {
            if !self.mbar[slot].init {
                return Err(self.issuer_err(
                    &p,
                    "C0011",
                    "TMA completes on an mbarrier that is not initialized".into(),
                ));
            }
            self.mbar[slot].tx -= bytes;
            self.mbar[slot].attached.push(c);
            self.mbar_check(slot);
        }
        Ok(())
    }

    /// A TMA store's effect: the shared elements it reads, written to its global elements.
    fn perform_store(&mut self, p: &PendingCopy, store: &TmaStoreData) -> Result<(), Stop> {
        let (reads, g, gidx) = store;
        let mut vals = Vec::with_capacity(reads.len());
        for (b, e) in reads {
            match self.load_smem(*b, *e) {
                (v, true) => vals.push(v),
                (_, false) => {
                    let msg = format!(
                        "TMA store reads uninitialized shared element of @{}",
                        self.k.buffers[*b].name
                    );
                    return Err(self.issuer_err(p, "C0006", msg));
                }
            }
        }
        let elem = self.globals[g.index()].elem;
        for (i, v) in gidx.iter().zip(vals) {
            self.globals[g.index()].data[*i as usize] = store_conv(elem, v);
        }
        Ok(())
    }

    /// An execution error at a copy's op, in the thread that issued it.
    fn issuer_err(&mut self, p: &PendingCopy, code: &'static str, msg: String) -> Stop {
        let save = self.cur;
        self.cur = p.issuer;
        let err = self.exec_err(p.op, code, msg);
        self.cur = save;
        err
    }

    /// Completes a copy at the waiting thread's current epoch.
    pub(super) fn complete(&mut self, c: u32, t: usize) -> Result<(), Stop> {
        self.perform(c)?;
        let e = self.race.epoch(t);
        self.race.complete(c, t, e);
        Ok(())
    }

    /// `*_commit`: closes `th`'s open group `g` (0 cp.async, 1 bulk, 2 wgmma).
    pub(super) fn commit(&self, th: &mut Thread, g: usize) {
        let open = std::mem::take(&mut th.groups[g].0);
        th.groups[g].1.push(open);
    }

    /// `*_wait N` on group kind `g`.
    pub(super) fn wait_groups(&mut self, th: &mut Thread, g: usize, n: u32) -> Result<(), Stop> {
        // Positional, as in PTX: every committed group older than the N most recent must be
        // complete; an empty group still counts as one of the N.
        let t = th.lin as usize;
        let mut groups = std::mem::take(&mut th.groups[g].1);
        let older = groups.len().saturating_sub(n as usize);
        for grp in groups.drain(..older) {
            for c in grp {
                if !self.race.own_complete(c) {
                    self.complete(c, t)?;
                }
            }
        }
        th.groups[g].1 = groups;
        Ok(())
    }

    /// `waitcnt`: completes the oldest entries of each counter down to its count; a full
    /// wait on an LDS counter also fences the thread's LDS accesses.
    pub(super) fn wait_cnt(&mut self, th: &mut Thread, list: &[(Counter, u32)]) -> Result<(), Stop> {
        let t = th.lin as usize;
        for (c, n) in list {
            let ci = counter_index(*c);
            let mut l = std::mem::take(&mut th.cnt[ci]);
            l.retain(|x| x.is_none_or(|c| !self.race.is_complete(c)));
            while l.len() > *n as usize {
                if let Some(c) = l.remove(0) {
                    self.complete(c, t)?;
                }
            }
            th.cnt[ci] = l;
            if *n == 0 && matches!(c, Counter::DsCnt | Counter::LgkmCnt) {
                self.fence(th);
            }
        }
        Ok(())
    }

    /// `wait_tokens`: completes the copies whose tokens are listed.
    pub(super) fn wait_tokens(&mut self, th: &Thread, toks: &[Value]) -> Result<(), Stop> {
        let t = th.lin as usize;
        for tv in toks {
            if let Val::Token(c) = th.vals[tv.index()] {
                self.complete(c, t)?;
            }
        }
        Ok(())
    }

    /// Where a copy issued by `op` is tracked: cp.async's open group, or the target's counter
    /// for `gather_to_lds` (the generic model: `vmcnt`).
    fn track_copy(&self, th: &mut Thread, op: Op, c: u32) {
        if matches!(
            self.k.ops[op].kind,
            OpKind::CpAsync { .. } | OpKind::CpAsyncTile(_)
        ) {
            th.groups[0].0.push(c);
        } else {
            let ctr = self
                .cfg
                .target
                .and_then(|tg| tg.async_counter(AsyncClass::GatherToLds))
                .unwrap_or(Counter::VmCnt);
            th.cnt[counter_index(ctr)].push(Some(c));
        }
    }

    /// `cp_async_tile` / `gather_to_lds_tile`: each thread copies its elements of the view.
    pub(super) fn tile_copy(&mut self, th: &mut Thread, op: Op, c: &TileCopy) -> Result<(), Stop> {
        let t = th.lin as usize;
        let vi = self.memref(th, c.dst, op)?;
        let mine = self.my_elements(op, t, vi.elements());
        let org: Vec<i64> = c.origin.iter().map(|o| self.int(th, o)).collect();
        let mut writes = Vec::with_capacity(mine.len());
        for &e in mine.iter() {
            let v = match self.tile_element((c.src, &org), &vi.shape, e, c.masked, op)? {
                Some(gi) => self.globals[c.src.index()].data[gi as usize],
                None => Val::I32(0),
            };
            writes.push((vi.buf, vi.element(e), v));
        }
        let p = PendingCopy {
            issuer: t,
            op,
            writes: Rc::new((writes, Cell::new(false))),
            store: None,
            mbar: None,
        };
        let els: Vec<u64> = p.writes.0.iter().map(|w| w.1).collect();
        let cp = self.new_copy(th, op, p);
        for el in els {
            self.record(th, op, (vi.buf, el), AccKind::AsyncWrite, cp)?;
        }
        self.track_copy(th, op, cp);
        self.set(th, op, 0, Val::Token(cp));
        Ok(())
    }

    /// `cp_async` / `gather_to_lds`: one element from global to shared.
    pub(super) fn element_copy(
        &mut self,
        th: &mut Thread,
        op: Op,
        (dst, dst_index): (MemRef, &[Operand]),
        (src, src_index): (Global, &[Operand]),
    ) -> Result<(), Stop> {
        let (b, e) = self.element(th, dst, dst_index, op)?;
        let gi = self.global_index(th, src, src_index, op)?;
        let v = self.globals[src.index()].data[gi];
        let p = PendingCopy {
            issuer: th.lin as usize,
            op,
            writes: Rc::new((vec![(b, e, v)], Cell::new(false))),
            store: None,
            mbar: None,
        };
        let c = self.new_copy(th, op, p);
        self.record(th, op, (b, e), AccKind::AsyncWrite, c)?;
        self.track_copy(th, op, c);
        self.set(th, op, 0, Val::Token(c));
        Ok(())
    }

    /// `tdm_load` / `tma_load`: a whole tile from global to the view, counted by `tensorcnt`
    /// or completing on an mbarrier phase.
    pub(super) fn tile_load(
        &mut self,
        th: &mut Thread,
        op: Op,
        (dst, src, origin): (MemRef, Global, &[Operand]),
    ) -> Result<(), Stop> {
        let vi = self.memref(th, dst, op)?;
        let org: Vec<i64> = origin.iter().map(|o| self.int(th, o)).collect();
        // Threads issuing this op in the same iteration copy the same tile: one record and
        // one data set stand for all of them.
        let key = (op, th.iter, vi.buf, vi.off, org.clone());
        let shared = self.tiles.get(&key).cloned();
        let fresh = shared.is_none();
        let writes = match shared {
            Some(w) => w,
            None => {
                let gidx = self.tile(src, &org, &vi.shape, op)?;
                let mut writes = Vec::with_capacity(gidx.len());
                for (e, gi) in gidx.iter().enumerate() {
                    let v = self.globals[src.index()].data[*gi as usize];
                    writes.push((vi.buf, vi.element(e as u64), v));
                }
                let w = Rc::new((writes, Cell::new(false)));
                self.tiles.insert(key, w.clone());
                w
            }
        };
        let mbar = match &self.k.ops[op].kind {
            OpKind::TmaLoad {
                mbar, mbar_index, ..
            } => {
                let slot = self.mbar_slot(th, *mbar, mbar_index, op)?;
                let bytes = vi.elements() * self.k.buffers[vi.buf].elem.bytes();
                Some((slot, bytes as i64))
            }
            _ => None,
        };
        let p = PendingCopy {
            issuer: th.lin as usize,
            op,
            writes: writes.clone(),
            store: None,
            mbar,
        };
        let c = self.new_copy(th, op, p);
        if fresh {
            for w in &writes.0 {
                self.record(th, op, (vi.buf, w.1), AccKind::AsyncWrite, c)?;
            }
        }
        if mbar.is_none() {
            th.cnt[counter_index(Counter::TensorCnt)].push(Some(c));
        }
        self.set(th, op, 0, Val::Token(c));
        Ok(())
    }

    /// `tma_store`: the view's elements to a global tile, read when performed.
    pub(super) fn tma_store(
        &mut self,
        th: &mut Thread,
        op: Op,
        (dst, origin, src): (Global, &[Operand], MemRef),
    ) -> Result<(), Stop> {
        let vi = self.memref(th, src, op)?;
        let org: Vec<i64> = origin.iter().map(|o| self.int(th, o)).collect();
        let gidx = self.tile(dst, &org, &vi.shape, op)?;
        let reads: Vec<(Buffer, u64)> = (0..vi.elements())
            .map(|e| (vi.buf, vi.element(e)))
            .collect();
        let p = PendingCopy {
            issuer: th.lin as usize,
            op,
            writes: Rc::new((Vec::new(), Cell::new(true))),
            store: Some((reads.clone(), dst, gidx)),
            mbar: None,
        };
        let c = self.new_copy(th, op, p);
        for (b, el) in reads {
            self.record(th, op, (b, el), AccKind::AsyncRead, c)?;
        }
        th.groups[1].0.push(c);
        Ok(())
    }
}
