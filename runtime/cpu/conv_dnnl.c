/* conv_dnnl.c - convolutions as oneDNN primitives (conv_dnnl.h). */
#ifdef DPC_USE_DNNL
#include "conv_dnnl.h"
#include "backend_cpu.h"
#include "conv_avx2.h"
#include "conv_fc.h"
#include "conv_mb.h"
#include "conv_stem.h"
#include "conv_wino.h"
#include "kabi.h"
#include "tensor.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The weights of one conv in a layout a primitive asked for: reordered
 * once, kept for the backend's life (primitives for other batch sizes
 * usually ask for the same). */
#define WCACHE_MAX 4
typedef struct wentry {
    dnnl_memory_desc_t md;
    void *data;
    unsigned long gen; /* weights computed by the prepare kernels: the consts' generation they hold */
} wentry;

struct dpc_dnnl_convs {
    int n;
    dpc_conv_desc *d;
    float *const *params;
    dpc_dnnl_threads_fn set_threads;
    int layout;
    bool keep;                 /* results a conv alone reads stay in the primitive's layout (DPC_CONV_KEEP) */
    bool wino;                 /* 3x3 convs try oneDNN's Winograd first (DPC_CONV_WINO=0: never) */
    bool own_wino;             /* 3x3 convs run dpc's Winograd where it fits (conv_wino.h) */
    bool own_stem;             /* convs of few input channels oneDNN runs as a GEMM run dpc's direct kernel (conv_stem.h) */
    bool own_fc;               /* convs of one pixel run dpc's kernel (conv_fc.h) */
    int own_mb;                /* a 1x1 conv and the depthwise conv after it run dpc's kernel (conv_mb.h): DPC_CONV_MB_* */
    bool dw;                   /* a 1x1 conv and the depthwise conv after it run as one (DPC_CONV_DW=0: never) */
    _Atomic unsigned long gen; /* bumped whenever the prepare kernels ran (dpc_dnnl_consts_changed) */
    _Atomic unsigned long pgen; /* bumped whenever the parameters were bound again (dpc_dnnl_params_changed) */
    dnnl_engine_t eng;
    pthread_mutex_t mu; /* the weight cache: replicas plan concurrently */
    int *nw;
    wentry (*w)[WCACHE_MAX];
    float **wu;           /* dpc's own kernels: conv i's transformed weights (NULL until its first call) */
    unsigned long *wugen; /* and the generation they hold (0: none) */
};

/* A weights operand of a planned primitive: as passed (user) and in the
 * primitive's layout (mem), which is the kept copy, a reorder per call into
 * the replica's buffer (at off), or the passed weights themselves. */
typedef struct pwei {
    dnnl_primitive_t ro;  /* the per-call reorder, NULL when not needed */
    dnnl_memory_t user, mem;
    const void *kept;     /* reordered weights, NULL: w as passed or ro per call */
    unsigned long gen;    /* the generation kept holds (the consts' or the parameters') */
    size_t bytes, off;    /* ro's result: its size, its offset in the replica's buffer */
} pwei;

/* dpc's own kernel computing a conv in place of a primitive (pconv.own) */
enum {
    OWN_NONE,
    OWN_WINO, /* conv_wino.c, nChw8c in and out */
    OWN_STEM, /* conv_stem.c, NCHW in, nChw8c out */
    OWN_FC,   /* conv_fc.c, one pixel: [N][C] in, [N][Co] out (nChw8c's bytes where the channels allow) */
    OWN_MB,   /* conv_mb.c, a depthwise conv computing the 1x1 before it (its head): nChw8c in and out */
    OWN_MB_1X1 /* (the head of an OWN_MB pair: only its weights' transform; it runs deferred) */
};

/* One conv of a planned set. A 1x1 conv whose result only the depthwise
 * conv right after it reads may run inside that conv's primitive, as
 * oneDNN's depthwise post-op (dw_fits): the 1x1's call is then deferred
 * (it leaves its operands in the depthwise conv's pconv and computes
 * nothing), and the depthwise conv's call computes both, from the 1x1's
 * source, its never-written intermediate skipped. */
typedef struct pconv {
    bool declined;
    int own;        /* OWN_*: dpc's kernel, its layouts own_src and own_dst */
    bool deferred;  /* a 1x1 computed by conv `into`'s primitive */
    bool fused;     /* this depthwise conv's primitive computes conv `head` first */
    int into, head;
    int threads;
    char impl[64];
    dnnl_primitive_t conv;
    dnnl_primitive_desc_t pd;          /* between the two passes of a plan */
    dnnl_primitive_t rsrc, rdst, rsum; /* reorders, NULL when not needed */
    dnnl_memory_t src_user, src, bias, dst, dst_user, sum_user, scratch, dw_bias;
    pwei w, dw;    /* the weights; a fused conv's: the 1x1's, and its own (dw) */
    bool keep_y;   /* the result stays in the primitive's layout (NHWC) */
    bool opaque_y; /* kept, and in the primitive's own layout (ymd), which its readers' primitives share */
    bool blk_y;    /* kept in nChw8c, the primitive's and its conv readers', which its NHWC readers loop over */
    dnnl_memory_desc_t ymd;
    dnnl_memory_desc_t own_src, own_dst;
    const float *hx, *hw, *hbias; /* fused: the deferred 1x1's operands this forward */
    const float *hy;              /* and its result (this conv's source) */
    size_t src_bytes, dst_bytes, scratch_bytes, y_bytes, own_bytes;
} pconv;

#define SETS_MAX 4
typedef struct pset {
    int64_t N;
    int threads;
    unsigned long used;
    pconv *p;
} pset;

