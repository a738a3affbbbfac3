/* emit_cuda.c - the CUDA dialect of the kernel IR, for NVRTC, and its
 * launch plan (kabi.h) for backend_cuda.c.
 *
 * Device code only: one extern "C" __global__ function per launch, named
 * after its kernel (k3_fc1_linear_relu; a convolution adds
 * k5_conv_im2col), taking its buffers as pointers and a small context by
 * value (scalars, the error flag, the batch size N, the convolution
 * group). The thread mapping per kind:
 *   elementwise   grid-stride loop over the output; four elements per load and
 *                 store (float4, or 8 bytes in 16-bit storage) when every
 *                 operand is read at the output's index
 *   GEMM, conv    cuBLASLt (bias and bias+ReLU as cuBLASLt epilogues), then
 *                 the rest of the fused chain as an elementwise kernel over
 *                 the result; a convolution is im2col + GEMM + a kernel that
 *                 scatters back to NCHW with bias and the fused chain
 *   row           softmax, log_softmax, layer_norm: one warp per row with
 *                 shuffle reductions, or one block per row for long rows
 *   reduce        one warp per output over a last axis, else one thread per
 *                 output looping over the axis
 *   pool, cat, copy, embedding: one thread per output element; embedding
 *                 checks its indices and raises the error flag
 * Each op is preceded by a #line directive naming its .dp line, so NVRTC
 * errors point at the model; generated scaffolding is mapped back to the
 * generated source ("<Model>.cu"). Sizes that depend on the batch are
 * written in terms of N, everything else is a literal. The output is
 * deterministic, as the kernel cache requires. */
#include "emit.h"
#include "kabi.h"
#include "kabi_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- state */

typedef struct cg {
    const kgraph *kg;
    dpc_buf *o;
    dpc_cu_plan *plan; /* may be NULL: source only */
    int cap;
    int kernel;        /* index of the kernel being emitted */
    size_t counted;    /* bytes of o already scanned for newlines */
    int lines;         /* newlines in o[0, counted) */
    const char *unit;  /* the generated source's own name, "<Model>.cu" */
    /* one function per distinct body: the repeated layers of a model share
     * their kernels (see dedupe) */
    size_t fn_start;   /* where the function being written starts, or NO_FN */
    size_t saved_counted;
    int saved_lines;
    char fn_name[512];
    const char *cur_fn, *cur_suffix; /* the function launches refer to */
    struct seen_fn {
        char *canon;
        const char *fn, *suffix;
    } *seen;
    int nseen, capseen;
    dpc_status st;     /* first failure */
    dpc_err *e;
    kprec prec;        /* how float buffers are stored */
    const char *ft;    /* their element type: float, dpc_bf16, dpc_f16 */
} cg;

static ir_node *nd(const kgraph *kg, int id) { return (ir_node *)kgraph_node(kg, id); }

static const kbuf *kb(const cg *g, int id) { return g->kg->bufs.items[id]; }

static void fail(cg *g, const ir_node *n, const char *what) {
    if (g->st != DPC_OK)
        return;
    g->st = DPC_EUSER;
    if (g->e) {
        if (n && n->at.file)
            dpc_errf(g->e, DPC_EUSER, "%s:%d: %s is not supported by the CUDA backend: %s", n->at.file->path,
                     n->at.line, ir_op_name(n->op), what);
        else
            dpc_errf(g->e, DPC_EUSER, "the CUDA backend cannot run this graph: %s", what);
    }
    dpc_buf_puts(g->o, "#error \"unsupported: ");
    emit_string_text(g->o, what);
    dpc_buf_puts(g->o, "\"\n");
}

/* ---------------------------------------------------------- sizes: k * N^p */

static dpc_cu_dim cd(int64_t k, int p) { return (dpc_cu_dim){k, p}; }
static dpc_cu_dim cd_of(dim d) { return cd(d.k, d.sym ? 1 : 0); }
static dpc_cu_dim cd_mul(dpc_cu_dim a, dpc_cu_dim b) { return cd(a.k * b.k, a.p + b.p); }
static bool cd_eq(dpc_cu_dim a, dpc_cu_dim b) { return a.k == b.k && (a.k == 0 || a.p == b.p); }
static bool cd_one(dpc_cu_dim a) { return a.k == 1 && a.p == 0; }

static dpc_cu_dim cd_prod(const shape *s, int from, int to) {
    dpc_cu_dim r = cd(1, 0);
    for (int i = from; i < to; i++)
        r = cd_mul(r, cd_of(s->d[i]));
    return r;
}

/* As a device-code expression. */
static const char *cd_str(char *b, size_t n, dpc_cu_dim d) {
    if (d.p == 0)
        snprintf(b, n, "%lldLL", (long long)d.k);
    else if (d.p == 1)
        snprintf(b, n, d.k == 1 ? "N" : "(%lldLL * N)", (long long)d.k);
    else
        snprintf(b, n, "(%lldLL * N * N)", (long long)d.k);
    return b;
}

/* As text for a comment: 8, N, 8*N. */
static const char *cd_txt(char *b, size_t n, dpc_cu_dim d) {
    if (d.p == 0)
        snprintf(b, n, "%lld", (long long)d.k);
    else if (d.k == 1)
        snprintf(b, n, d.p == 1 ? "N" : "N*N");
    else
        snprintf(b, n, d.p == 1 ? "%lld*N" : "%lld*N*N", (long long)d.k);
    return b;
}

/* ---------------------------------------------------------- line mapping */

static void count_lines(cg *g) {
    for (; g->counted < g->o->len; g->counted++)
        if (g->o->data[g->counted] == '\n')
            g->lines++;
}

/* "FILE:LINE (SCOPE)" of op n inside a comment: the path and the scope are
 * the user's text, so they go through emit_comment_text. */
static void comment_loc(dpc_buf *o, const ir_node *n) {
    if (n->at.file)
        emit_comment_text(o, n->at.file->path);
    else
        dpc_buf_puts(o, "?");
    dpc_buf_printf(o, ":%d", n->at.line);
    if (n->scope && n->scope[0]) {
        dpc_buf_puts(o, " in ");
        emit_comment_text(o, n->scope);
    }
}

/* `#line` naming op n's .dp line (nothing for an op without a location). */
static void line_of(cg *g, const ir_node *n) {
    if (!n || !n->at.file || n->at.line <= 0)
        return;
    dpc_buf_printf(g->o, "#line %d \"", n->at.line);
    emit_string_text(g->o, n->at.file->path);
    dpc_buf_puts(g->o, "\"\n");
}

/* Back to the generated source's own numbering. */
static void line_reset(cg *g) {
    count_lines(g);
    dpc_buf_printf(g->o, "#line %d \"", g->lines + 2);
    emit_string_text(g->o, g->unit);
    dpc_buf_puts(g->o, "\"\n");
}

/* ---------------------------------------------------------- the plan */

#define NO_FN ((size_t)-1)

/* The function text with everything that names this instance rather than
 * its computation made neutral: comments and #line dropped, its own name
 * replaced, buffers (b42), values (v17), float4 temporaries (t42) and lane
 * arrays (l_b42) renumbered in order of appearance. Two kernels with the
 * same canonical text compute the same thing from their (positional)
 * arguments. */
static char *canonical(const char *p, size_t n, const char *self) {
    dpc_buf o;
    dpc_buf_init(&o);
    char names[4][256][16];
    int counts[4] = {0};
    size_t selfn = strlen(self);
    for (size_t i = 0; i < n;) {
        if (p[i] == '/' && i + 1 < n && p[i + 1] == '*') {
            const char *end = strstr(p + i + 2, "*/");
            i = end && (size_t)(end - p) < n ? (size_t)(end - p) + 2 : n;
            continue;
        }
        if (p[i] == '#' && (i == 0 || p[i - 1] == '\n')) {
            while (i < n && p[i] != '\n')
                i++;
            continue;
        }
        if ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') || p[i] == '_') {
            size_t j = i;
            while (j < n && ((p[j] >= 'a' && p[j] <= 'z') || (p[j] >= 'A' && p[j] <= 'Z') || p[j] == '_' ||
                             (p[j] >= '0' && p[j] <= '9')))
                j++;
            size_t len = j - i;
            int cat = -1;
            size_t pre = 0;
            if (len == selfn && memcmp(p + i, self, len) == 0) {
                dpc_buf_puts(&o, "F");
                i = j;
                continue;
            }
            if (len > 3 && p[i] == 'l' && p[i + 1] == '_' && p[i + 2] == 'b')
                cat = 3, pre = 3;
            else if (len > 1 && (p[i] == 'b' || p[i] == 'v' || p[i] == 't'))
                cat = p[i] == 'b' ? 0 : p[i] == 'v' ? 1 : 2, pre = 1;
            bool digits = cat >= 0 && len - pre < 12;
            for (size_t k = i + pre; digits && k < j; k++)
                digits = p[k] >= '0' && p[k] <= '9';
            if (!digits) {
                dpc_buf_put(&o, p + i, len);
                i = j;
                continue;
            }
            char id[16];
            snprintf(id, sizeof id, "%.*s", (int)len, p + i);
            int k = 0;
            while (k < counts[cat] && strcmp(names[cat][k], id) != 0)
                k++;
            if (k == counts[cat] && k < 256)
                snprintf(names[cat][counts[cat]++], 16, "%s", id);
            dpc_buf_printf(&o, "%c#%d", "bvtl"[cat], k);
            i = j;
            continue;
        }
        dpc_buf_put(&o, p + i, 1);
        i++;
    }
    return dpc_buf_take(&o);
}

/* Called when a function's text is complete: if an identical function was
 * written before, drop this one and launch that one instead. */
