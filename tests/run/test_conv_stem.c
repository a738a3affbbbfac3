/* test_conv_stem.c - dpc's direct convolution for few input channels
 * (runtime/cpu/conv_stem.c) against a direct convolution in float64.
 *
 *     test_conv_stem
 *
 * AlexNet's and ResNet's stem geometries in small (11x11 stride 4, 7x7
 * stride 2), a 4x4 stride-4 patchify, 1 to 4 input channels, 16 and 32
 * output channels, widths of exactly 6 columns and of 6k + 1 (the last
 * block overlapping the one before, with a residual that must be added
 * once), asymmetric paddings and inputs wider than the conv reads, bias or
 * none, ReLU, clip, hardswish, SiLU, sigmoid, one and two threads; each
 * post-op on NaN and infinities (PyTorch's: relu(NaN) = NaN); and which convs dpc_stem_fits
 * takes. Built in every configuration (the sanitizer ones check its
 * memory accesses). SKIP (77) without AVX2. */
#include "../check.h"
#include "conv_ref.h"
#include "conv_avx2.h"
#include "conv_stem.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct geom {
    int64_t N, C, Co, H, W, k, s, pt, pl, pb, pr;
    bool bias;
    int threads;
    int npost;
    dpc_conv_act post[2];
} geom;

static dpc_conv_desc desc_of(const geom *g) {
    dpc_conv_desc d = {.C = g->C, .H = g->H, .W = g->W, .Co = g->Co, .kh = g->k, .kw = g->k, .groups = 1,
                       .stride = {g->s, g->s}, .dil = {1, 1}, .pad_l = {g->pt, g->pl}, .pad_r = {g->pb, g->pr},
                       .bias = g->bias, .w_param = 0, .src_conv = -1, .sum_conv = -1};
    d.Ho = (g->H + g->pt + g->pb - g->k) / g->s + 1;
    d.Wo = (g->W + g->pl + g->pr - g->k) / g->s + 1;
    ref_set_posts(&d, g->post, g->npost);
    return d;
}

/* One geometry: the kernel's result (nChw8c) must be within float32
 * rounding of the float64 direct convolution of x (NCHW). */
static void run_geom(const geom *g) {
    dpc_conv_desc d = desc_of(g);
    int64_t N = g->N, C = g->C, Co = g->Co, H = g->H, W = g->W, Ho = d.Ho, Wo = d.Wo, k = g->k;
    size_t nx = (size_t)(N * C * H * W), ny = (size_t)(N * Co * Ho * Wo), nw = (size_t)(Co * C * k * k);
    float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *b = malloc((size_t)Co * sizeof(float));
    float *y = malloc(ny * sizeof(float)), *res = malloc(ny * sizeof(float));
    float *u = malloc(dpc_stem_weights_size(&d) * sizeof(float));
    float *scratch = malloc(dpc_stem_scratch_size(&d) * sizeof(float));
    CHECK(x && w && b && y && res && u && scratch);
    if (!(x && w && b && y && res && u && scratch))
        exit(1);
    uint64_t s = (uint64_t)(N * 131 + C * 17 + Co * 7 + H * 3 + W + k);
    for (size_t i = 0; i < nx; i++)
        x[i] = val(&s);
    for (int64_t n = 0; n < N; n++)
        ref_put_special(x + n * C * H * W, (size_t)(C * H * W), n, &s);
    for (size_t i = 0; i < nw; i++)
        w[i] = val(&s) / (float)k;
    for (int64_t i = 0; i < Co; i++)
        b[i] = val(&s);
    for (size_t i = 0; i < ny; i++)
        res[i] = val(&s);
    memcpy(y, res, ny * sizeof(float)); /* the residual, where a post-op adds it */
    dpc_stem_weights(&d, w, u);
    dpc_stem_run(&d, N, x, u, g->bias ? b : NULL, y, scratch, g->threads);
    double worst = 0, scale = 0;
    long bad = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < Co; o++)
            for (int64_t ho = 0; ho < Ho; ho++)
                for (int64_t wo = 0; wo < Wo; wo++) {
                    double a = g->bias ? b[o] : 0, mag = fabs(a);
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t i = 0; i < k; i++)
                            for (int64_t j = 0; j < k; j++) {
                                int64_t h = ho * g->s + i - g->pt, ww = wo * g->s + j - g->pl;
                                if (h >= 0 && h < H && ww >= 0 && ww < W) {
                                    double t = (double)w[((o * C + c) * k + i) * k + j] * x[((n * C + c) * H + h) * W + ww];
                                    a += t;
                                    mag += fabs(t);
                                }
                            }
                    int64_t q = (((n * (Co / 8) + o / 8) * Ho + ho) * Wo + wo) * 8 + o % 8;
                    a = ref_post(g->post, g->npost, a, res[q]);
                    /* float32 sums of up to C*k*k terms: a few ulps of the terms' magnitude */
                    double e = ref_err(a, y[q], mag + fabs(res[q]), &bad);
                    worst = e > worst ? e : worst;
                    scale = fabs(a) > scale ? fabs(a) : scale;
                }
    CHECK(worst < 1e-6, "N %lld C %lld Co %lld %lldx%lld k %lld s %lld pad %lld/%lld/%lld/%lld: worst error %.3g of "
          "the terms' magnitude (largest output %.3g)", (long long)N, (long long)C, (long long)Co, (long long)H,
          (long long)W, (long long)k, (long long)g->s, (long long)g->pt, (long long)g->pl, (long long)g->pb,
          (long long)g->pr, worst, scale);
    CHECK(bad == 0, "N %lld C %lld Co %lld k %lld post %d: %ld outputs not PyTorch's NaN or infinity", (long long)N,
          (long long)C, (long long)Co, (long long)k, g->npost ? (int)g->post[g->npost - 1] : -1, bad);
    free(x), free(w), free(b), free(y), free(res), free(u), free(scratch);
}

