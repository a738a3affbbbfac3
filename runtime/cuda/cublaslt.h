/* cublaslt.h - one GEMM with a fused epilogue through cuBLASLt, in PyTorch's
 * row-major terms:
 *
 *     C[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C  (+ bias[N], then ReLU/GELU)
 *
 * A is stored [M,K] (or [K,M] when transA), B [K,N] (or [N,K] when transB:
 * a Linear layer's weight [out,in] is B with transB). Leading dimensions are
 * row strides in elements. cuBLASLt is column-major; the wrapper swaps the
 * operands (C^T = B^T A^T) so callers never think about it.
 *
 * Inputs, output and bias share one dtype (f32, bf16, f16); accumulation and
 * alpha/beta are f32. TF32 tensor cores for f32 only when asked (accuracy).
 * GELU is cuBLASLt's tanh approximation. A batched strided GEMM shares one
 * bias across the batch.
 *
 * A handle owns a 32 MiB device workspace and a cache of descriptors and the
 * heuristic's algorithm per GEMM shape. It is not thread-safe: use one handle
 * per stream (and thread). The device's context must be current (see
 * dpc_cuda_context) when creating, using and destroying a handle. */
#ifndef DPC_CUBLASLT_H
#define DPC_CUBLASLT_H

#include "base.h"

typedef enum dpc_lt_dtype {
    DPC_LT_F32 = 0,
    DPC_LT_BF16 = 1,
    DPC_LT_F16 = 2,
} dpc_lt_dtype;

typedef enum dpc_lt_epilogue {
    DPC_LT_EPI_NONE = 0,
    DPC_LT_EPI_BIAS = 1,      /* + bias[N] */
    DPC_LT_EPI_RELU_BIAS = 2, /* relu(. + bias[N]) */
    DPC_LT_EPI_GELU_BIAS = 3, /* gelu_tanh(. + bias[N]) */
} dpc_lt_epilogue;

typedef struct dpc_lt_gemm_desc {
    int64_t M, N, K;
    bool transA, transB;
    int64_t lda, ldb, ldc; /* row strides in elements; 0 means packed */
    int32_t batch;         /* GEMMs in the batch; 0 or 1 for one */
    int64_t strideA, strideB, strideC; /* elements between batch items; 0 means packed */
    dpc_lt_dtype dtype;
    dpc_lt_epilogue epilogue;
    bool tf32;   /* f32 only: allow TF32 tensor cores */
    float alpha; /* 0 is read as 1, so a zeroed desc is a plain product */
    float beta;  /* 0: C is only written */
} dpc_lt_gemm_desc;

typedef struct dpc_lt dpc_lt;

/* stream (a CUstream, may be NULL) is the default for dpc_lt_gemm calls that
 * pass NULL. Needs the driver loaded and a current context. */
dpc_status dpc_lt_create(dpc_lt **out, void *stream, dpc_err *e);
void dpc_lt_destroy(dpc_lt *lt);

/* A, B, bias, C are device pointers. bias is required by every epilogue but
 * NONE. Enqueues the GEMM on stream (NULL: the handle's stream) and returns;
 * M or N of 0 does nothing. Errors name the cuBLASLt call, its status and
 * the GEMM. */
dpc_status dpc_lt_gemm(dpc_lt *lt, const dpc_lt_gemm_desc *d, const void *A, const void *B,
                       const void *bias, void *C, void *stream, dpc_err *e);

/* "CUBLAS_STATUS_NOT_SUPPORTED". */
const char *dpc_lt_status_name(int status);

/* cuBLASLt's version, major*10000 + minor*100 + patch (130100 for 13.1.0). */
size_t dpc_lt_version(void);

#endif
