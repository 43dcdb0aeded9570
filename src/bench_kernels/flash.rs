//! A generated flash-attention forward kernel (one block, one query tile): the real-size
//! benchmark of docs/performance.md and, scaled down, a kernel the tests execute and compare
//! with a plain softmax-attention reference.
//!
//! Shape: the Q tile (`bm × d`, f16) is copied into shared memory once; K and V tiles
//! (`bn × d`, f16) stream through a `stages`-slot `cp.async` pipeline over a symbolic number
//! of KV blocks (`%N / bn`). Per KV block each thread computes its `fm × fn` fragment of
//! `S = Q·Kᵀ · d^-1/2` in registers, exchanges per-row partial maxima through `@mx` and
//! partial sums of `P = exp(S − m)` through `@sm`, writes `P` (f16) to `@p`, rescales its
//! `fm × fd` fragment of `O` by `exp(m_old − m_new)` and adds `P·V`. After the last block
//! `O / l` is stored. Threads form a `rows × cols` grid (`cols` threads share a row); the
//! copies are issued by an inner `for` per tile (rolled) or one op per element (unrolled),
//! as in the GEMM generator. No sync is written: `sync` must place the waits and barriers
//! (three barriers per KV block at the minimum: K/V ready and the refilled slot free, the
//! row maxima written, `P` and the row sums written).
//!
//! Invariants: `None` unless `cols` divides `threads`, `bn` and `d`, the row count divides
//! `bm`, every tile divides evenly among the threads and `stages >= 2`; otherwise the kernel
//! parses and verifies. Complexity: text of O(fm·(fn + fd) + tile/threads) lines.
//! Reference: the online softmax of Dao et al., "FlashAttention" (2022), Algorithm 1, with
//! the per-row statistics shared as FlashAttention-2's thread blocks do when a row is split
//! across threads.

use super::{TileCopy, copy_tile, prefetch_head};
use std::fmt::Write as _;

/// The shape of a generated flash-attention kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FlashShape {
    /// Query rows of the tile (Q and O are `bm × d`).
    pub bm: u32,
    /// Key/value rows per KV block.
    pub bn: u32,
    /// Head dimension.
    pub d: u32,
    /// Threads per block (one dimension).
    pub threads: u32,
    /// Threads that share one row of S and O (the row statistics go through shared memory).
    pub cols: u32,
    /// Pipeline depth of the K/V slots.
    pub stages: u32,
    /// Copies issued one op per element (`true`) or by an inner `for` (`false`).
    pub unrolled: bool,
    /// The `S` loop loads its K elements before its Q elements (`false`: Q first). Either
    /// order computes the same; `sync` places the K tile's wait differently (today with Q
    /// first the wait and a barrier land inside the head-dimension loop: docs/performance.md).
    pub k_first: bool,
}

impl FlashShape {
    /// The real-size kernel: a 128×64 Q tile, 64-row KV blocks, head dimension 64, 128
    /// threads in a 16 × 8 grid (8×8 fragments of S and O per thread), 3 stages.
    pub fn realistic(unrolled: bool) -> FlashShape {
        FlashShape {
            bm: 128,
            bn: 64,
            d: 64,
            threads: 128,
            cols: 8,
            stages: 3,
            unrolled,
            k_first: false,
        }
    }

    /// Rows of the thread grid and the fragment sizes `(fm, fn, fd)`, if the shape divides.
    fn fragments(&self) -> Option<(u32, u32, u32)> {
        let ok = self.cols > 0
            && self.threads.is_multiple_of(self.cols)
            && self.bn.is_multiple_of(self.cols)
            && self.d.is_multiple_of(self.cols)
            && self.stages >= 2
            && self.threads > 0
            && (self.bm * self.d).is_multiple_of(self.threads)
            && (self.bn * self.d).is_multiple_of(self.threads);
        let rows = self.threads / self.cols.max(1);
        if !ok || rows == 0 || !self.bm.is_multiple_of(rows) {
            return None;
        }
        Some((self.bm / rows, self.bn / self.cols, self.d / self.cols))
    }
}

