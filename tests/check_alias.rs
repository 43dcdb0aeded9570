//! Aliasing shared buffers in the interpreter: pinned buffers whose byte ranges overlap share
//! bytes (one byte array per block), element stores encode to the element type's bytes and
//! loads decode them, and "initialized" is tracked per byte. Also end to end: every example
//! planned with `plan-smem` (which makes buffers with disjoint lifetimes alias), then
//! synchronized, is race-free and computes what the unplanned synchronized kernel computes.

use std::path::Path;

use smemsync::check::{CheckOptions, Verdict, check_race_free, input_element, run};
use smemsync::ir::{ElemType, Kernel, f16_bits_to_f32, f32_to_f16_bits};
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;
use smemsync::transform::smem_plan::plan_shared_memory;

mod common;
use common::parse_verified as parse;

fn opts() -> CheckOptions {
    CheckOptions::default()
}

fn with_target(t: &str) -> CheckOptions {
    CheckOptions {
        target: Some(Target::from_name(t).expect("target")),
        ..CheckOptions::default()
    }
}

fn f32s(k: &Kernel, name: &str, o: &CheckOptions) -> Vec<f32> {
    let out = run(k, 0, o).unwrap_or_else(|d| panic!("run: {d:?}"));
    out.get(name)
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_f32())
        .collect()
}

fn i32s(k: &Kernel, name: &str, o: &CheckOptions) -> Vec<i32> {
    let out = run(k, 0, o).unwrap_or_else(|d| panic!("run: {d:?}"));
    out.get(name)
        .unwrap()
        .data
        .iter()
        .map(|v| v.as_i64() as i32)
        .collect()
}

fn assert_race_free(k: &Kernel, o: &CheckOptions) {
    let r = check_race_free(k, o);
    assert!(r.is_race_free(), "{:?}", r.verdict);
}

fn assert_uninit(k: &Kernel) {
    let interp = CheckOptions {
        try_proof: false,
        ..CheckOptions::default()
    };
    let r = check_race_free(k, &interp);
    assert!(
        matches!(r.verdict, Verdict::ExecError(ref d) if d.code == "C0006"),
        "{:?}",
        r.verdict
    );
    let e = run(k, 0, &opts()).expect_err("uninitialized read");
    assert_eq!(e.code, "C0006");
}

const ALIAS: &str = r#"
kernel @alias(%out: global OUT[4]) block(4) {
  shared @a : f32[4] at 0
  shared @b : BTYPE[4] at 0
  %t = tid.x
  %f = itof %t
  %x = add %f, 0.5
  store @a[%t], %x
  BARRIER
  %r = sub 3, %t
  %y = load @b[%r]
  gstore %out[%t], %y
}
"#;

fn alias(out: &str, b: &str, barrier: bool) -> Kernel {
    parse(
        &ALIAS
            .replace("OUT", out)
            .replace("BTYPE", b)
            .replace("BARRIER", if barrier { "barrier" } else { "" }),
    )
}

#[test]
fn a_load_through_an_alias_reads_what_the_other_buffer_stored() {
    let k = alias("f32", "f32", true);
    assert_race_free(&k, &opts());
    let got = f32s(&k, "out", &opts());
    assert_eq!(got, vec![3.5, 2.5, 1.5, 0.5]);
}

#[test]
fn an_alias_of_another_element_type_reads_the_reinterpreted_bits() {
    let k = alias("i32", "i32", true);
    assert_race_free(&k, &opts());
    let got = i32s(&k, "out", &opts());
    let want: Vec<i32> = [3.5f32, 2.5, 1.5, 0.5]
        .iter()
        .map(|f| f.to_bits() as i32)
        .collect();
    assert_eq!(got, want);

    // And the other way: integer stores read back as floats.
    let k = parse(
        r#"
kernel @bits(%out: global f32[4]) block(4) {
  shared @w : i32[4] at 0
  shared @f : f32[4] at 0
  %t = tid.x
  %x = add %t, 1065353216
  store @w[%t], %x
  barrier
  %y = load @f[%t]
  gstore %out[%t], %y
}
"#,
    );
    let got = f32s(&k, "out", &opts());
    let want: Vec<f32> = (0..4).map(|t| f32::from_bits(0x3f80_0000 + t)).collect();
    assert_eq!(got, want);
}

