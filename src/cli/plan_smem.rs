//! `smemsync plan-smem FILE`: assign shared-memory offsets with reuse; print the planned
//! kernel, and on stderr the figures of the chosen plan (peak bytes, barriers executed once
//! synchronized), where each buffer went with the source lines it is live across, which
//! buffers share bytes and at what cost, and every candidate plan considered.
//!
//! Barriers are counted by synchronizing each candidate for `--target` (else the target the
//! input declares, else the first of gfx942, sm_90 and gfx1250 that has the input's ops). `sync --plan-smem` runs the same planner and prints the
//! chosen plan synchronized.

use std::collections::HashMap;

use smemsync::Kernel;
use smemsync::sync::PlaceOptions;
use smemsync::target::Target;
use smemsync::transform::smem_plan::{
    DEFAULT_ALIGN, Objective, PlanOptions, PlanReport, SmemPlan, plan_shared_memory, plan_with,
};

use super::{EXIT_OK, Input, exit_code, fail, load_file_for_target, report};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectiveArg {
    /// Fewest bytes, then fewest barriers executed.
    Bytes,
    /// Fewest barriers executed, then fewest bytes.
    Barriers,
}

/// What the planner optimizes (shared by `plan-smem` and `sync --plan-smem`).
#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// What to minimize first.
    #[arg(long, value_enum, default_value = "bytes")]
    pub objective: ObjectiveArg,
    /// Only plans of at most N bytes (then the objective decides).
    #[arg(long, value_name = "N")]
    pub max_bytes: Option<u64>,
    /// Only plans that execute at most N barriers per block (then the objective decides).
    #[arg(long, value_name = "N")]
    pub max_barriers: Option<u64>,
    /// Alignment of buffer offsets in bytes (mbarriers: 8); nvFuser uses 128.
    #[arg(long, default_value_t = DEFAULT_ALIGN, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub align: u64,
}

#[derive(clap::Args, Debug)]
pub struct PlanSmemArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Target whose barriers are counted (default: the one the input declares, else the
    /// first of gfx942, sm_90, gfx1250 that has every op of the input).
    #[arg(long)]
    pub target: Option<String>,
    #[command(flatten)]
    pub bounds: super::BoundsArgs,
    /// Count with block barriers only (never warp-level syncs), as `sync --no-warp-sync`.
    #[arg(long)]
    pub no_warp_sync: bool,
    #[command(flatten)]
    pub plan: PlanArgs,
    #[command(flatten)]
    pub output: super::FormatArgs,
}

/// The planner's options from the command line.
pub fn plan_options(args: &PlanArgs, target: Target, place: PlaceOptions) -> PlanOptions {
    PlanOptions {
        target,
        place,
        objective: match args.objective {
            ObjectiveArg::Bytes => Objective::Bytes,
            ObjectiveArg::Barriers => Objective::Barriers,
        },
        max_bytes: args.max_bytes,
        max_barriers: args.max_barriers,
        align: args.align,
    }
}

pub fn run(args: &PlanSmemArgs) -> i32 {
    let bounds: HashMap<String, i64> = match args.bounds.parse() {
        Ok(b) => b.into_iter().collect(),
        Err(e) => return fail(&e),
    };
    let loaded = load_file_for_target(&args.file, args.target.as_deref(), Some(default_target));
    let (input, target, kernels) = match loaded {
        Ok(l) => l,
        Err(code) => return code,
    };
    let place = PlaceOptions {
        bounds,
        no_warp_sync: args.no_warp_sync,
        ..PlaceOptions::default()
    };
    let opts = plan_options(&args.plan, target, place);
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for k in &kernels {
        match plan_with(k, &opts) {
            Ok(r) => {
                eprint!("{}", describe(k, &input, &r, &opts));
                out.push(r.plan.kernel);
            }
            // Budgets that cannot be met are the user's to change.
            Err(d) if d.iter().any(|d| d.code == "E0620") => errors.extend(d),
            // `sync` refuses the kernel itself: plan by lifetimes alone, barriers uncounted.
            Err(d) => {
                let plan = plan_shared_memory(k);
                eprint!("{}", header(k, &plan));
                eprintln!(
                    "  barriers not counted: sync refuses @{} on {} ({})",
                    k.name,
                    opts.target.name,
                    d.first().map_or("", |d| d.message.as_str())
                );
                eprint!("{}", placements(k, &input, &plan));
                out.push(plan.kernel);
            }
        }
    }
    if !errors.is_empty() {
        report(&input, &errors);
        return exit_code(&errors);
    }
    print!("{}", smemsync::emit::text::print_kernels(&out));
    EXIT_OK
}

/// The target barriers are counted for when none is given or declared: the first of gfx942,
/// sm_90 and gfx1250 that has every op of the input (gfx942 when the input does not parse;
/// the load that follows reports it).
fn default_target(input: &Input) -> Result<Target, smemsync::Diagnostic> {
    let kernels = smemsync::reader::parse(&input.text).map(|m| m.kernels);
    let fits = |t: &Target| {
        kernels.as_ref().is_ok_and(|ks| {
            ks.iter()
                .all(|k| smemsync::verify::target_ops::check(k, t).is_empty())
        })
    };
    let found = ["sm_90", "gfx1250"]
        .iter()
        .filter_map(|n| Target::from_name(n).ok())
        .find(fits);
    let gfx942 = Target::from_name("gfx942")?;
    Ok(if fits(&gfx942) {
        gfx942
    } else {
        found.unwrap_or(gfx942)
    })
}

