/* backend_cuda.h - the CUDA backend (backend.h): the CUDA dialect of the
 * kernels compiled with NVRTC (kernel cache, ptxas), run from its launch
 * plan (compiler/kabi.h) through the driver, cuBLASLt and NCCL. The kernel
 * ABI is compiler/kabi.h (dpc_cu_kctx, dpc_cu_kerr). */
#ifndef DPC_BACKEND_CUDA_H
#define DPC_BACKEND_CUDA_H

#include "backend.h"
#include "kabi.h"

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

/* params as for the CPU backend (backend_cpu.h); they are copied to each
 * device once, so they must be bound before: to the first GPU from the
 * host when its first replica is created, to further GPUs by one NCCL
 * broadcast in replicas_ready (a peer copy where NCCL cannot be loaded).
 * device_index in replica_new is the CUDA ordinal; several replicas may
 * share a device (each has its own stream, memory and CUDA graph).
 * Options from the environment: DPC_CUDA_TF32=1 lets GEMMs use TF32 tensor
 * cores; DPC_CUDA_GRAPHS=0 launches kernel by kernel instead of replaying a
 * CUDA graph; DPC_CUDA_SYNC=1 synchronises after every step (debugging: an
 * asynchronous fault is then blamed on its kernel); DPC_CUDNN=0 runs every
 * convolution as im2col + cuBLASLt, 1 (default) through cuDNN where it
 * loads and takes the shape, auto times both once per convolution and
 * batch size and keeps the faster (docs/internals.md, "cuDNN"). prec: floats (weights,
 * activations, inputs and outputs on the device) in f32, or in 16 bits with
 * f32 arithmetic and GEMM accumulation; the caller's tensors stay f32. */
dpc_status dpc_backend_cuda_new(const dpc_unit *u, float *const *params, kprec prec, dpc_backend **out, dpc_err *e);

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
    long cudnn_calls;    /* cuDNN convolutions enqueued (eager and captured) */
    int convs_cudnn, convs_fused, convs_fallback; /* at the planned batch: how each conv step runs */
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
    int cudnn_per_forward;            /* cuDNN convolutions */
} dpc_cuda_bench;
dpc_status dpc_cuda_bench_steps(dpc_backend *be, dpc_replica *r, int64_t N, bool graph, int warm, int iters,
                                dpc_cuda_bench *out, dpc_err *e);

#endif
