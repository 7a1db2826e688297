//! SVG charts of benchmark results.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use crate::ntt::NttReport;
use crate::plot::{chart_builder, svg_canvas};

/// Draws forward-NTT throughput (Gbit/s of residues) against log2(N), one line per
/// (word size, prime size, backend).
pub fn ntt_throughput(rep: &NttReport, path: &Path) -> Result<()> {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for m in rep.results.iter().filter(|m| m.op == "ntt_forward") {
        let label = format!(
            "{}-bit words, {}-bit q, {}",
            m.word_bits, m.prime_bits, m.backend
        );
        let point = (m.n.trailing_zeros() as f64, m.mbits_per_s / 1000.0);
        match series.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push(point),
            None => series.push((label, vec![point])),
        }
    }
    if series.is_empty() {
        return Err(anyhow!("no forward-NTT measurements to plot"));
    }
    let (xmin, xmax) = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let ymax = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0, f64::max)
        * 1.6; // headroom for the legend
    let root = svg_canvas(path, (1100, 650))?;
    let title = format!("Forward NTT throughput, one core — {}", rep.machine.cpu);
    let mut chart = chart_builder(&root, title, 22, 15, (45, 60))
        .build_cartesian_2d((xmin - 0.2)..(xmax + 0.2), 0.0..ymax)
        .map_err(|e| anyhow!("plot: {e}"))?;
    chart
        .configure_mesh()
        .x_desc("ring degree N")
        .x_labels(((xmax - xmin) as usize + 1).max(2))
        .x_label_formatter(&|x| format!("2^{}", x.round() as i64))
        .y_desc("Gbit/s (N x prime bits / time)")
        .draw()
        .map_err(|e| anyhow!("plot: {e}"))?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| anyhow!("plot: {e}"))?
            .label(label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| anyhow!("plot: {e}"))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("plot: {e}"))?;
    root.present().map_err(|e| anyhow!("plot: {e}"))?;
    Ok(())
}
