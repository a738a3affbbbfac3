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
 * what the content-addressed cache keys on. */
#include "emit.h"
#include "kabi_text.h"
#include "kmath_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- helpers */

const char *emit_dim(char *b, size_t n, dim d) {
    if (!d.sym)
        snprintf(b, n, "%lldLL", (long long)d.k);
    else if (d.k == 1)
        snprintf(b, n, "N");
    else
        snprintf(b, n, "(%lldLL * N)", (long long)d.k);
    return b;
}

/* Product of dims [from, to) as a C expression. */
const char *emit_prod(char *b, size_t n, const shape *s, int from, int to) {
    int64_t k = 1;
    bool sym = false;
    for (int i = from; i < to; i++) {
        k *= s->d[i].k;
        sym |= s->d[i].sym;
    }
    return emit_dim(b, n, (dim){k, sym});
}

static ir_node *nd(const kgraph *kg, int id) { return (ir_node *)kgraph_node(kg, id); }

void emit_comment(dpc_buf *o, const char *indent, const ir_node *n) {
    dpc_buf_printf(o, "%s/* %%%d = %s", indent, n->id, ir_op_name(n->op));
    if (n->at.file) { /* the path and the scope are the user's text */
        dpc_buf_puts(o, "  ");
        emit_comment_text(o, n->at.file->path);
        dpc_buf_printf(o, ":%d", n->at.line);
    }
    if (n->scope && n->scope[0]) {
        dpc_buf_puts(o, " (");
        emit_comment_text(o, n->scope);
        dpc_buf_puts(o, ")");
    }
    dpc_buf_puts(o, " */\n");
}

static bool in_chain(const kernel *k, const ir_node *x) {
    for (int i = 0; i < k->ops.len; i++)
        if (k->ops.items[i] == x)
            return true;
    return false;
}

/* The offset of element (vc[0], vc[1], ...) of a strided view (kernel.h),
 * a NULL coordinate read at 0 (a broadcast dim). */
void emit_strided(dpc_buf *o, const kaccess *a, const char *const *vc, int rank) {
    char t[96];
    dpc_buf_printf(o, "(%lldLL", (long long)a->off);
    if (a->off_n)
        dpc_buf_printf(o, " + %s", emit_dim(t, sizeof t, (dim){a->off_n, true}));
    for (int j = 0; j < rank; j++)
        if (vc[j] && a->stride[j].k)
            dpc_buf_printf(o, " + %s * %s", vc[j], emit_dim(t, sizeof t, a->stride[j]));
    dpc_buf_puts(o, ")");
}

/* The offset at which x is read for output coordinates c0..c{r-1} of shape
 * os (x broadcasts to os, NumPy style). */
void emit_offset(const kgraph *kg, dpc_buf *o, const ir_node *x, const shape *os, bool coords_ok) {
    const kaccess *a = &kg->acc[x->id];
    char t[96];
    if (shape_eq(&x->sh, os) && a->kind == ACC_CONTIG) {
        dpc_buf_puts(o, "i");
        return;
    }
    (void)coords_ok;
    int r = os->rank, rx = x->sh.rank;
    /* view coordinates of x */
    const char *vc[IR_MAX_RANK];
    char vcb[IR_MAX_RANK][16];
    for (int j = 0; j < rx; j++) {
        int oc = r - rx + j;
        bool bcast = !x->sh.d[j].sym && x->sh.d[j].k == 1 && !(os->d[oc].k == 1 && !os->d[oc].sym);
        if (bcast)
            vc[j] = NULL;
        else {
            snprintf(vcb[j], sizeof vcb[j], "c%d", oc);
            vc[j] = vcb[j];
        }
    }
    if (a->kind == ACC_STRIDED) {
        emit_strided(o, a, vc, rx);
        return;
    }
    dpc_buf_puts(o, "(0");
    {
        for (int j = 0; j < rx; j++)
            if (vc[j])
                dpc_buf_printf(o, " + %s * %s", vc[j], emit_prod(t, sizeof t, &x->sh, j + 1, rx));
    }
    dpc_buf_puts(o, ")");
}

bool emit_leaf_needs_coords(const ir_node *leaf) { return leaf->op == OP_IOTA && leaf->attr.leaf.step != 0; }

bool emit_chain_reads_iota(const kgraph *kg, const kernel *k, int from) {
    for (int i = from < 0 ? 0 : from; i < k->ops.len; i++) {
        const ir_node *n = k->ops.items[i];
        for (int j = 0; j < n->nin; j++) {
            const kaccess *a = &kg->acc[n->in[j]];
            if (a->kind == ACC_LEAF && emit_leaf_needs_coords(a->base))
                return true;
        }
    }
    return false;
}

static bool needs_coords(const kgraph *kg, const kernel *k, const shape *os) {
    if (emit_chain_reads_iota(kg, k, 0))
        return true;
    for (int i = 0; i < k->ops.len; i++)
        if (ir_op_class(((const ir_node *)k->ops.items[i])->op) == OC_CHANNEL)
            return true; /* per-channel operands are read at c1 */
    koperand_iter it = kernel_operands(kg, k, 0);
    int id, buf;
    while (koperand_next(&it, &id, &buf))
        if (!shape_eq(&nd(kg, id)->sh, os) || kg->acc[id].kind != ACC_CONTIG)
            return true;
    if (k->kind == KK_COPY && k->src.kind == ACC_STRIDED)
        return true;
    return false;
}

void emit_coords(dpc_buf *o, const char *indent, const shape *os) {
    char t[96];
    dpc_buf_printf(o, "%sint64_t rem = i;\n", indent);
    for (int j = os->rank - 1; j >= 0; j--) {
        emit_dim(t, sizeof t, os->d[j]);
        if (j > 0)
            dpc_buf_printf(o, "%sconst int64_t c%d = rem %% %s; rem /= %s;\n", indent, j, t, t);
        else
            dpc_buf_printf(o, "%sconst int64_t c%d = rem;\n", indent, j);
    }
    dpc_buf_printf(o, "%s(void)rem;\n", indent);
}

void emit_leaf(dpc_buf *o, const ir_node *leaf, const shape *os) {
    if (emit_leaf_needs_coords(leaf)) {
        /* start + step * index along its dim, in double as PyTorch's arange */
        int ax = leaf->attr.leaf.axis, oc = os->rank - leaf->sh.rank + ax;
        bool bcast = !leaf->sh.d[ax].sym && leaf->sh.d[ax].k == 1;
        dpc_buf_puts(o, "((float)(");
        emit_float(o, leaf->attr.leaf.value, false);
        if (!bcast && oc >= 0) {
            dpc_buf_puts(o, " + ");
            emit_float(o, leaf->attr.leaf.step, false);
            dpc_buf_printf(o, " * (double)c%d", oc);
        }
        dpc_buf_puts(o, "))");
        return;
    }
    if (leaf->op == OP_SCALAR) {
        dpc_buf_printf(o, "ctx->scalars[%d]", leaf->input_index);
        return;
    }
    if (leaf->op == OP_BATCH) { /* this replica's batch size, as x.shape[0] in PyTorch */
        dpc_buf_puts(o, "((float)N)");
        return;
    }
    emit_float(o, leaf->attr.leaf.value, true);
}

/* A C expression for operand x of an elementwise op. */
static void operand(const kgraph *kg, const kernel *k, dpc_buf *o, const ir_node *x, const shape *os,
                    const char *pre) {
    const kaccess *a = &kg->acc[x->id];
    if (in_chain(k, x) || (k->root == x && k->kind != KK_COPY)) {
        dpc_buf_printf(o, "v%d", x->id);
        return;
    }
    if (a->kind == ACC_LEAF) {
        emit_leaf(o, a->base, os);
        return;
    }
    dpc_buf_printf(o, "%sb%d[", pre, kg->buf_of[x->id]);
    emit_offset(kg, o, x, os, true);
    dpc_buf_puts(o, "]");
}

/* Eval batch norm: a per-channel affine over dim 1. */
static void emit_channel_op(const kgraph *kg, dpc_buf *o, const ir_node *n, const char *x, const char *pre) {
    int bm = kg->buf_of[n->in[1]], bv = kg->buf_of[n->in[2]];
    char eps[EMIT_FLOAT_MAX];
    dpc_buf_printf(o, "(%s - %sb%d[c1]) / sqrtf(%sb%d[c1] + %s)", x, pre, bm, pre, bv,
                   emit_float_str(eps, sizeof eps, n->attr.norm.eps, true));
    if (n->nin > 3)
        dpc_buf_printf(o, " * %sb%d[c1] + %sb%d[c1]", pre, kg->buf_of[n->in[3]], pre, kg->buf_of[n->in[4]]);
}

/* One elementwise op as a statement `const float vID = ...;`: the op
 * table's expression for the dialect (ir.h), or the per-channel form.
 * False when the op has no expression in the dialect (the C dialect then
 * holds an #error naming the op, never a made-up value). */
bool emit_elementwise_op(const kgraph *kg, const kernel *k, dpc_buf *o, const ir_node *n, const shape *os,
                         const char *indent, const char *pre, ir_dialect d) {
    emit_comment(o, indent, n);
    dpc_buf a, b, z, e;
    dpc_buf_init(&a);
    dpc_buf_init(&b);
    dpc_buf_init(&z);
    dpc_buf_init(&e);
    const ir_opdef *def = ir_opdef_of(n->op);
    operand(kg, k, &a, nd(kg, n->in[0]), os, pre);
    if (def->cls == OC_BINARY || def->cls == OC_TERNARY)
        operand(kg, k, &b, nd(kg, n->in[1]), os, pre);
    if (def->cls == OC_TERNARY)
        operand(kg, k, &z, nd(kg, n->in[2]), os, pre);
    bool ok = true;
    if (def->cls == OC_TERNARY) {
        /* where: every operand read unconditionally, into locals first. GCC
         * 12.2 at -O3 -march=native (AVX-512) miscompiles `c ? b0[i] : 0.0f`
         * after a broadcast read of c (masked loads; the mask_create case
         * catches it); with plain loads it blends. */
        dpc_buf_printf(o, "%sconst float v%d_x = %s, v%d_y = %s, v%d_z = %s;\n", indent, n->id, a.data, n->id, b.data,
                       n->id, z.data);
        dpc_buf_free(&a);
        dpc_buf_free(&b);
        dpc_buf_free(&z);
        dpc_buf_printf(&a, "v%d_x", n->id);
        dpc_buf_printf(&b, "v%d_y", n->id);
        dpc_buf_printf(&z, "v%d_z", n->id);
    }
    const kaccess *ya = def->cls == OC_BINARY ? &kg->acc[n->in[1]] : NULL;
    if (def->cls == OC_CHANNEL)
        emit_channel_op(kg, &e, n, a.data, pre);
    else if (n->op == OP_POW && ya && ya->kind == ACC_LEAF && ya->base->op == OP_CONST &&
             (ya->base->attr.leaf.value == 2.0 || ya->base->attr.leaf.value == 3.0))
        /* x ** 2 and x ** 3 as products, as PyTorch's CPU pow computes them
         * (and vectorisable, where powf is a libm call) */
        dpc_buf_printf(&e, "(%s * %s%s%s)", a.data, a.data, ya->base->attr.leaf.value == 3.0 ? " * " : "",
                       ya->base->attr.leaf.value == 3.0 ? a.data : "");
    else
        ok = ir_op_expr(n->op, d, a.data, b.data ? b.data : "", z.data ? z.data : "", &e);
    if (ok)
        dpc_buf_printf(o, "%sconst float v%d = %s;\n", indent, n->id, e.data);
    else
        dpc_buf_printf(o, "#error \"op %s has no %s expression\"\n", def->name, d == DIALECT_CUDA ? "CUDA" : "C");
    dpc_buf_free(&a);
    dpc_buf_free(&b);
    dpc_buf_free(&z);
    dpc_buf_free(&e);
    return ok;
}

