#!/usr/bin/env python3
"""Sweep of async copies issued in loops with their completing wait under a region
(docs/async.md, "A completion on every path", loops). Each kernel is synchronized by the
given binary and its output run by the interpreter at n = 0..4; races are printed and the
kernel written to OUTDIR/bad-N.kir.

usage: sweep_async_loops.py BINARY OUTDIR [FAMILY] [--sample K]
"""
import itertools, os, random, subprocess, sys

FAM = {
    'cp': dict(target='sm_80', copy='cp_async {dst}[%t] <- %X[%i, %t]', commit='cp_async_commit',
               wait='cp_async_wait {c}'),
    'tma': dict(target='sm_90'),
    'g2l': dict(target='gfx942', copy='%tok = gather_to_lds {dst}[%t] <- %X[%i, %t]', commit='',
                wait='waitcnt vmcnt({c})'),
}

REGIONS = {
    'plain': ('', ''),
    'ifpos': ('%c = cmp gt %i, 0\n    if %c {', '}'),
    'ifge2': ('%c = cmp gt %i, 1\n    if %c {', '}'),
    'ifn': ('%c = cmp gt %n, 1\n    if %c {', '}'),
    'ifel': ('%c = cmp eq %t, 0\n    if %c {', '}'),
    'ifodd': ('%o = rem %i, 2\n    %c = cmp eq %o, 0\n    if %c {', '}'),
    'ifelse': ('%c = cmp gt %i, 0\n    if %c {', '} else {\n      %q = const 0 : i32\n    }'),
    'nest': ('for %j = 0 to %n step 1 {', '}'),
    'nest1': ('for %j = 1 to %n step 1 {', '}'),
    'nestc': ('for %j = 0 to 2 step 1 {', '}'),
}
TRIPS = {'n': ('0', '%n'), '3': ('0', '3'), '1': ('0', '1'), '1n': ('1', '%n')}
DESTS = ['d0', 'd1', 'd2', 'arm', 'top', 'after']


def slot(d, S, var):
    return f'%{var}'


def kernel(fam, rn, wb, dest, S, cnt, trip, after_wait):
    f = FAM[fam]
    lo, hi = TRIPS[trip]
    o, c = REGIONS[rn]
    w = f['wait'].format(c=cnt)
    read = lambda d, ind: (f"{ind}%sd{d} = add %i, {S - d % S if d else 0}\n{ind}%pd{d} = rem %sd{d}, {S}\n"
                           f"{ind}%ud{d} = view @a[%pd{d}]\n{ind}%yd{d} = load %ud{d}[%r]\n{ind}gstore %out[%t], %yd{d}")
    inner = f'      {w}' if o else f'    {w}'
    if wb:
        inner += '\n      barrier' if o else '\n    barrier'
    if dest == 'arm' and o:
        inner += '\n' + read(1 if S > 1 else 0, '      ')
    body = ''
    if dest == 'top':
        body += read(1 if S > 1 else 0, '    ') + '\n'
    body += f"    %s = rem %i, {S}\n    %v = view @a[%s]\n    {f['copy'].format(dst='%v')}\n    {f['commit']}\n"
    body += (f"    {o}\n{inner}\n    {c}\n" if o else inner + '\n')
    if dest in ('d0', 'd1', 'd2'):
        d = int(dest[1])
        if d >= S and d > 0:
            return None
        body += read(d, '    ') + '\n'
    if dest == 'arm' and not o:
        return None
    init = ''.join(f"  %z{s} = view @a[{s}]\n  store %z{s}[%t], 0.0\n" for s in range(S)) + '  barrier\n'
    tail = ''
    if after_wait:
        tail += f"  {f['wait'].format(c=0)}\n"
    if dest == 'after':
        tail += "  %ua = view @a[0]\n  %ya = load %ua[%r]\n  gstore %out[%t], %ya\n"
    return (f"kernel @k(%n: i32 in [0, 4] = 2, %X: global f32[8, 64], %out: global f32[64]) block(64) {{\n"
            f"  shared @a : f32[{S}, 64]\n  %t = tid.x\n  %r = sub 63, %t\n{init}"
            f"  for %i = {lo} to {hi} step 1 {{\n{body}  }}\n{tail}}}\n")


