//! Offset assignment for shared-memory planning: given buffers (size, alignment, live
//! interval, optional fixed offset) and which pairs may not share bytes, give every buffer an
//! offset so that no two such buffers overlap, trying to keep the peak (largest end) small.
//!
//! Three allocators, each a heuristic for an NP-hard problem (dynamic storage allocation):
//! - [`Allocator::FirstFit`]: largest first (ties by first use), each at the lowest aligned
//!   offset clear of the conflicting buffers already placed.
//! - [`Allocator::BestFit`]: in order of first use, each in the smallest gap between
//!   conflicting placed buffers that holds it (the lowest such gap on ties), else above them.
//! - [`Allocator::Stack`]: nvFuser's stack allocator (seed 004): in order of first use, pop
//!   every buffer on top of the stack that may share bytes with the new one, then push the new
//!   one at the top's end. Pops happen in order of last use (the holding order of the stack),
//!   so a buffer dying late under one dying early is reclaimed only after it.
//!
//! Pairs relate by [`Rel`]: free to overlap, exclusive (never overlap), sharing only at
//! one offset (an element-wise hand-off inside a loop, proven for equal offsets only), or
//! *slot by slot*: an item may be a ring of `slots` equal slots (a multi-buffered buffer),
//! and [`Rel::Slots`] says which slot of one may share bytes with which slot of the other
//! (a dead slot lends its bytes). Besides its policy's offset, every allocator tries the
//! *slot fits* of an item — offsets that line one of its slots up with a slot of a placed
//! ring, or a placed item with one of its own slots — and takes the lowest one that every
//! placed item allows, when it is lower.
//! Every allocator first tries the buffer's *hints* (offsets of buffers it may alias at no
//! cost or hand off with, best first). The result is checked by [`valid`] before it is
//! returned: an allocator never yields overlapping exclusive buffers, or same-offset ones at
//! different offsets, whatever the heuristic did.
//!
//! Complexity: O(B² log B) for B buffers (each placement scans the placed conflicting ones).

/// One buffer to place.
#[derive(Clone, Debug)]
pub struct Item {
    pub bytes: u64,
    pub align: u64,
    /// Live interval (op numbers); `None` = never touched.
    pub live: Option<(usize, usize)>,
    /// A fixed offset (`at N` in the input).
    pub fixed: Option<u64>,
    /// Items whose offset this one would like to take (free aliases), best first.
    pub hints: Vec<usize>,
    /// Equal slots the item is cut into for liveness (1: one piece; at most [`MAX_SLOTS`]).
    pub slots: u64,
}

/// Most slots of a ring whose slots relate one by one ([`Rel::Slots`] holds one bit per pair
/// of slots).
pub const MAX_SLOTS: u64 = 8;

/// The bit of [`Rel::Slots`] saying slot `sa` of the first item may share bytes with slot
/// `sb` of the second.
pub fn slot_bit(sa: u64, sb: u64) -> u64 {
    1 << (sa * MAX_SLOTS + sb)
}

/// How two items may share bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Rel {
    /// Any overlap.
    Free,
    /// None.
    Exclusive,
    /// Only when both start at the same offset.
    SameOffset,
    /// Slot `sa` of the first item may overlap slot `sb` of the second exactly when
    /// [`slot_bit`]`(sa, sb)` is set (a plain item is one slot). Never all bits (that is
    /// `Free`) nor none (`Exclusive`).
    Slots(u64),
}

/// The relation of every pair of items (symmetric).
pub type Relation<'a> = &'a dyn Fn(usize, usize) -> Rel;

/// Whether items at `oi` and `oj` may lie as they do.
fn allowed(items: &[Item], rel: Relation, i: usize, j: usize, oi: u64, oj: u64) -> bool {
    let (a, b) = (&items[i], &items[j]);
    may_overlap(rel(i, j), (oi, a.bytes, a.slots), (oj, b.bytes, b.slots))
}

