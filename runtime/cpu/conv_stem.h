/* conv_stem.h - dpc's direct convolution for few input channels (a
 * network's stem: AlexNet's 11x11 stride-4 conv on the RGB image), for
 * CPUs with AVX2 and FMA, its result in oneDNN's nChw8c.
 *
 * oneDNN 2.6's direct AVX2 kernel takes convs of 3 input channels for
 * some geometries (ResNet's 7x7 stride-2 stem, at 90%+ of the core's
 * peak) but not AlexNet's: that one runs as gemm:jit, an im2col and a
 * GEMM, at under half the peak. This kernel computes it as an implicit
 * GEMM: per output row and 16 output channels, 6 output columns at a time
 * in twelve accumulators, each step two weight vectors and six broadcast
 * inputs, over C x kh x kw steps, from a zero-padded copy of the image (so
 * the loop has no bounds test). Each output is the same sum, in the same
 * order, whatever the batch or the threads.
 *
 * conv_dnnl.c runs a conv here in place of its oneDNN primitive where the
 * primitive oneDNN offers is a gemm one and dpc_stem_fits says yes
 * (DPC_CONV_STEM=0: never). Compiled in every build; tests/run/
 * test_conv_stem.c checks it against a float64 direct conv. */
#ifndef DPC_CONV_STEM_H
#define DPC_CONV_STEM_H

#include "dpc_compile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether conv d runs here: not grouped, at most DPC_STEM_MAX_C input
 * channels, output channels a multiple of 16, no dilation, 6 or more
 * output columns, post-ops among the residual, ReLU, clip, hardswish, SiLU and sigmoid. */
#define DPC_STEM_MAX_C 4
bool dpc_stem_fits(const dpc_conv_desc *d);

/* The rearranged weights' size in floats (Co x C x kh x kw) and the
 * rearrangement of the OIHW weights w into u, panels of 16 output
 * channels: u[co / 16][c][i][j][co % 16]. */
size_t dpc_stem_weights_size(const dpc_conv_desc *d);
void dpc_stem_weights(const dpc_conv_desc *d, const float *w, float *u);

/* The scratch conv d needs (one zero-padded image), in floats. */
size_t dpc_stem_scratch_size(const dpc_conv_desc *d);

/* y = post-ops(conv(x, w) + bias) at batch N with up to `threads`
 * threads: x in NCHW, y in nChw8c (N x Co/8 x Ho x Wo x 8), u from
 * dpc_stem_weights, bias NULL when there is none. A residual post-op
 * adds what y holds when called. */
void dpc_stem_run(const dpc_conv_desc *d, int64_t N, const float *x, const float *u, const float *bias, float *y,
                  float *scratch, int threads);

#endif
