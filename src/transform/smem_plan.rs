//! Shared-memory planning: assigns byte offsets to shared buffers so that buffers that never
//! hold data at the same time share bytes, and chooses among candidate plans by what the
//! user asks for — fewest bytes, fewest barriers executed, or one under a budget of the other.
//!
//! Pipeline. 1. Lifetimes (`smem_live`): per-buffer live intervals, exact across loop back
//! edges, divergent arms concurrent, element-wise hand-offs inside a loop (those pairs may
//! share bytes at one offset only), per-slot intervals of rings (a dead slot may lend its
//! bytes; the reuse cost of such a pair is analysed at a layout lining the slots up). Two buffers whose lifetimes interfere never share a
//! byte: that is what keeps the results unchanged. 2. Reuse costs: for each pair of
//! unpinned buffers that may share bytes, the kernel already synchronized without reuse
//! (existing barriers plus the ones `sync` places anyway) is given the two buffers at one
//! offset and the hazard analysis `sync` uses (`analysis::hazards`, same-thread/same-element
//! accesses are no conflict) decides what the reuse costs: [`ReuseCost::Alias`] — no hazard
//! at all (nvFuser's inner aliasing: the last reads and the first writes are by the same
//! thread on the same elements); [`ReuseCost::Promoted`] — hazards, all removed by barriers
//! that are there anyway (nvFuser's promotion at barriers); [`ReuseCost::Barriers`] — the
//! reuse needs new barriers. 3. Candidates: no reuse; each allocator (`smem_alloc`: first-fit,
//! best-fit, nvFuser's stack) with only free reuses (alias, promoted) and with every reuse
//! the lifetimes allow; a greedy walk adding costly pairs one at a time to best-fit's free
//! reuses, keeping each that makes the plan smaller with no more barriers. 4. Every candidate is
//! synchronized by the real pipeline (`sync::driver::synchronize`) and scored by its peak
//! bytes and barriers executed; the objective picks one.
//!
//! Planning never inserts a sync itself: the reuse hazards of the chosen plan go through
//! `sync`'s placement like any other (so `sync --plan-smem` is plan, then sync), and the
//! independent checker re-proves the output.
//!
//! Invariants: two buffers whose lifetimes interfere get disjoint bytes, hand-off partners
//! the same offset or disjoint bytes (checked by `smem_alloc::valid` for every candidate); pinned buffers keep their offsets; the chosen
//! plan synchronizes (candidates `sync` refuses are dropped, the no-reuse plan is the input).
//! Complexity: lifetimes O(ops + footprints); O(min(P, 32)) hazard analyses for the P
//! reusable pairs and one `sync` per candidate (at most 3·2 + 2 + 8).
//! Source: nvFuser's alias analysis, `promoteReuseSyncs` and stack allocator (seed 004);
//! the peaks of its `SmemReuseTest`s (cases/nvfuser-tests.md, section E) are file tests.

use std::collections::HashMap;

use crate::diag::Diagnostic;
use crate::ir::*;
use crate::sync::PlaceOptions;
use crate::sync::driver::{Synchronized, synchronize};
use crate::target::Target;

pub use super::smem_alloc::Allocator;
use super::smem_alloc::{Item, Rel, allocate, may_overlap};
pub use super::smem_live::{Lifetimes, lifetimes};

/// Where one buffer went.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub buffer: Buffer,
    pub offset: u64,
    pub bytes: u64,
    /// Live interval in program-order op numbers (inclusive); `None` if never touched.
    pub live: Option<(usize, usize)>,
}

/// The planned kernel and the placement of every buffer.
#[derive(Clone, Debug)]
pub struct SmemPlan {
    pub kernel: Kernel,
    pub placements: Vec<Placement>,
    /// Bytes of shared memory the planned kernel needs.
    pub peak: u64,
    /// Bytes the kernel needed before planning (unpinned buffers laid out one after another).
    pub peak_before: u64,
}

/// The default alignment of a buffer's offset (mbarriers: 8).
pub const DEFAULT_ALIGN: u64 = 16;