/* ---------------------------------------------------------- threads
 *
 * A kernel's outer loop is split over the replica's threads (ctx->threads,
 * its share of the cores: backend_cpu.c) by an OpenMP `parallel for` with a
 * static schedule, when the kernel touches at least DPC_PAR_MIN elements;
 * smaller ones stay on the calling thread (forking costs more than they
 * take, measured: docs/performance.md). Only independent iterations are
 * split (elements, rows, columns), never a reduction, so the result does
 * not depend on the thread count. The kernels are compiled with -fopenmp
 * (backend_cpu.c); oneDNN's GEMMs use the same OpenMP runtime. */
#define DPC_PAR_MIN 32768

/* The pragma before a loop nest of `collapse` loops touching `work`
 * elements (a C expression). */
#define PAR_FOR_PRAGMA "#pragma omp parallel for schedule(static) num_threads(ctx->threads)"
static void emit_par_for(dpc_buf *o, const char *indent, int collapse, const char *work) {
    dpc_buf_printf(o, "%s" PAR_FOR_PRAGMA, indent);
    if (collapse > 1)
        dpc_buf_printf(o, " collapse(%d)", collapse);
    dpc_buf_printf(o, " if (ctx->threads > 1 && (%s) >= %dLL)\n", work, DPC_PAR_MIN);
}

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

/* The dim of os along which view a (its rank-ra coordinates the last ra of
 * os's) is contiguous, when that is not os's innermost dim: a permute's
 * NHWC read in an NCHW loop. -1 when there is none. */
static int unit_dim(const kaccess *a, int ra, const shape *os) {
    if (a->kind != ACC_STRIDED)
        return -1;
    for (int j = 0; j < ra; j++)
        if (a->stride[j].k == 1 && !a->stride[j].sym && os->rank - ra + j < os->rank - 1 &&
            os->d[os->rank - ra + j].k > 1)
            return os->rank - ra + j;
    return -1;
}

/* One loop per dim of os, opening two blocks (the caller closes both): no
 * division per element, and the innermost loop vectorises; the outer dims
 * are split over the threads, and each row of the innermost dim starts at
 * its flat index i. The loop over dim `near` (unit_dim, or -1) runs just
 * outside the innermost: the rows the inner loop gathers at a stride are
 * then a block that stays in L1 (ConvNeXt's layer-scale + residual over the
 * NHWC block output, its NCHW copies: 56 pixels x C floats per row, not the
 * whole image per channel); each element is computed as before. */
static void emit_dim_loops(dpc_buf *o, const shape *os, const char *total, int near) {
    char t[96];
    int r = os->rank;
    emit_par_for(o, "", r - 1, total);
    for (int q = 0; q < r - 1; q++) {
        int j = near < 0 ? q : q < r - 2 ? q + (q >= near) : near;
        dpc_buf_printf(o, "    for (int64_t c%d = 0; c%d < %s; c%d++)\n", j, j, emit_dim(t, sizeof t, os->d[j]), j);
    }
    dpc_buf_puts(o, "    {\n        int64_t i = ");
    for (int j = 0; j < r - 1; j++)
        dpc_buf_puts(o, "(");
    dpc_buf_puts(o, "0");
    for (int j = 0; j < r - 1; j++)
        dpc_buf_printf(o, " + c%d) * %s", j, emit_dim(t, sizeof t, os->d[j + 1]));
    dpc_buf_printf(o, "; /* the flat index of (c0, c1, ...) */\n"
                      "        for (int64_t c%d = 0; c%d < %s; c%d++, i++) {\n",
                   r - 1, r - 1, emit_dim(t, sizeof t, os->d[r - 1]), r - 1);
}

/* unit_dim of the first operand of k's chain that has one */
static int chain_unit_dim(const kgraph *kg, const kernel *k, const shape *os) {
    koperand_iter it = kernel_operands(kg, k, 0);
    int id, buf;
    while (koperand_next(&it, &id, &buf)) {
        int d = unit_dim(&kg->acc[id], nd(kg, id)->sh.rank, os);
        if (d >= 0)
            return d;
    }
    return -1;
}

/* The loop that applies a kernel's elementwise chain over its output. The
 * first op reads `first_value` instead of a buffer when the chain follows a
 * GEMM (the epilogue). */
static void emit_chain_loop_from(const kgraph *kg, const kernel *k, dpc_buf *o, const char *seed, int from) {
    const shape *os = &k->out->sh;
    int outb = kg->buf_of[k->out->id];
    bool coords = needs_coords(kg, k, os) || (seed && (strstr(seed, "c1") || strstr(seed, "[c")));
    char total[96];
    emit_prod(total, sizeof total, os, 0, os->rank);
    int close = 1;
    if (coords && os->rank > 1) {
        emit_dim_loops(o, os, total, chain_unit_dim(kg, k, os));
        close = 2;
    } else if (coords && os->rank == 1) {
        emit_par_for(o, "", 1, total);
        dpc_buf_printf(o, "    for (int64_t c0 = 0; c0 < %s; c0++) {\n        const int64_t i = c0;\n", total);
    } else {
        dpc_buf_printf(o, "    const int64_t total = %s;\n", total);
        emit_par_for(o, "", 1, "total");
        dpc_buf_puts(o, "    for (int64_t i = 0; i < total; i++) {\n");
        if (coords)
            emit_coords(o, "        ", os);
    }
    if (seed)
        dpc_buf_printf(o, "        const float v%d = %s;\n",
                       from > 0 ? ((const ir_node *)k->ops.items[from - 1])->id : k->root->id, seed);
    for (int i = from; i < k->ops.len; i++)
        emit_elementwise_op(kg, k, o, k->ops.items[i], os, "        ", "", DIALECT_C);
    dpc_buf_printf(o, "        b%d[i] = v%d;\n", outb, k->out->id);
    dpc_buf_puts(o, close == 2 ? "    }\n    }\n" : "    }\n");
}

static void emit_chain_loop(const kgraph *kg, const kernel *k, dpc_buf *o, const char *seed) {
    emit_chain_loop_from(kg, k, o, seed, 0);
}

/* ---------------------------------------------------------- kernels */

static void emit_gemm(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const ir_node *n = k->root, *x = nd(kg, n->in[0]), *w = nd(kg, n->in[1]);
    int outb = kg->buf_of[k->out->id];
    char t1[96], t2[96];
    emit_comment(o, "    ", n);
    if (n->op == OP_LINEAR) {
        int64_t K = w->sh.d[1].k, No = w->sh.d[0].k;
        dpc_buf_printf(o, "    const int64_t M = %s;\n", emit_prod(t1, sizeof t1, &x->sh, 0, x->sh.rank - 1));
        if (k->wt) { /* W^T [K, No], written at load (fuse.c linear_wt): the runtime's packed call first */
            int wb = kg->buf_of[k->wt->id];
            dpc_buf_printf(o,
                           "    const int called = ctx->linear ? ctx->linear(ctx, %d, M, %lld, %lld, b%d, b%d, b%d) : 1;\n"
                           "    if (called < 0) return KERNEL_ID + 1;\n"
                           "    if (called > 0)\n",
                           wb, (long long)No, (long long)K, kg->buf_of[x->id], wb, outb);
            dpc_buf_printf(o, "    ctx->sgemm(0, 0, M, %lld, %lld, b%d, %lld, b%d, %lld, b%d, %lld);\n", (long long)No,
                           (long long)K, kg->buf_of[x->id], (long long)K, wb, (long long)No, outb, (long long)No);
        } else
            dpc_buf_printf(o, "    ctx->sgemm(0, 1, M, %lld, %lld, b%d, %lld, b%d, %lld, b%d, %lld);\n", (long long)No,
                           (long long)K, kg->buf_of[x->id], (long long)K, kg->buf_of[w->id], (long long)K, outb,
                           (long long)No);
        char seed[128];
        if (n->nin > 2)
            /* the bias by the last coordinate: a loop per dim, no i % No */
            snprintf(seed, sizeof seed, "b%d[i] + b%d[c%d]", outb, kg->buf_of[n->in[2]], k->out->sh.rank - 1);
        else
            snprintf(seed, sizeof seed, "b%d[i]", outb);
        if (n->nin > 2 || k->ops.len)
            emit_chain_loop(kg, k, o, seed);
        return;
    }
    /* matmul with torch.matmul's broadcasting; 1-D operands promoted */
    const ir_node *y = w;
    emit_mm mm;
    emit_mm_geom(&x->sh, &y->sh, &mm);
    const shape *xs = &mm.x, *ys = &mm.y, *bs = &mm.batch;
    /* M (rows of the left operand), Nc (columns of the right) and K (the
     * contracted dim: transpose(x) @ x sums over the batch) may be N */
    char Ms[96], Ns[96], Ks[96];
    emit_dim(Ms, sizeof Ms, mm.M);
    emit_dim(Ns, sizeof Ns, mm.N);
    emit_dim(Ks, sizeof Ks, mm.K);
    dpc_buf_printf(o, "    const int64_t M = %s, Nc = %s, K = %s;\n", Ms, Ns, Ks);
    if (ys->rank == 2) {
        /* the right operand is one matrix: fold all batches into M; a
         * parameter [K, Nc] (HuggingFace's Conv1D) is a linear's W^T, and
         * the runtime's packed call goes first, as for a linear */
        const kaccess *ya = &kg->acc[y->id];
        int yb = kg->buf_of[y->id];
        emit_prod(t1, sizeof t1, bs, 0, bs->rank);
        if (ya->kind == ACC_CONTIG && ya->base && ya->base->op == OP_PARAM && yb >= 0)
            dpc_buf_printf(o,
                           "    const int called = ctx->linear ? ctx->linear(ctx, %d, %s * M, Nc, K, b%d, b%d, b%d) : 1;\n"
                           "    if (called < 0) return KERNEL_ID + 1;\n"
                           "    if (called > 0)\n",
                           yb, t1, kg->buf_of[x->id], yb, outb);
        dpc_buf_printf(o, "    ctx->sgemm(0, 0, %s * M, Nc, K, b%d, K, b%d, Nc, b%d, Nc);\n", t1, kg->buf_of[x->id], yb,
                       outb);
    } else {
        dpc_buf_printf(o, "    const int64_t nb = %s;\n", emit_prod(t1, sizeof t1, bs, 0, bs->rank));
        dpc_buf_puts(o, "    for (int64_t bi = 0; bi < nb; bi++) {\n        int64_t rem = bi, ox = 0, oy = 0;\n");
        for (int i = bs->rank - 1; i >= 0; i--) {
            int ix = emit_mm_axis(&mm, xs, i), iy = emit_mm_axis(&mm, ys, i);
            dpc_buf_printf(o, "        { const int64_t c = rem %% %s; rem /= %s;\n", emit_dim(t1, sizeof t1, bs->d[i]),
                           emit_dim(t2, sizeof t2, bs->d[i]));
            if (ix >= 0)
                dpc_buf_printf(o, "          ox += c * %s * M * K;\n", emit_prod(t1, sizeof t1, xs, ix + 1, xs->rank - 2));
            if (iy >= 0)
                dpc_buf_printf(o, "          oy += c * %s * K * Nc;\n", emit_prod(t1, sizeof t1, ys, iy + 1, ys->rank - 2));
            dpc_buf_puts(o, "        }\n");
        }
        dpc_buf_printf(o, "        ctx->sgemm(0, 0, M, Nc, K, b%d + ox, K, b%d + oy, Nc, b%d + bi * M * Nc, Nc);\n    }\n",
                       kg->buf_of[x->id], kg->buf_of[y->id], outb);
    }
    if (k->ops.len) {
        char seed[64];
        snprintf(seed, sizeof seed, "b%d[i]", outb);
        emit_chain_loop(kg, k, o, seed);
    }
}

