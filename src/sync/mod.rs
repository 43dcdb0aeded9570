//! Sync placement: from hazards to a [`SyncPlan`] of inserted syncs.
//!
//! [`place_barriers`] is the public entry point: it finds the hazards of a kernel, discounts
//! those that syncs already in the input remove, and places the fewest executed barriers that
//! remove the rest (`place`), or the conservative baseline (`naive`). `exhaustive` is the
//! test oracle. Placement never mutates the kernel; `ir::edit::apply` materializes the plan.
//! Every pass here (waits, barriers, fences) returns that one plan type, and names ops in its
//! messages through the IR's printer (`ir::text`): `sync` depends on no emitter.
//!
//! The shared model ([`SyncModel`]): candidate points are gaps of regions that every thread
//! of the block reaches together (not divergent, not a `while` condition); a point's cost is
//! the number of times it executes (the product of the enclosing loops' trip counts, a
//! symbolic trip count counting as [`SYMBOLIC_TRIP`]); existing syncs are points at odd
//! coordinates (an op, or a compound op that executes a sync on every path).

pub mod branch_split;
pub mod driver;
pub mod exhaustive;
pub mod fences;
pub mod handshake;
pub(crate) mod handshake_chain;
pub(crate) mod handshake_guards;
pub mod handshake_mbar;
pub(crate) mod handshake_tma;
pub mod joint;
pub mod naive;
pub mod named_ids;
pub(crate) mod named_phases;
pub mod place;
pub mod role_release;
pub mod split;
pub mod split_pairs;
pub(crate) mod tma_unwaited;
pub mod waits;
pub mod waits_paths;
pub(crate) mod wgmma_release;

use std::collections::HashMap;

use crate::analysis::footprint::{FootprintMemo, Footprints};
use crate::analysis::hazards::{Hazard, Hazards, Paths, find_hazards_memo};
use crate::analysis::inflight::FlowMemo;
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::text::op_label;
use crate::ir::edit::{Edit, EditReason, ProgramPoint, SyncPlan, body_len};
use crate::ir::*;
use crate::target::Target;
use named_ids::{NamedIds, named_ids};

/// The trip count assumed for a loop whose bounds are unknown.
pub const SYMBOLIC_TRIP: u64 = 1 << 20;

/// Which placer to run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Fewest barriers executed, then fewest written (`sync::place`).
    #[default]
    Optimal,
    /// A barrier before every access that conflicts with an earlier one (`sync::naive`).
    Naive,
    /// Exhaustive search (`sync::exhaustive`; small kernels only).
    Exhaustive,
}

/// Options of [`place_barriers`].
#[derive(Clone, Debug, Default)]
pub struct PlaceOptions {
    pub strategy: Strategy,
    /// Values of scalar parameters (by name, without `%`) used to count executed barriers.
    pub bounds: HashMap<String, i64>,
    /// Use warp-level syncs where every conflicting pair of threads lies in one warp.
    pub no_warp_sync: bool,
}

/// The scope of a sync.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Warp,
    Block,
}

/// A sync point: region, doubled coordinate (`2g` a gap, `2i+1` an op), scope.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    pub region: Region,
    pub coord: usize,
    pub scope: Scope,
}

/// Sync points indexed by region and coordinate, for fast coverage queries.
#[derive(Clone, Debug, Default)]
pub struct PointIndex {
    by_region: rustc_hash::FxHashMap<Region, std::collections::BTreeMap<usize, Scope>>,
}

impl PointIndex {
    pub fn insert(&mut self, p: Point) {
        let e = self
            .by_region
            .entry(p.region)
            .or_default()
            .entry(p.coord)
            .or_insert(p.scope);
        *e = (*e).max(p.scope);
    }

    /// Every point of the index that removes `h`.
    pub fn covering<'a>(&'a self, h: &'a Hazard) -> impl Iterator<Item = Point> + 'a {
        h.segments().flat_map(move |s| {
            self.by_region
                .get(&s.region)
                .into_iter()
                .flat_map(move |m| {
                    m.range(s.lo..=s.hi).filter_map(move |(&coord, &scope)| {
                        (scope == Scope::Block || h.intra_warp).then_some(Point {
                            region: s.region,
                            coord,
                            scope,
                        })
                    })
                })
        })
    }

    /// Whether some point of the index removes `h`.
    pub fn covers(&self, h: &Hazard) -> bool {
        self.covering(h).next().is_some()
    }
}

