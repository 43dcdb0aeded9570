//! The static proof's pair tests in near-linear time: which accesses of one alias class are
//! paired, and the memos that let each pair cost O(instances of one side) or less.
//!
//! What it computes, with the same answers (and the same witnesses) as testing every pair
//! of accesses of a buffer against each other from scratch (`PairMemo::pairwise`):
//! - [`interval_candidates`]: the pairs of accesses of one alias class whose interval start
//!   sets meet, found through an index from each start to the accesses it reaches, in the
//!   order the pairwise loop visits them (so the first failing pair is the same);
//! - [`PairMemo::instances`]: one instance vector per distinct `(c, T, guards, enumerated
//!   loops)`, shared by every access with that form, so `T` is evaluated once per thread
//!   for all of them;
//! - [`collide`] and [`ShiftedProbe`]: per instance vector, modulus and meeting rule, one
//!   residue index (`(x mod g)` → the first instance and the first one distinct from it);
//!   a pair test probes it with the other side's instances, shifted by `cb - ca`; a test
//!   seen before (same two instance vectors, modulus and rule) is answered from a memo, and
//!   a shift already tested for one pair is not tested again.
//!
//! Invariants: a memo is keyed only by instance vectors the memo keeps alive (by address
//! and length), so two keys never name different contents. A shifted probe is used only
//! where it equals the unshifted test: modulus 0 or a power of two (i64 arithmetic wraps
//! consistently modulo it), or every value and constant below 2^61 in magnitude (no sum
//! overflows); otherwise the test is done directly.
//!
//! Complexity: O(sum over starts of (accesses reaching it)^2) candidate pairs (linear when
//! each interval holds a bounded number of accesses of a buffer, as after placement), each
//! O(1) when its two instance vectors were tested before, else O(instances); residue indexes
//! O(instances) once per distinct instance vector, modulus and rule.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::proof::{Access, Inst, Meet, conflicting};
use crate::ir::{Op, Value};

/// An instance as the rules compare them: (thread, enumerated-loop assignment).
type Id = (u32, u32);

/// What identifies an instance vector the memo keeps alive: its address and length.
type VecKey = (usize, usize);

/// The key of a shared instance vector: `c`, the `T` terms, the guards and the assignments
/// of the enumerated loops around the access.
type FormKey = (i64, Vec<(i64, Value)>, Vec<(Value, bool)>, Vec<Vec<(Value, i64)>>);

/// The memos of one proof. With `enabled` false every test is done from scratch (the
/// pairwise oracle the tests compare with).
pub(super) struct PairMemo {
    enabled: bool,
    live: RefCell<FxHashSet<VecKey>>,
    indexes: RefCell<FxHashMap<(VecKey, i64, Meet), Rc<ResidueIndex>>>,
    results: RefCell<FxHashMap<(VecKey, VecKey, i64, Meet), Option<Id>>>,
    forms: RefCell<FxHashMap<FormKey, Rc<Vec<Inst>>>>,
    restricted: RefCell<FxHashMap<(usize, Vec<(Value, i64)>), Rc<Vec<Inst>>>>,
    by_op: FxHashMap<Op, Vec<usize>>,
}

fn key_of(v: &[Inst]) -> VecKey {
    (v.as_ptr() as usize, v.len())
}

impl PairMemo {
    /// The memos for `accs`; `enabled` false: none (every test from scratch).
    pub fn new(accs: &[Access], enabled: bool) -> PairMemo {
        let mut by_op: FxHashMap<Op, Vec<usize>> = FxHashMap::default();
        for (i, a) in accs.iter().enumerate() {
            by_op.entry(a.op).or_default().push(i);
        }
        PairMemo {
            enabled,
            live: RefCell::default(),
            indexes: RefCell::default(),
            results: RefCell::default(),
            forms: RefCell::default(),
            restricted: RefCell::default(),
            by_op,
        }
    }

    /// The accesses of op `op`, in index order.
    pub fn of_op(&self, op: Op) -> &[usize] {
        self.by_op.get(&op).map_or(&[], Vec::as_slice)
    }

    fn keep(&self, v: Rc<Vec<Inst>>) -> Rc<Vec<Inst>> {
        if self.enabled && !v.is_empty() {
            self.live.borrow_mut().insert(key_of(&v));
        }
        v
    }

    fn is_live(&self, v: &[Inst]) -> bool {
        self.enabled && !v.is_empty() && self.live.borrow().contains(&key_of(v))
    }

    /// The instances of an access with form key `key` (`None`: not shareable), computed by
    /// `make` the first time.
    pub fn instances(
        &self,
        key: Option<FormKey>,
        make: impl FnOnce() -> Result<Vec<Inst>, String>,
    ) -> Result<Rc<Vec<Inst>>, String> {
        let Some(key) = key.filter(|_| self.enabled) else {
            return Ok(self.keep(Rc::new(make()?)));
        };
        if let Some(v) = self.forms.borrow().get(&key) {
            return Ok(v.clone());
        }
        let v = self.keep(Rc::new(make()?));
        self.forms.borrow_mut().insert(key, v.clone());
        Ok(v)
    }

