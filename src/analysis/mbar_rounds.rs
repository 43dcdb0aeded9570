//! Whether the round a verified mbarrier wait needs can complete, and complete only after
//! its transaction bytes are expected (docs/async.md, "Rounds complete, after their
//! `expect_tx`"). A child of `analysis::mbar_protocol`: it reads that module's trace and
//! rounds ([`Protocol`]) and is asked once per wait event that passed the parity check.
//!
//! - **Complete.** Every one of a slot's `A` arriving threads arrives `c` times and a phase
//!   takes `m` arrivals per thread, so exactly `c div m` rounds complete. A wait that
//!   guarantees phase `g >= c div m` can never return (phases `< c div m` complete, phase
//!   `c div m` never does): E0306, exact.
//! - **No cycle.** A wait that guarantees phase `g` of slot `s` needs every arrival of round
//!   `g`; if such an arrival's thread first waited for a phase of a slot `s2` one of whose
//!   rounds holds an arrival of the waiting thread *after* the wait, neither can happen first:
//!   E0306 (one step of happens-before, like `not_overtaken`; longer cycles are not searched).
//!   The phase of `s2` may also hold a TMA load of the waiting thread after the wait instead
//!   of an arrival, where that round's bytes are expected in time (below): the phase
//!   completes only once the load lands (a producer's `arrive tx` before its `empty` wait
//!   and the load after it, session 37's M3).
//! - **Bytes expected in time.** The phase of round `r` completes once its arrivals are in
//!   and no expected byte is pending; an `expect_tx` of round `r` that no arrival of round `r`
//!   follows (same thread later, a thread whose wait needs a phase with an arrival of the
//!   `expect_tx`'s thread after it, or any thread after a top-level `barrier` that follows
//!   the `expect_tx`: every thread runs it once) may come after the phase completed: the wait may return
//!   before the copy lands. E0306 where the trace exhibits such an order (round 0, the
//!   round's other events reachable with no wait and no block-level synchronisation between
//!   them), W0318 otherwise.
//!
//! - **Copies observed.** Every `expect_tx` and load of the slot lies in a round that
//!   completes (`< c div m`); one after its thread's last arrival counts toward a phase that
//!   never completes: no wait observes that copy, W0318 (not decided).
//!
//! Invariants: only slots whose rounds are established (`broken` empty) are judged; the
//! happens-before steps use only waits on slots whose phases complete in round order.
//! Complexity: per slot, one pass builds its arrivals by round and, per thread, the least
//! round of its arrivals after each of its events ([`Index`]); then a wait event costs
//! O(arrivals of its round × slots of the arriving thread × log events), and each (slot,
//! round)'s `expect_tx` rule and each slot's first copy in a round that never completes are
//! decided once (memoised: a scan per wait event was quadratic in the trace, issue 12's L9).

use std::cell::RefCell;
use std::collections::HashSet;

use super::{Ev, Finding, FxMap, Protocol, Slot};
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::text::op_label;
use crate::ir::*;

/// Per-slot indexes, built once per slot on first use (interior mutability: the checks
/// read the protocol by shared reference).
#[derive(Default)]
pub(super) struct Index {
    /// Rounds of each slot that complete.
    complete: RefCell<FxMap<Slot, i64>>,
    /// Each slot's arrival events by round.
    by_round: RefCell<FxMap<Slot, ByRound>>,
    /// Each slot's `expect_tx` events by round.
    tx_by_round: RefCell<FxMap<Slot, ByRound>>,
    /// Per (slot, thread): its arrivals' (seq, the least round of it and its later arrivals).
    later: RefCell<FxMap<Slot, Later>>,
    /// The same of its TMA loads (the bytes a round's phase waits for).
    later_loads: RefCell<FxMap<Slot, Later>>,
    /// Per (slot, round): [`TxOrder`].
    tx: RefCell<FxMap<(Slot, i64), TxOrder>>,
    /// Per slot: its first `tx` event or load in a round that never completes ([`Protocol::late_bytes`]).
    late: RefCell<FxMap<Slot, Option<usize>>>,
    /// Per thread: the `seq` of its first wait ([`Protocol::first_wait`]).
    first_wait: RefCell<Option<FxMap<u32, usize>>>,
    /// Per top-level op index `p`: the top-level `barrier`s before it ([`Protocol::barrier_between`]).
    barriers: RefCell<Option<Vec<u32>>>,
}

/// Per thread: its arrivals on one slot as (seq, least round of it and its later arrivals).
type Later = FxMap<u32, Vec<(usize, i64)>>;

