//! The rr-demo figure: throughput and latency per case, xsk against kernel, with the ratio of
//! each pair, drawn once with plotters into an SVG and a PNG of the same layout.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One backend's medians in one case.
#[derive(Clone, Copy, Debug)]
pub struct Bars {
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

#[derive(Clone, Debug)]
pub struct PlotCase {
    pub name: String,
    pub conns: usize,
    /// (client, server) threads; shown under the case unless both are 1.
    pub threads: (usize, usize),
    pub xsk: Option<Bars>,
    pub kernel: Option<Bars>,
}

/// Text around the bars.
#[derive(Clone, Debug)]
pub struct PlotText {
    pub title: String,
    pub subtitle: String,
    /// One line per kind of case: what its name means.
    pub case_legend: Vec<String>,
}

const SIZE: (u32, u32) = (1500, 1120);
const XSK: RGBColor = RGBColor(51, 102, 204);
const KERNEL: RGBColor = RGBColor(140, 140, 140);
const FONT: &str = "sans-serif";

/// Writes `svg` and `png` (same drawing).
pub fn draw_files(text: &PlotText, cases: &[PlotCase], svg: &Path, png: &Path) -> Result<()> {
    draw(SVGBackend::new(svg, SIZE).into_drawing_area(), text, cases)
        .map_err(|e| anyhow!("drawing {}: {e}", svg.display()))?;
    draw(BitMapBackend::new(png, SIZE).into_drawing_area(), text, cases)
        .map_err(|e| anyhow!("drawing {}: {e}", png.display()))
}

/// Compact latency: 8.9us, 1.3ms, 0.31s.
pub fn fmt_us(us: f64) -> String {
    if !us.is_finite() {
        "-".into()
    } else if us < 10.0 {
        format!("{us:.1}us")
    } else if us < 1000.0 {
        format!("{us:.0}us")
    } else if us < 1e6 {
        let ms = us / 1000.0;
        if ms < 10.0 {
            format!("{ms:.1}ms")
        } else {
            format!("{ms:.0}ms")
        }
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

fn fmt_ratio(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}x")
    } else if r >= 10.0 {
        format!("{r:.1}x")
    } else {
        format!("{r:.2}x")
    }
}

fn fmt_rps(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else if r >= 1e4 {
        format!("{:.0}k", r / 1e3)
    } else if r >= 1e3 {
        format!("{:.1}k", r / 1e3)
    } else {
        format!("{r:.0}")
    }
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, text: &PlotText, cases: &[PlotCase]) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let n = cases.len().max(1);
    let legend_h = 30 + 22 * text.case_legend.len() as u32;
    const HEAD: u32 = 104;
    const TOP: u32 = 430;
    let (head, rest) = root.split_vertically(HEAD);
    let (top, rest) = rest.split_vertically(TOP);
    let (bottom, foot) = rest.split_vertically(SIZE.1 - HEAD - TOP - legend_h);
    head.draw(&Text::new(text.title.clone(), (20, 12), (FONT, 26).into_font().style(FontStyle::Bold))).map_err(e)?;
    head.draw(&Text::new(text.subtitle.clone(), (20, 44), (FONT, 17).into_font())).map_err(e)?;
    // One legend for both panels, above them, where it cannot cover a bar.
    let mut x = 20;
    for (name, style) in [
        ("xsk server (userspace stack over AF_XDP)", XSK.filled()),
        ("kernel server (kernel TCP)", KERNEL.filled()),
        ("latency p50: solid,", XSK.filled()),
        ("p99: light", XSK.mix(0.35).filled()),
    ] {
        head.draw(&Rectangle::new([(x, 74), (x + 18, 92)], style)).map_err(e)?;
        head.draw(&Text::new(name, (x + 26, 74), (FONT, 17).into_font())).map_err(e)?;
        let w = head.estimate_text_size(name, &TextStyle::from((FONT, 17).into_font())).map_or(200, |(w, _)| w as i32);
        x += 26 + w + 36;
    }

    let x_range = -0.5f64..(n as f64 - 0.5);
    let bar = |i: usize, j: usize| {
        let left = i as f64 - 0.40 + j as f64 * 0.40;
        (left, left + 0.38)
    };
    let label_style = |size: u32, h: HPos, v: VPos| TextStyle::from((FONT, size).into_font()).pos(Pos::new(h, v));