    /// The instances of access `i` at the unrolled loops' values `env`, computed by `make`
    /// the first time.
    pub fn restricted(
        &self,
        i: usize,
        env: &[(Value, i64)],
        make: impl FnOnce() -> Vec<Inst>,
    ) -> Rc<Vec<Inst>> {
        if !self.enabled {
            return Rc::new(make());
        }
        let key = (i, env.to_vec());
        if let Some(v) = self.restricted.borrow().get(&key) {
            return v.clone();
        }
        let v = self.keep(Rc::new(make()));
        self.restricted.borrow_mut().insert(key, v.clone());
        v
    }

    /// The residue index of `a` for modulus `g` and `rule`: cached when `a` is live.
    fn index(&self, a: &[Inst], g: i64, rule: Meet) -> Rc<ResidueIndex> {
        if !self.is_live(a) {
            return Rc::new(ResidueIndex::new(a, g, rule));
        }
        let key = (key_of(a), g, rule);
        if let Some(ix) = self.indexes.borrow().get(&key) {
            return ix.clone();
        }
        let ix = Rc::new(ResidueIndex::new(a, g, rule));
        self.indexes.borrow_mut().insert(key, ix.clone());
        ix
    }
}

/// The form key of an access whose instances are `T + c` per thread and enumerated-loop
/// assignment (`None` for collective accesses, whose instances come from their tile).
pub(super) fn form_key(
    a: &Access,
    guards: Vec<(Value, bool)>,
    combos: Vec<Vec<(Value, i64)>>,
) -> Option<FormKey> {
    (a.collective.is_none() && a.tile.is_none())
        .then(|| (a.form.c, a.form.tpart.clone(), guards, combos))
}

/// Per residue of `x mod g` (`x` itself when `g == 0`): the first instance with it and the
/// first later one that `rule` counts as distinct from the first (enough to find, for any
/// instance of the other side, one of these that differs from it).
pub(super) struct ResidueIndex {
    g: i64,
    rule: Meet,
    first: FxHashMap<i64, (Id, Option<Id>)>,
    max_abs: u64,
}

/// Magnitudes below this never overflow i64 when three of them are added.
const SAFE: u64 = 1 << 61;

fn residue(x: i64, g: i64) -> i64 {
    if g == 0 { x } else { x.rem_euclid(g) }
}

fn max_abs(v: &[Inst]) -> u64 {
    v.iter().map(|i| i.x.unsigned_abs()).max().unwrap_or(0)
}

impl ResidueIndex {
    fn new(a: &[Inst], g: i64, rule: Meet) -> ResidueIndex {
        let mut first: FxHashMap<i64, (Id, Option<Id>)> = FxHashMap::default();
        first.reserve(a.len());
        for i in a {
            let id = (i.t, i.combo);
            let e = first.entry(residue(i.x, g)).or_insert((id, None));
            if e.1.is_none() && rule.distinct(e.0, id) {
                e.1 = Some(id);
            }
        }
        ResidueIndex {
            g,
            rule,
            first,
            max_abs: max_abs(a),
        }
    }

    /// Whether probing with `cb - ca` equals comparing `a + ca` with `b + cb` residue-wise.
    fn exact_shift(&self, b_max: u64, ca: i64, cb: i64) -> bool {
        let g = self.g;
        g == 0
            || g.unsigned_abs().is_power_of_two()
            || [self.max_abs, b_max, ca.unsigned_abs(), cb.unsigned_abs()]
                .iter()
                .all(|&m| m < SAFE)
    }

    /// The first instance of `b` (in order) whose value plus `shift` has the residue of an
    /// instance of the indexed side that the rule counts as distinct from it.
    fn probe(&self, b: &[Inst], shift: i64) -> Option<Id> {
        for i in b {
            let id = (i.t, i.combo);
            if let Some((x, other)) = self.first.get(&residue(i.x.wrapping_add(shift), self.g)) {
                if self.rule.distinct(*x, id) {
                    return Some((x.0, i.t));
                }
                if let Some(o) = other
                    && self.rule.distinct(*o, id)
                {
                    return Some((o.0, i.t));
                }
            }
        }
        None
    }
}

