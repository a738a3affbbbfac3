/* fake_cudnn.c - a pretend cuDNN for the CUDA emulator tests, loaded by dpc
 * through DPC_CUDNN_LIBRARY. It is built against NVIDIA's own cudnn.h, so
 * the prototypes and enum values that runtime/cuda/cudnn_lib.c declares by
 * itself are checked against the real ABI: a mismatch computes garbage or
 * is refused here.
 *
 * "Device" memory is host memory (the emulator's arena). The convolution is
 * a plain loop in double through the descriptors' strides, so a wrong
 * stride, pad, dilation or group count gives wrong numbers, which the test
 * compares against the CPU backend. It is strict where cuDNN is strict or
 * where a mistake would go unnoticed on a GPU: descriptors must be set,
 * the output must have the shape cudnnGetConvolution2dForwardOutputDim
 * gives, data types must agree, channels and groups must divide, the
 * identity activation takes only IMPLICIT_PRECOMP_GEMM (as documented for
 * cudnnConvolutionBiasActivationForward), the workspace must be as large as
 * cudnnGetConvolutionForwardWorkspaceSize said (the whole workspace given
 * is written, so a short allocation shows under ASan), the stream must be
 * FAKE_CUDNN_STREAM (as hex) when that is set. Under the pretend driver
 * fake_cuda_exec.c (DPC_CUDA_DRIVER), every operand and the workspace must
 * lie inside one of its allocations, all on the device of the stream. A refused call returns
 * CUDNN_STATUS_BAD_PARAM or NOT_SUPPORTED and is counted in bad_calls.
 * A FLOAT convolution whose math type is not CUDNN_FMA_MATH rounds x and w
 * to TF32 (10-bit mantissa), as tensor cores would.
 *
 * The heuristic (cudnnGetConvolutionForwardAlgorithm_v7) lists, in order:
 * GEMM with tensor-op math (the wrong math type for an FMA descriptor) and
 * a 1 GiB workspace, IMPLICIT_PRECOMP_GEMM with a workspace, IMPLICIT_GEMM
 * without. FAKE_CUDNN_REFUSE=grouped: no algorithm for grouped
 * convolutions (the caller must fall back). */
#include <cudnn.h>

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fake_cudnn_stats {
    long handles_live;
    long convs;      /* cudnnConvolutionForward calls computed */
    long fused;      /* cudnnConvolutionBiasActivationForward calls computed */
    long grouped;    /* of them, with groups > 1 */
    long bad_calls;
    long tf32;       /* FLOAT convolutions that ran with TF32 rounding */
    char last_bad[256];
};
struct fake_cudnn_stats fake_cudnn_stats;

#define MAGIC 0x636e6e64u

struct cudnnContext {
    unsigned magic;
    void *stream;
};
struct cudnnTensorStruct {
    unsigned magic;
    int set;
    cudnnDataType_t dt;
    int n, c, h, w, ns, cs, hs, ws;
};
struct cudnnFilterStruct {
    unsigned magic;
    int set;
    cudnnDataType_t dt;
    cudnnTensorFormat_t fmt;
    int k, c, h, w;
};
struct cudnnConvolutionStruct {
    unsigned magic;
    int set, ph, pw, u, v, dh, dw, groups;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    cudnnMathType_t math;
};
struct cudnnActivationStruct {
    unsigned magic;
    int set;
    cudnnActivationMode_t mode;
    cudnnNanPropagation_t nan; /* CUDNN_NOT_PROPAGATE_NAN: relu(NaN) = 0 */
};

static cudnnStatus_t bad(cudnnStatus_t st, const char *fmt, const char *what) {
    __atomic_fetch_add(&fake_cudnn_stats.bad_calls, 1, __ATOMIC_RELAXED);
    snprintf(fake_cudnn_stats.last_bad, sizeof fake_cudnn_stats.last_bad, fmt, what);
    return st;
}
#define BAD(what) return bad(CUDNN_STATUS_BAD_PARAM, "bad parameter: %s", what)

size_t cudnnGetVersion(void) { return 90000; }
const char *cudnnGetErrorString(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS ? "success" : "fake cuDNN error"; }

