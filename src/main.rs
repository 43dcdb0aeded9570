//! The `smemsync` command-line tool: a thin shell over the library.

mod cli;

/// mimalloc instead of the system allocator: placement and checking allocate many small,
/// short-lived tables (docs/performance.md, "A global allocator for the tool").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

/// smemsync: automatic, minimal and provably correct GPU shared-memory synchronization.
///
/// Exit codes: 0 success; 1 a finding (race, deadlock, protocol violation);
/// 2 bad input or usage; 3 internal error (a pass produced invalid IR).
#[derive(Parser, Debug)]
#[command(name = "smemsync", version = version(), about, long_about = None)]
#[command(
    after_help = "Example: smemsync sync --target gfx942 --explain examples/reduction-tree.kir\n(each subcommand's --help shows one)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `--version` prints: the version and the targets this build knows.
fn version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let targets = smemsync::target::TARGET_NAMES.join(", ");
        format!("{}\ntargets: {targets}", env!("CARGO_PKG_VERSION"))
    })
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse, verify and print a kernel file in canonical form.
    #[command(after_help = "Example: smemsync fmt examples/transpose.kir")]
    Fmt(cli::fmt::FmtArgs),
    /// Read Triton's TTGIR (`compiled.asm["ttgir"]`) and print the kernel as `.kir`.
    #[command(after_help = "Example: smemsync import examples/triton-store-load.ttgir")]
    Import(cli::import::ImportArgs),
    /// Insert the fewest syncs that remove every shared-memory hazard and print the kernel.
    #[command(
        after_help = "Example: smemsync sync --target gfx942 --explain examples/reduction-tree.kir"
    )]
    Sync(cli::sync::SyncArgs),
    /// Explain why every inserted sync exists: the hazards it removes, the alternatives, and
    /// why other conflicting pairs need none; `--svg`/`--html` draw it as a timeline.
    #[command(after_help = "Example: smemsync explain --target gfx942 examples/reduction-tree.kir")]
    Explain(cli::explain::ExplainArgs),
    /// Time hazard analysis and placement on the examples and on generated kernels.
    #[command(
        after_help = "Example: smemsync bench   # the examples and a generated kernel of 10^3 ops"
    )]
    Bench(cli::bench::BenchArgs),
    /// Insert the weakest sufficient waits for asynchronous copies.
    #[command(
        after_help = "Example: smemsync waits --target gfx942 --explain examples/gemm-gather-to-lds.kir"
    )]
    Waits(cli::waits::WaitsArgs),
    /// Assign shared-memory offsets so that buffers with disjoint lifetimes share bytes,
    /// trading bytes against the barriers executed (`--objective`, `--max-bytes`,
    /// `--max-barriers`).
    #[command(after_help = "Example: smemsync plan-smem examples/layernorm-row.kir")]
    PlanSmem(cli::plan_smem::PlanSmemArgs),
    /// Circular-buffer loops whose body has a `stage "load"` (multi-stage pipelining).
    #[command(
        after_help = "Example: smemsync pipeline --stages 3 examples/pipelined-periodic-stencil.kir"
    )]
    Pipeline(cli::pipeline::PipelineArgs),
    /// Prove or refute race freedom; exit 1 with a witness when a race is found.
    #[command(
        after_help = "Example: smemsync check examples/transpose.kir   # a race: a witness, exit 1"
    )]
    Check(cli::check::CheckArgs),
    /// Execute kernels on the interpreter and print or write every global buffer.
    #[command(
        after_help = "Example: smemsync sync --target gfx942 examples/reduction-tree.kir | smemsync run -"
    )]
    Run(cli::run::RunArgs),
    /// Write a kernel as text, MLIR or CUDA C++.
    #[command(
        after_help = "Example: smemsync emit --format cuda --target sm_90 examples/tma-mbarrier-pipeline.kir"
    )]
    Emit(cli::emit::EmitArgs),
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                cli::EXIT_USER
            } else {
                cli::EXIT_OK
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    std::process::exit(guarded(move || dispatch(&cli.command)));
}

/// Runs a command and returns its exit code, or 3 (internal error) if it panics: the panic
/// message is already on stderr. Analyses recurse along value definitions (an unrolled chain
/// of 10^5 adds is a valid kernel) and over nesting (bounded by the verifier): the command
/// runs on a thread whose stack such inputs cannot exhaust. Only the pages touched are
/// committed.
fn guarded(command: impl FnOnce() -> i32 + Send + 'static) -> i32 {
    let worker = std::thread::Builder::new()
        .name("smemsync".into())
        .stack_size(WORKER_STACK)
        .spawn(command);
    match worker.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        _ => cli::EXIT_INTERNAL,
    }
}

/// Stack of the worker thread: 1 GiB of address space.
const WORKER_STACK: usize = 1 << 30;

/// How the subcommand asked for its diagnostics (`bench` reports none of its own).
fn message_format(command: &Command) -> cli::MessageFormat {
    match command {
        Command::Fmt(a) => a.output.format,
        Command::Import(a) => a.output.format,
        Command::Sync(a) => a.output.format,
        Command::Explain(a) => a.output.format,
        Command::Bench(_) => cli::MessageFormat::Text,
        Command::Waits(a) => a.output.format,
        Command::PlanSmem(a) => a.output.format,
        Command::Pipeline(a) => a.output.format,
        Command::Check(a) => a.output.format,
        Command::Run(a) => a.output.format,
        Command::Emit(a) => a.message_format,
    }
}

fn dispatch(command: &Command) -> i32 {
    cli::set_message_format(message_format(command));
    match command {
        Command::Fmt(a) => cli::fmt::run(a),
        Command::Import(a) => cli::import::run(a),
        Command::Sync(a) => cli::sync::run(a),
        Command::Explain(a) => cli::explain::run(a),
        Command::Bench(a) => cli::bench::run(a),
        Command::Waits(a) => cli::waits::run(a),
        Command::PlanSmem(a) => cli::plan_smem::run(a),
        Command::Pipeline(a) => cli::pipeline::run(a),
        Command::Check(a) => cli::check::run(a),
        Command::Run(a) => cli::run::run(a),
        Command::Emit(a) => cli::emit::run(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_command_exits_3_and_others_keep_their_code() {
        assert_eq!(guarded(|| panic!("a bug")), cli::EXIT_INTERNAL);
        assert_eq!(guarded(|| 1), 1);
        assert_eq!(guarded(|| cli::EXIT_OK), 0);
    }

    #[test]
    fn a_verifier_error_after_a_pass_exits_3() {
        use smemsync::diag::{DiagKind, Diagnostic};
        let bug = Diagnostic::error(DiagKind::Verifier, "V0002", "a pass broke the IR");
        let race = Diagnostic::error(DiagKind::Finding, "C0001", "a race");
        assert_eq!(cli::exit_code(std::slice::from_ref(&race)), 1);
        assert_eq!(cli::exit_code(&[race, bug]), 3);
    }
}
