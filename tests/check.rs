//! The race checker and interpreter on kernels whose answer is known by construction.

use smemsync::check::{CheckOptions, Verdict, check_race_free, input_element, run};
use smemsync::diag::line_number;
use smemsync::ir::Kernel;
use smemsync::target::Target;

mod common;
use common::parse_verified as parse;

fn opts() -> CheckOptions {
    CheckOptions::default()
}

fn interp_only() -> CheckOptions {
    CheckOptions {
        try_proof: false,
        ..CheckOptions::default()
    }
}

fn with_target(t: &str) -> CheckOptions {
    CheckOptions {
        target: Some(Target::from_name(t).expect("target")),
        try_proof: false,
        ..CheckOptions::default()
    }
}

const TRANSPOSE: &str = r#"
kernel @transpose(%in: global f32[64, 64], %out: global f32[64, 64]) block(32, 32) grid(2, 2) {
  shared @tile : f32[32, 33]
  %tx = tid.x
  %ty = tid.y
  %bx = bid.x
  %by = bid.y
  %r0 = mul %by, 32
  %c0 = mul %bx, 32
  %r = add %r0, %ty
  %c = add %c0, %tx
  %x = gload %in[%r, %c]
  store @tile[%ty, %tx], %x
  BARRIER
  %y = load @tile[%tx, %ty]
  %orow = add %c0, %ty
  %ocol = add %r0, %tx
  gstore %out[%orow, %ocol], %y
}
"#;

#[test]
fn transpose_without_barrier_is_racy_with_a_witness_naming_store_and_load() {
    let src = TRANSPOSE.replace("BARRIER", "");
    let k = parse(&src);
    for o in [opts(), interp_only()] {
        let r = check_race_free(&k, &o);
        let w = r
            .witness()
            .unwrap_or_else(|| panic!("expected a race, got {:?}", r.verdict));
        let lines = [
            line_number(&src, w.first.span).unwrap(),
            line_number(&src, w.second.span).unwrap(),
        ];
        assert!(
            lines.contains(&13) && lines.contains(&15),
            "witness lines {lines:?}"
        );
        assert_ne!(w.first.thread, w.second.thread);
        assert_eq!(w.buffer, "tile");
        // Store by (x, y) writes [y][x]; load by (x', y') reads [x'][y']: the element names both.
        let (st, ld) = if w.first.kind.writes() {
            (&w.first, &w.second)
        } else {
            (&w.second, &w.first)
        };
        assert_eq!(
            w.index,
            vec![st.thread_xyz[1] as u64, st.thread_xyz[0] as u64]
        );
        assert_eq!(
            w.index,
            vec![ld.thread_xyz[0] as u64, ld.thread_xyz[1] as u64]
        );
        let d = r.to_diagnostic(&k).expect("diagnostic");
        assert_eq!(d.labels.len(), 2);
        assert_eq!(d.code, "C0001");
    }
}

#[test]
fn transpose_with_barrier_is_proved_and_checked_race_free() {
    let src = TRANSPOSE.replace("BARRIER", "barrier");
    let k = parse(&src);
    let r = check_race_free(&k, &opts());
    assert!(
        matches!(r.verdict, Verdict::Proved { .. }),
        "{:?}",
        r.verdict
    );
    assert_eq!(r.summary(), "race-free (proved)");
    let r = check_race_free(&k, &interp_only());
    assert!(
        matches!(r.verdict, Verdict::Checked { .. }),
        "{:?}",
        r.verdict
    );
    assert!(
        r.summary()
            .starts_with("race-free (checked for block=32,32"),
        "{}",
        r.summary()
    );
}

#[test]
fn transpose_runs_to_the_transposed_input() {
    let src = TRANSPOSE.replace("BARRIER", "barrier");
    let k = parse(&src);
    let out = run(&k, 7, &opts()).expect("runs");
    let o = out.get("out").expect("out buffer");
    for r in 0..64u64 {
        for c in 0..64u64 {
            let want = input_element(7, 0, c * 64 + r, smemsync::ir::ElemType::F32);
            assert_eq!(o.data[(r * 64 + c) as usize], want, "out[{r}][{c}]");
        }
    }
    // A different seed gives different data.
    let out2 = run(&k, 8, &opts()).expect("runs");
    assert_ne!(out2.get("out").unwrap().data, o.data);
}

const LOOP_WAR: &str = r#"
kernel @war(%out: global f32[64]) block(64) {
  shared @s : f32[64]
  %t = tid.x
  %acc = for %i = 0 to 4 step 1 iter(%a = 0.0) {
    %f = itof %i
    store @s[%t], %f
    barrier
    %n = add %t, 1
    %m = rem %n, 64
    %x = load @s[%m]
    %b = add %a, %x
    END
    yield %b
  }
  gstore %out[%t], %acc
}
"#;

