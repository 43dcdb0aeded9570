//! `smemsync sync --target T FILE`: find the hazards and print the kernel with syncs inserted.
//!
//! Output (stdout): the canonical text of every kernel with the plan applied. `--explain`
//! and `--stats` append `//` comment lines after each kernel on stdout (so the output still
//! parses). Findings no barrier can fix go to stderr with exit code 1.

use std::collections::HashMap;

use smemsync::analysis::footprint::Footprints;
use smemsync::analysis::hazards::{Carry, Hazard, op_name};
use smemsync::ir::edit::apply;
use smemsync::sync::{PlaceOptions, Placement, Strategy, place_barriers};
use smemsync::target::Target;
use smemsync::{Diagnostic, Kernel};

use super::{EXIT_FINDING, EXIT_OK, EXIT_USER, load, read_input, report};

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
    /// Target GPU (gfx942, gfx950, gfx1200, gfx1201, gfx1250, sm_80, sm_90).
    #[arg(long)]
    pub target: String,
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
    /// Apply every inserted sync except the N-th (0-based, plan order): mutation testing.
    #[arg(long)]
    pub without: Option<usize>,
    /// Never use warp-level syncs (always block barriers).
    #[arg(long)]
    pub no_warp_sync: bool,
}

/// Describes an op for explanations: its kind and source line.
pub fn describe_op(k: &Kernel, src: &str, op: smemsync::ir::Op) -> String {
    match smemsync::diag::line_number(src, k.span(op)) {
        Some(l) => format!("{} (line {l})", op_name(k, op)),
        None => op_name(k, op),
    }
}

fn buffer_name(k: &Kernel, h: &Hazard) -> String {
    let e = smemsync::ir::effects(k, h.dst.op);
    e.shared.get(h.dst.index).map_or_else(String::new, |a| {
        format!("@{}", k.buffers[k.root_buffer(a.mem)].name)
    })
}

/// One line explaining a hazard.
pub fn explain_hazard(k: &Kernel, fp: &Footprints, src: &str, h: &Hazard) -> String {
    let mut s = format!(
        "{} {} {} -> {}",
        h.kind.name(),
        buffer_name(k, h),
        describe_op(k, src, h.src.op),
        describe_op(k, src, h.dst.op)
    );
    if h.src_at != h.src.op {
        s.push_str(&format!(
            " (copy visible at {})",
            describe_op(k, src, h.src_at)
        ));
    }
    match h.carry {
        Carry::Forward => s.push_str(", same iteration"),
        Carry::Carried {
            loop_op,
            min_distance,
            ..
        } => s.push_str(&format!(
            ", carried by {} at distance {min_distance}",
            describe_op(k, src, loop_op)
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

fn parse_bounds(b: &[String]) -> Result<HashMap<String, i64>, String> {
    let mut m = HashMap::new();
    for item in b {
        let (n, v) = item
            .split_once('=')
            .ok_or_else(|| format!("bad bound `{item}`: expected NAME=INT"))?;
        let v: i64 = v
            .trim()
            .parse()
            .map_err(|_| format!("bad bound `{item}`: expected NAME=INT"))?;
        m.insert(n.trim().trim_start_matches('%').to_string(), v);
    }
    Ok(m)
}

pub fn run(args: &SyncArgs) -> i32 {
    let input = match read_input(&args.file) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USER;
        }
    };
    let target = match Target::from_name(&args.target) {
        Ok(t) => t,
        Err(d) => {
            report(&input, &[d]);
            return EXIT_USER;
        }
    };
    let bounds = match parse_bounds(&args.bounds) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USER;
        }
    };
    let kernels = match load(&input) {
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
        match place_barriers(k, &target, &opts) {
            Ok(p) => out.push(render(k, &target, &input.text, &p, args)),
            Err(d) => findings.extend(d),
        }
    }
    if !findings.is_empty() {
        report(&input, &findings);
        return EXIT_FINDING;
    }
    print!("{}", out.join("\n"));
    EXIT_OK
}

fn render(k: &Kernel, target: &Target, src: &str, p: &Placement, args: &SyncArgs) -> String {
    let plan = match args.without {
        Some(n) => p.plan.without(n),
        None => p.plan.clone(),
    };
    let mut text = smemsync::emit::text::print_kernel(&apply(k, &plan));
    if args.explain {
        let fp = Footprints::new(k, target.warp);
        for (i, e) in p.plan.edits.iter().enumerate() {
            let what = match e.op {
                smemsync::ir::OpKind::WarpSync => "warp_sync",
                _ => "barrier",
            };
            let at = match e.at.anchor {
                smemsync::ir::edit::Anchor::Before(op) => {
                    format!("before {}", describe_op(k, src, op))
                }
                smemsync::ir::edit::Anchor::After(op) => {
                    format!("after {}", describe_op(k, src, op))
                }
                smemsync::ir::edit::Anchor::Start(_) => "at the start of its region".into(),
                smemsync::ir::edit::Anchor::End(r) => match k.regions[r].ops.last() {
                    Some(&last) => {
                        format!("at the end of the region of {}", describe_op(k, src, last))
                    }
                    None => "at the end of its region".into(),
                },
            };
            text.push_str(&format!(
                "// sync #{i}: {what} {at} removes {} hazard(s)\n",
                p.removes[i].len()
            ));
            for &h in &p.removes[i] {
                text.push_str(&format!(
                    "//   {}\n",
                    explain_hazard(k, &fp, src, &p.hazards[h])
                ));
            }
        }
        if !p.existing.is_empty() {
            text.push_str(&format!(
                "// existing syncs remove {} hazard(s)\n",
                p.existing.len()
            ));
            for &h in &p.existing {
                text.push_str(&format!(
                    "//   {}\n",
                    explain_hazard(k, &fp, src, &p.hazards[h])
                ));
            }
        }
    }
    if args.stats {
        let s = &p.stats;
        text.push_str(&format!(
            "// stats: hazards={} covered_by_existing={} barriers_written={} warp_syncs_written={} existing_barriers={} barriers_executed={} inserted_executed={} lower_bound={}\n",
            s.hazards, s.covered_by_existing, s.barriers_written, s.warp_syncs_written, s.existing_barriers, s.barriers_executed, s.inserted_executed, s.lower_bound
        ));
    }
    text
}
