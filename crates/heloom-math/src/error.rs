//! Typed errors of the arithmetic layer.

use crate::backend::Backend;

/// Everything that can go wrong when building or using arithmetic objects.
///
/// Each message names the problem and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MathError {
    /// The ring degree is not a power of two in the supported range.
    #[error("ring degree N = {n} is not supported: N must be a power of two from 2^{min_log} to 2^{max_log}")]
    InvalidDegree {
        /// The degree that was asked for.
        n: usize,
        /// Smallest supported log2(N).
        min_log: u32,
        /// Largest supported log2(N).
        max_log: u32,
    },
    /// The modulus is not prime.
    #[error("modulus q = {q} is not prime: NTT moduli must be primes (use primes::ntt_primes to generate them)")]
    NotPrime {
        /// The offending modulus.
        q: u64,
    },
    /// The modulus is prime but not congruent to 1 mod 2N.
    #[error(
        "prime q = {q} is not NTT-friendly for N = {n}: it must satisfy q = 1 mod 2N = {two_n}"
    )]
    NotNttFriendly {
        /// The offending modulus.
        q: u64,
        /// Ring degree.
        n: usize,
        /// 2N.
        two_n: u64,
    },
    /// The modulus is too large for the word size or the backend.
    #[error("modulus q = {q} has {bits} bits, more than the {max_bits} bits that {what} supports; choose a smaller prime or another word size/backend")]
    ModulusTooLarge {
        /// The offending modulus.
        q: u64,
        /// Its bit length.
        bits: u32,
        /// Largest allowed bit length.
        max_bits: u32,
        /// Which word size or backend imposes the limit.
        what: String,
    },
    /// A modulus below 2 (or too small to be useful) was given.
    #[error("modulus q = {q} is too small: moduli must be primes of at least 2 bits")]
    ModulusTooSmall {
        /// The offending modulus.
        q: u64,
    },
    /// A requested prime size is outside what the word size supports.
    #[error("prime size of {bits} bits is not supported for {word_bits}-bit words: choose between {min_bits} and {max_bits} bits")]
    InvalidPrimeBits {
        /// Requested bit size.
        bits: u32,
        /// Word size in bits.
        word_bits: u32,
        /// Smallest allowed size.
        min_bits: u32,
        /// Largest allowed size.
        max_bits: u32,
    },
    /// Not enough NTT-friendly primes of the requested size exist.
    #[error("only {found} NTT-friendly primes of {bits} bits exist for N = {n}, but {count} were requested; use more bits or a smaller N")]
    NotEnoughPrimes {
        /// Requested bit size.
        bits: u32,
        /// Ring degree.
        n: usize,
        /// Requested count.
        count: usize,
        /// How many were found.
        found: usize,
    },
    /// The backend cannot run on this CPU.
    #[error("backend {backend} is not available on this CPU (missing {missing}); use Backend::available() to see what this machine supports, or let heloom choose")]
    BackendUnavailable {
        /// Requested backend.
        backend: Backend,
        /// The CPU features it lacks.
        missing: &'static str,
    },
    /// The backend does not apply to this word size.
    #[error("backend {backend} does not support {word_bits}-bit words{hint}")]
    BackendUnsupported {
        /// Requested backend.
        backend: Backend,
        /// Word size in bits.
        word_bits: u32,
        /// A hint what to use instead.
        hint: &'static str,
    },
    /// An unknown backend name was given.
    #[error("unknown backend '{name}': expected one of scalar, avx2, avx512, avx512-ifma, auto")]
    UnknownBackend {
        /// The name given.
        name: String,
    },
    /// A slice had the wrong length.
    #[error("length mismatch in {what}: expected {expected} words, got {got}")]
    LengthMismatch {
        /// What was being checked.
        what: &'static str,
        /// Expected length.
        expected: usize,
        /// Actual length.
        got: usize,
    },
    /// A coefficient is not reduced modulo its prime.
    #[error("coefficient {value} at index {index} is not reduced modulo q = {q}: values must lie in [0, q)")]
    ValueOutOfRange {
        /// The offending value.
        value: u64,
        /// Its position.
        index: usize,
        /// The modulus.
        q: u64,
    },
    /// Two RNS polynomials or a polynomial and a basis do not match.
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    /// A polynomial is in the wrong representation (coefficient vs NTT form).
    #[error("representation mismatch: {op} needs {expected} form, got {got} form")]
    FormMismatch {
        /// The operation.
        op: &'static str,
        /// Expected representation.
        expected: &'static str,
        /// Actual representation.
        got: &'static str,
    },
    /// An element has no inverse modulo q.
    #[error("{value} has no inverse modulo {q}")]
    NotInvertible {
        /// The value.
        value: u64,
        /// The modulus.
        q: u64,
    },
    /// A scalar operand is not reduced modulo q where a kernel requires it.
    #[error("scalar {value} is not reduced modulo q = {q}: it must lie in [0, q)")]
    ScalarNotReduced {
        /// The scalar.
        value: u64,
        /// The modulus.
        q: u64,
    },
    /// Two sets of RNS primes that must be disjoint share a prime, or a set repeats one.
    #[error("prime {q} appears twice in {what}; the primes of a base conversion must be distinct and the two bases disjoint")]
    DuplicatePrime {
        /// The repeated prime.
        q: u64,
        /// Where it was found.
        what: &'static str,
    },
    /// A Galois element is not an odd number below 2N.
    #[error(
        "Galois element g = {g} is invalid for N = {n}: it must be odd and below 2N = {two_n}"
    )]
    InvalidGaloisElement {
        /// The element.
        g: u64,
        /// Ring degree.
        n: usize,
        /// 2N.
        two_n: u64,
    },
    /// A sparse ternary secret was asked for with an impossible Hamming weight.
    #[error(
        "Hamming weight h = {h} is invalid for {n} coefficients: it must satisfy 1 <= h <= {n}"
    )]
    InvalidHammingWeight {
        /// Requested number of nonzero coefficients.
        h: usize,
        /// Number of coefficients.
        n: usize,
    },
    /// A Gaussian width is not a finite positive number in the supported range.
    #[error("Gaussian sigma = {sigma} is not supported: it must be finite and in (0, {max}]")]
    InvalidSigma {
        /// The width asked for, formatted (floats are not `Eq`).
        sigma: String,
        /// Largest supported width.
        max: u32,
    },
}

/// Result alias of the arithmetic layer.
pub type Result<T> = std::result::Result<T, MathError>;

/// [`MathError::LengthMismatch`] unless `got == expected`.
pub(crate) fn check_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
    if expected != got {
        return Err(MathError::LengthMismatch {
            what,
            expected,
            got,
        });
    }
    Ok(())
}
