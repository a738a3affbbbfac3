/* conv_stem.c - dpc's direct convolution for few input channels, for AVX2
 * (conv_stem.h).
 *
 * Per image: the image is copied once into a zero-padded buffer xp of
 * C x Hp x Wp (Hp = (Ho - 1) * sh + kh rows, Wp likewise), then every
 * (panel of 16 output channels, output row) pair computes its row in
 * blocks of 6 columns: out[q][co] = sum over (c, i, j) of
 * xp[c][oh * sh + i][(ow + q) * sw + j] * u[co / 16][c][i][j][co % 16],
 * twelve accumulators (6 columns x 2 vectors of 8 channels), two weight
 * loads and six broadcasts a step. A row whose width is not a multiple of
 * 6 ends with a block that overlaps the one before; its first columns,
 * stored already, are not stored again (a residual post-op adds once). */
#include "conv_stem.h"
#include "conv_avx2.h"

#include <string.h>

bool dpc_stem_fits(const dpc_conv_desc *d) {
    return d->groups == 1 && d->C >= 1 && d->C <= DPC_STEM_MAX_C && d->Co % 16 == 0 && d->dil[0] == 1 &&
           d->dil[1] == 1 && d->Wo >= 6 && d->Ho >= 1 && d->stride[0] >= 1 && d->stride[1] >= 1 && dpc_post8_fits(d);
}

size_t dpc_stem_weights_size(const dpc_conv_desc *d) { return (size_t)(d->Co * d->C * d->kh * d->kw); }

void dpc_stem_weights(const dpc_conv_desc *d, const float *w, float *u) {
    int64_t K = d->C * d->kh * d->kw; /* (c, i, j) flattened, as in OIHW */
    for (int64_t co = 0; co < d->Co; co++)
        for (int64_t k = 0; k < K; k++)
            u[((co / 16) * K + k) * 16 + co % 16] = w[co * K + k];
}

/* The padded image's rows and columns. */
static int64_t rows_p(const dpc_conv_desc *d) { return (d->Ho - 1) * d->stride[0] + d->kh; }
static int64_t cols_p(const dpc_conv_desc *d) { return (d->Wo - 1) * d->stride[1] + d->kw; }

size_t dpc_stem_scratch_size(const dpc_conv_desc *d) { return (size_t)(d->C * rows_p(d) * cols_p(d)); }

/* Row r of the padded image (channel r / Hp) from image x. */
static void pad_row(const dpc_conv_desc *d, const float *x, float *xp, int64_t r) {
    int64_t Hp = rows_p(d), Wp = cols_p(d), c = r / Hp, ih = r % Hp - d->pad_l[0], pw = d->pad_l[1];
    float *o = xp + r * Wp;
    if (ih < 0 || ih >= d->H) {
        memset(o, 0, (size_t)Wp * sizeof(float));
        return;
    }
    int64_t n = d->W < Wp - pw ? d->W : Wp - pw; /* the input columns inside the padded row */
    if (n < 0)
        n = 0;
    int64_t lead = pw < Wp ? pw : Wp;
    memset(o, 0, (size_t)lead * sizeof(float));
    if (n > 0)
        memcpy(o + pw, x + (c * d->H + ih) * d->W, (size_t)n * sizeof(float));
    if (lead + n < Wp)
        memset(o + lead + n, 0, (size_t)(Wp - lead - n) * sizeof(float));
}

#ifdef DPC_CONV_X86
/* acc[2q + v] = the 6 columns q from x0 (the block's first input at
 * channel 0, kernel row 0) by the panel w, channels 8v..8v+7. */