#[test]
fn partially_overlapping_buffers_share_exactly_the_overlapping_bytes() {
    // @b is the upper half of @a, @w its first four elements' bits, @h the f16 halves of
    // those, @c the bytes of @a[7]; @d does not overlap @a at all.
    let k = parse(
        r#"
kernel @partial(%b: global f32[4], %w: global i32[4], %h: global f32[8], %c: global i32[4], %d: global f32[8]) block(8) {
  shared @a : f32[8] at 0
  shared @bb : f32[4] at 16
  shared @ww : i32[4] at 0
  shared @hh : f16[8] at 0
  shared @cc : i8[4] at 28
  shared @dd : f32[8] at 32
  %t = tid.x
  %f = itof %t
  %x = add %f, 1.0
  store @a[%t], %x
  %nx = neg %x
  store @dd[%t], %nx
  barrier
  %lt4 = cmp lt %t, 4
  if %lt4 {
    %y = load @bb[%t]
    gstore %b[%t], %y
    %z = load @ww[%t]
    gstore %w[%t], %z
    %q = load @cc[%t]
    gstore %c[%t], %q
  }
  %hv = load @hh[%t]
  gstore %h[%t], %hv
  %dv = load @dd[%t]
  gstore %d[%t], %dv
}
"#,
    );
    assert_race_free(&k, &opts());
    let a: Vec<f32> = (1..=8).map(|i| i as f32).collect();
    assert_eq!(f32s(&k, "b", &opts()), a[4..].to_vec());
    let bits: Vec<i32> = a[..4].iter().map(|f| f.to_bits() as i32).collect();
    assert_eq!(i32s(&k, "w", &opts()), bits);
    let halves: Vec<f32> = (0..8)
        .map(|i| {
            let word = a[i / 2].to_bits();
            f16_bits_to_f32((word >> (16 * (i % 2))) as u16)
        })
        .collect();
    assert_eq!(f32s(&k, "h", &opts()), halves);
    // 1.0 is 0x3f80_0000: its low half is f16 +0, its high half 0x3f80 is f16 1.875.
    assert_eq!(halves[0], 0.0);
    assert_eq!(halves[1], 1.875);
    // 8.0 is 0x4100_0000, little-endian bytes 00 00 00 41.
    assert_eq!(i32s(&k, "c", &opts()), vec![0, 0, 0, 0x41]);
    assert_eq!(
        f32s(&k, "d", &opts()),
        a.iter().map(|x| -x).collect::<Vec<_>>()
    );
}

const HALVES: &str = r#"
kernel @halves(%out: global f32[1]) block(2) {
  shared @a : f32[1] at 0
  shared @h : f16[2] at 0
  %t = tid.x
  %z = cmp eq %t, 0
  %one = cmp eq %t, 1
  %v = select %one, 1.0, 2.0
  GUARD
  store @h[%t], %v
  END
  barrier
  if %z {
    %y = load @a[0]
    gstore %out[0], %y
  }
}
"#;

#[test]
fn an_element_is_initialized_only_when_all_its_bytes_were_written() {
    // Both halves written: the f32 is their concatenation (low half first).
    let k = parse(&HALVES.replace("GUARD", "").replace("END", ""));
    assert_race_free(&k, &opts());
    let want = f32::from_bits(((f32_to_f16_bits(1.0) as u32) << 16) | f32_to_f16_bits(2.0) as u32);
    assert_eq!(f32s(&k, "out", &opts()), vec![want]);
    assert_eq!(want.to_bits(), 0x3c00_4000);
    // Only the low half written: the f32 read is uninitialized.
    let k = parse(&HALVES.replace("GUARD", "if %z {").replace("END", "}"));
    assert_uninit(&k);
}

#[test]
fn unpinned_buffers_never_alias_pinned_ones() {
    let src = r#"
kernel @sep(%out: global f32[8]) block(4) {
  shared @a : f32[4] at 0
  shared @u : f32[4]
  shared @v : f32[4]
  %t = tid.x
  %f = itof %t
  store @a[%t], %f
  STORE_U
  barrier
  %x = load @u[%t]
  %y = load @v[%t]
  %s = add %t, 4
  gstore %out[%t], %x
  gstore %out[%s], %y
}
"#;
    let k = parse(&src.replace(
        "STORE_U",
        "%g = add %f, 10.0\n  store @u[%t], %g\n  %h = add %f, 20.0\n  store @v[%t], %h",
    ));
    assert_race_free(&k, &opts());
    assert_eq!(
        f32s(&k, "out", &opts()),
        vec![10.0, 11.0, 12.0, 13.0, 20.0, 21.0, 22.0, 23.0]
    );
    // Stores through @a do not initialize the unpinned @u.
    assert_uninit(&parse(&src.replace("STORE_U", "")));
}

