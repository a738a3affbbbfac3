/* conv_dnnl_prim.c - one convolution's oneDNN primitive: post-op
 * attributes, reorders, the weights kept in the primitive's layout (the
 * backend's cache), the choice among oneDNN's implementations and dpc's
 * own kernels (pass one of a plan), and the primitive with its memory
 * objects (pass two). Apart from conv_dnnl_plan.c, which decides for the
 * whole set what each conv's neighbours do. */
#ifdef DPC_USE_DNNL
#include "conv_dnnl_impl.h"
#include "conv_avx2.h"
#include "conv_fc.h"
#include "conv_mb.h"
#include "conv_stem.h"
#include "conv_wino.h"
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- creation */

static dnnl_alg_kind_t alg_of(dpc_conv_act a) {
    switch (a) {
    case DPC_ACT_RELU: return dnnl_eltwise_relu;
    case DPC_ACT_CLIP: return dnnl_eltwise_clip;
    case DPC_ACT_HARDSWISH: return dnnl_eltwise_hardswish;
    case DPC_ACT_SWISH: return dnnl_eltwise_swish;
    case DPC_ACT_LOGISTIC: return dnnl_eltwise_logistic;
    case DPC_ACT_TANH: return dnnl_eltwise_tanh;
    case DPC_ACT_GELU_ERF: return dnnl_eltwise_gelu_erf;
    case DPC_ACT_GELU_TANH: return dnnl_eltwise_gelu_tanh;
    default: return dnnl_alg_kind_undef;
    }
}

void dpc_dnnl_pconv_free(pconv *p) {
    if (p->pd)
        dnnl_primitive_desc_destroy(p->pd);
    dnnl_primitive_t prims[] = {p->conv, p->rsrc, p->rdst, p->rsum, p->w.ro, p->dw.ro};
    for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
        if (prims[i])
            dnnl_primitive_destroy(prims[i]);
    dnnl_memory_t mems[] = {p->src_user, p->src, p->w.user, p->w.mem, p->bias, p->dst, p->dst_user, p->sum_user,
                            p->scratch, p->dw.user, p->dw.mem, p->dw_bias};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
    memset(p, 0, sizeof *p);
}


static bool append_posts(dnnl_post_ops_t po, const dpc_conv_desc *d) {
    bool ok = true;
    for (int i = 0; ok && i < d->npost; i++) {
        const dpc_conv_post *p = &d->post[i];
        if (p->act == DPC_ACT_SUM)
            ok = dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success;
        else
            ok = dnnl_post_ops_append_eltwise(po, 1.0f, alg_of(p->act), p->act == DPC_ACT_SWISH ? 1.0f : p->alpha,
                                              p->beta) == dnnl_success;
    }
    return ok;
}

/* An attribute with the scratchpad in the caller's memory, and post-ops:
 * d's, then (dw not NULL) the depthwise conv dw as a post-op, and dw's. */
dnnl_primitive_attr_t dpc_dnnl_make_attr(const dpc_conv_desc *d, const dpc_conv_desc *dw) {
    dnnl_primitive_attr_t a;
    if (dnnl_primitive_attr_create(&a) != dnnl_success)
        return NULL;
    bool ok = dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user) == dnnl_success;
    if (ok && d && (d->npost || dw)) {
        dnnl_post_ops_t po = NULL;
        ok = dnnl_post_ops_create(&po) == dnnl_success && append_posts(po, d);
        if (ok && dw)
            ok = dnnl_post_ops_append_dw(po, dnnl_f32, dnnl_f32, dnnl_f32, dw->kh, dw->stride[0], dw->pad_l[0], 0, 0,
                                         NULL) == dnnl_success &&
                 append_posts(po, dw);
        if (ok)
            ok = dnnl_primitive_attr_set_post_ops(a, po) == dnnl_success;
        if (po)
            dnnl_post_ops_destroy(po);
    }
    if (!ok) {
        dnnl_primitive_attr_destroy(a);
        return NULL;
    }
    return a;
}

/* A reorder from `from` to `to` (NULL when they are the same layout); its
 * scratchpad (if any) is the caller's too. */
