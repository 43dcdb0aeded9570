//! Long constant loops in `analysis::mbar_protocol`: the verdict of a trace whose loops run
//! `C` trips (a warp-specialized pipeline of 10^7 trips) read from the trace of a trip count
//! `C' < C` with `C' ≡ C` modulo the period of the loops' iterations (docs/async.md, "Long
//! constant loops").
//!
//! The every-trip-count argument of the sibling `mbar_trips` pumps a symbolic trip count `T`;
//! here the pumped bound is a constant. Every `for n = lo to C step 1` holding mbarrier ops
//! whose constant trip count exceeds [`LONG`] is *long*; all long loops must share `C` and
//! lie inside no other loop. Premises (each failure declines: the full trace decides):
//!
//! 1. *The counter only through residues* ([`modulus`]): in the operands the trace evaluates
//!    inside a long loop (bounds, conditions, mbarrier slots, parities, the values the loop
//!    and the `if`s and loops in it yield), the counter `n` is read only through arithmetic
//!    that ends in `rem` by a positive constant. Each value is classified as loop-invariant,
//!    *periodic* (a function of `n mod m`, the iteration values and invariants) or *affine*
//!    (`x(n + a·t) = x(n) + d·t` exactly: `n`, `±` a constant or another affine value, `×` a
//!    constant, `div` by a positive constant — floor division — with a bound on `|x|` over
//!    the run below 2^31, so no `i32` wraps); `x rem B` of an affine `x` is periodic with
//!    period `a·B / gcd(d, B)`. An affine value anywhere else (a comparison, an index, a
//!    yield) declines. `M` is the lcm of every period reached: each iteration's events are a
//!    function of its *state* `(n mod M, iteration values)`, and the state evolves
//!    deterministically, so from its first repeat on it is periodic.
//!    *Counters carried as `c + δ`* (Triton's `iter(%i = 0) … yield %i + 1`): an
//!    iteration value that never repeats is state the period search cannot use; where the
//!    sibling `mbar_counters` shows every evaluated operand reads it only through residues
//!    (its premises, with the counter's values over all `C` trips within `i32`), each such
//!    counter is taken modulo `|δ|·M` in the states below. Every evaluated operand is then a
//!    function of `n mod m` with the iteration values held (premise 1) and of the projected
//!    counters with the rest held (`mbar_counters`), so of both together, and the projected
//!    state evolves by a function of itself: the argument below holds unchanged (s38's N5).
//! 2. *The period, from a trace* ([`stride`]): the trace at `hi = TL` ([`LONG`]) records each
//!    long run's states; per run the first iteration `i0 + P` whose state equals that of an
//!    earlier `i0`; over all runs `P` the lcm, `i0` the largest; `T0 = max lo + i0 + P` and
//!    `T0 + 2P − 1 ≤ TL`.
//! 3. *The block*, checked by `mbar_trips::blocks` on that trace exactly as for a symbolic
//!    trip count (no guard compares the counter: `D = 0`): each thread runs one long loop,
//!    per slot the block shifts every arriving and waiting thread's rounds by one even `Δr`.
//!
//! Then the trace of `hi + P` is the trace of `hi` with one block inserted and each check of
//! `mbar_protocol` holds for one exactly when it holds for the other, so the verdict of `C`
//! is that of `C' = T0 + (C − T0) mod P`. Only a clean verdict at `C'` (no wait wrong or not
//! decided, reached under the default keys) is returned; anything else declines and the
//! full trace answers as before, so an answer is never changed, only reached sooner.
//!
//! Complexity: one walk of the evaluated operands, two traces of at most [`LONG`] + `2P`
//! trips, and O(P × events) for the blocks: independent of `C`.

use std::collections::{HashMap, HashSet};

use super::counters::Projection;
use super::Iters;
use crate::ir::*;

/// A constant loop of more trips than this is long; its period is sought within a trace of
/// this many trips.
pub const LONG: i64 = 256;

/// The long loops' shared upper bound `C` and each one's lower bound.
pub(super) type Long = (i64, HashMap<Op, i64>);

