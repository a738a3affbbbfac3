/* nn_norm.c - the normalisation modules: BatchNorm2d, LayerNorm. One row
 * each (irbuild.h's `builtin`), after its functions. */
#include "irbuild.h"

#include <string.h>

/* ------------------------------------------------------- BatchNorm2d */

static void batchnorm2d_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    NEED(inst_int(in, 0) > 0, 0, "num_features must be positive, got %lld", (long long)inst_int(in, 0));
    NEED(inst_float(in, 1) >= 0, 1, "eps must be non-negative");
}

static void batchnorm2d_params(dpc_ctx *c, model *m, inst *in) {
    int64_t n[1] = {inst_int(in, 0)};
    if (inst_bool(in, 3)) {
        builtin_add_param(c, m, in, "weight", 1, n, INIT_ONES, 0);
        builtin_add_param(c, m, in, "bias", 1, n, INIT_ZEROS, 0);
    }
    if (inst_bool(in, 4)) {
        builtin_add_param(c, m, in, "running_mean", 1, n, INIT_ZEROS, 0);
        builtin_add_param(c, m, in, "running_var", 1, n, INIT_ONES, 0);
        builtin_add_param(c, m, in, "num_batches_tracked", 0, n, INIT_COUNTER, 0);
    }
}

static void batchnorm2d_repr(const inst *in, dpc_buf *out) {
    const val *a = in->args;
    dpc_buf_printf(out, "%lld", (long long)a[0].i);
    repr_kv(out, ", ", "eps", &a[1]);
    repr_kv(out, ", ", "momentum", &a[2]);
    repr_kv(out, ", ", "affine", &a[3]);
    repr_kv(out, ", ", "track_running_stats", &a[4]);
}

/* The mean over dims 0, 2 and 3 of x [N, C, H, W], as [C]: the mean over
 * H*W of a [N, C, H*W] view per image, then over the images. Every image
 * has H*W values, so the mean of the means is the mean. */
static ir_node *channel_mean(builder *b, ir_node *x, loc at, const char *scope) {
    shape v = {3, {x->sh.d[0], x->sh.d[1], {x->sh.d[2].k * x->sh.d[3].k, false}}};
    shape c = {1, {x->sh.d[1]}};
    static const int64_t hw = 2, batch = 0;
    ir_node *r = reshape_to(b, x, &v, at, scope);
    r = r ? reduce(b, OP_MEAN, r, &hw, 1, true, at) : NULL;
    r = r ? reduce(b, OP_MEAN, r, &batch, 1, true, at) : NULL;
    return r ? reshape_to(b, r, &c, at, scope) : NULL;
}

/* BatchNorm2d(track_running_stats=False) normalises with the batch's own
 * statistics even in eval mode, as PyTorch does: per channel mean and
 * biased variance over (N, H, W), the variance as the mean of (x - mean)^2.
 * Built from reductions and broadcast arithmetic, so every backend runs it
 * with kernels it has; the batch_norm node then uses them as it would the
 * running statistics. Under DataParallel the statistics are the replica's
 * chunk's, as in torch's DataParallel. */
static bool batch_stats(builder *b, ir_node *x, loc at, const char *scope, ir_node **mean, ir_node **var) {
    int first = b->g->nodes.len;
    shape c4 = {4, {{1, false}, x->sh.d[1], {1, false}, {1, false}}};
    *mean = channel_mean(b, x, at, scope);
    ir_node *m4 = *mean ? reshape_to(b, *mean, &c4, at, scope) : NULL;
    ir_node *d = m4 ? elementwise(b, OP_SUB, x, m4, at, scope) : NULL;
    ir_node *sq = d ? elementwise(b, OP_MUL, d, d, at, scope) : NULL;
    *var = sq ? channel_mean(b, sq, at, scope) : NULL;
    for (int i = first; i < b->g->nodes.len; i++) /* reduce() leaves the scope unset */
        ((ir_node *)b->g->nodes.items[i])->scope = scope;
    return *var != NULL;
}

