//! `pipeline --mode cp-async`: a multistage cp.async pipeline built from a loop's load stage.
//!
//! Each `store @b[i], %x` of the `stage "load"` whose value is `%x = gload %G[j]` (defined in
//! the stage and used by that store only) becomes the per-thread copy `cp_async @b[i] <- %G[j]`;
//! the stage is then circular-buffered with `D` slots and prefetch distance `P`
//! (`1 <= P <= D-1`, default `D-1`, [`super::pipeline::Plan`]), and every instance of the stage
//! closes one cp.async group outside the `if` that guards its copies:
//!
//! ```text
//! for %j = lo to lo+P { if %j < hi { copies(%j) into slot (%j-lo) mod D }; cp_async_commit }
//! for %k = lo to hi {
//!   if %k+P < hi { copies(%k+P) into slot (%k+P-lo) mod D }; cp_async_commit
//!   ... the rest of the body, reading slot (%k-lo) mod D ...
//! }
//! ```
//!
//! Invariant: at the top of iteration `n` the thread has committed exactly `P + n` groups
//! (empty ones where the guard was false), the slot read in iteration `n` being group `n`: so
//! a constant `cp_async_wait P-1` there completes it whatever the trip count, including trip
//! counts 0, 1 and `< P`. The transform places no wait and no barrier: `sync` does (a
//! `cp_async_wait P-1` and a barrier per iteration on the stencil of docs/transforms.md), and
//! `check` re-proves the result.
//! Legality beyond [`super::pipeline`]'s: every shared write of the stage is such a store, an
//! existing `cp_async`, or nothing (E1340); a copied value has no other use (E1341).
//! Complexity: O(ops of the kernel) per store rewritten.

use std::collections::HashSet;

use crate::diag::Diagnostic;
use crate::ir::*;

use super::pipeline::{Plan, PipelinedLoop, circular_buffer_with, load_stage_loops};

/// Checks `stages` and `prefetch` (E1342) and returns the plan of a cp.async pipeline.
pub fn cp_async_plan(stages: u32, prefetch: Option<u32>) -> Result<Plan, Diagnostic> {
    let p = prefetch.unwrap_or(stages.saturating_sub(1));
    if stages < 2 || p < 1 || p >= stages {
        return Err(Diagnostic::user(
            "E1342",
            format!("a pipeline of {stages} stages cannot prefetch {p} iterations ahead"),
        )
        .with_help("use at least 2 stages and a prefetch distance from 1 to stages - 1"));
    }
    Ok(Plan {
        stages,
        prefetch: p,
        commit_each_stage: true,
    })
}

