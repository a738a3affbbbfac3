/* onnx_ops_shape.c - the ops that change a tensor's shape, layout or
 * element type, not its values: Unsqueeze, Squeeze, Reshape, Flatten,
 * Transpose (and nn.MultiheadAttention's export, found at its first
 * Transpose: onnx_mha.c), Identity/Dropout, Cast, Expand and Tile. Each
 * folds a constant input and writes a reshape/permute/expand/... of a
 * computed one, the batch dim kept first. */
#include "onnx_ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dpc_status imp_op_unsqueeze(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    int64_t ax[DPC_MAX_RANK];
    int na;
    dpc_status s;
    if (I->opset >= 13) {
        if ((s = imp_const_ints(I, imp_in(I, n, 1), ax, &na, DPC_MAX_RANK, "axes")) != DPC_OK)
            return s;
    } else {
        const int64_t *a;
        na = imp_attr_ints(I, n, "axes", &a);
        if (na < 0 || na > DPC_MAX_RANK)
            return imp_err(I, "axes missing or too many");
        memcpy(ax, a, sizeof *ax * (size_t)na);
    }
    ival *X = V(x);
    int r = X->rank + na;
    if (r > DPC_MAX_RANK)
        return imp_err(I, "result rank over %d", DPC_MAX_RANK);
    bool ins[DPC_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int a = 0;
        if ((s = imp_axis_norm(I, ax[i], r, &a)) != DPC_OK)
            return s;
        if (ins[a])
            return imp_err(I, "an axis given twice");
        ins[a] = true;
    }
    sdim d[DPC_MAX_RANK];
    int64_t shape[DPC_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) {
        d[i] = ins[i] ? (sdim){1, 0} : X->d[j++];
        shape[i] = d[i].v;
    }
    if (X->c) {
        dpc_tensor *t = imp_copy_tensor(I, X->c, r, shape);
        if (!t)
            return DPC_ENOMEM;
        return imp_set_const(I, out, t, X->kind, imp_copy_sym(I, X));
    }
    int u;
    const char *e = imp_ref(I, x, &u);
    for (int i = 0; i < r && e; i++)
        if (ins[i])
            e = imp_printf(I, "unsqueeze(%s, %d)", e, i);
    return imp_add_stmt(I, out, NULL, e, X->kind, r, d, u, -1, -1);
}

dpc_status imp_op_squeeze(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    int64_t ax[DPC_MAX_RANK];
    int na = -1;
    dpc_status s;
    if (I->opset >= 13) {
        int av;
        if (imp_opt(I, n, 1, &av) && (s = imp_const_ints(I, av, ax, &na, DPC_MAX_RANK, "axes")) != DPC_OK)
            return s;
    } else {
        const int64_t *a;
        na = imp_attr_ints(I, n, "axes", &a);
        if (na > DPC_MAX_RANK)
            return imp_err(I, "too many axes");
        if (na > 0)
            memcpy(ax, a, sizeof *ax * (size_t)na);
    }
    bool rm[DPC_MAX_RANK] = {0};
    if (na < 0) {
        for (int i = 1; i < X->rank; i++)
            rm[i] = X->d[i].s == 0 && X->d[i].v == 1;
    } else
        for (int i = 0; i < na; i++) {
            int a = 0;
            if ((s = imp_axis_norm(I, ax[i], X->rank, &a)) != DPC_OK)
                return s;
            if (X->d[a].s || X->d[a].v != 1)
                return imp_err(I, "squeezing dim %d, which is not 1", a);
            rm[a] = true;
        }
    sdim d[DPC_MAX_RANK];
    int64_t shape[DPC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < X->rank; i++)
        if (!rm[i])
            d[r] = X->d[i], shape[r++] = X->d[i].v;
    if (X->c) {
        dpc_tensor *t = imp_copy_tensor(I, X->c, r, shape);
        if (!t)
            return DPC_ENOMEM;
        return imp_set_const(I, out, t, X->kind, imp_copy_sym(I, X));
    }
    if (rm[0] && batched(X))
        return imp_err(I, "squeezing the batch dim is not supported");
    int u;
    const char *e = imp_ref(I, x, &u);
    for (int i = X->rank - 1; i >= 0 && e; i--)
        if (rm[i])
            e = imp_printf(I, "squeeze(%s, %d)", e, i);
    return imp_add_stmt(I, out, NULL, e, X->kind, r, d, u, -1, -1);
}

