//! `check --grid`: a kernel without `grid(...)` (every imported Triton kernel) is interpreted
//! as block 0 only unless a grid is given; with one, every block of it runs, so a race that
//! only another program meets is found. A grid that contradicts a declared one is E0152.
//! docs/checker.md, "The grid".

use smemsync::{CheckOptions, Outcome};

/// A slot chosen by the program id (`rem pid, 4`, session 34's hostile J3): program 0
/// stores and loads slot 1 in one layout (no race), program 1 also stores slot 1 in another
/// layout between them (a race in block 1 only).
const J3: &str = include_str!("filetests/ttgir/program-id-slot-covers-every-program.kir");

fn j3() -> smemsync::Program {
    smemsync::read_ttgir(J3).expect("imports").0
}

fn check(p: &smemsync::Program, grid: Option<[u32; 3]>) -> Vec<smemsync::Verdict> {
    let mut o = CheckOptions::new(None);
    o.grid = grid;
    smemsync::check(p, &o).expect("checks")
}

#[test]
fn without_a_grid_block_0_only_is_interpreted_and_the_verdict_says_so() {
    let v = check(&j3(), None);
    assert!(v[0].is_race_free(), "{}", v[0].summary);
    assert!(
        v[0].summary.contains("grid unknown: block 0 only"),
        "{}",
        v[0].summary
    );
}

#[test]
fn a_race_only_block_1_meets_is_found_with_grid_2() {
    for grid in [[2, 1, 1], [4, 1, 1], [2, 2, 1]] {
        let v = check(&j3(), Some(grid));
        match &v[0].outcome {
            Outcome::Race(w) => {
                assert_eq!(w.buffer, "x");
                // Programs 1 and 5 (mod 4 = 1) race; the first met is block (1, 0, 0).
                assert_eq!(w.block, [1, 0, 0], "{grid:?}");
            }
            o => panic!(
                "grid {grid:?}: expected a race, got {o:?}: {}",
                v[0].summary
            ),
        }
    }
    // Grid 1 is block 0 only, declared as such: race-free, and the summary names the grid.
    let v = check(&j3(), Some([1, 1, 1]));
    assert!(v[0].is_race_free(), "{}", v[0].summary);
    assert!(v[0].summary.contains("grid=1,"), "{}", v[0].summary);
}

/// The same race in a `.kir` without `grid(...)`: the slot is `bid.x mod 2`.
const KIR: &str = "kernel @k() block(64) {
  shared @a : f32[2, 64]
  %t = tid.x
  %b = bid.x
  %s = rem %b, 2
  %u = sub 63, %t
  store @a[1, %t], 1.0
  store @a[%s, %u], 2.0
}
";

#[test]
fn a_kir_kernel_without_a_grid_races_in_block_1() {
    let p = smemsync::read(KIR).expect("reads");
    assert!(check(&p, None)[0].is_race_free());
    let v = check(&p, Some([2, 1, 1]));
    assert!(
        matches!(&v[0].outcome, Outcome::Race(w) if w.block == [1, 0, 0]),
        "{}",
        v[0].summary
    );
}

#[test]
fn a_grid_that_contradicts_the_declared_one_is_e0152() {
    let src = KIR.replace("block(64)", "block(64) grid(4)");
    let p = smemsync::read(&src).expect("reads");
    let e = smemsync::check(&p, &{
        let mut o = CheckOptions::new(None);
        o.grid = Some([2, 1, 1]);
        o
    })
    .unwrap_err();
    assert_eq!(e.diagnostics()[0].code, "E0152", "{e}");
    // The declared grid itself is accepted (and races: block 1 is in it).
    let v = check(&p, Some([4, 1, 1]));
    assert!(matches!(v[0].outcome, Outcome::Race(_)), "{}", v[0].summary);
    // An empty grid is refused too.
    let p = smemsync::read(KIR).expect("reads");
    let e = smemsync::check(&p, &{
        let mut o = CheckOptions::new(None);
        o.grid = Some([0, 1, 1]);
        o
    })
    .unwrap_err();
    assert_eq!(e.diagnostics()[0].code, "E0152", "{e}");
}

#[test]
fn the_cli_takes_grid_and_refuses_a_malformed_one() {
    let dir = std::env::temp_dir().join(format!("smemsync-check-grid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("j3.ttgir");
    std::fs::write(&f, J3).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_smemsync"))
            .arg("check")
            .args(args)
            .arg(&f)
            .output()
            .expect("runs")
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("grid unknown: block 0 only"));
    let out = run(&["--grid", "2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("C0001"));
    for bad in ["0", "2,x", "1,1,1,1"] {
        assert_eq!(run(&["--grid", bad]).status.code(), Some(2), "--grid {bad}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
