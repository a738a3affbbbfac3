/* fake_libcuda.c - a pretend CUDA driver, so that the driver-loading path
 * (entry points resolved through cuGetProcAddress, device queries, primary
 * contexts, error naming) is exercised on machines without a GPU.
 *
 * FAKE_CUDA_MODE picks its behaviour: "ok" (two sm_90 devices), "old" (a
 * CUDA 11.8 driver), "nodevice" (cuInit fails with CUDA_ERROR_NO_DEVICE). */
#include <cuda.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What the loader asked for, read back by the test through dlsym. */
struct fake_cuda_stats {
    int getproc_calls;
    int bad_requests; /* versioned names, wrong flags or version */
    int retains, releases;
    int init_calls;
};
struct fake_cuda_stats fake_cuda_stats;

static const char *mode(void) {
    const char *m = getenv("FAKE_CUDA_MODE");
    return m ? m : "ok";
}

#define NDEV 2
static int g_ctx_storage[NDEV];

static CUresult fake_cuInit(unsigned int flags) {
    fake_cuda_stats.init_calls++;
    return strcmp(mode(), "nodevice") == 0 ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}
static CUresult fake_cuGetErrorName(CUresult r, const char **s) {
    switch ((int)r) {
    case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; return CUDA_SUCCESS;
    case 4242: *s = "CUDA_ERROR_FAKE_ONLY_THE_DRIVER_KNOWS"; return CUDA_SUCCESS;
    default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
}
static CUresult fake_cuGetErrorString(CUresult r, const char **s) {
    switch ((int)r) {
    case CUDA_ERROR_NO_DEVICE: *s = "no CUDA-capable device is detected"; return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        *s = "an illegal memory access was encountered";
        return CUDA_SUCCESS;
    default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
}
static CUresult fake_cuDeviceGetCount(int *n) {
    *n = NDEV;
    return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceGet(CUdevice *d, int ordinal) {
    if (ordinal < 0 || ordinal >= NDEV)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceGetName(char *name, int len, CUdevice d) {
    const char *n = "Fake H200";
    if (len < 1)
        return CUDA_ERROR_INVALID_VALUE;
    strncpy(name, n, (size_t)len - 1);
    name[len - 1] = 0;
    return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}
static CUresult fake_cuDeviceTotalMem(size_t *bytes, CUdevice d) {
    *bytes = (size_t)141 << 30;
    return CUDA_SUCCESS;
}
static CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    fake_cuda_stats.retains++;
    *c = (CUcontext)&g_ctx_storage[d];
    return CUDA_SUCCESS;
}
static CUresult fake_cuDevicePrimaryCtxRelease(CUdevice d) {
    fake_cuda_stats.releases++;
    return CUDA_SUCCESS;
}
static CUresult fake_cuCtxSetCurrent(CUcontext c) { return CUDA_SUCCESS; }
static CUresult fake_cuMemAlloc(CUdeviceptr *p, size_t n) {
    if (n > ((size_t)1 << 40))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)0x700000000000ull;
    return CUDA_SUCCESS;
}
static CUresult fake_cuMemFree(CUdeviceptr p) { return CUDA_SUCCESS; }
static CUresult fake_cuCtxSynchronize(void) { return CUDA_ERROR_ILLEGAL_ADDRESS; }
static CUresult fake_unsupported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

CUresult cuDriverGetVersion(int *v) {
    *v = strcmp(mode(), "old") == 0 ? 11080 : 13000;
    return CUDA_SUCCESS;
}

/* cuda.h maps this to cuGetProcAddress_v2, the symbol the loader looks for. */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status) {
    fake_cuda_stats.getproc_calls++;
    if (strstr(symbol, "_v2") || strstr(symbol, "_v3") || strstr(symbol, "_ptsz") ||
        strstr(symbol, "WithFlags") || flags != CU_GET_PROC_ADDRESS_LEGACY_STREAM ||
        version != 13000)
        fake_cuda_stats.bad_requests++;
    static const struct {
        const char *name;
        void *fn;
    } table[] = {
        {"cuInit", (void *)fake_cuInit},
        {"cuGetErrorName", (void *)fake_cuGetErrorName},
        {"cuGetErrorString", (void *)fake_cuGetErrorString},
        {"cuDriverGetVersion", (void *)cuDriverGetVersion},
        {"cuDeviceGetCount", (void *)fake_cuDeviceGetCount},
        {"cuDeviceGet", (void *)fake_cuDeviceGet},
        {"cuDeviceGetName", (void *)fake_cuDeviceGetName},
        {"cuDeviceGetAttribute", (void *)fake_cuDeviceGetAttribute},
        {"cuDeviceTotalMem", (void *)fake_cuDeviceTotalMem},
        {"cuDevicePrimaryCtxRetain", (void *)fake_cuDevicePrimaryCtxRetain},
        {"cuDevicePrimaryCtxRelease", (void *)fake_cuDevicePrimaryCtxRelease},
        {"cuCtxSetCurrent", (void *)fake_cuCtxSetCurrent},
        {"cuCtxSynchronize", (void *)fake_cuCtxSynchronize},
        {"cuMemAlloc", (void *)fake_cuMemAlloc},
        {"cuMemFree", (void *)fake_cuMemFree},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(symbol, table[i].name) == 0) {
            *pfn = table[i].fn;
            if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    /* Everything else exists but does nothing useful here. */
    *pfn = (void *)fake_unsupported;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}
