//! The in-flight overlap question's memo (`symbolic::overlap::Store`, docs/symbolic.md
//! "Translated in-flight questions share one answer") against enumeration: on small random
//! kernels whose async copies, loads and stores index a buffer by one base form of the thread
//! id and a loop variable (affine, `div`, `rem`, `xor` parts) plus a random constant (outside
//! the operation or inside a `div`/`rem`/`xor`), in a loop whose slot is `rem %i, 3` or its
//! successor, every ordered pair of accesses is asked under random iteration tags (`Dist(d)`,
//! `Unknown`, `Pre(j)`, none) of ONE memoising engine, so that translated accesses meet
//! answers remembered for their translates; each answer and the W0314 notes must equal those
//! of the enumerating engine (`Overlap::symbolic = false`). proptest draws the kernels and
//! shrinks a failure to a small one.

use proptest::prelude::*;
use smemsync::analysis::overlap::IterTag;

mod common;
use common::{OverlapOracle, parse_verified};

/// One access: kind (0 copy, 1 load, 2 store), constant offset, where the constant goes
/// (0: outside, 1: inside `div`, 2: inside `rem`, 3: inside `xor`), and whether it indexes
/// the next slot.
type AccessSpec = (u8, i64, u8, bool);

/// A random kernel: block size, trip count, base form, divisor, the accesses.
#[derive(Clone, Debug)]
struct Spec {
    block: u32,
    trip: u32,
    base: u8,
    m: i64,
    accesses: Vec<AccessSpec>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::sample::select(vec![8u32, 16, 32, 64]),
        1u32..6,
        0u8..6,
        prop::sample::select(vec![2i64, 4, 8]),
        prop::collection::vec((0u8..3, -3i64..40, 0u8..4, any::<bool>()), 2..7),
    )
        .prop_map(|(block, trip, base, m, accesses)| Spec {
            block,
            trip,
            base,
            m,
            accesses,
        })
}

fn text(s: &Spec) -> String {
    let base = match s.base {
        0 => "add %t, 0".to_string(),
        1 => "mul %t, 2".to_string(),
        2 => format!("div %t, {}", s.m),
        3 => "add %t, %i".to_string(),
        4 => "xor %h, 5".to_string(),
        _ => format!("rem %t, {}", 4 * s.m),
    };
    let mut body = vec![
        "%t = tid.x".to_string(),
        "%f = itof %t".to_string(),
        "%h = rem %t, 16".to_string(),
        format!("for %i = 0 to {} step 1 {{", s.trip),
        "%s0 = rem %i, 3".to_string(),
        "%n = add %i, 1".to_string(),
        "%s1 = rem %n, 3".to_string(),
        format!("%b = {base}"),
        "%g = rem %b, 32".to_string(),
    ];
    for (j, &(kind, c, wrap, next)) in s.accesses.iter().enumerate() {
        let ix = match wrap {
            0 => format!("add %g, {c}"),
            1 => {
                body.push(format!("%o{j} = add %g, {c}"));
                format!("div %o{j}, {}", s.m)
            }
            2 => {
                body.push(format!("%o{j} = add %g, {c}"));
                format!("rem %o{j}, {}", s.m)
            }
            _ => {
                body.push(format!("%o{j} = add %g, {}", c.rem_euclid(8)));
                format!("xor %o{j}, {}", c.rem_euclid(16))
            }
        };
        body.push(format!("%x{j} = {ix}"));
        let slot = if next { "%s1" } else { "%s0" };
        body.push(match kind {
            0 => format!("cp_async @a[{slot}, %x{j}] <- %A[%t]"),
            1 => format!("%v{j} = load @a[{slot}, %x{j}]"),
            _ => format!("store @a[{slot}, %x{j}], %f"),
        });
    }
    body.push("}".into());
    let mut out = format!(
        "kernel @k(%A: global f32[4096]) block({}) {{\n  shared @a : f32[3, 80]\n",
        s.block
    );
    for l in body {
        out.push_str(&format!("  {l}\n"));
    }
    out.push_str("}\n");
    out
}

/// The tag of the loop for one query, from a drawn byte.
fn tag(b: u8) -> Option<IterTag> {
    match b % 8 {
        0..=2 => Some(IterTag::Dist(u32::from(b % 8))),
        3 => Some(IterTag::Unknown),
        4 | 5 => Some(IterTag::Pre(u32::from(b % 2))),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn memoised_overlap_answers_equal_enumeration(s in spec(), tags in prop::collection::vec(any::<u8>(), 64)) {
        let src = text(&s);
        let k = parse_verified(&src);
        let mut o = OverlapOracle::new(&k);
        let r = o.compare_every_pair(&k, |n, loops| {
            tag(tags[n % tags.len()]).map(|g| (loops[0], g)).into_iter().collect()
        });
        prop_assert!(r.is_ok(), "{} in\n{}", r.unwrap_err(), src);
    }
}

/// The memo is used: on a kernel of eight translated copies and eight translated loads, the
/// engine answers every query, and the answers still equal enumeration's.
#[test]
fn translated_copies_are_answered_symbolically() {
    let s = Spec {
        block: 32,
        trip: 4,
        base: 2,
        m: 4,
        accesses: (0..16)
            .map(|j| ((j % 2) as u8, 4 * j as i64, 1, j % 3 == 0))
            .collect(),
    };
    let k = parse_verified(&text(&s));
    let mut o = OverlapOracle::new(&k);
    // The symbolic memo is what this test is about: without the per-dimension test, which
    // would answer the pairs of different slots before the engine is asked.
    o.sym.dims = false;
    let asked = (o.compare_every_pair(&k, |_, loops| vec![(loops[0], IterTag::Dist(1))]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o.sym.answered.get(), asked);
}
