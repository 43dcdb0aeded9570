//! The CUDA C++ emitter: writes a kernel as a self-contained `.cu` file (the `__global__`
//! kernel plus, optionally, a host harness) that `nvcc -arch=sm_80|sm_90` compiles.
//!
//! What it computes. The kernel body follows the IR op by op (docs/ir.md is the contract):
//! values become `const` locals, `for`/`if`/`while` become C++ loops and branches with their
//! iteration values and results as mutable locals assigned in parallel at each `yield`, and a
//! `stage` is emitted in place (it is transparent). Shared buffers are `__shared__` arrays
//! aligned to 16 bytes, or, when any buffer is pinned (`at N`) or shared memory exceeds the
//! 48 KiB static limit, typed pointers into one raw `__shared__` byte array at their offsets
//! (dynamic shared memory above 48 KiB). A view is an element offset into its root buffer plus
//! static strides, so every access is pointer/index arithmetic.
//!
//! Semantics kept bit-exact with the interpreter: `i32` arithmetic wraps (done in `unsigned`);
//! `div`/`rem` round toward negative infinity; shifts take the amount modulo 32 and `shr` is
//! arithmetic; `f32` `add/sub/mul/div` use the `__f*_rn` intrinsics so that `nvcc` never
//! contracts them into FMAs; `ftoi` truncates, saturates and maps NaN to 0; `cmp` on floats is
//! ordered (`ne` is false on NaN); `compute` is the sum of its arguments plus the result index;
//! f16/bf16 storage rounds to nearest even (`__float2half_rn`, `__float2bfloat16_rn`).
//! `exp` uses `expf` (within 2 ulp, so float comparisons need a tolerance). Collective
//! `local_load`/`local_store` use the interpreter's concrete layout mapping
//! `owner(e) = (e + n) mod T`, with layouts numbered in order of first appearance.
//!
//! Sync ops: `barrier` → `__syncthreads()`, `warp_sync` → `__syncwarp()`, named barriers →
//! inline PTX `bar.arrive`/`bar.sync id, n`, `cp_async` (4-byte elements) → inline PTX
//! `cp.async.ca.shared.global` with `commit_group`/`wait_group N`, mbarriers →
//! `mbarrier.init/arrive/expect_tx/try_wait.parity/inval`. A TMA tile copy is emitted as one
//! non-tensor bulk copy per contiguous row (`cp.async.bulk...mbarrier::complete_tx::bytes`),
//! each completing its bytes on the mbarrier: that keeps the IR's semantics (the whole view,
//! completion by the mbarrier phase) without building a `CUtensorMap` on the host; rows must
//! be multiples of 16 bytes. TMA stores use `cp.async.bulk.global.shared::cta.bulk_group` with
//! `bulk_commit`/`bulk_wait` → `commit_group`/`wait_group.read`. In a kernel whose shared
//! memory is read by the async proxy (TMA store) and that has no `fence_proxy_async` of its
//! own, each generic shared write is followed by `fence.proxy.async.shared::cta`;
//! `fence_proxy_async` → the same fence. `wgmma`, AMD-only ops (`gather_to_lds`, `tdm_load`,
//! `waitcnt`, split barriers) and ops the target lacks are diagnostics, never panics.
//!
//! Options: `strip_syncs` removes every thread barrier and cp.async wait (the racy lower
//! bound on time; mbarrier waits and bulk waits stay, since removing them breaks the mbarrier
//! phase protocol or lets the block exit while the copy engine still reads its shared memory);
//! `drop_sync` removes only the N-th sync op in program order (a mutation test).
//!
//! The harness fills every global buffer from a seed exactly as docs/ir.md section 3 says
//! (splitmix64), takes scalar parameters from `--param name=value`, launches with the
//! kernel's block and grid (`--grid` overrides the grid), and writes each global buffer to
//! `OUTDIR/<name>.txt`, one element per line (integers in decimal, floats as `%.9e`).
//! `--time N` instead launches a warm-up and N timed runs (device events) and prints one line
//! with the median.
//!
//! Complexity: O(ops + operands) plus O(buffers) for the layout.

use std::collections::HashMap;
use std::fmt::Write;

mod wgmma;

use crate::analysis::regdeps::RegSources;
use crate::diag::{DiagKind, Diagnostic};
use super::names::NameTable;
use crate::ir::*;
use crate::ir::layout::{Distributed, Owned, Ownership, layout_threads, ownership};
use crate::ir::signature::Feature;
use crate::target::{Target, Vendor};
use crate::verify::target_ops::has;

/// Options of the CUDA emitter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaOptions {
    /// Remove every thread barrier and cp.async wait: a racy build that bounds the time
    /// synchronization costs from below.
    pub strip_syncs: bool,
    /// Remove the N-th (0-based) sync op in program order (see [`sync_ops`]): a mutation.
    pub drop_sync: Option<usize>,
    /// Emit the host harness (`main`) after the kernel.
    pub harness: bool,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            strip_syncs: false,
            drop_sync: None,
            harness: true,
        }
    }
}

/// Static shared memory a block may declare without opting in to more.
const STATIC_SMEM_LIMIT: u64 = 48 * 1024;
/// Shared memory a block may use on sm_80/sm_90 after opting in.
const MAX_SMEM: u64 = 227 * 1024;

/// The sync ops of a kernel in program order: the ops a mutation may drop, numbered as
/// [`CudaOptions::drop_sync`] counts them (barriers, warp syncs, named barriers and every
/// wait; commits, mbarrier init/arrive/expect_tx/inval are protocol, not ordering).
pub fn sync_ops(k: &Kernel) -> Vec<Op> {
    k.ops_in_order()
        .into_iter()
        .filter(|&op| is_droppable(&k.ops[op].kind))
        .collect()
}

fn is_droppable(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::Barrier
            | OpKind::WarpSync
            | OpKind::NamedArrive { .. }
            | OpKind::NamedSync { .. }
            | OpKind::CpAsyncWait(_)
            | OpKind::WaitTokens(_)
            | OpKind::MbarWait { .. }
            | OpKind::BulkWait(_)
            | OpKind::WgmmaWait(_)
            | OpKind::WaitCnt(_)
            | OpKind::SplitSignal(_)
            | OpKind::SplitWait(_)
    )
}

/// Whether `strip_syncs` removes the op.
fn is_stripped(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::Barrier
            | OpKind::WarpSync
            | OpKind::NamedArrive { .. }
            | OpKind::NamedSync { .. }
            | OpKind::CpAsyncWait(_)
            | OpKind::WaitTokens(_)
    )
}

/// Emits one kernel as a CUDA C++ translation unit.
pub fn emit_cuda(
    k: &Kernel,
    target: &Target,
    opts: &CudaOptions,
) -> Result<String, Vec<Diagnostic>> {
    if target.vendor != Vendor::Nvidia {
        return Err(vec![
            Diagnostic::user(
                "E0700",
                format!("CUDA C++ needs an NVIDIA target, not `{}`", target.name),
            )
            .with_label(k.kernel_span, "this kernel")
            .with_help("use `--target sm_80` or `--target sm_90`"),
        ]);
    }
    let mut e = Emitter::new(k, target, opts);
    e.layout();
    e.check_supported();
    if !e.errors.is_empty() {
        return Err(e.errors);
    }
    e.prelude();
    e.kernel();
    if opts.harness {
        e.harness();
    }
    if e.errors.is_empty() {
        Ok(e.out)
    } else {
        Err(e.errors)
    }
}

/// How shared memory is declared.
#[derive(Clone, Debug, PartialEq)]
enum SmemLayout {
    /// One `__shared__` array per buffer.
    Separate,
    /// Pointers into one raw byte array: byte offset of each buffer, total bytes, and
    /// whether the array is dynamic (above the static limit).
    Raw {
        offsets: Vec<u64>,
        total: u64,
        dynamic: bool,
    },
}

struct Emitter<'a> {
    k: &'a Kernel,
    target: &'a Target,
    opts: &'a CudaOptions,
    out: String,
    errors: Vec<Diagnostic>,
    names: SecondaryMap<Value, String>,
    view_names: SecondaryMap<View, String>,
    layout_ids: HashMap<Op, u32>,
    smem: SmemLayout,
    /// The kernel has async-proxy readers of shared memory (TMA store).
    async_readers: bool,
    /// Droppable sync ops in program order.
    syncs: Vec<Op>,
    depth: usize,
    fresh: usize,
    /// Where wgmma results flow (kernels with wgmma only): their values are mutable locals
    /// and their readers are pinned after the wait (`cuda::wgmma`).
    wgmma_regs: Option<RegSources<'a>>,
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn c_type(t: ScalarType) -> &'static str {
    match t {
        ScalarType::I1 => "bool",
        ScalarType::I32 | ScalarType::Token => "int",
        ScalarType::F32 => "float",
    }
}

fn elem_c_type(e: ElemType) -> &'static str {
    match e {
        ElemType::I8 => "signed char",
        ElemType::I16 => "short",
        ElemType::I32 => "int",
        ElemType::F16 => "__half",
        ElemType::BF16 => "__nv_bfloat16",
        ElemType::F32 => "float",
        ElemType::MBarrier => "unsigned long long",
    }
}

/// A C++ literal of a scalar converted to type `ty`.
fn literal(s: Scalar, ty: ScalarType) -> String {
    match ty {
        ScalarType::I1 => (if s.truthy() { "true" } else { "false" }).to_string(),
        ScalarType::I32 | ScalarType::Token => {
            let v = match s {
                Scalar::F32(f) => ftoi(f),
                _ => s.as_i64() as i32,
            };
            int_literal(v as i64)
        }
        ScalarType::F32 => float_literal(s.as_f32()),
    }
}

fn int_literal(v: i64) -> String {
    if v == i32::MIN as i64 {
        "(-2147483647 - 1)".into()
    } else if v < 0 {
        format!("({v})")
    } else {
        format!("{v}")
    }
}

/// An f32 literal that reads back bit-exactly (shortest round-trip digits, or the bit
/// pattern for non-finite values).
fn float_literal(f: f32) -> String {
    if !f.is_finite() {
        return format!("__int_as_float(0x{:08x})", f.to_bits());
    }
    let s = format!("{f:?}");
    let s = if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    };
    if f.is_sign_negative() {
        format!("({s}f)")
    } else {
        format!("{s}f")
    }
}

/// `ftoi` of docs/ir.md: truncate toward zero, saturate, NaN gives 0 (Rust's `as`).
fn ftoi(f: f32) -> i32 {
    f as i32
}

