//! The static proof's pair tests in near-linear time: which accesses of one alias class are
//! paired, and the memos that let each pair cost O(instances of one side) or less.
//!
//! What it computes, with the same answers (and the same witnesses) as testing every pair
//! of accesses of a buffer against each other from scratch (`PairMemo::pairwise`):
//! - [`interval_candidates`]: the pairs of accesses of one alias class whose interval start
//!   sets meet, found through an index from each start to the accesses it reaches, in the
//!   order the pairwise loop visits them (so the first failing pair is the same);
//! - [`PairMemo::instances`]: one instance vector per distinct `(T, guards, enumerated
//!   loops)` (a *family*: the unrolled copies of an access differ only in `c`), evaluated
//!   once per thread and enumerated iteration, and shared, with `c` added, by every access
//!   of the family (one shape, so their pair tests share memos);
//! - [`collides`] and [`ShiftedProbe`]: per shape, modulus and meeting rule, its residue
//!   classes (`check/proof_classes.rs`: `(x mod g)` → the first instance and the first one
//!   distinct from it); a pair test looks the smaller side's classes up in the other's,
//!   shifted by `cb - ca`; a test seen before (same two shapes, modulus, rule and shift) is
//!   answered from a memo, and a pair of shapes probed at many shifts gets the set of every
//!   shift at which they meet. These say *whether* a pair meets; [`collide`] then names the
//!   witness by the direct test, only for a pair that fails the proof.
//!
//! Invariants: a memo is keyed only by instance vectors the memo keeps alive (by address
//! and length), so two keys never name different contents. A shifted probe is used only
//! where it equals the unshifted test: modulus 0 or a power of two (i64 arithmetic wraps
//! consistently modulo it), or every value and constant below 2^61 in magnitude (no sum
//! overflows); otherwise the test is done directly.
//!
//! Complexity: O(sum over starts of (accesses reaching it)^2) candidate pairs (linear when
//! each interval holds a bounded number of accesses of a buffer, as after placement), each
//! O(1) when its two shapes were tested at its shift before, else O(classes of the smaller
//! side) (or O(classes x classes) once per pair of shapes, for the shift set); residue
//! classes O(instances) once per shape, modulus and rule; `T` evaluated O(threads x
//! enumerated iterations) once per family.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use rustc_hash::FxHashMap;

use super::proof::{Access, Inst, IvFn, Meet, conflicting};
use crate::ir::Kernel;
use crate::ir::induction::Inductions;
use super::proof_classes::{Classes, ShiftSet, residue};
use crate::ir::{Op, Value};

/// An instance as the rules compare them: (thread, enumerated-loop assignment).
type Id = (u32, u32);

/// What identifies an instance vector the memo keeps alive: its address and length.
type VecKey = (usize, usize);

/// The key of a family of instance vectors (one per constant `c`): the `T` terms, the guards
/// and the assignments of the enumerated loops around the access.
type FormKey = (Vec<(i64, Value)>, Vec<(Value, bool)>, Vec<Vec<(Value, i64)>>);

/// A live instance vector as the memo sees it: the representative of its shape (same
/// threads and assignments in the same order, values differing by one constant) and that
/// constant (`x = representative's x + off`, wrapping).
#[derive(Copy, Clone)]
struct Canon {
    rep: u32,
    off: i64,
}

/// The instances a pair test compares on one side: a live vector through its shape's
/// representative, or a vector the memo does not hold.
#[derive(Copy, Clone)]
enum Side<'a> {
    Canon(Canon),
    Raw(&'a [Inst]),
}

/// A memo table of the proof (one thread: `RefCell`).
type Memo<K, V> = RefCell<FxHashMap<K, V>>;

/// A shared instance vector.
type Shared = Rc<Vec<Inst>>;

/// Two representatives, a modulus and a rule.
type RepPair = (u32, u32, i64, Meet);

