// Element-wise kernels over `limbs` limbs of N words (several polynomials of `lpp` limbs each
// side by side); limb `l` uses prime lp[l % lpp]. All inputs and outputs reduced.

#define HK_ELT_PARAMS(W)                                                                  \
    (W* out, const W* a, const W* b, u32 limbs, u32 lpp, const u32* lp, const W* pt,      \
     u32 log_n)
#define HK_ELT_ARGS (out, a, b, limbs, lpp, lp, pt, log_n)

template <typename W>
__device__ __forceinline__ ModQ<W> hk_limb_mod(const W* pt, const u32* lp, u64 i, u32 log_n,
                                               u32 lpp) {
    return ModQ<W>::load(pt, lp[(u32)(i >> log_n) % lpp]);
}

// One body for the four element-wise kernels: OP 0 add, 1 sub, 2 mul, 3 multiply-add.
template <typename W, int OP>
__device__ void hk_elt_apply HK_ELT_PARAMS(W) {
    HK_FOR(i, (u64)limbs << log_n) {
        ModQ<W> m = hk_limb_mod(pt, lp, i, log_n, lpp);
        W v;
        if (OP == 0) v = m.add(a[i], b[i]);
        if (OP == 1) v = m.sub(a[i], b[i]);
        if (OP == 2) v = m.mul(a[i], b[i]);
        if (OP == 3) v = m.add(out[i], m.mul(a[i], b[i]));
        out[i] = v;
    }
}
template <typename W>
__device__ void hk_add_body HK_ELT_PARAMS(W) { hk_elt_apply<W, 0> HK_ELT_ARGS; }
template <typename W>
__device__ void hk_sub_body HK_ELT_PARAMS(W) { hk_elt_apply<W, 1> HK_ELT_ARGS; }
template <typename W>
__device__ void hk_mul_body HK_ELT_PARAMS(W) { hk_elt_apply<W, 2> HK_ELT_ARGS; }
// out = out + a * b.
template <typename W>
__device__ void hk_mul_add_body HK_ELT_PARAMS(W) { hk_elt_apply<W, 3> HK_ELT_ARGS; }
HK_BOTH(hk_add, HK_ELT_PARAMS, HK_ELT_ARGS)
HK_BOTH(hk_sub, HK_ELT_PARAMS, HK_ELT_ARGS)
HK_BOTH(hk_mul, HK_ELT_PARAMS, HK_ELT_ARGS)
HK_BOTH(hk_mul_add, HK_ELT_PARAMS, HK_ELT_ARGS)

// Ciphertext tensor product (Cheon-Kim-Kim-Song 2017): d0 = a0 b0, d1 = a0 b1 + a1 b0,
// d2 = a1 b1, for two-polynomial a and b of `nl` limbs each; one pass over the inputs.
#define HK_TENSOR_PARAMS(W) \
    (W* out, const W* a, const W* b, u32 nl, const u32* lp, const W* pt, u32 log_n)
#define HK_TENSOR_ARGS (out, a, b, nl, lp, pt, log_n)
template <typename W>
__device__ void hk_tensor_body HK_TENSOR_PARAMS(W) {
    const u64 len = (u64)nl << log_n;
    HK_FOR(i, len) {
        ModQ<W> m = hk_limb_mod(pt, lp, i, log_n, nl);
        W a0 = a[i], a1 = a[len + i], b0 = b[i], b1 = b[len + i];
        out[i] = m.mul(a0, b0);
        out[len + i] = m.add(m.mul(a0, b1), m.mul(a1, b0));
        out[2 * len + i] = m.mul(a1, b1);
    }
}
HK_BOTH(hk_tensor, HK_TENSOR_PARAMS, HK_TENSOR_ARGS)

// Galois automorphism in NTT form: a permutation of the evaluation points, the same for every
// prime (heloom-math automorphism::NttPermutation): out[l][k] = in[l][perm[k]].
#define HK_PERMUTE_PARAMS(W) (W* out, const W* in, const u32* perm, u32 limbs, u32 log_n)
#define HK_PERMUTE_ARGS (out, in, perm, limbs, log_n)
template <typename W>
__device__ void hk_permute_body HK_PERMUTE_PARAMS(W) {
    const u32 mask = (1u << log_n) - 1;
    HK_FOR(i, (u64)limbs << log_n) {
        u64 base = i & ~(u64)mask;
        out[i] = in[base + perm[(u32)i & mask]];
    }
}
HK_BOTH(hk_permute, HK_PERMUTE_PARAMS, HK_PERMUTE_ARGS)

// Per-limb constants passed by value (a kernel parameter, so no host-to-device copy per op):
// v[2l] and v[2l + 1] for limb l, e.g. a residue and its Shoup companion. Up to 64 limbs.
#define HK_MAX_SCALAR_LIMBS 64
struct HkScalars {
    u64 v[2 * HK_MAX_SCALAR_LIMBS];
};

// out = in * s_l (mod q), Shoup product with s_l = v[2l], companion v[2l + 1]; limb l of a
// polynomial is limb (i >> log_n) % lpp.
#define HK_SCALAR_MUL_PARAMS(W) \
    (W* out, const W* in, u32 limbs, u32 lpp, const u32* lp, const W* pt, u32 log_n, HkScalars s)
#define HK_SCALAR_MUL_ARGS (out, in, limbs, lpp, lp, pt, log_n, s)
template <typename W>
__device__ void hk_scalar_mul_body HK_SCALAR_MUL_PARAMS(W) {
    HK_FOR(i, (u64)limbs << log_n) {
        const u32 l = (u32)(i >> log_n) % lpp;
        ModQ<W> m = ModQ<W>::load(pt, lp[l]);
        out[i] = m.mul_shoup(in[i], (W)s.v[2 * l], (W)s.v[2 * l + 1]);
    }
}
HK_BOTH(hk_scalar_mul, HK_SCALAR_MUL_PARAMS, HK_SCALAR_MUL_ARGS)

// out = in + v[2l] on the first `add_limbs` limbs (the first polynomial: a constant in every
// slot is a constant in every NTT point), a copy elsewhere.
#define HK_SCALAR_ADD_PARAMS(W)                                                         \
    (W* out, const W* in, u32 limbs, u32 add_limbs, u32 lpp, const u32* lp, const W* pt, \
     u32 log_n, HkScalars s)
#define HK_SCALAR_ADD_ARGS (out, in, limbs, add_limbs, lpp, lp, pt, log_n, s)
template <typename W>
__device__ void hk_scalar_add_body HK_SCALAR_ADD_PARAMS(W) {
    HK_FOR(i, (u64)limbs << log_n) {
        const u32 limb = (u32)(i >> log_n);
        if (limb < add_limbs) {
            const u32 l = limb % lpp;
            ModQ<W> m = ModQ<W>::load(pt, lp[l]);
            out[i] = m.add(in[i], (W)s.v[2 * l]);
        } else {
            out[i] = in[i];
        }
    }
}
HK_BOTH(hk_scalar_add, HK_SCALAR_ADD_PARAMS, HK_SCALAR_ADD_ARGS)
