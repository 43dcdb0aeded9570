//! The rows of the picture: the printed output kernel, one row per line, with loops and
//! branches as nested bands (row ranges) and each op's row.
//!
//! Rows are the lines `emit::text::print_kernel` writes, so "output line N" is row N-1 here,
//! in the SVG and in the text report alike. A band opens at a line ending in `{` (not the
//! kernel header) and closes at the matching line starting with `}`; `} else {` closes the
//! then-band and opens the else-band. Complexity: O(lines).

use std::collections::HashMap;

use crate::emit::explain::output_lines;
use crate::ir::{Kernel, Op};

/// What a band is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BandKind {
    /// A `for` loop body (a back edge from its last row to its first).
    Loop,
    /// A `while` loop (condition and body; a back edge too).
    While,
    /// The then-branch of an `if`.
    Then,
    /// The else-branch of an `if`.
    Else,
    /// Another region (a `stage`).
    Other,
}

impl BandKind {
    pub fn name(self) -> &'static str {
        match self {
            BandKind::Loop => "loop",
            BandKind::While => "while",
            BandKind::Then => "then",
            BandKind::Else => "else",
            BandKind::Other => "region",
        }
    }

    /// Whether control returns from the band's end to its start.
    pub fn loops(self) -> bool {
        matches!(self, BandKind::Loop | BandKind::While)
    }
}

/// A loop or branch: rows `open..=close` (the opening and closing lines), nested `depth`
/// deep (0 = directly in the kernel body).
#[derive(Clone, Debug)]
pub struct Band {
    pub kind: BandKind,
    pub open: usize,
    pub close: usize,
    pub depth: usize,
    /// The op that opens it (for a `then`/`else`: the `if`).
    pub op: Option<Op>,
}

/// The printed kernel as rows.
#[derive(Clone, Debug)]
pub struct Timeline {
    pub lines: Vec<String>,
    pub bands: Vec<Band>,
    /// Row (0-based) of each placed op.
    pub row: HashMap<Op, usize>,
}

impl Timeline {
    pub fn new(k: &Kernel) -> Timeline {
        let text = crate::emit::text::print_kernel(k);
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let row: HashMap<Op, usize> = output_lines(k)
            .into_iter()
            .map(|(op, l)| (op, l - 1))
            .collect();
        let op_at: HashMap<usize, Op> = row.iter().map(|(&o, &r)| (r, o)).collect();
        let mut bands = Vec::new();
        let mut open: Vec<(BandKind, usize, Option<Op>)> = Vec::new();
        for (i, line) in lines.iter().enumerate().skip(1) {
            let t = line.trim();
            if t.starts_with('}') {
                if let Some((kind, o, op)) = open.pop() {
                    bands.push(Band {
                        kind,
                        open: o,
                        close: i,
                        depth: open.len(),
                        op,
                    });
                }
                if t.contains("else") && t.ends_with('{') {
                    let op = bands.last().and_then(|b| b.op);
                    open.push((BandKind::Else, i, op));
                }
                continue;
            }
            if t.ends_with('{') {
                let kind = if t.contains("= for ") || t.starts_with("for ") {
                    BandKind::Loop
                } else if t.contains("while") {
                    BandKind::While
                } else if t.starts_with("if ") {
                    BandKind::Then
                } else {
                    BandKind::Other
                };
                open.push((kind, i, op_at.get(&i).copied()));
            }
        }
        bands.sort_by_key(|b| (b.open, b.depth));
        Timeline { lines, bands, row }
    }

    /// The band a loop op opens.
    pub fn loop_band(&self, op: Op) -> Option<usize> {
        let r = *self.row.get(&op)?;
        self.bands
            .iter()
            .position(|b| b.open == r && b.kind.loops())
    }

    /// How deep row `r` is nested.
    pub fn depth_at(&self, r: usize) -> usize {
        self.bands
            .iter()
            .filter(|b| b.open < r && r < b.close)
            .count()
    }
}
