//! `smemsync emit --format text|mlir|cuda [--target T] FILE`: write a kernel in another form.
//!
//! `text` prints the canonical text form; `mlir` writes a `gpu.module` per kernel in upstream
//! MLIR dialects for the target (docs/mlir.md); `cuda` writes a compilable `.cu` (kernel plus
//! host harness, see `smemsync::emit::cuda`) for an NVIDIA target. A `.mlir` input (or
//! `--from mlir`) is imported first. Output goes to standard output or to `-o FILE`.

use super::{EXIT_OK, EXIT_USER, exit_code, fail, load, load_for_target, read_input, report};

/// The output formats of `emit`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The canonical text form.
    Text,
    /// MLIR: a `gpu.module` per kernel (gpu, scf, arith, memref, amdgpu, rocdl, nvgpu, nvvm).
    Mlir,
    /// CUDA C++: the kernel and a host harness.
    Cuda,
}

#[derive(clap::Args, Debug)]
pub struct EmitArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Input format (`text` or `mlir`); by default MLIR for a `.mlir` file, text otherwise.
    #[arg(long, value_enum)]
    pub from: Option<Format>,
    /// Target GPU (`sm_80`, `sm_90`, ...); CUDA needs an NVIDIA target. Default: the target
    /// the kernel declares (`sync` writes it), else sm_90.
    #[arg(long)]
    pub target: Option<String>,
    /// The kernel to emit when the file holds several.
    #[arg(long)]
    pub kernel: Option<String>,
    /// Write to this file instead of standard output.
    #[arg(long, short = 'o')]
    pub output: Option<String>,
    /// CUDA: remove every barrier and cp.async wait (a racy lower bound on time).
    #[arg(long)]
    pub strip_syncs: bool,
    /// CUDA: remove the N-th sync op in program order, counting from 0 (a mutation test).
    #[arg(long, value_name = "N")]
    pub drop_sync: Option<usize>,
    /// CUDA: emit only the kernel, without the host harness.
    #[arg(long)]
    pub no_harness: bool,
    /// CUDA: print the number of droppable sync ops instead of the code.
    #[arg(long)]
    pub count_syncs: bool,
    /// How diagnostics are written on stderr: `text`, or `json` (one object a line;
    /// docs/diagnostics.md). Other subcommands call this option `--format`.
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub message_format: super::MessageFormat,
}

pub fn run(args: &EmitArgs) -> i32 {
    let input = match read_input(&args.file) {
        Ok(i) => i,
        Err(e) => {
            return fail(&e);
        }
    };
    let from_mlir = match args.from {
        Some(f) => f == Format::Mlir,
        None => args.file.ends_with(".mlir"),
    };
    let kernels = if from_mlir {
        import_mlir(args, &input)
    } else {
        load_text(args, &input)
    };
    let kernels = match kernels.and_then(|ks| select(args, ks)) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let text = match args.format {
        Format::Text => smemsync::emit::text::print_kernels(&kernels),
        Format::Mlir => match emit_mlir(args, &input, &kernels) {
            Ok(t) => t,
            Err(code) => return code,
        },
        Format::Cuda => match emit_cuda(args, &input, &kernels) {
            Ok(t) => t,
            Err(code) => return code,
        },
    };
    match &args.output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, text) {
                return fail(&format!("cannot write `{path}`: {e}"));
            }
        }
        None => print!("{text}"),
    }
    EXIT_OK
}

/// Reads the text form, verified against the target's limits when the output is for it
/// (MLIR, CUDA: and its collectives, `sync::collective_errors`) and against every target's for
/// text.
fn load_text(args: &EmitArgs, input: &super::Input) -> Result<Vec<smemsync::Kernel>, i32> {
    if args.format == Format::Text {
        return load(input);
    }
    let t = target(args, input)?;
    let kernels = load_for_target(input, Some(&t))?;
    // A collective some threads of its warp or warpgroup skip has no faithful translation
    // (the `.aligned` instructions are undefined there): refuse it as `sync` does.
    let errs: Vec<_> = (kernels.iter())
        .flat_map(|k| smemsync::sync::collective_errors(k, &t))
        .collect();
    if !errs.is_empty() {
        report(input, &errs);
        return Err(exit_code(&errs));
    }
    Ok(kernels)
}

