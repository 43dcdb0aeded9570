//! Happens-before race detection over one interpreted execution of a block.
//!
//! What it computes: for every shared-memory access the interpreter performs, whether an
//! earlier access to the same bytes is unordered with it (a race, docs/ir.md section 5), and
//! if so a [`Witness`] naming both accesses.
//!
//! Model. Every thread of the block owns a slot of a vector clock, and so does every mbarrier
//! object (its clock counts completed phases). A thread's clock `VC_t` says, for every slot,
//! up to which epoch the thread has synchronized with it. Sync ops act on clocks held by sync
//! objects: a *release* joins `VC_t` into the object and then advances the thread's own epoch;
//! an *acquire* joins the object into `VC_t`. An access by thread `t` is recorded with the
//! epoch `(t, VC_t[t])`; it happens before an access by `u` iff `epoch <= VC_u[t]`.
//!
//! Async copies are a pseudo-thread whose access spans the interval from issue to completion:
//! at issue the copy is checked against the shadow state with the issuing thread's clock
//! (everything before it must happen before the issue), and it is recorded with a *pending*
//! completion. A later access is ordered after it only once a wait has completed the copy,
//! with completion epoch `(slot, clock)` (the waiting thread's slot, or the mbarrier slot of
//! the phase its bytes completed), and that epoch reaches the accessing thread.
//!
//! Shadow state: per shared granule (the smallest element size of any data buffer, so that
//! aliasing pinned buffers are compared byte-wise), the set of writes not yet superseded
//! (several only for commuting atomics of one kind) and the reads since. Copies are never
//! merged here: two copies that write one element race unless one happens before the other,
//! whatever the data (docs/ir.md section 5). The one collective transfer that several threads
//! issue together (`tma_load`/`tdm_load` of one op, iteration and tile) is recorded once, by
//! its first issuer, before it reaches this detector (`interp::copies`). A read drops
//! earlier reads that happen before it (they are implied), a write clears both sets.
//!
//! Proxy fences (sm_90). Shared memory has two proxies: threads' ordinary accesses use the
//! generic proxy, wgmma operand reads and TMA copies the async proxy. A generic write `w` by
//! thread `t` is visible to a later async-proxy access issued by `u` only when `t` executed a
//! `fence_proxy_async` after `w` and that fence happens before the issue. Each thread keeps
//! the epochs of its fences in execution order and each access the number of fences its
//! thread had executed before it (`Acc::fences`), so "the first fence after `w`" is
//! `fences[t][w.fences]`, and the condition is `fences[t][w.fences] <= VC_u[t]`. An
//! async-proxy access that finds an unsuperseded generic write ordered before it but not
//! fenced reports a [`Conflict`] with `missing_fence` set (docs/checker.md). Complexity: O(1)
//! per such write; O(fences executed) memory.
//!
//! Shared reads of a group (wgmma operands). The threads that execute one `wgmma` in one
//! iteration on the same operand views all read every element of them: each is a copy of
//! its own (completed by its own waits), but the reads are recorded in the cells once, by the
//! first issuer, as a *group* copy whose members are the issuers' reads ([`RaceState::new_group`],
//! [`RaceState::join_group`]). A group read is ordered before a later access iff every
//! member joined so far is (what the members' own reads in each cell would give: a later
//! access is checked against the reads recorded before it); a conflict names the first
//! member that is not ordered. A member joins only when the cells still hold the group read
//! (a write, or a read that implied it, marks the group *broken*: later issuers record their
//! reads element by element, as every issuer did before) and its issue is ordered after every
//! write in the view's cells (checked on the distinct writes, [`RaceState::conflict_in`]);
//! otherwise it records element by element, which reports the race exactly as before. Cost:
//! O(elements) once per group plus O(distinct writes) per member, instead of
//! O(elements x issuers).
//!
//! Collective completion (a wgmma's MMA, `interp::warpgroup`). The issues of one MMA by the
//! threads of a warpgroup are copies of their own, joined into one *collective*
//! ([`RaceState::new_collective`]); each thread's wait that completes the MMA adds its epoch
//! to the collective ([`RaceState::complete_collective`]), and a member copy is complete, and
//! ordered before an access, when its own completion or *any* of those epochs is (the MMA's
//! reads are done before every one of those waits returns). One completion epoch per copy
//! would not do: the first waiter's epoch says nothing to a later waiter's arrival. A group
//! read's members of one collective are decided once (O(waiters), not O(members x waiters)).
//!
//! Invariant: every recorded access is either ordered before all later recorded accesses or
//! reported. Complexity: O(slots) per release/acquire; O(|writes| + |reads|) per access, where
//! reads are pruned by happens-before so that |reads| is the number of mutually unordered
//! readers. Follows the vector-clock detectors of DJIT+/FastTrack (Flanagan & Freund, 2009),
//! specialised to barrier-synchronized blocks.

