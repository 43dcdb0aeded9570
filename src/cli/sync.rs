//! `smemsync sync --target T FILE`: find the hazards and print the kernel with syncs inserted.
//!
//! Output (stdout): the canonical text of every kernel with the plan applied. `--explain`
//! and `--stats` append `//` comment lines after each kernel on stdout (so the output still
//! parses). Findings no barrier can fix go to stderr with exit code 1.
//!
//! With `--format json`, stdout is one JSON document instead (docs/diagnostics.md): each
//! kernel's text, and with `--explain`/`--stats` the same facts as objects: every inserted wait
//! and sync with the hazards it removes, and the statistics.

use std::collections::HashMap;

use smemsync::analysis::footprint::Footprints;
use smemsync::analysis::hazards::{Carry, Hazard};
use smemsync::emit::explain::{Namer, buffer_name, explain_hazard, sync_op_name};
use smemsync::sync::driver::{self, synchronize, synchronize_output, without_inserted};

/// One kernel's pipeline result, with the kernel placement ran on when the input was kept
/// (`--explain` reads it) and `None` where the barriers were written into it.
type Synchronized = driver::Synchronized<Option<Kernel>>;
use smemsync::sync::{PlaceOptions, Strategy};
use smemsync::target::Target;
use smemsync::{Diagnostic, Kernel};

use smemsync::diag::json::Json;

use super::{EXIT_OK, MessageFormat, exit_code, fail, load_file_for_target, report};

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
    #[command(flatten)]
    pub bounds: super::BoundsArgs,
    /// For a TTGIR input: print the original TTGIR with the inserted syncs written as TTGIR
    /// lines (`gpu.barrier`, `ttg.async_wait`, ...) marked `// smemsync` (docs/ttgir.md).
    #[arg(long)]
    pub annotate: bool,
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
    #[command(flatten)]
    pub output: super::FormatArgs,
}

/// The mean slack of the naive split lowering that `--stats` prints next to the measured one:
/// every signal immediately before its wait (zero ops between them).
const ADJACENT_SIGNAL_SLACK: f64 = 0.0;

