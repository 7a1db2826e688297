//! Job arrivals: a Poisson process, drawn the paper's way (seed 000, Section 7.2): gaps
//! `d_i = -D ln(1 - x_i)` from uniform `x_i`, arrival `T_i = d_1 + .. + d_i`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Arrival times (ms) of `jobs` jobs with mean gap `gap_ms`, reproducible from `seed`.
pub fn poisson_arrivals(jobs: usize, gap_ms: f64, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = 0.0;
    (0..jobs)
        .map(|_| {
            let x: f64 = rng.gen_range(0.0..1.0);
            t += -gap_ms * (1.0 - x).ln();
            t
        })
        .collect()
}

/// The paper measures jobs 301..=1900 of 2,300 (1-based); for other job counts the same
/// fractions: returns 0-based `(first, last)`.
pub fn default_window(jobs: usize) -> (usize, usize) {
    if jobs == 0 {
        return (0, 0);
    }
    let first = (jobs as f64 * 300.0 / 2300.0).round() as usize;
    let last = ((jobs as f64 * 1900.0 / 2300.0).round() as usize).saturating_sub(1);
    (
        first.min(jobs - 1),
        last.clamp(first.min(jobs - 1), jobs - 1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_matches_the_paper_at_2300_jobs() {
        assert_eq!(default_window(2300), (300, 1899));
        assert_eq!(default_window(230), (30, 189));
        assert_eq!(default_window(1), (0, 0));
    }

    #[test]
    fn arrivals_have_the_requested_mean_gap() {
        let a = poisson_arrivals(20_000, 60.0, 7);
        assert!(a.windows(2).all(|w| w[1] >= w[0]));
        let mean = a[a.len() - 1] / a.len() as f64;
        assert!((mean - 60.0).abs() < 1.5, "mean gap {mean}");
        assert_eq!(a, poisson_arrivals(20_000, 60.0, 7));
    }
}
