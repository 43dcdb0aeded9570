//! The timeline picture: the synchronized kernel top to bottom, one row per printed line, and
//! to its right one lane per hazard.
//!
//! Elements (docs/explain.md): loops and branches are nested bands behind the rows, a loop's
//! back edge an arrow on the band's left from its closing row to its opening row; a hazard
//! is a vertical interval in its lane from producer (dot) to consumer (arrowhead), colored by
//! kind; a loop-carried hazard runs from the producer down to the loop's end and from the
//! loop's start down to the consumer, joined by a dashed wrap beside the lane (the back
//! edge); an async copy is an in-flight window from its issue to the wait completing it; an
//! inserted sync is a horizontal line at its row stabbing (ring) the intervals it removes:
//! solid for a barrier, dashed for a warp sync, dash-dot for a named barrier, and for a split
//! barrier a thin signal line and a thick wait line with the slack shaded between; the input's
//! own syncs are grey. Every element carries `data-` attributes the HTML report's script
//! reads (`data-sync`, `data-hazards`, `data-syncs`).
//!
//! Output is deterministic (vectors only, fixed number formatting) so that snapshots are
//! stable. Complexity: O(rows + hazards · syncs).

use std::fmt::Write;

use super::{MarkKind, Report, SyncKindView, hazard_id};

const ROW_H: usize = 20;
const TOP: usize = 84;
const NUM_X: usize = 4;
const GUTTER_X: usize = 40;
const DEPTH_W: usize = 12;
const CHAR_W: f64 = 7.2;
const MAX_CHARS: usize = 72;
const LANE_W: usize = 16;
const WIN_W: usize = 8;

/// Escapes text for XML character data and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

/// Geometry of one picture.
struct Geo {
    /// Hazards drawn in each lane: hazards with the same kind, rows, loop and syncs share one.
    lanes: Vec<Vec<usize>>,
    /// The lane of each hazard.
    lane_of: Vec<usize>,
    code_x: usize,
    win_x: usize,
    lane_x: usize,
    width: usize,
    height: usize,
}

impl Geo {
    fn new(r: &Report) -> Geo {
        let depth = r
            .timeline
            .bands
            .iter()
            .map(|b| b.depth + 1)
            .max()
            .unwrap_or(0);
        let code_x = GUTTER_X + depth * DEPTH_W + 8;
        let chars = r
            .timeline
            .lines
            .iter()
            .map(|l| l.chars().count().min(MAX_CHARS + 1))
            .max()
            .unwrap_or(0);
        let code_right = code_x + (chars as f64 * CHAR_W).ceil() as usize + 12;
        let win_x = code_right + 8;
        let lane_x = win_x + r.windows.len() * WIN_W + 12;
        let lanes = lanes(r);
        let mut lane_of = vec![0; r.hazards.len()];
        for (l, hs) in lanes.iter().enumerate() {
            for &h in hs {
                lane_of[h] = l;
            }
        }
        let width = (lane_x + lanes.len().max(1) * LANE_W + 170).max(560);
        let height = TOP + r.timeline.lines.len() * ROW_H + 16;
        Geo {
            lanes,
            lane_of,
            code_x,
            win_x,
            lane_x,
            width,
            height,
        }
    }

    /// The middle of a row.
    fn y(&self, row: usize) -> usize {
        TOP + row * ROW_H + ROW_H / 2
    }

    /// The x of hazard `h`'s lane.
    fn lane(&self, h: usize) -> usize {
        self.lane_x + self.lane_of[h] * LANE_W + LANE_W / 2
    }

    /// The right end of the lanes.
    fn lanes_end(&self) -> usize {
        self.lane_x + self.lanes.len() * LANE_W
    }
}

/// Groups hazards that draw alike (kind, producer, carrying loop, syncs; consumers may
/// differ, each gets its arrowhead) into one lane each, in order of their first hazard.
fn lanes(r: &Report) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let key = |h: usize| {
        let v = &r.hazards[h];
        (
            v.kind,
            v.src_row,
            v.visible_row,
            v.carried.as_ref().and_then(|c| c.2),
            v.removed_by.clone(),
            v.existing,
        )
    };
    for h in 0..r.hazards.len() {
        match out.iter_mut().find(|l| key(l[0]) == key(h)) {
            Some(l) => l.push(h),
            None => out.push(vec![h]),
        }
    }
    out
}