use crate::diag::Span;
use crate::ir::{AtomicOp, Op};

/// Marker for "no copy": the access was performed by a thread.
pub const NO_COPY: u32 = u32::MAX;

/// What a recorded access did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AccKind {
    Read,
    Write,
    Atomic(AtomicOp),
    AsyncWrite,
    AsyncRead,
}

impl AccKind {
    pub fn writes(self) -> bool {
        matches!(
            self,
            AccKind::Write | AccKind::Atomic(_) | AccKind::AsyncWrite
        )
    }
    pub fn is_async(self) -> bool {
        matches!(self, AccKind::AsyncWrite | AccKind::AsyncRead)
    }
    pub fn describe(self) -> &'static str {
        match self {
            AccKind::Read => "read",
            AccKind::Write => "write",
            AccKind::Atomic(_) => "atomic",
            AccKind::AsyncWrite => "async write",
            AccKind::AsyncRead => "async read",
        }
    }
}

/// One recorded access.
#[derive(Copy, Clone, Debug)]
pub struct Acc {
    /// The accessing thread, or the issuing thread of a copy.
    pub thread: u32,
    /// The thread's epoch at the access (at issue for a copy).
    pub clock: u32,
    pub op: Op,
    /// Interned iteration vector of the enclosing loops at the access.
    pub iter: u32,
    pub kind: AccKind,
    /// The copy that performs the access, or [`NO_COPY`].
    pub copy: u32,
    /// Number of proxy fences the thread had executed before the access.
    pub fences: u32,
    /// Index of the root buffer accessed ([`NO_BUFFER`] for mbarrier objects).
    pub buf: u32,
}

/// Marker for a copy that stands for no group of reads.
const NO_GROUP: u32 = u32::MAX;

/// Marker for an access to no data buffer (mbarrier objects).
pub const NO_BUFFER: u32 = u32::MAX;

/// Two accesses that never race: same-kind atomics. Two copies of one op by different
/// threads are two writes (docs/ir.md section 5): `cp_async @a[0] <- %X[%t]` from every
/// thread races on `@a[0]`.
fn compatible(a: &Acc, b: &Acc) -> bool {
    matches!((a.kind, b.kind), (AccKind::Atomic(x), AccKind::Atomic(y)) if x == y)
}

/// Shadow state of one granule.
#[derive(Clone, Debug, Default)]
struct Cell {
    writes: Vec<Acc>,
    reads: Vec<Acc>,
}

/// Where a racing access sits, for the witness.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessSite {
    pub op: Op,
    pub span: Span,
    /// Linear thread id (of the issuing thread for a copy).
    pub thread: u32,
    pub thread_xyz: [u32; 3],
    /// Performed by a copy engine (issued by `thread`).
    pub by_engine: bool,
    pub kind: AccKind,
    /// Values of the enclosing loops' induction variables (outermost first); `while` loops
    /// report their iteration number.
    pub iteration: Vec<(String, i64)>,
}

/// A race: two unordered accesses to one element, at least one writing.
#[derive(Clone, Debug, PartialEq)]
pub struct Witness {
    /// The earlier access (in the interpreted schedule).
    pub first: AccessSite,
    /// The later access.
    pub second: AccessSite,
    /// The shared buffer and element index (as the second access names it).
    pub buffer: String,
    pub index: Vec<u64>,
    /// The block the race occurred in.
    pub block_id: [u32; 3],
    /// Not a race between threads: `first` is a generic-proxy write ordered before the
    /// async-proxy access `second`, but its thread did not fence the proxies in between.
    pub missing_fence: bool,
}

