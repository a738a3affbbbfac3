/* conv_post.c - a conv2d kernel as one library call: its geometry and the
 * post-ops that the call can compute (dpc_conv_desc, dpc_compile.h).
 *
 * The epilogue chain of a conv kernel (fuse.c) is read from its first op
 * on: an activation the library has (relu, relu6 and clamps as clip,
 * hardswish, silu, sigmoid, tanh, gelu) applied to the value so far, or
 * the value so far plus a same-shape tensor read from memory (a residual,
 * at most one) becomes a post-op; the first op of any other kind (batch
 * norm, a broadcast add, a product) stops the list, and it and the ops
 * after it stay in the generated C. emit_c_conv.c and the CPU backend both ask
 * here, so what the C leaves out is exactly what the call computes. */
#include "emit.h"
#include "kernel.h"

#include <float.h>
#include <string.h>

static const ir_node *knode(const kgraph *kg, int id) { return kgraph_node(kg, id); }

/* A rank-0 constant operand, its value in *v. */
static bool const_operand(const kgraph *kg, int id, double *v) {
    const kaccess *a = &kg->acc[id];
    if (a->kind != ACC_LEAF || !a->base || a->base->op != OP_CONST)
        return false;
    *v = a->base->attr.leaf.value;
    return true;
}

static bool act_of(ir_op op, dpc_conv_act *act) {
    switch (op) {
    case OP_RELU: *act = DPC_ACT_RELU; return true;
    case OP_RELU6: *act = DPC_ACT_CLIP; return true;
    case OP_HARDSWISH: *act = DPC_ACT_HARDSWISH; return true;
    case OP_SILU: *act = DPC_ACT_SWISH; return true;
    case OP_SIGMOID: *act = DPC_ACT_LOGISTIC; return true;
    case OP_TANH: *act = DPC_ACT_TANH; return true;
    case OP_GELU: *act = DPC_ACT_GELU_ERF; return true;
    case OP_GELU_TANH: *act = DPC_ACT_GELU_TANH; return true;
    default: return false;
    }
}

/* Whether epilogue op n, applied to the value so far `v`, is a post-op;
 * *p says which, *sum_node the residual of a sum. */
static bool post_of(const kgraph *kg, const kernel *k, const ir_node *n, int v, bool have_sum, dpc_conv_post *p,
                    int *sum_node) {
    *p = (dpc_conv_post){0};
    if (n->dt != IR_F32)
        return false;
    if (ir_op_class(n->op) == OC_UNARY) {
        if (n->in[0] != v || !act_of(n->op, &p->act))
            return false;
        if (n->op == OP_RELU6)
            p->alpha = 0.0f, p->beta = 6.0f;
        return true;
    }
    double c;
    if ((n->op == OP_CLAMP_MIN || n->op == OP_CLAMP_MAX) && n->in[0] == v && const_operand(kg, n->in[1], &c)) {
        p->act = DPC_ACT_CLIP;
        p->alpha = n->op == OP_CLAMP_MIN ? (float)c : -FLT_MAX;
        p->beta = n->op == OP_CLAMP_MAX ? (float)c : FLT_MAX;
        return c == c; /* a NaN bound is not a clip */
    }
    if (n->op == OP_ADD && !have_sum && (n->in[0] == v || n->in[1] == v) && n->in[0] != n->in[1]) {
        int r = n->in[0] == v ? n->in[1] : n->in[0];
        const ir_node *rn = knode(kg, r);
        /* a same-shape f32 tensor read contiguously from its own buffer,
         * not a value of this kernel */
        if (kg->acc[r].kind != ACC_CONTIG || kg->buf_of[r] < 0 || kg->kern_of[r] == k->id || rn->dt != IR_F32 ||
            !shape_eq(&rn->sh, &n->sh) || !shape_eq(&rn->sh, &k->root->sh))
            return false;
        p->act = DPC_ACT_SUM;
        *sum_node = r;
        return true;
    }
    return false;
}

