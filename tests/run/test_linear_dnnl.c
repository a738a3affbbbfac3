/* test_linear_dnnl.c - a linear's GEMM of 5+ rows in runtime/cpu/linear_dnnl.c.
 *
 *     test_linear_dnnl
 *
 * Without AVX-512 (oneDNN's effective ISA: DNNL_MAX_CPU_ISA=AVX2 takes that
 * path on any machine) every call of 5 rows or more runs dnnl_sgemm against
 * a padded copy of W^T ("sgemm-padded"); with it, 5-64 rows run the packed
 * matmul and more rows are declined (the generated C's own sgemm). Both
 * against a float64 product, at 5, 64, 65 and 130 rows, and again after
 * the weights changed (dpc_dnnl_linears_changed: the copy is made again). */
#include "../check.h"
#include "conv_dnnl.h"
#include "linear_dnnl.h"

#include <math.h>
#include <omp.h>
#include <string.h>

enum { K = 96, NO = 1024 }; /* rows of NO floats: 4 KiB, the stride padding is for */

static double err_of(const float *a, const float *wt, const float *y, int64_t m) {
    double worst = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < NO; j++) {
            double s = 0;
            for (int64_t q = 0; q < K; q++)
                s += (double)a[i * K + q] * (double)wt[q * NO + j];
            double d = fabs(s - y[i * NO + j]) / (1.0 + fabs(s));
            worst = d > worst ? d : worst;
        }
    return worst;
}

int main(void) {
    bool avx512 = dpc_dnnl_avx512();
    dpc_err e = {0};
    dpc_dnnl_linears *c = NULL;
    dpc_dnnl_rlinears *r = NULL;
    CHECK(dpc_dnnl_linears_new(4, true, &c, &e) == DPC_OK && c, "%s", e.msg);
    float *a = malloc(sizeof(float) * 130 * K), *wt = malloc(sizeof(float) * K * NO), *y = malloc(sizeof(float) * 130 * NO);
    for (int i = 0; i < 130 * K; i++)
        a[i] = (float)((i * 7919) % 201 - 100) / 100.0f;
    omp_set_num_threads(1);
    for (int pass = 0; c && pass < 2; pass++) {
        for (int i = 0; i < K * NO; i++)
            wt[i] = (float)(((long long)i * 104729 + pass * 31) % 199 - 99) / 99.0f;
        if (pass)
            dpc_dnnl_linears_changed(c);
        static const int64_t rows[] = {5, 64, 65, 130};
        for (size_t t = 0; t < sizeof rows / sizeof *rows; t++) {
            int64_t m = rows[t];
            memset(y, 0, sizeof(float) * 130 * NO);
            int rc = dpc_dnnl_linear(c, &r, 2, m, NO, K, a, wt, y, 1, &e);
            const char *impl = dpc_dnnl_linear_impl(r, 2);
            if (!avx512) {
                CHECK(rc == 0, "%lld rows: rc %d (%s)", (long long)m, rc, e.msg);
                CHECK(strcmp(impl, "sgemm-padded") == 0, "%lld rows: ran %s, not sgemm-padded", (long long)m, impl);
            } else if (m > DPC_LINEAR_MATMUL_MAX_M) {
                CHECK(rc == 1, "%lld rows on AVX-512: rc %d, not declined", (long long)m, rc);
                continue;
            } else
                CHECK(rc == 0 || rc == 1, "%lld rows: rc %d (%s)", (long long)m, rc, e.msg);
            if (rc != 0)
                continue;
            double err = err_of(a, wt, y, m);
            CHECK(err <= 1e-5, "weights %d, %lld rows (%s): error %.3g against float64", pass, (long long)m, impl, err);
        }
    }
    dpc_dnnl_rlinears_free(r);
    dpc_dnnl_linears_free(c);
    free(a);
    free(wt);
    free(y);
    return finish("test_linear_dnnl");
}
