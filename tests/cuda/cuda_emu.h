/* cuda_emu.h - just enough CUDA to run dpc's generated kernels on the CPU
 * (test_emu_cuda.c): every block is DPC_CU_BLOCK real threads, blocks run
 * one after the other; warp shuffles and __syncthreads are barriers among
 * those threads; __shared__ variables are statics (one block at a time).
 * Device memory is host memory. A thread that returns leaves the barriers
 * (arrive_and_drop), as a finished CUDA thread no longer takes part.
 *
 * This checks what the kernels compute (indexing, vector paths, warp and
 * block reductions, the error flag); not timing, memory ordering subtleties
 * or anything else that needs real hardware. */
#ifndef DPC_CUDA_EMU_H
#define DPC_CUDA_EMU_H

#include <barrier>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

struct uint3 {
    unsigned x, y, z;
};
struct float4 {
    float x, y, z, w;
};
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }

struct emu_warp {
    std::unique_ptr<std::barrier<>> bar;
    float buf[32];
};

static thread_local uint3 threadIdx, blockIdx;
static uint3 blockDim, gridDim;
static thread_local emu_warp *emu_my_warp;
static thread_local std::barrier<> *emu_my_block;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static

static inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}
static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline int atomicCAS(int *p, int cmp, int val) {
    __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp; /* the old value either way */
}
static inline float __shfl_xor_sync(unsigned, float v, int o) {
    emu_warp *w = emu_my_warp;
    const unsigned lane = threadIdx.x % 32;
    w->buf[lane] = v;
    w->bar->arrive_and_wait();
    const float r = w->buf[lane ^ (unsigned)o];
    w->bar->arrive_and_wait();
    return r;
}
static inline void __syncthreads() { emu_my_block->arrive_and_wait(); }

/* Runs f as grid blocks of `block` threads. */
template <class F> static void emu_launch(unsigned grid, unsigned block, F f) {
    gridDim = uint3{grid, 1, 1};
    blockDim = uint3{block, 1, 1};
    for (unsigned b = 0; b < grid; b++) {
        std::barrier<> blk((std::ptrdiff_t)block);
        const unsigned nw = (block + 31) / 32;
        std::vector<emu_warp> warps(nw);
        for (unsigned w = 0; w < nw; w++)
            warps[w].bar = std::make_unique<std::barrier<>>((std::ptrdiff_t)(block - 32 * w < 32 ? block - 32 * w : 32));
        std::vector<std::thread> ts;
        ts.reserve(block);
        for (unsigned t = 0; t < block; t++)
            ts.emplace_back([&, t] {
                threadIdx = uint3{t, 0, 0};
                blockIdx = uint3{b, 0, 0};
                emu_my_warp = &warps[t / 32];
                emu_my_block = &blk;
                f();
                emu_my_warp->bar->arrive_and_drop();
                blk.arrive_and_drop();
            });
        for (auto &t : ts)
            t.join();
    }
}

/* A kernel argument: converts to whatever pointer the kernel takes. */
struct emu_ptr {
    void *p;
    template <class T> operator T *() const { return (T *)p; }
};

#endif