#[test]
fn the_race_detector_still_sees_accesses_through_aliases() {
    // Same bytes through two names, no barrier.
    for (out, b) in [("f32", "f32"), ("i32", "i32")] {
        let k = alias(out, b, false);
        let r = check_race_free(&k, &opts());
        let w = r
            .witness()
            .unwrap_or_else(|| panic!("expected a race, got {:?}", r.verdict));
        assert_ne!(w.first.thread, w.second.thread);
        assert!(["a", "b"].contains(&w.buffer.as_str()), "{w:?}");
    }
    // Partial overlap: thread t < 4 reads @b[t] = @a[t + 4], which thread t + 4 writes.
    let src = r#"
kernel @p(%out: global f32[8]) block(8) {
  shared @a : f32[8] at 0
  shared @b : f32[4] at OFF
  %t = tid.x
  %f = itof %t
  store @a[%t], %f
  %lt4 = cmp lt %t, 4
  if %lt4 {
    store @b[%t], %f
  }
}
"#;
    assert!(
        check_race_free(&parse(&src.replace("OFF", "16")), &opts()).is_race(),
        "overlapping"
    );
    assert_race_free(&parse(&src.replace("OFF", "32")), &opts());
}

#[test]
fn async_copies_write_through_the_block_byte_array() {
    // cp.async into an i32 buffer, read back through an f32 alias.
    let k = parse(
        r#"
kernel @cp(%g: global i32[64], %out: global f32[64]) block(64) {
  shared @s : i32[64] at 0
  shared @f : f32[64] at 0
  %t = tid.x
  cp_async @s[%t] <- %g[%t]
  cp_async_commit
  cp_async_wait 0
  barrier
  %n = add %t, 1
  %m = rem %n, 64
  %x = load @f[%m]
  gstore %out[%t], %x
}
"#,
    );
    assert_race_free(&k, &with_target("sm_90"));
    let out = run(&k, 5, &opts()).unwrap();
    for t in 0..64u64 {
        let want = input_element(5, 0, (t + 1) % 64, ElemType::I32).as_i64() as i32;
        assert_eq!(
            out.get("out").unwrap().data[t as usize].as_f32().to_bits(),
            want as u32,
            "t={t}"
        );
    }

    // A TDM tile of f16 read as i32 pairs.
    let k = parse(
        r#"
kernel @tdm(%g: global f16[32, 64], %out: global i32[64]) block(64) {
  shared @s : f16[2, 32, 32] at 0
  shared @w : i32[512] at 0
  %t = tid.x
  %v = view @s[0]
  tdm_load %v <- %g[0, 0]
  waitcnt tensorcnt(0)
  barrier
  %x = load @w[%t]
  gstore %out[%t], %x
}
"#,
    );
    assert_race_free(&k, &opts());
    let out = run(&k, 2, &opts()).unwrap();
    let half = |e: u64| {
        let (r, c) = (e / 32, e % 32);
        f32_to_f16_bits(input_element(2, 0, r * 64 + c, ElemType::F16).as_f32()) as u32
    };
    for t in 0..64u64 {
        let want = (half(2 * t) | (half(2 * t + 1) << 16)) as i32;
        assert_eq!(
            out.get("out").unwrap().data[t as usize].as_i64() as i32,
            want,
            "t={t}"
        );
    }

    // A TMA tile read through an alias with another shape; the mbarrier holds no data.
    let k = parse(
        r#"
kernel @tma(%g: global f32[16, 16], %out: global f32[256]) block(64) {
  shared @s : f32[16, 16] at 0
  shared @flat : f32[256] at 0
  shared @m : mbarrier[1] at 1024
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
  mbar_wait @m[0], 0
  %e = mul %t, 3
  %x = load @flat[%e]
  gstore %out[%t], %x
}
"#,
    );
    assert_race_free(&k, &with_target("sm_90"));
    let out = run(&k, 3, &opts()).unwrap();
    for t in 0..64u64 {
        assert_eq!(
            out.get("out").unwrap().data[t as usize],
            input_element(3, 0, 3 * t, ElemType::F32),
            "t={t}"
        );
    }
}

#[test]
fn the_collective_misc_gpu_kernel_runs_and_reads_the_aliased_bytes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gpu/collective-misc.kir");
    let k = parse(&std::fs::read_to_string(path).expect("read"));
    assert_race_free(&k, &opts());
    let out = run(&k, 0, &opts()).unwrap_or_else(|d| panic!("run: {d:?}"));
    // @a is written by `local_store ... layout "blocked"` (layout 0: element e from thread e,
    // value x[e] + e); @alias is read under layout 1, so thread t sums element t - 1 alone.
    // Threads t >= 8 store that value.
    for t in 8..64u64 {
        let e = t - 1;
        let want = input_element(0, 0, e, ElemType::F32).as_f32() + e as f32;
        assert_eq!(
            out.get("out").unwrap().data[t as usize].as_f32(),
            want,
            "t={t}"
        );
    }
}

// ------------------------------------------------------------------ plan-smem end to end

