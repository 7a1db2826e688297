//! A benchmark's target: a measured value against the threshold an issue sets.

use crate::timing::fmt_sig;
use serde::Serialize;
use std::fmt::Write as _;

/// One target, as printed and in the JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is checked, and on which rows.
    pub name: String,
    /// Measured value (`None` when not measured).
    pub value: Option<f64>,
    /// Threshold.
    pub target: f64,
    /// `x` or `bits` (at least the target), or a unit such as `us`, `ms` or `GB` (at most the
    /// target).
    pub unit: &'static str,
    /// Whether it is met (`None` when not measured).
    pub met: Option<bool>,
    /// `met`, `not met`, or `not measured: <why>`.
    pub status: String,
}

impl Target {
    /// Judges a measured `value` against `target`.
    pub fn measured(name: String, value: f64, target: f64, unit: &'static str) -> Self {
        Self::judge(name, Some(value), target, unit, "")
    }

    /// Judges `value` against `target`; `unmeasured` says why a missing value is missing.
    pub fn judge(
        name: String,
        value: Option<f64>,
        target: f64,
        unit: &'static str,
        unmeasured: &str,
    ) -> Self {
        let met = value.map(|v| {
            if at_least(unit) {
                v >= target
            } else {
                v <= target
            }
        });
        let status = match met {
            Some(true) => "met".to_string(),
            Some(false) => "not met".to_string(),
            None => format!("not measured{unmeasured}"),
        };
        Self {
            name,
            value,
            target,
            unit,
            met,
            status,
        }
    }
}

/// Whether a target in `unit` is a floor (`x` ratios, `bits` of precision) rather than a
/// ceiling (times, sizes).
fn at_least(unit: &str) -> bool {
    unit == "x" || unit == "bits"
}

/// The targets as printed under every benchmark's table: one line each,
/// `[status] name: value unit (target >= or <= threshold unit)`, then how many are met.
pub fn render(targets: &[Target]) -> String {
    let mut s = String::new();
    for t in targets {
        let cmp = if at_least(t.unit) { ">=" } else { "<=" };
        let sep = if t.unit == "x" { "" } else { " " };
        let value = t
            .value
            .map(|v| format!(": {}{sep}{}", fmt_sig(v), t.unit))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  [{}] {}{value} (target {cmp} {}{sep}{})",
            t.status,
            t.name,
            fmt_sig(t.target),
            t.unit
        );
    }
    let met = targets.iter().filter(|t| t.met == Some(true)).count();
    let _ = writeln!(s, "  {met} of {} targets met", targets.len());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judged_and_rendered() {
        let t = vec![
            Target::measured("ratio".into(), 2.5, 1.8, "x"),
            Target::measured("time".into(), 60.0, 50.0, "us"),
            Target::judge("gpu".into(), None, 3.0, "x", ": no GPU"),
        ];
        assert_eq!(t[0].met, Some(true));
        assert_eq!(t[1].met, Some(false));
        assert_eq!(t[2].status, "not measured: no GPU");
        let s = render(&t);
        assert!(s.contains("[met] ratio: 2.50x (target >= 1.80x)"), "{s}");
        assert!(s.contains("[not met] time: 60 us (target <= 50 us)"), "{s}");
        assert!(
            s.contains("[not measured: no GPU] gpu (target >= 3x)"),
            "{s}"
        );
        assert!(s.contains("1 of 3 targets met"), "{s}");
    }
}
