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

static double fma_peak(void) {
    v16 acc[CHAINS], a, b;
    for (int i = 0; i < 16; i++)
        a[i] = 1.0000001f, b[i] = 0.9999999f;
    for (int c = 0; c < CHAINS; c++)
        acc[c] = a * (float)c;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        long iters = 20000000;
        double t0 = now();
        for (long i = 0; i < iters; i++)
            for (int c = 0; c < CHAINS; c++)
                acc[c] = acc[c] * a + b;
        double t = now() - t0;
        double gf = (double)iters * CHAINS * 16 * 2 / t * 1e-9;
        if (gf > best)
            best = gf;
    }
    float sink = 0;
    for (int c = 0; c < CHAINS; c++)
        sink += acc[c][0];
    if (sink == 12345.0f)
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
