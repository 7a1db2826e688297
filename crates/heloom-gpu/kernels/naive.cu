// The baseline of seed 003: SEAL's Rescale ported one thread block per polynomial, every NTT
// layer in global memory, 64-bit products emulated from 32-bit halves (SEAL's generic
// multiply_uint64) and a 128-bit Barrett reduction. Kept only as the benchmark's reference
// point; results are still exact (tested against the CPU).

__device__ __forceinline__ void hk_naive_mul64(u64 a, u64 b, u64* lo, u64* hi) {
    u64 a0 = a & 0xffffffffull, a1 = a >> 32, b0 = b & 0xffffffffull, b1 = b >> 32;
    u64 p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    u64 mid = (p00 >> 32) + (p01 & 0xffffffffull) + (p10 & 0xffffffffull);
    *lo = (p00 & 0xffffffffull) | (mid << 32);
    *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

__device__ __forceinline__ u64 hk_naive_mulmod(u64 a, u64 b, const ModQ<u64>& m) {
    u64 lo, hi;
    hk_naive_mul64(a, b, &lo, &hi);
    return m.reduce_wide(lo, hi);
}

// One polynomial's NTT of limb `x` (N words, global memory) by all threads of the block.
__device__ void hk_naive_ntt(u64* x, const u64* roots, const ModQ<u64>& m, u32 log_n) {
    const u32 n = 1u << log_n;
    for (u32 len = n >> 1, groups = 1; len >= 1; len >>= 1, groups <<= 1) {
        for (u32 t = threadIdx.x; t < n / 2; t += blockDim.x) {
            u32 i = t / len, j = i * 2 * len + t % len;
            u64 w = roots[groups + i];
            u64 u = x[j], v = hk_naive_mulmod(x[j + len], w, m);
            x[j] = m.add(u, v);
            x[j + len] = m.sub(u, v);
        }
        __syncthreads();
    }
}

__device__ void hk_naive_intt(u64* x, const u64* iroots, const ModQ<u64>& m, u64 n_inv,
                              u32 log_n) {
    const u32 n = 1u << log_n;
    for (u32 len = 1, groups = n >> 1; groups >= 1; len <<= 1, groups >>= 1) {
        for (u32 t = threadIdx.x; t < n / 2; t += blockDim.x) {
            u32 i = t / len, j = i * 2 * len + t % len;
            u64 w = iroots[groups + i];
            u64 u = x[j], v = x[j + len];
            x[j] = m.add(u, v);
            x[j + len] = hk_naive_mulmod(m.sub(u, v), w, m);
        }
        __syncthreads();
    }
    for (u32 t = threadIdx.x; t < n; t += blockDim.x) x[t] = hk_naive_mulmod(x[t], n_inv, m);
    __syncthreads();
}

// Rescale of polynomial blockIdx.x: `in` has nq limbs (NTT form), `out` nq - 1, `scratch`
// two limbs per polynomial; scal[2i] = q_l^-1 mod q_i.
extern "C" __global__ void hk_naive_rescale_u64(const u64* in, u64* out, u64* scratch, u32 nq,
                                                const u32* lp, const u64* roots,
                                                const u64* iroots, const u64* pt, u32 log_n,
                                                const u64* scal) {
    const u32 n = 1u << log_n;
    const u32 p = blockIdx.x;
    const u32 l = nq - 1;
    const u64* src = in + (u64)p * nq * n;
    u64* dst = out + (u64)p * l * n;
    u64* last = scratch + (u64)p * 2 * n;
    u64* tmp = last + n;
    const ModQ<u64> ml = ModQ<u64>::load(pt, lp[l]);
    for (u32 t = threadIdx.x; t < n; t += blockDim.x) last[t] = src[(u64)l * n + t];
    __syncthreads();
    hk_naive_intt(last, iroots + (u64)lp[l] * n, ml, pt[lp[l] * HK_PT_STRIDE + 3], log_n);
    const u64 half = ml.q >> 1;
    for (u32 i = 0; i < l; ++i) {
        const ModQ<u64> m = ModQ<u64>::load(pt, lp[i]);
        const u64 hi = m.reduce(half);
        for (u32 t = threadIdx.x; t < n; t += blockDim.x)
            tmp[t] = m.sub(m.reduce(ml.add(last[t], half)), hi);
        __syncthreads();
        hk_naive_ntt(tmp, roots + (u64)lp[i] * n, m, log_n);
        for (u32 t = threadIdx.x; t < n; t += blockDim.x)
            dst[(u64)i * n + t] = hk_naive_mulmod(m.sub(src[(u64)i * n + t], tmp[t]), scal[2 * i], m);
        __syncthreads();
    }
}
