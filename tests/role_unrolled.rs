//! Warp-specialized shapes `sync` refused falsely (session 36's hostile L2, L11, L12, K2b's
//! correct form) and the looped role branch's buffers compared by bytes, each against the
//! race checker's interpreter (docs/async.md, branch `roles37`):
//!
//! - L2: a role loop unrolled by 2 (two slot uses per iteration), the producer's, the
//!   consumers' or both: the strided keys of `mbar_protocol` with one thread class align
//!   them. Correct kernels are accepted and `sync`'s output is race-free; mutants (a wait
//!   removed, a parity flipped, an arrival before the read) on the second use of the
//!   unrolled iteration race or deadlock in the interpreter and are refused.
//! - L11: the slot fill/read in an inner `for %j` between the role loop's wait and arrival;
//!   K2b: `cp_async` copies in a loop, then `cp_async_commit; cp_async_wait 0;
//!   mbar_arrive` (`handshake_chain`'s `runs_around`).
//! - L12: the consumers' parity as an `if` result (the trace evaluates the taken arm).
//! - A tile loop around the role branch whose consumers read the slot through a pinned alias
//!   of the producer's buffer: checked like the same buffer (accepted; an early arrival
//!   refused).
//!
//! Debug-build time: see docs/performance.md (section `roles37`).

mod common;

use smemsync::check::Verdict;

const L2: &str = include_str!("hostile_l/l2-unrolled-consumer-loop.kir");
const L11: &str = include_str!("hostile_l/l11-access-in-inner-loop-below-its-handshake.kir");
const L12: &str = include_str!("hostile_l/l12-parity-from-an-if-result.kir");
const K2B: &str =
    include_str!("hostile_l/k2b-cp-async-copies-in-a-loop-then-commit-wait-arrive.kir");

/// Whether the interpreter finds `src` racing or deadlocking.
fn bad(name: &str, src: &str) -> bool {
    let k = common::parse_verified_as(name, src);
    matches!(
        common::interpret_only(&k, 4),
        Verdict::Race(_) | Verdict::Deadlock(_)
    )
}

/// Asserts `src` accepted (its output race-free: `sync_sm90_race_free`).
fn accepted(name: &str, src: &str) {
    let r = common::sync_sm90_race_free(name, src, 4);
    assert!(r.is_ok(), "{name}: refused {r:?}\n{src}");
}

