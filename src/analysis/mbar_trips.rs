//! The every-trip-count argument of `analysis::mbar_protocol` (docs/async.md, "For every trip
//! count"): where a parameter without a declared range `%K` reaches the trace only through a
//! trip count `T = (K + c) div B`, the verdict of the searched trip counts `0 … TRIPS` is the
//! verdict of every `T`, so the waits they all verify need no W0318.
//!
//! Premises, checked here (each failure is named in the W0318 that stays):
//!
//! 1. *Syntactic, `K` through `T` only* ([`shape`]): in the operands the trace evaluates,
//!    `%K` appears only inside `T` (one form `(c, B)`, `B ≥ 2`), and `T` only as the upper
//!    bound of a `for n = lo to T step 1` (constant `lo ≥ 0`, inside no loop: a *pumped*
//!    loop), in comparisons `T + d ⋈ c` with a constant (fixed from `T ≥ c − d + 1` on, and
//!    for every `T ≤ 0` alike: `d < c`, or `d = c` for `le`/`gt`), and in comparisons
//!    `n + e ⋈ T + d` with a pumped loop's counter (`D` = 1 + the largest `|d − e|`).
//!    A *strided* loop `for n = lo to K step B` (constant `lo ≥ 0`, `B ≥ 2`, in no loop) is
//!    pumped too, with `T = (K − lo + B − 1) div B` and its trips counted from 0; its
//!    counter is read nowhere ([`strided_form`]) but in a comparison with `K` itself.
//!    `K` itself may be compared where that is exactly a comparison of `T` ([`raw_rule`],
//!    docs/async.md "Comparisons of the parameter itself"; `T` the strided loops' one
//!    trip count): `K ⋈ y` with a constant `y` becomes `T ⋈' m`, taken as above, and
//!    `n + e ⋈ K + a` with a strided counter `n = lo + B·j` (`e, a ≤ 0`: no wrap where it
//!    runs) becomes `j ⋈' T − m`, a comparison of the trip index (`D ≥ |m| + 1`).
//! 2. *Syntactic, the iteration values:* the counter `n` of a pumped loop is read only in
//!    those comparisons, and the values its body yields read neither `n` nor `T` outside a
//!    comparison with a constant. *From the trace* ([`period`]) at `T = TRIPS`: the
//!    iteration values `s` of every thread's run repeat — first at iteration `i0 + P`
//!    equal to iteration `i0`; over all runs, `P` the lcm, `i0` the largest. Where they do
//!    not, counters read only through residues are projected first (`mbar_counters`: each
//!    counter `x` taken as `x mod |δ|·M`, a function of which every read is). Then every
//!    steady iteration (`n < T − D`) has the events of its `s`, and `T0 = max(C, lo + i0 +
//!    D + P)` with `T0 + 2P − 1 ≤ TRIPS`.
//! 3. *The block* ([`blocks`]): for each `T` in `T0 … T0 + P − 1`, the `P` iterations before
//!    the drain of the trace of `T + P` (taken from the trace at `TRIPS`, whose prefix it
//!    is) are the block that `T + P` adds to `T`. Every thread runs at most one pumped loop;
//!    per slot, every arriving thread arrives in its block `m·Δr` times (`m` arrivals per
//!    thread and phase), the same `Δr` for all, every waiting thread's guarantee advances by
//!    that `Δr` over its block, and `Δr` is even; a thread that expects bytes on the slot
//!    arrives on it.
//!
//! Then the trace of `T + P` is the trace of `T` with the block inserted, every later round
//! and guarantee shifted by `Δr` and every parity compared as before, so each check of
//! `mbar_protocol` holds for `T + P` exactly when it holds for `T`; by induction the verdict
//! of every `T ≥ T0` is one of `T0 … T0 + P − 1`, all searched, and a negative `T` is `T = 0`.
//! Only a clean search (no wait wrong or undecided for any value) is extended.
//!
//! Complexity: one walk of the evaluated operands (memoised per value), one more trace at
//! `TRIPS`, and O(P × events) for the blocks.

