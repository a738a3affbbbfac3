/* test_conv_fc.c - dpc's kernel for convolutions of one pixel
 * (runtime/cpu/conv_fc.c) against a matrix-vector product in float64.
 *
 *     test_conv_fc
 *
 * Output channels filling whole panels of 32 (64), ending in a whole
 * vector (40), in a part one (36, 70, 1), input channels 1 to 576, odd
 * and even batches (a lone last image), bias or none, ReLU, clip,
 * hardswish, SiLU, sigmoid and a residual (added once), one and two
 * threads; each image's result the same bits at batch 1 and in a batch, on
 * one thread and on two; nothing written past the last channel; each
 * post-op on NaN and infinities (PyTorch's: relu(NaN) = NaN); and which
 * convs dpc_fc_fits takes. Built in every configuration (the sanitizer
 * ones check its memory accesses). SKIP (77) without AVX2. */
#include "../check.h"
#include "conv_ref.h"
#include "conv_avx2.h"
#include "conv_fc.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct geom {
    int64_t N, C, Co;
    bool bias;
    int threads;
    int npost;
    dpc_conv_act post[2];
} geom;

static dpc_conv_desc desc_of(const geom *g) {
    dpc_conv_desc d = {.C = g->C, .H = 1, .W = 1, .Co = g->Co, .Ho = 1, .Wo = 1, .kh = 1, .kw = 1, .groups = 1,
                       .stride = {1, 1}, .dil = {1, 1}, .bias = g->bias, .w_param = 0, .src_conv = -1, .sum_conv = -1};
    ref_set_posts(&d, g->post, g->npost);
    return d;
}

#define GUARD 8 /* floats after y that must stay untouched */
#define POISON 12345.0f

/* One geometry: the kernel's result within float32 rounding of the
 * float64 product, the same bits image by image at batch 1 and on one
 * thread. */
static void run_geom(const geom *g) {
    dpc_conv_desc d = desc_of(g);
    int64_t N = g->N, C = g->C, Co = g->Co;
    size_t nx = (size_t)(N * C), ny = (size_t)(N * Co), nw = (size_t)(Co * C);
    float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *b = malloc((size_t)Co * sizeof(float));
    float *y = malloc((ny + GUARD) * sizeof(float)), *res = malloc(ny * sizeof(float));
    float *y1 = malloc(((size_t)Co + GUARD) * sizeof(float));
    float *u = malloc(dpc_fc_weights_size(&d) * sizeof(float));
    CHECK(x && w && b && y && res && y1 && u);
    if (!(x && w && b && y && res && y1 && u))
        exit(1);
    uint64_t s = (uint64_t)(N * 131 + C * 17 + Co * 7);
    for (size_t i = 0; i < nx; i++)
        x[i] = val(&s);
    for (int64_t n = 0; n < N; n++)
        ref_put_special(x + n * C, (size_t)C, n, &s);
    for (size_t i = 0; i < nw; i++)
        w[i] = val(&s) / sqrtf((float)C);
    for (int64_t i = 0; i < Co; i++)
        b[i] = val(&s);
    for (size_t i = 0; i < ny; i++)
        res[i] = val(&s);
    memcpy(y, res, ny * sizeof(float)); /* the residual, where a post-op adds it */
    for (int i = 0; i < GUARD; i++)
        y[ny + i] = POISON;
    dpc_fc_weights(&d, w, u);
    dpc_fc_run(&d, N, x, u, g->bias ? b : NULL, y, g->threads);
    double worst = 0;
    long bad = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < Co; o++) {
            double a = g->bias ? b[o] : 0, mag = fabs(a);
            for (int64_t c = 0; c < C; c++) {
                double t = (double)w[o * C + c] * x[n * C + c];
                a += t;
                mag += fabs(t);
            }
            int64_t q = n * Co + o;
            a = ref_post(g->post, g->npost, a, res[q]);
            double e = ref_err(a, y[q], mag + fabs(res[q]), &bad);
            worst = e > worst ? e : worst;
        }
    CHECK(worst < 1e-6, "N %lld C %lld Co %lld: worst error %.3g of the terms' magnitude", (long long)N, (long long)C,
          (long long)Co, worst);
    CHECK(bad == 0, "N %lld C %lld Co %lld post %d: %ld outputs not PyTorch's NaN or infinity", (long long)N,
          (long long)C, (long long)Co, g->npost ? (int)g->post[g->npost - 1] : -1, bad);
    bool guard = true;
    for (int i = 0; i < GUARD; i++)
        guard = guard && y[ny + i] == POISON;
    CHECK(guard, "N %lld C %lld Co %lld: written past the last channel", (long long)N, (long long)C, (long long)Co);
    /* each image alone, on one thread: the same bits */
    bool same = true;
    for (int64_t n = 0; n < N; n++) {
        memcpy(y1, res + n * Co, (size_t)Co * sizeof(float));
        for (int i = 0; i < GUARD; i++)
            y1[Co + i] = POISON;
        dpc_fc_run(&d, 1, x + n * C, u, g->bias ? b : NULL, y1, 1);
        same = same && memcmp(y1, y + n * Co, (size_t)Co * sizeof(float)) == 0 && y1[Co] == POISON;
    }
    CHECK(same, "N %lld C %lld Co %lld: an image's result differs alone on one thread", (long long)N, (long long)C,
          (long long)Co);
    free(x), free(w), free(b), free(y), free(res), free(y1), free(u);
}

