"""Compile real Triton kernels and keep what Triton produced, for smemsync's corpus.

Run on a machine with an NVIDIA GPU and Triton (the device machine: Triton 3.6, H100/H200):

    python3 corpus/triton/compile.py OUTDIR

For every kernel below and every configuration it writes OUTDIR/<name>.ttgir (the TTGIR
Triton prints, `compiled.asm["ttgir"]`), OUTDIR/<name>.ptx, and one line of
OUTDIR/summary.json: the configuration, whether the kernel ran and matched a PyTorch
reference, and the synchronization Triton emitted, counted in the PTX (block barriers,
cp.async groups and waits, mbarrier waits, proxy fences, wgmma waits) and in the TTGIR
(async waits, fences, shared allocations). A kernel that fails to compile records its error
instead. The AMD backend's TTGIR (gfx942 and gfx950, OUTDIR/<name>_<arch>.ttgir) of every
kernel is compiled through Triton's HIP backend from the same arguments (the signature is
read off the launch's arguments); it needs no AMD GPU up to TTGIR, and a failure is recorded,
not fatal.

    python3 corpus/triton/compile.py OUTDIR NAME...   # only the named kernels (and their AMD TTGIR)

The kernels are written for this corpus (pipelined matmul at 2, 3, 4 stages in fp16 and fp32,
persistent, TMA and warp-specialized matmul, flash-attention forward (also TMA, plain and warp-
specialized) and backward, softmax, layer norm fwd/bwd, cumsum, transpose, two reductions).
"""

import json
import os
import re
import sys
import traceback

import torch
import triton
import triton.language as tl


