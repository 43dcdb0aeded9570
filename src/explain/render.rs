//! The report as text (for a terminal) and as JSON (`--format json`, docs/diagnostics.md).
//!
//! Text: the synchronized kernel with output line numbers (what "output line N" refers to),
//! then each inserted wait and sync with the hazards it removes, why it is where it is, and
//! the pairs that needed no sync. A hazard several syncs remove is written out once, under
//! its primary sync; the others refer to it by id. Complexity: O(report size).

use std::fmt::Write;

use crate::diag::json::Json;

use super::{HazardView, Report, hazard_id};

/// The report as text. `file` names the input in the legend.
pub fn text(r: &Report, file: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "@{} for {}", r.kernel, r.target);
    let _ = writeln!(
        s,
        "\"input line N\" is line N of {file}; \"output line N\" is line N of the synchronized kernel:"
    );
    let marks = row_notes(r);
    for (i, l) in r.timeline.lines.iter().enumerate() {
        let note = marks
            .get(&i)
            .map_or(String::new(), |n| format!("   <- {n}"));
        let _ = writeln!(s, "{:>4} | {l}{note}", i + 1);
    }
    for (i, w) in r.waits.iter().enumerate() {
        let line = w.row.map_or("not in the output".into(), |x| {
            format!("output line {}", x + 1)
        });
        let _ = writeln!(s, "\nwait #{i}: {} ({line}), {}", w.op, w.at);
        for y in &w.why {
            let _ = writeln!(s, "  {y}");
        }
    }
    for (i, y) in r.syncs.iter().enumerate() {
        let line = y.row.map_or("not in the output".into(), |x| {
            format!("output line {}", x + 1)
        });
        let _ = writeln!(s, "\nsync #{i}: {} ({line}), {}", y.kind.name(), y.at);
        if let Some(sig) = y.signal_row {
            let _ = writeln!(
                s,
                "  split: signal at output line {}, wait at {line}",
                sig + 1
            );
        }
        let _ = writeln!(s, "  removes {} hazard(s):", y.removes.len());
        for &h in &y.removes {
            hazard_text(&mut s, r, h, i);
        }
        let _ = writeln!(s, "  why here:");
        for w in &y.why {
            let _ = writeln!(s, "    - {w}");
        }
    }
    if r.syncs.is_empty() {
        let _ = writeln!(s, "\nno sync inserted");
    }
    if !r.unneeded.is_empty() {
        let _ = writeln!(
            s,
            "\nneeded no inserted sync ({} pair(s)):",
            r.unneeded.len()
        );
        for n in &r.unneeded {
            let _ = writeln!(
                s,
                "  {}: {} {} -> {}, {}: {}",
                n.reason.name(),
                n.buffer,
                n.producer,
                n.consumer,
                n.relation,
                n.detail
            );
        }
    }
    s
}

/// Notes on the rows of the listing: which sync or wait each inserted line is.
fn row_notes(r: &Report) -> std::collections::HashMap<usize, String> {
    let mut m = std::collections::HashMap::new();
    for (i, y) in r.syncs.iter().enumerate() {
        if let Some(x) = y.row {
            m.insert(x, format!("sync #{i}"));
        }
        if let Some(x) = y.signal_row {
            m.insert(x, format!("sync #{i} (signal)"));
        }
    }
    for (i, w) in r.waits.iter().enumerate() {
        if let Some(x) = w.row {
            m.insert(x, format!("wait #{i}"));
        }
    }
    m
}

fn hazard_text(s: &mut String, r: &Report, h: usize, under: usize) {
    let v = &r.hazards[h];
    if v.primary != Some(under) {
        let j = v
            .primary
            .map_or("another sync".into(), |j| format!("sync #{j}"));
        let _ = writeln!(
            s,
            "    {} {} {} (written out under {j})",
            hazard_id(h),
            v.kind,
            v.buffer
        );
        return;
    }
    let _ = writeln!(
        s,
        "    {} {} {}: {} -> {}, {}",
        hazard_id(h),
        v.kind,
        v.buffer,
        v.producer,
        v.consumer,
        v.distance()
    );
    if let Some(w) = &v.visible_at {
        let _ = writeln!(s, "       async: the copy's data is visible only after {w}");
    }
    if let Some(e) = &v.example {
        let _ = writeln!(s, "       e.g. {e}");
    }
    if v.intra_warp {
        let _ = writeln!(
            s,
            "       every conflicting pair of threads lies in one warp"
        );
    }
    if let Some(rule) = v.rule {
        let _ = writeln!(s, "       {rule}");
    }
    let others: Vec<String> = v
        .removed_by
        .iter()
        .filter(|&&j| j != under)
        .map(|j| format!("sync #{j}"))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(s, "       also removed by {}", others.join(", "));
    }
}

