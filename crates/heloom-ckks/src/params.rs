//! CKKS parameters: ring degree, modulus chain, special primes for hybrid key switching, word
//! size, and the security check against the Homomorphic Encryption Standard's table.

use crate::error::{CkksError, Result};
use crate::security::{self, SecurityLevel};
use heloom_math::primes;
use heloom_math::BackendChoice;
use std::collections::HashSet;
use std::fmt;

/// Smallest ring degree accepted (`2^10`).
pub const MIN_LOG_N: u32 = 10;
/// Largest ring degree accepted (`2^17`).
pub const MAX_LOG_N: u32 = 17;

/// How the secret key is sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecretDistribution {
    /// Uniform over `{-1, 0, 1}` (the HE standard's ternary secret).
    Ternary,
    /// Exactly `h` nonzero coefficients, each `±1`.
    FixedHamming(usize),
}

/// A validated CKKS parameter set. Build it with [`CkksParameters::new`] or
/// [`CkksParameters::builder`].
#[derive(Clone, Debug, PartialEq)]
pub struct CkksParameters {
    n: usize,
    word_bits: u32,
    moduli: Vec<u64>,
    special: Vec<u64>,
    dnum: usize,
    scale: f64,
    security: SecurityLevel,
    secret: SecretDistribution,
    sigma: f64,
    fingerprint: u64,
}

/// Builder for [`CkksParameters`]: only the ring degree is required.
#[derive(Clone, Debug)]
pub struct ParametersBuilder {
    n: usize,
    levels: usize,
    scale_bits: u32,
    first_bits: Option<u32>,
    prime_bits: Option<Vec<u32>>,
    special_bits: Option<u32>,
    special_count: Option<usize>,
    dnum: Option<usize>,
    word_bits: u32,
    security: SecurityLevel,
    secret: SecretDistribution,
}

