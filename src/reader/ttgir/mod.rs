//! The TTGIR importer: reads the textual TTGIR that Triton 3.6 prints
//! (`compiled.asm["ttgir"]`, structured `scf` form, NVIDIA and AMD backends) and writes the
//! kernel as `.kir` text, with side tables that map every `.kir` line back to its TTGIR line
//! (for diagnostics and for `sync --annotate`).
//!
//! What each op becomes is in docs/ttgir.md: shared-memory ops map onto `.kir` ops one to one
//! (`ttg.local_alloc` → a `shared` buffer, `ttg.async_copy_global_to_local` →
//! `cp_async_tile`, `ttng.warp_group_dot` → `wgmma`, TMA and mbarrier ops → `tma_*`/`mbar_*`);
//! ops with internal scratch (`ttg.convert_layout`, cross-warp `tt.reduce`/`tt.scan`,
//! `tt.histogram`, atomics with a result) become a collective store and load of a scratch
//! buffer; integer scalar arithmetic is translated exactly when it feeds a shared op;
//! tensor and float arithmetic has no shared effect and is collapsed into `compute`; global
//! memory ops have none either (smemsync does not synchronize global memory). Any other op
//! gets a conservative model and warning W1110 naming it ([`ops`]).
//!
//! Invariants: the importer never panics; malformed text is E1100-E1113 with the line and
//! column; every op is either translated, covered by a documented no-effect rule, or
//! reported. Values are translated lazily: a pure op is written where a shared op first
//! needs its value, so the `.kir` stays as small as the kernel's shared-memory skeleton.
//! Complexity: O(source length) plus the size of the emitted text.

pub mod annotate;
mod convert;
mod func;
mod hopper;
mod intops;
mod opconv;
mod ranges;
mod scopes;
mod scratch;
mod slots;
mod values;
mod warpspec;
pub mod layouts;
pub mod lexer;
pub mod ops;
pub mod types;

use crate::diag::{Diagnostic, Span};

/// Whether `.kir` has concrete layout definitions (`layout "L" = #ttg...`, the layout
/// helper's grammar); until then they are written as comments.
pub const LAYOUT_GRAMMAR: bool = true;

/// A TTGIR module imported as `.kir`.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The kernel(s) as `.kir` text (parses with [`crate::reader::parse`]).
    pub kir: String,
    /// Warnings about the import (W11xx), located in the TTGIR source.
    pub warnings: Vec<Diagnostic>,
    /// For each `.kir` line (0-based), the byte offset of the TTGIR line its op came from,
    /// when the op stands at that op's own position (lazily written values have none).
    pub line_origin: Vec<Option<usize>>,
    /// For each TTGIR line that opens a region (byte offset of the line), the offset of the
    /// line that closes it.
    pub region_end: std::collections::HashMap<usize, usize>,
    /// The target the module was compiled for (`sm_90`, `gfx942`, ...).
    pub target: Option<String>,
}

/// Whether a text looks like TTGIR (`tt.func` in a module with `ttg.` attributes).
pub fn looks_like_ttgir(src: &str) -> bool {
    src.contains("tt.func") && (src.contains("ttg.") || src.contains("\"ttg."))
}

/// Imports every `tt.func public` kernel of a TTGIR module.
pub fn import_ttgir(src: &str) -> Result<Imported, Vec<Diagnostic>> {
    let lines = lexer::lex_lines(src).map_err(|d| vec![d])?;
    let mut cv = convert::Converter::new(src, lines);
    cv.scan_mbarriers();
    cv.module()?;
    if cv.kernels.is_empty() {
        return Err(vec![
            Diagnostic::user("E1101", "the TTGIR holds no `tt.func public` kernel")
                .with_label(Span::new(0, src.len().min(1)), "expected a module with a kernel"),
        ]);
    }
    Ok(cv.finish())
}