/// Whether two pieces of memory related by `rel` may lie at these offsets, given as
/// `(offset, bytes, slots)`: disjoint, or overlapping only where the relation lets them.
pub fn may_overlap(rel: Rel, (oa, na, sa): (u64, u64, u64), (ob, nb, sb): (u64, u64, u64)) -> bool {
    let disjoint = oa + na <= ob || ob + nb <= oa;
    disjoint
        || match rel {
            Rel::Free => true,
            Rel::Exclusive => false,
            Rel::SameOffset => oa == ob,
            Rel::Slots(bits) => {
                let (wa, wb) = (na / sa.max(1), nb / sb.max(1));
                (0..sa.max(1)).all(|x| {
                    (0..sb.max(1)).all(|y| {
                        let (a0, b0) = (oa + x * wa, ob + y * wb);
                        let apart = a0 + wa <= b0 || b0 + wb <= a0;
                        apart || bits & slot_bit(x, y) != 0
                    })
                })
            }
        }
}

/// The lowest slot fit of `i` (module doc) that every placed item allows, if any.
fn slot_fit(items: &[Item], placed: &[Option<u64>], rel: Relation, i: usize) -> Option<u64> {
    let wi = items[i].bytes / items[i].slots.max(1);
    let mut best: Option<u64> = None;
    for (j, o) in placed.iter().enumerate() {
        let Some(oj) = *o else { continue };
        if j == i || !matches!(rel(i, j), Rel::Slots(_)) {
            continue;
        }
        let wj = items[j].bytes / items[j].slots.max(1);
        for x in 0..items[i].slots.max(1) {
            for y in 0..items[j].slots.max(1) {
                let Some(off) = (oj + y * wj).checked_sub(x * wi) else {
                    continue;
                };
                let fits = off.is_multiple_of(items[i].align.max(1))
                    && best.is_none_or(|b| off < b)
                    && (0..items.len()).all(|m| {
                        m == i || placed[m].is_none_or(|om| allowed(items, rel, i, m, off, om))
                    });
                if fits {
                    best = Some(off);
                }
            }
        }
    }
    best
}

/// Which heuristic assigns offsets.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Allocator {
    FirstFit,
    BestFit,
    Stack,
}

impl Allocator {
    pub const ALL: [Allocator; 3] = [Allocator::FirstFit, Allocator::BestFit, Allocator::Stack];

    pub fn name(self) -> &'static str {
        match self {
            Allocator::FirstFit => "first-fit",
            Allocator::BestFit => "best-fit",
            Allocator::Stack => "stack",
        }
    }
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a.max(1)) * a.max(1)
}

/// The lowest aligned offset at or above `from` where `bytes` fit clear of `busy` (sorted).
fn first_gap(busy: &[(u64, u64)], from: u64, bytes: u64, align: u64) -> u64 {
    let mut off = align_up(from, align);
    for &(lo, hi) in busy {
        if off + bytes <= lo {
            break;
        }
        if hi > off {
            off = align_up(hi, align);
        }
    }
    off
}

/// Byte ranges of the placed items `i` may not overlap (same-offset partners included),
/// sorted.
fn busy_for(items: &[Item], placed: &[Option<u64>], rel: Relation, i: usize) -> Vec<(u64, u64)> {
    let mut busy: Vec<(u64, u64)> = placed
        .iter()
        .enumerate()
        .filter_map(|(j, o)| {
            o.filter(|_| j != i && rel(i, j) != Rel::Free)
                .map(|o| (o, o + items[j].bytes))
        })
        .collect();
    busy.sort();
    busy
}

/// A hinted offset where `i` may lie next to every placed item, if any.
fn hinted(items: &[Item], placed: &[Option<u64>], rel: Relation, i: usize) -> Option<u64> {
    items[i].hints.iter().find_map(|&h| {
        let o = placed[h]?;
        let fits = o.is_multiple_of(items[i].align.max(1))
            && (0..items.len())
                .all(|j| j == i || placed[j].is_none_or(|oj| allowed(items, rel, i, j, o, oj)));
        fits.then_some(o)
    })
}