/// The long loops of the traced ops `traced` (threshold `long`); `Ok(None)` without one.
pub(super) fn long_loops(k: &Kernel, traced: &HashSet<Op>, long: i64) -> Result<Option<Long>, String> {
    let mut c = None;
    let mut loops = HashMap::new();
    for &o in traced {
        let OpKind::For { lo, hi, step, .. } = &k.ops[o].kind else { continue };
        let (Some(lo), Some(hi), Some(st)) = (k.const_i32(*lo), k.const_i32(*hi), k.const_i32(*step)) else { continue };
        if hi - lo <= long {
            continue;
        }
        if st != 1 || lo < 0 {
            return Err("a long loop does not start at a constant ≥ 0 and step by 1".into());
        }
        if k.parents().ancestors(o).iter().any(|&a| matches!(k.ops[a].kind, OpKind::For { .. } | OpKind::While { .. })) {
            return Err("a long loop lies inside another loop".into());
        }
        if *c.get_or_insert(hi) != hi {
            return Err("two long loops have different upper bounds".into());
        }
        loops.insert(o, lo);
    }
    Ok(c.map(|c| (c, loops)))
}

/// A value's class in a long loop's body (module doc, premise 1).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cl {
    /// Defined outside the loop: its constant, if it is one.
    Fixed(Option<i64>),
    /// A function of `n mod m`, the iteration values and loop invariants.
    Per(i64),
    /// `x(n + a·t) = x(n) + d·t`, `|x| ≤ bound` over the run.
    Aff { a: i64, d: i64, bound: i64 },
}

/// Periods and shifts beyond this decline (no overflow in the lcm and products).
const BIG: i64 = 1 << 20;

/// `M`, the lcm of the residues through which the long loops' evaluated operands read their
/// counters (premise 1), or why not.
pub(super) fn modulus(k: &Kernel, c: i64, loops: &HashMap<Op, i64>, traced: &HashSet<Op>) -> Result<i64, String> {
    let mut m = 1;
    for (&l, &lo) in loops {
        let mut w = Classify { k, l, bound: lo.abs().max(c.abs()), memo: HashMap::new(), m: 1 };
        let mut inside: Vec<Op> = traced.iter().copied().filter(|&o| k.parents().ancestors(o).contains(&l)).collect();
        inside.sort_unstable();
        w.yields(l)?;
        for o in inside {
            w.op(o)?;
        }
        m = lcm(m, w.m).filter(|&m| m <= BIG).ok_or("the residues' period is too large")?;
    }
    Ok(m)
}

struct Classify<'k> {
    k: &'k Kernel,
    /// The long loop.
    l: Op,
    /// The largest `|n|` of the run.
    bound: i64,
    memo: HashMap<Value, Cl>,
    /// The lcm of the periods reached.
    m: i64,
}

