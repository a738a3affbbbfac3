/* onnx_ops_act.c - the one-input elementwise ops and activations: the
 * unary functions (Relu, Sigmoid, Exp, ..., folded on constants), Softmax,
 * LeakyRelu, HardSigmoid, Clip (-> relu6), and those that dpc writes as
 * elementwise expressions (Elu, Selu, Celu, Softplus, Softsign,
 * ThresholdedRelu, Shrink, Sign, Mish, Gelu, PRelu). Each writes the
 * formula of the ONNX operator's definition (onnx/defs), in float32, so the
 * result is what ONNX's reference computes; what it cannot honour is a
 * located error. */
#include "onnx_ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct unop {
    const char *onnx, *fn;
    double (*f)(double);
} unop;

static double f_relu(double x) { return x > 0 ? x : 0; }

static double f_sigmoid(double x) { return 1 / (1 + exp(-x)); }

static double f_neg(double x) { return -x; }

static double f_recip(double x) { return 1 / x; }

static double f_not(double x) { return x == 0; }

static const unop unops[] = {
    {"Relu", "relu", f_relu}, {"Sigmoid", "sigmoid", f_sigmoid}, {"Tanh", "tanh", tanh}, {"Exp", "exp", exp},
    {"Log", "log", log}, {"Sqrt", "sqrt", sqrt}, {"Abs", "abs", fabs}, {"Erf", "erf", erf}, {"Neg", "neg", f_neg},
    {"Sin", "sin", sin}, {"Reciprocal", NULL, f_recip}, {"HardSwish", "hardswish", NULL}, {"Not", "logical_not", f_not},
};

dpc_status imp_op_unary(imp *I, const Onnx__NodeProto *n) {
    const unop *u = NULL;
    for (size_t i = 0; i < sizeof unops / sizeof *unops; i++)
        if (strcmp(unops[i].onnx, n->op_type) == 0)
            u = &unops[i];
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    int kind = strcmp(n->op_type, "Not") == 0 ? VK_BOOL : X->kind;
    bool sym = false;
    for (int64_t i = 0; X->c && X->csym && i < dpc_tensor_numel(X->c); i++)
        sym |= X->csym[i] != 0;
    if (X->c && u->f && !sym) {
        dpc_tensor *t = imp_tensor(I, X->c->dtype, X->c->rank, X->c->shape);
        if (!t)
            return DPC_ENOMEM;
        int64_t k = dpc_tensor_numel(t);
        for (int64_t i = 0; i < k; i++) {
            if (t->dtype == DPC_F32) {
                ((float *)t->data)[i] = (float)u->f(F32(X)[i]);
                continue;
            }
            int64_t x = I64(X)[i], r;
            bool ok;
            if (!strcmp(u->onnx, "Neg") || !strcmp(u->onnx, "Abs")) /* exactly; -INT64_MIN overflows */
                ok = u->onnx[0] == 'A' && x >= 0 ? (r = x, true) : !__builtin_sub_overflow((int64_t)0, x, &r);
            else if (!strcmp(u->onnx, "Relu") || !strcmp(u->onnx, "Not"))
                ok = true, r = u->onnx[0] == 'R' ? (x > 0 ? x : 0) : x == 0;
            else /* through double, converted only when in range (NaN, 2^63 are not) */
                ok = imp_i64_of(u->f((double)x), &r);
            if (!ok)
                return imp_err(I, "folding %s of the integer %lld overflows int64 (or is not a number)", u->onnx,
                               (long long)x);
            ((int64_t *)t->data)[i] = r;
        }
        return imp_set_const(I, out, t, kind, NULL);
    }
    if (X->kind != VK_FLOAT && kind != VK_BOOL && strcmp(n->op_type, "Neg") != 0 && strcmp(n->op_type, "Abs") != 0)
        return imp_err(I, "on an integer tensor (dpc computes it in float only)");
    int uu;
    const char *e = imp_ref(I, x, &uu);
    if (!e)
        return I->e->code;
    const char *ex = u->fn ? imp_printf(I, "%s(%s)", u->fn, e) : imp_printf(I, "1.0 / %s", e);
    return imp_add_stmt(I, out, NULL, ex, kind, X->rank, X->d, uu, -1, -1);
}

