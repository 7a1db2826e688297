//! Negacyclic number-theoretic transform over `Z_q[X]/(X^N + 1)`.
//!
//! Forward: Cooley-Tukey butterflies with the powers of a primitive 2N-th root `psi` in
//! bit-reversed order (Longa-Naehrig 2016, Alg. 1), lazy reduction after Harvey 2014; output in
//! bit-reversed order, fully reduced: `out[k] = a(psi^(2*bitrev(k)+1))`.
//! Inverse: Gentleman-Sande butterflies (Longa-Naehrig Alg. 2) with `N^-1` folded into the
//! last layer; output in natural order, fully reduced.

pub(crate) mod avx2_u32;
pub(crate) mod avx2_u64;
pub(crate) mod avx512_u32;
pub(crate) mod avx512_u64;
pub(crate) mod ifma;
pub(crate) mod scalar;
mod shoup32;
mod shoup64;
pub(crate) mod skeleton;

use crate::backend::{Backend, BackendChoice};
use crate::error::{check_len, MathError, Result};
use crate::modulus::Modulus;
use crate::primes;
use crate::word::Word;

pub use crate::buffer::AlignedVec;

/// Smallest supported log2(N).
pub const MIN_LOG_N: u32 = 4;
/// Largest supported log2(N).
pub const MAX_LOG_N: u32 = 17;