impl<'a> Emitter<'a> {
    fn new(k: &'a Kernel, target: &'a Target, opts: &'a CudaOptions) -> Self {
        let mut table = NameTable::default();
        let mut unique = |base: String| table.unique(&base);
        let mut names = SecondaryMap::default();
        for v in k.values.keys() {
            let src = k.value_names.get(v);
            let base = if src.is_empty() {
                format!("v_{}", v.index())
            } else {
                format!("v_{}", sanitize(src))
            };
            names.set(v, unique(base));
        }
        let mut view_names = SecondaryMap::default();
        for v in k.views.keys() {
            let src = k.view_names.get(v);
            let base = if src.is_empty() {
                format!("w_{}", v.index())
            } else {
                format!("w_{}", sanitize(src))
            };
            view_names.set(v, unique(base));
        }
        let mut async_readers = false;
        let mut explicit_fences = false;
        for op in k.ops_in_order() {
            match &k.ops[op].kind {
                OpKind::TmaStore { .. } => async_readers = true,
                OpKind::FenceProxyAsync => explicit_fences = true,
                _ => {}
            }
        }
        // A kernel that places its proxy fences (`sync` on sm_90) gets exactly those.
        let async_readers = async_readers && !explicit_fences;
        Emitter {
            k,
            target,
            opts,
            out: String::new(),
            errors: Vec::new(),
            names,
            view_names,
            layout_ids: k.layout_ids(target.warp),
            smem: SmemLayout::Separate,
            async_readers,
            syncs: sync_ops(k),
            depth: 0,
            fresh: 0,
            wgmma_regs: wgmma::uses_wgmma(k).then(|| RegSources::new(k)),
        }
    }

    fn err(&mut self, op: Op, code: &'static str, msg: impl Into<String>) {
        let d = Diagnostic::error(DiagKind::User, code, msg)
            .with_label(self.k.span(op), "cannot be emitted as CUDA C++");
        self.errors.push(d);
    }

    // ---------------------------------------------------------------- layout and checks

    fn layout(&mut self) {
        let k = self.k;
        let pinned = k.buffers.values().any(|b| b.offset.is_some());
        let separate_total: u64 = k
            .buffers
            .values()
            .map(|b| b.bytes().div_ceil(16) * 16)
            .sum();
        if !pinned && separate_total <= STATIC_SMEM_LIMIT {
            self.smem = SmemLayout::Separate;
            return;
        }
        let mut end = k
            .buffers
            .values()
            .filter_map(|b| b.offset.map(|o| o + b.bytes()))
            .max()
            .unwrap_or(0);
        let mut offsets = Vec::new();
        for b in k.buffers.values() {
            match b.offset {
                Some(o) => offsets.push(o),
                None => {
                    end = end.div_ceil(16) * 16;
                    offsets.push(end);
                    end += b.bytes();
                }
            }
        }
        let total = end.max(16);
        if total > MAX_SMEM {
            self.errors.push(
                Diagnostic::user("E0701", format!("the kernel needs {total} bytes of shared memory, more than the {MAX_SMEM} a block may use"))
                    .with_label(k.kernel_span, "this kernel"),
            );
        }
        self.smem = SmemLayout::Raw {
            offsets,
            total,
            dynamic: total > STATIC_SMEM_LIMIT,
        };
    }

