/* nn_conv.c - the convolution, pooling and resampling modules: Conv1d, Conv2d,
 * MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, ConvTranspose2d,
 * Upsample (and interpolate). One row each (irbuild.h's
 * `builtin`), after its functions: signature, __init__ checks, state_dict,
 * extra_repr and lowering. */
#include "irbuild.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------ Conv1d and Conv2d */

/* Argument slots, the same in both: in_channels, out_channels,
 * kernel_size, stride, padding, dilation, groups, bias, padding_mode. */
enum { C_IN, C_OUT, C_K, C_S, C_P, C_D, C_G, C_BIAS, C_MODE };

/* PyTorch's _ConvNd.__init__ checks, for nd spatial dims. */
/* groups > 0 dividing both channel counts: Conv and ConvTranspose, whose
 * arguments sit at slots gi, ini, outi of their signatures. */
static void groups_init(dpc_ctx *c, const inst *in, const loc *arg_at, int gi, int ini, int outi) {
    int64_t g = inst_int(in, gi);
    NEED(g > 0, gi, "groups must be positive, got %lld", (long long)g);
    if (g > 0) {
        NEED(inst_int(in, ini) % g == 0, ini, "in_channels (%lld) must be divisible by groups (%lld)",
             (long long)inst_int(in, ini), (long long)g);
        NEED(inst_int(in, outi) % g == 0, outi, "out_channels (%lld) must be divisible by groups (%lld)",
             (long long)inst_int(in, outi), (long long)g);
    }
}

static void conv_init(dpc_ctx *c, inst *in, const loc *arg_at, int nd) {
    int64_t k[2], s[2], d[2];
    tuple_of(&in->args[C_K], nd, k), tuple_of(&in->args[C_S], nd, s), tuple_of(&in->args[C_D], nd, d);
    bool kpos = true, spos = true, dpos = true, s1 = true;
    for (int i = 0; i < nd; i++)
        kpos &= k[i] > 0, spos &= s[i] > 0, dpos &= d[i] > 0, s1 &= s[i] == 1;
    NEED(inst_int(in, C_IN) > 0, C_IN, "in_channels must be positive, got %lld", (long long)inst_int(in, C_IN));
    NEED(inst_int(in, C_OUT) > 0, C_OUT, "out_channels must be positive, got %lld", (long long)inst_int(in, C_OUT));
    NEED(kpos, C_K, "kernel_size must be positive");
    NEED(spos, C_S, "stride must be positive");
    NEED(dpos, C_D, "dilation must be positive");
    groups_init(c, in, arg_at, C_G, C_IN, C_OUT);
    const val *p = &in->args[C_P];
    if (p->kind == V_STR) {
        NEED(strcmp(p->s, "same") == 0 || strcmp(p->s, "valid") == 0, C_P,
             "padding must be 'same', 'valid' or numbers, got '%s'", p->s);
        NEED(strcmp(p->s, "same") != 0 || s1, C_P, "padding='same' is not supported for strided convolutions");
    } else {
        int64_t pp[2];
        tuple_of(p, nd, pp);
        NEED(pp[0] >= 0 && pp[nd - 1] >= 0, C_P, "padding must be non-negative");
    }
    NEED(strcmp(in->args[C_MODE].s, "zeros") == 0, C_MODE, "padding_mode '%s' is not supported (only 'zeros')",
         in->args[C_MODE].s);
}

/* weight [out, in / groups, *kernel], bias [out]; PyTorch's default init
 * (kaiming_uniform_(a=sqrt(5)), the bias uniform in +-1/sqrt(fan_in)). */
static void conv_params(dpc_ctx *c, model *m, inst *in, int nd) {
    int64_t k[2], w[4] = {inst_int(in, C_OUT), inst_int(in, C_IN) / inst_int(in, C_G)};
    tuple_of(&in->args[C_K], nd, k);
    double fan_in = (double)w[1];
    for (int i = 0; i < nd; i++) {
        w[2 + i] = k[i];
        fan_in *= (double)k[i];
    }
    builtin_add_param(c, m, in, "weight", 2 + nd, w, INIT_KAIMING, fan_in);
    if (inst_bool(in, C_BIAS))
        builtin_add_param(c, m, in, "bias", 1, w, INIT_BIAS, fan_in);
}

