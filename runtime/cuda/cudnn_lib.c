/* cudnn_lib.c - dlopen cuDNN, and one convolution with its descriptors and
 * algorithm cached per shape (see cudnn_lib.h). */
#include "cudnn_lib.h"

#include "cuda_driver.h" /* dpc_dlopen_env */
#include "faults.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cuDNN's ABI, the parts used (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h
 * of cuDNN 8 and 9; the values are fixed by NVIDIA's legacy API) ---- */

typedef struct dnn_handle_ *dnn_handle;
typedef struct dnn_tensor_ *dnn_tensor;
typedef struct dnn_filter_ *dnn_filter;
typedef struct dnn_convd_ *dnn_convd;
typedef struct dnn_actd_ *dnn_actd;
typedef int dnn_status; /* cudnnStatus_t */

enum {
    DNN_SUCCESS = 0,
    DNN_DATA_FLOAT = 0,
    DNN_DATA_HALF = 2,
    DNN_DATA_BFLOAT16 = 9,
    DNN_TENSOR_NCHW = 0,
    DNN_CROSS_CORRELATION = 1,
    DNN_DEFAULT_MATH = 0,
    DNN_TENSOR_OP_MATH = 1,
    DNN_FMA_MATH = 3,
    DNN_ACTIVATION_RELU = 1,
    DNN_ACTIVATION_IDENTITY = 5,
    DNN_PROPAGATE_NAN = 1,
    DNN_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
    DNN_ALGO_COUNT = 8,
};

typedef struct dnn_perf { /* cudnnConvolutionFwdAlgoPerf_t */
    int algo;
    dnn_status status;
    float time;
    size_t memory;
    int determinism;
    int mathType;
    int reserved[3];
} dnn_perf;

#define DNN_FUNCS(X)                                                                               \
    X(size_t, cudnnGetVersion, (void))                                                             \
    X(const char *, cudnnGetErrorString, (dnn_status))                                             \
    X(dnn_status, cudnnCreate, (dnn_handle *))                                                     \
    X(dnn_status, cudnnDestroy, (dnn_handle))                                                      \
    X(dnn_status, cudnnSetStream, (dnn_handle, void *))                                            \
    X(dnn_status, cudnnCreateTensorDescriptor, (dnn_tensor *))                                     \
    X(dnn_status, cudnnSetTensor4dDescriptorEx, (dnn_tensor, int, int, int, int, int, int, int, int, int)) \
    X(dnn_status, cudnnDestroyTensorDescriptor, (dnn_tensor))                                      \
    X(dnn_status, cudnnCreateFilterDescriptor, (dnn_filter *))                                     \
    X(dnn_status, cudnnSetFilter4dDescriptor, (dnn_filter, int, int, int, int, int, int))          \
    X(dnn_status, cudnnDestroyFilterDescriptor, (dnn_filter))                                      \
    X(dnn_status, cudnnCreateConvolutionDescriptor, (dnn_convd *))                                 \
    X(dnn_status, cudnnSetConvolution2dDescriptor, (dnn_convd, int, int, int, int, int, int, int, int)) \
    X(dnn_status, cudnnSetConvolutionGroupCount, (dnn_convd, int))                                 \
    X(dnn_status, cudnnSetConvolutionMathType, (dnn_convd, int))                                   \
    X(dnn_status, cudnnDestroyConvolutionDescriptor, (dnn_convd))                                  \
    X(dnn_status, cudnnGetConvolution2dForwardOutputDim,                                           \
      (const dnn_convd, const dnn_tensor, const dnn_filter, int *, int *, int *, int *))           \
    X(dnn_status, cudnnGetConvolutionForwardAlgorithm_v7,                                          \
      (dnn_handle, const dnn_tensor, const dnn_filter, const dnn_convd, const dnn_tensor, const int, int *, dnn_perf *)) \
    X(dnn_status, cudnnGetConvolutionForwardWorkspaceSize,                                         \
      (dnn_handle, const dnn_tensor, const dnn_filter, const dnn_convd, const dnn_tensor, int, size_t *)) \
    X(dnn_status, cudnnConvolutionForward,                                                         \
      (dnn_handle, const void *, const dnn_tensor, const void *, const dnn_filter, const void *, const dnn_convd, \
       int, void *, size_t, const void *, const dnn_tensor, void *))                               \
    X(dnn_status, cudnnConvolutionBiasActivationForward,                                           \
      (dnn_handle, const void *, const dnn_tensor, const void *, const dnn_filter, const void *, const dnn_convd, \
       int, void *, size_t, const void *, const dnn_tensor, const void *, const dnn_tensor, const void *, \
       const dnn_actd, const dnn_tensor, void *))                                                  \
    X(dnn_status, cudnnCreateActivationDescriptor, (dnn_actd *))                                   \
    X(dnn_status, cudnnSetActivationDescriptor, (dnn_actd, int, int, double))                      \
    X(dnn_status, cudnnDestroyActivationDescriptor, (dnn_actd))

