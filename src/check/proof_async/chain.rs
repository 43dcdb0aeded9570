//! Shared in-flight walks of consecutive cp.async copies (`check/proof_async.rs`).
//!
//! What it computes: the records and exit state of a cp.async copy's walk, reusing the walk
//! of the next copy of its region. Copies `c` and `c'` of one region, with only *neutral*
//! ops between them (no regions, no shared access, no sync effect), have this relation: the
//! walk from `c` (state `{tag0: -1}`, its group open) reaches `c'` with that same state (a
//! neutral op records nothing and changes no status; a cp.async issue does not age the
//! groups), records `(c', env, tag0, pending)` there — exactly `c'`'s own issue record — and
//! then walks the rest of the region, its parents and the back edges with the same state,
//! the same unrolled values, relation loop and pinned loop as `c'`'s walk. So the records of
//! `c` are those of `c'` plus `c`'s issue record, and the exit state and pinned loop are
//! `c'`'s. The unrolled copies of a GEMM (hundreds of `cp_async` in one region) are walked
//! once per region and unrolled assignment instead of once each.
//!
//! Invariants: a chain links only cp.async copies (the queue whose transfer at an issue is
//! the identity) of one region, and is keyed by the unrolled loops' values; the record set of
//! a chained copy is the union of its issue records and its base walk's set (an issue record
//! the base walk also met is counted once). The order in which records are tested changes no
//! answer but the first failure's message: on a failure the records are tested again in the
//! sorted order of the unshared walk, so the message is the one it gives.
//!
//! Complexity: one walk per chain instead of one per copy; O(1) per chain link; the record
//! tests stay per copy and record.

use std::rc::Rc;

use rustc_hash::FxHashMap;

use super::{Pair, Queue, Record, State, Tag, Walk, check_record, probe_clone};
use crate::check::proof::PairCx;
use crate::ir::*;

/// One unshared walk: its records (sorted), its state at kernel exit and its pinned loop.
pub(super) struct Walked {
    pub(super) recs: Vec<Record>,
    pub(super) exit: State,
    pub(super) pinned: Option<Op>,
}

/// A copy's walk: its own, or the issue of a copy followed by the next copy's walk.
pub(super) enum Chained {
    Walked(Walked),
    Issue(Op, Rc<Chained>),
}

impl Chained {
    /// The unshared walk at the end of the chain.
    pub(super) fn base(&self) -> &Walked {
        let mut c = self;
        loop {
            match c {
                Chained::Walked(w) => return w,
                Chained::Issue(_, next) => c = next,
            }
        }
    }

    /// The copies whose issue records precede the base walk's, in program order.
    fn issues(&self) -> Vec<Op> {
        let (mut out, mut c) = (Vec::new(), self);
        while let Chained::Issue(op, next) = c {
            out.push(*op);
            c = next;
        }
        out
    }
}

/// Walks per (copy, unrolled loops' values).
pub(super) type ChainMemo = FxHashMap<(Op, Vec<(Value, i64)>), Rc<Chained>>;

/// The walk of cp.async copy `c` (relation loop `l`, unrolled values `env`) from `probe`'s
/// template, sharing the walk of the next copies of its region.
pub(super) fn walk(
    probe: &Walk,
    memo: &mut ChainMemo,
    (c, l, env): (Op, Option<Op>, &[(Value, i64)]),
) -> Rc<Chained> {
    debug_assert_eq!(probe.queue, Queue::CpAsyncGroups);
    let key = |op: Op| (op, env.to_vec());
    if let Some(w) = memo.get(&key(c)) {
        return w.clone();
    }
    let (mut chain, mut base) = (vec![c], None);
    for n in next_issues(probe, c) {
        if let Some(w) = memo.get(&key(n)) {
            base = Some(w.clone());
            break;
        }
        chain.push(n);
    }
    let mut cur = match base {
        Some(w) => w,
        None => {
            let last = chain.pop().unwrap_or(c);
            let mut w = Walk {
                l,
                env: env.to_vec(),
                mbar: None,
                ..probe_clone(probe)
            };
            let exit = w.walk_copy(last, -1);
            let mut recs: Vec<Record> = w.records.into_iter().collect();
            recs.sort();
            let pinned = w.p;
            let w = Rc::new(Chained::Walked(Walked { recs, exit, pinned }));
            memo.insert(key(last), w.clone());
            w
        }
    };
    for &op in chain.iter().rev() {
        cur = Rc::new(Chained::Issue(op, cur));
        memo.insert(key(op), cur.clone());
    }
    cur
}

/// The cp.async copies after `c` in its region up to the first op that is not neutral for
/// the walk: each one's walk is the one `c`'s passes into.
fn next_issues(w: &Walk, c: Op) -> Vec<Op> {
    let k = w.k;
    let Some(r) = w.parents.op_region[c] else {
        return Vec::new();
    };
    let ops = k.region_ops(r);
    let Some(pos) = ops.iter().position(|o| *o == c) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &o in &ops[pos + 1..] {
        let Some(f) = w.facts.ops.get(&o) else {
            break;
        };
        if !k.ops[o].regions.is_empty() || w.watch.contains(&o) || f.sync.is_some() {
            break;
        }
        if f.shared {
            if f.queue != Some(Queue::CpAsyncGroups) {
                break;
            }
            out.push(o);
        }
    }
    out
}

/// Tests every record of `w` against the followed copy (`check_record`); the number of
/// accesses met. `tag0` is the copy's tag at its issue.
pub(super) fn check_all(cx: &PairCx, p: &Pair, w: &Chained, tag0: Tag) -> Result<usize, String> {
    let base = w.base();
    let issues = w.issues();
    let issue = |op: Op| (op, p.env.to_vec(), tag0, true);
    let extra: Vec<Record> = issues
        .iter()
        .map(|&op| issue(op))
        .filter(|r| base.recs.binary_search(r).is_err())
        .collect();
    let mut met = 0;
    let mut failed = false;
    for rec in extra.iter().chain(&base.recs) {
        match check_record(cx, p, rec) {
            Ok(n) => met += n,
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    if !failed {
        return Ok(met);
    }
    // The first failure in the unshared walk's (sorted) order names the pair.
    let mut all: Vec<Record> = extra.into_iter().chain(base.recs.iter().cloned()).collect();
    all.sort();
    for rec in &all {
        check_record(cx, p, rec)?;
    }
    Err("a record failed in one order and not in the other".into())
}
