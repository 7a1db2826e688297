//! NTT correctness: exact outputs against a naive evaluation, products against a naive negacyclic
//! convolution, round trips, and every backend bit-exact against the scalar path.

// Index loops mirror the textbook formulas being checked.
#![allow(clippy::needless_range_loop)]

use heloom_math::ntt::bit_reverse;
use heloom_math::{primes, Backend, BackendChoice, MathError, NttTable, Word};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn mulm(a: u64, b: u64, q: u64) -> u64 {
    ((a as u128 * b as u128) % q as u128) as u64
}

fn powm(mut a: u64, mut e: u64, q: u64) -> u64 {
    let mut r = 1;
    while e > 0 {
        if e & 1 == 1 {
            r = mulm(r, a, q);
        }
        a = mulm(a, a, q);
        e >>= 1;
    }
    r
}

fn random_poly(rng: &mut ChaCha20Rng, n: usize, q: u64) -> Vec<u64> {
    (0..n).map(|_| rng.gen_range(0..q)).collect()
}

/// Naive negacyclic product in Z_q[X]/(X^N+1).
fn naive_negacyclic(a: &[u64], b: &[u64], q: u64) -> Vec<u64> {
    let n = a.len();
    let mut c = vec![0u64; n];
    for i in 0..n {
        for j in 0..n {
            let p = mulm(a[i], b[j], q);
            let k = i + j;
            if k < n {
                c[k] = (c[k] + p) % q;
            } else {
                c[k - n] = (c[k - n] + q - p) % q;
            }
        }
    }
    c
}

fn to_w<W: Word>(v: &[u64]) -> Vec<W> {
    v.iter().map(|&x| W::from_u64(x)).collect()
}

fn to_u64<W: Word>(v: &[W]) -> Vec<u64> {
    v.iter().map(|x| x.to_u64()).collect()
}

/// Forward output k must equal a(psi^(2 bitrev(k) + 1)).
fn check_exact_evaluation<W: Word>(n: usize, q: u64, backend: Backend) {
    let t = NttTable::<W>::with_backend(n, q, BackendChoice::Force(backend)).expect("table");
    let psi = t.core().psi().to_u64();
    let mut rng = ChaCha20Rng::seed_from_u64(n as u64 ^ q);
    let a = random_poly(&mut rng, n, q);
    let mut f = to_w::<W>(&a);
    t.forward(&mut f).expect("forward");
    let log_n = n.trailing_zeros();
    for k in 0..n {
        let x = powm(psi, 2 * bit_reverse(k, log_n) as u64 + 1, q);
        let mut acc = 0u64;
        for &c in a.iter().rev() {
            acc = (mulm(acc, x, q) + c) % q;
        }
        assert_eq!(f[k].to_u64(), acc, "N={n} q={q} backend={backend} k={k}");
    }
}

fn backends_for(word_bits: u32, prime_bits: u32) -> Vec<Backend> {
    Backend::available()
        .into_iter()
        .filter(|b| b.check(word_bits, prime_bits).is_ok())
        .collect()
}

#[test]
fn forward_matches_naive_evaluation_all_backends() {
    for (n, bits) in [(16usize, 30u32), (64, 50), (256, 61), (1024, 45)] {
        let q = primes::ntt_primes::<u64>(bits, n, 1).expect("p")[0];
        for b in backends_for(64, bits) {
            check_exact_evaluation::<u64>(n, q, b);
        }
    }
    for (n, bits) in [(16usize, 29u32), (64, 31), (256, 30), (512, 31)] {
        let q = primes::ntt_primes::<u32>(bits, n, 1).expect("p")[0];
        for b in backends_for(32, bits) {
            check_exact_evaluation::<u32>(n, q, b);
        }
    }
}

fn check_product<W: Word>(n: usize, q: u64, backend: Backend, seed: u64) {
    let t = NttTable::<W>::with_backend(n, q, BackendChoice::Force(backend)).expect("table");
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let a = random_poly(&mut rng, n, q);
    let b = random_poly(&mut rng, n, q);
    let expect = naive_negacyclic(&a, &b, q);
    let (mut fa, mut fb) = (to_w::<W>(&a), to_w::<W>(&b));
    t.forward(&mut fa).expect("fwd");
    t.forward(&mut fb).expect("fwd");
    let m = t.modulus();
    let mut c: Vec<W> = fa.iter().zip(&fb).map(|(&x, &y)| m.mul(x, y)).collect();
    t.inverse(&mut c).expect("inv");
    assert_eq!(to_u64(&c), expect, "N={n} q={q} backend={backend}");
}

