//! Touches: the address units one access instance (or a group of instances) touches, and who
//! touches each, as a list sorted by unit key.
//!
//! A touch answers three questions of the enumerator (`analysis::conflicts`): whether two
//! touches share a unit touched by different threads, and whether all such pairs of threads
//! lie in one warp ([`Touch::conflict`]); whether they share any unit at all
//! ([`Touch::intersects`]); and, for messages, *which* unit: the witness.
//!
//! Invariants: `exact` is sorted by key with distinct keys; a key's [`Who`] is the join
//! ([`Who::merge`]) of every add of that key, in the order they were made. `span` encloses
//! every key and every unknown range. The order in which keys were first added
//! (`Replay`) matters for the witness only.
//!
//! Witnesses: smemsync's enumerator first kept each touch in a hash map (`FxHashMap`) and named
//! the first conflicting unit in the map's iteration order, which follows from the order the
//! keys were first inserted; `--explain` and E0301 print that unit, and they print the same
//! one now. A touch remembers that order: nothing when keys came ascending (most per-thread
//! accesses and strided collective ones), the key sequence otherwise, and its member instances
//! for a group of instances. `Touch::hashed` rebuilds the very map from it, and
//! `HashedTouch` picks the witness with the reference algorithm; only a pair question that
//! conflicts pays for it, once.
//!
//! Complexity: building O(n) for ascending keys, O(n log n) otherwise; [`Touch::conflict`] and
//! [`Touch::intersects`] O(n + m) (exact units by merging, unknown ranges by binary search);
//! merging a group O(n + m); rebuilding the hash map O(n) expected.

use std::rc::Rc;

use rustc_hash::FxHashMap as HashMap;

use super::footprint::{Instances, UnitConflict, Who};

/// The exact units of a touch, sorted by key, with who touches each.
#[derive(Clone, Debug, Default)]
pub struct Units(Vec<(u64, Who)>);

impl Units {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The unit keys, ascending.
    pub fn keys(&self) -> impl Iterator<Item = &u64> + '_ {
        self.0.iter().map(|(k, _)| k)
    }

    /// The units and who touches each, ascending by key.
    pub fn as_slice(&self) -> &[(u64, Who)] {
        &self.0
    }

    /// Who touches unit `key`, if anyone does.
    pub fn get(&self, key: &u64) -> Option<&Who> {
        let i = self.0.binary_search_by_key(key, |e| e.0).ok()?;
        Some(&self.0[i].1)
    }

    pub fn contains_key(&self, key: &u64) -> bool {
        self.get(key).is_some()
    }

    /// The units with keys in `[lo, hi)`.
    fn in_range(&self, lo: u64, hi: u64) -> &[(u64, Who)] {
        let a = self.0.partition_point(|e| e.0 < lo);
        let b = self.0.partition_point(|e| e.0 < hi);
        &self.0[a..b.max(a)]
    }
}

/// How the hash map of the reference enumerator was filled (see the module doc).
#[derive(Clone, Debug, Default)]
enum Replay {
    /// Keys were first added in ascending order: the sorted units are the insertion order.
    #[default]
    Ascending,
    /// Every key added, in order (repeats included).
    Keys(Rc<[u64]>),
    /// The union of these instances, in order: a copy of the first, then each later one's
    /// units in its own map's iteration order.
    Group {
        inst: Instances,
        members: Rc<[u32]>,
        warp: u32,
    },
}

/// The units one access instance (or group of instances) touches, and by whom.
#[derive(Clone, Debug, Default)]
pub struct Touch {
    /// Exact units (key `space << 40 | unit`), sorted.
    pub exact: Units,
    /// Unknown footprints: may touch any unit in `[lo, hi)` (keys as above).
    pub unknown: Vec<(u64, u64, Who)>,
    /// Keys `[lo, hi)` enclosing every unit above (`lo >= hi`: none), so that touches of
    /// disjoint ranges (another slot of a multi-buffer) are told apart without a scan.
    span: (u64, u64),
    replay: Replay,
}