/// Assigns offsets with `alloc`; `None` when the result would overlap conflicting buffers
/// (never expected; checked).
pub fn allocate(items: &[Item], rel: Relation, alloc: Allocator) -> Option<Vec<u64>> {
    let mut placed: Vec<Option<u64>> = items.iter().map(|it| it.fixed).collect();
    let mut order: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].fixed.is_none())
        .collect();
    let first_use = |i: usize| items[i].live.map_or(usize::MAX, |l| l.0);
    match alloc {
        Allocator::FirstFit => {
            order.sort_by_key(|&i| (std::cmp::Reverse(items[i].bytes), first_use(i), i))
        }
        Allocator::BestFit | Allocator::Stack => order.sort_by_key(|&i| (first_use(i), i)),
    }
    let mut stack: Vec<usize> = Vec::new();
    for i in order {
        let busy = busy_for(items, &placed, rel, i);
        let off = match hinted(items, &placed, rel, i) {
            Some(o) => o,
            None => match alloc {
                Allocator::FirstFit => first_gap(&busy, 0, items[i].bytes, items[i].align),
                Allocator::BestFit => best_gap(&busy, items[i].bytes, items[i].align),
                Allocator::Stack => stack_offset(items, &placed, rel, &mut stack, i, &busy),
            },
        };
        let off = match slot_fit(items, &placed, rel, i) {
            Some(o) if o < off => o,
            _ => off,
        };
        placed[i] = Some(off);
        stack.push(i);
    }
    let out: Vec<u64> = placed.into_iter().map(|o| o.unwrap_or(0)).collect();
    valid(items, rel, &out).then_some(out)
}

/// The smallest gap of `busy` that holds `bytes` (lowest on ties), else above everything.
fn best_gap(busy: &[(u64, u64)], bytes: u64, align: u64) -> u64 {
    let mut best: Option<(u64, u64)> = None; // (gap size, offset)
    let mut cur = 0u64;
    for &(lo, hi) in busy {
        let off = align_up(cur, align);
        if off + bytes <= lo {
            let size = lo - off;
            if best.is_none_or(|(s, _)| size < s) {
                best = Some((size, off));
            }
        }
        cur = cur.max(hi);
    }
    best.map_or_else(|| align_up(cur, align), |(_, o)| o)
}

/// nvFuser's stack discipline: pop the top while it may share bytes with `i`, then place `i`
/// at the top's end (clear of any conflicting buffer below, which the pops cannot remove).
fn stack_offset(
    items: &[Item],
    placed: &[Option<u64>],
    rel: Relation,
    stack: &mut Vec<usize>,
    i: usize,
    busy: &[(u64, u64)],
) -> u64 {
    // The holding order: the buffer whose last use is latest sits lowest.
    stack.sort_by_key(|&j| std::cmp::Reverse(items[j].live.map_or(usize::MAX, |l| l.1)));
    while let Some(&top) = stack.last() {
        if rel(i, top) != Rel::Free {
            break;
        }
        stack.pop();
    }
    let base = stack
        .iter()
        .filter_map(|&j| placed[j].map(|o| o + items[j].bytes))
        .max()
        .unwrap_or(0);
    first_gap(busy, base, items[i].bytes, items[i].align)
}

