//! The CKKS encoder: canonical embedding of `C^slots` into `Z[X]/(X^N + 1)` (Cheon, Kim, Kim,
//! Song 2017, Sec. 3.2-3.3), by the O(n log n) "special FFT" over the rotation group `<5> mod 2N`
//! (the structure HEAAN, SEAL and Lattigo use).
//!
//! Slot convention: with `zeta = exp(i*pi/N)`, slot `j` of a full-packing message `m(X)` is
//! `m(zeta^(5^j mod 2N))`, `0 <= j < N/2`. The automorphism `X -> X^(5^k mod 2N)` rotates the
//! slots left by `k`, and `X -> X^(2N-1)` conjugates them.
//!
//! Coefficient layout (CKKS17 Sec. 3.3): since `zeta^(5^j * N/2) = i`, a real `m(X)` evaluated at
//! the slot points equals the complex polynomial `w(X) = sum_{k<N/2} (m_k + i*m_{k+N/2}) X^k`, so
//! encoding is a size-`N/2` complex transform followed by splitting real and imaginary parts.
//!
//! Sparse packing (`slots < N/2`): the message lives in the subring `Z[Y]/(Y^(2*slots) + 1)` with
//! `Y = X^gap`, `gap = N/(2*slots)`. Since `zeta^gap` is a primitive `4*slots`-th root and
//! `5^slots = 1 mod 4*slots`, the same Galois elements rotate the `slots` values cyclically.

use std::f64::consts::TAU;
use std::fmt;

use heloom_math::{Form, Modulus, RnsBasis, RnsPoly, Word};
use num_complex::Complex64;

use crate::error::{CkksError, Result};

/// Smallest supported log2(N).
const MIN_LOG_N: u32 = 4;
/// Largest supported log2(N).
const MAX_LOG_N: u32 = 17;
/// Coefficients must stay below this bound (i128 with headroom for exact sums).
const COEFF_LIMIT: f64 = 85_070_591_730_234_615_865_843_651_857_942_052_864.0; // 2^126
/// Below this bound rounded coefficients are handled as `i64`.
const I64_LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63

/// CKKS encoder for one ring degree: precomputed roots of the special FFT and bit-reversal table.
///
/// Independent of the RNS basis: `encode` reduces into any basis with the same ring degree, and
/// `decode` composes any basis exactly (Garner's mixed-radix CRT).
#[derive(Clone)]
pub struct Encoder {
    n: usize,
    /// log2(N/2).
    log_half: u32,
    /// Butterfly roots, structure of arrays: index `h + j` (`j < h`, `h` a power of two below
    /// `N/2`) holds `exp(2*pi*i * (5^j mod 8h) / 8h)`, the twiddle of the layer that merges blocks
    /// of `h` (CKKS17 special FFT: the half-size transform uses the primitive `4*(2h)`-th root).
    root_re: Vec<f64>,
    root_im: Vec<f64>,
    /// Bit reversal on log2(N/2) bits.
    bitrev: Vec<u32>,
}

impl fmt::Debug for Encoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Encoder")
            .field("n", &self.n)
            .field("max_slots", &self.max_slots())
            .finish_non_exhaustive()
    }
}

/// `exp(2*pi*i * k / m)` with the angle reduced to `[0, pi/4]` for accuracy (`m` divisible by 8).
fn unit_root(k: usize, m: usize) -> (f64, f64) {
    let k = k % m;
    let quarter = m / 4;
    let (quadrant, r) = (k / quarter, k % quarter);
    let (c, s) = if 2 * r <= quarter {
        let t = TAU * r as f64 / m as f64;
        (t.cos(), t.sin())
    } else {
        let t = TAU * (quarter - r) as f64 / m as f64;
        (t.sin(), t.cos())
    };
    // Multiply by i^quadrant.
    match quadrant {
        0 => (c, s),
        1 => (-s, c),
        2 => (-c, -s),
        _ => (s, -c),
    }
}

/// Rounded coefficients of the packed message, compact: entry `u` belongs at `u * gap`.
enum Rounded {
    Small(Vec<i64>),
    Large(Vec<i128>),
}

