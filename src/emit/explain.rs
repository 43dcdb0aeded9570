//! How `--explain` names ops and program points for a reader of the source: an op by its own
//! text and line (`` `%s = shr 128, %i` (line 14) ``, from `emit::text::op_label`), a region by
//! the op that opens it ("the loop body of `for %i = 0 to 8 step 1` (line 13)"), and a point at
//! the edge of a region as "at the top of" or "at the end of" that region; a hazard as one line
//! ([`explain_hazard`]). Used by `smemsync sync --explain` and the library's
//! `Synchronized` report. Complexity: O(ops) to build a [`Namer`], O(line length) per name.

use crate::analysis::footprint::{Footprints, Who};
use crate::analysis::hazards::{Carry, Hazard};
use crate::diag::json::Json;
use crate::emit::text::op_label;
use crate::ir::edit::Anchor;
use crate::ir::{Kernel, Op, OpKind, Parents, Region};

/// Names ops, regions and points of one kernel parsed from `src`.
pub struct Namer<'a> {
    k: &'a Kernel,
    src: &'a str,
    parents: Parents,
}

impl<'a> Namer<'a> {
    pub fn new(k: &'a Kernel, src: &'a str) -> Self {
        Namer {
            k,
            src,
            parents: k.parents(),
        }
    }

    /// An op as written, with its source line when it has one.
    pub fn op(&self, op: Op) -> String {
        match crate::diag::line_number(self.src, self.k.span(op)) {
            Some(l) => format!("{} (line {l})", op_label(self.k, op)),
            None => op_label(self.k, op),
        }
    }

    /// An op as JSON: `{"op": "<its text>", "line": N}` (`line` null when it has no source).
    pub fn op_json(&self, op: Op) -> Json {
        let line = crate::diag::line_number(self.src, self.k.span(op));
        Json::object([
            ("op", Json::str(op_label(self.k, op).trim_matches('`'))),
            ("line", line.map_or(Json::Null, Json::uint)),
        ])
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
                Some(r) if self.k.regions[r].ops.first() == Some(&op) && r != self.k.body => {
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

/// The shared buffer a hazard's destination accesses (`@name`), or empty.
pub fn buffer_name(k: &Kernel, h: &Hazard) -> String {
    let e = crate::ir::effects(k, h.dst.op);
    e.shared.get(h.dst.index).map_or_else(String::new, |a| {
        format!("@{}", k.buffers[k.root_buffer(a.mem)].name)
    })
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
        let lp = k.regions[k.body].ops[1];
        let body = k.ops[lp].regions[0];
        (k.regions[body].ops[0], body)
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
            n.point(Anchor::Before(k.regions[k.body].ops[0])),
            "before `%t = tid.x` (line 3)"
        );
    }
}
