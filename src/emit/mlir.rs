//! The MLIR emitter: writes a kernel as a `gpu.module` holding one `gpu.func ... kernel` in
//! the upstream dialects (gpu, scf, arith, math, memref, amdgpu, rocdl, nvgpu, nvvm) that
//! MLIR/LLVM 22 verifies and lowers to AMD and NVIDIA ISA. `docs/mlir.md` gives the mapping.
//!
//! Shape of the output:
//! - global buffers are memref arguments (symbolic dimensions are dynamic, and the argument
//!   attribute `smemsync.dims` gives the positions of the scalar parameters they come from);
//!   scalar
//!   parameters are `i32`/`f32` arguments; unpinned shared buffers are `workgroup(...)`
//!   attributions; pinned buffers are `memref.view`s into one byte arena attribution, so
//!   that their overlap (aliasing) is preserved; NVIDIA mbarrier arrays are
//!   `nvgpu.mbarrier.create` groups.
//! - every IR op becomes one MLIR op (plus conversions: index casts, element widening and
//!   narrowing, immediates as `arith.constant {smemsync.imm}`), named after the IR value;
//!   `tdm_load` is the fixed triple make_dma_base / make_dma_descriptor /
//!   tensor_load_to_lds. Ops whose semantics need several instructions (floor remainder,
//!   shifts modulo 32, saturating `ftoi`, linear thread id, lane, warp, `in_group`, `compute`,
//!   the collective `local_load`/`local_store`, gfx1250 `gather_to_lds`) are calls to private
//!   helper functions defined in the same `gpu.module`, so that the importer
//!   (`reader::mlir`) reads each back as one op.
//! - sync ops per target (amdgpu.lds_barrier, rocdl split barriers, memory_counter_wait,
//!   nvvm barriers, cp.async groups, nvgpu mbarriers); an op a target cannot express is a
//!   diagnostic on that op's span, never a panic.
//!
//! Names: every IR value and view keeps its name (or a fresh `vN`/`viewN`; a name starting
//! with a digit, which MLIR rejects, gets a `v` prefix); helper values get names derived from
//! their base plus a counter, checked against every name already used, so the output is
//! deterministic and collision-free. `emit(import(emit(k)))` equals `emit(k)`.
//! Complexity: O(ops + operands).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use crate::diag::Diagnostic;
use super::lane_contiguous::LaneContiguity;
use super::names::NameTable;
use crate::ir::*;
use crate::ir::signature::{Feature, Results};
use crate::target::Target;
use crate::verify::target_ops::has;

/// The MLIR address-space attribute of shared memory.
pub const WORKGROUP: &str = "#gpu.address_space<workgroup>";
/// The MLIR address-space attribute of global memory on AMD targets.
pub const GLOBAL_AMD: &str = "#gpu.address_space<global>";
/// Ticks a `try_wait.parity` spins for before retrying (the lowering loops until success).
pub const MBAR_TICKS: u32 = 10_000_000;

/// Emits one kernel as a `gpu.module` for `target`.
pub fn emit_mlir(k: &Kernel, target: &Target) -> Result<String, Vec<Diagnostic>> {
    Emitter::new(k, target).run()
}

/// Emits several kernels, one `gpu.module` each, separated by a blank line.
pub fn emit_mlir_kernels(ks: &[Kernel], target: &Target) -> Result<String, Vec<Diagnostic>> {
    let mut out = Vec::new();
    let mut errs = Vec::new();
    for k in ks {
        match emit_mlir(k, target) {
            Ok(s) => out.push(s),
            Err(d) => errs.extend(d),
        }
    }
    if errs.is_empty() {
        Ok(out.join("\n"))
    } else {
        Err(errs)
    }
}

/// The MLIR name of an element type.
pub fn elem_mlir(e: ElemType) -> &'static str {
    match e {
        ElemType::I8 => "i8",
        ElemType::I16 => "i16",
        ElemType::I32 => "i32",
        ElemType::F16 => "f16",
        ElemType::BF16 => "bf16",
        ElemType::F32 => "f32",
        ElemType::MBarrier => "i64",
    }
}

/// The MLIR type of a per-thread scalar.
fn scalar_mlir(t: ScalarType) -> &'static str {
    match t {
        ScalarType::I1 => "i1",
        ScalarType::I32 => "i32",
        ScalarType::F32 => "f32",
        ScalarType::Token => "!nvgpu.device.async.token",
    }
}

/// A float literal MLIR reads back bit-exactly: decimal when Rust's shortest form has a
/// point and no exponent, the bit pattern in hex otherwise.
pub fn f32_literal(v: f32) -> String {
    let s = format!("{v:?}");
    if v.is_finite() && s.contains('.') && !s.contains('e') {
        s
    } else {
        format!("0x{:08X}", v.to_bits())
    }
}

/// A shared memref's layout: shape, strides and offset (None = dynamic) in elements.
#[derive(Clone, Debug, PartialEq)]
struct MemType {
    shape: Vec<u64>,
    strides: Vec<u64>,
    offset: Option<u64>,
    elem: ElemType,
    /// Row-major with offset 0 and no layout attribute.
    identity: bool,
}

impl MemType {
    fn identity(shape: &[u64], elem: ElemType) -> MemType {
        let mut strides = vec![1u64; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * shape[i + 1];
        }
        MemType {
            shape: shape.to_vec(),
            strides,
            offset: Some(0),
            elem,
            identity: true,
        }
    }
    fn render(&self) -> String {
        let mut s = String::from("memref<");
        for d in &self.shape {
            let _ = write!(s, "{d}x");
        }
        s.push_str(elem_mlir(self.elem));
        if !self.identity {
            let st: Vec<String> = self.strides.iter().map(|x| x.to_string()).collect();
            let off = self.offset.map_or("?".to_string(), |o| o.to_string());
            let _ = write!(s, ", strided<[{}], offset: {off}>", st.join(", "));
        }
        let _ = write!(s, ", {WORKGROUP}>");
        s
    }
}

struct Emitter<'a> {
    k: &'a Kernel,
    t: &'a Target,
    out: String,
    diags: Vec<Diagnostic>,
    /// Every name taken (source names first), and the suffixes `fresh` tries next.
    names: NameTable,
    /// The name a use of each value refers to (without `%`).
    vname: SecondaryMap<Value, String>,
    view_name: SecondaryMap<View, String>,
    view_ty: HashMap<View, MemType>,
    buf_name: SecondaryMap<Buffer, String>,
    global_name: SecondaryMap<Global, String>,
    /// Helper functions used, by symbol, with their text.
    helpers: BTreeMap<String, String>,
    depth: usize,
    /// An `index`-typed name already holding a value (thread and block ids).
    idx_name: SecondaryMap<Value, String>,
    /// The interpreter's layout number of each collective access (docs/ir.md, section 3).
    layouts: HashMap<Op, u32>,
    /// Collective helpers by (kind, layout number, memref type).
    /// Collective helpers emitted: (store, layout number, layout threads, memref type).
    collectives: Vec<(bool, u32, crate::ir::layout::LayoutThreads, String)>,
    /// gfx1250 gather helpers by (global type, shared type).
    gathers: Vec<String>,
    /// TMA descriptors: global, box shape, the descriptor value's name.
    tmaps: Vec<(Global, Vec<u64>, String)>,
    parents: &'a Parents,
    /// What decides whether a gfx9 `gather_to_lds`'s destination is lane-contiguous, built
    /// at the first such copy.
    lanes: Option<LaneContiguity<'a>>,
}

impl<'a> Emitter<'a> {
    fn new(k: &'a Kernel, t: &'a Target) -> Self {
        let mut e = Emitter {
            k,
            t,
            out: String::new(),
            diags: Vec::new(),
            names: NameTable::with_source_names(k),
            vname: SecondaryMap::default(),
            view_name: SecondaryMap::default(),
            view_ty: HashMap::new(),
            buf_name: SecondaryMap::default(),
            global_name: SecondaryMap::default(),
            helpers: BTreeMap::new(),
            layouts: k.layout_ids(t.warp),
            collectives: Vec::new(),
            gathers: Vec::new(),
            tmaps: Vec::new(),
            parents: k.parents(),
            lanes: None,
            depth: 1,
            idx_name: SecondaryMap::default(),
        };
        // MLIR names may not start with a digit followed by letters; such IR names get a `v`.
        let ssa = |e: &mut Emitter, n: &str, empty: &str| -> String {
            if n.is_empty() {
                e.fresh(empty)
            } else if n.starts_with(|c: char| c.is_ascii_digit()) {
                e.fresh(&format!("v{n}"))
            } else {
                n.to_string()
            }
        };
        for v in k.values.keys() {
            let n = ssa(&mut e, k.value_names.get(v), "v");
            e.vname.set(v, n);
        }
        for v in k.views.keys() {
            let n = ssa(&mut e, k.view_names.get(v), "view");
            e.view_name.set(v, n);
        }
        for (g, gd) in k.globals.iter() {
            let n = ssa(&mut e, &gd.name, "global");
            e.global_name.set(g, n);
        }
        for (b, bd) in k.buffers.iter() {
            let base = if bd.name.starts_with(|c: char| c.is_ascii_digit()) {
                format!("v{}", bd.name)
            } else {
                bd.name.clone()
            };
            let n = e.fresh(&base);
            e.buf_name.set(b, n);
        }
        e
    }

