//! CKKS encoder: the special FFT against the canonical embedding evaluated and interpolated
//! directly, round trips on 32- and 64-bit bases, the slot convention under the Galois
//! automorphisms, exact CRT composition of large coefficients, and bad input.

// Index loops mirror the textbook formulas being checked.
#![allow(clippy::needless_range_loop)]

use std::f64::consts::PI;
use std::time::Instant;

use heloom_ckks::{CkksError, Complex64, Encoder};
use heloom_math::{primes, Form, RnsBasis, RnsPoly, Word};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn random_values(r: &mut ChaCha20Rng, slots: usize) -> Vec<Complex64> {
    (0..slots)
        .map(|_| Complex64::new(r.gen_range(-1.0..=1.0), r.gen_range(-1.0..=1.0)))
        .collect()
}

/// `zeta^e` for `zeta = exp(i*pi/N)`.
fn zeta_pow(e: usize, n: usize) -> Complex64 {
    let e = e % (2 * n);
    let t = PI * e as f64 / n as f64;
    Complex64::new(t.cos(), t.sin())
}

/// `5^j mod 2N`.
fn gal(j: usize, n: usize) -> usize {
    let mut g = 1usize;
    for _ in 0..j {
        g = g * 5 % (2 * n);
    }
    g
}

/// Naive interpolation of the canonical embedding: the real `m` with `m(zeta^(5^j)) = z_(j mod
/// slots)` for all `j < N/2` (sparse = replicated), `m_k = (2/N) Re sum_j z_j zeta^(-k 5^j)`.
fn naive_encode(values: &[Complex64], n: usize, scale: f64) -> Vec<i128> {
    let s = values.len();
    let g: Vec<usize> = (0..n / 2).map(|j| gal(j, n)).collect();
    (0..n)
        .map(|k| {
            let mut acc = Complex64::new(0.0, 0.0);
            for j in 0..n / 2 {
                acc += values[j % s] * zeta_pow(2 * n - (k * g[j]) % (2 * n), n);
            }
            (acc.re * 2.0 / n as f64 * scale).round() as i128
        })
        .collect()
}

/// Naive evaluation of the canonical embedding: `m(zeta^(5^j)) / scale` for `j < slots`.
fn naive_decode(coeffs: &[f64], slots: usize, scale: f64) -> Vec<Complex64> {
    let n = coeffs.len();
    (0..slots)
        .map(|j| {
            let g = gal(j, n);
            let mut acc = Complex64::new(0.0, 0.0);
            for k in 0..n {
                acc += zeta_pow(k * g, n) * coeffs[k];
            }
            acc / scale
        })
        .collect()
}

fn basis<W: Word>(n: usize, bits: &[u32]) -> RnsBasis<W> {
    // Distinct primes of the requested sizes (repeat sizes take the next prime down).
    let mut qs: Vec<u64> = Vec::new();
    for &b in bits {
        let count = bits.iter().filter(|&&x| x == b).count();
        let cands = primes::ntt_primes::<W>(b, n, count).expect("primes");
        let q = cands
            .into_iter()
            .find(|q| !qs.contains(q))
            .expect("distinct prime");
        qs.push(q);
    }
    RnsBasis::<W>::new(n, &qs).expect("basis")
}

fn reduce_i128(c: i128, q: u64) -> u64 {
    c.rem_euclid(q as i128) as u64
}

/// A coefficient-form polynomial of `basis` with the given (exact) coefficients.
fn poly_from_i128<W: Word>(b: &RnsBasis<W>, coeffs: &[i128]) -> RnsPoly<W> {
    let mut words = Vec::with_capacity(b.len() * b.n());
    for m in b.moduli() {
        words.extend(coeffs.iter().map(|&c| reduce_i128(c, m.value())));
    }
    b.poly_from_words(&words, Form::Coeff).expect("poly")
}

