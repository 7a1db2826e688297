//! Keys: secret (ternary or fixed Hamming weight), public, and the switching keys behind
//! relinearization and rotations (hybrid key switching, Han-Ki 2020, with `dnum` digits).
//!
//! Every uniform half `a` is expanded from a 32-byte seed, so public keys, switching keys and
//! symmetric ciphertexts are stored and sent as (b, seed): half the size.

use crate::context::Context;
use crate::error::{CkksError, MissingKeyKind, Result};
use crate::params::SecretDistribution;
use heloom_math::automorphism::{galois_element_conjugate, galois_element_for_step};
use heloom_math::sampler::{self, Seed};
use heloom_math::{Form, RnsBasis, RnsPoly, Word};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The secret key `s`, in NTT form over every prime (ciphertext and special), with its signed
/// ternary coefficients. Never leaves the client: its serialization (kind `SecretKey` of
/// [`crate::serialize`]) is for the client's own storage, no loader of a public object accepts
/// it, and its `Debug` output hides the coefficients.
#[derive(Clone)]
pub struct SecretKey<W: Word> {
    pub(crate) s: RnsPoly<W>,
    /// Coefficients of `s` in `{-1, 0, 1}` (coefficient form), kept for its serialization.
    pub(crate) coeffs: Vec<i8>,
    pub(crate) fingerprint: u64,
}

impl<W: Word> fmt::Debug for SecretKey<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey(params {:016x}, hidden)", self.fingerprint)
    }
}

impl<W: Word> SecretKey<W> {
    /// The key with ternary coefficients `coeffs` (each in `{-1, 0, 1}`, `N` of them) over
    /// `ctx`'s full basis.
    pub(crate) fn from_coefficients(ctx: &Context<W>, coeffs: &[i64]) -> Result<Self> {
        let full = ctx.full_basis();
        let mut s = full.poly_from_signed(coeffs)?;
        full.forward(&mut s)?;
        Ok(SecretKey {
            s,
            // Callers pass ternary values only (sampled, or checked by the loader).
            coeffs: coeffs.iter().map(|&c| c.clamp(-1, 1) as i8).collect(),
            fingerprint: ctx.fingerprint(),
        })
    }

    /// Fingerprint of the parameters it was made for.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
}

/// The public key `(b, a) = (-a s + e, a)` modulo `Q P` at the top level; `a` comes from
/// `seed`.
#[derive(Clone, Debug)]
pub struct PublicKey<W: Word> {
    pub(crate) b: RnsPoly<W>,
    pub(crate) a: RnsPoly<W>,
    pub(crate) seed: Seed,
    pub(crate) fingerprint: u64,
}

impl<W: Word> PublicKey<W> {
    /// Fingerprint of the parameters it was made for.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
}

/// A key-switching key from `s'` to `s`: for each digit `j`,
/// `(b_j, a_j) = (-a_j s + e_j + P * g_j * s', a_j)` modulo `Q P` (NTT form), where `g_j` is
/// the CRT gadget of digit `j` (1 modulo its primes, 0 modulo the other ciphertext primes).
#[derive(Clone, Debug)]
pub struct SwitchingKey<W: Word> {
    pub(crate) b: Vec<RnsPoly<W>>,
    pub(crate) a: Vec<RnsPoly<W>>,
    pub(crate) seeds: Vec<Seed>,
    pub(crate) role: KeyRole,
    pub(crate) fingerprint: u64,
}

/// Which key a switching key switches from: it is part of the key's meaning, stored in its
/// serialization and checked when the key joins [`EvaluationKeys`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyRole {
    /// From a key the caller chose ([`KeyGenerator::switching_key`]).
    Generic,
    /// From `s^2` (relinearization).
    Relinearization,
    /// From `s(X^g)`: the Galois key of element `g`.
    Galois(u64),
}

impl<W: Word> SwitchingKey<W> {
    /// Which key it switches from.
    pub fn role(&self) -> KeyRole {
        self.role
    }
    /// Number of digits.
    pub fn dnum(&self) -> usize {
        self.b.len()
    }
    /// Digit `j` as `(b_j, a_j)`, both over `Q_L P` in NTT form (for accelerator backends).
    pub fn digit(&self, j: usize) -> Option<(&RnsPoly<W>, &RnsPoly<W>)> {
        Some((self.b.get(j)?, self.a.get(j)?))
    }
    /// Fingerprint of the parameters it was made for.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
    /// Bytes its polynomials occupy.
    pub fn memory_bytes(&self) -> usize {
        self.b
            .iter()
            .chain(&self.a)
            .map(|p| p.as_slice().len() * (W::BITS as usize / 8))
            .sum()
    }
}

