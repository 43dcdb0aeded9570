//! `smemsync explain --target T FILE [--svg OUT.svg] [--html OUT.html]`: why every inserted
//! sync exists (`smemsync::explain`).
//!
//! Stdout: the report as text (the synchronized kernel with output line numbers, each
//! inserted wait and sync with the hazards it removes and why it is where it is, and the
//! pairs that needed no sync), or with `--format json` one document (docs/diagnostics.md).
//! `--svg` writes the timeline picture of the first kernel (E1200 when the file has several
//! kernels and `--kernel` names none, E1201 when `--kernel` names none of them), `--html`
//! the report of every kernel as one self-contained page; E1202 when a file cannot be
//! written. Findings no sync can fix go to stderr with exit code 1, as in `sync`.

use std::collections::HashMap;

use smemsync::Diagnostic;
use smemsync::diag::json::Json;
use smemsync::explain::{Report, explain, html, render, svg};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;

use super::{
    BoundsArgs, EXIT_OK, EXIT_USER, MessageFormat, exit_code, fail, load_file_for_target, report,
};

#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Target GPU (gfx942, gfx950, gfx1200, gfx1201, gfx1250, sm_80, sm_90); may be left out
    /// when the input declares its target.
    #[arg(long)]
    pub target: Option<String>,
    /// Write the timeline picture (SVG) of the kernel here.
    #[arg(long, value_name = "OUT.svg")]
    pub svg: Option<String>,
    /// Write the report with the picture as one self-contained HTML page here.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<String>,
    /// The kernel `--svg` draws (by name, without `@`), when the file has several.
    #[arg(long)]
    pub kernel: Option<String>,
    #[command(flatten)]
    pub bounds: BoundsArgs,
    /// Never use warp-level syncs (always block barriers).
    #[arg(long)]
    pub no_warp_sync: bool,
    #[command(flatten)]
    pub output: super::FormatArgs,
}

pub fn run(args: &ExplainArgs) -> i32 {
    let bounds: HashMap<String, i64> = match args.bounds.parse() {
        Ok(b) => b.into_iter().collect(),
        Err(e) => return fail(&e),
    };
    let (input, target, kernels) =
        match load_file_for_target(&args.file, args.target.as_deref(), None) {
            Ok(l) => l,
            Err(code) => return code,
        };
    let opts = PlaceOptions {
        bounds: bounds.clone(),
        no_warp_sync: args.no_warp_sync,
        ..Default::default()
    };
    let mut reports: Vec<Report> = Vec::new();
    let mut findings: Vec<Diagnostic> = Vec::new();
    for k in &kernels {
        match synchronize(k, &target, &opts) {
            Ok(s) => {
                report(&input, &s.placement.warnings);
                reports.push(explain(k, &input.text, &target, &s, &bounds));
            }
            Err(d) => findings.extend(d),
        }
    }
    if !findings.is_empty() {
        report(&input, &findings);
        return exit_code(&findings);
    }
    if let Err(d) = write_files(args, &reports, &input.name) {
        report(&input, &[d]);
        return EXIT_USER;
    }
    if args.output.format == MessageFormat::Json {
        let ks = reports.iter().map(render::json).collect();
        println!("{}", Json::object([("kernels", Json::Array(ks))]));
    } else {
        let texts: Vec<String> = reports
            .iter()
            .map(|r| render::text(r, &input.name))
            .collect();
        print!("{}", texts.join("\n"));
    }
    EXIT_OK
}

/// Writes `--svg` and `--html`.
fn write_files(args: &ExplainArgs, reports: &[Report], file: &str) -> Result<(), Diagnostic> {
    if let Some(path) = &args.svg {
        let r = pick(reports, args.kernel.as_deref())?;
        write(path, &svg::svg(r))?;
    }
    if let Some(path) = &args.html {
        let chosen: Vec<Report> = match &args.kernel {
            Some(_) => vec![pick(reports, args.kernel.as_deref())?.clone()],
            None => reports.to_vec(),
        };
        write(path, &html::html(&chosen, file))?;
    }
    Ok(())
}

fn pick<'r>(reports: &'r [Report], name: Option<&str>) -> Result<&'r Report, Diagnostic> {
    match name {
        Some(n) => {
            let n = n.trim_start_matches('@');
            reports.iter().find(|r| r.kernel == n).ok_or_else(|| {
                let names: Vec<String> = reports.iter().map(|r| format!("@{}", r.kernel)).collect();
                Diagnostic::user(
                    "E1201",
                    format!(
                        "--kernel {n}: the file has no such kernel (it has {})",
                        names.join(", ")
                    ),
                )
            })
        }
        None if reports.len() > 1 => {
            let names: Vec<String> = reports.iter().map(|r| format!("@{}", r.kernel)).collect();
            Err(Diagnostic::user(
                "E1200",
                format!(
                    "--svg draws one kernel and the file has {}: name one with --kernel",
                    names.join(", ")
                ),
            ))
        }
        None => reports
            .first()
            .ok_or_else(|| Diagnostic::user("E1201", "the file has no kernel to draw")),
    }
}

fn write(path: &str, text: &str) -> Result<(), Diagnostic> {
    std::fs::write(path, text)
        .map_err(|e| Diagnostic::user("E1202", format!("cannot write `{path}`: {e}")))
}
