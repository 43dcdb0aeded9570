//! Nearest sources: which sources of each destination access the hazard pair loop asks about
//! (docs/placement.md, *Nearest-source hazards*).
//!
//! For a destination `d`, the *forward blocker* `s` is the nearest earlier plain access that
//! sits directly in a region `R` of `d`'s path (under `for`s and `stage`s only) and whose
//! forward hazard `s → d` needs a block barrier (a conflict in one iteration between threads
//! of different warps). When `R` is a loop body, the *back-edge blocker* `g` is the last plain
//! access directly in `R` after `d`'s ancestor whose hazard `g → d`, carried by that loop,
//! conflicts at distance 1 between warps. A plain source that is *shallow* (directly in `R` or
//! in a region enclosing it) and lies outside the windows `[s, d's ancestor]` and `[g, end of
//! R]` reaches `d` only through `s` (or `g`): its hazards contain `s → d`'s (or `g → d`'s)
//! coverage and are not built. Async sources, deep sources (inside an `if` arm or a loop that
//! does not hold `d`) and the sources of a destination without a blocker are always asked.
//!
//! Invariants: the accesses of one address space are given in program order (`group`); the
//! sources of a destination are returned in that order, each once.
//! Complexity: finding the blockers costs at most [`SCAN`] conflict tests per destination
//! (usually one); enumerating a destination's sources costs O(w + P + C) for a window of `w`
//! accesses, `P` regions directly holding accesses and `C` async accesses.

use rustc_hash::FxHashMap as HashMap;

use super::conflicts::{forward_conflict, kinds_conflict, pair_conflict};
use super::footprint::Footprints;
use super::hazards::{Paths, Split, common_len, split, under_loops_only};
use crate::ir::{EntityRef, Kernel, Op, OpKind, Region};

/// How many earlier (or later) accesses a blocker search examines per destination.
pub const SCAN: usize = 64;

/// What prunes the sources of one destination.
#[derive(Copy, Clone, Debug)]
struct Window {
    /// Depth of `R` on the destination's region path.
    depth: usize,
    /// Position of the forward blocker `s`.
    s_pos: usize,
    /// Last position inside the destination's ancestor op in `R`.
    hi: usize,
    /// Last position inside `R`.
    r_end: usize,
    /// First position of the window after the destination's ancestor, when `R` is a loop
    /// body: the back-edge blocker's, else the one after `hi` (every later source of `R`).
    tail: Option<usize>,
}

/// An op's region path, borrowed from the [`Paths`] arena: (region, index in it) from the
/// kernel body down.
type RegionPath<'p> = &'p [(Region, usize)];

/// The sources of every destination of one address space. The region paths are borrowed
/// from the kernel's [`Paths`] arena (a copy per access was most of this table's
/// allocations on a kernel of many small address spaces).
pub struct Sources<'p> {
    /// Program position of each access of the group.
    pos: Vec<usize>,
    window: Vec<Option<Window>>,
    /// Plain accesses grouped by the region directly holding them: the path of the op that
    /// the first member is (its last entry is that region), and the members.
    by_parent: Vec<(RegionPath<'p>, Vec<usize>)>,
    /// Async accesses (never pruned).
    asyncs: Vec<usize>,
    /// Region path of each access's op (empty: not placed).
    paths: Vec<RegionPath<'p>>,
}

/// A program position per op, by op id: a table where a hash map of every op cost an insert
/// and a rehash per op (two such maps were 8% of hazard finding on a 10^6-op kernel).
/// `usize::MAX` marks an op of the arena that is not placed.
pub struct OpPositions(Vec<usize>);

impl OpPositions {
    /// The pre-order position of every placed op (`Kernel::ops_in_order`).
    pub fn program_order(k: &Kernel) -> OpPositions {
        let mut t = OpPositions(vec![usize::MAX; k.ops.len()]);
        for (i, o) in k.ops_in_order().into_iter().enumerate() {
            t.0[o.index()] = i;
        }
        t
    }

    /// The position of `op`, if it has one.
    pub fn get(&self, op: &Op) -> Option<&usize> {
        self.0.get(op.index()).filter(|&&p| p != usize::MAX)
    }

    fn set(&mut self, op: Op, p: usize) {
        if let Some(slot) = self.0.get_mut(op.index()) {
            *slot = p;
        }
    }
}

impl std::ops::Index<&Op> for OpPositions {
    type Output = usize;
    fn index(&self, op: &Op) -> &usize {
        self.get(op).expect("an op placed in the kernel")
    }
}

