//! [`synchronize`]: the sync pipeline of `smemsync sync` (waits, barriers, the target's
//! lowering, the protocol check, the verifier), with its result as data: the synchronized
//! [`Program`] and, per kernel, the inserted syncs, the hazards each removes, the statistics
//! and the warnings.
//!
//! The report reads the pipeline's own plans (`sync::driver`): waits are anchored in the input
//! kernel, barriers in the input with its waits; both are named as a reader of the source sees
//! them (`emit::explain`). Complexity: the pipeline's, plus O(hazards) for the report.

use std::collections::HashMap;

use super::error::Error;
use super::program::{Program, Target, verify};
use crate::analysis::footprint::Footprints;
use crate::analysis::hazards::{Carry, Hazard};
use crate::diag::Diagnostic;
use crate::emit::explain::{Namer, buffer_name, explain_hazard};
use crate::emit::text::print_op_line;
use crate::ir::edit::Anchor;
use crate::ir::{Kernel, OpKind};
use crate::sync::driver::{self, Synchronized as Pipeline};

pub use crate::sync::Strategy;

/// Options of [`synchronize`]. Build with [`SyncOptions::new`], then set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SyncOptions {
    /// The target the syncs are chosen for.
    pub target: Target,
    /// The placer (default: [`Strategy::Optimal`]).
    pub strategy: Strategy,
    /// Also report, for each inserted sync, the hazards it removes (and the reason of each
    /// wait), and the hazards the input's own syncs remove. Off, [`InsertedSync::hazards`] is
    /// empty.
    pub explain: bool,
    /// Values of scalar parameters (by name, without `%`), used to count executed barriers.
    pub bounds: Vec<(String, i64)>,
    /// Use a warp-level sync where every conflicting pair of threads shares a warp (default:
    /// true).
    pub warp_sync: bool,
}

impl SyncOptions {
    /// The defaults for a target: optimal placement, no explanations, warp syncs allowed.
    pub fn new(target: Target) -> SyncOptions {
        SyncOptions {
            target,
            strategy: Strategy::Optimal,
            explain: false,
            bounds: Vec::new(),
            warp_sync: true,
        }
    }
}

/// What [`synchronize`] returns.
#[derive(Clone, Debug)]
pub struct Synchronized {
    /// The synchronized kernels (their headers name the target). Their spans still point into
    /// the input, so diagnostics about them locate in the input text.
    pub program: Program,
    /// One report per kernel, in source order.
    pub kernels: Vec<KernelReport>,
}

impl Synchronized {
    /// The synchronized kernels in the text form (what `smemsync sync` prints).
    pub fn text(&self) -> String {
        self.program.to_text()
    }
}

/// The synchronized text ([`Synchronized::text`]).
impl std::fmt::Display for Synchronized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// What synchronization did to one kernel.
#[derive(Clone, Debug)]
pub struct KernelReport {
    /// The kernel's name (without `@`).
    pub name: String,
    /// The inserted syncs: waits first, then barriers and warp syncs, each in program order.
    /// On gfx12 targets each barrier is written as a split signal/wait pair.
    pub inserted: Vec<InsertedSync>,
    /// Hazards that syncs already in the input remove (filled with [`SyncOptions::explain`]).
    pub covered_by_existing: Vec<HazardReport>,
    /// Counts: hazards, barriers written and executed, the lower bound, …
    pub stats: SyncStats,
    /// Non-fatal findings (conservative answers of the analysis W0310–W0314, a possible race
    /// no barrier can fix on unknown indices, …); [`Program::locate`] says where.
    pub warnings: Vec<Diagnostic>,
}

/// Which kind of sync op was inserted.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SyncKind {
    /// A wait on an asynchronous copy (`s_waitcnt`, `cp.async.wait_group`, …) or the commit
    /// it needs.
    Wait,
    /// A block-wide barrier.
    Barrier,
    /// A warp-level sync.
    WarpSync,
    /// A proxy fence (`fence.proxy.async.shared::cta`, sm_90): generic-proxy shared writes
    /// made visible to wgmma/TMA.
    ProxyFence,
}