#[test]
fn loop_carried_war_is_caught_across_iterations() {
    let src = LOOP_WAR.replace("END", "");
    let k = parse(&src);
    for o in [opts(), interp_only()] {
        let r = check_race_free(&k, &o);
        let w = r
            .witness()
            .unwrap_or_else(|| panic!("expected a race, got {:?}", r.verdict));
        let lines = [
            line_number(&src, w.first.span).unwrap(),
            line_number(&src, w.second.span).unwrap(),
        ];
        assert!(lines.contains(&7) && lines.contains(&11), "lines {lines:?}");
        let (ri, wi) = if w.first.kind.writes() {
            (&w.second, &w.first)
        } else {
            (&w.first, &w.second)
        };
        assert_eq!(ri.iteration.len(), 1);
        assert_eq!(ri.iteration[0].0, "%i");
        // The read of iteration i races with the write of iteration i+1.
        assert_eq!(wi.iteration[0].1, ri.iteration[0].1 + 1, "{w:?}");
    }
}

#[test]
fn loop_carried_war_fixed_by_a_second_barrier() {
    let src = LOOP_WAR.replace("END", "barrier");
    let k = parse(&src);
    let r = check_race_free(&k, &opts());
    assert!(
        matches!(r.verdict, Verdict::Proved { .. }),
        "{:?}",
        r.verdict
    );
    let r = check_race_free(&k, &interp_only());
    assert!(r.is_race_free(), "{:?}", r.verdict);
    let out = run(&k, 0, &opts()).expect("runs");
    // Every thread sums 0+1+2+3.
    assert!(
        out.get("out")
            .unwrap()
            .data
            .iter()
            .all(|v| v.as_f32() == 6.0)
    );
}

#[test]
fn same_thread_raw_is_not_a_race() {
    let src = r#"
kernel @own(%out: global i32[128]) block(128) {
  shared @s : i32[128]
  %t = tid.x
  store @s[%t], %t
  %x = load @s[%t]
  %y = add %x, 1
  store @s[%t], %y
  %z = load @s[%t]
  gstore %out[%t], %z
}
"#;
    let k = parse(src);
    assert!(matches!(
        check_race_free(&k, &opts()).verdict,
        Verdict::Proved { .. }
    ));
    assert!(check_race_free(&k, &interp_only()).is_race_free());
    let out = run(&k, 0, &opts()).unwrap();
    for (t, v) in out.get("out").unwrap().data.iter().enumerate() {
        assert_eq!(v.as_i64(), t as i64 + 1);
    }
}

const ATOMICS: &str = r#"
kernel @hist(%out: global i32[1]) block(64) {
  shared @s : i32[1]
  %t = tid.x
  %z = cmp eq %t, 0
  if %z {
    store @s[0], 0
  }
  barrier
  SECOND
  barrier
  if %z {
    %x = load @s[0]
    gstore %out[0], %x
  }
}
"#;

#[test]
fn atomics_of_one_kind_do_not_race() {
    let src = ATOMICS.replace("SECOND", "atomic add @s[0], 1\n  atomic add @s[0], 2");
    let k = parse(&src);
    let r = check_race_free(&k, &interp_only());
    assert!(r.is_race_free(), "{:?}", r.verdict);
    let out = run(&k, 0, &opts()).unwrap();
    assert_eq!(out.get("out").unwrap().data[0].as_i64(), 64 * 3);
}

#[test]
fn atomic_against_plain_access_races() {
    let src = ATOMICS.replace("SECOND", "atomic add @s[0], 1\n  %r = load @s[0]");
    let k = parse(&src);
    let r = check_race_free(&k, &opts());
    assert!(r.is_race(), "{:?}", r.verdict);
    let src = ATOMICS.replace("SECOND", "atomic add @s[0], 1\n  atomic max @s[0], 5");
    let r = check_race_free(&parse(&src), &opts());
    assert!(r.is_race(), "atomics of different kinds: {:?}", r.verdict);
}

const SPLIT: &str = r#"
kernel @split(%out: global i32[64]) block(64) {
  shared @s : i32[64]
  %t = tid.x
  store @s[%t], %t
  SYNC
  %n = add %t, 1
  %m = rem %n, 64
  %x = load @s[%m]
  gstore %out[%t], %x
}
"#;

