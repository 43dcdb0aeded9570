//! Warp-specialized pipelines whose producer loop is not aligned index for index with the
//! consumers' (docs/async.md, "What `sync` verifies of an mbarrier protocol", *Alignment*;
//! session 34's hostile J1, J1b), and the chain keys of hand-written handshakes
//! (docs/pipeline.md, *Keys*), compared with the race checker's interpreter:
//!
//! - the family: one elected producer thread loads `T` uses into `S` slots through `full`
//!   and waits on `empty` before each refill; 64 consumers wait on `full`, read the slot and
//!   arrive on `empty`. The producer loop is plain (`for %i = 0 to T`), skewed by `d`
//!   (`for %j = 0 to T + d`, `if %j >= d`, use `j − d`: J1), or split into a prologue loop
//!   of `P ≤ S` first uses without a wait and a steady loop (J1b);
//! - the correct plain and skewed kernels are accepted and `sync`'s output is race-free in
//!   the interpreter, and so are the split ones (prologue loads are first fills:
//!   docs/pipeline.md, branch `rolesplit`); no correct kernel gets E0306 or E0307;
//! - each mutant (producer waits with the consumers' parity, consumers' parity flipped,
//!   producer waits on slot 0's `empty` for every slot, consumer arrives before its read, producer's wait
//!   deleted) races or deadlocks in the interpreter and is refused.
//!
//! Debug-build time: see docs/performance.md (section `roles`).

mod common;

use smemsync::check::Verdict;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    Plain,
    Skewed(u32),
    Split(u32),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mutant {
    None,
    ProducerParity,
    ConsumerFlipped,
    SlotZero,
    EarlyArrive,
    NoProducerWait,
}

/// The producer's body for use `%i` (wait on `empty` unless `wait` is false, then load).
fn produce(s: u32, m: Mutant, wait: bool) -> String {
    let mut out =
        format!("%q = div %i, {s}\n%par = rem %q, 2\n%free = xor %par, 1\n%s = rem %i, {s}\n");
    let (slot, par) = match m {
        Mutant::ProducerParity => ("%s", "%par"),
        Mutant::SlotZero => ("0", "%free"),
        _ => ("%s", "%free"),
    };
    if wait && m != Mutant::NoProducerWait {
        out.push_str(&format!("mbar_wait @empty[{slot}], {par}\n"));
    }
    out.push_str(
        "%v = view @buf[%s]\nmbar_arrive @full[%s] tx 256\ntma_load %v <- %X[%i, 0], @full[%s]\n",
    );
    out
}

fn producer(s: u32, t: u32, shape: Shape, m: Mutant) -> String {
    match shape {
        Shape::Plain => format!("for %i = 0 to {t} step 1 {{\n{}}}\n", produce(s, m, true)),
        Shape::Skewed(d) => format!(
            "for %j = 0 to {} step 1 {{\n%go = cmp ge %j, {d}\nif %go {{\n%i = sub %j, {d}\n{}}}\n}}\n",
            t + d,
            produce(s, m, true)
        ),
        Shape::Split(p) => format!(
            "for %i = 0 to {p} step 1 {{\n{}}}\nfor %i = {p} to {t} step 1 {{\n{}}}\n",
            produce(s, Mutant::None, false),
            produce(s, m, true)
        ),
    }
}

fn kernel(s: u32, t: u32, shape: Shape, m: Mutant) -> String {
    let wait = match m {
        Mutant::ConsumerFlipped => "%fl = xor %par, 1\nmbar_wait @full[%s], %fl\n",
        _ => "mbar_wait @full[%s], %par\n",
    };
    let (before, after) = match m {
        Mutant::EarlyArrive => ("mbar_arrive @empty[%s]\n", ""),
        _ => ("", "mbar_arrive @empty[%s]\n"),
    };
    common::TwoRoles {
        rows: t.into(),
        width: 64,
        consumers: 64,
        slots: s,
        inits_by_slot: true,
        producer: producer(s, t, shape, m),
        consumer: format!(
            "{}for %i = 0 to {t} step 1 {{\n%q = div %i, {s}\n%par = rem %q, 2\n%s = rem %i, {s}\n\
             %v = view @buf[%s]\n{wait}{before}%x = load %v[%rev]\n{after}%y = exp %x\n\
             gstore %Y[%i, %c], %y\n}}\n",
            common::two_roles::consumer_lanes(32, 64)
        ),
        ..Default::default()
    }
    .text()
}

