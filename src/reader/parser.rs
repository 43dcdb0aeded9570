//! Recursive-descent parser for the kernel text format (grammar in `docs/ir.md`).
//!
//! Builds a [`Kernel`] directly, resolving names through one table of the names in scope (a
//! region's definitions are visible in it and its nested regions, after the definition; a
//! name visible at a definition is an error, so the open scopes never share a name and one
//! table, undone to a mark when a region block closes, stands for their stack: `scope::Scope`).
//! The tables are keyed by the names' text in the source: no name is copied to be looked up.
//! Types are
//! inferred from operands; an immediate takes the type its context requires. The first syntax
//! or name error stops the parse and is returned as a diagnostic with a span; structural
//! checks that need the whole kernel are left to `verify`. An op's first word is looked up in
//! the signature table (`ir::signature`), whose family picks the function that parses the
//! operands (values, views, accesses, copies, waits, barriers and mbarriers, terminators,
//! region ops). Complexity: O(tokens): one hash lookup per name defined or used.


use super::lexer::{Lexer, Tok, Token};
use super::scope::Scope;
use crate::diag::{Diagnostic, Span};
use crate::ir::signature;
use crate::ir::*;
use crate::verify::limits::{MAX_NESTING, too_deep};

/// A parsed file: one or more kernels.
#[derive(Clone, Debug)]
pub struct Module {
    pub kernels: Vec<Kernel>,
}

/// Parses a whole file.
pub fn parse(src: &str) -> Result<Module, Diagnostic> {
    let mut p = Parser::new(src);
    let parsed = p.file(src);
    // The text's first lexical error wins over any parse error (as when the whole text was
    // lexed before parsing): the parser stops at its first error, so the rest is lexed here.
    match (p.lex_error.take(), parsed) {
        (Some(d), _) => Err(d),
        (None, Ok(m)) => Ok(m),
        (None, Err(d)) => loop {
            match p.lx.next_token() {
                Err(e) => break Err(e),
                Ok(t) if t.tok == Tok::Eof => break Err(d),
                Ok(_) => {}
            }
        },
    }
}

/// Parses a file that must hold exactly one kernel.
pub fn parse_kernel(src: &str) -> Result<Kernel, Diagnostic> {
    let mut m = parse(src)?;
    if m.kernels.len() != 1 {
        let k = &m.kernels[1];
        return Err(
            Diagnostic::user("E0101", "expected exactly one kernel in the file")
                .with_label(k.kernel_span, "second kernel starts here"),
        );
    }
    Ok(m.kernels.remove(0))
}

#[derive(Copy, Clone, Debug)]
enum Sym {
    Value(Value),
    View(View),
    Global(Global),
}

/// An operand before its type is known.
#[derive(Copy, Clone, Debug)]
enum Raw {
    Value(Value, Span),
    Int(i64, Span),
    Float(f64, Span),
    Bool(bool, Span),
}

impl Raw {
    fn span(self) -> Span {
        match self {
            Raw::Value(_, s) | Raw::Int(_, s) | Raw::Float(_, s) | Raw::Bool(_, s) => s,
        }
    }
}

/// The parser's place in the token stream: the current token and the one after it (the
/// grammar looks one token ahead), lexed on demand.
struct Parser<'a> {
    lx: Lexer<'a>,
    cur: Token<'a>,
    next: Token<'a>,
    prev: Span,
    /// The first lexical error; from then on the parser sees `Eof` ([`parse`] reports it).
    lex_error: Option<Diagnostic>,
}

struct KernelCtx<'a> {
    k: Kernel,
    /// Region-owning ops enclosing the region being parsed.
    depth: usize,
    /// Every `%name` in scope: the kernel's, then those of each open region block (closing
    /// a block takes its own out: [`Scope::undo`] to the block's mark).
    names: Scope<'a, Sym>,
    symbols: Scope<'a, Span>,
    /// Shared buffers by name (a kernel may declare many: `Kernel::buffer_by_name` scans).
    buffers: Scope<'a, Buffer>,
    /// Cleared buffers for an op's bound names and result types, reused from op to op (one
    /// pair per nesting level in use): two allocations an op were 8% of the parse.
    spare: Vec<Scratch<'a>>,
}

/// An op's scratch buffers: the names it binds, and its result types.
type Scratch<'a> = (Vec<(&'a str, Span)>, Vec<ScalarType>);

type PResult<T> = Result<T, Diagnostic>;

/// What parsing an op's operands yields besides its kind.
#[derive(Default)]
struct OpOut {
    /// Result types.
    tys: Vec<ScalarType>,
    regions: Vec<Region>,
    /// The op defines its (one) result only when the text binds a name.
    optional_result: bool,
}

/// The lines of the kernel that starts at byte `at`: up to the first `}` that opens a line
/// (where the canonical form closes a kernel), else to the end of the text. Complexity: O(its
/// bytes), in two scans that run a word or a vector at a time: the closing braces (few: one
/// per region) by `find`'s byte search, then the line breaks before the kernel's by a count
/// (a search from line break to line break paid a call per line).
fn kernel_lines(src: &str, at: usize) -> usize {
    let text = src.get(at..).unwrap_or_default();
    let bytes = text.as_bytes();
    let (mut end, mut from) = (text.len(), 0);
    while let Some(n) = text[from..].find('}') {
        let brace = from + n;
        if brace > 0 && bytes[brace - 1] == b'\n' {
            end = brace - 1;
            break;
        }
        from = brace + 1;
    }
    // Counted in runs of 255 bytes into a byte-wide sum, which the compiler keeps in vector
    // lanes (a count per byte into a `usize` did not vectorize).
    bytes[..end]
        .chunks(255)
        .map(|run| usize::from(run.iter().fold(0u8, |n, &b| n + u8::from(b == b'\n'))))
        .sum()
}

