//! AVX2 element-wise kernels for 32-bit words (8 lanes). Inputs reduced (`reduce` and
//! `mul_scalar_add` take any 32-bit word: Shoup products accept any `x < 2^32`), outputs
//! reduced; the `len % 8` tail goes through the scalar kernels. Same algorithms as
//! `super::avx512_u32`.
//!
//! Pointwise products `a * b mod q` of two arbitrary vectors use a Barrett reduction (Barrett
//! 1986) of the 64-bit products from `vpmuludq`, with a 32-bit quotient constant
//! `mu = floor(2^(31+L) / q)` (`L` = bits of q) and the high partial product kept, so the
//! quotient estimate is off by at most one and the remainder `ab - qhat q < 2q` fits a 32-bit
//! lane. It beat Montgomery reduction (Montgomery 1985, R = 2^32) followed by a Shoup multiply by
//! `R mod q` (to leave Montgomery form) by about 13% on Zen 4 (AVX-512); see [`mul_vec`]. Powers of two
//! (not NTT primes, but valid moduli) go to the scalar kernels: their `mu` would be 2^32.

use core::arch::x86_64::*;

use super::{scalar, BinOp};
use crate::modulus::Modulus;

/// Words per register.
const LANES: usize = 8;

/// Broadcast constants for one modulus.
#[derive(Clone, Copy)]
struct Consts {
    /// `q` in every lane.
    q: __m256i,
    /// `mu = floor(2^(31+L) / q)` (Barrett quotient constant, below 2^32).
    mu: __m256i,
    /// Shift `s = L - 1` as a shift-count vector.
    s: __m128i,
    /// `32 - s` as a shift-count vector.
    s_up: __m128i,
}

impl Consts {
    /// Broadcasts the constants of `m`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new(m: &Modulus<u32>) -> Self {
        let q = m.q();
        let s = m.bits() - 1;
        let mu = ((1u64 << (32 + s)) / q as u64) as u32;
        Self {
            q: _mm256_set1_epi32(q as i32),
            mu: _mm256_set1_epi32(mu as i32),
            s: _mm_set_epi64x(0, s as i64),
            s_up: _mm_set_epi64x(0, (32 - s) as i64),
        }
    }
}

/// `x - q` if `x >= q`, else `x` (`x < 2q`).
#[inline]
#[target_feature(enable = "avx2")]
fn csub(x: __m256i, q: __m256i) -> __m256i {
    _mm256_min_epu32(x, _mm256_sub_epi32(x, q))
}

/// `a + b mod q` for reduced inputs.
#[inline]
#[target_feature(enable = "avx2")]
fn add_vec(a: __m256i, b: __m256i, c: &Consts) -> __m256i {
    csub(_mm256_add_epi32(a, b), c.q)
}

/// `a - b mod q` for reduced inputs: the wrapped difference is huge exactly when `a < b`.
#[inline]
#[target_feature(enable = "avx2")]
fn sub_vec(a: __m256i, b: __m256i, c: &Consts) -> __m256i {
    let d = _mm256_sub_epi32(a, b);
    _mm256_min_epu32(d, _mm256_add_epi32(d, c.q))
}

/// `-a mod q` for reduced `a` (`q - 0 = q` folds to 0 by the conditional subtraction).
#[inline]
#[target_feature(enable = "avx2")]
fn neg_vec(a: __m256i, c: &Consts) -> __m256i {
    csub(_mm256_sub_epi32(c.q, a), c.q)
}

/// Even lanes from the high words of `even`'s 64-bit lanes, odd lanes from `odd`.
#[inline]
#[target_feature(enable = "avx2")]
fn merge_hi(even: __m256i, odd: __m256i) -> __m256i {
    _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(even), odd)
}