struct Packed {
    gap: usize,
    coeffs: Rounded,
    /// Largest |coefficient|.
    max_abs: u128,
}

/// `x mod q` for `x < 2^64`.
#[inline(always)]
pub(crate) fn reduce_u64<W: Word>(m: &Modulus<W>, x: u64) -> W {
    if W::BITS == 64 {
        m.reduce(W::from_u64(x))
    } else {
        m.reduce_wide(W::from_u64(x & 0xffff_ffff), W::from_u64(x >> 32))
    }
}

/// `x mod q` for any `x < 2^128`, Horner over words from the top.
#[inline(always)]
pub(crate) fn reduce_u128<W: Word>(m: &Modulus<W>, x: u128) -> W {
    if W::BITS == 64 {
        m.reduce_wide(W::from_u64(x as u64), W::from_u64((x >> 64) as u64))
    } else {
        let mut r = W::ZERO;
        for shift in [96u32, 64, 32, 0] {
            r = m.reduce_wide(W::from_u64((x >> shift) as u64 & 0xffff_ffff), r);
        }
        r
    }
}

/// Round half away from zero for `|x| < 2^63` without a libm call (trunc is one instruction).
#[inline(always)]
fn round_i64(x: f64) -> i64 {
    let t = x as i64;
    let frac = x - t as f64; // exact for |x| < 2^63
    t + i64::from(frac >= 0.5) - i64::from(frac <= -0.5)
}

/// Coefficients composed per block: digits of a block stay in L1 and the digit loops run over
/// independent coefficients.
const CRT_BLOCK: usize = 128;
/// Coefficients whose Garner accumulators are kept in registers together.
const CRT_TILE: usize = 4;

/// Exact CRT composition of one basis (Garner 1959, mixed radix `x = sum d_i * P_i`,
/// `P_i = q_0 * ... * q_{i-1}`), centered and converted to f64.
struct Crt<'a, W: Word> {
    limbs: Vec<&'a [W]>,
    moduli: &'a [Modulus<W>],
    /// Row `i` (offset `i*(i-1)/2`, length `i`): `-P_j * P_i^-1 mod q_i` for `j < i`.
    coef: Vec<u64>,
    /// `P_i^-1 mod q_i`.
    p_inv: Vec<u64>,
    /// `2^34 mod q_i` (32-bit words: folds the Garner accumulators).
    two34: Vec<u64>,
    /// Mixed-radix digits of `(Q - 1) / 2`.
    half: Vec<u64>,
    q_u64: Vec<u64>,
    q_f64: Vec<f64>,
    /// `floor((2^128 - q_i) / q_i)`: below it, `acc * q_i + d` fits a u128.
    horner_limit: Vec<u128>,
}

impl<'a, W: Word> Crt<'a, W> {
    fn new(p: &'a RnsPoly<W>, basis: &'a RnsBasis<W>) -> Result<Self> {
        let moduli = basis.moduli();
        let l = moduli.len();
        let mut coef = Vec::with_capacity(l * l.saturating_sub(1) / 2);
        let mut p_inv = vec![1u64; l];
        for (i, m) in moduli.iter().enumerate().skip(1) {
            // P_j mod q_i for j <= i.
            let mut pj = vec![m.reduce(W::ONE)];
            for mj in &moduli[..i] {
                let last = pj[pj.len() - 1];
                pj.push(m.mul(last, m.reduce(mj.q())));
            }
            let inv = m.inv(pj[i])?;
            p_inv[i] = inv.to_u64();
            coef.extend(pj[..i].iter().map(|&x| m.neg(m.mul(x, inv)).to_u64()));
        }
        let q_u64: Vec<u64> = moduli.iter().map(|m| m.value()).collect();
        // Halve Q - 1 (digits q_i - 1) top-down: N_i = N_{i+1} * q_i + d_i.
        let mut half = vec![0u64; l];
        let mut rem = 0u128;
        for i in (0..l).rev() {
            let cur = rem * q_u64[i] as u128 + (q_u64[i] - 1) as u128;
            half[i] = (cur / 2) as u64;
            rem = cur % 2;
        }
        Ok(Self {
            limbs: p.limbs().collect(),
            moduli,
            coef,
            p_inv,
            half,
            two34: q_u64.iter().map(|&q| (1u64 << 34) % q).collect(),
            q_f64: q_u64.iter().map(|&q| q as f64).collect(),
            horner_limit: q_u64
                .iter()
                .map(|&q| (u128::MAX - (q as u128 - 1)) / q as u128)
                .collect(),
            q_u64,
        })
    }