/// Two instances (threads) whose values agree modulo `g` (exactly when `g == 0`) and that
/// `rule` counts as different; O(|b|) when `a`'s index exists, O(1) for a repeated test.
pub(super) fn collide(
    memo: &PairMemo,
    a: &[Inst],
    b: &[Inst],
    g: i64,
    rule: Meet,
) -> Option<(u32, u32)> {
    if !memo.is_live(a) {
        return collide_direct(a, 0, b, 0, g, rule);
    }
    if !memo.is_live(b) {
        return memo.index(a, g, rule).probe(b, 0);
    }
    let key = (key_of(a), key_of(b), g, rule);
    if let Some(r) = memo.results.borrow().get(&key) {
        return *r;
    }
    let r = memo.index(a, g, rule).probe(b, 0);
    memo.results.borrow_mut().insert(key, r);
    r
}

/// The collision test of two fixed instance vectors under many pairs of constants `(ca,
/// cb)` added to every value of each side: one residue index of `a`, each distinct shift
/// `cb - ca` probed once.
pub(super) struct ShiftedProbe<'a> {
    a: &'a [Inst],
    b: &'a [Inst],
    g: i64,
    rule: Meet,
    index: Option<Rc<ResidueIndex>>,
    b_max: u64,
    /// Shifts probed without a collision.
    clear: FxHashSet<i64>,
}

impl<'a> ShiftedProbe<'a> {
    pub fn new(memo: &PairMemo, a: &'a [Inst], b: &'a [Inst], g: i64, rule: Meet) -> Self {
        let index = memo.enabled.then(|| memo.index(a, g, rule));
        ShiftedProbe {
            a,
            b,
            g,
            rule,
            b_max: if index.is_some() { max_abs(b) } else { 0 },
            index,
            clear: FxHashSet::default(),
        }
    }

    /// [`collide`] with `ca` added to every value of `a` and `cb` to every value of `b`.
    pub fn test(&mut self, ca: i64, cb: i64) -> Option<(u32, u32)> {
        if let Some(ix) = &self.index
            && ix.exact_shift(self.b_max, ca, cb)
        {
            let shift = cb.wrapping_sub(ca);
            if self.clear.contains(&shift) {
                return None;
            }
            let hit = ix.probe(self.b, shift);
            if hit.is_none() {
                self.clear.insert(shift);
            }
            return hit;
        }
        collide_direct(self.a, ca, self.b, cb, self.g, self.rule)
    }
}

/// The pair test from scratch: a residue map of `a + ca`, probed with `b + cb`.
pub(super) fn collide_direct(
    a: &[Inst],
    ca: i64,
    b: &[Inst],
    cb: i64,
    g: i64,
    rule: Meet,
) -> Option<(u32, u32)> {
    let shifted: Vec<Inst> = a
        .iter()
        .map(|i| Inst {
            x: i.x.wrapping_add(ca),
            ..*i
        })
        .collect();
    ResidueIndex::new(&shifted, g, rule).probe(b, cb)
}

/// The pairs `(i, j)` of accesses of `group` (indices into `accs`, ascending), `j` not
/// before `i`, that conflict and whose interval start sets meet, in the order of a loop
/// over `i` and then `j`.
pub(super) fn interval_candidates(
    group: &[usize],
    accs: &[Access],
    starts: &HashMap<Op, BTreeSet<u32>>,
) -> Vec<(usize, usize)> {
    let empty = BTreeSet::new();
    let of = |p: usize| starts.get(&accs[group[p]].op).unwrap_or(&empty);
    let mut reach: FxHashMap<u32, Vec<usize>> = FxHashMap::default();
    for p in 0..group.len() {
        for &s in of(p) {
            reach.entry(s).or_default().push(p);
        }
    }
    let mut out = Vec::new();
    for p in 0..group.len() {
        let sp = of(p);
        for &s in sp {
            let list = &reach[&s];
            let from = list.partition_point(|&q| q < p);
            for &q in &list[from..] {
                // Each pair once: under the least start the two sets share.
                let sq = of(q);
                if sp.iter().find(|x| sq.contains(x)) != Some(&s) {
                    continue;
                }
                let (i, j) = (group[p], group[q]);
                if conflicting(&accs[i], &accs[j]) {
                    out.push((p, q));
                }
            }
        }
    }
    out.sort_unstable();
    out.into_iter().map(|(p, q)| (group[p], group[q])).collect()
}

#[cfg(test)]
mod tests {
    //! The memoized pairing against the pairwise oracle: equal answers (the same proof
    //! summary, or the same first failing pair) on every example and file test, on their
    //! synchronized forms and on variants with barriers removed, plus the shifted probe
    //! against the direct test on random instance sets.
    use super::*;
    use crate::check::proof::prove_with;
    use crate::ir::Kernel;
    use crate::target::Target;

