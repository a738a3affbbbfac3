/* conv_fc.c - dpc's kernel for convolutions of one pixel, for AVX2
 * (conv_fc.h).
 *
 * The work is (panel of 32 output channels, pair of images) items, panel
 * by panel: a panel's weights (32 x C floats, 72 KB at C = 576) stay in
 * the core's cache while every pair of images reads them. A pair is
 * y[n][co] = sum over c of x[n][c] * u[p][c][co % 32], four vectors of 8
 * channels for each of the two images; an odd last image computes its
 * pair with itself and stores one. Channels past Co (the padded panel's
 * tail) are computed and dropped. */
#include "conv_fc.h"
#include "conv_avx2.h"

#include <string.h>

#define FC_P 32 /* output channels a panel: four vectors */

bool dpc_fc_fits(const dpc_conv_desc *d) {
    return d->groups == 1 && d->kh == 1 && d->kw == 1 && d->H == 1 && d->W == 1 && d->Ho == 1 && d->Wo == 1 &&
           d->pad_l[0] == 0 && d->pad_l[1] == 0 && d->C >= 1 && d->Co >= 1 && dpc_post8_fits(d);
}

static int64_t panels(const dpc_conv_desc *d) { return (d->Co + FC_P - 1) / FC_P; }

size_t dpc_fc_weights_size(const dpc_conv_desc *d) { return (size_t)(panels(d) * FC_P * d->C); }

void dpc_fc_weights(const dpc_conv_desc *d, const float *w, float *u) {
    const int64_t C = d->C, Co = d->Co;
    for (int64_t p = 0; p < panels(d); p++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < FC_P; j++) {
                int64_t co = p * FC_P + j;
                u[(p * C + c) * FC_P + j] = co < Co ? w[co * C + c] : 0.0f;
            }
}

#ifdef DPC_CONV_X86
/* Channels [co, co + n) of one image's result (n <= 8) from acc: bias,
 * post-ops, stored; a part vector (the panel's tail) through t, so that
 * nothing past the last channel is read or written. */
AVX2 static void store8(const dpc_conv_desc *d, __m256 acc, const float *bias, float *y, int64_t n) {
    if (n >= 8) {
        __m256 v = bias ? _mm256_add_ps(acc, _mm256_loadu_ps(bias)) : acc;
        _mm256_storeu_ps(y, dpc_post8(d, v, y));
        return;
    }
    float t[8] = {0}, b[8] = {0};
    memcpy(t, y, (size_t)n * sizeof(float)); /* the residual, where a post-op adds it */
    if (bias)
        memcpy(b, bias, (size_t)n * sizeof(float));
    _mm256_storeu_ps(t, dpc_post8(d, _mm256_add_ps(acc, _mm256_loadu_ps(b)), t));
    memcpy(y, t, (size_t)n * sizeof(float));
}

/* Panel p for images x0 and x1 (x1 == x0 and y1 NULL for a lone image). */
AVX2 static void pair(const dpc_conv_desc *d, const float *x0, const float *x1, const float *u, const float *bias,
                      float *y0, float *y1, int64_t p) {
    const int64_t C = d->C;
    const float *w = u + p * C * FC_P;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t c = 0; c < C; c++, w += FC_P) {
        __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8), w2 = _mm256_loadu_ps(w + 16),
               w3 = _mm256_loadu_ps(w + 24);
        __m256 s = _mm256_broadcast_ss(x0 + c);
        a0 = _mm256_fmadd_ps(s, w0, a0), a1 = _mm256_fmadd_ps(s, w1, a1);
        a2 = _mm256_fmadd_ps(s, w2, a2), a3 = _mm256_fmadd_ps(s, w3, a3);
        s = _mm256_broadcast_ss(x1 + c);
        b0 = _mm256_fmadd_ps(s, w0, b0), b1 = _mm256_fmadd_ps(s, w1, b1);
        b2 = _mm256_fmadd_ps(s, w2, b2), b3 = _mm256_fmadd_ps(s, w3, b3);
    }
    const __m256 as[4] = {a0, a1, a2, a3}, bs[4] = {b0, b1, b2, b3};
    for (int v = 0; v < 4; v++) {
        int64_t co = p * FC_P + v * 8, n = d->Co - co;
        if (n <= 0)
            break;
        const float *bv = bias ? bias + co : NULL;
        store8(d, as[v], bv, y0 + co, n);
        if (y1)
            store8(d, bs[v], bv, y1 + co, n);
    }
}
#endif

void dpc_fc_run(const dpc_conv_desc *d, int64_t N, const float *x, const float *u, const float *bias, float *y,
                int threads) {
#ifdef DPC_CONV_X86
    const int64_t C = d->C, Co = d->Co, P = panels(d), pairs = (N + 1) / 2, work = P * pairs;
    if (threads < 1)
        threads = 1;
    (void)threads; /* (unused without OpenMP) */
    DPC_OMP("omp parallel for schedule(static) num_threads(threads) if (threads > 1)")
    for (int64_t t = 0; t < work; t++) {
        int64_t p = t / pairs, n = t % pairs * 2;
        bool two = n + 1 < N;
        pair(d, x + n * C, x + (two ? n + 1 : n) * C, u, bias, y + n * Co, two ? y + (n + 1) * Co : NULL, p);
    }
#else
    (void)d, (void)N, (void)x, (void)u, (void)bias, (void)y, (void)threads;
#endif
}
