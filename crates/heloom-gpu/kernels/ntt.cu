// Negacyclic NTT with coefficient-level parallelism (Kim et al. 2020 "Accelerating FHE on
// GPUs", 100x paper: shared-memory radix-2^k phases). heloom's NTT order (heloom-math ntt):
// forward = Cooley-Tukey with psi^bitrev(k) roots, output in bit-reversed order; inverse =
// Gentleman-Sande with N^-1 folded into the last layer, output in natural order.
//
// One launch processes the butterfly bits [lb, hb) of every limb. A block owns the 2^(hb-lb)
// indices that differ only in those bits, times C = 2^c_log consecutive low indices (for
// coalesced loads), in shared memory; the host splits log N into at most two such phases
// (tiles of at most 4096 words). Values stay lazy (Harvey's [0, 4q) forward, [0, 2q) inverse)
// when 4q fits the word, else fully reduced; the last layer leaves them reduced.
//
// Layout: `npoly` polynomials `stride` words apart, limb `k` at `k * N`; the block row
// blockIdx.y = p * nl + (k - limb0) picks the polynomial and limb, `lp[k]` the prime.
//
// Load modes (forward): 0 plain; 1 "spread" (rescale): every limb's input is the one limb at
// `in + p * in_stride` (coefficient form modulo prime `src_prime`), centered and reduced to
// this limb's prime: ((x + q_src/2) mod q_src) mod q_k - (q_src/2 mod q_k).
// Store modes (forward): 0 plain; 1 "sub-scale" (rescale, mod-down): out = (orig - x) * s_k,
// plus the addend for the first `addend_np` polynomials, with s_k = scal[2k] and its Shoup
// companion scal[2k + 1].

#define HK_TILE_MAX 4096

// Largest radix of a round, log2 (2: radix 4, 3: radix 8, 4: radix 16), for the forward and the
// inverse kernels separately: the kernel argument packs both (forward in bits 0-7, inverse in
// bits 8-15). The CUDA build defines HK_NTT_RADIX_LOG_FWD and HK_NTT_RADIX_LOG_INV (from
// HELOOM_GPU_NTT_RADIX) so that only those round sizes are compiled and each kernel pays only
// its registers; without them (the emulator, the compile checks) the kernel argument chooses
// and every round size is compiled.
#ifdef HK_NTT_RADIX_LOG_FWD
#define HK_RADIX_LOG_FWD(arg) ((u32)HK_NTT_RADIX_LOG_FWD)
#define HK_RADIX_LOG_INV(arg) ((u32)HK_NTT_RADIX_LOG_INV)
#else
#define HK_RADIX_LOG_FWD(arg) ((arg) & 0xffu)
#define HK_RADIX_LOG_INV(arg) (((arg) >> 8) & 0xffu)
#endif

// Words a thread loads from global memory before it stores any of them to shared memory. The
// source is a generic pointer, which the compiler cannot tell from shared memory, so a shared
// store between two loads orders them: one load in flight per thread left the first phase of a
// 2^16 x 30-limb NTT at 20% of an H100's DRAM bandwidth (Nsight Compute). Eight in flight.
#define HK_LOAD_BATCH 8

template <typename W>
__device__ __forceinline__ void hk_fwd_bf(const ModQ<W>& m, bool lazy, W& x, W& y, W w, W ws) {
    if (lazy) {
        W tq = m.two_q();
        W u = x >= tq ? x - tq : x;
        W t = m.mul_shoup_lazy(y, w, ws);
        x = u + t;
        y = u - t + tq;
    } else {
        W t = m.mul_shoup(y, w, ws);
        W u = x;
        x = m.add(u, t);
        y = m.sub(u, t);
    }
}

