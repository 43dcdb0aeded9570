//! The printer: writes a kernel in the canonical text form (`docs/ir.md`).
//!
//! Canonical form: two-space indentation, one op per line, declarations (groups, shared
//! buffers) first in the kernel body, immediates typed by context (`1.0` for f32), no
//! comments (explanations add `//` notes after ops through [`print_kernel_annotated`]). `parse(print(k))` yields a kernel structurally equal to `k`, and printing is a
//! fixed point: `print(parse(print(k))) == print(k)`. Values keep their source names; values a
//! pass created get fresh `%vN` names that collide with no source name.
//! Complexity: O(ops + operands). [`write_kernel`] streams the same text to a writer in
//! chunks of [`CHUNK`] bytes, so printing a kernel of 10^6 ops holds no copy of its text.

use std::cell::OnceCell;
use std::fmt::{self, Write};

use super::names::NameTable;
use crate::ir::*;

/// Prints one kernel.
pub fn print_kernel(k: &Kernel) -> String {
    let mut p = Printer::new(k);
    p.kernel();
    p.out
}

/// Writes one kernel's canonical text (exactly [`print_kernel`]'s) to `w`, [`CHUNK`] bytes
/// at a time instead of building the whole text first; stops at the first write error and
/// returns it.
pub fn write_kernel(k: &Kernel, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut p = Printer::new(k);
    p.sink = Some(Sink { w, error: None });
    p.kernel();
    p.spill(0);
    match p.sink.and_then(|s| s.error) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// How much text [`write_kernel`] gathers before it writes: large enough that the writes cost
/// nothing next to the formatting, small enough to stay in cache.
pub const CHUNK: usize = 64 * 1024;

/// The printer's per-op annotation hook: the comment lines to print after an op's line (for
/// an op with regions, after the line that opens its first region), each as `// note`,
/// indented like the op. The output still parses to the same kernel.
pub type Notes<'a> = &'a dyn Fn(Op) -> Vec<String>;

/// Prints one kernel with the `notes` of each op after its line (see [`Notes`]): how
/// explanations annotate a kernel without matching printed text back to ops.
pub fn print_kernel_annotated(k: &Kernel, notes: Notes<'_>) -> String {
    let mut p = Printer::new(k);
    p.notes = Some(notes);
    p.kernel();
    p.out
}

/// Prints several kernels separated by a blank line.
pub fn print_kernels(ks: &[Kernel]) -> String {
    ks.iter().map(print_kernel).collect::<Vec<_>>().join("\n")
}

/// Prints an op kind with no results or regions (a sync op) as its line would read, for
/// explanations.
pub fn print_op_line(k: &Kernel, kind: &OpKind) -> String {
    let mut scratch = k.clone();
    let op = scratch.new_op(kind.clone(), &[], vec![]);
    let mut p = Printer::new(&scratch);
    p.op(op, 0);
    p.out.trim_end().to_string()
}

/// How explanations, statistics and diagnostics name an op: its canonical text as it would be
/// printed, on one line and in backticks, with nested regions elided (`` `%s = shr 128, %i` ``,
/// `` `store @s[%t], %x` ``, `` `for %i = 0 to 8 step 1` ``). The one naming function: users
/// recognise what they wrote, never an internal op kind or id. Costs O(the op's operands) when
/// every value it names has a source name (fresh `%vN` names cost one pass over the values).
pub fn op_label(k: &Kernel, op: Op) -> String {
    let mut p = Printer::new(k);
    p.header_only = true;
    p.op(op, 0);
    let line = p.out.trim_end();
    let header = line.split(" { … }").next().unwrap_or(line);
    format!("`{header}`")
}

struct Printer<'a> {
    k: &'a Kernel,
    out: String,
    /// Names of every value and view, source names kept and fresh ones made up; built on the
    /// first value without a source name.
    fresh: OnceCell<Names>,
    /// Print `{ … }` for a region instead of its ops (`op_label`).
    header_only: bool,
    /// The annotation hook, when printing with notes.
    notes: Option<Notes<'a>>,
    /// The op (and its depth) whose notes are due at the end of its first line.
    due: Option<(Op, usize)>,
    /// Where [`write_kernel`] streams the text (`None`: it stays in `out`).
    sink: Option<Sink<'a>>,
}

