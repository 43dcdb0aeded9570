//! [`check`] and [`run`]: the independent race checker and the interpreter, with their answers
//! as data ([`Verdict`], [`Witness`], [`Outputs`]).
//!
//! A race, a deadlock or an execution error found in a kernel is the checker's answer, not a
//! failure: [`check`] returns it in the kernel's [`Verdict`]. Only bad input (a kernel that
//! does not fit the target, a missing parameter value, a block size out of range) is an
//! [`Error`]. [`run`] needs race-free kernels, so there a finding is an error too.
//! Complexity: the checker's (docs/checker.md).

use std::sync::Arc;

use super::error::{Error, Location};
use super::program::{Program, Target, verify};
use crate::check::{self as checker, AccKind, AccessSite, CheckReport};
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::Kernel;

/// Options of [`check`]. Build with [`CheckOptions::new`], then set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CheckOptions {
    /// The target (warp width, counters); `None` takes the target the kernels declare, else a
    /// generic model (32-wide warps).
    pub target: Option<Target>,
    /// Block size to check instead of each kernel's own.
    pub block: Option<[u32; 3]>,
    /// Grid to interpret for kernels that declare none (every block is run); without it such
    /// a kernel that reads block ids is interpreted as block 0 only. A grid other than a
    /// kernel's declared `grid(...)` is an error (E0152).
    pub grid: Option<[u32; 3]>,
    /// Values of scalar parameters (by name, without `%`) for interpretation.
    pub bounds: Vec<(String, i64)>,
    /// Number of schedules the interpreter explores (default 4).
    pub schedules: u32,
    /// Ops executed per schedule before giving up (default 200 000 000).
    pub max_steps: u64,
    /// Try the static proof before interpreting (default true).
    pub prove: bool,
}

impl CheckOptions {
    /// The defaults for a target (or the generic model).
    pub fn new(target: Option<Target>) -> CheckOptions {
        let d = checker::CheckOptions::default();
        CheckOptions {
            target,
            block: None,
            grid: None,
            bounds: Vec::new(),
            schedules: d.schedules,
            max_steps: d.max_steps,
            prove: d.try_proof,
        }
    }
}

/// The checker's answer for one kernel.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// The kernel's name (without `@`).
    pub kernel: String,
    /// Proved, checked, or what was found.
    pub outcome: Outcome,
    /// One line: `race-free (proved)`, `race-free (checked for block=…, bounds=…, K
    /// schedules)`, or what was found (what `smemsync check` prints).
    pub summary: String,
    /// A finding as a diagnostic (a race with both accesses labelled); `None` when race-free.
    /// [`Program::render`] prints it, [`Program::locate`] says where it points.
    pub diagnostic: Option<Diagnostic>,
}

impl Verdict {
    /// Proved or checked race-free: no race, deadlock or execution error found.
    pub fn is_race_free(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Proved { .. } | Outcome::Checked { .. }
        )
    }

    /// The race's witness, if the outcome is a race.
    pub fn witness(&self) -> Option<&Witness> {
        match &self.outcome {
            Outcome::Race(w) => Some(w),
            _ => None,
        }
    }
}

/// What the checker concluded about a kernel.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Race freedom proved for every schedule, trip count and scalar value, at this block size.
    Proved {
        /// The block size of the proof.
        block: [u32; 3],
        /// The argument the proof used, in words.
        argument: String,
        /// Ops where the proof could not show that no execution error (C0004, C0005, C0006)
        /// stops the execution first; empty: none can.
        not_shown: Vec<crate::check::proof_exec::NotShown>,
    },
    /// No race found by interpreting the kernel with these values and schedules.
    Checked {
        /// The block size interpreted.
        block: [u32; 3],
        /// The scalar parameter values used.
        bounds: Vec<(String, i64)>,
        /// The number of schedules explored.
        schedules: u32,
        /// Why the static proof did not apply.
        not_proved: String,
    },
    /// A race, with its witness.
    Race(Witness),
    /// A deadlock, a barrier under divergent control, a protocol violation or a copy still in
    /// flight at exit ([`Verdict::diagnostic`] says which).
    Deadlock,
    /// An execution error: an index out of range, a division by zero, a read of an element no
    /// thread wrote ([`Verdict::diagnostic`] says which).
    ExecutionError,
}

