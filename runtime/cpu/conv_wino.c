/* conv_wino.c - dpc's own Winograd convolutions, F(4x4, 3x3) and
 * F(2x2, 3x3), for AVX2 (conv_wino.h). The reference they are checked
 * against, step by step in NumPy: tests/ref/wino_ref.py.
 *
 * With m x m output tiles read from a x a input blocks (a = m + 2: 6 for
 * F(4,3), 4 for F(2,3)), one call runs the tiles in chunks (chunk_tiles)
 * of three phases, each split across the threads:
 *   1. input:  every a x a input block (tile t, 8 channels cb) -> B^T d B,
 *              a^2 vectors stored as V[xi][t][c] (xi = a * row + column);
 *   2. GEMMs:  M[xi] = V[xi] . U[xi] for the a^2 xi, a [tiles x C] by
 *              [C x Co] product, in 6-tile x 16-channel register blocks;
 *   3. output: every tile's a^2 vectors M[xi][t][co..co+8] -> A^T m A,
 *              the m x m outputs, + bias, the post-ops, stored into y.
 * U (the weights, G g G^T) is laid out for phase 2: per xi, panels of 16
 * output channels (8 for the last when Co is not a multiple of 16), each
 * [C][16], so the GEMM reads it front to back. */
#include "conv_wino.h"

#include <string.h>

#include "conv_avx2.h"

/* The output tile conv d runs with: 4 (F(4x4, 3x3)) when an image has
 * DPC_WINO_MIN_TILES of them, else 2 (F(2x2, 3x3), 2.25x fewer
 * multiply-adds than direct where F(4,3) has 4x, but transformed weights
 * 1.8x the direct ones, not 4x: ResNet's 7x7 layers), else 0. */
static int tile_of(const dpc_conv_desc *d) {
    if (((d->Ho + 3) / 4) * ((d->Wo + 3) / 4) >= DPC_WINO_MIN_TILES)
        return 4;
    return ((d->Ho + 1) / 2) * ((d->Wo + 1) / 2) >= DPC_WINO_MIN_TILES ? 2 : 0;
}

bool dpc_wino_fits(const dpc_conv_desc *d) {
    if (d->kh != 3 || d->kw != 3 || d->stride[0] != 1 || d->stride[1] != 1 || d->dil[0] != 1 || d->dil[1] != 1 ||
        d->groups != 1 || d->C % 8 || d->Co % 8 || d->Ho != d->H + d->pad_l[0] + d->pad_r[0] - 2 ||
        d->Wo != d->W + d->pad_l[1] + d->pad_r[1] - 2 || d->Ho < 1 || d->Wo < 1)
        return false;
    return dpc_post8_fits(d) && tile_of(d) > 0;
}

/* The positions of a tile's transform: a^2. */
static int64_t positions(const dpc_conv_desc *d) {
    int64_t a = tile_of(d) + 2;
    return a * a;
}

size_t dpc_wino_weights_size(const dpc_conv_desc *d) { return (size_t)(positions(d) * d->C * d->Co); }

/* G, the weights' transform (a x 3), in double: U = G g G^T is computed
 * once per weights, at full precision, and rounded once. F(2,3)'s, points
 * 0, +-1, infinity: */
static const double G4[4][3] = {
    {1, 0, 0},
    {0.5, 0.5, 0.5},
    {0.5, -0.5, 0.5},
    {0, 0, 1},
};
/* F(4,3)'s, points 0, +-1, +-2, infinity: */
static const double G6[6][3] = {
    {1.0 / 4, 0, 0},
    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
    {1.0 / 24, 1.0 / 12, 1.0 / 6},
    {1.0 / 24, -1.0 / 12, 1.0 / 6},
    {0, 0, 1},
};

