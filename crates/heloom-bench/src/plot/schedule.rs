//! SVG charts of scheduling runs (seed 000, Figs. 4-7 and Table 6): per-job latency against
//! job number, busy fraction over time, and makespan / p99 latency against the mean gap.

use std::path::Path;

use anyhow::{anyhow, Result};
use heloom_runtime::{utilisation, RunRecord, RunSummary};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::plot::{chart_builder, palette, pe, svg_canvas, Series};

/// A fixed colour for each known policy, so every chart draws a policy the same way.
fn policy_colour(policy: &str) -> Option<RGBColor> {
    Some(match policy {
        "fixed-1" => RGBColor(31, 119, 180),
        "fixed-half" => RGBColor(44, 160, 44),
        "fixed-full" => RGBColor(148, 103, 189),
        "paper-dynamic" => RGBColor(255, 127, 14),
        "heloom" => RGBColor(214, 39, 40),
        _ => return None,
    })
}

/// Labels and colours for a set of runs: the policy alone (in its fixed colour) when the
/// policies are distinct; otherwise `policy, D = gap ms` with one palette colour per run.
fn run_styles<'a>(runs: impl Iterator<Item = (&'a str, f64)> + Clone) -> Vec<(String, RGBColor)> {
    let policies: Vec<&str> = runs.clone().map(|(p, _)| p).collect();
    let distinct = policies
        .iter()
        .enumerate()
        .all(|(i, p)| !policies[..i].contains(p));
    runs.enumerate()
        .map(|(i, (policy, gap))| {
            if distinct {
                (
                    policy.to_string(),
                    policy_colour(policy).unwrap_or_else(|| palette(i)),
                )
            } else {
                (format!("{policy}, D = {gap} ms"), palette(i))
            }
        })
        .collect()
}

/// A range with some room, never empty.
fn padded(lo: f64, hi: f64, pad_frac: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        let c = if lo.is_finite() { lo } else { 0.0 };
        return (c - 1.0, c + 1.0);
    }
    let pad = (hi - lo) * pad_frac;
    (lo - pad, hi + pad)
}

/// Draws each run's per-job latency (ms, y) against job number (x) as points, one colour per
/// policy, like the paper's Figs. 4-7. The measured window of each run is shaded grey.
pub fn latency_plot(runs: &[&RunRecord], path: &Path, title: &str) -> Result<()> {
    if runs.iter().all(|r| r.jobs.is_empty()) {
        return Err(anyhow!("no jobs to plot"));
    }
    let xmax = runs
        .iter()
        .flat_map(|r| r.jobs.iter().map(|j| j.id))
        .max()
        .unwrap_or(0) as f64
        + 1.0;
    let ymax = runs
        .iter()
        .flat_map(|r| r.jobs.iter().map(|j| j.latency_ms()))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.25 } else { 1.0 }; // headroom for the legend

    let root = svg_canvas(path, (1100, 650))?;
    let mut chart = origin_chart(&root, title, 70, xmax, ymax)?;
    chart
        .configure_mesh()
        .x_desc("job number")
        .x_label_formatter(&|x| format!("{:.0}", x))
        .y_desc("latency, arrival to finish (ms)")
        .draw()
        .map_err(pe)?;

    // Shade each distinct measured window once, under the points.
    let mut windows: Vec<(usize, usize)> = Vec::new();
    for r in runs {
        if !windows.contains(&r.window) {
            windows.push(r.window);
        }
    }
    let shade = RGBColor(128, 128, 128).mix(0.15);
    for (i, &(a, b)) in windows.iter().enumerate() {
        let (x0, x1) = (a as f64, (b as f64 + 1.0).min(xmax));
        let series = chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x1, ymax)],
                shade.filled(),
            )))
            .map_err(pe)?;
        if i == 0 {
            series.label("measured window").legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 18, y + 5)], shade.filled())
            });
        }
    }

    let styles = run_styles(runs.iter().map(|r| (r.policy.as_str(), r.gap_ms)));
    for (r, (label, colour)) in runs.iter().zip(styles) {
        let style = colour.mix(0.75).filled();
        chart
            .draw_series(
                r.jobs
                    .iter()
                    .filter(|j| j.latency_ms().is_finite())
                    .map(|j| Circle::new((j.id as f64, j.latency_ms()), 2, style)),
            )
            .map_err(pe)?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 9, y), 4, colour.filled()));
    }
    crate::plot::draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(pe)?;
    Ok(())
}

