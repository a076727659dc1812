//! `dlock bench --plot-svg FILE`: the run's shape before its table — one CDF panel per
//! scenario that times single operations (dlock against its floor), and for the scale
//! scenario one cost-against-N panel per measured cost.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use dlock_bench::{Distribution, Report};

use crate::plot::{COLOURS, PANEL_H, PANEL_W, cdf_axes, frame, x_of, xml, y_of};

/// The SVG for `report`, titled `title`: two panels per row.
pub fn bench_svg(report: &Report, title: &str) -> String {
    let curves = scale_curves(report);
    let panels = report.distributions.len() + curves.len();
    let rows = panels.div_ceil(2).max(1);
    let mut out = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif">
<rect width="100%" height="100%" fill="#f7f7f7"/>
<text x="10" y="22" font-size="16" font-weight="bold">{}</text>
"##,
        2.0 * PANEL_W + 30.0,
        rows as f64 * (PANEL_H + 10.0) + 40.0,
        xml(title)
    );
    let place = |i: usize| {
        (
            10.0 + (i % 2) as f64 * (PANEL_W + 10.0),
            35.0 + (i / 2) as f64 * (PANEL_H + 10.0),
        )
    };
    for (i, d) in report.distributions.iter().enumerate() {
        let (left, top) = place(i);
        cdf(&mut out, left, top, d);
    }
    for (j, ((axis, cost), points)) in curves.iter().enumerate() {
        let (left, top) = place(report.distributions.len() + j);
        curve(&mut out, left, top, &format!("{cost} by {axis}"), points);
    }
    out.push_str("</svg>\n");
    out
}

/// A distribution's CDF: dlock's line and the floor's.
fn cdf(out: &mut String, left: f64, top: f64, d: &Distribution) {
    cdf_axes(
        out,
        left,
        top,
        &format!("{}: {} (share ≤ x)", d.scenario, d.what),
    );
    let lines = [("dlock", Some(&d.dlock)), ("floor", d.floor.as_ref())];
    for (i, (label, ms)) in lines.into_iter().enumerate() {
        let Some(ms) = ms.filter(|m| m.len() > 1) else {
            continue;
        };
        let last = (ms.len() - 1) as f64;
        let points: Vec<String> = ms
            .iter()
            .enumerate()
            .map(|(k, v)| {
                format!(
                    "{:.1},{:.1}",
                    x_of(v / 1000.0, left),
                    y_of(k as f64 / last, top)
                )
            })
            .collect();
        let median = ms[ms.len() / 2];
        let colour = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            out,
            r##"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>
<text x="{}" y="{}" font-size="10" fill="{colour}">{label} (p50 {median:.3} ms)</text>"##,
            points.join(" "),
            // bottom right, where a CDF that rises from the left leaves room
            left + PANEL_W - 190.0,
            top + PANEL_H - 70.0 + 12.0 * i as f64
        );
    }
}

/// The scale scenario's figures as curves, by what grows and then by cost: (N, value)
/// in N order. Metrics read `waiters=N cost` or `held=N cost`.
fn scale_curves(report: &Report) -> BTreeMap<(String, String), Vec<(f64, f64)>> {
    let mut curves: BTreeMap<(String, String), Vec<(f64, f64)>> = BTreeMap::new();
    for f in report.figures.iter().filter(|f| f.scenario == "scale") {
        let Some((size, cost)) = f.metric.split_once(' ') else {
            continue;
        };
        let Some((axis, n)) = size.split_once('=') else {
            continue;
        };
        let Ok(n) = n.parse::<f64>() else {
            continue;
        };
        if f.dlock.is_finite() {
            curves
                .entry((axis.to_owned(), cost.to_owned()))
                .or_default()
                .push((n, f.dlock));
        }
    }
    for points in curves.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    curves.retain(|_, p| !p.is_empty());
    curves
}

/// One cost against N: N across (log), the cost up (linear from 0).
fn curve(out: &mut String, left: f64, top: f64, cost: &str, points: &[(f64, f64)]) {
    frame(out, left, top, cost);
    let (n_min, n_max) = (
        points.first().map_or(1.0, |p| p.0).max(1.0),
        points.last().map_or(10.0, |p| p.0).max(10.0),
    );
    let span = (n_max.log10() - n_min.log10()).max(1.0);
    let x = |n: f64| left + 60.0 + (n.max(1.0).log10() - n_min.log10()) / span * (PANEL_W - 90.0);
    let top_value = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.15;
    let y = |v: f64| y_of(v / top_value, top);
    for share in [0.0, 0.5, 1.0] {
        let v = top_value * share;
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#eee"/><text x="{}" y="{}" font-size="10" text-anchor="end">{}</text>"##,
            left + 55.0,
            y(v),
            left + PANEL_W - 20.0,
            y(v),
            left + 50.0,
            y(v) + 3.0,
            short(v)
        );
    }
    let mut line = Vec::new();
    for (n, v) in points {
        let (px, py) = (x(*n), y(*v));
        line.push(format!("{px:.1},{py:.1}"));
        let _ = writeln!(
            out,
            r##"<circle cx="{px:.1}" cy="{py:.1}" r="3" fill="{}"/><text x="{px:.1}" y="{}" font-size="10" text-anchor="middle">{}</text><text x="{px:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="{}">{}</text>"##,
            COLOURS[0],
            y(0.0) + 14.0,
            short(*n),
            py - 6.0,
            COLOURS[0],
            short(*v)
        );
    }
    let _ = writeln!(
        out,
        r##"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"##,
        line.join(" "),
        COLOURS[0]
    );
}

/// A number in at most four significant characters (1.23, 45.6, 1.2k, 100k).
fn short(v: f64) -> String {
    match v.abs() {
        a if a >= 1e6 => format!("{:.1}M", v / 1e6),
        a if a >= 1e4 => format!("{:.0}k", v / 1e3),
        a if a >= 1e3 => format!("{:.1}k", v / 1e3),
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use dlock_bench::Figure;

    use super::*;

    #[test]
    fn distributions_and_scale_figures_become_panels() {
        let report = Report {
            backend: "redis",
            url: "redis://h<1>".into(),
            floor: None,
            peer: None,
            server_count: None,
            figures: vec![
                Figure {
                    scenario: "scale",
                    metric: "waiters=10 req/hand-off",
                    dlock: 2.5,
                    floor: None,
                },
                Figure {
                    scenario: "scale",
                    metric: "waiters=1 req/hand-off",
                    dlock: 2.0,
                    floor: None,
                },
                Figure {
                    scenario: "uncontended",
                    metric: "cycle p50 ms",
                    dlock: 0.1,
                    floor: None,
                },
            ],
            distributions: vec![Distribution {
                scenario: "handoff",
                what: "hand-off",
                dlock: vec![0.1, 0.2, 0.3],
                floor: Some(vec![0.05, 0.06, 0.07]),
            }],
            failed: Vec::new(),
            left_behind: None,
        };
        let curves = scale_curves(&report);
        assert_eq!(
            curves[&("waiters".to_owned(), "req/hand-off".to_owned())],
            vec![(1.0, 2.0), (10.0, 2.5)]
        );
        let svg = bench_svg(&report, "dlock bench on redis://h<1>");
        assert!(svg.contains("h&lt;1&gt;"));
        assert_eq!(
            svg.matches("<polyline").count(),
            3,
            "two CDF lines, one curve"
        );
        assert!(svg.contains("floor (p50 0.060 ms)"), "{svg}");
        assert!(svg.ends_with("</svg>\n"));
    }
}