void dpc_wino_weights(const dpc_conv_desc *d, const float *w, float *u) {
    int64_t C = d->C, Co = d->Co;
    int a = tile_of(d) + 2;
    const double(*G)[3] = a == 6 ? G6 : G4;
    /* once per weights, at the conv's first call: split over the threads
     * (ResNet-50's 1.3 M channel pairs, about 0.2 s on one) */
    DPC_OMP("omp parallel for schedule(static)")
    for (int64_t co = 0; co < Co; co++)
        for (int64_t ci = 0; ci < C; ci++) {
            const float *g = w + (co * C + ci) * 9;
            double gt[6][3]; /* G g */
            for (int i = 0; i < a; i++)
                for (int l = 0; l < 3; l++)
                    gt[i][l] = G[i][0] * g[l] + G[i][1] * g[3 + l] + G[i][2] * g[6 + l];
            int64_t co0 = co / 16 * 16, nw = Co - co0 < 16 ? Co - co0 : 16;
            for (int i = 0; i < a; i++)
                for (int j = 0; j < a; j++) {
                    double s = gt[i][0] * G[j][0] + gt[i][1] * G[j][1] + gt[i][2] * G[j][2];
                    u[(i * a + j) * C * Co + co0 * C + ci * nw + (co - co0)] = (float)s;
                }
        }
}

/* Tiles a chunk: the chunk's V and M (a^2 x tiles x (C + Co) floats) in
 * about 1 MB, a core's L2 on the AVX2 EPYC measured (8 MB chunks ran 5-20%
 * slower at batch 8), or in the transformed weights' size when that is
 * larger (so that reading them again per chunk costs at most as much as
 * the chunk's own traffic); a multiple of 6, the GEMM's register block. */
static int64_t chunk_tiles(const dpc_conv_desc *d, int64_t N) {
    int64_t m = tile_of(d), T = N * ((d->Ho + m - 1) / m) * ((d->Wo + m - 1) / m), T6 = (T + 5) / 6 * 6;
    double p = (double)positions(d), budget = (double)(1 << 18), wsz = p * (double)d->C * (double)d->Co;
    if (wsz > budget)
        budget = wsz;
    int64_t tc = (int64_t)(budget / (p * (double)(d->C + d->Co))) / 6 * 6;
    if (tc < 6)
        tc = 6;
    return tc < T6 ? tc : T6;
}

size_t dpc_wino_scratch_size(const dpc_conv_desc *d, int64_t N) {
    return (size_t)(positions(d) * chunk_tiles(d, N) * (d->C + d->Co));
}

/* A call's geometry, and its chunk: tiles [t0, t0 + tc), whose rows in V
 * and M are rounded up to tc6. */
typedef struct geo {
    const dpc_conv_desc *d;
    int m, a;       /* output tile m x m, input block a x a (a = m + 2) */
    int64_t C, Co, H, W, Ho, Wo, pt, pl;
    int64_t th, tw; /* tiles down and across an image */
    int64_t t0, tc, tc6;
} geo;

#ifdef DPC_CONV_X86
/* B^T z for a column or row z of six vectors (Lavin's F(4,3), points 0,
 * +-1, +-2): the rows of B^T in pairs sharing their terms. */
AVX2 static inline void bt6(const __m256 z[6], __m256 r[6]) {
    __m256 four = _mm256_set1_ps(4.0f), five = _mm256_set1_ps(5.0f), two = _mm256_set1_ps(2.0f);
    __m256 a = _mm256_fnmadd_ps(four, z[2], z[4]), b = _mm256_fnmadd_ps(four, z[1], z[3]);
    __m256 c = _mm256_sub_ps(z[4], z[2]), e = _mm256_mul_ps(two, _mm256_sub_ps(z[3], z[1]));
    r[0] = _mm256_fmadd_ps(four, z[0], _mm256_fnmadd_ps(five, z[2], z[4]));
    r[1] = _mm256_add_ps(a, b);
    r[2] = _mm256_sub_ps(a, b);
    r[3] = _mm256_add_ps(c, e);
    r[4] = _mm256_sub_ps(c, e);
    r[5] = _mm256_fmadd_ps(four, z[1], _mm256_fnmadd_ps(five, z[3], z[5]));
}

