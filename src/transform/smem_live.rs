//! Buffer liveness for shared-memory planning: for every shared buffer, the interval of
//! program-order op numbers during which it holds data that may still be read (and so may
//! not share bytes with another buffer holding data), exact across loop back edges.
//!
//! Numbering. Ops are numbered in pre-order over the region tree; a compound op's span runs
//! from its own number to the last number of its subtree. A buffer's interval starts at the
//! first op that touches it and ends at the last (reads, writes, atomics, async and collective
//! accesses, view definitions and mbarrier ops, all read off the effects table).
//!
//! Back edges. For every `for` or `while` loop `L` that contains a touch of buffer `b`, `b` is
//! live across `L`'s back edge — so its interval widens to `L`'s whole span — unless `b` is
//! *private* to `L` or to a loop inside `L`. `b` is private to `L` when
//! 1. every touch of `b` lies inside `L` (nothing before the loop flows in, nothing the last
//!    iteration leaves is read after it), `L` is a `for` whose body every thread runs together
//!    (not divergent), and `b` holds no mbarriers; and
//! 2. every element any read of `b` in `L` may touch in an iteration was written earlier in
//!    the same iteration by a *must-write*: a plain write sitting in an op of `L`'s body that
//!    comes strictly before the read's, under no `if`/`while` between it and `L` and inside
//!    inner `for`s only when they run at least once, with an exactly known footprint.
//!    Footprints are those of `analysis::footprint` (exact enumeration per iteration of the
//!    enclosing loops); reads may over-approximate (guards that might run, unknown units make
//!    the test fail), must-writes may not.
//!
//! Then iteration `i+1` never reads what iteration `i` wrote, and the buffer is dead from its
//! last touch in an iteration to its first touch in the next: another private buffer of the
//! same loop may take its bytes in between (the reuse hazards across the back edge are
//! ordinary loop-carried aliasing hazards that `sync` places barriers for). A buffer read at
//! the top of an iteration before that iteration writes it (loop-carried) fails test 2 and
//! stays live across the back edge — the case nvFuser's straight-line intervals get wrong
//! (seed 004: its "outer live interval" treats every loop touch as whole-loop).
//!
//! Hand-offs. Inside one loop `L` (outside every other loop, all threads running its body
//! together) buffer `a` may be last read element by element while buffer `b` is first written
//! (`for i: B[i] = f(A[i])`): their intervals overlap, but with both at one offset no write of
//! `b` in an iteration touches a byte that a read of `a` touches in a later iteration, or
//! later in the same one (the distance masks of `analysis::conflicts`, over every thread).
//! `a` may only be read in `L` and not touched after it, `b` not touched before it. Such a
//! pair may share bytes at one offset only (`smem_alloc::Rel::SameOffset`): the proof is for
//! equal offsets. Which thread reaches a byte first is again `sync`'s question.
//!
//! Slots. A *ring* — an unpinned data buffer of rank 2 or more whose leading dimension `S` is
//! 2 to `smem_alloc::MAX_SLOTS` (a multi-buffered buffer: `pipeline --stages S` output, or
//! written so) — is also cut into its `S` slots, each with its own interval: a slot's touches
//! are the ops whose accesses may touch its bytes in some instance (`analysis::footprint`,
//! which evaluates `rem` indices and `ir::induction`'s slot counters per iteration and
//! over-approximates what it cannot), widened over loops like a buffer's, with the privacy
//! test (2) restricted to the slot's bytes. A slot no access touches has no interval. Two
//! buffers relate slot by slot (`Rel::Slots`): slot `x` of one may share bytes with slot `y`
//! of the other when their intervals are disjoint or one is never touched (a plain buffer is
//! one slot). So a slot the prologue has not filled yet, the slots a peeled epilogue no
//! longer reads, or a slot written and consumed within each iteration lend their bytes while
//! the other slots hold data. The buffer's own interval is the hull of its slots' and its
//! own, so `Free` still means disjoint lifetimes.
//!
//! Mbarriers. An mbarrier buffer that no `mbar_inval` touches stays live to the end of the
//! kernel: PTX lets its bytes be repurposed only after `mbarrier.inval`.
//!
//! Concurrency. Two buffers touched in the two arms of a thread-dependent `if` are live at
//! the same time whatever their intervals say: the arms run at once in different threads and
//! no barrier can separate them. Arms of a uniform `if` run one at a time.
//!
//! Invariants: an interval always contains every touch; widening only grows intervals.
//! Complexity: O(ops) numbering; per buffer and loop, the coverage test is
//! O(R · W · |instances| · |units|) over its R reads and W writes inside the loop, once per
//! slot for rings (at most 8 slots); at most 64 hand-off candidates, each one footprint
//! analysis of the kernel.
//! Source: nvFuser's live intervals and inner/outer aliasing (seed 004); classic structured
//! liveness (upward-exposed reads make a variable live at the loop head).

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::analysis::footprint::{Footprints, LoopDomain};
use crate::ir::*;
pub use crate::transform::smem_alloc::Rel;
use crate::transform::smem_alloc::{MAX_SLOTS, may_overlap, slot_bit};

