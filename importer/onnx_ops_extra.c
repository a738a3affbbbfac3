/* onnx_ops_extra.c - more handlers of the importer's op table (their rows
 * are in onnx_ops.c's imp_ops[] with the others): activations that dpc writes as elementwise
 * expressions (Elu, Selu, Celu, Softplus, Softsign, ThresholdedRelu,
 * Shrink, Sign, PRelu), the n-input Sum/Mean/Max/Min, the reductions
 * dpc composes from sum/amax (ReduceMin, L1, L2, SumSquare, LogSum,
 * LogSumExp) and Tile. Each writes the formula of the ONNX operator's
 * definition (onnx/defs), in float32, so the result is what ONNX's
 * reference computes; what it cannot honour is a located error. */
#include "onnx_ops_extra.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define V(i) imp_val(I, (i)) /* never outside the values (onnx_imp.h) */

/* a float attribute as a literal (ONNX attributes are float32) */
static const char *flit(imp *I, double v) {
    if (!isfinite((float)v)) /* float("nan"), not a bare word a name could capture (import_node refuses it) */
        return imp_f32(I, v);
    char b[48];
    dpc_format_pyfloat((float)v, b, sizeof b);
    return v < 0 ? imp_printf(I, "(%s)", b) : imp_printf(I, "%s", b);
}

/* the float tensor input 0 (a constant becomes a Parameter through imp_ref) */
static const char *float_in(imp *I, const Onnx__NodeProto *n, int *x, int *u) {
    *x = imp_in(I, n, 0);
    if (V(*x)->kind != VK_FLOAT || !V(*x)->shaped) {
        imp_err(I, "on a non-float tensor (dpc computes this op in float32 only)");
        return NULL;
    }
    return imp_ref(I, *x, u);
}