/* An int or a tuple as PyTorch's _single / _pair tuple: (3,) or (3, 3). */
static void repr_tuple(const val *v, int nd, dpc_buf *out) {
    int64_t t[2];
    tuple_of(v, nd, t);
    if (nd == 1)
        dpc_buf_printf(out, "(%lld,)", (long long)t[0]);
    else
        dpc_buf_printf(out, "(%lld, %lld)", (long long)t[0], (long long)t[1]);
}

static bool tuple_is(const val *v, int nd, int64_t x) {
    int64_t t[2];
    tuple_of(v, nd, t);
    return t[0] == x && t[nd - 1] == x;
}

/* _ConvNd.extra_repr: the defaults (padding 0, dilation 1, groups 1,
 * bias, 'zeros') are left out. */
static void conv_repr(const inst *in, dpc_buf *out, int nd) {
    dpc_buf_printf(out, "%lld, %lld, kernel_size=", (long long)inst_int(in, C_IN), (long long)inst_int(in, C_OUT));
    repr_tuple(&in->args[C_K], nd, out);
    dpc_buf_puts(out, ", stride=");
    repr_tuple(&in->args[C_S], nd, out);
    const val *p = &in->args[C_P];
    if (p->kind == V_STR) {
        dpc_buf_printf(out, ", padding=%s", p->s);
    } else if (!tuple_is(p, nd, 0)) {
        dpc_buf_puts(out, ", padding=");
        repr_tuple(p, nd, out);
    }
    if (!tuple_is(&in->args[C_D], nd, 1)) {
        dpc_buf_puts(out, ", dilation=");
        repr_tuple(&in->args[C_D], nd, out);
    }
    if (inst_int(in, C_G) != 1)
        dpc_buf_printf(out, ", groups=%lld", (long long)inst_int(in, C_G));
    if (!inst_bool(in, C_BIAS))
        dpc_buf_puts(out, ", bias=False");
    if (strcmp(in->args[C_MODE].s, "zeros") != 0)
        dpc_buf_printf(out, ", padding_mode=%s", in->args[C_MODE].s);
}

/* The leading padding p and the extra trailing padding of each spatial
 * dim. "same": PyTorch pads total = dilation * (kernel - 1), total / 2
 * before; an odd total puts the extra row/column after (bottom, right).
 * The kernels read out-of-range input as zero, so only the leading padding
 * and the output size need to know. */
static void conv_padding(const inst *m, int nd, const int64_t *k, const int64_t *d, int64_t *p, int64_t *extra) {
    const val *pv = &m->args[C_P];
    for (int i = 0; i < nd; i++)
        p[i] = extra[i] = 0;
    if (pv->kind != V_STR)
        tuple_of(pv, nd, p);
    else if (strcmp(pv->s, "same") == 0)
        for (int i = 0; i < nd; i++) {
            int64_t total = d[i] * (k[i] - 1);
            p[i] = total / 2;
            extra[i] = total % 2;
        }
}

/* The conv2d node over x [N, C, H, W] with weight w [out, in/g, kh, kw]. */
static ir_node *conv2d_node(builder *b, inst *m, ir_node *x, ir_node *w, const int64_t *k, const int64_t *s,
                            const int64_t *p, const int64_t *d, const int64_t *extra, loc at) {
    ir_node *bias = param_node(b, m, "bias", at);
    ir_node *n = mk_op(b, OP_CONV2D, at, m->path, x, w, bias);
    if (!n)
        return NULL;
    n->attr.conv = (conv_attr){.stride = {s[0], s[1]},
                               .pad = {p[0], p[1], p[0] + extra[0], p[1] + extra[1]},
                               .dil = {d[0], d[1]},
                               .groups = inst_int(m, C_G)};
    n->sh = x->sh;
    n->sh.d[1] = (dim){inst_int(m, C_OUT), false};
    char what[64];
    snprintf(what, sizeof what, "kernel_size (%lld, %lld)", (long long)k[0], (long long)k[1]);
    return window_out(b, n, x, k, s, p, d, extra, false, at, who(m), what) ? n : NULL;
}

/* x has rank `rank` ([N, C, ...]) and `channels` channels (any if < 0). */
static bool want_nd(builder *b, inst *m, ir_node *x, loc at, int64_t channels, int rank, const char *dims) {
    if (x->sh.rank != rank) {
        error_at(b->c, at, "%s expects a %d-D input %s, got %s", who(m), rank, dims, shp(b, &x->sh));
        return false;
    }
    if (channels >= 0 && (x->sh.d[1].sym || x->sh.d[1].k != channels)) {
        expects(b, at, who(m), &x->sh, 1, &channels, 1);
        return false;
    }
    return need_concrete(b, x, 1, at, who(m));
}

