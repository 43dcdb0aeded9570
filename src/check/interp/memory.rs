//! The interpreter's memory: views, shared and global element addressing, the block's shared
//! bytes, the race detector's records and witnesses, and the ops that access memory
//! synchronously (`view`, `load`, `store`, `atomic`, `local_load`/`local_store`, `gload`,
//! `gstore`, `gatomic`).
//!
//! Invariants: every shared access is recorded with the race detector before its data moves
//! (a race is reported before the value it would read); an index out of range is a C0004
//! execution error at the op, never a wrapped address. Complexity: O(rank) per element
//! access; O(view elements / threads) per collective access.

use super::scalar::atomic;
use super::*;

impl BlockExec<'_> {
    pub(super) fn memref(&self, th: &Thread, m: MemRef, op: Op) -> Result<ViewInst, Stop> {
        match m {
            MemRef::Buffer(b) => {
                let shape = self.k.buffers[b].shape.clone();
                Ok(ViewInst {
                    buf: b,
                    off: 0,
                    strides: strides(&shape),
                    shape,
                })
            }
            MemRef::View(v) => th.views[v.index()].clone().ok_or_else(|| {
                self.exec_err(
                    op,
                    "C0004",
                    format!(
                        "view {} used before it is defined",
                        self.k.view_names.get(v)
                    ),
                )
            }),
        }
    }

    pub(super) fn element(
        &self,
        th: &Thread,
        m: MemRef,
        index: &[Operand],
        op: Op,
    ) -> Result<(Buffer, u64), Stop> {
        // Borrow the view (no allocation on this hot path); a whole buffer is row-major.
        let (buf, base, shape, strides): (Buffer, u64, &[u64], Option<&[u64]>) = match m {
            MemRef::Buffer(b) => (b, 0, &self.k.buffers[b].shape, None),
            MemRef::View(v) => match th.views[v.index()].as_ref() {
                Some(vi) => (vi.buf, vi.off, &vi.shape, Some(&vi.strides)),
                None => return self.memref(th, m, op).map(|_| (Buffer::new(0), 0)),
            },
        };
        let mut off = 0u64;
        for (d, o) in index.iter().enumerate() {
            let i = self.int(th, o);
            let n = shape.get(d).copied().unwrap_or(0);
            if i < 0 || i as u64 >= n {
                let name = &self.k.buffers[buf].name;
                return Err(self.exec_err(
                    op,
                    "C0004",
                    format!("index {i} out of range 0..{n} in dimension {d} of a view of @{name}"),
                ));
            }
            match strides {
                Some(st) => off += i as u64 * st[d],
                None => off = off * n + i as u64,
            }
        }
        if strides.is_none() {
            // Trailing dimensions not indexed (a rank mismatch the verifier rejects).
            for n in shape.iter().skip(index.len()) {
                off *= n;
            }
        }
        Ok((buf, base + off))
    }

    pub(super) fn global_index(
        &self,
        th: &Thread,
        g: Global,
        index: &[Operand],
        op: Op,
    ) -> Result<usize, Stop> {
        let gm = &self.globals[g.index()];
        let mut off = 0u64;
        for (d, o) in index.iter().enumerate() {
            let i = self.int(th, o);
            let n = gm.shape.get(d).copied().unwrap_or(0);
            if i < 0 || i as u64 >= n {
                return Err(self.exec_err(
                    op,
                    "C0004",
                    format!(
                        "index {i} out of range 0..{n} in dimension {d} of %{}",
                        gm.name
                    ),
                ));
            }
            off = off * n + i as u64;
        }
        Ok(off as usize)
    }

    /// The view elements block thread `t` touches in collective op `op` over `total`
    /// elements: its concrete layout's, or docs/ir.md's mapping `owner(e) = first + (e + n)
    /// mod T` over the layout's threads `[first, first + T)` when opaque (the block's, or a
    /// role-relative layout's group); a thread outside them touches none.
    pub(super) fn my_elements(&self, op: Op, t: usize, total: u64) -> Rc<Vec<u64>> {
        if let Some(per) = self.concrete.get(&op) {
            return Rc::new(per.get(t).cloned().unwrap_or_default());
        }
        let o = self.layouts.get(&op).copied().unwrap_or(setup::OpaqueOwners {
            n: 0,
            first: 0,
            count: self.nthreads as u64,
        });
        let tt = o.count.max(1);
        let Some(rel) = (t as u64).checked_sub(o.first).filter(|r| *r < tt) else {
            return Rc::new(Vec::new());
        };
        let e0 = ((rel + tt) - (o.n % tt)) % tt;
        Rc::new((e0..total).step_by(tt as usize).collect())
    }

    /// The global element a tile copy reads for view element `e` (row-major in `shape`):
    /// `origin` plus the element's coordinates in the trailing dimensions. Out of range is
    /// an error, or `None` (reads as zero) when the copy is `masked`.
    pub(super) fn tile_element(
        &self,
        (g, origin): (Global, &[i64]),
        shape: &[u64],
        e: u64,
        masked: bool,
        op: Op,
    ) -> Result<Option<u64>, Stop> {
        let gm = &self.globals[g.index()];
        let r = gm.shape.len();
        let k1 = shape.len();
        let mut coord = vec![0u64; k1];
        let mut rest = e;
        for d in (0..k1).rev() {
            coord[d] = rest % shape[d].max(1);
            rest /= shape[d].max(1);
        }
        let mut off = 0u64;
        for d in 0..r {
            let mut i = origin.get(d).copied().unwrap_or(0);
            if d + k1 >= r {
                i += coord[d + k1 - r] as i64;
            }
            if i < 0 || i as u64 >= gm.shape[d] {
                if masked {
                    return Ok(None);
                }
                return Err(self.exec_err(
                    op,
                    "C0004",
                    format!(
                        "tile element {i} out of range 0..{} in dimension {d} of %{} (only a `masked` tile copy reads zero out of range)",
                        gm.shape[d], gm.name
                    ),
                ));
            }
            off = off * gm.shape[d] + i as u64;
        }
        Ok(Some(off))
    }

    /// Global elements of a tile copy with view shape `shape` at `origin`.
    pub(super) fn tile(
        &self,
        g: Global,
        origin: &[i64],
        shape: &[u64],
        op: Op,
    ) -> Result<Vec<u64>, Stop> {
        let gm = &self.globals[g.index()];
        let r = gm.shape.len();
        let k1 = shape.len();
        if r < k1 || origin.len() != r {
            return Err(self.exec_err(
                op,
                "C0004",
                format!(
                    "tile of rank {k1} does not fit global %{} of rank {r}",
                    gm.name
                ),
            ));
        }
        let e: u64 = shape.iter().product();
        (0..e)
            .map(|i| {
                let off = self.tile_element((g, origin), shape, i, false, op)?;
                Ok(off.expect("an unmasked tile element is in range or an error"))
            })
            .collect()
    }

    /// The race detector's record of an access of `th` (or of copy `copy` it issued) at `op`
    /// to buffer number `buf`: its thread, epoch, iteration and fences now.
    pub(super) fn access_of(&self, th: &Thread, op: Op, kind: AccKind, copy: u32, buf: u32) -> Acc {
        let t = th.lin as usize;
        Acc {
            thread: th.lin,
            clock: self.race.epoch(t),
            op,
            iter: th.iter,
            kind,
            copy,
            fences: self.race.fences(t),
            buf,
        }
    }

    /// The race detector's cells of element `elem` of `buf`: the first cell and how many
    /// (a buffer's elements are `per` cells of its granule each).
    pub(super) fn cells(&self, buf: Buffer, elem: u64) -> (usize, usize) {
        let (g0, per) = self.gran[buf.index()];
        (g0 + elem as usize * per, per)
    }

    /// Records an access of `th` (or of copy `copy` it issued) to a shared element with the
    /// race detector; a conflict becomes a [`Stop::Race`] with its witness.
    pub(super) fn record(
        &mut self,
        th: &Thread,
        op: Op,
        (buf, elem): (Buffer, u64),
        kind: AccKind,
        copy: u32,
    ) -> Result<(), Stop> {
        if !self.cfg.detect_races {
            return Ok(());
        }
        let acc = self.access_of(th, op, kind, copy, buf.index() as u32);
        // wgmma operands and TMA copies go through the async proxy (cp.async does not).
        let async_proxy = matches!(
            self.k.ops[op].kind,
            OpKind::Wgmma { .. } | OpKind::TmaLoad { .. } | OpKind::TmaStore { .. }
        );
        let (cell, per) = self.cells(buf, elem);
        match self.race.access_proxy(cell, per, acc, async_proxy) {
            Ok(()) => Ok(()),
            Err(c) => Err(Stop::Race(Box::new(self.witness(c, buf, elem)))),
        }
    }

    fn site(&self, a: &Acc) -> AccessSite {
        let k = self.k;
        let t = a.thread;
        let parents = k.parents();
        let mut loops: Vec<String> = parents
            .ancestors(a.op)
            .into_iter()
            .filter_map(|p| match &k.ops[p].kind {
                OpKind::For { .. } => Some(format!(
                    "%{}",
                    k.value_name(k.region_args(k.ops[p].regions[0])[0])
                )),
                OpKind::While { .. } => Some("while iteration".to_string()),
                _ => None,
            })
            .collect();
        loops.reverse();
        let vals = self
            .iter_list
            .get(a.iter as usize)
            .cloned()
            .unwrap_or_default();
        AccessSite {
            op: a.op,
            span: k.span(a.op),
            thread: a.thread,
            thread_xyz: xyz_of(k, t),
            by_engine: a.copy != NO_COPY,
            kind: a.kind,
            iteration: loops.into_iter().zip(vals).collect(),
        }
    }

    pub(super) fn witness(&self, c: Conflict, buf: Buffer, elem: u64) -> Witness {
        let first = self.site(&c.earlier);
        let second = self.site(&c.later);
        let shape = &self.k.buffers[buf].shape;
        let mut index = vec![0u64; shape.len()];
        let mut e = elem;
        for d in (0..shape.len()).rev() {
            index[d] = e % shape[d].max(1);
            e /= shape[d].max(1);
        }
        Witness {
            first,
            second,
            buffer: self.k.buffers[buf].name.clone(),
            index,
            block_id: self.bid,
            missing_fence: c.missing_fence,
        }
    }

    /// The value of a shared element from the block's shared bytes, and whether every one of
    /// its bytes was written (bytes never written read as 0).
    pub(super) fn load_smem(&self, buf: Buffer, elem: u64) -> (Val, bool) {
        let (base, n, ty) = self.place[buf.index()];
        let a = base + elem as usize * n;
        match (self.smem.get(a..a + n), self.written.get(a..a + n)) {
            (Some(b), Some(w)) => (decode_elem(ty, b), w.iter().all(|x| *x)),
            _ => (decode_elem(ty, &[0; 4]), false),
        }
    }

    /// Reads a shared element. An element with a byte never written is uninitialized: it
    /// reads with those bytes as 0 and the error is deferred (a later unordered write would
    /// make it a race, which takes precedence).
    pub(super) fn read_smem(&mut self, buf: Buffer, elem: u64, op: Op) -> Result<Val, Stop> {
        let (v, init) = self.load_smem(buf, elem);
        if !init {
            let shape = &self.k.buffers[buf].shape;
            let idx = unlinear(elem, shape);
            let e = self.exec_err(
                op,
                "C0006",
                format!(
                    "read of uninitialized shared element @{}{:?}",
                    self.k.buffers[buf].name, idx
                ),
            );
            self.defer(e);
        }
        Ok(v)
    }

    /// Stores `v` to a shared element: its bytes in the element type's encoding.
    pub(super) fn write_smem(&mut self, buf: Buffer, elem: u64, v: Val) {
        let (base, n, ty) = self.place[buf.index()];
        let a = base + elem as usize * n;
        if let Some(b) = self.smem.get_mut(a..a + n) {
            encode_elem(ty, v, b);
            self.written[a..a + n].fill(true);
        }
    }

    // ---------------------------------------------------------------- ops

    /// `%v = view base[...]`: evaluates the view's indices for `th` (C0004 out of range).
    pub(super) fn view_def(&self, th: &mut Thread, op: Op, v: View) -> Result<(), Stop> {
        let vd = &self.k.views[v];
        let base = self.memref(th, vd.base, op)?;
        let mut off = base.off;
        let mut shape = Vec::new();
        let mut st = Vec::new();
        for (d, ix) in vd.indices.iter().enumerate() {
            let n = base.shape.get(d).copied().unwrap_or(0);
            match ix {
                ViewIndex::At(o) => {
                    let i = self.int(th, o);
                    if i < 0 || i as u64 >= n {
                        return Err(self.exec_err(
                            op,
                            "C0004",
                            format!("view index {i} out of range 0..{n} in dimension {d}"),
                        ));
                    }
                    off += i as u64 * base.strides[d];
                }
                ViewIndex::Range(lo, hi) => {
                    if lo > hi || *hi > n {
                        return Err(self.exec_err(
                            op,
                            "C0004",
                            format!("view range {lo}:{hi} out of range 0..{n} in dimension {d}"),
                        ));
                    }
                    off += lo * base.strides[d];
                    shape.push(hi - lo);
                    st.push(base.strides[d]);
                }
            }
        }
        let used = vd.indices.len().min(base.shape.len());
        shape.extend_from_slice(&base.shape[used..]);
        st.extend_from_slice(&base.strides[used..]);
        th.views[v.index()] = Some(ViewInst {
            buf: base.buf,
            off,
            shape,
            strides: st,
        });
        Ok(())
    }

    pub(super) fn load(
        &mut self,
        th: &mut Thread,
        op: Op,
        (mem, index): (MemRef, &[Operand]),
    ) -> Result<(), Stop> {
        let (b, e) = self.element(th, mem, index, op)?;
        self.record(th, op, (b, e), AccKind::Read, NO_COPY)?;
        th.lds_unfenced = true;
        let v = self.read_smem(b, e, op)?;
        self.set(th, op, 0, v);
        Ok(())
    }

    pub(super) fn store(
        &mut self,
        th: &mut Thread,
        op: Op,
        (mem, index): (MemRef, &[Operand]),
        value: &Operand,
    ) -> Result<(), Stop> {
        let (b, e) = self.element(th, mem, index, op)?;
        self.record(th, op, (b, e), AccKind::Write, NO_COPY)?;
        th.lds_unfenced = true;
        let v = self.val(th, value);
        self.write_smem(b, e, v);
        Ok(())
    }

    /// `%old = atomic <a> mem[index], value` on shared memory.
    pub(super) fn shared_atomic(
        &mut self,
        th: &mut Thread,
        op: Op,
        (a, mem, index): (AtomicOp, MemRef, &[Operand]),
        value: &Operand,
    ) -> Result<(), Stop> {
        let (b, e) = self.element(th, mem, index, op)?;
        self.record(th, op, (b, e), AccKind::Atomic(a), NO_COPY)?;
        th.lds_unfenced = true;
        let old = self.read_smem(b, e, op)?;
        let x = self.val(th, value);
        self.write_smem(b, e, atomic(a, old, x));
        self.set(th, op, 0, old);
        Ok(())
    }

    /// `local_store value -> mem`: each of `th`'s elements gets `value + e` (e: the element's
    /// index in the view), so every element of the view holds a distinct value.
    pub(super) fn local_store(
        &mut self,
        th: &mut Thread,
        op: Op,
        mem: MemRef,
        value: &Operand,
    ) -> Result<(), Stop> {
        let vi = self.memref(th, mem, op)?;
        let mine = self.my_elements(op, th.lin as usize, vi.elements());
        th.lds_unfenced = true;
        let x = self.val(th, value);
        for &e in mine.iter() {
            let el = vi.element(e);
            self.record(th, op, (vi.buf, el), AccKind::Write, NO_COPY)?;
            let v = match x {
                Val::F32(f) => Val::F32(f + e as f32),
                other => Val::I32((other.as_i64() as i32).wrapping_add(e as i32)),
            };
            self.write_smem(vi.buf, el, v);
        }
        Ok(())
    }

    /// `%r = local_load mem`: the sum of `th`'s elements of the view.
    pub(super) fn local_load(&mut self, th: &mut Thread, op: Op, mem: MemRef) -> Result<(), Stop> {
        let vi = self.memref(th, mem, op)?;
        let mine = self.my_elements(op, th.lin as usize, vi.elements());
        th.lds_unfenced = true;
        let ty = self.k.ops[op]
            .results
            .first()
            .map_or(ScalarType::F32, |r| self.k.values[*r].ty);
        let mut acc = Val::I32(0).to_ty(ty);
        for &e in mine.iter() {
            let el = vi.element(e);
            self.record(th, op, (vi.buf, el), AccKind::Read, NO_COPY)?;
            let v = self.read_smem(vi.buf, el, op)?;
            acc = binary(BinOp::Add, ty, acc, v.to_ty(ty)).unwrap_or(acc);
        }
        self.set(th, op, 0, acc);
        Ok(())
    }

    /// `%v = gload global[index]`: also counted on the target's global-load counter.
    pub(super) fn gload(
        &self,
        th: &mut Thread,
        op: Op,
        (global, index): (Global, &[Operand]),
    ) -> Result<(), Stop> {
        let i = self.global_index(th, global, index, op)?;
        let v = self.globals[global.index()].data[i];
        self.set(th, op, 0, v);
        let c = match self.cfg.target {
            Some(tg) => tg.global_load_counter(),
            None => Some(Counter::VmCnt),
        };
        if let Some(c) = c {
            th.cnt[counter_index(c)].push(None);
        }
        Ok(())
    }

    pub(super) fn gstore(
        &mut self,
        th: &Thread,
        op: Op,
        (global, index): (Global, &[Operand]),
        value: &Operand,
    ) -> Result<(), Stop> {
        let i = self.global_index(th, global, index, op)?;
        let v = self.val(th, value);
        let e = self.globals[global.index()].elem;
        self.globals[global.index()].data[i] = store_conv(e, v);
        Ok(())
    }

    /// `%old = gatomic <a> global[index], value`.
    pub(super) fn global_atomic(
        &mut self,
        th: &mut Thread,
        op: Op,
        (a, global, index): (AtomicOp, Global, &[Operand]),
        value: &Operand,
    ) -> Result<(), Stop> {
        let i = self.global_index(th, global, index, op)?;
        let x = self.val(th, value);
        let g = &mut self.globals[global.index()];
        let old = g.data[i];
        g.data[i] = store_conv(g.elem, atomic(a, old, x));
        self.set(th, op, 0, old);
        Ok(())
    }
}