/* The output dims of Reshape(x, shape): 0 copies (allowzero 0), -1 infers. */
static dpc_status reshape_dims(imp *I, const ival *X, const sdim *want, int r, int allowzero, sdim *d) {
    int neg = -1;
    int64_t known = 1;
    int syms_out[DPC_MAX_RANK * 2], nso = 0;
    for (int i = 0; i < r; i++) {
        sdim w = want[i];
        if (!w.s && w.v == 0 && !allowzero) {
            if (i >= X->rank)
                return imp_err(I, "shape value 0 at dim %d past the input's rank", i);
            w = X->d[i];
        }
        if (!w.s && w.v == -1) {
            if (neg >= 0)
                return imp_err(I, "two -1 in the shape");
            neg = i;
            d[i] = w;
            continue;
        }
        if (!w.s && w.v < 0)
            return imp_err(I, "a negative size in the shape");
        d[i] = w;
        if (__builtin_mul_overflow(known, w.v, &known))
            return imp_err(I, "a shape whose size overflows int64");
        if (w.s)
            syms_out[nso++] = w.s;
    }
    if (neg < 0)
        return DPC_OK;
    int64_t total = 1;
    int syms_in[DPC_MAX_RANK], nsi = 0;
    for (int i = 0; i < X->rank; i++) {
        if (__builtin_mul_overflow(total, X->d[i].v, &total))
            return imp_err(I, "an input whose size overflows int64");
        if (X->d[i].s)
            syms_in[nsi++] = X->d[i].s;
    }
    /* symbols: input's minus output's must leave at most one */
    int left = 0, nleft = 0;
    for (int i = 0; i < nsi; i++) {
        bool found = false;
        for (int j = 0; j < nso; j++)
            if (syms_out[j] == syms_in[i]) {
                syms_out[j] = -1;
                found = true;
                break;
            }
        if (!found)
            left = syms_in[i], nleft++;
    }
    for (int j = 0; j < nso; j++)
        if (syms_out[j] >= 0)
            return imp_err(I, "a reshape whose -1 would divide by a run-time dim");
    if (nleft > 1)
        return imp_err(I, "a reshape that merges two run-time dims is not supported");
    if (known == 0 || total % known)
        return imp_err(I, "a reshape of %lld elements into a shape of %lld times -1", (long long)total, (long long)known);
    d[neg] = (sdim){total / known, left};
    return DPC_OK;
}

static dpc_status emit_reshape(imp *I, int out, int x, const sdim *d, int r) {
    for (int i = 0; i < r; i++)
        if (d[i].s == 1 && (d[i].v != 1 || i != 0))
            return imp_err(I, "a reshape that merges the batch dim with another dim or moves it (to [%s%s]) is not "
                              "supported (nn.MultiheadAttention's export is recognised only batch_first, without masks)", i ? "..., " : "", imp_dim(I, d[i]));
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!e)
        return I->e->code;
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "reshape(%s", e);
    for (int i = 0; i < r; i++)
        dpc_buf_printf(&b, ", %s", imp_dim(I, d[i]));
    dpc_buf_puts(&b, ")");
    char *t = dpc_buf_take(&b);
    const char *ex = t ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    return imp_add_stmt(I, out, NULL, ex, V(x)->kind, r, d, u, -1, -1);
}

static dpc_status const_reshape(imp *I, int out, int x, const sdim *d, int r) {
    int64_t shape[DPC_MAX_RANK];
    for (int i = 0; i < r; i++) {
        if (d[i].s)
            return imp_err(I, "a constant reshaped to a run-time dim");
        shape[i] = d[i].v;
    }
    dpc_tensor *t = imp_copy_tensor(I, V(x)->c, r, shape);
    if (!t || t->nbytes != V(x)->c->nbytes)
        return t ? imp_err(I, "reshape of a constant to a different size") : DPC_ENOMEM;
    return imp_set_const(I, out, t, V(x)->kind, imp_copy_sym(I, V(x)));
}

