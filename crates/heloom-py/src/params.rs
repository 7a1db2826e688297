//! `heloom.CkksParameters`.

use crate::errors::{to_py, ParameterError};
use heloom_ckks::{CkksParameters, SecretDistribution, SecurityLevel};
use pyo3::prelude::*;

/// A validated CKKS parameter set: ring degree, modulus chain, special primes for hybrid key
/// switching, word size, checked against the Homomorphic Encryption Standard's security table.
///
/// Only ``poly_degree`` is required. ``levels`` is the number of rescalings available (the chain
/// has ``levels + 1`` primes), ``scale_bits`` the default scale ``2**scale_bits`` (default 40 for
/// 64-bit words, 28 for 32-bit words), ``word_bits`` 32 or 64. Keyword-only: ``first_bits``
/// (size of ``q_0``), ``prime_bits`` (explicit prime sizes ``[q_0, q_1, ...]``, overriding
/// ``levels`` and ``first_bits``), ``special_bits``, ``special_count`` and ``dnum`` (hybrid key
/// switching), ``hamming_weight`` (fixed-weight secret), ``security`` (128, 192, 256, or None
/// to opt out explicitly).
///
/// Raises ParameterError for invalid or insecure parameters.
#[pyclass(name = "CkksParameters", module = "heloom", frozen, eq)]
#[derive(Clone, Debug, PartialEq)]
pub struct PyCkksParameters {
    pub(crate) p: CkksParameters,
}

fn count(name: &str, v: i64) -> PyResult<usize> {
    usize::try_from(v).map_err(|_| ParameterError::new_err(format!("{name} must be >= 0, got {v}")))
}

fn bits(name: &str, v: i64) -> PyResult<u32> {
    u32::try_from(v)
        .map_err(|_| ParameterError::new_err(format!("{name} must be a bit size >= 0, got {v}")))
}

