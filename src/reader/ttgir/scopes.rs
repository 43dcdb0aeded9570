//! Value scopes of the TTGIR importer and the mbarrier pre-scan over them.
//!
//! MLIR numbers SSA values afresh inside every region that is isolated from above: each
//! `tt.func`, and each `partitionN(...)` region of `ttg.warp_specialize` (a partition sees
//! only its block arguments, which stand for the op's explicit captures, by position). So
//! `%46` in a partition and `%46` in the enclosing function are different values. A scope is
//! such an isolated region; a name means something only together with its scope. The default
//! region of `ttg.warp_specialize` is not isolated: it shares the function's scope.
//!
//! The pre-scan finds the memdescs used as mbarriers (operands of mbarrier ops and the barrier
//! operand of TMA copies), closed under `ttg.memdesc_index` sources within a scope and under
//! the capture links between a partition argument and the value it stands for, both ways.
//! Complexity: O(lines) for the scopes (plus one pass per isolated region to find its end),
//! O(mbarrier uses x closure rounds) for the scan.

use std::collections::HashSet;

use super::convert::{Converter, operands};
use super::lexer::T;

/// An SSA name in its scope (the index of the isolated region that numbers it).
pub(super) type Scoped = (usize, String);

impl Converter<'_> {
    /// The scope of every line (`self.scope_of`) and the capture links
    /// (partition argument, captured value).
    fn compute_scopes(&mut self) -> Vec<(Scoped, Scoped)> {
        let n = self.lines.len();
        let mut scope_of = vec![0usize; n];
        let mut links = Vec::new();
        let mut stack: Vec<(usize, usize)> = Vec::new(); // (scope, end line)
        let mut next = 1usize;
        let mut captures: Vec<(usize, Vec<String>)> = Vec::new(); // (scope, names), innermost last
        for (i, slot) in scope_of.iter_mut().enumerate() {
            while stack.last().is_some_and(|&(_, end)| i >= end) {
                stack.pop();
            }
            let line = &self.lines[i];
            let isolated = matches!(line.word(0), Some("tt.func"))
                || (line.word(0).is_some_and(|w| w.starts_with("partition"))
                    && line.toks.get(1).is_some_and(|t| t.t == T::P('(')));
            let outer = stack.last().map_or(0, |s| s.0);
            if isolated {
                let scope = next;
                next += 1;
                stack.push((scope, self.skip_region(i)));
                if line.word(0) != Some("tt.func")
                    && let Some((cs, names)) = captures.iter().rev().find(|c| c.0 == outer)
                {
                    let args = line.toks.iter().filter_map(|t| match &t.t {
                        T::Val(a) => Some(a.clone()),
                        _ => None,
                    });
                    for (a, c) in args.zip(names) {
                        links.push(((scope, a), (*cs, c.clone())));
                    }
                }
                *slot = scope;
                continue;
            }
            *slot = outer;
            if let Ok(st) = self.stmt(i)
                && st.op == "ttg.warp_specialize"
            {
                let names = operands(&st.rest).into_iter().map(|o| o.0).collect();
                captures.push((outer, names));
            }
        }
        self.scope_of = scope_of;
        links
    }

    /// The scoped names of memdescs used as mbarriers (see the module doc).
    pub fn scan_mbarriers(&mut self) {
        let links = self.compute_scopes();
        let mut direct: Vec<Scoped> = Vec::new();
        let mut index_src: Vec<(Scoped, Scoped)> = Vec::new();
        for k in 0..self.lines.len() {
            let Ok(st) = self.stmt(k) else { continue };
            let sc = self.scope_of[k];
            let ops_ = operands(&st.rest);
            match st.op.as_str() {
                "ttng.init_barrier" | "ttng.inval_barrier" | "ttng.barrier_expect"
                | "ttng.wait_barrier" | "ttng.arrive_barrier" => {
                    direct.extend(ops_.first().map(|o| (sc, o.0.clone())));
                }
                "ttng.async_tma_copy_global_to_local" => {
                    // `%desc[coords] %dst, %bar, %pred`: the operand after the destination.
                    let n_coords = st
                        .rest
                        .iter()
                        .skip_while(|t| t.t != T::P('['))
                        .take_while(|t| t.t != T::P(']'))
                        .filter(|t| matches!(t.t, T::Val(_)))
                        .count();
                    direct.extend(ops_.get(1 + n_coords + 1).map(|o| (sc, o.0.clone())));
                }
                "ttg.memdesc_index" => {
                    if let (Some(r), Some(s)) = (st.results.first(), ops_.first()) {
                        index_src.push(((sc, r.0.clone()), (sc, s.0.clone())));
                    }
                }
                _ => {}
            }
        }
        let mut set: HashSet<Scoped> = direct.into_iter().collect();
        loop {
            let before = set.len();
            for (r, s) in &index_src {
                if set.contains(r) {
                    set.insert(s.clone());
                }
            }
            for (a, c) in &links {
                if set.contains(a) || set.contains(c) {
                    set.insert(a.clone());
                    set.insert(c.clone());
                }
            }
            if set.len() == before {
                break;
            }
        }
        self.mbar_names = set;
    }

    /// Whether the value `name` defined at line `i` is used as an mbarrier.
    pub fn is_mbarrier(&self, i: usize, name: &str) -> bool {
        let sc = self.scope_of.get(i).copied().unwrap_or(0);
        self.mbar_names.contains(&(sc, name.to_string()))
    }
}