    fn check_supported(&mut self) {
        let k = self.k;
        let t = self.target;
        for op in k.ops_in_order() {
            if let Some((code, msg)) = unavailable(&k.ops[op].kind, t) {
                self.err(op, code, msg);
                continue;
            }
            match &k.ops[op].kind {
                OpKind::Wgmma { a, b, acc } => self.check_wgmma(op, a, *b, acc),
                OpKind::TmaLoad { dst, src, .. } | OpKind::TmaStore { dst: src, src: dst, .. } => {
                    let (dst, src) = (*dst, *src);
                    let shape = k.shape(dst);
                    let elem = k.elem(dst);
                    let row = shape.last().copied().unwrap_or(1) * elem.bytes();
                    if elem != k.globals[src].elem {
                        self.err(op, "E0705", format!(
                            "a bulk copy moves bytes: the shared element type `{elem}` differs from the global `{}`",
                            k.globals[src].elem
                        ));
                    } else if !row.is_multiple_of(16) {
                        self.err(op, "E0705", format!(
                            "a bulk copy row must be a multiple of 16 bytes; the view's rows are {row} bytes"
                        ));
                    } else if shape.len() > k.globals[src].shape.len() {
                        self.err(op, "E0705", "the tile has more dimensions than the global buffer");
                    }
                }
                OpKind::NamedArrive { count, .. } | OpKind::NamedSync { count, .. } if !count.is_multiple_of(32) => {
                    self.err(op, "E0706", format!("`bar.sync`/`bar.arrive` need a thread count that is a multiple of 32, not {count}"))
                }
                OpKind::Binary(b, ..)
                    if matches!(b, BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr)
                        && k.ops[op].results.first().is_some_and(|v| k.values[*v].ty == ScalarType::F32) =>
                {
                    self.err(op, "E0709", format!("`{}` has no meaning on f32", b.name()))
                }
                OpKind::Unary(UnOp::Not, _)
                    if k.ops[op].results.first().is_some_and(|v| k.values[*v].ty == ScalarType::F32) =>
                {
                    self.err(op, "E0709", "`not` has no meaning on f32")
                }
                OpKind::Atomic { op: a, mem, .. } => {
                    let e = k.elem(*mem);
                    self.check_atomic(op, *a, e);
                }
                OpKind::GAtomic { op: a, global, .. } => {
                    let e = k.globals[*global].elem;
                    self.check_atomic(op, *a, e);
                }
                OpKind::WaitTokens(ts) => {
                    for tv in ts {
                        let from_cp_async = match k.values[*tv].def {
                            ValueDef::Result(d, _) => matches!(k.ops[d].kind, OpKind::CpAsync { .. } | OpKind::CpAsyncTile(_)),
                            _ => false,
                        };
                        if !from_cp_async {
                            self.err(op, "E0707", "`wait_tokens` is emitted only for cp.async tokens (as `cp.async.wait_all`)");
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn check_atomic(&mut self, op: Op, a: AtomicOp, e: ElemType) {
        let ok = match e {
            ElemType::I32 => true,
            ElemType::F32 => matches!(a, AtomicOp::Add | AtomicOp::Exch),
            _ => false,
        };
        if !ok {
            self.err(
                op,
                "E0708",
                format!("CUDA has no atomic `{}` on `{e}` elements", a.name()),
            );
        }
    }

    // ---------------------------------------------------------------- text helpers

    fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn v(&self, v: Value) -> String {
        self.names.get(v).clone()
    }

    fn ty(&self, v: Value) -> ScalarType {
        self.k.values[v].ty
    }

    fn operand_ty(&self, o: &Operand) -> ScalarType {
        match o {
            Operand::Value(v) => self.ty(*v),
            Operand::Imm(s) => s.ty(),
        }
    }

    /// An operand as an expression of type `ty`.
    fn opnd(&self, o: &Operand, ty: ScalarType) -> String {
        match o {
            Operand::Value(v) => self.v(*v),
            Operand::Imm(s) => literal(*s, ty),
        }
    }

    fn int(&self, o: &Operand) -> String {
        self.opnd(o, ScalarType::I32)
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn buf_name(&self, b: Buffer) -> String {
        format!("s_{}", sanitize(&self.k.buffers[b].name))
    }

    fn global_name(&self, g: Global) -> String {
        format!("g_{}", sanitize(&self.k.globals[g].name))
    }

    /// Element strides of a memref (row-major over its root buffer).
    fn strides(&self, m: MemRef) -> Vec<u64> {
        match m {
            MemRef::Buffer(b) => {
                let shape = &self.k.buffers[b].shape;
                let mut s = vec![1u64; shape.len()];
                for i in (0..shape.len().saturating_sub(1)).rev() {
                    s[i] = s[i + 1] * shape[i + 1];
                }
                s
            }
            MemRef::View(v) => {
                let vd = &self.k.views[v];
                let base = self.strides(vd.base);
                let mut out = Vec::new();
                for (i, ix) in vd.indices.iter().enumerate() {
                    if matches!(ix, ViewIndex::Range(..)) {
                        out.push(base.get(i).copied().unwrap_or(1));
                    }
                }
                out.extend(base.iter().skip(vd.indices.len()));
                out
            }
        }
    }

    /// The element offset of a memref's origin in its root buffer (an expression).
    fn origin(&self, m: MemRef) -> Option<String> {
        match m {
            MemRef::Buffer(_) => None,
            MemRef::View(v) => Some(self.view_names.get(v).clone()),
        }
    }

    /// `s_buf[offset]` for an index tuple of a memref.
    fn elem_ref(&self, m: MemRef, index: &[Operand]) -> String {
        let b = self.k.root_buffer(m);
        format!("{}[{}]", self.buf_name(b), self.elem_offset(m, index))
    }

    fn elem_offset(&self, m: MemRef, index: &[Operand]) -> String {
        let strides = self.strides(m);
        let mut terms: Vec<String> = self.origin(m).into_iter().collect();
        for (i, o) in index.iter().enumerate() {
            let s = strides.get(i).copied().unwrap_or(1);
            let x = self.int(o);
            terms.push(if s == 1 { x } else { format!("{x} * {s}") });
        }
        if terms.is_empty() {
            "0".into()
        } else {
            terms.join(" + ")
        }
    }

    /// The dimensions of a global buffer as expressions.
    fn global_dims(&self, g: Global) -> Vec<String> {
        self.k.globals[g]
            .shape
            .iter()
            .map(|d| match d {
                Dim::Const(c) => format!("{c}"),
                Dim::Param(v) => self.v(*v),
            })
            .collect()
    }

    /// The linear element index of a global access (64-bit).
    fn global_offset(&self, g: Global, index: &[String]) -> String {
        let dims = self.global_dims(g);
        let mut acc = String::new();
        for (i, x) in index.iter().enumerate() {
            if i == 0 {
                acc = format!("(long long)({x})");
            } else {
                acc = format!(
                    "({acc}) * {} + ({x})",
                    dims.get(i).cloned().unwrap_or_else(|| "1".into())
                );
            }
        }
        if acc.is_empty() { "0".into() } else { acc }
    }

    fn global_ref(&self, g: Global, index: &[Operand]) -> String {
        let ix: Vec<String> = index.iter().map(|o| self.int(o)).collect();
        format!("{}[{}]", self.global_name(g), self.global_offset(g, &ix))
    }

    /// Widens a stored element to its scalar type.
    fn load_conv(e: ElemType, r: &str) -> String {
        match e {
            ElemType::F16 => format!("__half2float({r})"),
            ElemType::BF16 => format!("__bfloat162float({r})"),
            ElemType::I8 | ElemType::I16 => format!("(int)({r})"),
            _ => r.to_string(),
        }
    }

    /// Narrows a scalar for storage.
    fn store_conv(e: ElemType, x: &str) -> String {
        match e {
            ElemType::F16 => format!("__float2half_rn({x})"),
            ElemType::BF16 => format!("__float2bfloat16_rn({x})"),
            ElemType::I8 => format!("(signed char)({x})"),
            ElemType::I16 => format!("(short)({x})"),
            _ => x.to_string(),
        }
    }

    // ---------------------------------------------------------------- prelude

    fn prelude(&mut self) {
        let k = self.k;
        let _ = writeln!(
            self.out,
            "// Generated by smemsync from kernel @{} for {}. Do not edit.",
            k.name, self.target.name
        );
        if self.opts.strip_syncs {
            self.out.push_str("// Built with every barrier and cp.async wait removed: racy, a lower bound on time.\n");
        }
        if let Some(n) = self.opts.drop_sync {
            let _ = writeln!(
                self.out,
                "// Mutation: sync op #{n} (program order) removed."
            );
        }
        self.out.push_str(PRELUDE);
        let uses =
            |f: &dyn Fn(&OpKind) -> bool| k.ops_in_order().iter().any(|&o| f(&k.ops[o].kind));
        if uses(&|o| {
            matches!(
                o,
                OpKind::CpAsync { .. }
                    | OpKind::CpAsyncTile(_)
                    | OpKind::CpAsyncCommit
                    | OpKind::CpAsyncWait(_)
                    | OpKind::WaitTokens(_)
            )
        }) {
            self.out.push_str(PRELUDE_CP_ASYNC);
        }
        if wgmma::uses_wgmma(k) {
            self.out.push_str(&wgmma::prelude());
        }
        if uses(&|o| matches!(o, OpKind::NamedArrive { .. } | OpKind::NamedSync { .. })) {
            self.out.push_str(PRELUDE_NAMED);
        }
        if uses(&|o| {
            matches!(
                o,
                OpKind::MbarInit { .. }
                    | OpKind::MbarArrive { .. }
                    | OpKind::MbarExpectTx { .. }
                    | OpKind::MbarWait { .. }
                    | OpKind::MbarInval { .. }
                    | OpKind::TmaLoad { .. }
                    | OpKind::TmaStore { .. }
                    | OpKind::BulkCommit
                    | OpKind::BulkWait(_)
                    | OpKind::FenceProxyAsync
            )
        }) {
            self.out.push_str(PRELUDE_HOPPER);
        }
    }

    // ---------------------------------------------------------------- kernel

    fn kernel_name(&self) -> String {
        format!("smemsync_{}", sanitize(&self.k.name))
    }

    fn param_list(&self) -> Vec<String> {
        self.k
            .params
            .iter()
            .map(|p| match p {
                Param::Global(g) => format!(
                    "{}* {}",
                    elem_c_type(self.k.globals[*g].elem),
                    self.global_name(*g)
                ),
                Param::Scalar(v) => format!("{} {}", c_type(self.ty(*v)), self.v(*v)),
            })
            .collect()
    }

    fn kernel(&mut self) {
        let k = self.k;
        let threads = k.threads();
        let _ = writeln!(
            self.out,
            "\n// block({}, {}, {}), grid({}, {}, {})",
            k.block[0], k.block[1], k.block[2], k.grid[0], k.grid[1], k.grid[2]
        );
        let _ = writeln!(
            self.out,
            "extern \"C\" __global__ void __launch_bounds__({threads}) {}({}) {{",
            self.kernel_name(),
            self.param_list().join(", ")
        );
        self.depth = 1;
        match self.smem.clone() {
            SmemLayout::Separate => {
                for (b, bd) in k.buffers.iter() {
                    let align = if bd.elem == ElemType::MBarrier { 8 } else { 16 };
                    let line = format!(
                        "__shared__ __align__({align}) {} {}[{}];",
                        elem_c_type(bd.elem),
                        self.buf_name(b),
                        bd.elements().max(1)
                    );
                    self.line(&line);
                }
            }
            SmemLayout::Raw {
                offsets,
                total,
                dynamic,
            } => {
                if dynamic {
                    self.line("extern __shared__ __align__(128) unsigned char smem_raw[];");
                } else {
                    self.line(&format!(
                        "__shared__ __align__(128) unsigned char smem_raw[{total}];"
                    ));
                }
                for ((b, bd), off) in k.buffers.iter().zip(offsets) {
                    let t = elem_c_type(bd.elem);
                    let line = format!(
                        "{t}* const {} = reinterpret_cast<{t}*>(smem_raw + {off});",
                        self.buf_name(b)
                    );
                    self.line(&line);
                }
            }
        }
        self.line("const int ss_tlin = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));");
        self.line("(void)ss_tlin;");
        self.region(k.body(), &[]);
        self.depth = 0;
        self.out.push_str("}\n");
    }

    fn region(&mut self, r: Region, yield_to: &[String]) {
        let ops = self.k.region_ops(r).to_vec();
        for op in ops {
            self.op(op, yield_to);
        }
    }

    fn decl(&mut self, v: Value, expr: String) {
        // In wgmma kernels values may be pinned in place (`cuda::wgmma`), so none is const.
        let cst = if self.wgmma_regs.is_some() { "" } else { "const " };
        let line = format!("{cst}{} {} = {};", c_type(self.ty(v)), self.v(v), expr);
        self.line(&line);
    }

    fn result(&self, op: Op, i: usize) -> Option<Value> {
        self.k.ops[op].results.get(i).copied()
    }

    fn op(&mut self, op: Op, yield_to: &[String]) {
        let k = self.k;
        let od = &k.ops[op];
        let kind = &od.kind;
        if is_droppable(kind) {
            let idx = self.syncs.iter().position(|&s| s == op);
            let dropped = (self.opts.strip_syncs && is_stripped(kind))
                || (idx.is_some() && idx == self.opts.drop_sync);
            if dropped {
                let line = format!("/* sync #{} removed */", idx.unwrap_or(0));
                self.line(&line);
                return;
            }
        }
        if let Some(mut regs) = self.wgmma_regs.take() {
            self.wgmma_operand_fences(op, &mut regs);
            self.wgmma_regs = Some(regs);
        }
        match kind.signature().family {
            Family::Value => match kind {
                OpKind::Compute { .. } => self.compute_or_view_op(op),
                _ => self.value_op(op),
            },
            Family::View => self.compute_or_view_op(op),
            Family::Access => match kind {
                OpKind::LocalLoad { .. } | OpKind::LocalStore { .. } => self.collective_op(op),
                _ => self.access_op(op),
            },
            Family::Copy => self.copy_op(op),
            Family::Wait | Family::Wgmma | Family::Barrier | Family::Mbarrier => self.sync_op(op),
            Family::Terminator | Family::Region => self.control_op(op, yield_to),
        }
    }

    /// Constants, thread ids, arithmetic, comparisons, selects, casts and group tests.
    fn value_op(&mut self, op: Op) {
        let Some(v) = self.result(op, 0) else {
            return;
        };
        if let Some(expr) = self.value_expr(op, v) {
            self.decl(v, expr);
        }
    }

    /// The expression [`Self::value_op`] declares `v`, the result of `op`, as; `None` for a
    /// kind it does not emit (`op` dispatches only the kinds here, the others are refused by
    /// `check_supported`).
    fn value_expr(&self, op: Op, v: Value) -> Option<String> {
        let k = self.k;
        let expr = match &k.ops[op].kind {
            OpKind::Const(c) => literal(*c, self.ty(v)),
            OpKind::Special(s) => {
                let d = |i: u8| ["x", "y", "z"][i as usize];
                match s {
                    Special::Tid(i) => format!("(int)threadIdx.{}", d(*i)),
                    Special::Bid(i) => format!("(int)blockIdx.{}", d(*i)),
                    Special::BlockDim(i) => format!("(int)blockDim.{}", d(*i)),
                    Special::GridDim(i) => format!("(int)gridDim.{}", d(*i)),
                    Special::Lane => format!("ss_tlin % {}", self.target.warp),
                    Special::Warp => format!("ss_tlin / {}", self.target.warp),
                    Special::LinearTid => "ss_tlin".into(),
                }
            }
            OpKind::Binary(..) | OpKind::Unary(..) => self.arith_expr(&k.ops[op].kind, v),
            OpKind::Cmp(p, x, y) => self.cmp_expr(*p, x, y),
            OpKind::Select(c, x, y) => {
                let ty = self.ty(v);
                format!(
                    "({} ? {} : {})",
                    self.opnd(c, ScalarType::I1),
                    self.opnd(x, ty),
                    self.opnd(y, ty)
                )
            }
            OpKind::Cast(CastOp::IToF, x) => {
                format!("__int2float_rn({})", self.opnd(x, ScalarType::I32))
            }
            OpKind::Cast(CastOp::FToI, x) => format!("ss_ftoi({})", self.opnd(x, ScalarType::F32)),
            OpKind::InGroup(g) => {
                let gd = &k.groups[*g];
                format!("(ss_tlin >= {} && ss_tlin < {})", gd.lo, gd.hi)
            }
            _ => return None,
        };
        Some(expr)
    }

    /// A binary or unary operation (`kind`) with result `v`: on `i1` as C's logic, on `f32`
    /// and `i32` through the prelude's `ss_NAME_T` helpers.
    fn arith_expr(&self, kind: &OpKind, v: Value) -> String {
        let ty = self.ty(v);
        match kind {
            OpKind::Binary(b, x, y) => {
                let (a, c) = (self.opnd(x, ty), self.opnd(y, ty));
                match ty {
                    ScalarType::I1 => match b {
                        BinOp::And | BinOp::Min | BinOp::Mul => format!("({a} && {c})"),
                        BinOp::Or | BinOp::Max => format!("({a} || {c})"),
                        _ => format!("({a} != {c})"),
                    },
                    ScalarType::F32 => format!("ss_{}_f32({a}, {c})", b.name()),
                    _ => format!("ss_{}_i32({a}, {c})", b.name()),
                }
            }
            OpKind::Unary(u, x) => {
                let a = self.opnd(x, ty);
                match (ty, u) {
                    (ScalarType::I1, _) => format!("(!{a})"),
                    (ScalarType::F32, _) => format!("ss_{}_f32({a})", u.name()),
                    _ => format!("ss_{}_i32({a})", u.name()),
                }
            }
            _ => unreachable!("value_expr passes binary and unary ops only"),
        }
    }

    /// A comparison, typed by its first value operand: `!=` on `f32` is false when either
    /// side is NaN, orderings on `i1` compare as `int`.
    fn cmp_expr(&self, p: CmpPred, x: &Operand, y: &Operand) -> String {
        let ty = match (x, y) {
            (Operand::Value(a), _) => self.ty(*a),
            (_, Operand::Value(b)) => self.ty(*b),
            _ => self.operand_ty(x),
        };
        let (a, c) = (self.opnd(x, ty), self.opnd(y, ty));
        let sym = match p {
            CmpPred::Eq => "==",
            CmpPred::Ne => "!=",
            CmpPred::Lt => "<",
            CmpPred::Le => "<=",
            CmpPred::Gt => ">",
            CmpPred::Ge => ">=",
        };
        if ty == ScalarType::F32 && p == CmpPred::Ne {
            format!("({a} == {a} && {c} == {c} && {a} != {c})")
        } else if ty == ScalarType::I1 && !matches!(p, CmpPred::Eq | CmpPred::Ne) {
            format!("((int){a} {sym} (int){c})")
        } else {
            format!("({a} {sym} {c})")
        }
    }

    /// Result `j` (the value `v`) of an opaque compute over `args`: the arguments converted to
    /// the sum's type (`i32` for an `i1` result) and added left to right, plus `j`; an `i1`
    /// result is the sum's lowest bit (docs/ir.md).
    fn compute_result(&self, args: &[Operand], j: usize, v: Value) -> String {
        let ty = self.ty(v);
        let sum_ty = if ty == ScalarType::I1 {
            ScalarType::I32
        } else {
            ty
        };
        let mut acc: Option<String> = None;
        let conv = |e: &Emitter, o: &Operand| -> String {
            let from = e.operand_ty(o);
            let x = e.opnd(o, from);
            match (from, sum_ty) {
                (ScalarType::I1, ScalarType::F32) => format!("({x} ? 1.0f : 0.0f)"),
                (ScalarType::I1, _) => format!("(int)({x})"),
                (ScalarType::I32, ScalarType::F32) => format!("__int2float_rn({x})"),
                (ScalarType::F32, ScalarType::I32) => format!("ss_ftoi({x})"),
                _ => x,
            }
        };
        let add = if sum_ty == ScalarType::F32 {
            "ss_add_f32"
        } else {
            "ss_add_i32"
        };
        for a in args {
            let x = conv(self, a);
            acc = Some(match acc {
                None => x,
                Some(s) => format!("{add}({s}, {x})"),
            });
        }
        let jl = if sum_ty == ScalarType::F32 {
            float_literal(j as f32)
        } else {
            format!("{j}")
        };
        let sum = match acc {
            None => jl,
            Some(s) => format!("{add}({s}, {jl})"),
        };
        if ty == ScalarType::I1 {
            format!("(({sum}) & 1) != 0")
        } else {
            sum
        }
    }

    /// Opaque computes (a deterministic sum of the arguments) and view definitions.
    fn compute_or_view_op(&mut self, op: Op) {
        let k = self.k;
        let od = &k.ops[op];
        match &od.kind {
            OpKind::Compute { args, .. } => {
                for (j, &v) in od.results.iter().enumerate() {
                    let expr = self.compute_result(args, j, v);
                    self.decl(v, expr);
                }
            }
            OpKind::ViewDef(view) => {
                let vd = &k.views[*view];
                let base_strides = self.strides(vd.base);
                let mut terms: Vec<String> = self.origin(vd.base).into_iter().collect();
                for (i, ix) in vd.indices.iter().enumerate() {
                    let s = base_strides.get(i).copied().unwrap_or(1);
                    match ix {
                        ViewIndex::At(o) => {
                            let x = self.int(o);
                            terms.push(if s == 1 { x } else { format!("{x} * {s}") });
                        }
                        ViewIndex::Range(lo, _) if *lo != 0 => terms.push(format!("{}", lo * s)),
                        ViewIndex::Range(..) => {}
                    }
                }
                let expr = if terms.is_empty() {
                    "0".to_string()
                } else {
                    terms.join(" + ")
                };
                let line = format!("const int {} = {};", self.view_names.get(*view), expr);
                self.line(&line);
            }
            // `op` dispatches only the kinds above here (the others are refused by
            // `check_supported`).
            _ => {}
        }
    }

    /// Per-thread shared and global loads, stores and atomics.
    fn access_op(&mut self, op: Op) {
        let k = self.k;
        let od = &k.ops[op];
        let r0 = self.result(op, 0);
        match &od.kind {
            OpKind::Load { mem, index } => {
                if let Some(v) = r0 {
                    let e = k.elem(*mem);
                    self.decl(v, Self::load_conv(e, &self.elem_ref(*mem, index)));
                }
            }
            OpKind::Store { mem, index, value } => {
                let e = k.elem(*mem);
                let x = self.opnd(value, e.scalar().unwrap_or(ScalarType::I32));
                let line = format!(
                    "{} = {};",
                    self.elem_ref(*mem, index),
                    Self::store_conv(e, &x)
                );
                self.line(&line);
                self.proxy_fence();
            }
            OpKind::Atomic {
                op: a,
                mem,
                index,
                value,
            } => {
                let e = k.elem(*mem);
                let x = self.opnd(value, e.scalar().unwrap_or(ScalarType::I32));
                let call = format!("{}(&{}, {x})", atomic_fn(*a), self.elem_ref(*mem, index));
                self.atomic_call(r0, call);
                self.proxy_fence();
            }
            OpKind::GAtomic { .. } | OpKind::GLoad { .. } | OpKind::GStore { .. } => {
                self.global_access_op(op);
            }
            // `op` dispatches only the kinds above here (the others are refused by
            // `check_supported`).
            _ => {}
        }
    }

    /// Per-thread global loads, stores and atomics.
    fn global_access_op(&mut self, op: Op) {
        let k = self.k;
        let r0 = self.result(op, 0);
        match &k.ops[op].kind {
            OpKind::GAtomic {
                op: a,
                global,
                index,
                value,
            } => {
                let e = k.globals[*global].elem;
                let x = self.opnd(value, e.scalar().unwrap_or(ScalarType::I32));
                let call = format!(
                    "{}(&{}, {x})",
                    atomic_fn(*a),
                    self.global_ref(*global, index)
                );
                self.atomic_call(r0, call);
            }
            OpKind::GLoad { global, index } => {
                if let Some(v) = r0 {
                    let e = k.globals[*global].elem;
                    self.decl(v, Self::load_conv(e, &self.global_ref(*global, index)));
                }
            }
            OpKind::GStore {
                global,
                index,
                value,
            } => {
                let e = k.globals[*global].elem;
                let x = self.opnd(value, e.scalar().unwrap_or(ScalarType::I32));
                let line = format!(
                    "{} = {};",
                    self.global_ref(*global, index),
                    Self::store_conv(e, &x)
                );
                self.line(&line);
            }
            _ => {}
        }
    }

    /// An atomic's `call`: its result `r0` declared from it, or the call alone as a statement.
    fn atomic_call(&mut self, r0: Option<Value>, call: String) {
        match r0 {
            Some(v) => self.decl(v, call),
            None => self.line(&format!("{call};")),
        }
    }

    /// Collective `local_load`/`local_store`: each thread its owned elements.
    fn collective_op(&mut self, op: Op) {
        let k = self.k;
        let od = &k.ops[op];
        let r0 = self.result(op, 0);
        match &od.kind {
            OpKind::LocalStore { mem, value, .. } => {
                let n = self.layout_ids.get(&op).map_or(0, |&n| n as usize);
                let e = k.elem(*mem);
                let sty = e.scalar().unwrap_or(ScalarType::I32);
                let x = self.opnd(value, sty);
                let ev = self.fresh("ss_e");
                let sum = if sty == ScalarType::F32 {
                    format!("ss_add_f32({x}, __int2float_rn({ev}))")
                } else {
                    format!("ss_add_i32({x}, {ev})")
                };
                let (head, addr) = self.owned_loop(op, *mem, n, &ev, true);
                self.line(&head);
                self.depth += 1;
                for l in addr.0 {
                    self.line(&l);
                }
                let line = format!("{} = {};", addr.1, Self::store_conv(e, &sum));
                self.line(&line);
                self.depth -= 1;
                self.line("}");
                self.proxy_fence();
            }
            OpKind::LocalLoad { mem, .. } => {
                let n = self.layout_ids.get(&op).map_or(0, |&n| n as usize);
                let e = k.elem(*mem);
                if let Some(v) = r0 {
                    let ty = self.ty(v);
                    let acc = self.v(v);
                    let tmp = format!("ss_acc_{acc}");
                    let zero = literal(Scalar::I32(0), ty);
                    self.line(&format!("{} {tmp} = {zero};", c_type(ty)));
                    let ev = self.fresh("ss_e");
                    let (head, addr) = self.owned_loop(op, *mem, n, &ev, false);
                    self.line(&head);
                    self.depth += 1;
                    for l in addr.0 {
                        self.line(&l);
                    }
                    let add = if ty == ScalarType::F32 {
                        "ss_add_f32"
                    } else {
                        "ss_add_i32"
                    };
                    let line = format!("{tmp} = {add}({tmp}, {});", Self::load_conv(e, &addr.1));
                    self.line(&line);
                    self.depth -= 1;
                    self.line("}");
                    self.decl(v, tmp);
                }
            }
            // `op` dispatches only the kinds above here (the others are refused by
            // `check_supported`).
            _ => {}
        }
    }

    /// Async copies: cp.async (per thread and tile) and TMA loads and stores.
    fn copy_op(&mut self, op: Op) {
        let k = self.k;
        let od = &k.ops[op];
        let r0 = self.result(op, 0);
        match &od.kind {
            OpKind::CpAsync {
                dst,
                dst_index,
                src,
                src_index,
            } => {
                let de = k.elem(*dst);
                let se = k.globals[*src].elem;
                if de == se && de.bytes() == 4 {
                    let line = format!(
                        "ss_cp_async4(&{}, &{});",
                        self.elem_ref(*dst, dst_index),
                        self.global_ref(*src, src_index)
                    );
                    self.line(&line);
                } else {
                    // cp.async copies 4, 8 or 16 bytes: a narrower or converting element is
                    // copied at issue, which is one of the moments the IR allows.
                    self.line("// cp_async of a non-4-byte element: copied at issue");
                    let x = Self::load_conv(se, &self.global_ref(*src, src_index));
                    let line = format!(
                        "{} = {};",
                        self.elem_ref(*dst, dst_index),
                        Self::store_conv(de, &x)
                    );
                    self.line(&line);
                }
                if let Some(v) = r0 {
                    self.decl(v, "0".into());
                }
            }
            OpKind::CpAsyncTile(c) => {
                self.cp_async_tile(op, c);
                if let Some(v) = r0 {
                    self.decl(v, "0".into());
                }
            }
            OpKind::TmaLoad {
                dst,
                src,
                origin,
                mbar,
                mbar_index,
            } => {
                let bar = format!("&{}", self.elem_ref(*mbar, mbar_index));
                self.bulk_rows(*dst, *src, origin, |sm, gl, bytes| {
                    format!("ss_bulk_load({sm}, {gl}, {bytes}, {bar});")
                });
                if let Some(v) = r0 {
                    self.decl(v, "0".into());
                }
            }
            OpKind::TmaStore { dst, origin, src } => {
                self.bulk_rows(*src, *dst, origin, |sm, gl, bytes| {
                    format!("ss_bulk_store({gl}, {sm}, {bytes});")
                });
            }
            // `op` dispatches only the kinds above here (the others are refused by
            // `check_supported`).
            _ => {}
        }
    }

    /// Commits, waits, barriers, fences, mbarrier ops and wgmma.
    fn sync_op(&mut self, op: Op) {
        let k = self.k;
        let od = &k.ops[op];
        let kind = &od.kind;
        match &od.kind {
            OpKind::CpAsyncCommit => self.line("ss_cp_async_commit();"),
            OpKind::CpAsyncWait(n) => self.line(&format!("ss_cp_async_wait<{n}>();")),
            OpKind::WaitTokens(_) => self.line("ss_cp_async_wait_all();"),
            OpKind::BulkCommit => self.line("ss_bulk_commit();"),
            OpKind::BulkWait(n) => self.line(&format!("ss_bulk_wait_read<{n}>();")),
            OpKind::Barrier => self.line("__syncthreads();"),
            OpKind::FenceProxyAsync => self.line("ss_fence_proxy_async();"),
            OpKind::WarpSync => self.line("__syncwarp();"),
            OpKind::NamedArrive { id, count } => {
                self.line(&format!("ss_bar_arrive({id}, {count});"))
            }
            OpKind::NamedSync { id, count } => self.line(&format!("ss_bar_sync({id}, {count});")),
            OpKind::MbarInit { mbar, index, count } => {
                let line = format!("ss_mbar_init(&{}, {count});", self.elem_ref(*mbar, index));
                self.line(&line);
            }
            OpKind::MbarArrive { mbar, index, tx } => {
                let line = match tx {
                    Some(t) => format!("ss_mbar_arrive_tx(&{}, {t});", self.elem_ref(*mbar, index)),
                    None => format!("ss_mbar_arrive(&{});", self.elem_ref(*mbar, index)),
                };
                self.line(&line);
            }
            OpKind::MbarExpectTx { mbar, index, bytes } => {
                let line = format!(
                    "ss_mbar_expect_tx(&{}, {bytes});",
                    self.elem_ref(*mbar, index)
                );
                self.line(&line);
            }
            OpKind::MbarWait {
                mbar,
                index,
                parity,
            } => {
                let p = match self.operand_ty(parity) {
                    ScalarType::I1 => format!("(unsigned)({})", self.opnd(parity, ScalarType::I1)),
                    _ => format!("(unsigned)({})", self.int(parity)),
                };
                let line = format!("ss_mbar_wait(&{}, {p});", self.elem_ref(*mbar, index));
                self.line(&line);
            }
            OpKind::MbarInval { mbar, index } => {
                let line = format!("ss_mbar_inval(&{});", self.elem_ref(*mbar, index));
                self.line(&line);
            }
            // Rejected by `check_supported`.
            OpKind::GatherToLds { .. }
            | OpKind::GatherToLdsTile(_)
            | OpKind::TdmLoad { .. }
            | OpKind::WaitCnt(_)
            | OpKind::SplitSignal(_)
            | OpKind::SplitWait(_) => {}
            OpKind::Wgmma { a, b, acc } => self.emit_wgmma(op, a, *b, acc),
            OpKind::WgmmaCommit | OpKind::WgmmaWait(_) => self.emit_wgmma_sync(kind),
            // `op` dispatches only the kinds above here (the others are refused by
            // `check_supported`).
            _ => {}
        }
    }

    /// Loops, branches, stages and their terminators.
    fn control_op(&mut self, op: Op, yield_to: &[String]) {
        let k = self.k;
        let od = &k.ops[op];
        match &od.kind {
            OpKind::For { lo, hi, step, init } => self.emit_for(op, lo, hi, step, init),
            OpKind::If { cond } => self.emit_if(op, cond),
            OpKind::While { init } => self.emit_while(op, init),
            OpKind::Stage { name } => {
                let line = format!("// stage \"{name}\"");
                self.line(&line);
                self.region(od.regions[0], yield_to);
            }
            OpKind::Yield(vs) => self.emit_yield(vs, yield_to),
            OpKind::Condition(c) => {
                let line = format!("if (!{}) break;", self.opnd(c, ScalarType::I1));
                self.line(&line);
            }
            // `op` dispatches only the kinds above here (the others are refused by
            // `check_supported`).
            _ => {}
        }
    }


    /// After a generic shared write in a kernel whose shared memory the async proxy reads.
    fn proxy_fence(&mut self) {
        if self.async_readers {
            self.line("ss_fence_proxy_async();");
        }
    }

    /// The layout name of a collective op.
    fn layout_of(&self, op: Op) -> Option<&str> {
        match &self.k.ops[op].kind {
            OpKind::LocalLoad { layout, .. } | OpKind::LocalStore { layout, .. } => {
                layout.as_deref()
            }
            OpKind::CpAsyncTile(c) => c.layout.as_deref(),
            _ => None,
        }
    }

    /// The concrete layout of a collective op, when it has one (`ir::layout`).
    fn concrete(&self, op: Op, m: MemRef) -> Option<Owned> {
        let name = self.layout_of(op);
        match ownership(self.k, name, &self.k.shape(m), self.target.warp) {
            Ownership::Concrete(c) => Some(*c),
            Ownership::Opaque(_) => None,
        }
    }

    /// The executing thread's index among a collective op's layout threads: `ss_tlin`, less
    /// the group's first thread for a role-relative layout (docs/ir.md).
    fn layout_tid(&self, op: Op) -> String {
        match layout_threads(self.k, self.layout_of(op)).first {
            0 => "ss_tlin".to_string(),
            a => format!("(ss_tlin - {a})"),
        }
    }

    /// The loop over the elements a thread touches in collective op `op` (`write`: those it
    /// writes), under its concrete layout when it has one, else docs/ir.md's mapping `n`.
    fn owned_loop(
        &mut self,
        op: Op,
        m: MemRef,
        n: usize,
        ev: &str,
        write: bool,
    ) -> (String, (Vec<String>, String)) {
        let Some(Owned {
            layout: d,
            owners: om,
            ..
        }) = self.concrete(op, m)
        else {
            return self.collective_loop(op, m, n, ev);
        };
        let tl = self.layout_tid(op);
        let pivots = pivot_registers(&d);
        let r = format!("{ev}_reg");
        let head = format!("for (int {r} = 0; {r} < {}; ++{r}) {{", 1u64 << pivots.len());
        let mut terms: Vec<String> = pivots
            .iter()
            .enumerate()
            .map(|(i, b)| format!("(({r} >> {i}) & 1 ? {b} : 0)"))
            .collect();
        for (i, b) in d.lane.iter().chain(&d.warp).enumerate() {
            if *b != 0 {
                terms.push(format!("(({tl} >> {i}) & 1 ? {b} : 0)"));
            }
        }
        let mut setup = vec![format!(
            "const int {ev} = {};",
            if terms.is_empty() { "0".into() } else { terms.join(" ^ ") }
        )];
        if write && !om.shifts.is_empty() {
            let w: Vec<String> = om
                .rows
                .iter()
                .enumerate()
                .filter(|(_, t)| **t != 0)
                .map(|(j, t)| format!("(({ev} >> {j}) & 1 ? {t} : 0)"))
                .collect();
            let w = if w.is_empty() { "0".into() } else { w.join(" ^ ") };
            setup.push(format!("if (({w}) != {tl}) continue; // a broadcast copy: its lowest holder writes"));
        }
        let (more, r) = self.view_addr(m, ev);
        setup.extend(more);
        (head, (setup, r))
    }

    /// The elements of one `cp.async` vector of tile copy `op`: the widest of 16, 8 and 4
    /// bytes that divides the run of contiguous elements each thread writes (the lowest pivot
    /// registers of the layout select elements 1, 2, 4, ...) and the last dimension, where the
    /// element types agree and the last dimension is contiguous; else 1.
    fn cp_async_vector(&self, op: Op, c: &TileCopy) -> u64 {
        let shape = self.k.shape(c.dst);
        let de = self.k.elem(c.dst);
        let se = self.k.globals[c.src].elem;
        let run = self.concrete(op, c.dst).map_or(1, |o| {
            let p = pivot_registers(&o.layout);
            let mut v = 1u64;
            while p.get(v.trailing_zeros() as usize) == Some(&v) {
                v *= 2;
            }
            v
        });
        let last_stride = self.strides(c.dst).last().copied().unwrap_or(1);
        if de != se || last_stride != 1 {
            return 1;
        }
        for b in [16u64, 8, 4] {
            let v = b / de.bytes();
            if v >= 1 && b.is_multiple_of(de.bytes()) && run.is_multiple_of(v) && shape.last().is_some_and(|l| l.is_multiple_of(v)) {
                return v;
            }
        }
        1
    }

    /// `cp_async_tile`: each thread copies the elements it writes under the layout, as
    /// 16/8/4-byte `cp.async` vectors where its elements run contiguously along the last
    /// dimension and the source is in range and aligned; other elements are copied at issue
    /// (a moment the IR allows), masked-off ones as zeros.
    fn cp_async_tile(&mut self, op: Op, c: &TileCopy) {
        let n = self.layout_ids.get(&op).map_or(0, |&n| n as usize);
        let shape = self.k.shape(c.dst);
        let de = self.k.elem(c.dst);
        let ev = self.fresh("ss_e");
        let vec_elems = self.cp_async_vector(op, c);
        let vec_bytes = vec_elems * de.bytes();
        let (head, addr) = self.owned_loop(op, c.dst, n, &ev, true);
        self.line(&head);
        self.depth += 1;
        for l in addr.0 {
            self.line(&l);
        }
        let vector = vec_elems > 1 || vec_bytes == 4;
        if vector && vec_elems > 1 {
            self.line(&format!("if ({ev} % {vec_elems} != 0) continue; // the vector's first element copies it"));
        }
        // Global coordinates of the element.
        let r = self.k.globals[c.src].shape.len();
        let k1 = shape.len();
        let dims = self.global_dims(c.src);
        let mut coords = Vec::new();
        let mut rest = ev.to_string();
        let mut view_idx = vec![String::new(); k1];
        for i in (0..k1).rev() {
            view_idx[i] = format!("({rest} % {})", shape[i]);
            rest = format!("({rest} / {})", shape[i]);
        }
        let mut conds = Vec::new();
        for dd in 0..r {
            let o = c.origin.get(dd).map_or("0".into(), |o| self.int(o));
            let x = if dd + k1 >= r {
                format!("({o}) + {}", view_idx[dd + k1 - r])
            } else {
                o
            };
            let g = format!("{ev}_g{dd}");
            self.line(&format!("const int {g} = {x};"));
            let hi = if dd + 1 == r && vec_elems > 1 {
                format!("{g} + {} < {}", vec_elems - 1, dims[dd])
            } else {
                format!("{g} < {}", dims[dd])
            };
            conds.push(format!("{g} >= 0 && {hi}"));
            coords.push(g);
        }
        let gref = format!("{}[{}]", self.global_name(c.src), self.global_offset(c.src, &coords));
        let inb = conds.join(" && ");
        if vector {
            self.line(&format!(
                "if ({inb} && ((unsigned long long)&{gref} % {vec_bytes}) == 0 && ((unsigned long long)&{} % {vec_bytes}) == 0) {{",
                addr.1
            ));
            self.line(&format!("  ss_cp_async_n<{vec_bytes}>(&{}, &{gref});", addr.1));
            self.line("} else {");
        } else {
            self.line("{");
        }
        self.depth += 1;
        self.tile_copy_at_issue(c, &coords, &dims, &addr.1, vec_elems.max(1));
        self.depth -= 1;
        self.line("}");
        self.depth -= 1;
        self.line("}");
    }

    /// The element-by-element part of a tile copy: `v` elements from the global coordinates
    /// `coords` (the last one advancing) to the shared element `dst` onwards, at issue.
    fn tile_copy_at_issue(&mut self, c: &TileCopy, coords: &[String], dims: &[String], dst: &str, v: u64) {
        let de = self.k.elem(c.dst);
        let se = self.k.globals[c.src].elem;
        self.line(&format!("for (int ss_j = 0; ss_j < {v}; ++ss_j) {{"));
        self.depth += 1;
        let last = coords.last().cloned().unwrap_or_else(|| "0".into());
        let mut jc = coords.to_vec();
        if let Some(l) = jc.last_mut() {
            *l = format!("({last} + ss_j)");
        }
        let jref = format!("{}[{}]", self.global_name(c.src), self.global_offset(c.src, &jc));
        let mut jconds: Vec<String> = coords[..coords.len().saturating_sub(1)]
            .iter()
            .zip(dims)
            .map(|(g, d)| format!("{g} >= 0 && {g} < {d}"))
            .collect();
        if let Some(d) = dims.last() {
            jconds.push(format!("{last} + ss_j >= 0 && {last} + ss_j < {d}"));
        }
        let x = Self::load_conv(se, &jref);
        let zero = if se.scalar() == Some(ScalarType::F32) || matches!(se, ElemType::F16 | ElemType::BF16) { "0.0f" } else { "0" };
        let val = if c.masked {
            format!("({}) ? {x} : {zero}", jconds.join(" && "))
        } else {
            x
        };
        self.line(&format!("(&{dst})[ss_j] = {};", Self::store_conv(de, &val)));
        self.depth -= 1;
        self.line("}");
    }

    /// The loop over the elements a thread owns under layout `n` of op `op` (over its layout
    /// threads: the block's, or a role-relative layout's group), and (setup lines, element
    /// reference) for element `ev` (row-major within the memref).
    fn collective_loop(
        &mut self,
        op: Op,
        m: MemRef,
        n: usize,
        ev: &str,
    ) -> (String, (Vec<String>, String)) {
        let shape = self.k.shape(m);
        let total: u64 = shape.iter().product();
        let t = u64::from(layout_threads(self.k, self.layout_of(op)).count.max(1));
        let n = (n as u64) % t;
        let tl = self.layout_tid(op);
        let start = format!("({tl} - {n} + {t}) % {t}");
        let head = format!("for (int {ev} = {start}; {ev} < {total}; {ev} += {t}) {{");
        (head, self.view_addr(m, ev))
    }

    /// (setup lines, element reference) for view element `ev` (row-major within `m`).
    fn view_addr(&self, m: MemRef, ev: &str) -> (Vec<String>, String) {
        let shape = self.k.shape(m);
        let strides = self.strides(m);
        let mut setup = Vec::new();
        let mut terms: Vec<String> = self.origin(m).into_iter().collect();
        let rest = format!("{ev}_r");
        setup.push(format!("int {rest} = {ev};"));
        for i in (0..shape.len()).rev() {
            let idx = format!("{ev}_{i}");
            if i == 0 {
                setup.push(format!("const int {idx} = {rest};"));
            } else {
                setup.push(format!(
                    "const int {idx} = {rest} % {}; {rest} /= {};",
                    shape[i], shape[i]
                ));
            }
            let s = strides.get(i).copied().unwrap_or(1);
            terms.push(if s == 1 { idx } else { format!("{idx} * {s}") });
        }
        setup.push(format!("(void){rest};"));
        (setup, self.buffer_element(m, &terms))
    }

    /// The element of `m`'s root buffer at the sum of `terms` (offsets in elements; none: 0).
    fn buffer_element(&self, m: MemRef, terms: &[String]) -> String {
        let b = self.k.root_buffer(m);
        format!(
            "{}[{}]",
            self.buf_name(b),
            if terms.is_empty() {
                "0".into()
            } else {
                terms.join(" + ")
            }
        )
    }

    /// The address of the shared element of `view` at the tile indices `tile_ix` (`"0"` for
    /// a dimension at its origin), for a bulk row copy.
    fn row_address(&self, view: MemRef, tile_ix: &[String]) -> String {
        let strides = self.strides(view);
        let mut terms: Vec<String> = self.origin(view).into_iter().collect();
        for (i, ix) in tile_ix.iter().enumerate() {
            if ix != "0" {
                let s = strides.get(i).copied().unwrap_or(1);
                terms.push(if s == 1 {
                    ix.clone()
                } else {
                    format!("{ix} * {s}")
                });
            }
        }
        format!("&{}", self.buffer_element(view, &terms))
    }

    /// Emits one bulk copy per contiguous row of a tile (docs/ir.md section 4 maps tile
    /// element `[i0..ik]` to global `[o0, .., o(r-k-1)+i0, .., o(r-1)+ik]`).
    fn bulk_rows(
        &mut self,
        view: MemRef,
        g: Global,
        origin: &[Operand],
        f: impl Fn(&str, &str, u64) -> String,
    ) {
        let k = self.k;
        let shape = k.shape(view);
        let rank = k.globals[g].shape.len();
        let tile_rank = shape.len();
        let row_elems = shape.last().copied().unwrap_or(1);
        let bytes = row_elems * k.elem(view).bytes();
        let rows: u64 = shape[..tile_rank.saturating_sub(1)].iter().product();
        let rv = self.fresh("ss_row");
        self.line(&format!("for (int {rv} = 0; {rv} < {rows}; ++{rv}) {{"));
        self.depth += 1;
        // Unravel the row index over the tile's outer dimensions.
        let mut tile_ix = vec![String::new(); tile_rank];
        let rest = format!("{rv}_r");
        self.line(&format!("int {rest} = {rv};"));
        for i in (0..tile_rank.saturating_sub(1)).rev() {
            let idx = format!("{rv}_{i}");
            if i == 0 {
                self.line(&format!("const int {idx} = {rest};"));
            } else {
                self.line(&format!(
                    "const int {idx} = {rest} % {}; {rest} /= {};",
                    shape[i], shape[i]
                ));
            }
            tile_ix[i] = idx;
        }
        self.line(&format!("(void){rest};"));
        if let Some(last) = tile_ix.last_mut() {
            *last = "0".into();
        }
        let sm = self.row_address(view, &tile_ix);
        let lead = rank - tile_rank;
        let gix: Vec<String> = (0..rank)
            .map(|d| {
                let o = origin
                    .get(d)
                    .map(|o| self.int(o))
                    .unwrap_or_else(|| "0".into());
                if d < lead {
                    o
                } else {
                    format!("{o} + {}", tile_ix[d - lead])
                }
            })
            .collect();
        let gl = format!("&{}[{}]", self.global_name(g), self.global_offset(g, &gix));
        let line = f(&sm, &gl, bytes);
        self.line(&line);
        self.depth -= 1;
        self.line("}");
    }

    fn emit_yield(&mut self, vs: &[Operand], yield_to: &[String]) {
        if vs.is_empty() {
            return;
        }
        // Parallel assignment through temporaries: a yielded value may be a target.
        let mut temps = Vec::new();
        self.line("{");
        self.depth += 1;
        for (i, o) in vs.iter().enumerate() {
            let ty = self.operand_ty(o);
            let t = format!("ss_y{i}");
            let line = format!("const {} {t} = {};", c_type(ty), self.opnd(o, ty));
            self.line(&line);
            temps.push(t);
        }
        for (t, dst) in temps.iter().zip(yield_to) {
            self.line(&format!("{dst} = {t};"));
        }
        self.depth -= 1;
        self.line("}");
    }

    fn emit_for(&mut self, op: Op, lo: &Operand, hi: &Operand, step: &Operand, init: &[Operand]) {
        let k = self.k;
        let od = &k.ops[op];
        let body = od.regions[0];
        let args = k.region_args(body).to_vec();
        let Some((&iv, iters)) = args.split_first() else {
            return;
        };
        for (a, i) in iters.iter().zip(init) {
            let ty = self.ty(*a);
            let line = format!("{} {} = {};", c_type(ty), self.v(*a), self.opnd(i, ty));
            self.line(&line);
        }
        let ivn = self.v(iv);
        let hin = self.fresh("ss_hi");
        let stn = self.fresh("ss_step");
        self.line("{");
        self.depth += 1;
        self.line(&format!("const int {hin} = {};", self.int(hi)));
        self.line(&format!("const int {stn} = {};", self.int(step)));
        let line = format!(
            "for (int {ivn} = {}; {ivn} < {hin}; {ivn} += {stn}) {{",
            self.int(lo)
        );
        self.line(&line);
        self.depth += 1;
        let targets: Vec<String> = iters.iter().map(|a| self.v(*a)).collect();
        self.region(body, &targets);
        self.depth -= 1;
        self.line("}");
        self.depth -= 1;
        self.line("}");
        for (r, a) in od.results.iter().zip(iters) {
            let name = self.v(*a);
            self.decl(*r, name);
        }
    }

    fn emit_if(&mut self, op: Op, cond: &Operand) {
        let k = self.k;
        let od = &k.ops[op];
        let targets: Vec<String> = od
            .results
            .iter()
            .map(|r| format!("ss_m_{}", self.v(*r)))
            .collect();
        for (r, t) in od.results.iter().zip(&targets) {
            let line = format!("{} {t};", c_type(self.ty(*r)));
            self.line(&line);
        }
        let line = format!("if ({}) {{", self.opnd(cond, ScalarType::I1));
        self.line(&line);
        self.depth += 1;
        self.region(od.regions[0], &targets);
        self.depth -= 1;
        if od.regions.len() > 1 && !k.region_ops(od.regions[1]).is_empty() {
            self.line("} else {");
            self.depth += 1;
            self.region(od.regions[1], &targets);
            self.depth -= 1;
        }
        self.line("}");
        for (r, t) in od.results.iter().zip(&targets) {
            self.decl(*r, t.clone());
        }
    }

    fn emit_while(&mut self, op: Op, init: &[Operand]) {
        let k = self.k;
        let od = &k.ops[op];
        let (before, after) = (od.regions[0], od.regions[1]);
        let bargs = k.region_args(before).to_vec();
        for (a, i) in bargs.iter().zip(init) {
            let ty = self.ty(*a);
            let line = format!("{} {} = {};", c_type(ty), self.v(*a), self.opnd(i, ty));
            self.line(&line);
        }
        self.line("while (true) {");
        self.depth += 1;
        let targets: Vec<String> = bargs.iter().map(|a| self.v(*a)).collect();
        self.region(before, &targets);
        for (a, b) in k.region_args(after).to_vec().iter().zip(&bargs) {
            let name = self.v(*b);
            self.decl(*a, name);
        }
        self.region(after, &targets);
        self.depth -= 1;
        self.line("}");
        for (r, a) in od.results.iter().zip(&bargs) {
            let name = self.v(*a);
            self.decl(*r, name);
        }
    }

    // ---------------------------------------------------------------- harness

    fn harness(&mut self) {
        let k = self.k;
        let mut h = String::new();
        h.push_str(HARNESS_PRELUDE);
        let _ = writeln!(h, "int main(int argc, char** argv) {{");
        let _ = writeln!(
            h,
            "  Args a = parse_args(argc, argv, {}, {}, {});",
            k.grid[0], k.grid[1], k.grid[2]
        );
        self.harness_params(&mut h);
        let _ = writeln!(h, "  check_params(a);");
        self.harness_uploads(&mut h);
        self.harness_launch(&mut h);
        self.harness_downloads(&mut h);
        let _ = writeln!(h, "  return 0;");
        let _ = writeln!(h, "}}");
        self.out.push('\n');
        self.out.push_str(&h);
    }

    /// The harness's scalar parameters: the command line's value, else the default.
    fn harness_params(&self, h: &mut String) {
        let k = self.k;
        // Scalar parameters.
        for p in &k.params {
            if let Param::Scalar(v) = p {
                let name = k.value_name(*v);
                let ty = self.ty(*v);
                let cv = self.v(*v);
                // The kernel's default (`%n: i32 = 8`), else the interpreter's default.
                let dflt = *k.param_defaults.get(*v);
                match ty {
                    ScalarType::F32 => {
                        let d = dflt.map_or(DEFAULT_I32_PARAM as f64, |d| d.as_f32() as f64);
                        let _ = writeln!(
                            h,
                            "  const float {cv} = (float)param_f(a, \"{name}\", {d:?});"
                        );
                    }
                    ScalarType::I1 => {
                        let d = dflt.map_or(1, |d| d.as_i64());
                        let _ =
                            writeln!(h, "  const bool {cv} = param_i(a, \"{name}\", {d}) != 0;");
                    }
                    _ => {
                        let d = k.run_default(*v);
                        let _ = writeln!(h, "  const int {cv} = (int)param_i(a, \"{name}\", {d});");
                    }
                }
            }
        }
    }

    /// The harness's global buffers: sized, filled with the seed's values, uploaded.
    fn harness_uploads(&self, h: &mut String) {
        let k = self.k;
        // Global buffers: size, fill, upload.
        let mut gidx = 0u64;
        for p in &k.params {
            if let Param::Global(g) = p {
                let gd = &k.globals[*g];
                let n = self.global_name(*g);
                let dims = self.global_dims(*g);
                let count = dims
                    .iter()
                    .map(|d| format!("(size_t)({d})"))
                    .collect::<Vec<_>>()
                    .join(" * ");
                let t = elem_c_type(gd.elem);
                let fill = match gd.elem {
                    ElemType::F16 => "__float2half_rn(gen_float(a.seed, p, i))",
                    ElemType::BF16 => "__float2bfloat16_rn(gen_float(a.seed, p, i))",
                    ElemType::F32 => "gen_float(a.seed, p, i)",
                    ElemType::I8 => "(signed char)gen_int(a.seed, p, i)",
                    ElemType::I16 => "(short)gen_int(a.seed, p, i)",
                    ElemType::I32 => "gen_int(a.seed, p, i)",
                    ElemType::MBarrier => "0ull",
                };
                let _ = writeln!(h, "  const size_t {n}_count = {count};");
                let _ = writeln!(h, "  std::vector<{t}> {n}_host({n}_count);");
                let _ = writeln!(
                    h,
                    "  for (size_t i = 0; i < {n}_count; ++i) {{ const uint64_t p = {gidx}; {n}_host[i] = {fill}; }}"
                );
                let _ = writeln!(h, "  {t}* {n} = nullptr;");
                let _ = writeln!(
                    h,
                    "  CHECK(cudaMalloc(&{n}, {n}_count * sizeof({t}) + 16));"
                );
                let _ = writeln!(
                    h,
                    "  CHECK(cudaMemcpy({n}, {n}_host.data(), {n}_count * sizeof({t}), cudaMemcpyHostToDevice));"
                );
                gidx += 1;
            }
        }
    }

    /// The launch (and timing) of the kernel.
    fn harness_launch(&self, h: &mut String) {
        let k = self.k;
        let dyn_smem = match &self.smem {
            SmemLayout::Raw {
                total,
                dynamic: true,
                ..
            } => *total,
            _ => 0,
        };
        let kn = self.kernel_name();
        if dyn_smem > 0 {
            let _ = writeln!(
                h,
                "  CHECK(cudaFuncSetAttribute({kn}, cudaFuncAttributeMaxDynamicSharedMemorySize, {dyn_smem}));"
            );
        }
        let args: Vec<String> = k
            .params
            .iter()
            .map(|p| match p {
                Param::Global(g) => self.global_name(*g),
                Param::Scalar(v) => self.v(*v),
            })
            .collect();
        let _ = writeln!(
            h,
            "  const dim3 block({}, {}, {});",
            k.block[0], k.block[1], k.block[2]
        );
        let _ = writeln!(h, "  const dim3 grid(a.grid[0], a.grid[1], a.grid[2]);");
        let _ = writeln!(
            h,
            "  auto launch = [&]() {{ {kn}<<<grid, block, {dyn_smem}>>>({}); }};",
            args.join(", ")
        );
        let _ = writeln!(
            h,
            "  if (a.time_runs > 0) return time_kernel(a, \"{}\", launch);",
            k.name
        );
        let _ = writeln!(h, "  launch();");
        let _ = writeln!(h, "  CHECK(cudaGetLastError());");
        let _ = writeln!(h, "  CHECK(cudaDeviceSynchronize());");
    }

    /// Every global buffer downloaded and written to the output directory.
    fn harness_downloads(&self, h: &mut String) {
        let k = self.k;
        for p in &k.params {
            if let Param::Global(g) = p {
                let gd = &k.globals[*g];
                let n = self.global_name(*g);
                let t = elem_c_type(gd.elem);
                let _ = writeln!(
                    h,
                    "  CHECK(cudaMemcpy({n}_host.data(), {n}, {n}_count * sizeof({t}), cudaMemcpyDeviceToHost));"
                );
                let writer = if gd.elem.is_float() {
                    "write_floats"
                } else {
                    "write_ints"
                };
                let _ = writeln!(
                    h,
                    "  if (!{writer}(a.outdir, \"{}\", {n}_host)) return 2;",
                    gd.name
                );
                let _ = writeln!(h, "  CHECK(cudaFree({n}));");
            }
        }
    }
}

/// The value of a scalar parameter that neither the command line, the kernel's default nor its
/// declared range gives (the interpreter's `check::DEFAULT_SCALAR`).
pub const DEFAULT_I32_PARAM: i64 = crate::ir::kernel::DEFAULT_SCALAR;

fn atomic_fn(a: AtomicOp) -> &'static str {
    match a {
        AtomicOp::Add => "atomicAdd",
        AtomicOp::Min => "atomicMin",
        AtomicOp::Max => "atomicMax",
        AtomicOp::Exch => "atomicExch",
        AtomicOp::And => "atomicAnd",
        AtomicOp::Or => "atomicOr",
    }
}

const PRELUDE: &str = r#"
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>

// i32 arithmetic wraps (two's complement); div/rem round toward negative infinity.
static __device__ __forceinline__ int ss_add_i32(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
static __device__ __forceinline__ int ss_sub_i32(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
static __device__ __forceinline__ int ss_mul_i32(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
static __device__ __forceinline__ int ss_div_i32(int a, int b) {
  if (b == -1) return (int)(0u - (unsigned)a);
  int q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
static __device__ __forceinline__ int ss_rem_i32(int a, int b) {
  if (b == -1) return 0;
  int r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static __device__ __forceinline__ int ss_min_i32(int a, int b) { return a < b ? a : b; }
static __device__ __forceinline__ int ss_max_i32(int a, int b) { return a > b ? a : b; }
static __device__ __forceinline__ int ss_and_i32(int a, int b) { return a & b; }
static __device__ __forceinline__ int ss_or_i32(int a, int b) { return a | b; }
static __device__ __forceinline__ int ss_xor_i32(int a, int b) { return a ^ b; }
static __device__ __forceinline__ int ss_shl_i32(int a, int b) { return (int)((unsigned)a << (b & 31)); }
static __device__ __forceinline__ int ss_shr_i32(int a, int b) { return a >> (b & 31); }
static __device__ __forceinline__ int ss_neg_i32(int a) { return (int)(0u - (unsigned)a); }
static __device__ __forceinline__ int ss_not_i32(int a) { return ~a; }
static __device__ __forceinline__ int ss_abs_i32(int a) { return a < 0 ? ss_neg_i32(a) : a; }
static __device__ __forceinline__ int ss_exp_i32(int a) { return a; }
static __device__ __forceinline__ int ss_sqrt_i32(int a) { return a; }
// f32: IEEE-754 round to nearest, never contracted into FMAs.
static __device__ __forceinline__ float ss_add_f32(float a, float b) { return __fadd_rn(a, b); }
static __device__ __forceinline__ float ss_sub_f32(float a, float b) { return __fsub_rn(a, b); }
static __device__ __forceinline__ float ss_mul_f32(float a, float b) { return __fmul_rn(a, b); }
static __device__ __forceinline__ float ss_div_f32(float a, float b) { return __fdiv_rn(a, b); }
static __device__ __forceinline__ float ss_rem_f32(float a, float b) { return fmodf(a, b); }
static __device__ __forceinline__ float ss_min_f32(float a, float b) { return fminf(a, b); }
static __device__ __forceinline__ float ss_max_f32(float a, float b) { return fmaxf(a, b); }
static __device__ __forceinline__ float ss_neg_f32(float a) { return -a; }
static __device__ __forceinline__ float ss_exp_f32(float a) { return expf(a); }
static __device__ __forceinline__ float ss_sqrt_f32(float a) { return __fsqrt_rn(a); }
static __device__ __forceinline__ float ss_abs_f32(float a) { return fabsf(a); }
// ftoi: truncate toward zero, saturate, NaN gives 0.
static __device__ __forceinline__ int ss_ftoi(float f) {
  if (f != f) return 0;
  if (f >= 2147483648.0f) return 2147483647;
  if (f <= -2147483648.0f) return (-2147483647 - 1);
  return (int)f;
}
"#;

const PRELUDE_CP_ASYNC: &str = r#"
// cp.async (sm_80+): 4-byte copies in per-thread commit groups.
static __device__ __forceinline__ void ss_cp_async4(void* smem, const void* gmem) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(s), "l"(gmem) : "memory");
}
template <int B> static __device__ __forceinline__ void ss_cp_async_n(void* smem, const void* gmem) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" :: "r"(s), "l"(gmem), "n"(B) : "memory");
}
static __device__ __forceinline__ void ss_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void ss_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
static __device__ __forceinline__ void ss_cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
"#;

const PRELUDE_NAMED: &str = r#"
// Named barriers: bar.arrive / bar.sync id, n.
static __device__ __forceinline__ void ss_bar_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(n) : "memory");
}
static __device__ __forceinline__ void ss_bar_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(n) : "memory");
}
"#;

const PRELUDE_HOPPER: &str = r#"
// mbarriers and bulk copies (sm_90). A TMA tile copy is one bulk copy per contiguous row,
// each completing its bytes on the mbarrier (no CUtensorMap needed).
static __device__ __forceinline__ unsigned ss_smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ void ss_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
static __device__ __forceinline__ void ss_mbar_init(unsigned long long* m, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(ss_smem(m)), "r"(n) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  ss_fence_proxy_async();
}
static __device__ __forceinline__ void ss_mbar_arrive(unsigned long long* m) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(ss_smem(m)) : "memory");
}
static __device__ __forceinline__ void ss_mbar_arrive_tx(unsigned long long* m, unsigned tx) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(ss_smem(m)), "r"(tx) : "memory");
}
static __device__ __forceinline__ void ss_mbar_expect_tx(unsigned long long* m, unsigned tx) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" :: "r"(ss_smem(m)), "r"(tx) : "memory");
}
static __device__ __forceinline__ void ss_mbar_wait(unsigned long long* m, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(ss_smem(m)), "r"(parity & 1u) : "memory");
  } while (!done);
}
static __device__ __forceinline__ void ss_mbar_inval(unsigned long long* m) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" :: "r"(ss_smem(m)) : "memory");
}
static __device__ __forceinline__ void ss_bulk_load(void* smem, const void* gmem, unsigned bytes, unsigned long long* m) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               :: "r"(ss_smem(smem)), "l"(gmem), "r"(bytes), "r"(ss_smem(m)) : "memory");
}
static __device__ __forceinline__ void ss_bulk_store(void* gmem, const void* smem, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n"
               :: "l"(gmem), "r"(ss_smem(smem)), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void ss_bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void ss_bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(N) : "memory");
}
"#;

