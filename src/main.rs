//! The `smemsync` command-line tool: a thin shell over the library.
//!
//! Process start and exit are a fixed cost of every run (about a third of the instructions of
//! a small example's `sync`), so `main` keeps them small: the command line is parsed against
//! the one subcommand it names (`parse_fast`; the whole command tree only for help, errors and
//! unknown names), and the process ends after flushing stdout without dropping what the
//! command built (docs/performance.md, section "process").

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
    run()
}

/// Parses the command line and runs the command; never returns (the process exits with the
/// command's code, without dropping what the command built).
fn run() -> ! {
    let command = match parse_fast() {
        Some(c) => c,
        None => match Cli::try_parse() {
            Ok(c) => c.command,
            Err(e) => {
                let code = if e.use_stderr() {
                    cli::EXIT_USER
                } else {
                    cli::EXIT_OK
                };
                let _ = e.print();
                exit_now(code);
            }
        },
    };
    // The worker exits the process itself: no thread teardown (the allocator's per-thread
    // collection) and no join.
    exit_now(guarded(move || exit_now(dispatch(&command))))
}

/// Ends the process with `code` after flushing stdout, without dropping what is alive and,
/// on Linux with glibc, without the C library's exit handlers (the allocator's and the
/// loader's clean-up: about 60 000 instructions, freeing memory the kernel takes back
/// anyway). Files a command writes are flushed by the command before it returns.
fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    #[cfg(all(target_os = "linux", target_env = "gnu", not(test)))]
    {
        unsafe extern "C" {
            fn _exit(status: std::ffi::c_int) -> !;
        }
        // SAFETY: `_exit` ends the process; stdout is flushed and stderr is unbuffered.
        unsafe { _exit(code) }
    }
    #[allow(unreachable_code)]
    std::process::exit(code)
}

/// The command line parsed against the subcommand its first argument names, built alone;
/// `None` when there is no such subcommand or that parse fails (help, version, a usage
/// error), and the caller parses again against the whole tree, which gives the same result
/// on success and the tool's usual messages otherwise. Exact: the arguments of a subcommand
/// do not depend on its siblings (no global arguments), so a command line accepted here is
/// accepted by the whole tree with the same values.
fn parse_fast() -> Option<Command> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    parse_fast_from(&args)
}

/// [`parse_fast`] of the given command line (the program name first).
fn parse_fast_from(args: &[std::ffi::OsString]) -> Option<Command> {
    use clap::{Args, FromArgMatches};
    let name = args.get(1)?.to_str()?;
    macro_rules! one {
        ($($name:literal => $variant:ident($ty:ty)),* $(,)?) => {
            match name {
                $($name => {
                    let sub = <$ty>::augment_args(clap::Command::new($name));
                    let matches = clap::Command::new("smemsync")
                        .subcommand(sub)
                        .subcommand_required(true)
                        .try_get_matches_from(args)
                        .ok()?;
                    let (_, sub) = matches.subcommand()?;
                    Command::$variant(<$ty>::from_arg_matches(sub).ok()?)
                })*
                _ => return None,
            }
        };
    }
    Some(one! {
        "fmt" => Fmt(cli::fmt::FmtArgs),
        "import" => Import(cli::import::ImportArgs),
        "sync" => Sync(cli::sync::SyncArgs),
        "explain" => Explain(cli::explain::ExplainArgs),
        "bench" => Bench(cli::bench::BenchArgs),
        "waits" => Waits(cli::waits::WaitsArgs),
        "plan-smem" => PlanSmem(cli::plan_smem::PlanSmemArgs),
        "pipeline" => Pipeline(cli::pipeline::PipelineArgs),
        "check" => Check(cli::check::CheckArgs),
        "run" => Run(cli::run::RunArgs),
        "emit" => Emit(cli::emit::EmitArgs),
    })
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

    /// The one-subcommand parse accepts exactly the lines the whole tree accepts, with the
    /// same values; on every other line it declines (and the whole tree reports).
    #[test]
    fn the_fast_parse_agrees_with_the_whole_tree() {
        let lines = [
            "sync --target gfx942 k.kir",
            "sync k.kir --target sm_80 --explain --stats",
            "sync --bounds n=4,m=2 --bounds k=1 --strategy naive --without 3 k.kir",
            "sync --plan-smem --no-warp-sync --annotate --format json k.kir",
            "sync --message-format json -",
            "sync --strategy bogus k.kir",
            "sync --help",
            "sync -h",
            "sync --version",
            "sync",
            "sync a.kir b.kir",
            "sync -- --target",
            "fmt k.kir",
            "fmt --format json k.kir",
            "import t.ttgir",
            "explain --target gfx942 --svg k.kir",
            "bench",
            "bench --real --target sm_80",
            "bench --process 1000",
            "waits --target gfx942 --explain k.kir",
            "plan-smem --objective bytes k.kir",
            "plan-smem --max-bytes 512 k.kir",
            "pipeline --stages 3 k.kir",
            "check k.kir",
            "check --bounds n=3 k.kir",
            "run -",
            "emit --format cuda --target sm_90 k.kir",
            "emit --format bogus k.kir",
            "help",
            "help sync",
            "--help",
            "--version",
            "-V",
            "syn k.kir",
            "",
        ];
        for line in lines {
            let args: Vec<std::ffi::OsString> = std::iter::once("smemsync")
                .chain(line.split_whitespace())
                .map(Into::into)
                .collect();
            let whole = Cli::try_parse_from(&args)
                .ok()
                .map(|c| format!("{:?}", c.command));
            let fast = parse_fast_from(&args).map(|c| format!("{c:?}"));
            assert_eq!(fast, whole, "{line}");
        }
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