/// Lifetimes of every buffer.
#[derive(Clone, Debug)]
pub struct Lifetimes {
    /// Live interval (inclusive op numbers); `None` when the buffer is never touched.
    pub live: SecondaryMap<Buffer, Option<(usize, usize)>>,
    /// Pairs `(a, b)`, `a < b`, touched in opposite arms of a thread-dependent `if`.
    pub concurrent: BTreeSet<(Buffer, Buffer)>,
    /// The outermost loop a buffer is private to (dead across its back edge), if any.
    pub private_to: SecondaryMap<Buffer, Option<Op>>,
    /// Pairs `(a, b)` whose intervals overlap only inside one loop where `a` is last read and
    /// `b` first written, element by element, so that they may share bytes at one offset.
    pub handoffs: BTreeSet<(Buffer, Buffer)>,
    /// Each op's program-order number.
    pub number: HashMap<Op, usize>,
    /// Per-slot live intervals of every ring (slot order; empty for other buffers); `None`
    /// for a slot no access touches.
    pub slots: SecondaryMap<Buffer, Vec<Option<(usize, usize)>>>,
}

impl Lifetimes {
    /// Whether `a` and `b` may hold data at the same time, so that they may not share bytes
    /// (except at one offset for a hand-off: see [`Lifetimes::relation`]). A buffer never
    /// touched interferes with everything (it keeps its bytes conservatively).
    pub fn interfere(&self, a: Buffer, b: Buffer) -> bool {
        self.relation(a, b) != Rel::Free
    }

