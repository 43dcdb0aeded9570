//! Hazards: every pair of shared accesses that needs ordering, and where a barrier removes it.
//!
//! A hazard is an ordered pair (source, destination) of accesses that conflict
//! (`analysis::conflicts`) on some dynamic path from a source instance to a later destination
//! instance: RAW, WAR, WAW or atomic-vs-plain. Paths are classified on the region tree:
//! *forward* (same iteration of every common loop, source earlier in program order) or
//! *carried* by a common loop `L` (the path crosses `L`'s back-edge; the destination runs
//! `d ≥ 1` iterations later, for each `d` the footprints allow: multi-buffering shows up as a
//! conflict at `d = 2` only, say).
//!
//! Each hazard records its *coverage*: the program points through which **every** such path
//! passes. A barrier at any of them removes the hazard; no barrier elsewhere does (on its
//! own). Points are doubled coordinates in a region: `2g` is gap `g` (before op `g`), `2i+1`
//! is op `i` itself (an existing barrier, or a compound op that always executes one). The
//! coverage is
//! - at the *home* region (where the path turns: the region holding both ancestors for a
//!   forward path, `L`'s body for a carried one): the interval `(a, b]` for forward paths;
//!   for carried paths the arc `(a, end] ∪ [start, b]` when `d = 1` conflicts, and the
//!   whole body when only `d ≥ 2` does (such a path runs one full iteration in between);
//! - in the regions below the home on the source's chain: everything after the source's
//!   ancestor; on the destination's chain: everything before it.
//!
//! A barrier inside an `if` arm or an inner loop that the path merely passes is on some paths
//! only (the other arm, the zero-trip loop), so it is not in the coverage: this is how
//! "a barrier on every path" is enforced.
//!
//! Async copies (seed 003, long-term model): an async write as a *destination* is a write at
//! its issue (WAR/WAW need ordering before the issue). As a *source* it becomes visible only at
//! the wait that completes it (the in-flight dataflow's [`LoopCompletion`]): the hazard's
//! source point is that wait, its threads the issuing threads (any thread for collective
//! copies). A destination that
//! touches the copy's elements between issue and completion reads (or writes) in-flight data:
//! a finding that only a wait can fix.
//!
//! Nearest sources (`analysis::nearest`, docs/placement.md): a destination whose nearest
//! conflicting source needs a block barrier is paired only with the sources that source does
//! not make redundant, so straight-line code and flat loop bodies have O(A) hazards and pay
//! O(A) conflict tests; [`find_all_hazards`] keeps every pair (the tests' and `explain`'s
//! reference).
//!
//! Complexity: O(A · (w + P + C_async) · C) for the pairs asked (window `w`, `P` regions holding
//! accesses, `C` the conflict test), O(A² · C) where no destination has a blocker; a pair that
//! cannot yield anything (kinds that cannot conflict, a plain source after its destination
//! with no loop around both) is rejected in O(1) from facts gathered once per access. The
//! in-flight dataflow's answers can come from a memo shared with wait planning
//! ([`find_hazards_memo`]).

use std::collections::HashMap;


use crate::analysis::conflicts::{PairConflict, kinds_conflict, pair_conflict};
use crate::analysis::footprint::{AccessRef, Footprints, Overlap};
use crate::analysis::inflight::{FlowMemo, LoopCompletion};
use crate::analysis::nearest::{Shape, Sources};
use crate::diag::{DiagKind, Diagnostic};
use crate::emit::text::op_label;
use crate::ir::edit::body_len;
use crate::ir::*;
use crate::target::Target;

/// The kind of a hazard.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum HazardKind {
    Raw,
    War,
    Waw,
    /// An atomic against a plain access (or an atomic of another kind).
    Atomic,
}

impl HazardKind {
    pub fn name(self) -> &'static str {
        match self {
            HazardKind::Raw => "RAW",
            HazardKind::War => "WAR",
            HazardKind::Waw => "WAW",
            HazardKind::Atomic => "ATOMIC",
        }
    }
}

/// How the destination instance relates to the source instance.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Carry {
    /// Same iteration of every common loop; the source comes first in program order.
    Forward,
    /// Carried by `loop_op`: the destination runs `min_distance` (or more) iterations later;
    /// `d1` says whether distance 1 conflicts.
    Carried {
        loop_op: Op,
        d1: bool,
        min_distance: u32,
    },
}

/// A contiguous range of points in one region (doubled coordinates, inclusive).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    pub region: Region,
    pub lo: usize,
    pub hi: usize,
}

impl Segment {
    pub fn contains(&self, region: Region, point: usize) -> bool {
        self.region == region && self.lo <= point && point <= self.hi
    }
}

/// A hazard with its coverage.
#[derive(Clone, Debug, PartialEq)]
pub struct Hazard {
    pub src: AccessRef,
    pub dst: AccessRef,
    /// Where the source takes effect: its op, or the wait completing an async source.
    pub src_at: Op,
    pub kind: HazardKind,
    pub carry: Carry,
    /// Every conflicting pair of threads lies in one warp: a warp-level sync suffices.
    pub intra_warp: bool,
    pub witness: Option<Overlap>,
    /// The pair-conflict query (`plen`, `var`) behind the hazard, to enumerate a witness
    /// lazily ([`fill_witnesses`]).
    pub query: Option<(usize, Option<usize>)>,
    /// The region where a barrier is cheapest (the path's turning region).
    pub home: Region,
    /// Coverage in the home region (one range, or two for an arc across the back-edge).
    pub home_ranges: Vec<(usize, usize)>,
    /// Coverage in deeper regions.
    pub chain: Vec<Segment>,
}

