//! Typed entity ids and the arenas that own entity data.
//!
//! Every IR object (op, region, value, view, shared buffer, global buffer, thread group) is
//! named by a `u32` newtype. Data lives in a [`PrimaryMap`] owned by the kernel; analyses keep
//! side tables in a [`SecondaryMap`] keyed by the same id. Ids are dense and never reused, so a
//! side table is a plain vector.
//!
//! Invariant: an id is only meaningful for the kernel that allocated it.
//! Complexity: O(1) push, index and lookup.
//! Model: Cranelift's `cranelift/entity` (PrimaryMap/SecondaryMap), written afresh.

use std::fmt;
use std::marker::PhantomData;

/// A dense index type usable as a key in [`PrimaryMap`] and [`SecondaryMap`].
pub trait EntityRef: Copy + Eq + Ord + std::hash::Hash + fmt::Debug {
    fn new(index: usize) -> Self;
    fn index(self) -> usize;
}

macro_rules! entity {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(u32);
        impl EntityRef for $name {
            fn new(index: usize) -> Self {
                $name(u32::try_from(index).expect("entity index overflow"))
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// An operation.
    Op,
    "op"
);
entity!(
    /// An ordered list of ops (the body of a kernel, loop, branch or stage).
    Region,
    "region"
);
entity!(
    /// A per-thread scalar value (SSA: defined once, by an op result, a region argument or a
    /// scalar kernel parameter).
    Value,
    "v"
);
entity!(
    /// A view into shared memory: a buffer indexed on leading dimensions and/or sliced.
    View,
    "view"
);
entity!(
    /// A shared-memory buffer (or mbarrier array) declared by the kernel.
    Buffer,
    "buf"
);
entity!(
    /// A global-memory buffer passed as a kernel parameter.
    Global,
    "global"
);
entity!(
    /// A named group of threads (a contiguous range of linear thread ids).
    Group,
    "group"
);

/// An arena that owns the data of one entity kind and hands out its ids.
#[derive(Clone, PartialEq)]
pub struct PrimaryMap<K: EntityRef, V> {
    items: Vec<V>,
    _k: PhantomData<K>,
}

impl<K: EntityRef, V> Default for PrimaryMap<K, V> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            _k: PhantomData,
        }
    }
}

impl<K: EntityRef, V: fmt::Debug> fmt::Debug for PrimaryMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: EntityRef, V> PrimaryMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn push(&mut self, v: V) -> K {
        self.items.push(v);
        K::new(self.items.len() - 1)
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// Room for `additional` more entities without growing (a reader that knows the size).
    pub fn reserve(&mut self, additional: usize) {
        self.items.reserve(additional);
    }
    pub fn get(&self, k: K) -> Option<&V> {
        self.items.get(k.index())
    }
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = K> + use<K, V> {
        (0..self.items.len()).map(K::new)
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (K, &V)> {
        self.items.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.items.iter()
    }
}

impl<K: EntityRef, V> std::ops::Index<K> for PrimaryMap<K, V> {
    type Output = V;
    fn index(&self, k: K) -> &V {
        &self.items[k.index()]
    }
}

impl<K: EntityRef, V> std::ops::IndexMut<K> for PrimaryMap<K, V> {
    fn index_mut(&mut self, k: K) -> &mut V {
        &mut self.items[k.index()]
    }
}

/// A side table keyed by an entity id, with a default for keys never written.
#[derive(Clone, Debug, PartialEq)]
pub struct SecondaryMap<K: EntityRef, V: Clone> {
    items: Vec<V>,
    default: V,
    _k: PhantomData<K>,
}

impl<K: EntityRef, V: Clone + Default> Default for SecondaryMap<K, V> {
    fn default() -> Self {
        Self::with_default(V::default())
    }
}

impl<K: EntityRef, V: Clone> SecondaryMap<K, V> {
    pub fn with_default(default: V) -> Self {
        Self {
            items: Vec::new(),
            default,
            _k: PhantomData,
        }
    }
    pub fn get(&self, k: K) -> &V {
        self.items.get(k.index()).unwrap_or(&self.default)
    }
    /// Room for keys up to `additional` past those written without growing.
    pub fn reserve(&mut self, additional: usize) {
        self.items.reserve(additional);
    }
    /// Writes the entry of `k`. The key just past the last written (a reader or a pass
    /// creating entities in order) is a push: no default is made and dropped for it.
    #[inline]
    pub fn set(&mut self, k: K, v: V) {
        let i = k.index();
        if let Some(slot) = self.items.get_mut(i) {
            *slot = v;
            return;
        }
        if i > self.items.len() {
            self.items.resize(i, self.default.clone());
        }
        self.items.push(v);
    }
    pub fn get_mut(&mut self, k: K) -> &mut V {
        let i = k.index();
        if i >= self.items.len() {
            self.items.resize(i + 1, self.default.clone());
        }
        &mut self.items[i]
    }
}

/// Source names of entities (values, views), stored end to end in one string: a name is a
/// range of it, an entity never named reads as `""`. One allocation for all the names of a
/// kernel, where a `String` each was an allocation and 24 bytes a name (at 10^6 ops, 750 000
/// values), and a copy of the kernel copies two buffers. Ranges are `u32` pairs (8 bytes an
/// entity, where `usize` pairs were 16): names are read from a source whose spans are `u32`
/// already, so the text stays under 4 GiB.
///
/// Invariant: every range lies in `text` on character boundaries. Renaming appends the new
/// name (the old bytes stay, unused): passes rename a few values, the reader none.
/// Complexity: O(1) lookup; O(length of the name) to set one, amortized. Equality compares
/// the names (an entity never named equals one named `""`), not the storage: O(entities +
/// bytes).
#[derive(Clone, Debug)]
pub struct NameMap<K: EntityRef> {
    text: String,
    ranges: Vec<(u32, u32)>,
    _k: PhantomData<K>,
}

impl<K: EntityRef> Default for NameMap<K> {
    fn default() -> Self {
        Self {
            text: String::new(),
            ranges: Vec::new(),
            _k: PhantomData,
        }
    }
}

impl<K: EntityRef> PartialEq for NameMap<K> {
    fn eq(&self, other: &Self) -> bool {
        let n = self.ranges.len().max(other.ranges.len());
        (0..n).all(|i| self.get(K::new(i)) == other.get(K::new(i)))
    }
}

impl<K: EntityRef> Eq for NameMap<K> {}

impl<K: EntityRef> NameMap<K> {
    /// The name of `k`, `""` if it has none.
    pub fn get(&self, k: K) -> &str {
        self.ranges
            .get(k.index())
            .map_or("", |&(a, b)| &self.text[a as usize..b as usize])
    }

