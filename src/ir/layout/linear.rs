//! Linear layouts over GF(2): who owns which element of a power-of-two tile.
//!
//! A distributed layout maps the bits of (register, lane, warp) to the bits of an element's
//! row-major index within the tile: each input bit has a *basis* (the element index it
//! selects on its own), and any input maps to the XOR of the bases of its set bits (Triton 3.x
//! "linear layouts"; Zhou et al., "Linear Layouts: Robust Code Generation of Efficient Tensor
//! Computation Using F2", 2025). Since every dimension is a power of two, XOR of coordinates
//! is XOR of row-major indices, so a basis is one `u64`.
//!
//! **Ownership.** Bases are scanned in the order registers, lanes, warps; a basis in the span
//! of the earlier ones is *free* (a duplicate register, or a lane/warp that holds copies of
//! another thread's elements: broadcasting). The non-free bases form a basis of the tile
//! (checked: the layout must be onto), so each element has exactly one input with every free
//! bit clear; its thread is the element's *writer* (stores, copies: Triton masks the
//! duplicates of a broadcast layout), computed by the linear map [`OwnerMap`] (Gaussian
//! elimination, O(bits²) once, O(bits) per element). Every thread holding the element reads it;
//! the holders are the writer XOR the span of the free inputs' thread shifts.
//! Invariant: `elem_bits = log2(tile elements) <= 40`. Complexity: construction O(bits²);
//! [`Distributed::holders`] enumerates all inputs, O(2^(in bits)) — the interpreter's and the
//! tests' oracle only.

/// A distributed layout on one tile.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Distributed {
    /// The tile's shape (each a power of two).
    pub shape: Vec<u64>,
    /// Bases of the register, lane and warp bits (row-major element indices).
    pub reg: Vec<u64>,
    pub lane: Vec<u64>,
    pub warp: Vec<u64>,
}

/// The linear map element index -> writer thread of a [`Distributed`] layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerMap {
    /// Thread id contributed by each element index bit (XOR them).
    pub rows: Vec<u32>,
    /// Thread-id shifts between the holders of one element (a basis of their span; empty
    /// when no element is held by two threads).
    pub shifts: Vec<u32>,
}

impl OwnerMap {
    /// The thread that writes element `e`.
    pub fn writer(&self, e: u64) -> u32 {
        let mut t = 0;
        for (j, &r) in self.rows.iter().enumerate() {
            if e >> j & 1 == 1 {
                t ^= r;
            }
        }
        t
    }
    /// Whether every holder of an element lies in the writer's warp (`warp` threads a warp).
    pub fn holders_in_one_warp(&self, warp: u32) -> bool {
        self.shifts.iter().all(|&s| s < warp.max(1))
    }
}

impl Distributed {
    /// log2 of the number of elements.
    pub fn elem_bits(&self) -> u32 {
        self.shape.iter().map(|d| d.trailing_zeros()).sum()
    }
    /// Threads per warp and warps the layout spreads over.
    pub fn lanes(&self) -> u32 {
        1 << self.lane.len()
    }
    pub fn warps(&self) -> u32 {
        1 << self.warp.len()
    }
    pub fn registers(&self) -> u64 {
        1 << self.reg.len()
    }

    /// The element held in register `r` of thread `t` (`t = warp * lanes + lane`).
    pub fn element(&self, r: u64, t: u32) -> u64 {
        let mut e = 0;
        for (i, &b) in self.reg.iter().enumerate() {
            if r >> i & 1 == 1 {
                e ^= b;
            }
        }
        for (i, &b) in self.lane.iter().chain(&self.warp).enumerate() {
            if t >> i & 1 == 1 {
                e ^= b;
            }
        }
        e
    }

    /// The inputs' bases in scan order, each with the thread id bits it contributes.
    fn tagged(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let r = self.reg.iter().map(|&b| (b, 0));
        let lw = self
            .lane
            .iter()
            .chain(&self.warp)
            .enumerate()
            .map(|(i, &b)| (b, 1u32 << i));
        r.chain(lw)
    }

    /// The writer map, or `None` when the layout does not reach every element of the tile.
    pub fn owner_map(&self) -> Option<OwnerMap> {
        let n = self.elem_bits() as usize;
        // Echelon form: pivot bit -> (vector, thread tag).
        let mut piv: Vec<Option<(u64, u32)>> = vec![None; n];
        let mut shifts = Vec::new();
        for (b, tag) in self.tagged() {
            let (mut v, mut t) = (b, tag);
            while v != 0 {
                let hb = 63 - v.leading_zeros() as usize;
                if hb >= n {
                    return None;
                }
                match piv[hb] {
                    Some((pv, pt)) => {
                        v ^= pv;
                        t ^= pt;
                    }
                    None => break,
                }
            }
            if v == 0 {
                // Free: this input adds thread shift `t` between holders of one element.
                if t != 0 {
                    add_to_span(&mut shifts, t);
                }
            } else {
                let hb = 63 - v.leading_zeros() as usize;
                piv[hb] = Some((v, t));
            }
        }
        // Back-substitute to express each unit vector.
        let mut rows = vec![0u32; n];
        for (j, row) in rows.iter_mut().enumerate() {
            let (mut v, mut t) = (1u64 << j, 0u32);
            while v != 0 {
                let hb = 63 - v.leading_zeros() as usize;
                let (pv, pt) = piv[hb]?;
                v ^= pv;
                t ^= pt;
            }
            *row = t;
        }
        Some(OwnerMap { rows, shifts })
    }

