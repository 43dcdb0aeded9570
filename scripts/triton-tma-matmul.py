"""Triton 3.6's TMA matmul of the shape of benches/gpu/gemm128.kir and tests/gpu/gemm-ws-tma.kir:
every one of GRID programs computes C[128, 128] = A[128, K] @ B[K, 128] (f16 in, f32 out) with
128x128x64 tiles through tensor descriptors (TMA), 3 stages, optionally warp-specialized.
Prints one line per variant: the mean time of a launch (ms, triton.testing.do_bench) and the
largest difference from torch. Used by the GPU run of docs/performance.md.

    python3 scripts/triton-tma-matmul.py [K] [GRID]
"""

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_tma(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               WS: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[BM, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, BN], strides=[BN, 1], block_shape=[BK, BN])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, num_stages=3, warp_specialize=WS):
        a = a_desc.load([0, k])
        b = b_desc.load([k, 0])
        acc = tl.dot(a, b, acc)
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


def main():
    k = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    grid = int(sys.argv[2]) if len(sys.argv) > 2 else 132
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.manual_seed(1)
    a = torch.randn(128, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, 128, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 128, device="cuda", dtype=torch.float32)
    ref = a.float() @ b.float()
    for ws in (False, True):
        name = "triton-tma-ws" if ws else "triton-tma"
        try:
            run = lambda: matmul_tma[(grid,)](a, b, c, k, BM=128, BN=128, BK=64, WS=ws, num_warps=8)
            run()
            torch.cuda.synchronize()
            err = (c - ref).abs().max().item()
            ms = triton.testing.do_bench(run, warmup=25, rep=200)
            print(f"{name}: K={k} grid={grid} ms={ms:.4f} max_abs_err={err:.3e}")
        except Exception as e:  # a variant this Triton build cannot compile is said, not hidden
            print(f"{name}: failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


if __name__ == "__main__":
    main()
