/* emit_cuda_conv.c - the CUDA dialect's kernels over NCHW images:
 * conv2d (KK_CONV: cuDNN where the plan can take it, else im2col + a
 * cuBLASLt GEMM per group, then a kernel that scatters back to NCHW with
 * the bias and the fused chain), pooling (KK_POOL) and conv_transpose2d /
 * upsample (KK_RESAMPLE), one thread per output element. */
#include "emit_cuda.h"

#include <stdio.h>

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
    cu_kernel_head(g, fn, pl);
    cu_line_of(g, k->root);
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
    cu_kernel_tail(g);
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
    dpc_cu_conv *c = &cu_new_step(g, DPC_CU_CONV)->u.conv;
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
        ok = (a->in[0] == prev) != (a->in[1] == prev) && !cu_reads_after(k, i + 1, prev) &&
             shape_eq(&nd(kg, other)->sh, &k->out->sh) && kg->acc[other].kind == ACC_CONTIG &&
             kg->buf_of[other] >= 0 && kb(g, kg->buf_of[other])->esize == 4;
        c->z = ok ? kg->buf_of[other] : -1;
        prev = a->id;
        i++;
    }
    if (ok && i < k->ops.len && ((const ir_node *)k->ops.items[i])->op == OP_RELU && !cu_reads_after(k, i + 1, prev)) {
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

void emit_cuda_conv(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]), *w = nd(kg, n->in[1]);
    emit_conv_dims cv;
    int xb = kg->buf_of[x->id], wb = kg->buf_of[w->id], cb = k->scratch, rb = k->scratch2;
    if (!emit_conv_geom(n, x, w, &cv)) {
        cu_fail(g, n, "bad groups");
        return;
    }
    plan_conv(g, k, &cv, xb, wb, rb);
    dpc_buf nm;
    dpc_buf_init(&nm);
    dpc_buf_printf(&nm, "%s_im2col", k->name);
    plist pl = {0};
    cu_padd(g, &pl, cb, true);
    cu_padd(g, &pl, xb, false);
    emit_im2col(g, k, &cv, nm.data ? nm.data : "im2col", &pl, xb, cb);
    for (long long gi = 0; gi < cv.G; gi++) {
        dpc_cu_launch *l = cu_plan_launch(g, k->name, "_im2col", DPC_CU_ELEMS, cd(cv.Kd * cv.HW, 1), 1, &pl);
        l->g = gi; /* one function, a launch per group */
        dpc_cu_gemm *m = cu_new_gemm(g, wb, cb, rb);
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
    cu_padd(g, &extra, rb, false);
    if (n->nin > 2) {
        cu_padd(g, &extra, kg->buf_of[n->in[2]], false);
        snprintf(seed, sizeof seed, "b%d[c1 * (N * %lldLL) + c0 * %lldLL + c2 * %lldLL + c3] + b%d[c1]", rb, cv.HW,
                 cv.HW, cv.Wo, kg->buf_of[n->in[2]]);
    } else
        snprintf(seed, sizeof seed, "b%d[c1 * (N * %lldLL) + c0 * %lldLL + c2 * %lldLL + c3]", rb, cv.HW, cv.HW, cv.Wo);
    cu_chain_kernel(g, k, k->name, 0, seed, n->id, false, true, &extra);
}

/* ---------------------------------------------------------- pooling */

void emit_cuda_pool(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    long long H = x->sh.d[2].k, W = x->sh.d[3].k, Ho = n->sh.d[2].k, Wo = n->sh.d[3].k;
    int xb = kg->buf_of[x->id], ob = kg->buf_of[n->id];
    char t[96];
    plist pl = {0};
    cu_padd(g, &pl, ob, true);
    cu_padd(g, &pl, xb, false);
    dpc_cu_dim total = cd_prod(&n->sh, 0, n->sh.rank);
    dpc_buf_printf(g->o, "\n/* %s: %s, one thread per output element */\n", k->name, ir_op_name(n->op));
    cu_kernel_head(g, k->name, &pl);
    cu_line_of(g, n);
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
    cu_kernel_tail(g);
    cu_plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}

/* ---------------------------------------------------------- resampling */

/* conv_transpose2d and upsample: one thread per output element gathering
 * its value (a transposed convolution reads the taps whose stride divides
 * oh + ph - ki*dh), then the fused chain on it. */
void emit_cuda_resample(cg *g, const kernel *k) {
    const kgraph *kg = g->kg;
    const ir_node *n = k->root, *x = nd(kg, n->in[0]);
    const shape *os = &k->out->sh;
    int xb = kg->buf_of[x->id], ob = kg->buf_of[k->out->id];
    char t[96];
    plist pl = {0};
    cu_padd(g, &pl, ob, true);
    for (int i = 0; i < n->nin; i++)
        cu_padd(g, &pl, kg->buf_of[n->in[i]], false);
    cu_padd_chain(g, &pl, k, 0);
    dpc_cu_dim total = cd_prod(os, 0, os->rank);
    emit_conv_dims cv;
    if (n->op == OP_CONV_TRANSPOSE2D && !emit_convt_geom(n, x, nd(kg, n->in[1]), &cv)) {
        cu_fail(g, n, "bad groups");
        return;
    }
    dpc_buf_printf(g->o, "\n/* %s: %s, one thread per output element%s */\n", k->name, ir_op_name(n->op),
                   k->ops.len ? "; the fused chain follows" : "");
    cu_kernel_head(g, k->name, &pl);
    cu_line_of(g, n);
    dpc_buf_printf(g->o, "    const long long total = %s;\n    for (long long i = %s) {\n", cd_str(t, sizeof t, total),
                   grid_stride());
    cu_coords(g, os, "        ");
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
    cu_emit_ops(g, k, 0, os, "        ", "");
    dpc_buf_printf(g->o, "        b%d[i] = v%d;\n    }\n", ob, k->out->id);
    cu_kernel_tail(g);
    cu_plan_launch(g, k->name, "", DPC_CU_ELEMS, total, 1, &pl);
}