    /// How `a` and `b` may share bytes: freely (disjoint lifetimes), at one offset only (a
    /// hand-off inside a loop), or not at all.
    pub fn relation(&self, a: Buffer, b: Buffer) -> Rel {
        if a == b || self.concurrent.contains(&(a.min(b), a.max(b))) {
            return Rel::Exclusive;
        }
        let overlap = match (*self.live.get(a), *self.live.get(b)) {
            (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
            _ => true,
        };
        let rings = !self.slots.get(a).is_empty() || !self.slots.get(b).is_empty();
        let touched = self.live.get(a).is_some() && self.live.get(b).is_some();
        if !overlap {
            Rel::Free
        } else if self.handoffs.contains(&(a, b)) || self.handoffs.contains(&(b, a)) {
            Rel::SameOffset
        } else if rings && touched {
            self.slot_relation(a, b)
        } else {
            Rel::Exclusive
        }
    }

    /// The live intervals of `b`'s slots (one piece, its whole interval, unless a ring).
    pub fn pieces(&self, b: Buffer) -> Vec<Option<(usize, usize)>> {
        let s = self.slots.get(b);
        if s.is_empty() {
            vec![*self.live.get(b)]
        } else {
            s.clone()
        }
    }

    /// Slot by slot: slot `x` of `a` may share bytes with slot `y` of `b` when their
    /// intervals are disjoint or one of them is never touched.
    fn slot_relation(&self, a: Buffer, b: Buffer) -> Rel {
        let (pa, pb) = (self.pieces(a), self.pieces(b));
        let (mut bits, mut all) = (0u64, 0u64);
        for (x, p) in pa.iter().enumerate() {
            for (y, q) in pb.iter().enumerate() {
                let bit = slot_bit(x as u64, y as u64);
                all |= bit;
                let free = match (p, q) {
                    (Some((p0, p1)), Some((q0, q1))) => p1 < q0 || q1 < p0,
                    _ => true,
                };
                if free {
                    bits |= bit;
                }
            }
        }
        match bits {
            0 => Rel::Exclusive,
            b if b == all => Rel::Free,
            b => Rel::Slots(b),
        }
    }

    /// Slots `b` is cut into for liveness (1 unless a ring).
    pub fn slot_count(&self, b: Buffer) -> u64 {
        self.slots.get(b).len().max(1) as u64
    }

    /// Whether `a` at `oa` and `b` at `ob` (sizes `na`, `nb`) may lie as they do.
    pub fn may_lie(
        &self,
        a: Buffer,
        b: Buffer,
        (oa, na): (u64, u64),
        (ob, nb): (u64, u64),
    ) -> bool {
        may_overlap(
            self.relation(a, b),
            (oa, na, self.slot_count(a)),
            (ob, nb, self.slot_count(b)),
        )
    }
}

/// Program-order numbers and subtree ends of every placed op.
struct Numbering {
    number: HashMap<Op, usize>,
    end: HashMap<Op, usize>,
}

fn numbering(k: &Kernel) -> Numbering {
    fn go(k: &Kernel, r: Region, n: &mut usize, out: &mut Numbering) {
        for &op in k.region_ops(r) {
            out.number.insert(op, *n);
            *n += 1;
            for &c in &k.ops[op].regions {
                go(k, c, n, out);
            }
            out.end.insert(op, n.saturating_sub(1));
        }
    }
    let mut out = Numbering {
        number: HashMap::new(),
        end: HashMap::new(),
    };
    go(k, k.body(), &mut 0, &mut out);
    out
}

/// Buffers an op touches by itself (not through its regions).
pub fn buffers_touched(k: &Kernel, op: Op) -> Vec<Buffer> {
    let mut v: Vec<Buffer> = effects(k, op)
        .shared
        .iter()
        .map(|a| k.root_buffer(a.mem))
        .collect();
    match &k.ops[op].kind {
        OpKind::ViewDef(view) => v.push(k.root_buffer(k.views[*view].base)),
        OpKind::TmaLoad { mbar, .. }
        | OpKind::MbarInit { mbar, .. }
        | OpKind::MbarArrive { mbar, .. }
        | OpKind::MbarExpectTx { mbar, .. }
        | OpKind::MbarWait { mbar, .. }
        | OpKind::MbarInval { mbar, .. } => v.push(k.root_buffer(*mbar)),
        _ => {}
    }
    v
}

/// Lifetimes of every buffer of `k` (see the module doc).
pub fn lifetimes(k: &Kernel) -> Lifetimes {
    let num = numbering(k);
    let mut touches: SecondaryMap<Buffer, Vec<Op>> = SecondaryMap::with_default(Vec::new());
    for op in k.ops_in_order() {
        for b in buffers_touched(k, op) {
            if !touches.get(b).contains(&op) {
                touches.get_mut(b).push(op);
            }
        }
    }
    let mut fp = Footprints::new(k, 32);
    let mut live = SecondaryMap::with_default(None);
    let mut private_to = SecondaryMap::with_default(None);
    let mut slot_live = SecondaryMap::with_default(Vec::new());
    for b in k.buffers.keys() {
        let ops = touches.get(b);
        let Some(lo) = ops.iter().map(|o| num.number[o]).min() else {
            continue;
        };
        let hi = ops.iter().map(|o| num.number[o]).max().unwrap_or(lo);
        let (mut span, private) = widen(k, &mut fp, &num, (b, None), ops, (lo, hi));
        if k.buffers[b].elem == ElemType::MBarrier
            && !ops
                .iter()
                .any(|&o| matches!(k.ops[o].kind, OpKind::MbarInval { .. }))
        {
            // PTX: an mbarrier's bytes may be repurposed only after `mbarrier.inval`.
            span.1 = usize::MAX;
        }
        let mut slots = Vec::new();
        if let Some(n) = ring_slots(k, b) {
            slots = slot_lifetimes(k, &mut fp, &num, (b, n), ops);
            // A slot's interval lies inside the buffer's (the hull of them all).
            for &(s0, s1) in slots.iter().flatten() {
                span = (span.0.min(s0), span.1.max(s1));
            }
        }
        live.set(b, Some(span));
        private_to.set(b, private);
        slot_live.set(b, slots);
    }
    let concurrent = divergent_pairs(k, &fp);
    let handoffs = handoffs(k, &num, &touches);
    Lifetimes {
        live,
        concurrent,
        private_to,
        handoffs,
        number: num.number,
        slots: slot_live,
    }
}

/// Pairs checked for a hand-off (each analyses the footprints of a copy of the kernel);
/// beyond, the pairs keep their intervals (conservative).
const MAX_HANDOFF_CHECKS: usize = 64;

/// Hand-offs (module doc): for each `for` loop `l` outside every other loop, whose body all
/// threads run together, the pairs `(a, b)` of unpinned data buffers where `a` is only read
/// in `l` and never touched after it, `b` is never touched before `l`, and, with both at one
/// offset, no write of `b` in iteration `i` touches a byte a read of `a` touches in iteration
/// `i + d`, `d >= 1`, or later in iteration `i` (`analysis::conflicts`, any threads).
fn handoffs(
    k: &Kernel,
    num: &Numbering,
    touches: &SecondaryMap<Buffer, Vec<Op>>,
) -> BTreeSet<(Buffer, Buffer)> {
    let mut out = BTreeSet::new();
    let mut checks = 0;
    let fp0 = Footprints::new(k, 32);
    let loops: Vec<Op> = k
        .ops_in_order()
        .into_iter()
        .filter(|&l| {
            matches!(k.ops[l].kind, OpKind::For { .. })
                && fp0.loops_of(l).is_empty()
                && !fp0.uniformity().is_divergent(k.ops[l].regions[0])
        })
        .collect();
    let data = |b: Buffer| k.buffers[b].offset.is_none() && k.buffers[b].elem != ElemType::MBarrier;
    for l in loops {
        let (lo, hi) = (num.number[&l], num.end[&l]);
        let inside = |o: &Op| lo < num.number[o] && num.number[o] <= hi;
        let in_l = |b: Buffer| touches.get(b).iter().any(inside);
        let enders: Vec<Buffer> = k
            .buffers
            .keys()
            .filter(|&b| data(b) && in_l(b))
            .filter(|&b| touches.get(b).iter().all(|o| num.number[o] <= hi))
            .filter(|&b| only_reads_in(k, b, touches.get(b).iter().filter(|o| inside(o))))
            .collect();
        let starters: Vec<Buffer> = k
            .buffers
            .keys()
            .filter(|&b| data(b) && in_l(b))
            .filter(|&b| touches.get(b).iter().all(|o| num.number[o] > lo))
            .collect();
        for &a in &enders {
            for &b in starters.iter().filter(|&&b| b != a) {
                if checks == MAX_HANDOFF_CHECKS {
                    return out;
                }
                checks += 1;
                if hands_off(k, l, a, b) {
                    out.insert((a, b));
                }
            }
        }
    }
    out
}

/// Every access of `b` by these ops is a plain read.
fn only_reads_in<'a>(k: &Kernel, b: Buffer, ops: impl Iterator<Item = &'a Op>) -> bool {
    ops.into_iter().all(|&o| {
        effects(k, o)
            .shared
            .iter()
            .filter(|a| k.root_buffer(a.mem) == b)
            .all(|a| a.kind == AccessKind::Read)
    })
}