/// The memos of one proof. With `enabled` false every test is done from scratch (the
/// pairwise oracle the tests compare with).
pub(super) struct PairMemo {
    enabled: bool,
    live: RefCell<FxHashMap<VecKey, Canon>>,
    /// Every live vector, so that no two live keys ever name different contents.
    held: RefCell<Vec<Rc<Vec<Inst>>>>,
    /// Per shape: its representative vector and the largest magnitude of its values.
    reps: RefCell<Vec<(Rc<Vec<Inst>>, u64)>>,
    shapes: Memo<Vec<(u32, u32, i64)>, u32>,
    /// Per (representative, modulus, rule): its residue classes.
    indexes: RefCell<FxHashMap<(u32, i64, Meet), Rc<Classes>>>,
    /// Per (representatives, modulus, rule, shift of the second against the first): whether
    /// they meet.
    results: Memo<(RepPair, i64), bool>,
    forms: RefCell<FxHashMap<FormKey, Rc<Vec<Inst>>>>,
    restricted: Memo<(usize, Vec<(Value, i64)>), Shared>,
    /// Per (representatives, modulus, rule): how many shifts were probed, and once that
    /// reaches the larger side's class count, the set of every shift at which they meet.
    probes: Memo<RepPair, usize>,
    tables: Memo<RepPair, Rc<ShiftSet>>,
    /// Live vectors with a constant added ([`PairMemo::shifted_copy`]).
    shifted: Memo<(VecKey, i64), Shared>,
    by_op: FxHashMap<Op, Vec<usize>>,
    /// Per (value, induction variable, its range): the value as a function of it
    /// ([`super::proof::iv_fn`]), asked once per free term of every loop-carried probe.
    iv_fns: Memo<(Value, Value, (i128, i128)), Option<IvFn>>,
    /// Per (value, induction variable, iteration value): its value there
    /// ([`super::proof::eval_iv`]).
    iv_vals: Memo<(Value, Value, i64), Option<i64>>,
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
            held: RefCell::default(),
            reps: RefCell::default(),
            shapes: RefCell::default(),
            indexes: RefCell::default(),
            results: RefCell::default(),
            forms: RefCell::default(),
            restricted: RefCell::default(),
            shifted: RefCell::default(),
            probes: RefCell::default(),
            tables: RefCell::default(),
            by_op,
            iv_fns: RefCell::default(),
            iv_vals: RefCell::default(),
        }
    }

    /// [`super::proof::iv_fn`] of `v` in the loop variable `iv` ranging over `range`,
    /// computed once (a pure function of the kernel).
    pub fn iv_fn(&self, k: &Kernel, ind: &Inductions, v: Value, iv: (Value, (i128, i128))) -> Option<IvFn> {
        let key = (v, iv.0, iv.1);
        if let Some(f) = self.iv_fns.borrow().get(&key) {
            return *f;
        }
        let f = super::proof::iv_fn(k, ind, v, iv, 0);
        self.iv_fns.borrow_mut().insert(key, f);
        f
    }

    /// [`super::proof::eval_iv`] of `v` where `iv` is `x`, computed once.
    pub fn eval_iv(&self, k: &Kernel, ind: &Inductions, v: Value, iv: Value, x: i64) -> Option<i64> {
        let key = (v, iv, x);
        if let Some(y) = self.iv_vals.borrow().get(&key) {
            return *y;
        }
        let y = super::proof::eval_iv(k, ind, v, iv, x);
        self.iv_vals.borrow_mut().insert(key, y);
        y
    }

    /// The accesses of op `op`, in index order.
    pub fn of_op(&self, op: Op) -> &[usize] {
        self.by_op.get(&op).map_or(&[], Vec::as_slice)
    }

    /// Holds `v` for the rest of the proof and files it under its shape.
    fn keep(&self, v: Rc<Vec<Inst>>) -> Rc<Vec<Inst>> {
        if !self.enabled || v.is_empty() || self.live.borrow().contains_key(&key_of(&v)) {
            return v;
        }
        let x0 = v[0].x;
        let shape: Vec<(u32, u32, i64)> =
            v.iter().map(|i| (i.t, i.combo, i.x.wrapping_sub(x0))).collect();
        let mut reps = self.reps.borrow_mut();
        let rep = *self.shapes.borrow_mut().entry(shape).or_insert_with(|| {
            reps.push((v.clone(), max_abs(&v)));
            reps.len() as u32 - 1
        });
        let off = x0.wrapping_sub(reps[rep as usize].0[0].x);
        self.live.borrow_mut().insert(key_of(&v), Canon { rep, off });
        self.held.borrow_mut().push(v.clone());
        v
    }

    fn side<'a>(&self, v: &'a [Inst]) -> Side<'a> {
        match self.live.borrow().get(&key_of(v)) {
            Some(c) if self.enabled && !v.is_empty() => Side::Canon(*c),
            _ => Side::Raw(v),
        }
    }

    /// The instances of an access with form key `key` (`None`: not shareable) and constant
    /// `c`: `make(c)`, or, for a key seen before, its family's vector (`make(0)`, computed
    /// the first time) with `c` added, so that accesses whose forms differ by a constant
    /// (unrolled copies) evaluate `T` once and share one shape.
    pub fn instances(
        &self,
        key: Option<FormKey>,
        c: i64,
        make: impl FnOnce(i64) -> Result<Vec<Inst>, String>,
    ) -> Result<Rc<Vec<Inst>>, String> {
        let Some(key) = key.filter(|_| self.enabled) else {
            return Ok(self.keep(Rc::new(make(c)?)));
        };
        let found = self.forms.borrow().get(&key).cloned();
        let family = match found {
            Some(v) => v,
            None => {
                let v = self.keep(Rc::new(make(0)?));
                self.forms.borrow_mut().insert(key, v.clone());
                v
            }
        };
        Ok(if c == 0 {
            family
        } else {
            self.shifted_copy(&family, c)
        })
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

    /// `v` with `off` added to every value; live (with `v`'s shape) when `v` is.
    pub fn shifted_copy(&self, v: &[Inst], off: i64) -> Rc<Vec<Inst>> {
        let make = || {
            v.iter()
                .map(|i| Inst {
                    x: i.x.wrapping_add(off),
                    ..*i
                })
                .collect::<Vec<Inst>>()
        };
        let Side::Canon(c) = self.side(v) else {
            return Rc::new(make());
        };
        let key = (key_of(v), off);
        if let Some(s) = self.shifted.borrow().get(&key) {
            return s.clone();
        }
        let s = Rc::new(make());
        let canon = Canon {
            rep: c.rep,
            off: c.off.wrapping_add(off),
        };
        self.live.borrow_mut().insert(key_of(&s), canon);
        self.held.borrow_mut().push(s.clone());
        self.shifted.borrow_mut().insert(key, s.clone());
        s
    }

    /// Whether representative `b` shifted by `shift` meets representative `a`: on their
    /// residue classes (`check/proof_classes.rs`), or, once the pair was probed at as many
    /// shifts as the larger side has classes, through the set of every shift at which they
    /// meet (built in O(classes x classes), then O(1) per shift).
    fn probe_reps(&self, (a, b): (u32, u32), g: i64, rule: Meet, shift: i64) -> bool {
        let key = (a, b, g, rule);
        if let Some(t) = self.tables.borrow().get(&key) {
            return t.contains(residue(shift, g));
        }
        let (ca, cb) = (self.index(a, g, rule), self.index(b, g, rule));
        let n = {
            let mut probes = self.probes.borrow_mut();
            let n = probes.entry(key).or_default();
            *n += 1;
            *n
        };
        // Differences of residues stay exact for these moduli (see `exact_shift`).
        let tabled = g == 0 || g.unsigned_abs().is_power_of_two() || g.unsigned_abs() < SAFE;
        if !tabled || n < ca.len().max(cb.len()) {
            return ca.meets(&cb, shift);
        }
        let t = Rc::new(ca.shift_set(&cb));
        let r = t.contains(residue(shift, g));
        self.tables.borrow_mut().insert(key, t);
        r
    }

    /// The residue classes of representative `rep` for modulus `g` and `rule`.
    fn index(&self, rep: u32, g: i64, rule: Meet) -> Rc<Classes> {
        let key = (rep, g, rule);
        if let Some(ix) = self.indexes.borrow().get(&key) {
            return ix.clone();
        }
        let v = self.reps.borrow()[rep as usize].0.clone();
        let ix = Rc::new(Classes::new(&v, g, rule));
        self.indexes.borrow_mut().insert(key, ix.clone());
        ix
    }

    /// The largest magnitude of a representative's values.
    fn rep_max(&self, rep: u32) -> u64 {
        self.reps.borrow()[rep as usize].1
    }

    /// Whether `a + ca` meets `b + cb`, through `a`'s representative's classes, memoized
    /// when `b` is live too; `None` when the shifted probe would not be exact (the caller
    /// tests directly).
    fn shifted(
        &self,
        (a, b): (Canon, Side),
        (ca, cb): (i64, i64),
        g: i64,
        rule: Meet,
    ) -> Option<bool> {
        let (b_max, b_off) = match b {
            Side::Canon(c) => (self.rep_max(c.rep), c.off),
            Side::Raw(v) => (max_abs(v), 0),
        };
        let parts = [self.rep_max(a.rep), a.off.unsigned_abs(), b_max, b_off.unsigned_abs()];
        if !exact_shift(g, &parts, (ca, cb)) {
            return None;
        }
        // a.x + ca = rep_a.x + (off_a + ca); b.x + cb = rep_b.x + (off_b + cb).
        let shift = cb.wrapping_add(b_off).wrapping_sub(ca).wrapping_sub(a.off);
        let bc = match b {
            Side::Raw(v) => return Some(self.index(a.rep, g, rule).meets_raw(v, shift)),
            Side::Canon(c) => c,
        };
        let key = ((a.rep, bc.rep, g, rule), shift);
        if let Some(r) = self.results.borrow().get(&key) {
            return Some(*r);
        }
        let r = self.probe_reps((a.rep, bc.rep), g, rule, shift);
        self.results.borrow_mut().insert(key, r);
        Some(r)
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
        .then(|| (a.form.tpart.clone(), guards, combos))
}

/// Per residue of `x mod g` (`x` itself when `g == 0`): the first instance with it and the
/// first later one that `rule` counts as distinct from the first (enough to find, for any
/// instance of the other side, one of these that differs from it).
pub(super) struct ResidueIndex {
    g: i64,
    rule: Meet,
    first: FxHashMap<i64, (Id, Option<Id>)>,
}

/// Magnitudes below this never overflow i64 when six of them are added.
const SAFE: u64 = 1 << 59;

fn max_abs(v: &[Inst]) -> u64 {
    v.iter().map(|i| i.x.unsigned_abs()).max().unwrap_or(0)
}

/// Whether residues of sums of values and constants of these magnitudes do not depend on
/// how the sums are grouped: modulus 0 or a power of two (i64 wraps modulo a multiple of
/// it), or no sum can overflow.
fn exact_shift(g: i64, parts: &[u64], (ca, cb): (i64, i64)) -> bool {
    g == 0
        || g.unsigned_abs().is_power_of_two()
        || parts
            .iter()
            .chain(&[ca.unsigned_abs(), cb.unsigned_abs()])
            .all(|&m| m < SAFE)
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
        ResidueIndex { g, rule, first }
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
/// `rule` counts as different: whether they exist through [`collides`], then the pair the
/// direct test names.
pub(super) fn collide(
    memo: &PairMemo,
    a: &[Inst],
    b: &[Inst],
    g: i64,
    rule: Meet,
) -> Option<(u32, u32)> {
    ShiftedProbe::new(memo, a, b, g, rule).test(0, 0)
}

/// Whether [`collide`] finds two instances; O(classes of the smaller side) the first time two
/// shapes meet at one shift, O(1) after.
pub(super) fn collides(memo: &PairMemo, a: &[Inst], b: &[Inst], g: i64, rule: Meet) -> bool {
    ShiftedProbe::new(memo, a, b, g, rule).hits(0, 0)
}

/// The collision test of two fixed instance vectors under pairs of constants `(ca, cb)`
/// added to every value of each side, through the memo where it applies.
pub(super) struct ShiftedProbe<'a> {
    memo: &'a PairMemo,
    a: &'a [Inst],
    b: &'a [Inst],
    g: i64,
    rule: Meet,
    sides: Option<(Canon, Side<'a>)>,
}

impl<'a> ShiftedProbe<'a> {
    pub fn new(memo: &'a PairMemo, a: &'a [Inst], b: &'a [Inst], g: i64, rule: Meet) -> Self {
        let sides = match memo.side(a) {
            Side::Canon(c) => Some((c, memo.side(b))),
            Side::Raw(_) => None,
        };
        ShiftedProbe {
            memo,
            a,
            b,
            g,
            rule,
            sides,
        }
    }

    /// [`collide`] with `ca` added to every value of `a` and `cb` to every value of `b`:
    /// the memo says whether they meet, the direct test names the pair (so the witness is the
    /// one of testing from scratch).
    pub fn test(&mut self, ca: i64, cb: i64) -> Option<(u32, u32)> {
        if self.memoized(ca, cb) == Some(false) {
            return None;
        }
        collide_direct(self.a, ca, self.b, cb, self.g, self.rule)
    }

    /// Whether [`ShiftedProbe::test`] finds a pair, without naming it.
    pub fn hits(&mut self, ca: i64, cb: i64) -> bool {
        self.memoized(ca, cb)
            .unwrap_or_else(|| collide_direct(self.a, ca, self.b, cb, self.g, self.rule).is_some())
    }

    fn memoized(&self, ca: i64, cb: i64) -> Option<bool> {
        self.memo
            .shifted(self.sides?, (ca, cb), self.g, self.rule)
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
    //! The shifted, memoized probe against the direct test on random instance sets
    //! (tests/check_proof_pairs.rs compares whole proofs with the pairwise oracle).
    use super::*;

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
        let rules = Meet::ALL;
        let (mut hits, mut misses) = (0, 0);
        let memo = PairMemo::new(&[], true);
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
            let a = set(12, 64, big);
            // Every third pair: two shifted copies of one shape (one representative).
            let b = if round % 3 == 1 {
                let d = (rng(&mut seed) % 100) as i64 - 50;
                a.iter().map(|i| Inst { x: i.x.wrapping_add(d), ..*i }).collect()
            } else {
                set(12, 64, big)
            };
            let (a, b) = (memo.keep(Rc::new(a)), memo.keep(Rc::new(b)));
            let g = [0, 1, 2, 3, 4, 6, 8, 64, 1 << 32][rng(&mut seed) as usize % 9];
            let rule = rules[round % 3];
            let mut probe = ShiftedProbe::new(&memo, &a, &b, g, rule);
            let raw: Vec<Inst> = b.to_vec();
            let mut raw_probe = ShiftedProbe::new(&memo, &a, &raw, g, rule);
            for _ in 0..40 {
                let ca = (rng(&mut seed) % 40) as i64 - 20;
                let cb = if big {
                    rng(&mut seed) as i64
                } else {
                    (rng(&mut seed) % 40) as i64 - 20
                };
                let want = collide_direct(&a, ca, &b, cb, g, rule);
                assert_eq!(probe.hits(ca, cb), want.is_some(), "{a:?} {ca} {b:?} {cb} g={g}");
                assert_eq!(probe.test(ca, cb), want, "{a:?} {ca} {b:?} {cb} g={g}");
                assert_eq!(raw_probe.test(ca, cb), want, "{a:?} {ca} {b:?} {cb} g={g}");
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
