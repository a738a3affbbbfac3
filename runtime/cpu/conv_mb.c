/* conv_mb.c - dpc's kernel for a 1x1 conv and the depthwise conv after
 * it, as one, for AVX2 (conv_mb.h).
 *
 * An item is (image n, panel p of 16 expanded channels). Its ring holds
 * `slots` rows of the 1x1's result for the panel (kh, or all of a small
 * image's: slots_of), row r in slot r % slots, each Wr columns of 16
 * floats: column pl + w is pixel w (pl the depthwise conv's left
 * padding), the columns before and after stay zero, as does one more row
 * (slot `slots`) that stands for the rows above and below the image.
 * Output row oh reads rows oh * sh - pt + i (i < kh): the ones not yet in
 * the ring are computed first, in order, so a row is computed once and
 * the kh rows a depthwise row reads are always among the last computed.
 * The 1x1 runs over a span of pixels (row-major, so its blocks of 6 may
 * cross rows), each pixel stored to its row's slot. */
#include "conv_mb.h"
#include "conv_avx2.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define MB_P 16 /* expanded channels a panel: two vectors */

bool dpc_mb_fits(const dpc_conv_desc *a, const dpc_conv_desc *b) {
    bool one = a->groups == 1 && a->kh == 1 && a->kw == 1 && a->stride[0] == 1 && a->stride[1] == 1 &&
               a->pad_l[0] == 0 && a->pad_l[1] == 0 && a->pad_r[0] == 0 && a->pad_r[1] == 0 && a->Ho == a->H &&
               a->Wo == a->W && a->C % 8 == 0 && a->C >= 8 && a->Co % 8 == 0 && a->Co >= 8 && a->W >= 1;
    bool dw = b->groups == b->C && b->C == a->Co && b->Co == b->C && b->H == a->Ho && b->W == a->Wo &&
              b->dil[0] == 1 && b->dil[1] == 1 && b->kh >= 1 && b->kw >= 1 && b->kh <= DPC_MB_MAX_K &&
              b->kw <= DPC_MB_MAX_K && b->stride[0] >= 1 &&
              b->stride[1] >= 1 && b->pad_l[0] >= 0 && b->pad_l[1] >= 0 && b->pad_l[0] < b->kh &&
              b->pad_l[1] < b->kw && b->Ho >= 1 && b->Wo >= 1;
    return one && dw && dpc_post8_fits(a) && dpc_post8_fits(b) && !dpc_post_has(a, DPC_ACT_SUM) &&
           !dpc_post_has(b, DPC_ACT_SUM);
}

static int64_t panels(int64_t Co) { return (Co + MB_P - 1) / MB_P; }

size_t dpc_mb_1x1_size(const dpc_conv_desc *a) { return (size_t)(panels(a->Co) * a->C * MB_P); }

void dpc_mb_1x1_weights(const dpc_conv_desc *a, const float *w, float *u) {
    for (int64_t p = 0; p < panels(a->Co); p++)
        for (int64_t c = 0; c < a->C; c++)
            for (int64_t j = 0; j < MB_P; j++) {
                int64_t co = p * MB_P + j;
                u[(p * a->C + c) * MB_P + j] = co < a->Co ? w[co * a->C + c] : 0.0f;
            }
}

size_t dpc_mb_dw_size(const dpc_conv_desc *b) { return (size_t)(panels(b->Co) * b->kh * b->kw * MB_P); }

void dpc_mb_dw_weights(const dpc_conv_desc *b, const float *w, float *u) {
    int64_t K = b->kh * b->kw;
    for (int64_t p = 0; p < panels(b->Co); p++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < MB_P; j++) {
                int64_t co = p * MB_P + j;
                u[(p * K + k) * MB_P + j] = co < b->Co ? w[co * K + k] : 0.0f;
            }
}

/* The ring's columns: every one the depthwise conv reads, and the image's. */
static int64_t ring_cols(const dpc_conv_desc *b) {
    int64_t read = (b->Wo - 1) * b->stride[1] + b->kw, held = b->pad_l[1] + b->W;
    return read > held ? read : held;
}

/* The ring's row slots: kh, or every row of a small image, whose 1x1 then
 * runs over the whole image at once in blocks of 6 pixels that span rows
 * (a row of 7 or 14 pixels in blocks of 6 spends a block of 1 or 2 on its
 * end, at the cost of most of a whole one); one more row of zeros. */
#define MB_WHOLE_PIXELS 1024
static int64_t slots_of(const dpc_conv_desc *b) {
    return b->H * b->W <= MB_WHOLE_PIXELS && b->H > b->kh ? b->H : b->kh;
}