impl Classify<'_> {
    /// The evaluated operands of traced op `o` (those `mbar_trips::shape` walks).
    fn op(&mut self, o: Op) -> Result<(), String> {
        let k = self.k;
        let ops = super::traced_operands(k, o);
        for x in &ops {
            self.periodic(x)?;
        }
        self.yields(o)
    }

    /// The values the regions of `o` yield, which must not be affine.
    fn yields(&mut self, o: Op) -> Result<(), String> {
        let k = self.k;
        for &r in &k.ops[o].regions {
            if let Some(&y) = k.region_ops(r).last()
                && let OpKind::Yield(ys) = &k.ops[y].kind
            {
                for x in ys.clone() {
                    self.periodic(&x)?;
                }
            }
        }
        Ok(())
    }

    /// Operand `x`, which must not be affine.
    fn periodic(&mut self, x: &Operand) -> Result<(), String> {
        match self.operand(x)? {
            Cl::Aff { .. } => Err("a long loop's counter is read other than through a residue `rem` by a constant".into()),
            _ => Ok(()),
        }
    }

    fn operand(&mut self, x: &Operand) -> Result<Cl, String> {
        match x {
            Operand::Imm(Scalar::I32(c)) => Ok(Cl::Fixed(Some(*c as i64))),
            Operand::Imm(_) => Ok(Cl::Fixed(None)),
            Operand::Value(v) => self.value(*v),
        }
    }

    /// Whether `v` is defined inside the long loop.
    fn inside(&self, v: Value) -> bool {
        let p = self.k.parents();
        let op = match self.k.values[v].def {
            ValueDef::Result(d, _) => Some(d),
            ValueDef::RegionArg(r, _) => p.region_op[r],
            _ => None,
        };
        op.is_some_and(|o| o == self.l || p.ancestors(o).contains(&self.l))
    }

    fn value(&mut self, v: Value) -> Result<Cl, String> {
        if let Some(&c) = self.memo.get(&v) {
            return Ok(c);
        }
        if !self.inside(v) {
            return Ok(Cl::Fixed(self.k.const_i32(Operand::Value(v))));
        }
        // Provisional for cycles through inner iteration values (every period reached is
        // folded into `m`, so the provisional class loses none).
        self.memo.insert(v, Cl::Per(1));
        let c = self.class(v)?;
        if let Cl::Per(p) = c {
            self.m = lcm(self.m, p).filter(|&m| m <= BIG).ok_or("the residues' period is too large")?;
        }
        self.memo.insert(v, c);
        Ok(c)
    }

    fn class(&mut self, v: Value) -> Result<Cl, String> {
        let k = self.k;
        let d = match k.values[v].def {
            ValueDef::RegionArg(r, 0) if k.parents().region_op[r] == Some(self.l) => {
                return Ok(Cl::Aff { a: 1, d: 1, bound: self.bound });
            }
            // The long loop's iteration values are state; an inner op's arguments are
            // functions of its operands, classified where the op is walked.
            ValueDef::RegionArg(r, _) => {
                if let Some(o) = k.parents().region_op[r]
                    && o != self.l
                {
                    self.op(o)?;
                }
                return Ok(Cl::Per(1));
            }
            ValueDef::Result(d, i) => (d, i),
            _ => return Ok(Cl::Per(1)),
        };
        let (d, i) = d;
        match &k.ops[d].kind {
            OpKind::Const(Scalar::I32(c)) => Ok(Cl::Fixed(Some(*c as i64))),
            OpKind::Binary(b, x, y) => {
                let (x, y) = (self.operand(x)?, self.operand(y)?);
                binary(*b, x, y)
            }
            OpKind::Unary(u, x) => match (u, self.operand(x)?) {
                (UnOp::Neg, Cl::Aff { a, d, bound }) => Ok(Cl::Aff { a, d: -d, bound }),
                (_, Cl::Aff { .. }) => Err("a long loop's counter is read through a unary op".into()),
                (_, c) => Ok(Cl::Per(period(c))),
            },
            OpKind::Cmp(_, x, y) => self.joined(&[*x, *y]),
            OpKind::Select(c, x, y) => self.joined(&[*c, *x, *y]),
            OpKind::For { .. } => {
                self.op(d)?;
                Ok(Cl::Per(1))
            }
            // The trace evaluates an `if` result as the taken arm's yield: periodic with its
            // condition's and yields' period (not 1: a residue selects the arm).
            OpKind::If { cond } => {
                self.op(d)?;
                let mut xs = vec![*cond];
                for &r in &k.ops[d].regions {
                    if let Some(&y) = k.region_ops(r).last()
                        && let OpKind::Yield(ys) = &k.ops[y].kind
                        && let Some(x) = ys.get(i)
                    {
                        xs.push(*x);
                    }
                }
                self.joined(&xs)
            }
            _ => Ok(Cl::Per(1)),
        }
    }

    /// Operands none of which may be affine: periodic with the lcm of their periods.
    fn joined(&mut self, xs: &[Operand]) -> Result<Cl, String> {
        let mut p = 1;
        for x in xs {
            match self.operand(x)? {
                Cl::Aff { .. } => return Err("a long loop's counter is read in a comparison or a select".into()),
                c => p = lcm(p, period(c)).filter(|&p| p <= BIG).ok_or("the residues' period is too large")?,
            }
        }
        Ok(Cl::Per(p))
    }
}

fn period(c: Cl) -> i64 {
    match c {
        Cl::Per(p) => p,
        _ => 1,
    }
}

