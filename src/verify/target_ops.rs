//! Target capabilities: every op of a kernel must exist on the target it is analysed,
//! synchronized, checked or emitted for.
//!
//! What it computes: one diagnostic per op family that the target lacks (the first op of each
//! family, located), naming the op, the target and what to use instead. Counter waits must
//! name counters of the target's generation (`vmcnt`/`lgkmcnt`/`expcnt` on gfx9, `loadcnt`,
//! `storecnt`, `dscnt`, `kmcnt`, `expcnt` on gfx12, plus `asynccnt` and `tensorcnt` on
//! gfx1250; none on NVIDIA), and named barrier ids must be below the target's count.
//! Facts: `Target` in `target.rs` (gather-to-LDS exists on gfx942 for 1-, 2- and 4-byte
//! elements, which every IR element type is; tensor DMA and named barriers on gfx1250; split
//! barriers on gfx12; cp.async from sm_80; TMA, mbarriers and wgmma on sm_90).
//! Which feature each op needs is its row of the signature table (`ir::signature`); [`has`]
//! says which targets have which feature. Complexity: O(ops).

use std::collections::HashSet;

use crate::diag::Diagnostic;
use crate::ir::signature::Feature;
use crate::ir::*;
use crate::target::{Target, Vendor};

/// Diagnostics for the ops of `k` that `t` does not have.
pub fn check(k: &Kernel, t: &Target) -> Vec<Diagnostic> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for op in k.ops_in_order() {
        if let Some((family, instead)) = missing(&k.ops[op].kind, t)
            && seen.insert(family)
        {
            out.push(
                Diagnostic::user(
                    "E0170",
                    format!("`{family}` does not exist on target {}", t.name),
                )
                .with_label(k.span(op), format!("not available on {}", t.name))
                .with_help(instead),
            );
        }
    }
    out
}

/// Whether target `t` has feature `f` (the feature an op needs, from its signature).
pub fn has(t: &Target, f: Feature) -> bool {
    match f {
        Feature::Everywhere => true,
        Feature::CpAsync => t.cp_async,
        Feature::GatherToLds => t.gather_to_lds,
        Feature::TensorDma => t.tensor_dma,
        Feature::Tma => t.tma,
        Feature::Mbarrier => t.mbarrier,
        Feature::Wgmma => t.wgmma,
        Feature::ProxyFence => t.proxy_fence,
        Feature::SplitBarriers => t.split_barriers,
        Feature::NamedBarriers => t.named_barriers > 0,
        Feature::CounterWaits => t.vendor == Vendor::Amd,
    }
}

/// The op family `kind` belongs to and what to use instead, when `t` lacks it.
fn missing(kind: &OpKind, t: &Target) -> Option<(&'static str, String)> {
    let sig = kind.signature();
    match kind {
        // Named barriers exist up to an id; counter waits name the generation's counters.
        OpKind::NamedArrive { id, .. } | OpKind::NamedSync { id, .. } => {
            (*id >= t.named_barriers).then(|| named_help(t))
        }
        OpKind::WaitCnt(cs) if has(t, sig.needs) => cs
            .iter()
            .find(|(c, _)| !counters(t).contains(c))
            .map(|(c, _)| (counter_family(*c), counter_help(t))),
        _ if has(t, sig.needs) => None,
        _ => Some(instead(sig.code, sig.needs, t)),
    }
}

