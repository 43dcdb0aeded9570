//! Triton 3.6 encodings to linear layouts, for one tile shape.
//!
//! Each function builds the bases of Triton's own conversion (`toLinearLayout` in
//! triton-lang/triton `lib/Dialect/TritonGPU/IR/LinearLayoutConversions.cpp`; facts taken
//! from there, the code is smemsync's): a *product* of 1-D identities appends input bits whose
//! bases continue a dimension where the previous ones stopped ([`Builder::identity`]); then
//! the layout is fitted to the tile ([`Builder::fit`]): registers repeat it where the tile is
//! larger (wrapping), and bases reaching beyond a smaller tile are zeroed (broadcasting).
//! Bases are kept per dimension here and flattened to row-major indices at the end.
//! Complexity: O(rank · bits) per encoding.

use super::attr::{Attr, Node, Val};
use super::linear::{AddressMap, Distributed};

/// Which input a basis belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum In {
    Reg,
    Lane,
    Warp,
}

/// Why an encoding did not decode: a malformed parameter (an error) or a layout smemsync
/// does not model for this shape (a warning: the layout is then opaque).
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub error: bool,
    pub msg: String,
    /// Byte range within the attribute text.
    pub at: (usize, usize),
}

pub type DResult<T> = Result<T, Problem>;

fn bad<T>(n: &Node, msg: impl Into<String>) -> DResult<T> {
    Err(Problem {
        error: true,
        msg: msg.into(),
        at: n.at,
    })
}

fn unsupported<T>(at: (usize, usize), msg: impl Into<String>) -> DResult<T> {
    Err(Problem {
        error: false,
        msg: msg.into(),
        at,
    })
}

/// Bases per input, as coordinate vectors.
#[derive(Clone, Debug)]
pub struct Builder {
    pub size: Vec<u64>,
    pub reg: Vec<Vec<u64>>,
    pub lane: Vec<Vec<u64>>,
    pub warp: Vec<Vec<u64>>,
}

impl Builder {
    pub fn new(rank: usize) -> Builder {
        Builder {
            size: vec![1; rank],
            reg: Vec::new(),
            lane: Vec::new(),
            warp: Vec::new(),
        }
    }
    fn bases(&mut self, i: In) -> &mut Vec<Vec<u64>> {
        match i {
            In::Reg => &mut self.reg,
            In::Lane => &mut self.lane,
            In::Warp => &mut self.warp,
        }
    }
    /// Appends `log2(n)` bits of input `i` enumerating dimension `d` from its current size.
    pub fn identity(&mut self, i: In, n: u64, d: usize) {
        let rank = self.size.len();
        let mut s = self.size[d];
        let mut k = 1;
        while k < n {
            let mut b = vec![0; rank];
            b[d] = s;
            self.bases(i).push(b);
            s *= 2;
            k *= 2;
        }
        self.size[d] = s;
    }
    /// Appends `log2(n)` bits of input `i` that select nothing (broadcast).
    pub fn zeros(&mut self, i: In, n: u64) {
        let rank = self.size.len();
        let mut k = 1;
        while k < n {
            self.bases(i).push(vec![0; rank]);
            k *= 2;
        }
    }
    /// Appends one basis given by its coordinates.
    pub fn push(&mut self, i: In, b: Vec<u64>) {
        for (d, &c) in b.iter().enumerate() {
            self.size[d] = self.size[d].max((c + 1).next_power_of_two());
        }
        self.bases(i).push(b);
    }
    /// Fits the layout to `shape`: repeats it over registers where it is smaller, zeroes
    /// coordinates beyond the shape where it is larger.
    pub fn fit(&mut self, shape: &[u64]) {
        for (d, &want) in shape.iter().enumerate() {
            if self.size[d] < want {
                let n = want / self.size[d];
                self.identity(In::Reg, n, d);
            }
        }
        for bs in [&mut self.reg, &mut self.lane, &mut self.warp] {
            for b in bs.iter_mut() {
                for (d, c) in b.iter_mut().enumerate() {
                    if *c >= shape[d] {
                        *c = 0;
                    }
                }
            }
        }
        self.size = shape.to_vec();
    }
    /// Row-major flattening.
    pub fn finish(&self, shape: &[u64]) -> Distributed {
        let flat = |b: &Vec<u64>| b.iter().zip(shape).fold(0u64, |acc, (&c, &d)| acc * d + c);
        Distributed {
            shape: shape.to_vec(),
            reg: self.reg.iter().map(flat).collect(),
            lane: self.lane.iter().map(flat).collect(),
            warp: self.warp.iter().map(flat).collect(),
        }
    }
}

