/* dnnl_conv_impls.c - times every oneDNN implementation of one convolution
 * (NHWC source and result, then format_tag_any; weights format_tag_any;
 * a SiLU post-op) and, for a 1x1 conv, the matmul primitive of the same
 * product: which kernel oneDNN would pick, and what the others cost.
 * Min over 7 rounds of ITERS calls, µs. One thread: OMP_NUM_THREADS=1.
 *
 *   cc -O2 -o /tmp/impls bench/dnnl_conv_impls.c -ldnnl
 *   OMP_NUM_THREADS=1 /tmp/impls N C Cout H K STRIDE GROUPS [ITERS]
 *
 * (docs/performance.md, "MBConv rows": depthwise jit_dw vs brdgmm_dw.) */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static dnnl_engine_t eng; static dnnl_stream_t st;
static dnnl_memory_t memof(const dnnl_memory_desc_t *md) { dnnl_memory_t m; size_t n = dnnl_memory_desc_get_size(md); float *p = aligned_alloc(64, (n + 127) / 64 * 64); for (size_t i = 0; i < n / 4; i++) p[i] = 0.01f * (i % 7); dnnl_memory_create(&m, md, eng, p); return m; }
static double timepd(dnnl_primitive_desc_t pd, int kind, int iters) {
    dnnl_primitive_t p; if (dnnl_primitive_create(&p, pd) != dnnl_success) return -1;
    dnnl_exec_arg_t a[6]; int k = 0;
    int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD};
    for (int i = 0; i < 5; i++) { const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, args[i]); if (q && dnnl_memory_desc_get_size(q)) a[k++] = (dnnl_exec_arg_t){args[i], memof(q)}; }
    double best = 1e9;
    for (int r = 0; r < 7; r++) { double t0 = now(); for (int i = 0; i < iters; i++) dnnl_primitive_execute(p, st, k, a); dnnl_stream_wait(st); double t = (now() - t0) / iters; if (t < best) best = t; }
    dnnl_primitive_destroy(p); (void)kind; return best * 1e6;
}
int main(int argc, char **argv) {
    int N = atoi(argv[1]), C = atoi(argv[2]), Co = atoi(argv[3]), H = atoi(argv[4]), kh = atoi(argv[5]), s = atoi(argv[6]), g = atoi(argv[7]);
    int iters = argc > 8 ? atoi(argv[8]) : 50;
    dnnl_engine_create(&eng, dnnl_cpu, 0); dnnl_stream_create(&st, eng, 0);
    int pad = kh / 2, Ho = (H + 2 * pad - kh) / s + 1;
    dnnl_dims_t sd = {N, C, H, H}, dd = {N, Co, Ho, Ho}, bd = {Co}, wd4 = {Co, C, kh, kh}, wd5 = {g, Co / g, C / g, kh, kh};
    dnnl_memory_desc_t smd, dmd, wmd, bmd;
    dnnl_format_tag_t tags[] = {dnnl_nhwc, dnnl_format_tag_any};
    for (int t = 0; t < 2; t++) {
    dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, tags[t]);
    dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, tags[t]);
    dnnl_memory_desc_init_by_tag(&wmd, g > 1 ? 5 : 4, g > 1 ? wd5 : wd4, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_a);
    dnnl_dims_t s2 = {s, s}, dl = {0, 0}, p2 = {pad, pad};
    dnnl_convolution_desc_t cd;
    dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &smd, &wmd, &bmd, &dmd, s2, dl, p2, p2);
    dnnl_primitive_attr_t a; dnnl_primitive_attr_create(&a); dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
    dnnl_post_ops_t po; dnnl_post_ops_create(&po); dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_swish, 1.f, 0.f); dnnl_primitive_attr_set_post_ops(a, po);
    dnnl_primitive_desc_iterator_t it;
    if (dnnl_primitive_desc_iterator_create(&it, &cd, a, eng, NULL) != dnnl_success) { printf("no iterator\n"); continue; }
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        const char *impl; dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
        printf("%s conv %-28s src fmt %d: %8.1f us\n", t ? "any " : "nhwc", impl, (int)q->format_desc.blocking.inner_nblks, timepd(pd, 0, iters));
        dnnl_primitive_desc_destroy(pd);
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    }
    if (kh == 1 && s == 1 && g == 1) { /* matmul [NHW, C] x [C, Co] */
        dnnl_dims_t ad = {(dnnl_dim_t)N * H * H, C}, bd2 = {C, Co}, cd2 = {(dnnl_dim_t)N * H * H, Co}, bb = {1, Co};
        dnnl_memory_desc_t am, bm, cm, biasm;
        dnnl_memory_desc_init_by_tag(&am, 2, ad, dnnl_f32, dnnl_ab);
        dnnl_memory_desc_init_by_tag(&bm, 2, bd2, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&cm, 2, cd2, dnnl_f32, dnnl_ab);
        dnnl_memory_desc_init_by_tag(&biasm, 2, bb, dnnl_f32, dnnl_ab);
        dnnl_matmul_desc_t md; dnnl_matmul_desc_init(&md, &am, &bm, &biasm, &cm);
        dnnl_primitive_attr_t a; dnnl_primitive_attr_create(&a); dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
        dnnl_post_ops_t po; dnnl_post_ops_create(&po); dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_swish, 1.f, 0.f); dnnl_primitive_attr_set_post_ops(a, po);
        dnnl_primitive_desc_iterator_t it;
        if (dnnl_primitive_desc_iterator_create(&it, &md, a, eng, NULL) == dnnl_success) do {
            dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
            const char *impl; dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
            printf("matmul %-28s: %8.1f us\n", impl, timepd(pd, 1, iters));
            dnnl_primitive_desc_destroy(pd);
        } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    }
    return 0;
}