/// Counts of a placement.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub hazards: usize,
    /// Hazards removed by syncs already in the input.
    pub covered_by_existing: usize,
    /// Block barriers inserted.
    pub barriers_written: usize,
    /// Warp-level syncs inserted.
    pub warp_syncs_written: usize,
    /// Existing block barriers in the input.
    pub existing_barriers: usize,
    /// Barriers executed per block (inserted + existing), with the given bounds.
    pub barriers_executed: u64,
    /// Inserted barriers executed.
    pub inserted_executed: u64,
    /// A lower bound on the inserted barriers executed by any correct placement.
    pub lower_bound: u64,
    /// Conservative answers of the analysis (warnings W0310–W0318, W1510): each may cost
    /// syncs.
    pub conservative: usize,
}

/// The result of placement.
#[derive(Clone, Debug)]
pub struct Placement {
    pub plan: SyncPlan,
    pub hazards: Vec<Hazard>,
    /// For each edit of the plan, the indices of the hazards it removes.
    pub removes: Vec<Vec<usize>>,
    /// Indices of hazards removed by syncs already in the input.
    pub existing: Vec<usize>,
    pub stats: Stats,
    /// Non-fatal findings (e.g. a possible race no barrier can fix, on unknown indices).
    pub warnings: Vec<Diagnostic>,
}

/// An arm of a role branch (`if in_group @g`): its region and the number of threads that run
/// it. The named-barrier id is allocated when a sync is placed in the arm.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NamedArm {
    pub arm: Region,
    pub count: u32,
}

/// The placement model shared by the placers and the oracle.
pub struct SyncModel<'k> {
    pub k: &'k Kernel,
    pub paths: std::rc::Rc<Paths>,
    pub legal: HashMap<Region, bool>,
    /// Regions every thread of each warp that enters them reaches together (block-divergent
    /// control on a warp-uniform condition): legal places for a warp sync.
    pub warp_legal: HashMap<Region, bool>,
    /// Regions inside one arm of a thread-dependent `if in_group @g` (and only that
    /// divergence): every thread of the arm's group reaches them, so a named barrier over the
    /// group is legal there (targets with named barriers). Maps to the arm and its count.
    pub named: HashMap<Region, NamedArm>,
    /// The target's number of named-barrier ids (0 when it has none; id 0 is the block
    /// barrier).
    pub named_limit: u32,
    pub weight: HashMap<Region, u64>,
    pub weight_bounds: HashMap<Region, u64>,
    /// Existing sync points.
    pub existing: Vec<Point>,
    /// Hand-written `barrier`s under block-divergent control, `warp_sync`s and named
    /// barriers under control that differs within a warp, wgmma ops under control that
    /// differs within a warpgroup: the threads that skip one never arrive (or the hardware
    /// op is undefined), so `place_with` refuses the kernel (E0309) instead of crediting it.
    pub stuck: Vec<Op>,
    /// The kernel's hand-written split pairs (`split_pairs`): the credited waits (those with
    /// a clean window act as block barriers where they stand, those with a shared access in
    /// the window as a sync at two points: [`SyncModel::split_covers`]) and the gaps inside
    /// a window, where no block barrier goes ([`SyncModel::in_split_window`]).
    pub split: split_pairs::SplitPairs,
}

/// The trip count of a `for` with constant bounds, or with parameters given in `bounds`
/// (`Some`; parameters not named there take their default, `%n: i32 = 8`).
fn trip(k: &Kernel, op: Op, bounds: Option<&HashMap<String, i64>>) -> Option<u64> {
    let OpKind::For { lo, hi, step, .. } = &k.ops[op].kind else {
        return None;
    };
    let val = |o: &Operand| -> Option<i64> {
        match o {
            Operand::Imm(s) => Some(s.as_i64()),
            Operand::Value(v) => match k.values[*v].def {
                ValueDef::Result(d, _) => match k.ops[d].kind {
                    OpKind::Const(s) => Some(s.as_i64()),
                    _ => None,
                },
                ValueDef::Param(_) => bounds.and_then(|b| {
                    b.get(k.value_names.get(*v))
                        .copied()
                        .or_else(|| k.param_defaults.get(*v).map(|d| d.as_i64()))
                }),
                _ => None,
            },
        }
    };
    let (lo, hi, st) = (val(lo)?, val(hi)?, val(step)?);
    if st <= 0 {
        return None;
    }
    Some(((hi - lo).max(0) as u64).div_ceil(st as u64))
}

