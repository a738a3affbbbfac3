/* nn_basic.c - the modules of one op or none: Linear, Embedding, the
 * activations (ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax,
 * ReLU6, Hardtanh, Hardswish, Hardsigmoid, LeakyReLU, Mish), Dropout,
 * Dropout2d, Flatten, Identity, torchvision's StochasticDepth and Permute,
 * HuggingFace's Conv1D. One row each (irbuild.h's
 * `builtin`), after its functions. */
#include "irbuild.h"

#include <string.h>

/* ------------------------------------------------------------ Linear */

static void linear_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    NEED(inst_int(in, 0) >= 0, 0, "in_features must be non-negative, got %lld", (long long)inst_int(in, 0));
    NEED(inst_int(in, 1) >= 0, 1, "out_features must be non-negative, got %lld", (long long)inst_int(in, 1));
}

static void linear_params(dpc_ctx *c, model *m, inst *in) {
    int64_t w[2] = {inst_int(in, 1), inst_int(in, 0)};
    builtin_add_param(c, m, in, "weight", 2, w, INIT_KAIMING, (double)w[1]);
    /* MultiheadAttention's out_proj (nn_attention.c) has its bias zeroed */
    bool mha = strcmp(in->type_name, "NonDynamicallyQuantizableLinear") == 0;
    if (inst_bool(in, 2))
        builtin_add_param(c, m, in, "bias", 1, w, mha ? INIT_ZEROS : INIT_BIAS, (double)w[1]);
}

static void linear_repr(const inst *in, dpc_buf *out) {
    const val *a = in->args;
    dpc_buf_printf(out, "in_features=%lld, out_features=%lld, bias=%s", (long long)a[0].i, (long long)a[1].i,
                   a[2].i ? "True" : "False");
}

static ir_node *linear_lower(builder *b, inst *m, ir_node *x, loc at) {
    int64_t in = inst_int(m, 0), out = inst_int(m, 1);
    if (x->sh.rank < 1 || x->sh.d[x->sh.rank - 1].sym || x->sh.d[x->sh.rank - 1].k != in) {
        expects(b, at, who(m), &x->sh, x->sh.rank ? x->sh.rank - 1 : 0, &in, 1);
        return NULL;
    }
    ir_node *w = param_node(b, m, "weight", at), *bias = param_node(b, m, "bias", at);
    ir_node *n = mk_op(b, OP_LINEAR, at, m->path, x, w, bias);
    if (!n)
        return NULL;
    n->sh = x->sh;
    n->sh.d[n->sh.rank - 1] = (dim){out, false};
    return n;
}

const builtin nn_linear = {
    "Linear", 3, {{"in_features", 'i', NULL}, {"out_features", 'i', NULL}, {"bias", 'b', "True"}},
    .init = linear_init, .params = linear_params, .repr = linear_repr, .lower = linear_lower,
};

/* --------------------------------------------------------- Embedding */

static void embedding_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    int64_t n = inst_int(in, 0);
    NEED(n > 0, 0, "num_embeddings must be positive, got %lld", (long long)n);
    NEED(inst_int(in, 1) > 0, 1, "embedding_dim must be positive, got %lld", (long long)inst_int(in, 1));
    if (in->args[2].kind == V_INT) {
        int64_t p = in->args[2].i;
        NEED(p < n && p >= -n, 2, "padding_idx must be within num_embeddings");
        if (p < 0)
            in->args[2].i = n + p; /* PyTorch normalises it at construction */
    }
    NEED(in->args[3].kind == V_NONE, 3, "max_norm is not supported (it renormalises weights in place)");
}

static void embedding_params(dpc_ctx *c, model *m, inst *in) {
    int64_t w[2] = {inst_int(in, 0), inst_int(in, 1)};
    builtin_add_param(c, m, in, "weight", 2, w, INIT_NORMAL, 0);
}

static void embedding_repr(const inst *in, dpc_buf *out) {
    const val *a = in->args;
    dpc_buf_printf(out, "%lld, %lld", (long long)a[0].i, (long long)a[1].i);
    if (a[2].kind != V_NONE)
        repr_kv(out, ", ", "padding_idx", &a[2]);
    if (a[3].kind != V_NONE)
        repr_kv(out, ", ", "max_norm", &a[3]);
    if (inst_float(in, 4) != 2.0)
        repr_kv(out, ", ", "norm_type", &a[4]);
    if (a[5].i)
        repr_kv(out, ", ", "scale_grad_by_freq", &a[5]);
    if (a[6].i)
        dpc_buf_puts(out, ", sparse=True");
}