/// The copies of KV block `blk` into slot `slot` for K and V; `tag` names the temporaries.
fn copy_kv(o: &mut String, sh: &FlashShape, blk: &str, slot: &str, tag: &str, ind: &str) {
    for (side, g) in [("k", "K"), ("v", "V")] {
        let t = format!("{side}{tag}");
        let _ = writeln!(o, "{ind}%slot{t} = add {slot}, 0");
        let _ = writeln!(o, "{ind}%gr0{t} = mul {blk}, {}", sh.bn);
        let c = TileCopy {
            buf: side,
            g,
            dims: (sh.bn, sh.d),
            slotted: true,
            col_origin: false,
            threads: sh.threads,
            unrolled: sh.unrolled,
            tag: t.clone(),
            ind,
        };
        copy_tile(o, &c);
    }
}

/// Names `%{p}{i}_{j}` for `i < a`, `j < b`, row-major.
fn grid(p: &str, a: u32, b: u32) -> Vec<String> {
    (0..a)
        .flat_map(|i| (0..b).map(move |j| format!("%{p}{i}_{j}")))
        .collect()
}

/// `S = Q·Kᵀ` for the thread's fragment: an inner loop over the head dimension with
/// `fm·fn` accumulators, then the scale; defines `%ss{i}_{c}`.
fn scores(o: &mut String, sh: &FlashShape, fm: u32, fnn: u32) {
    let acc = grid("x", fm, fnn);
    let init: Vec<String> = acc.iter().map(|a| format!("{a} = 0.0")).collect();
    let _ = writeln!(
        o,
        "    {} = for %dd = 0 to {} step 1 iter({}) {{",
        grid("s", fm, fnn).join(", "),
        sh.d,
        init.join(", ")
    );
    let q_loads = |o: &mut String| {
        for i in 0..fm {
            let _ = writeln!(o, "      %qv{i} = load @q[%qr{i}, %dd]");
        }
    };
    if !sh.k_first {
        q_loads(o);
    }
    for c in 0..fnn {
        let _ = writeln!(o, "      %kv{c} = load %kt[%kc{c}, %dd]");
    }
    if sh.k_first {
        q_loads(o);
    }
    for i in 0..fm {
        for c in 0..fnn {
            let _ = writeln!(o, "      %pr{i}_{c} = mul %qv{i}, %kv{c}");
            let _ = writeln!(o, "      %y{i}_{c} = add %x{i}_{c}, %pr{i}_{c}");
        }
    }
    let _ = writeln!(o, "      yield {}", grid("y", fm, fnn).join(", "));
    let _ = writeln!(o, "    }}");
    let scale = 1.0 / f64::from(sh.d).sqrt();
    for i in 0..fm {
        for c in 0..fnn {
            let _ = writeln!(o, "    %ss{i}_{c} = mul %s{i}_{c}, {scale:?}");
        }
    }
}

/// Loads the `cols` partials of row `i` from `@{buf}` and folds them with `op` into
/// `%{name}{i}`, starting from `%{first}`.
fn fold_row(o: &mut String, sh: &FlashShape, buf: &str, op: &str, name: &str, i: u32) {
    for cc in 0..sh.cols {
        let _ = writeln!(o, "    %{buf}l{i}_{cc} = load @{buf}[%qr{i}, {cc}]");
    }
    let _ = writeln!(o, "    %{name}{i}_0 = add %{buf}l{i}_0, 0.0");
    for cc in 1..sh.cols {
        let _ = writeln!(
            o,
            "    %{name}{i}_{cc} = {op} %{name}{i}_{}, %{buf}l{i}_{cc}",
            cc - 1
        );
    }
}