/* A^T m for six vectors m: four. */
AVX2 static inline void at6(const __m256 m[6], __m256 r[4]) {
    __m256 s12 = _mm256_add_ps(m[1], m[2]), d12 = _mm256_sub_ps(m[1], m[2]);
    __m256 s34 = _mm256_add_ps(m[3], m[4]), d34 = _mm256_sub_ps(m[3], m[4]);
    r[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
    r[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), d34, d12);
    r[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), s34, s12);
    r[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), d34, d12), m[5]);
}

/* F(2,3)'s B^T z (four vectors) and A^T m (four to two). */
AVX2 static inline void bt4(const __m256 z[4], __m256 r[4]) {
    r[0] = _mm256_sub_ps(z[0], z[2]);
    r[1] = _mm256_add_ps(z[1], z[2]);
    r[2] = _mm256_sub_ps(z[2], z[1]);
    r[3] = _mm256_sub_ps(z[1], z[3]);
}

AVX2 static inline void at4(const __m256 m[4], __m256 r[2]) {
    r[0] = _mm256_add_ps(_mm256_add_ps(m[0], m[1]), m[2]);
    r[1] = _mm256_sub_ps(_mm256_sub_ps(m[1], m[2]), m[3]);
}

typedef void (*tform)(const __m256 *, __m256 *);

/* Tile t of the chunk: its image n, and its row and column of tiles. */
static inline void tile_pos(const geo *g, int64_t t, int64_t *n, int64_t *ty, int64_t *tx) {
    int64_t tg = g->t0 + t, per = g->th * g->tw;
    *n = tg / per;
    *ty = tg % per / g->tw;
    *tx = tg % per % g->tw;
}

/* Phase 1 for tile t (of the chunk), channels 8cb..8cb+8, with blocks of
 * A x A and bt their transform: inlined into in_tile6 and in_tile4 with
 * constants, so that the compiler keeps the block in registers. */
AVX2 static inline __attribute__((always_inline)) void in_tile_(const geo *g, const float *x, int64_t t, int64_t cb,
                                                               float *V, const int A, tform bt) {
    int64_t n, ty, tx;
    tile_pos(g, t, &n, &ty, &tx);
    int64_t h0 = ty * (A - 2) - g->pt, w0 = tx * (A - 2) - g->pl;
    const float *xb = x + (n * (g->C / 8) + cb) * g->H * g->W * 8;
    __m256 dt[6][6], col[6], r[6];
    bool inside = h0 >= 0 && w0 >= 0 && h0 + A <= g->H && w0 + A <= g->W;
    for (int i = 0; i < A; i++)
        for (int j = 0; j < A; j++) {
            int64_t h = h0 + i, w = w0 + j;
            dt[i][j] = inside || (h >= 0 && h < g->H && w >= 0 && w < g->W) ? _mm256_loadu_ps(xb + (h * g->W + w) * 8)
                                                                            : _mm256_setzero_ps();
        }
    for (int j = 0; j < A; j++) { /* the columns: B^T d */
        for (int i = 0; i < A; i++)
            col[i] = dt[i][j];
        bt(col, r);
        for (int i = 0; i < A; i++)
            dt[i][j] = r[i];
    }
    float *v = V + t * g->C + cb * 8;
    int64_t xs = g->tc6 * g->C;
    for (int i = 0; i < A; i++) { /* the rows: (B^T d) B */
        bt(dt[i], r);
        for (int j = 0; j < A; j++)
            _mm256_storeu_ps(v + (i * A + j) * xs, r[j]);
    }
}

AVX2 static void in_tile6(const geo *g, const float *x, int64_t t, int64_t cb, float *V) {
    in_tile_(g, x, t, cb, V, 6, bt6);
}