    /// Centered values of the coefficients at `first + u * stride`, `u < out.len()`
    /// (`out.len() <= CRT_BLOCK`). `res` and `digits` are scratch of `limbs * CRT_BLOCK` words.
    fn compose_block(
        &self,
        first: usize,
        stride: usize,
        out: &mut [f64],
        res: &mut [W],
        digits: &mut [W],
    ) {
        let l = self.moduli.len();
        let b = out.len();
        // Residues of the block, zero-padded to whole tiles.
        for (row, limb) in res.chunks_exact_mut(CRT_BLOCK).zip(&self.limbs) {
            let (head, tail) = row.split_at_mut(b);
            if stride == 1 {
                head.copy_from_slice(&limb[first..first + b]);
            } else {
                for (r, &x) in head.iter_mut().zip(limb[first..].iter().step_by(stride)) {
                    *r = x;
                }
            }
            tail.fill(W::ZERO);
        }
        let tiles = b.div_ceil(CRT_TILE) * CRT_TILE;
        digits[..CRT_BLOCK].copy_from_slice(&res[..CRT_BLOCK]);
        // Garner: d_i = (r_i P_i^-1 + sum_{j<i} d_j (-P_j P_i^-1)) mod q_i, one reduction per
        // digit; accumulators of a tile of coefficients stay in registers.
        let mut row = 0;
        for i in 1..l {
            let m = &self.moduli[i];
            let coefs = &self.coef[row..row + i];
            row += i;
            let inv = self.p_inv[i];
            let (done, rest) = digits.split_at_mut(i * CRT_BLOCK);
            let ri = &res[i * CRT_BLOCK..(i + 1) * CRT_BLOCK];
            for t0 in (0..tiles).step_by(CRT_TILE) {
                let r = &ri[t0..t0 + CRT_TILE];
                let di = &mut rest[t0..t0 + CRT_TILE];
                if W::BITS == 64 {
                    // Products < 2^122: u128 sums, folded every 32 terms.
                    let mut acc = [0u128; CRT_TILE];
                    for t in 0..CRT_TILE {
                        acc[t] = r[t].to_u64() as u128 * inv as u128;
                    }
                    for (j, &c) in coefs.iter().enumerate() {
                        let dj = &done[j * CRT_BLOCK + t0..j * CRT_BLOCK + t0 + CRT_TILE];
                        for t in 0..CRT_TILE {
                            acc[t] += dj[t].to_u64() as u128 * c as u128;
                        }
                        if j & 31 == 30 {
                            for a in acc.iter_mut() {
                                *a = reduce_u128(m, *a).to_u64() as u128;
                            }
                        }
                    }
                    for t in 0..CRT_TILE {
                        di[t] = reduce_u128(m, acc[t]);
                    }
                } else {
                    // Products < 2^62 in u64 sums: after a fold `acc = (acc >> 34) * (2^34 mod q)
                    // + (acc mod 2^34) < 2^61 + 2^34`, three more products fit below 2^64.
                    let k34 = self.two34[i];
                    let mut acc = [0u64; CRT_TILE];
                    for t in 0..CRT_TILE {
                        acc[t] = r[t].to_u64() * inv;
                    }
                    for (j, &c) in coefs.iter().enumerate() {
                        let dj = &done[j * CRT_BLOCK + t0..j * CRT_BLOCK + t0 + CRT_TILE];
                        if j % 3 == 2 {
                            for a in acc.iter_mut() {
                                *a = (*a >> 34) * k34 + (*a & ((1 << 34) - 1));
                            }
                        }
                        for t in 0..CRT_TILE {
                            acc[t] += dj[t].to_u64() * c;
                        }
                    }
                    for t in 0..CRT_TILE {
                        di[t] = reduce_u64(m, acc[t]);
                    }
                }
            }
        }
        let mut col = vec![0u64; l];
        for (u, o) in out.iter_mut().enumerate() {
            for (i, c) in col.iter_mut().enumerate() {
                *c = digits[i * CRT_BLOCK + u].to_u64();
            }
            *o = self.centered_f64(&mut col);
        }
    }

