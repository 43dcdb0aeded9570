//! Residue classes of an instance vector, for the static proof's pair tests
//! (`check/proof_pairs.rs`): whether two instance vectors, one shifted by a constant, hold two
//! instances with one address (modulo `g`) that a meeting rule counts as distinct, decided on
//! the classes instead of the instances.
//!
//! What it computes: [`Classes`] groups the instances of a vector by `x mod g` (`x` itself
//! when `g == 0`) and keeps, per class, its first instance and the first later one the rule
//! counts as distinct from it; [`Classes::meets`] answers the shifted test by walking the
//! smaller of the two class lists and looking each class up in the other; [`ShiftSet`] is
//! every shift at which two class lists meet, for pairs probed at many shifts.
//!
//! Invariant (why two instances per class are enough): every [`Meet`] rule's "not distinct"
//! is symmetric and transitive (equal threads, or equal instances, or nothing; a thread of
//! `proof_tiles::ANY` is distinct from everything). So if some instance `x` of one class and
//! `y` of the other are distinct, some pair among the kept instances `{x1, x2} x {y1, y2}` is
//! distinct: otherwise `x2` (were it kept) would be not-distinct from `x1` through `y1`, so
//! every instance of each class is not-distinct from its first, and so from every instance of
//! the other class. The answers are existence only; the callers name a witness by the direct
//! test (`proof_pairs::collide_direct`), which fixes which pair is reported.
//!
//! Complexity: O(instances) to build (one hash or array step each), O(min(classes of the two
//! sides)) per shifted test, O(classes x classes) for a [`ShiftSet`]. Classes are looked up
//! in a dense array when their residues span at most [`DENSE_SPAN`] (and not much more than
//! their count), else in a hash map.

use rustc_hash::{FxHashMap, FxHashSet};

use super::proof::{Inst, Meet};

/// An instance as the rules compare them: (thread, enumerated-loop assignment).
type Id = (u32, u32);

/// Largest residue span looked up through a dense array.
const DENSE_SPAN: i128 = 1 << 20;

/// `x mod g` in `[0, g)`, or `x` when `g == 0`.
pub(super) fn residue(x: i64, g: i64) -> i64 {
    if g == 0 { x } else { x.rem_euclid(g) }
}

/// The residue of `r + s` (`r` a residue, `s` any shift): exact for every modulus (in
/// i128); for `g == 0` the i64 sum wraps as the instance values' sums do.
fn plus(r: i64, s: i64, g: i64) -> i64 {
    if g == 0 {
        r.wrapping_add(s)
    } else {
        (r as i128 + s as i128).rem_euclid(g as i128) as i64
    }
}

/// The residue of `r - s`, as [`plus`].
fn minus(r: i64, s: i64, g: i64) -> i64 {
    if g == 0 {
        r.wrapping_sub(s)
    } else {
        (r as i128 - s as i128).rem_euclid(g as i128) as i64
    }
}

/// One class: its residue, first instance and the first later one distinct from it.
#[derive(Copy, Clone, Debug)]
struct Class {
    r: i64,
    first: Id,
    other: Option<Id>,
}

/// Where a residue's class sits in [`Classes::list`].
enum Lookup {
    /// `slots[r - base]`, `u32::MAX` for none.
    Dense { base: i64, slots: Vec<u32> },
    Hashed(FxHashMap<i64, u32>),
}

/// The residue classes of one instance vector under a modulus and a rule.
pub(super) struct Classes {
    g: i64,
    rule: Meet,
    list: Vec<Class>,
    lookup: Lookup,
}

