// heloom CUDA kernels: modular arithmetic for 64-bit and 32-bit words.
//
// Every function here computes the same canonical residues as heloom-math's `Modulus`
// (Barrett with floor(2^(2w)/q), Shoup products; Shoup 2007, Harvey 2014), so GPU results are
// bit-exact with the CPU backend. The file is compiled by NVRTC for the GPU and, with
// emu/emu.hpp in front, by the host C++ compiler for the kernel emulator used in CI.

typedef unsigned long long u64;
typedef unsigned int u32;

__device__ __forceinline__ u64 hk_mulhi(u64 a, u64 b) { return __umul64hi(a, b); }
__device__ __forceinline__ u32 hk_mulhi(u32 a, u32 b) { return __umulhi(a, b); }

// Per-prime table `pt`, 8 words per prime: q, Barrett ratio (low, high), N^-1 and its Shoup
// companion, N^-1 * psi^-bitrev(1) and its Shoup companion, unused.
#define HK_PT_STRIDE 8

template <typename W>
struct ModQ {
    W q, r0, r1;

    __device__ __forceinline__ static ModQ load(const W* pt, u32 prime) {
        ModQ m;
        m.q = pt[prime * HK_PT_STRIDE + 0];
        m.r0 = pt[prime * HK_PT_STRIDE + 1];
        m.r1 = pt[prime * HK_PT_STRIDE + 2];
        return m;
    }
    __device__ __forceinline__ W two_q() const { return q + q; }
    __device__ __forceinline__ W cond_sub(W r) const { return r >= q ? r - q : r; }
    // x mod q for any word (one-word Barrett; the estimate is short by at most one).
    __device__ __forceinline__ W reduce(W x) const {
        W qh = hk_mulhi(x, r1);
        return cond_sub(x - qh * q);
    }
    // (hi * 2^w + lo) mod q for any double word.
    __device__ __forceinline__ W reduce_wide(W lo, W hi) const {
        W carry = hk_mulhi(lo, r0);
        W t_lo = lo * r1;
        W t_hi = hk_mulhi(lo, r1);
        W t1 = t_lo + carry;
        W t3 = t_hi + (W)(t1 < t_lo ? 1 : 0);
        W u_lo = hi * r0;
        W u_hi = hk_mulhi(hi, r0);
        W s = u_lo + t1;
        W carry2 = u_hi + (W)(s < u_lo ? 1 : 0);
        W qhat = hi * r1 + t3 + carry2;
        return cond_sub(lo - qhat * q);
    }
    __device__ __forceinline__ W mul(W a, W b) const { return reduce_wide(a * b, hk_mulhi(a, b)); }
    __device__ __forceinline__ W add(W a, W b) const { return cond_sub(a + b); }
    __device__ __forceinline__ W sub(W a, W b) const { return a >= b ? a - b : a + q - b; }
    // x * w mod q in [0, 2q) for any word x, w < q, ws = floor(w * 2^w / q).
    __device__ __forceinline__ W mul_shoup_lazy(W x, W w, W ws) const {
        return x * w - hk_mulhi(x, ws) * q;
    }
    __device__ __forceinline__ W mul_shoup(W x, W w, W ws) const {
        return cond_sub(mul_shoup_lazy(x, w, ws));
    }
};

// Lazy sums of double-word products (lo, hi): how many terms may be added before the high word
// must be folded (hi mod q) to stay below 2^w. Primes are below 2^61 (u64) or 2^31 (u32), so a
// product's high word is below 2^58 or 2^30: 16 terms on a folded hi < 2^61 stay below 2^63;
// with 32-bit words only one.
template <typename W>
struct HkFold;
template <>
struct HkFold<u64> {
    enum { every = 16 };
};
template <>
struct HkFold<u32> {
    enum { every = 1 };
};

// (hi, lo) += a * b as a double word (the caller keeps hi from overflowing, see HkFold).
template <typename W>
__device__ __forceinline__ void hk_mac(W& lo, W& hi, W a, W b) {
    const W pl = a * b;
    lo += pl;
    hi += hk_mulhi(a, b) + (W)(lo < pl ? 1 : 0);
}

// Full unrolling of a fixed-trip loop on the GPU (the host emulator leaves it to the compiler).
#ifndef HK_UNROLL_SMALL
#define HK_UNROLL_SMALL _Pragma("unroll")
#endif

// Grid-stride loop over `count` items.
#define HK_FOR(i, count)                                                              \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (u64)(count);        \
         i += (u64)blockDim.x * gridDim.x)

// Instantiates a kernel body template `NAME_body<W>` for both word sizes as extern "C" kernels
// NAME_u64 and NAME_u32 (un-mangled names the host looks up). PARAMS is a macro of the word type.
#define HK_BOTH(NAME, PARAMS, ARGS)                                                   \
    extern "C" __global__ void NAME##_u64 PARAMS(u64) { NAME##_body<u64> ARGS; }      \
    extern "C" __global__ void NAME##_u32 PARAMS(u32) { NAME##_body<u32> ARGS; }