impl Hazard {
    /// Every segment of the coverage.
    pub fn segments(&self) -> impl Iterator<Item = Segment> + '_ {
        self.home_ranges
            .iter()
            .map(|&(lo, hi)| Segment {
                region: self.home,
                lo,
                hi,
            })
            .chain(self.chain.iter().copied())
    }

    /// Whether a sync at `(region, point)` is on every path of the hazard.
    pub fn covered_by(&self, region: Region, point: usize) -> bool {
        self.segments().any(|s| s.contains(region, point))
    }
}

/// All hazards of a kernel, and the findings no barrier can fix.
#[derive(Clone, Debug, Default)]
pub struct Hazards {
    pub hazards: Vec<Hazard>,
    pub findings: Vec<Diagnostic>,
}

/// The region path of every placed op: `(region, index)` from the kernel body down.
#[derive(Clone, Debug)]
pub struct Paths {
    pub path: HashMap<Op, Vec<(Region, usize)>>,
    pub region_op: HashMap<Region, Op>,
    pub region_depth: HashMap<Region, usize>,
}

impl Paths {
    pub fn new(k: &Kernel) -> Paths {
        fn go(k: &Kernel, r: Region, stack: &mut Vec<(Region, usize)>, p: &mut Paths) {
            p.region_depth.insert(r, stack.len());
            for (i, &op) in k.regions[r].ops.iter().enumerate() {
                stack.push((r, i));
                p.path.insert(op, stack.clone());
                for &c in &k.ops[op].regions {
                    p.region_op.insert(c, op);
                    go(k, c, stack, p);
                }
                stack.pop();
            }
        }
        let mut p = Paths {
            path: HashMap::new(),
            region_op: HashMap::new(),
            region_depth: HashMap::new(),
        };
        go(k, k.body, &mut Vec::new(), &mut p);
        p
    }

    /// Region and index of an op.
    pub fn pos(&self, op: Op) -> Option<(Region, usize)> {
        self.path.get(&op).and_then(|p| p.last().copied())
    }
}

pub(crate) enum Split {
    /// Ancestors at `level` in one region, source first.
    Forward {
        level: usize,
        region: Region,
        ia: usize,
        ib: usize,
    },
    /// Destination first in the common region.
    Backward,
    /// One op.
    Same,
    /// Different child regions of the op at `level`.
    Siblings {
        level: usize,
        op: Op,
        ra: Region,
        rb: Region,
    },
}

pub(crate) fn split(k: &Kernel, pa: &[(Region, usize)], pb: &[(Region, usize)]) -> Split {
    let mut j = 0;
    loop {
        if j >= pa.len() || j >= pb.len() {
            return Split::Same;
        }
        let (ra, ia) = pa[j];
        let (rb, ib) = pb[j];
        if ra != rb {
            let op = k.regions[pa[j - 1].0].ops[pa[j - 1].1];
            return Split::Siblings {
                level: j - 1,
                op,
                ra,
                rb,
            };
        }
        if ia != ib {
            return if ia < ib {
                Split::Forward {
                    level: j,
                    region: ra,
                    ia,
                    ib,
                }
            } else {
                Split::Backward
            };
        }
        j += 1;
    }
}

fn after_chain(k: &Kernel, p: &[(Region, usize)], from: usize, out: &mut Vec<Segment>) {
    for &(r, i) in p.iter().skip(from) {
        let hi = 2 * body_len(k, r);
        if 2 * i + 2 <= hi {
            out.push(Segment {
                region: r,
                lo: 2 * i + 2,
                hi,
            });
        }
    }
}

fn before_chain(p: &[(Region, usize)], from: usize, out: &mut Vec<Segment>) {
    for &(r, i) in p.iter().skip(from) {
        out.push(Segment {
            region: r,
            lo: 0,
            hi: 2 * i,
        });
    }
}

fn kind_of(a: AccessKind, b: AccessKind) -> HazardKind {
    match (a, b) {
        (AccessKind::Atomic(_), _) | (_, AccessKind::Atomic(_)) => HazardKind::Atomic,
        (x, y) if x.writes() && y.writes() => HazardKind::Waw,
        (x, _) if x.writes() => HazardKind::Raw,
        _ => HazardKind::War,
    }
}

/// Finds every hazard of `k` for `target`.
pub fn find_hazards(k: &Kernel, target: &Target) -> Hazards {
    let mut fp = Footprints::new(k, target.warp);
    find_hazards_with(&mut fp, target)
}

fn label(k: &Kernel, d: Diagnostic, op: Op, msg: String) -> Diagnostic {
    d.with_label(k.span(op), msg)
}

