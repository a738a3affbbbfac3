/* nn_norm.c - the normalisation modules: BatchNorm2d, LayerNorm,
 * BatchNorm1d, GroupNorm. One row
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

/* The batch_norm node over x [N, C, H, W] (BatchNorm1d's input viewed so). */
static ir_node *batchnorm_4d(builder *b, inst *m, ir_node *x, loc at) {
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

/* A batch norm's input: dim 1 is its num_features, and the dims after
 * the batch are known when compiling. */
static bool channels_ok(builder *b, inst *m, const ir_node *x, loc at) {
    int64_t ch = inst_int(m, 0);
    if (x->sh.d[1].sym || x->sh.d[1].k != ch) {
        expects(b, at, who(m), &x->sh, 1, &ch, 1);
        return false;
    }
    return need_concrete(b, x, 1, at, who(m));
}

static ir_node *batchnorm2d_lower(builder *b, inst *m, ir_node *x, loc at) {
    if (x->sh.rank != 4) {
        error_at(b->c, at, "%s: expected 4D input (got %dD input)", who(m), x->sh.rank);
        return NULL;
    }
    if (!channels_ok(b, m, x, at))
        return NULL;
    return batchnorm_4d(b, m, x, at);
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

/* ------------------------------------------------------- BatchNorm1d */

/* BatchNorm2d's checks, state_dict and repr; the input [N, C] or [N, C, L]
 * is viewed as [N, C, L, 1] (views cost no kernel). */
static ir_node *batchnorm1d_lower(builder *b, inst *m, ir_node *x, loc at) {
    if (x->sh.rank != 2 && x->sh.rank != 3) {
        error_at(b->c, at, "%s: expected 2D or 3D input (got %dD input)", who(m), x->sh.rank);
        return NULL;
    }
    if (!channels_ok(b, m, x, at))
        return NULL;
    shape x4 = {4, {x->sh.d[0], x->sh.d[1], x->sh.rank == 3 ? x->sh.d[2] : (dim){1, false}, {1, false}}};
    ir_node *v = reshape_to(b, x, &x4, at, m->path);
    ir_node *y = v ? batchnorm_4d(b, m, v, at) : NULL;
    return y ? reshape_to(b, y, &x->sh, at, m->path) : NULL;
}

const builtin nn_batchnorm1d = {
    "BatchNorm1d", 5,
    {{"num_features", 'i', NULL}, {"eps", 'f', "1e-05"}, {"momentum", 'g', "0.1"}, {"affine", 'b', "True"},
     {"track_running_stats", 'b', "True"}},
    .init = batchnorm2d_init, .params = batchnorm2d_params, .repr = batchnorm2d_repr, .lower = batchnorm1d_lower,
};

/* --------------------------------------------------------- GroupNorm */

/* x [N, C, *] viewed as [N, G, C/G * prod(*)], normalised over its last
 * dim (a layer_norm without affine: mean and biased variance of each
 * group), viewed back, then the per-channel affine w[C] * y + b[C]. w and
 * bias may be NULL; whom names the caller in diagnostics. Shared with
 * F.group_norm. */
ir_node *nn_group_norm_of(builder *b, ir_node *x, int64_t groups, ir_node *w, ir_node *bias, double eps, loc at,
                          const char *scope, const char *whom) {
    if (x->sh.rank < 2) {
        error_at(b->c, at, "%s: expected at least 2 dims [N, C, ...], got %s", whom, shp(b, &x->sh));
        return NULL;
    }
    if (!need_concrete(b, x, 1, at, whom))
        return NULL;
    int64_t ch = x->sh.d[1].k;
    if (groups <= 0 || ch % groups != 0) {
        error_at(b->c, at, "%s: expected the %lld channels of %s to be divisible by num_groups=%lld", whom,
                 (long long)ch, shp(b, &x->sh), (long long)groups);
        return NULL;
    }
    if (w && (w->sh.rank != 1 || w->sh.d[0].sym || w->sh.d[0].k != ch)) {
        error_at(b->c, at, "%s: weight %s does not match %lld channels", whom, shp(b, &w->sh), (long long)ch);
        return NULL;
    }
    if (bias && (bias->sh.rank != 1 || bias->sh.d[0].sym || bias->sh.d[0].k != ch)) {
        error_at(b->c, at, "%s: bias %s does not match %lld channels", whom, shp(b, &bias->sh), (long long)ch);
        return NULL;
    }
    int64_t rest = ch / groups;
    for (int i = 2; i < x->sh.rank; i++)
        rest *= x->sh.d[i].k;
    shape g3 = {3, {x->sh.d[0], {groups, false}, {rest, false}}};
    ir_node *v = reshape_to(b, x, &g3, at, scope);
    ir_node *y = v ? layernorm(b, v, &rest, 1, NULL, NULL, eps, at, scope, whom) : NULL;
    y = y ? reshape_to(b, y, &x->sh, at, scope) : NULL;
    shape cs = {x->sh.rank - 1, {{ch, false}}};
    for (int i = 1; i < cs.rank; i++)
        cs.d[i] = (dim){1, false};
    if (y && w)
        y = elementwise(b, OP_MUL, y, reshape_to(b, w, &cs, at, scope), at, scope);
    if (y && bias)
        y = elementwise(b, OP_ADD, y, reshape_to(b, bias, &cs, at, scope), at, scope);
    return y;
}

static void groupnorm_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    int64_t g = inst_int(in, 0), ch = inst_int(in, 1);
    NEED(g > 0, 0, "num_groups must be positive, got %lld", (long long)g);
    NEED(ch > 0, 1, "num_channels must be positive, got %lld", (long long)ch);
    NEED(g <= 0 || ch % g == 0, 1, "num_channels must be divisible by num_groups");
    NEED(inst_float(in, 2) >= 0, 2, "eps must be non-negative");
}

static void groupnorm_params(dpc_ctx *c, model *m, inst *in) {
    int64_t n[1] = {inst_int(in, 1)};
    if (inst_bool(in, 3)) {
        builtin_add_param(c, m, in, "weight", 1, n, INIT_ONES, 0);
        builtin_add_param(c, m, in, "bias", 1, n, INIT_ZEROS, 0);
    }
}

static void groupnorm_repr(const inst *in, dpc_buf *out) {
    const val *a = in->args;
    dpc_buf_printf(out, "%lld, %lld", (long long)a[0].i, (long long)a[1].i);
    repr_kv(out, ", ", "eps", &a[2]);
    repr_kv(out, ", ", "affine", &a[3]);
}

static ir_node *groupnorm_lower(builder *b, inst *m, ir_node *x, loc at) {
    int64_t ch = inst_int(m, 1);
    if (x->sh.rank < 2 || x->sh.d[1].sym || x->sh.d[1].k != ch) {
        expects(b, at, who(m), &x->sh, 1, &ch, 1);
        return NULL;
    }
    ir_node *w = param_node(b, m, "weight", at), *bias = param_node(b, m, "bias", at);
    return nn_group_norm_of(b, x, inst_int(m, 0), w, bias, inst_float(m, 2), at, m->path, who(m));
}

const builtin nn_groupnorm = {
    "GroupNorm", 4,
    {{"num_groups", 'i', NULL}, {"num_channels", 'i', NULL}, {"eps", 'f', "1e-05"}, {"affine", 'b', "True"}},
    .init = groupnorm_init, .params = groupnorm_params, .repr = groupnorm_repr, .lower = groupnorm_lower,
};
