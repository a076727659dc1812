//! The dashboard's panels that one run can fill, drawn as SVG from the run's own
//! Prometheus text (`dlock bench --metrics-svg FILE`): where Grafana is not at hand,
//! what the shipped dashboard would show of the latencies and outcomes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One histogram's buckets: upper bound in seconds, cumulative count.
type Buckets = Vec<(f64, f64)>;
/// Histograms by metric, then by label set without `le`.
type Histograms = BTreeMap<String, BTreeMap<String, Buckets>>;
/// Counters: metric, label set, value.
type Counters = Vec<(String, String, f64)>;

/// The histograms (by metric, then by label set without `le`) and the counters (by
/// metric and label set) in `text`.
fn parse(text: &str) -> (Histograms, Counters) {
    let mut histograms: Histograms = BTreeMap::new();
    let mut counters = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = series
            .split_once('{')
            .map_or((series, ""), |(n, l)| (n, l.trim_end_matches('}')));
        if let Some(base) = name.strip_suffix("_bucket") {
            let mut le = None;
            let rest: Vec<&str> = labels
                .split(',')
                .filter(|l| match l.strip_prefix("le=") {
                    Some(v) => {
                        le = v.trim_matches('"').parse::<f64>().ok();
                        false
                    }
                    None => true,
                })
                .collect();
            // +Inf parses as infinity: the total, not drawn
            if let Some(le) = le {
                histograms
                    .entry(base.to_owned())
                    .or_default()
                    .entry(rest.join(","))
                    .or_default()
                    .push((le, value));
            }
        } else if name.ends_with("_total") {
            counters.push((name.to_owned(), labels.to_owned(), value));
        }
    }
    (histograms, counters)
}

/// `text` safe inside an SVG element or attribute.
pub(crate) fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub(crate) const PANEL_W: f64 = 440.0;
pub(crate) const PANEL_H: f64 = 250.0;
/// The x axis: 50 µs … 60 s, logarithmic.
const X_MIN: f64 = 5e-5;
const X_MAX: f64 = 60.0;
pub(crate) const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

pub(crate) fn x_of(seconds: f64, left: f64) -> f64 {
    let t = (seconds.max(X_MIN).log10() - X_MIN.log10()) / (X_MAX.log10() - X_MIN.log10());
    left + 50.0 + t * (PANEL_W - 70.0)
}

pub(crate) fn y_of(share: f64, top: f64) -> f64 {
    top + PANEL_H - 40.0 - share * (PANEL_H - 75.0)
}

pub(crate) fn frame(out: &mut String, left: f64, top: f64, title: &str) {
    let _ = writeln!(
        out,
        r##"<rect x="{left}" y="{top}" width="{PANEL_W}" height="{PANEL_H}" fill="#fff" stroke="#ccc"/>
<text x="{}" y="{}" font-size="14" font-weight="bold">{title}</text>"##,
        left + 10.0,
        top + 20.0
    );
}

/// A CDF panel of one histogram, one line per label set.
fn cdf_panel(
    out: &mut String,
    left: f64,
    top: f64,
    title: &str,
    series: Option<&BTreeMap<String, Buckets>>,
) {
    cdf_axes(out, left, top, title);
    let Some(series) = series.filter(|s| !s.is_empty()) else {
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" font-size="12" fill="#888">no samples in this run</text>"##,
            left + 150.0,
            top + PANEL_H / 2.0
        );
        return;
    };
    draw_series(out, left, top, series);
}

/// A panel's frame with a CDF's axes: share 0 … 1 up, latency 50 µs … 60 s across (log).
pub(crate) fn cdf_axes(out: &mut String, left: f64, top: f64, title: &str) {
    frame(out, left, top, title);
    for (label, share) in [("0", 0.0), ("0.5", 0.5), ("1", 1.0)] {
        let y = y_of(share, top);
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="#eee"/><text x="{}" y="{}" font-size="10" text-anchor="end">{label}</text>"##,
            left + 50.0,
            left + PANEL_W - 20.0,
            left + 45.0,
            y + 3.0
        );
    }
    for (label, seconds) in [
        ("100µs", 1e-4),
        ("1ms", 1e-3),
        ("10ms", 1e-2),
        ("100ms", 0.1),
        ("1s", 1.0),
        ("10s", 10.0),
    ] {
        let x = x_of(seconds, left);
        let _ = writeln!(
            out,
            r##"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#eee"/><text x="{x}" y="{}" font-size="10" text-anchor="middle">{label}</text>"##,
            y_of(0.0, top),
            y_of(1.0, top),
            y_of(0.0, top) + 14.0
        );
    }
}

