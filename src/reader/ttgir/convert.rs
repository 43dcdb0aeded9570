//! The TTGIR-to-`.kir` converter: walks the module's lines, keeps a table of what every SSA
//! value is (a `.kir` value, a lazily written pure op, a shared buffer or view, an mbarrier, a
//! global pointer), and writes `.kir` lines for the ops that touch shared memory or order it.
//!
//! Invariant: every `.kir` line written at an op's own position records that op's TTGIR line
//! ([`super::Imported::line_origin`]); lazily written values record none. Complexity: linear
//! in the number of lines, plus the written values (each lazily written value once per
//! region that needs it).

use std::collections::{HashMap, HashSet};

use super::Imported;
use super::layouts::Aliases;
use super::lexer::{Line, T, Tok};
use super::types::Shaped;
use crate::diag::{DiagKind, Diagnostic, Span};

/// What a TTGIR SSA value is to the converter.
#[derive(Clone, Debug)]
pub(super) enum V {
    /// A `.kir` value (name) of a scalar type.
    Kir(String, &'static str),
    /// A pure op written when first needed.
    Lazy(usize),
    /// A shared buffer or a view of one.
    Mem(Mem),
    /// One mbarrier of an mbarrier array: the array and the index value (TTGIR name).
    Mbar(usize, Option<String>),
    /// Global memory: the pointer parameter it derives from, when known.
    Ptr(Option<String>),
    /// A TMA descriptor of a global parameter, with the global's shape when known.
    Desc(Option<String>),
    /// Nothing smemsync needs (tokens, unit).
    Unit,
}

/// A shared buffer or view.
#[derive(Clone, Debug)]
pub(super) struct Mem {
    /// `.kir` memref: `@buf` or `%view`.
    pub kir: String,
    pub shape: Vec<u64>,
    /// Index of the root buffer in [`Converter::buffers`].
    pub buf: usize,
    /// Whether a collective access through it keeps the layout's element mapping (false
    /// through `memdesc_trans`/`memdesc_reinterpret`).
    pub exact: bool,
    /// How the descriptor was built when it is a slot of one multi-buffered allocation
    /// (`ttg.memdesc_index` of a `ttg.local_alloc`, then views): what a loop may carry as
    /// an index instead ([`super::slots`]).
    pub slot: Option<super::slots::Slot>,
}

/// A pure op whose value is written on first use.
#[derive(Clone, Debug)]
pub(super) struct Lazy {
    pub op: String,
    pub args: Vec<String>,
    pub ty: &'static str,
    pub pred: Option<String>,
    pub literal: Option<String>,
    /// Bit width of the TTGIR result type (`i8` → 8, `i64`/`index` → 64; 0: not an integer).
    pub bits: u32,
    /// Bit width of the first type of the op's type section (the operand of a cast or
    /// `cmpi`; 0: not an integer).
    pub arg_bits: u32,
    /// The value of an integer constant (sign-extended from its width; `i64` ones raw).
    pub int: Option<i64>,
    pub span: Span,
}

/// A shared buffer declaration with its live range (in statement numbers).
#[derive(Clone, Debug)]
pub(super) struct Buf {
    pub name: String,
    pub elem: &'static str,
    pub shape: Vec<u64>,
    pub bytes: u64,
    pub from: usize,
    pub to: usize,
    pub loops: Vec<usize>,
    pub pending_loops: Vec<usize>,
    pub offset: Option<u64>,
    pub mbarrier: bool,
    /// `layout "L"` of the declaration: `scratch` (no definition: an unknown address map)
    /// for Triton's scratch buffers, whose addressing its lowering chooses (W1004 where they
    /// alias another buffer).
    pub layout: Option<String>,
}

/// One parsed statement: results, op name, operand tokens, the line.
pub(super) struct Stmt {
    pub results: Vec<(String, usize, Span)>,
    pub op: String,
    pub op_span: Span,
    pub rest: Vec<Tok>,
    pub line: Line,
}

impl Stmt {
    /// The name of the first result (empty when the op has none).
    pub fn result(&self) -> String {
        self.results.first().map(|r| r.0.clone()).unwrap_or_default()
    }