    // Throughput.
    let max_rps = cases
        .iter()
        .flat_map(|c| [c.xsk, c.kernel])
        .flatten()
        .map(|b| b.rps)
        .filter(|r| r.is_finite())
        .fold(1.0, f64::max);
    let mut ch = ChartBuilder::on(&top)
        .margin_left(20)
        .margin_right(30)
        .margin_top(10)
        .x_label_area_size(48)
        .y_label_area_size(90)
        .caption("Throughput, requests per second (higher is better); xsk/kernel ratio above each pair", (FONT, 20))
        .build_cartesian_2d(x_range.clone(), 0f64..max_rps * 1.45)
        .map_err(e)?;
    ch.configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(8)
        .y_desc("requests per second")
        .y_label_formatter(&|v| fmt_rps(*v))
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(e)?;
    for (j, (name, color)) in
        [("xsk server (userspace stack over AF_XDP)", XSK), ("kernel server (kernel TCP)", KERNEL)]
            .into_iter()
            .enumerate()
    {
        let rects: Vec<_> = cases
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let b = if j == 0 { c.xsk } else { c.kernel }?;
                let (l, r) = bar(i, j);
                b.rps.is_finite().then(|| Rectangle::new([(l, 0.0), (r, b.rps)], color.filled()))
            })
            .collect();
        let _ = name;
        ch.draw_series(rects).map_err(e)?;
    }
    for (i, c) in cases.iter().enumerate() {
        for (j, b) in [c.xsk, c.kernel].into_iter().enumerate() {
            let Some(b) = b.filter(|b| b.rps.is_finite()) else { continue };
            let (l, r) = bar(i, j);
            ch.draw_series([Text::new(
                fmt_rps(b.rps),
                ((l + r) / 2.0, b.rps),
                label_style(14, HPos::Center, VPos::Bottom),
            )])
            .map_err(e)?;
        }
        if let (Some(x), Some(k)) = (c.xsk, c.kernel) {
            let top_of = x.rps.max(k.rps);
            if (x.rps / k.rps).is_finite() {
                ch.draw_series([Text::new(
                    fmt_ratio(x.rps / k.rps),
                    (i as f64, top_of + max_rps * 0.09),
                    TextStyle::from((FONT, 18).into_font().style(FontStyle::Bold))
                        .pos(Pos::new(HPos::Center, VPos::Bottom)),
                )])
                .map_err(e)?;
            }
        }
    }
    case_names(&root, &ch, cases)?;

    // Latency, log scale.
    let max_lat = cases
        .iter()
        .flat_map(|c| [c.xsk, c.kernel])
        .flatten()
        .map(|b| b.p99_us)
        .filter(|v| v.is_finite())
        .fold(10.0, f64::max);
    let y_top = max_lat * 40.0;
    let mut ch = ChartBuilder::on(&bottom)
        .margin_left(20)
        .margin_right(30)
        .margin_top(10)
        .x_label_area_size(48)
        .y_label_area_size(90)
        .caption(
            "Latency per request, log scale (lower is better): p50 solid, p99 light; xsk/kernel ratios above each pair",
            (FONT, 20),
        )
        .build_cartesian_2d(x_range, (1f64..y_top).log_scale())
        .map_err(e)?;
    ch.configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("latency (log scale)")
        .y_label_formatter(&|v| fmt_us(*v))
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(e)?;
    for (i, c) in cases.iter().enumerate() {
        for (j, (b, color)) in [(c.xsk, XSK), (c.kernel, KERNEL)].into_iter().enumerate() {
            let Some(b) = b else { continue };
            let (l, r) = bar(i, j);
            if b.p99_us.is_finite() {
                ch.draw_series([Rectangle::new([(l, 1.0), (r, b.p99_us.max(1.0))], color.mix(0.35).filled())])
                    .map_err(e)?;
                ch.draw_series([Text::new(
                    fmt_us(b.p99_us),
                    ((l + r) / 2.0, b.p99_us.max(1.0)),
                    label_style(13, HPos::Center, VPos::Bottom),
                )])
                .map_err(e)?;
            }
            if b.p50_us.is_finite() {
                ch.draw_series([Rectangle::new([(l, 1.0), (r, b.p50_us.max(1.0))], color.filled())]).map_err(e)?;
                ch.draw_series([Text::new(
                    fmt_us(b.p50_us),
                    ((l + r) / 2.0, b.p50_us.max(1.0) / 1.15),
                    TextStyle::from((FONT, 13).into_font()).color(&WHITE).pos(Pos::new(HPos::Center, VPos::Top)),
                )])
                .map_err(e)?;
            }
        }
        if let (Some(x), Some(k)) = (c.xsk, c.kernel) {
            let top_of = x.p99_us.max(k.p99_us).max(1.0);
            for (line, (what, a, b)) in
                [("p99", x.p99_us, k.p99_us), ("p50", x.p50_us, k.p50_us)].into_iter().enumerate()
            {
                let ratio = a / b;
                if ratio.is_finite() {
                    ch.draw_series([Text::new(
                        format!("{what} {}", fmt_ratio(ratio)),
                        (i as f64, top_of * 2.2 * 2.6f64.powi(line as i32)),
                        TextStyle::from((FONT, 15).into_font().style(FontStyle::Bold))
                            .pos(Pos::new(HPos::Center, VPos::Bottom)),
                    )])
                    .map_err(e)?;
                }
            }
        }
    }
    case_names(&root, &ch, cases)?;

    for (k, line) in text.case_legend.iter().enumerate() {
        foot.draw(&Text::new(line.clone(), (30, 8 + 22 * k as i32), (FONT, 16).into_font())).map_err(e)?;
    }
    root.present().map_err(e)
}