/// A parameter that must be present.
pub fn param<'a>(a: &'a Attr, whole: &Node, key: &str) -> DResult<&'a Node> {
    match a.get(key) {
        Some(n) => Ok(n),
        None => bad(whole, format!("`#{}` needs the parameter `{key}`", a.name)),
    }
}

pub fn int(n: &Node) -> DResult<i64> {
    match n.val {
        Val::Int(v) => Ok(v),
        _ => bad(n, "expected an integer"),
    }
}

pub fn boolean(n: &Node) -> DResult<bool> {
    match n.val {
        Val::Bool(v) => Ok(v),
        _ => bad(n, "expected `true` or `false`"),
    }
}

/// A list of positive powers of two (counts of registers, lanes, warps).
pub fn pow2_list(n: &Node) -> DResult<Vec<u64>> {
    let Val::List(items) = &n.val else {
        return bad(n, "expected a list of integers");
    };
    items
        .iter()
        .map(|i| match i.val {
            Val::Int(v) if v > 0 && (v as u64).is_power_of_two() => Ok(v as u64),
            Val::Int(_) => bad(i, "expected a power of two"),
            _ => bad(i, "expected an integer"),
        })
        .collect()
}

/// A permutation of `0..rank`.
pub fn order(n: &Node, rank: usize) -> DResult<Vec<usize>> {
    let Val::List(items) = &n.val else {
        return bad(n, "expected a list of dimensions");
    };
    let mut out = Vec::new();
    for i in items {
        match i.val {
            Val::Int(v) if v >= 0 && (v as usize) < rank && !out.contains(&(v as usize)) => {
                out.push(v as usize)
            }
            _ => return bad(i, format!("expected a dimension below {rank}, each once")),
        }
    }
    if out.len() != rank {
        return bad(n, format!("the order must name all {rank} dimensions"));
    }
    Ok(out)
}

/// A list of coordinate vectors (`#ttg.linear`'s bases).
pub fn basis_list(n: &Node, rank: Option<usize>) -> DResult<Vec<Vec<u64>>> {
    let Val::List(items) = &n.val else {
        return bad(n, "expected a list of bases");
    };
    let mut out: Vec<Vec<u64>> = Vec::new();
    for i in items {
        let Val::List(cs) = &i.val else {
            return bad(i, "expected a basis `[c0, c1, ...]`");
        };
        let mut b = Vec::new();
        for c in cs {
            match c.val {
                Val::Int(v) if (0..1 << 30).contains(&v) => b.push(v as u64),
                _ => return bad(c, "expected a non-negative coordinate"),
            }
        }
        let want = rank.or(out.first().map(|f| f.len()));
        if want.is_some_and(|r| r != b.len()) {
            return bad(i, "every basis needs one coordinate per dimension");
        }
        out.push(b);
    }
    Ok(out)
}

/// `#ttg.blocked`.
pub fn blocked(a: &Attr, whole: &Node, shape: &[u64]) -> DResult<Builder> {
    let spt = pow2_list(param(a, whole, "sizePerThread")?)?;
    let tpw = pow2_list(param(a, whole, "threadsPerWarp")?)?;
    let wpc = pow2_list(param(a, whole, "warpsPerCTA")?)?;
    let ord = order(param(a, whole, "order")?, spt.len())?;
    if tpw.len() != spt.len() || wpc.len() != spt.len() {
        return bad(whole, "sizePerThread, threadsPerWarp and warpsPerCTA differ in rank");
    }
    rank_is(whole, spt.len(), shape)?;
    let mut b = Builder::new(spt.len());
    for (i, counts) in [(In::Reg, &spt), (In::Lane, &tpw), (In::Warp, &wpc)] {
        for &d in &ord {
            b.identity(i, counts[d], d);
        }
    }
    b.fit(shape);
    Ok(b)
}