/// What the blocker searches read about the kernel, computed once per kernel (not per
/// address space: a kernel may have as many address spaces as ops).
pub struct Shape {
    /// The last program position inside each op's subtree.
    ends: OpPositions,
    /// Regions under thread-dependent control that are not the arm of a role branch: no block
    /// barrier (named or not) is legal in them, so no placement choice is made there.
    quiet: HashMap<Region, bool>,
}

impl Shape {
    pub fn new(fp: &Footprints, paths: &Paths, order: &OpPositions) -> Shape {
        let k = fp.k;
        let u = fp.uniformity();
        let quiet = k
            .regions()
            .iter()
            .map(|(r, _)| {
                let role = paths
                    .region_op
                    .get(&r)
                    .is_some_and(|&o| is_role_branch(k, o));
                (r, u.is_divergent(r) && !role)
            })
            .collect();
        Shape {
            ends: subtree_ends(k, order),
            quiet,
        }
    }
}

/// The last program position inside each op's subtree (pre-order positions).
pub fn subtree_ends(k: &Kernel, order: &OpPositions) -> OpPositions {
    fn go(k: &Kernel, r: Region, order: &OpPositions, out: &mut OpPositions) -> usize {
        let mut last = 0;
        for &op in k.region_ops(r) {
            let mut end = order.get(&op).copied().unwrap_or(0);
            for &c in &k.ops[op].regions {
                end = end.max(go(k, c, order, out));
            }
            out.set(op, end);
            last = last.max(end);
        }
        last
    }
    let mut out = OpPositions(vec![usize::MAX; k.ops.len()]);
    go(k, k.body(), order, &mut out);
    out
}

impl<'p> Sources<'p> {
    /// Finds the blockers of every access of `group` (indices into `fp.accesses`, in program
    /// order). With `prune` false every destination keeps every source.
    pub fn new(
        fp: &mut Footprints,
        paths: &'p Paths,
        order: &OpPositions,
        shape: &Shape,
        group: &[usize],
        prune: bool,
    ) -> Sources<'p> {
        let pos: Vec<usize> = group.iter().map(|&i| order[&fp.accesses[i].id.op]).collect();
        let rpaths: Vec<RegionPath<'p>> = group
            .iter()
            .map(|&i| paths.path.get(&fp.accesses[i].id.op).unwrap_or(&[]))
            .collect();
        let mut by_parent: Vec<(RegionPath<'p>, Vec<usize>)> = Vec::new();
        let mut slot: HashMap<Region, usize> = HashMap::default();
        let mut asyncs = Vec::new();
        for (x, &i) in group.iter().enumerate() {
            if fp.accesses[i].access.kind.is_async() {
                asyncs.push(x);
                continue;
            }
            let Some(&(parent, _)) = rpaths[x].last() else {
                continue;
            };
            let at = *slot.entry(parent).or_insert_with(|| {
                by_parent.push((rpaths[x], Vec::new()));
                by_parent.len() - 1
            });
            by_parent[at].1.push(x);
        }
        let mut window = vec![None; group.len()];
        if prune {
            let cx = Cx {
                paths,
                ends: &shape.ends,
                group,
                pos: &pos,
            };
            for (y, w) in window.iter_mut().enumerate() {
                *w = forward_window(fp, &cx, y);
            }
            for (y, w) in window.iter_mut().enumerate() {
                if let Some(w) = w.as_mut() {
                    back_edge(fp, &cx, y, w);
                }
            }
        }
        Sources {
            pos,
            window,
            by_parent,
            asyncs,
            paths: rpaths,
        }
    }

    /// Whether destination `y` keeps every source.
    pub fn keeps_all(&self, y: usize) -> bool {
        self.window[y].is_none()
    }