#[test]
fn ntt_product_matches_naive_negacyclic_product() {
    for (n, bits) in [(16usize, 20u32), (128, 50), (512, 61), (1024, 36)] {
        let q = primes::ntt_primes::<u64>(bits, n, 1).expect("p")[0];
        for b in backends_for(64, bits) {
            check_product::<u64>(n, q, b, 7);
        }
    }
    for (n, bits) in [(16usize, 20u32), (128, 31), (512, 29), (1024, 30)] {
        let q = primes::ntt_primes::<u32>(bits, n, 1).expect("p")[0];
        for b in backends_for(32, bits) {
            check_product::<u32>(n, q, b, 9);
        }
    }
}

/// Every SIMD backend must equal the scalar path bit for bit, forward and inverse, for all sizes.
fn check_backends_agree<W: Word>(bits: u32, log_ns: &[u32], inputs_edge: bool) {
    for &log_n in log_ns {
        let n = 1usize << log_n;
        let Ok(qs) = primes::ntt_primes::<W>(bits, n, 2) else {
            continue;
        };
        for q in qs {
            let scalar = NttTable::<W>::with_backend(n, q, BackendChoice::Force(Backend::Scalar))
                .expect("scalar");
            let mut rng = ChaCha20Rng::seed_from_u64(q ^ log_n as u64);
            let mut a = random_poly(&mut rng, n, q);
            if inputs_edge {
                // Extremes stress the lazy-reduction ranges.
                for (i, x) in a.iter_mut().enumerate() {
                    *x = if i % 3 == 0 {
                        q - 1
                    } else if i % 3 == 1 {
                        0
                    } else {
                        *x
                    };
                }
            }
            let a = to_w::<W>(&a);
            let mut want_f = a.clone();
            scalar.forward(&mut want_f).expect("fwd");
            let mut want_i = a.clone();
            scalar.inverse(&mut want_i).expect("inv");
            let mut rt = want_f.clone();
            scalar.inverse(&mut rt).expect("inv");
            assert_eq!(rt, a, "scalar round trip N={n} q={q}");
            for b in backends_for(W::BITS, bits) {
                let t = NttTable::<W>::with_backend(n, q, BackendChoice::Force(b)).expect("table");
                assert_eq!(t.backend(), b);
                let mut f = a.clone();
                t.forward(&mut f).expect("fwd");
                let mut i = a.clone();
                t.inverse(&mut i).expect("inv");
                for (got, want, what) in [(&f, &want_f, "forward"), (&i, &want_i, "inverse")] {
                    assert!(
                        got == want,
                        "{what} mismatch: backend={b} N={n} q={q} ({bits} bits)"
                    );
                }
                t.inverse(&mut f).expect("inv");
                assert!(f == a, "round trip: backend={b} N={n} q={q}");
            }
        }
    }
}

#[test]
fn backends_agree_u64() {
    let log_ns: Vec<u32> = (4..=17).collect();
    for bits in [30u32, 40, 49, 50, 52, 55, 60, 61] {
        check_backends_agree::<u64>(bits, &log_ns, bits == 50 || bits == 61);
    }
}

