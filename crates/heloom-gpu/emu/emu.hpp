// Host emulation of the CUDA subset heloom's kernels use, so the very same kernel source runs
// on the CPU in CI (no GPU there) and is checked bit for bit against the CPU backend.
// A block's threads are OS threads; __syncthreads is a barrier; shared memory is one buffer
// per launch. Slow by design: it verifies, it does not measure.
#pragma once
#include <cmath>
#include <cstring>

#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define HK_UNROLL_SMALL

struct hk_dim3 {
    unsigned x, y, z;
};
extern thread_local hk_dim3 threadIdx;
extern thread_local hk_dim3 blockIdx;
extern thread_local hk_dim3 blockDim;
extern thread_local hk_dim3 gridDim;

void __syncthreads();
unsigned char* hk_emu_shared();
#define HK_SHARED(T, name) T* name = reinterpret_cast<T*>(hk_emu_shared())

inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline unsigned int __umulhi(unsigned int a, unsigned int b) {
    return (unsigned int)(((unsigned long long)a * b) >> 32);
}
// Built with -ffp-contract=off: a product and a sum stay separately rounded, as on the GPU.
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __longlong_as_double(long long x) {
    double d;
    std::memcpy(&d, &x, sizeof d);
    return d;
}
using std::round;
