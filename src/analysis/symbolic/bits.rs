//! Collective footprints as forms: who touches which element of a `local_load`,
//! `local_store` or tile copy, for the symbolic pair questions (`symbolic::pairs`), with the
//! meaning the enumerator gives them (`analysis::footprint`'s collective touches).
//!
//! A collective access touches every element of its view: one position variable per view
//! dimension, `0 ≤ jᵈ < sᵈ`, whose unit follows from the view's root indices as for a
//! per-thread access. Who touches the element is an [`Owner`]:
//!
//! - a **concrete layout** (`ir::layout`: a linear layout over GF(2) whose lanes and warps
//!   match the block): thread = `R·x ⊕ S·c`, with `x` the position's bits, `R` the writer map
//!   (`ir::layout::OwnerMap::rows`) and, for a read, `c` any combination of the shifts `S`
//!   between the holders of one element (broadcast);
//! - a **named layout that is not concrete**, not async: an abstract thread per (layout
//!   name, view shape, position), never in a warp with any thread (the enumerator's
//!   `Who::Lane`); for an opaque fall-back of a defined encoding, which may hold an element
//!   in several threads, per (access, view shape, position) instead: the access's own mapping;
//! - otherwise (no layout name, or an async access under an opaque layout): unknown threads,
//!   different from every other and in no common warp (`Who::Many(None)`).
//!
//! **Decision** ([`relate`]). When both sides are collective accesses of one view shape and
//! element size whose units meet only at equal positions (`aligned`: unit = `K + E·lin(j)`
//! on both sides with every coefficient of `K` a multiple of `E·P`), the positions are equated
//! and the thread question leaves the solver: two concrete layouts give threads that differ
//! by `M·(x, c_a, c_b)` with `M = [R_a ⊕ R_b | S_a | S_b]` over GF(2), so some pair differs iff
//! `M ≠ 0`, and every differing pair is in one warp iff `M`'s warp rows are zero; one
//! abstract layout never differs from itself; anything else always differs, never in one
//! warp. The integer solver then decides only the slot and loop part (which distances the
//! units meet at). A concrete layout against a per-thread access or an unaligned collective
//! is left to enumeration (`None`); the other owners become linear (`Positions`) or fixed
//! answers. See docs/symbolic.md, "Collective footprints over GF(2)".
//!
//! The access is answered here only where the enumerator's collective touch is exact: the
//! view's indices are uniform (evaluated for thread 0, the first executing thread, when every
//! guard is unconditional), the tile has at most 2^20 elements. A *guarded* collective access
//! (`tdm_load` or `tma_load` under `if %t == 0`, an elected or role-group copy) touches its
//! whole view in an instance iff some thread passes its guards: the side's thread variable
//! is then that existential executing thread, constrained by the guards (the view's indices
//! are uniform, so any executing thread evaluates them as the first one does), and concrete
//! owners, which the enumerator uses only where exactly the layout's threads execute, are
//! left to enumeration. Elsewhere: `None`, and the question is enumerated.
//! Complexity: O(rank) variables per side; O(position bits + shifts) for the GF(2) answer.

use super::form::{Affine, Builder, Form};
use super::solve::Problem;
use crate::analysis::footprint::Footprints;
use crate::ir::layout::{Ownership, ownership};
use crate::ir::*;

/// Who touches an element of one side.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ident {
    /// The thread in this solver variable (a per-thread access).
    Thread(usize),
    /// A collective access: the view's shape, its position variables, and the owner.
    Collective {
        shape: Vec<u64>,
        pos: Vec<usize>,
        owner: Owner,
    },
}

/// Who owns a position of a collective access.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A concrete layout: thread = `⊕ rows[j]` over the set bits `j` of the row-major
    /// position, `⊕` any combination of `shifts` (a read's broadcast holders; none for a
    /// write).
    Linear { rows: Vec<u32>, shifts: Vec<u32> },
    /// An abstract thread per position of a named, non-concrete layout (with this name), or
    /// of one access's own mapping (this op: an opaque fall-back of a defined encoding).
    Lane(String, Option<Op>),
    /// Unknown threads, different from any other and in no common warp.
    Any,
}

