//! Encryption with the public or the secret key, and decryption.

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::context::Context;
use crate::error::{CkksError, Result};
use crate::keys::{os_rng, uniform_poly, PublicKey, SecretKey};
use heloom_math::sampler::Seed;
use heloom_math::{Form, RnsPoly, Word};
use num_complex::Complex64;
use rand::RngCore;
use rand_chacha::ChaCha20Rng;
use std::sync::{Arc, Mutex};

/// Encrypts with a public key (anyone) or a secret key (the owner; the ciphertext is then
/// compressible: `c_1` is a seed). ChaCha20 randomness seeded by the operating system.
#[derive(Debug)]
pub struct Encryptor<W: Word> {
    ctx: Arc<Context<W>>,
    rng: Mutex<ChaCha20Rng>,
}

impl<W: Word> Encryptor<W> {
    /// An encryptor for `ctx`.
    pub fn new(ctx: &Arc<Context<W>>) -> Self {
        Self {
            ctx: Arc::clone(ctx),
            rng: Mutex::new(os_rng()),
        }
    }

    fn rng(&self) -> std::sync::MutexGuard<'_, ChaCha20Rng> {
        // A poisoned lock only means another thread panicked mid-sample; the RNG state is still
        // a valid ChaCha20 state.
        match self.rng.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Public-key encryption of complex values at the top level and default scale.
    pub fn encrypt_complex(
        &self,
        values: &[Complex64],
        pk: &PublicKey<W>,
    ) -> Result<Ciphertext<W>> {
        let pt =
            self.ctx
                .encode_complex_at(values, self.ctx.max_level(), self.ctx.params().scale())?;
        self.encrypt_plaintext(&pt, pk)
    }

    /// Public-key encryption of real values.
    pub fn encrypt(&self, values: &[f64], pk: &PublicKey<W>) -> Result<Ciphertext<W>> {
        let c: Vec<Complex64> = values.iter().map(|&v| Complex64::new(v, 0.0)).collect();
        self.encrypt_complex(&c, pk)
    }

    /// Secret-key encryption of complex values: `(-a s + e + m, a)` with `a` from a fresh seed,
    /// so the ciphertext serializes at half size.
    pub fn encrypt_complex_symmetric(
        &self,
        values: &[Complex64],
        sk: &SecretKey<W>,
    ) -> Result<Ciphertext<W>> {
        self.ctx.check_fingerprint(sk.fingerprint, "secret key")?;
        let level = self.ctx.max_level();
        let scale = self.ctx.params().scale();
        let basis = self.ctx.q_basis(level)?;
        let pt = self.ctx.encode_complex_at(values, level, scale)?;
        let slots = pt.slots;
        let mut m = crate::keys::error_poly(&mut *self.rng(), basis, self.ctx.params().sigma())?;
        basis.add_assign(&mut m, &pt.poly)?;
        let mut seed: Seed = [0u8; 32];
        self.rng().fill_bytes(&mut seed);
        let a = uniform_poly(&seed, basis)?;
        let s = basis.truncated(&sk.s)?;
        let mut c0 = m;
        let as_ = basis.mul(&a, &s)?;
        basis.sub_assign(&mut c0, &as_)?;
        Ok(Ciphertext {
            polys: vec![c0, a],
            level,
            scale,
            slots,
            fingerprint: self.ctx.fingerprint(),
            seed: Some(seed),
        })
    }

    /// Secret-key encryption of real values.
    pub fn encrypt_symmetric(&self, values: &[f64], sk: &SecretKey<W>) -> Result<Ciphertext<W>> {
        let c: Vec<Complex64> = values.iter().map(|&v| Complex64::new(v, 0.0)).collect();
        self.encrypt_complex_symmetric(&c, sk)
    }

    /// Public-key encryption of an already encoded plaintext (its level and scale are kept):
    /// `(b u + e_0, a u + e_1)` modulo `Q_l P`, divided by `P` (mod-down, which shrinks the
    /// encryption noise to a rounding error, as in SEAL), plus the message.
    pub fn encrypt_plaintext(&self, pt: &Plaintext<W>, pk: &PublicKey<W>) -> Result<Ciphertext<W>> {
        self.ctx.check_fingerprint(pk.fingerprint, "public key")?;
        self.ctx.check_fingerprint(pt.fingerprint, "plaintext")?;
        let level = pt.level;
        let qp = self.ctx.qp_basis(level)?;
        let q = self.ctx.q_basis(level)?;
        let (u, e0, e1) = {
            let mut rng = self.rng();
            let sigma = self.ctx.params().sigma();
            let u = crate::keys::ternary_poly(&mut *rng, qp)?;
            let e0 = crate::keys::error_poly(&mut *rng, qp, sigma)?;
            let e1 = crate::keys::error_poly(&mut *rng, qp, sigma)?;
            (u, e0, e1)
        };
        let (b, a) = if level == self.ctx.max_level() {
            (pk.b.clone(), pk.a.clone())
        } else {
            let full = self.ctx.max_level() + 1;
            let idx: Vec<usize> = (0..=level)
                .chain(full..full + self.ctx.params().alpha())
                .collect();
            let pick = |p: &RnsPoly<W>| -> Result<RnsPoly<W>> {
                let limbs: Vec<&[W]> = idx.iter().map(|&i| p.limb(i)).collect();
                Ok(qp.poly_from_limbs(&limbs, Form::Ntt)?)
            };
            (pick(&pk.b)?, pick(&pk.a)?)
        };
        let mut c0 = e0;
        qp.mul_add(&mut c0, &b, &u)?;
        let mut c1 = e1;
        qp.mul_add(&mut c1, &a, &u)?;
        let mut c0 = self.ctx.mod_down(c0, level)?;
        let c1 = self.ctx.mod_down(c1, level)?;
        q.add_assign(&mut c0, &pt.poly)?;
        Ok(Ciphertext {
            polys: vec![c0, c1],
            level,
            scale: pt.scale,
            slots: pt.slots,
            fingerprint: self.ctx.fingerprint(),
            seed: None,
        })
    }
}