/// Case names and connection counts under the x axis (plotters' own labels would sit at
/// "nice" numbers, not at the categories).
fn case_names<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    root: &DrawingArea<DB, Shift>,
    ch: &ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    cases: &[PlotCase],
) -> Result<(), String> {
    let (_, y_range) = (ch.x_range(), ch.y_range());
    let base = y_range.start;
    for (i, c) in cases.iter().enumerate() {
        let (px, py) = ch.backend_coord(&(i as f64, base));
        let style = |size| TextStyle::from((FONT, size).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(c.name.clone(), (px, py + 8), style(16))).map_err(|e| e.to_string())?;
        let mut conns =
            if c.conns == 1 { "1 conn".to_string() } else { format!("{} conns", crate::group_digits(c.conns as u64)) };
        if c.threads != (1, 1) {
            conns += &format!(", {}/{} thr", c.threads.0, c.threads.1);
        }
        root.draw(&Text::new(conns, (px, py + 27), style(13))).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_numbers() {
        assert_eq!(fmt_us(8.94), "8.9us");
        assert_eq!(fmt_us(123.4), "123us");
        assert_eq!(fmt_us(1322.0), "1.3ms");
        assert_eq!(fmt_us(47088.0), "47ms");
        assert_eq!(fmt_us(310_903.0), "311ms");
        assert_eq!(fmt_us(1_500_000.0), "1.50s");
        assert_eq!(fmt_rps(194_921.0), "195k");
        assert_eq!(fmt_rps(3626.0), "3.6k");
        assert_eq!(fmt_ratio(1.3149), "1.31x");
        assert_eq!(fmt_ratio(2024.97), "2025x");
    }

    #[test]
    fn draws_both_files() {
        let dir = std::env::temp_dir().join(format!("plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let b = |rps, p50_us, p99_us| Some(Bars { rps, p50_us, p99_us });
        let cases = vec![
            PlotCase {
                name: "rr-16".into(),
                conns: 16,
                threads: (2, 2),
                xsk: b(194_921.0, 79.0, 123.0),
                kernel: b(148_854.0, 105.0, 146.0),
            },
            PlotCase {
                name: "loss1-16".into(),
                conns: 16,
                threads: (1, 1),
                xsk: b(14_915.0, 14.0, 47_088.0),
                kernel: None,
            },
        ];
        let text = PlotText { title: "t".into(), subtitle: "s".into(), case_legend: vec!["rr-N: ...".into()] };
        let (svg, png) = (dir.join("r.svg"), dir.join("r.png"));
        draw_files(&text, &cases, &svg, &png).unwrap();
        let s = std::fs::read_to_string(&svg).unwrap();
        for needle in ["1.31x", "195k", "123us", "79us", "loss1-16", "47ms", "p99 0.84x", "p50 0.75x"] {
            assert!(s.contains(needle), "{needle} missing from the SVG");
        }
        assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