dpc_status imp_op_act(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    if (X->kind != VK_FLOAT || X->c)
        return imp_err(I, "on a constant or a non-float tensor");
    int u;
    const char *e = imp_ref(I, x, &u), *ex;
    if (!e)
        return I->e->code;
    if (strcmp(n->op_type, "HardSigmoid") == 0) {
        double a = imp_attr_f(I, n, "alpha", 0.2), b = imp_attr_f(I, n, "beta", 0.5);
        if (imp_near(a, 1.0 / 6) && b == 0.5)
            ex = imp_printf(I, "hardsigmoid(%s)", e);
        else {
            const char *as = imp_f32(I, a), *bs = imp_f32(I, b);
            ex = imp_printf(I, "clamp(%s * %s + %s, min=0.0, max=1.0)", e, as, bs);
        }
    } else if (strcmp(n->op_type, "LeakyRelu") == 0) {
        const char *as = imp_f32(I, imp_attr_f(I, n, "alpha", 0.01));
        ex = imp_printf(I, "leaky_relu(%s, %s)", e, as);
    } else if (strcmp(n->op_type, "Softmax") == 0 || strcmp(n->op_type, "LogSoftmax") == 0) {
        int axis = 0;
        dpc_status s = imp_axis_norm(I, imp_attr_i(I, n, "axis", I->opset >= 13 ? -1 : 1), X->rank, &axis);
        if (s != DPC_OK)
            return s;
        if (I->opset < 13 && axis != X->rank - 1)
            return imp_err(I, "a Softmax before opset 13 over axis %d (not the last) flattens: not supported", axis);
        if (axis == 0)
            return imp_err(I, "a softmax over the batch dim is not supported");
        ex = imp_printf(I, "%s(%s, %d)", n->op_type[0] == 'L' ? "log_softmax" : "softmax", e, axis);
    } else
        return imp_err(I, "internal: no activation");
    return imp_add_stmt(I, out, NULL, ex, VK_FLOAT, X->rank, X->d, u, -1, -1);
}

/* Clip(x, min, max) (attributes before opset 11) */
dpc_status imp_op_clip(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    double lo = -INFINITY, hi = INFINITY;
    bool has_lo = false, has_hi = false;
    if (I->opset < 11) {
        const Onnx__AttributeProto *a;
        if ((a = imp_attr(n, "min")))
            lo = imp_attr_f(I, n, "min", 0), has_lo = true;
        if ((a = imp_attr(n, "max")))
            hi = imp_attr_f(I, n, "max", 0), has_hi = true;
    } else {
        int a, b;
        if (imp_opt(I, n, 1, &a) && !(has_lo = imp_const_scalar(V(a), &lo)))
            return imp_err(I, "min must be a constant scalar");
        if (imp_opt(I, n, 2, &b) && !(has_hi = imp_const_scalar(V(b), &hi)))
            return imp_err(I, "max must be a constant scalar");
    }
    ival *X = V(x);
    if (X->c || X->kind != VK_FLOAT)
        return imp_err(I, "on a constant or a non-float tensor");
    int u;
    const char *e = imp_ref(I, x, &u), *ex;
    if (!e)
        return I->e->code;
    if (has_lo && has_hi && lo == 0 && hi == 6)
        ex = imp_printf(I, "relu6(%s)", e);
    else if (!has_lo && !has_hi)
        return imp_alias(I, out, x);
    else {
        char ls[48] = "None", hs[48] = "None";
        if (has_lo)
            snprintf(ls, sizeof ls, "%s", imp_f32(I, lo));
        if (has_hi)
            snprintf(hs, sizeof hs, "%s", imp_f32(I, hi));
        if ((has_lo && !isfinite(lo)) || (has_hi && !isfinite(hi))) /* an absent bound is no bound (+-inf) */
            return imp_err(I, "an infinite or NaN bound");
        ex = imp_printf(I, "clamp(%s, min=%s, max=%s)", e, ls, hs);
    }
    return imp_add_stmt(I, out, NULL, ex, VK_FLOAT, X->rank, X->d, u, -1, -1);
}

/* a float attribute as a literal (ONNX attributes are float32) */
static const char *flit(imp *I, double v) {
    if (!isfinite((float)v)) /* float("nan"), not a bare word a name could capture (import_node refuses it) */
        return imp_f32(I, v);
    char b[48];
    dpc_format_pyfloat((float)v, b, sizeof b);
    return v < 0 ? imp_printf(I, "(%s)", b) : imp_printf(I, "%s", b);
}