#[test]
fn split_barrier_orders_or_its_absence_races() {
    let ok = parse(&SPLIT.replace("SYNC", "barrier_signal -1\n  barrier_wait -1"));
    let r = check_race_free(&ok, &interp_only());
    assert!(r.is_race_free(), "{:?}", r.verdict);
    let out = run(&ok, 0, &opts()).unwrap();
    assert_eq!(out.get("out").unwrap().data[63].as_i64(), 0);
    let bad = parse(&SPLIT.replace("SYNC", ""));
    assert!(check_race_free(&bad, &interp_only()).is_race());
    // On AMD, LDS stores not followed by a dscnt wait are not ordered by the signal.
    let r = check_race_free(&ok, &with_target("gfx1200"));
    assert!(
        r.is_race(),
        "unfenced LDS store before signal on gfx1200: {:?}",
        r.verdict
    );
    let fenced = parse(&SPLIT.replace(
        "SYNC",
        "waitcnt dscnt(0)\n  barrier_signal -1\n  barrier_wait -1",
    ));
    assert!(check_race_free(&fenced, &with_target("gfx1200")).is_race_free());
}

#[test]
fn split_barrier_protocol_errors_are_reported() {
    let twice = parse(&SPLIT.replace(
        "SYNC",
        "barrier_signal -1\n  barrier_signal -1\n  barrier_wait -1",
    ));
    let r = check_race_free(&twice, &interp_only());
    assert!(
        matches!(r.verdict, Verdict::Deadlock(ref d) if d.code == "C0008"),
        "{:?}",
        r.verdict
    );
    let orphan = parse(&SPLIT.replace("SYNC", "barrier_signal -1"));
    let r = check_race_free(&orphan, &interp_only());
    assert!(
        matches!(r.verdict, Verdict::Deadlock(_) | Verdict::Race(_)),
        "{:?}",
        r.verdict
    );
}

const NAMED: &str = r#"
kernel @named(%out: global i32[64]) block(64) {
  group @prod : threads [0, 32)
  shared @s : i32[32]
  %t = tid.x
  %p = in_group @prod
  if %p {
    store @s[%t], %t
    ARRIVE
  } else {
    WAIT
    %i = sub %t, 32
    %x = load @s[%i]
    gstore %out[%t], %x
  }
}
"#;

#[test]
fn named_barrier_producer_consumer() {
    let ok = parse(
        &NAMED
            .replace("ARRIVE", "named_arrive 1, 64")
            .replace("WAIT", "named_sync 1, 64"),
    );
    let r = check_race_free(&ok, &interp_only());
    assert!(r.is_race_free(), "{:?}", r.verdict);
    let out = run(&ok, 0, &opts()).unwrap();
    assert_eq!(out.get("out").unwrap().data[40].as_i64(), 8);
    let bad = parse(&NAMED.replace("ARRIVE", "").replace("WAIT", ""));
    assert!(check_race_free(&bad, &interp_only()).is_race());
    // Too few arrivals: the consumers wait forever.
    let stuck = parse(
        &NAMED
            .replace("ARRIVE", "")
            .replace("WAIT", "named_sync 1, 64"),
    );
    assert!(matches!(
        check_race_free(&stuck, &interp_only()).verdict,
        Verdict::Deadlock(_)
    ));
}

const MBAR: &str = r#"
kernel @mbar(%out: global i32[64]) block(64) {
  group @prod : threads [0, 32)
  shared @s : i32[32]
  shared @m : mbarrier[1]
  %t = tid.x
  %z = cmp eq %t, 0
  if %z {
    mbar_init @m[0], COUNT
  }
  barrier
  %p = in_group @prod
  if %p {
    store @s[%t], %t
    mbar_arrive @m[0]
  } else {
    WAIT
    %i = sub %t, 32
    %x = load @s[%i]
    gstore %out[%t], %x
  }
}
"#;

#[test]
fn mbarrier_arrive_and_parity_wait() {
    let ok = parse(
        &MBAR
            .replace("COUNT", "32")
            .replace("WAIT", "mbar_wait @m[0], 0"),
    );
    let r = check_race_free(&ok, &interp_only());
    assert!(r.is_race_free(), "{:?}", r.verdict);
    let bad = parse(&MBAR.replace("COUNT", "32").replace("WAIT", ""));
    assert!(check_race_free(&bad, &interp_only()).is_race());
    // 64 arrivals expected, 32 come: the parity wait never completes.
    let stuck = parse(
        &MBAR
            .replace("COUNT", "64")
            .replace("WAIT", "mbar_wait @m[0], 0"),
    );
    let r = check_race_free(&stuck, &interp_only());
    assert!(
        matches!(r.verdict, Verdict::Deadlock(ref d) if d.message.contains("mbarrier")),
        "{:?}",
        r.verdict
    );
    // Waiting on the parity of a phase that has not started is immediate: no ordering.
    let wrong = parse(
        &MBAR
            .replace("COUNT", "32")
            .replace("WAIT", "mbar_wait @m[0], 1"),
    );
    assert!(check_race_free(&wrong, &interp_only()).is_race());
}