    /// The centered value of the mixed-radix digits `d`, as f64.
    #[inline]
    fn centered_f64(&self, d: &mut [u64]) -> f64 {
        // x > (Q-1)/2 iff its digits are lexicographically larger from the top.
        let mut neg = false;
        for (&di, &hi) in d.iter().zip(&self.half).rev() {
            if di != hi {
                neg = di > hi;
                break;
            }
        }
        if neg {
            // Q - x = (Q - 1 - x) + 1, digit-wise: no cancellation in the f64 conversion.
            let mut carry = true;
            for (di, &q) in d.iter_mut().zip(&self.q_u64) {
                let mut y = q - 1 - *di;
                if carry {
                    y += 1;
                    carry = y == q;
                    if carry {
                        y = 0;
                    }
                }
                *di = y;
            }
        }
        let mag = self.horner(d);
        if neg {
            -mag
        } else {
            mag
        }
    }

    /// `sum d_i P_i` as f64: exact in u128 while it fits (one rounding), then f64 Horner with
    /// nonnegative terms only.
    #[inline]
    fn horner(&self, d: &[u64]) -> f64 {
        let Some(top) = d.iter().rposition(|&x| x != 0) else {
            return 0.0;
        };
        let mut acc = d[top] as u128;
        for i in (0..top).rev() {
            if acc <= self.horner_limit[i] {
                acc = acc * self.q_u64[i] as u128 + d[i] as u128;
            } else {
                let mut v = acc as f64;
                for t in (0..=i).rev() {
                    v = v * self.q_f64[t] + d[t] as f64;
                }
                return v;
            }
        }
        acc as f64
    }
}

impl Encoder {
    /// Encoder for ring degree `n` (a power of two, `2^4..=2^17`).
    pub fn new(n: usize) -> Result<Self> {
        if !n.is_power_of_two() || !((1 << MIN_LOG_N)..=(1 << MAX_LOG_N)).contains(&n) {
            return Err(CkksError::InvalidParameters(format!(
                "ring degree N = {n} is not supported by the encoder: N must be a power of two from 2^{MIN_LOG_N} to 2^{MAX_LOG_N}"
            )));
        }
        let half = n / 2;
        let log_half = half.trailing_zeros();
        let mut root_re = vec![0.0; half];
        let mut root_im = vec![0.0; half];
        let mut h = 1;
        while h < half {
            let m = 8 * h;
            let mut g = 1usize; // 5^j mod 8h
            for j in 0..h {
                let (c, s) = unit_root(g, m);
                root_re[h + j] = c;
                root_im[h + j] = s;
                g = g * 5 % m;
            }
            h *= 2;
        }
        let bitrev = (0..half as u32)
            .map(|t| {
                if log_half == 0 {
                    0
                } else {
                    t.reverse_bits() >> (32 - log_half)
                }
            })
            .collect();
        Ok(Self {
            n,
            log_half,
            root_re,
            root_im,
            bitrev,
        })
    }

    /// Ring degree N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Largest number of slots, N/2.
    pub fn max_slots(&self) -> usize {
        self.n / 2
    }

    fn check_slots(&self, slots: usize) -> Result<()> {
        if slots == 0 || !slots.is_power_of_two() || slots > self.n / 2 {
            return Err(CkksError::InvalidInput(format!(
                "{slots} slots requested: the slot count must be a power of two from 1 to N/2 = {}; pad the values with zeros to the next power of two",
                self.n / 2
            )));
        }
        Ok(())
    }

    fn check_scale(scale: f64) -> Result<()> {
        if !scale.is_finite() || scale <= 0.0 {
            return Err(CkksError::InvalidInput(format!(
                "scale {scale} is not usable: the scale must be a finite positive number (typically 2^20..2^60)"
            )));
        }
        Ok(())
    }

