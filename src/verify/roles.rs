//! Role-relative layouts (docs/ir.md, "Role-relative layouts"): a collective access whose
//! layout is bound to thread group `@g` (`layout "L" in @g`) numbers the layout's threads from
//! `@g`'s first thread, so it must run in `@g`'s threads only. This check refuses (E1620,
//! located on the access, naming the layout's definition) an access that role branches do not
//! confine to `[g.lo, g.hi)`.
//!
//! The threads that may reach a region are an interval set computed from the `if` ops whose
//! condition is an `in_group` result: the then-arm keeps the enclosing threads inside the
//! group, the else-arm those outside it (the nested role branches the TTGIR importer writes,
//! `if in_group @a { .. } else { if in_group @b { .. } else { .. } }`); every other op passes
//! its threads to its regions unchanged, a superset of those that run them. So the check is
//! sound (an access it accepts runs in the group's threads only) and ignores conditions other
//! than `in_group`. Complexity: O(ops × intervals), intervals at most one per group plus one.

use crate::diag::Diagnostic;
use crate::ir::*;

/// Half-open thread intervals, sorted and disjoint.
type Threads = Vec<(u32, u32)>;

/// Every E1620 of `k`.
pub fn check(k: &Kernel) -> Vec<Diagnostic> {
    if k.layouts.iter().all(|d| d.group.is_none()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    region(k, k.body(), &[(0, k.threads())], &mut out);
    out
}

fn region(k: &Kernel, r: Region, threads: &[(u32, u32)], out: &mut Vec<Diagnostic>) {
    for &op in k.region_ops(r) {
        access(k, op, threads, out);
        let regions = &k.ops[op].regions;
        match role_branch(k, op) {
            Some(g) => {
                let (lo, hi) = (k.groups[g].lo, k.groups[g].hi);
                let inside = intersect(threads, lo, hi);
                let outside = subtract(threads, lo, hi);
                for (i, &sub) in regions.iter().enumerate() {
                    region(k, sub, if i == 0 { &inside } else { &outside }, out);
                }
            }
            None => {
                for &sub in regions {
                    region(k, sub, threads, out);
                }
            }
        }
    }
}

/// The group of an `if` on an `in_group` result (or on a role split that
/// `analysis::role_split` recognises: the same threads).
fn role_branch(k: &Kernel, op: Op) -> Option<Group> {
    crate::analysis::role_split::branch_group(k, op)
}

/// E1620 when `op` is a collective access under a group-bound layout that threads outside the
/// group may reach.
fn access(k: &Kernel, op: Op, threads: &[(u32, u32)], out: &mut Vec<Diagnostic>) {
    let layout = match &k.ops[op].kind {
        OpKind::LocalLoad { layout, .. } | OpKind::LocalStore { layout, .. } => layout,
        OpKind::CpAsyncTile(c) | OpKind::GatherToLdsTile(c) => &c.layout,
        _ => return,
    };
    let Some(def) = layout.as_deref().and_then(|l| k.layout_def(l)) else {
        return;
    };
    let Some(g) = def.group else { return };
    let gd = &k.groups[g];
    let Some(&(a, b)) = subtract(threads, gd.lo, gd.hi).first() else {
        return;
    };
    out.push(
        Diagnostic::user(
            "E1620",
            format!(
                "this collective access uses layout \"{}\", whose threads are group `@{}`'s \
                 [{}, {}), but threads [{a}, {b}) may reach it",
                def.name, gd.name, gd.lo, gd.hi
            ),
        )
        .with_label(k.span(op), "not confined to the layout's group")
        .with_label(def.span, "the layout is bound to the group here")
        .with_help(format!(
            "put the access under `if in_group @{}` (or an else-arm that leaves only its threads)",
            gd.name
        )),
    );
}

fn intersect(t: &[(u32, u32)], lo: u32, hi: u32) -> Threads {
    t.iter()
        .map(|&(a, b)| (a.max(lo), b.min(hi)))
        .filter(|(a, b)| a < b)
        .collect()
}

fn subtract(t: &[(u32, u32)], lo: u32, hi: u32) -> Threads {
    let mut out = Vec::new();
    for &(a, b) in t {
        if a < lo.min(b) {
            out.push((a, lo.min(b)));
        }
        if hi.max(a) < b {
            out.push((hi.max(a), b));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_arithmetic() {
        let t = [(0, 384)];
        assert_eq!(intersect(&t, 128, 256), vec![(128, 256)]);
        assert_eq!(subtract(&t, 128, 256), vec![(0, 128), (256, 384)]);
        let rest = subtract(&subtract(&t, 0, 128), 128, 256);
        assert_eq!(rest, vec![(256, 384)]);
        assert!(subtract(&rest, 256, 384).is_empty());
        assert!(intersect(&rest, 0, 128).is_empty());
    }
}