/// Builder methods that store their argument in the field of their name: `name: Type;` as
/// is, `name: Type => Some;` wrapped.
macro_rules! setters {
    ($($(#[doc = $doc:literal])* $name:ident: $ty:ty $(=> $wrap:path)?;)*) => {$(
        $(#[doc = $doc])*
        pub fn $name(mut self, value: $ty) -> Self {
            self.$name = $($wrap)?(value);
            self
        }
    )*};
}

impl ParametersBuilder {
    setters! {
        /// Number of rescalings available (the chain has `levels + 1` primes). Default 3.
        levels: usize;
        /// Default scale `2^scale_bits`; the scaling primes are chosen close to it. Default 40
        /// for 64-bit words, 28 for 32-bit words.
        scale_bits: u32;
        /// Size of the first prime `q_0` (it holds the final result). Default
        /// `scale_bits + 10`, capped at the word's limit.
        first_bits: u32 => Some;
        /// Explicit prime sizes `[q_0, q_1, ..]`; overrides `levels` and `first_bits`.
        prime_bits: Vec<u32> => Some;
        /// Size of each special prime. Default: the largest prime size of the chain.
        special_bits: u32 => Some;
        /// Number of special primes (fixes the decomposition number). Default: chosen for
        /// speed.
        special_count: usize => Some;
        /// Decomposition number for hybrid key switching. Default: the fastest secure choice.
        dnum: usize => Some;
        /// Security level; [`SecurityLevel::None`] is the explicit opt-out. Default 128 bits.
        security: SecurityLevel;
        /// Secret-key distribution. Default uniform ternary.
        secret: SecretDistribution;
    }
    /// Word size, 32 or 64 bits. Default 64.
    pub fn word_bits(mut self, bits: u32) -> Self {
        if bits == 32 && self.scale_bits == 40 {
            self.scale_bits = 28;
        }
        self.word_bits = bits;
        self
    }

    /// Validates everything, generates the primes and checks security.
    pub fn build(self) -> Result<CkksParameters> {
        CkksParameters::from_builder(self)
    }
}

/// Largest prime size usable for a word size.
fn max_prime_bits(word_bits: u32) -> u32 {
    if word_bits == 32 {
        <u32 as heloom_math::Word>::MAX_PRIME_BITS
    } else {
        <u64 as heloom_math::Word>::MAX_PRIME_BITS
    }
}

/// The checks every parameter set starts with: a supported ring degree and word size.
fn check_ring(n: usize, word_bits: u32) -> Result<()> {
    if !n.is_power_of_two() || !((1 << MIN_LOG_N)..=(1 << MAX_LOG_N)).contains(&n) {
        return Err(CkksError::InvalidParameters(format!(
            "poly_degree must be a power of two from 2^{MIN_LOG_N} to 2^{MAX_LOG_N}, got {n}"
        )));
    }
    if word_bits != 32 && word_bits != 64 {
        return Err(CkksError::InvalidParameters(format!(
            "word_bits must be 32 or 64, got {word_bits}"
        )));
    }
    Ok(())
}

/// `count` distinct NTT primes as close as possible to `2^bits`, alternating above and below so
/// that the scale stays near `2^bits` across rescalings (Lattigo's choice for scaling primes).
fn primes_near(
    bits: u32,
    n: usize,
    count: usize,
    max_bits: u32,
    used: &mut HashSet<u64>,
) -> Result<Vec<u64>> {
    let two_n = 2 * n as u64;
    let center = 1u64 << bits;
    let top = if max_bits >= 64 {
        u64::MAX
    } else {
        1u64 << max_bits
    };
    let mut out = Vec::with_capacity(count);
    let mut up = center + 1;
    let mut down = center + 1 - two_n;
    let lower = 1u64 << (bits - 1);
    let mut take_up = true;
    let mut up_done = false;
    let mut down_done = false;
    while out.len() < count && !(up_done && down_done) {
        let (cand, side_up) = if (take_up && !up_done) || down_done {
            (up, true)
        } else {
            (down, false)
        };
        if side_up {
            if up >= top {
                up_done = true;
                continue;
            }
            up += two_n;
        } else {
            if down <= lower {
                down_done = true;
                continue;
            }
            down -= two_n;
        }
        if primes::is_prime(cand) && used.insert(cand) {
            out.push(cand);
            take_up = !side_up;
        }
    }
    if out.len() < count {
        return Err(CkksError::InvalidParameters(format!(
            "only {} NTT-friendly primes near 2^{bits} exist for N = {n} (needed {count}); use fewer levels or a different scale",
            out.len()
        )));
    }
    Ok(out)
}

/// `count` distinct NTT primes of exactly `bits` bits, largest first, not in `used`.
fn primes_of_bits(
    word_bits: u32,
    bits: u32,
    n: usize,
    count: usize,
    used: &mut HashSet<u64>,
) -> Result<Vec<u64>> {
    let want = count + used.len();
    let cands = if word_bits == 32 {
        primes::ntt_primes::<u32>(bits, n, want)
    } else {
        primes::ntt_primes::<u64>(bits, n, want)
    };
    let cands = match cands {
        Ok(c) => c,
        Err(_) => {
            // Fewer exist than `want`; take what there is and count below.
            let mut all = Vec::new();
            let two_n = 2 * n as u64;
            let mut c = (1u64 << bits) - two_n + 1;
            while c > (1u64 << (bits - 1)) && all.len() < want {
                if primes::is_prime(c) {
                    all.push(c);
                }
                c -= two_n;
            }
            all
        }
    };
    let out: Vec<u64> = cands
        .into_iter()
        .filter(|q| !used.contains(q))
        .take(count)
        .collect();
    if out.len() < count {
        return Err(CkksError::InvalidParameters(format!(
            "only {} unused {bits}-bit NTT-friendly primes exist for N = {n} (needed {count}); use fewer or larger primes",
            out.len()
        )));
    }
    used.extend(&out);
    Ok(out)
}

/// Relative cost of one key switch, in units of one element-wise pass over `N` words (one NTT
/// costs about `log2 N` of them). Hybrid key switching (Han-Ki 2020): mod-up of every digit,
/// inner product with the key, mod-down of two polynomials.
fn key_switch_cost(log_n: u32, limbs: usize, dnum: usize, alpha: usize) -> f64 {
    let ntt = log_n as f64;
    let ext = limbs + alpha;
    let mut cost = limbs as f64 * ntt; // inverse NTT of the input
    let mut left = limbs;
    for _ in 0..dnum {
        let a = alpha.min(left);
        left -= a;
        cost += (ext - a) as f64 * ntt + (a * (ext - a)) as f64;
    }
    cost += (2 * dnum * ext) as f64; // inner product
    cost += 2.0 * (alpha as f64 * ntt + limbs as f64 * ntt + (alpha * limbs) as f64);
    cost
}

impl CkksParameters {
    /// The common case: `levels` rescalings at scale `2^scale_bits`, `word_bits` 32 or 64,
    /// 128-bit security, everything else chosen automatically.
    pub fn new(n: usize, levels: usize, scale_bits: u32, word_bits: u32) -> Result<Self> {
        Self::builder(n)
            .word_bits(word_bits)
            .levels(levels)
            .scale_bits(scale_bits)
            .build()
    }

    /// A builder with defaults (3 levels, scale 2^40 on 64-bit words, 128-bit security).
    pub fn builder(n: usize) -> ParametersBuilder {
        ParametersBuilder {
            n,
            levels: 3,
            scale_bits: 40,
            first_bits: None,
            prime_bits: None,
            special_bits: None,
            special_count: None,
            dnum: None,
            word_bits: 64,
            security: SecurityLevel::Bits128,
            secret: SecretDistribution::Ternary,
        }
    }

    fn from_builder(b: ParametersBuilder) -> Result<Self> {
        let n = b.n;
        check_ring(n, b.word_bits)?;
        let log_n = n.trailing_zeros();
        let wmax = max_prime_bits(b.word_bits);
        let min_bits = log_n + 3;
        let bits: Vec<u32> = match &b.prime_bits {
            Some(v) => {
                if v.is_empty() {
                    return Err(CkksError::InvalidParameters(
                        "prime_bits must list at least one prime size".into(),
                    ));
                }
                v.clone()
            }
            None => {
                let first = b.first_bits.unwrap_or((b.scale_bits + 10).min(wmax));
                std::iter::once(first)
                    .chain(std::iter::repeat_n(b.scale_bits, b.levels))
                    .collect()
            }
        };
        if b.scale_bits < min_bits || b.scale_bits > wmax {
            return Err(CkksError::InvalidParameters(format!(
                "scale_bits = {} is outside [{min_bits}, {wmax}] for N = {n} and {}-bit words{}",
                b.scale_bits,
                b.word_bits,
                if b.word_bits == 32 {
                    "; 32-bit words hold primes of at most 31 bits, so use scale_bits <= 30 or word_bits = 64"
                } else {
                    ""
                }
            )));
        }
        for &q in &bits {
            if q < min_bits || q > wmax {
                return Err(CkksError::InvalidParameters(format!(
                    "prime size {q} bits is outside [{min_bits}, {wmax}] for N = {n} and {}-bit words",
                    b.word_bits
                )));
            }
        }
        let limbs = bits.len();
        let max_q_bits = bits.iter().copied().max().unwrap_or(wmax);
        let special_bits = b.special_bits.unwrap_or(max_q_bits).min(wmax);
        if special_bits < min_bits {
            return Err(CkksError::InvalidParameters(format!(
                "special_bits = {special_bits} is below the minimum {min_bits} for N = {n}"
            )));
        }
        if let SecretDistribution::FixedHamming(h) = b.secret {
            if h == 0 || h > n {
                return Err(CkksError::InvalidParameters(format!(
                    "secret Hamming weight must be in 1..={n}, got {h}"
                )));
            }
            if h < n / 2 && b.security != SecurityLevel::None {
                return Err(CkksError::InvalidParameters(format!(
                    "a sparse secret (Hamming weight {h} < N/2 = {}) is weaker than the HE standard's uniform ternary secret its table assumes; use a weight >= N/2 or opt out with security = none",
                    n / 2
                )));
            }
        }

        // Candidate (dnum, alpha) pairs: fixed by the caller or all of them.
        let candidates: Vec<(usize, usize)> = match (b.dnum, b.special_count) {
            (Some(d), _) if d == 0 || d > limbs => {
                return Err(CkksError::InvalidParameters(format!(
                    "dnum must be in 1..={limbs} (the number of ciphertext primes), got {d}"
                )));
            }
            (_, Some(0)) => {
                return Err(CkksError::InvalidParameters(
                    "special_count must be at least 1".into(),
                ));
            }
            (Some(d), _) => vec![(d, limbs.div_ceil(d))],
            (None, Some(a)) => vec![(limbs.div_ceil(a), a)],
            (None, None) => {
                let mut v: Vec<(usize, usize)> = (1..=limbs)
                    .map(|d| (d, limbs.div_ceil(d)))
                    .filter(|&(d, a)| limbs.div_ceil(a) == d)
                    .collect();
                v.dedup();
                v
            }
        };
        let log_q: f64 = bits.iter().map(|&x| x as f64).sum();
        let max_log_qp = security::max_log_qp(n, b.security);
        let mut best: Option<(usize, usize, f64)> = None;
        let mut smallest_qp = f64::INFINITY;
        for &(d, a) in &candidates {
            let est = log_q + (a as u32 * special_bits) as f64;
            smallest_qp = smallest_qp.min(est);
            if let Some(m) = max_log_qp {
                if est > m as f64 + 0.5 {
                    continue;
                }
            }
            let cost = key_switch_cost(log_n, limbs, d, a);
            if best.is_none_or(|(_, _, c)| cost < c) {
                best = Some((d, a, cost));
            }
        }
        let (dnum, alpha) = match best {
            Some((d, a, _)) => (d, a),
            None => {
                return Err(CkksError::Insecure {
                    n,
                    log_qp: smallest_qp,
                    max_log_qp: max_log_qp.unwrap_or(0),
                    security: b.security.bits(),
                })
            }
        };

        // Primes: q_0 and any explicit sizes take the largest primes of their size; scaling
        // primes (size == scale_bits) sit around 2^scale_bits.
        let mut used = HashSet::new();
        let mut moduli = vec![0u64; limbs];
        let mut scale_idx = Vec::new();
        for (i, &q) in bits.iter().enumerate() {
            if i > 0 && q == b.scale_bits && b.prime_bits.is_none() {
                scale_idx.push(i);
            }
        }
        // Special primes first so that they get the largest primes of their size.
        let special = primes_of_bits(b.word_bits, special_bits, n, alpha, &mut used)?;
        let near = primes_near(b.scale_bits, n, scale_idx.len(), wmax, &mut used)?;
        for (&i, q) in scale_idx.iter().zip(near) {
            moduli[i] = q;
        }
        for (i, &q) in bits.iter().enumerate() {
            if moduli[i] == 0 {
                moduli[i] = primes_of_bits(b.word_bits, q, n, 1, &mut used)?[0];
            }
        }
        CkksParameters {
            n,
            word_bits: b.word_bits,
            moduli,
            special,
            dnum,
            scale: 2f64.powi(b.scale_bits as i32),
            security: b.security,
            secret: b.secret,
            sigma: heloom_math::sampler::DEFAULT_SIGMA,
            fingerprint: 0,
        }
        .seal()
    }

    /// Rebuilds parameters from explicit primes (used by deserialization); re-checks everything.
    #[allow(clippy::too_many_arguments)]
    pub fn from_primes(
        n: usize,
        word_bits: u32,
        moduli: Vec<u64>,
        special: Vec<u64>,
        dnum: usize,
        scale: f64,
        security: SecurityLevel,
        secret: SecretDistribution,
    ) -> Result<Self> {
        check_ring(n, word_bits)?;
        if moduli.is_empty() || special.is_empty() {
            return Err(CkksError::InvalidParameters(
                "need at least one ciphertext prime and one special prime".into(),
            ));
        }
        if dnum == 0 || dnum > moduli.len() || moduli.len().div_ceil(special.len()) != dnum {
            return Err(CkksError::InvalidParameters(format!(
                "dnum = {dnum} does not match {} ciphertext primes and {} special primes",
                moduli.len(),
                special.len()
            )));
        }
        if !(scale.is_finite() && scale >= 1.0) {
            return Err(CkksError::InvalidParameters(format!(
                "scale must be a finite number >= 1, got {scale}"
            )));
        }
        let wmax = max_prime_bits(word_bits);
        let mut seen = HashSet::new();
        for &q in moduli.iter().chain(&special) {
            let bits = 64 - q.leading_zeros();
            if bits > wmax || !seen.insert(q) {
                return Err(CkksError::InvalidParameters(format!(
                    "prime {q} is repeated or larger than {wmax} bits"
                )));
            }
            primes::check_ntt_prime(q, n)?;
        }
        if let SecretDistribution::FixedHamming(h) = secret {
            if h == 0 || h > n || (h < n / 2 && security != SecurityLevel::None) {
                return Err(CkksError::InvalidParameters(format!(
                    "secret Hamming weight {h} is not allowed for N = {n} at this security level"
                )));
            }
        }
        CkksParameters {
            n,
            word_bits,
            moduli,
            special,
            dnum,
            scale,
            security,
            secret,
            sigma: heloom_math::sampler::DEFAULT_SIGMA,
            fingerprint: 0,
        }
        .seal()
    }

    /// The last step of both constructors: the exact security check on the generated primes,
    /// that the primes fit the word size, the fingerprint.
    fn seal(mut self) -> Result<Self> {
        let log_qp: f64 = self.qp_moduli().map(|q| (q as f64).log2()).sum();
        if let Some(m) = security::max_log_qp(self.n, self.security) {
            if log_qp > m as f64 {
                return Err(CkksError::Insecure {
                    n: self.n,
                    log_qp,
                    max_log_qp: m,
                    security: self.security.bits(),
                });
            }
        }
        // Some backend of this build runs these primes (the one used is chosen per context).
        BackendChoice::Auto.resolve(self.word_bits, self.largest_prime_bits())?;
        self.fingerprint = self.compute_fingerprint();
        Ok(self)
    }

    /// Size in bits of the largest ciphertext or special prime.
    fn largest_prime_bits(&self) -> u32 {
        self.qp_moduli()
            .map(|q| 64 - q.leading_zeros())
            .max()
            .unwrap_or(max_prime_bits(self.word_bits))
    }

    fn compute_fingerprint(&self) -> u64 {
        // Everything that changes the meaning of a ciphertext or key: the v1 fields (ring,
        // word size, primes, dnum), then the security level and the secret distribution.
        let mut words = self.fingerprint_v1_words();
        words.push(u64::from(self.security.bits()));
        match self.secret {
            SecretDistribution::Ternary => words.extend([0, 0]),
            SecretDistribution::FixedHamming(h) => words.extend([1, h as u64]),
        }
        fnv1a(&words)
    }

    fn fingerprint_v1_words(&self) -> Vec<u64> {
        let mut words = vec![
            self.n as u64,
            u64::from(self.word_bits),
            self.moduli.len() as u64,
        ];
        words.extend(&self.moduli);
        words.push(self.special.len() as u64);
        words.extend(&self.special);
        words.push(self.dnum as u64);
        words
    }

    /// The fingerprint format version 1 stored (ring, word size, primes and dnum only), for
    /// [`crate::serialize::upgrade_v1`].
    pub(crate) fn fingerprint_v1(&self) -> u64 {
        fnv1a(&self.fingerprint_v1_words())
    }

    /// Ring degree N.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Number of slots of a fully packed ciphertext (N/2).
    pub fn slots(&self) -> usize {
        self.n / 2
    }
    /// Word size in bits (32 or 64).
    pub fn word_bits(&self) -> u32 {
        self.word_bits
    }
    /// Ciphertext primes `q_0 .. q_L`.
    pub fn moduli(&self) -> &[u64] {
        &self.moduli
    }
    /// Special primes `p_0 .. p_{alpha-1}` for key switching.
    pub fn special_moduli(&self) -> &[u64] {
        &self.special
    }
    /// Every prime of the key-switching modulus `Q * P`: the ciphertext primes, then the
    /// special primes.
    pub fn qp_moduli(&self) -> impl Iterator<Item = u64> + '_ {
        self.moduli.iter().chain(&self.special).copied()
    }
    /// Highest level `L` (number of rescalings available to a fresh ciphertext).
    pub fn max_level(&self) -> usize {
        self.moduli.len() - 1
    }
    /// Decomposition number (digits of hybrid key switching).
    pub fn dnum(&self) -> usize {
        self.dnum
    }
    /// Primes per digit (= number of special primes).
    pub fn alpha(&self) -> usize {
        self.special.len()
    }
    /// Default scale of fresh encodings.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// Requested security level.
    pub fn security(&self) -> SecurityLevel {
        self.security
    }
    /// Secret-key distribution.
    pub fn secret_distribution(&self) -> SecretDistribution {
        self.secret
    }
    /// Standard deviation of the error distribution.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }
    /// log2 of the ciphertext modulus at the top level.
    pub fn log_q(&self) -> f64 {
        self.moduli.iter().map(|&q| (q as f64).log2()).sum()
    }
    /// log2 of the key-switching modulus `Q * P` (what the security table bounds).
    pub fn log_qp(&self) -> f64 {
        self.log_q() + self.special.iter().map(|&q| (q as f64).log2()).sum::<f64>()
    }
    /// The SIMD backend [`crate::Context::new`] picks for these parameters on this CPU (the
    /// fastest one that runs their primes); [`crate::Context::with_backend`] chooses another.
    pub fn auto_backend(&self) -> heloom_math::Backend {
        // Checked when the parameters were built: some backend runs these primes.
        BackendChoice::Auto
            .resolve(self.word_bits, self.largest_prime_bits())
            .unwrap_or(heloom_math::Backend::Scalar)
    }

    /// Fingerprint of (N, word size, primes, dnum): every key, ciphertext and plaintext carries
    /// it, so objects of different parameter sets are never mixed.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
    /// Estimated security in bits from the HE standard's table (the highest level whose bound
    /// `log QP` meets), or `None` when below 128 bits.
    pub fn estimated_security(&self) -> Option<u32> {
        security::estimate(self.n, self.log_qp())
    }
}

impl fmt::Display for CkksParameters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits: Vec<String> = self
            .moduli
            .iter()
            .map(|q| format!("{:.1}", (*q as f64).log2()))
            .collect();
        let sp: Vec<String> = self
            .special
            .iter()
            .map(|q| format!("{:.1}", (*q as f64).log2()))
            .collect();
        writeln!(f, "CKKS parameters")?;
        writeln!(f, "  poly degree N      {}", self.n)?;
        writeln!(f, "  slots              {}", self.slots())?;
        writeln!(f, "  levels             {}", self.max_level())?;
        writeln!(f, "  scale              2^{:.1}", self.scale.log2())?;
        writeln!(
            f,
            "  log Q              {:.1}  [{}]",
            self.log_q(),
            bits.join(", ")
        )?;
        writeln!(
            f,
            "  log QP             {:.1}  (+ {} special: [{}])",
            self.log_qp(),
            self.special.len(),
            sp.join(", ")
        )?;
        writeln!(
            f,
            "  key switching      hybrid, dnum = {}, {} primes per digit",
            self.dnum,
            self.alpha()
        )?;
        let sec = match (self.security, self.estimated_security()) {
            (SecurityLevel::None, Some(b)) => format!("opted out (meets {b}-bit)"),
            (SecurityLevel::None, None) => "opted out (below 128-bit: INSECURE)".to_string(),
            (s, Some(b)) => format!("{}-bit required, meets {b}-bit", s.bits()),
            (s, None) => format!("{}-bit required", s.bits()),
        };
        writeln!(
            f,
            "  security           {sec} (HE standard, ternary secret)"
        )?;
        writeln!(f, "  word size          {}-bit", self.word_bits)
    }
}

/// FNV-1a 64 over the little-endian bytes of `words`.
fn fnv1a(words: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for w in words {
        for byte in w.to_le_bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}