use std::collections::{HashMap, HashSet};

use super::counters::Projection;
use super::{Ev, Iters, Protocol, Slot, TRIPS, div_form, strided_form};
use crate::ir::*;

/// What premise (1) and the syntactic part of (2) found.
pub(super) struct Shape {
    /// `(c, B)`: the trip count is `T = (K + c) div B`.
    pub(super) form: Option<(i64, i64)>,
    /// The pumped loops, with their constant lower bound.
    pub(super) loops: HashMap<Op, i64>,
    /// One more than the largest `|d|` of a comparison of a counter with `T + d`.
    d: i64,
    /// From this `T` on, every comparison of `T + d` with a constant has a fixed outcome.
    c: i64,
    /// Whether the trip count is compared anywhere (a guard): a flattened tile loop
    /// (`mbar_flatten`) needs none.
    pub(super) guards: bool,
}

impl Shape {
    /// The shape of constant long loops (`mbar_period`): lower bounds `loops`, no trip-count
    /// form and no guard comparing a counter (`D = 0`, `C = 0`).
    pub(super) fn fixed(loops: HashMap<Op, i64>) -> Shape {
        Shape { form: None, loops, d: 0, c: 0, guards: false }
    }
}

/// An affine operand: its base and constant offset.
#[derive(Clone, Copy, PartialEq)]
enum Base {
    Const,
    Trip((i64, i64)),
    Counter,
    /// The parameter `K` itself.
    Param,
    /// The counter `lo + B·j` of a strided loop over `K`: `(lo, B)`.
    Strided(i64, i64),
}

/// Offsets and constants beyond this are not taken as affine (no `i32` wrap near them).
const LIM: i64 = 1 << 16;

/// Premise (1) and the syntactic part of (2) for parameter `p` over the traced ops.
pub(super) fn shape(k: &Kernel, p: Value, traced: &HashSet<Op>) -> Result<Shape, String> {
    let mut ops: Vec<Op> = traced.iter().copied().collect();
    ops.sort_unstable();
    // The one form of the strided loops over `K`, if they agree: what a comparison of `K`
    // itself is rewritten by (`raw`).
    let mut strided = ops.iter().filter_map(|&o| strided_form(k, p, o));
    let raw = strided.next().filter(|&f| strided.all(|g| g == f));
    let mut w = Walk { k, p, sh: Shape { form: None, loops: HashMap::new(), d: 0, c: 0, guards: false }, seen: HashSet::new(), raw };
    for o in ops {
        w.op(o)?;
    }
    Ok(w.sh)
}

struct Walk<'k> {
    k: &'k Kernel,
    p: Value,
    sh: Shape,
    seen: HashSet<(Value, bool)>,
    /// The form `(c, B)` of the strided loops over `K`, where there are some and they agree.
    raw: Option<(i64, i64)>,
}

