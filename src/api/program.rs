//! Reading, verifying and writing kernels: [`Program`], [`Target`], [`read`], [`read_mlir`],
//! [`verify`] and [`emit`].
//!
//! Invariant: a [`Program`] holds kernels that passed the structural verifier (so no later
//! stage panics on them) and the source text their spans point into. Complexity: reading and
//! verifying are linear in the source; emitting is linear in the kernels.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::error::{Error, Location};
use crate::diag::{Diagnostic, render_all};
use crate::ir::Kernel;
use crate::target::Limits;

/// The kernels of one source text, verified, with the text their diagnostics point into.
#[derive(Clone, Debug)]
pub struct Program {
    pub(crate) kernels: Vec<Kernel>,
    pub(crate) source: Arc<str>,
}

impl Program {
    /// The kernels' names (without `@`), in source order.
    pub fn kernel_names(&self) -> Vec<&str> {
        self.kernels.iter().map(|k| k.name.as_str()).collect()
    }

    /// Number of kernels.
    pub fn len(&self) -> usize {
        self.kernels.len()
    }

    /// Whether the source held no kernel.
    pub fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }

    /// The program with only the kernel named `name` (with or without `@`); naming no kernel
    /// of the program is bad input (E0172) that lists the kernels it holds.
    pub fn select(&self, name: &str) -> Result<Program, Error> {
        let name = name.trim_start_matches('@');
        match self.kernels.iter().find(|k| k.name == name) {
            Some(k) => Ok(Program {
                kernels: vec![k.clone()],
                source: self.source.clone(),
            }),
            None => {
                let names: Vec<String> = self
                    .kernels
                    .iter()
                    .map(|k| format!("@{}", k.name))
                    .collect();
                let d = Diagnostic::user("E0172", format!("no kernel @{name} in this source"))
                    .with_note(format!("it holds {}", names.join(", ")));
                Err(Error::new(vec![d], self.source.clone()))
            }
        }
    }

    /// The target the kernels declare (`target "…"` in a kernel header, which
    /// [`synchronize`](crate::synchronize) writes), if any.
    pub fn declared_target(&self) -> Option<&str> {
        self.kernels.iter().find_map(|k| k.target.as_deref())
    }

    /// The source text the kernels were read from (for a synchronized program: the text of
    /// the input, where its kernels' spans still point).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Where a diagnostic about this program points in [`Program::source`].
    pub fn locate(&self, d: &Diagnostic) -> Option<Location> {
        Location::of_diagnostic(&self.source, d)
    }

    /// Diagnostics about this program rendered against its source, as the CLI prints them.
    pub fn render(&self, diags: &[Diagnostic], file_name: &str, color: bool) -> String {
        render_all(diags, file_name, &self.source, color)
    }

    /// The kernels in the canonical text form (what `smemsync fmt` prints).
    pub fn to_text(&self) -> String {
        crate::emit::text::print_kernels(&self.kernels)
    }

    /// The target named by `given`, else the declared one; a contradiction is bad input
    /// (E0171), as are kernels declaring different targets.
    pub(crate) fn resolve_target(&self, given: Option<&Target>) -> Result<Option<Target>, Error> {
        let mut declared: Option<&str> = None;
        for k in &self.kernels {
            let Some(t) = k.target.as_deref() else {
                continue;
            };
            let clash = match (given, declared) {
                (Some(g), _) if g.name() != t => Some(format!(
                    "target {} contradicts the target @{} was synchronized for ({t})",
                    g.name(),
                    k.name
                )),
                (None, Some(d)) if d != t => Some(format!(
                    "the kernels declare different targets ({d} and {t}); give a target"
                )),
                _ => None,
            };
            if let Some(msg) = clash {
                let d = Diagnostic::user("E0171", msg)
                    .with_label(k.target_span, "declared here")
                    .with_help("give no target to use the declared one, or synchronize again");
                return Err(Error::new(vec![d], self.source.clone()));
            }
            declared = Some(t);
        }
        match (given, declared) {
            (Some(g), _) => Ok(Some(g.clone())),
            (None, Some(d)) => Target::new(d).map(Some),
            (None, None) => Ok(None),
        }
    }
}

/// The canonical text of the kernels ([`Program::to_text`]).
impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// A GPU target: which sync ops exist, their cost, the warp width and the launch limits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target(pub(crate) crate::target::Target);

impl Target {
    /// The target of a name: `gfx942`, `gfx950`, `gfx1200`, `gfx1201`, `gfx1250`, `sm_80` or
    /// `sm_90` ([`Target::names`]). An unknown name is an error that lists the known ones.
    pub fn new(name: &str) -> Result<Target, Error> {
        crate::target::Target::from_name(name)
            .map(Target)
            .map_err(|d| Error::new(vec![d], Arc::from("")))
    }