    /// Every thread holding each element, by enumerating all inputs (an oracle: exponential
    /// in the input bits). `out[e]` lists the threads in increasing order.
    pub fn holders(&self) -> Vec<Vec<u32>> {
        let mut out = vec![Vec::new(); 1usize << self.elem_bits()];
        for t in 0..self.lanes() * self.warps() {
            for r in 0..self.registers() {
                let e = self.element(r, t) as usize;
                if let Some(v) = out.get_mut(e)
                    && v.last() != Some(&t)
                    && !v.contains(&t)
                {
                    v.push(t);
                }
            }
        }
        for v in &mut out {
            v.sort_unstable();
        }
        out
    }
}

/// Adds `x` to a set of GF(2) vectors kept in echelon form (distinct leading bits).
fn add_to_span(basis: &mut Vec<u32>, mut x: u32) {
    for &b in basis.iter() {
        if x ^ b < x {
            x ^= b;
        }
    }
    if x != 0 {
        basis.push(x);
        basis.sort_unstable_by(|a, b| b.cmp(a));
    }
}

/// An address map of a shared layout: element index -> offset within the buffer. Its linear
/// part is a bijection on `[0, 2^bits)` given by the offset bits' bases (offset -> element),
/// inverted; padded layouts then insert padding into that linear offset (so the buffer spans
/// [`AddressMap::span`] elements, more than it holds).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AddressMap {
    /// Element bits -> offset contributed.
    pub rows: Vec<u64>,
    /// Padding: `(k, p)` inserts `p` elements after every `2^k` elements of the linear offset
    /// (`#ttg.padded_shared`); pairs compose additively. Empty for the other layouts.
    pub pads: Vec<(u32, u64)>,
}

impl AddressMap {
    /// The map from the bases of the offset bits (`offset_bases[i]` = element index of offset
    /// `1 << i`); `None` when they are not a basis of the tile.
    pub fn from_offset_bases(offset_bases: &[u64]) -> Option<AddressMap> {
        let d = Distributed {
            shape: vec![1u64 << offset_bases.len()],
            reg: Vec::new(),
            lane: offset_bases.to_vec(),
            warp: Vec::new(),
        };
        if offset_bases.len() > 32 {
            return None;
        }
        let m = d.owner_map()?;
        if !m.shifts.is_empty() {
            return None;
        }
        Some(AddressMap {
            rows: m.rows.iter().map(|&r| r as u64).collect(),
            pads: Vec::new(),
        })
    }
    /// The offset (in elements) of element `e`, padding included.
    pub fn offset(&self, e: u64) -> u64 {
        self.pad(self.linear_offset(e))
    }
    /// The offset of element `e` before padding (the linear part alone).
    pub fn linear_offset(&self, e: u64) -> u64 {
        let mut o = 0;
        for (j, &r) in self.rows.iter().enumerate() {
            if e >> j & 1 == 1 {
                o ^= r;
            }
        }
        o
    }
    /// A linear offset with the padding inserted before it.
    fn pad(&self, o: u64) -> u64 {
        o + self.pads.iter().map(|&(k, p)| (o >> k) * p).sum::<u64>()
    }
    /// Elements the buffer spans: one past the offset of its last linear offset (the element
    /// count when unpadded).
    pub fn span(&self) -> u64 {
        let n = 1u64 << self.rows.len();
        self.pad(n - 1) + 1
    }
    pub fn is_identity(&self) -> bool {
        self.pads.is_empty() && self.rows.iter().enumerate().all(|(j, &r)| r == 1 << j)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(shape: &[u64], reg: &[u64], lane: &[u64], warp: &[u64]) -> Distributed {
        Distributed {
            shape: shape.to_vec(),
            reg: reg.to_vec(),
            lane: lane.to_vec(),
            warp: warp.to_vec(),
        }
    }

    #[test]
    fn a_bijective_layout_has_one_holder_per_element_and_matches_the_oracle() {
        // 8 elements, 2 registers, 2 lanes, 2 warps, scrambled bases.
        let d = l(&[8], &[2], &[1 ^ 4], &[4]);
        let m = d.owner_map().unwrap();
        assert!(m.shifts.is_empty());
        for (e, hs) in d.holders().iter().enumerate() {
            assert_eq!(hs, &vec![m.writer(e as u64)], "element {e}");
        }
    }

    #[test]
    fn broadcasting_lanes_give_several_holders_and_the_lowest_writes() {
        // Lane bit 1 is zero: lanes 0/2 and 1/3 hold the same elements.
        let d = l(&[4], &[2], &[1, 0], &[]);
        let m = d.owner_map().unwrap();
        assert_eq!(m.shifts, vec![2]);
        assert!(m.holders_in_one_warp(32));
        assert!(!m.holders_in_one_warp(2));
        for (e, hs) in d.holders().iter().enumerate() {
            assert_eq!(hs[0], m.writer(e as u64));
            assert_eq!(hs.len(), 2);
        }
    }

    #[test]
    fn a_layout_that_misses_elements_has_no_owner_map() {
        assert!(l(&[8], &[1], &[1], &[2]).owner_map().is_none());
        assert!(l(&[4], &[1], &[2], &[8]).owner_map().is_none());
    }

    #[test]
    fn an_address_map_inverts_its_offset_bases() {
        // offset 1 -> element 1, offset 2 -> element 2 ^ 1 (a swizzle).
        let a = AddressMap::from_offset_bases(&[1, 3]).unwrap();
        for off in 0..4u64 {
            let e = (off & 1) ^ if off & 2 != 0 { 3 } else { 0 };
            assert_eq!(a.offset(e), off);
        }
        assert!(!a.is_identity());
        assert!(AddressMap::from_offset_bases(&[1, 1]).is_none());
    }
}
