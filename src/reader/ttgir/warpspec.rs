//! `ttg.warp_specialize` of the TTGIR importer: the default region and each `partitionN`
//! become *roles*, thread groups of one block that run concurrently, written as the role
//! branch smemsync's handshake placement reads (docs/pipeline.md):
//! `if in_group @ws_default { default } else { partition0 }` (more partitions nest in the
//! else-arm; the last one is the remaining threads).
//!
//! Threads: the default region runs on the module's `ttg.num-warps` warps from warp 0;
//! partition `N` on its `num_warps(W)` warps from the start warp Triton's allocator wrote
//! (`warpGroupStartIds`), or, without that attribute, right after the previous partitions.
//! The block grows to all of them. Inside a partition, the elected thread of TMA and mbarrier
//! ops is the partition's first thread, a `gpu.barrier` is the partition's named barrier (as
//! Triton lowers it), and collective accesses get *role-relative* layouts bound to the role's
//! group (`layout "mma_ws_partition1" in @ws_partition1 = #mma`: Triton numbers a role's warps
//! from 0, so layout thread `t` is block thread `first + t`; docs/ir.md); a view that loses
//! the encoding's mapping stays opaque over the role's threads (W1114). A partition is isolated from above (its
//! SSA values are numbered afresh, `super::scopes`): it sees only its block arguments, the
//! op's explicit captures by position. Buffers allocated inside a role live over the whole
//! op (the roles run concurrently). Results of the op are refused (E1108).
//!
//! Complexity: linear in the region lines.

use std::collections::HashMap;

use super::convert::{Converter, V, bad, operands};
use super::lexer::T;
use crate::diag::Diagnostic;

/// The role a statement is converted in (inside `ttg.warp_specialize`).
#[derive(Clone, Debug)]
pub(super) struct Role {
    /// The named barrier id a `gpu.barrier` of this role becomes.
    pub bar_id: u64,
    /// The role's threads.
    pub threads: u64,
    /// The role's first thread (its elected thread).
    pub first: u64,
    /// The `.kir` name of the role's thread group (role-relative layouts are bound to it).
    pub group: String,
    /// The `.kir` name of the role's elected-thread predicate.
    pub elect: String,
}