int main(void) {
    if (!ref_runs_here("stem kernel"))
        return SKIP;
    static const geom gs[] = {
        /* AlexNet's stem in small: 11x11 stride 4 pad 2, 11x11 out (6 + 5: the overlapping block) */
        {2, 3, 32, 47, 47, 11, 4, 2, 2, 2, 2, true, 2, 1, {DPC_ACT_RELU}},
        /* ResNet's: 7x7 stride 2 pad 3, odd size */
        {1, 3, 16, 23, 25, 7, 2, 3, 3, 3, 3, false, 1, 0, {0}},
        /* a 4x4 stride-4 patchify, no padding, 4 channels, a residual (added once) */
        {3, 4, 16, 28, 28, 4, 4, 0, 0, 0, 0, true, 2, 2, {DPC_ACT_SUM, DPC_ACT_RELU}},
        /* one channel, exactly 6 columns, asymmetric padding, clip */
        {2, 1, 16, 5, 4, 3, 1, 1, 0, 2, 2, true, 1, 1, {DPC_ACT_CLIP}},
        /* an input wider and taller than the conv reads (stride 2, no padding: the last row and column unread) */
        {1, 2, 16, 16, 16, 3, 2, 0, 0, 0, 0, true, 2, 1, {DPC_ACT_SUM}},
        /* 13 columns (6 + 6 + 1), bottom and right padding only */
        {2, 3, 16, 9, 13, 3, 1, 0, 0, 2, 2, true, 2, 0, {0}},
        /* MobileNet v3's stem in small: 3x3 stride 2, hardswish; EfficientNet's: SiLU */
        {2, 3, 16, 30, 30, 3, 2, 1, 1, 1, 1, true, 1, 1, {DPC_ACT_HARDSWISH}},
        {1, 3, 32, 31, 31, 3, 2, 1, 1, 1, 1, true, 2, 1, {DPC_ACT_SWISH}},
        {1, 3, 16, 12, 12, 3, 1, 1, 1, 1, 1, false, 1, 2, {DPC_ACT_SUM, DPC_ACT_LOGISTIC}},
    };
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++)
        run_geom(&gs[i]);
    /* NaN, +inf, -inf in images 0, 1, 2 (ref_specials): each post-op */
    static const geom sp[] = {
        {4, 3, 16, 12, 12, 3, 1, 1, 1, 1, 1, true, 1, 1, {DPC_ACT_RELU}},
        {4, 3, 16, 12, 12, 3, 1, 1, 1, 1, 1, true, 2, 1, {DPC_ACT_CLIP}},
        {4, 3, 16, 12, 12, 3, 2, 1, 1, 1, 1, true, 1, 1, {DPC_ACT_HARDSWISH}},
        {4, 3, 16, 12, 12, 3, 1, 1, 1, 1, 1, false, 1, 1, {DPC_ACT_SWISH}},
        {4, 3, 16, 12, 12, 3, 1, 1, 1, 1, 1, true, 2, 1, {DPC_ACT_LOGISTIC}},
        {4, 3, 16, 12, 12, 3, 1, 1, 1, 1, 1, true, 1, 2, {DPC_ACT_SUM, DPC_ACT_RELU}},
    };
    ref_specials = true;
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++)
        run_geom(&sp[i]);
    ref_specials = false;

    /* what it takes */
    geom base = {1, 3, 64, 224, 224, 11, 4, 2, 2, 2, 2, true, 1, 1, {DPC_ACT_RELU}};
    dpc_conv_desc d = desc_of(&base);
    CHECK(dpc_stem_fits(&d), "AlexNet's stem");
    d.Co = 40;
    CHECK(!dpc_stem_fits(&d), "40 output channels");
    d = desc_of(&base);
    d.C = 5;
    CHECK(!dpc_stem_fits(&d), "5 input channels");
    d = desc_of(&base);
    d.post[0].act = DPC_ACT_GELU_ERF;
    CHECK(!dpc_stem_fits(&d), "GELU");
    d.post[0].act = DPC_ACT_HARDSWISH;
    CHECK(dpc_stem_fits(&d), "hardswish");
    d = desc_of(&base);
    d.dil[0] = 2;
    CHECK(!dpc_stem_fits(&d), "dilation");
    d = desc_of(&base);
    d.groups = 3;
    CHECK(!dpc_stem_fits(&d), "grouped");
    d = desc_of(&base);
    d.Wo = 5;
    CHECK(!dpc_stem_fits(&d), "5 output columns");
    return finish("test_conv_stem");
}