/// The element condition of [`handoffs`] for `a` and `b` in loop `l`.
fn hands_off(k: &Kernel, l: Op, a: Buffer, b: Buffer) -> bool {
    let mut k2 = k.clone();
    let at = k
        .buffers
        .values()
        .filter_map(|d| d.offset.map(|o| o + d.bytes()))
        .max()
        .unwrap_or(0)
        .div_ceil(128)
        * 128;
    k2.buffers[a].offset = Some(at);
    k2.buffers[b].offset = Some(at);
    let mut fp = Footprints::new(&k2, 32);
    let body = k.ops[l].regions[0];
    let of = |fp: &Footprints, buf: Buffer, want: fn(AccessKind) -> bool| -> Vec<usize> {
        (0..fp.accesses.len())
            .filter(|&i| {
                let x = &fp.accesses[i];
                k.root_buffer(x.access.mem) == buf
                    && x.loops.first() == Some(&l)
                    && want(x.access.kind)
            })
            .collect()
    };
    let reads = of(&fp, a, AccessKind::reads);
    let writes = of(&fp, b, AccessKind::writes);
    for &w in &writes {
        let wpos = body_position(&fp, fp.accesses[w].id.op, body);
        for &r in &reads {
            let rpos = body_position(&fp, fp.accesses[r].id.op, body);
            let hit =
                crate::analysis::conflicts::pair_conflict(&mut fp, w, r, 1, Some(0)).intersect;
            // Distance 0 is harmless only when the read comes first in the iteration.
            let same_iteration_ok = matches!((rpos, wpos), (Some(r), Some(w)) if r < w);
            let bad = if same_iteration_ok { hit & !1 } else { hit };
            if bad != 0 {
                return false;
            }
        }
    }
    true
}