    /// The first operand with its span, or a diagnostic at the line naming what was expected.
    pub fn first_operand(&self, what: &str) -> Result<(String, Span), Diagnostic> {
        operands(&self.rest)
            .first()
            .cloned()
            .ok_or_else(|| bad(self.line.span, format!("expected {what}")))
    }
}

/// A kernel written: its name and header pieces and body lines.
pub(super) struct KernelOut {
    pub header: String,
    pub body: Vec<(String, Option<usize>)>,
}

pub(super) struct Converter<'a> {
    pub src: &'a str,
    pub lines: Vec<Line>,
    pub pos: usize,
    pub aliases: Aliases,
    pub layout_names: HashMap<String, String>,
    pub layout_defs: Vec<(String, String)>,
    /// Role-relative layouts of the current function (`layout "N" in @group [= #base]`):
    /// name, group, and the layout name they rebind (`None`: opaque over the group).
    pub role_layouts: Vec<(String, String, Option<String>)>,
    pub vals: HashMap<String, V>,
    pub lazies: Vec<Lazy>,
    pub cache: Vec<HashMap<String, String>>,
    pub used: HashSet<String>,
    pub out: Vec<(String, Option<usize>)>,
    pub depth: usize,
    pub buffers: Vec<Buf>,
    pub globals: Vec<(String, &'static str, Vec<String>)>,
    pub scalars: Vec<(String, &'static str)>,
    pub warnings: Vec<Diagnostic>,
    pub warned: HashSet<String>,
    pub target: Option<String>,
    pub nvidia: bool,
    pub warps: u64,
    pub lanes: u64,
    pub stmt_no: usize,
    pub loops: Vec<(usize, usize)>,
    pub loop_stack: Vec<usize>,
    pub kernels: Vec<KernelOut>,
    pub region_end: HashMap<usize, usize>,
    pub need_elect: bool,
    pub scratch_no: usize,
    pub has_offsets: bool,
    /// What the `scf.yield` of the region being converted writes: the kept positions, and
    /// the descriptor positions carried as slot indices ([`super::slots`]).
    pub yield_kept: Option<Vec<super::slots::Keep>>,
    pub else_pending: bool,
    /// Memdescs used as mbarriers, by scope ([`super::scopes`]).
    pub mbar_names: HashSet<super::scopes::Scoped>,
    /// The value scope of every line ([`super::scopes`]).
    pub scope_of: Vec<usize>,
    /// The role being converted inside `ttg.warp_specialize` (`super::warpspec`).
    pub role: Option<super::warpspec::Role>,
    /// Thread groups of the roles: name, first thread, end thread.
    pub groups: Vec<(String, u64, u64)>,
    /// Warps of the partitions beyond the module's `ttg.num-warps`.
    pub extra_warps: u64,
    /// The before-region arguments of the `scf.while` whose condition region is converted.
    pub while_args: Option<Vec<String>>,
    /// Value ranges known from loops (induction variables, `i64` counters), by TTGIR name
    /// ([`super::ranges`]).
    pub int_ranges: HashMap<String, super::ranges::Range>,
}

/// The error of a statement the converter cannot read (E1102), at `span`.
pub(super) fn bad(span: Span, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::user("E1102", msg.into()).with_label(span, "here")
}

impl<'a> Converter<'a> {
    pub fn new(src: &'a str, lines: Vec<Line>) -> Self {
        Converter {
            src,
            lines,
            pos: 0,
            aliases: HashMap::new(),
            layout_names: HashMap::new(),
            layout_defs: Vec::new(),
            role_layouts: Vec::new(),
            vals: HashMap::new(),
            lazies: Vec::new(),
            cache: vec![HashMap::new()],
            used: HashSet::new(),
            out: Vec::new(),
            depth: 1,
            buffers: Vec::new(),
            globals: Vec::new(),
            scalars: Vec::new(),
            warnings: Vec::new(),
            warned: HashSet::new(),
            target: None,
            nvidia: true,
            warps: 4,
            lanes: 32,
            stmt_no: 0,
            loops: Vec::new(),
            loop_stack: Vec::new(),
            kernels: Vec::new(),
            region_end: HashMap::new(),
            need_elect: false,
            scratch_no: 0,
            has_offsets: false,
            yield_kept: None,
            else_pending: false,
            mbar_names: HashSet::new(),
            scope_of: Vec::new(),
            role: None,
            groups: Vec::new(),
            extra_warps: 0,
            while_args: None,
            int_ranges: HashMap::new(),
        }
    }

    /// A warning (once per code and key) located at `span`.
    pub fn warn(&mut self, code: &'static str, key: &str, span: Span, msg: String) {
        if self.warned.insert(format!("{code}:{key}")) {
            self.warnings.push(
                Diagnostic::warning(DiagKind::User, code, msg).with_label(span, "imported here"),
            );
        }
    }

    /// Writes one `.kir` line at the current depth; `origin` is the TTGIR line it stands for.
    pub fn emit(&mut self, text: String, origin: Option<Span>) {
        let pad = "  ".repeat(self.depth);
        self.out.push((format!("{pad}{text}"), origin.map(|s| s.lo as usize)));
    }

    /// A fresh `.kir` local name derived from a TTGIR name.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut s: String = base
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if s.is_empty() {
            s.push('v');
        }
        let mut name = s.clone();
        let mut n = 1;
        while !self.used.insert(name.clone()) {
            name = format!("{s}_{n}");
            n += 1;
        }
        name
    }

    /// Opens a region: lazily written values inside it are not visible after it.
    pub fn push_region(&mut self) {
        self.depth += 1;
        self.cache.push(HashMap::new());
    }

    pub fn pop_region(&mut self) {
        self.depth -= 1;
        self.cache.pop();
    }

    /// The `.kir` name of a layout encoding (alias `#blocked1` → `blocked1`; an inline
    /// encoding gets a generated name), recording its definition.
    pub fn layout_name(&mut self, enc: &str) -> String {
        if let Some(n) = self.layout_names.get(enc) {
            return n.clone();
        }
        let name = match enc.strip_prefix('#').filter(|n| !n.contains('<')) {
            Some(alias) => alias.to_string(),
            None => {
                let kind = enc
                    .trim_start_matches("#ttg.")
                    .split(['<', '.'])
                    .next()
                    .unwrap_or("layout")
                    .to_string();
                format!("{kind}{}", self.layout_defs.len())
            }
        };
        self.layout_names.insert(enc.to_string(), name.clone());
        let text = match enc.strip_prefix('#').and_then(|a| self.aliases.get(a)) {
            Some(t) => t.clone(),
            None => enc.to_string(),
        };
        // An inline encoding may name aliases (`parent = #blocked1`): define those too.
        for (i, _) in text.match_indices('#') {
            let rest = &text[i + 1..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let alias = &rest[..end];
            if self.aliases.contains_key(alias) {
                self.layout_name(&format!("#{alias}"));
            }
        }
        self.layout_defs.push((name.clone(), text));
        name
    }

    /// `layout "L"` for an access in encoding `enc` (a fresh opaque name when `exact` is
    /// false: the element mapping is unknown). Inside a `ttg.warp_specialize` role the layout
    /// is role-relative (docs/ir.md, "Role-relative layouts"): `L` is bound to the role's
    /// group, whose first thread is the layout's thread 0, as Triton numbers a partition's
    /// warps from 0.
    pub fn layout_clause(&mut self, enc: Option<&str>, exact: bool) -> String {
        let base = match enc {
            Some(e) if exact && e.starts_with('#') => Some(self.layout_name(e)),
            _ => None,
        };
        let Some(group) = self.role.as_ref().map(|r| r.group.clone()) else {
            let name = base.unwrap_or_else(|| {
                self.scratch_no += 1;
                format!("opaque{}", self.scratch_no)
            });
            return format!("layout \"{name}\"");
        };
        let name = match &base {
            Some(b) => format!("{b}_{group}"),
            None => {
                self.role_opaque_warning();
                self.scratch_no += 1;
                format!("opaque{}", self.scratch_no)
            }
        };
        if !self.role_layouts.iter().any(|(n, ..)| *n == name) {
            self.role_layouts.push((name.clone(), group, base));
        }
        format!("layout \"{name}\"")
    }

    /// The `layout "L"` of a buffer allocated as `s` and declared with `kir_shape`: its
    /// `#shared` encoding, fitted to the buffer's rank ([`super::layouts::fit_shared`]), so
    /// that aliasing between buffers is judged on Triton's real address maps (docs/ir.md,
    /// "Aliasing and W1004"). `None` (row-major) for a memdesc without an encoding. An
    /// encoding that cannot be written exactly (a rank the encoding does not fit, an element
    /// split into several `.kir` elements) gets a name without a definition, an *unknown*
    /// address map (conservative where the buffer aliases another), and W1115.
    pub fn shared_layout(&mut self, s: &Shaped, kir_shape: &[u64], span: Span) -> Option<String> {
        let enc = s.enc.as_deref().filter(|e| e.starts_with('#'))?;
        let text = super::layouts::resolve(&self.aliases, enc).to_string();
        let rank = kir_shape.len();
        let fitted = (kir_shape == s.shape.as_slice())
            .then(|| super::layouts::fit_shared(&text, rank))
            .flatten();
        let base = enc
            .strip_prefix('#')
            .filter(|n| !n.contains('<'))
            .unwrap_or("shared")
            .to_string();
        let Some(def) = fitted else {
            self.warn(
                "W1115",
                &format!("{text}@{rank}"),
                span,
                format!(
                    "the shared encoding `{text}` is not recorded on this {rank}-D buffer \
                     (smemsync cannot write it for this shape): its address map is unknown, \
                     and a buffer that shares bytes with it is W1004 (conservative)"
                ),
            );
            self.scratch_no += 1;
            return Some(format!("unknown_{base}{}", self.scratch_no));
        };
        if def == text {
            return Some(self.layout_name(enc));
        }
        let key = format!("{enc}@{rank}");
        if let Some(n) = self.layout_names.get(&key) {
            return Some(n.clone());
        }
        let mut name = format!("{base}_{rank}d");
        while self.layout_defs.iter().any(|(n, _)| *n == name) {
            name.push('_');
        }
        self.layout_names.insert(key, name.clone());
        self.layout_defs.push((name.clone(), def));
        Some(name)
    }

    /// W1114 (once): a collective access in a role whose layout stays opaque (a view through
    /// `memdesc_trans`/`memdesc_reinterpret`) is spread over the role's threads only.
    fn role_opaque_warning(&mut self) {
        let Some(r) = &self.role else { return };
        let first = r.first;
        let span = self.lines[self.pos.saturating_sub(1).min(self.lines.len() - 1)].span;
        self.warn(
            "W1114",
            "partition-layout",
            span,
            format!(
                "a collective access in a `ttg.warp_specialize` role (threads from {first}) has \
                 an opaque layout (its view does not keep the encoding's element mapping): any \
                 thread of the role may touch any element (conservative)"
            ),
        );
    }

    /// Parses the statement at line `i`.
    pub fn stmt(&self, i: usize) -> Result<Stmt, Diagnostic> {
        let line = &self.lines[i];
        let toks = &line.toks;
        let mut results = Vec::new();
        let mut k = 0;
        if matches!(toks.first().map(|t| &t.t), Some(T::Val(_))) {
            loop {
                let Some(Tok {
                    t: T::Val(n),
                    span,
                }) = toks.get(k)
                else {
                    return Err(bad(
                        toks.get(k).map_or(line.span, |t| t.span),
                        "expected a result name",
                    ));
                };
                k += 1;
                let mut count = 1;
                if toks.get(k).map(|t| &t.t) == Some(&T::P(':')) {
                    match toks.get(k + 1).map(|t| &t.t) {
                        Some(T::Int(c)) if *c > 0 && *c < 4096 => count = *c as usize,
                        _ => return Err(bad(toks[k].span, "expected a result count")),
                    }
                    k += 2;
                }
                results.push((n.clone(), count, *span));
                match toks.get(k).map(|t| &t.t) {
                    Some(T::P(',')) => k += 1,
                    Some(T::P('=')) => {
                        k += 1;
                        break;
                    }
                    _ => {
                        return Err(bad(
                            toks.get(k).map_or(line.span, |t| t.span),
                            "expected `=` after the results",
                        ));
                    }
                }
            }
        }
        let (op, op_span) = match toks.get(k) {
            Some(Tok {
                t: T::Word(w),
                span,
            }) => (w.clone(), *span),
            Some(Tok { t: T::Str(w), span }) => (w.clone(), *span),
            Some(t) => return Err(bad(t.span, "expected an op name")),
            None => return Err(bad(line.span, "expected an op after `=`")),
        };
        Ok(Stmt {
            results,
            op,
            op_span,
            rest: toks[k + 1..].to_vec(),
            line: line.clone(),
        })
    }

    /// The text of a line.
    pub fn text(&self, line: &Line) -> &'a str {
        self.src.get(line.span.lo as usize..line.span.hi as usize).unwrap_or("")
    }

    /// Assembles the `.kir` text and side tables.
    pub fn finish(self) -> Imported {
        let mut kir = String::new();
        let mut origin = Vec::new();
        for k in &self.kernels {
            for l in k.header.lines() {
                kir.push_str(l);
                kir.push('\n');
                origin.push(None);
            }
            for (l, o) in &k.body {
                kir.push_str(l);
                kir.push('\n');
                origin.push(*o);
            }
            kir.push_str("}\n");
            origin.push(None);
        }
        Imported {
            kir,
            warnings: self.warnings,
            line_origin: origin,
            region_end: self.region_end,
            target: self.target,
        }
    }
}

/// Operand names (`%x`) of a statement's operand section (before the top-level `:`).
pub(super) fn operands(rest: &[Tok]) -> Vec<(String, Span)> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    for t in rest {
        match &t.t {
            T::P('{') | T::P('(') | T::P('[') => depth += 1,
            T::P('}') | T::P(')') | T::P(']') => depth -= 1,
            T::P(':') if depth <= 0 => break,
            T::Val(n) => out.push((n.clone(), t.span)),
            _ => {}
        }
    }
    out
}