/// Asserts the mutant `src` is wrong (the interpreter finds it) and refused.
fn refused(name: &str, src: &str) {
    assert!(
        bad(name, src),
        "{name}: the mutant is not caught by the interpreter\n{src}"
    );
    let r = common::sync_sm90_race_free(name, src, 4);
    assert!(r.is_err(), "{name}: a racing kernel accepted\n{src}");
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mutant {
    None,
    NoWait,
    Flipped,
    EarlyArrive,
    NoProducerWait,
    ProducerFlipped,
}

/// The producer's use `i` (name suffix `n`); mutants touch use 1 only.
fn produce(i: &str, n: u32, m: Mutant) -> String {
    let m = if n == 1 { m } else { Mutant::None };
    let free = if m == Mutant::ProducerFlipped {
        "%pp"
    } else {
        "%pf"
    };
    let wait = match m {
        Mutant::NoProducerWait => String::new(),
        _ => format!("mbar_wait @empty[%ps{n}], {free}{n}\n"),
    };
    format!(
        "%pq{n} = div {i}, 2\n%pp{n} = rem %pq{n}, 2\n%pf{n} = xor %pp{n}, 1\n%ps{n} = rem {i}, 2\n{wait}\
         %pv{n} = view @buf[%ps{n}]\nmbar_arrive @full[%ps{n}] tx 1024\ntma_load %pv{n} <- %X[{i}, 0], @full[%ps{n}]\n"
    )
}

/// The consumers' use `i` (name suffix `n`); mutants touch use 1 only.
fn consume(i: &str, n: u32, m: Mutant) -> String {
    let m = if n == 1 { m } else { Mutant::None };
    let par = if m == Mutant::Flipped {
        format!("%cf{n}")
    } else {
        format!("%cp{n}")
    };
    let wait = match m {
        Mutant::NoWait => String::new(),
        _ => format!("mbar_wait @full[%cs{n}], {par}\n"),
    };
    let arrive = format!("mbar_arrive @empty[%cs{n}]\n");
    let (early, late) = if m == Mutant::EarlyArrive {
        (arrive.as_str(), "")
    } else {
        ("", arrive.as_str())
    };
    format!(
        "%cq{n} = div {i}, 2\n%cp{n} = rem %cq{n}, 2\n%cf{n} = xor %cp{n}, 1\n%cs{n} = rem {i}, 2\n%cv{n} = view @buf[%cs{n}]\n{wait}\
         {early}%cx{n} = load %cv{n}[%rev]\n{late}%cy{n} = exp %cx{n}\ngstore %Y[{i}, %c], %cy{n}\n"
    )
}

/// The role loop over 8 uses, unrolled by 2 or not, with `body(i, n)` per use.
fn role_loop(unrolled: bool, body: impl Fn(&str, u32) -> String) -> String {
    if unrolled {
        format!(
            "for %k = 0 to 4 step 1 {{\n%i0 = mul %k, 2\n%i1 = add %i0, 1\n{}{}}}\n",
            body("%i0", 0),
            body("%i1", 1)
        )
    } else {
        format!("for %i = 0 to 8 step 1 {{\n{}}}\n", body("%i", 1))
    }
}

/// examples/tma-warp-specialized.kir with the producer's and/or the consumers' loop unrolled
/// by 2, the producer's mutants in `pm`, the consumers' in `cm`.
fn ws(pu: bool, cu: bool, pm: Mutant, cm: Mutant) -> String {
    common::TwoRoles {
        producer: role_loop(pu, |i, n| produce(i, n, pm)),
        consumer: common::two_roles::consumer_lanes(32, 256)
            + &role_loop(cu, |i, n| consume(i, n, cm)),
        ..Default::default()
    }
    .text()
}

#[test]
fn l2_unrolled_role_loops_are_aligned() {
    accepted("L2", L2);
    for (pu, cu) in [(false, false), (true, false), (false, true), (true, true)] {
        let name = format!("ws pu={pu} cu={cu}");
        accepted(&name, &ws(pu, cu, Mutant::None, Mutant::None));
        for cm in [Mutant::NoWait, Mutant::Flipped, Mutant::EarlyArrive] {
            refused(
                &format!("{name} consumers {cm:?}"),
                &ws(pu, cu, Mutant::None, cm),
            );
        }
        for pm in [Mutant::NoProducerWait, Mutant::ProducerFlipped] {
            refused(
                &format!("{name} producer {pm:?}"),
                &ws(pu, cu, pm, Mutant::None),
            );
        }
    }
}

#[test]
fn l2_the_hostile_kernel_mutants() {
    // The second use's wait removed, its parity flipped, its arrival before the read.
    let wait = "      mbar_wait @full[1], %q\n";
    refused("L2 no wait", &L2.replace(wait, ""));
    refused(
        "L2 flipped",
        &L2.replace(
            wait,
            "      %qf = xor %q, 1\n      mbar_wait @full[1], %qf\n",
        ),
    );
    let late = "      %x1 = load %v1[%rev]\n      mbar_arrive @empty[1]\n";
    refused(
        "L2 early",
        &L2.replace(
            late,
            "      mbar_arrive @empty[1]\n      %x1 = load %v1[%rev]\n",
        ),
    );
}

#[test]
fn l11_accesses_in_an_inner_loop_between_wait_and_arrival() {
    accepted("L11", L11);
    let cwait = "      mbar_wait @full[%s], %hs_par1\n";
    refused("L11 no consumer wait", &L11.replace(cwait, ""));
    refused(
        "L11 producer parity",
        &L11.replace(
            "mbar_wait @empty[%s], %hs_free0",
            "mbar_wait @empty[%s], %hs_par0",
        ),
    );
    // The producer's arrival before its inner loop (before the fill).
    let arrive = "      mbar_arrive @full[%s]\n";
    let early = L11.replacen(arrive, "", 1).replacen(
        "      mbar_wait @empty[%s], %hs_free0\n",
        "      mbar_wait @empty[%s], %hs_free0\n      mbar_arrive @full[%s]\n",
        1,
    );
    refused("L11 early producer arrival", &early);
    // The consumers' arrival before their inner loop.
    let early = L11
        .replacen("      mbar_arrive @empty[%s]\n", "", 1)
        .replacen(cwait, &format!("{cwait}      mbar_arrive @empty[%s]\n"), 1);
    refused("L11 early consumer arrival", &early);
}

#[test]
fn k2b_copies_in_a_loop_then_commit_wait_arrive() {
    accepted("K2b", K2B);
    refused(
        "K2b no cp_async_wait",
        &K2B.replace("    cp_async_wait 0\n", ""),
    );
    // The arrival before the copies' loop.
    let moved = K2B
        .replace(
            "    cp_async_wait 0\n    mbar_arrive @full[0]\n",
            "    cp_async_wait 0\n",
        )
        .replace("  if %isp {\n", "  if %isp {\n    mbar_arrive @full[0]\n");
    refused("K2b early arrival", &moved);
}

#[test]
fn l12_parity_from_an_if_result() {
    accepted("L12", L12);
    let swapped = L12.replace(
        "        yield 1\n      } else {\n        yield 0\n",
        "        yield 0\n      } else {\n        yield 1\n",
    );
    refused("L12 arms swapped", &swapped);
    // The producer's `free` parity as an `if` result too.
    let both = L12.replace(
        "        %free = xor %par, 1\n",
        "        %pc = cmp eq %par, 0\n        %free = if %pc {\n          yield 1\n        } else {\n          yield 0\n        }\n",
    );
    accepted("L12 both", &both);
}

/// One slot, one use per tile, the consumers reading it through `@alias` pinned at the bytes
/// of the producer's `@buf` (or through `@buf`).
fn aliased_tile_loop(view: &str, early: bool) -> String {
    common::two_roles::one_slot_tile_loop(view, true, early)
}

/// The early arrival through the alias is refused for the missing chain (E0307; before, only
/// the in-flight check's E0302 refused it, by accident). The correct kernel through the alias
/// is accepted like the one through `@buf` (branch `attnw318`: the hazard finder leaves a
/// cross-role pair on two buffers that share bytes to the chains the chain check verified on
/// both, as it did for one buffer; before, E0302 refused it falsely), and so is its variant
/// whose consumers also write the slot through the alias before reading it (its output
/// race-free); without the consumers' wait it races and is refused.
#[test]
fn looped_role_branches_compare_buffers_by_bytes() {
    accepted("@buf", &aliased_tile_loop("@buf", false));
    let twin = aliased_tile_loop("@alias", false);
    assert!(!bad("@alias", &twin));
    accepted("@alias", &twin);
    let writes = twin.replace(
        "%x = load %v[%rev]\n",
        "store %v[%rev], 1.0\n%x = load %v[%rev]\n",
    );
    assert_ne!(writes, twin);
    // Its input lacks the proxy fence between the consumers' write and the next TMA refill
    // (the interpreter's C0013), which `sync` places as for `@buf`.
    accepted("@alias writes", &writes);
    refused(
        "@alias no wait",
        &twin.replace("mbar_wait @full[0], %par\n", ""),
    );
    for view in ["@buf", "@alias"] {
        let early = aliased_tile_loop(view, true);
        assert!(bad(view, &early), "{early}");
        let r = common::sync_sm90_race_free(view, &early, 4);
        assert_eq!(r.err(), Some(vec!["E0307".to_string()]), "{view}");
    }
}
