//! Memory ops of the execution-error obligations (`check/proof_exec.rs`): views, per-thread
//! element accesses and whole-view (collective, TMA, TDM, wgmma) accesses — their indices
//! against their dimensions (C0004) and their reads against the initialized elements
//! (C0006); writes of must threads at one known element initialize it. Complexity: O(threads
//! x rank) per element access, O(view elements) per distinct view offset of a whole-view one.

use std::rc::Rc;

use super::{Eval, MUST, Mask, NOT, Obligation, SOME, ViewAbs};
use crate::check::exec_values::{Abs, Iv};
use crate::ir::*;

#[derive(Copy, Clone, PartialEq, Eq)]
enum Kind {
    /// Indices only (mbarrier ops).
    Index,
    Read,
    Write,
    ReadWrite,
}

/// Who performs a whole-view write: the threads of a layout together (each element by its
/// owner: the block's threads, or a role-relative layout's group), or the copy engine for
/// the issuing thread.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Who {
    Collective(Option<Group>),
    Issuer,
}

/// Row-major strides of a shape.
fn row_major(shape: &[u64]) -> Vec<u64> {
    let mut st = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * shape[d + 1];
    }
    st
}

impl Eval<'_> {
    fn resolve(&mut self, op: Op, m: MemRef) -> Option<Rc<ViewAbs>> {
        match m {
            MemRef::Buffer(b) => {
                let shape = self.k.buffers[b].shape.clone();
                Some(Rc::new(ViewAbs {
                    buf: b,
                    off: Abs::Uni(Iv::point(0)),
                    strides: row_major(&shape),
                    shape,
                }))
            }
            MemRef::View(v) => {
                let r = self.views[v.index()].clone();
                if r.is_none() {
                    self.not_shown(Obligation::InBounds, op, || {
                        "a view used where it may not be defined".into()
                    });
                }
                r
            }
        }
    }

    /// `view base[...]`: each index within its dimension, each range within the shape.
    pub(super) fn view_def(&mut self, op: Op, v: View, mask: &Mask) {
        let k = self.k;
        let vd = &k.views[v];
        let Some(base) = self.resolve(op, vd.base) else {
            self.views[v.index()] = None;
            return;
        };
        let mut off = base.off.clone();
        let (mut shape, mut st) = (Vec::new(), Vec::new());
        for (d, ix) in vd.indices.iter().enumerate() {
            let nd = base.shape.get(d).copied().unwrap_or(0);
            let sd = base.strides.get(d).copied().unwrap_or(0) as i128;
            match ix {
                ViewIndex::At(o) => {
                    let i = self.operand(o);
                    self.in_range(op, o, nd, d, mask);
                    off = Abs::map(&[&off, &i], self.n, |x| {
                        let (lo, hi) = clamp(x[1], nd);
                        Iv::fit(x[0].lo as i128 + lo * sd, x[0].hi as i128 + hi * sd)
                    });
                }
                ViewIndex::Range(lo, hi) => {
                    if lo > hi || *hi > nd {
                        self.not_shown(Obligation::InBounds, op, || {
                            format!("view range {lo}:{hi} outside 0..{nd} in dimension {d}")
                        });
                    }
                    off = Abs::map(&[&off], self.n, |x| {
                        Iv::fit(x[0].lo as i128 + *lo as i128 * sd, x[0].hi as i128 + *lo as i128 * sd)
                    });
                    shape.push(hi.saturating_sub(*lo));
                    st.push(sd as u64);
                }
            }
        }
        let used = vd.indices.len().min(base.shape.len());
        shape.extend_from_slice(&base.shape[used..]);
        st.extend_from_slice(&base.strides[used..]);
        self.views[v.index()] = Some(Rc::new(ViewAbs {
            buf: base.buf,
            off,
            shape,
            strides: st,
        }));
    }

    /// Reports C0004 when index `o` may leave `0..nd` in a thread that may execute `op`.
    fn in_range(&mut self, op: Op, o: &Operand, nd: u64, d: usize, mask: &Mask) -> bool {
        let i = self.operand(o);
        let ok = |x: Iv| x.lo >= 0 && x.hi < nd as i64;
        let mut bad = (0..self.n)
            .find(|&t| mask[t] != NOT && !ok(i.at(t)))
            .map(|t| (t, i.at(t)));
        if self.wide && bad.is_some() && !self.already(Obligation::InBounds, op) {
            // The hull leaves the dimension: thread by thread (`%t xor 1`, `%t rem 3`).
            bad = self.thread_fails(o, ok);
        }
        if let Some((t, x)) = bad {
            self.not_shown(Obligation::InBounds, op, || {
                format!(
                    "index in [{}, {}] (thread {t}) in dimension {d} of size {nd}",
                    x.lo, x.hi
                )
            });
        }
        bad.is_none()
    }

    /// The memory ops; false for every other op.
    pub(super) fn memory(&mut self, op: Op, mask: &Mask) -> bool {
        let k = self.k;
        use Kind::*;
        use Who::*;
        match &k.ops[op].kind {
            OpKind::Load { mem, index } => self.element(op, *mem, index, mask, Read),
            OpKind::Store { mem, index, .. } => self.element(op, *mem, index, mask, Write),
            OpKind::Atomic { mem, index, .. } => self.element(op, *mem, index, mask, ReadWrite),
            OpKind::CpAsync { dst, dst_index, .. } | OpKind::GatherToLds { dst, dst_index, .. } => {
                self.element(op, *dst, dst_index, mask, Write)
            }
            OpKind::LocalLoad { mem, .. } => self.whole(op, *mem, mask, Read, Collective(None)),
            OpKind::LocalStore { mem, layout, .. } => {
                let g = self.layout_group(layout.as_deref());
                self.whole(op, *mem, mask, Write, Collective(g))
            }
            OpKind::CpAsyncTile(tc) | OpKind::GatherToLdsTile(tc) => {
                let g = self.layout_group(tc.layout.as_deref());
                self.whole(op, tc.dst, mask, Write, Collective(g))
            }
            OpKind::TmaLoad {
                dst,
                mbar,
                mbar_index,
                ..
            } => {
                self.element(op, *mbar, mbar_index, mask, Index);
                self.whole(op, *dst, mask, Write, Issuer)
            }
            OpKind::TdmLoad { dst, .. } => self.whole(op, *dst, mask, Write, Issuer),
            OpKind::TmaStore { src, .. } => self.whole(op, *src, mask, Read, Issuer),
            OpKind::Wgmma { a, b, .. } => {
                if let WgmmaA::Shared(m) = a {
                    self.whole(op, *m, mask, Read, Collective(None));
                }
                self.whole(op, *b, mask, Read, Collective(None))
            }
            OpKind::MbarInit { mbar, index, .. }
            | OpKind::MbarArrive { mbar, index, .. }
            | OpKind::MbarExpectTx { mbar, index, .. }
            | OpKind::MbarWait { mbar, index, .. }
            | OpKind::MbarInval { mbar, index } => self.element(op, *mbar, index, mask, Index),
            _ => return false,
        }
        for &r in &k.ops[op].results {
            self.set(r, Abs::TOP);
        }
        true
    }

    /// A per-thread access of one element.
    fn element(&mut self, op: Op, mem: MemRef, index: &[Operand], mask: &Mask, kind: Kind) {
        let Some(v) = self.resolve(op, mem) else {
            return;
        };
        if index.len() != v.shape.len() {
            self.not_shown(Obligation::InBounds, op, || {
                "an index of another rank than the view".into()
            });
            return;
        }
        let idx: Vec<Abs> = index.iter().map(|o| self.operand(o)).collect();
        for (d, o) in index.iter().enumerate() {
            self.in_range(op, o, v.shape[d], d, mask);
        }
        self.work += self.n as u64;
        if kind == Kind::Index || self.dry {
            return;
        }
        if self.wide {
            return self.element_wide(op, &v, index, mask, kind);
        }
        let mut checked = None;
        for t in 0..self.n {
            if mask[t] == NOT {
                continue;
            }
            let o = v.off.at(t);
            let (mut lo, mut hi) = (o.lo as i128, o.hi as i128);
            for (d, i) in idx.iter().enumerate() {
                let (l, h) = clamp(i.at(t), v.shape[d]);
                lo += l * v.strides[d] as i128;
                hi += h * v.strides[d] as i128;
            }
            // Threads often check the same elements (a uniform index): once per run of them.
            let fresh = checked != Some((lo, hi));
            checked = Some((lo, hi));
            if kind != Kind::Write && fresh && !self.initialized(v.buf, lo, hi) {
                let name = &self.k.buffers[v.buf].name;
                self.not_shown(Obligation::Initialized, op, || {
                    format!("element {lo}..={hi} of @{name} (thread {t}) not written before on every path")
                });
            }
            if kind != Kind::Read && mask[t] == MUST && lo == hi {
                self.mark(v.buf, lo);
            }
        }
    }

    /// [`Self::element`]'s reads and writes in the block-wide walk: the element interval of
    /// every thread at once, thread by thread where that is not initialized; a write that
    /// every thread executes initializes each thread's element (`wide.rs`).
    fn element_wide(&mut self, op: Op, v: &ViewAbs, index: &[Operand], mask: &Mask, kind: Kind) {
        let off = v.off.at(0);
        // The element interval of the access with index intervals `at`; None: not executed.
        let span = |at: &dyn Fn(&Operand) -> Option<Iv>| {
            let (mut lo, mut hi) = (off.lo as i128, off.hi as i128);
            for (d, o) in index.iter().enumerate() {
                let (l, h) = clamp(at(o)?, v.shape[d]);
                lo += l * v.strides[d] as i128;
                hi += h * v.strides[d] as i128;
            }
            Some((lo, hi))
        };
        let hull = span(&|o| Some(self.operand(o).at(0)));
        let uninit = |s: &(i128, i128)| !self.initialized(v.buf, s.0, s.1);
        let open = !self.already(Obligation::Initialized, op);
        if kind != Kind::Write && mask[0] != NOT && open && hull.as_ref().is_some_and(uninit) {
            let bad = (0..self.threads)
                .find_map(|t| span(&|o| self.at_thread(o, t)).filter(uninit).map(|s| (t, s)));
            if let Some((t, (lo, hi))) = bad {
                let name = &self.k.buffers[v.buf].name;
                self.not_shown(Obligation::Initialized, op, || {
                    format!("element {lo}..={hi} of @{name} (thread {t}) not written before on every path")
                });
            }
        }
        if kind == Kind::Read || !off.is_point() || !(mask[0] == MUST || mask[0] == SOME) {
            return;
        }
        match hull {
            // One element, the same in every thread: written when some thread executes.
            Some((lo, hi)) if lo == hi => self.mark(v.buf, lo),
            _ if mask[0] == MUST => {
                let dims = (&v.shape[..], &v.strides[..]);
                for e in self.thread_elements(index, off.lo as i128, dims).iter() {
                    self.mark(v.buf, *e);
                }
            }
            _ => {}
        }
    }

    /// An access of every element of a view.
    fn whole(&mut self, op: Op, mem: MemRef, mask: &Mask, kind: Kind, who: Who) {
        let Some(v) = self.resolve(op, mem) else {
            return;
        };
        if self.dry {
            return;
        }
        let mut rel = vec![0i128];
        for (d, &nd) in v.shape.iter().enumerate() {
            let s = v.strides[d] as i128;
            rel = rel
                .iter()
                .flat_map(|r| (0..nd as i128).map(move |i| r + i * s))
                .collect();
        }
        self.work += rel.len() as u64;
        let (rmin, rmax) = (rel.iter().min().copied(), rel.iter().max().copied());
        let (Some(rmin), Some(rmax)) = (rmin, rmax) else {
            return;
        };
        let mut last = None;
        for t in 0..self.n {
            let o = v.off.at(t);
            if mask[t] == NOT || last == Some(o) {
                continue;
            }
            last = Some(o);
            if kind == Kind::Read {
                let ok = if o.is_point() {
                    rel.iter().all(|r| self.initialized(v.buf, o.lo as i128 + r, o.lo as i128 + r))
                } else {
                    self.initialized(v.buf, o.lo as i128 + rmin, o.hi as i128 + rmax)
                };
                if !ok {
                    let name = &self.k.buffers[v.buf].name;
                    self.not_shown(Obligation::Initialized, op, || {
                        format!("a view of @{name} at offset [{}, {}] (thread {t}) not written before on every path", o.lo, o.hi)
                    });
                }
            }
        }
        if kind == Kind::Write {
            self.write_whole(&v, &rel, mask, who);
        }
    }

    fn write_whole(&mut self, v: &ViewAbs, rel: &[i128], mask: &Mask, who: Who) {
        let n = self.n;
        let base = match who {
            // Block-wide: every thread executes it, or (an issuer) at least one does.
            _ if self.wide => {
                let o = v.off.at(0);
                let runs = mask[0] == MUST || (mask[0] == SOME && who == Who::Issuer);
                (runs && o.is_point()).then_some(o.lo)
            }
            Who::Collective(g) => {
                let (lo, hi) = g.map_or((0, n), |g| {
                    let gd = &self.k.groups[g];
                    (gd.lo as usize, (gd.hi as usize).min(n))
                });
                let all = lo < hi && (lo..hi).all(|t| mask[t] == MUST);
                let o = v.off.at(lo.min(n.saturating_sub(1)));
                let same = (lo..hi).all(|t| v.off.at(t) == o);
                (all && same && o.is_point()).then_some(o.lo)
            }
            Who::Issuer => (0..n)
                .find(|&t| mask[t] == MUST && v.off.at(t).is_point())
                .map(|t| v.off.at(t).lo),
        };
        if let Some(b) = base {
            for r in rel {
                self.mark(v.buf, b as i128 + r);
            }
        }
    }

    /// The group a role-relative layout numbers its threads in (None: the block's).
    fn layout_group(&self, layout: Option<&str>) -> Option<Group> {
        layout.and_then(|l| self.k.layout_def(l)).and_then(|d| d.group)
    }

    /// Whether every element in `lo..=hi` of `b` is initialized.
    fn initialized(&self, b: Buffer, lo: i128, hi: i128) -> bool {
        let bits = &self.init[b.index()];
        let total = self.k.buffers[b].elements() as i128;
        if lo < 0 || hi >= total || lo > hi {
            return false;
        }
        all_set(bits, lo as usize, hi as usize)
    }

    fn mark(&mut self, b: Buffer, e: i128) {
        let total = self.k.buffers[b].elements() as i128;
        if (0..total).contains(&e) {
            self.init[b.index()][(e / 64) as usize] |= 1 << (e % 64);
        }
    }
}

/// Whether bits `lo..=hi` (`lo <= hi`, within `bits`) are all set: whole 64-bit words at a
/// time, with masks for the partial words at either end.
fn all_set(bits: &[u64], lo: usize, hi: usize) -> bool {
    let (wl, wh) = (lo / 64, hi / 64);
    let from = !0u64 << (lo % 64);
    let to = !0u64 >> (63 - hi % 64);
    if wl == wh {
        let m = from & to;
        return bits[wl] & m == m;
    }
    bits[wl] & from == from && bits[wl + 1..wh].iter().all(|&w| w == !0) && bits[wh] & to == to
}

/// An index interval clamped to `0..nd` (an index outside stops the execution before the
/// access, and is reported as C0004).
fn clamp(i: Iv, nd: u64) -> (i128, i128) {
    let top = nd as i128 - 1;
    ((i.lo as i128).clamp(0, top.max(0)), (i.hi as i128).clamp(0, top.max(0)))
}
