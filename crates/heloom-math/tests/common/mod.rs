//! Helpers shared by the element-wise kernel tests.

use heloom_math::{primes, Backend, BackendChoice, Eltwise, Modulus, Word};
use rand::Rng;
use rand_chacha::ChaCha20Rng;

/// Edge moduli of 64-bit words: tiny, powers of two, Mersenne-like, non-NTT primes (kernels must
/// fall back or stay exact for every modulus they accept).
const EDGE64: [u64; 7] = [
    2,
    3,
    1 << 40,
    (1 << 50) - 1,
    (1 << 49) + 1,
    (1 << 61) - 1,
    1_000_000_007,
];

/// Edge moduli of 32-bit words.
const EDGE32: [u64; 6] = [2, 3, 1 << 20, (1 << 31) - 1, 1_000_000_007, 65_537];

/// `per` NTT primes (ring degree `n`) of each size in `bits`, then the edge moduli of the word.
pub fn moduli<W: Word>(bits: &[u32], n: usize, per: usize) -> Vec<u64> {
    let edge: &[u64] = if W::BITS == 64 { &EDGE64 } else { &EDGE32 };
    let mut qs: Vec<u64> = bits
        .iter()
        .flat_map(|&b| primes::ntt_primes::<W>(b, n, per).expect("p"))
        .collect();
    qs.extend_from_slice(edge);
    qs
}

/// A check of one backend on one modulus, length and seed.
pub type Check = fn(Backend, u64, usize, u64);

/// Runs `check64` and `check32` on every available backend, every modulus of `q64` / `q32` the
/// backend takes at that word size, and every length, seeded by `q ^ len`.
pub fn each_backend(q64: &[u64], q32: &[u64], lens: &[usize], check64: Check, check32: Check) {
    for backend in Backend::available() {
        for (word, qs, check) in [(64, q64, check64), (32, q32, check32)] {
            for &q in qs {
                if backend.check(word, 64 - q.leading_zeros()).is_ok() {
                    for &len in lens {
                        check(backend, q, len, q ^ len as u64);
                    }
                }
            }
        }
    }
}

/// `len` reduced values modulo `q` with `q - 1` and 0 mixed in (at indices `0` and `1` modulo
/// `period`).
pub fn reduced<W: Word>(rng: &mut ChaCha20Rng, len: usize, q: u64, period: usize) -> Vec<W> {
    (0..len)
        .map(|i| match i % period {
            0 => W::from_u64(q - 1),
            1 => W::ZERO,
            _ => W::from_u64(rng.gen_range(0..q)),
        })
        .collect()
}

/// The modulus `q` with the kernels of `backend` and the portable ones to check them against.
pub fn fast_and_scalar<W: Word>(backend: Backend, q: u64) -> (Modulus<W>, Eltwise<W>, Eltwise<W>) {
    let m = Modulus::<W>::new(q).expect("m");
    let fast = Eltwise::<W>::new(BackendChoice::Force(backend), m.bits()).expect("backend");
    let slow = Eltwise::<W>::new(BackendChoice::Force(Backend::Scalar), m.bits()).expect("scalar");
    (m, fast, slow)
}