static void dedupe(cg *g, const char *fn, const char *suffix) {
    g->cur_fn = fn;
    g->cur_suffix = suffix;
    if (g->fn_start == NO_FN || g->fn_start > g->o->len || g->o->oom)
        return;
    char *canon = canonical(g->o->data + g->fn_start, g->o->len - g->fn_start, g->fn_name);
    size_t start = g->fn_start;
    g->fn_start = NO_FN;
    if (!canon)
        return;
    for (int i = 0; i < g->nseen; i++)
        if (strcmp(g->seen[i].canon, canon) == 0) {
            free(canon);
            g->o->len = start;
            g->o->data[start] = 0;
            g->counted = g->saved_counted;
            g->lines = g->saved_lines;
            g->cur_fn = g->seen[i].fn;
            g->cur_suffix = g->seen[i].suffix;
            dpc_buf_printf(g->o, "\n/* %s%s: the same as %s%s */\n", fn, suffix, g->cur_fn, g->cur_suffix);
            return;
        }
    if (g->nseen == g->capseen) {
        int cap = g->capseen ? 2 * g->capseen : 32;
        struct seen_fn *s = realloc(g->seen, sizeof *s * (size_t)cap);
        if (!s) {
            free(canon);
            return;
        }
        g->seen = s;
        g->capseen = cap;
    }
    g->seen[g->nseen++] = (struct seen_fn){canon, fn, suffix};
    if (g->plan)
        g->plan->nkernels++;
}

static dpc_cu_step *new_step(cg *g, dpc_cu_step_kind kind) {
    static dpc_cu_step dummy;
    if (!g->plan) {
        memset(&dummy, 0, sizeof dummy);
        return &dummy;
    }
    dpc_cu_plan *p = g->plan;
    if (p->nsteps == g->cap) {
        int cap = g->cap ? 2 * g->cap : 32;
        dpc_cu_step *s = realloc(p->steps, sizeof *s * (size_t)cap);
        if (!s) {
            if (g->st == DPC_OK) {
                g->st = DPC_ENOMEM;
                if (g->e)
                    dpc_errf(g->e, DPC_ENOMEM, "out of memory planning CUDA launches");
            }
            memset(&dummy, 0, sizeof dummy);
            return &dummy;
        }
        p->steps = s;
        g->cap = cap;
    }
    dpc_cu_step *s = &p->steps[p->nsteps++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->kernel = g->kernel;
    return s;
}

/* Buffer parameters of one launch: the written buffer first, then those read. */
typedef struct plist {
    int n;
    int id[DPC_CU_MAX_PARAMS];
    bool wr[DPC_CU_MAX_PARAMS];
} plist;

static void padd(cg *g, plist *pl, int buf, bool write) {
    if (buf < 0)
        return;
    for (int i = 0; i < pl->n; i++)
        if (pl->id[i] == buf) {
            pl->wr[i] |= write;
            return;
        }
    if (pl->n == DPC_CU_MAX_PARAMS) {
        /* a launch's parameter space is bounded: located at the kernel's value */
        const kernel *k = g->kg->kernels.items[g->kernel];
        char why[80];
        snprintf(why, sizeof why, "one kernel would take more than %d buffers", DPC_CU_MAX_PARAMS);
        fail(g, k->out, why);
        return;
    }
    pl->id[pl->n] = buf;
    pl->wr[pl->n++] = write;
}

/* The buffers read by ops[from..] of k's chain. */
static void padd_chain(cg *g, plist *pl, const kernel *k, int from) {
    koperand_iter it = kernel_operands(g->kg, k, from);
    int id, buf;
    while (koperand_next(&it, &id, &buf))
        padd(g, pl, buf, false);
}

static const char *ctype(const cg *g, int buf) { return kb(g, buf)->esize == 8 ? "long long" : g->ft; }

static void kernel_head(cg *g, const char *fn, const plist *pl) {
    /* the function's text starts with the comment just written */
    size_t start = g->o->len;
    while (start > 0 && !(g->o->data[start - 1] == '\n' && strncmp(g->o->data + start, "/* ", 3) == 0))
        start--;
    g->fn_start = start > 0 ? start - 1 : 0;
    g->saved_counted = g->counted;
    g->saved_lines = g->lines;
    snprintf(g->fn_name, sizeof g->fn_name, "%s", fn);
    dpc_buf_printf(g->o, "extern \"C\" __global__ void %s(", fn);
    for (int i = 0; i < pl->n; i++)
        dpc_buf_printf(g->o, "%s%s *__restrict__ b%d, ", pl->wr[i] ? "" : "const ", ctype(g, pl->id[i]), pl->id[i]);
    dpc_buf_puts(g->o, "const dpc_kctx ctx_) {\n"
                       "    const dpc_kctx *const ctx = &ctx_;\n"
                       "    const long long N = ctx->N;\n"
                       "    (void)ctx; (void)N;\n");
}

static void kernel_tail(cg *g) {
    dpc_buf_puts(g->o, "}\n");
    line_reset(g);
}

static dpc_cu_launch *plan_launch(cg *g, const char *fn, const char *suffix, dpc_cu_grid grid, dpc_cu_dim work, int vec,
                                  const plist *pl) {
    if (g->fn_start != NO_FN)
        dedupe(g, fn, suffix);
    dpc_cu_step *s = new_step(g, DPC_CU_LAUNCH);
    dpc_cu_launch *l = &s->u.launch;
    l->fn = g->cur_fn;
    l->suffix = g->cur_suffix;
    l->grid = grid;
    l->work = work;
    l->vec = vec;
    l->nbufs = pl->n;
    memcpy(l->bufs, pl->id, sizeof(int) * (size_t)pl->n);
    return l;
}

static const char *grid_stride(void) {
    return "blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x";
}

/* ---------------------------------------------------------- elementwise chains */

static bool chain_needs_coords(const kgraph *kg, const kernel *k, int from, const shape *os) {
    if (emit_chain_reads_iota(kg, k, from))
        return true;
    for (int i = from; i < k->ops.len; i++)
        if (((const ir_node *)k->ops.items[i])->op == OP_BATCHNORM)
            return true;
    koperand_iter it = kernel_operands(kg, k, from);
    int id, buf;
    while (koperand_next(&it, &id, &buf))
        if (!shape_eq(&nd(kg, id)->sh, os) || kg->acc[id].kind != ACC_CONTIG)
            return true;
    return false;
}

/* Coordinates c0..c{r-1} of flat index i in shape os. */
static void coords(cg *g, const shape *os, const char *indent) {
    emit_coords(g->o, indent, os);
    dpc_buf_puts(g->o, indent);
    for (int j = 0; j < os->rank; j++)
        dpc_buf_printf(g->o, "(void)c%d;%s", j, j + 1 < os->rank ? " " : "\n");
}

static void emit_ops(cg *g, const kernel *k, int from, const shape *os, const char *indent, const char *pre) {
    for (int i = from; i < k->ops.len; i++) {
        const ir_node *n = k->ops.items[i];
        if (!ir_op_is_elementwise(n->op))
            fail(g, n, "not an elementwise op");
        line_of(g, n);
        if (!emit_elementwise_op(g->kg, k, g->o, n, os, indent, pre, DIALECT_CUDA))
            fail(g, n, "the op has no CUDA expression");
    }
}

/* Four consecutive elements per load and store: a float4 (16 bytes), or
 * in 16-bit storage a dpc_bf16x4 / dpc_f16x4 (8 bytes, see the prelude).
 * Every buffer starts DPC_MEMPLAN_ALIGN-aligned, so group q is aligned. */
static const char *vec_type(const cg *g) {
    return g->prec == KP_BF16 ? "dpc_bf16x4" : g->prec == KP_F16 ? "dpc_f16x4" : "float4";
}

/* l_b<buf>[0..3]: the four floats of group q of buffer buf. */
static void vec_load(cg *g, int buf) {
    const char *vt = vec_type(g);
    dpc_buf_printf(g->o, "        const %s t%d = reinterpret_cast<const %s *>(b%d)[q];\n", vt, buf, vt, buf);
    if (g->prec == KP_F32)
        dpc_buf_printf(g->o, "        const float l_b%d[4] = {t%d.x, t%d.y, t%d.z, t%d.w};\n", buf, buf, buf, buf, buf);
    else
        dpc_buf_printf(g->o, "        const float l_b%d[4] = {t%d.v[0], t%d.v[1], t%d.v[2], t%d.v[3]};\n", buf, buf, buf,
                       buf, buf);
}

/* r_[0..3] into group q of buffer buf. */
static void vec_store(cg *g, int buf) {
    const char *vt = vec_type(g);
    if (g->prec == KP_F32) {
        dpc_buf_printf(g->o, "        reinterpret_cast<float4 *>(b%d)[q] = make_float4(r_[0], r_[1], r_[2], r_[3]);\n",
                       buf);
        return;
    }
    dpc_buf_printf(g->o,
                   "        %s s_;\n"
                   "        s_.v[0] = r_[0]; s_.v[1] = r_[1]; s_.v[2] = r_[2]; s_.v[3] = r_[3];\n"
                   "        reinterpret_cast<%s *>(b%d)[q] = s_;\n",
                   vt, vt, buf);
}

/* The elementwise kernel `fn` computing ops[from..] of k over its output.
 * With a seed, the chain starts from that value (named v<seed_id>): the
 * GEMM result already in the output buffer (seed_reads_out), or a
 * convolution's scattered result (an expression in coordinates). */
static void emit_chain_kernel(cg *g, const kernel *k, const char *fn, int from, const char *seed, int seed_id,
                              bool seed_reads_out, bool seed_coords, const plist *extra) {
    const kgraph *kg = g->kg;
    const shape *os = &k->out->sh;
    int outb = kg->buf_of[k->out->id];
    dpc_cu_dim total = cd_prod(os, 0, os->rank);
    char t[96];
    plist pl = {0};
    padd(g, &pl, outb, true);
    for (int i = 0; extra && i < extra->n; i++)
        padd(g, &pl, extra->id[i], false);
    padd_chain(g, &pl, k, from);
    bool need_coords = seed_coords || chain_needs_coords(kg, k, from, os);
    bool vec = !need_coords && total.k % 4 == 0;
    for (int i = 0; i < pl.n && vec; i++)
        vec = kb(g, pl.id[i])->esize == 4;
    const ir_node *first = from < k->ops.len ? k->ops.items[from] : k->root;
    dpc_buf_printf(g->o, "\n/* %s: %s%d elementwise op%s over [", fn, seed ? "epilogue, " : "", k->ops.len - from,
                   k->ops.len - from == 1 ? "" : "s");
    for (int i = 0; i < os->rank; i++)
        dpc_buf_printf(g->o, "%s%s", i ? ", " : "", cd_txt(t, sizeof t, cd_of(os->d[i])));
    dpc_buf_printf(g->o, "]%s%s%s */\n", vec ? ", four per thread (" : "", vec ? vec_type(g) : "", vec ? ")" : "");
    kernel_head(g, fn, &pl);
    dpc_buf_printf(g->o, "    const long long total = %s;\n", cd_str(t, sizeof t, total));
    if (vec) {
        dpc_buf_puts(g->o, "    const long long n4 = total / 4;\n"
                           "    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < n4;\n"
                           "         q += (long long)gridDim.x * blockDim.x) {\n");
        for (int i = 1; i < pl.n; i++)
            vec_load(g, pl.id[i]);
        if (seed_reads_out)
            vec_load(g, outb);
        dpc_buf_puts(g->o, "        float r_[4];\n#pragma unroll\n        for (int i = 0; i < 4; i++) {\n");
        if (seed)
            dpc_buf_printf(g->o, "            const float v%d = l_%s;\n", seed_id, seed);
        emit_ops(g, k, from, os, "            ", "l_");
        dpc_buf_printf(g->o, "            r_[i] = v%d;\n        }\n", k->out->id);
        vec_store(g, outb);
        dpc_buf_puts(g->o, "    }\n");
    } else {
        dpc_buf_printf(g->o, "    for (long long i = %s) {\n", grid_stride());
        if (need_coords)
            coords(g, os, "        ");
        if (seed) {
            line_of(g, first == k->root ? k->root : first);
            dpc_buf_printf(g->o, "        const float v%d = %s;\n", seed_id, seed);
        }
        emit_ops(g, k, from, os, "        ", "");
        dpc_buf_printf(g->o, "        b%d[i] = v%d;\n    }\n", outb, k->out->id);
    }
    kernel_tail(g);
    plan_launch(g, fn, "", DPC_CU_ELEMS, total, vec ? 4 : 1, &pl);
}

/* ---------------------------------------------------------- GEMM */

static void gemm_epilogue(cg *g, const kernel *k, int first_op) {
    if (first_op >= k->ops.len)
        return;
    int outb = g->kg->buf_of[k->out->id];
    int seed_id = first_op > 0 ? ((const ir_node *)k->ops.items[first_op - 1])->id : k->root->id;
    char seed[32];
    snprintf(seed, sizeof seed, "b%d[i]", outb);
    emit_chain_kernel(g, k, k->name, first_op, seed, seed_id, true, false, NULL);
}

/* A GEMM step C = A x B over buffers a, b, c: no bias, one batch; the
 * caller sets the sizes. */
static dpc_cu_gemm *new_gemm(cg *g, int a, int b, int c) {
    dpc_cu_gemm *m = &new_step(g, DPC_CU_GEMM)->u.gemm;
    m->a = a;
    m->b = b;
    m->c = c;
    m->bias = -1;
    m->batch = cd(1, 0);
    return m;
}

/* Whether an op of k's chain from op `from` on reads value id (a diamond:
 * then id must still be there when that op runs). */
static bool reads_after(const kernel *k, int from, int id) {
    for (int i = from; i < k->ops.len; i++) {
        const ir_node *x = k->ops.items[i];
        for (int j = 0; j < x->nin; j++)
            if (x->in[j] == id)
                return true;
    }
    return false;
}

static void emit_linear(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]), *w = nd(kg, n->in[1]);
    dpc_cu_gemm *m = new_gemm(g, kg->buf_of[x->id], kg->buf_of[w->id], kg->buf_of[k->out->id]);
    dpc_cu_dim K = cd(w->sh.d[1].k, 0), No = cd(w->sh.d[0].k, 0);
    m->transB = true;
    m->M = cd_prod(&x->sh, 0, x->sh.rank - 1);
    m->N = No;
    m->K = K;
    m->lda = K;
    m->ldb = K;
    if (k->wt) { /* W^T [K, No], written at load (fuse.c linear_wt) */
        m->b = kg->buf_of[k->wt->id];
        m->transB = false;
        m->ldb = No;
    }
    m->ldc = No;
    int first_op = 0;
    m->epilogue = 0; /* DPC_LT_EPI_NONE */
    if (n->nin > 2) {
        m->bias = kg->buf_of[n->in[2]];
        m->epilogue = 1; /* DPC_LT_EPI_BIAS */
        if (k->ops.len > 0 && ((const ir_node *)k->ops.items[0])->op == OP_RELU && !reads_after(k, 1, n->id)) {
            m->epilogue = 2; /* DPC_LT_EPI_RELU_BIAS */
            first_op = 1;
        }
    }
    static const char *const epi[] = {"", " + bias", " + bias, ReLU"};
    dpc_buf_printf(g->o, "\n/* %s: linear [M, %lld] x [%lld, %lld]^T%s through cuBLASLt (", k->name, (long long)K.k,
                   (long long)No.k, (long long)K.k, epi[m->epilogue]);
    comment_loc(g->o, n);
    dpc_buf_printf(g->o, ")%s */\n", first_op < k->ops.len ? "; the rest of the chain follows" : "");
    gemm_epilogue(g, k, first_op);
}

