//! Rotations and conjugation (Galois automorphisms with key switching), hoisted rotations and
//! rotate-and-sum.

use super::*;

impl<W: Word> Evaluator<W> {
    pub(super) fn galois_key(&self, g: u64, what: &str) -> Result<&SwitchingKey<W>> {
        self.keys()?.galois_key(g).ok_or_else(|| {
            CkksError::MissingKey {
                key: MissingKeyKind::Galois { element: g },
                hint: format!(
                    "no Galois key for {what} (element {g}); generate keys with it (e.g. keygen(rotations=[...]) or conjugate=True)"
                ),
            }
        })
    }

    /// The Galois key of `g` permuted by `sigma_g^-1` (see [`HoistedKeys`]), built once;
    /// `None` when it would not fit the evaluator's hoisted-key budget.
    pub(super) fn hoisted_key(
        &self,
        g: u64,
        key: &SwitchingKey<W>,
    ) -> Result<Option<Arc<SwitchingKey<W>>>> {
        if let Ok(map) = self.hoisted.read() {
            if let Some(k) = map.get(&g) {
                return Ok(Some(Arc::clone(k)));
            }
            let held: usize = map.values().map(|k| k.memory_bytes()).sum();
            if held + key.memory_bytes() > self.hoisted_budget {
                return Ok(None);
            }
        }
        let n = self.ctx.n() as u64;
        let inv = self.ctx.permutation(galois_inverse(g, n))?;
        let permute = |polys: &[RnsPoly<W>]| -> Result<Vec<RnsPoly<W>>> {
            polys
                .iter()
                .map(|p| {
                    let mut out = p.clone();
                    for (o, a) in out.limbs_mut().zip(p.limbs()) {
                        inv.apply(a, o)?;
                    }
                    Ok(out)
                })
                .collect()
        };
        let k = Arc::new(SwitchingKey {
            b: permute(&key.b)?,
            a: permute(&key.a)?,
            seeds: Vec::new(),
            role: key.role,
            fingerprint: key.fingerprint,
        });
        if let Ok(mut map) = self.hoisted.write() {
            map.insert(g, Arc::clone(&k));
        }
        Ok(Some(k))
    }

    pub(super) fn apply_galois(
        &self,
        ct: &Ciphertext<W>,
        g: u64,
        key: &SwitchingKey<W>,
        dec: &crate::keyswitch::Decomposed<W>,
        threads: Threads,
    ) -> Result<Ciphertext<W>> {
        let perm = self.ctx.permutation(g)?;
        let basis = self.ctx.q_basis(ct.level)?;
        let Some(hk) = self.hoisted_key(g, key)? else {
            // sum_j sigma_g(d_j) k_j with each digit limb permuted on the fly.
            let (s0, s1) = self
                .ctx
                .key_inner_product_with(dec, key, Some(&perm), threads)?;
            let (c0, c1) = threads.join(
                |t| -> Result<RnsPoly<W>> {
                    let mut k0 = self.ctx.mod_down_with(s0, ct.level, t)?;
                    self.add_permuted(basis, &mut k0, &ct.polys[0], &perm, t)?;
                    Ok(k0)
                },
                |t| self.ctx.mod_down_with(s1, ct.level, t),
            );
            return Ok(ct.with_polys(vec![c0?, c1?]));
        };
        let (s0, s1) = self.ctx.key_inner_product_with(dec, &hk, None, threads)?;
        // sigma_g of both sums, limb by limb (every word of a0, a1 is written).
        let qp = self.ctx.qp_basis(ct.level)?;
        let pool = self.ctx.pool();
        let (mut a0, mut a1) = (
            pool.for_overwrite(qp, Form::Ntt),
            pool.for_overwrite(qp, Form::Ntt),
        );
        {
            let mut limbs: Vec<(&mut [W], &[W])> = a0
                .limbs_mut()
                .chain(a1.limbs_mut())
                .zip(s0.limbs().chain(s1.limbs()))
                .collect();
            threads.try_for_each_mut(&mut limbs, |_, (o, a)| -> Result<()> {
                Ok(perm.apply(a, o)?)
            })?;
        }
        pool.recycle(s0);
        pool.recycle(s1);
        let (c0, c1) = threads.join(
            |t| -> Result<RnsPoly<W>> {
                let mut k0 = self.ctx.mod_down_with(a0, ct.level, t)?;
                self.add_permuted(basis, &mut k0, &ct.polys[0], &perm, t)?;
                Ok(k0)
            },
            |t| self.ctx.mod_down_with(a1, ct.level, t),
        );
        Ok(ct.with_polys(vec![c0?, c1?]))
    }

    pub(super) fn check_two(&self, ct: &Ciphertext<W>, op: &str) -> Result<()> {
        self.check(ct)?;
        if ct.polys.len() != 2 {
            return Err(CkksError::InvalidInput(format!(
                "{op} takes a two-polynomial ciphertext; relinearize first"
            )));
        }
        Ok(())
    }

