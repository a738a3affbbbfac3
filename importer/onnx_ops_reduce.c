/* onnx_ops_reduce.c - the Reduce* ops: ReduceSum, ReduceMean, ReduceMax as
 * dpc's sum/mean/amax, and those dpc composes from them (ReduceMin, L1, L2,
 * SumSquare, LogSum, LogSumExp), never over the batch dim. The axes come
 * from the attribute or, from opset 18 (ReduceSum's 13), the input. */
#include "onnx_ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reduction's axes into ax (*na of them; -1 for none given): the
 * attribute `axes`, or from ReduceSum's opset 13 and every other Reduce*'s
 * opset 18 on the constant input 1. */
static dpc_status reduce_axes(imp *I, const Onnx__NodeProto *n, int64_t *ax, int *na) {
    int from = !strcmp(n->op_type, "ReduceSum") ? 13 : 18; /* the opset axes became an input */
    if (I->opset >= from) {
        *na = -1;
        if (imp_attr(n, "axes"))
            return imp_err(I, "axes is an input from opset %d", from);
        int av;
        return imp_opt(I, n, 1, &av) ? imp_const_ints(I, av, ax, na, DPC_MAX_RANK, "axes") : DPC_OK;
    }
    const int64_t *a;
    *na = imp_attr_ints(I, n, "axes", &a);
    if (*na > DPC_MAX_RANK)
        return imp_err(I, "too many axes");
    if (*na > 0)
        memcpy(ax, a, sizeof *ax * (size_t)*na);
    return DPC_OK;
}

/* fn(e) over the dims red marks (dpc's sum/mean/amax, one dim a call),
 * and the result's dims in d[*rank]. */
static const char *reduce_text(imp *I, const char *fn, const char *e, const ival *X, const bool *red, bool keep,
                               sdim *d, int *rank) {
    for (int i = X->rank - 1; i >= 0 && e; i--) /* the last dim first: the lower dims keep their numbers */
        if (red[i])
            e = imp_printf(I, "%s(%s, %d, keepdim=%s)", fn, e, i, keep ? "True" : "False");
    int r = 0;
    for (int i = 0; i < X->rank; i++)
        if (!red[i])
            d[r++] = X->d[i];
        else if (keep)
            d[r++] = (sdim){1, 0};
    *rank = r;
    return e;
}

dpc_status imp_op_reduce(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    int64_t ax[DPC_MAX_RANK];
    int na;
    dpc_status s = reduce_axes(I, n, ax, &na);
    if (s != DPC_OK)
        return s;
    if (na <= 0) {
        if (imp_attr_i(I, n, "noop_with_empty_axes", 0))
            return imp_alias(I, out, x);
        return imp_err(I, "a reduction over every dim (the batch too) is not supported");
    }
    bool keep = imp_attr_i(I, n, "keepdims", 1) != 0, red[DPC_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int a = 0;
        if ((s = imp_axis_norm(I, ax[i], X->rank, &a)) != DPC_OK)
            return s;
        if (a == 0)
            return imp_err(I, "a reduction over the batch dim is not supported");
        red[a] = true;
    }
    if (X->c)
        return imp_err(I, "a reduction of a constant is not supported");
    const char *fn = !strcmp(n->op_type, "ReduceMean") ? "mean" : !strcmp(n->op_type, "ReduceSum") ? "sum" : "amax";
    int u;
    const char *e = imp_ref(I, x, &u);
    sdim d[DPC_MAX_RANK];
    int r = 0;
    e = reduce_text(I, fn, e, X, red, keep, d, &r);
    return imp_add_stmt(I, out, NULL, e, VK_FLOAT, r, d, u, -1, -1);
}

/* ReduceMin, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum,
 * ReduceLogSumExp (axes an attribute to opset 17, an input from 18) */
dpc_status imp_op_reduce_extra(imp *I, const Onnx__NodeProto *n) {
    int x, u, out = imp_out(I, n, 0);
    const char *e = imp_float_in(I, n, &x, &u), *op = n->op_type;
    if (!e)
        return I->e->code;
    ival *X = V(x);
    int64_t a[DPC_MAX_RANK];
    int na;
    dpc_status s = reduce_axes(I, n, a, &na);
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
    const char *ex = reduce_text(I, fn, pre, X, red, keep, d, &r);
    if (ex)
        ex = imp_printf(I, post, ex);
    int uses[1] = {u};
    return imp_stmt_value(I, out, NULL, ex, VK_FLOAT, r, d, uses, 1);
}