#[test]
fn mbarrier_init_must_be_ordered_before_use() {
    let src = MBAR
        .replace("COUNT", "32")
        .replace("WAIT", "mbar_wait @m[0], 0")
        .replacen("  barrier\n", "", 1);
    let r = check_race_free(&parse(&src), &interp_only());
    assert!(!r.is_race_free(), "{:?}", r.verdict);
}

const TMA: &str = r#"
kernel @tma(%g: global f32[16, 16], %out: global f32[256]) block(64) {
  shared @s : f32[16, 16]
  shared @m : mbarrier[1]
  %t = tid.x
  %z = cmp eq %t, 0
  if %z {
    mbar_init @m[0], 1
  }
  barrier
  if %z {
    mbar_arrive @m[0] tx 1024
    tma_load @s <- %g[0, 0], @m[0]
  }
  WAIT
  %r = div %t, 4
  %c = rem %t, 4
  %x = load @s[%r, %c]
  gstore %out[%t], %x
}
"#;

#[test]
fn tma_completes_on_the_mbarrier_phase() {
    let ok = parse(&TMA.replace("WAIT", "mbar_wait @m[0], 0"));
    let r = check_race_free(&ok, &interp_only());
    assert!(r.is_race_free(), "{:?}", r.verdict);
    let out = run(&ok, 3, &opts()).unwrap();
    let want = input_element(3, 0, 5 * 16 + 2, smemsync::ir::ElemType::F32);
    assert_eq!(out.get("out").unwrap().data[5 * 4 + 2], want);
    let bad = parse(&TMA.replace("WAIT", ""));
    let r = check_race_free(&bad, &interp_only());
    let w = r.witness().unwrap_or_else(|| panic!("{:?}", r.verdict));
    assert!(w.first.by_engine || w.second.by_engine);
}

const CPASYNC: &str = r#"
kernel @cp(%g: global i32[64], %out: global i32[64]) block(64) {
  shared @s : i32[64]
  %t = tid.x
  cp_async @s[%t] <- %g[%t]
  cp_async_commit
  WAIT
  barrier
  %n = add %t, 1
  %m = rem %n, 64
  %x = load @s[%m]
  gstore %out[%t], %x
}
"#;

#[test]
fn cp_async_needs_a_wait_before_the_barrier() {
    let ok = parse(&CPASYNC.replace("WAIT", "cp_async_wait 0"));
    let r = check_race_free(&ok, &interp_only());
    assert!(r.is_race_free(), "{:?}", r.verdict);
    let out = run(&ok, 5, &opts()).unwrap();
    assert_eq!(
        out.get("out").unwrap().data[3],
        input_element(5, 0, 4, smemsync::ir::ElemType::I32)
    );
    let bad = parse(&CPASYNC.replace("WAIT", ""));
    let r = check_race_free(&bad, &interp_only());
    let w = r
        .witness()
        .unwrap_or_else(|| panic!("a barrier does not complete a copy: {:?}", r.verdict));
    assert!(w.first.by_engine, "{w:?}");
    // Waiting for one group too few leaves the copy in flight.
    let one = parse(&CPASYNC.replace("WAIT", "cp_async_wait 1"));
    assert!(check_race_free(&one, &interp_only()).is_race());
}

const TDM: &str = r#"
kernel @tdm(%g: global f16[32, 64], %out: global f32[64]) block(64) {
  shared @s : f16[2, 32, 32]
  %t = tid.x
  %v = view @s[0]
  %w = view @s[1]
  %tok = tdm_load %v <- %g[0, 0]
  tdm_load %w <- %g[0, 32]
  WAIT
  barrier
  %x = local_load %v layout "dot"
  gstore %out[%t], %x
  waitcnt tensorcnt(0)
}
"#;

#[test]
fn tdm_count_waits_complete_in_order() {
    // tensorcnt(1) completes the older copy into slot 0, which is the one read.
    for wait in [
        "waitcnt tensorcnt(1)",
        "waitcnt tensorcnt(0)",
        "wait_tokens %tok",
    ] {
        let k = parse(&TDM.replace("WAIT", wait));
        let r = check_race_free(&k, &interp_only());
        assert!(r.is_race_free(), "{wait}: {:?}", r.verdict);
    }
    for wait in ["waitcnt tensorcnt(2)", ""] {
        let k = parse(&TDM.replace("WAIT", wait));
        assert!(check_race_free(&k, &interp_only()).is_race(), "{wait}");
    }
}