fn header(k: &Kernel, plan: &SmemPlan) -> String {
    format!(
        "@{}: {} bytes of shared memory (was {})\n",
        k.name, plan.peak, plan.peak_before
    )
}

/// The stderr report of one planned kernel.
pub fn describe(k: &Kernel, input: &Input, r: &PlanReport, opts: &PlanOptions) -> String {
    let mut s = header(k, &r.plan);
    s.push_str(&format!(
        "  {} barriers executed on {} (was {}); objective {}\n",
        r.barriers,
        opts.target.name,
        r.barriers_before,
        match opts.objective {
            Objective::Bytes => "bytes",
            Objective::Barriers => "barriers",
        }
    ));
    s.push_str(&fit_line(k, input, r, opts));
    s.push_str(&placements(k, input, &r.plan));
    let lt = smemsync::transform::smem_plan::lifetimes(k);
    for &(a, b, c) in &r.reuses {
        let how = if lt.relation(a, b) == smemsync::transform::smem_live::Rel::SameOffset {
            ", handed off element by element inside a loop"
        } else {
            ""
        };
        s.push_str(&format!(
            "  reuse: @{} over @{}: {}{how}\n",
            k.buffers[b].name,
            k.buffers[a].name,
            c.name()
        ));
    }
    for (i, c) in r.candidates.iter().enumerate() {
        let figures = match &c.barriers {
            Ok(b) => format!("{:>6} bytes {:>6} barriers", c.peak, b),
            Err(e) => format!("{:>6} bytes, sync refuses it: {e}", c.peak),
        };
        let mark = if i == r.chosen { "*" } else { " " };
        s.push_str(&format!("  {mark} candidate {figures}  {}\n", c.name));
    }
    s
}

/// Against the target's shared memory per block: a line when the kernel fits only after
/// planning; W1700 (reported at once) when even the chosen plan does not fit, with the
/// fewest bytes any candidate reached.
fn fit_line(k: &Kernel, input: &Input, r: &PlanReport, opts: &PlanOptions) -> String {
    let max = opts.target.limits.max_shared_bytes;
    let name = &opts.target.name;
    if r.plan.peak <= max {
        return if r.plan.peak_before > max {
            format!("  fits {name}'s {max} bytes per block only after planning\n")
        } else {
            String::new()
        };
    }
    let fewest = r
        .candidates
        .iter()
        .map(|c| c.peak)
        .min()
        .unwrap_or(r.plan.peak);
    let w = smemsync::Diagnostic::warning(
        smemsync::diag::DiagKind::User,
        "W1700",
        format!(
            "@{}: the planned kernel still needs {} bytes of shared memory, more than the {max} a block may use on {name}",
            k.name, r.plan.peak
        ),
    )
    .with_label(k.kernel_span, "cannot launch")
    .with_note(format!("the fewest bytes of any plan considered: {fewest}"))
    .with_help(if fewest <= max {
        "a plan that fits executes more barriers: drop --objective barriers or raise --max-barriers"
    } else {
        "shrink the buffers, or pipeline with fewer stages"
    });
    report(input, &[w]);
    String::new()
}

/// One line per buffer: offset, size, the source lines it is live across.
fn placements(k: &Kernel, input: &Input, plan: &SmemPlan) -> String {
    let ops = k.ops_in_order();
    let line = |i: usize| {
        let span = ops.get(i).map(|&op| k.span(op));
        span.and_then(|s| smemsync::diag::line_number(&input.text, s))
    };
    let lt = smemsync::transform::smem_plan::lifetimes(k);
    let mut s = String::new();
    for p in &plan.placements {
        let mut live = match p.live.map(|(a, b)| (line(a), line(b), b == usize::MAX)) {
            None => "never".to_string(),
            Some((Some(a), _, true)) => format!("lines {a}..=end (no mbar_inval)"),
            Some((Some(a), Some(b), _)) => format!("lines {a}..={b}"),
            Some(_) => "in ops the input does not show".to_string(),
        };
        if let Some(l) = lt.private_to.get(p.buffer)
            && let Some(n) = smemsync::diag::line_number(&input.text, k.span(*l))
        {
            live.push_str(&format!(
                ", dead across the back edge of the loop at line {n}"
            ));
        }
        s.push_str(&format!(
            "  @{:<12} offset {:>6}  bytes {:>6}  live {live}\n",
            k.buffers[p.buffer].name, p.offset, p.bytes
        ));
        let slots = lt.slots.get(p.buffer);
        let width = p.bytes / (slots.len().max(1) as u64);
        for (i, sl) in slots.iter().enumerate() {
            let live = match sl.map(|(a, b)| (line(a), line(b))) {
                None => "never".to_string(),
                Some((Some(a), Some(b))) => format!("lines {a}..={b}"),
                Some(_) => "in ops the input does not show".to_string(),
            };
            s.push_str(&format!(
                "    slot {i}        offset {:>6}  bytes {:>6}  live {live}\n",
                p.offset + i as u64 * width,
                width
            ));
        }
    }
    s
}
