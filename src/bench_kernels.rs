//! Real-size kernels as compilers shape them, for benchmarks and scaling tests: a tiled GEMM
//! with a multi-stage `cp.async` pipeline over a symbolic K (copies rolled in an inner loop
//! or unrolled), and a flash-attention-like loop (two GEMMs, row max and sum through shared
//! memory; [`flash()`]). They are written without any sync: `sync` must place every wait and
//! barrier.
//!
//! Invariants: every generated kernel parses and verifies; shapes must divide evenly (the
//! tile by the threads' copy work and the thread grid), else `None`.
//! Complexity: text of O(tile elements / threads) lines per copy stage when unrolled.

use std::fmt::Write as _;

pub mod flash;
pub use flash::{FlashShape, flash};

/// The names of the real-size kernels [`named`] generates (`smemsync bench --print NAME`).
pub const NAMED: &[&str] = &[
    "gemm",
    "gemm-unrolled",
    "flash",
    "flash-unrolled",
    "flash-k-first",
];

/// A real-size kernel by name: the 128×128×64 GEMM and the flash-attention loop, copies
/// rolled or unrolled, and the flash loop with its K loads first ([`FlashShape::k_first`]).
pub fn named(name: &str) -> Option<String> {
    match name {
        "gemm" => gemm(&GemmShape::realistic(false)),
        "gemm-unrolled" => gemm(&GemmShape::realistic(true)),
        "flash" => flash(&FlashShape::realistic(false)),
        "flash-unrolled" => flash(&FlashShape::realistic(true)),
        "flash-k-first" => flash(&FlashShape {
            k_first: true,
            ..FlashShape::realistic(false)
        }),
        _ => None,
    }
}

/// The shape of a generated GEMM.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// Tile rows (M) and columns (N) of C per block, and the K step.
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    /// Threads per block (one dimension).
    pub threads: u32,
    /// Pipeline depth (slots of the circular buffer).
    pub stages: u32,
    /// Copies issued one op per element (`true`) or by an inner `for` over the thread's
    /// elements (`false`: the shape Triton's and Wave's loops have before unrolling).
    pub unrolled: bool,
}

impl GemmShape {
    /// The 128×128×64 f16 GEMM with 256 threads and a 3-stage pipeline.
    pub fn realistic(unrolled: bool) -> GemmShape {
        GemmShape {
            bm: 128,
            bn: 128,
            bk: 64,
            threads: 256,
            stages: 3,
            unrolled,
        }
    }
}

/// The GEMM shapes of the real-size suite (`bench --real`), each with the name its row
/// prints: 128×128×64 and 64×64×32 at 64, 256 and 1024 threads, and the tile sweep's ends
/// (32² and 256²) at 256 threads, 3 stages, copies rolled then unrolled (256² rolled only:
/// its unrolled copies are 1536 ops of text). Not every shape divides ([`gemm`] gives `None`
/// for those). The tests that run the real-size kernels read the same list.
pub fn real_gemm_shapes() -> Vec<(String, GemmShape)> {
    let mut out = Vec::new();
    for (bm, bn, bk) in [(128, 128, 64), (64, 64, 32), (32, 32, 32), (256, 256, 64)] {
        let big = bm == 256;
        let threads: &[u32] = if bm == 32 || big {
            &[256]
        } else {
            &[64, 256, 1024]
        };
        for &threads in threads {
            for unrolled in [false, true] {
                if big && unrolled {
                    continue;
                }
                let sh = GemmShape {
                    bm,
                    bn,
                    bk,
                    threads,
                    stages: 3,
                    unrolled,
                };
                let how = if unrolled { "unrolled" } else { "rolled" };
                out.push((format!("gemm {bm}x{bn}x{bk} t{threads} {how}"), sh));
            }
        }
    }
    out
}