/// Widens `span` to cover `[lo, hi)`.
fn cover(span: &mut (u64, u64), lo: u64, hi: u64) {
    *span = if span.0 >= span.1 {
        (lo, hi)
    } else {
        (span.0.min(lo), span.1.max(hi))
    };
}

/// Adds an unknown range to `unknown`, joining who touches it with an equal range's.
fn add_unknown(unknown: &mut Vec<(u64, u64, Who)>, lo: u64, hi: u64, who: Who, warp: u32) {
    for u in unknown.iter_mut() {
        if u.0 == lo && u.1 == hi {
            u.2 = u.2.merge(who, warp);
            return;
        }
    }
    unknown.push((lo, hi, who));
}

/// Builds a [`Touch`] one add at a time (the enumerator's per-thread and per-element loops).
pub(crate) struct TouchBuilder {
    warp: u32,
    /// Adds so far: distinct ascending keys while `ascending`, every add after that.
    log: Vec<(u64, Who)>,
    ascending: bool,
    unknown: Vec<(u64, u64, Who)>,
    span: (u64, u64),
}

impl TouchBuilder {
    pub(crate) fn new(warp: u32) -> Self {
        TouchBuilder {
            warp,
            log: Vec::new(),
            ascending: true,
            unknown: Vec::new(),
            span: (0, 0),
        }
    }

    /// `who` touches unit `key`.
    pub(crate) fn add(&mut self, key: u64, who: Who) {
        cover(&mut self.span, key, key.saturating_add(1));
        if self.ascending {
            match self.log.last_mut() {
                Some(last) if last.0 == key => {
                    last.1 = last.1.merge(who, self.warp);
                    return;
                }
                Some(last) if last.0 > key => self.ascending = false,
                _ => {}
            }
        }
        self.log.push((key, who));
    }

    /// `who` may touch any unit of `[lo, hi)`.
    pub(crate) fn add_unknown(&mut self, lo: u64, hi: u64, who: Who) {
        cover(&mut self.span, lo, hi);
        add_unknown(&mut self.unknown, lo, hi, who, self.warp);
    }

    pub(crate) fn finish(self) -> Touch {
        let TouchBuilder {
            warp,
            mut log,
            ascending,
            unknown,
            span,
        } = self;
        let replay = if ascending {
            Replay::Ascending
        } else {
            let keys: Rc<[u64]> = log.iter().map(|e| e.0).collect();
            // Stable: the adds of one key stay in order, and are joined in that order.
            log.sort_by_key(|e| e.0);
            let mut units: Vec<(u64, Who)> = Vec::with_capacity(log.len());
            for (k, w) in log {
                match units.last_mut() {
                    Some(last) if last.0 == k => last.1 = last.1.merge(w, warp),
                    _ => units.push((k, w)),
                }
            }
            log = units;
            Replay::Keys(keys)
        };
        Touch {
            exact: Units(log),
            unknown,
            span,
            replay,
        }
    }
}

