/* kabi.h - the kernel ABI, defined once: what the generated kernels and the
 * runtime that runs them share, and the launch plan of the CUDA dialect.
 *
 * The declarations between the ">>> kabi-c" and "<<< kabi-c" markers are the
 * C dialect's ABI, those between ">>> kabi-cuda" and "<<< kabi-cuda" the
 * CUDA dialect's. At build time cmake/kabi_text.cmake copies each region,
 * byte for byte, into a C string (DPC_KABI_C_TEXT, DPC_KABI_CUDA_TEXT in
 * kabi_text.h of the build tree); emit_c.c and emit_cuda.c print that
 * string into the source they generate. So the generated kernels and the
 * runtime (backend_cpu.c, backend_cuda.c, which include this header)
 * compile the very same declarations. Both dialects call their context
 * dpc_kctx; the host names them dpc_cpu_kctx, dpc_cu_kctx and dpc_cu_kerr
 * (the #defines around each region), and in the CUDA region a device
 * pointer is DPC_KPTR(T): T * in device code, the 64-bit CUdeviceptr that
 * holds it on the host. tests/run/test_kabi.c compares the layouts
 * (offsetof, sizeof) of the generated and the host side.
 *
 * Edit a region and both sides change together; the generated source then
 * changes too (and with it every kernel cache key). */
#ifndef DPC_KABI_H
#define DPC_KABI_H

#include <stdbool.h>
#include <stdint.h>

/* ---- the C dialect: one call of dpc_forward(dpc_kctx *) --------------- */

#define dpc_kctx dpc_cpu_kctx
/* >>> kabi-c */
#define DPC_KEPT_NHWC 1
#define DPC_KEPT_NCHW8C 2
/* The runtime's view of one forward (compiler/kabi.h). */
typedef struct dpc_kctx {
    void **buf;           /* every buffer of the kernel graph, by id */
    int64_t N;            /* batch rows of this replica */
    const float *scalars; /* the forward's scalar inputs */
    void (*sgemm)(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                  const float *b, int64_t ldb, float *c, int64_t ldc);
    /* conv2d number conv_index of the unit as one library call (its
     * geometry and post-ops: dpc_unit_conv), y = post(conv(x, w) + bias),
     * sum the residual of a DPC_ACT_SUM post-op (bias and sum may be NULL);
     * 0 done, 1 declined (the kernel computes it itself), -1 failed (the
     * runtime holds the error). NULL: every conv computed by the kernel. */
    int (*conv)(struct dpc_kctx *ctx, int conv_index, const float *x, const float *w, const float *bias,
                const float *sum, float *y);
    int fail_at;          /* fault injection: kernel index that fails, -1 none */
    int64_t bad_index, bad_limit; /* what a failing embedding saw */
    int threads;          /* the replica's share of the cores: its large non-GEMM loops are split over them */
    /* the layout conv conv_index's result is kept in this forward, which
     * the kernels that read it then loop over: 0 NCHW (none kept),
     * DPC_KEPT_NHWC, DPC_KEPT_NCHW8C (oneDNN's nChw8c: channels in blocks
     * of 8, element (n, c, h, w) at ((n * C + c - c % 8) * H * W + (h * W
     * + w) * 8 + c % 8)); NULL: none is */
    int (*kept)(struct dpc_kctx *ctx, int conv_index);
    /* c[m, n] = a[m, k] . wt[k, n] for the linear whose W^T is buffer
     * wt_buf (or a matmul by parameter wt_buf, HuggingFace's Conv1D), as
     * one library call with the weights packed once; 0 done, 1
     * declined (the kernel calls sgemm), -1 failed (the runtime holds the
     * error). NULL: every linear through sgemm. */
    int (*linear)(struct dpc_kctx *ctx, int wt_buf, int64_t m, int64_t n, int64_t k, const float *a,
                  const float *wt, float *c);
} dpc_kctx;
/* <<< kabi-c */
#undef dpc_kctx

/* ---- the CUDA dialect: every kernel takes its buffers, then dpc_kctx ---- */

#define DPC_KPTR(T) unsigned long long /* a CUdeviceptr */
#define dpc_kctx dpc_cu_kctx
#define dpc_kerr dpc_cu_kerr
/* >>> kabi-cuda */
#ifndef DPC_KPTR
#define DPC_KPTR(T) T * /* a device pointer (compiler/kabi.h) */
#endif

/* The error flag: the first failing kernel (1-based, 0 none) and what it saw. */
typedef struct dpc_kerr {
    int kernel;
    int pad;
    long long index, limit;
} dpc_kerr;

/* Passed by value to every kernel (compiler/kabi.h). */
typedef struct dpc_kctx {
    DPC_KPTR(const float) scalars; /* the forward's scalar inputs */
    DPC_KPTR(dpc_kerr) err;
    long long N;          /* batch rows of this replica */
    long long g;          /* convolution group (im2col) */
} dpc_kctx;
/* <<< kabi-cuda */
#undef dpc_kerr
#undef dpc_kctx
#undef DPC_KPTR

/* ---- the CUDA launch plan -----------------------------------------------
 *
 * The CUDA dialect (emit_cuda*.c) is device code only: one extern "C"
 * kernel per launch. What the host does for each kernel of the IR is the
 * launch plan, built by the same pass: a list of steps, each a kernel
 * launch or a cuBLASLt GEMM, with every size written as k * N^p so that one
 * plan serves every batch size N. backend_cuda.c runs the plan. */

