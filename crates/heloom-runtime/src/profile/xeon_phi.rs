//! The built-in profile of seed 000: SEAL 3.2 CKKS on a Xeon Phi 7230F (N = 32768), its
//! Tables 1-5.

use super::*;

/// n_q values of Tables 1-3.
pub(super) const PHI_NQ: [usize; 7] = [2, 3, 4, 5, 6, 7, 8];

/// Table 1 (single thread, ms), rows in [`OpKind::ALL`] order, columns n_q = 2..8.
pub(super) const PHI_TABLE1: [[f64; 7]; 7] = [
    [1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0],
    [1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0],
    [6.0, 9.0, 11.0, 14.0, 17.0, 20.0, 22.0],
    [14.0, 21.0, 27.0, 34.0, 40.0, 48.0, 55.0],
    [10.0, 15.0, 19.0, 25.0, 29.0, 34.0, 39.0],
    [33.0, 65.0, 101.0, 151.0, 203.0, 271.0, 349.0],
    [31.0, 53.0, 72.0, 96.0, 116.0, 140.0, 162.0],
];

/// Table 2: relinearization (ms), n_q = 2..8 (rows) x threads 1..12 (columns).
#[rustfmt::skip]
pub(super) const PHI_TABLE2: [[f64; 12]; 7] = [
    [33.0, 17.0, 18.0, 18.0, 17.0, 17.0, 18.0, 18.0, 17.0, 17.0, 17.0, 18.0],
    [65.0, 43.0, 22.0, 22.0, 22.0, 22.0, 22.0, 22.0, 22.0, 22.0, 22.0, 22.0],
    [101.0, 51.0, 53.0, 27.0, 27.0, 27.0, 27.0, 27.0, 27.0, 27.0, 27.0, 27.0],
    [151.0, 91.0, 60.0, 60.0, 32.0, 32.0, 31.0, 31.0, 31.0, 32.0, 32.0, 32.0],
    [203.0, 106.0, 69.0, 71.0, 69.0, 37.0, 37.0, 36.0, 36.0, 37.0, 37.0, 36.0],
    [271.0, 155.0, 119.0, 79.0, 80.0, 80.0, 41.0, 41.0, 42.0, 42.0, 42.0, 41.0],
    [349.0, 177.0, 131.0, 89.0, 89.0, 90.0, 88.0, 47.0, 47.0, 46.0, 47.0, 46.0],
];

/// Table 3: rescale (ms), n_q = 2..8 (rows) x threads 1..12 (columns).
#[rustfmt::skip]
pub(super) const PHI_TABLE3: [[f64; 12]; 7] = [
    [31.0, 16.0, 16.0, 12.0, 11.0, 11.0, 12.0, 12.0, 11.0, 12.0, 12.0, 12.0],
    [53.0, 27.0, 22.0, 18.0, 18.0, 14.0, 14.0, 14.0, 14.0, 15.0, 14.0, 14.0],
    [72.0, 37.0, 30.0, 25.0, 25.0, 21.0, 21.0, 17.0, 17.0, 17.0, 17.0, 17.0],
    [96.0, 49.0, 39.0, 31.0, 27.0, 27.0, 27.0, 23.0, 23.0, 19.0, 20.0, 19.0],
    [116.0, 59.0, 46.0, 38.0, 34.0, 30.0, 30.0, 30.0, 30.0, 27.0, 27.0, 22.0],
    [140.0, 69.0, 54.0, 45.0, 41.0, 37.0, 32.0, 32.0, 33.0, 33.0, 33.0, 29.0],
    [162.0, 80.0, 64.0, 52.0, 48.0, 43.0, 39.0, 35.0, 35.0, 35.0, 35.0, 35.0],
];

/// Table 4: mean relinearization latency (ms) with M ops at once, t threads each
/// (`(t, [(M, ms)])`, n_q = 8; combinations beyond 256 logical cores are absent).
#[rustfmt::skip]
pub(super) const PHI_TABLE4: [(usize, &[(usize, f64)]); 4] = [
    (1, &[(2, 348.0), (4, 344.0), (8, 346.0), (16, 340.0), (32, 359.0), (64, 435.0), (128, 1091.0), (256, 2787.0)]),
    (2, &[(2, 174.0), (4, 179.0), (8, 178.0), (16, 192.0), (32, 224.0), (64, 519.0), (128, 1388.0)]),
    (4, &[(2, 89.0), (4, 91.0), (8, 98.0), (16, 122.0), (32, 256.0), (64, 674.0)]),
    (8, &[(2, 51.0), (4, 52.0), (8, 69.0), (16, 131.0), (32, 322.0)]),
];