pub fn run(args: &SyncArgs) -> i32 {
    let bounds: HashMap<String, i64> = match args.bounds.parse() {
        Ok(b) => b.into_iter().collect(),
        Err(e) => {
            return fail(&e);
        }
    };
    let (input, target, kernels) =
        match load_file_for_target(&args.file, args.target.as_deref(), None) {
            Ok(l) => l,
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
    // The input kernel is read after its synchronization only by `--explain` (the waits are
    // named in it), `--plan-smem` and `--annotate`; otherwise the pipeline takes it, copies
    // no kernel and writes the barriers into it (`synchronize_output`; docs/performance.md,
    // "The whole process at 10^6 ops, session 29" and "reader").
    let keep_input = args.explain || args.plan_smem || args.annotate;
    let mut pieces = Vec::new();
    let mut docs = Vec::new();
    let mut findings: Vec<Diagnostic> = Vec::new();
    for k in kernels {
        let name = k.name.clone();
        let (kept, synced) = if keep_input {
            let synced = synchronize_kept(&k, &input, &target, &opts, args);
            (Some(k), synced.map(|s| s.map_with_waits(Some)))
        } else {
            let synced = synchronize_output(k, &target, &opts);
            (None, synced.map(|s| s.map_with_waits(|_| None)))
        };
        let s = match synced {
            Ok(s) => s,
            Err(d) => {
                findings.extend(d);
                continue;
            }
        };
        let without = match without_kernel(&name, &s, args.without) {
            Ok(without) => without,
            Err(d) => {
                findings.push(d);
                continue;
            }
        };
        report(&input, &s.placement.warnings);
        let cx = Rendering {
            name: &name,
            input: kept.as_ref(),
            target: &target,
            src: &input.text,
            args,
        };
        let output = without.as_ref().unwrap_or(&s.kernel);
        if args.annotate {
            let Some((ttgir, imp)) = &input.ttgir else {
                return fail("--annotate needs a TTGIR input (FILE.ttgir)");
            };
            let text = smemsync::reader::ttgir::annotate::annotate(
                ttgir,
                imp,
                &input.text,
                output,
                s.input_ops,
            );
            pieces.push(Piece::Text(text));
            continue;
        }
        if args.output.format == MessageFormat::Json {
            docs.push(kernel_json(&cx, output, &s));
        } else {
            let notes = notes(&cx, &s);
            pieces.push(Piece::Kernel {
                s: Box::new(s),
                without: without.map(Box::new),
                notes,
            });
        }
    }
    if !findings.is_empty() {
        report(&input, &findings);
        return exit_code(&findings);
    }
    let code = write_out(&pieces, docs, args.output.format);
    // The process ends here: freeing each op, name and table of the kernels one by one is
    // work nobody waits for (5% of `sync` on a 10^6-op kernel); the OS takes the memory back.
    std::mem::forget(pieces);
    code
}

/// The pipeline on a kernel the caller keeps (`--explain`, `--plan-smem`, `--annotate`).
fn synchronize_kept(
    k: &Kernel,
    input: &super::Input,
    target: &Target,
    opts: &PlaceOptions,
    args: &SyncArgs,
) -> Result<driver::Synchronized, Vec<Diagnostic>> {
    if !args.plan_smem {
        return synchronize(k, target, opts);
    }
    let popts = super::plan_smem::plan_options(&args.plan, *target, opts.clone());
    smemsync::transform::smem_plan::plan_with(k, &popts).map(|r| {
        eprint!("{}", super::plan_smem::describe(k, input, &r, &popts));
        r.synced
    })
}

/// What one kernel prints, kept until every kernel is synchronized (a finding in any kernel
/// prints none of them).
enum Piece {
    /// Text as it is printed (`--annotate`).
    Text(String),
    /// A synchronized kernel (printed from `without` when `--without` asked for it), then its
    /// `--explain`/`--stats` comments.
    Kernel {
        s: Box<Synchronized>,
        without: Option<Box<Kernel>>,
        notes: String,
    },
}

/// Writes the pieces on stdout: the text ones separated by a blank line, each kernel streamed
/// as it is printed (`emit::text::write_kernel`, no copy of its text); or, under `--format
/// json`, one document of the kernels' `docs`. A write error (a closed pipe) is a usage error.
fn write_out(pieces: &[Piece], docs: Vec<Json>, format: MessageFormat) -> i32 {
    use std::io::Write as _;
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::with_capacity(smemsync::emit::text::CHUNK, stdout.lock());
    let written = if format == MessageFormat::Json {
        let doc = Json::object([("kernels", Json::Array(docs))]);
        writeln!(w, "{doc}")
    } else {
        pieces.iter().enumerate().try_for_each(|(i, p)| {
            if i > 0 {
                w.write_all(b"\n")?;
            }
            match p {
                Piece::Text(t) => w.write_all(t.as_bytes()),
                Piece::Kernel { s, without, notes } => {
                    let kernel = without.as_deref().unwrap_or(&s.kernel);
                    smemsync::emit::text::write_kernel(kernel, &mut w)?;
                    w.write_all(notes.as_bytes())
                }
            }
        })
    };
    match written.and_then(|()| w.flush()) {
        Ok(()) => EXIT_OK,
        Err(e) => fail(&format!("cannot write standard output: {e}")),
    }
}

/// The synchronized kernel less the `--without N`-th inserted sync when asked (E0300 when the
/// kernel has fewer); `None` without `--without`: the pipeline's kernel itself is printed.
fn without_kernel(
    name: &str,
    s: &Synchronized,
    without: Option<usize>,
) -> Result<Option<Kernel>, Diagnostic> {
    let Some(n) = without else {
        return Ok(None);
    };
    match without_inserted(&s.kernel, s.input_ops, n) {
        Some(k) => Ok(Some(k)),
        None => Err(Diagnostic::user(
            "E0300",
            format!(
                "--without {n}: @{name} has only {} inserted sync op(s)",
                s.inserted().len()
            ),
        )),
    }
}

/// What the rendering of one kernel's result reads besides the result: the kernel's name, the
/// input kernel (kept only for `--explain`, `--plan-smem` and `--annotate`), the target, the
/// source text and the options.
struct Rendering<'a> {
    name: &'a str,
    input: Option<&'a Kernel>,
    target: &'a Target,
    src: &'a str,
    args: &'a SyncArgs,
}

