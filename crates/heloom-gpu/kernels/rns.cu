// Exact RNS base conversion of the centered representative (Halevi-Polyakov-Shoup 2019,
// Sec. 2.3), the mod-up and mod-down of hybrid key switching; bit-exact with heloom-math
// `BasisConverter::convert_centered` including its floating-point rounding: the sum
// v = round(sum_i t_i * (1/q_i)) is accumulated in the same order with separately rounded
// products and sums (__dmul_rn / __dadd_rn: no fused multiply-add).
//
// Inputs: k limbs (coefficient form, contiguous from
// `in`), outputs: m limbs (contiguous from `out`). Constant block `cv` (u64 words):
//   [0, k) source primes | [k, k+m) target primes | [k+m, 2k+m) qhat_i^-1 mod q_i |
//   [2k+m, 2k+m+mk) qhat_i mod p_j at j*k+i | next m: -Q mod p_j | next k: 1/q_i as f64 bits.

#define HK_MAX_K 64
#define HK_SMALL_K 8
#define HK_MID_K 16

// One thread per (polynomial, coefficient, group of `grp` consecutive target primes): the
// digits' k residues t_i and v are recomputed per group (k products), which buys the launch
// m / grp times the threads of one per coefficient; the host sizes groups to fill the device.
//
// Each target residue is a lazy sum (Sec. 4.2 of Jung et al. 2021, "Over 100x faster
// bootstrapping"): the double-word products t_i * (qhat_i mod p_j) and v * (-Q mod p_j) are
// added as (lo, hi) with the carry, the high word folded mod p_j every HkFold<W>::every terms,
// and the whole reduced once, instead of a Barrett reduction per term. The sum is congruent and
// the final reduction canonical, so the output is the CPU's word for word.
//
// KMAX: capacity of the per-coefficient residue array, kept in registers (loops unrolled):
// hk_convert (KMAX = 8, 56 registers for u64 words on sm_90), hk_convert_mid (16, 78) and
// hk_convert_wide (64, 180), so that each digit width pays only its own register count.
template <typename W, int KMAX>
__device__ void hk_convert_impl(const W* in, u64 in_stride, W* out, u64 out_stride, u32 npoly,
                                const u64* cv, u32 k, u32 m, const W* pt, u32 log_n, u32 grp) {
    const u32 n = 1u << log_n;
    const u32 groups = (m + grp - 1) / grp;
    const u64* src_primes = cv;
    const u64* dst_primes = cv + k;
    const u64* qhat_inv = cv + k + m;
    const u64* qhat_mod_p = cv + 2 * k + m;
    const u64* neg_q = cv + 2 * k + m + (u64)m * k;
    const u64* inv_q_bits = neg_q + m;
    HK_FOR(g, ((u64)npoly << log_n) * groups) {
        const u32 c = (u32)g & (n - 1);
        const u64 row = g >> log_n;
        const u32 p = (u32)(row % npoly);
        const u32 j0 = (u32)(row / npoly) * grp;
        const u32 j1 = j0 + grp < m ? j0 + grp : m;
        const W* x = in + (u64)p * in_stride + c;
        W* y = out + (u64)p * out_stride + c;
        if (k == 1) {
            // One source prime: ((x + h) mod q) mod p - (h mod p), h = q/2 (exact).
            ModQ<W> mq = ModQ<W>::load(pt, (u32)src_primes[0]);
            W h = mq.q >> 1;
            W shifted = mq.add(x[0], h);
            for (u32 j = j0; j < j1; ++j) {
                ModQ<W> mp = ModQ<W>::load(pt, (u32)dst_primes[j]);
                y[(u64)j * n] = mp.sub(mp.reduce(shifted), mp.reduce(h));
            }
            continue;
        }
        W t[KMAX];
        double acc = 0.0;
        HK_UNROLL_SMALL
        for (u32 i = 0; i < KMAX; ++i) {
            if (i < k) {
                ModQ<W> mq = ModQ<W>::load(pt, (u32)src_primes[i]);
                W ci = (W)qhat_inv[i];
                t[i] = mq.mul(x[(u64)i * n], ci);
                acc = __dadd_rn(acc, __dmul_rn((double)t[i],
                                               __longlong_as_double((long long)inv_q_bits[i])));
            }
        }
        const W v = (W)(u64)round(acc);
        for (u32 j = j0; j < j1; ++j) {
            ModQ<W> mp = ModQ<W>::load(pt, (u32)dst_primes[j]);
            const u64* cj = qhat_mod_p + (u64)j * k;
            W lo = 0, hi = 0;
            HK_UNROLL_SMALL
            for (u32 i = 0; i < KMAX; ++i) {
                if (i < k) {
                    hk_mac(lo, hi, t[i], (W)cj[i]);
                    if ((i + 1) % HkFold<W>::every == 0) hi = mp.reduce(hi);
                }
            }
            hk_mac(lo, hi, v, (W)neg_q[j]);
            y[(u64)j * n] = mp.reduce_wide(lo, hi);
        }
    }
}
#define HK_CONVERT_PARAMS(W)                                                              \
    (const W* in, u64 in_stride, W* out, u64 out_stride, u32 npoly, const u64* cv, u32 k, \
     u32 m, const W* pt, u32 log_n, u32 grp)
#define HK_CONVERT_ARGS (in, in_stride, out, out_stride, npoly, cv, k, m, pt, log_n, grp)
template <typename W>
__device__ void hk_convert_body HK_CONVERT_PARAMS(W) {
    hk_convert_impl<W, HK_SMALL_K> HK_CONVERT_ARGS;
}
template <typename W>
__device__ void hk_convert_mid_body HK_CONVERT_PARAMS(W) {
    hk_convert_impl<W, HK_MID_K> HK_CONVERT_ARGS;
}
template <typename W>
__device__ void hk_convert_wide_body HK_CONVERT_PARAMS(W) {
    hk_convert_impl<W, HK_MAX_K> HK_CONVERT_ARGS;
}
HK_BOTH(hk_convert, HK_CONVERT_PARAMS, HK_CONVERT_ARGS)
HK_BOTH(hk_convert_mid, HK_CONVERT_PARAMS, HK_CONVERT_ARGS)
HK_BOTH(hk_convert_wide, HK_CONVERT_PARAMS, HK_CONVERT_ARGS)
