#!/usr/bin/env python3
"""Checks the GPU run of tests/gpu/semantics.kir against docs/ir.md without the interpreter:
the harness's seeded inputs (splitmix64, section 3), floor div/rem, shifts, wrapping mul,
ftoi, and f16/bf16/i8 storage. Usage: check-semantics.py OUTDIR SEED. Exit 0 when all hold.
"""
import math
import struct
import sys

import numpy as np

M64 = (1 << 64) - 1


def splitmix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def gen_int(seed, p, i):
    x = splitmix64(seed ^ (p << 48) ^ i)
    return ((x >> 33) % 17) - 8


def gen_float(seed, p, i):
    x = splitmix64(seed ^ (p << 48) ^ i)
    u = np.float32(x >> 40) / np.float32(16777216.0)
    return np.float32(u * np.float32(2.0) - np.float32(1.0))


def wrap32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def wrap8(v):
    v &= 0xFF
    return v - 256 if v >= 128 else v


def bf16(f):
    b = struct.unpack("<I", struct.pack("<f", float(f)))[0]
    if math.isnan(f):
        return float(f)
    r = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", r))[0]


def ftoi(f):
    if math.isnan(f):
        return 0
    return max(-(1 << 31), min((1 << 31) - 1, int(f)))


def number(s):
    try:
        return int(s)
    except ValueError:
        return float(s)  # also reads Rust's `NaN`, `inf` and `{:e}` forms


def read(outdir, name):
    with open(f"{outdir}/{name}.txt") as fh:
        return [number(s) for s in (line.strip() for line in fh) if s]


def same(a, b):
    """Equal as f32 values: the harness prints 10 significant digits, enough to round-trip."""
    if isinstance(b, float) and math.isnan(b):
        return math.isnan(a)
    return np.float32(a) == np.float32(b)


def main():
    outdir, seed = sys.argv[1], int(sys.argv[2], 0)
    n = 256
    xi = [gen_int(seed, 0, i) for i in range(n)]
    xf = [gen_float(seed, 1, i) for i in range(n)]
    g = [np.float32(f * np.float32(3.3)) for f in xf]
    exp = {
        "xi": xi,
        "xf": [float(f) for f in xf],
        "oi": [x // 3 for x in xi] + [x % 3 for x in xi] + [x // -3 for x in xi] + [x % -3 for x in xi]
        + [x >> 1 for x in xi] + [wrap32(x << 1) for x in xi] + [wrap32(x * 1000000000) for x in xi]
        + [ftoi(float(np.float32(f * np.float32(1000.5)))) for f in xf],
        "oh": [float(np.float16(v)) for v in g],
        "ob": [bf16(v) for v in g],
        "o8": [wrap8(x * 37) for x in xi],
        "of": [float(np.float16(g[t ^ 1])) for t in range(n)] + [bf16(g[t ^ 1]) for t in range(n)]
        + [float(wrap8(xi[t ^ 1] * 37)) for t in range(n)]
        + [float(np.sqrt(v)) if v >= 0 else float("nan") for v in g],
    }
    failures = []
    for name, want in exp.items():
        got = read(outdir, name)
        if len(got) != len(want):
            failures.append(f"{name}: {len(got)} elements, expected {len(want)}")
            continue
        bad = [i for i, (a, b) in enumerate(zip(got, want)) if not same(a, b)]
        if bad:
            i = bad[0]
            failures.append(f"{name}: {len(bad)} differ (first [{i}]: {got[i]} vs {want[i]})")
    if failures:
        print("SEMANTICS MISMATCH " + "; ".join(failures))
        return 1
    print(f"semantics match ({len(exp)} buffers bit-exact: seeded inputs, floor div/rem, shifts, wrap, ftoi, f16/bf16/i8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
