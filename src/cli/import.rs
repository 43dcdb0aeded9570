//! `smemsync import FILE.ttgir`: read Triton's TTGIR and print the kernel as `.kir`
//! (docs/ttgir.md). Warnings about the import (W11xx) go to stderr, located in the TTGIR; a
//! TTGIR the importer cannot read is exit 2 with located diagnostics.

use super::{EXIT_OK, EXIT_USER, FormatArgs, fail, load, read_input};

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// TTGIR file (`-` for standard input): what Triton prints as `compiled.asm["ttgir"]`.
    pub file: String,
    #[command(flatten)]
    pub output: FormatArgs,
}

pub fn run(args: &ImportArgs) -> i32 {
    let input = match read_input(&args.file) {
        Ok(i) => i,
        Err(e) => return fail(&e),
    };
    if input.ttgir.is_none() {
        return fail(&format!(
            "`{}` is not TTGIR (expected a module with `tt.func` and `ttg.` attributes)",
            args.file
        ));
    }
    // The `.kir` must parse and verify: a failure here is the importer's bug, reported
    // against the `.kir` text.
    if let Err(code) = load(&input) {
        return code.max(EXIT_USER);
    }
    print!("{}", input.text);
    EXIT_OK
}
