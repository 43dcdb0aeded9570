//! Pair questions through block leaves as shared free variables: when an access's index (or
//! a guard around it) reads an `i32` parameter or a block id that `symbolic::cases` cannot
//! split on (a parameter without a declared range, `%K`, `%stride`; more than
//! `cases::MAX_CASES` combinations; a case the engine declines), the question is asked once
//! with each such leaf a free integer variable over its domain (its declared range, `i32`,
//! or `[0, grid)`) that **both sides share** (`form::with_free_params`, `pairs::compose`):
//! "∃ p, instances of both accesses, t₁ ≠ t₂ with f(t₁, p) = g(t₂, p)". The formulation and
//! its proof are in docs/symbolic.md, "Block leaves as shared free variables".
//!
//! Exactness: a parameter or block id holds one value in the whole run of a block, in every
//! thread and every instance of both accesses, so the run's instance pairs are those of the
//! question at that value of `p`; the question over every `p` is their union. The forms are
//! exact for every value (a form leaving `i32` is its wrapped value, `form::Builder::wrapped`),
//! and an index is in range for every executing instance (an index out of range is an
//! execution error, `check` reports it), so the answer equals the union over `p` of the
//! per-value answers. What the engine cannot express with `p` free (`p` under a product with
//! a thread id, a `div` by `p`, a table on `p`) declines: `None`, and the caller keeps the
//! whole-buffer answer, which `analysis::hazards` reports as W0319 (never silent).
//!
//! Invariants: only parameters and block ids become variables (a loaded value stays unknown:
//! the whole buffer, W1510); the variables of one leaf on the two sides are equated by
//! `pairs::compose`. Complexity: one engine question (its own budget) per question asked,
//! asked only of accesses with an unknown index (`pairs::unknown_index`).

use super::form::{is_block_leaf, with_free_params};
use super::pairs::{self, Mode};
use crate::analysis::conflicts::PairConflict;
use crate::analysis::footprint::Footprints;
use crate::ir::*;

/// Whether access `ai`'s side is the whole buffer only because of block leaves: with them
/// free, its template is exact (`Some(true)`), still the whole buffer (`Some(false)`: some
/// other unknown, a loaded index), or has no encoding (`None`).
fn exact_with_free_params(fp: &Footprints, ai: usize) -> Option<bool> {
    match with_free_params(|| pairs::template(fp, ai, Mode::Plain, &[])) {
        Ok(Some(t)) => Some(!t.whole),
        Ok(None) => Some(true),
        Err(()) => None,
    }
}

/// The pair question of `ai` and `bi` (as `pairs::pair_conflict`) with their block leaves
/// shared free variables. `None`: neither access has an unknown index, one stays the whole
/// buffer with the leaves free (a loaded index), or the engine declines.
pub fn pair_conflict(fp: &Footprints, ai: usize, bi: usize, plen: usize, var: Option<usize>) -> Option<PairConflict> {
    if !(pairs::unknown_index(fp, ai) || pairs::unknown_index(fp, bi)) {
        return None;
    }
    if exact_with_free_params(fp, ai) != Some(true) || exact_with_free_params(fp, bi) != Some(true) {
        return None;
    }
    let r = with_free_params(|| pairs::pair_conflict(fp, ai, bi, plen, var));
    if pairs::tracing() {
        eprintln!("symbolic params pair {ai} {bi} ({plen}, {var:?}): {r:?}");
    }
    r
}

/// [`pairs::intersects_at`] (the in-flight question of `analysis::hazards`: may the two
/// accesses touch a common unit at distance 0) with the block leaves shared free variables,
/// under the same conditions as [`pair_conflict`]. `None`: declined.
pub fn intersects_at(fp: &Footprints, ai: usize, bi: usize, plen: usize, fix: Option<(usize, i64)>) -> Option<bool> {
    if !(pairs::unknown_index(fp, ai) || pairs::unknown_index(fp, bi)) {
        return None;
    }
    if exact_with_free_params(fp, ai) != Some(true) || exact_with_free_params(fp, bi) != Some(true) {
        return None;
    }
    let r = with_free_params(|| pairs::intersects_at(fp, ai, bi, plen, fix));
    if pairs::tracing() {
        eprintln!("symbolic params meets {ai} {bi} ({plen}, {fix:?}): {r:?}");
    }
    r
}

/// The block leaves (parameters, block ids) that the indices and view indices of access
/// `ai` read, through integer arithmetic (not through loads): the values a W0319 names.
pub fn index_leaves(fp: &Footprints, ai: usize) -> Vec<Value> {
    let k = fp.k;
    let a = &fp.accesses[ai];
    let mut ops: Vec<Operand> = Vec::new();
    if let Footprint::PerThread(ix) = &a.access.footprint {
        ops.extend(ix.iter().copied());
    }
    let mut m = a.access.mem;
    while let MemRef::View(v) = m {
        for ix in &k.views[v].indices {
            if let ViewIndex::At(o) = ix {
                ops.push(*o);
            }
        }
        m = k.views[v].base;
    }
    operand_leaves(k, &ops)
}

/// The block leaves (parameters, block ids) that `ops` read through integer arithmetic
/// (not through loads), sorted: the leaves of [`index_leaves`], and the shared free
/// variables of an in-flight question (`symbolic::overlap`).
pub fn operand_leaves(k: &Kernel, ops: &[Operand]) -> Vec<Value> {
    let mut stack: Vec<Value> = ops.iter().filter_map(|o| o.value()).collect();
    let (mut seen, mut out) = (Vec::new(), Vec::new());
    while let Some(v) = stack.pop() {
        if seen.contains(&v) {
            continue;
        }
        seen.push(v);
        if is_block_leaf(k, v) {
            out.push(v);
        } else if let ValueDef::Result(op, _) = &k.values[v].def
            && matches!(
                k.ops[*op].kind,
                OpKind::Binary(..) | OpKind::Unary(..) | OpKind::Cmp(..) | OpKind::Select(..)
            )
        {
            k.ops[*op].kind.for_each_operand(|o| stack.extend(o.value()));
        }
    }
    out.sort();
    out
}

/// The block leaves of access `ai` when its side is the whole buffer through them (an
/// unknown index reading a parameter or a block id); empty otherwise.
///
/// The leaves are found first (a walk of the index's arithmetic): an index that reads no
/// block leaf answers empty either way, without building the access's template
/// (`pairs::unknown_index`), which hazard finding would otherwise build for every access of
/// every hazard (a fifth of placing the 10^6-op generated kernel, whose indices read thread
/// ids only).
pub fn whole_through_leaves(fp: &Footprints, ai: usize) -> Vec<Value> {
    let leaves = index_leaves(fp, ai);
    if leaves.is_empty() || !pairs::unknown_index(fp, ai) {
        return Vec::new();
    }
    leaves
}

/// Whether the pair question of `ai` and `bi` is decided through their block leaves (case
/// by case or with them free), rather than answered with the whole buffer.
pub fn decided(fp: &Footprints, ai: usize, bi: usize, plen: usize, var: Option<usize>) -> bool {
    fp.symbolic && !fp.blind_pair(ai, bi) && super::cases::pair_conflict(fp, ai, bi, plen, var).is_some()
}