/// One slot's events of a kind by round, in event order.
type ByRound = FxMap<i64, Vec<usize>>;

/// The outcome for one round of a slot: its `expect_tx` all ordered, or the first one that
/// is not, and whether the trace exhibits the early completion.
#[derive(Clone, Copy)]
pub(super) enum TxOrder {
    Ordered,
    Unordered { ev: usize, exhibited: bool },
}

impl Protocol<'_> {
    /// What [`super::mbar_rounds`] finds wrong or undecided of wait event `i` (module doc).
    pub(super) fn round_finding(&self, i: usize) -> Option<Finding> {
        let (s, g) = (self.ev[i].slot, self.round[i]);
        // A guarantee holds only where phases complete in round order.
        if g < 0 || !self.in_order(s) {
            return None;
        }
        let complete = self.complete_rounds(s);
        if g >= complete {
            return Some(Finding::Wrong(self.never_returns(i, complete)));
        }
        if let Some((a, via_load)) = self.needs_later_arrival(i) {
            return Some(Finding::Wrong(self.cycle_error(i, a, via_load)));
        }
        match self.tx_order(s, g) {
            TxOrder::Ordered => self.late_bytes(s).map(Finding::Undecided),
            TxOrder::Unordered { ev, exhibited: true } => Some(Finding::Wrong(self.tx_error(i, ev))),
            TxOrder::Unordered { ev, .. } => Some(Finding::Undecided(format!(
                "{} in thread {} (round {g}) is not shown to come before the arrival that completes phase {g}: the phase may complete, and this wait return, before the copy lands",
                op_label(self.k, self.ev[ev].op),
                self.ev[ev].thread
            ))),
        }
    }

    /// Why a `tx` event or load of `s` lies in a round that never completes, if one does:
    /// bytes expected after a thread's last arrival count toward a phase no arrival
    /// completes, so no wait observes that copy, and the rounds the trace pairs with the
    /// waits are one behind the copies (session 37's perm.py kernel `aWEL`: `mbar_arrive
    /// @full; mbar_wait @empty; mbar_expect_tx @full; tma_load`, whose consumers read a slot
    /// before any load of it). Not decided, not wrong: the order of findings keeps an exact
    /// E0306 of the same wait.
    fn late_bytes(&self, s: Slot) -> Option<String> {
        let complete = self.complete_rounds(s);
        let late = *self.rounds_idx.late.borrow_mut().entry(s).or_insert_with(|| {
            (self.by_slot[&s].iter().copied()).find(|&i| matches!(self.ev[i].ev, Ev::ExpectTx(_) | Ev::Load(_)) && self.round[i] >= complete)
        });
        let late = late?;
        let e = &self.ev[late];
        Some(format!(
            "{} in thread {} counts toward round {} of {}, a phase that never completes (only {complete} do): no wait observes that copy",
            op_label(self.k, e.op),
            e.thread,
            self.round[late],
            self.slot_name(s)
        ))
    }

    /// Rounds of `s` that complete: arrivals per thread divided by arrivals per phase.
    fn complete_rounds(&self, s: Slot) -> i64 {
        if let Some(&c) = self.rounds_idx.complete.borrow().get(&s) {
            return c;
        }
        let c = self.count_complete(s);
        self.rounds_idx.complete.borrow_mut().insert(s, c);
        c
    }

    fn count_complete(&self, s: Slot) -> i64 {
        let idx = &self.by_slot[&s];
        let Some(n) = idx.iter().find_map(|&j| match self.ev[j].ev {
            Ev::Init(n) => Some(n as i64),
            _ => None,
        }) else {
            return i64::MAX;
        };
        let arrivals: Vec<u32> = (idx.iter())
            .filter(|&&j| matches!(self.ev[j].ev, Ev::Arrive(_)))
            .map(|&j| self.ev[j].thread)
            .collect();
        let threads: HashSet<u32> = arrivals.iter().copied().collect();
        if threads.is_empty() || n == 0 {
            return if n == 0 { i64::MAX } else { 0 };
        }
        // Established rounds: every thread arrives equally often and `n = m·A`, where `A`
        // counts every thread of each traced class (its representative's events stand for
        // each member's).
        let per_thread = arrivals.len() as i64 / threads.len() as i64;
        let a: i64 = threads.iter().map(|&t| self.w(t) as i64).sum();
        let m = n / a.max(1);
        per_thread / m.max(1)
    }

    /// Whether phases of `s` are known to complete in round order (its waits' guarantees hold).
    fn in_order(&self, s: Slot) -> bool {
        !self.broken.contains_key(&s) && !self.overtaken.contains_key(&s)
    }

    /// The slots thread `t` waits on whose phases complete in round order ([`Self::in_order`]).
    fn waited_slots(&self, t: u32) -> impl Iterator<Item = Slot> + '_ {
        let slots = self.slots_of.get(&t).map_or(&[][..], |v| &v[..]);
        slots.iter().copied().filter(|&s2| self.in_order(s2))
    }

    /// Whether thread `t2`'s event `seq2` comes after thread `t`'s event `seq` by program
    /// order or through one wait of `t2` on a phase with an arrival of `t` after `seq`.
    fn after_one_step(&self, t: u32, seq: usize, t2: u32, seq2: usize) -> bool {
        if t == t2 {
            return seq2 > seq;
        }
        self.waited_slots(t2).any(|s2| {
            let g2 = self.direct(t2, seq2, s2);
            g2 >= 0 && self.least_round_after(s2, t, seq).is_some_and(|r| r <= g2)
        })
    }

    /// The least round of thread `t`'s arrivals on `s2` after its event `seq`.
    fn least_round_after(&self, s2: Slot, t: u32, seq: usize) -> Option<i64> {
        self.least_after(&self.rounds_idx.later, s2, t, seq, |e| matches!(e, Ev::Arrive(_)))
    }

    /// The least round of thread `t`'s events on `s2` that `is` selects after its event
    /// `seq`, from the per-slot index `map` (built on first use: suffix minima per thread).
    fn least_after(&self, map: &RefCell<FxMap<Slot, Later>>, s2: Slot, t: u32, seq: usize, is: fn(&Ev) -> bool) -> Option<i64> {
        if !map.borrow().contains_key(&s2) {
            let mut per: Later = FxMap::default();
            for &x in &self.by_slot[&s2] {
                if is(&self.ev[x].ev) {
                    per.entry(self.ev[x].thread).or_default().push((self.ev[x].seq, self.round[x]));
                }
            }
            for v in per.values_mut() {
                for j in (0..v.len().saturating_sub(1)).rev() {
                    v[j].1 = v[j].1.min(v[j + 1].1);
                }
            }
            map.borrow_mut().insert(s2, per);
        }
        let later = map.borrow();
        let v = later[&s2].get(&t)?;
        v.get(v.partition_point(|&(q, _)| q <= seq)).map(|&(_, r)| r)
    }

    /// Whether thread `t2`'s event `seq2` comes after thread `t`'s event `seq` through one
    /// wait of `t2` on a phase that holds a TMA load of `t` after `seq` ([`Self::after_one_step`]
    /// follows arrivals): a phase whose bytes are expected in time ([`TxOrder::Ordered`],
    /// bytes balanced per established round) completes only after every load of its round
    /// lands, and each later phase after it (session 37's M3: the producer's `arrive tx`
    /// before its `empty` wait, the load after it).
    fn after_load_step(&self, t: u32, seq: usize, t2: u32, seq2: usize) -> bool {
        if t == t2 {
            return false;
        }
        self.waited_slots(t2).any(|s2| {
            let g2 = self.direct(t2, seq2, s2);
            let r = self.least_after(&self.rounds_idx.later_loads, s2, t, seq, |e| matches!(e, Ev::Load(_)));
            g2 >= 0 && r.is_some_and(|r| r >= 0 && r <= g2 && matches!(self.tx_order(s2, r), TxOrder::Ordered))
        })
    }

    /// The arrival events of round `r` of `s`.
    fn arrivals_of(&self, s: Slot, r: i64) -> Vec<usize> {
        self.of_round(&self.rounds_idx.by_round, s, r, |e| matches!(e, Ev::Arrive(_)))
    }

    /// The events of round `r` of `s` that `is` selects, in event order, from the per-slot
    /// index `map` (built on first use: one pass over the slot's events, so that a check of
    /// every round is linear in the slot's events, not quadratic).
    fn of_round(&self, map: &RefCell<FxMap<Slot, ByRound>>, s: Slot, r: i64, is: fn(&Ev) -> bool) -> Vec<usize> {
        if !map.borrow().contains_key(&s) {
            let mut m: ByRound = FxMap::default();
            for &x in &self.by_slot[&s] {
                if is(&self.ev[x].ev) {
                    m.entry(self.round[x]).or_default().push(x);
                }
            }
            map.borrow_mut().insert(s, m);
        }
        map.borrow()[&s].get(&r).cloned().unwrap_or_default()
    }

    /// An arrival of the round wait event `i` needs that comes after the wait itself, and
    /// whether it does through a load of the waiting thread (not one of its arrivals).
    fn needs_later_arrival(&self, i: usize) -> Option<(usize, bool)> {
        let (s, g, t, seq) = (self.ev[i].slot, self.round[i], self.ev[i].thread, self.ev[i].seq);
        let arrivals = self.arrivals_of(s, g);
        let after = |a: usize, step: fn(&Self, u32, usize, u32, usize) -> bool| step(self, t, seq, self.ev[a].thread, self.ev[a].seq);
        let direct = arrivals.iter().find(|&&a| after(a, Self::after_one_step)).map(|&a| (a, false));
        direct.or_else(|| arrivals.iter().find(|&&a| after(a, Self::after_load_step)).map(|&a| (a, true)))
    }

    /// Whether every `expect_tx` of round `r` of `s` comes before an arrival of round `r`.
    fn tx_order(&self, s: Slot, r: i64) -> TxOrder {
        if let Some(&o) = self.rounds_idx.tx.borrow().get(&(s, r)) {
            return o;
        }
        let arrivals = self.arrivals_of(s, r);
        let mut out = TxOrder::Ordered;
        for e in self.of_round(&self.rounds_idx.tx_by_round, s, r, |e| matches!(e, Ev::ExpectTx(_))) {
            let (t, seq) = (self.ev[e].thread, self.ev[e].seq);
            let ordered = |a: usize| self.after_one_step(t, seq, self.ev[a].thread, self.ev[a].seq) || self.barrier_between(e, a);
            if !arrivals.iter().any(|&a| ordered(a)) {
                // The first one decides (the exhibit is tried once: W0318 where it fails).
                out = TxOrder::Unordered { ev: e, exhibited: r == 0 && self.exhibits(e, &self.by_slot[&s]) };
                break;
            }
        }
        self.rounds_idx.tx.borrow_mut().insert((s, r), out);
        out
    }

    /// Whether a top-level `barrier` lies after event `e` and before event `a` (by their
    /// top-level op, `key[0]`). Every thread runs each top-level op once, so that barrier's one
    /// instance orders each thread's events before it before each thread's events after it.
    fn barrier_between(&self, e: usize, a: usize) -> bool {
        let (p, q) = (self.ev[e].key[0], self.ev[a].key[0]);
        if p + 1 >= q {
            return false;
        }
        let mut memo = self.rounds_idx.barriers.borrow_mut();
        let before = memo.get_or_insert_with(|| {
            let top = self.k.region_ops(self.k.body());
            let mut n = 0;
            let mut v = Vec::with_capacity(top.len() + 1);
            for &o in top {
                v.push(n);
                n += matches!(self.k.ops[o].kind, OpKind::Barrier) as u32;
            }
            v.push(n);
            v
        });
        let at = |i: i64| usize::try_from(i).ok().and_then(|i| before.get(i)).copied();
        // Barriers at indexes p + 1 ..= q - 1: those before q less those before p + 1.
        matches!((at(p + 1), at(q)), (Some(x), Some(y)) if y > x)
    }

    /// Whether round 0 of the slot of `idx` can complete before `expect_tx` event `e`: `e` is
    /// its thread's first `tx` event of the round and follows no wait of its thread, the round's arrivals (and other threads' loads and
    /// `expect_tx`) come after no wait of their threads, and no block-level synchronisation
    /// lies between them and `e` at the kernel's top level.
    fn exhibits(&self, e: usize, idx: &[usize]) -> bool {
        let t = self.ev[e].thread;
        let first_wait = |th: u32| self.first_wait(th);
        // A wait before `e` in its own thread may be what places `e` in a later phase (its
        // thread does not arrive, so the round taken for it is not the phase it counts in).
        if self.ev[e].seq >= first_wait(t) {
            return false;
        }
        let mut span = (self.ev[e].key[0], self.ev[e].key[0]);
        for &j in idx.iter().filter(|&&j| self.round[j] == 0) {
            let x = &self.ev[j];
            let needed = match x.ev {
                Ev::Arrive(_) => true,
                Ev::Load(_) | Ev::ExpectTx(_) => x.thread != t,
                Ev::Init(_) | Ev::Wait(_) => false,
            };
            let earlier_tx = x.thread == t && x.seq < self.ev[e].seq && matches!(x.ev, Ev::ExpectTx(_) | Ev::Arrive(Some(_)));
            if earlier_tx || (needed && x.seq >= first_wait(x.thread)) {
                return false;
            }
            if needed {
                span = (span.0.min(x.key[0]), span.1.max(x.key[0]));
            }
        }
        let top = self.k.region_ops(self.k.body());
        !(span.0..=span.1).any(|p| usize::try_from(p).ok().and_then(|p| top.get(p)).is_none_or(|&o| may_order(self.k, o)))
    }

    /// The `seq` of thread `t`'s first wait (`usize::MAX` without one), from a table of every
    /// thread's built on first use (one pass over the trace, not one per slot asked).
    fn first_wait(&self, t: u32) -> usize {
        let mut memo = self.rounds_idx.first_wait.borrow_mut();
        let waits = memo.get_or_insert_with(|| {
            let mut waits: FxMap<u32, usize> = FxMap::default();
            for x in self.ev.iter().filter(|x| matches!(x.ev, Ev::Wait(_))) {
                let w = waits.entry(x.thread).or_insert(x.seq);
                *w = (*w).min(x.seq);
            }
            waits
        });
        waits.get(&t).copied().unwrap_or(usize::MAX)
    }

    fn never_returns(&self, i: usize, complete: i64) -> Diagnostic {
        let e = &self.ev[i];
        let s = self.slot_name(e.slot);
        let g = self.round[i];
        Diagnostic::error(
            DiagKind::Finding,
            "E0306",
            format!("{} can never return: in thread {} it waits for phase {g} of {s}, but only {complete} phase(s) of it ever complete", op_label(self.k, e.op), e.thread),
        )
        .with_label(self.k.span(e.op), format!("phase {g} of {s} never completes: its round has fewer arrivals than the count (or none)"))
        .with_note("a phase completes after `count` arrivals (and its expected bytes); every thread's arrivals on the mbarrier are counted over the whole kernel")
        .with_help(format!("initialise {s} with the arrivals each phase gets, or arrive once more per phase"))
    }

    fn cycle_error(&self, i: usize, a: usize, via_load: bool) -> Diagnostic {
        let (e, x) = (&self.ev[i], &self.ev[a]);
        let later = if via_load { "TMA load (its phase completes when the bytes land)" } else { "arrival" };
        Diagnostic::error(
            DiagKind::Finding,
            "E0306",
            format!("{} can never return: in thread {} it waits for phase {} of {}, which needs an arrival of thread {} that comes after this wait", op_label(self.k, e.op), e.thread, self.round[i], self.slot_name(e.slot), x.thread),
        )
        .with_label(self.k.span(e.op), "waits for its own later arrival (a cycle)")
        .with_label(self.k.span(x.op), format!("round {} arrival, in thread {} after a wait that needs this thread's later {later}", self.round[a], x.thread))
        .with_note("a phase completes after `count` arrivals: check which arrivals the init count covers")
    }

    fn tx_error(&self, i: usize, ev: usize) -> Diagnostic {
        let (e, x) = (&self.ev[i], &self.ev[ev]);
        let s = self.slot_name(e.slot);
        Diagnostic::error(
            DiagKind::Finding,
            "E0306",
            format!("{} may return before the copy lands: phase {} of {s} can complete before thread {}'s {}", op_label(self.k, e.op), self.round[i], x.thread, op_label(self.k, x.op)),
        )
        .with_label(self.k.span(e.op), format!("in thread {} this wait may return before the expected bytes are counted", e.thread))
        .with_label(self.k.span(x.op), "comes after no arrival of its phase: the arrivals may complete the phase first")
        .with_note("a phase completes once its arrivals are in and no expected byte is pending; bytes expected after that count toward the next phase")
        .with_help("expect the bytes in the arriving thread (`mbar_arrive ... tx N`), or before its arrival")
    }
}

/// Whether top-level op `o` holds anything that may order threads besides mbarriers.
fn may_order(k: &Kernel, o: Op) -> bool {
    let here = matches!(
        k.ops[o].kind,
        OpKind::Barrier
            | OpKind::WarpSync
            | OpKind::SplitSignal(_)
            | OpKind::SplitWait(_)
            | OpKind::NamedArrive { .. }
            | OpKind::NamedSync { .. }
            | OpKind::While { .. }
            | OpKind::Atomic { .. }
            | OpKind::GAtomic { .. }
    );
    here || k.ops[o].regions.iter().any(|&r| k.region_ops(r).iter().any(|&c| may_order(k, c)))
}
