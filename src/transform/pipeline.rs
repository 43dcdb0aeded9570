//! Circular buffering (multi-stage pipelining) of a loop's shared-memory loads.
//!
//! Input: a `for %k = lo to hi step 1` loop whose body holds a `stage "load" { ... }` that
//! fills shared buffers (stores, atomics or async copies) from values available before the
//! iteration starts (the induction variable, values defined outside the loop). With `S`
//! stages and prefetch distance `P` (`S - 1`, or less with [`Plan`]), every buffer `@b` the stage writes gets a leading
//! dimension `S`, and the loop becomes (nvFuser's prologue/main structure, seed 004):
//!
//! ```text
//! for %j = lo to lo+P { if %j < hi { load(%j) into slot (%j-lo) mod S } }      // prologue
//! for %k = lo to hi {
//!   if %k+P < hi { load(%k+P) into slot (%k+P-lo) mod S }                      // prefetch
//!   ... the rest of the body, reading slot (%k-lo) mod S ...
//! }
//! ```
//!
//! No epilogue is needed: the prefetch is guarded instead of peeled. The transform inserts no
//! sync: the RAW hazard (a slot written P iterations before it is read) and the WAR hazard (a
//! slot read one iteration before it is rewritten) are ordinary loop-carried hazards at
//! distances P and 1 that `sync` places barriers and waits for; async copies in the stage stay
//! in flight across iterations, which is the point.
//!
//! Legality (each violation is a diagnostic naming the op): the stage uses no value computed
//! in the loop outside it (no iteration value, nothing from an earlier op of the body); no
//! value the stage defines is used after it; the stage contains no sync op other than
//! `cp_async_commit`; each buffer it writes is unpinned and touched nowhere outside the loop.
//! Complexity: O(ops of the loop) per pipelined loop.

use std::collections::{HashMap, HashSet};

use crate::diag::Diagnostic;
use crate::ir::*;

/// What one pipelined loop became.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelinedLoop {
    pub loop_op: Op,
    pub buffers: Vec<Buffer>,
    pub stages: u32,
}

/// The name of the stage that holds a loop's loads.
pub const LOAD_STAGE: &str = "load";

/// E0401: no loop to pipeline. Points at the kernel's `for` loops and shows the form the
/// transform needs, with the header of the kernel's first loop when it has one.
fn no_load_stage(k: &Kernel) -> Diagnostic {
    let fors: Vec<Op> = (k.ops_in_order().into_iter())
        .filter(|&o| matches!(k.ops[o].kind, OpKind::For { .. }))
        .collect();
    let header = fors
        .first()
        .map_or("for %k = 0 to %n step 1".to_string(), |&l| {
            crate::ir::text::op_label(k, l)
                .trim_matches('`')
                .to_string()
        });
    let form = format!(
        "put the ops that fill shared memory for one iteration in a load stage in the loop body:\n  {header} {{\n    stage \"load\" {{\n      %x = gload %in[%k, %t]\n      store @buf[%t], %x\n    }}\n    ... the ops that read @buf ...\n  }}\nthe stage may use only the loop variable and values defined before the loop (docs/transforms.md)"
    );
    let mut d = Diagnostic::user("E0401", "no loop has a `stage \"load\"` to circular-buffer")
        .with_label(k.kernel_span, "in this kernel")
        .with_help(form);
    for &l in &fors {
        d = d.with_label(k.span(l), "this loop has no `stage \"load\"`");
    }
    d
}

/// How a loop is circular-buffered: `stages` slots, loads `prefetch` iterations ahead
/// (`1 <= prefetch < stages`), and whether every stage closes a cp.async group of its own
/// outside the `if` that guards its loads (so each iteration commits exactly one group, empty
/// when the guard is false, and a constant `cp_async_wait prefetch-1` completes the slot read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub stages: u32,
    pub prefetch: u32,
    pub commit_each_stage: bool,
}

