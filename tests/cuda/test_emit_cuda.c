/* test_emit_cuda.c - the CUDA dialect of every model compiles, without a GPU.
 *
 *     test_emit_cuda [--skip-frontend-errors] [--prec f32|bf16|f16] MODEL.dp...
 *
 * For each model: front end -> fuse_graph -> dpc_cuda_program (source and
 * launch plan) -> NVRTC to PTX for compute_80 and compute_90 -> ptxas for
 * sm_80 and sm_90, plus a CUBIN for sm_90 straight from NVRTC. Checks that
 * every launch in the plan names a kernel that the source defines and the
 * PTX exports, that every kernel of the IR has a step, that GEMM steps are
 * well formed, that emit_cuda (what `dpc source --target cuda` prints)
 * gives the same bytes, and that an error injected after a #line directive
 * is reported by NVRTC at that .dp line. With --prec bf16|f16 the same for
 * the 16-bit storage dialect, which must pass every float buffer as the
 * 16-bit type. With --one-arch (the per-op cases, which the models cover on
 * both paths): only compute_90 PTX through ptxas for sm_90, no CUBIN from
 * NVRTC and no injected error; every kernel is still compiled and assembled. */
#define _GNU_SOURCE
#include "backend.h"
#include "frontend.h" /* m->front, the graph IR */
#include "kernel.h"   /* the kernel graph */
#include "model.h"
#include "nvrtc_compile.h"
#include "ptxas.h"
#include "../check.h"
#include "model_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static bool have_ptxas;
static bool skip_frontend_errors; /* --skip-frontend-errors: cases the front end refuses are not ours */
static kprec prec = KP_F32;        /* --prec */
static bool one_arch;              /* --one-arch */

static void fn_name(const dpc_cu_launch *l, char *out, size_t n) {
    snprintf(out, n, "%s%s", l->fn, l->suffix ? l->suffix : "");
}

static void check_plan(const char *path, const dpc_model *m, const char *src, const dpc_cu_plan *plan) {
    const kgraph *kg = dpc_unit_kgraph(m->unit);
    int nk = kg->kernels.len, nb = kg->bufs.len;
    bool *covered = calloc((size_t)nk + 1, 1);
    for (int i = 0; i < plan->nsteps; i++) {
        const dpc_cu_step *s = &plan->steps[i];
        CHECK(s->kernel >= 0 && s->kernel < nk, "%s: step %d has kernel %d", path, i, s->kernel);
        if (s->kernel < 0 || s->kernel >= nk)
            continue;
        covered[s->kernel] = true;
        if (i > 0)
            CHECK(s->kernel >= plan->steps[i - 1].kernel, "%s: steps out of order at %d", path, i);
        if (s->kind == DPC_CU_LAUNCH) {
            const dpc_cu_launch *l = &s->u.launch;
            char name[512], decl[600];
            fn_name(l, name, sizeof name);
            snprintf(decl, sizeof decl, "extern \"C\" __global__ void %s(", name);
            CHECK(strstr(src, decl) != NULL, "%s: step %d launches %s, which the source lacks", path, i, name);
            CHECK(l->nbufs >= 1 && l->nbufs <= DPC_CU_MAX_PARAMS, "%s: %s has %d buffers", path, name, l->nbufs);
            for (int b = 0; b < l->nbufs; b++)
                CHECK(l->bufs[b] >= 0 && l->bufs[b] < nb, "%s: %s buffer %d", path, name, l->bufs[b]);
            CHECK(l->vec == 1 || l->vec == 4, "%s: %s vec %d", path, name, l->vec);
            CHECK(l->work.k >= 0 && l->work.p >= 0 && l->work.p <= 2, "%s: %s work", path, name);
        } else if (s->kind == DPC_CU_CONV) { /* the im2col + GEMM pairs it stands for, then the epilogue */
            const dpc_cu_conv *c = &s->u.conv;
            CHECK(c->x >= 0 && c->x < nb && c->w >= 0 && c->w < nb && c->y >= 0 && c->y < nb && c->out >= 0 &&
                      c->out < nb && c->bias < nb && c->z < nb,
                  "%s: conv buffers", path);
            CHECK(c->G >= 1 && c->nfallback == 2 * c->G && i + c->nfallback + 1 < plan->nsteps + 1,
                  "%s: conv step %d: %d fallback steps for %lld groups", path, i, c->nfallback, (long long)c->G);
            for (int j = 1; j <= c->nfallback + 1 && i + j < plan->nsteps; j++) {
                const dpc_cu_step *f = &plan->steps[i + j];
                bool want_launch = j % 2 == 1;
                CHECK(f->kernel == s->kernel && (f->kind == DPC_CU_LAUNCH) == want_launch &&
                          (j > c->nfallback || !want_launch || strcmp(f->u.launch.suffix, "_im2col") == 0),
                      "%s: conv step %d: step %d is not its fallback", path, i, i + j);
            }
            CHECK(c->fused || (c->z < 0 && c->act == DPC_CU_ACT_NONE), "%s: an unfused conv with z or act", path);
        } else {
            const dpc_cu_gemm *g = &s->u.gemm;
            CHECK(g->a >= 0 && g->a < nb && g->b >= 0 && g->b < nb && g->c >= 0 && g->c < nb, "%s: GEMM buffers",
                  path);
            CHECK(g->K.k > 0 && g->N.k > 0, "%s: GEMM sizes", path);
            CHECK((g->epilogue == 0) == (g->bias < 0), "%s: epilogue %d with bias %d", path, g->epilogue, g->bias);
            CHECK(g->nloops >= 0 && g->nloops <= DPC_CU_MAX_LOOPS, "%s: loops", path);
        }
    }
    for (int k = 0; k < nk; k++)
        CHECK(covered[k], "%s: kernel %s has no step", path, ((const kernel *)kg->kernels.items[k])->name);
    free(covered);
}