fn align_of(e: ElemType, align: u64) -> u64 {
    if e == ElemType::MBarrier {
        8
    } else {
        align.max(1)
    }
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Live intervals of every buffer (op numbers in program order).
pub fn live_intervals(k: &Kernel) -> SecondaryMap<Buffer, Option<(usize, usize)>> {
    lifetimes(k).live
}

/// Bytes needed when unpinned buffers are laid out one after another (no reuse).
pub fn peak_without_reuse(k: &Kernel) -> u64 {
    peak_without_reuse_aligned(k, DEFAULT_ALIGN)
}

fn peak_without_reuse_aligned(k: &Kernel, align: u64) -> u64 {
    let pinned_end = k
        .buffers
        .values()
        .filter_map(|b| b.offset.map(|o| o + b.bytes()))
        .max()
        .unwrap_or(0);
    let mut next = pinned_end;
    for b in k.buffers.values().filter(|b| b.offset.is_none()) {
        next = align_up(next, align_of(b.elem, align)) + b.bytes();
    }
    next
}

/// What the user optimizes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Objective {
    /// Fewest bytes, then fewest barriers executed.
    #[default]
    Bytes,
    /// Fewest barriers executed, then fewest bytes.
    Barriers,
}

/// Options of [`plan_with`].
#[derive(Clone, Debug)]
pub struct PlanOptions {
    /// The target the candidates are synchronized for (barrier counts depend on it).
    pub target: Target,
    /// Placement options of that synchronization (bounds for counting executed barriers).
    pub place: PlaceOptions,
    pub objective: Objective,
    /// Only plans whose peak is at most this many bytes.
    pub max_bytes: Option<u64>,
    /// Only plans that execute at most this many barriers.
    pub max_barriers: Option<u64>,
    /// Offset alignment of non-mbarrier buffers (nvFuser aligns to 128 bytes).
    pub align: u64,
}

impl PlanOptions {
    pub fn new(target: Target) -> PlanOptions {
        PlanOptions {
            target,
            place: PlaceOptions::default(),
            objective: Objective::Bytes,
            max_bytes: None,
            max_barriers: None,
            align: DEFAULT_ALIGN,
        }
    }
}

/// What letting `to` take `from`'s bytes costs in barriers.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReuseCost {
    /// No hazard between the two buffers' accesses (same thread, same elements).
    Alias,
    /// Hazards, all removed by barriers the kernel has or `sync` places without reuse.
    Promoted,
    /// The reuse needs barriers of its own.
    Barriers,
}

impl ReuseCost {
    pub fn name(self) -> &'static str {
        match self {
            ReuseCost::Alias => "inner alias, no barrier",
            ReuseCost::Promoted => "promoted at a barrier already needed",
            ReuseCost::Barriers => "needs barriers of its own",
        }
    }
}

/// One candidate plan and its figures.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub name: String,
    pub offsets: Vec<u64>,
    pub peak: u64,
    /// Barriers executed once synchronized, or why `sync` refused it.
    pub barriers: Result<u64, String>,
}

/// The chosen plan with its synchronization and what else was considered.
#[derive(Clone, Debug)]
pub struct PlanReport {
    pub plan: SmemPlan,
    /// The chosen plan, synchronized.
    pub synced: Synchronized,
    /// Barriers executed by the chosen plan once synchronized.
    pub barriers: u64,
    /// Barriers executed by the kernel synchronized without reuse.
    pub barriers_before: u64,
    pub candidates: Vec<Candidate>,
    pub chosen: usize,
    /// Pairs `(earlier, later)` of buffers sharing bytes in the chosen plan, and the cost.
    pub reuses: Vec<(Buffer, Buffer, ReuseCost)>,
}

/// The unpinned-or-pinned buffers of `k` as allocation items, in buffer order.
fn items(
    k: &Kernel,
    lt: &Lifetimes,
    align: u64,
    hints: &HashMap<Buffer, Vec<Buffer>>,
) -> Vec<Item> {
    let index: HashMap<Buffer, usize> = k.buffers.keys().enumerate().map(|(i, b)| (b, i)).collect();
    k.buffers
        .iter()
        .map(|(b, d)| Item {
            bytes: d.bytes(),
            align: align_of(d.elem, align),
            live: *lt.live.get(b),
            fixed: d.offset,
            hints: hints
                .get(&b)
                .map(|v| v.iter().map(|h| index[h]).collect())
                .unwrap_or_default(),
            slots: lt.slot_count(b),
        })
        .collect()
}