/// The `//` comment lines printed after a kernel: `--explain`'s, then `--stats`'.
fn notes(cx: &Rendering<'_>, s: &Synchronized) -> String {
    let mut text = String::new();
    if let (true, Some(input), Some(k)) = (cx.args.explain, cx.input, &s.with_waits) {
        text.push_str(&explain(input, k, cx.target, cx.src, s));
    }
    if cx.args.stats {
        stats_notes(s, &mut text);
    }
    text
}

/// `--stats`: hazards, barriers written and executed, the lower bound, handshakes, the split
/// lowering.
fn stats_notes(s: &Synchronized, text: &mut String) {
    let st = &s.placement.stats;
    text.push_str(&format!(
            "// stats: hazards={} covered_by_existing={} barriers_written={} warp_syncs_written={} existing_barriers={} barriers_executed={} inserted_executed={} lower_bound={} waits_written={} inserted_syncs={} conservative={} fences_written={}\n",
            st.hazards, st.covered_by_existing, st.barriers_written, st.warp_syncs_written, st.existing_barriers, st.barriers_executed, st.inserted_executed, st.lower_bound, s.waits.edits.len(), s.inserted().len(), st.conservative, s.fences.len()
        ));
    for h in &s.handshakes {
        text.push_str(&format!(
            "// handshake: mode={} slots={} written={} executed_per_role_thread={}\n",
            h.mode.name(),
            h.slots,
            h.written,
            h.executed.map_or("unknown".to_string(), |e| e.to_string())
        ));
    }
    if let Some(sp) = &s.split {
        // The baseline the mean is compared with (docs/split-barriers.md): a signal
        // placed immediately before its wait has no ops between them, slack 0 by
        // definition, so it is printed as the constant it is, not measured.
        let adjacent = ADJACENT_SIGNAL_SLACK;
        text.push_str(&format!(
                "// split: pairs={} phases={} absorbed_barriers={} dscnt_dropped={} mean_slack={:.2} (signal placed just before its wait: {adjacent:.2}) slack={:?} named_dscnt={}\n",
                sp.pairs,
                sp.phases.map_or_else(
                    || sp.phases_formula.clone().unwrap_or_else(|| "unknown".into()),
                    |p| p.to_string()
                ),
                sp.absorbed,
                sp.dscnt_dropped,
                sp.mean_slack(),
                sp.slack,
                sp.named_dscnt
            ));
    }
}

