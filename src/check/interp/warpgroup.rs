//! The interpreter's warpgroup-wide completion of a `wgmma`'s shared reads (docs/async.md,
//! "wgmma completion: the warpgroup").
//!
//! A wgmma is one MMA of the warpgroup (the 128 threads `[128 w, 128 w + 128)` of the block,
//! docs/ir.md section 4): every thread issues it, and the tensor core reads the shared
//! operands once for all of them. So when a thread's `wgmma_wait N` completes the group that
//! holds its issue of wgmma `x` in iteration `i`, the operand reads of that MMA are done for
//! every thread of its warpgroup: the issues of `x` in `i` by all its threads (their own
//! copies, one race-detector collective: [`Collective`]) are completed at the waiting
//! thread's epoch, and at each later waiter's too (`RaceState::complete_collective`). A later access
//! ordered after that wait (by the waiting thread's arrival on an mbarrier, say CUTLASS's one
//! signalling thread per consumer warpgroup) is then ordered after the whole MMA's reads.
//!
//! Invariants. (1) The wait completes nothing of an MMA that not every thread of the
//! warpgroup has issued yet: on hardware it cannot return before the MMA ran, so the thread
//! blocks (its `wgmma_wait` is executed again when woken) until the last issuer wakes it; a
//! thread of the warpgroup that never issues it leaves the waiter blocked, which the
//! scheduler reports as a deadlock (C0002, naming that thread). (2) Only the shared reads are
//! collective: a thread's accumulator registers and register-A hold stay pending until its
//! *own* wait completes its copy (PTX: reading them before is undefined): those checks ask
//! the copy's own completion ([`BlockExec::own_done`]), the race detector either.
//!
//! Complexity: O(1) per issue; per wait O(copies of the groups it completes), plus once per
//! MMA O(issuers) (their copies performed and marked, then dropped).

use super::*;

/// Threads in a warpgroup.
pub(super) const WARPGROUP: usize = 128;

/// One wgmma op executed in one iteration by one warpgroup: the issuers' copies so far, and
/// the threads whose `wgmma_wait` waits for the rest to issue it.
#[derive(Default)]
pub(super) struct Collective {
    /// The race detector's collective of the issues.
    id: u32,
    /// Issues so far (0 once done: the copies are dropped).
    issued: usize,
    copies: Vec<u32>,
    waiters: Vec<usize>,
    /// Some thread's wait completed it.
    done: bool,
}

/// (warpgroup, wgmma op, iteration id).
pub(super) type CollectiveKey = (usize, Op, u32);

impl BlockExec<'_> {
    /// Threads of warpgroup `w` in this block.
    fn warpgroup_size(&self, w: usize) -> usize {
        (self.nthreads - w * WARPGROUP).min(WARPGROUP)
    }

    /// Records copy `c` as `th`'s issue of wgmma `op` in its iteration; the last issuer of the
    /// warpgroup wakes the threads waiting for it.
    pub(super) fn issue_collective(&mut self, th: &Thread, op: Op, c: u32) {
        let key = (th.lin as usize / WARPGROUP, op, th.iter);
        self.collective_of.insert(c, key);
        let need = self.warpgroup_size(key.0);
        let race = &mut self.race;
        let inst = self.collectives.entry(key).or_insert_with(|| Collective {
            id: race.new_collective(),
            issued: 0,
            copies: Vec::new(),
            waiters: Vec::new(),
            done: false,
        });
        race.join_collective(c, inst.id);
        inst.copies.push(c);
        inst.issued += 1;
        if inst.issued >= need {
            for w in std::mem::take(&mut inst.waiters) {
                self.wake_acquired(w);
            }
        }
    }

    /// Whether copy `c` is complete for its issuing thread itself (its own wait), not only
    /// through another thread of its warpgroup.
    pub(super) fn own_done(&self, c: u32) -> bool {
        self.race.own_complete(c)
    }

    /// `wgmma_wait N` for `th`: blocks (Ok(false), the wait to be executed again) while an
    /// MMA of the groups it completes is not issued by its whole warpgroup; otherwise
    /// completes the thread's groups and every issue of those MMAs in its warpgroup.
    pub(super) fn wgmma_wait(&mut self, th: &mut Thread, op: Op, n: u32) -> Result<bool, Stop> {
        let t = th.lin as usize;
        let done = &th.groups[2].1;
        let older = done.len().saturating_sub(n as usize);
        let keys: Vec<CollectiveKey> = (done[..older].iter().flatten())
            .filter_map(|c| self.collective_of.get(c).copied())
            .collect();
        let short = keys.iter().find(|key| self.collectives[key].issued < self.warpgroup_size(key.0));
        if let Some(&key) = short {
            if let Some(inst) = self.collectives.get_mut(&key) {
                inst.waiters.push(t);
            }
            th.status = Status::Blocked(Blocked::Warpgroup(op, key.1));
            if let Some(f) = th.frames.last_mut() {
                f.pc -= 1;
            }
            // Executed again when woken: its place in the warpgroup's sequence of wgmma ops
            // (`warpgroup_op`, C0053) is taken then, not twice.
            th.warpgroup_seq -= 1;
            return Ok(false);
        }
        self.wait_groups(th, 2, n)?;
        let e = self.race.epoch(t);
        for key in keys {
            let Some(inst) = self.collectives.get_mut(&key) else { continue };
            let (id, first) = (inst.id, !std::mem::replace(&mut inst.done, true));
            let copies = std::mem::take(&mut inst.copies);
            self.race.complete_collective(id, t, e);
            // The first completion performs every issue (the MMA's reads are done).
            for c in copies.into_iter().filter(|_| first) {
                self.perform(c)?;
            }
        }
        Ok(true)
    }

    /// C0002 for a thread blocked at `wait` until its warpgroup issues `mma`: the first thread
    /// of the warpgroup that has not issued it, and what it does instead.
    pub(super) fn warpgroup_deadlock(&self, t: usize, (wait, mma): (Op, Op)) -> Diagnostic {
        let w = t / WARPGROUP;
        let issued: Vec<usize> = (self.collectives.iter())
            .filter(|(key, inst)| key.0 == w && key.1 == mma && !inst.done)
            .flat_map(|(_, inst)| inst.copies.iter().filter_map(|c| self.copy_ops.get(c).map(|x| x.1)))
            .collect();
        let mut d = Diagnostic::error(
            DiagKind::Finding,
            "C0002",
            format!("deadlock: a `wgmma_wait` waits for a wgmma that not every thread of warpgroup {w} issues"),
        )
        .with_label(self.k.span(wait), format!("thread {t} waits here"))
        .with_label(self.k.span(mma), "for this wgmma, which the whole warpgroup executes together");
        let lo = w * WARPGROUP;
        if let Some(o) = (lo..lo + self.warpgroup_size(w)).find(|u| !issued.contains(u)) {
            let (s, m) = self.describe(&self.threads[o]);
            d = d.with_label(s, m);
        }
        d.with_help("every thread of a warpgroup must execute each wgmma (PTX `.sync.aligned`): move it out of control that differs within the warpgroup")
    }
}