// Gentleman-Sande butterfly: inputs below 2q (lazy) or q; the last layer of the transform folds
// in N^-1 (sum) and N^-1 psi^-bitrev(1) (difference) and leaves both reduced.
template <typename W>
__device__ __forceinline__ void hk_inv_bf(const ModQ<W>& m, bool lazy, bool final_layer, W& x,
                                          W& y, W w, W ws, W n_inv, W n_inv_s, W n_inv_w,
                                          W n_inv_ws) {
    // Sum and difference as words below 2^w: [0, 4q) lazily, [0, 2q) otherwise.
    W bound = lazy ? m.two_q() : m.q;
    W s = x + y;
    W d = x - y + bound;
    if (final_layer) {
        x = m.mul_shoup(s, n_inv, n_inv_s);
        y = m.mul_shoup(d, n_inv_w, n_inv_ws);
    } else if (lazy) {
        x = s >= bound ? s - bound : s;
        y = m.mul_shoup_lazy(d, w, ws);
    } else {
        x = m.cond_sub(s);
        y = m.mul_shoup(m.cond_sub(d), w, ws);
    }
}

template <typename W>
__device__ __forceinline__ W hk_full_reduce(const ModQ<W>& m, bool lazy, W v) {
    if (lazy) {
        W tq = m.two_q();
        v = v >= tq ? v - tq : v;
    }
    return m.cond_sub(v);
}

// A block's tile: polynomial p and limb k of the launch, and the index arithmetic of its
// 2^(hb - lb) x C words (bits [lb, hb) vary inside the tile, C consecutive low indices).
struct HkTile {
    u32 n, p, k, lb, hb, c_log, C, tile, high, low0;

    __device__ __forceinline__ HkTile(u32 log_n, u32 nl, u32 limb0, u32 lb_, u32 hb_,
                                      u32 c_log_) {
        n = 1u << log_n;
        p = blockIdx.y / nl;
        k = limb0 + blockIdx.y % nl;
        lb = lb_;
        hb = hb_;
        c_log = c_log_;
        C = 1u << c_log;
        tile = 1u << (hb - lb + c_log);
        const u32 lows = 1u << (lb - c_log);
        high = blockIdx.x / lows;
        low0 = (blockIdx.x % lows) << c_log;
    }
    // Global index of tile word e.
    __device__ __forceinline__ u32 global(u32 e) const {
        return (high << hb) | ((e >> c_log) << lb) | (low0 + (e & (C - 1)));
    }
    // Butterfly t of the layer on local bit lbit: its two tile words and the global index of
    // the first.
    __device__ __forceinline__ void pair(u32 t, u32 lbit, u32& sx, u32& sy, u32& jx) const {
        const u32 low = t & (C - 1), pm = t >> c_log;
        const u32 mx = ((pm >> lbit) << (lbit + 1)) | (pm & ((1u << lbit) - 1));
        sx = (mx << c_log) | low;
        sy = sx | (1u << (lbit + c_log));
        jx = (high << hb) | (mx << lb) | (low0 + low);
    }
    // Radix-2^R group t of the layers on local bits [lo_bit, lo_bit + R): the tile word of its
    // element 0 (element e is at s0 | (e << (lo_bit + c_log))) and that word's global index
    // (element e's is j0 | (e << (lb + lo_bit))).
    __device__ __forceinline__ void group(u32 t, u32 lo_bit, u32 r, u32& s0, u32& j0) const {
        const u32 low = t & (C - 1), pm = t >> c_log;
        const u32 m0 = ((pm >> lo_bit) << (lo_bit + r)) | (pm & ((1u << lo_bit) - 1));
        s0 = (m0 << c_log) | low;
        j0 = (high << hb) | (m0 << lb) | (low0 + low);
    }
    // Radix-4 group t of the layers on local bits lo_bit and lo_bit + 1: its four tile words
    // (s01 differs in the lower bit, s10 in the upper) and the global index of the first.
    __device__ __forceinline__ void quad(u32 t, u32 lo_bit, u32& s00, u32& s01, u32& s10,
                                         u32& s11, u32& j00) const {
        const u32 low = t & (C - 1), pm = t >> c_log;
        const u32 m00 = ((pm >> lo_bit) << (lo_bit + 2)) | (pm & ((1u << lo_bit) - 1));
        s00 = (m00 << c_log) | low;
        s01 = s00 | (1u << (lo_bit + c_log));
        s10 = s00 | (1u << (lo_bit + 1 + c_log));
        s11 = s01 | s10;
        j00 = (high << hb) | (m00 << lb) | (low0 + low);
    }
};