cudnnStatus_t cudnnCreate(cudnnHandle_t *h) {
    struct cudnnContext *c = calloc(1, sizeof *c);
    if (!h || !c) {
        free(c);
        BAD("cudnnCreate");
    }
    c->magic = MAGIC;
    *h = c;
    __atomic_fetch_add(&fake_cudnn_stats.handles_live, 1, __ATOMIC_RELAXED);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
    if (!h || h->magic != MAGIC)
        BAD("cudnnDestroy handle");
    h->magic = 0;
    free(h);
    __atomic_fetch_sub(&fake_cudnn_stats.handles_live, 1, __ATOMIC_RELAXED);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
    if (!h || h->magic != MAGIC)
        BAD("cudnnSetStream handle");
    h->stream = (void *)s;
    return CUDNN_STATUS_SUCCESS;
}

#define CREATE(fn, type)                                                                           \
    cudnnStatus_t fn(type *d) {                                                                    \
        if (!d)                                                                                    \
            BAD(#fn);                                                                              \
        *d = calloc(1, sizeof **d);                                                                \
        if (!*d)                                                                                   \
            return CUDNN_STATUS_ALLOC_FAILED;                                                      \
        (*d)->magic = MAGIC;                                                                       \
        return CUDNN_STATUS_SUCCESS;                                                               \
    }
#define DESTROY(fn, type)                                                                          \
    cudnnStatus_t fn(type d) {                                                                     \
        if (!d || d->magic != MAGIC)                                                               \
            BAD(#fn);                                                                              \
        d->magic = 0;                                                                              \
        free(d);                                                                                   \
        return CUDNN_STATUS_SUCCESS;                                                               \
    }
CREATE(cudnnCreateTensorDescriptor, cudnnTensorDescriptor_t)
DESTROY(cudnnDestroyTensorDescriptor, cudnnTensorDescriptor_t)
CREATE(cudnnCreateFilterDescriptor, cudnnFilterDescriptor_t)
DESTROY(cudnnDestroyFilterDescriptor, cudnnFilterDescriptor_t)
CREATE(cudnnCreateConvolutionDescriptor, cudnnConvolutionDescriptor_t)
DESTROY(cudnnDestroyConvolutionDescriptor, cudnnConvolutionDescriptor_t)
CREATE(cudnnCreateActivationDescriptor, cudnnActivationDescriptor_t)
DESTROY(cudnnDestroyActivationDescriptor, cudnnActivationDescriptor_t)

static int known_type(cudnnDataType_t t) {
    return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16;
}

cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t d, cudnnDataType_t dt, int n, int c, int h, int w,
                                           int ns, int cs, int hs, int ws) {
    if (!d || d->magic != MAGIC)
        BAD("tensor descriptor");
    if (!known_type(dt) || n < 1 || c < 1 || h < 1 || w < 1 || ns < 1 || cs < 1 || hs < 1 || ws < 1)
        BAD("cudnnSetTensor4dDescriptorEx values");
    d->set = 1, d->dt = dt, d->n = n, d->c = c, d->h = h, d->w = w, d->ns = ns, d->cs = cs, d->hs = hs, d->ws = ws;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t dt, cudnnTensorFormat_t f, int k,
                                         int c, int h, int w) {
    if (!d || d->magic != MAGIC)
        BAD("filter descriptor");
    if (!known_type(dt) || f != CUDNN_TENSOR_NCHW || k < 1 || c < 1 || h < 1 || w < 1)
        BAD("cudnnSetFilter4dDescriptor values");
    d->set = 1, d->dt = dt, d->fmt = f, d->k = k, d->c = c, d->h = h, d->w = w;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw, int u, int v, int dh,
                                              int dw, cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
    if (!d || d->magic != MAGIC)
        BAD("convolution descriptor");
    if (ph < 0 || pw < 0 || u < 1 || v < 1 || dh < 1 || dw < 1 || compute != CUDNN_DATA_FLOAT)
        BAD("cudnnSetConvolution2dDescriptor values");
    if (mode != CUDNN_CROSS_CORRELATION) /* PyTorch's conv2d; the fake computes nothing else */
        BAD("cudnnSetConvolution2dDescriptor mode (not cross-correlation)");
    d->set = 1, d->ph = ph, d->pw = pw, d->u = u, d->v = v, d->dh = dh, d->dw = dw, d->mode = mode;
    d->compute = compute;
    if (!d->groups)
        d->groups = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g) {
    if (!d || d->magic != MAGIC || g < 1)
        BAD("cudnnSetConvolutionGroupCount");
    d->groups = g;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) {
    if (!d || d->magic != MAGIC || (m != CUDNN_DEFAULT_MATH && m != CUDNN_TENSOR_OP_MATH &&
                                    m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && m != CUDNN_FMA_MATH))
        BAD("cudnnSetConvolutionMathType");
    d->math = m;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d, cudnnActivationMode_t m,
                                           cudnnNanPropagation_t nan, double coef) {
    (void)coef;
    if (!d || d->magic != MAGIC || (m != CUDNN_ACTIVATION_RELU && m != CUDNN_ACTIVATION_IDENTITY) ||
        (nan != CUDNN_PROPAGATE_NAN && nan != CUDNN_NOT_PROPAGATE_NAN))
        BAD("cudnnSetActivationDescriptor");
    d->set = 1;
    d->mode = m;
    d->nan = nan;
    return CUDNN_STATUS_SUCCESS;
}

static int ok_t(const struct cudnnTensorStruct *t) { return t && t->magic == MAGIC && t->set; }
static int ok_f(const struct cudnnFilterStruct *f) { return f && f->magic == MAGIC && f->set; }
static int ok_c(const struct cudnnConvolutionStruct *c) { return c && c->magic == MAGIC && c->set; }

static cudnnStatus_t out_dim(const struct cudnnConvolutionStruct *c, const struct cudnnTensorStruct *x,
                             const struct cudnnFilterStruct *w, int *n, int *k, int *h, int *wo) {
    if (!ok_c(c) || !ok_t(x) || !ok_f(w))
        BAD("descriptor not set (output dim)");
    if (x->c != w->c * c->groups || w->k % c->groups)
        BAD("channels and groups do not divide");
    *n = x->n;
    *k = w->k;
    *h = (x->h + 2 * c->ph - c->dh * (w->h - 1) - 1) / c->u + 1;
    *wo = (x->w + 2 * c->pw - c->dw * (w->w - 1) - 1) / c->v + 1;
    if (*h < 1 || *wo < 1)
        BAD("empty output");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t c,
                                                    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                    int *n, int *k, int *h, int *wo) {
    if (!n || !k || !h || !wo)
        BAD("NULL output dims");
    return out_dim(c, x, w, n, k, h, wo);
}

/* The workspace each algorithm claims: a column buffer's worth for
 * IMPLICIT_PRECOMP_GEMM, none for IMPLICIT_GEMM, 1 GiB for GEMM. */
static cudnnStatus_t ws_of(const struct cudnnTensorStruct *x, const struct cudnnFilterStruct *w,
                           const struct cudnnConvolutionStruct *c, cudnnConvolutionFwdAlgo_t a, size_t *bytes) {
    switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: *bytes = 0; return CUDNN_STATUS_SUCCESS;
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
        *bytes = (size_t)w->c * (size_t)w->h * (size_t)w->w * 8 + (size_t)c->groups * 64 + (size_t)x->n * 16;
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: *bytes = (size_t)1 << 30; return CUDNN_STATUS_SUCCESS;
    default: return CUDNN_STATUS_NOT_SUPPORTED;
    }
}

