/* backend.h - the contract between the model runtime and a device backend
 * (ggml style: a struct of function pointers). The CPU backend compiles the
 * C dialect of the kernels into a shared object; the CUDA backend compiles
 * the CUDA dialect with NVRTC and runs it from a launch plan (below). Both
 * run the same kernel IR. */
#ifndef DPC_BACKEND_H
#define DPC_BACKEND_H

#include "kernel.h"
#include "tensor.h"

typedef struct dpc_backend dpc_backend;
typedef struct dpc_replica dpc_replica;

/* Everything a replica needs to run one forward. */
typedef struct dpc_run_args {
    int64_t N;                  /* batch rows of this replica */
    const dpc_tensor *inputs;   /* forward's tensor inputs (views), in order */
    const float *scalars;       /* forward's scalar inputs, in order */
    dpc_tensor **outputs;       /* preallocated, filled in place */
    int fail_at;                /* fault injection: kernel index that fails, -1 none */
} dpc_run_args;

struct dpc_backend {
    const char *name;
    /* Compiles the model's kernels (or takes them from the disk cache). */
    dpc_status (*prepare)(dpc_backend *be, const kgraph *kg, dpc_err *e);
    /* One replica: its own memory plan and views of the shared weights. */
    dpc_status (*replica_new)(dpc_backend *be, int device_index, dpc_replica **out, dpc_err *e);
    dpc_status (*run)(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e);
    void (*replica_free)(dpc_backend *be, dpc_replica *r);
    void (*destroy)(dpc_backend *be);
    /* Optional (NULL for the CPU): run split in two for devices that work
     * asynchronously. launch enqueues the forward (inputs copied in, kernels,
     * outputs copied out) and returns at once; sync waits for it, fills
     * a->outputs and reports a failed kernel. run == launch + sync. After a
     * successful launch, sync must be called with the same arguments before
     * the replica is used again. See dpc_dp_opts.async_kinds. */
    dpc_status (*launch)(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e);
    dpc_status (*sync)(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e);
    /* Optional (NULL for the CPU): called once every replica of a device
     * list exists, for work over all of them at once (the CUDA backend's
     * NCCL broadcast of the weights to further GPUs). */
    dpc_status (*replicas_ready)(dpc_backend *be, dpc_err *e);
};

/* backend_cpu.c. params[i] points at model parameter i (f32), shared by all
 * replicas: the CPU needs no copy. */
dpc_status dpc_backend_cpu_new(const kgraph *kg, float *const *params, dpc_backend **out, dpc_err *e);
/* GEMM threads per replica (set before running several replicas at once). */
void dpc_cpu_set_gemm_threads(int n);
/* The generated C source, as the CPU backend compiles it. */
char *dpc_cpu_source(const kgraph *kg);

/* ---- CUDA ---------------------------------------------------------------
 *
 * The CUDA dialect (emit_cuda.c) is device code only: one extern "C"
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

typedef enum dpc_cu_step_kind { DPC_CU_LAUNCH, DPC_CU_GEMM } dpc_cu_step_kind;

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

typedef struct dpc_cu_step {
    dpc_cu_step_kind kind;
    int kernel; /* index in kg->kernels */
    union {
        dpc_cu_launch launch;
        dpc_cu_gemm gemm;
    } u;
} dpc_cu_step;

