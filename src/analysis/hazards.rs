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
//! reference). An async copy completed at the same wait as an earlier copy of its region
//! whose cross-warp hazards with a destination already cover every hazard it could have
//! with it is not paired with that destination (`analysis::completion_blockers`). A plain
//! pair whose accesses both lie below the region where their paths part is not built when an
//! earlier built pair of the same two regions, source no earlier and destination no later,
//! gave cross-warp hazards whose coverages each of its own would contain
//! (`analysis::deep_blockers`: the unrolled GEMM's readers against its copies). Before any
//! of that, a pair of one root buffer whose footprint boxes are disjoint in some dimension
//! shares no byte and is skipped ([`Footprints::boxes_apart`]; docs/placement.md, *Pairs
//! apart by footprint boxes*): the tile copies of an unrolled GEMM, each against the others.
//!
//! Complexity: O(A · (w + P + C_async) · C) for the pairs asked (window `w`, `P` regions holding
//! accesses, `C` the conflict test), O(A² · C) where no destination has a blocker; a pair that
//! cannot yield anything (kinds that cannot conflict, a plain source after its destination
//! with no loop around both) is rejected in O(1) from facts gathered once per access. The
//! in-flight dataflow's answers can come from a memo shared with wait planning
//! ([`find_hazards_memo`]).

use rustc_hash::FxHashMap as HashMap;


use crate::analysis::completion_blockers::{BlockKey, Blocker};
use crate::analysis::deep_blockers::{self, DeepBlockers, DeepKey};
use crate::analysis::every_path;
use crate::analysis::conflicts::{PairConflict, forward_conflict, kinds_conflict, pair_conflict};
use crate::analysis::footprint::{AccessRef, Footprints, UnitConflict};
use crate::analysis::inflight::{FlowMemo, LoopCompletion};
use crate::analysis::nearest::{OpPositions, Shape, Sources};
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
    pub witness: Option<UnitConflict>,
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
    /// The op pairs of the E0305 errors among `findings` (plain accesses in the two arms of a
    /// thread-dependent `if`, no handshake in the arms), first then second as reported: what
    /// `sync::branch_split` may cut.
    pub divergent: Vec<(Op, Op)>,
}

/// The region path of every placed op: `(region, index)` from the kernel body down.
///
/// One arena indexed by op id (issue 12): every op's path is a slice of one vector, and the
/// per-region tables are side tables by region id, so building it is O(Σ depth) with three
/// allocations, and lookups hash nothing. Built once per kernel ([`Footprints::paths`]) and
/// shared by hazard finding and `sync::SyncModel`.
#[derive(Clone, Debug)]
pub struct Paths {
    pub path: OpPaths,
    pub region_op: RegionTable<Op>,
    pub region_depth: RegionTable<usize>,
    /// Per region, the ops that always run their body when they run ([`runs_body`]): (index
    /// in the region, body), ascending by index; a hazard's coverage walks these instead of
    /// every op its segments span ([`always_bodies`]).
    always: AlwaysBodies,
    /// The `if`s that run their then-arm whenever they run, with no else-arm ops
    /// (`analysis::guards::always_then`), filled by [`Paths::with_guards`].
    pub always_then: std::collections::HashSet<Op>,
}

/// The ops of each region that always run their (only) body, in one arena: a region's slice
/// is `flat[lo..hi]`, ascending by the op's index in the region.
#[derive(Clone, Debug)]
struct AlwaysBodies {
    flat: Vec<(u32, Region)>,
    span: SecondaryMap<Region, Option<(u32, u32)>>,
}

impl AlwaysBodies {
    /// The ops of `r` that always run their body, ascending by index.
    fn of(&self, r: Region) -> &[(u32, Region)] {
        match *self.span.get(r) {
            Some((lo, hi)) => &self.flat[lo as usize..hi as usize],
            None => &[],
        }
    }
}

/// Every placed op's region path, stored in one arena (see [`Paths`]).
#[derive(Clone, Debug)]
pub struct OpPaths {
    flat: Vec<(Region, usize)>,
    span: SecondaryMap<Op, Option<(u32, u32)>>,
}

impl OpPaths {
    /// The path of `op` (`None`: not placed in the kernel).
    pub fn get(&self, op: &Op) -> Option<&[(Region, usize)]> {
        let (lo, hi) = (*self.span.get(*op))?;
        Some(&self.flat[lo as usize..hi as usize])
    }
}

impl std::ops::Index<&Op> for OpPaths {
    type Output = [(Region, usize)];
    fn index(&self, op: &Op) -> &[(Region, usize)] {
        self.get(op).unwrap_or(&[])
    }
}

/// A value per region reached from the kernel body, and those regions in visiting order.
#[derive(Clone, Debug)]
pub struct RegionTable<T: Copy> {
    of: SecondaryMap<Region, Option<T>>,
    regions: Vec<Region>,
}

impl<T: Copy> RegionTable<T> {
    fn new() -> Self {
        RegionTable {
            of: SecondaryMap::with_default(None),
            regions: Vec::new(),
        }
    }

    fn insert(&mut self, r: Region, v: T) {
        if self.of.get(r).is_none() {
            self.regions.push(r);
        }
        self.of.set(r, Some(v));
    }

    pub fn get(&self, r: &Region) -> Option<&T> {
        self.of.get(*r).as_ref()
    }

    /// The regions that have a value, in visiting order.
    pub fn keys(&self) -> impl Iterator<Item = &Region> + '_ {
        self.regions.iter()
    }
}

impl<T: Copy> std::ops::Index<&Region> for RegionTable<T> {
    type Output = T;
    fn index(&self, r: &Region) -> &T {
        self.get(r).expect("region reached from the kernel body")
    }
}

impl Paths {
    pub fn new(k: &Kernel) -> Paths {
        fn go(k: &Kernel, r: Region, stack: &mut Vec<(Region, usize)>, p: &mut Paths) {
            p.region_depth.insert(r, stack.len());
            let mut bodies = Vec::new();
            for (i, &op) in k.region_ops(r).iter().enumerate() {
                stack.push((r, i));
                let lo = p.path.flat.len() as u32;
                p.path.flat.extend_from_slice(stack);
                p.path.span.set(op, Some((lo, p.path.flat.len() as u32)));
                if let Some(body) = runs_body(k, op) {
                    bodies.push((i as u32, body));
                }
                for &c in &k.ops[op].regions {
                    p.region_op.insert(c, op);
                    go(k, c, stack, p);
                }
                stack.pop();
            }
            if !bodies.is_empty() {
                let lo = p.always.flat.len() as u32;
                p.always.flat.extend(bodies);
                p.always.span.set(r, Some((lo, p.always.flat.len() as u32)));
            }
        }
        let mut p = Paths {
            path: OpPaths {
                flat: Vec::with_capacity(k.ops.len() * 2),
                span: SecondaryMap::with_default(None),
            },
            region_op: RegionTable::new(),
            region_depth: RegionTable::new(),
            always: AlwaysBodies {
                flat: Vec::new(),
                span: SecondaryMap::with_default(None),
            },
            always_then: Default::default(),
        };
        go(k, k.body(), &mut Vec::new(), &mut p);
        p
    }

