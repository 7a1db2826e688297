//! AVX-512F/DQ element-wise kernels for 64-bit words (primes up to 61 bits), 8 lanes per vector.
//!
//! Add, subtract and negate use an unsigned `min(x, x - q)` as the conditional subtraction.
//! Products of two variables are formed exactly (four 32x32-bit `vpmuludq`) and reduced by
//! Barrett (Barrett 1986, the shifted form of Shoup's NTL / Intel HEXL): the quotient estimate
//! `(P >> (b-1)) * floor(2^(62+b) / q) >> 63` comes from three 32x32-bit products and is at most
//! 4 too small, so three conditional subtractions (4q, 2q, q) finish. Products by a constant are
//! Shoup multiplications with a 2^63-scaled companion (any `x < 2^63`). `reduce` of arbitrary
//! words is the same Barrett with `P = x`. Tails shorter than a vector go to [`scalar`].

use std::arch::x86_64::*;

use super::{scalar, BinOp};
use crate::modulus::Modulus;

/// Lanes per vector.
const LANES: usize = 8;

/// `out = a op b` (or `out op= b`).
pub(crate) fn binary(op: BinOp, m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>, b: &[u64]) {
    let len = out.len();
    let done = len / LANES * LANES;
    let o = out.as_mut_ptr();
    // In place, the left operand is read through the same pointer that is written.
    let pa = a.map_or(o as *const u64, <[u64]>::as_ptr);
    // SAFETY: the Avx512 backend is only selected after the CPU was checked for avx512f/dq;
    // `a` (when given) and `b` have `len` words like `out` (checked by the caller), and the
    // kernel touches only indices below `done <= len`.
    unsafe { binary_impl(op, m, o, pa, b.as_ptr(), done) };
    scalar::binary(op, m, &mut out[done..], a.map(|a| &a[done..]), &b[done..]);
}

/// `out = -a` (or `out = -out`).
pub(crate) fn neg(m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>) {
    let len = out.len();
    let done = len / LANES * LANES;
    let o = out.as_mut_ptr();
    let pa = a.map_or(o as *const u64, <[u64]>::as_ptr);
    // SAFETY: as in `binary`: avx512f/dq present, all accesses below `done <= len`.
    unsafe { neg_impl(m, o, pa, done) };
    scalar::neg(m, &mut out[done..], a.map(|a| &a[done..]));
}

/// `out = a * s` (or `out *= s`) for a reduced scalar `s`.
pub(crate) fn mul_scalar(m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>, s: u64) {
    let len = out.len();
    let done = len / LANES * LANES;
    let o = out.as_mut_ptr();
    let pa = a.map_or(o as *const u64, <[u64]>::as_ptr);
    // SAFETY: as in `binary`: avx512f/dq present, all accesses below `done <= len`.
    unsafe { mul_scalar_impl(m, o, pa, s, done) };
    scalar::mul_scalar(m, &mut out[done..], a.map(|a| &a[done..]), s);
}

/// `acc = acc + a * b`.
pub(crate) fn mul_add(m: &Modulus<u64>, acc: &mut [u64], a: &[u64], b: &[u64]) {
    let len = acc.len();
    let done = len / LANES * LANES;
    // SAFETY: as in `binary`: avx512f/dq present, all accesses below `done <= len`.
    unsafe { mul_add_impl(m, acc.as_mut_ptr(), a.as_ptr(), b.as_ptr(), done) };
    scalar::mul_add(m, &mut acc[done..], &a[done..], &b[done..]);
}

/// `out = a mod q` (or `out = out mod q`) for any words.
pub(crate) fn reduce(m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>) {
    let len = out.len();
    let done = len / LANES * LANES;
    let o = out.as_mut_ptr();
    let pa = a.map_or(o as *const u64, <[u64]>::as_ptr);
    // SAFETY: as in `binary`: avx512f/dq present (also for the IFMA backend, which forwards
    // here), all accesses below `done <= len`.
    unsafe { reduce_impl(m, o, pa, done) };
    scalar::reduce(m, &mut out[done..], a.map(|a| &a[done..]));
}