dpc_status imp_op_act_extra(imp *I, const Onnx__NodeProto *n) {
    int x, u, out = imp_out(I, n, 0);
    const char *e = float_in(I, n, &x, &u), *ex = NULL, *op = n->op_type;
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
    const char *e = float_in(I, n, &x, &u);
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

/* A fresh value for a partial result of this node (a name no ONNX file
 * can give: it starts with \x01). */
static int tmp_value(imp *I) {
    char nm[40];
    snprintf(nm, sizeof nm, "\x01ex%d", I->nv);
    const char *s = imp_printf(I, "%s", nm);
    return s ? imp_new_value(I, s) : -1;
}

/* The inputs of Sum, Mean, Max, Min: shaped, not bool, of one element
 * type (*kind); Mean's float. */
static dpc_status variadic_inputs(imp *I, const Onnx__NodeProto *n, int *kind) {
    *kind = VK_INT;
    for (size_t i = 0; i < n->n_input; i++) {
        const ival *v = V(imp_in(I, n, i)); /* every one given (the row's "1+") */
        if (!v->shaped)
            return imp_err(I, "an input of unknown shape");
        if (v->kind == VK_BOOL)
            return imp_err(I, "on a bool tensor");
        if (v->kind == VK_FLOAT)
            *kind = VK_FLOAT;
    }
    for (size_t i = 0; i < n->n_input; i++)
        if (V(imp_in(I, n, i))->kind != *kind)
            return imp_err(I, "inputs of different element types");
    if (!strcmp(n->op_type, "Mean") && *kind != VK_FLOAT)
        return imp_err(I, "on integer tensors");
    return DPC_OK;
}

/* Sum, Mean, Max, Min of any number of inputs, broadcasting
 * (multidirectionally): a chain of statements, each joining the partial
 * result so far with the next inputs (Sum and Mean 8 terms a statement,
 * Max and Min one pair, whose text names each operand three times), so
 * the text grows with the inputs, not faster. */
dpc_status imp_op_variadic(imp *I, const Onnx__NodeProto *n) {
    int kind, part = -1, r = 0;
    dpc_status s = variadic_inputs(I, n, &kind);
    if (s != DPC_OK)
        return s;
    const char *op = n->op_type;
    bool add = !strcmp(op, "Sum") || !strcmp(op, "Mean");
    size_t m = n->n_input, i = 0;
    sdim d[DPC_MAX_RANK];
    do {
        int uses[8], nu = 0;
        const char *acc = part >= 0 ? imp_ref(I, part, &uses[nu++]) : NULL;
        if (part >= 0 && !acc)
            return I->e->code;
        for (size_t take = (add ? 8 : 2) - (part >= 0); take > 0 && i < m; take--, i++) {
            int v = imp_in(I, n, i);
            const char *e = imp_ref(I, v, &uses[nu++]);
            if (!e)
                return I->e->code;
            if (!acc) { /* the first input */
                r = V(v)->rank;
                memcpy(d, V(v)->d, sizeof *d * (size_t)r);
                acc = e;
                continue;
            }
            ival sh = {.shaped = true, .rank = r};
            memcpy(sh.d, d, sizeof *d * (size_t)r);
            if ((s = imp_broadcast(I, &sh, V(v), &r, d)) != DPC_OK)
                return s;
            if (add)
                acc = imp_printf(I, "%s + %s", acc, e);
            else { /* np.maximum / np.minimum: a NaN on either side gives NaN */
                const char *t = imp_printf(I, "(%s)", acc);
                acc = t ? imp_printf(I, "where((%s %s %s) | (%s != %s), %s, %s)", t, op[1] == 'a' ? ">=" : "<=", e, t,
                                     t, t, e)
                        : NULL;
            }
            if (!acc)
                return I->e->code;
        }
        if (m == 1) /* one input: a copy (a statement, so the output is a computed value) */
            acc = imp_printf(I, "%s %s", acc, kind == VK_FLOAT ? "+ 0.0" : "+ 0");
        else if (i >= m && !strcmp(op, "Mean"))
            acc = imp_printf(I, "(%s) / %zu.0", acc, m);
        int dst = i >= m ? imp_out(I, n, 0) : tmp_value(I);
        if (dst < 0)
            return I->e->code ? I->e->code : DPC_ENOMEM;
        if ((s = imp_stmt_value(I, dst, NULL, acc, kind, r, d, uses, nu)) != DPC_OK)
            return s;
        part = dst;
    } while (i < m);
    return DPC_OK;
}

/* ReduceMin, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum,
 * ReduceLogSumExp (axes an attribute to opset 17, an input from 18) */
dpc_status imp_op_reduce_extra(imp *I, const Onnx__NodeProto *n) {
    int x, u, out = imp_out(I, n, 0);
    const char *e = float_in(I, n, &x, &u), *op = n->op_type;
    if (!e)
        return I->e->code;
    ival *X = V(x);
    int64_t a[DPC_MAX_RANK];
    int na;
    dpc_status s = imp_reduce_axes(I, n, a, &na);
    if (s != DPC_OK)
        return s;
    if (na <= 0 && imp_attr_i(I, n, "noop_with_empty_axes", 0))
        return imp_err(I, "noop_with_empty_axes with no axes (the input unchanged) is not supported here");
    if (na <= 0)
        return imp_err(I, "a reduction over every dim (the batch too) is not supported");
    if (na > X->rank)
        return imp_err(I, "more axes than dims");
    bool keep = imp_attr_i(I, n, "keepdims", 1) != 0, red[DPC_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        if (a[i] < -X->rank || a[i] >= X->rank)
            return imp_err(I, "axis %lld out of range for rank %d", (long long)a[i], X->rank);
        int k = (int)(a[i] < 0 ? a[i] + X->rank : a[i]);
        if (k == 0)
            return imp_err(I, "a reduction over the batch dim is not supported");
        if (red[k])
            return imp_err(I, "axis %d given twice", k);
        red[k] = true;
    }
    const char *fn = "sum", *pre = e, *post = "%s";
    if (!strcmp(op, "ReduceMin"))
        fn = "amax", pre = imp_printf(I, "neg(%s)", e), post = "neg(%s)";
    else if (!strcmp(op, "ReduceL1"))
        pre = imp_printf(I, "abs(%s)", e);
    else if (!strcmp(op, "ReduceL2"))
        pre = imp_printf(I, "%s * %s", e, e), post = "sqrt(%s)";
    else if (!strcmp(op, "ReduceSumSquare"))
        pre = imp_printf(I, "%s * %s", e, e);
    else if (!strcmp(op, "ReduceLogSum"))
        post = "log(%s)";
    else if (!strcmp(op, "ReduceLogSumExp"))
        pre = imp_printf(I, "exp(%s)", e), post = "log(%s)";
    sdim d[DPC_MAX_RANK];
    int r = 0;
    const char *ex = imp_reduce_text(I, fn, pre, X, red, keep, d, &r);
    if (ex)
        ex = imp_printf(I, post, ex);
    int uses[1] = {u};
    return imp_stmt_value(I, out, NULL, ex, VK_FLOAT, r, d, uses, 1);
}

/* Tile(x, repeats): repeats a constant; the batch dim repeated once */
dpc_status imp_op_tile(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), rp = imp_in(I, n, 1), out = imp_out(I, n, 0);
    if (!V(x)->shaped)
        return imp_err(I, "an input of unknown shape");
    ival *X = V(x), *R = V(rp);
    if (!R->c || R->kind == VK_FLOAT || R->csym || R->c->rank != 1)
        return imp_err(I, "repeats must be a constant 1-D integer tensor");
    if (R->c->shape[0] != X->rank)
        return imp_err(I, "repeats has %lld values for a rank-%d input", (long long)R->c->shape[0], X->rank);
    const int64_t *rep = (const int64_t *)R->c->data;
    sdim d[DPC_MAX_RANK];
    int64_t total = 1;
    for (int i = 0; i < X->rank; i++) {
        if (rep[i] < 0)
            return imp_err(I, "a negative repeat");
        if (rep[i] > 1 && X->d[i].s)
            return imp_err(I, "repeating the batch or a run-time dim is not supported");
        if (rep[i] > 64)
            return imp_err(I, "a repeat of more than 64");
        d[i] = (sdim){X->d[i].v * rep[i], rep[i] ? X->d[i].s : 0};
        total *= rep[i] ? rep[i] : 1;
        if (rep[i] == 0)
            return imp_err(I, "a repeat of 0 (an empty result) is not supported");
    }
    if (total > 256)
        return imp_err(I, "more than 256 copies");
    if (X->c) {
        if (X->csym)
            return imp_err(I, "tiling a shape with run-time dims is not supported");
        int64_t shape[DPC_MAX_RANK], ist[DPC_MAX_RANK], ost[DPC_MAX_RANK];
        for (int i = 0; i < X->rank; i++)
            shape[i] = d[i].v;
        dpc_tensor *t = imp_tensor(I, X->c->dtype, X->rank, shape);
        if (!t)
            return I->e->code;
        int64_t si = 1, so = 1; /* (int would overflow past 2^31 elements) */
        for (int i = X->rank - 1; i >= 0; i--)
            ist[i] = si, ost[i] = so, si *= X->c->shape[i], so *= shape[i];
        int64_t k = dpc_tensor_numel(t);
        for (int64_t o = 0; o < k; o++) {
            int64_t src = 0;
            for (int i = 0; i < X->rank; i++)
                src += ((o / ost[i]) % shape[i]) % X->c->shape[i] * ist[i];
            if (t->dtype == DPC_F32)
                ((float *)t->data)[o] = ((const float *)X->c->data)[src];
            else
                ((int64_t *)t->data)[o] = ((const int64_t *)X->c->data)[src];
        }
        if (imp_check_value(I, out) != DPC_OK)
            return I->e->code;
        V(out)->c = t, V(out)->kind = X->kind;
        imp_const_own(I, out);
        return imp_set_shape(I, out, X->rank, d);
    }
    int u;
    const char *e = imp_ref(I, x, &u);
    for (int i = 0; i < X->rank && e; i++) {
        if (rep[i] == 1)
            continue;
        dpc_buf b;
        dpc_buf_init(&b);
        dpc_buf_puts(&b, "cat([");
        for (int64_t k = 0; k < rep[i]; k++)
            dpc_buf_printf(&b, "%s%s", k ? ", " : "", e);
        dpc_buf_printf(&b, "], %d)", i);
        char *s = dpc_buf_take(&b);
        if (!s)
            return imp_oom(I);
        e = imp_printf(I, "%s", s);
        dpc_free(s);
    }
    if (e && !strcmp(e, V(x)->var ? V(x)->var : ""))
        e = imp_printf(I, "%s %s", e, X->kind == VK_FLOAT ? "+ 0.0" : "+ 0");
    int uses[1] = {u};
    return imp_stmt_value(I, out, NULL, e, X->kind, X->rank, d, uses, 1);
}
