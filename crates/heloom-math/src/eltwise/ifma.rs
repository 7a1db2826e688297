//! AVX-512 IFMA element-wise kernels for 64-bit words and moduli below 2^50.
//!
//! Eight lanes per step; the tail (length not a multiple of 8) goes through the scalar kernels.
//! Products use the 52-bit IFMA multipliers:
//! - pointwise `a * b`: Barrett reduction (Barrett 1986) of the 100-bit product `P = hi*2^52 + lo`
//!   with `c = floor(P / 2^s)`, `mu = floor(2^(52+s) / q)` (`s` the largest shift with `2^s < q`,
//!   so `mu < 2^52` and `c < 2^51`), `Qhat = madd52hi(c, mu)`, `r = lo - lo52(Qhat*q)` in
//!   `[0, 2.5q)`, then two conditional subtractions;
//! - by a scalar: HEXL-style 52-bit Shoup multiplication (`W' = floor(W*2^52/q)`), exact for
//!   `x < 2^52`; `mul_scalar_add` checks each 8-word block and runs blocks with a larger word
//!   through the AVX-512 DQ Shoup product (exact below 2^63);
//! - `reduce` of arbitrary 64-bit words: the AVX-512 DQ kernel (52-bit multipliers cannot read
//!   a whole word).

use std::arch::x86_64::*;

use super::{scalar, BinOp};
use crate::backend::IFMA_MAX_PRIME_BITS;
use crate::modulus::Modulus;

/// `2^52 - 1`: IFMA multiplies the low 52 bits of each lane.
const MASK52: u64 = (1 << 52) - 1;

/// Lanes per vector.
const LANES: usize = 8;

/// `out = a op b` (or `out = out op b`).
pub(crate) fn binary(op: BinOp, m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>, b: &[u64]) {
    if m.bits() > IFMA_MAX_PRIME_BITS {
        return scalar::binary(op, m, out, a, b);
    }
    let n = common_len(out.len(), a.map(<[u64]>::len), Some(b.len()));
    let main = n - n % LANES;
    // SAFETY: this backend is only selected after the CPU was checked for avx512f/dq/bw/vl/ifma;
    // `main` words of `out`, `a` and `b` are in bounds.
    unsafe {
        binary_simd(
            op,
            m,
            out.as_mut_ptr(),
            a.map(<[u64]>::as_ptr),
            b.as_ptr(),
            main,
        )
    };
    let a_tail = a.map(|a| &a[main..n]);
    scalar::binary(op, m, &mut out[main..n], a_tail, &b[main..n]);
}

/// `out = -a` (or `out = -out`).
pub(crate) fn neg(m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>) {
    let n = common_len(out.len(), a.map(<[u64]>::len), None);
    let main = n - n % LANES;
    // SAFETY: CPU features checked when the backend was selected; `main` words in bounds.
    unsafe { neg_simd(m.q(), out.as_mut_ptr(), a.map(<[u64]>::as_ptr), main) };
    scalar::neg(m, &mut out[main..n], a.map(|a| &a[main..n]));
}

/// `out = a * s` (or `out = out * s`) for a reduced scalar `s`, by 52-bit Shoup multiplication.
pub(crate) fn mul_scalar(m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>, s: u64) {
    if m.bits() > IFMA_MAX_PRIME_BITS || s >= m.q() {
        return scalar::mul_scalar(m, out, a, s);
    }
    let n = common_len(out.len(), a.map(<[u64]>::len), None);
    let main = n - n % LANES;
    // SAFETY: CPU features checked when the backend was selected; `main` words in bounds.
    unsafe { mul_scalar_simd(m.q(), out.as_mut_ptr(), a.map(<[u64]>::as_ptr), s, main) };
    scalar::mul_scalar(m, &mut out[main..n], a.map(|a| &a[main..n]), s);
}

/// `acc = acc + a * b`.
pub(crate) fn mul_add(m: &Modulus<u64>, acc: &mut [u64], a: &[u64], b: &[u64]) {
    if m.bits() > IFMA_MAX_PRIME_BITS {
        return scalar::mul_add(m, acc, a, b);
    }
    let n = common_len(acc.len(), Some(a.len()), Some(b.len()));
    let main = n - n % LANES;
    // SAFETY: CPU features checked when the backend was selected; `main` words in bounds.
    unsafe { mul_add_simd(m.q(), acc.as_mut_ptr(), a.as_ptr(), b.as_ptr(), main) };
    scalar::mul_add(m, &mut acc[main..n], &a[main..n], &b[main..n]);
}