const HARNESS_PRELUDE: &str = r#"
// ---------------------------------------------------------------- host harness
// usage: PROGRAM OUTDIR [--seed S] [--param NAME=VALUE]... [--grid X[,Y[,Z]]] [--time N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <algorithm>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, cudaGetErrorString(e_)); \
  std::exit(3); } } while (0)

struct Args {
  std::string outdir = ".";
  uint64_t seed = 0;
  unsigned grid[3] = {1, 1, 1};
  int time_runs = 0;
  std::vector<std::pair<std::string, std::string>> params;
  std::vector<bool> used;
};

static Args parse_args(int argc, char** argv, unsigned gx, unsigned gy, unsigned gz) {
  Args a;
  a.grid[0] = gx; a.grid[1] = gy; a.grid[2] = gz;
  bool have_outdir = false;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "error: %s needs a value\n", s.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (s == "--seed") a.seed = std::strtoull(next().c_str(), nullptr, 0);
    else if (s == "--time") a.time_runs = std::atoi(next().c_str());
    else if (s == "--grid") {
      std::string g = next();
      unsigned v[3] = {1, 1, 1};
      int n = std::sscanf(g.c_str(), "%u,%u,%u", &v[0], &v[1], &v[2]);
      if (n < 1) { std::fprintf(stderr, "error: bad --grid `%s`\n", g.c_str()); std::exit(2); }
      a.grid[0] = v[0]; a.grid[1] = v[1]; a.grid[2] = v[2];
    } else if (s == "--param") {
      std::string p = next();
      size_t eq = p.find('=');
      if (eq == std::string::npos) { std::fprintf(stderr, "error: --param wants NAME=VALUE, not `%s`\n", p.c_str()); std::exit(2); }
      a.params.push_back({p.substr(0, eq), p.substr(eq + 1)});
    } else if (!have_outdir && s.rfind("--", 0) != 0) { a.outdir = s; have_outdir = true; }
    else { std::fprintf(stderr, "error: unknown argument `%s`\n", s.c_str()); std::exit(2); }
  }
  a.used.assign(a.params.size(), false);
  return a;
}

