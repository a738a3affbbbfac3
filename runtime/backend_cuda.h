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
 * asynchronous fault is then blamed on its kernel). prec: floats (weights,
 * activations, inputs and outputs on the device) in f32, or in 16 bits with
 * f32 arithmetic and GEMM accumulation; the caller's tensors stay f32. */
dpc_status dpc_backend_cuda_new(const kgraph *kg, float *const *params, kprec prec, dpc_backend **out, dpc_err *e);

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
