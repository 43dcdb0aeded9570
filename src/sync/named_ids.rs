//! Named-barrier ids for the role arms that receive a placed sync (docs/split-barriers.md,
//! "Named barriers inside role branches").
//!
//! The placer treats every arm of a role branch (`if in_group @g`) as a legal place for a
//! `named_sync id, n` over the arm's `n` threads; ids are handed out here, after placement,
//! only to the arms that hold a chosen point, in point order (deterministic): each takes the
//! next id that is neither 0 (the block barrier) nor used by the kernel, below the target's
//! limit. When there are fewer such ids than arms, an arm that is the only user of one of the
//! kernel's own ids (every use of the id is a `named_sync` over the arm's count in a region of
//! that arm) reuses its smallest such id instead: only the arm's threads meet at it, in
//! program order, as at any repeated barrier. (Reuse only then keeps the ids of every kernel
//! the fresh ids suffice for as they were.)
//!
//! Invariant: two arms never share an id (arms of role branches run concurrently on disjoint
//! threads, and a barrier counts arrivals per id), and no id the kernel already uses is
//! handed to another set of threads. When the ids run out, E0308 names the arms left without
//! one and the ids in use; nothing is placed. Complexity: O(ops + points).

use std::collections::{BTreeMap, BTreeSet};

use super::{NamedArm, Point, Scope, SyncModel};
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::{OpKind, Region};

/// The id of each role arm that holds a named barrier.
pub type NamedIds = rustc_hash::FxHashMap<Region, u32>;

/// Per id the kernel uses: the arm that is its only user (`Some`), or `None` when it is used
/// elsewhere too, by a `named_arrive`, or with another count.
fn own_ids(model: &SyncModel) -> BTreeMap<u32, Option<NamedArm>> {
    let k = model.k;
    let mut uses: BTreeMap<u32, Option<NamedArm>> = BTreeMap::new();
    for (r, rd) in k.regions().iter() {
        for &op in rd.ops() {
            let (id, user) = match k.ops[op].kind {
                OpKind::NamedSync { id, count } => {
                    let arm = model.named.get(&r).copied().filter(|a| a.count == count);
                    (id, arm)
                }
                OpKind::NamedArrive { id, .. } => (id, None),
                _ => continue,
            };
            uses.entry(id)
                .and_modify(|u| {
                    if *u != user {
                        *u = None
                    }
                })
                .or_insert(user);
        }
    }
    uses
}

/// The ids of the arms holding a block-scope point in a role arm (see the module doc), or
/// E0308 when the target's ids do not suffice.
pub fn named_ids(model: &SyncModel, points: &[Point]) -> Result<NamedIds, Diagnostic> {
    let mut arms: Vec<NamedArm> = Vec::new();
    for p in points {
        if p.scope == Scope::Block
            && let Some(a) = model.named.get(&p.region)
            && !arms.contains(a)
        {
            arms.push(*a);
        }
    }
    let mut ids = NamedIds::default();
    if arms.is_empty() {
        return Ok(ids);
    }
    let uses = own_ids(model);
    let fresh: Vec<u32> = (1..model.named_limit).filter(|i| !uses.contains_key(i)).collect();
    let reuse = arms.len() > fresh.len();
    let mut free = fresh.into_iter();
    let mut none = Vec::new();
    for a in arms {
        let own = || uses.iter().find(|(_, u)| **u == Some(a)).map(|(i, _)| *i);
        let own = if reuse { own() } else { None };
        match own.or_else(|| free.next()) {
            Some(i) => {
                ids.insert(a.arm, i);
            }
            None => none.push(a),
        }
    }
    if none.is_empty() {
        return Ok(ids);
    }
    let own: BTreeSet<u32> = uses.keys().copied().collect();
    Err(out_of_ids(model, &none, &ids, &own))
}

/// `1-9, 12`: a set of ids as ranges.
fn ranges(ids: impl IntoIterator<Item = u32>) -> String {
    let mut parts: Vec<(u32, u32)> = Vec::new();
    for i in ids {
        match parts.last_mut() {
            Some((_, hi)) if *hi + 1 == i => *hi = i,
            _ => parts.push((i, i)),
        }
    }
    let text: Vec<String> = parts
        .iter()
        .map(|&(lo, hi)| if lo == hi { format!("{lo}") } else { format!("{lo}-{hi}") })
        .collect();
    if text.is_empty() { "none".into() } else { text.join(", ") }
}

/// E0308: the arms in `none` need a named barrier and no id is left.
fn out_of_ids(
    model: &SyncModel,
    none: &[NamedArm],
    given: &NamedIds,
    own: &BTreeSet<u32>,
) -> Diagnostic {
    let k = model.k;
    let mut handed: Vec<u32> = given.values().copied().filter(|i| !own.contains(i)).collect();
    handed.sort_unstable();
    let limit = model.named_limit;
    let msg = format!(
        "named-barrier ids ran out: {} role arm(s) need a named barrier and none of the ids 1-{} is left",
        none.len(),
        limit.saturating_sub(1)
    );
    let mut d = Diagnostic::error(DiagKind::Finding, "E0308", msg);
    for a in none {
        if let Some(&first) = k.region_ops(a.arm).first() {
            let label = format!("this role arm ({} threads) gets no id", a.count);
            d = d.with_label(k.span(first), label);
        }
    }
    d.with_note(format!(
        "ids in use: the kernel's own {}; given to other role arms: {}; id 0 is the block barrier, and role arms run concurrently, so no two share an id",
        ranges(own.iter().copied()),
        ranges(handed)
    ))
    .with_help("free ids the kernel uses for its own named barriers, or merge roles so fewer arms need one")
}