/// `acc = acc + a * s` for reduced `acc`, `s < q` and `a < 2^63`.
pub(crate) fn mul_scalar_add(m: &Modulus<u64>, acc: &mut [u64], a: &[u64], s: u64) {
    let len = acc.len();
    let done = len / LANES * LANES;
    // SAFETY: as in `binary`: avx512f/dq present, all accesses below `done <= len`.
    unsafe { mul_scalar_add_impl(m, acc.as_mut_ptr(), a.as_ptr(), s, done) };
    scalar::mul_scalar_add(m, &mut acc[done..], &a[done..], s);
}

/// `a = (a - b) * s` for reduced `a`, `b` and `s < q`.
pub(crate) fn sub_mul_scalar(m: &Modulus<u64>, a: &mut [u64], b: &[u64], s: u64) {
    let len = a.len();
    let done = len / LANES * LANES;
    // SAFETY: as in `binary`: avx512f/dq present, all accesses below `done <= len`.
    unsafe { sub_mul_scalar_impl(m, a.as_mut_ptr(), b.as_ptr(), s, done) };
    scalar::sub_mul_scalar(m, &mut a[done..], &b[done..], s);
}

/// Per-modulus vector constants.
#[derive(Clone, Copy)]
struct Consts {
    /// `q`.
    q: __m512i,
    /// `2q`.
    q2: __m512i,
    /// `4q`.
    q4: __m512i,
    /// Barrett factor `floor(2^(62+b) / q)` (at most 2^63; only its low half is read).
    s: __m512i,
    /// Its high 32 bits.
    sh: __m512i,
    /// Shift count `65 - b` for the high word of the product.
    shl: __m128i,
    /// Shift count `b - 1` for the low word of the product.
    shr: __m128i,
}

/// The constants for `m`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn consts(m: &Modulus<u64>) -> Consts {
    let q = m.q();
    let b = m.bits();
    let s = ((1u128 << (62 + b)) / q as u128) as u64;
    Consts {
        q: _mm512_set1_epi64(q as i64),
        q2: _mm512_set1_epi64((2 * q) as i64),
        q4: _mm512_set1_epi64((4 * q) as i64),
        s: _mm512_set1_epi64(s as i64),
        sh: _mm512_set1_epi64((s >> 32) as i64),
        shl: _mm_set_epi64x(0, i64::from(65 - b)),
        shr: _mm_set_epi64x(0, i64::from(b - 1)),
    }
}

/// `x - m` if `x >= m` else `x`, for `x < 2m` (unsigned min of `x` and the wrapped difference).
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn red(x: __m512i, m: __m512i) -> __m512i {
    _mm512_min_epu64(x, _mm512_sub_epi64(x, m))
}

/// `floor(y * s / 2^63)` minus at most 2, for `y < 2^63`, `s <= 2^63`, `sh = s >> 32`: the
/// dropped `y0*s0 / 2^63 < 2` and the floor of the middle sum lose less than 3. Both middle
/// products are below 2^63, so their sum fits a word.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
pub(super) fn qhat63(y: __m512i, s: __m512i, sh: __m512i) -> __m512i {
    let y1 = _mm512_srli_epi64::<32>(y);
    let hh = _mm512_mul_epu32(y1, sh);
    let mid = _mm512_add_epi64(_mm512_mul_epu32(y1, s), _mm512_mul_epu32(y, sh));
    _mm512_add_epi64(_mm512_add_epi64(hh, hh), _mm512_srli_epi64::<31>(mid))
}

/// `a * b mod q`, reduced, for reduced `a`, `b`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn mul_mod(a: __m512i, b: __m512i, c: &Consts) -> __m512i {
    // Exact 122-bit product: a, b < 2^61, so the middle sum stays below 2^63.
    let a1 = _mm512_srli_epi64::<32>(a);
    let b1 = _mm512_srli_epi64::<32>(b);
    let ll = _mm512_mul_epu32(a, b);
    let mid = _mm512_add_epi64(
        _mm512_add_epi64(_mm512_mul_epu32(a, b1), _mm512_mul_epu32(a1, b)),
        _mm512_srli_epi64::<32>(ll),
    );
    let hi = _mm512_add_epi64(_mm512_mul_epu32(a1, b1), _mm512_srli_epi64::<32>(mid));
    let lo = _mm512_mask_blend_epi32(0x5555, _mm512_slli_epi64::<32>(mid), ll);
    // Barrett: P >> (b-1) < 2^62; quotient at most 4 below floor(P/q) (2 from the shifted
    // factor, 2 from `qhat63`), so the remainder is in [0, 5q).
    let c1 = _mm512_or_si512(_mm512_sll_epi64(hi, c.shl), _mm512_srl_epi64(lo, c.shr));
    let qh = qhat63(c1, c.s, c.sh);
    let r = _mm512_sub_epi64(lo, _mm512_mullo_epi64(qh, c.q));
    red(red(red(r, c.q4), c.q2), c.q)
}