AVX2 static void block6(const dpc_conv_desc *d, int64_t Hp, int64_t Wp, const float *x0, const float *w,
                        __m256 acc[12]) {
    const int64_t sw = d->stride[1], kw = d->kw;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t c = 0; c < d->C; c++)
        for (int64_t i = 0; i < d->kh; i++) {
            const float *r0 = x0 + (c * Hp + i) * Wp, *r1 = r0 + sw, *r2 = r1 + sw, *r3 = r2 + sw, *r4 = r3 + sw,
                        *r5 = r4 + sw;
            for (int64_t j = 0; j < kw; j++, w += 16) {
                __m256 b0 = _mm256_loadu_ps(w), b1 = _mm256_loadu_ps(w + 8), s;
                s = _mm256_broadcast_ss(r0 + j), c00 = _mm256_fmadd_ps(s, b0, c00), c01 = _mm256_fmadd_ps(s, b1, c01);
                s = _mm256_broadcast_ss(r1 + j), c10 = _mm256_fmadd_ps(s, b0, c10), c11 = _mm256_fmadd_ps(s, b1, c11);
                s = _mm256_broadcast_ss(r2 + j), c20 = _mm256_fmadd_ps(s, b0, c20), c21 = _mm256_fmadd_ps(s, b1, c21);
                s = _mm256_broadcast_ss(r3 + j), c30 = _mm256_fmadd_ps(s, b0, c30), c31 = _mm256_fmadd_ps(s, b1, c31);
                s = _mm256_broadcast_ss(r4 + j), c40 = _mm256_fmadd_ps(s, b0, c40), c41 = _mm256_fmadd_ps(s, b1, c41);
                s = _mm256_broadcast_ss(r5 + j), c50 = _mm256_fmadd_ps(s, b0, c50), c51 = _mm256_fmadd_ps(s, b1, c51);
            }
        }
    acc[0] = c00, acc[1] = c01, acc[2] = c10, acc[3] = c11, acc[4] = c20, acc[5] = c21;
    acc[6] = c30, acc[7] = c31, acc[8] = c40, acc[9] = c41, acc[10] = c50, acc[11] = c51;
}

/* Output row oh of image n, output channels 16cp..16cp+15, from the
 * padded image xp. */
AVX2 static void out_row(const dpc_conv_desc *d, const float *xp, const float *u, const float *bias, float *y, int64_t n,
                         int64_t cp, int64_t oh) {
    const int64_t Hp = rows_p(d), Wp = cols_p(d), Ho = d->Ho, Wo = d->Wo, sw = d->stride[1];
    const float *w = u + cp * 16 * d->C * d->kh * d->kw, *xr = xp + oh * d->stride[0] * Wp;
    __m256 b0 = bias ? _mm256_loadu_ps(bias + cp * 16) : _mm256_setzero_ps();
    __m256 b1 = bias ? _mm256_loadu_ps(bias + cp * 16 + 8) : _mm256_setzero_ps();
    float *y0 = y + ((n * (d->Co / 8) + 2 * cp) * Ho + oh) * Wo * 8, *y1 = y0 + Ho * Wo * 8;
    for (int64_t ow = 0; ow < Wo; ow += 6) {
        int64_t o0 = ow + 6 <= Wo ? ow : Wo - 6;
        __m256 acc[12];
        block6(d, Hp, Wp, xr + o0 * sw, w, acc);
        for (int64_t q = ow - o0; q < 6; q++) {
            float *p0 = y0 + (o0 + q) * 8, *p1 = y1 + (o0 + q) * 8;
            _mm256_storeu_ps(p0, dpc_post8(d, _mm256_add_ps(acc[2 * q], b0), p0));
            _mm256_storeu_ps(p1, dpc_post8(d, _mm256_add_ps(acc[2 * q + 1], b1), p1));
        }
    }
}
#endif

void dpc_stem_run(const dpc_conv_desc *d, int64_t N, const float *x, const float *u, const float *bias, float *y,
                  float *scratch, int threads) {
#ifdef DPC_CONV_X86
    int64_t rows = d->C * rows_p(d), work = d->Co / 16 * d->Ho;
    if (threads < 1)
        threads = 1;
    (void)threads; /* (unused without OpenMP) */
    for (int64_t n = 0; n < N; n++) {
        const float *xn = x + n * d->C * d->H * d->W;
        DPC_OMP("omp parallel num_threads(threads)")
        {
            DPC_OMP("omp for schedule(static)")
            for (int64_t r = 0; r < rows; r++)
                pad_row(d, xn, scratch, r);
            DPC_OMP("omp for schedule(static)")
            for (int64_t t = 0; t < work; t++)
                out_row(d, scratch, u, bias, y, n, t / d->Ho, t % d->Ho);
        }
    }
#else
    (void)d, (void)N, (void)x, (void)u, (void)bias, (void)y, (void)scratch, (void)threads;
#endif
}