/// The flash-attention shapes of the real-size suite (`bench --real`), each with the name its
/// row prints: [`FlashShape::realistic`] rolled, unrolled, and rolled with its K loads first.
pub fn real_flash_shapes() -> Vec<(String, FlashShape)> {
    let mut out = Vec::new();
    for (unrolled, k_first) in [(false, false), (true, false), (false, true)] {
        let how = if unrolled { "unrolled" } else { "rolled" };
        let order = if k_first { " k-first" } else { "" };
        let sh = FlashShape {
            k_first,
            ..FlashShape::realistic(unrolled)
        };
        out.push((format!("flash 128x64 d64 t128 {how}{order}"), sh));
    }
    out
}

/// The GEMM and flash-attention kernels of the real-size suite, name and source, in the
/// order `bench --real` prints them ([`real_gemm_shapes`], then [`real_flash_shapes`]; shapes
/// that do not divide left out).
pub fn real_tiled_kernels() -> Vec<(String, String)> {
    let gemms = real_gemm_shapes().into_iter();
    let gemms = gemms.filter_map(|(name, sh)| Some((name, gemm(&sh)?)));
    let flashes = real_flash_shapes().into_iter();
    let flashes = flashes.filter_map(|(name, sh)| Some((name, flash(&sh)?)));
    gemms.chain(flashes).collect()
}

/// One tile copy: `rows × cols` elements from the global `%{g}` at row `%gr0{tag}` (and
/// column `%gc0{tag}` when `col_origin`) into `@{buf}[%slot{tag}?, r, c]`, each of `threads`
/// threads copying every `threads`-th element, by one op per element (`unrolled`) or by an
/// inner `for`. `ind` is the indentation. Shared by the GEMM and flash generators.
pub(crate) struct TileCopy<'a> {
    pub buf: &'a str,
    pub g: &'a str,
    pub dims: (u32, u32),
    pub slotted: bool,
    pub col_origin: bool,
    pub threads: u32,
    pub unrolled: bool,
    pub tag: String,
    pub ind: &'a str,
}

/// Writes the copies of [`TileCopy`].
pub(crate) fn copy_tile(o: &mut String, c: &TileCopy) {
    let (rows, cols) = c.dims;
    let per = rows * cols / c.threads;
    let (tag, ind) = (&c.tag, c.ind);
    let slot = if c.slotted {
        format!("%slot{tag}, ")
    } else {
        String::new()
    };
    let body = |o: &mut String, i: &str, n: &str, ind: &str| {
        let _ = writeln!(o, "{ind}%e{n} = add %t, {i}");
        let _ = writeln!(o, "{ind}%r{n} = div %e{n}, {cols}");
        let _ = writeln!(o, "{ind}%c{n} = rem %e{n}, {cols}");
        let _ = writeln!(o, "{ind}%gr{n} = add %gr0{tag}, %r{n}");
        let gc = if c.col_origin {
            let _ = writeln!(o, "{ind}%gc{n} = add %gc0{tag}, %c{n}");
            format!("%gc{n}")
        } else {
            format!("%c{n}")
        };
        let _ = writeln!(
            o,
            "{ind}cp_async @{}[{slot}%r{n}, %c{n}] <- %{}[%gr{n}, {gc}]",
            c.buf, c.g
        );
    };
    if c.unrolled {
        for i in 0..per {
            body(o, &format!("{}", i * c.threads), &format!("{tag}{i}"), ind);
        }
    } else {
        let _ = writeln!(o, "{ind}for %i{tag} = 0 to {per} step 1 {{");
        let _ = writeln!(o, "{ind}  %o{tag} = mul %i{tag}, {}", c.threads);
        body(o, &format!("%o{tag}"), tag, &format!("{ind}  "));
        let _ = writeln!(o, "{ind}}}");
    }
}

