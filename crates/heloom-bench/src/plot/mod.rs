//! Every SVG chart heloom draws (plotters), and the pieces they share: one module for all
//! plotting.
//!
//! - [`ntt`]: NTT throughput against N.
//! - [`schedule`]: latency over time, core utilisation and policy comparisons of job streams.
//! - [`offload`]: device shares, items per device and efficiency of the offload runs.

pub mod ntt;
pub mod offload;
pub mod schedule;

pub use ntt::ntt_throughput;

use anyhow::{anyhow, Result};
use plotters::coord::ranged1d::Ranged;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// Wraps a plotters error.
pub fn pe<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plot: {e}")
}

/// A white SVG canvas of `size` pixels, drawn to `path`.
pub fn svg_canvas(path: &Path, size: (u32, u32)) -> Result<DrawingArea<SVGBackend<'_>, Shift>> {
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    Ok(root)
}

/// A chart builder on `area`: `title` in `caption_px`-pixel type, `margin` pixels around it,
/// and `labels.0` / `labels.1` pixels for the x / y axis labels.
pub fn chart_builder<'a, 'b, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    title: impl AsRef<str>,
    caption_px: u32,
    margin: u32,
    labels: (u32, u32),
) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(area);
    b.caption(title, ("sans-serif", caption_px))
        .margin(margin)
        .x_label_area_size(labels.0)
        .y_label_area_size(labels.1);
    b
}

/// Colour `i` of plotters' 99-colour palette, opaque.
pub fn palette(i: usize) -> RGBColor {
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// Colour `i` of `colours`; past their end, colour `i + offset` of the [`palette`].
pub fn nth_colour(colours: &[RGBColor], i: usize, offset: usize) -> RGBColor {
    colours
        .get(i)
        .copied()
        .unwrap_or_else(|| palette(i + offset))
}

/// One labelled series of points: label, colour, (x, y) points.
pub type Series = (String, RGBColor, Vec<(f64, f64)>);

/// Draws each series as a 2-px line with a dot at every point, labelled for the legend.
pub fn draw_lines<DB, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
    series: &[Series],
) -> Result<()>
where
    DB: DrawingBackend,
    Y: Ranged<ValueType = f64>,
{
    for (label, colour, pts) in series {
        let colour = *colour;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
            .map_err(pe)?
            .label(label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(pe)?;
    }
    Ok(())
}

/// The legend box, at `position`, on a translucent white background.
pub fn draw_legend<'a, DB, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>,
    position: SeriesLabelPosition,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(pe)
}