impl Walk<'_> {
    fn name(&self, v: Value) -> String {
        format!("%{}", self.k.value_names.get(v))
    }

    /// The evaluated operands of traced op `o`; a pumped loop's yields are walked strictly.
    fn op(&mut self, o: Op) -> Result<(), String> {
        let k = self.k;
        let (ops, strict): (Vec<&Operand>, bool) = match &k.ops[o].kind {
            OpKind::For { lo, hi, step, init } => {
                let trip = match hi {
                    Operand::Value(v) => self.trip(*v),
                    Operand::Imm(_) => None,
                };
                let strided = strided_form(k, self.p, o);
                let pumped = trip.is_some() || strided.is_some();
                if let Some(f) = trip {
                    self.form(f)?;
                    self.pumped(o, lo, step)?;
                } else if let Some(f) = strided {
                    self.form(f)?;
                    self.strided(o)?;
                }
                let bounds = [lo, step].into_iter().chain((!pumped).then_some(hi));
                (bounds.chain(init).collect(), pumped)
            }
            OpKind::If { cond } => (vec![cond], false),
            OpKind::MbarInit { index, .. } | OpKind::MbarArrive { index, .. } | OpKind::MbarExpectTx { index, .. } => (index.iter().collect(), false),
            OpKind::MbarWait { index, parity, .. } => (index.iter().chain([parity]).collect(), false),
            OpKind::TmaLoad { mbar_index, .. } => (mbar_index.iter().collect(), false),
            _ => (Vec::new(), false),
        };
        for x in ops {
            self.operand(x, false)?;
        }
        self.yields(o, strict)
    }

    /// The values the regions of `o` yield (walked strictly for a pumped loop's body).
    fn yields(&mut self, o: Op, strict: bool) -> Result<(), String> {
        let k = self.k;
        for &r in &k.ops[o].regions {
            if let Some(&y) = k.region_ops(r).last()
                && let OpKind::Yield(ys) = &k.ops[y].kind
            {
                for x in ys {
                    self.operand(x, strict)?;
                }
            }
        }
        Ok(())
    }

    /// Records pumped loop `o` after checking its bounds and place.
    fn pumped(&mut self, o: Op, lo: &Operand, step: &Operand) -> Result<(), String> {
        let k = self.k;
        let n = self.name(k.region_args(k.ops[o].regions[0])[0]);
        let Some(lo) = k.const_i32(*lo).filter(|&l| (0..LIM).contains(&l)) else {
            return Err(format!("premise (1) fails: the loop over {n} up to the trip count does not start at a constant ≥ 0"));
        };
        if k.const_i32(*step) != Some(1) {
            return Err(format!("premise (1) fails: the loop over {n} up to the trip count does not step by 1"));
        }
        if k.parents().ancestors(o).iter().any(|&a| matches!(k.ops[a].kind, OpKind::For { .. } | OpKind::While { .. })) {
            return Err(format!("premise (1) fails: the loop over {n} up to the trip count is inside another loop"));
        }
        self.sh.loops.insert(o, lo);
        Ok(())
    }

    /// Records a strided loop `o` over the parameter itself (`for n = lo to K step B`):
    /// pumped like one up to its trip count, its iterations counted from 0; its counter
    /// steps by `B` and is read nowhere in the traced operands (not even in a comparison).
    fn strided(&mut self, o: Op) -> Result<(), String> {
        let k = self.k;
        if k.parents().ancestors(o).iter().any(|&a| matches!(k.ops[a].kind, OpKind::For { .. } | OpKind::While { .. })) {
            let n = self.name(k.region_args(k.ops[o].regions[0])[0]);
            return Err(format!("premise (1) fails: the loop over {n} up to the parameter is inside another loop"));
        }
        self.sh.loops.insert(o, 0);
        Ok(())
    }

    fn operand(&mut self, o: &Operand, strict: bool) -> Result<(), String> {
        match o {
            Operand::Value(v) => self.value(*v, strict),
            Operand::Imm(_) => Ok(()),
        }
    }

    /// `(c, B)` when `v` is the trip count `(K + c) div B`.
    fn trip(&self, v: Value) -> Option<(i64, i64)> {
        match self.k.values[v].def {
            ValueDef::Result(d, _) => div_form(self.k, self.p, d),
            _ => None,
        }
    }

    /// Whether region `r` is the body of a loop up to the trip count.
    fn pumped_body(&self, r: Region) -> bool {
        let k = self.k;
        k.parents().region_op[r].is_some_and(|o| self.unit_body(r) || strided_form(k, self.p, o).is_some())
    }

    /// Whether region `r` is the body of a loop up to the trip count by steps of 1 (its
    /// counter counts trips: comparable with `T + d`).
    fn unit_body(&self, r: Region) -> bool {
        let k = self.k;
        k.parents().region_op[r].is_some_and(|o| matches!(&k.ops[o].kind, OpKind::For { hi: Operand::Value(h), .. } if self.trip(*h).is_some()))
    }

    /// Walks the evaluation of `v` (module doc, premises 1 and 2).
    fn value(&mut self, v: Value, strict: bool) -> Result<(), String> {
        if !self.seen.insert((v, strict)) {
            return Ok(());
        }
        let k = self.k;
        let (kn, vn) = (self.name(self.p), self.name(v));
        if v == self.p {
            return Err(format!("premise (1) fails: {kn} is read other than through a trip count `({kn} + c) div B`"));
        }
        if self.trip(v).is_some() {
            let what = if strict { "an iteration value of a loop up to it reads it" } else { "it is read other than as a loop's upper bound or in a comparison with a constant or a loop counter" };
            return Err(format!("premise (1) fails: the trip count {vn} is not only a bound: {what}"));
        }
        let d = match k.values[v].def {
            ValueDef::RegionArg(r, 0) if self.pumped_body(r) => {
                let why = if strict { "an iteration value reads it" } else { "it is read other than in a comparison with the trip count" };
                return Err(format!("premise (2) fails: the counter {vn} of a loop up to the trip count is read: {why}"));
            }
            ValueDef::Result(d, _) => d,
            _ => return Ok(()),
        };
        let args: Vec<Operand> = match &k.ops[d].kind {
            OpKind::Cmp(pred, x, y) => {
                if self.guard(*pred, x, y, strict)? {
                    return Ok(());
                }
                vec![*x, *y]
            }
            OpKind::Binary(_, x, y) => vec![*x, *y],
            OpKind::Unary(_, x) => vec![*x],
            OpKind::Select(c, x, y) => vec![*c, *x, *y],
            // The trace evaluates every `if` result (the taken arm's yield), traced or not.
            OpKind::If { cond } => {
                self.operand(&cond.clone(), strict)?;
                return self.yields(d, strict);
            }
            OpKind::For { lo, hi, step, init } if strict => {
                let mut v = vec![*lo, *hi, *step];
                v.extend(init.iter().copied());
                v.extend(self.yield_ops(d));
                v
            }
            _ => Vec::new(),
        };
        for x in &args {
            self.operand(x, strict)?;
        }
        Ok(())
    }

    fn yield_ops(&self, o: Op) -> Vec<Operand> {
        let k = self.k;
        let r = k.ops[o].regions[0];
        match k.region_ops(r).last().map(|&y| &k.ops[y].kind) {
            Some(OpKind::Yield(ys)) => ys.clone(),
            _ => Vec::new(),
        }
    }

    /// Whether `x ⋈ y` is a comparison premise (1) allows (recording `D`, `C` and the form).
    fn guard(&mut self, pred: CmpPred, x: &Operand, y: &Operand, strict: bool) -> Result<bool, String> {
        let (Some(a), Some(b)) = (self.affine(x), self.affine(y)) else {
            return Ok(false);
        };
        let (t, other, pred) = match (a.0, b.0) {
            (Base::Trip(_), _) => (a, b, pred),
            (_, Base::Trip(_)) => (b, a, flip(pred)),
            (Base::Param, _) => return self.raw(b, flip(pred), a.1, strict),
            (_, Base::Param) => return self.raw(a, pred, b.1, strict),
            _ => return Ok(false),
        };
        let Base::Trip(f) = t.0 else { unreachable!() };
        match other.0 {
            Base::Const => self.trip_const(t.1, pred, other.1)?,
            Base::Counter if strict => return Err("premise (2) fails: an iteration value of a loop up to the trip count reads the loop's counter".into()),
            Base::Counter => self.sh.d = self.sh.d.max((t.1 - other.1).abs() + 1),
            _ => return Ok(false),
        }
        self.form(f)?;
        self.sh.guards = true;
        Ok(true)
    }

    /// Records `T + d ⋈ c`: fixed from `T ≥ C = c − d + 1` on, and required to be the same
    /// for every `T ≤ 0` (all below the threshold).
    fn trip_const(&mut self, d: i64, pred: CmpPred, c: i64) -> Result<(), String> {
        if !(d < c || (d == c && matches!(pred, CmpPred::Le | CmpPred::Gt))) {
            return Err(format!("premise (1) fails: a comparison of the trip count with {c} differs between trip count 0 and a negative one"));
        }
        self.sh.c = self.sh.c.max(c - d + 1);
        Ok(())
    }

    /// Whether `x ⋈ K + a`, a comparison of the parameter itself, is one premise (1) allows:
    /// rewritten exactly to the trip count `T` of the strided loops ([`raw_rule`]) as
    /// `T ⋈' m` (`x` a constant, `a = 0`) or `j ⋈' T − m + …` (`x = n + e` with `n` the
    /// counter of a strided loop over `K`, its trip index `j`; `e ≤ 0`, `a ≤ 0`, so neither
    /// side wraps where the loop runs). `Ok(false)`: not of those shapes (read as before).
    fn raw(&mut self, x: (Base, i64), pred: CmpPred, a: i64, strict: bool) -> Result<bool, String> {
        let Some(f @ (c, b)) = self.raw else { return Ok(false) };
        let kn = self.name(self.p);
        let why = |y: i64| format!("premise (1) fails: `{y} {} {kn}` is not a function of the trip count `({kn} + {c}) div {b}` (see docs/async.md, \"Comparisons of the parameter itself\")", pred.name());
        match x.0 {
            Base::Const if a != 0 => return Err(format!("premise (1) fails: {kn} + {a} is compared with a constant (it may wrap)")),
            Base::Const => {
                let (p2, m) = raw_rule(pred, x.1, c, b).ok_or_else(|| why(x.1))?;
                self.trip_const(0, p2, m)?;
            }
            Base::Strided(..) if strict => return Err("premise (2) fails: an iteration value of a loop up to the parameter reads the loop's counter".into()),
            Base::Strided(lo, bb) if (bb - 1 - lo, bb) == f => {
                if x.1 > 0 || a > 0 {
                    return Err(format!("premise (1) fails: a strided loop's counter plus {} is compared with {kn} + {a} (it may wrap)", x.1));
                }
                // `lo + B·j + e ⋈ K + a` is `y + B·j ⋈ K` with `y = lo + e − a`.
                let y = lo + x.1 - a;
                let (_, m) = raw_rule(pred, y, c, b).ok_or_else(|| why(y))?;
                self.sh.d = self.sh.d.max(m.abs() + 1);
            }
            _ => return Ok(false),
        }
        self.form(f)?;
        self.sh.guards = true;
        Ok(true)
    }

    fn form(&mut self, f: (i64, i64)) -> Result<(), String> {
        if f.1 < 2 || f.0.abs() >= LIM {
            return Err(format!("premise (1) fails: the trip count `(K + {}) div {}` is not of the form taken (divisor ≥ 2, small offset)", f.0, f.1));
        }
        match self.sh.form.replace(f) {
            Some(g) if g != f => Err("premise (1) fails: the parameter gives two different trip counts".into()),
            _ => Ok(()),
        }
    }

    /// `o` as a base (constant, trip count, pumped counter) plus a constant offset.
    fn affine(&self, o: &Operand) -> Option<(Base, i64)> {
        let k = self.k;
        if let Some(c) = k.const_i32(*o) {
            return (c.abs() < LIM).then_some((Base::Const, c));
        }
        let Operand::Value(v) = o else { return None };
        if let Some(f) = self.trip(*v) {
            return Some((Base::Trip(f), 0));
        }
        if *v == self.p {
            return Some((Base::Param, 0));
        }
        let d = match k.values[*v].def {
            ValueDef::RegionArg(r, 0) if self.unit_body(r) => return Some((Base::Counter, 0)),
            ValueDef::RegionArg(r, 0) => {
                let o = k.parents().region_op[r]?;
                let OpKind::For { lo, step, .. } = &k.ops[o].kind else { return None };
                strided_form(k, self.p, o)?;
                return Some((Base::Strided(k.const_i32(*lo)?, k.const_i32(*step)?), 0));
            }
            ValueDef::Result(d, _) => d,
            _ => return None,
        };
        let (b, off) = match &k.ops[d].kind {
            OpKind::Binary(BinOp::Add, x, y) => match (k.const_i32(*x), k.const_i32(*y)) {
                (_, Some(c)) => (self.affine(x)?, c),
                (Some(c), _) => (self.affine(y)?, c),
                _ => return None,
            },
            OpKind::Binary(BinOp::Sub, x, y) => (self.affine(x)?, -k.const_i32(*y)?),
            _ => return None,
        };
        let off = b.1 + off;
        (off.abs() < LIM).then_some((b.0, off))
    }
}