// A block's tile into shared memory, HK_LOAD_BATCH global loads in flight per thread before
// any shared store (see HK_LOAD_BATCH). SPREAD (rescale): every word is centred with the
// source prime's half and reduced to this limb's prime.
template <typename W, int SPREAD>
__device__ __forceinline__ void hk_load_tile(W* sm, const W* src, const HkTile& g,
                                             const ModQ<W>& m, const ModQ<W>& ms, W half,
                                             W half_k) {
    for (u32 e0 = threadIdx.x; e0 < g.tile; e0 += HK_LOAD_BATCH * blockDim.x) {
        W v[HK_LOAD_BATCH];
        HK_UNROLL_SMALL
        for (u32 i = 0; i < HK_LOAD_BATCH; ++i) {
            const u32 e = e0 + i * blockDim.x;
            v[i] = e < g.tile ? src[g.global(e)] : (W)0;
        }
        HK_UNROLL_SMALL
        for (u32 i = 0; i < HK_LOAD_BATCH; ++i) {
            const u32 e = e0 + i * blockDim.x;
            if (e < g.tile) {
                W x = v[i];
                if (SPREAD == 1) x = m.sub(m.reduce(ms.add(x, half)), half_k);
                sm[e] = x;
            }
        }
    }
}

// A radix-2^R group's words between shared memory and registers (LOAD: into `x`).
template <typename W, int R, bool LOAD>
__device__ __forceinline__ void hk_group_move(W* sm, W* x, u32 s0, u32 stride_log) {
    HK_UNROLL_SMALL
    for (u32 e = 0; e < (1u << R); ++e) {
        if (LOAD) {
            x[e] = sm[s0 | (e << stride_log)];
        } else {
            sm[s0 | (e << stride_log)] = x[e];
        }
    }
}

// Layer L of a radix-2^R round (see hk_round), then the next: forward the layers below it
// (Cooley-Tukey), INV the layers above it (Gentleman-Sande; N^-1 folded into the transform's
// last layer). A template per layer, so that every loop bound and register index is a
// compile-time constant: with the layer as a loop variable the compiler left a 16-word group
// in local memory.
template <typename W, int R, int L, bool INV>
struct HkLayer {
    __device__ __forceinline__ static void run(W* x, const ModQ<W>& m, bool lazy, const W* rt,
                                               const W* rts, u32 n, u32 b0, u32 j0, u32 log_n,
                                               W n_inv, W n_inv_s, W n_inv_w, W n_inv_ws) {
        const u32 b = b0 + L;
        const bool fin = b + 1 == log_n;
        const u32 base = (n >> (b + 1)) + (j0 >> (b + 1));
        HK_UNROLL_SMALL
        for (u32 h = 0; h < (1u << (R - 1 - L)); ++h) {
            const W w = rt[base + h], ws = rts[base + h];
            HK_UNROLL_SMALL
            for (u32 lo = 0; lo < (1u << L); ++lo) {
                const u32 e = (h << (L + 1)) | lo;
                if (INV) {
                    hk_inv_bf(m, lazy, fin, x[e], x[e | (1u << L)], w, ws, n_inv, n_inv_s,
                              n_inv_w, n_inv_ws);
                } else {
                    hk_fwd_bf(m, lazy, x[e], x[e | (1u << L)], w, ws);
                }
            }
        }
        HkLayer<W, R, INV ? L + 1 : L - 1, INV>::run(x, m, lazy, rt, rts, n, b0, j0, log_n, n_inv,
                                                     n_inv_s, n_inv_w, n_inv_ws);
    }
};
// Past the last layer: forward below layer 0, inverse above layer R - 1.
template <typename W, int R>
struct HkLayer<W, R, -1, false> {
    __device__ __forceinline__ static void run(W*, const ModQ<W>&, bool, const W*, const W*, u32,
                                               u32, u32, u32, W, W, W, W) {}
};
template <typename W, int R>
struct HkLayer<W, R, R, true> {
    __device__ __forceinline__ static void run(W*, const ModQ<W>&, bool, const W*, const W*, u32,
                                               u32, u32, u32, W, W, W, W) {}
};