static dnnl_status_t make_reorder(dnnl_engine_t eng, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                  dnnl_primitive_t *out, size_t *scratch) {
    *out = NULL;
    if (dnnl_memory_desc_equal(from, to))
        return dnnl_success;
    dnnl_primitive_attr_t a = dpc_dnnl_make_attr(NULL, NULL);
    if (!a)
        return dnnl_out_of_memory;
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, a);
    dnnl_primitive_attr_destroy(a);
    if (s != dnnl_success)
        return s;
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sb = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (sb > *scratch)
        *scratch = sb;
    s = dnnl_primitive_create(out, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

static dnnl_status_t mem(dnnl_engine_t eng, const dnnl_memory_desc_t *md, dnnl_memory_t *out) {
    return dnnl_memory_create(out, md, eng, DNNL_MEMORY_NONE);
}

/* Runs a reorder from src to dst at once (the weights at plan). */
static dnnl_status_t reorder_now(dpc_dnnl_rconvs *r, dnnl_primitive_t p, dnnl_memory_t from, dnnl_memory_t to,
                                 dnnl_memory_t scratch) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratch}};
    dnnl_status_t s = dnnl_primitive_execute(p, r->stream, scratch ? 3 : 2, args);
    return s == dnnl_success ? dnnl_stream_wait(r->stream) : s;
}

/* The weights of conv i in layout md, reordered once from `from` (the
 * parameter or the prepare kernels' result; gen, the parameters' or the
 * consts' generation, says which values the entry must hold). NULL when the
 * cache is full (the call reorders them) or on failure (*st set). */
const void *dpc_dnnl_kept_weights(dpc_dnnl_rconvs *r, int i, const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *user,
                                  const void *from, unsigned long gen, dpc_status *st, dpc_err *e) {
    dpc_dnnl_convs *c = r->c;
    wentry *w = NULL;
    pthread_mutex_lock(&c->mu);
    for (int j = 0; j < c->nw[i] && !w; j++)
        if (dnnl_memory_desc_equal(&c->w[i][j].md, md))
            w = &c->w[i][j];
    if (w && w->gen == gen) {
        pthread_mutex_unlock(&c->mu);
        return w->data;
    }
    if (!w && c->nw[i] == WCACHE_MAX) {
        pthread_mutex_unlock(&c->mu);
        return NULL;
    }
    size_t bytes = dnnl_memory_desc_get_size(md), sb = 0;
    void *data = w ? w->data : dpc_aligned_alloc(bytes ? bytes : 64);
    dnnl_primitive_t ro = NULL;
    dnnl_memory_t mu = NULL, mw = NULL, ms = NULL;
    void *sbuf = NULL;
    dnnl_status_t s = data ? make_reorder(c->eng, user, md, &ro, &sb) : dnnl_out_of_memory;
    if (s == dnnl_success && sb)
        sbuf = dpc_aligned_alloc(sb);
    if (s == dnnl_success && sb && !sbuf)
        s = dnnl_out_of_memory;
    if (s == dnnl_success)
        s = dnnl_memory_create(&mu, user, c->eng, (void *)from);
    if (s == dnnl_success)
        s = dnnl_memory_create(&mw, md, c->eng, data);
    if (s == dnnl_success && sbuf) {
        dnnl_memory_desc_t flat;
        dnnl_dims_t dd = {(dnnl_dim_t)sb};
        dnnl_memory_desc_init_by_tag(&flat, 1, dd, dnnl_u8, dnnl_a);
        s = dnnl_memory_create(&ms, &flat, c->eng, sbuf);
    }
    if (s == dnnl_success)
        s = ro ? reorder_now(r, ro, mu, mw, ms) : dnnl_success;
    if (s == dnnl_success && !ro)
        memcpy(data, from, bytes);
    if (ro)
        dnnl_primitive_destroy(ro);
    if (mu)
        dnnl_memory_destroy(mu);
    if (mw)
        dnnl_memory_destroy(mw);
    if (ms)
        dnnl_memory_destroy(ms);
    free(sbuf);
    const void *found = NULL;
    if (s == dnnl_success) {
        if (!w) {
            w = &c->w[i][c->nw[i]++];
            w->md = *md;
            w->data = data;
        }
        w->gen = gen;
        found = data;
    } else {
        if (!w)
            free(data);
        else
            w->gen = 0; /* (never a generation: the next call tries again) */
        *st = dpc_errf(e, DPC_EDEVICE, "oneDNN: reordering the weights of convolution %d failed (status %d)", i, (int)s);
    }
    pthread_mutex_unlock(&c->mu);
    return found;
}


