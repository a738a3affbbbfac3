/* test_conv_wino.c - dpc's Winograd kernels, F(4x4, 3x3) and F(2x2, 3x3)
 * (runtime/cpu/conv_wino.c), against a direct convolution in float64.
 *
 *     test_conv_wino
 *
 * Geometries its tiles do not divide (odd sizes, paddings 0, 1, 2 and
 * asymmetric ones), 8/16/24 channels (a last GEMM panel of 8), bias or
 * none, ReLU, clip, a residual, batches split into chunks of tiles, one
 * and two threads; and which convs dpc_wino_fits takes. Built in every
 * configuration, so that the sanitizer builds (OpenBLAS, where the backend
 * never calls it) check its memory accesses. SKIP (77) without AVX2. */
#include "../check.h"
#include "conv_ref.h"
#include "conv_avx2.h"
#include "conv_wino.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct geom {
    int64_t N, C, Co, H, W, pt, pl, pb, pr;
    bool bias;
    int threads;
    int npost;
    dpc_conv_act post[3];
} geom;

static dpc_conv_desc desc_of(const geom *g) {
    dpc_conv_desc d = {.C = g->C, .H = g->H, .W = g->W, .Co = g->Co, .kh = 3, .kw = 3, .groups = 1,
                       .stride = {1, 1}, .dil = {1, 1}, .pad_l = {g->pt, g->pl}, .pad_r = {g->pb, g->pr},
                       .bias = g->bias, .w_param = 0, .src_conv = -1, .sum_conv = -1};
    d.Ho = g->H + g->pt + g->pb - 2;
    d.Wo = g->W + g->pl + g->pr - 2;
    ref_set_posts(&d, g->post, g->npost);
    return d;
}

/* Index of (n, c, h, w) in nChw8c. */
static int64_t blk(int64_t C, int64_t H, int64_t W, int64_t n, int64_t c, int64_t h, int64_t w) {
    return (((n * (C / 8) + c / 8) * H + h) * W + w) * 8 + c % 8;
}

/* One geometry: the kernel's result must be within bounds of the float64
 * direct convolution. */
static void run_geom(const geom *g) {
    dpc_conv_desc d = desc_of(g);
    int64_t N = g->N, C = g->C, Co = g->Co, H = g->H, W = g->W, Ho = d.Ho, Wo = d.Wo;
    size_t nx = (size_t)(N * C * H * W), ny = (size_t)(N * Co * Ho * Wo), nw = (size_t)(Co * C * 9);
    float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *b = malloc((size_t)Co * sizeof(float));
    float *y = malloc(ny * sizeof(float)), *res = malloc(ny * sizeof(float));
    float *u = malloc(dpc_wino_weights_size(&d) * sizeof(float));
    float *scratch = malloc(dpc_wino_scratch_size(&d, N) * sizeof(float));
    CHECK(x && w && b && y && res && u && scratch);
    if (!(x && w && b && y && res && u && scratch))
        exit(1);
    uint64_t s = (uint64_t)(N * 131 + C * 17 + Co * 7 + H * 3 + W);
    for (size_t i = 0; i < nx; i++)
        x[i] = val(&s);
    for (size_t i = 0; i < nw; i++)
        w[i] = val(&s) / 3.0f;
    for (int64_t i = 0; i < Co; i++)
        b[i] = val(&s);
    for (size_t i = 0; i < ny; i++)
        res[i] = val(&s);
    memcpy(y, res, ny * sizeof(float)); /* the residual, where a post-op adds it */
    dpc_wino_weights(&d, w, u);
    dpc_wino_run(&d, N, x, u, g->bias ? b : NULL, y, scratch, g->threads);
    /* the reference, NCHW indices, x and y in nChw8c */
    double worst = 0, scale = 0, num = 0, den = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < Co; o++)
            for (int64_t ho = 0; ho < Ho; ho++)
                for (int64_t wo = 0; wo < Wo; wo++) {
                    double a = g->bias ? b[o] : 0;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t i = 0; i < 3; i++)
                            for (int64_t j = 0; j < 3; j++) {
                                int64_t h = ho + i - g->pt, ww = wo + j - g->pl;
                                if (h >= 0 && h < H && ww >= 0 && ww < W)
                                    a += (double)w[((o * C + c) * 3 + i) * 3 + j] * x[blk(C, H, W, n, c, h, ww)];
                            }
                    int64_t k = blk(Co, Ho, Wo, n, o, ho, wo);
                    a = ref_post(g->post, g->npost, a, res[k]);
                    double e = fabs(a - y[k]);
                    worst = e > worst ? e : worst;
                    scale = fabs(a) > scale ? fabs(a) : scale;
                    num += e * e;
                    den += a * a;
                }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    /* F(4x4, 3x3) in float32: about 1e-6 relative (tests/ref/wino_ref.py) */
    CHECK(rel < 1e-5 && worst < 1e-4 * (1 + scale), "N %lld C %lld Co %lld %lldx%lld pad %lld/%lld/%lld/%lld: "
          "relative L2 error %.3g, worst %.3g (largest output %.3g)", (long long)N, (long long)C, (long long)Co,
          (long long)H, (long long)W, (long long)g->pt, (long long)g->pl, (long long)g->pb, (long long)g->pr, rel,
          worst, scale);
    free(x), free(w), free(b), free(y), free(res), free(u), free(scratch);
}