// One round of 2^R words per thread in registers. Forward: R Cooley-Tukey layers on local
// bits [lo_bit, lo_bit + R), the top one first. A layer on global bit b pairs e with e | 2^l
// (b = lb + lo_bit + l) under the root psi^bitrev(n / 2^(b+1) + (j_e >> (b+1))), and since
// element e's global index is j0 | (e << (lb + lo_bit)), that root index is
// n / 2^(b+1) + (j0 >> (b+1)) + (e >> (l+1)): one root per 2^(l+1) elements, loaded once.
// INV: R Gentleman-Sande layers, the bottom one first, same root indexing; the transform's
// last layer (global bit log_n - 1) folds in N^-1 (the n_inv constants; unused forward).
template <typename W, int R, bool INV>
__device__ __forceinline__ void hk_round(W* sm, const HkTile& g, const ModQ<W>& m, bool lazy,
                                         const W* rt, const W* rts, u32 lo_bit, u32 log_n,
                                         W n_inv, W n_inv_s, W n_inv_w, W n_inv_ws) {
    const u32 b0 = g.lb + lo_bit;
    const u32 stride_log = lo_bit + g.c_log;
    for (u32 t = threadIdx.x; t < (g.tile >> R); t += blockDim.x) {
        u32 s0, j0;
        g.group(t, lo_bit, R, s0, j0);
        W x[1 << R];
        hk_group_move<W, R, true>(sm, x, s0, stride_log);
        HkLayer<W, R, INV ? 0 : R - 1, INV>::run(x, m, lazy, rt, rts, g.n, b0, j0, log_n, n_inv,
                                                 n_inv_s, n_inv_w, n_inv_ws);
        hk_group_move<W, R, false>(sm, x, s0, stride_log);
    }
}