pub fn rank_is(whole: &Node, rank: usize, shape: &[u64]) -> DResult<()> {
    if rank != shape.len() {
        return unsupported(
            whole.at,
            format!(
                "the layout has rank {rank} but the tile has rank {}",
                shape.len()
            ),
        );
    }
    Ok(())
}

/// The NVIDIA mma tile: `kw` registers then 4 lanes along the inner dimension, 8 lanes along
/// the outer one, then registers repeat it over an `m x n` tile (outer, inner).
fn mma_tile(b: &mut Builder, kw: u64, m: u64, n: u64, inner: usize, outer: usize) {
    b.identity(In::Reg, kw, inner);
    b.identity(In::Lane, 4, inner);
    b.identity(In::Lane, 8, outer);
    b.identity(In::Reg, m / 8, outer);
    b.identity(In::Reg, n / (kw * 4), inner);
}

/// `#ttg.nvidia_mma` (v2: instrShape `[16, 8]`, v3: `[16, N, K]`), rank 2.
pub fn nvidia_mma(a: &Attr, whole: &Node, shape: &[u64]) -> DResult<Builder> {
    let major = int(param(a, whole, "versionMajor")?)?;
    let wpc = pow2_list(param(a, whole, "warpsPerCTA")?)?;
    let instr = pow2_list(param(a, whole, "instrShape")?)?;
    if !(2..=3).contains(&major) {
        return unsupported(whole.at, format!("nvidia_mma version {major} is not modelled"));
    }
    rank_is(whole, wpc.len(), shape)?;
    if wpc.len() != 2 || instr.len() < 2 || instr[0] % 8 != 0 || instr[1] % 8 != 0 {
        return unsupported(whole.at, "only rank-2 mma layouts with 8-aligned tiles are modelled");
    }
    let mut b = Builder::new(2);
    mma_tile(&mut b, 2, instr[0], instr[1], 1, 0);
    b.identity(In::Warp, wpc[1], 1);
    b.identity(In::Warp, wpc[0], 0);
    b.fit(shape);
    Ok(b)
}

/// `#ttg.dot_op` with an NVIDIA mma parent (`wpc` its warpsPerCTA).
pub fn nvidia_dot(op_idx: i64, kw: u64, wpc: &[u64], shape: &[u64]) -> Builder {
    let mut b = Builder::new(2);
    if op_idx == 0 {
        mma_tile(&mut b, kw, 16, kw * 8, 1, 0);
    } else {
        mma_tile(&mut b, kw, 8, kw * 8, 0, 1);
    }
    // Warps in the mma's row-major warp order; broadcast along K.
    let k_dim = if op_idx == 0 { 1 } else { 0 };
    for d in [1, 0] {
        if d == k_dim {
            b.zeros(In::Warp, wpc[d]);
        } else {
            b.identity(In::Warp, wpc[d], d);
        }
    }
    b.fit(shape);
    b
}

/// Parameters of `#ttg.amd_mfma`.
pub struct Mfma {
    pub wpc: Vec<u64>,
    pub m: u64,
    pub n: u64,
    pub transposed: bool,
    pub height: u64,
}

pub fn mfma_params(a: &Attr, whole: &Node) -> DResult<Mfma> {
    let wpc = pow2_list(param(a, whole, "warpsPerCTA")?)?;
    let instr = pow2_list(param(a, whole, "instrShape")?)?;
    let transposed = match a.get("isTransposed") {
        Some(n) => boolean(n)?,
        None => false,
    };
    let height = match a.get("elementBitWidth") {
        Some(n) if int(n)? == 64 => 1,
        _ => 4,
    };
    if a.get("tilesPerWarp").is_some_and(|t| {
        pow2_list(t).map_or(true, |v| v.iter().any(|&x| x != 1))
    }) {
        return unsupported(whole.at, "amd_mfma with tilesPerWarp other than 1 is not modelled");
    }
    if wpc.len() != 2 || instr.len() < 2 || !matches!((instr[0], instr[1]), (32, 32) | (16, 16)) {
        return unsupported(whole.at, "only rank-2 amd_mfma 32x32 and 16x16 are modelled");
    }
    Ok(Mfma {
        wpc,
        m: instr[0],
        n: instr[1],
        transposed,
        height,
    })
}