typedef struct dnn_api {
#define DNN_FIELD_(ret, name, args) ret(*name) args;
    DNN_FUNCS(DNN_FIELD_)
#undef DNN_FIELD_
} dnn_api;

/* cudnnGetConvolutionForwardAlgorithm_v7 and the fused forward exist from
 * cuDNN 7; the library is asked for 8.0 or newer (the oldest with
 * cudnnSetConvolutionMathType's CUDNN_FMA_MATH). */
#define DNN_MIN_VERSION 8000

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dnn_api g_api;
static _Atomic(const dnn_api *) g_ready;
static char g_msg[DPC_ERR_MSG], g_path[512];
static size_t g_version;

static void load_once(void) {
    const char *path, *why;
    void *lib = dpc_dlopen_env("DPC_CUDNN_LIBRARY", "libcudnn.so.9", &path, &why);
    const char *env = getenv("DPC_CUDNN_LIBRARY");
    if (!lib && !(env && *env)) { /* cuDNN 8 has the same legacy API */
        void *l8 = dlopen("libcudnn.so.8", RTLD_NOW | RTLD_LOCAL);
        if (l8) {
            lib = l8;
            path = "libcudnn.so.8";
        }
    }
#ifdef DPC_CUDA_BIN
    /* the toolkit dpc was built with, when its lib64 is not on the loader's path */
    static char tk[600];
    if (!lib && !(env && *env)) {
        snprintf(tk, sizeof tk, "%s/../lib64/libcudnn.so.9", DPC_CUDA_BIN);
        void *lt = dlopen(tk, RTLD_NOW | RTLD_LOCAL);
        if (lt) {
            lib = lt;
            path = tk;
        }
    }
#endif
    if (!lib) {
        snprintf(g_msg, sizeof g_msg, "cuDNN not found (%s): %s", path, why);
        return;
    }
    /* Never dlclose'd: cuDNN loads its sub-libraries and keeps them. */
#define DNN_RESOLVE_(ret, name, args)                                                              \
    {                                                                                              \
        void *p_ = dlsym(lib, #name);                                                              \
        if (!p_) {                                                                                 \
            snprintf(g_msg, sizeof g_msg, "%s is not a usable cuDNN: it lacks %s", path, #name);   \
            return;                                                                                \
        }                                                                                          \
        memcpy(&g_api.name, &p_, sizeof p_);                                                       \
    }
    DNN_FUNCS(DNN_RESOLVE_)
#undef DNN_RESOLVE_
    size_t v = g_api.cudnnGetVersion();
    if (v < DNN_MIN_VERSION) {
        snprintf(g_msg, sizeof g_msg, "cuDNN %s is too old: version %zu, dpc needs 8.0 or newer", path, v);
        return;
    }
    g_version = v;
    snprintf(g_path, sizeof g_path, "%s", path);
    atomic_store_explicit(&g_ready, &g_api, memory_order_release);
}

dpc_status dpc_dnn_load(dpc_err *e) {
    pthread_once(&g_once, load_once);
    if (!atomic_load_explicit(&g_ready, memory_order_acquire))
        return dpc_errf(e, DPC_EDEVICE, "%s", g_msg);
    return DPC_OK;
}

size_t dpc_dnn_version(void) {
    pthread_once(&g_once, load_once);
    return atomic_load_explicit(&g_ready, memory_order_acquire) ? g_version : 0;
}

const char *dpc_dnn_path(void) {
    pthread_once(&g_once, load_once);
    return atomic_load_explicit(&g_ready, memory_order_acquire) ? g_path : "";
}

const char *dpc_dnn_status_name(int status) {
    switch (status) {
    case 0: return "CUDNN_STATUS_SUCCESS";
    case 1: case 1001: return "CUDNN_STATUS_NOT_INITIALIZED";
    case 2: return "CUDNN_STATUS_ALLOC_FAILED";
    case 3: case 2000: return "CUDNN_STATUS_BAD_PARAM";
    case 4: case 4000: return "CUDNN_STATUS_INTERNAL_ERROR";
    case 5: return "CUDNN_STATUS_INVALID_VALUE";
    case 6: case 3007: return "CUDNN_STATUS_ARCH_MISMATCH";
    case 7: return "CUDNN_STATUS_MAPPING_ERROR";
    case 8: case 5000: return "CUDNN_STATUS_EXECUTION_FAILED";
    case 9: case 3000: return "CUDNN_STATUS_NOT_SUPPORTED";
    case 3002: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case 3003: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case 3004: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case 3011: return "CUDNN_STATUS_NOT_SUPPORTED_PADDING";
    }
    if (status > 2000 && status < 3000)
        return "CUDNN_STATUS_BAD_PARAM";
    if (status > 3000 && status < 4000)
        return "CUDNN_STATUS_NOT_SUPPORTED";
    if (status > 4000 && status < 5000)
        return "CUDNN_STATUS_INTERNAL_ERROR";
    if (status >= 5000 && status < 6000)
        return "CUDNN_STATUS_EXECUTION_FAILED";
    return "CUDNN_STATUS_UNKNOWN";
}

static const char *dtype_name(int t) { return t == 1 ? "bf16" : t == 2 ? "f16" : "f32"; }

void dpc_dnn_conv_describe(const dpc_dnn_conv *c, char *out, size_t n) {
    snprintf(out, n, "conv %lldx%lld s%lld,%lld p%lld,%lld d%lld,%lld g%lld %lld->%lld at %lldx%lld, batch %lld, %s%s",
             (long long)c->kh, (long long)c->kw, (long long)c->sh, (long long)c->sw, (long long)c->ph,
             (long long)c->pw, (long long)c->dh, (long long)c->dw, (long long)c->G, (long long)c->C,
             (long long)c->Co, (long long)c->H, (long long)c->W, (long long)c->N, dtype_name(c->dtype),
             c->bias ? (c->act == DPC_CU_ACT_RELU ? (c->z ? ", + bias + z, relu" : ", + bias, relu")
                                                  : (c->z ? ", + bias + z" : ", + bias"))
                     : "");
}

void dpc_dnn_conv_of(const dpc_cu_conv *cv, int64_t N, kprec prec, bool tf32, bool fused, dpc_dnn_conv *out) {
    memset(out, 0, sizeof *out);
    out->N = N;
    out->C = cv->C, out->H = cv->H, out->W = cv->W, out->Co = cv->Co, out->Ho = cv->Ho, out->Wo = cv->Wo;
    out->kh = cv->kh, out->kw = cv->kw, out->sh = cv->sh, out->sw = cv->sw, out->ph = cv->ph, out->pw = cv->pw;
    out->dh = cv->dh, out->dw = cv->dw, out->G = cv->G;
    out->dtype = prec == KP_BF16 ? 1 : prec == KP_F16 ? 2 : 0;
    out->tf32 = prec == KP_F32 && tf32;
    if (fused && cv->fused) {
        out->bias = cv->bias >= 0;
        out->z = cv->z >= 0;
        out->act = cv->act;
    } else
        out->cmajor = 1;
}

/* ---- the handle and its cache ---- */

#define CACHE 256

typedef struct entry {
    bool used;
    dpc_dnn_conv key;
    dnn_tensor x, y, b;
    dnn_filter w;
    dnn_convd conv;
    dnn_actd act;
    int algo;
    size_t workspace;
} entry;

struct dpc_dnn {
    dnn_handle h;
    void *stream;
    entry cache[CACHE];
    int next_evict;
};

static dpc_status dnn_fail(dnn_status st, const char *call, const dpc_dnn_conv *c, dpc_err *e) {
    char what[256] = "";
    if (c)
        dpc_dnn_conv_describe(c, what, sizeof what);
    return dpc_errf(e, st == 2 ? DPC_ENOMEM : DPC_EDEVICE, "%s failed: %s (%d)%s%s", call, dpc_dnn_status_name(st),
                    (int)st, c ? " for " : "", what);
}

#define DNN(call, name)                                                                            \
    do {                                                                                           \
        dnn_status st_ = (call);                                                                   \
        if (st_ != DNN_SUCCESS) {                                                                  \
            s = dnn_fail(st_, name, c, e);                                                         \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

dpc_status dpc_dnn_create(dpc_dnn **out, void *stream, dpc_err *e) {
    *out = NULL;
    dpc_status s = dpc_dnn_load(e);
    if (s != DPC_OK)
        return s;
    dpc_dnn *d = dpc_calloc(1, sizeof *d);
    if (!d)
        return dpc_errf(e, DPC_ENOMEM, "out of memory creating a cuDNN handle");
    const dpc_dnn_conv *c = NULL; /* for DNN() */
    DNN(g_api.cudnnCreate(&d->h), "cudnnCreate");
    d->stream = stream;
    DNN(g_api.cudnnSetStream(d->h, stream), "cudnnSetStream");
    *out = d;
    return DPC_OK;
fail:
    dpc_dnn_destroy(d);
    return s;
}

static void entry_free(entry *x) {
    if (x->x)
        g_api.cudnnDestroyTensorDescriptor(x->x);
    if (x->y)
        g_api.cudnnDestroyTensorDescriptor(x->y);
    if (x->b)
        g_api.cudnnDestroyTensorDescriptor(x->b);
    if (x->w)
        g_api.cudnnDestroyFilterDescriptor(x->w);
    if (x->conv)
        g_api.cudnnDestroyConvolutionDescriptor(x->conv);
    if (x->act)
        g_api.cudnnDestroyActivationDescriptor(x->act);
    memset(x, 0, sizeof *x);
}

void dpc_dnn_destroy(dpc_dnn *d) {
    if (!d)
        return;
    for (int i = 0; i < CACHE; i++)
        entry_free(&d->cache[i]);
    if (d->h)
        g_api.cudnnDestroy(d->h);
    dpc_free(d);
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

static int dnn_type(int t) { return t == 1 ? DNN_DATA_BFLOAT16 : t == 2 ? DNN_DATA_HALF : DNN_DATA_FLOAT; }

/* The math type: FMA for f32 (no TF32, as PyTorch's CPU numerics), tensor
 * cores for 16-bit storage (f32 accumulation), cuDNN's default with tf32. */
static int math_type(const dpc_dnn_conv *c) {
    if (c->dtype != 0)
        return DNN_TENSOR_OP_MATH;
    return c->tf32 ? DNN_DEFAULT_MATH : DNN_FMA_MATH;
}

static dpc_status make_entry(dpc_dnn *d, const dpc_dnn_conv *c, size_t max_ws, entry *x, dpc_err *e) {
    dpc_status s = DPC_OK;
    memset(x, 0, sizeof *x);
    int64_t HWo = c->Ho * c->Wo, yc = c->cmajor ? c->N * HWo : HWo, yn = c->cmajor ? HWo : c->Co * HWo;
    if (c->G < 1 || c->C % c->G || c->Co % c->G || !fits_int(c->N) || !fits_int(c->C * c->H * c->W) ||
        !fits_int(c->N * c->C * c->H * c->W) || !fits_int(c->N * c->Co * HWo) || !fits_int(yc) || !fits_int(yn) ||
        !fits_int(c->kh) || !fits_int(c->kw) || !fits_int(c->ph) || !fits_int(c->pw) || c->N < 1)
        return dpc_errf(e, DPC_EUSAGE, "cuDNN: sizes out of range for its int descriptors");
    int t = dnn_type(c->dtype);
    DNN(g_api.cudnnCreateTensorDescriptor(&x->x), "cudnnCreateTensorDescriptor");
    DNN(g_api.cudnnSetTensor4dDescriptorEx(x->x, t, (int)c->N, (int)c->C, (int)c->H, (int)c->W,
                                          (int)(c->C * c->H * c->W), (int)(c->H * c->W), (int)c->W, 1),
        "cudnnSetTensor4dDescriptorEx");
    DNN(g_api.cudnnCreateFilterDescriptor(&x->w), "cudnnCreateFilterDescriptor");
    DNN(g_api.cudnnSetFilter4dDescriptor(x->w, t, DNN_TENSOR_NCHW, (int)c->Co, (int)(c->C / c->G), (int)c->kh,
                                        (int)c->kw),
        "cudnnSetFilter4dDescriptor");
    DNN(g_api.cudnnCreateConvolutionDescriptor(&x->conv), "cudnnCreateConvolutionDescriptor");
    DNN(g_api.cudnnSetConvolution2dDescriptor(x->conv, (int)c->ph, (int)c->pw, (int)c->sh, (int)c->sw, (int)c->dh,
                                             (int)c->dw, DNN_CROSS_CORRELATION, DNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
    DNN(g_api.cudnnSetConvolutionGroupCount(x->conv, (int)c->G), "cudnnSetConvolutionGroupCount");
    DNN(g_api.cudnnSetConvolutionMathType(x->conv, math_type(c)), "cudnnSetConvolutionMathType");
    int on, oc, oh, ow;
    DNN(g_api.cudnnGetConvolution2dForwardOutputDim(x->conv, x->x, x->w, &on, &oc, &oh, &ow),
        "cudnnGetConvolution2dForwardOutputDim");
    if (on != c->N || oc != c->Co || oh != c->Ho || ow != c->Wo) {
        /* e.g. padding="same" with an even kernel: more padding after than before */
        s = dpc_errf(e, DPC_EUSAGE, "cuDNN's output would be [%d, %d, %d, %d], not [%lld, %lld, %lld, %lld]", on, oc,
                     oh, ow, (long long)c->N, (long long)c->Co, (long long)c->Ho, (long long)c->Wo);
        goto fail;
    }
    DNN(g_api.cudnnCreateTensorDescriptor(&x->y), "cudnnCreateTensorDescriptor");
    DNN(g_api.cudnnSetTensor4dDescriptorEx(x->y, t, (int)c->N, (int)c->Co, (int)c->Ho, (int)c->Wo, (int)yn, (int)yc,
                                          (int)c->Wo, 1),
        "cudnnSetTensor4dDescriptorEx");
    bool identity = c->act != DPC_CU_ACT_RELU;
    if (c->bias) {
        DNN(g_api.cudnnCreateTensorDescriptor(&x->b), "cudnnCreateTensorDescriptor");
        DNN(g_api.cudnnSetTensor4dDescriptorEx(x->b, t, 1, (int)c->Co, 1, 1, (int)c->Co, 1, 1, 1),
            "cudnnSetTensor4dDescriptorEx");
        DNN(g_api.cudnnCreateActivationDescriptor(&x->act), "cudnnCreateActivationDescriptor");
        DNN(g_api.cudnnSetActivationDescriptor(x->act, identity ? DNN_ACTIVATION_IDENTITY : DNN_ACTIVATION_RELU,
                                              DNN_PROPAGATE_NAN, 0.0),
            "cudnnSetActivationDescriptor");
    }
    if (c->bias && identity) {
        /* the fused forward takes an identity activation with this algorithm only */
        x->algo = DNN_ALGO_IMPLICIT_PRECOMP_GEMM;
    } else {
        dnn_perf perf[DNN_ALGO_COUNT];
        memset(perf, 0, sizeof perf);
        int found = 0, best = -1;
        DNN(g_api.cudnnGetConvolutionForwardAlgorithm_v7(d->h, x->x, x->w, x->conv, x->y, DNN_ALGO_COUNT, &found, perf),
            "cudnnGetConvolutionForwardAlgorithm_v7");
        if (found > DNN_ALGO_COUNT)
            found = DNN_ALGO_COUNT;
        /* the heuristic's order, first with the descriptor's math type (an
         * algorithm reported for tensor-op math would not run under FMA) */
        for (int pass = 0; pass < 2 && best < 0; pass++)
            for (int i = 0; i < found && best < 0; i++)
                if (perf[i].status == DNN_SUCCESS && perf[i].memory <= max_ws &&
                    (pass == 1 ? c->dtype != 0 || c->tf32 : perf[i].mathType == math_type(c)))
                    best = i;
        if (best < 0) {
            s = dpc_errf(e, DPC_EDEVICE, "cuDNN has no algorithm within %zu bytes of workspace", max_ws);
            goto fail;
        }
        x->algo = perf[best].algo;
    }
    DNN(g_api.cudnnGetConvolutionForwardWorkspaceSize(d->h, x->x, x->w, x->conv, x->y, x->algo, &x->workspace),
        "cudnnGetConvolutionForwardWorkspaceSize");
    if (x->workspace > max_ws) {
        s = dpc_errf(e, DPC_EDEVICE, "cuDNN's algorithm %d needs %zu bytes of workspace, more than %zu", x->algo,
                     x->workspace, max_ws);
        goto fail;
    }
    x->key = *c;
    x->used = true;
    return DPC_OK;
fail: {
    char what[256];
    dpc_dnn_conv_describe(c, what, sizeof what);
    if (!strstr(e->msg, " for conv "))
        dpc_err_prefix(e, "%s: ", what);
}
    entry_free(x);
    return s;
}

static dpc_status find(dpc_dnn *d, const dpc_dnn_conv *c, size_t max_ws, entry **out, dpc_err *e) {
    for (int i = 0; i < CACHE; i++)
        if (d->cache[i].used && memcmp(&d->cache[i].key, c, sizeof *c) == 0) {
            if (d->cache[i].workspace > max_ws)
                return dpc_errf(e, DPC_EDEVICE, "cuDNN's algorithm needs %zu bytes of workspace, more than %zu",
                                d->cache[i].workspace, max_ws);
            *out = &d->cache[i];
            return DPC_OK;
        }
    int slot = -1;
    for (int i = 0; i < CACHE && slot < 0; i++)
        if (!d->cache[i].used)
            slot = i;
    if (slot < 0) {
        slot = d->next_evict;
        d->next_evict = (d->next_evict + 1) % CACHE;
        entry_free(&d->cache[slot]);
    }
    dpc_status s = make_entry(d, c, max_ws, &d->cache[slot], e);
    *out = s == DPC_OK ? &d->cache[slot] : NULL;
    return s;
}

dpc_status dpc_dnn_conv_prepare(dpc_dnn *d, const dpc_dnn_conv *c, size_t max_workspace, size_t *workspace,
                                dpc_err *e) {
    entry *x = NULL;
    *workspace = 0;
    dpc_status s = find(d, c, max_workspace, &x, e);
    if (s == DPC_OK)
        *workspace = x->workspace;
    return s;
}

dpc_status dpc_dnn_conv_run(dpc_dnn *d, const dpc_dnn_conv *c, const void *xp, const void *wp, const void *bias,
                            const void *z, void *y, void *workspace, size_t workspace_bytes, void *stream, dpc_err *e) {
    entry *x = NULL;
    dpc_status s = find(d, c, workspace_bytes, &x, e);
    if (s != DPC_OK)
        return s;
    if ((c->bias && !bias) || (c->z && !z) || !xp || !wp || !y)
        return dpc_errf(e, DPC_EINTERNAL, "cuDNN convolution: a NULL operand");
    if (dpc_fault_kernel_should_fail())
        return dpc_errf(e, DPC_EDEVICE, "cudnnConvolutionForward failed: injected fault");
    void *st = stream ? stream : d->stream;
    const float one = 1.0f, zero = 0.0f;
    void *ws = x->workspace ? workspace : NULL;
    DNN(g_api.cudnnSetStream(d->h, st), "cudnnSetStream");
    if (c->bias)
        DNN(g_api.cudnnConvolutionBiasActivationForward(d->h, &one, x->x, xp, x->w, wp, x->conv, x->algo, ws,
                                                        x->workspace, c->z ? &one : &zero, x->y, c->z ? z : y, x->b,
                                                        bias, x->act, x->y, y),
            "cudnnConvolutionBiasActivationForward");
    else
        DNN(g_api.cudnnConvolutionForward(d->h, &one, x->x, xp, x->w, wp, x->conv, x->algo, ws, x->workspace, &zero,
                                          x->y, y),
            "cudnnConvolutionForward");
    return DPC_OK;
fail:
    return s;
}

int dpc_dnn_choose(dpc_dnn *d, const dpc_cu_conv *cv, int64_t N, kprec prec, bool tf32, size_t max_workspace,
                   size_t *workspace, dpc_err *why) {
    *workspace = 0;
    for (int fused = cv->fused; fused >= 0; fused--) {
        dpc_dnn_conv c;
        dpc_dnn_conv_of(cv, N, prec, tf32, fused, &c);
        if (dpc_dnn_conv_prepare(d, &c, max_workspace, workspace, why) == DPC_OK)
            return fused ? DPC_DNN_FUSED : DPC_DNN_PLAIN;
    }
    return DPC_DNN_OWN;
}

dpc_status dpc_dnn_mode(int *mode, dpc_err *e) {
    const char *v = getenv("DPC_CUDNN");
    *mode = 1;
    if (!v || !*v)
        return DPC_OK;
    if (strcmp(v, "auto") == 0) {
        *mode = 2;
        return DPC_OK;
    }
    bool on;
    dpc_err tmp;
    if (dpc_env_flag("DPC_CUDNN", true, &on, &tmp) != DPC_OK)
        return dpc_errf(e, DPC_EUSAGE, "environment variable DPC_CUDNN='%.100s' is not 0, 1 or auto", v);
    *mode = on;
    return DPC_OK;
}
