/* nccl_lib.c - dlopen NCCL, resolve its entry points, name its errors, and
 * broadcast a buffer from one GPU to others with one NCCL group. */
#include "nccl_lib.h"

#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ncclCommInitAll and ncclBroadcast with today's signatures (the 2.x ABI
 * that nccl.h describes); ncclCommGetAsyncError appeared in 2.4. */
#define DPC_NCCL_MIN_VERSION 2400
#define DPC_NCCL_MAX_RANKS 64

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dpc_nccl_api g_api;
/* &g_api once everything loaded; atomic because error naming reads it while
 * another thread may still be loading. */
static _Atomic(const dpc_nccl_api *) g_ready;
static char g_msg[DPC_ERR_MSG];
static int g_version;

void dpc_nccl_version_string(int code, char *out, size_t n) {
    /* NCCL_VERSION: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z after */
    if (code >= 10000)
        snprintf(out, n, "%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
    else
        snprintf(out, n, "%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
}

/* Resolves every entry point; false (with g_msg set) if one is missing. */
static bool resolve_all(void *lib, const char *path) {
#define DPC_NCCL_RESOLVE_(name)                                                                    \
    {                                                                                              \
        void *p_ = dlsym(lib, #name);                                                              \
        if (!p_) {                                                                                 \
            snprintf(g_msg, sizeof g_msg, "%s is not a usable NCCL: it lacks %s", path, #name);                        \
            return false;                                                                          \
        }                                                                                          \
        memcpy(&g_api.name, &p_, sizeof p_);                                                       \
    }
    DPC_NCCL_FUNCS(DPC_NCCL_RESOLVE_)
#undef DPC_NCCL_RESOLVE_
    return true;
}

static void load_once(void) {
    const char *path, *why;
    void *lib = dpc_dlopen_env("DPC_NCCL_LIBRARY", "libnccl.so.2", &path, &why);
    if (!lib) {
        snprintf(g_msg, sizeof g_msg, "NCCL not found (%s): %s", path, why);
        return;
    }
    /* Never dlclose'd: NCCL keeps threads and state for the life of the
     * process once a communicator has existed. */
    if (!resolve_all(lib, path))
        return;
    int version = 0;
    ncclResult_t r = g_api.ncclGetVersion(&version);
    if (r != ncclSuccess) {
        snprintf(g_msg, sizeof g_msg, "NCCL %s: ncclGetVersion failed: %s (%d)", path, dpc_nccl_error_name(r), (int)r);
        return;
    }
    g_version = version;
    if (version < DPC_NCCL_MIN_VERSION) {
        char have[32];
        dpc_nccl_version_string(version, have, sizeof have);
        snprintf(g_msg, sizeof g_msg, "NCCL %s is too old: version %s, dpc needs 2.4 or newer", path, have);
        return;
    }
    g_msg[0] = 0;
    atomic_store_explicit(&g_ready, &g_api, memory_order_release);
}

dpc_status dpc_nccl_load(dpc_err *e) {
    pthread_once(&g_once, load_once);
    if (!atomic_load_explicit(&g_ready, memory_order_acquire))
        return dpc_errf(e, DPC_EDEVICE, "%s", g_msg);
    return DPC_OK;
}

const dpc_nccl_api *dpc_nccl(void) {
    pthread_once(&g_once, load_once);
    return atomic_load_explicit(&g_ready, memory_order_acquire);
}

int dpc_nccl_version(void) {
    pthread_once(&g_once, load_once);
    return g_version;
}

const char *dpc_nccl_error_name(ncclResult_t r) {
    switch (r) {
#define N_(x)                                                                                      \
    case x:                                                                                        \
        return #x;
        N_(ncclSuccess)
        N_(ncclUnhandledCudaError)
        N_(ncclSystemError)
        N_(ncclInternalError)
        N_(ncclInvalidArgument)
        N_(ncclInvalidUsage)
        N_(ncclRemoteError)
        N_(ncclInProgress)
#undef N_
    default:
        return "ncclUnrecognizedError";
    }
}

dpc_status dpc_nccl_check(ncclResult_t r, const char *call, dpc_err *e) {
    if (r == ncclSuccess)
        return DPC_OK;
    size_t n = strcspn(call, "( ");
    const dpc_nccl_api *nc = atomic_load_explicit(&g_ready, memory_order_acquire);
    const char *desc = nc ? nc->ncclGetErrorString(r) : NULL;
    return dpc_errf(e, DPC_EDEVICE, "%.*s failed: %s (%d)%s%s", (int)n, call, dpc_nccl_error_name(r), (int)r,
                    desc && *desc ? ": " : "", desc && *desc ? desc : "");
}

/* ---------------------------------------------------------- broadcast */

typedef struct bcast {
    int n;
    const int *ordinals;
    const CUcontext *ctxs;
    const CUdeviceptr *bufs;
    size_t bytes;
    ncclComm_t comms[DPC_NCCL_MAX_RANKS];
    CUstream streams[DPC_NCCL_MAX_RANKS];
} bcast;

static dpc_status make_streams(bcast *b, dpc_err *e) {
    for (int i = 0; i < b->n; i++) {
        dpc_status s = DPC_CU(e, cuCtxSetCurrent(b->ctxs[i]));
        if (s == DPC_OK)
            s = DPC_CU(e, cuStreamCreate(&b->streams[i], CU_STREAM_NON_BLOCKING));
        if (s != DPC_OK) {
            b->streams[i] = NULL;
            dpc_err_prefix(e, "a stream for the weight broadcast on cuda:%d: ", b->ordinals[i]);
            return s;
        }
    }
    return DPC_OK;
}

/* One group: every rank's ncclBroadcast must be inside it, or NCCL waits for
 * the missing ranks forever (one host thread drives every GPU). The group is
 * ended even after a failed call, as NCCL requires. */
static dpc_status group(bcast *b, dpc_err *e) {
    const dpc_nccl_api *nc = dpc_nccl();
    dpc_status s = DPC_NCCL(e, ncclGroupStart());
    if (s != DPC_OK)
        return s;
    for (int i = 0; s == DPC_OK && i < b->n; i++) {
        void *buf = (void *)(uintptr_t)b->bufs[i]; /* in place: the root sends its own buffer */
        s = dpc_nccl_check(nc->ncclBroadcast(buf, buf, b->bytes, ncclUint8, 0, b->comms[i], b->streams[i]),
                           "ncclBroadcast", e);
        if (s != DPC_OK)
            dpc_err_prefix(e, "rank %d (cuda:%d): ", i, b->ordinals[i]);
    }
    dpc_err end;
    dpc_status se = DPC_NCCL(&end, ncclGroupEnd());
    if (s == DPC_OK && se != DPC_OK) {
        *e = end;
        s = se;
    }
    return s;
}

/* Waits for every stream, then asks each communicator for an error NCCL
 * met asynchronously (a peer that failed mid-transfer). */
static dpc_status finish(bcast *b, dpc_err *e) {
    for (int i = 0; i < b->n; i++) {
        dpc_status s = DPC_CU(e, cuCtxSetCurrent(b->ctxs[i]));
        if (s == DPC_OK)
            s = DPC_CU(e, cuStreamSynchronize(b->streams[i]));
        ncclResult_t async = ncclSuccess;
        if (s == DPC_OK)
            s = DPC_NCCL(e, ncclCommGetAsyncError(b->comms[i], &async));
        if (s == DPC_OK && async != ncclSuccess) {
            s = dpc_nccl_check(async, "ncclBroadcast", e);
            dpc_err_prefix(e, "(reported by ncclCommGetAsyncError) ");
        }
        if (s != DPC_OK) {
            dpc_err_prefix(e, "cuda:%d: ", b->ordinals[i]);
            return s;
        }
    }
    return DPC_OK;
}

/* Streams, then communicators. After a failure a communicator is aborted:
 * destroying one with unfinished work can block. */
static void release(bcast *b, bool failed) {
    const dpc_cuda_api *cu = dpc_cuda();
    const dpc_nccl_api *nc = dpc_nccl();
    for (int i = 0; i < b->n; i++) {
        if (b->streams[i] && cu->cuCtxSetCurrent(b->ctxs[i]) == CUDA_SUCCESS) {
            if (failed)
                cu->cuStreamSynchronize(b->streams[i]);
            cu->cuStreamDestroy(b->streams[i]);
        }
        if (b->comms[i] && failed)
            nc->ncclCommAbort(b->comms[i]);
        else if (b->comms[i])
            nc->ncclCommDestroy(b->comms[i]);
    }
}

dpc_status dpc_nccl_broadcast(int n, const int *ordinals, const CUcontext *ctxs, const CUdeviceptr *bufs,
                              size_t bytes, dpc_err *e) {
    if (!dpc_nccl() || !dpc_cuda())
        return dpc_errf(e, DPC_EINTERNAL, "a weight broadcast before NCCL and the CUDA driver are loaded");
    if (n < 1 || n > DPC_NCCL_MAX_RANKS)
        return dpc_errf(e, DPC_EINTERNAL, "a broadcast to %d GPUs (at most %d)", n, DPC_NCCL_MAX_RANKS);
    if (bytes == 0)
        return DPC_OK;
    bcast *b = dpc_calloc(1, sizeof *b);
    if (!b)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    *b = (bcast){.n = n, .ordinals = ordinals, .ctxs = ctxs, .bufs = bufs, .bytes = bytes};
    dpc_status s = DPC_NCCL(e, ncclCommInitAll(b->comms, n, ordinals));
    if (s != DPC_OK)
        memset(b->comms, 0, sizeof b->comms); /* nothing was made */
    if (s == DPC_OK)
        s = make_streams(b, e);
    if (s == DPC_OK)
        s = group(b, e);
    if (s == DPC_OK)
        s = finish(b, e);
    release(b, s != DPC_OK);
    free(b);
    return s;
}
