//! The independent race checker, interpreter and split/named-barrier protocol verifier.
//!
//! What it computes: whether a kernel is free of shared-memory races (docs/ir.md section 5),
//! either *proved* by the static mode ([`proof`]) for every schedule, loop trip count and
//! scalar parameter value at the kernel's block size, or *checked* by interpreting it
//! ([`interp`] with the happens-before detector of [`race`]) for concrete bounds and a number
//! of seeded schedules; otherwise a witness (two accesses, two threads, the element, the
//! iterations), a deadlock or an execution error. It also runs kernels ([`run`]) and returns
//! every global buffer, which differential tests compare before/after synchronization and
//! against the GPU.
//!
//! Independence: this module shares only the IR (`crate::ir`, including the effects table,
//! the register facts of `ir::wgmma` and the seeded PRNG of `ir::random`) with the placer; it
//! never uses `crate::analysis` or `crate::sync`, and computes its own uniformity
//! ([`uniform`]). Its model is written down in docs/checker.md.
//!
//! Complexity: the static mode is O(accesses^2 x instances) per buffer at worst; interpretation is
//! O(schedules x ops executed) plus O(threads x clock slots) per block-wide sync op.

mod elected_pipeline;
mod exec_values;
pub mod handshake_proof;
mod handshake_rearm;
mod handshake_release;
mod handshake_tx;
mod named_proof;
pub mod interp;
mod mbar_pipeline;
pub mod proof;
mod proof_async;
mod proof_classes;
pub mod proof_exec;
mod proof_nest;
mod proof_pairs;
mod proof_syncs;
mod proof_tiles;
mod proof_warp;
pub mod protocol;
pub mod race;
pub mod uniform;

use std::collections::HashMap;

pub use interp::{EnginePolicy, GlobalMem, LayoutMap, Val, input_element, splitmix64};
pub use race::{AccKind, AccessSite, Witness};

use crate::diag::{DiagKind, Diagnostic, Span};
use crate::ir::{Kernel, OpKind, Param, ScalarType, Special};
use crate::target::Target;
use interp::{ExecConfig, Stop, fmt_xyz};

/// Options of [`check_race_free`] and [`run`].
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// The target (warp width, which counter a `gather_to_lds` increments, AMD LDS fences);
    /// None is a generic model: 32-wide warps, `gather_to_lds` counted by `vmcnt`.
    pub target: Option<Target>,
    /// Block size to check instead of the kernel's own.
    pub block: Option<[u32; 3]>,
    /// Grid to interpret when the kernel declares none (`check --grid`): every block of it
    /// is run. A grid that differs from a declared `grid(...)` is refused (E0152).
    pub grid: Option<[u32; 3]>,
    /// Values of scalar parameters by name (without `%`). Parameters not given take their
    /// default in the kernel (`%n: i32 = 8`), else [`DEFAULT_SCALAR`] moved into the declared range
    /// (the report says which).
    pub bounds: Vec<(String, i64)>,
    /// Number of schedules (seeds) the interpreter explores.
    pub schedules: u32,
    /// Ops executed per schedule before giving up.
    pub max_steps: u64,
    /// Seed of the global input data.
    pub input_seed: u64,
    /// Try the static proof first (fall back to interpretation when it does not apply).
    pub try_proof: bool,
    /// Work budget of the proof's execution-error obligations
    /// ([`proof_exec::obligations_within`]); past it the verdict says they were not looked for.
    pub exec_budget: u64,
}

/// Value given to a scalar parameter that `bounds`, the kernel's default and its declared range
/// do not decide ([`Kernel::run_default`]).
pub use crate::ir::kernel::DEFAULT_SCALAR;

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            target: None,
            block: None,
            grid: None,
            bounds: Vec::new(),
            schedules: 4,
            max_steps: 200_000_000,
            input_seed: 0,
            try_proof: true,
            exec_budget: proof_exec::DEFAULT_BUDGET,
        }
    }
}

