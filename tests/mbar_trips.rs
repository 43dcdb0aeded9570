//! The every-trip-count argument of `analysis::mbar_protocol` (its child `mbar_trips`,
//! docs/async.md "For every trip count"): a wait that depends on a parameter without a
//! declared range through Triton's trip count `(%K + 63) div 64` is verified for every `%K`
//! (no W0318) only where the premises hold, and the interpreter agrees at trip counts below
//! and above `T0`, zero, a negative `%K`, values of `%K` that are not multiples of 64, and
//! trip counts that are not multiples of the period.
//!
//! The family: Triton's single-role TMA pipeline of `S` slots — a prologue loading slots
//! `0 … S − 2` under `T > j`, a loop whose iteration values are the slot and phase it waits on
//! (`select (s + 1 ≥ S) 0 (s + 1)`, the phase flipped on the wrap) and the slot it refills
//! under `i < T − (S − 1)` — and mutants that break one premise each: the slot read from the
//! counter (premise 2), an iteration value reading `T` (premise 1), a phase that never flips
//! (an odd number of phases per period: E0306 from the search), and a count of 2 for one
//! arrival per use (E0306). Debug-build time: about 1.5 s of CPU (the interpreter runs one
//! schedule per kernel and trip count).

mod common;

use smemsync::check::Verdict;
use smemsync::ir::Kernel;
use smemsync::target::Target;

/// The pipeline of `s` slots with one premise broken by `mutant` ("" for none).
fn pipeline(s: u32, mutant: &str) -> String {
    let count = if mutant == "count" { 2 } else { 1 };
    let inits: String = (0..s)
        .map(|j| format!("    mbar_init @full[{j}], {count}\n"))
        .collect();
    let pro: String = (0..s - 1)
        .map(|j| {
            format!(
                "  %g{j} = cmp gt %T, {j}\n  %e{j} = and %el, %g{j}\n  if %e{j} {{\n    %v{j} = view @buf[{j}]\n    mbar_arrive @full[{j}] tx 256\n    tma_load %v{j} <- %X[{j}, 0], @full[{j}]\n  }}\n"
            )
        })
        .collect();
    let wrap = match mutant {
        "reads-trip" => {
            "    %sT = add %s1, %T\n    %sU = sub %sT, %T\n    %w = cmp ge %sU, {S}\n".to_string()
        }
        _ => "    %w = cmp ge %s1, {S}\n".to_string(),
    };
    let slot = match mutant {
        "counter" => "    %cs = rem %i, {S}\n".to_string(),
        _ => "    %cs = select %w, 0, %s1\n".to_string(),
    };
    let par = match mutant {
        "odd" => "    %par = select %w, %ph, %ph\n",
        _ => "    %par = select %w, %ph1, %ph\n",
    };
    let body = format!(
        "    %s1 = add %s, 1\n{wrap}{slot}    %ph1 = xor %ph, 1\n{par}    mbar_wait @full[%cs], %par
    %cv = view @buf[%cs]
    %x = load %cv[%t]
    gstore %Y[%i, %t], %x
    barrier
    %n1 = add %ns, 1
    %w2 = cmp ge %n1, {{S}}
    %nsn = select %w2, 0, %n1
    %lim = sub %T, {{S1}}
    %more = cmp lt %i, %lim
    %issue = and %el, %more
    if %issue {{
      %nv = view @buf[%nsn]
      mbar_arrive @full[%nsn] tx 256
      %row = add %i, {{S1}}
      tma_load %nv <- %X[%row, 0], @full[%nsn]
    }}
    yield %cs, %par, %nsn
"
    );
    format!(
        "kernel @g(%K: i32, %X: global f32[64, 64], %Y: global f32[64, 64]) block(64) {{
  shared @buf : f32[{{S}}, 64]
  shared @full : mbarrier[{{S}}]
  %t = tid.x
  %el = cmp eq %t, 0
  if %el {{
{inits}  }}
  barrier
  %k63 = add %K, 63
  %T = div %k63, 64
{pro}  %r0, %r1, %r2 = for %i = 0 to %T step 1 iter(%s = -1, %ph = 0, %ns = {{S2}}) {{
{body}  }}
}}
"
    )
    .replace("{S}", &s.to_string())
    .replace("{S1}", &(s - 1).to_string())
    .replace("{S2}", &(s as i32 - 2).to_string())
}

