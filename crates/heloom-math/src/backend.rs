//! SIMD backends and run-time CPU feature dispatch.
//!
//! One binary runs everywhere: the best backend the CPU supports is picked when an NTT table or
//! RNS basis is built, and can be forced (tests, benchmarks) with [`Backend`] or the
//! `HELOOM_BACKEND` environment variable.

use std::fmt;
use std::str::FromStr;

use crate::error::{MathError, Result};

/// A family of kernels. The word size (32 or 64 bits) is a separate choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// Portable Rust, the reference every other backend is tested against.
    Scalar,
    /// AVX2: 4 lanes of 64-bit words or 8 lanes of 32-bit words.
    Avx2,
    /// AVX-512F/DQ: 8 lanes of 64-bit words or 16 lanes of 32-bit words.
    Avx512,
    /// AVX-512 IFMA: 52-bit multiply-add on 8 lanes; 64-bit words with primes below 2^50.
    Avx512Ifma,
}

impl Backend {
    /// All backends, slowest first.
    pub const ALL: [Backend; 4] = [
        Backend::Scalar,
        Backend::Avx2,
        Backend::Avx512,
        Backend::Avx512Ifma,
    ];

    /// Short name used in reports, JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Scalar => "scalar",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
            Backend::Avx512Ifma => "avx512-ifma",
        }
    }

    /// Whether this CPU can run the backend.
    pub fn is_available(self) -> bool {
        self.missing_features().is_none()
    }

    /// The CPU features this backend needs but the CPU lacks, if any.
    pub fn missing_features(self) -> Option<&'static str> {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Backend::Scalar => None,
                Backend::Avx2 => (!is_x86_feature_detected!("avx2")).then_some("avx2"),
                Backend::Avx512 => (!(is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512dq")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")))
                .then_some("avx512f/dq/bw/vl"),
                Backend::Avx512Ifma => (!(is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512dq")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx512ifma")))
                .then_some("avx512ifma"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            match self {
                Backend::Scalar => None,
                Backend::Avx2 => Some("x86-64 with avx2"),
                Backend::Avx512 => Some("x86-64 with avx512f/dq/bw/vl"),
                Backend::Avx512Ifma => Some("x86-64 with avx512ifma"),
            }
        }
    }

    /// Backends this CPU can run, slowest first.
    pub fn available() -> Vec<Backend> {
        Self::ALL.into_iter().filter(|b| b.is_available()).collect()
    }

    /// Errors unless this backend can run here on `word_bits`-bit words with primes of
    /// `prime_bits` bits.
    pub fn check(self, word_bits: u32, prime_bits: u32) -> Result<()> {
        if let Some(missing) = self.missing_features() {
            return Err(MathError::BackendUnavailable {
                backend: self,
                missing,
            });
        }
        if self == Backend::Avx512Ifma {
            if word_bits != 64 {
                return Err(MathError::BackendUnsupported {
                    backend: self,
                    word_bits,
                    hint: ": IFMA multiplies 52-bit limbs of 64-bit words; use avx512 for 32-bit words",
                });
            }
            if prime_bits > IFMA_MAX_PRIME_BITS {
                return Err(MathError::ModulusTooLarge {
                    q: 0,
                    bits: prime_bits,
                    max_bits: IFMA_MAX_PRIME_BITS,
                    what: "the avx512-ifma backend (52-bit multipliers, 4q < 2^52)".into(),
                });
            }
        }
        Ok(())
    }

    /// The fastest available backend for the word and prime size (honouring `HELOOM_BACKEND`
    /// when it names a backend that can run).
    pub fn best(word_bits: u32, prime_bits: u32) -> Result<Backend> {
        if let Ok(name) = std::env::var("HELOOM_BACKEND") {
            match name.parse::<BackendChoice>()? {
                BackendChoice::Auto => {}
                BackendChoice::Force(b) => {
                    b.check(word_bits, prime_bits)?;
                    return Ok(b);
                }
            }
        }
        Ok(Self::ALL
            .into_iter()
            .rev()
            .find(|b| b.check(word_bits, prime_bits).is_ok())
            .unwrap_or(Backend::Scalar))
    }

    /// SIMD lanes per vector for a word size (1 for scalar).
    pub fn lanes(self, word_bits: u32) -> usize {
        match self {
            Backend::Scalar => 1,
            Backend::Avx2 => 256 / word_bits as usize,
            Backend::Avx512 | Backend::Avx512Ifma => 512 / word_bits as usize,
        }
    }
}

/// Largest prime size for the IFMA backend: lazy values up to 4q must fit in 52 bits.
pub const IFMA_MAX_PRIME_BITS: u32 = 50;

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend request: automatic (best available) or forced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// Pick the fastest backend that can run.
    #[default]
    Auto,
    /// Use exactly this backend, or fail.
    Force(Backend),
}

impl BackendChoice {
    /// Resolves the request for a word and prime size.
    pub fn resolve(self, word_bits: u32, prime_bits: u32) -> Result<Backend> {
        match self {
            BackendChoice::Auto => Backend::best(word_bits, prime_bits),
            BackendChoice::Force(b) => {
                b.check(word_bits, prime_bits)?;
                Ok(b)
            }
        }
    }
}

impl FromStr for BackendChoice {
    type Err = MathError;
    fn from_str(s: &str) -> Result<Self> {
        if s.eq_ignore_ascii_case("auto") || s.is_empty() {
            return Ok(BackendChoice::Auto);
        }
        Ok(BackendChoice::Force(s.parse()?))
    }
}

impl FromStr for Backend {
    type Err = MathError;
    fn from_str(s: &str) -> Result<Self> {
        let l = s.to_ascii_lowercase().replace('_', "-");
        match l.as_str() {
            "scalar" => Ok(Backend::Scalar),
            "avx2" => Ok(Backend::Avx2),
            "avx512" | "avx512dq" | "avx-512" => Ok(Backend::Avx512),
            "avx512-ifma" | "ifma" | "avx512ifma" => Ok(Backend::Avx512Ifma),
            _ => Err(MathError::UnknownBackend {
                name: s.to_string(),
            }),
        }
    }
}

/// A one-line report of the CPU and the backends it supports.
pub fn cpu_report() -> String {
    let avail: Vec<&str> = Backend::available().iter().map(|b| b.name()).collect();
    format!(
        "cpu: {}; backends available: {}; best 64-bit (<=50-bit primes): {}; best 64-bit (61-bit primes): {}; best 32-bit: {}",
        cpu_model(),
        avail.join(", "),
        Backend::best(64, 50).map(|b| b.name()).unwrap_or("?"),
        Backend::best(64, 61).map(|b| b.name()).unwrap_or("?"),
        Backend::best(32, 31).map(|b| b.name()).unwrap_or("?"),
    )
}

/// The CPU model string (from /proc/cpuinfo on Linux), or "unknown".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}