/// The kernel with every buffer at its offset in `offs` (buffer order).
fn to_plan(k: &Kernel, lt: &Lifetimes, offs: &[u64], align: u64) -> SmemPlan {
    let mut kernel = k.clone();
    let mut placements = Vec::new();
    for ((b, d), &o) in k.buffers.iter().zip(offs) {
        kernel.buffers[b].offset = Some(o);
        placements.push(Placement {
            buffer: b,
            offset: o,
            bytes: d.bytes(),
            live: *lt.live.get(b),
        });
    }
    let peak = placements
        .iter()
        .map(|p| p.offset + p.bytes)
        .max()
        .unwrap_or(0);
    SmemPlan {
        kernel,
        placements,
        peak,
        peak_before: peak_without_reuse_aligned(k, align),
    }
}

/// Plans offsets for every unpinned buffer of `k` by lifetimes alone: the fewest bytes over
/// the allocators, reuse hazards left to `sync` (no synchronization is run).
pub fn plan_shared_memory(k: &Kernel) -> SmemPlan {
    let lt = lifetimes(k);
    let bufs: Vec<Buffer> = k.buffers.keys().collect();
    let mut hints: HashMap<Buffer, Vec<Buffer>> = HashMap::new();
    for &(a, b) in &lt.handoffs {
        hints.entry(b).or_default().push(a);
    }
    let its = items(k, &lt, DEFAULT_ALIGN, &hints);
    let conflict = |i: usize, j: usize| lt.relation(bufs[i], bufs[j]);
    let best = Allocator::ALL
        .iter()
        .filter_map(|&a| allocate(&its, &conflict, a))
        .min_by_key(|offs| {
            (0..its.len())
                .map(|i| offs[i] + its[i].bytes)
                .max()
                .unwrap_or(0)
        });
    match best {
        Some(offs) => to_plan(k, &lt, &offs, DEFAULT_ALIGN),
        // Unreachable in practice (first-fit is always valid); keep the input's layout.
        None => {
            let none = |_: usize, _: usize| Rel::Exclusive;
            let offs = allocate(&its, &none, Allocator::BestFit).unwrap_or_default();
            to_plan(k, &lt, &offs, DEFAULT_ALIGN)
        }
    }
}

/// Pairs of buffers the lifetimes let share bytes whose cost is analysed, earlier first.
const MAX_COSTED_PAIRS: usize = 32;

/// What each reusable pair costs (module doc, step 2), on `base`: the input synchronized
/// without reuse.
fn reuse_costs(
    base: &Kernel,
    lt: &Lifetimes,
    opts: &PlanOptions,
) -> HashMap<(Buffer, Buffer), ReuseCost> {
    let free: Vec<Buffer> = base
        .buffers
        .iter()
        .filter(|(_, d)| d.offset.is_none() && d.elem != ElemType::MBarrier)
        .map(|(b, _)| b)
        .collect();
    let start = |b: Buffer| lt.live.get(b).map_or(usize::MAX, |l| l.0);
    let mut pairs = Vec::new();
    for (i, &a) in free.iter().enumerate() {
        for &b in &free[i + 1..] {
            if lt.relation(a, b) != Rel::Exclusive {
                pairs.push(if start(a) <= start(b) { (a, b) } else { (b, a) });
            }
        }
    }
    pairs.sort_by_key(|&(a, b)| (start(b), start(a)));
    let at = align_up(
        base.buffers
            .values()
            .filter_map(|d| d.offset.map(|o| o + d.bytes()))
            .max()
            .unwrap_or(0),
        128,
    );
    let mut out = HashMap::new();
    for (a, b) in pairs.into_iter().take(MAX_COSTED_PAIRS) {
        let mut k2 = base.clone();
        let Some((oa, ob)) = shared_layout(base, lt, a, b) else {
            continue;
        };
        k2.buffers[a].offset = Some(at + oa);
        k2.buffers[b].offset = Some(at + ob);
        out.insert((a, b), pair_cost(&k2, a, b, opts));
    }
    out
}