@triton.jit
def matmul(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a + rm[:, None] * sam + rk[None, :] * sak
    pb = b + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        left = K - k * BK
        x = tl.load(pa, mask=rk[None, :] < left, other=0.0)
        y = tl.load(pb, mask=rk[:, None] < left, other=0.0)
        acc = tl.dot(x, y, acc)
        pa += BK * sak
        pb += BK * sbk
    pc = c + rm[:, None] * scm + rn[None, :] * scn
    tl.store(pc, acc.to(c.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def matmul_persistent(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, NUM_SMS: tl.constexpr,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_SMS):
        rm = (tile // tiles_n) * BM + tl.arange(0, BM)
        rn = (tile % tiles_n) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            x = tl.load(a + rm[:, None] * sam + (k * BK + rk)[None, :] * sak)
            y = tl.load(b + (k * BK + rk)[:, None] * sbk + rn[None, :] * sbn)
            acc = tl.dot(x, y, acc)
        tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty))


@triton.jit
def matmul_tma(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    da = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    db = tl.make_tensor_descriptor(b, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    dc = tl.make_tensor_descriptor(c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    om = tl.program_id(0) * BM
    on = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(da.load([om, k * BK]), db.load([k * BK, on]), acc)
    dc.store([om, on], acc.to(tl.float16))


@triton.jit
def matmul_ws(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # Triton 3.6 warp-specializes this loop on sm_90 only with TMA-descriptor loads: the
    # pointer-load form aborts in NVGPUWarpSpecialization (see README.md).
    da = tl.make_tensor_descriptor(a, [M, K], [K, 1], [BM, BK])
    db = tl.make_tensor_descriptor(b, [K, N], [N, 1], [BK, BN])
    dc = tl.make_tensor_descriptor(c, [M, N], [N, 1], [BM, BN])
    om = tl.program_id(0) * BM
    on = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK), warp_specialize=True):
        acc = tl.dot(da.load([om, k * BK]), db.load([k * BK, on]), acc)
    dc.store([om, on], acc.to(tl.float16))


@triton.jit
def matmul_persistent_ws(a, b, c, M, N, K, NUM_SMS: tl.constexpr, BM: tl.constexpr,
                         BN: tl.constexpr, BK: tl.constexpr):
    # The persistent warp-specialized shape: a tile loop around the producer/consumer roles,
    # whose mbarrier phases run on from tile to tile.
    da = tl.make_tensor_descriptor(a, [M, K], [K, 1], [BM, BK])
    db = tl.make_tensor_descriptor(b, [K, N], [N, 1], [BK, BN])
    dc = tl.make_tensor_descriptor(c, [M, N], [N, 1], [BM, BN])
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    for tile in tl.range(tl.program_id(0), tiles, NUM_SMS, warp_specialize=True):
        om = (tile // tiles_n) * BM
        on = (tile % tiles_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            acc = tl.dot(da.load([om, k * BK]), db.load([k * BK, on]), acc)
        dc.store([om, on], acc.to(tl.float16))


@triton.jit
def attention_fwd(q, k, v, o, n_ctx, scale, HD: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr):
    om = tl.program_id(0) * BM + tl.arange(0, BM)
    on = tl.arange(0, BN)
    od = tl.arange(0, HD)
    qt = tl.load(q + om[:, None] * HD + od[None, :])
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, HD), tl.float32)
    for start in range(0, n_ctx, BN):
        kt = tl.load(k + (start + on)[None, :] * HD + od[:, None])
        s = tl.dot(qt, kt) * scale
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        vt = tl.load(v + (start + on)[:, None] * HD + od[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), vt)
        m_i = m_new
    tl.store(o + om[:, None] * HD + od[None, :], (acc / l_i[:, None]).to(tl.float16))


@triton.jit
def attention_bwd_dkdv(q, k, v, do, lse, delta, dk, dv, n_ctx, scale, HD: tl.constexpr,
                       BM: tl.constexpr, BN: tl.constexpr):
    # One key block per program; walks every query block: dV += P^T dO, dK += dS^T Q.
    on = tl.program_id(0) * BN + tl.arange(0, BN)
    od = tl.arange(0, HD)
    kt = tl.load(k + on[:, None] * HD + od[None, :])
    vt = tl.load(v + on[:, None] * HD + od[None, :])
    dk_acc = tl.zeros((BN, HD), tl.float32)
    dv_acc = tl.zeros((BN, HD), tl.float32)
    for start in range(0, n_ctx, BM):
        om = start + tl.arange(0, BM)
        qt = tl.load(q + om[:, None] * HD + od[None, :])
        dot_ = tl.load(do + om[:, None] * HD + od[None, :])
        p = tl.exp(tl.dot(qt, tl.trans(kt)) * scale - tl.load(lse + om)[:, None])
        dv_acc += tl.dot(tl.trans(p.to(tl.float16)), dot_)
        dp = tl.dot(dot_, tl.trans(vt))
        ds = p * (dp - tl.load(delta + om)[:, None])
        dk_acc += tl.dot(tl.trans(ds.to(tl.float16)), qt)
    tl.store(dk + on[:, None] * HD + od[None, :], (dk_acc * scale).to(tl.float16))
    tl.store(dv + on[:, None] * HD + od[None, :], dv_acc.to(tl.float16))


@triton.jit
def attention_bwd_dq(q, k, v, do, lse, delta, dq, n_ctx, scale, HD: tl.constexpr,
                     BM: tl.constexpr, BN: tl.constexpr):
    # One query block per program; walks every key block: dQ += dS K.
    om = tl.program_id(0) * BM + tl.arange(0, BM)
    od = tl.arange(0, HD)
    qt = tl.load(q + om[:, None] * HD + od[None, :])
    dot_ = tl.load(do + om[:, None] * HD + od[None, :])
    m = tl.load(lse + om)
    dl = tl.load(delta + om)
    acc = tl.zeros((BM, HD), tl.float32)
    for start in range(0, n_ctx, BN):
        on = start + tl.arange(0, BN)
        kt = tl.load(k + on[:, None] * HD + od[None, :])
        vt = tl.load(v + on[:, None] * HD + od[None, :])
        p = tl.exp(tl.dot(qt, tl.trans(kt)) * scale - m[:, None])
        ds = p * (tl.dot(dot_, tl.trans(vt)) - dl[:, None])
        acc += tl.dot(ds.to(tl.float16), kt)
    tl.store(dq + om[:, None] * HD + od[None, :], (acc * scale).to(tl.float16))


@triton.jit
def softmax(out, inp, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(inp + row * stride + cols, mask=cols < n, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out + row * stride + cols, e / tl.sum(e, axis=0), mask=cols < n)


@triton.jit
def layernorm_fwd(out, inp, w, bias, stride, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(inp + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n
    y = d / tl.sqrt(var + eps) * tl.load(w + cols, mask=mask) + tl.load(bias + cols, mask=mask)
    tl.store(out + row * stride + cols, y, mask=mask)


@triton.jit
def layernorm_bwd(dx, dw_part, db_part, dy, inp, w, mean, rstd, stride, n,
                  ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # ROWS rows per program: dx per row (two row reductions each), and the program's partial
    # sums of dW and dB over its rows (summed over programs by the caller).
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    wt = tl.load(w + cols, mask=mask, other=0.0)
    dw = tl.zeros((BLOCK,), tl.float32)
    db = tl.zeros((BLOCK,), tl.float32)
    for i in range(0, ROWS):
        row = tl.program_id(0) * ROWS + i
        x = tl.load(inp + row * stride + cols, mask=mask, other=0.0)
        g = tl.load(dy + row * stride + cols, mask=mask, other=0.0)
        xhat = tl.where(mask, (x - tl.load(mean + row)) * tl.load(rstd + row), 0.0)
        wg = wt * g
        c1 = tl.sum(xhat * wg, axis=0) / n
        c2 = tl.sum(wg, axis=0) / n
        tl.store(dx + row * stride + cols, (wg - (xhat * c1 + c2)) * tl.load(rstd + row),
                 mask=mask)
        dw += g * xhat
        db += g
    tl.store(dw_part + tl.program_id(0) * BLOCK + cols, dw, mask=mask)
    tl.store(db_part + tl.program_id(0) * BLOCK + cols, db, mask=mask)


@triton.jit
def cumsum(out, inp, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.cumsum(tl.load(inp + offs), axis=0))


@triton.jit
def transpose(out, inp, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    x = tl.load(inp + rm[:, None] * N + rn[None, :])
    tl.store(out + rn[:, None] * M + rm[None, :], tl.trans(x))


@triton.jit
def reduce_rows(out, inp, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    x = tl.load(inp + rm[:, None] * N + tl.arange(0, BN)[None, :])
    tl.store(out + rm, tl.sum(x, axis=1))


@triton.jit
def reduce_cols(out, inp, N, BM: tl.constexpr, BN: tl.constexpr):
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    x = tl.load(inp + tl.arange(0, BM)[:, None] * N + rn[None, :])
    tl.store(out + rn, tl.sum(x, axis=0))


@triton.jit
def attention_fwd_ws(q, k, v, o, n_ctx, scale, HD: tl.constexpr, BM: tl.constexpr,
                     BN: tl.constexpr, WS: tl.constexpr):
    # Flash-attention forward through tensor descriptors (TMA), its KV loop warp-specialized
    # when WS: a load partition feeding the two wgmma chains through mbarriers.
    dq = tl.make_tensor_descriptor(q, [n_ctx, HD], [HD, 1], [BM, HD])
    dk = tl.make_tensor_descriptor(k, [n_ctx, HD], [HD, 1], [BN, HD])
    dv = tl.make_tensor_descriptor(v, [n_ctx, HD], [HD, 1], [BN, HD])
    do = tl.make_tensor_descriptor(o, [n_ctx, HD], [HD, 1], [BM, HD])
    om = tl.program_id(0) * BM
    qt = dq.load([om, 0])
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, HD), tl.float32)
    for start in tl.range(0, n_ctx, BN, warp_specialize=WS):
        kt = dk.load([start, 0])
        s = tl.dot(qt, kt.T) * scale
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        vt = dv.load([start, 0])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), vt)
        m_i = m_new
    do.store([om, 0], (acc / l_i[:, None]).to(tl.float16))

PTX_SYNCS = {
    "bar.sync": r"\b(?:bar|barrier)\.sync\b",
    "bar.arrive": r"\b(?:bar|barrier)\.arrive\b",
    "cp.async.commit_group": r"cp\.async\.commit_group",
    "cp.async.wait_group": r"cp\.async\.wait_group",
    "cp.async.bulk.wait_group": r"cp\.async\.bulk\.wait_group",
    "mbarrier.try_wait": r"mbarrier\.try_wait",
    "mbarrier.arrive": r"mbarrier\.arrive",
    "fence.proxy.async": r"fence\.proxy\.async",
    "wgmma.wait_group": r"wgmma\.wait_group",
}
TTGIR_OPS = ["ttg.local_alloc", "ttg.local_load", "ttg.local_store", "ttg.async_copy_global_to_local",
             "ttg.async_commit_group", "ttg.async_wait", "ttng.warp_group_dot",
             "ttng.warp_group_dot_wait", "ttng.fence_async_shared", "ttng.wait_barrier",
             "ttng.async_tma_copy_global_to_local", "ttg.warp_specialize", "gpu.barrier",
             "ttg.convert_layout", "tt.reduce", "tt.scan", "scf.for"]


def counts(text, table):
    return {k: len(re.findall(v, text)) for k, v in table.items()}


def save(outdir, name, compiled, record):
    asm = compiled.asm
    for key in ("ttgir", "ptx"):
        if key in asm:
            with open(os.path.join(outdir, f"{name}.{key}"), "w") as f:
                f.write(asm[key])
    record["ptx_syncs"] = counts(asm.get("ptx", ""), PTX_SYNCS)
    ttgir = asm.get("ttgir", "")
    record["ttgir_ops"] = {op: ttgir.count(op + " ") + ttgir.count(op + "(") for op in TTGIR_OPS}
    meta = compiled.metadata
    record["shared_bytes"] = getattr(meta, "shared", None)
    record["num_warps"] = getattr(meta, "num_warps", None)
    record["num_stages"] = getattr(meta, "num_stages", None)


LAST_LAUNCH = {}


def launch(fn, grid, *args, **kw):
    """Launches `fn` and remembers its arguments, so that its AMD TTGIR can be compiled from
    the same signature and constants."""
    consts = {k: v for k, v in kw.items() if k in fn.arg_names}
    opts = {k: v for k, v in kw.items() if k not in fn.arg_names}
    LAST_LAUNCH.update(fn=fn, args=args, consts=consts, opts=opts)
    return fn[grid](*args, **kw)


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def cases():
    dev = "cuda"
    torch.manual_seed(0)
    for dtype, (bm, bn, bk, warps) in ((torch.float16, (128, 128, 64, 8)),
                                       (torch.float32, (64, 64, 32, 4))):
        tag = "fp16" if dtype == torch.float16 else "fp32"
        for stages in (2, 3, 4):
            def run(stages=stages, dtype=dtype, bm=bm, bn=bn, bk=bk, warps=warps):
                M = N = 512
                K = 1024
                a = torch.randn(M, K, device=dev, dtype=dtype)
                b = torch.randn(K, N, device=dev, dtype=dtype)
                c = torch.empty(M, N, device=dev, dtype=dtype)
                h = launch(matmul, (M // bm, N // bn), a, b, c, M, N, K, *a.stride(), *b.stride(),
                                               *c.stride(), BM=bm, BN=bn, BK=bk,
                                               num_warps=warps, num_stages=stages)
                return h, rel_err(c, a.float() @ b.float())
            yield f"matmul_{tag}_s{stages}", run

    def persistent():
        M = N = K = 1024
        a = torch.randn(M, K, device=dev, dtype=torch.float16)
        b = torch.randn(K, N, device=dev, dtype=torch.float16)
        c = torch.empty(M, N, device=dev, dtype=torch.float16)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        h = launch(matmul_persistent, (sms,), a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                      NUM_SMS=sms, BM=128, BN=128, BK=64, num_warps=8,
                                      num_stages=3)
        return h, rel_err(c, a.float() @ b.float())
    yield "matmul_persistent_fp16", persistent

    def tma():
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                      device=dev))
        M = N = K = 1024
        a = torch.randn(M, K, device=dev, dtype=torch.float16)
        b = torch.randn(K, N, device=dev, dtype=torch.float16)
        c = torch.empty(M, N, device=dev, dtype=torch.float16)
        h = launch(matmul_tma, (M // 128, N // 128), a, b, c, M, N, K, BM=128, BN=128, BK=64,
                                             num_warps=8, num_stages=3)
        return h, rel_err(c, a.float() @ b.float())
    yield "matmul_tma_fp16", tma

    def ws():
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                      device=dev))
        M = N = K = 1024
        a = torch.randn(M, K, device=dev, dtype=torch.float16)
        b = torch.randn(K, N, device=dev, dtype=torch.float16)
        c = torch.empty(M, N, device=dev, dtype=torch.float16)
        h = launch(matmul_ws, (M // 128, N // 128), a, b, c, M, N, K, BM=128, BN=128, BK=64,
                   num_warps=4, num_stages=3)
        return h, rel_err(c, a.float() @ b.float())
    yield "matmul_warp_specialized_fp16", ws

    def pws():
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                      device=dev))
        M = N = K = 1024
        a = torch.randn(M, K, device=dev, dtype=torch.float16)
        b = torch.randn(K, N, device=dev, dtype=torch.float16)
        c = torch.empty(M, N, device=dev, dtype=torch.float16)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        h = launch(matmul_persistent_ws, (sms,), a, b, c, M, N, K, NUM_SMS=sms, BM=128, BN=128,
                   BK=64, num_warps=4, num_stages=3)
        return h, rel_err(c, a.float() @ b.float())
    yield "matmul_persistent_ws_fp16", pws

    def attn():
        n_ctx, hd = 1024, 64
        q, k, v = (torch.randn(n_ctx, hd, device=dev, dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        scale = hd ** -0.5
        h = launch(attention_fwd, (n_ctx // 128,), q, k, v, o, n_ctx, scale, HD=hd, BM=128, BN=64,
                                           num_warps=8, num_stages=2)
        ref = torch.softmax((q.float() @ k.float().T) * scale, dim=1) @ v.float()
        return h, rel_err(o, ref)
    yield "attention_fwd_fp16", attn

    def attn_tma(ws, warps, stages):
        def run():
            triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                          device=dev))
            n_ctx, hd = 1024, 64
            q, k, v = (torch.randn(n_ctx, hd, device=dev, dtype=torch.float16) for _ in range(3))
            o = torch.empty_like(q)
            scale = hd ** -0.5
            h = launch(attention_fwd_ws, (n_ctx // 128,), q, k, v, o, n_ctx, scale, HD=hd,
                       BM=128, BN=64, WS=ws, num_warps=warps, num_stages=stages)
            ref = torch.softmax((q.float() @ k.float().T) * scale, dim=1) @ v.float()
            return h, rel_err(o, ref)
        return run
    yield "attention_fwd_tma_fp16", attn_tma(False, 8, 2)
    yield "attention_fwd_ws_fp16", attn_tma(True, 4, 2)
    yield "attention_fwd_ws_fp16_s3", attn_tma(True, 4, 3)

    def attn_bwd():
        n_ctx, hd = 1024, 64
        q, k, v, do = (torch.randn(n_ctx, hd, device=dev, dtype=torch.float16) for _ in range(4))
        scale = hd ** -0.5
        s = (q.float() @ k.float().T) * scale
        lse = torch.logsumexp(s, dim=1)
        p = torch.softmax(s, dim=1)
        delta = ((p @ v.float()) * do.float()).sum(1)
        dp = do.float() @ v.float().T
        ds = p * (dp - delta[:, None])
        return q, k, v, do, lse, delta, scale, p, ds
    def dkdv():
        q, k, v, do, lse, delta, scale, p, ds = attn_bwd()
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        h = launch(attention_bwd_dkdv, (1024 // 64,), q, k, v, do, lse, delta, dk, dv, 1024,
                   scale, HD=64, BM=64, BN=64, num_warps=4, num_stages=2)
        ref = torch.cat([ds.T @ q.float() * scale, p.T @ do.float()])
        return h, rel_err(torch.cat([dk, dv]), ref)
    yield "attention_bwd_dkdv_fp16", dkdv

    def dq():
        q, k, v, do, lse, delta, scale, p, ds = attn_bwd()
        dq = torch.empty_like(q)
        h = launch(attention_bwd_dq, (1024 // 128,), q, k, v, do, lse, delta, dq, 1024, scale,
                   HD=64, BM=128, BN=64, num_warps=8, num_stages=2)
        return h, rel_err(dq, ds @ k.float() * scale)
    yield "attention_bwd_dq_fp16", dq

    def sm():
        x = torch.randn(256, 1000, device=dev)
        y = torch.empty_like(x)
        h = launch(softmax, (256,), y, x, x.stride(0), 1000, BLOCK=1024, num_warps=4)
        return h, rel_err(y, torch.softmax(x, dim=1))
    yield "softmax", sm

    def ln():
        x = torch.randn(256, 1000, device=dev)
        w = torch.randn(1000, device=dev)
        bias = torch.randn(1000, device=dev)
        y = torch.empty_like(x)
        h = launch(layernorm_fwd, (256,), y, x, w, bias, x.stride(0), 1000, 1e-5, BLOCK=1024,
                                  num_warps=8)
        ref = torch.nn.functional.layer_norm(x, (1000,), w, bias, 1e-5)
        return h, rel_err(y, ref)
    yield "layernorm_fwd", ln

    def ln_bwd():
        rows, n, per = 256, 1000, 8
        x = torch.randn(rows, n, device=dev, requires_grad=True)
        w = torch.randn(n, device=dev, requires_grad=True)
        bias = torch.randn(n, device=dev, requires_grad=True)
        dy = torch.randn(rows, n, device=dev)
        torch.nn.functional.layer_norm(x, (n,), w, bias, 1e-5).backward(dy)
        mean = x.detach().mean(1)
        rstd = (x.detach().var(1, unbiased=False) + 1e-5).rsqrt()
        dx = torch.empty(rows, n, device=dev)
        dw = torch.empty(rows // per, 1024, device=dev)
        db = torch.empty(rows // per, 1024, device=dev)
        h = launch(layernorm_bwd, (rows // per,), dx, dw, db, dy, x.detach(), w.detach(), mean,
                   rstd, n, n, ROWS=per, BLOCK=1024, num_warps=8)
        out = torch.cat([dx.flatten(), dw.sum(0)[:n], db.sum(0)[:n]])
        return h, rel_err(out, torch.cat([x.grad.flatten(), w.grad, bias.grad]))
    yield "layernorm_bwd", ln_bwd

    def cs():
        x = torch.randn(4096, device=dev)
        y = torch.empty_like(x)
        h = launch(cumsum, (4,), y, x, BLOCK=1024, num_warps=4)
        return h, rel_err(y, torch.cat([t.cumsum(0) for t in x.split(1024)]))
    yield "cumsum", cs

    def tr():
        x = torch.randn(512, 256, device=dev)
        y = torch.empty(256, 512, device=dev)
        h = launch(transpose, (512 // 64, 256 // 64), y, x, 512, 256, BM=64, BN=64, num_warps=4)
        return h, rel_err(y, x.T)
    yield "transpose", tr

    def rr():
        x = torch.randn(512, 128, device=dev)
        y = torch.empty(512, device=dev)
        h = launch(reduce_rows, (512 // 32,), y, x, 128, BM=32, BN=128, num_warps=4)
        return h, rel_err(y, x.sum(1))
    yield "reduce_rows", rr

    def rc():
        x = torch.randn(64, 512, device=dev)
        y = torch.empty(512, device=dev)
        h = launch(reduce_cols, (512 // 128,), y, x, 512, BM=64, BN=128, num_warps=4)
        return h, rel_err(y, x.sum(0))
    yield "reduce_cols", rc


def amd_signature(fn, args, consts):
    """Triton's signature of a launch, read off its arguments (tensors become typed pointers,
    Python ints i32, floats fp32)."""
    types = {torch.float16: "*fp16", torch.float32: "*fp32"}
    sig, it = {}, iter(args)
    for name in fn.arg_names:
        if name in consts:
            sig[name] = "constexpr"
            continue
        v = next(it)
        if isinstance(v, torch.Tensor):
            sig[name] = types[v.dtype]
        else:
            sig[name] = "fp32" if isinstance(v, float) else "i32"
    return sig


def amd_ttgir(outdir, name, summary):
    """The AMD TTGIR (gfx942, gfx950) of the last launch, through the HIP backend."""
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except Exception as e:  # noqa: BLE001
        summary.append({"name": f"{name}_amd", "error": repr(e)})
        return
    fn, args, consts, opts = (LAST_LAUNCH[k] for k in ("fn", "args", "consts", "opts"))
    for arch in ("gfx942", "gfx950"):
        rec = {"name": f"{name}_{arch}", "target": arch}
        try:
            src = ASTSource(fn=fn, signature=amd_signature(fn, args, consts),
                            constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()})
            compiled = triton.compile(src, target=GPUTarget("hip", arch, 64), options=opts)
            ttgir = compiled.asm["ttgir"]
            with open(os.path.join(outdir, f"{name}_{arch}.ttgir"), "w") as f:
                f.write(ttgir)
            rec["ttgir_ops"] = {op: ttgir.count(op + " ") + ttgir.count(op + "(")
                                for op in TTGIR_OPS}
            rec["shared_bytes"] = getattr(compiled.metadata, "shared", None)
            rec["ok"] = True
        except Exception as e:  # noqa: BLE001
            rec["ok"] = False
            rec["error"] = "".join(traceback.format_exception_only(type(e), e))[-2000:]
        summary.append(rec)
        print(rec["name"], "ok" if rec["ok"] else "FAILED", rec.get("error", "")[-300:],
              flush=True)


def main():
    outdir = sys.argv[1]
    only = set(sys.argv[2:])
    os.makedirs(outdir, exist_ok=True)
    summary = []
    for name, run in cases():
        if only and name not in only:
            continue
        rec = {"name": name}
        LAST_LAUNCH.clear()
        try:
            handle, err = run()
            torch.cuda.synchronize()
            rec["rel_err"] = err if err == err else None
            rec["ok"] = err < 2e-2
            if err != err:
                rec["error"] = "the output holds non-finite values"
            save(outdir, name, handle, rec)
        except Exception as e:  # noqa: BLE001
            rec["ok"] = False
            rec["error"] = "".join(traceback.format_exception_only(type(e), e))[-2000:]
        summary.append(rec)
        print(name, "ok" if rec.get("ok") else "FAILED", rec.get("rel_err", rec.get("error")),
              rec.get("ptx_syncs", ""), flush=True)
        if LAST_LAUNCH:
            amd_ttgir(outdir, name, summary)
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump({"triton": triton.__version__, "torch": torch.__version__,
                   "device": torch.cuda.get_device_name(0), "kernels": summary}, f, indent=1)


if __name__ == "__main__":
    main()