    /// The sources of destination `y` that a blocker does not make redundant, in group order
    /// (empty when [`Sources::keeps_all`]: the caller asks every source).
    pub fn of(&self, shape: &Shape, y: usize) -> Vec<usize> {
        let Some(w) = self.window[y] else {
            return Vec::new();
        };
        let first = |p: usize| self.pos.partition_point(|&q| q < p);
        let upto = |p: usize| self.pos.partition_point(|&q| q <= p);
        let mut out: Vec<usize> = (first(w.s_pos)..upto(w.hi)).collect();
        if let Some(t) = w.tail {
            out.extend(first(t)..upto(w.r_end));
        }
        let inside = |p: usize| {
            (w.s_pos..=w.hi).contains(&p) || w.tail.is_some_and(|t| (t..=w.r_end).contains(&p))
        };
        let dpath = self.paths[y];
        let region = |e: &(Region, usize)| e.0;
        for &(path, ref members) in &self.by_parent {
            let depth = path.len() - 1;
            if depth <= w.depth && dpath.get(depth).map(region) == path.last().map(region) {
                // Shallow: only the windows (enumerated above) are asked.
                continue;
            }
            // Deep: the first region of its path off `d`'s. Under thread-dependent control
            // (no legal block barrier, so no tie to break there) the source is dropped like a
            // shallow one; anywhere else it is asked.
            let t = path
                .iter()
                .zip(dpath)
                .take_while(|(a, b)| a.0 == b.0)
                .count();
            if path
                .get(t)
                .is_some_and(|q| shape.quiet.get(&q.0).copied().unwrap_or(false))
            {
                continue;
            }
            out.extend(members.iter().copied().filter(|&x| !inside(self.pos[x])));
        }
        out.extend(self.asyncs.iter().copied().filter(|&x| !inside(self.pos[x])));
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Whether `op` is a role branch: an `if` on `in_group @g` or a role split
/// (`analysis::role_split`).
fn is_role_branch(k: &Kernel, op: Op) -> bool {
    crate::analysis::role_split::branch_group(k, op).is_some()
}

/// What the blocker searches read.
struct Cx<'a> {
    paths: &'a Paths,
    ends: &'a OpPositions,
    group: &'a [usize],
    pos: &'a [usize],
}

/// The forward blocker of destination `y` and the window it leaves, if any.
fn forward_window(fp: &mut Footprints, cx: &Cx, y: usize) -> Option<Window> {
    let k = fp.k;
    let d = cx.group[y];
    let pd = cx.paths.path.get(&fp.accesses[d].id.op)?;
    for x in (0..y).rev().take(SCAN) {
        let s = cx.group[x];
        let (a, b) = (&fp.accesses[s], &fp.accesses[d]);
        if a.access.kind.is_async() || !kinds_conflict(a.access.kind, b.access.kind) {
            continue;
        }
        let Some(ps) = cx.paths.path.get(&a.id.op) else {
            continue;
        };
        let Split::Forward { level, region, ib, .. } = split(k, ps, pd) else {
            continue;
        };
        if ps.len() != level + 1 || !under_loops_only(k, cx.paths, region) {
            continue;
        }
        let m = common_len(&a.loops, &b.loops);
        match forward_conflict(fp, s, d, m) {
            Some(pc) if !pc.intra_warp => {}
            _ => continue,
        }
        let anc = k.region_ops(region)[ib];
        let r_end = match cx.paths.region_op.get(&region) {
            Some(owner) => cx.ends[owner],
            None => usize::MAX,
        };
        let loop_body = cx
            .paths
            .region_op
            .get(&region)
            .is_some_and(|&o| matches!(k.ops[o].kind, OpKind::For { .. }));
        let hi = cx.ends[&anc];
        return Some(Window {
            depth: level,
            s_pos: cx.pos[x],
            hi,
            r_end,
            tail: loop_body.then_some(hi + 1),
        });
    }
    None
}

/// Narrows the window after the destination's ancestor to start at the back-edge blocker,
/// when `R` is a loop body and one is found.
fn back_edge(fp: &mut Footprints, cx: &Cx, y: usize, w: &mut Window) {
    if w.tail.is_none() {
        return;
    }
    let d = cx.group[y];
    let Some(pd) = cx.paths.path.get(&fp.accesses[d].id.op) else {
        return;
    };
    let region = pd[w.depth].0;
    let Some(&l) = cx.paths.region_op.get(&region) else {
        return;
    };
    let Some(c) = fp.accesses[d].loops.iter().position(|&o| o == l) else {
        return;
    };
    let end = cx.pos.partition_point(|&q| q <= w.r_end);
    for x in (0..end).rev().take(SCAN) {
        if cx.pos[x] <= w.hi {
            break;
        }
        let g = cx.group[x];
        let (a, b) = (&fp.accesses[g], &fp.accesses[d]);
        if a.access.kind.is_async() || !kinds_conflict(a.access.kind, b.access.kind) {
            continue;
        }
        let Some(pg) = cx.paths.path.get(&a.id.op) else {
            continue;
        };
        if pg.len() != w.depth + 1 || pg[w.depth].0 != region {
            continue;
        }
        let pc = pair_conflict(fp, g, d, c + 1, Some(c));
        if pc.conflict & 2 != 0 && !pc.intra_warp {
            w.tail = Some(cx.pos[x]);
            return;
        }
    }
}
