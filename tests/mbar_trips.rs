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
    let body = refill_loop(
        &format!("    %s1 = add %s, 1\n{wrap}{slot}    %ph1 = xor %ph, 1\n{par}"),
        ("%i", "{S}"),
        ("sub %T, {S1}", "lt %i, %lim"),
        ("      %row = add %i, {S1}\n", "%row"),
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

/// The body of the loop of Triton's single-role pipeline after `slot_par` (the lines that
/// define the slot `%cs` and parity `%par` waited on from the iteration values): the wait,
/// the slot's read stored to row `out` of `%Y`, a barrier, and the refill of the next of
/// `slots` slots under `%issue` (thread 0 and `%more = cmp {more}` with `%lim = {lim}`),
/// loading row `row` of `%X` after the `row_def` lines; then the `yield`.
fn refill_loop(
    slot_par: &str,
    (out, slots): (&str, &str),
    (lim, more): (&str, &str),
    (row_def, row): (&str, &str),
) -> String {
    format!(
        "{slot_par}    mbar_wait @full[%cs], %par
    %cv = view @buf[%cs]
    %x = load %cv[%t]
    gstore %Y[{out}, %t], %x
    barrier
    %n1 = add %ns, 1
    %w2 = cmp ge %n1, {slots}
    %nsn = select %w2, 0, %n1
    %lim = {lim}
    %more = cmp {more}
    %issue = and %el, %more
    if %issue {{
      %nv = view @buf[%nsn]
      mbar_arrive @full[%nsn] tx 256
{row_def}      tma_load %nv <- %X[{row}, 0], @full[%nsn]
    }}
    yield %cs, %par, %nsn
"
    )
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

/// A declared range never answers worse than none (hostile P3). `%K` reaches the trace only
/// through `(%K + 63) div 64`: over `[64, 4096]` its 64 trip counts are enumerated (one `%K`
/// each: exact); over `[64, 1000000]` (15625 trip counts, past the cap) `%K` is searched
/// within the range like a parameter without one, and the argument, starting from trip counts
/// below the range (traced, not reported), verifies it for every `%K`. The mutants answer as
/// without a range: the odd phase is E0306, the counter read as a slot keeps W0318.
#[test]
fn a_declared_range_is_enumerated_per_trip_count_or_searched_as_without_one() {
    let ranged = |range: &str, mutant: &str| {
        pipeline(3, mutant).replace("%K: i32,", &format!("%K: i32 in {range} = 512,"))
    };
    for range in ["[64, 4096]", "[64, 1000000]"] {
        let src = ranged(range, "");
        let (out, w) = said(range, &src).unwrap_or_else(|e| panic!("{range}: {e:?}\n{src}"));
        assert!(w.is_empty(), "{range}: {w:?}\n{src}");
        for kv in [64, 64 * 7 - 5, 64 * 33, 4096] {
            let v = common::interpret_at(&out, kv);
            assert!(
                matches!(v, Verdict::Checked { .. }),
                "{range} K={kv}: {v:?}"
            );
        }
    }
    let odd = ranged("[64, 1000000]", "odd");
    let e = said("odd", &odd).err().unwrap_or_default();
    assert!(e.iter().any(|d| d.starts_with("E0306")), "{e:?}\n{odd}");
    let counter = ranged("[64, 1000000]", "counter");
    let w = match said("counter", &counter) {
        Ok((_, w)) => w,
        // Refused: the dataflow's E0602 beside the W0318, as without a range.
        Err(ds) => ds.into_iter().filter(|d| d.starts_with("W0318")).collect(),
    };
    assert!(
        !w.is_empty()
            && w.iter()
                .all(|m| m.contains("premise (2)") && m.contains("declared range [64, 1000000]")),
        "{w:?}\n{counter}"
    );
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

/// Triton's software-pipelined loop over the parameter itself (`range(lo, K, B)`, the TMA
/// attention's): two slots, the first filled under the prologue guard `%K {pro}` (Triton:
/// `gt %K, lo`), each iteration refilling the next slot under the drain guard
/// `%i {drain} %K − {y}` (Triton: `lt`, `y = B`). The guards compare `%K` itself, which
/// premise (1) rewrites to the trip count (docs/async.md, "Comparisons of the parameter
/// itself"). `range`: a declared range for `%K` (enumerated: the oracle), or none.
fn strided(lo: i64, b: i64, pro: &str, drain: &str, y: i64, range: &str) -> String {
    let body = refill_loop(
        "    %s1 = add %s, 1\n    %w = cmp ge %s1, 2\n    %cs = select %w, 0, %s1\n    %ph1 = xor %ph, 1\n    %par = select %w, %ph1, %ph\n",
        ("0", "2"),
        (&format!("sub %K, {y}"), drain),
        ("", "0"),
    );
    format!(
        "kernel @g(%K: i32{range}, %X: global f32[64, 64], %Y: global f32[64, 64]) block(64) {{
  shared @buf : f32[2, 64]
  shared @full : mbarrier[2]
  %t = tid.x
  %el = cmp eq %t, 0
  if %el {{
    mbar_init @full[0], 1
    mbar_init @full[1], 1
  }}
  barrier
  %g0 = cmp {pro}
  %e0 = and %el, %g0
  if %e0 {{
    %v0 = view @buf[0]
    mbar_arrive @full[0] tx 256
    tma_load %v0 <- %X[0, 0], @full[0]
  }}
  %r0, %r1, %r2 = for %i = {lo} to %K step {b} iter(%s = -1, %ph = 0, %ns = 0) {{
{body}  }}
}}
"
    )
}

/// The attention's guards, written as Triton writes them and in equivalent spellings
/// (`ge %K, lo + 1`, `le %i, %K − B − 1`, the operands swapped): verified for every `%K`
/// (no W0318), and race-free in the interpreter at trip counts 0, 1, 2, 3, 7 and 40 (beyond
/// the 32 searched), at `%K` not a multiple of `B` and at a negative `%K`.
#[test]
fn a_loop_over_the_parameter_with_its_guards_is_verified_for_every_k() {
    for (lo, b) in [(0i64, 64i64), (0, 8), (3, 16)] {
        let guards = [
            (format!("gt %K, {lo}"), "lt %i, %lim".to_string(), b),
            (
                format!("ge %K, {}", lo + 1),
                "le %i, %lim".to_string(),
                b + 1,
            ),
            (format!("lt {lo}, %K"), "gt %lim, %i".to_string(), b),
        ];
        for (pro, drain, y) in guards {
            let name = format!("lo={lo} B={b} `{pro}` `{drain}` y={y}");
            let src = strided(lo, b, &pro, &drain, y, "");
            let (out, w) = said(&name, &src).unwrap_or_else(|e| panic!("{name}: {e:?}\n{src}"));
            assert!(w.is_empty(), "{name}: {w:?}\n{src}");
            let ks = [0i64, 1, 2, 3, 7, 40].map(|t| lo + b * t);
            for kv in ks
                .into_iter()
                .chain([lo + 2 * b - 1, lo + 5 * b + 1, -1, -100])
            {
                let v = common::interpret_at(&out, kv);
                assert!(matches!(v, Verdict::Checked { .. }), "{name} K={kv}: {v:?}");
            }
        }
    }
}

/// Guards that differ from the attention's by a constant: each is verified only where the
/// same kernel with `%K` declared in `[0, 255]` (every value enumerated: the exact oracle)
/// is; one that makes some iteration's wait wrong is refused with E0306; one that issues a
/// load no wait completes for some `%K` (the prologue's at `%K = 0` under `ge %K, 0`, or at a
/// negative `%K` under `ne %K, 0`; the last iteration's refill under `%i < %K - 7`,
/// `%i <= %K - 8`, `%i < %K + 8` when `%K` is a multiple of 8) is refused with E0603 (session 39:
/// those kept W0318 and exited 0, the copy landing after the loop). `B = 8`, so the range
/// holds trip counts 0 to 32.
#[test]
fn guards_off_by_a_constant_stay_w0318_or_are_refused() {
    let (lo, b) = (0i64, 8i64);
    let cases: [(&str, &str, i64, &str); 9] = [
        ("gt %K, 1", "lt %i, %lim", 8, "E0306"),
        ("gt %K, 8", "lt %i, %lim", 8, "E0306"),
        ("ge %K, 0", "lt %i, %lim", 8, "E0603"),
        ("ne %K, 0", "lt %i, %lim", 8, "E0603"),
        ("gt %K, 0", "lt %i, %lim", 16, "E0306"),
        ("gt %K, 0", "lt %i, %lim", 7, "E0603"),
        ("gt %K, 0", "lt %i, %lim", 9, "E0306"),
        ("gt %K, 0", "le %i, %lim", 8, "E0603"),
        ("gt %K, 0", "lt %i, %lim", -8, "E0603"),
    ];
    for (pro, drain, y, want) in cases {
        let name = format!("`{pro}` `{drain}` y={y}");
        let src = strided(lo, b, pro, drain, y, "");
        let oracle = said(&name, &strided(lo, b, pro, drain, y, " in [0, 255]"));
        let exact_ok = matches!(&oracle, Ok((_, w)) if w.is_empty());
        match said(&name, &src) {
            Ok((_, w)) => {
                assert!(
                    !w.is_empty(),
                    "{name}: verified (oracle: {oracle:?})\n{src}"
                );
                assert!(
                    w.iter()
                        .all(|m| m.contains(want) && m.contains("taken as written")),
                    "{name}: want {want}, got {w:?}"
                );
            }
            Err(ds) => {
                assert!(
                    ds.iter().any(|d| d.starts_with(want)),
                    "{name}: want {want}, got {ds:?}"
                );
                assert!(
                    !exact_ok,
                    "{name}: refused, but every K in [0, 255] is verified"
                );
            }
        }
    }
}

/// The imported kernel of a corpus file, as `.kir` text.
fn corpus_kir(f: &str) -> String {
    let text = std::fs::read_to_string(f).unwrap();
    smemsync::reader::ttgir::import_ttgir(&text)
        .expect("imports")
        .kir
}

const ATTENTION_TMA: &str = "corpus/triton/attention_fwd_tma_fp16.ttgir";

/// Triton's software-pipelined TMA attention (`for %i = 0 to %n_ctx step 64`, prologue
/// guard `gt %n_ctx, 0`, drain guard `lt %i, %n_ctx − 64`): its three waits are verified for
/// every `%n_ctx` (no W0318), and its output is race-free in the interpreter at `%n_ctx` =
/// 0, 64, 128, 200 and 320.
#[test]
fn the_triton_pipelined_tma_attention_is_verified_for_every_n_ctx() {
    assert!(corpus_w0318(ATTENTION_TMA).is_empty());
    let (out, w) = said(ATTENTION_TMA, &corpus_kir(ATTENTION_TMA)).expect("accepted");
    assert!(w.is_empty(), "{w:?}");
    for n in [0i64, 64, 128, 200, 320] {
        let o = smemsync::check::CheckOptions {
            try_proof: false,
            schedules: 1,
            bounds: vec![("n_ctx".into(), n)],
            ..Default::default()
        };
        let v = smemsync::check::check_race_free(&out, &o).verdict;
        assert!(matches!(v, Verdict::Checked { .. }), "n_ctx={n}: {v:?}");
    }
}

/// The corpus attention with one guard's constant changed: a drain guard that skips the
/// last refill (`%n_ctx − 128`) or a prologue guard that skips the first fill for some
/// `%n_ctx > 0` (`gt 1`, `gt 64`) leaves a wait that never returns (E0306). A prologue guard
/// that loads with no trip to wait (`ne 0` at a negative `%n_ctx`, `ge 0` at 0), or a
/// drain guard that lets the last iteration refill for some `%n_ctx` (`%n_ctx − 63`, `− 32`:
/// when `%n_ctx` is a multiple of 64, or above one by less than 32; `− 0`: always) leaves a
/// copy in flight into the `mbar_inval`s after the loop: E0603 (session 39; `check` finds it
/// completing on an invalidated mbarrier, C0011, e.g. at `%n_ctx` = 64 under `− 32`).
#[test]
fn the_attention_with_a_guard_off_by_a_constant_is_refused_or_stays_w0318() {
    let kir = corpus_kir(ATTENTION_TMA);
    let cases = [
        ("sub %n_ctx, 64", "sub %n_ctx, 128", "E0306"),
        ("cmp gt %n_ctx, 0", "cmp gt %n_ctx, 1", "E0306"),
        ("cmp gt %n_ctx, 0", "cmp gt %n_ctx, 64", "E0306"),
        ("sub %n_ctx, 64", "sub %n_ctx, 63", "E0603"),
        ("sub %n_ctx, 64", "sub %n_ctx, 32", "E0603"),
        ("sub %n_ctx, 64", "sub %n_ctx, 0", "E0603"),
        ("cmp gt %n_ctx, 0", "cmp ne %n_ctx, 0", "E0603"),
        ("cmp gt %n_ctx, 0", "cmp ge %n_ctx, 0", "E0603"),
    ];
    for (from, to, want) in cases {
        assert_eq!(kir.matches(from).count(), 1, "{from}");
        let src = kir.replace(from, to);
        match said(to, &src) {
            Ok((_, w)) => assert!(
                w.len() == 3 && w.iter().all(|m| m.contains(want)),
                "`{to}`: want {want}, got {w:?}"
            ),
            Err(ds) => assert!(
                ds.iter().any(|d| d.starts_with(want)),
                "`{to}`: want {want}, got {ds:?}"
            ),
        }
    }
}
