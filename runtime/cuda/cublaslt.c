/* cublaslt.c - cuBLASLt loaded on first use; GEMM + epilogue through it
 * (see cublaslt.h). */
#include "cublaslt.h"
#include "cuda_driver.h"
#include "faults.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* The library, not linked (see dpc_dlopen_toolkit): the full path CMake
 * found, else the soname on the loader's path. */
#ifndef DPC_CUBLASLT_LIBRARY_FILE
#define DPC_CUBLASLT_LIBRARY_FILE ""
#endif
#ifndef DPC_CUBLASLT_SONAME
#define DPC_CUBLASLT_SONAME "libcublasLt.so.13"
#endif

/* ---- cuBLASLt, loaded once ---- */

#define DPC_LT_FUNCS(X)                                                                            \
    X(cublasLtCreate)                                                                              \
    X(cublasLtDestroy)                                                                             \
    X(cublasLtGetVersion)                                                                          \
    X(cublasLtMatmul)                                                                              \
    X(cublasLtMatmulAlgoGetHeuristic)                                                              \
    X(cublasLtMatmulDescCreate)                                                                    \
    X(cublasLtMatmulDescDestroy)                                                                   \
    X(cublasLtMatmulDescSetAttribute)                                                              \
    X(cublasLtMatmulPreferenceCreate)                                                              \
    X(cublasLtMatmulPreferenceDestroy)                                                             \
    X(cublasLtMatmulPreferenceSetAttribute)                                                        \
    X(cublasLtMatrixLayoutCreate)                                                                  \
    X(cublasLtMatrixLayoutDestroy)                                                                 \
    X(cublasLtMatrixLayoutSetAttribute)

typedef struct lt_api {
#define DPC_LT_FIELD_(name) __typeof__(&name) name;
    DPC_LT_FUNCS(DPC_LT_FIELD_)
#undef DPC_LT_FIELD_
} lt_api;

static pthread_once_t g_lt_once = PTHREAD_ONCE_INIT;
static lt_api g_lt;
static atomic_bool g_lt_ready;
static char g_lt_msg[DPC_ERR_MSG];