static size_t ring_size(const dpc_conv_desc *b) { return (size_t)((slots_of(b) + 1) * ring_cols(b) * MB_P); }

size_t dpc_mb_scratch_size(const dpc_conv_desc *b, int threads) { return ring_size(b) * (size_t)(threads < 1 ? 1 : threads); }

#ifdef DPC_CONV_X86
#define UNROLL6 _Pragma("GCC unroll 6") /* (the accumulators then stay in registers) */
#define UNROLL5 _Pragma("GCC unroll 5")

/* A conv's post-ops where they are one ReLU or clip: a clamp to [lo, hi]
 * applied to each vector as the kernel stores it (two instructions), not
 * a pass over the finished rows after (dpc_post_rows: 7% of MobileNet
 * v2's pairs' time). Any other post-ops (on false) are post_rows'. */
typedef struct clamp8 {
    bool on;
    __m256 lo, hi;
} clamp8;

AVX2 static clamp8 clamp_of(const dpc_conv_desc *d) {
    clamp8 c = {false, _mm256_setzero_ps(), _mm256_setzero_ps()};
    if (d->npost == 1 && d->post[0].act == DPC_ACT_RELU)
        c = (clamp8){true, _mm256_setzero_ps(), _mm256_set1_ps(INFINITY)};
    else if (d->npost == 1 && d->post[0].act == DPC_ACT_CLIP)
        c = (clamp8){true, _mm256_set1_ps(d->post[0].alpha), _mm256_set1_ps(d->post[0].beta)};
    return c;
}

/* v through c (dpc_clip8's order: max, then min, v the second operand so
 * that NaN stays NaN). */
AVX2 static inline __m256 clamp(clamp8 c, __m256 v) {
    return c.on ? _mm256_min_ps(c.hi, _mm256_max_ps(c.lo, v)) : v;
}

/* The post-ops of d over the n floats at y, unless the kernel applied
 * them as a clamp while storing. */
AVX2 static void post_rows(const dpc_conv_desc *d, clamp8 c, float *y, int64_t n) {
    if (!c.on)
        dpc_post_rows(d, y, n);
}

/* nq pixels (a constant where called: the loops unroll, the accumulators
 * stay in registers), consecutive in x from xp (each channel block's
 * plane `plane` floats on): 16 channels each, bias added, pixel q stored
 * at t[q]. */
AVX2 static inline __attribute__((always_inline)) void pixels_1x1(const dpc_conv_desc *a, const float *xp,
                                                                 int64_t plane, const float *wp, __m256 b0,
                                                                 __m256 b1, clamp8 cl, float *const *t,
                                                                 const int nq) {
    __m256 c0[6], c1[6];
    UNROLL6
    for (int q = 0; q < nq; q++)
        c0[q] = _mm256_setzero_ps(), c1[q] = _mm256_setzero_ps();
    for (int64_t cb = 0; cb < a->C / 8; cb++, xp += plane) {
        for (int k = 0; k < 8; k++, wp += MB_P) {
            __m256 w0 = _mm256_loadu_ps(wp), w1 = _mm256_loadu_ps(wp + 8);
            UNROLL6
            for (int q = 0; q < nq; q++) {
                __m256 s = _mm256_broadcast_ss(xp + 8 * q + k);
                c0[q] = _mm256_fmadd_ps(s, w0, c0[q]), c1[q] = _mm256_fmadd_ps(s, w1, c1[q]);
            }
        }
    }
    UNROLL6
    for (int q = 0; q < nq; q++) {
        _mm256_storeu_ps(t[q], clamp(cl, _mm256_add_ps(c0[q], b0)));
        _mm256_storeu_ps(t[q] + 8, clamp(cl, _mm256_add_ps(c1[q], b1))); /* (a half panel's zeros: its weights and bias are) */
    }
}

/* Pixels [i0, i1) of image x (h * W + w) through the 1x1 for panel p
 * into the ring, pixel (h, w) at row slot h % slots, column pl + w:
 * blocks of 6, the rest in blocks of 4, 2 and 1. The post-ops are the
 * caller's (over whole rows) unless they are the clamp cl. */
