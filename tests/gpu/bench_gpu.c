/* bench_gpu.c - the GPU benchmark, G1..G6 of shared/reference/performance.md
 * section 11, on device 0.
 *
 *     bench_gpu [--out DIR] [--deadline SECONDS] [--only G1,G4,...] [--quick]
 *
 * Runs in priority order G1, G4, G2, G3, G6, G5; each writes DIR/Gn.json as
 * soon as it is done, and once the wall clock passes the deadline (default
 * 200 s) the remaining ones are skipped. Prints a table at the end. Times
 * are CUDA events around each iteration (median, p10, p90) after warm-ups;
 * model kernels are timed through the CUDA backend itself
 * (dpc_cuda_bench_steps: the plan's steps without the copies in and out).
 *
 *   G1 calibration: copy and triad kernels compiled by dpc's NVRTC path on
 *      1 GiB buffers, cuMemcpyDtoDAsync, cuBLASLt f32/TF32/bf16 GEMMs at
 *      4096^3 and 8192^3, empty-kernel launch cost, a graph of 100 empty
 *      kernels, pinned 256 MB host<->device copies
 *   G2 fused memory-bound kernels: gelu(x*2+0.5)+r on 256M floats fused and
 *      unfused (every intermediate a graph output, so one kernel per op);
 *      softmax and layer_norm over 16384 rows of 1024 and 4096
 *   G3 Linear(1024->4096) + bias + ReLU / GELU at M = 64, 256, 4096, f32 and
 *      TF32, dpc's path against bare cuBLASLt, cuBLASLt's own epilogues and
 *      GEMM + a separate kernel; bf16 cuBLASLt for reference
 *   G4 a BERT-base encoder layer (d 768, 12 heads, FFN 3072, seq 128) and a
 *      stack of 12, batch 1, 8, 64, step by step and as a CUDA graph
 *   G5 the data-parallel runtime on one GPU: 1, 2, 4 replicas of the G4
 *      layer on cuda:0, 64 rows each, whole dpc_model_run calls
 *   G6 compile time: front end, NVRTC cold (empty cache) and warm (hit),
 *      module load, for the G4 layer and stack
 */
#define _GNU_SOURCE
#include "backend_cuda.h"
#include "cublaslt.h"
#include "cuda_driver.h"
#include "frontend.h" /* m->front, the graph IR */
#include "kernel.h"   /* the kernel graph */
#include "model.h"
#include "nvrtc_compile.h"
#include "safetensors.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SKIP 77

/* ---------------------------------------------------------- bookkeeping */

static double t_start, deadline = 200;
static const char *outdir = ".";
static bool quick;
static dpc_cuda_device dev;
static CUcontext ctx;
static CUstream stream;
static dpc_buf table;   /* the summary printed at the end */
static dpc_buf json;    /* the benchmark being written */
static int nrec;
static char tmpdir[64];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool time_left(void) { return now_s() - t_start < deadline; }

static void json_begin(const char *bench, const char *what) {
    dpc_buf_free(&json);
    dpc_buf_init(&json);
    int drv = dpc_cuda_driver_version(), maj, min;
    dpc_nvrtc_version(&maj, &min);
    dpc_buf_printf(&json,
                   "{\n  \"bench\": \"%s\",\n  \"what\": \"%s\",\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n"
                   "  \"driver\": %d,\n  \"nvrtc\": \"%d.%d\",\n  \"cublasLt\": %zu,\n  \"results\": [",
                   bench, what, dev.name, dev.sm_count, drv, maj, min, dpc_lt_version());
    nrec = 0;
    dpc_buf_printf(&table, "\n%s  %s\n", bench, what);
}

/* One result: name, value and unit, an optional ratio to a limit or peer,
 * and optional extra JSON fields ("\"p10\": 1.2, ..."). */
static void rec(const char *name, double value, const char *unit, const char *ratio_name, double ratio,
                const char *extra) {
    dpc_buf_printf(&json, "%s\n    {\"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\"", nrec++ ? "," : "", name,
                   isfinite(value) ? value : -1.0, unit);
    if (ratio_name)
        dpc_buf_printf(&json, ", \"%s\": %.4g", ratio_name, isfinite(ratio) ? ratio : -1.0);
    if (extra && *extra)
        dpc_buf_printf(&json, ", %s", extra);
    dpc_buf_puts(&json, "}");
    dpc_buf_printf(&table, "  %-52s %12.4g %-8s", name, value, unit);
    if (ratio_name)
        dpc_buf_printf(&table, "  %s %.3g", ratio_name, ratio);
    dpc_buf_puts(&table, "\n");
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dpc_buf_printf(&table, "  note: %s\n", msg);
    for (char *p = msg; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = ' ';
    dpc_buf_printf(&json, "%s\n    {\"note\": \"%s\"}", nrec++ ? "," : "", msg);
    fprintf(stderr, "bench: %s\n", msg);
}

static void json_end(const char *bench) {
    dpc_buf_puts(&json, "\n  ]\n}\n");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json", outdir, bench);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(json.data, f);
        fclose(f);
    } else
        fprintf(stderr, "bench: cannot write %s\n", path);
}

#define CU(call)                                                                                   \
    do {                                                                                           \
        dpc_err e_;                                                                                \
        if (DPC_CU(&e_, call) != DPC_OK) {                                                         \
            note("%s", e_.msg);                                                                    \
            return false;                                                                          \
        }                                                                                          \
    } while (0)