/// Galois automorphism `X -> X^g` on every limb: `out[i*g mod N] = +-a[i]`.
fn automorphism<W: Word>(b: &RnsBasis<W>, p: &RnsPoly<W>, g: usize) -> RnsPoly<W> {
    let n = b.n();
    let mut words = vec![0u64; b.len() * n];
    for (l, m) in b.moduli().iter().enumerate() {
        let q = m.value();
        let src = p.limb(l);
        for i in 0..n {
            let e = i * g % (2 * n);
            let v = src[i].to_u64();
            words[l * n + e % n] = if e >= n && v != 0 { q - v } else { v };
        }
    }
    b.poly_from_words(&words, Form::Coeff).expect("poly")
}

fn max_err(a: &[Complex64], b: &[Complex64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
}

#[test]
fn encode_coeffs_matches_naive_interpolation() {
    let mut r = rng(1);
    for log_n in 4..=10 {
        let n = 1usize << log_n;
        let enc = Encoder::new(n).expect("encoder");
        assert_eq!(enc.n(), n);
        assert_eq!(enc.max_slots(), n / 2);
        let mut slots = 1;
        while slots <= n / 2 {
            for scale in [2f64.powi(20), 2f64.powi(40)] {
                let values = random_values(&mut r, slots);
                let got = enc.encode_coeffs(&values, scale).expect("encode");
                let want = naive_encode(&values, n, scale);
                let gap = n / (2 * slots);
                for k in 0..n {
                    assert!(
                        (got[k] - want[k]).abs() <= 1,
                        "N = {n}, slots = {slots}, k = {k}: {} vs {}",
                        got[k],
                        want[k]
                    );
                    if k % gap != 0 {
                        assert_eq!(got[k], 0, "sparse packing must stay in the subring");
                    }
                }
            }
            slots *= 2;
        }
    }
}

#[test]
fn decode_matches_naive_evaluation() {
    let mut r = rng(2);
    for log_n in [4, 7, 10] {
        let n = 1usize << log_n;
        let enc = Encoder::new(n).expect("encoder");
        let b = basis::<u64>(n, &[60, 60]);
        let scale = 2f64.powi(30);
        let coeffs: Vec<i128> = (0..n)
            .map(|_| r.gen_range(-(1i128 << 40)..(1i128 << 40)))
            .collect();
        let p = poly_from_i128(&b, &coeffs);
        let cf: Vec<f64> = coeffs.iter().map(|&c| c as f64).collect();
        assert_eq!(enc.coeffs_to_f64(&p, &b).expect("compose"), cf);
        // Full packing: every coefficient counts.
        let got = enc.decode(&p, &b, n / 2, scale).expect("decode");
        let want = naive_decode(&cf, n / 2, scale);
        assert!(
            max_err(&got, &want) < 1e-9,
            "N = {n}: {}",
            max_err(&got, &want)
        );
        // Sparse packing reads the subring: evaluate the projection onto it.
        for slots in [1, 2, n / 8] {
            let gap = n / (2 * slots);
            let proj: Vec<f64> = (0..n)
                .map(|k| if k % gap == 0 { cf[k] } else { 0.0 })
                .collect();
            let got = enc.decode(&p, &b, slots, scale).expect("decode");
            let want = naive_decode(&proj, slots, scale);
            assert!(max_err(&got, &want) < 1e-9, "N = {n}, slots = {slots}");
        }
    }
}

/// Round trip within the bounds below; returns the worst error times `scale / sqrt(slots)`.
fn round_trip<W: Word>(n: usize, bits: &[u32], log_scale: i32, seed: u64) -> f64 {
    let mut r = rng(seed);
    let enc = Encoder::new(n).expect("encoder");
    let b = basis::<W>(n, bits);
    let scale = 2f64.powi(log_scale);
    let mut worst = 0.0f64;
    let mut slots = 1;
    while slots <= n / 2 {
        let values = random_values(&mut r, slots);
        let p = enc.encode(&values, scale, &b).expect("encode");
        let got = enc.decode(&p, &b, slots, scale).expect("decode");
        let err = max_err(&got, &values);
        // Worst case over the rounding errors (|e_k| <= 1/2 on 2*slots coefficients), the
        // brief's 2^-(log2(scale) - log2(N) - 2), and a statistical 3*sqrt(slots)/scale.
        let bound = slots as f64 / scale + 1e-13;
        let loose = 2f64.powi(-(log_scale - n.trailing_zeros() as i32 - 2));
        let typical = 3.0 * (slots as f64).sqrt() / scale + 2f64.powi(-48);
        assert!(
            err < bound && err < loose && err < typical,
            "W = u{}, N = {n}, primes {bits:?}, scale 2^{log_scale}, slots = {slots}: error {err:e} >= {bound:e}",
            W::BITS
        );
        worst = worst.max(err * scale / (slots as f64).sqrt());
        // The RNS polynomial is the exact reduction of encode_coeffs.
        let coeffs = enc.encode_coeffs(&values, scale).expect("encode_coeffs");
        for (l, m) in b.moduli().iter().enumerate() {
            for (k, &c) in coeffs.iter().enumerate() {
                assert_eq!(p.limb(l)[k].to_u64(), reduce_i128(c, m.value()));
            }
        }
        slots *= if n >= 1 << 13 { 8 } else { 2 };
    }
    worst
}

#[test]
fn round_trip_u32() {
    let mut worst = 0.0f64;
    for log_n in [4, 6, 9, 12, 15] {
        let n = 1 << log_n;
        for bits in [&[30][..], &[30, 30], &[30, 30, 30], &[31, 28, 30]] {
            worst = worst.max(round_trip::<u32>(n, bits, 20, log_n as u64));
        }
        for bits in [&[30, 30][..], &[30, 30, 30], &[28, 31, 29]] {
            worst = worst.max(round_trip::<u32>(n, bits, 30, 100 + log_n as u64));
        }
        // Coefficients above the primes: the Barrett path of encode.
        worst = worst.max(round_trip::<u32>(
            n,
            &[30, 30, 30, 30],
            40,
            200 + log_n as u64,
        ));
    }
    println!("u32: max error * scale / sqrt(slots) = {worst:.3}");
}

#[test]
fn round_trip_u64() {
    let mut worst = 0.0f64;
    for log_n in [4, 6, 9, 12, 15] {
        let n = 1 << log_n;
        for bits in [
            &[60][..],
            &[60, 60],
            &[60, 40, 50],
            &[61, 60, 60, 60],
            &[50, 60, 45, 61, 60],
            &[60, 60, 60, 60, 60, 60],
        ] {
            worst = worst.max(round_trip::<u64>(n, bits, 40, log_n as u64));
            worst = worst.max(round_trip::<u64>(n, bits, 50, 100 + log_n as u64));
        }
    }
    println!("u64: max error * scale / sqrt(slots) = {worst:.3}");
}

#[test]
fn encode_real_matches_encode() {
    let mut r = rng(3);
    let n = 1 << 10;
    let enc = Encoder::new(n).expect("encoder");
    let b = basis::<u64>(n, &[60, 60]);
    for slots in [1, 8, n / 2] {
        let re: Vec<f64> = (0..slots).map(|_| r.gen_range(-1.0..1.0)).collect();
        let cx: Vec<Complex64> = re.iter().map(|&x| Complex64::new(x, 0.0)).collect();
        let a = enc.encode_real(&re, 2f64.powi(40), &b).expect("encode");
        let c = enc.encode(&cx, 2f64.powi(40), &b).expect("encode");
        assert_eq!(a, c);
        let d = enc.decode(&a, &b, slots, 2f64.powi(40)).expect("decode");
        assert!(d
            .iter()
            .zip(&re)
            .all(|(x, y)| (x.re - y).abs() < 1e-9 && x.im.abs() < 1e-9));
    }
}

/// Rotations by the Galois elements 5^k and conjugation by 2N-1 act on the slots as specified.
fn check_rotations<W: Word>(n: usize, bits: &[u32], log_scale: i32) {
    let mut r = rng(4);
    let enc = Encoder::new(n).expect("encoder");
    let b = basis::<W>(n, bits);
    let scale = 2f64.powi(log_scale);
    for slots in [1, 2, 4, n / 8, n / 2] {
        let values = random_values(&mut r, slots);
        let p = enc.encode(&values, scale, &b).expect("encode");
        let tol = slots as f64 / scale + 1e-12;
        let mut ks = vec![1, 3, slots.saturating_sub(1)];
        ks.dedup();
        for k in ks {
            let g = gal(k, n);
            let rot = automorphism(&b, &p, g);
            let got = enc.decode(&rot, &b, slots, scale).expect("decode");
            let want: Vec<Complex64> = (0..slots).map(|j| values[(j + k) % slots]).collect();
            let err = max_err(&got, &want);
            assert!(
                err < tol,
                "N = {n}, slots = {slots}, k = {k}: error {err:e}"
            );
        }
        let conj = automorphism(&b, &p, 2 * n - 1);
        let got = enc.decode(&conj, &b, slots, scale).expect("decode");
        let want: Vec<Complex64> = values.iter().map(|v| v.conj()).collect();
        assert!(
            max_err(&got, &want) < tol,
            "N = {n}, slots = {slots}: conjugation"
        );
    }
}

#[test]
fn rotations_and_conjugation() {
    for log_n in [4, 5, 8, 11, 13] {
        check_rotations::<u32>(1 << log_n, &[30, 30], 25);
        check_rotations::<u64>(1 << log_n, &[60, 50, 60], 45);
    }
}

#[test]
fn large_coefficients_compose_exactly() {
    let mut r = rng(5);
    let n = 1 << 8;
    let enc = Encoder::new(n).expect("encoder");
    let check = |got: &[f64], want: &[f64]| {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= w.abs() * 2f64.powi(-50), "{g:e} vs {w:e}");
        }
    };
    // Near +-2^100 (and +-2^125) on several 60-bit primes and on six 30-bit primes.
    for top in [100, 125] {
        let coeffs: Vec<i128> = (0..n)
            .map(|_| {
                let c = r.gen_range((1i128 << (top - 1))..(1i128 << top));
                if r.gen::<bool>() {
                    -c
                } else {
                    c
                }
            })
            .collect();
        // Below 2^128 the composition is exact before one final rounding.
        let want: Vec<f64> = coeffs.iter().map(|&c| c as f64).collect();
        let check = |got: &[f64], want: &[f64]| {
            check(got, want);
            assert_eq!(got, want);
        };
        let b = basis::<u64>(n, &[60, 60, 60]);
        let b6 = basis::<u64>(n, &[60, 61, 60, 50, 60, 60]);
        let b32 = basis::<u32>(n, &[30, 30, 30, 30, 30]);
        check(
            &enc.coeffs_to_f64(&poly_from_i128(&b, &coeffs), &b)
                .expect("f64"),
            &want,
        );
        check(
            &enc.coeffs_to_f64(&poly_from_i128(&b6, &coeffs), &b6)
                .expect("f64"),
            &want,
        );
        if top == 100 {
            let got = enc.coeffs_to_f64(&poly_from_i128(&b32, &coeffs), &b32);
            check(&got.expect("f64"), &want);
        }
    }
    // Beyond 2^128 (the f64 part of the composition): x = c1 * 2^200 + c0 on six 60-bit primes.
    let b = basis::<u64>(n, &[60, 60, 60, 60, 60, 60]);
    let mut words = Vec::new();
    let (c1, c0): (Vec<i64>, Vec<i64>) = (0..n).map(|_| (r.gen::<i64>(), r.gen::<i64>())).unzip();
    for m in b.moduli() {
        let q = m.value() as u128;
        let mut p200 = 1u128;
        for _ in 0..200 {
            p200 = p200 * 2 % q;
        }
        for k in 0..n {
            let hi = reduce_i128(c1[k] as i128, q as u64) as u128 * p200 % q;
            words.push(((hi + reduce_i128(c0[k] as i128, q as u64) as u128) % q) as u64);
        }
    }
    let p = b.poly_from_words(&words, Form::Coeff).expect("poly");
    let want: Vec<f64> = c1.iter().map(|&c| c as f64 * 2f64.powi(200)).collect();
    check(&enc.coeffs_to_f64(&p, &b).expect("f64"), &want);
}