/// The type texts after the top-level `:` of a statement: those after the last top-level
/// `->` (or `to`) when there is one, else all; split at top-level commas.
pub(super) fn result_types(rest: &[Tok]) -> Vec<String> {
    let mut depth = 0i32;
    let mut start = None;
    for (i, t) in rest.iter().enumerate() {
        match &t.t {
            T::P('{') | T::P('(') | T::P('[') => depth += 1,
            T::P('}') | T::P(')') | T::P(']') => depth -= 1,
            T::P(':') if depth <= 0 && start.is_none() => start = Some(i + 1),
            _ => {}
        }
    }
    let Some(s) = start else {
        return Vec::new();
    };
    let mut seg = &rest[s..];
    if let Some(a) = seg
        .iter()
        .rposition(|t| t.t == T::Arrow || t.t == T::Word("to".into()))
    {
        seg = &seg[a + 1..];
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    for t in seg {
        match &t.t {
            T::Ty(x) | T::Word(x) => cur.push_str(x),
            T::P(',') => out.push(std::mem::take(&mut cur)),
            T::P('(') | T::P(')') | T::P('{') => {}
            _ => {}
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The first type of a statement's type section (the operand's type for `cmpi`, `select`).
pub(super) fn first_type(rest: &[Tok]) -> Option<String> {
    let mut depth = 0i32;
    let mut seen = false;
    for t in rest {
        match &t.t {
            T::P('{') | T::P('(') | T::P('[') if !seen => depth += 1,
            T::P('}') | T::P(')') | T::P(']') if !seen => depth -= 1,
            T::P(':') if depth <= 0 && !seen => seen = true,
            T::Ty(x) | T::Word(x) if seen => return Some(x.clone()),
            _ => {}
        }
    }
    None
}