    /// `X -> X^g` on one ciphertext: permute both polynomials (NTT form), then switch the
    /// permuted `c_1` back to `s` with the Galois key.
    pub(super) fn galois_single(
        &self,
        ct: &Ciphertext<W>,
        g: u64,
        key: &SwitchingKey<W>,
    ) -> Result<Ciphertext<W>> {
        let perm = self.ctx.permutation(g)?;
        let basis = self.ctx.q_basis(ct.level)?;
        let pool = self.ctx.pool();
        // Every word is written by the permutation.
        let mut p = (0..2)
            .map(|_| pool.for_overwrite(basis, Form::Ntt))
            .collect::<Vec<_>>();
        for_each_limb(self.threads, &mut p, |j, i, o| {
            Ok(perm.apply(ct.polys[j].limb(i), o)?)
        })?;
        // perm(c0) is added to the switched half on the thread that mod-downs it.
        let c0 = &p[0];
        let (c0, c1) = self.ctx.key_switch_finish(
            &p[1],
            ct.level,
            key,
            self.threads,
            Box::new(move |mut k0, t| {
                basis.add_assign_with(&mut k0, c0, t)?;
                Ok(k0)
            }),
            Box::new(|k1, _| Ok(k1)),
        )?;
        for q in p {
            pool.recycle(q);
        }
        Ok(ct.with_polys(vec![c0, c1]))
    }

    /// Rotates the slots left by `step` (right when negative).
    pub fn rotate(&self, ct: &Ciphertext<W>, step: i64) -> Result<Ciphertext<W>> {
        self.check_two(ct, "rotate")?;
        let n = self.ctx.n();
        let g = galois_element_for_step(n, step);
        if g == 1 {
            return Ok(ct.clone());
        }
        let key = self.galois_key(g, &format!("rotation step {step}"))?;
        self.galois_single(ct, g, key)
    }

    /// Conjugates every slot.
    pub fn conjugate(&self, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        self.check_two(ct, "conjugate")?;
        let g = galois_element_conjugate(self.ctx.n());
        let key = self.galois_key(g, "conjugation")?;
        self.galois_single(ct, g, key)
    }

    /// Hoisted rotations: one decomposition of `c_1`, then one inner product per step
    /// (Halevi-Shoup 2018). Returns the rotations in the order of `steps`.
    pub fn rotate_many(&self, ct: &Ciphertext<W>, steps: &[i64]) -> Result<Vec<Ciphertext<W>>> {
        self.check_two(ct, "rotate")?;
        let n = self.ctx.n();
        let mut keys = Vec::with_capacity(steps.len());
        for &s in steps {
            let g = galois_element_for_step(n, s);
            let key = if g == 1 {
                None
            } else {
                Some(self.galois_key(g, &format!("rotation step {s}"))?)
            };
            keys.push((g, key));
        }
        let need = keys.iter().any(|(_, k)| k.is_some());
        let dec = if need {
            Some(
                self.ctx
                    .decompose_with(&ct.polys[1], ct.level, self.threads)?,
            )
        } else {
            None
        };
        let one = |i: usize, t: Threads| match (keys[i], &dec) {
            ((g, Some(k)), Some(d)) => self.apply_galois(ct, g, k, d, t),
            _ => Ok(ct.clone()),
        };
        // Whole rounds of steps one per thread (no hand-over inside a step); the steps left
        // over one at a time, each split over the whole budget.
        let threads = self.threads.effective();
        let c = threads.get();
        let par = if c > 1 { keys.len() / c * c } else { 0 };
        let mut out = threads.map(par, |i| one(i, Threads::single()));
        out.extend((par..keys.len()).map(|i| one(i, threads)));
        if let Some(d) = dec {
            for p in d.digits {
                self.ctx.pool().recycle(p);
            }
        }
        out.into_iter().collect()
    }

    /// Sum of `n` consecutive slots in every slot: slot `i` gets `x_i + .. + x_{i+n-1}`
    /// (indices mod slots). `n` must be a power of two; needs keys for steps 1, 2, 4, .., n/2.
    pub fn rotate_and_sum(&self, ct: &Ciphertext<W>, n: usize) -> Result<Ciphertext<W>> {
        self.check_two(ct, "rotate_and_sum")?;
        if n == 0 || !n.is_power_of_two() || n > self.ctx.params().slots() {
            return Err(CkksError::InvalidInput(format!(
                "rotate_and_sum needs a power-of-two count up to {}, got {n}",
                self.ctx.params().slots()
            )));
        }
        let mut acc = ct.clone();
        let mut k = 1usize;
        while k < n {
            let r = self.rotate(&acc, k as i64)?;
            acc = self.add(&acc, &r)?;
            k <<= 1;
        }
        Ok(acc)
    }

    /// Rotation steps `rotate_and_sum(_, n)` needs keys for.
    pub fn rotate_and_sum_steps(n: usize) -> Vec<i64> {
        let mut v = Vec::new();
        let mut k = 1usize;
        while k < n {
            v.push(k as i64);
            k <<= 1;
        }
        v
    }
}

/// `g^-1 mod 2n` for an odd `g` (the units mod 2n have order dividing n, so `g^(n-1)`).
fn galois_inverse(g: u64, n: u64) -> u64 {
    let m = 2 * n as u128;
    let (mut base, mut e, mut acc) = (g as u128 % m, n - 1, 1u128);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc * base % m;
        }
        base = base * base % m;
        e >>= 1;
    }
    acc as u64
}
