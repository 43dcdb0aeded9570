//! CUDA C++ for Hopper's warpgroup MMA: `wgmma` → inline PTX
//! `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}` with two shared-memory matrix
//! descriptors in the no-swizzle layout (`ir::wgmma` says which views denote it and where
//! each element lives), preceded by `wgmma.fence.sync.aligned`; `wgmma_commit` →
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
    s
}

/// Whether the kernel has any wgmma op (its accumulators are then mutable locals).
pub(super) fn uses_wgmma(k: &Kernel) -> bool {
    k.ops_in_order().iter().any(|&o| {
        matches!(
            k.ops[o].kind,
            OpKind::Wgmma { .. } | OpKind::WgmmaCommit | OpKind::WgmmaWait(_)
        )
    })
}

impl Emitter<'_> {
    /// E1400/E1401: a wgmma that is not in the hardware form, or a block that is not made of
    /// whole warpgroups.
    pub(super) fn check_wgmma(&mut self, op: Op, a: MemRef, b: MemRef, acc: &WgmmaAcc) {
        if let Err(why) = hardware_shape(self.k, a, b, acc.all().len()) {
            let d = crate::diag::Diagnostic::user(
                "E1400",
                format!("this wgmma has no sm_90a instruction: {why}"),
            )
            .with_label(self.k.span(op), "cannot be emitted as CUDA C++")
            .with_help("declare A as f16[8, 2, 8, 8] and B as f16[N/8, 2, 8, 8] (8 x 8 core matrices, docs/ir.md section 4) with N/2 accumulators");
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

    /// `%d.. = wgmma %a, %b, %c..`: copy the accumulators into the results, then one
    /// `wgmma.fence` + `wgmma.mma_async` on them in place.
    pub(super) fn emit_wgmma(&mut self, op: Op, a: MemRef, b: MemRef, acc: &WgmmaAcc) {
        let Ok(shape) = hardware_shape(self.k, a, b, acc.all().len()) else {
            return; // refused by `check_wgmma`
        };
        let results = self.k.ops[op].results.clone();
        for (r, c) in results.iter().zip(acc.all()) {
            let line = format!("float {} = {};", self.v(*r), self.opnd(c, ScalarType::F32));
            self.line(&line);
        }
        let (da, db) = (self.fresh("ss_da"), self.fresh("ss_db"));
        for (name, m) in [(&da, a), (&db, b)] {
            let base = self.elem_ref(m, &[]);
            self.line(&format!(
                "const unsigned long long {name} = ss_wgmma_desc(&{base});"
            ));
        }
        self.line("asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");");
        let regs: Vec<String> = (0..results.len()).map(|i| format!("%{i}")).collect();
        let n = results.len();
        let text = format!(
            "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\n{} {{{}}}, %{n}, %{}, p, 1, 1, 0, 0;\\n}}\\n",
            n + 2,
            mnemonic(shape),
            regs.join(", "),
            n + 1
        );
        let outs: Vec<String> = results
            .iter()
            .map(|r| format!("\"+f\"({})", self.v(*r)))
            .collect();
        self.line(&format!("asm volatile(\"{text}\""));
        self.line(&format!("  : {}", outs.join(", ")));
        self.line(&format!(
            "  : \"l\"({da}), \"l\"({db}), \"r\"(1) : \"memory\");"
        ));
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