/* A conv oneDNN's Winograd kernels take and that measured faster there:
 * 3x3, stride 1, no dilation, not grouped, 32+ channels in and out (the
 * stem's 3 input channels ran 5x slower). */
static bool wino_fits(const dpc_conv_desc *d) {
    return d->kh == 3 && d->kw == 3 && d->stride[0] == 1 && d->stride[1] == 1 && d->dil[0] == 1 && d->dil[1] == 1 &&
           d->groups == 1 && d->C >= 32 && d->Co >= 32;
}

/* Conv p runs dpc's kernel `own` in place of a primitive, reading its
 * source in layout src and writing its result in dst. */
void dpc_dnnl_plan_own(pconv *p, int own, const dnnl_dims_t sd, const dnnl_dims_t dd, dnnl_format_tag_t src,
                       dnnl_format_tag_t dst, const char *impl) {
    p->own = own;
    dnnl_memory_desc_init_by_tag(&p->own_src, 4, sd, dnnl_f32, src);
    dnnl_memory_desc_init_by_tag(&p->own_dst, 4, dd, dnnl_f32, dst);
    snprintf(p->impl, sizeof p->impl, "%s", impl);
}

/* A tensor of one pixel: nChw8c where its channels fill the blocks (the
 * layout of the convs around, no reorder), else NHWC; the bytes of [N][C]
 * in both. */
static dnnl_format_tag_t pixel_tag(int64_t C) { return C % 8 ? dnnl_nhwc : dnnl_aBcd8b; }

/* Pass one of a plan: conv i's primitive descriptor at batch N (p->pd),
 * or declined when oneDNN has no implementation. */
