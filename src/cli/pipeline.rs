//! `smemsync pipeline --stages S FILE`: circular-buffer every loop with a `stage "load"`.

use super::{EXIT_OK, exit_code, read_kernels, report};

#[derive(clap::Args, Debug)]
pub struct PipelineArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Number of buffer stages (prefetch distance is stages - 1).
    #[arg(long, default_value_t = 2)]
    pub stages: u32,
    #[command(flatten)]
    pub output: super::FormatArgs,
}

pub fn run(args: &PipelineArgs) -> i32 {
    let (input, kernels) = match read_kernels(&args.file) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let mut out = Vec::new();
    for k in &kernels {
        match smemsync::transform::pipeline::circular_buffer(k, args.stages) {
            Ok((pk, _)) => {
                // More stages multiply buffer sizes: the result must still fit the limits.
                let errs = smemsync::verify::verify(&pk);
                if !errs.is_empty() {
                    report(&input, &errs);
                    return exit_code(&errs);
                }
                out.push(pk)
            }
            Err(diags) => {
                report(&input, &diags);
                return exit_code(&diags);
            }
        }
    }
    print!("{}", smemsync::emit::text::print_kernels(&out));
    EXIT_OK
}