/// `y ⋈ K` as a comparison of the trip count `T = ⌊(K + c) / B⌋` (`B ≥ 1`) with a
/// constant: `Some((⋈', m))` with `y ⋈ K ⇔ T ⋈' m` for every integer `K`, where `⋈'` is
/// `ge` or `lt`; `None` where `y ⋈ K` is no function of `T` (docs/async.md, "Comparisons of
/// the parameter itself"). The rule: `y < K ⇔ K + c ≥ z` with `z = y + 1 + c`, and
/// `K + c ≥ z ⇔ T ≥ z / B` exactly when `B` divides `z` (otherwise `K = z − c − 1` and
/// `K = z − c` have one `T` and differ); `y ≤ K` is `y − 1 < K`, `gt` and `ge` the
/// negations, `eq` and `ne` never (a single `K` is no union of the classes of `T`).
pub(super) fn raw_rule(pred: CmpPred, y: i64, c: i64, b: i64) -> Option<(CmpPred, i64)> {
    let (y, neg) = match pred {
        CmpPred::Lt => (y, false),
        CmpPred::Le => (y - 1, false),
        CmpPred::Ge => (y, true),
        CmpPred::Gt => (y - 1, true),
        CmpPred::Eq | CmpPred::Ne => return None,
    };
    let z = y + 1 + c;
    (z.rem_euclid(b) == 0).then(|| (if neg { CmpPred::Lt } else { CmpPred::Ge }, z.div_euclid(b)))
}