static void emit_conv(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const ir_node *n = k->root, *x = nd(kg, n->in[0]), *w = nd(kg, n->in[1]);
    emit_conv_dims cv;
    emit_conv_geom(n, x, w, &cv); /* groups were checked by the front end */
    int xb = kg->buf_of[x->id], wb = kg->buf_of[w->id], cb = k->scratch, rb = k->scratch2;
    emit_comment(o, "    ", n);
    /* the runtime's library call first (ctx->conv, kabi.h), with the
     * post-ops conv_describe found; the rest of the epilogue in place over
     * the result. Declined (1) or no callback: im2col + GEMM below. */
    dpc_conv_desc d;
    int sum, yb = kg->buf_of[k->out->id];
    conv_describe(kg, k, &d, &sum);
    char bias[32] = "NULL", res[32] = "NULL";
    if (n->nin > 2)
        snprintf(bias, sizeof bias, "b%d", kg->buf_of[n->in[2]]);
    if (sum >= 0)
        snprintf(res, sizeof res, "b%d", kg->buf_of[sum]);
    dpc_buf_printf(o,
                   "    const int called = ctx->conv ? ctx->conv(ctx, %d, b%d, b%d, %s, %s, b%d) : 1;\n"
                   "    if (called < 0) return KERNEL_ID + 1;\n"
                   "    if (called == 0) {\n",
                   conv_index_of(kg, k), xb, wb, bias, res, yb);
    if (d.nfused < k->ops.len) {
        char seed[32];
        snprintf(seed, sizeof seed, "b%d[i]", yb);
        emit_chain_loop_from(kg, k, o, seed, d.nfused);
    }
    dpc_buf_puts(o, "    return 0;\n    }\n");
    dpc_buf_printf(o, "    float *const col = (float *)ctx->buf[%d];\n    float *const res = (float *)ctx->buf[%d];\n", cb, rb);
    dpc_buf_printf(o, "    const int64_t cols = N * %lldLL; /* all images side by side */\n", cv.HW);
    dpc_buf_printf(o, "    for (int64_t g = 0; g < %lldLL; g++) {\n", cv.G);
    /* im2col: col[(c*kh + ki)*kw + kj][n*HW + oh*Wo + ow]. Only the leading
     * padding (ph, pw) enters the index: trailing padding, larger by one for
     * padding="same" with an even kernel, is the reads past H, W that give 0.
     * Per kernel column kj the output columns [ow0, ow1) read inside the
     * image, so the copy has no bounds test; rows outside the image are
     * zero. With stride 1 the copy is a memcpy: GCC 12.2 at -O3
     * -march=native (AVX-512) miscompiles the equivalent copy loop in this
     * nest (it zeroes rows it should copy; the ops_conv cases catch it). */
    dpc_buf_printf(o,
                   "        for (int64_t r = 0; r < %lldLL; r++) {\n"
                   "            const int64_t c = r / %lldLL, ki = (r / %lldLL) %% %lldLL, kj = r %% %lldLL;\n"
                   "            const int64_t a = %lldLL - kj * %lldLL, e = %lldLL - 1 + a; /* iw = ow*sw - a */\n"
                   "            int64_t ow1 = e < 0 ? 0 : e / %lldLL + 1, ow0 = a > 0 ? (a + %lldLL - 1) / %lldLL : 0;\n"
                   "            if (ow1 > %lldLL) ow1 = %lldLL;\n"
                   "            if (ow0 > ow1) ow0 = ow1;\n"
                   "            float *const dst = col + r * cols;\n"
                   "            for (int64_t img = 0; img < N; img++) {\n"
                   "                const float *src = b%d + (img * %lldLL + g * %lldLL + c) * %lldLL;\n"
                   "                for (int64_t oh = 0; oh < %lldLL; oh++) {\n"
                   "                    const int64_t ih = oh * %lldLL - %lldLL + ki * %lldLL;\n"
                   "                    float *const d = dst + (img * %lldLL + oh) * %lldLL;\n"
                   "                    if (ih < 0 || ih >= %lldLL) {\n"
                   "                        memset(d, 0, %lldLL * sizeof(float));\n"
                   "                        continue;\n"
                   "                    }\n"
                   "                    const int64_t base = ih * %lldLL - a;\n"
                   "                    memset(d, 0, (size_t)ow0 * sizeof(float));\n",
                   cv.Kd, cv.kh * cv.kw, cv.kw, cv.kh, cv.kw, cv.pw, cv.dw, cv.W, cv.sw, cv.sw, cv.sw, cv.Wo, cv.Wo, xb,
                   cv.C, cv.Cg, cv.H * cv.W, cv.Ho, cv.sh, cv.ph, cv.dh, cv.Ho, cv.Wo, cv.H, cv.Wo, cv.W);
    if (cv.sw == 1)
        dpc_buf_puts(o, "                    memcpy(d + ow0, src + base + ow0, (size_t)(ow1 - ow0) * sizeof(float));\n");
    else
        dpc_buf_printf(o, "                    for (int64_t ow = ow0; ow < ow1; ow++) d[ow] = src[base + ow * %lldLL];\n", cv.sw);
    dpc_buf_printf(o, "                    memset(d + ow1, 0, (size_t)(%lldLL - ow1) * sizeof(float));\n"
                      "                }\n            }\n        }\n",
                   cv.Wo);
    dpc_buf_printf(o, "        ctx->sgemm(0, 0, %lld, cols, %lld, b%d + g * %lldLL, %lld, col, cols, res + g * %lldLL * cols, cols);\n",
                   cv.Cog, cv.Kd, wb, cv.Cog * cv.Kd, cv.Kd, cv.Cog);
    dpc_buf_puts(o, "    }\n");
    /* epilogue: back to NCHW, bias, fused chain */
    char seed[192];
    if (n->nin > 2)
        snprintf(seed, sizeof seed, "res[c1 * cols + c0 * %lldLL + c2 * %lldLL + c3] + b%d[c1]", cv.HW, cv.Wo,
                 kg->buf_of[n->in[2]]);
    else
        snprintf(seed, sizeof seed, "res[c1 * cols + c0 * %lldLL + c2 * %lldLL + c3]", cv.HW, cv.Wo);
    emit_chain_loop(kg, k, o, seed);
}

static void emit_pool(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    long long C = x->sh.d[1].k, H = x->sh.d[2].k, W = x->sh.d[3].k, Ho = n->sh.d[2].k, Wo = n->sh.d[3].k;
    int xb = kg->buf_of[x->id], ob = kg->buf_of[n->id];
    char v[64];
    emit_comment(o, "    ", n);
    char work[96];
    snprintf(work, sizeof work, "N * %lldLL", C * (H * W > Ho * Wo ? H * W : Ho * Wo));
    emit_par_for(o, "", 1, work);
    dpc_buf_printf(o, "    for (int64_t p = 0; p < N * %lldLL; p++) {\n        const float *src = b%d + p * %lldLL;\n"
                      "        float *dst = b%d + p * %lldLL;\n",
                   C, xb, H * W, ob, Ho * Wo);
    dpc_buf_printf(o, "        for (int64_t oh = 0; oh < %lldLL; oh++)\n        for (int64_t ow = 0; ow < %lldLL; ow++) {\n", Ho, Wo);
    emit_pool_window(o, n, x, "            ", "int64_t");
    if (n->op == OP_AVGPOOL2D && !emit_pool_uses_padded(n))
        dpc_buf_puts(o, "            (void)padded;\n");
    dpc_buf_printf(o, "            dst[oh * %lldLL + ow] = %s;\n", Wo, emit_pool_value(v, sizeof v, n));
    dpc_buf_puts(o, "        }\n    }\n");
}

/* ---------------------------------------------------------- NHWC loops
 *
 * A pool or elementwise kernel whose source may be a kept (NHWC) conv
 * result (conv_nhwc_root, conv_post.c) first asks ctx->kept which layout
 * it holds this forward and, when NHWC, runs these loops: the same values
 * in the same order per element, the channel innermost. Most also have a
 * loop over oneDNN's nChw8c (conv_blk_reader), run when the result is
 * kept in that layout (without AVX-512: runtime/cpu/conv_dnnl.c). */

/* The chain over an NHWC [N, C, H, W] output: i is the NHWC flat index,
 * c0 the image and c1 the channel, which is all a per-(n, c) operand reads
 * (emit_offset); the source is read at i. A channels-last view
 * (conv_cl_view) is read through its strides at the pixel's c2, c3: the
 * same address as i, contiguous along the inner loop. With blk, over an
 * nChw8c output (C a multiple of 8, no channels-last view:
 * conv_blk_reader), i the blocked flat index, the source read at i too. */
