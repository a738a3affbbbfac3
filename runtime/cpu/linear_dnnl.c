/* linear_dnnl.c - small-batch linears as oneDNN matmul primitives (linear_dnnl.h). */
#ifdef DPC_USE_DNNL
#include "linear_dnnl.h"
#include "conv_dnnl.h"

#include "gemm_rows.h"
#include "tensor.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A linear's weights in the layout its primitives asked for, packed once
 * per generation of the prepare kernels' results. */
typedef struct packed {
    bool have;
    dnnl_memory_desc_t md;
    void *data;
    unsigned long gen;
} packed;

/* A linear's W^T with each row DPC_LINEAR_LD_PAD floats longer, copied
 * once per generation (padded_wt). */
typedef struct padded {
    float *data;
    unsigned long gen;
} padded;

struct dpc_dnnl_linears {
    int nbufs;
    bool pad;                  /* sgemm against a padded copy of W^T where the matmul does not run */
    dnnl_engine_t eng;
    _Atomic unsigned long gen; /* bumped whenever the prepare kernels ran */
    pthread_mutex_t mu;        /* the packed weights: replicas run concurrently */
    packed *w;                 /* by buffer id */
    padded *pw;                /* by buffer id */
};

/* One linear's primitive in a replica, for one (M, threads). */
typedef struct rlin {
    int64_t m;
    int threads;
    bool declined;
    bool padded;   /* the last call ran padded_sgemm */
    char impl[48];
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst, scratch;
    size_t scratch_bytes;
} rlin;

struct dpc_dnnl_rlinears {
    dpc_dnnl_linears *c;
    dnnl_stream_t stream;
    rlin *l; /* by buffer id */
    void *scratchb;
    size_t scratchb_n;
};

dpc_status dpc_dnnl_linears_new(int nbufs, bool on, dpc_dnnl_linears **out, dpc_err *e) {
    *out = NULL;
    if (!on || nbufs <= 0)
        return DPC_OK;
    dpc_dnnl_linears *c = dpc_calloc(1, sizeof *c);
    if (c) {
        c->w = dpc_calloc((size_t)nbufs, sizeof *c->w);
        c->pw = dpc_calloc((size_t)nbufs, sizeof *c->pw);
    }
    if (!c || !c->w || !c->pw) {
        if (c)
            free(c->w);
        free(c);
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    }
    c->nbufs = nbufs;
    c->pad = !dpc_dnnl_avx512();
    atomic_init(&c->gen, 1);
    pthread_mutex_init(&c->mu, NULL);
    if (dnnl_engine_create(&c->eng, dnnl_cpu, 0) != dnnl_success) {
        dpc_dnnl_linears_free(c);
        return dpc_errf(e, DPC_EDEVICE, "oneDNN: cannot create a CPU engine");
    }
    *out = c;
    return DPC_OK;
}

void dpc_dnnl_linears_free(dpc_dnnl_linears *c) {
    if (!c)
        return;
    for (int i = 0; i < c->nbufs; i++) {
        free(c->w[i].data);
        free(c->pw[i].data);
    }
    if (c->eng)
        dnnl_engine_destroy(c->eng);
    pthread_mutex_destroy(&c->mu);
    free(c->w);
    free(c->pw);
    free(c);
}

static void rlin_free(rlin *l) {
    if (l->prim)
        dnnl_primitive_destroy(l->prim);
    dnnl_memory_t *m[] = {&l->src, &l->wei, &l->dst, &l->scratch};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        if (*m[i])
            dnnl_memory_destroy(*m[i]);
    *l = (rlin){0};
}

void dpc_dnnl_rlinears_free(dpc_dnnl_rlinears *r) {
    if (!r)
        return;
    for (int i = 0; i < r->c->nbufs; i++)
        rlin_free(&r->l[i]);
    if (r->stream)
        dnnl_stream_destroy(r->stream);
    free(r->l);
    free(r->scratchb);
    free(r);
}

void dpc_dnnl_linears_changed(dpc_dnnl_linears *c) {
    if (c)
        atomic_fetch_add(&c->gen, 1);
}

/* ------------------------------------------------------- planning */

static dnnl_memory_desc_t md2(int64_t r, int64_t c, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t md;
    dnnl_dims_t d = {(dnnl_dim_t)r, (dnnl_dim_t)c};
    dnnl_memory_desc_init_by_tag(&md, 2, d, dnnl_f32, tag);
    return md;
}

/* The primitive for l->m rows on l->threads threads (the caller set
 * OpenMP's count: oneDNN's brgemm blocks for it). Only oneDNN's brgemm
 * kernels measured faster than sgemm; any other choice is declined, as is
 * a weights layout other than the one this linear's weights were packed
 * in by another replica or size. */