/// The head of a pipelined loop's body, shared by the GEMM and flash generators: the slot of
/// iteration `iv` (`%slot`), the block `stages - 1` ahead (`next`) and its slot (`%ns`), and
/// the `if` that copies that block when it exists (`next < trips`); the caller writes the
/// copies and closes the `if`.
pub(crate) fn prefetch_head(o: &mut String, (iv, next, trips): (&str, &str, &str), stages: u32) {
    let _ = writeln!(o, "    %slot = rem {iv}, {stages}");
    let _ = writeln!(o, "    {next} = add {iv}, {}", stages - 1);
    let _ = writeln!(o, "    %ns = rem {next}, {stages}");
    let _ = writeln!(o, "    %has = cmp lt {next}, {trips}");
    let _ = writeln!(o, "    if %has {{");
}

/// The copies of K-tile `kt` into slot `slot` for both operands, inside the `if` that skips
/// tiles past the end of K; `tag` ends in `p` (prologue) or `m` (main loop) and names the
/// temporaries.
fn copy_stage(o: &mut String, sh: &GemmShape, kt: &str, slot: &str, tag: &str) {
    let ind = "      ";
    let bk = sh.bk;
    for (side, buf, g, dims) in [
        ("a", "a", "A", (sh.bm, sh.bk)),
        ("b", "b", "B", (sh.bk, sh.bn)),
    ] {
        let t = format!("{side}{tag}");
        let _ = writeln!(o, "{ind}%slot{t} = add {slot}, 0");
        if side == "a" {
            let _ = writeln!(o, "{ind}%gr0{t} = add 0, 0");
            let _ = writeln!(o, "{ind}%gc0{t} = mul {kt}, {bk}");
        } else {
            let _ = writeln!(o, "{ind}%gr0{t} = mul {kt}, {bk}");
            let _ = writeln!(o, "{ind}%gc0{t} = add 0, 0");
        }
        let c = TileCopy {
            buf,
            g,
            dims,
            slotted: true,
            col_origin: true,
            threads: sh.threads,
            unrolled: sh.unrolled,
            tag: t,
            ind,
        };
        copy_tile(o, &c);
    }
}

/// A GEMM kernel `C = A·B` for one block's tile, K streamed through `stages` slots, with no
/// sync written. `None` when the shape does not divide evenly.
pub fn gemm(sh: &GemmShape) -> Option<String> {
    let (bm, bn, bk, t) = (sh.bm, sh.bn, sh.bk, sh.threads);
    let side = (t as f64).sqrt() as u32;
    if side * side != t
        || (bm * bk) % t != 0
        || (bk * bn) % t != 0
        || bm % side != 0
        || bn % side != 0
        || sh.stages < 2
    {
        return None;
    }
    let (fm, fnn) = (bm / side, bn / side);
    let s = sh.stages;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "kernel @gemm_{bm}x{bn}x{bk}_s{s}(%K: i32 in [{bk}, 65536], %A: global f16[{bm}, %K], %B: global f16[%K, {bn}], %C: global f32[{bm}, {bn}]) block({t}) {{"
    );
    let _ = writeln!(o, "  shared @a : f16[{s}, {bm}, {bk}]");
    let _ = writeln!(o, "  shared @b : f16[{s}, {bk}, {bn}]");
    let _ = writeln!(o, "  %t = tid.x");
    let _ = writeln!(o, "  %kt = div %K, {bk}");
    // Prologue: tiles 0 .. stages-1 into their slots, those that exist (K may be one tile).
    let _ = writeln!(o, "  for %p = 0 to {} step 1 {{", s - 1);
    let _ = writeln!(o, "    %hp = cmp lt %p, %kt");
    let _ = writeln!(o, "    if %hp {{");
    copy_stage(&mut o, sh, "%p", "%p", "p");
    let _ = writeln!(o, "    }}");
    let _ = writeln!(o, "    cp_async_commit");
    let _ = writeln!(o, "  }}");
    let _ = writeln!(o, "  %tr = div %t, {side}");
    let _ = writeln!(o, "  %tc = rem %t, {side}");
    let _ = writeln!(o, "  %r0 = mul %tr, {fm}");
    let _ = writeln!(o, "  %c0 = mul %tc, {fnn}");
    let init: Vec<String> = (0..fm).map(|i| format!("%a{i} = 0.0")).collect();
    let outs: Vec<String> = (0..fm).map(|i| format!("%acc{i}")).collect();
    let _ = writeln!(
        o,
        "  {} = for %k = 0 to %kt step 1 iter({}) {{",
        outs.join(", "),
        init.join(", ")
    );
    prefetch_head(&mut o, ("%k", "%nk", "%kt"), s);
    copy_stage(&mut o, sh, "%nk", "%ns", "m");
    let _ = writeln!(o, "    }}");
    let _ = writeln!(o, "    cp_async_commit");
    let _ = writeln!(o, "    %at = view @a[%slot]");
    let _ = writeln!(o, "    %bt = view @b[%slot]");
    let kout = inner_k_loop(&mut o, bk, (fm, fnn));
    let _ = writeln!(o, "    yield {}", kout.join(", "));
    let _ = writeln!(o, "  }}");
    for i in 0..fm {
        let _ = writeln!(o, "  %or{i} = add %r0, {i}");
        let _ = writeln!(o, "  gstore %C[%or{i}, %c0], %acc{i}");
    }
    let _ = writeln!(o, "}}");
    Some(o)
}