/// The online softmax: row maxima through `@mx`, `P` into `@p`, row sums through `@sm`;
/// defines the new maxima `%mn{i}`, sums `%ln{i}` and rescale factors `%al{i}`.
fn softmax(o: &mut String, sh: &FlashShape, fm: u32, fnn: u32) {
    for i in 0..fm {
        let _ = writeln!(o, "    %pm{i}_0 = add %ss{i}_0, 0.0");
        for c in 1..fnn {
            let _ = writeln!(o, "    %pm{i}_{c} = max %pm{i}_{}, %ss{i}_{c}", c - 1);
        }
        let _ = writeln!(o, "    store @mx[%qr{i}, %tc], %pm{i}_{}", fnn - 1);
    }
    let last = sh.cols - 1;
    for i in 0..fm {
        fold_row(o, sh, "mx", "max", "rm", i);
        let _ = writeln!(o, "    %mn{i} = max %m{i}, %rm{i}_{last}");
        let _ = writeln!(o, "    %dm{i} = sub %m{i}, %mn{i}");
        let _ = writeln!(o, "    %al{i} = exp %dm{i}");
        for c in 0..fnn {
            let _ = writeln!(o, "    %sd{i}_{c} = sub %ss{i}_{c}, %mn{i}");
            let _ = writeln!(o, "    %pe{i}_{c} = exp %sd{i}_{c}");
            let _ = writeln!(o, "    store @p[%qr{i}, %kc{c}], %pe{i}_{c}");
        }
        let _ = writeln!(o, "    %ps{i}_0 = add %pe{i}_0, 0.0");
        for c in 1..fnn {
            let _ = writeln!(o, "    %ps{i}_{c} = add %ps{i}_{}, %pe{i}_{c}", c - 1);
        }
        let _ = writeln!(o, "    store @sm[%qr{i}, %tc], %ps{i}_{}", fnn - 1);
    }
    for i in 0..fm {
        fold_row(o, sh, "sm", "add", "rs", i);
        let _ = writeln!(o, "    %lo{i} = mul %l{i}, %al{i}");
        let _ = writeln!(o, "    %ln{i} = add %lo{i}, %rs{i}_{last}");
    }
}

/// `O = O·α + P·V` for the thread's fragment: an inner loop over the block's rows with
/// `fm·fd` accumulators; defines `%on{i}_{e}`.
fn accumulate(o: &mut String, sh: &FlashShape, fm: u32, fd: u32) {
    let init: Vec<String> = (0..fm)
        .flat_map(|i| (0..fd).map(move |e| (i, e)))
        .map(|(i, e)| {
            let _ = writeln!(o, "    %oa{i}_{e} = mul %o{i}_{e}, %al{i}");
            format!("%z{i}_{e} = %oa{i}_{e}")
        })
        .collect();
    let _ = writeln!(
        o,
        "    {} = for %jj = 0 to {} step 1 iter({}) {{",
        grid("on", fm, fd).join(", "),
        sh.bn,
        init.join(", ")
    );
    for i in 0..fm {
        let _ = writeln!(o, "      %pv{i} = load @p[%qr{i}, %jj]");
    }
    for e in 0..fd {
        let _ = writeln!(o, "      %vv{e} = load %vt[%jj, %vc{e}]");
    }
    for i in 0..fm {
        for e in 0..fd {
            let _ = writeln!(o, "      %w{i}_{e} = mul %pv{i}, %vv{e}");
            let _ = writeln!(o, "      %u{i}_{e} = add %z{i}_{e}, %w{i}_{e}");
        }
    }
    let _ = writeln!(o, "      yield {}", grid("u", fm, fd).join(", "));
    let _ = writeln!(o, "    }}");
}

