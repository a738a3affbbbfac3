/* test_conv_mb.c - dpc's kernel for a 1x1 conv and the depthwise conv
 * after it (runtime/cpu/conv_mb.c) against the two convolutions in
 * float64.
 *
 *     test_conv_mb
 *
 * EfficientNet's and MobileNet's shapes scaled down: 3x3 and 5x5
 * depthwise kernels, stride 1 and 2, centred and one-sided padding (the
 * rows and columns past the image), widths a multiple of 6 and not (a
 * row's last pixels in blocks of 4, 2 and 1), one pixel, panels of 16 expanded channels whole and
 * half (72, 40, 8), one input block and several, bias or none on either,
 * ReLU, clip, hardswish, SiLU and sigmoid on either, one and two threads;
 * each image's result the same bits at batch 1 on one thread; nothing
 * written past the result; each post-op on NaN and infinities (PyTorch's:
 * relu(NaN) = NaN, relu6(inf) = 6); and which pairs dpc_mb_fits takes. Built in
 * every configuration (the sanitizer ones check its memory accesses).
 * SKIP (77) without AVX2. */
#include "../check.h"
#include "conv_ref.h"
#include "conv_avx2.h"
#include "conv_mb.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct pair_geom {
    int64_t N, C, Ce, H, W;   /* the 1x1: C -> Ce channels at H x W */
    int64_t k, s, pt, pb;     /* the depthwise conv: k x k, stride s, padding before / after (rows and columns) */
    bool bias_a, bias_b;
    int threads;
    dpc_conv_act post_a, post_b; /* DPC_ACT_SUM: none (the kernel takes no residual) */
} pair_geom;

static void descs_of(const pair_geom *g, dpc_conv_desc *a, dpc_conv_desc *b) {
    int64_t Ho = (g->H + g->pt + g->pb - g->k) / g->s + 1, Wo = (g->W + g->pt + g->pb - g->k) / g->s + 1;
    *a = (dpc_conv_desc){.C = g->C, .H = g->H, .W = g->W, .Co = g->Ce, .Ho = g->H, .Wo = g->W, .kh = 1, .kw = 1,
                         .groups = 1, .stride = {1, 1}, .dil = {1, 1}, .bias = g->bias_a, .w_param = 0,
                         .src_conv = -1, .sum_conv = -1};
    *b = (dpc_conv_desc){.C = g->Ce, .H = g->H, .W = g->W, .Co = g->Ce, .Ho = Ho, .Wo = Wo, .kh = g->k, .kw = g->k,
                         .groups = g->Ce, .stride = {g->s, g->s}, .dil = {1, 1}, .pad_l = {g->pt, g->pt},
                         .pad_r = {g->pb, g->pb}, .bias = g->bias_b, .w_param = 1, .src_conv = 0, .sum_conv = -1};
    ref_set_posts(a, &g->post_a, g->post_a != DPC_ACT_SUM);
    ref_set_posts(b, &g->post_b, g->post_b != DPC_ACT_SUM);
}

#define GUARD 8 /* floats after y that must stay untouched */
#define POISON 12345.0f

/* Element (n, c, h, w) of an nChw8c tensor of C channels at H x W. */
static size_t at8(int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H, int64_t W) {
    return (size_t)((((n * (C / 8) + c / 8) * H + h) * W + w) * 8 + c % 8);
}

/* The pair in float64: t = post_a(1x1), its magnitude (sum of |terms|),
 * then the worst error of y against post_b(dw(t)) relative to the terms'
 * magnitude. */
