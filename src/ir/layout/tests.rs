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
            let text = d.text.as_deref().unwrap_or_default();
            let list = |key: &str| {
                text.split(key).nth(1).map(|t| t[..t.find(']').unwrap()].matches(',').count() + 1)
            };
            let rank = list("order = [").or(list("warpsPerCTA = [")).unwrap_or(2);
            let shape: &[u64] = if rank == 1 { &[256] } else { &[128, 128] };
            let r = decode(&k, &d.name, shape);
            assert!(matches!(r, Ok(Some(_))), "{}: {text}: {r:?}", p.display());
            n += 1;
        }
    }
    assert!(n >= 20, "only {n} encodings found");
}

/// Rows of a `rows x cols` buffer as seen in memory: `table[r][c]` is the row-major number of
/// the element stored at position (r, c).
fn memory_table(m: &AddressMap, rows: u64, cols: u64) -> Vec<Vec<u64>> {
    let mut t = vec![vec![u64::MAX; cols as usize]; rows as usize];
    for e in 0..rows * cols {
        let o = m.offset(e);
        t[(o / cols) as usize][(o % cols) as usize] = e;
    }
    t
}

#[test]
fn amd_rotating_shared_rotates_the_phase_by_block() {
    // vec 1, perPhase 1, maxPhase 4 on 8 x 4: row r XORs its columns with
    // (r mod 4) ^ ((r / 4) mod 4), worked by hand: rows 0..3 use 0, 1, 2, 3; rows 4..7
    // (block 1) use 1, 0, 3, 2.
    let k = kernel_with(
        r#"layout "r" = #ttg.amd_rotating_shared<{vec = 1, perPhase = 1, maxPhase = 4, order = [1, 0]}>"#,
        64,
    );
    let t = memory_table(&shared(&k, "r", &[8, 4]), 8, 4);
    let want: [[u64; 4]; 8] = [
        [0, 1, 2, 3],
        [5, 4, 7, 6],
        [10, 11, 8, 9],
        [15, 14, 13, 12],
        [17, 16, 19, 18],
        [20, 21, 22, 23],
        [27, 26, 25, 24],
        [30, 31, 28, 29],
    ];
    for (r, row) in want.iter().enumerate() {
        assert_eq!(t[r], row.to_vec(), "row {r}");
    }
    // perPhase 2, maxPhase 2: phases 0 0 1 1 0 0 1 1, blocks 0 0 0 0 1 1 1 1.
    let k = kernel_with(
        r#"layout "r" = #ttg.amd_rotating_shared<{vec = 1, perPhase = 2, maxPhase = 2, order = [1, 0]}>"#,
        64,
    );
    let t = memory_table(&shared(&k, "r", &[8, 4]), 8, 4);
    let xors = [0, 0, 1, 1, 1, 1, 0, 0];
    for (r, &x) in xors.iter().enumerate() {
        let row: Vec<u64> = (0..4).map(|c| r as u64 * 4 + (c ^ x)).collect();
        assert_eq!(t[r], row, "row {r}");
    }
}

#[test]
fn amd_rotating_shared_matches_its_definition_formula() {
    // The corpus's gfx942 encoding on a 128 x 64 tile, against the documented definition:
    // phase = (r / perPhase) % maxPhase, block = (r / (perPhase * maxPhase)) % maxPhase,
    // column' = column ^ vec * (phase ^ block) (vec-element groups), row unchanged.
    let (vec, per, max) = (4u64, 1u64, 16u64);
    let k = kernel_with(
        r#"layout "r" = #ttg.amd_rotating_shared<{vec = 4, perPhase = 1, maxPhase = 16, order = [1, 0]}>"#,
        256,
    );
    let m = shared(&k, "r", &[128, 64]);
    for r in 0..128u64 {
        let phase = (r / per) % max;
        let block = (r / (per * max)) % max;
        for c in 0..64u64 {
            let c2 = ((c / vec) ^ (phase ^ block)) * vec + c % vec;
            assert_eq!(m.offset(r * 64 + c), r * 64 + c2 % 64, "({r}, {c})");
        }
    }
    // Transposed order: dimension 0 is contiguous.
    let k = kernel_with(
        r#"layout "r" = #ttg.amd_rotating_shared<{vec = 2, perPhase = 2, maxPhase = 4, order = [0, 1]}>"#,
        256,
    );
    let m = shared(&k, "r", &[32, 16]);
    for i in 0..32u64 {
        for j in 0..16u64 {
            let x = ((j / 2) % 4) ^ ((j / 8) % 4);
            assert_eq!(m.offset(i * 16 + j), j * 32 + (i ^ (2 * x)), "({i}, {j})");
        }
    }
}

