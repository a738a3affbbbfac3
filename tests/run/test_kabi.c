/* test_kabi.c - the kernel ABI is defined once (compiler/kabi.h).
 *
 *     test_kabi MODEL.dp...
 *
 * The runtime's view of the ABI (kabi.h: dpc_cpu_kctx, dpc_cu_kerr,
 * dpc_cu_kctx) and the text the emitters print (the regions of kabi.h as
 * kabi_c.inc / kabi_cuda.inc, each compiled as its own translation unit,
 * kabi_emitted_*.c) have the layout of kabi_layout.h, checked by static
 * asserts on both sides and compared field by field at run time (offsetof,
 * sizeof). For each model, the generated C and CUDA sources contain that
 * text (DPC_KABI_C_TEXT, DPC_KABI_CUDA_TEXT) byte for byte, and no other
 * definition of the context. NVRTC compiling the CUDA text is covered by
 * cuda.emit_*. */
#include "../check.h"
#include "backend_cpu.h"
#include "kabi.h"
#include "kabi_layout.h"
#include "kabi_text.h"
#include "model.h"

#include <stdlib.h>
#include <string.h>

#define A(f, off) KABI_ASSERT(dpc_cpu_kctx, f, off)
KABI_CPU_KCTX(A)
#undef A
#define A(f, off) KABI_ASSERT(dpc_cu_kerr, f, off)
KABI_CU_KERR(A)
#undef A
#define A(f, off) KABI_ASSERT(dpc_cu_kctx, f, off)
KABI_CU_KCTX(A)
#undef A
_Static_assert(sizeof(dpc_cpu_kctx) == KABI_CPU_KCTX_SIZE, "sizeof dpc_cpu_kctx");
_Static_assert(sizeof(dpc_cu_kerr) == KABI_CU_KERR_SIZE, "sizeof dpc_cu_kerr");
_Static_assert(sizeof(dpc_cu_kctx) == KABI_CU_KCTX_SIZE, "sizeof dpc_cu_kctx");

static void compare(const char *what, const kabi_layout *host, const kabi_layout *emitted) {
    CHECK(host->n == emitted->n, "%s: %d fields and size on the host, %d in the emitted text", what, host->n,
          emitted->n);
    for (int i = 0; i < host->n && i < emitted->n; i++)
        CHECK(host->v[i] == emitted->v[i], "%s: item %d (%s) is %zu on the host, %zu in the emitted text", what, i,
              i == host->n - 1 ? "sizeof" : "offsetof", host->v[i], emitted->v[i]);
}

static void check_layouts(void) {
    kabi_layout h, g;
    h.n = 0;
#define P(f, off) KABI_PUT(dpc_cpu_kctx, f, off)
    kabi_layout *out = &h;
    KABI_CPU_KCTX(P)
#undef P
    h.v[h.n++] = sizeof(dpc_cpu_kctx);
    kabi_emitted_cpu_kctx(&g);
    compare("C dpc_kctx", &h, &g);

    h.n = 0;
#define P(f, off) KABI_PUT(dpc_cu_kerr, f, off)
    KABI_CU_KERR(P)
#undef P
    h.v[h.n++] = sizeof(dpc_cu_kerr);
    kabi_emitted_cu_kerr(&g);
    compare("CUDA dpc_kerr", &h, &g);

    h.n = 0;
#define P(f, off) KABI_PUT(dpc_cu_kctx, f, off)
    KABI_CU_KCTX(P)
#undef P
    h.v[h.n++] = sizeof(dpc_cu_kctx);
    kabi_emitted_cu_kctx(&g);
    compare("CUDA dpc_kctx", &h, &g);
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

static void check_model(const char *path) {
    dpc_model *m = NULL;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_err e = {0};
    dpc_status s = dpc_model_compile(path, &m, &diags, &e);
    CHECK(s == DPC_OK, "%s does not compile: %s\n%s", path, e.msg, diags.data ? diags.data : "");
    dpc_buf_free(&diags);
    if (s != DPC_OK)
        return;
    char *c = dpc_cpu_source(m->unit);
    CHECK(c && strstr(c, DPC_KABI_C_TEXT) != NULL, "%s: the C source lacks the ABI text of kabi.h", path);
    CHECK(c && count(c, "typedef struct dpc_kctx") == 1, "%s: the C source defines dpc_kctx %d times", path,
          c ? count(c, "typedef struct dpc_kctx") : 0);
    free(c);
    const kprec precs[] = {KP_F32, KP_BF16, KP_F16};
    for (size_t i = 0; i < sizeof precs / sizeof *precs; i++) {
        char *cu = NULL;
        dpc_cu_plan plan;
        s = dpc_unit_cuda_program(m->unit, precs[i], &cu, &plan, &e);
        CHECK(s == DPC_OK, "%s: no CUDA program (%s): %s", path, kprec_name(precs[i]), e.msg);
        if (s == DPC_OK) {
            CHECK(strstr(cu, DPC_KABI_CUDA_TEXT) != NULL, "%s (%s): the CUDA source lacks the ABI text of kabi.h",
                  path, kprec_name(precs[i]));
            CHECK(count(cu, "struct dpc_kctx") == 1 && count(cu, "struct dpc_kerr") == 1,
                  "%s (%s): the CUDA source defines the context %d times, the error flag %d times", path,
                  kprec_name(precs[i]), count(cu, "struct dpc_kctx"), count(cu, "struct dpc_kerr"));
        }
        free(cu);
        dpc_cu_plan_free(&plan);
    }
    dpc_model_free(m);
}

int main(int argc, char **argv) {
    check_layouts();
    for (int i = 1; i < argc; i++)
        check_model(argv[i]);
    return finish("test_kabi");
}