dpc_status imp_op_reshape(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    sdim want[DPC_MAX_RANK], d[DPC_MAX_RANK];
    int r;
    dpc_status s = imp_const_dims(I, imp_in(I, n, 1), want, &r, DPC_MAX_RANK, "the shape");
    if (s != DPC_OK)
        return s;
    ival *X = V(x);
    if (X->merged >= 0) {
        /* the reshape back of a merged Linear result: y's own shape */
        ival *Y = V(X->merged);
        bool same = r == Y->rank;
        for (int i = 0; same && i < r; i++)
            same = (want[i].v == Y->d[i].v && want[i].s == Y->d[i].s) || (!want[i].s && want[i].v == 0 && i < 2) ||
                   (!want[i].s && want[i].v == -1 && i == 0 && Y->d[0].s == 1);
        if (!same)
            return imp_err(I, "reshaping a merged batch to another shape than it came from is not supported");
        return imp_alias(I, out, X->merged);
    }
    if (r == 2 && batched(X) && X->rank > 2 && !want[0].s && want[0].v == -1 && !want[1].s &&
        want[1].v == X->d[X->rank - 1].v && !X->d[X->rank - 1].s) {
        bool other_sym = false;
        for (int i = 1; i < X->rank - 1; i++)
            other_sym |= X->d[i].s != 0;
        if (other_sym) { /* [N, S, K] -> [-1, K]: kept as a view of x, for a Linear (HF's Conv1D) */
            V(out)->merged = x;
            V(out)->kind = X->kind;
            sdim m[2] = {{1, 0}, X->d[X->rank - 1]};
            return imp_set_shape(I, out, 2, m);
        }
    }
    if ((s = reshape_dims(I, X, want, r, (int)imp_attr_i(I, n, "allowzero", 0), d)) != DPC_OK)
        return s;
    if (is_const(I, x))
        return const_reshape(I, out, x, d, r);
    if (batched(V(x)) && (d[0].s != 1 || d[0].v != 1))
        return imp_err(I, "a reshape that changes the batch dim (dim 0 becomes %s) is not supported", imp_dim(I, d[0]));
    return emit_reshape(I, out, x, d, r);
}

dpc_status imp_op_flatten(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    int axis = 0;
    int64_t ax = imp_attr_i(I, n, "axis", 1); /* in [-r, r]; -k is r - k */
    if (ax < -X->rank || ax > X->rank)
        return imp_err(I, "axis %lld out of range for rank %d", (long long)ax, X->rank);
    axis = (int)(ax < 0 ? ax + X->rank : ax);
    sdim d[2] = {{1, 0}, {1, 0}};
    for (int i = 0; i < X->rank; i++) {
        sdim *t = &d[i < axis ? 0 : 1];
        if (X->d[i].s && t->s)
            return imp_err(I, "flattening two run-time dims together is not supported");
        if (__builtin_mul_overflow(t->v, X->d[i].v, &t->v))
            return imp_err(I, "an input whose size overflows int64");
        if (X->d[i].s)
            t->s = X->d[i].s;
    }
    if (X->c)
        return const_reshape(I, out, x, d, 2);
    if (axis != 1)
        return imp_err(I, "Flatten with axis %d (only 1 keeps the batch dim)", axis);
    int u;
    const char *e = imp_ref(I, x, &u);
    /* a rank-1 input: [N] -> [N, 1] (flatten's start dim 1 would be out of range) */
    return imp_add_stmt(I, out, NULL, e ? imp_printf(I, X->rank == 1 ? "unsqueeze(%s, 1)" : "flatten(%s, 1)", e) : NULL,
                    X->kind, 2, d, u, -1, -1);
}

