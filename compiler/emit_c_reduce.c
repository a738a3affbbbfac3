/* emit_c_reduce.c - the C dialect's kernels that reduce along an axis:
 * softmax, log_softmax and layer_norm (KK_ROW, one pass per row) and
 * sum, mean, amax (KK_REDUCE), with their sums in double. */
#include "emit_c.h"

#include <stdio.h>

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

void emit_c_row(const kgraph *kg, const kernel *k, dpc_buf *o) {
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

void emit_c_reduce(const kgraph *kg, const kernel *k, dpc_buf *o) {
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
