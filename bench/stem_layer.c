/* stem_layer.c - dpc's direct kernel for convs of few input channels
 * (runtime/cpu/conv_stem.c) on the zoo's stems (AlexNet's 3 -> 64, 11x11
 * stride 4, ResNet's 7x7 stride 2, EfficientNet's and MobileNet's 3x3
 * stride 2; 224x224 in, bias + ReLU), at batch 1 and 8: ms a call (min
 * over about a second of calls) and GFLOP/s (2 x N x C x Co x kh x kw x
 * Ho x Wo over the time), to read against the core's measured peak
 * (bench/peak.c) and against oneDNN's gemm:jit in DNNL_VERBOSE of `dpc
 * bench models/zoo/alexnet.dp` with DPC_CONV_STEM=0.
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iruntime/core -Iruntime/cpu -Iruntime/formats -Icompiler -Ibuild/gen \
 *      -o /tmp/stem_layer bench/stem_layer.c runtime/cpu/conv_stem.c
 *   /tmp/stem_layer [THREADS]
 *
 * (docs/performance.md, "nChw8c for the NHWC readers, and a stem kernel"; needs AVX2 + FMA.) */
#include "conv_stem.h"

#include "kernel_bench.h"

#include <stdio.h>

/* One stem geometry (224x224 RGB in, bias + ReLU) at batch N. */
static void run(const char *name, int Co, int k, int st, int pad, int N, int threads) {
    int Ho = (224 + 2 * pad - k) / st + 1;
    dpc_conv_desc d = {.C = 3, .H = 224, .W = 224, .Co = Co, .Ho = Ho, .Wo = Ho, .kh = k, .kw = k, .groups = 1,
                       .stride = {st, st}, .dil = {1, 1}, .pad_l = {pad, pad}, .pad_r = {pad, pad}, .bias = true,
                       .npost = 1, .post = {{.act = DPC_ACT_RELU}}, .src_conv = -1, .sum_conv = -1};
    float *x = filled((size_t)N * 3 * 224 * 224), *w = filled((size_t)Co * 3 * k * k), *b = filled((size_t)Co);
    float *u = filled(dpc_stem_weights_size(&d)), *s = filled(dpc_stem_scratch_size(&d));
    float *y = filled((size_t)N * Co * Ho * Ho);
    if (!x || !w || !b || !u || !s || !y)
        exit(1);
    dpc_stem_weights(&d, w, u);
    double best = 1e9, t0 = now();
    while (now() - t0 < 1.0) {
        double t = now();
        dpc_stem_run(&d, N, x, u, b, y, s, threads);
        t = now() - t;
        best = t < best ? t : best;
    }
    double flop = 2.0 * N * 3 * Co * k * k * Ho * Ho;
    printf("%-28s batch %d, %d thread(s): %7.3f ms, %6.1f GFLOP/s\n", name, N, threads, best * 1e3, flop / best * 1e-9);
    free(x), free(w), free(b), free(u), free(s), free(y);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    for (int N = 1; N <= 8; N *= 8) {
        run("AlexNet 11x11 s4, 64", 64, 11, 4, 2, N, threads);
        run("ResNet 7x7 s2, 64", 64, 7, 2, 3, N, threads);
        run("EfficientNet 3x3 s2, 32", 32, 3, 2, 1, N, threads);
        run("MobileNet v3 3x3 s2, 16", 16, 3, 2, 1, N, threads);
        run("VGG 3x3 s1, 64", 64, 3, 1, 1, N, threads);
    }
    return 0;
}