static double worst_error(const pair_geom *g, const dpc_conv_desc *b, const float *x, const float *wa,
                          const float *ba, const float *wb, const float *bb, const float *y) {
    int64_t N = g->N, C = g->C, Ce = g->Ce, H = g->H, W = g->W, k = g->k;
    size_t nt = (size_t)(N * Ce * H * W);
    double *t = malloc(nt * sizeof(double)), *mt = malloc(nt * sizeof(double));
    if (!t || !mt)
        exit(1);
    for (int64_t n = 0; n < N; n++)
        for (int64_t e = 0; e < Ce; e++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++) {
                    double a = g->bias_a ? ba[e] : 0, mag = fabs(a);
                    for (int64_t c = 0; c < C; c++) {
                        double v = (double)wa[e * C + c] * x[at8(n, c, h, w, C, H, W)];
                        a += v;
                        mag += fabs(v);
                    }
                    size_t q = (size_t)(((n * Ce + e) * H + h) * W + w);
                    t[q] = g->post_a == DPC_ACT_SUM ? a : ref_post(&g->post_a, 1, a, 0);
                    /* (a special the post-op turned into a bound: t exact) */
                    mt[q] = isfinite(mag) || !isfinite(t[q]) ? mag : 0;
                }
    double worst = 0;
    long bad = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t e = 0; e < Ce; e++)
            for (int64_t oh = 0; oh < b->Ho; oh++)
                for (int64_t ow = 0; ow < b->Wo; ow++) {
                    double a = g->bias_b ? bb[e] : 0, mag = fabs(a);
                    for (int64_t i = 0; i < k; i++)
                        for (int64_t j = 0; j < k; j++) {
                            int64_t h = oh * g->s - g->pt + i, w = ow * g->s - g->pt + j;
                            if (h < 0 || h >= H || w < 0 || w >= W)
                                continue;
                            size_t q = (size_t)(((n * Ce + e) * H + h) * W + w);
                            double wv = wb[(e * k + i) * k + j];
                            a += wv * t[q];
                            mag += fabs(wv) * (fabs(t[q]) + mt[q]);
                        }
                    if (g->post_b != DPC_ACT_SUM)
                        a = ref_post(&g->post_b, 1, a, 0);
                    double err = ref_err(a, y[at8(n, e, oh, ow, Ce, b->Ho, b->Wo)], mag, &bad);
                    worst = err > worst ? err : worst;
                }
    free(t), free(mt);
    return bad ? INFINITY : worst; /* (a NaN or infinity not PyTorch's) */
}

