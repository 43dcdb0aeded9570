//! How `--explain` names ops and program points for a reader of the source: an op by its own
//! text and line (`` `%s = shr 128, %i` (line 14) ``, from `emit::text::op_label`), a region by
//! the op that opens it ("the loop body of `for %i = 0 to 8 step 1` (line 13)"), and a point at
//! the edge of a region as "at the top of" or "at the end of" that region; a hazard as one line
//! ([`explain_hazard`]). Used by `smemsync sync --explain`, `smemsync explain` and the
//! library's `Synchronized` report.
//!
//! An op a pass inserted has no line in the input (its span is not the input's): once the
//! namer knows which ops are inserted ([`Namer::inserted`]) it names them by their line in the
//! printed output kernel instead ("(inserted, output line 17)"), never by a made-up input
//! line. Complexity: O(ops) to build a [`Namer`], O(line length) per name.

use std::collections::HashMap;

use crate::analysis::footprint::{Footprints, Who};
use crate::analysis::hazards::{Carry, Hazard};
use crate::diag::json::Json;
use crate::emit::text::op_label;
use crate::ir::edit::Anchor;
use crate::ir::{EntityRef, Kernel, Op, OpKind, Parents, Region};

/// Names ops, regions and points of one kernel parsed from `src`.
pub struct Namer<'a> {
    k: &'a Kernel,
    src: &'a str,
    parents: &'a Parents,
    /// Ops with an index at least this were inserted by a pass (no input line).
    inserted_from: usize,
    /// The line of each op in the printed output kernel (1-based).
    out_lines: HashMap<Op, usize>,
    /// Write "input line N" rather than "line N".
    explicit: bool,
}

impl<'a> Namer<'a> {
    pub fn new(k: &'a Kernel, src: &'a str) -> Self {
        Namer {
            k,
            src,
            parents: k.parents(),
            inserted_from: usize::MAX,
            out_lines: HashMap::new(),
            explicit: false,
        }
    }

    /// Ops of index `input_ops` or more were inserted: they are named by their line in the
    /// printed `out` kernel (which must contain every op of the namer's kernel, as the
    /// pipeline's later stages do).
    pub fn inserted(mut self, input_ops: usize, out: &Kernel) -> Self {
        self.inserted_from = input_ops;
        self.out_lines = output_lines(out);
        self
    }

    /// Input lines are written "input line N" (`smemsync explain`, whose report also cites
    /// output lines everywhere).
    pub fn explicit(mut self) -> Self {
        self.explicit = true;
        self
    }

    /// Whether a pass inserted `op`.
    pub fn is_inserted(&self, op: Op) -> bool {
        op.index() >= self.inserted_from
    }

    /// The input line of an op (none for an inserted op or one without a span).
    pub fn input_line(&self, op: Op) -> Option<usize> {
        if self.is_inserted(op) {
            return None;
        }
        crate::diag::line_number(self.src, self.k.span(op))
    }

    /// The line of an op in the printed output kernel, when known.
    pub fn output_line(&self, op: Op) -> Option<usize> {
        self.out_lines.get(&op).copied()
    }

    /// An op as written, with its input line when it has one, or its output line when a pass
    /// inserted it.
    pub fn op(&self, op: Op) -> String {
        let label = op_label(self.k, op);
        if self.is_inserted(op) {
            return match self.output_line(op) {
                Some(l) => format!("{label} (inserted, output line {l})"),
                None => format!("{label} (inserted)"),
            };
        }
        let which = if self.explicit { "input line" } else { "line" };
        match self.input_line(op) {
            Some(l) => format!("{label} ({which} {l})"),
            None => label,
        }
    }

    /// An op as JSON: `{"op": "<its text>", "line": N}` (`line` null when it has no input
    /// line; an inserted op also has `"output_line"`).
    pub fn op_json(&self, op: Op) -> Json {
        let line = self.input_line(op);
        let mut fields = vec![
            ("op", Json::str(op_label(self.k, op).trim_matches('`'))),
            ("line", line.map_or(Json::Null, Json::uint)),
        ];
        if self.is_inserted(op) {
            let l = self.output_line(op);
            fields.push(("output_line", l.map_or(Json::Null, Json::uint)));
        }
        Json::Object(fields)
    }

    /// A region by the op that opens it: "the loop body of `for …` (line 13)".
    pub fn region(&self, r: Region) -> String {
        let Some(parent) = self.parents.region_op[r] else {
            return "the kernel body".into();
        };
        let which = self.k.ops[parent].regions.iter().position(|&x| x == r);
        let part = match (&self.k.ops[parent].kind, which) {
            (OpKind::For { .. }, _) | (OpKind::While { .. }, Some(1)) => "the loop body of",
            (OpKind::While { .. }, _) => "the condition of",
            (OpKind::If { .. }, Some(0)) => "the then-branch of",
            (OpKind::If { .. }, _) => "the else-branch of",
            _ => "the body of",
        };
        format!("{part} {}", self.op(parent))
    }

    /// A point between ops: "before X", "after X", "at the top of R" or "at the end of R"; a
    /// point before the first op of a region says both where it is and what follows.
    pub fn point(&self, anchor: Anchor) -> String {
        match anchor {
            Anchor::Before(op) => match self.parents.op_region[op] {
                Some(r) if self.k.region_ops(r).first() == Some(&op) && r != self.k.body() => {
                    format!("at the top of {}, before {}", self.region(r), self.op(op))
                }
                _ => format!("before {}", self.op(op)),
            },
            Anchor::After(op) => format!("after {}", self.op(op)),
            Anchor::Start(r) => format!("at the top of {}", self.region(r)),
            Anchor::End(r) => format!("at the end of {}", self.region(r)),
        }
    }
}