static ir_node *embedding_lower(builder *b, inst *m, ir_node *x, loc at) {
    if (x->dt != IR_I64) {
        error_at(b->c, at, "%s expects an integer tensor of indices (i64), got a float tensor", who(m));
        return NULL;
    }
    if (x->sh.rank >= IR_MAX_RANK) {
        error_at(b->c, at, "%s: input has too many dimensions", who(m));
        return NULL;
    }
    ir_node *w = param_node(b, m, "weight", at);
    ir_node *n = mk_op(b, OP_EMBEDDING, at, m->path, x, w, NULL);
    if (!n)
        return NULL;
    n->sh = x->sh;
    n->sh.d[n->sh.rank++] = (dim){inst_int(m, 1), false};
    n->attr.embed.num = inst_int(m, 0);
    return n;
}

const builtin nn_embedding = {
    "Embedding", 7,
    {{"num_embeddings", 'i', NULL}, {"embedding_dim", 'i', NULL}, {"padding_idx", 'n', "None"},
     {"max_norm", 'g', "None"}, {"norm_type", 'f', "2.0"}, {"scale_grad_by_freq", 'b', "False"},
     {"sparse", 'b', "False"}},
    .init = embedding_init, .params = embedding_params, .repr = embedding_repr, .lower = embedding_lower,
    .any_dtype = true,
};

/* ---------------------------------------------------------- identities */

/* In eval mode Dropout, Dropout2d and Identity return their input. */
static ir_node *identity_lower(builder *b, inst *m, ir_node *x, loc at) {
    (void)b, (void)m, (void)at;
    return x;
}

static void dropout_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    double p = inst_float(in, 0);
    char num[64];
    dpc_format_pyfloat(p, num, sizeof num); /* as Python prints it: nan, not -nan */
    NEED(p >= 0 && p <= 1, 0, "dropout probability has to be between 0 and 1, but got %s", num);
}

static void dropout_repr(const inst *in, dpc_buf *out) {
    repr_kv(out, "", "p", &in->args[0]);
    repr_kv(out, ", ", "inplace", &in->args[1]);
}

const builtin nn_dropout = {
    "Dropout", 2, {{"p", 'f', "0.5"}, {"inplace", 'b', "False"}},
    .init = dropout_init, .repr = dropout_repr, .lower = identity_lower, .any_dtype = true,
};

const builtin nn_dropout2d = {
    "Dropout2d", 2, {{"p", 'f', "0.5"}, {"inplace", 'b', "False"}},
    .init = dropout_init, .repr = dropout_repr, .lower = identity_lower, .any_dtype = true,
};

/* Identity(*args, **kwargs) ignores its arguments, keywords included. */
static bool identity_varargs(dpc_ctx *c, inst *in, const bound_arg *args, int nargs) {
    (void)c, (void)in, (void)args, (void)nargs;
    return true;
}

const builtin nn_identity = {
    "Identity", 0, {{0}}, .varargs = identity_varargs, .lower = identity_lower, .any_dtype = true,
};

/* -------------------------------------------------------- activations */

static void inplace_repr(const inst *in, dpc_buf *out) {
    if (in->args[0].i)
        dpc_buf_puts(out, "inplace=True");
}

static ir_node *relu_lower(builder *b, inst *m, ir_node *x, loc at) { return unary(b, OP_RELU, x, at, m->path); }
static ir_node *silu_lower(builder *b, inst *m, ir_node *x, loc at) { return unary(b, OP_SILU, x, at, m->path); }
static ir_node *sigmoid_lower(builder *b, inst *m, ir_node *x, loc at) {
    return unary(b, OP_SIGMOID, x, at, m->path);
}
static ir_node *tanh_lower(builder *b, inst *m, ir_node *x, loc at) { return unary(b, OP_TANH, x, at, m->path); }

