//! Pictures as hand-written SVG: latency CDFs (one curve per run) and, for sweeps, the
//! throughput–latency curve. Pure: returns file names and SVG text; the caller writes them.
//!
//! No plotting crate: an SVG of a few polylines, axes and labels is ~150 lines, opens in any
//! browser, diffs as text, and keeps the dependency tree (and build time) small. The CDF x axis
//! ends at the largest p99.9 of the runs shown (the tail beyond it would squash the body of the
//! distribution); the y axis is the percentile.

use crate::metric::Family;
use crate::result::BenchResult;
use std::fmt::Write;

const W: f64 = 720.0;
const H: f64 = 440.0;
const ML: f64 = 70.0;
const MR: f64 = 20.0;
const MT: f64 = 40.0;
const MB: f64 = 60.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" tick step for a range.
fn tick_step(range: f64) -> f64 {
    if !(range.is_finite() && range > 0.0) {
        return 1.0;
    }
    let raw = range / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let m = if n < 1.5 {
        1.0
    } else if n < 3.5 {
        2.0
    } else if n < 7.5 {
        5.0
    } else {
        10.0
    };
    m * mag
}

struct Frame {
    x_max: f64,
    y_max: f64,
}

impl Frame {
    fn x(&self, v: f64) -> f64 {
        ML + (v / self.x_max).clamp(0.0, 1.0) * (W - ML - MR)
    }
    fn y(&self, v: f64) -> f64 {
        H - MB - (v / self.y_max).clamp(0.0, 1.0) * (H - MT - MB)
    }
}

fn axes(svg: &mut String, f: &Frame, title: &str, xl: &str, yl: &str) {
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>
"#,
        W / 2.0,
        esc(title)
    );
    let xs = tick_step(f.x_max);
    let mut t = 0.0;
    while t <= f.x_max * 1.0001 {
        let x = f.x(t);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            MT,
            H - MB,
            H - MB + 16.0,
            fmt_tick(t)
        );
        t += xs;
    }
    let ys = tick_step(f.y_max);
    let mut t = 0.0;
    while t <= f.y_max * 1.0001 {
        let y = f.y(t);
        let _ = writeln!(
            svg,
            r##"<line x1="{ML}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - MR,
            ML - 6.0,
            y + 4.0,
            fmt_tick(t)
        );
        t += ys;
    }
    let _ = writeln!(
        svg,
        r#"<rect x="{ML}" y="{MT}" width="{:.1}" height="{:.1}" fill="none" stroke="black"/>
<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>
<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        W - ML - MR,
        H - MT - MB,
        (ML + W - MR) / 2.0,
        H - 18.0,
        esc(xl),
        (MT + H - MB) / 2.0,
        (MT + H - MB) / 2.0,
        esc(yl)
    );
}

fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn legend(svg: &mut String, labels: &[String]) {
    for (i, (l, c)) in labels.iter().zip(COLORS.iter().cycle()).enumerate() {
        let y = MT + 16.0 + i as f64 * 16.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            W - MR - 200.0,
            y - 4.0,
            W - MR - 180.0,
            y - 4.0,
            W - MR - 175.0,
            y,
            esc(l)
        );
    }
}

/// A CDF plot: x = latency (ms), y = percentile, one curve per `(label, [[percentile, ms]])`.
pub fn cdf_svg(title: &str, series: &[(String, Vec<[f64; 2]>)]) -> String {
    let x_max = series
        .iter()
        .flat_map(|(_, pts)| pts.iter().filter(|p| p[0] <= 99.9).map(|p| p[1]))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.05;
    let f = Frame {
        x_max,
        y_max: 100.0,
    };
    let mut svg = String::new();
    axes(&mut svg, &f, title, "latency (ms)", "percentile");
    for ((_, pts), c) in series.iter().zip(COLORS.iter().cycle()) {
        let path: Vec<String> = pts
            .iter()
            .filter(|p| p[1] <= x_max)
            .map(|p| format!("{:.1},{:.1}", f.x(p[1]), f.y(p[0])))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
    }
    legend(
        &mut svg,
        &series.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>(),
    );
    svg.push_str("</svg>\n");
    svg
}

/// One sweep step: (output tokens/s, latency p50 ms, latency p99 ms).
pub type SweepPoint = (f64, f64, f64);