/// The raw conflict found by the detector, before it is turned into a [`Witness`].
#[derive(Copy, Clone, Debug)]
pub struct Conflict {
    pub earlier: Acc,
    pub later: Acc,
    /// The accesses are ordered, but `earlier` is a generic-proxy write and `later` an
    /// async-proxy access with no proxy fence of the writer between them.
    pub missing_fence: bool,
}

/// Vector clocks of threads and mbarriers plus the shadow memory of one block.
pub struct RaceState {
    /// Number of slots: threads then mbarriers.
    pub slots: usize,
    /// Thread clocks, flat: thread `t` owns `vc[t*slots..(t+1)*slots]`.
    vc: Vec<u32>,
    /// The clock every thread acquired at the last block-wide barrier.
    base: Vec<u32>,
    /// Thread `t`'s clock is `base` except its own entry (its row is stale): block-wide
    /// barriers then cost O(threads) instead of O(threads x slots).
    lazy: Vec<bool>,
    cells: Vec<Cell>,
    /// Per copy: its completion epoch `(slot, clock)`, or None while pending.
    completion: Vec<Option<(u32, u32)>>,
    /// Per copy: the group it stands for ([`NO_GROUP`] for a copy of one issuer).
    group_of: Vec<u32>,
    /// Per group: the members' own reads (issuer, issue epoch, own copy) in issue order,
    /// and whether some cell lost the group's read.
    groups: Vec<(Vec<Acc>, bool)>,
    /// Per copy: its collective (`NO_GROUP`: none); per collective: the completing epochs.
    collective_of: Vec<u32>,
    collectives: Vec<Vec<(u32, u32)>>,
    /// Per thread: the own epoch at each proxy fence it executed, in order.
    fence_epochs: Vec<Vec<u32>>,
    /// Pairs of buffers (both orders) that alias without an exact element pairing
    /// (`ir::layout::inexact_aliases`, W1004): their bytes may be touched by other threads
    /// than the interpreted row-major ones, so one thread's accesses to the two are not
    /// ordered by program order.
    pub blind: std::collections::HashSet<(u32, u32)>,
}

impl RaceState {
    pub fn new(threads: usize, mbarriers: usize, granules: usize) -> RaceState {
        let slots = threads + mbarriers;
        let mut vc = vec![0u32; threads * slots];
        for t in 0..threads {
            vc[t * slots + t] = 1;
        }
        RaceState {
            slots,
            vc,
            base: vec![0; slots],
            lazy: vec![false; threads],
            cells: vec![Cell::default(); granules],
            completion: Vec::new(),
            group_of: Vec::new(),
            groups: Vec::new(),
            collective_of: Vec::new(),
            collectives: Vec::new(),
            fence_epochs: vec![Vec::new(); threads],
            blind: Default::default(),
        }
    }

    /// Whether `earlier` is ordered before `later` (by thread `t` now). On two buffers that
    /// alias without an exact element pairing ([`RaceState::blind`]) the threads that touch
    /// a byte on the hardware are not the interpreted ones: only a block-wide barrier since
    /// `earlier` (or, for a copy, since its completion) orders them; program order of one
    /// interpreted thread does not.
    fn ordered(&self, earlier: &Acc, later: &Acc, t: usize) -> bool {
        if earlier.buf != later.buf && self.blind.contains(&(earlier.buf, later.buf)) {
            return self.before_base(earlier);
        }
        let same_thread_plain =
            earlier.copy == NO_COPY && later.copy == NO_COPY && earlier.thread == later.thread;
        same_thread_plain || self.hb_issue(earlier, t)
    }

    /// Whether `a` (for a copy: its completion; for a group: every member's) is ordered
    /// before the last block-wide barrier.
    fn before_base(&self, a: &Acc) -> bool {
        if a.copy == NO_COPY {
            return a.clock <= self.base[a.thread as usize];
        }
        if let Some(ms) = self.members(a.copy) {
            return ms.iter().all(|m| self.before_base(m));
        }
        let own = self.completion[a.copy as usize].into_iter();
        own.chain(self.collective_epochs(a.copy).iter().copied())
            .any(|(slot, c)| c <= self.base[slot as usize])
    }

