/* cuda_driver.h - the CUDA driver API, loaded at run time.
 *
 * dpc never links libcuda: the driver is dlopen'ed on first use, so the same
 * binary runs (and says clearly why the GPU path is unavailable) on machines
 * without a GPU. The table below holds the entry points dpc calls; cuda.h is
 * included only for its types and prototypes.
 *
 *     dpc_err e;
 *     if (dpc_cuda_load(&e) != DPC_OK) ... e.msg says why (no driver, no device)
 *     CUcontext ctx;
 *     if (dpc_cuda_context(0, &ctx, &e) != DPC_OK) ...
 *     CUdeviceptr p;
 *     if (DPC_CU(&e, cuMemAlloc(&p, bytes)) != DPC_OK) ...
 *
 * Field names are the names cuda.h uses (cuMemAlloc, cuStreamBeginCapture...):
 * cuda.h maps each to its current ABI version (cuMemAlloc_v2, ...) and so do
 * the fields, so api->cuMemAlloc(...) calls the right function. */
#ifndef DPC_CUDA_DRIVER_H
#define DPC_CUDA_DRIVER_H

#include "base.h"

#include <cuda.h>

/* Every driver entry point dpc uses, resolved when the driver loads. */
#define DPC_CUDA_FUNCS(X)                                                                          \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)                                                                            \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetName)                                                                             \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDeviceTotalMem)                                                                            \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxSynchronize)                                                                            \
    X(cuCtxEnablePeerAccess)                                                                       \
    X(cuDeviceCanAccessPeer)                                                                       \
    X(cuMemGetInfo)                                                                                \
    X(cuModuleLoadDataEx)                                                                          \
    X(cuModuleUnload)                                                                              \
    X(cuModuleGetFunction)                                                                         \
    X(cuLaunchKernel)                                                                              \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemAllocHost)                                                                              \
    X(cuMemFreeHost)                                                                               \
    X(cuMemcpyHtoD)                                                                                \
    X(cuMemcpyDtoH)                                                                                \
    X(cuMemcpyDtoD)                                                                                \
    X(cuMemcpyHtoDAsync)                                                                           \
    X(cuMemcpyDtoHAsync)                                                                           \
    X(cuMemcpyDtoDAsync)                                                                           \
    X(cuMemcpyPeerAsync)                                                                           \
    X(cuMemsetD8Async)                                                                             \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamWaitEvent)                                                                           \
    X(cuEventCreate)                                                                               \
    X(cuEventRecord)                                                                               \
    X(cuEventSynchronize)                                                                          \
    X(cuEventElapsedTime)                                                                          \
    X(cuEventDestroy)                                                                              \
    X(cuStreamBeginCapture)                                                                        \
    X(cuStreamEndCapture)                                                                          \
    X(cuGraphInstantiate)                                                                          \
    X(cuGraphLaunch)                                                                               \
    X(cuGraphExecDestroy)                                                                          \
    X(cuGraphDestroy)

typedef struct dpc_cuda_api {
#define DPC_CUDA_FIELD_(name) __typeof__(&name) name;
    DPC_CUDA_FUNCS(DPC_CUDA_FIELD_)
#undef DPC_CUDA_FIELD_
} dpc_cuda_api;

/* Loads libcuda.so.1 (or $DPC_CUDA_DRIVER, a path, for tests and unusual
 * installs) and calls cuInit, once per process; thread-safe. Later calls
 * return the first call's outcome. Fails with DPC_EDEVICE and a message that
 * starts "no CUDA driver (libcuda.so.1 not found): ..." when there is no
 * driver, or names the cuInit error (CUDA_ERROR_NO_DEVICE...) when there is a
 * driver but no usable device. */
dpc_status dpc_cuda_load(dpc_err *e);

/* dlopen (RTLD_NOW | RTLD_LOCAL, never closed) of the library that $env
 * names, a path for tests and unusual installs, else of dflt; the CUDA
 * driver and NCCL load alike. *path is the name tried; NULL on failure,
 * with dlerror's reason in *why. */
void *dpc_dlopen_env(const char *env, const char *dflt, const char **path, const char **why);

/* A CUDA toolkit library dpc uses but does not link (NVRTC, cuBLASLt: linking
 * them cost every dpc command 0.2 s and 250 MB before main), dlopen'ed on
 * first use: $env if set, else file (the full path CMake found, as the
 * toolkit may be off the loader's path) when it exists, else soname. NULL on
 * failure, with msg (capacity n) saying "<what> could not be loaded
 * (<path>): <dlerror> (set <env> to its path)"; never closed. */
void *dpc_dlopen_toolkit(const char *what, const char *env, const char *file, const char *soname,
                         char *msg, size_t n);

/* The entry points; NULL unless dpc_cuda_load succeeded. */
const dpc_cuda_api *dpc_cuda(void);

/* Driver version (13000 for CUDA 13.0); 0 when no driver could be loaded. */
int dpc_cuda_driver_version(void);

/* Number of CUDA devices; 0 when there is no driver or no device. Loads the
 * driver if needed. */
int dpc_cuda_device_count(void);

/* True for the errors that leave the context (and so the process) unusable:
 * every later call returns them. The only remedy is a new process. */
bool dpc_cuda_is_sticky(CUresult r);

/* "CUDA_ERROR_OUT_OF_MEMORY"; works without a driver (own table). */
const char *dpc_cuda_error_name(CUresult r);

/* DPC_OK for CUDA_SUCCESS; otherwise fills *e with
 * "<call> failed: CUDA_ERROR_X (n): <description>" (plus a note for sticky
 * errors) and returns DPC_EDEVICE. call may carry its arguments, as DPC_CU
 * passes them; only the name up to '(' is kept. */
dpc_status dpc_cuda_check(CUresult r, const char *call, dpc_err *e);

/* Calls a driver function through the table and checks it:
 *     DPC_CU(e, cuMemAlloc(&p, n))   -> dpc_status
 * Only after dpc_cuda_load succeeded. */
#define DPC_CU(e, call) dpc_cuda_check(dpc_cuda()->call, #call, (e))
/* Same, returning the status from the enclosing function on failure. */
#define DPC_CU_TRY(e, call)                                                                        \
    do {                                                                                           \
        dpc_status dpc_cu_s_ = DPC_CU(e, call);                                                    \
        if (dpc_cu_s_ != DPC_OK)                                                                   \
            return dpc_cu_s_;                                                                      \
    } while (0)

typedef struct dpc_cuda_device {
    int ordinal;
    char name[256];
    int cc_major, cc_minor; /* compute capability, 9.0 on H100/H200 */
    char arch[16];          /* "sm_90": the NVRTC target for this device */
    size_t total_mem;       /* bytes */
    int sm_count;
} dpc_cuda_device;

dpc_status dpc_cuda_device_info(int ordinal, dpc_cuda_device *out, dpc_err *e);

/* Retains the device's primary context (once per process, so cuBLAS and dpc
 * share it) and makes it current on the calling thread. */
dpc_status dpc_cuda_context(int ordinal, CUcontext *ctx, dpc_err *e);

/* Releases the primary contexts retained by dpc_cuda_context (at exit, after
 * every stream, module and allocation is gone). */
void dpc_cuda_release_contexts(void);

#endif
