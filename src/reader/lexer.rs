//! Tokens of the kernel text format, with byte spans.
//!
//! Whitespace and `//` comments separate tokens. A word may contain letters, digits, `_` and
//! `.` (so `tid.x` and `cp.async`-style names are one token). `%name` and `@name` are value and
//! symbol references. Numbers are decimal (optionally negative; a `.`, `e` or `inf`/`nan` makes
//! a float); an integer outside i64 is an error, never a float. Complexity: O(n) in the source length; never panics on any input.
//!
//! Tokens borrow their text from the source, and [`Lexer`] hands them out one at a time, so
//! that the parser holds two tokens rather than a vector of the whole file (at 10^6 ops that
//! vector and its strings were 12% of `sync`'s instructions and a third of its peak memory).

use crate::diag::{Diagnostic, Span};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tok<'a> {
    Word(&'a str),
    /// `%name`
    Local(&'a str),
    /// `@name`
    Symbol(&'a str),
    Int(i64),
    Float(f64),
    Str(&'a str),
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Colon,
    Eq,
    /// `<-`
    Arrow,
    /// `#dialect.name<...>` (balanced angle brackets) or `#name`: an attribute's text,
    /// verbatim (layout definitions quote Triton's encodings this way).
    Attr(&'a str),
    Eof,
}

impl Tok<'_> {
    pub fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("`{w}`"),
            Tok::Local(n) => format!("`%{n}`"),
            Tok::Symbol(n) => format!("`@{n}`"),
            Tok::Int(i) => format!("integer `{i}`"),
            Tok::Float(f) => format!("float `{f}`"),
            Tok::Str(s) => format!("string \"{s}\""),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBracket => "`[`".into(),
            Tok::RBracket => "`]`".into(),
            Tok::LBrace => "`{`".into(),
            Tok::RBrace => "`}`".into(),
            Tok::Comma => "`,`".into(),
            Tok::Colon => "`:`".into(),
            Tok::Eq => "`=`".into(),
            Tok::Arrow => "`<-`".into(),
            Tok::Attr(a) => format!("attribute `{a}`"),
            Tok::Eof => "end of input".into(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Token<'a> {
    pub tok: Tok<'a>,
    pub span: Span,
}

/// The bytes that continue a word or name: ASCII letters and digits, `_` and `.` (a table, so
/// that scanning a name is one load and one test a byte).
const WORD_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'.';
        b += 1;
    }
    t
};

fn is_word_byte(b: u8) -> bool {
    WORD_BYTE[usize::from(b)]
}

/// Where the run of word bytes starting at `from` ends.
fn word_end(bytes: &[u8], from: usize) -> usize {
    bytes
        .get(from..)
        .and_then(|rest| rest.iter().position(|&b| !is_word_byte(b)))
        .map_or(bytes.len().max(from), |n| from + n)
}

/// The end of the attribute starting with `#` at `start`: its name, then (if `<` follows)
/// everything up to the matching `>`, skipping quoted strings.
#[inline(never)]
fn attr_end(src: &str, start: usize) -> Result<usize, Diagnostic> {
    let bytes = src.as_bytes();
    let mut i = word_end(bytes, start + 1);
    if i == start + 1 {
        return Err(Diagnostic::user("E0001", "expected a name after `#`")
            .with_label(Span::new(start, start + 1), "name missing here"));
    }
    if i >= src.len() || bytes[i] != b'<' {
        return Ok(i);
    }
    let mut depth = 0usize;
    let mut in_str = false;
    while i < src.len() {
        match bytes[i] {
            b'"' => in_str = !in_str,
            b'<' if !in_str => depth += 1,
            b'>' if !in_str => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            b'\n' => break,
            _ => {}
        }
        i += 1;
    }
    Err(Diagnostic::user("E0002", "unterminated attribute")
        .with_label(Span::new(start, i), "`<` without its closing `>` on this line"))
}

/// Splits `src` into tokens; the last token is always `Eof`.
pub fn lex(src: &str) -> Result<Vec<Token<'_>>, Diagnostic> {
    let mut lx = Lexer::new(src);
    let mut out = Vec::new();
    loop {
        let t = lx.next_token()?;
        out.push(t);
        if t.tok == Tok::Eof {
            return Ok(out);
        }
    }
}

/// The tokens of a source text, one at a time (what [`lex`] collects).
#[derive(Clone, Debug)]
pub struct Lexer<'a> {
    src: &'a str,
    /// Where the next token's search starts.
    at: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str) -> Self {
        Lexer { src, at: 0 }
    }

    /// The next token; `Eof` at the end of the text (and again on every later call). After
    /// an error the lexer stays where the bad token starts.
    pub fn next_token(&mut self) -> Result<Token<'a>, Diagnostic> {
        let src = self.src;
        let bytes = src.as_bytes();
        let mut i = self.at;
        while let Some(&b) = bytes.get(i) {
            // Whitespace and comments by their first byte; a non-ASCII character is decoded
            // (Unicode whitespace separates tokens too).
            let c = match b {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => {
                    i += 1;
                    continue;
                }
                b'/' if bytes.get(i + 1) == Some(&b'/') => {
                    i = src[i..].find('\n').map_or(src.len(), |n| i + n);
                    continue;
                }
                _ if b.is_ascii() => char::from(b),
                _ => match non_ascii(src, i) {
                    (c, true) => {
                        i += c.len_utf8();
                        continue;
                    }
                    (c, false) => c,
                },
            };
            self.at = i;
            let (tok, end) = token(src, i, c)?;
            self.at = end;
            return Ok(Token {
                tok,
                span: Span::new(i, end),
            });
        }
        self.at = src.len();
        Ok(Token {
            tok: Tok::Eof,
            span: Span::new(src.len(), src.len()),
        })
    }
}

