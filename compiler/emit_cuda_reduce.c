/* emit_cuda_reduce.c - the CUDA dialect's kernels that reduce along an
 * axis: softmax, log_softmax and layer_norm (KK_ROW: one warp per row with
 * shuffle reductions, one block per row for long rows, one thread per
 * column for a middle axis) and sum, mean, amax (KK_REDUCE). */
#include "emit_cuda.h"

#include <stdio.h>

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
    cu_kernel_tail(g);
    cu_plan_launch(g, k->name, "", grid, rows, 1, pl);
}

/* A row kernel over `rows` rows of L elements: the comment already written,
 * the head, the row prologue and `x`, `y` at the row's first element. */
static dpc_cu_grid row_kernel_head(cg *g, const kernel *k, const plist *pl, long long L, dpc_cu_dim rows, int xb,
                                   int ob) {
    char t[96];
    cu_kernel_head(g, k->name, pl);
    dpc_cu_grid grid = row_head(g, L, cd_str(t, sizeof t, rows));
    cu_line_of(g, k->root);
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
    cu_kernel_head(g, k->name, pl);
    cu_line_of(g, n);
    dpc_buf_printf(g->o,
                   "    const long long inner = %s, len = %s, total = %s;\n"
                   "    for (long long i = %s) {\n"
                   "        const long long p = i / inner, q = i - p * inner;\n"
                   "        const %s *x = b%d + p * len * inner + q;\n",
                   cd_str(t1, sizeof t1, cd_prod(&x->sh, n->attr.ax.axis + 1, x->sh.rank)),
                   cd_str(t2, sizeof t2, cd_of(x->sh.d[n->attr.ax.axis])), cd_str(t3, sizeof t3, total), grid_stride(), g->ft,
                   xb);
}

void emit_cuda_row(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    int xb = kg->buf_of[x->id], ob = kg->buf_of[n->id];
    plist pl = {0};
    cu_padd(g, &pl, ob, true);
    cu_padd(g, &pl, xb, false);
    if (n->op == OP_LAYERNORM) {
        long long L = 1;
        for (int i = x->sh.rank - n->attr.norm.dims; i < x->sh.rank; i++) {
            L *= x->sh.d[i].k;
            if (x->sh.d[i].sym) {
                cu_fail(g, n, "layer_norm over the batch dimension");
                return;
            }
        }
        int wb = -1, bb = -1, idx = 1;
        if (n->attr.norm.has_weight)
            wb = kg->buf_of[n->in[idx++]];
        if (n->attr.norm.has_bias)
            bb = kg->buf_of[n->in[idx++]];
        cu_padd(g, &pl, wb, false);
        cu_padd(g, &pl, bb, false);
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
    cu_kernel_tail(g);
    cu_plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

/* ---------------------------------------------------------- reductions */

void emit_cuda_reduce(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    int xb = kg->buf_of[x->id], ob = kg->buf_of[n->id];
    char t1[96], t3[96];
    plist pl = {0};
    cu_padd(g, &pl, ob, true);
    cu_padd(g, &pl, xb, false);
    bool amax = n->op == OP_AMAX, mean = n->op == OP_MEAN;
    if (x->sh.rank == 0) {
        dpc_buf_printf(g->o, "\n/* %s: %s of a scalar */\n", k->name, ir_op_name(n->op));
        cu_kernel_head(g, k->name, &pl);
        cu_line_of(g, n);
        dpc_buf_printf(g->o, "    if (blockIdx.x == 0 && threadIdx.x == 0) b%d[0] = b%d[0];\n", ob, xb);
        cu_kernel_tail(g);
        cu_plan_launch(g, k->name, "", DPC_CU_ONE, cd(1, 0), 1, &pl);
        return;
    }
    dpc_cu_dim len = cd_of(x->sh.d[n->attr.ax.axis]), outer = cd_prod(&x->sh, 0, n->attr.ax.axis),
               inner = cd_prod(&x->sh, n->attr.ax.axis + 1, x->sh.rank);
    cd_str(t3, sizeof t3, len);
    if (cd_one(inner)) {
        dpc_buf_printf(g->o, "\n/* %s: %s over the last axis, one warp per output */\n", k->name, ir_op_name(n->op));
        cu_kernel_head(g, k->name, &pl);
        dpc_cu_grid grid = row_head(g, 1, cd_str(t1, sizeof t1, outer));
        cu_line_of(g, n);
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
    cu_kernel_tail(g);
    cu_plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}
