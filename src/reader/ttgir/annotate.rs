//! Annotated TTGIR: the original TTGIR text with the syncs smemsync inserted written as TTGIR
//! lines at their positions (`gpu.barrier`, `ttg.async_wait {num = N : i32}`,
//! `ttng.warp_group_dot_wait {pendings = N : i32}`, `ttng.fence_async_shared`), each marked
//! `// smemsync`, so a Triton developer sees the difference in their own IR.
//!
//! Positions come from the importer's side tables: an inserted op goes before the TTGIR line
//! of the next original op of its region that has one, else after the previous one's last
//! line (the line closing its regions, for a multi-line op), else after the line opening its
//! region. An inserted op between two `.kir` ops of one TTGIR op (the scratch traffic of
//! `ttg.convert_layout`, `tt.reduce`, `tt.scan`, ...) goes before that op when no shared
//! access of the op precedes it (a barrier before the scratch store), else after the op's
//! last line (between its scratch store and load: Triton's lowering of the op has it inside).
//! Invariants: the original lines are printed unchanged and in order; no annotation is
//! written inside a region the `.kir` does not model (a combiner region of `tt.reduce`/
//! `tt.scan`), so the annotated text stays valid MLIR. Complexity: O(ops + lines).

use std::collections::HashMap;

use super::Imported;
use crate::diag::line_number;
use crate::ir::entities::EntityRef;
use crate::ir::{Kernel, Op, OpKind, Region};

/// Where an annotation goes: before or after the TTGIR line starting at an offset.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum At {
    Before(usize),
    After(usize),
}

/// The TTGIR line of an inserted op.
fn ttgir_text(k: &Kernel, kind: &OpKind) -> String {
    match kind {
        OpKind::Barrier => "gpu.barrier".into(),
        OpKind::CpAsyncWait(n) => format!("ttg.async_wait {{num = {n} : i32}}"),
        OpKind::WgmmaWait(n) => format!("ttng.warp_group_dot_wait {{pendings = {n} : i32}}"),
        OpKind::BulkWait(n) => format!("ttng.async_tma_store_wait {{pendings = {n} : i32}}"),
        OpKind::FenceProxyAsync => "ttng.fence_async_shared {bCluster = false}".into(),
        other => format!("// {}", crate::emit::text::print_op_line(k, other)),
    }
}

struct Walk<'a> {
    k: &'a Kernel,
    kir: &'a str,
    imp: &'a Imported,
    input_ops: usize,
    notes: HashMap<At, Vec<String>>,
    /// For each TTGIR line opening a brace that a later line closes, the offset of the last
    /// line that closes one of its braces.
    closes: HashMap<usize, usize>,
}

