/* fn_activation.c - the elementwise functions in forward: the op table's
 * one-to-one functions (fn_unary), gelu, softmax/log_softmax, dropout (the
 * identity in eval), relu6, hardswish, hardsigmoid, mish, leaky_relu,
 * hardtanh, pow, clamp. */
#include "functions.h"

#include <string.h>

ir_node *fn_unary(fcall *c) {
    ir_node *x;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    return unary(c->b, ir_op_of_function(c->fn), x, c->at, NULL);
}

ir_node *fn_gelu(fcall *c) {
    ir_node *x;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    bool tanh_ = false;
    if (c->g[1]) {
        const sv *ap = &c->s[1];
        if (ap->k != SV_NUM || ap->v.kind != V_STR || (strcmp(ap->v.s, "tanh") != 0 && strcmp(ap->v.s, "none") != 0)) {
            error_at(c->b->c, c->at, "gelu(): approximate must be \"none\" or \"tanh\"");
            return NULL;
        }
        tanh_ = strcmp(ap->v.s, "tanh") == 0;
    }
    return unary(c->b, tanh_ ? OP_GELU_TANH : OP_GELU, x, c->at, NULL);
}

static ir_node *fn_softmax(fcall *c) {
    ir_node *x;
    int64_t d;
    if (c->s[0].k == SV_TENSOR && c->s[0].t->dt == IR_I64) {
        error_at(c->b->c, c->at, "%s of an int64 tensor: pass dtype=float32 (or convert it with .float())", c->fn);
        return NULL;
    }
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x) || !want_int(c->b, &c->s[1], c->at, "dim", &d))
        return NULL;
    return softmax(c->b, c->fn[0] == 's' ? OP_SOFTMAX : OP_LOG_SOFTMAX, x, d, c->at, NULL);
}

/* softmax(input, dim, dtype=None), log_softmax too: with a dtype, input is
 * converted to it first, as F.softmax does (softmax(ids, -1,
 * dtype=float32) of an int64 tensor). float32 only: dpc computes in it. */
ir_node *fn_softmax_dtype(fcall *c) {
    if (c->g[2] && c->s[2].k != SV_NONE) {
        ir_dtype t;
        if (!want_dtype(c->b, &c->s[2], c->sat[2], c->fn[0] == 's' ? "softmax()'s dtype" : "log_softmax()'s dtype",
                        false, &t))
            return NULL;
        if (t != IR_F32) {
            error_at(c->b->c, c->sat[2], "%s(): dtype must be a float dtype (float32), got %s", c->fn, dt_word(t));
            return NULL;
        }
        ir_node *x = want_any_tensor(c, 0);
        if (!x || !(x = convert(c->b, x, IR_F32, c->at, c->fn)))
            return NULL;
        c->s[0] = (sv){.k = SV_TENSOR, .t = x};
    }
    return fn_softmax(c);
}

ir_node *fn_dropout(fcall *c) {
    if (c->s[0].k != SV_TENSOR) {
        error_at(c->b->c, c->sat[0], "dropout() expects a tensor, got %s", sv_kind_name(&c->s[0]));
        return NULL;
    }
    double p = 0.5;
    if (c->g[1] && (!num_of(&c->s[1], &p) || p < 0 || p > 1)) {
        error_at(c->b->c, c->at, "dropout probability has to be between 0 and 1");
        return NULL;
    }
    return c->s[0].t; /* identity in eval mode */
}

/* --- models.md group 8: F.relu6, hardswish, hardsigmoid, mish (op table
 * rows with inplace=), leaky_relu, hardtanh (chains, nn_basic.c),
 * group_norm (nn_norm.c). inplace changes nothing in eval. */

ir_node *fn_act8(fcall *c) {
    ir_node *x;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x) || !inplace_arg(c, 1))
        return NULL;
    ir_op op = strcmp(c->fn, "relu6") == 0       ? OP_RELU6
               : strcmp(c->fn, "hardswish") == 0 ? OP_HARDSWISH
               : strcmp(c->fn, "hardsigmoid") == 0 ? OP_HARDSIGMOID
                                                   : OP_MISH;
    return unary(c->b, op, x, c->at, NULL);
}

ir_node *fn_leaky_relu(fcall *c) {
    ir_node *x;
    double slope = 0.01;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x) || !num_arg(c, 1, "negative_slope", &slope) ||
        !inplace_arg(c, 2))
        return NULL;
    return nn_leaky_relu_of(c->b, x, slope, c->at, NULL);
}

ir_node *fn_hardtanh(fcall *c) {
    ir_node *x;
    double lo = -1.0, hi = 1.0;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x) || !num_arg(c, 1, "min_val", &lo) ||
        !num_arg(c, 2, "max_val", &hi) || !inplace_arg(c, 3))
        return NULL;
    if (!(hi > lo)) {
        error_at(c->b->c, c->at, "hardtanh(): max_val must be greater than min_val");
        return NULL;
    }
    return nn_hardtanh_of(c->b, x, lo, hi, c->at, NULL);
}

/* An elementwise op of two values, one of them a tensor. */
static ir_node *binary_of(fcall *c, ir_op op, const sv *l, loc lat, const sv *r, loc rat) {
    if (l->k != SV_TENSOR && r->k != SV_TENSOR) {
        error_at(c->b->c, c->at, "%s() expects a tensor", c->fn);
        return NULL;
    }
    ir_node *x = as_tensor(c->b, l, lat, c->fn), *y = x ? as_tensor(c->b, r, rat, c->fn) : NULL;
    return y ? elementwise(c->b, op, x, y, c->at, NULL) : NULL;
}

ir_node *fn_pow(fcall *c) { return binary_of(c, OP_POW, &c->s[0], c->sat[0], &c->s[1], c->sat[1]); }

/* clamp(x, min, max) = min(max(x, min), max), as PyTorch (NaN stays NaN). */
ir_node *fn_clamp(fcall *c) {
    bool lo = c->g[1] && c->s[1].k != SV_NONE, hi = c->g[2] && c->s[2].k != SV_NONE;
    if (c->fn[5] == '_') { /* clamp_min, clamp_max: one bound, required */
        lo = c->fn[7] == 'i';
        hi = !lo;
        c->s[2] = c->s[1];
        c->sat[2] = c->sat[1];
    }
    ir_node *x;
    if (!tensor_arg(c, 0, &x))
        return NULL;
    if (!lo && !hi) {
        error_at(c->b->c, c->at, "clamp(): at least one of 'min' or 'max' must not be None");
        return NULL;
    }
    sv cur = {.k = SV_TENSOR, .t = x};
    if (lo && !(cur.t = binary_of(c, OP_CLAMP_MIN, &cur, c->at, &c->s[1], c->sat[1])))
        return NULL;
    if (hi && !(cur.t = binary_of(c, OP_CLAMP_MAX, &cur, c->at, &c->s[2], c->sat[2])))
        return NULL;
    return cur.t;
}