/// `#ttg.amd_mfma` (wave64): M is dimension 0, N dimension 1.
pub fn amd_mfma(p: &Mfma, shape: &[u64]) -> Builder {
    let (dm, dn) = (0, 1);
    let mut b = Builder::new(2);
    let tiles = p.m * p.n / (64 * p.height);
    let (a, c, first) = if p.transposed {
        (dn, dm, p.m)
    } else {
        (dm, dn, p.n)
    };
    b.identity(In::Reg, p.height, a);
    b.identity(In::Lane, first, c);
    b.identity(In::Lane, 64 / first, a);
    b.identity(In::Reg, tiles, a);
    b.identity(In::Warp, p.wpc[dn], dn);
    let reps = shape[dn] / (p.n * p.wpc[dn]);
    b.identity(In::Reg, reps, dn);
    b.identity(In::Warp, p.wpc[dm], dm);
    b.fit(shape);
    b
}

/// `#ttg.dot_op` with an `amd_mfma` parent: `kw` consecutive elements along K per lane.
pub fn mfma_dot(p: &Mfma, op_idx: i64, kw: u64, shape: &[u64]) -> Builder {
    let (k_dim, nk_dim) = if op_idx == 0 { (1, 0) } else { (0, 1) };
    let mut b = Builder::new(2);
    b.identity(In::Reg, kw, k_dim);
    let nk = if p.m == 32 { 32 } else { 16 };
    b.identity(In::Lane, nk, nk_dim);
    b.identity(In::Lane, 64 / nk, k_dim);
    if shape[k_dim] > b.size[k_dim] {
        let n = shape[k_dim] / b.size[k_dim];
        b.identity(In::Reg, n, k_dim);
    }
    for d in [1, 0] {
        if d == k_dim {
            b.zeros(In::Warp, p.wpc[d]);
        } else {
            b.identity(In::Warp, p.wpc[d], d);
        }
    }
    b.fit(shape);
    b
}

/// `#ttg.amd_wmma` versions 1 and 2 (wave32, 16x16 tiles).
pub fn amd_wmma(a: &Attr, whole: &Node, shape: &[u64]) -> DResult<Builder> {
    let ver = int(param(a, whole, "version")?)?;
    let wpc = pow2_list(param(a, whole, "warpsPerCTA")?)?;
    let tr = match a.get("isTranspose").or(a.get("isTransposed")) {
        Some(n) => boolean(n)?,
        None => false,
    };
    if !(1..=2).contains(&ver) || wpc.len() != 2 {
        return unsupported(whole.at, "only rank-2 amd_wmma versions 1 and 2 are modelled");
    }
    rank_is(whole, 2, shape)?;
    let (dm, dn) = if tr { (1, 0) } else { (0, 1) };
    let mut b = Builder::new(2);
    let (regs, gap): (&[u64], u64) = if ver == 1 {
        (&[2, 4, 8], 1)
    } else {
        (&[1, 2, 4], 8)
    };
    for &r in regs {
        let mut v = vec![0, 0];
        v[dm] = r;
        b.push(In::Reg, v);
    }
    for l in [1, 2, 4, 8] {
        let mut v = vec![0, 0];
        v[dn] = l;
        b.push(In::Lane, v);
    }
    let mut v = vec![0, 0];
    v[dm] = gap;
    b.push(In::Lane, v);
    b.size = vec![16, 16];
    b.identity(In::Warp, wpc[1], 1);
    b.identity(In::Warp, wpc[0], 0);
    b.fit(shape);
    Ok(b)
}

/// `#ttg.linear`: explicit bases (the `block` bases must be empty or zero).
pub fn linear(a: &Attr, whole: &Node, shape: &[u64]) -> DResult<Builder> {
    let rank = shape.len();
    let mut b = Builder::new(rank);
    for (key, i) in [("register", In::Reg), ("lane", In::Lane), ("warp", In::Warp)] {
        for v in basis_list(param(a, whole, key)?, Some(rank))? {
            b.push(i, v);
        }
    }
    if let Some(bl) = a.get("block")
        && basis_list(bl, Some(rank))?.iter().flatten().any(|&c| c != 0)
    {
        return unsupported(bl.at, "layouts spread over several blocks (CTAs) are not modelled");
    }
    b.fit(shape);
    Ok(b)
}

