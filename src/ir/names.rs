//! The emitters' name table: collision-free names for values, views, buffers and helpers.
//!
//! One table per emitted kernel holds every name taken so far. Two ways to make a name:
//! [`NameTable::unique`] keeps a base when it is free and otherwise appends `_1`, `_2`, ...
//! (the CUDA and MLIR emitters); [`NameTable::numbered`] appends the next number of one
//! counter shared by all prefixes (`%v0`, `%view1`, the text printer's names for values a pass
//! created). Invariant: no call returns a name taken before it, so names are unique within the
//! table; both are deterministic in the order of calls. Complexity: amortised O(1) per call
//! (a base's suffix counter only grows), plus the string hashing.

use std::collections::{HashMap, HashSet};

use crate::ir::Kernel;

/// The names taken in one emitted kernel.
#[derive(Clone, Debug, Default)]
pub struct NameTable {
    used: HashSet<String>,
    /// Per base, the next suffix [`NameTable::unique`] tries.
    next_suffix: HashMap<String, usize>,
    /// The counter of [`NameTable::numbered`].
    counter: usize,
}

impl NameTable {
    /// A table holding every source name of `k`'s values, views and globals (so names made
    /// up later never shadow one the user wrote).
    pub fn with_source_names(k: &Kernel) -> Self {
        let mut t = NameTable::default();
        let values = k.values.keys().map(|v| k.value_names.get(v));
        let views = k.views.keys().map(|v| k.view_names.get(v));
        for n in values.chain(views).filter(|n| !n.is_empty()) {
            t.used.insert(n.to_string());
        }
        for g in k.globals.values() {
            t.used.insert(g.name.clone());
        }
        t
    }

    /// `base` if no one has it, else `base_1`, `base_2`, ...: the first free one, now taken.
    pub fn unique(&mut self, base: &str) -> String {
        if self.used.insert(base.to_string()) {
            return base.to_string();
        }
        let i = self.next_suffix.entry(base.to_string()).or_insert(1);
        loop {
            let n = format!("{base}_{i}");
            *i += 1;
            if self.used.insert(n.clone()) {
                return n;
            }
        }
    }

    /// `prefix` followed by the next free number of the table's one counter, now taken.
    pub fn numbered(&mut self, prefix: &str) -> String {
        loop {
            let n = format!("{prefix}{}", self.counter);
            self.counter += 1;
            if self.used.insert(n.clone()) {
                return n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_suffixes_skip_taken_names() {
        let mut t = NameTable::default();
        assert_eq!(t.unique("x"), "x");
        assert_eq!(t.unique("x_2"), "x_2");
        assert_eq!(t.unique("x"), "x_1");
        assert_eq!(t.unique("x"), "x_3");
    }

    #[test]
    fn numbered_shares_one_counter_and_skips_source_names() {
        let k = crate::reader::parse_kernel(
            "kernel @k() block(32) {\n  %v1 = tid.x\n}\n",
        )
        .expect("parses");
        let mut t = NameTable::with_source_names(&k);
        assert_eq!(t.numbered("v"), "v0");
        assert_eq!(t.numbered("view"), "view1");
        assert_eq!(t.numbered("v"), "v2");
        assert_eq!(t.unique("v1"), "v1_1");
    }
}
