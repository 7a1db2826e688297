//! SVG charts of `heloom offload --compare` (seed 001): time per method against item size
//! (Table 2), efficiency against item size with the target line, and each device's share of
//! the items per method (Table 3).

use std::path::Path;

use anyhow::{anyhow, Result};
use heloom_devices::compare::{CompareReport, RunRow};
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::Ranged;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::offload::items_in_order;

use crate::plot::{chart_builder, nth_colour, pe, svg_canvas, Series};

/// Colours of single devices in the method charts, by position: greys and browns.
const SINGLE_COLOURS: [RGBColor; 4] = [
    RGBColor(110, 110, 110),
    RGBColor(140, 86, 75),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
];

/// A fixed colour per balancer; single devices get [`SINGLE_COLOURS`] by position.
fn method_colour(method: &str, single_index: usize) -> RGBColor {
    match method {
        "round-robin" => RGBColor(31, 119, 180),
        "polling" => RGBColor(44, 160, 44),
        "pull" => RGBColor(255, 127, 14),
        "heloom" => RGBColor(214, 39, 40),
        _ => nth_colour(&SINGLE_COLOURS, single_index, 4),
    }
}

/// Colours of the devices in the share chart, by position.
const DEVICE_COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Colour of device `i` in the share chart.
fn device_colour(i: usize) -> RGBColor {
    nth_colour(&DEVICE_COLOURS, i, 4)
}

/// Methods of a report in order with their colours and uniform-size points `(log2 size, value)`.
fn method_series(
    rep: &CompareReport,
    keep: impl Fn(&RunRow) -> bool,
    value: impl Fn(&RunRow) -> f64,
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    let mut singles = 0;
    for r in rep.runs.iter().filter(|r| keep(r)) {
        if !out.iter().any(|s| s.0 == r.method) {
            let c = method_colour(&r.method, singles);
            if r.single {
                singles += 1;
            }
            out.push((r.method.clone(), c, Vec::new()));
        }
    }
    for s in &mut out {
        s.2 = rep
            .runs
            .iter()
            .filter(|r| r.method == s.0 && r.size > 0)
            .map(|r| ((r.size as f64).log2(), value(r)))
            .filter(|p| p.1.is_finite())
            .collect();
        s.2.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// The x range of the uniform sizes in log2(bytes), padded. The size axes are linear in
/// log2(size) so their labels fall on powers of two.
fn size_range(rep: &CompareReport) -> Result<(f64, f64)> {
    let (lo, hi) = rep
        .runs
        .iter()
        .filter(|r| r.size > 0)
        .map(|r| (r.size as f64).log2())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    if !lo.is_finite() || !hi.is_finite() {
        return Err(anyhow!("no uniform sizes to plot"));
    }
    Ok((lo - 0.5, hi + 0.5))
}

/// Label of a log2(size) axis point: the size where it is a whole power of two.
fn pow2_label(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-6 && (0.0..=40.0).contains(x) {
        format!("{}", 1u64 << (x.round() as u32))
    } else {
        String::new()
    }
}

/// The item-size x axis of the offload charts: log2 sizes, labelled in bytes.
fn size_axis<'m, 'a, 'b, Y: Ranged, DB: DrawingBackend>(
    mesh: &'m mut MeshStyle<'a, 'b, RangedCoordf64, Y, DB>,
) -> &'m mut MeshStyle<'a, 'b, RangedCoordf64, Y, DB> {
    mesh.x_desc("item size (bytes, log scale)")
        .x_labels(16)
        .x_label_formatter(&pow2_label)
}