fn draw_series(out: &mut String, left: f64, top: f64, series: &BTreeMap<String, Buckets>) {
    for (i, (labels, buckets)) in series.iter().enumerate() {
        let total = buckets.last().map_or(0.0, |b| b.1);
        if total <= 0.0 {
            continue;
        }
        let mut points = format!("{},{}", x_of(X_MIN, left), y_of(0.0, top));
        let mut last = 0.0;
        for (le, count) in buckets.iter().filter(|b| b.0.is_finite()) {
            let x = x_of(*le, left);
            let _ = write!(
                points,
                " {x},{} {x},{}",
                y_of(last, top),
                y_of(count / total, top)
            );
            last = count / total;
        }
        let colour = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            out,
            r##"<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>
<text x="{}" y="{}" font-size="10" fill="{colour}">{} (n = {total})</text>"##,
            left + 60.0,
            top + 38.0 + 12.0 * i as f64,
            xml(&labels.replace('"', ""))
        );
    }
}

/// A bar panel of the counters, one bar per metric and outcome.
fn bar_panel(out: &mut String, left: f64, top: f64, counters: &[(String, String, f64)]) {
    frame(out, left, top, "Outcomes (counts)");
    let max = counters.iter().map(|c| c.2).fold(1.0, f64::max);
    for (i, (name, labels, value)) in counters.iter().take(9).enumerate() {
        let y = top + 35.0 + 22.0 * i as f64;
        let label = format!(
            "{} {}",
            name.trim_start_matches("dlock_").trim_end_matches("_total"),
            labels
                .split(',')
                .filter_map(|l| l.strip_prefix("outcome="))
                .collect::<String>()
                .replace('"', "")
        );
        let width = (PANEL_W - 200.0) * value / max;
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" font-size="11">{}</text><rect x="{}" y="{}" width="{width}" height="14" fill="#1f77b4"/><text x="{}" y="{}" font-size="10">{value}</text>"##,
            left + 10.0,
            y + 11.0,
            xml(&label),
            left + 150.0,
            y,
            left + 155.0 + width,
            y + 11.0
        );
    }
}

/// The four panels for the metrics in `text`, titled `title`.
pub fn dashboard_svg(text: &str, title: &str) -> String {
    let (histograms, counters) = parse(text);
    let title = xml(title);
    let mut out = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif">
<rect width="100%" height="100%" fill="#f7f7f7"/>
<text x="10" y="22" font-size="16" font-weight="bold">{title}</text>
"##,
        2.0 * PANEL_W + 30.0,
        2.0 * PANEL_H + 50.0
    );
    let (l, r, t, b) = (10.0, 20.0 + PANEL_W, 35.0, 45.0 + PANEL_H);
    cdf_panel(
        &mut out,
        l,
        t,
        "Acquire wait (share of calls ≤ x)",
        histograms.get("dlock_acquire_wait_seconds"),
    );
    cdf_panel(
        &mut out,
        r,
        t,
        "try_acquire latency (share ≤ x)",
        histograms.get("dlock_acquire_latency_seconds"),
    );
    cdf_panel(
        &mut out,
        l,
        b,
        "Hold time (share ≤ x)",
        histograms.get("dlock_hold_seconds"),
    );
    bar_panel(&mut out, r, b, &counters);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_and_counters_are_read_from_the_exposition() {
        let text = "# HELP x y\n\
            dlock_acquire_wait_seconds_bucket{backend=\"redis\",le=\"0.001\"} 3\n\
            dlock_acquire_wait_seconds_bucket{backend=\"redis\",le=\"+Inf\"} 4\n\
            dlock_acquire_total{backend=\"redis\",outcome=\"acquired\"} 4\n";
        let (h, c) = parse(text);
        assert_eq!(
            h["dlock_acquire_wait_seconds"]["backend=\"redis\""],
            vec![(0.001, 3.0), (f64::INFINITY, 4.0)]
        );
        assert_eq!(c.len(), 1);
        let svg = dashboard_svg(text, "on postgres://x/db?a=1&b=<2>");
        assert!(svg.contains("a=1&amp;b=&lt;2&gt;"), "{svg}");
        assert!(svg.starts_with("<svg") && svg.contains("polyline") && svg.ends_with("</svg>\n"));
    }
}