    fn check_basis<W: Word>(&self, basis: &RnsBasis<W>) -> Result<()> {
        if basis.n() != self.n {
            return Err(CkksError::ParameterMismatch(format!(
                "the RNS basis has ring degree {} but the encoder was built for N = {}; use an encoder of the basis' degree",
                basis.n(),
                self.n
            )));
        }
        Ok(())
    }

    /// Shift that turns `bitrev` on log2(N/2) bits into bit reversal on log2(slots) bits.
    fn bitrev_shift(&self, slots: usize) -> u32 {
        self.log_half - slots.trailing_zeros()
    }

    /// Special FFT (decode direction, CKKS17 Alg. "SFFT"): input `w` in bit-reversed order,
    /// output `w(xi^(5^j))`, `xi` a primitive `4*len`-th root, in natural order.
    /// Decimation in time: `z_j = E_j + xi^(5^j) O_j`, `z_(j+len/2) = E_j - xi^(5^j) O_j`
    /// since `5^(len/2) = 1 + 2*len mod 4*len`.
    fn special_fft(&self, re: &mut [f64], im: &mut [f64]) {
        let len = re.len();
        let mut h = 1;
        while h < len {
            self.fft_layer(re, im, h, |(ur, ui), (vr, vi), (cr, ci)| {
                let tr = *vr * cr - *vi * ci;
                let ti = *vr * ci + *vi * cr;
                let (ar, ai) = (*ur, *ui);
                *ur = ar + tr;
                *ui = ai + ti;
                *vr = ar - tr;
                *vi = ai - ti;
            });
            h *= 2;
        }
    }

    /// Inverse special FFT without the `1/len` factor: the layers of [`Self::special_fft`] undone
    /// in reverse order, `(x, y) -> (x + y, (x - y) * conj(w))`; output in bit-reversed order.
    fn special_ifft(&self, re: &mut [f64], im: &mut [f64]) {
        let len = re.len();
        let mut h = len / 2;
        while h >= 1 {
            self.fft_layer(re, im, h, |(ur, ui), (vr, vi), (cr, ci)| {
                let (xr, xi) = (*ur, *ui);
                let (yr, yi) = (*vr, *vi);
                *ur = xr + yr;
                *ui = xi + yi;
                let (dr, di) = (xr - yr, xi - yi);
                *vr = dr * cr + di * ci;
                *vi = di * cr - dr * ci;
            });
            h /= 2;
        }
    }

    /// One layer of the special FFT: `butterfly(u, v, w)` on every pair of points `h` apart
    /// (`u` in the first half of each block of `2h`, `v` in the second), `w` the layer's root
    /// for the pair; points and roots as (real, imaginary) parts.
    fn fft_layer(
        &self,
        re: &mut [f64],
        im: &mut [f64],
        h: usize,
        butterfly: impl Fn((&mut f64, &mut f64), (&mut f64, &mut f64), (f64, f64)),
    ) {
        let (wr, wi) = (&self.root_re[h..2 * h], &self.root_im[h..2 * h]);
        for (br, bi) in re.chunks_exact_mut(2 * h).zip(im.chunks_exact_mut(2 * h)) {
            let (ur, vr) = br.split_at_mut(h);
            let (ui, vi) = bi.split_at_mut(h);
            for (((ur, ui), (vr, vi)), (&cr, &ci)) in ur
                .iter_mut()
                .zip(ui.iter_mut())
                .zip(vr.iter_mut().zip(vi.iter_mut()))
                .zip(wr.iter().zip(wi))
            {
                butterfly((ur, ui), (vr, vi), (cr, ci));
            }
        }
    }

