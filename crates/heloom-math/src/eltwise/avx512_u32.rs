//! AVX-512 element-wise kernels for 32-bit words (16 lanes). Inputs reduced (`reduce` and
//! `mul_scalar_add` take any 32-bit word: Shoup products accept any `x < 2^32`), outputs reduced;
//! the `len % 16` tail goes through the scalar kernels.
//!
//! Pointwise products `a * b mod q` of two arbitrary vectors use a Barrett reduction (Barrett
//! 1986) of the 64-bit products from `vpmuludq`, with a 32-bit quotient constant
//! `mu = floor(2^(31+L) / q)` (`L` = bits of q) and the high partial product kept, so the
//! quotient estimate is off by at most one and the remainder `ab - qhat q < 2q` fits a 32-bit
//! lane. It beat Montgomery reduction (Montgomery 1985, R = 2^32) followed by a Shoup multiply by
//! `R mod q` (to leave Montgomery form) by about 13% on Zen 4; see [`mul_vec`]. Powers of two
//! (not NTT primes, but valid moduli) go to the scalar kernels: their `mu` would be 2^32.

use core::arch::x86_64::*;

use super::{scalar, BinOp};
use crate::modulus::Modulus;

/// Words per register.
const LANES: usize = 16;

/// Broadcast constants for one modulus.
#[derive(Clone, Copy)]
struct Consts {
    /// `q` in every lane.
    q: __m512i,
    /// `mu = floor(2^(31+L) / q)` (Barrett quotient constant, below 2^32).
    mu: __m512i,
    /// Shift `s = L - 1` as a shift-count vector.
    s: __m128i,
    /// `32 - s` as a shift-count vector.
    s_up: __m128i,
}

impl Consts {
    /// Broadcasts the constants of `m`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    fn new(m: &Modulus<u32>) -> Self {
        let q = m.q();
        let s = m.bits() - 1;
        let mu = ((1u64 << (32 + s)) / q as u64) as u32;
        Self {
            q: _mm512_set1_epi32(q as i32),
            mu: _mm512_set1_epi32(mu as i32),
            s: _mm_set_epi64x(0, s as i64),
            s_up: _mm_set_epi64x(0, (32 - s) as i64),
        }
    }
}

/// `x - q` if `x >= q`, else `x` (`x < 2q`).
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn csub(x: __m512i, q: __m512i) -> __m512i {
    _mm512_min_epu32(x, _mm512_sub_epi32(x, q))
}

/// `a + b mod q` for reduced inputs.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn add_vec(a: __m512i, b: __m512i, c: &Consts) -> __m512i {
    csub(_mm512_add_epi32(a, b), c.q)
}

/// `a - b mod q` for reduced inputs: the wrapped difference is huge exactly when `a < b`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn sub_vec(a: __m512i, b: __m512i, c: &Consts) -> __m512i {
    let d = _mm512_sub_epi32(a, b);
    _mm512_min_epu32(d, _mm512_add_epi32(d, c.q))
}

/// `-a mod q` for reduced `a` (`q - 0 = q` folds to 0 by the conditional subtraction).
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn neg_vec(a: __m512i, c: &Consts) -> __m512i {
    csub(_mm512_sub_epi32(c.q, a), c.q)
}

/// Even lanes from the high words of `even`'s 64-bit lanes, odd lanes from `odd`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn merge_hi(even: __m512i, odd: __m512i) -> __m512i {
    _mm512_mask_shuffle_epi32::<_MM_PERM_CDAB>(odd, 0x5555, even)
}

/// Shoup's product `x * w mod q`, reduced, for any `x < 2^32` and broadcast `w < q`,
/// `ws = floor(w 2^32 / q)` (Shoup; Harvey 2014).
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn mul_shoup(x: __m512i, w: __m512i, ws: __m512i, q: __m512i) -> __m512i {
    let even = _mm512_mul_epu32(x, ws);
    let odd = _mm512_mul_epu32(_mm512_srli_epi64::<32>(x), ws);
    let hi = merge_hi(even, odd);
    csub(
        _mm512_sub_epi32(_mm512_mullo_epi32(x, w), _mm512_mullo_epi32(hi, q)),
        q,
    )
}