    /// The members of group copy `copy`, if it is one.
    fn members(&self, copy: u32) -> Option<&[Acc]> {
        let g = *self.group_of.get(copy as usize)?;
        (g != NO_GROUP).then(|| self.groups[g as usize].0.as_slice())
    }

    /// The access to name for an earlier `r` that `later` (by `t`) is not ordered after: the
    /// first member not ordered before it, for a group read.
    fn culprit(&self, r: &Acc, later: &Acc, t: usize) -> Acc {
        match self.members(r.copy) {
            Some(ms) => ms
                .iter()
                .map(|m| Acc { buf: r.buf, ..*m })
                .find(|m| !self.ordered(m, later, t))
                .unwrap_or(*r),
            None => *r,
        }
    }

    /// A new group copy (pending, no members yet).
    pub fn new_group(&mut self) -> u32 {
        let c = self.new_copy();
        self.group_of[c as usize] = self.groups.len() as u32;
        self.groups.push((Vec::new(), false));
        c
    }

    /// Adds `member` (an issuer's read with its own copy) to group copy `group`.
    pub fn join_group(&mut self, group: u32, member: Acc) {
        let g = self.group_of[group as usize] as usize;
        self.groups[g].0.push(member);
    }

    /// Whether every cell the group's read was recorded in still holds it.
    pub fn group_intact(&self, group: u32) -> bool {
        let g = self.group_of.get(group as usize).copied().unwrap_or(NO_GROUP);
        g != NO_GROUP && !self.groups[g as usize].1
    }

    /// Marks the groups of the reads in `dropped` broken (a cell no longer holds them).
    fn dropped(&mut self, dropped: &[Acc]) {
        for r in dropped {
            if let Some(&g) = self.group_of.get(r.copy as usize)
                && g != NO_GROUP
            {
                self.groups[g as usize].1 = true;
            }
        }
    }

    /// Thread `t` executes a proxy fence; returns the thread's fence count after it.
    pub fn proxy_fence(&mut self, t: usize) -> u32 {
        let e = self.epoch(t);
        self.fence_epochs[t].push(e);
        self.fence_epochs[t].len() as u32
    }

    /// Proxy fences thread `t` has executed so far (the value of [`Acc::fences`]).
    pub fn fences(&self, t: usize) -> u32 {
        self.fence_epochs.get(t).map_or(0, |f| f.len() as u32)
    }

    /// Whether a proxy fence of `w`'s thread after `w` happens before thread `t`'s current
    /// point.
    fn fenced_for(&self, w: &Acc, t: usize) -> bool {
        let wt = w.thread as usize;
        self.fence_epochs
            .get(wt)
            .and_then(|f| f.get(w.fences as usize))
            .is_some_and(|&e| e <= self.get(t, wt))
    }

    /// Entry `slot` of thread `t`'s clock.
    pub fn get(&self, t: usize, slot: usize) -> u32 {
        if self.lazy[t] && slot != t {
            self.base[slot]
        } else {
            self.vc[t * self.slots + slot]
        }
    }

    /// Makes thread `t`'s row explicit.
    fn materialize(&mut self, t: usize) {
        if self.lazy[t] {
            let s = self.slots;
            let own = self.vc[t * s + t];
            self.vc[t * s..(t + 1) * s].copy_from_slice(&self.base);
            self.vc[t * s + t] = own.max(self.base[t]);
            self.lazy[t] = false;
        }
    }

    /// A copy of the clock all threads acquired at the last block-wide barrier (a valid
    /// starting value for a block-wide barrier's join).
    pub fn base(&self) -> Vec<u32> {
        self.base.clone()
    }

    /// Release into a block-wide barrier whose `obj` started from [`RaceState::base`].
    pub fn release_barrier(&mut self, t: usize, obj: &mut [u32]) {
        if self.lazy[t] {
            let own = self.vc[t * self.slots + t];
            obj[t] = obj[t].max(own);
            self.tick(t);
        } else {
            self.release(t, obj, None);
        }
    }

