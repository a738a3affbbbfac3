/* emit_c_conv.c - the C dialect's kernels over NCHW images: conv2d
 * (KK_CONV: the runtime's library call with the post-ops conv_post.c
 * found, else im2col + GEMM per group, then the epilogue), pooling
 * (KK_POOL) and conv_transpose2d / upsample (KK_RESAMPLE). The loops over
 * a kept NHWC conv result are in emit_c_nhwc.c. */
#include "emit_c.h"

#include <stdio.h>

void emit_c_conv(const kgraph *kg, const kernel *k, dpc_buf *o) {
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

void emit_c_pool(const kgraph *kg, const kernel *k, dpc_buf *o) {
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

/* conv_transpose2d: per image and group, the columns
 * col[(oc*kh + ki)*kw + kj][ih*W + iw] = W_g^T x X_g through the GEMM, then
 * col2im adds each column into the output (ow = iw*sw - pw + kj*dw, the
 * range of iw that lands inside computed once per row), which starts as
 * the bias. Then the fused chain, in place. Upsample: one pass over the
 * output, the chain applied to each value as it is computed. */
void emit_c_resample(const kgraph *kg, const kernel *k, dpc_buf *o) {
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
