//! Families of translated pair questions (`symbolic::pairs`, docs/symbolic.md "Families"):
//! accesses whose unit forms differ only by a constant share one family, whose gaps (the
//! differences at which no instance pair meets) are computed once and answer the members
//! that fall in them without a solve. On random kernels of unrolled-copy-like accesses (one
//! base form plus a constant, inside or outside `div`/`rem`, into a two-slot ring indexed by
//! a loop variable), every pair question and every pinned intersection answered with the
//! families must equal the answer with one solve per member (families off) and the
//! enumeration's.

use proptest::prelude::*;
use smemsync::analysis::conflicts::pair_conflict_enumerated;
use smemsync::analysis::footprint::Footprints;
use smemsync::analysis::symbolic::pairs;

mod common;
use common::parse_verified;

/// One access: a store or a load at `base + c` (`wrap`: 0 plain, 1 `div`, 2 `rem` by `m`).
#[derive(Debug, Clone)]
struct Acc {
    store: bool,
    c: i64,
    wrap: u8,
    col: u8,
}

#[derive(Debug, Clone)]
struct Spec {
    block: u32,
    rows: i64,
    m: i64,
    base: u8,
    looped: bool,
    ring: bool,
    accs: Vec<Acc>,
}

fn spec() -> impl Strategy<Value = Spec> {
    let acc = (any::<bool>(), 0i64..40, 0u8..3, 0u8..9).prop_map(|(store, c, wrap, col)| Acc {
        store,
        c,
        wrap,
        col,
    });
    (
        prop::sample::select(vec![16u32, 32, 64]),
        prop::sample::select(vec![64i64, 128]),
        prop::sample::select(vec![2i64, 4, 8]),
        0u8..4,
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(acc, 2..7),
    )
        .prop_map(|(block, rows, m, base, looped, ring, accs)| Spec {
            block,
            rows,
            m,
            base,
            looped,
            ring,
            accs,
        })
}

fn text(s: &Spec) -> String {
    let mut body = vec![
        "%t = tid.x".to_string(),
        "%f = itof %t".to_string(),
        "%h = rem %t, 8".to_string(),
    ];
    if s.looped {
        body.push("for %i = 0 to 4 step 1 {".into());
        body.push("%s = rem %i, 2".into());
    }
    body.push(match s.base {
        0 => "%g = rem %t, 16".into(),
        1 => "%g = div %t, 4".into(),
        2 => "%g0 = rem %t, 8\n  %g = mul %g0, 2".into(),
        _ => "%g = shr %t, 1".into(),
    });
    for (j, a) in s.accs.iter().enumerate() {
        body.push(format!("%o{j} = add %g, {}", a.c));
        body.push(match a.wrap {
            0 => format!("%x{j} = add %o{j}, 0"),
            1 => format!("%x{j} = div %o{j}, {}", s.m),
            _ => format!("%x{j} = rem %o{j}, {}", s.m),
        });
        let col = if a.col == 8 {
            "%h".to_string()
        } else {
            a.col.to_string()
        };
        let slot = if s.looped && s.ring { "%s" } else { "0" };
        let idx = format!("{slot}, %x{j}, {col}");
        body.push(if a.store {
            format!("store @a[{idx}], %f")
        } else {
            format!("%v{j} = load @a[{idx}]")
        });
    }
    if s.looped {
        body.push("}".into());
    }
    let mut out = format!(
        "kernel @k() block({}) {{\n  shared @a : f32[2, {}, 8]\n",
        s.block, s.rows
    );
    for l in body {
        out.push_str(&format!("  {l}\n"));
    }
    out.push_str("}\n");
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn family_answers_equal_one_solve_per_member_and_enumeration(s in spec()) {
        let src = text(&s);
        let k = parse_verified(&src);
        let fam = Footprints::new(&k, 32);
        let one = Footprints::new(&k, 32);
        let mut en = Footprints::new(&k, 32);
        let n = fam.accesses.len();
        for ai in 0..n {
            for bi in 0..n {
                let common = fam.accesses[ai].loops.len().min(fam.accesses[bi].loops.len());
                for plen in 0..=common {
                    for var in std::iter::once(None).chain((0..plen).map(Some)) {
                        pairs::set_families(true);
                        let f = pairs::pair_conflict(&fam, ai, bi, plen, var);
                        pairs::set_families(false);
                        let o = pairs::pair_conflict(&one, ai, bi, plen, var);
                        pairs::set_families(true);
                        let key = |p: &smemsync::analysis::conflicts::PairConflict| {
                            (p.conflict, p.intersect, p.intra_warp)
                        };
                        prop_assert_eq!(f.as_ref().map(key), o.as_ref().map(key), "{} -> {} plen {} var {:?}\n{}", ai, bi, plen, var, src);
                        if let Some(f) = f {
                            let e = pair_conflict_enumerated(&mut en, ai, bi, plen, var);
                            prop_assert_eq!(key(&f), key(&e), "{} -> {} plen {} var {:?} (enumerated)\n{}", ai, bi, plen, var, src);
                        }
                    }
                    pairs::set_families(true);
                    let f = pairs::intersects_at(&fam, ai, bi, plen, None);
                    pairs::set_families(false);
                    let o = pairs::intersects_at(&one, ai, bi, plen, None);
                    pairs::set_families(true);
                    prop_assert_eq!(f, o, "meets {} -> {} plen {}\n{}", ai, bi, plen, src);
                }
            }
        }
    }
}