/// A sweep plot: x = output tokens/s, y = latency (ms); per series a solid p50 and dashed p99.
pub fn sweep_svg(title: &str, ylabel: &str, series: &[(String, Vec<SweepPoint>)]) -> String {
    let x_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|t| t.0))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.05;
    let y_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|t| t.2.max(t.1)))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.05;
    let f = Frame { x_max, y_max };
    let mut svg = String::new();
    axes(&mut svg, &f, title, "output tokens/s", ylabel);
    for ((_, pts), c) in series.iter().zip(COLORS.iter().cycle()) {
        let mut pts = pts.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (k, dash) in [(1usize, ""), (2, r#" stroke-dasharray="6 4""#)] {
            let path: Vec<String> = pts
                .iter()
                .map(|t| {
                    let v = if k == 1 { t.1 } else { t.2 };
                    format!("{:.1},{:.1}", f.x(t.0), f.y(v))
                })
                .collect();
            let _ = writeln!(
                svg,
                r#"<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"/>"#,
                path.join(" ")
            );
        }
        for t in &pts {
            let _ = writeln!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#,
                f.x(t.0),
                f.y(t.1)
            );
        }
    }
    let mut labels: Vec<String> = series.iter().map(|(l, _)| l.clone()).collect();
    labels.push("solid p50, dashed p99".into());
    legend(&mut svg, &labels);
    svg.push_str("</svg>\n");
    svg
}

/// One candidate on a Pareto plot: label, output tokens/s, a p90 latency (ms), on the front?
pub type ParetoPoint = (String, f64, f64, bool);

/// Throughput (x) against a p90 latency (y) for tuning candidates: every candidate a grey dot
/// with its label, the Pareto front (no other candidate is both faster and lower-latency)
/// joined in colour.
pub fn pareto_svg(title: &str, ylabel: &str, points: &[ParetoPoint]) -> String {
    let x_max = points.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1e-3) * 1.1;
    let y_max = points.iter().map(|p| p.2).fold(0.0f64, f64::max).max(1e-3) * 1.1;
    let f = Frame { x_max, y_max };
    let mut svg = String::new();
    axes(&mut svg, &f, title, "output tokens/s", ylabel);
    let mut front: Vec<&ParetoPoint> = points.iter().filter(|p| p.3).collect();
    front.sort_by(|a, b| a.1.total_cmp(&b.1));
    let path: Vec<String> = front
        .iter()
        .map(|p| format!("{:.1},{:.1}", f.x(p.1), f.y(p.2)))
        .collect();
    let c = COLORS[0];
    let _ = writeln!(
        svg,
        r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
        path.join(" ")
    );
    for p in points {
        let fill = if p.3 { c } else { "#999" };
        let (x, y) = (f.x(p.1), f.y(p.2));
        let _ = writeln!(
            svg,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{fill}"/><text x="{:.1}" y="{:.1}" font-size="10">{}</text>"#,
            x + 6.0,
            y - 6.0,
            esc(&p.0)
        );
    }
    legend(&mut svg, &["Pareto front".to_string()]);
    svg.push_str("</svg>\n");
    svg
}