/// The checker's answer.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// Race freedom proved statically for every schedule, trip count and scalar parameter
    /// value, at this block size. `why` names the argument used. `not_shown` lists the ops
    /// where the proof could not also show that no execution error (C0004, C0005, C0006)
    /// stops the execution first (`proof_exec`); empty: none can.
    Proved {
        block: [u32; 3],
        why: String,
        not_shown: Vec<proof_exec::NotShown>,
    },
    /// No race found by interpretation with these concrete values and schedules.
    Checked {
        block: [u32; 3],
        /// The blocks interpreted; `None`: the grid is unknown and the kernel reads block ids
        /// or grid sizes, so only block 0 of a one-block launch was run.
        grid: Option<[u32; 3]>,
        /// Whether the grid was given by the caller (`CheckOptions::grid`), not declared.
        grid_given: bool,
        bounds: Vec<(String, i64)>,
        schedules: u32,
        not_proved: String,
    },
    /// A race, with its witness.
    Race(Box<Witness>),
    /// A deadlock, divergent barrier, protocol violation or outstanding copy at exit.
    Deadlock(Diagnostic),
    /// An execution error (out-of-range index, division by zero, uninitialized read), or
    /// a missing input.
    ExecError(Diagnostic),
}

/// The result of [`check_race_free`].
#[derive(Clone, Debug)]
pub struct CheckReport {
    pub verdict: Verdict,
    /// The schedule seed that exposed a finding, when interpretation found one.
    pub schedule: Option<u64>,
    /// The layout mapping of collective accesses under which interpretation found it.
    pub layouts: Option<LayoutMap>,
}

impl CheckReport {
    /// Proved or checked race-free (no race, deadlock or execution error found).
    pub fn is_race_free(&self) -> bool {
        matches!(
            self.verdict,
            Verdict::Proved { .. } | Verdict::Checked { .. }
        )
    }

    pub fn is_race(&self) -> bool {
        matches!(self.verdict, Verdict::Race(_))
    }

    pub fn witness(&self) -> Option<&Witness> {
        match &self.verdict {
            Verdict::Race(w) => Some(w),
            _ => None,
        }
    }

    /// One line: `race-free (proved)`, `race-free (checked for block=..., bounds=..., K
    /// schedules)`, or what was found.
    pub fn summary(&self) -> String {
        match &self.verdict {
            Verdict::Proved { not_shown, .. } => proved_summary(not_shown),
            Verdict::Checked {
                block,
                grid,
                grid_given,
                bounds,
                schedules,
                ..
            } => {
                let b = fmt_dims(*block);
                let bs: Vec<String> = bounds.iter().map(|(n, v)| format!("{n}={v}")).collect();
                let bs = if bs.is_empty() {
                    "none".to_string()
                } else {
                    bs.join(",")
                };
                let g = match grid {
                    None => ", grid unknown: block 0 only".to_string(),
                    Some(g) if *grid_given => format!(", grid={}", fmt_dims(*g)),
                    Some(_) => String::new(),
                };
                format!("race-free (checked for block={b}{g}, bounds={bs}, {schedules} schedules)")
            }
            Verdict::Race(w) if w.missing_fence => {
                format!("missing proxy fence on @{}{:?}", w.buffer, w.index)
            }
            Verdict::Race(w) => format!("race on @{}{:?}", w.buffer, w.index),
            Verdict::Deadlock(d) | Verdict::ExecError(d) => d.message.clone(),
        }
    }

    /// The finding as a diagnostic (None when race-free).
    pub fn to_diagnostic(&self, k: &Kernel) -> Option<Diagnostic> {
        match &self.verdict {
            Verdict::Proved { .. } | Verdict::Checked { .. } => None,
            Verdict::Race(w) => {
                let d = witness_diagnostic(k, w, self.schedule);
                Some(match self.layouts {
                    Some(LayoutMap::Rotated) => d.with_note(
                        "under the rotated layout mapping of collective accesses (any thread may own an element; docs/checker.md)",
                    ),
                    _ => d,
                })
            }
            Verdict::Deadlock(d) | Verdict::ExecError(d) => Some(d.clone()),
        }
    }
}