/// Draws each run's busy fraction (mean busy threads / capacity, from
/// [`heloom_runtime::utilisation`] with `bins` equal bins over that run) against time in
/// seconds, one step line per run (each bin's mean held across the bin).
pub fn utilisation_plot(runs: &[&RunRecord], path: &Path, bins: usize, title: &str) -> Result<()> {
    let curves: Vec<Vec<(f64, f64)>> = runs
        .iter()
        .map(|r| {
            // A step line: each bin's fraction held flat from its start to the next bin's.
            let u = utilisation(r, bins);
            let width = match u.as_slice() {
                [(a, _), (b, _), ..] => b - a,
                [(a, _)] => r.tasks.iter().map(|t| t.end_ms).fold(0.0, f64::max) - a,
                [] => 0.0,
            };
            u.into_iter()
                .flat_map(|(t, f)| [(t / 1000.0, f), ((t + width) / 1000.0, f)])
                .collect()
        })
        .collect();
    if curves.iter().all(Vec::is_empty) {
        return Err(anyhow!("no task intervals to plot"));
    }
    let xmax = runs
        .iter()
        .flat_map(|r| r.tasks.iter().map(|t| t.end_ms / 1000.0))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let xmax = if xmax > 0.0 { xmax } else { 1.0 };
    let ymax = curves
        .iter()
        .flatten()
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max)
        * 1.3; // headroom for the legend
    let styles = run_styles(runs.iter().map(|r| (r.policy.as_str(), r.gap_ms)));

    let root = svg_canvas(path, (1100, 650))?;
    let mut chart = origin_chart(&root, title, 60, xmax, ymax)?;
    chart
        .configure_mesh()
        .x_desc("time since the run started (s)")
        .y_desc("busy threads / capacity")
        .draw()
        .map_err(pe)?;
    for (pts, (label, colour)) in curves.iter().zip(styles) {
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
            .map_err(pe)?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
    }
    crate::plot::draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(pe)?;
    Ok(())
}

/// The chart of [`latency_plot`] and [`utilisation_plot`] on `root`: `title` in 22-pixel
/// type over `[0, xmax] x [0, ymax]`, `y_label_px` pixels for the y labels.
fn origin_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    y_label_px: u32,
    xmax: f64,
    ymax: f64,
) -> Result<ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
    chart_builder(root, title, 22, 15, (45, y_label_px))
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(pe)
}

/// One panel of [`compare_plot`]: `value` (s) against the mean gap (ms), one line per policy.
fn compare_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[Series],
    caption: &str,
    y_desc: &str,
    legend: SeriesLabelPosition,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (xmin, xmax) = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    let (xmin, xmax) = padded(xmin, xmax, 0.05);
    let ymax = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.35 } else { 1.0 }; // headroom for the legend
    let mut chart = chart_builder(area, caption, 18, 12, (45, 65))
        .build_cartesian_2d(xmin..xmax, 0.0..ymax)
        .map_err(pe)?;
    chart
        .configure_mesh()
        .x_desc("mean arrival gap D (ms)")
        .y_desc(y_desc)
        .draw()
        .map_err(pe)?;
    crate::plot::draw_lines(&mut chart, series)?;
    crate::plot::draw_legend(&mut chart, legend)?;
    Ok(())
}

