/* emit_c.c - renders the kernel IR as plain C for the CPU backend.
 *
 * One static function per kernel and one entry point, dpc_forward, that
 * runs them in order; where the kernel graph has prepare kernels (they read
 * parameters and constants only: kgraph.nprepare), a second entry point,
 * dpc_prepare, runs those, and the runtime calls it once per load. Sizes that depend on the batch are written in terms of
 * N (ctx->N); everything else is a literal, so the host compiler can unroll
 * and vectorise. GEMMs call back into the runtime (ctx->sgemm: OpenBLAS or
 * oneDNN), and their epilogue is a loop over the result in the same
 * kernel. Each op is preceded by a comment naming its .dp line. The output
 * is deterministic: the same graph always gives the same bytes, which is
 * what the content-addressed cache keys on.
 *
 * This file is the frame: the prelude, each kernel's function (twice where
 * a single-thread copy pays) and the entry points; each kind's body is in
 * emit_c_<kind>.c (emit_c.h). */
#include "emit_c.h"
#include "kabi_text.h"
#include "kmath_text.h"

#include <stdlib.h>
#include <string.h>

/* Declares a pointer per buffer the kernel touches. */
static void declare_buffers(const kgraph *kg, const kernel *k, dpc_buf *o) {
    bool *seen = calloc((size_t)kg->bufs.len + 1, 1);
    if (!seen)
        return;
    int outb = kg->buf_of[k->out->id];
    const char *ot = k->out->dt == IR_I64 ? "int64_t" : "float";
    dpc_buf_printf(o, "    %s *const b%d = (%s *)ctx->buf[%d];\n", ot, outb, ot, outb);
    seen[outb] = true;
    koperand_iter it = kernel_operands(kg, k, -1);
    int id, b;
    while (koperand_next(&it, &id, &b)) {
        if (seen[b])
            continue;
        seen[b] = true;
        /* by what the buffer holds: i64 inputs are int64, values computed in
         * forward (bool and i64 too) are floats */
        const char *t = ((const kbuf *)kg->bufs.items[b])->esize == 8 ? "int64_t" : "float";
        dpc_buf_printf(o, "    const %s *const b%d = (const %s *)ctx->buf[%d];\n", t, b, t, b);
    }
    free(seen);
}

/* The body of kernel k's function, after its opening line. */
static void emit_kernel_body(const kgraph *kg, const kernel *k, dpc_buf *o) {
    dpc_buf_puts(o, "    const int64_t N = ctx->N;\n    (void)N;\n");
    declare_buffers(kg, k, o);
    emit_c_kept_loops(kg, k, o);
    switch (k->kind) {
    case KK_ELEMWISE: emit_chain_loop(kg, k, o, NULL); break;
    case KK_GEMM: emit_c_gemm(kg, k, o); break;
    case KK_CONV: emit_c_conv(kg, k, o); break;
    case KK_POOL: emit_c_pool(kg, k, o); break;
    case KK_ROW: emit_c_row(kg, k, o); break;
    case KK_REDUCE: emit_c_reduce(kg, k, o); break;
    case KK_EMBED: emit_c_embed(kg, k, o); break;
    case KK_CAT: emit_c_cat(kg, k, o); break;
    case KK_COPY: emit_c_copy(kg, k, o); break;
    case KK_ATTN: emit_attn_c(kg, k, o); break;
    case KK_RESAMPLE: emit_c_resample(kg, k, o); break;
    }
    dpc_buf_puts(o, "    return 0;\n}\n");
}

/* body without the lines of emit_par_for's pragma */
static void put_without_pragmas(dpc_buf *o, const char *body) {
    while (*body) {
        const char *nl = strchr(body, '\n');
        size_t n = nl ? (size_t)(nl - body) + 1 : strlen(body);
        const char *t = body + strspn(body, " ");
        if (strncmp(t, PAR_FOR_PRAGMA, strlen(PAR_FOR_PRAGMA)) != 0)
            dpc_buf_put(o, body, n);
        body += n;
    }
}

/* The most elements of kernel k's output and operands at N = 1. */
static int64_t sample_max(const kgraph *kg, const kernel *k) {
    int64_t m = 1;
    const shape *s = &k->out->sh;
    koperand_iter it = kernel_operands(kg, k, -1);
    int id, b;
    do {
        int64_t n = 1;
        for (int i = 0; i < s->rank; i++)
            n *= s->d[i].k;
        m = n > m ? n : m;
    } while (koperand_next(&it, &id, &b) && (s = &kgraph_node(kg, id)->sh));
    return m;
}

/* NAME: NAME_mt when one of its loops may fork, else NAME_1t. No loop
 * touches more elements than the largest of the kernel's output and operands
 * (the attention's loop excepted, whose work counts the scores), so where
 * those are all under DPC_PAR_MIN every `if` of NAME_mt is false: the same
 * loops on the calling thread, without entering libgomp. */