static bool want_4d(builder *b, inst *m, ir_node *x, loc at, int64_t channels) {
    return want_nd(b, m, x, at, channels, 4, "[N, C, H, W]");
}

/* --- Conv2d */

static void conv2d_init(dpc_ctx *c, inst *in, const loc *arg_at) { conv_init(c, in, arg_at, 2); }
static void conv2d_params(dpc_ctx *c, model *m, inst *in) { conv_params(c, m, in, 2); }
static void conv2d_repr(const inst *in, dpc_buf *out) { conv_repr(in, out, 2); }

static ir_node *conv2d_lower(builder *b, inst *m, ir_node *x, loc at) {
    if (!want_4d(b, m, x, at, inst_int(m, C_IN)))
        return NULL;
    int64_t k[2], s[2], d[2], p[2], extra[2];
    inst_pair(m, C_K, k), inst_pair(m, C_S, s), inst_pair(m, C_D, d);
    conv_padding(m, 2, k, d, p, extra);
    ir_node *w = param_node(b, m, "weight", at);
    return conv2d_node(b, m, x, w, k, s, p, d, extra, at);
}

const builtin nn_conv2d = {
    "Conv2d", 9,
    {{"in_channels", 'i', NULL}, {"out_channels", 'i', NULL}, {"kernel_size", 'p', NULL}, {"stride", 'p', "1"},
     {"padding", 'q', "0"}, {"dilation", 'p', "1"}, {"groups", 'i', "1"}, {"bias", 'b', "True"},
     {"padding_mode", 's', "'zeros'"}},
    .init = conv2d_init, .params = conv2d_params, .repr = conv2d_repr, .lower = conv2d_lower,
};

/* --- Conv1d: a conv2d over [N, C, 1, L], the weight [out, in/g, k] viewed
 * as [out, in/g, 1, k]; the views cost nothing (fuse.c). */

static void conv1d_init(dpc_ctx *c, inst *in, const loc *arg_at) { conv_init(c, in, arg_at, 1); }
static void conv1d_params(dpc_ctx *c, model *m, inst *in) { conv_params(c, m, in, 1); }
static void conv1d_repr(const inst *in, dpc_buf *out) { conv_repr(in, out, 1); }

static ir_node *conv1d_lower(builder *b, inst *m, ir_node *x, loc at) {
    if (!want_nd(b, m, x, at, inst_int(m, C_IN), 3, "[N, C, L]"))
        return NULL;
    int64_t k[2] = {1}, s[2] = {1}, d[2] = {1}, p[2] = {0}, extra[2] = {0};
    tuple_of(&m->args[C_K], 1, k + 1), tuple_of(&m->args[C_S], 1, s + 1), tuple_of(&m->args[C_D], 1, d + 1);
    conv_padding(m, 1, k + 1, d + 1, p + 1, extra + 1);
    if (window_size(x->sh.d[2].k + extra[1], k[1], s[1], p[1], d[1], false) <= 0) {
        error_at(b->c, at, "%s: input %s is too small for kernel_size (%lld,)", who(m), shp(b, &x->sh),
                 (long long)k[1]);
        return NULL;
    }
    ir_node *w = param_node(b, m, "weight", at);
    shape x4 = {4, {x->sh.d[0], x->sh.d[1], {1, false}, x->sh.d[2]}};
    shape w4 = {4, {w->sh.d[0], w->sh.d[1], {1, false}, w->sh.d[2]}};
    ir_node *xv = reshape_to(b, x, &x4, at, m->path), *wv = w ? reshape_to(b, w, &w4, at, m->path) : NULL;
    ir_node *y = xv && wv ? conv2d_node(b, m, xv, wv, k, s, p, d, extra, at) : NULL;
    if (!y)
        return NULL;
    shape y3 = {3, {y->sh.d[0], y->sh.d[1], y->sh.d[3]}};
    return reshape_to(b, y, &y3, at, m->path);
}