static void lt_load_once(void) {
    void *lib = dpc_dlopen_toolkit("cuBLASLt", "DPC_CUBLASLT_LIBRARY", DPC_CUBLASLT_LIBRARY_FILE,
                                   DPC_CUBLASLT_SONAME, g_lt_msg, sizeof g_lt_msg);
    if (!lib)
        return;
#define DPC_LT_RESOLVE_(name)                                                                      \
    {                                                                                              \
        void *p_ = dlsym(lib, #name);                                                              \
        if (!p_) {                                                                                 \
            snprintf(g_lt_msg, sizeof g_lt_msg,                                                    \
                     "cuBLASLt %s lacks %s (set DPC_CUBLASLT_LIBRARY to a libcublasLt)", DPC_CUBLASLT_SONAME, #name); \
            return;                                                                                \
        }                                                                                          \
        memcpy(&g_lt.name, &p_, sizeof p_);                                                        \
    }
    DPC_LT_FUNCS(DPC_LT_RESOLVE_)
#undef DPC_LT_RESOLVE_
    atomic_store_explicit(&g_lt_ready, true, memory_order_release);
}

/* Loads cuBLASLt once; DPC_EDEVICE naming the library and
 * DPC_CUBLASLT_LIBRARY when it cannot be loaded. */
static dpc_status lt_load(dpc_err *e) {
    pthread_once(&g_lt_once, lt_load_once);
    if (!atomic_load_explicit(&g_lt_ready, memory_order_acquire))
        return dpc_errf(e, DPC_EDEVICE, "%s", g_lt_msg);
    return DPC_OK;
}

/* From here on a cuBLASLt name calls through the table (loaded by
 * dpc_lt_create before any handle exists), while the LT() macro below still
 * names the call as written ("cublasLtMatmul failed: ..."). */
#define cublasLtCreate g_lt.cublasLtCreate
#define cublasLtDestroy g_lt.cublasLtDestroy
#define cublasLtGetVersion g_lt.cublasLtGetVersion
#define cublasLtMatmul g_lt.cublasLtMatmul
#define cublasLtMatmulAlgoGetHeuristic g_lt.cublasLtMatmulAlgoGetHeuristic
#define cublasLtMatmulDescCreate g_lt.cublasLtMatmulDescCreate
#define cublasLtMatmulDescDestroy g_lt.cublasLtMatmulDescDestroy
#define cublasLtMatmulDescSetAttribute g_lt.cublasLtMatmulDescSetAttribute
#define cublasLtMatmulPreferenceCreate g_lt.cublasLtMatmulPreferenceCreate
#define cublasLtMatmulPreferenceDestroy g_lt.cublasLtMatmulPreferenceDestroy
#define cublasLtMatmulPreferenceSetAttribute g_lt.cublasLtMatmulPreferenceSetAttribute
#define cublasLtMatrixLayoutCreate g_lt.cublasLtMatrixLayoutCreate
#define cublasLtMatrixLayoutDestroy g_lt.cublasLtMatrixLayoutDestroy
#define cublasLtMatrixLayoutSetAttribute g_lt.cublasLtMatrixLayoutSetAttribute

#define WORKSPACE_BYTES ((size_t)32 << 20) /* NVIDIA's advice for Hopper */
#define PLAN_CACHE 64

/* What the descriptors and the algorithm depend on. Compared with memcmp, so
 * always built from a zeroed struct. */
typedef struct plan_key {
    int64_t M, N, K, lda, ldb, ldc, strideA, strideB, strideC;
    int32_t batch, dtype, epilogue;
    uint8_t transA, transB, tf32, pad;
    uint32_t alignA, alignB, alignC; /* of the pointers, for the heuristic */
} plan_key;

typedef struct plan {
    bool used;
    plan_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our B), B (our A), C = D */
    cublasLtMatmulAlgo_t algo;
} plan;

struct dpc_lt {
    cublasLtHandle_t handle;
    CUstream stream;
    CUdeviceptr workspace;
    plan plans[PLAN_CACHE];
    int next_evict;
};

const char *dpc_lt_status_name(int status) {
    switch ((cublasStatus_t)status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

size_t dpc_lt_version(void) { return lt_load(NULL) == DPC_OK ? cublasLtGetVersion() : 0; }

static const char *dtype_name(dpc_lt_dtype t) {
    switch (t) {
    case DPC_LT_F32: return "f32";
    case DPC_LT_BF16: return "bf16";
    case DPC_LT_F16: return "f16";
    }
    return "?";
}

static dpc_status lt_fail(cublasStatus_t st, const char *call, const dpc_lt_gemm_desc *d,
                          dpc_err *e) {
    int n = (int)strcspn(call, "( "); /* the function's name, without its arguments */
    if (d)
        return dpc_errf(e, st == CUBLAS_STATUS_ALLOC_FAILED ? DPC_ENOMEM : DPC_EDEVICE,
                        "%.*s failed: %s (%d) for GEMM M=%lld N=%lld K=%lld batch=%d %s%s%s", n, call,
                        dpc_lt_status_name(st), (int)st, (long long)d->M, (long long)d->N,
                        (long long)d->K, d->batch > 1 ? d->batch : 1, dtype_name(d->dtype),
                        d->transA ? " transA" : "", d->transB ? " transB" : "");
    return dpc_errf(e, st == CUBLAS_STATUS_ALLOC_FAILED ? DPC_ENOMEM : DPC_EDEVICE,
                    "%.*s failed: %s (%d)", n, call, dpc_lt_status_name(st), (int)st);
}

/* Evaluates a cuBLASLt call; on failure records it and jumps to fail. */
#define LT(call)                                                                                   \
    do {                                                                                           \
        cublasStatus_t st_ = (call);                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                        \
            s = lt_fail(st_, #call, d, e);                                                         \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

dpc_status dpc_lt_create(dpc_lt **out, void *stream, dpc_err *e) {
    *out = NULL;
    dpc_status s = dpc_cuda_load(e);
    if (s == DPC_OK)
        s = lt_load(e);
    if (s != DPC_OK)
        return s;
    dpc_lt *lt = dpc_calloc(1, sizeof *lt);
    if (!lt)
        return dpc_errf(e, DPC_ENOMEM, "out of memory creating a cuBLASLt handle");
    lt->stream = (CUstream)stream;
    const dpc_lt_gemm_desc *d = NULL; /* for LT() */
    LT(cublasLtCreate(&lt->handle));
    s = DPC_CU(e, cuMemAlloc(&lt->workspace, WORKSPACE_BYTES));
    if (s != DPC_OK) {
        dpc_err_prefix(e, "cuBLASLt workspace (%zu bytes): ", WORKSPACE_BYTES);
        goto fail;
    }
    *out = lt;
    return DPC_OK;
fail:
    dpc_lt_destroy(lt);
    return s;
}

static void plan_free(plan *p) {
    if (p->op)
        cublasLtMatmulDescDestroy(p->op);
    if (p->la)
        cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb)
        cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc)
        cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

void dpc_lt_destroy(dpc_lt *lt) {
    if (!lt)
        return;
    for (int i = 0; i < PLAN_CACHE; i++)
        plan_free(&lt->plans[i]);
    if (lt->workspace && dpc_cuda())
        dpc_cuda()->cuMemFree(lt->workspace);
    if (lt->handle)
        cublasLtDestroy(lt->handle);
    dpc_free(lt);
}

/* The largest power of two (up to 256) dividing the address. */
static uint32_t alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    if (a == 0)
        return 256;
    uintptr_t low = a & (~a + 1);
    return low > 256 ? 256 : (uint32_t)low;
}

static cudaDataType_t cuda_type(dpc_lt_dtype t) {
    switch (t) {
    case DPC_LT_BF16: return CUDA_R_16BF;
    case DPC_LT_F16: return CUDA_R_16F;
    case DPC_LT_F32: break;
    }
    return CUDA_R_32F;
}

static dpc_status validate(const dpc_lt_gemm_desc *d, const void *bias, plan_key *k, dpc_err *e) {
    if (d->dtype != DPC_LT_F32 && d->dtype != DPC_LT_BF16 && d->dtype != DPC_LT_F16)
        return dpc_errf(e, DPC_EUSAGE, "cuBLASLt GEMM: unknown dtype %d", (int)d->dtype);
    if (d->epilogue < DPC_LT_EPI_NONE || d->epilogue > DPC_LT_EPI_GELU_BIAS)
        return dpc_errf(e, DPC_EUSAGE, "cuBLASLt GEMM: unknown epilogue %d", (int)d->epilogue);
    if (d->M < 0 || d->N < 0 || d->K < 1)
        return dpc_errf(e, DPC_EUSAGE, "cuBLASLt GEMM: bad sizes M=%lld N=%lld K=%lld",
                        (long long)d->M, (long long)d->N, (long long)d->K);
    if (d->epilogue != DPC_LT_EPI_NONE && !bias)
        return dpc_errf(e, DPC_EUSAGE, "cuBLASLt GEMM: the bias epilogue needs a bias pointer");
    if (d->batch < 0)
        return dpc_errf(e, DPC_EUSAGE, "cuBLASLt GEMM: negative batch %d", d->batch);
    memset(k, 0, sizeof *k);
    k->M = d->M, k->N = d->N, k->K = d->K;
    k->transA = d->transA, k->transB = d->transB;
    /* Row lengths of the stored matrices. */
    int64_t rowA = d->transA ? d->M : d->K, rowB = d->transB ? d->K : d->N, rowC = d->N;
    k->lda = d->lda ? d->lda : rowA;
    k->ldb = d->ldb ? d->ldb : rowB;
    k->ldc = d->ldc ? d->ldc : rowC;
    if (k->lda < rowA || k->ldb < rowB || k->ldc < rowC)
        return dpc_errf(e, DPC_EUSAGE,
                        "cuBLASLt GEMM: leading dimensions lda=%lld ldb=%lld ldc=%lld shorter "
                        "than the rows (%lld, %lld, %lld)",
                        (long long)k->lda, (long long)k->ldb, (long long)k->ldc, (long long)rowA,
                        (long long)rowB, (long long)rowC);
    k->batch = d->batch > 1 ? d->batch : 1;
    if (k->batch > 1) {
        int64_t sa, sb, sc;
        if (!dpc_mul_i64(d->transA ? d->K : d->M, k->lda, &sa) ||
            !dpc_mul_i64(d->transB ? d->N : d->K, k->ldb, &sb) || !dpc_mul_i64(d->M, k->ldc, &sc))
            return dpc_errf(e, DPC_EUSAGE, "cuBLASLt GEMM: matrix sizes overflow");
        k->strideA = d->strideA ? d->strideA : sa;
        k->strideB = d->strideB ? d->strideB : sb;
        k->strideC = d->strideC ? d->strideC : sc;
    }
    k->dtype = d->dtype;
    k->epilogue = d->epilogue;
    k->tf32 = d->dtype == DPC_LT_F32 && d->tf32;
    return DPC_OK;
}

static dpc_status layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols,
                         int64_t ld, int32_t batch, int64_t stride, const dpc_lt_gemm_desc *d,
                         dpc_err *e) {
    dpc_status s = DPC_OK;
    LT(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
    if (batch > 1) {
        LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                            sizeof batch));
        LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &stride, sizeof stride));
    }