def tma_kernel(rn, wb, dest, S, cnt, trip, after_wait):
    """The TMA-store form (sm_90): each iteration writes slot i mod S, thread 0 stores it to
    global memory; the region holds thread 0's `bulk_wait` (and a barrier); a later write
    into the slot (the next iterations' writes, one in the wait's arm, one after the loop)
    must follow the store's completion."""
    lo, hi = TRIPS[trip]
    o, c = REGIONS[rn]
    if rn == 'ifel':
        return None
    ind = '      ' if o else '    '
    inner = f'{ind}if %el {{\n{ind}  bulk_wait {cnt}\n{ind}}}'
    if wb:
        inner += f'\n{ind}barrier'
    if dest == 'arm':
        if not o:
            return None
        inner += f'\n{ind}%sa = add %i, 1\n{ind}%pa = rem %sa, {S}\n{ind}%va = view @o[%pa]\n{ind}store %va[%r], %f'
    elif dest not in ('top', 'after'):
        return None
    body = (f"    %s = rem %i, {S}\n    %v = view @o[%s]\n    store %v[%t], %f\n    fence_proxy_async\n    barrier\n"
            f"    if %el {{\n      tma_store %Y[%i, 0] <- %v\n      bulk_commit\n    }}\n")
    body += (f"    {o}\n{inner}\n    {c}\n" if o else inner + '\n')
    tail = '  if %el {\n    bulk_wait 0\n  }\n' if after_wait else ''
    if dest == 'after':
        tail += '  %vz = view @o[0]\n  store %vz[%r], %f\n'
    return (f"kernel @k(%n: i32 in [0, 4] = 2, %Y: global f32[8, 64]) block(64) {{\n"
            f"  shared @o : f32[{S}, 64]\n  %t = tid.x\n  %r = sub 63, %t\n  %f = itof %t\n  %el = cmp eq %t, 0\n"
            f"  for %i = {lo} to {hi} step 1 {{\n{body}  }}\n{tail}}}\n")


def shapes(fam):
    if fam == 'tma':
        for rn, wb, dest, S, trip, aw in itertools.product(REGIONS, [False, True], ['top', 'arm', 'after'], [1, 2, 3], TRIPS, [False, True]):
            if aw and dest != 'after':
                continue
            for cnt in sorted({0, S - 1}):
                t = tma_kernel(rn, wb, dest, S, cnt, trip, aw)
                if t:
                    yield f'tma/{rn}/wb={wb}/{dest}/S={S}/wait={cnt}/trip={trip}/afterwait={aw}', t
        return
    for rn, wb, dest, S, trip, aw in itertools.product(REGIONS, [False, True], DESTS, [1, 2, 3], TRIPS, [False, True]):
        if (aw and dest != 'after') or (wb and rn == 'ifel'):
            continue
        for cnt in sorted({0, S - 1}):
            t = kernel(fam, rn, wb, dest, S, cnt, trip, aw)
            if t:
                yield f'{fam}/{rn}/wb={wb}/{dest}/S={S}/wait={cnt}/trip={trip}/afterwait={aw}', t


def run(a):
    p = subprocess.run(a, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def main():
    binary, outdir = sys.argv[1], sys.argv[2]
    fams = [a for a in sys.argv[3:] if a in FAM] or ['cp']
    sample = int(sys.argv[sys.argv.index('--sample') + 1]) if '--sample' in sys.argv else 0
    os.makedirs(outdir, exist_ok=True)
    tried = synced = bad = 0
    for fam in fams:
        all_ = list(shapes(fam))
        if sample:
            random.Random(12).shuffle(all_)
            all_ = all_[:sample]
        for name, text in all_:
            tried += 1
            src = os.path.join(outdir, 'k.kir')
            open(src, 'w').write(text)
            rc, out = run([binary, 'sync', '--target', FAM[fam]['target'], src])
            if rc != 0:
                continue
            synced += 1
            dst = os.path.join(outdir, 'ks.kir')
            open(dst, 'w').write(out)
            for n in range(0, 5):
                rc2, o2 = run([binary, 'check', '--no-proof', '--bounds', f'n={n}', dst])
                if 'race-free' not in o2:
                    bad += 1
                    print(f'BAD {name} n={n}: {o2.strip().splitlines()[0]}', flush=True)
                    open(os.path.join(outdir, f'bad-{bad}.kir'), 'w').write(f'// {name} n={n}\n' + text)
                    break
    print(f'tried {tried} synced {synced} bad {bad}')


main()
