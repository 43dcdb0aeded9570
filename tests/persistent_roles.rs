//! Warp-specialized pipelines inside an outer (persistent) tile loop (docs/pipeline.md,
//! "Role branches inside an outer loop"; session 35's hostile K6), compared with the race
//! checker's interpreter:
//!
//! - the family: `for %tile { if in_group @producer { for %ii {...} } else { for %ii {...} } }`
//!   with hand-written `full`/`empty` mbarriers whose parities run on across tiles
//!   (`%i = tile·K + ii`, or a base carried in the tile loop's iteration values); one elected
//!   producer thread loads `K` uses per tile into `S` slots, 64 consumers read them. Outer
//!   trips 1, 2, 3, a parameter with a declared range, and one without (accepted with W0318,
//!   taken as written);
//! - the correct kernels are accepted and `sync`'s output is race-free in the interpreter;
//! - each mutant that races or deadlocks in the interpreter (producer's `empty` wait dropped,
//!   parity restarting at 0 every tile, consumers waiting on the wrong slot, consumers
//!   arriving before their read, the roles running different trip counts or indices per
//!   tile, a carried base advancing by the wrong amount) is refused;
//! - a branch without loops in its arms (one slot, one use per tile) keeps the direction from
//!   the later arm of one tile to the earlier arm of the next: its early arrival is E0307;
//! - named-barrier handshakes in a tile loop are not checked by the chains: their pairs stay
//!   with the hazard finder, whose barriers make the racing kernel's output race-free.
//!
//! Debug-build time: see docs/performance.md (section `persist`).

mod common;

use smemsync::check::{CheckOptions, Verdict, check_race_free};
use smemsync::ir::Kernel;
use smemsync::sync::PlaceOptions;
use smemsync::sync::driver::synchronize;
use smemsync::target::Target;

/// How the tile loop runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Outer {
    /// `for %tile = 0 to T`.
    Trips(u32),
    /// `for %tile = 0 to %n` with `%n: i32 in [0, 4]`.
    Ranged,
    /// `for %tile = 0 to %n` with `%n` unranged (W0318, taken as written).
    Unranged,
    /// `for %tile = 0 to T iter(%base = 0)`, `%i = %base + ii`, yielding `%base + K`.
    Carried(u32),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mutant {
    None,
    NoProducerWait,
    ParityRestart,
    WrongSlot,
    EarlyArrive,
    ConsumerFewerTrips,
    ConsumerOtherIndex,
    CarriedShort,
}

/// The iteration index `%i` of use `%ii` in this tile (`k` uses a tile).
fn index(outer: Outer, k: u32) -> String {
    match outer {
        Outer::Carried(_) => "%i = add %base, %ii\n".into(),
        _ => format!("%i0 = mul %tile, {k}\n%i = add %i0, %ii\n"),
    }
}

fn producer(s: u32, k: u32, outer: Outer, m: Mutant) -> String {
    let q = if m == Mutant::ParityRestart {
        "%ii"
    } else {
        "%i"
    };
    let wait = if m == Mutant::NoProducerWait {
        ""
    } else {
        "mbar_wait @empty[%s], %free\n"
    };
    format!(
        "for %ii = 0 to {k} step 1 {{\n{}%q = div {q}, {s}\n%par = rem %q, 2\n%free = xor %par, 1\n%s = rem %i, {s}\n{wait}%v = view @buf[%s]\nmbar_arrive @full[%s] tx 256\ntma_load %v <- %X[%ii, 0], @full[%s]\n}}\n",
        index(outer, k)
    )
}

fn consumer(s: u32, k: u32, outer: Outer, m: Mutant) -> String {
    let q = if m == Mutant::ParityRestart {
        "%ii"
    } else {
        "%i"
    };
    let trips = if m == Mutant::ConsumerFewerTrips {
        k - 1
    } else {
        k
    };
    let idx = match m {
        Mutant::ConsumerOtherIndex => format!("%i0 = mul %tile, {}\n%i = add %i0, %ii\n", k - 1),
        _ => index(outer, k),
    };
    let wait = match m {
        Mutant::WrongSlot => {
            format!("%s1 = add %i, 1\n%sw = rem %s1, {s}\nmbar_wait @full[%sw], %par\n")
        }
        _ => "mbar_wait @full[%s], %par\n".into(),
    };
    let (before, after) = match m {
        Mutant::EarlyArrive => ("mbar_arrive @empty[%s]\n", ""),
        _ => ("", "mbar_arrive @empty[%s]\n"),
    };
    format!(
        "for %ii = 0 to {trips} step 1 {{\n{idx}%q = div {q}, {s}\n%par = rem %q, 2\n%s = rem %i, {s}\n%v = view @buf[%s]\n{wait}{before}%x = load %v[%rev]\n{after}%y = exp %x\ngstore %Y[%ii, %c], %y\n}}\n"
    )
}

