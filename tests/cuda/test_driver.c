/* test_driver.c - the dlopen'ed CUDA driver, and on a GPU the whole device
 * path: NVRTC images loaded and launched, CUDA graphs, cuBLASLt GEMMs with
 * epilogues, and sticky-error detection.
 *
 *     test_driver nodriver   DPC_CUDA_DRIVER names a missing library: clear
 *                            error, zero devices, error helpers (any machine)
 *     test_driver stub       DPC_CUDA_DRIVER is the toolkit's stub libcuda: a
 *                            driver that cannot initialise (skips without it)
 *     test_driver fake       DPC_CUDA_DRIVER is fake_libcuda.so: the loading
 *                            path, device queries and contexts (any machine;
 *                            FAKE_CUDA_MODE=ok|old|nodevice)
 *     test_driver probe      whatever this machine has, reported consistently
 *     test_driver gpu        the device path (exit 77 without a GPU)
 *     test_driver fault      an illegal address is caught and classed sticky
 *                            (exit 77 without a GPU; poisons its process)
 */
#define _GNU_SOURCE
#include "cublaslt.h"
#include "cuda_driver.h"
#include "kcache.h"
#include "nvrtc_compile.h"

#include "kernels.h"
#include "../check.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>



/* ---- without a driver ---- */

static void *load_in_thread(void *arg) {
    dpc_err *e = arg;
    dpc_cuda_load(e);
    return NULL;
}

static void check_error_helpers(void) {
    CHECK(dpc_cuda_is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS), "illegal address");
    CHECK(dpc_cuda_is_sticky(CUDA_ERROR_LAUNCH_FAILED), "launch failed");
    CHECK(dpc_cuda_is_sticky(CUDA_ERROR_ILLEGAL_INSTRUCTION), "illegal instruction");
    CHECK(dpc_cuda_is_sticky(CUDA_ERROR_MISALIGNED_ADDRESS), "misaligned");
    CHECK(dpc_cuda_is_sticky(CUDA_ERROR_HARDWARE_STACK_ERROR), "stack");
    CHECK(dpc_cuda_is_sticky(CUDA_ERROR_INVALID_PC), "invalid pc");
    CHECK(dpc_cuda_is_sticky(CUDA_ERROR_ASSERT), "assert");
    CHECK(!dpc_cuda_is_sticky(CUDA_ERROR_OUT_OF_MEMORY), "OOM is not sticky");
    CHECK(!dpc_cuda_is_sticky(CUDA_ERROR_INVALID_VALUE), "invalid value is not sticky");
    CHECK(!dpc_cuda_is_sticky(CUDA_ERROR_INVALID_IMAGE), "invalid image is not sticky");
    CHECK(!dpc_cuda_is_sticky(CUDA_SUCCESS), "success is not sticky");

    CHECK(strcmp(dpc_cuda_error_name(CUDA_ERROR_OUT_OF_MEMORY), "CUDA_ERROR_OUT_OF_MEMORY") == 0,
          "name");
    CHECK(strcmp(dpc_cuda_error_name(CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
                 "CUDA_ERROR_UNSUPPORTED_PTX_VERSION") == 0,
          "name");
    CHECK(dpc_cuda_error_name((CUresult)123456) != NULL, "unknown name");

    dpc_err e = {0};
    CHECK(dpc_cuda_check(CUDA_SUCCESS, "cuInit(0)", &e) == DPC_OK, "success");
    dpc_status s = dpc_cuda_check(CUDA_ERROR_ILLEGAL_ADDRESS, "cuCtxSynchronize()", &e);
    printf("sticky error message: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && e.code == DPC_EDEVICE, "status");
    CHECK(strncmp(e.msg, "cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)", 56) == 0,
          "message: %s", e.msg);
    CHECK(strstr(e.msg, "sticky"), "sticky note missing: %s", e.msg);
    s = dpc_cuda_check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc(&p, n)", &e);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY") &&
              !strstr(e.msg, "sticky"),
          "message: %s", e.msg);

    CHECK(strcmp(dpc_lt_status_name(15), "CUBLAS_STATUS_NOT_SUPPORTED") == 0, "cublas name");
    CHECK(strcmp(dpc_lt_status_name(12345), "CUBLAS_STATUS_UNKNOWN") == 0, "cublas unknown");
    CHECK(dpc_lt_version() > 0, "cublasLt version");
}

static int main_nodriver(void) {
    const char *lib = getenv("DPC_CUDA_DRIVER");
    if (!lib || access(lib, F_OK) == 0) {
        fprintf(stderr, "set DPC_CUDA_DRIVER to a missing library for this test\n");
        return 1;
    }
    /* Several threads race to load: one load, one answer. */
    dpc_err te[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, load_in_thread, &te[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);

    dpc_err e = {0};
    dpc_status s = dpc_cuda_load(&e);
    printf("dpc_cuda_load: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && e.code == DPC_EDEVICE, "status %d", (int)s);
    CHECK(strncmp(e.msg, "no CUDA driver (", 16) == 0 && strstr(e.msg, "not found)"),
          "message: %s", e.msg);
    for (int i = 0; i < 4; i++)
        CHECK(te[i].code == DPC_EDEVICE && strcmp(te[i].msg, e.msg) == 0, "thread %d: %s", i,
              te[i].msg);
    CHECK(dpc_cuda() == NULL, "API table without a driver");
    CHECK(dpc_cuda_device_count() == 0, "devices without a driver");
    CHECK(dpc_cuda_driver_version() == 0, "driver version without a driver");
    CHECK(dpc_cuda_load(NULL) == DPC_EDEVICE, "NULL err");

    dpc_cuda_device dev;
    s = dpc_cuda_device_info(0, &dev, &e);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "no CUDA driver"), "device info: %s", e.msg);
    CUcontext ctx = (CUcontext)1;
    s = dpc_cuda_context(0, &ctx, &e);
    CHECK(s == DPC_EDEVICE && ctx == NULL, "context: %s", e.msg);
    dpc_lt *lt = (dpc_lt *)1;
    s = dpc_lt_create(&lt, NULL, &e);
    CHECK(s == DPC_EDEVICE && lt == NULL && strstr(e.msg, "no CUDA driver"), "cuBLASLt: %s",
          e.msg);
    dpc_cuda_release_contexts(); /* harmless without a driver */

    check_error_helpers();
    return finish("nodriver");
}

