#define _GNU_SOURCE
/* fake_nccl.c - a pretend NCCL over fake_cuda_exec.c's "device" memory
 * (host memory), loaded by dpc through DPC_NCCL_LIBRARY, so that the CUDA
 * backend's weight broadcast runs without GPUs.
 *
 * It is strict where real NCCL would hang or corrupt memory: a broadcast
 * outside ncclGroupStart/End (one host thread drives every GPU, so the
 * other ranks would never arrive), a group in which some rank of a
 * communicator did not post, ranks that disagree on count or root, buffers
 * that are not allocations of the fake driver on the communicator's device
 * (asked through fake_exec_device_of), a stream of another device. Such a
 * call fails with ncclInvalidArgument/ncclInvalidUsage and is counted in
 * bad_calls. At ncclGroupEnd the root's buffer is copied to every other
 * rank's.
 *
 * FAKE_NCCL_FAIL=<function> makes that function fail with
 * ncclUnhandledCudaError (read at every call). Statistics are read by the
 * test through dlsym("fake_nccl_stats"). */
#include <cuda.h>
#include <nccl.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 8

struct fake_nccl_stats {
    long comms_live;  /* communicators not yet destroyed or aborted */
    long inits;       /* ncclCommInitAll calls that made communicators */
    long groups;      /* ncclGroupEnd calls that ran broadcasts */
    long broadcasts;  /* ncclBroadcast calls accepted (one per rank) */
    long aborts;      /* ncclCommAbort calls */
    long bad_calls;   /* calls refused (see above) */
    char last_bad[256];
    /* the last group's broadcast: root's buffer, then every rank's */
    int last_nranks;
    int last_devs[MAX_RANKS];
    uintptr_t last_bufs[MAX_RANKS];
    size_t last_bytes;
};
struct fake_nccl_stats fake_nccl_stats;

typedef struct op {
    int posted;
    const void *send;
    void *recv;
    size_t bytes;
    int root;
} op;

typedef struct clique {
    int n, refs;
    int devs[MAX_RANKS];
    op ops[MAX_RANKS];
} clique;

struct ncclComm {
    unsigned magic;
    int rank;
    clique *c;
};
#define MAGIC 0x6e63636cu

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_depth;                  /* ncclGroupStart nesting */
static clique *g_touched[MAX_RANKS]; /* cliques with posted ops in this group */
static int g_ntouched;

static int (*device_of)(const void *, size_t);
static int (*stream_device)(CUstream);

static int fail(const char *fn) {
    const char *f = getenv("FAKE_NCCL_FAIL");
    return f && strcmp(f, fn) == 0;
}

static ncclResult_t bad(ncclResult_t r, const char *fmt, const char *a, int x, int y) {
    __atomic_fetch_add(&fake_nccl_stats.bad_calls, 1, __ATOMIC_RELAXED);
    snprintf(fake_nccl_stats.last_bad, sizeof fake_nccl_stats.last_bad, fmt, a, x, y);
    return r;
}

/* The fake driver's allocation map, found in the driver dpc loaded. */
static int find_driver(void) {
    if (device_of && stream_device)
        return 1;
    const char *path = getenv("DPC_CUDA_DRIVER");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (!h)
        return 0;
    device_of = (int (*)(const void *, size_t))dlsym(h, "fake_exec_device_of");
    stream_device = (int (*)(CUstream))dlsym(h, "fake_exec_stream_device");
    return device_of && stream_device;
}

ncclResult_t ncclGetVersion(int *version) {
    const char *v = getenv("FAKE_NCCL_VERSION");
    *version = v ? atoi(v) : NCCL_VERSION_CODE;
    return fail("ncclGetVersion") ? ncclUnhandledCudaError : ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (fake NCCL: FAKE_NCCL_FAIL)";
    case ncclInvalidArgument: return "invalid argument (fake NCCL)";
    case ncclInvalidUsage: return "invalid usage (fake NCCL)";
    default: return "fake NCCL error";
    }
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
    if (fail("ncclCommInitAll"))
        return ncclUnhandledCudaError;
    if (!find_driver())
        return bad(ncclSystemError, "%s: DPC_CUDA_DRIVER is not fake_cuda_exec", "ncclCommInitAll", 0, 0);
    if (ndev < 1 || ndev > MAX_RANKS || !devlist)
        return bad(ncclInvalidArgument, "%s: %d devices", "ncclCommInitAll", ndev, 0);
    for (int i = 0; i < ndev; i++)
        for (int j = 0; j < i; j++)
            if (devlist[i] == devlist[j] || devlist[i] < 0)
                return bad(ncclInvalidArgument, "%s: device %d repeated (rank %d)", "ncclCommInitAll", devlist[i], i);
    clique *c = calloc(1, sizeof *c);
    c->n = c->refs = ndev;
    for (int i = 0; i < ndev; i++) {
        c->devs[i] = devlist[i];
        comms[i] = calloc(1, sizeof(struct ncclComm));
        *comms[i] = (struct ncclComm){MAGIC, i, c};
    }
    __atomic_fetch_add(&fake_nccl_stats.comms_live, ndev, __ATOMIC_RELAXED);
    __atomic_fetch_add(&fake_nccl_stats.inits, 1, __ATOMIC_RELAXED);
    return ncclSuccess;
}