/// The picture of one kernel's report as a standalone SVG document.
pub fn svg(r: &Report) -> String {
    let g = Geo::new(r);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="monospace" font-size="12">"#,
        w = g.width,
        h = g.height
    );
    s.push_str(STYLE);
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>"##,
        g.width, g.height
    );
    let _ = writeln!(
        s,
        r#"<text x="{NUM_X}" y="18" class="title">@{} on {}: {} inserted sync(s), {} hazard(s)</text>"#,
        esc(&r.kernel),
        esc(&r.target),
        r.syncs.len(),
        r.hazards.len()
    );
    legend(&mut s);
    bands(&mut s, r, &g);
    rows(&mut s, r, &g);
    windows(&mut s, r, &g);
    for l in 0..g.lanes.len() {
        hazard(&mut s, r, &g, l);
    }
    marks(&mut s, r, &g);
    for (i, _) in r.syncs.iter().enumerate() {
        sync(&mut s, r, &g, i);
    }
    s.push_str("</svg>\n");
    s
}

const STYLE: &str = r#"<style>
.title { font-size: 14px; font-weight: bold; }
.code { fill: #222; white-space: pre; }
.num { fill: #999; }
.inserted { fill: #b00020; font-weight: bold; }
.band-loop { fill: #e8f0fe; stroke: #8ab4f8; }
.band-while { fill: #e8f0fe; stroke: #8ab4f8; }
.band-then { fill: #e6f4ea; stroke: #81c995; }
.band-else { fill: #fef7e0; stroke: #fdd663; }
.band-region { fill: #f1f3f4; stroke: #bdc1c6; }
.backedge { fill: none; stroke: #1a73e8; stroke-width: 1.5; }
.RAW { stroke: #d93025; fill: #d93025; }
.WAR { stroke: #1a73e8; fill: #1a73e8; }
.WAW { stroke: #9334e6; fill: #9334e6; }
.ATOMIC { stroke: #e37400; fill: #e37400; }
.hz line, .hz path { stroke-width: 3; fill: none; }
.hz polygon { stroke-width: 1; }
.lane { fill: #5f6368; font-size: 10px; }
.hz .wrap { stroke-width: 1.2; stroke-dasharray: 3 2; }
.hz .pending { stroke-width: 1.2; stroke-dasharray: 2 2; }
.hz.existing { opacity: 0.35; }
.window { fill: #fbbc04; fill-opacity: 0.45; stroke: #e37400; }
.sync line { stroke-width: 2.5; }
.barrier line, .split_barrier line.wait { stroke: #202124; }
.warp_sync line { stroke: #00897b; stroke-dasharray: 6 3; }
.named_barrier line { stroke: #795548; stroke-dasharray: 8 3 2 3; }
.split_barrier line.signal { stroke: #202124; stroke-width: 1; stroke-dasharray: 2 2; }
.slack { fill: #202124; fill-opacity: 0.08; }
.stab { fill: #ffffff; stroke-width: 2; }
.mark-existing { stroke: #9aa0a6; stroke-width: 2; stroke-dasharray: 4 2; }
.mark-wait { stroke: #e37400; stroke-width: 2; }
.mark-other { stroke: #9aa0a6; stroke-width: 1; }
.label { fill: #202124; font-size: 11px; }
.hl line, .hl path { stroke-width: 5; }
.dim { opacity: 0.2; }
</style>
"#;

fn legend(s: &mut String) {
    let items: [(&str, &str); 8] = [
        ("RAW", "line"),
        ("WAR", "line"),
        ("WAW", "line"),
        ("window", "async in flight"),
        ("barrier", "barrier"),
        ("warp_sync", "warp sync"),
        ("named_barrier", "named barrier"),
        ("existing", "input's sync"),
    ];
    let mut x = NUM_X;
    for (class, text) in items {
        let y = 40;
        match class {
            "RAW" | "WAR" | "WAW" => {
                let _ = write!(
                    s,
                    r#"<g class="hz"><line class="{class}" x1="{x}" y1="{y}" x2="{}" y2="{y}"/></g>"#,
                    x + 18
                );
                let _ = writeln!(
                    s,
                    r#"<text class="label" x="{}" y="{}">{class}</text>"#,
                    x + 22,
                    y + 4
                );
                x += 60;
            }
            "window" => {
                let _ = write!(
                    s,
                    r#"<rect class="window" x="{x}" y="{}" width="18" height="8"/>"#,
                    y - 4
                );
                let _ = writeln!(
                    s,
                    r#"<text class="label" x="{}" y="{}">{text}</text>"#,
                    x + 22,
                    y + 4
                );
                x += 130;
            }
            "existing" => {
                let _ = write!(
                    s,
                    r#"<line class="mark-existing" x1="{x}" y1="{y}" x2="{}" y2="{y}"/>"#,
                    x + 18
                );
                let _ = writeln!(
                    s,
                    r#"<text class="label" x="{}" y="{}">{text}</text>"#,
                    x + 22,
                    y + 4
                );
                x += 110;
            }
            _ => {
                let _ = write!(
                    s,
                    r#"<g class="sync {class}"><line x1="{x}" y1="{y}" x2="{}" y2="{y}"/></g>"#,
                    x + 18
                );
                let _ = writeln!(
                    s,
                    r#"<text class="label" x="{}" y="{}">{text}</text>"#,
                    x + 22,
                    y + 4
                );
                x += 24 + 7 * text.len() + 14;
            }
        }
    }
}

fn bands(s: &mut String, r: &Report, g: &Geo) {
    for b in &r.timeline.bands {
        let x = GUTTER_X + b.depth * DEPTH_W;
        let y0 = TOP + b.open * ROW_H;
        let y1 = TOP + (b.close + 1) * ROW_H;
        let _ = writeln!(
            s,
            r#"<rect class="band-{}" x="{x}" y="{y0}" width="{}" height="{}" rx="4" fill-opacity="0.6"/>"#,
            b.kind.name(),
            g.width - x - 4,
            y1 - y0
        );
        if b.kind.loops() {
            let (ya, yb) = (g.y(b.close), g.y(b.open));
            let xl = x + 4;
            let _ = writeln!(
                s,
                r#"<path class="backedge" d="M {} {ya} C {} {ya} {} {yb} {} {yb}" marker-end="url(#arrow)"><title>back edge of the loop at output line {}</title></path>"#,
                xl + 6,
                xl - 2,
                xl - 2,
                xl + 6,
                b.open + 1
            );
        }
    }
    s.push_str(r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#1a73e8"/></marker></defs>
"##);
}

fn rows(s: &mut String, r: &Report, g: &Geo) {
    let inserted: std::collections::BTreeSet<usize> = r
        .syncs
        .iter()
        .flat_map(|y| y.row.into_iter().chain(y.signal_row))
        .chain(r.waits.iter().filter_map(|w| w.row))
        .chain(
            r.marks
                .iter()
                .filter(|m| m.kind == MarkKind::Other)
                .map(|m| m.row),
        )
        .chain(r.inserted_rows.iter().copied())
        .collect();
    for (i, l) in r.timeline.lines.iter().enumerate() {
        let y = g.y(i) + 4;
        let _ = write!(
            s,
            r#"<text class="num" x="{NUM_X}" y="{y}">{:>4}</text>"#,
            i + 1
        );
        let shown: String = if l.chars().count() > MAX_CHARS {
            l.chars().take(MAX_CHARS).chain(['…']).collect()
        } else {
            l.clone()
        };
        let class = if inserted.contains(&i) {
            "code inserted"
        } else {
            "code"
        };
        let _ = write!(
            s,
            r#"<text class="{class}" x="{}" y="{y}" xml:space="preserve">{}"#,
            g.code_x,
            esc(&shown)
        );
        if shown != *l {
            let _ = write!(s, "<title>{}</title>", esc(l));
        }
        s.push_str("</text>\n");
    }
}

/// The vertical extents (`y` from, to) of an interval from row `from` to row `to`: one span
/// when `to` comes after `from` (or no loop holds both); else round the back edge of the
/// innermost loop holding both, from `from` to that loop's end and from its start to `to`.
fn spans_around(r: &Report, g: &Geo, (from, to): (usize, usize)) -> Vec<(usize, usize)> {
    let (y0, y1) = (g.y(from), g.y(to));
    let around = r
        .timeline
        .bands
        .iter()
        .filter(|b| b.kind.loops() && b.open < to && from < b.close)
        .max_by_key(|b| b.depth);
    match (to < from, around) {
        (true, Some(b)) => vec![
            (y0, TOP + (b.close + 1) * ROW_H),
            (TOP + b.open * ROW_H, y1),
        ],
        _ => vec![(y0.min(y1), y0.max(y1))],
    }
}

fn windows(s: &mut String, r: &Report, g: &Geo) {
    for (i, w) in r.windows.iter().enumerate() {
        let x = g.win_x + i * WIN_W;
        // A wait above its copy completes it in a later iteration: the window runs to the
        // loop's end and on from its start.
        for (a, b) in spans_around(r, g, (w.issue_row, w.wait_row)) {
            let _ = writeln!(
                s,
                r#"<rect class="window" x="{x}" y="{a}" width="{}" height="{}"><title>{}</title></rect>"#,
                WIN_W - 2,
                b.saturating_sub(a).max(2),
                esc(&w.label)
            );
        }
    }
}

/// One lane: its hazards' common interval.
fn hazard(s: &mut String, r: &Report, g: &Geo, lane: usize) {
    let ids = &g.lanes[lane];
    let h = ids[0];
    let v = &r.hazards[h];
    let Some(src) = v.src_row else {
        return;
    };
    let from = v.visible_row.unwrap_or(src);
    let mut dsts: Vec<usize> = ids.iter().filter_map(|&i| r.hazards[i].dst_row).collect();
    dsts.sort_unstable();
    dsts.dedup();
    // The interval reaches the consumer farthest from the producer (down from the loop's
    // start for a carried one).
    let far = |carried: bool| {
        dsts.iter()
            .copied()
            .max_by_key(|&d| if carried { d } else { d.abs_diff(from) })
    };
    let Some(dst) = far(v.carried.as_ref().and_then(|c| c.2).is_some()) else {
        return;
    };
    let x = g.lane(h);
    lane_title(s, r, ids, x);
    let rows = LaneRows {
        h,
        x,
        src,
        from,
        dst,
    };
    lane_interval(s, r, g, &rows, dsts);
}

/// Where one lane is drawn: its column and the rows of its producer, of the point from
/// which the write is pending (`from`), and of its farthest consumer.
#[derive(Clone, Copy)]
struct LaneRows {
    /// The lane's first hazard (its kind and loop are the lane's).
    h: usize,
    x: usize,
    src: usize,
    from: usize,
    dst: usize,
}

/// A lane's rotated label and the opening `<g>` of its hazards with their tooltip.
fn lane_title(s: &mut String, r: &Report, ids: &[usize], x: usize) {
    let h = ids[0];
    let v = &r.hazards[h];
    let syncs: Vec<String> = v.removed_by.iter().map(|j| j.to_string()).collect();
    let existing = if v.existing { " existing" } else { "" };
    let names: Vec<String> = ids.iter().map(|&i| hazard_id(i)).collect();
    let label = match ids {
        [_] => hazard_id(h),
        _ => format!("{}×{}", hazard_id(h), ids.len()),
    };
    let _ = write!(
        s,
        r#"<text class="lane" x="{x}" y="{}" text-anchor="end" transform="rotate(-60 {x} {})">{label}</text>"#,
        TOP - 4,
        TOP - 4
    );
    let ids_attr: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let _ = write!(
        s,
        r#"<g class="hz {}{existing}" id="h{h}" data-hazard="{}" data-syncs="{}"><title>{}</title>"#,
        v.kind,
        ids_attr.join(" "),
        syncs.join(" "),
        esc(&format!(
            "{} {} {}: {} -> {}, {}",
            names.join(", "),
            v.kind,
            v.buffer,
            v.producer,
            v.consumer,
            v.distance()
        ))
    );
}

/// A lane's interval: the pending part, the line (wrapping around the loop for a carried
/// hazard), the producer's dot and an arrow at each consumer (`dsts`); closes the `<g>`.
fn lane_interval(s: &mut String, r: &Report, g: &Geo, rows: &LaneRows, dsts: Vec<usize>) {
    let LaneRows {
        h,
        x,
        src,
        from,
        dst,
    } = *rows;
    let v = &r.hazards[h];
    if from != src {
        let _ = write!(
            s,
            r#"<line class="{} pending" x1="{x}" y1="{}" x2="{x}" y2="{}"/>"#,
            v.kind,
            g.y(src),
            g.y(from)
        );
    }
    let band = v
        .carried
        .as_ref()
        .and_then(|c| c.2)
        .and_then(|b| r.timeline.bands.get(b));
    match band {
        Some(b) => {
            let (bot, top) = (TOP + (b.close + 1) * ROW_H - 4, TOP + b.open * ROW_H + 4);
            let _ = write!(
                s,
                r#"<line class="{k}" x1="{x}" y1="{}" x2="{x}" y2="{bot}"/><line class="{k}" x1="{x}" y1="{top}" x2="{x}" y2="{}"/><path class="{k} wrap" d="M {x} {bot} Q {xr} {bot} {xr} {} L {xr} {} Q {xr} {top} {x} {top}"/>"#,
                g.y(from),
                g.y(dst),
                bot - 6,
                top + 6,
                k = v.kind,
                xr = x + 6
            );
        }
        None => {
            let _ = write!(
                s,
                r#"<line class="{}" x1="{x}" y1="{}" x2="{x}" y2="{}"/>"#,
                v.kind,
                g.y(from),
                g.y(dst)
            );
        }
    }
    let _ = write!(
        s,
        r#"<circle class="{k}" cx="{x}" cy="{}" r="3.5"/>"#,
        g.y(src),
        k = v.kind
    );
    for d in dsts {
        let (yd, up) = (g.y(d), d < from && band.is_none());
        let tip = if up { yd - 1 } else { yd + 1 };
        let base = if up { yd + 7 } else { yd - 7 };
        let _ = write!(
            s,
            r#"<polygon class="{k}" points="{},{base} {x},{tip} {},{base}"/>"#,
            x - 5,
            x + 5,
            k = v.kind
        );
    }
    s.push_str("</g>\n");
}

fn marks(s: &mut String, r: &Report, g: &Geo) {
    let syncs: std::collections::BTreeSet<usize> = r
        .syncs
        .iter()
        .flat_map(|y| y.row.into_iter().chain(y.signal_row))
        .collect();
    for m in r.marks.iter().filter(|m| !syncs.contains(&m.row)) {
        let y = g.y(m.row);
        let (class, x0) = match m.kind {
            MarkKind::Existing => ("mark-existing", g.win_x),
            MarkKind::Wait { .. } => ("mark-wait", g.win_x),
            MarkKind::Other => ("mark-other", g.win_x),
        };
        let x1 = if m.kind == MarkKind::Existing {
            g.lanes_end()
        } else {
            g.lane_x - 4
        };
        let _ = writeln!(
            s,
            r#"<line class="{class}" x1="{x0}" y1="{y}" x2="{x1}" y2="{y}"><title>{}</title></line>"#,
            esc(&m.op)
        );
    }
}

/// The signal half of split sync `i` (its wait at `row`, its signal at `sig`): the slack
/// between them, around the back edge of the innermost loop holding both when the signal
/// comes after the wait, and the signal's line.
fn signal(s: &mut String, r: &Report, g: &Geo, (i, row, sig): (usize, usize, usize)) {
    let x1 = g.lanes_end();
    let ys = g.y(sig);
    let xs = g.win_x;
    // Signal after the wait: the slack runs from the signal round the back edge of the
    // innermost loop holding both to the wait.
    for (a, b) in spans_around(r, g, (sig, row)) {
        let _ = write!(
            s,
            r#"<rect class="slack" x="{xs}" y="{a}" width="{}" height="{}"/>"#,
            x1 - xs,
            b.saturating_sub(a)
        );
    }
    let _ = write!(
        s,
        r#"<line class="signal" x1="{xs}" y1="{ys}" x2="{x1}" y2="{ys}"/><text class="label" x="{}" y="{}">#{i} signal</text>"#,
        x1 + 6,
        ys + 4
    );
}

fn sync(s: &mut String, r: &Report, g: &Geo, i: usize) {
    let y = &r.syncs[i];
    let Some(row) = y.row else {
        return;
    };
    let yy = g.y(row);
    let text_len = r
        .timeline
        .lines
        .get(row)
        .map_or(0, |l| l.chars().count().min(MAX_CHARS));
    let x0 = g.code_x + (text_len as f64 * CHAR_W).ceil() as usize + 8;
    let x1 = g.lanes_end();
    let hs: Vec<String> = y.removes.iter().map(|h| h.to_string()).collect();
    let _ = write!(
        s,
        r#"<g class="sync {}" id="s{i}" data-sync="{i}" data-hazards="{}"><title>{}</title>"#,
        y.kind.class(),
        hs.join(" "),
        esc(&format!(
            "sync #{i}: {} {}; executes {}",
            y.kind.name(),
            y.at,
            y.executes
        ))
    );
    if let Some(sig) = y.signal_row {
        signal(s, r, g, (i, row, sig));
    }
    let class = if y.kind == SyncKindView::Split {
        "wait"
    } else {
        "bar"
    };
    let _ = write!(
        s,
        r#"<line class="{class}" x1="{x0}" y1="{yy}" x2="{x1}" y2="{yy}"/>"#
    );
    let mut stabbed = std::collections::BTreeSet::new();
    for &h in &y.removes {
        if !stabbed.insert(g.lane_of[h]) {
            continue;
        }
        let _ = write!(
            s,
            r#"<circle class="stab {}" cx="{}" cy="{yy}" r="4"/>"#,
            r.hazards[h].kind,
            g.lane(h)
        );
    }
    let times = match y.executes.as_str() {
        "once" => "×1".to_string(),
        e => e
            .strip_suffix(" times")
            .map_or_else(|| "×n".to_string(), |n| format!("×{n}")),
    };
    let _ = writeln!(
        s,
        r#"<text class="label" x="{}" y="{}">#{i} {} {times}</text></g>"#,
        x1 + 6,
        yy + 4,
        esc(&y.kind.name())
    );
}