const builtin nn_conv1d = {
    "Conv1d", 9,
    {{"in_channels", 'i', NULL}, {"out_channels", 'i', NULL}, {"kernel_size", 'u', NULL}, {"stride", 'u', "1"},
     {"padding", 'U', "0"}, {"dilation", 'u', "1"}, {"groups", 'i', "1"}, {"bias", 'b', "True"},
     {"padding_mode", 's', "'zeros'"}},
    .init = conv1d_init, .params = conv1d_params, .repr = conv1d_repr, .lower = conv1d_lower,
};

/* -------------------------------------------------------------- pools */

/* MaxPool2d and AvgPool2d: kernel_size, stride, padding, then their own. */
static void pool_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    /* stride=None means "same as kernel_size", in the form it was given */
    if (in->args[1].kind == V_NONE)
        in->args[1] = in->args[0];
    int64_t k[2], p[2], s[2];
    inst_pair(in, 0, k), inst_pair(in, 2, p), inst_pair(in, 1, s);
    NEED(k[0] > 0 && k[1] > 0, 0, "kernel_size must be positive");
    NEED(s[0] > 0 && s[1] > 0, 1, "stride must be positive");
    NEED(p[0] >= 0 && p[1] >= 0 && 2 * p[0] <= k[0] && 2 * p[1] <= k[1], 2,
         "pad should be at most half of kernel size");
    if (in->bi == BI_MAXPOOL2D) {
        int64_t d[2];
        inst_pair(in, 3, d);
        NEED(d[0] > 0 && d[1] > 0, 3, "dilation must be positive");
        NEED(!inst_bool(in, 4), 4, "return_indices=True is not supported");
    } else
        NEED(in->args[5].kind == V_NONE || in->args[5].i != 0, 5, "divisor_override must not be 0");
}

static ir_node *pool_lower(builder *b, inst *m, ir_node *x, loc at) {
    if (!want_4d(b, m, x, at, -1))
        return NULL;
    bool maxp = m->bi == BI_MAXPOOL2D;
    int64_t k[2], s[2], p[2], d[2] = {1, 1};
    inst_pair(m, 0, k), inst_pair(m, 1, s), inst_pair(m, 2, p);
    if (maxp)
        inst_pair(m, 3, d);
    ir_node *n = mk_op(b, maxp ? OP_MAXPOOL2D : OP_AVGPOOL2D, at, m->path, x, NULL, NULL);
    if (!n)
        return NULL;
    pool_attr *pa = &n->attr.pool;
    *pa = (pool_attr){.k = {k[0], k[1]}, .s = {s[0], s[1]}, .p = {p[0], p[1]}};
    pa->ceil = maxp ? inst_bool(m, 5) : inst_bool(m, 3);
    pa->count_include_pad = maxp ? false : inst_bool(m, 4);
    if (maxp)
        pa->d[0] = d[0], pa->d[1] = d[1];
    else
        pa->divisor = m->args[5].kind == V_INT ? m->args[5].i : 0;
    n->sh = x->sh;
    static const int64_t none[2] = {0, 0};
    return window_out(b, n, x, k, s, p, d, none, pa->ceil, at, who(m), "the pooling window") ? n : NULL;
}

static void maxpool2d_repr(const inst *in, dpc_buf *out) {
    const val *a = in->args;
    repr_kv(out, "", "kernel_size", &a[0]);
    repr_kv(out, ", ", "stride", &a[1]);
    repr_kv(out, ", ", "padding", &a[2]);
    repr_kv(out, ", ", "dilation", &a[3]);
    repr_kv(out, ", ", "ceil_mode", &a[5]);
}

const builtin nn_maxpool2d = {
    "MaxPool2d", 6,
    {{"kernel_size", 'p', NULL}, {"stride", 'P', "None"}, {"padding", 'p', "0"}, {"dilation", 'p', "1"},
     {"return_indices", 'b', "False"}, {"ceil_mode", 'b', "False"}},
    .init = pool_init, .repr = maxpool2d_repr, .lower = pool_lower,
};

static void avgpool2d_repr(const inst *in, dpc_buf *out) {
    const val *a = in->args;
    repr_kv(out, "", "kernel_size", &a[0]);
    repr_kv(out, ", ", "stride", &a[1]);
    repr_kv(out, ", ", "padding", &a[2]);
}

const builtin nn_avgpool2d = {
    "AvgPool2d", 6,
    {{"kernel_size", 'p', NULL}, {"stride", 'P', "None"}, {"padding", 'p', "0"}, {"ceil_mode", 'b', "False"},
     {"count_include_pad", 'b', "True"}, {"divisor_override", 'n', "None"}},
    .init = pool_init, .repr = avgpool2d_repr, .lower = pool_lower,
};