dpc_status imp_op_transpose(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    int r = X->rank;
    int64_t perm[DPC_MAX_RANK];
    const int64_t *p;
    int np = imp_attr_ints(I, n, "perm", &p);
    if (np < 0)
        for (int i = 0; i < r; i++)
            perm[i] = r - 1 - i;
    else {
        if (np != r)
            return imp_err(I, "perm has %d entries for rank %d", np, r);
        bool seen[DPC_MAX_RANK] = {0};
        for (int i = 0; i < r; i++) {
            if (p[i] < 0 || p[i] >= r || seen[p[i]])
                return imp_err(I, "perm is not a permutation");
            seen[p[i]] = true;
            perm[i] = p[i];
        }
    }
    /* the batch moved to dim 1: nn.MultiheadAttention's export (onnx_mha.c) when the nodes after fit */
    if (!X->c && imp_mha_match(I, I->cur))
        return imp_mha_node(I, n);
    sdim d[DPC_MAX_RANK];
    int64_t shape[DPC_MAX_RANK], ist[DPC_MAX_RANK];
    for (int i = 0; i < r; i++)
        d[i] = X->d[perm[i]], shape[i] = d[i].v;
    if (X->c) {
        dpc_tensor *t = imp_tensor(I, X->c->dtype, r, shape);
        if (!t)
            return DPC_ENOMEM;
        imp_strides(X->c->shape, r, ist);
        int64_t total = dpc_tensor_numel(t);
        size_t es = dpc_dtype_size(t->dtype);
        for (int64_t o = 0; o < total; o++) {
            int64_t rem = o, src = 0;
            for (int i = r - 1; i >= 0; i--) {
                int64_t c = rem % shape[i];
                rem /= shape[i];
                src += c * ist[perm[i]];
            }
            memcpy((char *)t->data + (size_t)o * es, (char *)X->c->data + (size_t)src * es, es);
        }
        for (int64_t i = 0; X->csym && i < total; i++)
            if (X->csym[i])
                return imp_err(I, "a transpose of a shape holding a run-time dim");
        return imp_set_const(I, out, t, X->kind, NULL);
    }
    int u;
    const char *e = imp_ref(I, x, &u);
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "permute(%s", e ? e : "");
    for (int i = 0; i < r; i++)
        dpc_buf_printf(&b, ", %lld", (long long)perm[i]);
    dpc_buf_puts(&b, ")");
    char *t = dpc_buf_take(&b);
    const char *ex = t && e ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    return imp_add_stmt(I, out, NULL, ex, X->kind, r, d, u, -1, -1);
}

/* Identity, Dropout: Dropout's mask output (optional) is never computed, so
 * a node reading it is refused where it reads it. */
dpc_status imp_op_identity(imp *I, const Onnx__NodeProto *n) {
    int tm;
    if (strcmp(n->op_type, "Dropout") == 0 && imp_opt(I, n, 2, &tm)) {
        double t;
        if (!imp_const_scalar(V(tm), &t) || t != 0)
            return imp_err(I, "training_mode must be a constant false");
    }
    return imp_alias(I, imp_out(I, n, 0), imp_in(I, n, 0));
}