    /// Completes a block-wide barrier with joined clock `obj`: every thread in `threads`
    /// acquires it (lazily).
    pub fn barrier_done(&mut self, obj: &[u32], threads: &[usize]) {
        self.base.copy_from_slice(obj);
        let s = self.slots;
        for &t in threads {
            self.lazy[t] = true;
            let own = &mut self.vc[t * s + t];
            *own = (*own).max(obj[t]);
        }
    }

    /// Thread `t`'s own epoch.
    pub fn epoch(&self, t: usize) -> u32 {
        self.vc[t * self.slots + t]
    }

    /// Advances thread `t`'s own epoch (after a release).
    pub fn tick(&mut self, t: usize) {
        self.vc[t * self.slots + t] += 1;
    }

    /// A fresh, all-zero clock for a sync object.
    pub fn zero(&self) -> Vec<u32> {
        vec![0; self.slots]
    }

    /// Release: joins `VC_t` into `obj` (with the thread's own entry capped at `own` when
    /// given, for accesses a release does not cover) and advances `t`'s epoch.
    pub fn release(&mut self, t: usize, obj: &mut [u32], own: Option<u32>) {
        self.materialize(t);
        let s = self.slots;
        for (o, v) in obj.iter_mut().zip(&self.vc[t * s..(t + 1) * s]) {
            *o = (*o).max(*v);
        }
        if let Some(c) = own {
            obj[t] = obj[t].min(c);
        }
        self.tick(t);
    }

    /// Acquire: joins `obj` into `VC_t`.
    pub fn acquire(&mut self, t: usize, obj: &[u32]) {
        self.materialize(t);
        let s = self.slots;
        for (v, o) in self.vc[t * s..(t + 1) * s].iter_mut().zip(obj) {
            *v = (*v).max(*o);
        }
    }

    /// Registers a new copy (pending); returns its id.
    pub fn new_copy(&mut self) -> u32 {
        self.completion.push(None);
        self.group_of.push(NO_GROUP);
        self.collective_of.push(NO_GROUP);
        (self.completion.len() - 1) as u32
    }

    /// A new collective (no member, not complete).
    pub fn new_collective(&mut self) -> u32 {
        self.collectives.push(Vec::new());
        (self.collectives.len() - 1) as u32
    }

    /// Makes copy `copy` a member of collective `coll`.
    pub fn join_collective(&mut self, copy: u32, coll: u32) {
        self.collective_of[copy as usize] = coll;
    }

    /// A wait at epoch `(slot, clock)` completes collective `coll` (every member).
    pub fn complete_collective(&mut self, coll: u32, slot: usize, clock: u32) {
        self.collectives[coll as usize].push((slot as u32, clock));
    }

    /// The completing epochs of `copy`'s collective (empty: none, or not a member).
    fn collective_epochs(&self, copy: u32) -> &[(u32, u32)] {
        match self.collective_of.get(copy as usize) {
            Some(&c) if c != NO_GROUP => &self.collectives[c as usize],
            _ => &[],
        }
    }

    /// Marks a copy complete at epoch `(slot, clock)`.
    pub fn complete(&mut self, copy: u32, slot: usize, clock: u32) {
        if let Some(c) = self.completion.get_mut(copy as usize)
            && c.is_none()
        {
            *c = Some((slot as u32, clock));
        }
    }

    pub fn is_complete(&self, copy: u32) -> bool {
        self.completion
            .get(copy as usize)
            .is_some_and(|c| c.is_some())
            || !self.collective_epochs(copy).is_empty()
    }

    /// Whether `copy` was completed itself (by its own thread's wait, or its mbarrier), not
    /// only through its collective.
    pub fn own_complete(&self, copy: u32) -> bool {
        self.completion.get(copy as usize).is_some_and(|c| c.is_some())
    }

    /// Whether access `a` happens before the current point of thread `t`.
    pub fn hb(&self, a: &Acc, t: usize) -> bool {
        if a.copy == NO_COPY {
            a.clock <= self.get(t, a.thread as usize)
        } else if let Some(ms) = self.members(a.copy) {
            // The members of one collective share its epochs: decided once, not per member.
            let mut ordered_coll = NO_GROUP;
            ms.iter().all(|m| {
                let c = self.collective_of.get(m.copy as usize).copied().unwrap_or(NO_GROUP);
                if c != NO_GROUP && c == ordered_coll {
                    return true;
                }
                let ok = self.hb(m, t);
                if ok && c != NO_GROUP && self.collective_epochs(m.copy).iter().any(|&(s, e)| e <= self.get(t, s as usize)) {
                    ordered_coll = c;
                }
                ok
            })
        } else {
            let own = self.completion[a.copy as usize].into_iter();
            own.chain(self.collective_epochs(a.copy).iter().copied())
                .any(|(slot, c)| c <= self.get(t, slot as usize))
        }
    }