impl Converter<'_> {
    /// `ttg.warp_specialize(%captures) [attributes {...}] default { ... } partitionN(...)
    /// num_warps(W) { ... } ... : (types) -> ()` at line `i`.
    pub fn warp_specialize(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        if !st.results.is_empty() {
            return Err(Diagnostic::user(
                "E1108",
                "`ttg.warp_specialize` with results is not imported (the default region's \
                 `ttg.warp_yield` values would leave its role)",
            )
            .with_label(span, "results here"));
        }
        if self.role.is_some() {
            return Err(Diagnostic::user("E1109", "nested `ttg.warp_specialize`")
                .with_label(span, "inside a partition"));
        }
        let captures: Vec<String> = operands(&st.rest).into_iter().map(|(n, _)| n).collect();
        let starts = start_ids(self.text(&st.line));
        let (regions, warps, end) = self.ws_regions(i)?;
        let lanes = self.lanes;
        let mut next = self.warps;
        let mut groups = vec![("ws_default".to_string(), 0, self.warps)];
        for (n, w) in warps.iter().enumerate() {
            let s = starts.get(n).copied().unwrap_or(next);
            groups.push((format!("ws_partition{n}"), s, *w));
            next = next.max(s + w);
        }
        self.extra_warps = self.extra_warps.max(next - self.warps);
        let mut names = Vec::new();
        for (g, s, w) in &groups {
            let name = self.fresh(g);
            self.groups.push((name.clone(), s * lanes, (s + w) * lanes));
            names.push(name);
        }
        self.need_elect = true;
        let (first_buf, from) = (self.buffers.len(), self.stmt_no);
        let mut closes = 0;
        for (n, &open) in regions.iter().enumerate() {
            let last = n + 1 == regions.len();
            if !last {
                let c = self.fresh(&format!("in_{}", names[n]));
                self.emit(format!("%{c} = in_group @{}", names[n]), Some(span));
                self.emit(format!("if %{c} {{"), Some(span));
                closes += 1;
            }
            let (_, s, w) = groups[n];
            let role = Role {
                bar_id: n as u64 + 1,
                threads: w * lanes,
                first: s * lanes,
                group: names[n].clone(),
                elect: names[n].clone(),
            };
            let captured = (n > 0).then_some(captures.as_slice());
            self.ws_role_region(open, role, captured)?;
            if !last {
                self.emit("} else {".into(), None);
                self.push_region();
            }
        }
        for _ in 0..closes {
            self.pop_region();
            self.emit("}".into(), None);
        }
        // The roles run concurrently: a buffer allocated inside one lives over the whole op,
        // so no two roles' buffers share bytes.
        let to = self.stmt_no;
        for b in &mut self.buffers[first_buf..] {
            b.from = b.from.min(from);
            b.to = b.to.max(to);
        }
        self.pos = end;
        Ok(())
    }

    /// The regions of the `ttg.warp_specialize` at line `i`: the opening lines (`default {`
    /// first, then each `partitionN(...) num_warps(W) {`), the partitions' warps, and the
    /// line after the last region.
    fn ws_regions(&self, i: usize) -> Result<(Vec<usize>, Vec<u64>, usize), Diagnostic> {
        let span = self.lines[i].span;
        let default = i + 1;
        if self.lines.get(default).and_then(|l| l.word(0)) != Some("default") {
            return Err(bad(span, "expected the `default {` region of `ttg.warp_specialize`"));
        }
        let mut j = self.skip_region(default);
        let (mut regions, mut warps) = (vec![default], Vec::new());
        while let Some(l) = self.lines.get(j) {
            match l.word(0) {
                Some(w) if w.starts_with("partition") => {
                    let w = num_warps(self.text(l)).ok_or_else(|| {
                        bad(l.span, "expected `num_warps(N)` on a `partitionN` region")
                    })?;
                    regions.push(j);
                    warps.push(w);
                    j = self.skip_region(j);
                }
                _ => break,
            }
        }
        if warps.is_empty() {
            return Err(bad(span, "`ttg.warp_specialize` without a partition"));
        }
        Ok((regions, warps, j))
    }

    /// Converts one role's region (opened at line `open`) in `role` (whose `elect` holds the
    /// group's name until the role's elected-thread predicate is written). A partition
    /// (`captures` given) is isolated from above: it sees only its block arguments, bound to
    /// the captures, and its SSA names (numbered afresh by MLIR) are dropped after it.
    fn ws_role_region(
        &mut self,
        open: usize,
        role: Role,
        captures: Option<&[String]>,
    ) -> Result<(), Diagnostic> {
        let outer = captures.map(|_| {
            let vals = self.vals.clone();
            let cache = std::mem::replace(&mut self.cache, vec![HashMap::new()]);
            // Ranges are keyed by name, and names are the partition's own (`scopes.rs`).
            let ranges = std::mem::take(&mut self.int_ranges);
            (vals, cache, ranges)
        });
        self.push_region();
        let mut role = role;
        role.elect = if role.first == 0 {
            "%elect".to_string()
        } else {
            let e = self.fresh(&format!("elect_{}", role.elect));
            self.emit(format!("%{e} = cmp eq %tid, {}", role.first), None);
            format!("%{e}")
        };
        self.role = Some(role);
        let mut r = Ok(());
        if let Some(c) = captures {
            r = self.bind_captures(open, c, outer.as_ref().map(|o| &o.0));
        }
        if r.is_ok() {
            self.pos = open + 1;
            r = self.region(open);
        }
        self.role = None;
        self.pop_region();
        if let Some((vals, cache, ranges)) = outer {
            self.vals = vals;
            self.cache = cache;
            self.int_ranges = ranges;
        }
        r
    }

    /// Binds a partition's block arguments (`partitionN(%a: T, %b: U)`) to the captures'
    /// values in `outer` (the enclosing scope's table).
    fn bind_captures(
        &mut self,
        open: usize,
        captures: &[String],
        outer: Option<&HashMap<String, V>>,
    ) -> Result<(), Diagnostic> {
        let line = self.lines[open].clone();
        let args: Vec<(String, crate::diag::Span)> = line
            .toks
            .iter()
            .filter_map(|t| match &t.t {
                T::Val(n) => Some((n.clone(), t.span)),
                _ => None,
            })
            .collect();
        if args.len() > captures.len() {
            return Err(bad(
                line.span,
                format!(
                    "the partition has {} arguments but `ttg.warp_specialize` captures {}",
                    args.len(),
                    captures.len()
                ),
            ));
        }
        let outer = outer.unwrap_or(&self.vals).clone();
        self.vals.clear();
        for ((a, _), c) in args.iter().zip(captures) {
            let v = outer.get(c).cloned().unwrap_or(V::Unit);
            self.vals.insert(a.clone(), v);
        }
        Ok(())
    }
}

/// `num_warps(N)` on a partition line.
fn num_warps(text: &str) -> Option<u64> {
    let at = text.find("num_warps(")? + "num_warps(".len();
    text[at..].split(')').next()?.trim().parse().ok()
}

/// `warpGroupStartIds = array<i32: 4, 8>`: each partition's first warp.
fn start_ids(text: &str) -> Vec<u64> {
    let Some(at) = text.find("warpGroupStartIds") else {
        return Vec::new();
    };
    let rest = &text[at..];
    let Some(c) = rest.find(':') else {
        return Vec::new();
    };
    let body = rest[c + 1..].split('>').next().unwrap_or("");
    body.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_attributes() {
        assert_eq!(num_warps("partition0(%a: i32) num_warps(4) {"), Some(4));
        assert_eq!(num_warps("partition0() {"), None);
        assert_eq!(
            start_ids("ttg.warp_specialize() attributes {warpGroupStartIds = array<i32: 4, 8>}"),
            vec![4, 8]
        );
        assert!(start_ids("ttg.warp_specialize()").is_empty());
    }
}
