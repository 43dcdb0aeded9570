//! Unknowns of an iteration-distance test that depend on values fixed during one execution
//! of the distance loop: the parity flips of nested loops (`rem(i1 + i2, 2)` tested at the
//! inner loop's distance) and the thread-cancelling `rem((t + i) - t, 2)`.
//!
//! What it computes: for the loop `L` of a pair's iteration-distance test
//! (`proof::loop_relation`), each free value of the pair's forms that `proof::iv_fn` cannot
//! express as a function of `L`'s induction variable becomes, where it can, a [`Node`]: a
//! function of the induction variable and of *residue variables*. A residue variable stands
//! for one linear combination `W = sum(b_k * w_k)` of uniform values `w_k` defined outside
//! `L`, and takes every residue modulo the lcm `M` of the moduli it is used with.
//!
//! Invariant (why enumerating the residues is exact): the distance test pairs two accesses
//! of one execution of `L` (no interval spans two executions), so every uniform value
//! defined outside `L` (it dominates `L`, is computed before the execution and is equal in
//! all threads) has one value on both sides. `rem` rounds toward negative infinity (docs/ir.md),
//! so `rem(x + W, m)` depends on `W` only through `W mod m`, and on `x` only through
//! `x mod m`, when the `i32` value of `x + W` equals its integer value (the leaves' ranges keep
//! it in `i32`) or `m` divides 2^32. Each actual `W` has its residue among those enumerated,
//! with both sides evaluated at that one residue; two different combinations get independent
//! variables (an over-approximation). Values of the forms that are themselves defined outside
//! `L` are common to both sides and cancel when their coefficients agree
//! ([`Nest::invariant`]).
//!
//! Complexity: building is O(size of the expressions) per free value; a test evaluates each
//! node once per (iteration in one period, residue assignment), at most 4096 of them.

use std::collections::HashSet;

use super::interp::{Val, binary};
use super::proof::{Form, IvFn, affine_exact, eval_iv, form, iv_fn};
use super::proof_async::Enumerated;
use crate::ir::arith::lcm;
use crate::ir::induction::Inductions;
use crate::ir::ranges::Ranges;
use crate::ir::*;

/// Most residue assignments times induction-variable values one test evaluates.
pub(super) const NEST_BUDGET: i64 = 4096;

/// A free value as a function of the distance loop's induction variable and of the residue
/// variables.
#[derive(Clone, Debug)]
pub(super) enum Node {
    Const(i64),
    /// A function of the induction variable alone (`proof::eval_iv` evaluates it).
    Iv(Value),
    /// `(c + sum(coef * leaf(iv)) + W_var) mod m`, `m > 0`.
    Res {
        var: usize,
        m: i64,
        c: i64,
        terms: Vec<(Value, i64)>,
    },
    Bin(BinOp, ScalarType, Box<Node>, Box<Node>),
    Cmp(CmpPred, Box<Node>, Box<Node>),
    Select(Box<Node>, Box<Node>, Box<Node>),
}

/// What building nodes reads.
pub(super) struct NestCx<'a> {
    pub k: &'a Kernel,
    pub td: &'a HashSet<Value>,
    pub en: &'a Enumerated,
    pub ranges: &'a Ranges,
    pub parents: &'a Parents,
}

/// The nodes of one distance loop's test: its residue variables (the combination, sorted,
/// and the modulus its residues are taken in) and the free values expressed so far.
#[derive(Debug, Default)]
pub(super) struct Nest {
    /// The distance loop.
    l: Option<Op>,
    iv: Option<Value>,
    range: (i128, i128),
    vars: Vec<(Vec<(Value, i64)>, i64)>,
    nodes: Vec<(Value, Node, i64)>,
    invariant: Vec<Value>,
}

impl Nest {
    /// The nodes of the free values in `forms` that `iv_fn` does not express, for loop `l`
    /// with induction variable `iv` taking values in `range`.
    pub(super) fn new(
        cx: &NestCx,
        (l, iv, range): (Op, Value, (i128, i128)),
        forms: &[&Form],
    ) -> Nest {
        let mut n = Nest {
            l: Some(l),
            iv: Some(iv),
            range,
            ..Nest::default()
        };
        let ind = &cx.ranges.inductions;
        for f in forms {
            for &(v, _) in &f.free {
                if n.nodes.iter().any(|x| x.0 == v) || n.invariant.contains(&v) {
                    continue;
                }
                if n.defined_outside(cx, v) {
                    n.invariant.push(v);
                    continue;
                }
                if iv_fn(cx.k, ind, v, (iv, range), 0).is_some() {
                    continue;
                }
                let mut vars = n.vars.clone();
                if let Some(node) = n.build(cx, &mut vars, v, 0)
                    && let Some(p) = node_period(cx.k, ind, &node, (iv, range))
                {
                    n.vars = vars;
                    n.nodes.push((v, node, p));
                }
            }
        }
        n
    }

    /// The node of free value `v` and its period in the induction variable.
    pub(super) fn node(&self, v: Value) -> Option<(&Node, i64)> {
        self.nodes.iter().find(|x| x.0 == v).map(|x| (&x.1, x.2))
    }

