//! `smemsync pipeline [--mode cp-async|tma|warp-specialized] --stages S [--prefetch P] FILE`: circular-buffer every
//! loop with a `stage "load"` (docs/transforms.md).

use smemsync::diag::Diagnostic;
use smemsync::ir::Kernel;
use smemsync::transform::pipeline::{PipelinedLoop, circular_buffer};
use smemsync::transform::pipeline_cp_async::cp_async_pipeline;
use smemsync::transform::pipeline_tma::tma_pipeline;
use smemsync::transform::pipeline_ws::warp_specialized;

use super::{EXIT_OK, exit_code, read_kernels, report};

/// The pipeline a load stage becomes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Per-thread `cp_async` copies, one commit group per stage.
    CpAsync,
    /// A `tma_load` per tile copy and slot, issued by one elected thread.
    Tma,
    /// A producer warp issuing the TMA loads, the block's threads consuming.
    WarpSpecialized,
}

#[derive(clap::Args, Debug)]
pub struct PipelineArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Number of buffer stages (prefetch distance is stages - 1 unless --prefetch).
    #[arg(long, default_value_t = 2)]
    pub stages: u32,
    /// The pipeline to build; without it the stage is kept as written and prefetched.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Prefetch distance, 1 to stages - 1 (with --mode).
    #[arg(long)]
    pub prefetch: Option<u32>,
    #[command(flatten)]
    pub output: super::FormatArgs,
}

type Built = Result<(Kernel, Vec<PipelinedLoop>), Vec<Diagnostic>>;

fn build(k: &Kernel, args: &PipelineArgs) -> Built {
    match args.mode {
        None if args.prefetch.is_some() => Err(vec![Diagnostic::user(
            "E1343",
            "--prefetch needs --mode (without it the prefetch distance is stages - 1)",
        )]),
        None => circular_buffer(k, args.stages),
        Some(Mode::CpAsync) => cp_async_pipeline(k, args.stages, args.prefetch),
        Some(Mode::Tma) => tma_pipeline(k, args.stages, args.prefetch),
        Some(Mode::WarpSpecialized) => warp_specialized(k, args.stages, args.prefetch),
    }
}

pub fn run(args: &PipelineArgs) -> i32 {
    let (input, kernels) = match read_kernels(&args.file) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let mut out = Vec::new();
    for k in &kernels {
        match build(k, args) {
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
