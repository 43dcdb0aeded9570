//! Decoding checked against hand-computed owners and the enumeration oracle.

use super::*;
use crate::reader::parse_kernel;

fn kernel_with(defs: &str, threads: u32) -> Kernel {
    let src = format!("{defs}\nkernel @k() block({threads}) {{\n}}\n");
    parse_kernel(&src).unwrap()
}

fn dist(k: &Kernel, name: &str, shape: &[u64]) -> Distributed {
    match decode(k, name, shape) {
        Ok(Some(Decoded::Distributed(d))) => d,
        other => panic!("{name}: {other:?}"),
    }
}

const BLOCKED1: &str = r#"layout "blocked1" = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [8, 1], order = [1, 0]}>"#;
const MMA: &str = r#"layout "mma" = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [8, 1], instrShape = [16, 128, 16]}>"#;

/// The oracle: every element's holders by enumeration agree with the linear writer map (the
/// lowest holder writes) and its holder span.
fn agrees_with_oracle(d: &Distributed) {
    let m = d.owner_map().expect("onto");
    for (e, hs) in d.holders().iter().enumerate() {
        assert!(!hs.is_empty(), "element {e} has no holder");
        assert_eq!(hs[0], m.writer(e as u64), "writer of element {e}");
        assert_eq!(hs.len(), 1 << m.shifts.len(), "holders of element {e}");
    }
}

#[test]
fn blocked_owner_is_computed_from_lane_and_warp_bits() {
    let k = kernel_with(BLOCKED1, 256);
    let d = dist(&k, "blocked1", &[128, 64]);
    let m = d.owner_map().unwrap();
    // Element (37, 19): lane = (37 % 4) * 8 + 19 / 8 = 10, warp = (37 / 4) % 8 = 1.
    assert_eq!(m.writer(37 * 64 + 19), 32 + 10);
    // The tile covers 32 rows: rows 32 apart are registers of the same thread.
    assert_eq!(m.writer(5 * 64 + 3), m.writer(37 * 64 + 3));
    assert!(m.shifts.is_empty());
    agrees_with_oracle(&d);
}

#[test]
fn a_blocked_layout_larger_than_the_tile_broadcasts_and_a_smaller_one_wraps() {
    let k = kernel_with(
        r#"layout "b" = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>"#,
        128,
    );
    let small = dist(&k, "b", &[64]);
    let m = small.owner_map().unwrap();
    assert_eq!(m.shifts, vec![64]);
    assert!(!m.holders_in_one_warp(32));
    assert_eq!(small.holders()[5], vec![5, 69]);
    agrees_with_oracle(&small);
    let big = dist(&k, "b", &[256]);
    let m = big.owner_map().unwrap();
    assert_eq!((m.writer(7), m.writer(135)), (7, 7));
    agrees_with_oracle(&big);
}

#[test]
fn an_mma_v3_accumulator_gives_rows_to_warps_and_column_pairs_to_lanes() {
    let k = kernel_with(MMA, 256);
    let d = dist(&k, "mma", &[128, 128]);
    let m = d.owner_map().unwrap();
    // (37, 90): lane = ((90 >> 1) & 3) | (37 & 7) << 2 = 21, warp = (37 >> 4) & 7 = 2.
    assert_eq!(m.writer(37 * 128 + 90), 2 * 32 + 21);
    assert_eq!(d.registers(), 64);
    agrees_with_oracle(&d);
}

#[test]
fn slices_broadcast_within_a_warp() {
    let k = kernel_with(
        &format!("{BLOCKED1}\nlayout \"s\" = #ttg.slice<{{dim = 1, parent = #blocked1}}>"),
        256,
    );
    let d = dist(&k, "s", &[128]);
    let m = d.owner_map().unwrap();
    assert_eq!(m.shifts.len(), 3);
    assert!(m.holders_in_one_warp(32));
    agrees_with_oracle(&d);
}

#[test]
fn different_encodings_with_the_same_owners_have_the_same_writer_map() {
    // The blocked layout above written as explicit bases, registers in another order.
    let lin = r#"layout "lin" = #ttg.linear<{register = [[0, 4], [0, 1], [0, 2], [32, 0], [64, 0]], lane = [[0, 8], [0, 16], [0, 32], [1, 0], [2, 0]], warp = [[4, 0], [8, 0], [16, 0]], block = []}>"#;
    let k = kernel_with(&format!("{BLOCKED1}\n{lin}"), 256);
    let a = dist(&k, "blocked1", &[128, 64]).owner_map().unwrap();
    let b = dist(&k, "lin", &[128, 64]).owner_map().unwrap();
    assert_eq!(a, b);
}