static long long param_i(Args& a, const char* name, long long dflt) {
  for (size_t i = 0; i < a.params.size(); ++i)
    if (a.params[i].first == name) { a.used[i] = true; return std::strtoll(a.params[i].second.c_str(), nullptr, 0); }
  return dflt;
}
static double param_f(Args& a, const char* name, double dflt) {
  for (size_t i = 0; i < a.params.size(); ++i)
    if (a.params[i].first == name) { a.used[i] = true; return std::strtod(a.params[i].second.c_str(), nullptr); }
  return dflt;
}
static void check_params(const Args& a) {
  for (size_t i = 0; i < a.params.size(); ++i)
    if (!a.used[i]) { std::fprintf(stderr, "error: the kernel has no scalar parameter `%s`\n", a.params[i].first.c_str()); std::exit(2); }
}

// Inputs, exactly as docs/ir.md section 3 says: element i of the p-th global parameter is
// gen(seed, p, i) with x = splitmix64(seed ^ (p << 48) ^ i).
static uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int gen_int(uint64_t seed, uint64_t p, uint64_t i) {
  const uint64_t x = splitmix64(seed ^ (p << 48) ^ i);
  return (int)((x >> 33) % 17) - 8;
}
static float gen_float(uint64_t seed, uint64_t p, uint64_t i) {
  const uint64_t x = splitmix64(seed ^ (p << 48) ^ i);
  const float u = (float)(x >> 40) / 16777216.0f;
  return u * 2.0f - 1.0f;
}

