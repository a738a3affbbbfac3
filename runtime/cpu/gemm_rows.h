/* gemm_rows.h - C = A . B for a few rows of A against a large B, bound by
 * reading B once (a linear's GEMM at batch 1-4; docs/performance.md,
 * "Small-batch linears"). */
#ifndef DPC_GEMM_ROWS_H
#define DPC_GEMM_ROWS_H

#include "base.h"

#include <stdint.h>

/* The most rows of A the streaming loop takes: from 5 rows dnnl_sgemm's
 * packed kernel was faster (measured, AlexNet's 9216x4096 classifier). */
#define DPC_GEMM_ROWS_MAX 4

/* Reads DPC_GEMM_ROWS (a flag, default on; strictly: a typo is a
 * DPC_EUSAGE error). Every new CPU backend calls it. */
dpc_status dpc_gemm_rows_init(dpc_err *e);

/* Whether sgemm(ta, tb, m, ...) should run as dpc_gemm_rows: A and B not
 * transposed, m <= DPC_GEMM_ROWS_MAX, and not switched off
 * (DPC_GEMM_ROWS=0). */
int dpc_gemm_rows_fits(int ta, int tb, int64_t m);

/* C[m, n] = A[m, k] . B[k, n], row-major, columns split over `threads`
 * OpenMP threads (where the runtime has OpenMP). k >= 1. */
void dpc_gemm_rows(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                   int64_t ldc, int threads);

#endif
