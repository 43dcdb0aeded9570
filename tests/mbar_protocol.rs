//! `sync` verifies a kernel's own mbarrier waits before it takes them as ordering anything
//! (`analysis::mbar_protocol`, docs/async.md "What `sync` verifies of an mbarrier protocol"),
//! compared with the race checker's interpreter (`check` without the static proof):
//!
//! - E0306 (a wait shown not to wait for the phase it is taken to complete) implies the
//!   interpreter finds a race in the input;
//! - `sync` succeeding implies its output is race-free in the interpreter;
//! - the family's kernels are all decidable: no W0318.
//!
//! The family: a single-role TMA pipeline (one elected thread loads slot `i mod S`, every
//! thread waits on the slot's mbarrier with a parity formula, reads it, and a barrier ends the
//! iteration), with and without a prefetch of the next slot, over parity formulas × slots ×
//! trip counts; and the warp-specialized example with its `empty` count and consumer parity
//! varied. Debug-build time: a few seconds (the interpreter runs one schedule per kernel).

mod common;

use smemsync::check::Verdict;
use smemsync::ir::Kernel;
use smemsync::target::Target;

/// Parity formulas of `%i` for `S` slots: (name, IR lines defining `%par`, correct).
fn parities(s: u32) -> Vec<(&'static str, String, bool)> {
    vec![
        (
            "phase",
            format!("    %ph = div %i, {s}\n    %par = rem %ph, 2\n"),
            true,
        ),
        ("iter", "    %par = rem %i, 2\n".into(), s == 1),
        (
            "next-phase",
            format!("    %i1p = add %i, 1\n    %ph = div %i1p, {s}\n    %par = rem %ph, 2\n"),
            false,
        ),
        (
            "flipped",
            format!("    %ph = div %i, {s}\n    %p0 = rem %ph, 2\n    %par = xor %p0, 1\n"),
            false,
        ),
        ("zero", "    %par = add 0, 0\n".into(), false),
    ]
}

/// The single-role pipeline of `s` slots and `trips` iterations, parity lines `par`.
fn pipeline(s: u32, trips: u32, par: &str, prefetch: bool) -> String {
    let inits: String = (0..s)
        .map(|j| format!("    mbar_init @full[{j}], 1\n"))
        .collect();
    let load = |slot: &str, row: &str| {
        format!(
            "    %v{slot} = view @buf[%{slot}]\n    mbar_arrive @full[%{slot}] tx 256\n    tma_load %v{slot} <- %X[{row}, 0], @full[%{slot}]\n"
        )
    };
    let (pro, issue) = if prefetch {
        (
            format!("  %z = add 0, 0\n  if %el {{\n{}  }}\n", load("z", "0")),
            format!(
                "    %i1 = add %i, 1\n    %more = cmp lt %i1, {trips}\n    %issue = and %el, %more\n    %ps = rem %i1, {s}\n    if %issue {{\n{}    }}\n",
                load("ps", "%i1")
            ),
        )
    } else {
        (
            String::new(),
            format!(
                "    %ps = rem %i, {s}\n    if %el {{\n{}    }}\n",
                load("ps", "%i")
            ),
        )
    };
    format!(
        "kernel @g(%X: global f32[{trips}, 64], %Y: global f32[{trips}, 64]) block(64) {{
  shared @buf : f32[{s}, 64]
  shared @full : mbarrier[{s}]
  %t = tid.x
  %el = cmp eq %t, 0
  if %el {{
{inits}  }}
  barrier
{pro}  for %i = 0 to {trips} step 1 {{
{issue}    %cs = rem %i, {s}
{par}    mbar_wait @full[%cs], %par
    %cv = view @buf[%cs]
    %r = sub 63, %t
    %x = load %cv[%r]
    gstore %Y[%i, %t], %x
    barrier
  }}
}}
"
    )
}

/// What `sync` said of a kernel: Ok, or the codes of its diagnostics.
fn sync_codes(k: &Kernel) -> Result<(Kernel, Vec<String>), Vec<String>> {
    let t = Target::from_name("sm_90").unwrap();
    match smemsync::sync::driver::synchronize(k, &t, &Default::default()) {
        Ok(s) => Ok((
            s.kernel,
            s.placement
                .warnings
                .iter()
                .map(|w| w.code.to_string())
                .collect(),
        )),
        Err(ds) => Err(ds.iter().map(|d| d.code.to_string()).collect()),
    }
}

/// The oracle comparison for one kernel; returns whether `sync` refused it with E0306.
fn compare(name: &str, src: &str) -> bool {
    let k = common::parse_verified_as(name, src);
    match sync_codes(&k) {
        Ok((out, warnings)) => {
            assert!(
                !warnings.iter().any(|c| c == "W0318"),
                "{name}: W0318\n{src}"
            );
            let v = common::interpret_only(&out, 1);
            assert!(
                !matches!(v, Verdict::Race(_)),
                "{name}: `sync` accepted it but its output races\n{src}"
            );
            false
        }
        Err(codes) => {
            assert!(
                !codes.iter().any(|c| c == "W0318"),
                "{name}: W0318 {codes:?}\n{src}"
            );
            let e0306 = codes.iter().any(|c| c == "E0306");
            assert!(e0306, "{name}: refused without E0306: {codes:?}\n{src}");
            assert!(
                matches!(common::interpret_only(&k, 1), Verdict::Race(_)),
                "{name}: E0306 but the interpreter finds no race\n{src}"
            );
            true
        }
    }
}

#[test]
fn pipeline_parities_match_the_interpreter() {
    let mut refused = 0;
    let mut cases = 0;
    for s in 1..=3u32 {
        for trips in [s, 2 * s + 1] {
            for prefetch in [false, true] {
                if prefetch && s == 1 {
                    continue; // the prefetch would overwrite the slot being read
                }
                for (pname, par, correct) in parities(s) {
                    let name = format!("S={s} trips={trips} prefetch={prefetch} parity={pname}");
                    let src = pipeline(s, trips, &par, prefetch);
                    let e0306 = compare(&name, &src);
                    // Every wrong formula that some iteration exposes is refused, and the
                    // right one never is.
                    if correct {
                        assert!(!e0306, "{name}: the correct parity is refused\n{src}");
                    }
                    refused += e0306 as u32;
                    cases += 1;
                }
            }
        }
    }
    // Of the 45 kernels, the wrong formulas are refused wherever some iteration runs them
    // against a phase they do not name (all but `next-phase` at trips = S).
    assert_eq!((cases, refused), (45, 29), "cases, refused");
}

#[test]
fn warp_specialized_counts_and_parities_match_the_interpreter() {
    let base = std::fs::read_to_string("examples/tma-warp-specialized.kir").unwrap();
    let flip = |s: &str| {
        s.replace(
            "      mbar_wait @full[%s], %par\n",
            "      %fl = xor %par, 1\n      mbar_wait @full[%s], %fl\n",
        )
    };
    let count = |s: &str, n: u32| {
        s.replace(
            "mbar_init @empty[0], 256",
            &format!("mbar_init @empty[0], {n}"),
        )
    };
    let mut got = Vec::new();
    for n in [255, 256] {
        for flipped in [false, true] {
            let mut src = count(&base, n);
            if flipped {
                src = flip(&src);
            }
            got.push(compare(&format!("ws empty[0]={n} flipped={flipped}"), &src));
        }
    }
    assert_eq!(got, [true, true, false, true]);
}
