/* emit_expr.c - the expressions both dialects write inside a kernel: a dim
 * or a product of dims as an expression (k or k*N), the comment naming an
 * op's .dp line, the offset of an element of a value read in place
 * (contiguous, broadcast, or a strided view), a leaf (constant, scalar,
 * batch size, iota), and one elementwise op of a fused chain.
 *
 * Its own file because everything else of the emitters builds on it: the
 * C dialect (emit_c*.c), the CUDA dialect (emit_cuda*.c), the kernel
 * geometry (emit_shared.c) and conv_post.c. It calls nothing of either
 * dialect, only escape.c for the user's text. */
#include "emit.h"

#include <stdio.h>
#include <string.h>

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
