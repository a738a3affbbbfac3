/* conv_dnnl_plan.c - the plan of a unit's oneDNN convolutions for one
 * batch size (dpc_dnnl_plan): which 1x1 convs run inside the depthwise conv
 * after them (oneDNN's fused post-op, or dpc's mb kernel), which results
 * stay in a primitive's own or blocked layout between convs, the
 * replica's buffers grown to the largest conv; and the plan's queries. One
 * conv's primitive is conv_dnnl_prim.c. */
#ifdef DPC_USE_DNNL
#include "conv_dnnl_impl.h"
#include "conv_mb.h"
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    dnnl_primitive_attr_t attr = dpc_dnnl_make_attr(x, y);
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
    dpc_dnnl_plan_own(&ps[b], OWN_MB, sd, dd, dnnl_aBcd8b, dnnl_aBcd8b, "mbconv:dpc_avx2");
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
            dpc_dnnl_pconv_free(&ps->p[i]);
        free(ps->p);
    }
    *ps = (pset){.N = N, .threads = threads, .used = r->tick, .p = dpc_calloc((size_t)c->n, sizeof(pconv))};
    r->cur = NULL;
    dpc_status st = ps->p ? DPC_OK : dpc_errf(e, DPC_ENOMEM, "out of memory");
    for (int i = 0; st == DPC_OK && i < c->n; i++)
        dpc_dnnl_plan_prim(r, i, N, threads, &ps->p[i]);
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
            st = dpc_dnnl_plan_io(r, i, N, &ps->p[i], d0->src_conv >= 0 ? &ps->p[d0->src_conv] : NULL,
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
            dpc_dnnl_pconv_free(&ps->p[i]);
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
            dpc_dnnl_pconv_free(&r->sets[s].p[i]);
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
#else
typedef int dpc_conv_dnnl_unused; /* ISO C: a translation unit is not empty */
#endif
