/* conv_post.c - a conv2d kernel as one library call: its geometry and the
 * post-ops that the call can compute (dpc_conv_desc, dpc_compile.h).
 *
 * The epilogue chain of a conv kernel (fuse.c) is read from its first op
 * on: an activation the library has (relu, relu6 and clamps as clip,
 * hardswish, silu, sigmoid, tanh, gelu) applied to the value so far, or
 * the value so far plus a same-shape tensor read from memory (a residual,
 * at most one) becomes a post-op; the first op of any other kind (batch
 * norm, a broadcast add, a product) stops the list, and it and the ops
 * after it stay in the generated C. emit_c.c and the CPU backend both ask
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

/* Whether conv kernel k's result may stay in the library's layout: every
 * epilogue op is a post-op, it is a temporary (no graph output, no
 * constant), and every read of its buffer is a conv kernel reading the
 * value itself (no view) as its source or its residual operand. */
static bool may_keep(const kgraph *kg, const kernel *k, const dpc_conv_desc *d) {
    int yb = kg->buf_of[k->out->id];
    if (k->prepare || d->nfused < k->ops.len || yb < 0 || ((const kbuf *)kg->bufs.items[yb])->kind != BUF_TEMP)
        return false;
    for (int i = 0; i < kg->out_bufs.len; i++)
        if ((int)(intptr_t)kg->out_bufs.items[i] == yb)
            return false;
    for (int i = 0; i < kg->kernels.len; i++) {
        const kernel *c = kg->kernels.items[i];
        if (c == k)
            continue;
        int reads = 0, node, buf;
        koperand_iter it = kernel_operands(kg, c, -1);
        while (koperand_next(&it, &node, &buf))
            if (buf == yb) {
                if (node != k->out->id || c->kind != KK_CONV)
                    return false;
                reads++;
            }
        if (!reads)
            continue;
        dpc_conv_desc cd;
        int sum;
        conv_describe(kg, c, &cd, &sum);
        int allowed = (c->root->in[0] == k->out->id) + (sum == k->out->id);
        if (reads > allowed)
            return false;
    }
    return true;
}

void conv_keep_marks(const kgraph *kg, const kernel *k, dpc_conv_desc *d, int sum) {
    d->y_keep = may_keep(kg, k, d);
    const kernel *p = conv_of(kg, k->root->in[0]);
    dpc_conv_desc pd;
    int ps;
    if (p) {
        conv_describe(kg, p, &pd, &ps);
        if (may_keep(kg, p, &pd))
            d->src_conv = conv_index_of(kg, p);
    }
    p = sum >= 0 ? conv_of(kg, sum) : NULL;
    if (p) {
        conv_describe(kg, p, &pd, &ps);
        if (may_keep(kg, p, &pd))
            d->sum_conv = conv_index_of(kg, p);
    }
    int wid = k->root->in[1], wb = kg->buf_of[wid];
    d->w_const = d->w_param < 0 && wb >= 0 && ((const kbuf *)kg->bufs.items[wb])->kind == BUF_CONST &&
                 kg->acc[wid].kind == ACC_CONTIG && kg->acc[wid].base == kgraph_node(kg, wid);
}
