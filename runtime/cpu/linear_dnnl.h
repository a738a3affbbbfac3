/* linear_dnnl.h - a linear's GEMM at small batch as a oneDNN matmul
 * primitive with its weights packed once (built with DPC_BLAS=dnnl).
 *
 * A linear y = x . W^T + b runs in the generated C as one GEMM against
 * W^T, a buffer the prepare kernels write at load (fuse.c linear_wt).
 * dnnl_sgemm repacks that operand on every call; oneDNN's matmul
 * primitive (brgemm kernels) reads it in a blocked layout reordered once.
 * That repacking is what a GEMM of few rows pays for most: from 5 to
 * DPC_LINEAR_MATMUL_MAX_M rows the matmul measured 1.5-2x faster on an
 * AVX-512 Xeon (AlexNet's 9216x4096 classifier at 8 and 64 rows, one and
 * two threads; AlexNet batch 8 92 -> 73 ms). From 128 rows it was mixed in
 * the models (ViT-B/16 at 197 rows 1-10% faster, BERT at 128 4-6% slower),
 * so those stay on sgemm; below 5 rows gemm_rows.c streams W^T faster
 * still (docs/performance.md, "Packed linears"). backend_cpu.c hands it to
 * the generated C as ctx->linear (kabi.h); DPC_LINEAR_PACK=0 switches it
 * off.
 *
 * The packed weights belong to the backend (shared by its replicas, one
 * layout per linear); the primitives to each replica, per (M, threads). */
#ifndef DPC_LINEAR_DNNL_H
#define DPC_LINEAR_DNNL_H

#include "base.h"

#include <stdint.h>

#define DPC_LINEAR_MATMUL_MAX_M 64
/* Without AVX-512 (oneDNN 2.6 has no brgemm matmul there, so the matmul
 * declines), a linear of 5 rows or more runs dnnl_sgemm against a copy of
 * W^T whose rows are this many floats longer (one cache line): with rows of
 * exactly n floats, 768-3072 wide, sgemm ran at 33-86 GFLOP/s on an AVX2
 * EPYC core, padded at 65-96 (docs/performance.md, "Padded weights for
 * sgemm"). The copy doubles those weights' memory. */
#define DPC_LINEAR_LD_PAD 16

typedef struct dpc_dnnl_linears dpc_dnnl_linears;   /* per backend: engine, packed weights */
typedef struct dpc_dnnl_rlinears dpc_dnnl_rlinears; /* per replica: stream, primitives */

/* The linears of a unit with nbufs buffers (a weight is known by its
 * buffer id); *out NULL when not on (DPC_LINEAR_PACK=0, which
 * backend_cpu.c reads in every build, strictly: a typo is an error). */
dpc_status dpc_dnnl_linears_new(int nbufs, bool on, dpc_dnnl_linears **out, dpc_err *e);
void dpc_dnnl_linears_free(dpc_dnnl_linears *c);
void dpc_dnnl_rlinears_free(dpc_dnnl_rlinears *r);

/* The weights' buffers were written again (the prepare kernels ran): the
 * packed copies are packed again at their next call. */
void dpc_dnnl_linears_changed(dpc_dnnl_linears *c);

/* c[m, n] = a[m, k] . wt[k, n] (row-major, dense) for the weight in
 * buffer wt_buf, on `threads` threads (the caller has set OpenMP's count):
 * ctx->linear's contract, 0 done, 1 declined (the caller runs its GEMM), -1
 * failed with *e set. *r is created on first use. */
int dpc_dnnl_linear(dpc_dnnl_linears *c, dpc_dnnl_rlinears **r, int wt_buf, int64_t m, int64_t n, int64_t k,
                    const float *a, const float *wt, float *out, int threads, dpc_err *e);

/* The implementation the replica's last call for wt_buf used
 * ("brg:avx512_core", "sgemm-padded", "declined", "none"), for tests. */
const char *dpc_dnnl_linear_impl(const dpc_dnnl_rlinears *r, int wt_buf);

#endif