fn kernel(s: u32, k: u32, outer: Outer, m: Mutant) -> String {
    let (params, head, tail) = match outer {
        Outer::Trips(t) => (
            String::new(),
            format!("for %tile = 0 to {t} step 1 {{"),
            String::new(),
        ),
        Outer::Ranged => (
            ", %n: i32 in [0, 4]".into(),
            "for %tile = 0 to %n step 1 {".into(),
            String::new(),
        ),
        Outer::Unranged => (
            ", %n: i32".into(),
            "for %tile = 0 to %n step 1 {".into(),
            String::new(),
        ),
        Outer::Carried(t) => {
            let adv = if m == Mutant::CarriedShort { k - 1 } else { k };
            (
                String::new(),
                format!("%end = for %tile = 0 to {t} step 1 iter(%base = 0) {{"),
                format!("%nb = add %base, {adv}\nyield %nb\n"),
            )
        }
    };
    common::TwoRoles {
        name: "persist",
        rows: k.into(),
        width: 64,
        params,
        consumers: 64,
        slots: s,
        inits_by_slot: true,
        outer: Some((head, tail)),
        producer: producer(s, k, outer, m),
        consumer: common::two_roles::consumer_lanes(32, 64) + &consumer(s, k, outer, m),
        ..Default::default()
    }
    .text()
}

/// The parameter values the interpreter runs a kernel of `outer` with.
fn bounds(outer: Outer) -> Vec<Vec<(String, i64)>> {
    match outer {
        Outer::Ranged | Outer::Unranged => (0..=4).map(|n| vec![("n".to_string(), n)]).collect(),
        _ => vec![Vec::new()],
    }
}

/// Whether the interpreter finds a race or deadlock in `k` for some of `bounds`.
fn races(k: &Kernel, outer: Outer, schedules: u32) -> Option<Verdict> {
    bounds(outer).into_iter().find_map(|b| {
        let o = CheckOptions {
            try_proof: false,
            schedules,
            bounds: b,
            ..Default::default()
        };
        let v = check_race_free(k, &o).verdict;
        matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)).then_some(v)
    })
}

/// `sync`'s error codes, or its warning codes after checking its output race-free in the
/// interpreter.
fn sync(name: &str, src: &str, outer: Outer) -> Result<Vec<String>, Vec<String>> {
    let k = common::parse_verified_as(name, src);
    let t = Target::from_name("sm_90").expect("sm_90");
    let codes = |ds: &[smemsync::diag::Diagnostic], sev| {
        (ds.iter())
            .filter(|d| d.severity == sev)
            .map(|d| d.code.to_string())
            .collect::<Vec<_>>()
    };
    match synchronize(&k, &t, &PlaceOptions::default()) {
        Err(ds) => Err(codes(&ds, smemsync::diag::Severity::Error)),
        Ok(out) => {
            if let Some(v) = races(&out.kernel, outer, 1) {
                panic!("{name}: `sync` accepted it and its output is {v:?}\n{src}");
            }
            Ok(codes(
                &out.placement.warnings,
                smemsync::diag::Severity::Warning,
            ))
        }
    }
}

