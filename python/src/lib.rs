//! The Python extension module `smemsync._smemsync`: a thin shell over smemsync's public Rust
//! API (the facade of `smemsync`'s lib.rs; nothing else of the crate is reachable from here).
//!
//! Every function takes the kernel source as text, runs one facade pipeline on a worker thread
//! with a large stack (the analyses recurse along value definitions, as in the CLI) while the
//! Python interpreter is detached, and returns plain Python data (dicts, lists, tuples, str,
//! int). The pure-Python layer `smemsync/__init__.py` turns those into typed, documented
//! objects and turns the `Failure` this module raises into `smemsync.SmemsyncError`.
//! A panic inside smemsync becomes a `Failure` of kind `internal`, never a crash.
//! Complexity: that of the facade call, plus O(size of the result) to convert it.

mod convert;

use std::collections::HashMap;

use pyo3::prelude::*;
use smemsync::{CheckOptions, Error, Format, Program, RunOptions, Strategy, SyncOptions, Target};

pyo3::create_exception!(
    _smemsync,
    Failure,
    pyo3::exceptions::PyException,
    "Raised by the extension with one argument, a dict describing the failure \
     (kind, exit_code, message, rendered, diagnostics); smemsync.SmemsyncError wraps it."
);

/// Stack of the worker thread each call runs on: 1 GiB of address space (only the pages
/// touched are committed), as the CLI's.
const WORKER_STACK: usize = 1 << 30;

/// What a failed call reports: a facade error, or a panic (an internal error).
enum Failed {
    Error(Error),
    Panic(String),
}

/// Runs `f` on a worker thread with a large stack, with the interpreter detached.
fn on_worker<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, Error> + Send,
) -> Result<T, Failed> {
    py.detach(|| {
        std::thread::scope(|s| {
            let worker = std::thread::Builder::new()
                .name("smemsync".into())
                .stack_size(WORKER_STACK)
                .spawn_scoped(s, f)
                .map_err(|e| Failed::Panic(format!("cannot start a worker thread: {e}")))?;
            match worker.join() {
                Ok(r) => r.map_err(Failed::Error),
                Err(p) => Err(Failed::Panic(panic_message(p.as_ref()))),
            }
        })
    })
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Converts a failure into the `Failure` exception, its payload described in `convert`.
fn raise(py: Python<'_>, f: Failed, file_name: &str) -> PyErr {
    match convert::failure(py, &f, file_name) {
        Ok(payload) => Failure::new_err((payload.unbind(),)),
        Err(e) => e,
    }
}

/// Reads `source` as `language` ("kir" or "mlir"; MLIR needs a target).
fn read(source: &str, language: &str, target: Option<&Target>) -> Result<Program, Error> {
    match (language, target) {
        ("mlir", Some(t)) => smemsync::read_mlir(source, t),
        ("mlir", None) => smemsync::read_mlir(source, &Target::new("")?),
        _ => smemsync::read(source),
    }
}

fn target_of(name: Option<&str>) -> Result<Option<Target>, Error> {
    name.map(Target::new).transpose()
}

/// `smemsync.sync`: see its docstring in `smemsync/__init__.py`.
#[pyfunction]
#[pyo3(signature = (source, target, explain, strategy, warp_sync, bounds, language, file_name))]
#[expect(
    clippy::too_many_arguments,
    reason = "the Python keyword arguments, one each"
)]
fn sync<'py>(
    py: Python<'py>,
    source: &str,
    target: &str,
    explain: bool,
    strategy: &str,
    warp_sync: bool,
    bounds: HashMap<String, i64>,
    language: &str,
    file_name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let strategy = match strategy {
        "naive" => Strategy::Naive,
        "exhaustive" => Strategy::Exhaustive,
        _ => Strategy::Optimal,
    };
    let done = on_worker(py, || {
        let t = Target::new(target)?;
        let program = read(source, language, Some(&t))?;
        let mut opts = SyncOptions::new(t);
        opts.explain = explain;
        opts.strategy = strategy;
        opts.warp_sync = warp_sync;
        opts.bounds = bounds.into_iter().collect();
        smemsync::synchronize(&program, &opts)
    });
    match done {
        Ok(s) => convert::synchronized(py, &s, file_name),
        Err(f) => Err(raise(py, f, file_name)),
    }
}

