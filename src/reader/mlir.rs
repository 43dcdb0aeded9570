//! The MLIR importer: reads the dialect subset `emit::mlir` writes (gpu, scf, arith, math,
//! memref, amdgpu, rocdl, nvgpu, nvvm; docs/mlir.md) back into [`Kernel`]s, so that smemsync
//! runs on MLIR a user already has.
//!
//! Accepted shape: `gpu.func ... kernel` functions (inside `gpu.module`s, optionally inside a
//! `module`), one op per line, in the custom syntax `mlir-opt` prints. Private `func.func`
//! helpers are skipped; calls to smemsync's helpers (`__smemsync_rem_i32`, `_tid_linear`,
//! `_in_group`, compute and collective helpers) become the one IR op they stand for. Index
//! casts, element widening/narrowing and `inttoptr` are aliases of their operand; `index`
//! constants and constants marked `{smemsync.imm}` are immediates. Attributes
//! `known_block_size`, `known_grid_size`, `smemsync.groups`, `smemsync.dims` restore the
//! launch shape, thread groups and symbolic dimensions.
//!
//! Invariant: `emit(import(emit(k)))` equals `emit(k)` for every kernel the emitter accepts.
//! An op outside the subset is a diagnostic with its line and column; the importer never
//! panics. Complexity: O(source length).

use std::collections::{HashMap, HashSet};

use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::target::Target;
use crate::verify::limits::{MAX_NESTING, too_deep};

/// Reads every `gpu.func ... kernel` of an MLIR text. `target` decides what the AMD
/// counter fields of `amdgpu.memory_counter_wait` mean (vmcnt/lgkmcnt on gfx9, loadcnt/dscnt
/// on gfx12).
pub fn import_mlir(src: &str, target: &Target) -> Result<Vec<Kernel>, Vec<Diagnostic>> {
    let lines = lex_lines(src).map_err(|d| vec![d])?;
    let mut kernels = Vec::new();
    let mut diags = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = &lines[i];
        match l.word(0) {
            Some("func.func") => {
                i = skip_block(&lines, i);
            }
            Some("gpu.func") => {
                let mut imp = Importer::new(&lines, target, src.len());
                match imp.kernel(i) {
                    Ok((k, next)) => {
                        diags.extend(imp.diags);
                        kernels.push(k);
                        i = next;
                    }
                    Err(d) => {
                        diags.extend(imp.diags);
                        diags.push(d);
                        i = skip_block(&lines, i);
                    }
                }
            }
            _ => i += 1,
        }
    }
    if kernels.is_empty() && diags.is_empty() {
        diags.push(
            Diagnostic::user("E0900", "the MLIR holds no `gpu.func ... kernel`").with_label(
                Span::new(0, src.len().min(1)),
                "expected a gpu.module with a kernel",
            ),
        );
    }
    if diags.is_empty() {
        for k in &kernels {
            diags.extend(crate::verify::verify(k));
        }
    }
    if diags.is_empty() {
        Ok(kernels)
    } else {
        Err(diags)
    }
}

// ---------------------------------------------------------------- tokens

use super::mlir_lexer::{Line, Syntax, T, Tok};

/// The lexer's settings for smemsync's own MLIR (`super::mlir_lexer`): `<` and `>` are
/// punctuation outside types, `loc(...)` is not skipped.
const MLIR_SYNTAX: Syntax = Syntax {
    code: "E0901",
    prefix: "",
    skip_loc: false,
    angle_punct: true,
    dash_words: false,
};

fn lex_lines(src: &str) -> Result<Vec<Line>, Diagnostic> {
    super::mlir_lexer::lex_lines(src, &MLIR_SYNTAX)
}

/// The index after the block opened at line `i` (balanced braces).
fn skip_block(lines: &[Line], i: usize) -> usize {
    let mut depth = 0i64;
    let mut j = i;
    while j < lines.len() {
        depth += lines[j].opens() as i64 - lines[j].closes() as i64;
        j += 1;
        if depth <= 0 {
            break;
        }
    }
    j
}

// ---------------------------------------------------------------- attributes

#[derive(Clone, Debug, PartialEq)]
enum Attr {
    Str(String),
    Int(i64),
    Float(f64),
    Text(String),
    Dict(Vec<(String, Attr)>),
    List(Vec<Attr>),
    Unit,
}

fn array_ints(s: &str) -> Vec<i64> {
    let inner = s
        .split_once(':')
        .map_or("", |(_, r)| r)
        .trim_end_matches('>');
    inner
        .split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect()
}

// ---------------------------------------------------------------- cursor

struct Cur<'a> {
    toks: &'a [Tok],
    i: usize,
    end: Span,
}

type R<T> = Result<T, Diagnostic>;

impl<'a> Cur<'a> {
    fn peek(&self) -> Option<&T> {
        self.toks.get(self.i).map(|t| &t.t)
    }
    fn span(&self) -> Span {
        self.toks.get(self.i).map_or(self.end, |t| t.span)
    }
    fn next(&mut self) -> Option<&'a Tok> {
        let t = self.toks.get(self.i);
        self.i += 1;
        t
    }
    fn err<X>(&self, what: &str) -> R<X> {
        let found = match self.peek() {
            Some(t) => format!("{t:?}"),
            None => "end of line".into(),
        };
        Err(
            Diagnostic::user("E0902", format!("expected {what}, found {found}"))
                .with_label(self.span(), format!("expected {what}")),
        )
    }
    fn eat(&mut self, p: char) -> bool {
        if self.peek() == Some(&T::P(p)) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn eat_arrow(&mut self) -> bool {
        if self.peek() == Some(&T::Arrow) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, p: char) -> R<()> {
        if self.eat(p) {
            Ok(())
        } else {
            self.err(&format!("`{p}`"))
        }
    }
    fn eat_word(&mut self, w: &str) -> bool {
        if matches!(self.peek(), Some(T::Word(x)) if x == w) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn word(&mut self) -> R<String> {
        match self.peek() {
            Some(T::Word(w)) => {
                let w = w.clone();
                self.i += 1;
                Ok(w)
            }
            _ => self.err("a keyword"),
        }
    }
    fn val(&mut self) -> R<(String, Span)> {
        match self.peek() {
            Some(T::Val(v)) => {
                let v = v.clone();
                let s = self.span();
                self.i += 1;
                Ok((v, s))
            }
            _ => self.err("an SSA value"),
        }
    }
    fn int(&mut self) -> R<i64> {
        match self.peek() {
            Some(T::Int(v)) => {
                let v = *v;
                self.i += 1;
                Ok(v)
            }
            _ => self.err("an integer"),
        }
    }
    /// A type: a word (`i32`, `index`) or a compound type token.
    fn ty(&mut self) -> R<String> {
        match self.peek() {
            Some(T::Word(w)) | Some(T::Ty(w)) => {
                let w = w.clone();
                self.i += 1;
                Ok(w)
            }
            _ => self.err("a type"),
        }
    }
    /// `(ty, ty)` or a single type.
    fn ty_list(&mut self) -> R<Vec<String>> {
        if self.eat('(') {
            let mut v = Vec::new();
            if self.eat(')') {
                return Ok(v);
            }
            loop {
                v.push(self.ty()?);
                if self.eat(')') {
                    return Ok(v);
                }
                self.expect(',')?;
            }
        }
        Ok(vec![self.ty()?])
    }
    fn attr(&mut self) -> R<Attr> {
        match self.peek().cloned() {
            Some(T::Str(s)) => {
                self.i += 1;
                Ok(Attr::Str(s))
            }
            Some(T::Int(v)) => {
                self.i += 1;
                if self.eat(':') {
                    self.ty()?;
                }
                Ok(Attr::Int(v))
            }
            Some(T::Float(v)) => {
                self.i += 1;
                if self.eat(':') {
                    self.ty()?;
                }
                Ok(Attr::Float(v))
            }
            Some(T::Ty(t)) | Some(T::Word(t)) => {
                self.i += 1;
                Ok(Attr::Text(t))
            }
            Some(T::P('{')) => self.dict(),
            Some(T::P('[')) => {
                self.i += 1;
                let mut v = Vec::new();
                if self.eat(']') {
                    return Ok(Attr::List(v));
                }
                loop {
                    v.push(self.attr()?);
                    if self.eat(']') {
                        return Ok(Attr::List(v));
                    }
                    self.expect(',')?;
                }
            }
            _ => self.err("an attribute"),
        }
    }
    fn dict(&mut self) -> R<Attr> {
        self.expect('{')?;
        let mut v = Vec::new();
        if self.eat('}') {
            return Ok(Attr::Dict(v));
        }
        loop {
            let key = match self.next().map(|t| &t.t) {
                Some(T::Word(w)) | Some(T::Str(w)) => w.clone(),
                _ => {
                    self.i -= 1;
                    return self.err("an attribute name");
                }
            };
            let val = if self.eat('=') {
                self.attr()?
            } else {
                Attr::Unit
            };
            v.push((key, val));
            if self.eat('}') {
                return Ok(Attr::Dict(v));
            }
            self.expect(',')?;
        }
    }
    fn opt_dict(&mut self) -> R<Vec<(String, Attr)>> {
        if self.peek() == Some(&T::P('{')) {
            match self.dict()? {
                Attr::Dict(d) => Ok(d),
                _ => Ok(Vec::new()),
            }
        } else {
            Ok(Vec::new())
        }
    }
}

fn get<'a>(d: &'a [(String, Attr)], k: &str) -> Option<&'a Attr> {
    d.iter().find(|(n, _)| n == k).map(|(_, a)| a)
}

fn get_str(d: &[(String, Attr)], k: &str) -> Option<String> {
    match get(d, k) {
        Some(Attr::Str(s)) => Some(s.clone()),
        _ => None,
    }
}

// ---------------------------------------------------------------- memref types