template <typename W, int LOAD, int STORE>
__device__ void hk_ntt_fwd_impl(const W* in, u64 in_stride, W* out, u64 out_stride, u32 nl,
                                u32 limb0, const u32* lp, const W* roots, const W* roots_sh,
                                const W* pt, u32 log_n, u32 lb, u32 hb, u32 c_log, u32 lazy_flag,
                                u32 src_prime, const W* orig, u64 orig_stride, const W* scal,
                                const W* addend, u64 addend_stride, u32 addend_np,
                                u32 radix_log) {
    HK_SHARED(W, sm);
    const HkTile g(log_n, nl, limb0, lb, hb, c_log);
    const u32 n = g.n, p = g.p, k = g.k, tile = g.tile;
    const u32 prime = lp[k];
    const ModQ<W> m = ModQ<W>::load(pt, prime);
    const bool lazy = lazy_flag != 0;
    const W* rt = roots + (u64)prime * n;
    const W* rts = roots_sh + (u64)prime * n;

    // Spread source: the centering constant of the source prime and its image mod q_k.
    ModQ<W> ms = m;
    W half = 0, half_k = 0;
    const W* src = in + (u64)p * in_stride + (u64)k * n;
    if (LOAD == 1) {
        ms = ModQ<W>::load(pt, src_prime);
        half = ms.q >> 1;
        half_k = m.reduce(half);
        src = in + (u64)p * in_stride;
    }
    hk_load_tile<W, LOAD>(sm, src, g, m, ms, half, half_k);
    __syncthreads();
    // Rounds of up to 2^HK_RADIX_LOG_* words a thread in registers (radix 8 or 16), then radix 4,
    // then a single radix-2 layer when an odd one is left; one barrier per round.
    int b = (int)hb - 1;
    while (b >= (int)lb) {
        if (HK_RADIX_LOG_FWD(radix_log) >= 4 && b - 3 >= (int)lb) {
            hk_round<W, 4, false>(sm, g, m, lazy, rt, rts, (u32)b - 3 - lb, log_n, 0, 0, 0, 0);
            b -= 4;
        } else if (HK_RADIX_LOG_FWD(radix_log) == 3 && b - 2 >= (int)lb) {
            hk_round<W, 3, false>(sm, g, m, lazy, rt, rts, (u32)b - 2 - lb, log_n, 0, 0, 0, 0);
            b -= 3;
        } else if (b - 1 >= (int)lb) {
            const u32 lo_bit = (u32)b - 1 - lb;  // local bit of the second layer
            for (u32 t = threadIdx.x; t < (tile >> 2); t += blockDim.x) {
                u32 s00, s01, s10, s11, j00;
                g.quad(t, lo_bit, s00, s01, s10, s11, j00);
                u32 j10 = j00 | (1u << b);
                u32 r1 = (n >> (b + 1)) + (j00 >> (b + 1));
                u32 r2a = (n >> b) + (j00 >> b);
                u32 r2b = (n >> b) + (j10 >> b);
                W x00 = sm[s00], x01 = sm[s01], x10 = sm[s10], x11 = sm[s11];
                hk_fwd_bf(m, lazy, x00, x10, rt[r1], rts[r1]);
                hk_fwd_bf(m, lazy, x01, x11, rt[r1], rts[r1]);
                hk_fwd_bf(m, lazy, x00, x01, rt[r2a], rts[r2a]);
                hk_fwd_bf(m, lazy, x10, x11, rt[r2b], rts[r2b]);
                sm[s00] = x00;
                sm[s01] = x01;
                sm[s10] = x10;
                sm[s11] = x11;
            }
            b -= 2;
        } else {
            const u32 lbit = (u32)b - lb;
            for (u32 t = threadIdx.x; t < (tile >> 1); t += blockDim.x) {
                u32 sx, sy, jx;
                g.pair(t, lbit, sx, sy, jx);
                u32 r = (n >> (b + 1)) + (jx >> (b + 1));
                W x = sm[sx], y = sm[sy];
                hk_fwd_bf(m, lazy, x, y, rt[r], rts[r]);
                sm[sx] = x;
                sm[sy] = y;
            }
            b -= 1;
        }
        __syncthreads();
    }
    const bool last = lb == 0;
    W* dst = out + (u64)p * out_stride + (u64)k * n;
    if (STORE == 1) {
        // The store reads two more global words per output: batched like the loads, since a
        // global store between two loads orders them too.
        const W sk = scal[2 * k], sks = scal[2 * k + 1];
        const bool add = p < addend_np;
        const W* ob = orig + (u64)p * orig_stride + (u64)k * n;
        const W* ab = addend + (u64)p * addend_stride + (u64)k * n;
        for (u32 e0 = threadIdx.x; e0 < tile; e0 += HK_LOAD_BATCH * blockDim.x) {
            W o[HK_LOAD_BATCH], a[HK_LOAD_BATCH];
            HK_UNROLL_SMALL
            for (u32 i = 0; i < HK_LOAD_BATCH; ++i) {
                const u32 e = e0 + i * blockDim.x;
                const u32 j = e < tile ? g.global(e) : 0;
                o[i] = e < tile ? ob[j] : (W)0;
                a[i] = e < tile && add ? ab[j] : (W)0;
            }
            HK_UNROLL_SMALL
            for (u32 i = 0; i < HK_LOAD_BATCH; ++i) {
                const u32 e = e0 + i * blockDim.x;
                if (e < tile) {
                    W v = sm[e];
                    if (last) v = hk_full_reduce(m, lazy, v);
                    v = m.mul_shoup(m.sub(o[i], v), sk, sks);
                    if (add) v = m.add(v, a[i]);
                    dst[g.global(e)] = v;
                }
            }
        }
    } else {
        for (u32 e = threadIdx.x; e < tile; e += blockDim.x) {
            W v = sm[e];
            if (last) v = hk_full_reduce(m, lazy, v);
            dst[g.global(e)] = v;
        }
    }
}

