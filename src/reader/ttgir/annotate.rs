//! Annotated TTGIR: the original TTGIR text with the syncs smemsync inserted written as TTGIR
//! lines at their positions (`gpu.barrier`, `ttg.async_wait {num = N : i32}`,
//! `ttng.warp_group_dot_wait {pendings = N : i32}`, `ttng.fence_async_shared`), each marked
//! `// smemsync`, so a Triton developer sees the difference in their own IR.
//!
//! Positions come from the importer's side tables: an inserted op goes before the TTGIR line
//! of the next original op of its region that has one, else after the previous one's line (or
//! its region's closing line), else after the line opening its region. Invariant: the
//! original lines are printed unchanged and in order. Complexity: O(ops + lines).

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
                let at = match (next, prev, parent) {
                    // Between two ops of one TTGIR op (a scratch store and load): inside it.
                    (Some(n), Some(p), _) if n == p => {
                        let text = ttgir_text(self.k, &self.k.ops[op].kind);
                        self.notes
                            .entry(At::After(n))
                            .or_default()
                            .push(format!("{text} // smemsync: inside the op above, between its scratch store and load"));
                        continue;
                    }
                    (Some(n), _, _) => At::Before(n),
                    (None, Some(p), _) => At::After(self.end_of(p)),
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
