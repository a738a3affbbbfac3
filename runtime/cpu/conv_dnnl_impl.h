/* conv_dnnl_impl.h - what the three files of the oneDNN convolutions
 * share: conv_dnnl.c (the set's life and running a conv), conv_dnnl_prim.c
 * (one conv's primitive: its choice, attributes, reorders and kept
 * weights) and conv_dnnl_plan.c (the plan per batch size: which convs pair
 * up and which layouts results stay in). conv_dnnl.h is the interface. */
#ifndef DPC_CONV_DNNL_IMPL_H
#define DPC_CONV_DNNL_IMPL_H

#include "conv_dnnl.h"
#include "backend_cpu.h"
#include "conv_avx2.h" /* dpc_post_has */
#include "kabi.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

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

/* Whether conv d's post-ops add a residual (oneDNN's sum). */
static inline bool sums(const dpc_conv_desc *d) { return dpc_post_has(d, DPC_ACT_SUM); }

/* The layouts conv p computes from and into: its primitive's (between the
 * two passes of a plan) or dpc's Winograd's; NULL when it has neither. */
static inline const dnnl_memory_desc_t *src_md_of(const pconv *p) {
    return p->own ? &p->own_src : p->pd ? dnnl_primitive_desc_query_md(p->pd, dnnl_query_src_md, 0) : NULL;
}

static inline const dnnl_memory_desc_t *dst_md_of(const pconv *p) {
    return p->own ? &p->own_dst : p->pd ? dnnl_primitive_desc_query_md(p->pd, dnnl_query_dst_md, 0) : NULL;
}

/* Whether md is nChw8c over dims (no channels padded: sizes equal). */
static inline bool is_blk8(const dnnl_memory_desc_t *md, const dnnl_dims_t dims) {
    dnnl_memory_desc_t b;
    return md && dims[1] % 8 == 0 && dnnl_memory_desc_init_by_tag(&b, 4, dims, dnnl_f32, dnnl_aBcd8b) == dnnl_success &&
           dnnl_memory_desc_equal(md, &b);
}

static inline size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* ---- one conv's primitive (conv_dnnl_prim.c) */

void dpc_dnnl_pconv_free(pconv *p);
/* An attribute with the scratchpad in the caller's memory, and post-ops:
 * d's, then (dw not NULL) the depthwise conv dw as a post-op, and dw's. */
dnnl_primitive_attr_t dpc_dnnl_make_attr(const dpc_conv_desc *d, const dpc_conv_desc *dw);
/* The weights of conv i in layout md, reordered once from `from` (the
 * parameter or the prepare kernels' result; gen, the parameters' or the
 * consts' generation, says which values the entry must hold). NULL when the
 * cache is full (the call reorders them) or on failure (*st set). */
const void *dpc_dnnl_kept_weights(dpc_dnnl_rconvs *r, int i, const dnnl_memory_desc_t *md,
                                  const dnnl_memory_desc_t *user, const void *from, unsigned long gen, dpc_status *st,
                                  dpc_err *e);
/* Conv p runs dpc's kernel `own` in place of a primitive, reading its
 * source in layout src and writing its result in dst. */
void dpc_dnnl_plan_own(pconv *p, int own, const dnnl_dims_t sd, const dnnl_dims_t dd, dnnl_format_tag_t src,
                       dnnl_format_tag_t dst, const char *impl);
/* Pass one of a plan: conv i's primitive descriptor at batch N (p->pd),
 * or declined when oneDNN has no implementation. */
void dpc_dnnl_plan_prim(dpc_dnnl_rconvs *r, int i, int64_t N, int threads, pconv *p);
/* Pass two: the primitive, the reorders and memory objects, the kept
 * weights (sp: the source's producer, up: the residual's). */
dpc_status dpc_dnnl_plan_io(dpc_dnnl_rconvs *r, int i, int64_t N, pconv *p, const pconv *sp, const pconv *up,
                            dpc_err *e);

#endif
