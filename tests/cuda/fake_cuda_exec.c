#define _GNU_SOURCE
/* fake_cuda_exec.c - a pretend CUDA driver that keeps "device" memory in
 * host memory, so that the CUDA backend's whole host side runs without a
 * GPU: modules (the function names are looked up in the image NVRTC
 * made), allocations (every copy is checked to stay inside one), streams,
 * graph capture and replay (copies and memsets are recorded and replayed;
 * kernels are counted, not run), peer copies.
 *
 * FAKE_EXEC_MODE: "ok" (default); "sticky" (cuStreamSynchronize fails with
 * CUDA_ERROR_ILLEGAL_ADDRESS); "nocapture" (cuStreamBeginCapture is
 * refused); "oom" (allocations over 1 MiB fail). FAKE_EXEC_DEVICES: the
 * number of devices (default 2). FAKE_EXEC_CC: their compute capability
 * as digits ("80" is 8.0; default 90). FAKE_EXEC_IMAGES: a directory that
 * receives every image given to cuModuleLoadDataEx, as module_<n>.bin
 * (n from 0, in load order; the bytes the driver took), so a test can tell
 * a stored CUBIN/PTX from one NVRTC made. Statistics are read by the test through
 * dlsym("fake_exec_stats"). Every allocation remembers the device whose
 * context was current (thread-local, as in the driver) when it was made, and
 * every stream its device: fake_exec_device_of and fake_exec_stream_device
 * tell them to the fake NCCL (fake_nccl.c), which checks its buffers. */
#include <cuda.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fake_exec_stats {
    long launches;        /* kernels run eagerly or replayed */
    long eager_launches;  /* cuLaunchKernel outside a capture */
    long graph_launches;
    long captures;
    long modules;
    long functions;
    long bad_copies;      /* a copy or memset outside every allocation */
    long bad_launches;    /* grid or block out of range, NULL args */
    long live_allocs;     /* device and pinned allocations not yet freed */
    long peer_copies;
    char last_missing[256]; /* the last function name not found */
};
struct fake_exec_stats fake_exec_stats;
#define INC(x) __atomic_fetch_add(&fake_exec_stats.x, 1, __ATOMIC_RELAXED)
#define DEC(x) __atomic_fetch_sub(&fake_exec_stats.x, 1, __ATOMIC_RELAXED)

static const char *mode(void) {
    const char *m = getenv("FAKE_EXEC_MODE");
    return m ? m : "ok";
}
static int fake_cc(void) {
    const char *c = getenv("FAKE_EXEC_CC");
    return c && atoi(c) >= 10 ? atoi(c) : 90;
}
static int ndev(void) {
    const char *n = getenv("FAKE_EXEC_DEVICES");
    return n && atoi(n) > 0 ? atoi(n) : 2;
}

/* ---- allocations ---- */

typedef struct alloc {
    char *p;
    size_t n;
    int dev; /* HOST_MEM for pinned host memory */
    struct alloc *next;
} alloc;
static alloc *g_allocs;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* replicas call from several threads */
#define HOST_MEM (-2)
static __thread int g_cur_dev; /* the device of the current context */

static void *track(size_t n, int dev) {
    pthread_mutex_lock(&g_lock);
    alloc *a = calloc(1, sizeof *a);
    if (a)
        a->p = calloc(1, n ? n : 1);
    if (!a || !a->p) {
        free(a);
        pthread_mutex_unlock(&g_lock);
        return NULL;
    }
    a->n = n;
    a->dev = dev;
    a->next = g_allocs;
    g_allocs = a;
    INC(live_allocs);
    pthread_mutex_unlock(&g_lock);
    return a->p;
}