/// Table 2: time (ms) of every method against item size, log-log, the ideal dashed.
pub fn table2_plot(rep: &CompareReport, path: &Path, title: &str) -> Result<()> {
    let (xmin, xmax) = size_range(rep)?;
    let series = method_series(rep, |_| true, |r| r.ms);
    let mut ideal: Vec<(f64, f64)> = Vec::new();
    for r in rep.runs.iter().filter(|r| r.size > 0) {
        if !ideal.iter().any(|p| p.0 == (r.size as f64).log2()) && r.ideal_ms.is_finite() {
            ideal.push(((r.size as f64).log2(), r.ideal_ms));
        }
    }
    ideal.sort_by(|a, b| a.0.total_cmp(&b.0));
    let ys = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .chain(ideal.iter().map(|p| p.1))
        .filter(|v| *v > 0.0);
    let (ylo, yhi) = ys.fold((f64::INFINITY, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
    if !ylo.is_finite() {
        return Err(anyhow!("no times to plot"));
    }
    // Headroom above for the legend.
    let (ymin, ymax) = (ylo / 1.5, yhi * 4.0);

    let root = svg_canvas(path, (1100, 700))?;
    let mut chart = chart_builder(&root, title, 20, 15, (45, 70))
        .build_cartesian_2d(xmin..xmax, (ymin..ymax).log_scale())
        .map_err(pe)?;
    size_axis(&mut chart.configure_mesh())
        .y_desc("time for all items (ms, log scale)")
        .y_label_formatter(&|y| {
            if *y >= 1.0 {
                format!("{y:.0}")
            } else {
                format!("{y:.2}")
            }
        })
        .draw()
        .map_err(pe)?;
    crate::plot::draw_lines(&mut chart, &series)?;
    chart
        .draw_series(DashedLineSeries::new(
            ideal.iter().copied(),
            8,
            5,
            BLACK.stroke_width(2),
        ))
        .map_err(pe)?
        .label("ideal 1/Σ(1/T_d)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    crate::plot::draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(pe)?;
    Ok(())
}

/// Efficiency (ideal / measured) of every combined method against item size, with the
/// `target` line.
pub fn efficiency_plot(rep: &CompareReport, target: f64, path: &Path, title: &str) -> Result<()> {
    let (xmin, xmax) = size_range(rep)?;
    let series = method_series(rep, |r| !r.single, |r| r.efficiency);
    if series.iter().all(|s| s.2.is_empty()) {
        return Err(anyhow!("no combined methods to plot"));
    }
    let top = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .fold(1.0f64, f64::max);
    let ymax = top * 1.12;

    let root = svg_canvas(path, (1100, 650))?;
    let mut chart = chart_builder(&root, title, 20, 15, (45, 60))
        .build_cartesian_2d(xmin..xmax, 0.0..ymax)
        .map_err(pe)?;
    size_axis(&mut chart.configure_mesh())
        .y_desc("efficiency = ideal / measured")
        .draw()
        .map_err(pe)?;
    let grey = RGBColor(90, 90, 90);
    chart
        .draw_series(DashedLineSeries::new(
            [(xmin, target), (xmax, target)],
            8,
            5,
            grey.stroke_width(2),
        ))
        .map_err(pe)?
        .label(format!("target {target:.2}"))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], grey.stroke_width(2)));
    crate::plot::draw_lines(&mut chart, &series)?;
    crate::plot::draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present().map_err(pe)?;
    Ok(())
}