AVX2 static void in_tile4(const geo *g, const float *x, int64_t t, int64_t cb, float *V) {
    in_tile_(g, x, t, cb, V, 4, bt4);
}

/* Phase 3 for tile t (of the chunk), output channels 8ob..8ob+8, with
 * blocks of A x A and at their transform (to A - 2). */
AVX2 static inline __attribute__((always_inline)) void out_tile_(const geo *g, const float *M, int64_t t, int64_t ob,
                                                                const float *bias, float *y, const int A, tform at) {
    const int T = A - 2;
    int64_t n, ty, tx;
    tile_pos(g, t, &n, &ty, &tx);
    const float *m = M + t * g->Co + ob * 8;
    int64_t xs = g->tc6 * g->Co;
    __m256 q[4][6], row[6], r[4];
    for (int j = 0; j < A; j++) { /* the columns: A^T m */
        for (int i = 0; i < A; i++)
            row[i] = _mm256_loadu_ps(m + (i * A + j) * xs);
        at(row, r);
        for (int i = 0; i < T; i++)
            q[i][j] = r[i];
    }
    __m256 b = bias ? _mm256_loadu_ps(bias + ob * 8) : _mm256_setzero_ps();
    float *yb = y + (n * (g->Co / 8) + ob) * g->Ho * g->Wo * 8;
    const dpc_conv_desc *d = g->d;
    for (int i = 0; i < T; i++) { /* the rows: (A^T m) A */
        at(q[i], r);
        int64_t ho = ty * T + i;
        for (int j = 0; j < T && ho < g->Ho; j++) {
            int64_t wo = tx * T + j;
            if (wo >= g->Wo)
                break;
            float *p = yb + (ho * g->Wo + wo) * 8;
            _mm256_storeu_ps(p, dpc_post8(d, _mm256_add_ps(r[j], b), p));
        }
    }
}

AVX2 static void out_tile6(const geo *g, const float *M, int64_t t, int64_t ob, const float *bias, float *y) {
    out_tile_(g, M, t, ob, bias, y, 6, at6);
}

AVX2 static void out_tile4(const geo *g, const float *M, int64_t t, int64_t ob, const float *bias, float *y) {
    out_tile_(g, M, t, ob, bias, y, 4, at4);
}

/* c[6][16] = a[6][K] . b[K][16] (a's rows lda apart, c's ldc): twelve
 * accumulators, two loads of b and six broadcasts of a a step. */
AVX2 static void k6x16(int64_t K, const float *a, int64_t lda, const float *b, float *c, int64_t ldc) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    for (int64_t k = 0; k < K; k++) {
        __m256 b0 = _mm256_loadu_ps(b + 16 * k), b1 = _mm256_loadu_ps(b + 16 * k + 8), s;
        s = _mm256_broadcast_ss(a0 + k), c00 = _mm256_fmadd_ps(s, b0, c00), c01 = _mm256_fmadd_ps(s, b1, c01);
        s = _mm256_broadcast_ss(a1 + k), c10 = _mm256_fmadd_ps(s, b0, c10), c11 = _mm256_fmadd_ps(s, b1, c11);
        s = _mm256_broadcast_ss(a2 + k), c20 = _mm256_fmadd_ps(s, b0, c20), c21 = _mm256_fmadd_ps(s, b1, c21);
        s = _mm256_broadcast_ss(a3 + k), c30 = _mm256_fmadd_ps(s, b0, c30), c31 = _mm256_fmadd_ps(s, b1, c31);
        s = _mm256_broadcast_ss(a4 + k), c40 = _mm256_fmadd_ps(s, b0, c40), c41 = _mm256_fmadd_ps(s, b1, c41);
        s = _mm256_broadcast_ss(a5 + k), c50 = _mm256_fmadd_ps(s, b0, c50), c51 = _mm256_fmadd_ps(s, b1, c51);
    }
    _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
    _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