/// The predicate with its operands swapped.
fn flip(p: CmpPred) -> CmpPred {
    match p {
        CmpPred::Lt => CmpPred::Gt,
        CmpPred::Le => CmpPred::Ge,
        CmpPred::Gt => CmpPred::Lt,
        CmpPred::Ge => CmpPred::Le,
        x => x,
    }
}

/// `(i0, P)` of the runs (module doc, premise 2), and `T0`; each run must have every
/// iteration of trip count [`TRIPS`].
pub(super) fn period(k: &Kernel, sh: &Shape, iters: &[Iters], proj: &Projection) -> Result<(i64, i64), String> {
    let (mut i0, mut p) = (0i64, 1i64);
    let what = if proj.is_empty() { "" } else { " with their counters read through residues" };
    for r in iters {
        let vals = project(&r.vals, proj.get(&r.op).map_or(&[][..], |v| &v[..]));
        let n = k.region_args(k.ops[r.op].regions[0])[0];
        let name = format!("%{}", k.value_names.get(n));
        if r.vals.len() as i64 != TRIPS - sh.loops[&r.op] {
            return Err(format!("premise (2) fails: the loop over {name} does not run once per trip"));
        }
        let mut first: HashMap<&Vec<Option<i64>>, usize> = HashMap::new();
        let rep = vals.iter().enumerate().find_map(|(j, s)| match first.get(s) {
            Some(&i) => Some((i as i64, (j - i) as i64)),
            None => {
                first.insert(s, j);
                None
            }
        });
        let Some((a, q)) = rep else {
            return Err(format!("premise (2) fails: the iteration values of the loop over {name}{what} do not repeat within {TRIPS} trips (a counter, not a slot and a phase)"));
        };
        i0 = i0.max(a);
        p = lcm(p, q);
        if p > TRIPS {
            return Err(format!("premise (2) fails: the iteration values repeat with a period above {TRIPS}"));
        }
    }
    let lo = sh.loops.values().copied().max().unwrap_or(0);
    let t0 = sh.c.max(lo + i0 + sh.d + p);
    if t0 + 2 * p - 1 > TRIPS {
        return Err(format!("premise (2) fails: the trip counts to search (up to {}: from T0 = {t0}, two periods of {p}) exceed the {TRIPS} searched", t0 + 2 * p - 1));
    }
    Ok((t0, p))
}