struct dpc_dnnl_rconvs {
    dpc_dnnl_convs *c;
    dnnl_stream_t stream;
    pset sets[SETS_MAX];
    int nsets;
    pset *cur;
    unsigned long tick;
    void *srcb, *dstb, *weib, *scratchb, *ownb; /* per replica, grown by plan */
    size_t srcb_n, dstb_n, weib_n, scratchb_n, ownb_n;
};

bool dpc_dnnl_avx512(void) {
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), want = (unsigned)dnnl_cpu_isa_avx512_core;
    return (isa & want) == want;
}

/* DPC_CONV_AUTO's layout for convs d[0..n). With AVX-512, NHWC: oneDNN's
 * brgemm kernels, its Winograd and the fused 1x1 + depthwise pairs, all
 * planned around NHWC, measured fastest there. Without it oneDNN 2.6 has
 * no brgemm convolution, and its direct kernels (jit:avx2, jit_1x1,
 * jit_dw) ran 5-40% faster in their blocked layout (nChw8c) than in NHWC
 * (docs/performance.md, "The AVX2 layout"); the convs then keep their
 * results in it between them (opaque_fits), and the pools and
 * squeeze-excitation kernels that read them loop over it too (y_blk,
 * blk_fits). But a result a reader without such a loop reads (ConvNeXt's
 * permute copies) costs two reorders in the blocked layout, out of it and
 * back: blocked is chosen when the kernels' gain, taken as 15% of the
 * multiply-adds, outweighs those reorders at about 50 multiply-adds' time
 * per element (both measured on an AVX2 box: blocked on ResNet, VGG,
 * AlexNet, MobileNet v2, and since the nChw8c loops on EfficientNet-B0 and
 * MobileNet v3 too; NHWC on ConvNeXt, whose depthwise results its
 * LayerNorms read through a permute). */
static int auto_layout(const dpc_conv_desc *d, int n) {
    if (dpc_dnnl_avx512())
        return DPC_CONV_NHWC;
    double gain = 0, cost = 0;
    for (int i = 0; i < n; i++) {
        double out = (double)d[i].Co * (double)(d[i].Ho * d[i].Wo);
        gain += 0.15 * out * (double)(d[i].C / d[i].groups) * (double)(d[i].kh * d[i].kw);
        if (d[i].y_keep && !d[i].y_convs && !d[i].y_blk)
            cost += 50 * out;
    }
    return gain > cost ? DPC_CONV_BLOCKED : DPC_CONV_NHWC;
}

dpc_status dpc_dnnl_convs_new(const dpc_unit *u, float *const *params, const dpc_conv_env *env_in,
                              dpc_dnnl_threads_fn set_threads, dpc_dnnl_convs **out, dpc_err *e) {
    *out = NULL;
    int n = dpc_unit_nconvs(u);
    if (n == 0 || !env_in->on)
        return DPC_OK;
    dpc_conv_env env0 = *env_in, *env = &env0;
    dpc_dnnl_convs *c = dpc_calloc(1, sizeof *c);
    if (c) {
        c->d = dpc_calloc((size_t)n, sizeof *c->d);
        c->nw = dpc_calloc((size_t)n, sizeof *c->nw);
        c->w = dpc_calloc((size_t)n, sizeof *c->w);
        c->wu = dpc_calloc((size_t)n, sizeof *c->wu);
        c->wugen = dpc_calloc((size_t)n, sizeof *c->wugen);
    }
    if (!c || !c->d || !c->nw || !c->w || !c->wu || !c->wugen) {
        if (c) {
            free(c->d);
            free(c->nw);
            free(c->w);
            free(c->wu);
            free(c->wugen);
        }
        free(c);
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    }
    c->n = n;
    c->params = params;
    c->set_threads = set_threads;
    for (int i = 0; i < n; i++)
        dpc_unit_conv(u, i, &c->d[i]);
    if (env->layout == DPC_CONV_AUTO)
        dpc_conv_env_resolve(env, auto_layout(c->d, n));
    c->layout = env->layout;
    c->keep = env->keep;
    /* Winograd: oneDNN's in the NHWC layout (AVX-512 only), dpc's own in
     * the blocked one, without AVX-512, where oneDNN's kernels are nChw8c */
    c->wino = env->wino && c->layout == DPC_CONV_NHWC;
    bool own = c->layout == DPC_CONV_BLOCKED && !dpc_dnnl_avx512() && dpc_avx2_cpu(); /* dpc's AVX2 kernels */
    c->own_wino = env->wino && own;
    c->own_stem = env->stem && own;
    c->own_fc = env->fc && own;
    c->own_mb = own ? env->mb : DPC_CONV_MB_NEVER;
    c->dw = env->dw;
    atomic_init(&c->gen, 1);
    atomic_init(&c->pgen, 1);
    pthread_mutex_init(&c->mu, NULL);
    if (dnnl_engine_create(&c->eng, dnnl_cpu, 0) != dnnl_success) {
        dpc_dnnl_convs_free(c);
        return dpc_errf(e, DPC_EDEVICE, "oneDNN: cannot create a CPU engine");
    }
    *out = c;
    return DPC_OK;
}

void dpc_dnnl_convs_free(dpc_dnnl_convs *c) {
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < c->nw[i]; j++)
            free(c->w[i][j].data);
    for (int i = 0; i < c->n; i++)
        free(c->wu[i]);
    if (c->eng)
        dnnl_engine_destroy(c->eng);
    pthread_mutex_destroy(&c->mu);
    free(c->d);
    free(c->nw);
    free(c->w);
    free(c->wu);
    free(c->wugen);
    free(c);
}

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

