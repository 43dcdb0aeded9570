//! `smemsync plan-smem FILE`: assign shared-memory offsets with reuse; print the planned
//! kernel, and a table of placements on stderr (each buffer's offset, size and the source lines
//! it is live across).

use super::{EXIT_OK, read_kernels};

#[derive(clap::Args, Debug)]
pub struct PlanSmemArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    #[command(flatten)]
    pub output: super::FormatArgs,
}

pub fn run(args: &PlanSmemArgs) -> i32 {
    let (input, kernels) = match read_kernels(&args.file) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let mut out = Vec::new();
    for k in &kernels {
        let plan = smemsync::transform::smem_plan::plan_shared_memory(k);
        eprintln!(
            "@{}: {} bytes of shared memory (was {})",
            k.name, plan.peak, plan.peak_before
        );
        let ops = k.ops_in_order();
        let line = |i: usize| {
            let span = ops.get(i).map(|&op| k.span(op));
            span.and_then(|s| smemsync::diag::line_number(&input.text, s))
        };
        for p in &plan.placements {
            let live = match p.live.map(|(a, b)| (line(a), line(b))) {
                None => "never".to_string(),
                Some((Some(a), Some(b))) => format!("lines {a}..={b}"),
                Some(_) => "in ops the input does not show".to_string(),
            };
            eprintln!(
                "  @{:<12} offset {:>6}  bytes {:>6}  live {live}",
                k.buffers[p.buffer].name, p.offset, p.bytes
            );
        }
        out.push(plan.kernel);
    }
    print!("{}", smemsync::emit::text::print_kernels(&out));
    EXIT_OK
}