/// Table 3: one panel per combined method, a stacked bar per size (and the mixed queue) with
/// each device's share of the items; black ticks mark the ideal split at uniform sizes (device
/// d's share of the ideal is ideal / T_d).
pub fn items_plot(rep: &CompareReport, path: &Path, title: &str) -> Result<()> {
    let mut methods: Vec<&str> = Vec::new();
    for r in rep.runs.iter().filter(|r| !r.single) {
        if !methods.contains(&r.method.as_str()) {
            methods.push(&r.method);
        }
    }
    if methods.is_empty() {
        return Err(anyhow!("no combined methods to plot"));
    }
    let mut cols: Vec<usize> = Vec::new();
    for r in &rep.runs {
        if !cols.contains(&r.size) {
            cols.push(r.size);
        }
    }
    cols.sort_by_key(|&s| (s == 0, s));
    let labels: Vec<String> = cols
        .iter()
        .map(|&s| {
            if s == 0 {
                "mixed".to_string()
            } else {
                s.to_string()
            }
        })
        .collect();
    let n = cols.len() as i32;
    let devices = &rep.devices;
    // Ideal cumulative shares per column: single device d's efficiency is ideal / T_d.
    let ideal_cuts: Vec<Vec<f64>> = cols
        .iter()
        .map(|&c| {
            let shares: Vec<f64> = devices
                .iter()
                .map(|d| {
                    rep.runs
                        .iter()
                        .find(|r| r.single && r.size == c && r.method == d.name)
                        .map_or(f64::NAN, |r| r.efficiency)
                })
                .collect();
            let mut acc = 0.0;
            shares
                .iter()
                .take(devices.len().saturating_sub(1))
                .map(|s| {
                    acc += s;
                    acc
                })
                .collect()
        })
        .collect();

    let ncols = if methods.len() > 1 { 2 } else { 1 };
    let nrows = methods.len().div_ceil(ncols);
    let height = 90 + 300 * nrows as u32;
    let root = svg_canvas(path, (1200, height))?;
    let body = root.titled(title, ("sans-serif", 20)).map_err(pe)?;
    let (legend, grid) = body.split_vertically(40);
    // Legend row: device colours and the ideal tick.
    let mut x = 20;
    for (i, d) in devices.iter().enumerate() {
        legend
            .draw(&Rectangle::new(
                [(x, 12), (x + 18, 26)],
                device_colour(i).filled(),
            ))
            .map_err(pe)?;
        legend
            .draw(&Text::new(d.name.clone(), (x + 24, 12), ("sans-serif", 16)))
            .map_err(pe)?;
        x += 40 + 9 * d.name.len() as i32;
    }
    legend
        .draw(&PathElement::new(
            vec![(x, 19), (x + 18, 19)],
            BLACK.stroke_width(3),
        ))
        .map_err(pe)?;
    legend
        .draw(&Text::new(
            "ideal split (uniform sizes, from the single-device times)",
            (x + 24, 12),
            ("sans-serif", 16),
        ))
        .map_err(pe)?;

    let panels = grid.split_evenly((nrows, ncols));
    for (method, area) in methods.iter().zip(panels.iter()) {
        let mut chart = chart_builder(area, *method, 18, 10, (35, 55))
            .build_cartesian_2d((0..(n - 1).max(1)).into_segmented(), 0.0..1.0)
            .map_err(pe)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(cols.len() + 1)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => usize::try_from(*i)
                    .ok()
                    .and_then(|i| labels.get(i))
                    .cloned()
                    .unwrap_or_default(),
                SegmentValue::Last => String::new(),
            })
            .x_desc("item size (bytes)")
            .y_desc("share of items")
            .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
            .draw()
            .map_err(pe)?;
        let right = |i: i32| {
            if i + 1 < n || n == 1 {
                SegmentValue::Exact(i + 1)
            } else {
                SegmentValue::Last
            }
        };
        let mut bars = Vec::new();
        let mut ticks = Vec::new();
        for (j, &c) in cols.iter().enumerate() {
            let Some(r) = rep.runs.iter().find(|r| r.method == *method && r.size == c) else {
                continue;
            };
            let items = items_in_order(&r.items_per_device, devices);
            let total: f64 = items.iter().sum();
            if total <= 0.0 {
                continue;
            }
            let i = j as i32;
            let mut y0 = 0.0;
            for (d, v) in items.iter().enumerate() {
                let y1 = y0 + v / total;
                let mut rect = Rectangle::new(
                    [(SegmentValue::Exact(i), y0), (right(i), y1)],
                    device_colour(d).filled(),
                );
                rect.set_margin(0, 0, 12, 12);
                bars.push(rect);
                y0 = y1;
            }
            // By item count the ideal split holds for uniform sizes only.
            for &cut in &ideal_cuts[j] {
                if c > 0 && cut.is_finite() {
                    ticks.push(PathElement::new(
                        vec![(SegmentValue::Exact(i), cut), (right(i), cut)],
                        BLACK.stroke_width(3),
                    ));
                }
            }
        }
        chart.draw_series(bars).map_err(pe)?;
        chart.draw_series(ticks).map_err(pe)?;
    }
    root.present().map_err(pe)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use heloom_devices::{DeviceInfo, DeviceKind};
    use std::collections::BTreeMap;

    fn info(name: &str, kind: DeviceKind) -> DeviceInfo {
        DeviceInfo {
            name: name.into(),
            kind,
            workers: 1,
            engine: "test".into(),
            uses_cpu: true,
        }
    }

    fn row(method: &str, single: bool, size: usize, ms: f64, ideal: f64, a: f64) -> RunRow {
        let items = 100.0;
        RunRow {
            method: method.into(),
            single,
            cipher: "aes-128-cbc".into(),
            direction: "encrypt".into(),
            size,
            workload: if size == 0 { "mixed" } else { "uniform" }.into(),
            items: 100,
            ms,
            ms_mean: ms,
            ms_median: ms,
            ms_min: ms,
            ms_max: ms,
            ms_reps: vec![ms],
            ideal_ms: ideal,
            efficiency: ideal / ms,
            mb_per_s: 1.0,
            items_per_device: BTreeMap::from([
                ("cpu:1".to_string(), a),
                ("soft:1".to_string(), items - a),
            ]),
            finish_ms_per_device: BTreeMap::new(),
            claims: 1.0,
        }
    }

    fn report() -> CompareReport {
        let mut runs = Vec::new();
        for (k, size) in [16usize, 256, 4096, 0].into_iter().enumerate() {
            let (tc, ts) = (1.0 + k as f64, 3.0 + 4.0 * k as f64);
            let ideal = 1.0 / (1.0 / tc + 1.0 / ts);
            runs.push(row("cpu:1", true, size, tc, ideal, 100.0));
            runs.push(row("soft:1", true, size, ts, ideal, 0.0));
            runs.push(row("round-robin", false, size, ts / 2.0, ideal, 50.0));
            runs.push(row("pull", false, size, ideal * 1.05, ideal, 70.0));
            runs.push(row("heloom", false, size, ideal * 1.01, ideal, 74.0));
        }
        CompareReport {
            devices: vec![
                info("cpu:1", DeviceKind::Cpu),
                info("soft:1", DeviceKind::Soft),
            ],
            cipher: "aes-128-cbc".into(),
            direction: "encrypt".into(),
            items: 100,
            reps: 1,
            runs,
        }
    }

    #[test]
    fn writes_every_plot() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("heloom-offload-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let rep = report();
        for (name, f) in [
            (
                "t2.svg",
                table2_plot as fn(&CompareReport, &Path, &str) -> Result<()>,
            ),
            ("items.svg", items_plot),
        ] {
            let p = dir.join(name);
            f(&rep, &p, "test")?;
            let text = std::fs::read_to_string(&p)?;
            assert!(text.len() > 2000 && text.contains("<svg"), "{name}");
        }
        let p = dir.join("eff.svg");
        efficiency_plot(&rep, 0.9, &p, "test")?;
        let text = std::fs::read_to_string(&p)?;
        assert!(text.contains("target 0.90") && text.contains("heloom"));
        // A report with only single devices has no efficiency or share chart.
        let mut singles = rep.clone();
        singles.runs.retain(|r| r.single);
        assert!(efficiency_plot(&singles, 0.9, &dir.join("e.svg"), "x").is_err());
        assert!(items_plot(&singles, &dir.join("i.svg"), "x").is_err());
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
