//! The hardware form of `wgmma`: which operand shapes denote the sm_90a instruction
//! `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}` with shared-memory descriptors in
//! the no-swizzle layout, and where each element of the operands and of the accumulator
//! fragment lives (docs/ir.md section 4, "The hardware form of wgmma").
//!
//! Layout (PTX ISA, "Matrix Descriptor" and "Register Fragments" for `wgmma` .m64nNk16):
//! shared operands are made of *core matrices* of 8 rows x 16 bytes (8 f16/bf16 values
//! along K), each stored as 128 contiguous bytes. The IR states that layout in the view's
//! shape instead of a descriptor: A (M x K = 64 x 16) is a view of shape `[8, 2, 8, 8]` and
//! `A[m][k]` is its element `[m / 8, k / 8, m % 8, k % 8]`; B (K x N = 16 x N) is a view of
//! shape `[N / 8, 2, 8, 8]` and `B[k][n]` is its element `[n / 8, k / 8, n % 8, k % 8]`
//! (both K-major, the layout Triton and CUTLASS use for f16). The view must be contiguous,
//! so the core matrix at `[i, j]` starts `(2 i + j) * 128` bytes into it: the descriptor's
//! leading-dimension byte offset (next core matrix along K) is 128 and its stride byte
//! offset (next 8 rows along M or N) is 256.
//!
//! The accumulator of thread `t` (`t mod 128` within its warpgroup, warp `w = t' / 32`, lane
//! `l = t' mod 32`) is `N / 2` f32 registers; register `i` holds `D[row][col]` with
//! `row = 16 w + l / 4 + 8 ((i / 2) mod 2)` and `col = 8 (i / 4) + 2 (l mod 4) + i mod 2`.
//!
//! With A in registers (`wgmma [%a0, .., %a7], @b, ..`, PTX's `.f16x2` A fragment of
//! `wgmma .m64nNk16`), thread `t` holds eight values, and value `i` is `A[row][col]` at the
//! same `(row, col)` as accumulator register `i` of an m64n16k16 wgmma (rows `16 w + l / 4`
//! and `+ 8`, columns `2 (l mod 4)`, `+ 1`, `+ 8`, `+ 9`): an n16 accumulator converted to
//! f16 is a k16 A operand as it stands, which is how attention feeds P to its second GEMM.
//!
//! Register A is *held* until a `wgmma_wait` completes the wgmma (PTX: accessing the A
//! registers of a pending `wgmma.mma_async` is undefined). [`register_reads`] and
//! [`register_writes`] say which values an op accesses as registers, for the interpreter's
//! C0050 and the wait planner alike; [`consumed`], which values an op consumes rather than
//! moves, for the interpreter's C0015 and the placer's waits before a use.
//!
//! Complexity: O(rank) per query. Shared by the interpreter and the CUDA emitter (both
//! must agree with the hardware; neither depends on the other).

use super::{ElemType, Kernel, MemRef, Op, OpKind, Operand, Parents, Value, ViewIndex, WgmmaA};

/// Rows of A (M) of every hardware wgmma.
pub const M: u64 = 64;
/// The reduction depth (K) of one f16/bf16 wgmma.
pub const K: u64 = 16;
/// Threads of a warpgroup (4 consecutive warps), the unit that issues a wgmma.
pub const WARPGROUP: u64 = 128;

/// Registers of A per thread when A comes from registers (four `.f16x2` registers).
pub const A_REGISTERS: usize = 8;

/// A wgmma in the hardware form: its N and the operands' element type.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HardwareShape {
    /// Columns of B and D: a multiple of 8 in `8..=256`.
    pub n: u64,
    /// `f16` or `bf16`, the same for both operands (for register A: B's, which A's values
    /// are rounded to).
    pub elem: ElemType,
}

impl HardwareShape {
    /// Accumulator registers per thread (`N / 2`).
    pub fn registers(&self) -> usize {
        (self.n / 2) as usize
    }
}