/// Offsets (from one base) at which `a` and `b` share bytes as their lifetimes allow: one
/// offset, unless they relate slot by slot; then the lowest placement of `b` that lines a
/// slot of one up with a slot of the other and overlaps `a`.
fn shared_layout(k: &Kernel, lt: &Lifetimes, a: Buffer, b: Buffer) -> Option<(u64, u64)> {
    let rel = lt.relation(a, b);
    if !matches!(rel, Rel::Slots(_)) {
        return Some((0, 0));
    }
    let (na, nb) = (k.buffers[a].bytes(), k.buffers[b].bytes());
    let (sa, sb) = (lt.slot_count(a), lt.slot_count(b));
    let (wa, wb) = (na / sa, nb / sb);
    let mut best: Option<(u64, u64)> = None;
    for x in 0..sa {
        for y in 0..sb {
            // Slot x of a at the same bytes as slot y of b; shifted so both offsets are >= 0.
            let (oa, ob) = if x * wa >= y * wb {
                (0, x * wa - y * wb)
            } else {
                (y * wb - x * wa, 0)
            };
            let overlap = oa < ob + nb && ob < oa + na;
            let ok = overlap && may_overlap(rel, (oa, na, sa), (ob, nb, sb));
            if ok && best.is_none_or(|(pa, pb)| oa.max(ob) < pa.max(pb)) {
                best = Some((oa, ob));
            }
        }
    }
    best
}

fn pair_cost(k: &Kernel, a: Buffer, b: Buffer, opts: &PlanOptions) -> ReuseCost {
    let hz = crate::analysis::hazards::find_hazards(k, &opts.target);
    let root = |r: crate::analysis::footprint::AccessRef| {
        effects(k, r.op)
            .shared
            .get(r.index)
            .map(|x| k.root_buffer(x.mem))
    };
    let between = hz.hazards.iter().any(|h| {
        let (s, d) = (root(h.src), root(h.dst));
        (s == Some(a) && d == Some(b)) || (s == Some(b) && d == Some(a))
    });
    if !between && hz.findings.is_empty() {
        return ReuseCost::Alias;
    }
    match synchronize(k, &opts.target, &opts.place) {
        Ok(s) if s.inserted().is_empty() => ReuseCost::Promoted,
        _ => ReuseCost::Barriers,
    }
}

/// For each buffer, the earlier buffers whose offset it should try first: hand-off partners
/// (which it may share bytes with only at one offset), then those it aliases at no cost,
/// largest first.
fn alias_hints(
    k: &Kernel,
    lt: &Lifetimes,
    costs: &HashMap<(Buffer, Buffer), ReuseCost>,
) -> HashMap<Buffer, Vec<Buffer>> {
    let mut hints: HashMap<Buffer, Vec<Buffer>> = HashMap::new();
    for (&(a, b), &c) in costs {
        if c == ReuseCost::Alias || lt.relation(a, b) == Rel::SameOffset {
            hints.entry(b).or_default().push(a);
        }
    }
    // Hand-off partners first (they share only at one offset), then the largest.
    for (&b, v) in hints.iter_mut() {
        v.sort_by_key(|&a| {
            let partner = lt.relation(a, b) == Rel::SameOffset;
            (!partner, std::cmp::Reverse(k.buffers[a].bytes()), a)
        });
    }
    hints
}

/// How buffers `a` and `b` may share bytes when only free reuses and `extra` costly ones are
/// allowed: as their lifetimes allow when the reuse is analysed and allowed, else not at all.
fn forbidden(
    lt: &Lifetimes,
    costs: &HashMap<(Buffer, Buffer), ReuseCost>,
    extra: &[(Buffer, Buffer)],
    a: Buffer,
    b: Buffer,
) -> Rel {
    let base = lt.relation(a, b);
    let ok = match costs.get(&(a, b)).or_else(|| costs.get(&(b, a))) {
        None => false,
        Some(ReuseCost::Barriers) => extra.iter().any(|&p| p == (a, b) || p == (b, a)),
        Some(_) => true,
    };
    if ok { base } else { Rel::Exclusive }
}

