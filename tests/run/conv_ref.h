/* conv_ref.h - what the tests of dpc's own conv kernels share
 * (test_conv_wino.c, test_conv_stem.c, test_conv_fc.c): whether they run
 * here, deterministic values, and the post-ops in float64 as the reference
 * applies them. Clip is always to [0, 0.75]. */
#ifndef DPC_TEST_CONV_REF_H
#define DPC_TEST_CONV_REF_H

#include "conv_avx2.h"
#include "dpc_compile.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define REF_CLIP_HI 0.75

/* Whether this CPU runs dpc's kernel `what` (AVX2 and FMA); says so when
 * not (the test then skips). */
static bool ref_runs_here(const char *what) {
    if (dpc_avx2_cpu())
        return true;
    printf("no AVX2 + FMA here: dpc's %s does not run\n", what);
    return false;
}

/* A value in [-1, 1) from a counter (no libc rand: the same on every machine). */
static float val(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(*s >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}

/* d's post-ops: acts[0..n), clip to [0, REF_CLIP_HI]. */
static void ref_set_posts(dpc_conv_desc *d, const dpc_conv_act *acts, int n) {
    d->npost = n;
    for (int i = 0; i < n; i++)
        d->post[i] = (dpc_conv_post){.act = acts[i], .alpha = 0.0f, .beta = (float)REF_CLIP_HI};
}

/* a (the conv's value plus bias) through the post-ops acts[0..n), res the
 * residual a DPC_ACT_SUM adds; NaN stays NaN, as PyTorch's. */
static double ref_post(const dpc_conv_act *acts, int n, double a, double res) {
    for (int p = 0; p < n; p++)
        a = acts[p] == DPC_ACT_SUM         ? a + res
            : acts[p] == DPC_ACT_RELU      ? (a < 0 ? 0 : a)
            : acts[p] == DPC_ACT_HARDSWISH ? a * (a + 3 < 0 ? 0 : a + 3 > 6 ? 6 : a + 3) / 6
            : acts[p] == DPC_ACT_SWISH     ? a / (1 + exp(-a))
            : acts[p] == DPC_ACT_LOGISTIC  ? 1 / (1 + exp(-a))
                                           : (a < 0 ? 0 : a > REF_CLIP_HI ? REF_CLIP_HI : a);
    return a;
}

/* With ref_specials set, the tests put NaN, +inf or -inf into one element
 * of image n's input (kind n % 4; 3: none), where it reaches a whole
 * receptive field: the post-ops must give what PyTorch gives (relu(NaN) =
 * NaN, clip(inf) = its upper bound, silu(-inf) = NaN, sigmoid(-inf) = 0). */
static bool ref_specials;
static inline void ref_put_special(float *img, size_t size, int64_t n, uint64_t *s) {
    static const float kinds[3] = {NAN, INFINITY, -INFINITY};
    if (ref_specials && n % 4 < 3 && size > 0)
        img[(size_t)((val(s) + 1.0f) * 0.5f * (float)size) % size] = kinds[n % 4];
}

/* The error of y against the float64 result a, relative to the terms'
 * magnitude mag; where any of the three is not finite (a special reached
 * it), y must be a exactly (NaN for NaN), else it counts in *bad. */
static inline double ref_err(double a, float y, double mag, long *bad) {
    if (isfinite(a) && isfinite(y) && isfinite(mag))
        return fabs(a - y) / (mag + 1e-30);
    *bad += !((isnan(a) && isnan(y)) || a == (double)y);
    return 0;
}

#endif
