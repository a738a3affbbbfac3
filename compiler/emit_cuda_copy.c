/* emit_cuda_copy.c - the CUDA dialect's kernels that move data without
 * arithmetic, one thread per output element: the embedding gather
 * (KK_EMBED; an index out of range raises the error flag), cat (KK_CAT)
 * and the copy that materialises a view or a leaf (KK_COPY). */
#include "emit_cuda.h"

#include <stdio.h>

void emit_cuda_embed(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *ids = nd(kg, n->in[0]), *w = nd(kg, n->in[1]);
    long long V = w->sh.d[0].k, D = w->sh.d[1].k;
    int ib = kg->buf_of[ids->id], wb = kg->buf_of[w->id], ob = kg->buf_of[n->id];
    char t[96];
    plist pl = {0};
    cu_padd(g, &pl, ob, true);
    cu_padd(g, &pl, ib, false);
    cu_padd(g, &pl, wb, false);
    dpc_cu_dim total = cd_mul(cd_prod(&ids->sh, 0, ids->sh.rank), cd(D, 0));
    const char *it = kb(g, ib)->esize == 8 ? "long long" : "int";
    dpc_buf_printf(g->o, "\n/* %s: embedding of %lld rows of %lld; an index out of range raises the error flag */\n",
                   k->name, V, D);
    cu_kernel_head(g, k->name, &pl);
    cu_line_of(g, n);
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
    cu_kernel_tail(g);
    cu_plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

void emit_cuda_cat(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root;
    int ob = kg->buf_of[n->id];
    char t1[96], t2[96], t3[96], t4[96];
    plist pl = {0};
    cu_padd(g, &pl, ob, true);
    for (int i = 0; i < ir_cat_count(n); i++)
        cu_padd(g, &pl, kg->buf_of[ir_cat_operand(n, i)], false);
    dpc_cu_dim total = cd_prod(&n->sh, 0, n->sh.rank);
    dpc_buf_printf(g->o, "\n/* %s: cat of %d tensors on axis %d, one thread per output element */\n", k->name,
                   ir_cat_count(n), n->attr.ax.axis);
    cu_kernel_head(g, k->name, &pl);
    cu_line_of(g, n);
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
    cu_kernel_tail(g);
    cu_plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

void emit_cuda_copy(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *c = k->out;
    const shape *os = &c->sh;
    char t[96];
    int ob = kg->buf_of[c->id];
    plist pl = {0};
    cu_padd(g, &pl, ob, true);
    int sb = k->src.kind == ACC_LEAF ? -1 : kg->buf_of[k->src.base->id];
    cu_padd(g, &pl, sb, false);
    dpc_cu_dim total = cd_prod(os, 0, os->rank);
    dpc_buf_printf(g->o, "\n/* %s: materialise %%%d (%s) */\n", k->name, c->id,
                   k->src.kind == ACC_STRIDED ? "a strided view" : k->src.kind == ACC_LEAF ? "a constant" : "a copy");
    cu_kernel_head(g, k->name, &pl);
    cu_line_of(g, c);
    dpc_buf_printf(g->o, "    const long long total = %s;\n    for (long long i = %s) {\n", cd_str(t, sizeof t, total),
                   grid_stride());
    if (k->src.kind == ACC_LEAF) {
        if (emit_leaf_needs_coords(k->src.base))
            cu_coords(g, os, "        ");
        dpc_buf_printf(g->o, "        b%d[i] = ", ob);
        emit_leaf(g->o, k->src.base, os);
        dpc_buf_puts(g->o, ";\n");
    } else if (k->src.kind == ACC_CONTIG) {
        dpc_buf_printf(g->o, "        b%d[i] = %sb%d[i];\n", ob, c->dt == IR_I64 ? "" : "(float)", sb);
    } else {
        cu_coords(g, os, "        ");
        dpc_buf_printf(g->o, "        b%d[i] = %sb%d[", ob, c->dt == IR_I64 ? "" : "(float)", sb);
        emit_coord_offset(g->o, &k->src, os->rank);
        dpc_buf_puts(g->o, "];\n");
    }
    dpc_buf_puts(g->o, "    }\n");
    cu_kernel_tail(g);
    cu_plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}