/// `sync`'s error codes, or `Ok` after checking its output race-free in the interpreter.
fn sync(name: &str, src: &str) -> Result<(), Vec<String>> {
    common::sync_sm90_race_free(name, src, 1).map(|_| ())
}

#[test]
fn misaligned_producers_match_the_interpreter() {
    let mutants = [
        Mutant::None,
        Mutant::ProducerParity,
        Mutant::ConsumerFlipped,
        Mutant::SlotZero,
        Mutant::EarlyArrive,
        Mutant::NoProducerWait,
    ];
    let mut accepted = 0;
    for s in [1u32, 2] {
        let t = 2 * s + 2;
        let mut shapes = vec![Shape::Plain, Shape::Skewed(1), Shape::Skewed(3)];
        shapes.extend((1..=s).map(Shape::Split));
        for shape in shapes {
            for m in mutants {
                if m == Mutant::SlotZero && s == 1 {
                    continue; // slot 0 is the only slot
                }
                let name = format!("S={s} T={t} {shape:?} {m:?}");
                let src = kernel(s, t, shape, m);
                let got = sync(&name, &src);
                if m == Mutant::None {
                    let input = common::interpret_only(&common::parse_verified_as(&name, &src), 1);
                    assert!(
                        !matches!(input, Verdict::Race(_) | Verdict::Deadlock(_)),
                        "{name}: the correct kernel is {input:?}\n{src}"
                    );
                    assert_eq!(got, Ok(()), "{name}: refused\n{src}");
                    accepted += got.is_ok() as u32;
                } else {
                    assert!(got.is_err(), "{name}: the mutant is accepted\n{src}");
                    let input = common::interpret_only(&common::parse_verified_as(&name, &src), 4);
                    assert!(
                        matches!(input, Verdict::Race(_) | Verdict::Deadlock(_)),
                        "{name}: the mutant is {input:?}\n{src}"
                    );
                }
            }
        }
    }
    assert_eq!(accepted, 9);
}

/// The hostile kernels themselves: J1 and J1b are accepted (their outputs race-free; J1b's
/// prologue loads are first fills, docs/pipeline.md).
#[test]
fn hostile_j1_and_j1b() {
    let j1 = kernel(2, 8, Shape::Skewed(1), Mutant::None);
    assert_eq!(sync("J1", &j1), Ok(()));
    let j1b = kernel(2, 8, Shape::Split(2), Mutant::None);
    assert_eq!(sync("J1b", &j1b), Ok(()));
}

/// A release separated from its access by a loop of the role (outside any loop of the
/// branch) does not order the other role's accesses keyed between them: refused (E0307),
/// where before this branch it was accepted and its output raced.
#[test]
fn a_loop_between_an_access_and_its_release_is_no_chain() {
    let src = "kernel @ws(%Y: global f32[4, 64]) block(96) {
  group @producer : threads [0, 32)
  group @consumers : threads [32, 96)
  shared @buf : f32[1, 64]
  shared @full : mbarrier[1]
  shared @empty : mbarrier[1]
  shared @dummy : mbarrier[1]
  %t = tid.x
  %lead = cmp eq %t, 0
  if %lead {
    mbar_init @full[0], 2
    mbar_init @empty[0], 64
    mbar_init @dummy[0], 1
  }
  barrier
  %isp = in_group @producer
  if %isp {
    %elect = cmp eq %t, 0
    if %elect {
      mbar_wait @empty[0], 1
      store @buf[0, %t], 1.0
      for %q = 0 to 1 step 1 {
        mbar_arrive @dummy[0]
      }
      mbar_arrive @full[0]
    }
  } else {
    %c = sub %t, 32
    for %i = 0 to 1 step 1 {
      mbar_wait @full[0], 1
      %x = load @buf[0, %c]
      mbar_arrive @empty[0]
      gstore %Y[%i, %c], %x
    }
  }
}
";
    let k = common::parse_verified_as("loop-between", src);
    assert!(matches!(common::interpret_only(&k, 4), Verdict::Race(_)));
    let got = sync("loop-between", src);
    assert!(
        matches!(&got, Err(c) if c.contains(&"E0307".to_string())),
        "{got:?}"
    );
}