/// The `--explain` comments: each inserted wait and why, each inserted barrier and the hazards
/// it removes, and the hazards the input's own syncs already remove. Ops and points are named as
/// the source reads (`emit::explain::Namer`): "(line N)" is a line of the input file, an op a
/// pass inserted is named by its line in the printed kernel ("(inserted, output line N)"). A
/// hazard that several syncs remove is written out under the first of them only.
/// `k` is the kernel placement ran on.
fn explain(input: &Kernel, k: &Kernel, target: &Target, src: &str, s: &Synchronized) -> String {
    let mut text = String::from(
        "// explain: (line N) is line N of the input file; (output line N) is line N of the kernel printed above\n",
    );
    let in_names = Namer::new(input, src);
    for (i, e) in s.waits.edits.iter().enumerate() {
        let at = in_names.point(e.at.anchor);
        let what = smemsync::emit::text::print_op_line(input, &e.op);
        text.push_str(&format!("// wait #{i}: {what} {at}\n"));
        for line in e.reason.text().lines() {
            text.push_str(&format!("//   {line}\n"));
        }
    }
    let p = &s.placement;
    let names = Namer::new(k, src).inserted(s.input_ops, &s.kernel);
    let mut fp = Footprints::new(k, target.warp);
    let mut hz = p.hazards.clone();
    smemsync::analysis::hazards::fill_witnesses(&mut fp, &mut hz);
    let mut listed_under: HashMap<usize, usize> = HashMap::new();
    for (i, e) in p.plan.edits.iter().enumerate() {
        let what = sync_op_name(&e.op);
        let n = p.removes[i].len();
        let at = names.point(e.at.anchor);
        text.push_str(&format!(
            "// sync #{i}: {what} {at} removes {n} hazard(s)\n"
        ));
        let mut earlier: std::collections::BTreeMap<usize, usize> = Default::default();
        for &h in &p.removes[i] {
            if let Some(&j) = listed_under.get(&h) {
                *earlier.entry(j).or_default() += 1;
                continue;
            }
            listed_under.insert(h, i);
            let line = explain_hazard(k, &fp, &names, &hz[h]);
            text.push_str(&format!("//   {line}\n"));
        }
        for (j, m) in earlier {
            text.push_str(&format!("//   and {m} hazard(s) listed under sync #{j}\n"));
        }
    }
    let fenced = Namer::new(&s.kernel, src).inserted(s.input_ops, &s.kernel);
    for (i, e) in s.fences.edits.iter().enumerate() {
        // Fences are anchored in the kernel with barriers, whose op ids the output keeps.
        let at = fenced.point(e.at.anchor);
        text.push_str(&format!("// fence #{i}: fence_proxy_async {at}\n"));
        if let smemsync::ir::edit::EditReason::Other(why) = &e.reason {
            text.push_str(&format!("//   {why}\n"));
        }
    }
    if !p.existing.is_empty() {
        let n = p.existing.len();
        text.push_str(&format!("// existing syncs remove {n} hazard(s)\n"));
        for &h in &p.existing {
            let line = explain_hazard(k, &fp, &names, &hz[h]);
            text.push_str(&format!("//   {line}\n"));
        }
    }
    text
}

/// One kernel of `sync --format json`: its name, target and text; with `--explain`, the
/// inserted waits, the inserted syncs with the hazards each removes and the hazards the
/// input's syncs remove; with `--stats`, the statistics (docs/diagnostics.md).
fn kernel_json(cx: &Rendering<'_>, kernel: &Kernel, s: &Synchronized) -> Json {
    let mut fields = vec![
        ("name", Json::str(cx.name)),
        ("target", Json::str(cx.target.name)),
        (
            "text",
            Json::str(smemsync::emit::text::print_kernel(kernel)),
        ),
    ];
    if let (true, Some(input), Some(k)) = (cx.args.explain, cx.input, &s.with_waits) {
        fields.extend(explain_json(input, k, cx.target, cx.src, s));
    }
    if cx.args.stats {
        fields.push(("stats", stats_json(s)));
    }
    Json::Object(fields)
}