/// The GEMM's inner loop over the K step `bk` on the current slot's tiles (`%at`, `%bt`):
/// each thread's `fm` rows of A times the sum of its `fnn` columns of B, accumulated in
/// `%x{i}` from `%a{i}`. Returns the loop's results (`%d{i}`).
fn inner_k_loop(o: &mut String, bk: u32, (fm, fnn): (u32, u32)) -> Vec<String> {
    let kin: Vec<String> = (0..fm).map(|i| format!("%x{i} = %a{i}")).collect();
    let kout: Vec<String> = (0..fm).map(|i| format!("%d{i}")).collect();
    let _ = writeln!(
        o,
        "    {} = for %kk = 0 to {bk} step 1 iter({}) {{",
        kout.join(", "),
        kin.join(", ")
    );
    for j in 0..fnn {
        let _ = writeln!(o, "      %bc{j} = add %c0, {j}");
        let _ = writeln!(o, "      %bv{j} = load %bt[%kk, %bc{j}]");
    }
    let _ = writeln!(o, "      %bs0 = add %bv0, 0.0");
    for j in 1..fnn {
        let _ = writeln!(o, "      %bs{j} = add %bs{}, %bv{j}", j - 1);
    }
    for i in 0..fm {
        let _ = writeln!(o, "      %ar{i} = add %r0, {i}");
        let _ = writeln!(o, "      %av{i} = load %at[%ar{i}, %kk]");
        let _ = writeln!(o, "      %m{i} = mul %av{i}, %bs{}", fnn - 1);
        let _ = writeln!(o, "      %f{i} = add %x{i}, %m{i}");
    }
    let fs: Vec<String> = (0..fm).map(|i| format!("%f{i}")).collect();
    let _ = writeln!(o, "      yield {}", fs.join(", "));
    let _ = writeln!(o, "    }}");
    kout
}

/// `n` pairs `store @a[%t]; load @a[%u]` on one buffer, straight line (each load reads
/// another thread's element: a RAW per pair and a WAR to the next store). Nearest-first
/// hazards keep these linear in `n`.
pub fn n_pairs(n: usize) -> String {
    let mut s = String::from(
        "kernel @pairs(%out: global f32[256]) block(256) {\n  shared @a : f32[256]\n  %t = tid.x\n  %f = itof %t\n  %u = sub 255, %t\n",
    );
    for i in 0..n {
        let _ = writeln!(s, "  store @a[%t], %f\n  %x{i} = load @a[%u]");
    }
    s.push_str("}\n");
    s
}

