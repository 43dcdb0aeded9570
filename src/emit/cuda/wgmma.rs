//! CUDA C++ for Hopper's warpgroup MMA: `wgmma` → inline PTX
//! `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}` with two shared-memory matrix
//! descriptors in the no-swizzle layout (`ir::wgmma` says which views denote it and where
//! each element lives), or, for register A, four `.f16x2`/`.bf16x2` registers packed with
//! `cvt.rn` (round to nearest even, as the interpreter rounds) and B's descriptor,
//! preceded by `wgmma.fence.sync.aligned`; `wgmma_commit` →
//! `wgmma.commit_group.sync.aligned`; `wgmma_wait N` → `wgmma.wait_group.sync.aligned N`.
//!
//! Invariants: the accumulators are mutable `float` locals that the instruction reads and
//! writes in place (`"+f"`, scale-d = 1, so `D = C + A B` with `C` the accumulator operands).
//! The registers are written asynchronously until a `wgmma_wait`: every op that reads a
//! value fed by a wgmma (through moves, `analysis::regdeps`) is preceded by an empty
//! `asm volatile` that claims to rewrite it, so the compiler cannot hoist the read above the
//! wait (the role of CUTLASS's `warpgroup_fence_operand`). The kernel needs `sm_90a`
//! (`-gencode=arch=compute_90a,code=sm_90a`).
//!
//! Complexity: O(registers) text per wgmma; the register-source query is memoized per kernel.

use std::fmt::Write;

use super::Emitter;
use crate::analysis::regdeps::{RegSources, consumed};
use crate::ir::wgmma::{HardwareShape, LEADING_BYTES, STRIDE_BYTES, WARPGROUP, hardware_shape};
use crate::ir::wgmma::A_REGISTERS;
use crate::ir::*;

/// Device helpers for wgmma kernels: the shared-memory matrix descriptor.
pub(super) fn prelude() -> String {
    let mut s = String::from(
        "\n// wgmma (sm_90a): no-swizzle shared-memory matrix descriptors of 8 x 16-byte core\n\
         // matrices (start address, leading byte offset along K, stride byte offset along M/N).\n",
    );
    let _ = writeln!(
        s,
        "static __device__ __forceinline__ unsigned long long ss_wgmma_desc(const void* p) {{\n  \
         const unsigned long long a = (unsigned long long)(unsigned)__cvta_generic_to_shared(p);\n  \
         return ((a & 0x3FFFFull) >> 4) | ((unsigned long long)({LEADING_BYTES} >> 4) << 16)\n    \
         | ((unsigned long long)({STRIDE_BYTES} >> 4) << 32);\n}}"
    );
    s.push_str(
        "// Register A of wgmma: two f32 values rounded to nearest even and packed, the first in\n\
         // the low half (PTX cvt.rn.{f16x2,bf16x2}.f32 puts its second source in the low half).\n\
         static __device__ __forceinline__ unsigned ss_pack_f16x2(float lo, float hi) {\n  \
         unsigned r;\n  asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n  return r;\n}\n\
         static __device__ __forceinline__ unsigned ss_pack_bf16x2(float lo, float hi) {\n  \
         unsigned r;\n  asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n  return r;\n}\n",
    );
    s
}

/// Whether the kernel has any wgmma op (its accumulators are then mutable locals).
pub(super) fn uses_wgmma(k: &Kernel) -> bool {
    k.ops_in_order()
        .iter()
        .any(|&o| k.ops[o].kind.signature().family == Family::Wgmma)
}

