//! The HTML report: the timeline SVG beside the explanation, in one self-contained file (no
//! network: styles and script are inline).
//!
//! Hovering a sync (its line in the picture or its section in the text) highlights the
//! hazards it removes and dims the rest; hovering a hazard highlights the syncs that remove
//! it. Buttons (and the arrow keys) step through the syncs one at a time; "all" shows
//! everything again. Opening the file with `#step-all` runs every step once on load (what
//! the headless browser test does to exercise the script). Complexity: O(report size).

use std::fmt::Write;

use super::svg::{esc as esc_plain, svg};

/// Escapes text for HTML, writing each `` `…` `` span as `<code>…</code>`.
fn esc(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in esc_plain(s).split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str("<code>");
            out.push_str(part);
            out.push_str("</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}
use super::{Report, hazard_id};

/// The report of every kernel as one HTML page. `file` names the input.
pub fn html(reports: &[Report], file: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>smemsync explain {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        esc(file)
    );
    let _ = writeln!(
        s,
        "<header><h1>smemsync explain <code>{}</code></h1><p>Input lines are lines of <code>{}</code>; output lines are the numbered lines of the picture (the synchronized kernel).</p></header>",
        esc(file),
        esc(file)
    );
    for (n, r) in reports.iter().enumerate() {
        kernel(&mut s, n, r);
    }
    let _ = write!(s, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
    s
}

fn kernel(s: &mut String, n: usize, r: &Report) {
    let _ = writeln!(
        s,
        "<section class=\"kernel\" id=\"k{n}\" data-syncs=\"{}\"><h2>@{} on {}</h2>",
        r.syncs.len(),
        esc(&r.kernel),
        esc(&r.target)
    );
    let _ = writeln!(
        s,
        "<div class=\"controls\"><button class=\"prev\" type=\"button\">&#9664; previous sync</button><button class=\"next\" type=\"button\">next sync &#9654;</button><button class=\"all\" type=\"button\">show all</button><span class=\"status\">all {} sync(s)</span></div>",
        r.syncs.len()
    );
    s.push_str("<div class=\"panes\"><div class=\"picture\">");
    s.push_str(&svg(r));
    s.push_str("</div><div class=\"text\">");
    syncs(s, r);
    waits_and_unneeded(s, r);
    s.push_str("</div></div></section>\n");
}

fn syncs(s: &mut String, r: &Report) {
    if r.syncs.is_empty() {
        s.push_str("<p>No sync inserted: every hazard is already ordered.</p>");
    }
    for (i, y) in r.syncs.iter().enumerate() {
        let line = y.row.map_or("not in the output".into(), |x| {
            format!("output line {}", x + 1)
        });
        let _ = write!(
            s,
            "<div class=\"explain-sync\" data-sync=\"{i}\"><h3>sync #{i}: {} <small>({line})</small></h3><p>{}</p>",
            esc(&y.kind.name()),
            esc(&y.at)
        );
        if let Some(sig) = y.signal_row {
            let _ = write!(
                s,
                "<p>split: signal at output line {}, wait at {line}; the rows between are slack.</p>",
                sig + 1
            );
        }
        let _ = write!(s, "<p>removes {} hazard(s):</p><ul>", y.removes.len());
        for &h in &y.removes {
            let v = &r.hazards[h];
            let _ = write!(
                s,
                "<li class=\"explain-hazard {}\" data-hazard=\"{h}\"><b>{}</b> {} {}: {} &rarr; {}, {}",
                v.kind,
                hazard_id(h),
                v.kind,
                esc(&v.buffer),
                esc(&v.producer),
                esc(&v.consumer),
                esc(&v.distance())
            );
            if let Some(w) = &v.visible_at {
                let _ = write!(s, "; visible after {}", esc(w));
            }
            if let Some(e) = &v.example {
                let _ = write!(s, "<br><small>e.g. {}</small>", esc(e));
            }
            s.push_str("</li>");
        }
        s.push_str("</ul><p>why here:</p><ul>");
        for w in &y.why {
            let _ = write!(s, "<li>{}</li>", esc(w));
        }
        s.push_str("</ul></div>\n");
    }
}

fn waits_and_unneeded(s: &mut String, r: &Report) {
    if !r.waits.is_empty() {
        s.push_str("<h3>inserted waits</h3><ul>");
        for (i, w) in r.waits.iter().enumerate() {
            let line = w.row.map_or("not in the output".into(), |x| {
                format!("output line {}", x + 1)
            });
            let _ = write!(
                s,
                "<li>wait #{i}: <code>{}</code> ({line}), {}<br><small>{}</small></li>",
                esc(&w.op),
                esc(&w.at),
                esc(&w.why.join("; "))
            );
        }
        s.push_str("</ul>");
    }
    if !r.unneeded.is_empty() {
        let _ = write!(
            s,
            "<h3>needed no inserted sync ({} pair(s))</h3><ul>",
            r.unneeded.len()
        );
        for n in &r.unneeded {
            let _ = write!(
                s,
                "<li><b>{}</b>: {} {} &rarr; {}, {}<br><small>{}</small></li>",
                esc(n.reason.name()),
                esc(&n.buffer),
                esc(&n.producer),
                esc(&n.consumer),
                esc(&n.relation),
                esc(&n.detail)
            );
        }
        s.push_str("</ul>");
    }
}

const CSS: &str = r#"
body { font-family: system-ui, sans-serif; margin: 1em; color: #202124; }
code { font-family: monospace; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; } h3 { font-size: 1em; margin: 0.6em 0 0.2em; }
.panes { display: flex; gap: 1em; align-items: flex-start; }
.picture { overflow: auto; max-height: 90vh; border: 1px solid #dadce0; flex: 0 1 auto; }
.text { position: relative; flex: 1 1 28em; min-width: 22em; max-height: 90vh; overflow: auto; font-size: 0.9em; }
.controls { margin: 0.4em 0; display: flex; gap: 0.5em; align-items: center; }
.status { color: #5f6368; }
.explain-sync { border-left: 4px solid #dadce0; padding-left: 0.6em; margin-bottom: 0.8em; }
.explain-sync.active { border-left-color: #202124; background: #f8f9fa; }
.explain-hazard.active { background: #fce8e6; }
.explain-sync.faded { opacity: 0.45; }
ul { padding-left: 1.2em; margin: 0.2em 0; }
"#;

const SCRIPT: &str = r#"
(function () {
  'use strict';
  function each(root, sel, f) { Array.prototype.forEach.call(root.querySelectorAll(sel), f); }
  function words(s) { return (s || '').split(' ').filter(function (w) { return w !== ''; }); }
  function setup(sec) {
    var n = Number(sec.getAttribute('data-syncs'));
    var current = -1;
    var status = sec.querySelector('.status');
    function clear() {
      each(sec, '.hl, .dim, .active, .faded', function (e) {
        e.classList.remove('hl', 'dim', 'active', 'faded');
      });
    }
    function showSync(i) {
      clear();
      var g = sec.querySelector('svg [data-sync="' + i + '"]');
      if (!g) { return; }
      var hs = words(g.getAttribute('data-hazards'));
      each(sec, 'svg .hz[data-hazard]', function (e) {
        var mine = words(e.getAttribute('data-hazard')).some(function (x) { return hs.indexOf(x) >= 0; });
        e.classList.add(mine ? 'hl' : 'dim');
      });
      each(sec, 'svg .sync[data-sync]', function (e) {
        if (e.getAttribute('data-sync') !== String(i)) { e.classList.add('dim'); }
      });
      each(sec, '.explain-sync', function (e) {
        e.classList.add(e.getAttribute('data-sync') === String(i) ? 'active' : 'faded');
      });
    }
    function showHazard(h) {
      clear();
      var g = sec.querySelector('svg .hz[data-hazard~="' + h + '"]');
      if (!g) { return; }
      var ss = words(g.getAttribute('data-syncs'));
      each(sec, 'svg .hz[data-hazard]', function (e) { e.classList.add(e === g ? 'hl' : 'dim'); });
      each(sec, 'svg .sync[data-sync]', function (e) {
        if (ss.indexOf(e.getAttribute('data-sync')) < 0) { e.classList.add('dim'); }
      });
      each(sec, '.explain-hazard[data-hazard="' + h + '"]', function (e) { e.classList.add('active'); });
    }
    function restore() { if (current >= 0) { showSync(current); } else { clear(); } }
    function step(d) {
      if (n === 0) { return; }
      current = current < 0 ? (d > 0 ? 0 : n - 1) : (current + d + n) % n;
      showSync(current);
      status.textContent = 'sync #' + current + ' of ' + n;
      // Scroll both panes (not the page) to the sync.
      var text = sec.querySelector('.text');
      var t = sec.querySelector('.explain-sync[data-sync="' + current + '"]');
      if (t) { text.scrollTop = t.offsetTop; }
      var pic = sec.querySelector('.picture');
      var line = sec.querySelector('svg [data-sync="' + current + '"] line');
      if (line) { pic.scrollTop = Math.max(0, Number(line.getAttribute('y1')) - pic.clientHeight / 3); }
    }
    function all() { current = -1; clear(); status.textContent = 'all ' + n + ' sync(s)'; }
    each(sec, '[data-sync]', function (e) {
      if (e === sec) { return; }
      var i = e.getAttribute('data-sync');
      e.addEventListener('mouseenter', function () { showSync(i); });
      e.addEventListener('mouseleave', restore);
    });
    each(sec, '[data-hazard]', function (e) {
      var h = words(e.getAttribute('data-hazard'))[0];
      e.addEventListener('mouseenter', function (ev) { ev.stopPropagation(); showHazard(h); });
      e.addEventListener('mouseleave', restore);
    });
    sec.querySelector('.prev').addEventListener('click', function () { step(-1); });
    sec.querySelector('.next').addEventListener('click', function () { step(1); });
    sec.querySelector('.all').addEventListener('click', all);
    return { step: step, all: all, showHazard: showHazard, n: n };
  }
  var views = [];
  each(document, 'section.kernel', function (sec) { views.push(setup(sec)); });
  document.addEventListener('keydown', function (e) {
    if (views.length === 0) { return; }
    if (e.key === 'ArrowRight' || e.key === 'j') { views[0].step(1); }
    if (e.key === 'ArrowLeft' || e.key === 'k') { views[0].step(-1); }
    if (e.key === 'Escape') { views[0].all(); }
  });
  if (location.hash === '#step-all') {
    views.forEach(function (v) {
      for (var i = 0; i < v.n; i++) { v.step(1); }
      each(document, '[data-hazard]', function (e) { v.showHazard(words(e.getAttribute('data-hazard'))[0]); });
      v.step(1);
    });
    document.documentElement.setAttribute('data-stepped', 'yes');
  }
}());
"#;
