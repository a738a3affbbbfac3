/* test_gpu.c - (GPU) the images a .dpa stores load on the real device:
 * compiles models/parallel_model.dp for this GPU's sm_XX with
 * `dpc compile --arch`, loads and verifies the artifact, then loads its
 * CUBIN and its PTX (JIT) with the CUDA driver and finds every kernel the
 * CUDA source defines in both modules. Exits 77 (skip) without a driver or
 * a device.
 *
 *   test_artifact_gpu DPC MODELS_DIR WORK_DIR */
#define _GNU_SOURCE
#include "artifact.h"
#include "cuda_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../check.h"

static int check_module(const char *what, const void *image, const char *cuda_src) {
    CUmodule mod;
    CUresult r = dpc_cuda()->cuModuleLoadDataEx(&mod, image, 0, NULL, NULL);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "%s: cuModuleLoadDataEx: %s\n", what, dpc_cuda_error_name(r));
        return 1;
    }
    int nfn = 0, bad = 0;
    const char *key = "extern \"C\" __global__ void ";
    for (const char *p = strstr(cuda_src, key); p; p = strstr(p + 1, key)) {
        char name[256];
        const char *s = p + strlen(key);
        size_t n = strcspn(s, "( \n");
        snprintf(name, sizeof name, "%.*s", (int)n, s);
        CUfunction fn;
        if (dpc_cuda()->cuModuleGetFunction(&fn, mod, name) != CUDA_SUCCESS) {
            fprintf(stderr, "%s: kernel %s missing\n", what, name);
            bad++;
        }
        nfn++;
    }
    printf("%s: loaded, %d kernels found\n", what, nfn - bad);
    dpc_cuda()->cuModuleUnload(mod);
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_artifact_gpu DPC MODELS_DIR WORK_DIR\n");
        return 2;
    }
    dpc_err e;
    if (dpc_cuda_load(&e) != DPC_OK || dpc_cuda_device_count() < 1) {
        printf("skipped: no CUDA driver or device\n");
        return 77;
    }
    const dpc_cuda_api *cu = dpc_cuda();
    CUdevice dev;
    CUcontext ctx;
    int major = 0, minor = 0;
    if (cu->cuInit(0) != CUDA_SUCCESS || cu->cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
        cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS ||
        cu->cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cu->cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "cannot set up device 0\n");
        return 1;
    }
    char sm[16], compute[24], dpa[4096], cmd[8192];
    snprintf(sm, sizeof sm, "sm_%d%d", major, minor);
    snprintf(compute, sizeof compute, "compute_%d%d", major, minor);
    snprintf(dpa, sizeof dpa, "%s/gpu_%s.dpa", argv[3], sm);
    snprintf(cmd, sizeof cmd, "'%s' compile '%s/parallel_model.dp' -o '%s' --arch %s", argv[1], argv[2], dpa, sm);
    if (system(cmd) != 0) {
        fprintf(stderr, "failed: %s\n", cmd);
        return 1;
    }
    dpc_artifact *a;
    dpc_model *m;
    if (dpc_artifact_read(dpa, &a, &e) != DPC_OK || dpc_artifact_instantiate(a, &m, &e) != DPC_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    const dpc_artifact_image *cubin = dpc_artifact_find_image(a, sm), *ptx = dpc_artifact_find_image(a, compute);
    CHECK(cubin && ptx);
    if (cubin)
        CHECK(check_module(sm, cubin->data, a->gen_cuda) == 0);
    if (ptx)
        CHECK(check_module(compute, ptx->data, a->gen_cuda) == 0);
    dpc_model_free(m);
    dpc_artifact_free(a);
    cu->cuDevicePrimaryCtxRelease(dev);
    printf("test_artifact_gpu: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
