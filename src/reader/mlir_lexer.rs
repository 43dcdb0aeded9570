//! Tokens of MLIR's textual form, one statement per line, shared by the two MLIR readers:
//! [`crate::reader::mlir`] (the dialects smemsync emits) and [`crate::reader::ttgir`]
//! (Triton's TTGIR). A [`Syntax`] holds what differs between them: the error code and
//! message prefix, whether `loc(...)` trailers are skipped, and whether a bare `<` is
//! punctuation (MLIR's elided-dialect types aside) or always opens a type.
//!
//! Compound types and attributes (`tensor<...>`, `!ttg.memdesc<...>`, `#ttg.blocked<...>`,
//! `memref<...>`) are kept whole as one [`T::Ty`] token with their text. Invariant: every
//! token's span lies in the source; malformed input (an unterminated string or quoted name,
//! an unbalanced `<`, a bad number) is a diagnostic with its location, never a panic.
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
    /// Punctuation: `( ) [ ] { } , : = * + ?` (and `< >` where [`Syntax::angle_punct`]).
    P(char),
    /// `->`.
    Arrow,
}

/// A token with its span in the source.
#[derive(Clone, Debug)]
pub struct Tok {
    pub t: T,
    pub span: Span,
}

/// One statement (source line) of tokens.
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
    /// How many `{` the line holds.
    pub fn opens(&self) -> usize {
        self.toks.iter().filter(|t| t.t == T::P('{')).count()
    }
    /// How many `}` the line holds.
    pub fn closes(&self) -> usize {
        self.toks.iter().filter(|t| t.t == T::P('}')).count()
    }
    /// Whether the line starts with `}` (closes a region).
    pub fn starts_with_close(&self) -> bool {
        self.toks.first().is_some_and(|t| t.t == T::P('}'))
    }
    /// Whether the line ends with `{` (opens a region).
    pub fn ends_with_open(&self) -> bool {
        self.toks.last().is_some_and(|t| t.t == T::P('{'))
    }
}

/// What differs between the readers that share this lexer.
pub struct Syntax {
    /// The code of every lexing error, and the prefix of its message.
    pub code: &'static str,
    pub prefix: &'static str,
    /// Whether `loc(...)` trailers (with nested parentheses) are skipped.
    pub skip_loc: bool,
    /// Whether `<` and `>` are punctuation, except a `<` right after `->`, `:`, `,` or `(`
    /// (a type with its dialect prefix elided); otherwise `<` always opens a balanced type.
    pub angle_punct: bool,
    /// Whether bare words may contain `-` (TTGIR's `ttg.num-warps`-style keys).
    pub dash_words: bool,
}

fn is_id(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'$' || c == b'-'
}

type R<X> = Result<X, Diagnostic>;

/// The lexer's state: the source, the position, the tokens of the line being read and the
/// lines read so far.
struct Lexer<'s> {
    syn: &'s Syntax,
    src: &'s str,
    b: &'s [u8],
    i: usize,
    lines: Vec<Line>,
    cur: Vec<Tok>,
    line_start: usize,
}

/// Splits `src` into lines of tokens under `syn`.
pub fn lex_lines(src: &str, syn: &Syntax) -> R<Vec<Line>> {
    let mut lx = Lexer {
        syn,
        src,
        b: src.as_bytes(),
        i: 0,
        lines: Vec::new(),
        cur: Vec::new(),
        line_start: 0,
    };
    while lx.i < lx.b.len() {
        let (c, start) = (lx.b[lx.i], lx.i);
        let next = lx.b.get(lx.i + 1).copied();
        let t = match c {
            b'\n' => {
                lx.end_line(lx.i);
                lx.i += 1;
                lx.line_start = lx.i;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                lx.i += 1;
                continue;
            }
            b'/' if next == Some(b'/') => {
                lx.skip_while(|d| d != b'\n');
                continue;
            }
            _ => match lx.token(c, next)? {
                Some(t) => t,
                None => continue,
            },
        };
        lx.cur.push(Tok {
            t,
            span: Span::new(start, lx.i),
        });
    }
    lx.end_line(lx.b.len());
    Ok(lx.lines)
}

