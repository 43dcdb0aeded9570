//! Shared-memory planning: assigns byte offsets to shared buffers so that buffers whose
//! lifetimes do not overlap reuse the same bytes, minimizing the block's shared-memory peak.
//!
//! Lifetimes. Ops are numbered in program order. A buffer's live interval runs from the first
//! op that touches it to the last (accesses through views, collective and async accesses and
//! mbarrier ops all count, via the effects table). An access inside a loop extends the interval
//! to the whole loop: the next iteration touches the buffer again (nvFuser's "outer live
//! interval"). Two buffers interfere when their intervals overlap, or when one is touched in
//! one arm of a divergent (thread-dependent, per `analysis::uniformity`) `if` and the other in
//! the other arm: different threads run the two arms at the same time and no barrier can sit
//! between them, so program order says nothing there. Arms of a uniform `if` run one at a
//! time and keep the interval rule. Pinned buffers (`at N`) keep their offsets and interfere
//! with everything they overlap in time.
//!
//! Allocation. Buffers are placed largest first (ties by first use), each at the lowest offset,
//! aligned to 16 bytes (8 for mbarriers), that overlaps no interfering buffer already placed
//! (first fit over the sorted occupied ranges). The result is a kernel whose buffers are all
//! pinned; reused bytes now alias, so the hazards between the old buffer's last accesses and
//! the new buffer's first ones are ordinary aliasing hazards that `sync` places barriers for
//! (the write-after-read syncs nvFuser's `promoteReuseSyncs` inserts by hand). Planning never
//! adds a sync itself.
//!
//! Complexity: O(ops · B) for the intervals, O(B² log B) for the placement of B buffers, plus
//! O(B²) per divergent `if` for its concurrent pairs.
//! Source: nvFuser's stack-based shared-memory allocator and alias analysis (seed 004).

use crate::ir::*;

/// Where one buffer went.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub buffer: Buffer,
    pub offset: u64,
    pub bytes: u64,
    /// Live interval in program-order op numbers (inclusive); `None` if never touched.
    pub live: Option<(usize, usize)>,
}

/// The planned kernel and the placement of every buffer.
#[derive(Clone, Debug)]
pub struct SmemPlan {
    pub kernel: Kernel,
    pub placements: Vec<Placement>,
    /// Bytes of shared memory the planned kernel needs.
    pub peak: u64,
    /// Bytes the kernel needed before planning (unpinned buffers laid out one after another).
    pub peak_before: u64,
}