/// `acc0 += x * b; acc1 += x * a` in one pass (each `x` word loaded once).
pub(crate) fn mul_add2(
    m: &Modulus<u64>,
    acc0: &mut [u64],
    acc1: &mut [u64],
    x: &[u64],
    b: &[u64],
    a: &[u64],
) {
    if m.bits() > IFMA_MAX_PRIME_BITS {
        scalar::mul_add(m, acc0, x, b);
        return scalar::mul_add(m, acc1, x, a);
    }
    let n = common_len(acc0.len(), Some(x.len()), Some(b.len())).min(common_len(
        acc1.len(),
        Some(a.len()),
        None,
    ));
    let main = n - n % LANES;
    // SAFETY: CPU features checked when the backend was selected; `main` words in bounds of
    // all five slices.
    unsafe {
        mul_add2_simd(
            m.q(),
            acc0.as_mut_ptr(),
            acc1.as_mut_ptr(),
            x.as_ptr(),
            b.as_ptr(),
            a.as_ptr(),
            main,
        )
    };
    scalar::mul_add(m, &mut acc0[main..n], &x[main..n], &b[main..n]);
    scalar::mul_add(m, &mut acc1[main..n], &x[main..n], &a[main..n]);
}

/// `out = a mod q` (or `out = out mod q`) for any words. IFMA's 52-bit multipliers cannot take
/// a 64-bit word at once, so this forwards to the AVX-512 DQ kernel (the IFMA backend is only
/// selected on CPUs that also have avx512f/dq).
pub(crate) fn reduce(m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>) {
    super::avx512_u64::reduce(m, out, a);
}

/// `acc = acc + a * s` for reduced `acc`, `s < q` and `a < 2^63`: 8-word blocks whose values
/// all fit 52 bits use IFMA Shoup multiplication, other blocks the AVX-512 DQ one.
pub(crate) fn mul_scalar_add(m: &Modulus<u64>, acc: &mut [u64], a: &[u64], s: u64) {
    if m.bits() > IFMA_MAX_PRIME_BITS || s >= m.q() {
        return scalar::mul_scalar_add(m, acc, a, s);
    }
    // The Shoup companions (128-bit divisions) are computed here, outside the vector code, so
    // no vector constant has to live across a division call.
    let ws63 = m.shoup(s) >> 1;
    let wp = shoup52(m.q(), s);
    // SAFETY: CPU features checked when the backend was selected.
    let done = unsafe { mul_scalar_add_simd(m, acc, a, s, wp, ws63) };
    scalar::mul_scalar_add(m, &mut acc[done..], &a[done..], s);
}

/// `a = (a - b) * s` for reduced `a`, `b` and `s < q`.
pub(crate) fn sub_mul_scalar(m: &Modulus<u64>, a: &mut [u64], b: &[u64], s: u64) {
    if m.bits() > IFMA_MAX_PRIME_BITS || s >= m.q() {
        return scalar::sub_mul_scalar(m, a, b, s);
    }
    let wp = shoup52(m.q(), s);
    // SAFETY: CPU features checked when the backend was selected.
    let done = unsafe { sub_mul_scalar_simd(m.q(), a, b, s, wp) };
    scalar::sub_mul_scalar(m, &mut a[done..], &b[done..], s);
}

/// The length all operands share (callers pass equal lengths; the minimum keeps every access in
/// bounds regardless).
fn common_len(out: usize, a: Option<usize>, b: Option<usize>) -> usize {
    out.min(a.unwrap_or(usize::MAX))
        .min(b.unwrap_or(usize::MAX))
}