/* k * N^p elements (p = 0, 1 or 2). */
typedef struct dpc_cu_dim {
    int64_t k;
    int p;
} dpc_cu_dim;

static inline int64_t dpc_cu_dim_eval(dpc_cu_dim d, int64_t N) {
    int64_t v = d.k;
    for (int i = 0; i < d.p; i++)
        v *= N;
    return v;
}

typedef enum dpc_cu_step_kind { DPC_CU_LAUNCH, DPC_CU_GEMM, DPC_CU_CONV } dpc_cu_step_kind;

/* How a kernel's threads map to its work. */
typedef enum dpc_cu_grid {
    DPC_CU_ELEMS,      /* grid-stride loop over `work` items, `vec` per thread per step */
    DPC_CU_WARP_ROWS,  /* one warp per row, `work` rows */
    DPC_CU_BLOCK_ROWS, /* one block per row, `work` rows */
    DPC_CU_ONE,        /* one thread */
} dpc_cu_grid;

#define DPC_CU_BLOCK 256      /* threads per block, every kernel */
#define DPC_CU_MAX_PARAMS 48  /* buffer parameters of one kernel */
#define DPC_CU_MAX_LOOPS 6    /* host loops around one GEMM */

typedef struct dpc_cu_launch {
    const char *fn;             /* extern "C" name in the module: fn + suffix */
    const char *suffix;         /* "" or "_im2col" */
    dpc_cu_grid grid;
    dpc_cu_dim work;
    int vec;                    /* DPC_CU_ELEMS: items per thread per step (1 or 4) */
    int64_t g;                  /* passed as ctx.g (the convolution group) */
    int nbufs;
    int bufs[DPC_CU_MAX_PARAMS]; /* buffer ids, passed as pointers in this order, then ctx */
} dpc_cu_launch;

/* C[M,N] = A[M,K] . B[K,N] (B transposed when transB) in row-major terms,
 * as cublaslt.h has it, at element offsets offA/offB/offC of the buffers;
 * `batch` GEMMs strided by strideA/B/C in one cuBLASLt call, inside host
 * loops over `loop` (each adds index * its strides to the offsets). */
typedef struct dpc_cu_gemm {
    int a, b, c, bias;          /* buffer ids; bias -1 when none */
    int epilogue;               /* dpc_lt_epilogue */
    bool transB;
    dpc_cu_dim M, N, K, lda, ldb, ldc;
    dpc_cu_dim offA, offB, offC;
    dpc_cu_dim batch, strideA, strideB, strideC;
    int nloops;
    struct {
        dpc_cu_dim count, sA, sB, sC;
    } loop[DPC_CU_MAX_LOOPS];
} dpc_cu_gemm;

/* A convolution cuDNN may run (backend_cuda.c; docs/internals.md, "cuDNN"):
 * the `nfallback` steps after it (im2col launches and GEMMs) compute the
 * same result into y, [Co, N*Ho*Wo] (channel-major, as the GEMMs write it),
 * and the epilogue launch after them scatters y to NCHW with the bias and
 * the fused chain. With cuDNN the backend skips the fallback steps and
 * writes y itself; when `fused`, it writes `out` (NCHW) as
 * act(conv + bias + z) instead and skips the epilogue too. Symmetric
 * padding ph, pw: the trailing padding of the plan is the reads past H, W. */
typedef enum dpc_cu_act { DPC_CU_ACT_NONE = 0, DPC_CU_ACT_RELU = 1 } dpc_cu_act;
typedef struct dpc_cu_conv {
    int x, w, bias, y;  /* buffer ids; bias -1 when none */
    int out, z;         /* fused: the kernel's output and the residual added before act (-1 none) */
    bool fused;
    dpc_cu_act act;     /* fused only */
    int nfallback;
    int64_t C, H, W, Co, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, G; /* G: groups */
} dpc_cu_conv;

typedef struct dpc_cu_step {
    dpc_cu_step_kind kind;
    int kernel; /* index in kg->kernels */
    union {
        dpc_cu_launch launch;
        dpc_cu_gemm gemm;
        dpc_cu_conv conv;
    } u;
} dpc_cu_step;

typedef struct dpc_cu_plan {
    int nsteps;
    dpc_cu_step *steps;
    int nprepare; /* steps[0..nprepare-1]: the prepare kernels' (dpc_unit_nprepare), run once per
                   * device when the weights are bound; a forward runs the rest */
    int nkernels; /* extern "C" kernels in the source */
} dpc_cu_plan;

/* Blocks of DPC_CU_BLOCK threads for launch l at batch N on a GPU with
 * sm_count multiprocessors; 0 when there is no work. A grid-stride kernel
 * gets at most 32 blocks per multiprocessor (its loop covers the rest). */
static inline int64_t dpc_cu_blocks(const dpc_cu_launch *l, int64_t N, int sm_count) {
    int64_t work = dpc_cu_dim_eval(l->work, N);
    if (work <= 0)
        return 0;
    switch (l->grid) {
    case DPC_CU_ELEMS: {
        int64_t items = (work + l->vec - 1) / l->vec, cap = (int64_t)(sm_count > 0 ? sm_count : 16) * 32;
        int64_t blocks = (items + DPC_CU_BLOCK - 1) / DPC_CU_BLOCK;
        return blocks > cap ? cap : blocks;
    }
    case DPC_CU_WARP_ROWS: return (work + DPC_CU_BLOCK / 32 - 1) / (DPC_CU_BLOCK / 32);
    case DPC_CU_BLOCK_ROWS: return work;
    default: return 1;
    }
}

#endif
