/* emit_c_gemm.c - the C dialect's KK_GEMM kernel: a linear or a matmul
 * (torch.matmul's broadcasting, 1-D operands promoted) as calls to the
 * runtime's GEMM (ctx->sgemm, or ctx->linear's packed weights first), then
 * the bias and the fused chain as one loop over the result. */
#include "emit_c.h"

#include <stdio.h>

void emit_c_gemm(const kgraph *kg, const kernel *k, dpc_buf *o) {
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
