/* cuda_emu.h - just enough CUDA to run dpc's generated kernels on the CPU
 * (test_emu_cuda.c): every block is DPC_CU_BLOCK threads, run as fibers
 * (ucontext) of one OS thread; blocks run one after the other; warp
 * shuffles and __syncthreads are barriers among those fibers; __shared__
 * variables are statics (one block at a time). Device memory is host
 * memory. A thread that returns leaves the barriers (as std::barrier's
 * arrive_and_drop), as a finished CUDA thread no longer takes part.
 *
 * Fibers, not OS threads: a block of 256 threads was 256 thread creations,
 * and the op cases launch thousands of blocks (cuda.emu.ops took 1,100 s of
 * CI's CPU time; the threads, not the kernels, were most of it). A fiber
 * runs until it reaches a barrier or returns; the scheduler then runs the
 * next one whose barrier has opened, so every interleaving a barrier allows
 * is still one CUDA allows. A block whose fibers all wait and none can go
 * on is a deadlock (a barrier not every thread reaches): it aborts.
 *
 * This checks what the kernels compute (indexing, vector paths, warp and
 * block reductions, the error flag); not timing, memory ordering subtleties
 * or anything else that needs real hardware. */
#ifndef DPC_CUDA_EMU_H
#define DPC_CUDA_EMU_H

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>

struct uint3 {
    unsigned x, y, z;
};
struct float4 {
    float x, y, z, w;
};
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }

/* A barrier among `expected` fibers: the phase moves on when the last one
 * arrives; a fiber that returns no longer counts. */
struct emu_bar {
    unsigned expected, arrived, phase;
};
struct emu_fiber {
    ucontext_t ctx;
    emu_bar *wait; /* the barrier it waits at, NULL when it can run */
    unsigned wait_phase;
    bool done;
};

static uint3 threadIdx, blockIdx;
static uint3 blockDim, gridDim;
static ucontext_t emu_sched;
static emu_fiber *emu_cur;
static emu_bar emu_block_bar, emu_warp_bar[32];
static float emu_warp_buf[32][32];

static inline void emu_bar_open(emu_bar *b) {
    if (b->arrived > 0 && b->arrived == b->expected) {
        b->arrived = 0;
        b->phase++;
    }
}
static inline void emu_arrive_and_wait(emu_bar *b) {
    emu_fiber *me = emu_cur;
    me->wait = b;
    me->wait_phase = b->phase;
    b->arrived++;
    emu_bar_open(b);
    if (b->phase == me->wait_phase)
        swapcontext(&me->ctx, &emu_sched);
    me->wait = nullptr;
}
static inline void emu_arrive_and_drop(emu_bar *b) {
    b->expected--;
    emu_bar_open(b);
}

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
    const unsigned lane = threadIdx.x % 32, w = threadIdx.x / 32;
    emu_warp_buf[w][lane] = v;
    emu_arrive_and_wait(&emu_warp_bar[w]);
    const float r = emu_warp_buf[w][lane ^ (unsigned)o];
    emu_arrive_and_wait(&emu_warp_bar[w]);
    return r;
}
static inline void __syncthreads() { emu_arrive_and_wait(&emu_block_bar); }

/* The kernel body a fiber runs: the launch's lambda. */
static void *emu_body;
template <class F> static void emu_fiber_main() {
    (*(F *)emu_body)();
    emu_arrive_and_drop(&emu_warp_bar[threadIdx.x / 32]);
    emu_arrive_and_drop(&emu_block_bar);
    emu_cur->done = true;
} /* returns to emu_sched (uc_link) */

/* Runs f as grid blocks of `block` threads. */
template <class F> static void emu_launch(unsigned grid, unsigned block, F f) {
    enum { STACK = 128 << 10, MAX_BLOCK = 1024 };
    static emu_fiber fib[MAX_BLOCK];
    char *stacks = block <= MAX_BLOCK ? (char *)malloc((size_t)STACK * block) : nullptr;
    if (!stacks) {
        fprintf(stderr, "cuda_emu: no stacks for a block of %u threads\n", block);
        abort();
    }
    gridDim = uint3{grid, 1, 1};
    blockDim = uint3{block, 1, 1};
    emu_body = &f;
    for (unsigned b = 0; b < grid; b++) {
        blockIdx = uint3{b, 0, 0};
        emu_block_bar = emu_bar{block, 0, 0};
        for (unsigned w = 0; w * 32 < block; w++)
            emu_warp_bar[w] = emu_bar{block - 32 * w < 32 ? block - 32 * w : 32, 0, 0};
        for (unsigned t = 0; t < block; t++) {
            emu_fiber *fb = &fib[t];
            fb->wait = nullptr;
            fb->done = false;
            getcontext(&fb->ctx);
            fb->ctx.uc_stack.ss_sp = stacks + (size_t)t * STACK;
            fb->ctx.uc_stack.ss_size = STACK;
            fb->ctx.uc_link = &emu_sched;
            makecontext(&fb->ctx, (void (*)())emu_fiber_main<F>, 0);
        }
        for (unsigned left = block; left > 0;) {
            bool ran = false;
            for (unsigned t = 0; t < block; t++) {
                emu_fiber *fb = &fib[t];
                if (fb->done || (fb->wait && fb->wait->phase == fb->wait_phase))
                    continue;
                threadIdx = uint3{t, 0, 0};
                emu_cur = fb;
                swapcontext(&emu_sched, &fb->ctx);
                ran = true;
                left -= fb->done;
            }
            if (!ran) {
                fprintf(stderr, "cuda_emu: block %u deadlocks (a barrier not every thread reaches)\n", b);
                abort();
            }
        }
    }
    free(stacks);
}

/* A kernel argument: converts to whatever pointer the kernel takes. */
struct emu_ptr {
    void *p;
    template <class T> operator T *() const { return (T *)p; }
};

#endif