/// The `--explain` facts as JSON fields: `waits`, `syncs` and `existing` (`k`: the kernel
/// placement ran on).
fn explain_json(
    input: &Kernel,
    k: &Kernel,
    target: &Target,
    src: &str,
    s: &Synchronized,
) -> Vec<(&'static str, Json)> {
    let in_names = Namer::new(input, src);
    let waits = s.waits.edits.iter().enumerate().map(|(i, e)| {
        let at = in_names.point(e.at.anchor);
        Json::object([
            ("index", Json::uint(i)),
            (
                "op",
                Json::str(smemsync::emit::text::print_op_line(input, &e.op)),
            ),
            ("at", Json::str(at)),
            (
                "why",
                Json::Array(e.reason.text().lines().map(Json::from).collect()),
            ),
        ])
    });
    let p = &s.placement;
    let names = Namer::new(k, src).inserted(s.input_ops, &s.kernel);
    let mut fp = Footprints::new(k, target.warp);
    let mut hz = p.hazards.clone();
    smemsync::analysis::hazards::fill_witnesses(&mut fp, &mut hz);
    let hazards = |ids: &[usize]| {
        let v = ids.iter().map(|&h| hazard_json(k, &fp, &names, &hz[h]));
        Json::Array(v.collect())
    };
    let syncs = p.plan.edits.iter().enumerate().map(|(i, e)| {
        Json::object([
            ("index", Json::uint(i)),
            ("op", Json::str(sync_op_name(&e.op))),
            ("at", Json::str(names.point(e.at.anchor))),
            ("removes", hazards(&p.removes[i])),
        ])
    });
    vec![
        ("waits", Json::Array(waits.collect())),
        ("syncs", Json::Array(syncs.collect())),
        ("existing", hazards(&p.existing)),
    ]
}

/// One hazard: its kind, buffer, the two ops, the loop that carries it (null within an
/// iteration) and the one-line explanation `--explain` prints.
fn hazard_json(k: &Kernel, fp: &Footprints, names: &Namer, h: &Hazard) -> Json {
    let carried = match h.carry {
        Carry::Forward => Json::Null,
        Carry::Carried {
            loop_op,
            min_distance,
            ..
        } => Json::object([
            ("loop", names.op_json(loop_op)),
            ("distance", Json::Int(i64::from(min_distance))),
        ]),
    };
    Json::object([
        ("kind", Json::str(h.kind.name())),
        ("buffer", Json::str(buffer_name(k, h))),
        ("from", names.op_json(h.src.op)),
        ("to", names.op_json(h.dst.op)),
        ("carried_by", carried),
        ("within_warp", Json::Bool(h.intra_warp)),
        ("text", Json::str(explain_hazard(k, fp, names, h))),
    ])
}

/// The `--stats` numbers as a JSON object (`split` is null on targets without split barriers).
fn stats_json(s: &Synchronized) -> Json {
    let st = &s.placement.stats;
    let n = |x: usize| Json::uint(x);
    let big = |x: u64| Json::Int(i64::try_from(x).unwrap_or(i64::MAX));
    let split = s.split.as_ref().map_or(Json::Null, |sp| {
        Json::object([
            ("pairs", n(sp.pairs)),
            ("phases", sp.phases.map_or(Json::Null, big)),
            (
                "phases_formula",
                sp.phases_formula.clone().map_or(Json::Null, Json::Str),
            ),
            ("absorbed_barriers", n(sp.absorbed)),
            ("dscnt_dropped", n(sp.dscnt_dropped)),
            ("named_dscnt", n(sp.named_dscnt)),
            ("mean_slack", Json::Float(sp.mean_slack())),
            (
                "slack",
                Json::Array(sp.slack.iter().map(|&x| n(x)).collect()),
            ),
        ])
    });
    Json::object([
        ("hazards", n(st.hazards)),
        ("covered_by_existing", n(st.covered_by_existing)),
        ("barriers_written", n(st.barriers_written)),
        ("warp_syncs_written", n(st.warp_syncs_written)),
        ("existing_barriers", n(st.existing_barriers)),
        ("barriers_executed", big(st.barriers_executed)),
        ("inserted_executed", big(st.inserted_executed)),
        ("lower_bound", big(st.lower_bound)),
        ("waits_written", n(s.waits.edits.len())),
        ("inserted_syncs", n(s.inserted().len())),
        ("conservative", n(st.conservative)),
        ("fences_written", n(s.fences.len())),
        ("split", split),
    ])
}
