//! The static proof on two-role (warp-specialized) TMA pipelines (docs/checker.md, "Elected
//! arrivals"): the example, whose 256 consumers each release a slot, and its elected variant,
//! whose slots are released by one consumer thread after the consumers' named barrier, are
//! proved, and each proof agrees with interpretation; every mutant that breaks one of the
//! rule's conditions (the arrival before the named barrier, no named barrier, a count the
//! arrivals do not reach, a wrong parity, a missing wait, an arriving thread outside the
//! group) is never proved, and interpretation finds its race or deadlock.

use smemsync::check::Verdict;
use smemsync::check::proof::prove;

mod common;
use common::parse_verified as parse;

const EXAMPLE: &str = include_str!("../examples/tma-warp-specialized.kir");

/// The example with `empty` of count 1, arrived by consumer thread 32 after the consumers'
/// `named_sync 1, 256` (the form of Triton's warp-specialized matmul).
fn elected() -> String {
    let text = EXAMPLE
        .replace(
            "    mbar_init @empty[0], 256\n    mbar_init @empty[1], 256",
            "    mbar_init @empty[0], 1\n    mbar_init @empty[1], 1",
        )
        .replace(
            "    %rev = sub 255, %c\n",
            "    %rev = sub 255, %c\n    %celect = cmp eq %t, 32\n",
        )
        .replace(
            "      %x = load %v[%rev]\n      mbar_arrive @empty[%s]\n",
            "      %x = load %v[%rev]\n      named_sync 1, 256\n      if %celect {\n        mbar_arrive @empty[%s]\n      }\n",
        );
    assert!(
        text.contains("named_sync 1, 256") && text.contains("@empty[0], 1\n"),
        "the example changed: {text}"
    );
    text
}

fn interpret(k: &smemsync::ir::Kernel) -> Verdict {
    common::interpret_only(k, 2)
}

#[test]
fn warp_specialized_pipelines_are_proved_and_interpretation_agrees() {
    for (name, text) in [("example", EXAMPLE.to_string()), ("elected", elected())] {
        let k = parse(&text);
        let why = prove(&k, None).unwrap_or_else(|e| panic!("{name}: not proved: {e}"));
        assert!(
            why.contains("ordered by the roles' mbarrier handshakes"),
            "{name}: {why}"
        );
        let released = if name == "elected" { 1 } else { 0 };
        assert!(
            why.contains(&format!("({released} released by one elected arrival")),
            "{name}: {why}"
        );
        let v = interpret(&k);
        assert!(
            matches!(v, Verdict::Checked { .. }),
            "{name}: proved, but interpretation says {v:?}"
        );
    }
}

/// The mutants of the elected variant, each breaking one condition of the rule.
fn mutants() -> Vec<(&'static str, String)> {
    let e = elected();
    let release =
        "      named_sync 1, 256\n      if %celect {\n        mbar_arrive @empty[%s]\n      }\n";
    vec![
        (
            "arrive before the named barrier",
            e.replace(
                release,
                "      if %celect {\n        mbar_arrive @empty[%s]\n      }\n      named_sync 1, 256\n",
            ),
        ),
        (
            "no named barrier",
            e.replace("      named_sync 1, 256\n", ""),
        ),
        (
            "count 2 with one arrival",
            e.replace(
                "    mbar_init @empty[0], 1\n    mbar_init @empty[1], 1",
                "    mbar_init @empty[0], 2\n    mbar_init @empty[1], 2",
            ),
        ),
        (
            "consumer wait with the previous use's parity",
            e.replace(
                "      mbar_wait @full[%s], %par\n",
                "      %np = xor %par, 1\n      mbar_wait @full[%s], %np\n",
            ),
        ),
        (
            "producer wait with this use's parity",
            e.replace(
                "        mbar_wait @empty[%s], %free\n",
                "        mbar_wait @empty[%s], %par\n",
            ),
        ),
        (
            "consumer `full` wait missing",
            e.replace("      mbar_wait @full[%s], %par\n", ""),
        ),
        (
            "producer `empty` wait missing",
            e.replace("        mbar_wait @empty[%s], %free\n", ""),
        ),
        (
            "arrival elected to a thread outside the group",
            e.replace("%celect = cmp eq %t, 32", "%celect = cmp eq %t, 0"),
        ),
    ]
}

/// A mutant is never proved, and the interpreter finds its race or deadlock.
fn refused_and_wrong(what: &str, m: &str) {
    let k = parse(m);
    if let Ok(why) = prove(&k, None) {
        panic!("{what}: proved ({why})");
    }
    let v = interpret(&k);
    assert!(
        matches!(v, Verdict::Race(_) | Verdict::Deadlock(_)),
        "{what}: interpretation finds nothing wrong ({v:?})"
    );
}

#[test]
fn elected_mutants_are_never_proved_and_interpretation_finds_each() {
    let base = elected();
    for (what, m) in mutants() {
        assert_ne!(m, base, "{what}: the mutation did not apply");
        refused_and_wrong(what, &m);
    }
}

/// Holes a review found in the two-role form, each a kernel the proof must not accept: an
/// arrival in the `else` arm of the elect guard (all the other threads run it, so `empty`
/// over-arrives and its phases run ahead of the reads), and two TMA loads into the same
/// bytes of one slot in one use (a write-write race the tx count balances).
#[test]
fn else_arm_arrivals_and_two_loads_of_one_use_are_not_proved() {
    let e = elected();
    let release = "      if %celect {\n        mbar_arrive @empty[%s]\n      }\n";
    let else_arm = e
        .replace(
            "    mbar_init @empty[0], 1\n    mbar_init @empty[1], 1",
            "    mbar_init @empty[0], 2\n    mbar_init @empty[1], 2",
        )
        .replace(
            release,
            &format!("{release}      if %celect {{\n      }} else {{\n        mbar_arrive @empty[%s]\n      }}\n"),
        );
    let two_loads = e
        .replace(
            "        mbar_arrive @full[%s] tx 1024\n        tma_load %v <- %X[%i, 0], @full[%s]\n",
            "        mbar_arrive @full[%s] tx 2048\n        tma_load %v <- %X[%i, 0], @full[%s]\n        tma_load %v <- %X[%i, 0], @full[%s]\n",
        );
    for (what, m) in [
        ("else-arm arrival", else_arm),
        ("two loads of one use", two_loads),
    ] {
        assert_ne!(m, e, "{what}: the mutation did not apply");
        refused_and_wrong(what, &m);
    }
}

/// The per-thread release of the example needs every reader's arrival after its read: an
/// arrival before the read is not a release.
#[test]
fn a_per_thread_arrival_before_the_read_is_not_proved() {
    let m = EXAMPLE.replace(
        "      %x = load %v[%rev]\n      mbar_arrive @empty[%s]\n",
        "      mbar_arrive @empty[%s]\n      %x = load %v[%rev]\n",
    );
    assert_ne!(m, EXAMPLE);
    let k = parse(&m);
    let why = prove(&k, None).expect_err("proved a racing kernel");
    // The handshake proof's release premise (`check::handshake_release`) declines it first
    // now; the elected-pipeline rule's own reason is the other accepted one.
    assert!(
        why.contains("no release orders")
            || why.contains(
                "no arrival of its threads on an array the other role waits on follows it"
            ),
        "{why}"
    );
    assert!(matches!(interpret(&k), Verdict::Race(_)));
}