/// One inserted sync op.
#[derive(Clone, Debug)]
pub struct InsertedSync {
    /// Wait, barrier or warp sync.
    pub kind: SyncKind,
    /// The op as the text form writes it (`barrier`, `wait_cnt vmcnt(0)`, …).
    pub op: String,
    /// Where it goes, named as the source reads: "after `store @s[%t], %v` (line 5)", "at the
    /// top of the loop body of `for …` (line 13)".
    pub at: String,
    /// The source line of the op it is placed next to, when it has one.
    pub line: Option<usize>,
    /// The hazards this barrier removes (barriers and warp syncs, with
    /// [`SyncOptions::explain`]).
    pub hazards: Vec<HazardReport>,
    /// Why this wait is needed and how its count was bounded (waits, with
    /// [`SyncOptions::explain`]).
    pub reason: Option<String>,
}

/// One hazard: two accesses to a shared buffer that some ordering must separate.
#[derive(Clone, Debug)]
pub struct HazardReport {
    /// `RAW`, `WAR`, `WAW` or `ATOMIC` (an atomic against a plain access).
    pub kind: String,
    /// The shared buffer (`@name`).
    pub buffer: String,
    /// The earlier access, as written, with its line: "`store @s[%t], %v` (line 5)".
    pub source: String,
    /// The later access.
    pub destination: String,
    /// The line of the earlier access, when it has one.
    pub source_line: Option<usize>,
    /// The line of the later access, when it has one.
    pub destination_line: Option<usize>,
    /// For a loop-carried hazard, the loop that carries it, and the least iteration distance.
    pub carried_by: Option<(String, u32)>,
    /// The whole hazard in one line, as `smemsync sync --explain` prints it.
    pub description: String,
}

/// Counts of one kernel's synchronization.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// Hazards found (nearest-first: each consumer's nearest unordered producers).
    pub hazards: usize,
    /// Hazards removed by syncs already in the input.
    pub covered_by_existing: usize,
    /// Block barriers inserted.
    pub barriers_written: usize,
    /// Warp-level syncs inserted.
    pub warp_syncs_written: usize,
    /// Block barriers already in the input.
    pub existing_barriers: usize,
    /// Barriers executed per block (inserted and existing), with the given bounds.
    pub barriers_executed: u64,
    /// Inserted barriers executed per block.
    pub inserted_executed: u64,
    /// A lower bound on the inserted barriers executed by any correct placement.
    pub lower_bound: u64,
    /// Waits (and commits) inserted.
    pub waits_written: usize,
    /// Sync ops inserted in the output, all kinds (a split pair counts two).
    pub inserted_syncs: usize,
    /// Conservative answers of the analysis (warnings W0310–W0314): each may cost syncs.
    pub conservative: usize,
}

/// Inserts the fewest syncs that remove every shared-memory hazard of every kernel, for
/// `opts.target` (after [`verify`]). A hazard no sync can remove (e.g. a barrier needed under
/// thread-dependent control) is an error of kind [`ErrorKind::Finding`](crate::ErrorKind).
pub fn synchronize(program: &Program, opts: &SyncOptions) -> Result<Synchronized, Error> {
    verify(program, &opts.target)?;
    let place = crate::sync::PlaceOptions {
        strategy: opts.strategy,
        bounds: opts.bounds.iter().cloned().collect::<HashMap<_, _>>(),
        no_warp_sync: !opts.warp_sync,
    };
    let mut kernels = Vec::new();
    let mut reports = Vec::new();
    for k in &program.kernels {
        let s = driver::synchronize(k, &opts.target.0, &place)
            .map_err(|d| Error::new(d, program.source.clone()))?;
        reports.push(report(k, &s, &program.source, opts));
        kernels.push(s.kernel);
    }
    Ok(Synchronized {
        program: Program {
            kernels,
            source: program.source.clone(),
        },
        kernels: reports,
    })
}