static void run_geom(const pair_geom *g) {
    dpc_conv_desc a, b;
    descs_of(g, &a, &b);
    CHECK(dpc_mb_fits(&a, &b), "C %lld Ce %lld %lldx%lld k %lld s %lld: dpc_mb_fits refuses it", (long long)g->C,
          (long long)g->Ce, (long long)g->H, (long long)g->W, (long long)g->k, (long long)g->s);
    int64_t N = g->N, Ce = g->Ce;
    size_t nx = (size_t)(N * g->C * g->H * g->W), per = (size_t)(Ce * b.Ho * b.Wo), ny = (size_t)N * per;
    float *x = malloc(nx * sizeof(float)), *wa = malloc((size_t)(Ce * g->C) * sizeof(float));
    float *wb = malloc((size_t)(Ce * g->k * g->k) * sizeof(float)), *ba = malloc((size_t)Ce * sizeof(float));
    float *bb = malloc((size_t)Ce * sizeof(float)), *y = malloc((ny + GUARD) * sizeof(float));
    float *y1 = malloc((per + GUARD) * sizeof(float));
    float *ua = malloc(dpc_mb_1x1_size(&a) * sizeof(float)), *ub = malloc(dpc_mb_dw_size(&b) * sizeof(float));
    float *scratch = malloc(dpc_mb_scratch_size(&b, g->threads) * sizeof(float));
    if (!(x && wa && wb && ba && bb && y && y1 && ua && ub && scratch))
        exit(1);
    uint64_t s = (uint64_t)(g->N * 131 + g->C * 17 + Ce * 7 + g->H * 3 + g->k);
    for (size_t i = 0; i < nx; i++)
        x[i] = val(&s);
    for (int64_t n = 0; n < N; n++) /* (an image is nx / N floats of nChw8c) */
        ref_put_special(x + (size_t)n * nx / (size_t)N, nx / (size_t)N, n, &s);
    for (int64_t i = 0; i < Ce * g->C; i++)
        wa[i] = 2 * val(&s) / sqrtf((float)g->C);
    for (int64_t i = 0; i < Ce * g->k * g->k; i++)
        wb[i] = val(&s);
    for (int64_t i = 0; i < Ce; i++)
        ba[i] = val(&s), bb[i] = val(&s);
    for (size_t i = 0; i < ny + GUARD; i++)
        y[i] = POISON;
    /* the scratch as another kernel leaves it: the ring's borders must be
     * zeroed by the kernel itself */
    for (size_t i = 0; i < dpc_mb_scratch_size(&b, g->threads); i++)
        scratch[i] = POISON;
    dpc_mb_1x1_weights(&a, wa, ua);
    dpc_mb_dw_weights(&b, wb, ub);
    dpc_mb_run(&a, &b, N, x, ua, g->bias_a ? ba : NULL, ub, g->bias_b ? bb : NULL, y, scratch, g->threads);
    double worst = worst_error(g, &b, x, wa, ba, wb, bb, y);
    CHECK(worst < 1e-6, "C %lld Ce %lld %lldx%lld k %lld s %lld: worst error %.3g of the terms' magnitude",
          (long long)g->C, (long long)Ce, (long long)g->H, (long long)g->W, (long long)g->k, (long long)g->s, worst);
    bool guard = true;
    for (int i = 0; i < GUARD; i++)
        guard = guard && y[ny + i] == POISON;
    CHECK(guard, "C %lld Ce %lld: written past the result", (long long)g->C, (long long)Ce);
    /* each image alone, on one thread: the same bits */
    bool same = true;
    for (int64_t n = 0; n < N; n++) {
        for (size_t i = 0; i < per + GUARD; i++)
            y1[i] = POISON;
        dpc_mb_run(&a, &b, 1, x + (size_t)n * nx / (size_t)N, ua, g->bias_a ? ba : NULL, ub, g->bias_b ? bb : NULL,
                   y1, scratch, 1);
        same = same && memcmp(y1, y + (size_t)n * per, per * sizeof(float)) == 0 && y1[per] == POISON;
    }
    CHECK(same, "C %lld Ce %lld: an image's result differs alone on one thread", (long long)g->C, (long long)Ce);
    free(x), free(wa), free(wb), free(ba), free(bb), free(y), free(y1), free(ua), free(ub), free(scratch);
}