/// Per region: whether a barrier may go there (not inside a `while` condition) and how often
/// it executes per kernel run (symbolic trips at [`SYMBOLIC_TRIP`], and with `bounds`).
struct RegionWeights<'a> {
    bounds: &'a HashMap<String, i64>,
    legal: HashMap<Region, bool>,
    weight: HashMap<Region, u64>,
    weight_bounds: HashMap<Region, u64>,
}

impl RegionWeights<'_> {
    /// Records region `r`, executed `w` times (without, with bounds), legal if `ok`, and the
    /// regions nested in it.
    fn region(&mut self, k: &Kernel, r: Region, w: (u64, u64), ok: bool) {
        self.legal.insert(r, ok);
        self.weight.insert(r, w.0);
        self.weight_bounds.insert(r, w.1);
        for &op in k.region_ops(r) {
            let od = &k.ops[op];
            for (i, &c) in od.regions.iter().enumerate() {
                let (w2, wb2, ok2) = match od.kind {
                    OpKind::For { .. } => {
                        let t = trip(k, op, None).map_or(SYMBOLIC_TRIP, |t| t.max(1));
                        let tb = trip(k, op, Some(self.bounds)).unwrap_or(t);
                        (w.0.saturating_mul(t), w.1.saturating_mul(tb), ok)
                    }
                    OpKind::While { .. } => (
                        w.0.saturating_mul(SYMBOLIC_TRIP),
                        w.1.saturating_mul(SYMBOLIC_TRIP),
                        ok && i == 1,
                    ),
                    _ => (w.0, w.1, ok),
                };
                self.region(k, c, (w2, wb2), ok2);
            }
        }
    }
}

impl<'k> SyncModel<'k> {
    pub fn new(k: &'k Kernel, fp: &Footprints, bounds: &HashMap<String, i64>) -> Self {
        // Shared with hazard finding (built once per kernel); `fp` is of `k`.
        let paths = if std::ptr::eq(fp.k, k) {
            fp.paths()
        } else {
            std::rc::Rc::new(Paths::new(k))
        };
        let mut w = RegionWeights {
            bounds,
            legal: HashMap::new(),
            weight: HashMap::new(),
            weight_bounds: HashMap::new(),
        };
        w.region(k, k.body(), (1, 1), true);
        let RegionWeights {
            mut legal,
            weight,
            weight_bounds,
            ..
        } = w;
        // Block barriers need every thread of the block, warp syncs every thread of the warp
        // (`if warp == 0`, `if tid.x < 32` are legal places for a warp sync).
        let uw = warp_uniformity(fp, fp.warp);
        let warp_legal = legal
            .iter()
            .map(|(&r, &ok)| (r, ok && !uw.is_warp_divergent(r)))
            .collect();
        let u = fp.uniformity();
        let stuck = stuck_syncs(fp, &uw);
        for (r, ok) in legal.iter_mut() {
            *ok = *ok && !u.is_divergent(*r);
        }
        let mut m = SyncModel {
            k,
            paths,
            legal,
            warp_legal,
            named: HashMap::new(),
            named_limit: 0,
            weight,
            weight_bounds,
            existing: Vec::new(),
            stuck,
            split: split_pairs::SplitPairs::of(k),
        };
        for (r, _) in k.regions().iter() {
            for (i, &op) in k.region_ops(r).iter().enumerate() {
                if let Some(s) = m.must_sync(op) {
                    m.existing.push(Point {
                        region: r,
                        coord: 2 * i + 1,
                        scope: s,
                    });
                }
            }
        }
        m
    }

    /// The scope of the sync an op executes on every path, if any.
    pub fn must_sync(&self, op: Op) -> Option<Scope> {
        let k = self.k;
        let od = &k.ops[op];
        let region_sync = |r: Region| -> Option<Scope> {
            k.region_ops(r)
                .iter()
                .filter_map(|&o| self.must_sync(o))
                .max()
        };
        match &od.kind {
            OpKind::For { .. } => {
                if trip(k, op, None).is_some_and(|t| t >= 1) {
                    region_sync(od.regions[0])
                } else {
                    None
                }
            }
            OpKind::Stage { .. } => region_sync(od.regions[0]),
            OpKind::While { .. } => region_sync(od.regions[0]),
            OpKind::If { .. } => region_sync(od.regions[0]).min(region_sync(od.regions[1])),
            _ => match crate::ir::effects::sync_effect(&od.kind) {
                Some(SyncEffect::Barrier) => Some(Scope::Block),
                Some(SyncEffect::WarpSync) => Some(Scope::Warp),
                Some(SyncEffect::NamedSync { count, .. }) if count >= k.threads() => {
                    Some(Scope::Block)
                }
                // A hand-written split wait whose window holds no shared access or sync op
                // on any path (an adjacent pair, a rotated loop's halves).
                Some(SyncEffect::SplitWait(_)) => (self.split.waits.contains_key(&op)
                    && !self.split.dirty.contains(&op))
                .then_some(Scope::Block),
                _ => None,
            },
        }
    }