/// `depth` nested loops of 4 trips each around a store and a load of one double-buffered
/// row, whose slot is the sum of every induction variable mod 2 (so the footprints depend
/// on all levels: `4^depth` instances, past the enumeration cap from depth 7 on).
pub fn nested_loops(depth: usize) -> String {
    let mut s = String::from(
        "kernel @nest(%out: global f32[256]) block(256) {\n  shared @a : f32[2, 256]\n  %t = tid.x\n  %f = itof %t\n  %u = sub 255, %t\n  %s0 = add %t, 0\n",
    );
    for d in 1..=depth {
        let ind = "  ".repeat(d);
        let _ = writeln!(s, "{ind}for %i{d} = 0 to 4 step 1 {{");
        let _ = writeln!(s, "{ind}  %s{d} = add %s{}, %i{d}", d - 1);
    }
    let ind = "  ".repeat(depth + 1);
    let _ = writeln!(s, "{ind}%d = sub %s{depth}, %t");
    let _ = writeln!(s, "{ind}%m = rem %d, 2");
    let _ = writeln!(s, "{ind}store @a[%m, %t], %f");
    let _ = writeln!(s, "{ind}%x = load @a[%m, %u]");
    for d in (1..=depth).rev() {
        let _ = writeln!(s, "{}}}", "  ".repeat(d));
    }
    s.push_str("}\n");
    s
}

/// A loop of `trips` constant trips around a double buffer: the store fills slot
/// `k mod 2`, the load reads another thread's element of it (a RAW in the iteration, a WAR
/// carried two iterations).
pub fn const_trip(trips: u64) -> String {
    format!(
        "kernel @trip(%out: global f32[256]) block(256) {{\n  shared @a : f32[2, 256]\n  %t = tid.x\n  %f = itof %t\n  %u = sub 255, %t\n  for %k = 0 to {trips} step 1 {{\n    %m = rem %k, 2\n    store @a[%m, %t], %f\n    %x = load @a[%m, %u]\n  }}\n}}\n"
    )
}

/// A warp-specialized TMA pipeline (`examples/tma-warp-specialized.kir`'s, two slots, 256
/// consumers) whose role loops run `trips` iterations stepping by 2: the long-loop shortcut
/// of `analysis::mbar_protocol` declines (its loops step by 1), so the verdict on the waits
/// is computed from the full trace, about 5 events per trip (issue 12's L9). Declares
/// `sm_90`, the first target with mbarriers.
pub fn mbar_stepped(trips: u64) -> String {
    let loop_head = format!("for %i = 0 to {} step 2", 2 * trips);
    let slot = "%j = div %i, 2\n      %q = div %j, 2\n      %par = rem %q, 2\n      %s = rem %j, 2";
    format!(
        "kernel @ws(%X: global f32[{trips}, 64], %Y: global f32[{trips}, 64]) block(288) target \"sm_90\" {{
  group @producer : threads [0, 32)
  group @consumers : threads [32, 288)
  shared @buf : f32[2, 64]
  shared @full : mbarrier[2]
  shared @empty : mbarrier[2]
  %t = tid.x
  %lead = cmp eq %t, 0
  if %lead {{
    mbar_init @full[0], 1
    mbar_init @empty[0], 256
    mbar_init @full[1], 1
    mbar_init @empty[1], 256
  }}
  barrier
  %isp = in_group @producer
  if %isp {{
    %elect = cmp eq %t, 0
    if %elect {{
      {loop_head} {{
      {slot}
      %free = xor %par, 1
      mbar_wait @empty[%s], %free
      %v = view @buf[%s]
      mbar_arrive @full[%s] tx 256
      tma_load %v <- %X[%j, 0], @full[%s]
      }}
    }}
  }} else {{
    %cc = sub %t, 32
    %ci = rem %cc, 64
    {loop_head} {{
      {slot}
      %v = view @buf[%s]
      mbar_wait @full[%s], %par
      %x = load %v[%ci]
      mbar_arrive @empty[%s]
      %y = exp %x
      gstore %Y[%j, %ci], %y
    }}
  }}
}}
"
    )
}