/// The non-ASCII character at byte `i` and whether it is whitespace (apart from the hot
/// path: kernels are ASCII).
#[cold]
#[inline(never)]
fn non_ascii(src: &str, i: usize) -> (char, bool) {
    let c = src[i..].chars().next().unwrap_or(' ');
    (c, c.is_whitespace())
}

/// The error for a character that starts no token (out of line: the lexer's hot path
/// keeps a small frame without the diagnostic's construction).
#[cold]
#[inline(never)]
fn unexpected(start: usize, c: char) -> Diagnostic {
    Diagnostic::user("E0004", format!("unexpected character `{c}`"))
        .with_label(Span::new(start, start + c.len_utf8()), "not valid here")
}

/// The error for a `%` or `@` that no name follows.
#[cold]
#[inline(never)]
fn missing_name(start: usize, i: usize, sigil: char) -> Diagnostic {
    Diagnostic::user("E0001", format!("expected a name after `{sigil}`"))
        .with_label(Span::new(start, i.max(start + 1)), "name missing here")
}

/// The token starting at `start` (whose first character is `c`) and where it ends: one
/// match on `c` (its cases are disjoint).
fn token(src: &str, start: usize, c: char) -> Result<(Tok<'_>, usize), Diagnostic> {
    let single = |t| Ok((t, start + 1));
    let next = src.as_bytes().get(start + 1).copied();
    match c {
        '(' => single(Tok::LParen),
        ')' => single(Tok::RParen),
        '[' => single(Tok::LBracket),
        ']' => single(Tok::RBracket),
        '{' => single(Tok::LBrace),
        '}' => single(Tok::RBrace),
        ',' => single(Tok::Comma),
        ':' => single(Tok::Colon),
        '=' => single(Tok::Eq),
        '<' if next == Some(b'-') => Ok((Tok::Arrow, start + 2)),
        '#' => {
            let end = attr_end(src, start)?;
            Ok((Tok::Attr(&src[start..end]), end))
        }
        '%' | '@' => name(src, start, c),
        '"' => string(src, start),
        '-' if next.is_some_and(|d| d.is_ascii_digit() || d == b'i') => number(src, start),
        _ if c.is_ascii_digit() => number(src, start),
        _ if c.is_ascii_alphabetic() || c == '_' => Ok(word(src, start)),
        _ => Err(unexpected(start, c)),
    }
}

/// `%name` or `@name` (`sigil` is `%` or `@`).
fn name(src: &str, start: usize, sigil: char) -> Result<(Tok<'_>, usize), Diagnostic> {
    let bytes = src.as_bytes();
    let s = start + 1;
    let i = word_end(bytes, s);
    if i == s {
        return Err(missing_name(start, i, sigil));
    }
    let name = &src[s..i];
    let tok = if sigil == '%' {
        Tok::Local(name)
    } else {
        Tok::Symbol(name)
    };
    Ok((tok, i))
}

/// A string literal on one line.
#[inline(never)]
fn string(src: &str, start: usize) -> Result<(Tok<'_>, usize), Diagnostic> {
    let bytes = src.as_bytes();
    let mut i = start + 1;
    let s = i;
    while i < src.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
        i += 1;
    }
    if i >= src.len() || bytes[i] != b'"' {
        return Err(Diagnostic::user("E0002", "unterminated string")
            .with_label(Span::new(start, i), "string starts here"));
    }
    Ok((Tok::Str(&src[s..i]), i + 1))
}

/// An integer or float literal (`-3`, `1.5e-5`, `-inf`).
fn number(src: &str, start: usize) -> Result<(Tok<'static>, usize), Diagnostic> {
    let bytes = src.as_bytes();
    let mut i = start + 1;
    while i < src.len() && is_word_byte(bytes[i]) {
        // allow exponents like 1e-5
        i += 1;
        if (bytes[i - 1] == b'e' || bytes[i - 1] == b'E')
            && i < src.len()
            && (bytes[i] == b'-' || bytes[i] == b'+')
        {
            i += 1;
        }
    }
    let text = &src[start..i];
    match text.parse::<i64>() {
        Ok(v) => Ok((Tok::Int(v), i)),
        Err(_) => non_int(text, start, i).map(|t| (t, i)),
    }
}

/// A number token `text` (at `start..end`) that is no i64: a float, or an error (out of
/// line: integers are the common case).
#[inline(never)]
fn non_int(text: &str, start: usize, end: usize) -> Result<Tok<'static>, Diagnostic> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        Err(Diagnostic::user(
            "E0165",
            format!("integer `{text}` does not fit in 64 bits"),
        )
        .with_label(Span::new(start, end), "out of the i64 range"))
    } else if text == "-inf" {
        Ok(Tok::Float(f64::NEG_INFINITY))
    } else if let (true, Ok(v)) = (
        text.chars()
            .all(|ch| ch.is_ascii_digit() || "+-.eE".contains(ch)),
        text.parse::<f64>(),
    ) {
        Ok(Tok::Float(v))
    } else {
        Err(
            Diagnostic::user("E0003", format!("malformed number `{text}`"))
                .with_label(Span::new(start, end), "not a number"),
        )
    }
}

/// A keyword or op name (`inf` and `nan` are floats).
fn word(src: &str, start: usize) -> (Tok<'_>, usize) {
    let i = word_end(src.as_bytes(), start);
    let tok = match &src[start..i] {
        "inf" => Tok::Float(f64::INFINITY),
        "nan" => Tok::Float(f64::NAN),
        w => Tok::Word(w),
    };
    (tok, i)
}
