// Kernel emulator: compiles heloom's CUDA kernels for the host and launches them by name.
#include "emu.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "../kernels/arith.cuh"
#include "../kernels/ntt.cu"
#include "../kernels/eltwise.cu"
#include "../kernels/rns.cu"
#include "../kernels/keyswitch.cu"
#include "../kernels/naive.cu"

thread_local hk_dim3 threadIdx;
thread_local hk_dim3 blockIdx;
thread_local hk_dim3 blockDim;
thread_local hk_dim3 gridDim;

namespace {
// A reusable sense-reversing barrier for a block's threads (C++17; std::barrier would need
// C++20). Waiters spin a little (blocks are short), then sleep on a condition variable, so
// that a loaded machine (other tests, a build) does not starve the thread everyone waits for.
class Barrier {
   public:
    explicit Barrier(unsigned count) : count_(count), left_(count) {}
    void wait() {
        const bool sense = sense_.load(std::memory_order_acquire);
        if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            left_.store(count_, std::memory_order_relaxed);
            {
                // Flipped under the lock: a waiter checks the sense under it, so none misses
                // the wake-up.
                std::lock_guard<std::mutex> lock(m_);
                sense_.store(!sense, std::memory_order_release);
            }
            cv_.notify_all();
            return;
        }
        for (int i = 0; i < 64; ++i) {
            if (sense_.load(std::memory_order_acquire) != sense) return;
            std::this_thread::yield();
        }
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return sense_.load(std::memory_order_acquire) != sense; });
    }

   private:
    const unsigned count_;
    std::atomic<unsigned> left_;
    std::atomic<bool> sense_{false};
    std::mutex m_;
    std::condition_variable cv_;
};

thread_local Barrier* hk_bar = nullptr;
thread_local unsigned char* hk_smem = nullptr;

using ErasedFn = void (*)();
using Caller = void (*)(ErasedFn, void**);

struct Entry {
    const char* name;
    ErasedFn fn;
    unsigned nargs;
    Caller call;
};

// Calls f with args[i] read as the i-th parameter type (the cuLaunchKernel convention).
template <typename... A, std::size_t... I>
void call_with(void (*f)(A...), void** args, std::index_sequence<I...>) {
    f(*static_cast<A*>(args[I])...);
}
template <typename... A>
void call_erased(ErasedFn fn, void** args) {
    auto f = reinterpret_cast<void (*)(A...)>(fn);
    call_with(f, args, std::index_sequence_for<A...>{});
}
template <typename... A>
Entry make_entry(const char* name, void (*f)(A...)) {
    return Entry{name, reinterpret_cast<ErasedFn>(f), sizeof...(A), &call_erased<A...>};
}

#define HK_KERNEL(name) make_entry(#name, &name),
#define HK_KERNEL_BOTH(name) HK_KERNEL(name##_u64) HK_KERNEL(name##_u32)
const Entry kTable[] = {
#include "../kernels/kernels.list"
};
#undef HK_KERNEL
#undef HK_KERNEL_BOTH

const Entry* find(const char* name) {
    for (const Entry& e : kTable)
        if (std::strcmp(e.name, name) == 0) return &e;
    return nullptr;
}
}  // namespace

void __syncthreads() { hk_bar->wait(); }
unsigned char* hk_emu_shared() { return hk_smem; }

// Runs kernel `name` over a gx x gy grid of blocks of bx threads with `smem` bytes of shared
// memory. Returns 0, or -1 unknown kernel, -2 wrong argument count, -3 bad shape,
// -4 an exception (thread creation).
extern "C" int hk_emu_launch(const char* name, unsigned gx, unsigned gy, unsigned bx,
                             unsigned smem, void** args, unsigned nargs) {
    const Entry* e = find(name);
    if (!e) return -1;
    if (e->nargs != nargs) return -2;
    if (gx == 0 || gy == 0 || bx == 0 || bx > 1024) return -3;
    try {
        std::vector<unsigned char> shared((std::size_t)smem + 16);
        Barrier bar(bx);
        auto worker = [&](unsigned tid) {
            hk_bar = &bar;
            hk_smem = shared.data();
            threadIdx = hk_dim3{tid, 0, 0};
            blockDim = hk_dim3{bx, 1, 1};
            gridDim = hk_dim3{gx, gy, 1};
            for (unsigned y = 0; y < gy; ++y) {
                for (unsigned x = 0; x < gx; ++x) {
                    blockIdx = hk_dim3{x, y, 0};
                    e->call(e->fn, args);
                    // A block's shared memory is reused only once all its threads are done.
                    bar.wait();
                }
            }
        };
        std::vector<std::thread> threads;
        threads.reserve(bx);
        for (unsigned t = 1; t < bx; ++t) threads.emplace_back(worker, t);
        worker(0);
        for (auto& t : threads) t.join();
    } catch (...) {
        return -4;
    }
    return 0;
}

// Number of kernels and their names, for the host's consistency check.
extern "C" unsigned hk_emu_kernel_count() { return sizeof(kTable) / sizeof(kTable[0]); }
extern "C" const char* hk_emu_kernel_name(unsigned i) {
    return i < hk_emu_kernel_count() ? kTable[i].name : nullptr;
}