void conv_describe(const kgraph *kg, const kernel *k, dpc_conv_desc *d, int *sum_node) {
    const ir_node *n = k->root, *x = knode(kg, n->in[0]), *w = knode(kg, n->in[1]);
    emit_conv_dims cv;
    emit_conv_geom(n, x, w, &cv);
    const conv_attr *a = &n->attr.conv;
    *d = (dpc_conv_desc){.kernel = k->id, .C = cv.C, .H = cv.H, .W = cv.W, .Co = cv.Co, .Ho = cv.Ho, .Wo = cv.Wo,
                         .kh = cv.kh, .kw = cv.kw, .groups = cv.G, .bias = n->nin > 2, .w_param = -1,
                         .src_conv = -1, .sum_conv = -1};
    for (int i = 0; i < 2; i++) {
        d->stride[i] = a->stride[i];
        d->dil[i] = a->dil[i];
        d->pad_l[i] = a->pad[i];
        d->pad_r[i] = a->pad[2 + i];
    }
    if (w->op == OP_PARAM && kg->acc[w->id].kind == ACC_CONTIG && kg->acc[w->id].base == w)
        d->w_param = w->param_index;
    *sum_node = -1;
    int v = n->id, sum = -1;
    while (d->nfused < k->ops.len && d->npost < DPC_CONV_MAX_POST) {
        const ir_node *op = k->ops.items[d->nfused];
        dpc_conv_post p;
        if (!post_of(kg, k, op, v, sum >= 0, &p, &sum))
            break;
        dpc_conv_post *prev = d->npost ? &d->post[d->npost - 1] : NULL;
        if (prev && prev->act == DPC_ACT_CLIP && p.act == DPC_ACT_CLIP) {
            /* clamp(min, max): clamp_min then clamp_max is one clip. Two
             * clip post-ops in a row compute the first alone in oneDNN
             * 2.6 (the conv/postops case catches it): any other pair stops */
            if (prev->beta != FLT_MAX || p.alpha != -FLT_MAX || p.beta < prev->alpha)
                break; /* (min > max: all max, which oneDNN's clip refuses) */
            prev->beta = p.beta;
            d->nfused++;
            v = op->id;
            continue;
        }
        d->post[d->npost++] = p;
        d->nfused++;
        v = op->id;
    }
    /* the ops left to the C read the chain only through its last fused
     * value (fusion chains through the tail): anything else keeps all */
    for (int i = d->nfused; i < k->ops.len; i++) {
        const ir_node *op = k->ops.items[i];
        for (int j = 0; j < op->nin; j++) {
            int in = op->in[j];
            if (in == v || kg->kern_of[in] != k->id)
                continue;
            for (int q = 0; q < d->nfused; q++)
                if (((const ir_node *)k->ops.items[q])->id == in)
                    d->npost = d->nfused = 0, sum = -1;
            if (in == n->id && d->nfused > 0)
                d->npost = d->nfused = 0, sum = -1;
        }
    }
    *sum_node = sum;
}

int conv_index_of(const kgraph *kg, const kernel *k) {
    int c = 0;
    for (int i = 0; i < k->id && i < kg->kernels.len; i++)
        c += ((const kernel *)kg->kernels.items[i])->kind == KK_CONV;
    return c;
}

/* The conv kernel computing node id (its tail), or NULL. */
static const kernel *conv_of(const kgraph *kg, int id) {
    int kk = id >= 0 && id < kg->nnodes ? kg->kern_of[id] : -1;
    const kernel *p = kk >= 0 && kk < kg->kernels.len ? kg->kernels.items[kk] : NULL;
    return p && p->kind == KK_CONV && p->out->id == id && !p->prepare ? p : NULL;
}

/* ---------------------------------------------------- NHWC readers
 *
 * A pool or elementwise kernel that has an NHWC loop besides its NCHW one
 * (emit_c_nhwc.c) reads a kept result where it is: the generated C asks
 * ctx->kept(conv) which loop to run. Its own result is then NHWC too (a
 * windowed pool, an elementwise chain: "transparent", their readers must
 * take NHWC in turn), or [N, C, 1, 1], the same in either layout (a global
 * pool: "absorbing"). So a squeeze-excitation block (conv -> global pool
 * -> fc convs -> x * scale -> conv) and a max pool between convs keep the
 * chain NHWC. */

static bool static_dim(dim d) { return !d.sym; }

