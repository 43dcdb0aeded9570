//! Reading kernels: the lexer and parser of the text format (`docs/ir.md`).

pub mod lexer;
pub mod parser;
mod scope;

pub use parser::{Module, parse, parse_kernel};
pub mod mlir;
pub mod mlir_lexer;
pub mod ttgir;