/// Removes dimension `dim` from a parent's bases (`#ttg.slice`).
pub fn slice(mut p: Builder, dim: usize) -> Builder {
    for bs in [&mut p.reg, &mut p.lane, &mut p.warp] {
        for b in bs.iter_mut() {
            b.remove(dim);
        }
    }
    p.size.remove(dim);
    p.reg.retain(|b| b.iter().any(|&c| c != 0));
    p
}

/// Offset bases (per dimension) of a shared layout, flattened and inverted.
fn address_map(bases: &[Vec<u64>], shape: &[u64], at: (usize, usize)) -> DResult<AddressMap> {
    let bits: u32 = shape.iter().map(|d| d.trailing_zeros()).sum();
    if bases.len() != bits as usize {
        return unsupported(
            at,
            format!("the shared layout has {} offset bits but the buffer has 2^{bits} elements", bases.len()),
        );
    }
    let flat: Vec<u64> = bases
        .iter()
        .map(|b| b.iter().zip(shape).fold(0u64, |acc, (&c, &d)| acc * d + c))
        .collect();
    match AddressMap::from_offset_bases(&flat) {
        Some(m) => Ok(m),
        None => unsupported(at, "the shared layout is not a permutation of this buffer"),
    }
}

/// `#ttg.swizzled_shared`: the two most minor dimensions are swizzled in phases.
pub fn swizzled_shared(a: &Attr, whole: &Node, shape: &[u64]) -> DResult<AddressMap> {
    phased_shared(a, whole, shape, false)
}

/// `#ttg.amd_rotating_shared`: like `swizzled_shared`, but the phase of a row is XORed with
/// the number of its block of `perPhase * maxPhase` rows (modulo `maxPhase`), so the pattern
/// rotates over `maxPhase` blocks before it repeats. Both terms are bit fields of the row
/// index, so the map stays linear over GF(2).
pub fn amd_rotating_shared(a: &Attr, whole: &Node, shape: &[u64]) -> DResult<AddressMap> {
    phased_shared(a, whole, shape, true)
}

/// The column XOR (in elements) that row `r` (a power of two: one row bit) contributes.
fn phase_of_row_bit(r: u64, vec: u64, per: u64, max: u64, rotating: bool) -> u64 {
    let phase = (r / per) % max;
    let block = if rotating { (r / (per * max)) % max } else { 0 };
    vec * (phase ^ block)
}

fn phased_shared(a: &Attr, whole: &Node, shape: &[u64], rotating: bool) -> DResult<AddressMap> {
    let pos = |key: &str| -> DResult<u64> {
        let n = param(a, whole, key)?;
        match int(n)? {
            v if v >= 1 && (v as u64).is_power_of_two() => Ok(v as u64),
            v if v >= 1 => unsupported(n.at, format!("`{key} = {v}` is not a power of two: the swizzle is not a linear map")),
            _ => bad(n, format!("`{key}` must be positive")),
        }
    };
    let (vec, per, max) = (pos("vec")?, pos("perPhase")?, pos("maxPhase")?);
    let ord = order(param(a, whole, "order")?, shape.len())?;
    let rank = shape.len();
    let mut bases = Vec::new();
    let unit = |d: usize, v: u64| {
        let mut b = vec![0; rank];
        b[d] = v;
        b
    };
    let (col, cols) = (ord[0], shape[ord[0]]);
    let mut c = 1;
    while c < cols {
        bases.push(unit(col, c));
        c *= 2;
    }
    if rank >= 2 {
        let row_d = ord[1];
        let mut r = 1;
        while r < shape[row_d] {
            let mut b = unit(row_d, r);
            b[col] = phase_of_row_bit(r, vec, per, max, rotating) % cols;
            bases.push(b);
            r *= 2;
        }
    }
    for &d in ord.iter().skip(2) {
        let mut r = 1;
        while r < shape[d] {
            bases.push(unit(d, r));
            r *= 2;
        }
    }
    address_map(&bases, shape, whole.at)
}

