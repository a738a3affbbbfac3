/* conv_avx2.h - what dpc's own AVX2 convolution kernels share
 * (conv_wino.c, conv_stem.c, conv_fc.c): the probe for the CPU they need,
 * the target attribute they are compiled with whatever the build's flags
 * (they run only where dpc_avx2_cpu() found AVX2 and FMA), their OpenMP
 * pragma, and a conv's post-ops on one vector of 8 output channels.
 * DPC_CONV_X86 is defined where the kernels are compiled (x86-64, GCC or
 * Clang); elsewhere they are stubs that never run. */
#ifndef DPC_CONV_AVX2_H
#define DPC_CONV_AVX2_H

#include "dpc_compile.h"

#include <stdbool.h>

/* Whether one of d's post-ops is act. */
static inline bool dpc_post_has(const dpc_conv_desc *d, dpc_conv_act act) {
    for (int i = 0; i < d->npost; i++)
        if (d->post[i].act == act)
            return true;
    return false;
}

/* Whether d's post-ops are all ones dpc_post8 computes (not tanh and
 * the GELUs). */
static inline bool dpc_post8_fits(const dpc_conv_desc *d) {
    for (int i = 0; i < d->npost; i++)
        if (d->post[i].act != DPC_ACT_SUM && d->post[i].act != DPC_ACT_RELU && d->post[i].act != DPC_ACT_CLIP &&
            d->post[i].act != DPC_ACT_HARDSWISH && d->post[i].act != DPC_ACT_SWISH &&
            d->post[i].act != DPC_ACT_LOGISTIC)
            return false;
    return true;
}

/* An OpenMP pragma where the build has OpenMP (the kernels split their
 * work over the threads they are given), else nothing. */
#ifdef _OPENMP
#define DPC_OMP(x) _Pragma(x)
#else
#define DPC_OMP(x)
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define DPC_CONV_X86 1
#include <immintrin.h>
#endif

/* Whether this CPU runs the kernels (AVX2 and FMA, probed at run time). */
static inline bool dpc_avx2_cpu(void) {
#ifdef DPC_CONV_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

#ifdef DPC_CONV_X86

#define AVX2 __attribute__((target("avx2,fma")))

/* e^x on 8 lanes, for the SiLU and sigmoid post-ops: compiler/kmath.h's
 * range reduction and polynomial (e^x = 2^n e^r, |r| <= ln2 / 2, the
 * same coefficients), but with fused multiply-adds and the polynomial in
 * Estrin's order, not Horner's: its chain of dependent operations is
 * about half as long (dpc_expf's, step for step, ran at ~18 cycles a
 * vector, bound by that chain's latency, and made SiLU the largest part
 * of EfficientNet's early convs). Within 2 ulp of e^x, not the generated
 * C's bits (test_kmath bounds dpc_expf at 1.5; the kernels' tests check
 * the post-ops against float64). x is clamped to [-87, 88.72], where 2^n
 * is a normal float, or 2^128 = +inf from x = 88.38 on: e^x is +inf there
 * (a little early: sigmoid and silu of x < -88.38 are 0 and -0, not 4e-39
 * and 3e-37) and for +inf, as PyTorch's: sigmoid(-inf) = 0, silu(-inf) =
 * -inf / inf = NaN. NaN passes the clamp (max and min return their second
 * operand when one is NaN) and gives NaN. */
AVX2 static inline __m256 dpc_exp8(__m256 x) {
    const __m256 magic = _mm256_set1_ps(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    x = _mm256_min_ps(_mm256_set1_ps(88.72f), _mm256_max_ps(_mm256_set1_ps(-87.0f), x));
    __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504f), magic), n = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-06f), r);
    __m256 r2 = _mm256_mul_ps(r, r);
    __m256 p01 = _mm256_fmadd_ps(_mm256_set1_ps(0.166665211f), r, _mm256_set1_ps(0.49999994f));
    __m256 p23 = _mm256_fmadd_ps(_mm256_set1_ps(0.00836871006f), r, _mm256_set1_ps(0.041668389f));
    __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0.00138146128f), r2, p23), r2, p01);
    p = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0f)); /* 1 + (r + r^2 p) */
    __m256i e = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000)); /* n */
    e = _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23); /* n = 128: inf's bits */
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* The post-ops on 8 lanes (ir.h's C expressions; hardswish in PyTorch's
 * order, x * min(max(x + 3, 0), 6) / 6). v is the second operand of max
 * and min: they return it when either is NaN, so NaN stays NaN (relu(NaN)
 * = NaN, as PyTorch; max(v, 0) gave 0) and -0 stays -0. */