    /// Whether a sync point removes a hazard. A point inside a role arm (a named barrier
    /// over the arm's group) orders only accesses of that group: both accesses must lie in
    /// the arm.
    pub fn covers(&self, p: &Point, h: &Hazard) -> bool {
        if let Some(a) = self.named.get(&p.region)
            && ![h.src.op, h.src_at, h.dst.op]
                .iter()
                .all(|&o| self.in_region(o, a.arm))
        {
            return false;
        }
        (p.scope == Scope::Block || h.intra_warp) && h.covered_by(p.region, p.coord)
    }

    /// Whether a hand-written split pair whose window holds a shared access removes `h`: its
    /// wait is on every path of `h` (the wait's point covers it) and neither the source nor
    /// the op where it takes effect may lie in a window that wait closes, so on every path
    /// `src ≤ signal` and `wait ≤ dst` (docs/placement.md, section 8). A pair whose window
    /// is clean is an existing point instead ([`SyncModel::must_sync`]). O(dirty waits).
    pub fn split_covers(&self, h: &Hazard) -> bool {
        self.split.dirty.iter().any(|&w| {
            self.paths.pos(w).is_some_and(|(r, i)| {
                h.covered_by(r, 2 * i + 1)
                    && !self.split.in_window_of(h.src.op, w)
                    && !self.split.in_window_of(h.src_at, w)
            })
        })
    }

    /// Whether gap `g` of region `r` may lie inside a hand-written split window: a block
    /// barrier there would be lowered to a pair nested in it (P0001), so none goes there.
    pub fn in_split_window(&self, r: Region, g: usize) -> bool {
        self.split.open_gaps.contains(&(r, g))
    }

    /// Whether `op` lies (at any depth) in region `r`.
    fn in_region(&self, op: Op, r: Region) -> bool {
        self.paths
            .path
            .get(&op)
            .is_some_and(|p| p.iter().any(|&(q, _)| q == r))
    }

    pub fn is_legal(&self, r: Region) -> bool {
        self.legal.get(&r).copied().unwrap_or(false) || self.named.contains_key(&r)
    }

    /// Whether a sync of `scope` is legal in region `r`: a block barrier where the whole
    /// block (or a role arm's group) arrives, a warp sync also where whole warps arrive.
    pub fn is_legal_for(&self, r: Region, scope: Scope) -> bool {
        self.is_legal(r)
            || (scope == Scope::Warp && self.warp_legal.get(&r).copied().unwrap_or(false))
    }

    /// Makes the arms of role branches (`if %c` with `%c = in_group @g` at a converged point)
    /// legal places for named barriers over the arm's threads: the then-arm runs on the
    /// group's threads, the else-arm on the others. Regions nested in an arm stay legal while
    /// their control is uniform (immediates or values uniform across the block). Arms whose
    /// thread count is not a multiple of the warp width are left out; ids are handed out
    /// only to the arms that get a sync ([`named_ids`]). Existing named syncs with the arm's
    /// count become existing sync points.
    pub fn enable_named(&mut self, target: &Target) {
        let k = self.k;
        if target.named_barriers == 0 {
            return;
        }
        self.named_limit = target.named_barriers;
        let u = crate::analysis::uniformity::analyze(k);
        let threads = k.threads();
        for op in k.ops_in_order() {
            let Some(g) = crate::analysis::role_split::branch_group(k, op) else {
                continue;
            };
            let Some((r, _)) = self.paths.pos(op) else {
                continue;
            };
            // A role branch at a converged point of the block, or nested in a role arm (at a
            // point every thread of that arm reaches: more than two roles), whose else-arm
            // then runs on the rest of the enclosing arm's threads.
            let enclosing = if self.legal.get(&r).copied().unwrap_or(false) {
                threads
            } else {
                match self.named.get(&r) {
                    Some(a) => a.count,
                    None => continue,
                }
            };
            let size = k.groups[g].hi - k.groups[g].lo;
            if size > enclosing {
                continue;
            }
            for (i, &arm) in k.ops[op].regions.iter().enumerate() {
                let count = if i == 0 { size } else { enclosing - size };
                if count == 0 || count % target.warp != 0 {
                    continue;
                }
                let na = NamedArm { arm, count };
                let mut stack = vec![arm];
                while let Some(q) = stack.pop() {
                    self.named.insert(q, na);
                    for &o in k.region_ops(q) {
                        // Uniform over the arm's threads: a bound computed in the arm
                        // from block-uniform values is the same in each of them.
                        let uniform =
                            |x: &Operand| role_release::same_for_reaching_threads(k, &u, x);
                        let ok = match &k.ops[o].kind {
                            OpKind::For { lo, hi, step, .. } => {
                                [lo, hi, step].iter().all(|x| uniform(x))
                            }
                            OpKind::If { cond } => uniform(cond),
                            OpKind::Stage { .. } => true,
                            _ => false,
                        };
                        if ok {
                            stack.extend(k.ops[o].regions.iter().copied());
                        }
                    }
                }
            }
        }
        for (r, rd) in k.regions().iter() {
            let Some(a) = self.named.get(&r).copied() else {
                continue;
            };
            for (i, &op) in rd.ops().iter().enumerate() {
                if matches!(k.ops[op].kind, OpKind::NamedSync { count, .. } if count == a.count) {
                    self.existing.push(Point {
                        region: r,
                        coord: 2 * i + 1,
                        scope: Scope::Block,
                    });
                }
            }
        }
    }

