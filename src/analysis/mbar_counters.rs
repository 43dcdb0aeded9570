//! Counters read through residues, for the every-trip-count argument of
//! `analysis::mbar_protocol` (docs/async.md, "Counters read through residues"): an iteration
//! value of a pumped loop (`analysis::mbar_trips`) that advances by a constant `δ` per trip
//! (`yield %x + δ`, Triton's warp-specialized `accumCnt`) never repeats as a value, but where
//! every value the trace evaluates reads it only through residues (`x div 3`, `x − 3·(x div
//! 3)`, `(x div 3) and 1`), each of those is a function of the trip `j` modulo some `M`. The
//! argument then runs on the iteration values with each counter `x` replaced by
//! `x mod |δ|·M`, which repeats.
//!
//! The *form* of a value that reads a counter of pumped loop `L` is `(M, s, [lo, hi])`:
//! with every other iteration value and every value from outside `L` held, the value at trip
//! `j + M` is the value at trip `j` plus `s`, modulo 2^32 (the IR's `i32` wrap) and exactly
//! where `[lo, hi]`, an interval holding the value's mathematical (unwrapped) value over every
//! trip `0 … T` and every `%K`, lies within `i32`. The counter is `(1, δ, x0 + δ·[0, Tmax])`.
//! `add`/`sub`/`mul` by a constant/`neg` combine forms linearly (the wrap commutes with
//! them); `div`/`rem` by a constant `C > 0` (floor, docs/ir.md) need an exact dividend
//! (interval within `i32`) and give `s' = s/g` at `M' = M·C/g`, `g = gcd(s, C)` (a remainder:
//! `s' = 0`); `and` with `2^k − 1` is the residue mod `2^k` whatever the wrap. Any other op
//! reading a form with `s ≠ 0` (a comparison of the counter with a constant: a reset) fails.
//! A value is *periodic* when `s = 0`: then it is a function of the other iteration values and
//! `j mod M`, and every op on periodic values is periodic (lcm of the `M`s).
//!
//! Checked: every operand the trace evaluates (`mbar_trips`'s walk: bounds, inits, yields,
//! conditions, mbarrier indices and parities) is periodic or reads no counter, but for the
//! counter's own `%x + δ`; the counter's interval lies within `i32`. Then, with `M_L` the lcm
//! of the periods read from loop `L`, the events of a steady trip are a function of the
//! projected iteration values (`x ↦ x mod |δ|·M_L`, which determines `j mod M_L` within a
//! run), and the projected values evolve by a function of themselves: premise (2) of
//! `mbar_trips` holds for them, and its period search and block check run unchanged on them.
//!
//! Complexity: one memoised walk of the evaluated operands, O(values) form operations.

use std::collections::{HashMap, HashSet};

use super::trips::Shape;
use super::Iters;
use crate::ir::arith::{floor_div_wide, gcd, lcm};
use crate::ir::*;

/// Per pumped loop, its counters: (index among the iteration values, modulus `|δ|·M_L`).
pub(super) type Projection = HashMap<Op, Vec<(usize, i64)>>;

/// Periods and steps beyond this are not taken (no overflow in the form arithmetic).
const CAP: i64 = 1 << 16;

const I32: (i128, i128) = (i32::MIN as i128, i32::MAX as i128);

/// The form of a value reading a counter of loop `lp` (module doc).
#[derive(Clone, Copy)]
struct Form {
    lp: Option<Op>,
    m: i64,
    s: i64,
    lo: i128,
    hi: i128,
    /// The value, where it is a constant.
    c: Option<i64>,
}

impl Form {
    fn periodic(lp: Option<Op>, m: i64, r: (i128, i128)) -> Form {
        Form { lp, m, s: 0, lo: r.0, hi: r.1, c: None }
    }

    /// The step over `m` trips (`m` a multiple of the form's period).
    fn shift(&self, m: i64) -> i64 {
        self.s * (m / self.m)
    }

    fn exact(&self) -> bool {
        self.lo >= I32.0 && self.hi <= I32.1
    }
}