impl Lexer<'_> {
    fn err(&self, at: usize, m: &str) -> Diagnostic {
        Diagnostic::user(self.syn.code, format!("{}{m}", self.syn.prefix))
            .with_label(Span::new(at, (at + 1).min(self.src.len())), "here")
    }

    /// One token starting at `c` (not whitespace); `None` for a skipped `loc(...)`.
    fn token(&mut self, c: u8, next: Option<u8>) -> R<Option<T>> {
        let start = self.i;
        let after_type_sep = matches!(
            self.cur.last().map(|t| &t.t),
            Some(T::Arrow | T::P(':') | T::P(',') | T::P('('))
        );
        Ok(Some(match c {
            b'%' | b'@' | b'^' => self.name(c)?,
            b'!' | b'#' => self.type_or_attr()?,
            b'"' => self.string()?,
            b'-' if next == Some(b'>') => {
                self.i += 2;
                T::Arrow
            }
            b'+' if !next.is_some_and(|d| d.is_ascii_digit()) => {
                self.i += 1;
                T::P('+')
            }
            b'0'..=b'9' | b'-' | b'+' => self.number(c)?,
            c if c.is_ascii_alphabetic() || c == b'_' => return self.word(),
            b'<' if !self.syn.angle_punct || after_type_sep => {
                // A type with its dialect prefix elided (`: <memorySpace = ...>`).
                self.i = self
                    .balanced(start)
                    .ok_or_else(|| self.err(start, "unbalanced `<` in a type or attribute"))?;
                T::Ty(self.src[start..self.i].to_string())
            }
            b'<' | b'>' if self.syn.angle_punct => {
                self.i += 1;
                T::P(c as char)
            }
            b'(' | b')' | b'[' | b']' | b'{' | b'}' | b',' | b':' | b'=' | b'?' | b'*' => {
                self.i += 1;
                T::P(c as char)
            }
            _ => {
                let ch = self.src[start..].chars().next().unwrap_or(' ');
                return Err(self.err(start, &format!("unexpected character `{ch}`")));
            }
        }))
    }

    /// Ends the line being read at byte `end` (a line with no tokens is dropped).
    fn end_line(&mut self, end: usize) {
        if !self.cur.is_empty() {
            self.lines.push(Line {
                toks: std::mem::take(&mut self.cur),
                span: Span::new(self.line_start, end),
            });
        }
    }

    fn skip_while(&mut self, f: impl Fn(u8) -> bool) {
        while self.i < self.b.len() && f(self.b[self.i]) {
            self.i += 1;
        }
    }

    /// The end of the group opening with `open` at `j` and closing with `close` (nested,
    /// strings skipped, the `>` of `->` not a close); `None` when the line ends first.
    fn balanced_by(&self, mut j: usize, open: u8, close: u8) -> Option<usize> {
        let b = self.b;
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

    fn balanced(&self, j: usize) -> Option<usize> {
        self.balanced_by(j, b'<', b'>')
    }

    /// `%value`, `@symbol` or `^block` (sigil `c`), the name possibly quoted; `%x#1` names
    /// result 1 of the multi-result `%x:2`.
    fn name(&mut self, c: u8) -> R<T> {
        let (b, start) = (self.b, self.i);
        self.i += 1;
        if b.get(self.i) == Some(&b'"') {
            self.i += 1;
            self.skip_while(|d| d != b'"' && d != b'\n');
            if b.get(self.i) != Some(&b'"') {
                return Err(self.err(start, "unterminated quoted name"));
            }
            self.i += 1;
        } else {
            while self.i < b.len()
                && is_id(b[self.i])
                && !(b[self.i] == b'-' && b.get(self.i + 1) == Some(&b'>'))
            {
                self.i += 1;
            }
        }
        if c == b'%'
            && b.get(self.i) == Some(&b'#')
            && b.get(self.i + 1).is_some_and(u8::is_ascii_digit)
        {
            self.i += 1;
            self.skip_while(|d| d.is_ascii_digit());
        }
        let name = self.src[start + 1..self.i].trim_matches('"').to_string();
        if name.is_empty() {
            return Err(self.err(start, "a name is missing after the sigil"));
        }
        Ok(match c {
            b'%' => T::Val(name),
            b'@' => T::Sym(name),
            _ => T::Caret(name),
        })
    }

    /// A `!type` or `#attribute`, with its `<…>` parameters.
    fn type_or_attr(&mut self) -> R<T> {
        let start = self.i;
        self.i += 1;
        self.skip_while(|d| d.is_ascii_alphanumeric() || d == b'_' || d == b'.');
        if self.b.get(self.i) == Some(&b'<') {
            self.i = self
                .balanced(self.i)
                .ok_or_else(|| self.err(start, "unbalanced `<` in a type or attribute"))?;
        }
        Ok(T::Ty(self.src[start..self.i].to_string()))
    }

    /// A `"…"` string literal on one line (backslash escapes one character).
    fn string(&mut self) -> R<T> {
        let (b, start) = (self.b, self.i);
        self.i += 1;
        let mut s = String::new();
        while self.i < b.len() && b[self.i] != b'"' && b[self.i] != b'\n' {
            if b[self.i] == b'\\' && self.i + 1 < b.len() {
                s.push(b[self.i + 1] as char);
                self.i += 2;
            } else {
                let ch = self.src[self.i..].chars().next().unwrap_or(' ');
                s.push(ch);
                self.i += ch.len_utf8();
            }
        }
        if b.get(self.i) != Some(&b'"') {
            return Err(self.err(start, "unterminated string"));
        }
        self.i += 1;
        Ok(T::Str(s))
    }

    /// An integer (decimal or `0x` hex) or float literal starting with `c`.
    fn number(&mut self, c: u8) -> R<T> {
        let (b, start) = (self.b, self.i);
        self.i += 1;
        if c == b'0' && b.get(self.i) == Some(&b'x') {
            self.i += 1;
            self.skip_while(|d| d.is_ascii_hexdigit());
            let v = u64::from_str_radix(&self.src[start + 2..self.i], 16)
                .map_err(|_| self.err(start, "bad hex literal"))?;
            return Ok(T::Int(v as i64));
        }
        let mut float = false;
        while self.i < b.len() {
            let d = b[self.i];
            if d.is_ascii_digit() {
                self.i += 1;
            } else if d == b'.' && !float {
                float = true;
                self.i += 1;
            } else if (d == b'e' || d == b'E') && self.i > start + 1 {
                float = true;
                self.i += 1;
                if matches!(b.get(self.i), Some(b'+') | Some(b'-')) {
                    self.i += 1;
                }
            } else {
                break;
            }
        }
        let text = &self.src[start..self.i];
        Ok(if float {
            T::Float(text.parse().map_err(|_| self.err(start, "bad float literal"))?)
        } else {
            T::Int(text.parse().map_err(|_| self.err(start, "bad integer literal"))?)
        })
    }

    /// A bare word (an op name, a keyword), a type such as `vector<4xf32>` when `<` follows
    /// it, or nothing for a skipped `loc(...)`.
    fn word(&mut self) -> R<Option<T>> {
        let start = self.i;
        let dash = self.syn.dash_words;
        let b = self.b;
        let word_byte = |j: usize| match b[j] {
            b'-' => dash && b.get(j + 1) != Some(&b'>'),
            d => is_id(d),
        };
        while self.i < b.len() && word_byte(self.i) {
            self.i += 1;
        }
        let w = &self.src[start..self.i];
        if self.syn.skip_loc && w == "loc" && b.get(self.i) == Some(&b'(') {
            self.i = self
                .balanced_by(self.i, b'(', b')')
                .ok_or_else(|| self.err(start, "unbalanced `(` in a location"))?;
            return Ok(None);
        }
        if b.get(self.i) == Some(&b'<') {
            self.i = self
                .balanced(self.i)
                .ok_or_else(|| self.err(start, "unbalanced `<` in a type"))?;
            return Ok(Some(T::Ty(self.src[start..self.i].to_string())));
        }
        Ok(Some(T::Word(w.to_string())))
    }
}