static float to_f32(float v) { return v; }
static float to_f32(__half v) { return __half2float(v); }
static float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> static bool write_floats(const std::string& dir, const char* name, const std::vector<T>& v) {
  std::string path = dir + "/" + name + ".txt";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) { std::fprintf(stderr, "error: cannot write `%s`\n", path.c_str()); return false; }
  for (const T& x : v) std::fprintf(f, "%.9e\n", (double)to_f32(x));
  std::fclose(f);
  return true;
}
template <typename T> static bool write_ints(const std::string& dir, const char* name, const std::vector<T>& v) {
  std::string path = dir + "/" + name + ".txt";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) { std::fprintf(stderr, "error: cannot write `%s`\n", path.c_str()); return false; }
  for (const T& x : v) std::fprintf(f, "%d\n", (int)x);
  std::fclose(f);
  return true;
}

// Timing: warm-up launches, then N launches each timed with device events; one line out.
template <typename F> static int time_kernel(const Args& a, const char* name, F launch) {
  for (int i = 0; i < 5; ++i) launch();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  std::vector<float> ms;
  for (int i = 0; i < a.time_runs; ++i) {
    CHECK(cudaEventRecord(t0));
    launch();
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    CHECK(cudaGetLastError());
    float m = 0;
    CHECK(cudaEventElapsedTime(&m, t0, t1));
    ms.push_back(m);
  }
  std::sort(ms.begin(), ms.end());
  const float med = ms.empty() ? 0.0f : ms[ms.size() / 2];
  const float lo = ms.empty() ? 0.0f : ms.front();
  std::printf("TIME kernel=%s median_ms=%.6f min_ms=%.6f runs=%d grid=%u,%u,%u\n", name, med, lo, a.time_runs,
              a.grid[0], a.grid[1], a.grid[2]);
  return 0;
}
"#;