/// `X`, `X,Y` or `X,Y,Z`: trailing dimensions of 1 left out.
fn fmt_dims(d: [u32; 3]) -> String {
    if d[2] != 1 {
        format!("{},{},{}", d[0], d[1], d[2])
    } else if d[1] != 1 {
        format!("{},{}", d[0], d[1])
    } else {
        format!("{}", d[0])
    }
}

/// `race-free (proved)`, or with what it could not show: `race-free (proved; in-bounds
/// indices not shown at 3 accesses, first at byte 812)` (the CLI names lines).
fn proved_summary(not_shown: &[proof_exec::NotShown]) -> String {
    let mut parts = Vec::new();
    for what in [
        proof_exec::Obligation::InBounds,
        proof_exec::Obligation::Divisor,
        proof_exec::Obligation::Initialized,
    ] {
        let of: Vec<_> = not_shown.iter().filter(|n| n.what == what).collect();
        if let Some(first) = of.iter().min_by_key(|n| n.span.lo) {
            let ops = if of.len() == 1 { "op" } else { "ops" };
            parts.push(format!(
                "{} not shown at {} {ops}, first at byte {}",
                what.describe(),
                of.len(),
                first.span.lo
            ));
        }
    }
    // Last, so that the obligations not shown read first.
    if let Some(b) = not_shown.iter().find(|n| n.what == proof_exec::Obligation::Budget) {
        parts.push(format!(
            "execution errors not all looked for: {} at byte {}",
            b.detail.split(" reached").next().unwrap_or("budget").to_string() + " reached",
            b.span.lo
        ));
    }
    if parts.is_empty() {
        "race-free (proved)".into()
    } else {
        format!("race-free (proved; {})", parts.join("; "))
    }
}

/// One warning per obligation the proof could not show (C0090 in-bounds indices, C0091
/// divisors and steps, C0092 initialized reads), labelling each op with why; C0093 where the
/// obligations' work budget stopped the walk.
pub fn not_shown_diagnostics(k: &Kernel, not_shown: &[proof_exec::NotShown]) -> Vec<Diagnostic> {
    use proof_exec::Obligation::*;
    let mut out = Vec::new();
    if let Some(b) = not_shown.iter().find(|n| n.what == Budget) {
        let d = Diagnostic::warning(
            DiagKind::Finding,
            "C0093",
            format!(
                "@{}: race freedom is proved, but execution errors (C0004, C0005, C0006) were not all looked for: {}",
                k.name,
                b.detail
            ),
        );
        out.push(
            d.with_label(b.span, b.detail.clone())
                .with_help("raise the budget with `check --exec-budget N`"),
        );
    }
    for (what, code) in [(InBounds, "C0090"), (Divisor, "C0091"), (Initialized, "C0092")] {
        let of: Vec<_> = not_shown.iter().filter(|n| n.what == what).collect();
        if of.is_empty() {
            continue;
        }
        let mut d = Diagnostic::warning(
            DiagKind::Finding,
            code,
            format!(
                "@{}: race freedom is proved, but not that execution never stops first with {} ({}): {} not shown at {} op(s)",
                k.name,
                what.code(),
                match what {
                    InBounds => "an index out of range",
                    Divisor => "a division by zero or a step that is not positive",
                    Initialized | Budget => "a read of an uninitialized shared element",
                },
                what.describe(),
                of.len()
            ),
        );
        for n in &of {
            d = d.with_label(n.span, n.detail.clone());
        }
        out.push(d.with_note(
            "interpretation (`check --no-proof`) runs the kernel with concrete values and reports the error if these values reach it",
        ));
    }
    out
}