/// Widens `b`'s interval over the loops it is live across; returns the interval and the
/// outermost loop `b` is private to.
fn widen(
    k: &Kernel,
    fp: &mut Footprints,
    num: &Numbering,
    (b, range): (Buffer, Option<ByteRange>),
    ops: &[Op],
    (mut lo, mut hi): (usize, usize),
) -> ((usize, usize), Option<Op>) {
    // Loops containing some touch, innermost first (deeper loops have larger numbers among
    // the ancestors of one op, and an inner loop starts after its outer one).
    let mut loops: Vec<Op> = ops
        .iter()
        .flat_map(|&o| fp.loops_of(o))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    loops.sort_by_key(|l| std::cmp::Reverse(num.number[l]));
    let inside = |l: Op, o: Op| num.number[&l] < num.number[&o] && num.number[&o] <= num.end[&l];
    let containing_all: Vec<Op> = loops
        .iter()
        .copied()
        .filter(|&l| ops.iter().all(|&o| inside(l, o)))
        .collect();
    let private = containing_all
        .iter()
        .copied()
        .find(|&l| private_to_loop(k, fp, (b, range), l));
    let outer_of_private: HashSet<Op> = match private {
        Some(p) => containing_all
            .iter()
            .copied()
            .filter(|&l| l == p || num.number[&l] < num.number[&p])
            .collect(),
        None => HashSet::new(),
    };
    for l in loops {
        if !outer_of_private.contains(&l) {
            lo = lo.min(num.number[&l]);
            hi = hi.max(num.end[&l]);
        }
    }
    let outermost = private.and(
        outer_of_private
            .iter()
            .copied()
            .min_by_key(|l| num.number[l]),
    );
    ((lo, hi), outermost)
}

/// Bytes `[lo, hi)` of a buffer (one slot of a ring).
type ByteRange = (u64, u64);

/// The slot count of `b` when it is a ring (module doc, "Slots"): unpinned data, rank at
/// least 2, leading dimension 2 to [`MAX_SLOTS`].
fn ring_slots(k: &Kernel, b: Buffer) -> Option<u64> {
    let d = &k.buffers[b];
    let lead = *d.shape.first()?;
    (d.offset.is_none()
        && d.elem != ElemType::MBarrier
        && d.shape.len() >= 2
        && (2..=MAX_SLOTS).contains(&lead))
    .then_some(lead)
}

/// Whether unit `key` (footprint key: space in the top bits) lies in bytes `[lo, hi)`.
fn in_bytes(key: u64, unit: u64, (lo, hi): ByteRange) -> bool {
    let byte = (key & ((1 << 40) - 1)) * unit;
    lo < byte + unit && byte < hi
}

/// Whether access `i` may touch bytes `range` (always, without a range).
fn touches_range(fp: &mut Footprints, i: usize, range: Option<ByteRange>) -> bool {
    let Some((lo, hi)) = range else {
        return true;
    };
    let unit = fp.unit(fp.accesses[i].space);
    fp.grouped(i, 0).iter().any(|(_, t)| {
        t.exact.keys().any(|&u| in_bytes(u, unit, (lo, hi)))
            || t.unknown.iter().any(|&(a, b, _)| {
                let m = (1u64 << 40) - 1;
                (a & m) * unit < hi && lo < (b & m) * unit
            })
    })
}