static void emit_chain_nhwc(const kgraph *kg, const kernel *k, dpc_buf *o, bool blk) {
    const shape *os = &k->out->sh;
    long long C = os->d[1].k, HW = os->d[2].k * os->d[3].k;
    char t[96], total[96];
    emit_prod(total, sizeof total, os, 0, os->rank);
    emit_par_for(o, "    ", blk ? 3 : 2, total);
    dpc_buf_printf(o, "    for (int64_t c0 = 0; c0 < %s; c0++)\n", emit_dim(t, sizeof t, os->d[0]));
    if (blk)
        dpc_buf_printf(o,
                       "    for (int64_t cb = 0; cb < %lldLL; cb += 8)\n"
                       "    for (int64_t hw = 0; hw < %lldLL; hw++) {\n"
                       "        int64_t i = (c0 * %lldLL + cb) * %lldLL + hw * 8;\n",
                       C, HW, C, HW);
    else
        dpc_buf_printf(o,
                       "    for (int64_t hw = 0; hw < %lldLL; hw++) {\n"
                       "        int64_t i = (c0 * %lldLL + hw) * %lldLL;\n",
                       HW, HW, C);
    koperand_iter it = kernel_operands(kg, k, 0);
    int id, buf;
    bool cl = false;
    while (koperand_next(&it, &id, &buf))
        cl |= conv_cl_view(kg, nd(kg, id), os);
    if (cl)
        dpc_buf_printf(o, "        const int64_t c2 = hw / %lldLL, c3 = hw %% %lldLL;\n", (long long)os->d[3].k,
                       (long long)os->d[3].k);
    if (blk)
        dpc_buf_puts(o, "        for (int64_t c1 = cb; c1 < cb + 8; c1++, i++) {\n");
    else
        dpc_buf_printf(o, "        for (int64_t c1 = 0; c1 < %lldLL; c1++, i++) {\n", C);
    for (int i = 0; i < k->ops.len; i++)
        emit_elementwise_op(kg, k, o, k->ops.items[i], os, "            ", "", DIALECT_C);
    dpc_buf_printf(o, "            b%d[i] = v%d;\n        }\n    }\n", kg->buf_of[k->out->id], k->out->id);
}

/* A pool over NHWC input into NHWC output: per output pixel and block of
 * POOL_CB channels, the window's taps in the NCHW loop's order, each over
 * the block's channels (the blocks split a global pool over the threads
 * at batch 1, too). With blk, over nChw8c into nChw8c (C a multiple of 8,
 * conv_blk_reader): per block of 8 channels and output pixel, likewise.
 * The window accumulates in a local array, not in dst, so the compiler
 * need not assume dst aliases src (accumulated in dst, the nChw8c max pool
 * took 5% of a ResNet-50 forward); and the 8 channels of an nChw8c tap
 * carry `omp simd`, since GCC otherwise unrolls that loop whole and leaves
 * the NaN-aware max scalar (3.3% of a ResNet-18 forward; the kernels are
 * compiled with -fopenmp, backend_cpu.c). */
#define POOL_CB 64
#define SIMD_PRAGMA "                _Pragma(\"omp simd\")\n"
static void emit_pool_nhwc(const kgraph *kg, const kernel *k, dpc_buf *o, bool blk) {
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    long long C = x->sh.d[1].k, H = x->sh.d[2].k, W = x->sh.d[3].k, Ho = n->sh.d[2].k, Wo = n->sh.d[3].k;
    long long ps = blk ? 8 : C; /* floats from one pixel to the next */
    int xb = kg->buf_of[x->id], ob = kg->buf_of[n->id];
    char work[96], v[64];
    snprintf(work, sizeof work, "N * %lldLL", C * (H * W > Ho * Wo ? H * W : Ho * Wo));
    emit_par_for(o, "    ", 4, work);
    if (blk)
        dpc_buf_printf(o,
                       "    for (int64_t img = 0; img < N; img++)\n"
                       "    for (int64_t cb = 0; cb < %lldLL; cb += 8)\n"
                       "    for (int64_t oh = 0; oh < %lldLL; oh++)\n"
                       "    for (int64_t ow = 0; ow < %lldLL; ow++) {\n"
                       "        enum { lo = 0, hi = 8 };\n"
                       "        float acc[8];\n"
                       "        const float *const base = b%d + img * %lldLL + cb * %lldLL;\n"
                       "        float *const dst = b%d + img * %lldLL + cb * %lldLL + (oh * %lldLL + ow) * 8;\n",
                       C, Ho, Wo, xb, H * W * C, H * W, ob, Ho * Wo * C, Ho * Wo, Wo);
    else
        dpc_buf_printf(o,
                       "    for (int64_t img = 0; img < N; img++)\n"
                       "    for (int64_t oh = 0; oh < %lldLL; oh++)\n"
                       "    for (int64_t ow = 0; ow < %lldLL; ow++)\n"
                       "    for (int64_t cb = 0; cb < %lldLL; cb += %d) {\n"
                       "        const int64_t lo = cb, hi = cb + %d < %lldLL ? cb + %d : %lldLL;\n"
                       "        float acc[%d];\n"
                       "        const float *const base = b%d + img * %lldLL;\n"
                       "        float *const dst = b%d + ((img * %lldLL + oh) * %lldLL + ow) * %lldLL;\n",
                       Ho, Wo, C, POOL_CB, POOL_CB, C, POOL_CB, C, POOL_CB, xb, H * W * C, ob, Ho, Wo, C);
    if (n->op == OP_MAXPOOL2D) { /* NaN wins, as in the NCHW loop */
        const pool_attr *a = &n->attr.pool;
        dpc_buf_printf(o,
                       "        for (int64_t c = lo; c < hi; c++) acc[c - lo] = -INFINITY;\n"
                       "        for (int64_t ki = 0; ki < %lldLL; ki++) {\n"
                       "            const int64_t ih = oh * %lldLL - %lldLL + ki * %lldLL;\n"
                       "            if (ih < 0 || ih >= %lldLL) continue;\n"
                       "            for (int64_t kj = 0; kj < %lldLL; kj++) {\n"
                       "                const int64_t iw = ow * %lldLL - %lldLL + kj * %lldLL;\n"
                       "                if (iw < 0 || iw >= %lldLL) continue;\n"
                       "                const float *const src = base + (ih * %lldLL + iw) * %lldLL;\n"
                       "%s"
                       "                for (int64_t c = lo; c < hi; c++) {\n"
                       "                    const float v = src[c], m = acc[c - lo];\n"
                       "                    acc[c - lo] = v > m || v != v ? v : m;\n"
                       "                }\n"
                       "            }\n"
                       "        }\n"
                       "        for (int64_t c = lo; c < hi; c++) dst[c] = acc[c - lo];\n    }\n",
                       (long long)a->k[0], (long long)a->s[0], (long long)a->p[0], (long long)a->d[0], H,
                       (long long)a->k[1], (long long)a->s[1], (long long)a->p[1], (long long)a->d[1], W, W, ps,
                       blk ? SIMD_PRAGMA : "");
        return;
    }
    emit_pool_bounds(o, n, x, "        ", "int64_t");
    if (n->op == OP_AVGPOOL2D && !emit_pool_uses_padded(n))
        dpc_buf_puts(o, "        (void)padded;\n");
    dpc_buf_printf(o,
                   "        for (int64_t c = lo; c < hi; c++) acc[c - lo] = 0.0f;\n"
                   "        for (int64_t ih = h0; ih < h1; ih++)\n"
                   "            for (int64_t iw = w0; iw < w1; iw++) {\n"
                   "                const float *const src = base + (ih * %lldLL + iw) * %lldLL;\n"
                   "                for (int64_t c = lo; c < hi; c++) acc[c - lo] += src[c];\n"
                   "            }\n"
                   "        for (int64_t c = lo; c < hi; c++) {\n"
                   "            const float s = acc[c - lo];\n"
                   "            dst[c] = %s;\n"
                   "        }\n    }\n",
                   W, ps, emit_pool_value(v, sizeof v, n));
}

/* conv_transpose2d: per image and group, the columns
 * col[(oc*kh + ki)*kw + kj][ih*W + iw] = W_g^T x X_g through the GEMM, then
 * col2im adds each column into the output (ow = iw*sw - pw + kj*dw, the
 * range of iw that lands inside computed once per row), which starts as
 * the bias. Then the fused chain, in place. Upsample: one pass over the
 * output, the chain applied to each value as it is computed. */
static void emit_resample(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    int xb = kg->buf_of[x->id], ob = kg->buf_of[k->out->id];
    emit_comment(o, "    ", n);
    if (n->op != OP_CONV_TRANSPOSE2D) {
        long long C = x->sh.d[1].k, H = x->sh.d[2].k, W = x->sh.d[3].k, Ho = n->sh.d[2].k, Wo = n->sh.d[3].k;
        dpc_buf_printf(o,
                       "    int64_t i = 0; /* the flat index of (c0, c1, c2, c3) */\n"
                       "    for (int64_t c0 = 0; c0 < N; c0++)\n"
                       "    for (int64_t c1 = 0; c1 < %lldLL; c1++) {\n"
                       "        const float *const src = b%d + (c0 * %lldLL + c1) * %lldLL;\n"
                       "        for (int64_t c2 = 0; c2 < %lldLL; c2++) {\n",
                       C, xb, C, H * W, Ho);
        emit_upsample_dim(o, n, x, 0, "c2", "            ", "int64_t");
        dpc_buf_printf(o, "            for (int64_t c3 = 0; c3 < %lldLL; c3++, i++) {\n", Wo);
        emit_upsample_dim(o, n, x, 1, "c3", "                ", "int64_t");
        emit_upsample_value(o, n, x, "                ");
        dpc_buf_printf(o, "                const float v%d = v;\n", n->id);
        for (int i = 0; i < k->ops.len; i++)
            emit_elementwise_op(kg, k, o, k->ops.items[i], &k->out->sh, "                ", "", DIALECT_C);
        dpc_buf_printf(o, "                b%d[i] = v%d;\n            }\n        }\n    }\n", ob, k->out->id);
        return;
    }
    const ir_node *w = nd(kg, n->in[1]);
    emit_conv_dims cv;
    emit_convt_geom(n, x, w, &cv); /* groups were checked by the front end */
    long long HWo = cv.Ho * cv.Wo;
    char bv[48] = "0.0f";
    if (n->nin > 2)
        snprintf(bv, sizeof bv, "b%d[c]", kg->buf_of[n->in[2]]);
    dpc_buf_printf(o, "    float *const col = (float *)ctx->buf[%d];\n", k->scratch);
    dpc_buf_printf(o,
                   "    for (int64_t img = 0; img < N; img++) {\n"
                   "        float *const dst = b%d + img * %lldLL;\n"
                   "        for (int64_t c = 0; c < %lldLL; c++) {\n"
                   "            const float bv = %s;\n"
                   "            for (int64_t j = 0; j < %lldLL; j++) dst[c * %lldLL + j] = bv;\n"
                   "        }\n",
                   ob, cv.Co * HWo, cv.Co, bv, HWo, HWo);
    dpc_buf_printf(o,
                   "        for (int64_t g = 0; g < %lldLL; g++) {\n"
                   "            ctx->sgemm(1, 0, %lldLL, %lldLL, %lldLL, b%d + g * %lldLL, %lldLL,\n"
                   "                       b%d + (img * %lldLL + g * %lldLL) * %lldLL, %lldLL, col, %lldLL);\n"
                   "            for (int64_t r = 0; r < %lldLL; r++) {\n"
                   "                const int64_t oc = r / %lldLL, ki = (r / %lldLL) %% %lldLL, kj = r %% %lldLL;\n"
                   "                const int64_t a = %lldLL - kj * %lldLL, e = %lldLL - 1 + a; /* ow = iw*sw - a */\n"
                   "                int64_t iw1 = e < 0 ? 0 : e / %lldLL + 1, iw0 = a > 0 ? (a + %lldLL - 1) / %lldLL : 0;\n"
                   "                if (iw1 > %lldLL) iw1 = %lldLL;\n"
                   "                if (iw0 > iw1) iw0 = iw1;\n"
                   "                float *const out = dst + (g * %lldLL + oc) * %lldLL;\n"
                   "                const float *const cr = col + r * %lldLL;\n"
                   "                for (int64_t ih = 0; ih < %lldLL; ih++) {\n"
                   "                    const int64_t oh = ih * %lldLL - %lldLL + ki * %lldLL;\n"
                   "                    if (oh < 0 || oh >= %lldLL) continue;\n"
                   "                    float *const orow = out + oh * %lldLL;\n"
                   "                    const float *const crow = cr + ih * %lldLL;\n"
                   "                    for (int64_t iw = iw0; iw < iw1; iw++) orow[iw * %lldLL - a] += crow[iw];\n"
                   "                }\n"
                   "            }\n"
                   "        }\n"
                   "    }\n",
                   cv.G, cv.Kd, cv.HW, cv.Cg, kg->buf_of[w->id], cv.Cg * cv.Kd, cv.Kd, xb, cv.C, cv.Cg, cv.HW, cv.HW,
                   cv.HW, cv.Kd, cv.kh * cv.kw, cv.kw, cv.kh, cv.kw, cv.pw, cv.dw, cv.Wo, cv.sw, cv.sw, cv.sw, cv.W,
                   cv.W, cv.Cog, HWo, cv.HW, cv.H, cv.sh, cv.ph, cv.dh, cv.Ho, cv.Wo, cv.W, cv.sw);
    if (k->ops.len) {
        char seed[32];
        snprintf(seed, sizeof seed, "b%d[i]", ob);
        emit_chain_loop(kg, k, o, seed);
    }
}