    /// [`Paths::new`] with [`Paths::always_then`] filled from the kernel's ranges.
    pub fn with_guards(k: &Kernel, ranges: &crate::ir::ranges::Ranges) -> Paths {
        let mut p = Paths::new(k);
        k.walk(|o| {
            if crate::analysis::guards::always_then(k, ranges, o) {
                p.always_then.insert(o);
            }
        });
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
            let op = k.region_ops(pa[j - 1].0)[pa[j - 1].1];
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
    let deep = (nearest_first && !deep_blockers::kernel_excluded(fp.k))
        .then(|| std::cell::RefCell::new(DeepBlockers::default()));
    let out = find_hazards_run(fp, target, nearest_first, deep.as_ref(), memo);
    let Some(deep) = deep else {
        return out;
    };
    // A pair dropped for a blocker of another index left out an optional arc of its quiet
    // region: exact only where no kept hazard is homed there (the placer reads optional
    // arcs only in regions it solves). Otherwise every pair is built again.
    let quiet = &deep.borrow().quiet;
    if quiet.is_empty() || !out.hazards.iter().any(|h| quiet.contains(&h.home)) {
        return out;
    }
    find_hazards_run(fp, target, nearest_first, None, memo)
}

/// The pair loop of [`find_hazards_pruned`], with the deep blockers `deep` (`None`: every
/// deep pair is built).
fn find_hazards_run(
    fp: &mut Footprints,
    target: &Target,
    nearest_first: bool,
    deep: Option<&std::cell::RefCell<DeepBlockers>>,
    memo: &mut FlowMemo,
) -> Hazards {
    let k = fp.k;
    crate::analysis::symbolic::pairs::forget_questions();
    let paths = fp.paths();
    let mut out = Hazards::default();
    // Which waits complete each async access: the in-flight dataflow's answer
    // (`analysis::inflight`, which follows a copy across any number of iterations; the
    // forward walk it replaced is a test oracle now, tests/common/completing_waits.rs).
    // A kernel without a copy or wgmma has nothing in flight: the dataflow would answer
    // nothing (no completion, no warning), so it is not run (it was 8% of placing the 10^6-op
    // generated kernel).
    let inflight = if may_have_async(k) {
        crate::analysis::inflight::completions_memo(k, target, memo)
    } else {
        crate::analysis::inflight::Completions::default()
    };
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
    let order = OpPositions::program_order(k);
    let shape = Shape::new(fp, &paths, &order);
    for group in by_space.values() {
        // Self-races: one instance of a write touching a unit from two threads.
        for &ai in group {
            out.findings.extend(self_race_finding(fp, ai));
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
        let blockers = std::cell::RefCell::new(Default::default());
        let cx = GroupCx {
            paths: &paths,
            completion: &completion,
            inflight: &inflight,
            order: &order,
            memo,
            cheap: &cheap,
            blockers: nearest_first.then_some(&blockers),
            deep,
        };
        for (x, &ai) in group.iter().enumerate() {
            let dsts = std::mem::take(&mut dsts_of[x]);
            for y in merge_sorted(&dsts, &keep_all) {
                pair_hazards(fp, &cx, (x, ai), (y, group[y]), &mut out);
            }
        }
        warn_loaded_indices(fp, &out.hazards[first_hazard..], &mut out.findings);
        warn_uniform_unknowns(fp, &out.hazards[first_hazard..], &mut out.findings);
        // Footprints of one address space are not needed for the next.
        fp.clear_caches();
    }
    // Conservative answers are never silent (collected while footprints were enumerated).
    out.findings.extend(fp.conservative.iter().cloned());
    out
}

/// Whether some op of `k` may start an asynchronous access: a copy or a wgmma (the ops whose
/// effects hold an async shared access, `ir::effects`). Ops of the arena that are not placed
/// count too (a conservative yes).
fn may_have_async(k: &Kernel) -> bool {
    k.ops.values().any(|od| {
        matches!(
            od.kind.signature().family,
            crate::ir::Family::Copy | crate::ir::Family::Wgmma
        )
    })
}

/// The finding of write `ai` when one instance of it may touch a unit from two threads: E0301
/// with the unit (the symbolic engine decides most writes; a race it finds is enumerated for
/// the message's unit, the enumerator's first one), or, where the enumerator does not know
/// every touch, the finding of `symbolic::copies` over the loops' true iteration domains and
/// of `symbolic::free` (never silent). `None` when it cannot self-race.
fn self_race_finding(fp: &mut Footprints, ai: usize) -> Option<Diagnostic> {
    let k = fp.k;
    if fp.issued_copy(ai) {
        return crate::analysis::symbolic::copies::finding(fp, ai);
    }
    let a = fp.accesses[ai].clone();
    if !may_self_race(&a.access) {
        return None;
    }
    if fp.symbolic && self_race_symbolic(fp, ai) == Some(false) {
        return None;
    }
    let inst = fp.instances(ai);
    let racing = inst.iter().find(|(_, t)| t.has_self_overlap());
    if let Some((unit, _)) = racing.and_then(|(_, t)| t.self_overlap()) {
        let d = Diagnostic::error(
            DiagKind::Finding,
            "E0301",
            format!(
                "{} writes {} from several threads at once",
                op_label(k, a.id.op),
                fp.describe_unit(unit)
            ),
        );
        Some(label(
            k,
            d,
            a.id.op,
            "every executing thread writes here; no barrier can order one op's threads".into(),
        ))
    } else if inst.iter().any(|(_, t)| t.may_self_overlap(fp.warp)) {
        crate::analysis::symbolic::copies::write_finding(fp, ai)
    } else {
        None
    }
}

/// Whether one instance of access `a` is a write per executing thread, so that two threads
/// touching one unit race (docs/ir.md section 5): plain writes, and the per-thread copies
/// (`cp_async`, `gather_to_lds`), whose copies by different threads are different writes
/// even of one op. Their tile forms give each element one writer (the layout's, docs/ir.md
/// "Collective accesses"); a TMA/TDM load is one transfer of the tile by its issuer (several
/// issuers of one tile are merged, docs/checker.md); atomics of one op commute.
fn may_self_race(a: &SharedAccess) -> bool {
    match a.kind {
        AccessKind::Write => true,
        AccessKind::AsyncWrite(AsyncClass::CpAsync | AsyncClass::GatherToLds) => {
            matches!(a.footprint, Footprint::PerThread(_))
        }
        _ => false,
    }
}

/// The symbolic self-race answer of access `ai`, decided once per
/// [`Footprints::question_id`] (see `conflicts::pair_conflict`).
fn self_race_symbolic(fp: &mut Footprints, ai: usize) -> Option<bool> {
    let q = fp.question_id(ai);
    if let Some(&r) = fp.sym_self_questions.get(&q) {
        return r;
    }
    let r = crate::analysis::symbolic::pairs::self_race(fp, ai);
    fp.sym_self_questions.insert(q, r);
    r
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

/// W0319 for each access of a hazard whose question was answered with the whole buffer
/// because its index reads a parameter or a block id that the symbolic engine could not
/// decide with (`symbolic::cases`, `symbolic::params`: a product of the parameter and a
/// thread id, a division by it, the search budget): that answer is conservative, never
/// silent. Accesses whose index is loaded from memory have W1510 instead.
fn warn_uniform_unknowns(fp: &Footprints, hazards: &[Hazard], out: &mut Vec<Diagnostic>) {
    use crate::analysis::symbolic::params;
    let k = fp.k;
    for h in hazards {
        let (Some(ai), Some(bi), Some((plen, var))) = (fp.index(h.src), fp.index(h.dst), h.query) else {
            continue;
        };
        let sides = [(h.src, ai), (h.dst, bi)];
        // The leaves first: most indices read none, and then no definition chain is walked
        // for a loaded value (both are tests of one side; the kept sides are the same).
        let whole: Vec<(AccessRef, usize, Vec<Value>)> = sides
            .into_iter()
            .map(|(a, i)| (a, i, params::whole_through_leaves(fp, i)))
            .filter(|(_, i, l)| !l.is_empty() && loaded_value(k, &fp.accesses[*i].access).is_none())
            .collect();
        if whole.is_empty() || params::decided(fp, ai, bi, plen, var) {
            continue;
        }
        for (a, i, leaves) in whole {
            let d = w0319(fp, a.op, i, &leaves);
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
}

/// The W0319 of access `i` (op `op`), whose index on `leaves` was not decided.
fn w0319(fp: &Footprints, op: Op, i: usize, leaves: &[Value]) -> Diagnostic {
    let k = fp.k;
    let buf = &k.buffers[k.root_buffer(fp.accesses[i].access.mem)].name;
    let names = leaves.iter().map(|&v| format!("`%{}`", k.value_name(v))).collect::<Vec<_>>().join(", ");
    Diagnostic::warning(
        DiagKind::Finding,
        "W0319",
        format!(
            "{} is analysed as touching any element of `@{buf}`: its index on {names} is not decided",
            op_label(k, op)
        ),
    )
    .with_label(k.span(op), "analysed conservatively")
    .with_note("smemsync reasons on a parameter or block id as one value shared by every thread, but not through this index (a product with a thread id, a division by it, or the search ran out); it may place more syncs here than the minimum")
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

/// Thread iterations (both sides together) up to which `explain` enumerates a hazard's
/// query for its witness even when the symbolic engine decided it: 32 × the symbolic
/// engine's minimum budget, the size below which questions with table forms (shifts by a
/// loop variable) were enumerated before they were split per iteration index.
pub const SMALL_WITNESS: u64 = 32 * crate::analysis::symbolic::pairs::MIN_BUDGET;

/// Fills the witness of every hazard whose conflict was enumerated (not answered by the
/// symbolic engine) or is cheap to enumerate (at most [`SMALL_WITNESS`] thread iterations on
/// both sides, the size below which the symbolic engine used to leave a question to the
/// enumerator): what `explain` prints, which names a unit for those only.
pub fn fill_enumerated_witnesses(fp: &mut Footprints, hazards: &mut [Hazard]) {
    use crate::analysis::symbolic::pairs::instances;
    for h in hazards.iter_mut().filter(|h| h.witness.is_none()) {
        if let (Some((plen, var)), Some(ai), Some(bi)) = (h.query, fp.index(h.src), fp.index(h.dst))
            && (instances(fp, ai).saturating_add(instances(fp, bi)) <= SMALL_WITNESS
                || !crate::analysis::conflicts::answered_symbolically(fp, ai, bi, plen, var))
        {
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
    fn new(fp: &Footprints, paths: &'p Paths, order: &OpPositions, group: &[usize]) -> Self {
        let acc = |i: usize| &fp.accesses[i];
        PairFacts {
            kind: group.iter().map(|&i| acc(i).access.kind).collect(),
            pos: group.iter().map(|&i| order[&acc(i).id.op]).collect(),
            path: group
                .iter()
                .map(|&i| paths.path.get(&acc(i).id.op))
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

/// What the pair loop of one address space reads besides the footprints: region paths, the
/// completion of every async access, the in-flight memo and the per-access facts.
struct GroupCx<'g> {
    paths: &'g Paths,
    completion: &'g HashMap<Op, LoopCompletion>,
    /// The in-flight dataflow's completions (every completing wait of each copy).
    inflight: &'g crate::analysis::inflight::Completions,
    order: &'g OpPositions,
    memo: &'g FlowMemo,
    cheap: &'g PairFacts<'g>,
    /// Completion blockers of async sources (`None`: every pair is built, as for
    /// [`find_all_hazards`]).
    blockers: Option<&'g std::cell::RefCell<crate::analysis::completion_blockers::Blockers>>,
    /// Deep blockers of plain sources (`None`: every deep pair is built).
    deep: Option<&'g std::cell::RefCell<DeepBlockers>>,
}

/// The hazards and findings of one pair (source `x` at `fp.accesses[ai]`, destination `y` at
/// `bi`; `x`, `y` index the address space's group).
fn pair_hazards(
    fp: &mut Footprints,
    cx: &GroupCx,
    (x, ai): (usize, usize),
    (y, bi): (usize, usize),
    out: &mut Hazards,
) {
    let k = fp.k;
    let cheap = cx.cheap;
    if !cheap.may_emit(k, x, y) || fp.boxes_apart(ai, bi) {
        return;
    }
    let (Some(pa), Some(pb)) = (cheap.path[x], cheap.path[y]) else {
        return;
    };
    // An async source and a destination in the two arms of a thread-dependent `if` with no
    // handshake in them (s37's M9, M13): no wait of the destination's threads and no barrier
    // can order the two.
    if cheap.kind[x].is_async() {
        async_divergent_arms(fp, cx.inflight, (ai, bi), pa, pb, out);
    }
    let (a, b) = (&fp.accesses[ai], &fp.accesses[bi]);
    // Two arms of a role branch inside a loop whose hand-written handshakes were checked
    // (`sync::handshake_chain`, E0307 otherwise): a chain orders the pair in every trip. Only
    // a pair on buffers that share bytes in this kernel: exactly the pairs the chain check
    // examined on it (one buffer, or pinned buffers whose bytes overlap, e.g. a consumer's
    // twin alias of the producer's slot; `plan-smem`'s candidates are checked anew).
    // (Asked after the arms: the bytes are decoded only for the few pairs across them.)
    let (oa, ob) = (a.id.op, b.id.op);
    let across = (cx.memo.chained_roles.iter())
        .any(|[p, q]| (p.contains(&oa) && q.contains(&ob)) || (q.contains(&oa) && p.contains(&ob)));
    if across && crate::ir::layout::share_bytes(k, k.root_buffer(a.access.mem), k.root_buffer(b.access.mem)) {
        return;
    }
    if cheap.kind[x].is_async() {
        // Refills of a slot that a placed cross-role handshake orders (`sync::handshake`): the
        // refill waits for the consumers that waited for the previous copy.
        if cx.memo.ordered_tma.contains(&a.id.op) && cx.memo.ordered_tma.contains(&b.id.op) {
            return;
        }
        // Copies of one slot that `mbar_protocol` showed complete before the next is issued
        // (`Verdict::serial_loads`: a prologue load and the steady loop's refill, J1b).
        let serial = &cx.memo.serial_loads;
        if serial.get(&a.id.op).is_some_and(|t| serial.get(&b.id.op) == Some(t)) {
            return;
        }
        // The dataflow's wait, or the first point on every path to this destination
        // (`analysis::every_path`).
        let empty = Default::default();
        let pp = every_path::PairPaths {
            k,
            paths: cx.paths,
            order: cx.order,
            waits: cx.inflight.by_copy.get(&a.id.op).unwrap_or(&empty),
            pc: pa,
            pb,
        };
        let lc = &cx.completion[&a.id.op];
        let (copy, dst, copy_loops) = (a.id.op, b.id.op, a.loops.clone());
        let m = common_len(&a.loops, &b.loops);
        // Whether the pair conflicts across iterations of a common loop (asked only where a
        // wait shares a region with the destination alone; the carried hazards ask it too).
        let mut carried = || (0..m).any(|c| pair_conflict(fp, ai, bi, c + 1, Some(c)).conflict & !1 != 0);
        let choice = every_path::for_pair(&pp, cx.inflight, (copy, dst), &copy_loops, lc, &mut carried);
        if !matches!(choice, every_path::Choice::Keep) {
            warn_untracked_youngest(k, cx.inflight, copy, &copy_loops, lc, &mut out.findings);
        }
        let own = match choice {
            every_path::Choice::Keep => None,
            every_path::Choice::Use(own) => Some(own),
            every_path::Choice::AtDestination => {
                return at_destination(fp, cx.inflight, (ai, bi), pb, out);
            }
        };
        let acx = AsyncCx {
            paths: cx.paths,
            comp: own.as_ref().unwrap_or(lc),
            ai,
            bi,
            pb,
            forward_ab: matches!(split(k, pa, pb), Split::Forward { .. }),
            m_ab: m,
            blockers: cx.blockers,
            src_region: pa.last().map(|e| e.0),
        };
        async_pair(fp, &acx, out);
        return;
    }
    let p = PairAt::same_time(fp, ai, bi, pa, pb);
    emit_plain(fp, cx, &p, out);
}

/// Emits the hazards of a plain source's pair `p`, unless it is deep and a built pair of
/// its key implies every hazard it could have (`analysis::deep_blockers`): then none of its
/// conflict questions is asked.
fn emit_plain(fp: &mut Footprints, cx: &GroupCx, p: &PairAt, out: &mut Hazards) {
    let Some(table) = cx.deep else {
        return emit_pair(fp, p, out);
    };
    let Some(key) = deep_key(fp, cx.paths, p, &mut table.borrow_mut()) else {
        return emit_pair(fp, p, out);
    };
    let at = (p.pa[p.pa.len() - 1].1, p.pb[p.pb.len() - 1].1);
    if table.borrow_mut().blocks(&key, at, |b| implied(fp, p, b)) {
        return;
    }
    let first = out.hazards.len();
    emit_pair(fp, p, out);
    table.borrow_mut().record(key, at, out.hazards[first..].iter().map(carry_bits));
}

/// A hazard's carry as the blocker tables record it: the carrying loop and whether distance
/// 1 conflicts (`None`: forward), and whether it is intra-warp.
fn carry_bits(h: &Hazard) -> (Option<(Op, bool)>, bool) {
    match h.carry {
        Carry::Forward => (None, h.intra_warp),
        Carry::Carried { loop_op, d1, .. } => (Some((loop_op, d1)), h.intra_warp),
    }
}

/// The deep key of plain pair `p` (`analysis::deep_blockers`): its paths part at different
/// ops of one region that every thread reaches, both accesses lie below their ancestors
/// there, and neither index is loaded from memory or undecided on a parameter (W1510,
/// W0319). `None` where the rule does not apply.
fn deep_key(fp: &Footprints, paths: &Paths, p: &PairAt, table: &mut DeepBlockers) -> Option<DeepKey> {
    let k = fp.k;
    let (pa, pb) = (p.pa, p.pb);
    let q = pa[deep_blockers::deep_parting(pa, pb)?].0;
    if !table.reached(q, || reached_by_all(fp, paths, q)) {
        return None;
    }
    let exact = |i: usize| {
        loaded_value(k, &fp.accesses[i].access).is_none()
            && crate::analysis::symbolic::params::whole_through_leaves(fp, i).is_empty()
    };
    if !table.exact(p.ai, || exact(p.ai)) || !table.exact(p.bi, || exact(p.bi)) {
        return None;
    }
    let (a, b) = (&fp.accesses[p.ai].access, &fp.accesses[p.bi].access);
    Some(DeepKey {
        src_region: pa[pa.len() - 1].0,
        dst_region: pb[pb.len() - 1].0,
        src_kind: a.kind,
        dst_kind: b.kind,
        src_buf: k.root_buffer(a.mem),
        dst_buf: k.root_buffer(b.mem),
    })
}

/// Whether every thread of the block runs region `q` (where it runs at all) and a block
/// barrier may stand there: not under thread-dependent control, not in a `while` condition.
fn reached_by_all(fp: &Footprints, paths: &Paths, mut q: Region) -> bool {
    if fp.uniformity().is_divergent(q) {
        return false;
    }
    let k = fp.k;
    while let Some(&op) = paths.region_op.get(&q) {
        if matches!(k.ops[op].kind, OpKind::While { .. }) && k.ops[op].regions[0] == q {
            return false;
        }
        match paths.pos(op) {
            Some((parent, _)) => q = parent,
            None => return false,
        }
    }
    true
}

/// An async source `ai` and a destination `bi` in the two arms of a thread-dependent `if`
/// whose arms hold no handshake (no named barrier, no mbarrier arrive or wait), conflicting in
/// one iteration of their common loops: an error (docs/async.md, "TMA loads read by another
/// role"). The copy's issuing thread runs one arm, the destination's threads the other, so
/// no program point lies between the two: a wait the destination's threads run cannot
/// follow the issue, and a barrier cannot separate the arms. A TMA load (whose completion an
/// `mbar_wait` would make visible to the threads that wait) is E0602, any other async
/// operation (a copy, a TMA store or wgmma reading the buffer) E0305,
/// as for a plain source (`divergent_arms`, which sees only pairs whose source comes first
/// in program order and is plain: an async source in the first arm fell through to the
/// completion rules, which order nothing across arms, and the pair was silently dropped).
/// Arms holding a handshake are left to it (`sync::handshake` placed it, or
/// `sync::handshake_chain` checks the hand-written one, E0307) only where the copy is
/// completed before it can be handed over: a TMA load where an `mbar_wait` on its mbarrier
/// array runs before the destination in the destination's arm (in a region enclosing it),
/// or runs in the load's arm between the load and the next handshake op there; another
/// async operation where a wait of its issuing thread completes it between the operation and
/// the next handshake op of its arm (`completed_before_next_handshake`). An async read (an
/// operand of wgmma, a TMA store) whose arms hold mbarrier handshakes is left to the chain
/// check, which requires the completion before the release (M15). Otherwise E0602 (TMA) or
/// E0305 (named barriers or arrivals alone never complete a copy; session 38's read-back).
/// O(ops of the arms) per pair, plus one conflict question.
fn async_divergent_arms(
    fp: &mut Footprints,
    inflight: &crate::analysis::inflight::Completions,
    (ai, bi): (usize, usize),
    pa: &[(Region, usize)],
    pb: &[(Region, usize)],
    out: &mut Hazards,
) {
    let k = fp.k;
    let Split::Siblings { op, ra, .. } = split(k, pa, pb) else {
        return;
    };
    let OpKind::If { cond } = &k.ops[op].kind else {
        return;
    };
    let tma = matches!(fp.accesses[ai].access.kind, AccessKind::AsyncWrite(AsyncClass::Tma));
    let (a, b) = (fp.accesses[ai].id.op, fp.accesses[bi].id.op);
    // A handshake in the arms is left to its checks, except where no thread waits on a TMA
    // load's mbarrier before the branch ends, or no wait of another copy's issuing thread
    // completes it in its arm before the arm's last handshake op: a named barrier or an
    // arrival alone never completes a copy.
    let (handshake, mbar_arms) = *(fp.arm_facts.branches.entry(op))
        .or_insert_with(|| (arms_hold(k, op, region_has_handshake), arms_hold(k, op, region_has_mbar)));
    if fp.uniformity().operand_uniform(cond) {
        return;
    }
    if handshake {
        // An async read (wgmma, TMA store) as the source, in arms with mbarrier handshakes:
        // the chain check requires its completion before the release.
        let write = matches!(fp.accesses[ai].access.kind, AccessKind::AsyncWrite(_));
        let mut in_arm = || {
            *(fp.arm_facts.copies.entry((a, ra))).or_insert_with(|| match tma {
                true => tma_completed_in_arm(k, a, ra),
                false => completed_before_next_handshake(k, inflight.by_copy.get(&a), a, ra),
            })
        };
        let completed = match tma {
            true => in_arm() || tma_waited_before(k, a, b, ra),
            false => (!write && mbar_arms) || in_arm(),
        };
        if completed {
            return;
        }
    }
    let m = common_len(&fp.accesses[ai].loops, &fp.accesses[bi].loops);
    if forward_conflict(fp, ai, bi, m).is_none() {
        return;
    }
    let d = divergent_async_finding(k, (a, b), tma, handshake);
    if !out.findings.contains(&d) {
        out.findings.push(d);
    }
}

/// What [`async_divergent_arms`] asks of the arms of each branch and copy, once each
/// (cleared with the footprints' caches).
#[derive(Default)]
pub(crate) struct ArmFacts {
    /// Per thread-dependent `if`: whether its arms hold a handshake op, an mbarrier op.
    branches: HashMap<Op, (bool, bool)>,
    /// Per async op and the arm holding it: whether a wait of its issuing thread completes
    /// it there before the arm's next handshake op (TMA: a wait on its mbarrier array).
    copies: HashMap<(Op, Region), bool>,
}

/// Whether an arm of `op` satisfies `holds`.
fn arms_hold(k: &Kernel, op: Op, holds: fn(&Kernel, Region) -> bool) -> bool {
    k.ops[op].regions.iter().any(|&r| holds(k, r))
}

/// E0602 (a TMA load `a`) or E0305 (another async operation) for `a` and access `b` in the
/// two arms of a thread-dependent `if` (`async_divergent_arms`); `handshake`: the arms hold
/// handshake ops, which do not complete the copy.
fn divergent_async_finding(k: &Kernel, (a, b): (Op, Op), tma: bool, handshake: bool) -> Diagnostic {
    if tma {
        Diagnostic::error(DiagKind::Finding, "E0602", "a shared access may observe a TMA load whose mbarrier phase is not waited for")
            .with_label(k.span(b), "this access may observe the copy")
            .with_label(k.span(a), "TMA load issued here, in the other arm of a thread-dependent `if`")
            .with_note(if handshake {
                "no wait on the load's mbarrier precedes the access in its arm, or follows the load before its next handshake op: the handshakes in the arms (named barriers, arrivals) do not complete the copy"
            } else {
                "the threads of this access run the other arm: none of them waits on the load's mbarrier, and no barrier can separate the arms"
            })
            .with_help("wait on the load's mbarrier slot with its phase parity before the access (`mbar_wait`), in the access's own arm")
    } else {
        Diagnostic::error(DiagKind::Finding, "E0305", format!("{} and {} in the two arms of a thread-dependent `if` race", op_label(k, a), op_label(k, b)))
            .with_label(k.span(b), "this access")
            .with_label(k.span(a), "async operation issued here, in the other arm")
            .with_note(if handshake {
                "the async operation completes only at a wait of its issuing thread, and none completes it in its arm before the next handshake op after it"
            } else {
                "the async operation completes only at a wait of its issuing thread, and no barrier can separate the arms of a divergent branch"
            })
            .with_help("order the roles with a handshake (a wait for the copy, then a named barrier or an mbarrier arrival the other role waits on)")
    }
}

/// Whether one of `waits` (the waits completing copy `a`, issued in arm `arm`) runs after
/// `a` and before the next handshake op of the arm (named barrier, mbarrier arrive or wait),
/// in a region enclosing `a` (so whenever `a` runs): the issuing thread completes the copy
/// before any release that follows it. A necessary condition only; the release's order is
/// the handshake checks' or `check`'s. O(ops of the arm).
fn completed_before_next_handshake(k: &Kernel, waits: Option<&std::collections::BTreeSet<Op>>, a: Op, arm: Region) -> bool {
    let Some(waits) = waits else {
        return false;
    };
    let enclosing = k.parents().enclosing_regions(a, None);
    let mut ops = Vec::new();
    crate::sync::handshake::walk_region(k, arm, &mut ops);
    let Some(pa) = ops.iter().position(|&o| o == a) else {
        return false;
    };
    let next = (ops[pa + 1..].iter()).position(|&o| is_handshake_op(&k.ops[o].kind)).map_or(ops.len(), |i| pa + 1 + i);
    (ops[pa + 1..next].iter()).any(|o| waits.contains(o) && k.op_region(*o).is_some_and(|r| enclosing.contains(&r)))
}

/// Whether TMA load `copy`'s mbarrier array is `m` of wait `o`.
fn waits_on_mbar_of(k: &Kernel, copy: Op, o: Op) -> bool {
    let OpKind::TmaLoad { mbar, .. } = &k.ops[copy].kind else {
        return false;
    };
    matches!(&k.ops[o].kind, OpKind::MbarWait { mbar: w, .. } if k.root_buffer(*w) == k.root_buffer(*mbar))
}

/// Whether an `mbar_wait` on TMA load `copy`'s mbarrier array runs in `arm` (the arm holding
/// the copy) after the copy and before the next handshake op there, in a region enclosing
/// the copy; true for an op that is no TMA load. Which phase it waits for is
/// `mbar_protocol`'s. O(ops of the arm).
fn tma_completed_in_arm(k: &Kernel, copy: Op, arm: Region) -> bool {
    if !matches!(k.ops[copy].kind, OpKind::TmaLoad { .. }) {
        return true;
    }
    let mut waits = std::collections::BTreeSet::new();
    k.walk_region(arm, &mut |o| {
        if waits_on_mbar_of(k, copy, o) {
            waits.insert(o);
        }
    });
    completed_before_next_handshake(k, Some(&waits), copy, arm)
}

/// Whether an `mbar_wait` on TMA load `copy`'s mbarrier array runs before access `b` (in the
/// other arm of the branch whose arm `arm` holds the copy) in a region enclosing `b` inside
/// `b`'s arm. O(depth of `b` × ops of its regions).
fn tma_waited_before(k: &Kernel, copy: Op, b: Op, arm: Region) -> bool {
    // Walk up from `b` to the branch, looking at the ops before each step.
    let parents = k.parents();
    let mut cur = b;
    while let Some(r) = parents.op_region[cur] {
        let ops = k.region_ops(r);
        let at = ops.iter().position(|&o| o == cur).unwrap_or(0);
        if ops[..at].iter().any(|&o| waits_on_mbar_of(k, copy, o)) {
            return true;
        }
        match parents.region_op[r] {
            Some(p) if !k.ops[p].regions.contains(&arm) => cur = p,
            _ => break,
        }
    }
    false
}


/// W0320 for a wait of `lc` (the dataflow's in-loop or exit wait of `copy`) that completes the
/// copy's executions merged after a long constant-trip loop, which the youngest-execution rule
/// cannot count (`analysis::youngest::untracked_youngest`): the completion moved to a later
/// point, possibly at the cost of a barrier; never silent.
fn warn_untracked_youngest(
    k: &Kernel,
    c: &crate::analysis::inflight::Completions,
    copy: Op,
    copy_loops: &[Op],
    lc: &LoopCompletion,
    out: &mut Vec<Diagnostic>,
) {
    use crate::analysis::youngest::untracked_youngest;
    let Some(level) = lc.level else {
        return;
    };
    let waits = lc.in_loop.map(|(w, d)| (w, Some(d))).into_iter().chain(lc.exit.map(|x| (x, None)));
    for (w, d) in waits {
        let Some(l) = untracked_youngest(k, c, w, copy, copy_loops, (level, d)) else {
            continue;
        };
        let d = Diagnostic::warning(
            DiagKind::Finding,
            "W0320",
            format!(
                "{} is not taken as the completion of {}: whether it completes the youngest execution is not tracked across {}",
                op_label(k, w),
                op_label(k, copy),
                op_label(k, l)
            ),
        )
        .with_label(k.span(w), "completion not credited")
        .with_note(format!(
            "the in-flight analysis tracks {} iterations of a loop; beyond them the executions of the copy are merged, and the barrier placed after a later wait (or before the destination) may be one more than needed",
            crate::analysis::inflight::TAG_CAP
        ));
        if !out.contains(&d) {
            out.push(d);
        }
    }
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
pub(crate) fn runs_body(k: &Kernel, op: Op) -> Option<Region> {
    match &k.ops[op].kind {
        OpKind::Stage { .. } => Some(k.ops[op].regions[0]),
        OpKind::For { .. } => const_for_trips(k, op)
            .filter(|&t| t > 0)
            .map(|_| k.ops[op].regions[0]),
        _ => None,
    }
}

/// The trip count of a `for` whose bounds and step are constants (immediates or `const`
/// results) with a positive step; `None` for anything else.
pub(crate) fn const_for_trips(k: &Kernel, op: Op) -> Option<i64> {
    for_trips(k, op, |o| match o {
        Operand::Imm(s) => Some(s.as_i64()),
        Operand::Value(v) => match k.values[*v].def {
            ValueDef::Result(d, _) => match k.ops[d].kind {
                OpKind::Const(s) => Some(s.as_i64()),
                _ => None,
            },
            _ => None,
        },
    })
}

/// The trip count of a `for` whose bounds and step are immediates with a positive step
/// (`const` results are not read: the handshake placement counts executed syncs only for
/// loops written with literal bounds); `None` for anything else.
pub(crate) fn imm_for_trips(k: &Kernel, op: Op) -> Option<i64> {
    for_trips(k, op, |o| match o {
        Operand::Imm(s) => Some(s.as_i64()),
        Operand::Value(_) => None,
    })
}

/// The trip count of a `for` whose bounds and step `c` reads, with a positive step:
/// `ceil((hi - lo) / step)`, or 0 when `hi <= lo`.
fn for_trips(k: &Kernel, op: Op, c: impl Fn(&Operand) -> Option<i64>) -> Option<i64> {
    let OpKind::For { lo, hi, step, .. } = &k.ops[op].kind else {
        return None;
    };
    let (lo, hi, st) = (c(lo)?, c(hi)?, c(step)?);
    (st > 0).then(|| if hi > lo { (hi - lo + st - 1) / st } else { 0 })
}

/// A path that passes an op whole (its odd coordinate lies in a segment) passes every
/// top-level gap of a body that op always runs: those bodies join the coverage (`out`).
/// Only the ops of [`Paths`]' always-run table are visited (found by binary search), so a
/// segment spanning a long flat body costs O(log n + bodies), not O(ops spanned).
fn always_bodies(k: &Kernel, paths: &Paths, work: &mut Vec<Segment>, out: &mut Vec<Segment>) {
    while let Some(s) = work.pop() {
        let ops = paths.always.of(s.region);
        let first = ops.partition_point(|&(i, _)| 2 * (i as usize) + 1 < s.lo);
        for &(i, body) in &ops[first..] {
            if 2 * (i as usize) + 1 > s.hi {
                break;
            }
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
///
/// The symbolic pair engine answers where it has an encoding (the distance-0 bit of the
/// `intersect` mask of [`pair_conflict`], with the pinned key as one more constraint);
/// otherwise both accesses' instances are enumerated (under the instance cap, W0313).
/// Aliasing buffers without an exact pairing (W1004) always enumerate.
fn intersects_at(
    fp: &mut Footprints,
    ai: usize,
    bi: usize,
    m: usize,
    first: Option<(usize, Option<i64>)>,
) -> bool {
    if fp.boxes_apart(ai, bi) {
        return false;
    }
    if fp.symbolic && !fp.blind_pair(ai, bi) {
        use crate::analysis::symbolic::{cases, pairs};
        let fix = first.and_then(|(l, key)| Some((l, key?)));
        let sym = pairs::intersects_at(fp, ai, bi, m, fix);
        if sym == Some(false) {
            return false;
        }
        // An index on a parameter or block id reads as the whole buffer above: decided
        // case by case or with the leaves shared free variables (docs/async.md,
        // "Parameters in flight"); undecided, `in_flight` adds W0319.
        if let Some(h) = cases::intersects_at(fp, ai, bi, m, fix) {
            return h;
        }
        if let Some(h) = sym {
            return h;
        }
    }
    intersects_enumerated(fp, ai, bi, m, first)
}

/// [`intersects_at`] by enumerating both accesses' instances.
fn intersects_enumerated(
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

/// One source/destination pair as the hazard builders see it: the accesses (indices into
/// `fp.accesses`), where the source takes effect (`src_at`: its op, or the wait completing an
/// async source) with that point's region path `pa`, the destination's path `pb`, and for an
/// async source completed `delta` iterations of loop level `level` after its issue,
/// `shift = Some((level, delta))`.
struct PairAt<'p> {
    ai: usize,
    bi: usize,
    src_at: Op,
    pa: &'p [(Region, usize)],
    pb: &'p [(Region, usize)],
    shift: Option<(usize, u32)>,
}

impl<'p> PairAt<'p> {
    /// A pair whose source takes effect at its own op (not an async copy completed later).
    fn same_time(
        fp: &Footprints,
        ai: usize,
        bi: usize,
        pa: &'p [(Region, usize)],
        pb: &'p [(Region, usize)],
    ) -> Self {
        PairAt {
            ai,
            bi,
            src_at: fp.accesses[ai].id.op,
            pa,
            pb,
            shift: None,
        }
    }
}

/// Where a barrier removes one hazard (see the module doc): ranges of the home region and
/// segments of deeper regions.
struct Coverage {
    home: Region,
    home_ranges: Vec<(usize, usize)>,
    chain: Vec<Segment>,
}

/// The hazard of pair `p` with the given carry and conflict; the bodies that a path passing
/// an op whole always runs join its coverage.
fn hazard(fp: &Footprints, p: &PairAt, carry: Carry, pc: &PairConflict, cov: Coverage) -> Hazard {
    let k = fp.k;
    let (a, b) = (&fp.accesses[p.ai], &fp.accesses[p.bi]);
    let Coverage {
        home,
        home_ranges,
        mut chain,
    } = cov;
    let mut passed: Vec<Segment> = home_ranges
        .iter()
        .map(|&(lo, hi)| Segment {
            region: home,
            lo,
            hi,
        })
        .chain(chain.iter().copied())
        .collect();
    always_bodies(k, &fp.paths(), &mut passed, &mut chain);
    Hazard {
        src: a.id,
        dst: b.id,
        src_at: p.src_at,
        kind: kind_of(a.access.kind, b.access.kind),
        carry,
        intra_warp: pc.intra_warp,
        witness: pc.witness,
        query: pc.query,
        home,
        home_ranges,
        chain,
    }
}

/// Emits the hazards of pair `p`: the finding of two arms of a divergent `if`, the forward
/// hazard, and one carried hazard per common loop.
fn emit_pair(fp: &mut Footprints, p: &PairAt, out: &mut Hazards) {
    // A plain source takes effect at its own op, whose loops the access already lists.
    let at_loops = if p.src_at == fp.accesses[p.ai].id.op {
        fp.accesses[p.ai].loops.clone()
    } else {
        fp.loops_of(p.src_at)
    };
    let m = common_len(&at_loops, &fp.accesses[p.bi].loops);
    divergent_arms(fp, p, m, out);
    forward_hazard(fp, p, m, out);
    for (c, &l) in at_loops.iter().enumerate().take(m) {
        carried_hazard(fp, p, c, l, out);
    }
}

/// Different arms of a thread-dependent `if` run concurrently in different threads: a
/// conflict there (in one iteration) has no program point between the two accesses at all
/// (E0305; a warning where hand-placed handshakes in the arms may order them).
fn divergent_arms(fp: &mut Footprints, p: &PairAt, m: usize, out: &mut Hazards) {
    let k = fp.k;
    let (a, b) = (fp.accesses[p.ai].id, fp.accesses[p.bi].id);
    let Split::Siblings { op, .. } = split(k, p.pa, p.pb) else {
        return;
    };
    let OpKind::If { cond } = &k.ops[op].kind else {
        return;
    };
    if fp.uniformity().operand_uniform(cond) || a >= b || p.src_at != a.op {
        return;
    }
    if forward_conflict(fp, p.ai, p.bi, m).is_none() {
        return;
    }
    // Roles synchronized by hand (warp specialization): named barriers or mbarriers in the
    // arms may order the two accesses across the arms, which smemsync neither places nor
    // reasons about; that is a warning, left to the race checker.
    let handshake = k.ops[op]
        .regions
        .iter()
        .any(|&r| region_has_handshake(k, r));
    let what = format!("{} and {}", op_label(k, a.op), op_label(k, b.op));
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
        .with_help("move one access out of the branch, or split the branch around a barrier")
    };
    if !handshake {
        out.divergent.push((a.op, b.op));
    }
    let mut d = d
        .with_label(k.span(b.op), "this access")
        .with_label(k.span(a.op), "runs concurrently with this one in other threads");
    // Labels: the first one pushed is primary.
    if let Some(l) = d.labels.first_mut() {
        l.primary = true;
    }
    out.findings.push(d);
}

/// The hazards of an ordering rule stated outside the conflict enumeration
/// (`sync::role_release`): access `ai` must happen before access `bi` on every path from one
/// to the other, in one iteration (forward) or carried by any common loop. Coverage as for a
/// conflicting pair; `intra_warp` false (the rule needs a barrier of the threads), no
/// witness. O(depth) per hazard.
pub(crate) fn ordering_hazards(fp: &Footprints, ai: usize, bi: usize) -> Vec<Hazard> {
    let k = fp.k;
    let paths = fp.paths();
    let (a, b) = (&fp.accesses[ai], &fp.accesses[bi]);
    let (Some(pa), Some(pb)) = (paths.path.get(&a.id.op), paths.path.get(&b.id.op)) else {
        return Vec::new();
    };
    let p = PairAt::same_time(fp, ai, bi, pa, pb);
    let pc = PairConflict::default();
    let mut out = Vec::new();
    if let Some(cov) = forward_coverage(k, &p) {
        out.push(hazard(fp, &p, Carry::Forward, &pc, cov));
    }
    let m = common_len(&a.loops, &b.loops);
    for &l in a.loops.iter().take(m) {
        let carry = Carry::Carried {
            loop_op: l,
            d1: true,
            min_distance: 1,
        };
        if let Some(cov) = carried_coverage(k, &p, l, true) {
            out.push(hazard(fp, &p, carry, &pc, cov));
        }
    }
    out
}

/// The forward paths' coverage of pair `p`, if the source precedes the destination in one
/// iteration (program order, or a `while`'s condition before its body).
fn forward_coverage(k: &Kernel, p: &PairAt) -> Option<Coverage> {
    let (pa, pb) = (p.pa, p.pb);
    let mut chain = Vec::new();
    match split(k, pa, pb) {
        Split::Forward {
            level,
            region,
            ia,
            ib,
        } => {
            after_chain(k, pa, level + 1, &mut chain);
            before_chain(pb, level + 1, &mut chain);
            Some(Coverage {
                home: region,
                home_ranges: vec![(2 * ia + 2, 2 * ib)],
                chain,
            })
        }
        Split::Siblings { level, op, ra, rb }
            if matches!(k.ops[op].kind, OpKind::While { .. })
                && ra == k.ops[op].regions[0]
                && rb == k.ops[op].regions[1] =>
        {
            after_chain(k, pa, level + 1, &mut chain);
            before_chain(pb, level + 2, &mut chain);
            Some(Coverage {
                home: rb,
                home_ranges: vec![(0, 2 * pb[level + 1].1)],
                chain,
            })
        }
        _ => None,
    }
}

/// The forward hazard of pair `p` (`m` common loops), if its instances conflict in one
/// iteration (at the shift's distance for an async source completed iterations later).
fn forward_hazard(fp: &mut Footprints, p: &PairAt, m: usize, out: &mut Hazards) {
    let Some(cov) = forward_coverage(fp.k, p) else {
        return;
    };
    let (pc, bit) = match p.shift {
        Some((level, delta)) if level < m => (
            pair_conflict(fp, p.ai, p.bi, m, Some(level)),
            delta.min(63),
        ),
        _ => match forward_conflict(fp, p.ai, p.bi, m) {
            Some(pc) => (pc, 0),
            None => return,
        },
    };
    if pc.conflict & (1 << bit) != 0 {
        out.hazards.push(hazard(fp, p, Carry::Forward, &pc, cov));
    }
}

/// The hazard of pair `p` carried by common loop `l` (level `c`), if its instances conflict
/// one or more iterations apart.
fn carried_hazard(fp: &mut Footprints, p: &PairAt, c: usize, l: Op, out: &mut Hazards) {
    let k = fp.k;
    let pc = pair_conflict(fp, p.ai, p.bi, c + 1, Some(c));
    let delta = match p.shift {
        Some((level, d)) if level == c => d,
        _ => 0,
    };
    let bits = pc.conflict >> delta.min(62);
    let d1 = bits & 2 != 0;
    let far = bits & !3 != 0;
    if !d1 && !far {
        return;
    }
    let Some(cov) = carried_coverage(k, p, l, d1) else {
        return;
    };
    let carry = Carry::Carried {
        loop_op: l,
        d1,
        min_distance: (bits & !1).trailing_zeros(),
    };
    out.hazards.push(hazard(fp, p, carry, &pc, cov));
}

/// The coverage of pair `p`'s paths around the back-edge of loop `l` (`d1`: distance 1
/// conflicts, so only the arc from the source to the destination across the back-edge is
/// passed by every path; otherwise a whole iteration runs in between).
fn carried_coverage(k: &Kernel, p: &PairAt, l: Op, d1: bool) -> Option<Coverage> {
    let (pa, pb) = (p.pa, p.pb);
    let regions = &k.ops[l].regions;
    let jl = pa.iter().position(|(r, _)| regions.contains(r))?;
    let (ra, ia) = pa[jl];
    let (rb, ib) = pb[jl];
    let body = *regions.last().expect("loop has a body");
    let n = body_len(k, body);
    let (in_a, in_b) = (ra == body, rb == body);
    let mut chain = Vec::new();
    after_chain(k, pa, jl + in_a as usize, &mut chain);
    before_chain(pb, jl + in_b as usize, &mut chain);
    let whole = vec![(0, 2 * n)];
    let home_ranges = match (in_a, in_b) {
        (true, true) if d1 && ia >= ib => {
            let mut v = vec![(0, 2 * ib)];
            if 2 * ia + 2 <= 2 * n {
                v.push((2 * ia + 2, 2 * n));
            }
            v
        }
        (true, false) if d1 && 2 * ia + 2 <= 2 * n => vec![(2 * ia + 2, 2 * n)],
        _ => whole,
    };
    Some(Coverage {
        home: body,
        home_ranges,
        chain,
    })
}

/// An async source and a destination, as the async hazard builders see them: the pair, the
/// copy's completion (the in-flight dataflow's answer), the region paths of both and of the
/// completing waits, whether the destination follows the copy in one iteration
/// (`forward_ab`) and the accesses' common loop count (`m_ab`).
struct AsyncCx<'c> {
    paths: &'c Paths,
    comp: &'c LoopCompletion,
    ai: usize,
    bi: usize,
    pb: &'c [(Region, usize)],
    forward_ab: bool,
    m_ab: usize,
    /// The completion blockers of this address space (`None`: no pruning).
    blockers: Option<&'c std::cell::RefCell<crate::analysis::completion_blockers::Blockers>>,
    /// The region directly holding the copy.
    src_region: Option<Region>,
}

impl AsyncCx<'_> {
    /// The pair with its source taking effect at wait `w`.
    fn at<'p>(&'p self, w: Op, pw: &'p [(Region, usize)], shift: Option<(usize, u32)>) -> PairAt<'p> {
        PairAt {
            ai: self.ai,
            bi: self.bi,
            src_at: w,
            pa: pw,
            pb: self.pb,
            shift,
        }
    }

    /// Whether the destination precedes op `x` (whose path is `px`) in one iteration.
    fn before(&self, k: &Kernel, px: &[(Region, usize)]) -> bool {
        matches!(split(k, self.pb, px), Split::Forward { .. })
    }
}

/// The hazards and findings of an async source (module doc, *async copies*), by where its
/// completing wait lies: in the copy's loop body in the same iteration, some iterations
/// later, or only after the loop (or nowhere).
fn async_pair(fp: &mut Footprints, cx: &AsyncCx, out: &mut Hazards) {
    match cx.comp.in_loop {
        Some((w, 0)) => completed_in_iteration(fp, cx, w, out),
        Some((w, delta)) => completed_later(fp, cx, w, delta, out),
        None => completed_after_loop(fp, cx, out),
    }
}

/// An mbarrier wait makes the TMA write visible to every thread that waits (docs/ir.md,
/// `mbar_wait`): when each thread running the destination has run the wait `w`, nothing more
/// is needed. An `if` that always runs its then-arm (`analysis::guards`) holds it like no
/// `if`. Other waits complete only the waiting thread's own copies.
fn waited_by_all(fp: &Footprints, cx: &AsyncCx, w: Op) -> bool {
    let k = fp.k;
    if !matches!(
        fp.accesses[cx.ai].access.kind,
        AccessKind::AsyncWrite(AsyncClass::Tma)
    ) {
        return false;
    }
    let b_anc = fp.ancestors(fp.accesses[cx.bi].id.op);
    fp.ancestors(w)
        .into_iter()
        .filter(|&o| matches!(k.ops[o].kind, OpKind::If { .. }))
        .all(|o| b_anc.contains(&o) || crate::analysis::guards::always_then(k, fp.ranges(), o))
}

/// E0302: the destination may touch the copy's elements while it is in flight (once per
/// diagnostic).
fn in_flight(fp: &Footprints, cx: &AsyncCx, note: &str, out: &mut Hazards) {
    let k = fp.k;
    let (a, b) = (fp.accesses[cx.ai].id.op, fp.accesses[cx.bi].id.op);
    let d = Diagnostic::error(
        DiagKind::Finding,
        "E0302",
        format!(
            "{} touches shared memory that an async copy may still be writing or reading",
            op_label(k, b)
        ),
    )
    .with_label(k.span(b), "this access may overlap the copy in flight")
    .with_label(k.span(a), "the copy is issued here")
    .with_note(note.to_string())
    .with_help("add a wait that completes the copy before this access; a barrier does not complete a copy");
    if !out.findings.contains(&d) {
        out.findings.push(d);
    }
    warn_in_flight_leaves(fp, cx, out);
}

/// W0319 for each access of an E0302 pair whose index reads a parameter or block id that
/// the pair's questions (forward, and carried on each common loop) could not decide with:
/// the finding may rest on the whole-buffer answer, and says so.
fn warn_in_flight_leaves(fp: &Footprints, cx: &AsyncCx, out: &mut Hazards) {
    use crate::analysis::symbolic::params;
    let k = fp.k;
    let (ai, bi) = (cx.ai, cx.bi);
    let sides: Vec<(usize, Vec<Value>)> = [ai, bi]
        .into_iter()
        .filter(|&i| loaded_value(k, &fp.accesses[i].access).is_none())
        .map(|i| (i, params::whole_through_leaves(fp, i)))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    if sides.is_empty() {
        return;
    }
    let decided = params::decided(fp, ai, bi, cx.m_ab, None)
        && (0..cx.m_ab).all(|c| params::decided(fp, ai, bi, c + 1, Some(c)));
    if decided {
        return;
    }
    for (i, leaves) in sides {
        let d = w0319(fp, fp.accesses[i].id.op, i, &leaves);
        if !out.findings.contains(&d) {
            out.findings.push(d);
        }
    }
}

/// A copy completed at several waits, none on every path to destination `bi`
/// (`analysis::every_path`): the copy is complete at the destination itself, so the hazard's
/// coverage is the gap just before it and the plain ops right before that
/// (`plain_run_before`; E0302 where the dataflow sees it in flight there).
fn at_destination(
    fp: &mut Footprints,
    inflight: &crate::analysis::inflight::Completions,
    (ai, bi): (usize, usize),
    pb: &[(Region, usize)],
    out: &mut Hazards,
) {
    let k = fp.k;
    let (copy, dst) = (fp.accesses[ai].id.op, fp.accesses[bi].id.op);
    let m = common_len(&fp.accesses[ai].loops, &fp.accesses[bi].loops);
    if inflight.hazards.iter().any(|h| h.consumer == dst && h.copy == copy) {
        let note = "no wait completes the copy on every path to this access";
        let d = Diagnostic::error(
            DiagKind::Finding,
            "E0302",
            format!("{} touches shared memory that an async copy may still be writing or reading", op_label(k, dst)),
        )
        .with_label(k.span(dst), "this access may overlap the copy in flight")
        .with_label(k.span(copy), "the copy is issued here")
        .with_note(note.to_string());
        if !out.findings.contains(&d) {
            out.findings.push(d);
        }
    }
    let Some(&(region, ib)) = pb.last() else {
        return;
    };
    let p = PairAt { ai, bi, src_at: dst, pa: pb, pb, shift: None };
    let lo = 2 * plain_run_before(k, inflight.by_copy.get(&copy), region, ib);
    let cov = || Coverage { home: region, home_ranges: vec![(lo, 2 * ib)], chain: Vec::new() };
    if let Some(pc) = forward_conflict(fp, ai, bi, m)
        && pc.conflict & 1 != 0
    {
        out.hazards.push(hazard(fp, &p, Carry::Forward, &pc, cov()));
    }
    // Copies of earlier iterations of a common loop: the same gap orders them.
    let loops = fp.accesses[ai].loops.clone();
    for (c, &loop_op) in loops.iter().enumerate().take(m) {
        let pc = pair_conflict(fp, ai, bi, c + 1, Some(c));
        let later = pc.conflict & !1;
        if later != 0 {
            let carry = Carry::Carried { loop_op, d1: later & 2 != 0, min_distance: later.trailing_zeros() };
            out.hazards.push(hazard(fp, &p, carry, &pc, cov()));
        }
    }
}

/// The first index `j <= ib` of region `r` from which the ops before `ib` are *plain*: no
/// regions, no async op, no wait of any kind (and none of the copy's completing `waits`), only
/// values, synchronous memory accesses and barriers. Every path reaching op `ib` passes them
/// in a straight line and none completes a copy, so where the copy is complete at `ib` (the
/// dataflow sees it complete there: [`at_destination`]) it is complete at gap `j` already, and
/// a barrier anywhere in `[2j, 2ib]` orders it before the destination (a user's
/// `cp_async_wait 0; barrier` right before the read: L8, docs/async.md).
fn plain_run_before(k: &Kernel, waits: Option<&std::collections::BTreeSet<Op>>, r: Region, ib: usize) -> usize {
    let ops = k.region_ops(r);
    let plain = |o: Op| {
        let kind = &k.ops[o].kind;
        k.ops[o].regions.is_empty()
            && !waits.is_some_and(|w| w.contains(&o))
            && (kind.is_pure()
                || matches!(kind, OpKind::Load { .. } | OpKind::Store { .. } | OpKind::GLoad { .. } | OpKind::GStore { .. } | OpKind::Barrier))
    };
    let mut j = ib.min(ops.len());
    while j > 0 && plain(ops[j - 1]) {
        j -= 1;
    }
    j
}

/// The copy completes at `x`, after its innermost loop: an access between the loop and `x`
/// sees it in flight; one after `x` is ordered from `x` on.
fn after_loop(fp: &mut Footprints, cx: &AsyncCx, x: Op, out: &mut Hazards) {
    let px = cx.paths.path[&x].to_vec();
    if cx.forward_ab && cx.before(fp.k, &px) {
        // Where `x` completes the copy in the first iteration of a later loop that also
        // runs the destination, only that iteration's instances precede it.
        let x_loops = fp.loops_of(x);
        let (a_loops, b_loops) = (&fp.accesses[cx.ai].loops, &fp.accesses[cx.bi].loops);
        let lvl = common_len(a_loops, &x_loops);
        let first = (cx.comp.exit_on_entry
            && x_loops.len() > lvl
            && b_loops.get(lvl) == x_loops.get(lvl))
        .then(|| (lvl, first_key(fp, x_loops[lvl])));
        if intersects_at(fp, cx.ai, cx.bi, cx.m_ab, first) {
            let note = "after the loop, no completing wait lies between the copy and this access";
            in_flight(fp, cx, note, out);
        }
    }
    if !waited_by_all(fp, cx, x) {
        emit_async(fp, cx, &cx.at(x, &px, None), out);
    }
}

/// Emits the hazards of an async source's pair `p` (its source completed at `p.src_at`),
/// unless an earlier copy of the same region and kind, completed at the same point, gave
/// cross-warp hazards with this destination whose coverages each of `p`'s hazards contains
/// (`analysis::completion_blockers`): then none of `p`'s conflict questions is asked.
fn emit_async(fp: &mut Footprints, cx: &AsyncCx, p: &PairAt, out: &mut Hazards) {
    let (Some(table), Some(region)) = (cx.blockers, cx.src_region) else {
        return emit_pair(fp, p, out);
    };
    let key = BlockKey {
        at: p.src_at,
        dst: p.bi,
        region,
        kind: fp.accesses[p.ai].access.kind,
    };
    let k = fp.k;
    let own_index = || loaded_value(k, &fp.accesses[p.ai].access).is_none();
    if table.borrow_mut().blocks(&key, p.ai, own_index, |b| implied(fp, p, b)) {
        return;
    }
    let first = out.hazards.len();
    emit_pair(fp, p, out);
    table.borrow_mut().record(key, out.hazards[first..].iter().map(carry_bits));
}

/// Whether blocker `b` implies every hazard pair `p` could have: a cross-warp forward hazard
/// where a forward path exists, and for every common loop with a carried coverage a
/// cross-warp carried hazard of the smaller coverage (distance 1: the arc; or any, where the
/// arc is the whole body). Same `src_at` and destination give the same paths, so the same
/// forward coverage and, per loop, the same arc or whole body.
fn implied(fp: &Footprints, p: &PairAt, b: &Blocker) -> bool {
    let k = fp.k;
    if !b.forward && forward_coverage(k, p).is_some() {
        return false;
    }
    let at_loops = if p.src_at == fp.accesses[p.ai].id.op {
        fp.accesses[p.ai].loops.clone()
    } else {
        fp.loops_of(p.src_at)
    };
    let m = common_len(&at_loops, &fp.accesses[p.bi].loops);
    at_loops.iter().take(m).all(|&l| {
        let Some(arc) = carried_coverage(k, p, l, true) else {
            return true;
        };
        b.carried.contains(&(l, true))
            || (b.carried.contains(&(l, false))
                && carried_coverage(k, p, l, false).is_some_and(|w| w.home_ranges == arc.home_ranges))
    })
}

/// Completion in the copy's loop body (or region) in the same iteration, at wait `w`.
fn completed_in_iteration(fp: &mut Footprints, cx: &AsyncCx, w: Op, out: &mut Hazards) {
    let pw = cx.paths.path[&w].to_vec();
    let before_w = cx.before(fp.k, &pw);
    if cx.forward_ab && before_w {
        // A wait found in the first iteration of a later loop: only that iteration's
        // instances of the destination precede it.
        let w_loops = fp.loops_of(w);
        let n = fp.accesses[cx.ai].loops.len();
        let first = (w_loops.len() > n && fp.accesses[cx.bi].loops.get(n) == w_loops.get(n))
            .then(|| (n, first_key(fp, w_loops[n])));
        if intersects_at(fp, cx.ai, cx.bi, cx.m_ab, first) {
            let note = "no completing wait lies between the copy and this access";
            in_flight(fp, cx, note, out);
        }
    }
    if before_w && inner_carried_intersect(fp, cx.ai, cx.bi, cx.comp.level, cx.m_ab) {
        let note = "the copy's inner loop issues it again before the wait that completes it";
        in_flight(fp, cx, note, out);
    }
    if !waited_by_all(fp, cx, w) {
        emit_async(fp, cx, &cx.at(w, &pw, None), out);
    }
}

/// Completion at wait `w` of the copy's loop, `delta ≥ 1` iterations after the issue.
fn completed_later(fp: &mut Footprints, cx: &AsyncCx, w: Op, delta: u32, out: &mut Hazards) {
    let level = cx.comp.level.expect("a wrapped completion has a loop");
    let l = fp.accesses[cx.ai].loops[level];
    if fp.accesses[cx.bi].loops.contains(&l) {
        let pw = cx.paths.path[&w].to_vec();
        let pc = pair_conflict(fp, cx.ai, cx.bi, level + 1, Some(level));
        let before_w = cx.before(fp.k, &pw);
        if (delta > 0 || before_w) && inner_carried_intersect(fp, cx.ai, cx.bi, Some(level), cx.m_ab) {
            let note = "the copy's inner loop issues it again before the wait that completes it";
            in_flight(fp, cx, note, out);
        }
        for d in 0..=delta.min(62) {
            let ok = (d > 0 || cx.forward_ab) && (d < delta || before_w);
            if ok && pc.intersect & (1 << d) != 0 {
                let note = format!(
                    "the copy completes only {delta} iteration(s) later, at a wait this access precedes"
                );
                in_flight(fp, cx, &note, out);
                break;
            }
        }
        if !waited_by_all(fp, cx, w) {
            emit_async(fp, cx, &cx.at(w, &pw, Some((level, delta))), out);
        }
    } else if let Some(x) = cx.comp.exit {
        after_loop(fp, cx, x, out);
    } else if cx.comp.exit_drained && waited_by_all(fp, cx, w) {
        // Every execution is completed by `w` inside the loop (the guard rules out the
        // rest), and `w` makes it visible to every thread: nothing left in flight.
    } else if cx.forward_ab && pair_conflict(fp, cx.ai, cx.bi, cx.m_ab, None).intersect != 0 {
        let note = "no wait completes the copy on the path that leaves the loop";
        in_flight(fp, cx, note, out);
    }
}

/// No wait in the copy's loop completes it: only the wait after its loop (a prologue filling
/// several slots), if any, where the destination is not in that loop.
fn completed_after_loop(fp: &mut Footprints, cx: &AsyncCx, out: &mut Hazards) {
    let a_loops = &fp.accesses[cx.ai].loops;
    let in_copy_loop = cx
        .comp
        .level
        .is_some_and(|level| fp.accesses[cx.bi].loops.contains(&a_loops[level]));
    match cx.comp.exit {
        // Accesses after the loop are ordered from that wait on, as above.
        Some(x) if !in_copy_loop => after_loop(fp, cx, x, out),
        _ => {
            // Never completed where this access runs: every later overlapping access is in
            // flight.
            let (ai, bi, m_ab) = (cx.ai, cx.bi, cx.m_ab);
            let pc = pair_conflict(fp, ai, bi, m_ab, None);
            let carried =
                (0..m_ab).any(|c| pair_conflict(fp, ai, bi, c + 1, Some(c)).intersect & !1 != 0);
            if (cx.forward_ab && pc.intersect & 1 != 0) || carried {
                in_flight(fp, cx, "no wait completes this copy", out);
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
    (k.region_ops(r).iter()).any(|&o| is_handshake_op(&k.ops[o].kind) || k.ops[o].regions.iter().any(|&c| region_has_handshake(k, c)))
}

/// Whether an op is a handshake op: a named barrier, an mbarrier arrive or wait.
fn is_handshake_op(kind: &OpKind) -> bool {
    matches!(kind, OpKind::NamedArrive { .. } | OpKind::NamedSync { .. } | OpKind::MbarArrive { .. } | OpKind::MbarWait { .. })
}

/// Whether a region holds an mbarrier arrive or wait (an mbarrier handshake the chain check
/// verifies).
fn region_has_mbar(k: &Kernel, r: Region) -> bool {
    (k.region_ops(r).iter()).any(|&o| {
        matches!(k.ops[o].kind, OpKind::MbarArrive { .. } | OpKind::MbarWait { .. })
            || k.ops[o].regions.iter().any(|&c| region_has_mbar(k, c))
    })
}