/// The allocation problems tried (module doc, step 3): a name and which pairs may not share.
fn candidate_offsets(
    k: &Kernel,
    lt: &Lifetimes,
    costs: &HashMap<(Buffer, Buffer), ReuseCost>,
    align: u64,
) -> Vec<(String, Vec<u64>)> {
    let bufs: Vec<Buffer> = k.buffers.keys().collect();
    let its = items(k, lt, align, &alias_hints(k, lt, costs));
    let any = |i: usize, j: usize| lt.relation(bufs[i], bufs[j]);
    let free = |i: usize, j: usize| forbidden(lt, costs, &[], bufs[i], bufs[j]);
    let mut out: Vec<(String, Vec<u64>)> = Vec::new();
    let mut push = |name: String, offs: Option<Vec<u64>>| {
        if let Some(o) = offs
            && !out.iter().any(|(_, x)| *x == o)
        {
            out.push((name, o));
        }
    };
    let none = |_: usize, _: usize| Rel::Exclusive;
    push("no reuse".into(), allocate(&its, &none, Allocator::BestFit));
    for a in Allocator::ALL {
        push(
            format!("{}, free reuse only", a.name()),
            allocate(&its, &free, a),
        );
        push(
            format!("{}, every reuse", a.name()),
            allocate(&its, &any, a),
        );
    }
    out
}

/// Plans `k`, synchronizes every candidate for `opts.target` and picks one by the objective
/// and budgets (module doc). Errors: `sync` refuses the input itself (its findings), or no
/// candidate meets the budgets (E0620, with the figures of the best ones).
pub fn plan_with(k: &Kernel, opts: &PlanOptions) -> Result<PlanReport, Vec<Diagnostic>> {
    let base = synchronize(k, &opts.target, &opts.place)?;
    let barriers_before = base.placement.stats.barriers_executed;
    let lt = lifetimes(k);
    let costs = reuse_costs(&base.kernel, &lt, opts);
    let mut ev = Evaluated::default();
    for (name, offs) in candidate_offsets(k, &lt, &costs, opts.align) {
        ev.add(k, &lt, name, offs, opts);
    }
    greedy_costly(k, &lt, &costs, opts, &mut ev);
    let Evaluated {
        candidates,
        mut synced,
    } = ev;
    let chosen =
        choose(&candidates, opts).ok_or_else(|| vec![over_budget(k, &candidates, opts)])?;
    // `choose` picks only candidates that synchronized.
    let Some((plan, s)) = synced.swap_remove(chosen) else {
        return Err(vec![over_budget(k, &candidates, opts)]);
    };
    let reuses = reuses(&plan, &costs);
    Ok(PlanReport {
        barriers: s.placement.stats.barriers_executed,
        plan,
        synced: s,
        barriers_before,
        candidates,
        chosen,
        reuses,
    })
}

/// Candidates and, for those `sync` accepted, the plan and its synchronization.
#[derive(Default)]
struct Evaluated {
    candidates: Vec<Candidate>,
    synced: Vec<Option<(SmemPlan, Synchronized)>>,
}

impl Evaluated {
    /// Synchronizes the plan `offs` and records it (unless an equal one was recorded);
    /// returns its peak and barriers when `sync` accepts it.
    fn add(
        &mut self,
        k: &Kernel,
        lt: &Lifetimes,
        name: String,
        offs: Vec<u64>,
        opts: &PlanOptions,
    ) -> Option<(u64, u64)> {
        if let Some(c) = self.candidates.iter().find(|c| c.offsets == offs) {
            return c.barriers.as_ref().ok().map(|&b| (c.peak, b));
        }
        let plan = to_plan(k, lt, &offs, opts.align);
        let s = synchronize(&plan.kernel, &opts.target, &opts.place);
        let figures = s
            .as_ref()
            .ok()
            .map(|s| (plan.peak, s.placement.stats.barriers_executed));
        self.candidates.push(Candidate {
            name,
            offsets: offs,
            peak: plan.peak,
            barriers: match &s {
                Ok(s) => Ok(s.placement.stats.barriers_executed),
                Err(d) => Err(d.first().map_or_else(String::new, |d| d.message.clone())),
            },
        });
        self.synced.push(s.ok().map(|s| (plan, s)));
        figures
    }
}

