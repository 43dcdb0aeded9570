//! Whether a wait completes the **youngest** execution of a copy issued in loops: the test
//! that lets barrier placement take one wait as the completion of every execution of the
//! copy in one instance of its loops (docs/async.md, "The youngest execution").
//!
//! The in-flight dataflow reports, per wait, the executions of a copy it completes, each as a
//! tag vector over the loops around the copy and the wait ([`IterTag`]). The hazard builders
//! take *one* wait per (copy, destination) pair and order every execution of the copy from it:
//! the in-loop wait `w` at distance `d` of the completion loop `L = copy_loops[level]` orders
//! the copy of iteration `k` from `w` in iteration `k + d`, and the exit wait after `L` orders
//! every execution of `L`'s instance from the exit. That is exact only when the wait completes
//! the execution issued last in that instance; an older one alone is not enough (a
//! `cp_async_wait 1` after a loop of two copies completes the first only).
//!
//! Rule. For the queues that complete in issue order (cp.async groups, bulk groups, wgmma
//! groups, AMD counters) a wait that completes the youngest execution completes every older
//! one of the same copy. An execution reported at `w` is the youngest of the instance when
//! its tag is, on each loop around the copy:
//!
//! - a loop that also holds `w`: `Dist(0)` (the same iteration; on `L` for the in-loop wait,
//!   `Dist(d)`). A wait in the next iteration of an outer loop (`Dist(1)`) completes the
//!   previous instance, not this one;
//! - a loop that `w` follows: `Last(0)` (its last iteration), or no tag where the loop's
//!   executions were merged into one entry (a loop of unknown trips drops its tags at the
//!   exit; a loop re-entered drops `PreLast` at its next exit), which the dataflow completes
//!   only when all of them are. A `for` of at least [`TAG_CAP`] constant trips also leaves an
//!   untagged entry of its oldest (saturated) executions at its first exit: there only
//!   `Last(0)` counts.
//!
//! Where the test cannot be exact. After a `for` of at least [`TAG_CAP`] constant trips is
//! re-entered, its previous instance's executions (youngest included) merge with the
//! saturated ones into one untagged entry, which the rule above does not count. A wait that
//! completes such an entry, and would complete the youngest if it were counted, is reported
//! as W0320 ([`untracked_youngest`]): the completion then moves to a later wait or the
//! destination, which may cost a barrier, never silently.
//!
//! mbarrier and token completions are per execution, not in order: they keep the dataflow's
//! answer (an mbarrier wait's visibility is `waited_by_all`'s and the wait planner's).
//!
//! Complexity: O(E · D) for the `E` executions of the copy that `w` completes and loop depth
//! `D`.

use crate::analysis::hazards::const_for_trips;
use crate::analysis::inflight::{Completed, Completions, Queue, TAG_CAP};
use crate::analysis::overlap::IterTag;
use crate::ir::*;

/// Whether the executions of a queue complete in issue order (module doc).
fn in_order(q: Queue) -> bool {
    matches!(q, Queue::CpAsync | Queue::Bulk | Queue::Wgmma | Queue::Counter(_))
}

/// Whether wait `w` completes the youngest execution of `copy` in one instance of its loops
/// (`copy_loops`, outermost first): at distance `d` of `copy_loops[level]` when `in_loop` is
/// `Some(d)` (`w` in that loop's body, outside the deeper ones), else after that loop (the exit
/// wait). True for a copy on a queue that completes out of order (module doc).
pub(crate) fn completes_youngest(
    k: &Kernel,
    c: &Completions,
    w: Op,
    copy: Op,
    copy_loops: &[Op],
    (level, in_loop): (usize, Option<u32>),
) -> bool {
    let mut execs = c.completed_by(w, copy).peekable();
    if execs.peek().is_some_and(|cc| !in_order(cc.queue)) {
        return true;
    }
    let around_w = k.parents().ancestors(w);
    execs.any(|cc| is_youngest(k, cc, copy_loops, &around_w, (level, in_loop)))
}

/// Whether execution `cc` (completed at a wait inside the ops `around_w`) is the youngest of
/// its instance (module doc).
fn is_youngest(
    k: &Kernel,
    cc: &Completed,
    copy_loops: &[Op],
    around_w: &[Op],
    (level, in_loop): (usize, Option<u32>),
) -> bool {
    copy_loops.iter().enumerate().all(|(i, &l)| match tag_fit(cc, (i, l), around_w, (level, in_loop)) {
        TagFit::Fits => true,
        TagFit::Untagged => !long_exact(k, l),
        TagFit::Fails => false,
    })
}

/// How execution `cc`'s tag on copy loop `l` (index `i` of the copy's loops) stands under the
/// youngest rule (module doc): the iteration wanted, another one, or no tag (executions
/// merged after the loop's exit).
enum TagFit {
    Fits,
    Fails,
    Untagged,
}

fn tag_fit(
    cc: &Completed,
    (i, l): (usize, Op),
    around_w: &[Op],
    (level, in_loop): (usize, Option<u32>),
) -> TagFit {
    let tag = cc.tags.iter().find(|(tl, _)| *tl == l).map(|(_, t)| *t);
    let fits = if around_w.contains(&l) {
        let want = if i == level { in_loop.unwrap_or(0) } else { 0 };
        tag == Some(IterTag::Dist(want))
    } else if tag.is_none() {
        return TagFit::Untagged;
    } else {
        tag == Some(IterTag::Last(0))
    };
    if fits { TagFit::Fits } else { TagFit::Fails }
}

/// Whether `l` is a `for` of at least [`TAG_CAP`] constant trips (its first exit leaves an
/// untagged entry of the saturated executions beside the `Last` ones).
fn long_exact(k: &Kernel, l: Op) -> bool {
    const_for_trips(k, l).is_some_and(|t| t >= TAG_CAP as i64)
}

/// The loop of at least [`TAG_CAP`] constant trips whose merged executions keep wait `w` from
/// being taken as the completion of `copy`'s youngest execution (module doc, W0320): `w`
/// completes no execution the rule counts, but one whose only failing tag is no tag after
/// such a loop (`w` after it). `None` where `w` completes the youngest, or fails otherwise.
pub(crate) fn untracked_youngest(
    k: &Kernel,
    c: &Completions,
    w: Op,
    copy: Op,
    copy_loops: &[Op],
    (level, in_loop): (usize, Option<u32>),
) -> Option<Op> {
    if completes_youngest(k, c, w, copy, copy_loops, (level, in_loop)) {
        return None;
    }
    let around_w = k.parents().ancestors(w);
    let execs = c.completed_by(w, copy);
    execs.filter(|cc| in_order(cc.queue)).find_map(|cc| {
        let mut long = None;
        let ok = copy_loops.iter().enumerate().all(|(i, &l)| match tag_fit(cc, (i, l), &around_w, (level, in_loop)) {
            TagFit::Fits => true,
            TagFit::Untagged => {
                if long_exact(k, l) {
                    long = Some(l);
                }
                true
            }
            TagFit::Fails => false,
        });
        if ok { long } else { None }
    })
}