/// Broadcast constants of one modulus.
#[derive(Clone, Copy)]
struct Consts {
    /// `q`.
    q: __m512i,
    /// `2q`.
    q2: __m512i,
    /// `2^52 - q`: multiplying by it and keeping 52 bits subtracts a multiple of `q` mod 2^52.
    negq: __m512i,
    /// `2^52 - 1`.
    mask: __m512i,
    /// Barrett constant `floor(2^(52+s) / q)`.
    mu: __m512i,
    /// Shift `s` (as a shift-count register).
    shr: __m128i,
    /// `52 - s`.
    shl: __m128i,
}

impl Consts {
    /// Constants for `q < 2^50`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn new(q: u64) -> Self {
        // Largest s with 2^s < q keeps mu below 2^52.
        let s = 63 - (q - 1).leading_zeros();
        let mu = ((1u128 << (52 + s)) / q as u128) as u64;
        Self {
            q: _mm512_set1_epi64(q as i64),
            q2: _mm512_set1_epi64((2 * q) as i64),
            negq: _mm512_set1_epi64(((1u64 << 52) - q) as i64),
            mask: _mm512_set1_epi64(MASK52 as i64),
            mu: _mm512_set1_epi64(mu as i64),
            shr: _mm_cvtsi64_si128(s as i64),
            shl: _mm_cvtsi64_si128(52 - s as i64),
        }
    }
}

/// `v - m` if `v >= m`, else `v` (unsigned `min(v, v - m)`).
#[inline]
#[target_feature(enable = "avx512f")]
fn csub(v: __m512i, m: __m512i) -> __m512i {
    _mm512_min_epu64(v, _mm512_sub_epi64(v, m))
}

/// `x * y mod q` in `[0, 2.5q)` for reduced `x`, `y` (Barrett on the IFMA product, see the
/// module docs).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn mul_lazy(x: __m512i, y: __m512i, c: &Consts) -> __m512i {
    let z = _mm512_setzero_si512();
    let lo = _mm512_madd52lo_epu64(z, x, y);
    let hi = _mm512_madd52hi_epu64(z, x, y);
    // floor(P / 2^s) from the two 52-bit halves of P.
    let top = _mm512_or_si512(_mm512_sll_epi64(hi, c.shl), _mm512_srl_epi64(lo, c.shr));
    let qhat = _mm512_madd52hi_epu64(z, top, c.mu);
    // P - qhat*q < 2.5q < 2^52, so its low 52 bits are the value itself.
    _mm512_and_si512(_mm512_madd52lo_epu64(lo, qhat, c.negq), c.mask)
}

/// Unaligned load of 8 words.
///
/// # Safety
/// `p..p+8` must be readable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn ld(p: *const u64) -> __m512i {
    // SAFETY: the caller guarantees 8 readable words at `p`; loadu has no alignment requirement.
    unsafe { _mm512_loadu_epi64(p as *const i64) }
}

/// Unaligned store of 8 words.
///
/// # Safety
/// `p..p+8` must be writable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn st(p: *mut u64, v: __m512i) {
    // SAFETY: the caller guarantees 8 writable words at `p`; storeu has no alignment requirement.
    unsafe { _mm512_storeu_epi64(p as *mut i64, v) }
}

/// `out[i] = f(a[i], b[i])` for `i < len` (a multiple of 8), `a` defaulting to `out` itself.
///
/// # Safety
/// `out..out+len` writable, `a..a+len` and `b..b+len` readable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn map2(
    out: *mut u64,
    a: Option<*const u64>,
    b: *const u64,
    len: usize,
    f: impl Fn(__m512i, __m512i) -> __m512i,
) {
    let a = a.unwrap_or(out as *const u64);
    let mut i = 0;
    while i < len {
        // SAFETY: i + 8 <= len and the caller guarantees `len` words at each pointer; `a` may
        // equal `out` (in place), which is fine since each vector is read before it is written.
        unsafe { st(out.add(i), f(ld(a.add(i)), ld(b.add(i)))) };
        i += LANES;
    }
}

