/* fc_layer.c - dpc's kernel for convs of one pixel (runtime/cpu/conv_fc.c)
 * on the squeeze-excitation fc convs of MobileNet v3-small (18 convs,
 * 16 -> 8 to 576 -> 144) and EfficientNet-B0 (32 convs, 32 -> 8 to
 * 1152 -> 48), each model's set run in turn as a forward runs them, at
 * batch 1, 8 and 64: us for the whole set (min over about a second of
 * sets), to read against oneDNN's in DNNL_VERBOSE of `dpc bench
 * models/zoo/M.dp --batch B` with DPC_CONV_FC=0 (the `ih1oh1` convs'
 * exec times summed over a forward).
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iruntime/core -Iruntime/cpu -Iruntime/formats -Icompiler -Ibuild/gen \
 *      -o /tmp/fc_layer bench/fc_layer.c runtime/cpu/conv_fc.c
 *   /tmp/fc_layer [THREADS]
 *
 * (docs/performance.md, "A kernel for the convs of one pixel"; needs AVX2 + FMA.) */
#include "conv_fc.h"

#include "kernel_bench.h"

#include <stdio.h>

/* (C, Co) of one block's two fc convs: C -> Co, then Co -> C */
static const int V3[][2] = {{16, 8}, {96, 24}, {240, 64}, {240, 64}, {120, 32}, {144, 40}, {288, 72}, {576, 144},
                            {576, 144}};
static const int B0[][2] = {{32, 8},    {96, 4},    {144, 6},   {144, 6},   {240, 10},  {240, 10},
                            {480, 20},  {480, 20},  {480, 20},  {672, 28},  {672, 28},  {672, 28},
                            {1152, 48}, {1152, 48}, {1152, 48}, {1152, 48}};

static void run(const char *name, const int (*se)[2], int nse, int N, int threads) {
    int n = 2 * nse;
    dpc_conv_desc *d = calloc((size_t)n, sizeof *d);
    float **u = calloc((size_t)n, sizeof *u), **b = calloc((size_t)n, sizeof *b);
    float *x = filled((size_t)N * 1152), *y = filled((size_t)N * 1152);
    if (!d || !u || !b || !x || !y)
        exit(1);
    double macs = 0;
    for (int i = 0; i < n; i++) {
        int C = se[i / 2][i % 2], Co = se[i / 2][1 - i % 2];
        d[i] = (dpc_conv_desc){.C = C, .H = 1, .W = 1, .Co = Co, .Ho = 1, .Wo = 1, .kh = 1, .kw = 1, .groups = 1,
                               .stride = {1, 1}, .dil = {1, 1}, .bias = true, .npost = i % 2 ? 0 : 1,
                               .post = {{.act = DPC_ACT_RELU}}, .src_conv = -1, .sum_conv = -1};
        float *w = filled((size_t)C * Co);
        u[i] = filled(dpc_fc_weights_size(&d[i]));
        b[i] = filled((size_t)Co);
        if (!w || !u[i] || !b[i])
            exit(1);
        dpc_fc_weights(&d[i], w, u[i]);
        free(w);
        macs += (double)N * C * Co;
    }
    double best = 1e9, t0 = now();
    while (now() - t0 < 1.0) {
        double t = now();
        for (int i = 0; i < n; i++)
            dpc_fc_run(&d[i], N, i % 2 ? y : x, u[i], b[i], i % 2 ? x : y, threads);
        t = now() - t;
        best = t < best ? t : best;
    }
    printf("%-20s %2d convs, batch %2d, %d thread(s): %8.1f us, %6.1f GFLOP/s\n", name, n, N, threads, best * 1e6,
           2 * macs / best * 1e-9);
    for (int i = 0; i < n; i++)
        free(u[i]), free(b[i]);
    free(d), free(u), free(b), free(x), free(y);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    for (int N = 1; N <= 64; N *= 8) {
        run("MobileNet v3-small", V3, sizeof V3 / sizeof *V3, N, threads);
        run("EfficientNet-B0", B0, sizeof B0 / sizeof *B0, N, threads);
    }
    return 0;
}