typedef struct dpc_cu_plan {
    int nsteps;
    dpc_cu_step *steps;
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

/* One cuBLASLt call of a GEMM step at batch N: sizes and strides in
 * elements, offsets into the step's buffers a, b, c. */
typedef struct dpc_cu_gemm_call {
    int64_t M, N, K, lda, ldb, ldc;
    int64_t batch, strideA, strideB, strideC;
    int64_t offA, offB, offC;
} dpc_cu_gemm_call;

/* Calls fn once per cuBLASLt call of g at batch N (the host loops
 * expanded, the last loop varying fastest); stops at and returns fn's first
 * failure. Nothing is called when the GEMM is empty. */
dpc_status dpc_cu_gemm_expand(const dpc_cu_gemm *g, int64_t N,
                              dpc_status (*fn)(void *ctx, const dpc_cu_gemm_call *c), void *ctx);

/* emit_cuda.c: the source (as emit_cuda writes it) and its launch plan.
 * *source is malloc'ed; free the plan with dpc_cu_plan_free. DPC_EUSER
 * (naming the op and its .dp line) for a graph the CUDA dialect cannot run,
 * DPC_ENOMEM. */
dpc_status dpc_cuda_program(const kgraph *kg, kprec prec, char **source, dpc_cu_plan *plan, dpc_err *e);
void dpc_cu_plan_free(dpc_cu_plan *plan);

/* backend_cuda.c. params as for the CPU backend; they are copied to each
 * device once, so they must be bound before: to the first GPU from the
 * host when its first replica is created, to further GPUs by one NCCL
 * broadcast in replicas_ready (a peer copy where NCCL cannot be loaded).
 * device_index in replica_new is the CUDA ordinal; several replicas may
 * share a device (each has its own stream, memory and CUDA graph).
 * Options from the environment: DPC_CUDA_TF32=1 lets GEMMs use TF32 tensor
 * cores; DPC_CUDA_GRAPHS=0 launches kernel by kernel instead of replaying a
 * CUDA graph; DPC_CUDA_SYNC=1 synchronises after every step (debugging: an
 * asynchronous fault is then blamed on its kernel). prec: floats (weights,
 * activations, inputs and outputs on the device) in f32, or in 16 bits with
 * f32 arithmetic and GEMM accumulation; the caller's tensors stay f32. */
dpc_status dpc_backend_cuda_new(const kgraph *kg, float *const *params, kprec prec, dpc_backend **out, dpc_err *e);

/* Kernel images built ahead of time: a .dpa's CUBIN (sm_XX) and PTX
 * (compute_XX), attached to the model by dpc_artifact_instantiate once the
 * artifact passed its checksum and verification. The backend uses one only
 * when sha256 equals the SHA-256 of the CUDA source it generated itself for
 * this run: images are compiled from the f32 dialect, so a 16-bit run (or
 * any other source) never takes them. */
typedef struct dpc_cu_image {
    char arch[32];       /* "sm_90" (CUBIN) or "compute_80" (PTX) */
    unsigned char *data; /* PTX is NUL-terminated (len excludes it) */
    size_t len;
} dpc_cu_image;

typedef struct dpc_cu_images {
    char from[256];  /* for the report: the artifact's name ("m.dpa") */
    char sha256[65]; /* of the CUDA source the images were compiled from */
    int n;
    dpc_cu_image *img;
} dpc_cu_images;

void dpc_cu_images_free(dpc_cu_images *im);

/* Offers im to the CUDA backend be (before prepare; ignored for another
 * backend). im is borrowed and must outlive be. For each GPU the backend
 * takes, in this order: the stored CUBIN for exactly the device's sm_XX;
 * the stored PTX for the newest compute_YY the device can run (the driver
 * JIT-compiles it); else NVRTC (through the kernel cache) as without an
 * artifact. A stored image the driver refuses falls through to the next.
 * Stored images are machine code the checksum cannot vouch for: they are
 * offered only with DPC_CUDA_DPA_IMAGES=1 (off by default). */
void dpc_backend_cuda_offer_images(dpc_backend *be, const dpc_cu_images *im);

/* NVRTC for the CUDA backend's source src of model model_name (its unit
 * name and options, through the kernel cache): the artifact writer calls
 * it too, so its images are the backend's, cache keys included. */
dpc_status dpc_cuda_compile_image(const char *src, const char *model_name, const char *arch, dpc_buf *image,
                                  bool *hit, dpc_err *e);

/* How the CUDA backend got its kernels, for `dpc run -v`: "CUBIN sm_90
 * from m.dpa", "PTX compute_80 from m.dpa, JIT by driver", "NVRTC sm_90",
 * "NVRTC sm_90 (kernel cache)"; "cuda:0 ...; cuda:1 ..." when GPUs differ.
 * False when be is not the CUDA backend or no module is loaded. */
bool dpc_cuda_kernels(const dpc_backend *be, char *out, size_t n);

/* Statistics of a CUDA replica (for tests and benchmarks). */
typedef struct dpc_cuda_stats {
    long forwards;       /* forwards launched */
    long graph_launches; /* of them, replayed from a CUDA graph */
    long graphs_built;   /* graphs captured (one per batch size) */
    long kernel_launches;/* cuLaunchKernel calls made (eager and captured) */
    long gemms;          /* cuBLASLt calls made (eager and captured) */
    size_t arena_bytes;  /* device memory of the activation arena */
} dpc_cuda_stats;
/* False when r is not a CUDA replica. */
bool dpc_cuda_replica_stats(const dpc_backend *be, const dpc_replica *r, dpc_cuda_stats *out);

/* Benchmarks (tests/gpu/bench_gpu.c): the plan's steps alone, no copies in
 * or out, on the replica's stream at batch N (planned if needed; the
 * buffers hold what the last forward left), warm + iters times, each timed
 * with CUDA events; graph: captured once and replayed. A GEMM counts as
 * one step whatever cuBLASLt launches. */
typedef struct dpc_cuda_bench {
    double ms_median, ms_p10, ms_p90; /* device time per forward */
    double host_us;                   /* host time to enqueue one forward */
    int kernels_per_forward, gemms_per_forward, iters;
} dpc_cuda_bench;
dpc_status dpc_cuda_bench_steps(dpc_backend *be, dpc_replica *r, int64_t N, bool graph, int warm, int iters,
                                dpc_cuda_bench *out, dpc_err *e);

#endif