dpc_status imp_op_cast(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    int64_t to = imp_attr_i(I, n, "to", 0);
    int kind;
    switch (to) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: kind = VK_FLOAT; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: kind = VK_INT; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: kind = VK_BOOL; break;
    default: return imp_err(I, "a cast to data type %lld is not supported", (long long)to);
    }
    ival *X = V(x);
    if (to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || to == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
        return imp_err(I, "a cast to float16/double is not supported (dpc computes in float32)");
    /* to a narrower integer type: ONNX wraps integers that do not fit (two's
     * complement), and leaves floats out of range undefined */
    int nbits = to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 ? 32 : to == ONNX__TENSOR_PROTO__DATA_TYPE__INT16 ? 16
              : to == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 || to == ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 ? 8 : 64;
    bool usgn = to == ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    if (nbits < 64 && X->kind == VK_INT && !X->c)
        return imp_err(I, "a cast of computed integers to a %d-bit type is not supported (ONNX wraps values that do "
                          "not fit; dpc computes in int64)", nbits);
    if (X->kind == kind && !(nbits < 64 && X->c))
        return imp_alias(I, out, x);
    if (X->c) {
        for (int64_t i = 0; X->csym && i < dpc_tensor_numel(X->c); i++)
            if (X->csym[i])
                return imp_err(I, "a cast of a run-time dim to a tensor is not supported (give it with --dim NAME=SIZE)");
        dpc_tensor *t = imp_tensor(I, kind == VK_FLOAT ? DPC_F32 : DPC_I64, X->c->rank, X->c->shape);
        if (!t)
            return DPC_ENOMEM;
        int64_t k = dpc_tensor_numel(t);
        for (int64_t i = 0; i < k; i++) {
            double v = X->c->dtype == DPC_F32 ? F32(X)[i] : (double)I64(X)[i];
            if (kind == VK_FLOAT)
                ((float *)t->data)[i] = (float)v;
            else if (kind == VK_BOOL)
                ((int64_t *)t->data)[i] = v != 0;
            else {
                if (!(fabs(v) < 9.2e18))
                    return imp_err(I, "a cast of %g to an integer", v);
                int64_t iv = X->c->dtype == DPC_F32 ? (int64_t)v : I64(X)[i];
                if (nbits < 64) {
                    uint64_t m = ((uint64_t)1 << nbits) - 1, w = (uint64_t)iv & m;
                    int64_t lo = usgn ? 0 : -((int64_t)1 << (nbits - 1)), hi = usgn ? (int64_t)m : ((int64_t)1 << (nbits - 1)) - 1;
                    if (X->c->dtype == DPC_F32 && (iv < lo || iv > hi))
                        return imp_err(I, "a cast of %g to a %d-bit integer (out of range)", v, nbits);
                    iv = usgn || w <= (uint64_t)hi ? (int64_t)w : (int64_t)(w - m - 1);
                }
                ((int64_t *)t->data)[i] = iv;
            }
        }
        return imp_set_const(I, out, t, kind, NULL);
    }
    int u;
    const char *e = imp_ref(I, x, &u);
    const char *m = kind == VK_FLOAT ? "float" : kind == VK_BOOL ? "bool" : "long";
    return imp_add_stmt(I, out, NULL, e ? imp_printf(I, "%s.%s()", e, m) : NULL, kind, X->rank, X->d, u, -1, -1);
}

dpc_status imp_op_expand(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    sdim want[DPC_MAX_RANK], d[DPC_MAX_RANK];
    int r;
    dpc_status s = imp_const_dims(I, imp_in(I, n, 1), want, &r, DPC_MAX_RANK, "the shape");
    if (s != DPC_OK)
        return s;
    ival T = {.shaped = true, .rank = r};
    memcpy(T.d, want, sizeof want);
    int rr;
    if ((s = imp_broadcast(I, V(x), &T, &rr, d)) != DPC_OK)
        return s;
    bool symd = false;
    for (int i = 0; i < rr; i++)
        symd |= d[i].s != 0;
    if (is_const(I, x) && !symd) { /* else: the constant becomes a Parameter, expanded in forward */
        int64_t shape[DPC_MAX_RANK];
        for (int i = 0; i < rr; i++)
            shape[i] = d[i].v;
        ival *X = V(x);
        dpc_tensor *t = imp_tensor(I, X->c->dtype, rr, shape); /* within the budget, checked before it allocates */
        if (!t)
            return I->e->code;
        int64_t total = dpc_tensor_numel(t);
        size_t es = dpc_dtype_size(t->dtype);
        int *cs = X->csym ? dpc_calloc((size_t)(total ? total : 1), sizeof *cs) : NULL;
        if (X->csym && !cs)
            return imp_oom(I);
        for (int64_t o = 0; o < total; o++) {
            int64_t is = imp_bsrc(o, shape, rr, X->c->shape, X->c->rank);
            memcpy((char *)t->data + (size_t)o * es, (char *)X->c->data + (size_t)is * es, es);
            if (cs)
                cs[o] = X->csym[is];
        }
        return imp_set_const(I, out, t, X->kind, cs);
    }
    int u;
    const char *e = imp_ref(I, x, &u);
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "expand(%s", e ? e : "");
    for (int i = 0; i < rr; i++)
        dpc_buf_printf(&b, ", %s", imp_dim(I, d[i]));
    dpc_buf_puts(&b, ")");
    char *t = dpc_buf_take(&b);
    const char *ex = t && e ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    return imp_add_stmt(I, out, NULL, ex, V(x)->kind, rr, d, u, -1, -1);
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
