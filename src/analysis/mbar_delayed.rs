//! Delayed releases, for `analysis::mbar_protocol` (docs/async.md, "wgmma completion":
//! *A release in a later iteration*). CUTLASS's sm90 consumer mainloop (and Triton's
//! warp-specialized wgmma consumers) release the *previous* stage: `wgmma; commit; wait 1;
//! if i > 0 { mbar_arrive @empty[(i-1) mod D] }`, the last after the loop. The arrival does
//! not run with the access, so `sync::handshake_chain`'s structural chain does not see it;
//! this module decides it on the protocol's trace, under the keys of its verdict.
//!
//! The trace records, besides the mbarrier events, a *mark* for each execution of a watched
//! op ([`Watch`]): a shared access `x` with a slot operand in a role branch's arm (every
//! enclosing op traced, so every execution of `x` is recorded, with its slot's value) and the
//! commits and group waits of the queues completing such accesses. For each access `x`
//! (with its buffer) and 1-D mbarrier array `E`, `x` is *released late on `E`*
//! ([`Verdict::delayed`](super::Verdict::delayed)) when, for every execution `u` of `x` by
//! every traced thread, on slot `e`:
//!
//! 1. *completion*: `u` is complete for its thread at a later point `c` of its trace: `u`
//!    itself for a synchronous access; for an asynchronous one the first wait `N` of its queue
//!    after `u` with at least `N + 1` of the queue's commits between them (the rule of
//!    `sync::handshake_chain::completed_by`, counted on the executed trace, exactly);
//! 2. *release*: `R`, the thread's first arrival on `E[e]` after `c`, exists and is keyed
//!    after `u`;
//!
//! and with it come the wait ops on `E[e]`, of any thread, with an execution keyed strictly
//! between some `u` and its `R` (3, *the waits between*). `sync::handshake_chain` takes the
//! late release as ordering `x` before an access `y` of another role, on `y`'s own slot, only
//! through a verified acquire of `y` on `E` that is not among those waits.
//!
//! Why that orders every execution `u` before every execution of `y` keyed after it: `y`'s
//! acquire `W` runs at `y`'s key position, so `W` is keyed after `u`; it is not between `u`
//! and `R` (3), so it is keyed after `R`; a verified wait guarantees the round of every
//! arrival on its slot keyed before it, so `W` returns after `R`'s phase completed, after `R`,
//! after `u` completed (1, 2). The executions keyed before `u` are the other direction's (the
//! `full` chain). For a pipeline the first release after completion is the `m`-th release of
//! the `m`-th use of the slot, and the producer's wait for the refill is keyed after it. A
//! release naming the wrong slot, one before the completing wait, or a missing last release
//! leaves a use with no `R`, or with the producer's refill wait between (E0307 stays); a wait
//! keyed between that acquires nothing (CUTLASS's producer tail, waiting for the last
//! releases before it exits) costs nothing.
//!
//! Ops left unrecorded make the rule conservative, never wrong: a commit or wait the trace
//! does not reach (under an `if` or loop holding no mbarrier op) is not counted, so fewer
//! uses complete; an access it cannot reach in every execution is not watched at all.
//!
//! Complexity: O(M + U · A · log M) per trace, M the marks and events, U the watched
//! accesses' executions and A the mbarrier arrays arrived on (the completions of one thread's
//! uses move forward together: a two-pointer walk).

use std::collections::{HashMap, HashSet};

use super::{ArmPos, Ev, Event, LateReleases, Slot};
use crate::ir::*;
use crate::sync::handshake_chain::{Completion, completion};


/// What the trace records besides the mbarrier events: the watched accesses with their slot
/// operands, and the commits and group waits of their queues.
#[derive(Default)]
pub(super) struct Watch {
    uses: HashMap<Op, Vec<(Buffer, Operand)>>,
    queue_ops: HashSet<Op>,
}