fail:
    return s;
}

/* Builds descriptors for a shape and asks the heuristic for an algorithm. */
static dpc_status make_plan(dpc_lt *lt, const plan_key *k, const dpc_lt_gemm_desc *d, plan *p,
                            dpc_err *e) {
    dpc_status s = DPC_OK;
    cublasLtMatmulPreference_t pref = NULL;
    memset(p, 0, sizeof *p);
    cudaDataType_t t = cuda_type(d->dtype);
    cublasComputeType_t compute = k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    LT(cublasLtMatmulDescCreate(&p->op, compute, CUDA_R_32F));

    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: our B
     * goes first. A row-major [r,c] matrix is a column-major [c,r] one. */
    cublasOperation_t opa = k->transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = k->transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    switch ((dpc_lt_epilogue)k->epilogue) {
    case DPC_LT_EPI_NONE: epi = CUBLASLT_EPILOGUE_DEFAULT; break;
    case DPC_LT_EPI_BIAS: epi = CUBLASLT_EPILOGUE_BIAS; break;
    case DPC_LT_EPI_RELU_BIAS: epi = CUBLASLT_EPILOGUE_RELU_BIAS; break;
    case DPC_LT_EPI_GELU_BIAS: epi = CUBLASLT_EPILOGUE_GELU_BIAS; break;
    }
    LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));

    /* cuBLASLt's A: our B, column-major [N,K] (or [K,N] transposed). */
    s = layout(&p->la, t, k->transB ? k->K : k->N, k->transB ? k->N : k->K, k->ldb, k->batch,
               k->strideB, d, e);
    if (s == DPC_OK) /* cuBLASLt's B: our A, [K,M] (or [M,K] transposed). */
        s = layout(&p->lb, t, k->transA ? k->M : k->K, k->transA ? k->K : k->M, k->lda, k->batch,
                   k->strideA, d, e);
    if (s == DPC_OK) /* C and D: [N,M]. */
        s = layout(&p->lc, t, k->N, k->M, k->ldc, k->batch, k->strideC, d, e);
    if (s != DPC_OK)
        goto fail;

    LT(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = WORKSPACE_BYTES;
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                            sizeof ws));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                            &k->alignB, sizeof k->alignB));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                            &k->alignA, sizeof k->alignA));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                            &k->alignC, sizeof k->alignC));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                            &k->alignC, sizeof k->alignC));
    cublasLtMatmulHeuristicResult_t result;
    memset(&result, 0, sizeof result);
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(lt->handle, p->op, p->la, p->lb, p->lc, p->lc, pref, 1,
                                      &result, &found));
    if (found < 1) {
        s = dpc_errf(e, DPC_EDEVICE,
                     "cuBLASLt has no algorithm for GEMM M=%lld N=%lld K=%lld batch=%d %s "
                     "(epilogue %d)",
                     (long long)k->M, (long long)k->N, (long long)k->K, k->batch,
                     dtype_name(d->dtype), k->epilogue);
        goto fail;
    }
    p->algo = result.algo;
    p->key = *k;
    p->used = true;
    cublasLtMatmulPreferenceDestroy(pref);
    return DPC_OK;
