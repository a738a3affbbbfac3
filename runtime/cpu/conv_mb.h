/* conv_mb.h - dpc's kernel for an inverted-residual block's first two
 * convs as one (MobileNet's and EfficientNet's MBConv: a 1x1 conv that
 * expands the channels, its activation, then a depthwise conv and its
 * activation), in oneDNN's nChw8c, for CPUs with AVX2 and FMA.
 *
 * Unfused, the 1x1's result, the block's largest tensor (EfficientNet-B0:
 * 96 channels at 112x112, 4.8 MB an image), goes to memory and comes back
 * for the depthwise conv; oneDNN 2.6 ran those early 1x1 convs with SiLU
 * at 20-26 GFLOP/s and their depthwise convs at 7-10 (a core's peak here
 * ~100), and its own fused form (its depthwise post-op) only at stride 2
 * and was slower at batch 1 (conv_dnnl.c, dw_fits). Here each (image,
 * panel of 16 expanded channels) item computes the 1x1's rows into a ring
 * of kh rows (a few KB, in the core's L1/L2; all rows at once for images
 * up to 1024 pixels), its post-ops applied over each finished row, and
 * each depthwise output row as soon as its kh input rows are in the
 * ring: the intermediate never reaches memory. The 1x1 computes 6 pixels
 * x 16 channels in twelve accumulators (two weight loads and six
 * broadcasts a step), its blocks running across rows; the depthwise conv
 * 4 output pixels x 8 channels a step, unrolled for 3x3 and 5x5 at
 * strides 1 and 2. Each output is the same sum, in the same order,
 * whatever the batch or the threads.
 *
 * conv_dnnl.c runs a 1x1 conv and the depthwise conv reading it here (the
 * 1x1's call deferred, as for oneDNN's fused pairs) where dpc_mb_fits says
 * yes, dpc's kernels run (the blocked layout without AVX-512) and either
 * conv has a SiLU or sigmoid post-op (DPC_CONV_MB=all: any pair; 0:
 * none): there it measured faster end to end than oneDNN's two primitives,
 * with ReLU6, ReLU or hardswish slower (conv_dnnl.c, mb_fits;
 * docs/performance.md, "A kernel for a block's 1x1 and depthwise convs").
 * Compiled in every build; tests/run/test_conv_mb.c checks it against
 * float64 convolutions. */
#ifndef DPC_CONV_MB_H
#define DPC_CONV_MB_H

#include "dpc_compile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether 1x1 conv a and depthwise conv b, which reads a's result, run
 * here: a not strided, padded or grouped; b
 * depthwise over a's channels, not dilated, a kernel of at most
 * DPC_MB_MAX_K rows and columns; channels in and out of a a
 * multiple of 8 (nChw8c without padded channels); post-ops among ReLU,
 * clip, hardswish, SiLU and sigmoid (no residual in either). */
#define DPC_MB_MAX_K 15
bool dpc_mb_fits(const dpc_conv_desc *a, const dpc_conv_desc *b);

/* The rearranged weights, in floats, and the rearrangements, panels of
 * 16 channels (the last one zero-padded where Co is 8 past a multiple of
 * 16): the 1x1's OIHW w into u[co / 16][c][co % 16], the depthwise
 * conv's into u[co / 16][i][j][co % 16]. */
size_t dpc_mb_1x1_size(const dpc_conv_desc *a);
void dpc_mb_1x1_weights(const dpc_conv_desc *a, const float *w, float *u);
size_t dpc_mb_dw_size(const dpc_conv_desc *b);
void dpc_mb_dw_weights(const dpc_conv_desc *b, const float *w, float *u);

/* The scratch a run with up to `threads` threads needs (a ring of rows a
 * thread), in floats. */
size_t dpc_mb_scratch_size(const dpc_conv_desc *b, int threads);

/* y = post-ops_b(dw(post-ops_a(1x1(x) + bias_a)) + bias_b) at batch N: x
 * and y in nChw8c, ua and ub from the rearrangements above, a bias NULL
 * when there is none. */
void dpc_mb_run(const dpc_conv_desc *a, const dpc_conv_desc *b, int64_t N, const float *x, const float *ua,
                const float *bias_a, const float *ub, const float *bias_b, float *y, float *scratch, int threads);

#endif
