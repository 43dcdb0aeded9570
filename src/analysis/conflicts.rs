//! Conflicts: whether two shared accesses may touch one element from two different threads
//! (at least one writing, not two atomics of the same kind), and at which loop-iteration
//! distances.
//!
//! Same thread and same element is never a conflict: program order orders it (nvFuser's rule).
//! Collective accesses conflict with everything they overlap, except that two collective
//! accesses with the same layout name and view shape give each position to the same thread
//! (carried by [`Who::Lane`](crate::analysis::footprint::Who::Lane) in the footprints; an
//! opaque fall-back of a defined encoding gives each access its own `Who::Lane` mapping).
//!
//! The relation between the two instances is given by a number of leading loop levels whose
//! keys must match (`plen`), and optionally one *variable* level `c < plen` where the
//! destination runs `d` iterations after the source. The result is a bitmask over `d`
//! (bit 63 = "63 or more"), for conflicts (different threads) and for plain intersection
//! (any thread, used for in-flight async copies), plus whether every conflicting pair of
//! threads lies in one warp.
//! Complexity: O(G_a · G_b · |touch|) where G are the instance groups of the two accesses.

use crate::analysis::footprint::{Footprints, LoopDomain, Touch, UnitConflict, Who};
use crate::ir::{AccessKind, EntityRef};

/// Whether two access kinds can conflict at all (ignoring footprints).
pub fn kinds_conflict(a: AccessKind, b: AccessKind) -> bool {
    if !a.writes() && !b.writes() {
        return false;
    }
    !matches!((a, b), (AccessKind::Atomic(x), AccessKind::Atomic(y)) if x == y)
}

/// Distances at which two accesses conflict.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairConflict {
    /// Bit `d`: a conflict between different threads at distance `d`.
    pub conflict: u64,
    /// Bit `d`: the footprints intersect at distance `d` (whoever touches them).
    pub intersect: u64,
    /// Every conflicting pair of threads lies within one warp.
    pub intra_warp: bool,
    /// One conflicting unit and who touches it on each side (`None` when the symbolic
    /// engine answered: [`witness`] enumerates it for `--explain`).
    pub witness: Option<UnitConflict>,
    /// The query (`plen`, `var`) that gave this answer, to find a witness lazily.
    pub query: Option<(usize, Option<usize>)>,
}

/// A pair-conflict answer as the maps of answers store it ([`Footprints`]' `pair_answers`,
/// `sym_questions` and the carried memo): the two masks and `intra_warp`, 24 bytes where a
/// [`PairConflict`] takes about 100. Nothing is lost: a stored answer never holds a witness
/// (both engines leave it to [`witness`]) and its query is the key it is stored under.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PairBits {
    pub conflict: u64,
    pub intersect: u64,
    pub intra_warp: bool,
}

impl PairBits {
    /// The stored form of `pc` (its witness, if any, is dropped).
    pub fn of(pc: &PairConflict) -> PairBits {
        PairBits {
            conflict: pc.conflict,
            intersect: pc.intersect,
            intra_warp: pc.intra_warp,
        }
    }

    /// The answer to query (`plen`, `var`), without a witness.
    pub fn answer(self, plen: usize, var: Option<usize>) -> PairConflict {
        PairConflict {
            conflict: self.conflict,
            intersect: self.intersect,
            intra_warp: self.intra_warp,
            witness: None,
            query: Some((plen, var)),
        }
    }
}

/// One dense key for a pair question: two 48-bit ids (access indices, question ids or packed
/// [`AccessRef`](crate::analysis::footprint::AccessRef)s), the common prefix and the distance
/// level (`0`: none, else level + 1), 16 bits each. Injective while the ids fit 48 bits and
/// the loop depth 16 (checked).
pub(crate) fn question_key(a: u64, b: u64, plen: usize, var: Option<usize>) -> u128 {
    let v = var.map_or(0, |v| v + 1);
    assert!(a < 1 << 48 && b < 1 << 48 && plen < 1 << 16 && v < 1 << 16, "pair key out of range");
    (a as u128) << 80 | (b as u128) << 32 | (plen as u128) << 16 | v as u128
}

