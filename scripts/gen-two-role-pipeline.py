"""A generated two-role TMA pipeline for measuring `check`'s static proof
(docs/performance.md, "leftovers"): B slot buffers, each with its own `full` and `empty`
mbarrier arrays of two slots, one elected producer thread loading every buffer each
iteration, 256 consumer threads reading each buffer R times and releasing every `empty`
slot by one elected arrival after their named barrier.
Usage: python3 scripts/gen-two-role-pipeline.py B R > kernel.kir"""
import sys
B=int(sys.argv[1]); R=int(sys.argv[2]); T=8
o=[]
o.append(f"kernel @big(%X: global f32[{T}, 256], %Y: global f32[{T}, 256]) block(288) {{")
o.append("  group @producer : threads [0, 32)")
o.append("  group @consumers : threads [32, 288)")
for b in range(B):
    o.append(f"  shared @buf{b} : f32[2, 256]")
    o.append(f"  shared @full{b} : mbarrier[2]")
    o.append(f"  shared @empty{b} : mbarrier[2]")
o.append("  %t = tid.x")
o.append("  %lead = cmp eq %t, 0")
o.append("  if %lead {")
for b in range(B):
    for s in range(2):
        o.append(f"    mbar_init @full{b}[{s}], 1")
        o.append(f"    mbar_init @empty{b}[{s}], 1")
o.append("  }")
o.append("  barrier")
o.append("  %isp = in_group @producer")
o.append("  if %isp {")
o.append("    %elect = cmp eq %t, 0")
o.append("    if %elect {")
o.append(f"      for %i = 0 to {T} step 1 {{")
o.append("        %q = div %i, 2\n        %par = rem %q, 2\n        %free = xor %par, 1\n        %s = rem %i, 2")
for b in range(B):
    o.append(f"        mbar_wait @empty{b}[%s], %free")
    o.append(f"        %v{b} = view @buf{b}[%s]")
    o.append(f"        mbar_arrive @full{b}[%s] tx 1024")
    o.append(f"        tma_load %v{b} <- %X[%i, 0], @full{b}[%s]")
o.append("      }\n    }")
o.append("  } else {")
o.append("    %c = sub %t, 32")
o.append(f"    for %i = 0 to {T} step 1 {{")
o.append("      %q = div %i, 2\n      %par = rem %q, 2\n      %s = rem %i, 2")
for b in range(B):
    o.append(f"      %v{b} = view @buf{b}[%s]")
    o.append(f"      mbar_wait @full{b}[%s], %par")
    for r in range(R):
        o.append(f"      %x{b}_{r} = load %v{b}[%c]")
o.append("      named_sync 1, 256")
o.append("      %e = cmp eq %t, 32")
o.append("      if %e {")
for b in range(B):
    o.append(f"        mbar_arrive @empty{b}[%s]")
o.append("      }")
o.append(f"      gstore %Y[%i, %c], %x0_0")
o.append("    }\n  }\n}")
print("\n".join(o))