/* --- AdaptiveAvgPool2d */

static void adaptiveavgpool2d_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    const val *o = &in->args[0];
    if (o->kind == V_INT)
        NEED(o->i > 0, 0, "output_size must be positive");
    else if (o->kind != V_NONE)
        for (int i = 0; i < 2; i++)
            NEED(o->items[i].kind == V_NONE || o->items[i].i > 0, 0, "output_size must be positive");
}

static void adaptiveavgpool2d_repr(const inst *in, dpc_buf *out) { repr_kv(out, "", "output_size", &in->args[0]); }

static ir_node *adaptiveavgpool2d_lower(builder *b, inst *m, ir_node *x, loc at) {
    if (!want_4d(b, m, x, at, -1))
        return NULL;
    ir_node *n = mk_op(b, m->bi == BI_ADAPTIVEMAXPOOL2D ? OP_ADAPTIVE_MAXPOOL2D : OP_ADAPTIVE_AVGPOOL2D, at, m->path,
                       x, NULL, NULL);
    if (!n)
        return NULL;
    n->sh = x->sh;
    const val *o = &m->args[0];
    for (int i = 0; i < 2; i++) {
        const val *e = o->kind == V_INT || o->kind == V_NONE ? o : &o->items[i];
        if (e->kind == V_INT)
            n->sh.d[2 + i] = (dim){e->i, false};
    }
    return n;
}

const builtin nn_adaptiveavgpool2d = {
    "AdaptiveAvgPool2d", 1, {{"output_size", 'o', NULL}},
    .init = adaptiveavgpool2d_init, .repr = adaptiveavgpool2d_repr, .lower = adaptiveavgpool2d_lower,
};

/* --- AdaptiveMaxPool2d: AdaptiveAvgPool2d's windows, their max */

static void adaptivemaxpool2d_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    adaptiveavgpool2d_init(c, in, arg_at);
    NEED(!inst_bool(in, 1), 1, "return_indices=True is not supported");
}

const builtin nn_adaptivemaxpool2d = {
    "AdaptiveMaxPool2d", 2, {{"output_size", 'o', NULL}, {"return_indices", 'b', "False"}},
    .init = adaptivemaxpool2d_init, .repr = adaptiveavgpool2d_repr, .lower = adaptiveavgpool2d_lower,
};

/* ------------------------------------------------- ConvTranspose2d */

/* Argument slots, PyTorch's order: in_channels, out_channels, kernel_size,
 * stride, padding, output_padding, groups, bias, dilation, padding_mode. */
enum { T_IN, T_OUT, T_K, T_S, T_P, T_OP, T_G, T_BIAS, T_D, T_MODE };

/* _ConvNd.__init__'s checks, and the one ATen makes at forward: output
 * padding must be smaller than the stride or the dilation. */
static void convtranspose2d_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    int64_t k[2], s[2], p[2], op[2], d[2];
    inst_pair(in, T_K, k), inst_pair(in, T_S, s), inst_pair(in, T_P, p), inst_pair(in, T_OP, op), inst_pair(in, T_D, d);
    NEED(inst_int(in, T_IN) > 0, T_IN, "in_channels must be positive, got %lld", (long long)inst_int(in, T_IN));
    NEED(inst_int(in, T_OUT) > 0, T_OUT, "out_channels must be positive, got %lld", (long long)inst_int(in, T_OUT));
    NEED(k[0] > 0 && k[1] > 0, T_K, "kernel_size must be positive");
    NEED(s[0] > 0 && s[1] > 0, T_S, "stride must be positive");
    NEED(d[0] > 0 && d[1] > 0, T_D, "dilation must be positive");
    NEED(p[0] >= 0 && p[1] >= 0, T_P, "padding must be non-negative");
    NEED(op[0] >= 0 && op[1] >= 0, T_OP, "output_padding must be non-negative");
    bool op_ok = true;
    for (int i = 0; i < 2; i++)
        op_ok &= op[i] < s[i] || op[i] < d[i];
    NEED(op_ok, T_OP,
         "output padding must be smaller than either stride or dilation, got output_padding (%lld, %lld), "
         "stride (%lld, %lld), dilation (%lld, %lld)",
         (long long)op[0], (long long)op[1], (long long)s[0], (long long)s[1], (long long)d[0], (long long)d[1]);
    groups_init(c, in, arg_at, T_G, T_IN, T_OUT);
    NEED(strcmp(in->args[T_MODE].s, "zeros") == 0, T_MODE,
         "Only \"zeros\" padding mode is supported for ConvTranspose2d, got '%s'", in->args[T_MODE].s);
}