/* One batch dimension of a matmul: its size and the element strides of x,
 * y and the output along it (0: broadcast). */
typedef struct bdim {
    dpc_cu_dim size, sx, sy, so;
} bdim;

static bool bdim_mergeable(const bdim *outer, const bdim *inner) {
    return cd_eq(outer->sx, cd_mul(inner->sx, inner->size)) && cd_eq(outer->sy, cd_mul(inner->sy, inner->size)) &&
           cd_eq(outer->so, cd_mul(inner->so, inner->size));
}

static void emit_matmul(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]), *y = nd(kg, n->in[1]);
    emit_mm mm;
    emit_mm_geom(&x->sh, &y->sh, &mm);
    const shape *xs = &mm.x, *ys = &mm.y, *bs = &mm.batch;
    dpc_cu_dim M = cd_of(mm.M), K = cd_of(mm.K), Nn = cd_of(mm.N);
    int rb = bs->rank;
    dpc_cu_gemm *m = new_gemm(g, kg->buf_of[x->id], kg->buf_of[y->id], kg->buf_of[k->out->id]);
    m->N = Nn;
    m->K = K;
    m->lda = K;
    m->ldb = Nn;
    m->ldc = Nn;
    if (ys->rank == 2) {
        /* the right operand is one matrix: fold all batches into M */
        m->M = cd_mul(cd_prod(bs, 0, rb), M);
    } else {
        m->M = M;
        bdim d[IR_MAX_RANK];
        int nd_ = 0;
        for (int i = 0; i < rb; i++) {
            int ix = emit_mm_axis(&mm, xs, i), iy = emit_mm_axis(&mm, ys, i);
            bdim b;
            b.size = cd_of(bs->d[i]);
            if (cd_one(b.size))
                continue;
            b.sx = ix < 0 ? cd(0, 0) : cd_mul(cd_prod(xs, ix + 1, xs->rank - 2), cd_mul(M, K));
            b.sy = iy < 0 ? cd(0, 0) : cd_mul(cd_prod(ys, iy + 1, ys->rank - 2), cd_mul(K, Nn));
            b.so = cd_mul(cd_prod(bs, i + 1, rb), cd_mul(M, Nn));
            d[nd_++] = b;
        }
        /* merge dimensions that are one strided dimension for all three */
        bdim grp[IR_MAX_RANK];
        int ng = 0;
        for (int i = nd_ - 1; i >= 0; i--) {
            if (ng > 0 && bdim_mergeable(&d[i], &grp[ng - 1]))
                grp[ng - 1].size = cd_mul(grp[ng - 1].size, d[i].size);
            else
                grp[ng++] = d[i];
        }
        /* grp[0] is innermost: one strided-batched cuBLASLt call when no
         * operand broadcasts along it, host loops over the others */
        int first_loop = 0;
        if (ng > 0 && grp[0].sx.k && grp[0].sy.k && grp[0].so.k) {
            m->batch = grp[0].size;
            m->strideA = grp[0].sx;
            m->strideB = grp[0].sy;
            m->strideC = grp[0].so;
            first_loop = 1;
        }
        for (int i = ng - 1; i >= first_loop; i--) {
            if (m->nloops == DPC_CU_MAX_LOOPS) {
                fail(g, n, "too many broadcast batch dimensions");
                break;
            }
            m->loop[m->nloops].count = grp[i].size;
            m->loop[m->nloops].sA = grp[i].sx;
            m->loop[m->nloops].sB = grp[i].sy;
            m->loop[m->nloops].sC = grp[i].so;
            m->nloops++;
        }
    }
    char t1[64], t2[64];
    char t3[64];
    dpc_buf_printf(g->o, "\n/* %s: matmul [%s, %s] x [%s, %s]", k->name, cd_txt(t1, sizeof t1, m->M),
                   cd_txt(t3, sizeof t3, K), t3, cd_txt(t2, sizeof t2, Nn));
    if (!cd_one(m->batch))
        dpc_buf_printf(g->o, ", batch %s", cd_txt(t1, sizeof t1, m->batch));
    if (m->nloops)
        dpc_buf_printf(g->o, ", %d host loop%s", m->nloops, m->nloops == 1 ? "" : "s");
    dpc_buf_puts(g->o, " through cuBLASLt (");
    comment_loc(g->o, n);
    dpc_buf_printf(g->o, ")%s */\n", k->ops.len ? "; the fused chain follows" : "");
    gemm_epilogue(g, k, 0);
}

/* ---------------------------------------------------------- convolution */

