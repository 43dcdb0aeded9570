//! `smemsync check FILE`: proves or refutes race freedom of every kernel in a file.
//!
//! Prints `race-free (proved)` or `race-free (checked for block=..., bounds=..., K
//! schedules)` per kernel and exits 0, or prints the witness (or deadlock / execution error)
//! as a diagnostic on stderr and exits 1 (2 for bad input).

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::diag::DiagKind;
use smemsync::target::Target;

use super::{EXIT_FINDING, EXIT_OK, EXIT_USER, Input, load, read_input, report};

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Target GPU (warp width, counters); generic model when absent.
    #[arg(long)]
    pub target: Option<String>,
    /// Block size to check instead of the kernel's: `N` or `X,Y[,Z]`.
    #[arg(long)]
    pub block: Option<String>,
    /// Values of scalar parameters for interpretation: `n=64,m=3`.
    #[arg(long)]
    pub bounds: Option<String>,
    /// Number of schedules the interpreter explores.
    #[arg(long, default_value_t = 4)]
    pub schedules: u32,
    /// Skip the static proof and interpret directly.
    #[arg(long)]
    pub no_proof: bool,
    /// Also print what the verdict covers (the proof's argument or why it did not apply).
    #[arg(long, short)]
    pub verbose: bool,
}

/// Parses `N` or `X,Y[,Z]`.
pub fn parse_block(s: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("--block `{s}`: expected N or X,Y[,Z]"));
    }
    let mut b = [1u32; 3];
    for (i, p) in parts.iter().enumerate() {
        b[i] = p
            .parse()
            .map_err(|_| format!("--block `{s}`: `{p}` is not a positive integer"))?;
        if b[i] == 0 {
            return Err(format!("--block `{s}`: dimensions must be positive"));
        }
    }
    Ok(b)
}

/// Parses `n=64,m=3`.
pub fn parse_bounds(s: &str) -> Result<Vec<(String, i64)>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let (n, v) = item
            .split_once('=')
            .ok_or_else(|| format!("--bounds `{item}`: expected NAME=VALUE"))?;
        let v: i64 = v
            .trim()
            .parse()
            .map_err(|_| format!("--bounds `{item}`: `{v}` is not an integer"))?;
        out.push((n.trim().trim_start_matches('%').to_string(), v));
    }
    Ok(out)
}

/// Builds check options from the shared flags.
pub fn options(
    target: &Option<String>,
    block: &Option<String>,
    bounds: &Option<String>,
) -> Result<CheckOptions, String> {
    let mut o = CheckOptions::default();
    if let Some(t) = target {
        o.target = Some(Target::from_name(t).map_err(|d| {
            let mut m = d.message;
            for n in d.notes {
                m.push_str("; ");
                m.push_str(&n);
            }
            m
        })?);
    }
    if let Some(b) = block {
        o.block = Some(parse_block(b)?);
    }
    if let Some(b) = bounds {
        o.bounds = parse_bounds(b)?;
    }
    Ok(o)
}

/// Rewrites `at byte N` (how the library names an op without the source) as `at line L`.
fn with_lines(msg: &str, src: &str) -> String {
    let mut out = String::new();
    let mut rest = msg;
    while let Some(i) = rest.find("at byte ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 8..];
        let digits: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
        match digits.parse::<usize>() {
            Ok(b) => {
                let line = smemsync::diag::line_of(src, b).0 + 1;
                out.push_str(&format!("at line {line}"));
            }
            Err(_) => out.push_str("at byte "),
        }
        rest = &after[digits.len()..];
    }
    out.push_str(rest);
    out
}

pub fn run(args: &CheckArgs) -> i32 {
    let input: Input = match read_input(&args.file) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USER;
        }
    };
    let kernels = match load(&input) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let mut opts = match options(&args.target, &args.block, &args.bounds) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USER;
        }
    };
    opts.schedules = args.schedules.max(1);
    opts.try_proof = !args.no_proof;
    let mut code = EXIT_OK;
    for k in &kernels {
        let r = check_race_free(k, &opts);
        match &r.verdict {
            Verdict::Proved { why, .. } => {
                println!("@{}: {}", k.name, r.summary());
                if args.verbose {
                    println!("  proof: {}", with_lines(why, &input.text));
                }
            }
            Verdict::Checked { not_proved, .. } => {
                println!("@{}: {}", k.name, r.summary());
                if args.verbose {
                    println!(
                        "  not proved statically: {}",
                        with_lines(not_proved, &input.text)
                    );
                }
            }
            _ => {
                if let Some(d) = r.to_diagnostic(k) {
                    let c = if d.kind == DiagKind::User {
                        EXIT_USER
                    } else {
                        EXIT_FINDING
                    };
                    report(&input, &[d]);
                    println!("@{}: {}", k.name, r.summary());
                    code = code.max(c);
                }
            }
        }
    }
    code
}