#[test]
fn gather_to_lds_is_counted_by_the_targets_counter() {
    let src = r#"
kernel @g2l(%g: global i32[64], %out: global i32[64]) block(64) {
  shared @s : i32[64]
  %t = tid.x
  gather_to_lds @s[%t] <- %g[%t]
  WAIT
  barrier
  %n = add %t, 1
  %m = rem %n, 64
  %x = load @s[%m]
  gstore %out[%t], %x
}
"#;
    let generic = parse(&src.replace("WAIT", "waitcnt vmcnt(0)"));
    assert!(check_race_free(&generic, &interp_only()).is_race_free());
    // On gfx1250 the copy is counted by asynccnt: a vmcnt wait does not complete it.
    assert!(check_race_free(&generic, &with_target("gfx1250")).is_race());
    let k = parse(&src.replace("WAIT", "waitcnt asynccnt(0)"));
    assert!(check_race_free(&k, &with_target("gfx1250")).is_race_free());
}

#[test]
fn barrier_under_thread_dependent_if_deadlocks() {
    let src = r#"
kernel @dl(%out: global i32[64]) block(64) {
  %t = tid.x
  %c = cmp lt %t, 16
  if %c {
    barrier
  }
  gstore %out[%t], %t
}
"#;
    let r = check_race_free(&parse(src), &opts());
    let Verdict::Deadlock(d) = &r.verdict else {
        panic!("{:?}", r.verdict)
    };
    assert_eq!(d.code, "C0002");
    assert!(d.message.contains("16 of 64"), "{}", d.message);
    let div = src.replace(
        "    barrier\n  }",
        "    barrier\n  } else {\n    barrier\n  }",
    );
    let r = check_race_free(&parse(&div), &opts());
    assert!(
        matches!(r.verdict, Verdict::Deadlock(ref d) if d.code == "C0003"),
        "{:?}",
        r.verdict
    );
}

/// The execution errors of the interpreter: (kernel, code, line of the op the error names).
const EXEC_ERRORS: [(&str, &str, usize); 3] = [
    (
        r#"
kernel @oob(%out: global i32[64]) block(64) {
  shared @s : i32[64]
  %t = tid.x
  %u = add %t, 1
  store @s[%u], %t
}
"#,
        "C0004",
        6,
    ),
    (
        r#"
kernel @div0(%out: global i32[64]) block(64) {
  %t = tid.x
  %q = div 10, %t
  gstore %out[%t], %q
}
"#,
        "C0005",
        4,
    ),
    (
        r#"
kernel @uninit(%out: global i32[64]) block(64) {
  shared @s : i32[64]
  %t = tid.x
  %x = load @s[%t]
  gstore %out[%t], %x
}
"#,
        "C0006",
        5,
    ),
];

#[test]
fn execution_errors_carry_their_code_and_the_op_span() {
    for (src, code, line) in EXEC_ERRORS {
        let r = check_race_free(&parse(src), &interp_only());
        let Verdict::ExecError(d) = &r.verdict else {
            panic!("{code}: {:?}", r.verdict)
        };
        assert_eq!(d.code, code, "{d:?}");
        assert_eq!(
            line_number(src, d.primary_span().unwrap()),
            Some(line),
            "{code}"
        );
    }
}

#[test]
fn outstanding_copy_at_exit_is_reported() {
    let src = CPASYNC
        .replace("WAIT", "")
        .replace("  cp_async_commit\n", "")
        .replace("  barrier\n", "")
        .replace("%x = load @s[%m]", "%x = add %m, 0");
    let r = check_race_free(&parse(&src), &interp_only());
    assert!(
        matches!(r.verdict, Verdict::Deadlock(ref d) if d.code == "C0007"),
        "{:?}",
        r.verdict
    );
}

#[test]
fn every_example_checks_without_internal_errors() {
    let mut n = 0;
    for p in common::kernel_files(&["examples"]) {
        let src = std::fs::read_to_string(&p).expect("read");
        let Ok(m) = smemsync::reader::parse(&src) else {
            continue;
        };
        for k in &m.kernels {
            let o = CheckOptions {
                schedules: 1,
                ..CheckOptions::default()
            };
            let r = check_race_free(k, &o);
            if let Some(d) = r.to_diagnostic(k) {
                assert_ne!(
                    d.kind,
                    smemsync::diag::DiagKind::Verifier,
                    "{}: {}",
                    p.display(),
                    d.message
                );
            }
            n += 1;
        }
    }
    assert!(n >= 2);
}