/// Adds a layout definition, refusing a second one of the same name (E1000).
fn define_layout(defs: &mut Vec<LayoutDef>, d: LayoutDef) -> PResult<()> {
    if let Some(prev) = defs.iter().find(|p| p.name == d.name) {
        return Err(Diagnostic::user(
            "E1000",
            format!("layout \"{}\" is defined twice", d.name),
        )
        .with_label(d.span, "defined again here")
        .with_label(prev.span, "first defined here"));
    }
    defs.push(d);
    Ok(())
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        let eof = Token {
            tok: Tok::Eof,
            span: Span::new(src.len(), src.len()),
        };
        let mut p = Parser {
            lx: Lexer::new(src),
            cur: eof,
            next: eof,
            prev: Span::new(0, 0),
            lex_error: None,
        };
        p.cur = p.lex();
        p.next = p.lex();
        // Before the first token is consumed, the "previous" span is the first token's.
        p.prev = p.cur.span;
        p
    }

    /// The next token of the text; `Eof` once a lexical error was met (kept for [`parse`]).
    fn lex(&mut self) -> Token<'a> {
        let end = self.cur.span.hi.max(self.next.span.hi) as usize;
        let eof = Token {
            tok: Tok::Eof,
            span: Span::new(end, end),
        };
        if self.lex_error.is_some() {
            return eof;
        }
        match self.lx.next_token() {
            Ok(t) => t,
            Err(d) => {
                self.lex_error = Some(d);
                eof
            }
        }
    }

    /// The kernels of the file, and its file-level layout definitions.
    fn file(&mut self, src: &str) -> Result<Module, Diagnostic> {
        let mut kernels = Vec::new();
        // File-level layout definitions apply to every kernel after them.
        let mut layouts = Vec::new();
        while self.peek() != &Tok::Eof {
            if self.is_word("layout") {
                let d = self.layout_def(None)?;
                define_layout(&mut layouts, d)?;
                continue;
            }
            let lines = kernel_lines(src, self.span().lo as usize);
            kernels.push(self.kernel(&layouts, lines)?);
        }
        if kernels.is_empty() && self.lex_error.is_none() {
            return Err(
                Diagnostic::user("E0100", "the file holds no kernel").with_label(
                    Span::new(0, src.len().min(1)),
                    "expected `kernel @name(...) { ... }`",
                ),
            );
        }
        Ok(Module { kernels })
    }

    fn peek(&self) -> &Tok<'a> {
        &self.cur.tok
    }
    /// The token after the current one.
    fn peek_next(&self) -> &Tok<'a> {
        &self.next.tok
    }
    fn span(&self) -> Span {
        self.cur.span
    }
    fn prev_span(&self) -> Span {
        self.prev
    }
    /// Consumes the current token.
    fn bump(&mut self) -> Token<'a> {
        let t = self.cur;
        if !matches!(t.tok, Tok::Eof) {
            self.prev = t.span;
            self.cur = self.next;
            self.next = self.lex();
        }
        t
    }
    fn err<T>(&self, what: &str) -> PResult<T> {
        Err(Diagnostic::user(
            "E0102",
            format!("expected {what}, found {}", self.peek().describe()),
        )
        .with_label(self.span(), format!("expected {what}")))
    }
    /// Whether the current token is `t`: the kinds first (one compare; most calls ask for a
    /// punctuation token), the payloads only when the kinds agree.
    fn at_tok(&self, t: &Tok) -> bool {
        std::mem::discriminant(self.peek()) == std::mem::discriminant(t) && self.peek() == t
    }
    fn eat(&mut self, t: &Tok) -> bool {
        if self.at_tok(t) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn expect(&mut self, t: Tok) -> PResult<Span> {
        if self.at_tok(&t) {
            Ok(self.bump().span)
        } else {
            self.err(&t.describe())
        }
    }
    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Word(x) if *x == w)
    }
    fn eat_word(&mut self, w: &str) -> bool {
        if self.is_word(w) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn expect_word(&mut self, w: &str) -> PResult<Span> {
        if self.is_word(w) {
            Ok(self.bump().span)
        } else {
            self.err(&format!("`{w}`"))
        }
    }
    fn word(&mut self) -> PResult<(&'a str, Span)> {
        if !matches!(self.peek(), Tok::Word(_)) {
            return self.err("a keyword");
        }
        match self.bump() {
            Token {
                tok: Tok::Word(w),
                span,
            } => Ok((w, span)),
            _ => self.err("a keyword"),
        }
    }
    fn local(&mut self) -> PResult<(&'a str, Span)> {
        if !matches!(self.peek(), Tok::Local(_)) {
            return self.err("a `%name`");
        }
        match self.bump() {
            Token {
                tok: Tok::Local(w),
                span,
            } => Ok((w, span)),
            _ => self.err("a `%name`"),
        }
    }
    fn symbol(&mut self) -> PResult<(&'a str, Span)> {
        if !matches!(self.peek(), Tok::Symbol(_)) {
            return self.err("a `@name`");
        }
        match self.bump() {
            Token {
                tok: Tok::Symbol(w),
                span,
            } => Ok((w, span)),
            _ => self.err("a `@name`"),
        }
    }
    fn int(&mut self) -> PResult<(i64, Span)> {
        match *self.peek() {
            Tok::Int(v) => Ok((v, self.bump().span)),
            _ => self.err("an integer"),
        }
    }
    fn uint(&mut self, what: &str) -> PResult<(u64, Span)> {
        let (v, s) = self.int()?;
        if v < 0 {
            return Err(
                Diagnostic::user("E0103", format!("{what} must not be negative"))
                    .with_label(s, "negative"),
            );
        }
        Ok((v as u64, s))
    }
    fn u32_(&mut self, what: &str) -> PResult<(u32, Span)> {
        let (v, s) = self.uint(what)?;
        u32::try_from(v).map(|v| (v, s)).map_err(|_| {
            Diagnostic::user("E0104", format!("{what} is too large")).with_label(s, "too large")
        })
    }
    fn int32(&mut self, what: &str) -> PResult<(i32, Span)> {
        let (v, s) = self.int()?;
        i32::try_from(v).map(|v| (v, s)).map_err(|_| {
            Diagnostic::user("E0104", format!("{what} lies outside the i32 range"))
                .with_label(s, "not an i32")
        })
    }
    fn string(&mut self) -> PResult<(&'a str, Span)> {
        if !matches!(self.peek(), Tok::Str(_)) {
            return self.err("a string");
        }
        match self.bump() {
            Token {
                tok: Tok::Str(w),
                span,
            } => Ok((w, span)),
            _ => self.err("a string"),
        }
    }

    /// One kernel; `lines` estimates its size ([`kernel_lines`]: about one op and one value
    /// a line), for the tables' first capacity.
    fn kernel(&mut self, layouts: &[LayoutDef], lines: usize) -> PResult<Kernel> {
        let kw = self.expect_word("kernel")?;
        let (name, _) = self.symbol()?;
        let mut k = Kernel::new(name);
        k.layouts = layouts.to_vec();
        k.reserve(lines);
        // Names of the top-level scope: about three quarters of the lines define one (a
        // table sized for every line would hash into twice the pages).
        let mut cx = KernelCtx {
            k,
            depth: 0,
            names: Scope::with_capacity(lines / 4 * 3),
            symbols: Scope::with_capacity(0),
            buffers: Scope::with_capacity(0),
            spare: Vec::new(),
        };
        self.expect(Tok::LParen)?;
        if !self.eat(&Tok::RParen) {
            loop {
                self.param(&mut cx)?;
                if self.eat(&Tok::RParen) {
                    break;
                }
                self.expect(Tok::Comma)?;
            }
        }
        let mut seen = (false, false);
        loop {
            if self.is_word("block") || self.is_word("grid") {
                let (w, ws) = self.word()?;
                let dims = self.dims3()?;
                let slot = if w == "block" {
                    &mut seen.0
                } else {
                    &mut seen.1
                };
                if *slot {
                    return Err(Diagnostic::user("E0105", format!("`{w}` given twice"))
                        .with_label(ws, "repeated"));
                }
                *slot = true;
                let at = ws.to(self.prev_span());
                if w == "block" {
                    cx.k.block = dims;
                    cx.k.block_span = at;
                } else {
                    cx.k.grid = dims;
                    cx.k.grid_known = true;
                    cx.k.grid_span = at;
                }
            } else if self.is_word("target") && cx.k.target.is_none() {
                let (_, ws) = self.word()?;
                let (name, ns) = self.string()?;
                if let Err(d) = crate::target::Target::from_name(name) {
                    return Err(d.with_label(ns, "not a known target"));
                }
                cx.k.target = Some(name.to_string());
                cx.k.target_span = ws.to(ns);
            } else {
                break;
            }
        }
        cx.k.kernel_span = kw.to(self.prev_span());
        self.expect(Tok::LBrace)?;
        let body = cx.k.body();
        self.region_items(&mut cx, body)?;
        self.expect(Tok::RBrace)?;
        Ok(cx.k)
    }

    fn dims3(&mut self) -> PResult<[u32; 3]> {
        self.expect(Tok::LParen)?;
        let mut d = [1u32; 3];
        for (i, slot) in d.iter_mut().enumerate() {
            let (v, s) = self.u32_("a dimension")?;
            if v == 0 {
                return Err(Diagnostic::user("E0106", "a dimension must be at least 1")
                    .with_label(s, "zero"));
            }
            *slot = v;
            if self.eat(&Tok::RParen) {
                return Ok(d);
            }
            if i < 2 {
                self.expect(Tok::Comma)?;
            }
        }
        self.expect(Tok::RParen)?;
        Ok(d)
    }

    fn define(&self, cx: &mut KernelCtx<'a>, name: &'a str, span: Span, sym: Sym) -> PResult<()> {
        if cx.names.insert(name, sym).is_err() {
            return Err(
                Diagnostic::user("E0110", format!("`%{name}` is already defined"))
                    .with_label(span, "redefined here")
                    .with_help("every value name must be unique within its scope"),
            );
        }
        match sym {
            Sym::Value(v) => {
                cx.k.value_names.set(v, name);
                cx.k.value_spans.set(v, span);
            }
            Sym::View(v) => cx.k.view_names.set(v, name),
            Sym::Global(_) => {}
        }
        Ok(())
    }

    fn lookup(&self, cx: &KernelCtx<'a>, name: &str, span: Span) -> PResult<Sym> {
        if let Some(sym) = cx.names.get(name) {
            return Ok(sym);
        }
        Err(
            Diagnostic::user("E0111", format!("`%{name}` is not defined here"))
                .with_label(span, "unknown name")
                .with_help("values must be defined before use, in this region or an enclosing one"),
        )
    }

    fn param(&mut self, cx: &mut KernelCtx<'a>) -> PResult<()> {
        let (name, ns) = self.local()?;
        self.expect(Tok::Colon)?;
        if self.eat_word("global") {
            let (et, _) = self.elem_type()?;
            self.expect(Tok::LBracket)?;
            let mut shape = Vec::new();
            let mut dim_spans = Vec::new();
            loop {
                dim_spans.push(self.span());
                match *self.peek() {
                    Tok::Int(_) => {
                        let (v, s) = self.uint("a dimension")?;
                        if v == 0 {
                            return Err(Diagnostic::user(
                                "E0106",
                                "a dimension must be at least 1",
                            )
                            .with_label(s, "zero"));
                        }
                        shape.push(Dim::Const(v))
                    }
                    Tok::Local(n) => {
                        let s = self.bump().span;
                        match self.lookup(cx, n, s)? {
                            Sym::Value(v) if cx.k.values[v].ty == ScalarType::I32 => {
                                shape.push(Dim::Param(v))
                            }
                            _ => {
                                return Err(Diagnostic::user(
                                    "E0112",
                                    "a symbolic dimension must be an earlier i32 parameter",
                                )
                                .with_label(s, "not an i32 parameter"));
                            }
                        }
                    }
                    _ => return self.err("a dimension"),
                }
                if self.eat(&Tok::RBracket) {
                    break;
                }
                self.expect(Tok::Comma)?;
            }
            let g = cx.k.globals.push(GlobalData {
                name: name.to_string(),
                elem: et,
                shape,
            });
            cx.k.global_spans.set(g, ns);
            cx.k.global_dim_spans.set(g, dim_spans);
            cx.k.params.push(Param::Global(g));
            self.define(cx, name, ns, Sym::Global(g))
        } else {
            let (ty, ts) = self.scalar_type()?;
            if ty != ScalarType::I32 && ty != ScalarType::F32 {
                return Err(
                    Diagnostic::user("E0113", "scalar parameters are i32 or f32")
                        .with_label(ts, "unsupported parameter type"),
                );
            }
            let idx = cx.k.params.len();
            let v = cx.k.new_value(ty, ValueDef::Param(idx));
            cx.k.params.push(Param::Scalar(v));
            if self.eat_word("in") {
                let range = self.param_range(ty, ts)?;
                cx.k.param_ranges.set(v, Some(range));
            }
            if self.eat(&Tok::Eq) {
                let r = self.raw(cx)?;
                if let Raw::Value(..) = r {
                    return Err(
                        Diagnostic::user("E0129", "a parameter default must be a literal")
                            .with_label(r.span(), "not a literal"),
                    );
                }
                if let Operand::Imm(c) = self.coerce(cx, r, ty)? {
                    if let Some((lo, hi)) = *cx.k.param_ranges.get(v)
                        && !(lo as i64..=hi as i64).contains(&c.as_i64())
                    {
                        return Err(Diagnostic::user(
                            "E0130",
                            format!("the default lies outside the declared range [{lo}, {hi}]"),
                        )
                        .with_label(r.span(), "out of range"));
                    }
                    cx.k.param_defaults.set(v, Some(c));
                    cx.k.param_default_spans.set(v, r.span());
                }
            }
            self.define(cx, name, ns, Sym::Value(v))
        }
    }

    /// `[LO, HI]` after `in`: the inclusive range an i32 parameter promises to lie in.
    fn param_range(&mut self, ty: ScalarType, ts: Span) -> PResult<(i32, i32)> {
        if ty != ScalarType::I32 {
            return Err(
                Diagnostic::user("E0131", "only i32 parameters take a range")
                    .with_label(ts, "not i32"),
            );
        }
        self.expect(Tok::LBracket)?;
        let (lo, ls) = self.int32("the range's lower bound")?;
        self.expect(Tok::Comma)?;
        let (hi, hs) = self.int32("the range's upper bound")?;
        self.expect(Tok::RBracket)?;
        if lo > hi {
            return Err(Diagnostic::user("E0131", "an empty range")
                .with_label(ls.to(hs), format!("{lo} > {hi}")));
        }
        Ok((lo, hi))
    }

    fn elem_type(&mut self) -> PResult<(ElemType, Span)> {
        let (w, s) = self.word()?;
        match ElemType::from_name(w) {
            Some(t) => Ok((t, s)),
            None => Err(
                Diagnostic::user("E0114", format!("unknown element type `{w}`"))
                    .with_label(s, "unknown type")
                    .with_help("element types: i8, i16, i32, f16, bf16, f32, mbarrier"),
            ),
        }
    }

    fn scalar_type(&mut self) -> PResult<(ScalarType, Span)> {
        let (w, s) = self.word()?;
        match ScalarType::from_name(w) {
            Some(t) => Ok((t, s)),
            None => Err(
                Diagnostic::user("E0115", format!("unknown scalar type `{w}`"))
                    .with_label(s, "unknown type")
                    .with_help("scalar types: i1, i32, f32, token"),
            ),
        }
    }

    /// Items of a nested region until the closing brace (not consumed), refusing nesting
    /// deeper than `MAX_NESTING` before recursing (so no input can overflow the stack).
    fn nested_items(&mut self, cx: &mut KernelCtx<'a>, region: Region) -> PResult<()> {
        if cx.depth >= MAX_NESTING {
            return Err(too_deep(self.prev_span()));
        }
        cx.depth += 1;
        let res = self.region_items(cx, region);
        cx.depth -= 1;
        res
    }

    /// Items of a region until the closing brace (not consumed).
    fn region_items(&mut self, cx: &mut KernelCtx<'a>, region: Region) -> PResult<()> {
        loop {
            match self.peek() {
                Tok::RBrace => return Ok(()),
                Tok::Eof => return self.err("`}`"),
                _ => {}
            }
            if self.is_word("shared") {
                self.shared_decl(cx, region)?;
            } else if self.is_word("layout") && matches!(self.peek_next(), Tok::Str(_)) {
                let kw = self.span();
                self.top_level_only(cx, region, kw, "layout")?;
                let d = self.layout_def(Some(cx))?;
                define_layout(&mut cx.k.layouts, d)?;
            } else if self.is_word("group") {
                self.group_decl(cx, region)?;
            } else {
                self.op(cx, region)?;
            }
        }
    }

    fn top_level_only(
        &self,
        cx: &KernelCtx<'a>,
        region: Region,
        span: Span,
        what: &str,
    ) -> PResult<()> {
        if region != cx.k.body() {
            return Err(Diagnostic::user(
                "E0116",
                format!("{what} declarations must be at the top level of the kernel"),
            )
            .with_label(span, "inside a nested region"));
        }
        Ok(())
    }

    fn new_symbol(&mut self, cx: &mut KernelCtx<'a>, name: &'a str, span: Span) -> PResult<()> {
        if let Err(prev) = cx.symbols.insert(name, span) {
            return Err(
                Diagnostic::user("E0117", format!("`@{name}` is already declared"))
                    .with_label(span, "declared again here")
                    .with_label(prev, "first declared here"),
            );
        }
        Ok(())
    }

    fn shared_decl(&mut self, cx: &mut KernelCtx<'a>, region: Region) -> PResult<()> {
        let kw = self.expect_word("shared")?;
        self.top_level_only(cx, region, kw, "shared")?;
        let (name, ns) = self.symbol()?;
        self.new_symbol(cx, name, ns)?;
        self.expect(Tok::Colon)?;
        let (elem, _) = self.elem_type()?;
        self.expect(Tok::LBracket)?;
        let mut shape = Vec::new();
        loop {
            let (v, s) = self.uint("a dimension")?;
            if v == 0 {
                return Err(Diagnostic::user("E0106", "a dimension must be at least 1")
                    .with_label(s, "zero"));
            }
            shape.push(v);
            if self.eat(&Tok::RBracket) {
                break;
            }
            self.expect(Tok::Comma)?;
        }
        let offset = if self.eat_word("at") {
            Some(self.uint("an offset")?.0)
        } else {
            None
        };
        let layout = self.layout()?;
        let b = cx.k.buffers.push(BufferData {
            name: name.to_string(),
            elem,
            shape,
            offset,
            layout,
        });
        cx.k.buffer_spans.set(b, kw.to(self.prev_span()));
        // `new_symbol` refused a second declaration of `name`: it is new here.
        let _ = cx.buffers.insert(name, b);
        Ok(())
    }

    fn group_decl(&mut self, cx: &mut KernelCtx<'a>, region: Region) -> PResult<()> {
        let kw = self.expect_word("group")?;
        self.top_level_only(cx, region, kw, "group")?;
        let (name, ns) = self.symbol()?;
        self.new_symbol(cx, name, ns)?;
        self.expect(Tok::Colon)?;
        self.expect_word("threads")?;
        self.expect(Tok::LBracket)?;
        let (lo, _) = self.u32_("a thread id")?;
        self.expect(Tok::Comma)?;
        let (hi, hs) = self.u32_("a thread id")?;
        self.expect(Tok::RParen)?;
        if hi <= lo {
            return Err(
                Diagnostic::user("E0118", "a thread group must be non-empty")
                    .with_label(hs, "upper bound must exceed the lower bound"),
            );
        }
        let g = cx.k.groups.push(GroupData {
            name: name.to_string(),
            lo,
            hi,
        });
        cx.k.group_spans.set(g, kw.to(self.prev_span()));
        Ok(())
    }

    fn buffer_ref(&self, cx: &KernelCtx<'a>, name: &str, span: Span) -> PResult<Buffer> {
        cx.buffers.get(name).ok_or_else(|| {
            Diagnostic::user("E0119", format!("`@{name}` is not a shared buffer"))
                .with_label(span, "unknown shared buffer")
        })
    }

    /// `@buf` or `%view`.
    fn memref(&mut self, cx: &KernelCtx<'a>) -> PResult<(MemRef, Span)> {
        let s = self.span();
        // Resolved from the token in place (no copy of its name), then consumed.
        let r = match self.peek() {
            Tok::Symbol(n) => self.buffer_ref(cx, n, s).map(|b| (MemRef::Buffer(b), s)),
            Tok::Local(n) => match self.lookup(cx, n, s) {
                Ok(Sym::View(v)) => Ok((MemRef::View(v), s)),
                Ok(_) => Err(Diagnostic::user("E0120", format!("`%{n}` is not a view"))
                    .with_label(s, "expected a shared buffer or view")),
                Err(e) => Err(e),
            },
            _ => return self.err("a shared buffer `@name` or a view `%name`"),
        };
        self.bump();
        r
    }

    fn global_ref(&mut self, cx: &KernelCtx<'a>) -> PResult<(Global, Span)> {
        // Tile copies also accept `@A` for a global (the layout contract's spelling).
        let (n, s) = match self.peek() {
            Tok::Symbol(_) => self.symbol()?,
            _ => self.local()?,
        };
        match self.lookup(cx, n, s)? {
            Sym::Global(g) => Ok((g, s)),
            _ => Err(
                Diagnostic::user("E0121", format!("`%{n}` is not a global buffer"))
                    .with_label(s, "expected a global buffer parameter"),
            ),
        }
    }

    fn raw(&mut self, cx: &KernelCtx<'a>) -> PResult<Raw> {
        let s = self.span();
        // Resolved from the token in place (no copy of its name), then consumed.
        let r = match self.peek() {
            Tok::Local(n) => match self.lookup(cx, n, s) {
                Ok(Sym::Value(v)) => Ok(Raw::Value(v, s)),
                Ok(_) => Err(
                    Diagnostic::user("E0122", format!("`%{n}` is not a scalar value"))
                        .with_label(s, "expected a scalar value"),
                ),
                Err(e) => Err(e),
            },
            Tok::Int(v) => Ok(Raw::Int(*v, s)),
            Tok::Float(v) => Ok(Raw::Float(*v, s)),
            Tok::Word(w) if *w == "true" || *w == "false" => Ok(Raw::Bool(*w == "true", s)),
            _ => return self.err("an operand"),
        };
        self.bump();
        r
    }

    fn raw_ty(&self, cx: &KernelCtx<'a>, r: Raw) -> ScalarType {
        match r {
            Raw::Value(v, _) => cx.k.values[v].ty,
            Raw::Int(..) => ScalarType::I32,
            Raw::Float(..) => ScalarType::F32,
            Raw::Bool(..) => ScalarType::I1,
        }
    }

    /// Types an operand as `ty`, converting immediates.
    fn coerce(&self, cx: &KernelCtx<'a>, r: Raw, ty: ScalarType) -> PResult<Operand> {
        let mismatch = |have: ScalarType| {
            Err(
                Diagnostic::user("E0123", format!("expected a {ty} operand, found {have}"))
                    .with_label(r.span(), format!("this is {have}")),
            )
        };
        match r {
            Raw::Value(v, _) => {
                let have = cx.k.values[v].ty;
                if have == ty {
                    Ok(Operand::Value(v))
                } else {
                    mismatch(have)
                }
            }
            Raw::Int(i, s) => match ty {
                ScalarType::I32 => i32::try_from(i)
                    .map(|i| Operand::Imm(Scalar::I32(i)))
                    .map_err(|_| {
                        Diagnostic::user("E0124", "integer does not fit in i32")
                            .with_label(s, "out of range")
                    }),
                ScalarType::F32 => Ok(Operand::Imm(Scalar::F32(i as f32))),
                ScalarType::I1 if i == 0 || i == 1 => Ok(Operand::Imm(Scalar::I1(i == 1))),
                _ => mismatch(ScalarType::I32),
            },
            Raw::Float(f, _) => match ty {
                ScalarType::F32 => Ok(Operand::Imm(Scalar::F32(f as f32))),
                _ => mismatch(ScalarType::F32),
            },
            Raw::Bool(b, _) => match ty {
                ScalarType::I1 => Ok(Operand::Imm(Scalar::I1(b))),
                _ => mismatch(ScalarType::I1),
            },
        }
    }

    fn operand(&mut self, cx: &KernelCtx<'a>, ty: ScalarType) -> PResult<Operand> {
        let r = self.raw(cx)?;
        self.coerce(cx, r, ty)
    }

    /// `[i, j, ...]` of i32 operands.
    fn index_list(&mut self, cx: &KernelCtx<'a>) -> PResult<Vec<Operand>> {
        self.expect(Tok::LBracket)?;
        let mut v = Vec::new();
        if self.eat(&Tok::RBracket) {
            return Ok(v);
        }
        loop {
            v.push(self.operand(cx, ScalarType::I32)?);
            if self.eat(&Tok::RBracket) {
                return Ok(v);
            }
            self.expect(Tok::Comma)?;
        }
    }

    fn check_rank(&self, have: usize, want: usize, span: Span, what: &str) -> PResult<()> {
        if have != want {
            return Err(Diagnostic::user(
                "E0125",
                format!("{what} has rank {want} but is indexed with {have} indices"),
            )
            .with_label(span, "wrong number of indices"));
        }
        Ok(())
    }

    fn shared_index(&mut self, cx: &KernelCtx<'a>) -> PResult<(MemRef, Vec<Operand>, Span)> {
        let (m, s) = self.memref(cx)?;
        let idx = self.index_list(cx)?;
        self.check_rank(
            idx.len(),
            cx.k.rank(m),
            s.to(self.prev_span()),
            "the shared memref",
        )?;
        Ok((m, idx, s))
    }

    fn global_index(&mut self, cx: &KernelCtx<'a>) -> PResult<(Global, Vec<Operand>, Span)> {
        let (g, s) = self.global_ref(cx)?;
        let idx = self.index_list(cx)?;
        self.check_rank(
            idx.len(),
            cx.k.globals[g].shape.len(),
            s.to(self.prev_span()),
            "the global buffer",
        )?;
        Ok((g, idx, s))
    }

    fn no_results(&self, results: &[(&str, Span)], op: &str) -> PResult<()> {
        if let Some((_, s)) = results.first() {
            return Err(
                Diagnostic::user("E0126", format!("`{op}` produces no value"))
                    .with_label(*s, "nothing to bind"),
            );
        }
        Ok(())
    }

    fn bind_results(
        &self,
        cx: &mut KernelCtx<'a>,
        op: Op,
        results: &[(&'a str, Span)],
        opname: &str,
        span: Span,
    ) -> PResult<()> {
        let produced = cx.k.ops[op].results.len();
        if results.len() != produced {
            let at = results.first().map_or(span, |r| r.1);
            return Err(Diagnostic::user(
                "E0127",
                format!(
                    "`{opname}` produces {produced} value(s), but {} name(s) are bound",
                    results.len()
                ),
            )
            .with_label(at, "wrong number of results"));
        }
        // By index: the op's results are read in place (a copy of them was an allocation an
        // op).
        for (i, (name, s)) in results.iter().enumerate() {
            let v = cx.k.ops[op].results[i];
            self.define(cx, name, *s, Sym::Value(v))?;
        }
        Ok(())
    }

    fn mbar_index(&mut self, cx: &KernelCtx<'a>) -> PResult<(MemRef, Vec<Operand>)> {
        let (m, idx, s) = self.shared_index(cx)?;
        if cx.k.elem(m) != ElemType::MBarrier {
            return Err(Diagnostic::user("E0128", "expected an mbarrier array")
                .with_label(s, "not declared with element type `mbarrier`"));
        }
        Ok((m, idx))
    }

    /// `layout "NAME" [in @g] = #attr<...>` or `layout "NAME" in @g`: a layout definition,
    /// bound to thread group `@g` when `cx` (a kernel) is given and the text says so; a
    /// file-level definition cannot name a group (E1622).
    fn layout_def(&mut self, cx: Option<&KernelCtx<'a>>) -> PResult<LayoutDef> {
        let kw = self.expect_word("layout")?;
        let name = self.string()?.0.to_string();
        let mut group = None;
        if self.is_word("in") {
            let at = self.bump().span;
            let Some(cx) = cx else {
                return Err(Diagnostic::user(
                    "E1622",
                    "a file-level layout cannot be bound to a thread group (groups belong to a kernel)",
                )
                .with_label(at, "move this definition into the kernel that declares the group"));
            };
            group = Some(self.group_ref(cx)?);
            if !self.eat(&Tok::Eq) {
                let span = kw.to(self.prev_span());
                return Ok(LayoutDef {
                    name,
                    text: None,
                    group,
                    span,
                    text_span: span,
                });
            }
        } else {
            self.expect(Tok::Eq)?;
        }
        match *self.peek() {
            Tok::Attr(text) => {
                let text_span = self.bump().span;
                Ok(LayoutDef {
                    name,
                    text: Some(text.to_string()),
                    group,
                    span: kw.to(text_span),
                    text_span,
                })
            }
            _ => self.err("a layout attribute `#ttg.<encoding><{...}>`"),
        }
    }

    /// A tile's `@a <- %A[origin]`: the shared tile, the global buffer and the origin, with
    /// matching element types and a tile rank no larger than the source's.
    fn tile_operands(&mut self, cx: &KernelCtx<'a>) -> PResult<(MemRef, Global, Vec<Operand>)> {
        let (dst, ds) = self.memref(cx)?;
        self.expect(Tok::Arrow)?;
        let (src, origin, ss) = self.global_index(cx)?;
        self.copy_types(cx, dst, ds, src, ss)?;
        if cx.k.rank(dst) > origin.len() {
            return Err(Diagnostic::user(
                "E0139",
                "the tile has more dimensions than the global buffer",
            )
            .with_label(ds, "tile rank exceeds the source rank"));
        }
        Ok((dst, src, origin))
    }

    /// `cp_async_tile`/`gather_to_lds_tile`: `%v <- %A[%r, %c] layout "L" masked`.
    fn tile_copy(&mut self, cx: &KernelCtx<'a>) -> PResult<TileCopy> {
        let (dst, src, origin) = self.tile_operands(cx)?;
        let layout = self.layout()?;
        let masked = self.eat_word("masked");
        Ok(TileCopy {
            dst,
            src,
            origin,
            layout,
            masked,
        })
    }

    fn layout(&mut self) -> PResult<Option<String>> {
        if self.eat_word("layout") {
            Ok(Some(self.string()?.0.to_string()))
        } else {
            Ok(None)
        }
    }

    fn op(&mut self, cx: &mut KernelCtx<'a>, region: Region) -> PResult<()> {
        let (mut results, mut tys) = cx.spare.pop().unwrap_or_default();
        let res = self.op_with(cx, region, &mut results, &mut tys);
        results.clear();
        tys.clear();
        cx.spare.push((results, tys));
        res
    }

    /// [`Parser::op`] with its scratch buffers (empty on entry): the bound names and the
    /// result types.
    fn op_with(
        &mut self,
        cx: &mut KernelCtx<'a>,
        region: Region,
        results: &mut Vec<(&'a str, Span)>,
        tys: &mut Vec<ScalarType>,
    ) -> PResult<()> {
        let start = self.span();
        if matches!(self.peek(), Tok::Local(_)) && matches!(self.peek_next(), Tok::Eq | Tok::Comma) {
            loop {
                results.push(self.local()?);
                if self.eat(&Tok::Eq) {
                    break;
                }
                self.expect(Tok::Comma)?;
            }
        }
        let (name, ns) = self.word()?;
        let Some(code) = signature::lookup(name) else {
            return Err(Diagnostic::user("E0150", format!("unknown op `{name}`"))
                .with_label(ns, "not an op of the smemsync IR")
                .with_help("docs/ir.md lists every op"));
        };
        let mut out = OpOut {
            tys: std::mem::take(tys),
            ..OpOut::default()
        };
        // Region-owning ops go through a small frame: the nesting recursion passes through
        // here, and the plain ops' matches stay off the stack.
        let kind = match signature::signature(code).family {
            Family::Region => self.region_op(cx, code, ns, results, &mut out)?,
            Family::View => return self.view_op(cx, results, (start, ns, region)),
            _ => self.plain_op(cx, code, name, ns, &mut out)?,
        };
        let OpOut {
            tys: out_tys,
            regions,
            optional_result,
        } = out;
        *tys = out_tys;
        if optional_result && results.is_empty() {
            tys.clear();
        }
        let op = cx.k.new_op(kind, tys, regions);
        cx.k.op_spans.set(op, start.to(self.prev_span()));
        // Region-owning ops span only their header line, so labels stay readable.
        if !cx.k.ops[op].regions.is_empty() {
            cx.k.op_spans.set(op, start.to(ns));
        }
        if tys.is_empty() {
            self.no_results(results, name)?;
        } else {
            self.bind_results(cx, op, results, name, ns)?;
        }
        cx.k.append(region, op);
        Ok(())
    }

    /// `for`, `if`, `while` and `stage`: the op kind, its result types and its regions.
    fn region_op(
        &mut self,
        cx: &mut KernelCtx<'a>,
        code: OpCode,
        ns: Span,
        results: &[(&str, Span)],
        out: &mut OpOut,
    ) -> PResult<OpKind> {
        match code {
            OpCode::For => self.for_op(cx, out),
            OpCode::If => {
                let cond = self.operand(cx, ScalarType::I1)?;
                let then_r = cx.k.new_region();
                self.region_block(cx, then_r, &[])?;
                let else_r = cx.k.new_region();
                if self.eat_word("else") {
                    self.region_block(cx, else_r, &[])?;
                }
                out.regions.push(then_r);
                out.regions.push(else_r);
                if !results.is_empty() {
                    out.tys = self.yield_types(cx, then_r, ns)?;
                }
                Ok(OpKind::If { cond })
            }
            OpCode::While => self.while_op(cx, out),
            OpCode::Stage => {
                let (n, _) = self.string()?;
                let body = cx.k.new_region();
                // A stage runs exactly once, in place: its definitions stay visible after it.
                self.expect(Tok::LBrace)?;
                self.nested_items(cx, body)?;
                self.expect(Tok::RBrace)?;
                out.regions.push(body);
                Ok(OpKind::Stage { name: n.to_string() })
            }
            _ => self.err("a region op"),
        }
    }

    /// `for %k = lo to hi step s iter(..) { .. }`.
    fn for_op(&mut self, cx: &mut KernelCtx<'a>, out: &mut OpOut) -> PResult<OpKind> {
        use ScalarType as T;
        let (iv, ivs) = self.local()?;
        self.expect(Tok::Eq)?;
        let lo = self.operand(cx, T::I32)?;
        self.expect_word("to")?;
        let hi = self.operand(cx, T::I32)?;
        let step = if self.eat_word("step") {
            self.operand(cx, T::I32)?
        } else {
            Operand::int(1)
        };
        if step == Operand::Imm(Scalar::I32(0))
            || matches!(step, Operand::Imm(Scalar::I32(s)) if s < 0)
        {
            return Err(Diagnostic::user("E0143", "a loop step must be positive")
                .with_label(self.prev_span(), "step"));
        }
        let iters = self.iter_args(cx)?;
        let body = cx.k.new_region();
        let ivv = cx.k.new_value(T::I32, ValueDef::RegionArg(body, 0));
        cx.k.push_region_arg(body, ivv);
        let mut init = Vec::new();
        let mut names = vec![(iv, ivs, ivv)];
        for (i, (n, s, op)) in iters.into_iter().enumerate() {
            let ty = self.operand_ty(cx, op);
            let a = cx.k.new_value(ty, ValueDef::RegionArg(body, i + 1));
            cx.k.push_region_arg(body, a);
            out.tys.push(ty);
            init.push(op);
            names.push((n, s, a));
        }
        self.region_block(cx, body, &names)?;
        out.regions.push(body);
        Ok(OpKind::For { lo, hi, step, init })
    }

    /// `while iter(..) { .. } do (%a, ..) { .. }`.
    fn while_op(&mut self, cx: &mut KernelCtx<'a>, out: &mut OpOut) -> PResult<OpKind> {
        let iters = self.iter_args(cx)?;
        let before = cx.k.new_region();
        let mut names = Vec::new();
        let mut init = Vec::new();
        for (i, (n, s, op)) in iters.iter().cloned().enumerate() {
            let ty = self.operand_ty(cx, op);
            let a = cx.k.new_value(ty, ValueDef::RegionArg(before, i));
            cx.k.push_region_arg(before, a);
            out.tys.push(ty);
            init.push(op);
            names.push((n, s, a));
        }
        self.region_block(cx, before, &names)?;
        self.expect_word("do")?;
        let after = cx.k.new_region();
        let mut anames = Vec::new();
        self.expect(Tok::LParen)?;
        if !self.eat(&Tok::RParen) {
            loop {
                let (n, s) = self.local()?;
                anames.push((n, s));
                if self.eat(&Tok::RParen) {
                    break;
                }
                self.expect(Tok::Comma)?;
            }
        }
        if anames.len() != out.tys.len() {
            return Err(Diagnostic::user(
                "E0144",
                format!(
                    "the `do` region takes {} argument(s), one per iteration value",
                    out.tys.len()
                ),
            )
            .with_label(self.prev_span(), "wrong number of arguments"));
        }
        let mut bnames = Vec::new();
        for (i, (n, s)) in anames.into_iter().enumerate() {
            let a = cx.k.new_value(out.tys[i], ValueDef::RegionArg(after, i));
            cx.k.push_region_arg(after, a);
            bnames.push((n, s, a));
        }
        self.region_block(cx, after, &bnames)?;
        out.regions.push(before);
        out.regions.push(after);
        Ok(OpKind::While { init })
    }

    /// Every op that owns no region and defines no view: its kind and result types, by family.
    fn plain_op(
        &mut self,
        cx: &mut KernelCtx<'a>,
        code: OpCode,
        name: &str,
        ns: Span,
        out: &mut OpOut,
    ) -> PResult<OpKind> {
        match signature::signature(code).family {
            Family::Value => self.value_op(cx, code, name, ns, &mut out.tys),
            Family::Access => self.access_op(cx, code, out),
            Family::Copy => self.copy_op(cx, code, out),
            Family::Wait | Family::Wgmma => self.wait_op(cx, code, out),
            Family::Barrier | Family::Mbarrier => self.sync_op(cx, code),
            Family::Terminator => self.terminator_op(cx, code),
            Family::View | Family::Region => self.err("an op"),
        }
    }

    /// Constants, arithmetic, comparisons, selects, casts, groups, computes, thread ids.
    fn value_op(
        &mut self,
        cx: &mut KernelCtx<'a>,
        code: OpCode,
        name: &str,
        ns: Span,
        tys: &mut Vec<ScalarType>,
    ) -> PResult<OpKind> {
        use ScalarType as T;
        let (kind, ty) = match code {
            OpCode::Const => {
                let r = self.raw(cx)?;
                let ty = if self.eat(&Tok::Colon) {
                    self.scalar_type()?.0
                } else {
                    self.raw_ty(cx, r)
                };
                if let Raw::Value(..) = r {
                    return Err(Diagnostic::user("E0129", "`const` takes a literal")
                        .with_label(r.span(), "not a literal"));
                }
                let Operand::Imm(c) = self.coerce(cx, r, ty)? else {
                    unreachable!()
                };
                (OpKind::Const(c), ty)
            }
            OpCode::Binary => return self.binary(cx, name, ns, tys),
            OpCode::Unary => return self.unary(cx, name, tys),
            OpCode::Cmp => {
                let (p, ps) = self.word()?;
                let pred = CmpPred::from_name(p).ok_or_else(|| {
                    Diagnostic::user("E0131", format!("unknown comparison `{p}`"))
                        .with_label(ps, "expected eq, ne, lt, le, gt or ge")
                })?;
                let (a, b, ty) = self.raw_pair(cx)?;
                let (a, b) = (self.coerce(cx, a, ty)?, self.coerce(cx, b, ty)?);
                (OpKind::Cmp(pred, a, b), T::I1)
            }
            OpCode::Select => {
                let c = self.operand(cx, T::I1)?;
                self.expect(Tok::Comma)?;
                let (a, b, ty) = self.raw_pair(cx)?;
                let (a, b) = (self.coerce(cx, a, ty)?, self.coerce(cx, b, ty)?);
                (OpKind::Select(c, a, b), ty)
            }
            OpCode::Cast => {
                let op = CastOp::from_name(name).expect("looked up");
                let (from, to) = match op {
                    CastOp::IToF => (T::I32, T::F32),
                    CastOp::FToI => (T::F32, T::I32),
                };
                (OpKind::Cast(op, self.operand(cx, from)?), to)
            }
            OpCode::InGroup => (OpKind::InGroup(self.group_ref(cx)?), T::I1),
            OpCode::Compute => return self.compute(cx, tys),
            OpCode::Special => {
                let sp = Special::from_name(name).expect("looked up");
                (OpKind::Special(sp), T::I32)
            }
            _ => return self.err("a value op"),
        };
        tys.push(ty);
        Ok(kind)
    }

    /// Two operands `a, b` and the type they share: a value's, else f32 if either literal
    /// is a float, else the first literal's.
    fn raw_pair(&mut self, cx: &KernelCtx<'a>) -> PResult<(Raw, Raw, ScalarType)> {
        let a = self.raw(cx)?;
        self.expect(Tok::Comma)?;
        let b = self.raw(cx)?;
        let ty = match (a, b) {
            (Raw::Value(..), _) => self.raw_ty(cx, a),
            (_, Raw::Value(..)) => self.raw_ty(cx, b),
            (Raw::Float(..), _) | (_, Raw::Float(..)) => ScalarType::F32,
            _ => self.raw_ty(cx, a),
        };
        Ok((a, b, ty))
    }

    /// `add`, `sub`, .. `shr`: both operands and the result of one type the op admits.
    fn binary(
        &mut self,
        cx: &KernelCtx<'a>,
        name: &str,
        ns: Span,
        tys: &mut Vec<ScalarType>,
    ) -> PResult<OpKind> {
        use ScalarType as T;
        let op = BinOp::from_name(name).expect("looked up");
        let (a, b, ty) = self.raw_pair(cx)?;
        let (a, b) = (self.coerce(cx, a, ty)?, self.coerce(cx, b, ty)?);
        let int_only = matches!(
            op,
            BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr | BinOp::Rem
        );
        if ty == T::Token
            || (int_only && ty == T::F32)
            || (ty == T::I1 && !matches!(op, BinOp::And | BinOp::Or | BinOp::Xor))
        {
            return Err(Diagnostic::user(
                "E0130",
                format!("`{name}` does not take {ty} operands"),
            )
            .with_label(ns, "wrong operand type"));
        }
        tys.push(ty);
        Ok(OpKind::Binary(op, a, b))
    }

    /// `neg`, `not`, `exp`, `sqrt`, `abs`.
    fn unary(&mut self, cx: &KernelCtx<'a>, name: &str, tys: &mut Vec<ScalarType>) -> PResult<OpKind> {
        use ScalarType as T;
        let op = UnOp::from_name(name).expect("looked up");
        let a = self.raw(cx)?;
        let ty = self.raw_ty(cx, a);
        let ok = match op {
            UnOp::Not => ty == T::I1 || ty == T::I32,
            UnOp::Neg | UnOp::Abs => ty == T::I32 || ty == T::F32,
            UnOp::Exp | UnOp::Sqrt => ty == T::F32,
        };
        if !ok {
            return Err(Diagnostic::user(
                "E0130",
                format!("`{name}` does not take {ty} operands"),
            )
            .with_label(a.span(), "wrong operand type"));
        }
        tys.push(ty);
        Ok(OpKind::Unary(op, self.coerce(cx, a, ty)?))
    }

    /// `@group` of `in_group`.
    fn group_ref(&mut self, cx: &KernelCtx<'a>) -> PResult<Group> {
        let (g, gs) = self.symbol()?;
        cx.k.groups
            .iter()
            .find(|(_, d)| d.name == g)
            .map(|(id, _)| id)
            .ok_or_else(|| {
                Diagnostic::user("E0132", format!("`@{g}` is not a thread group"))
                    .with_label(gs, "unknown group")
            })
    }

    /// `compute "name"(args) : types`.
    fn compute(&mut self, cx: &KernelCtx<'a>, tys: &mut Vec<ScalarType>) -> PResult<OpKind> {
        let (n, _) = self.string()?;
        self.expect(Tok::LParen)?;
        let mut args = Vec::new();
        if !self.eat(&Tok::RParen) {
            loop {
                let r = self.raw(cx)?;
                let ty = self.raw_ty(cx, r);
                args.push(self.coerce(cx, r, ty)?);
                if self.eat(&Tok::RParen) {
                    break;
                }
                self.expect(Tok::Comma)?;
            }
        }
        if self.eat(&Tok::Colon) {
            loop {
                tys.push(self.scalar_type()?.0);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        Ok(OpKind::Compute { name: n.to_string(), args })
    }

    /// `%v = view @a[%s, 0:16]`: defines the view and appends its op itself.
    fn view_op(
        &mut self,
        cx: &mut KernelCtx<'a>,
        results: &[(&'a str, Span)],
        at: (Span, Span, Region),
    ) -> PResult<()> {
        let (start, ns, region) = at;
        let (base, bs) = self.memref(cx)?;
        let base_rank = cx.k.rank(base);
        self.expect(Tok::LBracket)?;
        let (indices, saw_range) = self.view_indices(cx, base)?;
        if indices.len() > base_rank || (indices.len() == base_rank && !saw_range) {
            return Err(Diagnostic::user(
                "E0135",
                "a view must keep at least one dimension of its base",
            )
            .with_label(
                bs.to(self.prev_span()),
                format!("base has rank {base_rank}"),
            ));
        }
        if cx.k.elem(base) == ElemType::MBarrier {
            return Err(Diagnostic::user(
                "E0136",
                "views of mbarrier arrays are not supported",
            )
            .with_label(bs, "mbarrier array"));
        }
        if results.len() != 1 {
            return Err(
                Diagnostic::user("E0137", "`view` defines exactly one view name")
                    .with_label(ns, "bind it as `%v = view ...`"),
            );
        }
        let (view, op) = cx.k.new_view(base, indices);
        cx.k.op_spans.set(op, start.to(self.prev_span()));
        cx.k.append(region, op);
        let (vn, vs) = results[0];
        self.define(cx, vn, vs, Sym::View(view))
    }

    /// A view's indices after `[` up to and including `]`, and whether a range was among them.
    fn view_indices(&mut self, cx: &KernelCtx<'a>, base: MemRef) -> PResult<(Vec<ViewIndex>, bool)> {
        let mut indices = Vec::new();
        let mut saw_range = false;
        loop {
            let is_range = matches!(self.peek(), Tok::Int(_)) && self.peek_next() == &Tok::Colon;
            if is_range {
                let (lo, _) = self.uint("a range bound")?;
                self.expect(Tok::Colon)?;
                let (hi, hs) = self.uint("a range bound")?;
                let dim = cx.k.shape(base).get(indices.len()).copied().unwrap_or(0);
                if hi <= lo || hi > dim {
                    return Err(Diagnostic::user(
                        "E0133",
                        format!("range {lo}:{hi} is empty or exceeds the dimension ({dim})"),
                    )
                    .with_label(hs, "bad range"));
                }
                saw_range = true;
                indices.push(ViewIndex::Range(lo, hi));
            } else {
                let s = self.span();
                if saw_range {
                    return Err(Diagnostic::user(
                        "E0134",
                        "dynamic view indices must come before ranges",
                    )
                    .with_label(s, "index after a range"));
                }
                indices.push(ViewIndex::At(self.operand(cx, ScalarType::I32)?));
            }
            if self.eat(&Tok::RBracket) {
                return Ok((indices, saw_range));
            }
            self.expect(Tok::Comma)?;
        }
    }

    /// Shared and global accesses: `load`, `store`, `atomic`, `local_*`, `gload`, `gstore`,
    /// `gatomic`.
    fn access_op(&mut self, cx: &KernelCtx<'a>, code: OpCode, out: &mut OpOut) -> PResult<OpKind> {
        let tys = &mut out.tys;
        Ok(match code {
            OpCode::Load => {
                let (m, idx, s) = self.shared_index(cx)?;
                tys.push(self.data_elem(cx, m, s)?);
                OpKind::Load { mem: m, index: idx }
            }
            OpCode::Store => {
                let (m, idx, s) = self.shared_index(cx)?;
                self.expect(Tok::Comma)?;
                let ty = self.data_elem(cx, m, s)?;
                let value = self.operand(cx, ty)?;
                OpKind::Store {
                    mem: m,
                    index: idx,
                    value,
                }
            }
            OpCode::Atomic | OpCode::GAtomic => return self.atomic(cx, code, out),
            OpCode::LocalLoad => {
                let (m, s) = self.memref(cx)?;
                let layout = self.layout()?;
                tys.push(self.data_elem(cx, m, s)?);
                OpKind::LocalLoad { mem: m, layout }
            }
            OpCode::LocalStore => {
                let (m, s) = self.memref(cx)?;
                self.expect(Tok::Comma)?;
                let ty = self.data_elem(cx, m, s)?;
                let value = self.operand(cx, ty)?;
                let layout = self.layout()?;
                OpKind::LocalStore {
                    mem: m,
                    value,
                    layout,
                }
            }
            OpCode::GLoad => {
                let (g, idx, s) = self.global_index(cx)?;
                tys.push(self.global_elem(cx, g, s)?);
                OpKind::GLoad {
                    global: g,
                    index: idx,
                }
            }
            OpCode::GStore => {
                let (g, idx, s) = self.global_index(cx)?;
                self.expect(Tok::Comma)?;
                let ty = self.global_elem(cx, g, s)?;
                let value = self.operand(cx, ty)?;
                OpKind::GStore {
                    global: g,
                    index: idx,
                    value,
                }
            }
            _ => return self.err("an access op"),
        })
    }

    /// `atomic add @a[%i], %x` and `gatomic add %A[%i], %x` (the result is optional).
    fn atomic(&mut self, cx: &KernelCtx<'a>, code: OpCode, out: &mut OpOut) -> PResult<OpKind> {
        let (o, os) = self.word()?;
        let op = AtomicOp::from_name(o).ok_or_else(|| {
            Diagnostic::user("E0138", format!("unknown atomic `{o}`"))
                .with_label(os, "expected add, min, max, exch, and or or")
        })?;
        out.optional_result = true;
        if code == OpCode::Atomic {
            let (m, idx, s) = self.shared_index(cx)?;
            self.expect(Tok::Comma)?;
            let ty = self.data_elem(cx, m, s)?;
            let value = self.operand(cx, ty)?;
            out.tys.push(ty);
            Ok(OpKind::Atomic {
                op,
                mem: m,
                index: idx,
                value,
            })
        } else {
            let (g, idx, s) = self.global_index(cx)?;
            self.expect(Tok::Comma)?;
            let ty = self.global_elem(cx, g, s)?;
            let value = self.operand(cx, ty)?;
            out.tys.push(ty);
            Ok(OpKind::GAtomic {
                op,
                global: g,
                index: idx,
                value,
            })
        }
    }

    /// Async copies: `gather_to_lds`, `cp_async`, the tile copies, `tdm_load`, `tma_load`
    /// (a token result, optional) and `tma_store`.
    fn copy_op(&mut self, cx: &KernelCtx<'a>, code: OpCode, out: &mut OpOut) -> PResult<OpKind> {
        if code == OpCode::TmaStore {
            let (dst, origin, ds) = self.global_index(cx)?;
            self.expect(Tok::Arrow)?;
            let (src, ss) = self.memref(cx)?;
            self.copy_types(cx, src, ss, dst, ds)?;
            return Ok(OpKind::TmaStore { dst, origin, src });
        }
        let kind = match code {
            OpCode::GatherToLds | OpCode::CpAsync => {
                let (dst, dst_index, ds) = self.shared_index(cx)?;
                self.expect(Tok::Arrow)?;
                let (src, src_index, ss) = self.global_index(cx)?;
                self.copy_types(cx, dst, ds, src, ss)?;
                if code == OpCode::CpAsync {
                    OpKind::CpAsync {
                        dst,
                        dst_index,
                        src,
                        src_index,
                    }
                } else {
                    OpKind::GatherToLds {
                        dst,
                        dst_index,
                        src,
                        src_index,
                    }
                }
            }
            OpCode::CpAsyncTile => OpKind::CpAsyncTile(self.tile_copy(cx)?),
            OpCode::GatherToLdsTile => OpKind::GatherToLdsTile(self.tile_copy(cx)?),
            OpCode::TdmLoad | OpCode::TmaLoad => self.tile_load(cx, code)?,
            _ => return self.err("a copy op"),
        };
        out.optional_result = true;
        out.tys.push(ScalarType::Token);
        Ok(kind)
    }

    /// `tdm_load @a <- %A[..]` and `tma_load @a <- %A[..], @full[%s]`.
    fn tile_load(&mut self, cx: &KernelCtx<'a>, code: OpCode) -> PResult<OpKind> {
        let (dst, src, origin) = self.tile_operands(cx)?;
        if code == OpCode::TdmLoad {
            return Ok(OpKind::TdmLoad { dst, src, origin });
        }
        self.expect(Tok::Comma)?;
        let (mbar, mbar_index) = self.mbar_index(cx)?;
        Ok(OpKind::TmaLoad {
            dst,
            src,
            origin,
            mbar,
            mbar_index,
        })
    }

    /// Commits and waits (`cp_async_*`, `bulk_*`, `wgmma_*`, `wait_tokens`, `waitcnt`), the
    /// proxy fence, and `wgmma`.
    fn wait_op(&mut self, cx: &KernelCtx<'a>, code: OpCode, out: &mut OpOut) -> PResult<OpKind> {
        Ok(match code {
            OpCode::CpAsyncCommit => OpKind::CpAsyncCommit,
            OpCode::CpAsyncWait => OpKind::CpAsyncWait(self.u32_("a group count")?.0),
            OpCode::BulkCommit => OpKind::BulkCommit,
            OpCode::BulkWait => OpKind::BulkWait(self.u32_("a group count")?.0),
            OpCode::WgmmaCommit => OpKind::WgmmaCommit,
            OpCode::WgmmaWait => OpKind::WgmmaWait(self.u32_("a group count")?.0),
            OpCode::FenceProxyAsync => OpKind::FenceProxyAsync,
            OpCode::WaitTokens => {
                let mut toks = Vec::new();
                loop {
                    let r = self.raw(cx)?;
                    match self.coerce(cx, r, ScalarType::Token)? {
                        Operand::Value(v) => toks.push(v),
                        Operand::Imm(_) => {
                            return Err(Diagnostic::user("E0140", "expected a token value")
                                .with_label(r.span(), "not a token"));
                        }
                    }
                    if !self.eat(&Tok::Comma) {
                        break;
                    }
                }
                OpKind::WaitTokens(toks)
            }
            OpCode::WaitCnt => OpKind::WaitCnt(self.counters()?),
            OpCode::Wgmma => self.wgmma(cx, &mut out.tys)?,
            _ => return self.err("a wait op"),
        })
    }

    /// The counters of `waitcnt vmcnt(0) lgkmcnt(0)`: at least one, none twice.
    fn counters(&mut self) -> PResult<Vec<(Counter, u32)>> {
        let mut cs: Vec<(Counter, u32)> = Vec::new();
        while let Tok::Word(w) = *self.peek() {
            let Some(c) = Counter::from_name(w) else {
                break;
            };
            let s = self.bump().span;
            if cs.iter().any(|(x, _)| *x == c) {
                return Err(
                    Diagnostic::user("E0141", format!("counter `{w}` given twice"))
                        .with_label(s, "repeated"),
                );
            }
            self.expect(Tok::LParen)?;
            let (n, _) = self.u32_("a count")?;
            self.expect(Tok::RParen)?;
            cs.push((c, n));
        }
        if cs.is_empty() {
            return self.err("a counter such as `vmcnt(0)`");
        }
        Ok(cs)
    }

    /// `wgmma A, @b, %c0, ..`: one f32 result per accumulator (docs/ir.md section 4).
    fn wgmma(&mut self, cx: &KernelCtx<'a>, tys: &mut Vec<ScalarType>) -> PResult<OpKind> {
        let a = self.wgmma_a(cx)?;
        let (b, bs) = self.memref(cx)?;
        self.expect(Tok::Comma)?;
        self.data_elem(cx, b, bs)?;
        let mut acc = vec![self.operand(cx, ScalarType::F32)?];
        while self.eat(&Tok::Comma) {
            acc.push(self.operand(cx, ScalarType::F32)?);
        }
        tys.extend(acc.iter().map(|_| ScalarType::F32));
        Ok(OpKind::Wgmma {
            a,
            b,
            acc: WgmmaAcc(acc),
        })
    }

    /// Barriers and mbarrier ops.
    fn sync_op(&mut self, cx: &KernelCtx<'a>, code: OpCode) -> PResult<OpKind> {
        Ok(match code {
            OpCode::Barrier => OpKind::Barrier,
            OpCode::WarpSync => OpKind::WarpSync,
            OpCode::SplitSignal | OpCode::SplitWait => {
                let (id, s) = self.int()?;
                let id = i32::try_from(id).map_err(|_| {
                    Diagnostic::user("E0142", "barrier id out of range").with_label(s, "bad id")
                })?;
                if code == OpCode::SplitSignal {
                    OpKind::SplitSignal(id)
                } else {
                    OpKind::SplitWait(id)
                }
            }
            OpCode::NamedArrive | OpCode::NamedSync => {
                let (id, _) = self.u32_("a barrier id")?;
                self.expect(Tok::Comma)?;
                let (count, _) = self.u32_("a thread count")?;
                if code == OpCode::NamedArrive {
                    OpKind::NamedArrive { id, count }
                } else {
                    OpKind::NamedSync { id, count }
                }
            }
            _ => self.mbar_op(cx, code)?,
        })
    }

    /// `mbar_init`, `mbar_arrive`, `mbar_expect_tx`, `mbar_wait`, `mbar_inval`.
    fn mbar_op(&mut self, cx: &KernelCtx<'a>, code: OpCode) -> PResult<OpKind> {
        if signature::signature(code).family != Family::Mbarrier {
            return self.err("a sync op");
        }
        let (mbar, index) = self.mbar_index(cx)?;
        Ok(match code {
            OpCode::MbarInit => {
                self.expect(Tok::Comma)?;
                let (count, _) = self.u32_("an arrival count")?;
                OpKind::MbarInit { mbar, index, count }
            }
            OpCode::MbarArrive => {
                let tx = if self.eat_word("tx") {
                    Some(self.u32_("a byte count")?.0)
                } else {
                    None
                };
                OpKind::MbarArrive { mbar, index, tx }
            }
            OpCode::MbarExpectTx => {
                self.expect(Tok::Comma)?;
                let (bytes, _) = self.u32_("a byte count")?;
                OpKind::MbarExpectTx { mbar, index, bytes }
            }
            OpCode::MbarWait => {
                self.expect(Tok::Comma)?;
                let parity = self.operand(cx, ScalarType::I32)?;
                OpKind::MbarWait {
                    mbar,
                    index,
                    parity,
                }
            }
            _ => OpKind::MbarInval { mbar, index },
        })
    }

    /// `yield %a, ..` and `condition %c`.
    fn terminator_op(&mut self, cx: &KernelCtx<'a>, code: OpCode) -> PResult<OpKind> {
        if code == OpCode::Condition {
            return Ok(OpKind::Condition(self.operand(cx, ScalarType::I1)?));
        }
        let mut vals = Vec::new();
        if !self.at_line_end() {
            loop {
                let r = self.raw(cx)?;
                let ty = self.raw_ty(cx, r);
                vals.push(self.coerce(cx, r, ty)?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        Ok(OpKind::Yield(vals))
    }

    fn at_line_end(&self) -> bool {
        // A `yield` with no operands is followed by `}` or by the next op's first token.
        matches!(self.peek(), Tok::RBrace | Tok::Eof | Tok::Word(_))
            && !matches!(self.peek(), Tok::Word(w) if *w == "true" || *w == "false")
    }

    fn operand_ty(&self, cx: &KernelCtx<'a>, op: Operand) -> ScalarType {
        match op {
            Operand::Value(v) => cx.k.values[v].ty,
            Operand::Imm(s) => s.ty(),
        }
    }

    /// `iter(%a = x, %b = y)` (optional).
    fn iter_args(&mut self, cx: &KernelCtx<'a>) -> PResult<Vec<(&'a str, Span, Operand)>> {
        let mut v = Vec::new();
        if self.eat_word("iter") {
            self.expect(Tok::LParen)?;
            loop {
                let (n, s) = self.local()?;
                self.expect(Tok::Eq)?;
                let r = self.raw(cx)?;
                let ty = self.raw_ty(cx, r);
                v.push((n, s, self.coerce(cx, r, ty)?));
                if self.eat(&Tok::RParen) {
                    break;
                }
                self.expect(Tok::Comma)?;
            }
        }
        Ok(v)
    }

    fn region_block(
        &mut self,
        cx: &mut KernelCtx<'a>,
        r: Region,
        args: &[(&'a str, Span, Value)],
    ) -> PResult<()> {
        self.expect(Tok::LBrace)?;
        let mark = cx.names.mark();
        let res = args
            .iter()
            .try_for_each(|&(n, s, v)| self.define(cx, n, s, Sym::Value(v)))
            .and_then(|()| self.nested_items(cx, r));
        cx.names.undo(mark);
        res?;
        self.expect(Tok::RBrace)?;
        Ok(())
    }

    fn yield_types(&self, cx: &KernelCtx<'a>, r: Region, at: Span) -> PResult<Vec<ScalarType>> {
        if let Some(&last) = cx.k.region_ops(r).last()
            && let OpKind::Yield(vals) = &cx.k.ops[last].kind
        {
            return Ok(vals.iter().map(|o| self.operand_ty(cx, *o)).collect());
        }
        Err(Diagnostic::user(
            "E0145",
            "an `if` with results must end each branch with `yield`",
        )
        .with_label(at, "no yield in the then-branch"))
    }

    /// A wgmma's A operand and its comma: `@a` / `%view`, or registers `[%a0, ..]` (f32).
    fn wgmma_a(&mut self, cx: &KernelCtx<'a>) -> PResult<WgmmaA> {
        let a = if self.eat(&Tok::LBracket) {
            let mut regs = vec![self.operand(cx, ScalarType::F32)?];
            while self.eat(&Tok::Comma) {
                regs.push(self.operand(cx, ScalarType::F32)?);
            }
            self.expect(Tok::RBracket)?;
            WgmmaA::Regs(regs)
        } else {
            let (a, as_) = self.memref(cx)?;
            self.data_elem(cx, a, as_)?;
            WgmmaA::Shared(a)
        };
        self.expect(Tok::Comma)?;
        Ok(a)
    }

    fn data_elem(&self, cx: &KernelCtx<'a>, m: MemRef, s: Span) -> PResult<ScalarType> {
        cx.k.elem(m).scalar().ok_or_else(|| {
            Diagnostic::user("E0146", "mbarrier arrays hold no data")
                .with_label(s, "only mbarrier ops may use this buffer")
        })
    }

    fn global_elem(&self, cx: &KernelCtx<'a>, g: Global, s: Span) -> PResult<ScalarType> {
        cx.k.globals[g].elem.scalar().ok_or_else(|| {
            Diagnostic::user("E0146", "global buffers cannot hold mbarriers")
                .with_label(s, "bad element type")
        })
    }

    fn copy_types(&self, cx: &KernelCtx<'a>, m: MemRef, ms: Span, g: Global, gs: Span) -> PResult<()> {
        let (a, b) = (cx.k.elem(m), cx.k.globals[g].elem);
        if a != b {
            return Err(
                Diagnostic::user("E0147", format!("copy between {b} and {a} buffers"))
                    .with_label(ms, format!("{a} here"))
                    .with_label(gs, format!("{b} here"))
                    .with_help(
                        "async copies move bytes: both sides must have the same element type",
                    ),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::kernel_lines;

    /// The one-pass count equals its definition: the line breaks before the first `}` that
    /// opens a line, from every starting byte of a few texts.
    #[test]
    fn kernel_lines_counts_the_breaks_before_the_closing_brace() {
        let texts = [
            "kernel @a() {\n  %t = tid.x\n}\nkernel @b() {\n}\n",
            "",
            "\n\n}",
            "no break",
            "a\n b\n}\n}\n",
            "x\n\n\n",
        ];
        // Long texts too: the line breaks are counted in runs of 255 bytes.
        let long: Vec<String> = [(1, 300), (7, 200), (254, 3), (255, 4), (256, 2), (3, 1000)]
            .iter()
            .map(|&(width, lines)| {
                let mut t = String::new();
                for i in 0..lines {
                    t.push_str(&"x".repeat(width + i % 3));
                    t.push('\n');
                    if i % 97 == 50 {
                        t.push_str(" }\n");
                    }
                }
                t.push_str("}\ntail\n");
                t
            })
            .collect();
        for t in texts.iter().copied().chain(long.iter().map(String::as_str)) {
            for at in 0..=t.len() {
                let rest = &t[at..];
                let end = rest.find("\n}").unwrap_or(rest.len());
                let want = rest[..end].matches('\n').count();
                assert_eq!(kernel_lines(t, at), want, "{t:?} at {at}");
            }
        }
    }
}