    /// Whether access `a` happens before the *issue* of a copy by thread `t` now (that is,
    /// before `t`'s current point; same test as [`RaceState::hb`]).
    fn hb_issue(&self, a: &Acc, t: usize) -> bool {
        self.hb(a, t)
    }

    /// Records access `acc` to granules `[g, g+n)` by thread `acc.thread` (the issuing thread
    /// for a copy, checked at issue). Returns the first conflict found.
    pub fn access(&mut self, g: usize, n: usize, acc: Acc) -> Result<(), Conflict> {
        self.access_proxy(g, n, acc, false)
    }

    /// [`RaceState::access`] for an access that goes through the async proxy when
    /// `async_proxy` (wgmma operands, TMA): earlier generic writes must also be fenced.
    pub fn access_proxy(
        &mut self,
        g: usize,
        n: usize,
        acc: Acc,
        async_proxy: bool,
    ) -> Result<(), Conflict> {
        let t = acc.thread as usize;
        for gi in g..g + n {
            let Some(cell) = self.cells.get(gi) else {
                continue;
            };
            self.conflict(&cell.writes, &cell.reads, &acc, t, async_proxy)?;
            self.update(gi, acc, t);
        }
        Ok(())
    }

    /// The first access recorded in `cell` that `acc` (by thread or issuer `t`) races with:
    /// an unordered write (any access), an unordered read (a write), or, for an async-proxy
    /// access, an ordered generic write no proxy fence separates from it.
    fn conflict(
        &self,
        writes: &[Acc],
        reads: &[Acc],
        acc: &Acc,
        t: usize,
        async_proxy: bool,
    ) -> Result<(), Conflict> {
        if async_proxy
            && let Some(w) = writes
                .iter()
                .find(|w| w.copy == NO_COPY && !w.kind.is_async() && !self.fenced_for(w, t))
        {
            // Unordered writes are races, reported below as such.
            if self.ordered(w, acc, t) {
                return Err(Conflict {
                    earlier: *w,
                    later: *acc,
                    missing_fence: true,
                });
            }
        }
        // Check against earlier writes (every access) and reads (writes only).
        for w in writes {
            if !compatible(w, acc) && !self.ordered(w, acc, t) {
                return Err(Conflict {
                    earlier: *w,
                    later: *acc,
                    missing_fence: false,
                });
            }
        }
        if acc.kind.writes() {
            for r in reads {
                if !self.ordered(r, acc, t) {
                    return Err(Conflict {
                        earlier: self.culprit(r, acc, t),
                        later: *acc,
                        missing_fence: false,
                    });
                }
            }
        }
        Ok(())
    }

    /// Whether read `acc` (by `t`, not recorded) conflicts with one of `writes` (the distinct
    /// writes of the cells it would read).
    pub fn conflict_in(&self, writes: &[Acc], acc: &Acc, t: usize, async_proxy: bool) -> bool {
        debug_assert!(!acc.kind.writes());
        self.conflict(writes, &[], acc, t, async_proxy).is_err()
    }

    /// The distinct writes (as far as a read's conflict check can tell them apart) recorded
    /// in granules `[g, g+n)`, added to `out` (`seen` holds their keys).
    pub fn writes_in(
        &self,
        (g, n): (usize, usize),
        seen: &mut rustc_hash::FxHashSet<(u32, u32, u32, u32, u32)>,
        out: &mut Vec<Acc>,
    ) {
        for cell in self.cells.get(g..g + n).unwrap_or(&[]) {
            for w in &cell.writes {
                if seen.insert((w.thread, w.clock, w.copy, w.fences, w.buf)) {
                    out.push(*w);
                }
            }
        }
    }