/// A writer the printer streams to, and its first error (nothing is written after it).
struct Sink<'a> {
    w: &'a mut dyn std::io::Write,
    error: Option<std::io::Error>,
}

struct Names {
    values: SecondaryMap<Value, String>,
    views: SecondaryMap<View, String>,
}

impl Names {
    fn new(k: &Kernel) -> Self {
        let mut table = NameTable::with_source_names(k);
        let mut name = |n: &str, prefix: &str| {
            if n.is_empty() {
                table.numbered(prefix)
            } else {
                n.to_string()
            }
        };
        let mut values = SecondaryMap::default();
        for v in k.values.keys() {
            values.set(v, name(k.value_names.get(v), "v"));
        }
        let mut views = SecondaryMap::default();
        for v in k.views.keys() {
            views.set(v, name(k.view_names.get(v), "view"));
        }
        Names { values, views }
    }
}

impl<'a> Printer<'a> {
    fn new(k: &'a Kernel) -> Self {
        Printer {
            k,
            out: String::new(),
            fresh: OnceCell::new(),
            header_only: false,
            notes: None,
            due: None,
            sink: None,
        }
    }

    /// When streaming, writes out the text gathered so far once it holds at least `at` bytes
    /// (0: whatever there is), at a line boundary between ops.
    fn spill(&mut self, at: usize) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        if self.out.len() < at.max(1) {
            return;
        }
        if sink.error.is_none()
            && let Err(e) = sink.w.write_all(self.out.as_bytes())
        {
            sink.error = Some(e);
        }
        self.out.clear();
    }

    /// Prints the notes of the op whose first line was just finished, if any are due.
    fn flush_notes(&mut self) {
        let (Some(notes), Some((op, depth))) = (self.notes, self.due.take()) else {
            return;
        };
        for n in notes(op) {
            self.ind(depth);
            let _ = writeln!(self.out, "// {n}");
        }
    }

    fn names(&self) -> &Names {
        self.fresh.get_or_init(|| Names::new(self.k))
    }

    fn view_name(&self, v: View) -> &str {
        match self.k.view_names.get(v) {
            "" => self.names().views.get(v),
            n => n,
        }
    }

    fn value_name(&self, v: Value) -> &str {
        match self.k.value_names.get(v) {
            "" => self.names().values.get(v),
            n => n,
        }
    }

    /// `%name` of a value.
    fn v(&self, v: Value) -> impl fmt::Display + '_ {
        fmt_with(move |f| {
            f.write_str("%")?;
            f.write_str(self.value_name(v))
        })
    }

    fn opnd<'s>(&'s self, o: &'s Operand) -> impl fmt::Display + 's {
        fmt_with(move |f| match o {
            Operand::Value(v) => write!(f, "{}", self.v(*v)),
            Operand::Imm(s) => write!(f, "{s}"),
        })
    }

    /// Operands separated by `, `.
    fn opnds<'s>(&'s self, os: &'s [Operand]) -> impl fmt::Display + 's {
        fmt_with(move |f| {
            for (i, o) in os.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{}", self.opnd(o))?;
            }
            Ok(())
        })
    }

    fn mem(&self, m: MemRef) -> impl fmt::Display + '_ {
        fmt_with(move |f| match m {
            MemRef::Buffer(b) => write!(f, "@{}", self.k.buffers[b].name),
            MemRef::View(v) => write!(f, "%{}", self.view_name(v)),
        })
    }

    fn idx<'s>(&'s self, m: MemRef, index: &'s [Operand]) -> impl fmt::Display + 's {
        fmt_with(move |f| write!(f, "{}[{}]", self.mem(m), self.opnds(index)))
    }

    fn gidx<'s>(&'s self, g: Global, index: &'s [Operand]) -> impl fmt::Display + 's {
        fmt_with(move |f| write!(f, "%{}[{}]", self.k.globals[g].name, self.opnds(index)))
    }

    fn kernel(&mut self) {
        let k = self.k;
        let params: Vec<String> = k
            .params
            .iter()
            .map(|p| match p {
                Param::Global(g) => {
                    let gd = &k.globals[*g];
                    let dims: Vec<String> = gd
                        .shape
                        .iter()
                        .map(|d| match d {
                            Dim::Const(c) => c.to_string(),
                            Dim::Param(v) => self.v(*v).to_string(),
                        })
                        .collect();
                    format!("%{}: global {}[{}]", gd.name, gd.elem, dims.join(", "))
                }
                Param::Scalar(v) => {
                    let range = match k.param_ranges.get(*v) {
                        Some((lo, hi)) => format!(" in [{lo}, {hi}]"),
                        None => String::new(),
                    };
                    match k.param_defaults.get(*v) {
                        Some(d) => format!("{}: {}{range} = {d}", self.v(*v), k.values[*v].ty),
                        None => format!("{}: {}{range}", self.v(*v), k.values[*v].ty),
                    }
                }
            })
            .collect();
        let _ = write!(self.out, "kernel @{}({})", k.name, params.join(", "));
        let dims = |d: [u32; 3]| {
            if d[2] != 1 {
                format!("({}, {}, {})", d[0], d[1], d[2])
            } else if d[1] != 1 {
                format!("({}, {})", d[0], d[1])
            } else {
                format!("({})", d[0])
            }
        };
        let _ = write!(self.out, " block{}", dims(k.block));
        if k.grid_known {
            let _ = write!(self.out, " grid{}", dims(k.grid));
        }
        if let Some(t) = &k.target {
            let _ = write!(self.out, " target \"{t}\"");
        }
        self.out.push_str(" {\n");
        // Groups first: a role-relative layout names its group.
        for g in k.groups.values() {
            let _ = writeln!(
                self.out,
                "  group @{} : threads [{}, {})",
                g.name, g.lo, g.hi
            );
        }
        for d in &k.layouts {
            let _ = write!(self.out, "  layout \"{}\"", d.name);
            if let Some(g) = d.group {
                let _ = write!(self.out, " in @{}", k.groups[g].name);
            }
            match &d.text {
                Some(t) => {
                    let _ = writeln!(self.out, " = {t}");
                }
                None => self.out.push('\n'),
            }
        }
        for b in k.buffers.values() {
            let dims: Vec<String> = b.shape.iter().map(|d| d.to_string()).collect();
            let _ = write!(
                self.out,
                "  shared @{} : {}[{}]",
                b.name,
                b.elem,
                dims.join(", ")
            );
            if let Some(o) = b.offset {
                let _ = write!(self.out, " at {o}");
            }
            let _ = write!(self.out, "{}", layout_s(&b.layout));
            self.out.push('\n');
            self.spill(CHUNK);
        }
        self.region(k.body(), 1);
        self.out.push_str("}\n");
    }

    fn region(&mut self, r: Region, depth: usize) {
        for &op in self.k.region_ops(r) {
            self.op(op, depth);
            self.spill(CHUNK);
        }
    }

    fn ind(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
    }

    /// `%a, %b = ` before an op with results; nothing otherwise.
    fn results(&self, op: Op) -> impl fmt::Display + '_ {
        fmt_with(move |f| {
            let rs = &self.k.ops[op].results;
            for (i, v) in rs.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{}", self.v(*v))?;
            }
            if rs.is_empty() { Ok(()) } else { f.write_str(" = ") }
        })
    }

    fn block(&mut self, r: Region, depth: usize) {
        if self.header_only {
            self.out.push_str("{ … }");
            return;
        }
        self.out.push_str("{\n");
        self.flush_notes();
        self.region(r, depth + 1);
        self.ind(depth);
        self.out.push('}');
    }

    fn op(&mut self, op: Op, depth: usize) {
        self.due = Some((op, depth));
        self.ind(depth);
        if self.k.ops[op].kind.signature().regions > 0 {
            return self.region_op(op, depth);
        }
        // The line is written straight into the output (taken out of `self` meanwhile, so
        // that the operand formatters can borrow the printer): no string per op or operand.
        let mut out = std::mem::take(&mut self.out);
        if !self.line_direct(&mut out, op) {
            let _ = self.line(&mut out, op);
        }
        out.push('\n');
        self.out = out;
        self.flush_notes();
    }

    /// The line of the ops most kernels are made of (arithmetic, thread ids, shared and global
    /// loads and stores, barriers), appended piece by piece: [`Printer::line`]'s text without
    /// the formatting machinery, which was half of printing a 10^5-op kernel. False, and
    /// nothing written, for every other kind. A test compares the two on every op of the
    /// examples and file tests.
    fn line_direct(&self, out: &mut String, op: Op) -> bool {
        let od = &self.k.ops[op];
        let m = od.kind.mnemonic();
        match &od.kind {
            OpKind::Binary(_, x, y) => {
                self.push_results(out, op);
                out.push_str(m);
                out.push(' ');
                self.push_opnd(out, x);
                out.push_str(", ");
                self.push_opnd(out, y);
            }
            OpKind::Unary(_, x) | OpKind::Cast(_, x) => {
                self.push_results(out, op);
                out.push_str(m);
                out.push(' ');
                self.push_opnd(out, x);
            }
            OpKind::Special(_) => {
                self.push_results(out, op);
                out.push_str(m);
            }
            OpKind::Load { mem, index } => {
                self.push_results(out, op);
                out.push_str(m);
                out.push(' ');
                self.push_index(out, Some(*mem), None, index);
            }
            OpKind::Store { mem, index, value } => {
                out.push_str(m);
                out.push(' ');
                self.push_index(out, Some(*mem), None, index);
                out.push_str(", ");
                self.push_opnd(out, value);
            }
            OpKind::GLoad { global, index } => {
                self.push_results(out, op);
                out.push_str(m);
                out.push(' ');
                self.push_index(out, None, Some(*global), index);
            }
            OpKind::GStore {
                global,
                index,
                value,
            } => {
                out.push_str(m);
                out.push(' ');
                self.push_index(out, None, Some(*global), index);
                out.push_str(", ");
                self.push_opnd(out, value);
            }
            OpKind::Barrier | OpKind::WarpSync => out.push_str(m),
            _ => return false,
        }
        true
    }

    /// [`Printer::results`], appended.
    fn push_results(&self, out: &mut String, op: Op) {
        let rs = &self.k.ops[op].results;
        for (i, &v) in rs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push('%');
            out.push_str(self.value_name(v));
        }
        if !rs.is_empty() {
            out.push_str(" = ");
        }
    }

    /// [`Printer::opnd`], appended (an immediate through its `Display`).
    fn push_opnd(&self, out: &mut String, o: &Operand) {
        match o {
            Operand::Value(v) => {
                out.push('%');
                out.push_str(self.value_name(*v));
            }
            Operand::Imm(s) => {
                let _ = write!(out, "{s}");
            }
        }
    }

    /// [`Printer::idx`] of a shared memref or [`Printer::gidx`] of a global (whichever is
    /// given), appended.
    fn push_index(&self, out: &mut String, m: Option<MemRef>, g: Option<Global>, ix: &[Operand]) {
        match (m, g) {
            (Some(MemRef::Buffer(b)), _) => {
                out.push('@');
                out.push_str(&self.k.buffers[b].name);
            }
            (Some(MemRef::View(v)), _) => {
                out.push('%');
                out.push_str(self.view_name(v));
            }
            (None, Some(g)) => {
                out.push('%');
                out.push_str(&self.k.globals[g].name);
            }
            (None, None) => {}
        }
        out.push('[');
        for (i, o) in ix.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.push_opnd(out, o);
        }
        out.push(']');
    }

    /// The text of an op that owns no region: its results, mnemonic (from the signature
    /// table) and operands. A flat match: one arm per operand syntax.
    fn line(&self, out: &mut String, op: Op) -> fmt::Result {
        let k = self.k;
        let res = self.results(op);
        let od = &k.ops[op];
        let m = od.kind.mnemonic();
        match &od.kind {
            OpKind::Const(c) => write!(out, "{res}{m} {c} : {}", c.ty()),
            OpKind::Special(_) => write!(out, "{res}{m}"),
            OpKind::Binary(_, x, y) => write!(out, "{res}{m} {}, {}", self.opnd(x), self.opnd(y)),
            OpKind::Unary(_, x) | OpKind::Cast(_, x) => write!(out, "{res}{m} {}", self.opnd(x)),
            OpKind::Cmp(p, x, y) => {
                write!(out, "{res}{m} {} {}, {}", p.name(), self.opnd(x), self.opnd(y))
            }
            OpKind::Select(c, x, y) => {
                let (c, x, y) = (self.opnd(c), self.opnd(x), self.opnd(y));
                write!(out, "{res}{m} {c}, {x}, {y}")
            }
            OpKind::InGroup(g) => write!(out, "{res}{m} @{}", k.groups[*g].name),
            OpKind::Compute { name, args } => {
                let tys: Vec<&str> = od.results.iter().map(|v| k.values[*v].ty.name()).collect();
                let ty = if tys.is_empty() {
                    String::new()
                } else {
                    format!(" : {}", tys.join(", "))
                };
                write!(out, "{res}{m} \"{name}\"({}){ty}", self.opnds(args))
            }
            OpKind::ViewDef(v) => {
                let vd = &k.views[*v];
                let ixs: Vec<String> = vd
                    .indices
                    .iter()
                    .map(|i| match i {
                        ViewIndex::At(o) => self.opnd(o).to_string(),
                        ViewIndex::Range(lo, hi) => format!("{lo}:{hi}"),
                    })
                    .collect();
                let (name, base) = (self.view_name(*v), self.mem(vd.base));
                write!(out, "%{name} = {m} {base}[{}]", ixs.join(", "))
            }
            OpKind::Load { mem, index } => write!(out, "{res}{m} {}", self.idx(*mem, index)),
            OpKind::Store { mem, index, value } => {
                write!(out, "{m} {}, {}", self.idx(*mem, index), self.opnd(value))
            }
            OpKind::Atomic {
                op: a,
                mem,
                index,
                value,
            } => {
                let (at, v) = (self.idx(*mem, index), self.opnd(value));
                write!(out, "{res}{m} {} {at}, {v}", a.name())
            }
            OpKind::LocalLoad { mem, layout } => {
                write!(out, "{res}{m} {}{}", self.mem(*mem), layout_s(layout))
            }
            OpKind::LocalStore { mem, value, layout } => {
                let (at, v) = (self.mem(*mem), self.opnd(value));
                write!(out, "{m} {at}, {v}{}", layout_s(layout))
            }
            OpKind::GLoad { global, index } => write!(out, "{res}{m} {}", self.gidx(*global, index)),
            OpKind::GStore {
                global,
                index,
                value,
            } => write!(out, "{m} {}, {}", self.gidx(*global, index), self.opnd(value)),
            OpKind::GAtomic {
                op: a,
                global,
                index,
                value,
            } => {
                let (at, v) = (self.gidx(*global, index), self.opnd(value));
                write!(out, "{res}{m} {} {at}, {v}", a.name())
            }
            OpKind::GatherToLds {
                dst,
                dst_index,
                src,
                src_index,
            }
            | OpKind::CpAsync {
                dst,
                dst_index,
                src,
                src_index,
            } => {
                let (d, s) = (self.idx(*dst, dst_index), self.gidx(*src, src_index));
                write!(out, "{res}{m} {d} <- {s}")
            }
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => write!(out, 
                "{res}{m} {} <- {}{}{}",
                self.mem(c.dst),
                self.gidx(c.src, &c.origin),
                layout_s(&c.layout),
                if c.masked { " masked" } else { "" }
            ),
            OpKind::TdmLoad { dst, src, origin } => {
                write!(out, "{res}{m} {} <- {}", self.mem(*dst), self.gidx(*src, origin))
            }
            OpKind::TmaLoad {
                dst,
                src,
                origin,
                mbar,
                mbar_index,
            } => {
                let (d, s) = (self.mem(*dst), self.gidx(*src, origin));
                write!(out, "{res}{m} {d} <- {s}, {}", self.idx(*mbar, mbar_index))
            }
            OpKind::TmaStore { dst, origin, src } => {
                write!(out, "{m} {} <- {}", self.gidx(*dst, origin), self.mem(*src))
            }
            OpKind::CpAsyncCommit
            | OpKind::BulkCommit
            | OpKind::WgmmaCommit
            | OpKind::FenceProxyAsync
            | OpKind::Barrier
            | OpKind::WarpSync => out.write_str(m),
            OpKind::CpAsyncWait(n) | OpKind::BulkWait(n) | OpKind::WgmmaWait(n) => {
                write!(out, "{m} {n}")
            }
            OpKind::SplitSignal(id) | OpKind::SplitWait(id) => write!(out, "{m} {id}"),
            OpKind::NamedArrive { id, count } | OpKind::NamedSync { id, count } => {
                write!(out, "{m} {id}, {count}")
            }
            OpKind::WaitTokens(ts) => {
                let ts: Vec<String> = ts.iter().map(|t| self.v(*t).to_string()).collect();
                write!(out, "{m} {}", ts.join(", "))
            }
            OpKind::WaitCnt(cs) => {
                let cs: Vec<String> = cs.iter().map(|(c, n)| format!("{}({n})", c.name())).collect();
                write!(out, "{m} {}", cs.join(" "))
            }
            OpKind::MbarInit { mbar, index, count } => {
                write!(out, "{m} {}, {count}", self.idx(*mbar, index))
            }
            OpKind::MbarArrive { mbar, index, tx } => match tx {
                Some(t) => write!(out, "{m} {} tx {t}", self.idx(*mbar, index)),
                None => write!(out, "{m} {}", self.idx(*mbar, index)),
            },
            OpKind::MbarExpectTx { mbar, index, bytes } => {
                write!(out, "{m} {}, {bytes}", self.idx(*mbar, index))
            }
            OpKind::MbarWait {
                mbar,
                index,
                parity,
            } => write!(out, "{m} {}, {}", self.idx(*mbar, index), self.opnd(parity)),
            OpKind::MbarInval { mbar, index } => write!(out, "{m} {}", self.idx(*mbar, index)),
            OpKind::Wgmma { a, b, acc } => {
                let a = match a {
                    WgmmaA::Shared(m) => self.mem(*m).to_string(),
                    WgmmaA::Regs(r) => format!("[{}]", self.opnds(r)),
                };
                let (b, acc) = (self.mem(*b), self.opnds(acc.all()));
                write!(out, "{res}{m} {a}, {b}, {acc}")
            }
            OpKind::Yield(vs) if vs.is_empty() => out.write_str(m),
            OpKind::Yield(vs) => write!(out, "{m} {}", self.opnds(vs)),
            OpKind::Condition(c) => write!(out, "{m} {}", self.opnd(c)),
            // Ops with regions print through `region_op`; none reaches here.
            OpKind::For { .. } | OpKind::If { .. } | OpKind::While { .. } | OpKind::Stage { .. } => {
                write!(out, "{res}{m}")
            }
        }
    }

    /// `for`, `if`, `while` and `stage`: the header, then each region as a block.
    fn region_op(&mut self, op: Op, depth: usize) {
        let k = self.k;
        let od = &k.ops[op];
        let m = od.kind.mnemonic();
        if od.regions.len() != od.kind.signature().regions {
            // Malformed (the verifier reports it): print what is there.
            let mut out = std::mem::take(&mut self.out);
            let _ = self.line(&mut out, op);
            self.out = out;
            for &r in &od.regions {
                self.out.push(' ');
                self.block(r, depth);
            }
            self.out.push('\n');
            return;
        }
        let res = self.results(op).to_string();
        match &od.kind {
            OpKind::For { lo, hi, step, init } => {
                let body = od.regions[0];
                let args = k.region_args(body);
                let head = format!(
                    "{res}{m} {} = {} to {} step {}",
                    self.v(args[0]),
                    self.opnd(lo),
                    self.opnd(hi),
                    self.opnd(step)
                );
                self.out.push_str(&head);
                self.iter_list(&args[1..], init);
                self.out.push(' ');
                self.block(body, depth);
            }
            OpKind::If { cond } => {
                let head = format!("{res}{m} {} ", self.opnd(cond));
                self.out.push_str(&head);
                self.block(od.regions[0], depth);
                if !k.region_ops(od.regions[1]).is_empty() {
                    self.out.push_str(" else ");
                    self.block(od.regions[1], depth);
                }
            }
            OpKind::While { init } => {
                let (before, after) = (od.regions[0], od.regions[1]);
                let _ = write!(self.out, "{res}{m}");
                self.iter_list(k.region_args(before), init);
                self.out.push(' ');
                self.block(before, depth);
                let names: Vec<String> = k.region_args(after).iter().map(|a| self.v(*a).to_string()).collect();
                let _ = write!(self.out, " do ({}) ", names.join(", "));
                self.block(after, depth);
            }
            OpKind::Stage { name } => {
                let _ = write!(self.out, "{m} \"{name}\" ");
                self.block(od.regions[0], depth);
            }
            // `op` sends only region ops here.
            _ => {}
        }
        self.out.push('\n');
    }

    fn iter_list(&mut self, args: &[Value], init: &[Operand]) {
        if args.is_empty() {
            return;
        }
        let items: Vec<String> = args
            .iter()
            .zip(init)
            .map(|(a, i)| format!("{} = {}", self.v(*a), self.opnd(i)))
            .collect();
        let _ = write!(self.out, " iter({})", items.join(", "));
    }
}