#[test]
fn dot_operands_and_amd_layouts_match_the_oracle() {
    let defs = format!(
        "{MMA}\nlayout \"a\" = #ttg.dot_op<{{opIdx = 0, parent = #mma, kWidth = 2}}>\n\
         layout \"mf\" = #ttg.amd_mfma<{{version = 3, warpsPerCTA = [2, 4], instrShape = [32, 32, 8], isTransposed = true}}>\n\
         layout \"b\" = #ttg.dot_op<{{opIdx = 1, parent = #mf, kWidth = 4}}>\n\
         layout \"w\" = #ttg.amd_wmma<{{version = 2, isTranspose = false, warpsPerCTA = [2, 2]}}>"
    );
    let k = kernel_with(&defs, 256);
    let a = dist(&k, "a", &[128, 64]);
    assert_eq!((a.lanes(), a.warps()), (32, 8));
    agrees_with_oracle(&a);
    let mf = dist(&k, "mf", &[64, 128]);
    assert_eq!((mf.lanes(), mf.warps()), (64, 8));
    agrees_with_oracle(&mf);
    let b = dist(&k, "b", &[64, 128]);
    agrees_with_oracle(&b);
    let w = dist(&k, "w", &[32, 32]);
    assert_eq!((w.lanes(), w.warps()), (32, 4));
    agrees_with_oracle(&w);
}

fn shared(k: &Kernel, name: &str, shape: &[u64]) -> AddressMap {
    match decode(k, name, shape) {
        Ok(Some(Decoded::Shared(m))) => m,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn nvmma_shared_swizzles_16_byte_vectors_by_row() {
    let k = kernel_with(
        r#"layout "s" = #ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>"#,
        128,
    );
    let m = shared(&k, "s", &[128, 64]);
    for r in 0..128u64 {
        for c in 0..64u64 {
            assert_eq!(m.offset(r * 64 + c), r * 64 + (c ^ ((r % 8) * 8)), "({r}, {c})");
        }
    }
}

#[test]
fn swizzled_shared_xors_the_contiguous_dimension_by_phase() {
    let k = kernel_with(
        r#"layout "s" = #ttg.swizzled_shared<{vec = 4, perPhase = 1, maxPhase = 16, order = [0, 1]}>"#,
        128,
    );
    let m = shared(&k, "s", &[64, 64]);
    for i in 0..64u64 {
        for j in 0..64u64 {
            assert_eq!(m.offset(i * 64 + j), j * 64 + (i ^ ((j % 16) * 4)));
        }
    }
}

#[test]
fn bad_text_is_located_and_unknown_encodings_are_warnings() {
    let src = "layout \"b\" = #ttg.blocked<{sizePerThread = [1, 3], threadsPerWarp = [4, 8], warpsPerCTA = [8, 1], order = [1, 0]}>";
    let k = kernel_with(src, 256);
    let e = decode(&k, "b", &[128, 64]).unwrap_err();
    assert!(e.error);
    assert_eq!(e.code, "E1004");
    assert_eq!(&src[e.span.lo as usize..e.span.hi as usize], "3");
    let k = kernel_with(r#"layout "x" = #ttg.fancy<{a = 1}>"#, 256);
    let e = decode(&k, "x", &[16]).unwrap_err();
    assert_eq!((e.code, e.error), ("W1000", false));
    let k = kernel_with(r#"layout "x" = #ttg.slice<{dim = 0, parent = #y}>"#, 256);
    assert_eq!(decode(&k, "x", &[16]).unwrap_err().code, "E1002");
    let k = kernel_with("layout \"x\" = #ttg.slice<{dim = 0, parent = #x}>", 256);
    assert_eq!(decode(&k, "x", &[16]).unwrap_err().code, "E1003");
}

#[test]
fn every_encoding_of_the_triton_corpus_decodes() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/triton");
    let mut n = 0;
    for f in std::fs::read_dir(dir).unwrap() {
        let p = f.unwrap().path();
        if p.extension().is_none_or(|e| e != "ttgir") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let amd = p.to_string_lossy().contains("gfx");
        let defs: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with('#') && l.contains(" = #ttg.") && !l.contains("shared_memory"))
            .map(|l| {
                let (name, attr) = l.split_once(" = ").unwrap();
                format!("layout \"{}\" = {}", &name[1..], attr)
            })
            .collect();
        let k = kernel_with(&defs.join("\n"), if amd { 256 } else { 128 });
        for d in &k.layouts {
            if d.text.contains("amd_rotating_shared") {
                continue;
            }
            let list = |key: &str| {
                d.text.split(key).nth(1).map(|t| t[..t.find(']').unwrap()].matches(',').count() + 1)
            };
            let rank = list("order = [").or(list("warpsPerCTA = [")).unwrap_or(2);
            let shape: &[u64] = if rank == 1 { &[256] } else { &[128, 128] };
            let r = decode(&k, &d.name, shape);
            assert!(matches!(r, Ok(Some(_))), "{}: {}: {r:?}", p.display(), d.text);
            n += 1;
        }
    }
    assert!(n >= 20, "only {n} encodings found");
}