    /// Whether free value `v` is defined outside the loop (one value on both sides).
    pub(super) fn invariant(&self, v: Value) -> bool {
        self.invariant.contains(&v)
    }

    /// Every assignment of residues to the variables, or `None` past `budget`.
    pub(super) fn assignments(&self, budget: i64) -> Option<Vec<Vec<i64>>> {
        let mut out = vec![Vec::new()];
        for (_, m) in &self.vars {
            if out.len() as i64 * m > budget {
                return None;
            }
            out = out
                .iter()
                .flat_map(|a| {
                    (0..*m).map(move |r| {
                        let mut a = a.clone();
                        a.push(r);
                        a
                    })
                })
                .collect();
        }
        Some(out)
    }

    /// Whether `v` is a uniform value computed before the loop (a parameter, or defined by an
    /// op or region outside it).
    fn defined_outside(&self, cx: &NestCx, v: Value) -> bool {
        let Some(l) = self.l else {
            return false;
        };
        let owner = match cx.k.values[v].def {
            ValueDef::Param(_) => return true,
            ValueDef::Result(op, _) => op,
            ValueDef::RegionArg(r, _) => match cx.parents.region_op[r] {
                Some(o) if o == l => return false,
                Some(o) => o,
                None => return true,
            },
        };
        owner != l && !cx.parents.ancestors(owner).contains(&l)
    }

    fn build(
        &self,
        cx: &NestCx,
        vars: &mut Vec<(Vec<(Value, i64)>, i64)>,
        v: Value,
        depth: u32,
    ) -> Option<Node> {
        let (k, ind) = (cx.k, &cx.ranges.inductions);
        let (iv, range) = (self.iv?, self.range);
        if depth > 32 {
            return None;
        }
        match iv_fn(k, ind, v, (iv, range), 0) {
            Some(IvFn::Const(c)) => return Some(Node::Const(c)),
            Some(IvFn::Periodic(_)) => return Some(Node::Iv(v)),
            Some(IvFn::Affine(a, b)) if affine_exact(a, b, range) => return Some(Node::Iv(v)),
            _ => {}
        }
        let ValueDef::Result(op, _) = k.values[v].def else {
            return None;
        };
        let sub = |o: &Operand, vars: &mut Vec<_>| match o {
            Operand::Imm(s) => Some(Node::Const(s.as_i64())),
            Operand::Value(w) => self.build(cx, vars, *w, depth + 1),
        };
        match &k.ops[op].kind {
            OpKind::Binary(BinOp::Rem, x, Operand::Imm(m)) if m.as_i64() > 0 => {
                self.residue(cx, vars, x, m.as_i64())
            }
            OpKind::Binary(b, x, y) => {
                let (x, y) = (sub(x, vars)?, sub(y, vars)?);
                Some(Node::Bin(*b, k.values[v].ty, Box::new(x), Box::new(y)))
            }
            OpKind::Cmp(p, x, y) => {
                let (x, y) = (sub(x, vars)?, sub(y, vars)?);
                Some(Node::Cmp(*p, Box::new(x), Box::new(y)))
            }
            OpKind::Select(c, x, y) => {
                let (c, x, y) = (sub(c, vars)?, sub(x, vars)?, sub(y, vars)?);
                Some(Node::Select(Box::new(c), Box::new(x), Box::new(y)))
            }
            _ => None,
        }
    }

    /// `rem(x, m)` with `x`'s form split into a constant, functions of the induction
    /// variable, and a combination of values defined outside the loop (one residue
    /// variable); `None` when a thread part remains, another unknown takes part, or the sum
    /// may wrap in `i32` and `m` does not divide 2^32.
    fn residue(
        &self,
        cx: &NestCx,
        vars: &mut Vec<(Vec<(Value, i64)>, i64)>,
        x: &Operand,
        m: i64,
    ) -> Option<Node> {
        let (k, ind) = (cx.k, &cx.ranges.inductions);
        let (iv, range) = (self.iv?, self.range);
        let f = form(k, cx.td, cx.en, x)?.normalized();
        if !f.tpart.is_empty() {
            return None;
        }
        let (mut c, mut terms, mut inv) = (f.c, Vec::new(), Vec::new());
        let (mut lo, mut hi) = (f.c as i128, f.c as i128);
        for &(w, coef) in &f.free {
            let r = cx.ranges.range(w);
            let (a, b) = (coef as i128 * r.lo, coef as i128 * r.hi);
            lo += a.min(b);
            hi += a.max(b);
            match iv_fn(k, ind, w, (iv, range), 0) {
                Some(IvFn::Const(y)) => c = c.wrapping_add(coef.wrapping_mul(y)),
                Some(IvFn::Periodic(_)) => terms.push((w, coef)),
                Some(IvFn::Affine(a, b)) if affine_exact(a, b, range) => terms.push((w, coef)),
                _ if self.defined_outside(cx, w) => inv.push((w, coef)),
                _ => return None,
            }
        }
        let exact = lo >= i32::MIN as i128 && hi <= i32::MAX as i128;
        if !(exact || (m as u64).is_power_of_two()) {
            return None;
        }
        inv.sort();
        let var = match vars.iter().position(|x| x.0 == inv) {
            Some(i) => {
                vars[i].1 = lcm(vars[i].1, m);
                i
            }
            None => {
                vars.push((inv, m));
                vars.len() - 1
            }
        };
        Some(Node::Res { var, m, c, terms })
    }