static void emit_dispatch(const kgraph *kg, const kernel *k, dpc_buf *o) {
    char t[96];
    dpc_buf_printf(o, "static int %s(dpc_kctx *ctx) {\n    const int64_t N = ctx->N;\n    (void)N;\n"
                      "    if (ctx->threads > 1",
                   k->name);
    if (k->kind != KK_ATTN) {
        dpc_buf_printf(o, " && ((%s) >= %dLL", emit_prod(t, sizeof t, &k->out->sh, 0, k->out->sh.rank), DPC_PAR_MIN);
        koperand_iter it = kernel_operands(kg, k, -1);
        int id, b;
        while (koperand_next(&it, &id, &b)) {
            const shape *s = &kgraph_node(kg, id)->sh;
            dpc_buf_printf(o, " || (%s) >= %dLL", emit_prod(t, sizeof t, s, 0, s->rank), DPC_PAR_MIN);
        }
        dpc_buf_puts(o, ")");
    }
    dpc_buf_printf(o, ")\n        return %s_mt(ctx);\n    return %s_1t(ctx);\n}\n", k->name, k->name);
}

/* A kernel with a parallel loop is emitted twice, NAME_mt with its pragmas
 * and NAME_1t without, NAME picking by ctx->threads: a parallel region
 * whose `if` is false still enters libgomp (a team allocated and freed, a
 * futex wake; 1-2 us measured), which at one thread is most of a small
 * kernel's time (vit_small at batch 1 runs 26 kernels in about 60 us;
 * docs/performance.md, "Transformer rows, part 3"). The copy doubles the
 * host compiler's work, so only forward kernels that are small per sample
 * get it: the prepare kernels run once, and a kernel of DPC_PAR_MIN
 * elements a sample runs for tens of us, where the region's cost is noise. */
static void emit_kernel(const kgraph *kg, const kernel *k, bool forward, dpc_buf *o) {
    dpc_buf body;
    dpc_buf_init(&body);
    emit_kernel_body(kg, k, &body);
    if (body.oom || !body.data) {
        o->oom = true;
        dpc_buf_free(&body);
        return;
    }
    dpc_buf_printf(o, "\n#undef KERNEL_ID\n#define KERNEL_ID %d\n", k->id);
    if (!forward || sample_max(kg, k) >= DPC_PAR_MIN || !strstr(body.data, PAR_FOR_PRAGMA)) {
        dpc_buf_printf(o, "static int %s(dpc_kctx *ctx) {\n", k->name);
        dpc_buf_put(o, body.data, body.len);
    } else {
        /* not inlined into dpc_forward: perf names each kernel */
        dpc_buf_printf(o, "__attribute__((noinline)) static int %s_1t(dpc_kctx *ctx) {\n", k->name);
        put_without_pragmas(o, body.data);
        dpc_buf_printf(o, "static int %s_mt(dpc_kctx *ctx) {\n", k->name);
        dpc_buf_put(o, body.data, body.len);
        emit_dispatch(kg, k, o);
    }
    dpc_buf_free(&body);
}

void emit_c(const kgraph *kg, dpc_buf *o) {
    const ir_graph *g = kg->g;
    dpc_buf_printf(o, "/* dpc %s: CPU kernels for ", DPC_VERSION);
    emit_comment_text(o, g->model_name);
    dpc_buf_puts(o, " (");
    emit_comment_text(o, g->file);
    dpc_buf_puts(o, "). Generated; do not edit. */\n");
    /* the ABI as the runtime compiles it (kabi.h) */
    dpc_buf_puts(o, "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n\n" DPC_KABI_C_TEXT);
    /* exp, tanh, erf, log, log1p that vectorise (compiler/kmath.h) */
    dpc_buf_puts(o, "\n" DPC_KMATH_TEXT);
    for (int i = 0; i < kg->kernels.len; i++) {
        if (kg->nprepare && (i == 0 || i == kg->nprepare))
            dpc_buf_puts(o, i == 0 ? "\n/* ---- prepare kernels: parameters and constants only, run once by\n"
                                     " * dpc_prepare when the weights are bound ---- */\n"
                                   : "\n/* ---- forward kernels, run by dpc_forward ---- */\n");
        emit_kernel(kg, kg->kernels.items[i], i >= kg->nprepare, o);
    }
    /* the prepare entry exists only where there are prepare kernels */
    for (int i = 0; i < kg->nprepare; i++) {
        const kernel *k = kg->kernels.items[i];
        if (i == 0)
            dpc_buf_puts(o, "\nint dpc_prepare(dpc_kctx *ctx);\nint dpc_prepare(dpc_kctx *ctx) {\n    int r;\n");
        dpc_buf_printf(o, "    if (ctx->fail_at == %d) return -%d;\n    if ((r = %s(ctx))) return r;\n", i, i + 1, k->name);
        if (i == kg->nprepare - 1)
            dpc_buf_puts(o, "    return 0;\n}\n");
    }
    dpc_buf_printf(o, "\nint dpc_forward(dpc_kctx *ctx);\nint dpc_forward(dpc_kctx *ctx) {\n    int r;\n");
    for (int i = kg->nprepare; i < kg->kernels.len; i++) {
        const kernel *k = kg->kernels.items[i];
        dpc_buf_printf(o, "    if (ctx->fail_at == %d) return -%d;\n    if ((r = %s(ctx))) return r;\n", i, i + 1, k->name);
    }
    dpc_buf_puts(o, "    return 0;\n}\n");
}