    /// The program point of gap `g` of region `r`.
    pub fn program_point(&self, r: Region, g: usize) -> ProgramPoint {
        let ops = self.k.region_ops(r);
        if g < body_len(self.k, r) {
            ProgramPoint::before(ops[g])
        } else {
            ProgramPoint::end(r)
        }
    }

    /// A diagnostic for a hazard whose every legal barrier point lies inside a hand-written
    /// split window: the barrier's pair would be a second signal before that window's wait.
    pub fn in_window_unplaceable(&self, h: &Hazard) -> Diagnostic {
        let k = self.k;
        Diagnostic::error(DiagKind::Finding, "P0001", format!("{} hazard between {} and {} can only be removed inside a hand-written split-barrier window", h.kind.name(), op_label(k, h.src.op), op_label(k, h.dst.op)))
            .with_label(k.span(h.dst.op), "this access must wait")
            .with_label(k.span(h.src.op), "for this access")
            .with_note("every point that orders these accesses lies between a `barrier_signal` and its `barrier_wait`; a barrier there would be a second signal before the wait")
            .with_help("move the accesses out of the window, or close the window (`barrier_wait`) before the access that must wait")
    }

    /// A diagnostic for a hand-written sync op or collective that some threads of its scope
    /// skip ([`SyncModel::stuck`]).
    pub fn stuck_sync(&self, op: Op) -> Diagnostic {
        stuck_sync(self.k, op)
    }

    /// Adds [`SyncModel::unplaceable`] of `h` to `out` unless it is there already: the
    /// forward and the carried hazard of a pair in a divergent loop read the same, and are
    /// reported once.
    pub fn push_unplaceable(&self, h: &Hazard, out: &mut Vec<Diagnostic>) {
        let d = self.unplaceable(h);
        if !out.contains(&d) {
            out.push(d);
        }
    }

    /// A diagnostic for a hazard no legal barrier can remove.
    pub fn unplaceable(&self, h: &Hazard) -> Diagnostic {
        let k = self.k;
        let (dst, dst_label) = k.locate(h.dst.op, "this access must wait");
        let (src, src_label) = k.locate(h.src.op, "for this access");
        Diagnostic::error(DiagKind::Finding, "E0303", format!("{} hazard between {} and {} cannot be removed by a barrier under thread-dependent control", h.kind.name(), op_label(k, h.src.op), op_label(k, h.dst.op)))
            .with_label(dst, dst_label)
            .with_label(src, src_label)
            .with_note("a block barrier is legal only where every thread of the block arrives; every point that orders these accesses lies under a thread-dependent `if` or loop")
            .with_help("move the accesses out of the divergent region, or split the branch so the barrier sits between the two halves")
    }
}

/// Places syncs for `k` on `target` (see the module doc). Errors are findings that no barrier
/// can fix (in-flight async reads, accesses racing inside one op, hazards under
/// thread-dependent control).
pub fn place_barriers(
    k: &Kernel,
    target: &Target,
    opts: &PlaceOptions,
) -> Result<Placement, Vec<Diagnostic>> {
    place_barriers_memo(k, target, opts, &mut PlaceMemo::default())
}

