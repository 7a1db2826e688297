//! Modular arithmetic on one word: Barrett reduction, Shoup multiplication by precomputed
//! constants, and (for 32-bit words) Montgomery multiplication.
//!
//! Lazy ranges are stated per function; "reduced" means in `[0, q)`.

use crate::error::{MathError, Result};
use crate::word::Word;

/// A modulus `q` with the constants that make reduction fast.
///
/// Works for any `q` in `[2, 2^W::MAX_PRIME_BITS)`; primality is checked where it matters
/// (NTT tables), not here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modulus<W: Word> {
    q: W,
    two_q: W,
    bits: u32,
    /// floor(2^(2*BITS) / q) as (low word, high word) (Barrett 1986, base 2^BITS form as in SEAL).
    ratio: (W, W),
}

impl<W: Word> Modulus<W> {
    /// Builds the modulus, checking `2 <= q < 2^W::MAX_PRIME_BITS`.
    pub fn new(q: u64) -> Result<Self> {
        if q < 2 {
            return Err(MathError::ModulusTooSmall { q });
        }
        let bits = 64 - q.leading_zeros();
        if bits > W::MAX_PRIME_BITS {
            return Err(MathError::ModulusTooLarge {
                q,
                bits,
                max_bits: W::MAX_PRIME_BITS,
                what: format!("a {}-bit word", W::BITS),
            });
        }
        // floor(2^(2*BITS) / q) as a double word.
        let ratio = if W::BITS == 64 {
            // floor((2^128 - 1) / q), plus one when q divides 2^128 (q a power of two).
            let q128 = q as u128;
            let r = u128::MAX / q128 + u128::from(u128::MAX % q128 + 1 == q128);
            (W::from_u64(r as u64), W::from_u64((r >> 64) as u64))
        } else {
            let r = (u64::MAX / q) + u64::from((u64::MAX % q) + 1 == q);
            (W::from_u64(r & 0xffff_ffff), W::from_u64(r >> 32))
        };
        let qw = W::from_u64(q);
        Ok(Self {
            q: qw,
            two_q: qw.wadd(qw),
            bits,
            ratio,
        })
    }

    /// The modulus as a word.
    #[inline(always)]
    pub fn q(&self) -> W {
        self.q
    }

    /// The modulus widened to `u64`.
    #[inline(always)]
    pub fn value(&self) -> u64 {
        self.q.to_u64()
    }

    /// `2q` as a word.
    #[inline(always)]
    pub fn two_q(&self) -> W {
        self.two_q
    }

    /// Bit length of `q`.
    #[inline(always)]
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Barrett constant floor(2^(2*BITS)/q) as (low, high) words.
    #[inline(always)]
    pub fn barrett_ratio(&self) -> (W, W) {
        self.ratio
    }

    /// `x mod q` for any word `x`. Output reduced.
    #[inline(always)]
    pub fn reduce(&self, x: W) -> W {
        // One-word Barrett: qhat = floor(x * ratio_hi / 2^BITS) underestimates floor(x/q) by at most 1.
        let qhat = x.mul_hi(self.ratio.1);
        let r = x.wsub(qhat.wmul(self.q));
        self.cond_sub(r)
    }

    /// `(hi * 2^BITS + lo) mod q` for any double word. Output reduced.
    #[inline(always)]
    pub fn reduce_wide(&self, lo: W, hi: W) -> W {
        let (r0, r1) = self.ratio;
        // floor(x * ratio / 2^(2*BITS)), dropping the low partial product (error <= 1, fixed below).
        let carry = lo.mul_hi(r0);
        let (t_lo, t_hi) = lo.mul_wide(r1);
        let (t1, c1) = t_lo.add_carry(carry);
        let t3 = t_hi.wadd(W::from_u64(c1 as u64));
        let (u_lo, u_hi) = hi.mul_wide(r0);
        let (_, c2) = u_lo.add_carry(t1);
        let carry = u_hi.wadd(W::from_u64(c2 as u64));
        let qhat = hi.wmul(r1).wadd(t3).wadd(carry);
        let r = lo.wsub(qhat.wmul(self.q));
        self.cond_sub(r)
    }

    /// `r - q` if `r >= q`, else `r`. Input in `[0, 2q)`, output reduced.
    #[inline(always)]
    pub fn cond_sub(&self, r: W) -> W {
        if r >= self.q {
            r.wsub(self.q)
        } else {
            r
        }
    }

    /// `a + b mod q`. Inputs reduced, output reduced.
    #[inline(always)]
    pub fn add(&self, a: W, b: W) -> W {
        self.cond_sub(a.wadd(b))
    }

    /// `a - b mod q`. Inputs reduced, output reduced.
    #[inline(always)]
    pub fn sub(&self, a: W, b: W) -> W {
        if a >= b {
            a.wsub(b)
        } else {
            a.wadd(self.q).wsub(b)
        }
    }

    /// `-a mod q`. Input reduced, output reduced.
    #[inline(always)]
    pub fn neg(&self, a: W) -> W {
        if a == W::ZERO {
            a
        } else {
            self.q.wsub(a)
        }
    }