static void pconv_free(pconv *p) {
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

/* Whether conv d's post-ops add a residual (oneDNN's sum). */
static bool sums(const dpc_conv_desc *d) { return dpc_post_has(d, DPC_ACT_SUM); }

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
static dnnl_primitive_attr_t make_attr(const dpc_conv_desc *d, const dpc_conv_desc *dw) {
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
    dnnl_primitive_attr_t a = make_attr(NULL, NULL);
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
static const void *kept_weights(dpc_dnnl_rconvs *r, int i, const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *user,
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

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* A conv oneDNN's Winograd kernels take and that measured faster there:
 * 3x3, stride 1, no dilation, not grouped, 32+ channels in and out (the
 * stem's 3 input channels ran 5x slower). */
static bool wino_fits(const dpc_conv_desc *d) {
    return d->kh == 3 && d->kw == 3 && d->stride[0] == 1 && d->stride[1] == 1 && d->dil[0] == 1 && d->dil[1] == 1 &&
           d->groups == 1 && d->C >= 32 && d->Co >= 32;
}

/* Conv p runs dpc's kernel `own` in place of a primitive, reading its
 * source in layout src and writing its result in dst. */
static void plan_own(pconv *p, int own, const dnnl_dims_t sd, const dnnl_dims_t dd, dnnl_format_tag_t src,
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
static void plan_prim(dpc_dnnl_rconvs *r, int i, int64_t N, int threads, pconv *p) {
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
        plan_own(p, OWN_WINO, sd, dd, dnnl_aBcd8b, dnnl_aBcd8b, "wino:dpc_avx2");
        return;
    }
    if (c->own_fc && dpc_fc_fits(d) && (d->w_param >= 0 || d->w_const)) {
        /* one pixel (a squeeze-excitation's fc convs): a matrix-vector
         * product, where oneDNN's 1x1 kernel spends ~10 us a call in setup
         * (conv_fc.h) */
        plan_own(p, OWN_FC, sd, dd, pixel_tag(d->C), pixel_tag(d->Co), "gemv:dpc_avx2");
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
    dnnl_primitive_attr_t attr = make_attr(d, NULL);
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
        plan_own(p, OWN_STEM, sd, dd, dnnl_nchw, dnnl_aBcd8b, "direct:dpc_stem_avx2");
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
        if ((pw->kept = kept_weights(r, i, md, user, c->params[d->w_param], pgen, st, e)))
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

/* The layouts conv p computes from and into: its primitive's (between the
 * two passes of a plan) or dpc's Winograd's; NULL when it has neither. */
static const dnnl_memory_desc_t *src_md_of(const pconv *p) {
    return p->own ? &p->own_src : p->pd ? dnnl_primitive_desc_query_md(p->pd, dnnl_query_src_md, 0) : NULL;
}

static const dnnl_memory_desc_t *dst_md_of(const pconv *p) {
    return p->own ? &p->own_dst : p->pd ? dnnl_primitive_desc_query_md(p->pd, dnnl_query_dst_md, 0) : NULL;
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

/* Whether md is nChw8c over dims (no channels padded: sizes equal). */
static bool is_blk8(const dnnl_memory_desc_t *md, const dnnl_dims_t dims) {
    dnnl_memory_desc_t b;
    return md && dims[1] % 8 == 0 && dnnl_memory_desc_init_by_tag(&b, 4, dims, dnnl_f32, dnnl_aBcd8b) == dnnl_success &&
           dnnl_memory_desc_equal(md, &b);
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
static dpc_status plan_io(dpc_dnnl_rconvs *r, int i, int64_t N, pconv *p, const pconv *sp, const pconv *up,
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

/* Whether conv b may compute conv a, whose result it reads, in its call
 * (a's then deferred): both run (as primitives or dpc's kernels), b is the
 * next kernel and the only reader of a's result, which stays in the
 * library's layout (a's epilogue all post-ops), and neither adds a
 * residual. The geometry is dw_fits's and dpc_mb_fits's. */
static bool pair_fits(const dpc_dnnl_convs *c, const pconv *ps, int a, int b) {
    const dpc_conv_desc *x = &c->d[a], *y = &c->d[b];
    if (ps[a].declined || ps[b].declined || !ps[a].keep_y || y->src_conv != a || y->sum_conv == a ||
        y->kernel != x->kernel + 1)
        return false;
    for (int j = 0; j < c->n; j++)
        if (j != b && (c->d[j].src_conv == a || c->d[j].sum_conv == a))
            return false;
    return !sums(x) && !sums(y);
}

/* Whether 1x1 conv a and depthwise conv b may run as one primitive (the
 * depthwise one as oneDNN's dw post-op, which it implements for a 1x1
 * source): b is the next kernel and the only reader of a's result, which
 * stays NHWC (its epilogue all post-ops, no residual in either), b's
 * padding is centred (its output ceil(H / stride)), b has stride 2, the
 * batch is at least DW_MIN_BATCH and the intermediate (a's result) at
 * least DW_MIN_PIXELS an image. The fused primitive computes in the blocked
 * layout (plan_fused), so it pays a reorder into it and one out of it; it
 * gains only where what it saves, the intermediate's round trip to memory,
 * is large against that: a stride-2 depthwise conv (whose result is a
 * quarter of its source) at 56x56 pixels or more, at batch 8 or more. At
 * batch 1 and for the stride-1 pairs, and the stride-2 ones at 28x28 and
 * below, it was slower (docs/performance.md, "1x1 + depthwise in the
 * blocked layout"). */
#define DW_MIN_BATCH 8
#define DW_MIN_PIXELS (56 * 56)
static bool dw_fits(const dpc_dnnl_convs *c, const pconv *ps, int a, int b, int64_t N) {
    const dpc_conv_desc *x = &c->d[a], *y = &c->d[b];
    if (!c->dw || !pair_fits(c, ps, a, b) || !y->bias)
        return false;
    bool one = x->kh == 1 && x->kw == 1 && x->stride[0] == 1 && x->stride[1] == 1 && x->groups == 1 &&
               x->pad_l[0] == 0 && x->pad_l[1] == 0 && x->pad_r[0] == 0 && x->pad_r[1] == 0;
    int64_t k = y->kh, st = y->stride[0];
    bool dw = y->groups == y->C && y->Co == y->C && y->C == x->Co && y->kw == k && k % 2 == 1 && y->stride[1] == st &&
              y->dil[0] == 1 && y->dil[1] == 1 && y->pad_l[0] == k / 2 && y->pad_l[1] == k / 2 &&
              y->Ho == (x->Ho + st - 1) / st && y->Wo == (x->Wo + st - 1) / st;
    return one && dw && st == 2 && N >= DW_MIN_BATCH && x->Ho * x->Wo >= DW_MIN_PIXELS;
}

/* The descriptor of one primitive computing 1x1 conv x and depthwise conv
 * y after it, at batch N, source and result in layout tag. */
static dnnl_status_t fused_pd(const dpc_dnnl_convs *c, const dpc_conv_desc *x, const dpc_conv_desc *y, int64_t N,
                              dnnl_format_tag_t tag, dnnl_primitive_desc_t *pd) {
    dnnl_dims_t sd = {N, x->C, x->H, x->W}, dd = {N, x->Co, x->Ho, x->Wo}, wd = {x->Co, x->C, 1, 1}, bd = {x->Co};
    dnnl_memory_desc_t src, dst, wei, bias;
    dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, tag);
    dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, tag);
    dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_a);
    dnnl_dims_t one = {1, 1}, zero = {0, 0};
    dnnl_convolution_desc_t cd;
    *pd = NULL;
    dnnl_primitive_attr_t attr = make_attr(x, y);
    dnnl_status_t s = attr ? dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                                       dnnl_convolution_direct, &src, &wei,
                                                                       x->bias ? &bias : NULL, &dst, one, zero, zero, zero)
                           : dnnl_out_of_memory;
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(pd, &cd, attr, c->eng, NULL);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return s;
}

/* The primitive that reads conv q's source: a deferred 1x1's is the
 * fused pair's (dw_fits), whose source is the 1x1's. */
static const pconv *reader_of(const pconv *ps, const pconv *q) { return q->deferred ? &ps[q->into] : q; }

/* Whether conv i's kept result may stay in its primitive's own layout
 * (p->opaque_y), which is then p->ymd: only convs read it (y_convs), as
 * their source or residual, and each reader's primitive takes that very
 * layout there (no reorder on either side), which holds exactly the
 * result's N*C*H*W floats (no channels padded to a block). In the NHWC
 * layout this changes nothing; in the blocked ones (oneDNN's nChw8c
 * kernels without AVX-512, Winograd's) a chain of convs then reorders
 * only at its ends. A pair run as one primitive (dw_fits) reads the 1x1's
 * source and writes the depthwise conv's result (reader_of). */
static bool opaque_fits(const dpc_dnnl_convs *c, pconv *ps, int i, int64_t N) {
    const dpc_conv_desc *d = &c->d[i];
    pconv *p = &ps[i];
    const dnnl_memory_desc_t *y = dst_md_of(p);
    if (!p->keep_y || !d->y_convs || !y || p->deferred)
        return false;
    if (dnnl_memory_desc_get_size(y) != (size_t)(N * d->Co * d->Ho * d->Wo) * sizeof(float))
        return false;
    bool read = false;
    for (int j = 0; j < c->n; j++) {
        bool src = c->d[j].src_conv == i, sum = c->d[j].sum_conv == i;
        if (!src && !sum)
            continue;
        const pconv *q = &ps[j];
        if (!src_md_of(reader_of(ps, q)) || (sum && (q->fused || q->deferred)))
            return false;
        if (src && !dnnl_memory_desc_equal(y, src_md_of(reader_of(ps, q))))
            return false;
        if (sum && !dnnl_memory_desc_equal(y, dst_md_of(q)))
            return false;
        read = true;
    }
    if (read)
        p->ymd = *y;
    return read;
}

/* Whether conv i's kept result, which NHWC readers read, may be kept in
 * nChw8c (p->blk_y): each of those readers has a loop over it (y_blk,
 * conv_post.c), and the primitive computes it there, as the primitives of
 * the convs that read it (directly or through those readers, as their
 * source or residual) take it. So without AVX-512, where oneDNN's kernels
 * and dpc's Winograd are nChw8c, a max pool between convs or a
 * squeeze-excitation block costs no reorder out and back. */
static bool blk_fits(const dpc_dnnl_convs *c, const pconv *ps, int i, int64_t N) {
    const dpc_conv_desc *d = &c->d[i];
    const pconv *p = &ps[i];
    dnnl_dims_t yd = {N, d->Co, d->Ho, d->Wo};
    if (!p->keep_y || !d->y_blk || p->deferred || !is_blk8(dst_md_of(p), yd))
        return false;
    for (int j = 0; j < c->n; j++) {
        const dpc_conv_desc *r = &c->d[j];
        const pconv *q = &ps[j];
        dnnl_dims_t sd = {N, r->C, r->H, r->W}, dd = {N, r->Co, r->Ho, r->Wo};
        if (r->src_conv == i && !is_blk8(src_md_of(reader_of(ps, q)), sd))
            return false;
        if (r->sum_conv == i && !is_blk8(dst_md_of(q), dd))
            return false;
    }
    return true;
}

/* Whether oneDNN implements pd with its reference (plain C) kernels. */
static bool is_ref(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
           strncmp(impl, "ref", 3) == 0;
}

/* Conv b's primitive computing a and b (dw_fits) at batch N: replaces b's
 * and a's descriptors (a then deferred) when oneDNN implements it. Only in
 * the blocked layouts (16 channels a block for AVX-512, else 8, whichever
 * oneDNN takes first; plan_io adds the reorders from and to NHWC): oneDNN
 * 2.6 accepts the NHWC form too, and computes it wrong (docs/performance.md;
 * tests/ops/dwfuse/mbconv.dp fails with it). */
static void plan_fused(dpc_dnnl_rconvs *r, int a, int b, int64_t N, pconv *ps) {
    dpc_dnnl_convs *c = r->c;
    int threads = ps[a].threads > ps[b].threads ? ps[a].threads : ps[b].threads;
    c->set_threads(threads);
    static const dnnl_format_tag_t tags[] = {dnnl_aBcd16b, dnnl_aBcd8b};
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_unimplemented;
    for (size_t t = 0; s != dnnl_success && t < sizeof tags / sizeof *tags; t++) {
        s = fused_pd(c, &c->d[a], &c->d[b], N, tags[t], &pd);
        if (s == dnnl_success && is_ref(pd)) {
            /* without AVX-512, 16 channels a block is accepted by oneDNN's
             * reference kernels (ref_fused_convolution), many times slower
             * than the two convs unfused (DNNL_MAX_CPU_ISA=AVX2) */
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
            s = dnnl_unimplemented;
        }
    }
    if (s != dnnl_success)
        return; /* both run as they are */
    dnnl_primitive_desc_destroy(ps[a].pd);
    dnnl_primitive_desc_destroy(ps[b].pd);
    ps[a].pd = NULL;
    ps[a].deferred = true;
    ps[a].into = b;
    snprintf(ps[a].impl, sizeof ps[a].impl, "in conv %d", b);
    ps[b].pd = pd;
    ps[b].fused = true;
    ps[b].head = a;
    ps[b].threads = threads;
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(ps[b].impl, sizeof ps[b].impl, "%s+dw", impl ? impl : "?");
}

/* Whether conv d has a SiLU or sigmoid post-op. */
static bool exp_post(const dpc_conv_desc *d) {
    return dpc_post_has(d, DPC_ACT_SWISH) || dpc_post_has(d, DPC_ACT_LOGISTIC);
}

/* Whether 1x1 conv a and depthwise conv b run as dpc's kernel (conv_mb.h),
 * both weights parameters or the prepare kernels' results. By default
 * (DPC_CONV_MB_AUTO) only where either has a SiLU or sigmoid: there it
 * measured 7-15% faster end to end than oneDNN's two primitives
 * (EfficientNet-B0, batch 1 and 8, one and two threads), whose swish
 * post-op costs more than dpc's, while with ReLU6, ReLU or hardswish
 * (MobileNet v2 and v3) oneDNN's 1x1 kernel made the pairs 4-8% faster
 * (docs/performance.md). */
static bool mb_fits(const dpc_dnnl_convs *c, const pconv *ps, int a, int b) {
    const dpc_conv_desc *x = &c->d[a], *y = &c->d[b];
    bool pays = c->own_mb == DPC_CONV_MB_ALL || (c->own_mb == DPC_CONV_MB_AUTO && (exp_post(x) || exp_post(y)));
    return pays && !ps[a].own && !ps[b].own && pair_fits(c, ps, a, b) && dpc_mb_fits(x, y) &&
           (x->w_param >= 0 || x->w_const) && (y->w_param >= 0 || y->w_const);
}

/* Convs a and b (mb_fits) as dpc's kernel in b's call, a deferred: from
 * a's source to b's result, both nChw8c. */
static void plan_mb(dpc_dnnl_convs *c, int a, int b, int64_t N, pconv *ps) {
    const dpc_conv_desc *x = &c->d[a], *y = &c->d[b];
    for (int i = 0; i < 2; i++) {
        pconv *p = &ps[i ? b : a];
        if (p->pd)
            dnnl_primitive_desc_destroy(p->pd);
        p->pd = NULL;
    }
    dnnl_dims_t sd = {N, x->C, x->H, x->W}, dd = {N, y->Co, y->Ho, y->Wo};
    ps[a].deferred = true;
    ps[a].into = b;
    snprintf(ps[a].impl, sizeof ps[a].impl, "in conv %d", b);
    ps[b].fused = true;
    ps[b].head = a;
    ps[b].threads = ps[a].threads > ps[b].threads ? ps[a].threads : ps[b].threads;
    plan_own(&ps[b], OWN_MB, sd, dd, dnnl_aBcd8b, dnnl_aBcd8b, "mbconv:dpc_avx2");
}

static bool grow(void **b, size_t *have, size_t need) {
    if (need <= *have)
        return true;
    free(*b);
    *b = dpc_aligned_alloc(need);
    *have = *b ? need : 0;
    return *b != NULL;
}

dpc_status dpc_dnnl_plan(dpc_dnnl_convs *c, dpc_dnnl_rconvs **rp, int64_t N, int threads, dpc_err *e) {
    if (!c)
        return DPC_OK;
    dpc_dnnl_rconvs *r = *rp;
    if (!r) {
        r = dpc_calloc(1, sizeof *r);
        if (!r)
            return dpc_errf(e, DPC_ENOMEM, "out of memory");
        r->c = c;
        if (dnnl_stream_create(&r->stream, c->eng, dnnl_stream_default_flags) != dnnl_success) {
            free(r);
            return dpc_errf(e, DPC_EDEVICE, "oneDNN: cannot create a stream");
        }
        *rp = r;
    }
    r->tick++;
    for (int i = 0; i < r->nsets; i++)
        if (r->sets[i].N == N && r->sets[i].threads == threads) {
            r->cur = &r->sets[i];
            r->cur->used = r->tick;
            return DPC_OK;
        }
    pset *ps = NULL;
    if (r->nsets < SETS_MAX)
        ps = &r->sets[r->nsets++];
    else { /* the least recently planned */
        ps = &r->sets[0];
        for (int i = 1; i < SETS_MAX; i++)
            if (r->sets[i].used < ps->used)
                ps = &r->sets[i];
        for (int i = 0; i < c->n; i++)
            pconv_free(&ps->p[i]);
        free(ps->p);
    }
    *ps = (pset){.N = N, .threads = threads, .used = r->tick, .p = dpc_calloc((size_t)c->n, sizeof(pconv))};
    r->cur = NULL;
    dpc_status st = ps->p ? DPC_OK : dpc_errf(e, DPC_ENOMEM, "out of memory");
    for (int i = 0; st == DPC_OK && i < c->n; i++)
        plan_prim(r, i, N, threads, &ps->p[i]);
    /* which results stay NHWC: a conv's whose readers are all convs
     * (y_keep) when it and they run as primitives */
    for (int i = 0; st == DPC_OK && c->keep && i < c->n; i++) {
        bool k = c->d[i].y_keep && !ps->p[i].declined;
        for (int j = 0; k && j < c->n; j++)
            if (c->d[j].src_conv == i || c->d[j].sum_conv == i)
                k = !ps->p[j].declined;
        ps->p[i].keep_y = k;
    }
    /* 1x1 + depthwise pairs as one: dpc's kernel, or one primitive */
    for (int b = 0; st == DPC_OK && b < c->n; b++) {
        int a = c->d[b].src_conv;
        if (a < 0 || ps->p[a].deferred || ps->p[a].fused)
            continue;
        if (mb_fits(c, ps->p, a, b))
            plan_mb(c, a, b, N, ps->p);
        else if (dw_fits(c, ps->p, a, b, N))
            plan_fused(r, a, b, N, ps->p);
    }
    /* kept results in their primitives' own layout where it is their readers' */
    for (int i = 0; st == DPC_OK && i < c->n; i++)
        ps->p[i].opaque_y = opaque_fits(c, ps->p, i, N);
    for (int i = 0; st == DPC_OK && i < c->n; i++)
        ps->p[i].blk_y = blk_fits(c, ps->p, i, N);
    for (int i = 0; st == DPC_OK && i < c->n; i++)
        if (!ps->p[i].declined && !ps->p[i].deferred) {
            const dpc_conv_desc *d = &c->d[i], *d0 = &c->d[ps->p[i].fused ? ps->p[i].head : i];
            st = plan_io(r, i, N, &ps->p[i], d0->src_conv >= 0 ? &ps->p[d0->src_conv] : NULL,
                         d->sum_conv >= 0 ? &ps->p[d->sum_conv] : NULL, e);
        }
    size_t sb = 0, db = 0, wb = 0, xb = 0, vb = 0;
    for (int i = 0; st == DPC_OK && i < c->n; i++) {
        sb = max_sz(sb, ps->p[i].src_bytes);
        db = max_sz(db, ps->p[i].dst_bytes);
        wb = max_sz(wb, ps->p[i].w.bytes + ps->p[i].dw.bytes);
        xb = max_sz(xb, ps->p[i].scratch_bytes);
        vb = max_sz(vb, ps->p[i].own_bytes);
    }
    if (st == DPC_OK && !(grow(&r->srcb, &r->srcb_n, sb) && grow(&r->dstb, &r->dstb_n, db) &&
                          grow(&r->weib, &r->weib_n, wb) && grow(&r->scratchb, &r->scratchb_n, xb) &&
                          grow(&r->ownb, &r->ownb_n, vb)))
        st = dpc_errf(e, DPC_ENOMEM, "out of memory: the convolutions need %zu bytes of buffers",
                      sb + db + wb + xb + vb);
    if (st != DPC_OK) {
        for (int i = 0; ps->p && i < c->n; i++)
            pconv_free(&ps->p[i]);
        free(ps->p);
        *ps = r->sets[--r->nsets];
        return st;
    }
    r->cur = ps;
    return DPC_OK;
}

void dpc_dnnl_rconvs_free(dpc_dnnl_rconvs *r) {
    if (!r)
        return;
    for (int s = 0; s < r->nsets; s++) {
        for (int i = 0; i < r->c->n; i++)
            pconv_free(&r->sets[s].p[i]);
        free(r->sets[s].p);
    }
    if (r->stream)
        dnnl_stream_destroy(r->stream);
    free(r->srcb);
    free(r->dstb);
    free(r->weib);
    free(r->scratchb);
    free(r->ownb);
    free(r);
}

const char *dpc_dnnl_impl(const dpc_dnnl_rconvs *r, int i) {
    return r && r->cur && i >= 0 && i < r->c->n ? r->cur->p[i].impl : "none";
}

int dpc_dnnl_kept(const dpc_dnnl_rconvs *r, int i) {
    if (!r || !r->cur || i < 0 || i >= r->c->n)
        return 0;
    const pconv *p = &r->cur->p[i];
    return p->blk_y ? DPC_KEPT_NCHW8C : p->keep_y ? DPC_KEPT_NHWC : 0;
}

/* ------------------------------------------------------- running */

static dnnl_status_t run_reorder(dpc_dnnl_rconvs *r, dnnl_primitive_t p, dnnl_memory_t from, dnnl_memory_t to,
                                 dnnl_memory_t scratch) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratch}};
    return dnnl_primitive_execute(p, r->stream, 3, args);
}

void dpc_dnnl_consts_changed(dpc_dnnl_convs *c) {
    if (c)
        atomic_fetch_add(&c->gen, 1);
}

void dpc_dnnl_params_changed(dpc_dnnl_convs *c) {
    if (c)
        atomic_fetch_add(&c->pgen, 1);
}

/* Binds conv i's weights w (in the layout of pw->user) to pw->mem: the
 * kept copy (reordered again when the prepare kernels ran or the
 * parameters were bound since), a reorder into the replica's buffer, or w
 * itself (scratch: the calling primitive's). 0, or -1 with *e set. */
static int bind_weights(dpc_dnnl_rconvs *r, int i, pwei *pw, const float *w, dnnl_memory_t scratch, dpc_err *e) {
    const dpc_conv_desc *d = &r->c->d[i];
    const dnnl_memory_desc_t *wmd, *umd;
    dnnl_memory_get_memory_desc(pw->mem, &wmd);
    dnnl_memory_get_memory_desc(pw->user, &umd);
    dpc_status st = DPC_OK;
    if (d->w_const && pw->ro) {
        /* the prepare kernels' weights, reordered once per generation */
        unsigned long gen = atomic_load(&r->c->gen);
        if (pw->gen != gen) {
            pw->kept = kept_weights(r, i, wmd, umd, w, gen, &st, e);
            if (st != DPC_OK)
                return -1;
            pw->gen = pw->kept ? gen : 0;
        }
    }
    if (d->w_param >= 0 && pw->kept && pw->gen != atomic_load(&r->c->pgen)) {
        /* the parameters were bound again: their kept layout reordered
         * again, from the new values, once per bind */
        unsigned long pgen = atomic_load(&r->c->pgen);
        pw->kept = kept_weights(r, i, wmd, umd, w, pgen, &st, e);
        if (!pw->kept && st == DPC_OK) /* (its entry exists: never full here) */
            dpc_errf(e, DPC_EINTERNAL, "oneDNN: no kept weights for convolution %d", i);
        if (!pw->kept)
            return -1;
        pw->gen = pgen;
    }
    dnnl_status_t s;
    if (pw->kept)
        s = dnnl_memory_set_data_handle_v2(pw->mem, (void *)pw->kept, r->stream);
    else if (pw->ro) {
        dnnl_memory_set_data_handle_v2(pw->user, (void *)w, r->stream);
        dnnl_memory_set_data_handle_v2(pw->mem, (char *)r->weib + pw->off, r->stream);
        s = run_reorder(r, pw->ro, pw->user, pw->mem, scratch);
    } else
        s = dnnl_memory_set_data_handle_v2(pw->mem, (void *)w, r->stream);
    if (s != dnnl_success) {
        dpc_errf(e, DPC_EDEVICE, "oneDNN: binding the weights of convolution %d failed (status %d)", i, (int)s);
        return -1;
    }
    return 0;
}

/* dpc's kernels' weight transforms, by OWN_*: the size in floats, the
 * transform of the OIHW weights. */
static const struct {
    size_t (*size)(const dpc_conv_desc *d);
    void (*transform)(const dpc_conv_desc *d, const float *w, float *u);
} OWN_WEIGHTS[] = {
    [OWN_WINO] = {dpc_wino_weights_size, dpc_wino_weights},
    [OWN_STEM] = {dpc_stem_weights_size, dpc_stem_weights},
    [OWN_FC] = {dpc_fc_weights_size, dpc_fc_weights},
    [OWN_MB] = {dpc_mb_dw_size, dpc_mb_dw_weights},
    [OWN_MB_1X1] = {dpc_mb_1x1_size, dpc_mb_1x1_weights},
};

/* Conv i's weights w transformed for dpc's kernel `own` (Winograd's, the
 * stem's panels, the one-pixel kernel's transposed panels): once per
 * generation (the parameters', or the consts' when a prepare kernel
 * computes them), kept by the backend for all its replicas. A conv runs
 * at most one of them, at whatever batch size (each is chosen from its
 * geometry). NULL on failure (e set). */
static const float *own_weights(dpc_dnnl_rconvs *r, int i, int own, const float *w, dpc_err *e) {
    dpc_dnnl_convs *c = r->c;
    const dpc_conv_desc *d = &c->d[i];
    unsigned long gen = atomic_load(d->w_param >= 0 ? &c->pgen : &c->gen);
    pthread_mutex_lock(&c->mu);
    if (!c->wu[i])
        c->wu[i] = dpc_aligned_alloc(OWN_WEIGHTS[own].size(d) * sizeof(float));
    if (c->wu[i] && c->wugen[i] != gen) {
        OWN_WEIGHTS[own].transform(d, w, c->wu[i]);
        c->wugen[i] = gen;
    }
    const float *u = c->wu[i];
    pthread_mutex_unlock(&c->mu);
    if (!u)
        dpc_errf(e, DPC_ENOMEM, "out of memory: the transformed weights of convolution %d", i);
    return u;
}

int dpc_dnnl_run(dpc_dnnl_rconvs *r, int i, const float *x, const float *w, const float *bias, const float *sum,
                 float *y, dpc_err *e) {
    if (!r || !r->cur || i < 0 || i >= r->c->n)
        return 1;
    pconv *p = &r->cur->p[i];
    if (p->declined)
        return 1;
    if (p->deferred) { /* conv `into`, the next kernel, computes it */
        pconv *q = &r->cur->p[p->into];
        q->hx = x;
        q->hw = w;
        q->hbias = bias;
        q->hy = y;
        return 0;
    }
    int i0 = i; /* whose weights p->w are */
    const float *dw_w = NULL, *dw_bias = NULL;
    if (p->fused) {
        if (!p->hy || x != p->hy) {
            dpc_errf(e, DPC_EINTERNAL, "oneDNN: convolution %d does not read the result of convolution %d", i, p->head);
            return -1;
        }
        i0 = p->head;
        dw_w = w;
        dw_bias = bias;
        x = p->hx;
        w = p->hw;
        bias = p->hbias;
        p->hy = NULL;
    }
    r->c->set_threads(p->threads);
    /* the handles: the caller's tensors, the replica's buffers */
    dnnl_status_t s = dnnl_memory_set_data_handle_v2(p->scratch, r->scratchb, r->stream);
    if (s == dnnl_success && p->rsrc) {
        dnnl_memory_set_data_handle_v2(p->src_user, (void *)x, r->stream);
        dnnl_memory_set_data_handle_v2(p->src, r->srcb, r->stream);
        s = run_reorder(r, p->rsrc, p->src_user, p->src, p->scratch);
    } else if (s == dnnl_success)
        s = dnnl_memory_set_data_handle_v2(p->src, (void *)x, r->stream);
    if (s == dnnl_success && !p->own &&
        (bind_weights(r, i0, &p->w, w, p->scratch, e) < 0 ||
         (p->fused && bind_weights(r, i, &p->dw, dw_w, p->scratch, e) < 0)))
        return -1;
    if (s == dnnl_success && bias)
        s = dnnl_memory_set_data_handle_v2(p->bias, (void *)bias, r->stream);
    if (s == dnnl_success && p->fused && !p->own)
        s = dnnl_memory_set_data_handle_v2(p->dw_bias, (void *)dw_bias, r->stream);
    /* the result: in y when the primitive's layout is y's (and a residual
     * in another layout is not y itself), else in the replica's buffer */
    bool via = p->rdst || (sum && sum == y && p->rsum);
    if (s == dnnl_success)
        s = dnnl_memory_set_data_handle_v2(p->dst, via ? r->dstb : y, r->stream);
    if (s == dnnl_success && sum) { /* the residual into the result */
        if (p->rsum) {
            dnnl_memory_set_data_handle_v2(p->sum_user, (void *)sum, r->stream);
            s = run_reorder(r, p->rsum, p->sum_user, p->dst, p->scratch);
        } else if (via)
            memcpy(r->dstb, sum, p->y_bytes);
        else if (sum != y)
            memmove(y, sum, p->y_bytes);
    }
    if (s == dnnl_success && p->own) { /* dpc's kernel, after the reorders before it */
        /* (a pair's: the depthwise conv's weights, then its head's) */
        const float *u = own_weights(r, i, p->own, p->fused ? dw_w : w, e);
        const float *uh = u && p->fused ? own_weights(r, p->head, OWN_MB_1X1, w, e) : NULL;
        if (!u || (p->fused && !uh))
            return -1;
        s = dnnl_stream_wait(r->stream);
        const dpc_conv_desc *d = &r->c->d[i];
        const float *src = p->rsrc ? r->srcb : x;
        float *dst = via ? r->dstb : y;
        if (s == dnnl_success && p->own == OWN_WINO)
            dpc_wino_run(d, r->cur->N, src, u, bias, dst, r->ownb, p->threads);
        else if (s == dnnl_success && p->own == OWN_STEM)
            dpc_stem_run(d, r->cur->N, src, u, bias, dst, r->ownb, p->threads);
        else if (s == dnnl_success && p->own == OWN_FC)
            dpc_fc_run(d, r->cur->N, src, u, bias, dst, p->threads);
        else if (s == dnnl_success)
            dpc_mb_run(&r->c->d[p->head], d, r->cur->N, src, uh, bias, u, dw_bias, dst, r->ownb, p->threads);
    } else if (s == dnnl_success) {
        dnnl_exec_arg_t args[7] = {{DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->w.mem}, {DNNL_ARG_DST, p->dst},
                                   {DNNL_ARG_SCRATCHPAD, p->scratch}};
        int na = 4;
        if (bias)
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->bias};
        if (p->fused) {
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, p->dw.mem};
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, p->dw_bias};
        }
        s = dnnl_primitive_execute(p->conv, r->stream, na, args);
    }
    if (s == dnnl_success && p->rdst) {
        dnnl_memory_set_data_handle_v2(p->dst_user, y, r->stream);
        s = run_reorder(r, p->rdst, p->dst, p->dst_user, p->scratch);
    }
    if (s == dnnl_success)
        s = dnnl_stream_wait(r->stream);
    if (s == dnnl_success && via && !p->rdst)
        memcpy(y, r->dstb, p->y_bytes);
    if (s != dnnl_success) {
        dpc_errf(e, DPC_EDEVICE, "oneDNN: convolution %d failed (status %d)", i, (int)s);
        return -1;
    }
    return 0;
}
#else
typedef int dpc_conv_dnnl_unused; /* ISO C: a translation unit is not empty */
#endif
