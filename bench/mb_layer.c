/* mb_layer.c - dpc's kernel for a 1x1 conv and the depthwise conv after
 * it (runtime/cpu/conv_mb.c) on EfficientNet-B0's 15 such pairs (an
 * inverted-residual block's expansion and depthwise conv, SiLU after
 * each) or MobileNet v2's 16 (`v2`: ReLU6), at batch 1 or the batch given: us per pair (min over about half
 * a second), to read against oneDNN's two calls in DNNL_VERBOSE of
 * `dpc bench models/zoo/efficientnet_b0.dp --batch B` with DPC_CONV_MB=0.
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iruntime/core -Iruntime/cpu -Iruntime/formats -Icompiler -Ibuild/gen \
 *      -o /tmp/mb_layer bench/mb_layer.c runtime/cpu/conv_mb.c
 *   /tmp/mb_layer [BATCH [THREADS [v2]]]
 *
 * (docs/performance.md, "A kernel for the 1x1 and depthwise convs of a
 * block"; needs AVX2 + FMA.) */
#include "conv_mb.h"

#include "kernel_bench.h"

#include <stdio.h>
#include <string.h>

/* (C, expanded channels, pixels a side, depthwise kernel, stride):
 * EfficientNet-B0's pairs (SiLU), MobileNet v2's (ReLU6) */
static const int B0[][5] = {{16, 96, 112, 3, 2},  {24, 144, 56, 3, 1},  {24, 144, 56, 5, 2},  {40, 240, 28, 5, 1},
                            {40, 240, 28, 3, 2},  {80, 480, 14, 3, 1},  {80, 480, 14, 3, 1},  {80, 480, 14, 5, 1},
                            {112, 672, 14, 5, 1}, {112, 672, 14, 5, 1}, {112, 672, 14, 5, 2}, {192, 1152, 7, 5, 1},
                            {192, 1152, 7, 5, 1}, {192, 1152, 7, 5, 1}, {192, 1152, 7, 3, 1}};

static const int V2[][5] = {{16, 96, 112, 3, 2}, {24, 144, 56, 3, 1}, {24, 144, 56, 3, 2}, {32, 192, 28, 3, 1},
                            {32, 192, 28, 3, 1}, {32, 192, 28, 3, 2}, {64, 384, 14, 3, 1}, {64, 384, 14, 3, 1},
                            {64, 384, 14, 3, 1}, {64, 384, 14, 3, 1}, {96, 576, 14, 3, 1}, {96, 576, 14, 3, 1},
                            {96, 576, 14, 3, 2}, {160, 960, 7, 3, 1}, {160, 960, 7, 3, 1}, {160, 960, 7, 3, 1}};

int main(int argc, char **argv) {
    int N = argc > 1 ? atoi(argv[1]) : 1, threads = argc > 2 ? atoi(argv[2]) : 1;
    bool v2 = argc > 3 && strcmp(argv[3], "v2") == 0;
    const int(*set)[5] = v2 ? V2 : B0;
    size_t n = v2 ? sizeof V2 / sizeof *V2 : sizeof B0 / sizeof *B0;
    dpc_conv_post act = v2 ? (dpc_conv_post){.act = DPC_ACT_CLIP, .alpha = 0.0f, .beta = 6.0f}
                           : (dpc_conv_post){.act = DPC_ACT_SWISH};
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        int C = set[i][0], Ce = set[i][1], H = set[i][2], k = set[i][3], s = set[i][4], p = k / 2, Ho = (H + s - 1) / s;
        dpc_conv_desc a = {.C = C, .H = H, .W = H, .Co = Ce, .Ho = H, .Wo = H, .kh = 1, .kw = 1, .groups = 1,
                           .stride = {1, 1}, .dil = {1, 1}, .bias = true, .npost = 1, .post = {act},
                           .src_conv = -1, .sum_conv = -1};
        dpc_conv_desc b = {.C = Ce, .H = H, .W = H, .Co = Ce, .Ho = Ho, .Wo = Ho, .kh = k, .kw = k, .groups = Ce,
                           .stride = {s, s}, .dil = {1, 1}, .pad_l = {p, p}, .pad_r = {p, p}, .bias = true,
                           .npost = 1, .post = {act}, .src_conv = 0, .sum_conv = -1};
        float *x = filled((size_t)N * C * H * H), *y = filled((size_t)N * Ce * Ho * Ho);
        float *ua = filled(dpc_mb_1x1_size(&a)), *ub = filled(dpc_mb_dw_size(&b)), *bias = filled((size_t)Ce);
        float *scratch = filled(dpc_mb_scratch_size(&b, threads));
        if (!x || !y || !ua || !ub || !bias || !scratch)
            return 1;
        double best = 1e9, t0 = now();
        while (now() - t0 < 0.5) {
            double t = now();
            dpc_mb_run(&a, &b, N, x, ua, bias, ub, bias, y, scratch, threads);
            t = now() - t;
            best = t < best ? t : best;
        }
        double macs = (double)N * ((double)H * H * Ce * C + (double)Ho * Ho * Ce * k * k);
        printf("%4d -> %4d at %3dx%-3d dw %dx%d s%d, batch %d, %d thread(s): %8.1f us, %6.1f GFLOP/s\n", C, Ce, H, H,
               k, k, s, N, threads, best * 1e6, 2 * macs / best * 1e-9);
        total += best;
        free(x), free(y), free(ua), free(ub), free(bias), free(scratch);
    }
    printf("all %zu pairs: %.1f us\n", n, total * 1e6);
    return 0;
}