fn row_json(r: Option<usize>) -> Json {
    r.map_or(Json::Null, |x| Json::uint(x + 1))
}

fn hazard_json(h: usize, v: &HazardView) -> Json {
    let carried = v.carried.as_ref().map_or(Json::Null, |(l, d, _)| {
        Json::object([
            ("loop", Json::str(l.as_str())),
            ("distance", Json::Int(i64::from(*d))),
        ])
    });
    Json::object([
        ("id", Json::str(hazard_id(h))),
        ("kind", Json::str(v.kind)),
        ("buffer", Json::str(v.buffer.as_str())),
        ("producer", Json::str(v.producer.as_str())),
        ("consumer", Json::str(v.consumer.as_str())),
        ("visible_at", Json::opt_str(v.visible_at.clone())),
        ("producer_output_line", row_json(v.src_row)),
        ("consumer_output_line", row_json(v.dst_row)),
        ("carried_by", carried),
        ("example", Json::opt_str(v.example.clone())),
        ("within_warp", Json::Bool(v.intra_warp)),
        ("rule", Json::opt_str(v.rule.map(str::to_string))),
        (
            "removed_by",
            Json::Array(v.removed_by.iter().map(|&j| Json::uint(j)).collect()),
        ),
        ("explained_under", v.primary.map_or(Json::Null, Json::uint)),
        ("existing", Json::Bool(v.existing)),
    ])
}

/// One kernel's report as a JSON object.
pub fn json(r: &Report) -> Json {
    let syncs = r.syncs.iter().enumerate().map(|(i, y)| {
        Json::object([
            ("index", Json::uint(i)),
            ("kind", Json::str(y.kind.class())),
            ("op", Json::str(y.op.as_str())),
            ("output_line", row_json(y.row)),
            ("signal_output_line", row_json(y.signal_row)),
            ("at", Json::str(y.at.as_str())),
            ("executes", Json::str(y.executes.as_str())),
            (
                "removes",
                Json::Array(y.removes.iter().map(|&h| Json::str(hazard_id(h))).collect()),
            ),
            (
                "why",
                Json::Array(y.why.iter().map(|w| Json::str(w.as_str())).collect()),
            ),
        ])
    });
    let waits = r.waits.iter().enumerate().map(|(i, w)| {
        Json::object([
            ("index", Json::uint(i)),
            ("op", Json::str(w.op.as_str())),
            ("output_line", row_json(w.row)),
            ("at", Json::str(w.at.as_str())),
            (
                "why",
                Json::Array(w.why.iter().map(|y| Json::str(y.as_str())).collect()),
            ),
        ])
    });
    let none = r.unneeded.iter().map(|n| {
        Json::object([
            ("reason", Json::str(n.reason.name())),
            ("buffer", Json::str(n.buffer.as_str())),
            ("producer", Json::str(n.producer.as_str())),
            ("consumer", Json::str(n.consumer.as_str())),
            ("relation", Json::str(n.relation.as_str())),
            ("detail", Json::str(n.detail.as_str())),
        ])
    });
    Json::object([
        ("name", Json::str(r.kernel.as_str())),
        ("target", Json::str(r.target.as_str())),
        (
            "output",
            Json::Array(
                r.timeline
                    .lines
                    .iter()
                    .map(|l| Json::str(l.as_str()))
                    .collect(),
            ),
        ),
        ("waits", Json::Array(waits.collect())),
        ("syncs", Json::Array(syncs.collect())),
        (
            "hazards",
            Json::Array(
                r.hazards
                    .iter()
                    .enumerate()
                    .map(|(h, v)| hazard_json(h, v))
                    .collect(),
            ),
        ),
        ("no_sync", Json::Array(none.collect())),
    ])
}
