//! The facade's results as plain Python data: one dict per Rust struct, keys named as the
//! Rust fields, lists for vectors, tuples for fixed arrays, `None` for `None`. The Python
//! layer (`smemsync/__init__.py`) builds its dataclasses from exactly these keys; the two are
//! kept in step by the pytest suite, which reads every field.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use smemsync::{
    Access, Diagnostic, ErrorKind, HazardReport, InsertedSync, KernelReport, Location, Outcome,
    Outputs, Program, Severity, SyncKind, Synchronized, Verdict, Witness,
};

use crate::Failed;

type Dict<'py> = Bound<'py, PyDict>;

fn location<'py>(py: Python<'py>, at: Option<Location>) -> PyResult<Bound<'py, PyAny>> {
    match at {
        Some(l) => Ok((l.line, l.column).into_pyobject(py)?.into_any()),
        None => Ok(py.None().into_bound(py)),
    }
}

/// A diagnostic with its location and its rendering against `source`.
fn diagnostic<'py>(
    py: Python<'py>,
    d: &Diagnostic,
    source: &str,
    file_name: &str,
) -> PyResult<Dict<'py>> {
    let out = PyDict::new(py);
    let severity = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    };
    out.set_item("severity", severity)?;
    out.set_item("code", d.code)?;
    out.set_item("message", &d.message)?;
    let at = |span| smemsync::Location::of_span(source, span);
    out.set_item("location", location(py, d.primary_span().and_then(at))?)?;
    let labels = PyList::empty(py);
    for l in &d.labels {
        let label = PyDict::new(py);
        label.set_item("location", location(py, at(l.span))?)?;
        label.set_item("message", &l.message)?;
        label.set_item("primary", l.primary)?;
        labels.append(label)?;
    }
    out.set_item("labels", labels)?;
    out.set_item("notes", d.notes.clone())?;
    out.set_item("help", d.help.clone())?;
    let rendered = d.render(file_name, source, false);
    out.set_item("rendered", rendered)?;
    Ok(out)
}

fn diagnostics<'py>(
    py: Python<'py>,
    ds: &[Diagnostic],
    source: &str,
    file_name: &str,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for d in ds {
        out.append(diagnostic(py, d, source, file_name)?)?;
    }
    Ok(out)
}

/// The payload of `Failure`: kind (`input`, `finding`, `internal`), the CLI's exit code for
/// it, a one-line message, the rendering, and the diagnostics.
pub fn failure<'py>(py: Python<'py>, f: &Failed, file_name: &str) -> PyResult<Dict<'py>> {
    let out = PyDict::new(py);
    match f {
        Failed::Error(e) => {
            let kind = match e.kind() {
                ErrorKind::Input => "input",
                ErrorKind::Finding => "finding",
                ErrorKind::Internal => "internal",
            };
            out.set_item("kind", kind)?;
            out.set_item("exit_code", e.kind().exit_code())?;
            out.set_item("message", e.to_string())?;
            out.set_item("rendered", e.render(file_name, false))?;
            let ds = diagnostics(py, e.diagnostics(), e.source_text(), file_name)?;
            out.set_item("diagnostics", ds)?;
        }
        Failed::Panic(msg) => {
            out.set_item("kind", "internal")?;
            out.set_item("exit_code", ErrorKind::Internal.exit_code())?;
            let text = format!("internal error (a bug in smemsync, please report it): {msg}");
            out.set_item("message", &text)?;
            out.set_item("rendered", &text)?;
            out.set_item("diagnostics", PyList::empty(py))?;
        }
    }
    Ok(out)
}

/// An imported TTGIR module: the `.kir` text, the target it was compiled for, and the
/// importer's warnings located (and rendered) in the TTGIR `source`.
pub fn imported<'py>(
    py: Python<'py>,
    program: &smemsync::Program,
    warnings: &[Diagnostic],
    source: &str,
    file_name: &str,
) -> PyResult<Dict<'py>> {
    let out = PyDict::new(py);
    out.set_item("kir", program.source())?;
    out.set_item("target", program.declared_target())?;
    out.set_item("warnings", diagnostics(py, warnings, source, file_name)?)?;
    Ok(out)
}

fn hazard<'py>(py: Python<'py>, h: &HazardReport) -> PyResult<Dict<'py>> {
    let out = PyDict::new(py);
    out.set_item("kind", &h.kind)?;
    out.set_item("buffer", &h.buffer)?;
    out.set_item("source", &h.source)?;
    out.set_item("destination", &h.destination)?;
    out.set_item("source_line", h.source_line)?;
    out.set_item("destination_line", h.destination_line)?;
    out.set_item("carried_by", h.carried_by.clone())?;
    out.set_item("description", &h.description)?;
    Ok(out)
}

fn hazards<'py>(py: Python<'py>, hs: &[HazardReport]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for h in hs {
        out.append(hazard(py, h)?)?;
    }
    Ok(out)
}

fn inserted<'py>(py: Python<'py>, s: &InsertedSync) -> PyResult<Dict<'py>> {
    let out = PyDict::new(py);
    let kind = match s.kind {
        SyncKind::Wait => "wait",
        SyncKind::Barrier => "barrier",
        SyncKind::WarpSync => "warp_sync",
        SyncKind::ProxyFence => "proxy_fence",
    };
    out.set_item("kind", kind)?;
    out.set_item("op", &s.op)?;
    out.set_item("at", &s.at)?;
    out.set_item("line", s.line)?;
    out.set_item("hazards", hazards(py, &s.hazards)?)?;
    out.set_item("reason", s.reason.clone())?;
    Ok(out)
}