/// The iteration values with each counter `(i, q)` of `proj` taken modulo `q`.
pub(super) fn project(vals: &[Vec<Option<i64>>], proj: &[(usize, i64)]) -> Vec<Vec<Option<i64>>> {
    let mut out = vals.to_vec();
    for s in &mut out {
        for &(i, q) in proj {
            if let Some(Some(x)) = s.get_mut(i) {
                *x = x.rem_euclid(q);
            }
        }
    }
    out
}

fn lcm(a: i64, b: i64) -> i64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// Premise (3) on the trace at [`TRIPS`] (module doc).
pub(super) fn blocks(pr: &Protocol, sh: &Shape, iters: &[Iters], t0: i64, p: i64) -> Result<(), String> {
    let mut owner: HashSet<u32> = HashSet::new();
    for r in iters {
        if !owner.insert(r.thread) {
            return Err(format!("premise (3) fails: thread {} runs two loops up to the trip count", r.thread));
        }
    }
    for t in t0..t0 + p {
        let mut range: HashMap<u32, (usize, usize)> = HashMap::new();
        for r in iters {
            let j = (t - sh.d - sh.loops[&r.op]) as usize;
            let end = r.starts.get(j + p as usize).copied().unwrap_or(r.end);
            range.insert(r.thread, (r.starts[j], end));
        }
        for (&s, idx) in &pr.by_slot {
            slot_block(pr, s, idx, &range)?;
        }
    }
    Ok(())
}

