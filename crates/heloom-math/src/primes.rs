//! NTT-friendly primes (q = 1 mod 2N) and primitive 2N-th roots of unity.

use crate::error::{MathError, Result};
use crate::word::Word;

fn mul_mod(a: u64, b: u64, m: u64) -> u64 {
    ((a as u128 * b as u128) % m as u128) as u64
}

fn pow_mod(mut a: u64, mut e: u64, m: u64) -> u64 {
    let mut r = 1 % m;
    a %= m;
    while e > 0 {
        if e & 1 == 1 {
            r = mul_mod(r, a, m);
        }
        a = mul_mod(a, a, m);
        e >>= 1;
    }
    r
}

/// Deterministic primality test for all 64-bit integers.
///
/// Miller-Rabin with the first twelve prime bases is exact below 3.3 * 10^24 (Sorenson and
/// Webster 2015), which covers every `u64`.
pub fn is_prime(n: u64) -> bool {
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    if n < 2 {
        return false;
    }
    for &p in &BASES {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let s = (n - 1).trailing_zeros();
    let d = (n - 1) >> s;
    'bases: for &a in &BASES {
        let mut x = pow_mod(a, d, n);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul_mod(x, x, n);
            if x == n - 1 {
                continue 'bases;
            }
        }
        return false;
    }
    true
}

/// Checks that `n` is a supported ring degree: a power of two in `[2^min_log, 2^max_log]`.
pub fn check_degree(n: usize, min_log: u32, max_log: u32) -> Result<u32> {
    if !n.is_power_of_two() || n < (1 << min_log) || n > (1 << max_log) {
        return Err(MathError::InvalidDegree {
            n,
            min_log,
            max_log,
        });
    }
    Ok(n.trailing_zeros())
}

/// The `count` largest primes of exactly `bits` bits with `q = 1 mod 2n`, in descending order,
/// for words of type `W` (`bits <= W::MAX_PRIME_BITS`).
///
/// `n` must be a power of two (the ring degree).
pub fn ntt_primes<W: Word>(bits: u32, n: usize, count: usize) -> Result<Vec<u64>> {
    if !n.is_power_of_two() || n < 2 {
        return Err(MathError::InvalidDegree {
            n,
            min_log: 1,
            max_log: 62,
        });
    }
    let two_n = 2 * n as u64;
    let min_bits = two_n.trailing_zeros() + 2;
    if bits > W::MAX_PRIME_BITS || bits < min_bits {
        return Err(MathError::InvalidPrimeBits {
            bits,
            word_bits: W::BITS,
            min_bits,
            max_bits: W::MAX_PRIME_BITS,
        });
    }
    let lower = 1u64 << (bits - 1);
    // Largest candidate below 2^bits that is 1 mod 2n.
    let mut cand = (1u64 << bits) - two_n + 1;
    let mut out = Vec::with_capacity(count);
    while out.len() < count && cand > lower {
        if is_prime(cand) {
            out.push(cand);
        }
        cand -= two_n;
    }
    if out.len() < count {
        return Err(MathError::NotEnoughPrimes {
            bits,
            n,
            count,
            found: out.len(),
        });
    }
    Ok(out)
}

/// Checks that `q` is a prime with `q = 1 mod 2n`.
pub fn check_ntt_prime(q: u64, n: usize) -> Result<()> {
    if q < 2 {
        return Err(MathError::ModulusTooSmall { q });
    }
    if !is_prime(q) {
        return Err(MathError::NotPrime { q });
    }
    let two_n = 2 * n as u64;
    if !(q - 1).is_multiple_of(two_n) {
        return Err(MathError::NotNttFriendly { q, n, two_n });
    }
    Ok(())
}

/// The smallest primitive 2n-th root of unity modulo the NTT-friendly prime `q`.
///
/// Choosing the smallest makes transforms canonical across runs and machines (as SEAL does).
pub fn min_primitive_root(q: u64, n: usize) -> Result<u64> {
    check_ntt_prime(q, n)?;
    let two_n = 2 * n as u64;
    let cofactor = (q - 1) / two_n;
    // psi = g^((q-1)/2n) has order dividing 2n; it is primitive iff psi^n = -1 (2n a power of two).
    let mut psi = 0;
    for g in 2..q {
        let cand = pow_mod(g, cofactor, q);
        if pow_mod(cand, n as u64, q) == q - 1 {
            psi = cand;
            break;
        }
    }
    // All primitive 2n-th roots are the odd powers of psi.
    let psi2 = mul_mod(psi, psi, q);
    let mut best = psi;
    let mut cur = psi;
    for _ in 1..n {
        cur = mul_mod(cur, psi2, q);
        best = best.min(cur);
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primality_known_values() {
        let primes = [
            2u64,
            3,
            5,
            7,
            65537,
            4294967291,
            18446744073709551557,
            0x1fffffffffffffff,
        ];
        for p in primes {
            assert!(is_prime(p), "{p}");
        }
        // Carmichael numbers and strong pseudoprimes to small bases.
        let composites = [
            1u64,
            0,
            4,
            561,
            1105,
            3215031751,
            3825123056546413051,
            18446744073709551615,
        ];
        for c in composites {
            assert!(!is_prime(c), "{c}");
        }
    }

    #[test]
    fn primes_are_ntt_friendly_and_sized() {
        for (bits, n) in [(30u32, 1usize << 12), (50, 1 << 16), (60, 1 << 17)] {
            let ps = ntt_primes::<u64>(bits, n, 4).expect("primes");
            for p in &ps {
                assert!(is_prime(*p));
                assert_eq!(p % (2 * n as u64), 1);
                assert_eq!(64 - p.leading_zeros(), bits);
            }
            assert!(ps.windows(2).all(|w| w[0] > w[1]));
        }
        // Known first prime: largest 30-bit prime = 1 mod 2^13.
        assert_eq!(ntt_primes::<u32>(30, 1 << 12, 1).expect("p")[0], 1073692673);
    }

    #[test]
    fn bad_prime_requests() {
        assert!(matches!(
            ntt_primes::<u32>(32, 1024, 1),
            Err(MathError::InvalidPrimeBits { .. })
        ));
        assert!(matches!(
            ntt_primes::<u64>(62, 1024, 1),
            Err(MathError::InvalidPrimeBits { .. })
        ));
        assert!(matches!(
            ntt_primes::<u64>(17, 1 << 16, 1),
            Err(MathError::InvalidPrimeBits { .. })
        ));
        assert!(matches!(
            ntt_primes::<u64>(20, 1 << 12, 1000),
            Err(MathError::NotEnoughPrimes { .. })
        ));
        assert!(matches!(
            check_ntt_prime(97, 1 << 10),
            Err(MathError::NotNttFriendly { .. })
        ));
        assert!(matches!(
            check_ntt_prime(12289 * 3, 16),
            Err(MathError::NotPrime { .. })
        ));
    }

    #[test]
    fn primitive_root_has_order_2n() {
        let n = 1 << 10;
        let q = ntt_primes::<u64>(40, n, 1).expect("p")[0];
        let psi = min_primitive_root(q, n).expect("root");
        assert_eq!(pow_mod(psi, n as u64, q), q - 1);
        assert_eq!(pow_mod(psi, 2 * n as u64, q), 1);
        // Seal's well-known root for q = 12289, N = 2^10... q = 12289 = 12*1024 + 1: 2n = 2048 divides q-1.
        let psi = min_primitive_root(12289, 1024).expect("root");
        assert_eq!(pow_mod(psi, 1024, 12289), 12288);
    }
}
