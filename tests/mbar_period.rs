//! Long constant loops in `analysis::mbar_protocol` (its child `mbar_period`, docs/async.md
//! "Long constant loops"): the verdict read from a shorter trace of the same residue is
//! compared with the full trace on a family of warp-specialized TMA pipelines at small trip
//! counts (the threshold lowered to 24 trips), and the hostile K9 kernel at 10^7 trips is
//! decided without W0318 or E0307.
//!
//! The family: a producer thread and `C` consumer threads over `S` slots, each with a `full`
//! and an `empty` mbarrier; the slot is `i rem S` and the phase `(i div S) rem 2` read from
//! the counter (K9's form), both carried as iteration values, or read from a counter carried
//! as `c + 1` (Triton's form, session 38's N5). Mutants: a
//! consumer parity that never flips (E0306), an `empty` count that is not the consumers'
//! (E0306), a prologue guard comparing the counter (declines: the full trace answers), and a
//! slot read through an unknown-period expression (declines). Debug-build time: about 1 s.

mod common;

use smemsync::analysis::mbar_protocol::{verify, verify_periodic};
use smemsync::ir::Kernel;
use smemsync::target::Target;

/// The pipeline of `s` slots, `n` trips, `c` consumers, in `form` ("counter" or "iter"),
/// with `mutant` ("" for none).
fn pipeline(s: u32, n: i64, c: u32, form: &str, mutant: &str) -> String {
    let empty = if mutant == "count" { c - 1 } else { c };
    let (head, slot) = match form {
        "carried" => (
            "iter(%c = 0) ",
            "      %q = div %c, {S}\n      %par = rem %q, 2\n      %s = rem %c, {S}\n".to_string(),
        ),
        "iter" => (
            "iter(%s = 0, %ph = 0) ",
            "      %s1 = add %s, 1\n      %w = cmp ge %s1, {S}\n      %sn = select %w, 0, %s1\n      %phx = xor %ph, 1\n      %phn = select %w, %phx, %ph\n      %par = add %ph, 0\n".to_string(),
        ),
        _ => (
            "",
            match mutant {
                "odd-slot" => "      %q = div %i, {S}\n      %par = rem %q, 2\n      %i3 = mul %i, %i\n      %s = rem %i3, {S}\n".to_string(),
                _ => "      %q = div %i, {S}\n      %par = rem %q, 2\n      %s = rem %i, {S}\n".to_string(),
            },
        ),
    };
    let cpar = if mutant == "stuck" { "0" } else { "%par" };
    let pwait = match mutant {
        "guard" => {
            "      %g = cmp ge %i, 0\n      if %g {\n        mbar_wait @empty[%s], %free\n      }\n"
        }
        _ => "      mbar_wait @empty[%s], %free\n",
    };
    let (yld, r, rc) = match form {
        "iter" => ("      yield %sn, %phn\n", "%r0, %r1 = ", "%q0, %q1 = "),
        "carried" => (
            "      %c1 = add %c, 1\n      yield %c1\n",
            "%r0 = ",
            "%q0 = ",
        ),
        _ => ("", "", ""),
    };
    common::TwoRoles {
        rows: n,
        width: 64,
        consumers: c,
        slots: s,
        empty: Some(empty),
        inits_by_slot: true,
        producer: format!(
            "{r}for %i = 0 to {n} step 1 {head}{{\n{slot}%free = xor %par, 1\n{pwait}\
             %v = view @buf[%s]\nmbar_arrive @full[%s] tx 256\ntma_load %v <- %X[%i, 0], @full[%s]\n\
             {yld}}}\n"
        ),
        consumer: format!(
            "%cc = sub %t, 32\n%ci = rem %cc, 64\n{rc}for %i = 0 to {n} step 1 {head}{{\n{slot}\
             %v = view @buf[%s]\nmbar_wait @full[%s], {cpar}\n%x = load %v[%ci]\n\
             mbar_arrive @empty[%s]\n%y = exp %x\ngstore %Y[%i, %ci], %y\n{yld}}}\n"
        ),
        ..Default::default()
    }
    .text()
    .replace("{S}", &s.to_string())
}

fn parsed(name: &str, src: &str) -> Kernel {
    common::parse_verified_as(name, src)
}

/// Whether a verdict is clean: every wait verified, nothing said.
fn clean(v: &smemsync::analysis::mbar_protocol::Verdict) -> bool {
    v.errors.is_empty() && v.warnings.is_empty() && v.unverified.is_empty()
}