/* ---------------------------------------------------------- timing */

typedef struct tstat {
    double med, p10, p90; /* ms */
    int iters;
} tstat;

typedef bool (*enq_fn)(void *arg);

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Times f (which enqueues on `stream`) with events: warm-ups, then as many
 * iterations as fit in about budget seconds (5 to 50). */
static bool time_gpu(enq_fn f, void *arg, double budget, tstat *out) {
    const dpc_cuda_api *cu = dpc_cuda();
    CUevent a, b;
    CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
    CU(cuEventCreate(&b, CU_EVENT_DEFAULT));
    double ms[64];
    int warm = 3, iters = 50;
    bool ok = true;
    for (int i = 0; ok && i < warm + iters; i++) {
        ok = cu->cuEventRecord(a, stream) == CUDA_SUCCESS && f(arg) &&
             cu->cuEventRecord(b, stream) == CUDA_SUCCESS && cu->cuEventSynchronize(b) == CUDA_SUCCESS;
        float t = 0;
        ok = ok && cu->cuEventElapsedTime(&t, a, b) == CUDA_SUCCESS;
        if (i == warm - 1 || i == 0) {
            /* size the run from a warm iteration */
            int fit = t > 0 ? (int)(budget * 1000 / t) : 50;
            iters = fit < 5 ? 5 : fit > 50 ? 50 : fit;
            if (quick && iters > 10)
                iters = 10;
        }
        if (i >= warm)
            ms[i - warm] = t;
    }
    cu->cuEventDestroy(a);
    cu->cuEventDestroy(b);
    if (!ok) {
        note("a timed operation failed");
        return false;
    }
    qsort(ms, (size_t)iters, sizeof(double), cmpd);
    out->med = ms[iters / 2];
    out->p10 = ms[iters / 10];
    out->p90 = ms[iters - 1 - iters / 10];
    out->iters = iters;
    return true;
}

static const char *tx(const tstat *t) {
    static char b[128];
    snprintf(b, sizeof b, "\"p10_ms\": %.5g, \"p90_ms\": %.5g, \"iters\": %d", t->p10, t->p90, t->iters);
    return b;
}

/* ---------------------------------------------------------- G1 */