const builtin nn_relu = {"ReLU", 1, {{"inplace", 'b', "False"}}, .repr = inplace_repr, .lower = relu_lower};
const builtin nn_silu = {"SiLU", 1, {{"inplace", 'b', "False"}}, .repr = inplace_repr, .lower = silu_lower};
const builtin nn_sigmoid = {"Sigmoid", 0, {{0}}, .lower = sigmoid_lower};
const builtin nn_tanh = {"Tanh", 0, {{0}}, .lower = tanh_lower};

static void gelu_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    NEED(strcmp(in->args[0].s, "none") == 0 || strcmp(in->args[0].s, "tanh") == 0, 0,
         "approximate must be 'none' or 'tanh', got '%s'", in->args[0].s);
}

static void gelu_repr(const inst *in, dpc_buf *out) { dpc_buf_printf(out, "approximate='%s'", in->args[0].s); }

static ir_node *gelu_lower(builder *b, inst *m, ir_node *x, loc at) {
    return unary(b, strcmp(m->args[0].s, "tanh") == 0 ? OP_GELU_TANH : OP_GELU, x, at, m->path);
}

const builtin nn_gelu = {
    "GELU", 1, {{"approximate", 's', "'none'"}}, .init = gelu_init, .repr = gelu_repr, .lower = gelu_lower,
};

/* nn.Softmax(dim=None) picks dim 0 for 0-, 1- and 3-D input, else 1 */
static int64_t implicit_softmax_dim(int rank) { return (rank == 0 || rank == 1 || rank == 3) ? 0 : 1; }

static void dim_repr(const inst *in, dpc_buf *out) { repr_kv(out, "", "dim", &in->args[0]); }

static ir_node *softmax_lower(builder *b, inst *m, ir_node *x, loc at) {
    int64_t d = m->args[0].kind == V_INT ? m->args[0].i : implicit_softmax_dim(x->sh.rank);
    return softmax(b, m->bi == BI_SOFTMAX ? OP_SOFTMAX : OP_LOG_SOFTMAX, x, d, at, m->path);
}

const builtin nn_softmax = {"Softmax", 1, {{"dim", 'n', "None"}}, .repr = dim_repr, .lower = softmax_lower};
const builtin nn_logsoftmax = {"LogSoftmax", 1, {{"dim", 'n', "None"}}, .repr = dim_repr, .lower = softmax_lower};

/* ----------------------------------------------------------- Flatten */

static void flatten_repr(const inst *in, dpc_buf *out) {
    repr_kv(out, "", "start_dim", &in->args[0]);
    repr_kv(out, ", ", "end_dim", &in->args[1]);
}

static ir_node *flatten_lower(builder *b, inst *m, ir_node *x, loc at) {
    return flatten(b, x, inst_int(m, 0), inst_int(m, 1), at, m->path);
}

const builtin nn_flatten = {
    "Flatten", 2, {{"start_dim", 'i', "1"}, {"end_dim", 'i', "-1"}}, .repr = flatten_repr, .lower = flatten_lower,
};

/* ------------------------------------- activations of models.md group 8:
 * ReLU6, Hardtanh, Hardswish, Hardsigmoid, LeakyReLU, Mish. inplace is
 * accepted and, as in eval, changes nothing but the print. ReLU6,
 * Hardswish, Hardsigmoid and Mish are op table rows; Hardtanh and
 * LeakyReLU, which have parameters, are chains of clamps, relu and
 * constants that fuse into one elementwise kernel. */

static ir_node *num_node(builder *b, double v, loc at) {
    sv s = {.k = SV_NUM, .v = {.kind = V_FLOAT, .f = v}};
    return as_tensor(b, &s, at, "a constant");
}

/* hardtanh(x) = clamp(x, min_val, max_val): exact, NaN stays NaN and +inf
 * gives max_val, as PyTorch (min_val + relu(x - min_val) - relu(x - max_val)
 * rounded, and gave inf - inf = NaN for +inf); one clip post-op after a
 * conv (conv_post.c). */
ir_node *nn_hardtanh_of(builder *b, ir_node *x, double lo, double hi, loc at, const char *scope) {
    ir_node *l = num_node(b, lo, at), *h = num_node(b, hi, at);
    ir_node *a = l && h ? elementwise(b, OP_CLAMP_MIN, x, l, at, scope) : NULL;
    return a ? elementwise(b, OP_CLAMP_MAX, a, h, at, scope) : NULL;
}