static void check_ptx_entries(const char *path, const char *arch, const char *ptx, const dpc_cu_plan *plan) {
    for (int i = 0; i < plan->nsteps; i++) {
        if (plan->steps[i].kind != DPC_CU_LAUNCH)
            continue;
        char name[512], entry[600];
        fn_name(&plan->steps[i].u.launch, name, sizeof name);
        snprintf(entry, sizeof entry, ".entry %s(", name);
        CHECK(strstr(ptx, entry) != NULL, "%s %s: PTX lacks %s", path, arch, entry);
    }
}

/* Inserts a reference to an undefined name right after the first #line
 * that names a .dp file: NVRTC must report it at that file and line. */
static void check_injected_error(const char *path, const char *src, const char *unit) {
    const char *p = src;
    while ((p = strstr(p, "#line ")) != NULL) {
        const char *q = strchr(p, '"');
        const char *end = q ? strchr(q + 1, '"') : NULL;
        if (end && end - q > 4 && strncmp(end - 3, ".dp", 3) == 0)
            break;
        p += 6;
    }
    if (!p) { /* only cuBLASLt steps: no device code to break */
        printf("  no kernel to inject an error into\n");
        return;
    }
    int line = atoi(p + 6);
    const char *q = strchr(p, '"');
    const char *end = strchr(q + 1, '"');
    char file[512];
    snprintf(file, sizeof file, "%.*s", (int)(end - q - 1), q + 1);
    const char *eol = strchr(p, '\n');
    dpc_buf bad;
    dpc_buf_init(&bad);
    dpc_buf_put(&bad, src, (size_t)(eol + 1 - src));
    dpc_buf_puts(&bad, "    dpc_injected_undefined_name += 1.0f;\n");
    dpc_buf_puts(&bad, eol + 1);
    dpc_buf img;
    dpc_buf_init(&img);
    dpc_err e = {0};
    dpc_status s = dpc_nvrtc_compile(bad.data, unit, "compute_90", NULL, 0, &img, NULL, &e);
    char want[600];
    snprintf(want, sizeof want, "%s(%d): error", file, line);
    CHECK(s == DPC_EDEVICE, "%s: injected error compiled (%d)", path, (int)s);
    CHECK(strstr(e.msg, want) != NULL, "%s: injected error not reported at %s:\n%s", path, want, e.msg);
    CHECK(strstr(e.msg, "dpc_injected_undefined_name") != NULL, "%s: message lacks the name:\n%s", path, e.msg);
    if (s == DPC_EDEVICE)
        printf("  injected error: %s\n", strchr(e.msg, '\n') ? strchr(e.msg, '\n') + 1 : e.msg);
    dpc_buf_free(&bad);
    dpc_buf_free(&img);
}

