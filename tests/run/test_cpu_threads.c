/* test_cpu_threads.c - the CPU backend's GEMM threads belong to one backend
 * (issue 11, item 4: no state that one program sets for another).
 *
 *     test_cpu_threads MODEL.dp
 *
 * Two CPU backends of one model (two programs): each keeps the count set on it, whatever
 * is set on the other (dpc_model_set_devices sets its own model's
 * backend); a backend starts at 1. */
#include "../check.h"
#include "backend_cpu.h"
#include "model.h"

#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_cpu_threads MODEL.dp\n");
        return 2;
    }
    dpc_model *m1 = NULL;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_err e = {0};
    dpc_status s = dpc_model_compile(argv[1], &m1, &diags, &e);
    CHECK(s == DPC_OK, "%s does not compile: %s\n%s", argv[1], e.msg, diags.data ? diags.data : "");
    dpc_buf_free(&diags);
    if (s != DPC_OK)
        return finish("test_cpu_threads");

    dpc_backend *a = NULL, *b = NULL;
    CHECK(dpc_backend_cpu_new(m1->unit, NULL, &a, &e) == DPC_OK, "%s", e.msg);
    CHECK(dpc_backend_cpu_new(m1->unit, NULL, &b, &e) == DPC_OK, "%s", e.msg);
    if (a && b) {
        CHECK(dpc_cpu_gemm_threads(a) == 1 && dpc_cpu_gemm_threads(b) == 1, "new backends: %d and %d threads",
              dpc_cpu_gemm_threads(a), dpc_cpu_gemm_threads(b));
        dpc_cpu_set_gemm_threads(a, 3);
        dpc_cpu_set_gemm_threads(b, 5);
        CHECK(dpc_cpu_gemm_threads(a) == 3, "a has %d threads, not 3", dpc_cpu_gemm_threads(a));
        CHECK(dpc_cpu_gemm_threads(b) == 5, "b has %d threads, not 5", dpc_cpu_gemm_threads(b));
        dpc_cpu_set_gemm_threads(a, 0);
        CHECK(dpc_cpu_gemm_threads(a) == 1 && dpc_cpu_gemm_threads(b) == 5, "after 0 on a: %d and %d",
              dpc_cpu_gemm_threads(a), dpc_cpu_gemm_threads(b));
        CHECK(dpc_cpu_gemm_threads(NULL) == 0, "NULL is not a CPU backend");
    }
    if (a)
        a->destroy(a);
    if (b)
        b->destroy(b);

    dpc_model_free(m1);
    return finish("test_cpu_threads");
}