/// Shoup's product `x * w mod q`, reduced, for any `x < 2^32` and broadcast `w < q`,
/// `ws = floor(w 2^32 / q)` (Shoup; Harvey 2014).
#[inline]
#[target_feature(enable = "avx2")]
fn mul_shoup(x: __m256i, w: __m256i, ws: __m256i, q: __m256i) -> __m256i {
    let even = _mm256_mul_epu32(x, ws);
    let odd = _mm256_mul_epu32(_mm256_srli_epi64::<32>(x), ws);
    let hi = merge_hi(even, odd);
    csub(
        _mm256_sub_epi32(_mm256_mullo_epi32(x, w), _mm256_mullo_epi32(hi, q)),
        q,
    )
}

/// Barrett quotient of the 64-bit products in `p` (one per 64-bit lane, `p < q^2`):
/// `floor((p_hi mu + hi32(p_lo mu)) / 2^s)`, at most one below `floor(p / q)`.
#[inline]
#[target_feature(enable = "avx2")]
fn barrett_t(p: __m256i, c: &Consts) -> __m256i {
    let hi = _mm256_mul_epu32(_mm256_srli_epi64::<32>(p), c.mu);
    let lo = _mm256_srli_epi64::<32>(_mm256_mul_epu32(p, c.mu));
    _mm256_add_epi64(hi, lo)
}

/// `a * b mod q` for reduced `a`, `b` (Barrett, see the module docs). 18 vector operations, 8
/// of them multiplies.
///
/// Measured on the Zen 4 development machine (2^14 words, one core, medians): 4.4 us against
/// 21 us scalar; the reduction was chosen on the AVX-512 twin, where it beat Montgomery + Shoup
/// (`mont_mul` in `eltwise/avx512_u32.rs`, kept there as a tested candidate) by about 13%.
#[inline]
#[target_feature(enable = "avx2")]
fn mul_vec(a: __m256i, b: __m256i, c: &Consts) -> __m256i {
    let pe = _mm256_mul_epu32(a, b);
    let po = _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), _mm256_srli_epi64::<32>(b));
    // Quotients: even ones shifted down into the low words, odd ones shifted up into the high
    // words (t < 2^(31+L), so the left shift by 32 - s loses nothing).
    let qe = _mm256_srl_epi64(barrett_t(pe, c), c.s);
    let qo = _mm256_sll_epi64(barrett_t(po, c), c.s_up);
    let qhat = _mm256_blend_epi32::<0b1010_1010>(qe, qo);
    // ab - qhat q is in [0, 2q): exact in wrapping 32-bit arithmetic.
    let r = _mm256_sub_epi32(_mm256_mullo_epi32(a, b), _mm256_mullo_epi32(qhat, c.q));
    csub(r, c.q)
}

/// Runs `f` on 8-word blocks of `out` (and `a` if given, else `out` itself) and `b`, the rest
/// through `tail`.
#[inline]
#[target_feature(enable = "avx2")]
fn zip_blocks(
    out: &mut [u32],
    a: Option<&[u32]>,
    b: &[u32],
    mut f: impl FnMut(__m256i, __m256i) -> __m256i,
) -> usize {
    let n = out
        .len()
        .min(b.len())
        .min(a.map_or(usize::MAX, |a| a.len()));
    let full = n - n % LANES;
    let po = out.as_mut_ptr();
    let pa = a.map_or(po as *const u32, |a| a.as_ptr());
    let pb = b.as_ptr();
    for i in (0..full).step_by(LANES) {
        // SAFETY: i + 8 <= full <= the length of every slice; `pa` is `a` or `out`.
        unsafe {
            let x = _mm256_loadu_si256(pa.add(i) as *const __m256i);
            let y = _mm256_loadu_si256(pb.add(i) as *const __m256i);
            _mm256_storeu_si256(po.add(i) as *mut __m256i, f(x, y));
        }
    }
    full
}