int main(void) {
    if (!ref_runs_here("Winograd kernel"))
        return SKIP;
    static const geom gs[] = {
        {2, 8, 16, 17, 19, 1, 1, 1, 1, true, 1, 1, {DPC_ACT_RELU}},
        {1, 16, 24, 15, 13, 0, 0, 0, 0, false, 2, 2, {DPC_ACT_SUM, DPC_ACT_RELU}},
        {3, 24, 8, 9, 20, 2, 1, 0, 2, true, 2, 1, {DPC_ACT_CLIP}},
        {1, 64, 40, 14, 14, 1, 1, 1, 1, true, 1, 0, {0}},
        {2, 16, 16, 12, 12, 1, 1, 1, 1, true, 2, 1, {DPC_ACT_HARDSWISH}},
        {1, 8, 16, 20, 20, 1, 1, 1, 1, true, 1, 2, {DPC_ACT_SUM, DPC_ACT_SWISH}},
        /* 2 x 24 x 24 tiles of 8 + 8 channels: three chunks of 450, 450, 252 (chunk_tiles) */
        {2, 8, 8, 96, 96, 1, 1, 1, 1, true, 2, 1, {DPC_ACT_SUM}},
        /* F(2x2, 3x3): 7x7 and 8x8 outputs, too few 4x4 tiles */
        {1, 16, 24, 7, 7, 1, 1, 1, 1, true, 1, 2, {DPC_ACT_SUM, DPC_ACT_RELU}},
        {3, 24, 16, 8, 9, 1, 0, 1, 1, false, 2, 1, {DPC_ACT_CLIP}},
        {5, 64, 64, 7, 7, 1, 1, 1, 1, true, 2, 1, {DPC_ACT_RELU}},
    };
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++)
        run_geom(&gs[i]);

    /* what it takes */
    geom base = {1, 16, 16, 13, 13, 1, 1, 1, 1, true, 1, 1, {DPC_ACT_RELU}};
    dpc_conv_desc d = desc_of(&base);
    CHECK(dpc_wino_fits(&d), "13x13 (16 tiles), 16 channels, ReLU");
    d.Co = 12;
    CHECK(!dpc_wino_fits(&d), "12 output channels");
    d = desc_of(&base);
    d.post[0].act = DPC_ACT_GELU_ERF;
    CHECK(!dpc_wino_fits(&d), "GELU");
    d = desc_of(&base);
    d.stride[0] = d.stride[1] = 2;
    d.Ho = d.Wo = 7;
    CHECK(!dpc_wino_fits(&d), "stride 2");
    base.H = base.W = 7;
    d = desc_of(&base);
    CHECK(dpc_wino_fits(&d), "7x7: F(2x2, 3x3), 16 tiles an image");
    base.H = base.W = 5;
    d = desc_of(&base);
    CHECK(!dpc_wino_fits(&d), "5x5: 9 tiles of 2x2 an image");
    d = desc_of(&base);
    d.kh = d.kw = 5;
    CHECK(!dpc_wino_fits(&d), "5x5");
    return finish("test_conv_wino");
}