static const char CAL_SRC[] =
    "extern \"C\" __global__ void copy4(float4 *__restrict__ y, const float4 *__restrict__ x, long long n4) {\n"
    "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;\n"
    "         i += (long long)gridDim.x * blockDim.x)\n"
    "        y[i] = x[i];\n"
    "}\n"
    "extern \"C\" __global__ void triad4(float4 *__restrict__ a, const float4 *__restrict__ b,\n"
    "                                   const float4 *__restrict__ c, float s, long long n4) {\n"
    "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;\n"
    "         i += (long long)gridDim.x * blockDim.x) {\n"
    "        const float4 x = b[i], y = c[i];\n"
    "        a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void fill(float *p, long long n, unsigned seed) {\n"
    "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "         i += (long long)gridDim.x * blockDim.x) {\n"
    "        unsigned h = (unsigned)i * 2654435761u ^ seed;\n"
    "        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;\n"
    "        p[i] = (float)(h & 0xffffff) / 16777216.0f * 2.0f - 1.0f;\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void fill_bf16(unsigned short *p, long long n, unsigned seed) {\n"
    "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "         i += (long long)gridDim.x * blockDim.x) {\n"
    "        unsigned h = (unsigned)i * 2654435761u ^ seed;\n"
    "        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;\n"
    "        const float f = (float)(h & 0xffffff) / 16777216.0f * 2.0f - 1.0f;\n"
    "        p[i] = (unsigned short)(__float_as_uint(f) >> 16);\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void empty() {}\n";

static CUmodule cal_mod;
static CUfunction f_copy, f_triad, f_fill, f_fill_bf16, f_empty;

static bool cal_load(void) {
    if (cal_mod)
        return true;
    dpc_buf img;
    dpc_buf_init(&img);
    dpc_err e;
    if (dpc_nvrtc_compile(CAL_SRC, "calibration.cu", dev.arch, NULL, 0, &img, NULL, &e) != DPC_OK) {
        note("calibration kernels: %s", e.msg);
        return false;
    }
    CU(cuModuleLoadDataEx(&cal_mod, img.data, 0, NULL, NULL));
    dpc_buf_free(&img);
    CU(cuModuleGetFunction(&f_copy, cal_mod, "copy4"));
    CU(cuModuleGetFunction(&f_triad, cal_mod, "triad4"));
    CU(cuModuleGetFunction(&f_fill, cal_mod, "fill"));
    CU(cuModuleGetFunction(&f_fill_bf16, cal_mod, "fill_bf16"));
    CU(cuModuleGetFunction(&f_empty, cal_mod, "empty"));
    return true;
}

static unsigned grid_for(long long n) {
    long long b = (n + 255) / 256, cap = (long long)dev.sm_count * 32;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

static bool fill(CUdeviceptr p, long long n, unsigned seed, bool bf16) {
    void *args[] = {&p, &n, &seed};
    CU(cuLaunchKernel(bf16 ? f_fill_bf16 : f_fill, grid_for(n), 1, 1, 256, 1, 1, 0, stream, args, NULL));
    return true;
}

typedef struct kargs {
    CUfunction f;
    unsigned grid;
    void **args;
} kargs;

static bool enq_kernel(void *p) {
    kargs *k = p;
    return dpc_cuda()->cuLaunchKernel(k->f, k->grid, 1, 1, 256, 1, 1, 0, stream, k->args, NULL) == CUDA_SUCCESS;
}

typedef struct cargs {
    CUdeviceptr d, s;
    void *h;
    size_t n;
    int kind; /* 0 DtoD, 1 HtoD, 2 DtoH */
} cargs;

static bool enq_copy(void *p) {
    cargs *c = p;
    const dpc_cuda_api *cu = dpc_cuda();
    CUresult r = c->kind == 0   ? cu->cuMemcpyDtoDAsync(c->d, c->s, c->n, stream)
                 : c->kind == 1 ? cu->cuMemcpyHtoDAsync(c->d, c->h, c->n, stream)
                                : cu->cuMemcpyDtoHAsync(c->h, c->s, c->n, stream);
    return r == CUDA_SUCCESS;
}

typedef struct gargs {
    dpc_lt *lt;
    dpc_lt_gemm_desc d;
    CUdeviceptr a, b, bias, c;
} gargs;

static bool enq_gemm(void *p) {
    gargs *g = p;
    dpc_err e;
    if (dpc_lt_gemm(g->lt, &g->d, (void *)(uintptr_t)g->a, (void *)(uintptr_t)g->b, (void *)(uintptr_t)g->bias,
                    (void *)(uintptr_t)g->c, (void *)stream, &e) != DPC_OK) {
        note("%s", e.msg);
        return false;
    }
    return true;
}

static double copy_gbs; /* G1's copy bandwidth, the denominator of G2 */
static double gemm_tf[3]; /* f32, tf32, bf16 at 8192 (or 4096) TFLOP/s */

static bool g1(void) {
    const dpc_cuda_api *cu = dpc_cuda();
    json_begin("G1", "calibration: copy bandwidth, GEMM rates, launch and graph costs, pinned copies");
    if (!cal_load())
        return false;
    size_t bytes = (size_t)1 << 30;
    long long n = (long long)(bytes / 4), n4 = n / 4;
    CUdeviceptr x, y, z;
    CU(cuMemAlloc(&x, bytes));
    CU(cuMemAlloc(&y, bytes));
    CU(cuMemAlloc(&z, bytes));
    fill(x, n, 1, false);
    fill(z, n, 2, false);
    tstat t;
    unsigned grid = grid_for(n4);
    void *ca[] = {&y, &x, &n4};
    kargs kc = {f_copy, grid, ca};
    if (time_gpu(enq_kernel, &kc, 0.5, &t)) {
        copy_gbs = 2.0 * bytes / (t.med * 1e-3) / 1e9;
        rec("copy kernel (NVRTC), 1 GiB, read+write", copy_gbs, "GB/s", "of_4.8TB/s", copy_gbs / 4800, tx(&t));
    }
    float s = 3.0f;
    void *ta[] = {&y, &x, &z, &s, &n4};
    kargs kt = {f_triad, grid, ta};
    if (time_gpu(enq_kernel, &kt, 0.5, &t)) {
        double gbs = 3.0 * bytes / (t.med * 1e-3) / 1e9;
        rec("triad kernel (NVRTC), 3 x 1 GiB", gbs, "GB/s", "of_copy", copy_gbs > 0 ? gbs / copy_gbs : NAN, tx(&t));
    }
    cargs cd = {.d = y, .s = x, .n = bytes, .kind = 0};
    if (time_gpu(enq_copy, &cd, 0.5, &t)) {
        double gbs = 2.0 * bytes / (t.med * 1e-3) / 1e9;
        rec("cuMemcpyDtoDAsync 1 GiB, read+write", gbs, "GB/s", "of_copy", copy_gbs > 0 ? gbs / copy_gbs : NAN, tx(&t));
    }
    cu->cuMemFree(x);
    cu->cuMemFree(y);
    cu->cuMemFree(z);

    /* GEMMs */
    dpc_lt *lt = NULL;
    dpc_err e;
    if (dpc_lt_create(&lt, stream, &e) != DPC_OK) {
        note("%s", e.msg);
        return false;
    }
    const int sizes[] = {4096, 8192};
    for (int si = 0; si < 2 && time_left(); si++) {
        long long m = sizes[si];
        size_t el = (size_t)m * m;
        CUdeviceptr a, b, c;
        if (cu->cuMemAlloc(&a, el * 4) || cu->cuMemAlloc(&b, el * 4) || cu->cuMemAlloc(&c, el * 4)) {
            note("no memory for %lld^3 GEMMs", m);
            break;
        }
        for (int kind = 0; kind < 3; kind++) {
            bool bf = kind == 2;
            fill(a, (long long)el, 3, bf);
            fill(b, (long long)el, 4, bf);
            gargs g = {.lt = lt, .a = a, .b = b, .c = c};
            g.d.M = g.d.N = g.d.K = m;
            g.d.dtype = bf ? DPC_LT_BF16 : DPC_LT_F32;
            g.d.tf32 = kind == 1;
            if (!time_gpu(enq_gemm, &g, 0.6, &t))
                continue;
            double tf = 2.0 * m * m * m / (t.med * 1e-3) / 1e12;
            static const double peak[] = {67, 495, 989};
            static const char *const nm[] = {"f32", "TF32", "bf16"};
            char name[96];
            snprintf(name, sizeof name, "cuBLASLt GEMM %s %lld^3", nm[kind], m);
            rec(name, tf, "TFLOP/s", "of_spec", tf / peak[kind], tx(&t));
            gemm_tf[kind] = tf;
        }
        cu->cuMemFree(a);
        cu->cuMemFree(b);
        cu->cuMemFree(c);
    }
    dpc_lt_destroy(lt);

    /* launch costs */
    const int nl = 2000;
    double h0 = now_s();
    for (int i = 0; i < nl; i++)
        CU(cuLaunchKernel(f_empty, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL));
    double h1 = now_s();
    CU(cuStreamSynchronize(stream));
    rec("empty kernel: cuLaunchKernel enqueue (host)", (h1 - h0) / nl * 1e6, "us", NULL, 0, NULL);
    h0 = now_s();
    for (int i = 0; i < 500; i++) {
        CU(cuLaunchKernel(f_empty, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL));
        CU(cuStreamSynchronize(stream));
    }
    rec("empty kernel: launch + sync (host)", (now_s() - h0) / 500 * 1e6, "us", NULL, 0, NULL);
    CUgraph gr;
    CUgraphExec ge;
    CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (int i = 0; i < 100; i++)
        CU(cuLaunchKernel(f_empty, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL));
    CU(cuStreamEndCapture(stream, &gr));
    CU(cuGraphInstantiate(&ge, gr, 0));
    cu->cuGraphDestroy(gr);
    CU(cuGraphLaunch(ge, stream));
    CU(cuStreamSynchronize(stream));
    h0 = now_s();
    for (int i = 0; i < 50; i++)
        CU(cuGraphLaunch(ge, stream));
    CU(cuStreamSynchronize(stream));
    double per_graph = (now_s() - h0) / 50;
    rec("graph of 100 empty kernels: replay, per node", per_graph / 100 * 1e6, "us", NULL, 0, NULL);
    cu->cuGraphExecDestroy(ge);

    /* pinned copies */
    size_t pb = (size_t)256 << 20;
    void *host;
    CUdeviceptr d;
    CU(cuMemAllocHost(&host, pb));
    CU(cuMemAlloc(&d, pb));
    memset(host, 1, pb);
    cargs h2d = {.d = d, .h = host, .n = pb, .kind = 1}, d2h = {.s = d, .h = host, .n = pb, .kind = 2};
    if (time_gpu(enq_copy, &h2d, 0.4, &t))
        rec("pinned H2D 256 MB", pb / (t.med * 1e-3) / 1e9, "GB/s", NULL, 0, tx(&t));
    if (time_gpu(enq_copy, &d2h, 0.4, &t))
        rec("pinned D2H 256 MB", pb / (t.med * 1e-3) / 1e9, "GB/s", NULL, 0, tx(&t));
    cu->cuMemFree(d);
    cu->cuMemFreeHost(host);
    return true;
}

/* ---------------------------------------------------------- models */

static char *write_text(const char *name, const char *text) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s.dp", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

/* Float storage of the models model_open makes (G4 sets bf16 for its rows). */
static kprec open_prec = KP_F32;

/* Compiles text, binds dpc's default initial weights, chooses devs. */
static dpc_model *model_open(const char *name, const char *text, const char *devs) {
    char *path = write_text(name, text);
    dpc_model *m = NULL;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_err e;
    if (!path || dpc_model_compile(path, &m, &diags, &e) != DPC_OK) {
        note("%s does not compile: %s %s", name, path ? e.msg : "cannot write", diags.data ? diags.data : "");
        dpc_buf_free(&diags);
        return NULL;
    }
    dpc_buf_free(&diags);
    dpc_status s = dpc_model_bind_init(m, 1, &e);
    dpc_device dv[8];
    int nd = 0;
    if (s == DPC_OK)
        s = dpc_parse_devices(devs, dv, 8, &nd, &e);
    dpc_model_set_precision(m, open_prec);
    if (s == DPC_OK)
        s = dpc_model_set_devices(m, dv, nd, &e);
    if (s != DPC_OK) {
        note("%s: %s", name, e.msg);
        dpc_model_free(m);
        return NULL;
    }
    return m;
}

/* Random inputs at batch n (ids 0). */
static int model_inputs(const dpc_model *m, int64_t n, dpc_tensor **t) {
    const ir_graph *g = &m->front->g;
    dpc_err e;
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < g->inputs.len; i++) {
        if (dpc_model_input_new(m, i, n, NULL, &t[i], &e) != DPC_OK) /* ids stay 0 */
            return -1;
        int64_t cnt = dpc_tensor_numel(t[i]);
        if (t[i]->dtype == DPC_F32)
            for (int64_t k = 0; k < cnt; k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                ((float *)t[i]->data)[k] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            }
    }
    return g->inputs.len;
}

/* One whole forward (copies in and out included); wall seconds, or -1. */
static double model_run(dpc_model *m, int64_t n) {
    const ir_graph *g = &m->front->g;
    dpc_tensor *in[64] = {0}, *out[64] = {0};
    double scalars[64] = {0};
    for (int i = 0; i < g->scalars.len && i < 64; i++)
        scalars[i] = ((const ir_node *)g->scalars.items[i])->attr.leaf.value;
    int nin = model_inputs(m, n, in);
    dpc_err e;
    double t0 = now_s();
    dpc_status s = nin < 0 ? DPC_ENOMEM : dpc_model_run(m, (const dpc_tensor *const *)in, nin, scalars, out, &e);
    double t = now_s() - t0;
    for (int i = 0; i < 64; i++) {
        dpc_tensor_free(in[i]);
        dpc_tensor_free(out[i]);
    }
    if (s != DPC_OK) {
        note("forward at batch %lld: %s", (long long)n, nin < 0 ? "no memory for inputs" : e.msg);
        return -1;
    }
    return t;
}

/* Device time of the model's steps at batch n (after one real forward
 * when init, so the inputs hold data). */
static bool model_time(dpc_model *m, int64_t n, bool graph, bool init, double budget, dpc_cuda_bench *b) {
    if (init && model_run(m, n) < 0)
        return false;
    dpc_err e;
    dpc_cuda_bench probe;
    if (dpc_cuda_bench_steps(m->be, m->rep[0], n, graph, 1, 1, &probe, &e) != DPC_OK) {
        note("batch %lld: %s", (long long)n, e.msg);
        return false;
    }
    int iters = probe.ms_median > 0 ? (int)(budget * 1000 / probe.ms_median) : 50;
    iters = iters < 5 ? 5 : iters > 50 ? 50 : iters;
    if (quick && iters > 10)
        iters = 10;
    if (dpc_cuda_bench_steps(m->be, m->rep[0], n, graph, 2, iters, b, &e) != DPC_OK) {
        note("batch %lld: %s", (long long)n, e.msg);
        return false;
    }
    return true;
}

static const char *bx(const dpc_cuda_bench *b) {
    static char s[256];
    snprintf(s, sizeof s, "\"p10_ms\": %.5g, \"p90_ms\": %.5g, \"iters\": %d, \"kernels\": %d, \"gemms\": %d, \"host_us\": %.4g",
             b->ms_p10, b->ms_p90, b->iters, b->kernels_per_forward, b->gemms_per_forward, b->host_us);
    return s;
}

/* ---------------------------------------------------------- G2 */

static bool g2(void) {
    json_begin("G2", "fused memory-bound kernels: effective GB/s (inputs read once, output written once)");
    static const char CHAIN[] = "module Chain {\n"
                                "    forward(x: [N, 1048576], r: [N, 1048576]) {\n"
                                "        return gelu(x * 2.0 + 0.5) + r\n"
                                "    }\n"
                                "}\n"
                                "model = Chain()\n";
    static const char UNFUSED[] = "module Unfused {\n"
                                  "    forward(x: [N, 1048576], r: [N, 1048576]) {\n"
                                  "        a = x * 2.0\n"
                                  "        b = a + 0.5\n"
                                  "        c = gelu(b)\n"
                                  "        return c + r, a, b, c\n"
                                  "    }\n"
                                  "}\n"
                                  "model = Unfused()\n";
    const int64_t rows = quick ? 32 : 128; /* 128 M floats: 0.5 GiB an array, 10x the L2 */
    double bytes = 3.0 * rows * 1048576 * 4, fused_ms = 0;
    for (int v = 0; v < 2 && time_left(); v++) {
        dpc_model *m = model_open(v ? "unfused" : "chain", v ? UNFUSED : CHAIN, "cuda:0");
        dpc_cuda_bench b;
        if (m && model_time(m, rows, false, false, 0.6, &b)) {
            double gbs = bytes / (b.ms_median * 1e-3) / 1e9;
            char name[128];
            snprintf(name, sizeof name, "gelu(x*2+0.5)+r, %lld M floats, %s", (long long)rows, v ? "unfused (4 kernels)" : "fused");
            if (!v)
                fused_ms = b.ms_median;
            rec(name, gbs, "GB/s", v ? "fused_speedup" : "of_copy",
                v ? b.ms_median / fused_ms : (copy_gbs > 0 ? gbs / copy_gbs : NAN), bx(&b));
        }
        dpc_model_free(m);
    }
    const int Ls[] = {1024, 4096};
    for (int li = 0; li < 2 && time_left(); li++) {
        for (int op = 0; op < 2 && time_left(); op++) {
            char text[512], name[128];
            if (op == 0)
                snprintf(text, sizeof text,
                         "module Sm {\n    forward(x: [N, %d]) {\n        return softmax(x, -1)\n    }\n}\nmodel = Sm()\n",
                         Ls[li]);
            else
                snprintf(text, sizeof text,
                         "module Ln(d: int = %d) {\n    ln = LayerNorm(d)\n    forward(x: [N, d]) {\n        return ln(x)\n"
                         "    }\n}\nmodel = Ln()\n",
                         Ls[li]);
            dpc_model *m = model_open(op ? "ln" : "sm", text, "cuda:0");
            dpc_cuda_bench b;
            int64_t M = 16384;
            if (m && model_time(m, M, false, true, 0.4, &b)) {
                double gbs = 2.0 * M * Ls[li] * 4 / (b.ms_median * 1e-3) / 1e9;
                snprintf(name, sizeof name, "%s, 16384 rows of %d (%s)", op ? "layer_norm" : "softmax", Ls[li],
                         Ls[li] > 1024 ? "block per row" : "warp per row");
                rec(name, gbs, "GB/s", "of_copy", copy_gbs > 0 ? gbs / copy_gbs : NAN, bx(&b));
            }
            dpc_model_free(m);
        }
    }
    return true;
}

/* ---------------------------------------------------------- G3 */

static bool g3(void) {
    const dpc_cuda_api *cu = dpc_cuda();
    json_begin("G3", "Linear(1024->4096) + bias + activation: dpc against cuBLASLt alone and with its epilogues");
    const int64_t Ms[] = {64, 256, 4096};
    const int K = 1024, Nn = 4096;
    for (int tf = 0; tf < 2 && time_left(); tf++) {
        setenv("DPC_CUDA_TF32", tf ? "1" : "0", 1);
        const char *prec = tf ? "TF32" : "f32";
        for (int act = 0; act < 3 && time_left(); act++) {
            /* 0: relu fused into cuBLASLt (RELU_BIAS); 1: gelu as a kernel after
             * BIAS; 2: relu as a separate kernel (the GEMM result is an output) */
            static const char *const body[] = {"return relu(fc(x))", "return gelu(fc(x))",
                                               "h = fc(x)\n        return relu(h), h"};
            static const char *const what[] = {"dpc linear+relu (cuBLASLt RELU_BIAS)",
                                               "dpc linear+gelu (BIAS + dpc kernel)",
                                               "linear, relu as a separate kernel"};
            char text[512];
            snprintf(text, sizeof text,
                     "module G3 {\n    fc = Linear(%d, %d)\n    forward(x: [N, %d]) {\n        %s\n    }\n}\nmodel = G3()\n",
                     K, Nn, K, body[act]);
            dpc_model *m = model_open("g3", text, "cuda:0");
            for (int mi = 0; m && mi < 3 && time_left(); mi++) {
                dpc_cuda_bench b;
                if (!model_time(m, Ms[mi], false, true, 0.3, &b))
                    break;
                double flop = 2.0 * Ms[mi] * Nn * K;
                char name[160];
                snprintf(name, sizeof name, "%s %s M=%lld", what[act], prec, (long long)Ms[mi]);
                rec(name, b.ms_median * 1e3, "us", "TFLOP/s", flop / (b.ms_median * 1e-3) / 1e12, bx(&b));
            }
            dpc_model_free(m);
        }
    }
    unsetenv("DPC_CUDA_TF32");
    /* cuBLASLt alone */
    dpc_lt *lt = NULL;
    dpc_err e;
    if (!cal_load() || dpc_lt_create(&lt, stream, &e) != DPC_OK) {
        note("cuBLASLt: %s", e.msg);
        return false;
    }
    CUdeviceptr a, w, bias, c;
    size_t big = (size_t)4096 * K;
    if (cu->cuMemAlloc(&a, big * 4) || cu->cuMemAlloc(&w, (size_t)Nn * K * 4) || cu->cuMemAlloc(&bias, Nn * 4) ||
        cu->cuMemAlloc(&c, (size_t)4096 * Nn * 4)) {
        note("no memory for the cuBLASLt peers");
        dpc_lt_destroy(lt);
        return false;
    }
    for (int kind = 0; kind < 3 && time_left(); kind++) {
        bool bf = kind == 2;
        fill(a, (long long)big, 5, bf);
        fill(w, (long long)Nn * K, 6, bf);
        fill(bias, Nn, 7, bf);
        static const char *const nm[] = {"f32", "TF32", "bf16"};
        for (int epi = 0; epi < 3; epi++) {
            static const dpc_lt_epilogue E[] = {DPC_LT_EPI_NONE, DPC_LT_EPI_RELU_BIAS, DPC_LT_EPI_GELU_BIAS};
            static const char *const en[] = {"bare GEMM", "RELU_BIAS", "GELU_BIAS (tanh)"};
            for (int mi = 0; mi < 3 && time_left(); mi++) {
                gargs g = {.lt = lt, .a = a, .b = w, .bias = bias, .c = c};
                g.d.M = Ms[mi];
                g.d.N = Nn;
                g.d.K = K;
                g.d.transB = true;
                g.d.dtype = bf ? DPC_LT_BF16 : DPC_LT_F32;
                g.d.tf32 = kind == 1;
                g.d.epilogue = E[epi];
                tstat t;
                if (!time_gpu(enq_gemm, &g, 0.2, &t))
                    continue;
                double flop = 2.0 * Ms[mi] * Nn * K;
                char name[160];
                snprintf(name, sizeof name, "cuBLASLt %s %s M=%lld", en[epi], nm[kind], (long long)Ms[mi]);
                rec(name, t.med * 1e3, "us", "TFLOP/s", flop / (t.med * 1e-3) / 1e12, tx(&t));
            }
        }
    }
    cu->cuMemFree(a);
    cu->cuMemFree(w);
    cu->cuMemFree(bias);
    cu->cuMemFree(c);
    dpc_lt_destroy(lt);
    return true;
}

/* ---------------------------------------------------------- G4, G5, G6 */

/* A BERT-base encoder layer (post-norm), and a stack of them. */
static void bert_text(char *out, size_t n, int layers) {
    snprintf(out, n,
             "module Layer(d: int = 768, h: int = 12, s: int = 128, f: int = 3072) {\n"
             "    q = Linear(d, d)\n"
             "    k = Linear(d, d)\n"
             "    v = Linear(d, d)\n"
             "    o = Linear(d, d)\n"
             "    ln1 = LayerNorm(d)\n"
             "    ff1 = Linear(d, f)\n"
             "    ff2 = Linear(f, d)\n"
             "    ln2 = LayerNorm(d)\n"
             "    forward(x: [N, s, d]) {\n"
             "        qh = transpose(reshape(q(x), N, s, h, d / h), 1, 2)\n"
             "        kh = permute(reshape(k(x), N, s, h, d / h), 0, 2, 3, 1)\n"
             "        vh = transpose(reshape(v(x), N, s, h, d / h), 1, 2)\n"
             "        att = softmax(qh @ kh * 0.125, -1)\n"
             "        y = reshape(transpose(att @ vh, 1, 2), N, s, d)\n"
             "        x = ln1(x + o(y))\n"
             "        return ln2(x + ff2(gelu(ff1(x))))\n"
             "    }\n"
             "}\n"
             "module Stack(depth: int = %d) {\n"
             "    layers = [Layer() for _ in range(depth)]\n"
             "    forward(x: [N, 128, 768]) {\n"
             "        for blk in layers { x = blk(x) }\n"
             "        return x\n"
             "    }\n"
             "}\n"
             "model = Stack()\n",
             layers);
}

static bool g4(void) {
    json_begin("G4", "BERT-base encoder layer (d 768, 12 heads, FFN 3072, seq 128): latency per layer");
    const int depths[] = {1, 12};
    const int64_t batches[] = {1, 8, 64};
    for (int di = 0; di < 2 && time_left(); di++) {
        char text[4096];
        bert_text(text, sizeof text, depths[di]);
        for (int tf = 0; tf < 3 && time_left(); tf++) { /* f32, TF32, bf16 storage */
            if (tf == 1 && depths[di] == 1)
                continue; /* TF32 on the stack only */
            setenv("DPC_CUDA_TF32", tf == 1 ? "1" : "0", 1);
            open_prec = tf == 2 ? KP_BF16 : KP_F32;
            dpc_model *m = model_open(depths[di] == 1 ? "bert1" : "bert12", text, "cuda:0");
            for (int bi = 0; m && bi < 3 && time_left(); bi++) {
                double eager_ms = 0;
                for (int graph = 0; graph < 2; graph++) {
                    dpc_cuda_bench b;
                    if (!model_time(m, batches[bi], graph, graph == 0, 0.4, &b))
                        break;
                    char name[160];
                    snprintf(name, sizeof name, "%d layer%s %s batch %lld, %s", depths[di], depths[di] > 1 ? "s" : "",
                             (const char *const[]){"f32", "TF32", "bf16"}[tf], (long long)batches[bi],
                             graph ? "CUDA graph" : "step by step");
                    double per_layer_us = b.ms_median * 1e3 / depths[di];
                    if (!graph)
                        eager_ms = b.ms_median;
                    rec(name, per_layer_us, "us/layer", graph ? "graph_speedup" : "host_us_per_layer",
                        graph ? eager_ms / b.ms_median : b.host_us / depths[di], bx(&b));
                }
            }
            dpc_model_free(m);
        }
    }
    open_prec = KP_F32;
    unsetenv("DPC_CUDA_TF32");
    return true;
}

static bool g5(void) {
    json_begin("G5", "data-parallel runtime on one GPU: whole dpc_model_run calls, 64 rows per replica");
    char text[4096];
    bert_text(text, sizeof text, 1);
    static const char *const lists[] = {"cuda:0", "cuda:0,cuda:0", "cuda:0,cuda:0,cuda:0,cuda:0"};
    double t1 = 0;
    for (int k = 0; k < 3 && time_left(); k++) {
        int reps = 1 << k;
        dpc_model *m = model_open("bert_dp", text, lists[k]);
        if (!m)
            break;
        double ts[20];
        int n = 0;
        for (int i = 0; i < 3 + (quick ? 5 : 15); i++) {
            double t = model_run(m, 64 * reps);
            if (t < 0)
                break;
            if (i >= 3)
                ts[n++] = t;
        }
        dpc_model_free(m);
        if (n == 0)
            break;
        qsort(ts, (size_t)n, sizeof(double), cmpd);
        double med = ts[n / 2] * 1e3;
        if (reps == 1)
            t1 = med;
        char name[128], extra[160];
        snprintf(name, sizeof name, "%d replica%s x 64 rows, per forward", reps, reps > 1 ? "s" : "");
        snprintf(extra, sizeof extra, "\"overhead_us_per_replica\": %.4g, \"p10_ms\": %.4g, \"p90_ms\": %.4g",
                 (med - reps * t1) * 1e3 / reps, ts[n / 10] * 1e3, ts[n - 1 - n / 10] * 1e3);
        rec(name, med, "ms", "of_ideal", t1 > 0 ? reps * t1 / med : NAN, extra);
    }
    note("weights are copied host to device once per device; NCCL is not used (one GPU; see docs/cuda.md)");
    return true;
}

static bool g6(void) {
    const dpc_cuda_api *cu = dpc_cuda();
    json_begin("G6", "compile time: front end, NVRTC cold and warm (kernel cache), module load");
    char cache[128];
    snprintf(cache, sizeof cache, "%s/kcache", tmpdir);
    mkdir(cache, 0700);
    setenv("DPC_CACHE_DIR", cache, 1);
    const int depths[] = {1, 12};
    for (int di = 0; di < 2 && time_left(); di++) {
        char text[4096], name[128];
        bert_text(text, sizeof text, depths[di]);
        char *path = write_text("g6", text);
        dpc_model *m = NULL;
        dpc_buf diags;
        dpc_buf_init(&diags);
        dpc_err e;
        double t0 = now_s();
        if (!path || dpc_model_compile(path, &m, &diags, &e) != DPC_OK) {
            note("g6 model: %s", e.msg);
            dpc_buf_free(&diags);
            continue;
        }
        dpc_buf_free(&diags);
        double t_front = now_s() - t0;
        char *src = NULL;
        dpc_cu_plan plan;
        t0 = now_s();
        if (dpc_unit_cuda_program(m->unit, KP_F32, &src, &plan, &e) != DPC_OK) {
            note("g6 emit: %s", e.msg);
            dpc_model_free(m);
            continue;
        }
        double t_emit = now_s() - t0;
        const char *opts[] = {"-lineinfo"};
        dpc_buf img;
        dpc_buf_init(&img);
        bool hit = true;
        t0 = now_s();
        dpc_status s = dpc_nvrtc_compile_cached(src, "Stack.cu", dev.arch, opts, 1, &img, NULL, &hit, &e);
        double t_cold = now_s() - t0;
        t0 = now_s();
        if (s == DPC_OK)
            s = dpc_nvrtc_compile_cached(src, "Stack.cu", dev.arch, opts, 1, &img, NULL, &hit, &e);
        double t_warm = now_s() - t0;
        CUmodule mod = NULL;
        t0 = now_s();
        if (s == DPC_OK && cu->cuModuleLoadDataEx(&mod, img.data, 0, NULL, NULL) != CUDA_SUCCESS)
            mod = NULL;
        double t_load = now_s() - t0;
        if (mod)
            cu->cuModuleUnload(mod);
        if (s != DPC_OK)
            note("g6 NVRTC: %s", e.msg);
        else {
            int nk = plan.nkernels > 0 ? plan.nkernels : 1;
            snprintf(name, sizeof name, "%d layer%s: front end + fusion", depths[di], depths[di] > 1 ? "s" : "");
            rec(name, t_front * 1e3, "ms", NULL, 0, NULL);
            snprintf(name, sizeof name, "%d layer%s: CUDA source + plan", depths[di], depths[di] > 1 ? "s" : "");
            rec(name, t_emit * 1e3, "ms", NULL, 0, NULL);
            char extra[128];
            snprintf(extra, sizeof extra, "\"kernels\": %d, \"source_bytes\": %zu", plan.nkernels, strlen(src));
            snprintf(name, sizeof name, "%d layer%s: NVRTC cold (%d kernels)", depths[di], depths[di] > 1 ? "s" : "",
                     plan.nkernels);
            rec(name, t_cold * 1e3, "ms", "ms_per_kernel", t_cold * 1e3 / nk, extra);
            snprintf(name, sizeof name, "%d layer%s: kernel cache hit%s", depths[di], depths[di] > 1 ? "s" : "",
                     hit ? "" : " (MISSED)");
            rec(name, t_warm * 1e3, "ms", NULL, 0, NULL);
            snprintf(name, sizeof name, "%d layer%s: module load", depths[di], depths[di] > 1 ? "s" : "");
            rec(name, t_load * 1e3, "ms", "us_per_kernel", t_load * 1e6 / nk, NULL);
        }
        dpc_buf_free(&img);
        free(src);
        dpc_cu_plan_free(&plan);
        dpc_model_free(m);
    }
    note("NVRTC compiles one program per model; 'warm' is a cache hit in the same process");
    return true;
}

/* ---------------------------------------------------------- main */

int main(int argc, char **argv) {
    const char *only = NULL;
    outdir = getenv("OUT") && *getenv("OUT") ? getenv("OUT") : ".";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            outdir = argv[++i];
        else if (strcmp(argv[i], "--deadline") == 0 && i + 1 < argc)
            deadline = atof(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else {
            fprintf(stderr, "usage: bench_gpu [--out DIR] [--deadline SECONDS] [--only G1,G4] [--quick]\n");
            return 2;
        }
    }
    t_start = now_s();
    dpc_err e;
    if (dpc_cuda_device_count() == 0) {
        dpc_cuda_load(&e);
        printf("no CUDA device: %s\n", e.msg);
        return SKIP;
    }
    if (dpc_cuda_device_info(0, &dev, &e) != DPC_OK || dpc_cuda_context(0, &ctx, &e) != DPC_OK ||
        DPC_CU(&e, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) != DPC_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        return 1;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dpc-bench-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    mkdir(outdir, 0755);
    dpc_buf_init(&table);
    dpc_buf_init(&json);
    printf("bench_gpu: %s (%s, %d SMs, %.0f GiB), deadline %.0f s\n", dev.name, dev.arch, dev.sm_count,
           dev.total_mem / 1073741824.0, deadline);
    static const struct {
        const char *name;
        bool (*fn)(void);
    } order[] = {{"G1", g1}, {"G4", g4}, {"G2", g2}, {"G3", g3}, {"G6", g6}, {"G5", g5}};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        if (only && !strstr(only, order[i].name))
            continue;
        if (!time_left()) {
            dpc_buf_printf(&table, "\n%s  skipped: past the deadline\n", order[i].name);
            continue;
        }
        double t0 = now_s();
        bool ok = order[i].fn();
        if (!ok)
            note("%s stopped early", order[i].name);
        json_end(order[i].name);
        fprintf(stderr, "bench: %s done in %.1f s\n", order[i].name, now_s() - t0);
    }
    printf("%s\n", table.data ? table.data : "");
    printf("bench_gpu: %.1f s in all; JSON in %s\n", now_s() - t_start, outdir);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench: could not remove %s\n", tmpdir);
    return 0;
}