static ir_node *batchnorm2d_lower(builder *b, inst *m, ir_node *x, loc at) {
    if (x->sh.rank != 4) {
        error_at(b->c, at, "%s: expected 4D input (got %dD input)", who(m), x->sh.rank);
        return NULL;
    }
    int64_t ch = inst_int(m, 0);
    if (x->sh.d[1].sym || x->sh.d[1].k != ch) {
        expects(b, at, who(m), &x->sh, 1, &ch, 1);
        return NULL;
    }
    if (!need_concrete(b, x, 1, at, who(m)))
        return NULL;
    ir_node *mean, *var;
    if (inst_bool(m, 4)) {
        mean = param_node(b, m, "running_mean", at);
        var = param_node(b, m, "running_var", at);
    } else if (!batch_stats(b, x, at, m->path, &mean, &var))
        return NULL;
    ir_node *w = param_node(b, m, "weight", at), *bias = param_node(b, m, "bias", at);
    ir_node *n = mk_op(b, OP_BATCHNORM, at, m->path, x, mean, var);
    if (!n)
        return NULL;
    if (w) {
        add_in(n, w);
        add_in(n, bias);
    }
    n->attr.norm.eps = inst_float(m, 1);
    n->sh = x->sh;
    return n;
}

const builtin nn_batchnorm2d = {
    "BatchNorm2d", 5,
    {{"num_features", 'i', NULL}, {"eps", 'f', "1e-05"}, {"momentum", 'g', "0.1"}, {"affine", 'b', "True"},
     {"track_running_stats", 'b', "True"}},
    .init = batchnorm2d_init, .params = batchnorm2d_params, .repr = batchnorm2d_repr, .lower = batchnorm2d_lower,
};

/* --------------------------------------------------------- LayerNorm */

static void layernorm_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    const val *t = &in->args[0];
    NEED(t->kind == V_INT || t->n <= 8, 0, "normalized_shape has %d dims (limit 8)", t->n);
    if (t->kind == V_INT)
        NEED(t->i > 0, 0, "normalized_shape must be positive");
    else
        for (int i = 0; i < t->n; i++)
            NEED(t->items[i].i > 0, 0, "normalized_shape must be positive");
    NEED(inst_float(in, 1) >= 0, 1, "eps must be non-negative");
}

static void layernorm_params(dpc_ctx *c, model *m, inst *in) {
    const val *t = &in->args[0];
    int64_t s[8];
    int r = t->kind == V_INT ? 1 : t->n;
    if (r > 8)
        r = 8;
    for (int i = 0; i < r; i++)
        s[i] = t->kind == V_INT ? t->i : t->items[i].i;
    if (inst_bool(in, 2)) {
        builtin_add_param(c, m, in, "weight", r, s, INIT_ONES, 0);
        if (inst_bool(in, 3))
            builtin_add_param(c, m, in, "bias", r, s, INIT_ZEROS, 0);
    }
}

static void layernorm_repr(const inst *in, dpc_buf *out) {
    const val *a = in->args;
    val t = a[0];
    if (t.kind == V_INT) {
        val one = t;
        t.kind = V_TUPLE;
        t.n = 1;
        t.items = &one;
        repr_value(&t, out);
    } else {
        t.kind = V_TUPLE;
        repr_value(&t, out);
    }
    repr_kv(out, ", ", "eps", &a[1]);
    repr_kv(out, ", ", "elementwise_affine", &a[2]);
}

static ir_node *layernorm_lower(builder *b, inst *m, ir_node *x, loc at) {
    const val *t = &m->args[0];
    int64_t ns[8];
    int nd = t->kind == V_INT ? 1 : t->n;
    if (nd > 8)
        nd = 8;
    for (int i = 0; i < nd; i++)
        ns[i] = t->kind == V_INT ? t->i : t->items[i].i;
    ir_node *w = param_node(b, m, "weight", at);
    ir_node *bias = param_node(b, m, "bias", at);
    return layernorm(b, x, ns, nd, w, bias, inst_float(m, 1), at, m->path, who(m));
}

const builtin nn_layernorm = {
    "LayerNorm", 4,
    {{"normalized_shape", 't', NULL}, {"eps", 'f', "1e-05"}, {"elementwise_affine", 'b', "True"},
     {"bias", 'b', "True"}},
    .init = layernorm_init, .params = layernorm_params, .repr = layernorm_repr, .lower = layernorm_lower,
};
