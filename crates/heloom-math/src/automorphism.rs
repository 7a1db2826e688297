//! Galois automorphisms `a(X) -> a(X^g)` of `Z_q[X]/(X^N + 1)` for odd `g` mod 2N: slot
//! rotations (`g = 5^step`) and complex conjugation (`g = 2N - 1`) in CKKS
//! (Gentry-Halevi-Smart 2012; Cheon-Kim-Kim-Song 2017).
//!
//! In coefficient form `X^i -> X^(i g mod 2N)` and `X^N = -1`, a signed permutation. In NTT form
//! it is a plain permutation of the evaluation points, precomputed once per `(N, g)` by
//! [`NttPermutation`].

use crate::error::{MathError, Result};
use crate::modulus::Modulus;
use crate::ntt::{bit_reverse, MAX_LOG_N, MIN_LOG_N};
use crate::primes;
use crate::word::Word;

/// The Galois element of a rotation by `step` slots: `5^step mod 2N`.
///
/// 5 generates the order-`N/2` subgroup of `Z_2N^*` that acts on the `N/2` slots, so `step` is
/// taken modulo `N/2` and a negative step uses the inverse element (`step = -1` gives `5^-1`).
/// `n` should be a power of two of at least 4; other values give a meaningless result (no
/// panic).
pub fn galois_element_for_step(n: usize, step: i64) -> u64 {
    let two_n = (n as u64).saturating_mul(2).max(1);
    let order = (n as u64 / 2).max(1) as i64;
    let mut e = step.rem_euclid(order) as u64;
    let (mut base, mut acc) = (5 % two_n, 1 % two_n);
    while e > 0 {
        if e & 1 == 1 {
            acc = mul_mod(acc, base, two_n);
        }
        base = mul_mod(base, base, two_n);
        e >>= 1;
    }
    acc
}

/// The Galois element of complex conjugation: `2N - 1` (`X -> X^-1`).
pub fn galois_element_conjugate(n: usize) -> u64 {
    (n as u64).saturating_mul(2).saturating_sub(1)
}

fn mul_mod(a: u64, b: u64, m: u64) -> u64 {
    ((a as u128 * b as u128) % m as u128) as u64
}

/// Errors unless `n` is a supported ring degree and `g` an odd number below `2n`.
fn check_galois(n: usize, g: u64) -> Result<()> {
    primes::check_degree(n, MIN_LOG_N, MAX_LOG_N)?;
    let two_n = 2 * n as u64;
    if g & 1 == 0 || g >= two_n {
        return Err(MathError::InvalidGaloisElement { g, n, two_n });
    }
    Ok(())
}

/// Coefficient form: `out[i*g mod N] = ±a[i]` (minus when `i*g mod 2N >= N`).
///
/// `a` must be reduced modulo `m` (the negation is `q - a`); `out` has the same length `N`, a
/// supported ring degree. Errors: [`MathError::InvalidGaloisElement`] for even `g` or
/// `g >= 2N`, [`MathError::InvalidDegree`] or [`MathError::LengthMismatch`] for bad lengths.
pub fn automorphism_coeff<W: Word>(m: &Modulus<W>, g: u64, a: &[W], out: &mut [W]) -> Result<()> {
    let n = a.len();
    check_galois(n, g)?;
    if out.len() != n {
        return Err(MathError::LengthMismatch {
            what: "automorphism output",
            expected: n,
            got: out.len(),
        });
    }
    let two_n = 2 * n;
    let g = g as usize;
    // j = i * g mod 2N, advanced by g each step.
    let mut j = 0usize;
    for &x in a {
        if j < n {
            out[j] = x;
        } else {
            out[j - n] = m.neg(x);
        }
        j += g;
        if j >= two_n {
            j -= two_n;
        }
    }
    Ok(())
}

/// Precomputed permutation for NTT form in heloom's NTT order ([`NttTable::forward`](crate::ntt::NttTable::forward)
/// output: `out[k] = a(psi^(2*bitrev(k)+1))`, see [`crate::ntt`]): applying `X -> X^g` is then
/// `out[k] = a[perm[k]]`.
///
/// With `b(X) = a(X^g)`, `b(psi^(2 bitrev(k) + 1)) = a(psi^(g (2 bitrev(k) + 1)))`, and the odd
/// exponent `g (2 bitrev(k) + 1) mod 2N = 2 j + 1` is the evaluation point stored at
/// `bitrev(j)`; so `perm[k] = bitrev(((g (2 bitrev(k) + 1) mod 2N) - 1) / 2)`. The same
/// permutation serves every prime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NttPermutation {
    g: u64,
    perm: crate::ntt::AlignedVec<u32>,
}

impl NttPermutation {
    /// Builds the permutation for ring degree `n` and Galois element `g`. Errors:
    /// [`MathError::InvalidDegree`] unless `n` is a supported power of two,
    /// [`MathError::InvalidGaloisElement`] for even `g` or `g >= 2n`.
    pub fn new(n: usize, g: u64) -> Result<Self> {
        check_galois(n, g)?;
        let log_n = n.trailing_zeros();
        let two_n = 2 * n as u64;
        let perm = (0..n)
            .map(|k| {
                let e = mul_mod(g, 2 * bit_reverse(k, log_n) as u64 + 1, two_n);
                bit_reverse(((e - 1) / 2) as usize, log_n) as u32
            })
            .collect();
        Ok(Self { g, perm })
    }

    /// The Galois element.
    pub fn g(&self) -> u64 {
        self.g
    }

    /// Ring degree N.
    pub fn n(&self) -> usize {
        self.perm.len()
    }

    /// `out[k] = a[perm[k]]`: the NTT-form image of `a` under `X -> X^g`. Errors with
    /// [`MathError::LengthMismatch`] unless both slices have `N` words.
    pub fn apply<W: Word>(&self, a: &[W], out: &mut [W]) -> Result<()> {
        let n = self.perm.len();
        for (what, len) in [
            ("automorphism input", a.len()),
            ("automorphism output", out.len()),
        ] {
            if len != n {
                return Err(MathError::LengthMismatch {
                    what,
                    expected: n,
                    got: len,
                });
            }
        }
        for (o, &p) in out.iter_mut().zip(&self.perm) {
            *o = a[p as usize];
        }
        Ok(())
    }

    /// The permutation: `perm[k]` is the source index of output `k`.
    pub fn indices(&self) -> &[u32] {
        &self.perm
    }
}