/// Costly pairs tried on top of the free reuses, one at a time.
const MAX_GREEDY: usize = 8;

/// Greedy trade-off (module doc, step 3): starting from best-fit with free reuses only,
/// allow one costly pair at a time (in order of bytes it could save) and keep it when the
/// synchronized plan is smaller and executes no more barriers than the plan it extends
/// (a costly pair may turn out free once the layout is known: the barrier it needs can be
/// one `sync` places anyway for another reuse). Every plan tried is a candidate.
fn greedy_costly(
    k: &Kernel,
    lt: &Lifetimes,
    costs: &HashMap<(Buffer, Buffer), ReuseCost>,
    opts: &PlanOptions,
    ev: &mut Evaluated,
) {
    let bufs: Vec<Buffer> = k.buffers.keys().collect();
    let its = items(k, lt, opts.align, &alias_hints(k, lt, costs));
    let offsets = |extra: &[(Buffer, Buffer)]| {
        let conflict = |i: usize, j: usize| forbidden(lt, costs, extra, bufs[i], bufs[j]);
        allocate(&its, &conflict, Allocator::BestFit)
    };
    let Some(start) = offsets(&[]) else {
        return;
    };
    let Some(mut best) = ev.add(k, lt, "best-fit, free reuse only".into(), start, opts) else {
        return;
    };
    let mut costly: Vec<(Buffer, Buffer)> = costs
        .iter()
        .filter(|&(_, &c)| c == ReuseCost::Barriers)
        .map(|(&p, _)| p)
        .collect();
    costly.sort_by_key(|&(a, b)| {
        let saved = k.buffers[a].bytes().min(k.buffers[b].bytes());
        (std::cmp::Reverse(saved), a, b)
    });
    let mut kept: Vec<(Buffer, Buffer)> = Vec::new();
    for p in costly.into_iter().take(MAX_GREEDY) {
        let mut trial = kept.clone();
        trial.push(p);
        let Some(offs) = offsets(&trial) else {
            continue;
        };
        let names: Vec<String> = trial
            .iter()
            .map(|&(a, b)| format!("@{} over @{}", k.buffers[b].name, k.buffers[a].name))
            .collect();
        let name = format!("best-fit, free reuse and {}", names.join(", "));
        if let Some((peak, barriers)) = ev.add(k, lt, name, offs, opts)
            && peak < best.0
            && barriers <= best.1
        {
            best = (peak, barriers);
            kept = trial;
        }
    }
}

/// The candidate the objective prefers among those within the budgets.
fn choose(cands: &[Candidate], opts: &PlanOptions) -> Option<usize> {
    (0..cands.len())
        .filter_map(|i| {
            cands[i]
                .barriers
                .as_ref()
                .ok()
                .map(|&b| (i, cands[i].peak, b))
        })
        .filter(|&(_, p, b)| {
            opts.max_bytes.is_none_or(|m| p <= m) && opts.max_barriers.is_none_or(|m| b <= m)
        })
        .min_by_key(|&(i, p, b)| match opts.objective {
            Objective::Bytes => (p, b, i),
            Objective::Barriers => (b, p, i),
        })
        .map(|(i, _, _)| i)
}

