//! TTGIR type and layout text: shapes, element types and encodings of `tensor<...>`,
//! `!ttg.memdesc<...>` and `!tt.ptr<...>`, and the mapping of element types onto `.kir`'s.
//!
//! Invariant: parsing never panics; a type this module cannot read gives `None` and the caller
//! reports it with the location. Complexity: linear in the type text.

/// What a TTGIR type is, as far as shared memory is concerned.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    /// `i32`, `i64`, `index` (integer scalars; i64 is imported as i32, see docs/ttgir.md).
    Int,
    /// `i1`.
    Bool,
    /// A float scalar.
    Float,
    /// A register tensor: shape, element, layout text (`#blocked` or an inline encoding).
    Tensor(Shaped),
    /// A shared-memory descriptor: shape, element, shared encoding.
    Mem(Shaped),
    /// A pointer, a tensor of pointers or a tensor descriptor (global memory).
    Ptr,
    /// `!ttg.async.token`.
    Token,
    /// Anything else (not an operand smemsync needs).
    Other,
}

/// The shape, element type and first encoding of a shaped type.
#[derive(Clone, Debug, PartialEq)]
pub struct Shaped {
    pub shape: Vec<u64>,
    pub elem: String,
    pub enc: Option<String>,
}

impl Shaped {
    /// Number of elements.
    pub fn count(&self) -> u64 {
        self.shape.iter().product::<u64>().max(1)
    }
}

/// Splits `a, b<c, d>, e` at top-level commas.
pub fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut last) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[last..i].trim());
                last = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[last..].trim());
    out
}

/// Reads `128x64xf16, #enc, ...` (the inside of the angle brackets).
fn shaped(inner: &str) -> Option<Shaped> {
    let parts = split_top(inner);
    let dims_elem = parts.first()?;
    let mut shape = Vec::new();
    let mut rest = *dims_elem;
    while let Some((d, r)) = rest.split_once('x') {
        match d.parse::<u64>() {
            Ok(n) => {
                shape.push(n);
                rest = r;
            }
            Err(_) => break,
        }
    }
    Some(Shaped {
        shape,
        elem: rest.to_string(),
        enc: parts.get(1).map(|s| s.to_string()),
    })
}

fn inner<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.strip_prefix(prefix)?.strip_suffix('>')
}

/// Classifies a type's text.
pub fn classify(text: &str) -> Ty {
    match text {
        "i32" | "i64" | "index" | "i16" | "i8" => return Ty::Int,
        "i1" => return Ty::Bool,
        "f16" | "bf16" | "f32" | "f64" | "tf32" => return Ty::Float,
        "!ttg.async.token" => return Ty::Token,
        _ => {}
    }
    if text.starts_with("!tt.ptr") || text.starts_with("!tt.tensordesc") {
        return Ty::Ptr;
    }
    if let Some(i) = inner(text, "tensor<") {
        return match shaped(i) {
            Some(s) if s.elem.starts_with("!tt.ptr") => Ty::Ptr,
            Some(s) => Ty::Tensor(s),
            None => Ty::Other,
        };
    }
    if let Some(i) = inner(text, "!ttg.memdesc<").or_else(|| inner(text, "<")) {
        return shaped(i).map_or(Ty::Other, Ty::Mem);
    }
    if text.starts_with('f') || text.starts_with("!") {
        return Ty::Other;
    }
    Ty::Other
}

/// The `.kir` element type of a TTGIR element type, with how many `.kir` elements one TTGIR
/// element occupies (bytes matter for aliasing; values do not): `None` for an unknown element.
pub fn kir_elem(e: &str) -> Option<(&'static str, u64)> {
    Some(match e {
        "f16" => ("f16", 1),
        "bf16" => ("bf16", 1),
        "f32" | "tf32" => ("f32", 1),
        "i32" => ("i32", 1),
        "i16" => ("i16", 1),
        "i8" | "i1" => ("i8", 1),
        "i64" | "f64" => ("i32", 2),
        e if e.starts_with("f8") => ("i8", 1),
        _ => return None,
    })
}

/// The per-thread `.kir` scalar type of a tensor or scalar element.
pub fn scalar_of(e: &str) -> &'static str {
    match e {
        "i1" => "i1",
        e if e.starts_with('i') || e == "index" => "i32",
        _ => "f32",
    }
}

/// An integer attribute `key = N` inside attribute text such as `{num = 2 : i32}`.
pub fn int_attr(text: &str, key: &str) -> Option<i64> {
    let at = text.find(&format!("{key} ="))?;
    let rest = text[at + key.len() + 2..].trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// An integer list attribute `key = [a, b]` inside encoding text.
pub fn list_attr(text: &str, key: &str) -> Option<Vec<i64>> {
    let at = text.find(&format!("{key} = ["))?;
    let rest = &text[at + key.len() + 4..];
    let end = rest.find(']')?;
    rest[..end]
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().ok())
        .collect()
}

/// The bit width of an integer type text (`i1` → 1, `i8` → 8, `i64` and `index` → 64); 0
/// for anything else.
pub fn int_bits(text: &str) -> u32 {
    match text {
        "i1" => 1,
        "i8" => 8,
        "i16" => 16,
        "i32" => 32,
        "i64" | "index" => 64,
        _ => 0,
    }
}

/// `v` wrapped to `bits` bits and sign-extended (two's complement), as MLIR's `iN` holds it;
/// widths of 64 and unknown widths (0) keep `v`.
pub fn wrap_int(v: i64, bits: u32) -> i64 {
    if bits == 0 || bits >= 64 {
        return v;
    }
    let sh = 64 - bits;
    (v << sh) >> sh
}