    /// Transforms and rounds: the compact coefficients of the encoding of `slots` values.
    fn pack(&self, slots: usize, value: impl Fn(usize) -> Complex64, scale: f64) -> Result<Packed> {
        self.check_slots(slots)?;
        Self::check_scale(scale)?;
        let mut re = vec![0.0; slots];
        let mut im = vec![0.0; slots];
        for (j, (r, i)) in re.iter_mut().zip(im.iter_mut()).enumerate() {
            let v = value(j);
            if !v.re.is_finite() || !v.im.is_finite() {
                return Err(CkksError::InvalidInput(format!(
                    "values[{j}] = {v} is not finite: CKKS encodes finite numbers only; replace NaN/infinite entries"
                )));
            }
            *r = v.re;
            *i = v.im;
        }
        self.special_ifft(&mut re, &mut im);
        // w_t = a[bitrev(t)] / slots; m'_t = Re w_t, m'_(t+slots) = Im w_t (CKKS17 Sec. 3.3).
        let factor = scale / slots as f64;
        let shift = self.bitrev_shift(slots);
        let mut scaled = vec![0.0; 2 * slots];
        let (lo, hi) = scaled.split_at_mut(slots);
        let mut max_abs = 0.0f64;
        for ((&br, a), b) in self.bitrev[..slots].iter().zip(lo).zip(hi) {
            let p = (br >> shift) as usize;
            *a = re[p] * factor;
            *b = im[p] * factor;
            max_abs = max_abs.max(a.abs()).max(b.abs());
        }
        // An overflowing transform (inf, or NaN from inf - inf) is caught here too.
        if scaled.iter().any(|x| x.is_nan() || x.abs() >= COEFF_LIMIT) {
            return Err(self.too_large(slots, &value, scale, &scaled));
        }
        let gap = self.n / (2 * slots);
        if max_abs < I64_LIMIT {
            let c: Vec<i64> = scaled.iter().map(|&x| round_i64(x)).collect();
            let max_abs = c.iter().map(|x| x.unsigned_abs()).max().unwrap_or(0) as u128;
            Ok(Packed {
                gap,
                coeffs: Rounded::Small(c),
                max_abs,
            })
        } else {
            // |x| >= 2^52 is already an integer; the cast is exact below 2^126.
            let c: Vec<i128> = scaled.iter().map(|&x| x.round() as i128).collect();
            let max_abs = c.iter().map(|x| x.unsigned_abs()).max().unwrap_or(0);
            Ok(Packed {
                gap,
                coeffs: Rounded::Large(c),
                max_abs,
            })
        }
    }

    fn too_large(
        &self,
        slots: usize,
        value: &impl Fn(usize) -> Complex64,
        scale: f64,
        scaled: &[f64],
    ) -> CkksError {
        let (mut jmax, mut vmax) = (0, 0.0f64);
        for j in 0..slots {
            let a = value(j).norm();
            if a > vmax || j == 0 {
                (jmax, vmax) = (j, a);
            }
        }
        let cmax = scaled.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let reach = if cmax.is_finite() {
            format!(
                "reaches about 2^{:.1}, at or above the 2^126 limit",
                cmax.log2()
            )
        } else {
            "overflows f64".to_string()
        };
        CkksError::InvalidInput(format!(
            "message too large for the scale: a plaintext coefficient {reach}; the largest value is values[{jmax}] = {:.6e} (|value| * scale = 2^{:.1}); lower the scale (now 2^{:.1}) or divide the values so that |value| * scale stays well below 2^126",
            value(jmax),
            (vmax * scale).log2(),
            scale.log2()
        ))
    }

    fn packed_to_poly<W: Word>(&self, packed: &Packed, basis: &RnsBasis<W>) -> RnsPoly<W> {
        let mut p = basis.zero(Form::Coeff);
        let gap = packed.gap;
        for (limb, m) in p.limbs_mut().zip(basis.moduli()) {
            let q = m.value();
            match &packed.coeffs {
                Rounded::Small(c) if packed.max_abs < q as u128 => {
                    // |c| < q: one conditional add (vectorizes).
                    let put = |o: &mut W, &c: &i64| {
                        *o = W::from_u64((c + ((c >> 63) & q as i64)) as u64);
                    };
                    if gap == 1 {
                        limb.iter_mut().zip(c).for_each(|(o, c)| put(o, c));
                    } else {
                        limb.iter_mut()
                            .step_by(gap)
                            .zip(c)
                            .for_each(|(o, c)| put(o, c));
                    }
                }
                Rounded::Small(c) => {
                    for (o, &c) in limb.iter_mut().step_by(gap).zip(c) {
                        let r = reduce_u64(m, c.unsigned_abs());
                        *o = if c < 0 { m.neg(r) } else { r };
                    }
                }
                Rounded::Large(c) => {
                    for (o, &c) in limb.iter_mut().step_by(gap).zip(c) {
                        let r = reduce_u128(m, c.unsigned_abs());
                        *o = if c < 0 { m.neg(r) } else { r };
                    }
                }
            }
        }
        p
    }