#[test]
fn a_large_block_with_a_long_loop_checks_quickly() {
    let src = r#"
kernel @big(%out: global f32[1024]) block(1024) {
  shared @s : f32[2, 1024]
  %t = tid.x
  %acc = for %i = 0 to 200 step 1 iter(%a = 0.0) {
    %slot = rem %i, 2
    %v = view @s[%slot]
    %f = itof %i
    store %v[%t], %f
    barrier
    %n = add %t, 7
    %m = rem %n, 1024
    %x = load %v[%m]
    %b = add %a, %x
    yield %b
  }
  gstore %out[%t], %acc
}
"#;
    let k = parse(src);
    let t = std::time::Instant::now();
    let r = check_race_free(
        &k,
        &CheckOptions {
            schedules: 1,
            try_proof: false,
            ..CheckOptions::default()
        },
    );
    assert!(r.is_race_free(), "{:?}", r.verdict);
    // Debug builds are ~20x slower than release; this bounds both loosely.
    assert!(t.elapsed().as_secs() < 30, "{:?}", t.elapsed());
}

const MULTI: &str = r#"
kernel @multi(%in: global f32[128], %out: global f32[128], %n: i32) block(128) {
  shared @s : f32[SLOTS, 128]
  %t = tid.x
  %acc = for %i = 0 to %n step STEP iter(%a = 0.0) {
    %p = add %i, PROD
    %ps = rem %p, SLOTS
    %cs = rem %i, SLOTS
    %pv = view @s[%ps]
    %cv = view @s[%cs]
    %x = gload %in[%t]
    store %pv[%t], %x
    BARRIER
    %u = sub 127, %t
    %y = load %cv[%u]
    %b = add %a, %y
    yield %b
  }
  gstore %out[%t], %acc
}
"#;

fn multi(slots: u32, step: u32, prod: u32, barrier: bool) -> Kernel {
    parse(
        &MULTI
            .replace("SLOTS", &slots.to_string())
            .replace("STEP", &step.to_string())
            .replace("PROD", &prod.to_string())
            .replace("BARRIER", if barrier { "barrier" } else { "" }),
    )
}

#[test]
fn static_proof_uses_loop_carried_distance_and_agrees_with_interpretation() {
    // (slots, step, producer offset, barrier, expected race-free)
    let cases = [
        (2, 1, 0, true, true),  // double buffer, one barrier per iteration
        (2, 2, 0, true, false), // step 2: every iteration uses slot 0 again
        (3, 1, 0, true, true),
        (1, 1, 0, true, false), // one slot: tail load of i against head store of i+1
        (2, 1, 1, true, false), // store to the slot read after the barrier of the next iteration
        (3, 1, 1, false, false),
        (2, 1, 0, false, false),
    ];
    for (slots, step, prod, barrier, free) in cases {
        let k = multi(slots, step, prod, barrier);
        let proved = smemsync::check::proof::prove(&k, None).is_ok();
        let o = CheckOptions {
            bounds: vec![("n".into(), 6)],
            ..interp_only()
        };
        let r = check_race_free(&k, &o);
        assert_eq!(
            r.is_race_free(),
            free,
            "case {slots},{step},{prod},{barrier}: {:?}",
            r.verdict
        );
        if proved {
            assert!(
                free,
                "case {slots},{step},{prod},{barrier}: proved a racy kernel"
            );
        }
        if free && (slots, step, prod) == (2, 1, 0) {
            assert!(proved, "the double buffer should be proved");
        }
    }
}

#[test]
fn warp_sync_orders_within_a_warp_only() {
    let src = r#"
kernel @warp(%out: global i32[64]) block(64) {
  shared @s : i32[64]
  %t = tid.x
  store @s[%t], %t
  warp_sync
  %n = add %t, OFF
  %m = rem %n, 64
  %x = load @s[%m]
  gstore %out[%t], %x
}
"#;
    // Lane t reads lane t^1's element: inside the warp.
    let inside = parse(
        &src.replace("OFF", "0")
            .replace("%n = add %t, 0", "%n = xor %t, 1"),
    );
    assert!(check_race_free(&inside, &interp_only()).is_race_free());
    // Thread t reads thread t+32's element: another warp (32-wide in the generic model).
    let across = parse(&src.replace("OFF", "32"));
    assert!(check_race_free(&across, &interp_only()).is_race());
    // With 64-wide wavefronts (gfx942) the same exchange is inside one wavefront.
    assert!(check_race_free(&across, &with_target("gfx942")).is_race_free());
}