    /// Every target name this build knows.
    pub fn names() -> &'static [&'static str] {
        &crate::target::TARGET_NAMES
    }

    /// The target's name.
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// Threads per warp (wavefront): 64 on gfx9, 32 elsewhere.
    pub fn warp_size(&self) -> u32 {
        self.0.warp
    }
}

impl FromStr for Target {
    type Err = Error;
    fn from_str(name: &str) -> Result<Target, Error> {
        Target::new(name)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads every kernel of a text in smemsync's own format (`.kir`, docs/ir.md) and verifies
/// its structure against the limits every target shares. Errors are bad input.
pub fn read(text: &str) -> Result<Program, Error> {
    let source: Arc<str> = Arc::from(text);
    let module = crate::reader::parse(text).map_err(|d| Error::input(vec![d], source.clone()))?;
    checked(module.kernels, source, &Limits::GENERIC)
}

/// Reads every `gpu.func … kernel` of an MLIR text in the dialect subset smemsync writes
/// (docs/mlir.md). `target` says what AMD counter fields mean and whose limits apply.
pub fn read_mlir(text: &str, target: &Target) -> Result<Program, Error> {
    let source: Arc<str> = Arc::from(text);
    let kernels = crate::reader::mlir::import_mlir(text, &target.0)
        .map_err(|d| Error::input(d, source.clone()))?;
    checked(kernels, source, &target.0.limits)
}

/// Reads Triton's TTGIR (`compiled.asm["ttgir"]`, docs/ttgir.md): the kernels imported as
/// `.kir` (the program's source text is that `.kir`), with the importer's warnings (W11xx:
/// conservative models, allocation assumptions), located in `text`. Malformed TTGIR is an
/// input error located in `text`.
pub fn read_ttgir(text: &str) -> Result<(Program, Vec<Diagnostic>), Error> {
    let imp =
        crate::reader::ttgir::import_ttgir(text).map_err(|d| Error::input(d, Arc::from(text)))?;
    let program = read(&imp.kir)?;
    Ok((program, imp.warnings))
}

/// A program of `kernels` once their names are unique and each passes the verifier.
fn checked(kernels: Vec<Kernel>, source: Arc<str>, limits: &Limits) -> Result<Program, Error> {
    let mut errs = crate::verify::limits::duplicate_names(&kernels);
    for k in &kernels {
        errs.extend(crate::verify::verify_with(k, limits));
    }
    if !errs.is_empty() {
        return Err(Error::input(errs, source));
    }
    Ok(Program { kernels, source })
}

/// Checks that a program fits a target: its launch and shared-memory limits, its ops (no
/// TMA on gfx942, …: E0170) and the target the kernels declare (E0171). [`synchronize`],
/// [`check`], [`run`] and [`emit`] call it themselves.
///
/// [`synchronize`]: crate::synchronize
/// [`check`]: crate::check
/// [`run`]: crate::run
pub fn verify(program: &Program, target: &Target) -> Result<(), Error> {
    program.resolve_target(Some(target))?;
    let mut errs = Vec::new();
    for k in &program.kernels {
        errs.extend(crate::verify::verify_with(k, &target.0.limits));
        errs.extend(crate::verify::target_ops::check(k, &target.0));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(Error::input(errs, program.source.clone()))
    }
}

/// What [`emit`] writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// smemsync's text form (docs/ir.md): what [`read`] reads.
    Text,
    /// MLIR in the gpu, scf, arith, memref, amdgpu/rocdl or nvgpu/nvvm dialects (docs/mlir.md):
    /// what [`read_mlir`] reads.
    Mlir,
    /// A CUDA C++ translation unit with the kernel and a host harness (NVIDIA targets, one
    /// kernel: see [`Program::select`]).
    Cuda,
}

/// Writes a program in a format. MLIR and CUDA are written for `target` (verified first with
/// [`verify`]); the text form does not depend on it.
pub fn emit(program: &Program, format: Format, target: &Target) -> Result<String, Error> {
    if format == Format::Text {
        return Ok(program.to_text());
    }
    verify(program, target)?;
    let source = || program.source.clone();
    match format {
        Format::Text => unreachable!("returned above"),
        Format::Mlir => crate::emit::mlir::emit_mlir_kernels(&program.kernels, &target.0)
            .map_err(|d| Error::new(d, source())),
        Format::Cuda => {
            let [kernel] = program.kernels.as_slice() else {
                let names: Vec<String> = program
                    .kernels
                    .iter()
                    .map(|k| format!("@{}", k.name))
                    .collect();
                let d = Diagnostic::user(
                    "E0710",
                    format!(
                        "CUDA C++ is written for one kernel; this program holds {}",
                        names.join(", ")
                    ),
                )
                .with_help("choose one with Program::select (the CLI: --kernel NAME)");
                return Err(Error::new(vec![d], source()));
            };
            let opts = crate::emit::cuda::CudaOptions::default();
            crate::emit::cuda::emit_cuda(kernel, &target.0, &opts)
                .map_err(|d| Error::new(d, source()))
        }
    }
}