/// The report of one kernel's pipeline run.
fn report(input: &Kernel, s: &Pipeline, src: &str, opts: &SyncOptions) -> KernelReport {
    let p = &s.placement;
    let in_names = Namer::new(input, src);
    let mut inserted: Vec<InsertedSync> = s
        .waits
        .edits
        .iter()
        .map(|e| InsertedSync {
            kind: SyncKind::Wait,
            op: print_op_line(input, &e.op),
            at: in_names.point(e.at.anchor),
            line: anchor_line(&in_names, e.at.anchor),
            hazards: Vec::new(),
            reason: opts.explain.then(|| e.reason.text().to_string()),
        })
        .collect();
    let k = s.with_waits();
    let names = Namer::new(k, src).inserted(s.input_ops, &s.kernel);
    let mut fp = opts.explain.then(|| Footprints::new(k, opts.target.0.warp));
    let mut hz = p.hazards.clone();
    if let Some(fp) = fp.as_mut() {
        crate::analysis::hazards::fill_witnesses(fp, &mut hz);
    }
    let describe = |hs: &[usize]| match &fp {
        Some(fp) => hs.iter().map(|&h| hazard(k, fp, &names, &hz[h])).collect(),
        None => Vec::new(),
    };
    for (i, e) in p.plan.edits.iter().enumerate() {
        inserted.push(InsertedSync {
            kind: match e.op {
                OpKind::WarpSync => SyncKind::WarpSync,
                _ => SyncKind::Barrier,
            },
            op: print_op_line(k, &e.op),
            at: names.point(e.at.anchor),
            line: anchor_line(&names, e.at.anchor),
            hazards: describe(&p.removes[i]),
            reason: None,
        });
    }
    // Fences are anchored in the kernel with barriers, whose op ids the output keeps.
    let fenced = Namer::new(&s.kernel, src).inserted(s.input_ops, &s.kernel);
    for e in &s.fences.edits {
        inserted.push(InsertedSync {
            kind: SyncKind::ProxyFence,
            op: print_op_line(&s.kernel, &e.op),
            at: fenced.point(e.at.anchor),
            line: anchor_line(&fenced, e.at.anchor),
            hazards: Vec::new(),
            reason: match (&e.reason, opts.explain) {
                (crate::ir::edit::EditReason::Other(why), true) => Some(why.clone()),
                _ => None,
            },
        });
    }
    KernelReport {
        name: input.name.clone(),
        inserted,
        covered_by_existing: describe(&p.existing),
        stats: stats(s),
        warnings: p.warnings.clone(),
    }
}

/// The source line of the op an anchor is next to (`None` for a region's edges or an op
/// without a span).
fn anchor_line(names: &Namer, anchor: Anchor) -> Option<usize> {
    match anchor {
        Anchor::Before(op) | Anchor::After(op) => names.input_line(op),
        Anchor::Start(_) | Anchor::End(_) => None,
    }
}

fn hazard(k: &Kernel, fp: &Footprints, names: &Namer, h: &Hazard) -> HazardReport {
    HazardReport {
        kind: h.kind.name().to_string(),
        buffer: buffer_name(k, h),
        source: names.op(h.src.op),
        destination: names.op(h.dst.op),
        source_line: names.input_line(h.src.op),
        destination_line: names.input_line(h.dst.op),
        carried_by: match h.carry {
            Carry::Forward => None,
            Carry::Carried {
                loop_op,
                min_distance,
                ..
            } => Some((names.op(loop_op), min_distance)),
        },
        description: explain_hazard(k, fp, names, h),
    }
}

fn stats(s: &Pipeline) -> SyncStats {
    let st = &s.placement.stats;
    SyncStats {
        hazards: st.hazards,
        covered_by_existing: st.covered_by_existing,
        barriers_written: st.barriers_written,
        warp_syncs_written: st.warp_syncs_written,
        existing_barriers: st.existing_barriers,
        barriers_executed: st.barriers_executed,
        inserted_executed: st.inserted_executed,
        lower_bound: st.lower_bound,
        waits_written: s.waits.edits.len(),
        inserted_syncs: s.inserted().len(),
        conservative: st.conservative,
    }
}