AVX2 static inline __m256 dpc_relu8(__m256 v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }
AVX2 static inline __m256 dpc_clip8(__m256 v, float lo, float hi) {
    return _mm256_min_ps(_mm256_set1_ps(hi), _mm256_max_ps(_mm256_set1_ps(lo), v));
}
AVX2 static inline __m256 dpc_hardswish8(__m256 v) {
    __m256 r = _mm256_min_ps(_mm256_set1_ps(6.0f),
                             _mm256_max_ps(_mm256_setzero_ps(), _mm256_add_ps(v, _mm256_set1_ps(3.0f))));
    return _mm256_div_ps(_mm256_mul_ps(v, r), _mm256_set1_ps(6.0f));
}
AVX2 static inline __m256 dpc_sigmoid_den8(__m256 v) { /* 1 + e^-x */
    return _mm256_add_ps(_mm256_set1_ps(1.0f), dpc_exp8(_mm256_sub_ps(_mm256_setzero_ps(), v)));
}
AVX2 static inline __m256 dpc_silu8(__m256 v) { return _mm256_div_ps(v, dpc_sigmoid_den8(v)); }
AVX2 static inline __m256 dpc_sigmoid8(__m256 v) { return _mm256_div_ps(_mm256_set1_ps(1.0f), dpc_sigmoid_den8(v)); }

/* v (the conv's value plus bias, 8 channels) through d's post-ops, in
 * order; a residual (sum) adds what the result p holds when called, as
 * oneDNN's post-op does. The kernels take only these (their _fits). */
AVX2 static inline __m256 dpc_post8(const dpc_conv_desc *d, __m256 v, const float *p) {
    for (int k = 0; k < d->npost; k++) {
        const dpc_conv_post *po = &d->post[k];
        switch (po->act) {
        case DPC_ACT_SUM: v = _mm256_add_ps(v, _mm256_loadu_ps(p)); break;
        case DPC_ACT_RELU: v = dpc_relu8(v); break;
        case DPC_ACT_CLIP: v = dpc_clip8(v, po->alpha, po->beta); break;
        case DPC_ACT_HARDSWISH: v = dpc_hardswish8(v); break;
        case DPC_ACT_SWISH: v = dpc_silu8(v); break;
        default: v = dpc_sigmoid8(v); break;
        }
    }
    return v;
}

/* The n floats at y (n a multiple of 8) through d's post-ops in place, d
 * without a residual: a loop per post-op, so that the compiler keeps its
 * constants in registers and nothing is decided per vector. SiLU ran at
 * 3.2 ns a vector so, 4.6 through dpc_post8 once a vector (its exp's
 * constants reloaded, its branches in the chain). */
AVX2 static inline void dpc_post_rows(const dpc_conv_desc *d, float *y, int64_t n) {
#define DPC_ROWS(expr) /* expr of the vector v, over the n floats */                                              \
    for (int64_t i = 0; i < n; i += 8) {                                                                               \
        __m256 v = _mm256_loadu_ps(y + i);                                                                             \
        _mm256_storeu_ps(y + i, expr);                                                                                 \
    }                                                                                                                  \
    break
    for (int k = 0; k < d->npost; k++) {
        const dpc_conv_post *po = &d->post[k];
        const float lo = po->alpha, hi = po->beta;
        switch (po->act) {
        case DPC_ACT_RELU: DPC_ROWS(dpc_relu8(v));
        case DPC_ACT_CLIP: DPC_ROWS(dpc_clip8(v, lo, hi));
        case DPC_ACT_HARDSWISH: DPC_ROWS(dpc_hardswish8(v));
        case DPC_ACT_SWISH: DPC_ROWS(dpc_silu8(v));
        case DPC_ACT_LOGISTIC: DPC_ROWS(dpc_sigmoid8(v));
        default: break; /* (no residual here: the callers' _fits) */
        }
    }
#undef DPC_ROWS
}
#endif

#endif