/// Circular-buffers every loop with a `stage "load"` in its body, with `stages` stages.
pub fn circular_buffer(
    k: &Kernel,
    stages: u32,
) -> Result<(Kernel, Vec<PipelinedLoop>), Vec<Diagnostic>> {
    if stages < 2 {
        return Err(vec![Diagnostic::user(
            "E0400",
            format!("circular buffering needs at least 2 stages, not {stages}"),
        )]);
    }
    let plan = Plan {
        stages,
        prefetch: stages - 1,
        commit_each_stage: false,
    };
    circular_buffer_with(k, &plan)
}

/// The loops with a `stage "load"` in their body, each with that stage op.
pub fn load_stage_loops(k: &Kernel) -> Vec<(Op, Op)> {
    k        .ops_in_order()
        .into_iter()
        .filter_map(|l| match k.ops[l].kind {
            OpKind::For { .. } => {
                let body = k.ops[l].regions[0];
                k.region_ops(body)
                    .iter()
                    .find(|&&o| matches!(&k.ops[o].kind, OpKind::Stage { name } if name == LOAD_STAGE))
                    .map(|&g| (l, g))
            }
            _ => None,
        })
        .collect()
}

/// Circular-buffers every loop with a `stage "load"` as `plan` says (`plan` is valid: at
/// least 2 stages, `1 <= prefetch < stages`).
pub fn circular_buffer_with(
    k: &Kernel,
    plan: &Plan,
) -> Result<(Kernel, Vec<PipelinedLoop>), Vec<Diagnostic>> {
    let loops = load_stage_loops(k);
    if loops.is_empty() {
        return Err(vec![no_load_stage(k)]);
    }
    let mut out = k.clone();
    let mut done = Vec::new();
    let mut errors = Vec::new();
    for (l, g) in loops {
        match pipeline_one(&mut out, l, g, plan) {
            Ok(bufs) => done.push(PipelinedLoop {
                loop_op: l,
                buffers: bufs,
                stages: plan.stages,
            }),
            Err(mut e) => errors.append(&mut e),
        }
    }
    if errors.is_empty() {
        Ok((out, done))
    } else {
        Err(errors)
    }
}

/// Ops nested anywhere under `op` (including itself).
pub(crate) fn subtree(k: &Kernel, op: Op, out: &mut Vec<Op>) {
    out.push(op);
    for &r in &k.ops[op].regions {
        for &c in k.region_ops(r) {
            subtree(k, c, out);
        }
    }
}

fn defs_in(k: &Kernel, ops: &[Op]) -> HashSet<Value> {
    let mut d = HashSet::new();
    for &o in ops {
        d.extend(k.ops[o].results.iter().copied());
        for &r in &k.ops[o].regions {
            d.extend(k.region_args(r).iter().copied());
        }
    }
    d
}