fn describe_site(s: &AccessSite) -> String {
    let who = if s.by_engine {
        format!(
            "the copy engine (copy issued by thread {} {})",
            s.thread,
            fmt_xyz(s.thread_xyz)
        )
    } else {
        format!("thread {} {}", s.thread, fmt_xyz(s.thread_xyz))
    };
    let it = if s.iteration.is_empty() {
        String::new()
    } else {
        let v: Vec<String> = s
            .iteration
            .iter()
            .map(|(n, v)| format!("{n} = {v}"))
            .collect();
        format!(" at {}", v.join(", "))
    };
    format!("{} by {who}{it}", s.kind.describe())
}

/// Renders a witness: both accesses labelled, the element and the block in notes.
pub fn witness_diagnostic(k: &Kernel, w: &Witness, schedule: Option<u64>) -> Diagnostic {
    let _ = k;
    if w.missing_fence {
        return fence_diagnostic(w, schedule);
    }
    let mut d = Diagnostic::error(
        DiagKind::Finding,
        "C0001",
        format!("data race on shared element @{}{:?}", w.buffer, w.index),
    )
    .with_label(w.second.span, describe_site(&w.second))
    .with_label(
        w.first.span,
        format!("unordered with this {}", describe_site(&w.first)),
    );
    d = d.with_note(format!("in block {}", fmt_xyz(w.block_id)));
    if let Some(s) = schedule {
        d = d.with_note(format!("found with schedule seed {s}"));
    }
    let async_involved = w.first.by_engine || w.second.by_engine;
    d.with_help(if async_involved {
        "order the accesses: a wait that completes the copy, then a barrier if another thread reads or writes the element"
    } else {
        "order the accesses with a barrier (or a finer sync op) between them"
    })
}

/// Renders a missing proxy fence (`C0013`): the generic write and the async-proxy access,
/// ordered by sync ops but not across the proxies.
fn fence_diagnostic(w: &Witness, schedule: Option<u64>) -> Diagnostic {
    let mut d = Diagnostic::error(
        DiagKind::Finding,
        "C0013",
        format!(
            "missing proxy fence: shared element @{}{:?} is written through the generic proxy and then accessed through the async proxy",
            w.buffer, w.index
        ),
    )
    .with_label(w.second.span, describe_site(&w.second))
    .with_label(
        w.first.span,
        format!(
            "not fenced for the async proxy: this {}",
            describe_site(&w.first)
        ),
    );
    d = d.with_note(format!("in block {}", fmt_xyz(w.block_id)));
    if let Some(s) = schedule {
        d = d.with_note(format!("found with schedule seed {s}"));
    }
    d.with_note("wgmma operands and TMA copies use the async proxy; a barrier alone does not make generic writes visible to it")
        .with_help("the writing threads need `fence_proxy_async` after the write and before the sync op that orders it before the async access (`smemsync sync --target sm_90` places it)")
}

/// The kernel with the block size the options ask for.
fn sized(k: &Kernel, opts: &CheckOptions) -> Result<Kernel, Diagnostic> {
    let mut k2 = k.clone();
    if let Some(b) = opts.block {
        k2.block = b;
    }
    if let Some(g) = opts.grid {
        if let Some(d) = grid_contradiction(k, g) {
            return Err(d);
        }
        k2.grid = g;
        k2.grid_known = true;
    }
    Ok(k2)
}

