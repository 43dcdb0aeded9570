//! Source spans and the one diagnostic type, rendered with colour on a terminal and plain in
//! tests.
//!
//! Three kinds of diagnostic: user errors (bad input, with spans), verifier errors (a pass
//! broke an invariant: a bug in smemsync) and findings (races, deadlocks, divergence: the
//! product's output). Every layer converts its errors into [`Diagnostic`] here, so wording and
//! rendering live together. Model: naga's `span.rs` and ISLE's error type, written afresh.

use std::fmt::Write as _;

/// A half-open byte range in a source text. `Span::UNDEF` marks IR built by passes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// First byte.
    pub lo: u32,
    /// One past the last byte.
    pub hi: u32,
}

impl Span {
    /// The span of IR built by a pass: no source.
    pub const UNDEF: Span = Span {
        lo: u32::MAX,
        hi: u32::MAX,
    };
    /// The bytes `lo..hi`.
    pub fn new(lo: usize, hi: usize) -> Span {
        Span {
            lo: lo as u32,
            hi: hi as u32,
        }
    }
    /// Whether this is [`Span::UNDEF`].
    pub fn is_undef(self) -> bool {
        self == Span::UNDEF
    }
    /// The smallest span covering both (an undefined one is ignored).
    pub fn to(self, other: Span) -> Span {
        if self.is_undef() {
            return other;
        }
        if other.is_undef() {
            return self;
        }
        Span {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }
}

/// How serious a diagnostic is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The operation failed.
    Error,
    /// The operation succeeded, possibly at a cost (e.g. a conservative answer).
    Warning,
    /// Information.
    Note,
}

/// Who is at fault.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DiagKind {
    /// The input is malformed or unsupported.
    User,
    /// A pass broke an IR invariant (a bug in smemsync).
    Verifier,
    /// An analysis result: a race, a deadlock, a barrier under divergent control.
    Finding,
}

/// A message attached to a span of the source.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What about it.
    pub message: String,
    /// The first label, where the diagnostic points; others are secondary.
    pub primary: bool,
}

/// A diagnostic with a stable code, labels on the source, notes and an optional fix hint.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// Error, warning or note.
    pub severity: Severity,
    /// Whose fault: the input, a pass, or a finding.
    pub kind: DiagKind,
    /// A stable code: `E…` input, `V…` verifier, `C…` checker, `W…` warnings.
    pub code: &'static str,
    /// One line saying what is wrong.
    pub message: String,
    /// Spans of the source with messages; the first is primary.
    pub labels: Vec<Label>,
    /// Further explanation, one entry per note.
    pub notes: Vec<String>,
    /// What to change, when known.
    pub help: Option<String>,
}

impl Diagnostic {
    /// An error of a kind.
    pub fn error(kind: DiagKind, code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            kind,
            code,
            message: message.into(),
            labels: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }
    /// An error in the input.
    pub fn user(code: &'static str, message: impl Into<String>) -> Self {
        Self::error(DiagKind::User, code, message)
    }
    /// A warning of a kind.
    pub fn warning(kind: DiagKind, code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Self::error(kind, code, message)
        }
    }
    /// Adds a label (the first one added is primary).
    pub fn with_label(mut self, span: Span, message: impl Into<String>) -> Self {
        let primary = self.labels.is_empty();
        self.labels.push(Label {
            span,
            message: message.into(),
            primary,
        });
        self
    }
    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
    /// Sets the help.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
    /// The span of the primary label.
    pub fn primary_span(&self) -> Option<Span> {
        self.labels.iter().find(|l| l.primary).map(|l| l.span)
    }

    /// Renders against the source text. `color` adds ANSI escapes.
    pub fn render(&self, file: &str, src: &str, color: bool) -> String {
        let (red, yellow, blue, bold, reset) = if color {
            ("\x1b[31m", "\x1b[33m", "\x1b[34m", "\x1b[1m", "\x1b[0m")
        } else {
            ("", "", "", "", "")
        };
        let sev = match self.severity {
            Severity::Error => format!("{red}{bold}error{reset}"),
            Severity::Warning => format!("{yellow}{bold}warning{reset}"),
            Severity::Note => format!("{bold}note{reset}"),
        };
        let mut out = String::new();
        let _ = writeln!(out, "{sev}[{}]: {bold}{}{reset}", self.code, self.message);
        let mut first = true;
        for l in &self.labels {
            if l.span.is_undef() || l.span.lo as usize > src.len() {
                if !l.message.is_empty() {
                    let _ = writeln!(out, "  {blue}={reset} {}", l.message);
                }
                continue;
            }
            let (line, col, text) = line_of(src, l.span.lo as usize);
            let arrow = if first { "-->" } else { ":::" };
            first = false;
            let _ = writeln!(
                out,
                "  {blue}{arrow}{reset} {file}:{}:{}",
                line + 1,
                col + 1
            );
            let gutter = format!("{}", line + 1);
            let pad = " ".repeat(gutter.len());
            let _ = writeln!(out, "  {pad} {blue}|{reset}");
            let _ = writeln!(out, "  {blue}{gutter} |{reset} {text}");
            let width = ((l.span.hi.max(l.span.lo + 1) - l.span.lo) as usize)
                .min(text.len().saturating_sub(col).max(1));
            let mark = if l.primary { "^" } else { "-" };
            let c = if l.primary { red } else { blue };
            let _ = writeln!(
                out,
                "  {pad} {blue}|{reset} {}{c}{} {}{reset}",
                " ".repeat(col),
                mark.repeat(width),
                l.message
            );
        }
        // Lines after the first of a note or help line up under its text.
        let indent = |t: &str| t.replace('\n', "\n          ");
        for n in &self.notes {
            let _ = writeln!(out, "  {blue}={reset} note: {}", indent(n));
        }
        if let Some(h) = &self.help {
            let _ = writeln!(out, "  {blue}={reset} help: {}", indent(h));
        }
        out
    }
}

/// (0-based line, 0-based column in chars, line text) of a byte offset.
pub fn line_of(src: &str, offset: usize) -> (usize, usize, &str) {
    let offset = offset.min(src.len());
    let start = src[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = src[offset..].find('\n').map_or(src.len(), |i| offset + i);
    let line = src[..start].matches('\n').count();
    let col = src[start..offset].chars().count();
    (line, col, &src[start..end])
}

/// 1-based line number of a span (for tests and annotations).
pub fn line_number(src: &str, span: Span) -> Option<usize> {
    if span.is_undef() {
        None
    } else {
        Some(line_of(src, span.lo as usize).0 + 1)
    }
}

/// Renders a list of diagnostics.
pub fn render_all(diags: &[Diagnostic], file: &str, src: &str, color: bool) -> String {
    diags
        .iter()
        .map(|d| d.render(file, src, color))
        .collect::<Vec<_>>()
        .join("\n")
}