impl Touch {
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.unknown.is_empty()
    }

    /// Whether the spans of two touches are disjoint: then no unit is touched by both.
    fn apart(&self, other: &Touch) -> bool {
        self.span.0.max(other.span.0) >= self.span.1.min(other.span.1)
    }

    /// The union of the instances `members` of `inst` (in that order), remembered as such
    /// for the witness.
    pub(crate) fn group(inst: &Instances, members: Vec<u32>, warp: u32) -> Touch {
        let mut it = members.iter();
        let mut t = match it.next() {
            Some(&m) => inst[m as usize].1.clone(),
            None => Touch::default(),
        };
        for &m in it {
            t.merge_from(&inst[m as usize].1, warp);
        }
        t.replay = Replay::Group {
            inst: inst.clone(),
            members: members.into(),
            warp,
        };
        t
    }

    /// Joins `other`'s units into this touch's (a key of both: this one's `Who` joined with
    /// `other`'s).
    fn merge_from(&mut self, other: &Touch, warp: u32) {
        let (a, b) = (&self.exact.0, &other.exact.0);
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => {
                    out.push(a[i]);
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    out.push(b[j]);
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    out.push((a[i].0, a[i].1.merge(b[j].1, warp)));
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend_from_slice(&a[i..]);
        out.extend_from_slice(&b[j..]);
        self.exact = Units(out);
        if other.span.0 < other.span.1 {
            cover(&mut self.span, other.span.0, other.span.1);
        }
        for &(lo, hi, w) in &other.unknown {
            add_unknown(&mut self.unknown, lo, hi, w, warp);
        }
    }

    /// Whether some unit is touched by both with (possibly) different threads: `None` when
    /// not, else `Some(intra_warp)`, true when every such pair of threads lies in one warp.
    pub fn conflict(&self, other: &Touch, warp: u32) -> Option<bool> {
        if self.apart(other) {
            return None;
        }
        let mut found = false;
        // True (stop) at a cross-warp conflict: the answer is known.
        let mut cross = |c: Option<bool>| -> bool {
            found |= c.is_some();
            c == Some(false)
        };
        let (a, b) = (&self.exact.0, &other.exact.0);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    if cross(a[i].1.conflict(b[j].1, warp)) {
                        return Some(false);
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        for &(lo, hi, w) in &self.unknown {
            for &(_, v) in other.exact.in_range(lo, hi) {
                if cross(w.conflict(v, warp)) {
                    return Some(false);
                }
            }
            for &(lo2, hi2, v) in &other.unknown {
                if lo.max(lo2) < hi.min(hi2) && cross(w.conflict(v, warp)) {
                    return Some(false);
                }
            }
        }
        for &(lo, hi, v) in &other.unknown {
            for &(_, w) in self.exact.in_range(lo, hi) {
                if cross(w.conflict(v, warp)) {
                    return Some(false);
                }
            }
        }
        found.then_some(true)
    }

    /// The witness of [`Touch::conflict`]: the unit the reference enumeration names (see the
    /// module doc), who touches it on each side, and whether every conflicting pair is
    /// intra-warp. Rebuilds both hash maps: for messages, not for deciding.
    pub fn overlap(&self, other: &Touch, warp: u32) -> Option<UnitConflict> {
        if self.apart(other) {
            return None;
        }
        self.hashed().overlap(&other.hashed(), warp)
    }

    /// Whether some unit is touched by two or more different threads within this instance.
    pub fn has_self_overlap(&self) -> bool {
        self.exact.0.iter().any(|(_, w)| matches!(w, Who::Many(_)))
    }

    /// Whether an unknown range of this instance may hold a unit written by two different
    /// threads: a range touched by two threads or an unknown thread, two ranges of different
    /// threads that overlap, or a range over an exact unit of another thread. Units only in
    /// `exact` are [`Touch::has_self_overlap`]'s.
    pub fn may_self_overlap(&self, warp: u32) -> bool {
        self.unknown.iter().enumerate().any(|(i, &(lo, hi, w))| {
            matches!(w, Who::Many(_))
                || self.exact.in_range(lo, hi).iter().any(|&(_, v)| w.conflict(v, warp).is_some())
                || self.unknown[i + 1..]
                    .iter()
                    .any(|&(l2, h2, v)| lo.max(l2) < hi.min(h2) && w.conflict(v, warp).is_some())
        })
    }

    /// A unit touched by two or more different threads within this one instance: the one the
    /// reference enumeration names.
    pub fn self_overlap(&self) -> Option<(u64, Who)> {
        if !self.has_self_overlap() {
            return None;
        }
        self.hashed().self_overlap()
    }

    /// A unit both touches share, whoever touches it (in-flight copies); `None` if none.
    pub fn intersects(&self, other: &Touch) -> Option<u64> {
        if self.apart(other) {
            return None;
        }
        let (a, b) = (&self.exact.0, &other.exact.0);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => return Some(a[i].0),
            }
        }
        for &(lo, hi, _) in &other.unknown {
            if let Some(&(k, _)) = self.exact.in_range(lo, hi).first() {
                return Some(k);
            }
        }
        for &(lo, hi, _) in &self.unknown {
            if let Some(&(k, _)) = other.exact.in_range(lo, hi).first() {
                return Some(k);
            }
            if other
                .unknown
                .iter()
                .any(|&(l2, h2, _)| lo.max(l2) < hi.min(h2))
            {
                return Some(lo);
            }
        }
        None
    }

    /// This touch as the reference enumerator's hash map held it: the same keys inserted in
    /// the same order, so that it iterates in the same order.
    pub(crate) fn hashed(&self) -> HashedTouch<'_> {
        let mut exact: HashMap<u64, Who> = HashMap::default();
        match &self.replay {
            Replay::Ascending => {
                for &(k, w) in &self.exact.0 {
                    exact.insert(k, w);
                }
            }
            Replay::Keys(keys) => {
                for k in keys.iter() {
                    if let Some(&w) = self.exact.get(k) {
                        exact.entry(*k).or_insert(w);
                    }
                }
            }
            Replay::Group {
                inst,
                members,
                warp,
            } => {
                let mut it = members.iter();
                if let Some(&m) = it.next() {
                    exact = inst[m as usize].1.hashed().exact;
                }
                for &m in it {
                    let h = inst[m as usize].1.hashed();
                    for (&k, &w) in &h.exact {
                        exact
                            .entry(k)
                            .and_modify(|x| *x = x.merge(w, *warp))
                            .or_insert(w);
                    }
                }
            }
        }
        HashedTouch {
            exact,
            unknown: &self.unknown,
            span: self.span,
        }
    }
}