void dpc_dnnl_plan_prim(dpc_dnnl_rconvs *r, int i, int64_t N, int threads, pconv *p) {
    dpc_dnnl_convs *c = r->c;
    const dpc_conv_desc *d = &c->d[i];
    double macs = (double)N * (double)d->Co * (double)(d->Ho * d->Wo) * (double)(d->C / d->groups) *
                  (double)(d->kh * d->kw);
    if (d->groups > 1 && d->groups == d->C)
        macs *= 2; /* a depthwise conv is bound by memory: half a dense conv's rate per multiply-add (measured) */
    p->threads = macs < DPC_CPU_PARALLEL_MIN ? 1 : threads;
    bool grouped = d->groups > 1;
    dnnl_dims_t sd = {N, d->C, d->H, d->W}, dd = {N, d->Co, d->Ho, d->Wo}, bd = {d->Co};
    if (c->own_wino && dpc_wino_fits(d) && (d->w_param >= 0 || d->w_const)) {
        /* dpc's Winograd, in the layout of oneDNN's AVX2 kernels around it
         * (weights it transforms once per generation: own_weights) */
        dpc_dnnl_plan_own(p, OWN_WINO, sd, dd, dnnl_aBcd8b, dnnl_aBcd8b, "wino:dpc_avx2");
        return;
    }
    if (c->own_fc && dpc_fc_fits(d) && (d->w_param >= 0 || d->w_const)) {
        /* one pixel (a squeeze-excitation's fc convs): a matrix-vector
         * product, where oneDNN's 1x1 kernel spends ~10 us a call in setup
         * (conv_fc.h) */
        dpc_dnnl_plan_own(p, OWN_FC, sd, dd, pixel_tag(d->C), pixel_tag(d->Co), "gemv:dpc_avx2");
        return;
    }
    c->set_threads(p->threads);
    dnnl_dims_t wd4 = {d->Co, d->C / d->groups, d->kh, d->kw};
    dnnl_dims_t wd5 = {d->groups, d->Co / d->groups, d->C / d->groups, d->kh, d->kw};
    dnnl_memory_desc_t bias_md, src_any, dst_any, wei_any;
    dnnl_format_tag_t act = c->layout == DPC_CONV_PLAIN ? dnnl_nchw : c->layout == DPC_CONV_NHWC ? dnnl_nhwc : dnnl_format_tag_any;
    /* one pixel in and out (a squeeze-excitation's fc convs): NHWC, the
     * bytes of NCHW there, not a blocked layout that pads its few channels
     * (and then needs a reorder on either side) */
    if (act == dnnl_format_tag_any && d->H * d->W == 1 && d->Ho * d->Wo == 1 && (d->C % 8 || d->Co % 8))
        act = dnnl_nhwc;
    dnnl_memory_desc_init_by_tag(&src_any, 4, sd, dnnl_f32, act);
    dnnl_memory_desc_init_by_tag(&dst_any, 4, dd, dnnl_f32, act);
    dnnl_memory_desc_init_by_tag(&wei_any, grouped ? 5 : 4, grouped ? wd5 : wd4, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&bias_md, 1, bd, dnnl_f32, dnnl_a);
    dnnl_dims_t strides = {d->stride[0], d->stride[1]}, dil = {d->dil[0] - 1, d->dil[1] - 1};
    dnnl_dims_t pl = {d->pad_l[0], d->pad_l[1]}, pr = {d->pad_r[0], d->pad_r[1]};
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = dpc_dnnl_make_attr(d, NULL);
    dnnl_status_t s = dnnl_unimplemented;
    if (attr && c->wino && wino_fits(d)) {
        /* Winograd in oneDNN's blocked layout, reordered from and to the
         * tensors' (plan_io): measured faster than the direct NHWC kernels
         * on 3x3 stride-1 convs of 32+ channels (docs/performance.md) */
        dnnl_memory_desc_t sa, da;
        dnnl_memory_desc_init_by_tag(&sa, 4, sd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&da, 4, dd, dnnl_f32, dnnl_format_tag_any);
        s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_winograd, &sa,
                                                       &wei_any, d->bias ? &bias_md : NULL, &da, strides, dil, pl, pr);
        if (s == dnnl_success)
            s = dnnl_primitive_desc_create(&p->pd, &cd, attr, c->eng, NULL);
    }
    if (attr && s != dnnl_success) {
        s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src_any,
                                                       &wei_any, d->bias ? &bias_md : NULL, &dst_any, strides, dil, pl, pr);
        if (s == dnnl_success)
            s = dnnl_primitive_desc_create(&p->pd, &cd, attr, c->eng, NULL);
    }
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) { /* unimplemented, or a geometry or post-op oneDNN refuses */
        p->pd = NULL;
        p->declined = true;
        snprintf(p->impl, sizeof p->impl, "declined");
        return;
    }
    const char *impl = NULL;
    dnnl_primitive_desc_query(p->pd, dnnl_query_impl_info_str, 0, &impl);
    bool small_s2 = d->kh * d->kw <= 9 && d->stride[0] >= 2 && d->stride[1] >= 2;
    if (c->own_stem && impl && (strstr(impl, "gemm") || small_s2) && dpc_stem_fits(d) &&
        (d->w_param >= 0 || d->w_const)) {
        /* dpc's, from NCHW into the blocked layout, where oneDNN has no
         * direct kernel (AlexNet's 11x11 stride-4 stem: gemm:jit, 43-47
         * GFLOP/s a core) or a slow one (the 3x3 stride-2 stems of
         * EfficientNet and MobileNet: 30-40, dpc's 50-65). ResNet's 7x7
         * stride 2 and VGG's 3x3 stride 1 keep oneDNN's (86 and 62 GFLOP/s,
         * dpc's 79-84 and 56-61; bench/stem_layer.c). */
        dnnl_primitive_desc_destroy(p->pd);
        p->pd = NULL;
        dpc_dnnl_plan_own(p, OWN_STEM, sd, dd, dnnl_nchw, dnnl_aBcd8b, "direct:dpc_stem_avx2");
        return;
    }
    snprintf(p->impl, sizeof p->impl, "%s", impl ? impl : "?");
}

/* The weights of conv i as passed (user) in the layout md of a primitive:
 * the kept copy when they are a parameter (here) or the prepare kernels'
 * result (at the first call after they ran, bind_weights), else a reorder
 * per call. */
