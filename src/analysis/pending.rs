//! Interned pending entries and the in-flight state of the async-copy dataflow
//! ([`crate::analysis::inflight`]).
//!
//! A pending entry is an async op plus one [`IterTag`] per loop enclosing the program point
//! ([`Pending`]). The dataflow creates few distinct entries (at most `A · (2·TAG_CAP + 1)^D`
//! for `A` async ops at loop depth `D`) but visits them at every op of every pass, so each
//! entry is interned once into a small [`EntryId`] ([`Entries`]): tag vectors are interned on
//! their own, an entry is the pair (op, tag-vector id), and the tag rewrites of the solver
//! (entering a loop, its back edge, leaving it) are memoized per tag vector, so after the
//! first pass a rewrite is one hash lookup of two integers and allocates nothing.
//!
//! The state ([`InFlight`]) keeps, per queue, a vector of (entry id, minimum age) sorted by
//! id: join is a linear merge, issue a binary search. Ids are assigned in creation order,
//! which is not the order of [`Pending`] (op, then tags); everything the solver reports
//! (conflicts, completions) is sorted back into `Pending` order with [`Entries::cmp`] before
//! it leaves, so results do not depend on the interning order.
//!
//! Invariants: an id means the same entry for the lifetime of its [`Entries`] table, which
//! lives in the [`crate::analysis::inflight::FlowMemo`] and is shared by every run of the
//! solver on one kernel and the kernels derived from it by inserting sync ops (their op ids
//! are stable). A state must only be read with the table that made its ids.
//!
//! Complexity: interning and rewrites are O(1) expected (FxHash on integers, after the first
//! sight of a tag vector); join is O(n + m), issue O(log n + n) (insertion), tick O(n).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::inflight::Queue;
use crate::analysis::overlap::IterTag;
use crate::ir::{Op, Value};

/// One possibly outstanding execution of an async op, spelled out.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pending {
    pub op: Op,
    /// One tag per loop enclosing the current program point (outermost first).
    pub tags: Vec<(Op, IterTag)>,
}

/// The interned id of a [`Pending`] entry in an [`Entries`] table.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId(u32);

impl EntryId {
    /// The dense index of the entry (for side tables indexed by entry).
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The id of dense index `i` (side tables indexed by entry, and their tests).
    pub(crate) fn from_index(i: usize) -> Self {
        EntryId(i as u32)
    }
}

/// The id of an interned tag vector.
type TagsId = u32;

/// A tag rewrite of the solver, applied to every entry of a state.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Rewrite {
    /// Entering loop `l`: its previous tag goes; `Last(d)` becomes `PreLast(0, d)`, anything
    /// else `Pre(0)` (appended as the innermost tag).
    Enter(Op),
    /// The back edge of loop `l`: its tag counts one more iteration (saturating to
    /// `Unknown` at the cap).
    Back(Op, u32),
    /// Leaving loop `l`: its tag goes, except `Dist(d ≥ 1)` of a loop whose last pass is
    /// its final iteration (`exact`), which becomes `Last(d - 1)`.
    Exit(Op, bool),
}

/// The interning table of pending entries (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct Entries {
    tags: Vec<Box<[(Op, IterTag)]>>,
    tag_ids: HashMap<Box<[(Op, IterTag)]>, TagsId>,
    entries: Vec<(Op, TagsId)>,
    entry_ids: HashMap<(Op, TagsId), EntryId>,
    rewrites: HashMap<(TagsId, Rewrite), TagsId>,
    /// The dense slot of each rewrite seen ([`Entries::rewrite_ids`]).
    rewrite_slots: HashMap<Rewrite, usize>,
    /// Per rewrite slot, indexed by entry id: the rewritten entry's id plus one (`0`: not
    /// computed yet).
    rewrite_maps: Vec<Vec<u32>>,
    /// Scratch of [`Entries::sort_dedup`]: one bit per entry id (all clear between calls)
    /// and the minimum age seen per id (read only where the bit is set).
    seen: Vec<u64>,
    seen_age: Vec<i32>,
}

impl Entries {
    /// The number of distinct entries interned.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The number of distinct tag vectors interned.
    pub fn tag_vectors(&self) -> usize {
        self.tags.len()
    }

