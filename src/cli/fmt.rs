//! `smemsync fmt FILE`: parse, verify, and print the canonical form.

use super::{EXIT_OK, FormatArgs, fail, read_kernels};

#[derive(clap::Args, Debug)]
pub struct FmtArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Write the canonical form back to the file instead of standard output.
    #[arg(long, short = 'i')]
    pub in_place: bool,
    #[command(flatten)]
    pub output: FormatArgs,
}

pub fn run(args: &FmtArgs) -> i32 {
    let (input, kernels) = match read_kernels(&args.file) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if args.in_place && input.ttgir.is_some() {
        return fail("--in-place would overwrite the TTGIR with `.kir`: use `smemsync import`");
    }
    let text = smemsync::emit::text::print_kernels(&kernels);
    if args.in_place && args.file != "-" {
        if let Err(e) = std::fs::write(&args.file, text) {
            return fail(&format!("cannot write `{}`: {e}", args.file));
        }
    } else {
        print!("{text}");
    }
    EXIT_OK
}