/// Barrett quotient of the 64-bit products in `p` (one per 64-bit lane, `p < q^2`):
/// `floor((p_hi mu + hi32(p_lo mu)) / 2^s)`, at most one below `floor(p / q)`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn barrett_t(p: __m512i, c: &Consts) -> __m512i {
    let hi = _mm512_mul_epu32(_mm512_srli_epi64::<32>(p), c.mu);
    let lo = _mm512_srli_epi64::<32>(_mm512_mul_epu32(p, c.mu));
    _mm512_add_epi64(hi, lo)
}

/// `a * b mod q` for reduced `a`, `b` (Barrett, see the module docs). 18 vector operations, 8
/// of them multiplies.
///
/// Measured on the Zen 4 development machine (2^14 words in L2, one core, medians): Barrett
/// 3.7 us for 30- and 31-bit q, the Montgomery + Shoup alternative (`mont_mul`, test-only)
/// 4.2-4.4 us, so Barrett wins by about 13%; the scalar kernel takes 21 us.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn mul_vec(a: __m512i, b: __m512i, c: &Consts) -> __m512i {
    let pe = _mm512_mul_epu32(a, b);
    let po = _mm512_mul_epu32(_mm512_srli_epi64::<32>(a), _mm512_srli_epi64::<32>(b));
    // Quotients: even ones shifted down into the low words, odd ones shifted up into the high
    // words (t < 2^(31+L), so the left shift by 32 - s loses nothing).
    let qe = _mm512_srl_epi64(barrett_t(pe, c), c.s);
    let qo = _mm512_sll_epi64(barrett_t(po, c), c.s_up);
    let qhat = _mm512_mask_blend_epi32(0xAAAA, qe, qo);
    // ab - qhat q is in [0, 2q): exact in wrapping 32-bit arithmetic.
    let r = _mm512_sub_epi32(_mm512_mullo_epi32(a, b), _mm512_mullo_epi32(qhat, c.q));
    csub(r, c.q)
}

/// Montgomery constants for the alternative product (odd q only).
#[cfg(test)]
#[derive(Clone, Copy)]
struct MontConsts {
    /// `q^-1 mod 2^32` in every lane.
    qinv: __m512i,
    /// `2^32 mod q`.
    r1: __m512i,
    /// Shoup companion of `r1`.
    r1s: __m512i,
}

/// `a * b mod q` by Montgomery reduction (Montgomery 1985, R = 2^32) then a Shoup multiply by
/// `R mod q` to leave Montgomery form: `t = hi(ab) - hi(mq)` with `m = lo(ab) q^-1 mod 2^32`
/// (exact: the low words cancel), `t in (-q, q)`, so `t + q` is a valid Shoup input.
///
/// Kept (tested, not dispatched) as the measured loser: 21 vector operations with 10 multiplies
/// against Barrett's 18 with 8; see [`mul_vec`].
#[cfg(test)]
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn mont_mul(a: __m512i, b: __m512i, c: &Consts, mc: &MontConsts) -> __m512i {
    let pe = _mm512_mul_epu32(a, b);
    let po = _mm512_mul_epu32(_mm512_srli_epi64::<32>(a), _mm512_srli_epi64::<32>(b));
    let me = _mm512_mul_epu32(pe, mc.qinv);
    let mo = _mm512_mul_epu32(po, mc.qinv);
    let de = _mm512_sub_epi64(pe, _mm512_mul_epu32(me, c.q));
    let d_o = _mm512_sub_epi64(po, _mm512_mul_epu32(mo, c.q));
    let t = _mm512_add_epi32(merge_hi(de, d_o), c.q);
    mul_shoup(t, mc.r1, mc.r1s, c.q)
}