/// Two panels side by side: makespan (s) against the mean gap (left, the paper's Table 6)
/// and p99 latency (s) against the mean gap (right), one line per policy.
pub fn compare_plot(summaries: &[RunSummary], path: &Path, title: &str) -> Result<()> {
    if summaries.is_empty() {
        return Err(anyhow!("no runs to compare"));
    }
    let mut policies: Vec<&str> = Vec::new();
    for s in summaries {
        if !policies.contains(&s.policy.as_str()) {
            policies.push(&s.policy);
        }
    }
    let per_policy = |value: fn(&RunSummary) -> f64| -> Vec<Series> {
        policies
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                let mut pts: Vec<(f64, f64)> = summaries
                    .iter()
                    .filter(|s| s.policy == p)
                    .map(|s| (s.gap_ms, value(s) / 1000.0))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let colour = policy_colour(p).unwrap_or_else(|| palette(i));
                (p.to_string(), colour, pts)
            })
            .collect()
    };
    let makespan = per_policy(|s| s.makespan_ms);
    let p99 = per_policy(|s| s.p99_ms);

    let root = svg_canvas(path, (1400, 600))?;
    let body = root.titled(title, ("sans-serif", 22)).map_err(pe)?;
    let panels = body.split_evenly((1, 2));
    let [left, right] = panels.as_slice() else {
        return Err(anyhow!("plot: expected two panels"));
    };
    compare_panel(
        left,
        &makespan,
        "makespan of the measured window",
        "makespan (s)",
        SeriesLabelPosition::UpperLeft,
    )?;
    compare_panel(
        right,
        &p99,
        "p99 latency of the measured jobs",
        "p99 latency (s)",
        SeriesLabelPosition::UpperRight,
    )?;
    root.present().map_err(pe)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use heloom_runtime::{summarize, JobRecord, TaskRecord};

    /// A small synthetic run: `n` jobs every `gap` ms, each one 2-thread task of 30 ms,
    /// queued behind the previous one.
    fn synthetic(policy: &str, gap: f64, n: usize) -> RunRecord {
        let mut jobs = Vec::new();
        let mut tasks = Vec::new();
        let mut free = 0.0f64;
        for id in 0..n {
            let arrival = id as f64 * gap;
            let start = arrival.max(free);
            let finish = start + 30.0 + (id % 7) as f64 * gap / 4.0;
            free = finish - 10.0; // some overlap between consecutive jobs
            jobs.push(JobRecord {
                id,
                arrival_ms: arrival,
                start_ms: start,
                finish_ms: finish,
                variant: "plain".to_string(),
                correct: Some(true),
            });
            tasks.push(TaskRecord {
                job: id,
                task: 0,
                kind: "mul-relin-rescale".to_string(),
                nq: 8,
                threads: 2,
                dispatch_ms: start - 0.1,
                start_ms: start,
                end_ms: finish,
            });
        }
        RunRecord {
            policy: policy.to_string(),
            gap_ms: gap,
            executor: "simulated:test".to_string(),
            capacity: 4,
            window: (n / 8, (n - n / 8).saturating_sub(1)),
            jobs,
            tasks,
            sched_overhead_ms: 0.01,
            check_ms: 0.0,
        }
    }

    fn check_svg(path: &Path) -> Result<()> {
        let text = std::fs::read_to_string(path)?;
        assert!(
            text.len() > 2000,
            "{} is only {} bytes",
            path.display(),
            text.len()
        );
        assert!(text.contains("<svg"));
        Ok(())
    }

    #[test]
    fn writes_every_plot() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("heloom-schedule-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let a = synthetic("fixed-half", 20.0, 64);
        let b = synthetic("heloom", 25.0, 64);
        let runs = [&a, &b];

        let p = dir.join("latency.svg");
        latency_plot(&runs, &p, "latency per job")?;
        check_svg(&p)?;

        let p = dir.join("utilisation.svg");
        utilisation_plot(&runs, &p, 50, "busy fraction")?;
        check_svg(&p)?;

        let mut summaries = Vec::new();
        for policy in ["fixed-1", "fixed-half", "heloom"] {
            for gap in [15.0, 20.0, 30.0] {
                summaries.push(summarize(&synthetic(policy, gap, 40)));
            }
        }
        let p = dir.join("compare.svg");
        compare_plot(&summaries, &p, "makespan and p99 against D")?;
        check_svg(&p)?;

        // Same policy at two gaps: labels carry the gap.
        let c = synthetic("heloom", 40.0, 32);
        let p = dir.join("latency-same-policy.svg");
        latency_plot(&[&b, &c], &p, "one policy, two gaps")?;
        check_svg(&p)?;
        assert!(std::fs::read_to_string(&p)?.contains("D = 40 ms"));

        // Nothing to draw is an error, not a panic.
        let empty = synthetic("fixed-1", 10.0, 0);
        assert!(latency_plot(&[&empty], &dir.join("e1.svg"), "empty").is_err());
        assert!(utilisation_plot(&[&empty], &dir.join("e2.svg"), 10, "empty").is_err());
        assert!(compare_plot(&[], &dir.join("e3.svg"), "empty").is_err());

        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
