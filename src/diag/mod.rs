//! Source spans and the one diagnostic type, rendered with colour on a terminal and plain in
//! tests.
//!
//! Three kinds of diagnostic: user errors (bad input, with spans), verifier errors (a pass
//! broke an invariant: a bug in smemsync) and findings (races, deadlocks, divergence: the
//! product's output). Every layer converts its errors into [`Diagnostic`] here, so wording and
//! rendering live together. Model: naga's `span.rs` and ISLE's error type, written afresh.
//!
//! Two renderings of one structure: [`Diagnostic::render`] for people (annotate-snippets, the
//! renderer rustc uses) and [`Diagnostic::to_json`] for editors and CI (`--format json`, schema in
//! `docs/diagnostics.md`). Both are linear in the source length plus the labels.

pub mod json;

use json::Json;

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

    /// Renders against the source text with `annotate-snippets` (rustc's renderer): the
    /// primary label under `-->`, secondary labels in the same snippet (a race's two accesses
    /// side by side, multi-line spans drawn as such), then notes and help. `color` adds ANSI
    /// escapes; plain output is stable for tests. Labels without a location in `src` become
    /// `= ` lines, as notes do.
    pub fn render(&self, file: &str, src: &str, color: bool) -> String {
        use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
        let level = match self.severity {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
            Severity::Note => Level::NOTE,
        };
        let title = level.primary_title(self.message.as_str()).id(self.code);
        let located = |l: &&Label| !l.span.is_undef() && (l.span.lo as usize) <= src.len();
        let mut located_labels: Vec<&Label> = self.labels.iter().filter(located).collect();
        // The renderer's `-->` names the first primary annotation: put it first.
        located_labels.sort_by_key(|l| !l.primary);
        let mut group = Group::with_title(title);
        if !located_labels.is_empty() {
            let annotations = located_labels.iter().map(|l| {
                let kind = if l.primary {
                    AnnotationKind::Primary
                } else {
                    AnnotationKind::Context
                };
                let label = (!l.message.is_empty()).then_some(l.message.as_str());
                kind.span(clamp_span(src, l.span)).label(label)
            });
            group = group.element(Snippet::source(src).path(file).annotations(annotations));
        }
        for l in self
            .labels
            .iter()
            .filter(|l| !located(l) && !l.message.is_empty())
        {
            group = group.element(Level::NOTE.no_name().message(l.message.as_str()));
        }
        for n in &self.notes {
            group = group.element(Level::NOTE.message(n.as_str()));
        }
        if let Some(h) = &self.help {
            group = group.element(Level::HELP.message(h.as_str()));
        }
        let renderer = if color {
            Renderer::styled()
        } else {
            Renderer::plain()
        };
        let mut out = renderer.term_width(RENDER_WIDTH).render(&[group]);
        out.push('\n');
        out
    }
}

impl Severity {
    /// The name the renderings use: `error`, `warning` or `note`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

impl DiagKind {
    /// The name JSON uses: `user`, `verifier` or `finding`.
    pub fn name(self) -> &'static str {
        match self {
            DiagKind::User => "user",
            DiagKind::Verifier => "verifier",
            DiagKind::Finding => "finding",
        }
    }
}

impl Diagnostic {
    /// The machine-readable form (one object of `docs/diagnostics.md`'s schema): code,
    /// severity, kind, message, labels with file, 1-based line and column (in characters) of
    /// both ends and the byte span, notes and help. A label without a location in `src` has
    /// `null` positions.
    pub fn to_json(&self, file: &str, src: &str) -> Json {
        let labels = self
            .labels
            .iter()
            .map(|l| label_json(l, file, src))
            .collect();
        Json::object([
            ("code", Json::str(self.code)),
            ("severity", Json::str(self.severity.name())),
            ("kind", Json::str(self.kind.name())),
            ("message", Json::str(self.message.as_str())),
            ("labels", Json::Array(labels)),
            (
                "notes",
                Json::Array(self.notes.iter().map(|n| Json::str(n.as_str())).collect()),
            ),
            ("help", Json::opt_str(self.help.as_deref())),
        ])
    }
}

/// One label as JSON: where it is (or `null`s when it has no location in `src`).
fn label_json(l: &Label, file: &str, src: &str) -> Json {
    let located = !l.span.is_undef() && (l.span.lo as usize) <= src.len();
    let mut fields = vec![
        ("primary", Json::Bool(l.primary)),
        ("message", Json::str(l.message.as_str())),
        ("file", Json::str(file)),
    ];
    if located {
        let r = clamp_span(src, l.span);
        let (line, col, _) = line_of(src, r.start);
        let (end_line, end_col, _) = line_of(src, r.end);
        fields.extend([
            ("line", Json::uint(line + 1)),
            ("column", Json::uint(col + 1)),
            ("end_line", Json::uint(end_line + 1)),
            ("end_column", Json::uint(end_col + 1)),
            ("byte_start", Json::uint(r.start)),
            ("byte_end", Json::uint(r.end)),
        ]);
    } else {
        for key in [
            "line",
            "column",
            "end_line",
            "end_column",
            "byte_start",
            "byte_end",
        ] {
            fields.push((key, Json::Null));
        }
    }
    Json::Object(fields)
}