/// Runs `f` on 16-word blocks of `out` (and `a` if given, else `out` itself) and `b`, the rest
/// through `tail`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn zip_blocks(
    out: &mut [u32],
    a: Option<&[u32]>,
    b: &[u32],
    mut f: impl FnMut(__m512i, __m512i) -> __m512i,
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
        // SAFETY: i + 16 <= full <= the length of every slice; `pa` is `a` or `out`.
        unsafe {
            let x = _mm512_loadu_si512(pa.add(i) as *const __m512i);
            let y = _mm512_loadu_si512(pb.add(i) as *const __m512i);
            _mm512_storeu_si512(po.add(i) as *mut __m512i, f(x, y));
        }
    }
    full
}

/// Runs `f` on 16-word blocks of `out` (from `a` if given, else in place), returning how many
/// words were done.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn map_blocks(out: &mut [u32], a: Option<&[u32]>, mut f: impl FnMut(__m512i) -> __m512i) -> usize {
    let n = out.len().min(a.map_or(usize::MAX, |a| a.len()));
    let full = n - n % LANES;
    let po = out.as_mut_ptr();
    let pa = a.map_or(po as *const u32, |a| a.as_ptr());
    for i in (0..full).step_by(LANES) {
        // SAFETY: i + 16 <= full <= the length of both slices.
        unsafe {
            let x = _mm512_loadu_si512(pa.add(i) as *const __m512i);
            _mm512_storeu_si512(po.add(i) as *mut __m512i, f(x));
        }
    }
    full
}

/// Vector part of [`binary`]; returns the number of words done.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
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
    // SAFETY: this backend is only selected after checking avx512f/dq/bw/vl on this CPU.
    let done = unsafe { binary_impl(op, m, out, a, b) };
    scalar::binary(op, m, &mut out[done..], a.map(|a| &a[done..]), &b[done..]);
}

/// Vector part of [`neg`].
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
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
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn mul_scalar_impl(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>, s: u32) -> usize {
    let c = Consts::new(m);
    let w = _mm512_set1_epi32(s as i32);
    let ws = _mm512_set1_epi32(m.shoup(s) as i32);
    map_blocks(out, a, |x| mul_shoup(x, w, ws, c.q))
}

/// `out = a * s` (or `out *= s`), Shoup with a precomputed companion of `s`.
pub(crate) fn mul_scalar(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>, s: u32) {
    // SAFETY: the CPU features were checked when the backend was chosen.
    let done = unsafe { mul_scalar_impl(m, out, a, s) };
    scalar::mul_scalar(m, &mut out[done..], a.map(|a| &a[done..]), s);
}

