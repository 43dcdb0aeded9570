//! The seeded randomness the IR's execution semantics and the tools around it share:
//! `splitmix64` (docs/ir.md, "Global memory", defines input data with it) and one PRNG,
//! [`Rng`], over it. The interpreter draws its schedules from it, the random kernel generator
//! (`crate::gen`) its kernels, and the property tests their cases.
//!
//! [`Rng`] is splitmix64 applied to a Weyl sequence `seed + n · stride` (Steele, Lea and
//! Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014). [`Rng::new`] uses
//! the golden-ratio stride the paper recommends; [`Rng::counter`] steps by 1, the stream the
//! interpreter's schedules have always used, so a schedule seed recorded in an issue or a test
//! replays the same interleaving. Every seed is valid; the streams are the same on every
//! platform. Complexity: O(1) per draw.

/// The golden-ratio increment of splitmix64.
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// `splitmix64` as docs/ir.md gives it: one step of the generator from state `z`, mixed.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The one seeded PRNG of the interpreter, the generators and the property tests.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
    stride: u64,
}

impl Rng {
    /// A generator whose stream is fixed by `seed` (golden-ratio stride).
    pub fn new(seed: u64) -> Rng {
        Rng {
            state: seed,
            stride: GOLDEN_GAMMA,
        }
    }
    /// A generator stepping its state by 1: the `n`-th draw is `splitmix64(seed + n)`. The
    /// interpreter's schedule stream.
    pub fn counter(seed: u64) -> Rng {
        Rng {
            state: seed,
            stride: 1,
        }
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(self.stride);
        splitmix64(self.state)
    }
    /// Uniform in `0..n` (up to a bias of n / 2^64); 0 when `n` is 0 (a draw is still made).
    pub fn below(&mut self, n: u64) -> u64 {
        let x = self.next_u64();
        if n == 0 { 0 } else { x % n }
    }
    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
    /// Uniform in `0..len`; 0 when `len` is 0.
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
    /// A uniformly chosen element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference_vector() {
        // The reference implementation's first output for seed 0.
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn the_two_strides_give_their_documented_streams() {
        let mut g = Rng::new(7);
        let mut c = Rng::counter(7);
        for n in 1..=3u64 {
            assert_eq!(g.next_u64(), splitmix64(7u64.wrapping_add(n.wrapping_mul(GOLDEN_GAMMA))));
            assert_eq!(c.next_u64(), splitmix64(7 + n));
        }
    }
}
