//! Proxy fences that `sync --target sm_90` places for generic writes a later TMA load
//! overwrites (docs/placement.md, "Proxy fences"): on F3-shaped kernels — every thread reads
//! its element of a TMA tile and overwrites it with a plain store, and the next trips' TMA
//! load (issued by one elected thread) reloads the tile — the synchronized kernel is race-free
//! for the interpreter and the static proof (no `C0013`), holds exactly one fence (one per
//! writing-thread path), and that fence is needed: without it the interpreter reports the
//! missing fence whenever the tile is reloaded after a store.
//!
//! Variants: one or two tile slots, a barrier of the kernel's own before the store or not,
//! every thread or half of them storing, the issuer thread 0 or the last one, 1 to 5 trips,
//! blocks of 32 and 64 threads.

use smemsync::Kernel;
use smemsync::check::{CheckOptions, check_race_free};
use smemsync::ir::OpKind;
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

mod common;

/// One F3-shaped kernel.
struct Shape {
    threads: u32,
    slots: u32,
    issuer: u32,
    trips: u32,
    barrier_before_store: bool,
    partial_store: bool,
}

fn kernel_text(s: &Shape) -> String {
    let (t, n) = (s.threads, s.slots);
    let inits: String = (0..n)
        .map(|i| format!("    mbar_init @full[{i}], 1\n"))
        .collect();
    let bar = if s.barrier_before_store {
        "    barrier\n"
    } else {
        ""
    };
    let store = if s.partial_store {
        format!(
            "    %lo = cmp lt %t, {}\n    if %lo {{\n      store %v[%t], %f\n    }}\n",
            t / 2
        )
    } else {
        "    store %v[%t], %f\n".to_string()
    };
    format!(
        "kernel @k(%X: global f32[4, {t}], %Y: global f32[4, {t}]) block({t}) {{
  shared @buf : f32[{n}, {t}]
  shared @full : mbarrier[{n}]
  %t = tid.x
  %el = cmp eq %t, {issuer}
  if %el {{
{inits}  }}
  barrier
  for %i = 0 to {trips} step 1 {{
    %s = rem %i, {n}
    %v = view @buf[%s]
    %r = rem %i, 4
    if %el {{
      mbar_arrive @full[%s] tx {bytes}
      tma_load %v <- %X[%r, 0], @full[%s]
    }}
    %q = div %i, {n}
    %p = rem %q, 2
    mbar_wait @full[%s], %p
    %x = load %v[%t]
    gstore %Y[%r, %t], %x
{bar}    %f = itof %t
{store}  }}
}}
",
        issuer = s.issuer,
        trips = s.trips,
        bytes = 4 * t,
    )
}

fn shapes() -> Vec<Shape> {
    let mut v = Vec::new();
    for threads in [32, 64] {
        for slots in [1, 2] {
            for issuer in [0, threads - 1] {
                for trips in [1, 2, 3, 5] {
                    for barrier_before_store in [false, true] {
                        for partial_store in [false, true] {
                            v.push(Shape {
                                threads,
                                slots,
                                issuer,
                                trips,
                                barrier_before_store,
                                partial_store,
                            });
                        }
                    }
                }
            }
        }
    }
    v
}

fn opts(proof: bool) -> CheckOptions {
    CheckOptions {
        target: Target::from_name("sm_90").ok(),
        schedules: 2,
        try_proof: proof,
        ..Default::default()
    }
}

/// `src` synchronized for sm_90 and its text, after asserting that the interpreter and the
/// static proof both find it race-free.
fn synced_race_free(src: &str) -> (Kernel, String) {
    let target = Target::from_name("sm_90").expect("sm_90");
    let k = common::parse_verified(src);
    let synced = synchronize(&k, &target, &PlaceOptions::default())
        .unwrap_or_else(|e| panic!("sync refused: {e:?}\n{src}"))
        .kernel;
    let out = smemsync::emit::text::print_kernel(&synced);
    for proof in [false, true] {
        let r = check_race_free(&synced, &opts(proof));
        assert!(r.is_race_free(), "proof={proof}: {}\n{out}", r.summary());
    }
    (synced, out)
}

fn fences(k: &Kernel) -> usize {
    common::ops_where(k, |o| matches!(o, OpKind::FenceProxyAsync)).len()
}