/* The loops over an op along `axis` of x seen as [outer, len, inner]
 * (len may be N): `src` is the first element of column (p, q). */
static void axis_loops(dpc_buf *o, const ir_node *x, int axis, int xb) {
    char t1[96], t2[96], t3[96];
    dpc_buf_printf(o, "    const int64_t outer = %s, inner = %s, len = %s;\n",
                   emit_prod(t1, sizeof t1, &x->sh, 0, axis), emit_prod(t2, sizeof t2, &x->sh, axis + 1, x->sh.rank),
                   emit_dim(t3, sizeof t3, x->sh.d[axis]));
    emit_par_for(o, "", 2, "outer * inner * len");
    dpc_buf_printf(o,
                   "    for (int64_t p = 0; p < outer; p++)\n"
                   "    for (int64_t q = 0; q < inner; q++) {\n"
                   "        const float *src = b%d + p * len * inner + q;\n",
                   xb);
}

static void emit_row(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    int xb = kg->buf_of[x->id], ob = kg->buf_of[n->id];
    char t1[96];
    emit_comment(o, "    ", n);
    if (n->op == OP_LAYERNORM) {
        long long L = 1;
        for (int i = x->sh.rank - n->attr.norm.dims; i < x->sh.rank; i++)
            L *= x->sh.d[i].k;
        char eps[EMIT_FLOAT_MAX];
        emit_float_str(eps, sizeof eps, n->attr.norm.eps, false); /* added to a double */
        const long long L16 = L / 16 * 16;
        dpc_buf_printf(o, "    const int64_t rows = %s;\n", emit_prod(t1, sizeof t1, &x->sh, 0, x->sh.rank - n->attr.norm.dims));
        char work[96];
        snprintf(work, sizeof work, "rows * %lldLL", L);
        emit_par_for(o, "", 1, work);
        dpc_buf_printf(o,
                       "    for (int64_t r = 0; r < rows; r++) {\n"
                       "        const float *src = b%d + r * %lldLL;\n        float *dst = b%d + r * %lldLL;\n"
                       /* the sums in double, over 16 lanes then the tail
                        * (vector adds; the same order at any thread count) */
                       "        double a[16];\n"
                       "        for (int l = 0; l < 16; l++) a[l] = 0.0;\n"
                       "        for (int64_t j = 0; j < %lldLL; j += 16)\n"
                       "            for (int l = 0; l < 16; l++) a[l] += src[j + l];\n"
                       "        double mean = 0.0, var = 0.0;\n"
                       "        for (int l = 0; l < 16; l++) mean += a[l];\n"
                       "        for (int64_t j = %lldLL; j < %lldLL; j++) mean += src[j];\n"
                       "        mean /= %lld.0;\n"
                       "        for (int l = 0; l < 16; l++) a[l] = 0.0;\n"
                       "        for (int64_t j = 0; j < %lldLL; j += 16)\n"
                       "            for (int l = 0; l < 16; l++) { const double d = src[j + l] - mean; a[l] += d * d; }\n"
                       "        for (int l = 0; l < 16; l++) var += a[l];\n"
                       "        for (int64_t j = %lldLL; j < %lldLL; j++) { const double d = src[j] - mean; var += d * d; }\n"
                       "        var /= %lld.0;\n"
                       "        const float rstd = (float)(1.0 / sqrt(var + %s));\n"
                       "        for (int64_t j = 0; j < %lldLL; j++) {\n"
                       "            float v = (src[j] - (float)mean) * rstd;\n",
                       xb, L, ob, L, L16, L16, L, L, L16, L16, L, L, eps, L);
        int idx = 1;
        if (n->attr.norm.has_weight)
            dpc_buf_printf(o, "            v *= b%d[j];\n", kg->buf_of[n->in[idx++]]);
        if (n->attr.norm.has_bias)
            dpc_buf_printf(o, "            v += b%d[j];\n", kg->buf_of[n->in[idx++]]);
        dpc_buf_puts(o, "            dst[j] = v;\n        }\n    }\n");
        return;
    }
    /* softmax / log_softmax over axis: [outer, len, inner]; len may be N */
    bool logsm = n->op == OP_LOG_SOFTMAX;
    axis_loops(o, x, n->attr.ax.axis, xb);
    dpc_buf_printf(o,
                   "        float *dst = b%d + p * len * inner + q;\n"
                   "        float m = -INFINITY;\n"
                   "        for (int64_t j = 0; j < len; j++) m = src[j * inner] > m ? src[j * inner] : m;\n"
                   /* the exponentials into dst (a vector loop: dpc_expf,
                    * kmath.h), then summed in double, in order */
                   "        for (int64_t j = 0; j < len; j++) dst[j * inner] = dpc_expf(src[j * inner] - m);\n"
                   "        double s = 0.0;\n"
                   "        for (int64_t j = 0; j < len; j++) s += dst[j * inner];\n",
                   ob);
    if (logsm)
        dpc_buf_puts(o, "        const float ls = (float)log(s);\n"
                        "        for (int64_t j = 0; j < len; j++) dst[j * inner] = src[j * inner] - m - ls;\n    }\n");
    else
        dpc_buf_puts(o, "        const float inv = (float)(1.0 / s);\n"
                        "        for (int64_t j = 0; j < len; j++) dst[j * inner] *= inv;\n    }\n");
}

static void emit_reduce(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    int xb = kg->buf_of[x->id], ob = kg->buf_of[n->id];
    emit_comment(o, "    ", n);
    if (x->sh.rank == 0) {
        dpc_buf_printf(o, "    b%d[0] = b%d[0];\n", ob, xb);
        return;
    }
    axis_loops(o, x, n->attr.ax.axis, xb);
    if (n->op == OP_AMAX)
        dpc_buf_puts(o, "        float acc = -INFINITY;\n"
                        "        for (int64_t j = 0; j < len; j++) { const float v = src[j * inner]; acc = (v > acc || v != v) ? v : acc; }\n");
    else
        dpc_buf_printf(o, "        double acc = 0.0;\n        for (int64_t j = 0; j < len; j++) acc += src[j * inner];\n%s",
                       n->op == OP_MEAN ? "        acc /= (double)len;\n" : "");
    dpc_buf_printf(o, "        b%d[p * inner + q] = (float)acc;\n    }\n", ob);
}

static void emit_embed(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const ir_node *n = k->root, *ids = nd(kg, n->in[0]), *w = nd(kg, n->in[1]);
    long long V = w->sh.d[0].k, D = w->sh.d[1].k;
    char t[96];
    emit_comment(o, "    ", n);
    dpc_buf_printf(o,
                   "    const int64_t rows = %s;\n"
                   "    for (int64_t r = 0; r < rows; r++) {\n"
                   "        const int64_t id = b%d[r];\n"
                   "        if (id < 0 || id >= %lldLL) { ctx->bad_index = id; ctx->bad_limit = %lldLL; return KERNEL_ID + 1; }\n"
                   "        memcpy(b%d + r * %lldLL, b%d + id * %lldLL, sizeof(float) * %lldLL);\n    }\n",
                   emit_prod(t, sizeof t, &ids->sh, 0, ids->sh.rank), kg->buf_of[ids->id], V, V, kg->buf_of[n->id], D,
                   kg->buf_of[w->id], D, D);
}

static void emit_cat(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const ir_node *n = k->root;
    char t1[96], t2[96];
    emit_comment(o, "    ", n);
    int ob = kg->buf_of[n->id];
    dpc_buf_printf(o, "    const int64_t outer = %s, inner = %s;\n    int64_t at = 0;\n",
                   emit_prod(t1, sizeof t1, &n->sh, 0, n->attr.ax.axis), emit_prod(t2, sizeof t2, &n->sh, n->attr.ax.axis + 1, n->sh.rank));
    char tot[96];
    emit_dim(tot, sizeof tot, n->sh.d[n->attr.ax.axis]);
    for (int i = 0; i < ir_cat_count(n); i++) {
        const ir_node *x = nd(kg, ir_cat_operand(n, i));
        char len[96];
        emit_dim(len, sizeof len, x->sh.d[n->attr.ax.axis]);
        char work[160];
        snprintf(work, sizeof work, "outer * %s * inner", len);
        emit_par_for(o, "", 1, work);
        dpc_buf_printf(o,
                       "    for (int64_t p = 0; p < outer; p++)\n"
                       "        memcpy(b%d + (p * %s + at) * inner, b%d + p * %s * inner, sizeof(float) * %s * inner);\n"
                       "    at += %s;\n",
                       ob, tot, kg->buf_of[x->id], len, len, len);
    }
    dpc_buf_puts(o, "    (void)at;\n");
}

/* emit_strided at coordinates c0, c1, ... */
void emit_coord_offset(dpc_buf *o, const kaccess *a, int rank) {
    const char *vc[IR_MAX_RANK];
    char vcb[IR_MAX_RANK][16];
    for (int j = 0; j < rank; j++) {
        snprintf(vcb[j], sizeof vcb[j], "c%d", j);
        vc[j] = vcb[j];
    }
    emit_strided(o, a, vc, rank);
}