static dnnl_status_t plan(dpc_dnnl_rlinears *r, int id, rlin *l, int64_t n, int64_t k) {
    dpc_dnnl_linears *c = r->c;
    dnnl_memory_desc_t a = md2(l->m, k, dnnl_ab), w = md2(k, n, dnnl_format_tag_any), y = md2(l->m, n, dnnl_ab);
    dnnl_matmul_desc_t d;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_matmul_desc_init(&d, &a, &w, NULL, &y);
    if (s == dnnl_success)
        s = dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success)
        s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(&pd, &d, attr, c->eng, NULL);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) {
        l->declined = true;
        return dnnl_success;
    }
    const char *impl = "";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(l->impl, sizeof l->impl, "%s", impl);
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    pthread_mutex_lock(&c->mu);
    packed *p = &c->w[id];
    bool ok = strncmp(impl, "brg", 3) == 0 && (!p->have || dnnl_memory_desc_equal(&p->md, wmd));
    if (ok && !p->have) {
        size_t bytes = dnnl_memory_desc_get_size(wmd);
        p->data = dpc_aligned_alloc(bytes ? bytes : 64);
        if (!p->data)
            s = dnnl_out_of_memory;
        else {
            p->md = *wmd;
            p->have = true;
            p->gen = 0; /* packed at the first call */
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (s == dnnl_success && ok) {
        l->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
        s = dnnl_primitive_create(&l->prim, pd);
        if (s == dnnl_success)
            s = dnnl_memory_create(&l->src, &a, c->eng, DNNL_MEMORY_NONE);
        if (s == dnnl_success)
            s = dnnl_memory_create(&l->wei, wmd, c->eng, DNNL_MEMORY_NONE);
        if (s == dnnl_success)
            s = dnnl_memory_create(&l->dst, &y, c->eng, DNNL_MEMORY_NONE);
        if (s == dnnl_success && l->scratch_bytes)
            s = dnnl_memory_create(&l->scratch, smd, c->eng, DNNL_MEMORY_NONE);
    }
    dnnl_primitive_desc_destroy(pd);
    if (!ok)
        l->declined = true;
    return s;
}

/* Packs W^T (wt, [k, n] row-major) into the shared layout, once per
 * generation. */
static dnnl_status_t pack(dpc_dnnl_rlinears *r, int id, int64_t n, int64_t k, const float *wt) {
    dpc_dnnl_linears *c = r->c;
    unsigned long gen = atomic_load(&c->gen);
    packed *p = &c->w[id];
    pthread_mutex_lock(&c->mu);
    dnnl_status_t s = dnnl_success;
    if (p->gen != gen) {
        dnnl_memory_desc_t user = md2(k, n, dnnl_ab);
        dnnl_primitive_desc_t rpd = NULL;
        dnnl_primitive_t ro = NULL;
        dnnl_memory_t from = NULL, to = NULL;
        s = dnnl_reorder_primitive_desc_create(&rpd, &user, c->eng, &p->md, c->eng, NULL);
        if (s == dnnl_success)
            s = dnnl_primitive_create(&ro, rpd);
        if (s == dnnl_success)
            s = dnnl_memory_create(&from, &user, c->eng, (void *)wt);
        if (s == dnnl_success)
            s = dnnl_memory_create(&to, &p->md, c->eng, p->data);
        if (s == dnnl_success) {
            dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
            s = dnnl_primitive_execute(ro, r->stream, 2, args);
        }
        if (s == dnnl_success)
            s = dnnl_stream_wait(r->stream);
        if (s == dnnl_success)
            p->gen = gen;
        if (ro)
            dnnl_primitive_destroy(ro);
        if (rpd)
            dnnl_primitive_desc_destroy(rpd);
        if (from)
            dnnl_memory_destroy(from);
        if (to)
            dnnl_memory_destroy(to);
    }
    pthread_mutex_unlock(&c->mu);
    return s;
}

/* W^T (wt, [k, n] row-major) with rows of n + DPC_LINEAR_LD_PAD floats,
 * copied once per generation; NULL when out of memory. */
static const float *padded_wt(dpc_dnnl_linears *c, int id, int64_t n, int64_t k, const float *wt) {
    unsigned long gen = atomic_load(&c->gen);
    padded *p = &c->pw[id];
    int64_t ld = n + DPC_LINEAR_LD_PAD;
    pthread_mutex_lock(&c->mu);
    if (p->gen != gen) {
        if (!p->data)
            p->data = dpc_aligned_alloc((size_t)k * (size_t)ld * sizeof(float));
        for (int64_t i = 0; p->data && i < k; i++) {
            memcpy(p->data + i * ld, wt + i * n, (size_t)n * sizeof(float));
            memset(p->data + i * ld + n, 0, DPC_LINEAR_LD_PAD * sizeof(float));
        }
        p->gen = p->data ? gen : 0;
    }
    pthread_mutex_unlock(&c->mu);
    return p->data;
}

/* The linear as dnnl_sgemm against the padded W^T (the caller has set
 * OpenMP's count): 0 done, -1 out of memory. */
static int padded_sgemm(dpc_dnnl_linears *c, int id, int64_t m, int64_t n, int64_t k, const float *a,
                        const float *wt, float *out, dpc_err *e) {
    const float *w = padded_wt(c, id, n, k, wt);
    if (!w) {
        dpc_errf(e, DPC_ENOMEM, "out of memory: a padded copy of the weights of buffer %d", id);
        return -1;
    }
    dnnl_status_t s = dnnl_sgemm('N', 'N', m, n, k, 1.0f, a, k, w, n + DPC_LINEAR_LD_PAD, 0.0f, out, n);
    if (s != dnnl_success) {
        dpc_errf(e, DPC_EDEVICE, "oneDNN: the linear of buffer %d failed (status %d)", id, (int)s);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------- running */

int dpc_dnnl_linear(dpc_dnnl_linears *c, dpc_dnnl_rlinears **rp, int wt_buf, int64_t m, int64_t n, int64_t k,
                    const float *a, const float *wt, float *out, int threads, dpc_err *e) {
    if (!c || wt_buf < 0 || wt_buf >= c->nbufs || m <= DPC_GEMM_ROWS_MAX || n <= 0 || k <= 0 ||
        (m > DPC_LINEAR_MATMUL_MAX_M && !c->pad))
        return 1;
    dpc_dnnl_rlinears *r = *rp;
    if (!r) {
        r = dpc_calloc(1, sizeof *r);
        if (r)
            r->l = dpc_calloc((size_t)c->nbufs, sizeof *r->l);
        if (!r || !r->l) {
            free(r);
            dpc_errf(e, DPC_ENOMEM, "out of memory");
            return -1;
        }
        r->c = c;
        if (dnnl_stream_create(&r->stream, c->eng, dnnl_stream_default_flags) != dnnl_success) {
            free(r->l);
            free(r);
            dpc_errf(e, DPC_EDEVICE, "oneDNN: cannot create a stream");
            return -1;
        }
        *rp = r;
    }
    rlin *l = &r->l[wt_buf];
    l->padded = c->pad; /* without AVX-512, where oneDNN has no brgemm matmul for plan() to take */
    if (c->pad)
        return padded_sgemm(c, wt_buf, m, n, k, a, wt, out, e);
    if (l->m != m || l->threads != threads || (!l->prim && !l->declined)) {
        rlin_free(l);
        l->m = m;
        l->threads = threads;
        dnnl_status_t s = plan(r, wt_buf, l, n, k);
        if (s == dnnl_success && l->scratch_bytes > r->scratchb_n) {
            free(r->scratchb);
            r->scratchb = dpc_aligned_alloc(l->scratch_bytes);
            r->scratchb_n = r->scratchb ? l->scratch_bytes : 0;
            if (!r->scratchb)
                s = dnnl_out_of_memory;
        }
        if (s != dnnl_success) {
            rlin_free(l);
            dpc_errf(e, DPC_EDEVICE, "oneDNN: planning the linear of buffer %d failed (status %d)", wt_buf, (int)s);
            return -1;
        }
    }
    if (l->declined)
        return 1;
    dnnl_status_t s = pack(r, wt_buf, n, k, wt);
    if (s == dnnl_success)
        s = dnnl_memory_set_data_handle_v2(l->src, (void *)a, r->stream);
    if (s == dnnl_success)
        s = dnnl_memory_set_data_handle_v2(l->wei, c->w[wt_buf].data, r->stream);
    if (s == dnnl_success)
        s = dnnl_memory_set_data_handle_v2(l->dst, out, r->stream);
    if (s == dnnl_success && l->scratch)
        s = dnnl_memory_set_data_handle_v2(l->scratch, r->scratchb, r->stream);
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_SRC, l->src}, {DNNL_ARG_WEIGHTS, l->wei}, {DNNL_ARG_DST, l->dst}, {DNNL_ARG_SCRATCHPAD, l->scratch}};
        s = dnnl_primitive_execute(l->prim, r->stream, l->scratch ? 4 : 3, args);
    }
    if (s == dnnl_success)
        s = dnnl_stream_wait(r->stream);
    if (s != dnnl_success) {
        dpc_errf(e, DPC_EDEVICE, "oneDNN: the linear of buffer %d failed (status %d)", wt_buf, (int)s);
        return -1;
    }
    return 0;
}

const char *dpc_dnnl_linear_impl(const dpc_dnnl_rlinears *r, int wt_buf) {
    if (r && wt_buf >= 0 && wt_buf < r->c->nbufs && r->l[wt_buf].padded)
        return "sgemm-padded";
    if (!r || wt_buf < 0 || wt_buf >= r->c->nbufs || (!r->l[wt_buf].prim && !r->l[wt_buf].declined))
        return "none";
    return r->l[wt_buf].declined ? "declined" : r->l[wt_buf].impl;
}
#else
typedef int dpc_linear_dnnl_unused; /* ISO C: a translation unit is not empty */
#endif