#[test]
fn many_limbs_and_centering_boundary() {
    let mut r = rng(8);
    let n = 1 << 6;
    let enc = Encoder::new(n).expect("encoder");
    // 40 limbs: the Garner accumulators fold (u64 every 32 terms); coefficients up to 2^120.
    let bits64: Vec<u32> = (0..40).map(|i| [60, 50, 61, 45][i % 4]).collect();
    let bits32: Vec<u32> = (0..40).map(|i| [30, 31, 25][i % 3]).collect();
    let coeffs: Vec<i128> = (0..n)
        .map(|k| {
            let c = r.gen_range(0..(1i128 << (k * 2).min(120)));
            if k % 3 == 1 {
                -c
            } else {
                c
            }
        })
        .collect();
    let want: Vec<f64> = coeffs.iter().map(|&c| c as f64).collect();
    let b = basis::<u64>(n, &bits64);
    assert_eq!(
        enc.coeffs_to_f64(&poly_from_i128(&b, &coeffs), &b)
            .expect("f64"),
        want
    );
    let b = basis::<u32>(n, &bits32);
    assert_eq!(
        enc.coeffs_to_f64(&poly_from_i128(&b, &coeffs), &b)
            .expect("f64"),
        want
    );
    // Q = q0 q1 ...: (Q-1)/2 stays positive, (Q+1)/2 is -(Q-1)/2, Q-1 is -1.
    boundary(&enc, &basis::<u64>(n, &[61, 60]));
    boundary(&enc, &basis::<u64>(n, &[30, 61, 35]));
    boundary(&enc, &basis::<u32>(n, &[31, 30, 29]));
    boundary(&enc, &basis::<u32>(n, &[31]));
}