/* NVRTC and cuBLASLt are dlopen'ed, not linked: with DPC_NVRTC_LIBRARY and
 * DPC_CUBLASLT_LIBRARY naming missing files (and a pretend driver that
 * loads), each use is one clear DPC_EDEVICE naming the library and its
 * variable, never a crash. */
static int main_nolibs(void) {
    const char *nv = getenv("DPC_NVRTC_LIBRARY"), *lt_lib = getenv("DPC_CUBLASLT_LIBRARY");
    if (!nv || access(nv, F_OK) == 0 || !lt_lib || access(lt_lib, F_OK) == 0) {
        fprintf(stderr, "set DPC_NVRTC_LIBRARY and DPC_CUBLASLT_LIBRARY to missing files for this test\n");
        return 1;
    }
    dpc_err e = {0};
    dpc_status s = dpc_nvrtc_load(&e);
    printf("dpc_nvrtc_load: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "NVRTC could not be loaded") && strstr(e.msg, nv) &&
              strstr(e.msg, "DPC_NVRTC_LIBRARY"),
          "message: %s", e.msg);
    dpc_buf img;
    dpc_buf_init(&img);
    e = (dpc_err){0};
    s = dpc_nvrtc_compile("__global__ void k() {}", "k.cu", "sm_90", NULL, 0, &img, NULL, &e);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "DPC_NVRTC_LIBRARY") && img.len == 0, "compile: %s", e.msg);
    bool hit = true;
    e = (dpc_err){0};
    s = dpc_nvrtc_compile_cached("__global__ void k() {}", "k.cu", "compute_90", NULL, 0, &img, NULL, &hit, &e);
    CHECK(s == DPC_EDEVICE && !hit && strstr(e.msg, "DPC_NVRTC_LIBRARY"), "cached compile: %s", e.msg);
    dpc_buf_free(&img);
    int major = -1, minor = -1;
    dpc_nvrtc_version(&major, &minor);
    CHECK(major == 0 && minor == 0, "version %d.%d", major, minor);
    CHECK(dpc_nvrtc_newest_arch(90) == 0, "newest arch without NVRTC");
    CHECK(strcmp(dpc_nvrtc_result_name(6), "NVRTC_ERROR_UNKNOWN") == 0, "result name without NVRTC");

    CHECK(dpc_lt_version() == 0, "cuBLASLt version without cuBLASLt");
    s = dpc_cuda_load(&e);
    CHECK(s == DPC_OK, "the pretend driver: %s", e.msg);
    dpc_lt *lt = (dpc_lt *)1;
    e = (dpc_err){0};
    s = dpc_lt_create(&lt, NULL, &e);
    printf("dpc_lt_create: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && lt == NULL && strstr(e.msg, "cuBLASLt could not be loaded") &&
              strstr(e.msg, lt_lib) && strstr(e.msg, "DPC_CUBLASLT_LIBRARY"),
          "cuBLASLt: %s", e.msg);
    return finish("nolibs");
}

static int main_stub(void) {
    const char *lib = getenv("DPC_CUDA_DRIVER");
    if (!lib || access(lib, R_OK) != 0) {
        printf("skip: no stub driver at %s\n", lib ? lib : "(DPC_CUDA_DRIVER unset)");
        return SKIP;
    }
    dpc_err e = {0};
    dpc_status s = dpc_cuda_load(&e);
    printf("dpc_cuda_load with the stub driver: %s\n", s == DPC_OK ? "ok" : e.msg);
    CHECK(s == DPC_EDEVICE, "the stub driver loaded");
    CHECK(strstr(e.msg, "CUDA_ERROR_STUB_LIBRARY"), "message: %s", e.msg);
    CHECK(dpc_cuda() == NULL && dpc_cuda_device_count() == 0, "stub has devices");
    return finish("stub");
}

/* Mirrors fake_libcuda.c. */
struct fake_cuda_stats {
    int getproc_calls, bad_requests, retains, releases, init_calls;
};