fn over_budget(k: &Kernel, cands: &[Candidate], opts: &PlanOptions) -> Diagnostic {
    let ok: Vec<(u64, u64)> = cands
        .iter()
        .filter_map(|c| c.barriers.as_ref().ok().map(|&b| (c.peak, b)))
        .collect();
    let mut d = Diagnostic::user(
        "E0620",
        format!(
            "no shared-memory plan of @{} meets the budget ({})",
            k.name,
            [
                opts.max_bytes.map(|m| format!("at most {m} bytes")),
                opts.max_barriers
                    .map(|m| format!("at most {m} barriers executed")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ")
        ),
    )
    .with_label(k.kernel_span, "planned here");
    if let Some(&(p, b)) = ok.iter().min_by_key(|&&(p, b)| (p, b)) {
        d = d.with_note(format!(
            "the fewest bytes: {p} bytes with {b} barriers executed"
        ));
    }
    if let Some(&(p, b)) = ok.iter().min_by_key(|&&(p, b)| (b, p)) {
        d = d.with_note(format!("the fewest barriers: {b} executed with {p} bytes"));
    }
    d.with_help("raise --max-bytes or --max-barriers")
}

/// Pairs of buffers sharing bytes in `plan`, earlier first, with the cost when analysed.
fn reuses(
    plan: &SmemPlan,
    costs: &HashMap<(Buffer, Buffer), ReuseCost>,
) -> Vec<(Buffer, Buffer, ReuseCost)> {
    let mut out = Vec::new();
    for (i, a) in plan.placements.iter().enumerate() {
        for b in &plan.placements[i + 1..] {
            let share = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
            let c = costs
                .get(&(a.buffer, b.buffer))
                .map(|&c| (a.buffer, b.buffer, c))
                .or_else(|| {
                    costs
                        .get(&(b.buffer, a.buffer))
                        .map(|&c| (b.buffer, a.buffer, c))
                });
            if share && let Some(c) = c {
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::parse_kernel;

    fn plan(src: &str) -> SmemPlan {
        let k = parse_kernel(src).expect("parses");
        assert!(crate::verify::verify(&k).is_empty());
        let p = plan_shared_memory(&k);
        assert!(crate::verify::verify(&p.kernel).is_empty());
        p
    }

    fn byte_ranges_disjoint_when_live_together(p: &SmemPlan) {
        let lt = lifetimes(&p.kernel);
        for (i, a) in p.placements.iter().enumerate() {
            for b in &p.placements[i + 1..] {
                assert!(
                    lt.may_lie(a.buffer, b.buffer, (a.offset, a.bytes), (b.offset, b.bytes)),
                    "{a:?} and {b:?} overlap"
                );
            }
        }
    }

    #[test]
    fn buffers_dead_before_another_is_born_share_bytes() {
        // nvFuser SmemReuseTest.SimpleCase, variant 2: B reuses A's bytes (peak = 6 floats).
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[5]\n shared @b : f32[6]\n %t = tid.x\n store @a[0], 1.0\n %x = load @a[0]\n store @b[0], %x\n %y = load @b[0]\n}",
        );
        assert_eq!(p.peak, 24);
        assert_eq!(p.peak_before, 32 + 24);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn overlapping_lifetimes_get_disjoint_bytes() {
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[5]\n shared @b : f32[6]\n store @a[0], 1.0\n store @b[0], 2.0\n %x = load @a[0]\n %y = load @b[0]\n}",
        );
        assert_eq!(p.peak, 32 + 20);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn buffers_written_and_consumed_within_one_iteration_share_bytes() {
        // Each iteration writes @a before reading it and @b likewise: neither is live across
        // the back edge, so @b takes @a's bytes between @a's last read and the next write.
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n for %i = 0 to 4 step 1 {\n store @a[0], 1.0\n %x = load @a[0]\n store @b[0], %x\n %y = load @b[0]\n }\n}",
        );
        assert_eq!(p.peak, 16);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn a_buffer_read_before_it_is_written_in_an_iteration_lives_across_the_back_edge() {
        // @a is read at the top of the body, before this iteration writes it: the value
        // comes from the previous iteration, so @b may not take @a's bytes.
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n for %i = 0 to 4 step 1 {\n %x = load @a[0]\n store @b[0], %x\n %y = load @b[0]\n store @a[0], %y\n }\n}",
        );
        assert_eq!(p.peak, 16 + 16);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn a_partial_write_does_not_make_a_buffer_private() {
        // Only element 0 is written each iteration, element 1 is read: loop-carried.
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n for %i = 0 to 4 step 1 {\n store @a[0], 1.0\n %x = load @a[1]\n store @b[0], %x\n %y = load @b[0]\n }\n}",
        );
        assert_eq!(p.peak, 16 + 16);
    }

    #[test]
    fn a_write_under_an_if_is_not_a_must_write() {
        let p = plan(
            "kernel @k(%n: i32) block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n for %i = 0 to 4 step 1 {\n %c = cmp lt %n, 4\n if %c {\n store @a[0], 1.0\n }\n %x = load @a[0]\n store @b[0], %x\n %y = load @b[0]\n }\n}",
        );
        assert_eq!(p.peak, 16 + 16);
    }

    #[test]
    fn a_buffer_read_after_the_loop_lives_across_the_back_edge() {
        // @b is written and read in the body before @a, but @a's last value is read after
        // the loop: in the next iteration @b would overwrite it.
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n for %i = 0 to 4 step 1 {\n store @b[0], 1.0\n %y = load @b[0]\n store @a[0], %y\n }\n %x = load @a[0]\n}",
        );
        assert_eq!(p.peak, 16 + 16);
    }

    #[test]
    fn per_thread_elements_written_each_iteration_cover_the_reads() {
        // Thread t writes @a[t] and reads @a[7 - t] after it: another thread's element of
        // the same iteration (a barrier's business, not liveness).
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[8]\n shared @b : f32[8]\n %t = tid.x\n %u = sub 7, %t\n for %i = 0 to 4 step 1 {\n store @a[%t], 1.0\n %x = load @a[%u]\n store @b[%t], %x\n %y = load @b[%u]\n }\n}",
        );
        assert_eq!(p.peak, 32);
        let lt = lifetimes(&p.kernel);
        assert!(
            p.kernel
                .buffers
                .keys()
                .all(|b| lt.private_to.get(b).is_some())
        );
    }

    #[test]
    fn buffers_of_the_two_arms_of_a_divergent_if_get_disjoint_bytes() {
        // Threads below 4 use @a while the others use @b, at the same time.
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n %t = tid.x\n %c = cmp lt %t, 4\n if %c {\n store @a[0], 1.0\n %x = load @a[0]\n } else {\n store @b[0], 2.0\n %y = load @b[0]\n }\n}",
        );
        assert_eq!(p.peak, 16 + 16);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn buffers_of_the_two_arms_of_a_uniform_if_share_bytes() {
        // Every thread takes the same arm, so only one buffer is ever in use.
        let p = plan(
            "kernel @k(%n: i32) block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n %c = cmp lt %n, 4\n if %c {\n store @a[0], 1.0\n %x = load @a[0]\n } else {\n store @b[0], 2.0\n %y = load @b[0]\n }\n}",
        );
        assert_eq!(p.peak, 16);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn a_divergent_if_nested_in_an_arm_makes_its_inner_arms_concurrent() {
        let p = plan(
            "kernel @k(%n: i32) block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n %t = tid.x\n %u = cmp lt %n, 4\n if %u {\n %c = cmp lt %t, 4\n if %c {\n store @a[0], 1.0\n } else {\n store @b[0], 2.0\n }\n }\n}",
        );
        assert_eq!(p.peak, 16 + 16);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn pinned_buffers_keep_their_offsets() {
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[4] at 64\n shared @b : f32[32]\n store @a[0], 1.0\n store @b[0], 2.0\n %x = load @a[0]\n %y = load @b[0]\n}",
        );
        let a = p
            .placements
            .iter()
            .find(|x| p.kernel.buffers[x.buffer].name == "a")
            .expect("a");
        assert_eq!(a.offset, 64);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn every_example_plans_without_overlap() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
        for e in std::fs::read_dir(dir).expect("examples").flatten() {
            // examples/README.md describes the kernels.
            if e.path().extension().is_none_or(|x| x != "kir") {
                continue;
            }
            let src = std::fs::read_to_string(e.path()).expect("read");
            let p = plan(&src);
            let bound: u64 = p.placements.iter().map(|x| align_up(x.bytes, 16)).sum();
            assert!(
                p.peak <= bound,
                "{}: peak {} above the no-reuse bound {bound}",
                e.path().display(),
                p.peak
            );
            byte_ranges_disjoint_when_live_together(&p);
        }
    }
}