fn boundary<W: Word>(enc: &Encoder, b: &RnsBasis<W>) {
    let q: i128 = b.moduli().iter().map(|m| m.value() as i128).product();
    let h = (q - 1) / 2;
    let mut coeffs = vec![0i128; b.n()];
    coeffs[..6].copy_from_slice(&[h, h + 1, q - 1, 1, h - 1, h + 2]);
    let p = poly_from_i128(b, &coeffs);
    let got = enc.coeffs_to_f64(&p, b).expect("f64");
    let want = [h, -h, -1, 1, h - 1, -(h - 1)];
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(*g, w as f64, "coefficient {i}, Q = {q}");
    }
}

#[test]
fn large_values_round_trip() {
    // Scale 2^90 with values in [-1, 1]: coefficients near 2^90..2^100, i128 path of encode.
    let mut r = rng(6);
    for log_n in [4, 10, 14] {
        let n = 1 << log_n;
        let enc = Encoder::new(n).expect("encoder");
        let b = basis::<u64>(n, &[60, 60, 61, 55]);
        let b32 = basis::<u32>(n, &[30, 30, 30, 30, 30, 30, 30]);
        for slots in [1, n / 2] {
            let mut values = random_values(&mut r, slots);
            values[0] = Complex64::new(1000.0, -1000.0);
            let scale = 2f64.powi(90);
            let coeffs = enc.encode_coeffs(&values, scale).expect("encode");
            let p = enc.encode(&values, scale, &b).expect("encode");
            let p32 = enc.encode(&values, scale, &b32).expect("encode");
            for (l, m) in b.moduli().iter().enumerate() {
                for k in 0..n {
                    assert_eq!(p.limb(l)[k], reduce_i128(coeffs[k], m.value()));
                }
            }
            let want: Vec<f64> = coeffs.iter().map(|&c| c as f64).collect();
            assert_eq!(enc.coeffs_to_f64(&p, &b).expect("f64"), want);
            assert_eq!(enc.coeffs_to_f64(&p32, &b32).expect("f64"), want);
            // Only floating-point error is left: relative to the largest value.
            let got = enc.decode(&p, &b, slots, scale).expect("decode");
            let rel = max_err(&got, &values) / values[0].norm();
            assert!(rel < 2f64.powi(-48), "N = {n}, slots = {slots}: {rel:e}");
        }
    }
}

