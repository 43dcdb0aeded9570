//! The `smemsync` command line: one module per subcommand, each with its options and `run`.
//!
//! Exit codes: 0 success; 1 a finding (race, deadlock, protocol violation); 2 bad input or
//! usage (the diagnostics say where); 3 an internal error (a pass produced invalid IR).

pub mod bench;
pub mod check;
pub mod emit;
pub mod fmt;
pub mod pipeline;
pub mod plan_smem;
pub mod run;
pub mod sync;
pub mod waits;

use std::io::{IsTerminal, Read};

use smemsync::diag::{Diagnostic, render_all};

pub const EXIT_OK: i32 = 0;
pub const EXIT_FINDING: i32 = 1;
pub const EXIT_USER: i32 = 2;

/// An input file: its display name and text. `-` reads standard input.
pub struct Input {
    pub name: String,
    pub text: String,
}

pub fn read_input(path: &str) -> Result<Input, String> {
    if path == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(Input {
            name: "<stdin>".into(),
            text,
        })
    } else {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
        Ok(Input {
            name: path.into(),
            text,
        })
    }
}

/// Prints diagnostics to stderr (in colour on a terminal).
pub fn report(input: &Input, diags: &[Diagnostic]) {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    eprint!("{}", render_all(diags, &input.name, &input.text, color));
}

/// Parses and verifies every kernel of an input, reporting failures.
pub fn load(input: &Input) -> Result<Vec<smemsync::Kernel>, i32> {
    let module = match smemsync::reader::parse(&input.text) {
        Ok(m) => m,
        Err(d) => {
            report(input, &[d]);
            return Err(EXIT_USER);
        }
    };
    let mut errs = Vec::new();
    for k in &module.kernels {
        errs.extend(smemsync::verify::verify(k));
    }
    if !errs.is_empty() {
        report(input, &errs);
        return Err(EXIT_USER);
    }
    Ok(module.kernels)
}

/// Reads an input (`-` for standard input) and parses and verifies its kernels, reporting
/// any failure; the error is the exit code.
pub fn read_kernels(path: &str) -> Result<(Input, Vec<smemsync::Kernel>), i32> {
    let input = read_input(path).map_err(|e| {
        eprintln!("error: {e}");
        EXIT_USER
    })?;
    let kernels = load(&input)?;
    Ok((input, kernels))
}
