//! Seed 002's counter computation (`populate_barriers_counters`), kept as a test oracle and
//! as the baseline of the wait-counter benchmark: walk backwards from the consumer through the
//! control flow, counting the operations of the counter's queue, until a target copy is
//! reached (that path's count), the kernel start is reached (a null async dependency: the
//! path constrains nothing), or the counter reaches its maximum; split the walk at every
//! control-flow merge (an `if`'s arms, a loop head's entry and back edge); the answer is the
//! minimum over paths and targets.
//!
//! Complexity: exponential. A loop body with `m` sequential `if`s has `2^m` paths per
//! iteration, and the walk goes around the back edge until the counter saturates, so it
//! visits `O(2^(m·I))` paths for `I` back-edge crossings. The seed bounds the counter to keep
//! this finite; here the walk also stops after [`MAX_BACK_EDGES`] crossings (a loop with no
//! counted op would otherwise be walked forever). [`crate::sync::waits`] computes the same
//! counts with a polynomial dataflow; tests check the two agree on small loops.

use std::collections::HashMap;

use crate::analysis::inflight::{Queue, queue_of};
use crate::ir::*;
use crate::target::Target;

/// The walk stops (treating the path as saturated) after this many back-edge crossings.
pub const MAX_BACK_EDGES: u32 = 8;

/// The result of a backward walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathWalk {
    /// Minimum number of counted ops between a target copy and the consumer over all paths
    /// that reach one (`None`: no path reaches a target).
    pub count: Option<u32>,
    /// Number of paths walked (to a target, the kernel start, or saturation).
    pub paths: u64,
}

struct Walker<'k> {
    k: &'k Kernel,
    target: Target,
    queue: Queue,
    targets: &'k [Op],
    max: u32,
    parents: &'k Parents,
    index: HashMap<Op, usize>,
    paths: u64,
}

impl Walker<'_> {
    fn ticks(&self, op: Op) -> u32 {
        let issue = queue_of(self.k, &self.target, op).map(|(q, _)| q) == Some(self.queue);
        let gload = matches!(self.k.ops[op].kind, OpKind::GLoad { .. })
            && matches!(self.queue, Queue::Counter(c) if self.target.global_load_counter() == Some(c));
        (issue || gload) as u32
    }

    fn min(a: Option<u32>, b: Option<u32>) -> Option<u32> {
        match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, None) => x,
            (None, y) => y,
        }
    }

    /// Walks backwards from the point just before `ops[i]` of region `r`.
    fn back(&mut self, r: Region, i: usize, count: u32, crossings: u32) -> Option<u32> {
        if count >= self.max || crossings > MAX_BACK_EDGES {
            self.paths += 1;
            return Some(self.max);
        }
        if i == 0 {
            return self.region_start(r, count, crossings);
        }
        let op = self.k.region_ops(r)[i - 1];
        let regions = self.k.ops[op].regions.clone();
        match &self.k.ops[op].kind {
            OpKind::For { .. } => self.head(op, count, crossings),
            OpKind::While { .. } => self.end_of(regions[0], count, crossings),
            OpKind::If { .. } => {
                let a = self.end_of(regions[0], count, crossings);
                let b = match regions.get(1) {
                    Some(e) => self.end_of(*e, count, crossings),
                    None => self.back(r, i - 1, count, crossings),
                };
                Self::min(a, b)
            }
            OpKind::Stage { .. } => self.end_of(regions[0], count, crossings),
            _ => {
                if self.targets.contains(&op) {
                    self.paths += 1;
                    return Some(count);
                }
                let c = count + self.ticks(op);
                self.back(r, i - 1, c, crossings)
            }
        }
    }

    fn end_of(&mut self, r: Region, count: u32, crossings: u32) -> Option<u32> {
        let n = self.k.region_ops(r).len();
        self.back(r, n, count, crossings)
    }

    fn before(&mut self, op: Op, count: u32, crossings: u32) -> Option<u32> {
        match self.parents.op_region[op] {
            Some(r) => self.back(r, self.index[&op], count, crossings),
            None => None,
        }
    }

    /// The head of a `for` loop: merge of the entry and the back edge.
    fn head(&mut self, l: Op, count: u32, crossings: u32) -> Option<u32> {
        let body = self.k.ops[l].regions[0];
        let a = self.before(l, count, crossings);
        let b = self.end_of(body, count, crossings + 1);
        Self::min(a, b)
    }

    fn region_start(&mut self, r: Region, count: u32, crossings: u32) -> Option<u32> {
        let Some(p) = self.parents.region_op[r] else {
            // The kernel start: a null async dependency.
            self.paths += 1;
            return None;
        };
        let regions = self.k.ops[p].regions.clone();
        match &self.k.ops[p].kind {
            OpKind::For { .. } => self.head(p, count, crossings),
            OpKind::While { .. } if r == regions[0] => {
                let a = self.before(p, count, crossings);
                let b = self.end_of(regions[1], count, crossings + 1);
                Self::min(a, b)
            }
            OpKind::While { .. } => self.end_of(regions[0], count, crossings),
            _ => self.before(p, count, crossings),
        }
    }
}

/// Seed 002's backward walk: the minimum, over all backward paths from just before
/// `consumer`, of the number of ops on `queue` issued after the nearest execution of any op
/// in `targets` (capped at `max`).
pub fn walk_counter(
    k: &Kernel,
    target: &Target,
    consumer: Op,
    targets: &[Op],
    queue: Queue,
    max: u32,
) -> PathWalk {
    let mut index = HashMap::new();
    for rd in k.regions().values() {
        for (i, op) in rd.ops().iter().enumerate() {
            index.insert(*op, i);
        }
    }
    let mut w = Walker {
        k,
        target: *target,
        queue,
        targets,
        max,
        parents: k.parents(),
        index,
        paths: 0,
    };
    let count = w.before(consumer, 0, 0);
    PathWalk {
        count,
        paths: w.paths,
    }
}