fn bits_for(dom: Option<LoopDomain>, ka: Option<i64>, kb: Option<i64>) -> u64 {
    let upto = |trip: Option<i64>| -> u64 {
        match trip {
            Some(t) if t < 63 => (1u64 << t.max(0)) - 1,
            _ => u64::MAX,
        }
    };
    match (dom, ka, kb) {
        (Some(LoopDomain::Exact { step, .. }), Some(a), Some(b)) => {
            let diff = b - a;
            if diff >= 0 && diff % step == 0 {
                1u64 << (diff / step).min(63)
            } else {
                0
            }
        }
        (Some(LoopDomain::Exact { trip, .. }), _, _) => upto(Some(trip)),
        (Some(LoopDomain::Periodic { step, period }), Some(a), Some(b)) => {
            let mut m = 0u64;
            for d in 0..63i64 {
                if (a + d * step - b).rem_euclid(period) == 0 {
                    m |= 1 << d;
                }
            }
            if m != 0 {
                m |= 1 << 63;
            }
            m
        }
        (Some(LoopDomain::Unknown { trip }), _, _) => upto(trip),
        _ => u64::MAX,
    }
}

/// Computes the conflict masks between source access `ai` and destination access `bi`.
/// `plen` leading loop levels are related: equal keys, except level `var` (if any) where the
/// destination is `d` iterations later. Levels at and beyond `plen` are unrelated.
pub fn pair_conflict(
    fp: &mut Footprints,
    ai: usize,
    bi: usize,
    plen: usize,
    var: Option<usize>,
) -> PairConflict {
    // Asked again within this kernel's hazard finding (nearest sources, then the pair's
    // hazards): the answer, and the enumeration's warnings, are already in.
    let here = question_key(ai as u64, bi as u64, plen, var);
    if let Some(pc) = fp.pair_answers.get(&here) {
        return pc.answer(plen, var);
    }
    // Boxes disjoint in some dimension: no common byte under any relation, so no conflict
    // and no intersection at any distance (what the engine answers, without asking it).
    if fp.boxes_apart(ai, bi) {
        return PairBits::default().answer(plen, var);
    }
    fp.pair_questions += 1;
    let key = pair_key(fp, ai, bi, plen, var);
    let bits = match fp.memo_pair(key, ai, bi) {
        Some(bits) => bits,
        None => {
            let bits = PairBits::of(&pair_conflict_uncached(fp, ai, bi, plen, var));
            if let Some(m) = fp.memo.as_mut() {
                m.pairs.insert(key, bits);
            }
            bits
        }
    };
    fp.pair_answers.insert(here, bits);
    bits.answer(plen, var)
}

/// The carried memo's key of a pair question: the accesses by [`AccessRef`] (op id and
/// index in its effects), valid across kernels that differ by inserted sync ops.
///
/// [`AccessRef`]: crate::analysis::footprint::AccessRef
fn pair_key(fp: &Footprints, ai: usize, bi: usize, plen: usize, var: Option<usize>) -> u128 {
    let id = |i: usize| {
        let r = fp.accesses[i].id;
        assert!(r.index < 1 << 16, "access index out of range");
        (r.op.index() as u64) << 16 | r.index as u64
    };
    question_key(id(ai), id(bi), plen, var)
}

/// [`pair_conflict`] of the forward question (`m` leading loop keys equal, no distance
/// level), or `None` when it cannot conflict at distance 0 — decided, where `m ≥ 1`, by the
/// carried question of the innermost common loop first: its distance-0 bit *is* the forward
/// question (level `m − 1` at distance 0, the outer ones equal), and hazard finding asks it
/// for every pair anyway (`hazards::carried_hazard`), so a pair that conflicts in no
/// iteration of its innermost common loop (most pairs of a large loop body) costs one
/// question instead of two.
pub fn forward_conflict(fp: &mut Footprints, ai: usize, bi: usize, m: usize) -> Option<PairConflict> {
    if m > 0 && pair_conflict(fp, ai, bi, m, Some(m - 1)).conflict & 1 == 0 {
        return None;
    }
    let pc = pair_conflict(fp, ai, bi, m, None);
    (pc.conflict & 1 != 0).then_some(pc)
}