    /// Records `acc` in granule `gi`'s shadow state, dropping what it supersedes.
    fn update(&mut self, gi: usize, acc: Acc, t: usize) {
        let mut cell = std::mem::take(&mut self.cells[gi]);
        match acc.kind {
            AccKind::Read | AccKind::AsyncRead => {
                if acc.copy == NO_COPY {
                    // A read implies an earlier one only when it is ordered after it as a
                    // later access would need (so a read of a blindly aliasing buffer stays
                    // until a block-wide barrier).
                    let mut gone = Vec::new();
                    cell.reads.retain(|r| {
                        let keep = !self.ordered(r, &acc, t);
                        if !keep && self.members(r.copy).is_some() {
                            gone.push(*r);
                        }
                        keep
                    });
                    self.dropped(&gone);
                }
                cell.reads.push(acc);
            }
            AccKind::Write => {
                cell.writes.clear();
                cell.writes.push(acc);
                self.dropped(&cell.reads);
                cell.reads.clear();
            }
            AccKind::Atomic(_) | AccKind::AsyncWrite => {
                // Keep compatible unordered writes; drop those this one follows.
                let keep: Vec<Acc> = cell
                    .writes
                    .iter()
                    .filter(|w| {
                        compatible(w, &acc)
                            && !self.hb(w, t)
                            && !(w.copy == NO_COPY && w.thread == acc.thread && acc.copy == NO_COPY)
                    })
                    .copied()
                    .collect();
                cell.writes = keep;
                cell.writes.push(acc);
                self.dropped(&cell.reads);
                cell.reads.clear();
            }
        }
        self.cells[gi] = cell;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::EntityRef;

    fn acc(thread: u32, clock: u32, kind: AccKind) -> Acc {
        Acc {
            thread,
            clock,
            op: Op::new(0),
            iter: 0,
            kind,
            copy: NO_COPY,
            fences: 0,
            buf: 0,
        }
    }

    #[test]
    fn unordered_write_after_read_races_and_a_barrier_orders_it() {
        let mut r = RaceState::new(2, 0, 4);
        assert!(r.access(0, 1, acc(0, r.epoch(0), AccKind::Read)).is_ok());
        let c = r.access(0, 1, acc(1, r.epoch(1), AccKind::Write));
        assert!(c.is_err(), "thread 1 writes what thread 0 read, unordered");
        // A block barrier: both release, then both acquire.
        let mut r = RaceState::new(2, 0, 4);
        assert!(r.access(0, 1, acc(0, r.epoch(0), AccKind::Read)).is_ok());
        let mut obj = r.base();
        r.release_barrier(0, &mut obj);
        r.release_barrier(1, &mut obj);
        r.barrier_done(&obj, &[0, 1]);
        assert!(r.access(0, 1, acc(1, r.epoch(1), AccKind::Write)).is_ok());
    }

    #[test]
    fn reads_are_pruned_only_when_implied() {
        let mut r = RaceState::new(3, 0, 1);
        r.access(0, 1, acc(0, r.epoch(0), AccKind::Read)).unwrap();
        r.access(0, 1, acc(1, r.epoch(1), AccKind::Read)).unwrap();
        // Thread 2 synchronizes with thread 1 only.
        let mut obj = r.zero();
        r.release(1, &mut obj, None);
        r.acquire(2, &obj);
        // Thread 0's read is still unordered with thread 2's write.
        assert!(r.access(0, 1, acc(2, r.epoch(2), AccKind::Write)).is_err());
    }

    #[test]
    fn same_kind_atomics_commute_but_a_later_read_must_follow_all() {
        let mut r = RaceState::new(3, 0, 1);
        let add = AccKind::Atomic(AtomicOp::Add);
        r.access(0, 1, acc(0, r.epoch(0), add)).unwrap();
        r.access(0, 1, acc(1, r.epoch(1), add)).unwrap();
        assert!(
            r.access(0, 1, acc(2, r.epoch(2), AccKind::Atomic(AtomicOp::Max)))
                .is_err()
        );
        // A read ordered after thread 1's atomic but not thread 0's races.
        let mut r2 = RaceState::new(3, 0, 1);
        r2.access(0, 1, acc(0, r2.epoch(0), add)).unwrap();
        r2.access(0, 1, acc(1, r2.epoch(1), add)).unwrap();
        let mut obj = r2.zero();
        r2.release(1, &mut obj, None);
        r2.acquire(2, &obj);
        let e = r2
            .access(0, 1, acc(2, r2.epoch(2), AccKind::Read))
            .unwrap_err();
        assert_eq!(e.earlier.thread, 0);
    }

    /// Thread 0 writes, thread 1 issues an async-proxy read after a barrier; thread 0's
    /// fence before the barrier publishes the write, one after it does not.
    fn proxy_case(fence_before_barrier: bool, fence_after_barrier: bool) -> Result<(), Conflict> {
        let mut r = RaceState::new(2, 0, 1);
        r.access(0, 1, acc(0, r.epoch(0), AccKind::Write)).unwrap();
        if fence_before_barrier {
            r.proxy_fence(0);
        }
        let mut obj = r.base();
        r.release_barrier(0, &mut obj);
        r.release_barrier(1, &mut obj);
        r.barrier_done(&obj, &[0, 1]);
        if fence_after_barrier {
            r.proxy_fence(0);
        }
        let c = r.new_copy();
        let read = Acc {
            copy: c,
            fences: r.fences(1),
            buf: 0,
            ..acc(1, r.epoch(1), AccKind::AsyncRead)
        };
        r.access_proxy(0, 1, read, true)
    }

    #[test]
    fn a_proxy_fence_counts_only_before_the_release_that_orders_the_write() {
        assert!(proxy_case(true, false).is_ok());
        let e = proxy_case(false, true).unwrap_err();
        assert!(e.missing_fence && e.earlier.thread == 0 && e.later.thread == 1);
        assert!(proxy_case(false, false).unwrap_err().missing_fence);
        // The same accesses through the generic proxy need no fence.
        let mut r = RaceState::new(2, 0, 1);
        r.access(0, 1, acc(0, r.epoch(0), AccKind::Write)).unwrap();
        let mut obj = r.base();
        r.release_barrier(0, &mut obj);
        r.release_barrier(1, &mut obj);
        r.barrier_done(&obj, &[0, 1]);
        assert!(r.access(0, 1, acc(1, r.epoch(1), AccKind::Read)).is_ok());
    }

    #[test]
    fn a_copy_is_ordered_only_after_its_completion_reaches_the_reader() {
        let mut r = RaceState::new(2, 0, 1);
        let c = r.new_copy();
        let copy = Acc {
            copy: c,
            kind: AccKind::AsyncWrite,
            ..acc(0, r.epoch(0), AccKind::AsyncWrite)
        };
        r.access(0, 1, copy).unwrap();
        // A barrier alone does not complete the copy.
        let mut obj = r.base();
        r.release_barrier(0, &mut obj);
        r.release_barrier(1, &mut obj);
        r.barrier_done(&obj, &[0, 1]);
        assert!(r.access(0, 1, acc(1, r.epoch(1), AccKind::Read)).is_err());
        // Completed by thread 0's wait, then a barrier: ordered.
        let mut r = RaceState::new(2, 0, 1);
        let c = r.new_copy();
        let copy = Acc {
            copy: c,
            kind: AccKind::AsyncWrite,
            ..acc(0, r.epoch(0), AccKind::AsyncWrite)
        };
        r.access(0, 1, copy).unwrap();
        let e = r.epoch(0);
        r.complete(c, 0, e);
        let mut obj = r.base();
        r.release_barrier(0, &mut obj);
        r.release_barrier(1, &mut obj);
        r.barrier_done(&obj, &[0, 1]);
        assert!(r.access(0, 1, acc(1, r.epoch(1), AccKind::Read)).is_ok());
    }

    #[test]
    fn copies_of_one_op_by_two_threads_into_one_element_race() {
        // `cp_async @a[0] <- %X[%t]` in threads 0 and 1: two writes, one op, one iteration.
        let mut r = RaceState::new(2, 0, 1);
        for t in 0..2 {
            let c = r.new_copy();
            let copy = Acc {
                copy: c,
                ..acc(t, r.epoch(t as usize), AccKind::AsyncWrite)
            };
            let res = r.access(0, 1, copy);
            assert_eq!(res.is_err(), t == 1, "thread {t}");
        }
    }
}