/// A race: two unordered accesses to one shared element, at least one writing.
#[derive(Clone, Debug, PartialEq)]
pub struct Witness {
    /// The shared buffer (without `@`).
    pub buffer: String,
    /// The element's index.
    pub index: Vec<u64>,
    /// The block the race occurred in.
    pub block: [u32; 3],
    /// The earlier access (in the interpreted schedule).
    pub first: Access,
    /// The later access.
    pub second: Access,
}

/// One of a race's two accesses.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    /// The op as written (its canonical text).
    pub op: String,
    /// Where the op is in the source.
    pub location: Option<Location>,
    /// What the access does.
    pub kind: AccessKind,
    /// The linear thread id (of the issuing thread, for a copy).
    pub thread: u32,
    /// The thread id as (x, y, z).
    pub thread_xyz: [u32; 3],
    /// Performed by a copy engine (an asynchronous copy the thread issued).
    pub by_copy_engine: bool,
    /// The enclosing loops' induction variables (outermost first).
    pub iteration: Vec<(String, i64)>,
}

/// What an access does to the element.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// A plain read.
    Read,
    /// A plain write.
    Write,
    /// An atomic read-modify-write.
    Atomic,
    /// An asynchronous copy writing shared memory.
    AsyncWrite,
    /// An asynchronous copy reading shared memory (a TMA store).
    AsyncRead,
}

/// Proves or refutes race freedom of every kernel (after [`verify`] when there is a target).
/// A race, deadlock or execution error is a [`Verdict`], not an error.
pub fn check(program: &Program, opts: &CheckOptions) -> Result<Vec<Verdict>, Error> {
    let internal = internal_options(program, opts)?;
    let mut out = Vec::new();
    for k in &program.kernels {
        let r = checker::check_race_free(k, &internal);
        let diagnostic = r.to_diagnostic(k);
        if let Some(d) = diagnostic.as_ref().filter(|d| d.kind == DiagKind::User) {
            return Err(Error::new(vec![d.clone()], program.source.clone()));
        }
        out.push(Verdict {
            kernel: k.name.clone(),
            outcome: outcome(k, &r, &program.source),
            summary: r.summary(),
            diagnostic,
        });
    }
    Ok(out)
}

/// The checker's options: the resolved and verified target, a block size within its limits.
fn internal_options(
    program: &Program,
    opts: &CheckOptions,
) -> Result<checker::CheckOptions, Error> {
    let target = program.resolve_target(opts.target.as_ref())?;
    if let Some(t) = &target {
        verify(program, t)?;
    }
    if let Some(b) = opts.block {
        let limits = target
            .as_ref()
            .map_or(crate::target::Limits::GENERIC, |t| t.0.limits);
        if let Some(e) = limits.block_error(b) {
            let d = Diagnostic::user("E0160", format!("block {b:?}: {e} on {}", limits.source));
            return Err(Error::new(vec![d], Arc::from("")));
        }
    }
    Ok(checker::CheckOptions {
        target: target.map(|t| t.0),
        block: opts.block,
        grid: opts.grid,
        bounds: opts.bounds.clone(),
        schedules: opts.schedules.max(1),
        max_steps: opts.max_steps.max(1),
        input_seed: 0,
        try_proof: opts.prove,
        exec_budget: checker::CheckOptions::default().exec_budget,
    })
}

fn outcome(k: &Kernel, r: &CheckReport, src: &str) -> Outcome {
    match &r.verdict {
        checker::Verdict::Proved {
            block,
            why,
            not_shown,
        } => Outcome::Proved {
            block: *block,
            argument: why.clone(),
            not_shown: not_shown.clone(),
        },
        checker::Verdict::Checked {
            block,
            bounds,
            schedules,
            not_proved,
            ..
        } => Outcome::Checked {
            block: *block,
            bounds: bounds.clone(),
            schedules: *schedules,
            not_proved: not_proved.clone(),
        },
        checker::Verdict::Race(w) => Outcome::Race(Witness {
            buffer: w.buffer.clone(),
            index: w.index.clone(),
            block: w.block_id,
            first: access(k, &w.first, src),
            second: access(k, &w.second, src),
        }),
        checker::Verdict::Deadlock(_) => Outcome::Deadlock,
        checker::Verdict::ExecError(_) => Outcome::ExecutionError,
    }
}

