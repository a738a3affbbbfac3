/* gemm_rows.c - a linear's GEMM at batch 1-4 (gemm_rows.h).
 *
 * With one to four rows of A the product is bound by reading B (AlexNet's
 * 9216x4096 W^T is 151 MB, read once per forward). dnnl_sgemm read it at
 * 5-9 GB/s there; this loop takes eight rows of B at a time, each read
 * front to back (eight streams the prefetcher follows), and adds them into
 * C's rows, which stay in L1/L2: 15-28 GB/s, near a plain read of B. The
 * inner loop is left to the compiler to vectorise, once per ISA, the CPU's
 * picked when the library loads (target_clones; never fixed at build). */
#include "gemm_rows.h"

#include <stdatomic.h>
#include <string.h>

/* Not under ThreadSanitizer: the clones' resolver runs while the loader
 * relocates, before TSan's runtime is up, and its instrumentation crashed
 * every program of the TSan build at start (rows_span[resolver]). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define ROWS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROWS_CLONES
#endif

static _Atomic int g_on = 1; /* DPC_GEMM_ROWS, read by every new CPU backend */

dpc_status dpc_gemm_rows_init(dpc_err *e) {
    bool on;
    dpc_status s = dpc_env_flag("DPC_GEMM_ROWS", true, &on, e);
    if (s == DPC_OK)
        atomic_store_explicit(&g_on, on, memory_order_relaxed);
    return s;
}

int dpc_gemm_rows_fits(int ta, int tb, int64_t m) {
    return atomic_load_explicit(&g_on, memory_order_relaxed) && !ta && !tb && m >= 1 && m <= DPC_GEMM_ROWS_MAX;
}

/* Columns [j0, j1) of C. */
ROWS_CLONES static void rows_span(int64_t m, int64_t j0, int64_t j1, int64_t k, const float *a, int64_t lda,
                                  const float *b, int64_t ldb, float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++)
        memset(c + i * ldc + j0, 0, sizeof(float) * (size_t)(j1 - j0));
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) {
        const float *restrict r = b + p * ldb;
        for (int64_t i = 0; i < m; i++) {
            const float *x = a + i * lda + p;
            const float x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3], x4 = x[4], x5 = x[5], x6 = x[6], x7 = x[7];
            float *restrict ci = c + i * ldc;
            for (int64_t j = j0; j < j1; j++)
                ci[j] += x0 * r[j] + x1 * r[ldb + j] + x2 * r[2 * ldb + j] + x3 * r[3 * ldb + j] +
                         x4 * r[4 * ldb + j] + x5 * r[5 * ldb + j] + x6 * r[6 * ldb + j] + x7 * r[7 * ldb + j];
        }
    }
    for (; p < k; p++) {
        const float *restrict r = b + p * ldb;
        for (int64_t i = 0; i < m; i++) {
            const float x = a[i * lda + p];
            float *restrict ci = c + i * ldc;
            for (int64_t j = j0; j < j1; j++)
                ci[j] += x * r[j];
        }
    }
}

void dpc_gemm_rows(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                   int64_t ldc, int threads) {
    if (threads < 1 || (int64_t)threads > n / 16)
        threads = 1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
#endif
    for (int s = 0; s < threads; s++) {
        /* spans of whole 16-column vectors: the threads' C lines never meet */
        int64_t j0 = n * s / threads / 16 * 16, j1 = s + 1 == threads ? n : n * (s + 1) / threads / 16 * 16;
        rows_span(m, j0, j1, k, a, lda, b, ldb, c, ldc);
    }
}