#[test]
fn interpreter_arithmetic_follows_the_ir_semantics() {
    let src = r#"
kernel @arith(%out: global i32[16], %f: global f16[2], %b: global i8[1]) block(1) {
  %a = const -7 : i32
  %d = div %a, 2
  gstore %out[0], %d
  %r = rem %a, 3
  gstore %out[1], %r
  %s = shl 1, 33
  gstore %out[2], %s
  %h = shr %a, 1
  gstore %out[3], %h
  %x = const 2.75 : f32
  %i = ftoi %x
  gstore %out[4], %i
  %c = compute "opaque"(%a, %x) : i32
  gstore %out[5], %c
  %c2, %c3 = compute "two"(%a, %a) : i32, i32
  gstore %out[6], %c3
  %k = while iter(%n = 0) {
    %go = cmp lt %n, 5
    condition %go
  } do (%m) {
    %m2 = add %m, 2
    yield %m2
  }
  gstore %out[7], %k
  %t = cmp gt %k, 5
  %sel = if %t {
    yield 11
  } else {
    yield 12
  }
  gstore %out[8], %sel
  %big = const 1.00048828125 : f32
  gstore %f[0], %big
  %e = const 65536.0 : f32
  gstore %f[1], %e
  gstore %b[0], 200
}
"#;
    let k = parse(src);
    let out = run(&k, 0, &opts()).unwrap_or_else(|d| panic!("{}", d.render("t", src, false)));
    let o: Vec<i64> = out
        .get("out")
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_i64())
        .collect();
    assert_eq!(o[0], -4, "floor division");
    assert_eq!(o[1], 2, "floor remainder is in [0, 3)");
    assert_eq!(o[2], 2, "shift amount modulo 32");
    assert_eq!(o[3], -4, "arithmetic shift right");
    assert_eq!(o[4], 2, "ftoi truncates");
    assert_eq!(
        o[5],
        -7 + 2,
        "compute: sum of the arguments as i32 (ftoi) plus 0"
    );
    assert_eq!(o[6], -14 + 1, "compute result 1: sum plus 1");
    assert_eq!(o[7], 6, "while: 0, 2, 4, 6 stops");
    assert_eq!(o[8], 11);
    let f: Vec<f32> = out
        .get("f")
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_f32())
        .collect();
    assert_eq!(f[0], 1.0, "f16 rounds to nearest even");
    assert!(f[1].is_infinite(), "f16 overflows to infinity");
    assert_eq!(
        out.get("b").unwrap().data[0].as_i64(),
        -56,
        "i8 stores wrap"
    );
}

#[test]
fn inputs_follow_the_documented_generator() {
    // splitmix64 test vector (seed 0 gives 0xE220A8397B1DCDAF).
    assert_eq!(smemsync::check::splitmix64(0), 0xE220_A839_7B1D_CDAF);
    for i in 0..100 {
        let v = input_element(1, 2, i, smemsync::ir::ElemType::I32).as_i64();
        assert!((-8..=8).contains(&v));
        let f = input_element(1, 2, i, smemsync::ir::ElemType::F32).as_f32();
        assert!((-1.0..1.0).contains(&f));
    }
}

const WGMMA: &str = r#"
kernel @mma(%out: global f32[64]) block(64) {
  shared @a : f32[8, 8]
  shared @b : f32[8, 8]
  %t = tid.x
  %r = div %t, 8
  %c = rem %t, 8
  %f = itof %t
  store @a[%r, %c], %f
  store @b[%r, %c], 1.0
  fence_proxy_async
  barrier
  %d = wgmma @a, @b, 0.0
  wgmma_commit
  WAIT
  store @a[%r, %c], 0.0
  gstore %out[%t], %d
}
"#;

#[test]
fn wgmma_reads_its_operands_until_wgmma_wait() {
    let ok = parse(&WGMMA.replace("WAIT", "wgmma_wait 0\n  barrier"));
    let r = check_race_free(&ok, &with_target("sm_90"));
    assert!(r.is_race_free(), "{:?}", r.verdict);
    let out = run(&ok, 0, &opts()).unwrap();
    // acc + sum(a) + sum(b) = 0 + (0 + ... + 63) + 64.
    assert_eq!(out.get("out").unwrap().data[5].as_f32(), 2016.0 + 64.0);
    // Overwriting an operand before the wait races with the engine's read.
    let bad = parse(&WGMMA.replace("WAIT", "barrier"));
    let r = check_race_free(&bad, &with_target("sm_90"));
    let w = r.witness().unwrap_or_else(|| panic!("{:?}", r.verdict));
    assert!(
        w.first.by_engine && w.first.kind == smemsync::check::AccKind::AsyncRead,
        "{w:?}"
    );
    assert!(!w.missing_fence, "{w:?}");
    // Without the proxy fence the stores are ordered before the wgmma by the barrier but
    // not made visible to the async proxy: a missing fence naming the store and the wgmma.
    let unfenced = parse(
        &WGMMA
            .replace("WAIT", "wgmma_wait 0\n  barrier")
            .replace("  fence_proxy_async\n", ""),
    );
    let r = check_race_free(&unfenced, &with_target("sm_90"));
    let w = r.witness().unwrap_or_else(|| panic!("{:?}", r.verdict));
    assert!(w.missing_fence, "{w:?}");
    assert_eq!(w.first.kind, smemsync::check::AccKind::Write, "{w:?}");
    assert!(w.second.by_engine && w.second.kind == smemsync::check::AccKind::AsyncRead);
}