/// Why a wgmma is not in the hardware form (for diagnostics), or its shape.
pub fn hardware_shape(
    k: &Kernel,
    a: &WgmmaA,
    b: MemRef,
    accumulators: usize,
) -> Result<HardwareShape, String> {
    let eb = k.elem(b);
    let ea = match a {
        WgmmaA::Shared(a) => k.elem(*a),
        WgmmaA::Regs(_) => eb,
    };
    if ea != eb || !matches!(ea, ElemType::F16 | ElemType::BF16) {
        return Err(match a {
            WgmmaA::Shared(_) => {
                format!("the operands must both be f16 or both bf16 (they are {ea} and {eb})")
            }
            WgmmaA::Regs(_) => format!("B must be f16 or bf16 (it is {eb})"),
        });
    }
    match a {
        WgmmaA::Shared(am) if k.shape(*am) != [8, 2, 8, 8] => {
            return Err(format!(
                "A must be a [8, 2, 8, 8] view (64 x 16 in 8 x 8 core matrices), not {:?}",
                k.shape(*am)
            ));
        }
        WgmmaA::Regs(r) if r.len() != A_REGISTERS => {
            return Err(format!(
                "register A is {A_REGISTERS} values per thread (64 x 16 over a warpgroup), not {}",
                r.len()
            ));
        }
        _ => {}
    }
    let sb = k.shape(b);
    let n = sb.first().copied().unwrap_or(0) * 8;
    if sb.len() != 4 || sb[1..] != [2, 8, 8] || n == 0 || n > 256 {
        return Err(format!(
            "B must be a [N/8, 2, 8, 8] view with N a multiple of 8 up to 256, not {sb:?}"
        ));
    }
    if accumulators as u64 != n / 2 {
        return Err(format!(
            "an m64n{n}k16 wgmma has {} accumulator registers per thread, not {accumulators}",
            n / 2
        ));
    }
    for (m, name) in [(a.shared(), "A"), (Some(b), "B")] {
        if let Some(m) = m
            && !contiguous(k, m)
        {
            return Err(format!(
                "{name} must be contiguous in its buffer (index leading dimensions only)"
            ));
        }
    }
    Ok(HardwareShape { n, elem: ea })
}

/// Whether a memref's elements are consecutive in its root buffer (its element strides are
/// the row-major strides of its shape, dimensions of extent 1 aside).
pub fn contiguous(k: &Kernel, m: MemRef) -> bool {
    let shape = k.shape(m);
    let strides = strides(k, m);
    let mut expect = 1u64;
    for (d, s) in shape.iter().zip(&strides).rev() {
        if *d > 1 && *s != expect {
            return false;
        }
        expect *= d;
    }
    true
}

/// Element strides of a memref over its root buffer.
fn strides(k: &Kernel, m: MemRef) -> Vec<u64> {
    match m {
        MemRef::Buffer(b) => {
            let shape = &k.buffers[b].shape;
            let mut s = vec![1u64; shape.len()];
            for i in (0..shape.len().saturating_sub(1)).rev() {
                s[i] = s[i + 1] * shape[i + 1];
            }
            s
        }
        MemRef::View(v) => {
            let vd = &k.views[v];
            let base = strides(k, vd.base);
            let mut out: Vec<u64> = vd
                .indices
                .iter()
                .zip(&base)
                .filter(|(ix, _)| matches!(ix, ViewIndex::Range(..)))
                .map(|(_, s)| *s)
                .collect();
            out.extend(base.iter().skip(vd.indices.len()));
            out
        }
    }
}

/// The `(row, col)` of `D` that accumulator register `i` of warpgroup thread `t` holds.
pub fn fragment_position(t: u64, i: u64) -> (u64, u64) {
    let (w, l) = ((t % WARPGROUP) / 32, t % 32);
    let row = 16 * w + l / 4 + 8 * ((i / 2) % 2);
    let col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
    (row, col)
}

/// The `(row, col)` of `A` that register-A value `i` (`0..8`) of warpgroup thread `t` holds:
/// the accumulator fragment of an m64n16k16 wgmma (PTX's A fragment of `wgmma .m64nNk16`).
pub fn a_fragment_position(t: u64, i: u64) -> (u64, u64) {
    fragment_position(t, i)
}

/// The values `op` consumes: every value operand except moves (the operands of `yield`, the
/// initial values of `for`/`while`) and a `wgmma`'s accumulator (chaining). A wgmma's
/// register A operands are consumed (read at issue).
pub fn consumed(k: &Kernel, op: Op) -> Vec<Value> {
    let mut out = Vec::new();
    let mut push = |o: &Operand| {
        if let Operand::Value(v) = o {
            out.push(*v);
        }
    };
    match &k.ops[op].kind {
        OpKind::Yield(_) | OpKind::While { .. } => {}
        OpKind::For { lo, hi, step, .. } => {
            push(lo);
            push(hi);
            push(step);
        }
        // Register A is consumed at issue; the accumulator is chained.
        OpKind::Wgmma { a, .. } => a.regs().iter().for_each(&mut push),
        kind => kind.for_each_operand(|o| push(&o)),
    }
    out
}

