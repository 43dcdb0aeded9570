#!/usr/bin/env python3
"""Producer orderings of examples/tma-warp-specialized.kir against the interpreter.

Session 37's M3 sweep: the producer's per-iteration ops {wait empty, arrive tx, load} and
{wait empty, expect_tx, arrive, load} in every order (30 orders), each with the empty wait's
parity flipped (`xor %par, 1`, the example's) or not (`add %par, 0`): 60 kernels. For each,
`smemsync sync --target sm_90` runs; where it accepts (exit 0), its output must be race- and
deadlock-free under `check --no-proof` (the interpreter, the oracle). Prints one line per
kernel and exits 1 if sync accepted a kernel the interpreter rejects.

Usage: scripts/producer-orders.py [path/to/smemsync]   (default target/release/smemsync)
"""
import itertools
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/smemsync")
BASE = open(os.path.join(ROOT, "examples/tma-warp-specialized.kir")).read()
BODY = """        mbar_wait @empty[%s], %free
        %v = view @buf[%s]
        mbar_arrive @full[%s] tx 1024
        tma_load %v <- %X[%i, 0], @full[%s]
"""
OPS = {
    "W": "        mbar_wait @empty[%s], %free\n",
    "A": "        mbar_arrive @full[%s] tx 1024\n",
    "L": "        tma_load %v <- %X[%i, 0], @full[%s]\n",
    "E": "        mbar_expect_tx @full[%s], 1024\n",
    "a": "        mbar_arrive @full[%s]\n",
}


def verdict(path):
    r = subprocess.run([BIN, "check", "--target", "sm_90", "--no-proof", path], capture_output=True, text=True)
    lines = re.findall(r"^@\w+: (.*)$", r.stdout + r.stderr, re.M) or ["?"]
    return r.returncode, lines[-1][:70]


def main():
    assert BODY in BASE, "examples/tma-warp-specialized.kir changed: update BODY"
    orders = sorted({"".join(p) for p in itertools.permutations("WAL")} | {"".join(p) for p in itertools.permutations("WEaL")})
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.kir"), os.path.join(d, "k.s.kir")
        for order in orders:
            for par in ("xor", "same"):
                text = BASE.replace(BODY, "        %v = view @buf[%s]\n" + "".join(OPS[c] for c in order))
                if par == "same":
                    text = text.replace("%free = xor %par, 1", "%free = add %par, 0")
                open(src, "w").write(text)
                s = subprocess.run([BIN, "sync", "--target", "sm_90", src], capture_output=True, text=True)
                codes = sorted(set(re.findall(r"(?:error|warning)\[([A-Z]\d+)\]", s.stderr)))
                line = f"{order:5} {par:4} sync={s.returncode} {codes}"
                if s.returncode == 0:
                    open(out, "w").write(s.stdout)
                    rc, v = verdict(out)
                    line += f" | output: {v}"
                    if rc != 0 or not v.startswith("race-free"):
                        bad += 1
                        line += "   <<< accepted, but the interpreter rejects it"
                print(line, flush=True)
    print(f"{len(orders) * 2} kernels, {bad} accepted wrongly")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