/// Runs `f` on 8-word blocks of `out` (from `a` if given, else in place), returning how many
/// words were done.
#[inline]
#[target_feature(enable = "avx2")]
fn map_blocks(out: &mut [u32], a: Option<&[u32]>, mut f: impl FnMut(__m256i) -> __m256i) -> usize {
    let n = out.len().min(a.map_or(usize::MAX, |a| a.len()));
    let full = n - n % LANES;
    let po = out.as_mut_ptr();
    let pa = a.map_or(po as *const u32, |a| a.as_ptr());
    for i in (0..full).step_by(LANES) {
        // SAFETY: i + 8 <= full <= the length of both slices.
        unsafe {
            let x = _mm256_loadu_si256(pa.add(i) as *const __m256i);
            _mm256_storeu_si256(po.add(i) as *mut __m256i, f(x));
        }
    }
    full
}

/// Vector part of [`binary`]; returns the number of words done.
#[target_feature(enable = "avx2")]
fn binary_impl(
    op: BinOp,
    m: &Modulus<u32>,
    out: &mut [u32],
    a: Option<&[u32]>,
    b: &[u32],
) -> usize {
    let c = Consts::new(m);
    match op {
        BinOp::Add => zip_blocks(out, a, b, |x, y| add_vec(x, y, &c)),
        BinOp::Sub => zip_blocks(out, a, b, |x, y| sub_vec(x, y, &c)),
        BinOp::Mul => zip_blocks(out, a, b, |x, y| mul_vec(x, y, &c)),
    }
}

/// `out = a op b` (or `out op= b`).
pub(crate) fn binary(op: BinOp, m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>, b: &[u32]) {
    if m.q().is_power_of_two() {
        return scalar::binary(op, m, out, a, b);
    }
    // SAFETY: this backend is only selected after checking avx2 on this CPU.
    let done = unsafe { binary_impl(op, m, out, a, b) };
    scalar::binary(op, m, &mut out[done..], a.map(|a| &a[done..]), &b[done..]);
}

/// Vector part of [`neg`].
#[target_feature(enable = "avx2")]
fn neg_impl(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>) -> usize {
    let c = Consts::new(m);
    map_blocks(out, a, |x| neg_vec(x, &c))
}

/// `out = -a` (or `out = -out`).
pub(crate) fn neg(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>) {
    // SAFETY: the CPU features were checked when the backend was chosen.
    let done = unsafe { neg_impl(m, out, a) };
    scalar::neg(m, &mut out[done..], a.map(|a| &a[done..]));
}

/// Vector part of [`mul_scalar`].
#[target_feature(enable = "avx2")]
fn mul_scalar_impl(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>, s: u32) -> usize {
    let c = Consts::new(m);
    let w = _mm256_set1_epi32(s as i32);
    let ws = _mm256_set1_epi32(m.shoup(s) as i32);
    map_blocks(out, a, |x| mul_shoup(x, w, ws, c.q))
}

/// `out = a * s` (or `out *= s`), Shoup with a precomputed companion of `s`.
pub(crate) fn mul_scalar(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>, s: u32) {
    // SAFETY: the CPU features were checked when the backend was chosen.
    let done = unsafe { mul_scalar_impl(m, out, a, s) };
    scalar::mul_scalar(m, &mut out[done..], a.map(|a| &a[done..]), s);
}

/// Vector part of [`mul_add`].
#[target_feature(enable = "avx2")]
fn mul_add_impl(m: &Modulus<u32>, acc: &mut [u32], a: &[u32], b: &[u32]) -> usize {
    let c = Consts::new(m);
    let n = acc.len().min(a.len()).min(b.len());
    let full = n - n % LANES;
    let (pc, pa, pb) = (acc.as_mut_ptr(), a.as_ptr(), b.as_ptr());
    for i in (0..full).step_by(LANES) {
        // SAFETY: i + 8 <= full <= the length of every slice.
        unsafe {
            let x = _mm256_loadu_si256(pa.add(i) as *const __m256i);
            let y = _mm256_loadu_si256(pb.add(i) as *const __m256i);
            let z = _mm256_loadu_si256(pc.add(i) as *const __m256i);
            _mm256_storeu_si256(pc.add(i) as *mut __m256i, add_vec(z, mul_vec(x, y, &c), &c));
        }
    }
    full
}

