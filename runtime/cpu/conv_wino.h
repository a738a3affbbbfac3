/* conv_wino.h - dpc's own Winograd convolution, F(4x4, 3x3) and F(2x2,
 * 3x3), for CPUs with AVX2 and FMA but no AVX-512, in oneDNN's blocked
 * layout (nChw8c).
 *
 * oneDNN 2.6 has Winograd kernels only for AVX-512; without them its
 * direct AVX2 kernels already run 3x3 convs at 90%+ of the core's peak, so
 * the only way past them (and past ONNX Runtime's and OpenVINO's, which
 * run at the same rate) is fewer multiply-adds. F(4x4, 3x3) computes a
 * 4x4 block of outputs from a 6x6 block of inputs with 36 multiply-adds a
 * channel pair instead of 144: the input blocks are transformed (B^T d B),
 * multiplied by the transformed weights (G g G^T, once per weights) as 36
 * independent GEMMs over the channels, and transformed back (A^T m A) with
 * the bias, the residual and the activation applied on the way out
 * (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
 * 2016). Its float32 error is about 10x a direct conv's (1e-6 relative a
 * layer; tests/ref/wino_ref.py, the reference, measures it). Images with
 * too few 4x4 tiles (ResNet's 7x7 layers) take F(2x2, 3x3): 16
 * multiply-adds per 4 outputs and channel pair, 2.25x fewer than direct,
 * with transformed weights 16/9 the direct ones (4x for F(4,3)), and
 * about 1.5x a direct conv's error.
 *
 * conv_dnnl.c runs a conv here in place of its oneDNN primitive where
 * dpc_wino_fits says so; the tensors are then in nChw8c, the layout of
 * oneDNN's AVX2 kernels, so a chain of convs keeps its results in it
 * between them either way. Compiled in every build (the OpenBLAS ones too,
 * where only tests/run/test_conv_wino.c calls it: the sanitizer builds
 * check it there). */
#ifndef DPC_CONV_WINO_H
#define DPC_CONV_WINO_H

#include "dpc_compile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether conv d runs here: 3x3, stride 1, no dilation, not
 * grouped, channels in and out a multiple of 8, post-ops only the
 * residual, ReLU, clip, hardswish, SiLU and sigmoid, and enough output tiles an image that the
 * transformed weights are read for enough work: F(4x4, 3x3) when
 * ceil(Ho/4) * ceil(Wo/4) >= DPC_WINO_MIN_TILES, else F(2x2, 3x3) when
 * ceil(Ho/2) * ceil(Wo/2) is (F(4,3) on ResNet's 7x7 layers at batch 1,
 * 4 tiles an image, ran slower than the direct kernels). An image's,
 * not the batch's: the choice, and so the result, must not change with
 * the batch a replica gets (shared/spec/dataparallel.md: a split batch
 * gives the one-replica result within 1e-6; Winograd and the direct
 * kernels differ by about that). */
#define DPC_WINO_MIN_TILES 16
bool dpc_wino_fits(const dpc_conv_desc *d);

/* The transformed weights' size in floats (36 or 16 x C x Co), and the
 * transform of the OIHW weights w into u (which must hold that many). */
size_t dpc_wino_weights_size(const dpc_conv_desc *d);
void dpc_wino_weights(const dpc_conv_desc *d, const float *w, float *u);

/* The scratch conv d needs at batch N, in floats. */
size_t dpc_wino_scratch_size(const dpc_conv_desc *d, int64_t N);

/* y = post-ops(conv(x, w) + bias) at batch N with up to `threads`
 * threads: x and y in nChw8c (N x C/8 x H x W x 8), u from
 * dpc_wino_weights, bias NULL when there is none. A residual post-op (sum)
 * adds what y holds when called, as oneDNN's does. */
void dpc_wino_run(const dpc_conv_desc *d, int64_t N, const float *x, const float *u, const float *bias, float *y,
                  float *scratch, int threads);

#endif