    /// The kernels of every example and file test, each also with its first barrier and
    /// with all barriers removed (racy variants).
    fn corpus() -> Vec<(String, Kernel)> {
        let root = env!("CARGO_MANIFEST_DIR");
        let mut files: Vec<std::path::PathBuf> = Vec::new();
        let mut dirs = vec![
            std::path::PathBuf::from(root).join("examples"),
            std::path::PathBuf::from(root).join("tests/filetests"),
        ];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "kir") {
                    files.push(p);
                }
            }
        }
        files.sort();
        let mut out = Vec::new();
        for f in files {
            let Ok(src) = std::fs::read_to_string(&f) else {
                continue;
            };
            let is_barrier = |l: &str| l.trim() == "barrier";
            let mut first = true;
            let one_less: String = src
                .lines()
                .filter(|l| !(is_barrier(l) && std::mem::replace(&mut first, false)))
                .map(|l| format!("{l}\n"))
                .collect();
            let none: String = src
                .lines()
                .filter(|l| !is_barrier(l))
                .map(|l| format!("{l}\n"))
                .collect();
            for (tag, text) in [("", &src), (" -1 barrier", &one_less), (" -barriers", &none)] {
                if let Ok(m) = crate::reader::parse(text) {
                    for k in m.kernels {
                        out.push((format!("{}{tag}", f.display()), k));
                    }
                }
            }
        }
        out
    }

    fn same_answer(name: &str, k: &Kernel, target: Option<Target>) -> bool {
        if k.threads() == 0 || k.threads() > 4096 {
            return false;
        }
        let new = prove_with(k, target, true);
        let old = prove_with(k, target, false);
        assert_eq!(new, old, "{name} ({:?})", target.map(|t| t.name));
        new.is_ok()
    }

    #[test]
    fn memoized_pairing_answers_as_the_pairwise_one() {
        let targets = [None, Some("sm_80"), Some("sm_90"), Some("gfx942")]
            .map(|t| t.map(|n| Target::from_name(n).expect("a known target")));
        let (mut proved, mut declined) = (0, 0);
        for (name, k) in corpus() {
            for t in targets {
                if same_answer(&name, &k, t) {
                    proved += 1;
                } else {
                    declined += 1;
                }
            }
        }
        // Both outcomes are exercised, so the comparison is not vacuous.
        assert!(proved > 100 && declined > 100, "{proved} proved, {declined} declined");
    }

    #[test]
    fn memoized_pairing_answers_as_the_pairwise_one_after_placement() {
        let mut proved = 0;
        for (name, k) in corpus() {
            if name.contains(" -") || k.threads() > 1024 {
                continue;
            }
            for t in ["sm_80", "gfx942"] {
                let target = Target::from_name(t).expect("a known target");
                let opts = crate::sync::PlaceOptions::default();
                let Ok(s) = crate::sync::driver::synchronize(&k, &target, &opts) else {
                    continue;
                };
                proved += usize::from(same_answer(&name, &s.kernel, Some(target)));
            }
        }
        assert!(proved > 20, "{proved} proved");
    }

    /// A small deterministic generator (xorshift), so failures reproduce.
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn shifted_probe_equals_the_direct_test() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let rules = [
            Meet::OTHER_THREAD,
            Meet {
                same_thread: true,
                self_pair: true,
            },
            Meet {
                same_thread: true,
                self_pair: false,
            },
        ];
        let (mut hits, mut misses) = (0, 0);
        for round in 0..3000 {
            let mut set = |n: u64, span: i64, big: bool| -> Vec<Inst> {
                (0..1 + rng(&mut seed) % n)
                    .map(|_| Inst {
                        t: (rng(&mut seed) % 8) as u32,
                        combo: (rng(&mut seed) % 2) as u32,
                        x: if big {
                            rng(&mut seed) as i64
                        } else {
                            (rng(&mut seed) % span as u64) as i64 - span / 2
                        },
                    })
                    .collect()
            };
            let big = round % 10 == 0;
            let (a, b) = (Rc::new(set(12, 64, big)), Rc::new(set(12, 64, big)));
            let memo = PairMemo::new(&[], true);
            let (a, b) = (memo.keep(a), memo.keep(b));
            let g = [0, 1, 2, 3, 4, 6, 8, 64, 1 << 32][rng(&mut seed) as usize % 9];
            let rule = rules[round % 3];
            let mut probe = ShiftedProbe::new(&memo, &a, &b, g, rule);
            for _ in 0..8 {
                let ca = (rng(&mut seed) % 40) as i64 - 20;
                let cb = if big {
                    rng(&mut seed) as i64
                } else {
                    (rng(&mut seed) % 40) as i64 - 20
                };
                let want = collide_direct(&a, ca, &b, cb, g, rule);
                assert_eq!(probe.test(ca, cb), want, "{a:?} {ca} {b:?} {cb} g={g}");
                if want.is_some() {
                    hits += 1;
                } else {
                    misses += 1;
                }
            }
            assert_eq!(
                collide(&memo, &a, &b, g, rule),
                collide_direct(&a, 0, &b, 0, g, rule)
            );
        }
        assert!(hits > 1000 && misses > 1000, "{hits} hits, {misses} misses");
    }
}