/// `#ttg.nvmma_shared`: 8-row core matrices of `swizzlingByteWidth` bytes, swizzled in 16-byte
/// vectors, rows then column blocks after them; outer dimensions fold into rows.
pub fn nvmma_shared(a: &Attr, whole: &Node, shape: &[u64]) -> DResult<AddressMap> {
    let sw = int(param(a, whole, "swizzlingByteWidth")?)? as u64;
    let tr = match a.get("transposed") {
        Some(n) => boolean(n)?,
        None => false,
    };
    let eb = int(param(a, whole, "elementBitWidth")?)? as u64;
    if !matches!(sw, 0 | 32 | 64 | 128) || !matches!(eb, 8 | 16 | 32 | 64) {
        return bad(whole, "swizzlingByteWidth must be 0, 32, 64 or 128 and elementBitWidth 8 to 64");
    }
    let n = shape.len();
    if n < 2 || (tr && n != 2) {
        return unsupported(whole.at, "nvmma_shared is modelled on 2-D buffers (and stacks of them when not transposed)");
    }
    let rows_all: u64 = shape[..n - 1].iter().product();
    let (rows, cols) = if tr {
        (shape[1], shape[0])
    } else {
        (rows_all, shape[n - 1])
    };
    // Bases as (row, col) of the (possibly transposed) 2-D matrix.
    let mut bases: Vec<(u64, u64)> = Vec::new();
    let tile_cols = if sw == 0 { cols } else { 8 * sw.max(16) / eb };
    let tile_rows = if sw == 0 { 1 } else { 8 };
    if cols < tile_cols || rows < tile_rows {
        return unsupported(whole.at, format!("the buffer is smaller than one {tile_rows}x{tile_cols} swizzle tile"));
    }
    let mut c = 1;
    while c < tile_cols {
        bases.push((0, c));
        c *= 2;
    }
    if let Some(per) = 128u64.checked_div(sw) {
        let (vec, max) = (128 / eb, sw / 16);
        for r in [1, 2, 4] {
            bases.push((r, vec * ((r / per) % max)));
        }
    }
    let mut r = tile_rows;
    while r < rows {
        bases.push((r, 0));
        r *= 2;
    }
    let mut c = tile_cols;
    while c < cols {
        bases.push((0, c));
        c *= 2;
    }
    let flat: Vec<u64> = bases
        .iter()
        .map(|&(r, c)| if tr { c * rows + r } else { r * cols + c })
        .collect();
    match AddressMap::from_offset_bases(&flat) {
        Some(m) => Ok(m),
        None => unsupported(whole.at, "the shared layout is not a permutation of this buffer"),
    }
}

/// `#ttg.shared_linear`: explicit offset bases.
pub fn shared_linear(a: &Attr, whole: &Node, shape: &[u64]) -> DResult<AddressMap> {
    let bases = basis_list(param(a, whole, "offset")?, Some(shape.len()))?;
    address_map(&bases, shape, whole.at)
}

/// `#ttg.padded_shared<[I0:+P0, ...] {order = [...], shape = [...]}>` (or with explicit
/// `offset` bases): a linear component (offset bits -> element coordinates, inverted as for
/// `shared_linear`), then `P_k` padding elements inserted after every `I_k` elements of that
/// linear offset: element `e` with linear offset `o` lives at `o + sum_k (o / I_k) * P_k`.
/// Intervals and paddings are powers of two (Triton's verifier requires it).
pub fn padded_shared(a: &Attr, whole: &Node, shape: &[u64]) -> DResult<AddressMap> {
    let Some((_, raw)) = a.params.first() else {
        return bad(whole, "`#ttg.padded_shared` needs `[interval:+padding, ...]`");
    };
    let Val::Other(text) = &raw.val else {
        return bad(whole, "`#ttg.padded_shared` needs `[interval:+padding, ...]` before its dictionary");
    };
    // The raw text ends just before the closing `>` of the attribute.
    let base = whole.at.1.saturating_sub(1 + text.len());
    let (pads, rest) = padding_pairs(text, base)?;
    let dict_at = text.len() - rest.len();
    let wrapped = format!("#p<{rest}>");
    let shift = |p: Problem| Problem {
        at: (
            (p.at.0 + base + dict_at).saturating_sub(3),
            (p.at.1 + base + dict_at).saturating_sub(3),
        ),
        ..p
    };
    let node = super::attr::parse(&wrapped).map_err(|e| Problem {
        error: true,
        msg: format!("malformed padded_shared dictionary: {}", e.msg),
        at: ((e.at + base + dict_at).saturating_sub(3), (e.at + base + dict_at).saturating_sub(2)),
    })?;
    let Val::Attr(d) = &node.val else {
        return bad(whole, "expected `{...}` after the paddings");
    };
    let bases = padded_component(d, &node, shape).map_err(shift)?;
    let mut m = address_map(&bases, shape, whole.at)?;
    m.pads = pads;
    Ok(m)
}

