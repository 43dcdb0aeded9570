//! `smemsync run FILE`: executes every kernel of a file on the interpreter.
//!
//! Inputs come from `--seed` (docs/ir.md section 3). With `--out DIR` each global buffer is
//! written to `DIR/<name>.txt` (`DIR/<kernel>/<name>.txt` when the file holds several
//! kernels), one element per line: integers in decimal, floats as Rust `{:e}` of the f32
//! value. Without `--out` a summary (shape, sum, first elements) goes to stdout.

use std::fmt::Write as _;

use smemsync::check::{GlobalMem, Val, run as run_kernel};

use super::check::options;
use smemsync::Diagnostic;

use super::{EXIT_OK, Input, Loaded, exit_code, fail, load_file, report, sync_then};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Seed of the input data (and of the schedule).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub bounds: super::BoundsArgs,
    /// Target GPU (warp width, counters).
    #[arg(long)]
    pub target: Option<String>,
    /// Block size to run instead of the kernel's: `N` or `X,Y[,Z]`.
    #[arg(long)]
    pub block: Option<String>,
    /// Directory to write one file per global buffer into.
    #[arg(long)]
    pub out: Option<String>,
    #[command(flatten)]
    pub output: super::FormatArgs,
}

/// One element per line.
pub fn format_buffer(g: &GlobalMem) -> String {
    let mut s = String::new();
    for v in &g.data {
        let _ = match v {
            Val::F32(f) => writeln!(s, "{f:e}"),
            other => writeln!(s, "{}", other.as_i64()),
        };
    }
    s
}

/// What to change when the interpreter refuses a kernel for a race or for reading shared memory
/// that no thread has written yet: on an unsynchronized kernel that is a missing barrier, and
/// the remedy is to run the synchronized kernel.
fn explain_refusal(d: Diagnostic, input: &Input, target: Option<&str>) -> Diagnostic {
    if d.code != "C0006" && d.code != "C0001" {
        return d;
    }
    let file = if input.name == "<stdin>" {
        "FILE"
    } else {
        &input.name
    };
    d.with_note("the interpreter runs only kernels whose every shared read follows the write it needs; in a kernel without barriers another thread's write may not have happened yet")
        .with_help(format!(
            "run the synchronized kernel: `{}`\n(`smemsync check {file}` names the race)",
            sync_then(input, target, "run -")
        ))
}

pub fn run(args: &RunArgs) -> i32 {
    let Loaded {
        input,
        target,
        kernels,
    } = match load_file(&args.file, args.target.as_deref()) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let opts = match options(target, &args.block, &args.bounds) {
        Ok(o) => o,
        Err(e) => {
            return fail(&e);
        }
    };
    let many = kernels.len() > 1;
    for k in &kernels {
        let out = match run_kernel(k, args.seed, &opts) {
            Ok(o) => o,
            Err(d) => {
                let d = [explain_refusal(
                    d,
                    &input,
                    opts.target.as_ref().map(|t| t.name),
                )];
                report(&input, &d);
                return exit_code(&d);
            }
        };
        match &args.out {
            Some(dir) => {
                let dir = if many {
                    format!("{dir}/{}", k.name)
                } else {
                    dir.clone()
                };
                if let Err(e) = std::fs::create_dir_all(&dir) {
                    return fail(&format!("cannot create `{dir}`: {e}"));
                }
                for g in &out.globals {
                    let path = format!("{dir}/{}.txt", g.name);
                    if let Err(e) = std::fs::write(&path, format_buffer(g)) {
                        return fail(&format!("cannot write `{path}`: {e}"));
                    }
                }
            }
            None => {
                println!("@{}:", k.name);
                for g in &out.globals {
                    let dims: Vec<String> = g.shape.iter().map(|d| d.to_string()).collect();
                    let sum: f64 = g.data.iter().map(|v| v.as_f32() as f64).sum();
                    let first: Vec<String> = g.data.iter().take(8).map(|v| v.to_string()).collect();
                    println!(
                        "  %{}: {}[{}] sum={sum} first=[{}]",
                        g.name,
                        g.elem,
                        dims.join(", "),
                        first.join(", ")
                    );
                }
            }
        }
    }
    EXIT_OK
}
