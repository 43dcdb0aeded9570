#!/usr/bin/env python3
"""Compares two output directories of smemsync kernel runs (one `<buffer>.txt` per global
buffer, one element per line): the GPU harness's and the interpreter's (or a reference run).

Integer buffers must match exactly; float buffers, read as the f32 values they denote, within
|a - b| <= atol + rtol * |b| (NaN equals NaN, infinities must agree); "bit-exact" when every
f32 is equal. Every file of the reference directory must exist in the
other. Prints one summary line; exit status 0 on a match, 1 on a mismatch, 2 on bad input.
"""
import math
import os
import struct
import sys


def f32(x):
    """The f32 a printed value denotes: the harness prints 10 significant digits, the
    interpreter Rust's shortest round-trip form, so compare the f32 values, not the text."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def parse(path):
    vals, is_int = [], True
    with open(path) as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            try:
                vals.append(int(s))
            except ValueError:
                is_int = False
                vals.append(float(s))
    return vals, is_int


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    rtol, atol = float(opts.get("rtol", "1e-5")), float(opts.get("atol", "1e-6"))
    if len(args) != 2:
        print("usage: compare-outputs.py GOT_DIR REF_DIR [--rtol=R] [--atol=A]")
        return 2
    got_dir, ref_dir = args
    files = sorted(f for f in os.listdir(ref_dir) if f.endswith(".txt"))
    if not files:
        print(f"no reference outputs in {ref_dir}")
        return 2
    bad, worst, exact = [], 0.0, True
    for name in files:
        gp = os.path.join(got_dir, name)
        if not os.path.exists(gp):
            bad.append(f"{name}: missing")
            continue
        ref, ref_int = parse(os.path.join(ref_dir, name))
        got, got_int = parse(gp)
        if len(ref) != len(got):
            bad.append(f"{name}: {len(got)} elements, reference has {len(ref)}")
            continue
        if ref_int and got_int:
            diffs = [i for i, (a, b) in enumerate(zip(got, ref)) if a != b]
            if diffs:
                i = diffs[0]
                bad.append(f"{name}: {len(diffs)} of {len(ref)} differ (first [{i}]: {got[i]} vs {ref[i]})")
            continue
        nmis, first = 0, None
        for i, (a, b) in enumerate(zip(got, ref)):
            a, b = f32(float(a)), f32(float(b))
            if math.isnan(a) and math.isnan(b):
                continue
            if a != b:
                exact = False
            if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
                ok = a == b
            else:
                err = abs(a - b)
                ok = err <= atol + rtol * abs(b)
                if abs(b) > 0:
                    worst = max(worst, err / abs(b))
            if not ok:
                nmis += 1
                first = first if first is not None else i
        if nmis:
            bad.append(f"{name}: {nmis} of {len(ref)} beyond tolerance (first [{first}]: {got[first]} vs {ref[first]})")
    if bad:
        print("MISMATCH " + "; ".join(bad))
        return 1
    kind = "bit-exact" if exact else f"max rel err {worst:.2e}"
    print(f"match ({len(files)} buffers, {kind})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