/// For each TTGIR line (start offset) that opens a brace closed on a later line, the start
/// offset of the last line closing one of its braces (the lexer keeps `<{...}>` attribute
/// dictionaries whole, so only region braces count). Unlexable text gives an empty map.
fn brace_closes(ttgir: &str) -> HashMap<usize, usize> {
    use super::lexer::{T, lex_lines};
    let mut out = HashMap::new();
    let Ok(lines) = lex_lines(ttgir) else {
        return out;
    };
    let mut open: Vec<usize> = Vec::new();
    for l in &lines {
        let at = l.span.lo as usize;
        for t in &l.toks {
            match t.t {
                T::P('{') => open.push(at),
                T::P('}') => {
                    if let Some(o) = open.pop().filter(|o| *o != at) {
                        out.insert(o, at);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

impl Walk<'_> {
    fn origin(&self, op: Op) -> Option<usize> {
        let span = *self.k.op_spans.get(op);
        let line = line_number(self.kir, span)?;
        self.imp.line_origin.get(line - 1).copied().flatten()
    }

    fn end_of(&self, origin: usize) -> usize {
        self.imp.region_end.get(&origin).copied().unwrap_or(origin)
    }

    /// The last line of the TTGIR op starting at `origin`: the line closing its last region
    /// (following `} else {` lines), or `origin` for a one-line op.
    fn last_line(&self, origin: usize) -> usize {
        let mut at = origin;
        while let Some(&c) = self.closes.get(&at) {
            at = c;
        }
        at
    }

    /// Where an inserted op goes whose neighbours both come from the TTGIR op at `n`: after
    /// the op when one of the op's shared accesses precedes it in `before` (it separates the
    /// op's scratch store from its load), else before the op.
    fn inside(&self, n: usize, before: &[Op]) -> Option<At> {
        let stored = before
            .iter()
            .rev()
            .filter(|o| o.index() < self.input_ops)
            .filter_map(|o| Some((*o, self.origin(*o)?)))
            .take_while(|(_, at)| *at == n)
            .any(|(o, _)| !crate::ir::effects::effects(self.k, o).shared.is_empty());
        stored.then(|| At::After(self.last_line(n)))
    }

    fn region(&mut self, r: Region, parent: Option<usize>) {
        let ops = self.k.region_ops(r).to_vec();
        for (i, &op) in ops.iter().enumerate() {
            if op.index() >= self.input_ops {
                let next = ops[i + 1..]
                    .iter()
                    .filter(|o| o.index() < self.input_ops)
                    .find_map(|o| self.origin(*o));
                let prev = ops[..i]
                    .iter()
                    .rev()
                    .filter(|o| o.index() < self.input_ops)
                    .find_map(|o| self.origin(*o));
                let inside = match (next, prev) {
                    (Some(n), Some(p)) if n == p => self.inside(n, &ops[..i]),
                    _ => None,
                };
                if let Some(at) = inside {
                    let text = ttgir_text(self.k, &self.k.ops[op].kind);
                    let note = "smemsync: inside the op above, between its scratch store and load";
                    self.notes.entry(at).or_default().push(format!("{text} // {note}"));
                    continue;
                }
                let at = match (next, prev, parent) {
                    (Some(n), _, _) => At::Before(n),
                    (None, Some(p), _) => At::After(self.last_line(p)),
                    (None, None, Some(p)) => At::After(p),
                    _ => continue,
                };
                let text = ttgir_text(self.k, &self.k.ops[op].kind);
                self.notes.entry(at).or_default().push(text);
                continue;
            }
            let origin = self.origin(op).or(parent);
            for (j, &sub) in self.k.ops[op].regions.clone().iter().enumerate() {
                let anchor = match (j, origin) {
                    (0, o) => o,
                    (_, Some(o)) => Some(self.end_of(o)),
                    _ => None,
                };
                self.region(sub, anchor);
            }
        }
    }
}

/// The TTGIR text `ttgir` with the syncs of the synchronized kernel `k` (printed from
/// `kir`, the imported text whose op spans `k` keeps; ops numbered from `input_ops` were
/// inserted) written at their positions.
pub fn annotate(ttgir: &str, imp: &Imported, kir: &str, k: &Kernel, input_ops: usize) -> String {
    let mut w = Walk {
        k,
        kir,
        imp,
        input_ops,
        notes: HashMap::new(),
        closes: brace_closes(ttgir),
    };
    w.region(k.body(), None);
    let mut out = String::new();
    let mut off = 0usize;
    for line in ttgir.split_inclusive('\n') {
        let indent: String = line.chars().take_while(|c| *c == ' ').collect();
        let first = line.trim_start().trim_end_matches('\n');
        let pad = if first.starts_with('}') {
            format!("{indent}  ")
        } else {
            indent.clone()
        };
        for t in w.notes.get(&At::Before(off)).into_iter().flatten() {
            out.push_str(&format!("{pad}{t} // smemsync\n"));
        }
        out.push_str(line);
        if !line.ends_with('\n') {
            out.push('\n');
        }
        let after_pad = if first.ends_with('{') {
            format!("{indent}  ")
        } else {
            indent
        };
        for t in w.notes.get(&At::After(off)).into_iter().flatten() {
            let mark = if t.contains("// smemsync") { "" } else { " // smemsync" };
            out.push_str(&format!("{after_pad}{t}{mark}\n"));
        }
        off += line.len();
    }
    out
}
