/* backend.h - the contract between the model runtime and a device backend
 * (ggml style: a struct of function pointers). The CPU backend compiles the
 * C dialect of the kernels into a shared object; the CUDA backend (later)
 * compiles the CUDA dialect with NVRTC. Both run the same kernel IR. */
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
};

/* backend_cpu.c. params[i] points at model parameter i (f32), shared by all
 * replicas: the CPU needs no copy. */
dpc_status dpc_backend_cpu_new(const kgraph *kg, float *const *params, dpc_backend **out, dpc_err *e);
/* GEMM threads per replica (set before running several replicas at once). */
void dpc_cpu_set_gemm_threads(int n);
/* The generated C source, as the CPU backend compiles it. */
char *dpc_cpu_source(const kgraph *kg);

#endif
