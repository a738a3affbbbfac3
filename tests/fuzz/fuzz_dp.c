/* fuzz_dp.c - libFuzzer target for the .dp front end: scanner, parser,
 * imports, semantic analysis and IR building (front_run up to FRONT_IR),
 * then fusion and the C and CUDA kernel dialects.
 *
 * The input is compiled as the text of "<tmp>/fuzz.dp", where <tmp> is
 * "<mkdtemp>/a*" "/ injmark_path; /" "*b" (a path that closes a comment,
 * holds a statement and opens a comment again: it is in every comment and
 * #line of the generated source) made on the first call and holding:
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
 *   - generated C and CUDA source lexes (every comment and literal ends,
 *     on its line for a literal) and every identifier outside comments and
 *     literals is a generated name (b12, v3, t4, c0, l_b7, a kernel's name
 *     k<i>_<op>..., which is checked to be made of op names) or a word of
 *     the emitters' own string literals (emit_words.h, made at build time):
 *     nothing copied from the model, its names or its paths;
 *   - everything is freed (LeakSanitizer checks at exit and per input with
 *     -detect_leaks=1). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "backend.h"
#include "frontend.h"
#include "kernel.h"
#include "emit_words.h"

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

/* Makes the hostile model directory inside the private one in dir. */
static void hostile_dir(char *dir, size_t n) {
    static const char *const parts[] = {"/a*", "/ injmark_path; ", "/*b"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        size_t len = strlen(dir);
        snprintf(dir + len, n - len, "%s", parts[i]);
        if (mkdir(dir, 0700) != 0)
            abort();
    }
}

static void setup(void) {
    const char *tmp = getenv("TMPDIR");
    char dir[2048];
    snprintf(dir, sizeof dir, "%.1000s/fuzz_dp.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        abort();
    hostile_dir(dir, sizeof dir);
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

/* ---------------------------------------------------------- generated source */

static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
static bool all_digits(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return n > 0;
}

static int cmp_word(const void *key, const void *elem) { return strcmp(key, *(const char *const *)elem); }

/* Whether name is "k<digits>" then "_<op name>", "_copy" or "_attention" pieces. */
static bool kernel_name_ok(const char *name) {
    const char *p = name + 1;
    size_t d = strspn(p, "0123456789");
    if (name[0] != 'k' || d == 0)
        return false;
    for (p += d; *p;) {
        size_t best = 0; /* the longest op name that fits: "log_softmax" over "log" */
        for (int op = 0; op < OP_COUNT; op++) {
            const char *o = ir_op_name((ir_op)op);
            size_t l = o ? strlen(o) : 0;
            if (p[0] == '_' && l > best && strncmp(p + 1, o, l) == 0 && (p[1 + l] == '_' || !p[1 + l]))
                best = l;
        }
        if (!best && strncmp(p, "_copy", 5) == 0 && (p[5] == '_' || !p[5]))
            best = 4;
        if (!best && strncmp(p, "_attention", 10) == 0 && (p[10] == '_' || !p[10]))
            best = 9; /* a fused attention kernel (attn.c) */
        if (!best)
            return false;
        p += 1 + best;
    }
    return true;
}

/* Whether identifier w (NUL-terminated) may appear in generated code. */
static bool ident_ok(const kgraph *kg, const char *w, size_t n) {
    if (n > 1 && strchr("bvtck", w[0]) && all_digits(w + 1, n - 1))
        return true; /* buffers, values, float4 temporaries, coordinates, kernels */
    if (n > 3 && strncmp(w, "l_b", 3) == 0 && all_digits(w + 3, n - 3))
        return true; /* lane arrays */
    if (n > 1 && strchr("orw", w[0]) && all_digits(w + 1, n - 1))
        return true; /* the short attention's output rows, score rows and weights (emit_attn_short) */
    for (int i = 0; i < kg->kernels.len; i++) {
        const char *k = ((const kernel *)kg->kernels.items[i])->name;
        if (!k)
            continue;
        size_t kl = strlen(k);
        /* the kernel, its im2col step, its one-thread and parallel copies (emit_kernel) */
        if (strncmp(w, k, kl) == 0 && (w[kl] == 0 || strcmp(w + kl, "_im2col") == 0 || strcmp(w + kl, "_1t") == 0 ||
                                       strcmp(w + kl, "_mt") == 0))
            return true;
    }
    return bsearch(w, EMIT_WORDS, sizeof EMIT_WORDS / sizeof *EMIT_WORDS, sizeof *EMIT_WORDS, cmp_word) != NULL;
}

/* Why generated source src breaks the property, or NULL. Line splices are
 * joined first, as a compiler does before it looks for comments. */
static const char *check_generated(const kgraph *kg, const char *src, char *word, size_t wn) {
    dpc_buf b;
    dpc_buf_init(&b);
    for (const char *q = src; *q; q++)
        if (q[0] == '\\' && q[1] == '\n')
            q++;
        else
            dpc_buf_put(&b, q, 1);
    const char *p = b.data ? b.data : "", *why = NULL;
    while (*p && !why) {
        if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            why = e ? NULL : "an unterminated comment";
            p = e ? e + 2 : p;
        } else if (p[0] == '/' && p[1] == '/') {
            p += strcspn(p, "\n");
        } else if (*p == '"' || *p == '\'') {
            char q = *p++;
            while (*p && *p != q && *p != '\n')
                p += p[0] == '\\' && p[1] ? 2 : 1;
            why = *p == q ? NULL : "a literal that does not end on its line";
            p += *p == q;
        } else if ((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9')) {
            /* a preprocessing number: 1e-05f, 0x1p-3f, 4LL */
            for (p++; ident_char(*p) || *p == '.' || ((*p == '+' || *p == '-') && strchr("eEpP", p[-1])); p++)
                ;
        } else if (ident_start(*p)) {
            size_t n = 1;
            while (ident_char(p[n]))
                n++;
            snprintf(word, wn, "%.*s", (int)n, p);
            if (n >= wn || !ident_ok(kg, word, n))
                why = "an identifier that dpc does not generate";
            p += n;
        } else {
            p++;
        }
    }
    dpc_buf_free(&b);
    return why;
}

static void check_source(const kgraph *kg, const char *src, const char *dialect) {
    char word[256];
    const char *why = check_generated(kg, src, word, sizeof word);
    if (why) {
        fprintf(stderr, "fuzz_dp: %s source has %s ('%s'):\n%s\n", dialect, why, word, src);
        abort();
    }
}

static void check_kernel_names(const kgraph *kg) {
    for (int i = 0; i < kg->kernels.len; i++) {
        const char *k = ((const kernel *)kg->kernels.items[i])->name;
        if (k && !kernel_name_ok(k)) {
            fprintf(stderr, "fuzz_dp: kernel name '%s' is not k<i> and op names\n", k);
            abort();
        }
    }
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
    check_kernel_names(&kg);
    dpc_buf c;
    dpc_buf_init(&c);
    emit_c(&kg, &c);
    if (!c.oom && c.data)
        check_source(&kg, c.data, "C");
    dpc_buf_free(&c);
    for (int p = KP_F32; p <= KP_BF16; p++) {
        char *src = NULL;
        dpc_cu_plan plan;
        dpc_err e;
        if (dpc_cuda_program(&kg, (kprec)p, &src, &plan, &e) == DPC_OK) {
            check_source(&kg, src, "CUDA");
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
