//! `smemsync sync --target T FILE`: find the hazards and print the kernel with syncs inserted.
//!
//! Output (stdout): the canonical text of every kernel with the plan applied. `--explain`
//! and `--stats` append `//` comment lines after each kernel on stdout (so the output still
//! parses). Findings no barrier can fix go to stderr with exit code 1.

use std::collections::HashMap;

use smemsync::analysis::footprint::Footprints;
use smemsync::analysis::hazards::{Carry, Hazard};
use smemsync::ir::edit::Anchor;
use smemsync::sync::driver::{Synchronized, synchronize, without_inserted};
use smemsync::sync::waits::Anchor as WaitAnchor;
use smemsync::sync::{PlaceOptions, Placement, Strategy};
use smemsync::target::Target;
use smemsync::{Diagnostic, Kernel};

use super::explain::Namer;
use super::{
    EXIT_OK, EXIT_USER, exit_code, load_for_target, parse_bounds, read_input, report,
    required_target,
};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrategyArg {
    Optimal,
    Naive,
    Exhaustive,
}

#[derive(clap::Args, Debug)]
pub struct SyncArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Target GPU (gfx942, gfx950, gfx1200, gfx1201, gfx1250, sm_80, sm_90); may be left out
    /// when the input declares its target.
    #[arg(long)]
    pub target: Option<String>,
    /// After each kernel, list for each inserted sync the hazards it removes (stdout, as `//`
    /// comments).
    #[arg(long)]
    pub explain: bool,
    /// After each kernel, print hazards, barriers written/executed and the lower bound (stdout,
    /// as a `//` comment).
    #[arg(long)]
    pub stats: bool,
    /// Values of scalar parameters for counting executed barriers: `n=128,m=4` (repeatable).
    #[arg(long, value_delimiter = ',')]
    pub bounds: Vec<String>,
    /// Placement strategy.
    #[arg(long, value_enum, default_value = "optimal")]
    pub strategy: StrategyArg,
    /// Drop the N-th inserted sync op (0-based, program order; waits and barriers alike) from
    /// the output: mutation testing.
    #[arg(long)]
    pub without: Option<usize>,
    /// Never use warp-level syncs (always block barriers).
    #[arg(long)]
    pub no_warp_sync: bool,
    /// Plan shared memory first (as `plan-smem`, report on stderr), then synchronize the
    /// chosen plan: its reuse hazards go through the same placement.
    #[arg(long)]
    pub plan_smem: bool,
    #[command(flatten)]
    pub plan: super::plan_smem::PlanArgs,
}

fn buffer_name(k: &Kernel, h: &Hazard) -> String {
    let e = smemsync::ir::effects(k, h.dst.op);
    e.shared.get(h.dst.index).map_or_else(String::new, |a| {
        format!("@{}", k.buffers[k.root_buffer(a.mem)].name)
    })
}

/// One line explaining a hazard.
pub fn explain_hazard(k: &Kernel, fp: &Footprints, names: &Namer, h: &Hazard) -> String {
    let mut s = format!(
        "{} {} {} -> {}",
        h.kind.name(),
        buffer_name(k, h),
        names.op(h.src.op),
        names.op(h.dst.op)
    );
    if h.src_at != h.src.op {
        s.push_str(&format!(" (copy visible at {})", names.op(h.src_at)));
    }
    match h.carry {
        Carry::Forward => s.push_str(", same iteration"),
        Carry::Carried {
            loop_op,
            min_distance,
            ..
        } => s.push_str(&format!(
            ", carried by {} at distance {min_distance}",
            names.op(loop_op)
        )),
    }
    if let Some(w) = h.witness {
        let who = |x: smemsync::analysis::footprint::Who| match x {
            smemsync::analysis::footprint::Who::One(t) => format!("thread {t}"),
            smemsync::analysis::footprint::Who::Lane { pos, .. } => {
                format!("layout position {pos}")
            }
            smemsync::analysis::footprint::Who::Many(_) => "several threads".to_string(),
        };
        s.push_str(&format!(
            ", e.g. {} by {} and {}",
            fp.describe_unit(w.unit),
            who(w.a),
            who(w.b)
        ));
    }
    if h.intra_warp {
        s.push_str(", within one warp");
    }
    s
}