impl<W: Word> Encryptor<W> {
    /// A public-key encryption of zero at `level` and `scale` whose `c_0` also carries a
    /// flooding error with coefficients uniform in `[-2^flood_bits, 2^flood_bits)`.
    ///
    /// Added to the result of a computation, it re-randomizes the ciphertext (fresh `u`, `e_0`,
    /// `e_1`) and drowns the computation's own error (which may depend on the evaluator's
    /// private operands) in a much larger independent one: noise flooding for circuit privacy
    /// (Gentry 2009; for CKKS, Li-Micciancio 2021). Choose `flood_bits` so that
    /// `2^flood_bits sqrt(N / 3) / scale` stays below the precision the decryptor needs and far
    /// above the computation's error.
    pub fn encrypt_zero_flooded(
        &self,
        level: usize,
        scale: f64,
        slots: usize,
        flood_bits: u32,
        pk: &PublicKey<W>,
    ) -> Result<Ciphertext<W>> {
        let q = self.ctx.q_basis(level)?;
        let log_q: f64 = q.moduli().iter().map(|m| (m.value() as f64).log2()).sum();
        if flood_bits > 120 || f64::from(flood_bits) + 2.0 > log_q {
            return Err(CkksError::InvalidInput(format!(
                "flooding error 2^{flood_bits} does not fit at level {level} (log2 Q = {log_q:.1}, at most 120 bits)"
            )));
        }
        if !(scale.is_finite() && scale > 0.0) || slots == 0 || slots > self.ctx.n() / 2 {
            return Err(CkksError::InvalidInput(format!(
                "invalid scale {scale} or slot count {slots}"
            )));
        }
        let pt = Plaintext {
            poly: q.zero(Form::Ntt),
            level,
            scale,
            slots,
            fingerprint: self.ctx.fingerprint(),
        };
        let mut ct = self.encrypt_plaintext(&pt, pk)?;
        let mut flood = q.zero(Form::Coeff);
        {
            let n = self.ctx.n();
            let mut coeffs = Vec::with_capacity(n);
            let mut rng = self.rng();
            let mask = (1u128 << (flood_bits + 1)) - 1;
            for _ in 0..n {
                let r = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
                coeffs.push((r & mask) as i128 - (1i128 << flood_bits));
            }
            for (i, m) in q.moduli().iter().enumerate() {
                let qi = m.value() as i128;
                for (x, &c) in flood.limb_mut(i).iter_mut().zip(&coeffs) {
                    *x = W::from_u64(c.rem_euclid(qi) as u64);
                }
            }
        }
        q.forward(&mut flood)?;
        q.add_assign(&mut ct.polys[0], &flood)?;
        Ok(ct)
    }
}

/// Decrypts with the secret key.
#[derive(Debug)]
pub struct Decryptor<W: Word> {
    ctx: Arc<Context<W>>,
    sk: SecretKey<W>,
}

impl<W: Word> Decryptor<W> {
    /// A decryptor holding `sk` (client side only).
    pub fn new(ctx: &Arc<Context<W>>, sk: &SecretKey<W>) -> Result<Self> {
        ctx.check_fingerprint(sk.fingerprint, "secret key")?;
        Ok(Self {
            ctx: Arc::clone(ctx),
            sk: sk.clone(),
        })
    }

    /// `sum_i c_i s^i` as a plaintext (NTT form) at the ciphertext's level and scale.
    pub fn decrypt_to_plaintext(&self, ct: &Ciphertext<W>) -> Result<Plaintext<W>> {
        self.ctx.check_fingerprint(ct.fingerprint, "ciphertext")?;
        let basis = self.ctx.q_basis(ct.level)?;
        for p in &ct.polys {
            if !basis.owns(p) || p.form() != Form::Ntt {
                return Err(CkksError::ParameterMismatch(format!(
                    "ciphertext polynomial does not match its level {} (corrupted ciphertext?)",
                    ct.level
                )));
            }
        }
        let s = basis.truncated(&self.sk.s)?;
        // Horner: ((c_k s + c_{k-1}) s + ...) + c_0.
        let k = ct.polys.len();
        let mut acc = ct.polys[k - 1].clone();
        for i in (0..k - 1).rev() {
            basis.mul_assign(&mut acc, &s)?;
            basis.add_assign(&mut acc, &ct.polys[i])?;
        }
        Ok(Plaintext {
            poly: acc,
            level: ct.level,
            scale: ct.scale,
            slots: ct.slots,
            fingerprint: ct.fingerprint,
        })
    }

    /// Decrypts and decodes to complex values.
    pub fn decrypt_complex(&self, ct: &Ciphertext<W>) -> Result<Vec<Complex64>> {
        let pt = self.decrypt_to_plaintext(ct)?;
        self.ctx.decode_complex(&pt)
    }

    /// Decrypts and decodes to real values (imaginary parts dropped).
    pub fn decrypt(&self, ct: &Ciphertext<W>) -> Result<Vec<f64>> {
        Ok(self.decrypt_complex(ct)?.iter().map(|c| c.re).collect())
    }
}
