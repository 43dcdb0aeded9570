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
//! Every allocator first tries the buffer's *hints* (offsets of buffers it may alias at no
//! cost, in order: inner aliases by same-thread, same-element access). The result is checked
//! by [`valid`] before it is returned: an allocator never yields overlapping conflicting
//! buffers, whatever the heuristic did.
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

/// Byte ranges of the placed items that conflict with `i`, sorted.
fn busy_for(
    items: &[Item],
    placed: &[Option<u64>],
    conflict: &dyn Fn(usize, usize) -> bool,
    i: usize,
) -> Vec<(u64, u64)> {
    let mut busy: Vec<(u64, u64)> = placed
        .iter()
        .enumerate()
        .filter_map(|(j, o)| {
            o.filter(|_| j != i && conflict(i, j))
                .map(|o| (o, o + items[j].bytes))
        })
        .collect();
    busy.sort();
    busy
}

/// A hinted offset that fits clear of `busy`, if any.
fn hinted(items: &[Item], placed: &[Option<u64>], i: usize, busy: &[(u64, u64)]) -> Option<u64> {
    items[i].hints.iter().find_map(|&h| {
        let o = placed[h]?;
        let end = o + items[i].bytes;
        (o.is_multiple_of(items[i].align.max(1))
            && busy.iter().all(|&(lo, hi)| end <= lo || hi <= o))
        .then_some(o)
    })
}

/// Assigns offsets with `alloc`; `None` when the result would overlap conflicting buffers
/// (never expected; checked).
pub fn allocate(
    items: &[Item],
    conflict: &dyn Fn(usize, usize) -> bool,
    alloc: Allocator,
) -> Option<Vec<u64>> {
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
        let busy = busy_for(items, &placed, conflict, i);
        let off = match hinted(items, &placed, i, &busy) {
            Some(o) => o,
            None => match alloc {
                Allocator::FirstFit => first_gap(&busy, 0, items[i].bytes, items[i].align),
                Allocator::BestFit => best_gap(&busy, items[i].bytes, items[i].align),
                Allocator::Stack => stack_offset(items, &placed, conflict, &mut stack, i, &busy),
            },
        };
        placed[i] = Some(off);
        stack.push(i);
    }
    let out: Vec<u64> = placed.into_iter().map(|o| o.unwrap_or(0)).collect();
    valid(items, conflict, &out).then_some(out)
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
    conflict: &dyn Fn(usize, usize) -> bool,
    stack: &mut Vec<usize>,
    i: usize,
    busy: &[(u64, u64)],
) -> u64 {
    // The holding order: the buffer whose last use is latest sits lowest.
    stack.sort_by_key(|&j| std::cmp::Reverse(items[j].live.map_or(usize::MAX, |l| l.1)));
    while let Some(&top) = stack.last() {
        if conflict(i, top) {
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

/// No two conflicting items overlap, and every offset is aligned.
pub fn valid(items: &[Item], conflict: &dyn Fn(usize, usize) -> bool, offs: &[u64]) -> bool {
    for i in 0..items.len() {
        if items[i].fixed.is_none() && !offs[i].is_multiple_of(items[i].align.max(1)) {
            return false;
        }
        for j in i + 1..items.len() {
            let disjoint =
                offs[i] + items[i].bytes <= offs[j] || offs[j] + items[j].bytes <= offs[i];
            let both_fixed = items[i].fixed.is_some() && items[j].fixed.is_some();
            if !disjoint && !both_fixed && conflict(i, j) {
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
        let conflict = |i: usize, j: usize| {
            let (a, b) = (items[i].live.unwrap(), items[j].live.unwrap());
            a.0 <= b.1 && b.0 <= a.1
        };
        for a in Allocator::ALL {
            let offs = allocate(&items, &conflict, a).expect("valid");
            assert!(valid(&items, &conflict, &offs), "{a:?}");
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
        let conflict = |i: usize, j: usize| {
            let (a, b) = (items[i].live.unwrap(), items[j].live.unwrap());
            a.0 <= b.1 && b.0 <= a.1
        };
        let offs = allocate(&items, &conflict, Allocator::BestFit).expect("valid");
        assert_eq!(offs[2], offs[0]);
    }
}