/* The im2col kernel of one group (ctx->g), all images side by side:
 * col[(c*kh + ki)*kw + kj][img*HW + oh*Wo + ow]. As on the CPU, the
 * trailing padding (pad[2], pad[3]; one more than the leading for
 * padding="same" with an even kernel) is the reads past H, W that give 0 */
static void emit_im2col(cg *g, const kernel *k, const emit_conv_dims *cv, const char *fn, const plist *pl, int xb,
                        int cb) {
    dpc_buf_printf(g->o,
                   "\n/* %s: im2col of group ctx->g for conv2d %lldx%lld, stride (%lld, %lld), padding (%lld, %lld),\n"
                   " * dilation (%lld, %lld): [%lld, N * %lld] */\n",
                   fn, cv->kh, cv->kw, cv->sh, cv->sw, cv->ph, cv->pw, cv->dh, cv->dw, cv->Kd, cv->HW);
    kernel_head(g, fn, pl);
    line_of(g, k->root);
    dpc_buf_printf(g->o,
                   "    const long long g = ctx->g, cols = N * %lldLL, total = %lldLL * cols;\n"
                   "    for (long long i = %s) {\n"
                   "        const long long r = i / cols, j = i - r * cols;\n"
                   "        const long long c = r / %lldLL, ki = (r / %lldLL) %% %lldLL, kj = r %% %lldLL;\n"
                   "        const long long img = j / %lldLL, p = j - img * %lldLL, oh = p / %lldLL, ow = p - oh * %lldLL;\n"
                   "        const long long ih = oh * %lldLL - %lldLL + ki * %lldLL, iw = ow * %lldLL - %lldLL + kj * %lldLL;\n"
                   "        const %s *src = b%d + (img * %lldLL + g * %lldLL + c) * %lldLL;\n"
                   "        b%d[i] = (ih >= 0 && ih < %lldLL && iw >= 0 && iw < %lldLL) ? src[ih * %lldLL + iw] : 0.0f;\n"
                   "    }\n",
                   cv->HW, cv->Kd, grid_stride(), cv->kh * cv->kw, cv->kw, cv->kh, cv->kw, cv->HW, cv->HW, cv->Wo, cv->Wo,
                   cv->sh, cv->ph, cv->dh, cv->sw, cv->pw, cv->dw, g->ft, xb, cv->C, cv->Cg, cv->H * cv->W, cb, cv->H,
                   cv->W, cv->W);
    kernel_tail(g);
}

/* The conv step cuDNN may take in place of the im2col + GEMM steps (kabi.h
 * dpc_cu_conv). It is fused, writing the kernel's output itself, when the
 * chain is what cudnnConvolutionBiasActivationForward computes:
 * act(conv + bias + z) for [], [relu], [add z] or [add z, relu], z read
 * contiguously at the output's shape; without a bias only the empty chain
 * (a plain cudnnConvolutionForward). */
static void plan_conv(cg *g, const kernel *k, const emit_conv_dims *cv, int xb, int wb, int rb) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root;
    dpc_cu_conv *c = &new_step(g, DPC_CU_CONV)->u.conv;
    c->x = xb;
    c->w = wb;
    c->y = rb;
    c->bias = n->nin > 2 ? kg->buf_of[n->in[2]] : -1;
    c->out = kg->buf_of[k->out->id];
    c->z = -1;
    c->nfallback = (int)(2 * cv->G);
    c->C = cv->C, c->H = cv->H, c->W = cv->W, c->Co = cv->Co, c->Ho = cv->Ho, c->Wo = cv->Wo;
    c->kh = cv->kh, c->kw = cv->kw, c->sh = cv->sh, c->sw = cv->sw, c->ph = cv->ph, c->pw = cv->pw;
    c->dh = cv->dh, c->dw = cv->dw, c->G = cv->G;
    int i = 0, prev = n->id;
    bool ok = true;
    if (i < k->ops.len && ((const ir_node *)k->ops.items[i])->op == OP_ADD) {
        const ir_node *a = k->ops.items[i];
        int other = a->in[0] == prev ? a->in[1] : a->in[0];
        ok = (a->in[0] == prev) != (a->in[1] == prev) && !reads_after(k, i + 1, prev) &&
             shape_eq(&nd(kg, other)->sh, &k->out->sh) && kg->acc[other].kind == ACC_CONTIG &&
             kg->buf_of[other] >= 0 && kb(g, kg->buf_of[other])->esize == 4;
        c->z = ok ? kg->buf_of[other] : -1;
        prev = a->id;
        i++;
    }
    if (ok && i < k->ops.len && ((const ir_node *)k->ops.items[i])->op == OP_RELU && !reads_after(k, i + 1, prev)) {
        c->act = DPC_CU_ACT_RELU;
        prev = ((const ir_node *)k->ops.items[i])->id;
        i++;
    }
    c->fused = ok && i == k->ops.len && prev == k->out->id && (c->bias >= 0 || (c->z < 0 && c->act == DPC_CU_ACT_NONE));
    if (!c->fused) {
        c->z = -1;
        c->act = DPC_CU_ACT_NONE;
    }
}

static void emit_conv(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]), *w = nd(kg, n->in[1]);
    emit_conv_dims cv;
    int xb = kg->buf_of[x->id], wb = kg->buf_of[w->id], cb = k->scratch, rb = k->scratch2;
    if (!emit_conv_geom(n, x, w, &cv)) {
        fail(g, n, "bad groups");
        return;
    }
    plan_conv(g, k, &cv, xb, wb, rb);
    dpc_buf nm;
    dpc_buf_init(&nm);
    dpc_buf_printf(&nm, "%s_im2col", k->name);
    plist pl = {0};
    padd(g, &pl, cb, true);
    padd(g, &pl, xb, false);
    emit_im2col(g, k, &cv, nm.data ? nm.data : "im2col", &pl, xb, cb);
    for (long long gi = 0; gi < cv.G; gi++) {
        dpc_cu_launch *l = plan_launch(g, k->name, "_im2col", DPC_CU_ELEMS, cd(cv.Kd * cv.HW, 1), 1, &pl);
        l->g = gi; /* one function, a launch per group */
        dpc_cu_gemm *m = new_gemm(g, wb, cb, rb);
        m->M = cd(cv.Cog, 0);
        m->N = cd(cv.HW, 1);
        m->K = cd(cv.Kd, 0);
        m->lda = cd(cv.Kd, 0);
        m->ldb = cd(cv.HW, 1);
        m->ldc = cd(cv.HW, 1);
        m->offA = cd(gi * cv.Cog * cv.Kd, 0);
        m->offC = cd(gi * cv.Cog * cv.HW, 1);
    }
    dpc_buf_free(&nm);
    dpc_buf_printf(g->o, "\n/* %s: conv2d GEMMs [%lld, %lld] x [%lld, N * %lld] per group through cuBLASLt */\n",
                   k->name, cv.Cog, cv.Kd, cv.Kd, cv.HW);
    /* back to NCHW, bias, fused chain */
    char seed[192];
    plist extra = {0};
    padd(g, &extra, rb, false);
    if (n->nin > 2) {
        padd(g, &extra, kg->buf_of[n->in[2]], false);
        snprintf(seed, sizeof seed, "b%d[c1 * (N * %lldLL) + c0 * %lldLL + c2 * %lldLL + c3] + b%d[c1]", rb, cv.HW,
                 cv.HW, cv.Wo, kg->buf_of[n->in[2]]);
    } else
        snprintf(seed, sizeof seed, "b%d[c1 * (N * %lldLL) + c0 * %lldLL + c2 * %lldLL + c3]", rb, cv.HW, cv.HW, cv.Wo);
    emit_chain_kernel(g, k, k->name, 0, seed, n->id, false, true, &extra);
}

/* ---------------------------------------------------------- pooling */

