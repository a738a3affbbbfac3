/* kernel_bench.h - what the kernel micro-benchmarks share (wino_layers.c,
 * stem_layer.c): a monotonic clock and buffers of small deterministic
 * values (no subnormals, no NaN). Header-only: each benchmark is one cc
 * command (see its header). */
#ifndef DPC_KERNEL_BENCH_H
#define DPC_KERNEL_BENCH_H

#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* n floats, 64-byte aligned (NULL when out of memory). */
static float *filled(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    for (size_t i = 0; p && i < n; i++)
        p[i] = 0.01f * (float)(i % 7) - 0.03f;
    return p;
}

#endif
