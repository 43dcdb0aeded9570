//! The facade's one error type, [`Error`], and where a diagnostic points ([`Location`]).
//!
//! An [`Error`] holds the [`Diagnostic`]s of one failure together with the source text their
//! spans point into, so that it can say the line and column of each without the caller keeping
//! the text, render them as the CLI does, and classify the failure ([`ErrorKind`]): bad input,
//! a finding, or a bug in smemsync. That classification is the CLI's exit code; it is decided
//! here and only here ([`ErrorKind::of`]).
//!
//! `Diagnostic` itself implements `Display` (one line: `error[CODE]: message`) and
//! `std::error::Error`, so a single diagnostic also converts into `Box<dyn Error>`.
//! Complexity: locating a diagnostic is O(source length).

use std::fmt;
use std::sync::Arc;

use crate::diag::{DiagKind, Diagnostic, Severity, Span, line_of, render_all};

/// A 1-based line and column (counted in characters) in a source text.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    /// Line number, from 1.
    pub line: usize,
    /// Column number in characters, from 1.
    pub column: usize,
}

impl Location {
    /// Where `span` starts in `source` (a label's span, say); `None` for a span built by a
    /// pass, which has no source.
    pub fn of_span(source: &str, span: Span) -> Option<Location> {
        if span.is_undef() || span.lo as usize > source.len() {
            return None;
        }
        let (line, col, _) = line_of(source, span.lo as usize);
        Some(Location {
            line: line + 1,
            column: col + 1,
        })
    }

    /// Where the primary label of `d` points in `source`.
    pub(crate) fn of_diagnostic(source: &str, d: &Diagnostic) -> Option<Location> {
        Location::of_span(source, d.primary_span()?)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Whose fault a failure is, from the least to the most severe.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
    /// The product's answer was negative: a race, a deadlock, a hazard no sync can remove.
    Finding,
    /// The input is malformed, unsupported, or does not fit the target; or a bad option.
    Input,
    /// A pass broke an invariant of the IR: a bug in smemsync (please report it).
    Internal,
}

impl ErrorKind {
    /// The exit code the CLI uses for this kind: 1 a finding, 2 bad input or usage, 3 an
    /// internal error (0, success, is no error).
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Finding => 1,
            ErrorKind::Input => 2,
            ErrorKind::Internal => 3,
        }
    }

    /// The most severe kind among the error-severity diagnostics of `diags` (warnings and
    /// notes do not count); `None` when there is no error.
    pub fn of(diags: &[Diagnostic]) -> Option<ErrorKind> {
        diags
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| match d.kind {
                DiagKind::Finding => ErrorKind::Finding,
                DiagKind::User => ErrorKind::Input,
                DiagKind::Verifier => ErrorKind::Internal,
            })
            .max()
    }
}

/// Every failure of the facade: one or more diagnostics and the source they point into.
#[derive(Clone)]
pub struct Error {
    diagnostics: Vec<Diagnostic>,
    source: Arc<str>,
    kind: ErrorKind,
}

impl Error {
    /// An error whose kind the diagnostics decide ([`ErrorKind::of`]; bad input when none of
    /// them is an error).
    pub(crate) fn new(diagnostics: Vec<Diagnostic>, source: Arc<str>) -> Error {
        let kind = ErrorKind::of(&diagnostics).unwrap_or(ErrorKind::Input);
        Error {
            diagnostics,
            source,
            kind,
        }
    }

    /// An error about the input, whatever the diagnostics' kind: a verifier complaint about a
    /// kernel the user wrote is bad input, not a bug of a pass.
    pub(crate) fn input(diagnostics: Vec<Diagnostic>, source: Arc<str>) -> Error {
        Error {
            kind: ErrorKind::Input,
            ..Error::new(diagnostics, source)
        }
    }

    /// Whose fault it is; [`ErrorKind::exit_code`] is the CLI's exit code for it.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The diagnostics, in the order they were found (at least one).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The source text the diagnostics' spans point into.
    pub fn source_text(&self) -> &str {
        &self.source
    }

    /// Where a diagnostic's primary label points in the source (`None` without one).
    pub fn location(&self, d: &Diagnostic) -> Option<Location> {
        Location::of_diagnostic(&self.source, d)
    }

    /// Each diagnostic in one line, prefixed with `LINE:COLUMN: ` when it has a location.
    fn located_lines(&self) -> Vec<String> {
        self.diagnostics
            .iter()
            .map(|d| match self.location(d) {
                Some(at) => format!("{at}: {d}"),
                None => d.to_string(),
            })
            .collect()
    }

    /// The diagnostics rendered against the source, as the CLI prints them: the message, the
    /// labelled source lines, notes and help. `file_name` names the source in the output;
    /// `color` adds ANSI colour escapes.
    pub fn render(&self, file_name: &str, color: bool) -> String {
        render_all(&self.diagnostics, file_name, &self.source, color)
    }
}

/// One line per diagnostic: `LINE:COLUMN: error[CODE]: message` (without the location when the
/// diagnostic has none). [`Error::render`] shows the source lines too.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.located_lines().join("\n"))
    }
}

impl std::error::Error for Error {}

/// The kind and the located one-line diagnostics, without the source text (which can be a
/// whole file): what `fn main() -> Result<(), Box<dyn Error>>` prints on failure.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("diagnostics", &self.located_lines())
            .finish()
    }
}

/// One line: `error[CODE]: message` (`warning[…]`, `note[…]` by severity). The span needs the
/// source to be shown: [`Error::render`] or `Diagnostic::render` do that.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        };
        write!(f, "{severity}[{}]: {}", self.code, self.message)
    }
}

impl std::error::Error for Diagnostic {}