/// What the server needs to compute: the relinearization key and Galois keys by element.
#[derive(Clone, Debug)]
pub struct EvaluationKeys<W: Word> {
    pub(crate) relin: Option<SwitchingKey<W>>,
    pub(crate) galois: BTreeMap<u64, SwitchingKey<W>>,
    pub(crate) fingerprint: u64,
}

impl<W: Word> EvaluationKeys<W> {
    /// Empty key set for a context (add keys with the `insert_*` methods).
    pub fn empty(ctx: &Context<W>) -> Self {
        Self {
            relin: None,
            galois: BTreeMap::new(),
            fingerprint: ctx.fingerprint(),
        }
    }
    /// Whether a relinearization key is present.
    pub fn has_relin(&self) -> bool {
        self.relin.is_some()
    }
    /// Galois elements with a key.
    pub fn galois_elements(&self) -> Vec<u64> {
        self.galois.keys().copied().collect()
    }
    /// Fingerprint of the parameters they were made for.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
    /// The relinearization key.
    pub fn relin_key(&self) -> Result<&SwitchingKey<W>> {
        self.relin.as_ref().ok_or_else(|| CkksError::MissingKey {
            key: MissingKeyKind::Relinearization,
            hint: "no relinearization key; generate evaluation keys with relinearization enabled"
                .into(),
        })
    }
    /// The Galois key for element `g`, if present.
    pub fn galois_key(&self, g: u64) -> Option<&SwitchingKey<W>> {
        self.galois.get(&g)
    }
    /// Adds or replaces the relinearization key. A key made as a Galois key is refused; a
    /// generic key is taken as the relinearization key.
    pub fn insert_relin(&mut self, mut key: SwitchingKey<W>) -> Result<()> {
        check_fp(self.fingerprint, key.fingerprint)?;
        if let KeyRole::Galois(g) = key.role {
            return Err(CkksError::InvalidInput(format!(
                "this switching key is the Galois key of element {g}, not a relinearization key; add it with insert_galois({g}, key)"
            )));
        }
        key.role = KeyRole::Relinearization;
        self.relin = Some(key);
        Ok(())
    }
    /// Adds or replaces the Galois key for element `g`. A relinearization key or the Galois
    /// key of another element is refused; a generic key is taken as the key of `g`.
    pub fn insert_galois(&mut self, g: u64, mut key: SwitchingKey<W>) -> Result<()> {
        check_fp(self.fingerprint, key.fingerprint)?;
        match key.role {
            KeyRole::Relinearization => {
                return Err(CkksError::InvalidInput(format!(
                    "this switching key is a relinearization key, not the Galois key of element {g}; add it with insert_relin"
                )))
            }
            KeyRole::Galois(h) if h != g => {
                return Err(CkksError::InvalidInput(format!(
                    "this switching key is the Galois key of element {h}, not of element {g}"
                )))
            }
            _ => {}
        }
        key.role = KeyRole::Galois(g);
        self.galois.insert(g, key);
        Ok(())
    }
    /// Total size in bytes of the keys in memory.
    pub fn memory_bytes(&self) -> usize {
        self.relin.as_ref().map_or(0, SwitchingKey::memory_bytes)
            + self
                .galois
                .values()
                .map(SwitchingKey::memory_bytes)
                .sum::<usize>()
    }
}

fn check_fp(a: u64, b: u64) -> Result<()> {
    if a != b {
        return Err(CkksError::ParameterMismatch(format!(
            "key made for parameters {b:016x} cannot join keys for {a:016x}"
        )));
    }
    Ok(())
}

/// Everything `keygen` makes: the secret key stays with the client, the public key encrypts,
/// the evaluation keys go to the server.
#[derive(Clone, Debug)]
pub struct KeySet<W: Word> {
    /// The secret key.
    pub secret_key: SecretKey<W>,
    /// The public key.
    pub public_key: PublicKey<W>,
    /// Relinearization and Galois keys.
    pub evaluation_keys: EvaluationKeys<W>,
}