/* weight [in, out / groups, kh, kw], bias [out]. PyTorch's init: fan_in is
 * weight.size(1) * kh * kw (init._calculate_fan_in_and_fan_out reads dim 1
 * whatever the layout), so out / groups * kh * kw here. */
static void convtranspose2d_params(dpc_ctx *c, model *m, inst *in) {
    int64_t k[2];
    inst_pair(in, T_K, k);
    int64_t w[4] = {inst_int(in, T_IN), inst_int(in, T_OUT) / inst_int(in, T_G), k[0], k[1]};
    double fan_in = (double)w[1] * (double)k[0] * (double)k[1];
    builtin_add_param(c, m, in, "weight", 4, w, INIT_KAIMING, fan_in);
    int64_t bshape[1] = {inst_int(in, T_OUT)};
    if (inst_bool(in, T_BIAS))
        builtin_add_param(c, m, in, "bias", 1, bshape, INIT_BIAS, fan_in);
}

/* _ConvNd.extra_repr: padding, dilation, output_padding, groups, bias, in
 * that order, each left out at its default. */
static void convtranspose2d_repr(const inst *in, dpc_buf *out) {
    dpc_buf_printf(out, "%lld, %lld, kernel_size=", (long long)inst_int(in, T_IN), (long long)inst_int(in, T_OUT));
    repr_tuple(&in->args[T_K], 2, out);
    dpc_buf_puts(out, ", stride=");
    repr_tuple(&in->args[T_S], 2, out);
    static const struct {
        int slot;
        const char *name;
        int64_t deflt;
    } opt[] = {{T_P, "padding", 0}, {T_D, "dilation", 1}, {T_OP, "output_padding", 0}};
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        if (!tuple_is(&in->args[opt[i].slot], 2, opt[i].deflt)) {
            dpc_buf_printf(out, ", %s=", opt[i].name);
            repr_tuple(&in->args[opt[i].slot], 2, out);
        }
    if (inst_int(in, T_G) != 1)
        dpc_buf_printf(out, ", groups=%lld", (long long)inst_int(in, T_G));
    if (!inst_bool(in, T_BIAS))
        dpc_buf_puts(out, ", bias=False");
}

/* Output size per dim: (H - 1) * stride - 2 * padding + dilation * (k - 1)
 * + output_padding + 1. */
