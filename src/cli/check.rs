//! `smemsync check FILE`: proves or refutes race freedom of every kernel in a file.
//!
//! Prints `race-free (proved)` or `race-free (checked for block=..., bounds=..., K
//! schedules)` per kernel and exits 0, or prints the witness (or deadlock / execution error)
//! as a diagnostic on stderr and exits 1 (2 for bad input).

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::diag::{DiagKind, Diagnostic};
use smemsync::target::{Limits, Target};

use super::{
    BoundsArgs, EXIT_OK, Input, Loaded, exit_code, fail, limits_of, load_file, report, sync_then,
};

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
    /// Grid to interpret when the kernel declares none: `X[,Y[,Z]]` blocks, each run (without
    /// it such a kernel is interpreted as block 0 only, and the verdict says so). A grid
    /// other than the kernel's declared `grid(...)` is refused (E0152).
    #[arg(long)]
    pub grid: Option<String>,
    #[command(flatten)]
    pub bounds: super::BoundsArgs,
    /// Number of schedules the interpreter explores.
    #[arg(long, default_value_t = 4)]
    pub schedules: u32,
    /// Steps (ops executed, all threads) after which interpretation gives up.
    #[arg(long, default_value_t = 200_000_000)]
    pub max_steps: u64,
    /// Skip the static proof and interpret directly.
    #[arg(long)]
    pub no_proof: bool,
    /// Work budget (thread-ops) of the proof's search for execution errors; past it the
    /// verdict says they were not looked for.
    #[arg(long, default_value_t = smemsync::check::proof_exec::DEFAULT_BUDGET)]
    pub exec_budget: u64,
    /// Also print what the verdict covers (the proof's argument or why it did not apply).
    #[arg(long, short)]
    pub verbose: bool,
    #[command(flatten)]
    pub output: super::FormatArgs,
}

/// Parses `N` or `X,Y[,Z]` and checks it against the launch limits.
pub fn parse_block(s: &str, limits: &Limits) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("--block `{s}`: expected N or X,Y[,Z]"));
    }
    let mut b = [1u32; 3];
    for (i, p) in parts.iter().enumerate() {
        b[i] = p
            .parse()
            .map_err(|_| format!("--block `{s}`: `{p}` is not a positive integer"))?;
    }
    match limits.block_error(b) {
        Some(e) => Err(format!("--block `{s}`: {e} on {}", limits.source)),
        None => Ok(b),
    }
}

/// Parses `X[,Y[,Z]]` blocks per grid: positive integers.
pub fn parse_grid(s: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        return Err(format!("--grid `{s}`: expected X[,Y[,Z]]"));
    }
    let mut g = [1u32; 3];
    for (i, p) in parts.iter().enumerate() {
        g[i] = p
            .parse()
            .ok()
            .filter(|&n: &u32| n > 0)
            .ok_or_else(|| format!("--grid `{s}`: `{p}` is not a positive integer"))?;
    }
    Ok(g)
}

/// Builds interpreter options from the flags `check` and `run` share.
pub fn options(
    target: Option<Target>,
    block: &Option<String>,
    bounds: &BoundsArgs,
) -> Result<CheckOptions, String> {
    let mut o = CheckOptions {
        target,
        ..CheckOptions::default()
    };
    if let Some(b) = block {
        o.block = Some(parse_block(b, &limits_of(o.target.as_ref()))?);
    }
    o.bounds = bounds.parse()?;
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

/// A race found in a kernel: besides the help on what orders the two accesses, the command
/// that places the syncs and re-checks the result, for `target`: the one the check ran for
/// (given, or declared by the kernel: a different one would contradict the declaration).
fn suggest_sync(d: Diagnostic, input: &Input, target: Option<&str>) -> Diagnostic {
    if d.code != "C0001" {
        return d;
    }
    let what = d.help.clone().unwrap_or_default();
    let cmd = sync_then(
        input,
        target,
        &format!("check --target {} -", target.unwrap_or("gfx942")),
    );
    d.with_help(format!(
        "{what}\n`smemsync sync` places the fewest; to check its result: `{cmd}`"
    ))
}

pub fn run(args: &CheckArgs) -> i32 {
    let Loaded {
        input,
        target,
        kernels,
    } = match load_file(&args.file, args.target.as_deref()) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let mut opts = match options(target, &args.block, &args.bounds) {
        Ok(o) => o,
        Err(e) => {
            return fail(&e);
        }
    };
    if let Some(g) = &args.grid {
        match parse_grid(g) {
            Ok(g) => opts.grid = Some(g),
            Err(e) => return fail(&e),
        }
    }
    opts.schedules = args.schedules.max(1);
    opts.max_steps = args.max_steps.max(1);
    opts.try_proof = !args.no_proof;
    opts.exec_budget = args.exec_budget;
    let mut code = EXIT_OK;
    for k in &kernels {
        code = code.max(handshakes(k, &input));
        let r = check_race_free(k, &opts);
        match &r.verdict {
            Verdict::Proved { why, not_shown, .. } => {
                let diags = smemsync::check::not_shown_diagnostics(k, not_shown);
                report(&input, &diags);
                println!("@{}: {}", k.name, with_lines(&r.summary(), &input.text));
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
                    let d = suggest_sync(d, &input, opts.target.as_ref().map(|t| t.name));
                    let c = exit_code(std::slice::from_ref(&d));
                    report(&input, std::slice::from_ref(&d));
                    // Bad input is said once, on stderr; a finding is summarized on stdout.
                    if d.kind != DiagKind::User {
                        println!("@{}: {}", k.name, r.summary());
                    }
                    code = code.max(c);
                }
            }
        }
    }
    code
}

/// The static handshake proof (`check::handshake_proof`): one line per role branch with
/// mbarrier handshakes; a refutation is reported as a finding (exit 1).
fn handshakes(k: &smemsync::Kernel, input: &Input) -> i32 {
    use smemsync::check::handshake_proof::{HandshakeVerdict, prove_handshakes};
    let mut code = EXIT_OK;
    for v in prove_handshakes(k) {
        match v {
            HandshakeVerdict::Proved(why) => println!("@{}: {why}", k.name),
            HandshakeVerdict::NotProved(why) => println!(
                "@{}: handshakes not proved statically: {}",
                k.name,
                with_lines(&why, &input.text)
            ),
            HandshakeVerdict::Refuted(d) => {
                report(input, std::slice::from_ref(&d));
                println!("@{}: {}", k.name, d.message);
                code = code.max(exit_code(std::slice::from_ref(&d)));
            }
        }
    }
    code
}