/// A touch in the reference enumerator's hash map, for its witness ([`Touch::hashed`]).
pub(crate) struct HashedTouch<'t> {
    exact: HashMap<u64, Who>,
    unknown: &'t [(u64, u64, Who)],
    span: (u64, u64),
}

impl HashedTouch<'_> {
    fn apart(&self, other: &HashedTouch) -> bool {
        self.span.0.max(other.span.0) >= self.span.1.min(other.span.1)
    }

    /// The first conflicting unit in the map's order, replaced by the first cross-warp one
    /// when it is intra-warp (the reference algorithm).
    fn overlap(&self, other: &HashedTouch, warp: u32) -> Option<UnitConflict> {
        if self.apart(other) {
            return None;
        }
        let mut found: Option<UnitConflict> = None;
        let mut record = |unit, a: Who, b: Who, intra: bool| -> bool {
            match &mut found {
                None => {
                    found = Some(UnitConflict {
                        unit,
                        a,
                        b,
                        intra_warp: intra,
                    })
                }
                Some(f) => {
                    if !intra && f.intra_warp {
                        *f = UnitConflict {
                            unit,
                            a,
                            b,
                            intra_warp: false,
                        };
                    }
                }
            }
            // Stop once a cross-warp conflict is known.
            !intra
        };
        let (small, large, swapped) = if self.exact.len() <= other.exact.len() {
            (self, other, false)
        } else {
            (other, self, true)
        };
        for (&k, &w) in &small.exact {
            if let Some(&v) = large.exact.get(&k) {
                let (a, b) = if swapped { (v, w) } else { (w, v) };
                if let Some(intra) = a.conflict(b, warp)
                    && record(k, a, b, intra)
                {
                    return found;
                }
            }
        }
        for &(lo, hi, w) in self.unknown {
            if unknown_against_exact((lo, hi, w), &other.exact, true, warp, &mut record) {
                return found;
            }
            for &(lo2, hi2, v) in other.unknown {
                if lo.max(lo2) < hi.min(hi2)
                    && let Some(intra) = w.conflict(v, warp)
                    && record(lo.max(lo2), w, v, intra)
                {
                    return found;
                }
            }
        }
        for &u in other.unknown {
            if unknown_against_exact(u, &self.exact, false, warp, &mut record) {
                return found;
            }
        }
        found
    }

    /// The first unit in the map's order touched by several threads.
    fn self_overlap(&self) -> Option<(u64, Who)> {
        self.exact
            .iter()
            .find(|(_, w)| matches!(w, Who::Many(_)))
            .map(|(&k, &w)| (k, w))
    }
}

