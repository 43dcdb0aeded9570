//! `smemsync emit --format text|mlir|cuda [--target T] FILE`: parse, verify, and write the
//! kernels of a file in another form.
//!
//! `text` prints the canonical text form; `mlir` a `gpu.module` in upstream MLIR dialects
//! (docs/mlir.md; needs `--target`); `cuda` a compilable `.cu` (kernel plus host harness, see
//! `smemsync::emit::cuda`) for an NVIDIA target (default `sm_90`). A `.mlir` input file is
//! imported first. Output goes to standard output or to `-o FILE`.

use super::{EXIT_OK, EXIT_USER, load, read_input, report};

/// The formats of `emit`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The canonical kernel text (docs/ir.md).
    Text,
    /// A `gpu.module` in upstream MLIR dialects (docs/mlir.md).
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
    /// Target GPU (gfx942, gfx950, gfx1200, gfx1201, gfx1250, sm_80, sm_90); MLIR needs one,
    /// CUDA defaults to sm_90.
    #[arg(long)]
    pub target: Option<String>,
    /// Input format; by default MLIR for a `.mlir` file and kernel text otherwise.
    #[arg(long, value_enum)]
    pub from: Option<Format>,
    /// CUDA: the kernel to emit when the file holds several.
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
}

pub fn run(args: &EmitArgs) -> i32 {
    let input = match read_input(&args.file) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USER;
        }
    };
    let target = match &args.target {
        None => None,
        Some(name) => match smemsync::target::Target::from_name(name) {
            Ok(t) => Some(t),
            Err(d) => {
                report(&input, &[d]);
                return EXIT_USER;
            }
        },
    };
    // MLIR input (a `.mlir` file) is imported; anything else is the kernel text format.
    let from_mlir = match args.from {
        Some(f) => f == Format::Mlir,
        None => args.file.ends_with(".mlir"),
    };
    let kernels = if from_mlir {
        let Some(t) = target else {
            eprintln!("error: reading MLIR needs `--target` (counter waits differ per GPU)");
            return EXIT_USER;
        };
        match smemsync::reader::mlir::import_mlir(&input.text, &t) {
            Ok(k) => k,
            Err(d) => {
                report(&input, &d);
                return EXIT_USER;
            }
        }
    } else {
        match load(&input) {
            Ok(k) => k,
            Err(code) => return code,
        }
    };
    let text = match args.format {
        Format::Text => smemsync::emit::text::print_kernels(&kernels),
        Format::Mlir => {
            let Some(t) = target else {
                eprintln!("error: `--format mlir` needs `--target` (the sync ops differ per GPU)");
                return EXIT_USER;
            };
            match smemsync::emit::mlir::emit_mlir_kernels(&kernels, &t) {
                Ok(s) => s,
                Err(d) => {
                    report(&input, &d);
                    return EXIT_USER;
                }
            }
        }
        Format::Cuda => match emit_cuda(args, target, &input, &kernels) {
            Ok(t) => t,
            Err(code) => return code,
        },
    };
    match &args.output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, text) {
                eprintln!("error: cannot write `{path}`: {e}");
                return EXIT_USER;
            }
        }
        None => print!("{text}"),
    }
    EXIT_OK
}

fn emit_cuda(
    args: &EmitArgs,
    target: Option<smemsync::target::Target>,
    input: &super::Input,
    kernels: &[smemsync::Kernel],
) -> Result<String, i32> {
    let target = match target {
        Some(t) => t,
        None => smemsync::target::Target::from_name("sm_90").map_err(|d| {
            report(input, &[d]);
            EXIT_USER
        })?,
    };
    let kernel = match &args.kernel {
        Some(name) => kernels.iter().find(|k| &k.name == name),
        None if kernels.len() == 1 => kernels.first(),
        None => None,
    };
    let Some(kernel) = kernel else {
        let names: Vec<String> = kernels.iter().map(|k| format!("@{}", k.name)).collect();
        eprintln!(
            "error: choose a kernel with `--kernel NAME`; the file holds {}",
            names.join(", ")
        );
        return Err(EXIT_USER);
    };
    if args.count_syncs {
        return Ok(format!(
            "{}\n",
            smemsync::emit::cuda::sync_ops(kernel).len()
        ));
    }
    let opts = smemsync::emit::cuda::CudaOptions {
        strip_syncs: args.strip_syncs,
        drop_sync: args.drop_sync,
        harness: !args.no_harness,
    };
    smemsync::emit::cuda::emit_cuda(kernel, &target, &opts).map_err(|diags| {
        report(input, &diags);
        EXIT_USER
    })
}
