//! Tile-loop trip counts of persistent warp-specialized kernels (docs/async.md, "Tile-loop
//! trip counts"; session 37's hostile M7 and M8):
//!
//! - M8: the consumers' tile loop carries a tile count and, from a threshold on, releases each
//!   slot before reading it. With `%tiles` ranged and the grid declared, every trip count the
//!   ranges allow is traced (exact); without, the search runs past the threshold. Either way
//!   `sync` refuses it where the break is reachable, and the interpreter (the oracle) finds
//!   the kernel broken there; where the threshold lies beyond every reachable tile count the
//!   ranged kernel is verified exactly and its output is race-free.
//! - M7: the consumers' tile loop runs the producer's trip count written another way
//!   (`0 to %tiles − bid.x`, `add bid.x, 0`, `add %tiles, 0`, doubled bounds and step): one
//!   searched unknown, accepted, the output race-free; a loop of other trips is refused.

mod common;

use common::smemsync_with_stdin as run;

const M8: &str = include_str!("tile_loop_trips/m8-tile-protocol-breaks-at-the-6th-tile.kir");
const M7: &str = include_str!("tile_loop_trips/m7-same-trips-different-bounds.kir");

/// `text` with `from` replaced once (which must occur exactly once).
fn edit(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{from}");
    text.replacen(from, to, 1)
}

/// M8 without the declared range and grid.
fn m8_unranged() -> String {
    let t = edit(M8, "%tiles: i32 in [0, 24] = 6", "%tiles: i32 = 6");
    edit(&t, " grid(2) {", " {")
}

/// M8 whose consumers break from tile count `c` on (instead of 5), ranged or not.
fn m8_at(c: i64, ranged: bool) -> String {
    let t = if ranged {
        M8.to_string()
    } else {
        m8_unranged()
    };
    edit(&t, "cmp ge %z, 5", &format!("cmp ge %z, {c}"))
}

/// `sync --target sm_90` of `text`: (accepted, output, diagnostics).
fn sync(text: &str) -> (bool, String, String) {
    run(&["sync", "--target", "sm_90", "-"], text)
}

/// Whether the interpreter finds `text` race- and deadlock-free at `tiles`.
fn interp_ok(text: &str, tiles: i64) -> bool {
    let b = format!("tiles={tiles}");
    run(
        &[
            "check",
            "--target",
            "sm_90",
            "--no-proof",
            "--schedules",
            "2",
            "--bounds",
            &b,
            "-",
        ],
        text,
    )
    .0
}

#[test]
fn m8_is_refused_with_and_without_ranges_and_broken_in_the_interpreter() {
    assert!(
        !interp_ok(M8, 24),
        "M8 should break at 24 tiles (6 in block 0)"
    );
    let (ok, _, err) = sync(M8);
    assert!(!ok && err.contains("E0306"), "ranged M8 accepted:\n{err}");
    assert!(err.contains("6 trips of the loop over %tile"), "{err}");
    let (ok, _, err) = sync(&m8_unranged());
    assert!(!ok && err.contains("E0306"), "unranged M8 accepted:\n{err}");
    // The note names the trip count searched, not a value of the counter.
    assert!(!err.contains("%tile ="), "{err}");
}

/// The threshold swept: ranged (trip counts 0 to 6 enumerated), the kernel is refused
/// exactly when block 0 can reach the break (`c ≤ 5`), and otherwise verified without W0318
/// and its output race-free at 24 tiles; unranged, every threshold within the search is
/// refused, and one beyond it is taken as written with W0318 naming what was searched.
#[test]
fn m8_thresholds_are_decided_exactly_with_ranges_and_searched_without() {
    for c in [0, 5, 6, 9] {
        let text = m8_at(c, true);
        let (ok, out, err) = sync(&text);
        let breaks = c <= 5;
        assert_eq!(ok, !breaks, "c = {c}:\n{err}");
        assert_eq!(
            interp_ok(&text, 24),
            !breaks,
            "c = {c}: the interpreter disagrees"
        );
        if ok {
            assert!(!err.contains("W0318"), "c = {c}: not exact:\n{err}");
            assert!(interp_ok(&out, 24), "c = {c}: output races");
        }
    }
    for c in [1, 14] {
        let (ok, _, err) = sync(&m8_at(c, false));
        assert!(!ok && err.contains("E0306"), "unranged c = {c}:\n{err}");
    }
    let (ok, _, err) = sync(&m8_at(40, false));
    assert!(
        ok && err.contains("W0318") && err.contains("searched: 0 to 16 trips"),
        "{err}"
    );
}

/// M7 and the variants whose consumer tile loop runs the producer's trips, written otherwise.
fn m7_variants() -> Vec<(&'static str, String)> {
    let same = edit(
        M7,
        "    %tl2 = sub %tiles, %b1\n    %o2 = for %tile = 0 to %tl2 step 4",
        "    %o2 = for %tile = %b1 to %tiles step 4",
    );
    let doubled = edit(
        M7,
        "    %o2 = for %tile = 0 to %tl2 step 4",
        "    %tl3 = mul %tl2, 2\n    %o2 = for %tile = 0 to %tl3 step 8",
    );
    vec![
        ("M7", M7.to_string()),
        (
            "bid + 0",
            edit(
                &same,
                "    %b1 = bid.x\n",
                "    %b1z = bid.x\n    %b1 = add %b1z, 0\n",
            ),
        ),
        (
            "tiles + 0",
            edit(&same, "%b1 to %tiles step 4", "%b1 to %tl step 4").replacen(
                "    %o2 =",
                "    %tl = add %tiles, 0\n    %o2 =",
                1,
            ),
        ),
        ("doubled", doubled),
    ]
}

#[test]
fn m7_and_its_variants_are_accepted_and_their_outputs_race_free() {
    for (what, text) in m7_variants() {
        let (ok, out, err) = sync(&text);
        assert!(ok, "{what} refused:\n{err}");
        assert!(
            err.contains("W0318") && err.contains("searched: 0 to 4 trips"),
            "{what}:\n{err}"
        );
        for t in [1, 6, 13] {
            assert!(interp_ok(&out, t), "{what}: output races at tiles={t}");
        }
    }
    // Ranged: the trip counts 0 to 6 are enumerated, and the verdict is exact.
    let (ok, out, err) = sync(&edit(M7, "%tiles: i32 = 6", "%tiles: i32 in [0, 24] = 6"));
    assert!(ok && !err.contains("W0318"), "{err}");
    assert!(interp_ok(&out, 24), "ranged M7's output races");
}

/// Consumer tile loops of other trip counts than the producer's are still told apart and
/// refused; the interpreter finds each broken.
#[test]
fn tile_loops_of_other_trips_are_refused() {
    for (what, from, to) in [
        (
            "one more trip",
            "    %tl2 = sub %tiles, %b1\n",
            "    %tl1 = sub %tiles, %b1\n    %tl2 = add %tl1, 4\n",
        ),
        (
            "half the step",
            "%o2 = for %tile = 0 to %tl2 step 4",
            "%o2 = for %tile = 0 to %tl2 step 2",
        ),
    ] {
        let text = edit(M7, from, to);
        assert!(
            !interp_ok(&text, 12),
            "{what}: the interpreter finds it sound"
        );
        let (ok, _, err) = sync(&text);
        assert!(!ok && err.contains("E0306"), "{what} accepted:\n{err}");
        assert!(
            err.contains("trips of the loop over %tile")
                || err.contains("trip of the loop over %tile"),
            "{what}:\n{err}"
        );
    }
}