#[test]
fn backends_agree_u32() {
    let log_ns: Vec<u32> = (4..=17).collect();
    for bits in [20u32, 25, 28, 29, 30, 31] {
        check_backends_agree::<u32>(bits, &log_ns, bits >= 30);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn prop_round_trip_random_primes_and_sizes(log_n in 4u32..=12, bits in 20u32..=61, idx in 0usize..4, seed: u64, word32: bool) {
        let n = 1usize << log_n;
        let bits = if word32 { bits.min(31) } else { bits };
        prop_assume!(bits >= log_n + 3);
        let q = primes::ntt_primes::<u64>(bits, n, idx + 1).map(|v| v[idx]);
        prop_assume!(q.is_ok());
        let q = q.expect("checked");
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let a = random_poly(&mut rng, n, q);
        if word32 {
            for b in backends_for(32, bits) {
                let t = NttTable::<u32>::with_backend(n, q, BackendChoice::Force(b)).expect("t");
                let mut x = to_w::<u32>(&a);
                t.forward(&mut x).expect("f");
                prop_assert!(x.iter().all(|&v| (v as u64) < q));
                t.inverse(&mut x).expect("i");
                prop_assert_eq!(to_u64(&x), a.clone());
            }
        } else {
            for b in backends_for(64, bits) {
                let t = NttTable::<u64>::with_backend(n, q, BackendChoice::Force(b)).expect("t");
                let mut x = a.clone();
                t.forward(&mut x).expect("f");
                prop_assert!(x.iter().all(|&v| v < q));
                t.inverse(&mut x).expect("i");
                prop_assert_eq!(&x, &a);
            }
        }
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    let q = primes::ntt_primes::<u64>(50, 1 << 10, 1).expect("p")[0];
    assert!(matches!(
        NttTable::<u64>::new(1000, q),
        Err(MathError::InvalidDegree { .. })
    ));
    assert!(matches!(
        NttTable::<u64>::new(8, q),
        Err(MathError::InvalidDegree { .. })
    ));
    assert!(matches!(
        NttTable::<u64>::new(1 << 18, q),
        Err(MathError::InvalidDegree { .. })
    ));
    assert!(matches!(
        NttTable::<u64>::new(1 << 10, q + 2),
        Err(MathError::NotPrime { .. })
    ));
    assert!(matches!(
        NttTable::<u64>::new(1 << 10, 97),
        Err(MathError::NotNttFriendly { .. })
    ));
    assert!(matches!(
        NttTable::<u64>::new(1 << 10, 0),
        Err(MathError::ModulusTooSmall { .. })
    ));
    // 62-bit prime in a 64-bit word, 32-bit-plus prime in a 32-bit word.
    let big = primes::ntt_primes::<u64>(61, 1 << 10, 1).expect("p")[0];
    assert!(matches!(
        NttTable::<u32>::new(1 << 10, big),
        Err(MathError::ModulusTooLarge { .. })
    ));
    assert!(matches!(
        NttTable::<u64>::new(1 << 10, (1u64 << 62) + 1),
        Err(MathError::ModulusTooLarge { .. })
    ));
    // IFMA needs primes below 2^50 and 64-bit words.
    let q55 = primes::ntt_primes::<u64>(55, 1 << 10, 1).expect("p")[0];
    let r = NttTable::<u64>::with_backend(1 << 10, q55, BackendChoice::Force(Backend::Avx512Ifma));
    assert!(
        matches!(
            r,
            Err(MathError::ModulusTooLarge {
                bits: 55,
                max_bits: 50,
                ..
            }) | Err(MathError::BackendUnavailable { .. })
        ),
        "{r:?}"
    );
    let q30 = primes::ntt_primes::<u32>(30, 1 << 10, 1).expect("p")[0];
    let r = NttTable::<u32>::with_backend(1 << 10, q30, BackendChoice::Force(Backend::Avx512Ifma));
    assert!(
        matches!(
            r,
            Err(MathError::BackendUnsupported { .. }) | Err(MathError::BackendUnavailable { .. })
        ),
        "{r:?}"
    );
    // Wrong length, unreduced input.
    let t = NttTable::<u64>::new(1 << 10, q).expect("t");
    let mut short = vec![0u64; 100];
    assert!(matches!(
        t.forward(&mut short),
        Err(MathError::LengthMismatch { .. })
    ));
    let mut bad = vec![0u64; 1 << 10];
    bad[5] = q;
    assert!(matches!(
        t.forward_checked(&mut bad),
        Err(MathError::ValueOutOfRange { index: 5, .. })
    ));
    // Unknown backend names.
    assert!(matches!(
        "sse9".parse::<BackendChoice>(),
        Err(MathError::UnknownBackend { .. })
    ));
}

#[test]
fn unavailable_backend_is_reported() {
    for b in Backend::ALL {
        if !b.is_available() {
            let q = primes::ntt_primes::<u64>(40, 64, 1).expect("p")[0];
            let r = NttTable::<u64>::with_backend(64, q, BackendChoice::Force(b));
            assert!(matches!(r, Err(MathError::BackendUnavailable { .. })));
        }
    }
    let _ = Rng::gen::<u8>(&mut ChaCha20Rng::seed_from_u64(0));
}