static int refuse(const struct cudnnConvolutionStruct *c) {
    const char *r = getenv("FAKE_CUDNN_REFUSE");
    return r && strcmp(r, "grouped") == 0 && c->groups > 1;
}

static cudnnStatus_t check_y(const struct cudnnConvolutionStruct *c, const struct cudnnTensorStruct *x,
                             const struct cudnnFilterStruct *w, const struct cudnnTensorStruct *y) {
    int n, k, h, wo;
    cudnnStatus_t st = out_dim(c, x, w, &n, &k, &h, &wo);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (!ok_t(y) || y->n != n || y->c != k || y->h != h || y->w != wo)
        BAD("y descriptor does not have the convolution's output shape");
    if (x->dt != w->dt || x->dt != y->dt)
        BAD("x, w and y data types differ");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t y, const int req, int *ret,
                                                     cudnnConvolutionFwdAlgoPerf_t *perf) {
    if (!h || h->magic != MAGIC || !ret || !perf || req < 1)
        BAD("cudnnGetConvolutionForwardAlgorithm_v7 arguments");
    cudnnStatus_t st = check_y(c, x, w, y);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    const cudnnConvolutionFwdAlgo_t order[3] = {CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM};
    int n = req < 3 ? req : 3;
    for (int i = 0; i < n; i++) {
        memset(&perf[i], 0, sizeof perf[i]);
        perf[i].algo = order[i];
        perf[i].status = refuse(c) ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_SUCCESS;
        perf[i].mathType = i == 0 ? CUDNN_TENSOR_OP_MATH : c->math;
        perf[i].time = -1;
        ws_of(x, w, c, order[i], &perf[i].memory);
    }
    *ret = n;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t c,
                                                      const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t a,
                                                      size_t *bytes) {
    if (!h || h->magic != MAGIC || !bytes)
        BAD("cudnnGetConvolutionForwardWorkspaceSize arguments");
    cudnnStatus_t st = check_y(c, x, w, y);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (refuse(c))
        return CUDNN_STATUS_NOT_SUPPORTED;
    return ws_of(x, w, c, a, bytes);
}