/// Per-slot live intervals of ring `b` (`n` slots) touched by `ops`: each slot's touches are
/// the ops whose accesses may touch its bytes over every instance (`analysis::footprint`,
/// which evaluates `rem` and recognized slot counters per iteration); a view definition
/// holds no data and touches no slot. Each slot's interval is widened over loops like a
/// buffer's, with the privacy test restricted to the slot's bytes.
fn slot_lifetimes(
    k: &Kernel,
    fp: &mut Footprints,
    num: &Numbering,
    (b, n): (Buffer, u64),
    ops: &[Op],
) -> Vec<Option<(usize, usize)>> {
    let width = k.buffers[b].bytes() / n;
    let ranges: Vec<ByteRange> = (0..n).map(|s| (s * width, (s + 1) * width)).collect();
    let mut per_slot: Vec<Vec<Op>> = vec![Vec::new(); n as usize];
    for &o in ops {
        let mine: Vec<usize> = (0..fp.accesses.len())
            .filter(|&i| fp.accesses[i].id.op == o && k.root_buffer(fp.accesses[i].access.mem) == b)
            .collect();
        if mine.is_empty() && matches!(k.ops[o].kind, OpKind::ViewDef(_)) {
            continue;
        }
        for (s, &r) in ranges.iter().enumerate() {
            // An op touching the buffer outside the footprints counts for every slot.
            if mine.is_empty() || mine.iter().any(|&i| touches_range(fp, i, Some(r))) {
                per_slot[s].push(o);
            }
        }
    }
    per_slot
        .iter()
        .zip(&ranges)
        .map(|(sops, &r)| {
            let lo = sops.iter().map(|o| num.number[o]).min()?;
            let hi = sops.iter().map(|o| num.number[o]).max().unwrap_or(lo);
            Some(widen(k, fp, num, (b, Some(r)), sops, (lo, hi)).0)
        })
        .collect()
}

/// Test 2 of the module doc (test 1's "all touches inside" is the caller's): every read of
/// `b` inside loop `l` is covered by earlier must-writes of the same iteration.
fn private_to_loop(
    k: &Kernel,
    fp: &mut Footprints,
    (b, range): (Buffer, Option<ByteRange>),
    l: Op,
) -> bool {
    if !matches!(k.ops[l].kind, OpKind::For { .. })
        || k.buffers[b].elem == ElemType::MBarrier
        || fp.uniformity().is_divergent(k.ops[l].regions[0])
    {
        return false;
    }
    let body = k.ops[l].regions[0];
    let mine: Vec<usize> = (0..fp.accesses.len())
        .filter(|&i| {
            let a = &fp.accesses[i];
            k.root_buffer(a.access.mem) == b && a.loops.contains(&l)
        })
        .collect();
    let plen = match mine.first() {
        Some(&i) => fp.accesses[i]
            .loops
            .iter()
            .position(|&x| x == l)
            .map_or(0, |p| p + 1),
        None => return true,
    };
    let writes: Vec<(usize, usize)> = mine
        .iter()
        .filter_map(|&i| must_write_position(k, fp, i, l, body).map(|p| (i, p)))
        .collect();
    for &r in &mine {
        if !fp.accesses[r].access.kind.reads() || !touches_range(fp, r, range) {
            continue;
        }
        let Some(rpos) = body_position(fp, fp.accesses[r].id.op, body) else {
            return false;
        };
        let earlier: Vec<usize> = writes
            .iter()
            .filter(|&&(_, p)| p < rpos)
            .map(|&(w, _)| w)
            .collect();
        if !covered(fp, r, &earlier, (plen, range)) {
            return false;
        }
    }
    true
}

/// The index in `body` of the op of `body` that contains (or is) `op`.
fn body_position(fp: &Footprints, op: Op, body: Region) -> Option<usize> {
    let k = fp.k;
    let mut chain = fp.ancestors(op);
    chain.push(op);
    chain
        .iter()
        .find(|&&o| fp.region_of(o) == Some(body))
        .and_then(|o| k.region_ops(body).iter().position(|x| x == o))
}