/* leaky_relu(x) = relu(x) - negative_slope * relu(-x): exactly PyTorch's
 * x > 0 ? x : x * negative_slope, NaN and the infinities included (-inf
 * with slope 0 is 0 * inf = NaN in both), since relu keeps NaN (ir.h). */
ir_node *nn_leaky_relu_of(builder *b, ir_node *x, double slope, loc at, const char *scope) {
    ir_node *s = num_node(b, slope, at);
    ir_node *p = unary(b, OP_RELU, x, at, scope);
    ir_node *nx = p && s ? unary(b, OP_NEG, x, at, scope) : NULL;
    ir_node *n = nx ? unary(b, OP_RELU, nx, at, scope) : NULL;
    ir_node *sn = n ? elementwise(b, OP_MUL, n, s, at, scope) : NULL;
    return sn ? elementwise(b, OP_SUB, p, sn, at, scope) : NULL;
}

static ir_node *relu6_lower(builder *b, inst *m, ir_node *x, loc at) { return unary(b, OP_RELU6, x, at, m->path); }
static ir_node *hardswish_lower(builder *b, inst *m, ir_node *x, loc at) {
    return unary(b, OP_HARDSWISH, x, at, m->path);
}
static ir_node *hardsigmoid_lower(builder *b, inst *m, ir_node *x, loc at) {
    return unary(b, OP_HARDSIGMOID, x, at, m->path);
}
static ir_node *mish_lower(builder *b, inst *m, ir_node *x, loc at) { return unary(b, OP_MISH, x, at, m->path); }

/* ReLU6 and Mish print inplace=True when set; Hardswish and Hardsigmoid
 * have no extra_repr (inplace is never shown). */
const builtin nn_relu6 = {"ReLU6", 1, {{"inplace", 'b', "False"}}, .repr = inplace_repr, .lower = relu6_lower};
const builtin nn_hardswish = {"Hardswish", 1, {{"inplace", 'b', "False"}}, .lower = hardswish_lower};
const builtin nn_hardsigmoid = {"Hardsigmoid", 1, {{"inplace", 'b', "False"}}, .lower = hardsigmoid_lower};
const builtin nn_mish = {"Mish", 1, {{"inplace", 'b', "False"}}, .repr = inplace_repr, .lower = mish_lower};

/* Hardtanh(min_val=-1.0, max_val=1.0, inplace=False); torch 1.13's
 * deprecated min_value/max_value are not accepted. */
static void hardtanh_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    NEED(inst_float(in, 1) > inst_float(in, 0), 1, "max_val must be greater than min_val");
}

static void hardtanh_repr(const inst *in, dpc_buf *out) {
    repr_kv(out, "", "min_val", &in->args[0]);
    repr_kv(out, ", ", "max_val", &in->args[1]);
    if (in->args[2].i)
        dpc_buf_puts(out, ", inplace=True");
}

static ir_node *hardtanh_lower(builder *b, inst *m, ir_node *x, loc at) {
    return nn_hardtanh_of(b, x, inst_float(m, 0), inst_float(m, 1), at, m->path);
}

const builtin nn_hardtanh = {
    "Hardtanh", 3, {{"min_val", 'f', "-1.0"}, {"max_val", 'f', "1.0"}, {"inplace", 'b', "False"}},
    .init = hardtanh_init, .repr = hardtanh_repr, .lower = hardtanh_lower,
};

static void leakyrelu_repr(const inst *in, dpc_buf *out) {
    repr_kv(out, "", "negative_slope", &in->args[0]);
    if (in->args[1].i)
        dpc_buf_puts(out, ", inplace=True");
}

static ir_node *leakyrelu_lower(builder *b, inst *m, ir_node *x, loc at) {
    return nn_leaky_relu_of(b, x, inst_float(m, 0), at, m->path);
}

const builtin nn_leakyrelu = {
    "LeakyReLU", 2, {{"negative_slope", 'f', "0.01"}, {"inplace", 'b', "False"}},
    .repr = leakyrelu_repr, .lower = leakyrelu_lower,
};

/* torchvision.ops.StochasticDepth(p, mode): the identity in eval (its
 * checks run at construction here; torchvision makes them in forward). */