/// Answers shared by the placements of one kernel and of the kernels derived from it by
/// inserting sync ops (their existing ops keep their ids): the in-flight dataflow's
/// ([`FlowMemo`]) and, when a caller knows a second placement will run, the footprints'
/// ([`FootprintMemo`]; it keeps every address space's footprints, so it is opt-in).
#[derive(Default)]
pub struct PlaceMemo {
    pub flow: FlowMemo,
    pub footprints: Option<Box<FootprintMemo>>,
}

/// [`place_barriers`] reading and growing `memo` (a memo of `k` or of a kernel `k` was
/// derived from by inserting sync ops: see [`PlaceMemo`]).
pub fn place_barriers_memo(
    k: &Kernel,
    target: &Target,
    opts: &PlaceOptions,
    memo: &mut PlaceMemo,
) -> Result<Placement, Vec<Diagnostic>> {
    let mut fp = Footprints::new(k, target.warp);
    fp.memo = memo.footprints.take();
    if fp.memo.as_ref().is_some_and(|m| m.no_boxes) {
        fp.use_boxes = false;
    }
    let mut hz = find_hazards_memo(&mut fp, target, &mut memo.flow);
    // The role barrier before an elected signal (docs/placement.md, "Mbarrier objects").
    hz.hazards.extend(role_release::hazards(&fp));
    memo.footprints = fp.memo.take();
    let mut model = SyncModel::new(k, &fp, &opts.bounds);
    model.enable_named(target);
    place_with(&model, hz, opts)
}

/// Places syncs given the hazards.
pub fn place_with(
    model: &SyncModel,
    hz: Hazards,
    opts: &PlaceOptions,
) -> Result<Placement, Vec<Diagnostic>> {
    let Hazards {
        mut hazards,
        findings,
        ..
    } = hz;
    if opts.no_warp_sync {
        for h in &mut hazards {
            h.intra_warp = false;
        }
    }
    let (warnings, errors): (Vec<Diagnostic>, Vec<Diagnostic>) = findings
        .into_iter()
        .partition(|d| d.severity == crate::diag::Severity::Warning);
    let errors: Vec<Diagnostic> = model
        .stuck
        .iter()
        .map(|&op| model.stuck_sync(op))
        .chain(named_phases::errors(model.k))
        .chain(errors)
        .collect();
    if !errors.is_empty() {
        // Warnings of conservative answers first: they often explain the errors.
        return Err(warnings.into_iter().chain(errors).collect());
    }
    let mut ex_index = PointIndex::default();
    for p in &model.existing {
        ex_index.insert(*p);
    }
    let existing: Vec<usize> = (0..hazards.len())
        .filter(|&i| ex_index.covers(&hazards[i]) || model.split_covers(&hazards[i]))
        .collect();
    let is_existing: rustc_hash::FxHashSet<usize> = existing.iter().copied().collect();
    let pending: Vec<usize> = (0..hazards.len())
        .filter(|i| !is_existing.contains(i))
        .collect();
    let points = match opts.strategy {
        Strategy::Optimal => place::place(model, &hazards, &pending)?,
        Strategy::Naive => naive::place(model, &hazards, &pending)?,
        Strategy::Exhaustive => {
            // A hazard with no legal point has no answer in the search: E0303, as the optimal
            // placer says, not "too large".
            let mut stuck = Vec::new();
            for &i in &pending {
                if !has_legal_point(model, &hazards[i]) {
                    model.push_unplaceable(&hazards[i], &mut stuck);
                }
            }
            if !stuck.is_empty() {
                return Err(stuck);
            }
            exhaustive::place(model, &hazards, &pending, 40).ok_or_else(|| {
                vec![Diagnostic::user(
                    "E0304",
                    "the kernel is too large for the exhaustive placer",
                )]
            })?
        }
    };
    let mut points = points;
    role_release::publish_inits_early(model, &hazards, &pending, &mut points);
    points.sort();
    points.dedup();
    named_ids(model, &points).map_err(|d| vec![d])?;
    let mut placement = finish(model, hazards, existing, &pending, points);
    placement.stats.conservative = warnings
        .iter()
        .filter(|w| is_conservative(w.code))
        .count();
    placement.warnings = warnings;
    Ok(placement)
}

/// Whether some region of `h`'s coverage takes a sync that removes it (a block barrier, or a
/// warp sync for an intra-warp hazard).
fn has_legal_point(model: &SyncModel, h: &Hazard) -> bool {
    h.segments()
        .any(|s| model.is_legal(s.region) || h.intra_warp && model.is_legal_for(s.region, Scope::Warp))
}

