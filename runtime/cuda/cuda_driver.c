/* cuda_driver.c - dlopen the CUDA driver, resolve its entry points, name and
 * classify its errors, and hand out per-device primary contexts. */
#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DPC_STR_(x) #x
#define DPC_XSTR_(x) DPC_STR_(x)

/* Oldest driver whose ABI for the DPC_CUDA_FUNCS entry points matches cuda.h 13.0
 * (cuGraphInstantiate took its flags form in 12.0). */
#define DPC_CUDA_MIN_DRIVER 12000

#define DPC_CUDA_MAX_DEVICES 64

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dpc_cuda_api g_api;
/* &g_api once everything loaded; atomic because error naming reads it while
 * another thread may still be loading. */
static _Atomic(const dpc_cuda_api *) g_ready;
static dpc_status g_status = DPC_EDEVICE;
static char g_msg[DPC_ERR_MSG];
static int g_driver_version;

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext g_ctx[DPC_CUDA_MAX_DEVICES];

/* cuGetProcAddress, CUDA 12+ form (symbolStatus argument). */
typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);
typedef CUresult (*getproc_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*version_fn)(int *);

static void load_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void load_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    g_status = DPC_EDEVICE;
}

/* Resolves one entry point: by base name through cuGetProcAddress for the
 * version we were built against (capped at the driver's, which the driver
 * requires), else by the exact versioned symbol cuda.h maps the name to. */