static int main_fake(void) {
    const char *lib = getenv("DPC_CUDA_DRIVER");
    const char *mode = getenv("FAKE_CUDA_MODE");
    mode = mode ? mode : "ok";
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        fprintf(stderr, "cannot open the fake driver %s\n", lib ? lib : "(unset)");
        return 1;
    }
    struct fake_cuda_stats *st = dlsym(h, "fake_cuda_stats");
    CHECK(st != NULL, "no stats in the fake driver");
    if (!st)
        return finish("fake");

    dpc_err e = {0};
    dpc_status s = dpc_cuda_load(&e);
    printf("fake driver (%s): %s\n", mode, s == DPC_OK ? "loaded" : e.msg);
    if (strcmp(mode, "old") == 0) {
        CHECK(s == DPC_EDEVICE && strstr(e.msg, "too old") && strstr(e.msg, "11.8"), "%s", e.msg);
        CHECK(dpc_cuda() == NULL && dpc_cuda_device_count() == 0, "old driver usable");
        CHECK(dpc_cuda_driver_version() == 11080, "version %d", dpc_cuda_driver_version());
        dlclose(h);
        return finish("fake old");
    }
    if (strcmp(mode, "nodevice") == 0) {
        CHECK(s == DPC_EDEVICE && strstr(e.msg, "cuInit failed: CUDA_ERROR_NO_DEVICE (100)") &&
                  strstr(e.msg, "no CUDA-capable device"),
              "%s", e.msg);
        CHECK(dpc_cuda() == NULL && dpc_cuda_device_count() == 0, "no-device driver usable");
        dlclose(h);
        return finish("fake nodevice");
    }
    CHECK(s == DPC_OK, "load: %s", e.msg);
    if (s != DPC_OK) {
        dlclose(h);
        return finish("fake");
    }
    /* Every entry point came through cuGetProcAddress, by base name, with
     * the toolkit's version and the legacy-stream flag. */
    int nfuncs = 0;
#define COUNT_(name) nfuncs++;
    DPC_CUDA_FUNCS(COUNT_)
#undef COUNT_
    CHECK(st->getproc_calls == nfuncs, "%d lookups for %d functions", st->getproc_calls, nfuncs);
    CHECK(st->bad_requests == 0, "%d versioned or malformed lookups", st->bad_requests);
    CHECK(st->init_calls == 1, "cuInit called %d times", st->init_calls);
    CHECK(dpc_cuda_driver_version() == 13000, "version");
    CHECK(dpc_cuda_device_count() == 2, "count %d", dpc_cuda_device_count());

    dpc_cuda_device dev;
    s = dpc_cuda_device_info(1, &dev, &e);
    CHECK(s == DPC_OK, "info: %s", e.msg);
    CHECK(strcmp(dev.name, "Fake H200") == 0 && strcmp(dev.arch, "sm_90") == 0 &&
              dev.cc_major == 9 && dev.cc_minor == 0 && dev.sm_count == 132 &&
              dev.total_mem == (size_t)141 << 30 && dev.ordinal == 1,
          "device: %s %s %d.%d", dev.name, dev.arch, dev.cc_major, dev.cc_minor);
    CHECK(dpc_cuda_device_info(2, &dev, &e) == DPC_EUSAGE && strstr(e.msg, "has 2"), "%s",
          e.msg);
    CHECK(dpc_cuda_device_info(-1, &dev, &e) == DPC_EUSAGE, "negative ordinal");

    /* Primary contexts: retained once per device, however often asked. */
    CUcontext c0, c0b, c1;
    CHECK(dpc_cuda_context(0, &c0, &e) == DPC_OK, "%s", e.msg);
    CHECK(dpc_cuda_context(0, &c0b, &e) == DPC_OK && c0b == c0, "context changed");
    CHECK(dpc_cuda_context(1, &c1, &e) == DPC_OK && c1 != c0, "device 1");
    CHECK(st->retains == 2, "%d retains", st->retains);
    CHECK(dpc_cuda_context(5, &c1, &e) == DPC_EUSAGE && c1 == NULL, "device 5");

    /* Calls through the table, checked. */
    CUdeviceptr p = 0;
    CHECK(DPC_CU(&e, cuMemAlloc(&p, 256)) == DPC_OK && p != 0, "alloc");
    s = DPC_CU(&e, cuMemAlloc(&p, (size_t)1 << 45));
    printf("  %s\n", e.msg);
    CHECK(s == DPC_EDEVICE &&
              strcmp(e.msg, "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory") == 0,
          "%s", e.msg);
    s = DPC_CU(&e, cuCtxSynchronize());
    printf("  %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS") &&
              strstr(e.msg, "illegal memory access") && strstr(e.msg, "sticky"),
          "%s", e.msg);
    s = DPC_CU(&e, cuStreamSynchronize(NULL));
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "cuStreamSynchronize failed: CUDA_ERROR_NOT_SUPPORTED"),
          "%s", e.msg);
    /* Names the driver knows and dpc does not. */
    CHECK(strcmp(dpc_cuda_error_name((CUresult)4242), "CUDA_ERROR_FAKE_ONLY_THE_DRIVER_KNOWS") == 0,
          "driver name");

    dpc_cuda_release_contexts();
    CHECK(st->releases == 2, "%d releases", st->releases);
    dpc_cuda_release_contexts();
    CHECK(st->releases == 2, "released twice");
    dlclose(h);
    return finish("fake");
}

static int main_probe(void) {
    dpc_err e = {0};
    dpc_status s = dpc_cuda_load(&e);
    int n = dpc_cuda_device_count();
    if (s != DPC_OK) {
        printf("no usable CUDA driver: %s\n", e.msg);
        CHECK(n == 0, "%d devices without a driver", n);
        CHECK(e.msg[0] != 0, "empty message");
        return finish("probe");
    }
    printf("CUDA driver %d, %d device(s)\n", dpc_cuda_driver_version(), n);
    CHECK(dpc_cuda_driver_version() >= 12000, "driver version %d", dpc_cuda_driver_version());
    for (int i = 0; i < n; i++) {
        dpc_cuda_device dev;
        s = dpc_cuda_device_info(i, &dev, &e);
        CHECK(s == DPC_OK, "device %d: %s", i, e.msg);
        if (s == DPC_OK)
            printf("  %d: %s, %s, %.1f GiB, %d SMs\n", i, dev.name, dev.arch,
                   dev.total_mem / 1073741824.0, dev.sm_count);
    }
    dpc_cuda_device dev;
    CHECK(dpc_cuda_device_info(n, &dev, &e) == DPC_EUSAGE, "device %d exists?", n);
    return finish("probe");
}