static dnnl_status_t plan_weights(dpc_dnnl_rconvs *r, int i, pwei *pw, const dnnl_memory_desc_t *user,
                                  const dnnl_memory_desc_t *md, size_t *scratch, dpc_status *st, dpc_err *e) {
    dpc_dnnl_convs *c = r->c;
    const dpc_conv_desc *d = &c->d[i];
    dnnl_status_t s = dnnl_success;
    if (d->w_param < 0)
        s = make_reorder(c->eng, user, md, &pw->ro, scratch);
    else if (!dnnl_memory_desc_equal(md, user)) {
        unsigned long pgen = atomic_load(&c->pgen);
        if ((pw->kept = dpc_dnnl_kept_weights(r, i, md, user, c->params[d->w_param], pgen, st, e)))
            pw->gen = pgen;
        else if (*st == DPC_OK)
            s = make_reorder(c->eng, user, md, &pw->ro, scratch); /* the cache is full: per call */
    }
    if (s == dnnl_success)
        s = mem(c->eng, user, &pw->user);
    if (s == dnnl_success)
        s = mem(c->eng, md, &pw->mem);
    pw->bytes = pw->ro ? (dnnl_memory_desc_get_size(md) + 63) / 64 * 64 : 0;
    return s;
}



/* The layout of the tensor conv q's result is held in (q NULL: another
 * kernel's result): q's primitive's own (opaque), NHWC (kept) or NCHW. */
static dnnl_memory_desc_t held_md(const pconv *q, const dnnl_dims_t dims) {
    if (q && q->opaque_y)
        return q->ymd;
    dnnl_memory_desc_t md;
    dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32,
                                 q && q->blk_y ? dnnl_aBcd8b : q && q->keep_y ? dnnl_nhwc : dnnl_nchw);
    return md;
}


/* A tensor of one pixel an image ([N, C, 1, 1]: a squeeze-excitation's
 * pooled values) has the same bytes in NCHW, NHWC and nChw8c: described
 * as the primitive's nChw8c or NHWC, it needs no reorder (two a
 * squeeze-excitation block without it). */
static void same_if_1x1(dnnl_memory_desc_t *user, const dnnl_memory_desc_t *prim, const dnnl_dims_t dims) {
    dnnl_memory_desc_t nhwc;
    if (dims[2] == 1 && dims[3] == 1 && prim &&
        (is_blk8(prim, dims) || (dnnl_memory_desc_init_by_tag(&nhwc, 4, dims, dnnl_f32, dnnl_nhwc) == dnnl_success &&
                                 dnnl_memory_desc_equal(prim, &nhwc))))
        *user = *prim;
}

/* Pass two: the primitive, the reorders between the tensors' layouts
 * (held_md: sp's for the source, up's for the residual, p's own for the
 * result) and the primitive's, the memory objects, the kept weights. A
 * fused conv's source, weights and bias are its head's (the 1x1), its own
 * weights and bias those of the depthwise post-op. */