#[pymethods]
impl PyCkksParameters {
    #[new]
    #[pyo3(signature = (
        poly_degree,
        levels = 3,
        scale_bits = None,
        word_bits = 64,
        *,
        first_bits = None,
        prime_bits = None,
        special_bits = None,
        special_count = None,
        dnum = None,
        hamming_weight = None,
        security = Some(128),
    ))]
    #[pyo3(
        text_signature = "(poly_degree, levels=3, scale_bits=None, word_bits=64, *, \
        first_bits=None, prime_bits=None, special_bits=None, special_count=None, dnum=None, \
        hamming_weight=None, security=128)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        poly_degree: i64,
        levels: i64,
        scale_bits: Option<i64>,
        word_bits: i64,
        first_bits: Option<i64>,
        prime_bits: Option<Vec<i64>>,
        special_bits: Option<i64>,
        special_count: Option<i64>,
        dnum: Option<i64>,
        hamming_weight: Option<i64>,
        security: Option<i64>,
    ) -> PyResult<Self> {
        let n = count("poly_degree", poly_degree)?;
        let mut b = CkksParameters::builder(n)
            .word_bits(bits("word_bits", word_bits)?)
            .levels(count("levels", levels)?);
        if let Some(s) = scale_bits {
            b = b.scale_bits(bits("scale_bits", s)?);
        }
        if let Some(f) = first_bits {
            b = b.first_bits(bits("first_bits", f)?);
        }
        if let Some(v) = prime_bits {
            let v = v
                .into_iter()
                .map(|x| bits("prime_bits", x))
                .collect::<PyResult<Vec<u32>>>()?;
            b = b.prime_bits(v);
        }
        if let Some(s) = special_bits {
            b = b.special_bits(bits("special_bits", s)?);
        }
        if let Some(c) = special_count {
            b = b.special_count(count("special_count", c)?);
        }
        if let Some(d) = dnum {
            b = b.dnum(count("dnum", d)?);
        }
        if let Some(h) = hamming_weight {
            b = b.secret(SecretDistribution::FixedHamming(count(
                "hamming_weight",
                h,
            )?));
        }
        let level = match security {
            None => SecurityLevel::None,
            Some(s) => u32::try_from(s)
                .ok()
                .filter(|&s| s != 0)
                .and_then(SecurityLevel::from_bits)
                .ok_or_else(|| {
                    ParameterError::new_err(format!(
                        "security must be 128, 192, 256, or None to opt out explicitly; got {s}"
                    ))
                })?,
        };
        b = b.security(level);
        let p = py.detach(|| b.build()).map_err(to_py)?;
        Ok(Self { p })
    }

    /// The 128-bit bootstrappable preset for N = 2^log_n with a dense ternary secret
    /// (``heloom.Bootstrapper``): 16 leaves 9 levels of scale 2^45 (27.5 bits worst, 29.4
    /// mean); 15 leaves 1 (22.1 bits worst, 24.0 mean); smaller rings are refused.
    #[staticmethod]
    #[pyo3(signature = (log_n = 16))]
    fn bootstrappable(log_n: u32) -> PyResult<Self> {
        let p = heloom_ckks::circuits::bootstrap::preset(log_n).map_err(to_py)?;
        Ok(Self { p: p.params })
    }

    /// Ring degree N (a power of two).
    #[getter]
    fn poly_degree(&self) -> usize {
        self.p.n()
    }

    /// Slots of a fully packed ciphertext (N/2).
    #[getter]
    fn slots(&self) -> usize {
        self.p.slots()
    }

    /// Levels: rescalings available to a fresh ciphertext (number of primes minus one).
    #[getter]
    fn levels(&self) -> usize {
        self.p.max_level()
    }

    /// Default scale of fresh encodings and encryptions.
    #[getter]
    fn scale(&self) -> f64 {
        self.p.scale()
    }

    /// log2 of the default scale.
    #[getter]
    fn scale_bits(&self) -> f64 {
        self.p.scale().log2()
    }

    /// log2 of the ciphertext modulus Q at the top level.
    #[getter]
    fn log_q(&self) -> f64 {
        self.p.log_q()
    }

    /// log2 of the key-switching modulus Q*P (what the security table bounds).
    #[getter]
    fn log_qp(&self) -> f64 {
        self.p.log_qp()
    }

    /// Word size in bits: 32 or 64.
    #[getter]
    fn word_bits(&self) -> u32 {
        self.p.word_bits()
    }

    /// Decomposition number (digits) of hybrid key switching.
    #[getter]
    fn dnum(&self) -> usize {
        self.p.dnum()
    }

    /// Primes per key-switching digit (= number of special primes).
    #[getter]
    fn alpha(&self) -> usize {
        self.p.alpha()
    }

    /// Requested security in bits (128, 192, 256), or None when opted out.
    #[getter]
    fn security(&self) -> Option<u32> {
        match self.p.security() {
            SecurityLevel::None => None,
            s => Some(s.bits()),
        }
    }

    /// Security the parameters meet by the HE standard's table (128, 192, 256), or None when
    /// below 128 bits.
    #[getter]
    fn estimated_security(&self) -> Option<u32> {
        self.p.estimated_security()
    }

    /// Ciphertext primes ``[q_0, ..., q_L]``.
    #[getter]
    fn moduli(&self) -> Vec<u64> {
        self.p.moduli().to_vec()
    }

    /// Special primes ``[p_0, ...]`` of key switching.
    #[getter]
    fn special_moduli(&self) -> Vec<u64> {
        self.p.special_moduli().to_vec()
    }

    /// Nonzero coefficients of a fixed-weight secret, or None for the uniform ternary secret.
    #[getter]
    fn hamming_weight(&self) -> Option<usize> {
        match self.p.secret_distribution() {
            SecretDistribution::Ternary => None,
            SecretDistribution::FixedHamming(h) => Some(h),
        }
    }

    /// Standard deviation of the error distribution.
    #[getter]
    fn sigma(&self) -> f64 {
        self.p.sigma()
    }

    /// The SIMD backend a ``Context`` picks for these parameters on this CPU (the fastest that
    /// runs their primes); ``Context(params, backend=...)`` chooses another and
    /// ``Context.backend`` says which one runs.
    #[getter]
    fn backend(&self) -> String {
        self.p.auto_backend().to_string()
    }

    /// Fingerprint of (N, word size, primes, dnum): objects made for different fingerprints are
    /// never combined.
    #[getter]
    fn fingerprint(&self) -> u64 {
        self.p.fingerprint()
    }

    /// A multi-line human-readable summary (the same as ``str(params)``).
    fn summary(&self) -> String {
        self.p.to_string()
    }

    fn __str__(&self) -> String {
        self.p.to_string()
    }

    fn __repr__(&self) -> String {
        let sec = match self.security() {
            Some(b) => b.to_string(),
            None => "None".into(),
        };
        format!(
            "CkksParameters(poly_degree={}, levels={}, scale_bits={}, word_bits={}, dnum={}, security={sec})",
            self.p.n(),
            self.p.max_level(),
            fmt_bits(self.p.scale().log2()),
            self.p.word_bits(),
            self.p.dnum(),
        )
    }

    fn __hash__(&self) -> u64 {
        self.p.fingerprint()
    }

    /// The parameter set in heloom's binary format (the primes themselves, so a server rebuilds
    /// exactly the client's context).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.p.to_bytes())
    }

    /// Loads a parameter set; the primes and the security level are checked again. Bad bytes
    /// raise FormatError, insecure or invalid parameters ParameterError.
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<PyCkksParameters> {
        Ok(PyCkksParameters {
            p: CkksParameters::from_bytes(data).map_err(to_py)?,
        })
    }
}

fn fmt_bits(b: f64) -> String {
    if b.fract() == 0.0 {
        format!("{b:.0}")
    } else {
        format!("{b:.2}")
    }
}
