//! Per-device cost curves learned online: time per item as a function of its weight, t(w) = a + b·w.
//!
//! Seed 001's gap to the ideal split came from per-call overhead (the module) against per-byte speed (the CPU).
//! heloom learns both per device from the chunks it runs: an exponentially weighted mean time per item for each
//! power-of-two weight class, and a line fitted through the classes seen. A single class (a uniform workload)
//! predicts its own weight exactly; across classes the line separates overhead from per-byte cost, which is what
//! size-aware placement needs.

use std::collections::HashMap;

use serde::Serialize;

/// Weight of an observation that is slower than the estimate: a device slowed by competing load is seen as
/// slow within a few chunks.
const ALPHA_UP: f64 = 0.3;
/// Weight of an observation that is faster than the estimate. Outside interference can only slow a chunk
/// down, so a fast chunk is better evidence of what the device can do; a first chunk inflated by a cold start
/// or a stall is forgotten quickly.
const ALPHA_DOWN: f64 = 0.7;
/// A single observation moves the estimate up by at most this factor (one stall must not make a device look
/// hopeless).
const MAX_STEP_UP: f64 = 4.0;
/// Chunks of a weight class seen before the estimate is trusted enough to stop a worker in the end-game.
pub const TRUSTED_CHUNKS: u64 = 3;

/// Weight classes: floor(log2(weight + 1)), 0..=63.
const CLASSES: usize = 64;

fn class(w: u64) -> usize {
    (64 - (w + 1).leading_zeros() as usize - 1).min(CLASSES - 1)
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
struct ClassStat {
    /// EWMA of ns per item.
    ns: f64,
    /// EWMA of weight per item.
    weight: f64,
    /// Chunks observed.
    chunks: u64,
}

/// One device's learned cost curve.
#[derive(Clone, Debug, Serialize)]
pub struct CostCurve {
    #[serde(skip)]
    classes: [ClassStat; CLASSES],
    /// Fitted per-item overhead in ns (from the classes seen; 0 with fewer than two).
    pub overhead_ns: f64,
    /// Fitted cost per unit of weight in ns (per byte for AES).
    pub ns_per_weight: f64,
    /// Weight classes observed.
    seen: usize,
}

impl Default for CostCurve {
    fn default() -> Self {
        CostCurve {
            classes: [ClassStat::default(); CLASSES],
            overhead_ns: 0.0,
            ns_per_weight: 0.0,
            seen: 0,
        }
    }
}

impl CostCurve {
    /// Records a chunk of `items` items of total weight `weight` that took `ns` nanoseconds.
    pub fn observe(&mut self, items: usize, weight: u64, ns: f64) {
        if items == 0 || !ns.is_finite() || ns <= 0.0 {
            return;
        }
        let per_item = ns / items as f64;
        let w = weight as f64 / items as f64;
        let c = &mut self.classes[class(w as u64)];
        if c.chunks == 0 {
            c.ns = per_item;
            c.weight = w;
        } else {
            let a = if per_item > c.ns {
                ALPHA_UP
            } else {
                ALPHA_DOWN
            };
            c.ns += a * (per_item.min(c.ns * MAX_STEP_UP) - c.ns);
            c.weight += a * (w - c.weight);
        }
        c.chunks += 1;
        self.fit();
    }

    /// Least-squares line through the classes seen, each class one point (so a frequent class does not drown
    /// the others), clamped to non-negative overhead and slope. No allocation: it runs on every chunk.
    fn fit(&mut self) {
        let seen = || self.classes.iter().filter(|c| c.chunks > 0);
        let (mut n, mut sw, mut st) = (0.0, 0.0, 0.0);
        for c in seen() {
            n += 1.0;
            sw += c.weight;
            st += c.ns;
        }
        self.seen = n as usize;
        if self.seen < 2 {
            self.overhead_ns = 0.0;
            self.ns_per_weight = seen().next().map_or(0.0, |c| c.ns / c.weight.max(1.0));
            return;
        }
        let (mw, mt) = (sw / n, st / n);
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for c in seen() {
            sxy += (c.weight - mw) * (c.ns - mt);
            sxx += (c.weight - mw) * (c.weight - mw);
        }
        let mut b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        let mut a = mt - b * mw;
        if b < 0.0 {
            b = 0.0;
            a = mt;
        }
        if a < 0.0 {
            // Through the origin: b = Σwt / Σw².
            let (mut swt, mut sww) = (0.0, 0.0);
            for c in seen() {
                swt += c.weight * c.ns;
                sww += c.weight * c.weight;
            }
            b = if sww > 0.0 { swt / sww } else { 0.0 };
            a = 0.0;
        }
        self.overhead_ns = a;
        self.ns_per_weight = b;
    }

    /// Chunks observed in the weight class of `w`.
    pub fn chunks_at(&self, w: u64) -> u64 {
        self.classes[class(w)].chunks
    }

    /// Whether anything has been observed.
    pub fn known(&self) -> bool {
        self.seen > 0
    }

    /// Predicted ns for one item of weight `w`, or `None` before the first observation.
    pub fn predict(&self, w: u64) -> Option<f64> {
        if !self.known() {
            return None;
        }
        let c = &self.classes[class(w)];
        let seen = self.seen;
        if c.chunks > 0 {
            // The class's own mean, moved along the slope within the class.
            let slope = if seen >= 2 {
                self.ns_per_weight
            } else {
                c.ns / (c.weight + 64.0)
            };
            return Some((c.ns + slope * (w as f64 - c.weight)).max(c.ns * 0.25));
        }
        if seen >= 2 {
            return Some(self.overhead_ns + self.ns_per_weight * w as f64);
        }
        // One class seen elsewhere: scale it, assuming an overhead worth 64 weight units.
        let (cw, cn) = self
            .classes
            .iter()
            .find(|c| c.chunks > 0)
            .map(|c| (c.weight, c.ns))?;
        Some(cn * (w as f64 + 64.0) / (cw + 64.0))
    }
}

/// Cost curves of every device a balancer has seen, by device name; they persist across runs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CostBook {
    /// Curves by device name.
    pub curves: HashMap<String, CostCurve>,
}

impl CostBook {
    /// The curve of `device` (a fresh one if never seen).
    pub fn curve(&self, device: &str) -> CostCurve {
        self.curves.get(device).cloned().unwrap_or_default()
    }

    /// Stores the curve of `device`.
    pub fn set(&mut self, device: &str, curve: CostCurve) {
        self.curves.insert(device.to_string(), curve);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_overhead_and_slope() {
        let mut c = CostCurve::default();
        for &w in &[8u64, 64, 1024, 16384] {
            c.observe(10, w * 10, 10.0 * (500.0 + 2.0 * w as f64));
        }
        assert!((c.overhead_ns - 500.0).abs() < 1.0, "{}", c.overhead_ns);
        assert!((c.ns_per_weight - 2.0).abs() < 1e-3);
        assert!((c.predict(4096).unwrap_or(0.0) - (500.0 + 8192.0)).abs() < 1.0);
        assert!((c.predict(16384).unwrap_or(0.0) - (500.0 + 32768.0)).abs() < 1.0);
    }

    #[test]
    fn single_class_predicts_itself_and_tracks_change() {
        let mut c = CostCurve::default();
        assert!(c.predict(100).is_none());
        c.observe(4, 400, 4000.0);
        assert!((c.predict(100).unwrap_or(0.0) - 1000.0).abs() < 1e-9);
        for _ in 0..20 {
            c.observe(4, 400, 8000.0);
        }
        assert!((c.predict(100).unwrap_or(0.0) - 2000.0).abs() < 5.0);
    }
}