/// Unaligned load of 8 words.
///
/// # Safety
/// `p..p+8` readable.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn ld(p: *const u64) -> __m512i {
    // SAFETY: the caller guarantees 8 readable words at `p`.
    unsafe { _mm512_loadu_si512(p.cast()) }
}

/// Unaligned store of 8 words.
///
/// # Safety
/// `p..p+8` writable.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn st(p: *mut u64, v: __m512i) {
    // SAFETY: the caller guarantees 8 writable words at `p`.
    unsafe { _mm512_storeu_si512(p.cast(), v) }
}

/// Vector part of [`binary`] on the first `len` words (a multiple of 8).
///
/// # Safety
/// avx512f/dq available; `o`, `a`, `b` valid for `len` words (`a` may equal `o`).
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn binary_impl(
    op: BinOp,
    m: &Modulus<u64>,
    o: *mut u64,
    a: *const u64,
    b: *const u64,
    len: usize,
) {
    let c = consts(m);
    match op {
        BinOp::Add => {
            for i in (0..len).step_by(LANES) {
                // SAFETY: i + 8 <= len.
                unsafe {
                    let s = _mm512_add_epi64(ld(a.add(i)), ld(b.add(i)));
                    st(o.add(i), red(s, c.q));
                }
            }
        }
        BinOp::Sub => {
            for i in (0..len).step_by(LANES) {
                // SAFETY: i + 8 <= len.
                unsafe {
                    // a - b wraps when a < b; adding q brings it back, and the min picks it.
                    let d = _mm512_sub_epi64(ld(a.add(i)), ld(b.add(i)));
                    st(o.add(i), _mm512_min_epu64(d, _mm512_add_epi64(d, c.q)));
                }
            }
        }
        BinOp::Mul => {
            for i in (0..len).step_by(LANES) {
                // SAFETY: i + 8 <= len.
                unsafe { st(o.add(i), mul_mod(ld(a.add(i)), ld(b.add(i)), &c)) };
            }
        }
    }
}

/// Vector part of [`neg`].
///
/// # Safety
/// As [`binary_impl`].
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn neg_impl(m: &Modulus<u64>, o: *mut u64, a: *const u64, len: usize) {
    let q = _mm512_set1_epi64(m.q() as i64);
    for i in (0..len).step_by(LANES) {
        // SAFETY: i + 8 <= len.
        unsafe {
            let x = ld(a.add(i));
            // q - x where x != 0, else 0.
            st(
                o.add(i),
                _mm512_maskz_sub_epi64(_mm512_test_epi64_mask(x, x), q, x),
            );
        }
    }
}

/// Vector part of [`mul_scalar`].
///
/// # Safety
/// As [`binary_impl`].
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn mul_scalar_impl(m: &Modulus<u64>, o: *mut u64, a: *const u64, s: u64, len: usize) {
    let c = consts(m);
    // Shoup with the 2^63-scaled companion: remainder in [0, 4q) (see `qhat63`).
    let ws = m.shoup(s) >> 1;
    let w = _mm512_set1_epi64(s as i64);
    let wsv = _mm512_set1_epi64(ws as i64);
    let wsh = _mm512_set1_epi64((ws >> 32) as i64);
    for i in (0..len).step_by(LANES) {
        // SAFETY: i + 8 <= len.
        unsafe {
            let x = ld(a.add(i));
            let qh = qhat63(x, wsv, wsh);
            let r = _mm512_sub_epi64(_mm512_mullo_epi64(x, w), _mm512_mullo_epi64(qh, c.q));
            st(o.add(i), red(red(r, c.q2), c.q));
        }
    }
}