const TMA_STORE: &str = r#"
kernel @st(%g: global f32[8, 8]) block(64) {
  shared @s : f32[8, 8]
  %t = tid.x
  %r = div %t, 8
  %c = rem %t, 8
  %f = itof %t
  store @s[%r, %c], %f
  fence_proxy_async
  barrier
  %z = cmp eq %t, 0
  if %z {
    tma_store %g[0, 0] <- @s
    bulk_commit
    WAIT
  }
  barrier
  store @s[%r, %c], 0.0
}
"#;

#[test]
fn tma_store_reads_shared_memory_until_bulk_wait() {
    let ok = parse(&TMA_STORE.replace("WAIT", "bulk_wait 0"));
    let r = check_race_free(&ok, &with_target("sm_90"));
    assert!(r.is_race_free(), "{:?}", r.verdict);
    let out = run(&ok, 0, &opts()).unwrap();
    let g: Vec<f32> = out
        .get("g")
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_f32())
        .collect();
    assert_eq!(g[9], 9.0);
    let bad = parse(&TMA_STORE.replace("WAIT", ""));
    let r = check_race_free(&bad, &with_target("sm_90"));
    // Without the wait the copy is still reading when others overwrite (or at exit).
    assert!(!r.is_race_free(), "{:?}", r.verdict);
}

#[test]
fn the_static_proof_never_contradicts_interpretation_on_the_examples() {
    for p in common::kernel_files(&["examples"]) {
        let src = std::fs::read_to_string(&p).expect("read");
        let Ok(m) = smemsync::reader::parse(&src) else {
            continue;
        };
        for k in &m.kernels {
            if smemsync::check::proof::prove(k, None).is_ok() {
                let r = check_race_free(
                    k,
                    &CheckOptions {
                        schedules: 2,
                        ..interp_only()
                    },
                );
                assert!(
                    !r.is_race(),
                    "{}: proved, but interpretation finds {:?}",
                    p.display(),
                    r.verdict
                );
            }
        }
    }
}

/// Role-relative layouts (docs/ir.md): role @p1 (block threads 128..256) stores a tile under a
/// blocked layout bound to it, role @p0 (threads 0..128) under an opaque layout bound to it.
/// Every element is written by exactly the block thread that the layout, offset by the
/// group's first thread, gives it: `local_store` writes `tid + e`, so the value read back
/// names the writer.
const ROLE_TILES: &str = r#"
kernel @roles(%oa: global i32[2048], %ob: global i32[2048]) block(256) {
  group @p0 : threads [0, 128)
  group @p1 : threads [128, 256)
  layout "row" = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
  layout "any_p0" in @p0
  layout "row_p1" in @p1 = #row
  shared @a : i32[64, 32]
  shared @b : i32[64, 32]
  %t = tid.x
  %in0 = in_group @p0
  if %in0 {
    local_store @a, %t layout "any_p0"
  } else {
    local_store @b, %t layout "row_p1"
  }
  barrier
  for %j = 0 to 8 step 1 {
    %e0 = mul %t, 8
    %e = add %e0, %j
    %r = div %e, 32
    %c = rem %e, 32
    %x = load @a[%r, %c]
    gstore %oa[%e], %x
    %y = load @b[%r, %c]
    gstore %ob[%e], %y
  }
}
"#;

#[test]
fn role_relative_collectives_write_exactly_their_groups_elements() {
    use smemsync::check::Val;
    let k = parse(ROLE_TILES);
    let out = run(&k, 3, &interp_only()).expect("runs");
    let (a, b) = (out.get("oa").unwrap(), out.get("ob").unwrap());
    for e in 0..2048i32 {
        let (r, c) = (e / 32, e % 32);
        // `row` by hand: lanes take column bits 4, 8, 16 (4 columns a thread) then row bits
        // 1, 2; warps take row bits 4, 8.
        let lane = (r % 4) * 8 + (c / 4) % 8;
        let warp = (r / 4) % 4;
        let writer_b = 128 + warp * 32 + lane;
        assert_eq!(b.data[e as usize], Val::I32(writer_b + e), "@b element {e}");
        // The opaque layout, numbered 0 (first used): owner(e) = 0 + (e + 0) mod 128.
        let writer_a = e % 128;
        assert_eq!(a.data[e as usize], Val::I32(writer_a + e), "@a element {e}");
    }
    // The same kernel is race-free (the barrier orders the roles' stores before the loads).
    let r = check_race_free(&k, &opts());
    assert!(
        matches!(r.verdict, Verdict::Proved { .. } | Verdict::Checked { .. }),
        "{:?}",
        r.verdict
    );
}