/// Bit-reverses the low `bits` bits of `x`.
#[inline]
pub fn bit_reverse(x: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

/// The backend-independent precomputation: roots in bit-reversed order with Shoup companions.
#[derive(Debug)]
pub struct NttCore<W: Word> {
    pub(crate) n: usize,
    pub(crate) log_n: u32,
    pub(crate) modulus: Modulus<W>,
    pub(crate) psi: W,
    /// `roots[k] = psi^bitrev(k)`, k in [0, N); forward layer with m groups uses `roots[m..2m]`.
    pub(crate) roots: AlignedVec<W>,
    /// Shoup companions of `roots`.
    pub(crate) roots_shoup: AlignedVec<W>,
    /// `inv_roots[k] = psi^-bitrev(k)`; inverse layer with h groups uses `inv_roots[h..2h]`.
    pub(crate) inv_roots: AlignedVec<W>,
    /// Shoup companions of `inv_roots`.
    pub(crate) inv_roots_shoup: AlignedVec<W>,
    /// `N^-1 mod q` and its Shoup companion (last inverse layer, sum branch).
    pub(crate) n_inv: (W, W),
    /// `N^-1 * psi^-bitrev(1) mod q` and its Shoup companion (last inverse layer, difference branch).
    pub(crate) n_inv_w: (W, W),
    /// Whether lazy values up to 4q fit the word (Harvey's ranges); otherwise kernels keep
    /// values below 2q (31-bit primes in 32-bit words).
    pub(crate) lazy4: bool,
}

impl<W: Word> NttCore<W> {
    fn new(n: usize, q: u64) -> Result<Self> {
        let log_n = primes::check_degree(n, MIN_LOG_N, MAX_LOG_N)?;
        let modulus = Modulus::<W>::new(q)?;
        primes::check_ntt_prime(q, n)?;
        let psi = W::from_u64(primes::min_primitive_root(q, n)?);
        let psi_inv = modulus.inv(psi)?;
        let mut roots = AlignedVec::with_capacity(n);
        let mut inv_roots = AlignedVec::with_capacity(n);
        // Powers in natural order first, then permuted.
        let mut pow = vec![W::ZERO; n];
        let mut ipow = vec![W::ZERO; n];
        let (mut p, mut ip) = (modulus.reduce(W::ONE), modulus.reduce(W::ONE));
        for k in 0..n {
            pow[k] = p;
            ipow[k] = ip;
            p = modulus.mul(p, psi);
            ip = modulus.mul(ip, psi_inv);
        }
        for k in 0..n {
            roots.push(pow[bit_reverse(k, log_n)]);
            inv_roots.push(ipow[bit_reverse(k, log_n)]);
        }
        let shoup_of = |v: &AlignedVec<W>| -> AlignedVec<W> {
            let mut s = AlignedVec::with_capacity(v.len());
            for &x in v.iter() {
                s.push(modulus.shoup(x));
            }
            s
        };
        let roots_shoup = shoup_of(&roots);
        let inv_roots_shoup = shoup_of(&inv_roots);
        let n_inv = modulus.inv(modulus.reduce_u64(n as u64))?;
        let n_inv_w = modulus.mul(n_inv, inv_roots[1]);
        Ok(Self {
            n,
            log_n,
            modulus,
            psi,
            roots,
            roots_shoup,
            inv_roots,
            inv_roots_shoup,
            n_inv: (n_inv, modulus.shoup(n_inv)),
            n_inv_w: (n_inv_w, modulus.shoup(n_inv_w)),
            lazy4: modulus.bits() + 2 <= W::BITS,
        })
    }

    /// Ring degree N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// log2(N).
    pub fn log_n(&self) -> u32 {
        self.log_n
    }

    /// The modulus.
    pub fn modulus(&self) -> &Modulus<W> {
        &self.modulus
    }

    /// Whether lazy values up to 4q fit the word (else kernels keep them below 2q).
    pub fn lazy4(&self) -> bool {
        self.lazy4
    }

    /// Shoup companions of [`Self::roots`].
    pub fn roots_shoup(&self) -> &[W] {
        &self.roots_shoup
    }

    /// Shoup companions of [`Self::inv_roots`].
    pub fn inv_roots_shoup(&self) -> &[W] {
        &self.inv_roots_shoup
    }

    /// `(N^-1 mod q, Shoup companion)`.
    pub fn n_inv(&self) -> (W, W) {
        self.n_inv
    }

    /// `(N^-1 * psi^-bitrev(1) mod q, Shoup companion)`: the last inverse layer's difference factor.
    pub fn n_inv_w(&self) -> (W, W) {
        self.n_inv_w
    }

    /// The primitive 2N-th root of unity used.
    pub fn psi(&self) -> W {
        self.psi
    }

    /// `psi^bitrev(k)` for `k` in `[0, N)`.
    pub fn roots(&self) -> &[W] {
        &self.roots
    }

    /// `psi^-bitrev(k)` for `k` in `[0, N)`.
    pub fn inv_roots(&self) -> &[W] {
        &self.inv_roots
    }
}

/// A ready-to-run negacyclic NTT for one prime and one ring degree, bound to one backend.
#[derive(Debug)]
pub struct NttTable<W: Word> {
    core: NttCore<W>,
    backend: Backend,
    accel: W::NttAccel,
}

impl<W: Word> NttTable<W> {
    /// Builds the table for ring degree `n` and NTT-friendly prime `q` on the fastest backend.
    pub fn new(n: usize, q: u64) -> Result<Self> {
        Self::with_backend(n, q, BackendChoice::Auto)
    }

    /// Builds the table on a chosen or forced backend.
    ///
    /// Errors: `n` not a power of two in `[2^4, 2^17]`; `q` not prime, not `1 mod 2N`, or too
    /// large for the word or backend; a forced backend this CPU lacks.
    pub fn with_backend(n: usize, q: u64, choice: BackendChoice) -> Result<Self> {
        let core = NttCore::<W>::new(n, q)?;
        let backend = choice
            .resolve(W::BITS, core.modulus.bits())
            .map_err(|e| match e {
                MathError::ModulusTooLarge {
                    bits,
                    max_bits,
                    what,
                    ..
                } => MathError::ModulusTooLarge {
                    q,
                    bits,
                    max_bits,
                    what,
                },
                e => e,
            })?;
        let accel = W::ntt_accel(&core, backend);
        Ok(Self {
            core,
            backend,
            accel,
        })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Ring degree N.
    pub fn n(&self) -> usize {
        self.core.n
    }

    /// The modulus.
    pub fn modulus(&self) -> &Modulus<W> {
        &self.core.modulus
    }

    /// The backend-independent precomputation.
    pub fn core(&self) -> &NttCore<W> {
        &self.core
    }

    fn check_len(&self, a: &[W]) -> Result<()> {
        check_len("NTT input", self.core.n, a.len())
    }

    /// Forward NTT in place. Input coefficients must be reduced (`[0, q)`); output reduced, in
    /// bit-reversed evaluation order.
    pub fn forward(&self, a: &mut [W]) -> Result<()> {
        self.check_len(a)?;
        W::ntt_forward(&self.core, &self.accel, a);
        Ok(())
    }

    /// Inverse NTT in place (includes the `N^-1` scaling). Input reduced, output reduced.
    pub fn inverse(&self, a: &mut [W]) -> Result<()> {
        self.check_len(a)?;
        W::ntt_inverse(&self.core, &self.accel, a);
        Ok(())
    }

    /// Like [`Self::forward`] but first checks every input is reduced.
    pub fn forward_checked(&self, a: &mut [W]) -> Result<()> {
        self.check_len(a)?;
        check_reduced(a, &self.core.modulus)?;
        self.forward(a)
    }

    /// Like [`Self::inverse`] but first checks every input is reduced.
    pub fn inverse_checked(&self, a: &mut [W]) -> Result<()> {
        self.check_len(a)?;
        check_reduced(a, &self.core.modulus)?;
        self.inverse(a)
    }
}

/// Errors with the first value not in `[0, q)`.
pub fn check_reduced<W: Word>(a: &[W], m: &Modulus<W>) -> Result<()> {
    let q = m.q();
    match a.iter().position(|&x| x >= q) {
        None => Ok(()),
        Some(index) => Err(MathError::ValueOutOfRange {
            value: a[index].to_u64(),
            index,
            q: m.value(),
        }),
    }
}