/// E0309 at a hand-written collective some threads of its scope skip ([`SyncModel::stuck`]).
fn stuck_sync(k: &Kernel, op: Op) -> Diagnostic {
    let deadlock = "never arrive, and the kernel deadlocks";
    let (what, scope, effect, note) = match k.ops[op].kind {
        OpKind::WarpSync => ("warp_sync", "warp", deadlock, "a `warp_sync` completes only when every thread of its warp arrives at it"),
        OpKind::NamedSync { .. } | OpKind::NamedArrive { .. } => (
            if matches!(k.ops[op].kind, OpKind::NamedSync { .. }) { "named_sync" } else { "named_arrive" },
            "warp",
            "leave it half-executed (`bar.sync`/`bar.arrive` are `.aligned`: undefined behaviour)",
            "a named barrier counts warps: every thread of a warp that reaches it must reach it together",
        ),
        OpKind::Wgmma { .. } | OpKind::WgmmaCommit | OpKind::WgmmaWait(_) => (
            match k.ops[op].kind {
                OpKind::Wgmma { .. } => "wgmma",
                OpKind::WgmmaCommit => "wgmma_commit",
                _ => "wgmma_wait",
            },
            "warpgroup",
            "leave it half-executed (`.sync.aligned`: the warpgroup's 128 threads execute it together, else the behaviour is undefined)",
            "a wgmma (and its commit and wait) is executed by the 4 aligned warps of a warpgroup together",
        ),
        _ => ("barrier", "block", deadlock, "a `barrier` completes only when every thread of its block arrives at it"),
    };
    Diagnostic::error(DiagKind::Finding, "E0309", format!("`{what}` under thread-dependent control: threads of its {scope} that skip it {effect}"))
        .with_label(k.span(op), format!("not reached by every thread of its {scope}"))
        .with_note(format!("{note}; an enclosing `if` or loop lets some of them pass it by"))
        .with_help("move it out of the thread-dependent region (or delete it and let `sync` place what the kernel needs)")
}

/// The per-warp uniformity of `fp`'s kernel for warps of `width` threads.
fn warp_uniformity(fp: &Footprints, width: u32) -> crate::analysis::uniformity::Uniformity {
    let eval = |v: Value, t: u32| fp.eval(v, &Default::default(), t, &mut Default::default());
    crate::analysis::uniformity::analyze_warp(fp.k, width, &eval)
}

/// The hand-written collectives in a region where their scope diverges
/// ([`SyncModel::stuck`]), in program order: `barrier` (block), `warp_sync`, `named_sync`,
/// `named_arrive` (warp, `uw`: the hardware counts whole warps), `wgmma`, `wgmma_commit`,
/// `wgmma_wait` (warpgroup: 4 aligned warps, analysed only when the kernel has one). O(ops)
/// plus the uniformity analyses.
fn stuck_syncs(fp: &Footprints, uw: &crate::analysis::uniformity::Uniformity) -> Vec<Op> {
    let k = fp.k;
    let u = fp.uniformity();
    let wgmma = |o: &OpData| matches!(o.kind, OpKind::Wgmma { .. } | OpKind::WgmmaCommit | OpKind::WgmmaWait(_));
    let ug = (k.ops.iter().any(|(_, o)| wgmma(o))).then(|| warp_uniformity(fp, 4 * fp.warp));
    k.ops_in_order()
        .into_iter()
        .filter(|&op| {
            let Some(r) = k.op_region(op) else {
                return false;
            };
            match k.ops[op].kind {
                OpKind::Barrier => u.is_divergent(r),
                OpKind::WarpSync | OpKind::NamedSync { .. } | OpKind::NamedArrive { .. } => {
                    uw.is_warp_divergent(r)
                }
                _ if wgmma(&k.ops[op]) => ug.as_ref().is_some_and(|g| g.is_warp_divergent(r)),
                _ => false,
            }
        })
        .collect()
}

/// The errors `sync` reports about an input's hand-written collectives before placing
/// anything: E0309 (a collective some threads of its block, warp or warpgroup skip) and
/// E0310 (a named-barrier phase that cannot complete). `emit` refuses such a kernel too.
pub fn collective_errors(k: &Kernel, target: &Target) -> Vec<Diagnostic> {
    let fp = Footprints::new(k, target.warp);
    let uw = warp_uniformity(&fp, fp.warp);
    let stuck = stuck_syncs(&fp, &uw);
    (stuck.into_iter().map(|op| stuck_sync(k, op)))
        .chain(named_phases::errors(k))
        .collect()
}