/* Whether x, read over [N, C, H, W] output shape os, is y.permute(0, 3, 1,
 * 2) of a contiguous [N, H, W, C] value y that no conv keeps (ConvNeXt's
 * block output into its layer scale and residual): its bytes are NHWC in
 * either layout, so an NHWC loop reads it at its own flat index. */
bool conv_cl_view(const kgraph *kg, const ir_node *x, const shape *os) {
    const kaccess *a = &kg->acc[x->id];
    const ir_node *y = a->base;
    if (a->kind != ACC_STRIDED || !y || a->off || a->off_n || !shape_eq(&x->sh, os) || os->rank != 4 ||
        y->dt != IR_F32 || kg->acc[y->id].kind != ACC_CONTIG || kg->acc[y->id].base != y || conv_of(kg, y->id))
        return false;
    long long C = os->d[1].k, H = os->d[2].k, W = os->d[3].k;
    long long want[4] = {H * W * C, 1, W * C, C};
    for (int d = 0; d < 4; d++)
        if (a->stride[d].sym || a->stride[d].k != want[d])
            return false;
    return shape_eq(&y->sh, &(shape){.rank = 4, .d = {os->d[0], os->d[2], os->d[3], os->d[1]}});
}

/* An elementwise kernel whose every operand is its source value (one
 * node, read contiguously over the output's shape), a per-(n, c) value
 * (dims 2 and 3 broadcast), a channels-last view (conv_cl_view), a leaf or
 * a value of its own chain. */
static int elementwise_source(const kgraph *kg, const kernel *k) {
    const shape *os = &k->out->sh;
    if (os->rank != 4 || !static_dim(os->d[1]) || !static_dim(os->d[2]) || !static_dim(os->d[3]) ||
        os->d[2].k < 2 || os->d[3].k < 2 || k->out->dt != IR_F32)
        return -1;
    int src = -1;
    for (int i = 0; i < k->ops.len; i++) {
        const ir_node *op = k->ops.items[i];
        op_class cls = ir_op_class(op->op);
        if (cls != OC_UNARY && cls != OC_BINARY && cls != OC_TERNARY)
            return -1;
        for (int j = 0; j < op->nin; j++) {
            const ir_node *x = knode(kg, op->in[j]);
            const kaccess *a = &kg->acc[x->id];
            bool mine = false;
            for (int q = 0; q < i && !mine; q++)
                mine = k->ops.items[q] == x;
            if (mine)
                continue;
            if (a->kind == ACC_LEAF) {
                if (emit_leaf_needs_coords(a->base))
                    return -1;
                continue;
            }
            if (conv_cl_view(kg, x, os))
                continue;
            if (shape_eq(&x->sh, os)) {
                if (a->kind != ACC_CONTIG || a->base != x || (src >= 0 && src != x->id))
                    return -1;
                src = x->id;
                continue;
            }
            if (x->sh.rank > 4)
                return -1;
            for (int d = 0; d < x->sh.rank; d++)
                if (4 - x->sh.rank + d >= 2 && (x->sh.d[d].sym || x->sh.d[d].k != 1))
                    return -1;
        }
    }
    return src;
}

/* A copy materialising x.permute(0, 2, 3, 1) of an [N, C, H, W] value x:
 * from NHWC, the contiguous bytes themselves (ConvNeXt's depthwise conv
 * -> permute -> LayerNorm). Its result does not depend on x's layout. */
static int permute_source(const kgraph *kg, const kernel *k, bool *absorbs) {
    const kaccess *a = &k->src;
    const ir_node *x = a->base, *y = k->out;
    if (k->ops.len || a->kind != ACC_STRIDED || !x || x->sh.rank != 4 || y->sh.rank != 4 || a->off || a->off_n ||
        x->dt != IR_F32 || kg->acc[x->id].kind != ACC_CONTIG || kg->acc[x->id].base != x)
        return -1;
    for (int d = 1; d < 4; d++)
        if (!static_dim(x->sh.d[d]))
            return -1;
    long long C = x->sh.d[1].k, H = x->sh.d[2].k, W = x->sh.d[3].k;
    long long want[4] = {C * H * W, W, 1, H * W};
    for (int d = 0; d < 4; d++)
        if (a->stride[d].sym || a->stride[d].k != want[d])
            return -1;
    if (!shape_eq(&y->sh, &(shape){.rank = 4, .d = {x->sh.d[0], x->sh.d[2], x->sh.d[3], x->sh.d[1]}}))
        return -1;
    *absorbs = true;
    return x->id;
}