#[test]
fn encode_constant_fills_every_slot() {
    let n = 1 << 9;
    let enc = Encoder::new(n).expect("encoder");
    let b = basis::<u64>(n, &[60, 50]);
    let b32 = basis::<u32>(n, &[30, 30]);
    for c in [
        Complex64::new(0.75, 0.0),
        Complex64::new(-3.5, 0.0),
        Complex64::new(0.0, 1.0),
        Complex64::new(-0.25, 2.5),
    ] {
        let p = enc.encode_constant(c, 2f64.powi(40), &b).expect("constant");
        let p32 = enc
            .encode_constant(c, 2f64.powi(25), &b32)
            .expect("constant");
        let values = vec![c; n / 2];
        assert_eq!(p, enc.encode(&values, 2f64.powi(40), &b).expect("encode"));
        for slots in [1, 4, n / 2] {
            for (got, scale) in [
                (enc.decode(&p, &b, slots, 2f64.powi(40)), 2f64.powi(40)),
                (enc.decode(&p32, &b32, slots, 2f64.powi(25)), 2f64.powi(25)),
            ] {
                let got = got.expect("decode");
                assert_eq!(got.len(), slots);
                assert!(got.iter().all(|v| (v - c).norm() < 2.0 / scale), "{c}");
            }
        }
    }
}