fn align_of(e: ElemType) -> u64 {
    if e == ElemType::MBarrier { 8 } else { 16 }
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Live intervals of every buffer (op numbers in program order).
pub fn live_intervals(k: &Kernel) -> SecondaryMap<Buffer, Option<(usize, usize)>> {
    lifetimes(k).live
}

/// Buffer lifetimes: the live interval of each buffer, and the pairs of buffers that are live
/// concurrently whatever their intervals say (touched in the two arms of a divergent `if`).
#[derive(Clone, Debug)]
pub struct Lifetimes {
    pub live: SecondaryMap<Buffer, Option<(usize, usize)>>,
    /// Pairs `(a, b)` with `a < b` used in opposite arms of a thread-dependent `if`: the arms
    /// run at the same time in different threads, and no barrier can separate them.
    pub concurrent: std::collections::BTreeSet<(Buffer, Buffer)>,
}

impl Lifetimes {
    /// Whether `a` and `b` may hold data at the same time (so may not share bytes).
    pub fn interfere(&self, a: Buffer, b: Buffer) -> bool {
        overlap(*self.live.get(a), *self.live.get(b))
            || self.concurrent.contains(&(a.min(b), a.max(b)))
    }
}

/// Lifetimes of every buffer of `k`.
pub fn lifetimes(k: &Kernel) -> Lifetimes {
    let mut w = Walk {
        n: 0,
        uniformity: crate::analysis::uniformity::analyze(k),
        concurrent: Default::default(),
    };
    let mut live = SecondaryMap::with_default(None);
    w.region(k, k.body, &mut live);
    Lifetimes {
        live,
        concurrent: w.concurrent,
    }
}

/// State of the numbering walk.
struct Walk {
    n: usize,
    uniformity: crate::analysis::uniformity::Uniformity,
    concurrent: std::collections::BTreeSet<(Buffer, Buffer)>,
}

impl Walk {
    /// Numbers the ops of `r` and records touches. Loops widen touches to their span.
    fn region(
        &mut self,
        k: &Kernel,
        r: Region,
        live: &mut SecondaryMap<Buffer, Option<(usize, usize)>>,
    ) {
        for &op in &k.regions[r].ops {
            let start = self.n;
            self.n += 1;
            let mut touched = buffers_touched(k, op);
            let od = &k.ops[op];
            let is_loop = matches!(od.kind, OpKind::For { .. } | OpKind::While { .. });
            let mut inner = SecondaryMap::with_default(None);
            let mut arms = Vec::new();
            for &c in &od.regions {
                let mut arm = SecondaryMap::with_default(None);
                self.region(k, c, &mut arm);
                let used: Vec<Buffer> =
                    k.buffers.keys().filter(|&b| arm.get(b).is_some()).collect();
                for &b in &used {
                    if let Some((lo, hi)) = *arm.get(b) {
                        extend(&mut inner, b, lo, hi);
                    }
                }
                arms.push(used);
            }
            if let OpKind::If { cond } = &od.kind
                && !self.uniformity.operand_uniform(cond)
            {
                self.arms_concurrent(&arms);
            }
            let end = self.n.saturating_sub(1).max(start);
            for b in k.buffers.keys() {
                if let Some((lo, hi)) = *inner.get(b) {
                    if is_loop {
                        touched.push(b);
                    } else {
                        extend(live, b, lo, hi);
                    }
                }
            }
            for b in touched {
                let (lo, hi) = if is_loop {
                    (start, end)
                } else {
                    (start, start)
                };
                extend(live, b, lo, hi);
            }
        }
    }

    /// Records every buffer used in one arm of a divergent `if` as concurrent with every
    /// buffer used in another.
    fn arms_concurrent(&mut self, arms: &[Vec<Buffer>]) {
        for (i, x) in arms.iter().enumerate() {
            for y in &arms[i + 1..] {
                for &a in x {
                    for &b in y.iter().filter(|&&b| b != a) {
                        self.concurrent.insert((a.min(b), a.max(b)));
                    }
                }
            }
        }
    }
}

fn extend(
    live: &mut SecondaryMap<Buffer, Option<(usize, usize)>>,
    b: Buffer,
    lo: usize,
    hi: usize,
) {
    let cur = *live.get(b);
    live.set(
        b,
        Some(match cur {
            None => (lo, hi),
            Some((a, c)) => (a.min(lo), c.max(hi)),
        }),
    );
}

/// Buffers an op touches by itself (not through its regions).
fn buffers_touched(k: &Kernel, op: Op) -> Vec<Buffer> {
    let mut v: Vec<Buffer> = effects(k, op)
        .shared
        .iter()
        .map(|a| k.root_buffer(a.mem))
        .collect();
    match &k.ops[op].kind {
        OpKind::ViewDef(view) => v.push(k.root_buffer(k.views[*view].base)),
        OpKind::TmaLoad { mbar, .. }
        | OpKind::MbarInit { mbar, .. }
        | OpKind::MbarArrive { mbar, .. }
        | OpKind::MbarExpectTx { mbar, .. }
        | OpKind::MbarWait { mbar, .. }
        | OpKind::MbarInval { mbar, .. } => v.push(k.root_buffer(*mbar)),
        _ => {}
    }
    v
}

fn overlap(a: Option<(usize, usize)>, b: Option<(usize, usize)>) -> bool {
    match (a, b) {
        (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
        // A buffer never touched still occupies its bytes conservatively.
        _ => true,
    }
}

/// Bytes needed when unpinned buffers are laid out one after another (no reuse).
pub fn peak_without_reuse(k: &Kernel) -> u64 {
    let mut end = 0u64;
    let mut next = 0u64;
    let pinned_end = k
        .buffers
        .values()
        .filter_map(|b| b.offset.map(|o| o + b.bytes()))
        .max()
        .unwrap_or(0);
    next = next.max(pinned_end);
    for b in k.buffers.values() {
        if b.offset.is_none() {
            let o = align_up(next, align_of(b.elem));
            next = o + b.bytes();
            end = end.max(next);
        }
    }
    end.max(pinned_end)
}

/// Plans offsets for every unpinned buffer of `k`.
pub fn plan_shared_memory(k: &Kernel) -> SmemPlan {
    let lt = lifetimes(k);
    let live = &lt.live;
    let mut placed: Vec<Placement> = k
        .buffers
        .iter()
        .filter_map(|(b, d)| {
            d.offset.map(|o| Placement {
                buffer: b,
                offset: o,
                bytes: d.bytes(),
                live: *live.get(b),
            })
        })
        .collect();
    let mut todo: Vec<Buffer> = k
        .buffers
        .iter()
        .filter(|(_, d)| d.offset.is_none())
        .map(|(b, _)| b)
        .collect();
    todo.sort_by_key(|&b| {
        (
            std::cmp::Reverse(k.buffers[b].bytes()),
            live.get(b).map_or(usize::MAX, |l| l.0),
            b,
        )
    });
    for b in todo {
        let d = &k.buffers[b];
        let bytes = d.bytes();
        let align = align_of(d.elem);
        let mut busy: Vec<(u64, u64)> = placed
            .iter()
            .filter(|p| lt.interfere(p.buffer, b))
            .map(|p| (p.offset, p.offset + p.bytes))
            .collect();
        busy.sort();
        let mut off = 0u64;
        for (lo, hi) in busy {
            if off + bytes <= lo {
                break;
            }
            if hi > off {
                off = align_up(hi, align);
            }
        }
        placed.push(Placement {
            buffer: b,
            offset: off,
            bytes,
            live: *live.get(b),
        });
    }
    placed.sort_by_key(|p| p.buffer);
    let mut kernel = k.clone();
    for p in &placed {
        kernel.buffers[p.buffer].offset = Some(p.offset);
    }
    let peak = placed.iter().map(|p| p.offset + p.bytes).max().unwrap_or(0);
    SmemPlan {
        kernel,
        placements: placed,
        peak,
        peak_before: peak_without_reuse(k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::parse_kernel;

    fn plan(src: &str) -> SmemPlan {
        let k = parse_kernel(src).expect("parses");
        assert!(crate::verify::verify(&k).is_empty());
        let p = plan_shared_memory(&k);
        assert!(crate::verify::verify(&p.kernel).is_empty());
        p
    }

    fn byte_ranges_disjoint_when_live_together(p: &SmemPlan) {
        let lt = lifetimes(&p.kernel);
        for (i, a) in p.placements.iter().enumerate() {
            for b in &p.placements[i + 1..] {
                if lt.interfere(a.buffer, b.buffer) {
                    assert!(
                        a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset,
                        "{a:?} and {b:?} overlap"
                    );
                }
            }
        }
    }

    #[test]
    fn buffers_dead_before_another_is_born_share_bytes() {
        // nvFuser SmemReuseTest.SimpleCase, variant 2: B reuses A's bytes (peak = 6 floats).
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[5]\n shared @b : f32[6]\n %t = tid.x\n store @a[0], 1.0\n %x = load @a[0]\n store @b[0], %x\n %y = load @b[0]\n}",
        );
        assert_eq!(p.peak, 24);
        assert_eq!(p.peak_before, 32 + 24);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn overlapping_lifetimes_get_disjoint_bytes() {
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[5]\n shared @b : f32[6]\n store @a[0], 1.0\n store @b[0], 2.0\n %x = load @a[0]\n %y = load @b[0]\n}",
        );
        assert_eq!(p.peak, 32 + 20);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn a_buffer_used_in_a_loop_lives_for_the_whole_loop() {
        // @a is last read early in the body, @b first written later in it, but the next
        // iteration writes @a again: they may not share bytes.
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n for %i = 0 to 4 step 1 {\n store @a[0], 1.0\n %x = load @a[0]\n store @b[0], %x\n %y = load @b[0]\n }\n}",
        );
        assert_eq!(p.peak, 16 + 16);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn buffers_of_the_two_arms_of_a_divergent_if_get_disjoint_bytes() {
        // Threads below 4 use @a while the others use @b, at the same time.
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n %t = tid.x\n %c = cmp lt %t, 4\n if %c {\n store @a[0], 1.0\n %x = load @a[0]\n } else {\n store @b[0], 2.0\n %y = load @b[0]\n }\n}",
        );
        assert_eq!(p.peak, 16 + 16);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn buffers_of_the_two_arms_of_a_uniform_if_share_bytes() {
        // Every thread takes the same arm, so only one buffer is ever in use.
        let p = plan(
            "kernel @k(%n: i32) block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n %c = cmp lt %n, 4\n if %c {\n store @a[0], 1.0\n %x = load @a[0]\n } else {\n store @b[0], 2.0\n %y = load @b[0]\n }\n}",
        );
        assert_eq!(p.peak, 16);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn a_divergent_if_nested_in_an_arm_makes_its_inner_arms_concurrent() {
        let p = plan(
            "kernel @k(%n: i32) block(8) {\n shared @a : f32[4]\n shared @b : f32[4]\n %t = tid.x\n %u = cmp lt %n, 4\n if %u {\n %c = cmp lt %t, 4\n if %c {\n store @a[0], 1.0\n } else {\n store @b[0], 2.0\n }\n }\n}",
        );
        assert_eq!(p.peak, 16 + 16);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn pinned_buffers_keep_their_offsets() {
        let p = plan(
            "kernel @k() block(8) {\n shared @a : f32[4] at 64\n shared @b : f32[32]\n store @a[0], 1.0\n store @b[0], 2.0\n %x = load @a[0]\n %y = load @b[0]\n}",
        );
        let a = p
            .placements
            .iter()
            .find(|x| p.kernel.buffers[x.buffer].name == "a")
            .expect("a");
        assert_eq!(a.offset, 64);
        byte_ranges_disjoint_when_live_together(&p);
    }

    #[test]
    fn every_example_plans_without_overlap() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
        for e in std::fs::read_dir(dir).expect("examples").flatten() {
            // examples/README.md describes the kernels.
            if e.path().extension().is_none_or(|x| x != "kir") {
                continue;
            }
            let src = std::fs::read_to_string(e.path()).expect("read");
            let p = plan(&src);
            let bound: u64 = p.placements.iter().map(|x| align_up(x.bytes, 16)).sum();
            assert!(
                p.peak <= bound,
                "{}: peak {} above the no-reuse bound {bound}",
                e.path().display(),
                p.peak
            );
            byte_ranges_disjoint_when_live_together(&p);
        }
    }
}