pub fn run(args: &SyncArgs) -> i32 {
    let input = match read_input(&args.file) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USER;
        }
    };
    let target = match required_target(&input, args.target.as_deref()) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let bounds: HashMap<String, i64> = match parse_bounds(args.bounds.iter().map(String::as_str)) {
        Ok(b) => b.into_iter().collect(),
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USER;
        }
    };
    let kernels = match load_for_target(&input, Some(&target)) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let strategy = match args.strategy {
        StrategyArg::Optimal => Strategy::Optimal,
        StrategyArg::Naive => Strategy::Naive,
        StrategyArg::Exhaustive => Strategy::Exhaustive,
    };
    let opts = PlaceOptions {
        strategy,
        bounds,
        no_warp_sync: args.no_warp_sync,
    };
    let mut out = Vec::new();
    let mut findings: Vec<Diagnostic> = Vec::new();
    for k in &kernels {
        let planned = if args.plan_smem {
            let popts = super::plan_smem::plan_options(&args.plan, target, opts.clone());
            smemsync::transform::smem_plan::plan_with(k, &popts).map(|r| {
                eprint!("{}", super::plan_smem::describe(k, &input, &r, &popts));
                r.synced
            })
        } else {
            synchronize(k, &target, &opts)
        };
        match planned {
            Ok(s) => match render(k, &target, &input.text, &s, args) {
                Ok(text) if !s.placement.warnings.is_empty() => {
                    report(&input, &s.placement.warnings);
                    out.push(text)
                }
                Ok(text) => out.push(text),
                Err(d) => findings.push(d),
            },
            Err(d) => findings.extend(d),
        }
    }
    if !findings.is_empty() {
        report(&input, &findings);
        return exit_code(&findings);
    }
    print!("{}", out.join("\n"));
    EXIT_OK
}

fn render(
    input: &Kernel,
    target: &Target,
    src: &str,
    s: &Synchronized,
    args: &SyncArgs,
) -> Result<String, Diagnostic> {
    let p: &Placement = &s.placement;
    let kernel = match args.without {
        Some(n) => without_inserted(&s.kernel, s.input_ops, n).ok_or_else(|| {
            Diagnostic::user(
                "E0300",
                format!(
                    "--without {n}: @{} has only {} inserted sync op(s)",
                    input.name,
                    s.inserted().len()
                ),
            )
        })?,
        None => s.kernel.clone(),
    };
    let mut text = smemsync::emit::text::print_kernel(&kernel);
    if args.explain {
        text.push_str(&explain(input, target, src, s));
    }
    if args.stats {
        let st = &p.stats;
        text.push_str(&format!(
            "// stats: hazards={} covered_by_existing={} barriers_written={} warp_syncs_written={} existing_barriers={} barriers_executed={} inserted_executed={} lower_bound={} waits_written={} inserted_syncs={} conservative={}\n",
            st.hazards, st.covered_by_existing, st.barriers_written, st.warp_syncs_written, st.existing_barriers, st.barriers_executed, st.inserted_executed, st.lower_bound, s.waits.edits.len(), s.inserted().len(), st.conservative
        ));
        if let Some(sp) = &s.split {
            let adjacent = 0.0;
            text.push_str(&format!(
                "// split: pairs={} phases={} absorbed_barriers={} dscnt_dropped={} mean_slack={:.2} (signal placed just before its wait: {adjacent:.2}) slack={:?}\n",
                sp.pairs,
                sp.phases.map_or("unknown".to_string(), |p| p.to_string()),
                sp.absorbed,
                sp.dscnt_dropped,
                sp.mean_slack(),
                sp.slack
            ));
        }
    }
    Ok(text)
}

/// The `--explain` comments: each inserted wait and why, each inserted barrier and the hazards
/// it removes, and the hazards the input's own syncs already remove. Ops and points are named as
/// the source reads (`explain::Namer`).
fn explain(input: &Kernel, target: &Target, src: &str, s: &Synchronized) -> String {
    let mut text = String::new();
    let in_names = Namer::new(input, src);
    for (i, e) in s.waits.edits.iter().enumerate() {
        let at = match e.anchor {
            WaitAnchor::Before(op) => in_names.point(Anchor::Before(op)),
            WaitAnchor::End(r) => in_names.point(Anchor::End(r)),
        };
        let what = smemsync::emit::text::print_op_line(input, &e.kind);
        text.push_str(&format!("// wait #{i}: {what} {at}\n"));
        for line in e.why.lines() {
            text.push_str(&format!("//   {line}\n"));
        }
    }
    let (p, k) = (&s.placement, &s.with_waits);
    let names = Namer::new(k, src);
    let fp = Footprints::new(k, target.warp);
    for (i, e) in p.plan.edits.iter().enumerate() {
        let what = match e.op {
            smemsync::ir::OpKind::WarpSync => "warp_sync",
            _ => "barrier",
        };
        let n = p.removes[i].len();
        let at = names.point(e.at.anchor);
        text.push_str(&format!(
            "// sync #{i}: {what} {at} removes {n} hazard(s)\n"
        ));
        for &h in &p.removes[i] {
            let line = explain_hazard(k, &fp, &names, &p.hazards[h]);
            text.push_str(&format!("//   {line}\n"));
        }
    }
    if !p.existing.is_empty() {
        let n = p.existing.len();
        text.push_str(&format!("// existing syncs remove {n} hazard(s)\n"));
        for &h in &p.existing {
            let line = explain_hazard(k, &fp, &names, &p.hazards[h]);
            text.push_str(&format!("//   {line}\n"));
        }
    }
    text
}
