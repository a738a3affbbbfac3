/* emit_c_copy.c - the C dialect's kernels that move data without
 * arithmetic: the embedding gather (KK_EMBED, its indices checked), cat
 * (KK_CAT) and the copy that materialises a view or a leaf (KK_COPY). */
#include "emit_c.h"

#include <stdio.h>

void emit_c_embed(const kgraph *kg, const kernel *k, dpc_buf *o) {
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

void emit_c_cat(const kgraph *kg, const kernel *k, dpc_buf *o) {
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

void emit_c_copy(const kgraph *kg, const kernel *k, dpc_buf *o) {
    const ir_node *c = k->out;
    const shape *os = &c->sh;
    char t[96];
    int ob = kg->buf_of[c->id];
    dpc_buf_printf(o, "    /* materialise %%%d */\n", c->id);
    int sb = k->src.base && k->src.kind != ACC_LEAF ? kg->buf_of[k->src.base->id] : -1;
    if (k->src.kind == ACC_STRIDED && os->rank > 1) {
        /* a permute's copy (ConvNeXt's NCHW <-> NHWC): a loop per dim, not
         * a division per element and dim (about 8x the time there) */
        emit_dim_loops(o, os, emit_prod(t, sizeof t, os, 0, os->rank), emit_unit_dim(&k->src, os->rank, os));
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
