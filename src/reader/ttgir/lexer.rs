//! Tokens of textual TTGIR (what Triton 3.6 prints for `compiled.asm["ttgir"]`), one
//! statement per line.
//!
//! A statement is one source line; `loc(...)` trailers (with nested parentheses) are skipped,
//! and so are `#alias = ...` definitions' bodies beyond one token. Compound types and
//! attributes (`tensor<...>`, `!ttg.memdesc<...>`, `#ttg.blocked<...>`, `<{...}>`) are kept
//! whole as one [`T::Ty`] token with their text, so the converter can read shapes and layouts
//! from them. Invariant: every token's span lies in the source; malformed input (an
//! unterminated string, an unbalanced `<`) is a diagnostic with its location, never a panic.
//! Complexity: O(source length).

use crate::diag::{Diagnostic, Span};

/// A token's kind and payload.
#[derive(Clone, Debug, PartialEq)]
pub enum T {
    /// `%name` (with a `#k` result suffix kept).
    Val(String),
    /// `@name`.
    Sym(String),
    /// `^bb0`.
    Caret(String),
    /// An identifier (`arith.addi`, `i32`, `sgt`).
    Word(String),
    /// A compound type or attribute kept as text.
    Ty(String),
    /// An integer literal.
    Int(i64),
    /// A float literal.
    Float(f64),
    /// A string literal (without quotes).
    Str(String),
    /// Punctuation: `( ) [ ] { } , : = * + ?`.
    P(char),
    /// `->`.
    Arrow,
}

/// A token with its span in the TTGIR source.
#[derive(Clone, Debug)]
pub struct Tok {
    pub t: T,
    pub span: Span,
}

/// One statement (source line) of TTGIR.
#[derive(Clone, Debug)]
pub struct Line {
    pub toks: Vec<Tok>,
    pub span: Span,
}

impl Line {
    /// The word at position `i`, if any.
    pub fn word(&self, i: usize) -> Option<&str> {
        match self.toks.get(i).map(|t| &t.t) {
            Some(T::Word(w)) => Some(w),
            _ => None,
        }
    }
    /// Whether the line ends with `{` (opens a region).
    pub fn opens(&self) -> bool {
        self.toks.last().is_some_and(|t| t.t == T::P('{'))
    }
    /// Whether the line starts with `}` (closes a region).
    pub fn closes(&self) -> bool {
        self.toks.first().is_some_and(|t| t.t == T::P('}'))
    }
}

fn is_id(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'$' || c == b'-'
}

/// The error every lexing failure becomes (E1100), located at `at`.
fn err(src: &str, at: usize, m: &str) -> Diagnostic {
    Diagnostic::user("E1100", format!("malformed TTGIR: {m}"))
        .with_label(Span::new(at, (at + 1).min(src.len())), "here")
}

/// The end of a balanced `open`..`close` group starting at `j` (where `b[j] == open`);
/// strings inside are skipped. `None` when the line ends first.
fn balanced(b: &[u8], mut j: usize, open: u8, close: u8) -> Option<usize> {
    let mut depth = 0i32;
    while j < b.len() {
        match b[j] {
            c if c == open => depth += 1,
            c if c == close && !(close == b'>' && j > 0 && b[j - 1] == b'-') => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            b'"' => {
                j += 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
            }
            b'\n' => return None,
            _ => {}
        }
        j += 1;
    }
    None
}

/// Splits TTGIR into lines of tokens.
pub fn lex_lines(src: &str) -> Result<Vec<Line>, Diagnostic> {
    let b = src.as_bytes();
    let mut lines = Vec::new();
    let mut cur: Vec<Tok> = Vec::new();
    let mut line_start = 0usize;
    let mut i = 0usize;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c == b'\n' {
            if !cur.is_empty() {
                lines.push(Line {
                    toks: std::mem::take(&mut cur),
                    span: Span::new(line_start, i),
                });
            }
            i += 1;
            line_start = i;
            continue;
        }
        if matches!(c, b' ' | b'\t' | b'\r') {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let (t, next) = lex_one(src, i)?;
        i = next;
        if let Some(t) = t {
            cur.push(Tok {
                t,
                span: Span::new(start, i),
            });
        }
    }
    if !cur.is_empty() {
        lines.push(Line {
            toks: cur,
            span: Span::new(line_start, b.len()),
        });
    }
    Ok(lines)
}

