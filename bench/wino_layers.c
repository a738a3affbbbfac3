/* wino_layers.c - dpc's Winograd kernel (runtime/cpu/conv_wino.c) against
 * oneDNN's direct convolution in the same layout (nChw8c, bias + ReLU), on
 * the 3x3 stride-1 layers of ResNet and VGG: ms a call (min over about a
 * second of calls) and the direct conv's GFLOP/s equivalent (2 x N x C x
 * Co x 9 x H x W over the time: above the core's peak means fewer
 * multiply-adds than a direct conv). One thread unless THREADS.
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp \
 *      -Iruntime/core -Iruntime/cpu -Iruntime/formats -Icompiler -Ibuild/gen \
 *      -o /tmp/wino_layers bench/wino_layers.c runtime/cpu/conv_wino.c -ldnnl -lm
 *   OMP_NUM_THREADS=1 /tmp/wino_layers [THREADS]
 *
 * (docs/performance.md, "dpc's Winograd for AVX2"; needs AVX2 + FMA.) */
#include "conv_avx2.h"
#include "conv_wino.h"

#include <dnnl.h>
#include "kernel_bench.h"

#include <stdio.h>

/* oneDNN's direct conv at N, C -> C, H x H, pad 1, nChw8c, bias + ReLU: ms
 * (its threads: OMP_NUM_THREADS). */
static double dnnl_ms(dnnl_engine_t eng, dnnl_stream_t st, int N, int C, int H) {
    dnnl_dims_t sd = {N, C, H, H}, wd = {C, C, 3, 3}, bd = {C}, one = {1, 1}, zero = {0, 0}, pad = {1, 1};
    dnnl_memory_desc_t src, dst, wei, bias;
    dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_aBcd8b);
    dnnl_memory_desc_init_by_tag(&dst, 4, sd, dnnl_f32, dnnl_aBcd8b);
    dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_a);
    dnnl_convolution_desc_t cd;
    dnnl_post_ops_t po;
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_create(&po);
    dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0);
    dnnl_primitive_attr_create(&attr);
    dnnl_primitive_attr_set_post_ops(attr, po);
    dnnl_primitive_desc_t pd;
    if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei,
                                                   &bias, &dst, one, zero, pad, pad) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL) != dnnl_success)
        return -1;
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    dnnl_memory_t ms, mw, mb, md, mx = NULL;
    dnnl_memory_create(&ms, &src, eng, filled(dnnl_memory_desc_get_size(&src) / 4));
    dnnl_memory_create(&mw, wmd, eng, filled(dnnl_memory_desc_get_size(wmd) / 4));
    dnnl_memory_create(&mb, &bias, eng, filled((size_t)C));
    dnnl_memory_create(&md, &dst, eng, filled(dnnl_memory_desc_get_size(&dst) / 4));
    if (smd && dnnl_memory_desc_get_size(smd))
        dnnl_memory_create(&mx, smd, eng, DNNL_MEMORY_ALLOCATE);
    dnnl_primitive_t p;
    dnnl_primitive_create(&p, pd);
    dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, md},
                            {DNNL_ARG_SCRATCHPAD, mx}};
    double best = 1e9, t0 = now();
    for (int it = 0; it < 3 || now() - t0 < 1.0; it++) {
        double a0 = now();
        dnnl_primitive_execute(p, st, mx ? 5 : 4, a);
        dnnl_stream_wait(st);
        if (now() - a0 < best)
            best = now() - a0;
    }
    return best * 1e3;
}

static double wino_ms(int N, int C, int H, int threads) {
    dpc_conv_desc d = {.C = C, .H = H, .W = H, .Co = C, .Ho = H, .Wo = H, .kh = 3, .kw = 3, .groups = 1,
                       .stride = {1, 1}, .dil = {1, 1}, .pad_l = {1, 1}, .pad_r = {1, 1}, .bias = true, .npost = 1};
    d.post[0].act = DPC_ACT_RELU;
    size_t nx = (size_t)N * C * H * H;
    float *x = filled(nx), *y = filled(nx), *b = filled((size_t)C), *w = filled((size_t)C * C * 9);
    float *u = filled(dpc_wino_weights_size(&d)), *sc = filled(dpc_wino_scratch_size(&d, N));
    dpc_wino_weights(&d, w, u);
    double best = 1e9, t0 = now();
    for (int it = 0; it < 3 || now() - t0 < 1.0; it++) {
        double a0 = now();
        dpc_wino_run(&d, N, x, u, b, y, sc, threads);
        if (now() - a0 < best)
            best = now() - a0;
    }
    free(x), free(y), free(b), free(w), free(u), free(sc);
    return best * 1e3;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (!dpc_avx2_cpu()) {
        printf("no AVX2 + FMA here\n");
        return 1;
    }
    dnnl_engine_t eng;
    dnnl_stream_t st;
    dnnl_engine_create(&eng, dnnl_cpu, 0);
    dnnl_stream_create(&st, eng, dnnl_stream_default_flags);
    static const int layers[][3] = {{1, 64, 56}, {1, 128, 28}, {1, 256, 14}, {1, 256, 56}, {1, 512, 28}, {1, 512, 14}, {8, 64, 56},
                                    {8, 128, 28}, {8, 256, 14}, {8, 512, 7}, {1, 512, 7}};
    printf("%-5s %-5s %-7s %10s %10s %8s %12s %12s\n", "N", "C", "HxW", "oneDNN ms", "dpc ms", "speedup",
           "oneDNN GF/s", "dpc eq GF/s");
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        int N = layers[i][0], C = layers[i][1], H = layers[i][2];
        double flop = 2.0 * N * C * C * 9.0 * H * H;
        double a = dnnl_ms(eng, st, N, C, H), b = wino_ms(N, C, H, threads);
        printf("%-5d %-5d %3dx%-3d %10.3f %10.3f %7.2fx %12.1f %12.1f\n", N, C, H, H, a, b, a / b, flop / a / 1e6,
               flop / b / 1e6);
    }
    return 0;
}
