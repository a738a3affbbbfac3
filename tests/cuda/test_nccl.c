/* test_nccl.c - dpc's NCCL loader (runtime/cuda/nccl_lib.c).
 *
 *     test_nccl real     DPC_NCCL_LIBRARY is the toolkit's libnccl.so.2
 *                        (exit 77 where it is absent): it loads, reports
 *                        its version and names its errors, all without a
 *                        GPU (ncclGetVersion and ncclGetErrorString need
 *                        none)
 *     test_nccl missing  DPC_NCCL_LIBRARY names a missing file: one clear
 *                        error, no table, version 0; errors are still named
 *                        (own table); version codes of both encodings
 *     test_nccl gpu      on a GPU (exit 77 without one): a real in-place
 *                        broadcast on cuda:0 through dpc_nccl_broadcast
 *                        leaves the buffer as it was */
#define _GNU_SOURCE
#include "cuda_driver.h"
#include "nccl_lib.h"
#include "../check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>



static int main_real(void) {
    const char *path = getenv("DPC_NCCL_LIBRARY");
    if (!path || access(path, R_OK) != 0) {
        printf("no libnccl.so.2 in the CUDA toolkit (%s): skipped\n", path ? path : "DPC_NCCL_LIBRARY unset");
        return SKIP;
    }
    dpc_err e = {0};
    dpc_status s = dpc_nccl_load(&e);
    CHECK(s == DPC_OK, "load %s: %s", path, e.msg);
    if (s != DPC_OK)
        return finish("real");
    char v[32];
    dpc_nccl_version_string(dpc_nccl_version(), v, sizeof v);
    printf("%s: NCCL %s (code %d; nccl.h says %d)\n", path, v, dpc_nccl_version(), NCCL_VERSION_CODE);
    CHECK(dpc_nccl_version() >= 2400 && strncmp(v, "2.", 2) == 0, "version %d (%s)", dpc_nccl_version(), v);
    CHECK(dpc_nccl() != NULL && dpc_nccl()->ncclBroadcast != NULL, "no table");
    s = dpc_nccl_check(ncclInvalidUsage, "ncclBroadcast(buf, buf, n, ncclUint8, 0, comm, stream)", &e);
    printf("named: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && strncmp(e.msg, "ncclBroadcast failed: ncclInvalidUsage (5): ", 44) == 0 &&
              strlen(e.msg) > 44,
          "%s", e.msg);
    return finish("real");
}

static int main_missing(void) {
    dpc_err e = {0};
    dpc_status s = dpc_nccl_load(&e);
    printf("missing: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && strncmp(e.msg, "NCCL not found (/nonexistent/", 29) == 0, "%s", e.msg);
    CHECK(dpc_nccl() == NULL && dpc_nccl_version() == 0, "a table without a library");
    CHECK(dpc_nccl_load(&e) == DPC_EDEVICE, "the second load succeeded");
    s = dpc_nccl_check(ncclUnhandledCudaError, "ncclGroupEnd()", &e);
    CHECK(s == DPC_EDEVICE && strcmp(e.msg, "ncclGroupEnd failed: ncclUnhandledCudaError (1)") == 0, "%s", e.msg);
    CHECK(strcmp(dpc_nccl_error_name((ncclResult_t)99), "ncclUnrecognizedError") == 0, "unknown error name");
    CHECK(dpc_nccl_check(ncclSuccess, "ncclGroupEnd", &e) == DPC_OK, "success is an error");
    char v[32];
    dpc_nccl_version_string(2708, v, sizeof v);
    CHECK(strcmp(v, "2.7.8") == 0, "2708: %s", v);
    dpc_nccl_version_string(22809, v, sizeof v);
    CHECK(strcmp(v, "2.28.9") == 0, "22809: %s", v);
    int ord = 0;
    CUcontext ctx = NULL;
    CUdeviceptr buf = 0;
    CHECK(dpc_nccl_broadcast(1, &ord, &ctx, &buf, 4, &e) == DPC_EINTERNAL, "a broadcast without NCCL: %s", e.msg);
    return finish("missing");
}

static int main_gpu(void) {
    if (dpc_cuda_device_count() == 0) {
        printf("no CUDA device: skipped\n");
        return SKIP;
    }
    dpc_err e = {0};
    dpc_status s = dpc_nccl_load(&e);
    CHECK(s == DPC_OK, "%s", e.msg);
    CUcontext ctx = NULL;
    if (s == DPC_OK)
        s = dpc_cuda_context(0, &ctx, &e);
    CHECK(s == DPC_OK, "context: %s", e.msg);
    if (s != DPC_OK)
        return finish("gpu");
    enum { N = 1 << 18 };
    static unsigned in[N], out[N];
    for (unsigned i = 0; i < N; i++)
        in[i] = i * 2654435761u;
    CUdeviceptr buf = 0;
    CHECK(DPC_CU(&e, cuMemAlloc(&buf, sizeof in)) == DPC_OK, "%s", e.msg);
    CHECK(DPC_CU(&e, cuMemcpyHtoD(buf, in, sizeof in)) == DPC_OK, "%s", e.msg);
    int ord = 0;
    s = dpc_nccl_broadcast(1, &ord, &ctx, &buf, sizeof in, &e);
    printf("in-place broadcast on cuda:0: %s\n", s == DPC_OK ? "ok" : e.msg);
    CHECK(s == DPC_OK, "%s", e.msg);
    CHECK(dpc_cuda_context(0, &ctx, &e) == DPC_OK, "%s", e.msg);
    CHECK(DPC_CU(&e, cuMemcpyDtoH(out, buf, sizeof out)) == DPC_OK, "%s", e.msg);
    CHECK(memcmp(in, out, sizeof in) == 0, "the buffer changed");
    CHECK(DPC_CU(&e, cuMemFree(buf)) == DPC_OK, "%s", e.msg);
    return finish("gpu");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_nccl real|missing|gpu\n");
        return 2;
    }
    if (strcmp(argv[1], "real") == 0)
        return main_real();
    if (strcmp(argv[1], "missing") == 0)
        return main_missing();
    if (strcmp(argv[1], "gpu") == 0)
        return main_gpu();
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
}
