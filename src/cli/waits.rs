//! `smemsync waits --target T FILE [--explain]`: inserts the weakest sufficient waits for the
//! kernel's asynchronous copies and prints the result (with `--explain`, each wait is
//! followed by comments saying which copies it completes and why its count is what it is).
//! Exit codes: 0 printed; 1 a finding no wait can fix (reported on stderr); 2 bad input.

use super::{EXIT_OK, exit_code, load_file_for_target, report};
use smemsync::ir::edit::apply;
use smemsync::sync::waits::{explain_waits, plan_waits};

/// A finding no wait can fix (exit code 1, as documented in `smemsync --help`).
#[derive(clap::Args, Debug)]
pub struct WaitsArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Target GPU (gfx942, gfx950, gfx1200, gfx1201, gfx1250, sm_80, sm_90); may be left out
    /// when the input declares its target.
    #[arg(long)]
    pub target: Option<String>,
    /// Annotate each wait with the copies it completes and the reason for its count.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub output: super::FormatArgs,
}

pub fn run(args: &WaitsArgs) -> i32 {
    let (input, target, kernels) =
        match load_file_for_target(&args.file, args.target.as_deref(), None) {
            Ok(l) => l,
            Err(code) => return code,
        };
    let mut texts = Vec::new();
    let mut code = EXIT_OK;
    for k in &kernels {
        let text = if args.explain {
            explain_waits(k, &target)
        } else {
            plan_waits(k, &target).and_then(|p| {
                let out = apply(k, &p.plan).map_err(|d| vec![d])?;
                Ok(smemsync::emit::text::print_kernel(&out))
            })
        };
        match text {
            Ok(t) => texts.push(t),
            Err(d) => {
                report(&input, &d);
                code = code.max(exit_code(&d));
            }
        }
    }
    print!("{}", texts.join("\n"));
    code
}