/// Finds every hazard using precomputed footprints (nearest-first: hazards that a nearer
/// source's hazard implies are not built: `analysis::nearest`).
pub fn find_hazards_with(fp: &mut Footprints, target: &Target) -> Hazards {
    find_hazards_pruned(fp, target, true, &mut FlowMemo::default())
}

/// [`find_hazards_with`] whose in-flight dataflow reads and grows `memo` (a memo of this
/// kernel or of one it was derived from by inserting sync ops: see [`FlowMemo`]).
pub fn find_hazards_memo(fp: &mut Footprints, target: &Target, memo: &mut FlowMemo) -> Hazards {
    find_hazards_pruned(fp, target, true, memo)
}

/// Every hazard, including those nearest-first pruning leaves out: the oracle that tests
/// check the pruning against (any placement for the pruned set covers all of these).
pub fn find_all_hazards(k: &Kernel, target: &Target) -> Hazards {
    let mut fp = Footprints::new(k, target.warp);
    find_hazards_pruned(&mut fp, target, false, &mut FlowMemo::default())
}

fn find_hazards_pruned(
    fp: &mut Footprints,
    target: &Target,
    nearest_first: bool,
    memo: &mut FlowMemo,
) -> Hazards {
    let k = fp.k;
    let paths = Paths::new(k);
    let mut out = Hazards::default();
    // Which waits complete each async access: the in-flight dataflow's answer
    // (`analysis::inflight`, which follows a copy across any number of iterations; the
    // forward walk it replaced is a test oracle now, tests/common/completing_waits.rs).
    let inflight = crate::analysis::inflight::completions_memo(k, target, memo);
    out.findings.extend(inflight.warnings.iter().cloned());
    let completion: HashMap<Op, LoopCompletion> = fp
        .accesses
        .iter()
        .filter_map(|a| match a.access.kind {
            AccessKind::AsyncWrite(_) | AccessKind::AsyncRead(_) => {
                Some((a.id.op, inflight.loop_completion(k, a.id.op)))
            }
            _ => None,
        })
        .collect();
    let mut by_space: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
    for (i, a) in fp.accesses.iter().enumerate() {
        by_space.entry(a.space).or_default().push(i);
    }
    let order = k.program_order();
    let shape = Shape::new(fp, &paths, &order);
    for group in by_space.values() {
        // Self-races: one instance of a plain write touching a unit from two threads.
        for &ai in group {
            let a = fp.accesses[ai].clone();
            if a.access.kind != AccessKind::Write {
                continue;
            }
            // The symbolic engine decides most writes; a race it finds is enumerated for the
            // message's unit (the enumerator's first one).
            if fp.symbolic && crate::analysis::symbolic::pairs::self_race_memo(fp, ai) == Some(false) {
                continue;
            }
            let inst = fp.instances(ai);
            if let Some((unit, _)) = inst.iter().find_map(|(_, t)| t.self_overlap()) {
                let d = Diagnostic::error(
                    DiagKind::Finding,
                    "E0301",
                    format!(
                        "{} writes {} from several threads at once",
                        op_label(k, a.id.op),
                        fp.describe_unit(unit)
                    ),
                );
                out.findings.push(label(
                    k,
                    d,
                    a.id.op,
                    "every executing thread writes here; no barrier can order one op's threads"
                        .into(),
                ));
            }
        }
        let first_hazard = out.hazards.len();
        let sources = Sources::new(fp, &paths, &order, &shape, group, nearest_first);
        let cheap = PairFacts::new(fp, &paths, &order, group);
        // Pairs in (source, destination) order, as the full loop visits them: the hazards'
        // order (and the order the conflict tests run in) does not depend on pruning.
        let n = group.len();
        let mut dsts_of: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut keep_all: Vec<u32> = Vec::new();
        for y in 0..n {
            if sources.keeps_all(y) {
                keep_all.push(y as u32);
            } else {
                for x in sources.of(&shape, y) {
                    dsts_of[x].push(y as u32);
                }
            }
        }
        for (x, &ai) in group.iter().enumerate() {
            let dsts = std::mem::take(&mut dsts_of[x]);
            for y in merge_sorted(&dsts, &keep_all) {
                let bi = group[y];
                pair_hazards(fp, &paths, &completion, memo, &cheap, (x, ai), (y, bi), &mut out);
            }
        }
        warn_loaded_indices(fp, &out.hazards[first_hazard..], &mut out.findings);
        // Footprints of one address space are not needed for the next.
        fp.clear_caches();
    }
    // Conservative answers are never silent (collected while footprints were enumerated).
    out.findings.extend(fp.conservative.iter().cloned());
    out
}