/// The units of one side's unknown range `(lo, hi, u)` that the other side's `exact` map
/// holds, in the map's order, passed to `record` as (unit, this side's who, other side's
/// who): `u` is this side's when `u_first`. Returns whether `record` asked to stop.
fn unknown_against_exact(
    (lo, hi, u): (u64, u64, Who),
    exact: &HashMap<u64, Who>,
    u_first: bool,
    warp: u32,
    record: &mut impl FnMut(u64, Who, Who, bool) -> bool,
) -> bool {
    for (&k, &e) in exact {
        let (a, b) = if u_first { (u, e) } else { (e, u) };
        if k >= lo && k < hi && let Some(intra) = a.conflict(b, warp) && record(k, a, b, intra) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: a touch kept in a hash map, filled by the same adds.
    fn reference(adds: &[(u64, Who)], warp: u32) -> HashMap<u64, Who> {
        let mut m: HashMap<u64, Who> = HashMap::default();
        for &(k, w) in adds {
            m.entry(k).and_modify(|x| *x = x.merge(w, warp)).or_insert(w);
        }
        m
    }

    fn build(adds: &[(u64, Who)], warp: u32) -> Touch {
        let mut b = TouchBuilder::new(warp);
        for &(k, w) in adds {
            b.add(k, w);
        }
        b.finish()
    }

    /// A deterministic pseudo-random stream (xorshift).
    fn stream(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    #[test]
    fn sorted_units_and_replayed_order_match_the_hash_map() {
        let warp = 32;
        for seed in 0..200u64 {
            let mut r = stream(seed);
            let n = (r() % 300) as usize;
            let ascending = seed % 3 == 0;
            let mut adds: Vec<(u64, Who)> = (0..n)
                .map(|i| {
                    let k = if ascending { i as u64 / 2 } else { r() % 200 };
                    (k, Who::One((r() % 128) as u32))
                })
                .collect();
            if seed % 5 == 0 {
                adds.reverse();
            }
            let m = reference(&adds, warp);
            let t = build(&adds, warp);
            let mut want: Vec<(u64, Who)> = m.iter().map(|(&k, &w)| (k, w)).collect();
            want.sort_by_key(|e| e.0);
            assert_eq!(t.exact.as_slice(), &want[..], "seed {seed}");
            let h = t.hashed();
            let got: Vec<(u64, Who)> = h.exact.iter().map(|(&k, &w)| (k, w)).collect();
            let order: Vec<(u64, Who)> = m.iter().map(|(&k, &w)| (k, w)).collect();
            assert_eq!(got, order, "seed {seed}: iteration order");
        }
    }

    fn random_side(r: &mut impl FnMut() -> u64, warp: u32) -> Touch {
        let n = (r() % 64) as usize;
        let mut b = TouchBuilder::new(warp);
        for _ in 0..n {
            let k = r() % 96;
            b.add(k, Who::One((r() % 96) as u32));
        }
        if r().is_multiple_of(4) {
            let lo = r() % 96;
            b.add_unknown(lo, lo + 1 + r() % 16, Who::Many(None));
        }
        b.finish()
    }

    #[test]
    fn conflict_agrees_with_the_witness_search() {
        let warp = 32;
        for seed in 0..300u64 {
            let mut r = stream(seed + 1000);
            let a = random_side(&mut r, warp);
            let b = random_side(&mut r, warp);
            let fast = a.conflict(&b, warp);
            let slow = a.overlap(&b, warp);
            assert_eq!(fast, slow.map(|w| w.intra_warp), "seed {seed}");
            assert_eq!(a.intersects(&b).is_some(), {
                let (ha, hb) = (a.hashed(), b.hashed());
                ha.exact.keys().any(|k| {
                    hb.exact.contains_key(k) || b.unknown.iter().any(|u| *k >= u.0 && *k < u.1)
                }) || a.unknown.iter().any(|u| {
                    hb.exact.keys().any(|k| *k >= u.0 && *k < u.1)
                        || b.unknown.iter().any(|v| u.0.max(v.0) < u.1.min(v.1))
                })
            });
        }
    }
}
