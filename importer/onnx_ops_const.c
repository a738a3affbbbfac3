/* onnx_ops_const.c - the ops that make constants: Constant,
 * ConstantOfShape, Range and Shape (a shape is known at import, run-time
 * dims as symbols). They fold, never write a statement, except a Range of
 * computed bounds; their own file because what they make is what the other
 * ops' shape operands read. */
#include "onnx_ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dpc_status imp_op_constant(imp *I, const Onnx__NodeProto *n) {
    int out = imp_out(I, n, 0);
    if (n->n_attribute != 1)
        return imp_err(I, "a Constant needs exactly one value attribute");
    const Onnx__AttributeProto *a = n->attribute[0];
    dpc_tensor *t;
    if (strcmp(a->name, "value") == 0 && a->t) {
        bool isb;
        char what[64];
        snprintf(what, sizeof what, "%s: Constant", I->path);
        dpc_status s = dpc_onnx_tensor(a->t, I->dir, what, &t, &isb, I->e);
        if (s != DPC_OK)
            return s;
        imp_budget_grant(I, dpc_tensor_numel(t)); /* the model's own tensor: the budget grows with the file */
        dpc_tensor *k = imp_tensor(I, t->dtype, t->rank, t->shape);
        if (!k) {
            dpc_tensor_free(t);
            return I->e->code;
        }
        memcpy(k->data, t->data, t->nbytes);
        dpc_tensor_free(t);
        return imp_set_const(I, out, k, k->dtype == DPC_F32 ? VK_FLOAT : isb ? VK_BOOL : VK_INT, NULL);
    }
    if (strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_floats") == 0) {
        bool one = a->name[11] == 0;
        int64_t k = one ? 1 : (int64_t)a->n_floats;
        imp_budget_grant(I, k);
        if (!(t = imp_tensor(I, DPC_F32, one ? 0 : 1, &k)))
            return I->e->code;
        for (int64_t i = 0; i < k; i++)
            ((float *)t->data)[i] = one ? a->f : a->floats[i];
        return imp_set_const(I, out, t, VK_FLOAT, NULL);
    }
    if (strcmp(a->name, "value_int") == 0 || strcmp(a->name, "value_ints") == 0) {
        bool one = a->name[9] == 0;
        int64_t k = one ? 1 : (int64_t)a->n_ints;
        imp_budget_grant(I, k);
        if (!(t = imp_tensor(I, DPC_I64, one ? 0 : 1, &k)))
            return I->e->code;
        for (int64_t i = 0; i < k; i++)
            ((int64_t *)t->data)[i] = one ? a->i : a->ints[i];
        return imp_set_const(I, out, t, VK_INT, NULL);
    }
    return imp_err(I, "a Constant of attribute %s is not supported", a->name[0] ? "sparse or string" : "?");
}

dpc_status imp_op_shape(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    if (!V(x)->shaped || V(x)->merged >= 0)
        return imp_err(I, "the input's shape is unknown (or merges the batch with another dim)");
    int r = V(x)->rank;
    int start, end;
    int64_t s0 = imp_attr_i(I, n, "start", 0), e0 = imp_attr_i(I, n, "end", r);
    if (s0 < 0)
        s0 += r;
    if (e0 < 0)
        e0 += r;
    start = (int)(s0 < 0 ? 0 : s0 > r ? r : s0), end = (int)(e0 < 0 ? 0 : e0 > r ? r : e0);
    int64_t k = end > start ? end - start : 0;
    dpc_tensor *t = imp_tensor(I, DPC_I64, 1, &k);
    int *sym = dpc_calloc((size_t)(k ? k : 1), sizeof *sym);
    if (!t || !sym) {
        dpc_free(sym);
        return imp_oom(I);
    }
    for (int64_t i = 0; i < k; i++) {
        ((int64_t *)t->data)[i] = V(x)->d[start + i].v;
        sym[i] = V(x)->d[start + i].s;
    }
    return imp_set_const(I, out, t, VK_INT, sym);
}

