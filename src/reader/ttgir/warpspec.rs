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
//! Triton lowers it), and collective accesses get opaque layouts (the layout's warps are
//! numbered from the partition's first warp; W1114). Partition block arguments are the
//! op's explicit captures, by position. Results of the op are refused (E1108).
//!
//! Complexity: linear in the region lines.

use super::convert::{Converter, bad, operands};
use super::lexer::T;
use crate::diag::Diagnostic;

/// The role a statement is converted in (inside `ttg.warp_specialize`).
#[derive(Clone, Debug)]
pub(super) struct Role {
    /// The named barrier id a `gpu.barrier` of this role becomes.
    pub bar_id: u64,
    /// The role's threads.
    pub threads: u64,
    /// The role's first thread (its elected thread), and whether collective layouts keep
    /// their element mapping (the default role, from warp 0).
    pub first: u64,
    pub exact: bool,
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
        let text = self.text(&st.line).to_string();
        let starts = start_ids(&text);
        // The regions: `default {` then `partitionN(...) num_warps(W) {` lines.
        let mut j = i + 1;
        let mut parts: Vec<(usize, u64)> = Vec::new();
        let default = j;
        if self.lines.get(j).and_then(|l| l.word(0)) != Some("default") {
            return Err(bad(span, "expected the `default {` region of `ttg.warp_specialize`"));
        }
        j = self.skip_region(j);
        while let Some(l) = self.lines.get(j) {
            match l.word(0) {
                Some(w) if w.starts_with("partition") => {
                    let lt = self.text(l).to_string();
                    let w = num_warps(&lt).ok_or_else(|| {
                        bad(l.span, "expected `num_warps(N)` on a `partitionN` region")
                    })?;
                    parts.push((j, w));
                    j = self.skip_region(j);
                }
                _ => break,
            }
        }
        if parts.is_empty() {
            return Err(bad(span, "`ttg.warp_specialize` without a partition"));
        }
        let lanes = self.lanes;
        let mut next = self.warps;
        let mut groups = vec![("ws_default".to_string(), 0, self.warps)];
        for (n, (_, w)) in parts.iter().enumerate() {
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
        let regions: Vec<usize> = std::iter::once(default).chain(parts.iter().map(|p| p.0)).collect();
        let mut closes = 0;
        for (n, &open) in regions.iter().enumerate() {
            let last = n + 1 == regions.len();
            if !last {
                let c = self.fresh(&format!("in_{}", names[n]));
                self.emit(format!("%{c} = in_group @{}", names[n]), Some(span));
                self.emit(format!("if %{c} {{"), Some(span));
                closes += 1;
            }
            self.push_region();
            let (_, s, w) = groups[n];
            let elect = if s == 0 {
                "%elect".to_string()
            } else {
                let e = self.fresh(&format!("elect_{}", names[n]));
                self.emit(format!("%{e} = cmp eq %tid, {}", s * lanes), None);
                format!("%{e}")
            };
            self.role = Some(super::warpspec::Role {
                bar_id: n as u64 + 1,
                threads: w * lanes,
                first: s * lanes,
                exact: n == 0,
                elect,
            });
            if n > 0 {
                self.bind_captures(open, &captures)?;
            }
            self.pos = open + 1;
            let r = self.region(open);
            self.role = None;
            r?;
            self.pop_region();
            if !last {
                self.emit("} else {".into(), None);
                self.push_region();
            }
        }
        for _ in 0..closes {
            self.pop_region();
            self.emit("}".into(), None);
        }
        self.pos = j;
        Ok(())
    }

    /// Binds a partition's block arguments (`partitionN(%a: T, %b: U)`) to the captures.
    fn bind_captures(&mut self, open: usize, captures: &[String]) -> Result<(), Diagnostic> {
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
        for ((a, _), c) in args.iter().zip(captures) {
            let v = self.vals.get(c).cloned().unwrap_or(super::convert::V::Unit);
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
