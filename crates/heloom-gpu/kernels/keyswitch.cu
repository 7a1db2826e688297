// Key-switching inner product of hybrid key switching (Han-Ki 2020), all digits in one pass:
// for every limb k of Q_l P and coefficient c,
//   acc0[k] = sum_j x_j[k] * b_j[kk],   acc1[k] = sum_j x_j[k] * a_j[kk],
// where x_j[k] is the input `d` itself on digit j's own primes (NTT form) and the raised digit
// elsewhere, and kk the key's limb for k (keys live over Q_L P). Raised digits are stored
// compactly, digit after digit, each without its own limbs; digit j starts at limb
// j * nqp - min(j * alpha, nq). Keys: [b_0, a_0, b_1, a_1, ...], `key_limbs` limbs each.

template <typename W>
__device__ void hk_key_inner_body(const W* d, const W* ext, const W* key, W* acc, u32 nqp,
                                  u32 nq, u32 alpha, u32 ndig, u32 key_limbs, u32 key_nq,
                                  const u32* lp, const W* pt, u32 log_n) {
    const u32 n = 1u << log_n;
    HK_FOR(g, (u64)nqp << log_n) {
        const u32 k = (u32)(g >> log_n);
        const u32 c = (u32)g & (n - 1);
        const ModQ<W> m = ModQ<W>::load(pt, lp[k]);
        const u32 kk = k < nq ? k : key_nq + (k - nq);
        // Lazy double-word sums, one reduction per output (see hk_mac in arith.cuh).
        W l0 = 0, h0 = 0, l1 = 0, h1 = 0;
        for (u32 j = 0; j < ndig; ++j) {
            const u32 lo = j * alpha;
            const u32 hi = lo + alpha < nq ? lo + alpha : nq;
            W x;
            if (k >= lo && k < hi) {
                x = d[(u64)k * n + c];
            } else {
                const u32 done = lo < nq ? lo : nq;
                const u64 off = (u64)j * nqp - done;
                const u32 pos = k < lo ? k : k - (hi - lo);
                x = ext[(off + pos) * n + c];
            }
            const W b = key[((u64)(2 * j) * key_limbs + kk) * n + c];
            const W a = key[((u64)(2 * j + 1) * key_limbs + kk) * n + c];
            hk_mac(l0, h0, x, b);
            hk_mac(l1, h1, x, a);
            if ((j + 1) % HkFold<W>::every == 0) {
                h0 = m.reduce(h0);
                h1 = m.reduce(h1);
            }
        }
        acc[(u64)k * n + c] = m.reduce_wide(l0, h0);
        acc[((u64)nqp + k) * n + c] = m.reduce_wide(l1, h1);
    }
}
#define HK_KEY_INNER_PARAMS(W)                                                              \
    (const W* d, const W* ext, const W* key, W* acc, u32 nqp, u32 nq, u32 alpha, u32 ndig,  \
     u32 key_limbs, u32 key_nq, const u32* lp, const W* pt, u32 log_n)
#define HK_KEY_INNER_ARGS \
    (d, ext, key, acc, nqp, nq, alpha, ndig, key_limbs, key_nq, lp, pt, log_n)
HK_BOTH(hk_key_inner, HK_KEY_INNER_PARAMS, HK_KEY_INNER_ARGS)