/* ---- the computation ---- */

static double ld(const void *p, int64_t i, cudnnDataType_t t) {
    if (t == CUDNN_DATA_FLOAT)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    if (t == CUDNN_DATA_BFLOAT16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int s = h >> 15, ex = (h >> 10) & 31, m = h & 1023;
    double v = ex == 0 ? ldexp(m, -24) : ex == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, ex - 25);
    return s ? -v : v;
}

static void st(void *p, int64_t i, double v, cudnnDataType_t t) {
    float f = (float)v;
    if (t == CUDNN_DATA_FLOAT) {
        ((float *)p)[i] = f;
        return;
    }
    uint32_t u;
    memcpy(&u, &f, 4);
    if (t == CUDNN_DATA_BFLOAT16) {
        if (isnan(f))
            u = 0x7fc00000u;
        else
            u += 0x7fffu + ((u >> 16) & 1); /* round to nearest even */
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
        return;
    }
    /* f16: through the exact double, rounding to nearest even */
    uint16_t s = (uint16_t)(signbit(f) ? 0x8000 : 0);
    double a = fabs((double)f);
    uint16_t h;
    if (isnan(f))
        h = 0x7e00;
    else if (a >= 65520.0)
        h = 0x7c00;
    else if (a < ldexp(1, -14)) {
        h = (uint16_t)nearbyint(a * ldexp(1, 24));
    } else {
        int e;
        double fr = frexp(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
        double m = nearbyint(fr * 2048.0);  /* 11 significant bits */
        if (m >= 2048.0) {
            m /= 2;
            e++;
        }
        h = (uint16_t)(((e + 14) << 10) | ((int)m - 1024));
    }
    ((uint16_t *)p)[i] = s | h;
}

static double tf32(double v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0xfffu + ((u >> 13) & 1)) & ~0x1fffu;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct conv_args {
    cudnnHandle_t h;
    const struct cudnnTensorStruct *x, *y, *z, *b;
    const struct cudnnFilterStruct *w;
    const struct cudnnConvolutionStruct *c;
    const struct cudnnActivationStruct *act;
    cudnnConvolutionFwdAlgo_t algo;
    const void *xp, *wp, *zp, *bp;
    void *yp, *ws;
    size_t ws_bytes;
    float alpha, beta; /* beta: of y (plain) or z (fused) */
} conv_args;

/* The pretend driver's allocation map, when dpc loaded fake_cuda_exec. */
static int (*device_of)(const void *, size_t);
static int (*stream_device)(void *);
static int find_driver(void) {
    if (device_of && stream_device)
        return 1;
    const char *path = getenv("DPC_CUDA_DRIVER");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (!h)
        return 0;
    device_of = (int (*)(const void *, size_t))dlsym(h, "fake_exec_device_of");
    stream_device = (int (*)(void *))dlsym(h, "fake_exec_stream_device");
    return device_of && stream_device;
}

static size_t esize(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT ? 4 : 2; }
static size_t extent(const struct cudnnTensorStruct *t) {
    return ((size_t)(t->n - 1) * t->ns + (size_t)(t->c - 1) * t->cs + (size_t)(t->h - 1) * t->hs +
            (size_t)(t->w - 1) * t->ws + 1) * esize(t->dt);
}

static cudnnStatus_t check_memory(const conv_args *a) {
    if (!find_driver())
        return CUDNN_STATUS_SUCCESS;
    int dev = stream_device(a->h->stream);
    if (dev < 0)
        BAD("the handle has no stream of the driver");
    size_t wbytes = (size_t)a->w->k * a->w->c * a->w->h * a->w->w * esize(a->w->dt);
    if (device_of(a->xp, extent(a->x)) != dev || device_of(a->wp, wbytes) != dev ||
        device_of(a->yp, extent(a->y)) != dev)
        BAD("x, w or y is not inside one allocation on the stream's device");
    if (a->act && ((a->beta != 0 && device_of(a->zp, extent(a->y)) != dev) ||
                   device_of(a->bp, (size_t)a->y->c * esize(a->y->dt)) != dev))
        BAD("z or bias is not inside one allocation on the stream's device");
    if (a->ws_bytes && device_of(a->ws, a->ws_bytes) != dev)
        BAD("the workspace is not inside one allocation on the stream's device");
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t run(const conv_args *a) {
    if (!a->h || a->h->magic != MAGIC)
        BAD("handle");
    const char *want = getenv("FAKE_CUDNN_STREAM");
    if (want && *want && (uintptr_t)a->h->stream != (uintptr_t)strtoull(want, NULL, 16))
        BAD("the handle's stream is not FAKE_CUDNN_STREAM");
    cudnnStatus_t s = check_y(a->c, a->x, a->w, a->y);
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    if (!a->xp || !a->wp || !a->yp)
        BAD("NULL x, w or y");
    size_t need;
    if (ws_of(a->x, a->w, a->c, a->algo, &need) != CUDNN_STATUS_SUCCESS || refuse(a->c))
        return bad(CUDNN_STATUS_NOT_SUPPORTED, "%s", "algorithm not supported");
    if (a->ws_bytes < need || (need && !a->ws))
        BAD("workspace smaller than cudnnGetConvolutionForwardWorkspaceSize said");
    if ((s = check_memory(a)) != CUDNN_STATUS_SUCCESS)
        return s;
    if (a->ws && a->ws_bytes)
        memset(a->ws, 0xab, a->ws_bytes); /* cuDNN may use all of it */
    const struct cudnnTensorStruct *x = a->x, *y = a->y;
    const struct cudnnFilterStruct *w = a->w;
    const struct cudnnConvolutionStruct *c = a->c;
    int G = c->groups, Cg = w->c, Kg = w->k / G;
    int round = x->dt == CUDNN_DATA_FLOAT && c->math != CUDNN_FMA_MATH;
    if (round)
        __atomic_fetch_add(&fake_cudnn_stats.tf32, 1, __ATOMIC_RELAXED);
    if (G > 1)
        __atomic_fetch_add(&fake_cudnn_stats.grouped, 1, __ATOMIC_RELAXED);
    /* computed into a side buffer first: y may alias z */
    size_t cnt = (size_t)y->n * y->c * y->h * y->w;
    double *out = malloc(cnt * sizeof(double) + 8);
    if (!out)
        return CUDNN_STATUS_ALLOC_FAILED;
    size_t o = 0;
    for (int n = 0; n < y->n; n++)
        for (int k = 0; k < y->c; k++)
            for (int oh = 0; oh < y->h; oh++)
                for (int ow = 0; ow < y->w; ow++, o++) {
                    int g = k / Kg;
                    double acc = 0;
                    for (int ci = 0; ci < Cg; ci++)
                        for (int i = 0; i < w->h; i++)
                            for (int j = 0; j < w->w; j++) {
                                int ih = oh * c->u - c->ph + i * c->dh, iw = ow * c->v - c->pw + j * c->dw;
                                if (ih < 0 || ih >= x->h || iw < 0 || iw >= x->w)
                                    continue;
                                int64_t xi = (int64_t)n * x->ns + (int64_t)(g * Cg + ci) * x->cs +
                                             (int64_t)ih * x->hs + (int64_t)iw * x->ws;
                                int64_t wi = (((int64_t)k * Cg + ci) * w->h + i) * w->w + j;
                                double xv = ld(a->xp, xi, x->dt), wv = ld(a->wp, wi, w->dt);
                                acc += round ? tf32(xv) * tf32(wv) : xv * wv;
                            }
                    int64_t yi = (int64_t)n * y->ns + (int64_t)k * y->cs + (int64_t)oh * y->hs + (int64_t)ow * y->ws;
                    double v = a->alpha * acc;
                    if (a->act) { /* fused: + beta z + bias, act */
                        if (a->beta != 0)
                            v += a->beta * ld(a->zp, yi, y->dt);
                        v += ld(a->bp, k, y->dt);
                        if (a->act->mode == CUDNN_ACTIVATION_RELU &&
                            (v < 0 || (v != v && a->act->nan == CUDNN_NOT_PROPAGATE_NAN)))
                            v = 0;
                    } else if (a->beta != 0)
                        v += a->beta * ld(a->yp, yi, y->dt);
                    out[o] = v;
                }
    o = 0;
    for (int n = 0; n < y->n; n++)
        for (int k = 0; k < y->c; k++)
            for (int oh = 0; oh < y->h; oh++)
                for (int ow = 0; ow < y->w; ow++, o++)
                    st(a->yp, (int64_t)n * y->ns + (int64_t)k * y->cs + (int64_t)oh * y->hs + (int64_t)ow * y->ws,
                       out[o], y->dt);
    free(out);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                      const void *x, const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo,
                                      void *ws, size_t ws_bytes, const void *beta, const cudnnTensorDescriptor_t yd,
                                      void *y) {
    if (!alpha || !beta)
        BAD("NULL alpha or beta");
    conv_args a = {h, xd, yd, NULL, NULL, wd, cd, NULL, algo, x, w, NULL, NULL, y, ws, ws_bytes,
                   *(const float *)alpha, *(const float *)beta};
    cudnnStatus_t s = run(&a);
    if (s == CUDNN_STATUS_SUCCESS)
        __atomic_fetch_add(&fake_cudnn_stats.convs, 1, __ATOMIC_RELAXED);
    return s;
}

cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t h, const void *alpha1, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cd,
    cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes, const void *alpha2, const cudnnTensorDescriptor_t zd,
    const void *z, const cudnnTensorDescriptor_t bd, const void *bias, const cudnnActivationDescriptor_t ad,
    const cudnnTensorDescriptor_t yd, void *y) {
    if (!alpha1 || !alpha2 || !z || !bias)
        BAD("NULL alpha, z or bias");
    if (!ad || ad->magic != MAGIC || !ad->set)
        BAD("activation descriptor");
    if (ad->mode == CUDNN_ACTIVATION_IDENTITY && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
        return bad(CUDNN_STATUS_NOT_SUPPORTED, "%s", "identity activation with an algorithm other than IMPLICIT_PRECOMP_GEMM");
    if (!ok_t(zd) || !ok_t(yd) || zd->n != yd->n || zd->c != yd->c || zd->h != yd->h || zd->w != yd->w ||
        zd->ns != yd->ns || zd->cs != yd->cs || zd->hs != yd->hs || zd->ws != yd->ws || zd->dt != yd->dt)
        BAD("z descriptor differs from y");
    if (!ok_t(bd) || bd->n != 1 || bd->c != yd->c || bd->h != 1 || bd->w != 1 || bd->cs != 1 || bd->dt != yd->dt)
        BAD("bias descriptor is not [1, K, 1, 1] of y's type");
    conv_args a = {h, xd, yd, zd, bd, wd, cd, ad, algo, x, w, z, bias, y, ws, ws_bytes,
                   *(const float *)alpha1, *(const float *)alpha2};
    cudnnStatus_t s = run(&a);
    if (s == CUDNN_STATUS_SUCCESS)
        __atomic_fetch_add(&fake_cudnn_stats.fused, 1, __ATOMIC_RELAXED);
    return s;
}