    /// Integer coefficients (centered, exact `i128`) of the plaintext polynomial encoding
    /// `values` at `scale`: `m = round(scale * tau^-1(values))` (CKKS17 Sec. 3.3).
    ///
    /// `values.len()` is the slot count, a power of two in `[1, N/2]`; fewer than `N/2` slots is
    /// sparse packing (only coefficients at multiples of `N/(2*slots)` are nonzero).
    /// Errors on NaN/infinite values or scale, `scale <= 0`, a bad slot count, or a coefficient of
    /// magnitude `>= 2^126` (message too large for the scale).
    pub fn encode_coeffs(&self, values: &[Complex64], scale: f64) -> Result<Vec<i128>> {
        let packed = self.pack(values.len(), |j| values[j], scale)?;
        let mut out = vec![0i128; self.n];
        let gap = packed.gap;
        match &packed.coeffs {
            Rounded::Small(c) => {
                for (o, &c) in out.iter_mut().step_by(gap).zip(c) {
                    *o = c as i128;
                }
            }
            Rounded::Large(c) => {
                for (o, &c) in out.iter_mut().step_by(gap).zip(c) {
                    *o = c;
                }
            }
        }
        Ok(out)
    }

    /// The encoding of `values` at `scale` (see [`Self::encode_coeffs`]) as a coefficient-form
    /// polynomial of `basis`.
    pub fn encode<W: Word>(
        &self,
        values: &[Complex64],
        scale: f64,
        basis: &RnsBasis<W>,
    ) -> Result<RnsPoly<W>> {
        self.check_basis(basis)?;
        let packed = self.pack(values.len(), |j| values[j], scale)?;
        Ok(self.packed_to_poly(&packed, basis))
    }

    /// Encodes real values (imaginary parts 0); otherwise as [`Self::encode`].
    pub fn encode_real<W: Word>(
        &self,
        values: &[f64],
        scale: f64,
        basis: &RnsBasis<W>,
    ) -> Result<RnsPoly<W>> {
        self.check_basis(basis)?;
        let packed = self.pack(values.len(), |j| Complex64::new(values[j], 0.0), scale)?;
        Ok(self.packed_to_poly(&packed, basis))
    }

    /// Encodes the constant `c = a + bi` in every slot: the polynomial
    /// `round(a*scale) + round(b*scale) * X^(N/2)`, since `zeta^(5^j * N/2) = i` at every slot
    /// point (and `-i` at the conjugate points). Valid for any slot count.
    pub fn encode_constant<W: Word>(
        &self,
        c: Complex64,
        scale: f64,
        basis: &RnsBasis<W>,
    ) -> Result<RnsPoly<W>> {
        self.check_basis(basis)?;
        Self::check_scale(scale)?;
        if !c.re.is_finite() || !c.im.is_finite() {
            return Err(CkksError::InvalidInput(format!(
                "constant {c} is not finite: CKKS encodes finite numbers only"
            )));
        }
        let (a, b) = (c.re * scale, c.im * scale);
        if a.abs() >= COEFF_LIMIT || b.abs() >= COEFF_LIMIT {
            return Err(CkksError::InvalidInput(format!(
                "constant {c} is too large for scale 2^{:.1}: |constant| * scale must stay below 2^126; lower the scale or the constant",
                scale.log2()
            )));
        }
        let (a, b) = (a.round() as i128, b.round() as i128);
        let mut p = basis.zero(Form::Coeff);
        let half = self.n / 2;
        for (limb, m) in p.limbs_mut().zip(basis.moduli()) {
            for (pos, v) in [(0, a), (half, b)] {
                let r = reduce_u128(m, v.unsigned_abs());
                limb[pos] = if v < 0 { m.neg(r) } else { r };
            }
        }
        Ok(p)
    }