/// Width the renderer assumes: wide enough that it never trims a kernel's source lines.
const RENDER_WIDTH: usize = 4096;

/// A label's byte range within `src`: at least one character wide (an empty span still points
/// somewhere), ending on a character boundary.
fn clamp_span(src: &str, span: Span) -> std::ops::Range<usize> {
    let lo = (span.lo as usize).min(src.len());
    let mut hi = (span.hi as usize).clamp(lo, src.len());
    if hi == lo {
        hi = src[lo..].chars().next().map_or(lo, |c| lo + c.len_utf8());
    }
    while !src.is_char_boundary(hi) {
        hi += 1;
    }
    lo..hi
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

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "kernel @k() block(4) {\n  store @s[%t], %x\n  %y = load @s[%u]\n}\n";

    fn span_of(needle: &str) -> Span {
        let lo = SRC.find(needle).expect("needle");
        Span::new(lo, lo + needle.len())
    }

    fn race() -> Diagnostic {
        Diagnostic::error(DiagKind::Finding, "C0001", "data race")
            .with_label(span_of("%y = load @s[%u]"), "read by thread 1")
            .with_label(span_of("store @s[%t], %x"), "unordered with this write")
            .with_note("in block (0, 0, 0)")
            .with_help("add a barrier\nor a finer sync")
    }

    #[test]
    fn a_race_shows_both_accesses_in_one_snippet_primary_first() {
        let out = race().render("k.kir", SRC, false);
        assert!(out.starts_with("error[C0001]: data race\n"), "{out}");
        assert!(out.contains("--> k.kir:3:3"), "{out}");
        assert!(out.contains("^^^^^^^^^^^^^^^^ read by thread 1"), "{out}");
        assert!(
            out.contains("---------------- unordered with this write"),
            "{out}"
        );
        assert!(out.contains("= note: in block (0, 0, 0)"), "{out}");
        // A multi-line help keeps its second line aligned under the first.
        let help = out.lines().find(|l| l.contains("= help:")).expect("help");
        let next = out.lines().skip_while(|l| !l.contains("= help:")).nth(1);
        let col = help.find("add a barrier").expect("help text");
        assert_eq!(next.map(|l| l.find("or a finer")), Some(Some(col)), "{out}");
        assert!(!out.contains('\x1b'), "plain output has no escapes: {out}");
    }

    #[test]
    fn colour_is_only_on_request() {
        assert!(race().render("k.kir", SRC, true).contains("\x1b["));
    }

    #[test]
    fn a_label_spanning_lines_is_drawn_over_both_lines() {
        let lo = SRC.find("store").expect("store");
        let hi = SRC.find("[%u]").expect("load") + 4;
        let d = Diagnostic::user("E0001", "spans two lines").with_label(Span::new(lo, hi), "here");
        let out = d.render("k.kir", SRC, false);
        assert!(out.contains("2 |"), "{out}");
        assert!(out.contains("3 |"), "{out}");
        assert!(out.contains("|_") && out.contains("here"), "{out}");
    }

    #[test]
    fn labels_without_a_location_and_empty_spans_still_render() {
        let d = Diagnostic::user("E0002", "no location")
            .with_label(Span::UNDEF, "built by a pass")
            .with_label(Span::new(SRC.len(), SRC.len()), "at the end");
        let out = d.render("k.kir", SRC, false);
        assert!(out.contains("= built by a pass"), "{out}");
        assert!(out.contains("at the end"), "{out}");
    }

    #[test]
    fn json_names_both_labels_with_lines_columns_and_bytes() {
        let j = race().to_json("k.kir", SRC).to_string();
        let v: serde_json::Value = serde_json::from_str(&j).expect("valid JSON");
        assert_eq!(v["code"], "C0001");
        assert_eq!(v["severity"], "error");
        assert_eq!(v["kind"], "finding");
        let labels = v["labels"].as_array().expect("labels");
        assert_eq!(labels.len(), 2);
        assert_eq!(labels[0]["primary"], true);
        assert_eq!(labels[0]["line"], 3);
        assert_eq!(labels[0]["column"], 3);
        assert_eq!(labels[0]["end_column"], 19);
        assert_eq!(labels[1]["primary"], false);
        assert_eq!(labels[1]["line"], 2);
        let lo = SRC.find("store").expect("store");
        assert_eq!(labels[1]["byte_start"], lo);
        assert_eq!(labels[1]["byte_end"], lo + "store @s[%t], %x".len());
        assert_eq!(v["notes"][0], "in block (0, 0, 0)");
        assert_eq!(v["help"], "add a barrier\nor a finer sync");
        let undef = Diagnostic::user("E0002", "x").with_label(Span::UNDEF, "m");
        let u: serde_json::Value =
            serde_json::from_str(&undef.to_json("f", SRC).to_string()).expect("JSON");
        assert!(u["labels"][0]["line"].is_null() && u["help"].is_null());
    }
}