fail:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    plan_free(p);
    return s;
}

dpc_status dpc_lt_gemm(dpc_lt *lt, const dpc_lt_gemm_desc *d, const void *A, const void *B,
                       const void *bias, void *C, void *stream, dpc_err *e) {
    plan_key k;
    dpc_status s = validate(d, bias, &k, e);
    if (s != DPC_OK)
        return s;
    if (d->M == 0 || d->N == 0)
        return DPC_OK;
    k.alignA = alignment(A);
    k.alignB = alignment(B);
    k.alignC = alignment(C);

    plan *p = NULL;
    for (int i = 0; i < PLAN_CACHE && !p; i++)
        if (lt->plans[i].used && memcmp(&lt->plans[i].key, &k, sizeof k) == 0)
            p = &lt->plans[i];
    if (!p) {
        int slot = -1;
        for (int i = 0; i < PLAN_CACHE && slot < 0; i++)
            if (!lt->plans[i].used)
                slot = i;
        if (slot < 0) { /* full: replace in turn */
            slot = lt->next_evict;
            lt->next_evict = (lt->next_evict + 1) % PLAN_CACHE;
            plan_free(&lt->plans[slot]);
        }
        p = &lt->plans[slot];
        s = make_plan(lt, &k, d, p, e);
        if (s != DPC_OK)
            return s;
    }

    if (dpc_fault_kernel_should_fail())
        return dpc_errf(e, DPC_EDEVICE, "cublasLtMatmul failed: injected fault");
    if (d->epilogue != DPC_LT_EPI_NONE)
        LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof bias));
    float alpha = d->alpha != 0.0f ? d->alpha : 1.0f, beta = d->beta;
    cudaStream_t st = (cudaStream_t)(stream ? stream : (void *)lt->stream);
    LT(cublasLtMatmul(lt->handle, p->op, &alpha, B, p->la, A, p->lb, &beta, C, p->lc, C, p->lc,
                      &p->algo, (void *)(uintptr_t)lt->workspace, WORKSPACE_BYTES, st));
    return DPC_OK;
fail:
    return s;
}