static void emit_pool(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    long long H = x->sh.d[2].k, W = x->sh.d[3].k, Ho = n->sh.d[2].k, Wo = n->sh.d[3].k;
    int xb = kg->buf_of[x->id], ob = kg->buf_of[n->id];
    char t[96];
    plist pl = {0};
    padd(g, &pl, ob, true);
    padd(g, &pl, xb, false);
    dpc_cu_dim total = cd_prod(&n->sh, 0, n->sh.rank);
    dpc_buf_printf(g->o, "\n/* %s: %s, one thread per output element */\n", k->name, ir_op_name(n->op));
    kernel_head(g, k->name, &pl);
    line_of(g, n);
    dpc_buf_printf(g->o,
                   "    const long long total = %s;\n"
                   "    for (long long i = %s) {\n"
                   "        const long long p = i / %lldLL, oh = (i / %lldLL) %% %lldLL, ow = i %% %lldLL;\n"
                   "        const %s *src = b%d + p * %lldLL;\n",
                   cd_str(t, sizeof t, total), grid_stride(), Ho * Wo, Wo, Ho, Wo, g->ft, xb, H * W);
    emit_pool_window(g->o, n, x, "        ", "long long");
    if (n->op == OP_AVGPOOL2D)
        dpc_buf_puts(g->o, "        (void)padded;\n");
    dpc_buf_printf(g->o, "        b%d[i] = %s;\n", ob, emit_pool_value(t, sizeof t, n));
    dpc_buf_puts(g->o, "    }\n");
    kernel_tail(g);
    plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

/* ---------------------------------------------------------- resampling */

/* conv_transpose2d and upsample: one thread per output element gathering
 * its value (a transposed convolution reads the taps whose stride divides
 * oh + ph - ki*dh), then the fused chain on it. */
static void emit_resample(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    const shape *os = &k->out->sh;
    int xb = kg->buf_of[x->id], ob = kg->buf_of[k->out->id];
    char t[96];
    plist pl = {0};
    padd(g, &pl, ob, true);
    for (int i = 0; i < n->nin; i++)
        padd(g, &pl, kg->buf_of[n->in[i]], false);
    padd_chain(g, &pl, k, 0);
    dpc_cu_dim total = cd_prod(os, 0, os->rank);
    emit_conv_dims cv;
    if (n->op == OP_CONV_TRANSPOSE2D && !emit_convt_geom(n, x, nd(kg, n->in[1]), &cv)) {
        fail(g, n, "bad groups");
        return;
    }
    dpc_buf_printf(g->o, "\n/* %s: %s, one thread per output element%s */\n", k->name, ir_op_name(n->op),
                   k->ops.len ? "; the fused chain follows" : "");
    kernel_head(g, k->name, &pl);
    line_of(g, n);
    dpc_buf_printf(g->o, "    const long long total = %s;\n    for (long long i = %s) {\n", cd_str(t, sizeof t, total),
                   grid_stride());
    coords(g, os, "        ");
    if (n->op == OP_CONV_TRANSPOSE2D) {
        int wb = kg->buf_of[n->in[1]];
        char bv[48] = "0.0f";
        if (n->nin > 2)
            snprintf(bv, sizeof bv, "(float)b%d[c1]", kg->buf_of[n->in[2]]);
        dpc_buf_printf(g->o,
                       "        const long long grp = c1 / %lldLL, ocg = c1 - grp * %lldLL;\n"
                       "        const %s *const xs = b%d + (c0 * %lldLL + grp * %lldLL) * %lldLL;\n"
                       "        const %s *const ws = b%d + (grp * %lldLL * %lldLL + ocg) * %lldLL;\n"
                       "        float acc = %s;\n"
                       "        for (long long ki = 0; ki < %lldLL; ki++) {\n"
                       "            const long long th = c2 + %lldLL - ki * %lldLL;\n"
                       "            if (th < 0 || th %% %lldLL) continue;\n"
                       "            const long long ih = th / %lldLL;\n"
                       "            if (ih >= %lldLL) continue;\n"
                       "            for (long long kj = 0; kj < %lldLL; kj++) {\n"
                       "                const long long tw = c3 + %lldLL - kj * %lldLL;\n"
                       "                if (tw < 0 || tw %% %lldLL) continue;\n"
                       "                const long long iw = tw / %lldLL;\n"
                       "                if (iw >= %lldLL) continue;\n"
                       "                for (long long c = 0; c < %lldLL; c++)\n"
                       "                    acc += (float)xs[c * %lldLL + ih * %lldLL + iw] * (float)ws[c * %lldLL + ki * %lldLL + kj];\n"
                       "            }\n"
                       "        }\n",
                       cv.Cog, cv.Cog, g->ft, xb, cv.C, cv.Cg, cv.HW, g->ft, wb, cv.Cg, cv.Cog, cv.kh * cv.kw, bv, cv.kh,
                       cv.ph, cv.dh, cv.sh, cv.sh, cv.H, cv.kw, cv.pw, cv.dw, cv.sw, cv.sw, cv.W, cv.Cg, cv.HW, cv.W,
                       cv.Kd, cv.kw);
        dpc_buf_printf(g->o, "        const float v%d = acc;\n", n->id);
    } else {
        dpc_buf_printf(g->o, "        const %s *const src = b%d + (c0 * %lldLL + c1) * %lldLL;\n", g->ft, xb,
                       (long long)x->sh.d[1].k, (long long)(x->sh.d[2].k * x->sh.d[3].k));
        emit_upsample_dim(g->o, n, x, 0, "c2", "        ", "long long");
        emit_upsample_dim(g->o, n, x, 1, "c3", "        ", "long long");
        emit_upsample_value(g->o, n, x, "        ");
        dpc_buf_printf(g->o, "        const float v%d = v;\n", n->id);
    }
    emit_ops(g, k, 0, os, "        ", "");
    dpc_buf_printf(g->o, "        b%d[i] = v%d;\n    }\n", ob, k->out->id);
    kernel_tail(g);
    plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

/* ---------------------------------------------------------- rows */

/* Rows longer than this get a block each instead of a warp. */
#define WARP_ROW_MAX 1024

/* The row prologue: `row`, this thread's first column `t` and the stride
 * `T`, and the reductions rsum/rmax for one warp or one block per row. */
static dpc_cu_grid row_head(cg *g, long long L, const char *rows) {
    if (L <= WARP_ROW_MAX) {
        dpc_buf_printf(g->o,
                       "    /* one warp per row */\n"
                       "    const long long rows = %s;\n"
                       "    const long long row = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;\n"
                       "    const int t = threadIdx.x %% 32, T = 32;\n"
                       "    if (row >= rows) return;\n"
                       "#define rsum warp_sum\n#define rmax warp_max\n",
                       rows);
        return DPC_CU_WARP_ROWS;
    }
    dpc_buf_printf(g->o,
                   "    /* one block per row */\n"
                   "    const long long rows = %s;\n"
                   "    const long long row = blockIdx.x;\n"
                   "    const int t = threadIdx.x, T = blockDim.x;\n"
                   "    if (row >= rows) return;\n"
                   "#define rsum block_sum\n#define rmax block_max\n",
                   rows);
    return DPC_CU_BLOCK_ROWS;
}

/* Ends a row kernel (row_head's macros undone) and plans its launch over
 * `rows` rows. */
static void row_tail(cg *g, const kernel *k, dpc_cu_grid grid, dpc_cu_dim rows, const plist *pl) {
    dpc_buf_puts(g->o, "#undef rsum\n#undef rmax\n");
    kernel_tail(g);
    plan_launch(g, k->name, "", grid, rows, 1, pl);
}

/* A row kernel over `rows` rows of L elements: the comment already written,
 * the head, the row prologue and `x`, `y` at the row's first element. */
static dpc_cu_grid row_kernel_head(cg *g, const kernel *k, const plist *pl, long long L, dpc_cu_dim rows, int xb,
                                   int ob) {
    char t[96];
    kernel_head(g, k->name, pl);
    dpc_cu_grid grid = row_head(g, L, cd_str(t, sizeof t, rows));
    line_of(g, k->root);
    dpc_buf_printf(g->o,
                   "    const %s *x = b%d + row * %lldLL;\n"
                   "    %s *y = b%d + row * %lldLL;\n",
                   g->ft, xb, L, g->ft, ob, L);
    return grid;
}

/* A kernel over the (outer, inner) columns of x along the op's axis, one
 * thread per column (`per` names what a thread computes): `x` at the
 * column's first element, `len` its length, `inner` its stride. */
static void column_head(cg *g, const kernel *k, const plist *pl, const char *per, const ir_node *x, dpc_cu_dim total,
                        int xb) {
    const ir_node *n = k->root;
    char t1[96], t2[96], t3[96];
    dpc_buf_printf(g->o, "\n/* %s: %s over axis %d, one thread per %s */\n", k->name, ir_op_name(n->op), n->attr.ax.axis, per);
    kernel_head(g, k->name, pl);
    line_of(g, n);
    dpc_buf_printf(g->o,
                   "    const long long inner = %s, len = %s, total = %s;\n"
                   "    for (long long i = %s) {\n"
                   "        const long long p = i / inner, q = i - p * inner;\n"
                   "        const %s *x = b%d + p * len * inner + q;\n",
                   cd_str(t1, sizeof t1, cd_prod(&x->sh, n->attr.ax.axis + 1, x->sh.rank)),
                   cd_str(t2, sizeof t2, cd_of(x->sh.d[n->attr.ax.axis])), cd_str(t3, sizeof t3, total), grid_stride(), g->ft,
                   xb);
}

static void emit_row(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    int xb = kg->buf_of[x->id], ob = kg->buf_of[n->id];
    plist pl = {0};
    padd(g, &pl, ob, true);
    padd(g, &pl, xb, false);
    if (n->op == OP_LAYERNORM) {
        long long L = 1;
        for (int i = x->sh.rank - n->attr.norm.dims; i < x->sh.rank; i++) {
            L *= x->sh.d[i].k;
            if (x->sh.d[i].sym) {
                fail(g, n, "layer_norm over the batch dimension");
                return;
            }
        }
        int wb = -1, bb = -1, idx = 1;
        if (n->attr.norm.has_weight)
            wb = kg->buf_of[n->in[idx++]];
        if (n->attr.norm.has_bias)
            bb = kg->buf_of[n->in[idx++]];
        padd(g, &pl, wb, false);
        padd(g, &pl, bb, false);
        char eps[EMIT_FLOAT_MAX];
        emit_float_str(eps, sizeof eps, n->attr.norm.eps, true);
        dpc_cu_dim rows = cd_prod(&x->sh, 0, x->sh.rank - n->attr.norm.dims);
        dpc_buf_printf(g->o, "\n/* %s: layer_norm over rows of %lld, mean and variance in two passes */\n", k->name, L);
        dpc_cu_grid grid = row_kernel_head(g, k, &pl, L, rows, xb, ob);
        dpc_buf_printf(g->o,
                       "    float s = 0.0f;\n"
                       "    for (int j = t; j < %lld; j += T) s += x[j];\n"
                       "    const float mean = rsum(s) / %lld.0f;\n"
                       "    float v = 0.0f;\n"
                       "    for (int j = t; j < %lld; j += T) { const float d = x[j] - mean; v += d * d; }\n"
                       "    const float rstd = 1.0f / sqrtf(rsum(v) / %lld.0f + %s);\n"
                       "    for (int j = t; j < %lld; j += T) {\n"
                       "        float o = (x[j] - mean) * rstd;\n",
                       L, L, L, L, eps, L);
        if (wb >= 0)
            dpc_buf_printf(g->o, "        o *= b%d[j];\n", wb);
        if (bb >= 0)
            dpc_buf_printf(g->o, "        o += b%d[j];\n", bb);
        dpc_buf_puts(g->o, "        y[j] = o;\n    }\n");
        row_tail(g, k, grid, rows, &pl);
        return;
    }
    /* softmax / log_softmax over axis: [outer, L, inner] */
    long long L = x->sh.d[n->attr.ax.axis].k;
    bool logsm = n->op == OP_LOG_SOFTMAX;
    dpc_cu_dim outer = cd_prod(&x->sh, 0, n->attr.ax.axis), inner = cd_prod(&x->sh, n->attr.ax.axis + 1, x->sh.rank);
    bool Lsym = x->sh.d[n->attr.ax.axis].sym;
    if (cd_one(inner) && !Lsym) {
        dpc_buf_printf(g->o, "\n/* %s: %s over rows of %lld */\n", k->name, ir_op_name(n->op), L);
        dpc_cu_grid grid = row_kernel_head(g, k, &pl, L, outer, xb, ob);
        dpc_buf_printf(g->o,
                       "    float m = -INFINITY;\n"
                       "    for (int j = t; j < %lld; j += T) m = fmaxf(m, x[j]);\n"
                       "    m = rmax(m);\n"
                       "    float s = 0.0f;\n"
                       "    for (int j = t; j < %lld; j += T) s += expf(x[j] - m);\n"
                       "    s = rsum(s);\n",
                       L, L);
        if (logsm)
            dpc_buf_printf(g->o, "    const float ls = logf(s);\n"
                                 "    for (int j = t; j < %lld; j += T) y[j] = x[j] - m - ls;\n",
                           L);
        else
            dpc_buf_printf(g->o, "    const float inv = 1.0f / s;\n"
                                 "    for (int j = t; j < %lld; j += T) y[j] = expf(x[j] - m) * inv;\n",
                           L);
        row_tail(g, k, grid, outer, &pl);
        return;
    }
    /* a middle axis (or one as long as the batch): one thread per (outer,
     * inner) column, coalesced over inner */
    dpc_cu_dim total = cd_mul(outer, inner);
    column_head(g, k, &pl, "column", x, total, xb);
    dpc_buf_printf(g->o,
                   "        %s *y = b%d + p * len * inner + q;\n"
                   "        float m = -INFINITY;\n"
                   "        for (long long j = 0; j < len; j++) m = fmaxf(m, x[j * inner]);\n"
                   "        float s = 0.0f;\n"
                   "        for (long long j = 0; j < len; j++) s += expf(x[j * inner] - m);\n",
                   g->ft, ob);
    if (logsm)
        dpc_buf_puts(g->o, "        const float ls = logf(s);\n"
                           "        for (long long j = 0; j < len; j++) y[j * inner] = x[j * inner] - m - ls;\n");
    else
        dpc_buf_puts(g->o, "        const float inv = 1.0f / s;\n"
                           "        for (long long j = 0; j < len; j++) y[j * inner] = expf(x[j * inner] - m) * inv;\n");
    dpc_buf_puts(g->o, "    }\n");
    kernel_tail(g);
    plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

/* ---------------------------------------------------------- reductions */

static void emit_reduce(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    int xb = kg->buf_of[x->id], ob = kg->buf_of[n->id];
    char t1[96], t3[96];
    plist pl = {0};
    padd(g, &pl, ob, true);
    padd(g, &pl, xb, false);
    bool amax = n->op == OP_AMAX, mean = n->op == OP_MEAN;
    if (x->sh.rank == 0) {
        dpc_buf_printf(g->o, "\n/* %s: %s of a scalar */\n", k->name, ir_op_name(n->op));
        kernel_head(g, k->name, &pl);
        line_of(g, n);
        dpc_buf_printf(g->o, "    if (blockIdx.x == 0 && threadIdx.x == 0) b%d[0] = b%d[0];\n", ob, xb);
        kernel_tail(g);
        plan_launch(g, k->name, "", DPC_CU_ONE, cd(1, 0), 1, &pl);
        return;
    }
    dpc_cu_dim len = cd_of(x->sh.d[n->attr.ax.axis]), outer = cd_prod(&x->sh, 0, n->attr.ax.axis),
               inner = cd_prod(&x->sh, n->attr.ax.axis + 1, x->sh.rank);
    cd_str(t3, sizeof t3, len);
    if (cd_one(inner)) {
        dpc_buf_printf(g->o, "\n/* %s: %s over the last axis, one warp per output */\n", k->name, ir_op_name(n->op));
        kernel_head(g, k->name, &pl);
        dpc_cu_grid grid = row_head(g, 1, cd_str(t1, sizeof t1, outer));
        line_of(g, n);
        dpc_buf_printf(g->o, "    const long long len = %s;\n    const %s *x = b%d + row * len;\n", t3, g->ft, xb);
        if (amax)
            dpc_buf_puts(g->o, "    float acc = -INFINITY;\n"
                               "    for (long long j = t; j < len; j += T) acc = nanmax(acc, x[j]);\n"
                               "    acc = warp_nanmax(acc);\n");
        else
            dpc_buf_printf(g->o, "    float acc = 0.0f;\n"
                                 "    for (long long j = t; j < len; j += T) acc += x[j];\n"
                                 "    acc = rsum(acc)%s;\n",
                           mean ? " / (float)len" : "");
        dpc_buf_printf(g->o, "    if (t == 0) b%d[row] = acc;\n", ob);
        row_tail(g, k, grid, outer, &pl);
        return;
    }
    dpc_cu_dim total = cd_mul(outer, inner);
    column_head(g, k, &pl, "output", x, total, xb);
    if (amax)
        dpc_buf_puts(g->o, "        float acc = -INFINITY;\n"
                           "        for (long long j = 0; j < len; j++) acc = nanmax(acc, x[j * inner]);\n");
    else
        dpc_buf_printf(g->o, "        float acc = 0.0f;\n"
                             "        for (long long j = 0; j < len; j++) acc += x[j * inner];\n%s",
                       mean ? "        acc /= (float)len;\n" : "");
    dpc_buf_printf(g->o, "        b%d[i] = acc;\n    }\n", ob);
    kernel_tail(g);
    plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

/* ---------------------------------------------------------- gathers and copies */

static void emit_embed(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *ids = nd(kg, n->in[0]), *w = nd(kg, n->in[1]);
    long long V = w->sh.d[0].k, D = w->sh.d[1].k;
    int ib = kg->buf_of[ids->id], wb = kg->buf_of[w->id], ob = kg->buf_of[n->id];
    char t[96];
    plist pl = {0};
    padd(g, &pl, ob, true);
    padd(g, &pl, ib, false);
    padd(g, &pl, wb, false);
    dpc_cu_dim total = cd_mul(cd_prod(&ids->sh, 0, ids->sh.rank), cd(D, 0));
    const char *it = kb(g, ib)->esize == 8 ? "long long" : "int";
    dpc_buf_printf(g->o, "\n/* %s: embedding of %lld rows of %lld; an index out of range raises the error flag */\n",
                   k->name, V, D);
    kernel_head(g, k->name, &pl);
    line_of(g, n);
    dpc_buf_printf(g->o,
                   "    const long long total = %s;\n"
                   "    for (long long i = %s) {\n"
                   "        const long long r = i / %lldLL, j = i - r * %lldLL;\n"
                   "        const long long id = (long long)(%s)b%d[r];\n"
                   "        if (id < 0 || id >= %lldLL) {\n"
                   "            raise_error(ctx, %d, id, %lldLL);\n"
                   "            b%d[i] = 0.0f;\n"
                   "            continue;\n"
                   "        }\n"
                   "        b%d[i] = b%d[id * %lldLL + j];\n"
                   "    }\n",
                   cd_str(t, sizeof t, total), grid_stride(), D, D, it, ib, V, g->kernel + 1, V, ob, ob, wb, D);
    kernel_tail(g);
    plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

static void emit_cat(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root;
    int ob = kg->buf_of[n->id];
    char t1[96], t2[96], t3[96], t4[96];
    plist pl = {0};
    padd(g, &pl, ob, true);
    for (int i = 0; i < ir_cat_count(n); i++)
        padd(g, &pl, kg->buf_of[ir_cat_operand(n, i)], false);
    dpc_cu_dim total = cd_prod(&n->sh, 0, n->sh.rank);
    dpc_buf_printf(g->o, "\n/* %s: cat of %d tensors on axis %d, one thread per output element */\n", k->name,
                   ir_cat_count(n), n->attr.ax.axis);
    kernel_head(g, k->name, &pl);
    line_of(g, n);
    dpc_buf_printf(g->o,
                   "    const long long inner = %s, len = %s, total = %s;\n"
                   "    for (long long i = %s) {\n"
                   "        const long long q = i %% inner, a = (i / inner) %% len, p = i / (inner * len);\n"
                   "        long long at = a;\n",
                   cd_str(t1, sizeof t1, cd_prod(&n->sh, n->attr.ax.axis + 1, n->sh.rank)),
                   cd_str(t2, sizeof t2, cd_of(n->sh.d[n->attr.ax.axis])), cd_str(t3, sizeof t3, total), grid_stride());
    for (int i = 0; i < ir_cat_count(n); i++) {
        const ir_node *x = nd(kg, ir_cat_operand(n, i));
        cd_str(t4, sizeof t4, cd_of(x->sh.d[n->attr.ax.axis]));
        dpc_buf_printf(g->o,
                       "        %sif (at < %s) { b%d[i] = b%d[(p * %s + at) * inner + q]; continue; }\n"
                       "        at -= %s;\n",
                       "", t4, ob, kg->buf_of[x->id], t4, t4);
    }
    dpc_buf_puts(g->o, "    }\n");
    kernel_tail(g);
    plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

static void emit_copy(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *c = k->out;
    const shape *os = &c->sh;
    char t[96];
    int ob = kg->buf_of[c->id];
    plist pl = {0};
    padd(g, &pl, ob, true);
    int sb = k->src.kind == ACC_LEAF ? -1 : kg->buf_of[k->src.base->id];
    padd(g, &pl, sb, false);
    dpc_cu_dim total = cd_prod(os, 0, os->rank);
    dpc_buf_printf(g->o, "\n/* %s: materialise %%%d (%s) */\n", k->name, c->id,
                   k->src.kind == ACC_STRIDED ? "a strided view" : k->src.kind == ACC_LEAF ? "a constant" : "a copy");
    kernel_head(g, k->name, &pl);
    line_of(g, c);
    dpc_buf_printf(g->o, "    const long long total = %s;\n    for (long long i = %s) {\n", cd_str(t, sizeof t, total),
                   grid_stride());
    if (k->src.kind == ACC_LEAF) {
        if (emit_leaf_needs_coords(k->src.base))
            coords(g, os, "        ");
        dpc_buf_printf(g->o, "        b%d[i] = ", ob);
        emit_leaf(g->o, k->src.base, os);
        dpc_buf_puts(g->o, ";\n");
    } else if (k->src.kind == ACC_CONTIG) {
        dpc_buf_printf(g->o, "        b%d[i] = %sb%d[i];\n", ob, c->dt == IR_I64 ? "" : "(float)", sb);
    } else {
        coords(g, os, "        ");
        dpc_buf_printf(g->o, "        b%d[i] = %sb%d[", ob, c->dt == IR_I64 ? "" : "(float)", sb);
        emit_coord_offset(g->o, &k->src, os->rank);
        dpc_buf_puts(g->o, "];\n");
    }
    dpc_buf_puts(g->o, "    }\n");
    kernel_tail(g);
    plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

/* ---------------------------------------------------------- the program */

static const char PRELUDE[] =
    "#define INFINITY __int_as_float(0x7f800000)\n"
    "#define NAN __int_as_float(0x7fffffff)\n"
    "typedef long long int64_t;\n"
    "\n"
    /* the ABI as the runtime compiles it (kabi.h) */
    DPC_KABI_CUDA_TEXT
    "\n"
    "__device__ __forceinline__ void raise_error(const dpc_kctx *ctx, int kernel, long long index, long long limit) {\n"
    "    if (atomicCAS(&ctx->err->kernel, 0, kernel) == 0) {\n"
    "        ctx->err->index = index;\n"
    "        ctx->err->limit = limit;\n"
    "    }\n"
    "}\n"
    "\n"
    "/* NaN-propagating max, as torch.amax. */\n"
    "__device__ __forceinline__ float nanmax(float a, float b) { return (a > b || a != a) ? a : b; }\n"
    "\n"
    "__device__ __forceinline__ float warp_sum(float v) {\n"
    "    for (int o = 16; o > 0; o /= 2)\n"
    "        v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float warp_max(float v) {\n"
    "    for (int o = 16; o > 0; o /= 2)\n"
    "        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float warp_nanmax(float v) {\n"
    "    for (int o = 16; o > 0; o /= 2)\n"
    "        v = nanmax(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "    return v;\n"
    "}\n"
    "\n"
    "/* Block-wide reductions (all threads of the block call them): warps\n"
    " * reduce, warp 0 reduces the warps' partials, everyone reads the result. */\n"
    "__device__ __forceinline__ float block_sum(float v) {\n"
    "    __shared__ float part[32];\n"
    "    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n"
    "    v = warp_sum(v);\n"
    "    if (lane == 0) part[warp] = v;\n"
    "    __syncthreads();\n"
    "    v = lane < (int)(blockDim.x / 32) ? part[lane] : 0.0f;\n"
    "    v = warp_sum(v);\n"
    "    __syncthreads(); /* part is reused by the next call */\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float block_max(float v) {\n"
    "    __shared__ float part[32];\n"
    "    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n"
    "    v = warp_max(v);\n"
    "    if (lane == 0) part[warp] = v;\n"
    "    __syncthreads();\n"
    "    v = lane < (int)(blockDim.x / 32) ? part[lane] : -INFINITY;\n"
    "    v = warp_max(v);\n"
    "    __syncthreads();\n"
    "    return v;\n"
    "}\n";

/* 16-bit storage (--dtype bf16|f16): a buffer element is a struct that
 * reads as float and rounds to nearest even when a float is stored into
 * it. It has no arithmetic of its own, so every expression the emitters
 * write computes in float exactly as in f32, reductions included; only
 * loads and stores change. */
static const char PRELUDE_BF16[] =
    "\n"
    "/* bf16 storage: the top half of a float; stores round to nearest even. */\n"
    "struct dpc_bf16 {\n"
    "    unsigned short u;\n"
    "    __device__ __forceinline__ operator float() const { return __uint_as_float((unsigned)u << 16); }\n"
    "    __device__ __forceinline__ dpc_bf16 &operator=(float f) {\n"
    "        const unsigned x = __float_as_uint(f);\n"
    "        u = (x & 0x7fffffffu) > 0x7f800000u ? (unsigned short)((x >> 16) | 0x40u) /* NaN stays NaN */\n"
    "                                             : (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n"
    "        return *this;\n"
    "    }\n"
    "};\n"
    "struct alignas(8) dpc_bf16x4 { dpc_bf16 v[4]; }; /* four per load and store */\n";

static const char PRELUDE_F16[] =
    "\n"
    "/* f16 storage (IEEE half); stores round to nearest even. On the GPU the\n"
    " * conversions are one PTX instruction each; the host versions serve a\n"
    " * host compiler (dpc's CPU emulation of these kernels in its tests). */\n"
    "#ifdef __CUDA_ARCH__\n"
    "__device__ __forceinline__ float dpc_h2f(unsigned short h) {\n"
    "    float f;\n"
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "    return f;\n"
    "}\n"
    "__device__ __forceinline__ unsigned short dpc_f2h(float f) {\n"
    "    unsigned short h;\n"
    "    asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "    return h;\n"
    "}\n"
    "#else\n"
    "static inline float dpc_h2f(unsigned short h) {\n"
    "    const unsigned s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "    if (e == 0) { const float f = (float)m * 5.9604644775390625e-8f; return s ? -f : f; } /* m * 2^-24 */\n"
    "    return __uint_as_float(s | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13)));\n"
    "}\n"
    "static inline unsigned short dpc_f2h(float f) {\n"
    "    const unsigned x = __float_as_uint(f), s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;\n"
    "    if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u);    /* NaN */\n"
    "    if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);   /* 65520 and up round to inf */\n"
    "    if (a < 0x38800000u) /* below 2^-14: a subnormal, in units of 2^-24 */\n"
    "        return (unsigned short)(s | (unsigned)rintf(__uint_as_float(a) * 16777216.0f));\n"
    "    const unsigned r = a - 0x38000000u; /* rebias the exponent by 127 - 15 */\n"
    "    return (unsigned short)(s | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));\n"
    "}\n"
    "#endif\n"
    "struct dpc_f16 {\n"
    "    unsigned short u;\n"
    "    __device__ __forceinline__ operator float() const { return dpc_h2f(u); }\n"
    "    __device__ __forceinline__ dpc_f16 &operator=(float f) {\n"
    "        u = dpc_f2h(f);\n"
    "        return *this;\n"
    "    }\n"
    "};\n"
    "struct alignas(8) dpc_f16x4 { dpc_f16 v[4]; }; /* four per load and store */\n";

/* ---------------------------------------------------------- fused attention */

/* KK_ATTN (fuse.c / attn.c): one block per (batch, tile of ATTN_TQ
 * queries); the keys in blocks of 32 staged in shared memory with the
 * value block, one thread per (query, key) score with the chain (scale,
 * mask), one warp per query row for the online softmax (running max and
 * sum, shuffle reductions), and every thread holding ATTN_NA outputs
 * (query, d) that it rescales and accumulates p . v into. */
#define ATTN_TQ 16
#define ATTN_KB 32
static void emit_attn_cuda(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    emit_attn a;
    emit_attn_geom(kg, k, &a);
    int r = a.r;
    long long nt = (a.L + ATTN_TQ - 1) / ATTN_TQ, E1 = a.E + 1, na = (ATTN_TQ * a.Ev + DPC_CU_BLOCK - 1) / DPC_CU_BLOCK;
    char t1[96], t2[96], t3[96], t4[96], t5[96], t6[96], t7[96], t8[96];
    plist pl = {0};
    padd(g, &pl, a.ob, true);
    koperand_iter it = kernel_operands(kg, k, -1);
    int id, buf;
    while (koperand_next(&it, &id, &buf))
        padd(g, &pl, buf, false);
    dpc_cu_dim work = cd_mul(cd_prod(&a.batch, 0, a.nb), cd(nt, 0));
    dpc_buf_printf(g->o, "\n/* %s: fused attention [L=%lld, E=%lld] x [S=%lld, Ev=%lld], one block per %d queries */\n",
                   k->name, a.L, a.E, a.S, a.Ev, ATTN_TQ);
    kernel_head(g, k->name, &pl);
    line_of(g, k->root);
    dpc_buf_printf(g->o,
                   "    const long long row = blockIdx.x;\n"
                   "    if (row >= %s) return;\n"
                   "    const long long bi = row / %lldLL, i0 = (row %% %lldLL) * %d;\n",
                   cd_str(t1, sizeof t1, work), nt, nt, ATTN_TQ);
    emit_attn_bases(kg, &a, g->o, "    ", "long long", g->ft);
    dpc_buf_printf(g->o,
                   "    __shared__ float qs[%d * %lld], ks[%d * %lld], vs[%d * %lld], ps[%d * %d], mx[%d], sm[%d], cr[%d];\n"
                   "    const int t = threadIdx.x, lane = t %% 32, warp = t / 32;\n"
                   "    for (int x = t; x < %d * %lld; x += %d) {\n"
                   "        const long long ii = x / %lld, e = x %% %lld;\n"
                   "        qs[x] = i0 + ii < %lldLL ? (float)qp[(i0 + ii) * %s + e * %s] : 0.0f;\n"
                   "    }\n"
                   "    if (t < %d) { mx[t] = -INFINITY; sm[t] = 0.0f; }\n"
                   "    float acc[%lld];\n"
                   "    for (int u = 0; u < %lld; u++) acc[u] = 0.0f;\n"
                   "    __syncthreads();\n"
                   "    for (long long j0 = 0; j0 < %lldLL; j0 += %d) {\n"
                   "        for (int x = t; x < %d * %lld; x += %d) {\n"
                   "            const long long jj = x / %lld, e = x %% %lld;\n"
                   "            ks[jj * %lld + e] = j0 + jj < %lldLL ? (float)kp[e * %s + (j0 + jj) * %s] : 0.0f;\n"
                   "        }\n"
                   "        for (int x = t; x < %d * %lld; x += %d) {\n"
                   "            const long long jj = x / %lld, d = x %% %lld;\n"
                   "            vs[x] = j0 + jj < %lldLL ? (float)vp[(j0 + jj) * %s + d * %s] : 0.0f;\n"
                   "        }\n"
                   "        __syncthreads();\n"
                   "        for (int x = t; x < %d * %d; x += %d) {\n"
                   "            const int ii = x / %d, jj = x %% %d;\n"
                   "            float sv = -INFINITY;\n"
                   "            if (i0 + ii < %lldLL && j0 + jj < %lldLL) {\n"
                   "                float dot = 0.0f;\n"
                   "                for (int e = 0; e < %lld; e++) dot += qs[ii * %lld + e] * ks[jj * %lld + e];\n"
                   "                const long long c%d = i0 + ii, c%d = j0 + jj;\n",
                   ATTN_TQ, a.E, ATTN_KB, E1, ATTN_KB, a.Ev, ATTN_TQ, ATTN_KB, ATTN_TQ, ATTN_TQ, ATTN_TQ, ATTN_TQ, a.E,
                   DPC_CU_BLOCK, a.E, a.E, a.L, emit_dim(t1, sizeof t1, a.q.stride[r - 2]),
                   emit_dim(t2, sizeof t2, a.q.stride[r - 1]), ATTN_TQ, na, na, a.S, ATTN_KB, ATTN_KB, a.E, DPC_CU_BLOCK,
                   a.E, a.E, E1, a.S, emit_dim(t3, sizeof t3, a.kt.stride[r - 2]),
                   emit_dim(t4, sizeof t4, a.kt.stride[r - 1]), ATTN_KB, a.Ev, DPC_CU_BLOCK, a.Ev, a.Ev, a.S,
                   emit_dim(t5, sizeof t5, a.v.stride[r - 2]), emit_dim(t6, sizeof t6, a.v.stride[r - 1]), ATTN_TQ,
                   ATTN_KB, DPC_CU_BLOCK, ATTN_KB, ATTN_KB, a.L, a.S, a.E, a.E, E1, r - 2, r - 1);
    for (int i = 0; i < k->ops.len; i++)
        line_of(g, k->ops.items[i]);
    emit_attn_chain(kg, k, &a, g->o, "                ", "long long", "dot", "sv", DIALECT_CUDA);
    line_of(g, k->attn.softmax);
    dpc_buf_printf(g->o,
                   "            }\n"
                   "            ps[x] = sv;\n"
                   "        }\n"
                   "        __syncthreads();\n"
                   "        /* online softmax, one warp per query row */\n"
                   "        for (int ii = warp; ii < %d; ii += %d) {\n"
                   "            const float sv = ps[ii * %d + lane], mo = mx[ii];\n"
                   "            const float mb = warp_max(fmaxf(mo, sv));\n"
                   "            const float p = mb == -INFINITY ? 0.0f : expf(sv - mb);\n"
                   "            const float ls = warp_sum(p);\n"
                   "            ps[ii * %d + lane] = p;\n"
                   "            if (lane == 0) {\n"
                   "                const float c = mb == -INFINITY ? 1.0f : expf(mo - mb);\n"
                   "                cr[ii] = c;\n"
                   "                sm[ii] = sm[ii] * c + ls;\n"
                   "                mx[ii] = mb;\n"
                   "            }\n"
                   "        }\n"
                   "        __syncthreads();\n",
                   ATTN_TQ, DPC_CU_BLOCK / 32, ATTN_KB, ATTN_KB);
    line_of(g, k->attn.pv);
    dpc_buf_printf(g->o,
                   "        for (int u = 0; u < %lld; u++) {\n"
                   "            const int x = t + u * %d;\n"
                   "            if (x >= %d * %lld) break;\n"
                   "            const int ii = x / %lld, d = x %% %lld;\n"
                   "            float o = acc[u] * cr[ii];\n"
                   "            for (int jj = 0; jj < %d; jj++) o += ps[ii * %d + jj] * vs[jj * %lld + d];\n"
                   "            acc[u] = o;\n"
                   "        }\n"
                   "        __syncthreads();\n"
                   "    }\n"
                   "    for (int u = 0; u < %lld; u++) {\n"
                   "        const int x = t + u * %d;\n"
                   "        if (x >= %d * %lld) break;\n"
                   "        const int ii = x / %lld, d = x %% %lld;\n"
                   "        if (i0 + ii < %lldLL) op[(i0 + ii) * %s + d * %s] = acc[u] / sm[ii];\n"
                   "    }\n",
                   na, DPC_CU_BLOCK, ATTN_TQ, a.Ev, a.Ev, a.Ev, ATTN_KB, ATTN_KB, a.Ev, na, DPC_CU_BLOCK, ATTN_TQ, a.Ev,
                   a.Ev, a.Ev, a.L, emit_dim(t7, sizeof t7, a.o.stride[r - 2]), emit_dim(t8, sizeof t8, a.o.stride[r - 1]));
    kernel_tail(g);
    plan_launch(g, k->name, "", DPC_CU_BLOCK_ROWS, work, 1, &pl);
}

static void emit_kernel(cg *g, const kernel *k) {
    switch (k->kind) {
    case KK_ELEMWISE: emit_chain_kernel(g, k, k->name, 0, NULL, 0, false, false, NULL); break;
    case KK_GEMM:
        if (k->root->op == OP_LINEAR)
            emit_linear(g, k);
        else
            emit_matmul(g, k);
        break;
    case KK_CONV: emit_conv(g, k); break;
    case KK_POOL: emit_pool(g, k); break;
    case KK_ROW: emit_row(g, k); break;
    case KK_REDUCE: emit_reduce(g, k); break;
    case KK_EMBED: emit_embed(g, k); break;
    case KK_CAT: emit_cat(g, k); break;
    case KK_COPY: emit_copy(g, k); break;
    case KK_ATTN: emit_attn_cuda(g, k); break;
    case KK_RESAMPLE: emit_resample(g, k); break;
    }
}

static void emit_program(cg *g) {
    const ir_graph *ig = g->kg->g;
    dpc_buf_printf(g->o, "/* dpc %s: CUDA kernels for ", DPC_VERSION);
    emit_comment_text(g->o, ig->model_name);
    dpc_buf_puts(g->o, " (");
    emit_comment_text(g->o, ig->file);
    dpc_buf_printf(g->o, ")%s%s%s. Generated; compiled with NVRTC. */\n", g->prec != KP_F32 ? ", " : "",
                   g->prec != KP_F32 ? kprec_name(g->prec) : "", g->prec != KP_F32 ? " storage" : "");
    dpc_buf_puts(g->o, PRELUDE);
    if (g->prec == KP_BF16)
        dpc_buf_puts(g->o, PRELUDE_BF16);
    else if (g->prec == KP_F16)
        dpc_buf_puts(g->o, PRELUDE_F16);
    for (int i = 0; i < g->kg->kernels.len; i++) {
        g->kernel = i;
        if (g->kg->nprepare && (i == 0 || i == g->kg->nprepare))
            dpc_buf_puts(g->o, i == 0 ? "\n/* ---- prepare kernels: parameters and constants only, launched once\n"
                                        " * per device when the weights are bound (the plan's prepare steps) ---- */\n"
                                      : "\n/* ---- forward kernels ---- */\n");
        if (g->plan && i == g->kg->nprepare)
            g->plan->nprepare = g->plan->nsteps;
        emit_kernel(g, g->kg->kernels.items[i]);
    }
    if (g->plan && g->kg->nprepare == g->kg->kernels.len)
        g->plan->nprepare = g->plan->nsteps;
}

static void free_seen(cg *g) {
    for (int i = 0; i < g->nseen; i++)
        free(g->seen[i].canon);
    free(g->seen);
}

static char *unit_name(const kgraph *kg) {
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "%s.cu", kg->g->model_name ? kg->g->model_name : "model");
    return dpc_buf_take(&b);
}

void dpc_cu_plan_free(dpc_cu_plan *plan) {
    if (!plan)
        return;
    free(plan->steps);
    memset(plan, 0, sizeof *plan);
}

static const char *prec_type(kprec p) { return p == KP_BF16 ? "dpc_bf16" : p == KP_F16 ? "dpc_f16" : "float"; }

dpc_status dpc_cuda_program(const kgraph *kg, kprec prec, char **source, dpc_cu_plan *plan, dpc_err *e) {
    *source = NULL;
    memset(plan, 0, sizeof *plan);
    dpc_buf o;
    dpc_buf_init(&o);
    char *unit = unit_name(kg);
    cg g = {.kg = kg, .o = &o, .plan = plan, .unit = unit ? unit : "model.cu", .st = DPC_OK, .e = e, .fn_start = NO_FN,
            .prec = prec, .ft = prec_type(prec)};
    emit_program(&g);
    free(unit);
    free_seen(&g);
    if (g.st == DPC_OK && o.oom)
        g.st = dpc_errf(e, DPC_ENOMEM, "out of memory rendering CUDA kernels");
    if (g.st != DPC_OK) {
        dpc_buf_free(&o);
        dpc_cu_plan_free(plan);
        return g.st;
    }
    *source = dpc_buf_take(&o);
    if (!*source) {
        dpc_cu_plan_free(plan);
        return dpc_errf(e, DPC_ENOMEM, "out of memory rendering CUDA kernels");
    }
    return DPC_OK;
}

void emit_cuda(const kgraph *kg, kprec prec, dpc_buf *out) {
    char *unit = unit_name(kg);
    cg g = {.kg = kg, .o = out, .plan = NULL, .unit = unit ? unit : "model.cu", .st = DPC_OK, .e = NULL, .fn_start = NO_FN,
            .prec = prec, .ft = prec_type(prec)};
    emit_program(&g);
    free(unit);
    free_seen(&g);
}