    /// Whether no entry was interned.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn intern_tags(&mut self, t: &[(Op, IterTag)]) -> TagsId {
        if let Some(&id) = self.tag_ids.get(t) {
            return id;
        }
        let id = self.tags.len() as TagsId;
        self.tags.push(t.into());
        self.tag_ids.insert(t.into(), id);
        id
    }

    fn intern_pair(&mut self, op: Op, t: TagsId) -> EntryId {
        if let Some(&e) = self.entry_ids.get(&(op, t)) {
            return e;
        }
        let e = EntryId(u32::try_from(self.entries.len()).unwrap_or(u32::MAX));
        self.entries.push((op, t));
        self.entry_ids.insert((op, t), e);
        e
    }

    /// The id of the entry (`op`, `tags`), interning it on first sight.
    pub fn intern(&mut self, op: Op, tags: &[(Op, IterTag)]) -> EntryId {
        let t = self.intern_tags(tags);
        self.intern_pair(op, t)
    }

    /// The async op of an entry.
    pub fn op(&self, e: EntryId) -> Op {
        self.entries[e.index()].0
    }

    /// The iteration tags of an entry (outermost loop first).
    pub fn tags(&self, e: EntryId) -> &[(Op, IterTag)] {
        &self.tags[self.entries[e.index()].1 as usize]
    }

    /// The entry spelled out.
    pub fn pending(&self, e: EntryId) -> Pending {
        Pending {
            op: self.op(e),
            tags: self.tags(e).to_vec(),
        }
    }

    /// The order of [`Pending`] (op, then tags) on ids.
    pub fn cmp(&self, a: EntryId, b: EntryId) -> Ordering {
        if a == b {
            return Ordering::Equal;
        }
        let (oa, ta) = self.entries[a.index()];
        let (ob, tb) = self.entries[b.index()];
        oa.cmp(&ob)
            .then_with(|| self.tags[ta as usize].cmp(&self.tags[tb as usize]))
    }

    /// The entry `e` with its tags rewritten by `rw` (memoized per tag vector).
    pub fn rewrite(&mut self, e: EntryId, rw: Rewrite) -> EntryId {
        let (op, t) = self.entries[e.index()];
        let nt = match self.rewrites.get(&(t, rw)) {
            Some(&nt) => nt,
            None => {
                let mut v = self.tags[t as usize].to_vec();
                rewrite_tags(&mut v, rw);
                let nt = self.intern_tags(&v);
                self.rewrites.insert((t, rw), nt);
                nt
            }
        };
        if nt == t {
            return e;
        }
        self.intern_pair(op, nt)
    }
}

impl Entries {
    /// Rewrites every id of `ids` by `rw` in place; returns whether some id changed. After the
    /// first sight of an (entry, rewrite) pair this is one array read per id: the rewrite's
    /// table is found once per call (one hash lookup), not once per entry.
    pub fn rewrite_ids<'a>(
        &mut self,
        rw: Rewrite,
        ids: impl Iterator<Item = &'a mut EntryId>,
    ) -> bool {
        let n = self.rewrite_maps.len();
        let slot = *self.rewrite_slots.entry(rw).or_insert(n);
        if slot == n {
            self.rewrite_maps.push(Vec::new());
        }
        let mut map = std::mem::take(&mut self.rewrite_maps[slot]);
        let mut moved = false;
        for id in ids {
            let i = id.index();
            let known = map.get(i).copied().unwrap_or(0);
            let to = if known != 0 {
                EntryId(known - 1)
            } else {
                let to = self.rewrite(*id, rw);
                if map.len() <= i {
                    map.resize(self.entries.len().max(i + 1), 0);
                }
                map[i] = to.0.saturating_add(1);
                to
            };
            moved |= to != *id;
            *id = to;
        }
        self.rewrite_maps[slot] = map;
        moved
    }

    /// Sorts `v` by id keeping one entry per id with the minimum age, as `normalize` does,
    /// but in `O(n + (max − min id) / 64)` for a long vector: the ids are
    /// marked in a bitset over the table's ids and read back in order (a rewritten state is
    /// a permutation of ids spread over the whole table, where a comparison sort was most of
    /// the rewrite's cost).
    fn sort_dedup(&mut self, v: &mut QueueEntries) {
        if v.windows(2).all(|w| w[0].0 < w[1].0) {
            return;
        }
        if v.len() < 32 {
            normalize(v);
            return;
        }
        let n = self.entries.len();
        let words = n.div_ceil(64);
        if self.seen.len() < words {
            self.seen.resize(words, 0);
        }
        if self.seen_age.len() < n {
            self.seen_age.resize(n, 0);
        }
        let (mut lo, mut hi) = (usize::MAX, 0usize);
        for &(e, a) in v.iter() {
            let i = e.index();
            let (w, b) = (i / 64, 1u64 << (i % 64));
            if self.seen[w] & b != 0 {
                self.seen_age[i] = self.seen_age[i].min(a);
            } else {
                self.seen[w] |= b;
                self.seen_age[i] = a;
            }
            lo = lo.min(w);
            hi = hi.max(w);
        }
        v.clear();
        for (w, word) in self.seen[lo..=hi].iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let i = (lo + w) * 64 + bits.trailing_zeros() as usize;
                v.push((EntryId(i as u32), self.seen_age[i]));
                bits &= bits - 1;
            }
        }
    }
}