    /// Names `k` (`""` removes its name).
    pub fn set(&mut self, k: K, name: impl AsRef<str>) {
        let name = name.as_ref();
        let i = k.index();
        let range = if name.is_empty() {
            (0, 0)
        } else {
            let a = self.text.len();
            self.text.push_str(name);
            let end = |n: usize| u32::try_from(n).expect("names under 4 GiB");
            (end(a), end(self.text.len()))
        };
        if let Some(slot) = self.ranges.get_mut(i) {
            *slot = range;
            return;
        }
        self.ranges.resize(i, (0, 0));
        self.ranges.push(range);
    }

    /// Room for `entities` more names of about `bytes` bytes in all without growing.
    pub fn reserve(&mut self, entities: usize, bytes: usize) {
        self.ranges.reserve(entities);
        self.text.reserve(bytes);
    }
}

impl<K: EntityRef, V: Clone> std::ops::Index<K> for SecondaryMap<K, V> {
    type Output = V;
    fn index(&self, k: K) -> &V {
        self.get(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name map reads as a side table of `String`s with `""` for entities never named:
    /// checked against one on a sequence of sets, renames, removals and sparse keys.
    #[test]
    fn name_map_reads_as_a_table_of_strings() {
        let mut names: NameMap<Value> = NameMap::default();
        let mut model: SecondaryMap<Value, String> = SecondaryMap::default();
        let steps: [(usize, &str); 9] = [
            (0, "x"),
            (1, "y12"),
            (5, "sparse"),
            (1, "renamed"),
            (3, ""),
            (0, ""),
            (2, "naïve"),
            (7, "z"),
            (0, "again"),
        ];
        for (i, n) in steps {
            names.set(Value::new(i), n);
            model.set(Value::new(i), n.to_string());
            for j in 0..10 {
                let v = Value::new(j);
                assert_eq!(names.get(v), model.get(v).as_str(), "after ({i}, {n:?}) at {j}");
            }
        }
    }

    /// Equality reads the names: the same names set in another order (another storage
    /// layout), or with renames and trailing unnamed entities, compare equal; one name apart
    /// compares unequal.
    #[test]
    fn name_maps_compare_by_names_not_storage() {
        let build = |steps: &[(usize, &str)]| {
            let mut m: NameMap<Value> = NameMap::default();
            for &(i, n) in steps {
                m.set(Value::new(i), n);
            }
            m
        };
        let a = build(&[(0, "x"), (1, "y"), (2, "z")]);
        let b = build(&[(2, "z"), (0, "x"), (1, "y")]);
        let c = build(&[(0, "old"), (1, "y"), (2, "z"), (0, "x"), (5, "")]);
        assert_ne!(a.text, b.text);
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(c, a);
        assert_ne!(a, build(&[(0, "x"), (1, "y"), (2, "w")]));
        assert_ne!(a, build(&[(0, "x"), (1, "y")]));
        assert_ne!(build(&[(0, "x"), (1, "y")]), a);
    }
}
