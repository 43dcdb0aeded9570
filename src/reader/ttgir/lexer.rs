//! Tokens of textual TTGIR (what Triton 3.6 prints for `compiled.asm["ttgir"]`), one
//! statement per line: the shared MLIR lexer ([`crate::reader::mlir_lexer`]) with TTGIR's
//! settings. `loc(...)` trailers (with nested parentheses) are skipped; a `<` always opens a
//! compound type or attribute kept whole as one [`T::Ty`] token with its text (`tensor<...>`,
//! `!ttg.memdesc<...>`, `#ttg.blocked<...>`, `<{...}>`), so the converter can read shapes and
//! layouts from them; words may contain `-`. Malformed input is E1100 with its location,
//! never a panic. Complexity: O(source length).

use crate::diag::Diagnostic;
use crate::reader::mlir_lexer::Syntax;
pub use crate::reader::mlir_lexer::{Line, T, Tok};

const TTGIR_SYNTAX: Syntax = Syntax {
    code: "E1100",
    prefix: "malformed TTGIR: ",
    skip_loc: true,
    angle_punct: false,
    dash_words: true,
};

/// Splits TTGIR into lines of tokens.
pub fn lex_lines(src: &str) -> Result<Vec<Line>, Diagnostic> {
    crate::reader::mlir_lexer::lex_lines(src, &TTGIR_SYNTAX)
}
