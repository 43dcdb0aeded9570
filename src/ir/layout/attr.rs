//! The text of a layout attribute, parsed: `#dialect.name<{key = value, ...}>`.
//!
//! Values are integers, booleans (`true`/`false`), references `#name` to other layout
//! definitions, nested attributes, and bracketed lists of values. Every node keeps its byte
//! offset within the attribute text, so a diagnostic points at the offending key or value.
//! Grammar: MLIR's attribute-dictionary syntax as Triton 3.6 prints its encodings.
//! Complexity: O(n) in the text length; never panics (depth is capped).

/// A parsed value with its byte range within the attribute text.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub at: (usize, usize),
    pub val: Val,
}

/// The value of one node.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Int(i64),
    Bool(bool),
    /// `#name`: a reference to another layout definition.
    Ref(String),
    /// `#dialect.name<{...}>` or `#dialect.name` with no parameters.
    Attr(Attr),
    List(Vec<Node>),
    /// Anything else, kept as text (`loc(...)`, strings): never interpreted.
    Other(String),
}

/// An attribute: its full name (`ttg.blocked`) and its parameters in source order.
#[derive(Clone, Debug, PartialEq)]
pub struct Attr {
    pub name: String,
    pub params: Vec<(String, Node)>,
}

/// A parse error: what was expected, at which byte offset of the text.
#[derive(Clone, Debug, PartialEq)]
pub struct AttrError {
    pub at: usize,
    pub msg: String,
}

const MAX_DEPTH: usize = 32;

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

/// Parses a whole attribute text (which starts with `#`).
pub fn parse(text: &str) -> Result<Node, AttrError> {
    let mut p = P {
        s: text.as_bytes(),
        i: 0,
    };
    let n = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return p.err("the end of the attribute");
    }
    Ok(n)
}

impl P<'_> {
    fn err<T>(&self, what: &str) -> Result<T, AttrError> {
        Err(AttrError {
            at: self.i,
            msg: format!("expected {what}"),
        })
    }
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> Result<(), AttrError> {
        if self.eat(c) {
            Ok(())
        } else {
            self.err(&format!("`{}`", c as char))
        }
    }
    fn word(&mut self) -> String {
        let st = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || b"_.".contains(&self.s[self.i]))
        {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[st..self.i]).into_owned()
    }

    /// Text up to the `>` closing an already opened `<` (consumed), nesting respected.
    fn raw_until_close(&mut self) -> Result<String, AttrError> {
        let st = self.i;
        let mut depth = 1usize;
        while self.i < self.s.len() {
            match self.s[self.i] {
                b'<' => depth += 1,
                b'>' => {
                    depth -= 1;
                    if depth == 0 {
                        let t = String::from_utf8_lossy(&self.s[st..self.i]).into_owned();
                        self.i += 1;
                        return Ok(t);
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
        self.err("`>`")
    }

    fn value(&mut self, depth: usize) -> Result<Node, AttrError> {
        if depth > MAX_DEPTH {
            return self.err("a less deeply nested value");
        }
        self.ws();
        let st = self.i;
        let val = match self.s.get(self.i) {
            Some(b'#') => {
                self.i += 1;
                let name = self.word();
                if name.is_empty() {
                    return self.err("a name after `#`");
                }
                if self.s.get(self.i) == Some(&b'<') {
                    self.i += 1;
                    self.ws();
                    if self.s.get(self.i) != Some(&b'{') {
                        // Not a parameter dictionary (e.g. padded_shared's `[32:+4] {...}`):
                        // kept as text up to the matching `>`.
                        let raw = self.raw_until_close()?;
                        return Ok(Node {
                            at: (st, self.i),
                            val: Val::Attr(Attr {
                                name,
                                params: vec![(
                                    String::new(),
                                    Node {
                                        at: (st, self.i),
                                        val: Val::Other(raw),
                                    },
                                )],
                            }),
                        });
                    }
                    let params = self.dict(depth)?;
                    self.expect(b'>')?;
                    Val::Attr(Attr { name, params })
                } else if name.contains('.') {
                    Val::Attr(Attr {
                        name,
                        params: Vec::new(),
                    })
                } else {
                    Val::Ref(name)
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                if !self.eat(b']') {
                    loop {
                        items.push(self.value(depth + 1)?);
                        if self.eat(b']') {
                            break;
                        }
                        self.expect(b',')?;
                    }
                }
                Val::List(items)
            }
            Some(c) if c.is_ascii_digit() || *c == b'-' => {
                self.i += 1;
                while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                    self.i += 1;
                }
                let t = String::from_utf8_lossy(&self.s[st..self.i]);
                match t.parse::<i64>() {
                    Ok(v) => Val::Int(v),
                    Err(_) => {
                        self.i = st;
                        return self.err("an integer that fits in 64 bits");
                    }
                }
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let w = self.word();
                match w.as_str() {
                    "true" => Val::Bool(true),
                    "false" => Val::Bool(false),
                    _ => Val::Other(w),
                }
            }
            _ => return self.err("a value (integer, boolean, list, or `#attribute`)"),
        };
        Ok(Node {
            at: (st, self.i),
            val,
        })
    }

    /// `{key = value, ...}` (the braces are required by Triton's printer).
    fn dict(&mut self, depth: usize) -> Result<Vec<(String, Node)>, AttrError> {
        self.expect(b'{')?;
        let mut out = Vec::new();
        if self.eat(b'}') {
            return Ok(out);
        }
        loop {
            self.ws();
            let k = self.word();
            if k.is_empty() {
                return self.err("a parameter name");
            }
            self.expect(b'=')?;
            let v = self.value(depth + 1)?;
            out.push((k, v));
            if self.eat(b'}') {
                return Ok(out);
            }
            self.expect(b',')?;
        }
    }
}

impl Attr {
    /// The parameter `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_encoding_parses_with_offsets() {
        let t = "#ttg.blocked<{sizePerThread = [1, 8], order = [1, 0]}>";
        let n = parse(t).unwrap();
        let Val::Attr(a) = n.val else { panic!() };
        assert_eq!(a.name, "ttg.blocked");
        let spt = a.get("sizePerThread").unwrap();
        assert_eq!(&t[spt.at.0..spt.at.1], "[1, 8]");
    }

    #[test]
    fn references_and_booleans_parse() {
        let n = parse("#ttg.slice<{dim = 1, parent = #blocked1, x = true}>").unwrap();
        let Val::Attr(a) = n.val else { panic!() };
        assert_eq!(a.get("parent").unwrap().val, Val::Ref("blocked1".into()));
        assert_eq!(a.get("x").unwrap().val, Val::Bool(true));
    }

    #[test]
    fn malformed_text_is_an_error_at_its_offset() {
        let e = parse("#ttg.blocked<{sizePerThread = [1, }>").unwrap_err();
        assert_eq!(e.at, 34);
        assert!(parse("#ttg.blocked<{a = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}>").is_err());
    }
}
