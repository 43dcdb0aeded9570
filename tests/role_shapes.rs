//! Role branches not written as `if in_group @g` (docs/async.md, "Role branches"), ping-pong
//! consumer warpgroups (*Alignment*, strided keys) and prologue-loop producers (docs/pipeline.md,
//! "First fills"), compared with the race checker's interpreter (session 35's hostile K3,
//! K10; session 34's J1b):
//!
//! - K3: the warp-specialized TMA example with its role branch written as a thread-id compare
//!   (`cmp lt %t, 32`, `div %t, 32 == 0`, `not (cmp ge %t, 32)`): accepted like `in_group`, the
//!   same output but for that line, race-free in the interpreter. A compare that splits a warp
//!   (`cmp lt %t, 40`) or that matches no declared group (`cmp lt %t, 64`) is no role branch:
//!   refused, and the kernel deadlocks in the interpreter;
//! - K10: two consumer warpgroups taking turns (iteration `i = 2k + wg`): accepted, output
//!   race-free; mutants (warpgroup 1's parity flipped, both warpgroups on the same turns,
//!   `empty` arrival deleted, `empty` count for both warpgroups) refused and racing or
//!   deadlocking in the interpreter.
//!
//! Debug-build time: see docs/performance.md (section `rolesplit`).

mod common;

use smemsync::check::Verdict;

/// The producer of the warp-specialized TMA example (examples/tma-warp-specialized.kir).
const PRODUCER: &str = "for %i = 0 to 8 step 1 {
  %q = div %i, 2
  %par = rem %q, 2
  %free = xor %par, 1
  %s = rem %i, 2
  mbar_wait @empty[%s], %free
  %v = view @buf[%s]
  mbar_arrive @full[%s] tx 1024
  tma_load %v <- %X[%i, 0], @full[%s]
}
";

/// The example's consumers: 256 threads, every iteration.
const ALL: &str = "    %c = sub %t, 32
    %rev = sub 255, %c
    for %i = 0 to 8 step 1 {
      %q = div %i, 2
      %par = rem %q, 2
      %s = rem %i, 2
      %v = view @buf[%s]
      mbar_wait @full[%s], %par
      %x = load %v[%rev]
      mbar_arrive @empty[%s]
      %y = exp %x
      gstore %Y[%i, %c], %y
    }";

/// K10's consumers: warpgroup `wg` takes iterations `2k + wg` (`TURN`, `PAR`, `ARRIVE`
/// replaced by the mutants).
const PINGPONG: &str = "    %c = sub %t, 32
    %wg = div %c, 128
    %cc = rem %c, 128
    %rev = sub 255, %cc
    for %k = 0 to 4 step 1 {
      %k2 = mul %k, 2
      %i = add %k2, TURN
      %q = div %i, 2
      %par0 = rem %q, 2
      %par = PAR
      %s = rem %i, 2
      %v = view @buf[%s]
      mbar_wait @full[%s], %par
      %x = load %v[%rev]
ARRIVE      %y = exp %x
      gstore %Y[%i, %cc], %y
    }";

/// The example with its role branch condition `role`, its consumers' body `consumers` and
/// each `empty` mbarrier counting `empty` arrivals.
fn ws(role: &str, consumers: &str, empty: u32) -> String {
    common::TwoRoles {
        name: "ws_tma",
        empty: Some(empty),
        role: role.into(),
        producer: PRODUCER.into(),
        consumer: format!("{consumers}\n"),
        ..Default::default()
    }
    .text()
}

/// `sync`'s error codes, or its output after checking it race-free in the interpreter.
fn sync(name: &str, src: &str) -> Result<String, Vec<String>> {
    common::sync_sm90_race_free(name, src, 2).map(|k| smemsync::ir::text::print_kernel(&k))
}

/// A refused kernel that races or deadlocks in the interpreter.
fn refused_and_wrong(name: &str, src: &str) {
    let got = sync(name, src);
    assert!(got.is_err(), "{name}: accepted\n{src}");
    let input = common::interpret_only(&common::parse_verified_as(name, src), 4);
    assert!(
        matches!(input, Verdict::Race(_) | Verdict::Deadlock(_)),
        "{name}: the mutant is {input:?}\n{src}"
    );
}

#[test]
fn role_splits_by_thread_id_are_role_branches() {
    let reference =
        sync("in_group", &ws("  %isp = in_group @producer", ALL, 256)).expect("the example");
    let splits = [
        "  %isp = cmp lt %t, 32",
        "  %w = div %t, 32\n  %isp = cmp eq %w, 0",
        "  %ge = cmp ge %t, 32\n  %isp = not %ge",
    ];
    // The lines that define the role condition differ; every other line is the same.
    let rest = |text: &str| -> Vec<String> {
        (text.lines().map(str::trim))
            .filter(|l| !["%isp =", "%w =", "%ge ="].iter().any(|p| l.starts_with(p)))
            .map(String::from)
            .collect()
    };
    for role in splits {
        let out =
            sync(role, &ws(role, ALL, 256)).unwrap_or_else(|e| panic!("{role}: refused {e:?}"));
        assert_eq!(
            rest(&out),
            rest(&reference),
            "{role}: another placement than with `in_group`"
        );
    }
    for role in ["  %isp = cmp lt %t, 40", "  %isp = cmp lt %t, 64"] {
        refused_and_wrong(role, &ws(role, ALL, 256));
    }
}

#[test]
fn ping_pong_consumers_are_verified() {
    let role = "  %isp = in_group @producer";
    let pp = |turn: &str, par: &str, arrive: &str| {
        PINGPONG
            .replace("TURN", turn)
            .replace("PAR", par)
            .replace("ARRIVE", arrive)
    };
    let arrive = "      mbar_arrive @empty[%s]\n";
    let k10 = ws(role, &pp("%wg", "add %par0, 0", arrive), 128);
    sync("K10", &k10).unwrap_or_else(|e| panic!("K10 refused {e:?}"));
    let split = ws(
        "  %isp = cmp lt %t, 32",
        &pp("%wg", "add %par0, 0", arrive),
        128,
    );
    sync("K10 split by tid", &split).unwrap_or_else(|e| panic!("K10 split by tid refused {e:?}"));
    let mutants = [
        (
            "warpgroup 1's parity flipped",
            ws(role, &pp("%wg", "xor %par0, %wg", arrive), 128),
        ),
        (
            "both warpgroups on the same turns",
            ws(role, &pp("0", "add %par0, 0", arrive), 256),
        ),
        (
            "no arrival on empty",
            ws(role, &pp("%wg", "add %par0, 0", ""), 128),
        ),
        (
            "empty counts both warpgroups",
            ws(role, &pp("%wg", "add %par0, 0", arrive), 256),
        ),
    ];
    for (name, src) in mutants {
        refused_and_wrong(name, &src);
    }
}