static void emit_copy(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const ir_node *c = k->out;
    const shape *os = &c->sh;
    char t[96];
    int ob = kg->buf_of[c->id];
    dpc_buf_printf(o, "    /* materialise %%%d */\n", c->id);
    int sb = k->src.base && k->src.kind != ACC_LEAF ? kg->buf_of[k->src.base->id] : -1;
    if (k->src.kind == ACC_STRIDED && os->rank > 1) {
        /* a permute's copy (ConvNeXt's NCHW <-> NHWC): a loop per dim, not
         * a division per element and dim (about 8x the time there) */
        emit_dim_loops(o, os, emit_prod(t, sizeof t, os, 0, os->rank), unit_dim(&k->src, os->rank, os));
        dpc_buf_printf(o, "        b%d[i] = b%d[", ob, sb);
        emit_coord_offset(o, &k->src, os->rank);
        dpc_buf_puts(o, "];\n    }\n    }\n");
        return;
    }
    dpc_buf_printf(o, "    const int64_t total = %s;\n", emit_prod(t, sizeof t, os, 0, os->rank));
    emit_par_for(o, "", 1, "total");
    dpc_buf_puts(o, "    for (int64_t i = 0; i < total; i++) {\n");
    if (k->src.kind == ACC_LEAF) {
        if (emit_leaf_needs_coords(k->src.base)) {
            emit_coords(o, "        ", os);
            for (int j = 0; j < os->rank; j++)
                dpc_buf_printf(o, "        (void)c%d;\n", j);
        }
        dpc_buf_printf(o, "        b%d[i] = ", ob);
        emit_leaf(o, k->src.base, os);
        dpc_buf_puts(o, ";\n    }\n");
        return;
    }
    if (k->src.kind == ACC_CONTIG) {
        dpc_buf_printf(o, "        b%d[i] = b%d[i];\n    }\n", ob, sb);
        return;
    }
    emit_coords(o, "        ", os);
    dpc_buf_printf(o, "        b%d[i] = b%d[", ob, sb);
    emit_coord_offset(o, &k->src, os->rank);
    dpc_buf_puts(o, "];\n    }\n");
}

/* Fused attention (KK_ATTN, fuse.c / attn.c): per batch (b.., a head) and
 * block of ATTN_BQ queries, the keys in blocks of ATTN_BK with an online
 * softmax. The (batch, query block) pairs are independent (each writes its
 * own output rows), so that loop is split over the replica's threads. Per
 * key block: the key block copied transposed ([E][BK]) and the value block
 * copied ([BK][Ev]), both zero-padded past the last key; the scores of the
 * whole query block into a tile s[BQ][BK], ATTN_RQ queries x ATTN_RK keys
 * at a time with the head dim inner (the accumulators stay in registers,
 * the key loop vectorises); the chain (scale, mask) at each (query, key)
 * and -inf past the last key; per row the running max and sum over
 * ATTN_RK lanes (selects and adds GCC vectorises without -ffast-math) and
 * the exp over the row with dpc_expf (vectorised); p . v for ATTN_RQ
 * queries at a time, each value row read once for them, inner loop over
 * Ev. q, k^T and v are read through their strides; the output is written
 * in the layout of the permute after it, when the kernel has one. */
#define ATTN_BQ 128
#define ATTN_BK 64
#define ATTN_RQ 4
#define ATTN_RK 16
/* whether k^T is closer to contiguous along e than along the keys */
static bool kt_by_key(const emit_attn *a) {
    const dim se = a->kt.stride[a->r - 2], sk = a->kt.stride[a->r - 1];
    return !se.sym && (sk.sym || se.k < sk.k);
}
/* The GEMM form of the fused attention, for the larger heads: per (batch,
 * block of queries) the scores of the block, [nq, S], by one ctx->sgemm
 * (q . k^T, read through their strides), the chain and a softmax row by row
 * in place (the max and sum over ATTN_RK lanes, the exp with dpc_expf, the
 * row scaled by 1 / sum), then p . v by a second sgemm straight into the
 * output rows. At BERT's S = 128, E = 64 the whole kernel runs 1.5x faster
 * than the register-tiled loops (docs/performance.md, "Transformer rows,
 * part 2"). Needs each operand contiguous along one of its two dims (a leading
 * dimension for the GEMM) and the output along Ev. */
#define ATTN_GEMM_MIN 16384LL /* L * S * E from which the GEMM form is used */
#define ATTN_GEMM_TILE 16384LL /* floats of the scores block: BQ * S */
typedef struct attn_ld {
    int t;         /* transposed: contiguous along the first of the two dims */
    char ld[96];   /* the leading dimension */
} attn_ld;
/* Whether the [rows, cols] operand with access a (its last two dims) can be
 * a GEMM operand: contiguous along cols (t = 0), or along rows (t = 1). */
static bool attn_gemm_operand(const kaccess *a, int r, long long rows, long long cols, bool may_t, attn_ld *out) {
    const dim sr = a->stride[r - 2], sc = a->stride[r - 1];
    if (!sc.sym && sc.k == 1 && sr.k >= cols && sr.k >= 1) {
        out->t = 0;
        emit_dim(out->ld, sizeof out->ld, sr);
        return true;
    }
    if (may_t && !sr.sym && sr.k == 1 && sc.k >= rows && sc.k >= 1) {
        out->t = 1;
        emit_dim(out->ld, sizeof out->ld, sc);
        return true;
    }
    return false;
}
/* The head both forms share: the (batch, query block) loop, split over the
 * replica's threads, with the operands' bases and nq, the block's queries. */
static void emit_attn_loop_head(const kgraph *kg, const emit_attn *a, dpc_buf *o, long long nqb, long long BQ) {
    char t1[96], t2[96];
    dpc_buf_printf(o, "    const int64_t nbat = %s;\n", emit_prod(t1, sizeof t1, &a->batch, 0, a->nb));
    snprintf(t2, sizeof t2, "nbat * %lldLL", a->L * a->S * (a->E + a->Ev));
    emit_par_for(o, "    ", 1, t2);
    dpc_buf_printf(o,
                   "    for (int64_t t = 0; t < nbat * %lldLL; t++) {\n"
                   "        const int64_t bi = t / %lldLL, i0 = (t %% %lldLL) * %lld;\n",
                   nqb, nqb, nqb, BQ);
    emit_attn_bases(kg, a, o, "        ", "int64_t", "float");
    dpc_buf_printf(o, "        const int64_t nq = %lldLL - i0 < %lld ? %lldLL - i0 : %lld;\n", (long long)a->L, BQ,
                   (long long)a->L, BQ);
}

static bool emit_attn_gemm(const kgraph *kg, const kernel *k, const emit_attn *a, dpc_buf *o) {
    const int r = a->r, RK = ATTN_RK;
    const long long L = a->L, E = a->E, S = a->S, Ev = a->Ev;
    attn_ld lq, lk, lv, lo;
    if (L * S * E < ATTN_GEMM_MIN || S > ATTN_GEMM_TILE || !attn_gemm_operand(&a->q, r, L, E, true, &lq) ||
        !attn_gemm_operand(&a->kt, r, E, S, true, &lk) || !attn_gemm_operand(&a->v, r, S, Ev, true, &lv) ||
        !attn_gemm_operand(&a->o, r, L, Ev, false, &lo))
        return false;
    char t1[96];
    long long BQ = ATTN_GEMM_TILE / S < L ? ATTN_GEMM_TILE / S : L;
    const long long nqb = (L + BQ - 1) / BQ;
    BQ = (L + nqb - 1) / nqb; /* the blocks as even as they go */
    const long long S16 = S / RK * RK;
    dpc_buf_printf(o, "    /* fused attention, GEMM form: [L=%lld, E=%lld] x [S=%lld, Ev=%lld], %lld queries a block */\n",
                   L, E, S, Ev, BQ);
    emit_attn_loop_head(kg, a, o, nqb, BQ);
    dpc_buf_printf(o, "        float s[%lld * %lld];\n", BQ, S);
    /* q rows i0.. : offset i0 along q's row dim */
    dpc_buf_printf(o, "        ctx->sgemm(%d, %d, nq, %lldLL, %lldLL, qp + i0 * %s, %s, kp, %s, s, %lldLL);\n", lq.t,
                   lk.t, S, E, emit_dim(t1, sizeof t1, a->q.stride[r - 2]), lq.ld, lk.ld, S);
    dpc_buf_printf(o,
                   "        for (int64_t ii = 0; ii < nq; ii++) {\n"
                   "            float *const sr = s + ii * %lldLL;\n"
                   "            const int64_t c%d = i0 + ii;\n"
                   "            for (int64_t jj = 0; jj < %lldLL; jj++) {\n"
                   "                const int64_t c%d = jj;\n",
                   S, r - 2, S, r - 1);
    emit_attn_chain(kg, k, a, o, "                ", "int64_t", "sr[jj]", "sr[jj]", DIALECT_C);
    dpc_buf_printf(o,
                   "            }\n"
                   "            float lm[%d], ls[%d];\n"
                   "            for (int64_t l = 0; l < %d; l++) lm[l] = -INFINITY;\n"
                   "            for (int64_t jb = 0; jb < %lldLL; jb += %d)\n"
                   "                for (int64_t l = 0; l < %d; l++) lm[l] = sr[jb + l] > lm[l] ? sr[jb + l] : lm[l];\n"
                   "            float mb = -INFINITY;\n"
                   "            for (int64_t l = 0; l < %d; l++) mb = lm[l] > mb ? lm[l] : mb;\n"
                   "            for (int64_t jj = %lldLL; jj < %lldLL; jj++) mb = sr[jj] > mb ? sr[jj] : mb;\n"
                   "            for (int64_t jj = 0; jj < %lldLL; jj++) sr[jj] = dpc_expf(sr[jj] - mb);\n"
                   "            for (int64_t l = 0; l < %d; l++) ls[l] = 0.0f;\n"
                   "            for (int64_t jb = 0; jb < %lldLL; jb += %d)\n"
                   "                for (int64_t l = 0; l < %d; l++) ls[l] += sr[jb + l];\n"
                   "            float lsum = 0.0f;\n"
                   "            for (int64_t l = 0; l < %d; l++) lsum += ls[l];\n"
                   "            for (int64_t jj = %lldLL; jj < %lldLL; jj++) lsum += sr[jj];\n"
                   "            const float inv = 1.0f / lsum;\n"
                   "            for (int64_t jj = 0; jj < %lldLL; jj++) sr[jj] *= inv;\n"
                   "        }\n",
                   RK, RK, RK, S16, RK, RK, RK, S16, S, S, RK, S16, RK, RK, RK, S16, S, S);
    dpc_buf_printf(o, "        ctx->sgemm(0, %d, nq, %lldLL, %lldLL, s, %lldLL, vp, %s, op + i0 * %s, %s);\n    }\n", lv.t, Ev,
                   S, S, lv.ld, emit_dim(t1, sizeof t1, a->o.stride[r - 2]), lo.ld);
    return true;
}

/* The query rows i0.. copied to qb [BQ][E], zero past nq (the score tiles
 * read RQ rows at a time). */