fn assert_invalid<T: std::fmt::Debug>(r: Result<T, CkksError>, what: &str) {
    match r {
        Err(CkksError::InvalidInput(msg)) | Err(CkksError::InvalidParameters(msg)) => {
            println!("{what}: {msg}")
        }
        other => panic!("{what}: expected an input error, got {other:?}"),
    }
}

#[test]
fn bad_input_is_rejected() {
    for n in [0, 8, 100, 1 << 18] {
        assert_invalid(Encoder::new(n), "degree");
    }
    let n = 1 << 6;
    let enc = Encoder::new(n).expect("encoder");
    let b = basis::<u64>(n, &[60, 60]);
    let ok = vec![Complex64::new(0.5, 0.5); 8];
    let s = 2f64.powi(40);
    assert_invalid(enc.encode(&[], s, &b), "no slots");
    assert_invalid(enc.encode(&ok[..3], s, &b), "3 slots");
    assert_invalid(enc.encode(&vec![ok[0]; n], s, &b), "too many slots");
    let mut bad = ok.clone();
    bad[5] = Complex64::new(f64::NAN, 0.0);
    assert_invalid(enc.encode(&bad, s, &b), "NaN");
    bad[5] = Complex64::new(0.0, f64::INFINITY);
    assert_invalid(enc.encode_coeffs(&bad, s), "inf");
    assert_invalid(enc.encode_real(&[1.0, f64::NAN], s, &b), "NaN real");
    for scale in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_invalid(enc.encode(&ok, scale, &b), "scale");
    }
    // Coefficients of 2^126 and beyond: the message is too large for the scale.
    let ones = vec![Complex64::new(1.0, 0.0); 8];
    assert_invalid(enc.encode(&ones, 2f64.powi(126), &b), "2^126");
    assert!(enc.encode_coeffs(&ones, 2f64.powf(125.9)).is_ok());
    assert_invalid(
        enc.encode_coeffs(&[Complex64::new(1e300, 0.0), ok[0]], 1e300),
        "overflow to inf",
    );
    assert_invalid(
        enc.encode_constant(Complex64::new(0.0, 2.0), 2f64.powi(125), &b),
        "constant 2^126",
    );
    assert_invalid(
        enc.encode_constant(Complex64::new(f64::NAN, 0.0), s, &b),
        "constant NaN",
    );
    // Decoding: wrong slot counts, scale, form, basis.
    let p = enc.encode(&ok, s, &b).expect("encode");
    assert_invalid(enc.decode(&p, &b, 3, s), "decode 3 slots");
    assert_invalid(enc.decode(&p, &b, n, s), "decode N slots");
    assert_invalid(enc.decode(&p, &b, 8, -s), "decode scale");
    let mut ntt = p.clone();
    b.forward(&mut ntt).expect("ntt");
    assert_invalid(enc.decode(&ntt, &b, 8, s), "NTT form");
    let other = basis::<u64>(n, &[60, 50]);
    assert!(matches!(
        enc.decode(&p, &other, 8, s),
        Err(CkksError::ParameterMismatch(_))
    ));
    assert!(matches!(
        enc.coeffs_to_f64(&p, &other),
        Err(CkksError::ParameterMismatch(_))
    ));
    let wide = basis::<u64>(2 * n, &[60, 60]);
    assert!(matches!(
        enc.encode(&ok, s, &wide),
        Err(CkksError::ParameterMismatch(_))
    ));
    assert!(matches!(
        enc.decode(&p, &wide, 8, s),
        Err(CkksError::ParameterMismatch(_))
    ));
}

