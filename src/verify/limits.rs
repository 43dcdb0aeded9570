//! Limits a kernel must respect before any pass sizes anything by it: launch shape (threads
//! per block, block and grid dimensions), shared-memory bytes per buffer, global dimensions
//! given by parameters (positive at the value a run gives them), and the nesting depth of
//! regions.
//!
//! Every size is computed with checked arithmetic (an overflow is a violation, never a wrap),
//! so after these checks `Kernel::threads`, element counts and byte sizes of shared buffers
//! are exact and small: the interpreter, the footprint analyses and the emitters may multiply
//! them freely. The nesting walk is iterative, so it runs before the verifier's (and every
//! later pass's) recursion over regions. Complexity: O(ops + buffers).

use crate::diag::{Diagnostic, Span};
use crate::ir::*;
use crate::target::Limits;

/// The most region-owning ops (`for`, `if`, `while`, `stage`) that may enclose an op. Deeper
/// kernels are refused, so that recursive passes stay far below any thread's stack (docs/ir.md).
pub const MAX_NESTING: usize = 64;

/// Launch-shape violations: the block and grid against `limits`, located on the header's
/// `block(...)` / `grid(...)`.
pub fn launch(k: &Kernel, limits: &Limits) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let at = |s: Span| if s.is_undef() { k.kernel_span } else { s };
    if let Some(msg) = limits.block_error(k.block) {
        out.push(
            Diagnostic::user("E0160", format!("@{}: {msg}", k.name)).with_label(
                at(k.block_span),
                format!("not launchable on {}", limits.source),
            ),
        );
    }
    if let Some(msg) = limits.grid_error(k.grid) {
        out.push(
            Diagnostic::user("E0161", format!("@{}: {msg}", k.name)).with_label(
                at(k.grid_span),
                format!("not launchable on {}", limits.source),
            ),
        );
    }
    out
}

/// Global dimensions given by an i32 parameter whose run value ([`Kernel::run_default`]: its
/// default, else the end of its declared range nearest [`DEFAULT_SCALAR`]) is below 1: every
/// run without an explicit value would refuse the buffer, so the kernel is refused here (E0151),
/// located on the default (or the parameter) and on the dimension. A declared range with
/// positive values and no default gives a positive run value, so it is never refused.
pub fn global_dims(k: &Kernel) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let at = |s: Span| if s.is_undef() { k.kernel_span } else { s };
    for (g, gd) in k.globals.iter() {
        for (i, d) in gd.shape.iter().enumerate() {
            let &Dim::Param(v) = d else { continue };
            let x = k.run_default(v);
            if x >= 1 {
                continue;
            }
            let name = k.value_name(v);
            let (from, why) = match (*k.param_defaults.get(v), *k.param_ranges.get(v)) {
                (Some(_), _) => (*k.param_default_spans.get(v), format!("%{name} defaults to {x}")),
                (None, Some((lo, hi))) => (
                    *k.value_spans.get(v),
                    format!("%{name} is declared in [{lo}, {hi}]"),
                ),
                (None, None) => (*k.value_spans.get(v), format!("%{name} runs with {x}")),
            };
            let dim = k.global_dim_spans.get(g).get(i).copied().unwrap_or(Span::UNDEF);
            out.push(
                Diagnostic::user(
                    "E0151",
                    format!(
                        "global %{} has dimension %{name} = {x}, which is not positive",
                        gd.name
                    ),
                )
                .with_label(at(from), why)
                .with_label(at(dim), "a dimension must be at least 1")
                .with_help(format!("give %{name} a positive default (or a positive range)")),
            );
        }
    }
    out
}

/// Bytes from the start of shared memory to the end of a buffer (its `at` offset plus its
/// size), `None` when that overflows u64.
pub fn buffer_end(bd: &BufferData) -> Option<u64> {
    let elems = bd.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))?;
    let bytes = elems.checked_mul(bd.elem.bytes())?;
    bd.offset.unwrap_or(0).checked_add(bytes)
}

/// Shared buffers that do not fit the target's shared memory (or whose size overflows).
pub fn shared(k: &Kernel, limits: &Limits) -> Vec<Diagnostic> {
    let max = limits.max_shared_bytes;
    let mut out = Vec::new();
    for (b, bd) in k.buffers.iter() {
        let end = buffer_end(bd);
        if end.is_some_and(|e| e <= max) {
            continue;
        }
        let what = match (end, bd.offset) {
            (None, _) => "its size overflows 64 bits".to_string(),
            (Some(e), Some(off)) => format!("it ends at byte {e} (offset {off})"),
            (Some(e), None) => format!("it needs {e} bytes"),
        };
        out.push(
            Diagnostic::user(
                "E0162",
                format!(
                    "shared buffer @{} does not fit in shared memory: {what}",
                    bd.name
                ),
            )
            .with_label(*k.buffer_spans.get(b), format!("more than {max} bytes"))
            .with_note(format!(
                "a block may use at most {max} bytes of shared memory on {}",
                limits.source
            )),
        );
    }
    out
}

/// The first op nested deeper than [`MAX_NESTING`] region-owning ops, as a diagnostic.
/// Iterative: safe on any depth. Assumes the region tree is acyclic (checked before).
pub fn nesting(k: &Kernel) -> Option<Diagnostic> {
    let mut stack = vec![(k.body(), 0usize)];
    while let Some((r, depth)) = stack.pop() {
        for &op in k.region_ops(r) {
            let children = &k.ops[op].regions;
            if children.is_empty() {
                continue;
            }
            if depth >= MAX_NESTING {
                return Some(too_deep(k.span(op)));
            }
            stack.extend(children.iter().map(|&c| (c, depth + 1)));
        }
    }
    None
}

/// The diagnostic for a region opened deeper than [`MAX_NESTING`] (shared with the readers).
pub fn too_deep(span: Span) -> Diagnostic {
    Diagnostic::user(
        "E0163",
        format!("regions are nested more than {MAX_NESTING} deep"),
    )
    .with_label(span, format!("opens region level {}", MAX_NESTING + 1))
    .with_help(format!(
        "docs/ir.md: an op may sit inside at most {MAX_NESTING} for/if/while/stage ops"
    ))
}

/// Two kernels of one file with the same name (located on the second).
pub fn duplicate_names(kernels: &[Kernel]) -> Vec<Diagnostic> {
    let mut seen: std::collections::HashMap<&str, Span> = Default::default();
    let mut out = Vec::new();
    for k in kernels {
        match seen.get(k.name.as_str()) {
            Some(&first) => out.push(
                Diagnostic::user("E0164", format!("kernel @{} is defined twice", k.name))
                    .with_label(k.kernel_span, "defined again here")
                    .with_label(first, "first defined here"),
            ),
            None => {
                seen.insert(&k.name, k.kernel_span);
            }
        }
    }
    out
}
