//! The printer: writes a kernel in the canonical text form (`docs/ir.md`).
//!
//! Canonical form: two-space indentation, one op per line, declarations (groups, shared
//! buffers) first in the kernel body, immediates typed by context (`1.0` for f32), no
//! comments (explanations add `//` notes after ops through [`print_kernel_annotated`]). `parse(print(k))` yields a kernel structurally equal to `k`, and printing is a
//! fixed point: `print(parse(print(k))) == print(k)`. Values keep their source names; values a
//! pass created get fresh `%vN` names that collide with no source name.
//! Complexity: O(ops + operands).

use std::cell::OnceCell;
use std::fmt::Write;

use super::names::NameTable;
use crate::ir::*;

/// Prints one kernel.
pub fn print_kernel(k: &Kernel) -> String {
    let mut p = Printer::new(k);
    p.kernel();
    p.out
}

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
}

struct Names {
    values: SecondaryMap<Value, String>,
    views: SecondaryMap<View, String>,
}

impl Names {
    fn new(k: &Kernel) -> Self {
        let mut table = NameTable::with_source_names(k);
        let mut name = |n: &String, prefix: &str| {
            if n.is_empty() {
                table.numbered(prefix)
            } else {
                n.clone()
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
        }
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

    fn view_name(&self, v: View) -> String {
        match self.k.view_names.get(v) {
            n if n.is_empty() => self.names().views.get(v).clone(),
            n => n.clone(),
        }
    }

    fn v(&self, v: Value) -> String {
        match self.k.value_names.get(v) {
            n if n.is_empty() => format!("%{}", self.names().values.get(v)),
            n => format!("%{n}"),
        }
    }

    fn opnd(&self, o: &Operand) -> String {
        match o {
            Operand::Value(v) => self.v(*v),
            Operand::Imm(s) => s.to_string(),
        }
    }

    fn opnds(&self, os: &[Operand]) -> String {
        os.iter()
            .map(|o| self.opnd(o))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn mem(&self, m: MemRef) -> String {
        match m {
            MemRef::Buffer(b) => format!("@{}", self.k.buffers[b].name),
            MemRef::View(v) => format!("%{}", self.view_name(v)),
        }
    }

    fn idx(&self, m: MemRef, index: &[Operand]) -> String {
        format!("{}[{}]", self.mem(m), self.opnds(index))
    }

    fn gidx(&self, g: Global, index: &[Operand]) -> String {
        format!("%{}[{}]", self.k.globals[g].name, self.opnds(index))
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
                            Dim::Param(v) => self.v(*v),
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
        if k.grid != [1, 1, 1] {
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
            self.out.push_str(&layout_s(&b.layout));
            self.out.push('\n');
        }
        self.region(k.body(), 1);
        self.out.push_str("}\n");
    }

    fn region(&mut self, r: Region, depth: usize) {
        for &op in self.k.region_ops(r) {
            self.op(op, depth);
        }
    }

    fn ind(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
    }

    fn results(&self, op: Op) -> String {
        let rs = &self.k.ops[op].results;
        if rs.is_empty() {
            String::new()
        } else {
            format!(
                "{} = ",
                rs.iter().map(|v| self.v(*v)).collect::<Vec<_>>().join(", ")
            )
        }
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
        let od = &self.k.ops[op];
        self.due = Some((op, depth));
        self.ind(depth);
        let res = self.results(op);
        if od.kind.signature().regions > 0 {
            return self.region_op(op, &res, depth);
        }
        let line = self.line(op, &res);
        self.out.push_str(&line);
        self.out.push('\n');
        self.flush_notes();
    }

    /// The text of an op that owns no region: its results, mnemonic (from the signature
    /// table) and operands. A flat match: one arm per operand syntax.
    fn line(&self, op: Op, res: &str) -> String {
        let k = self.k;
        let od = &k.ops[op];
        let m = od.kind.mnemonic();
        match &od.kind {
            OpKind::Const(c) => format!("{res}{m} {c} : {}", c.ty()),
            OpKind::Special(_) => format!("{res}{m}"),
            OpKind::Binary(_, x, y) => format!("{res}{m} {}, {}", self.opnd(x), self.opnd(y)),
            OpKind::Unary(_, x) | OpKind::Cast(_, x) => format!("{res}{m} {}", self.opnd(x)),
            OpKind::Cmp(p, x, y) => {
                format!("{res}{m} {} {}, {}", p.name(), self.opnd(x), self.opnd(y))
            }
            OpKind::Select(c, x, y) => {
                let (c, x, y) = (self.opnd(c), self.opnd(x), self.opnd(y));
                format!("{res}{m} {c}, {x}, {y}")
            }
            OpKind::InGroup(g) => format!("{res}{m} @{}", k.groups[*g].name),
            OpKind::Compute { name, args } => {
                let tys: Vec<&str> = od.results.iter().map(|v| k.values[*v].ty.name()).collect();
                let ty = if tys.is_empty() {
                    String::new()
                } else {
                    format!(" : {}", tys.join(", "))
                };
                format!("{res}{m} \"{name}\"({}){ty}", self.opnds(args))
            }
            OpKind::ViewDef(v) => {
                let vd = &k.views[*v];
                let ixs: Vec<String> = vd
                    .indices
                    .iter()
                    .map(|i| match i {
                        ViewIndex::At(o) => self.opnd(o),
                        ViewIndex::Range(lo, hi) => format!("{lo}:{hi}"),
                    })
                    .collect();
                let (name, base) = (self.view_name(*v), self.mem(vd.base));
                format!("%{name} = {m} {base}[{}]", ixs.join(", "))
            }
            OpKind::Load { mem, index } => format!("{res}{m} {}", self.idx(*mem, index)),
            OpKind::Store { mem, index, value } => {
                format!("{m} {}, {}", self.idx(*mem, index), self.opnd(value))
            }
            OpKind::Atomic {
                op: a,
                mem,
                index,
                value,
            } => {
                let (at, v) = (self.idx(*mem, index), self.opnd(value));
                format!("{res}{m} {} {at}, {v}", a.name())
            }
            OpKind::LocalLoad { mem, layout } => {
                format!("{res}{m} {}{}", self.mem(*mem), layout_s(layout))
            }
            OpKind::LocalStore { mem, value, layout } => {
                let (at, v) = (self.mem(*mem), self.opnd(value));
                format!("{m} {at}, {v}{}", layout_s(layout))
            }
            OpKind::GLoad { global, index } => format!("{res}{m} {}", self.gidx(*global, index)),
            OpKind::GStore {
                global,
                index,
                value,
            } => format!("{m} {}, {}", self.gidx(*global, index), self.opnd(value)),
            OpKind::GAtomic {
                op: a,
                global,
                index,
                value,
            } => {
                let (at, v) = (self.gidx(*global, index), self.opnd(value));
                format!("{res}{m} {} {at}, {v}", a.name())
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
                format!("{res}{m} {d} <- {s}")
            }
            OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => format!(
                "{res}{m} {} <- {}{}{}",
                self.mem(c.dst),
                self.gidx(c.src, &c.origin),
                layout_s(&c.layout),
                if c.masked { " masked" } else { "" }
            ),
            OpKind::TdmLoad { dst, src, origin } => {
                format!("{res}{m} {} <- {}", self.mem(*dst), self.gidx(*src, origin))
            }
            OpKind::TmaLoad {
                dst,
                src,
                origin,
                mbar,
                mbar_index,
            } => {
                let (d, s) = (self.mem(*dst), self.gidx(*src, origin));
                format!("{res}{m} {d} <- {s}, {}", self.idx(*mbar, mbar_index))
            }
            OpKind::TmaStore { dst, origin, src } => {
                format!("{m} {} <- {}", self.gidx(*dst, origin), self.mem(*src))
            }
            OpKind::CpAsyncCommit
            | OpKind::BulkCommit
            | OpKind::WgmmaCommit
            | OpKind::FenceProxyAsync
            | OpKind::Barrier
            | OpKind::WarpSync => m.to_string(),
            OpKind::CpAsyncWait(n) | OpKind::BulkWait(n) | OpKind::WgmmaWait(n) => {
                format!("{m} {n}")
            }
            OpKind::SplitSignal(id) | OpKind::SplitWait(id) => format!("{m} {id}"),
            OpKind::NamedArrive { id, count } | OpKind::NamedSync { id, count } => {
                format!("{m} {id}, {count}")
            }
            OpKind::WaitTokens(ts) => {
                let ts: Vec<String> = ts.iter().map(|t| self.v(*t)).collect();
                format!("{m} {}", ts.join(", "))
            }
            OpKind::WaitCnt(cs) => {
                let cs: Vec<String> = cs.iter().map(|(c, n)| format!("{}({n})", c.name())).collect();
                format!("{m} {}", cs.join(" "))
            }
            OpKind::MbarInit { mbar, index, count } => {
                format!("{m} {}, {count}", self.idx(*mbar, index))
            }
            OpKind::MbarArrive { mbar, index, tx } => match tx {
                Some(t) => format!("{m} {} tx {t}", self.idx(*mbar, index)),
                None => format!("{m} {}", self.idx(*mbar, index)),
            },
            OpKind::MbarExpectTx { mbar, index, bytes } => {
                format!("{m} {}, {bytes}", self.idx(*mbar, index))
            }
            OpKind::MbarWait {
                mbar,
                index,
                parity,
            } => format!("{m} {}, {}", self.idx(*mbar, index), self.opnd(parity)),
            OpKind::MbarInval { mbar, index } => format!("{m} {}", self.idx(*mbar, index)),
            OpKind::Wgmma { a, b, acc } => {
                let a = match a {
                    WgmmaA::Shared(m) => self.mem(*m),
                    WgmmaA::Regs(r) => format!("[{}]", self.opnds(r)),
                };
                let (b, acc) = (self.mem(*b), self.opnds(acc.all()));
                format!("{res}{m} {a}, {b}, {acc}")
            }
            OpKind::Yield(vs) if vs.is_empty() => m.to_string(),
            OpKind::Yield(vs) => format!("{m} {}", self.opnds(vs)),
            OpKind::Condition(c) => format!("{m} {}", self.opnd(c)),
            // Ops with regions print through `region_op`; none reaches here.
            OpKind::For { .. } | OpKind::If { .. } | OpKind::While { .. } | OpKind::Stage { .. } => {
                format!("{res}{m}")
            }
        }
    }

    /// `for`, `if`, `while` and `stage`: the header, then each region as a block.
    fn region_op(&mut self, op: Op, res: &str, depth: usize) {
        let k = self.k;
        let od = &k.ops[op];
        let m = od.kind.mnemonic();
        if od.regions.len() != od.kind.signature().regions {
            // Malformed (the verifier reports it): print what is there.
            let line = self.line(op, res);
            self.out.push_str(&line);
            for &r in &od.regions {
                self.out.push(' ');
                self.block(r, depth);
            }
            self.out.push('\n');
            return;
        }
        match &od.kind {
            OpKind::For { lo, hi, step, init } => {
                let body = od.regions[0];
                let args = k.region_args(body);
                let _ = write!(
                    self.out,
                    "{res}{m} {} = {} to {} step {}",
                    self.v(args[0]),
                    self.opnd(lo),
                    self.opnd(hi),
                    self.opnd(step)
                );
                self.iter_list(&args[1..], init);
                self.out.push(' ');
                self.block(body, depth);
            }
            OpKind::If { cond } => {
                let _ = write!(self.out, "{res}{m} {} ", self.opnd(cond));
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
                let names: Vec<String> = k.region_args(after).iter().map(|a| self.v(*a)).collect();
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

fn layout_s(l: &Option<String>) -> String {
    match l {
        Some(s) => format!(" layout \"{s}\""),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