/// `smemsync.import_ttgir`: see its docstring in `smemsync/__init__.py`.
#[pyfunction]
#[pyo3(signature = (source, file_name))]
fn import_ttgir<'py>(
    py: Python<'py>,
    source: &str,
    file_name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    match on_worker(py, || smemsync::read_ttgir(source)) {
        Ok((program, warnings)) => {
            Ok(convert::imported(py, &program, &warnings, source, file_name)?.into_any())
        }
        Err(f) => Err(raise(py, f, file_name)),
    }
}

/// `smemsync.check`: see its docstring in `smemsync/__init__.py`.
#[pyfunction]
#[pyo3(signature = (source, target, block, bounds, schedules, prove, language, file_name, grid = None))]
#[expect(
    clippy::too_many_arguments,
    reason = "the Python keyword arguments, one each"
)]
fn check<'py>(
    py: Python<'py>,
    source: &str,
    target: Option<&str>,
    block: Option<[u32; 3]>,
    bounds: HashMap<String, i64>,
    schedules: u32,
    prove: bool,
    language: &str,
    file_name: &str,
    grid: Option<[u32; 3]>,
) -> PyResult<Bound<'py, PyAny>> {
    let done = on_worker(py, || {
        let t = target_of(target)?;
        let program = read(source, language, t.as_ref())?;
        let mut opts = CheckOptions::new(t);
        opts.block = block;
        opts.grid = grid;
        opts.bounds = bounds.into_iter().collect();
        opts.schedules = schedules;
        opts.prove = prove;
        let verdicts = smemsync::check(&program, &opts)?;
        Ok((program, verdicts))
    });
    match done {
        Ok((program, verdicts)) => convert::verdicts(py, &program, &verdicts, file_name),
        Err(f) => Err(raise(py, f, file_name)),
    }
}

/// `smemsync.run`: see its docstring in `smemsync/__init__.py`.
#[pyfunction]
#[pyo3(signature = (source, target, block, bounds, seed, language, file_name))]
#[expect(
    clippy::too_many_arguments,
    reason = "the Python keyword arguments, one each"
)]
fn run<'py>(
    py: Python<'py>,
    source: &str,
    target: Option<&str>,
    block: Option<[u32; 3]>,
    bounds: HashMap<String, i64>,
    seed: u64,
    language: &str,
    file_name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let done = on_worker(py, || {
        let t = target_of(target)?;
        let program = read(source, language, t.as_ref())?;
        let mut opts = RunOptions::new(t);
        opts.block = block;
        opts.bounds = bounds.into_iter().collect();
        opts.seed = seed;
        smemsync::run(&program, &opts)
    });
    match done {
        Ok(outputs) => convert::outputs(py, &outputs),
        Err(f) => Err(raise(py, f, file_name)),
    }
}

/// `smemsync.emit`: see its docstring in `smemsync/__init__.py`.
#[pyfunction]
#[pyo3(signature = (source, format, target, kernel, language, file_name))]
fn emit(
    py: Python<'_>,
    source: &str,
    format: &str,
    target: &str,
    kernel: Option<&str>,
    language: &str,
    file_name: &str,
) -> PyResult<String> {
    let format = match format {
        "mlir" => Format::Mlir,
        "cuda" => Format::Cuda,
        _ => Format::Text,
    };
    let done = on_worker(py, || {
        let t = Target::new(target)?;
        let mut program = read(source, language, Some(&t))?;
        if let Some(name) = kernel {
            program = program.select(name)?;
        }
        smemsync::emit(&program, format, &t)
    });
    done.map_err(|f| raise(py, f, file_name))
}

/// The targets this build knows.
#[pyfunction]
fn targets() -> Vec<&'static str> {
    Target::names().to_vec()
}

/// The Rust extension of the `smemsync` Python package (use `smemsync`, not this module).
#[pymodule]
mod _smemsync {
    #[pymodule_export]
    use super::{Failure, check, emit, import_ttgir, run, sync, targets};
}