/// The kernel `--kernel` names (all of them without it); naming no kernel of the file is a
/// usage error that lists the known ones.
fn select(args: &EmitArgs, kernels: Vec<smemsync::Kernel>) -> Result<Vec<smemsync::Kernel>, i32> {
    let Some(name) = &args.kernel else {
        return Ok(kernels);
    };
    let name = name.trim_start_matches('@');
    if kernels.iter().any(|k| k.name == name) {
        return Ok(kernels.into_iter().filter(|k| k.name == name).collect());
    }
    let names: Vec<String> = kernels.iter().map(|k| format!("@{}", k.name)).collect();
    Err(fail(&format!(
        "--kernel `{name}`: the file holds no such kernel; it holds {}",
        names.join(", ")
    )))
}

/// `--target`, else the target the input declares, else sm_90.
fn target(args: &EmitArgs, input: &super::Input) -> Result<smemsync::target::Target, i32> {
    let name = super::resolve_target(input, args.target.as_deref())?;
    smemsync::target::Target::from_name(name.as_deref().unwrap_or("sm_90")).map_err(|d| {
        report(input, &[d]);
        EXIT_USER
    })
}

/// Reads MLIR (the subset `emit --format mlir` writes) into kernels.
fn import_mlir(args: &EmitArgs, input: &super::Input) -> Result<Vec<smemsync::Kernel>, i32> {
    let t = target(args, input)?;
    let kernels = smemsync::reader::mlir::import_mlir(&input.text, &t).map_err(|d| {
        report(input, &d);
        EXIT_USER
    })?;
    if args.format == Format::Text {
        return Ok(kernels);
    }
    let errs: Vec<_> = kernels
        .iter()
        .flat_map(|k| smemsync::verify::verify_with(k, &t.limits))
        .collect();
    if !errs.is_empty() {
        report(input, &errs);
        return Err(EXIT_USER);
    }
    Ok(kernels)
}

fn emit_mlir(
    args: &EmitArgs,
    input: &super::Input,
    kernels: &[smemsync::Kernel],
) -> Result<String, i32> {
    let t = target(args, input)?;
    smemsync::emit::mlir::emit_mlir_kernels(kernels, &t).map_err(|d| {
        report(input, &d);
        exit_code(&d)
    })
}

fn emit_cuda(
    args: &EmitArgs,
    input: &super::Input,
    kernels: &[smemsync::Kernel],
) -> Result<String, i32> {
    let target = target(args, input)?;
    let [kernel] = kernels else {
        let names: Vec<String> = kernels.iter().map(|k| format!("@{}", k.name)).collect();
        return Err(fail(&format!(
            "choose a kernel with `--kernel NAME`; the file holds {}",
            names.join(", ")
        )));
    };
    let syncs = smemsync::emit::cuda::sync_ops(kernel).len();
    if args.count_syncs {
        return Ok(format!("{syncs}\n"));
    }
    if let Some(n) = args.drop_sync.filter(|&n| n >= syncs) {
        return Err(fail(&format!(
            "--drop-sync {n}: @{} has {syncs} droppable sync op(s), numbered from 0",
            kernel.name
        )));
    }
    let opts = smemsync::emit::cuda::CudaOptions {
        strip_syncs: args.strip_syncs,
        drop_sync: args.drop_sync,
        harness: !args.no_harness,
    };
    smemsync::emit::cuda::emit_cuda(kernel, &target, &opts).map_err(|diags| {
        report(input, &diags);
        exit_code(&diags)
    })
}