dpc_status imp_op_act_extra(imp *I, const Onnx__NodeProto *n) {
    int x, u, out = imp_out(I, n, 0);
    const char *e = imp_float_in(I, n, &x, &u), *ex = NULL, *op = n->op_type;
    if (!e)
        return I->e->code;
    if (!strcmp(op, "Elu")) {
        /* x for x >= 0 (and NaN), alpha * (exp(x) - 1) below */
        ex = imp_printf(I, "where(%s < 0.0, %s * (exp(%s) - 1.0), %s)", e, flit(I, imp_attr_f(I, n, "alpha", 1.0)), e, e);
    } else if (!strcmp(op, "Selu")) {
        const char *a = flit(I, imp_attr_f(I, n, "alpha", 1.67326319217681884765625)),
                   *g = flit(I, imp_attr_f(I, n, "gamma", 1.05070102214813232421875));
        ex = imp_printf(I, "%s * where(%s <= 0.0, %s * exp(%s) - %s, %s)", g, e, a, e, a, e);
    } else if (!strcmp(op, "Celu")) {
        double a = imp_attr_f(I, n, "alpha", 1.0);
        if (a == 0)
            return imp_err(I, "alpha 0");
        const char *as = flit(I, a);
        ex = imp_printf(I, "clamp_min(%s, 0.0) + clamp_max(%s * (exp(%s / %s) - 1.0), 0.0)", e, as, e, as);
    } else if (!strcmp(op, "Softplus")) {
        ex = imp_printf(I, "log(exp(%s) + 1.0)", e);
    } else if (!strcmp(op, "Softsign")) {
        ex = imp_printf(I, "%s / (1.0 + abs(%s))", e, e);
    } else if (!strcmp(op, "ThresholdedRelu")) {
        ex = imp_printf(I, "where(%s > %s, %s, 0.0)", e, flit(I, imp_attr_f(I, n, "alpha", 1.0)), e);
    } else if (!strcmp(op, "Shrink")) {
        const char *l = flit(I, imp_attr_f(I, n, "lambd", 0.5)), *b = flit(I, imp_attr_f(I, n, "bias", 0.0));
        ex = imp_printf(I, "where(%s < -%s, %s + %s, where(%s > %s, %s - %s, 0.0))", e, l, e, b, e, l, e, b);
    } else if (!strcmp(op, "Gelu")) { /* opset 20 */
        const char *ap = imp_attr_s(I, n, "approximate", "none");
        if (!ap)
            return I->e->code;
        if (strcmp(ap, "none") && strcmp(ap, "tanh"))
            return imp_err(I, "approximate must be none or tanh");
        ex = !strcmp(ap, "tanh") ? imp_printf(I, "gelu(%s, approximate=\"tanh\")", e) : imp_printf(I, "gelu(%s)", e);
    } else if (!strcmp(op, "Mish")) { /* opset 18 */
        ex = imp_printf(I, "mish(%s)", e);
    } else if (!strcmp(op, "Sign")) {
        /* NaN stays NaN, as np.sign */
        ex = imp_printf(I, "where(%s > 0.0, 1.0, where(%s < 0.0, -1.0, where(%s == 0.0, 0.0, %s)))", e, e, e, e);
    } else
        return imp_err(I, "internal: no activation");
    int uses[1] = {u};
    return imp_stmt_value(I, out, NULL, ex, VK_FLOAT, V(x)->rank, V(x)->d, uses, 1);
}

/* PRelu(x, slope): slope broadcasts to x (unidirectionally) */
dpc_status imp_op_prelu(imp *I, const Onnx__NodeProto *n) {
    int x, u, out = imp_out(I, n, 0), sl = imp_in(I, n, 1);
    const char *e = imp_float_in(I, n, &x, &u);
    if (!e)
        return I->e->code;
    if (V(sl)->kind != VK_FLOAT || !V(sl)->shaped)
        return imp_err(I, "slope must be a float tensor");
    int r;
    sdim d[DPC_MAX_RANK];
    dpc_status s = imp_broadcast(I, V(x), V(sl), &r, d);
    if (s != DPC_OK)
        return s;
    if (r != V(x)->rank || memcmp(d, V(x)->d, sizeof *d * (size_t)r) != 0)
        return imp_err(I, "slope does not broadcast to the input's shape");
    int us;
    const char *es = imp_ref(I, sl, &us);
    if (!es)
        return I->e->code;
    int uses[2] = {u, us};
    return imp_stmt_value(I, out, NULL, imp_printf(I, "where(%s < 0.0, %s * %s, %s)", e, e, es, e), VK_FLOAT, r, d, uses, 2);
}