    /// The value of `node` where the induction variable is `x` and the residue variables
    /// take `res`.
    pub(super) fn eval(&self, k: &Kernel, ind: &Inductions, node: &Node, x: i64, res: &[i64]) -> Option<i64> {
        Some(self.val(k, ind, node, x, res)?.as_i64())
    }

    fn val(&self, k: &Kernel, ind: &Inductions, node: &Node, x: i64, res: &[i64]) -> Option<Val> {
        let iv = self.iv?;
        Some(match node {
            Node::Const(c) => Val::I32(*c as i32),
            Node::Iv(v) => {
                let y = eval_iv(k, ind, *v, iv, x)?;
                if k.values[*v].ty == ScalarType::I1 {
                    Val::I1(y != 0)
                } else {
                    Val::I32(y as i32)
                }
            }
            Node::Res { var, m, c, terms } => {
                let mut s = c.wrapping_add(*res.get(*var)?);
                for (w, coef) in terms {
                    s = s.wrapping_add(coef.wrapping_mul(eval_iv(k, ind, *w, iv, x)?));
                }
                Val::I32(s.rem_euclid(*m) as i32)
            }
            Node::Bin(b, ty, p, q) => {
                let (p, q) = (self.val(k, ind, p, x, res)?, self.val(k, ind, q, x, res)?);
                binary(*b, *ty, p, q)?
            }
            Node::Cmp(pred, p, q) => {
                let (p, q) = (self.val(k, ind, p, x, res)?, self.val(k, ind, q, x, res)?);
                Val::I1(pred.holds(p.as_i64(), q.as_i64()))
            }
            Node::Select(c, p, q) => {
                if self.val(k, ind, c, x, res)?.truthy() {
                    self.val(k, ind, p, x, res)?
                } else {
                    self.val(k, ind, q, x, res)?
                }
            }
        })
    }
}

/// The period of `node` in the induction variable; `None` when a part is not periodic (an
/// affine function of it outside a `rem`).
fn node_period(k: &Kernel, ind: &Inductions, node: &Node, (iv, range): (Value, (i128, i128))) -> Option<i64> {
    let p = match node {
        Node::Const(_) => 1,
        Node::Iv(v) => match iv_fn(k, ind, *v, (iv, range), 0)? {
            IvFn::Const(_) => 1,
            IvFn::Periodic(p) => p,
            IvFn::Affine(..) => return None,
        },
        Node::Res { m, terms, .. } => {
            let mut p = *m;
            for (w, _) in terms {
                if let IvFn::Periodic(q) = iv_fn(k, ind, *w, (iv, range), 0)? {
                    p = lcm(p, q);
                }
            }
            p
        }
        Node::Bin(_, _, a, b) | Node::Cmp(_, a, b) => lcm(
            node_period(k, ind, a, (iv, range))?,
            node_period(k, ind, b, (iv, range))?,
        ),
        Node::Select(c, a, b) => lcm(
            node_period(k, ind, c, (iv, range))?,
            lcm(
                node_period(k, ind, a, (iv, range))?,
                node_period(k, ind, b, (iv, range))?,
            ),
        ),
    };
    (p <= NEST_BUDGET).then_some(p)
}

/// The gcd of the coefficient differences of the values fixed during the execution, as
/// the two sides carry them (a value on one side only counts with its whole coefficient).
pub(super) fn invariant_gcd(a: &[(Value, i64)], b: &[(Value, i64)]) -> i64 {
    let mut g = 0i64;
    for (v, c) in a {
        let other: i64 = b.iter().filter(|x| x.0 == *v).map(|x| x.1).sum();
        g = crate::ir::arith::gcd(g, c.wrapping_sub(other).wrapping_abs());
    }
    for (v, c) in b {
        if !a.iter().any(|x| x.0 == *v) {
            g = crate::ir::arith::gcd(g, c.wrapping_abs());
        }
    }
    g
}

/// `sum(coef * node(v))` over `terms` at induction-variable value `x` and residues `res`;
/// 0 for no terms, `None` when a node cannot be evaluated.
pub(super) fn nested_sum(
    k: &Kernel,
    ind: &Inductions,
    nest: Option<&Nest>,
    terms: &[(Value, i64)],
    (x, res): (i64, &[i64]),
) -> Option<i64> {
    let mut s = 0i64;
    for (v, c) in terms {
        let n = nest?;
        let (node, _) = n.node(*v)?;
        s = s.wrapping_add(c.wrapping_mul(n.eval(k, ind, node, x, res)?));
    }
    Some(s)
}