#[test]
fn writers_fence_their_stores_before_the_tma_load_that_overwrites_them() {
    let mut needed = 0;
    for s in shapes() {
        let (synced, out) = synced_race_free(&kernel_text(&s));
        assert_eq!(
            fences(&synced),
            1,
            "one fence per writing-thread path\n{out}"
        );
        // The tile is reloaded after a store when a slot comes round again.
        if s.trips > s.slots {
            let without: String = out
                .lines()
                .filter(|l| l.trim() != "fence_proxy_async")
                .map(|l| format!("{l}\n"))
                .collect();
            let r = check_race_free(&common::parse_verified(&without), &opts(false));
            assert!(
                r.summary().contains("missing proxy fence"),
                "the fence is needed: {}\n{without}",
                r.summary()
            );
            needed += 1;
        }
    }
    assert!(needed >= 60, "only {needed} kernels reload a stored tile");
}

#[test]
fn the_hostile_f3_kernel_gets_its_fence_in_the_writing_threads() {
    let src = "kernel @k(%X: global f32[4, 32], %Y: global f32[4, 32]) block(32) {
  shared @buf : f32[1, 32]
  shared @full : mbarrier[1]
  %t = tid.x
  %el = cmp eq %t, 31
  if %el {
    mbar_init @full[0], 1
  }
  barrier
  %v = view @buf[0]
  for %i = 0 to 2 step 1 {
    if %el {
      mbar_arrive @full[0] tx 128
      tma_load %v <- %X[%i, 0], @full[0]
    }
    %p = rem %i, 2
    mbar_wait @full[0], %p
    %x = load %v[%t]
    gstore %Y[%i, %t], %x
    %f = itof %t
    store %v[%t], %f
  }
}
";
    let (synced, out) = synced_race_free(src);
    // The fence follows the store, in every thread, before the barrier that orders it with
    // the next trip's issue; none in the issuer's branch.
    assert!(
        out.contains("store %v[%t], %f\n    fence_proxy_async\n    barrier\n"),
        "{out}"
    );
    assert_eq!(fences(&synced), 1, "{out}");
}

/// The kernel's own `fence_proxy_async` after its store, in a loop, read by another thread's
/// async access (session 35's K5): `sync` puts the barrier the store needs between the store
/// and that fence, where the fence no longer precedes the release — it must fence the writes
/// again before the barrier. The three async readers (TMA store source, wgmma operand, TMA
/// load destination), 1 to 3 trips: the output is race-free for the interpreter and the
/// static proof (no `C0013`), and the base binary's output (user fence only) is not.
#[test]
fn a_users_fence_after_the_placed_barrier_is_not_taken_as_the_writers_fence() {
    let access = [
        // (declarations, the async access and its completion, after `fence_proxy_async`)
        (
            "",
            "    if %el {\n      tma_store %Y[%i, 0] <- @o\n      bulk_commit\n      bulk_wait 0\n    }\n",
        ),
        (
            "  shared @b : f32[64]\n",
            "    %d = wgmma @o, @b, 0.0\n    wgmma_commit\n    wgmma_wait 0\n    gstore %Y[%i, %t], %d\n",
        ),
        (
            "  shared @full : mbarrier[1]\n",
            "    if %el {\n      mbar_arrive @full[0] tx 256\n      tma_load @o <- %Y[%i, 0], @full[0]\n    }\n    %par = rem %i, 2\n    mbar_wait @full[0], %par\n    %r = sub 63, %t\n    %x = load @o[%r]\n    gstore %Y[%i, %t], %x\n",
        ),
    ];
    for (decls, body) in access {
        for trips in 1..=3 {
            let init = if decls.contains("@full") {
                "  if %el {\n    mbar_init @full[0], 1\n  }\n  barrier\n"
            } else if decls.contains("@b") {
                "  store @b[%t], %f\n"
            } else {
                ""
            };
            let src = format!(
                "kernel @k(%Y: global f32[4, 64]) block(64) {{\n  shared @o : f32[64]\n{decls}  %t = tid.x\n  %f = itof %t\n  %el = cmp eq %t, 0\n{init}  for %i = 0 to {trips} step 1 {{\n    store @o[%t], %f\n    fence_proxy_async\n{body}  }}\n}}\n"
            );
            synced_race_free(&src);
        }
    }
}