/// Shape and element of a memref type text `memref<4x?x32xf16, ...>` (`?` as None).
fn memref_shape(t: &str) -> Option<(Vec<Option<u64>>, ElemType)> {
    let inner = t.strip_prefix("memref<")?;
    let first = inner.split(',').next()?.trim_end_matches('>').trim();
    let parts: Vec<&str> = first.split('x').collect();
    let (elem, dims) = parts.split_last()?;
    let elem = match *elem {
        "i8" => ElemType::I8,
        "i16" => ElemType::I16,
        "i32" => ElemType::I32,
        "f16" => ElemType::F16,
        "bf16" => ElemType::BF16,
        "f32" => ElemType::F32,
        "i64" => ElemType::MBarrier,
        _ => return None,
    };
    let mut shape = Vec::new();
    for d in dims {
        if *d == "?" {
            shape.push(None);
        } else {
            shape.push(Some(d.parse().ok()?));
        }
    }
    Some((shape, elem))
}

/// An MLIR SSA name as a smemsync name: characters outside `[A-Za-z0-9_.]` (`#`, `$`, `-`)
/// become `_`.
fn ir_name(n: &str) -> String {
    let s: String = n
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "_".into() } else { s }
}

fn scalar_ty(t: &str) -> Option<ScalarType> {
    match t {
        "i1" => Some(ScalarType::I1),
        "i32" | "index" | "i8" | "i16" | "i64" => Some(ScalarType::I32),
        "f32" | "f16" | "bf16" => Some(ScalarType::F32),
        _ if t.starts_with("!nvgpu.device.async.token") => Some(ScalarType::Token),
        _ => None,
    }
}

// ---------------------------------------------------------------- importer

#[derive(Clone, Debug)]
enum B {
    Val(Value),
    Imm(Scalar),
    View(View),
    Buf(Buffer),
    Glob(Global),
    /// An mbarrier address: the array and the index.
    MbarPtr(Buffer, Operand),
    /// A value smemsync has no use for (an mbarrier token, a copy group token).
    Opaque,
    /// A tensor DMA base or descriptor: the tile, the global and the origin.
    Tdm(MemRef, Global, Vec<Operand>),
    /// A TMA tensor map of a global.
    Tma(Global),
}

enum Mode {
    Normal,
    /// A `scf.execute_region` body: the yield gives the region's results.
    Stage,
}

struct Importer<'a> {
    lines: &'a [Line],
    t: &'a Target,
    k: Kernel,
    env: HashMap<String, B>,
    arenas: HashSet<String>,
    diags: Vec<Diagnostic>,
    stage_yield: Vec<B>,
    src_len: usize,
    /// Shared buffers whose SSA name differs from their smemsync name.
    shared_names: Vec<(String, String)>,
    /// Region-owning ops enclosing the region being read.
    depth: usize,
}

/// A helper call being read: where its op goes, its bound arguments (all, and the scalars
/// alone, in order) and its results.
#[derive(Clone, Copy)]
struct CallSite<'x> {
    r: Region,
    span: Span,
    items: &'x [(B, Span)],
    args: &'x [Operand],
    res: &'x [(String, Span)],
    res_tys: &'x [ScalarType],
}

/// What a kernel's argument list leaves to resolve once every argument is bound: globals
/// with symbolic dimensions (named by position or name), tensor-map arguments and the global
/// each names, and the argument names in order.
#[derive(Default)]
struct KernelArgs {
    pending_dims: Vec<(Global, Vec<String>, Span)>,
    tmaps: Vec<(String, String, Span)>,
    arg_names: Vec<String>,
}

/// One op line of the input being read: where its op goes, its results, its span and name
/// (the cursor stands after the name), and whether it is in a stage body.
struct OpLine<'m> {
    r: Region,
    span: Span,
    res: Vec<(String, Span)>,
    name: String,
    mode: &'m Mode,
}

impl OpLine<'_> {
    /// The op's one result, which it must have.
    fn one(&self) -> R<(String, Span)> {
        self.res.first().cloned().ok_or_else(|| {
            Diagnostic::user("E0909", "this op needs a result").with_label(self.span, "here")
        })
    }
}

impl<'a> Importer<'a> {
    fn new(lines: &'a [Line], t: &'a Target, src_len: usize) -> Self {
        Importer {
            lines,
            t,
            k: Kernel::new(""),
            env: HashMap::new(),
            arenas: HashSet::new(),
            diags: Vec::new(),
            stage_yield: Vec::new(),
            src_len,
            shared_names: Vec::new(),
            depth: 0,
        }
    }