fn pair_conflict_uncached(
    fp: &mut Footprints,
    ai: usize,
    bi: usize,
    plen: usize,
    var: Option<usize>,
) -> PairConflict {
    if fp.symbolic
        && !fp.blind_pair(ai, bi)
        && let Some(pc) = symbolic_pair(fp, ai, bi, plen, var)
    {
        return PairConflict {
            query: Some((plen, var)),
            ..pc
        };
    }
    // The witness is found when a message needs it (`hazards::fill_witnesses`), as for a
    // symbolic answer: it costs rebuilding the reference enumeration's maps (`analysis::touch`).
    PairConflict {
        query: Some((plen, var)),
        ..enumerate_pair(fp, (ai, bi), plen, var, false)
    }
}

/// Whether [`pair_conflict`] answers this query with the symbolic engine (the rest are
/// enumerated: `explain` names a unit for those only).
pub fn answered_symbolically(
    fp: &mut Footprints,
    ai: usize,
    bi: usize,
    plen: usize,
    var: Option<usize>,
) -> bool {
    fp.symbolic && !fp.blind_pair(ai, bi) && symbolic_pair(fp, ai, bi, plen, var).is_some()
}

/// The symbolic engine's answer, decided once per question: accesses with equal
/// [`Footprints::question_id`]s (every tile of a generated kernel: same indices, buffers and
/// loops of the same shape) share it without building the problem again.
fn symbolic_pair(
    fp: &mut Footprints,
    ai: usize,
    bi: usize,
    plen: usize,
    var: Option<usize>,
) -> Option<PairConflict> {
    let key = question_key(fp.question_id(ai) as u64, fp.question_id(bi) as u64, plen, var);
    if let Some(r) = fp.sym_questions.get(&key) {
        return r.map(|b| b.answer(plen, var));
    }
    let mut r = crate::analysis::symbolic::pairs::pair_conflict_traced(fp, ai, bi, plen, var);
    // An unknown index read from parameters with declared ranges or block ids: decided per
    // case of those values (`symbolic::cases`) instead of as the whole buffer.
    if r.as_ref().is_none_or(|pc| pc.conflict | pc.intersect != 0)
        && let Some(pc) = crate::analysis::symbolic::cases::pair_conflict(fp, ai, bi, plen, var)
    {
        r = Some(pc);
    }
    fp.sym_questions.insert(key, r.as_ref().map(PairBits::of));
    r
}

/// A conflicting unit of the query that gave `pc`, found by enumeration (the symbolic
/// engine gives none; only `--explain` prints one).
pub fn witness(fp: &mut Footprints, ai: usize, bi: usize, pc: &PairConflict) -> Option<UnitConflict> {
    match (pc.witness, pc.query) {
        (Some(w), _) => Some(w),
        (None, Some((plen, var))) if pc.conflict != 0 => {
            pair_conflict_enumerated(fp, ai, bi, plen, var).witness
        }
        _ => None,
    }
}

/// [`pair_conflict`] by enumerating both accesses' instances, with its witness (the oracle of
/// the symbolic engine, and the witness of an enumerated hazard).
pub fn pair_conflict_enumerated(
    fp: &mut Footprints,
    ai: usize,
    bi: usize,
    plen: usize,
    var: Option<usize>,
) -> PairConflict {
    enumerate_pair(fp, (ai, bi), plen, var, true)
}

