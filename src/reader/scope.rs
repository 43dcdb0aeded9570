//! The reader's tables of names: the `%name`s in scope and the `@name`s declared, keyed by
//! the names' text in the source.
//!
//! A [`Scope`] keeps its entries in insertion order (`entries`) and finds them through an
//! open-addressing index of entry numbers (`slots`, linear probing, at most half full). A
//! definition appends an entry and writes one slot; a lookup reads one slot, then the entry.
//! Most lookups are of names defined a few lines before, whose entries (and source text) are
//! still in the cache, and the index is 4 bytes a slot: at 10^6 ops a hash map of
//! `(&str, value)` buckets (24 MiB, one random bucket an access) missed the cache on nearly
//! every definition and use (a tenth of reading such a kernel).
//!
//! Invariants: `slots` has a power-of-two length at least twice `entries.len()`; a slot holds
//! 0 (empty) or 1 + the index of an entry; the slots are exactly those that inserting
//! `entries` in order, each at the first empty slot from its hash, fills. Because [`Scope::undo`]
//! removes only the newest entries, emptying their slots restores that state: no older
//! entry's probe passed through a slot that was empty when it was inserted (Knuth, TAOCP
//! vol. 3, 6.4, linear probing; deletion here is last-in first-out, so it needs neither
//! tombstones nor the backward shift of general deletion).
//!
//! Complexity: expected O(1 + |name|) per insertion and lookup (load at most 1/2); [`Scope::undo`]
//! O(entries removed); growth rehashes every entry (amortised O(1) an insertion).

use std::hash::BuildHasher;

use rustc_hash::FxBuildHasher;

/// Names of the source (`&'a str`) mapped to `V`, with scope marks (see the module doc).
#[derive(Clone, Debug)]
pub(super) struct Scope<'a, V> {
    /// 0 for an empty slot, else 1 + an index into `entries`.
    slots: Vec<u32>,
    entries: Vec<(&'a str, V)>,
}

fn hash(name: &str) -> usize {
    FxBuildHasher.hash_one(name) as usize
}

impl<'a, V: Copy> Scope<'a, V> {
    /// A table with room for `n` names before it grows.
    pub(super) fn with_capacity(n: usize) -> Self {
        Scope {
            slots: vec![0; (2 * n).next_power_of_two().max(8)],
            entries: Vec::with_capacity(n),
        }
    }

    /// The slot of `name`: where it is, or the empty slot where it would go.
    fn slot(&self, name: &str) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = hash(name) & mask;
        loop {
            match self.slots[i] {
                0 => return i,
                e if self.entries[e as usize - 1].0 == name => return i,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The value of `name`, if it is in the table.
    pub(super) fn get(&self, name: &str) -> Option<V> {
        match self.slots[self.slot(name)] {
            0 => None,
            e => Some(self.entries[e as usize - 1].1),
        }
    }

    /// Adds `name` with `value`; if `name` is already in the table, leaves it and returns
    /// the value it has.
    pub(super) fn insert(&mut self, name: &'a str, value: V) -> Result<(), V> {
        let i = self.slot(name);
        if self.slots[i] != 0 {
            return Err(self.entries[self.slots[i] as usize - 1].1);
        }
        self.entries.push((name, value));
        self.slots[i] = u32::try_from(self.entries.len()).expect("fewer than 2^32 names");
        if 2 * self.entries.len() > self.slots.len() {
            self.grow();
        }
        Ok(())
    }

    /// Doubles the index and reinserts every entry in order.
    fn grow(&mut self) {
        self.slots = vec![0; 2 * self.slots.len()];
        let mask = self.slots.len() - 1;
        for (n, &(name, _)) in self.entries.iter().enumerate() {
            let mut i = hash(name) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = n as u32 + 1;
        }
    }

    /// A mark for [`Scope::undo`]: the names added from now on.
    pub(super) fn mark(&self) -> usize {
        self.entries.len()
    }

    /// Removes the names added since `mark`, newest first.
    pub(super) fn undo(&mut self, mark: usize) {
        while self.entries.len() > mark {
            let (name, _) = self.entries[self.entries.len() - 1];
            let i = self.slot(name);
            debug_assert_eq!(self.slots[i] as usize, self.entries.len());
            self.slots[i] = 0;
            self.entries.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Random insertions, lookups and nested scopes against a `HashMap` with an undo log
    /// (the parser's former tables), from a small table so that it grows and collides.
    #[test]
    fn agrees_with_a_hash_map_under_nested_undo() {
        let names: Vec<String> = (0..300).map(|i| format!("v{i}")).collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for round in 0..40 {
            let mut s = Scope::with_capacity(round % 5);
            let mut model: HashMap<&str, usize> = HashMap::new();
            let (mut log, mut marks): (Vec<&str>, Vec<(usize, usize)>) = (vec![], vec![]);
            for step in 0..2000 {
                let name = names[rand(names.len())].as_str();
                match rand(10) {
                    0 if marks.len() < 6 => marks.push((s.mark(), log.len())),
                    1 if !marks.is_empty() => {
                        let (m, l) = marks.pop().expect("non-empty");
                        s.undo(m);
                        for n in log.drain(l..) {
                            model.remove(n);
                        }
                    }
                    2..=5 => {
                        let want = model.get(name).copied();
                        assert_eq!(s.insert(name, step).err(), want, "insert {name}");
                        if want.is_none() {
                            model.insert(name, step);
                            log.push(name);
                        }
                    }
                    _ => assert_eq!(s.get(name), model.get(name).copied(), "get {name}"),
                }
            }
            for n in &names {
                assert_eq!(s.get(n), model.get(n.as_str()).copied());
            }
        }
    }
}