    fn cur(&self, i: usize) -> Cur<'a> {
        let l = &self.lines[i];
        Cur {
            toks: &l.toks,
            i: 0,
            end: Span::new(l.span.hi as usize, l.span.hi as usize),
        }
    }

    fn unsupported(&self, span: Span, what: &str) -> Diagnostic {
        Diagnostic::user("E0903", format!("unsupported MLIR: {what}"))
            .with_label(span, "smemsync does not read this")
            .with_note("docs/mlir.md lists the dialect subset smemsync reads")
    }

    fn kernel(&mut self, start: usize) -> R<(Kernel, usize)> {
        let end = skip_block(self.lines, start);
        // Arenas: attributions that are the source of a memref.view.
        for l in &self.lines[start..end.min(self.lines.len())] {
            if let Some(pos) = l
                .toks
                .iter()
                .position(|t| t.t == T::Word("memref.view".into()))
                && let Some(T::Val(v)) = l.toks.get(pos + 1).map(|t| &t.t)
            {
                self.arenas.insert(v.clone());
            }
        }
        let mut c = self.cur(start);
        c.word()?; // gpu.func
        let name = match c.next().map(|t| &t.t) {
            Some(T::Sym(s)) => s.clone(),
            _ => return c.err("a kernel name"),
        };
        self.k = Kernel::new(name);
        self.k.kernel_span = self.lines[start].span;
        c.expect('(')?;
        let KernelArgs {
            pending_dims,
            tmaps,
            arg_names,
        } = self.kernel_args(&mut c)?;
        self.resolve_tensor_maps(tmaps)?;
        self.resolve_dims(pending_dims, &arg_names)?;
        self.workgroup(&mut c)?;
        if c.eat_word("kernel") {
            // fine
        } else {
            return c.err("`kernel`");
        }
        self.kernel_attributes(&mut c)?;
        c.expect('{')?;
        let body = self.k.body();
        let renames = self.shared_names.clone();
        let (close, next) = self.region(start + 1, body, Mode::Normal)?;
        let _ = close;
        for (ssa, ir) in renames {
            if let Some(B::Buf(b)) = self.env.get(&ssa) {
                self.k.buffers[*b].name = ir;
            }
        }
        Ok((std::mem::replace(&mut self.k, Kernel::new("")), next))
    }

    /// The kernel's arguments: globals and scalar parameters go into the kernel; tensor maps
    /// and symbolic dimensions are resolved once every argument is known.
    fn kernel_args(&mut self, c: &mut Cur<'a>) -> R<KernelArgs> {
        let mut a = KernelArgs::default();
        if !c.eat(')') {
            loop {
                let (pname, ps) = c.val()?;
                c.expect(':')?;
                let ty = c.ty()?;
                let attrs = c.opt_dict()?;
                a.arg_names.push(pname.clone());
                if let Some(g) = get(&attrs, "smemsync.tensor_map") {
                    // A TMA descriptor argument: resolved to its global after the header.
                    let g = match g {
                        Attr::Int(i) => a.arg_names.get(*i as usize).cloned().unwrap_or_default(),
                        Attr::Str(s) => s.clone(),
                        _ => String::new(),
                    };
                    a.tmaps.push((pname, g, ps));
                } else if let Some((shape, elem)) = memref_shape(&ty) {
                    let dims: Vec<Dim> = shape.iter().map(|d| Dim::Const(d.unwrap_or(0))).collect();
                    let g = self.k.globals.push(GlobalData {
                        name: ir_name(&pname),
                        elem,
                        shape: dims,
                    });
                    self.k.global_spans.set(g, ps);
                    self.k.params.push(Param::Global(g));
                    let names: Vec<String> = match get(&attrs, "smemsync.dims") {
                        Some(Attr::List(l)) => l
                            .iter()
                            .filter_map(|a| {
                                // A position among the arguments (or a name).
                                match a {
                                    Attr::Str(s) => Some(s.clone()),
                                    Attr::Int(i) => Some(format!("#{i}")),
                                    _ => None,
                                }
                            })
                            .collect(),
                        _ => Vec::new(),
                    };
                    a.pending_dims.push((g, names, ps));
                    self.env.insert(pname, B::Glob(g));
                } else {
                    self.scalar_param(pname, ps, &ty, &attrs)?;
                }
                if c.eat(')') {
                    break;
                }
                c.expect(',')?;
            }
        }
        Ok(a)
    }

    /// A scalar kernel parameter (`i32` or `f32`), with its default and range attributes.
    fn scalar_param(&mut self, pname: String, ps: Span, ty: &str, attrs: &[(String, Attr)]) -> R<()> {
        let Some(st) =
            scalar_ty(ty).filter(|s| matches!(s, ScalarType::I32 | ScalarType::F32))
        else {
            return Err(
                self.unsupported(ps, &format!("a kernel argument of type `{ty}`"))
            );
        };
        let idx = self.k.params.len();
        let v = self.k.new_value(st, ValueDef::Param(idx));
        self.k.params.push(Param::Scalar(v));
        match (get(attrs, "smemsync.default"), st) {
            (Some(Attr::Int(d)), ScalarType::F32) => self
                .k
                .param_defaults
                .set(v, Some(Scalar::F32(f32::from_bits(*d as u32)))),
            (Some(Attr::Int(d)), _) => {
                self.k.param_defaults.set(v, Some(Scalar::I32(*d as i32)))
            }
            (Some(Attr::Float(f)), _) => {
                self.k.param_defaults.set(v, Some(Scalar::F32(*f as f32)))
            }
            _ => {}
        }
        if let (Some(Attr::Int(lo)), Some(Attr::Int(hi))) =
            (get(attrs, "smemsync.min"), get(attrs, "smemsync.max"))
        {
            let (lo, hi) = (i32::try_from(*lo), i32::try_from(*hi));
            let (Ok(lo), Ok(hi)) = (lo, hi) else {
                return Err(self.unsupported(ps, "a parameter range beyond i32"));
            };
            self.k.param_ranges.set(v, Some((lo.min(hi), hi.max(lo))));
        }
        self.k.value_names.set(v, ir_name(&pname));
        self.k.value_spans.set(v, ps);
        self.env.insert(pname, B::Val(v));
        Ok(())
    }

    /// Binds each tensor-map argument to the global its `smemsync.tensor_map` names.
    fn resolve_tensor_maps(&mut self, tmaps: Vec<(String, String, Span)>) -> R<()> {
        for (n, g, s) in tmaps {
            match self.env.get(&g) {
                Some(B::Glob(gl)) => {
                    let gl = *gl;
                    self.env.insert(n, B::Tma(gl));
                }
                _ => {
                    return Err(Diagnostic::user(
                        "E0904",
                        format!("`smemsync.tensor_map` names `{g}`, not a memref argument"),
                    )
                    .with_label(s, "this argument"));
                }
            }
        }
        Ok(())
    }

    /// Symbolic dimensions: the scalar parameters named by `smemsync.dims`.
    fn resolve_dims(
        &mut self,
        pending: Vec<(Global, Vec<String>, Span)>,
        arg_names: &[String],
    ) -> R<()> {
        for (g, names, span) in pending {
            let mut names = names.into_iter();
            let shape = self.k.globals[g].shape.clone();
            let mut out = Vec::new();
            for d in shape {
                match d {
                    Dim::Const(0) => {
                        let n = names.next().map(|n| match n.strip_prefix('#') {
                            Some(i) => i
                                .parse::<usize>()
                                .ok()
                                .and_then(|i| arg_names.get(i).cloned())
                                .unwrap_or_default(),
                            None => n,
                        });
                        match n.as_ref().and_then(|n| self.env.get(n)) {
                            Some(B::Val(v)) => out.push(Dim::Param(*v)),
                            _ => {
                                return Err(Diagnostic::user(
                                    "E0904",
                                    "a dynamic dimension needs `smemsync.dims` naming an i32 argument",
                                )
                                .with_label(span, "this memref argument"));
                            }
                        }
                    }
                    d => out.push(d),
                }
            }
            self.k.globals[g].shape = out;
        }
        Ok(())
    }

    /// `workgroup(...)` attributions: shared buffers (those that are the source of a
    /// `memref.view` are the byte arena of pinned buffers, not buffers).
    fn workgroup(&mut self, c: &mut Cur<'a>) -> R<()> {
        if c.eat_word("workgroup") {
            c.expect('(')?;
            if !c.eat(')') {
                loop {
                    let (bname, bs) = c.val()?;
                    c.expect(':')?;
                    let ty = c.ty()?;
                    if self.arenas.contains(&bname) {
                        // Pinned buffers are views of it.
                    } else {
                        let Some((shape, elem)) = memref_shape(&ty) else {
                            return Err(self.unsupported(
                                bs,
                                &format!("a workgroup attribution of type `{ty}`"),
                            ));
                        };
                        let shape: Vec<u64> = shape.into_iter().map(|d| d.unwrap_or(0)).collect();
                        let b = self.k.buffers.push(BufferData {
                            name: ir_name(&bname),
                            elem,
                            shape,
                            offset: None,
                            layout: None,
                        });
                        self.k.buffer_spans.set(b, bs);
                        self.env.insert(bname, B::Buf(b));
                    }
                    if c.eat(')') {
                        break;
                    }
                    c.expect(',')?;
                }
            }
        }
        Ok(())
    }

    /// `attributes {...}`: launch sizes, the text form's buffer names and thread groups.
    fn kernel_attributes(&mut self, c: &mut Cur<'a>) -> R<()> {
        if c.eat_word("attributes") {
            let attrs_at = c.span();
            let attrs = match c.dict()? {
                Attr::Dict(d) => d,
                _ => Vec::new(),
            };
            // Out-of-range sizes become 0 or u32::MAX, which the verifier refuses.
            let dim = |x: i64| u32::try_from(x.max(0)).unwrap_or(u32::MAX);
            let dims3 = |a: Option<&Attr>| -> Option<[u32; 3]> {
                if let Some(Attr::Text(t)) = a {
                    let v = array_ints(t);
                    if v.len() == 3 {
                        return Some([dim(v[0]), dim(v[1]), dim(v[2])]);
                    }
                }
                None
            };
            if let Some(b) = dims3(get(&attrs, "known_block_size")) {
                self.k.block = b;
                self.k.block_span = attrs_at;
            }
            if let Some(g) = dims3(get(&attrs, "known_grid_size")) {
                self.k.grid = g;
                self.k.grid_known = true;
                self.k.grid_span = attrs_at;
            }
            if let Some(Attr::Dict(ns)) = get(&attrs, "smemsync.shared_names") {
                for (ssa, a) in ns {
                    if let Attr::Str(ir) = a {
                        self.shared_names.push((ssa.clone(), ir.clone()));
                    }
                }
            }
            if let Some(Attr::Dict(gs)) = get(&attrs, "smemsync.groups") {
                for (n, a) in gs {
                    if let Attr::Text(t) = a {
                        let v = array_ints(t);
                        if v.len() == 2 {
                            let g = self.k.groups.push(GroupData {
                                name: n.clone(),
                                lo: dim(v[0]),
                                hi: dim(v[1]),
                            });
                            self.k.group_spans.set(g, attrs_at);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Parses ops from line `i` up to the line starting with `}`; returns that line's index
    /// and the index after it. A nested region deeper than `MAX_NESTING` is refused before
    /// recursing into it, so no input can overflow the stack.
    fn region(&mut self, i: usize, r: Region, mode: Mode) -> R<(usize, usize)> {
        if r == self.k.body() {
            return self.region_ops(i, r, mode);
        }
        if self.depth >= MAX_NESTING {
            let at = self.lines[i.saturating_sub(1).min(self.lines.len() - 1)].span;
            return Err(too_deep(at));
        }
        self.depth += 1;
        let res = self.region_ops(i, r, mode);
        self.depth -= 1;
        res
    }

    fn region_ops(&mut self, mut i: usize, r: Region, mode: Mode) -> R<(usize, usize)> {
        while i < self.lines.len() {
            let l = &self.lines[i];
            if l.starts_with_close() {
                return Ok((i, i + 1));
            }
            match self.op(i, r, &mode) {
                Ok(next) => i = next,
                Err(d) => {
                    self.diags.push(d);
                    i = if self.lines[i].ends_with_open() {
                        skip_block(self.lines, i)
                    } else {
                        i + 1
                    };
                }
            }
        }
        Err(Diagnostic::user("E0905", "unterminated region")
            .with_label(Span::new(self.src_len, self.src_len), "expected `}`"))
    }

    fn bind(&mut self, name: &str, b: B) {
        self.env.insert(name.to_string(), b);
    }

    fn lookup(&self, name: &str, span: Span) -> R<B> {
        self.env.get(name).cloned().ok_or_else(|| {
            Diagnostic::user(
                "E0906",
                format!("`%{name}` is not defined (or comes from an unsupported op)"),
            )
            .with_label(span, "undefined value")
        })
    }

    fn operand(&self, c: &mut Cur) -> R<Operand> {
        let (n, s) = c.val()?;
        match self.lookup(&n, s)? {
            B::Val(v) => Ok(Operand::Value(v)),
            B::Imm(x) => Ok(Operand::Imm(x)),
            _ => Err(Diagnostic::user("E0907", format!("`%{n}` is not a scalar"))
                .with_label(s, "expected a scalar")),
        }
    }

    /// `%m[%i, %j]`: a shared memref or global buffer with indices.
    fn access(&self, c: &mut Cur) -> R<(B, Vec<Operand>, Span)> {
        let (n, s) = c.val()?;
        let b = self.lookup(&n, s)?;
        c.expect('[')?;
        let mut ix = Vec::new();
        if !c.eat(']') {
            loop {
                ix.push(self.operand(c)?);
                if c.eat(']') {
                    break;
                }
                c.expect(',')?;
            }
        }
        Ok((b, ix, s))
    }

    fn mem(&self, b: &B, s: Span) -> R<MemRef> {
        match b {
            B::Buf(x) => Ok(MemRef::Buffer(*x)),
            B::View(v) => Ok(MemRef::View(*v)),
            _ => Err(Diagnostic::user("E0908", "expected a shared-memory memref")
                .with_label(s, "not shared memory")),
        }
    }

    fn results(&self, c: &mut Cur) -> Vec<(String, Span)> {
        let save = c.i;
        let mut rs = Vec::new();
        while let Some(T::Val(_)) = c.peek() {
            if let Ok((n, s)) = c.val() {
                // `%x:2 = ...` defines `%x#0` and `%x#1`.
                if c.peek() == Some(&T::P(':'))
                    && matches!(c.toks.get(c.i + 1).map(|t| &t.t), Some(T::Int(_)))
                {
                    c.i += 1;
                    let k = c.int().unwrap_or(1).clamp(1, 64);
                    for j in 0..k {
                        rs.push((format!("{n}#{j}"), s));
                    }
                } else {
                    rs.push((n, s));
                }
            }
            if c.eat(',') {
                continue;
            }
            if c.eat('=') {
                return rs;
            }
            break;
        }
        c.i = save;
        Vec::new()
    }

    /// Places a new op with named results of the given types.
    fn place(
        &mut self,
        r: Region,
        kind: OpKind,
        results: &[(String, Span)],
        tys: &[ScalarType],
        regions: Vec<Region>,
        span: Span,
    ) -> Op {
        let op = self.k.new_op(kind, tys, regions);
        self.k.op_spans.set(op, span);
        let vs = self.k.ops[op].results.clone();
        for ((n, s), v) in results.iter().zip(vs) {
            self.k.value_names.set(v, ir_name(n));
            self.k.value_spans.set(v, *s);
            self.env.insert(n.clone(), B::Val(v));
        }
        self.k.append(r, op);
        op
    }

    /// The span of line `i` from the cursor's token (the op name) to the end of the line.
    fn op_span(&self, i: usize, c: &Cur) -> Span {
        let line = &self.lines[i];
        Span::new(
            line.toks
                .get(c.i)
                .map_or(line.span.lo as usize, |t| t.span.lo as usize),
            line.span.hi as usize,
        )
    }

    fn op(&mut self, i: usize, r: Region, mode: &Mode) -> R<usize> {
        let mut c = self.cur(i);
        let res = self.results(&mut c);
        let span = self.op_span(i, &c);
        // Region-owning ops go through this small frame: the nesting recursion passes
        // through here, and the other ops' big match stays off the stack.
        match c.word()?.as_str() {
            "scf.for" => self.for_op(i, &mut c, r, &res, span),
            "scf.if" => self.if_op(i, &mut c, r, &res, span),
            "scf.while" => self.while_op(i, &mut c, r, &res, span),
            "scf.execute_region" => self.stage(i, &mut c, r, &res, span),
            _ => self.plain_op(i, r, mode),
        }
    }

    /// An op that owns no region: read by the family of ops it belongs to (each family's
    /// method says whether the name is one of its own).
    fn plain_op(&mut self, i: usize, r: Region, mode: &Mode) -> R<usize> {
        let mut c = self.cur(i);
        let res = self.results(&mut c);
        let span = self.op_span(i, &c);
        let name = c.word()?;
        let o = OpLine {
            r,
            span,
            res,
            name,
            mode,
        };
        let read = self.constant_op(&mut c, &o)? || self.thread_op(&mut c, &o)? || self.compare_op(&mut c, &o)? || self.subview_op(&mut c, &o)? || self.buffer_op(&mut c, &o)? || self.access_op(&mut c, &o)? || self.atomic_op(&mut c, &o)? || self.copy_op(&mut c, &o)? || self.tma_op(&mut c, &o)? || self.tensor_dma_op(&mut c, &o)? || self.wait_op(&mut c, &o)? || self.barrier_op(&mut c, &o)? || self.mbarrier_init_op(&mut c, &o)? || self.mbarrier_tx_op(&mut c, &o)? || self.control_op(&mut c, &o)?;
        if !read {
            return Err(
                Diagnostic::user("E0903", format!("unsupported MLIR op `{}`", o.name))
                    .with_label(span, "smemsync does not read this op")
                    .with_note("docs/mlir.md lists the dialect subset smemsync reads"),
            );
        }
        Ok(i + 1)
    }

    /// Constants (`arith.constant`, with smemsync's `special`/`imm` attributes) and the casts the IR does not keep.
    fn constant_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        let name = &o.name;
        match name.as_str() {
            "arith.constant" => {
                let attrs = c.opt_dict()?;
                let (lit, ty) = match c.next().map(|t| t.t.clone()) {
                    Some(T::Int(v)) => {
                        let ty = if c.eat(':') { c.ty()? } else { "i32".into() };
                        (Scalar::I32(v as i32), ty)
                    }
                    Some(T::Float(f)) => {
                        let ty = if c.eat(':') { c.ty()? } else { "f32".into() };
                        (Scalar::F32(f as f32), ty)
                    }
                    Some(T::Word(w)) if w == "true" || w == "false" => {
                        (Scalar::I1(w == "true"), "i1".into())
                    }
                    _ => {
                        return Err(
                            self.unsupported(span, "a constant that is not a scalar literal")
                        );
                    }
                };
                let lit = match (ty.as_str(), lit) {
                    ("f32", Scalar::I32(bits)) => Scalar::F32(f32::from_bits(bits as u32)),
                    ("f32", x) => Scalar::F32(x.as_f32()),
                    ("i1", x) => Scalar::I1(x.truthy()),
                    (_, Scalar::I32(v)) => Scalar::I32(v),
                    (_, x) => x,
                };
                let (n, s) = o.one()?;
                if let Some(sp) = get_str(&attrs, "smemsync.special") {
                    let Some(sp) = Special::from_name(&sp) else {
                        return Err(self.unsupported(span, "an unknown smemsync.special"));
                    };
                    self.place(
                        r,
                        OpKind::Special(sp),
                        &[(n, s)],
                        &[ScalarType::I32],
                        vec![],
                        span,
                    );
                } else if ty == "index" || get(&attrs, "smemsync.imm").is_some() {
                    self.bind(&n, B::Imm(lit));
                } else {
                    let t = lit.ty();
                    self.place(r, OpKind::Const(lit), &[(n, s)], &[t], vec![], span);
                }
            }
            "arith.index_cast"
            | "arith.extf"
            | "arith.extsi"
            | "arith.truncf"
            | "arith.trunci"
            | "llvm.inttoptr"
            | "arith.index_castui"
            | "arith.extui"
            | "memref.expand_shape"
            | "builtin.unrealized_conversion_cast" => {
                let (x, xs) = c.val()?;
                let b = self.lookup(&x, xs)?;
                let (n, _) = o.one()?;
                let b = match (name.as_str(), b) {
                    // A parity as i1: the IR keeps the i32.
                    ("arith.trunci", B::Imm(s)) => B::Imm(s),
                    (_, b) => b,
                };
                self.bind(&n, b);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Thread and block ids, helper calls, and binary and unary arithmetic.
    fn thread_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span, res) = (o.r, o.span, &o.res);
        let name = &o.name;
        match name.as_str() {
            "gpu.thread_id" | "gpu.block_id" | "gpu.block_dim" | "gpu.grid_dim" => {
                let d = match c.word()?.as_str() {
                    "x" => 0,
                    "y" => 1,
                    "z" => 2,
                    _ => return Err(self.unsupported(span, "a dimension other than x, y, z")),
                };
                let sp = match name.as_str() {
                    "gpu.thread_id" => Special::Tid(d),
                    "gpu.block_id" => Special::Bid(d),
                    "gpu.block_dim" => Special::BlockDim(d),
                    _ => Special::GridDim(d),
                };
                let rs = vec![o.one()?];
                self.place(
                    r,
                    OpKind::Special(sp),
                    &rs,
                    &[ScalarType::I32],
                    vec![],
                    span,
                );
            }
            "gpu.lane_id" => {
                let rs = vec![o.one()?];
                self.place(
                    r,
                    OpKind::Special(Special::Lane),
                    &rs,
                    &[ScalarType::I32],
                    vec![],
                    span,
                );
            }
            "func.call" => self.call(c, r, res, span)?,
            "arith.addi" | "arith.addf" | "arith.subi" | "arith.subf" | "arith.muli"
            | "arith.mulf" | "arith.floordivsi" | "arith.divf" | "arith.remf" | "arith.minsi"
            | "arith.minnumf" | "arith.minimumf" | "arith.maxsi" | "arith.maxnumf"
            | "arith.maximumf" | "arith.andi" | "arith.ori" | "arith.xori" => {
                let op = match &name["arith.".len()..] {
                    "addi" | "addf" => BinOp::Add,
                    "subi" | "subf" => BinOp::Sub,
                    "muli" | "mulf" => BinOp::Mul,
                    "floordivsi" | "divf" => BinOp::Div,
                    "remf" => BinOp::Rem,
                    "minsi" | "minnumf" | "minimumf" => BinOp::Min,
                    "maxsi" | "maxnumf" | "maximumf" => BinOp::Max,
                    "andi" => BinOp::And,
                    "ori" => BinOp::Or,
                    _ => BinOp::Xor,
                };
                let a = self.operand(c)?;
                c.expect(',')?;
                let b = self.operand(c)?;
                c.expect(':')?;
                let ty = scalar_ty(&c.ty()?).unwrap_or(ScalarType::I32);
                let rs = vec![o.one()?];
                self.place(r, OpKind::Binary(op, a, b), &rs, &[ty], vec![], span);
            }
            "arith.negf" | "math.exp" | "math.sqrt" | "math.absf" | "math.absi" => {
                let u = match name.as_str() {
                    "arith.negf" => UnOp::Neg,
                    "math.exp" => UnOp::Exp,
                    "math.sqrt" => UnOp::Sqrt,
                    _ => UnOp::Abs,
                };
                let a = self.operand(c)?;
                c.expect(':')?;
                let ty = scalar_ty(&c.ty()?).unwrap_or(ScalarType::F32);
                let rs = vec![o.one()?];
                self.place(r, OpKind::Unary(u, a), &rs, &[ty], vec![], span);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Comparisons, selects and int-to-float conversions.
    fn compare_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        match o.name.as_str() {
            "arith.cmpi" | "arith.cmpf" => {
                let p = match c.word()?.as_str() {
                    "eq" | "oeq" | "ueq" => CmpPred::Eq,
                    "ne" | "one" | "une" => CmpPred::Ne,
                    "slt" | "olt" | "ult" => CmpPred::Lt,
                    "sle" | "ole" | "ule" => CmpPred::Le,
                    "sgt" | "ogt" | "ugt" => CmpPred::Gt,
                    "sge" | "oge" | "uge" => CmpPred::Ge,
                    p => return Err(self.unsupported(span, &format!("the predicate `{p}`"))),
                };
                c.expect(',')?;
                let a = self.operand(c)?;
                c.expect(',')?;
                let b = self.operand(c)?;
                let rs = vec![o.one()?];
                self.place(
                    r,
                    OpKind::Cmp(p, a, b),
                    &rs,
                    &[ScalarType::I1],
                    vec![],
                    span,
                );
            }
            "arith.select" => {
                let cnd = self.operand(c)?;
                c.expect(',')?;
                let a = self.operand(c)?;
                c.expect(',')?;
                let b = self.operand(c)?;
                c.expect(':')?;
                let ty = scalar_ty(&c.ty()?).unwrap_or(ScalarType::I32);
                let rs = vec![o.one()?];
                self.place(r, OpKind::Select(cnd, a, b), &rs, &[ty], vec![], span);
            }
            "arith.sitofp" => {
                let a = self.operand(c)?;
                let rs = vec![o.one()?];
                self.place(
                    r,
                    OpKind::Cast(CastOp::IToF, a),
                    &rs,
                    &[ScalarType::F32],
                    vec![],
                    span,
                );
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `memref.subview`: a view of a shared buffer (or of a view).
    fn subview_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        match o.name.as_str() {
            "memref.subview" => {
                let (bn, bs) = c.val()?;
                let base_b = self.lookup(&bn, bs)?;
                let base = self.mem(&base_b, bs)?;
                let mut offs: Vec<Operand> = Vec::new();
                c.expect('[')?;
                loop {
                    match c.peek() {
                        Some(T::Int(v)) => {
                            offs.push(Operand::int(*v));
                            c.i += 1;
                        }
                        _ => offs.push(self.operand(c)?),
                    }
                    if c.eat(']') {
                        break;
                    }
                    c.expect(',')?;
                }
                let mut sizes = Vec::new();
                c.expect('[')?;
                loop {
                    sizes.push(c.int()? as u64);
                    if c.eat(']') {
                        break;
                    }
                    c.expect(',')?;
                }
                while !c.eat_word("to") {
                    if c.next().is_none() {
                        return c.err("`to`");
                    }
                }
                let rt = c.ty()?;
                let rank = memref_shape(&rt).map(|(s, _)| s.len()).unwrap_or(0);
                let bshape = self.k.shape(base);
                let dropped = bshape.len().saturating_sub(rank);
                let mut idx = Vec::new();
                for o in offs.iter().take(dropped) {
                    idx.push(ViewIndex::At(*o));
                }
                // Ranges up to the last partial one; full dimensions after it stay implicit.
                let last_partial = (dropped..bshape.len())
                    .filter(|&d| {
                        let lo = match offs.get(d) {
                            Some(Operand::Imm(s)) => s.as_i64() as u64,
                            _ => 0,
                        };
                        lo != 0 || sizes.get(d).copied() != Some(bshape[d])
                    })
                    .max();
                // A view must index something: a whole-buffer subview keeps its first range.
                let last_partial = match last_partial {
                    None if dropped == 0 && !bshape.is_empty() => Some(0),
                    lp => lp,
                };
                if let Some(lp) = last_partial {
                    for d in dropped..=lp {
                        let lo = match offs.get(d) {
                            Some(Operand::Imm(s)) => s.as_i64() as u64,
                            _ => {
                                return Err(
                                    self.unsupported(span, "a dynamic offset in a kept dimension")
                                );
                            }
                        };
                        idx.push(ViewIndex::Range(
                            lo,
                            lo + sizes.get(d).copied().unwrap_or(0),
                        ));
                    }
                }
                let (n, _) = o.one()?;
                let (view, op) = self.k.new_view(base, idx);
                self.k.op_spans.set(op, span);
                self.k.view_names.set(view, ir_name(&n));
                self.k.append(r, op);
                self.bind(&n, B::View(view));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `memref.view` of the shared pool and mbarrier arrays (`nvgpu.mbarrier.create`).
    fn buffer_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let span = o.span;
        let name = &o.name;
        match name.as_str() {
            "memref.view" => {
                let (_arena, _) = c.val()?;
                c.expect('[')?;
                let off = self.operand(c)?;
                while !c.eat_word("to") {
                    if c.next().is_none() {
                        return c.err("`to`");
                    }
                }
                let rt = c.ty()?;
                let Some((shape, elem)) = memref_shape(&rt) else {
                    return Err(self.unsupported(span, "a memref.view of this type"));
                };
                let (n, s) = o.one()?;
                let offset = match off {
                    Operand::Imm(x) => x.as_i64() as u64,
                    Operand::Value(_) => {
                        return Err(self.unsupported(span, "a memref.view at a dynamic offset"));
                    }
                };
                let shape = shape.into_iter().map(|d| d.unwrap_or(0)).collect();
                let b = self.k.buffers.push(BufferData {
                    name: ir_name(&n),
                    elem,
                    shape,
                    offset: Some(offset),
                    layout: None,
                });
                self.k.buffer_spans.set(b, s);
                self.bind(&n, B::Buf(b));
            }
            "nvgpu.mbarrier.create" => {
                c.eat_arrow();
                let ty = c.ty()?;
                let count: u64 = ty
                    .split("num_barriers")
                    .nth(1)
                    .and_then(|x| {
                        x.trim_start_matches([' ', '='])
                            .split(|ch: char| !ch.is_ascii_digit())
                            .next()?
                            .parse()
                            .ok()
                    })
                    .unwrap_or(1);
                let (n, s) = o.one()?;
                let b = self.k.buffers.push(BufferData {
                    name: ir_name(&n),
                    elem: ElemType::MBarrier,
                    shape: vec![count],
                    offset: None,
                    layout: None,
                });
                self.k.buffer_spans.set(b, s);
                self.bind(&n, B::Buf(b));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Shared and global loads and stores.
    fn access_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        match o.name.as_str() {
            "memref.load" => {
                let (b, ix, s) = self.access(c)?;
                let rs = vec![o.one()?];
                match b {
                    B::Glob(g) => {
                        let ty = self.k.globals[g].elem.scalar().unwrap_or(ScalarType::I32);
                        self.place(
                            r,
                            OpKind::GLoad {
                                global: g,
                                index: ix,
                            },
                            &rs,
                            &[ty],
                            vec![],
                            span,
                        );
                    }
                    b => {
                        let mem = self.mem(&b, s)?;
                        let ty = self.k.elem(mem).scalar().unwrap_or(ScalarType::I32);
                        self.place(r, OpKind::Load { mem, index: ix }, &rs, &[ty], vec![], span);
                    }
                }
            }
            "memref.store" => {
                let value = self.operand(c)?;
                c.expect(',')?;
                let (b, ix, s) = self.access(c)?;
                match b {
                    B::Glob(g) => self.place(
                        r,
                        OpKind::GStore {
                            global: g,
                            index: ix,
                            value,
                        },
                        &[],
                        &[],
                        vec![],
                        span,
                    ),
                    b => {
                        let mem = self.mem(&b, s)?;
                        self.place(
                            r,
                            OpKind::Store {
                                mem,
                                index: ix,
                                value,
                            },
                            &[],
                            &[],
                            vec![],
                            span,
                        )
                    }
                };
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `memref.atomic_rmw` on shared or global memory.
    fn atomic_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        match o.name.as_str() {
            "memref.atomic_rmw" => {
                let kind = c.word()?;
                let op = match kind.as_str() {
                    "addi" | "addf" => AtomicOp::Add,
                    "mins" | "minnumf" | "minimumf" => AtomicOp::Min,
                    "maxs" | "maxnumf" | "maximumf" => AtomicOp::Max,
                    "assign" => AtomicOp::Exch,
                    "andi" => AtomicOp::And,
                    "ori" => AtomicOp::Or,
                    k => return Err(self.unsupported(span, &format!("the atomic kind `{k}`"))),
                };
                let value = self.operand(c)?;
                c.expect(',')?;
                let (b, ix, s) = self.access(c)?;
                let rs = vec![o.one()?];
                match b {
                    B::Glob(g) => {
                        let ty = self.k.globals[g].elem.scalar().unwrap_or(ScalarType::I32);
                        self.place(
                            r,
                            OpKind::GAtomic {
                                op,
                                global: g,
                                index: ix,
                                value,
                            },
                            &rs,
                            &[ty],
                            vec![],
                            span,
                        );
                    }
                    b => {
                        let mem = self.mem(&b, s)?;
                        let ty = self.k.elem(mem).scalar().unwrap_or(ScalarType::I32);
                        self.place(
                            r,
                            OpKind::Atomic {
                                op,
                                mem,
                                index: ix,
                                value,
                            },
                            &rs,
                            &[ty],
                            vec![],
                            span,
                        );
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Per-thread async copies into shared memory (gather-to-LDS, cp.async).
    fn copy_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        let name = &o.name;
        match name.as_str() {
            "amdgpu.gather_to_lds" | "nvgpu.device_async_copy" => {
                let (sb, src_index, ss) = self.access(c)?;
                c.expect(',')?;
                let (db, dst_index, ds) = self.access(c)?;
                let B::Glob(src) = sb else {
                    return Err(Diagnostic::user(
                        "E0908",
                        "the copy source must be a kernel argument",
                    )
                    .with_label(ss, "here"));
                };
                let dst = self.mem(&db, ds)?;
                if name == "amdgpu.gather_to_lds" {
                    self.place(
                        r,
                        OpKind::GatherToLds {
                            dst,
                            dst_index,
                            src,
                            src_index,
                        },
                        &[],
                        &[],
                        vec![],
                        span,
                    );
                } else {
                    let rs = vec![o.one()?];
                    self.place(
                        r,
                        OpKind::CpAsync {
                            dst,
                            dst_index,
                            src,
                            src_index,
                        },
                        &rs,
                        &[ScalarType::Token],
                        vec![],
                        span,
                    );
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// TMA loads into and stores from shared memory.
    fn tma_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        match o.name.as_str() {
            "nvgpu.tma.async.load" => {
                let (tb, origin, ts) = self.access(c)?;
                let B::Tma(src) = tb else {
                    return Err(self.unsupported(
                        ts,
                        "a TMA load whose descriptor is not a `smemsync.tensor_map` argument",
                    ));
                };
                c.expect(',')?;
                let (mb, mbar_index, ms) = self.access(c)?;
                let mbar = self.mem(&mb, ms)?;
                if !c.eat_word("to") {
                    return c.err("`to`");
                }
                let (d, ds) = c.val()?;
                let dst = self.mem(&self.lookup(&d, ds)?, ds)?;
                self.place(
                    r,
                    OpKind::TmaLoad {
                        dst,
                        src,
                        origin,
                        mbar,
                        mbar_index,
                    },
                    &[],
                    &[],
                    vec![],
                    span,
                );
            }
            "nvgpu.tma.async.store" => {
                let (sname, ss) = c.val()?;
                let src = self.mem(&self.lookup(&sname, ss)?, ss)?;
                if !c.eat_word("to") {
                    return c.err("`to`");
                }
                let (tb, origin, ts) = self.access(c)?;
                let B::Tma(dst) = tb else {
                    return Err(self.unsupported(
                        ts,
                        "a TMA store whose descriptor is not a `smemsync.tensor_map` argument",
                    ));
                };
                self.place(
                    r,
                    OpKind::TmaStore { dst, origin, src },
                    &[],
                    &[],
                    vec![],
                    span,
                );
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// AMD tensor DMA: descriptors and `tensor_load_to_lds`.
    fn tensor_dma_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        match o.name.as_str() {
            "amdgpu.make_dma_base" => {
                let (gb, origin, gs) = self.access(c)?;
                c.expect(',')?;
                let (db, _, ds) = self.access(c)?;
                let B::Glob(g) = gb else {
                    return Err(Diagnostic::user(
                        "E0908",
                        "the DMA source must be a kernel argument",
                    )
                    .with_label(gs, "here"));
                };
                let dst = self.mem(&db, ds)?;
                let (n, _) = o.one()?;
                self.bind(&n, B::Tdm(dst, g, origin));
            }
            "amdgpu.make_dma_descriptor" => {
                let (b, bs) = c.val()?;
                let tdm = self.lookup(&b, bs)?;
                let (n, _) = o.one()?;
                self.bind(&n, tdm);
            }
            "amdgpu.tensor_load_to_lds" => {
                let (d, ds) = c.val()?;
                let B::Tdm(dst, src, origin) = self.lookup(&d, ds)? else {
                    return Err(
                        self.unsupported(ds, "a tensor descriptor not from amdgpu.make_dma_base")
                    );
                };
                self.place(
                    r,
                    OpKind::TdmLoad { dst, src, origin },
                    &[],
                    &[],
                    vec![],
                    span,
                );
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Commits and waits of the async counters and groups.
    fn wait_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span, res) = (o.r, o.span, &o.res);
        let name = &o.name;
        match name.as_str() {
            "nvvm.cp.async.commit.group" | "nvgpu.device_async_create_group" => {
                if let Some((n, _)) = res.first() {
                    self.bind(n, B::Opaque);
                }
                self.place(r, OpKind::CpAsyncCommit, &[], &[], vec![], span);
            }
            "nvvm.cp.async.wait.group" => {
                let n = c.int()? as u32;
                self.place(r, OpKind::CpAsyncWait(n), &[], &[], vec![], span);
            }
            "nvgpu.device_async_wait" => {
                let _ = c.val();
                let attrs = c.opt_dict()?;
                let n = match get(&attrs, "numGroups") {
                    Some(Attr::Int(v)) => *v as u32,
                    _ => 0,
                };
                self.place(r, OpKind::CpAsyncWait(n), &[], &[], vec![], span);
            }
            "nvvm.cp.async.bulk.commit.group" => {
                self.place(r, OpKind::BulkCommit, &[], &[], vec![], span);
            }
            "nvvm.cp.async.bulk.wait_group" => {
                let n = c.int()? as u32;
                self.place(r, OpKind::BulkWait(n), &[], &[], vec![], span);
            }
            "nvvm.wgmma.commit.group.sync.aligned" => {
                self.place(r, OpKind::WgmmaCommit, &[], &[], vec![], span);
            }
            "nvvm.wgmma.wait.group.sync.aligned" => {
                let n = c.int()? as u32;
                self.place(r, OpKind::WgmmaWait(n), &[], &[], vec![], span);
            }
            "amdgpu.memory_counter_wait" => {
                let gfx12 = self.t.gfx12_counters();
                let mut cs = Vec::new();
                while let Some(T::Word(w)) = c.peek().cloned() {
                    c.i += 1;
                    c.expect('(')?;
                    let n = c.int()? as u32;
                    c.expect(')')?;
                    let ctr = match (w.as_str(), gfx12) {
                        ("load", false) => Counter::VmCnt,
                        ("ds", false) => Counter::LgkmCnt,
                        ("load", true) => Counter::LoadCnt,
                        ("store", true) => Counter::StoreCnt,
                        ("ds", true) => Counter::DsCnt,
                        ("exp", _) => Counter::ExpCnt,
                        ("tensor", true) => Counter::TensorCnt,
                        (f, _) => {
                            return Err(self.unsupported(
                                span,
                                &format!("the counter field `{f}` on {}", self.t.name),
                            ));
                        }
                    };
                    cs.push((ctr, n));
                }
                self.place(r, OpKind::WaitCnt(cs), &[], &[], vec![], span);
            }
            "rocdl.s.wait.dscnt"
            | "rocdl.s.wait.loadcnt"
            | "rocdl.s.wait.storecnt"
            | "rocdl.s.wait.asynccnt"
            | "rocdl.s.wait.tensorcnt"
            | "rocdl.s.wait.expcnt" => {
                let ctr = match &name["rocdl.s.wait.".len()..] {
                    "dscnt" => Counter::DsCnt,
                    "loadcnt" => Counter::LoadCnt,
                    "storecnt" => Counter::StoreCnt,
                    "asynccnt" => Counter::AsyncCnt,
                    "tensorcnt" => Counter::TensorCnt,
                    _ => Counter::ExpCnt,
                };
                let n = c.int()? as u32;
                self.place(r, OpKind::WaitCnt(vec![(ctr, n)]), &[], &[], vec![], span);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Barriers (block, named, warp, split) and proxy fences.
    fn barrier_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        let name = &o.name;
        match name.as_str() {
            "nvvm.fence.proxy" => {
                let attrs = c.opt_dict()?;
                let text = |k: &str| match get(&attrs, k) {
                    Some(Attr::Text(t)) => t.clone(),
                    _ => String::new(),
                };
                let (kind, space) = (text("kind"), text("space"));
                if !kind.contains("async.shared") || !(space.is_empty() || space.contains("cta"))
                {
                    return Err(Diagnostic::user(
                        "E0903",
                        "unsupported MLIR op `nvvm.fence.proxy` of this kind",
                    )
                    .with_label(span, "smemsync reads only the async.shared kind at cta scope")
                    .with_note("docs/mlir.md lists the dialect subset smemsync reads"));
                }
                self.place(r, OpKind::FenceProxyAsync, &[], &[], vec![], span);
            }
            "amdgpu.lds_barrier" | "nvvm.barrier0" | "gpu.barrier" => {
                self.place(r, OpKind::Barrier, &[], &[], vec![], span);
            }
            "nvvm.barrier" | "nvvm.barrier.arrive" => {
                if c.peek().is_none() {
                    self.place(r, OpKind::Barrier, &[], &[], vec![], span);
                } else {
                    let mut id = 0u32;
                    let mut count = 0u32;
                    while let Some(T::Word(w)) = c.peek().cloned() {
                        c.i += 1;
                        c.expect('=')?;
                        let v = match self.operand(c)? {
                            Operand::Imm(s) => s.as_i64() as u32,
                            Operand::Value(_) => {
                                return Err(self.unsupported(
                                    span,
                                    "a named barrier with a dynamic id or count",
                                ));
                            }
                        };
                        if w == "id" {
                            id = v;
                        } else {
                            count = v;
                        }
                    }
                    let kind = if name == "nvvm.barrier" {
                        OpKind::NamedSync { id, count }
                    } else {
                        OpKind::NamedArrive { id, count }
                    };
                    self.place(r, kind, &[], &[], vec![], span);
                }
            }
            "nvvm.bar.warp.sync" | "llvm.fence" => {
                self.place(r, OpKind::WarpSync, &[], &[], vec![], span);
            }
            "rocdl.s.barrier.signal" | "rocdl.s.barrier.wait" => {
                c.eat_word("id");
                c.eat('=');
                let id = c.int()? as i32;
                let kind = if name.ends_with("signal") {
                    OpKind::SplitSignal(id)
                } else {
                    OpKind::SplitWait(id)
                };
                self.place(r, kind, &[], &[], vec![], span);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// mbarrier init, arrive and wait.
    fn mbarrier_init_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span, res) = (o.r, o.span, &o.res);
        let name = &o.name;
        match name.as_str() {
            "nvgpu.mbarrier.init"
            | "nvgpu.mbarrier.arrive"
            | "nvgpu.mbarrier.arrive.expect_tx"
            | "nvgpu.mbarrier.try_wait.parity"
            | "nvgpu.mbarrier.get" => {
                let (b, ix, s) = self.access(c)?;
                let mem = self.mem(&b, s)?;
                let MemRef::Buffer(buf) = mem else {
                    return Err(self.unsupported(span, "an mbarrier group that is not an array"));
                };
                let index = ix;
                match name.as_str() {
                    "nvgpu.mbarrier.init" => {
                        c.expect(',')?;
                        let count = self.imm(c, span)?;
                        self.place(
                            r,
                            OpKind::MbarInit {
                                mbar: mem,
                                index,
                                count,
                            },
                            &[],
                            &[],
                            vec![],
                            span,
                        );
                    }
                    "nvgpu.mbarrier.arrive" => {
                        if let Some((n, _)) = res.first() {
                            self.bind(n, B::Opaque);
                        }
                        self.place(
                            r,
                            OpKind::MbarArrive {
                                mbar: mem,
                                index,
                                tx: None,
                            },
                            &[],
                            &[],
                            vec![],
                            span,
                        );
                    }
                    "nvgpu.mbarrier.arrive.expect_tx" => {
                        c.expect(',')?;
                        let b = self.imm(c, span)?;
                        self.place(
                            r,
                            OpKind::MbarArrive {
                                mbar: mem,
                                index,
                                tx: Some(b),
                            },
                            &[],
                            &[],
                            vec![],
                            span,
                        );
                    }
                    "nvgpu.mbarrier.get" => {
                        let (n, _) = o.one()?;
                        let i0 = index.first().copied().unwrap_or(Operand::int(0));
                        self.bind(&n, B::MbarPtr(buf, i0));
                    }
                    _ => {
                        c.expect(',')?;
                        let parity = match self.operand(c)? {
                            Operand::Imm(s) => Operand::Imm(Scalar::I32(s.as_i64() as i32)),
                            v => v,
                        };
                        self.place(
                            r,
                            OpKind::MbarWait {
                                mbar: mem,
                                index,
                                parity,
                            },
                            &[],
                            &[],
                            vec![],
                            span,
                        );
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// mbarrier expect-tx and invalidate.
    fn mbarrier_tx_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        let name = &o.name;
        match name.as_str() {
            "nvvm.mbarrier.expect_tx" | "nvvm.mbarrier.inval" => {
                let (p, ps) = c.val()?;
                let B::MbarPtr(buf, i0) = self.lookup(&p, ps)? else {
                    return Err(
                        self.unsupported(ps, "an mbarrier pointer not from nvgpu.mbarrier.get")
                    );
                };
                let mbar = MemRef::Buffer(buf);
                if name.ends_with("inval") {
                    self.place(
                        r,
                        OpKind::MbarInval {
                            mbar,
                            index: vec![i0],
                        },
                        &[],
                        &[],
                        vec![],
                        span,
                    );
                } else {
                    c.expect(',')?;
                    let bytes = self.imm(c, span)?;
                    self.place(
                        r,
                        OpKind::MbarExpectTx {
                            mbar,
                            index: vec![i0],
                            bytes,
                        },
                        &[],
                        &[],
                        vec![],
                        span,
                    );
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Region terminators (`scf.yield`, `scf.condition`) and `gpu.return`.
    fn control_op(&mut self, c: &mut Cur<'a>, o: &OpLine) -> R<bool> {
        let (r, span) = (o.r, o.span);
        match o.name.as_str() {
            "scf.yield" => {
                let mut vs = Vec::new();
                while let Some(T::Val(_)) = c.peek() {
                    let (n, s) = c.val()?;
                    vs.push((n, s));
                    if !c.eat(',') {
                        break;
                    }
                }
                match o.mode {
                    Mode::Stage => {
                        let mut bs = Vec::new();
                        for (n, s) in vs {
                            bs.push(self.lookup(&n, s)?);
                        }
                        self.stage_yield = bs;
                    }
                    Mode::Normal => {
                        if !vs.is_empty() {
                            let mut ops = Vec::new();
                            for (n, s) in vs {
                                ops.push(match self.lookup(&n, s)? {
                                    B::Val(v) => Operand::Value(v),
                                    B::Imm(x) => Operand::Imm(x),
                                    _ => return Err(self.unsupported(s, "yielding a non-scalar")),
                                });
                            }
                            self.place(r, OpKind::Yield(ops), &[], &[], vec![], span);
                        }
                    }
                }
            }
            "scf.condition" => {
                c.expect('(')?;
                let cnd = self.operand(c)?;
                self.place(r, OpKind::Condition(cnd), &[], &[], vec![], span);
            }
            "gpu.return" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn imm(&self, c: &mut Cur, span: Span) -> R<u32> {
        match self.operand(c)? {
            Operand::Imm(s) => Ok(s.as_i64() as u32),
            Operand::Value(_) => {
                Err(self.unsupported(span, "a dynamic count where smemsync needs a constant"))
            }
        }
    }

    /// A `func.call` to one of the helpers the MLIR emitter writes: a collective access, a
    /// gather, a named computation (by attribute), or a helper computing one op (by name).
    fn call(&mut self, c: &mut Cur, r: Region, res: &[(String, Span)], span: Span) -> R<()> {
        let callee = match c.next().map(|t| &t.t) {
            Some(T::Sym(s)) => s.clone(),
            _ => return c.err("a callee"),
        };
        let items = self.call_args(c)?;
        let attrs = c.opt_dict()?;
        c.expect(':')?;
        let _arg_tys = c.ty_list()?;
        c.eat_arrow();
        let res_tys: Vec<ScalarType> = c.ty_list()?.iter().filter_map(|t| scalar_ty(t)).collect();
        let res_v: Vec<(String, Span)> = res.to_vec();
        // The scalar arguments, in order.
        let args: Vec<Operand> = items
            .iter()
            .filter_map(|(b, _)| match b {
                B::Val(v) => Some(Operand::Value(*v)),
                B::Imm(x) => Some(Operand::Imm(*x)),
                _ => None,
            })
            .collect();
        let site = CallSite {
            r,
            span,
            items: &items,
            args: &args,
            res: &res_v,
            res_tys: &res_tys,
        };
        if let Some(kind) = get_str(&attrs, "smemsync.collective") {
            let layout = get_str(&attrs, "smemsync.layout");
            return self.collective_call(&site, &kind, layout);
        }
        if get(&attrs, "smemsync.gather_to_lds").is_some() {
            return self.gather_call(&site);
        }
        if let Some(name) = get_str(&attrs, "smemsync.compute") {
            let kind = OpKind::Compute { name, args };
            self.place(r, kind, &res_v, &res_tys, vec![], span);
            return Ok(());
        }
        let kind = self.helper_op(&callee, &attrs, &args, span)?;
        self.place(r, kind, &res_v, &res_tys, vec![], span);
        Ok(())
    }

    /// A call's arguments, bound: scalars and memrefs alike, with their spans.
    fn call_args(&self, c: &mut Cur) -> R<Vec<(B, Span)>> {
        c.expect('(')?;
        let mut items: Vec<(B, Span)> = Vec::new();
        if !c.eat(')') {
            loop {
                let (n, s) = c.val()?;
                items.push((self.lookup(&n, s)?, s));
                if c.eat(')') {
                    break;
                }
                c.expect(',')?;
            }
        }
        Ok(items)
    }

    /// A collective helper call (`smemsync.collective`): a `local_store` of its first scalar,
    /// or a `local_load`, on its first memref argument.
    fn collective_call(&mut self, site: &CallSite, kind: &str, layout: Option<String>) -> R<()> {
        let CallSite {
            r,
            span,
            items,
            args,
            res,
            res_tys,
        } = *site;
        let first_mem = items
            .iter()
            .find(|(b, _)| !matches!(b, B::Val(_) | B::Imm(_)));
        let Some((mb, ms)) = first_mem else {
            return Err(self.unsupported(span, "a collective helper without a memref"));
        };
        let mem = self.mem(mb, *ms)?;
        if kind == "local_store" {
            let value = args.first().copied().unwrap_or(Operand::int(0));
            self.place(
                r,
                OpKind::LocalStore { mem, value, layout },
                &[],
                &[],
                vec![],
                span,
            );
        } else {
            self.place(
                r,
                OpKind::LocalLoad { mem, layout },
                res,
                res_tys,
                vec![],
                span,
            );
        }
        Ok(())
    }

    /// A gather helper call (`smemsync.gather_to_lds`): its arguments are the source global,
    /// the source indices, the shared destination and the destination indices.
    fn gather_call(&mut self, site: &CallSite) -> R<()> {
        let CallSite { r, span, items, .. } = *site;
        // (src, src indices..., dst, dst indices...)
        let split = items
            .iter()
            .skip(1)
            .position(|(b, _)| !matches!(b, B::Val(_) | B::Imm(_)))
            .map(|p| p + 1);
        let (Some((B::Glob(src), _)), Some(sp)) = (items.first().cloned(), split) else {
            return Err(self.unsupported(
                span,
                "a gather helper call without a global and a shared memref",
            ));
        };
        let operand = |b: &B| match b {
            B::Val(v) => Operand::Value(*v),
            B::Imm(x) => Operand::Imm(*x),
            _ => Operand::int(0),
        };
        let src_index: Vec<Operand> = items[1..sp].iter().map(|(b, _)| operand(b)).collect();
        let (db, ds) = items[sp].clone();
        let dst = self.mem(&db, ds)?;
        let dst_index: Vec<Operand> = items[sp + 1..].iter().map(|(b, _)| operand(b)).collect();
        self.place(
            r,
            OpKind::GatherToLds {
                dst,
                dst_index,
                src,
                src_index,
            },
            &[],
            &[],
            vec![],
            span,
        );
        Ok(())
    }

    /// The op a helper named `callee` computes (thread ids, floor `rem`, shifts, float to
    /// int, group membership).
    fn helper_op(
        &self,
        callee: &str,
        attrs: &[(String, Attr)],
        args: &[Operand],
        span: Span,
    ) -> R<OpKind> {
        let two = |args: &[Operand]| {
            (
                args.first().copied().unwrap_or(Operand::int(0)),
                args.get(1).copied().unwrap_or(Operand::int(0)),
            )
        };
        Ok(match callee {
            "__smemsync_tid_linear" => OpKind::Special(Special::LinearTid),
            "__smemsync_lane" => OpKind::Special(Special::Lane),
            "__smemsync_warp" => OpKind::Special(Special::Warp),
            "__smemsync_rem_i32" => {
                let (a, b) = two(args);
                OpKind::Binary(BinOp::Rem, a, b)
            }
            "__smemsync_shl_i32" => {
                let (a, b) = two(args);
                OpKind::Binary(BinOp::Shl, a, b)
            }
            "__smemsync_shr_i32" => {
                let (a, b) = two(args);
                OpKind::Binary(BinOp::Shr, a, b)
            }
            "__smemsync_ftoi" => OpKind::Cast(
                CastOp::FToI,
                args.first().copied().unwrap_or(Operand::int(0)),
            ),
            "__smemsync_in_group" => {
                let gname = get_str(attrs, "smemsync.group").unwrap_or_default();
                let Some((g, _)) = self.k.groups.iter().find(|(_, gd)| gd.name == gname) else {
                    return Err(self.unsupported(
                        span,
                        &format!("the thread group `{gname}` (not in smemsync.groups)"),
                    ));
                };
                OpKind::InGroup(g)
            }
            other => return Err(self.unsupported(span, &format!("a call to `@{other}`"))),
        })
    }

    fn iter_list(&self, c: &mut Cur) -> R<Vec<(String, Span, Operand)>> {
        let mut v = Vec::new();
        c.expect('(')?;
        if c.eat(')') {
            return Ok(v);
        }
        loop {
            let (n, s) = c.val()?;
            c.expect('=')?;
            let o = self.operand(c)?;
            v.push((n, s, o));
            if c.eat(')') {
                return Ok(v);
            }
            c.expect(',')?;
        }
    }

    fn arg_values(&mut self, region: Region, names: &[(String, Span)], tys: &[ScalarType]) {
        for (i, ((n, s), t)) in names.iter().zip(tys).enumerate() {
            let v = self.k.new_value(*t, ValueDef::RegionArg(region, i));
            self.k.push_region_arg(region, v);
            self.k.value_names.set(v, ir_name(n));
            self.k.value_spans.set(v, *s);
            self.env.insert(n.clone(), B::Val(v));
        }
    }

    fn for_op(
        &mut self,
        i: usize,
        c: &mut Cur,
        r: Region,
        res: &[(String, Span)],
        span: Span,
    ) -> R<usize> {
        let (iv, ivs) = c.val()?;
        c.expect('=')?;
        let lo = self.operand(c)?;
        if !c.eat_word("to") {
            return c.err("`to`");
        }
        let hi = self.operand(c)?;
        if !c.eat_word("step") {
            return c.err("`step`");
        }
        let step = self.operand(c)?;
        let iters = if c.eat_word("iter_args") {
            self.iter_list(c)?
        } else {
            Vec::new()
        };
        let mut tys = Vec::new();
        if c.eat_arrow() {
            tys = c
                .ty_list()?
                .iter()
                .map(|t| scalar_ty(t).unwrap_or(ScalarType::I32))
                .collect();
        }
        let body = self.k.new_region();
        let mut names = vec![(iv, ivs)];
        let mut all_tys = vec![ScalarType::I32];
        for (n, s, _) in &iters {
            names.push((n.clone(), *s));
        }
        all_tys.extend(tys.iter().copied());
        self.arg_values(body, &names, &all_tys);
        let init: Vec<Operand> = iters.iter().map(|x| x.2).collect();
        let (_, next) = self.region(i + 1, body, Mode::Normal)?;
        self.place(
            r,
            OpKind::For { lo, hi, step, init },
            res,
            &tys,
            vec![body],
            span,
        );
        Ok(next)
    }

    fn if_op(
        &mut self,
        i: usize,
        c: &mut Cur,
        r: Region,
        res: &[(String, Span)],
        span: Span,
    ) -> R<usize> {
        let cond = self.operand(c)?;
        let mut tys = Vec::new();
        if c.eat_arrow() {
            tys = c
                .ty_list()?
                .iter()
                .map(|t| scalar_ty(t).unwrap_or(ScalarType::I32))
                .collect();
        }
        let then_r = self.k.new_region();
        let else_r = self.k.new_region();
        let (close, mut next) = self.region(i + 1, then_r, Mode::Normal)?;
        if self.lines[close].word(1) == Some("else") {
            let (_, n2) = self.region(close + 1, else_r, Mode::Normal)?;
            next = n2;
        }
        self.place(
            r,
            OpKind::If { cond },
            res,
            &tys,
            vec![then_r, else_r],
            span,
        );
        Ok(next)
    }

    fn while_op(
        &mut self,
        i: usize,
        c: &mut Cur,
        r: Region,
        res: &[(String, Span)],
        span: Span,
    ) -> R<usize> {
        let iters = if c.peek() == Some(&T::P('(')) {
            self.iter_list(c)?
        } else {
            Vec::new()
        };
        c.expect(':')?;
        let tys: Vec<ScalarType> = c.ty_list()?.iter().filter_map(|t| scalar_ty(t)).collect();
        let before = self.k.new_region();
        let names: Vec<(String, Span)> = iters.iter().map(|(n, s, _)| (n.clone(), *s)).collect();
        self.arg_values(before, &names, &tys);
        let init: Vec<Operand> = iters.iter().map(|x| x.2).collect();
        let (close, _) = self.region(i + 1, before, Mode::Normal)?;
        if self.lines[close].word(1) != Some("do") {
            return Err(self.unsupported(self.lines[close].span, "a scf.while without `do`"));
        }
        let after = self.k.new_region();
        let mut j = close + 1;
        let mut anames = Vec::new();
        if let Some(T::Caret(_)) = self.lines.get(j).and_then(|l| l.toks.first()).map(|t| &t.t) {
            let mut bc = self.cur(j);
            bc.next();
            bc.expect('(')?;
            if !bc.eat(')') {
                loop {
                    let (n, s) = bc.val()?;
                    bc.expect(':')?;
                    bc.ty()?;
                    anames.push((n, s));
                    if bc.eat(')') {
                        break;
                    }
                    bc.expect(',')?;
                }
            }
            j += 1;
        }
        self.arg_values(after, &anames, &tys);
        let (_, next) = self.region(j, after, Mode::Normal)?;
        self.place(
            r,
            OpKind::While { init },
            res,
            &tys,
            vec![before, after],
            span,
        );
        Ok(next)
    }

    fn stage(
        &mut self,
        i: usize,
        _c: &mut Cur,
        r: Region,
        res: &[(String, Span)],
        span: Span,
    ) -> R<usize> {
        let body = self.k.new_region();
        let op = self.k.new_op(
            OpKind::Stage {
                name: String::new(),
            },
            &[],
            vec![body],
        );
        self.k.op_spans.set(op, span);
        self.k.append(r, op);
        self.stage_yield.clear();
        let (close, next) = self.region(i + 1, body, Mode::Stage)?;
        let mut cc = self.cur(close);
        cc.expect('}')?;
        let attrs = cc.opt_dict()?;
        let name = get_str(&attrs, "smemsync.stage").unwrap_or_default();
        self.k.ops[op].kind = OpKind::Stage { name };
        let ys = std::mem::take(&mut self.stage_yield);
        for ((n, _), b) in res.iter().zip(ys) {
            self.bind(n, b);
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_input_gives_diagnostics_not_panics() {
        let k = crate::reader::parse_kernel(
            "kernel @k(%n: i32, %A: global f32[%n]) block(64) {\n  shared @s : f32[64]\n  %t = tid.x\n  %x = gload %A[%t]\n  store @s[%t], %x\n  barrier\n  %r = for %i = 0 to %n step 1 iter(%a = 0.0) {\n    %y = load @s[%i]\n    %b = add %a, %y\n    yield %b\n  }\n  gstore %A[%t], %r\n}\n",
        )
        .expect("parses");
        let t = Target::from_name("gfx942").expect("target");
        let text = crate::emit::mlir::emit_mlir(&k, &t).expect("emits");
        assert!(import_mlir(&text, &t).is_ok());
        // Every prefix, and every line dropped or byte replaced, must import or fail cleanly.
        let bytes = text.as_bytes();
        for cut in (0..bytes.len()).step_by(7) {
            let _ = import_mlir(&String::from_utf8_lossy(&bytes[..cut]), &t);
        }
        let lines: Vec<&str> = text.lines().collect();
        for skip in 0..lines.len() {
            let s: Vec<&str> = lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, l)| *l)
                .collect();
            let _ = import_mlir(&s.join("\n"), &t);
        }
        for (i, junk) in (0..bytes.len()).step_by(13).zip(
            ['%', '{', '}', '"', '<', '>', '(', ')', '[', ']', '-', '0']
                .iter()
                .cycle(),
        ) {
            let mut m = text.clone().into_bytes();
            m[i] = *junk as u8;
            let _ = import_mlir(&String::from_utf8_lossy(&m), &t);
        }
    }

    #[test]
    fn unknown_ops_are_reported_with_their_line() {
        let src = "gpu.module @m {\n  gpu.func @k() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {\n    %x = gpu.thread_id x\n    vector.print %x : index\n    gpu.return\n  }\n}\n";
        let t = Target::from_name("gfx942").expect("target");
        let d = import_mlir(src, &t).expect_err("vector.print is outside the subset");
        let line = d[0]
            .primary_span()
            .and_then(|s| crate::diag::line_number(src, s));
        assert_eq!(line, Some(4), "{d:?}");
        assert!(d[0].message.contains("vector.print"));
    }

    #[test]
    fn reads_mlir_opt_style_names_and_constants() {
        let src = "module {\n  gpu.module @m {\n    gpu.func @k(%arg0: memref<64xf32>) workgroup(%arg1 : memref<64xf32, #gpu.address_space<workgroup>>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {\n      %thread_id_x = gpu.thread_id  x\n      %c63 = arith.constant 63 : index\n      %0 = memref.load %arg0[%thread_id_x] : memref<64xf32>\n      memref.store %0, %arg1[%thread_id_x] : memref<64xf32, #gpu.address_space<workgroup>>\n      nvvm.barrier0\n      %1 = memref.load %arg1[%c63] : memref<64xf32, #gpu.address_space<workgroup>>\n      memref.store %1, %arg0[%thread_id_x] : memref<64xf32>\n      gpu.return\n    }\n  }\n}\n";
        let t = Target::from_name("sm_80").expect("target");
        let ks = import_mlir(src, &t).expect("imports");
        let text = crate::emit::text::print_kernel(&ks[0]);
        assert!(text.contains("barrier"), "{text}");
        assert!(text.contains("load @arg1[63]"), "{text}");
        assert!(text.contains("block(64)"), "{text}");
    }
}