#[test]
fn padded_shared_inserts_padding_after_each_interval() {
    let k = kernel_with(
        "layout \"p\" = #ttg.padded_shared<[2:+2] {order = [0], shape = [8]}>\n\
         layout \"q\" = #ttg.padded_shared<[2:+1, 4:+2] {order = [0], shape = [8]}>\n\
         layout \"s\" = #ttg.padded_shared<[2:+2] {offset = [[2], [1]], block = []}>\n\
         layout \"t\" = #ttg.padded_shared<[16:+1] {offset = [[0, 1], [0, 2], [2, 0], [4, 0], [1, 0]], block = []}>",
        64,
    );
    // e0 e1 p p e2 e3 p p ...
    let p = shared(&k, "p", &[8]);
    let offs: Vec<u64> = (0..8).map(|e| p.offset(e)).collect();
    assert_eq!(offs, [0, 1, 4, 5, 8, 9, 12, 13]);
    assert_eq!(p.span(), 14);
    // Two tiers: 1 after every 2, 2 more after every 4: e0 e1 p e2 e3 p p p e4 ...
    let q = shared(&k, "q", &[8]);
    let offs: Vec<u64> = (0..8).map(|e| q.offset(e)).collect();
    assert_eq!(offs, [0, 1, 3, 4, 8, 9, 11, 12]);
    // Strided linear part: memory holds x0 x2 p p x1 x3.
    let s = shared(&k, "s", &[4]);
    let offs: Vec<u64> = (0..4).map(|e| s.offset(e)).collect();
    assert_eq!(offs, [0, 4, 1, 5]);
    // Rows 0, 2, 4, 6 first (16 elements), one padding element, then rows 1, 3, 5, 7.
    let t = shared(&k, "t", &[8, 4]);
    for r in 0..8u64 {
        for c in 0..4u64 {
            let lin = (r % 2) * 16 + (r / 2) * 4 + c;
            assert_eq!(t.offset(r * 4 + c), lin + lin / 16, "({r}, {c})");
        }
    }
    assert!(!t.is_identity());
}

#[test]
fn padded_shared_matches_its_definition_formula_on_a_real_tile() {
    // [32:+4, 128:+8] on 64 x 64 f16, row-major: offset = i + (i / 32) * 4 + (i / 128) * 8.
    let k = kernel_with(
        r#"layout "p" = #ttg.padded_shared<[32:+4, 128:+8] {order = [1, 0], shape = [64, 64]}>"#,
        256,
    );
    let m = shared(&k, "p", &[64, 64]);
    for i in 0..64 * 64u64 {
        assert_eq!(m.offset(i), i + (i / 32) * 4 + (i / 128) * 8);
    }
    // Column-major order.
    let k = kernel_with(
        r#"layout "p" = #ttg.padded_shared<[16:+2] {order = [0, 1], shape = [32, 8]}>"#,
        256,
    );
    let m = shared(&k, "p", &[32, 8]);
    for r in 0..32u64 {
        for c in 0..8u64 {
            let lin = c * 32 + r;
            assert_eq!(m.offset(r * 8 + c), lin + (lin / 16) * 2);
        }
    }
}

#[test]
fn malformed_or_unmodelled_padded_layouts_are_located() {
    let src = r#"layout "p" = #ttg.padded_shared<[3:+2] {order = [0], shape = [8]}>"#;
    let k = kernel_with(src, 64);
    let e = decode(&k, "p", &[8]).unwrap_err();
    assert_eq!((e.code, e.error), ("E1004", true));
    assert_eq!(&src[e.span.lo as usize..e.span.hi as usize], "3:+2");
    let src = r#"layout "p" = #ttg.padded_shared<[4:+2] {order = [0], shape = [16]}>"#;
    let k = kernel_with(src, 64);
    let e = decode(&k, "p", &[8]).unwrap_err();
    assert_eq!((e.code, e.error), ("W1000", false));
    assert_eq!(&src[e.span.lo as usize..e.span.hi as usize], "[16]");
    let src = r#"layout "p" = #ttg.padded_shared<[4:+2] {order = [0, 3], shape = [16]}>"#;
    let k = kernel_with(src, 64);
    let e = decode(&k, "p", &[16]).unwrap_err();
    assert_eq!(e.code, "E1004");
    assert_eq!(&src[e.span.lo as usize..e.span.hi as usize], "3");
    let src = r#"layout "p" = #ttg.padded_shared<[4 +2] {order = [0], shape = [16]}>"#;
    let k = kernel_with(src, 64);
    let e = decode(&k, "p", &[16]).unwrap_err();
    assert_eq!(e.code, "E1004");
    assert_eq!(&src[e.span.lo as usize..e.span.lo as usize + 2], "+2");
    let src = r#"layout "r" = #ttg.amd_rotating_shared<{vec = 4, perPhase = 1, maxPhase = 12, order = [1, 0]}>"#;
    let k = kernel_with(src, 64);
    let e = decode(&k, "r", &[16, 16]).unwrap_err();
    assert_eq!((e.code, e.error), ("W1000", false));
    assert_eq!(&src[e.span.lo as usize..e.span.hi as usize], "12");
}