static ir_node *convtranspose2d_lower(builder *b, inst *m, ir_node *x, loc at) {
    if (!want_4d(b, m, x, at, inst_int(m, T_IN)))
        return NULL;
    int64_t k[2], s[2], p[2], op[2], d[2], o[2];
    inst_pair(m, T_K, k), inst_pair(m, T_S, s), inst_pair(m, T_P, p), inst_pair(m, T_OP, op), inst_pair(m, T_D, d);
    for (int i = 0; i < 2; i++)
        o[i] = (x->sh.d[2 + i].k - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1;
    if (o[0] <= 0 || o[1] <= 0) {
        error_at(b->c, at, "%s: input %s is too small: the output would be %lld x %lld", who(m), shp(b, &x->sh),
                 (long long)o[0], (long long)o[1]);
        return NULL;
    }
    ir_node *w = param_node(b, m, "weight", at), *bias = param_node(b, m, "bias", at);
    ir_node *n = w ? mk_op(b, OP_CONV_TRANSPOSE2D, at, m->path, x, w, bias) : NULL;
    if (!n)
        return NULL;
    n->attr.conv = (conv_attr){.stride = {s[0], s[1]},
                               .pad = {p[0], p[1], p[0], p[1]},
                               .dil = {d[0], d[1]},
                               .groups = inst_int(m, T_G),
                               .out_pad = {op[0], op[1]}};
    n->sh = x->sh;
    n->sh.d[1] = (dim){inst_int(m, T_OUT), false};
    n->sh.d[2] = (dim){o[0], false};
    n->sh.d[3] = (dim){o[1], false};
    return check_size(b, n, at, who(m)) ? n : NULL;
}

const builtin nn_convtranspose2d = {
    "ConvTranspose2d", 10,
    {{"in_channels", 'i', NULL}, {"out_channels", 'i', NULL}, {"kernel_size", 'p', NULL}, {"stride", 'p', "1"},
     {"padding", 'p', "0"}, {"output_padding", 'p', "0"}, {"groups", 'i', "1"}, {"bias", 'b', "True"},
     {"dilation", 'p', "1"}, {"padding_mode", 's', "'zeros'"}},
    .init = convtranspose2d_init, .params = convtranspose2d_params, .repr = convtranspose2d_repr,
    .lower = convtranspose2d_lower,
};

/* ------------------------------------------ Upsample and interpolate */

/* F.interpolate's argument checks, shared by the module (located at its
 * arguments) and the function: the message, and the argument it is about
 * (0 size, 1 scale_factor, 2 mode, 3 align_corners, 4 recompute_scale_factor),
 * or NULL. */
const char *nn_interpolate_check(const char *mode, bool has_size, bool has_scale, bool align_given, int recompute,
                                 int *arg) {
    static const char *const known[] = {"linear", "bicubic", "trilinear", "area", "nearest-exact"};
    if (strcmp(mode, "nearest") != 0 && strcmp(mode, "bilinear") != 0) {
        *arg = 2;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strcmp(mode, known[i]) == 0)
                return "mode '%s' is not supported (only 'nearest' and 'bilinear')";
        return "mode must be one of 'nearest', 'linear', 'bilinear', 'bicubic', 'trilinear', 'area', "
               "'nearest-exact', got '%s'";
    }
    if (has_size && has_scale) {
        *arg = 1;
        return "only one of size or scale_factor should be defined";
    }
    if (!has_size && !has_scale) {
        *arg = 0;
        return "either size or scale_factor should be defined";
    }
    if (align_given && strcmp(mode, "nearest") == 0) {
        *arg = 3;
        return "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
               "trilinear";
    }
    if (recompute == 1 && has_size) {
        *arg = 4;
        return "recompute_scale_factor is not meaningful with an explicit size";
    }
    return NULL;
}

ir_node *nn_interpolate_of(builder *b, ir_node *x, bool bilinear, const int64_t *size, const double *scale,
                           bool align, bool recompute, loc at, const char *scope, const char *whom) {
    if (x->sh.rank != 4) {
        error_at(b->c, at, "%s expects a 4-D input [N, C, H, W], got %s", whom, shp(b, &x->sh));
        return NULL;
    }
    if (!need_concrete(b, x, 1, at, whom))
        return NULL;
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        if (size)
            o[i] = size[i];
        else {
            double v = floor((double)x->sh.d[2 + i].k * scale[i]);
            o[i] = v > (double)DPC_MAX_DIM ? DPC_MAX_DIM + 1 : (int64_t)v;
        }
    }
    if (o[0] <= 0 || o[1] <= 0) {
        error_at(b->c, at, "%s: the output size (%lld, %lld) of input %s must be positive", whom, (long long)o[0],
                 (long long)o[1], shp(b, &x->sh));
        return NULL;
    }
    if (o[0] > DPC_MAX_DIM || o[1] > DPC_MAX_DIM) {
        error_at(b->c, at, "%s: the output of input %s is too large (limit %lld per dim)", whom, shp(b, &x->sh),
                 (long long)DPC_MAX_DIM);
        return NULL;
    }
    ir_node *n = mk_op(b, bilinear ? OP_UPSAMPLE_BILINEAR : OP_UPSAMPLE_NEAREST, at, scope, x, NULL, NULL);
    if (!n)
        return NULL;
    n->sh = x->sh;
    n->sh.d[2] = (dim){o[0], false};
    n->sh.d[3] = (dim){o[1], false};
    /* the scales the kernel is given: scale_factor, unless recomputed from the sizes */
    for (int i = 0; i < 2; i++)
        n->attr.rs.scale[i] = size || recompute ? 0.0 : scale[i];
    n->attr.rs.align_corners = bilinear && align;
    return check_size(b, n, at, whom) ? n : NULL;
}

/* Argument slots: size, scale_factor, mode, align_corners, recompute_scale_factor. */
enum { U_SIZE, U_SCALE, U_MODE, U_ALIGN, U_RECOMPUTE };