/// Vector part of [`binary`].
///
/// # Safety
/// CPU has avx512f/dq/bw/vl/ifma; pointers valid for `len` words (a multiple of 8).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn binary_simd(
    op: BinOp,
    m: &Modulus<u64>,
    out: *mut u64,
    a: Option<*const u64>,
    b: *const u64,
    len: usize,
) {
    let c = Consts::new(m.q());
    // SAFETY: forwarded from the caller.
    unsafe {
        match op {
            BinOp::Add => map2(out, a, b, len, |x, y| csub(_mm512_add_epi64(x, y), c.q)),
            // x - y wraps below zero exactly when x < y; then x - y + q is the smaller value.
            BinOp::Sub => map2(out, a, b, len, |x, y| {
                let d = _mm512_sub_epi64(x, y);
                _mm512_min_epu64(d, _mm512_add_epi64(d, c.q))
            }),
            BinOp::Mul => map2(out, a, b, len, |x, y| {
                csub(csub(mul_lazy(x, y, &c), c.q2), c.q)
            }),
        }
    }
}

/// Vector part of [`neg`].
///
/// # Safety
/// CPU has avx512f/dq/bw/vl/ifma; pointers valid for `len` words (a multiple of 8).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn neg_simd(q: u64, out: *mut u64, a: Option<*const u64>, len: usize) {
    let qv = _mm512_set1_epi64(q as i64);
    // SAFETY: forwarded from the caller (`b` is `a` itself, read but unused).
    unsafe {
        let src = a.unwrap_or(out as *const u64);
        // q - x for nonzero lanes, 0 stays 0.
        map2(out, Some(src), src, len, |x, _| {
            _mm512_maskz_sub_epi64(_mm512_test_epi64_mask(x, x), qv, x)
        });
    }
}

/// Vector part of [`mul_scalar`].
///
/// # Safety
/// CPU has avx512f/dq/bw/vl/ifma; pointers valid for `len` words (a multiple of 8); `s < q`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn mul_scalar_simd(q: u64, out: *mut u64, a: Option<*const u64>, s: u64, len: usize) {
    let c = Consts::new(q);
    let w = _mm512_set1_epi64(s as i64);
    let wp = _mm512_set1_epi64((((s as u128) << 52) / q as u128) as i64);
    let z = _mm512_setzero_si512();
    // SAFETY: forwarded from the caller.
    unsafe {
        let src = a.unwrap_or(out as *const u64);
        map2(out, Some(src), src, len, |x, _| {
            // 52-bit Shoup: Q = madd52hi(W', x), T = lo52(W*x) - lo52(Q*q) in [0, 2q).
            let qh = _mm512_madd52hi_epu64(z, wp, x);
            let t = _mm512_madd52lo_epu64(_mm512_madd52lo_epu64(z, w, x), qh, c.negq);
            csub(_mm512_and_si512(t, c.mask), c.q)
        });
    }
}

/// Vector part of [`mul_add`].
///
/// # Safety
/// CPU has avx512f/dq/bw/vl/ifma; pointers valid for `len` words (a multiple of 8).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn mul_add_simd(q: u64, acc: *mut u64, a: *const u64, b: *const u64, len: usize) {
    let c = Consts::new(q);
    let mut i = 0;
    while i < len {
        // SAFETY: i + 8 <= len and the caller guarantees `len` words at each pointer.
        unsafe {
            let p = mul_lazy(ld(a.add(i)), ld(b.add(i)), &c);
            // acc + p < q + 2.5q < 4q: two conditional subtractions reduce it.
            let s = _mm512_add_epi64(ld(acc.add(i)), p);
            st(acc.add(i), csub(csub(s, c.q2), c.q));
        }
        i += LANES;
    }
}

/// Vector part of [`mul_add2`].
///
/// # Safety
/// CPU has avx512f/dq/bw/vl/ifma; pointers valid for `len` words (a multiple of 8).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
unsafe fn mul_add2_simd(
    q: u64,
    acc0: *mut u64,
    acc1: *mut u64,
    x: *const u64,
    b: *const u64,
    a: *const u64,
    len: usize,
) {
    let c = Consts::new(q);
    let mut i = 0;
    while i < len {
        // SAFETY: i + 8 <= len and the caller guarantees `len` words at each pointer.
        unsafe {
            let xv = ld(x.add(i));
            let p0 = mul_lazy(xv, ld(b.add(i)), &c);
            let p1 = mul_lazy(xv, ld(a.add(i)), &c);
            // acc + p < 4q, as in `mul_add_simd`.
            let s0 = _mm512_add_epi64(ld(acc0.add(i)), p0);
            let s1 = _mm512_add_epi64(ld(acc1.add(i)), p1);
            st(acc0.add(i), csub(csub(s0, c.q2), c.q));
            st(acc1.add(i), csub(csub(s1, c.q2), c.q));
        }
        i += LANES;
    }
}