    fn check_poly<W: Word>(&self, p: &RnsPoly<W>, basis: &RnsBasis<W>) -> Result<()> {
        self.check_basis(basis)?;
        if !basis.owns(p) {
            return Err(CkksError::ParameterMismatch(format!(
                "the polynomial (N = {}, {} limbs) does not belong to the given basis (N = {}, {} primes); decode with the basis the polynomial was built on",
                p.n(),
                p.num_limbs(),
                basis.n(),
                basis.len()
            )));
        }
        if p.form() != Form::Coeff {
            return Err(CkksError::InvalidInput(
                "the polynomial is in NTT form; apply the basis' inverse NTT before decoding"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Centered coefficients at positions `u * stride`, as f64.
    fn centered<W: Word>(
        &self,
        p: &RnsPoly<W>,
        basis: &RnsBasis<W>,
        stride: usize,
    ) -> Result<Vec<f64>> {
        let count = self.n / stride;
        if basis.len() == 1 {
            let q = basis.moduli()[0].value();
            let h = (q - 1) / 2;
            return Ok(p
                .limb(0)
                .iter()
                .step_by(stride)
                .map(|&x| {
                    let x = x.to_u64();
                    if x > h {
                        -((q - x) as f64)
                    } else {
                        x as f64
                    }
                })
                .collect());
        }
        let crt = Crt::new(p, basis)?;
        let mut res = vec![W::ZERO; basis.len() * CRT_BLOCK];
        let mut digits = vec![W::ZERO; basis.len() * CRT_BLOCK];
        let mut out = vec![0.0; count];
        for (blk, o) in out.chunks_mut(CRT_BLOCK).enumerate() {
            crt.compose_block(blk * CRT_BLOCK * stride, stride, o, &mut res, &mut digits);
        }
        Ok(out)
    }

    /// The centered coefficients of a coefficient-form polynomial of `basis` as f64 (exact CRT
    /// composition, rounded once), as used by [`Self::decode`]; for noise measurements.
    pub fn coeffs_to_f64<W: Word>(&self, p: &RnsPoly<W>, basis: &RnsBasis<W>) -> Result<Vec<f64>> {
        self.check_poly(p, basis)?;
        self.centered(p, basis, 1)
    }

    /// Decodes a coefficient-form polynomial of `basis` (all limbs) to `slots` complex values,
    /// divided by `scale`: `tau(m) / scale` on the slot points (CKKS17 Sec. 3.3).
    ///
    /// The coefficients are composed exactly (Garner's mixed radix, centered, converted to f64
    /// without cancellation); with `slots < N/2` only the subring coefficients at multiples of
    /// `N/(2*slots)` are read.
    pub fn decode<W: Word>(
        &self,
        p: &RnsPoly<W>,
        basis: &RnsBasis<W>,
        slots: usize,
        scale: f64,
    ) -> Result<Vec<Complex64>> {
        self.check_poly(p, basis)?;
        self.check_slots(slots)?;
        Self::check_scale(scale)?;
        let gap = self.n / (2 * slots);
        let c = self.centered(p, basis, gap)?;
        let inv = 1.0 / scale;
        let shift = self.bitrev_shift(slots);
        let mut re = vec![0.0; slots];
        let mut im = vec![0.0; slots];
        // w_t = m'_t + i m'_(t+slots), placed bit-reversed for the decimation-in-time transform.
        let (lo, hi) = c.split_at(slots);
        for ((&br, &a), &b) in self.bitrev[..slots].iter().zip(lo).zip(hi) {
            let p = (br >> shift) as usize;
            re[p] = a * inv;
            im[p] = b * inv;
        }
        self.special_fft(&mut re, &mut im);
        Ok(re
            .into_iter()
            .zip(im)
            .map(|(r, i)| Complex64::new(r, i))
            .collect())
    }
}
