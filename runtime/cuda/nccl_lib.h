/* nccl_lib.h - NCCL, loaded at run time (named so as not to hide NCCL's own
 * nccl.h, which it includes for the types).
 *
 * Like the CUDA driver (cuda_driver.h), NCCL is never linked: it is
 * dlopen'ed on first use, so dpc runs where it is not installed and the CUDA
 * backend then copies weights between GPUs by peer copies instead. nccl.h
 * (the library's own header) is included only for its types.
 *
 *     dpc_err e;
 *     if (dpc_nccl_load(&e) != DPC_OK) ... e.msg says why (not found, too old)
 *     if (DPC_NCCL(&e, ncclGroupStart()) != DPC_OK) ...
 *
 * The library code never prints: every failure is a dpc_err naming the call
 * and NCCL's error ("ncclBroadcast failed: ncclUnhandledCudaError (1): ..."). */
#ifndef DPC_NCCL_LIB_H
#define DPC_NCCL_LIB_H

#include "base.h"

#include <cuda.h>
#include <nccl.h>

/* Every NCCL entry point dpc uses, resolved when the library loads. */
#define DPC_NCCL_FUNCS(X)                                                                          \
    X(ncclGetVersion)                                                                              \
    X(ncclGetErrorString)                                                                          \
    X(ncclCommInitAll)                                                                             \
    X(ncclCommDestroy)                                                                             \
    X(ncclCommAbort)                                                                               \
    X(ncclCommGetAsyncError)                                                                       \
    X(ncclGroupStart)                                                                              \
    X(ncclGroupEnd)                                                                                \
    X(ncclBroadcast)

typedef struct dpc_nccl_api {
#define DPC_NCCL_FIELD_(name) __typeof__(&name) name;
    DPC_NCCL_FUNCS(DPC_NCCL_FIELD_)
#undef DPC_NCCL_FIELD_
} dpc_nccl_api;

/* Loads libnccl.so.2 (or $DPC_NCCL_LIBRARY, a path, for tests and unusual
 * installs) once per process; thread-safe; later calls return the first
 * call's outcome. Needs no GPU. Fails with DPC_EDEVICE and a message that
 * starts "NCCL not found (libnccl.so.2): ..." when the library cannot be
 * opened, or says what is wrong with the one that was found. */
dpc_status dpc_nccl_load(dpc_err *e);

/* The entry points; NULL unless dpc_nccl_load succeeded. */
const dpc_nccl_api *dpc_nccl(void);

/* NCCL's version code (22809 for 2.28.9); 0 when it could not be loaded.
 * dpc_nccl_version_string writes "2.28.9". */
int dpc_nccl_version(void);
void dpc_nccl_version_string(int code, char *out, size_t n);

/* "ncclUnhandledCudaError"; works without the library (own table). */
const char *dpc_nccl_error_name(ncclResult_t r);

/* DPC_OK for ncclSuccess; otherwise fills *e with
 * "<call> failed: ncclX (n): <description>" and returns DPC_EDEVICE. call
 * may carry its arguments, as DPC_NCCL passes them; only the name up to '('
 * is kept. */
dpc_status dpc_nccl_check(ncclResult_t r, const char *call, dpc_err *e);

/* Calls an NCCL function through the table and checks it:
 *     DPC_NCCL(e, ncclGroupEnd())   -> dpc_status
 * Only after dpc_nccl_load succeeded. */
#define DPC_NCCL(e, call) dpc_nccl_check(dpc_nccl()->call, #call, (e))

/* Copies bytes from bufs[0] on GPU ordinals[0] to bufs[i] on ordinals[i],
 * for i in [1, n): one communicator per GPU (ncclCommInitAll, rank i on
 * ordinals[i]), one ncclBroadcast per rank inside one
 * ncclGroupStart/ncclGroupEnd, each on a stream of its GPU's context
 * ctxs[i]; returns once every GPU has its copy. Ordinals must be distinct.
 * Communicators and streams live only for the call: weights are copied
 * once, and a communicator holds device memory. n == 1 runs NCCL too
 * (an in-place broadcast on one GPU: tests). Needs dpc_nccl_load and
 * dpc_cuda_load to have succeeded. The context current on the calling
 * thread afterwards is unspecified. */
dpc_status dpc_nccl_broadcast(int n, const int *ordinals, const CUcontext *ctxs, const CUdeviceptr *bufs,
                              size_t bytes, dpc_err *e);

/* How the CUDA backend (backend_cuda.c) put the weights on its GPUs, for
 * `dpc run -v` and tests. */
typedef struct dpc_cuda_weights_info {
    int gpus;            /* distinct GPUs holding the weights */
    int nccl_groups;     /* NCCL broadcast groups made */
    int peer_copies;     /* weight copies made by cuMemcpyPeerAsync */
    char how[DPC_ERR_MSG]; /* "" on one GPU; "NCCL broadcast to 2 GPUs";
                            * "peer copy (NCCL not found (libnccl.so.2): ...)" */
} dpc_cuda_weights_info;
struct dpc_backend;
/* False when be is not the CUDA backend. */
bool dpc_cuda_weights(const struct dpc_backend *be, dpc_cuda_weights_info *out);

#endif