/// The line of every placed op in `k`'s printed text (1-based; the printer writes one line
/// per op in pre-order, and header, declaration and closing-brace lines belong to no op).
pub fn output_lines(k: &Kernel) -> HashMap<Op, usize> {
    let text = crate::emit::text::print_kernel(k);
    let ops = k.ops_in_order();
    let mut it = ops.iter();
    let mut out = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let decl = i == 0
            || t.starts_with("shared ")
            || t.starts_with("group ")
            || t.starts_with('}')
            || t.is_empty();
        if decl {
            continue;
        }
        if let Some(&op) = it.next() {
            out.insert(op, i + 1);
        }
    }
    out
}

/// The shared buffer an access of a hazard touches (`@name`).
fn access_buffer(k: &Kernel, a: crate::analysis::footprint::AccessRef) -> Option<String> {
    let e = crate::ir::effects(k, a.op);
    let s = e.shared.get(a.index)?;
    Some(format!("@{}", k.buffers[k.root_buffer(s.mem)].name))
}

/// The shared buffer a hazard is on (`@name`), or empty. When the two accesses touch
/// different pinned buffers whose bytes overlap, both are named, source first: "@A (aliased
/// by @B)".
pub fn buffer_name(k: &Kernel, h: &Hazard) -> String {
    match (access_buffer(k, h.src), access_buffer(k, h.dst)) {
        (Some(a), Some(b)) if a != b => format!("{a} (aliased by {b})"),
        (Some(a), _) => a,
        (None, b) => b.unwrap_or_default(),
    }
}

/// Why a hazard that orders no data exists: the ordering rule of `sync::role_release` (a
/// role's `mbar_wait` of every thread before one elected thread's signal, docs/placement.md,
/// "Mbarrier objects", rule 2). `None` for a data hazard.
pub fn ordering_rule(k: &Kernel, h: &Hazard) -> Option<&'static str> {
    let signal = matches!(
        k.ops[h.dst.op].kind,
        OpKind::MbarArrive { .. } | OpKind::MbarExpectTx { .. } | OpKind::TmaLoad { .. }
    );
    (signal && matches!(k.ops[h.src.op].kind, OpKind::MbarWait { .. })).then_some(
        "role barrier: every thread of the role must pass its wait before one elected thread signals, or the other role can complete the waited mbarrier's next phase and a late thread waits for a phase that never comes (deadlock, C0002)",
    )
}

/// How `sync --explain` names an inserted sync: its op (`barrier`, `warp_sync`,
/// `named_sync ID, N`).
pub fn sync_op_name(op: &OpKind) -> String {
    match op {
        OpKind::WarpSync => "warp_sync".into(),
        OpKind::NamedSync { id, count } => format!("named_sync {id}, {count}"),
        _ => "barrier".into(),
    }
}

/// One line explaining a hazard.
pub fn explain_hazard(k: &Kernel, fp: &Footprints, names: &Namer, h: &Hazard) -> String {
    let mut s = format!(
        "{} {} {} -> {}",
        h.kind.name(),
        buffer_name(k, h),
        names.op(h.src.op),
        names.op(h.dst.op)
    );
    if h.src_at != h.src.op {
        s.push_str(&format!(" (copy visible at {})", names.op(h.src_at)));
    }
    match h.carry {
        Carry::Forward => s.push_str(", same iteration"),
        Carry::Carried {
            loop_op,
            min_distance,
            ..
        } => s.push_str(&format!(
            ", carried by {} at distance {min_distance}",
            names.op(loop_op)
        )),
    }
    if let Some(w) = h.witness {
        let who = |x: Who| match x {
            Who::One(t) => format!("thread {t}"),
            Who::Lane { pos, .. } => {
                format!("layout position {pos}")
            }
            Who::Many(_) => "several threads".to_string(),
        };
        s.push_str(&format!(
            ", e.g. {} by {} and {}",
            fp.describe_unit(w.unit),
            who(w.a),
            who(w.b)
        ));
    }
    if h.intra_warp {
        s.push_str(", within one warp");
    }
    if let Some(rule) = ordering_rule(k, h) {
        s.push_str(&format!(" ({rule})"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "kernel @k(%o: global f32[64]) block(64) {
  shared @s : f32[64]
  %t = tid.x
  for %i = 0 to 4 step 1 {
    %r = sub 63, %t
    %x = load @s[%r]
    store @s[%t], %x
  }
}
";

    fn first_op_of_loop(k: &Kernel) -> (Op, Region) {
        let lp = k.region_ops(k.body())[1];
        let body = k.ops[lp].regions[0];
        (k.region_ops(body)[0], body)
    }

    #[test]
    fn a_point_before_the_first_op_of_a_loop_body_is_at_its_top() {
        let m = crate::reader::parse(SRC).unwrap();
        let k = &m.kernels[0];
        let n = Namer::new(k, SRC);
        let (first, body) = first_op_of_loop(k);
        assert_eq!(
            n.point(Anchor::Before(first)),
            "at the top of the loop body of `for %i = 0 to 4 step 1` (line 4), before `%r = sub 63, %t` (line 5)"
        );
        assert_eq!(
            n.point(Anchor::End(body)),
            "at the end of the loop body of `for %i = 0 to 4 step 1` (line 4)"
        );
        assert_eq!(
            n.point(Anchor::Before(k.region_ops(k.body())[0])),
            "before `%t = tid.x` (line 3)"
        );
    }
}
