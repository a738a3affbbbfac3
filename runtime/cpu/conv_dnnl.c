/* conv_dnnl.c - convolutions as oneDNN primitives (conv_dnnl.h): the set
 * of a unit's convs (its options, the weight cache) and running one conv
 * of a plan (the handles, the weights bound or reordered, dpc's own
 * kernels or the primitive, the reorders around). Choosing and creating a
 * conv's primitive is conv_dnnl_prim.c; the plan per batch size,
 * conv_dnnl_plan.c. */
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
            pw->kept = dpc_dnnl_kept_weights(r, i, wmd, umd, w, gen, &st, e);
            if (st != DPC_OK)
                return -1;
            pw->gen = pw->kept ? gen : 0;
        }
    }
    if (d->w_param >= 0 && pw->kept && pw->gen != atomic_load(&r->c->pgen)) {
        /* the parameters were bound again: their kept layout reordered
         * again, from the new values, once per bind */
        unsigned long pgen = atomic_load(&r->c->pgen);
        pw->kept = dpc_dnnl_kept_weights(r, i, wmd, umd, w, pgen, &st, e);
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

/* Conv i by dpc's own kernel (p->own), with its transformed weights (a
 * pair's: the depthwise conv's, then its head's); x, w and bias are the
 * conv's operands (a pair's: its head's), dst where the result goes. -1
 * (e set) when the weights cannot be made, else 0 with the status in *s. */
static int run_own(dpc_dnnl_rconvs *r, int i, const float *x, const float *w, const float *bias, const float *dw_w,
                   const float *dw_bias, float *dst, dnnl_status_t *s, dpc_err *e) {
    pconv *p = &r->cur->p[i];
    const float *u = own_weights(r, i, p->own, p->fused ? dw_w : w, e);
    const float *uh = u && p->fused ? own_weights(r, p->head, OWN_MB_1X1, w, e) : NULL;
    if (!u || (p->fused && !uh))
        return -1;
    *s = dnnl_stream_wait(r->stream);
    const dpc_conv_desc *d = &r->c->d[i];
    const float *src = p->rsrc ? r->srcb : x;
    if (*s == dnnl_success && p->own == OWN_WINO)
        dpc_wino_run(d, r->cur->N, src, u, bias, dst, r->ownb, p->threads);
    else if (*s == dnnl_success && p->own == OWN_STEM)
        dpc_stem_run(d, r->cur->N, src, u, bias, dst, r->ownb, p->threads);
    else if (*s == dnnl_success && p->own == OWN_FC)
        dpc_fc_run(d, r->cur->N, src, u, bias, dst, p->threads);
    else if (*s == dnnl_success)
        dpc_mb_run(&r->c->d[p->head], d, r->cur->N, src, uh, bias, u, dw_bias, dst, r->ownb, p->threads);
    return 0;
}

/* Conv p's primitive on the handles set (bias: whether it has one). */
static dnnl_status_t run_prim(dpc_dnnl_rconvs *r, pconv *p, bool bias) {
    dnnl_exec_arg_t args[7] = {{DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->w.mem}, {DNNL_ARG_DST, p->dst},
                               {DNNL_ARG_SCRATCHPAD, p->scratch}};
    int na = 4;
    if (bias)
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->bias};
    if (p->fused) {
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, p->dw.mem};
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, p->dw_bias};
    }
    return dnnl_primitive_execute(p->conv, r->stream, na, args);
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
        if (run_own(r, i, x, w, bias, dw_w, dw_bias, via ? r->dstb : y, &s, e) < 0)
            return -1;
    } else if (s == dnnl_success) {
        s = run_prim(r, p, bias != NULL);
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
