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
use plotters::prelude::*;

/// Wraps a plotters error.
pub fn pe<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plot: {e}")
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
