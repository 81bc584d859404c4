//! SVG plots of one `cargo xtask bench` run (plotters, SVG backend only).

use std::path::Path;

use plotters::prelude::*;

use super::report::{BW_SIZES, COLL_SIZES, LAT_SIZES};
use super::{group, Samples, COLL_RANKS};

/// One curve: its legend, its colour, its (x, y) points.
pub(super) type Series = (String, RGBColor, Vec<(f64, f64)>);

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// 1000 -> `1k`, 16777216 -> `16.8M`, 0.001 -> `0.001`.
fn si(v: f64) -> String {
    let (x, unit) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{unit}")
}

/// Log-log line plot of `series` with markers.
pub(super) fn draw(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> Result<(), String> {
    let pts = series.iter().flat_map(|s| s.2.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (1.0, 10.0, 1.0, 10.0);
    }
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (x0 / 2.0..x1 * 2.0).log_scale(),
            (y0 / 2.0..y1 * 2.0).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| format!("{} B", si(*v)))
        .y_label_formatter(&|v| si(*v))
        .draw()
        .map_err(err)?;
    for (name, color, points) in series {
        if points.is_empty() {
            continue;
        }
        let style = ShapeStyle::from(color).stroke_width(2);
        chart
            .draw_series(LineSeries::new(points.iter().copied(), style))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&p| Circle::new(p, 3, ShapeStyle::from(color).filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Bandwidth against message size: ping-pong sizes as size / one-way
/// time, streaming sizes as measured.
pub fn bandwidth(s: &Samples, path: &Path) -> Result<(), String> {
    let curve = |grp: &str, lat: &str, bw: &str| -> Vec<(f64, f64)> {
        let mut v = Vec::new();
        for size in LAT_SIZES {
            if let Some(t) = s.get(grp, lat, size) {
                v.push((size as f64, size as f64 / t.median / 1e3));
            }
        }
        for size in BW_SIZES {
            if let Some(b) = s.get(grp, bw, size) {
                v.push((size as f64, b.median));
            }
        }
        v
    };
    let series: Vec<Series> = vec![
        (
            "SPERLI (two rank processes)".into(),
            RGBColor(200, 30, 30),
            curve(&group("sperli", "pingpong", 2), "sperli_lat", "sperli_bw"),
        ),
        (
            "OpenMPI over TCP, loopback".into(),
            RGBColor(30, 70, 200),
            curve(&group("mpi", "pingpong", 2), "mpi_lat", "mpi_bw"),
        ),
        (
            "bare rustls stream (the TLS limit)".into(),
            RGBColor(20, 150, 60),
            curve("limits", "tls_lat", "tls_bw"),
        ),
        (
            "bare TCP stream".into(),
            RGBColor(130, 130, 130),
            curve("limits", "tcp_lat", "tcp_bw"),
        ),
    ];
    draw(
        path,
        "Ping-pong bandwidth (8 B-64 KiB: size / one-way time; 1-64 MiB: streaming)",
        "message size (1k = 1000)",
        "GB/s (log)",
        &series,
    )
}

/// allreduce time per call against size per rank, at 2, 4 and 8 ranks.
pub fn allreduce(s: &Samples, path: &Path) -> Result<(), String> {
    let reds = [
        RGBColor(250, 120, 100),
        RGBColor(210, 40, 30),
        RGBColor(120, 0, 0),
    ];
    let blues = [
        RGBColor(120, 170, 250),
        RGBColor(40, 90, 220),
        RGBColor(10, 20, 120),
    ];
    let mut series: Vec<Series> = Vec::new();
    for (i, n) in COLL_RANKS.iter().enumerate() {
        for (side, label, color) in [("sperli", "SPERLI", reds[i]), ("mpi", "OpenMPI", blues[i])] {
            let pts: Vec<(f64, f64)> = COLL_SIZES
                .iter()
                .filter_map(|&b| {
                    s.get(&group(side, "coll", *n), "allreduce", b)
                        .map(|t| (b as f64, t.median))
                })
                .collect();
            series.push((format!("{label}, {n} ranks"), color, pts));
        }
    }
    draw(
        path,
        "allreduce (f64 sum) time per call",
        "bytes per rank (1k = 1000)",
        "µs (log)",
        &series,
    )
}