/// The 52-bit Shoup companion `floor(s 2^52 / q)` of a scalar `s < q < 2^50`.
fn shoup52(q: u64, s: u64) -> u64 {
    (((s as u128) << 52) / q as u128) as u64
}

/// `acc + x * s` as `lo52(acc + x s - Q q)` with the 52-bit Shoup quotient `Q` (at most one
/// low for `x < 2^52`), so the result lies in `[0, acc + 2q)` (below 2^52 for `acc + 2q`).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn mul_shoup_acc(acc: __m512i, x: __m512i, w: __m512i, wp: __m512i, c: &Consts) -> __m512i {
    let qh = _mm512_madd52hi_epu64(_mm512_setzero_si512(), wp, x);
    let t = _mm512_madd52lo_epu64(_mm512_madd52lo_epu64(acc, w, x), qh, c.negq);
    _mm512_and_si512(t, c.mask)
}

/// Vector part of [`mul_scalar_add`]; returns the number of words done (a multiple of 8).
///
/// A block with a word of 52 bits or more (IFMA reads only the low 52) takes the AVX-512 DQ
/// Shoup product with the 2^63-scaled companion instead (exact for words below 2^63, see
/// `avx512_u64`); both paths are inline, so the hot loop keeps its constants in registers.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
fn mul_scalar_add_simd(
    m: &Modulus<u64>,
    acc: &mut [u64],
    a: &[u64],
    s: u64,
    wp: u64,
    ws63: u64,
) -> usize {
    let c = Consts::new(m.q());
    let w = _mm512_set1_epi64(s as i64);
    let wp = _mm512_set1_epi64(wp as i64);
    let high = _mm512_set1_epi64(!MASK52 as i64);
    let ws = _mm512_set1_epi64(ws63 as i64);
    let wsh = _mm512_set1_epi64((ws63 >> 32) as i64);
    let q4 = _mm512_set1_epi64((4 * m.q()) as i64);
    let mut done = 0;
    for (o, x) in acc.chunks_exact_mut(LANES).zip(a.chunks_exact(LANES)) {
        // SAFETY: both chunks hold exactly 8 words.
        let (xv, accv) = unsafe { (ld(x.as_ptr()), ld(o.as_ptr())) };
        let t = if _mm512_test_epi64_mask(xv, high) == 0 {
            // acc + [0, 2q) < 3q.
            csub(csub(mul_shoup_acc(accv, xv, w, wp, &c), c.q2), c.q)
        } else {
            // acc + [0, 4q) < 5q.
            let qh = super::avx512_u64::qhat63(xv, ws, wsh);
            let r = _mm512_sub_epi64(_mm512_mullo_epi64(xv, w), _mm512_mullo_epi64(qh, c.q));
            csub(csub(csub(_mm512_add_epi64(accv, r), q4), c.q2), c.q)
        };
        // SAFETY: as above.
        unsafe { st(o.as_mut_ptr(), t) };
        done += LANES;
    }
    done
}

/// Vector part of [`sub_mul_scalar`]; returns the number of words done (a multiple of 8).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")]
fn sub_mul_scalar_simd(q: u64, a: &mut [u64], b: &[u64], s: u64, wp: u64) -> usize {
    let c = Consts::new(q);
    let w = _mm512_set1_epi64(s as i64);
    let wp = _mm512_set1_epi64(wp as i64);
    let z = _mm512_setzero_si512();
    let mut done = 0;
    for (o, y) in a.chunks_exact_mut(LANES).zip(b.chunks_exact(LANES)) {
        // SAFETY: both chunks hold exactly 8 words.
        unsafe {
            // a + q - b in (0, 2q), below 2^51.
            let d = _mm512_sub_epi64(_mm512_add_epi64(ld(o.as_ptr()), c.q), ld(y.as_ptr()));
            st(o.as_mut_ptr(), csub(mul_shoup_acc(z, d, w, wp, &c), c.q));
        }
        done += LANES;
    }
    done
}