template <typename W>
__device__ void hk_ntt_inv_impl(const W* in, u64 in_stride, W* out, u64 out_stride, u32 nl,
                                u32 limb0, const u32* lp, const W* iroots, const W* iroots_sh,
                                const W* pt, u32 log_n, u32 lb, u32 hb, u32 c_log, u32 lazy_flag,
                                u32 radix_log) {
    HK_SHARED(W, sm);
    const HkTile g(log_n, nl, limb0, lb, hb, c_log);
    const u32 n = g.n, p = g.p, k = g.k, tile = g.tile;
    const u32 prime = lp[k];
    const ModQ<W> m = ModQ<W>::load(pt, prime);
    const bool lazy = lazy_flag != 0;
    const W* rt = iroots + (u64)prime * n;
    const W* rts = iroots_sh + (u64)prime * n;
    const W n_inv = pt[prime * HK_PT_STRIDE + 3], n_inv_s = pt[prime * HK_PT_STRIDE + 4];
    const W n_inv_w = pt[prime * HK_PT_STRIDE + 5], n_inv_ws = pt[prime * HK_PT_STRIDE + 6];
    const W* src = in + (u64)p * in_stride + (u64)k * n;
    hk_load_tile<W, 0>(sm, src, g, m, m, (W)0, (W)0);
    __syncthreads();
    // Rounds of up to 2^HK_RADIX_LOG_* words a thread in registers, then radix 4, then a radix-2
    // layer when an odd one is left; one barrier per round.
    u32 b = lb;
    while (b < hb) {
        if (HK_RADIX_LOG_INV(radix_log) >= 4 && b + 3 < hb) {
            hk_round<W, 4, true>(sm, g, m, lazy, rt, rts, b - lb, log_n, n_inv, n_inv_s, n_inv_w,
                                 n_inv_ws);
            b += 4;
        } else if (HK_RADIX_LOG_INV(radix_log) == 3 && b + 2 < hb) {
            hk_round<W, 3, true>(sm, g, m, lazy, rt, rts, b - lb, log_n, n_inv, n_inv_s, n_inv_w,
                                 n_inv_ws);
            b += 3;
        } else if (b + 1 < hb) {
            const u32 lo_bit = b - lb;
            for (u32 t = threadIdx.x; t < (tile >> 2); t += blockDim.x) {
                u32 s00, s01, s10, s11, j00;
                g.quad(t, lo_bit, s00, s01, s10, s11, j00);
                u32 j10 = j00 | (1u << (b + 1));
                u32 r1a = (n >> (b + 1)) + (j00 >> (b + 1));
                u32 r1b = (n >> (b + 1)) + (j10 >> (b + 1));
                u32 r2 = (n >> (b + 2)) + (j00 >> (b + 2));
                W x00 = sm[s00], x01 = sm[s01], x10 = sm[s10], x11 = sm[s11];
                hk_inv_bf(m, lazy, false, x00, x01, rt[r1a], rts[r1a], n_inv, n_inv_s, n_inv_w, n_inv_ws);
                hk_inv_bf(m, lazy, false, x10, x11, rt[r1b], rts[r1b], n_inv, n_inv_s, n_inv_w, n_inv_ws);
                const bool fin = b + 2 == log_n;
                hk_inv_bf(m, lazy, fin, x00, x10, rt[r2], rts[r2], n_inv, n_inv_s, n_inv_w, n_inv_ws);
                hk_inv_bf(m, lazy, fin, x01, x11, rt[r2], rts[r2], n_inv, n_inv_s, n_inv_w, n_inv_ws);
                sm[s00] = x00;
                sm[s01] = x01;
                sm[s10] = x10;
                sm[s11] = x11;
            }
            b += 2;
        } else {
            const u32 lbit = b - lb;
            const bool fin = b + 1 == log_n;
            for (u32 t = threadIdx.x; t < (tile >> 1); t += blockDim.x) {
                u32 sx, sy, jx;
                g.pair(t, lbit, sx, sy, jx);
                u32 r = (n >> (b + 1)) + (jx >> (b + 1));
                W x = sm[sx], y = sm[sy];
                hk_inv_bf(m, lazy, fin, x, y, rt[r], rts[r], n_inv, n_inv_s, n_inv_w, n_inv_ws);
                sm[sx] = x;
                sm[sy] = y;
            }
            b += 1;
        }
        __syncthreads();
    }
    W* dst = out + (u64)p * out_stride + (u64)k * n;
    for (u32 e = threadIdx.x; e < tile; e += blockDim.x) dst[g.global(e)] = sm[e];
}