/// E0152: a grid given to the checker that is empty, or that differs from the grid the
/// kernel declares (`grid(...)`): the kernel's analysis and `sync`'s placement assumed the
/// declared one, so checking another launch would not check what was placed.
fn grid_contradiction(k: &Kernel, g: [u32; 3]) -> Option<Diagnostic> {
    if g.contains(&0) {
        return Some(Diagnostic::user(
            "E0152",
            format!("grid {}: every dimension must be at least 1", fmt_dims(g)),
        ));
    }
    if !k.grid_known || k.grid == g {
        return None;
    }
    let d = Diagnostic::user(
        "E0152",
        format!(
            "grid {} contradicts @{}'s declared grid({})",
            fmt_dims(g),
            k.name,
            fmt_dims(k.grid)
        ),
    )
    .with_help("leave the grid out (the declared one is interpreted), or change the kernel's `grid(...)`");
    Some(if k.grid_span.is_undef() {
        d
    } else {
        d.with_label(k.grid_span, "declared here")
    })
}

/// Resolves scalar parameters from `opts.bounds` (defaults for the others).
/// Scalar parameter values, and the `name = value` list a report shows.
type Scalars = (HashMap<crate::ir::Value, Val>, Vec<(String, i64)>);

fn scalars(k: &Kernel, opts: &CheckOptions) -> Result<Scalars, Diagnostic> {
    let mut map = HashMap::new();
    let mut used = Vec::new();
    for (name, _) in &opts.bounds {
        let known = k
            .params
            .iter()
            .any(|p| matches!(p, Param::Scalar(v) if k.value_name(*v) == *name));
        if !known {
            return Err(Diagnostic::user(
                "C0010",
                format!(
                    "--bounds names `{name}`, which is not a scalar parameter of @{}",
                    k.name
                ),
            ));
        }
    }
    for p in &k.params {
        if let Param::Scalar(v) = p {
            let name = k.value_name(*v);
            // An explicit bound, else the parameter's default in the kernel, else DEFAULT_SCALAR.
            let given = opts
                .bounds
                .iter()
                .rev()
                .find(|(n, _)| *n == name)
                .map(|(_, x)| *x);
            if let (Some(x), Some((lo, hi))) = (given, *k.param_ranges.get(*v))
                && !(lo as i64..=hi as i64).contains(&x)
            {
                return Err(Diagnostic::user(
                    "C0010",
                    format!("--bounds {name}={x} lies outside the declared range [{lo}, {hi}]"),
                )
                .with_label(
                    k.value_spans.get(*v).to_owned(),
                    "the range is declared here",
                ));
            }
            let default = *k.param_defaults.get(*v);
            let val = match (given, default, k.values[*v].ty) {
                (Some(x), _, ScalarType::F32) => Val::F32(x as f32),
                (Some(x), _, ScalarType::I1) => Val::I1(x != 0),
                (Some(x), _, _) => Val::I32(x as i32),
                (None, Some(crate::ir::Scalar::F32(f)), _) => Val::F32(f),
                (None, Some(d), ScalarType::F32) => Val::F32(d.as_f32()),
                (None, Some(d), _) => Val::I32(d.as_i64() as i32),
                (None, None, ScalarType::F32) => Val::F32(k.run_default(*v) as f32),
                (None, None, _) => Val::I32(k.run_default(*v) as i32),
            };
            let x = given.unwrap_or_else(|| k.run_default(*v));
            map.insert(*v, val);
            used.push((name, x));
        }
    }
    Ok((map, used))
}

/// The refusal of a block the interpreter cannot run (C0010), located on the header's
/// `block(...)` when the kernel has one.
fn block_out_of_range(k: &Kernel) -> Diagnostic {
    let d = Diagnostic::user(
        "C0010",
        format!(
            "block of {} threads is out of the supported range 1..=4096",
            k.threads()
        ),
    );
    if k.block_span.is_undef() {
        d
    } else {
        d.with_label(k.block_span, "the block")
    }
}