fn kernel_report<'py>(
    py: Python<'py>,
    r: &KernelReport,
    src: &str,
    file_name: &str,
) -> PyResult<Dict<'py>> {
    let out = PyDict::new(py);
    out.set_item("name", &r.name)?;
    let list = PyList::empty(py);
    for s in &r.inserted {
        list.append(inserted(py, s)?)?;
    }
    out.set_item("inserted", list)?;
    out.set_item("covered_by_existing", hazards(py, &r.covered_by_existing)?)?;
    let st = &r.stats;
    let stats = PyDict::new(py);
    stats.set_item("hazards", st.hazards)?;
    stats.set_item("covered_by_existing", st.covered_by_existing)?;
    stats.set_item("barriers_written", st.barriers_written)?;
    stats.set_item("warp_syncs_written", st.warp_syncs_written)?;
    stats.set_item("existing_barriers", st.existing_barriers)?;
    stats.set_item("barriers_executed", st.barriers_executed)?;
    stats.set_item("inserted_executed", st.inserted_executed)?;
    stats.set_item("lower_bound", st.lower_bound)?;
    stats.set_item("waits_written", st.waits_written)?;
    stats.set_item("inserted_syncs", st.inserted_syncs)?;
    stats.set_item("conservative", st.conservative)?;
    out.set_item("stats", stats)?;
    out.set_item("warnings", diagnostics(py, &r.warnings, src, file_name)?)?;
    Ok(out)
}

/// `{"text": …, "kernels": [kernel report, …]}`.
pub fn synchronized<'py>(
    py: Python<'py>,
    s: &Synchronized,
    file_name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let out = PyDict::new(py);
    out.set_item("text", s.text())?;
    let list = PyList::empty(py);
    for r in &s.kernels {
        list.append(kernel_report(py, r, s.program.source(), file_name)?)?;
    }
    out.set_item("kernels", list)?;
    Ok(out.into_any())
}

fn access<'py>(py: Python<'py>, a: &Access) -> PyResult<Dict<'py>> {
    let out = PyDict::new(py);
    out.set_item("op", &a.op)?;
    out.set_item("location", location(py, a.location)?)?;
    out.set_item("kind", format!("{:?}", a.kind))?;
    out.set_item("thread", a.thread)?;
    out.set_item(
        "thread_xyz",
        (a.thread_xyz[0], a.thread_xyz[1], a.thread_xyz[2]),
    )?;
    out.set_item("by_copy_engine", a.by_copy_engine)?;
    out.set_item("iteration", a.iteration.clone())?;
    Ok(out)
}

fn witness<'py>(py: Python<'py>, w: &Witness) -> PyResult<Dict<'py>> {
    let out = PyDict::new(py);
    out.set_item("buffer", &w.buffer)?;
    out.set_item("index", w.index.clone())?;
    out.set_item("block", (w.block[0], w.block[1], w.block[2]))?;
    out.set_item("first", access(py, &w.first)?)?;
    out.set_item("second", access(py, &w.second)?)?;
    Ok(out)
}

fn verdict<'py>(py: Python<'py>, p: &Program, v: &Verdict, file: &str) -> PyResult<Dict<'py>> {
    let out = PyDict::new(py);
    out.set_item("kernel", &v.kernel)?;
    out.set_item("summary", &v.summary)?;
    let (outcome, block, detail) = match &v.outcome {
        Outcome::Proved {
            block, argument, ..
        } => ("proved", Some(*block), Some(argument.clone())),
        Outcome::Checked {
            block, not_proved, ..
        } => ("checked", Some(*block), Some(not_proved.clone())),
        Outcome::Race(_) => ("race", None, None),
        Outcome::Deadlock => ("deadlock", None, None),
        Outcome::ExecutionError => ("execution_error", None, None),
    };
    out.set_item("outcome", outcome)?;
    out.set_item("block", block.map(|b| (b[0], b[1], b[2])))?;
    out.set_item("detail", detail)?;
    let w = v.witness().map(|w| witness(py, w)).transpose()?;
    out.set_item("witness", w)?;
    let d = v.diagnostic.as_ref();
    let d = d.map(|d| diagnostic(py, d, p.source(), file)).transpose()?;
    out.set_item("diagnostic", d)?;
    Ok(out)
}

/// `[verdict, …]`, one per kernel.
pub fn verdicts<'py>(
    py: Python<'py>,
    p: &Program,
    vs: &[Verdict],
    file_name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let out = PyList::empty(py);
    for v in vs {
        out.append(verdict(py, p, v, file_name)?)?;
    }
    Ok(out.into_any())
}

/// `{kernel: {buffer: {"element", "shape", "data"}}}`.
pub fn outputs<'py>(py: Python<'py>, os: &[Outputs]) -> PyResult<Bound<'py, PyAny>> {
    let out = PyDict::new(py);
    for o in os {
        let buffers = PyDict::new(py);
        for b in &o.buffers {
            let buf = PyDict::new(py);
            buf.set_item("element", &b.element)?;
            buf.set_item("shape", b.shape.clone())?;
            buf.set_item("data", b.data.clone())?;
            buffers.set_item(&b.name, buf)?;
        }
        out.set_item(&o.kernel, buffers)?;
    }
    Ok(out.into_any())
}