static void test_model(const char *path) {
    dpc_model *m = NULL;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_err e = {0};
    dpc_status s = dpc_model_compile(path, &m, &diags, &e);
    if (s != DPC_OK && skip_frontend_errors) {
        printf("%s: the front end refuses it, skipped\n", path);
        dpc_buf_free(&diags);
        return;
    }
    CHECK(s == DPC_OK, "%s does not compile: %s\n%s", path, e.msg, diags.data ? diags.data : "");
    dpc_buf_free(&diags);
    if (s != DPC_OK)
        return;
    char *src = NULL;
    dpc_cu_plan plan;
    s = dpc_unit_cuda_program(m->unit, prec, &src, &plan, &e);
    CHECK(s == DPC_OK, "%s: dpc_cuda_program: %s", path, e.msg);
    if (s != DPC_OK) {
        dpc_model_free(m);
        return;
    }
    int launches = 0, gemms = 0;
    for (int i = 0; i < plan.nsteps; i++)
        plan.steps[i].kind == DPC_CU_LAUNCH ? launches++ : plan.steps[i].kind == DPC_CU_GEMM ? gemms++ : 0;
    printf("%s: %d kernels -> %d CUDA functions, %d launches, %d cuBLASLt GEMMs, %zu bytes of source\n", path,
           dpc_unit_kgraph(m->unit)->kernels.len, plan.nkernels, launches, gemms, strlen(src));
    CHECK(strstr(src, "unsupported") == NULL, "%s: the source has an unsupported op", path);
    if (prec != KP_F32) {
        const char *want = prec == KP_BF16 ? "dpc_bf16 *__restrict__" : "dpc_f16 *__restrict__";
        CHECK(plan.nkernels == 0 || strstr(src, want) != NULL, "%s: no %s parameter in the %s source", path, want,
              kprec_name(prec));
        CHECK(strstr(src, "float *__restrict__") == NULL && strstr(src, "float4") == NULL,
              "%s: a float buffer left in f32 in the %s source", path, kprec_name(prec));
    }
    check_plan(path, m, src, &plan);

    /* what `dpc source --target cuda` prints is the same program */
    dpc_buf same;
    dpc_buf_init(&same);
    emit_cuda(dpc_unit_kgraph(m->unit), prec, &same);
    CHECK(same.data && strcmp(same.data, src) == 0, "%s: emit_cuda differs from dpc_cuda_program", path);
    dpc_buf_free(&same);

    char unit[300];
    snprintf(unit, sizeof unit, "%s.cu", dpc_unit_kgraph(m->unit)->g->model_name);
    const char *archs[] = {"compute_80", "compute_90"};
    const char *sms[] = {"sm_80", "sm_90"};
    for (int a = one_arch ? 1 : 0; a < 2; a++) {
        dpc_buf img, log;
        dpc_buf_init(&img);
        dpc_buf_init(&log);
        s = dpc_nvrtc_compile(src, unit, archs[a], NULL, 0, &img, &log, &e);
        CHECK(s == DPC_OK, "%s: NVRTC %s: %s", path, archs[a], e.msg);
        if (log.len > 1)
            printf("  NVRTC log (%s):\n%s\n", archs[a], log.data);
        if (s == DPC_OK) {
            check_ptx_entries(path, archs[a], img.data, &plan);
            if (have_ptxas) {
                dpc_buf plog;
                dpc_buf_init(&plog);
                s = dpc_ptxas_check(img.data, img.len, sms[a], &plog, &e);
                CHECK(s == DPC_OK, "%s: ptxas %s: %s", path, sms[a], e.msg);
                dpc_buf_free(&plog);
            }
        }
        dpc_buf_free(&img);
        dpc_buf_free(&log);
    }
    if (one_arch) {
        free(src);
        dpc_cu_plan_free(&plan);
        dpc_model_free(m);
        return;
    }
    /* a CUBIN for the H100/H200, as the backend loads it */
    dpc_buf cubin;
    dpc_buf_init(&cubin);
    s = dpc_nvrtc_compile(src, unit, "sm_90", NULL, 0, &cubin, NULL, &e);
    CHECK(s == DPC_OK && cubin.len > 0, "%s: NVRTC sm_90: %s", path, e.msg);
    dpc_buf_free(&cubin);

    check_injected_error(path, src, unit);
    free(src);
    dpc_cu_plan_free(&plan);
    dpc_model_free(m);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_emit_cuda MODEL.dp...\n");
        return 2;
    }
    char ptxas[4096];
    have_ptxas = dpc_ptxas_find(ptxas, sizeof ptxas);
    if (!have_ptxas)
        printf("no ptxas: PTX is compiled but not assembled\n");
    if (argc > 1 && strcmp(argv[1], "--one-arch") == 0) {
        one_arch = true;
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    int first = model_args("test_emit_cuda", argc, argv, &skip_frontend_errors, &prec);
    if (first < 0)
        return 2;
    for (int i = first; i < argc; i++)
        test_model(argv[i]);
    if (failures) {
        fprintf(stderr, "test_emit_cuda: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_emit_cuda: %d model(s), all checks passed\n", argc - first);
    return 0;
}