/// Engine metrics over time: x = seconds since the run started, y = each series divided by its
/// own largest value (their units differ: a KV fraction, a queue length, a counter), the maximum
/// named in the legend. `(label, points)`; empty series are left out.
pub fn time_series_svg(title: &str, series: &[(String, Vec<[f64; 2]>)]) -> String {
    let x_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q[0]))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.02;
    let f = Frame { x_max, y_max: 1.05 };
    let mut svg = String::new();
    axes(
        &mut svg,
        &f,
        title,
        "seconds since the run started",
        "value / series maximum",
    );
    let mut labels = Vec::new();
    for ((l, pts), c) in series
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .zip(COLORS.iter().cycle())
    {
        let max = pts.iter().map(|q| q[1]).fold(0.0f64, f64::max);
        let scale = if max > 0.0 { max } else { 1.0 };
        let path: Vec<String> = pts
            .iter()
            .map(|q| format!("{:.1},{:.1}", f.x(q[0]), f.y(q[1] / scale)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        labels.push(format!("{l} (max {})", fmt_tick(max)));
    }
    legend(&mut svg, &labels);
    svg.push_str("</svg>\n");
    svg
}

/// All plots for one or several labelled results: `{ttft,tpot,itl,e2e}_cdf.svg`, and
/// `sweep_ttft.svg`/`sweep_e2e.svg` when any result has a sweep, `server_metrics.svg` when any
/// recorded engine metrics. Returns `(file name, svg)`.
pub fn plots(results: &[(String, &BenchResult)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (m, title) in [
        ("ttft_ms", "Time to first token"),
        ("tpot_ms", "Time per output token"),
        ("itl_ms", "Inter-token latency"),
        ("e2e_ms", "End-to-end latency"),
    ] {
        let series: Vec<(String, Vec<[f64; 2]>)> = results
            .iter()
            .filter_map(|(l, r)| {
                r.stats
                    .cdf
                    .get(m)
                    .filter(|v| !v.is_empty())
                    .map(|v| (l.clone(), v.clone()))
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let name = m.trim_end_matches("_ms");
        out.push((
            format!("{name}_cdf.svg"),
            cdf_svg(&format!("{title} (CDF)"), &series),
        ));
    }
    for (fam, title) in [
        (Family::Ttft, "TTFT vs throughput"),
        (Family::E2e, "E2E latency vs throughput"),
    ] {
        let series: Vec<(String, Vec<SweepPoint>)> = results
            .iter()
            .filter_map(|(l, r)| {
                let sw = r.sweep.as_ref()?;
                let pts = sw
                    .steps
                    .iter()
                    .filter_map(|s| {
                        let sum = fam.summary(&s.stats);
                        Some((s.stats.output_tokens_per_s, sum.p50?, sum.p99?))
                    })
                    .collect::<Vec<_>>();
                (!pts.is_empty()).then(|| (l.clone(), pts))
            })
            .collect();
        if !series.is_empty() {
            out.push((
                format!("sweep_{}.svg", fam.name()),
                sweep_svg(
                    title,
                    &format!("{} (ms)", fam.name().to_uppercase()),
                    &series,
                ),
            ));
        }
    }
    let engine: Vec<(String, Vec<[f64; 2]>)> = results
        .iter()
        .filter_map(|(l, r)| Some((l, r.server_metrics.as_ref()?)))
        .flat_map(|(l, m)| {
            m.series.iter().map(move |(name, pts)| {
                let label = if results.len() > 1 {
                    format!("{l}: {name}")
                } else {
                    name.clone()
                };
                (label, pts.clone())
            })
        })
        .collect();
    if engine.iter().any(|(_, p)| !p.is_empty()) {
        out.push((
            "server_metrics.svg".into(),
            time_series_svg("Engine metrics during the run", &engine),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pareto_marks_the_front_and_escapes_labels() {
        let pts = vec![
            ("np=1 <a>".to_string(), 100.0, 50.0, true),
            ("np=4".to_string(), 200.0, 80.0, true),
            ("np=2".to_string(), 150.0, 90.0, false),
        ];
        let s = pareto_svg("t", "p90 TTFT (ms)", &pts);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("np=1 &lt;a&gt;") && !s.contains("<a>"));
        // the front's two points joined, the dominated one grey
        let line = s.lines().find(|l| l.starts_with("<polyline")).unwrap();
        assert_eq!(line.matches(',').count(), 2);
        assert_eq!(s.matches(r##"fill="#999""##).count(), 1);
        // no points: still a valid picture
        assert!(pareto_svg("t", "y", &[]).ends_with("</svg>\n"));
    }

    #[test]
    fn cdf_is_well_formed_svg() {
        let s = cdf_svg(
            "TTFT <test>",
            &[
                ("a".into(), vec![[0.0, 1.0], [50.0, 2.0], [100.0, 50.0]]),
                ("b&c".into(), vec![[0.0, 1.5], [50.0, 2.5], [99.9, 3.0]]),
            ],
        );
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("TTFT &lt;test&gt;"));
        assert!(s.contains("b&amp;c"));
        assert!(!s.contains("NaN"));
    }

    #[test]
    fn empty_and_degenerate_inputs() {
        let s = cdf_svg("x", &[]);
        assert!(!s.contains("NaN") && !s.contains("inf"));
        let s = sweep_svg("x", "y", &[("a".into(), vec![(0.0, 0.0, 0.0)])]);
        assert!(!s.contains("NaN"));
        assert_eq!(tick_step(0.0), 1.0);
        assert_eq!(tick_step(10.0), 2.0);
    }
}
