//! `heloom demo`: the main job until the CKKS layer lands. Multiplies two random polynomials in
//! RNS form through the NTT on every backend, checks the products agree with each other and with
//! a direct (schoolbook) computation, and prints timings.

use std::time::Instant;

use anyhow::{bail, Result};
use heloom_math::backend::{cpu_report, Backend, BackendChoice};
use heloom_math::{primes, Form, RnsBasis, Word};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Coefficient `k` of the negacyclic product `a * b` modulo `q`, computed directly in O(N).
fn schoolbook_coeff(a: &[i64], b: &[i64], k: usize, q: u64) -> u64 {
    let n = a.len();
    let mut acc: i128 = 0;
    for (i, &ai) in a.iter().enumerate() {
        // X^i * X^j with i + j = k (mod N); the wrap past X^N flips the sign.
        let (j, sign) = if i <= k { (k - i, 1) } else { (n + k - i, -1) };
        acc += sign * ai as i128 * b[j] as i128;
    }
    acc.rem_euclid(q as i128) as u64
}

fn run_word<W: Word>(n: usize, prime_bits: u32, limbs: usize, a: &[i64], b: &[i64]) -> Result<()> {
    let moduli = primes::ntt_primes::<W>(prime_bits, n, limbs)?;
    println!(
        "\n{}-bit words, {} primes of {} bits (log Q = {}):",
        W::BITS,
        limbs,
        prime_bits,
        moduli.iter().map(|q| 64 - q.leading_zeros()).sum::<u32>()
    );
    println!(
        "  {:<12} {:>12} {:>12} {:>12} {:>10}",
        "backend", "forward ms", "mul ms", "inverse ms", "check"
    );
    let mut reference: Option<Vec<W>> = None;
    for backend in Backend::available() {
        if backend.check(W::BITS, prime_bits).is_err() {
            continue;
        }
        let basis = RnsBasis::<W>::with_backend(n, &moduli, BackendChoice::Force(backend))?;
        let mut pa = basis.poly_from_signed(a)?;
        let mut pb = basis.poly_from_signed(b)?;
        let t0 = Instant::now();
        basis.forward(&mut pa)?;
        basis.forward(&mut pb)?;
        let t_fwd = t0.elapsed().as_secs_f64() * 1e3 / 2.0;
        let t0 = Instant::now();
        let mut c = basis.mul(&pa, &pb)?;
        let t_mul = t0.elapsed().as_secs_f64() * 1e3;
        let t0 = Instant::now();
        basis.inverse(&mut c)?;
        let t_inv = t0.elapsed().as_secs_f64() * 1e3;
        debug_assert_eq!(c.form(), Form::Coeff);
        // Spot-check coefficients against the schoolbook product, and the whole product against
        // the first backend.
        for &k in &[0usize, 1, n / 2, n - 1] {
            for (i, m) in basis.moduli().iter().enumerate() {
                let want = schoolbook_coeff(a, b, k, m.value());
                if c.limb(i)[k].to_u64() != want {
                    bail!(
                        "{backend}: coefficient {k} mod {} is {}, expected {want}",
                        m.value(),
                        c.limb(i)[k]
                    );
                }
            }
        }
        let all = c.as_slice().to_vec();
        match &reference {
            None => reference = Some(all),
            Some(r) if *r != all => bail!("{backend} disagrees with the scalar product"),
            Some(_) => {}
        }
        println!(
            "  {:<12} {:>12.3} {:>12.3} {:>12.3} {:>10}",
            backend.name(),
            t_fwd,
            t_mul,
            t_inv,
            "ok"
        );
    }
    Ok(())
}

/// Runs the demo.
pub fn run() -> Result<()> {
    println!(
        "heloom demo: RNS polynomial products through the negacyclic NTT\n{}",
        cpu_report()
    );
    let n = 1 << 14;
    let mut rng = ChaCha20Rng::seed_from_u64(2026);
    // Small signed coefficients, as in RLWE secrets and errors, and a wide message.
    let a: Vec<i64> = (0..n).map(|_| rng.gen_range(-1..=1)).collect();
    let b: Vec<i64> = (0..n)
        .map(|_| rng.gen_range(-(1i64 << 20)..(1 << 20)))
        .collect();
    println!("N = {n}, a ternary, b uniform in [-2^20, 2^20)");
    run_word::<u64>(n, 50, 8, &a, &b)?;
    run_word::<u64>(n, 60, 7, &a, &b)?;
    run_word::<u32>(n, 30, 14, &a, &b)?;
    println!("\nAll backends agree and match the schoolbook product.");
    Ok(())
}
