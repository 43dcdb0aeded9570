"""Probe: can Triton 3.6 warp-specialize a matmul loop on this GPU? Tries the corpus kernel
(pointer loads) and a TMA-descriptor variant with `tl.range(..., warp_specialize=True)`;
writes the TTGIR/PTX of any that compiles and the error of any that does not."""
import os, sys, traceback, json
import torch, triton, triton.language as tl
sys.path.insert(0, os.path.dirname(__file__))
import compile as corpus

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


@triton.jit
def matmul_ws_tma(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    da = tl.make_tensor_descriptor(a, [M, K], [K, 1], [BM, BK])
    db = tl.make_tensor_descriptor(b, [K, N], [N, 1], [BK, BN])
    dc = tl.make_tensor_descriptor(c, [M, N], [N, 1], [BM, BN])
    om = tl.program_id(0) * BM
    on = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK), warp_specialize=True):
        acc = tl.dot(da.load([om, k * BK]), db.load([k * BK, on]), acc)
    dc.store([om, on], acc.to(tl.float16))


def alloc(size, align, stream):
    return torch.empty(size, device="cuda", dtype=torch.int8)


triton.set_allocator(alloc)
M = N = K = 1024
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn(K, N, device="cuda", dtype=torch.float16)
res = {"triton": triton.__version__, "cap": torch.cuda.get_device_capability()}
for name, fn in [
    ("ptr_w4_s3", lambda c: corpus.matmul_ws[(M // 128, N // 128)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BM=128, BN=128, BK=64, num_warps=4, num_stages=3)),
    ("tma_w4_s3", lambda c: matmul_ws_tma[(M // 128, N // 128)](a, b, c, M, N, K, BM=128, BN=128, BK=64, num_warps=4, num_stages=3)),
    ("tma_w8_s2", lambda c: matmul_ws_tma[(M // 128, N // 128)](a, b, c, M, N, K, BM=128, BN=128, BK=64, num_warps=8, num_stages=2)),
]:
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    try:
        h = fn(c)
        torch.cuda.synchronize()
        err = ((c.float() - a.float() @ b.float()).norm() / (a.float() @ b.float()).norm()).item()
        ttgir = h.asm["ttgir"]
        res[name] = {"ok": True, "rel_err": err, "warp_specialize_in_ttgir": "ttg.warp_specialize" in ttgir}
        open(f"{out}/{name}.ttgir", "w").write(ttgir)
        open(f"{out}/{name}.ptx", "w").write(h.asm["ptx"])
    except Exception as e:
        res[name] = {"ok": False, "error": "".join(traceback.format_exception_only(type(e), e))[-3000:]}
json.dump(res, open(f"{out}/probe.json", "w"), indent=1)
print(json.dumps(res, indent=1)[:6000])
