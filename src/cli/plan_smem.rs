//! `smemsync plan-smem FILE`: assign shared-memory offsets with reuse; print the planned
//! kernel, and a table of placements on stderr.

use super::{EXIT_OK, read_kernels};

#[derive(clap::Args, Debug)]
pub struct PlanSmemArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
}

pub fn run(args: &PlanSmemArgs) -> i32 {
    let (_, kernels) = match read_kernels(&args.file) {
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
        for p in &plan.placements {
            let live = p
                .live
                .map_or("never".to_string(), |(a, b)| format!("ops {a}..={b}"));
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