static bool val_positive(const val *v) {
    if (v->kind == V_TUPLE || v->kind == V_LIST) {
        for (int i = 0; i < v->n; i++)
            if (!val_positive(&v->items[i]))
                return false;
        return true;
    }
    return v->kind == V_INT ? v->i > 0 : v->kind == V_FLOAT ? v->f > 0 : true;
}

/* Upsample.__init__ keeps scale_factor as floats (a falsy one is None),
 * then F.interpolate's checks. */
static void upsample_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    val *sf = &in->args[U_SCALE];
    if (sf->kind == V_INT || sf->kind == V_FLOAT) {
        double f = sf->kind == V_INT ? (double)sf->i : sf->f;
        *sf = f != 0 ? (val){.kind = V_FLOAT, .f = f} : (val){.kind = V_NONE};
    } else if (sf->kind == V_TUPLE || sf->kind == V_LIST) {
        val *items = arena_alloc(&c->arena, sizeof(val) * (size_t)(sf->n ? sf->n : 1));
        for (int i = 0; i < sf->n; i++)
            items[i] = (val){.kind = V_FLOAT, .f = sf->items[i].kind == V_INT ? (double)sf->items[i].i : sf->items[i].f};
        sf->items = items;
        sf->kind = V_TUPLE;
    }
    int arg = 0;
    const val *rc = &in->args[U_RECOMPUTE];
    const char *msg = nn_interpolate_check(in->args[U_MODE].s, in->args[U_SIZE].kind != V_NONE, sf->kind != V_NONE,
                                           in->args[U_ALIGN].kind != V_NONE, rc->kind == V_NONE ? -1 : (int)rc->i, &arg);
    if (msg) {
        error_at(c, arg_at[arg], msg, in->args[U_MODE].s);
        return;
    }
    NEED(val_positive(&in->args[U_SIZE]), U_SIZE, "size must be positive");
    NEED(val_positive(sf), U_SCALE, "scale_factor must be positive");
}

static void upsample_repr(const inst *in, dpc_buf *out) {
    if (in->args[U_SCALE].kind != V_NONE)
        repr_kv(out, "", "scale_factor", &in->args[U_SCALE]);
    else
        repr_kv(out, "", "size", &in->args[U_SIZE]);
    dpc_buf_printf(out, ", mode=%s", in->args[U_MODE].s);
}

/* A size or scale_factor for 2 spatial dims: one value repeated, or a pair
 * (PyTorch: "size shape must match input shape"). */
static bool spatial_pair(builder *b, inst *m, const val *v, loc at, const char *what, double *out) {
    if (v->kind == V_TUPLE || v->kind == V_LIST) {
        if (v->n != 2) {
            error_at(b->c, at, "%s: %s shape must match input shape: the input has 2 spatial dims, %s has %d", who(m),
                     what, what, v->n);
            return false;
        }
        for (int i = 0; i < 2; i++)
            out[i] = v->items[i].kind == V_INT ? (double)v->items[i].i : v->items[i].f;
        return true;
    }
    out[0] = out[1] = v->kind == V_INT ? (double)v->i : v->f;
    return true;
}

static ir_node *upsample_lower(builder *b, inst *m, ir_node *x, loc at) {
    const val *sz = &m->args[U_SIZE], *sf = &m->args[U_SCALE], *rc = &m->args[U_RECOMPUTE];
    double s[2];
    int64_t size[2];
    if (!spatial_pair(b, m, sz->kind != V_NONE ? sz : sf, at, sz->kind != V_NONE ? "size" : "scale_factor", s))
        return NULL;
    size[0] = (int64_t)s[0], size[1] = (int64_t)s[1];
    bool bilinear = strcmp(m->args[U_MODE].s, "bilinear") == 0;
    bool align = m->args[U_ALIGN].kind == V_BOOL && m->args[U_ALIGN].i;
    return nn_interpolate_of(b, x, bilinear, sz->kind != V_NONE ? size : NULL, sz->kind != V_NONE ? NULL : s, align,
                             rc->kind == V_BOOL && rc->i, at, m->path, who(m));
}

const builtin nn_upsample = {
    "Upsample", 5,
    {{"size", 'P', "None"}, {"scale_factor", 'r', "None"}, {"mode", 's', "'nearest'"}, {"align_corners", 'B', "None"},
     {"recompute_scale_factor", 'B', "None"}},
    .init = upsample_init, .repr = upsample_repr, .lower = upsample_lower,
};
