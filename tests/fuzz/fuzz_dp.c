/* fuzz_dp.c - libFuzzer target for the .dp front end: scanner, parser,
 * imports, semantic analysis and IR building (front_run up to FRONT_IR),
 * then fusion and the C and CUDA kernel dialects.
 *
 * The input is compiled as the text of "<tmp>/fuzz.dp", where <tmp> is a
 * private directory made on the first call and holding:
 *   fuzz.dp   an empty placeholder, so that the model directory resolves
 *             and `import "fuzz.dp"` is a cycle, as for a real file;
 *   lib.dp    a small valid module (Block) to import;
 *   bad.dp    a file with a syntax error, so errors in imports are reached;
 *   sub/      a directory, for the "is a directory" import error.
 * The input itself is never written to disk.
 *
 * Invariants checked (abort() = a finding):
 *   - a failure is DPC_EUSER with at least one rendered diagnostic whose
 *     first line is "<tmp>/<file>.dp:<line>:<col>: error: ..." (every error
 *     in a text the user wrote has a location), or DPC_ENOMEM;
 *   - a success prints a module tree and an IR starting with "graph " and
 *     ending with a "  return" line;
 *   - everything is freed (LeakSanitizer checks at exit and per input with
 *     -detect_leaks=1). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "backend.h"
#include "frontend.h"

#include <setjmp.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_path[4096];
static size_t g_dir_len; /* g_path[0 .. g_dir_len) is "<tmp>/" */

static void put_file(const char *dir, const char *name, const char *text) {
    char p[8300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
}

static void setup(void) {
    const char *tmp = getenv("TMPDIR");
    char dir[2048];
    snprintf(dir, sizeof dir, "%.1000s/fuzz_dp.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        abort();
    put_file(dir, "fuzz.dp", "");
    put_file(dir, "lib.dp",
             "module Block(dim: int = 4) {\n"
             "    fc = Linear(dim, dim)\n"
             "    forward(x: [N, dim]) { return relu(fc(x)) }\n"
             "}\n");
    put_file(dir, "bad.dp", "module Bad {\n    fc = Linear(4, 4\n}\n");
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0700);
    snprintf(g_path, sizeof g_path, "%s/fuzz.dp", dir);
    g_dir_len = strlen(dir) + 1;
}

/* Says why an input is a finding, then aborts (libFuzzer saves the input). */
static void finding(const char *why, dpc_status s, const dpc_err *e, const dpc_buf *diags) {
    fprintf(stderr, "fuzz_dp: %s (status %d, '%s')\n%s", why, (int)s, e ? e->msg : "",
            diags && diags->data ? diags->data : "");
    abort();
}

static void check_failure(dpc_status s, const dpc_err *e, const dpc_buf *diags) {
    if (s == DPC_ENOMEM)
        return;
    if (s != DPC_EUSER || diags->len == 0 || !diags->data)
        finding("failure without a diagnostic, or with an unexpected status", s, e, diags);
    /* first line: "<tmp>/<file>.dp:<line>:<col>: error: " (the file may be
     * the input or one it imports) */
    const char *p = diags->data;
    if (strncmp(p, g_path, g_dir_len) != 0)
        finding("first diagnostic does not name a file of the model", s, e, diags);
    p = strstr(p, ".dp:");
    if (!p || memchr(diags->data, '\n', (size_t)(p - diags->data)))
        finding("first diagnostic has no FILE.dp:LINE:COL location", s, e, diags);
    p += 4;
    int line = 0, col = 0, used = 0;
    if (sscanf(p, "%d:%d: error: %n", &line, &col, &used) != 2 || used == 0 || line < 1 || col < 1)
        finding("first diagnostic has no valid LINE:COL", s, e, diags);
}

static void check_success(dpc_front *f) {
    dpc_buf out;
    dpc_buf_init(&out);
    repr_model(&f->m, &out);
    if (out.len == 0 || !out.data || out.data[out.len - 1] != '\n')
        finding("success, but the module tree prints nothing", DPC_OK, NULL, &out);
    dpc_buf_free(&out);

    dpc_buf_init(&out);
    ir_print(&f->g, &out);
    if (out.len == 0 || !out.data || strncmp(out.data, "graph ", 6) != 0 || out.data[out.len - 1] != '\n')
        finding("success, but the IR does not start with 'graph '", DPC_OK, NULL, &out);
    /* the last line returns something */
    const char *last = out.data + out.len - 1;
    while (last > out.data && last[-1] != '\n')
        last--;
    if (strncmp(last, "  return ", 9) != 0)
        finding("success, but the IR does not end with a return", DPC_OK, NULL, &out);
    dpc_buf_free(&out);
}

/* A graph the front end accepts also goes through fusion and both kernel
 * dialects (f32 and bf16 storage for CUDA): source text only, nothing is
 * compiled. They may refuse a graph with an error, never crash. */
static void lower(dpc_front *f) {
    if (setjmp(f->oom))
        return; /* the arena ran out: fusion stops there, as in dpc_model_compile */
    kgraph kg;
    memset(&kg, 0, sizeof kg);
    fuse_graph(&f->ctx, &f->g, &kg);
    dpc_buf c;
    dpc_buf_init(&c);
    emit_c(&kg, &c);
    dpc_buf_free(&c);
    for (int p = KP_F32; p <= KP_BF16; p++) {
        char *src = NULL;
        dpc_cu_plan plan;
        dpc_err e;
        if (dpc_cuda_program(&kg, (kprec)p, &src, &plan, &e) == DPC_OK) {
            free(src);
            dpc_cu_plan_free(&plan);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_path[0])
        setup();
    /* front_run copies the text; keep the caller's bytes as they are (no NUL
     * terminator), so ASan sees any read past the end. */
    dpc_front *f = NULL;
    dpc_buf diags;
    dpc_err e = {0};
    dpc_buf_init(&diags);
    dpc_status s = front_run(g_path, (const char *)data, size, FRONT_IR, &f, &diags, &e);
    if (s == DPC_OK) {
        if (!f)
            finding("DPC_OK without a result", s, &e, &diags);
        check_success(f);
        lower(f);
        front_free(f);
    } else {
        if (f)
            finding("a failure that returned a result", s, &e, &diags);
        check_failure(s, &e, &diags);
    }
    dpc_buf_free(&diags);
    return 0;
}