/// One execution of a watched op: its thread, place in the thread's sequence (shared with
/// the mbarrier events), key and arm position (re-keyed with the verdict's alignment), and
/// for an access its slots' values (one per entry of [`Watch`]'s list for the op).
#[derive(Clone, Debug)]
pub(super) struct Mark {
    pub thread: u32,
    pub seq: usize,
    pub key: Vec<i64>,
    pub arm: Option<ArmPos>,
    pub op: Op,
    pub slots: Vec<Option<i64>>,
}

impl Watch {
    /// The accesses of role-branch arms with a slot operand whose every enclosing op is
    /// traced (`traced`: they hold mbarrier ops), and the commits and waits of their queues.
    pub(super) fn new(k: &Kernel, traced: &HashSet<Op>) -> Watch {
        let parents = k.parents();
        let mut acc = Vec::new();
        k.walk(|o| {
            if crate::analysis::role_split::branch_group(k, o).is_some() {
                for &r in &k.ops[o].regions {
                    crate::sync::handshake::accesses(k, r, &mut acc);
                }
            }
        });
        let mut w = Watch::default();
        let mut queues: Vec<Completion> = Vec::new();
        // An op naming one buffer through two slot operands is not watched (one answer per
        // op and buffer).
        let mut twice = HashSet::new();
        for a in acc {
            let Some(slot) = a.slot else { continue };
            if !parents.ancestors(a.op).iter().all(|p| traced.contains(p)) {
                continue;
            }
            let list = w.uses.entry(a.op).or_default();
            match list.iter().find(|(b, _)| *b == a.buffer) {
                Some(&(_, s)) if s != slot => {
                    twice.insert(a.op);
                }
                Some(_) => {}
                None => {
                    list.push((a.buffer, slot));
                    queues.push(completion(&k.ops[a.op].kind));
                }
            }
        }
        w.uses.retain(|o, _| !twice.contains(o));
        k.walk(|o| {
            let kind = &k.ops[o].kind;
            let of_queue = |q: &Completion| matches!(q, Completion::Groups(c, wt) if c(kind) || wt(kind).is_some());
            if queues.iter().any(of_queue) {
                w.queue_ops.insert(o);
            }
        });
        w
    }

    /// Whether op `o` is recorded.
    pub(super) fn observes(&self, o: Op) -> bool {
        self.uses.contains_key(&o) || self.queue_ops.contains(&o)
    }

    /// The values of the slot operands recorded, in a deterministic order (their
    /// thread-dependent terms decide the trace's thread classes too).
    pub(super) fn slot_values(&self) -> Vec<Value> {
        let mut v: Vec<Value> = (self.uses.values().flatten()).filter_map(|(_, s)| s.value()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The slot operands recorded at op `o` (empty for a commit or wait).
    pub(super) fn slots(&self, o: Op) -> Vec<Operand> {
        self.uses.get(&o).map_or_else(Vec::new, |l| l.iter().map(|(_, s)| *s).collect())
    }
}

/// A thread's arrivals on one slot: (place in its sequence, key), in its sequence.
type Arrivals<'a> = Vec<(usize, &'a [i64])>;

/// Each thread's arrivals by slot, in its sequence, and every wait by slot, by key: what (2)
/// and (3) read.
struct Index<'a> {
    arrivals: HashMap<(u32, Slot), Arrivals<'a>>,
    waits: HashMap<Slot, Vec<(&'a [i64], Op)>>,
    arrays: Vec<Buffer>,
}

impl<'a> Index<'a> {
    fn new(k: &Kernel, ev: &'a [Event]) -> Self {
        let mut ix = Index { arrivals: HashMap::new(), waits: HashMap::new(), arrays: Vec::new() };
        for e in ev {
            match e.ev {
                Ev::Arrive(_) => {
                    ix.arrivals.entry((e.thread, e.slot)).or_default().push((e.seq, &e.key));
                    if k.buffers[e.slot.0].shape.len() == 1 && !ix.arrays.contains(&e.slot.0) {
                        ix.arrays.push(e.slot.0);
                    }
                }
                Ev::Wait(_) => ix.waits.entry(e.slot).or_default().push((&e.key, e.op)),
                _ => {}
            }
        }
        // Events of one thread come in sequence order; waits are searched by key.
        ix.waits.values_mut().for_each(|w| w.sort_unstable());
        ix
    }

