//! A benchmark's target: a measured value against the threshold an issue sets.

use serde::Serialize;

/// One target, as printed and in the JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is checked, and on which rows.
    pub name: String,
    /// Measured value (`None` when not measured).
    pub value: Option<f64>,
    /// Threshold.
    pub target: f64,
    /// `x` (at least the target) or a time unit such as `us` or `ms` (at most the target).
    pub unit: &'static str,
    /// Whether it is met (`None` when not measured).
    pub met: Option<bool>,
    /// `met`, `not met`, or `not measured: <why>`.
    pub status: String,
}

impl Target {
    /// Judges `value` against `target`; `unmeasured` says why a missing value is missing.
    pub fn judge(
        name: String,
        value: Option<f64>,
        target: f64,
        unit: &'static str,
        unmeasured: &str,
    ) -> Self {
        let met = value.map(|v| {
            if unit == "x" {
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