/// Checks a kernel for shared-memory races: the static proof first (when
/// `opts.try_proof`), else interpretation with `opts.schedules` seeded schedules (the first
/// with the copy engine at the latest legal moment, the others at random moments), over every
/// block of the grid.
///
/// The kernel must be verifier-clean (`verify::verify` returns nothing); the checker reads
/// only the IR and its effects table. Findings come back as data in the report, never as a
/// panic: `report.to_diagnostic(k)` renders them.
pub fn check_race_free(k: &Kernel, opts: &CheckOptions) -> CheckReport {
    let k = match sized(k, opts) {
        Ok(k) => k,
        Err(d) => {
            return CheckReport {
                verdict: Verdict::ExecError(d),
                schedule: None,
                layouts: None,
            };
        }
    };
    let k = &k;
    if k.threads() == 0 || k.threads() > 4096 {
        return CheckReport {
            verdict: Verdict::ExecError(block_out_of_range(k)),
            schedule: None,
            layouts: None,
        };
    }
    let (sc, used) = match scalars(k, opts) {
        Ok(x) => x,
        Err(d) => {
            return CheckReport {
                verdict: Verdict::ExecError(d),
                schedule: None,
                layouts: None,
            };
        }
    };
    let not_proved = if opts.try_proof {
        match proof::prove(k, opts.target) {
            Ok(why) => {
                let not_shown = proof_exec::obligations_within(k, opts.target, opts.exec_budget);
                // The short interpretation looks where an obligation was not shown; not when
                // the budget was reached (it would cost more than the budget bounds).
                let budget = not_shown.iter().any(|n| n.what == proof_exec::Obligation::Budget);
                if !not_shown.is_empty()
                    && !budget
                    && let Some(found) = exec_error_by_interpretation(k, opts, &sc)
                {
                    return found;
                }
                return CheckReport {
                    verdict: Verdict::Proved {
                        block: k.block,
                        why,
                        not_shown,
                    },
                    schedule: None,
                    layouts: None,
                };
            }
            Err(reason) => reason,
        }
    } else {
        "static proof not attempted".to_string()
    };
    let began = std::time::Instant::now();
    if let Some(found) = interpret(k, opts, &sc) {
        return found;
    }
    // The interpreter's cost, so that a user sees what the missing proof costs.
    let runs = opts.schedules.max(1) as f64;
    let not_proved = format!(
        "{not_proved} (interpreted instead: {:.1} ms per schedule)",
        began.elapsed().as_secs_f64() * 1e3 / runs
    );
    CheckReport {
        verdict: Verdict::Checked {
            block: k.block,
            grid: (k.grid_known || !reads_block_ids(k)).then_some(k.grid),
            grid_given: opts.grid.is_some(),
            bounds: used,
            schedules: opts.schedules.max(1),
            not_proved,
        },
        schedule: None,
        layouts: None,
    }
}

/// Steps of the one interpretation that looks for an execution error where the proof could
/// not show there is none (kept short: the proof's verdict stands without it).
const EXEC_ERROR_STEPS: u64 = 1 << 21;

/// One interpretation with the given scalar values, without race detection, for at most
/// [`EXEC_ERROR_STEPS`]: the execution error (C0004, C0005, C0006) it stops at, if any.
fn exec_error_by_interpretation(
    k: &Kernel,
    opts: &CheckOptions,
    sc: &HashMap<crate::ir::Value, Val>,
) -> Option<CheckReport> {
    let cfg = ExecConfig {
        target: opts.target,
        scalars: sc.clone(),
        input_seed: opts.input_seed,
        sched_seed: 0,
        policy: EnginePolicy::Latest,
        max_steps: opts.max_steps.min(EXEC_ERROR_STEPS),
        detect_races: false,
        layouts: LayoutMap::Documented,
    };
    match interp::execute(k, &cfg) {
        Err(Stop::Exec(d)) if matches!(d.code, "C0004" | "C0005" | "C0006") => Some(CheckReport {
            verdict: Verdict::ExecError(d),
            schedule: Some(0),
            layouts: Some(LayoutMap::Documented),
        }),
        _ => None,
    }
}