/// The projection of the counters of the pumped loops in `sh`, `Ok(None)` where no pumped loop
/// has one (the caller's message stands), or the premise that fails. `flat`: the pumped
/// loops stand for tile loops flattened into them (`mbar_flatten`), whose trips are not
/// bounded by `T`'s range: each counter is taken up to the last trip that keeps it within
/// `i32`, and the least such trip count comes back with the projection (the argument holds up
/// to it).
pub(super) fn residues(k: &Kernel, sh: &Shape, traced: &HashSet<Op>, iters: &[Iters], flat: bool) -> Result<Option<(Projection, Option<i64>)>, String> {
    let tmax = sh.form.map_or(i32::MAX as i64, |(_, b)| i32::MAX as i64 / b.max(1)) as i128;
    residues_upto(k, sh, traced, iters, (!flat).then_some(tmax))
}

/// [`residues`] with each counter's interval taken over `tmax` trips (`None`: to the last
/// trip within `i32`, with that trip count returned): `mbar_period`'s long constant loops
/// pass their constant bound.
pub(super) fn residues_upto(k: &Kernel, sh: &Shape, traced: &HashSet<Op>, iters: &[Iters], tmax: Option<i128>) -> Result<Option<(Projection, Option<i64>)>, String> {
    let mut w = Res { k, counters: HashMap::new(), memo: HashMap::new(), modulus: HashMap::new() };
    let mut loops: Vec<Op> = sh.loops.keys().copied().collect();
    loops.sort_unstable();
    let mut clip: Option<i64> = None;
    for &l in &loops {
        let c = w.find_counters(l, iters, tmax)?;
        clip = match (clip, c) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    if w.counters.is_empty() {
        return Ok(None);
    }
    let mut ops: Vec<Op> = traced.iter().copied().collect();
    ops.sort_unstable();
    for o in ops {
        w.sinks(o, sh.loops.contains_key(&o))?;
    }
    let mut out = Projection::new();
    for (&v, c) in &w.counters {
        if matches!(k.values[v].def, ValueDef::RegionArg(..)) {
            let m = w.modulus.get(&c.lp).copied().unwrap_or(1);
            out.entry(c.lp).or_default().push((c.idx, c.step.abs() * m));
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    Ok(Some((out, clip)))
}

/// A counter: iteration value `idx` of pumped loop `lp`, advanced by `step` per trip, its
/// values within `[lo, hi]`.
#[derive(Clone, Copy)]
struct Counter {
    lp: Op,
    idx: usize,
    step: i64,
    lo: i128,
    hi: i128,
}

struct Res<'k> {
    k: &'k Kernel,
    /// Counter values (its region argument and the loop's result).
    counters: HashMap<Value, Counter>,
    memo: HashMap<Value, Option<Form>>,
    /// `M_L` so far, per pumped loop.
    modulus: HashMap<Op, i64>,
}

impl Res<'_> {
    fn name(&self, v: Value) -> String {
        format!("%{}", self.k.value_names.get(v))
    }

    /// Records the counters of pumped loop `l`: iteration values yielded as `%x + δ`, their
    /// interval `x0 + δ·[0, tmax]` (`x0` over the runs at `TRIPS`) within `i32`. Without
    /// `tmax` (a flattened loop), the interval runs to the last trip within `i32`, and the
    /// least such trip count of the loop's counters is returned.
    fn find_counters(&mut self, l: Op, iters: &[Iters], tmax: Option<i128>) -> Result<Option<i64>, String> {
        let k = self.k;
        let body = k.ops[l].regions[0];
        let args = k.region_args(body).to_vec();
        let ys = match k.region_ops(body).last().map(|&y| &k.ops[y].kind) {
            Some(OpKind::Yield(ys)) => ys.clone(),
            _ => return Ok(None),
        };
        let mut clip: Option<i64> = None;
        for (i, y) in ys.iter().enumerate() {
            let Some(step) = self.advance(y, args[i + 1]) else { continue };
            let x0: Vec<Option<i64>> = iters.iter().filter(|r| r.op == l).map(|r| r.vals.first().and_then(|s| s[i])).collect();
            let name = self.name(args[i + 1]);
            if x0.is_empty() || x0.iter().any(|x| x.is_none()) {
                return Err(format!("premise (2) fails: the start of the counter {name} is not known in every run"));
            }
            let (a, b) = (x0.iter().flatten().min().copied().unwrap_or(0) as i128, x0.iter().flatten().max().copied().unwrap_or(0) as i128);
            let tmax = match tmax {
                Some(t) => t,
                None => {
                    let room = if step > 0 { I32.1 - b } else { a - I32.0 };
                    let n = (room / (step.abs() as i128)).max(0);
                    clip = Some(clip.map_or(n as i64, |c| c.min(n as i64)));
                    n
                }
            };
            let far = step as i128 * tmax;
            let (lo, hi) = (a + far.min(0), b + far.max(0));
            if lo < I32.0 || hi > I32.1 {
                return Err(format!("premise (2) fails: the counter {name} may wrap (its values reach [{lo}, {hi}] over every trip count)"));
            }
            let c = Counter { lp: l, idx: i, step, lo, hi };
            self.counters.insert(args[i + 1], c);
            if let Some(&r) = k.ops[l].results.get(i) {
                self.counters.insert(r, c);
            }
        }
        Ok(clip)
    }

    /// `δ` where `y` is `x + δ` or `x − δ` with a constant `δ ≠ 0`.
    fn advance(&self, y: &Operand, x: Value) -> Option<i64> {
        let k = self.k;
        let Operand::Value(v) = y else { return None };
        let ValueDef::Result(d, _) = k.values[*v].def else { return None };
        let is_x = |o: &Operand| matches!(o, Operand::Value(u) if *u == x);
        let d = match &k.ops[d].kind {
            OpKind::Binary(BinOp::Add, a, b) if is_x(a) => k.const_i32(*b)?,
            OpKind::Binary(BinOp::Add, a, b) if is_x(b) => k.const_i32(*a)?,
            OpKind::Binary(BinOp::Sub, a, b) if is_x(a) => -k.const_i32(*b)?,
            _ => return None,
        };
        (d != 0 && d.abs() < CAP).then_some(d)
    }

    /// Checks the operands the trace evaluates at traced op `o` (module doc); the counters'
    /// own yields of a pumped loop are skipped.
    fn sinks(&mut self, o: Op, pumped: bool) -> Result<(), String> {
        let k = self.k;
        let mut ops = super::traced_operands(k, o);
        for &r in &k.ops[o].regions {
            let args = k.region_args(r);
            if let Some(&y) = k.region_ops(r).last()
                && let OpKind::Yield(ys) = &k.ops[y].kind
            {
                let own = |i: usize| pumped && args.get(i + 1).is_some_and(|a| self.counters.contains_key(a));
                ops.extend(ys.iter().enumerate().filter(|(i, _)| !own(*i)).map(|(_, y)| *y));
            }
        }
        for x in &ops {
            let f = self.operand(x)?;
            let Some(lp) = f.lp else { continue };
            if f.s != 0 {
                let what = match x {
                    Operand::Value(v) => self.name(*v),
                    Operand::Imm(_) => "a value".into(),
                };
                return Err(format!("premise (2) fails: {what}, which the trace evaluates, grows with a counter (by {} every {} trips) instead of reading its residues", f.s, f.m));
            }
            let m = self.modulus.entry(lp).or_insert(1);
            *m = lcm(*m, f.m);
            if *m > CAP {
                return Err("premise (2) fails: the residues read of a counter have a period above 2^16".into());
            }
        }
        Ok(())
    }

    /// The form of an operand; a value reading no counter is `lp: None` with its constant or
    /// the whole `i32` range.
    fn operand(&mut self, o: &Operand) -> Result<Form, String> {
        if let Some(c) = self.k.const_i32(*o) {
            return Ok(Form { lp: None, m: 1, s: 0, lo: c as i128, hi: c as i128, c: Some(c) });
        }
        let none = Form::periodic(None, 1, I32);
        match o {
            Operand::Value(v) => Ok(self.value(*v)?.unwrap_or(none)),
            Operand::Imm(_) => Ok(none),
        }
    }
}

impl Res<'_> {
    /// The form of `v` (`None`: it reads no counter), memoised.
    fn value(&mut self, v: Value) -> Result<Option<Form>, String> {
        if let Some(&f) = self.memo.get(&v) {
            return Ok(f);
        }
        if let Some(c) = self.counters.get(&v) {
            return Ok(Some(Form { lp: Some(c.lp), m: 1, s: c.step, lo: c.lo, hi: c.hi, c: None }));
        }
        let k = self.k;
        // A loop's own values read no counter unless its inputs do (checked below); the
        // provisional `None` closes the cycle through its yields.
        self.memo.insert(v, None);
        let f = match k.values[v].def {
            ValueDef::Param(_) => None,
            ValueDef::RegionArg(r, _) => match k.parents().region_op[r] {
                Some(l) if matches!(k.ops[l].kind, OpKind::For { .. } | OpKind::While { .. }) => self.carried(l, v)?,
                _ => None,
            },
            ValueDef::Result(d, i) => self.result(d, i, v)?,
        };
        self.memo.insert(v, f);
        Ok(f)
    }

    /// The values of a loop `l` (arguments, results) other than counters: `None` when no
    /// bound, init or yield reads a counter (a pumped loop's other iteration values are its
    /// state, taken as they are), else the premise fails.
    fn carried(&mut self, l: Op, v: Value) -> Result<Option<Form>, String> {
        let k = self.k;
        let body = k.ops[l].regions[0];
        let pumped_state = self.counters.values().any(|c| c.lp == l);
        let mut ins = super::traced_operands(k, l);
        if let Some(&y) = k.region_ops(body).last()
            && let OpKind::Yield(ys) = &k.ops[y].kind
        {
            ins.extend(ys.iter().copied());
        }
        if pumped_state {
            // Its state's yields are checked as the trace's operands (`sinks`).
            return Ok(None);
        }
        for x in &ins {
            if self.operand(x)?.lp.is_some() {
                return Err(format!("premise (2) fails: {}, a value of a loop inside the loop up to the trip count, is carried from a counter", self.name(v)));
            }
        }
        Ok(None)
    }

    /// The form of result `i` (value `v`) of op `d`.
    fn result(&mut self, d: Op, i: usize, v: Value) -> Result<Option<Form>, String> {
        let k = self.k;
        let f = match &k.ops[d].kind {
            OpKind::Binary(b, x, y) => {
                let (x, y) = (self.operand(x)?, self.operand(y)?);
                self.binary(*b, x, y, v)?
            }
            OpKind::Unary(u, x) => {
                let x = self.operand(x)?;
                match u {
                    UnOp::Neg => Form { s: -x.s, lo: -x.hi, hi: -x.lo, c: None, ..x },
                    _ => self.only_periodic(&[x], v, I32)?,
                }
            }
            OpKind::Cmp(_, x, y) => {
                let xs = [self.operand(x)?, self.operand(y)?];
                self.only_periodic(&xs, v, (0, 1))?
            }
            OpKind::Select(c, x, y) => {
                let xs = [self.operand(c)?, self.operand(x)?, self.operand(y)?];
                let r = (xs[1].lo.min(xs[2].lo), xs[1].hi.max(xs[2].hi));
                self.only_periodic(&xs, v, r)?
            }
            OpKind::If { cond } => {
                let mut xs = vec![self.operand(cond)?];
                for &r in &k.ops[d].regions.clone() {
                    if let Some(&y) = k.region_ops(r).last()
                        && let OpKind::Yield(ys) = &k.ops[y].kind
                        && let Some(y) = ys.get(i)
                    {
                        xs.push(self.operand(&y.clone())?);
                    }
                }
                self.only_periodic(&xs, v, I32)?
            }
            OpKind::For { .. } | OpKind::While { .. } => return self.carried(d, v),
            _ => return Ok(None),
        };
        Ok(f.lp.is_some().then_some(f))
    }

    /// The loop of the counters two forms read (premise fails where they are two loops').
    fn join(&self, xs: &[Form], v: Value) -> Result<Option<Op>, String> {
        let mut lp = None;
        for x in xs {
            match (lp, x.lp) {
                (Some(a), Some(b)) if a != b => {
                    return Err(format!("premise (2) fails: {} reads the counters of two loops", self.name(v)));
                }
                (None, b) => lp = b,
                _ => {}
            }
        }
        Ok(lp)
    }

    /// A periodic result within `r` when every operand is periodic; else the premise fails.
    fn only_periodic(&self, xs: &[Form], v: Value, r: (i128, i128)) -> Result<Form, String> {
        let lp = self.join(xs, v)?;
        if let Some(x) = xs.iter().find(|x| x.s != 0) {
            return Err(format!("premise (2) fails: {} reads a counter other than through residues (a value growing by {} every {} trips)", self.name(v), x.s, x.m));
        }
        Ok(Form::periodic(lp, xs.iter().fold(1, |m, x| lcm(m, x.m)), r))
    }

    /// The form of `x b y` (module doc).
    fn binary(&self, b: BinOp, x: Form, y: Form, v: Value) -> Result<Form, String> {
        let lp = self.join(&[x, y], v)?;
        let m = lcm(x.m, y.m);
        let lin = |s: i64, lo: i128, hi: i128| match s.abs() <= 1 << 40 && lo.abs() <= 1 << 92 && hi.abs() <= 1 << 92 {
            true => Ok(Form { lp, m, s, lo, hi, c: None }),
            false => Err(self.too_large(v)),
        };
        Ok(match b {
            BinOp::Add => lin(x.shift(m) + y.shift(m), x.lo + y.lo, x.hi + y.hi)?,
            BinOp::Sub => lin(x.shift(m) - y.shift(m), x.lo - y.hi, x.hi - y.lo)?,
            BinOp::Mul => match (x.c, y.c) {
                (_, Some(c)) => scale(x, c).ok_or_else(|| self.too_large(v))?,
                (Some(c), _) => scale(y, c).ok_or_else(|| self.too_large(v))?,
                _ => self.only_periodic(&[x, y], v, I32)?,
            },
            BinOp::Div | BinOp::Rem if y.c.is_some_and(|c| c > 0) => self.divide(b, x, y.c.unwrap_or(1), v)?,
            BinOp::And if mask(y.c).or(mask(x.c)).is_some() => {
                let (x, k) = if mask(y.c).is_some() { (x, mask(y.c)) } else { (y, mask(x.c)) };
                let p = 1i64 << k.unwrap_or(0);
                let m = if x.s == 0 { x.m } else { x.m * (p / gcd(x.s, p)) };
                Form::periodic(x.lp, m, (0, p as i128 - 1))
            }
            _ => self.only_periodic(&[x, y], v, I32)?,
        })
    }

    fn too_large(&self, v: Value) -> String {
        format!("premise (2) fails: {} grows with a counter beyond the bounds taken", self.name(v))
    }

    /// `x div C` or `x rem C` for a constant `C > 0`.
    fn divide(&self, b: BinOp, x: Form, c: i64, v: Value) -> Result<Form, String> {
        if x.s != 0 && !x.exact() {
            return Err(format!("premise (2) fails: the dividend of {} may wrap (its values reach [{}, {}])", self.name(v), x.lo, x.hi));
        }
        let g = if x.s == 0 { c } else { gcd(x.s, c) };
        let m = x.m * (c / g);
        if m > CAP {
            return Err(format!("premise (2) fails: {} reads residues of a counter with a period above 2^16", self.name(v)));
        }
        let (c1, c2) = (c as i128, x.exact());
        Ok(match b {
            BinOp::Div => {
                let r = if c2 { (floor_div_wide(x.lo, c1).unwrap_or(I32.0), floor_div_wide(x.hi, c1).unwrap_or(I32.1)) } else { I32 };
                Form { lp: x.lp, m, s: x.s / g, lo: r.0, hi: r.1, c: None }
            }
            _ => Form::periodic(x.lp, m, (0, c1 - 1)),
        })
    }
}

/// `c·x`: the step and interval scaled (the wrap commutes with the product); `None` beyond
/// the bounds taken (a step above 2^40, an interval beyond 2^90).
fn scale(x: Form, c: i64) -> Option<Form> {
    const BIG: i128 = 1 << 90;
    let (a, b) = (x.lo * c as i128, x.hi * c as i128);
    let s = x.s.checked_mul(c).filter(|s| s.abs() <= 1 << 40)?;
    (a.abs() <= BIG && b.abs() <= BIG).then_some(Form { s, lo: a.min(b), hi: a.max(b), c: None, ..x })
}

/// `k` where constant `c` is `2^k − 1` (`k ≤ 31`).
fn mask(c: Option<i64>) -> Option<u32> {
    let c = c?;
    (c >= 0 && c < i32::MAX as i64 && (c + 1).count_ones() == 1).then(|| (c + 1).trailing_zeros())
}