/// Whether a warning reports a conservative answer of the analysis (W0310–W0316: enumeration
/// caps and indices the engine cannot express; W0317: a write that may race with itself
/// through an index not known statically; W0318: an mbarrier wait whose phase was not
/// verified; W0319: an index on a parameter or block id answered with the whole buffer;
/// W0320: a wait not credited as an async copy's completion because the copy's executions
/// were merged after a long loop; W1510: an index loaded from memory).
pub fn is_conservative(code: &str) -> bool {
    code.starts_with("W031") || code == "W0320" || code.starts_with("W151")
}

/// Builds the plan, attribution and statistics from chosen points.
///
/// # Panics
/// When the role arms holding points need more named-barrier ids than the target has
/// ([`named_ids::named_ids`]); [`place_with`] reports that as E0308 before calling this.
pub fn finish(
    model: &SyncModel,
    hazards: Vec<Hazard>,
    existing: Vec<usize>,
    pending: &[usize],
    mut points: Vec<Point>,
) -> Placement {
    points.sort();
    points.dedup();
    let ids = named_ids(model, &points)
        .unwrap_or_else(|d| panic!("{} (place_with reports it first)", d.message));
    let plan = plan_of_points(model, &hazards, pending, &points, &ids);
    let removes = plan
        .edits
        .iter()
        .map(|e| match &e.reason {
            EditReason::Hazards(v) => v.clone(),
            EditReason::Other(_) => Vec::new(),
        })
        .collect();
    let mut stats = Stats {
        hazards: hazards.len(),
        covered_by_existing: existing.len(),
        ..Default::default()
    };
    count_barriers(model, &points, &mut stats);
    stats.lower_bound = place::lower_bound(model, &hazards, pending);
    Placement {
        plan,
        hazards,
        removes,
        existing,
        stats,
        warnings: Vec::new(),
    }
}

/// The plan of the chosen (sorted, distinct) points, each edit with the pending hazards it
/// removes; block barriers in role arms become named barriers with their arm's id in `ids`.
fn plan_of_points(
    model: &SyncModel,
    hazards: &[Hazard],
    pending: &[usize],
    points: &[Point],
    ids: &NamedIds,
) -> SyncPlan {
    let k = model.k;
    let mut plan = SyncPlan::default();
    // One allocation of the final size: growing by doubling kept the old and the new table
    // (an `Edit` is about 100 bytes) live at `sync`'s peak.
    plan.edits.reserve_exact(points.len());
    let mut index = PointIndex::default();
    for p in points {
        index.insert(*p);
    }
    // Tables keyed by entity ids hash with Fx: SipHash here was 2% of `sync` at 10^5 ops.
    let mut removes_of: rustc_hash::FxHashMap<Point, Vec<usize>> = Default::default();
    for &i in pending {
        for p in index.covering(&hazards[i]) {
            removes_of.entry(p).or_default().push(i);
        }
    }
    for p in points {
        let op = match (p.scope, model.named.get(&p.region)) {
            (Scope::Block, Some(a)) => OpKind::NamedSync {
                id: ids[&a.arm],
                count: a.count,
            },
            (Scope::Block, None) => OpKind::Barrier,
            (Scope::Warp, _) => OpKind::WarpSync,
        };
        let removes = removes_of.remove(p).unwrap_or_default();
        plan.edits.push(Edit {
            at: model.program_point(p.region, p.coord / 2),
            op,
            reason: EditReason::Hazards(removes),
        });
    }
    plan.sort(k);
    plan
}

/// The written and executed counts of the inserted points and of the kernel's own barriers.
fn count_barriers(model: &SyncModel, points: &[Point], stats: &mut Stats) {
    let k = model.k;
    for p in points {
        match p.scope {
            Scope::Block => stats.barriers_written += 1,
            Scope::Warp => stats.warp_syncs_written += 1,
        }
        if p.scope == Scope::Block {
            stats.inserted_executed = stats
                .inserted_executed
                .saturating_add(model.weight_bounds[&p.region]);
        }
    }
    let mut existing_exec = 0u64;
    for (r, rd) in k.regions().iter() {
        for &op in rd.ops() {
            // `OpKind::Barrier` is the one op whose sync effect is `SyncEffect::Barrier`; read
            // from the kind, not from `effects` (which builds access vectors for every op).
            if matches!(k.ops[op].kind, OpKind::Barrier) {
                stats.existing_barriers += 1;
                existing_exec =
                    existing_exec.saturating_add(model.weight_bounds.get(&r).copied().unwrap_or(0));
            }
        }
    }
    stats.barriers_executed = stats.inserted_executed.saturating_add(existing_exec);
}