/// W1510 for each access of `hazards` whose index depends on a value loaded from memory: it
/// is assumed to touch any element of its buffer, so its hazards (and the syncs placed for
/// them) may not be real. Once per access, in hazard order.
fn warn_loaded_indices(fp: &Footprints, hazards: &[Hazard], out: &mut Vec<Diagnostic>) {
    let k = fp.k;
    let mut seen: std::collections::HashSet<AccessRef> = Default::default();
    for h in hazards {
        for a in [h.src, h.dst] {
            if !seen.insert(a) {
                continue;
            }
            let Some(i) = fp.index(a) else {
                continue;
            };
            let Some(v) = loaded_value(k, &fp.accesses[i].access) else {
                continue;
            };
            let buf = &k.buffers[k.root_buffer(fp.accesses[i].access.mem)].name;
            let d = Diagnostic::warning(
                DiagKind::Finding,
                "W1510",
                format!(
                    "{} is analysed as touching any element of `@{buf}`: its index depends on `%{}`, a value loaded from memory",
                    op_label(k, a.op),
                    k.value_name(v)
                ),
            )
            .with_label(k.span(a.op), "index not known statically")
            .with_note("whether it touches what another thread touches cannot be decided before the kernel runs; smemsync may place more syncs for it than needed");
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
}

/// A value loaded from memory (by a shared or global load, an atomic, any op that reads
/// memory) that the index of `a` (or of the views it goes through) depends on.
fn loaded_value(k: &Kernel, a: &SharedAccess) -> Option<Value> {
    let mut todo: Vec<Operand> = Vec::new();
    if let Footprint::PerThread(ix) = &a.footprint {
        todo.extend(ix.iter().copied());
    }
    let mut mem = a.mem;
    while let MemRef::View(v) = mem {
        for ix in &k.views[v].indices {
            if let ViewIndex::At(o) = ix {
                todo.push(*o);
            }
        }
        mem = k.views[v].base;
    }
    let mut seen: std::collections::HashSet<Value> = Default::default();
    while let Some(o) = todo.pop() {
        let Operand::Value(v) = o else {
            continue;
        };
        if !seen.insert(v) {
            continue;
        }
        let ValueDef::Result(op, _) = k.values[v].def else {
            continue;
        };
        let e = effects(k, op);
        if !e.shared.is_empty() || e.global.iter().any(|g| !g.write) {
            return Some(v);
        }
        k.ops[op].kind.for_each_operand(|x| todo.push(x));
    }
    None
}

/// Fills the witness of every hazard answered symbolically (by enumerating its query):
/// only `--explain` prints witnesses, so only it pays for them.
pub fn fill_witnesses(fp: &mut Footprints, hazards: &mut [Hazard]) {
    for h in hazards.iter_mut().filter(|h| h.witness.is_none()) {
        if let (Some((plen, var)), Some(ai), Some(bi)) = (h.query, fp.index(h.src), fp.index(h.dst)) {
            h.witness = crate::analysis::conflicts::pair_conflict_enumerated(fp, ai, bi, plen, var).witness;
        }
    }
}

/// What the pair loop of one address space reads per access, gathered once so that
/// rejecting a pair is a few array reads (no clone, no hash): the kind, the position in
/// program order, the region-tree path and the enclosing loops.
struct PairFacts<'p> {
    kind: Vec<AccessKind>,
    pos: Vec<usize>,
    path: Vec<Option<&'p [(Region, usize)]>>,
    loops: Vec<Vec<Op>>,
}

impl<'p> PairFacts<'p> {
    fn new(fp: &Footprints, paths: &'p Paths, order: &HashMap<Op, usize>, group: &[usize]) -> Self {
        let acc = |i: usize| &fp.accesses[i];
        PairFacts {
            kind: group.iter().map(|&i| acc(i).access.kind).collect(),
            pos: group.iter().map(|&i| order[&acc(i).id.op]).collect(),
            path: group
                .iter()
                .map(|&i| paths.path.get(&acc(i).id.op).map(|v| v.as_slice()))
                .collect(),
            loops: group.iter().map(|&i| acc(i).loops.clone()).collect(),
        }
    }

    /// Whether the pair (source `x`, destination `y`, positions in the group) can yield a
    /// hazard or a finding. False when the kinds cannot conflict, or when a plain source comes
    /// after the destination (or is the same op) with no loop around both: no execution of `y`
    /// follows one of `x`, and `emit_pair` would build nothing for it (no forward split, no
    /// carrying loop).
    fn may_emit(&self, k: &Kernel, x: usize, y: usize) -> bool {
        let plain = !self.kind[x].is_async();
        if !kinds_conflict(self.kind[x], self.kind[y]) {
            return false;
        }
        if plain
            && self.pos[x] >= self.pos[y]
            && common_len(&self.loops[x], &self.loops[y]) == 0
            && let (Some(pa), Some(pb)) = (self.path[x], self.path[y])
            && matches!(split(k, pa, pb), Split::Backward | Split::Same)
        {
            return false;
        }
        true
    }
}

/// The hazards and findings of one pair (source `x` at `fp.accesses[ai]`, destination `y` at
/// `bi`; `x`, `y` index the address space's group).
#[expect(clippy::too_many_arguments, reason = "pair context")]
fn pair_hazards(
    fp: &mut Footprints,
    paths: &Paths,
    completion: &HashMap<Op, LoopCompletion>,
    memo: &FlowMemo,
    cheap: &PairFacts,
    (x, ai): (usize, usize),
    (y, bi): (usize, usize),
    out: &mut Hazards,
) {
    let k = fp.k;
    if !cheap.may_emit(k, x, y) {
        return;
    }
    let (Some(pa), Some(pb)) = (cheap.path[x], cheap.path[y]) else {
        return;
    };
    if cheap.kind[x].is_async() {
        // Refills of a slot that a placed cross-role handshake orders (`sync::handshake`): the
        // refill waits for the consumers that waited for the previous copy.
        if memo.ordered_tma.contains(&fp.accesses[ai].id.op)
            && memo.ordered_tma.contains(&fp.accesses[bi].id.op)
        {
            return;
        }
        async_pair(fp, paths, completion, ai, bi, pa, pb, out);
        return;
    }
    let src = fp.accesses[ai].id.op;
    emit_pair(fp, ai, bi, src, pa, pb, None, out);
}

/// The union of two ascending lists, ascending, each element once.
fn merge_sorted(a: &[u32], b: &[u32]) -> Vec<usize> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&p), Some(&q)) if p == q => {
                i += 1;
                j += 1;
                p
            }
            (Some(&p), Some(&q)) if p < q => {
                i += 1;
                p
            }
            (Some(&p), None) => {
                i += 1;
                p
            }
            (_, Some(&q)) => {
                j += 1;
                q
            }
            (None, None) => break,
        };
        out.push(next as usize);
    }
    out
}

