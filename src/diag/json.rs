//! A small JSON writer for the machine-readable output (`--format json`): diagnostics and
//! `sync`'s report. The schema is documented in `docs/diagnostics.md`.
//!
//! Values are built as a [`Json`] tree and written compactly by its `Display`; object keys keep
//! the order they were given (the schema's order), strings are escaped per RFC 8259 (`"`, `\`
//! and control characters; everything else is written as UTF-8). Writing is linear in the size
//! of the tree. Why not serde_json: the output is a handful of fixed shapes, and the writer is
//! shorter than the derive annotations would be; tests parse the output with serde_json (a
//! dev-dependency) so the writer is checked by an independent parser.

use std::fmt;

/// A JSON value. Numbers are integers: nothing smemsync reports is fractional except ratios,
/// which are written with [`Json::Float`].
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    /// Keys in output order.
    Object(Vec<(&'static str, Json)>),
}

impl Json {
    /// An object from `(key, value)` pairs.
    pub fn object(fields: impl IntoIterator<Item = (&'static str, Json)>) -> Json {
        Json::Object(fields.into_iter().collect())
    }
    /// A string value.
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }
    /// `s` as a string, or `null` when absent.
    pub fn opt_str(s: Option<impl Into<String>>) -> Json {
        s.map_or(Json::Null, |s| Json::Str(s.into()))
    }
    /// An unsigned count or position.
    pub fn uint(n: usize) -> Json {
        Json::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Json {
        Json::Bool(b)
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::Str(s.to_string())
    }
}

impl From<String> for Json {
    fn from(s: String) -> Json {
        Json::Str(s)
    }
}

impl From<Vec<Json>> for Json {
    fn from(v: Vec<Json>) -> Json {
        Json::Array(v)
    }
}

/// Writes `s` as a JSON string literal.
fn write_str(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let esc: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            c if (c as u32) < 0x20 => None,
            _ => continue,
        };
        f.write_str(&s[start..i])?;
        match esc {
            Some(e) => f.write_str(e)?,
            None => write!(f, "\\u{:04x}", c as u32)?,
        }
        start = i + c.len_utf8();
    }
    f.write_str(&s[start..])?;
    f.write_str("\"")
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Int(n) => write!(f, "{n}"),
            // JSON has no NaN or infinity.
            Json::Float(x) if !x.is_finite() => f.write_str("null"),
            Json::Float(x) => write!(f, "{x:?}"),
            Json::Str(s) => write_str(f, s),
            Json::Array(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Json::Object(fields) => {
                f.write_str("{")?;
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write_str(f, k)?;
                    write!(f, ":{v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_and_keys_keep_their_order() {
        let v = Json::object([
            ("b", Json::str("a\"b\\c\nd\u{1}é")),
            (
                "a",
                Json::Array(vec![Json::Int(-3), Json::Null, true.into()]),
            ),
            ("f", Json::Float(0.5)),
            ("nan", Json::Float(f64::NAN)),
        ]);
        assert_eq!(
            v.to_string(),
            r#"{"b":"a\"b\\c\nd\u0001é","a":[-3,null,true],"f":0.5,"nan":null}"#
        );
    }
}