static void stochasticdepth_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    double p = inst_float(in, 0);
    char num[64];
    dpc_format_pyfloat(p, num, sizeof num);
    NEED(p >= 0 && p <= 1, 0, "drop probability has to be between 0 and 1, but got %s", num);
    NEED(strcmp(in->args[1].s, "batch") == 0 || strcmp(in->args[1].s, "row") == 0, 1,
         "mode has to be either 'batch' or 'row', but got %s", in->args[1].s);
}

/* its own __repr__: StochasticDepth(p=0.0125, mode=row), mode unquoted */
static void stochasticdepth_repr(const inst *in, dpc_buf *out) {
    repr_kv(out, "", "p", &in->args[0]);
    dpc_buf_printf(out, ", mode=%s", in->args[1].s);
}

const builtin nn_stochasticdepth = {
    "StochasticDepth", 2, {{"p", 'f', NULL}, {"mode", 's', NULL}},
    .init = stochasticdepth_init, .repr = stochasticdepth_repr, .lower = identity_lower, .any_dtype = true,
};

/* torchvision.ops.misc.Permute(dims): torch.permute(x, dims); prints
 * Permute() (no extra_repr). */
static void permute_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    const val *d = &in->args[0];
    NEED(d->kind != V_NONE, 0, "dims must be a list of ints");
    if (d->kind == V_NONE)
        return;
    NEED(d->n <= IR_MAX_RANK, 0, "dims has %d entries (limit %d)", d->n, IR_MAX_RANK);
}

static ir_node *permute_lower(builder *b, inst *m, ir_node *x, loc at) {
    const val *d = &m->args[0];
    int r = x->sh.rank, perm[IR_MAX_RANK], seen[IR_MAX_RANK] = {0};
    if (d->n != r) {
        error_at(b->c, at, "%s: number of dims don't match in permute (%d given for a %d-D input)", who(m), d->n, r);
        return NULL;
    }
    for (int i = 0; i < r; i++) {
        if (!norm_dim(b, d->items[i].i, r, at, &perm[i]))
            return NULL;
        if (seen[perm[i]]++) {
            error_at(b->c, at, "%s: repeated dim %d in permute", who(m), perm[i]);
            return NULL;
        }
    }
    ir_node *n = permute(b, x, perm, at);
    if (n && n != x)
        n->scope = m->path;
    return n;
}

const builtin nn_permute = {
    "Permute", 1, {{"dims", 'L', NULL}}, .init = permute_init, .lower = permute_lower, .any_dtype = true,
};

/* HuggingFace's Conv1D(nf, nx) (transformers pytorch_utils): a Linear
 * whose weight is stored [nx, nf] = [in, out]; forward x @ W + b over the
 * last dim (torch.addmm on x.view(-1, nx)). Prints Conv1D(); init
 * normal_(std=0.02), bias zeros. */
static void hfconv1d_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    NEED(inst_int(in, 0) > 0, 0, "nf must be positive, got %lld", (long long)inst_int(in, 0));
    NEED(inst_int(in, 1) > 0, 1, "nx must be positive, got %lld", (long long)inst_int(in, 1));
}

static void hfconv1d_params(dpc_ctx *c, model *m, inst *in) {
    int64_t w[2] = {inst_int(in, 1), inst_int(in, 0)};
    builtin_add_param(c, m, in, "weight", 2, w, INIT_NORMAL_STD, 0.02);
    builtin_add_param(c, m, in, "bias", 1, w + 1, INIT_ZEROS, 0);
}

static ir_node *hfconv1d_lower(builder *b, inst *m, ir_node *x, loc at) {
    int64_t nx = inst_int(m, 1);
    if (x->sh.rank < 1 || x->sh.d[x->sh.rank - 1].sym || x->sh.d[x->sh.rank - 1].k != nx) {
        expects(b, at, who(m), &x->sh, x->sh.rank ? x->sh.rank - 1 : 0, &nx, 1);
        return NULL;
    }
    ir_node *w = param_node(b, m, "weight", at), *bias = param_node(b, m, "bias", at);
    ir_node *y = w ? matmul(b, x, w, at) : NULL;
    if (y)
        y->scope = m->path;
    return y && bias ? elementwise(b, OP_ADD, y, bias, at, m->path) : NULL;
}

const builtin nn_hfconv1d = {
    "Conv1D", 2, {{"nf", 'i', NULL}, {"nx", 'i', NULL}},
    .init = hfconv1d_init, .params = hfconv1d_params, .lower = hfconv1d_lower,
};