impl Classes {
    /// The classes of `v` modulo `g` under `rule`.
    pub fn new(v: &[Inst], g: i64, rule: Meet) -> Classes {
        let (lo, hi) = v.iter().fold((i64::MAX, i64::MIN), |(lo, hi), i| {
            let r = residue(i.x, g);
            (lo.min(r), hi.max(r))
        });
        let span = hi as i128 - lo as i128 + 1;
        let mut lookup = if !v.is_empty() && span <= DENSE_SPAN && span <= 64 * v.len() as i128 + 4096
        {
            Lookup::Dense {
                base: lo,
                slots: vec![u32::MAX; span as usize],
            }
        } else {
            Lookup::Hashed(FxHashMap::default())
        };
        let mut list: Vec<Class> = Vec::new();
        for i in v {
            let (r, id) = (residue(i.x, g), (i.t, i.combo));
            let slot = match &mut lookup {
                Lookup::Dense { base, slots } => &mut slots[(r - *base) as usize],
                Lookup::Hashed(m) => m.entry(r).or_insert(u32::MAX),
            };
            if *slot == u32::MAX {
                *slot = list.len() as u32;
                list.push(Class {
                    r,
                    first: id,
                    other: None,
                });
                continue;
            }
            let c = &mut list[*slot as usize];
            if c.other.is_none() && rule.distinct(c.first, id) {
                c.other = Some(id);
            }
        }
        Classes {
            g,
            rule,
            list,
            lookup,
        }
    }

    /// How many classes.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    fn get(&self, r: i64) -> Option<&Class> {
        let i = match &self.lookup {
            Lookup::Dense { base, slots } => {
                let d = (r as i128) - (*base as i128);
                if d < 0 || d >= slots.len() as i128 {
                    return None;
                }
                slots[d as usize]
            }
            Lookup::Hashed(m) => *m.get(&r)?,
        };
        (i != u32::MAX).then(|| &self.list[i as usize])
    }

    /// Whether two classes hold a distinct pair (see the module's invariant).
    fn pair(&self, a: &Class, b: &Class) -> bool {
        let d = |x: Id, y: Id| self.rule.distinct(x, y);
        d(a.first, b.first)
            || a.other.is_some_and(|x| d(x, b.first))
            || b.other
                .is_some_and(|y| d(a.first, y) || a.other.is_some_and(|x| d(x, y)))
    }

    /// Whether an instance of `b` plus `shift` meets an instance of `self` (same modulus and
    /// rule): some `x_a = x_b + shift (mod g)` with the two distinct.
    pub fn meets(&self, b: &Classes, shift: i64) -> bool {
        let g = self.g;
        if b.len() <= self.len() {
            b.list.iter().any(|cb| {
                self.get(plus(cb.r, shift, g))
                    .is_some_and(|ca| self.pair(ca, cb))
            })
        } else {
            self.list.iter().any(|ca| {
                b.get(minus(ca.r, shift, g))
                    .is_some_and(|cb| self.pair(ca, cb))
            })
        }
    }

    /// Whether an instance of raw vector `b` plus `shift` meets an instance of `self`.
    pub fn meets_raw(&self, b: &[Inst], shift: i64) -> bool {
        b.iter().any(|i| {
            let id = (i.t, i.combo);
            self.get(residue(i.x.wrapping_add(shift), self.g))
                .is_some_and(|c| {
                    self.rule.distinct(c.first, id)
                        || c.other.is_some_and(|o| self.rule.distinct(o, id))
                })
        })
    }

    /// Every shift (as a residue) at which `b` meets `self`.
    pub fn shift_set(&self, b: &Classes) -> ShiftSet {
        let g = self.g;
        let span = |x: &Classes| {
            x.list.iter().fold((i64::MAX, i64::MIN), |(lo, hi), c| {
                (lo.min(c.r), hi.max(c.r))
            })
        };
        let ((alo, ahi), (blo, bhi)) = (span(self), span(b));
        // Shifts `x_a - x_b`: their residues, or (g = 0) that range, when it fits an array.
        let (base, len) = if g != 0 {
            (0i128, g as i128)
        } else {
            let base = alo as i128 - bhi as i128;
            (base, ahi as i128 - blo as i128 - base + 1)
        };
        let fits = base >= i64::MIN as i128 && base + len <= i64::MAX as i128;
        let mut set = if len > 0 && len <= DENSE_SPAN * 4 && g >= 0 && fits {
            ShiftSet::Dense {
                base: base as i64,
                bits: vec![0u64; (len as usize).div_ceil(64)],
            }
        } else {
            ShiftSet::Hashed(FxHashSet::default())
        };
        for ca in &self.list {
            for cb in &b.list {
                if self.pair(ca, cb) {
                    set.insert(minus(ca.r, cb.r, g));
                }
            }
        }
        set
    }
}

