//! Hopper ops of the TTGIR importer: `ttng.warp_group_dot`/`_wait` (→ `wgmma`,
//! `wgmma_commit`, `wgmma_wait`), mbarriers (`init_barrier`, `barrier_expect`, `wait_barrier`,
//! `arrive_barrier`, `inval_barrier` → `mbar_*`), TMA copies (→ `tma_load`, `tma_store` +
//! `bulk_commit`, `bulk_wait`) and tensor descriptors (which global buffer a TMA copy uses).
//!
//! Triton lowers mbarrier initialisation, expect-tx arrivals and TMA issues to one elected
//! thread (thread 0 of the CTA), and `wait_barrier` to every thread; the model writes the
//! elected ones under `if %elect`. Invariant: an mbarrier operand always resolves to an
//! mbarrier array element; anything else is E1102. Complexity: O(1) per op.

use super::convert::{Converter, V, bad, operands};
use super::func::expand_results;
use super::lexer::T;
use super::types::int_attr;
use crate::diag::{Diagnostic, Span};

impl Converter<'_> {
    /// `%d = ttng.warp_group_dot %a, %b, %acc {isAsync}` → `wgmma` + `wgmma_commit` (and
    /// `wgmma_wait 0` when synchronous). A register A operand is written as B (the op reads
    /// only B from shared memory; docs/ttgir.md).
    pub fn wgmma(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let asynchronous = self.text(&st.line).contains("isAsync = true");
        let r = st.result();
        let ops_ = operands(&st.rest);
        let [(a, as_), (b, bs), (c, cs), ..] = ops_.as_slice() else {
            return Err(bad(span, "expected `%a, %b, %acc`"));
        };
        let bm = match self.vals.get(b) {
            Some(V::Mem(m)) => m.clone(),
            _ => return Err(bad(*bs, "the B operand of a warp_group_dot must be in shared memory")),
        };
        let akir = match self.vals.get(a) {
            Some(V::Mem(m)) => m.kir.clone(),
            _ => {
                let _ = as_;
                bm.kir.clone()
            }
        };
        let acc = self.value(c, *cs)?;
        let d = self.fresh(&r);
        self.emit(format!("%{d} = wgmma {akir}, {}, {acc}", bm.kir), Some(span));
        self.emit("wgmma_commit".into(), Some(span));
        if !asynchronous {
            self.emit("wgmma_wait 0".into(), Some(span));
        }
        self.vals.insert(r, V::Kir(d, "f32"));
        Ok(())
    }

    /// `ttng.warp_group_dot_wait %v... {pendings = N}` → `wgmma_wait N`; its results are its
    /// operands.
    pub fn wgmma_wait(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let n = int_attr(self.text(&st.line), "pendings").unwrap_or(0);
        let results = expand_results(&st.results);
        let ops_ = operands(&st.rest);
        for (k, r) in results.iter().enumerate() {
            let v = ops_
                .get(k)
                .and_then(|(o, _)| self.vals.get(o).cloned())
                .unwrap_or(V::Unit);
            self.vals.insert(r.clone(), v);
        }
        self.emit(format!("wgmma_wait {n}"), Some(span));
        Ok(())
    }

    /// The `.kir` mbarrier reference `@bar[%i]` of a TTGIR mbarrier value.
    fn mbar_ref(&mut self, name: &str, span: Span) -> Result<String, Diagnostic> {
        let Some(V::Mbar(b, idx)) = self.vals.get(name).cloned() else {
            return Err(bad(span, format!("`%{name}` is not an mbarrier")));
        };
        let i = match idx {
            Some(ix) => self.value(&ix, span)?,
            None => "0".into(),
        };
        Ok(format!("@{}[{i}]", self.buffers[b].name))
    }

    /// The predicate of an elected-thread op: `%elect`, and-ed with the op's own predicate.
    fn elected(&mut self, pred: Option<&(String, Span)>) -> Result<String, Diagnostic> {
        self.need_elect = true;
        let elect = self.role.as_ref().map_or("%elect".to_string(), |r| r.elect.clone());
        match pred {
            None => Ok(elect),
            Some((p, ps)) => {
                let v = self.value(p, *ps)?;
                let k = self.fresh("issue");
                self.emit(format!("%{k} = and {elect}, {v}"), None);
                Ok(format!("%{k}"))
            }
        }
    }

    /// Emits `if COND { BODY }` at `span`.
    fn guarded(&mut self, cond: &str, body: &[String], span: Span) {
        self.emit(format!("if {cond} {{"), Some(span));
        self.depth += 1;
        for b in body {
            self.emit(b.clone(), Some(span));
        }
        self.depth -= 1;
        self.emit("}".into(), None);
    }

    /// `init_barrier`, `inval_barrier`, `barrier_expect`, `arrive_barrier`, `wait_barrier`.
    pub fn mbarrier(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let op = st.op.clone();
        let ops_ = operands(&st.rest);
        let ints: Vec<i64> = st
            .rest
            .iter()
            .take_while(|t| t.t != T::P(':') && t.t != T::P('{'))
            .filter_map(|t| match t.t {
                T::Int(v) => Some(v),
                _ => None,
            })
            .collect();
        let (m, ms) = ops_
            .first()
            .cloned()
            .ok_or_else(|| bad(span, "expected an mbarrier operand"))?;
        let bar = self.mbar_ref(&m, ms)?;
        match op.as_str() {
            "ttng.init_barrier" => {
                let n = ints.first().copied().unwrap_or(1);
                let c = self.elected(None)?;
                // No barrier here: `sync` orders the init before other threads' use of the
                // mbarrier (docs/placement.md, "Mbarrier objects"; W1113 is retired).
                self.guarded(&c, &[format!("mbar_init {bar}, {n}")], span);
            }
            "ttng.inval_barrier" => {
                let c = self.elected(None)?;
                self.guarded(&c, &[format!("mbar_inval {bar}")], span);
            }
            "ttng.barrier_expect" => {
                let bytes = ints.first().copied().unwrap_or(0);
                let c = self.elected(ops_.get(1))?;
                self.guarded(&c, &[format!("mbar_arrive {bar} tx {bytes}")], span);
            }
            "ttng.arrive_barrier" => {
                let n = ints.first().copied().unwrap_or(1).clamp(1, 1024) as usize;
                // Triton lowers it as a barrier of the arriving threads, then one elected
                // arrival of count `n`: the arrival stands for every thread's accesses before
                // it (the `bar.sync` before each `mbarrier.arrive` in its PTX).
                self.role_barrier(span);
                self.warn(
                    "W1116",
                    "arrive",
                    span,
                    "a barrier of the arriving threads is written before the elected \
                     `mbar_arrive` (Triton's lowering of `ttng.arrive_barrier` has it): one \
                     thread's arrival then orders its whole role's accesses; `sync` counts it \
                     as the kernel's own"
                        .into(),
                );
                let c = self.elected(ops_.get(1))?;
                self.guarded(&c, &vec![format!("mbar_arrive {bar}"); n], span);
            }
            _ => {
                let (p, ps) = ops_
                    .get(1)
                    .cloned()
                    .ok_or_else(|| bad(span, "expected the phase operand"))?;
                let ph = self.value(&p, ps)?;
                let wait = format!("mbar_wait {bar}, {ph}");
                match ops_.get(2) {
                    Some((q, qs)) => {
                        let c = self.value(q, *qs)?;
                        self.guarded(&c, &[wait], span);
                    }
                    None => self.emit(wait, Some(span)),
                }
            }
        }
        Ok(())
    }

    /// TMA coordinates `%desc[%x, %y]`: the operands between the brackets after the first.
    fn coords(&mut self, i: usize) -> Result<(String, Vec<String>), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let toks = st.rest.to_vec();
        let desc = match toks.first().map(|t| &t.t) {
            Some(T::Val(d)) => d.clone(),
            _ => return Err(bad(span, "expected a tensor descriptor")),
        };
        let mut out = Vec::new();
        if toks.get(1).map(|t| &t.t) == Some(&T::P('[')) {
            for t in &toks[2..] {
                match &t.t {
                    T::P(']') => break,
                    T::Val(v) => out.push(self.value(v, t.span)?),
                    _ => {}
                }
            }
        }
        Ok((desc, out))
    }

    /// The global of a descriptor and the origin to use: the coordinates when the global's
    /// dimensions are known parameters, else zeros over a tile-shaped global.
    fn tma_global(&mut self, desc: &str, coords: Vec<String>, tile: &[u64]) -> (String, String) {
        let g = match self.vals.get(desc) {
            Some(V::Desc(Some(g))) => g.clone(),
            _ => String::new(),
        };
        let symbolic = self
            .globals
            .iter()
            .find(|(n, _, _)| *n == g)
            .is_some_and(|(_, _, d)| d.len() == coords.len() && d.iter().any(|x| x.parse::<u64>().is_err()));
        if symbolic && !g.is_empty() {
            return (g, coords.join(", "));
        }
        let g = self.global_for(desc, "f16", tile);
        (g, vec!["0"; tile.len()].join(", "))
    }

    /// `ttng.async_tma_copy_global_to_local %desc[c..] %dst, %bar, %pred` → `tma_load` by the
    /// elected thread.
    pub fn tma_load(&mut self, i: usize) -> Result<(), Diagnostic> {
        let (desc, coords) = self.coords(i)?;
        let st = self.stmt(i)?;
        let span = st.line.span;
        let ops_: Vec<(String, Span)> = operands(&st.rest)
            .into_iter()
            .filter(|(n, _)| *n != desc)
            .skip(coords.len())
            .collect();
        let [(dst, ds), (bar, bs), rest @ ..] = ops_.as_slice() else {
            return Err(bad(span, "expected `%desc[...] %dst, %bar[, %pred]`"));
        };
        let m = match self.vals.get(dst) {
            Some(V::Mem(m)) => m.clone(),
            _ => return Err(bad(*ds, "the destination must be a shared-memory descriptor")),
        };
        let b = self.mbar_ref(bar, *bs)?;
        let (g, origin) = self.tma_global(&desc, coords, &m.shape);
        // No role barrier here: `sync` places it (docs/placement.md, "Mbarrier objects",
        // rule 2; W1126 is retired).
        let c = self.elected(rest.first())?;
        self.guarded(&c, &[format!("tma_load {} <- %{g}[{origin}], {b}", m.kir)], span);
        for r in expand_results(&st.results) {
            self.vals.insert(r, V::Unit);
        }
        Ok(())
    }

    /// `ttng.async_tma_copy_local_to_global %desc[c..] %src` → `tma_store` + `bulk_commit` by
    /// the elected thread.
    pub fn tma_store(&mut self, i: usize) -> Result<(), Diagnostic> {
        let (desc, coords) = self.coords(i)?;
        let st = self.stmt(i)?;
        let span = st.line.span;
        let ops_: Vec<(String, Span)> = operands(&st.rest)
            .into_iter()
            .filter(|(n, _)| *n != desc)
            .skip(coords.len())
            .collect();
        let Some((src, ss)) = ops_.first().cloned() else {
            return Err(bad(span, "expected `%desc[...] %src`"));
        };
        let m = match self.vals.get(&src) {
            Some(V::Mem(m)) => m.clone(),
            _ => return Err(bad(ss, "the source must be a shared-memory descriptor")),
        };
        let (g, origin) = self.tma_global(&desc, coords, &m.shape);
        let c = self.elected(None)?;
        let body = [format!("tma_store %{g}[{origin}] <- {}", m.kir), "bulk_commit".into()];
        self.guarded(&c, &body, span);
        Ok(())
    }

    /// Tensor descriptors: `tensormap_create %scratch, %ptr, [box], [dims innermost first]`,
    /// `reinterpret_tensor_descriptor %scratch`, `make_tensor_descriptor %ptr, [dims], ...`.
    pub fn descriptor(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let op = st.op.clone();
        let results = expand_results(&st.results);
        let groups = bracket_groups(&st.rest);
        let ops_ = operands(&st.rest);
        let global = |c: &Self, n: &str| match c.vals.get(n) {
            Some(V::Ptr(g)) | Some(V::Desc(g)) => g.clone(),
            _ => None,
        };
        let (target, g, dims) = match op.as_str() {
            "ttng.tensormap_create" => {
                let s = ops_.first().map(|x| x.0.clone()).unwrap_or_default();
                let g = ops_.get(1).and_then(|(p, _)| global(self, p));
                let mut d = groups.get(1).cloned().unwrap_or_default();
                d.reverse();
                (Some(s), g, d)
            }
            "ttng.reinterpret_tensor_descriptor" => {
                let g = ops_.first().and_then(|(p, _)| global(self, p));
                (results.first().cloned(), g, Vec::new())
            }
            _ => {
                let g = ops_.first().and_then(|(p, _)| global(self, p));
                (results.first().cloned(), g, groups.first().cloned().unwrap_or_default())
            }
        };
        let params: Option<Vec<String>> = dims
            .iter()
            .map(|d| match self.vals.get(d) {
                Some(V::Kir(k, t)) if *t == "i32" && self.scalars.iter().any(|(n, _)| n == k) => {
                    Some(format!("%{k}"))
                }
                _ => None,
            })
            .collect();
        if let (Some(g), Some(p)) = (&g, params)
            && !p.is_empty()
            && let Some(gl) = self.globals.iter_mut().find(|(n, _, _)| n == g)
        {
            gl.2 = p.iter().map(|d| d.trim_start_matches('%').to_string()).collect();
        }
        if let Some(t) = target {
            self.vals.insert(t, V::Desc(g));
        }
        Ok(())
    }
}

/// The operand names inside each `[...]` group of a statement's operand section.
fn bracket_groups(rest: &[super::lexer::Tok]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<String>> = None;
    for t in rest {
        match &t.t {
            T::P(':') if cur.is_none() => break,
            T::P('[') => cur = Some(Vec::new()),
            T::P(']') => out.extend(cur.take()),
            T::Val(v) => {
                if let Some(c) = cur.as_mut() {
                    c.push(v.clone());
                }
            }
            _ => {}
        }
    }
    out
}
