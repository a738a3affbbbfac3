/* conv_avx2.h - what dpc's own AVX2 convolution kernels share
 * (conv_wino.c, conv_stem.c): the target attribute they are compiled
 * with whatever the build's flags (they run only where dpc_wino_cpu()
 * found AVX2 and FMA), and a conv's post-ops on one vector of 8 output
 * channels. DPC_CONV_X86 is defined where the kernels are compiled
 * (x86-64, GCC or Clang); elsewhere they are stubs that never run. */
#ifndef DPC_CONV_AVX2_H
#define DPC_CONV_AVX2_H

#include "dpc_compile.h"

#include <stdbool.h>

/* Whether d's post-ops are all ones dpc_post8 computes. */
static inline bool dpc_post8_fits(const dpc_conv_desc *d) {
    for (int i = 0; i < d->npost; i++)
        if (d->post[i].act != DPC_ACT_SUM && d->post[i].act != DPC_ACT_RELU && d->post[i].act != DPC_ACT_CLIP)
            return false;
    return true;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define DPC_CONV_X86 1
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

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
        else /* DPC_ACT_CLIP */
            v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(po->alpha)), _mm256_set1_ps(po->beta));
    }
    return v;
}
#endif

#endif