/// The class of `x b y` (module doc, premise 1).
fn binary(b: BinOp, x: Cl, y: Cl) -> Result<Cl, String> {
    use Cl::*;
    let aff = |a: i64, d: i64, bound: i64| -> Result<Cl, String> {
        match a <= BIG && d.abs() <= BIG && bound < i32::MAX as i64 {
            true => Ok(Aff { a, d, bound }),
            false => Err("an affine value of a long loop's counter may wrap or its shift is too large".into()),
        }
    };
    let why = || Err("a long loop's counter is read other than through `±`, `×` or `div` by a constant and a residue".into());
    match (b, x, y) {
        (_, Aff { .. }, _) | (_, _, Aff { .. }) => {}
        (_, x, y) => return Ok(Per(lcm(period(x), period(y)).filter(|&p| p <= BIG).ok_or("the residues' period is too large")?)),
    }
    match (b, x, y) {
        (BinOp::Add | BinOp::Sub, Aff { a, d, bound }, Fixed(Some(c))) => aff(a, d, bound + c.abs()),
        (BinOp::Add, Fixed(Some(c)), Aff { a, d, bound }) => aff(a, d, bound + c.abs()),
        (BinOp::Sub, Fixed(Some(c)), Aff { a, d, bound }) => aff(a, -d, bound + c.abs()),
        (BinOp::Add | BinOp::Sub, Aff { a: a1, d: d1, bound: b1 }, Aff { a: a2, d: d2, bound: b2 }) => {
            let Some(a) = lcm(a1, a2).filter(|&a| a <= BIG) else { return why() };
            let d2 = if b == BinOp::Sub { -d2 } else { d2 };
            aff(a, d1 * (a / a1) + d2 * (a / a2), b1 + b2)
        }
        (BinOp::Mul, Aff { a, d, bound }, Fixed(Some(c))) | (BinOp::Mul, Fixed(Some(c)), Aff { a, d, bound }) if c.abs() <= BIG => {
            aff(a, d * c, bound.saturating_mul(c.abs()))
        }
        (BinOp::Div, Aff { a, d, bound }, Fixed(Some(q))) if q > 0 => {
            let g = gcd(d.abs(), q);
            aff(a * (q / g), d / g, bound)
        }
        (BinOp::Rem, Aff { a, d, .. }, Fixed(Some(q))) if q > 0 => {
            let g = gcd(d.abs(), q);
            let p = a * (q / g);
            if p > BIG {
                return Err("the residues' period is too large".into());
            }
            Ok(Per(p))
        }
        _ => why(),
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    x
}

/// The lcm of two positive numbers, `None` on overflow.
fn lcm(a: i64, b: i64) -> Option<i64> {
    (a / gcd(a, b)).checked_mul(b)
}

/// `(i0, P)` of the long runs `iters` of the trace at `hi = tl` (premise 2), the state of
/// iteration `j` being `(j mod m, iteration values)`, each counter of `proj` taken modulo its
/// modulus (premise 1, carried counters).
pub(super) fn stride(loops: &HashMap<Op, i64>, iters: &[Iters], tl: i64, m: i64, proj: &Projection) -> Result<(i64, i64), String> {
    let (mut i0, mut p) = (0i64, 1i64);
    for r in iters {
        if r.vals.len() as i64 != tl - loops[&r.op] {
            return Err("a long loop does not run once per trip".into());
        }
        let vals = super::trips::project(&r.vals, proj.get(&r.op).map_or(&[][..], |v| &v[..]));
        let mut first: HashMap<(i64, &Vec<Option<i64>>), usize> = HashMap::new();
        let rep = vals.iter().enumerate().find_map(|(j, s)| match first.get(&(j as i64 % m, s)) {
            Some(&i) => Some((i as i64, (j - i) as i64)),
            None => {
                first.insert((j as i64 % m, s), j);
                None
            }
        });
        let Some((a, q)) = rep else {
            return Err(format!("the states of a long loop do not repeat within {tl} trips"));
        };
        i0 = i0.max(a);
        p = lcm(p, q).filter(|&p| p <= tl).ok_or("the long loops' period is too large")?;
    }
    Ok((i0, p))
}