/// The linear component of a padded layout, as offset bases per dimension.
fn padded_component(d: &Attr, node: &Node, shape: &[u64]) -> DResult<Vec<Vec<u64>>> {
    let rank = shape.len();
    if let Some(off) = d.get("offset") {
        if let Some(bl) = d.get("block")
            && basis_list(bl, Some(rank))?.iter().flatten().any(|&c| c != 0)
        {
            return unsupported(bl.at, "layouts spread over several blocks (CTAs) are not modelled");
        }
        return basis_list(off, Some(rank));
    }
    let ord = order(param(d, node, "order")?, rank)?;
    let sn = param(d, node, "shape")?;
    let want = pow2_list(sn)?;
    if want != shape {
        return unsupported(sn.at, format!("the padded layout is for a {want:?} tile, the buffer is {shape:?}"));
    }
    let mut bases = Vec::new();
    for &dim in &ord {
        let mut c = 1;
        while c < shape[dim] {
            let mut b = vec![0; rank];
            b[dim] = c;
            bases.push(b);
            c *= 2;
        }
    }
    Ok(bases)
}

/// `[I0:+P0, I1:+P1, ...]` at the start of `text` (`base`: its offset in the attribute
/// text): the pairs as (log2 interval, padding), and the text after the list (and an
/// optional comma).
fn padding_pairs(text: &str, base: usize) -> DResult<(Vec<(u32, u64)>, &str)> {
    let err = |i: usize, msg: &str| Problem {
        error: true,
        msg: msg.to_string(),
        at: (base + i, base + i + 1),
    };
    let s = text.as_bytes();
    let mut i = 0;
    let skip = |i: &mut usize| {
        while *i < s.len() && s[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    let num = |i: &mut usize| -> Option<u64> {
        let st = *i;
        while *i < s.len() && s[*i].is_ascii_digit() {
            *i += 1;
        }
        text[st..*i].parse().ok()
    };
    skip(&mut i);
    if s.get(i) != Some(&b'[') {
        return Err(err(i, "expected `[interval:+padding, ...]`"));
    }
    i += 1;
    let mut out = Vec::new();
    loop {
        skip(&mut i);
        let at = i;
        let iv = num(&mut i).ok_or_else(|| err(at, "expected an interval"))?;
        skip(&mut i);
        if !text[i..].starts_with(":+") {
            return Err(err(i, "expected `:+` between an interval and its padding"));
        }
        i += 2;
        let pat = i;
        let pad = num(&mut i).ok_or_else(|| err(pat, "expected a padding"))?;
        if !iv.is_power_of_two() || !pad.is_power_of_two() {
            return Err(Problem {
                error: true,
                msg: "intervals and paddings must be powers of two".into(),
                at: (base + at, base + i),
            });
        }
        out.push((iv.trailing_zeros(), pad));
        skip(&mut i);
        match s.get(i) {
            Some(b',') => i += 1,
            Some(b']') => {
                i += 1;
                break;
            }
            _ => return Err(err(i, "expected `,` or `]`")),
        }
    }
    skip(&mut i);
    if s.get(i) == Some(&b',') {
        i += 1;
        skip(&mut i);
    }
    Ok((out, &text[i..]))
}