dpc_status dpc_dnnl_plan_io(dpc_dnnl_rconvs *r, int i, int64_t N, pconv *p, const pconv *sp, const pconv *up,
                            dpc_err *e) {
    dpc_dnnl_convs *c = r->c;
    const dpc_conv_desc *d = &c->d[i];
    int i0 = p->fused ? p->head : i; /* whose source, weights and bias the primitive reads */
    const dpc_conv_desc *d0 = &c->d[i0];
    c->set_threads(p->threads);
    bool grouped = d0->groups > 1;
    dnnl_dims_t sd = {N, d0->C, d0->H, d0->W}, dd = {N, d->Co, d->Ho, d->Wo}, bd = {d0->Co};
    dnnl_dims_t wd4 = {d0->Co, d0->C / d0->groups, d0->kh, d0->kw};
    dnnl_dims_t wd5 = {d0->groups, d0->Co / d0->groups, d0->C / d0->groups, d0->kh, d0->kw};
    dnnl_memory_desc_t src_u = held_md(sp, sd), dst_u = held_md(p, dd), sum_u = held_md(up, dd), wei_u, bias_md;
    dnnl_memory_desc_init_by_tag(&wei_u, grouped ? 5 : 4, grouped ? wd5 : wd4, dnnl_f32, grouped ? dnnl_goihw : dnnl_oihw);
    dnnl_memory_desc_init_by_tag(&bias_md, 1, bd, dnnl_f32, dnnl_a);
    dnnl_primitive_desc_t pd = p->pd; /* NULL for dpc's own kernels (p->own) */
    const dnnl_memory_desc_t *src_md = src_md_of(p), *dst_md = dst_md_of(p);
    same_if_1x1(&src_u, src_md, sd);
    same_if_1x1(&dst_u, dst_md, dd);
    same_if_1x1(&sum_u, dst_md, dd);
    const dnnl_memory_desc_t *wei_md = pd ? dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0) : NULL;
    const dnnl_memory_desc_t *sp_md = pd ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0) : NULL;
    size_t scratch = sp_md ? dnnl_memory_desc_get_size(sp_md) : 0;
    bool has_sum = sums(d);
    dnnl_status_t s = pd ? dnnl_primitive_create(&p->conv, pd) : dnnl_success;
    if (s == dnnl_success)
        s = make_reorder(c->eng, &src_u, src_md, &p->rsrc, &scratch);
    if (s == dnnl_success)
        s = make_reorder(c->eng, dst_md, &dst_u, &p->rdst, &scratch);
    if (s == dnnl_success && has_sum)
        s = make_reorder(c->eng, &sum_u, dst_md, &p->rsum, &scratch);
    dpc_status st = DPC_OK;
    if (s == dnnl_success && pd)
        s = plan_weights(r, i0, &p->w, &wei_u, wei_md, &scratch, &st, e);
    if (s == dnnl_success && st == DPC_OK && p->fused && pd) { /* the depthwise post-op's weights and bias */
        dnnl_dims_t dwd = {d->groups, 1, 1, d->kh, d->kw}, dbd = {d->Co};
        dnnl_memory_desc_t dw_u, dwb;
        dnnl_memory_desc_init_by_tag(&dw_u, 5, dwd, dnnl_f32, dnnl_goihw);
        dnnl_memory_desc_init_by_tag(&dwb, 1, dbd, dnnl_f32, dnnl_a);
        const dnnl_memory_desc_t *dw_md =
            dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
        s = dw_md ? plan_weights(r, i, &p->dw, &dw_u, dw_md, &scratch, &st, e) : dnnl_unimplemented;
        p->dw.off = p->w.bytes;
        if (s == dnnl_success)
            s = mem(c->eng, &dwb, &p->dw_bias);
    }
    dnnl_memory_t *mems[] = {&p->src_user, &p->src, &p->bias, &p->dst, &p->dst_user, &p->sum_user};
    const dnnl_memory_desc_t *mds[] = {&src_u, src_md, &bias_md, dst_md, &dst_u, &sum_u};
    for (size_t j = 0; s == dnnl_success && st == DPC_OK && j < sizeof mems / sizeof *mems; j++)
        s = mem(c->eng, mds[j], mems[j]);
    dnnl_memory_desc_t flat;
    dnnl_dims_t fd = {(dnnl_dim_t)(scratch ? scratch : 1)};
    dnnl_memory_desc_init_by_tag(&flat, 1, fd, dnnl_u8, dnnl_a);
    if (s == dnnl_success && st == DPC_OK)
        s = mem(c->eng, &flat, &p->scratch);
    p->scratch_bytes = scratch;
    p->src_bytes = p->rsrc ? dnnl_memory_desc_get_size(src_md) : 0;
    /* the result goes through the replica's buffer when its layout is not
     * y's, or when a residual in another layout is y itself */
    p->dst_bytes = p->rdst || p->rsum ? dnnl_memory_desc_get_size(dst_md) : 0;
    p->y_bytes = dnnl_memory_desc_get_size(&dst_u);
    p->own_bytes = (p->own == OWN_WINO   ? dpc_wino_scratch_size(d, N)
                     : p->own == OWN_STEM ? dpc_stem_scratch_size(d)
                     : p->own == OWN_MB   ? dpc_mb_scratch_size(d, p->threads)
                                          : 0) *
                    sizeof(float);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    p->pd = NULL;
    if (st != DPC_OK)
        return st;
    if (s != dnnl_success)
        return dpc_errf(e, s == dnnl_out_of_memory ? DPC_ENOMEM : DPC_EDEVICE,
                        "oneDNN: creating convolution %d for batch %lld failed (status %d)", i, (long long)N, (int)s);
    return DPC_OK;
}
#else
typedef int dpc_conv_dnnl_unused; /* ISO C: a translation unit is not empty */
#endif