/// A set of shifts (residues modulo the classes' `g`).
pub(super) enum ShiftSet {
    Dense { base: i64, bits: Vec<u64> },
    Hashed(FxHashSet<i64>),
}

impl ShiftSet {
    fn insert(&mut self, s: i64) {
        match self {
            ShiftSet::Dense { base, bits } => {
                let d = (s as i128 - *base as i128) as usize;
                bits[d / 64] |= 1 << (d % 64);
            }
            ShiftSet::Hashed(h) => {
                h.insert(s);
            }
        }
    }

    /// Whether residue `s` is in the set.
    pub fn contains(&self, s: i64) -> bool {
        match self {
            ShiftSet::Dense { base, bits } => {
                let d = s as i128 - *base as i128;
                d >= 0
                    && (d as usize) < bits.len() * 64
                    && bits[d as usize / 64] & (1 << (d as usize % 64)) != 0
            }
            ShiftSet::Hashed(h) => h.contains(&s),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The class tests against the instance-by-instance definition on random vectors.
    use super::*;

    /// A small deterministic generator (xorshift), so failures reproduce.
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// Whether some `x_a = x_b + shift (mod g)` with the two distinct, instance by instance
    /// (over the integers; i64 wrapping for `g == 0`).
    fn brute(a: &[Inst], b: &[Inst], g: i64, rule: Meet, shift: i64) -> bool {
        let same = |x: i64, y: i64| {
            if g == 0 {
                x == y.wrapping_add(shift)
            } else {
                (x as i128 - y as i128 - shift as i128).rem_euclid(g as i128) == 0
            }
        };
        a.iter().any(|x| {
            b.iter()
                .any(|y| same(x.x, y.x) && rule.distinct((x.t, x.combo), (y.t, y.combo)))
        })
    }

    #[test]
    fn classes_meet_as_their_instances_do() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let rules = Meet::ALL;
        let any = super::super::proof_tiles::ANY;
        let (mut hits, mut misses) = (0, 0);
        for round in 0..2000 {
            let big = round % 7 == 0;
            let mut set = |n: u64| -> Vec<Inst> {
                (0..rng(&mut seed) % n)
                    .map(|_| Inst {
                        t: match rng(&mut seed) % 9 {
                            8 => any,
                            t => t as u32 % 4,
                        },
                        combo: (rng(&mut seed) % 2) as u32,
                        x: if big {
                            rng(&mut seed) as i64
                        } else {
                            (rng(&mut seed) % 48) as i64 - 24
                        },
                    })
                    .collect()
            };
            // Sides of different sizes, so both walking orders run.
            let (a, b) = (set(24), set(6 + 18 * (round % 2) as u64));
            let g = [0, 1, 2, 3, 5, 8, 64, 1 << 32][rng(&mut seed) as usize % 8];
            let rule = rules[round % 3];
            let (ca, cb) = (Classes::new(&a, g, rule), Classes::new(&b, g, rule));
            let set_ab = ca.shift_set(&cb);
            for _ in 0..12 {
                let shift = if big {
                    rng(&mut seed) as i64
                } else {
                    (rng(&mut seed) % 64) as i64 - 32
                };
                let want = brute(&a, &b, g, rule, shift);
                assert_eq!(ca.meets(&cb, shift), want, "{a:?} {b:?} g={g} s={shift}");
                // A raw probe adds in i64 (as the instance values do): exact where the
                // callers use it, modulus 0 or a power of two, or magnitudes below 2^59.
                let pow2 = g == 0 || (g as u64).is_power_of_two();
                if pow2 || !big {
                    assert_eq!(ca.meets_raw(&b, shift), want, "{a:?} {b:?} g={g} s={shift}");
                }
                assert_eq!(set_ab.contains(residue(shift, g)), want, "{a:?} {b:?} g={g}");
                if want {
                    hits += 1;
                } else {
                    misses += 1;
                }
            }
            // Every shift at which they meet is in the set (exact differences).
            for x in &a {
                for y in &b {
                    let s = x.x.wrapping_sub(y.x);
                    let want = brute(&a, &b, g, rule, s);
                    assert_eq!(set_ab.contains(residue(s, g)), want, "{a:?} {b:?} g={g}");
                }
            }
        }
        assert!(hits > 1000 && misses > 1000, "{hits} hits, {misses} misses");
    }
}