dpc_status imp_op_constant_of_shape(imp *I, const Onnx__NodeProto *n) {
    int64_t d[DPC_MAX_RANK];
    int r;
    dpc_status s = imp_const_ints(I, imp_in(I, n, 0), d, &r, DPC_MAX_RANK, "the shape");
    if (s != DPC_OK)
        return s;
    const Onnx__AttributeProto *a = imp_attr(n, "value");
    dpc_tensor *val = NULL;
    bool isb = false;
    if (a && a->t && (s = dpc_onnx_tensor(a->t, I->dir, I->path, &val, &isb, I->e)) != DPC_OK)
        return s;
    if (val && dpc_tensor_numel(val) != 1) {
        dpc_tensor_free(val);
        return imp_err(I, "value must hold one element");
    }
    dpc_dtype dt = val ? val->dtype : DPC_F32;
    int64_t numel = 1;
    for (int i = 0; i < r; i++)
        if (d[i] < 0 || !dpc_mul_i64(numel, d[i], &numel) || numel > (1 << 26)) {
            dpc_tensor_free(val);
            return imp_err(I, "a constant of more than 2^26 elements or a negative dim");
        }
    dpc_tensor *t = imp_tensor(I, dt, r, d);
    if (!t) {
        dpc_tensor_free(val);
        return DPC_ENOMEM;
    }
    for (int64_t i = 0; i < numel; i++) {
        if (dt == DPC_F32)
            ((float *)t->data)[i] = val ? ((float *)val->data)[0] : 0.0f;
        else
            ((int64_t *)t->data)[i] = ((int64_t *)val->data)[0];
    }
    dpc_tensor_free(val);
    return imp_set_const(I, imp_out(I, n, 0), t, dt == DPC_F32 ? VK_FLOAT : isb ? VK_BOOL : VK_INT, NULL);
}

/* Range's element count, ceil((limit - start) / delta) clamped at 0,
 * refused past 2^24 or when not computable (checked: C's int64 overflow
 * and double-to-int64 conversions out of range are undefined) */
static dpc_status float_range_count(imp *I, double st, double lim, double dl, int64_t *k) {
    if (!isfinite(st) || !isfinite(lim) || !isfinite(dl) || dl == 0)
        return imp_err(I, "start, limit and delta must be finite and delta not 0");
    double cnt = ceil((lim - st) / dl);
    if (cnt > (1 << 24))
        return imp_err(I, "a range of more than 2^24 elements");
    *k = cnt > 0 ? (int64_t)cnt : 0;
    return DPC_OK;
}

static dpc_status int_range_count(imp *I, int64_t st, int64_t lim, int64_t dl, int64_t *k) {
    int64_t span;
    if (dl == 0)
        return imp_err(I, "delta is 0");
    if (__builtin_sub_overflow(lim, st, &span))
        return imp_err(I, "limit - start (%lld - %lld) overflows int64", (long long)lim, (long long)st);
    *k = 0;
    if (span == 0 || (span > 0) != (dl > 0))
        return DPC_OK;
    uint64_t us = span > 0 ? (uint64_t)span : 0 - (uint64_t)span, ud = dl > 0 ? (uint64_t)dl : 0 - (uint64_t)dl;
    uint64_t cnt = us / ud + (us % ud != 0);
    if (cnt > (1 << 24))
        return imp_err(I, "a range of more than 2^24 elements");
    *k = (int64_t)cnt;
    return DPC_OK;
}

dpc_status imp_op_range(imp *I, const Onnx__NodeProto *n) {
    double st, lim, dl;
    int a = imp_in(I, n, 0), b = imp_in(I, n, 1), c = imp_in(I, n, 2);
    if (a >= 0 && b >= 0 && c >= 0 && imp_const_scalar(V(a), &st) && imp_const_scalar(V(c), &dl) && st == 0 &&
        dl == 1 && is_const(I, b) && V(b)->csym && V(b)->csym[0] && V(b)->c->rank == 0) {
        /* arange(S): a run-time length */
        sdim len = {I64(V(b))[0], V(b)->csym[0]};
        return imp_add_stmt(I, imp_out(I, n, 0), NULL, imp_printf(I, "arange(%s)", imp_dim(I, len)), VK_INT, 1, &len, -1, -1, -1);
    }
    if (a < 0 || b < 0 || c < 0 || !imp_const_scalar(V(a), &st) || !imp_const_scalar(V(b), &lim) ||
        !imp_const_scalar(V(c), &dl))
        return imp_err(I, "start, limit and delta must be constants (or 0, a run-time dim, 1)");
    bool fl = V(a)->kind == VK_FLOAT;
    if (V(b)->kind != V(a)->kind || V(c)->kind != V(a)->kind)
        return imp_err(I, "start, limit and delta of different types");
    int64_t k, i0 = fl ? 0 : I64(V(a))[0], d0 = fl ? 0 : I64(V(c))[0];
    dpc_status s = fl ? float_range_count(I, st, lim, dl, &k) : int_range_count(I, i0, I64(V(b))[0], d0, &k);
    if (s != DPC_OK)
        return s;
    dpc_tensor *t = imp_tensor(I, fl ? DPC_F32 : DPC_I64, 1, &k);
    if (!t)
        return I->e->code;
    for (int64_t i = 0; i < k; i++) {
        if (fl)
            ((float *)t->data)[i] = (float)(st + (double)i * dl);
        else /* between start and limit, so in range; int64 exactly, not through double */
            ((int64_t *)t->data)[i] = i0 + i * d0;
    }
    return imp_set_const(I, imp_out(I, n, 0), t, fl ? VK_FLOAT : VK_INT, NULL);
}