/// ` layout "L"` after a memref, or nothing.
fn layout_s(l: &Option<String>) -> impl fmt::Display + '_ {
    fmt_with(move |f| match l {
        Some(s) => write!(f, " layout \"{s}\""),
        None => Ok(()),
    })
}

/// Formats through a closure: the printer's pieces (a value's name, an operand list) write
/// into the output as they are formatted instead of building a string each.
struct Fmt<F>(F);

/// A [`Fmt`] of `f` (a function, so that the closure's argument type is inferred).
fn fmt_with<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result>(f: F) -> Fmt<F> {
    Fmt(f)
}

impl<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result> fmt::Display for Fmt<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.0)(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every op of the examples and file tests whose line [`Printer::line_direct`] writes gets
    /// the text [`Printer::line`] formats.
    #[test]
    fn the_direct_lines_are_the_formatted_lines() {
        let mut files: Vec<std::path::PathBuf> = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from("examples"), "tests/filetests".into()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "kir") {
                    files.push(p);
                }
            }
        }
        let mut direct = 0;
        for f in &files {
            let Ok(m) = crate::reader::parse(&std::fs::read_to_string(f).unwrap_or_default()) else {
                continue;
            };
            for k in &m.kernels {
                let p = Printer::new(k);
                for op in k.ops.keys() {
                    let (mut a, mut b) = (String::new(), String::new());
                    if p.line_direct(&mut a, op) {
                        direct += 1;
                        p.line(&mut b, op).unwrap();
                        assert_eq!(a, b, "{}: {op}", f.display());
                    }
                }
            }
        }
        assert!(direct > 1000, "only {direct} ops printed directly");
    }

    const SRC: &str = "kernel @k(%o: global i32[64]) block(64) {
  %t = tid.x
  %c = cmp lt %t, 32
  %v = if %c {
    %a = add %t, 1
    yield %a
  } else {
    yield %t
  }
  gstore %o[%t], %v
}
";

    #[test]
    fn an_op_is_labelled_by_its_text_without_its_regions() {
        let k = &crate::reader::parse(SRC).unwrap().kernels[0];
        let ops = k.region_ops(k.body());
        assert_eq!(op_label(k, ops[2]), "`%v = if %c`");
        assert_eq!(op_label(k, ops[3]), "`gstore %o[%t], %v`");
    }

    #[test]
    fn a_value_without_a_source_name_gets_the_printers_fresh_name() {
        let mut k = crate::reader::parse(SRC).unwrap().kernels.remove(0);
        let t = k.region_ops(k.body())[0];
        k.value_names.set(k.ops[t].results[0], String::new());
        let printed = print_kernel(&k);
        let fresh = printed.lines().nth(1).unwrap().trim();
        assert!(
            fresh.starts_with("%v") && fresh.ends_with(" = tid.x"),
            "{printed}"
        );
        assert_eq!(op_label(&k, t), format!("`{fresh}`"));
    }

    #[test]
    fn notes_follow_the_first_line_of_their_op_and_the_output_still_parses() {
        let k = &crate::reader::parse(SRC).unwrap().kernels[0];
        let ops = k.region_ops(k.body());
        let (cmp, branch) = (ops[1], ops[2]);
        let notes = |op: Op| match op {
            o if o == cmp => vec!["one".to_string(), "two".to_string()],
            o if o == branch => vec!["three".to_string()],
            _ => vec![],
        };
        let printed = print_kernel_annotated(k, &notes);
        let want = SRC
            .replace(
                "  %c = cmp lt %t, 32\n",
                "  %c = cmp lt %t, 32\n  // one\n  // two\n",
            )
            .replace("  %v = if %c {\n", "  %v = if %c {\n  // three\n");
        assert_eq!(printed, want);
        let again = &crate::reader::parse(&printed).unwrap().kernels[0];
        assert_eq!(print_kernel(again), print_kernel(k));
        assert_eq!(print_kernel_annotated(k, &|_| vec![]), print_kernel(k));
    }
}