    /// (2) and (3) for a use keyed `ku`, complete at `c`, on slot `s` (`E[e]`) of its thread
    /// `t`: the wait ops keyed between the use and its release go to `between`; `false` when
    /// no release follows (or one is keyed before the use).
    fn released(&self, t: u32, s: Slot, c: usize, ku: &[i64], between: &mut HashSet<Op>) -> bool {
        let Some(arr) = self.arrivals.get(&(t, s)) else { return false };
        let Some(&(_, kr)) = arr.get(arr.partition_point(|&(q, _)| q <= c)) else {
            return false;
        };
        let waits = self.waits.get(&s).map_or(&[][..], |w| &w[..]);
        let from = waits.partition_point(|&(w, _)| w <= ku);
        // A key spells its op's structural path (positions, arms, iterations), so a wait and
        // an arrival never tie; a tie would leave the wait unordered after `R`, so it counts
        // as between (`<=`): the safe side, should the keys ever change.
        between.extend(waits[from..].iter().take_while(|&&(w, _)| w <= kr).map(|&(_, o)| o));
        ku < kr
    }
}

/// The accesses of `w` released late ([`LateReleases`]) under the keys of `ev` and `marks`
/// (one alignment: the verdict's), each with the waits keyed between a use and its release.
pub(super) fn releases(k: &Kernel, w: &Watch, ev: &[Event], marks: &[Mark]) -> LateReleases {
    let ix = Index::new(k, ev);
    let mut by_thread: HashMap<u32, Vec<&Mark>> = HashMap::new();
    for m in marks {
        by_thread.entry(m.thread).or_default().push(m);
    }
    let mut out = LateReleases::new();
    for (&x, list) in &w.uses {
        for (j, &(b, _)) in list.iter().enumerate() {
            for &e in &ix.arrays {
                let mut between = HashSet::new();
                if by_thread.values().all(|ms| released_all(k, &ix, (ms, x, j), e, &mut between)) {
                    out.insert((x, b, e), between);
                }
            }
        }
    }
    out
}

/// Whether every execution of `x` in one thread's marks `ms` (slot `j` of its list) is
/// complete and released on array `e` (module doc, 1 and 2); the waits keyed between go to
/// `between` (3).
fn released_all(k: &Kernel, ix: &Index, (ms, x, j): (&[&Mark], Op, usize), e: Buffer, between: &mut HashSet<Op>) -> bool {
    let (commit, wait) = match completion(&k.ops[x].kind) {
        Completion::Itself => (None, None),
        Completion::Groups(c, w) => (Some(c), Some(w)),
        Completion::Unmodelled => return false,
    };
    let commits: Vec<usize> = (ms.iter()).filter(|m| commit.is_some_and(|c| c(&k.ops[m.op].kind))).map(|m| m.seq).collect();
    let waits: Vec<(usize, u32)> = (ms.iter()).filter_map(|m| Some((m.seq, wait?(&k.ops[m.op].kind)?))).collect();
    let before = |q: usize| commits.partition_point(|&c| c < q);
    // The first completing wait of a later use is never before an earlier use's.
    let mut at = 0;
    for u in ms.iter().filter(|m| m.op == x) {
        let Some(Some(slot)) = u.slots.get(j) else { return false };
        let c = match wait {
            None => u.seq,
            Some(_) => {
                let n0 = before(u.seq);
                at = at.max(waits.partition_point(|&(q, _)| q < u.seq));
                while at < waits.len() && before(waits[at].0) - n0 < waits[at].1 as usize + 1 {
                    at += 1;
                }
                match waits.get(at) {
                    Some(&(q, _)) => q,
                    None => return false,
                }
            }
        };
        if !ix.released(u.thread, Slot(e, *slot), c, &u.key, between) {
            return false;
        }
    }
    true
}