/// The header, the shared tiles, the Q copy and the pipeline's prologue.
fn prologue(o: &mut String, sh: &FlashShape) {
    let FlashShape {
        bm,
        bn,
        d,
        threads,
        cols,
        stages: s,
        ..
    } = *sh;
    let _ = writeln!(
        o,
        "kernel @flash_{bm}x{bn}x{d}_s{s}(%N: i32 in [{bn}, 65536], %Q: global f16[{bm}, {d}], %K: global f16[%N, {d}], %V: global f16[%N, {d}], %O: global f32[{bm}, {d}]) block({threads}) {{"
    );
    let _ = writeln!(o, "  shared @q : f16[{bm}, {d}]");
    let _ = writeln!(o, "  shared @k : f16[{s}, {bn}, {d}]");
    let _ = writeln!(o, "  shared @v : f16[{s}, {bn}, {d}]");
    let _ = writeln!(o, "  shared @p : f16[{bm}, {bn}]");
    let _ = writeln!(o, "  shared @mx : f32[{bm}, {cols}]");
    let _ = writeln!(o, "  shared @sm : f32[{bm}, {cols}]");
    let _ = writeln!(o, "  %t = tid.x");
    let _ = writeln!(o, "  %nb = div %N, {bn}");
    let _ = writeln!(o, "  %gr0q = add 0, 0");
    let q = TileCopy {
        buf: "q",
        g: "Q",
        dims: (bm, d),
        slotted: false,
        col_origin: false,
        threads: sh.threads,
        unrolled: sh.unrolled,
        tag: "q".into(),
        ind: "  ",
    };
    copy_tile(o, &q);
    let _ = writeln!(o, "  cp_async_commit");
    let _ = writeln!(o, "  for %b = 0 to {} step 1 {{", s - 1);
    let _ = writeln!(o, "    %hb = cmp lt %b, %nb");
    let _ = writeln!(o, "    if %hb {{");
    copy_kv(o, sh, "%b", "%b", "p", "      ");
    let _ = writeln!(o, "    }}");
    let _ = writeln!(o, "    cp_async_commit");
    let _ = writeln!(o, "  }}");
}

/// A flash-attention forward kernel for one query tile, with no sync written (see the
/// module doc). `None` when the shape does not divide evenly.
pub fn flash(sh: &FlashShape) -> Option<String> {
    let (fm, fnn, fd) = sh.fragments()?;
    let s = sh.stages;
    let mut o = String::new();
    prologue(&mut o, sh);
    let _ = writeln!(o, "  %tr = div %t, {}", sh.cols);
    let _ = writeln!(o, "  %tc = rem %t, {}", sh.cols);
    let _ = writeln!(o, "  %r0 = mul %tr, {fm}");
    let _ = writeln!(o, "  %c0 = mul %tc, {fnn}");
    let _ = writeln!(o, "  %d0 = mul %tc, {fd}");
    for i in 0..fm {
        let _ = writeln!(o, "  %qr{i} = add %r0, {i}");
    }
    for c in 0..fnn {
        let _ = writeln!(o, "  %kc{c} = add %c0, {c}");
    }
    for e in 0..fd {
        let _ = writeln!(o, "  %vc{e} = add %d0, {e}");
    }
    let mut init: Vec<String> = grid("o", fm, fd)
        .into_iter()
        .map(|v| format!("{v} = 0.0"))
        .collect();
    init.extend((0..fm).map(|i| format!("%m{i} = -1.0e30")));
    init.extend((0..fm).map(|i| format!("%l{i} = 0.0")));
    let mut outs = grid("of", fm, fd);
    outs.extend((0..fm).map(|i| format!("%mf{i}")));
    outs.extend((0..fm).map(|i| format!("%lf{i}")));
    let _ = writeln!(
        o,
        "  {} = for %j = 0 to %nb step 1 iter({}) {{",
        outs.join(", "),
        init.join(", ")
    );
    prefetch_head(&mut o, ("%j", "%nj", "%nb"), s);
    copy_kv(&mut o, sh, "%nj", "%ns", "m", "      ");
    let _ = writeln!(o, "    }}");
    let _ = writeln!(o, "    cp_async_commit");
    let _ = writeln!(o, "    %kt = view @k[%slot]");
    let _ = writeln!(o, "    %vt = view @v[%slot]");
    scores(&mut o, sh, fm, fnn);
    softmax(&mut o, sh, fm, fnn);
    accumulate(&mut o, sh, fm, fd);
    let mut ys = grid("on", fm, fd);
    ys.extend((0..fm).map(|i| format!("%mn{i}")));
    ys.extend((0..fm).map(|i| format!("%ln{i}")));
    let _ = writeln!(o, "    yield {}", ys.join(", "));
    let _ = writeln!(o, "  }}");
    for i in 0..fm {
        for e in 0..fd {
            let _ = writeln!(o, "  %res{i}_{e} = div %of{i}_{e}, %lf{i}");
            let _ = writeln!(o, "  gstore %O[%qr{i}, %vc{e}], %res{i}_{e}");
        }
    }
    let _ = writeln!(o, "}}");
    Some(o)
}