/// Whether every op enclosing region `r` is a `for` or a `stage`.
pub(crate) fn under_loops_only(k: &Kernel, paths: &Paths, mut r: Region) -> bool {
    while let Some(&op) = paths.region_op.get(&r) {
        if !matches!(k.ops[op].kind, OpKind::For { .. } | OpKind::Stage { .. }) {
            return false;
        }
        match paths.pos(op) {
            Some((parent, _)) => r = parent,
            None => return false,
        }
    }
    true
}

/// Whether an op runs its (only) body region at least once whenever it runs: a stage, or a
/// `for` with constant bounds and at least one iteration.
fn runs_body(k: &Kernel, op: Op) -> Option<Region> {
    match &k.ops[op].kind {
        OpKind::Stage { .. } => Some(k.ops[op].regions[0]),
        OpKind::For { lo, hi, step, .. } => {
            let c = |o: &Operand| match o {
                Operand::Imm(s) => Some(s.as_i64()),
                Operand::Value(v) => match k.values[*v].def {
                    ValueDef::Result(d, _) => match k.ops[d].kind {
                        OpKind::Const(s) => Some(s.as_i64()),
                        _ => None,
                    },
                    _ => None,
                },
            };
            match (c(lo), c(hi), c(step)) {
                (Some(lo), Some(hi), Some(st)) if st > 0 && hi > lo => Some(k.ops[op].regions[0]),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A path that passes an op whole (its odd coordinate lies in a segment) passes every
/// top-level gap of a body that op always runs: those bodies join the coverage (`out`).
fn always_bodies(k: &Kernel, work: &mut Vec<Segment>, out: &mut Vec<Segment>) {
    while let Some(s) = work.pop() {
        let ops = &k.regions[s.region].ops;
        let first = s.lo / 2;
        for (i, &op) in ops.iter().enumerate().skip(first) {
            if 2 * i + 1 > s.hi {
                break;
            }
            if 2 * i + 1 < s.lo {
                continue;
            }
            if let Some(body) = runs_body(k, op) {
                let seg = Segment {
                    region: body,
                    lo: 0,
                    hi: 2 * body_len(k, body),
                };
                if !out.contains(&seg) {
                    out.push(seg);
                    work.push(seg);
                }
            }
        }
    }
}

/// The key of a loop's first iteration, if known.
fn first_key(fp: &Footprints, l: Op) -> Option<i64> {
    let OpKind::For { lo, .. } = &fp.k.ops[l].kind else {
        return None;
    };
    let lo = match lo {
        Operand::Imm(s) => Some(s.as_i64()),
        Operand::Value(v) => match fp.k.values[*v].def {
            ValueDef::Result(d, _) => match fp.k.ops[d].kind {
                OpKind::Const(s) => Some(s.as_i64()),
                _ => None,
            },
            _ => None,
        },
    }?;
    match fp.domains.get(&l)? {
        crate::analysis::footprint::LoopDomain::Exact { .. } => Some(lo),
        crate::analysis::footprint::LoopDomain::Periodic { period, .. } => {
            Some(lo.rem_euclid(*period))
        }
        crate::analysis::footprint::LoopDomain::Unknown { .. } => None,
    }
}

/// Whether the footprints of `ai` and `bi` intersect (whoever touches them) with the first
/// `m` loop keys equal and, when `first` is `Some((level, key))`, the destination's key at
/// `level` equal to `key` (unknown keys match).
fn intersects_at(
    fp: &mut Footprints,
    ai: usize,
    bi: usize,
    m: usize,
    first: Option<(usize, Option<i64>)>,
) -> bool {
    let plen_b = first.map_or(m, |(l, _)| l + 1);
    let ga = fp.grouped(ai, m);
    let gb = fp.grouped(bi, plen_b);
    for (ka, ta) in ga.iter() {
        for (kb, tb) in gb.iter() {
            let eq = (0..m).all(|j| {
                match (ka.get(j).copied().flatten(), kb.get(j).copied().flatten()) {
                    (Some(x), Some(y)) => x == y,
                    _ => true,
                }
            });
            let fk = first.is_none_or(|(l, key)| match (key, kb.get(l).copied().flatten()) {
                (Some(x), Some(y)) => x == y,
                _ => true,
            });
            if eq && fk && ta.intersects(tb).is_some() {
                return true;
            }
        }
    }
    false
}

/// Common loop prefix length of two loop lists.
pub(crate) fn common_len(x: &[Op], y: &[Op]) -> usize {
    x.iter().zip(y).take_while(|(p, q)| p == q).count()
}

/// Emits the hazards from the source (taking effect at `src_at`, whose path is `pa`) to the
/// destination. `shift`: for an async source completed `delta` iterations of loop level
/// `level` after its issue, `Some((level, delta))`.
#[expect(clippy::too_many_arguments, reason = "pair context")]
fn emit_pair(
    fp: &mut Footprints,
    ai: usize,
    bi: usize,
    src_at: Op,
    pa: &[(Region, usize)],
    pb: &[(Region, usize)],
    shift: Option<(usize, u32)>,
    out: &mut Hazards,
) {
    let k = fp.k;
    let (a, b) = (fp.accesses[ai].clone(), fp.accesses[bi].clone());
    let at_loops = fp.loops_of(src_at);
    let m = common_len(&at_loops, &b.loops);
    let kind = kind_of(a.access.kind, b.access.kind);
    let mk = |carry,
              pc: &PairConflict,
              home,
              home_ranges: Vec<(usize, usize)>,
              mut chain: Vec<Segment>| {
        let mut passed: Vec<Segment> = home_ranges
            .iter()
            .map(|&(lo, hi)| Segment {
                region: home,
                lo,
                hi,
            })
            .chain(chain.iter().copied())
            .collect();
        always_bodies(k, &mut passed, &mut chain);
        Hazard {
            src: a.id,
            dst: b.id,
            src_at,
            kind,
            carry,
            intra_warp: pc.intra_warp,
            witness: pc.witness,
            query: pc.query,
            home,
            home_ranges,
            chain,
        }
    };
    // Different arms of a thread-dependent `if` run concurrently in different threads: a
    // conflict there (in one iteration) has no program point between the two accesses at all.
    if let Split::Siblings { op, .. } = split(k, pa, pb)
        && let OpKind::If { cond } = &k.ops[op].kind
        && !fp.uniformity().operand_uniform(cond)
        && a.id < b.id
        && src_at == a.id.op
    {
        let pc = pair_conflict(fp, ai, bi, m, None);
        if pc.conflict & 1 != 0 {
            // Roles synchronized by hand (warp specialization): named barriers or mbarriers in
            // the arms may order the two accesses across the arms, which smemsync neither
            // places nor reasons about; that is a warning, left to the race checker.
            let handshake = k.ops[op]
                .regions
                .iter()
                .any(|&r| region_has_handshake(k, r));
            let what = format!("{} and {}", op_label(k, a.id.op), op_label(k, b.id.op));
            let d = if handshake {
                Diagnostic::warning(
                    DiagKind::Finding,
                    "E0305",
                    format!(
                        "{what} run concurrently in the two arms of a thread-dependent `if`; their order rests on the named barriers or mbarriers in the arms"
                    ),
                )
                .with_note("smemsync does not place or analyse cross-role handshakes; `smemsync check` verifies them")
            } else {
                Diagnostic::error(
                    DiagKind::Finding,
                    "E0305",
                    format!("{what} in the two arms of a thread-dependent `if` race"),
                )
                .with_note("no barrier can separate the arms of a divergent branch")
                .with_help(
                    "move one access out of the branch, or split the branch around a barrier",
                )
            };
            let d = d.with_label(k.span(b.id.op), "this access").with_label(
                k.span(a.id.op),
                "runs concurrently with this one in other threads",
            );
            // Labels: the first one pushed is primary.
            let mut d = d;
            if let Some(l) = d.labels.first_mut() {
                l.primary = true;
            }
            out.findings.push(d);
        }
    }
    // Forward paths.
    let fwd = match split(k, pa, pb) {
        Split::Forward {
            level,
            region,
            ia,
            ib,
        } => {
            let mut chain = Vec::new();
            after_chain(k, pa, level + 1, &mut chain);
            before_chain(pb, level + 1, &mut chain);
            Some((region, vec![(2 * ia + 2, 2 * ib)], chain))
        }
        Split::Siblings { level, op, ra, rb }
            if matches!(k.ops[op].kind, OpKind::While { .. })
                && ra == k.ops[op].regions[0]
                && rb == k.ops[op].regions[1] =>
        {
            let mut chain = Vec::new();
            after_chain(k, pa, level + 1, &mut chain);
            before_chain(pb, level + 2, &mut chain);
            Some((rb, vec![(0, 2 * pb[level + 1].1)], chain))
        }
        _ => None,
    };
    if let Some((home, ranges, chain)) = fwd {
        let (pc, bit) = match shift {
            Some((level, delta)) if level < m => {
                (pair_conflict(fp, ai, bi, m, Some(level)), delta.min(63))
            }
            _ => (pair_conflict(fp, ai, bi, m, None), 0),
        };
        if pc.conflict & (1 << bit) != 0 {
            out.hazards
                .push(mk(Carry::Forward, &pc, home, ranges, chain));
        }
    }
    // Carried paths, one per common loop.
    for (c, &l) in at_loops.iter().enumerate().take(m) {
        let pc = pair_conflict(fp, ai, bi, c + 1, Some(c));
        let delta = match shift {
            Some((level, d)) if level == c => d,
            _ => 0,
        };
        let bits = pc.conflict >> delta.min(62);
        let d1 = bits & 2 != 0;
        let far = bits & !3 != 0;
        if !d1 && !far {
            continue;
        }
        let min_distance = (bits & !1).trailing_zeros();
        let regions = &k.ops[l].regions;
        let Some(jl) = pa.iter().position(|(r, _)| regions.contains(r)) else {
            continue;
        };
        let (ra, ia) = pa[jl];
        let (rb, ib) = pb[jl];
        let body = *regions.last().expect("loop has a body");
        let n = body_len(k, body);
        let mut chain = Vec::new();
        let ranges = match (ra == body, rb == body) {
            (true, true) => {
                after_chain(k, pa, jl + 1, &mut chain);
                before_chain(pb, jl + 1, &mut chain);
                if d1 && ia >= ib {
                    let mut v = vec![(0, 2 * ib)];
                    if 2 * ia + 2 <= 2 * n {
                        v.push((2 * ia + 2, 2 * n));
                    }
                    v
                } else {
                    vec![(0, 2 * n)]
                }
            }
            (false, true) => {
                after_chain(k, pa, jl, &mut chain);
                before_chain(pb, jl + 1, &mut chain);
                vec![(0, 2 * n)]
            }
            (true, false) => {
                after_chain(k, pa, jl + 1, &mut chain);
                before_chain(pb, jl, &mut chain);
                if d1 && 2 * ia + 2 <= 2 * n {
                    vec![(2 * ia + 2, 2 * n)]
                } else {
                    vec![(0, 2 * n)]
                }
            }
            (false, false) => {
                after_chain(k, pa, jl, &mut chain);
                before_chain(pb, jl, &mut chain);
                vec![(0, 2 * n)]
            }
        };
        out.hazards.push(mk(
            Carry::Carried {
                loop_op: l,
                d1,
                min_distance,
            },
            &pc,
            body,
            ranges,
            chain,
        ));
    }
}

#[expect(clippy::too_many_arguments, reason = "pair context")]
fn async_pair(
    fp: &mut Footprints,
    paths: &Paths,
    completion: &HashMap<Op, LoopCompletion>,
    ai: usize,
    bi: usize,
    pa: &[(Region, usize)],
    pb: &[(Region, usize)],
    out: &mut Hazards,
) {
    let k = fp.k;
    let (a, b) = (fp.accesses[ai].clone(), fp.accesses[bi].clone());
    let comp = &completion[&a.id.op];
    let inner = comp.level;
    // An mbarrier wait makes the TMA write visible to every thread that waits (docs/ir.md,
    // `mbar_wait`): when each thread running the destination has run the wait, nothing more
    // is needed. Other waits complete only the waiting thread's own copies.
    let waited_by_all = |fp: &Footprints, w: Op| -> bool {
        if !matches!(a.access.kind, AccessKind::AsyncWrite(AsyncClass::Tma)) {
            return false;
        }
        let b_anc = fp.ancestors(b.id.op);
        fp.ancestors(w)
            .into_iter()
            .filter(|&o| matches!(k.ops[o].kind, OpKind::If { .. }))
            .all(|o| b_anc.contains(&o))
    };
    let in_flight = |fp: &mut Footprints, out: &mut Hazards, note: &str| {
        let d = Diagnostic::error(
            DiagKind::Finding,
            "E0302",
            format!(
                "{} touches shared memory that an async copy may still be writing or reading",
                op_label(k, b.id.op)
            ),
        );
        let d = d.with_label(k.span(b.id.op), "this access may overlap the copy in flight").with_label(k.span(a.id.op), "the copy is issued here").with_note(note.to_string()).with_help("add a wait that completes the copy before this access; a barrier does not complete a copy");
        let _ = fp;
        if !out.findings.contains(&d) {
            out.findings.push(d);
        }
    };
    let m_ab = common_len(&a.loops, &b.loops);
    let forward_ab = matches!(split(k, pa, pb), Split::Forward { .. });
    // The copy completes at `x`, after its innermost loop: an access between the loop and `x`
    // sees it in flight; one after `x` is ordered from `x` on.
    let after_loop = |fp: &mut Footprints, out: &mut Hazards, x: Op| {
        let px = paths.path[&x].clone();
        let before_x = matches!(split(k, pb, &px), Split::Forward { .. });
        if forward_ab && before_x {
            // Where `x` completes the copy in the first iteration of a later loop that also
            // runs the destination, only that iteration's instances precede it.
            let x_loops = fp.loops_of(x);
            let lvl = common_len(&a.loops, &x_loops);
            let first =
                (comp.exit_on_entry && x_loops.len() > lvl && b.loops.get(lvl) == x_loops.get(lvl))
                    .then(|| (lvl, first_key(fp, x_loops[lvl])));
            if intersects_at(fp, ai, bi, m_ab, first) {
                in_flight(
                    fp,
                    out,
                    "after the loop, no completing wait lies between the copy and this access",
                );
            }
        }
        if !waited_by_all(fp, x) {
            emit_pair(fp, ai, bi, x, &px, pb, None, out);
        }
    };
    // In-loop (or same-region) completion.
    match comp.in_loop {
        Some((w, 0)) => {
            let pw = paths.path[&w].clone();
            let before_w = matches!(split(k, pb, &pw), Split::Forward { .. });
            if forward_ab && before_w {
                // A wait found in the first iteration of a later loop: only that iteration's
                // instances of the destination precede it.
                let w_loops = fp.loops_of(w);
                let first = (w_loops.len() > a.loops.len()
                    && b.loops.get(a.loops.len()) == w_loops.get(a.loops.len()))
                .then(|| (a.loops.len(), first_key(fp, w_loops[a.loops.len()])));
                if intersects_at(fp, ai, bi, m_ab, first) {
                    in_flight(
                        fp,
                        out,
                        "no completing wait lies between the copy and this access",
                    );
                }
            }
            if before_w && inner_carried_intersect(fp, ai, bi, inner, m_ab) {
                in_flight(
                    fp,
                    out,
                    "the copy's inner loop issues it again before the wait that completes it",
                );
            }
            if !waited_by_all(fp, w) {
                emit_pair(fp, ai, bi, w, &pw, pb, None, out);
            }
        }
        Some((w, delta)) => {
            let level = inner.expect("a wrapped completion has a loop");
            let l = a.loops[level];
            let pw = paths.path[&w].clone();
            if b.loops.contains(&l) {
                let pc = pair_conflict(fp, ai, bi, level + 1, Some(level));
                let before_w = matches!(split(k, pb, &pw), Split::Forward { .. });
                if (delta > 0 || before_w) && inner_carried_intersect(fp, ai, bi, inner, m_ab) {
                    in_flight(
                        fp,
                        out,
                        "the copy's inner loop issues it again before the wait that completes it",
                    );
                }
                for d in 0..=delta.min(62) {
                    let ok = (d > 0 || forward_ab) && (d < delta || before_w);
                    if ok && pc.intersect & (1 << d) != 0 {
                        in_flight(
                            fp,
                            out,
                            &format!(
                                "the copy completes only {delta} iteration(s) later, at a wait this access precedes"
                            ),
                        );
                        break;
                    }
                }
                if !waited_by_all(fp, w) {
                    emit_pair(fp, ai, bi, w, &pw, pb, Some((level, delta)), out);
                }
            } else if let Some(x) = comp.exit {
                after_loop(fp, out, x);
            } else if comp.exit_drained && waited_by_all(fp, w) {
                // Every execution is completed by `w` inside the loop (the guard rules out
                // the rest), and `w` makes it visible to every thread: nothing left in flight.
            } else if forward_ab {
                let pc = pair_conflict(fp, ai, bi, m_ab, None);
                if pc.intersect != 0 {
                    in_flight(
                        fp,
                        out,
                        "no wait completes the copy on the path that leaves the loop",
                    );
                }
            }
        }
        None => {
            let in_copy_loop = inner.is_some_and(|level| b.loops.contains(&a.loops[level]));
            match comp.exit {
                // Completed only after the copy's loop (a prologue filling several slots):
                // accesses after the loop are ordered from that wait on, as above.
                Some(x) if !in_copy_loop => after_loop(fp, out, x),
                _ => {
                    // Never completed where this access runs: every later overlapping access
                    // is in flight.
                    let pc = pair_conflict(fp, ai, bi, m_ab, None);
                    let carried = (0..m_ab)
                        .any(|c| pair_conflict(fp, ai, bi, c + 1, Some(c)).intersect & !1 != 0);
                    if (forward_ab && pc.intersect & 1 != 0) || carried {
                        in_flight(fp, out, "no wait completes this copy");
                    }
                }
            }
        }
    }
}

/// Whether two accesses inside a common loop deeper than the completion level (`level`, the
/// loop whose body holds the completing wait) touch one unit in different iterations of that
/// deeper loop within one iteration of the completion loop: no wait runs in between.
fn inner_carried_intersect(
    fp: &mut Footprints,
    ai: usize,
    bi: usize,
    level: Option<usize>,
    m_ab: usize,
) -> bool {
    let from = level.map_or(0, |l| l + 1);
    (from..m_ab).any(|c| pair_conflict(fp, ai, bi, c + 1, Some(c)).intersect & !1 != 0)
}

/// Whether a region holds a named barrier or mbarrier op (a hand-written cross-role handshake).
fn region_has_handshake(k: &Kernel, r: Region) -> bool {
    k.regions[r].ops.iter().any(|&o| {
        matches!(
            k.ops[o].kind,
            OpKind::NamedArrive { .. }
                | OpKind::NamedSync { .. }
                | OpKind::MbarArrive { .. }
                | OpKind::MbarWait { .. }
        ) || k.ops[o].regions.iter().any(|&c| region_has_handshake(k, c))
    })
}