/// The family name of an op whose feature `f` target `t` lacks, and what to use instead.
fn instead(code: OpCode, f: Feature, t: &Target) -> (&'static str, String) {
    let on = |what: &str| format!("use a target that has it ({what})");
    let tile = matches!(code, OpCode::CpAsyncTile | OpCode::GatherToLdsTile);
    match f {
        Feature::CpAsync if tile => (
            "cp_async_tile",
            format!("{}, or gather_to_lds_tile on AMD", on("sm_80, sm_90")),
        ),
        Feature::CpAsync => (
            "cp_async",
            format!("{}, or gather_to_lds on AMD", on("sm_80, sm_90")),
        ),
        Feature::GatherToLds if tile => (
            "gather_to_lds_tile",
            format!("{}; on NVIDIA, cp_async_tile", on("gfx942, gfx950, gfx1250")),
        ),
        Feature::GatherToLds => (
            "gather_to_lds",
            format!("{}; on NVIDIA, cp_async", on("gfx942, gfx950, gfx1250")),
        ),
        Feature::TensorDma => ("tdm_load", format!("{}; on NVIDIA, tma_load", on("gfx1250"))),
        Feature::Tma => ("tma", format!("{}; on AMD gfx1250, tdm_load", on("sm_90"))),
        Feature::Mbarrier => ("mbarrier", format!("{}; otherwise barrier", on("sm_90"))),
        Feature::Wgmma => (
            "wgmma",
            format!("{}; otherwise local_load and compute", on("sm_90")),
        ),
        Feature::ProxyFence => (
            "fence_proxy_async",
            if t.vendor == Vendor::Nvidia {
                format!("{}: before sm_90 there is no async proxy to fence", on("sm_90"))
            } else {
                "AMD has no async proxy: LDS writes need no proxy fence, remove it".into()
            },
        ),
        Feature::SplitBarriers => (
            "barrier_signal/barrier_wait",
            format!("{}, or barrier", on("gfx1200, gfx1201, gfx1250")),
        ),
        Feature::NamedBarriers => named_help(t),
        Feature::CounterWaits => (
            "waitcnt",
            "NVIDIA has no counter waits: use cp_async_wait, mbar_wait or wgmma_wait".into(),
        ),
        Feature::Everywhere => ("", String::new()),
    }
}

fn named_help(t: &Target) -> (&'static str, String) {
    let n = t.named_barriers;
    let help = if n == 0 {
        "use a target that has it (gfx1250, sm_80, sm_90), or barrier".to_string()
    } else {
        format!("named barrier ids on {} are 0..{n}", t.name)
    };
    ("named barriers", help)
}

/// The counters a target's `waitcnt` may name.
fn counters(t: &Target) -> Vec<Counter> {
    use Counter::*;
    match t.name {
        "gfx942" | "gfx950" => vec![VmCnt, LgkmCnt, ExpCnt],
        "gfx1250" => vec![LoadCnt, StoreCnt, DsCnt, KmCnt, ExpCnt, AsyncCnt, TensorCnt],
        _ if t.vendor == Vendor::Amd => vec![LoadCnt, StoreCnt, DsCnt, KmCnt, ExpCnt],
        _ => Vec::new(),
    }
}

fn counter_family(c: Counter) -> &'static str {
    match c {
        Counter::VmCnt => "waitcnt vmcnt",
        Counter::LgkmCnt => "waitcnt lgkmcnt",
        Counter::ExpCnt => "waitcnt expcnt",
        Counter::DsCnt => "waitcnt dscnt",
        Counter::LoadCnt => "waitcnt loadcnt",
        Counter::StoreCnt => "waitcnt storecnt",
        Counter::KmCnt => "waitcnt kmcnt",
        Counter::AsyncCnt => "waitcnt asynccnt",
        Counter::TensorCnt => "waitcnt tensorcnt",
    }
}

fn counter_help(t: &Target) -> String {
    let names: Vec<&str> = counters(t).iter().map(|c| c.name()).collect();
    format!("the counters of {} are {}", t.name, names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusals(src: &str, target: &str) -> Vec<String> {
        let k = crate::reader::parse_kernel(src).expect("parses");
        let t = Target::from_name(target).expect("known");
        check(&k, &t).into_iter().map(|d| d.message).collect()
    }

    #[test]
    fn counters_follow_the_generation() {
        let src = "kernel @k() block(64) {\n  waitcnt vmcnt(0)\n}\n";
        assert!(refusals(src, "gfx942").is_empty());
        assert_eq!(
            refusals(src, "gfx1201"),
            ["`waitcnt vmcnt` does not exist on target gfx1201"]
        );
        assert_eq!(
            refusals(src, "sm_90"),
            ["`waitcnt` does not exist on target sm_90"]
        );
    }

    #[test]
    fn one_refusal_per_family() {
        let src = "kernel @k() block(64) {\n  barrier_signal -1\n  barrier_wait -1\n  barrier_signal -1\n  barrier_wait -1\n}\n";
        assert_eq!(refusals(src, "gfx942").len(), 1);
        assert!(refusals(src, "gfx1201").is_empty());
    }
}