int main(void) {
    if (!ref_runs_here("1x1 + depthwise kernel"))
        return SKIP;
    static const pair_geom gs[] = {
        /* EfficientNet-B0's second block, 16 -> 96 then 3x3 stride 2, SiLU on both */
        {1, 16, 96, 20, 20, 3, 2, 1, 1, true, true, 2, DPC_ACT_SWISH, DPC_ACT_SWISH},
        /* a 5x5 stride 1, a half panel (72), clip (ReLU6) then hardswish, width not a multiple of 6 */
        {3, 24, 72, 9, 13, 5, 1, 2, 2, true, true, 2, DPC_ACT_CLIP, DPC_ACT_HARDSWISH},
        /* one input block, one half panel only, no bias on either, ReLU then sigmoid */
        {2, 8, 8, 7, 7, 3, 1, 1, 1, false, false, 1, DPC_ACT_RELU, DPC_ACT_LOGISTIC},
        /* a 5x5 stride 2 at the narrowest width, no post-op on the 1x1 */
        {1, 40, 240, 14, 6, 5, 2, 2, 2, true, false, 2, DPC_ACT_SUM, DPC_ACT_SWISH},
        /* padding after only (TensorFlow's SAME at stride 2), odd batch, 40 channels (two panels and a half) */
        {5, 16, 40, 10, 10, 3, 2, 0, 1, true, true, 2, DPC_ACT_RELU, DPC_ACT_SUM},
        /* stride 2 over an odd size: the last rows and columns past the image */
        {2, 32, 48, 11, 11, 3, 2, 1, 1, true, true, 1, DPC_ACT_SWISH, DPC_ACT_CLIP},
        /* rows narrower than a block of 6: 4 + 1 pixels, 2 + 1, and one */
        {2, 16, 24, 5, 5, 3, 1, 1, 1, true, true, 2, DPC_ACT_SWISH, DPC_ACT_SWISH},
        {1, 8, 16, 4, 3, 3, 2, 1, 1, true, true, 1, DPC_ACT_HARDSWISH, DPC_ACT_RELU},
        {1, 8, 16, 1, 1, 3, 1, 1, 1, true, true, 1, DPC_ACT_RELU, DPC_ACT_RELU},
        /* MobileNet v2's pairs: ReLU6 on both (applied as the kernel stores), a
         * whole small image, and one past 1024 pixels (a ring of kh rows) */
        {2, 32, 192, 14, 14, 3, 1, 1, 1, true, true, 2, DPC_ACT_CLIP, DPC_ACT_CLIP},
        {1, 16, 48, 40, 36, 3, 2, 1, 1, true, true, 2, DPC_ACT_CLIP, DPC_ACT_CLIP},
    };
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++)
        run_geom(&gs[i]);
    /* NaN, +inf, -inf in images 0, 1, 2 (ref_specials): each post-op on
     * either conv, ReLU and ReLU6 applied as the kernel stores */
    static const pair_geom sp[] = {
        {4, 16, 24, 7, 7, 3, 1, 1, 1, true, true, 2, DPC_ACT_RELU, DPC_ACT_CLIP},
        {4, 16, 24, 7, 7, 3, 2, 1, 1, true, true, 1, DPC_ACT_CLIP, DPC_ACT_RELU},
        {4, 16, 24, 7, 7, 3, 1, 1, 1, true, false, 2, DPC_ACT_SWISH, DPC_ACT_HARDSWISH},
        {4, 16, 24, 7, 7, 5, 1, 2, 2, false, true, 1, DPC_ACT_HARDSWISH, DPC_ACT_LOGISTIC},
        {4, 16, 24, 7, 7, 3, 1, 1, 1, true, true, 2, DPC_ACT_LOGISTIC, DPC_ACT_SWISH},
    };
    ref_specials = true;
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++)
        run_geom(&sp[i]);
    ref_specials = false;

    /* what it takes */
    const pair_geom base = gs[0];
    dpc_conv_desc a, b;
    descs_of(&base, &a, &b);
    CHECK(dpc_mb_fits(&a, &b), "EfficientNet's pair");
    a.stride[0] = a.stride[1] = 2;
    CHECK(!dpc_mb_fits(&a, &b), "a strided 1x1");
    descs_of(&base, &a, &b);
    a.C = 12;
    CHECK(!dpc_mb_fits(&a, &b), "input channels not a multiple of 8");
    descs_of(&base, &a, &b);
    b.dil[0] = b.dil[1] = 2;
    CHECK(!dpc_mb_fits(&a, &b), "a dilated depthwise conv");
    descs_of(&base, &a, &b);
    b.groups = 1;
    CHECK(!dpc_mb_fits(&a, &b), "a dense conv after the 1x1");
    descs_of(&base, &a, &b);
    b.kh = b.kw = DPC_MB_MAX_K + 2;
    CHECK(!dpc_mb_fits(&a, &b), "a depthwise kernel past DPC_MB_MAX_K");
    descs_of(&base, &a, &b);
    b.post[0].act = DPC_ACT_SUM;
    CHECK(!dpc_mb_fits(&a, &b), "a residual");
    descs_of(&base, &a, &b);
    a.post[0].act = DPC_ACT_GELU_ERF;
    CHECK(!dpc_mb_fits(&a, &b), "GELU");
    return finish("test_conv_mb");
}
