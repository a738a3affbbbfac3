/* fuse.c - lowers the graph IR to kernels.
 *
 * Ops are classified by pattern: leaves (inputs, parameters, constants,
 * scalars), views (reshape of contiguous data; permute, slice, expand read through
 * strides), elementwise (arithmetic, activations, eval-mode batch norm),
 * and roots (GEMM, convolution, pooling, row reductions, gathers). One
 * greedy pass in topological order then grows chains: an elementwise op
 * joins the kernel of an operand when that operand is the kernel's current
 * tail, has no other use, is not a graph output and has the same shape. So
 * bias/activation/residual epilogues land in the kernel after a GEMM or
 * convolution, and elementwise chains become one loop. Every pair left
 * unfused is recorded with the reason, for `dpc ir --stage fused`. */
#include "kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fuser {
    dpc_ctx *c;
    ir_graph *g;
    kgraph *kg;
    bool *is_output;
    int *attn_of;   /* per graph node: its attention match (attn.c), -1 none */
    vec attn;       /* attn_match* */
    kernel **attn_k; /* per match: its kernel, once the scores matmul is visited */
    bool *strict;   /* per graph node: may become a kernel-internal value only as its one use's operand */
} fuser;

/* The kernel an op of each class roots (elementwise classes start or join
 * a chain, views and leaves have none: KK_COPY is never their kind). */
static const kkind CLASS_KERNEL[OC_COUNT] = {
    [OC_UNARY] = KK_ELEMWISE, [OC_BINARY] = KK_ELEMWISE, [OC_CHANNEL] = KK_ELEMWISE, [OC_TERNARY] = KK_ELEMWISE,
    [OC_GEMM] = KK_GEMM,      [OC_CONV] = KK_CONV,       [OC_POOL] = KK_POOL,
    [OC_ROW] = KK_ROW,        [OC_REDUCE] = KK_REDUCE,   [OC_EMBED] = KK_EMBED,
    [OC_CAT] = KK_CAT,        [OC_INPUT] = KK_COPY,      [OC_LEAF] = KK_COPY,
    [OC_VIEW] = KK_COPY,      [OC_RESAMPLE] = KK_RESAMPLE,
};

static void note_unfused(fuser *f, ir_node *p, ir_node *n, const char *why) {
    unfused *u = arena_alloc(&f->c->arena, sizeof *u);
    u->producer = p;
    u->consumer = n;
    u->why = why;
    vec_push(&f->c->arena, &f->kg->unfused, u);
}

static kernel *new_kernel(fuser *f, kkind kind, ir_node *root, ir_node *out) {
    kernel *k = arena_alloc(&f->c->arena, sizeof *k);
    k->kind = kind;
    k->root = root;
    k->out = out;
    k->scratch = -1;
    k->scratch2 = -1;
    vec_push(&f->c->arena, &f->kg->kernels, k);
    f->kg->kern_of[out->id] = f->kg->kernels.len - 1;
    f->kg->acc[out->id] = (kaccess){.kind = ACC_CONTIG, .base = out};
    return k;
}

static kernel *kernel_of(fuser *f, const ir_node *n) {
    int k = f->kg->kern_of[n->id];
    return k >= 0 ? f->kg->kernels.items[k] : NULL;
}

static ir_node *nd(fuser *f, int id) { return (ir_node *)kgraph_node(f->kg, id); }

const ir_node *kgraph_node(const kgraph *kg, int id) {
    int n = kg->g->nodes.len;
    return id < n ? kg->g->nodes.items[id] : kg->copies.items[id - n];
}

/* A copy node that materialises what `x` reads, in the kernel graph only:
 * the graph IR is the model as written, compared and stored by others. */
static ir_node *copy_of(fuser *f, ir_node *x) {
    kgraph *kg = f->kg;
    ir_node *c = arena_alloc(&f->c->arena, sizeof *c);
    c->id = kg->nnodes;
    c->op = OP_RESHAPE;
    c->at = x->at;
    c->param_index = c->input_index = -1;
    c->sh = x->sh;
    c->dt = x->dt;
    c->scope = x->scope;
    c->in[c->nin++] = x->id;
    vec_push(&f->c->arena, &kg->copies, c);
    /* grow the per-node tables */
    int n = ++kg->nnodes;
    int *ko = arena_alloc(&f->c->arena, sizeof(int) * (size_t)n);
    kaccess *acc = arena_alloc(&f->c->arena, sizeof(kaccess) * (size_t)n);
    memcpy(ko, kg->kern_of, sizeof(int) * (size_t)(n - 1));
    memcpy(acc, kg->acc, sizeof(kaccess) * (size_t)(n - 1));
    kg->kern_of = ko;
    kg->acc = acc;
    bool *io = arena_alloc(&f->c->arena, (size_t)n);
    memcpy(io, f->is_output, (size_t)(n - 1));
    f->is_output = io;
    kernel *k = new_kernel(f, KK_COPY, c, c);
    k->src = kg->acc[x->id];
    return c;
}

/* Ops that read their input as plain contiguous memory call this: a
 * strided view (permute, slice, expand) is materialised (once) first. */