impl Emitter<'_> {
    /// E1400/E1401: a wgmma that is not in the hardware form, or a block that is not made of
    /// whole warpgroups.
    pub(super) fn check_wgmma(&mut self, op: Op, a: &WgmmaA, b: MemRef, acc: &WgmmaAcc) {
        if let Err(why) = hardware_shape(self.k, a, b, acc.all().len()) {
            let d = crate::diag::Diagnostic::user(
                "E1400",
                format!("this wgmma has no sm_90a instruction: {why}"),
            )
            .with_label(self.k.span(op), "cannot be emitted as CUDA C++")
            .with_help("declare A as f16[8, 2, 8, 8] and B as f16[N/8, 2, 8, 8] (8 x 8 core matrices, docs/ir.md section 4) with N/2 accumulators, or give A as 8 register values");
            self.errors.push(d);
        }
        let threads = self.k.threads();
        if !(threads as u64).is_multiple_of(WARPGROUP) {
            self.err(
                op,
                "E1401",
                format!("a wgmma is issued by whole warpgroups of 128 threads; the block has {threads}"),
            );
        }
    }

    /// `%d.. = wgmma A, %b, %c..`: copy the accumulators into the results, then one
    /// `wgmma.fence` + `wgmma.mma_async` on them in place.
    pub(super) fn emit_wgmma(&mut self, op: Op, a: &WgmmaA, b: MemRef, acc: &WgmmaAcc) {
        let Ok(shape) = hardware_shape(self.k, a, b, acc.all().len()) else {
            return; // refused by `check_wgmma`
        };
        let results = self.k.ops[op].results.clone();
        for (r, c) in results.iter().zip(acc.all()) {
            let line = format!("float {} = {};", self.v(*r), self.opnd(c, ScalarType::F32));
            self.line(&line);
        }
        // The A operand text and its inline-asm inputs.
        let (a_text, a_inputs) = match a {
            WgmmaA::Shared(m) => {
                let da = self.descriptor(*m, "ss_da");
                (format!("%{}", results.len()), vec![format!("\"l\"({da})")])
            }
            WgmmaA::Regs(regs) => self.register_a(regs, shape),
        };
        let db = self.descriptor(b, "ss_db");
        self.line("asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");");
        let n = results.len();
        let (bi, pi) = (n + a_inputs.len(), n + a_inputs.len() + 1);
        let regs: Vec<String> = (0..n).map(|i| format!("%{i}")).collect();
        // The immediate transpose flags: A's (shared A only), then B's.
        let trans = if a.shared().is_some() { "0, 0" } else { "0" };
        let text = format!(
            "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{pi}, 0;\\n{} {{{}}}, {a_text}, %{bi}, p, 1, 1, {trans};\\n}}\\n",
            mnemonic(shape),
            regs.join(", "),
        );
        let outs: Vec<String> = results
            .iter()
            .map(|r| format!("\"+f\"({})", self.v(*r)))
            .collect();
        self.line(&format!("asm volatile(\"{text}\""));
        self.line(&format!("  : {}", outs.join(", ")));
        self.line(&format!(
            "  : {}, \"l\"({db}), \"r\"(1) : \"memory\");",
            a_inputs.join(", ")
        ));
    }

    /// A shared-memory matrix descriptor for view `m`, as a fresh local.
    fn descriptor(&mut self, m: MemRef, prefix: &str) -> String {
        let name = self.fresh(prefix);
        let base = self.elem_ref(m, &[]);
        self.line(&format!(
            "const unsigned long long {name} = ss_wgmma_desc(&{base});"
        ));
        name
    }

    /// Register A: four packed `.f16x2` (`.bf16x2`) locals, value `2 j` in the low half of
    /// register `j`; returns the `{..}` operand text (after the accumulators) and the inputs.
    fn register_a(&mut self, regs: &[Operand], shape: HardwareShape) -> (String, Vec<String>) {
        let pack = if shape.elem == ElemType::BF16 {
            "ss_pack_bf16x2"
        } else {
            "ss_pack_f16x2"
        };
        let first = shape.registers();
        let mut names = Vec::new();
        for (j, pair) in regs.chunks(2).take(A_REGISTERS / 2).enumerate() {
            let name = self.fresh("ss_ra");
            let (lo, hi) = (
                self.opnd(&pair[0], ScalarType::F32),
                self.opnd(&pair[pair.len() - 1], ScalarType::F32),
            );
            self.line(&format!("const unsigned {name} = {pack}({lo}, {hi});"));
            names.push((format!("%{}", first + j), format!("\"r\"({name})")));
        }
        let text = format!(
            "{{{}}}",
            names.iter().map(|x| x.0.as_str()).collect::<Vec<_>>().join(", ")
        );
        (text, names.into_iter().map(|x| x.1).collect())
    }

    /// `wgmma_commit` and `wgmma_wait N`.
    pub(super) fn emit_wgmma_sync(&mut self, kind: &OpKind) {
        match kind {
            OpKind::WgmmaCommit => {
                self.line("asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");")
            }
            OpKind::WgmmaWait(n) => self.line(&format!(
                "asm volatile(\"wgmma.wait_group.sync.aligned {n};\\n\" ::: \"memory\");"
            )),
            _ => {}
        }
    }

    /// Before an op that reads values fed by a wgmma: pin each such value after the program
    /// point (the wait that precedes the op), so that the read is not scheduled earlier.
    pub(super) fn wgmma_operand_fences(&mut self, op: Op, regs: &mut RegSources<'_>) {
        let mut seen = Vec::new();
        for v in consumed(self.k, op) {
            if self.k.values[v].ty == ScalarType::F32
                && !seen.contains(&v)
                && !regs.wgmma_sources(v).is_empty()
            {
                seen.push(v);
                let line = format!("asm volatile(\"\" : \"+f\"({}) :: \"memory\");", self.v(v));
                self.line(&line);
            }
        }
    }
}

/// The PTX mnemonic of a hardware-form wgmma.
fn mnemonic(s: HardwareShape) -> String {
    let t = if s.elem == ElemType::BF16 { "bf16" } else { "f16" };
    format!(
        "wgmma.mma_async.sync.aligned.m64n{}k16.f32.{t}.{t}",
        s.n
    )
}