#define HK_NTT_FWD_PARAMS(W)                                                                 \
    (const W* in, u64 in_stride, W* out, u64 out_stride, u32 nl, u32 limb0, const u32* lp,   \
     const W* roots, const W* roots_sh, const W* pt, u32 log_n, u32 lb, u32 hb, u32 c_log,   \
     u32 lazy, u32 src_prime, const W* orig, u64 orig_stride, const W* scal,                 \
     const W* addend, u64 addend_stride, u32 addend_np, u32 radix_log)
#define HK_NTT_FWD_ARGS                                                                      \
    (in, in_stride, out, out_stride, nl, limb0, lp, roots, roots_sh, pt, log_n, lb, hb, c_log, \
     lazy, src_prime, orig, orig_stride, scal, addend, addend_stride, addend_np, radix_log)

template <typename W>
__device__ void hk_ntt_fwd_body HK_NTT_FWD_PARAMS(W) {
    hk_ntt_fwd_impl<W, 0, 0> HK_NTT_FWD_ARGS;
}
template <typename W>
__device__ void hk_ntt_fwd_spread_body HK_NTT_FWD_PARAMS(W) {
    hk_ntt_fwd_impl<W, 1, 0> HK_NTT_FWD_ARGS;
}
template <typename W>
__device__ void hk_ntt_fwd_subscale_body HK_NTT_FWD_PARAMS(W) {
    hk_ntt_fwd_impl<W, 0, 1> HK_NTT_FWD_ARGS;
}
template <typename W>
__device__ void hk_ntt_fwd_spread_subscale_body HK_NTT_FWD_PARAMS(W) {
    hk_ntt_fwd_impl<W, 1, 1> HK_NTT_FWD_ARGS;
}
HK_BOTH(hk_ntt_fwd, HK_NTT_FWD_PARAMS, HK_NTT_FWD_ARGS)
HK_BOTH(hk_ntt_fwd_spread, HK_NTT_FWD_PARAMS, HK_NTT_FWD_ARGS)
HK_BOTH(hk_ntt_fwd_subscale, HK_NTT_FWD_PARAMS, HK_NTT_FWD_ARGS)
HK_BOTH(hk_ntt_fwd_spread_subscale, HK_NTT_FWD_PARAMS, HK_NTT_FWD_ARGS)

#define HK_NTT_INV_PARAMS(W)                                                               \
    (const W* in, u64 in_stride, W* out, u64 out_stride, u32 nl, u32 limb0, const u32* lp, \
     const W* iroots, const W* iroots_sh, const W* pt, u32 log_n, u32 lb, u32 hb, u32 c_log, \
     u32 lazy, u32 radix_log)
#define HK_NTT_INV_ARGS \
    (in, in_stride, out, out_stride, nl, limb0, lp, iroots, iroots_sh, pt, log_n, lb, hb, c_log, lazy, \
     radix_log)

template <typename W>
__device__ void hk_ntt_inv_body HK_NTT_INV_PARAMS(W) {
    hk_ntt_inv_impl<W> HK_NTT_INV_ARGS;
}
HK_BOTH(hk_ntt_inv, HK_NTT_INV_PARAMS, HK_NTT_INV_ARGS)