AVX2 static void span_1x1(const dpc_conv_desc *a, const float *x, const float *ua, const float *bias, clamp8 cl,
                          float *ring, int64_t slots, int64_t rowf, int64_t pl, int64_t p, int nv, int64_t i0,
                          int64_t i1) {
    const float *wp = ua + p * a->C * MB_P;
    const int64_t W = a->W, plane = a->H * W * 8;
    __m256 b0 = _mm256_setzero_ps(), b1 = b0;
    if (bias) {
        b0 = _mm256_loadu_ps(bias + p * MB_P);
        if (nv > 1)
            b1 = _mm256_loadu_ps(bias + p * MB_P + 8);
    }
    float *t[6];
    int64_t h = i0 / W, w = i0 % W; /* the next pixel's (no division a pixel: it cost as much as C = 16's FMAs) */
    float *row = ring + (h % slots) * rowf + pl * MB_P;
    for (int64_t i = i0; i < i1;) {
        int nq = i1 - i >= 6 ? 6 : i1 - i >= 4 ? 4 : i1 - i >= 2 ? 2 : 1;
        for (int q = 0; q < nq; q++) {
            t[q] = row + w * MB_P;
            if (++w == W) {
                w = 0;
                h++;
                row = ring + (h % slots) * rowf + pl * MB_P;
            }
        }
        const float *xp = x + i * 8;
        if (nq == 6)
            pixels_1x1(a, xp, plane, wp, b0, b1, cl, t, 6);
        else if (nq == 4)
            pixels_1x1(a, xp, plane, wp, b0, b1, cl, t, 4);
        else if (nq == 2)
            pixels_1x1(a, xp, plane, wp, b0, b1, cl, t, 2);
        else
            pixels_1x1(a, xp, plane, wp, b0, b1, cl, t, 1);
        i += nq;
    }
}

/* 4 output pixels of one vector into o, from the ring rows rows[0..kh)
 * at offset off (the block's first input column and the vector): kh, kw
 * and sw constants where called for the usual kernels, so the loops
 * unroll and an input column the kernel's taps share is loaded once. */
AVX2 static inline __attribute__((always_inline)) void dw4(const float *const *rows, int64_t off, const float *wv,
                                                          __m256 bv, clamp8 cl, float *o, const int64_t kh,
                                                          const int64_t kw, const int64_t sw) {
    __m256 a0 = bv, a1 = bv, a2 = bv, a3 = bv;
    UNROLL5
    for (int64_t i = 0; i < kh; i++) {
        const float *r = rows[i] + off;
        UNROLL5
        for (int64_t j = 0; j < kw; j++) {
            __m256 w = _mm256_loadu_ps(wv + (i * kw + j) * MB_P);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r + j * MB_P), w, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r + (sw + j) * MB_P), w, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(r + (2 * sw + j) * MB_P), w, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(r + (3 * sw + j) * MB_P), w, a3);
        }
    }
    _mm256_storeu_ps(o, clamp(cl, a0));
    _mm256_storeu_ps(o + 8, clamp(cl, a1));
    _mm256_storeu_ps(o + 16, clamp(cl, a2));
    _mm256_storeu_ps(o + 24, clamp(cl, a3));
}

/* Output row oh of vector v of panel p from the ring rows rows[0..kh),
 * into yv (that vector's nChw8c plane of the image), then the post-ops
 * over the row. */
AVX2 static void row_dw(const dpc_conv_desc *b, clamp8 cl, const float *const *rows, const float *ub, const float *bias,
                        float *yv, int64_t p, int v, int64_t oh) {
    const int64_t kh = b->kh, kw = b->kw, sw = b->stride[1], Wo = b->Wo;
    const float *wv = ub + p * kh * kw * MB_P + v * 8;
    __m256 bv = bias ? _mm256_loadu_ps(bias + p * MB_P + v * 8) : _mm256_setzero_ps();
    float *yr = yv + oh * Wo * 8;
    const bool k3 = kh == 3 && kw == 3, k5 = kh == 5 && kw == 5;
    int64_t ow = 0;
    for (; ow + 4 <= Wo; ow += 4) {
        float *o = yr + ow * 8;
        int64_t off = ow * sw * MB_P + v * 8;
        if (k3 && sw == 1)
            dw4(rows, off, wv, bv, cl, o, 3, 3, 1);
        else if (k3 && sw == 2)
            dw4(rows, off, wv, bv, cl, o, 3, 3, 2);
        else if (k5 && sw == 1)
            dw4(rows, off, wv, bv, cl, o, 5, 5, 1);
        else if (k5 && sw == 2)
            dw4(rows, off, wv, bv, cl, o, 5, 5, 2);
        else
            dw4(rows, off, wv, bv, cl, o, kh, kw, sw);
    }
    for (; ow < Wo; ow++) {
        __m256 a0 = bv;
        for (int64_t i = 0; i < kh; i++) {
            const float *r = rows[i] + ow * sw * MB_P + v * 8;
            for (int64_t j = 0; j < kw; j++, r += MB_P)
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r), _mm256_loadu_ps(wv + (i * kw + j) * MB_P), a0);
        }
        _mm256_storeu_ps(yr + ow * 8, clamp(cl, a0));
    }
    post_rows(b, cl, yr, Wo * 8);
}