/// Builds the cp.async pipeline of every loop with a `stage "load"`.
pub fn cp_async_pipeline(
    k: &Kernel,
    stages: u32,
    prefetch: Option<u32>,
) -> Result<(Kernel, Vec<PipelinedLoop>), Vec<Diagnostic>> {
    let plan = cp_async_plan(stages, prefetch).map_err(|d| vec![d])?;
    let mut copies = k.clone();
    let mut errs = Vec::new();
    for (_, g) in load_stage_loops(k) {
        errs.extend(stage_to_copies(&mut copies, g));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    circular_buffer_with(&copies, &plan)
}

/// Rewrites the stage `g`'s stores of global loads into copies and drops its commits.
fn stage_to_copies(k: &mut Kernel, g: Op) -> Vec<Diagnostic> {
    let mut errs = Vec::new();
    let mut copied = HashSet::new();
    let mut regions = Vec::new();
    collect_regions(k, g, &mut regions);
    for r in regions {
        let mut kept = Vec::new();
        for o in k.region_ops(r).to_vec() {
            match rewrite_op(k, o) {
                Ok(Rewrite::Keep) => kept.push(o),
                Ok(Rewrite::Copied(v)) => {
                    copied.insert(v);
                    kept.push(o);
                }
                Ok(Rewrite::Drop) => {}
                Err(d) => {
                    errs.push(d);
                    kept.push(o);
                }
            }
        }
        k.set_region_ops(r, kept);
    }
    errs.extend(dead_loads(k, g, &copied));
    errs
}

enum Rewrite {
    Keep,
    /// A store became a copy of this loaded value.
    Copied(Value),
    Drop,
}

fn collect_regions(k: &Kernel, op: Op, out: &mut Vec<Region>) {
    for &r in &k.ops[op].regions {
        out.push(r);
        for &c in k.region_ops(r) {
            collect_regions(k, c, out);
        }
    }
}

/// One op of the stage: a store of a `gload` becomes a `cp_async` (in place), a commit is
/// dropped (the pipeline commits once per stage), any other shared write is refused.
fn rewrite_op(k: &mut Kernel, o: Op) -> Result<Rewrite, Diagnostic> {
    match k.ops[o].kind.clone() {
        OpKind::CpAsyncCommit => Ok(Rewrite::Drop),
        OpKind::Store { mem, index, value } => {
            let (Some(v), Some((src, src_index))) = (value.value(), global_load_of(k, value)) else {
                return Err(not_a_copy(k, o));
            };
            k.ops[o].kind = OpKind::CpAsync {
                dst: mem,
                dst_index: index,
                src,
                src_index,
            };
            Ok(Rewrite::Copied(v))
        }
        OpKind::CpAsync { .. } => Ok(Rewrite::Keep),
        _ if effects(k, o).shared.iter().any(|a| a.kind.writes()) => Err(not_a_copy(k, o)),
        _ => Ok(Rewrite::Keep),
    }
}

/// The global element a value was loaded from, when an op-level `gload` defines it.
fn global_load_of(k: &Kernel, v: Operand) -> Option<(Global, Vec<Operand>)> {
    let v = v.value()?;
    let ValueDef::Result(d, _) = k.values[v].def else {
        return None;
    };
    match &k.ops[d].kind {
        OpKind::GLoad { global, index } => Some((*global, index.clone())),
        _ => None,
    }
}

/// Removes the stage's `gload`s whose values only rewritten stores used; a copied value also
/// used elsewhere is reported (E1341): the copy does not load it into a register.
fn dead_loads(k: &mut Kernel, g: Op, copied: &HashSet<Value>) -> Vec<Diagnostic> {
    let mut regions = Vec::new();
    collect_regions(k, g, &mut regions);
    let mut errs = Vec::new();
    for r in regions {
        let mut kept = Vec::new();
        for o in k.region_ops(r).to_vec() {
            if !matches!(k.ops[o].kind, OpKind::GLoad { .. }) {
                kept.push(o);
                continue;
            }
            let v = k.ops[o].results[0];
            let used = (k.ops_in_order().into_iter())
                .any(|u| k.ops[u].kind.value_uses().contains(&v));
            if !copied.contains(&v) || used {
                kept.push(o);
            }
            if copied.contains(&v) && used {
                errs.push(
                    Diagnostic::user(
                        "E1341",
                        format!("%{} is copied to shared memory and also used as a value", k.value_name(v)),
                    )
                    .with_label(k.span(o), "this load becomes a cp.async copy")
                    .with_help("in cp-async mode the load stage only copies global memory into shared buffers"),
                );
            }
        }
        k.set_region_ops(r, kept);
    }
    errs
}

/// E1340: a shared write of the load stage that is not a copy from global memory.
fn not_a_copy(k: &Kernel, o: Op) -> Diagnostic {
    Diagnostic::user(
        "E1340",
        "cp-async mode needs every shared write of the load stage to copy a `gload` value",
    )
    .with_label(k.span(o), "this write is not a global-to-shared copy")
    .with_help("write `%x = gload %G[...]` then `store @buf[...], %x` in the stage, or use `pipeline --stages` without a mode")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::parse_kernel;
    use crate::transform::pipeline::tests::{LOOP, verified_text};

    fn piped(src: &str, d: u32, p: Option<u32>) -> String {
        let k = parse_kernel(src).expect("parses");
        let (out, _) = cp_async_pipeline(&k, d, p).unwrap_or_else(|e| panic!("{e:?}"));
        verified_text(&out)
    }

    #[test]
    fn stores_of_global_loads_become_copies_with_one_commit_per_stage() {
        let text = piped(LOOP, 3, None);
        assert!(!text.contains("gload"), "{text}");
        assert_eq!(text.matches("cp_async %").count(), 2, "{text}");
        assert_eq!(text.matches("cp_async_commit").count(), 2, "{text}");
        assert!(text.contains("add %k, 2"), "{text}");
        assert!(!text.contains("cp_async_wait") && !text.contains("barrier"), "{text}");
    }

    #[test]
    fn a_shorter_prefetch_keeps_the_slots() {
        let text = piped(LOOP, 4, Some(2));
        assert!(text.contains("f32[4, 64]") && text.contains("add %k, 2"), "{text}");
        assert!(text.contains("rem %k, 4"), "{text}");
    }

    #[test]
    fn a_prefetch_of_the_stage_count_is_refused() {
        let k = parse_kernel(LOOP).expect("parses");
        let e = cp_async_pipeline(&k, 2, Some(2)).expect_err("refused");
        assert_eq!(e[0].code, "E1342");
    }

    #[test]
    fn a_store_of_a_computed_value_is_refused() {
        let src = LOOP.replace("store @buf[%t], %x", "%y = add %x, 1.0\n      store @buf[%t], %y");
        let k = parse_kernel(&src).expect("parses");
        let e = cp_async_pipeline(&k, 2, None).expect_err("refused");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].code, "E1340");
    }

    #[test]
    fn a_copied_value_used_elsewhere_is_refused() {
        let src = LOOP.replace("store @buf[%t], %x", "store @buf[%t], %x\n      %y = add %x, 1.0");
        let k = parse_kernel(&src).expect("parses");
        let e = cp_async_pipeline(&k, 2, None).expect_err("refused");
        assert!(e.iter().any(|d| d.code == "E1341"), "{e:?}");
    }
}