/// Best-of-`reps` time in ms (robust to other load on the machine).
fn time<T>(reps: usize, mut f: impl FnMut() -> T) -> f64 {
    let _ = f();
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        std::hint::black_box(f());
        best = best.min(t.elapsed().as_secs_f64());
    }
    best * 1e3
}

/// Timings at N = 2^14 (run with `--ignored --nocapture`).
#[test]
#[ignore]
fn timing_n14() {
    let n = 1 << 14;
    let enc = Encoder::new(n).expect("encoder");
    let mut r = rng(7);
    let values = random_values(&mut r, n / 2);
    let b64 = basis::<u64>(n, &[60; 8]);
    let b32 = basis::<u32>(n, &[30; 16]);
    let p64 = enc.encode(&values, 2f64.powi(40), &b64).expect("encode");
    let p32 = enc.encode(&values, 2f64.powi(30), &b32).expect("encode");
    let reps = 200;
    println!("Encoder::new: {:.3} ms", time(20, || Encoder::new(n)));
    println!(
        "encode_coeffs: {:.3} ms",
        time(reps, || enc.encode_coeffs(&values, 2f64.powi(40)))
    );
    println!(
        "encode u64 x8: {:.3} ms",
        time(reps, || enc.encode(&values, 2f64.powi(40), &b64))
    );
    println!(
        "encode u32 x16: {:.3} ms",
        time(reps, || enc.encode(&values, 2f64.powi(30), &b32))
    );
    println!(
        "decode u64 x8: {:.3} ms",
        time(reps, || enc.decode(&p64, &b64, n / 2, 2f64.powi(40)))
    );
    println!(
        "decode u32 x16: {:.3} ms",
        time(reps, || enc.decode(&p32, &b32, n / 2, 2f64.powi(30)))
    );
    println!(
        "coeffs_to_f64 u64 x8: {:.3} ms",
        time(reps, || enc.coeffs_to_f64(&p64, &b64))
    );
    println!(
        "coeffs_to_f64 u32 x16: {:.3} ms",
        time(reps, || enc.coeffs_to_f64(&p32, &b32))
    );
    let b1 = basis::<u64>(n, &[60]);
    let p1 = enc.encode(&values, 2f64.powi(40), &b1).expect("encode");
    println!(
        "decode u64 x1: {:.3} ms",
        time(reps, || enc.decode(&p1, &b1, n / 2, 2f64.powi(40)))
    );
}
