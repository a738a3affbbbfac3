/* peak.c - measured FP32 FMA peak of one core and copy bandwidth, the
 * hardware limits the CPU benchmark reports against. Built with
 * -O2 -march=native: independent FMA chains in the widest vectors the
 * compiler targets (GCC vector extensions, so no intrinsics per ISA). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef float v16 __attribute__((vector_size(64)));
#define CHAINS 12

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Twelve accumulators in named registers (an array would be kept in memory
 * and make the loop latency-bound), each an independent FMA chain. */
static double fma_peak(void) {
    v16 a, b;
    for (int i = 0; i < 16; i++)
        a[i] = 1.0000001f, b[i] = 0.9999999f;
    v16 c0 = a, c1 = a * 2, c2 = a * 3, c3 = a * 4, c4 = a * 5, c5 = a * 6;
    v16 c6 = a * 7, c7 = a * 8, c8 = a * 9, c9 = a * 10, c10 = a * 11, c11 = a * 12;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        long iters = 20000000;
        double t0 = now();
        for (long i = 0; i < iters; i++) {
            c0 = c0 * a + b, c1 = c1 * a + b, c2 = c2 * a + b, c3 = c3 * a + b;
            c4 = c4 * a + b, c5 = c5 * a + b, c6 = c6 * a + b, c7 = c7 * a + b;
            c8 = c8 * a + b, c9 = c9 * a + b, c10 = c10 * a + b, c11 = c11 * a + b;
        }
        double t = now() - t0;
        double gf = (double)iters * CHAINS * 16 * 2 / t * 1e-9;
        if (gf > best)
            best = gf;
    }
    v16 sum = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11;
    if (sum[0] == 12345.0f)
        printf("#");
    return best;
}

static double copy_bw(void) {
    size_t n = (size_t)64 << 20;
    char *a = malloc(n), *b = malloc(n);
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        memcpy(b, a, n);
        double t = now() - t0;
        double gbs = 2.0 * (double)n / t * 1e-9; /* read + write */
        if (gbs > best)
            best = gbs;
    }
    free(a);
    free(b);
    return best;
}

int main(void) {
    printf("{\"fma_gflops_per_core\": %.1f, \"copy_gbytes_per_s\": %.1f}\n", fma_peak(), copy_bw());
    return 0;
}