/// Where in `l`'s body access `i` is a must-write (see the module doc), if it is one.
fn must_write_position(
    k: &Kernel,
    fp: &Footprints,
    i: usize,
    l: Op,
    body: Region,
) -> Option<usize> {
    let a = &fp.accesses[i];
    if a.access.kind != AccessKind::Write {
        return None;
    }
    let chain = fp.ancestors(a.id.op);
    let from = chain.iter().position(|&x| x == l)? + 1;
    for &anc in &chain[from..] {
        let runs = match &k.ops[anc].kind {
            OpKind::Stage { .. } => true,
            OpKind::For { .. } => {
                matches!(fp.domains.get(&anc), Some(LoopDomain::Exact { trip, .. }) if *trip >= 1)
            }
            _ => false,
        };
        if !runs {
            return None;
        }
    }
    body_position(fp, a.id.op, body)
}

/// Whether every unit read `r` may touch, per iteration of the first `plen` loops, is written
/// by one of `writes` in the same iteration.
fn covered(
    fp: &mut Footprints,
    r: usize,
    writes: &[usize],
    (plen, range): (usize, Option<ByteRange>),
) -> bool {
    let reads = fp.grouped(r, plen);
    let mut groups = Vec::new();
    for &w in writes {
        groups.push(fp.grouped(w, plen));
    }
    let unit = fp.unit(fp.accesses[r].space);
    let wanted = |key: u64| range.is_none_or(|(lo, hi)| in_bytes(key, unit, (lo, hi)));
    reads.iter().all(|(rkey, rt)| {
        rt.unknown.is_empty()
            && rt.exact.keys().filter(|&&u| wanted(u)).all(|unit| {
                groups.iter().any(|g| {
                    g.iter()
                        .any(|(wkey, wt)| applies(wkey, rkey) && wt.exact.contains_key(unit))
                })
            })
    })
}

/// A write instance keyed `w` happens in the iteration of a read keyed `r`: equal keys, or
/// the write's key is unknown because it touches the same units in every iteration.
fn applies(w: &[Option<i64>], r: &[Option<i64>]) -> bool {
    w.len() == r.len() && w.iter().zip(r).all(|(x, y)| x.is_none() || x == y)
}