/// [`pair_conflict_enumerated`], finding the witness unit only when `witness` is set.
fn enumerate_pair(
    fp: &mut Footprints,
    (ai, bi): (usize, usize),
    plen: usize,
    var: Option<usize>,
    witness: bool,
) -> PairConflict {
    let warp = fp.warp;
    let ga = fp.grouped(ai, plen);
    let gb = fp.grouped(bi, plen);
    let (la, lb) = (fp.accesses[ai].loops.clone(), fp.accesses[bi].loops.clone());
    let loops = if la.len() >= lb.len() { la } else { lb };
    // Two buffers aliasing without an exact pairing (W1004): any instances of the two
    // accesses may touch one byte of the shared range from different warps.
    let blind = fp.blind_pair(ai, bi);
    let mut out = PairConflict {
        intra_warp: true,
        ..Default::default()
    };
    // The group pair whose units give the witness, and whether it conflicts only within
    // warps: the first conflicting pair, or the first cross-warp one after an intra-warp one.
    let mut wpair: Option<(usize, usize, bool)> = None;
    for (i, (ka, ta)) in ga.iter().enumerate() {
        for (j, (kb, tb)) in gb.iter().enumerate() {
            let mut mask = 1u64;
            let mut ok = true;
            #[expect(clippy::needless_range_loop, reason = "j indexes three parallel lists")]
            for j in 0..plen.min(ka.len().max(kb.len())) {
                let (x, y) = (ka.get(j).copied().flatten(), kb.get(j).copied().flatten());
                if Some(j) == var {
                    mask = bits_for(fp.domains.get(&loops[j]).copied(), x, y);
                    if mask == 0 {
                        ok = false;
                        break;
                    }
                } else if let (Some(x), Some(y)) = (x, y)
                    && x != y
                {
                    ok = false;
                    break;
                }
            }
            if !ok || (mask & !out.conflict == 0 && !out.intra_warp && wpair.is_some()) {
                continue;
            }
            let o = if blind {
                blind_overlap(ta, tb).map(|w| w.intra_warp)
            } else {
                ta.conflict(tb, warp)
            };
            if let Some(intra) = o {
                out.conflict |= mask;
                out.intersect |= mask;
                if !intra {
                    out.intra_warp = false;
                }
                if wpair.is_none() || (!intra && wpair.is_some_and(|w| w.2)) {
                    wpair = Some((i, j, intra));
                }
            } else if mask & !out.intersect != 0 && ta.intersects(tb).is_some() {
                out.intersect |= mask;
            }
        }
    }
    if out.conflict == 0 {
        out.intra_warp = false;
    }
    // The witness unit, as the reference enumeration names it (`analysis::touch`).
    out.witness = wpair.filter(|_| witness).and_then(|(i, j, _)| {
        let (ta, tb) = (&ga[i].1, &gb[j].1);
        if blind {
            blind_overlap(ta, tb)
        } else {
            ta.overlap(tb, warp)
        }
    });
    out
}

/// The conflict assumed between touches of two buffers that alias without an exact pairing:
/// unknown threads on both sides (cross-warp), at a unit of the first, when both touch
/// anything.
fn blind_overlap(ta: &Touch, tb: &Touch) -> Option<UnitConflict> {
    let unit = |t: &Touch| {
        t.exact
            .keys()
            .min()
            .copied()
            .or_else(|| t.unknown.iter().map(|u| u.0).min())
    };
    unit(tb)?;
    Some(UnitConflict {
        unit: unit(ta)?,
        a: Who::Many(None),
        b: Who::Many(None),
        intra_warp: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AtomicOp;

    #[test]
    fn access_kinds() {
        assert!(!kinds_conflict(AccessKind::Read, AccessKind::Read));
        assert!(kinds_conflict(AccessKind::Read, AccessKind::Write));
        assert!(!kinds_conflict(
            AccessKind::Atomic(AtomicOp::Add),
            AccessKind::Atomic(AtomicOp::Add)
        ));
        assert!(kinds_conflict(
            AccessKind::Atomic(AtomicOp::Add),
            AccessKind::Atomic(AtomicOp::Max)
        ));
        assert!(kinds_conflict(
            AccessKind::Atomic(AtomicOp::Add),
            AccessKind::Read
        ));
    }

    #[test]
    fn periodic_distance_bits() {
        let dom = Some(LoopDomain::Periodic { step: 1, period: 3 });
        // Source writes slot (k+2) mod 3 = 2 at k = 0; destination reads slot k mod 3 = 2 at k = 2.
        let m = bits_for(dom, Some(0), Some(2));
        assert_eq!(m & 0b111111, 0b100100);
        assert_ne!(m & (1 << 63), 0);
    }
}