/// What `sync` said: its output and W0318 messages, or its error codes.
fn said(name: &str, src: &str) -> Result<(Kernel, Vec<String>), Vec<String>> {
    let k = common::parse_verified_as(name, src);
    let t = Target::from_name("sm_90").unwrap();
    match smemsync::sync::driver::synchronize(&k, &t, &Default::default()) {
        Ok(out) => {
            let w = out.placement.warnings.iter().filter(|w| w.code == "W0318");
            Ok((out.kernel, w.map(|w| w.message.clone()).collect()))
        }
        Err(ds) => Err(ds
            .iter()
            .map(|d| format!("{}: {}", d.code, d.message))
            .collect()),
    }
}

/// Verified for every `%K` (no W0318), and race-free in the interpreter at trip counts 0,
/// 1, 2, `S`, `S + 1`, one below and above `T0` (10 for the first period), 33 and 45 (beyond
/// the 32 searched, not multiples of the period `2·S`), at `%K` not a multiple of 64, and at
/// a negative `%K`.
#[test]
fn triton_pipelines_are_verified_for_every_trip_count() {
    for s in [2u32, 3, 4] {
        let name = format!("S={s}");
        let src = pipeline(s, "");
        let (out, w) = said(&name, &src).unwrap_or_else(|e| panic!("{name}: {e:?}\n{src}"));
        assert!(w.is_empty(), "{name}: {w:?}\n{src}");
        let trips = [0i64, 1, 2, s as i64, s as i64 + 1, 9, 11, 33, 45];
        let ks = trips
            .iter()
            .map(|t| 64 * t)
            .chain([64 * 7 - 5, 64 * 35 - 63, -1, -200]);
        for kv in ks {
            let v = common::interpret_at(&out, kv);
            assert!(matches!(v, Verdict::Checked { .. }), "{name} K={kv}: {v:?}");
        }
    }
}

/// Each mutant keeps W0318 with the premise that fails named, or is refused with E0306 as
/// before this argument existed.
#[test]
fn a_broken_premise_keeps_w0318_or_e0306() {
    for s in [2u32, 3] {
        for (mutant, want) in [
            ("counter", "premise (2)"),
            ("reads-trip", "premise (1)"),
            ("odd", "E0306"),
            ("count", "E0306"),
        ] {
            let name = format!("S={s} mutant={mutant}");
            let src = pipeline(s, mutant);
            match said(&name, &src) {
                Ok((_, w)) => {
                    assert!(
                        !w.is_empty()
                            && w.iter()
                                .all(|m| m.contains(want) && m.contains("taken as written")),
                        "{name}: want {want}, got {w:?}\n{src}"
                    );
                }
                // Refused: E0306 as before, or the W0318 with its premise named and the
                // dataflow's E0602 for a copy it cannot match to the wait's slot.
                Err(ds) => assert!(
                    ds.iter().any(|d| d.starts_with("E0306"))
                        || ds
                            .iter()
                            .any(|d| d.starts_with("W0318") && d.contains(want)),
                    "{name}: {ds:?}\n{src}"
                ),
            }
        }
    }
}

/// W0318 messages of `sync` on an imported corpus kernel.
fn corpus_w0318(f: &str) -> Vec<String> {
    let t = Target::from_name("sm_90").unwrap();
    let text = std::fs::read_to_string(f).unwrap();
    let kir = smemsync::reader::ttgir::import_ttgir(&text)
        .expect("imports")
        .kir;
    let k = common::parse_verified_as(f, &kir);
    let out = smemsync::sync::driver::synchronize(&k, &t, &Default::default()).unwrap();
    (out.placement.warnings.iter())
        .filter(|w| w.code == "W0318")
        .map(|w| w.message.clone())
        .collect()
}

/// The Triton corpus's TMA matmul loses its W0318 (every premise holds: period 6, `T0` 10).
#[test]
fn the_triton_tma_matmul_is_verified_for_every_k() {
    let w = corpus_w0318("corpus/triton/matmul_tma_fp16.ttgir");
    assert!(w.is_empty(), "{w:?}");
}

/// The warp-specialized matmul loses its W0318 too: its iteration value is a counter read
/// through residues (`mbar_counters`; tests/mbar_counters.rs has the verdict itself, run in CI).
/// Ignored: `sync` on it takes about 10 s of CPU in the debug build; run with
/// `cargo test --release --test mbar_trips -- --ignored`.
#[test]
#[ignore]
fn the_triton_warp_specialized_matmul_is_verified_for_every_k() {
    let w = corpus_w0318("corpus/triton/matmul_warp_specialized_fp16.ttgir");
    assert!(w.is_empty(), "{w:?}");
}