/// One token starting at `i` (not whitespace): the token (none for a skipped `loc(...)`) and
/// the offset after it.
fn lex_one(src: &str, mut i: usize) -> Result<(Option<T>, usize), Diagnostic> {
    let b = src.as_bytes();
    let start = i;
    let c = b[i];
    match c {
        b'%' | b'@' | b'^' => {
            i += 1;
            if b.get(i) == Some(&b'"') {
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += 1;
                }
                if b.get(i) != Some(&b'"') {
                    return Err(err(src, start, "unterminated quoted name"));
                }
                i += 1;
            } else {
                while i < b.len() && is_id(b[i]) && !(b[i] == b'-' && b.get(i + 1) == Some(&b'>'))
                {
                    i += 1;
                }
            }
            if c == b'%' && b.get(i) == Some(&b'#') && b.get(i + 1).is_some_and(u8::is_ascii_digit)
            {
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            let name = src[start + 1..i].trim_matches('"').to_string();
            if name.is_empty() {
                return Err(err(src, start, "a name is missing after the sigil"));
            }
            let t = match c {
                b'%' => T::Val(name),
                b'@' => T::Sym(name),
                _ => T::Caret(name),
            };
            Ok((Some(t), i))
        }
        b'!' | b'#' => {
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            if b.get(i) == Some(&b'<') {
                i = balanced(b, i, b'<', b'>')
                    .ok_or_else(|| err(src, start, "unbalanced `<` in a type or attribute"))?;
            }
            Ok((Some(T::Ty(src[start..i].to_string())), i))
        }
        b'<' => {
            let end = balanced(b, i, b'<', b'>')
                .ok_or_else(|| err(src, start, "unbalanced `<` in a type or attribute"))?;
            Ok((Some(T::Ty(src[start..end].to_string())), end))
        }
        b'"' => lex_string(src, i),
        b'-' if b.get(i + 1) == Some(&b'>') => Ok((Some(T::Arrow), i + 2)),
        b'0'..=b'9' | b'-' | b'+' if c != b'+' || b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
            lex_number(src, i)
        }
        c if c.is_ascii_alphabetic() || c == b'_' => {
            while i < b.len() && is_id(b[i]) && !(b[i] == b'-' && b.get(i + 1) == Some(&b'>')) {
                i += 1;
            }
            let w = &src[start..i];
            if w == "loc" && b.get(i) == Some(&b'(') {
                let end = balanced(b, i, b'(', b')')
                    .ok_or_else(|| err(src, start, "unbalanced `(` in a location"))?;
                return Ok((None, end));
            }
            if b.get(i) == Some(&b'<') {
                let end = balanced(b, i, b'<', b'>')
                    .ok_or_else(|| err(src, start, "unbalanced `<` in a type"))?;
                return Ok((Some(T::Ty(src[start..end].to_string())), end));
            }
            Ok((Some(T::Word(w.to_string())), i))
        }
        b'(' | b')' | b'[' | b']' | b'{' | b'}' | b',' | b':' | b'=' | b'*' | b'+' | b'?' => {
            Ok((Some(T::P(c as char)), i + 1))
        }
        _ => {
            let ch = src[i..].chars().next().unwrap_or(' ');
            Err(err(src, start, &format!("unexpected character `{ch}`")))
        }
    }
}

fn lex_string(src: &str, mut i: usize) -> Result<(Option<T>, usize), Diagnostic> {
    let b = src.as_bytes();
    let start = i;
    i += 1;
    let mut s = String::new();
    while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
        if b[i] == b'\\' && i + 1 < b.len() {
            s.push(b[i + 1] as char);
            i += 2;
        } else {
            let ch = src[i..].chars().next().unwrap_or(' ');
            s.push(ch);
            i += ch.len_utf8();
        }
    }
    if b.get(i) != Some(&b'"') {
        return Err(err(src, start, "unterminated string"));
    }
    Ok((Some(T::Str(s)), i + 1))
}

fn lex_number(src: &str, mut i: usize) -> Result<(Option<T>, usize), Diagnostic> {
    let b = src.as_bytes();
    let start = i;
    i += 1;
    if b[start] == b'0' && b.get(i) == Some(&b'x') {
        i += 1;
        while i < b.len() && b[i].is_ascii_hexdigit() {
            i += 1;
        }
        let v = u64::from_str_radix(&src[start + 2..i], 16)
            .map_err(|_| err(src, start, "bad hex literal"))?;
        return Ok((Some(T::Int(v as i64)), i));
    }
    let mut float = false;
    while i < b.len() {
        let d = b[i];
        if d.is_ascii_digit() {
            i += 1;
        } else if d == b'.' && !float {
            float = true;
            i += 1;
        } else if (d == b'e' || d == b'E') && i > start + 1 {
            float = true;
            i += 1;
            if matches!(b.get(i), Some(b'+') | Some(b'-')) {
                i += 1;
            }
        } else {
            break;
        }
    }
    let text = &src[start..i];
    let t = if float {
        T::Float(text.parse().map_err(|_| err(src, start, "bad float literal"))?)
    } else {
        T::Int(text.parse().map_err(|_| err(src, start, "bad integer literal"))?)
    };
    Ok((Some(t), i))
}