static void *resolve(void *lib, getproc_v2_fn gp2, getproc_v1_fn gp1, int version,
                     const char *base, const char *exact) {
    void *p = NULL;
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (gp2) {
        CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        r = gp2(base, &p, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q);
        if (q != CU_GET_PROC_ADDRESS_SUCCESS)
            p = NULL;
    } else if (gp1) {
        r = gp1(base, &p, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    }
    if (r != CUDA_SUCCESS || !p)
        p = dlsym(lib, exact);
    return p;
}

void *dpc_dlopen_env(const char *env, const char *dflt, const char **path, const char **why) {
    *path = getenv(env);
    if (!*path || !**path)
        *path = dflt;
    void *lib = dlopen(*path, RTLD_NOW | RTLD_LOCAL);
    *why = NULL;
    if (!lib) {
        *why = dlerror();
        if (!*why)
            *why = "dlopen failed";
    }
    return lib;
}

void *dpc_dlopen_toolkit(const char *what, const char *env, const char *file, const char *soname,
                         char *msg, size_t n) {
    const char *e = getenv(env), *path, *why;
    const char *dflt = (!e || !*e) && file && *file && access(file, F_OK) == 0 ? file : soname;
    void *lib = dpc_dlopen_env(env, dflt, &path, &why);
    if (!lib)
        snprintf(msg, n, "%s could not be loaded (%s): %s (set %s to its path)", what, path, why, env);
    return lib;
}

static void load_once(void) {
    const char *path, *why;
    void *lib = dpc_dlopen_env("DPC_CUDA_DRIVER", "libcuda.so.1", &path, &why);
    if (!lib) {
        load_fail("no CUDA driver (%s not found): %s; the CUDA backend needs an NVIDIA GPU and "
                  "its driver (use the CPU backend otherwise)",
                  path, why);
        return;
    }
    /* Never dlclose'd: the driver lives as long as the process. */
    version_fn get_version = (version_fn)dlsym(lib, "cuDriverGetVersion");
    getproc_v2_fn gp2 = (getproc_v2_fn)dlsym(lib, "cuGetProcAddress_v2");
    getproc_v1_fn gp1 = gp2 ? NULL : (getproc_v1_fn)dlsym(lib, "cuGetProcAddress");
    if (!get_version) {
        load_fail("%s is not a CUDA driver: it has no cuDriverGetVersion", path);
        return;
    }
    int version = 0;
    CUresult r = get_version(&version);
    if (r != CUDA_SUCCESS) {
        load_fail("CUDA driver %s: cuDriverGetVersion failed: %s (%d)%s", path,
                  dpc_cuda_error_name(r), (int)r,
                  r == CUDA_ERROR_STUB_LIBRARY
                      ? ": this is the CUDA toolkit's link-time stub, not a driver (install the "
                        "NVIDIA driver, or take the stubs directory off LD_LIBRARY_PATH)"
                      : "");
        return;
    }
    g_driver_version = version;
    if (version < DPC_CUDA_MIN_DRIVER) {
        load_fail("CUDA driver too old: it supports CUDA %d.%d, dpc needs %d.%d or newer (and a "
                  "driver for CUDA %d.%d to load kernels compiled by this NVRTC)",
                  version / 1000, version % 1000 / 10, DPC_CUDA_MIN_DRIVER / 1000,
                  DPC_CUDA_MIN_DRIVER % 1000 / 10, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        return;
    }
    int want = version < CUDA_VERSION ? version : CUDA_VERSION;

#define DPC_CUDA_RESOLVE_(name)                                                                    \
    {                                                                                              \
        void *p_ = resolve(lib, gp2, gp1, want, #name, DPC_XSTR_(name));                           \
        if (!p_) {                                                                                 \
            load_fail("CUDA driver %s (CUDA %d.%d) lacks %s (%s)", path, version / 1000,           \
                      version % 1000 / 10, #name, DPC_XSTR_(name));                                \
            return;                                                                                \
        }                                                                                          \
        memcpy(&g_api.name, &p_, sizeof p_);                                                       \
    }
    DPC_CUDA_FUNCS(DPC_CUDA_RESOLVE_)
#undef DPC_CUDA_RESOLVE_

    r = g_api.cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *desc = NULL;
        if (g_api.cuGetErrorString(r, &desc) != CUDA_SUCCESS || !desc)
            desc = "no description";
        load_fail("CUDA driver %s (CUDA %d.%d) found, but cuInit failed: %s (%d): %s", path,
                  version / 1000, version % 1000 / 10, dpc_cuda_error_name(r), (int)r, desc);
        return;
    }
    g_status = DPC_OK;
    g_msg[0] = 0;
    atomic_store_explicit(&g_ready, &g_api, memory_order_release);
}

dpc_status dpc_cuda_load(dpc_err *e) {
    pthread_once(&g_once, load_once);
    if (g_status != DPC_OK)
        return dpc_errf(e, g_status, "%s", g_msg);
    return DPC_OK;
}

const dpc_cuda_api *dpc_cuda(void) {
    pthread_once(&g_once, load_once);
    return atomic_load_explicit(&g_ready, memory_order_acquire);
}

/* The table if loaded, without triggering a load (safe inside load_once). */
static const dpc_cuda_api *loaded(void) {
    return atomic_load_explicit(&g_ready, memory_order_acquire);
}

int dpc_cuda_driver_version(void) {
    pthread_once(&g_once, load_once);
    return g_driver_version;
}

int dpc_cuda_device_count(void) {
    const dpc_cuda_api *cu = dpc_cuda();
    int n = 0;
    if (!cu || cu->cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return 0;
    return n;
}

bool dpc_cuda_is_sticky(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    case CUDA_ERROR_KEY_ROTATION:
        return true;
    default:
        return false;
    }
}

/* Names for the errors dpc is likely to meet, for use before (or without) a
 * driver; the driver's own cuGetErrorName covers the rest. */
static const char *own_error_name(CUresult r) {
    switch (r) {
#define N_(x)                                                                                      \
    case x:                                                                                        \
        return #x;
        N_(CUDA_SUCCESS)
        N_(CUDA_ERROR_INVALID_VALUE)
        N_(CUDA_ERROR_OUT_OF_MEMORY)
        N_(CUDA_ERROR_NOT_INITIALIZED)
        N_(CUDA_ERROR_DEINITIALIZED)
        N_(CUDA_ERROR_STUB_LIBRARY)
        N_(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER)
        N_(CUDA_ERROR_DEVICE_UNAVAILABLE)
        N_(CUDA_ERROR_NO_DEVICE)
        N_(CUDA_ERROR_INVALID_DEVICE)
        N_(CUDA_ERROR_INVALID_IMAGE)
        N_(CUDA_ERROR_INVALID_CONTEXT)
        N_(CUDA_ERROR_NO_BINARY_FOR_GPU)
        N_(CUDA_ERROR_ECC_UNCORRECTABLE)
        N_(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
        N_(CUDA_ERROR_INVALID_PTX)
        N_(CUDA_ERROR_NVLINK_UNCORRECTABLE)
        N_(CUDA_ERROR_JIT_COMPILER_NOT_FOUND)
        N_(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
        N_(CUDA_ERROR_CONTAINED)
        N_(CUDA_ERROR_INVALID_SOURCE)
        N_(CUDA_ERROR_FILE_NOT_FOUND)
        N_(CUDA_ERROR_INVALID_HANDLE)
        N_(CUDA_ERROR_NOT_FOUND)
        N_(CUDA_ERROR_NOT_READY)
        N_(CUDA_ERROR_ILLEGAL_ADDRESS)
        N_(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
        N_(CUDA_ERROR_LAUNCH_TIMEOUT)
        N_(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        N_(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
        N_(CUDA_ERROR_CONTEXT_IS_DESTROYED)
        N_(CUDA_ERROR_ASSERT)
        N_(CUDA_ERROR_HARDWARE_STACK_ERROR)
        N_(CUDA_ERROR_ILLEGAL_INSTRUCTION)
        N_(CUDA_ERROR_MISALIGNED_ADDRESS)
        N_(CUDA_ERROR_INVALID_ADDRESS_SPACE)
        N_(CUDA_ERROR_INVALID_PC)
        N_(CUDA_ERROR_LAUNCH_FAILED)
        N_(CUDA_ERROR_TENSOR_MEMORY_LEAK)
        N_(CUDA_ERROR_NOT_PERMITTED)
        N_(CUDA_ERROR_NOT_SUPPORTED)
        N_(CUDA_ERROR_SYSTEM_NOT_READY)
        N_(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
        N_(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
        N_(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
        N_(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        N_(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
        N_(CUDA_ERROR_TIMEOUT)
        N_(CUDA_ERROR_EXTERNAL_DEVICE)
        N_(CUDA_ERROR_KEY_ROTATION)
        N_(CUDA_ERROR_UNKNOWN)
#undef N_
    default:
        return NULL;
    }
}

const char *dpc_cuda_error_name(CUresult r) {
    const char *s = own_error_name(r);
    if (s)
        return s;
    const dpc_cuda_api *cu = loaded();
    if (cu && cu->cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "CUDA_ERROR_UNRECOGNIZED";
}

dpc_status dpc_cuda_check(CUresult r, const char *call, dpc_err *e) {
    if (r == CUDA_SUCCESS)
        return DPC_OK;
    size_t n = strcspn(call, "( ");
    const char *desc = NULL;
    const dpc_cuda_api *cu = loaded();
    if (!cu || cu->cuGetErrorString(r, &desc) != CUDA_SUCCESS || !desc)
        desc = NULL;
    return dpc_errf(e, DPC_EDEVICE, "%.*s failed: %s (%d)%s%s%s", (int)n, call,
                    dpc_cuda_error_name(r), (int)r, desc ? ": " : "", desc ? desc : "",
                    dpc_cuda_is_sticky(r)
                        ? "; this error is sticky: the CUDA context is now unusable and the "
                          "process must exit"
                        : "");
}

dpc_status dpc_cuda_device_info(int ordinal, dpc_cuda_device *out, dpc_err *e) {
    memset(out, 0, sizeof *out);
    dpc_status s = dpc_cuda_load(e);
    if (s != DPC_OK)
        return s;
    int count = dpc_cuda_device_count();
    if (ordinal < 0 || ordinal >= count)
        return dpc_errf(e, DPC_EUSAGE, "no CUDA device %d (this machine has %d)", ordinal, count);
    CUdevice dev;
    DPC_CU_TRY(e, cuDeviceGet(&dev, ordinal));
    DPC_CU_TRY(e, cuDeviceGetName(out->name, (int)sizeof out->name, dev));
    DPC_CU_TRY(e, cuDeviceGetAttribute(&out->cc_major,
                                       CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    DPC_CU_TRY(e, cuDeviceGetAttribute(&out->cc_minor,
                                       CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    DPC_CU_TRY(e, cuDeviceGetAttribute(&out->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                       dev));
    DPC_CU_TRY(e, cuDeviceTotalMem(&out->total_mem, dev));
    out->ordinal = ordinal;
    snprintf(out->arch, sizeof out->arch, "sm_%d%d", out->cc_major, out->cc_minor);
    return DPC_OK;
}

dpc_status dpc_cuda_context(int ordinal, CUcontext *ctx, dpc_err *e) {
    *ctx = NULL;
    dpc_status s = dpc_cuda_load(e);
    if (s != DPC_OK)
        return s;
    int count = dpc_cuda_device_count();
    if (ordinal < 0 || ordinal >= count || ordinal >= DPC_CUDA_MAX_DEVICES)
        return dpc_errf(e, DPC_EUSAGE, "no CUDA device %d (this machine has %d)", ordinal, count);
    pthread_mutex_lock(&g_ctx_lock);
    if (!g_ctx[ordinal]) {
        CUdevice dev;
        s = DPC_CU(e, cuDeviceGet(&dev, ordinal));
        if (s == DPC_OK)
            s = DPC_CU(e, cuDevicePrimaryCtxRetain(&g_ctx[ordinal], dev));
        if (s != DPC_OK) {
            g_ctx[ordinal] = NULL;
            pthread_mutex_unlock(&g_ctx_lock);
            dpc_err_prefix(e, "CUDA device %d: ", ordinal);
            return s;
        }
    }
    CUcontext c = g_ctx[ordinal];
    pthread_mutex_unlock(&g_ctx_lock);
    s = DPC_CU(e, cuCtxSetCurrent(c));
    if (s != DPC_OK) {
        dpc_err_prefix(e, "CUDA device %d: ", ordinal);
        return s;
    }
    *ctx = c;
    return DPC_OK;
}

void dpc_cuda_release_contexts(void) {
    if (!dpc_cuda())
        return;
    pthread_mutex_lock(&g_ctx_lock);
    for (int i = 0; i < DPC_CUDA_MAX_DEVICES; i++) {
        if (g_ctx[i]) {
            CUdevice dev;
            if (g_api.cuDeviceGet(&dev, i) == CUDA_SUCCESS)
                g_api.cuDevicePrimaryCtxRelease(dev);
            g_ctx[i] = NULL;
        }
    }
    pthread_mutex_unlock(&g_ctx_lock);
}
