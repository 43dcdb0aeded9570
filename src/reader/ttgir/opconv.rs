//! The per-op translation of the TTGIR importer (table in docs/ttgir.md): shared buffers and
//! views, collective loads and stores, async copies and their groups, wgmma, fences, TMA and
//! mbarriers, scratch-using ops, unknown ops (conservative model + W1110).
//!
//! Invariant: every op of the input either writes the `.kir` ops of its model, becomes a lazy
//! value (no shared effect by the rules of [`super::ops`]), or is reported. Complexity: O(1)
//! amortized per op plus its written text.

use super::convert::{Buf, Converter, Lazy, Mem, V, bad, first_type, operands, result_types};
use super::func::expand_results;
use super::layouts;
use super::lexer::T;
use super::ops::{self, Class};
use super::slots::Step;
use super::types::{self, Shaped, Ty, int_attr, split_top};
use crate::diag::{Diagnostic, Span};

/// The encoding of a shaped type's text (`tensor<4x8xf16, #blocked>` → `#blocked`).
fn enc_of(ty: &str) -> Option<String> {
    let inner = ty.split_once('<')?.1.strip_suffix('>')?;
    split_top(inner).get(1).map(|s| s.to_string())
}

impl Converter<'_> {
    /// Translates the statement at line `i` and advances `self.pos` past it (and its region).
    pub fn statement(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let op = st.op.clone();
        let span = st.line.span;
        let opens = st.line.ends_with_open();
        let names: Vec<String> = operands(&st.rest).into_iter().map(|(n, _)| n).collect();
        for n in &names {
            self.touch(n);
        }
        self.pos = i + 1;
        match op.as_str() {
            "scf.for" => return self.scf_for(i),
            "scf.if" => return self.scf_if(i),
            "scf.yield" => return self.scf_yield(i),
            "scf.execute_region" => return self.execute_region(i),
            "tt.return" => return Ok(()),
            "tt.reduce" | "tt.scan" => return self.reduce(i),
            "ttg.warp_specialize" => return self.warp_specialize(i),
            "ttg.warp_yield" | "ttg.warp_return" => return Ok(()),
            "scf.while" => return self.scf_while(i),
            "scf.condition" => return self.scf_condition(i),
            _ => {}
        }
        if opens {
            return Err(Diagnostic::user(
                "E1105",
                format!("`{op}` has a region smemsync does not know how to run"),
            )
            .with_label(span, "op with a region"));
        }
        if self.shared_op(i)? {
            return Ok(());
        }
        match ops::class(&op) {
            Class::Unknown => self.unknown(i),
            _ => self.pure(i),
        }
    }

    /// Extends the live range of the buffer a value refers to (Triton's liveness: every use,
    /// and the whole of a loop entered after the allocation).
    fn touch(&mut self, name: &str) {
        let b = match self.vals.get(name) {
            Some(V::Mem(m)) => m.buf,
            Some(V::Mbar(b, _)) => *b,
            _ => return,
        };
        let now = self.stmt_no;
        let stack = self.loop_stack.clone();
        if let Some(buf) = self.buffers.get_mut(b) {
            buf.to = buf.to.max(now);
            buf.loops.retain(|_| true);
            let outer = stack.iter().find(|l| !buf.loops.contains(l));
            if let Some(l) = outer {
                buf.pending_loops.push(*l);
            }
        }
    }

    /// A pure op: its results become lazy values (pointers keep their base parameter).
    fn pure(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let results = expand_results(&st.results);
        let ops_ = operands(&st.rest);
        let tys = result_types(&st.rest);
        let pred = match st.rest.first().map(|t| &t.t) {
            Some(T::Word(w)) => Some(w.clone()),
            _ => None,
        };
        // `arith.constant true` / `false` carry no type: they are `i1`.
        let boolean = st.op == "arith.constant"
            && matches!(after_attr_dict(&st.rest).first().map(|t| &t.t), Some(T::Word(w)) if w == "true" || w == "false");
        let tys = if boolean && tys.is_empty() { vec!["i1".to_string()] } else { tys };
        let literal = self.literal(&st.op, &st.rest, &tys);
        let op = st.op.clone();
        let arg_bits = first_type(&st.rest).map_or(0, |t| types::int_bits(&t));
        let int = match after_attr_dict(&st.rest).first().map(|t| &t.t) {
            Some(T::Int(v)) if op == "arith.constant" => Some(*v),
            _ => None,
        };
        for (k, r) in results.iter().enumerate() {
            let tyt = tys.get(k).or(tys.last()).cloned().unwrap_or_default();
            let mut ty = types::classify(&tyt);
            if op == "arith.cmpi" {
                ty = Ty::Bool;
            }
            if op == "tt.get_program_id" || op == "tt.get_num_programs" {
                ty = Ty::Int;
            }
            if op == "tt.load" {
                // `tt.load %ptrs... : tensor<..x!tt.ptr<E>>`: the result holds E.
                let e = tyt.split("!tt.ptr<").nth(1).and_then(|x| x.split('>').next());
                ty = match e {
                    Some(e) if tyt.starts_with("tensor") => Ty::Tensor(Shaped {
                        shape: Vec::new(),
                        elem: e.to_string(),
                        enc: None,
                    }),
                    Some("i1") => Ty::Bool,
                    Some(e) if e.starts_with('i') => Ty::Int,
                    _ => Ty::Float,
                };
            }
            let v = match (&ty, Self::lazy_ty(&ty)) {
                (Ty::Ptr, _) => {
                    let base = ops_.iter().find_map(|(n, _)| match self.vals.get(n) {
                        Some(V::Ptr(b)) => Some(b.clone()),
                        _ => None,
                    });
                    self.vals.insert(r.clone(), V::Ptr(base.flatten()));
                    continue;
                }
                (_, Some(sty)) => sty,
                _ => {
                    self.vals.insert(r.clone(), V::Unit);
                    continue;
                }
            };
            let l = Lazy {
                op: op.clone(),
                args: ops_.iter().map(|(n, _)| n.clone()).collect(),
                ty: if op == "arith.cmpi" { "i1" } else { v },
                pred: pred.clone(),
                literal: literal.clone(),
                bits: types::int_bits(&tyt),
                arg_bits,
                int: int.map(|v| types::wrap_int(v, types::int_bits(&tyt))),
                span,
            };
            self.lazy(r, l);
        }
        Ok(())
    }

    /// The `.kir` literal of a constant or program id.
    fn literal(&self, op: &str, rest: &[super::lexer::Tok], tys: &[String]) -> Option<String> {
        let dim = match rest.first().map(|t| &t.t) {
            Some(T::Word(w)) if ["x", "y", "z"].contains(&w.as_str()) => w.clone(),
            _ => "x".into(),
        };
        match op {
            "tt.get_program_id" => return Some(format!("bid.{dim}")),
            "tt.get_num_programs" => return Some(format!("gdim.{dim}")),
            "arith.constant" => {}
            _ => return None,
        }
        let ty = types::classify(tys.first().map_or("", String::as_str));
        let st = Self::lazy_ty(&ty)?;
        let bits = types::int_bits(tys.first().map_or("", String::as_str));
        if let (Some(T::Int(v)), "i32") = (after_attr_dict(rest).first().map(|t| &t.t), st) {
            // Integer constants wrap to their type (`255 : i8` is -1); an `i64` one outside
            // `i32` stays opaque (W1103 where it is written; casts of it fold exactly).
            let w = types::wrap_int(*v, bits);
            return Some(match i32::try_from(w) {
                Ok(w) => format!("const {w} : i32"),
                Err(_) => "compute \"arith.constant\"() : i32".to_string(),
            });
        }
        let raw = match &after_attr_dict(rest).first()?.t {
            T::Int(v) => Some(*v as f64),
            T::Float(f) => Some(*f),
            T::Word(w) if w == "true" => Some(1.0),
            T::Word(w) if w == "false" => Some(0.0),
            T::Ty(d) if d.starts_with("dense<") => {
                d[6..d.len() - 1].trim().parse::<f64>().ok().filter(|v| v.is_finite())
            }
            _ => None,
        };
        Some(match (st, raw) {
            ("i1", Some(v)) => format!("const {}", v != 0.0),
            ("i32", Some(v)) => format!("const {} : i32", v as i64),
            ("f32", Some(v)) => format!("const {v:?} : f32"),
            _ => format!("compute \"arith.constant\"() : {st}"),
        })
    }

    /// The barrier of the threads running the current statement: the block's, or inside a
    /// `ttg.warp_specialize` role its named barrier over the role's warps (Triton:
    /// `bar.sync id, n`).
    pub fn role_barrier(&mut self, span: Span) {
        match &self.role {
            Some(r) => {
                let t = format!("named_sync {}, {}", r.bar_id, r.threads);
                self.emit(t, Some(span))
            }
            None => self.emit("barrier".into(), Some(span)),
        }
    }

    /// Ops with a shared-memory or sync model. `Ok(false)`: not one of them.
    fn shared_op(&mut self, i: usize) -> Result<bool, Diagnostic> {
        let st = self.stmt(i)?;
        let op = st.op.clone();
        match op.as_str() {
            "ttg.local_alloc" => self.local_alloc(i)?,
            "ttg.local_dealloc" => {}
            "ttg.memdesc_index" => self.memdesc_index(i)?,
            "ttg.memdesc_subslice" => self.memdesc_subslice(i)?,
            "ttg.memdesc_trans" | "ttg.memdesc_reinterpret" => self.memdesc_alias(i)?,
            "ttg.local_load" => self.local_load(i)?,
            "ttg.local_store" => self.local_store(i)?,
            "ttg.async_copy_global_to_local" | "amdg.buffer_load_to_local" => {
                self.async_copy(i)?
            }
            "ttg.async_commit_group" => {
                if self.nvidia {
                    self.emit("cp_async_commit".into(), Some(st.line.span));
                }
                self.unit_results(i)?;
            }
            "ttg.async_wait" => self.async_wait(i)?,
            "ttg.convert_layout" => self.convert_layout(i)?,
            "ttng.warp_group_dot" => self.wgmma(i)?,
            "ttng.warp_group_dot_wait" => self.wgmma_wait(i)?,
            "ttng.fence_async_shared" => self.emit("fence_proxy_async".into(), Some(st.line.span)),
            "gpu.barrier" => self.role_barrier(st.line.span),
            "ttng.init_barrier" | "ttng.inval_barrier" | "ttng.barrier_expect"
            | "ttng.wait_barrier" | "ttng.arrive_barrier" => self.mbarrier(i)?,
            "ttng.async_tma_copy_global_to_local" => self.tma_load(i)?,
            "ttng.async_tma_copy_local_to_global" => self.tma_store(i)?,
            "ttng.async_tma_store_wait" => {
                let n = int_attr(self.text(&st.line), "pendings").unwrap_or(0);
                self.emit(format!("bulk_wait {n}"), Some(st.line.span));
            }
            "ttng.tensormap_create" | "ttng.reinterpret_tensor_descriptor"
            | "tt.make_tensor_descriptor" => self.descriptor(i)?,
            "tt.histogram" | "tt.atomic_rmw" | "tt.atomic_cas" => self.scratch_op(i)?,
            "tt.call" => {
                let span = st.op_span;
                self.warn(
                    "W1111",
                    "call",
                    span,
                    "`tt.call` is not inlined: the call is modelled as reading and writing every shared buffer passed to it, with unknown ownership".into(),
                );
                self.unknown_model(i)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn unit_results(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        for r in expand_results(&st.results) {
            self.vals.insert(r, V::Unit);
        }
        Ok(())
    }

    /// An op smemsync does not know: warning W1110 naming it, and the conservative model.
    fn unknown(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let (op, span) = (st.op.clone(), st.op_span);
        self.warn(
            "W1110",
            &op,
            span,
            format!(
                "unknown op `{op}`: modelled conservatively (it reads and writes every shared buffer among its operands, with unknown ownership; its results are opaque)"
            ),
        );
        self.unknown_model(i)
    }

    /// Reads then writes every memdesc operand collectively with unknown ownership; results
    /// are opaque register values.
    fn unknown_model(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let results = expand_results(&st.results);
        let ops_ = operands(&st.rest);
        let tys = result_types(&st.rest);
        let op = st.op.clone();
        for (n, _) in &ops_ {
            if let Some(V::Mem(m)) = self.vals.get(n).cloned() {
                let t = self.fresh("unknown");
                let l1 = self.layout_clause(None, false);
                let l2 = self.layout_clause(None, false);
                self.emit(format!("%{t} = local_load {} {l1}", m.kir), Some(span));
                self.emit(format!("local_store {}, %{t} {l2}", m.kir), Some(span));
            }
        }
        for (k, r) in results.iter().enumerate() {
            let ty = types::classify(tys.get(k).map_or("", String::as_str));
            match Self::lazy_ty(&ty) {
                Some(sty) => {
                    let l = Lazy {
                        op: op.clone(),
                        args: ops_.iter().map(|(n, _)| n.clone()).collect(),
                        ty: sty,
                        pred: None,
                        literal: None,
                        bits: 0,
                        arg_bits: 0,
                        int: None,
                        span,
                    };
                    self.lazy(r, l);
                }
                None => {
                    self.vals.insert(r.clone(), V::Unit);
                }
            }
        }
        Ok(())
    }

    /// A new shared buffer (named after `base`) live at the current statement.
    pub fn new_buffer(&mut self, base: &str, s: &Shaped, span: Span) -> Result<usize, Diagnostic> {
        let (elem, mult) = types::kir_elem(&s.elem)
            .ok_or_else(|| bad(span, format!("element type `{}` is not supported", s.elem)))?;
        let mut shape = if s.shape.is_empty() { vec![1] } else { s.shape.clone() };
        if let Some(l) = shape.last_mut() {
            *l *= mult;
        }
        let esize = match elem {
            "f16" | "bf16" | "i16" => 2,
            "i8" => 1,
            _ => 4,
        };
        let name = self.fresh(base);
        let bytes = shape.iter().product::<u64>() * esize;
        self.buffers.push(Buf {
            name,
            elem,
            shape,
            bytes,
            from: self.stmt_no,
            to: self.stmt_no,
            loops: self.loop_stack.clone(),
            pending_loops: Vec::new(),
            offset: None,
            mbarrier: false,
            layout: (base == "scratch").then(|| "scratch".to_string()),
        });
        Ok(self.buffers.len() - 1)
    }

    fn local_alloc(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let (r, _, rs) = st
            .results
            .first()
            .cloned()
            .ok_or_else(|| bad(span, "`ttg.local_alloc` needs a result"))?;
        let tys = result_types(&st.rest);
        let Ty::Mem(s) = types::classify(tys.last().map_or("", String::as_str)) else {
            return Err(bad(span, "expected a `!ttg.memdesc<...>` result type"));
        };
        let init = operands(&st.rest).first().cloned();
        let init_ty = first_type(&st.rest);
        let offset = int_attr(self.text(&st.line), "allocation.offset");
        let b = self.new_buffer(&r, &s, rs)?;
        self.buffers[b].offset = offset.map(|o| o.max(0) as u64);
        if self.is_mbarrier(i, &r) {
            self.buffers[b].mbarrier = true;
            self.vals.insert(r, V::Mbar(b, None));
            return Ok(());
        }
        self.buffers[b].layout = self.shared_layout(&s, &self.buffers[b].shape.clone(), rs);
        let kir = format!("@{}", self.buffers[b].name);
        if let Some((x, xs)) = init {
            let v = self.value(&x, xs)?;
            let enc = init_ty.as_deref().and_then(enc_of);
            let l = self.layout_clause(enc.as_deref(), true);
            self.emit(format!("local_store {kir}, {v} {l}"), Some(span));
        }
        self.vals.insert(
            r,
            V::Mem(Mem {
                kir,
                shape: s.shape,
                buf: b,
                exact: true,
                slot: None,
            }),
        );
        Ok(())
    }

    fn mem_operand(&self, name: &str, span: Span) -> Result<Mem, Diagnostic> {
        match self.vals.get(name) {
            Some(V::Mem(m)) => Ok(m.clone()),
            _ => Err(bad(span, format!("`%{name}` is not a shared-memory descriptor"))),
        }
    }

    fn memdesc_index(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let ops_ = operands(&st.rest);
        let r = st.result();
        let [(src, ss), (idx, is), ..] = ops_.as_slice() else {
            return Err(bad(span, "expected `ttg.memdesc_index %m[%i]`"));
        };
        if let Some(V::Mbar(b, None)) = self.vals.get(src).cloned() {
            self.vals.insert(r, V::Mbar(b, Some(idx.clone())));
            return Ok(());
        }
        let m = self.mem_operand(src, *ss)?;
        if m.shape.len() < 2 {
            return Err(bad(span, "indexing a rank-1 shared buffer is not supported"));
        }
        let iv = self.value(idx, *is)?;
        let v = self.fresh(&r);
        self.emit(format!("%{v} = view {}[{iv}]", m.kir), Some(span));
        let slot = self.slot_of_index(&m, idx);
        self.vals.insert(
            r,
            V::Mem(Mem {
                kir: format!("%{v}"),
                shape: m.shape[1..].to_vec(),
                slot,
                ..m
            }),
        );
        Ok(())
    }

    fn memdesc_subslice(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let r = st.result();
        let (src, ss) = st.first_operand("a source")?;
        let m = self.mem_operand(&src, ss)?;
        let offs: Vec<u64> = st
            .rest
            .iter()
            .take_while(|t| t.t != T::P(':'))
            .filter_map(|t| match t.t {
                T::Int(v) if v >= 0 => Some(v as u64),
                _ => None,
            })
            .collect();
        let tys = result_types(&st.rest);
        let Ty::Mem(s) = types::classify(tys.last().map_or("", String::as_str)) else {
            return Err(bad(span, "expected a `!ttg.memdesc<...>` result type"));
        };
        if offs.len() != m.shape.len() || s.shape.len() != m.shape.len() {
            return Err(bad(span, "expected one static offset per dimension"));
        }
        let ranges: Vec<String> = offs
            .iter()
            .zip(&s.shape)
            .map(|(o, n)| format!("{o}:{}", o + n))
            .collect();
        let v = self.fresh(&r);
        let ranges = ranges.join(", ");
        self.emit(format!("%{v} = view {}[{ranges}]", m.kir), Some(span));
        let slot = m.slot.clone().map(|sl| sl.then(Step::Sub(ranges, s.shape.clone())));
        self.vals.insert(
            r,
            V::Mem(Mem {
                kir: format!("%{v}"),
                shape: s.shape,
                slot,
                ..m
            }),
        );
        Ok(())
    }

    /// `memdesc_trans`/`memdesc_reinterpret`: the same bytes; collective accesses through it
    /// get unknown ownership.
    fn memdesc_alias(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let r = st.result();
        let (src, ss) = st.first_operand("a source")?;
        let m = self.mem_operand(&src, ss)?;
        let slot = m.slot.clone().map(|sl| sl.then(Step::Alias));
        self.vals.insert(
            r,
            V::Mem(Mem {
                exact: false,
                slot,
                ..m
            }),
        );
        Ok(())
    }

    fn local_load(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let r = st.result();
        let (src, ss) = st.first_operand("a source")?;
        let m = self.mem_operand(&src, ss)?;
        let tys = result_types(&st.rest);
        let rt = tys.last().cloned().unwrap_or_default();
        let sty = match types::classify(&rt) {
            Ty::Tensor(s) => types::scalar_of(&s.elem),
            _ => "f32",
        };
        let l = self.layout_clause(enc_of(&rt).as_deref(), m.exact);
        let v = self.fresh(&r);
        self.emit(format!("%{v} = local_load {} {l}", m.kir), Some(span));
        self.vals.insert(r, V::Kir(v, sty));
        Ok(())
    }

    fn local_store(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let ops_ = operands(&st.rest);
        let [(x, xs), (dst, ds), ..] = ops_.as_slice() else {
            return Err(bad(span, "expected `ttg.local_store %x, %m`"));
        };
        let m = self.mem_operand(dst, *ds)?;
        let ty = first_type(&st.rest).unwrap_or_default();
        let v = self.value(x, *xs)?;
        let l = self.layout_clause(enc_of(&ty).as_deref(), m.exact);
        self.emit(format!("local_store {}, {v} {l}", m.kir), Some(span));
        Ok(())
    }

    /// The global buffer a pointer value derives from (a fallback global of its element when
    /// unknown), recording the tile shape it is read with.
    pub fn global_for(&mut self, ptr: &str, elem: &str, tile: &[u64]) -> String {
        let g = match self.vals.get(ptr) {
            Some(V::Ptr(Some(g))) | Some(V::Desc(Some(g))) => g.clone(),
            _ => {
                let name = format!("gmem_{elem}");
                if !self.globals.iter().any(|(n, _, _)| *n == name) {
                    let e = types::kir_elem(elem).map_or("f32", |(e, _)| e);
                    self.globals.push((name.clone(), e, Vec::new()));
                }
                name
            }
        };
        if let Some(gl) = self.globals.iter_mut().find(|(n, _, _)| *n == g) {
            let fixed = gl.2.iter().any(|d| d.parse::<u64>().is_err());
            if !fixed {
                let mut dims: Vec<u64> = gl.2.iter().filter_map(|d| d.parse().ok()).collect();
                dims.resize(dims.len().max(tile.len()), 1);
                let off = dims.len() - tile.len();
                for (k, t) in tile.iter().enumerate() {
                    dims[off + k] = dims[off + k].max(*t);
                }
                gl.2 = dims.iter().map(u64::to_string).collect();
            }
        }
        g
    }

    fn async_copy(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let ops_ = operands(&st.rest);
        let [(ptr, _), (dst, ds), ..] = ops_.as_slice() else {
            return Err(bad(span, "expected `%ptrs, %dst`"));
        };
        let masked = st.rest.iter().any(|t| t.t == T::Word("mask".into()));
        let m = self.mem_operand(dst, *ds)?;
        let pty = first_type(&st.rest).unwrap_or_default();
        let enc = enc_of(&pty);
        let elem = pty
            .split("!tt.ptr<")
            .nth(1)
            .and_then(|s| s.split('>').next())
            .unwrap_or("f32")
            .to_string();
        let results = expand_results(&st.results);
        let g = self.global_for(&ptr.clone(), &elem, &m.shape);
        let origin = vec!["0"; m.shape.len()].join(", ");
        let l = self.layout_clause(enc.as_deref(), m.exact);
        let mk = if masked { " masked" } else { "" };
        let opn = if self.nvidia {
            "cp_async_tile"
        } else {
            "gather_to_lds_tile"
        };
        self.emit(format!("{opn} {} <- %{g}[{origin}] {l}{mk}", m.kir), Some(span));
        for r in results {
            self.vals.insert(r, V::Unit);
        }
        Ok(())
    }

    fn async_wait(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let n = int_attr(self.text(&st.line), "num").unwrap_or(0);
        self.unit_results(i)?;
        if self.nvidia {
            self.emit(format!("cp_async_wait {n}"), Some(span));
            return Ok(());
        }
        if n != 0 {
            return Err(Diagnostic::user(
                "E1107",
                format!("`ttg.async_wait {{num = {n}}}` on AMD is not imported yet (only num = 0)"),
            )
            .with_label(span, "count wait on AMD"));
        }
        let counter = match self.target.as_deref() {
            Some("gfx1250") => "asynccnt",
            Some(t) if t.starts_with("gfx12") => "loadcnt",
            _ => "vmcnt",
        };
        self.emit(format!("waitcnt {counter}(0)"), Some(span));
        Ok(())
    }

    /// A scratch buffer for one op's internal shared traffic.
    fn scratch(&mut self, s: &Shaped, span: Span) -> Result<String, Diagnostic> {
        let b = self.new_buffer("scratch", s, span)?;
        Ok(format!("@{}", self.buffers[b].name))
    }

    fn convert_layout(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let r = st.result();
        let (x, xs) = operands(&st.rest)
            .first()
            .cloned()
            .ok_or_else(|| bad(span, "expected an operand"))?;
        let from = first_type(&st.rest).unwrap_or_default();
        let to = result_types(&st.rest).last().cloned().unwrap_or_default();
        let (fe, te) = (enc_of(&from).unwrap_or_default(), enc_of(&to).unwrap_or_default());
        if layouts::convert_is_register_only(&self.aliases, &fe, &te) {
            let v = self.vals.get(&x).cloned().unwrap_or(V::Unit);
            self.vals.insert(r, v);
            return Ok(());
        }
        let Ty::Tensor(s) = types::classify(&to) else {
            return Err(bad(span, "expected tensor types"));
        };
        let buf = self.scratch(&s, span)?;
        let v = self.value(&x, xs)?;
        let l1 = self.layout_clause(Some(&fe), true);
        let l2 = self.layout_clause(Some(&te), true);
        self.emit(format!("local_store {buf}, {v} {l1}"), Some(span));
        let k = self.fresh(&r);
        self.emit(format!("%{k} = local_load {buf} {l2}"), Some(span));
        self.vals.insert(r, V::Kir(k, types::scalar_of(&s.elem)));
        Ok(())
    }

    /// `tt.histogram` and atomics with a result: their result goes through shared scratch
    /// (a store by the producing threads, a load by all), with unknown ownership.
    fn scratch_op(&mut self, i: usize) -> Result<(), Diagnostic> {
        let st = self.stmt(i)?;
        let span = st.line.span;
        let results = expand_results(&st.results);
        let tys = result_types(&st.rest);
        let args: Vec<String> = operands(&st.rest).into_iter().map(|(n, _)| n).collect();
        for (k, r) in results.iter().enumerate() {
            let tyt = tys.get(k).or(tys.last()).cloned().unwrap_or_default();
            let s = match types::classify(&tyt) {
                Ty::Tensor(s) => s,
                _ => Shaped {
                    shape: vec![1],
                    elem: if tyt.is_empty() { "i32".into() } else { tyt.clone() },
                    enc: None,
                },
            };
            let sty = types::scalar_of(&s.elem);
            let buf = self.scratch(&s, span)?;
            let arg_vals: Vec<String> = args
                .iter()
                .filter(|a| matches!(self.vals.get(*a), Some(V::Kir(..) | V::Lazy(_))))
                .cloned()
                .collect();
            let mut vs = Vec::new();
            for a in arg_vals {
                vs.push(self.value(&a, span)?);
            }
            let t = self.fresh("partial");
            self.emit(
                format!("%{t} = compute \"{}\"({}) : {sty}", st.op, vs.join(", ")),
                Some(span),
            );
            let (l1, l2) = (self.layout_clause(None, false), self.layout_clause(None, false));
            self.emit(format!("local_store {buf}, %{t} {l1}"), Some(span));
            let k2 = self.fresh(r);
            self.emit(format!("%{k2} = local_load {buf} {l2}"), Some(span));
            self.vals.insert(r.clone(), V::Kir(k2, sty));
        }
        Ok(())
    }
}

/// The tokens after a leading attribute dictionary (`arith.constant {async_task_id =
/// array<i32: 1>} 64 : i32`, as Triton's warp specialization writes them).
fn after_attr_dict(rest: &[super::lexer::Tok]) -> &[super::lexer::Tok] {
    if rest.first().map(|t| &t.t) != Some(&T::P('{')) {
        return rest;
    }
    let mut depth = 0usize;
    for (k, t) in rest.iter().enumerate() {
        match t.t {
            T::P('{') => depth += 1,
            T::P('}') => {
                depth -= 1;
                if depth == 0 {
                    return &rest[k + 1..];
                }
            }
            _ => {}
        }
    }
    rest
}