    /// A fresh name `base`, `base_1`, `base_2`, ... not used before.
    fn fresh(&mut self, base: &str) -> String {
        self.names.unique(base)
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn err(&mut self, op: Op, msg: impl Into<String>) {
        let msg = msg.into();
        let span = self.k.span(op);
        let d = Diagnostic::user("E0800", format!("{msg} on target {}", self.t.name))
            .with_label(span, "this op cannot be emitted as MLIR for this target")
            .with_note("docs/mlir.md lists what each target expresses");
        self.diags.push(d);
        self.line(&format!("// not expressible: {}", msg.replace('\n', " ")));
    }

    fn amd(&self) -> bool {
        self.t.is_amd()
    }

    fn global_ty(&self, g: Global) -> String {
        let gd = &self.k.globals[g];
        let mut s = String::from("memref<");
        for d in &gd.shape {
            match d {
                Dim::Const(c) => {
                    let _ = write!(s, "{c}x");
                }
                Dim::Param(_) => s.push_str("?x"),
            }
        }
        s.push_str(elem_mlir(gd.elem));
        if self.amd() {
            let _ = write!(s, ", {GLOBAL_AMD}");
        }
        s.push('>');
        s
    }

    fn mem_ty(&self, m: MemRef) -> MemType {
        match m {
            MemRef::Buffer(b) => {
                let bd = &self.k.buffers[b];
                MemType::identity(&bd.shape, bd.elem)
            }
            MemRef::View(v) => self
                .view_ty
                .get(&v)
                .cloned()
                .unwrap_or_else(|| MemType::identity(&self.k.shape(m), self.k.elem(m))),
        }
    }

    fn mem_name(&self, m: MemRef) -> String {
        match m {
            MemRef::Buffer(b) => format!("%{}", self.buf_name.get(b)),
            MemRef::View(v) => format!("%{}", self.view_name.get(v)),
        }
    }

    // ---- operands ----

    fn imm_const(&mut self, s: Scalar, ty: ScalarType) -> String {
        let (base, lit, tys) = match (ty, s) {
            (ScalarType::F32, _) => {
                let v = s.as_f32();
                ("cst", f32_literal(v), "f32")
            }
            (ScalarType::I1, _) => {
                let b = s.truthy();
                (if b { "true" } else { "false" }, b.to_string(), "i1")
            }
            _ => ("c", s.as_i64().to_string(), "i32"),
        };
        let base = if base == "c" {
            format!("c{}_i32", lit.replace('-', "m"))
        } else {
            base.to_string()
        };
        let n = self.fresh(&base);
        if tys == "i1" {
            self.line(&format!("%{n} = arith.constant {{smemsync.imm}} {lit}"));
        } else {
            self.line(&format!(
                "%{n} = arith.constant {{smemsync.imm}} {lit} : {tys}"
            ));
        }
        format!("%{n}")
    }

    /// An operand as an MLIR value of type `ty`.
    fn val(&mut self, o: &Operand, ty: ScalarType) -> String {
        match o {
            Operand::Value(v) => format!("%{}", self.vname.get(*v)),
            Operand::Imm(s) => self.imm_const(*s, ty),
        }
    }

    fn ty_of(&self, o: &Operand) -> ScalarType {
        match o {
            Operand::Value(v) => self.k.values[*v].ty,
            Operand::Imm(s) => s.ty(),
        }
    }

    /// An `index`-typed value for an index operand.
    fn index(&mut self, o: &Operand) -> String {
        match o {
            Operand::Value(v) => {
                let known = self.idx_name.get(*v);
                if !known.is_empty() {
                    return format!("%{known}");
                }
                let src = self.vname.get(*v).clone();
                let n = self.fresh(&format!("{src}_idx"));
                self.line(&format!("%{n} = arith.index_cast %{src} : i32 to index"));
                format!("%{n}")
            }
            Operand::Imm(s) => self.index_const(s.as_i64()),
        }
    }

    fn index_const(&mut self, c: i64) -> String {
        let n = self.fresh(&format!("c{}", c.to_string().replace('-', "m")));
        self.line(&format!("%{n} = arith.constant {c} : index"));
        format!("%{n}")
    }

    fn indices(&mut self, os: &[Operand]) -> String {
        let v: Vec<String> = os.iter().map(|o| self.index(o)).collect();
        v.join(", ")
    }

    fn res(&self, op: Op, i: usize) -> String {
        let v = self.k.ops[op].results[i];
        format!("%{}", self.vname.get(v))
    }

    fn has_res(&self, op: Op) -> bool {
        !self.k.ops[op].results.is_empty()
    }

    // ---- helpers ----

    fn helper(&mut self, name: &str, text: impl FnOnce(&Kernel, &Target) -> String) -> String {
        if !self.helpers.contains_key(name) {
            let t = text(self.k, self.t);
            self.helpers.insert(name.to_string(), t);
        }
        format!("@{name}")
    }

    fn tid_linear_helper(&mut self) {
        self.helper("__smemsync_tid_linear", |k, _| {
            let bx = k.block[0];
            let bxy = k.block[0] * k.block[1];
            format!(
                "func.func private @__smemsync_tid_linear() -> i32 {{\n\
                 \x20 %x = gpu.thread_id x\n\
                 \x20 %y = gpu.thread_id y\n\
                 \x20 %z = gpu.thread_id z\n\
                 \x20 %bx = arith.constant {bx} : index\n\
                 \x20 %bxy = arith.constant {bxy} : index\n\
                 \x20 %ys = arith.muli %y, %bx : index\n\
                 \x20 %zs = arith.muli %z, %bxy : index\n\
                 \x20 %s0 = arith.addi %x, %ys : index\n\
                 \x20 %s1 = arith.addi %s0, %zs : index\n\
                 \x20 %r = arith.index_cast %s1 : index to i32\n\
                 \x20 return %r : i32\n}}\n"
            )
        });
    }

    fn call(
        &mut self,
        op: Op,
        helper: &str,
        args: &[String],
        arg_tys: &[&str],
        res_ty: &str,
        attr: &str,
    ) {
        let r = self.res(op, 0);
        self.line(&format!(
            "{r} = func.call {helper}({}){attr} : ({}) -> {res_ty}",
            args.join(", "),
            arg_tys.join(", ")
        ));
    }

    // ---- kernel ----

    fn run(mut self) -> Result<String, Vec<Diagnostic>> {
        let k = self.k;
        if k.name.starts_with("__smemsync_") {
            return Err(vec![
                Diagnostic::user(
                    "E0802",
                    "kernel names starting with `__smemsync_` are reserved for MLIR helpers",
                )
                .with_label(k.kernel_span, "rename this kernel"),
            ]);
        }
        let mut params = self.param_list();
        let Workgroup {
            wg,
            arena,
            pinned,
            mbars,
        } = self.workgroup();
        self.tensor_map_params(&mut params);
        let wg = if wg.is_empty() {
            String::new()
        } else {
            format!(" workgroup({})", wg.join(", "))
        };
        let attrs = self.kernel_attributes();
        self.line(&format!(
            "gpu.func @{}({}){wg} kernel attributes {{{attrs}}} {{",
            if k.name.starts_with(|c: char| c.is_ascii_digit()) {
                format!("\"{}\"", k.name)
            } else {
                k.name.clone()
            },
            params.join(", ")
        ));
        self.depth += 1;
        self.shared_prologue(arena.as_ref(), pinned, mbars);
        self.region(k.body());
        self.line("gpu.return");
        self.depth -= 1;
        self.line("}");
        if !self.diags.is_empty() {
            return Err(self.diags);
        }
        let mut out = format!("gpu.module @smemsync_{} {{\n", k.name);
        for h in self.helpers.values() {
            for l in h.lines() {
                let _ = writeln!(out, "  {l}");
            }
        }
        out.push_str(&self.out);
        out.push_str("}\n");
        Ok(out)
    }

    /// The kernel's shared memory: unpinned buffers are workgroup attributions; pinned ones
    /// share a byte arena (one more attribution); mbarriers are set apart.
    fn workgroup(&mut self) -> Workgroup {
        let k = self.k;
        let mut wg = Vec::new();
        let mut arena_end = 0u64;
        let mut pinned = Vec::new();
        let mut mbars = Vec::new();
        for (b, bd) in k.buffers.iter() {
            if bd.elem == ElemType::MBarrier {
                mbars.push(b);
                continue;
            }
            match bd.offset {
                Some(o) => {
                    arena_end = arena_end.max(o + bd.bytes());
                    pinned.push(b);
                }
                None => wg.push(format!(
                    "%{} : {}",
                    self.buf_name.get(b),
                    MemType::identity(&bd.shape, bd.elem).render()
                )),
            }
        }
        let arena = if pinned.is_empty() {
            None
        } else {
            let n = self.fresh("smem");
            let ty = format!("memref<{arena_end}xi8, {WORKGROUP}>");
            wg.push(format!("%{n} : {ty}"));
            Some((n, ty))
        };
        Workgroup {
            wg,
            arena,
            pinned,
            mbars,
        }
    }

    /// The kernel's parameters as `gpu.func` arguments: globals as memrefs (symbolic
    /// dimensions by argument position), scalars with their defaults and ranges as attributes.
    fn param_list(&self) -> Vec<String> {
        let k = self.k;
        let mut params = Vec::new();
        for p in &k.params {
            match p {
                Param::Global(g) => {
                    let gd = &k.globals[*g];
                    let dims: Vec<String> = gd
                        .shape
                        .iter()
                        .filter_map(|d| match d {
                            // The argument position survives mlir-opt's renaming.
                            Dim::Param(v) => k
                                .params
                                .iter()
                                .position(|p| *p == Param::Scalar(*v))
                                .map(|i| i.to_string()),
                            Dim::Const(_) => None,
                        })
                        .collect();
                    let attr = if dims.is_empty() {
                        String::new()
                    } else {
                        format!(" {{smemsync.dims = [{}]}}", dims.join(", "))
                    };
                    params.push(format!(
                        "%{}: {}{attr}",
                        self.global_name.get(*g),
                        self.global_ty(*g)
                    ));
                }
                Param::Scalar(v) => {
                    // A default value (used by the interpreter) rides along as an attribute.
                    // So does a declared range (which analyses may assume).
                    let mut attrs = Vec::new();
                    match k.param_defaults.get(*v) {
                        Some(Scalar::F32(f)) => {
                            attrs.push(format!("smemsync.default = {} : f32", f32_literal(*f)))
                        }
                        Some(d) => attrs.push(format!("smemsync.default = {} : i32", d.as_i64())),
                        None => {}
                    }
                    if let Some((lo, hi)) = k.param_ranges.get(*v) {
                        attrs.push(format!(
                            "smemsync.min = {lo} : i32, smemsync.max = {hi} : i32"
                        ));
                    }
                    let attr = if attrs.is_empty() {
                        String::new()
                    } else {
                        format!(" {{{}}}", attrs.join(", "))
                    };
                    params.push(format!(
                        "%{}: {}{attr}",
                        self.vname.get(*v),
                        scalar_mlir(k.values[*v].ty)
                    ))
                }
            }
        }
        params
    }

    /// TMA: one tensor-map argument per (global, box), a pointer the host fills (recorded in
    /// `tmaps` for the ops that use it).
    fn tensor_map_params(&mut self, params: &mut Vec<String>) {
        let k = self.k;
        if !self.t.tma {
            return;
        }
        for op in k.ops_in_order() {
            let (m, g) = match &k.ops[op].kind {
                OpKind::TmaLoad { dst, src, .. } => (*dst, *src),
                OpKind::TmaStore { dst, src, .. } => (*src, *dst),
                _ => continue,
            };
            let Some(box_) = self.tma_box(m, g) else {
                continue;
            };
            if self.tmaps.iter().any(|(gg, bb, _)| *gg == g && *bb == box_) {
                continue;
            }
            let base = format!("{}_tmap", self.global_name.get(g));
            let n = self.fresh(&base);
            params.push(format!(
                "%{n}: !llvm.ptr {{smemsync.tensor_map = {}}}",
                k.params
                    .iter()
                    .position(|p| *p == Param::Global(g))
                    .unwrap_or(0)
            ));
            self.tmaps.push((g, box_, n));
        }
    }

    /// The `gpu.func` attributes: launch sizes, and the buffer names and thread groups the
    /// text form has and MLIR does not.
    fn kernel_attributes(&self) -> String {
        let k = self.k;
        let b = k.block;
        let g = k.grid;
        let mut attrs = format!(
            "known_block_size = array<i32: {}, {}, {}>",
            b[0], b[1], b[2]
        );
        if k.grid_known {
            let _ = write!(attrs, ", known_grid_size = array<i32: {}, {}, {}>", g[0], g[1], g[2]);
        }
        let renamed: Vec<String> = k
            .buffers
            .iter()
            .filter(|(b, bd)| *self.buf_name.get(*b) != bd.name)
            .map(|(b, bd)| format!("\"{}\" = \"{}\"", self.buf_name.get(b), escape(&bd.name)))
            .collect();
        if !renamed.is_empty() {
            let _ = write!(
                attrs,
                ", smemsync.shared_names = {{{}}}",
                renamed.join(", ")
            );
        }
        if !k.groups.is_empty() {
            let gs: Vec<String> = k
                .groups
                .values()
                .map(|gd| format!("\"{}\" = array<i32: {}, {}>", gd.name, gd.lo, gd.hi))
                .collect();
            let _ = write!(attrs, ", smemsync.groups = {{{}}}", gs.join(", "));
        }
        attrs
    }

    /// The body's opening lines: views of the byte arena for pinned buffers, typed tensor-map
    /// descriptors, and mbarrier groups.
    fn shared_prologue(&mut self, arena: Option<&(String, String)>, pinned: Vec<Buffer>, mbars: Vec<Buffer>) {
        let k = self.k;
        if let Some((arena, aty)) = arena {
            for b in pinned {
                let bd = &k.buffers[b];
                let off = self.index_const(bd.offset.unwrap_or(0) as i64);
                let ty = MemType::identity(&bd.shape, bd.elem).render();
                let n = self.buf_name.get(b).clone();
                self.line(&format!(
                    "%{n} = memref.view %{arena}[{off}][] : {aty} to {ty}"
                ));
            }
        }
        for (g, box_, n) in self.tmaps.clone() {
            let ty = tmap_ty(&box_, k.globals[g].elem);
            let d = self.fresh(&format!("{n}_desc"));
            self.line(&format!(
                "%{d} = builtin.unrealized_conversion_cast %{n} : !llvm.ptr to {ty}"
            ));
            if let Some(t) = self.tmaps.iter_mut().find(|t| t.0 == g && t.1 == box_) {
                t.2 = d;
            }
        }
        for b in mbars {
            if !self.t.mbarrier {
                continue; // an mbarrier op using it reports the diagnostic
            }
            let bd = &k.buffers[b];
            let n = self.buf_name.get(b).clone();
            let ty = mbar_group_ty(bd.elements());
            self.line(&format!("%{n} = nvgpu.mbarrier.create -> {ty}"));
        }
    }

    fn region(&mut self, r: Region) {
        let ops = self.k.region_ops(r).to_vec();
        for (i, &op) in ops.iter().enumerate() {
            let prev = if i > 0 { Some(ops[i - 1]) } else { None };
            self.op(op, prev);
        }
    }

    fn op(&mut self, op: Op, prev: Option<Op>) {
        let k = self.k;
        let od = &k.ops[op];
        let needs_result = od.kind.signature().results == Results::One;
        if needs_result && od.results.is_empty() {
            let d = Diagnostic::error(
                crate::diag::DiagKind::Verifier,
                "E0801",
                "an op that defines a value has no result",
            )
            .with_label(k.span(op), "no result");
            self.diags.push(d);
            return;
        }
        match &od.kind {
            OpKind::Const(..) | OpKind::Cmp(..) | OpKind::Select(..) | OpKind::Cast(..) | OpKind::InGroup(..) => self.scalar_op(op),
            OpKind::Special(s) => self.special(op, *s),
            OpKind::Binary(b, x, y) => self.binary(op, *b, x, y),
            OpKind::Unary(u, x) => self.unary(op, *u, x),
            OpKind::Compute { name, args } => self.compute(op, name, args),
            OpKind::ViewDef(v) => self.view(*v),
            OpKind::Load { .. } | OpKind::Store { .. } | OpKind::Atomic { .. } | OpKind::GLoad { .. } | OpKind::GStore { .. } | OpKind::GAtomic { .. } | OpKind::LocalStore { .. } => self.access_op(op),
            OpKind::LocalLoad { mem, layout } => self.collective(op, *mem, None, layout),
            OpKind::GatherToLds { .. } | OpKind::CpAsync { .. } | OpKind::TmaLoad { .. } | OpKind::Wgmma { .. } => self.async_copy_op(op),
            OpKind::CpAsyncCommit | OpKind::CpAsyncWait(..) | OpKind::BulkCommit | OpKind::BulkWait(..) | OpKind::WgmmaCommit | OpKind::WgmmaWait(..) | OpKind::FenceProxyAsync | OpKind::WaitTokens(..) => self.async_wait_op(op),
            OpKind::TdmLoad { dst, src, origin } => self.tdm_load(op, *dst, *src, origin),
            OpKind::TmaStore { dst, origin, src } => self.tma(op, *src, *dst, origin, None),
            OpKind::CpAsyncTile(_) | OpKind::GatherToLdsTile(_) => self.err(op, "collective tile copies (`cp_async_tile`, `gather_to_lds_tile`) are not emitted as MLIR yet (emit CUDA, or unroll them into per-thread copies)"),
            OpKind::WaitCnt(cs) => self.waitcnt(op, cs),
            OpKind::Barrier | OpKind::WarpSync | OpKind::SplitSignal(..) | OpKind::SplitWait(..) | OpKind::NamedArrive { .. } | OpKind::NamedSync { .. } => self.barrier_op(op, prev),
            OpKind::MbarInit { .. } | OpKind::MbarArrive { .. } | OpKind::MbarExpectTx { .. } | OpKind::MbarWait { .. } | OpKind::MbarInval { .. } => self.mbarrier_op(op),
            OpKind::For { lo, hi, step, init } => self.for_op(op, lo, hi, step, init),
            OpKind::If { cond } => self.if_op(op, cond),
            OpKind::While { init } => self.while_op(op, init),
            OpKind::Stage { name } => self.stage(op, name),
            OpKind::Yield(..) | OpKind::Condition(..) => self.terminator_op(op),
        }
    }

    /// Constants, comparisons, selects, casts and group membership.
    fn scalar_op(&mut self, op: Op) {
        let k = self.k;
        let od = &k.ops[op];
        match &od.kind {
            OpKind::Const(c) => {
                let r = self.res(op, 0);
                match c {
                    Scalar::I1(b) => self.line(&format!("{r} = arith.constant {b}")),
                    Scalar::I32(v) => self.line(&format!("{r} = arith.constant {v} : i32")),
                    Scalar::F32(v) => {
                        self.line(&format!("{r} = arith.constant {} : f32", f32_literal(*v)))
                    }
                }
            }
            OpKind::Cmp(p, x, y) => self.cmp_op(op, *p, x, y),
            OpKind::Select(c, x, y) => {
                let ty = k.values[od.results[0]].ty;
                let c = self.val(c, ScalarType::I1);
                let a = self.val(x, ty);
                let b = self.val(y, ty);
                let r = self.res(op, 0);
                self.line(&format!(
                    "{r} = arith.select {c}, {a}, {b} : {}",
                    scalar_mlir(ty)
                ));
            }
            OpKind::Cast(CastOp::IToF, x) => {
                let a = self.val(x, ScalarType::I32);
                let r = self.res(op, 0);
                self.line(&format!("{r} = arith.sitofp {a} : i32 to f32"));
            }
            OpKind::Cast(CastOp::FToI, x) => {
                let a = self.val(x, ScalarType::F32);
                let h = self.helper("__smemsync_ftoi", |_, _| FTOI_HELPER.to_string());
                self.call(op, &h, &[a], &["f32"], "i32", "");
            }
            OpKind::InGroup(g) => {
                self.tid_linear_helper();
                let h = self.helper("__smemsync_in_group", |_, _| IN_GROUP_HELPER.to_string());
                let gd = &k.groups[*g];
                let (lo, hi) = (gd.lo, gd.hi);
                let name = gd.name.clone();
                let lo = self.imm_const(Scalar::I32(lo as i32), ScalarType::I32);
                let hi = self.imm_const(Scalar::I32(hi as i32), ScalarType::I32);
                let attr = format!(" {{smemsync.group = \"{name}\"}}");
                self.call(op, &h, &[lo, hi], &["i32", "i32"], "i1", &attr);
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// A comparison, typed by its first value operand: `arith.cmpf` with ordered predicates
    /// on `f32`, `arith.cmpi` with signed ones otherwise.
    fn cmp_op(&mut self, op: Op, p: CmpPred, x: &Operand, y: &Operand) {
        let ty = if matches!(x, Operand::Value(_)) {
            self.ty_of(x)
        } else {
            self.ty_of(y)
        };
        let a = self.val(x, ty);
        let b = self.val(y, ty);
        let r = self.res(op, 0);
        if ty == ScalarType::F32 {
            let p = match p {
                CmpPred::Eq => "oeq",
                CmpPred::Ne => "one",
                CmpPred::Lt => "olt",
                CmpPred::Le => "ole",
                CmpPred::Gt => "ogt",
                CmpPred::Ge => "oge",
            };
            self.line(&format!("{r} = arith.cmpf {p}, {a}, {b} : f32"));
        } else {
            let p = match p {
                CmpPred::Eq => "eq",
                CmpPred::Ne => "ne",
                CmpPred::Lt => "slt",
                CmpPred::Le => "sle",
                CmpPred::Gt => "sgt",
                CmpPred::Ge => "sge",
            };
            self.line(&format!(
                "{r} = arith.cmpi {p}, {a}, {b} : {}",
                scalar_mlir(ty)
            ));
        }
    }

    /// Shared and global loads, stores and atomics.
    fn access_op(&mut self, op: Op) {
        let k = self.k;
        let od = &k.ops[op];
        match &od.kind {
            OpKind::Load { mem, index } => {
                let mt = self.mem_ty(*mem);
                let ix = self.indices(index);
                let m = self.mem_name(*mem);
                let rv = od.results[0];
                self.load_like(
                    rv,
                    mt.elem,
                    &format!("memref.load {m}[{ix}] : {}", mt.render()),
                );
            }
            OpKind::Store { mem, index, value } => {
                let mt = self.mem_ty(*mem);
                let x = self.narrow(value, mt.elem);
                let ix = self.indices(index);
                let m = self.mem_name(*mem);
                self.line(&format!("memref.store {x}, {m}[{ix}] : {}", mt.render()));
            }
            OpKind::Atomic {
                op: a,
                mem,
                index,
                value,
            } => {
                let mt = self.mem_ty(*mem);
                let m = self.mem_name(*mem);
                let ty = mt.render();
                self.atomic(op, *a, &m, &ty, mt.elem, index, value);
            }
            OpKind::GLoad { global, index } => {
                let ty = self.global_ty(*global);
                let elem = k.globals[*global].elem;
                let ix = self.indices(index);
                let g = format!("%{}", self.global_name.get(*global));
                let rv = od.results[0];
                self.load_like(rv, elem, &format!("memref.load {g}[{ix}] : {ty}"));
            }
            OpKind::GStore {
                global,
                index,
                value,
            } => {
                let ty = self.global_ty(*global);
                let elem = k.globals[*global].elem;
                let x = self.narrow(value, elem);
                let ix = self.indices(index);
                let g = format!("%{}", self.global_name.get(*global));
                self.line(&format!("memref.store {x}, {g}[{ix}] : {ty}"));
            }
            OpKind::GAtomic {
                op: a,
                global,
                index,
                value,
            } => {
                let ty = self.global_ty(*global);
                let elem = k.globals[*global].elem;
                let g = format!("%{}", self.global_name.get(*global));
                self.atomic(op, *a, &g, &ty, elem, index, value);
            }
            OpKind::LocalStore { mem, value, layout } => {
                self.collective(op, *mem, Some(value), layout)
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// Whether gfx9 `gather_to_lds` `op` writes where the IR says (`lane_contiguous`).
    fn lane_contiguous(&mut self, op: Op, dst: MemRef, index: &[Operand]) -> Result<(), String> {
        let (k, warp) = (self.k, self.t.warp);
        let lanes = self
            .lanes
            .get_or_insert_with(|| LaneContiguity::new(k, warp));
        lanes.check(op, dst, index)
    }

    /// Async copies (gather-to-LDS, cp.async, TMA loads) and wgmma.
    fn async_copy_op(&mut self, op: Op) {
        match &self.k.ops[op].kind {
            OpKind::GatherToLds {
                dst,
                dst_index,
                src,
                src_index,
            } => {
                if !(self.amd() && self.t.gather_to_lds) {
                    return self.err(
                        op,
                        "`gather_to_lds` needs global_load_lds (gfx950) or the gfx1250 async loads",
                    );
                }
                if self.t.gfx12_counters() {
                    return self.gather_async(op, *dst, dst_index, *src, src_index);
                }
                if let Err(why) = self.lane_contiguous(op, *dst, dst_index) {
                    return self.err(op, format!("`gather_to_lds` whose shared destination is not shown to be its wave's lane 0 destination plus the lane ({why}): amdgpu.gather_to_lds writes lane l at its wave's LDS address plus l elements, not at the IR's per-thread index"));
                }
                let sty = self.global_ty(*src);
                let dt = self.mem_ty(*dst);
                let si = self.indices(src_index);
                let di = self.indices(dst_index);
                let s = format!("%{}", self.global_name.get(*src));
                let d = self.mem_name(*dst);
                let e = elem_mlir(dt.elem);
                self.line(&format!(
                    "amdgpu.gather_to_lds {s}[{si}], {d}[{di}] : {e}, {sty}, {}",
                    dt.render()
                ));
            }
            OpKind::CpAsync {
                dst,
                dst_index,
                src,
                src_index,
            } => {
                if !self.t.cp_async {
                    return self.err(op, "`cp_async` is an NVIDIA copy");
                }
                let dt = self.mem_ty(*dst);
                if dt.elem.bytes() < 4 {
                    return self.err(op, "`cp_async` of one element smaller than 4 bytes (cp.async copies 4, 8 or 16 bytes)");
                }
                let sty = self.global_ty(*src);
                let si = self.indices(src_index);
                let di = self.indices(dst_index);
                let s = format!("%{}", self.global_name.get(*src));
                let d = self.mem_name(*dst);
                let r = if self.has_res(op) {
                    self.res(op, 0)
                } else {
                    format!("%{}", self.fresh("cp"))
                };
                self.line(&format!(
                    "{r} = nvgpu.device_async_copy {s}[{si}], {d}[{di}], 1 : {sty} to {}",
                    dt.render()
                ));
            }
            OpKind::TmaLoad {
                dst,
                src,
                origin,
                mbar,
                mbar_index,
            } => self.tma(op, *dst, *src, origin, Some((*mbar, mbar_index))),
            OpKind::Wgmma { .. } => {
                self.err(op, "`wgmma` needs warpgroup descriptors; not expressible")
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// Commits and waits of async groups and tokens, and proxy fences.
    fn async_wait_op(&mut self, op: Op) {
        let k = self.k;
        let kind = &k.ops[op].kind;
        let needs = kind.signature().needs;
        if !has(self.t, needs) {
            let m = kind.mnemonic();
            let why = match needs {
                Feature::CpAsync => "is NVIDIA-only",
                _ => "needs sm_90",
            };
            return self.err(op, format!("`{m}` {why}"));
        }
        match kind {
            OpKind::CpAsyncCommit => {
                self.line("nvvm.cp.async.commit.group");
            }
            OpKind::CpAsyncWait(n) => {
                self.line(&format!("nvvm.cp.async.wait.group {n}"));
            }
            OpKind::BulkCommit => {
                self.line("nvvm.cp.async.bulk.commit.group");
            }
            OpKind::BulkWait(n) => {
                self.line(&format!("nvvm.cp.async.bulk.wait_group {n} {{read}}"));
            }
            OpKind::WgmmaCommit => {
                self.line("nvvm.wgmma.commit.group.sync.aligned");
            }
            OpKind::WgmmaWait(n) => {
                self.line(&format!("nvvm.wgmma.wait.group.sync.aligned {n}"));
            }
            OpKind::FenceProxyAsync => {
                self.line(
                    "nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, \
                     space = #nvvm.shared_space<cta>}",
                );
            }
            OpKind::WaitTokens(ts) => {
                // AMD: a zero wait on each producer's counter completes at least those copies
                // (and possibly more: never too early). cp.async groups have no such wait.
                let mut cs: Vec<(Counter, u32)> = Vec::new();
                for t in ts {
                    let class = match k.values[*t].def {
                        ValueDef::Result(p, _) => match k.ops[p].kind {
                            OpKind::GatherToLds { .. } => Some(AsyncClass::GatherToLds),
                            OpKind::TdmLoad { .. } => Some(AsyncClass::Tdm),
                            _ => None,
                        },
                        _ => None,
                    };
                    match class.and_then(|c| self.t.async_counter(c)) {
                        Some(c) if !cs.contains(&(c, 0)) => cs.push((c, 0)),
                        Some(_) => {}
                        None => {
                            return self.err(
                                op,
                                "`wait_tokens` on a copy without an AMD counter has no upstream MLIR op; use a count wait (`cp_async_wait`)",
                            );
                        }
                    }
                }
                self.waitcnt(op, &cs)
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// Block, warp, split and named barriers (`prev`: the op before, whose `dscnt(0)` wait a split signal may reuse).
    fn barrier_op(&mut self, op: Op, prev: Option<Op>) {
        let k = self.k;
        let od = &k.ops[op];
        match &od.kind {
            OpKind::Barrier => {
                if self.amd() {
                    self.line("amdgpu.lds_barrier");
                } else {
                    self.line("nvvm.barrier0");
                }
            }
            OpKind::WarpSync => {
                if self.amd() {
                    self.line("llvm.fence syncscope(\"wavefront\") acq_rel");
                } else {
                    let m = self.imm_const(Scalar::I32(-1), ScalarType::I32);
                    self.line(&format!("nvvm.bar.warp.sync {m} : i32"));
                }
            }
            OpKind::SplitSignal(id) => {
                if !self.t.split_barriers {
                    return self.err(op, "split barriers (`barrier_signal`) need gfx12");
                }
                let covered = prev.is_some_and(|p| match &k.ops[p].kind {
                    OpKind::WaitCnt(cs) => cs.contains(&(Counter::DsCnt, 0)),
                    _ => false,
                });
                if !covered {
                    self.line("amdgpu.memory_counter_wait ds(0)");
                }
                self.line(&format!("rocdl.s.barrier.signal id = {id}"));
            }
            OpKind::SplitWait(id) => {
                if !self.t.split_barriers {
                    return self.err(op, "split barriers (`barrier_wait`) need gfx12");
                }
                self.line(&format!("rocdl.s.barrier.wait id = {id}"));
            }
            OpKind::NamedArrive { id, count } | OpKind::NamedSync { id, count } => {
                if self.amd() {
                    return self.err(op, "named barriers are emitted for NVIDIA targets only");
                }
                let i = self.imm_const(Scalar::I32(*id as i32), ScalarType::I32);
                let n = self.imm_const(Scalar::I32(*count as i32), ScalarType::I32);
                let name = if matches!(od.kind, OpKind::NamedArrive { .. }) {
                    "nvvm.barrier.arrive"
                } else {
                    "nvvm.barrier"
                };
                self.line(&format!("{name} id = {i} number_of_threads = {n}"));
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// mbarrier init, arrive, expect-tx, wait and invalidate.
    fn mbarrier_op(&mut self, op: Op) {
        match &self.k.ops[op].kind {
            OpKind::MbarInit { mbar, index, count } => {
                if let Some((g, ty, i)) = self.mbar(op, *mbar, index) {
                    let c = self.index_const(*count as i64);
                    self.line(&format!("nvgpu.mbarrier.init {g}[{i}], {c} : {ty}"));
                }
            }
            OpKind::MbarArrive { mbar, index, tx } => {
                if let Some((g, ty, i)) = self.mbar(op, *mbar, index) {
                    match tx {
                        Some(b) => {
                            let c = self.index_const(*b as i64);
                            self.line(&format!(
                                "nvgpu.mbarrier.arrive.expect_tx {g}[{i}], {c} : {ty}"
                            ));
                        }
                        None => {
                            let t = self.fresh("mbtok");
                            self.line(&format!("%{t} = nvgpu.mbarrier.arrive {g}[{i}] : {ty} -> !nvgpu.mbarrier.token"));
                        }
                    }
                }
            }
            OpKind::MbarExpectTx { mbar, index, bytes } => {
                if let Some(p) = self.mbar_ptr(op, *mbar, index) {
                    let b = self.imm_const(Scalar::I32(*bytes as i32), ScalarType::I32);
                    self.line(&format!(
                        "nvvm.mbarrier.expect_tx {p}, {b} : !llvm.ptr<3>, i32"
                    ));
                }
            }
            OpKind::MbarWait {
                mbar,
                index,
                parity,
            } => {
                if let Some((g, ty, i)) = self.mbar(op, *mbar, index) {
                    let p = match parity {
                        Operand::Imm(s) => {
                            self.imm_const(Scalar::I1(s.as_i64() & 1 == 1), ScalarType::I1)
                        }
                        Operand::Value(v) => {
                            let src = self.vname.get(*v).clone();
                            let n = self.fresh(&format!("{src}_i1"));
                            self.line(&format!("%{n} = arith.trunci %{src} : i32 to i1"));
                            format!("%{n}")
                        }
                    };
                    let t = self.index_const(MBAR_TICKS as i64);
                    self.line(&format!(
                        "nvgpu.mbarrier.try_wait.parity {g}[{i}], {p}, {t} : {ty}"
                    ));
                }
            }
            OpKind::MbarInval { mbar, index } => {
                if let Some(p) = self.mbar_ptr(op, *mbar, index) {
                    self.line(&format!("nvvm.mbarrier.inval {p} : !llvm.ptr<3>"));
                }
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// Region terminators: `yield` and `condition`.
    fn terminator_op(&mut self, op: Op) {
        match &self.k.ops[op].kind {
            OpKind::Yield(vs) => {
                if vs.is_empty() {
                    return;
                }
                let tys = self.yield_types(op);
                let xs: Vec<String> = vs.iter().zip(&tys).map(|(o, t)| self.val(o, *t)).collect();
                let ts: Vec<&str> = tys.iter().map(|t| scalar_mlir(*t)).collect();
                self.line(&format!("scf.yield {} : {}", xs.join(", "), ts.join(", ")));
            }
            OpKind::Condition(c) => {
                // The condition passes the current iteration values on.
                let parent = self.parents.parent_op(op);
                let c = self.val(c, ScalarType::I1);
                let args: Vec<Value> = parent
                    .map(|p| self.k.region_args(self.k.ops[p].regions[0]).to_vec())
                    .unwrap_or_default();
                if args.is_empty() {
                    self.line(&format!("scf.condition({c})"));
                } else {
                    let xs: Vec<String> = args
                        .iter()
                        .map(|a| format!("%{}", self.vname.get(*a)))
                        .collect();
                    let ts: Vec<&str> = args
                        .iter()
                        .map(|a| scalar_mlir(self.k.values[*a].ty))
                        .collect();
                    self.line(&format!(
                        "scf.condition({c}) {} : {}",
                        xs.join(", "),
                        ts.join(", ")
                    ));
                }
            }
            // `op` dispatches only the kinds above here.
            _ => {}
        }
    }

    /// The types a `yield` carries: those of the enclosing op's results.
    fn yield_types(&self, op: Op) -> Vec<ScalarType> {
        let parent = self.parents.parent_op(op);
        match parent {
            Some(p) => self.k.ops[p]
                .results
                .iter()
                .map(|v| self.k.values[*v].ty)
                .collect(),
            None => Vec::new(),
        }
    }

    fn special(&mut self, op: Op, s: Special) {
        const D: [&str; 3] = ["x", "y", "z"];
        let rv = self.k.ops[op].results[0];
        let name = self.vname.get(rv).clone();
        let gpu = |kind: &str, d: u8| format!("gpu.{kind} {}", D[d as usize]);
        let def = match s {
            Special::Tid(d) => gpu("thread_id", d),
            Special::Bid(d) => gpu("block_id", d),
            Special::BlockDim(d) | Special::GridDim(d) if self.amd() => {
                // ROCDL lowers gpu.block_dim/grid_dim to device-library calls; the launch shape
                // is part of the kernel, so the dimension is a marked constant.
                let v = match s {
                    Special::BlockDim(_) => self.k.block[d as usize],
                    _ => self.k.grid[d as usize],
                };
                self.line(&format!(
                    "%{name} = arith.constant {{smemsync.special = \"{}\"}} {v} : i32",
                    s.name()
                ));
                return;
            }
            Special::BlockDim(d) => gpu("block_dim", d),
            Special::GridDim(d) => gpu("grid_dim", d),
            Special::LinearTid | Special::Lane | Special::Warp => {
                self.tid_linear_helper();
                let w = self.t.warp;
                let h = match s {
                    Special::LinearTid => "@__smemsync_tid_linear".to_string(),
                    Special::Lane => self.helper("__smemsync_lane", |_, _| {
                        lane_warp_helper("lane", "remui", w)
                    }),
                    _ => self.helper("__smemsync_warp", |_, _| {
                        lane_warp_helper("warp", "divui", w)
                    }),
                };
                self.line(&format!("%{name} = func.call {h}() : () -> i32"));
                return;
            }
        };
        self.line(&format!("%{name} = {def}"));
        let n = self.fresh(&format!("{name}_i32"));
        self.line(&format!("%{n} = arith.index_cast %{name} : index to i32"));
        self.vname.set(rv, n);
        self.idx_name.set(rv, name);
    }

    fn binary(&mut self, op: Op, b: BinOp, x: &Operand, y: &Operand) {
        let ty = self.k.values[self.k.ops[op].results[0]].ty;
        let f = ty == ScalarType::F32;
        let helper_name = match (b, f) {
            (BinOp::Rem, false) => Some(("__smemsync_rem_i32", REM_HELPER)),
            (BinOp::Shl, _) => Some(("__smemsync_shl_i32", SHL_HELPER)),
            (BinOp::Shr, _) => Some(("__smemsync_shr_i32", SHR_HELPER)),
            _ => None,
        };
        let a = self.val(x, ty);
        let c = self.val(y, ty);
        if let Some((h, text)) = helper_name {
            let h = self.helper(h, |_, _| text.to_string());
            return self.call(op, &h, &[a, c], &["i32", "i32"], "i32", "");
        }
        let name = match (b, f) {
            (BinOp::Add, false) => "addi",
            (BinOp::Add, true) => "addf",
            (BinOp::Sub, false) => "subi",
            (BinOp::Sub, true) => "subf",
            (BinOp::Mul, false) => "muli",
            (BinOp::Mul, true) => "mulf",
            (BinOp::Div, false) => "floordivsi",
            (BinOp::Div, true) => "divf",
            (BinOp::Rem, true) => "remf",
            (BinOp::Min, false) => "minsi",
            (BinOp::Min, true) => "minnumf",
            (BinOp::Max, false) => "maxsi",
            (BinOp::Max, true) => "maxnumf",
            (BinOp::And, _) => "andi",
            (BinOp::Or, _) => "ori",
            (BinOp::Xor, _) => "xori",
            (BinOp::Rem, false) | (BinOp::Shl, _) | (BinOp::Shr, _) => "unreachable",
        };
        let r = self.res(op, 0);
        self.line(&format!(
            "{r} = arith.{name} {a}, {c} : {}",
            scalar_mlir(ty)
        ));
    }

    fn unary(&mut self, op: Op, u: UnOp, x: &Operand) {
        let ty = self.k.values[self.k.ops[op].results[0]].ty;
        let f = ty == ScalarType::F32;
        let a = self.val(x, ty);
        let r = self.res(op, 0);
        let t = scalar_mlir(ty);
        match (u, f) {
            (UnOp::Neg, true) => self.line(&format!("{r} = arith.negf {a} : f32")),
            (UnOp::Neg, false) => {
                let z = self.imm_const(Scalar::I32(0), ScalarType::I32);
                self.line(&format!("{r} = arith.subi {z}, {a} : i32"));
            }
            (UnOp::Not, _) => {
                let m = if ty == ScalarType::I1 {
                    self.imm_const(Scalar::I1(true), ScalarType::I1)
                } else {
                    self.imm_const(Scalar::I32(-1), ScalarType::I32)
                };
                self.line(&format!("{r} = arith.xori {a}, {m} : {t}"));
            }
            (UnOp::Exp, _) => self.line(&format!("{r} = math.exp {a} : {t}")),
            (UnOp::Sqrt, _) => self.line(&format!("{r} = math.sqrt {a} : {t}")),
            (UnOp::Abs, true) => self.line(&format!("{r} = math.absf {a} : f32")),
            (UnOp::Abs, false) => self.line(&format!("{r} = math.absi {a} : i32")),
        }
    }

    fn compute(&mut self, op: Op, name: &str, args: &[Operand]) {
        let k = self.k;
        let arg_tys: Vec<ScalarType> = args.iter().map(|a| self.ty_of(a)).collect();
        let res_tys: Vec<ScalarType> = k.ops[op].results.iter().map(|v| k.values[*v].ty).collect();
        let sig: Vec<&str> = arg_tys.iter().map(|t| t.name()).collect();
        let rs: Vec<&str> = res_tys.iter().map(|t| t.name()).collect();
        let hname = format!("__smemsync_compute_{}_to_{}", sig.join("_"), rs.join("_"));
        let needs_ftoi =
            res_tys.iter().any(|t| *t != ScalarType::F32) && arg_tys.contains(&ScalarType::F32);
        if needs_ftoi {
            self.helper("__smemsync_ftoi", |_, _| FTOI_HELPER.to_string());
        }
        let (a2, r2) = (arg_tys.clone(), res_tys.clone());
        let h = self.helper(&hname, |_, _| compute_helper(&hname, &a2, &r2));
        let xs: Vec<String> = args
            .iter()
            .zip(&arg_tys)
            .map(|(a, t)| self.val(a, *t))
            .collect();
        let ats: Vec<&str> = arg_tys.iter().map(|t| scalar_mlir(*t)).collect();
        let rts: Vec<&str> = res_tys.iter().map(|t| scalar_mlir(*t)).collect();
        let results: Vec<String> = (0..res_tys.len()).map(|i| self.res(op, i)).collect();
        let lhs = if results.is_empty() {
            String::new()
        } else {
            format!("{} = ", results.join(", "))
        };
        let rt = if rts.len() == 1 {
            rts[0].to_string()
        } else {
            format!("({})", rts.join(", "))
        };
        let name = name.replace('\\', "\\\\").replace('"', "\\\"");
        self.line(&format!(
            "{lhs}func.call {h}({}) {{smemsync.compute = \"{name}\"}} : ({}) -> {rt}",
            xs.join(", "),
            ats.join(", ")
        ));
    }

    fn view(&mut self, v: View) {
        let vd = self.k.views[v].clone();
        let base = self.mem_ty(vd.base);
        let bname = self.mem_name(vd.base);
        let rank = base.shape.len();
        let mut offs = Vec::new();
        let mut sizes = Vec::new();
        let mut shape = Vec::new();
        let mut strides = Vec::new();
        let mut offset = base.offset;
        for d in 0..rank {
            match vd.indices.get(d) {
                Some(ViewIndex::At(o)) => {
                    match o {
                        Operand::Imm(s) => {
                            let c = s.as_i64().max(0) as u64;
                            offs.push(c.to_string());
                            offset = offset.map(|x| x + c * base.strides[d]);
                        }
                        Operand::Value(_) => {
                            offs.push(self.index(o));
                            offset = None;
                        }
                    }
                    sizes.push("1".to_string());
                }
                Some(ViewIndex::Range(lo, hi)) => {
                    offs.push(lo.to_string());
                    offset = offset.map(|x| x + lo * base.strides[d]);
                    let n = hi.saturating_sub(*lo);
                    sizes.push(n.to_string());
                    shape.push(n);
                    strides.push(base.strides[d]);
                }
                None => {
                    offs.push("0".into());
                    sizes.push(base.shape[d].to_string());
                    shape.push(base.shape[d]);
                    strides.push(base.strides[d]);
                }
            }
        }
        let ty = MemType {
            shape,
            strides,
            offset,
            elem: base.elem,
            identity: false,
        };
        let n = self.view_name.get(v).clone();
        let ones = vec!["1"; rank].join(", ");
        self.line(&format!(
            "%{n} = memref.subview {bname}[{}] [{}] [{ones}] : {} to {}",
            offs.join(", "),
            sizes.join(", "),
            base.render(),
            ty.render()
        ));
        self.view_ty.insert(v, ty);
    }

    /// Emits a load whose element may be narrower than the result; the IR value's name goes
    /// on the load, the widened value gets a derived name.
    fn load_like(&mut self, rv: Value, elem: ElemType, rhs: &str) {
        let name = self.vname.get(rv).clone();
        self.line(&format!("%{name} = {rhs}"));
        if let Some(w) = self.widen(&format!("%{name}"), elem) {
            self.vname.set(rv, w);
        }
    }

    fn widen(&mut self, x: &str, elem: ElemType) -> Option<String> {
        let e = elem_mlir(elem);
        let (op, to) = match elem {
            ElemType::F16 | ElemType::BF16 => ("extf", "f32"),
            ElemType::I8 | ElemType::I16 => ("extsi", "i32"),
            _ => return None,
        };
        let base = x.trim_start_matches('%');
        let n = self.fresh(&format!("{base}_{to}"));
        self.line(&format!("%{n} = arith.{op} {x} : {e} to {to}"));
        Some(n)
    }

    fn narrow(&mut self, value: &Operand, elem: ElemType) -> String {
        let sty = elem.scalar().unwrap_or(ScalarType::I32);
        let x = self.val(value, sty);
        let e = elem_mlir(elem);
        let (op, from) = match elem {
            ElemType::F16 | ElemType::BF16 => ("truncf", "f32"),
            ElemType::I8 | ElemType::I16 => ("trunci", "i32"),
            _ => return x,
        };
        let n = self.fresh(&format!("{}_{e}", x.trim_start_matches('%')));
        self.line(&format!("%{n} = arith.{op} {x} : {from} to {e}"));
        format!("%{n}")
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one call site per memory space; a struct would only rename them"
    )]
    fn atomic(
        &mut self,
        op: Op,
        a: AtomicOp,
        m: &str,
        ty: &str,
        elem: ElemType,
        index: &[Operand],
        value: &Operand,
    ) {
        let f = elem.is_float();
        let kind = match (a, f) {
            (AtomicOp::Add, false) => "addi",
            (AtomicOp::Add, true) => "addf",
            (AtomicOp::Min, false) => "mins",
            (AtomicOp::Min, true) => "minnumf",
            (AtomicOp::Max, false) => "maxs",
            (AtomicOp::Max, true) => "maxnumf",
            (AtomicOp::Exch, _) => "assign",
            (AtomicOp::And, false) => "andi",
            (AtomicOp::Or, false) => "ori",
            (AtomicOp::And | AtomicOp::Or, true) => {
                return self.err(op, "bitwise atomics on float elements");
            }
        };
        let x = self.narrow(value, elem);
        let ix = self.indices(index);
        let e = elem_mlir(elem);
        let rv = self.k.ops[op].results.first().copied();
        let name = match rv {
            Some(v) => self.vname.get(v).clone(),
            None => self.fresh("atom"),
        };
        self.line(&format!(
            "%{name} = memref.atomic_rmw {kind} {x}, {m}[{ix}] : ({e}, {ty}) -> {e}"
        ));
        if let Some(v) = rv
            && let Some(w) = self.widen(&format!("%{name}"), elem)
        {
            self.vname.set(v, w);
        }
    }

    /// `local_load`/`local_store` as a call to a helper that runs the interpreter's concrete
    /// mapping: element `e` (row-major in the view) belongs to thread `first + (e + n) mod T`
    /// over the layout's threads `[first, first + T)` (the block's, or a role-relative
    /// layout's group); a store writes `x + e`, a load sums the owned elements in increasing
    /// `e`.
    fn collective(
        &mut self,
        op: Op,
        mem: MemRef,
        value: Option<&Operand>,
        layout: &Option<String>,
    ) {
        let mt = self.mem_ty(mem);
        let Some(sty) = mt.elem.scalar() else {
            return self.err(op, "a collective access to an mbarrier array");
        };
        let n = self.layouts.get(&op).copied().unwrap_or(0);
        let ty = mt.render();
        let lt = crate::ir::layout::layout_threads(self.k, layout.as_deref());
        let key = (value.is_some(), n, lt, ty.clone());
        let idx = match self.collectives.iter().position(|c| *c == key) {
            Some(i) => i,
            None => {
                self.collectives.push(key);
                self.collectives.len() - 1
            }
        };
        self.tid_linear_helper();
        let kind = if value.is_some() {
            "local_store"
        } else {
            "local_load"
        };
        let hname = format!("__smemsync_{kind}_{idx}");
        let h = self.helper(&hname, |_, _| {
            collective_helper(&hname, &mt, sty, n, lt, value.is_some())
        });
        let m = self.mem_name(mem);
        let attr = match layout {
            Some(l) => format!(
                " {{smemsync.collective = \"{kind}\", smemsync.layout = \"{}\"}}",
                escape(l)
            ),
            None => format!(" {{smemsync.collective = \"{kind}\"}}"),
        };
        let st = scalar_mlir(sty);
        match value {
            Some(v) => {
                let x = self.val(v, sty);
                self.line(&format!(
                    "func.call {h}({m}, {x}){attr} : ({ty}, {st}) -> ()"
                ));
            }
            None => {
                let r = self.res(op, 0);
                self.line(&format!("{r} = func.call {h}({m}){attr} : ({ty}) -> {st}"));
            }
        }
    }

    /// `tdm_load`: a tensor DMA descriptor over the trailing dimensions of the global (its
    /// base at the tile origin, the LDS base at the view's first element), then
    /// `amdgpu.tensor_load_to_lds` (gfx1250).
    fn tdm_load(&mut self, op: Op, dst: MemRef, src: Global, origin: &[Operand]) {
        if !self.t.tensor_dma {
            return self.err(op, "`tdm_load` needs the gfx1250 tensor data mover");
        }
        let dt = self.mem_ty(dst);
        let gd = &self.k.globals[src];
        let mut gshape = Vec::new();
        for d in &gd.shape {
            match d {
                Dim::Const(c) => gshape.push(*c),
                Dim::Param(_) => {
                    return self.err(op, "`tdm_load` from a global with symbolic dimensions (the descriptor needs static sizes)");
                }
            }
        }
        let rank = dt.shape.len();
        if rank != 2 || gshape.len() < rank || origin.len() != gshape.len() {
            return self.err(op, "`tdm_load` of a tile that is not two-dimensional (upstream lowers 2-D descriptors only)");
        }
        let mut gstrides = vec![1u64; gshape.len()];
        for i in (0..gshape.len().saturating_sub(1)).rev() {
            gstrides[i] = gstrides[i + 1] * gshape[i + 1];
        }
        let tail = gshape.len() - rank;
        let join = |v: &[u64]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let gty = self.global_ty(src);
        let e = elem_mlir(dt.elem);
        let gi = self.indices(origin);
        let zeros: Vec<String> = (0..rank).map(|_| self.index_const(0)).collect();
        let g = format!("%{}", self.global_name.get(src));
        let d = self.mem_name(dst);
        let base = self.fresh("tdm_base");
        self.line(&format!(
            "%{base} = amdgpu.make_dma_base {g}[{gi}], {d}[{}] : {gty}, {} -> !amdgpu.tdm_base<{e}>",
            zeros.join(", "),
            dt.render()
        ));
        let desc = self.fresh("tdm_desc");
        self.line(&format!(
            "%{desc} = amdgpu.make_dma_descriptor %{base} globalSize [{}] globalStride [{}] sharedSize [{}] : !amdgpu.tdm_base<{e}> -> !amdgpu.tdm_descriptor",
            join(&gshape[tail..]),
            join(&gstrides[tail..]),
            join(&dt.shape)
        ));
        self.line(&format!(
            "amdgpu.tensor_load_to_lds %{desc} : !amdgpu.tdm_descriptor"
        ));
    }

    /// gfx1250 `gather_to_lds`: `rocdl.global.load.async.to.lds.b32/b8` with per-lane global
    /// and LDS addresses (counted by asynccnt), computed in a helper from the memrefs'
    /// strided metadata, so the IR's per-thread destination is exact.
    fn gather_async(
        &mut self,
        op: Op,
        dst: MemRef,
        dst_index: &[Operand],
        src: Global,
        src_index: &[Operand],
    ) {
        let dt = self.mem_ty(dst);
        let bits = match dt.elem.bytes() {
            4 => "b32",
            1 => "b8",
            _ => return self.err(
                op,
                "`gather_to_lds` of 2-byte elements (gfx1250 async loads copy 1, 4, 8 or 16 bytes)",
            ),
        };
        let sty = self.global_ty(src);
        let dty = dt.render();
        let key = format!("{sty}|{dty}");
        let idx = match self.gathers.iter().position(|g| *g == key) {
            Some(i) => i,
            None => {
                self.gathers.push(key);
                self.gathers.len() - 1
            }
        };
        let hname = format!("__smemsync_gather_to_lds_{idx}");
        let (sr, dr) = (src_index.len(), dst_index.len());
        let esize = dt.elem.bytes();
        let h = self.helper(&hname, |_, _| {
            gather_helper(&hname, &sty, sr, &dty, dr, esize, bits)
        });
        let si = self.indices(src_index);
        let di = self.indices(dst_index);
        let s = format!("%{}", self.global_name.get(src));
        let d = self.mem_name(dst);
        let sep = |n: usize| {
            if n == 0 {
                String::new()
            } else {
                ", ".to_string()
            }
        };
        let idx_tys = |n: usize| (0..n).map(|_| ", index").collect::<String>();
        self.line(&format!(
            "func.call {h}({s}{}{si}, {d}{}{di}) {{smemsync.gather_to_lds}} : ({sty}{}, {dty}{}) -> ()",
            sep(sr),
            sep(dr),
            idx_tys(sr),
            idx_tys(dr)
        ));
    }

    /// The TMA box of a copy between a shared view and a global: the view's shape with leading
    /// unit dimensions up to the global's rank.
    fn tma_box(&self, m: MemRef, g: Global) -> Option<Vec<u64>> {
        let shape = self.k.shape(m);
        let r = self.k.globals[g].shape.len();
        if shape.len() > r || shape.is_empty() {
            return None;
        }
        let mut b = vec![1u64; r - shape.len()];
        b.extend(shape);
        Some(b)
    }

    /// The shared view `view` of a TMA copy as a memref of the box's rank (`box_`): the view
    /// itself when the ranks agree, else a `memref.expand_shape` adding leading unit
    /// dimensions. Returns its name and type.
    fn tma_box_view(&mut self, view: MemRef, box_: &[u64]) -> (String, String) {
        let mt = self.mem_ty(view);
        let m = self.mem_name(view);
        let ty = mt.render();
        let extra = box_.len() - mt.shape.len();
        if extra == 0 {
            return (m, ty);
        }
        // Leading unit dimensions join the first dimension's group.
        let mut groups = vec![format!(
            "[{}]",
            (0..=extra)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )];
        for d in 1..mt.shape.len() {
            groups.push(format!("[{}]", d + extra));
        }
        let s0 =
            mt.strides.first().copied().unwrap_or(1) * mt.shape.first().copied().unwrap_or(1);
        let mut strides = vec![s0; extra];
        strides.extend(mt.strides.iter().copied());
        // expand_shape infers the identity layout for a contiguous view at offset 0.
        let contiguous = MemType::identity(box_, mt.elem);
        let identity = mt.identity || (mt.offset == Some(0) && strides == contiguous.strides);
        let et = MemType {
            shape: box_.to_vec(),
            strides,
            offset: mt.offset,
            elem: mt.elem,
            identity,
        };
        let n = self.fresh(&format!("{}_box", m.trim_start_matches('%')));
        let out: Vec<String> = box_.iter().map(|x| x.to_string()).collect();
        self.line(&format!(
            "%{n} = memref.expand_shape {m} [{}] output_shape [{}] : {ty} into {}",
            groups.join(", "),
            out.join(", "),
            et.render()
        ));
        (format!("%{n}"), et.render())
    }

    /// `tma_load` / `tma_store`: `nvgpu.tma.async.load/store` through the kernel's tensor-map
    /// argument for (global, box); the shared view is expanded to the box's rank.
    fn tma(
        &mut self,
        op: Op,
        view: MemRef,
        g: Global,
        origin: &[Operand],
        mbar: Option<(MemRef, &Vec<Operand>)>,
    ) {
        if !self.t.tma {
            return self.err(op, "TMA copies need sm_90");
        }
        let Some(box_) = self.tma_box(view, g) else {
            return self.err(
                op,
                "a TMA copy whose tile has more dimensions than its global",
            );
        };
        let Some(desc) = self
            .tmaps
            .iter()
            .find(|t| t.0 == g && t.1 == box_)
            .map(|t| t.2.clone())
        else {
            return self.err(op, "a TMA copy without a tensor map");
        };
        let dty = tmap_ty(&box_, self.k.globals[g].elem);
        let (m, ty) = self.tma_box_view(view, &box_);
        let crd = self.indices(origin);
        match mbar {
            Some((mb, mi)) => {
                if let Some((gname, gty, i)) = self.mbar(op, mb, mi) {
                    self.line(&format!(
                        "nvgpu.tma.async.load %{desc}[{crd}], {gname}[{i}] to {m} : {dty}, {gty} -> {ty}"
                    ));
                }
            }
            None => self.line(&format!(
                "nvgpu.tma.async.store {m} to %{desc}[{crd}] : {ty} -> {dty}"
            )),
        }
    }

    fn waitcnt(&mut self, op: Op, cs: &[(Counter, u32)]) {
        if !self.amd() {
            return self.err(op, "`waitcnt` waits on AMD counters");
        }
        let gfx12 = self.t.gfx12_counters();
        let mut fields: [Option<u32>; 5] = [None; 5]; // load store ds exp tensor
        let mut extra = Vec::new();
        for (c, n) in cs {
            let slot = match (c, gfx12) {
                (Counter::VmCnt, false) => Some(0),
                (Counter::LgkmCnt, false) => Some(2),
                (Counter::ExpCnt, _) => Some(3),
                (Counter::LoadCnt, true) => Some(0),
                (Counter::StoreCnt, true) => Some(1),
                (Counter::DsCnt, true) => Some(2),
                (Counter::TensorCnt, true) if self.t.tensor_dma => Some(4),
                (Counter::AsyncCnt, true) if self.t.name == "gfx1250" => {
                    extra.push(format!("rocdl.s.wait.asynccnt {n}"));
                    None
                }
                _ => {
                    return self.err(
                        op,
                        format!(
                            "the counter `{}` does not exist or has no upstream wait op",
                            c.name()
                        ),
                    );
                }
            };
            if let Some(s) = slot {
                fields[s] = Some(fields[s].map_or(*n, |o: u32| o.min(*n)));
            }
        }
        const NAMES: [&str; 5] = ["load", "store", "ds", "exp", "tensor"];
        let parts: Vec<String> = fields
            .iter()
            .zip(NAMES)
            .filter_map(|(f, n)| f.map(|v| format!("{n}({v})")))
            .collect();
        if !parts.is_empty() {
            self.line(&format!("amdgpu.memory_counter_wait {}", parts.join(" ")));
        }
        for e in extra {
            self.line(&e);
        }
    }

    /// An mbarrier reference: (group value, group type, index value).
    fn mbar(&mut self, op: Op, m: MemRef, index: &[Operand]) -> Option<(String, String, String)> {
        if !self.t.mbarrier {
            self.err(op, "mbarriers need sm_90");
            return None;
        }
        let MemRef::Buffer(b) = m else {
            self.err(
                op,
                "an mbarrier op on a view (use the mbarrier array with an index)",
            );
            return None;
        };
        let bd = &self.k.buffers[b];
        if bd.shape.len() != 1 || index.len() != 1 {
            self.err(
                op,
                "a multi-dimensional mbarrier array (use a one-dimensional one)",
            );
            return None;
        }
        let ty = mbar_group_ty(bd.elements());
        let g = format!("%{}", self.buf_name.get(b));
        let i = self.index(&index[0]);
        Some((g, ty, i))
    }

    fn mbar_ptr(&mut self, op: Op, m: MemRef, index: &[Operand]) -> Option<String> {
        let (g, ty, i) = self.mbar(op, m, index)?;
        let a = self.fresh("mbaddr");
        self.line(&format!("%{a} = nvgpu.mbarrier.get {g}[{i}] : {ty} -> i32"));
        let p = self.fresh("mbptr");
        self.line(&format!("%{p} = llvm.inttoptr %{a} : i32 to !llvm.ptr<3>"));
        Some(format!("%{p}"))
    }

    // ---- structure ----

    fn results_lhs(&self, op: Op) -> String {
        let rs = &self.k.ops[op].results;
        if rs.is_empty() {
            String::new()
        } else {
            let v: Vec<String> = rs
                .iter()
                .map(|r| format!("%{}", self.vname.get(*r)))
                .collect();
            format!("{} = ", v.join(", "))
        }
    }

    fn result_tys(&self, op: Op) -> Vec<&'static str> {
        self.k.ops[op]
            .results
            .iter()
            .map(|v| scalar_mlir(self.k.values[*v].ty))
            .collect()
    }

    fn for_op(&mut self, op: Op, lo: &Operand, hi: &Operand, step: &Operand, init: &[Operand]) {
        let body = self.k.ops[op].regions[0];
        let args = self.k.region_args(body).to_vec();
        let l = self.val(lo, ScalarType::I32);
        let h = self.val(hi, ScalarType::I32);
        let s = self.val(step, ScalarType::I32);
        let tys: Vec<ScalarType> = args[1..].iter().map(|a| self.k.values[*a].ty).collect();
        let inits: Vec<String> = init
            .iter()
            .zip(&tys)
            .map(|(o, t)| self.val(o, *t))
            .collect();
        let lhs = self.results_lhs(op);
        let iv = format!("%{}", self.vname.get(args[0]));
        let iter = if args.len() > 1 {
            let items: Vec<String> = args[1..]
                .iter()
                .zip(&inits)
                .map(|(a, i)| format!("%{} = {i}", self.vname.get(*a)))
                .collect();
            format!(
                " iter_args({}) -> ({})",
                items.join(", "),
                self.result_tys(op).join(", ")
            )
        } else {
            String::new()
        };
        self.line(&format!(
            "{lhs}scf.for {iv} = {l} to {h} step {s}{iter} : i32 {{"
        ));
        self.depth += 1;
        self.region(body);
        self.depth -= 1;
        self.line("}");
    }

    fn if_op(&mut self, op: Op, cond: &Operand) {
        let c = self.val(cond, ScalarType::I1);
        let lhs = self.results_lhs(op);
        let tys = self.result_tys(op);
        let rt = if tys.is_empty() {
            String::new()
        } else {
            format!(" -> ({})", tys.join(", "))
        };
        let (then, els) = (self.k.ops[op].regions[0], self.k.ops[op].regions[1]);
        self.line(&format!("{lhs}scf.if {c}{rt} {{"));
        self.depth += 1;
        self.region(then);
        self.depth -= 1;
        if !self.k.region_ops(els).is_empty() || !tys.is_empty() {
            self.line("} else {");
            self.depth += 1;
            self.region(els);
            self.depth -= 1;
        }
        self.line("}");
    }

    fn while_op(&mut self, op: Op, init: &[Operand]) {
        let (before, after) = (self.k.ops[op].regions[0], self.k.ops[op].regions[1]);
        let bargs = self.k.region_args(before).to_vec();
        let aargs = self.k.region_args(after).to_vec();
        let tys: Vec<ScalarType> = bargs.iter().map(|a| self.k.values[*a].ty).collect();
        let inits: Vec<String> = init
            .iter()
            .zip(&tys)
            .map(|(o, t)| self.val(o, *t))
            .collect();
        let lhs = self.results_lhs(op);
        let items: Vec<String> = bargs
            .iter()
            .zip(&inits)
            .map(|(a, i)| format!("%{} = {i}", self.vname.get(*a)))
            .collect();
        let ts: Vec<&str> = tys.iter().map(|t| scalar_mlir(*t)).collect();
        self.line(&format!(
            "{lhs}scf.while ({}) : ({}) -> ({}) {{",
            items.join(", "),
            ts.join(", "),
            ts.join(", ")
        ));
        self.depth += 1;
        self.region(before);
        self.depth -= 1;
        self.line("} do {");
        let bb: Vec<String> = aargs
            .iter()
            .zip(&ts)
            .map(|(a, t)| format!("%{}: {t}", self.vname.get(*a)))
            .collect();
        self.line(&format!("^bb0({}):", bb.join(", ")));
        self.depth += 1;
        self.region(after);
        if !self.k.region_ops(after)
            .last()
            .is_some_and(|o| matches!(self.k.ops[*o].kind, OpKind::Yield(_)))
        {
            self.line("scf.yield");
        } else if let Some(last) = self.k.region_ops(after).last()
            && matches!(&self.k.ops[*last].kind, OpKind::Yield(v) if v.is_empty())
        {
            self.line("scf.yield");
        }
        self.depth -= 1;
        self.line("}");
    }

    fn stage(&mut self, op: Op, name: &str) {
        let body = self.k.ops[op].regions[0];
        let (vals, views) = escapes(self.k, body);
        let mut outs = Vec::new();
        let mut tys = Vec::new();
        for v in &vals {
            let n = self.vname.get(*v).clone();
            outs.push(self.fresh(&format!("{n}_out")));
            tys.push(scalar_mlir(self.k.values[*v].ty).to_string());
        }
        let view_outs: Vec<String> = views
            .iter()
            .map(|v| {
                let n = self.view_name.get(*v).clone();
                self.fresh(&format!("{n}_out"))
            })
            .collect();
        let lhs: Vec<String> = outs
            .iter()
            .chain(&view_outs)
            .map(|o| format!("%{o}"))
            .collect();
        let lhs = if lhs.is_empty() {
            String::new()
        } else {
            format!("{} = ", lhs.join(", "))
        };
        // View types are known once the region is emitted; emit into a buffer first.
        let saved = std::mem::take(&mut self.out);
        self.depth += 1;
        self.region(body);
        let mut yields: Vec<String> = vals
            .iter()
            .map(|v| format!("%{}", self.vname.get(*v)))
            .collect();
        for v in &views {
            yields.push(format!("%{}", self.view_name.get(*v)));
            tys.push(self.view_ty.get(v).map(|t| t.render()).unwrap_or_default());
        }
        if yields.is_empty() {
            self.line("scf.yield");
        } else {
            self.line(&format!(
                "scf.yield {} : {}",
                yields.join(", "),
                tys.join(", ")
            ));
        }
        self.depth -= 1;
        let inner = std::mem::replace(&mut self.out, saved);
        let rt = if tys.is_empty() {
            String::new()
        } else {
            format!(" -> ({})", tys.join(", "))
        };
        self.line(&format!("{lhs}scf.execute_region{rt} {{"));
        self.out.push_str(&inner);
        let name = name.replace('\\', "\\\\").replace('"', "\\\"");
        self.line(&format!("}} {{smemsync.stage = \"{name}\"}}"));
        for (v, o) in vals.iter().zip(outs) {
            self.vname.set(*v, o);
        }
        for (v, o) in views.iter().zip(view_outs) {
            self.view_name.set(*v, o);
        }
    }
}

/// Escapes a string for an MLIR string attribute.
pub fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Writes the row-major indices of element `%e` of a `shape` tile (`total` elements) as
/// `%i0, %i1, ..` and returns them joined.
fn element_indices(s: &mut String, shape: &[u64], total: u64) -> String {
    let mut idx = Vec::new();
    let mut stride: u64 = total;
    for (d, dim) in shape.iter().enumerate() {
        stride /= (*dim).max(1);
        let _ = writeln!(s, "    %s{d} = arith.constant {stride} : i32");
        let _ = writeln!(s, "    %n{d} = arith.constant {dim} : i32");
        let _ = writeln!(s, "    %q{d} = arith.divui %e, %s{d} : i32");
        let _ = writeln!(s, "    %r{d} = arith.remui %q{d}, %n{d} : i32");
        let _ = writeln!(s, "    %i{d} = arith.index_cast %r{d} : i32 to index");
        idx.push(format!("%i{d}"));
    }
    idx.join(", ")
}

/// A collective store helper's loop body: element `%e` at `ix` gets `%x + e`, narrowed to the
/// element type.
fn collective_store_element(s: &mut String, mt: &MemType, sty: ScalarType, ix: &str) {
    let (ty, e) = (mt.render(), elem_mlir(mt.elem));
    if sty == ScalarType::F32 {
        let _ = writeln!(s, "    %ef = arith.sitofp %e : i32 to f32");
        let _ = writeln!(s, "    %v = arith.addf %x, %ef : f32");
    } else {
        let _ = writeln!(s, "    %v = arith.addi %x, %e : i32");
    }
    let v = match mt.elem {
        ElemType::F16 | ElemType::BF16 => {
            let _ = writeln!(s, "    %vn = arith.truncf %v : f32 to {e}");
            "%vn"
        }
        ElemType::I8 | ElemType::I16 => {
            let _ = writeln!(s, "    %vn = arith.trunci %v : i32 to {e}");
            "%vn"
        }
        _ => "%v",
    };
    let _ = writeln!(s, "    memref.store {v}, %m[{ix}] : {ty}");
}

/// The first element a thread of a collective handles (`%first`) and the stride (`%nt`):
/// thread `t` of the layout's `threads` (numbered from its group's first thread) starts at
/// `(t + threads - n % threads) % threads`.
fn collective_first_element(
    s: &mut String,
    lt: crate::ir::layout::LayoutThreads,
    n: u32,
    threads: u32,
) {
    if lt.first == 0 {
        let _ = writeln!(s, "  %t = func.call @__smemsync_tid_linear() : () -> i32");
    } else {
        // A role-relative layout numbers its threads from its group's first (docs/ir.md).
        let _ = writeln!(s, "  %tb = func.call @__smemsync_tid_linear() : () -> i32");
        let _ = writeln!(s, "  %role = arith.constant {} : i32", lt.first);
        let _ = writeln!(s, "  %t = arith.subi %tb, %role : i32");
    }
    let _ = writeln!(s, "  %nt = arith.constant {threads} : i32");
    let _ = writeln!(
        s,
        "  %shift = arith.constant {} : i32",
        threads - n % threads
    );
    let _ = writeln!(s, "  %t1 = arith.addi %t, %shift : i32");
    let _ = writeln!(s, "  %first = arith.remui %t1, %nt : i32");
}

/// The body of a collective load's loop: element `ix` of `%m` widened to `sty` and added to
/// the accumulator `%acc`, then yielded.
fn collective_load_element(s: &mut String, mt: &MemType, sty: ScalarType, ix: &str) {
    let ty = mt.render();
    let st = scalar_mlir(sty);
    let e = elem_mlir(mt.elem);
    let _ = writeln!(s, "    %l = memref.load %m[{ix}] : {ty}");
    let l = match mt.elem {
        ElemType::F16 | ElemType::BF16 => {
            let _ = writeln!(s, "    %lw = arith.extf %l : {e} to f32");
            "%lw"
        }
        ElemType::I8 | ElemType::I16 => {
            let _ = writeln!(s, "    %lw = arith.extsi %l : {e} to i32");
            "%lw"
        }
        _ => "%l",
    };
    let add = if sty == ScalarType::F32 {
        "addf"
    } else {
        "addi"
    };
    let _ = writeln!(s, "    %a = arith.{add} %acc, {l} : {st}");
    let _ = writeln!(s, "    scf.yield %a : {st}");
}

/// The function `@{name}` of a collective access to the memref type `mt`: each thread visits
/// every `threads`-th element from its first ([`collective_first_element`]); a load returns the
/// sum of the elements it visits ([`collective_load_element`]), a store writes each of them
/// ([`collective_store_element`]).
fn collective_helper(
    name: &str,
    mt: &MemType,
    sty: ScalarType,
    n: u32,
    lt: crate::ir::layout::LayoutThreads,
    store: bool,
) -> String {
    let threads = lt.count.max(1);
    let ty = mt.render();
    let st = scalar_mlir(sty);
    let total: u64 = mt.shape.iter().product();
    let mut s = String::new();
    let sig = if store {
        format!("%m: {ty}, %x: {st}")
    } else {
        format!("%m: {ty}")
    };
    let ret = if store {
        String::new()
    } else {
        format!(" -> {st}")
    };
    let _ = writeln!(s, "func.func private @{name}({sig}){ret} {{");
    collective_first_element(&mut s, lt, n, threads);
    let _ = writeln!(s, "  %end = arith.constant {total} : i32");
    let zero = if sty == ScalarType::F32 {
        "0.0 : f32"
    } else {
        "0 : i32"
    };
    let _ = writeln!(s, "  %zero = arith.constant {zero}");
    let (open, close) = if store {
        (
            "  scf.for %e = %first to %end step %nt : i32 {".to_string(),
            "  }".to_string(),
        )
    } else {
        (
            format!(
                "  %sum = scf.for %e = %first to %end step %nt iter_args(%acc = %zero) -> ({st}) : i32 {{"
            ),
            "  }".to_string(),
        )
    };
    let _ = writeln!(s, "{open}");
    let ix = element_indices(&mut s, &mt.shape, total);
    if store {
        collective_store_element(&mut s, mt, sty, &ix);
    } else {
        collective_load_element(&mut s, mt, sty, &ix);
    }
    let _ = writeln!(s, "{close}");
    if store {
        let _ = writeln!(s, "  return");
    } else {
        let _ = writeln!(s, "  return %sum : {st}");
    }
    s.push_str("}\n");
    s
}

/// The gfx1250 per-lane async copy of one element: byte addresses from each memref's aligned
/// pointer, offset and strides.
fn gather_helper(
    name: &str,
    sty: &str,
    sr: usize,
    dty: &str,
    dr: usize,
    esize: u64,
    bits: &str,
) -> String {
    let mut s = String::new();
    let sargs: String = (0..sr).map(|i| format!(", %s{i}: index")).collect();
    let dargs: String = (0..dr).map(|i| format!(", %d{i}: index")).collect();
    let _ = writeln!(
        s,
        "func.func private @{name}(%src: {sty}{sargs}, %dst: {dty}{dargs}) {{"
    );
    let _ = writeln!(s, "  %esize = arith.constant {esize} : index");
    for (p, m, ty, rank, ptr) in [("s", "%src", sty, sr, "i64"), ("d", "%dst", dty, dr, "i32")] {
        let space = if p == "s" {
            format!(", {GLOBAL_AMD}")
        } else {
            format!(", {WORKGROUP}")
        };
        let elem = ty
            .trim_start_matches("memref<")
            .split(',')
            .next()
            .unwrap_or("")
            .rsplit('x')
            .next()
            .unwrap_or("f32")
            .trim_end_matches('>')
            .to_string();
        let sizes: Vec<String> = (0..rank).map(|i| format!("%{p}size{i}")).collect();
        let strides: Vec<String> = (0..rank).map(|i| format!("%{p}stride{i}")).collect();
        let mut lhs = vec![format!("%{p}base"), format!("%{p}off")];
        lhs.extend(sizes.iter().cloned());
        lhs.extend(strides.iter().cloned());
        let idx_tys: String = (0..2 * rank + 1).map(|_| ", index").collect::<String>();
        let _ = writeln!(
            s,
            "  {} = memref.extract_strided_metadata {m} : {ty} -> memref<{elem}{space}>{idx_tys}",
            lhs.join(", ")
        );
        let mut acc = format!("%{p}off");
        for i in 0..rank {
            let _ = writeln!(s, "  %{p}t{i} = arith.muli %{p}{i}, %{p}stride{i} : index");
            let _ = writeln!(s, "  %{p}l{i} = arith.addi {acc}, %{p}t{i} : index");
            acc = format!("%{p}l{i}");
        }
        let _ = writeln!(s, "  %{p}bytes = arith.muli {acc}, %esize : index");
        let _ = writeln!(
            s,
            "  %{p}ptr = memref.extract_aligned_pointer_as_index {m} : {ty} -> index"
        );
        let _ = writeln!(s, "  %{p}addr = arith.addi %{p}ptr, %{p}bytes : index");
        let _ = writeln!(s, "  %{p}int = arith.index_cast %{p}addr : index to {ptr}");
        let asp = if p == "s" { 1 } else { 3 };
        let _ = writeln!(
            s,
            "  %{p}p = llvm.inttoptr %{p}int : {ptr} to !llvm.ptr<{asp}>"
        );
    }
    let _ = writeln!(
        s,
        "  rocdl.global.load.async.to.lds.{bits} %sp, %dp, 0, 0 : !llvm.ptr<1>, !llvm.ptr<3>"
    );
    let _ = writeln!(s, "  return");
    s.push_str("}\n");
    s
}

/// The nvgpu tensor-map type of a TMA box.
fn tmap_ty(box_: &[u64], elem: ElemType) -> String {
    let dims: String = box_.iter().map(|d| format!("{d}x")).collect();
    format!(
        "!nvgpu.tensormap.descriptor<tensor = memref<{dims}{}, {WORKGROUP}>, swizzle = none, l2promo = none, oob = zero, interleave = none>",
        elem_mlir(elem)
    )
}

fn mbar_group_ty(n: u64) -> String {
    format!("!nvgpu.mbarrier.group<memorySpace = {WORKGROUP}, num_barriers = {n}>")
}

/// Values and views defined in `r` (at any depth, outside nested loop bodies' arguments)
/// and used by ops outside `r`, in definition order.
fn escapes(k: &Kernel, r: Region) -> (Vec<Value>, Vec<View>) {
    let mut inside_ops = HashSet::new();
    let mut defs = Vec::new();
    let mut vdefs = Vec::new();
    fn walk(
        k: &Kernel,
        r: Region,
        ops: &mut HashSet<Op>,
        defs: &mut Vec<Value>,
        vdefs: &mut Vec<View>,
        top: bool,
    ) {
        for &op in k.region_ops(r) {
            ops.insert(op);
            let od = &k.ops[op];
            if top {
                defs.extend(od.results.iter().copied());
                if let OpKind::ViewDef(v) = od.kind {
                    vdefs.push(v);
                }
            }
            // Only a nested stage is transparent; other regions scope their definitions.
            let nested_top = top && matches!(od.kind, OpKind::Stage { .. });
            for &c in &od.regions {
                walk(k, c, ops, defs, vdefs, nested_top);
            }
        }
    }
    walk(k, r, &mut inside_ops, &mut defs, &mut vdefs, true);
    let mut used_vals = HashSet::new();
    let mut used_views = HashSet::new();
    k.walk(|op| {
        if inside_ops.contains(&op) {
            return;
        }
        let kind = &k.ops[op].kind;
        kind.for_each_operand(|o| used_vals.extend(o.value()));
        kind.for_each_memref(|m| used_views.extend(m.view()));
        // Views used as the base of other views outside also count, as do their indices.
        if let OpKind::ViewDef(v) = kind {
            let vd = &k.views[*v];
            used_views.extend(vd.base.view());
            for i in &vd.indices {
                if let ViewIndex::At(a) = i {
                    used_vals.extend(a.value());
                }
            }
        }
    });
    (
        defs.into_iter().filter(|v| used_vals.contains(v)).collect(),
        vdefs
            .into_iter()
            .filter(|v| used_views.contains(v))
            .collect(),
    )
}

const REM_HELPER: &str = "func.func private @__smemsync_rem_i32(%a: i32, %b: i32) -> i32 {
  %r = arith.remsi %a, %b : i32
  %z = arith.constant 0 : i32
  %nz = arith.cmpi ne, %r, %z : i32
  %rneg = arith.cmpi slt, %r, %z : i32
  %bneg = arith.cmpi slt, %b, %z : i32
  %differ = arith.xori %rneg, %bneg : i1
  %fix = arith.andi %nz, %differ : i1
  %rb = arith.addi %r, %b : i32
  %out = arith.select %fix, %rb, %r : i32
  return %out : i32
}
";

const SHL_HELPER: &str = "func.func private @__smemsync_shl_i32(%a: i32, %b: i32) -> i32 {
  %m = arith.constant 31 : i32
  %s = arith.andi %b, %m : i32
  %r = arith.shli %a, %s : i32
  return %r : i32
}
";

const SHR_HELPER: &str = "func.func private @__smemsync_shr_i32(%a: i32, %b: i32) -> i32 {
  %m = arith.constant 31 : i32
  %s = arith.andi %b, %m : i32
  %r = arith.shrsi %a, %s : i32
  return %r : i32
}
";

const FTOI_HELPER: &str = "func.func private @__smemsync_ftoi(%a: f32) -> i32 {
  %lo = arith.constant -2147483648.0 : f32
  %hi = arith.constant 2147483520.0 : f32
  %top = arith.constant 2147483648.0 : f32
  %imax = arith.constant 2147483647 : i32
  %zero = arith.constant 0 : i32
  %c0 = arith.maximumf %a, %lo : f32
  %c1 = arith.minimumf %c0, %hi : f32
  %i = arith.fptosi %c1 : f32 to i32
  %big = arith.cmpf oge, %a, %top : f32
  %s = arith.select %big, %imax, %i : i32
  %nan = arith.cmpf uno, %a, %a : f32
  %r = arith.select %nan, %zero, %s : i32
  return %r : i32
}
";

const IN_GROUP_HELPER: &str = "func.func private @__smemsync_in_group(%lo: i32, %hi: i32) -> i1 {
  %t = func.call @__smemsync_tid_linear() : () -> i32
  %ge = arith.cmpi sge, %t, %lo : i32
  %lt = arith.cmpi slt, %t, %hi : i32
  %r = arith.andi %ge, %lt : i1
  return %r : i1
}
";

fn lane_warp_helper(name: &str, op: &str, w: u32) -> String {
    format!(
        "func.func private @__smemsync_{name}() -> i32 {{\n\
         \x20 %t = func.call @__smemsync_tid_linear() : () -> i32\n\
         \x20 %w = arith.constant {w} : i32\n\
         \x20 %r = arith.{op} %t, %w : i32\n\
         \x20 return %r : i32\n}}\n"
    )
}

/// `compute`: result `j` is the sum of the arguments converted to the result's type, plus
/// `j`, left to right; an `i1` result is the sum's lowest bit (docs/ir.md).
fn compute_helper(name: &str, args: &[ScalarType], res: &[ScalarType]) -> String {
    let mut s = String::new();
    let ps: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, t)| format!("%a{i}: {}", scalar_mlir(*t)))
        .collect();
    let rs: Vec<&str> = res.iter().map(|t| scalar_mlir(*t)).collect();
    let rt = if rs.len() == 1 {
        rs[0].to_string()
    } else {
        format!("({})", rs.join(", "))
    };
    let _ = writeln!(s, "func.func private @{name}({}) -> {rt} {{", ps.join(", "));
    let outs: Vec<String> = (res.iter().enumerate())
        .map(|(j, rty)| compute_result(&mut s, j, args, *rty))
        .collect();
    let _ = writeln!(s, "  return {} : {}", outs.join(", "), rs.join(", "));
    s.push_str("}\n");
    s
}

/// Writes result `j` of [`compute_helper`] (of type `rty`) into `s`: the arguments summed in
/// `f32` for an `f32` result, else `i32`, plus `j`, truncated to its lowest bit for `i1`.
/// Returns the value holding it.
fn compute_result(s: &mut String, j: usize, args: &[ScalarType], rty: ScalarType) -> String {
    let acc_ty = if rty == ScalarType::F32 {
        ScalarType::F32
    } else {
        ScalarType::I32
    };
    let at = scalar_mlir(acc_ty);
    let op = if acc_ty == ScalarType::F32 {
        "addf"
    } else {
        "addi"
    };
    // Start from j (the sum of arguments, then + j; addition of the j constant last).
    let mut cur: Option<String> = None;
    for (i, aty) in args.iter().enumerate() {
        let term = compute_arg(s, (j, i), *aty, acc_ty);
        cur = Some(match cur {
            None => term,
            Some(c) => {
                let n = format!("%r{j}_s{i}");
                let _ = writeln!(s, "  {n} = arith.{op} {c}, {term} : {at}");
                n
            }
        });
    }
    let jc = format!("%r{j}_j");
    if acc_ty == ScalarType::F32 {
        let _ = writeln!(s, "  {jc} = arith.constant {}.0 : f32", j);
    } else {
        let _ = writeln!(s, "  {jc} = arith.constant {j} : i32");
    }
    let total = match cur {
        None => jc,
        Some(c) => {
            let n = format!("%r{j}");
            let _ = writeln!(s, "  {n} = arith.{op} {c}, {jc} : {at}");
            n
        }
    };
    if rty == ScalarType::I1 {
        let n = format!("%r{j}_bit");
        let _ = writeln!(s, "  {n} = arith.trunci {total} : i32 to i1");
        n
    } else {
        total
    }
}

/// Argument `i` of [`compute_helper`] (of type `aty`) in the accumulator type `acc_ty` of
/// result `j`: the argument itself when the types agree, else a conversion written into `s`.
fn compute_arg(s: &mut String, (j, i): (usize, usize), aty: ScalarType, acc_ty: ScalarType) -> String {
    let conv = format!("%r{j}_a{i}");
    let at = scalar_mlir(acc_ty);
    match (aty, acc_ty) {
        (ScalarType::F32, ScalarType::F32) | (ScalarType::I32, ScalarType::I32) => {
            return format!("%a{i}");
        }
        (ScalarType::I1, ScalarType::I32) => {
            let _ = writeln!(s, "  {conv} = arith.extui %a{i} : i1 to i32");
        }
        (ScalarType::I1, ScalarType::F32) => {
            let _ = writeln!(s, "  {conv} = arith.uitofp %a{i} : i1 to f32");
        }
        (ScalarType::I32, ScalarType::F32) => {
            let _ = writeln!(s, "  {conv} = arith.sitofp %a{i} : i32 to f32");
        }
        (ScalarType::F32, ScalarType::I32) => {
            let _ = writeln!(
                s,
                "  {conv} = func.call @__smemsync_ftoi(%a{i}) : (f32) -> i32"
            );
        }
        _ => {
            let _ = writeln!(s, "  {conv} = arith.constant 0 : {at}");
        }
    }
    conv
}

/// A kernel's shared memory as `gpu.func` declares it ([`Emitter::workgroup`]).
struct Workgroup {
    /// The workgroup attributions, `%name : type`.
    wg: Vec<String>,
    /// The byte arena of the pinned buffers (name and type), if any.
    arena: Option<(String, String)>,
    /// The buffers placed in the arena.
    pinned: Vec<Buffer>,
    /// The mbarrier buffers.
    mbars: Vec<Buffer>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_tokens_is_a_zero_counter_wait_on_amd_and_a_diagnostic_on_nvidia() {
        let amd = crate::reader::parse_kernel(
            "kernel @k(%A: global f16[64, 256]) block(64) {\n  shared @a : f16[64, 32]\n  %tok = tdm_load @a <- %A[0, 32]\n  wait_tokens %tok\n}\n",
        )
        .expect("parses");
        let t = Target::from_name("gfx1250").expect("target");
        let out = emit_mlir(&amd, &t).expect("emits");
        assert!(
            out.contains("amdgpu.memory_counter_wait tensor(0)"),
            "{out}"
        );
        let nv = crate::reader::parse_kernel(
            "kernel @k(%A: global f32[64]) block(64) {\n  shared @a : f32[64]\n  %t = tid.x\n  %tok = cp_async @a[%t] <- %A[%t]\n  cp_async_commit\n  wait_tokens %tok\n}\n",
        )
        .expect("parses");
        let t = Target::from_name("sm_80").expect("target");
        let d = emit_mlir(&nv, &t).expect_err("no per-copy cp.async wait");
        assert!(d[0].message.contains("wait_tokens"), "{d:?}");
    }

    #[test]
    fn float_literals_read_back_exactly() {
        assert_eq!(f32_literal(1.5), "1.5");
        assert_eq!(f32_literal(1e-7), format!("0x{:08X}", 1e-7f32.to_bits()));
        assert_eq!(
            f32_literal(f32::NAN),
            format!("0x{:08X}", f32::NAN.to_bits())
        );
    }

    #[test]
    fn names_are_fresh_and_deterministic() {
        let k = crate::reader::parse_kernel(
            "kernel @k(%y_idx: global i32[8]) block(4) {\n  %x = tid.x\n  %y = add %x, 1\n  %v = gload %y_idx[%y]\n  %w = gload %y_idx[%y]\n  gstore %y_idx[%x], %v\n}\n",
        )
        .expect("parses");
        let t = Target::from_name("gfx942").expect("target");
        let a = emit_mlir(&k, &t).expect("emits");
        assert_eq!(a, emit_mlir(&k, &t).expect("emits"));
        // `%y_idx` is the global; the index casts of %y must take other names, one each.
        assert!(
            a.contains("%y_idx_1 = arith.index_cast %y : i32 to index"),
            "{a}"
        );
        assert!(
            a.contains("%y_idx_2 = arith.index_cast %y : i32 to index"),
            "{a}"
        );
        // The thread id is used as an index directly.
        assert!(a.contains("memref.store %v, %y_idx[%x]"), "{a}");
        let defs: Vec<&str> = a
            .lines()
            .filter_map(|l| l.trim().split(" = ").next())
            .filter(|s| s.starts_with('%'))
            .collect();
        let uniq: HashSet<&&str> = defs.iter().collect();
        assert_eq!(uniq.len(), defs.len(), "duplicate SSA names in\n{a}");
    }
}