fn access(k: &Kernel, s: &AccessSite, src: &str) -> Access {
    Access {
        op: crate::emit::text::op_label(k, s.op),
        location: Location::of_span(src, s.span),
        kind: match s.kind {
            AccKind::Read => AccessKind::Read,
            AccKind::Write => AccessKind::Write,
            AccKind::Atomic(_) => AccessKind::Atomic,
            AccKind::AsyncWrite => AccessKind::AsyncWrite,
            AccKind::AsyncRead => AccessKind::AsyncRead,
        },
        thread: s.thread,
        thread_xyz: s.thread_xyz,
        by_copy_engine: s.by_engine,
        iteration: s.iteration.clone(),
    }
}

/// Options of [`run`]. Build with [`RunOptions::new`], then set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RunOptions {
    /// The target; `None` takes the declared one, else the generic model.
    pub target: Option<Target>,
    /// Block size instead of each kernel's own.
    pub block: Option<[u32; 3]>,
    /// Values of scalar parameters (by name, without `%`).
    pub bounds: Vec<(String, i64)>,
    /// Seed of the input data and of the schedule (docs/ir.md section 3).
    pub seed: u64,
    /// Ops executed before giving up.
    pub max_steps: u64,
}

impl RunOptions {
    /// The defaults: seed 0, the kernel's block size, the declared or generic target.
    pub fn new(target: Option<Target>) -> RunOptions {
        RunOptions {
            target,
            block: None,
            bounds: Vec::new(),
            seed: 0,
            max_steps: checker::CheckOptions::default().max_steps,
        }
    }
}

/// The global buffers of one kernel after [`run`].
#[derive(Clone, Debug, PartialEq)]
pub struct Outputs {
    /// The kernel's name (without `@`).
    pub kernel: String,
    /// Every global buffer, in parameter order.
    pub buffers: Vec<Buffer>,
}

/// One global buffer's final contents.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    /// The parameter's name (without `%`).
    pub name: String,
    /// The element type (`f32`, `i32`, …).
    pub element: String,
    /// The shape.
    pub shape: Vec<u64>,
    /// The elements in row-major order; integers and f32 values are exact in f64.
    pub data: Vec<f64>,
}

/// Executes every kernel once on the interpreter, inputs and schedule from `opts.seed`. A
/// race, deadlock or execution error stops it with an error ([`ErrorKind::Finding`] or
/// [`ErrorKind::Input`], as the diagnostic says).
///
/// [`ErrorKind::Finding`]: crate::ErrorKind::Finding
/// [`ErrorKind::Input`]: crate::ErrorKind::Input
pub fn run(program: &Program, opts: &RunOptions) -> Result<Vec<Outputs>, Error> {
    let mut copts = CheckOptions::new(opts.target.clone());
    copts.block = opts.block;
    copts.bounds = opts.bounds.clone();
    copts.max_steps = opts.max_steps;
    let internal = internal_options(program, &copts)?;
    let mut out = Vec::new();
    for k in &program.kernels {
        let o = checker::run(k, opts.seed, &internal)
            .map_err(|d| Error::new(vec![d], program.source.clone()))?;
        let buffers = o
            .globals
            .into_iter()
            .map(|g| Buffer {
                name: g.name,
                element: g.elem.to_string(),
                shape: g.shape,
                data: g.data.iter().map(|&v| value(v)).collect(),
            })
            .collect();
        out.push(Outputs {
            kernel: k.name.clone(),
            buffers,
        });
    }
    Ok(out)
}

fn value(v: checker::Val) -> f64 {
    match v {
        checker::Val::F32(f) => f64::from(f),
        other => other.as_i64() as f64,
    }
}