/// The register bases of a layout that are independent of the earlier ones: enumerating
/// their combinations visits each element a thread holds exactly once.
fn pivot_registers(d: &Distributed) -> Vec<u64> {
    let mut echelon: Vec<u64> = Vec::new();
    let mut out = Vec::new();
    for &b in &d.reg {
        let mut v = b;
        for &e in &echelon {
            v = v.min(v ^ e);
        }
        if v != 0 {
            echelon.push(v);
            echelon.sort_unstable_by(|a, b| b.cmp(a));
            out.push(b);
        }
    }
    out
}

/// The diagnostic (code, message) for an op whose feature (its signature's) the NVIDIA
/// target `t` lacks, where CUDA output refuses it before looking at operands; `None` when the
/// op is available or its operands decide (wgmma, and the commits and waits, which lower to
/// nothing the target lacks).
fn unavailable(kind: &OpKind, t: &Target) -> Option<(&'static str, String)> {
    let sig = kind.signature();
    if has(t, sig.needs) {
        return None;
    }
    let (m, name) = (kind.mnemonic(), t.name);
    let copy = matches!(
        sig.code,
        OpCode::TmaLoad | OpCode::TmaStore | OpCode::CpAsync | OpCode::CpAsyncTile
    );
    Some(match sig.needs {
        Feature::GatherToLds => (
            "E0702",
            format!("`{m}` is an AMD op; target `{name}` has no such copy"),
        ),
        Feature::TensorDma => (
            "E0702",
            format!("`{m}` is an AMD tensor-DMA op; target `{name}` has no such copy"),
        ),
        Feature::CounterWaits => (
            "E0702",
            format!("`{m}` waits on AMD counters; target `{name}` has none"),
        ),
        Feature::SplitBarriers => (
            "E0702",
            format!("split barriers are a gfx12 feature; target `{name}` has none"),
        ),
        Feature::Tma if copy => (
            "E0704",
            format!("TMA copies need sm_90; target `{name}` has none"),
        ),
        Feature::Mbarrier => (
            "E0704",
            format!("mbarriers are emitted for sm_90; target `{name}` is not"),
        ),
        Feature::ProxyFence => (
            "E0704",
            format!("`{m}` needs sm_90; target `{name}` has no async proxy"),
        ),
        Feature::CpAsync if copy => ("E0704", format!("target `{name}` has no cp.async")),
        _ => return None,
    })
}