/// Runs every schedule under every layout mapping that matters (the second only when the
/// kernel has collective accesses); returns the first finding.
fn interpret(
    k: &Kernel,
    opts: &CheckOptions,
    sc: &HashMap<crate::ir::Value, Val>,
) -> Option<CheckReport> {
    let maps: &[LayoutMap] = if interp::has_collective_layouts(k) {
        &[LayoutMap::Documented, LayoutMap::Rotated]
    } else {
        &[LayoutMap::Documented]
    };
    for s in 0..opts.schedules.max(1) as u64 {
        for &layouts in maps {
            let cfg = ExecConfig {
                target: opts.target,
                scalars: sc.clone(),
                input_seed: opts.input_seed,
                sched_seed: s,
                policy: if s == 0 {
                    EnginePolicy::Latest
                } else {
                    EnginePolicy::Random
                },
                max_steps: opts.max_steps,
                detect_races: true,
                layouts,
            };
            if let Err(stop) = interp::execute(k, &cfg) {
                let verdict = match stop {
                    Stop::Race(w) => Verdict::Race(w),
                    Stop::Deadlock(d) => Verdict::Deadlock(d),
                    Stop::Exec(d) => Verdict::ExecError(d),
                };
                return Some(CheckReport {
                    verdict,
                    schedule: Some(s),
                    layouts: Some(layouts),
                });
            }
        }
    }
    None
}

/// What [`run`] returns: the final contents of every global buffer, in parameter order.
#[derive(Clone, Debug, PartialEq)]
pub struct Outputs {
    pub globals: Vec<GlobalMem>,
}

impl Outputs {
    pub fn get(&self, name: &str) -> Option<&GlobalMem> {
        self.globals.iter().find(|g| g.name == name)
    }
}

/// Executes the whole grid once: inputs from `seed` (docs/ir.md section 3), the schedule
/// from `seed` too, copies performed at the latest legal moment, no race detection.
/// Deadlocks and execution errors are returned as diagnostics.
pub fn run(k: &Kernel, seed: u64, opts: &CheckOptions) -> Result<Outputs, Diagnostic> {
    run_with_schedule(k, seed, seed, opts)
}

/// [`run`] with the schedule drawn from its own seed: a race-free kernel gives the same
/// outputs for every `sched_seed` (the copy engine performs copies at random moments when
/// `sched_seed` is odd, at the latest legal moment otherwise).
pub fn run_with_schedule(
    k: &Kernel,
    input_seed: u64,
    sched_seed: u64,
    opts: &CheckOptions,
) -> Result<Outputs, Diagnostic> {
    let k = sized(k, opts)?;
    if k.threads() == 0 || k.threads() > 4096 {
        return Err(block_out_of_range(&k));
    }
    let (sc, _) = scalars(&k, opts)?;
    let cfg = ExecConfig {
        target: opts.target,
        scalars: sc,
        input_seed,
        sched_seed,
        policy: if sched_seed % 2 == 1 {
            EnginePolicy::Random
        } else {
            EnginePolicy::Latest
        },
        max_steps: opts.max_steps,
        detect_races: false,
        layouts: LayoutMap::Documented,
    };
    match interp::execute(&k, &cfg) {
        Ok(globals) => Ok(Outputs { globals }),
        Err(Stop::Race(w)) => Err(witness_diagnostic(&k, &w, Some(sched_seed))),
        Err(Stop::Deadlock(d)) | Err(Stop::Exec(d)) => Err(d),
    }
}

/// The span of a diagnostic's primary label (convenience for tests).
pub fn primary_span(d: &Diagnostic) -> Span {
    d.primary_span().unwrap_or(Span::UNDEF)
}

/// Whether the kernel reads a block id or a grid size (its meaning then depends on the grid).
fn reads_block_ids(k: &Kernel) -> bool {
    k.ops
        .values()
        .any(|o| matches!(o.kind, OpKind::Special(Special::Bid(_) | Special::GridDim(_))))
}
