//! `smemsync emit --format text|mlir --target T FILE`: parse, verify, and write every kernel
//! of the file in the chosen output format. A `.mlir` file is imported first (docs/mlir.md).

use super::{EXIT_OK, EXIT_USER, load, read_input, report};

/// Output formats of `emit`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The canonical kernel text (docs/ir.md).
    Text,
    /// A `gpu.module` in upstream MLIR dialects (docs/mlir.md).
    Mlir,
}

#[derive(clap::Args, Debug)]
pub struct EmitArgs {
    /// Kernel file (`-` for standard input).
    pub file: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Target GPU (gfx942, gfx950, gfx1200, gfx1201, gfx1250, sm_80, sm_90).
    #[arg(long)]
    pub target: Option<String>,
    /// Input format; by default MLIR for a `.mlir` file and kernel text otherwise.
    #[arg(long, value_enum)]
    pub from: Option<Format>,
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
    };
    print!("{text}");
    EXIT_OK
}