/// Table 5: mean rescale latency (ms), same layout as [`PHI_TABLE4`].
#[rustfmt::skip]
pub(super) const PHI_TABLE5: [(usize, &[(usize, f64)]); 4] = [
    (1, &[(2, 162.0), (4, 159.0), (8, 160.0), (16, 158.0), (32, 167.0), (64, 202.0), (128, 335.0), (256, 968.0)]),
    (2, &[(2, 81.0), (4, 83.0), (8, 82.0), (16, 89.0), (32, 103.0), (64, 157.0), (128, 436.0)]),
    (4, &[(2, 53.0), (4, 53.0), (8, 57.0), (16, 67.0), (32, 94.0), (64, 205.0)]),
    (8, &[(2, 36.0), (4, 38.0), (8, 48.0), (16, 68.0), (32, 140.0)]),
];

pub(super) fn phi_rows(table: &[(usize, &[(usize, f64)])]) -> Vec<(usize, Vec<(usize, f64)>)> {
    table.iter().map(|(t, pts)| (*t, pts.to_vec())).collect()
}

/// Seed 000's Xeon Phi 7230F (SEAL 3.2, N = 32768, 60-bit primes).
pub(super) fn xeon_phi() -> Profile {
    let threads: Vec<usize> = (1..=12).collect();
    let mut ops = BTreeMap::new();
    for (k, op) in OpKind::ALL.into_iter().enumerate() {
        let table = match op {
            OpKind::Relin => OpTable::from_fn(&PHI_NQ, &threads, |q, t| PHI_TABLE2[q - 2][t - 1]),
            OpKind::Rescale => OpTable::from_fn(&PHI_NQ, &threads, |q, t| PHI_TABLE3[q - 2][t - 1]),
            _ => OpTable::from_fn(&PHI_NQ, &threads, |q, t| {
                PHI_TABLE1[k][q - 2] * q.div_ceil(t) as f64 / q as f64
            }),
        };
        ops.insert(op, table);
    }
    let mut by_threads = BTreeMap::new();
    for (class, table) in [
        (ContentionClass::KeySwitch, &PHI_TABLE4),
        (ContentionClass::Other, &PHI_TABLE5),
    ] {
        let rows: Vec<(usize, Curve)> = phi_rows(table)
            .into_iter()
            .map(|(t, pts)| (t, merge_contention(&[(t, pts)])))
            .collect();
        by_threads.insert(class, rows);
    }
    let mut contention = BTreeMap::new();
    contention.insert(
        ContentionClass::KeySwitch,
        merge_contention(&phi_rows(&PHI_TABLE4)),
    );
    contention.insert(
        ContentionClass::Other,
        merge_contention(&phi_rows(&PHI_TABLE5)),
    );
    Profile {
        name: XEON_PHI.to_string(),
        machine: "Intel Xeon Phi 7230F (64 cores, 256 hardware threads), 384 GB DDR4, no MCDRAM"
            .to_string(),
        n: 32768,
        word_bits: 64,
        max_nq: 8,
        capacity: 126,
        ops,
        contention,
        task_overhead_ms: XEON_PHI_TASK_OVERHEAD_MS,
        job_factor: XEON_PHI_JOB_FACTOR,
        thread_factors: Vec::new(),
        backlog_factors: Vec::new(),
        contention_by_threads: by_threads,
        notes: vec![
            "Seed 000 (Suzuki, Ishimaki, Yamana): SEAL 3.2 CKKS, N = 32768, 60-bit primes, Xeon Phi 7230F, GCC 6.3.1 -O3, OpenMP.".into(),
            "1-thread column of every op: Table 1 (ms, n_q = 2..8).".into(),
            "relin, threads 1..12: Table 2; rescale, threads 1..12: Table 3.".into(),
            "mul, mul-plain, square, add, add-plain, threads 1..12: Table 1 * ceil(n_q / t) / n_q (section 4.2: these loops split over the n_q limbs; the paper runs add and add-plain on one thread, the model matters little for them).".into(),
            "contention key-switch: Table 4 (relin, n_q = 8); other: Table 5 (rescale, n_q = 8). For each t in 1, 2, 4, 8 the M = 2 latency is the reference; every other (M, t) gives (busy = M t, latency / reference); points at the same busy count are averaged over t; busy counts covered only by a reference (and busy = 1) are 1.0.".into(),
            "capacity 126: threads the paper's scheduler may use (section 7.3).".into(),
            "task_overhead_ms: 0 (not given by the paper); job_factor 4000/2841: the paper's 4 s per sequential e^x job over Table 1's 2,841 ms for the Fig. 3 graph.".into(),
        ],
    }
}