static int untrack(void *p) {
    pthread_mutex_lock(&g_lock);
    for (alloc **a = &g_allocs; *a; a = &(*a)->next)
        if ((*a)->p == p) {
            alloc *x = *a;
            *a = x->next;
            free(x->p);
            free(x);
            DEC(live_allocs);
            pthread_mutex_unlock(&g_lock);
            return 1;
        }
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* True if [p, p+n) lies in one tracked allocation. */
static int inside(const void *p, size_t n) {
    const char *c = p;
    int in = 0;
    pthread_mutex_lock(&g_lock);
    for (alloc *a = g_allocs; a && !in; a = a->next)
        in = c >= a->p && c + n <= a->p + a->n;
    pthread_mutex_unlock(&g_lock);
    return in;
}

/* The device of the allocation holding [p, p+n): -1 if none does. */
int fake_exec_device_of(const void *p, size_t n) {
    const char *c = p;
    int dev = -1;
    pthread_mutex_lock(&g_lock);
    for (alloc *a = g_allocs; a; a = a->next)
        if (c >= a->p && c + n <= a->p + a->n) {
            dev = a->dev;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    return dev;
}

/* ---- recorded operations (graphs) ---- */

enum { OP_COPY, OP_SET, OP_KERNEL };
typedef struct op {
    int kind;
    void *dst;
    const void *src;
    size_t n;
    unsigned char v;
} op;
typedef struct graph {
    op *ops;
    int n, cap;
} graph;

typedef struct stream {
    int capturing;
    graph *g;
    int dev;
} stream;

static stream g_default;

static stream *S(CUstream s) { return s ? (stream *)s : &g_default; }

static void record(stream *s, op o) {
    graph *g = s->g;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->ops = realloc(g->ops, sizeof(op) * (size_t)g->cap);
    }
    g->ops[g->n++] = o;
}

static CUresult do_op(const op *o) {
    switch (o->kind) {
    case OP_COPY:
        if (!inside(o->dst, o->n) || !inside(o->src, o->n)) {
            INC(bad_copies);
            return CUDA_ERROR_INVALID_VALUE;
        }
        memmove(o->dst, o->src, o->n);
        break;
    case OP_SET:
        if (!inside(o->dst, o->n)) {
            INC(bad_copies);
            return CUDA_ERROR_INVALID_VALUE;
        }
        memset(o->dst, o->v, o->n);
        break;
    default: INC(launches); break;
    }
    return CUDA_SUCCESS;
}

static CUresult run_or_record(CUstream s, op o) {
    stream *st = S(s);
    if (st->capturing) {
        /* checked when recorded too, as the driver does */
        if (o.kind == OP_COPY && (!inside(o.dst, o.n) || !inside(o.src, o.n))) {
            INC(bad_copies);
            return CUDA_ERROR_INVALID_VALUE;
        }
        record(st, o);
        return CUDA_SUCCESS;
    }
    return do_op(&o);
}

/* ---- the entry points ---- */

#define NDEV_MAX 8
static int g_ctx_storage[NDEV_MAX];

static CUresult f_cuInit(unsigned int flags) { return CUDA_SUCCESS; }
static CUresult f_cuGetErrorName(CUresult r, const char **s) {
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE; /* dpc's own table names them */
}
static CUresult f_cuGetErrorString(CUresult r, const char **s) {
    switch ((int)r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "an illegal memory access was encountered"; return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; return CUDA_SUCCESS;
    default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
}
static CUresult f_cuDeviceGetCount(int *n) {
    *n = ndev() < NDEV_MAX ? ndev() : NDEV_MAX;
    return CUDA_SUCCESS;
}
static CUresult f_cuDeviceGet(CUdevice *d, int ordinal) {
    int n;
    f_cuDeviceGetCount(&n);
    if (ordinal < 0 || ordinal >= n)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}
static CUresult f_cuDeviceGetName(char *name, int len, CUdevice d) {
    snprintf(name, (size_t)len, "Fake H200 (host memory)");
    return CUDA_SUCCESS;
}
static CUresult f_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = fake_cc() / 10; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = fake_cc() % 10; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; return CUDA_SUCCESS;
    default: *v = 0; return CUDA_SUCCESS;
    }
}
static CUresult f_cuDeviceTotalMem(size_t *bytes, CUdevice d) {
    *bytes = (size_t)141 << 30;
    return CUDA_SUCCESS;
}
static CUresult f_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    *c = (CUcontext)&g_ctx_storage[d];
    return CUDA_SUCCESS;
}
static CUresult f_cuDevicePrimaryCtxRelease(CUdevice d) { return CUDA_SUCCESS; }
static CUresult f_cuCtxSetCurrent(CUcontext c) {
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    g_cur_dev = (int)((int *)c - g_ctx_storage);
    return CUDA_SUCCESS;
}
static CUresult f_cuCtxGetCurrent(CUcontext *c) {
    *c = (CUcontext)&g_ctx_storage[g_cur_dev];
    return CUDA_SUCCESS;
}
static CUresult f_cuCtxSynchronize(void) { return CUDA_SUCCESS; }
static CUresult f_cuMemGetInfo(size_t *f, size_t *t) {
    *f = *t = (size_t)141 << 30;
    return CUDA_SUCCESS;
}

