//! The x86 element-wise backends: each one [`Lanes`](super::skeleton::Lanes) type compiled under
//! its target features by the shared skeleton. The 32- and 64-bit Barrett families are generic
//! over the instruction set ([`crate::simd`]); IFMA has arithmetic of its own (`super::ifma`).
//! The Montgomery + Shoup 32-bit product that lost to Barrett by about 13% on Zen 4 is kept
//! here as a tested candidate (`mont_mul`).

use super::barrett32::Barrett32;
use super::barrett64::Barrett64;
use super::skeleton::backend;
use super::Job;
use crate::modulus::Modulus;
use crate::simd::avx2::Avx2;
use crate::simd::avx512::Avx512;

backend!(
    /// AVX2, 32-bit words (8 lanes).
    avx2_u32,
    "avx2",
    u32,
    Barrett32<Avx2>
);
backend!(
    /// AVX-512, 32-bit words (16 lanes).
    avx512_u32,
    "avx512f,avx512dq,avx512bw,avx512vl",
    u32,
    Barrett32<Avx512>
);
backend!(
    /// AVX2, 64-bit words (4 lanes).
    avx2_u64,
    "avx2",
    u64,
    Barrett64<Avx2>
);
backend!(
    /// AVX-512 DQ, 64-bit words (8 lanes).
    avx512_u64,
    "avx512f,avx512dq",
    u64,
    Barrett64<Avx512>
);
backend!(
    /// AVX-512 IFMA, 64-bit words below 50 bits (8 lanes).
    ifma,
    "avx512f,avx512dq,avx512bw,avx512vl,avx512ifma",
    u64,
    super::ifma::Ops
);

#[cfg(test)]
mod tests {
    use core::arch::x86_64::*;

    use super::*;
    use crate::eltwise::barrett32::Barrett32;
    use crate::eltwise::scalar;
    use crate::eltwise::skeleton::Lanes;
    use crate::eltwise::BinOp;
    use crate::primes;
    use crate::simd::Prim32;

    /// The dispatched AVX-512 32-bit kernels.
    type Ops = Barrett32<Avx512>;

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

    /// `a * b mod q` by Montgomery reduction (Montgomery 1985, R = 2^32) then a Shoup multiply
    /// by `R mod q` to leave Montgomery form: `t = hi(ab) - hi(mq)` with `m = lo(ab) q^-1 mod
    /// 2^32` (exact: the low words cancel), `t in (-q, q)`, so `t + q` is a valid Shoup input.
    ///
    /// The measured loser: 21 vector operations with 10 multiplies against Barrett's 18 with 8.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    fn mont_mul(
        a: __m512i,
        b: __m512i,
        l: &Ops,
        qinv: __m512i,
        r1: &(__m512i, __m512i),
    ) -> __m512i {
        let pe = _mm512_mul_epu32(a, b);
        let po = _mm512_mul_epu32(_mm512_srli_epi64::<32>(a), _mm512_srli_epi64::<32>(b));
        let me = _mm512_mul_epu32(pe, qinv);
        let mo = _mm512_mul_epu32(po, qinv);
        let de = _mm512_sub_epi64(pe, _mm512_mul_epu32(me, l.q));
        let d_o = _mm512_sub_epi64(po, _mm512_mul_epu32(mo, l.q));
        // SAFETY: the features are enabled here.
        unsafe {
            let t = _mm512_add_epi32(Avx512::merge_hi(de, d_o), l.q);
            l.mul_scalar(t, r1)
        }
    }

    /// Runs `mont_mul` over whole blocks.
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl")]
    fn mont_all(m: &Modulus<u32>, a: &[u32], b: &[u32]) -> Vec<u32> {
        let q = m.q();
        let mut inv: u32 = q;
        for _ in 0..5 {
            inv = inv.wrapping_mul(2u32.wrapping_sub(q.wrapping_mul(inv)));
        }
        let r1 = ((1u64 << 32) % q as u64) as u32;
        let mut out = vec![0; a.len()];
        // SAFETY: the features are enabled here; every chunk holds 16 words.
        unsafe {
            let l = Ops::new(&Ops::scalars(m));
            let r1 = l.scalar(Ops::pre(m, r1));
            let qinv = _mm512_set1_epi32(inv as i32);
            for ((o, x), y) in out
                .chunks_exact_mut(16)
                .zip(a.chunks_exact(16))
                .zip(b.chunks_exact(16))
            {
                let v = mont_mul(l.load(x.as_ptr()), l.load(y.as_ptr()), &l, qinv, &r1);
                l.store(o.as_mut_ptr(), v);
            }
        }
        out
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
            let job = Job::Binary {
                op: BinOp::Mul,
                out: &mut want,
                a: Some(&a),
                b: &b,
            };
            scalar::run(&m, job);
            // SAFETY: the features were checked by `supported`.
            let got = unsafe { mont_all(&m, &a, &b) };
            assert_eq!(got, want, "q={q}");
        }
    }
}