int conv_nhwc_source(const kgraph *kg, const kernel *k, bool *absorbs) {
    *absorbs = false;
    if (k->prepare)
        return -1;
    if (k->kind == KK_ELEMWISE)
        return elementwise_source(kg, k);
    if (k->kind == KK_COPY)
        return permute_source(kg, k, absorbs);
    if (k->kind != KK_POOL || k->ops.len || !k->root)
        return -1;
    const ir_node *n = k->root, *x = knode(kg, n->in[0]);
    if (n->op != OP_MAXPOOL2D && n->op != OP_AVGPOOL2D && n->op != OP_ADAPTIVE_AVGPOOL2D)
        return -1;
    if (n->dt != IR_F32 || x->sh.rank != 4 || kg->acc[x->id].kind != ACC_CONTIG || kg->acc[x->id].base != x)
        return -1;
    for (int d = 1; d < 4; d++)
        if (!static_dim(x->sh.d[d]) || !static_dim(n->sh.d[d]))
            return -1;
    *absorbs = n->sh.d[2].k == 1 && n->sh.d[3].k == 1;
    return x->id;
}

static bool is_out_buf(const kgraph *kg, int b) {
    for (int i = 0; i < kg->out_bufs.len; i++)
        if ((int)(intptr_t)kg->out_bufs.items[i] == b)
            return true;
    return false;
}

/* The conv kernel whose kept layout value v has: v is its result, or the
 * result of a transparent NHWC reader of such a value. */
static const kernel *layout_root(const kgraph *kg, int v, int depth) {
    const kernel *p = conv_of(kg, v);
    if (p || depth > 64 || v < 0 || v >= kg->nnodes)
        return p;
    int kk = kg->kern_of[v];
    const kernel *t = kk >= 0 && kk < kg->kernels.len ? kg->kernels.items[kk] : NULL;
    bool absorbs;
    int s = t && t->out->id == v ? conv_nhwc_source(kg, t, &absorbs) : -1;
    return s >= 0 && !absorbs ? layout_root(kg, s, depth + 1) : NULL;
}

/* Whether every read of value v's buffer (v computed by kernel prod) is
 * of v itself, by a conv kernel as its source or residual, or by an NHWC
 * reader whose result, when transparent, is a temporary read likewise. */
static bool readers_ok(const kgraph *kg, const kernel *prod, int v, int depth) {
    int yb = kg->buf_of[v];
    if (depth > 64 || yb < 0)
        return false;
    for (int i = 0; i < kg->kernels.len; i++) {
        const kernel *c = kg->kernels.items[i];
        if (c == prod)
            continue;
        int reads = 0, node, buf;
        koperand_iter it = kernel_operands(kg, c, -1);
        while (koperand_next(&it, &node, &buf))
            if (buf == yb) {
                if (node != v)
                    return false;
                reads++;
            }
        if (!reads)
            continue;
        if (c->kind == KK_CONV) {
            dpc_conv_desc cd;
            int sum;
            conv_describe(kg, c, &cd, &sum);
            int allowed = (c->root->in[0] == v) + (sum == v);
            if (reads > allowed)
                return false;
            continue;
        }
        bool absorbs;
        if (conv_nhwc_source(kg, c, &absorbs) != v)
            return false;
        if (absorbs)
            continue;
        int ob = kg->buf_of[c->out->id];
        if (ob < 0 || ob == yb || ((const kbuf *)kg->bufs.items[ob])->kind != BUF_TEMP || is_out_buf(kg, ob) ||
            !readers_ok(kg, c, c->out->id, depth + 1))
            return false;
    }
    return true;
}

/* Whether conv kernel k's result may stay in the library's layout: every
 * epilogue op is a post-op, it is a temporary (no graph output, no
 * constant), and every read of its buffer is a conv kernel reading the
 * value itself (no view) as its source or its residual operand, or an
 * NHWC reader (above). */