int main(void) {
    if (!ref_runs_here("one-pixel kernel"))
        return SKIP;
    static const geom gs[] = {
        /* MobileNet v3's largest squeeze-excitation: 576 -> 144 (four panels and a half), ReLU */
        {1, 576, 144, true, 1, 1, {DPC_ACT_RELU}},
        {5, 144, 576, true, 2, 0, {0}},
        /* whole panels, a residual */
        {2, 64, 64, true, 2, 2, {DPC_ACT_SUM, DPC_ACT_RELU}},
        /* a panel and a whole vector: 40; a part vector: 36, 70, 1 */
        {3, 36, 40, false, 1, 1, {DPC_ACT_LOGISTIC}},
        {4, 40, 36, true, 2, 1, {DPC_ACT_SWISH}},
        {1, 3, 70, true, 1, 1, {DPC_ACT_HARDSWISH}},
        {7, 40, 1, true, 2, 2, {DPC_ACT_SUM, DPC_ACT_CLIP}},
        /* one input channel; EfficientNet's 96 -> 4 */
        {2, 1, 16, true, 1, 0, {0}},
        {9, 96, 4, true, 2, 1, {DPC_ACT_SWISH}},
    };
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++)
        run_geom(&gs[i]);
    /* NaN, +inf, -inf in images 0, 1, 2 (ref_specials): each post-op */
    static const geom sp[] = {
        {4, 40, 36, true, 1, 1, {DPC_ACT_RELU}},     {4, 40, 36, true, 2, 1, {DPC_ACT_CLIP}},
        {4, 40, 36, true, 1, 1, {DPC_ACT_HARDSWISH}}, {4, 40, 36, false, 2, 1, {DPC_ACT_SWISH}},
        {4, 40, 36, true, 1, 1, {DPC_ACT_LOGISTIC}}, {4, 64, 64, true, 2, 2, {DPC_ACT_SUM, DPC_ACT_RELU}},
    };
    ref_specials = true;
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++)
        run_geom(&sp[i]);
    ref_specials = false;

    /* what it takes */
    geom base = {1, 576, 144, true, 1, 1, {DPC_ACT_RELU}};
    dpc_conv_desc d = desc_of(&base);
    CHECK(dpc_fc_fits(&d), "a squeeze-excitation's fc conv");
    d.H = d.W = 2;
    d.Ho = d.Wo = 2;
    CHECK(!dpc_fc_fits(&d), "2x2 pixels");
    d = desc_of(&base);
    d.kh = d.kw = 3;
    d.pad_l[0] = d.pad_l[1] = d.pad_r[0] = d.pad_r[1] = 1;
    CHECK(!dpc_fc_fits(&d), "a 3x3 kernel padded to one pixel");
    d = desc_of(&base);
    d.groups = 4;
    CHECK(!dpc_fc_fits(&d), "grouped");
    d = desc_of(&base);
    d.post[0].act = DPC_ACT_GELU_ERF;
    CHECK(!dpc_fc_fits(&d), "GELU");
    return finish("test_conv_fc");
}
