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

/* e^x on 8 lanes: compiler/kmath.h's dpc_expf (1.5 ulp, its error bound
 * and tests: test_kmath), step for step in AVX2, so that a post-op here
 * computes what the generated C computes for the same op. */
AVX2 static inline __m256 dpc_pow2_8(__m256 n) {
    __m256i u = _mm256_castps_si256(_mm256_add_ps(n, _mm256_set1_ps(12582912.0f)));
    u = _mm256_add_epi32(_mm256_sub_epi32(u, _mm256_set1_epi32(0x4B400000)), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 23));
}
AVX2 static inline __m256 dpc_exp8(__m256 x) {
    const __m256 k = _mm256_set1_ps(12582912.0f);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
    __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), k), k);
    __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693145751953125f))),
                             _mm256_mul_ps(n, _mm256_set1_ps(1.42860677e-06f)));
    __m256 p = _mm256_set1_ps(0.00138146128f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.00836871006f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.041668389f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.166665211f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.49999994f));
    p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r), _mm256_set1_ps(1.0f));
    __m256 h = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)), k), k);
    return _mm256_mul_ps(_mm256_mul_ps(p, dpc_pow2_8(h)), dpc_pow2_8(_mm256_sub_ps(n, h)));
}

/* v (the conv's value plus bias, 8 channels) through d's post-ops, in
 * order; a residual (sum) adds what the result p holds when called, as
 * oneDNN's post-op does. The kernels take only these (their _fits). */
AVX2 static inline __m256 dpc_post8(const dpc_conv_desc *d, __m256 v, const float *p) {
    for (int k = 0; k < d->npost; k++) {
        const dpc_conv_post *po = &d->post[k];
        if (po->act == DPC_ACT_SUM)
            v = _mm256_add_ps(v, _mm256_loadu_ps(p));
        else if (po->act == DPC_ACT_RELU)
            v = _mm256_max_ps(v, _mm256_setzero_ps());
        else if (po->act == DPC_ACT_CLIP)
            v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(po->alpha)), _mm256_set1_ps(po->beta));
        else if (po->act == DPC_ACT_HARDSWISH) { /* x * min(max(x + 3, 0), 6) / 6, PyTorch's order */
            __m256 r = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, _mm256_set1_ps(3.0f)), _mm256_setzero_ps()),
                                     _mm256_set1_ps(6.0f));
            v = _mm256_div_ps(_mm256_mul_ps(v, r), _mm256_set1_ps(6.0f));
        } else { /* SiLU x / (1 + e^-x), sigmoid 1 / (1 + e^-x): ir.h's C expressions */
            __m256 den = _mm256_add_ps(_mm256_set1_ps(1.0f), dpc_exp8(_mm256_sub_ps(_mm256_setzero_ps(), v)));
            v = _mm256_div_ps(po->act == DPC_ACT_SWISH ? v : _mm256_set1_ps(1.0f), den);
        }
    }
    return v;
}
#endif

#endif