/// No two items lie as their relation forbids (pairs of fixed items excepted: the input
/// placed them), and every offset is aligned.
pub fn valid(items: &[Item], rel: Relation, offs: &[u64]) -> bool {
    for i in 0..items.len() {
        if items[i].fixed.is_none() && !offs[i].is_multiple_of(items[i].align.max(1)) {
            return false;
        }
        for j in i + 1..items.len() {
            let both_fixed = items[i].fixed.is_some() && items[j].fixed.is_some();
            if !both_fixed && !allowed(items, rel, i, j, offs[i], offs[j]) {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(bytes: u64, live: (usize, usize)) -> Item {
        Item {
            bytes,
            align: 16,
            live: Some(live),
            fixed: None,
            hints: vec![],
            slots: 1,
        }
    }

    fn intervals(items: &[Item], i: usize, j: usize) -> Rel {
        let (a, b) = (items[i].live.unwrap(), items[j].live.unwrap());
        if a.0 <= b.1 && b.0 <= a.1 {
            Rel::Exclusive
        } else {
            Rel::Free
        }
    }

    #[test]
    fn best_fit_takes_the_smallest_gap() {
        // Busy [0,32) and [96,128): gaps [32,96) (64 bytes) and nothing else below 128.
        assert_eq!(best_gap(&[(0, 32), (48, 64), (128, 144)], 16, 16), 32);
        assert_eq!(best_gap(&[(0, 32), (40, 64), (128, 256)], 48, 16), 64);
        assert_eq!(best_gap(&[(0, 32)], 16, 16), 32);
    }

    #[test]
    fn every_allocator_keeps_conflicting_items_apart() {
        let items = vec![
            item(20, (0, 3)),
            item(24, (2, 5)),
            item(24, (4, 8)),
            item(8, (6, 9)),
        ];
        let rel = |i: usize, j: usize| intervals(&items, i, j);
        for a in Allocator::ALL {
            let offs = allocate(&items, &rel, a).expect("valid");
            assert!(valid(&items, &rel, &offs), "{a:?}");
            let peak = (0..4).map(|i| offs[i] + items[i].bytes).max().unwrap();
            // The stack only reclaims its top: here it stacks every buffer (no-reuse bound).
            let bound = if a == Allocator::Stack { 128 } else { 64 };
            assert!(peak <= bound, "{a:?}: peak {peak}");
        }
    }

    #[test]
    fn a_hint_is_taken_when_it_fits() {
        let mut items = vec![item(32, (0, 1)), item(16, (0, 9)), item(32, (2, 3))];
        items[2].hints = vec![0];
        let rel = |i: usize, j: usize| intervals(&items, i, j);
        let offs = allocate(&items, &rel, Allocator::BestFit).expect("valid");
        assert_eq!(offs[2], offs[0]);
    }

    #[test]
    fn same_offset_partners_share_exactly_or_not_at_all() {
        let mut items = vec![item(32, (0, 5)), item(48, (3, 9))];
        let rel = |_: usize, _: usize| Rel::SameOffset;
        assert!(valid(&items, &rel, &[0, 0]));
        assert!(!valid(&items, &rel, &[0, 16]));
        assert!(valid(&items, &rel, &[0, 32]));
        let offs = allocate(&items, &rel, Allocator::FirstFit).expect("valid");
        assert!(offs[0] == offs[1] || offs[0] + 32 <= offs[1] || offs[1] + 48 <= offs[0]);
        items[0].hints = vec![1];
        items[1].hints = vec![0];
        let offs = allocate(&items, &rel, Allocator::BestFit).expect("valid");
        assert_eq!(offs[0], offs[1]);
    }

    #[test]
    fn a_ring_lends_only_its_dead_slots() {
        // A ring of 3 slots of 32 bytes; slot 2 may share bytes with the scratch item.
        let mut items = vec![item(96, (0, 9)), item(32, (4, 5))];
        items[0].slots = 3;
        let rel = |i: usize, _: usize| {
            if i == 0 {
                Rel::Slots(slot_bit(2, 0))
            } else {
                Rel::Slots(slot_bit(0, 2))
            }
        };
        assert!(valid(&items, &rel, &[0, 64]));
        assert!(!valid(&items, &rel, &[0, 32]));
        assert!(!valid(&items, &rel, &[0, 48]), "straddles slots 1 and 2");
        assert!(valid(&items, &rel, &[0, 96]));
        for a in Allocator::ALL {
            let offs = allocate(&items, &rel, a).expect("valid");
            assert_eq!(offs, vec![0, 64], "{a:?}");
        }
        // Placed the other way round: the ring is laid so that its slot 2 covers the item.
        items[1].fixed = Some(128);
        let offs = allocate(&items, &rel, Allocator::FirstFit).expect("valid");
        assert_eq!(offs, vec![0, 128]);
        items[1].fixed = Some(64);
        let offs = allocate(&items, &rel, Allocator::BestFit).expect("valid");
        assert_eq!(offs[0], 0);
    }
}
