/* backend.h - the contract between the model runtime and a device backend
 * (ggml style, as ggml-backend-impl.h: a struct of function pointers, the
 * optional ones marked). The CPU backend (backend_cpu.h) compiles the C
 * dialect of the kernels into a shared object; the CUDA backend
 * (backend_cuda.h) compiles the CUDA dialect with NVRTC and runs it from
 * the launch plan (compiler/kabi.h). Both run the same compiled unit
 * (dpc_compile.h); the kernel ABI they share with the generated code is
 * compiler/kabi.h. */
#ifndef DPC_BACKEND_H
#define DPC_BACKEND_H

#include "dpc_compile.h"
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
    /* ---- required ---- */
    /* The device: compiles the model's kernels (or takes them from the
     * disk cache). */
    dpc_status (*prepare)(dpc_backend *be, const dpc_unit *u, dpc_err *e);
    /* One replica (its own memory plan, stream and views of the shared
     * weights), a forward on it, its end. */
    dpc_status (*replica_new)(dpc_backend *be, int device_index, dpc_replica **out, dpc_err *e);
    dpc_status (*run)(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e);
    void (*replica_free)(dpc_backend *be, dpc_replica *r);
    void (*destroy)(dpc_backend *be);
    /* ---- optional (NULL for the CPU) ---- */
    /* Run split in two for devices that work asynchronously. launch
     * enqueues the forward (inputs copied in, kernels, outputs copied out)
     * and returns at once; sync waits for it, fills a->outputs and reports
     * a failed kernel. run == launch + sync. After a successful launch,
     * sync must be called with the same arguments before the replica is
     * used again. See dpc_dp_opts.async_kinds. */
    dpc_status (*launch)(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e);
    dpc_status (*sync)(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e);
    /* Called once every replica of a device list exists, for work over all
     * of them at once (the CUDA backend's NCCL broadcast of the weights to
     * further GPUs). */
    dpc_status (*replicas_ready)(dpc_backend *be, dpc_err *e);
    /* The host weights the backend reads were bound again: what it computed
     * from them once per load (the prepare kernels, dpc_unit_nprepare) is
     * computed again before the next forward. A backend that holds copies
     * of the weights is rebuilt instead (NULL). */
    void (*weights_changed)(dpc_backend *be);
};

#endif