static void need_contig(fuser *f, ir_node *x, ir_node *consumer) {
    kaccess a = f->kg->acc[x->id];
    /* a tensor created in forward (ones(S, S), arange(S)) is a leaf computed
     * from its index wherever it is read; an op reading memory gets it written out */
    bool created = a.kind == ACC_LEAF && x->sh.rank > 0;
    if (a.kind != ACC_STRIDED && !created)
        return;
    kernel *k = new_kernel(f, KK_COPY, x, x);
    k->src = a;
    /* new_kernel made x contiguous in its own buffer */
    note_unfused(f, x, consumer,
                 created ? "a tensor created in forward feeding an op that reads memory is materialised"
                         : "a strided view feeding an op that needs contiguous memory is materialised");
}

/* kernel.h */
kaccess kaccess_strided(const kgraph *kg, const ir_node *x) {
    kaccess a = kg->acc[x->id];
    if (a.kind == ACC_STRIDED)
        return a;
    a = (kaccess){.kind = ACC_STRIDED, .base = (ir_node *)x};
    dim st = {1, false};
    for (int i = x->sh.rank - 1; i >= 0; i--) {
        a.stride[i] = st;
        st.k *= x->sh.d[i].k;
        st.sym |= x->sh.d[i].sym;
    }
    return a;
}

static void add_off(kaccess *a, int64_t c, dim stride) {
    if (stride.sym)
        a->off_n += c * stride.k;
    else
        a->off += c * stride.k;
}

static bool dim_same(dim a, dim b) { return a.k == b.k && a.sym == b.sym; }

/* A reshape of a strided view as strides over the same buffer, when the
 * dims it splits or merges are one contiguous run of the view (GPT-2's
 * `query.view(N, S, heads, d)` of a slice of the packed projection):
 * the dims before and after that run keep their strides. False when the
 * run is not contiguous or depends on the batch (the view is then
 * materialised). */
static bool reshape_strided(const ir_node *x, const kaccess *in, const ir_node *n, kaccess *out) {
    const shape *si = &x->sh, *so = &n->sh;
    int p = 0, q = 0, lo = si->rank < so->rank ? si->rank : so->rank;
    while (p < lo && dim_same(si->d[p], so->d[p]))
        p++;
    while (q < lo - p && dim_same(si->d[si->rank - 1 - q], so->d[so->rank - 1 - q]))
        q++;
    int ie = si->rank - q, oe = so->rank - q;
    /* the input run [p, ie): contiguous within itself (size-1 dims aside) */
    int64_t total = 1;
    dim base = {0, false};
    bool have = false;
    for (int i = ie - 1; i >= p; i--) {
        if (si->d[i].sym)
            return false;
        total *= si->d[i].k;
        if (si->d[i].k == 1)
            continue;
        if (!have) {
            base = in->stride[i];
            have = true;
        } else if (in->stride[i].sym != base.sym || in->stride[i].k != base.k * total / si->d[i].k)
            return false;
    }
    int64_t tot_o = 1;
    for (int j = p; j < oe; j++) {
        if (so->d[j].sym)
            return false;
        tot_o *= so->d[j].k;
    }
    if (tot_o != total)
        return false;
    *out = *in;
    for (int j = 0; j < p; j++)
        out->stride[j] = in->stride[j];
    for (int j = 0; j < q; j++)
        out->stride[so->rank - 1 - j] = in->stride[si->rank - 1 - j];
    dim st = base;
    for (int j = oe - 1; j >= p; j--) {
        out->stride[j] = st;
        st.k *= so->d[j].k;
    }
    return true;
}

static void visit_view(fuser *f, ir_node *n) {
    ir_node *x = nd(f, n->in[0]);
    kaccess *ax = &f->kg->acc[x->id];
    /* a view of an iota (arange) moves its index: read it from memory */
    if (ax->kind == ACC_LEAF && ax->base->op == OP_IOTA)
        need_contig(f, ax->base, n);
    if (ax->kind == ACC_LEAF) { /* a constant reads the same everywhere */
        f->kg->acc[n->id] = *ax;
        return;
    }
    if (n->op == OP_RESHAPE) {
        kaccess rs;
        if (ax->kind == ACC_STRIDED && reshape_strided(x, ax, n, &rs)) {
            f->kg->acc[n->id] = rs;
            return;
        }
        if (ax->kind == ACC_STRIDED)
            need_contig(f, x, n);
        f->kg->acc[n->id] = (kaccess){.kind = ACC_CONTIG, .base = ax->base};
        return;
    }
    /* permute, slice, expand: new strides over the same buffer */
    kaccess in = kaccess_strided(f->kg, x), a = in;
    for (int j = 0; j < n->sh.rank; j++) {
        if (n->op == OP_PERMUTE) {
            a.stride[j] = in.stride[n->attr.perm.perm[j]];
            continue;
        }
        int s = n->attr.view.src[j];
        if (s < 0 || (n->op == OP_EXPAND && x->sh.d[s].k == 1 && !x->sh.d[s].sym))
            a.stride[j] = (dim){0, false};
        else if (n->op == OP_SLICE)
            a.stride[j] = (dim){in.stride[s].k * n->attr.view.step[s], in.stride[s].sym};
        else
            a.stride[j] = in.stride[s];
    }
    if (n->op == OP_SLICE)
        for (int i = 0; i < x->sh.rank; i++)
            add_off(&a, n->attr.view.start[i], in.stride[i]);
    f->kg->acc[n->id] = a;
}