/* The same for the last panel of 8 channels (Co not a multiple of 16). */
AVX2 static void k6x8(int64_t K, const float *a, int64_t lda, const float *b, float *c, int64_t ldc) {
    __m256 acc[6];
    for (int r = 0; r < 6; r++)
        acc[r] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        __m256 b0 = _mm256_loadu_ps(b + 8 * k);
        for (int r = 0; r < 6; r++)
            acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r * lda + k), b0, acc[r]);
    }
    for (int r = 0; r < 6; r++)
        _mm256_storeu_ps(c + r * ldc, acc[r]);
}

/* Phase 2 for one xi and the panel of output channels from co0: every
 * 6-tile block of the chunk against it. */
AVX2 static void gemm_panel(const geo *g, const float *V, const float *U, float *M, int64_t xi, int64_t co0) {
    int64_t C = g->C, Co = g->Co, nw = Co - co0 < 16 ? Co - co0 : 16;
    const float *v = V + xi * g->tc6 * C, *u = U + xi * C * Co + co0 * C;
    float *m = M + xi * g->tc6 * Co + co0;
    for (int64_t t = 0; t < g->tc6; t += 6)
        if (nw == 16)
            k6x16(C, v + t * C, C, u, m + t * Co, Co);
        else
            k6x8(C, v + t * C, C, u, m + t * Co, Co);
}
#endif

void dpc_wino_run(const dpc_conv_desc *d, int64_t N, const float *x, const float *u, const float *bias, float *y,
                  float *scratch, int threads) {
#ifdef DPC_CONV_X86
    int m = tile_of(d);
    if (!m)
        return; /* (dpc_wino_fits said no: never called) */
    geo g = {.d = d, .m = m, .a = m + 2, .C = d->C, .Co = d->Co, .H = d->H, .W = d->W, .Ho = d->Ho, .Wo = d->Wo,
             .pt = d->pad_l[0], .pl = d->pad_l[1], .th = (d->Ho + m - 1) / m, .tw = (d->Wo + m - 1) / m};
    int64_t T = N * g.th * g.tw, chunk = chunk_tiles(d, N), P = positions(d);
    int64_t cb = g.C / 8, ob = g.Co / 8, panels = (g.Co + 15) / 16;
    if (threads < 1)
        threads = 1;
    (void)threads; /* (unused without OpenMP) */
    for (g.t0 = 0; g.t0 < T; g.t0 += chunk) {
        g.tc = T - g.t0 < chunk ? T - g.t0 : chunk;
        g.tc6 = (g.tc + 5) / 6 * 6;
        float *V = scratch, *M = scratch + P * g.tc6 * g.C;
        /* the rows past the chunk's last tile, up to the GEMM's block of 6,
         * are computed and never read: zeros, not stale floats that may be
         * slow subnormals */
        if (g.tc6 > g.tc)
            for (int64_t xi = 0; xi < P; xi++)
                memset(V + (xi * g.tc6 + g.tc) * g.C, 0, (size_t)((g.tc6 - g.tc) * g.C) * sizeof(float));
        DPC_OMP("omp parallel num_threads(threads)")
        {
            DPC_OMP("omp for schedule(static)")
            for (int64_t w = 0; w < g.tc * cb; w++)
                (m == 4 ? in_tile6 : in_tile4)(&g, x, w / cb, w % cb, V);
            DPC_OMP("omp for schedule(static)")
            for (int64_t w = 0; w < P * panels; w++)
                gemm_panel(&g, V, u, M, w / panels, w % panels * 16);
            DPC_OMP("omp for schedule(static)")
            for (int64_t w = 0; w < g.tc * ob; w++)
                (m == 4 ? out_tile6 : out_tile4)(&g, M, w / ob, w % ob, bias, y);
        }
    }
#else
    (void)d, (void)N, (void)x, (void)u, (void)bias, (void)y, (void)scratch, (void)threads;
#endif
}
