/* conv_fc.h - dpc's kernel for convolutions of one pixel (a
 * squeeze-excitation block's two fc convs, 1x1 on the pooled [N, C, 1, 1]
 * values), for CPUs with AVX2 and FMA.
 *
 * Such a conv is a matrix-vector product per image: y[n] = W . x[n] + b,
 * W of Co x C. oneDNN 2.6 runs it as its 1x1 kernel on one pixel, a call
 * and a setup for a few thousand multiply-adds (MobileNet v3-small at
 * batch 1: 18 of them, 175 us a forward, ~10% of it, at 3 GMAC/s). Here:
 * the weights transposed once into panels of 32 output channels
 * (u[co / 32][c][co % 32], the last panel zero-padded), and per (panel,
 * two images) eight accumulators over C steps of four weight loads and
 * two broadcasts. Its tensors have the same bytes in NCHW, NHWC and
 * nChw8c (one pixel; channels a multiple of 8 for nChw8c), so it runs
 * between the convs around it in any of those without a reorder. Each
 * output is the same sum, in the same order, whatever the batch or the
 * threads.
 *
 * conv_dnnl.c runs a conv here in place of its oneDNN primitive where
 * dpc_fc_fits says yes and dpc's kernels run (the blocked layout without
 * AVX-512; DPC_CONV_FC=0: never). Compiled in every build;
 * tests/run/test_conv_fc.c checks it against float64. */
#ifndef DPC_CONV_FC_H
#define DPC_CONV_FC_H

#include "dpc_compile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether conv d runs here: one pixel in and out, a 1x1 kernel, not
 * grouped, post-ops among the residual, ReLU, clip, hardswish, SiLU and
 * sigmoid. */
bool dpc_fc_fits(const dpc_conv_desc *d);

/* The transposed weights' size in floats (Co rounded up to 32, times C)
 * and the transposition of the OIHW weights w into u. */
size_t dpc_fc_weights_size(const dpc_conv_desc *d);
void dpc_fc_weights(const dpc_conv_desc *d, const float *w, float *u);

/* y = post-ops(W . x + bias) for N images with up to `threads` threads:
 * x [N][C], y [N][Co], u from dpc_fc_weights, bias NULL when there is
 * none. A residual post-op adds what y holds when called. */
void dpc_fc_run(const dpc_conv_desc *d, int64_t N, const float *x, const float *u, const float *bias, float *y,
                int threads);

#endif