const char *kkind_name(kkind k) {
    static const char *const names[] = {"elementwise", "gemm", "conv", "pool", "row", "reduce", "embedding", "cat", "copy",
                                        "attention", "resample"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

/* Whether every use of p is an elementwise op of p's shape: then all of
 * them may join p's kernel (a diamond such as x * tanh(x)), p staying a
 * register value inside it. fuse_graph checks afterwards that they did,
 * and fuses again with p strict where one did not. */
static bool shared_ok(fuser *f, const ir_node *p) {
    if (f->strict[p->id] || p->id >= f->g->nodes.len)
        return false;
    int seen = 0;
    for (int i = p->id + 1; i < f->g->nodes.len && seen < p->uses; i++) {
        const ir_node *u = f->g->nodes.items[i];
        int hits = 0;
        for (int j = 0; j < u->nin; j++)
            hits += u->in[j] == p->id;
        if (!hits)
            continue;
        seen += hits;
        op_class c = ir_op_class(u->op);
        if ((c != OC_UNARY && c != OC_BINARY && c != OC_TERNARY) || f->attn_of[i] >= 0 ||
            !shape_eq(&u->sh, &p->sh))
            return false;
    }
    return seen == p->uses;
}

static void visit_elementwise(fuser *f, ir_node *n) {
    ir_node *join = NULL;
    /* per-channel operands (batch norm's statistics) are read, not chained */
    int nops = ir_op_class(n->op) == OC_CHANNEL ? 1 : n->nin;
    for (int i = 0; i < nops; i++) {
        ir_node *p = nd(f, n->in[i]);
        kernel *k = kernel_of(f, p);
        if (!k)
            continue;
        const char *why = NULL;
        char buf[160];
        /* the kernel's tail becomes an inner value when n joins: safe when n
         * is its only use, or when all its uses may join (shared_ok) */
        bool inner = k->out != p;
        if (join && kernel_of(f, join) == k)
            continue; /* both operands in the same kernel: read as registers */
        if (join)
            why = "the consumer already joined the kernel of another operand";
        else if (inner && (k->kind != KK_ELEMWISE && k->kind != KK_GEMM))
            why = "the producer is not its kernel's last op";
        else if (inner && (f->is_output[k->out->id] || !shared_ok(f, k->out) || !shared_ok(f, p)))
            why = "the producer is not its kernel's last op";
        else if (f->is_output[p->id])
            why = "the producer is a graph output and must be materialised";
        else if (p->uses != 1 && (!shared_ok(f, p) || (k->kind != KK_ELEMWISE && k->kind != KK_GEMM))) {
            snprintf(buf, sizeof buf, "the producer has %d uses; fusing would recompute it", p->uses);
            why = arena_strdup(&f->c->arena, buf);
        } else if (!shape_eq(&p->sh, &n->sh))
            why = "shapes differ (broadcast): the smaller operand is kept materialised";
        else if (k->kind != KK_ELEMWISE && k->kind != KK_GEMM && k->kind != KK_CONV && k->kind != KK_RESAMPLE) {
            snprintf(buf, sizeof buf, "the producer is a %s kernel, which takes no epilogue", kkind_name(k->kind));
            why = arena_strdup(&f->c->arena, buf);
        }
        if (why) {
            note_unfused(f, p, n, why);
            continue;
        }
        join = p;
    }
    if (join) {
        kernel *k = kernel_of(f, join);
        vec_push(&f->c->arena, &k->ops, n);
        k->out = n;
        f->kg->kern_of[n->id] = f->kg->kern_of[join->id];
        f->kg->acc[n->id] = (kaccess){.kind = ACC_CONTIG, .base = n};
        return;
    }
    kernel *k = new_kernel(f, KK_ELEMWISE, NULL, n);
    vec_push(&f->c->arena, &k->ops, n);
}

/* A linear's parameter weight W [out, in] transposed into a buffer of its
 * own, [in, out]: a copy kernel that reads only W, so hoist_prepare makes it
 * a prepare kernel (once per load). NULL when W is not a parameter (a
 * folded or computed weight stays read transposed). */
static ir_node *linear_wt(fuser *f, ir_node *w) {
    kaccess a = f->kg->acc[w->id];
    if (w->sh.rank != 2 || w->sh.d[0].sym || w->sh.d[1].sym || a.kind != ACC_CONTIG || !a.base ||
        a.base->op != OP_PARAM)
        return NULL;
    ir_node *c = copy_of(f, w);
    c->sh.d[0] = w->sh.d[1];
    c->sh.d[1] = w->sh.d[0];
    kernel *ck = kernel_of(f, c);
    ck->src = (kaccess){.kind = ACC_STRIDED, .base = a.base};
    ck->src.stride[0] = (dim){1, false};
    ck->src.stride[1] = w->sh.d[1];
    return c;
}

static void visit_root(fuser *f, ir_node *n) {
    kkind kind = CLASS_KERNEL[ir_op_class(n->op)];
    int cnt = n->op == OP_CAT ? ir_cat_count(n) : n->nin;
    for (int i = 0; i < cnt; i++) {
        ir_node *x = nd(f, n->op == OP_CAT ? ir_cat_operand(n, i) : n->in[i]);
        need_contig(f, x, n); /* a root always reads materialised inputs */
    }
    ir_node *wt = n->op == OP_LINEAR ? linear_wt(f, nd(f, n->in[1])) : NULL;
    new_kernel(f, kind, n, n)->wt = wt;
}

static int add_buf(fuser *f, buf_kind kind, const shape *s, int esize, int index, const char *what) {
    kbuf *b = arena_alloc(&f->c->arena, sizeof *b);
    b->id = f->kg->bufs.len;
    b->kind = kind;
    b->elems = s ? shape_numel(s, &b->sym) : 0;
    b->esize = esize;
    b->index = index;
    b->first = b->last = -1;
    b->what = what;
    vec_push(&f->c->arena, &f->kg->bufs, b);
    return b->id;
}

static int cmp_kernel(const void *a, const void *b) {
    const kernel *x = *(kernel *const *)a, *y = *(kernel *const *)b;
    return x->out->id - y->out->id;
}

static void touch(kgraph *kg, int buf, int k) {
    if (buf < 0)
        return;
    kbuf *b = kg->bufs.items[buf];
    if (b->first < 0 || k < b->first)
        b->first = k;
    if (k > b->last)
        b->last = k;
}

static void plan_buffers(fuser *f) {
    kgraph *kg = f->kg;
    int n = kg->nnodes;
    kg->buf_of = arena_alloc(&f->c->arena, sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        kg->buf_of[i] = -1;
    for (int i = 0; i < n; i++) {
        ir_node *x = nd(f, i);
        if (x->op == OP_INPUT)
            kg->buf_of[i] = add_buf(f, BUF_INPUT, &x->sh, x->dt == IR_I64 ? 8 : 4, x->input_index, x->name);
        else if (x->op == OP_PARAM)
            kg->buf_of[i] = add_buf(f, BUF_PARAM, &x->sh, x->dt == IR_I64 ? 8 : 4, x->param_index, x->name);
    }
    for (int k = 0; k < kg->kernels.len; k++) {
        kernel *kr = kg->kernels.items[k];
        kr->id = k;
        ir_node *o = kr->out;
        int oi = -1;
        for (int j = 0; j < kg->outputs.len; j++)
            if (kg->outputs.items[j] == o)
                oi = j;
        buf_kind bk = kr->prepare ? BUF_CONST : oi >= 0 ? BUF_OUTPUT : BUF_TEMP;
        kg->buf_of[o->id] = add_buf(f, bk, &o->sh, o->dt == IR_I64 ? 8 : 4, oi, o->scope);
        if (kr->kind == KK_CONV) {
            /* im2col of one image: [Cin/g * kh * kw, Ho * Wo] */
            /* all images at once, so the GEMM is wide even when Ho*Wo is small */
            ir_node *w = nd(f, kr->root->in[1]);
            int64_t hw = o->sh.d[2].k * o->sh.d[3].k;
            shape cols = {2, {{w->sh.d[1].k * w->sh.d[2].k * w->sh.d[3].k, false}, {hw, true}}};
            shape res = {2, {{o->sh.d[1].k, false}, {hw, true}}};
            kr->scratch = add_buf(f, BUF_SCRATCH, &cols, 4, -1, "im2col");
            kr->scratch2 = add_buf(f, BUF_SCRATCH, &res, 4, -1, "conv gemm result");
        }
        if (kr->kind == KK_RESAMPLE && kr->root->op == OP_CONV_TRANSPOSE2D) {
            /* the columns of one image and group: [Cout/g * kh * kw, H * W] */
            ir_node *x = nd(f, kr->root->in[0]), *w = nd(f, kr->root->in[1]);
            shape cols = {2, {{w->sh.d[1].k * w->sh.d[2].k * w->sh.d[3].k, false}, {x->sh.d[2].k * x->sh.d[3].k, false}}};
            kr->scratch = add_buf(f, BUF_SCRATCH, &cols, 4, -1, "conv_transpose columns");
        }
    }
    /* views share their base's buffer */
    for (int i = 0; i < n; i++)
        if (kg->buf_of[i] < 0 && kg->acc[i].kind != ACC_LEAF && kg->acc[i].base)
            kg->buf_of[i] = kg->buf_of[kg->acc[i].base->id];
    for (int j = 0; j < kg->outputs.len; j++)
        vec_push(&f->c->arena, &kg->out_bufs, (void *)(intptr_t)kg->buf_of[((ir_node *)kg->outputs.items[j])->id]);
    /* liveness: the first kernel that writes a buffer, the last that reads it */
    for (int k = 0; k < kg->kernels.len; k++) {
        kernel *kr = kg->kernels.items[k];
        touch(kg, kg->buf_of[kr->out->id], k);
        touch(kg, kr->scratch, k);
        touch(kg, kr->scratch2, k);
        koperand_iter it = kernel_operands(kg, kr, -1);
        int node, buf;
        while (koperand_next(&it, &node, &buf))
            touch(kg, buf, k);
    }
}

koperand_iter kernel_operands(const kgraph *kg, const kernel *k, int from) {
    return (koperand_iter){.kg = kg, .k = k, .all = from < 0, .op = from < 0 ? -1 : from};
}

/* Operand `id` of the iterator's kernel, when the kernel reads it from a buffer. */
static bool in_buffer(const koperand_iter *it, int id, int *node, int *buf) {
    int b = it->kg->buf_of[id];
    if (b < 0 || it->kg->kern_of[id] == it->k->id)
        return false;
    *node = id;
    *buf = b;
    return true;
}

bool koperand_next(koperand_iter *it, int *node, int *buf) {
    const kernel *k = it->k;
    for (; it->op < k->ops.len; it->op++, it->arg = 0) {
        const ir_node *x = it->op >= 0 ? k->ops.items[it->op] : k->kind != KK_COPY ? k->root : NULL;
        int cnt = !x ? 0 : x->op == OP_CAT ? ir_cat_count(x) : x->nin;
        while (it->arg < cnt) {
            int j = it->arg++;
            int id = x->op == OP_CAT ? ir_cat_operand(x, j) : x->in[j];
            if (it->op < 0 && j == 1 && k->wt) /* the transposed weight in W's place */
                id = k->wt->id;
            if (in_buffer(it, id, node, buf))
                return true;
        }
    }
    if (it->op++ != k->ops.len || !it->all)
        return false;
    if (k->kind == KK_ATTN) /* v, after q, k^T (the root's) and the chain's operands */
        return in_buffer(it, k->attn.pv->in[1], node, buf);
    if (k->kind != KK_COPY || k->src.kind == ACC_LEAF)
        return false;
    return in_buffer(it, k->src.base->id, node, buf);
}

/* ---------------------------------------------------------- fused attention
 *
 * A match of attn.c becomes one KK_ATTN kernel: created at the scores
 * matmul, the chain ops, softmax, the second matmul and the permute after
 * it join it as they are visited (their ids increase in that order, and
 * none has another use). q, k^T and v are read through their strides: no
 * copy materialises the head split or the transpose. */
static void attn_operand(fuser *f, ir_node *x, ir_node *consumer) {
    kaccess a = f->kg->acc[x->id];
    if (a.kind == ACC_LEAF && x->sh.rank > 0)
        need_contig(f, x, consumer); /* ones(L, E) as q: written out once */
}

static void visit_attn(fuser *f, ir_node *n) {
    int mi = f->attn_of[n->id];
    attn_match *m = f->attn.items[mi];
    kgraph *kg = f->kg;
    if (n == m->qk) {
        attn_operand(f, nd(f, n->in[0]), n);
        attn_operand(f, nd(f, n->in[1]), n);
        f->attn_k[mi] = new_kernel(f, KK_ATTN, n, n);
        return;
    }
    kernel *k = f->attn_k[mi];
    if (n == m->pv)
        attn_operand(f, nd(f, n->in[1]), n);
    if (n == m->softmax)
        k->attn.softmax = n;
    else if (n == m->pv)
        k->attn.pv = n;
    else if (n == m->perm)
        k->attn.perm = n;
    else
        vec_push(&f->c->arena, &k->ops, n);
    /* the earlier tail is now inside the kernel */
    k->out = n;
    kg->kern_of[n->id] = kg->kern_of[m->qk->id];
    kg->acc[n->id] = (kaccess){.kind = ACC_CONTIG, .base = n};
}

static void index_kernels(kgraph *kg) {
    for (int k = 0; k < kg->kernels.len; k++) {
        kernel *kr = kg->kernels.items[k];
        kg->kern_of[kr->out->id] = k;
        for (int i = 0; i < kr->ops.len; i++)
            kg->kern_of[((ir_node *)kr->ops.items[i])->id] = k;
        if (kr->root)
            kg->kern_of[kr->root->id] = k;
        if (kr->kind == KK_ATTN) {
            kg->kern_of[kr->attn.softmax->id] = kg->kern_of[kr->attn.pv->id] = k;
            if (kr->attn.perm)
                kg->kern_of[kr->attn.perm->id] = k;
        }
    }
}

/* ------------------------------------------------ the prepare kernels */

/* Whether operand id of kernel cur is the same in every forward of one
 * load: a parameter, a constant (or a view of one), a value of cur itself
 * or of a prepare kernel. Inputs, scalars and the batch size are not. */
static bool load_constant(const fuser *f, int id, int cur) {
    const kgraph *kg = f->kg;
    kaccess a = kg->acc[id];
    const ir_node *b = a.base ? a.base : kgraph_node(kg, id);
    if (a.kind == ACC_LEAF)
        return b->op == OP_CONST || b->op == OP_IOTA;
    if (b->op == OP_PARAM)
        return true;
    int k = kg->kern_of[b->id];
    return b->op != OP_INPUT && k >= 0 && (k == cur || ((const kernel *)kg->kernels.items[k])->prepare);
}

static bool is_prepare(const fuser *f, const kernel *k, int cur) {
    const kgraph *kg = f->kg;
    bool sym;
    shape_numel(&k->out->sh, &sym);
    /* a convolution's scratch and an embedding's indices are per forward */
    if (sym || k->kind == KK_CONV || k->kind == KK_RESAMPLE || k->kind == KK_EMBED)
        return false;
    for (int j = 0; j < kg->outputs.len; j++)
        if (kg->outputs.items[j] == k->out)
            return false;
    if (k->kind == KK_COPY)
        return load_constant(f, k->src.base->id, cur);
    for (int i = k->root ? -1 : 0; i < k->ops.len; i++) {
        const ir_node *x = i < 0 ? k->root : k->ops.items[i];
        int cnt = x->op == OP_CAT ? ir_cat_count(x) : x->nin;
        for (int j = 0; j < cnt; j++)
            if (!load_constant(f, x->op == OP_CAT ? ir_cat_operand(x, j) : x->in[j], cur))
                return false;
    }
    return true;
}

/* Marks the prepare kernels and moves them, in order, before the others:
 * they read nothing a forward kernel writes, so the order stays
 * topological. Their outputs become BUF_CONST (plan_buffers). */
static void hoist_prepare(fuser *f) {
    kgraph *kg = f->kg;
    int n = kg->kernels.len, np = 0;
    for (int k = 0; k < n; k++) {
        kernel *kr = kg->kernels.items[k];
        kr->prepare = is_prepare(f, kr, k);
        np += kr->prepare;
    }
    kg->nprepare = np;
    if (!np || np == n)
        return;
    void **sorted = arena_alloc(&f->c->arena, sizeof(void *) * (size_t)n);
    int a = 0, b = np;
    for (int k = 0; k < n; k++) {
        kernel *kr = kg->kernels.items[k];
        sorted[kr->prepare ? a++ : b++] = kr;
    }
    memcpy(kg->kernels.items, sorted, sizeof(void *) * (size_t)n);
    index_kernels(kg);
}

/* Marks strict every kernel-internal value that something outside its
 * kernel reads (a diamond whose uses did not all join: shared_ok); false
 * when there is none. */
static bool mark_escapes(fuser *f) {
    kgraph *kg = f->kg;
    bool again = false;
    for (int i = 0; i < kg->nnodes; i++) {
        const ir_node *u = nd(f, i);
        int cnt = u->op == OP_CAT ? ir_cat_count(u) : u->nin;
        for (int j = 0; j < cnt; j++) {
            int x = u->op == OP_CAT ? ir_cat_operand(u, j) : u->in[j];
            int kx = kg->kern_of[x];
            if (kx < 0 || kx == kg->kern_of[i] || ((kernel *)kg->kernels.items[kx])->out->id == x ||
                x >= f->g->nodes.len || f->strict[x])
                continue;
            f->strict[x] = again = true;
        }
    }
    return again;
}

static bool fuse_pass(fuser *f);
static bool fuse_finish(fuser *f);

bool fuse_graph(dpc_ctx *c, ir_graph *g, kgraph *kg) {
    fuser f = {.c = c, .g = g, .kg = kg};
    f.strict = arena_alloc(&c->arena, (size_t)g->nodes.len + 1);
    memset(f.strict, 0, (size_t)g->nodes.len + 1);
    /* each round makes at least one more node strict: at most one per node */
    for (int round = 0; round <= g->nodes.len; round++) {
        if (!fuse_pass(&f))
            return false;
        if (!mark_escapes(&f))
            break;
    }
    return fuse_finish(&f);
}

static bool fuse_pass(fuser *fp) {
    fuser f = *fp;
    dpc_ctx *c = f.c;
    ir_graph *g = f.g;
    kgraph *kg = f.kg;
    memset(kg, 0, sizeof *kg);
    kg->g = g;
    int n = kg->nnodes = g->nodes.len;
    kg->kern_of = arena_alloc(&c->arena, sizeof(int) * (size_t)n);
    kg->acc = arena_alloc(&c->arena, sizeof(kaccess) * (size_t)n);
    f.is_output = arena_alloc(&c->arena, (size_t)n);
    for (int i = 0; i < n; i++)
        kg->kern_of[i] = -1;
    for (int i = 0; i < g->outputs.len; i++)
        f.is_output[((ir_node *)g->outputs.items[i])->id] = true;
    f.attn_of = attn_find(c, g, f.is_output, &f.attn);
    f.attn_k = arena_alloc(&c->arena, sizeof(kernel *) * (size_t)(f.attn.len + 1));
    for (int i = 0; i < n; i++) {
        ir_node *x = nd(&f, i);
        if (f.attn_of[i] >= 0) {
            visit_attn(&f, x);
            continue;
        }
        switch (ir_op_class(x->op)) {
        case OC_LEAF: kg->acc[i] = (kaccess){.kind = ACC_LEAF, .base = x}; break;
        case OC_INPUT: kg->acc[i] = (kaccess){.kind = ACC_CONTIG, .base = x}; break;
        case OC_VIEW: visit_view(&f, x); break;
        case OC_UNARY:
        case OC_BINARY:
        case OC_TERNARY:
        case OC_CHANNEL: visit_elementwise(&f, x); break;
        default: visit_root(&f, x); break;
        }
    }
    /* graph outputs that are not the last op of their own kernel (inputs,
     * parameters, views, constants, or the same value returned twice) are
     * copied into a buffer of their own */
    for (int i = 0; i < g->outputs.len; i++) {
        ir_node *o = g->outputs.items[i];
        kernel *k = kernel_of(&f, o);
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= g->outputs.items[j] == o;
        vec_push(&c->arena, &kg->outputs, !k || k->out != o || dup ? copy_of(&f, o) : o);
    }
    *fp = f;
    return true;
}

static bool fuse_finish(fuser *fp) {
    fuser f = *fp;
    dpc_ctx *c = f.c;
    kgraph *kg = f.kg;
    qsort(kg->kernels.items, (size_t)kg->kernels.len, sizeof(void *), cmp_kernel);
    index_kernels(kg);
    hoist_prepare(&f);
    plan_buffers(&f);
    for (int k = 0; k < kg->kernels.len; k++) {
        kernel *kr = kg->kernels.items[k];
        const ir_node *named = kr->root ? kr->root : kr->ops.len ? kr->ops.items[0] : kr->out;
        dpc_buf nm;
        dpc_buf_init(&nm);
        /* the name is a C identifier in generated source: made of the
         * kernel's number and dpc's own op names only, never of the model's
         * names (the scope is in the kernel's comments, escaped) */
        dpc_buf_printf(&nm, "k%d", k);
        dpc_buf_printf(&nm, "_%s", kr->kind == KK_COPY ? "copy" : kr->kind == KK_ATTN ? "attention" : ir_op_name(named->op));
        for (int i = kr->root ? 0 : 1; kr->kind != KK_ATTN && i < kr->ops.len && i < 4; i++)
            dpc_buf_printf(&nm, "_%s", ir_op_name(((ir_node *)kr->ops.items[i])->op));
        kr->name = arena_strdup(&c->arena, nm.data ? nm.data : "k");
        dpc_buf_free(&nm);
    }
    return true;
}

void fuse_print(const kgraph *kg, dpc_buf *out) {
    char sh[256];
    const ir_graph *g = kg->g;
    dpc_buf_printf(out, "kernels of %s: %d kernels for %d ops\n", g->model_name, kg->kernels.len, g->nodes.len);
    for (int k = 0; k < kg->kernels.len; k++) {
        const kernel *kr = kg->kernels.items[k];
        if (kg->nprepare && (k == 0 || k == kg->nprepare))
            dpc_buf_printf(out, k == 0 ? "prepare: %d kernels, run once when the weights are bound\n"
                                       : "forward: %d kernels\n",
                           k == 0 ? kg->nprepare : kg->kernels.len - kg->nprepare);
        shape_str(&kr->out->sh, g->batch_name, sh, sizeof sh);
        const ir_node *named = kr->root ? kr->root : kr->ops.len ? kr->ops.items[0] : kr->out;
        dpc_buf_printf(out, "  %s [%s] -> %%%d %s buf%d%s%s\n", kr->name, kkind_name(kr->kind), kr->out->id, sh,
                       kg->buf_of[kr->out->id], named->scope && named->scope[0] ? " in " : "",
                       named->scope ? named->scope : "");
        if (kr->root && kr->kind != KK_COPY)
            dpc_buf_printf(out, "      %%%d = %s  # %s:%d\n", kr->root->id, ir_op_name(kr->root->op),
                           kr->root->at.file ? kr->root->at.file->path : "", kr->root->at.line);
        if (kr->kind == KK_COPY)
            dpc_buf_printf(out, "      copy of %%%d (%s)\n", kr->src.base->id,
                           kr->src.kind == ACC_STRIDED ? "strided view" : "contiguous");
        for (int i = 0; i < kr->ops.len; i++) {
            const ir_node *o = kr->ops.items[i];
            dpc_buf_printf(out, "      %%%d = %s  # %s:%d\n", o->id, ir_op_name(o->op), o->at.file ? o->at.file->path : "",
                           o->at.line);
        }
        if (kr->kind == KK_ATTN) {
            const ir_node *tail[] = {kr->attn.softmax, kr->attn.pv, kr->attn.perm};
            for (int i = 0; i < 3; i++)
                if (tail[i])
                    dpc_buf_printf(out, "      %%%d = %s  # %s:%d\n", tail[i]->id, ir_op_name(tail[i]->op),
                                   tail[i]->at.file ? tail[i]->at.file->path : "", tail[i]->at.line);
            const ir_node *q = kgraph_node(kg, kr->root->in[0]), *kt = kgraph_node(kg, kr->root->in[1]),
                          *v = kgraph_node(kg, kr->attn.pv->in[1]);
            int r = q->sh.rank;
            dpc_buf_printf(out, "      fused attention: q %%%d (%s) [L=%lld, E=%lld], k^T %%%d (%s), v %%%d (%s) "
                                "[S=%lld, Ev=%lld]%s\n",
                           q->id, kg->acc[q->id].kind == ACC_STRIDED ? "strided" : "contiguous",
                           (long long)q->sh.d[r - 2].k, (long long)q->sh.d[r - 1].k, kt->id,
                           kg->acc[kt->id].kind == ACC_STRIDED ? "strided" : "contiguous", v->id,
                           kg->acc[v->id].kind == ACC_STRIDED ? "strided" : "contiguous", (long long)v->sh.d[r - 2].k,
                           (long long)v->sh.d[r - 1].k, kr->attn.perm ? ", written permuted" : "");
        }
    }
    if (kg->unfused.len)
        dpc_buf_puts(out, "unfused adjacent ops:\n");
    for (int i = 0; i < kg->unfused.len; i++) {
        const unfused *u = kg->unfused.items[i];
        dpc_buf_printf(out, "  %%%d %s -> %%%d %s: %s\n", u->producer->id, ir_op_name(u->producer->op), u->consumer->id,
                       ir_op_name(u->consumer->op), u->why);
    }
    dpc_buf_puts(out, "buffers:\n");
    static const char *const bk[] = {"input", "param", "temp", "output", "scratch", "const"};
    for (int i = 0; i < kg->bufs.len; i++) {
        const kbuf *b = kg->bufs.items[i];
        if (b->kind == BUF_PARAM)
            continue;
        dpc_buf_printf(out, "  buf%d %s %lld%s x %dB live [%d, %d]%s%s\n", b->id, bk[b->kind], (long long)b->elems,
                       b->sym ? "*N" : "", b->esize, b->first, b->last, b->what ? " " : "", b->what ? b->what : "");
    }
}

/* FLOPs of one op at batch N, by class: 2 per multiply-add in GEMMs and
 * convolutions (the usual convention); other classes are memory bound and
 * not counted (no entry). */
static double gemm_flops(const kgraph *kg, const ir_node *n, double outs, int64_t N) {
    const ir_node *x = kg->g->nodes.items[n->in[0]], *w = kg->g->nodes.items[n->in[1]];
    dim k = n->op == OP_LINEAR ? w->sh.d[1] : x->sh.d[x->sh.rank - 1];
    return 2.0 * outs * (double)k.k * (k.sym ? (double)N : 1.0); /* K may be the batch */
}

static double conv_flops(const kgraph *kg, const ir_node *n, double outs, int64_t N) {
    const ir_node *w = kg->g->nodes.items[n->in[1]];
    (void)N;
    return 2.0 * outs * (double)(w->sh.d[1].k * w->sh.d[2].k * w->sh.d[3].k);
}

/* conv_transpose2d: every input element times its [Cout/g, kh, kw] slice of the weight */
static double resample_flops(const kgraph *kg, const ir_node *n, double outs, int64_t N) {
    if (n->op != OP_CONV_TRANSPOSE2D)
        return 0.0;
    const ir_node *x = kg->g->nodes.items[n->in[0]], *w = kg->g->nodes.items[n->in[1]];
    bool sym;
    double ins = (double)shape_numel(&x->sh, &sym) * (sym ? (double)N : 1.0);
    (void)outs;
    return 2.0 * ins * (double)(w->sh.d[1].k * w->sh.d[2].k * w->sh.d[3].k);
}

static double (*const CLASS_FLOPS[OC_COUNT])(const kgraph *, const ir_node *, double, int64_t) = {
    [OC_GEMM] = gemm_flops,
    [OC_CONV] = conv_flops,
    [OC_RESAMPLE] = resample_flops,
};

/* Floating-point operations of one forward at batch N. */
double kgraph_flops(const kgraph *kg, int64_t N) {
    double f = 0;
    for (int i = 0; i < kg->g->nodes.len; i++) {
        const ir_node *n = kg->g->nodes.items[i];
        double (*flops)(const kgraph *, const ir_node *, double, int64_t) = CLASS_FLOPS[ir_op_class(n->op)];
        if (!flops)
            continue;
        bool sym;
        int64_t out = shape_numel(&n->sh, &sym);
        f += flops(kg, n, (double)out * (sym ? (double)N : 1.0), N);
    }
    return f;
}

const char *kprec_name(kprec p) { return p == KP_BF16 ? "bf16" : p == KP_F16 ? "f16" : "f32"; }

bool kprec_parse(const char *s, kprec *out) {
    static const struct {
        const char *name;
        kprec p;
    } names[] = {{"f32", KP_F32},       {"float32", KP_F32}, {"bf16", KP_BF16}, {"bfloat16", KP_BF16},
                 {"f16", KP_F16},       {"float16", KP_F16}, {"half", KP_F16}};
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].p;
            return true;
        }
    return false;
}