fn view_uses(k: &Kernel, op: Op) -> Vec<Value> {
    match &k.ops[op].kind {
        OpKind::ViewDef(v) => k.views[*v]
            .indices
            .iter()
            .filter_map(|i| match i {
                ViewIndex::At(o) => o.value(),
                ViewIndex::Range(..) => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The legality checks every pipelining mode shares (the module doc lists them): on success,
/// the buffers the load stage `g` of loop `l` writes.
pub(crate) fn stage_buffers(k: &Kernel, l: Op, g: Op) -> Result<Vec<Buffer>, Vec<Diagnostic>> {
    let OpKind::For { step, .. } = k.ops[l].kind.clone() else {
        unreachable!("a for loop")
    };
    let body = k.ops[l].regions[0];
    let iv = k.region_args(body)[0];
    let mut errs = Vec::new();
    let lspan = k.span(l);
    if step != Operand::Imm(Scalar::I32(1)) {
        errs.push(
            Diagnostic::user("E0402", "circular buffering needs a loop with step 1")
                .with_label(lspan, "this loop"),
        );
    }
    let mut loop_ops = Vec::new();
    subtree(k, l, &mut loop_ops);
    let mut stage_ops = Vec::new();
    subtree(k, g, &mut stage_ops);
    stage_use_errors(k, iv, &loop_ops, &stage_ops, &mut errs);
    let mut bufs: Vec<Buffer> = Vec::new();
    for &o in &stage_ops {
        for a in effects(k, o).shared {
            if a.kind.writes() {
                let b = k.root_buffer(a.mem);
                if !bufs.contains(&b) {
                    bufs.push(b);
                }
            }
        }
    }
    if bufs.is_empty() {
        errs.push(
            Diagnostic::user("E0406", "the load stage writes no shared buffer")
                .with_label(k.span(g), "nothing to buffer"),
        );
    }
    confined_buffer_errors(k, l, &bufs, &loop_ops, &mut errs);
    if errs.is_empty() { Ok(bufs) } else { Err(errs) }
}

/// E0403–E0405 of [`stage_buffers`]: the load stage uses only the induction variable `iv`
/// and values from before the loop, does not synchronize (but to commit its copies), and
/// defines nothing the rest of the loop uses.
fn stage_use_errors(
    k: &Kernel,
    iv: Value,
    loop_ops: &[Op],
    stage_ops: &[Op],
    errs: &mut Vec<Diagnostic>,
) {
    let loop_defs = defs_in(k, loop_ops);
    let stage_defs = defs_in(k, stage_ops);
    for &o in stage_ops {
        let mut uses = k.ops[o].kind.value_uses();
        uses.extend(view_uses(k, o));
        for v in uses {
            if v != iv && loop_defs.contains(&v) && !stage_defs.contains(&v) {
                errs.push(
                    Diagnostic::user("E0403", format!("the load stage uses %{}, computed in the loop", k.value_name(v)))
                        .with_label(k.span(o), "this op cannot run iterations ahead")
                        .with_help("the load stage may use only the induction variable and values from before the loop"),
                );
            }
        }
        let e = effects(k, o);
        if let Some(s) = e.sync
            && s != SyncEffect::Commit(AsyncClass::CpAsync)
        {
            errs.push(
                Diagnostic::user("E0404", "the load stage may not synchronize")
                    .with_label(k.span(o), "sync op in the load stage"),
            );
        }
    }
    for &o in loop_ops {
        if stage_ops.contains(&o) {
            continue;
        }
        let mut uses = k.ops[o].kind.value_uses();
        uses.extend(view_uses(k, o));
        if let Some(v) = uses.into_iter().find(|v| stage_defs.contains(v)) {
            errs.push(
                Diagnostic::user("E0405", format!("%{} is defined in the load stage and used after it", k.value_name(v)))
                    .with_label(k.span(o), "use outside the load stage")
                    .with_help("pass data from the load stage to the rest of the body through shared memory only"),
            );
        }
    }
}

/// E0407–E0408 of [`stage_buffers`]: each buffer the stage writes can grow (not pinned to an
/// offset) and is touched nowhere outside loop `l` (whose ops are `loop_ops`).
fn confined_buffer_errors(
    k: &Kernel,
    l: Op,
    bufs: &[Buffer],
    loop_ops: &[Op],
    errs: &mut Vec<Diagnostic>,
) {
    let lspan = k.span(l);
    let loop_set: HashSet<Op> = loop_ops.iter().copied().collect();
    for &b in bufs {
        if k.buffers[b].offset.is_some() {
            errs.push(
                Diagnostic::user(
                    "E0407",
                    format!(
                        "@{} is pinned to an offset and cannot grow",
                        k.buffers[b].name
                    ),
                )
                .with_label(*k.buffer_spans.get(b), "pinned here"),
            );
        }
        for o in k.ops_in_order() {
            if loop_set.contains(&o) {
                continue;
            }
            let touches = effects(k, o)
                .shared
                .iter()
                .any(|a| k.root_buffer(a.mem) == b)
                || matches!(k.ops[o].kind, OpKind::ViewDef(v) if k.root_buffer(k.views[v].base) == b);
            if touches {
                errs.push(
                    Diagnostic::user(
                        "E0408",
                        format!("@{} is used outside the pipelined loop", k.buffers[b].name),
                    )
                    .with_label(k.span(o), "use outside the loop")
                    .with_label(lspan, "pipelined loop"),
                );
                break;
            }
        }
    }
}

/// Rewrites the memrefs of `ops` (views' bases too) through `map`, in place.
pub(crate) fn remap_mems(k: &mut Kernel, ops: &[Op], map: &HashMap<MemRef, MemRef>) {
    for &o in ops {
        let mut kind = k.ops[o].kind.clone();
        kind.for_each_memref_mut(&mut |m| {
            if let Some(n) = map.get(m) {
                *m = *n;
            }
        });
        k.ops[o].kind = kind;
        if let OpKind::ViewDef(v) = k.ops[o].kind
            && let Some(n) = map.get(&k.views[v].base)
        {
            k.views[v].base = *n;
        }
    }
}

/// One loop being circular-buffered: loop `l` (bounds `lo`, `hi`, induction variable `iv`),
/// its load stage `g`, the buffers that grow, and the plan.
struct Pipelining<'a> {
    l: Op,
    g: Op,
    lo: Operand,
    hi: Operand,
    iv: Value,
    bufs: &'a [Buffer],
    plan: &'a Plan,
}

impl Pipelining<'_> {
    /// The slot of iteration `x`, `(x - lo) mod S`: the ops computing it and the slot.
    fn slot_ops(&self, k: &mut Kernel, x: Operand) -> (Vec<Op>, Operand) {
        let mut ops = Vec::new();
        let rel = if self.lo == Operand::Imm(Scalar::I32(0)) {
            x
        } else {
            let d = k.new_op(
                OpKind::Binary(BinOp::Sub, x, self.lo),
                &[ScalarType::I32],
                vec![],
            );
            ops.push(d);
            Operand::Value(k.ops[d].results[0])
        };
        let m = k.new_op(
            OpKind::Binary(BinOp::Rem, rel, Operand::int(self.plan.stages as i64)),
            &[ScalarType::I32],
            vec![],
        );
        ops.push(m);
        let r = Operand::Value(k.ops[m].results[0]);
        (ops, r)
    }

    /// Views of every grown buffer at `slot` (their defining ops appended to `ops`), as a map
    /// from each buffer to its view.
    fn slot_views(&self, k: &mut Kernel, slot: Operand, ops: &mut Vec<Op>) -> HashMap<MemRef, MemRef> {
        let mut map = HashMap::new();
        for &b in self.bufs {
            let (v, op) = k.new_view(MemRef::Buffer(b), vec![ViewIndex::At(slot)]);
            ops.push(op);
            map.insert(MemRef::Buffer(b), MemRef::View(v));
        }
        map
    }

    /// The load stage for iteration `x`, guarded by `x < hi`, as a list of ops.
    fn guarded_load(&self, k: &mut Kernel, x: Operand) -> Vec<Op> {
        let g = self.g;
        let c = k.new_op(OpKind::Cmp(CmpPred::Lt, x, self.hi), &[ScalarType::I1], vec![]);
        let then_r = k.new_region();
        let else_r = k.new_region();
        let (mut inner, slot) = self.slot_ops(k, x);
        let mems = self.slot_views(k, slot, &mut inner);
        let mut map = CloneMap {
            values: HashMap::from([(self.iv, x)]),
            mems,
        };
        let clone = k.clone_op(g, &mut map);
        inner.push(clone);
        k.set_region_ops(then_r, inner);
        let cond = Operand::Value(k.ops[c].results[0]);
        let i = k.new_op(OpKind::If { cond }, &[], vec![then_r, else_r]);
        k.op_spans.set(i, k.span(g));
        if !self.plan.commit_each_stage {
            return vec![c, i];
        }
        let commit = k.new_op(OpKind::CpAsyncCommit, &[], vec![]);
        k.op_spans.set(commit, k.span(g));
        vec![c, i, commit]
    }

    /// Main body: consumer views at the top; the stage becomes the guarded prefetch of
    /// `k + P`. `loop_ops`/`stage_ops` are the loop's and the stage's ops before the rewrite.
    fn main_body(&self, k: &mut Kernel, loop_ops: &[Op], stage_ops: &[Op]) {
        let (l, g, iv) = (self.l, self.g, self.iv);
        let body = k.ops[l].regions[0];
        let (mut top, cslot) = self.slot_ops(k, Operand::Value(iv));
        let cmap = self.slot_views(k, cslot, &mut top);
        let consumer_ops: Vec<Op> = loop_ops
            .iter()
            .copied()
            .filter(|o| !stage_ops.contains(o) && *o != l)
            .collect();
        remap_mems(k, &consumer_ops, &cmap);
        let kp = k.new_op(
            OpKind::Binary(BinOp::Add, Operand::Value(iv), Operand::int(self.plan.prefetch as i64)),
            &[ScalarType::I32],
            vec![],
        );
        let kpv = Operand::Value(k.ops[kp].results[0]);
        let mut prefetch = vec![kp];
        prefetch.extend(self.guarded_load(k, kpv));
        let gi = k.region_ops(body)
            .iter()
            .position(|&o| o == g)
            .expect("stage in body");
        k.splice_ops(body, gi..=gi, prefetch);
        for (i, o) in top.into_iter().enumerate() {
            k.insert_op(body, i, o);
        }
    }

    /// Prologue before the loop: `for %j = lo to lo+P { if %j < hi { load(%j) } }`.
    fn prologue(&self, k: &mut Kernel) {
        let (l, lo, p) = (self.l, self.lo, self.plan.prefetch as i32);
        let lspan = k.span(l);
        let parent = k.parents().op_region[l].expect("loop is placed");
        let (end_ops, endv) = match lo {
            Operand::Imm(c) => (vec![], Operand::int(c.as_i64() + p as i64)),
            Operand::Value(_) => {
                let e = k.new_op(
                    OpKind::Binary(BinOp::Add, lo, Operand::int(p as i64)),
                    &[ScalarType::I32],
                    vec![],
                );
                (vec![e], Operand::Value(k.ops[e].results[0]))
            }
        };
        let pro_body = k.new_region();
        let j = k.new_value(ScalarType::I32, ValueDef::RegionArg(pro_body, 0));
        k.push_region_arg(pro_body, j);
        let loads = self.guarded_load(k, Operand::Value(j));
        k.set_region_ops(pro_body, loads);
        let pro = k.new_op(
            OpKind::For {
                lo,
                hi: endv,
                step: Operand::int(1),
                init: vec![],
            },
            &[],
            vec![pro_body],
        );
        k.op_spans.set(pro, lspan);
        let li = k.region_ops(parent)
            .iter()
            .position(|&o| o == l)
            .expect("loop in parent");
        k.insert_op(parent, li, pro);
        for e in end_ops.into_iter().rev() {
            k.insert_op(parent, li, e);
        }
    }
}

fn pipeline_one(k: &mut Kernel, l: Op, g: Op, plan: &Plan) -> Result<Vec<Buffer>, Vec<Diagnostic>> {
    let bufs = stage_buffers(k, l, g)?;
    let OpKind::For { lo, hi, .. } = k.ops[l].kind.clone() else {
        unreachable!("a for loop")
    };
    let body = k.ops[l].regions[0];
    let iv = k.region_args(body)[0];
    let mut loop_ops = Vec::new();
    subtree(k, l, &mut loop_ops);
    let mut stage_ops = Vec::new();
    subtree(k, g, &mut stage_ops);
    for &b in &bufs {
        k.buffers[b].shape.insert(0, plan.stages as u64);
    }
    let cx = Pipelining {
        l,
        g,
        lo,
        hi,
        iv,
        bufs: &bufs,
        plan,
    };
    cx.main_body(k, &loop_ops, &stage_ops);
    cx.prologue(k);
    Ok(bufs)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::text::print_kernel;
    use crate::reader::parse_kernel;

    /// A loop whose load stage fills `@buf` from a global row (shared with the other modes'
    /// tests).
    pub(crate) const LOOP: &str = "kernel @k(%X: global f32[8, 64], %Y: global f32[8, 64]) block(64) {
  shared @buf : f32[64]
  %t = tid.x
  for %k = 0 to 8 step 1 {
    stage \"load\" {
      %x = gload %X[%k, %t]
      store @buf[%t], %x
    }
    %r = sub 63, %t
    %v = load @buf[%r]
    gstore %Y[%k, %t], %v
  }
}";

    /// The text of a pipelined kernel, after checking that it verifies and reads back the same.
    pub(crate) fn verified_text(out: &Kernel) -> String {
        let errs = crate::verify::verify(out);
        assert!(errs.is_empty(), "{errs:?}\n{}", print_kernel(out));
        let text = print_kernel(out);
        let again = parse_kernel(&text)
            .unwrap_or_else(|d| panic!("{}\n{text}", d.render("x", &text, false)));
        assert_eq!(print_kernel(&again), text);
        text
    }

    fn pipelined(src: &str, s: u32) -> Kernel {
        let k = parse_kernel(src).expect("parses");
        let (out, loops) = circular_buffer(&k, s).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(loops.len(), 1);
        verified_text(&out);
        out
    }

    #[test]
    fn a_loop_with_a_load_stage_gets_a_prologue_and_a_guarded_prefetch() {
        let out = pipelined(LOOP, 3);
        let text = print_kernel(&out);
        assert!(text.contains("shared @buf : f32[3, 64]"), "{text}");
        // Prologue loop of P = 2 iterations before the main loop, each guarded by j < 8.
        let pro = text
            .find("= 0 to 2 step 1")
            .expect("prologue of two iterations");
        let main = text.find("for %k = 0 to 8").expect("main loop");
        assert!(pro < main, "{text}");
        assert_eq!(
            text.matches("stage \"load\"").count(),
            2,
            "one clone in the prologue, one prefetch\n{text}"
        );
        assert!(text.contains("add %k, 2"), "prefetch distance 2\n{text}");
        assert_eq!(
            text.matches("rem ").count(),
            3,
            "three slot computations\n{text}"
        );
    }

    #[test]
    fn a_stage_depending_on_the_iteration_values_is_refused() {
        let src = "kernel @k(%X: global f32[8, 64]) block(64) {
  shared @buf : f32[64]
  %t = tid.x
  %r = for %k = 0 to 8 step 1 iter(%a = 0.0) {
    stage \"load\" {
      store @buf[%t], %a
    }
    %v = load @buf[%t]
    yield %v
  }
}";
        let k = parse_kernel(src).expect("parses");
        let e = circular_buffer(&k, 2).expect_err("refused");
        assert!(e.iter().any(|d| d.code == "E0403"), "{e:?}");
    }

    #[test]
    fn a_buffer_used_after_the_loop_is_refused() {
        let src = LOOP.replace(
            "    gstore %Y[%k, %t], %v\n  }\n",
            "    gstore %Y[%k, %t], %v\n  }\n  %w = load @buf[%t]\n",
        );
        let k = parse_kernel(&src).expect("parses");
        let e = circular_buffer(&k, 2).expect_err("refused");
        assert!(e.iter().any(|d| d.code == "E0408"), "{e:?}");
    }

    #[test]
    fn one_stage_is_refused() {
        let k = parse_kernel(LOOP).expect("parses");
        assert!(circular_buffer(&k, 1).is_err());
    }
}