/// Premise (3) for slot `s` (events `idx`) and one placement of the blocks (`range`).
fn slot_block(pr: &Protocol, s: Slot, idx: &[usize], range: &HashMap<u32, (usize, usize)>) -> Result<(), String> {
    let name = pr.slot_name(s);
    if pr.broken.contains_key(&s) {
        return Err(format!("premise (3) fails: the rounds of {name} are not established"));
    }
    let touch: HashSet<u32> = idx.iter().filter(|&&i| !matches!(pr.ev[i].ev, Ev::Init(_))).map(|&i| pr.ev[i].thread).collect();
    let arrives = |t: u32| idx.iter().any(|&i| pr.ev[i].thread == t && matches!(pr.ev[i].ev, Ev::Arrive(_)));
    let a: i64 = touch.iter().filter(|&&t| arrives(t)).map(|&t| pr.w(t) as i64).sum();
    let n = idx.iter().find_map(|&i| match pr.ev[i].ev {
        Ev::Init(n) => Some(n as i64),
        _ => None,
    });
    let m = match n {
        Some(n) if a > 0 && n > 0 => n / a,
        _ => 1,
    };
    let mut dr: Option<i64> = None;
    let mut threads: Vec<u32> = touch.into_iter().collect();
    threads.sort_unstable();
    for t in threads {
        let (lo, hi) = range.get(&t).copied().unwrap_or((0, 0));
        let mine = |i: &&usize| pr.ev[**i].thread == t;
        let mut shifts = Vec::new();
        if arrives(t) {
            let c = idx.iter().filter(mine).filter(|&&i| (lo..hi).contains(&i) && matches!(pr.ev[i].ev, Ev::Arrive(_))).count() as i64;
            if c % m != 0 {
                return Err(format!("premise (3) fails: over one period thread {t} arrives on {name} {c} times, not a multiple of the {m} a phase takes of it"));
            }
            shifts.push(c / m);
        } else if idx.iter().filter(mine).any(|&i| matches!(pr.ev[i].ev, Ev::ExpectTx(_) | Ev::Load(_))) {
            return Err(format!("premise (3) fails: thread {t} expects bytes on {name} without arriving on it"));
        }
        let waits: Vec<usize> = idx.iter().filter(mine).copied().filter(|&i| matches!(pr.ev[i].ev, Ev::Wait(_))).collect();
        if !waits.is_empty() {
            let g = |at: usize| waits.iter().take_while(|&&i| i < at).last().map_or(-1, |&i| pr.round[i]);
            shifts.push(g(hi) - g(lo));
        }
        for x in shifts {
            if *dr.get_or_insert(x) != x {
                return Err(format!("premise (3) fails: over one period the rounds of {name} advance by {} for one thread and {x} for thread {t}", dr.unwrap_or(0)));
            }
        }
    }
    match dr {
        Some(x) if x % 2 != 0 => Err(format!("premise (3) fails: over one period {name} completes {x} phases, an odd number (the parities after it would flip)")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREDS: [CmpPred; 6] = [CmpPred::Lt, CmpPred::Le, CmpPred::Gt, CmpPred::Ge, CmpPred::Eq, CmpPred::Ne];

    /// `raw_rule` against enumeration: where it answers, `y ⋈ K` equals `T ⋈' m` for every
    /// `K` in −400 … 400 (the trip count of `for n = lo to K step B`, `c = B − 1 − lo`);
    /// where it declines, two `K` of one trip count compare differently.
    #[test]
    fn comparisons_of_the_parameter_are_the_trip_counts_exactly() {
        for b in [2i64, 3, 7, 64] {
            for lo in [0i64, 1, 5, 64] {
                let c = b - 1 - lo;
                let t = |kv: i64| (kv + c).div_euclid(b);
                for y in -150i64..150 {
                    for pred in PREDS {
                        let ks = -400i64..=400;
                        match raw_rule(pred, y, c, b) {
                            Some((p2, m)) => {
                                assert!(ks.clone().all(|kv| pred.holds(y, kv) == p2.holds(t(kv), m)), "B={b} lo={lo} {y} {pred:?} K");
                            }
                            None => {
                                let split = ks.clone().any(|kv| t(kv) == t(kv + 1) && pred.holds(y, kv) != pred.holds(y, kv + 1));
                                assert!(split, "B={b} lo={lo} {y} {pred:?} K: declined but a function of T");
                            }
                        }
                    }
                }
            }
        }
    }

    /// The counter form `raw` uses: in every iteration `j` of `for n = lo to K step B`,
    /// `n + e ⋈ K + a` (`e, a ≤ 0`) equals `T ⋈' m + j` with `(⋈', m)` the rule's answer
    /// for `y = lo + e − a`, for every `K` in 0 … 400.
    #[test]
    fn a_strided_counter_compared_with_the_parameter_is_its_trip_index() {
        for b in [2i64, 5, 64] {
            for lo in [0i64, 3, 64] {
                let c = b - 1 - lo;
                for e in [-2 * b, -b - 1, -1, 0] {
                    for a in [-3 * b, -2 * b, -b - 1, -b, -b + 1, -1, 0] {
                        for pred in PREDS {
                            let Some((p2, m)) = raw_rule(pred, lo + e - a, c, b) else { continue };
                            for kv in 0i64..=400 {
                                let t = (kv + c).div_euclid(b);
                                let mut j = 0;
                                while lo + b * j < kv {
                                    let n = lo + b * j;
                                    assert_eq!(pred.holds(n + e, kv + a), p2.holds(t, m + j), "B={b} lo={lo} e={e} a={a} {pred:?} K={kv} j={j}");
                                    j += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