typedef struct module {
    char *image;
    size_t len;
    char **fns; /* function handles: their names, freed with the module */
    int nfns;
} module;

static CUfunction new_function(module *mod, const char *name) {
    char **f = realloc(mod->fns, sizeof(char *) * (size_t)(mod->nfns + 1));
    if (!f)
        return NULL;
    mod->fns = f;
    mod->fns[mod->nfns] = strdup(name);
    INC(functions);
    return (CUfunction)mod->fns[mod->nfns++];
}

/* FAKE_EXEC_IMAGES: keeps a copy of each image loaded. */
static void dump_image(const void *image, size_t len) {
    static int n;
    const char *dir = getenv("FAKE_EXEC_IMAGES");
    if (!dir)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/module_%d.bin", dir, __atomic_fetch_add(&n, 1, __ATOMIC_RELAXED));
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(image, 1, len, f);
        fclose(f);
    }
}

static CUresult f_cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, CUjit_option *o, void **v) {
    const unsigned char *p = image;
    size_t len;
    if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') {
        /* a CUBIN: its size from the ELF header's section and program
         * header tables, whichever ends last (NVRTC puts the program
         * headers after the section headers) */
        const uint64_t phoff = *(const uint64_t *)(p + 0x20), shoff = *(const uint64_t *)(p + 0x28);
        const uint16_t phentsize = *(const uint16_t *)(p + 0x36), phnum = *(const uint16_t *)(p + 0x38);
        const uint16_t shentsize = *(const uint16_t *)(p + 0x3a), shnum = *(const uint16_t *)(p + 0x3c);
        size_t sh_end = shoff + (size_t)shentsize * shnum, ph_end = phoff + (size_t)phentsize * phnum;
        len = sh_end > ph_end ? sh_end : ph_end;
    } else if (strstr(image, ".version") && strstr(image, ".target")) {
        len = strlen(image);
    } else {
        return CUDA_ERROR_INVALID_IMAGE;
    }
    module *mod = calloc(1, sizeof *mod);
    mod->image = malloc(len + 1);
    memcpy(mod->image, image, len);
    mod->image[len] = 0;
    mod->len = len;
    dump_image(image, len);
    INC(modules);
    *m = (CUmodule)mod;
    return CUDA_SUCCESS;
}
static CUresult f_cuModuleUnload(CUmodule m) {
    module *mod = (module *)m;
    for (int i = 0; i < mod->nfns; i++)
        free(mod->fns[i]);
    free(mod->fns);
    free(mod->image);
    free(mod);
    DEC(modules);
    return CUDA_SUCCESS;
}
/* The name must appear NUL-terminated in the image (CUBIN string table)
 * or as ".entry name(" (PTX). */