    /// `a * b mod q` by Barrett reduction of the double-width product. Inputs any words with
    /// `a * b < 2^(2*BITS)` (always true), output reduced.
    #[inline(always)]
    pub fn mul(&self, a: W, b: W) -> W {
        let (lo, hi) = a.mul_wide(b);
        self.reduce_wide(lo, hi)
    }

    /// Shoup's precomputed companion of a constant: `floor(w * 2^BITS / q)`. Requires `w < q`.
    #[inline]
    pub fn shoup(&self, w: W) -> W {
        let wide = (w.to_u64() as u128) << W::BITS;
        W::from_u64((wide / self.value() as u128) as u64)
    }

    /// `x * w mod q` in `[0, 2q)` (Shoup 2007, Harvey 2014 Alg. 2). `x` any word, `w < q`,
    /// `w_shoup = self.shoup(w)`.
    #[inline(always)]
    pub fn mul_shoup_lazy(&self, x: W, w: W, w_shoup: W) -> W {
        let qhat = x.mul_hi(w_shoup);
        x.wmul(w).wsub(qhat.wmul(self.q))
    }

    /// `x * w mod q`, reduced. Same preconditions as [`Self::mul_shoup_lazy`].
    #[inline(always)]
    pub fn mul_shoup(&self, x: W, w: W, w_shoup: W) -> W {
        self.cond_sub(self.mul_shoup_lazy(x, w, w_shoup))
    }

    /// `a^e mod q`. Input any word, output reduced.
    pub fn pow(&self, a: W, mut e: u64) -> W {
        let mut base = self.reduce(a);
        let mut acc = self.reduce(W::ONE);
        while e > 0 {
            if e & 1 == 1 {
                acc = self.mul(acc, base);
            }
            base = self.mul(base, base);
            e >>= 1;
        }
        acc
    }

    /// `a^-1 mod q` by the extended Euclidean algorithm.
    pub fn inv(&self, a: W) -> Result<W> {
        let q = self.value() as i128;
        let a0 = self.reduce(a).to_u64();
        let (mut r0, mut r1) = (q, a0 as i128);
        let (mut t0, mut t1) = (0i128, 1i128);
        while r1 != 0 {
            let k = r0 / r1;
            (r0, r1) = (r1, r0 - k * r1);
            (t0, t1) = (t1, t0 - k * t1);
        }
        if r0 != 1 {
            return Err(MathError::NotInvertible {
                value: a0,
                q: self.value(),
            });
        }
        Ok(W::from_u64(t0.rem_euclid(q) as u64))
    }

    /// Reduces a `u64` value (of any size) into a word.
    #[inline]
    pub fn reduce_u64(&self, x: u64) -> W {
        W::from_u64(x % self.value())
    }

    /// Reduces a signed value modulo `q`.
    #[inline]
    pub fn reduce_i64(&self, x: i64) -> W {
        W::from_u64(x.rem_euclid(self.value() as i64) as u64)
    }
}

/// Montgomery arithmetic for 32-bit words (R = 2^32), for operands kept in Montgomery form.
///
/// Used where one operand is long-lived (keys, plaintexts): one `mont_mul` costs two
/// widening multiplies and one low multiply with no division-like constant per operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Montgomery32 {
    q: u32,
    /// `-q^-1 mod 2^32`.
    q_neg_inv: u32,
    /// `2^64 mod q`, to enter Montgomery form.
    r2: u32,
}

impl Montgomery32 {
    /// Builds the constants for an odd modulus below 2^31.
    pub fn new(m: &Modulus<u32>) -> Result<Self> {
        let q = m.q();
        if q & 1 == 0 {
            return Err(MathError::NotInvertible {
                value: q as u64,
                q: 1 << 32,
            });
        }
        // Newton iteration for q^-1 mod 2^32: each step doubles the correct low bits.
        let mut inv: u32 = q;
        for _ in 0..5 {
            inv = inv.wrapping_mul(2u32.wrapping_sub(q.wrapping_mul(inv)));
        }
        let r2 = ((1u128 << 64) % q as u128) as u32;
        Ok(Self {
            q,
            q_neg_inv: inv.wrapping_neg(),
            r2,
        })
    }

    /// `-q^-1 mod 2^32`.
    #[inline(always)]
    pub fn q_neg_inv(&self) -> u32 {
        self.q_neg_inv
    }

    /// Montgomery reduction: `t * 2^-32 mod q` for `t < q * 2^32`. Output reduced.
    #[inline(always)]
    pub fn reduce(&self, t: u64) -> u32 {
        let m = (t as u32).wrapping_mul(self.q_neg_inv);
        let u = ((t + m as u64 * self.q as u64) >> 32) as u32;
        if u >= self.q {
            u - self.q
        } else {
            u
        }
    }

    /// `a * b * 2^-32 mod q` for reduced `a`, `b`. Output reduced.
    #[inline(always)]
    pub fn mul(&self, a: u32, b: u32) -> u32 {
        self.reduce(a as u64 * b as u64)
    }

    /// Enters Montgomery form: `a * 2^32 mod q`.
    #[inline(always)]
    pub fn to_mont(&self, a: u32) -> u32 {
        self.mul(a, self.r2)
    }

    /// Leaves Montgomery form: `a * 2^-32 mod q`.
    #[inline(always)]
    pub fn from_mont(&self, a: u32) -> u32 {
        self.reduce(a as u64)
    }
}