/// Vector part of [`mul_add`].
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn mul_add_impl(m: &Modulus<u32>, acc: &mut [u32], a: &[u32], b: &[u32]) -> usize {
    let c = Consts::new(m);
    let n = acc.len().min(a.len()).min(b.len());
    let full = n - n % LANES;
    let (pc, pa, pb) = (acc.as_mut_ptr(), a.as_ptr(), b.as_ptr());
    for i in (0..full).step_by(LANES) {
        // SAFETY: i + 16 <= full <= the length of every slice.
        unsafe {
            let x = _mm512_loadu_si512(pa.add(i) as *const __m512i);
            let y = _mm512_loadu_si512(pb.add(i) as *const __m512i);
            let z = _mm512_loadu_si512(pc.add(i) as *const __m512i);
            _mm512_storeu_si512(pc.add(i) as *mut __m512i, add_vec(z, mul_vec(x, y, &c), &c));
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
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn reduce_vec(x: __m512i, r: __m512i, q: __m512i) -> __m512i {
    let even = _mm512_mul_epu32(x, r);
    let odd = _mm512_mul_epu32(_mm512_srli_epi64::<32>(x), r);
    let hi = merge_hi(even, odd);
    csub(_mm512_sub_epi32(x, _mm512_mullo_epi32(hi, q)), q)
}

/// Vector part of [`reduce`].
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn reduce_impl(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>) -> usize {
    let q = _mm512_set1_epi32(m.q() as i32);
    let r = _mm512_set1_epi32(m.shoup(1) as i32);
    map_blocks(out, a, |x| reduce_vec(x, r, q))
}

/// `out = a mod q` (or `out = out mod q`) for any words.
pub(crate) fn reduce(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>) {
    // SAFETY: the CPU features were checked when the backend was chosen.
    let done = unsafe { reduce_impl(m, out, a) };
    scalar::reduce(m, &mut out[done..], a.map(|a| &a[done..]));
}

/// Vector part of [`mul_scalar_add`]: `acc + (a s mod q)`, Shoup for any `a < 2^32`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn mul_scalar_add_impl(m: &Modulus<u32>, acc: &mut [u32], a: &[u32], s: u32) -> usize {
    let c = Consts::new(m);
    let w = _mm512_set1_epi32(s as i32);
    let ws = _mm512_set1_epi32(m.shoup(s) as i32);
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
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
fn sub_mul_scalar_impl(m: &Modulus<u32>, a: &mut [u32], b: &[u32], s: u32) -> usize {
    let c = Consts::new(m);
    let w = _mm512_set1_epi32(s as i32);
    let ws = _mm512_set1_epi32(m.shoup(s) as i32);
    zip_blocks(a, None, b, |x, y| {
        let d = _mm512_sub_epi32(_mm512_add_epi32(x, c.q), y);
        mul_shoup(d, w, ws, c.q)
    })
}

/// `a = (a - b) * s` for reduced `a`, `b` and `s < q`.
pub(crate) fn sub_mul_scalar(m: &Modulus<u32>, a: &mut [u32], b: &[u32], s: u32) {
    // SAFETY: the CPU features were checked when the backend was chosen.
    let done = unsafe { sub_mul_scalar_impl(m, a, b, s) };
    scalar::sub_mul_scalar(m, &mut a[done..], &b[done..], s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primes;

    /// Whether this CPU runs the kernels under test.
    fn supported() -> bool {
        let ok = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl");
        if !ok {
            eprintln!("skipping: CPU lacks avx512f/dq/bw/vl");
        }
        ok
    }

    /// Deterministic reduced values with 0 and q-1 mixed in.
    fn values(len: usize, q: u32, seed: u64) -> Vec<u32> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match i % 5 {
                    0 => 0,
                    1 => q - 1,
                    _ => (x % q as u64) as u32,
                }
            })
            .collect()
    }

    /// Moduli under test: NTT primes of 20..=31 bits plus a few odd composites and 2^k.
    fn moduli() -> Vec<Modulus<u32>> {
        let mut qs: Vec<u64> = (20..=31u32)
            .flat_map(|bits| primes::ntt_primes::<u32>(bits, 16, 1).unwrap_or_default())
            .collect();
        qs.extend([3, 1 << 20, (1 << 31) - 1, 1_000_000_007, 65_537]);
        qs.into_iter()
            .filter_map(|q| Modulus::new(q).ok())
            .collect()
    }

    /// The Montgomery + Shoup candidate (not dispatched) is exact too.
    #[test]
    fn montgomery_candidate_is_exact() {
        if !supported() {
            return;
        }
        for m in moduli().into_iter().filter(|m| m.q() % 2 == 1) {
            let q = m.q();
            let a = values(4096, q, 5);
            let b = values(4096, q, 11);
            let mut want = vec![0; 4096];
            scalar::binary(BinOp::Mul, &m, &mut want, Some(&a), &b);
            // SAFETY: the features were checked by `supported`.
            let got = unsafe { mont_all(&m, &a, &b) };
            assert_eq!(got, want, "q={q}");
        }
    }

    /// Runs `mont_mul` over whole blocks.
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    fn mont_all(m: &Modulus<u32>, a: &[u32], b: &[u32]) -> Vec<u32> {
        let q = m.q();
        let c = Consts::new(m);
        let mut inv: u32 = q;
        for _ in 0..5 {
            inv = inv.wrapping_mul(2u32.wrapping_sub(q.wrapping_mul(inv)));
        }
        let r1 = ((1u64 << 32) % q as u64) as u32;
        let mc = MontConsts {
            qinv: _mm512_set1_epi32(inv as i32),
            r1: _mm512_set1_epi32(r1 as i32),
            r1s: _mm512_set1_epi32(m.shoup(r1) as i32),
        };
        let mut out = vec![0; a.len()];
        zip_blocks(&mut out, Some(a), b, |x, y| mont_mul(x, y, &c, &mc));
        out
    }
}