static ncclResult_t release(ncclComm_t comm) {
    if (!comm || comm->magic != MAGIC)
        return bad(ncclInvalidArgument, "%s: not a communicator", "ncclCommDestroy", 0, 0);
    clique *c = comm->c;
    comm->magic = 0;
    free(comm);
    if (--c->refs == 0)
        free(c);
    __atomic_fetch_sub(&fake_nccl_stats.comms_live, 1, __ATOMIC_RELAXED);
    return ncclSuccess;
}

/* A failing destroy still frees: a real one may leak, but the test looks
 * for dpc's leaks, not the fake's. */
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    ncclResult_t r = release(comm);
    return fail("ncclCommDestroy") ? ncclUnhandledCudaError : r;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    __atomic_fetch_add(&fake_nccl_stats.aborts, 1, __ATOMIC_RELAXED);
    return release(comm);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async) {
    *async = fail("async") ? ncclRemoteError : ncclSuccess;
    return comm && comm->magic == MAGIC ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclGroupStart(void) {
    if (fail("ncclGroupStart"))
        return ncclUnhandledCudaError;
    pthread_mutex_lock(&g_lock);
    g_depth++;
    pthread_mutex_unlock(&g_lock);
    return ncclSuccess;
}

static ncclResult_t check_broadcast(const void *send, void *recv, size_t bytes, int root, ncclComm_t comm,
                                    cudaStream_t stream) {
    if (!comm || comm->magic != MAGIC)
        return bad(ncclInvalidArgument, "%s: not a communicator", "ncclBroadcast", 0, 0);
    int dev = comm->c->devs[comm->rank];
    if (root < 0 || root >= comm->c->n)
        return bad(ncclInvalidArgument, "%s: root %d of %d ranks", "ncclBroadcast", root, comm->c->n);
    if (g_depth == 0)
        return bad(ncclInvalidUsage, "%s outside a group: rank %d would wait for the others (dev %d)",
                   "ncclBroadcast", comm->rank, dev);
    if (stream_device((CUstream)stream) != dev)
        return bad(ncclInvalidArgument, "%s: the stream is not on device %d (rank %d)", "ncclBroadcast", dev,
                   comm->rank);
    if (device_of(recv, bytes) != dev)
        return bad(ncclInvalidArgument, "%s: recvbuff is no allocation on device %d (rank %d)", "ncclBroadcast", dev,
                   comm->rank);
    if (comm->rank == root && device_of(send, bytes) != dev)
        return bad(ncclInvalidArgument, "%s: sendbuff is no allocation on device %d (rank %d)", "ncclBroadcast", dev,
                   comm->rank);
    if (comm->c->ops[comm->rank].posted)
        return bad(ncclInvalidUsage, "%s: rank %d posted twice in a group (dev %d)", "ncclBroadcast", comm->rank, dev);
    return ncclSuccess;
}

static size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    if (fail("ncclBroadcast"))
        return ncclUnhandledCudaError;
    pthread_mutex_lock(&g_lock);
    size_t bytes = count * type_size(type);
    ncclResult_t r = check_broadcast(send, recv, bytes, root, comm, stream);
    if (r == ncclSuccess) {
        clique *c = comm->c;
        c->ops[comm->rank] = (op){1, send, recv, bytes, root};
        int seen = 0;
        for (int i = 0; i < g_ntouched; i++)
            seen |= g_touched[i] == c;
        if (!seen && g_ntouched < MAX_RANKS)
            g_touched[g_ntouched++] = c;
        fake_nccl_stats.broadcasts++;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* Every rank of c posted the same broadcast: copy the root's buffer. */
static ncclResult_t run_clique(clique *c) {
    const op *rt = &c->ops[c->ops[0].root];
    for (int i = 0; i < c->n; i++)
        if (!c->ops[i].posted || c->ops[i].bytes != rt->bytes || c->ops[i].root != c->ops[0].root)
            return bad(ncclInvalidUsage, "%s: rank %d of %d did not post the same broadcast", "ncclGroupEnd", i,
                       c->n);
    fake_nccl_stats.last_nranks = c->n;
    fake_nccl_stats.last_bytes = rt->bytes;
    for (int i = 0; i < c->n; i++) {
        if (c->ops[i].recv != rt->send)
            memcpy(c->ops[i].recv, rt->send, rt->bytes);
        fake_nccl_stats.last_devs[i] = c->devs[i];
        fake_nccl_stats.last_bufs[i] = (uintptr_t)(i == c->ops[0].root ? rt->send : c->ops[i].recv);
    }
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
    pthread_mutex_lock(&g_lock);
    ncclResult_t r = g_depth > 0 ? ncclSuccess : bad(ncclInvalidUsage, "%s without a start", "ncclGroupEnd", 0, 0);
    if (r == ncclSuccess && --g_depth > 0) {
        pthread_mutex_unlock(&g_lock);
        return ncclSuccess;
    }
    if (fail("ncclGroupEnd"))
        r = ncclUnhandledCudaError;
    for (int i = 0; i < g_ntouched; i++) {
        if (r == ncclSuccess)
            r = run_clique(g_touched[i]);
        memset(g_touched[i]->ops, 0, sizeof g_touched[i]->ops);
    }
    if (r == ncclSuccess && g_ntouched)
        fake_nccl_stats.groups++;
    g_ntouched = 0;
    pthread_mutex_unlock(&g_lock);
    return r;
}