/// Applies a rewrite to a tag vector.
fn rewrite_tags(t: &mut Vec<(Op, IterTag)>, rw: Rewrite) {
    match rw {
        Rewrite::Enter(l) => {
            // A `Last(d)` tag left by the previous instance of this loop (nested in another
            // loop) becomes `PreLast(0, d)`: the issue iteration stays known (induction
            // recognition of combined counters, `ko*4 + ki`); other tags say nothing.
            let last = t.iter().find_map(|(lp, g)| match g {
                IterTag::Last(d) if *lp == l => Some(*d),
                _ => None,
            });
            t.retain(|(lp, _)| *lp != l);
            t.push((l, last.map_or(IterTag::Pre(0), |d| IterTag::PreLast(0, d))));
        }
        Rewrite::Back(l, cap) => {
            for (lp, tag) in t.iter_mut() {
                if *lp == l {
                    *tag = match *tag {
                        IterTag::Dist(d) if d + 1 < cap => IterTag::Dist(d + 1),
                        IterTag::Pre(j) if j + 1 < cap => IterTag::Pre(j + 1),
                        IterTag::PreLast(j, d) if j + 1 < cap => IterTag::PreLast(j + 1, d),
                        _ => IterTag::Unknown,
                    };
                }
            }
        }
        Rewrite::Exit(l, exact) => t.retain_mut(|(lp, tag)| {
            if *lp != l {
                return true;
            }
            match *tag {
                IterTag::Dist(d) if exact && d >= 1 => {
                    *tag = IterTag::Last(d - 1);
                    true
                }
                _ => false,
            }
        }),
    }
}

/// The entries of one queue with their minimum ages, sorted by id, ids unique.
pub type QueueEntries = Vec<(EntryId, i32)>;

/// The dataflow state: per queue, each pending entry and its minimum age over all paths
/// that agree with `assume` (see [`crate::analysis::inflight`] for the lattice).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InFlight {
    /// Sorted by queue; a queue may be present with no entry.
    queues: Vec<(Queue, QueueEntries)>,
    /// The values of the tracked branch conditions on these paths
    /// (see [`crate::analysis::inflight::MAX_ASSUMED`]).
    pub assume: BTreeMap<Value, bool>,
}

/// Merges `theirs` into `mine` (union, minimum age); returns whether `mine` changed.
fn merge(mine: &mut QueueEntries, theirs: &[(EntryId, i32)]) -> bool {
    let mut changed = false;
    let mut fresh = 0usize;
    let mut i = 0;
    for &(e, a) in theirs {
        while i < mine.len() && mine[i].0 < e {
            i += 1;
        }
        match mine.get_mut(i) {
            Some(m) if m.0 == e => {
                if a < m.1 {
                    m.1 = a;
                    changed = true;
                }
            }
            _ => fresh += 1,
        }
    }
    if fresh == 0 {
        return changed;
    }
    let mut out = Vec::with_capacity(mine.len() + fresh);
    let (mut i, mut j) = (0, 0);
    while i < mine.len() || j < theirs.len() {
        match (mine.get(i), theirs.get(j)) {
            (Some(&m), Some(&t)) if m.0 == t.0 => {
                out.push((m.0, m.1.min(t.1)));
                i += 1;
                j += 1;
            }
            (Some(&m), Some(&t)) if m.0 < t.0 => {
                out.push(m);
                i += 1;
            }
            (Some(&m), None) => {
                out.push(m);
                i += 1;
            }
            (_, Some(&t)) => {
                out.push(t);
                j += 1;
            }
            (None, None) => break,
        }
    }
    *mine = out;
    true
}