/// The periodic answer (threshold 24 trips) against the full trace at 25 … 40 trips: where
/// it answers, the full trace is clean too; on the well-formed pipelines it answers; on the
/// mutants it declines (the wrong ones are wrong in the full trace, the others undecidable
/// by it).
#[test]
fn the_periodic_answer_is_the_full_trace_at_small_trips() {
    let mut answered = 0;
    for form in ["counter", "iter", "carried"] {
        for s in [2u32, 3, 4] {
            for mutant in ["", "stuck", "count", "guard", "odd-slot"] {
                if form != "counter" && mutant == "odd-slot" {
                    continue;
                }
                for n in (25..=40).step_by(if mutant.is_empty() { 1 } else { 5 }) {
                    let name = format!("{form} S={s} n={n} mutant={mutant:?}");
                    let src = pipeline(s, n, 64, form, mutant);
                    let k = parsed(&name, &src);
                    let full = verify(&k, 32);
                    let fast = verify_periodic(&k, 32, 24);
                    match &fast {
                        Ok(v) => {
                            assert!(
                                clean(v) && clean(&full),
                                "{name}: periodic {v:?}, full {full:?}\n{src}"
                            );
                            answered += 1;
                        }
                        Err(why) => assert!(!mutant.is_empty(), "{name}: declined ({why})\n{src}"),
                    }
                    match mutant {
                        "stuck" | "count" => assert!(!full.errors.is_empty(), "{name}: {full:?}"),
                        "" | "guard" => assert!(clean(&full), "{name}: {full:?}"),
                        _ => {}
                    }
                    if matches!(mutant, "guard" | "odd-slot") {
                        assert!(fast.is_err(), "{name}: a premise fails, yet {fast:?}");
                    }
                }
            }
        }
    }
    assert!(answered >= 3 * 3 * 16, "{answered}");
}

/// N5 (session 38's hostile kernel): K9 with the slot and phase read from a counter carried
/// as an iteration value (`iter(%c = 0) … yield %c + 1`, Triton's form) at 10^6 trips: the
/// residues of the counter make its states periodic, so the long-loop shortcut answers (it
/// built the whole 10^6-trip trace before: 12 s, 1.5 GB) and places as at 300 trips.
#[test]
fn n5_carried_counter_at_a_million_trips_is_decided() {
    let t = Target::from_name("sm_90").unwrap();
    let src = pipeline(2, 1_000_000, 256, "carried", "");
    let k = parsed("N5", &src);
    let v = verify_periodic(&k, 32, smemsync::analysis::mbar_protocol::LONG_LOOP);
    assert!(v.as_ref().is_ok_and(clean), "{v:?}");
    let at = |n: i64| {
        let k = parsed(&format!("N5 n={n}"), &pipeline(2, n, 256, "carried", ""));
        let out = smemsync::sync::driver::synchronize(&k, &t, &Default::default())
            .unwrap_or_else(|e| panic!("n={n}: {e:?}"));
        let codes: Vec<String> = out
            .placement
            .warnings
            .iter()
            .map(|w| w.code.to_string())
            .collect();
        (out.placement.stats.barriers_written, codes)
    };
    let (b, w) = at(1_000_000);
    assert!(!w.iter().any(|c| c == "W0318" || c == "E0307"), "{w:?}");
    assert_eq!((b, w), at(300));
}

/// K9 (session 35's hostile kernel, `examples/tma-warp-specialized.kir` with long role
/// loops) at 10^7 trips per role: `sync` verifies both waits and places as at 8 trips — no
/// W0318, no E0307 (before: the trace gave up at its step cap, then E0307 for the chain the
/// unverified waits no longer carried).
#[test]
fn k9_at_ten_million_trips_is_decided() {
    let t = Target::from_name("sm_90").unwrap();
    let at = |n: i64| {
        let src = pipeline(2, n, 256, "counter", "");
        let k = parsed(&format!("K9 n={n}"), &src);
        let out = smemsync::sync::driver::synchronize(&k, &t, &Default::default())
            .unwrap_or_else(|e| panic!("n={n}: {e:?}"));
        let codes: Vec<String> = out
            .placement
            .warnings
            .iter()
            .map(|w| w.code.to_string())
            .collect();
        (
            out.placement.stats.hazards,
            out.placement.stats.barriers_written,
            codes,
        )
    };
    let (h, b, w) = at(10_000_000);
    assert!(!w.iter().any(|c| c == "W0318" || c == "E0307"), "{w:?}");
    assert_eq!((h, b, w), at(300));
}

/// Issue 12's L9: `bench --real`'s stepped pipeline (role loops stepping by 2, K9's protocol)
/// is one the long-loop shortcut declines, so its verdict is computed from the full trace
/// (quadratic in it before: each wait event scanned its slot's events for a late copy): both
/// waits verified at 2 000 trips; with the consumers' parity stuck at 0, E0306.
#[test]
fn the_stepped_pipeline_is_verified_from_the_full_trace() {
    let src = smemsync::bench_kernels::mbar_stepped(2000);
    let k = parsed("stepped", &src);
    let long = smemsync::analysis::mbar_protocol::LONG_LOOP;
    assert!(verify_periodic(&k, 32, long).is_err());
    let v = verify(&k, 32);
    assert!(clean(&v), "{v:?}");
    let stuck = src.replace("mbar_wait @full[%s], %par", "mbar_wait @full[%s], 0");
    let v = verify(&parsed("stepped, parity stuck", &stuck), 32);
    assert!(!v.errors.is_empty(), "{v:?}");
}