/// How "two different threads" reads for a pair of sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Distinct {
    /// Two thread variables that must differ (intra-warp is a question).
    Threads(usize, usize),
    /// Two positions of one abstract layout that must differ (never intra-warp).
    Positions(usize, usize),
    /// Decided without the solver: every intersection is a conflict (`conflict`) or none
    /// is, and whether every conflicting pair lies in one warp (`intra`).
    Fixed { conflict: bool, intra: bool },
}

/// The relation of two sides' identities, given their unit forms and units per element;
/// where both are collective accesses of one shape whose units meet only at equal
/// positions, the positions are equated in `p` and the thread question is decided over
/// GF(2). `None`: a concrete layout the solver cannot take (enumerate).
pub fn relate(p: &mut Problem, a: (&Ident, &Affine, i64), b: (&Ident, &Affine, i64), warp: u32) -> Option<Distinct> {
    use Ident::*;
    let any = Distinct::Fixed { conflict: true, intra: false };
    match (a.0, b.0) {
        (Thread(x), Thread(y)) => Some(Distinct::Threads(*x, *y)),
        (Thread(_), Collective { owner, .. }) | (Collective { owner, .. }, Thread(_)) => {
            (!matches!(owner, Owner::Linear { .. })).then_some(any)
        }
        (
            Collective { shape: sa, pos: pa, owner: oa },
            Collective { shape: sb, pos: pb, owner: ob },
        ) => {
            let aligned = sa == sb && a.2 == b.2 && aligned(sa, (a.1, pa), (b.1, pb), a.2);
            if aligned {
                for (&x, &y) in pa.iter().zip(pb) {
                    p.add(&[(x, 1), (y, -1)], 0, 0);
                }
            }
            match (oa, ob) {
                (Owner::Linear { rows: ra, shifts: xa }, Owner::Linear { rows: rb, shifts: xb })
                    if aligned =>
                {
                    Some(gf2(ra, xa, rb, xb, warp))
                }
                (Owner::Linear { .. }, _) | (_, Owner::Linear { .. }) => None,
                (Owner::Lane(n, x), Owner::Lane(m, y)) if (n, x) == (m, y) && sa == sb => Some(if aligned {
                    Distinct::Fixed { conflict: false, intra: false }
                } else {
                    Distinct::Positions(lane_pos(p, sa, pa), lane_pos(p, sb, pb))
                }),
                _ => Some(any),
            }
        }
    }
}

/// The GF(2) answer for two concrete layouts at one position: the two threads differ by
/// `M·x` with `M = [Ra ⊕ Rb | Sa | Sb]` and `x` = (position bits, both sides' shift
/// coefficients), every `x` possible. Some pair differs iff `M ≠ 0` (some column is
/// nonzero); every differing pair lies in one warp iff the warp rows of `M` are zero (a
/// column with a warp bit is an `x` whose pair crosses warps).
fn gf2(ra: &[u32], xa: &[u32], rb: &[u32], xb: &[u32], warp: u32) -> Distinct {
    let cols: Vec<u32> = ra
        .iter()
        .zip(rb)
        .map(|(x, y)| x ^ y)
        .chain(xa.iter().copied())
        .chain(xb.iter().copied())
        .collect();
    Distinct::Fixed {
        conflict: cols.iter().any(|&c| c != 0),
        intra: cols.iter().all(|&c| c < warp.max(1)),
    }
}

/// Whether the units of two collective sides of one shape meet only at equal positions: each
/// unit is `K + E·lin(pos)` with `lin` the row-major position (the same position coefficients
/// on both sides), and every coefficient of `K_a`, `K_b` and `K_a − K_b`'s constant is a
/// multiple of `E·P` (`P` elements in the view): then `K_a − K_b = E·(lin_b − lin_a)` with
/// `|lin_b − lin_a| < P` forces both sides equal.
fn aligned(shape: &[u64], a: (&Affine, &[usize]), b: (&Affine, &[usize]), e: i64) -> bool {
    let total: i64 = shape.iter().map(|&d| d as i64).product();
    let Some(block) = total.checked_mul(e) else {
        return false;
    };
    let mut stride = e;
    let mut want = vec![0i64; shape.len()];
    for (d, &n) in shape.iter().enumerate().rev() {
        want[d] = stride;
        stride = stride.saturating_mul(n as i64);
    }
    let rest = |u: &Affine, pos: &[usize]| -> Option<Affine> {
        for (&v, &w) in pos.iter().zip(&want) {
            if u.terms.iter().find(|t| t.0 == v).map(|t| t.1) != Some(w) {
                return None;
            }
        }
        let terms = u.terms.iter().copied().filter(|t| !pos.contains(&t.0)).collect();
        Some(Affine { terms, c: u.c })
    };
    let (Some(ka), Some(kb)) = (rest(a.0, a.1), rest(b.0, b.1)) else {
        return false;
    };
    ka.terms.iter().chain(&kb.terms).all(|t| t.1 % block == 0) && (ka.c - kb.c) % block == 0
}