/// Vector part of [`mul_add`].
///
/// # Safety
/// avx512f/dq available; `acc`, `a`, `b` valid for `len` words.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn mul_add_impl(m: &Modulus<u64>, acc: *mut u64, a: *const u64, b: *const u64, len: usize) {
    let c = consts(m);
    for i in (0..len).step_by(LANES) {
        // SAFETY: i + 8 <= len.
        unsafe {
            let p = mul_mod(ld(a.add(i)), ld(b.add(i)), &c);
            let s = _mm512_add_epi64(ld(acc.add(i)), p);
            st(acc.add(i), red(s, c.q));
        }
    }
}

/// Broadcast Shoup constants of a scalar `s < q`: `s` and the 2^63-scaled companion
/// `floor(s 2^63 / q)` with its high half.
#[derive(Clone, Copy)]
struct ShoupConsts {
    w: __m512i,
    ws: __m512i,
    wsh: __m512i,
}

impl ShoupConsts {
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn new(m: &Modulus<u64>, s: u64) -> Self {
        let ws = m.shoup(s) >> 1;
        Self {
            w: _mm512_set1_epi64(s as i64),
            ws: _mm512_set1_epi64(ws as i64),
            wsh: _mm512_set1_epi64((ws >> 32) as i64),
        }
    }
}

/// `x * s mod q` in `[0, 4q)` for `x < 2^63` (Shoup with the 2^63-scaled companion: the
/// companion and `qhat63` lose at most 3 from the quotient).
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn mul_shoup_lazy4(x: __m512i, w: &ShoupConsts, c: &Consts) -> __m512i {
    let qh = qhat63(x, w.ws, w.wsh);
    _mm512_sub_epi64(_mm512_mullo_epi64(x, w.w), _mm512_mullo_epi64(qh, c.q))
}

/// Vector part of [`reduce`].
///
/// # Safety
/// As [`binary_impl`].
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn reduce_impl(m: &Modulus<u64>, o: *mut u64, a: *const u64, len: usize) {
    let c = consts(m);
    for i in (0..len).step_by(LANES) {
        // SAFETY: i + 8 <= len.
        unsafe {
            let x = ld(a.add(i));
            // Barrett as in `mul_mod` with P = x: x >> (b-1) < 2^63, quotient at most 4 low.
            let qh = qhat63(_mm512_srl_epi64(x, c.shr), c.s, c.sh);
            let r = _mm512_sub_epi64(x, _mm512_mullo_epi64(qh, c.q));
            st(o.add(i), red(red(red(r, c.q4), c.q2), c.q));
        }
    }
}

/// Vector part of [`mul_scalar_add`].
///
/// # Safety
/// avx512f/dq available; `acc`, `a` valid for `len` words; `s < q`.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn mul_scalar_add_impl(m: &Modulus<u64>, acc: *mut u64, a: *const u64, s: u64, len: usize) {
    let c = consts(m);
    let w = ShoupConsts::new(m, s);
    for i in (0..len).step_by(LANES) {
        // SAFETY: i + 8 <= len.
        unsafe {
            // acc + [0, 4q) < 5q.
            let t = _mm512_add_epi64(ld(acc.add(i)), mul_shoup_lazy4(ld(a.add(i)), &w, &c));
            st(acc.add(i), red(red(red(t, c.q4), c.q2), c.q));
        }
    }
}

/// Vector part of [`sub_mul_scalar`].
///
/// # Safety
/// avx512f/dq available; `a`, `b` valid for `len` words; `s < q`.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn sub_mul_scalar_impl(m: &Modulus<u64>, a: *mut u64, b: *const u64, s: u64, len: usize) {
    let c = consts(m);
    let w = ShoupConsts::new(m, s);
    for i in (0..len).step_by(LANES) {
        // SAFETY: i + 8 <= len.
        unsafe {
            // a + q - b in (0, 2q).
            let d = _mm512_sub_epi64(_mm512_add_epi64(ld(a.add(i)), c.q), ld(b.add(i)));
            let r = mul_shoup_lazy4(d, &w, &c);
            st(a.add(i), red(red(r, c.q2), c.q));
        }
    }
}
