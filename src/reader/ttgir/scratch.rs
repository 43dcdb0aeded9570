//! Shared scratch and allocation in the TTGIR importer: cross-warp `tt.reduce`/`tt.scan`
//! (a collective store of the partial values and a load of the combined ones in a scratch
//! buffer), `scf.execute_region`, and the byte offsets of every buffer.
//!
//! Offsets: `allocation.offset` when the module carries it; otherwise a first-fit placement
//! over Triton-style liveness (a buffer lives from its allocation to its last use, extended
//! over every loop entered after the allocation), 16-byte aligned, reported by W1102 since
//! Triton's own placement may differ. Complexity: O(buffers^2) for the placement.

use super::convert::{Converter, V, bad, operands};
use super::func::expand_results;
use super::lexer::T;
use super::types::{self, Shaped, Ty, int_attr};
use crate::diag::{Diagnostic, Span};

impl Converter<'_> {
    /// Generic-form `"tt.reduce"(%x...) <{axis = A}> ({ combine }) : (T...) -> R...`.
    pub fn reduce(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let op = st.op.clone();
        let axis = int_attr(self.text(&st.line), "axis").unwrap_or(0).max(0) as usize;
        let results = expand_results(&st.results);
        let args: Vec<(String, Span)> = operands(&st.rest);
        let end = self.skip_region(i);
        let close = &self.lines[end - 1];
        let tys = signature_types(&close.toks);
        self.pos = end;
        let ins: Vec<Shaped> = tys
            .iter()
            .take(args.len())
            .filter_map(|t| match types::classify(t) {
                Ty::Tensor(s) => Some(s),
                _ => None,
            })
            .collect();
        let Some(first) = ins.first().cloned() else {
            return Err(bad(close.span, "expected the operand tensor types"));
        };
        let enc = first.enc.clone().unwrap_or_default();
        let warps = super::layouts::warps_per_dim(&self.aliases, &enc);
        let along = warps.as_ref().and_then(|w| w.get(axis).copied());
        let crosses = along.is_none_or(|w| w > 1);
        if along.is_none() {
            self.warn(
                "W1112",
                &enc,
                st.op_span,
                format!("the layout `{enc}` is not decoded: `{op}` is assumed to cross warps (scratch traffic)"),
            );
        }
        let vals: Vec<String> = args.iter().map(|(n, s)| self.value(n, *s)).collect::<Result<_, _>>()?;
        let call = format!("compute \"{op}\"({})", vals.join(", "));
        for (k, r) in results.iter().enumerate() {
            let sty = ins.get(k).map_or("f32", |s| types::scalar_of(&s.elem));
            let partial = self.fresh(r);
            self.emit(format!("%{partial} = {call} : {sty}"), Some(span));
            if !crosses {
                self.vals.insert(r.clone(), V::Kir(partial, sty));
                continue;
            }
            let w = along.unwrap_or(self.warps as i64).max(1) as u64;
            let s = ins.get(k).unwrap_or(&first);
            let out = s.count() / s.shape.get(axis).copied().unwrap_or(1).max(1);
            let sh = Shaped {
                shape: vec![w, out.max(1)],
                elem: s.elem.clone(),
                enc: None,
            };
            let b = self.new_buffer("scratch", &sh, span)?;
            let buf = format!("@{}", self.buffers[b].name);
            let (l1, l2) = (self.layout_clause(None, false), self.layout_clause(None, false));
            self.emit(format!("local_store {buf}, %{partial} {l1}"), Some(span));
            let v = self.fresh(r);
            self.emit(format!("%{v} = local_load {buf} {l2}"), Some(span));
            self.vals.insert(r.clone(), V::Kir(v, sty));
        }
        Ok(())
    }

    /// `scf.execute_region`: a `stage` (results: the yielded values, bound directly).
    pub fn execute_region(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        if !st.results.is_empty() {
            return Err(Diagnostic::user(
                "E1104",
                "`scf.execute_region` with results is not imported yet",
            )
            .with_label(span, "not supported"));
        }
        self.emit("stage \"execute_region\" {".into(), Some(span));
        self.push_region();
        let saved = self.yield_kept.replace(Vec::new());
        self.region(i)?;
        self.yield_kept = saved;
        self.pop_region();
        self.emit("}".into(), None);
        Ok(())
    }

    /// Byte offsets of every buffer (see the module doc).
    pub fn place_buffers(&mut self) {
        let loops = self.loops.clone();
        for b in &mut self.buffers {
            for l in std::mem::take(&mut b.pending_loops) {
                if let Some((_, end)) = loops.get(l) {
                    b.to = b.to.max(*end);
                }
            }
        }
        let explicit = self.buffers.iter().all(|b| b.offset.is_some());
        if explicit {
            return;
        }
        if !self.buffers.is_empty() && !self.has_offsets {
            self.warn(
                "W1102",
                "alloc",
                Span::new(0, 0),
                "the module carries no `allocation.offset`: buffers are placed by smemsync's model of Triton's allocator (first fit over liveness); a barrier dropped for this placement is safe for Triton's only if Triton aliases no more bytes".into(),
            );
        }
        let mut placed: Vec<(u64, u64, usize, usize)> = Vec::new();
        for b in &mut self.buffers {
            let align = 16u64;
            let mut off = 0u64;
            loop {
                let clash = placed.iter().find(|(o, n, f, t)| {
                    off < o + n && *o < off + b.bytes && b.from <= *t && *f <= b.to
                });
                match clash {
                    Some((o, n, _, _)) => off = (o + n).div_ceil(align) * align,
                    None => break,
                }
            }
            b.offset = Some(off);
            placed.push((off, b.bytes, b.from, b.to));
        }
    }
}

/// The types of the signature on a region op's closing line, `}) {attrs} : (T...) -> R...`:
/// the words and types after the first `:` outside an attribute dictionary (the Triton
/// partitions' `{async_task_id = array<i32: 1>}` comes before the signature).
fn signature_types(toks: &[crate::reader::mlir_lexer::Tok]) -> Vec<String> {
    let mut depth = 0usize;
    let mut sig = false;
    let mut tys = Vec::new();
    for t in toks {
        match &t.t {
            T::P('{') => depth += 1,
            T::P('}') => depth = depth.saturating_sub(1),
            T::P(':') if depth == 0 => sig = true,
            T::Ty(x) | T::Word(x) if sig => tys.push(x.clone()),
            _ => {}
        }
    }
    tys
}