/// `acc = acc + a * b`.
pub(crate) fn mul_add(m: &Modulus<u32>, acc: &mut [u32], a: &[u32], b: &[u32]) {
    if m.q().is_power_of_two() {
        return scalar::mul_add(m, acc, a, b);
    }
    // SAFETY: the CPU features were checked when the backend was chosen.
    let done = unsafe { mul_add_impl(m, acc, a, b) };
    scalar::mul_add(m, &mut acc[done..], &a[done..], &b[done..]);
}

/// `x mod q` for any `x < 2^32`: Shoup's product by 1, `x - hi(x floor(2^32/q)) q` in
/// `[0, 2q)`, then one conditional subtraction.
#[inline]
#[target_feature(enable = "avx2")]
fn reduce_vec(x: __m256i, r: __m256i, q: __m256i) -> __m256i {
    let even = _mm256_mul_epu32(x, r);
    let odd = _mm256_mul_epu32(_mm256_srli_epi64::<32>(x), r);
    let hi = merge_hi(even, odd);
    csub(_mm256_sub_epi32(x, _mm256_mullo_epi32(hi, q)), q)
}

/// Vector part of [`reduce`].
#[target_feature(enable = "avx2")]
fn reduce_impl(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>) -> usize {
    let q = _mm256_set1_epi32(m.q() as i32);
    let r = _mm256_set1_epi32(m.shoup(1) as i32);
    map_blocks(out, a, |x| reduce_vec(x, r, q))
}

/// `out = a mod q` (or `out = out mod q`) for any words.
pub(crate) fn reduce(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>) {
    // SAFETY: the CPU features were checked when the backend was chosen.
    let done = unsafe { reduce_impl(m, out, a) };
    scalar::reduce(m, &mut out[done..], a.map(|a| &a[done..]));
}

/// Vector part of [`mul_scalar_add`]: `acc + (a s mod q)`, Shoup for any `a < 2^32`.
#[target_feature(enable = "avx2")]
fn mul_scalar_add_impl(m: &Modulus<u32>, acc: &mut [u32], a: &[u32], s: u32) -> usize {
    let c = Consts::new(m);
    let w = _mm256_set1_epi32(s as i32);
    let ws = _mm256_set1_epi32(m.shoup(s) as i32);
    zip_blocks(acc, None, a, |z, x| {
        add_vec(z, mul_shoup(x, w, ws, c.q), &c)
    })
}

/// `acc = acc + a * s` for reduced `acc`, `s < q` and any `a`.
pub(crate) fn mul_scalar_add(m: &Modulus<u32>, acc: &mut [u32], a: &[u32], s: u32) {
    // SAFETY: the CPU features were checked when the backend was chosen.
    let done = unsafe { mul_scalar_add_impl(m, acc, a, s) };
    scalar::mul_scalar_add(m, &mut acc[done..], &a[done..], s);
}

/// Vector part of [`sub_mul_scalar`]: Shoup on `a + q - b`, which lies in `(0, 2q)`.
#[target_feature(enable = "avx2")]
fn sub_mul_scalar_impl(m: &Modulus<u32>, a: &mut [u32], b: &[u32], s: u32) -> usize {
    let c = Consts::new(m);
    let w = _mm256_set1_epi32(s as i32);
    let ws = _mm256_set1_epi32(m.shoup(s) as i32);
    zip_blocks(a, None, b, |x, y| {
        let d = _mm256_sub_epi32(_mm256_add_epi32(x, c.q), y);
        mul_shoup(d, w, ws, c.q)
    })
}

/// `a = (a - b) * s` for reduced `a`, `b` and `s < q`.
pub(crate) fn sub_mul_scalar(m: &Modulus<u32>, a: &mut [u32], b: &[u32], s: u32) {
    // SAFETY: the CPU features were checked when the backend was chosen.
    let done = unsafe { sub_mul_scalar_impl(m, a, b, s) };
    scalar::sub_mul_scalar(m, &mut a[done..], &b[done..], s);
}