/* ---- with a GPU ---- */

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (2.0 / 16777216.0) - 1.0);
}

static uint16_t f2bf(float f) { /* round to nearest even */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t f2h(float f) { /* IEEE half, round to nearest, for |f| < 65504 */
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t mant = u & 0x7fffff;
    if (exp <= 0) { /* subnormal or zero */
        if (exp < -10)
            return (uint16_t)sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = mant >> shift;
        if ((mant >> (shift - 1)) & 1)
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
    if (mant & 0x1000)
        h++;
    return (uint16_t)h;
}
static float h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float f;
    if (exp == 0)
        f = ldexpf((float)mant, -24);
    else
        f = ldexpf((float)(mant | 0x400), (int)exp - 25);
    uint32_t u;
    memcpy(&u, &f, 4);
    u |= sign;
    memcpy(&f, &u, 4);
    return f;
}

static double gelu_ref(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

typedef struct gpu {
    const dpc_cuda_api *cu;
    dpc_cuda_device dev;
    CUstream stream;
    dpc_err e;
} gpu;

#define CU_OK(g, call)                                                                             \
    do {                                                                                           \
        if (DPC_CU(&(g)->e, call) != DPC_OK) {                                                     \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, (g)->e.msg);                   \
            failures++;                                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* Compiles src for the device (CUBIN, or PTX for the driver to JIT) and
 * loads it. */
static bool load_module(gpu *g, const char *src, const char *name, bool ptx, CUmodule *mod) {
    char arch[32];
    snprintf(arch, sizeof arch, "%s_%d%d", ptx ? "compute" : "sm", g->dev.cc_major,
             g->dev.cc_minor);
    dpc_buf img;
    dpc_buf_init(&img);
    bool hit = false;
    dpc_status s = dpc_nvrtc_compile_cached(src, name, arch, NULL, 0, &img, NULL, &hit, &g->e);
    CHECK(s == DPC_OK, "compile %s for %s: %s", name, arch, g->e.msg);
    if (s != DPC_OK)
        return false;
    s = DPC_CU(&g->e, cuModuleLoadDataEx(mod, img.data, 0, NULL, NULL));
    CHECK(s == DPC_OK, "load %s: %s", name, g->e.msg);
    dpc_buf_free(&img);
    return s == DPC_OK;
}

static void gpu_elementwise(gpu *g) {
    CUmodule mod;
    if (!load_module(g, KERNEL_GELU_F4, "fused_gelu_f4.cu", false, &mod))
        return;
    CUfunction fn;
    CU_OK(g, cuModuleGetFunction(&fn, mod, "fused_gelu_f4"));
    long long n = 1 << 22, n4 = n / 4;
    size_t bytes = (size_t)n * sizeof(float);
    float *x = malloc(bytes), *r = malloc(bytes), *y = malloc(bytes);
    for (long long i = 0; i < n; i++)
        x[i] = 3 * frand(), r[i] = frand();
    CUdeviceptr dx, dr, dy;
    CU_OK(g, cuMemAlloc(&dx, bytes));
    CU_OK(g, cuMemAlloc(&dr, bytes));
    CU_OK(g, cuMemAlloc(&dy, bytes));
    CU_OK(g, cuMemcpyHtoDAsync(dx, x, bytes, g->stream));
    CU_OK(g, cuMemcpyHtoDAsync(dr, r, bytes, g->stream));
    CU_OK(g, cuMemsetD8Async(dy, 0xff, bytes, g->stream));
    float s = 0.5f, b = 0.25f;
    void *args[] = {&dy, &dx, &dr, &s, &b, &n4};
    unsigned grid = (unsigned)g->dev.sm_count * 4, block = 256;
    CUevent t0, t1;
    CU_OK(g, cuEventCreate(&t0, CU_EVENT_DEFAULT));
    CU_OK(g, cuEventCreate(&t1, CU_EVENT_DEFAULT));
    CU_OK(g, cuEventRecord(t0, g->stream));
    CU_OK(g, cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, g->stream, args, NULL));
    CU_OK(g, cuEventRecord(t1, g->stream));
    CU_OK(g, cuMemcpyDtoHAsync(y, dy, bytes, g->stream));
    CU_OK(g, cuStreamSynchronize(g->stream));
    float ms = 0;
    CU_OK(g, cuEventElapsedTime(&ms, t0, t1));
    printf("  gelu chain on %lld floats: %.3f ms (%.0f GB/s)\n", n, ms, 3.0 * bytes / ms / 1e6);
    int bad = 0;
    for (long long i = 0; i < n && bad < 5; i++) {
        double want = gelu_ref((double)x[i] * s + b) + r[i];
        if (fabs(y[i] - want) > 1e-5 + 1e-5 * fabs(want)) {
            fprintf(stderr, "  y[%lld] = %g, want %g\n", i, y[i], want);
            bad++;
        }
    }
    CHECK(bad == 0, "elementwise kernel is wrong");
    g->cu->cuEventDestroy(t0);
    g->cu->cuEventDestroy(t1);
    g->cu->cuMemFree(dx);
    g->cu->cuMemFree(dr);
    g->cu->cuMemFree(dy);
    g->cu->cuModuleUnload(mod);
    free(x), free(r), free(y);
}

static void cpu_softmax(float *out, const float *in, int N, int C) {
    for (int i = 0; i < N; i++) {
        const float *x = in + (size_t)i * C;
        double m = -INFINITY, sum = 0;
        for (int j = 0; j < C; j++)
            m = fmax(m, x[j]);
        for (int j = 0; j < C; j++)
            sum += exp(x[j] - m);
        for (int j = 0; j < C; j++)
            out[(size_t)i * C + j] = (float)(exp(x[j] - m) / sum);
    }
}

/* Softmax launched directly, then the same launches captured in a CUDA graph
 * and replayed. */
static void gpu_softmax_graph(gpu *g) {
    CUmodule mod;
    if (!load_module(g, KERNEL_SOFTMAX, "softmax_rows.cu", false, &mod))
        return;
    CUfunction fn;
    CU_OK(g, cuModuleGetFunction(&fn, mod, "softmax_rows"));
    int N = 4096, C = 1000;
    size_t bytes = (size_t)N * C * sizeof(float);
    float *x = malloc(bytes), *y = malloc(bytes), *want = malloc(bytes);
    for (size_t i = 0; i < (size_t)N * C; i++)
        x[i] = 8 * frand();
    cpu_softmax(want, x, N, C);
    CUdeviceptr dx, dy;
    CU_OK(g, cuMemAlloc(&dx, bytes));
    CU_OK(g, cuMemAlloc(&dy, bytes));
    CU_OK(g, cuMemcpyHtoD(dx, x, bytes));
    void *args[] = {&dy, &dx, &N, &C};
    unsigned block = 128, grid = (unsigned)((N + 3) / 4);
    CU_OK(g, cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, g->stream, args, NULL));
    CU_OK(g, cuStreamSynchronize(g->stream));
    CU_OK(g, cuMemcpyDtoH(y, dy, bytes));
    double worst = 0;
    for (size_t i = 0; i < (size_t)N * C; i++)
        worst = fmax(worst, fabs(y[i] - want[i]));
    printf("  softmax %dx%d: max error %.2e\n", N, C, worst);
    CHECK(worst < 1e-6, "softmax error %g", worst);

    /* 20 launches captured once, replayed. */
    CU_OK(g, cuMemsetD8Async(dy, 0, bytes, g->stream));
    CUgraph graph;
    CUgraphExec exec;
    CU_OK(g, cuStreamBeginCapture(g->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (int i = 0; i < 20; i++)
        CU_OK(g, cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, g->stream, args, NULL));
    CU_OK(g, cuStreamEndCapture(g->stream, &graph));
    CU_OK(g, cuGraphInstantiate(&exec, graph, 0));
    CUevent t0, t1;
    CU_OK(g, cuEventCreate(&t0, CU_EVENT_DEFAULT));
    CU_OK(g, cuEventCreate(&t1, CU_EVENT_DEFAULT));
    CU_OK(g, cuGraphLaunch(exec, g->stream)); /* warm-up */
    CU_OK(g, cuEventRecord(t0, g->stream));
    CU_OK(g, cuGraphLaunch(exec, g->stream));
    CU_OK(g, cuEventRecord(t1, g->stream));
    CU_OK(g, cuEventSynchronize(t1));
    float ms = 0;
    CU_OK(g, cuEventElapsedTime(&ms, t0, t1));
    printf("  graph of 20 softmax launches: %.3f ms\n", ms);
    memset(y, 0, bytes);
    CU_OK(g, cuMemcpyDtoH(y, dy, bytes));
    worst = 0;
    for (size_t i = 0; i < (size_t)N * C; i++)
        worst = fmax(worst, fabs(y[i] - want[i]));
    CHECK(worst < 1e-6, "graph softmax error %g", worst);

    /* Device-to-device copy. */
    CU_OK(g, cuMemcpyDtoDAsync(dx, dy, bytes, g->stream));
    CU_OK(g, cuStreamSynchronize(g->stream));
    CU_OK(g, cuMemcpyDtoH(x, dx, bytes));
    CHECK(memcmp(x, y, bytes) == 0, "DtoD copy differs");

    g->cu->cuEventDestroy(t0);
    g->cu->cuEventDestroy(t1);
    g->cu->cuGraphExecDestroy(exec);
    g->cu->cuGraphDestroy(graph);
    g->cu->cuMemFree(dx);
    g->cu->cuMemFree(dy);
    g->cu->cuModuleUnload(mod);
    free(x), free(y), free(want);
}

/* bf16 through PTX that the driver JIT-compiles. */
static void gpu_bf16_ptx(gpu *g) {
    CUmodule mod;
    if (!load_module(g, KERNEL_BF16, "scale_add_bf16.cu", true, &mod))
        return;
    CUfunction fn;
    CU_OK(g, cuModuleGetFunction(&fn, mod, "scale_add_bf16"));
    int n = 1 << 16;
    size_t bytes = (size_t)n * 2;
    uint16_t *x = malloc(bytes), *r = malloc(bytes), *y = malloc(bytes);
    for (int i = 0; i < n; i++)
        x[i] = f2bf(frand()), r[i] = f2bf(frand());
    CUdeviceptr dx, dr, dy;
    CU_OK(g, cuMemAlloc(&dx, bytes));
    CU_OK(g, cuMemAlloc(&dr, bytes));
    CU_OK(g, cuMemAlloc(&dy, bytes));
    CU_OK(g, cuMemcpyHtoD(dx, x, bytes));
    CU_OK(g, cuMemcpyHtoD(dr, r, bytes));
    float s = 1.5f;
    void *args[] = {&dy, &dx, &dr, &s, &n};
    CU_OK(g, cuLaunchKernel(fn, (unsigned)(n / 2 + 255) / 256, 1, 1, 256, 1, 1, 0, g->stream, args,
                            NULL));
    CU_OK(g, cuStreamSynchronize(g->stream));
    CU_OK(g, cuMemcpyDtoH(y, dy, bytes));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        float want = bf2f(x[i]) * s + bf2f(r[i]);
        if (fabsf(bf2f(y[i]) - want) > 1e-2f * fmaxf(1.0f, fabsf(want)))
            bad++;
    }
    CHECK(bad == 0, "%d bf16 results wrong", bad);
    g->cu->cuMemFree(dx);
    g->cu->cuMemFree(dr);
    g->cu->cuMemFree(dy);
    g->cu->cuModuleUnload(mod);
    free(x), free(r), free(y);
}

/* ---- cuBLASLt ---- */

typedef struct gemm_case {
    const char *what;
    dpc_lt_gemm_desc d;
    double tol;
} gemm_case;

/* A GEMM's leading dimensions and batch strides with the defaults filled in
 * (as cublaslt.c reads them), and the elements each operand spans. */
typedef struct gemm_shape {
    int batch;
    int64_t lda, ldb, ldc, sa, sb, sc;
    size_t na, nb, nc;
} gemm_shape;

static gemm_shape shape_of(const dpc_lt_gemm_desc *d) {
    gemm_shape s;
    s.batch = d->batch > 1 ? d->batch : 1;
    int64_t rows_a = d->transA ? d->K : d->M, rows_b = d->transB ? d->N : d->K;
    s.lda = d->lda ? d->lda : (d->transA ? d->M : d->K);
    s.ldb = d->ldb ? d->ldb : (d->transB ? d->K : d->N);
    s.ldc = d->ldc ? d->ldc : d->N;
    s.sa = d->strideA ? d->strideA : rows_a * s.lda;
    s.sb = d->strideB ? d->strideB : rows_b * s.ldb;
    s.sc = d->strideC ? d->strideC : d->M * s.ldc;
    s.na = (size_t)((s.batch - 1) * s.sa + rows_a * s.lda);
    s.nb = (size_t)((s.batch - 1) * s.sb + rows_b * s.ldb);
    s.nc = (size_t)((s.batch - 1) * s.sc + d->M * s.ldc);
    return s;
}

static void gemm_ref(const dpc_lt_gemm_desc *d, const float *A, const float *B, const float *bias,
                     float *C) {
    gemm_shape g = shape_of(d);
    double alpha = d->alpha != 0 ? d->alpha : 1;
    for (int bi = 0; bi < g.batch; bi++)
        for (int64_t m = 0; m < d->M; m++)
            for (int64_t n = 0; n < d->N; n++) {
                double acc = 0;
                for (int64_t k = 0; k < d->K; k++) {
                    double a = d->transA ? A[bi * g.sa + k * g.lda + m] : A[bi * g.sa + m * g.lda + k];
                    double b = d->transB ? B[bi * g.sb + n * g.ldb + k] : B[bi * g.sb + k * g.ldb + n];
                    acc += a * b;
                }
                float *c = &C[bi * g.sc + m * g.ldc + n];
                double v = alpha * acc + d->beta * *c;
                if (d->epilogue != DPC_LT_EPI_NONE)
                    v += bias[n];
                if (d->epilogue == DPC_LT_EPI_RELU_BIAS)
                    v = v > 0 ? v : 0;
                if (d->epilogue == DPC_LT_EPI_GELU_BIAS)
                    v = gelu_ref(v);
                *c = (float)v;
            }
}

static size_t esize(dpc_lt_dtype t) { return t == DPC_LT_F32 ? 4 : 2; }

/* Host floats to the dtype's bytes, and back (so the reference sees the
 * rounded inputs). */
static void *to_dtype(float *v, size_t n, dpc_lt_dtype t) {
    void *out = malloc(n * esize(t));
    for (size_t i = 0; i < n; i++) {
        if (t == DPC_LT_F32) {
            ((float *)out)[i] = v[i];
        } else if (t == DPC_LT_BF16) {
            ((uint16_t *)out)[i] = f2bf(v[i]);
            v[i] = bf2f(((uint16_t *)out)[i]);
        } else {
            ((uint16_t *)out)[i] = f2h(v[i]);
            v[i] = h2f(((uint16_t *)out)[i]);
        }
    }
    return out;
}
static float from_dtype(const void *p, size_t i, dpc_lt_dtype t) {
    if (t == DPC_LT_F32)
        return ((const float *)p)[i];
    if (t == DPC_LT_BF16)
        return bf2f(((const uint16_t *)p)[i]);
    return h2f(((const uint16_t *)p)[i]);
}

static void gpu_gemm_case(gpu *g, dpc_lt *lt, const gemm_case *c) {
    const dpc_lt_gemm_desc *d = &c->d;
    gemm_shape sh = shape_of(d);
    size_t na = sh.na, nb = sh.nb, nc = sh.nc;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *bias = malloc((size_t)d->N * 4),
          *C = malloc(nc * 4), *out = malloc(nc * esize(d->dtype));
    for (size_t i = 0; i < na; i++)
        A[i] = frand();
    for (size_t i = 0; i < nb; i++)
        B[i] = frand();
    for (int64_t i = 0; i < d->N; i++)
        bias[i] = frand();
    for (size_t i = 0; i < nc; i++)
        C[i] = frand();
    void *hA = to_dtype(A, na, d->dtype), *hB = to_dtype(B, nb, d->dtype),
         *hbias = to_dtype(bias, (size_t)d->N, d->dtype), *hC = to_dtype(C, nc, d->dtype);
    CUdeviceptr dA, dB, dbias, dC;
    CU_OK(g, cuMemAlloc(&dA, na * esize(d->dtype)));
    CU_OK(g, cuMemAlloc(&dB, nb * esize(d->dtype)));
    CU_OK(g, cuMemAlloc(&dbias, (size_t)d->N * esize(d->dtype)));
    CU_OK(g, cuMemAlloc(&dC, nc * esize(d->dtype)));
    CU_OK(g, cuMemcpyHtoD(dA, hA, na * esize(d->dtype)));
    CU_OK(g, cuMemcpyHtoD(dB, hB, nb * esize(d->dtype)));
    CU_OK(g, cuMemcpyHtoD(dbias, hbias, (size_t)d->N * esize(d->dtype)));
    CU_OK(g, cuMemcpyHtoD(dC, hC, nc * esize(d->dtype)));
    dpc_err e = {0};
    dpc_status s = dpc_lt_gemm(lt, d, (void *)(uintptr_t)dA, (void *)(uintptr_t)dB,
                               d->epilogue ? (void *)(uintptr_t)dbias : NULL,
                               (void *)(uintptr_t)dC, g->stream, &e);
    CHECK(s == DPC_OK, "%s: %s", c->what, e.msg);
    CU_OK(g, cuStreamSynchronize(g->stream));
    CU_OK(g, cuMemcpyDtoH(out, dC, nc * esize(d->dtype)));
    gemm_ref(d, A, B, bias, C);
    double worst = 0;
    for (size_t i = 0; i < nc; i++)
        worst = fmax(worst, fabs(from_dtype(out, i, d->dtype) - C[i]) / fmax(1.0, fabs(C[i])));
    printf("  GEMM %-28s max rel error %.2e (tol %.0e)\n", c->what, worst, c->tol);
    CHECK(s != DPC_OK || worst <= c->tol, "%s: error %g", c->what, worst);
    g->cu->cuMemFree(dA);
    g->cu->cuMemFree(dB);
    g->cu->cuMemFree(dbias);
    g->cu->cuMemFree(dC);
    free(A), free(B), free(bias), free(C), free(out), free(hA), free(hB), free(hbias), free(hC);
}

static void gpu_gemm(gpu *g) {
    dpc_lt *lt;
    dpc_err e = {0};
    dpc_status s = dpc_lt_create(&lt, g->stream, &e);
    CHECK(s == DPC_OK, "dpc_lt_create: %s", e.msg);
    if (s != DPC_OK)
        return;
    printf("  cuBLASLt %zu\n", dpc_lt_version());
    gemm_case cases[] = {
        {"f32 Linear+bias (transB)",
         {.M = 64, .N = 96, .K = 128, .transB = true, .dtype = DPC_LT_F32,
          .epilogue = DPC_LT_EPI_BIAS},
         1e-5},
        {"f32 relu(bias)", {.M = 33, .N = 70, .K = 50, .epilogue = DPC_LT_EPI_RELU_BIAS}, 1e-5},
        {"f32 transA, ld padding",
         {.M = 40, .N = 24, .K = 16, .transA = true, .lda = 48, .ldb = 32, .ldc = 30}, 1e-5},
        {"f32 TF32 gelu(bias)",
         {.M = 128, .N = 256, .K = 512, .transB = true, .tf32 = true,
          .epilogue = DPC_LT_EPI_GELU_BIAS},
         2e-2},
        {"bf16 gelu(bias) (transB)",
         {.M = 128, .N = 256, .K = 64, .transB = true, .dtype = DPC_LT_BF16,
          .epilogue = DPC_LT_EPI_GELU_BIAS},
         3e-2},
        {"f16 bias", {.M = 64, .N = 64, .K = 64, .dtype = DPC_LT_F16, .epilogue = DPC_LT_EPI_BIAS},
         1e-2},
        {"f32 batched alpha/beta",
         {.M = 16, .N = 32, .K = 8, .batch = 3, .alpha = 0.5f, .beta = 1.0f}, 1e-5},
        {"f32 batched transB (Q.K^T)",
         {.M = 32, .N = 32, .K = 64, .transB = true, .batch = 4, .alpha = 0.125f}, 1e-5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        gpu_gemm_case(g, lt, &cases[i]);
    gpu_gemm_case(g, lt, &cases[0]); /* again: from the plan cache */

    /* Bad descriptions are usage errors. */
    dpc_lt_gemm_desc bad = {.M = 4, .N = 4, .K = 4, .epilogue = DPC_LT_EPI_BIAS};
    CHECK(dpc_lt_gemm(lt, &bad, (void *)16, (void *)16, NULL, (void *)16, NULL, &e) == DPC_EUSAGE,
          "missing bias accepted");
    bad = (dpc_lt_gemm_desc){.M = 4, .N = 4, .K = 4, .lda = 2};
    CHECK(dpc_lt_gemm(lt, &bad, (void *)16, (void *)16, NULL, (void *)16, NULL, &e) == DPC_EUSAGE,
          "short lda accepted");
    bad = (dpc_lt_gemm_desc){.M = 0, .N = 4, .K = 4};
    CHECK(dpc_lt_gemm(lt, &bad, NULL, NULL, NULL, NULL, NULL, &e) == DPC_OK, "empty GEMM");
    dpc_lt_destroy(lt);
}

static void gpu_errors(gpu *g) {
    /* Out of memory: a clear, non-sticky error; the context still works. */
    CUdeviceptr p;
    dpc_err e = {0};
    dpc_status s = DPC_CU(&e, cuMemAlloc(&p, (size_t)1 << 50));
    printf("  huge allocation: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "CUDA_ERROR_OUT_OF_MEMORY") && !strstr(e.msg, "sticky"),
          "OOM message: %s", e.msg);
    CU_OK(g, cuMemAlloc(&p, 1024));
    g->cu->cuMemFree(p);
    /* A broken image. */
    CUmodule mod;
    static const char junk[] = "this is not a cubin";
    s = DPC_CU(&e, cuModuleLoadDataEx(&mod, junk, 0, NULL, NULL));
    printf("  junk module: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && !strstr(e.msg, "sticky"), "junk module: %s", e.msg);
    size_t freemem = 0, total = 0;
    CU_OK(g, cuMemGetInfo(&freemem, &total));
    printf("  memory: %.1f GiB free of %.1f GiB\n", freemem / 1073741824.0, total / 1073741824.0);
}

static void gpu_peers(gpu *g) {
    int n = dpc_cuda_device_count();
    if (n < 2) {
        printf("  one device: no peer-access check\n");
        return;
    }
    int can = 0;
    CUdevice d0, d1;
    CU_OK(g, cuDeviceGet(&d0, 0));
    CU_OK(g, cuDeviceGet(&d1, 1));
    CU_OK(g, cuDeviceCanAccessPeer(&can, d0, d1));
    printf("  device 0 -> 1 peer access: %s\n", can ? "yes" : "no");
}

static bool gpu_setup(gpu *g) {
    memset(g, 0, sizeof *g);
    if (dpc_cuda_load(&g->e) != DPC_OK || dpc_cuda_device_count() < 1) {
        printf("skip: no GPU: %s\n", g->e.msg[0] ? g->e.msg : "no device");
        return false;
    }
    g->cu = dpc_cuda();
    CUcontext ctx;
    if (dpc_cuda_device_info(0, &g->dev, &g->e) != DPC_OK ||
        dpc_cuda_context(0, &ctx, &g->e) != DPC_OK ||
        /* A blocking stream: the synchronous copies (legacy stream) order
         * with it. */
        DPC_CU(&g->e, cuStreamCreate(&g->stream, CU_STREAM_DEFAULT)) != DPC_OK) {
        fprintf(stderr, "FAIL: device 0: %s\n", g->e.msg);
        failures++;
        return false;
    }
    printf("device 0: %s, %s, %.1f GiB, %d SMs, driver %d\n", g->dev.name, g->dev.arch,
           g->dev.total_mem / 1073741824.0, g->dev.sm_count, dpc_cuda_driver_version());
    return true;
}

static int main_gpu(void) {
    gpu g;
    if (!gpu_setup(&g))
        return failures ? 1 : SKIP;
    gpu_elementwise(&g);
    gpu_softmax_graph(&g);
    gpu_bf16_ptx(&g);
    gpu_gemm(&g);
    gpu_errors(&g);
    gpu_peers(&g);
    g.cu->cuStreamDestroy(g.stream);
    dpc_cuda_release_contexts();
    return finish("gpu");
}

static int main_fault(void) {
    gpu g;
    if (!gpu_setup(&g))
        return failures ? 1 : SKIP;
    CUmodule mod;
    if (!load_module(&g, KERNEL_FAULT, "write_bad.cu", false, &mod))
        return finish("fault");
    CUfunction fn;
    dpc_err e = {0};
    CHECK(DPC_CU(&e, cuModuleGetFunction(&fn, mod, "write_bad")) == DPC_OK, "%s", e.msg);
    CUdeviceptr bad = 0x10;
    void *args[] = {&bad};
    dpc_status s = DPC_CU(&e, cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, g.stream, args, NULL));
    CHECK(s == DPC_OK, "launch: %s", e.msg);
    CUresult r = g.cu->cuStreamSynchronize(g.stream);
    s = dpc_cuda_check(r, "cuStreamSynchronize", &e);
    printf("  bad write: %s\n", e.msg);
    CHECK(r == CUDA_ERROR_ILLEGAL_ADDRESS, "got %s", dpc_cuda_error_name(r));
    CHECK(dpc_cuda_is_sticky(r) && strstr(e.msg, "sticky"), "not classed sticky: %s", e.msg);
    /* Sticky indeed: an unrelated call now fails the same way. */
    CUdeviceptr p;
    CUresult r2 = g.cu->cuMemAlloc(&p, 1024);
    printf("  allocation afterwards: %s\n", dpc_cuda_error_name(r2));
    CHECK(r2 != CUDA_SUCCESS && dpc_cuda_is_sticky(r2), "context still usable?");
    return finish("fault");
}

int main(int argc, char **argv) {
    /* NVRTC images built by the GPU modes go to a private cache. */
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/dpc-driver-test-XXXXXX");
    bool own_cache = !getenv("DPC_CACHE_DIR") && mkdtemp(dir);
    if (own_cache)
        setenv("DPC_CACHE_DIR", dir, 1);
    const char *mode = argc > 1 ? argv[1] : "probe";
    int rc;
    if (strcmp(mode, "nodriver") == 0)
        rc = main_nodriver();
    else if (strcmp(mode, "nolibs") == 0)
        rc = main_nolibs();
    else if (strcmp(mode, "stub") == 0)
        rc = main_stub();
    else if (strcmp(mode, "fake") == 0)
        rc = main_fake();
    else if (strcmp(mode, "probe") == 0)
        rc = main_probe();
    else if (strcmp(mode, "gpu") == 0)
        rc = main_gpu();
    else if (strcmp(mode, "fault") == 0)
        rc = main_fault();
    else {
        fprintf(stderr, "usage: test_driver nodriver|nolibs|stub|fake|probe|gpu|fault\n");
        rc = 2;
    }
    if (own_cache) {
        long removed;
        dpc_kcache_clear(&removed, NULL);
        rmdir(dir);
    }
    return rc;
}