static void emit_attn_qcopy(const emit_attn *a, dpc_buf *o, int BQ) {
    char t1[96];
    const int r = a->r;
    const long long E = a->E;
    dpc_buf_printf(o,
                   "        for (int64_t ii = 0; ii < nq; ii++)\n"
                   "            for (int64_t e = 0; e < %lldLL; e++) qb[ii * %lld + e] = qp[(i0 + ii) * %s",
                   E, E, emit_dim(t1, sizeof t1, a->q.stride[r - 2]));
    dpc_buf_printf(o, " + e * %s];\n", emit_dim(t1, sizeof t1, a->q.stride[r - 1]));
    /* the score loop reads the query rows up to nq rounded up to RQ */
    dpc_buf_printf(o, "        for (int64_t x = nq * %lld; x < %d * %lld; x++) qb[x] = 0.0f;\n", E, BQ, E);
}

/* Inside a key block (j0, nk): the block of k^T copied to kb [E][BK] and of
 * v to vb [BK][EvP], zero past nk, and the scores of the block into s
 * [BQ][BK], RQ queries x RK keys in registers. */
static void emit_attn_kv_scores(const emit_attn *a, dpc_buf *o, int BQ, int BK, long long EvP) {
    char t1[96];
    const int r = a->r, RQ = ATTN_RQ, RK = ATTN_RK;
    const long long E = a->E, Ev = a->Ev;
    dpc_buf_printf(o, "            float kb[%lld * %d], vb[%d * %lld], s[%d * %d];\n", E, BK, BK, EvP, BQ, BK);
    /* the transposing copy reads along the smaller stride (BERT's k: along
     * e, one key row after the other) */
    if (kt_by_key(a))
        dpc_buf_printf(o,
                       "            for (int64_t jj = 0; jj < %d; jj++)\n"
                       "                for (int64_t e = 0; e < %lldLL; e++) kb[e * %d + jj] = jj < nk ? kp[e * %s",
                       BK, E, BK, emit_dim(t1, sizeof t1, a->kt.stride[r - 2]));
    else
        dpc_buf_printf(o,
                       "            for (int64_t e = 0; e < %lldLL; e++)\n"
                       "                for (int64_t jj = 0; jj < %d; jj++) kb[e * %d + jj] = jj < nk ? kp[e * %s",
                       E, BK, BK, emit_dim(t1, sizeof t1, a->kt.stride[r - 2]));
    dpc_buf_printf(o, " + (j0 + jj) * %s] : 0.0f;\n", emit_dim(t1, sizeof t1, a->kt.stride[r - 1]));
    dpc_buf_printf(o,
                   "            for (int64_t jj = 0; jj < %d; jj++)\n"
                   "                for (int64_t d = 0; d < %lldLL; d++) vb[jj * %lld + d] = jj < nk && d < %lldLL ? vp[(j0 + jj) * %s",
                   BK, EvP, EvP, Ev, emit_dim(t1, sizeof t1, a->v.stride[r - 2]));
    dpc_buf_printf(o, " + d * %s] : 0.0f;\n", emit_dim(t1, sizeof t1, a->v.stride[r - 1]));
    /* the scores: RQ queries x RK keys in registers, E inner */
    dpc_buf_printf(o,
                   "            /* scores, %d queries x %d keys at a time (padded query rows are zero) */\n"
                   "            for (int64_t ii = 0; ii < nq; ii += %d)\n"
                   "                for (int64_t jb = 0; jb < nk; jb += %d) {\n"
                   "                    float r0[%d], r1[%d], r2[%d], r3[%d];\n"
                   "                    for (int64_t l = 0; l < %d; l++) r0[l] = r1[l] = r2[l] = r3[l] = 0.0f;\n"
                   "                    const float *const q0 = qb + ii * %lld;\n"
                   "                    for (int64_t e = 0; e < %lldLL; e++) {\n"
                   "                        const float a0 = q0[e], a1 = q0[%lld + e], a2 = q0[%lld + e], a3 = q0[%lld + e];\n"
                   "                        const float *const kr = kb + e * %d + jb;\n"
                   "                        for (int64_t l = 0; l < %d; l++) {\n"
                   "                            const float kv = kr[l];\n"
                   "                            r0[l] += a0 * kv; r1[l] += a1 * kv; r2[l] += a2 * kv; r3[l] += a3 * kv;\n"
                   "                        }\n"
                   "                    }\n"
                   "                    float *const s0 = s + ii * %d + jb;\n"
                   "                    for (int64_t l = 0; l < %d; l++) {\n"
                   "                        s0[l] = r0[l]; s0[%d + l] = r1[l]; s0[%d + l] = r2[l]; s0[%d + l] = r3[l];\n"
                   "                    }\n"
                   "                }\n",
                   RQ, RK, RQ, RK, RK, RK, RK, RK, RK, E, E, E, 2 * E, 3 * E, BK, RK, BK, RK, BK, 2 * BK, 3 * BK);
}

/* The chain at each (query, key) of the block's rows, c(r-2) the query and
 * c(r-1) the key; leaves the row loop and sr open. */
static void emit_attn_rows_chain(const kgraph *kg, const kernel *k, const emit_attn *a, dpc_buf *o, int BK) {
    const int r = a->r;
    dpc_buf_printf(o,
                   "            for (int64_t ii = 0; ii < nq; ii++) {\n"
                   "                float *const sr = s + ii * %d;\n"
                   "                const int64_t c%d = i0 + ii;\n"
                   "                for (int64_t jj = 0; jj < nk; jj++) {\n"
                   "                    const int64_t c%d = j0 + jj;\n",
                   BK, r - 2, r - 1);
    emit_attn_chain(kg, k, a, o, "                    ", "int64_t", "sr[jj]", "sr[jj]", DIALECT_C);
}

/* The inner loop of p . v shared by the one-key-block and tiled forms:
 * RQ = 4 query rows of p (p0, rows pstride apart) times the value rows
 * (vb, vstride apart, from column db) over `bound` keys, added into the
 * RK-lane registers r0..r3. */
static void emit_attn_pv_keys(dpc_buf *o, const char *bound, long long pstride, long long vstride) {
    dpc_buf_printf(o,
                   "                    for (int64_t jj = 0; jj < %s; jj++) {\n"
                   "                        const float e0 = p0[jj], e1 = p0[%lld + jj], e2 = p0[%lld + jj], e3 = p0[%lld + jj];\n"
                   "                        const float *const vr = vb + jj * %lld + db;\n"
                   "                        for (int64_t l = 0; l < %d; l++) {\n"
                   "                            const float vv = vr[l];\n"
                   "                            r0[l] += e0 * vv; r1[l] += e1 * vv; r2[l] += e2 * vv; r3[l] += e3 * vv;\n"
                   "                        }\n"
                   "                    }\n",
                   bound, pstride, 2 * pstride, 3 * pstride, vstride, ATTN_RK);
}

/* The one-key-block form (S <= the key block, ViT's 17 tokens): no online
 * softmax (no running max, no rescale of an accumulator). Per row the max
 * over RK lanes of the padded scores, then the row minus its max packed
 * into p [nq][S] with no padding, one dpc_expf pass over the nq * S packed
 * values (17 x 17: 19 vectors, not 34 padded rows), the sums over RK lanes,
 * and p . v with RQ queries x RK of Ev in registers written straight to
 * the output, scaled by 1 / sum. */
static void emit_attn_short(const kgraph *kg, const kernel *k, const emit_attn *a, dpc_buf *o, int BQ, int BK,
                            long long EvP) {
    char t1[96], t2[96];
    const int r = a->r, RK = ATTN_RK;
    const long long S = a->S, Ev = a->Ev, S16 = a->S / ATTN_RK * ATTN_RK;
    emit_attn_loop_head(kg, a, o, (a->L + BQ - 1) / BQ, BQ);
    dpc_buf_printf(o, "        float qb[%d * %lld], p[%d * %lld], inv[%d];\n", BQ, a->E, BQ, S, BQ);
    emit_attn_qcopy(a, o, BQ);
    dpc_buf_printf(o, "        /* one key block */\n        {\n            const int64_t j0 = 0, nk = %lldLL;\n", S);
    emit_attn_kv_scores(a, o, BQ, BK, EvP);
    emit_attn_rows_chain(kg, k, a, o, BK);
    dpc_buf_printf(o,
                   "                }\n"
                   "                for (int64_t jj = nk; jj < %d; jj++) sr[jj] = -INFINITY;\n"
                   "                float lm[%d];\n"
                   "                for (int64_t l = 0; l < %d; l++) lm[l] = sr[l];\n"
                   "                for (int64_t jb = %d; jb < %d; jb += %d)\n"
                   "                    for (int64_t l = 0; l < %d; l++) lm[l] = sr[jb + l] > lm[l] ? sr[jb + l] : lm[l];\n"
                   "                float mb = -INFINITY;\n"
                   "                for (int64_t l = 0; l < %d; l++) mb = lm[l] > mb ? lm[l] : mb;\n"
                   "                for (int64_t jj = 0; jj < %lldLL; jj++) p[ii * %lld + jj] = sr[jj] - mb;\n"
                   "            }\n"
                   "            /* padded query rows: zeros (read by p . v, never stored) */\n"
                   "            for (int64_t x = nq * %lldLL; x < %d * %lldLL; x++) p[x] = 0.0f;\n"
                   "            for (int64_t x = 0; x < nq * %lldLL; x++) p[x] = dpc_expf(p[x]);\n"
                   "            for (int64_t ii = 0; ii < nq; ii++) {\n"
                   "                const float *const pr = p + ii * %lld;\n"
                   "                float ls[%d];\n"
                   "                for (int64_t l = 0; l < %d; l++) ls[l] = 0.0f;\n"
                   "                for (int64_t jb = 0; jb < %lldLL; jb += %d)\n"
                   "                    for (int64_t l = 0; l < %d; l++) ls[l] += pr[jb + l];\n"
                   "                float lsum = 0.0f;\n"
                   "                for (int64_t l = 0; l < %d; l++) lsum += ls[l];\n"
                   "                for (int64_t jj = %lldLL; jj < %lldLL; jj++) lsum += pr[jj];\n"
                   "                inv[ii] = 1.0f / lsum;\n"
                   "            }\n",
                   BK, RK, RK, RK, BK, RK, RK, RK, S, S, S, BQ, S, S, S, RK, RK, S16, RK, RK, RK, S16, S);
    dpc_buf_printf(o,
                   "            /* p . v: %d queries x %d of Ev in registers over the S keys, to the output */\n"
                   "            for (int64_t ii = 0; ii < nq; ii += %d)\n"
                   "                for (int64_t db = 0; db < %lldLL; db += %d) {\n"
                   "                    const float *const p0 = p + ii * %lld;\n"
                   "                    float r0[%d], r1[%d], r2[%d], r3[%d];\n"
                   "                    for (int64_t l = 0; l < %d; l++) r0[l] = r1[l] = r2[l] = r3[l] = 0.0f;\n",
                   ATTN_RQ, RK, ATTN_RQ, EvP, RK, S, RK, RK, RK, RK, RK);
    char bound[32];
    snprintf(bound, sizeof bound, "%lldLL", S);
    emit_attn_pv_keys(o, bound, S, EvP);
    dpc_buf_printf(o, "                    const int64_t nl = %lldLL - db < %d ? %lldLL - db : %d;\n", Ev, RK, Ev, RK);
    /* one store loop per query row (vectorised), the rows past nq skipped */
    for (int q = 0; q < ATTN_RQ; q++)
        dpc_buf_printf(o,
                       "                    if (ii + %d < nq) {\n"
                       "                        float *const o%d = op + (i0 + ii + %d) * %s;\n"
                       "                        const float w%d = inv[ii + %d];\n"
                       "                        for (int64_t l = 0; l < nl; l++) o%d[(db + l) * %s] = r%d[l] * w%d;\n"
                       "                    }\n",
                       q, q, q, emit_dim(t1, sizeof t1, a->o.stride[r - 2]), q, q, q,
                       emit_dim(t2, sizeof t2, a->o.stride[r - 1]), q, q);
    dpc_buf_puts(o, "                }\n        }\n    }\n");
}