fn w1004(src: &str) -> Vec<String> {
    let k = parse_kernel(src).unwrap();
    diagnostics(&k, 32)
        .into_iter()
        .filter(|d| d.code == "W1004")
        .map(|d| d.message.clone())
        .collect()
}

#[test]
fn aliasing_warns_only_where_the_layouts_pair_elements_differently() {
    let sw = r#"layout "sw" = #ttg.swizzled_shared<{vec = 2, perPhase = 1, maxPhase = 4, order = [1, 0]}>
layout "sw2" = #ttg.swizzled_shared<{vec = 4, perPhase = 1, maxPhase = 2, order = [1, 0]}>"#;
    let k = |a: &str, b: &str| format!("{sw}\nkernel @k() block(64) {{\n  shared @a : f16[16, 16] at 0{a}\n  shared @b : f16[16, 16] {b}\n}}\n");
    // Same shape, same layout, same offset: element e meets element e either way.
    assert!(w1004(&k(" layout \"sw\"", "at 0 layout \"sw\"")).is_empty());
    // A swizzled buffer over a row-major one, or two different swizzles: pairings differ.
    assert_eq!(w1004(&k(" layout \"sw\"", "at 0")).len(), 1);
    assert_eq!(w1004(&k(" layout \"sw\"", "at 0 layout \"sw2\"")).len(), 1);
    // A layout name without a definition: the address map is unknown (Triton's scratch).
    assert_eq!(w1004(&k(" layout \"sw\"", "at 0 layout \"scratch\"")).len(), 1);
    // No shared byte: nothing to compare.
    assert!(w1004(&k(" layout \"sw\"", "at 512")).is_empty());
    // Unpinned buffers never alias.
    assert!(w1004(&k("", "layout \"sw\"")).is_empty());
    // Rows 8..15 of the swizzled buffer over a row-major 8 x 16 one: row 8's XOR is 0 (8 mod 4
    // = 0), but row 9's is not.
    let src = format!("{sw}\nkernel @k() block(64) {{\n  shared @a : f16[16, 16] at 0 layout \"sw\"\n  shared @b : f16[1, 16] at 256\n}}\n");
    assert!(w1004(&src).is_empty());
    let src = format!("{sw}\nkernel @k() block(64) {{\n  shared @a : f16[16, 16] at 0 layout \"sw\"\n  shared @b : f16[2, 16] at 256\n}}\n");
    assert_eq!(w1004(&src).len(), 1);
}

#[test]
fn a_padded_buffer_aliases_through_its_padding() {
    // 8 x 8 f32 padded by 4 after every 32: it spans 68 elements (272 bytes), so a buffer
    // pinned at byte 256 shares bytes with it although the row-major extent ends at 256.
    let src = "layout \"p\" = #ttg.padded_shared<[32:+4] {order = [1, 0], shape = [8, 8]}>\n\
               kernel @k() block(64) {\n  shared @a : f32[8, 8] at 0 layout \"p\"\n  shared @b : f32[4] at 256\n}\n";
    assert_eq!(w1004(src).len(), 1);
    let src = src.replace("at 256", "at 272");
    assert!(w1004(&src).is_empty());
}

/// docs/ir.md's worked example of a role-relative layout: `#mma` with 4 warps bound to the
/// third role of a 384-thread block writes element (37, 90) from block thread 256 + 85.
#[test]
fn role_relative_layout_offsets_its_threads_by_the_group() {
    let src = r#"kernel @k() block(384) {
  group @p0 : threads [0, 256)
  group @p1 : threads [256, 384)
  layout "mma" = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>
  layout "mma_p1" in @p1 = #mma
  layout "mma_p0" in @p0 = #mma
}
"#;
    let k = parse_kernel(src).unwrap();
    let e = 37 * 128 + 90;
    match ownership(&k, Some("mma_p1"), &[64, 128], 32) {
        Ownership::Concrete(o) => {
            assert_eq!(o.first, 256);
            assert_eq!(o.owners.writer(e), 85);
            assert_eq!(o.writer(e), 341);
        }
        Ownership::Opaque(i) => panic!("{i:?}"),
    }
    assert_eq!(layout_threads(&k, Some("mma_p1")), LayoutThreads { first: 256, count: 128 });
    assert_eq!(layout_threads(&k, Some("mma")), LayoutThreads { first: 0, count: 384 });
    // The unbound layout does not fit the block (W1002); bound to a group of another size it
    // is the author's error (E1621).
    assert!(matches!(ownership(&k, Some("mma"), &[64, 128], 32), Ownership::Opaque(Some(i)) if i.code == "W1002"));
    assert!(matches!(ownership(&k, Some("mma_p0"), &[64, 128], 32), Ownership::Opaque(Some(i)) if i.code == "E1621" && i.error));
}