/// Every correct kernel of the family is accepted (without a warning unless its tile count
/// is an unranged parameter), and its output is race-free; every mutant the interpreter
/// refutes is refused.
#[test]
fn persistent_pipelines_match_the_interpreter() {
    let mutants = [
        Mutant::None,
        Mutant::NoProducerWait,
        Mutant::ParityRestart,
        Mutant::WrongSlot,
        Mutant::EarlyArrive,
        Mutant::ConsumerFewerTrips,
        Mutant::ConsumerOtherIndex,
    ];
    let outers = [
        Outer::Trips(1),
        Outer::Trips(2),
        Outer::Trips(3),
        Outer::Ranged,
        Outer::Unranged,
    ];
    let (mut accepted, mut refused) = (0, 0);
    for (s, k) in [(2u32, 4u32), (2, 2), (1, 3)] {
        for outer in outers {
            for m in mutants {
                if (m == Mutant::WrongSlot && s == 1)
                    || (m != Mutant::None && outer == Outer::Unranged)
                {
                    continue;
                }
                let name = format!("S={s} K={k} {outer:?} {m:?}");
                let src = kernel(s, k, outer, m);
                let got = sync(&name, &src, outer);
                let input = races(&common::parse_verified_as(&name, &src), outer, 4);
                if m == Mutant::None {
                    assert!(
                        input.is_none(),
                        "{name}: the correct kernel is {input:?}\n{src}"
                    );
                    let want: Vec<String> = match outer {
                        Outer::Unranged => vec!["W0318".into(); 2],
                        _ => Vec::new(),
                    };
                    assert_eq!(got, Ok(want), "{name}\n{src}");
                    accepted += 1;
                } else if input.is_some() {
                    assert!(got.is_err(), "{name}: the mutant is accepted\n{src}");
                    refused += 1;
                }
            }
        }
    }
    assert_eq!(accepted, 15);
    assert!(refused >= 50, "{refused} mutants refused");
}

/// The phase base carried in the tile loop's iteration values: accepted when it advances by
/// the uses of a tile, refused when it falls behind.
#[test]
fn a_carried_base_is_traced() {
    for t in [1u32, 2, 3] {
        let outer = Outer::Carried(t);
        let ok = kernel(2, 4, outer, Mutant::None);
        assert_eq!(sync("carried", &ok, outer), Ok(Vec::new()), "{ok}");
        let bad = kernel(2, 4, outer, Mutant::CarriedShort);
        let raced = races(&common::parse_verified_as("short", &bad), outer, 4).is_some();
        assert_eq!(raced, t > 1, "{bad}");
        if raced {
            assert!(sync("short", &bad, outer).is_err(), "{bad}");
        }
    }
}

/// Session 35's K6 (examples/tma-warp-specialized.kir inside a one-trip tile loop) and with
/// 2, 3 and 8 trips: accepted, no longer E0602.
#[test]
fn hostile_k6() {
    let src = include_str!("filetests/handshake/persistent-ws-tma.kir");
    for t in [1, 2, 3, 8] {
        let src = src.replace(
            "for %tile = 0 to 2 step 1",
            &format!("for %tile = 0 to {t} step 1"),
        );
        assert_eq!(sync("K6", &src, Outer::Trips(t)), Ok(Vec::new()), "{src}");
    }
}

/// Arms without loops (one slot, one use per tile): the consumers' read of one tile precedes
/// the producer's refill of the next, so an early arrival has no chain (E0307).
#[test]
fn arms_without_loops_are_checked_across_tiles() {
    let src = |early: bool| common::two_roles::one_slot_tile_loop("@buf", false, early);
    let outer = Outer::Trips(3);
    assert_eq!(sync("one", &src(false), outer), Ok(Vec::new()));
    let bad = src(true);
    assert!(races(&common::parse_verified_as("early", &bad), outer, 4).is_some());
    assert_eq!(sync("early", &bad, outer), Err(vec!["E0307".to_string()]));
}

/// examples/warp-specialized-named-barriers.kir inside a 2-trip tile loop races (its first
/// and last iterations skip the `empty` handshakes, so tile 1 refills what tile 0 still
/// reads). Named barriers are `check`'s, not the chains': the cross-arm pairs stay with the
/// hazard finder, and `sync`'s output is race-free (an early version of this branch left them
/// to the chains and printed the racing kernel unchanged).
#[test]
fn named_barriers_in_a_tile_loop_stay_with_the_hazard_finder() {
    let ex = include_str!("../examples/warp-specialized-named-barriers.kir");
    let body: String = ex
        .lines()
        .filter(|l| !l.starts_with("//"))
        .map(|l| format!("{l}\n"))
        .collect();
    let src = body.replacen(
        "  %isp = in_group @producer\n",
        "  for %tile = 0 to 2 step 1 {\n  %isp = in_group @producer\n",
        1,
    );
    let src = format!(
        "{}  }}\n}}\n",
        src.trim_end().strip_suffix('}').expect("a kernel")
    );
    let outer = Outer::Trips(2);
    assert!(
        races(&common::parse_verified_as("named", &src), outer, 4).is_some(),
        "{src}"
    );
    // Accepted with barriers (E0305 warnings) or refused; never its input unchanged.
    let _ = sync("named", &src, outer);
}