/* Zeroes what of the ring the 1x1 never writes and the depthwise conv
 * reads: each slot's columns left and right of the image, and the zero
 * row. Per item, not the whole ring (up to 55 KB for a 28x28 image held
 * whole), and not once per call: the scratch is shared with dpc's other
 * kernels, and the rows' insides are always written before they are
 * read (item's order). */
static void zero_borders(float *ring, int64_t slots, int64_t Wr, int64_t pl, int64_t W) {
    const int64_t rowf = Wr * MB_P, right = Wr - pl - W;
    for (int64_t s = 0; s < slots; s++) {
        memset(ring + s * rowf, 0, (size_t)(pl * MB_P) * sizeof(float));
        memset(ring + s * rowf + (pl + W) * MB_P, 0, (size_t)(right * MB_P) * sizeof(float));
    }
    memset(ring + slots * rowf, 0, (size_t)rowf * sizeof(float));
}

/* Item (image n, panel p) in ring. */
AVX2 static void item(const dpc_conv_desc *a, const dpc_conv_desc *b, const float *x, const float *ua,
                      const float *bias_a, const float *ub, const float *bias_b, float *y, float *ring, int64_t n,
                      int64_t p) {
    const int64_t kh = b->kh, Wr = ring_cols(b), H = b->H, W = b->W, sh = b->stride[0], pt = b->pad_l[0];
    const int64_t pl = b->pad_l[1], rowf = Wr * MB_P, Cb = a->Co / 8, slots = slots_of(b);
    const int nv = a->Co - p * MB_P >= MB_P ? 2 : 1;
    const clamp8 ca = clamp_of(a), cb = clamp_of(b);
    zero_borders(ring, slots, Wr, pl, W);
    const float *zero = ring + slots * rowf, *xn = x + n * a->C * H * W;
    float *yn = y + n * Cb * b->Ho * b->Wo * 8;
    int64_t next = 0; /* the next row of the 1x1's result to compute */
    for (int64_t oh = 0; oh < b->Ho; oh++) {
        int64_t top = oh * sh - pt, last = top + kh - 1 < H - 1 ? top + kh - 1 : H - 1;
        if (slots == H)
            last = H - 1; /* (all at once) */
        if (next <= last) {
            span_1x1(a, xn, ua, bias_a, ca, ring, slots, rowf, pl, p, nv, next * W, (last + 1) * W);
            for (; next <= last; next++)
                post_rows(a, ca, ring + (next % slots) * rowf + pl * MB_P, W * MB_P);
        }
        const float *rows[DPC_MB_MAX_K];
        for (int64_t i = 0; i < kh; i++) {
            int64_t r = top + i;
            rows[i] = r >= 0 && r < H ? ring + (r % slots) * rowf : zero;
        }
        for (int v = 0; v < nv; v++)
            row_dw(b, cb, rows, ub, bias_b, yn + (p * 2 + v) * b->Ho * b->Wo * 8, p, v, oh);
    }
}
#endif

void dpc_mb_run(const dpc_conv_desc *a, const dpc_conv_desc *b, int64_t N, const float *x, const float *ua,
                const float *bias_a, const float *ub, const float *bias_b, float *y, float *scratch, int threads) {
#ifdef DPC_CONV_X86
    const int64_t P = panels(a->Co), work = N * P;
    const size_t ring = ring_size(b);
    if (threads < 1)
        threads = 1;
    (void)threads, (void)ring; /* (unused without OpenMP) */
    DPC_OMP("omp parallel for schedule(static) num_threads(threads) if (threads > 1)")
    for (int64_t t = 0; t < work; t++) {
#ifdef _OPENMP
        float *mine = scratch + (size_t)omp_get_thread_num() * ring;
#else
        float *mine = scratch;
#endif
        item(a, b, x, ua, bias_a, ub, bias_b, y, mine, t / P, t % P);
    }
#else
    (void)a, (void)b, (void)N, (void)x, (void)ua, (void)bias_a, (void)ub, (void)bias_b, (void)y, (void)scratch,
        (void)threads;
#endif
}