/// Buffer pairs touched in opposite arms of a thread-dependent `if`.
fn divergent_pairs(k: &Kernel, fp: &Footprints) -> BTreeSet<(Buffer, Buffer)> {
    fn used(k: &Kernel, r: Region, out: &mut BTreeSet<Buffer>) {
        for &op in k.region_ops(r) {
            out.extend(buffers_touched(k, op));
            for &c in &k.ops[op].regions {
                used(k, c, out);
            }
        }
    }
    let mut pairs = BTreeSet::new();
    for op in k.ops_in_order() {
        let OpKind::If { cond } = &k.ops[op].kind else {
            continue;
        };
        if fp.uniformity().operand_uniform(cond) {
            continue;
        }
        let arms: Vec<BTreeSet<Buffer>> = k.ops[op]
            .regions
            .iter()
            .map(|&r| {
                let mut s = BTreeSet::new();
                used(k, r, &mut s);
                s
            })
            .collect();
        for (i, x) in arms.iter().enumerate() {
            for y in &arms[i + 1..] {
                for &a in x {
                    for &b in y.iter().filter(|&&b| b != a) {
                        pairs.insert((a.min(b), a.max(b)));
                    }
                }
            }
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::parse_kernel;

    fn lifetimes_of(src: &str) -> (Kernel, Lifetimes) {
        let k = parse_kernel(src).expect("parses");
        let lt = lifetimes(&k);
        (k, lt)
    }

    fn buffer(k: &Kernel, name: &str) -> Buffer {
        k.buffers
            .keys()
            .find(|&b| k.buffers[b].name == name)
            .expect("buffer")
    }

    #[test]
    fn an_mbarrier_without_inval_stays_live_to_the_end() {
        let src = |inval: &str| {
            format!(
                "kernel @k() block(32) target \"sm_90\" {{\n shared @m : mbarrier[1]\n shared @d : f32[4]\n mbar_init @m[0], 1\n mbar_arrive @m[0]\n {inval}\n store @d[0], 1.0\n %x = load @d[0]\n}}"
            )
        };
        let (k, lt) = lifetimes_of(&src(""));
        assert!(lt.interfere(buffer(&k, "m"), buffer(&k, "d")));
        let (k, lt) = lifetimes_of(&src("mbar_inval @m[0]"));
        assert!(!lt.interfere(buffer(&k, "m"), buffer(&k, "d")));
    }

    #[test]
    fn a_loop_under_thread_dependent_control_keeps_its_buffers_live() {
        // Threads leave the loop at different trip counts: no iteration is shared by all.
        let (k, lt) = lifetimes_of(
            "kernel @k() block(8) {\n shared @a : f32[8]\n %t = tid.x\n for %i = 0 to %t step 1 {\n store @a[%t], 1.0\n %x = load @a[%t]\n }\n}",
        );
        assert!(lt.private_to.get(buffer(&k, "a")).is_none());
    }

    #[test]
    fn a_hand_off_needs_the_write_behind_every_later_read() {
        let src = |w: &str| {
            format!(
                "kernel @k() block(4) {{\n shared @a : f32[8]\n shared @b : f32[8]\n %t = tid.x\n store @a[%t], 1.0\n %u = add %t, 4\n store @a[%u], 1.0\n for %i = 0 to 8 step 1 {{\n %x = load @a[%i]\n {w}\n }}\n %y = load @b[%t]\n}}"
            )
        };
        let (k, lt) = lifetimes_of(&src("store @b[%i], %x"));
        let (a, b) = (buffer(&k, "a"), buffer(&k, "b"));
        assert_eq!(lt.relation(a, b), Rel::SameOffset);
        assert!(lt.may_lie(a, b, (0, 32), (0, 32)));
        assert!(!lt.may_lie(a, b, (0, 32), (16, 32)));
        // Writing element i + 1 lands on what iteration i + 1 reads.
        let (k, lt) = lifetimes_of(&src("%j = add %i, 1\n %m = rem %j, 8\n store @b[%m], %x"));
        assert_eq!(
            lt.relation(buffer(&k, "a"), buffer(&k, "b")),
            Rel::Exclusive
        );
        // Writing element i - 1 wraps around: iteration 0 writes what iteration 7 reads.
        let (k, lt) = lifetimes_of(&src("%j = add %i, 7\n %m = rem %j, 8\n store @b[%m], %x"));
        assert_eq!(
            lt.relation(buffer(&k, "a"), buffer(&k, "b")),
            Rel::Exclusive
        );
    }

    #[test]
    fn each_slot_of_a_ring_has_its_own_interval() {
        // Slot 0 is filled before the loop, slot 1 only in it; @c is used in between, and
        // @d in the loop.
        let (k, lt) = lifetimes_of(
            "kernel @k() block(4) {\n shared @r : f32[3, 4]\n shared @c : f32[4]\n shared @d : f32[4]\n %t = tid.x\n store @r[0, %t], 1.0\n store @c[%t], 2.0\n %x = load @c[0]\n for %i = 0 to 4 step 1 {\n %a = load @r[0, %t]\n store @r[1, %t], %a\n store @d[%t], %a\n %y = load @d[0]\n %b = load @r[1, 0]\n }\n}",
        );
        let (r, c, d) = (buffer(&k, "r"), buffer(&k, "c"), buffer(&k, "d"));
        let slots = lt.slots.get(r);
        assert_eq!(slots.len(), 3);
        assert!(slots[2].is_none(), "slot 2 is never touched");
        // @c may lie on slots 1 and 2, not on slot 0; @d only on slot 2.
        assert_eq!(
            lt.relation(r, c),
            Rel::Slots(slot_bit(1, 0) | slot_bit(2, 0))
        );
        assert_eq!(lt.relation(r, d), Rel::Slots(slot_bit(2, 0)));
        assert!(lt.may_lie(r, c, (0, 48), (16, 16)));
        assert!(!lt.may_lie(r, c, (0, 48), (0, 16)));
        assert!(!lt.may_lie(r, d, (0, 48), (16, 16)));
        assert!(lt.may_lie(r, d, (0, 48), (32, 16)));
    }

    #[test]
    fn a_ring_touched_in_a_divergent_arm_keeps_its_slots_apart() {
        let (k, lt) = lifetimes_of(
            "kernel @k() block(8) {\n shared @r : f32[2, 4]\n shared @c : f32[4]\n %t = tid.x\n %h = cmp lt %t, 4\n if %h {\n store @r[0, %t], 1.0\n } else {\n store @c[0], 2.0\n }\n}",
        );
        assert_eq!(lt.relation(buffer(&k, "r"), buffer(&k, "c")), Rel::Exclusive);
    }
}