/// Generates keys from one secret key. Randomness: ChaCha20 seeded by the operating system.
pub struct KeyGenerator<W: Word> {
    ctx: Arc<Context<W>>,
    sk: SecretKey<W>,
    rng: ChaCha20Rng,
}

impl<W: Word> fmt::Debug for KeyGenerator<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyGenerator(params {:016x})", self.ctx.fingerprint())
    }
}

/// Samples a Gaussian error polynomial over `basis` in NTT form.
pub(crate) fn error_poly<W: Word, R: RngCore + rand::CryptoRng>(
    rng: &mut R,
    basis: &RnsBasis<W>,
    sigma: f64,
) -> Result<RnsPoly<W>> {
    let e = sampler::gaussian(rng, basis.n(), sigma);
    let mut p = basis.poly_from_signed(&e)?;
    basis.forward(&mut p)?;
    Ok(p)
}

/// Samples a ternary polynomial over `basis` in NTT form.
pub(crate) fn ternary_poly<W: Word, R: RngCore + rand::CryptoRng>(
    rng: &mut R,
    basis: &RnsBasis<W>,
) -> Result<RnsPoly<W>> {
    let t: Vec<i64> = sampler::ternary(rng, basis.n())
        .into_iter()
        .map(i64::from)
        .collect();
    let mut p = basis.poly_from_signed(&t)?;
    basis.forward(&mut p)?;
    Ok(p)
}

/// A uniform polynomial over `basis` (NTT form) expanded from `seed`.
pub(crate) fn uniform_poly<W: Word>(seed: &Seed, basis: &RnsBasis<W>) -> Result<RnsPoly<W>> {
    let mut p = basis.zero(Form::Ntt);
    sampler::uniform_from_seed(seed, basis, &mut p)?;
    Ok(p)
}

pub(crate) fn os_rng() -> ChaCha20Rng {
    ChaCha20Rng::from_seed(sampler::fresh_seed())
}

impl<W: Word> KeyGenerator<W> {
    /// A generator with a fresh secret key.
    pub fn new(ctx: &Arc<Context<W>>) -> Result<Self> {
        let mut rng = os_rng();
        let n = ctx.n();
        let coeffs: Vec<i64> = match ctx.params().secret_distribution() {
            SecretDistribution::Ternary => sampler::ternary(&mut rng, n)
                .into_iter()
                .map(i64::from)
                .collect(),
            SecretDistribution::FixedHamming(h) => sampler::ternary_hamming(&mut rng, n, h)?
                .into_iter()
                .map(i64::from)
                .collect(),
        };
        Ok(Self {
            ctx: Arc::clone(ctx),
            sk: SecretKey::from_coefficients(ctx, &coeffs)?,
            rng,
        })
    }

    /// A generator for an existing secret key (to make more evaluation keys later).
    pub fn from_secret_key(ctx: &Arc<Context<W>>, sk: &SecretKey<W>) -> Result<Self> {
        ctx.check_fingerprint(sk.fingerprint, "secret key")?;
        Ok(Self {
            ctx: Arc::clone(ctx),
            sk: sk.clone(),
            rng: os_rng(),
        })
    }

    /// The secret key.
    pub fn secret_key(&self) -> &SecretKey<W> {
        &self.sk
    }

    fn fresh_seed(&mut self) -> Seed {
        let mut s = [0u8; 32];
        self.rng.fill_bytes(&mut s);
        s
    }

    /// A public key, modulo `Q P` at the top level (encryption then divides the noise by `P`,
    /// as SEAL does).
    pub fn public_key(&mut self) -> Result<PublicKey<W>> {
        let ctx = Arc::clone(&self.ctx);
        let top = ctx.max_level();
        let basis = ctx.qp_basis(top)?;
        let seed = self.fresh_seed();
        let a = uniform_poly(&seed, basis)?;
        // qp_basis(top) is the full basis: same primes, same order.
        let s = &self.sk.s;
        let mut b = error_poly(&mut self.rng, basis, self.ctx.params().sigma())?;
        let as_ = basis.mul(&a, s)?;
        basis.sub_assign(&mut b, &as_)?;
        Ok(PublicKey {
            b,
            a,
            seed,
            fingerprint: self.ctx.fingerprint(),
        })
    }