static CUresult f_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    module *mod = (module *)m;
    size_t n = strlen(name);
    for (size_t i = 1; i + n < mod->len; i++)
        if (mod->image[i - 1] == 0 && memcmp(mod->image + i, name, n + 1) == 0) {
            *f = new_function(mod, name);
            return *f ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        }
    char entry[600];
    snprintf(entry, sizeof entry, ".entry %s(", name);
    if (strstr(mod->image, entry)) {
        *f = new_function(mod, name);
        return *f ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    snprintf(fake_exec_stats.last_missing, sizeof fake_exec_stats.last_missing, "%s", name);
    return CUDA_ERROR_NOT_FOUND;
}
static CUresult f_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shmem, CUstream s, void **params, void **extra) {
    if (!f || gx == 0 || gy != 1 || gz != 1 || bx == 0 || bx > 1024 || by != 1 || bz != 1 || !params) {
        INC(bad_launches);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!S(s)->capturing)
        INC(eager_launches);
    return run_or_record(s, (op){.kind = OP_KERNEL});
}
static CUresult f_cuMemAlloc(CUdeviceptr *p, size_t n) {
    if (strcmp(mode(), "oom") == 0 && n > ((size_t)1 << 20))
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *q = track(n, g_cur_dev);
    if (!q)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)q;
    return CUDA_SUCCESS;
}
static CUresult f_cuMemFree(CUdeviceptr p) { return untrack((void *)(uintptr_t)p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
static CUresult f_cuMemAllocHost(void **p, size_t n) {
    *p = track(n, HOST_MEM);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult f_cuMemFreeHost(void *p) { return untrack(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

/* Synchronous copies may come from the caller's own (untracked) memory. */
static CUresult f_cuMemcpyHtoD(CUdeviceptr d, const void *h, size_t n) {
    if (!inside((void *)(uintptr_t)d, n)) {
        INC(bad_copies);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy((void *)(uintptr_t)d, h, n);
    return CUDA_SUCCESS;
}
static CUresult f_cuMemcpyDtoH(void *h, CUdeviceptr d, size_t n) {
    if (!inside((void *)(uintptr_t)d, n)) {
        INC(bad_copies);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(h, (void *)(uintptr_t)d, n);
    return CUDA_SUCCESS;
}
static CUresult f_cuMemcpyDtoD(CUdeviceptr d, CUdeviceptr s, size_t n) {
    return do_op(&(op){.kind = OP_COPY, .dst = (void *)(uintptr_t)d, .src = (void *)(uintptr_t)s, .n = n});
}
static CUresult f_cuMemcpyHtoDAsync(CUdeviceptr d, const void *h, size_t n, CUstream s) {
    return run_or_record(s, (op){.kind = OP_COPY, .dst = (void *)(uintptr_t)d, .src = h, .n = n});
}
static CUresult f_cuMemcpyDtoHAsync(void *h, CUdeviceptr d, size_t n, CUstream s) {
    return run_or_record(s, (op){.kind = OP_COPY, .dst = h, .src = (void *)(uintptr_t)d, .n = n});
}
static CUresult f_cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s) {
    return run_or_record(s, (op){.kind = OP_COPY, .dst = (void *)(uintptr_t)d, .src = (void *)(uintptr_t)src, .n = n});
}
static CUresult f_cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s) {
    INC(peer_copies);
    return run_or_record(s, (op){.kind = OP_COPY, .dst = (void *)(uintptr_t)d, .src = (void *)(uintptr_t)src, .n = n});
}
static CUresult f_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
    return run_or_record(s, (op){.kind = OP_SET, .dst = (void *)(uintptr_t)d, .v = v, .n = n});
}
static CUresult f_cuStreamCreate(CUstream *s, unsigned flags) {
    stream *st = calloc(1, sizeof *st);
    st->g = calloc(1, sizeof(graph));
    st->dev = g_cur_dev;
    *s = (CUstream)st;
    return CUDA_SUCCESS;
}

/* The device of a stream made by cuStreamCreate; -1 for the NULL stream. */
int fake_exec_stream_device(CUstream s) { return s ? ((stream *)s)->dev : -1; }
static CUresult f_cuStreamDestroy(CUstream s) {
    stream *st = (stream *)s;
    free(st->g->ops);
    free(st->g);
    free(st);
    return CUDA_SUCCESS;
}
static CUresult f_cuStreamSynchronize(CUstream s) {
    if (strcmp(mode(), "sticky") == 0)
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return S(s)->capturing ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
static CUresult f_ok(void) { return CUDA_SUCCESS; }
static CUresult f_cuStreamBeginCapture(CUstream s, CUstreamCaptureMode m) {
    if (strcmp(mode(), "nocapture") == 0)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    stream *st = S(s);
    if (st->capturing)
        return CUDA_ERROR_ILLEGAL_STATE;
    st->capturing = 1;
    st->g->n = 0;
    return CUDA_SUCCESS;
}
static CUresult f_cuStreamEndCapture(CUstream s, CUgraph *g) {
    stream *st = S(s);
    if (!st->capturing)
        return CUDA_ERROR_ILLEGAL_STATE;
    st->capturing = 0;
    graph *c = calloc(1, sizeof *c);
    c->n = c->cap = st->g->n;
    c->ops = malloc(sizeof(op) * (size_t)(c->n ? c->n : 1));
    memcpy(c->ops, st->g->ops, sizeof(op) * (size_t)c->n);
    *g = (CUgraph)c;
    INC(captures);
    return CUDA_SUCCESS;
}
static CUresult f_cuGraphInstantiate(CUgraphExec *x, CUgraph g, unsigned long long flags) {
    graph *src = (graph *)g, *c = calloc(1, sizeof *c);
    c->n = c->cap = src->n;
    c->ops = malloc(sizeof(op) * (size_t)(c->n ? c->n : 1));
    memcpy(c->ops, src->ops, sizeof(op) * (size_t)c->n);
    *x = (CUgraphExec)c;
    return CUDA_SUCCESS;
}
static CUresult f_cuGraphLaunch(CUgraphExec x, CUstream s) {
    graph *g = (graph *)x;
    if (S(s)->capturing)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    INC(graph_launches);
    for (int i = 0; i < g->n; i++) {
        CUresult r = do_op(&g->ops[i]);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}
static CUresult f_cuGraphDestroy(CUgraph g) {
    graph *c = (graph *)g;
    free(c->ops);
    free(c);
    return CUDA_SUCCESS;
}
static CUresult f_unsupported(void) { return CUDA_ERROR_NOT_SUPPORTED; }
/* Events: every interval is one millisecond. */
static CUresult f_cuEventCreate(CUevent *ev, unsigned flags) {
    *ev = (CUevent)malloc(8);
    return *ev ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult f_cuEventDestroy(CUevent ev) {
    free(ev);
    return CUDA_SUCCESS;
}
static CUresult f_cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
    *ms = 1.0f;
    return a && b ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuDriverGetVersion(int *v) {
    *v = 13000;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status) {
    static const struct {
        const char *name;
        void *fn;
    } table[] = {
#define F(n) {#n, (void *)f_##n}
        F(cuInit), F(cuGetErrorName), F(cuGetErrorString), F(cuDeviceGetCount), F(cuDeviceGet),
        F(cuDeviceGetName), F(cuDeviceGetAttribute), F(cuDeviceTotalMem), F(cuDevicePrimaryCtxRetain),
        F(cuDevicePrimaryCtxRelease), F(cuCtxSetCurrent), F(cuCtxGetCurrent), F(cuCtxSynchronize),
        F(cuMemGetInfo), F(cuModuleLoadDataEx), F(cuModuleUnload), F(cuModuleGetFunction), F(cuLaunchKernel),
        F(cuMemAlloc), F(cuMemFree), F(cuMemAllocHost), F(cuMemFreeHost), F(cuMemcpyHtoD), F(cuMemcpyDtoH),
        F(cuMemcpyDtoD), F(cuMemcpyHtoDAsync), F(cuMemcpyDtoHAsync), F(cuMemcpyDtoDAsync), F(cuMemcpyPeerAsync),
        F(cuMemsetD8Async), F(cuStreamCreate), F(cuStreamDestroy), F(cuStreamSynchronize),
        F(cuStreamBeginCapture), F(cuStreamEndCapture), F(cuGraphInstantiate), F(cuGraphLaunch),
        F(cuGraphDestroy),
#undef F
        {"cuDriverGetVersion", (void *)cuDriverGetVersion},
        {"cuGraphExecDestroy", (void *)f_cuGraphDestroy},
        {"cuCtxEnablePeerAccess", (void *)f_ok},
        {"cuDeviceCanAccessPeer", (void *)f_unsupported},
        {"cuStreamWaitEvent", (void *)f_ok},
        {"cuEventCreate", (void *)f_cuEventCreate},
        {"cuEventRecord", (void *)f_ok},
        {"cuEventSynchronize", (void *)f_ok},
        {"cuEventElapsedTime", (void *)f_cuEventElapsedTime},
        {"cuEventDestroy", (void *)f_cuEventDestroy},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(symbol, table[i].name) == 0) {
            *pfn = table[i].fn;
            if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *pfn = (void *)f_unsupported;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}