static bool may_keep(const kgraph *kg, const kernel *k, const dpc_conv_desc *d) {
    int yb = kg->buf_of[k->out->id];
    if (k->prepare || d->nfused < k->ops.len || yb < 0 || ((const kbuf *)kg->bufs.items[yb])->kind != BUF_TEMP)
        return false;
    if (is_out_buf(kg, yb))
        return false;
    return readers_ok(kg, k, k->out->id, 0);
}

/* The conv index whose kept layout value v has, when that conv may keep
 * its result; -1 otherwise. */
static int kept_root_index(const kgraph *kg, int v) {
    const kernel *p = layout_root(kg, v, 0);
    if (!p)
        return -1;
    dpc_conv_desc pd;
    int ps;
    conv_describe(kg, p, &pd, &ps);
    return may_keep(kg, p, &pd) ? conv_index_of(kg, p) : -1;
}

int conv_nhwc_root(const kgraph *kg, const kernel *k) {
    bool absorbs;
    int s = conv_nhwc_source(kg, k, &absorbs);
    return s >= 0 ? kept_root_index(kg, s) : -1;
}

/* Whether NHWC reader k (conv_nhwc_source) also has a loop over oneDNN's
 * nChw8c (emit_c_nhwc.c): a pool, or an elementwise kernel without
 * channels-last views, over channels a multiple of 8 (no block padded).
 * The permute copy has none: from nChw8c it would be a transpose. */
bool conv_blk_reader(const kgraph *kg, const kernel *k) {
    bool absorbs;
    int s = conv_nhwc_source(kg, k, &absorbs);
    if (s < 0 || k->kind == KK_COPY)
        return false;
    const ir_node *x = knode(kg, s);
    if (x->sh.rank != 4 || x->sh.d[1].sym || x->sh.d[1].k % 8)
        return false;
    if (k->kind != KK_ELEMWISE)
        return true;
    koperand_iter it = kernel_operands(kg, k, 0);
    int id, buf;
    while (koperand_next(&it, &id, &buf))
        if (conv_cl_view(kg, knode(kg, id), &k->out->sh))
            return false;
    return true;
}

/* Whether every NHWC reader of conv kernel root's kept result (directly or
 * through transparent readers: layout_root) has an nChw8c loop too, so
 * that the result may be kept in nChw8c (runtime/cpu/conv_dnnl.c). */
static bool readers_blk(const kgraph *kg, const kernel *root) {
    for (int i = 0; i < kg->kernels.len; i++) {
        const kernel *c = kg->kernels.items[i];
        bool absorbs;
        int s = c == root || c->kind == KK_CONV ? -1 : conv_nhwc_source(kg, c, &absorbs);
        if (s >= 0 && layout_root(kg, s, 0) == root && !conv_blk_reader(kg, c))
            return false;
    }
    return true;
}

/* Whether every kernel reading value v's buffer (v computed by kernel
 * prod) is a conv kernel: no NHWC reader, so the value may stay in
 * whatever layout its producer and its readers' primitives agree on. */
static bool only_convs_read(const kgraph *kg, const kernel *prod, int v) {
    int yb = kg->buf_of[v];
    for (int i = 0; i < kg->kernels.len; i++) {
        const kernel *c = kg->kernels.items[i];
        if (c == prod || c->kind == KK_CONV)
            continue;
        int node, buf;
        koperand_iter it = kernel_operands(kg, c, -1);
        while (koperand_next(&it, &node, &buf))
            if (buf == yb)
                return false;
    }
    return true;
}

void conv_keep_marks(const kgraph *kg, const kernel *k, dpc_conv_desc *d, int sum) {
    d->y_keep = may_keep(kg, k, d);
    d->y_convs = d->y_keep && only_convs_read(kg, k, k->out->id);
    d->y_blk = d->y_keep && !d->y_convs && d->Co % 8 == 0 && readers_blk(kg, k);
    d->src_conv = kept_root_index(kg, k->root->in[0]);
    d->sum_conv = sum >= 0 ? kept_root_index(kg, sum) : -1;
    int wid = k->root->in[1], wb = kg->buf_of[wid];
    d->w_const = d->w_param < 0 && wb >= 0 && ((const kbuf *)kg->bufs.items[wb])->kind == BUF_CONST &&
                 kg->acc[wid].kind == ACC_CONTIG && kg->acc[wid].base == kgraph_node(kg, wid);
}