    /// A switching key from `s_from` (NTT form over the full basis) to the secret key.
    pub fn switching_key(&mut self, s_from: &RnsPoly<W>) -> Result<SwitchingKey<W>> {
        let ctx = Arc::clone(&self.ctx);
        let full = ctx.full_basis();
        if !full.owns(s_from) {
            return Err(CkksError::ParameterMismatch(
                "source key is not a polynomial over this context's full basis".into(),
            ));
        }
        let params = ctx.params();
        let num_q = params.max_level() + 1;
        let alpha = params.alpha();
        let dnum = params.dnum();
        let n = params.n();
        let mut bs = Vec::with_capacity(dnum);
        let mut as_ = Vec::with_capacity(dnum);
        let mut seeds = Vec::with_capacity(dnum);
        for j in 0..dnum {
            let seed = self.fresh_seed();
            let a = uniform_poly(&seed, full)?;
            let mut b = error_poly(&mut self.rng, full, params.sigma())?;
            let a_s = full.mul(&a, &self.sk.s)?;
            full.sub_assign(&mut b, &a_s)?;
            let lo = j * alpha;
            let hi = ((j + 1) * alpha).min(num_q);
            for i in lo..hi {
                let m = &full.moduli()[i];
                let mut t = vec![W::ZERO; n];
                full.eltwise()
                    .mul_scalar(m, &mut t, s_from.limb(i), self.ctx.p_mod_q(i))?;
                full.eltwise().add_assign(m, b.limb_mut(i), &t)?;
            }
            bs.push(b);
            as_.push(a);
            seeds.push(seed);
        }
        Ok(SwitchingKey {
            b: bs,
            a: as_,
            seeds,
            role: KeyRole::Generic,
            fingerprint: self.ctx.fingerprint(),
        })
    }

    /// The relinearization key (from `s^2` to `s`).
    pub fn relin_key(&mut self) -> Result<SwitchingKey<W>> {
        let full = self.ctx.full_basis();
        let s2 = full.mul(&self.sk.s, &self.sk.s)?;
        let mut k = self.switching_key(&s2)?;
        k.role = KeyRole::Relinearization;
        Ok(k)
    }

    /// The Galois key for `X -> X^g` (from `s(X^g)` to `s`).
    pub fn galois_key(&mut self, g: u64) -> Result<SwitchingKey<W>> {
        let perm = self.ctx.permutation(g)?;
        let full = self.ctx.full_basis();
        let mut sg = full.zero(Form::Ntt);
        for i in 0..full.len() {
            perm.apply(self.sk.s.limb(i), sg.limb_mut(i))?;
        }
        let mut k = self.switching_key(&sg)?;
        k.role = KeyRole::Galois(g);
        Ok(k)
    }

    /// Evaluation keys: relinearization, a Galois key per rotation step (negative = right),
    /// and optionally conjugation.
    pub fn evaluation_keys(&mut self, steps: &[i64], conjugate: bool) -> Result<EvaluationKeys<W>> {
        let mut keys = EvaluationKeys::empty(&self.ctx);
        keys.relin = Some(self.relin_key()?);
        let n = self.ctx.n();
        let mut elements: Vec<u64> = steps
            .iter()
            .map(|&k| galois_element_for_step(n, k))
            .collect();
        if conjugate {
            elements.push(galois_element_conjugate(n));
        }
        for g in elements {
            if g != 1 && !keys.galois.contains_key(&g) {
                let k = self.galois_key(g)?;
                keys.galois.insert(g, k);
            }
        }
        Ok(keys)
    }
}

/// Generates a fresh key set: secret, public, relinearization and Galois keys for `steps`
/// (and conjugation when asked).
pub fn keygen<W: Word>(ctx: &Arc<Context<W>>, steps: &[i64], conjugate: bool) -> Result<KeySet<W>> {
    let mut g = KeyGenerator::new(ctx)?;
    let public_key = g.public_key()?;
    let evaluation_keys = g.evaluation_keys(steps, conjugate)?;
    Ok(KeySet {
        secret_key: g.sk.clone(),
        public_key,
        evaluation_keys,
    })
}