/// Sorts by id and keeps one entry per id with the minimum age (short vectors: see
/// [`Entries::sort_dedup`]).
fn normalize(v: &mut QueueEntries) {
    v.sort_unstable();
    v.dedup_by(|later, earlier| later.0 == earlier.0);
}

impl InFlight {
    fn queue_mut(&mut self, q: Queue) -> &mut QueueEntries {
        let i = match self.queues.binary_search_by(|(x, _)| x.cmp(&q)) {
            Ok(i) => i,
            Err(i) => {
                self.queues.insert(i, (q, Vec::new()));
                i
            }
        };
        &mut self.queues[i].1
    }

    fn queue(&self, q: Queue) -> Option<&QueueEntries> {
        self.queues
            .binary_search_by(|(x, _)| x.cmp(&q))
            .ok()
            .map(|i| &self.queues[i].1)
    }

    /// Joins `o` into `self` (union, minimum age); returns whether `self` changed.
    pub fn join(&mut self, o: &InFlight) -> bool {
        let mut changed = false;
        for (q, theirs) in &o.queues {
            changed |= merge(self.queue_mut(*q), theirs);
        }
        changed
    }

    /// Whether nothing may be outstanding.
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(|(_, m)| m.is_empty())
    }

    /// The queues (in queue order) with their entries (in id order).
    pub fn queues(&self) -> impl Iterator<Item = (Queue, &[(EntryId, i32)])> {
        self.queues.iter().map(|(q, m)| (*q, m.as_slice()))
    }

    /// Every entry with its queue and minimum age (queue order, then id order).
    pub fn iter(&self) -> impl Iterator<Item = (Queue, EntryId, i32)> + '_ {
        self.queues
            .iter()
            .flat_map(|(q, m)| m.iter().map(move |(e, a)| (*q, *e, *a)))
    }

    /// Entries of a queue (id order).
    pub fn entries(&self, q: Queue) -> impl Iterator<Item = (EntryId, i32)> + '_ {
        self.queue(q).into_iter().flatten().copied()
    }

    /// Adds `d` to every age of `q` (no saturation).
    pub fn add_to_ages(&mut self, q: Queue, d: i32) {
        if let Some(m) = self.queues.iter_mut().find(|(x, _)| *x == q) {
            for (_, a) in m.1.iter_mut() {
                *a += d;
            }
        }
    }

    /// One more younger operation or group on `q`: every age grows by one, saturating at
    /// `cap`.
    pub fn tick(&mut self, q: Queue, cap: i32) {
        if let Some(m) = self.queues.iter_mut().find(|(x, _)| *x == q) {
            for (_, a) in m.1.iter_mut() {
                *a = (*a + 1).min(cap);
            }
        }
    }

    /// Adds entry `e` to `q` with age `age` (keeping the minimum if present).
    pub fn insert(&mut self, q: Queue, e: EntryId, age: i32) {
        let m = self.queue_mut(q);
        match m.binary_search_by(|(x, _)| x.cmp(&e)) {
            Ok(i) => m[i].1 = m[i].1.min(age),
            Err(i) => m.insert(i, (e, age)),
        }
    }

    /// Removes entry `e` from `q`.
    pub fn remove(&mut self, q: Queue, e: EntryId) {
        if let Some(m) = self.queues.iter_mut().find(|(x, _)| *x == q)
            && let Ok(i) = m.1.binary_search_by(|(x, _)| x.cmp(&e))
        {
            m.1.remove(i);
        }
    }

    /// Keeps the entries for which `keep(queue, entry, age)` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(Queue, EntryId, i32) -> bool) {
        for (q, m) in self.queues.iter_mut() {
            m.retain(|&(e, a)| keep(*q, e, a));
        }
    }

    /// Rewrites the tags of every entry (entries that become equal keep the minimum age);
    /// returns whether some entry changed.
    pub fn rewrite(&mut self, table: &mut Entries, rw: Rewrite) -> bool {
        let mut any = false;
        for (_, m) in self.queues.iter_mut() {
            let moved = table.rewrite_ids(rw, m.iter_mut().map(|x| &mut x.0));
            if moved {
                table.sort_dedup(m);
            }
            any |= moved;
        }
        any
    }

    /// The join of `parts` (states of one class of paths: the first one's assumptions are
    /// kept) in one sort per queue instead of a merge per part: `O(total + ids / 64)`.
    pub fn join_sorted(table: &mut Entries, parts: &[InFlight]) -> InFlight {
        let mut out = InFlight {
            queues: Vec::new(),
            assume: parts.first().map(|p| p.assume.clone()).unwrap_or_default(),
        };
        for p in parts {
            for (q, m) in &p.queues {
                out.queue_mut(*q).extend_from_slice(m);
            }
        }
        for (_, m) in out.queues.iter_mut() {
            table.sort_dedup(m);
        }
        out
    }

    /// Drops the entries of `q` whose age is at least `n`, returning them (id order).
    pub fn complete_older(&mut self, q: Queue, n: u32) -> QueueEntries {
        let mut done = Vec::new();
        if let Some(m) = self.queues.iter_mut().find(|(x, _)| *x == q) {
            m.1.retain(|&(e, a)| {
                if a >= n as i32 {
                    done.push((e, a));
                    false
                } else {
                    true
                }
            });
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::EntityRef;

    fn op(i: usize) -> Op {
        Op::new(i)
    }

    #[test]
    fn ids_compare_in_pending_order_whatever_the_interning_order() {
        let mut t = Entries::default();
        let specs = [
            (op(5), vec![(op(1), IterTag::Dist(2))]),
            (op(3), vec![(op(1), IterTag::Unknown)]),
            (op(5), vec![(op(1), IterTag::Dist(0))]),
            (op(3), vec![]),
        ];
        let ids: Vec<EntryId> = specs.iter().map(|(o, g)| t.intern(*o, g)).collect();
        for (i, a) in ids.iter().enumerate() {
            for (j, b) in ids.iter().enumerate() {
                let pa = Pending {
                    op: specs[i].0,
                    tags: specs[i].1.clone(),
                };
                let pb = Pending {
                    op: specs[j].0,
                    tags: specs[j].1.clone(),
                };
                assert_eq!(t.cmp(*a, *b), pa.cmp(&pb));
            }
        }
        assert_eq!(t.intern(op(5), &specs[0].1), ids[0]);
    }

    #[test]
    fn join_is_union_with_minimum_age_and_reports_change() {
        let mut t = Entries::default();
        let (a, b, c) = (t.intern(op(1), &[]), t.intern(op(2), &[]), t.intern(op(3), &[]));
        let mut x = InFlight::default();
        x.insert(Queue::CpAsync, a, 2);
        x.insert(Queue::CpAsync, c, 0);
        let mut y = InFlight::default();
        y.insert(Queue::CpAsync, a, 1);
        y.insert(Queue::CpAsync, b, 4);
        assert!(x.join(&y));
        let got: Vec<_> = x.entries(Queue::CpAsync).collect();
        assert_eq!(got, vec![(a, 1), (b, 4), (c, 0)]);
        assert!(!x.join(&y));
    }

    #[test]
    fn bitset_sort_equals_comparison_sort() {
        let mut t = Entries::default();
        let ids: Vec<EntryId> = (0..300)
            .map(|i| t.intern(op(i % 7), &[(op(100), IterTag::Dist(i as u32))]))
            .collect();
        for len in [0usize, 5, 31, 32, 33, 200, 600] {
            // A permutation with repeats and several ages per id.
            let mut v: QueueEntries = (0..len)
                .map(|i| (ids[(i * 37 + 11) % 300], ((i * 13) % 5) as i32 - 1))
                .collect();
            let mut want = v.clone();
            normalize(&mut want);
            t.sort_dedup(&mut v);
            assert_eq!(v, want, "length {len}");
            // The scratch bitset is clear again: a second, different vector sorts right.
            let mut w: QueueEntries = (0..len).rev().map(|i| (ids[i % 300], 7)).collect();
            let mut want = w.clone();
            normalize(&mut want);
            t.sort_dedup(&mut w);
            assert_eq!(w, want, "length {len}, second");
        }
    }

    #[test]
    fn rewrites_merge_entries_that_become_equal() {
        let mut t = Entries::default();
        let l = op(9);
        let a = t.intern(op(1), &[(l, IterTag::Dist(8))]);
        let b = t.intern(op(1), &[(l, IterTag::Unknown)]);
        let mut x = InFlight::default();
        x.insert(Queue::CpAsync, a, 3);
        x.insert(Queue::CpAsync, b, 5);
        x.rewrite(&mut t, Rewrite::Back(l, 9));
        let got: Vec<_> = x.entries(Queue::CpAsync).collect();
        assert_eq!(got, vec![(b, 3)]);
    }
}
