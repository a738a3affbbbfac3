/* emit_c_nhwc.c - the C dialect's second and third loops of a pool or
 * elementwise kernel whose source may be a conv result kept in NHWC or
 * nChw8c (conv_post.c, "NHWC readers"): the same values per element in
 * the layout the runtime reports this forward. Its own file because it is
 * one concern (the kept layouts) across two kinds. */
#include "emit_c.h"

#include <stdio.h>

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

/* The loops of kernel k over its source's kept layouts, when it has one
 * (conv_nhwc_root): asks ctx->kept which layout the conv result is in
 * this forward and returns from the kernel after the NHWC (or nChw8c)
 * loop; the NCHW loop the caller writes next runs otherwise. */
void emit_c_kept_loops(const kgraph *kg, const kernel *k, dpc_buf *o) {
    int kept = k->kind == KK_POOL || k->kind == KK_ELEMWISE || k->kind == KK_COPY ? conv_nhwc_root(kg, k) : -1;
    if (kept < 0)
        return;
    /* the source may be NHWC or nChw8c: conv_post.c, "NHWC readers" */
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