/// Sequential phases through buffers of different element types: `plan-smem` puts all three
/// at offset 0, so each phase overwrites the bytes the previous one read.
const PHASES: &str = r#"
kernel @phases(%in: global f32[64], %iout: global i32[64], %out: global f32[64]) block(64) {
  shared @a : f32[64]
  shared @b : i32[64]
  shared @c : f16[64]
  %t = tid.x
  %r = sub 63, %t
  %x = gload %in[%t]
  store @a[%t], %x
  %y = load @a[%r]
  %s = mul %y, 100.0
  %i = ftoi %s
  store @b[%t], %i
  %j = load @b[%r]
  gstore %iout[%t], %j
  %f = itof %j
  store @c[%t], %f
  %z = load @c[%r]
  gstore %out[%t], %z
}
"#;

fn examples() -> Vec<(String, Kernel)> {
    let mut v: Vec<(String, Kernel)> = common::kernel_files(&["examples"])
        .iter()
        .map(|p| {
            let src = std::fs::read_to_string(p).expect("read");
            let k = smemsync::reader::parse_kernel(&src).expect("example parses");
            (p.file_name().unwrap().to_string_lossy().into_owned(), k)
        })
        .collect();
    v.push(("phases".into(), parse(PHASES)));
    v
}

#[test]
fn planned_then_synchronized_examples_are_race_free_and_compute_the_same() {
    let target = Target::from_name("gfx942").expect("target");
    let copts = CheckOptions {
        target: Some(target),
        schedules: 2,
        ..CheckOptions::default()
    };
    let popts = PlaceOptions::default();
    let mut compared = 0;
    let mut aliased = 0;
    for (name, k) in examples() {
        let Ok(plain) = synchronize(&k, &target, &popts) else {
            // The placer refuses this kernel for this target whether planned or not.
            continue;
        };
        let plan = plan_shared_memory(&k);
        assert!(
            smemsync::verify::verify(&plan.kernel).is_empty(),
            "{name}: planned kernel does not verify"
        );
        let overlap = plan.placements.iter().enumerate().any(|(i, a)| {
            plan.placements[i + 1..].iter().any(|b| {
                k.buffers[a.buffer].elem != ElemType::MBarrier
                    && k.buffers[b.buffer].elem != ElemType::MBarrier
                    && a.offset < b.offset + b.bytes
                    && b.offset < a.offset + a.bytes
            })
        });
        aliased += overlap as usize;
        let planned = synchronize(&plan.kernel, &target, &popts)
            .unwrap_or_else(|e| panic!("{name}: sync refuses the planned kernel: {e:?}"));
        let r = check_race_free(&planned.kernel, &copts);
        assert!(
            r.is_race_free(),
            "{name}: planned + synced: {:?}",
            r.verdict
        );
        for seed in [0, 7] {
            let want = run(&plain.kernel, seed, &copts)
                .unwrap_or_else(|d| panic!("{name}: run synced: {d:?}"));
            let got = run(&planned.kernel, seed, &copts)
                .unwrap_or_else(|d| panic!("{name}: run planned + synced: {d:?}"));
            assert_eq!(got, want, "{name}: seed {seed}");
        }
        compared += 1;
    }
    assert!(compared >= 10, "only {compared} examples compared");
    assert!(aliased >= 1, "no planned kernel reuses bytes");
}

#[test]
fn the_phases_kernel_reuses_bytes_across_element_types() {
    let k = parse(PHASES);
    let plan = plan_shared_memory(&k);
    assert!(plan.peak < plan.peak_before, "{plan:?}");
    assert!(plan.placements.iter().all(|p| p.offset == 0), "{plan:?}");
    let target = Target::from_name("gfx942").expect("target");
    let planned = synchronize(&plan.kernel, &target, &PlaceOptions::default()).expect("sync");
    let copts = CheckOptions {
        target: Some(target),
        ..CheckOptions::default()
    };
    assert_race_free(&planned.kernel, &copts);
    // Without the placer's barriers the reuse races.
    assert!(check_race_free(&plan.kernel, &copts).is_race());
    let out = run(&planned.kernel, 1, &copts).unwrap();
    // iout[t] = ftoi(in[t] * 100); out[t] = f16(iout[63 - t]).
    let scaled = |t: u64| (input_element(1, 0, t, ElemType::F32).as_f32() * 100.0) as i32;
    for t in 0..64u64 {
        let got = out.get("iout").unwrap().data[t as usize].as_i64() as i32;
        assert_eq!(got, scaled(t), "t={t}");
        let h = f16_bits_to_f32(f32_to_f16_bits(scaled(63 - t) as f32));
        assert_eq!(
            out.get("out").unwrap().data[t as usize].as_f32(),
            h,
            "t={t}"
        );
    }
}