static void emit_attn_c(const kgraph *kg, const kernel *k, dpc_buf *o) {
    emit_attn a;
    emit_attn_geom(kg, k, &a);
    char t1[96];
    int r = a.r;
    const int RQ = ATTN_RQ, RK = ATTN_RK;
    const long long L = a.L, E = a.E, S = a.S, Ev = a.Ev, nqb = (a.L + ATTN_BQ - 1) / ATTN_BQ;
    /* short sequences (ViT's 17 tokens) take a key block of S rounded up to
     * RK, not ATTN_BK: the padded keys cost their scores and exps too */
    const int BK = (S + RK - 1) / RK * RK < ATTN_BK ? (int)((S + RK - 1) / RK * RK) : ATTN_BK;
    /* up to ATTN_BQ queries a block, the blocks as even as RQ allows (L =
     * 197: two of 100): each key block is copied once per query block */
    const int BQ = (int)(((L + nqb - 1) / nqb + RQ - 1) / RQ * RQ);
    /* acc and the value block have rows of Ev rounded up to RK (zeros) */
    const long long EvP = (Ev + RK - 1) / RK * RK;
    emit_comment(o, "    ", k->root);
    for (int i = 0; i < k->ops.len; i++)
        emit_comment(o, "    ", k->ops.items[i]);
    emit_comment(o, "    ", k->attn.softmax);
    emit_comment(o, "    ", k->attn.pv);
    if (k->attn.perm)
        emit_comment(o, "    ", k->attn.perm);
    if (emit_attn_gemm(kg, k, &a, o))
        return;
    dpc_buf_printf(o, "    /* fused attention: [L=%lld, E=%lld] x [S=%lld, Ev=%lld], %d queries x %d keys per block%s */\n",
                   L, E, S, Ev, BQ, BK, S <= BK ? ", one key block" : "");
    if (S <= BK) {
        emit_attn_short(kg, k, &a, o, BQ, BK, EvP);
        return;
    }
    emit_attn_loop_head(kg, &a, o, nqb, BQ);
    dpc_buf_printf(o, "        float qb[%d * %lld], acc[%d * %lld], mx[%d], sm[%d], cr[%d];\n", BQ, E, BQ, EvP, BQ, BQ, BQ);
    emit_attn_qcopy(&a, o, BQ);
    dpc_buf_printf(o,
                   "        for (int64_t ii = 0; ii < %d; ii++) { mx[ii] = -INFINITY; sm[ii] = 0.0f; cr[ii] = 1.0f; }\n"
                   "        for (int64_t x = 0; x < %d * %lldLL; x++) acc[x] = 0.0f;\n"
                   "        for (int64_t j0 = 0; j0 < %lldLL; j0 += %d) {\n"
                   "            const int64_t nk = %lldLL - j0 < %d ? %lldLL - j0 : %d;\n",
                   BQ, BQ, EvP, S, BK, S, BK, S, BK);
    emit_attn_kv_scores(&a, o, BQ, BK, EvP);
    /* the chain, row by row */
    emit_attn_rows_chain(kg, k, &a, o, BK);
    dpc_buf_printf(o,
                   "                }\n"
                   "                for (int64_t jj = nk; jj < %d; jj++) sr[jj] = -INFINITY;\n"
                   "                /* online softmax: the running max, the sum and the output rescaled */\n"
                   "                float lm[%d], ls[%d];\n"
                   "                for (int64_t l = 0; l < %d; l++) lm[l] = sr[l];\n"
                   "                for (int64_t jb = %d; jb < %d; jb += %d)\n"
                   "                    for (int64_t l = 0; l < %d; l++) lm[l] = sr[jb + l] > lm[l] ? sr[jb + l] : lm[l];\n"
                   "                float mb = mx[ii];\n"
                   "                for (int64_t l = 0; l < %d; l++) mb = lm[l] > mb ? lm[l] : mb;\n"
                   "                if (mb == -INFINITY) { /* every key so far masked: nothing accumulated */\n"
                   "                    cr[ii] = 1.0f;\n"
                   "                    for (int64_t jj = 0; jj < %d; jj++) sr[jj] = 0.0f;\n"
                   "                    continue;\n"
                   "                }\n"
                   "                cr[ii] = dpc_expf(mx[ii] - mb);\n"
                   "                for (int64_t jj = 0; jj < %d; jj++) sr[jj] = dpc_expf(sr[jj] - mb);\n"
                   "                for (int64_t l = 0; l < %d; l++) ls[l] = sr[l];\n"
                   "                for (int64_t jb = %d; jb < %d; jb += %d)\n"
                   "                    for (int64_t l = 0; l < %d; l++) ls[l] += sr[jb + l];\n"
                   "                float lsum = 0.0f;\n"
                   "                for (int64_t l = 0; l < %d; l++) lsum += ls[l];\n"
                   "                sm[ii] = sm[ii] * cr[ii] + lsum;\n"
                   "                mx[ii] = mb;\n"
                   "            }\n",
                   BK, RK, RK, RK, RK, BK, RK, RK, RK, BK, BK, RK, RK, BK, RK, RK, RK);
    /* p . v, RQ queries per value row */
    dpc_buf_printf(o,
                   "            /* p . v: %d queries x %d of Ev in registers, over the block's keys */\n"
                   "            for (int64_t ii = 0; ii < nq; ii += %d)\n"
                   "                for (int64_t db = 0; db < %lldLL; db += %d) {\n"
                   "                    float *const a0 = acc + ii * %lld + db;\n"
                   "                    const float *const p0 = s + ii * %d;\n"
                   "                    const float w0 = cr[ii], w1 = cr[ii + 1], w2 = cr[ii + 2], w3 = cr[ii + 3];\n"
                   "                    float r0[%d], r1[%d], r2[%d], r3[%d];\n"
                   "                    for (int64_t l = 0; l < %d; l++) {\n"
                   "                        r0[l] = a0[l] * w0; r1[l] = a0[%lld + l] * w1; r2[l] = a0[%lld + l] * w2; r3[l] = a0[%lld + l] * w3;\n"
                   "                    }\n",
                   RQ, RK, RQ, EvP, RK, EvP, BK, RK, RK, RK, RK, RK, EvP, 2 * EvP, 3 * EvP);
    emit_attn_pv_keys(o, "nk", BK, EvP);
    dpc_buf_printf(o,
                   "                    for (int64_t l = 0; l < %d; l++) {\n"
                   "                        a0[l] = r0[l]; a0[%lld + l] = r1[l]; a0[%lld + l] = r2[l]; a0[%lld + l] = r3[l];\n"
                   "                    }\n"
                   "                }\n"
                   "        }\n",
                   RK, EvP, 2 * EvP, 3 * EvP);
    dpc_buf_printf(o,
                   "        for (int64_t ii = 0; ii < nq; ii++) {\n"
                   "            const float inv = 1.0f / sm[ii];\n"
                   "            for (int64_t d = 0; d < %lldLL; d++) op[(i0 + ii) * %s",
                   Ev, emit_dim(t1, sizeof t1, a.o.stride[r - 2]));
    dpc_buf_printf(o, " + d * %s] = acc[ii * %lld + d] * inv;\n        }\n    }\n",
                   emit_dim(t1, sizeof t1, a.o.stride[r - 1]), EvP);
}

/* The body of kernel k's function, after its opening line. */
static void emit_kernel_body(const kgraph *kg, const kernel *k, dpc_buf *o) {
    dpc_buf_puts(o, "    const int64_t N = ctx->N;\n    (void)N;\n");
    declare_buffers(kg, k, o);
    int kept = k->kind == KK_POOL || k->kind == KK_ELEMWISE || k->kind == KK_COPY ? conv_nhwc_root(kg, k) : -1;
    if (kept >= 0) { /* the source may be NHWC or nChw8c: conv_post.c, "NHWC readers" */
        dpc_buf_printf(o, "    const int lay = ctx->kept ? ctx->kept(ctx, %d) : 0;\n    if (lay == DPC_KEPT_NHWC) {\n", kept);
        if (k->kind == KK_COPY) /* x.permute(0, 2, 3, 1) of NHWC x: its bytes */
            dpc_buf_printf(o, "    memcpy(b%d, b%d, (size_t)N * %lldULL * sizeof(float));\n", kg->buf_of[k->out->id],
                           kg->buf_of[k->src.base->id], (long long)(k->src.base->sh.d[1].k * k->src.base->sh.d[2].k * k->src.base->sh.d[3].k));
        else if (k->kind == KK_POOL)
            emit_pool_nhwc(kg, k, o, false);
        else
            emit_chain_nhwc(kg, k, o, false);
        dpc_buf_puts(o, "    return 0;\n    }\n");
        if (conv_blk_reader(kg, k)) {
            dpc_buf_puts(o, "    if (lay == DPC_KEPT_NCHW8C) {\n");
            if (k->kind == KK_POOL)
                emit_pool_nhwc(kg, k, o, true);
            else
                emit_chain_nhwc(kg, k, o, true);
            dpc_buf_puts(o, "    return 0;\n    }\n");
        }
    }
    switch (k->kind) {
    case KK_ELEMWISE: emit_chain_loop(kg, k, o, NULL); break;
    case KK_GEMM: emit_gemm(kg, k, o); break;
    case KK_CONV: emit_conv(kg, k, o); break;
    case KK_POOL: emit_pool(kg, k, o); break;
    case KK_ROW: emit_row(kg, k, o); break;
    case KK_REDUCE: emit_reduce(kg, k, o); break;
    case KK_EMBED: emit_embed(kg, k, o); break;
    case KK_CAT: emit_cat(kg, k, o); break;
    case KK_COPY: emit_copy(kg, k, o); break;
    case KK_ATTN: emit_attn_c(kg, k, o); break;
    case KK_RESAMPLE: emit_resample(kg, k, o); break;
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