/// The row-major position of a side as one variable (for [`Distinct::Positions`]).
fn lane_pos(p: &mut Problem, shape: &[u64], pos: &[usize]) -> usize {
    let total: i64 = shape.iter().map(|&d| d as i64).product();
    let v = p.var(0, total - 1);
    let mut t = vec![(v, -1)];
    let mut stride = 1i64;
    for (&x, &d) in pos.iter().zip(shape).rev() {
        t.push((x, stride));
        stride *= d as i64;
    }
    p.add(&t, 0, 0);
    v
}

/// The element a collective access touches (root-relative index forms of its view, before
/// the view's offsets) and who touches it. `b`'s thread variable is fixed to 0 (the view's
/// indices are uniform: the enumerator evaluates them for the first executing thread).
/// `None`: not exact here, enumerate.
pub fn collective(
    fp: &Footprints,
    b: &mut Builder,
    ai: usize,
    layout: Option<&str>,
    guarded: bool,
) -> Option<(Vec<Form>, Ident)> {
    let k = fp.k;
    let a = &fp.accesses[ai];
    let shape = k.shape(a.access.mem);
    let total = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    if total.is_none_or(|t| t == 0) || shape.is_empty() {
        return None;
    }
    if total.is_none_or(|t| t > 1 << 20) || !view_uniform(fp, a.access.mem) {
        // The enumerator's whole-buffer touch by unknown threads (`pairs::whole_buffer`).
        let idx = shape.iter().map(|_| Form::Unknown).collect();
        let who = Ident::Collective {
            shape: Vec::new(),
            pos: Vec::new(),
            owner: Owner::Any,
        };
        return Some((idx, who));
    }
    if !guarded {
        b.p.lo[b.tid] = 0;
        b.p.hi[b.tid] = 0;
    }
    let pos: Vec<usize> = shape.iter().map(|&d| b.p.var(0, d as i64 - 1)).collect();
    let idx = pos.iter().map(|&v| Form::Known(Affine::var(v))).collect();
    let owner = match (layout, ownership(k, layout, &shape, fp.warp)) {
        // A role-relative layout (threads from `first`) is left to enumeration.
        (_, Ownership::Concrete(c)) if c.first != 0 => return None,
        // Under a guard the enumerator takes the concrete owners only where exactly the
        // layout's threads execute, which is a question about every thread: enumerate.
        (_, Ownership::Concrete(_)) if guarded => return None,
        (_, Ownership::Concrete(c)) => Owner::Linear {
            rows: c.owners.rows.clone(),
            shifts: if a.access.kind.reads() { c.owners.shifts.clone() } else { Vec::new() },
        },
        (Some(name), own) if !a.access.kind.is_async() => {
            Owner::Lane(name.to_string(), (!own.one_owner_by_name()).then_some(a.id.op))
        }
        _ => Owner::Any,
    };
    Some((idx, Ident::Collective { shape, pos, owner }))
}

/// Whether a memref's view indices are the same in every thread that runs one instance of
/// the access (`Uniformity::executor_uniform`: the enumerator's condition for an exact
/// collective touch).
fn view_uniform(fp: &Footprints, m: MemRef) -> bool {
    match m {
        MemRef::Buffer(_) => true,
        MemRef::View(v) => {
            let vd = &fp.k.views[v];
            vd.indices.iter().all(|ix| match ix {
                ViewIndex::At(o) => fp.uniformity().executor_uniform(o),
                ViewIndex::Range(..) => true,
            }) && view_uniform(fp, vd.base)
        }
    }
}