/// The values of `op` that a wgmma holding them as register A must not see read: every value
/// operand, except a wgmma's own register-A operands (several wgmmas may read one A fragment,
/// as CUTLASS's register-sourced GEMMs do along N).
pub fn register_reads(k: &Kernel, op: Op) -> Vec<Value> {
    let mut out = Vec::new();
    let kind = &k.ops[op].kind;
    let skip: &[Operand] = match kind {
        OpKind::Wgmma { a, .. } => a.regs(),
        _ => &[],
    };
    let mut skipped = 0;
    kind.for_each_operand(|o| {
        if let Operand::Value(v) = o {
            // Register A comes first among a wgmma's operands.
            if skipped < skip.len() {
                skipped += 1;
            } else {
                out.push(v);
            }
        }
    });
    out
}

/// The values that executing `op` (re)defines: its results; for a loop, its region arguments
/// at entry; for a `yield` or `condition`, the arguments and results of the construct it
/// hands values to (a loop's iteration values and results share storage in every lowering:
/// the CUDA emitter declares one variable for both).
pub fn register_writes(k: &Kernel, parents: &Parents, op: Op) -> Vec<Value> {
    let od = &k.ops[op];
    let mut out = od.results.to_vec();
    let args = |r: super::Region| k.region_args(r).to_vec();
    match &od.kind {
        // An `if`'s results are written by the `yield` of the arm it takes.
        OpKind::If { .. } => out.clear(),
        // Entering a loop binds the arguments of its first region (a `for` body, a `while`
        // condition), which share storage with its results.
        OpKind::For { .. } | OpKind::While { .. } => {
            if let Some(&r) = od.regions.first() {
                out.extend(args(r));
            }
        }
        OpKind::Yield(_) | OpKind::Condition(_) => {
            let Some(owner) = parents.parent_op(op) else {
                return out;
            };
            let here = parents.op_region[op];
            let o = &k.ops[owner];
            match &o.kind {
                OpKind::For { .. } => out.extend(args(o.regions[0])),
                // `condition` hands to the body, the body's `yield` back to the condition.
                OpKind::While { .. } => {
                    let to = if here == Some(o.regions[0]) {
                        o.regions[1]
                    } else {
                        o.regions[0]
                    };
                    out.extend(args(to));
                }
                _ => {}
            }
            out.extend(o.results.iter().copied());
        }
        _ => {}
    }
    out
}

/// The row-major element of the A view (`[8, 2, 8, 8]`) that holds `A[m][k]`.
pub fn a_element(m: u64, k: u64) -> u64 {
    ((m / 8) * 2 + k / 8) * 64 + (m % 8) * 8 + k % 8
}

/// The row-major element of the B view (`[N/8, 2, 8, 8]`) that holds `B[k][n]`.
pub fn b_element(k: u64, n: u64) -> u64 {
    ((n / 8) * 2 + k / 8) * 64 + (n % 8) * 8 + k % 8
}

/// Byte offset between core matrices adjacent along K (the descriptor's leading byte offset).
pub const LEADING_BYTES: u64 = 128;
/// Byte offset between core matrices adjacent along M or N (the descriptor's stride byte offset).
pub const STRIDE_BYTES: u64 = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_d_element_is_held_by_exactly_one_register() {
        for n in [8u64, 16, 64, 256] {
            let mut seen = vec![0u32; (M * n) as usize];
            for t in 0..WARPGROUP {
                for i in 0..n / 2 {
                    let (r, c) = fragment_position(t, i);
                    assert!(r < M && c < n, "t={t} i={i} -> ({r}, {c})");
                    seen[(r * n + c) as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&x| x == 1), "n={n}");
        }
    }

    #[test]
    fn every_register_a_element_is_held_by_exactly_one_thread() {
        let mut seen = vec![0u32; (M * K) as usize];
        for t in 0..WARPGROUP {
            for i in 0..A_REGISTERS as u64 {
                let (r, c) = a_fragment_position(t, i);
                assert!(r < M && c < K, "t={t} i={i} -> ({r}, {c})");
                // A row is held by the four lanes of one quad of the warp that owns it.
                assert_eq!(r / 16, t / 32, "t={t} i={i}");
                seen[(r * K + c) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&x| x == 1));
    }

    #[test]
    fn operand_elements_are_a_bijection_onto_the_view() {
        let mut a: Vec<u64> = (0..M)
            .flat_map(|m| (0..K).map(move |k| a_element(m, k)))
            .collect();
        a.sort();
        assert_eq!(a, (0..M * K).collect::<Vec<_>>());
        let mut b: Vec<u64> = (0..K)
            .flat_map(|k| (0..32).map(move |n| b_element(k, n)))
            .collect();
        b.sort();
        assert_eq!(b, (0..K * 32).collect::<Vec<_>>());
        // A core matrix is 8 rows of 8 consecutive K values (16 bytes), 128 bytes in all.
        assert_eq!(a_element(0, 8) * 2, LEADING_BYTES);
        assert_eq!(a_element(8, 0) * 2, STRIDE_BYTES);
    }
}
