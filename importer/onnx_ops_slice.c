/* onnx_ops_slice.c - the ops that cut a tensor into pieces or join them:
 * Gather (folded, an Embedding, or an index), Slice (constant bounds,
 * symbolic ones over run-time dims), Split and Concat. Their own file
 * because they share the index arithmetic of constant and symbolic
 * bounds, not the elementwise or shape ops'. */
#include "onnx_ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A Gather of constants, folded (symbols carried). */
static dpc_status gather_fold(imp *I, int x, int ix, int out, int axis) {
    ival *X = V(x);
    ival *K = V(ix);
    int64_t kn = dpc_tensor_numel(K->c);
    int orank = X->rank - 1 + K->c->rank;
    if (orank > DPC_MAX_RANK)
        return imp_err(I, "result rank over %d", DPC_MAX_RANK);
    int64_t oshape[DPC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < axis; i++)
        oshape[r++] = X->c->shape[i];
    for (int i = 0; i < K->c->rank; i++)
        oshape[r++] = K->c->shape[i];
    for (int i = axis + 1; i < X->rank; i++)
        oshape[r++] = X->c->shape[i];
    int64_t outer = 1, inner = 1, ax = X->c->shape[axis];
    for (int i = 0; i < axis; i++)
        outer = imp_sat_mul(outer, X->c->shape[i]);
    for (int i = axis + 1; i < X->rank; i++)
        inner = imp_sat_mul(inner, X->c->shape[i]);
    dpc_tensor *t = imp_tensor(I, X->c->dtype, orank, oshape);
    if (!t)
        return DPC_ENOMEM;
    int64_t total = dpc_tensor_numel(t); /* (outer * kn * inner may overflow when one is 0) */
    for (int64_t j = 0; j < kn; j++)
        if (I64(K)[j] < -ax || I64(K)[j] >= ax)
            return imp_err(I, "index %lld out of range for a dim of %lld", (long long)I64(K)[j], (long long)ax);
    int *sym = X->csym ? dpc_calloc((size_t)(total ? total : 1), sizeof *sym) : NULL;
    if (X->csym && !sym)
        return imp_oom(I);
    size_t es = dpc_dtype_size(X->c->dtype);
    for (int64_t o = 0; total && o < outer; o++) /* an empty result: no loop over a huge outer */
        for (int64_t j = 0; j < kn; j++) {
            int64_t id = I64(K)[j] < 0 ? I64(K)[j] + ax : I64(K)[j];
            int64_t dst = (o * kn + j) * inner, src = (o * ax + id) * inner;
            memcpy((char *)t->data + (size_t)dst * es, (char *)X->c->data + (size_t)src * es, (size_t)inner * es);
            if (sym)
                memcpy(sym + dst, X->csym + src, (size_t)inner * sizeof *sym);
        }
    return imp_set_const(I, out, t, X->kind, sym);
}

/* Gather(weight, ids) of a constant 2-D float table: an Embedding member. */
static dpc_status gather_embedding(imp *I, const Onnx__NodeProto *n, int x, int ix, int out) {
    ival *X = V(x);
    dpc_status s;
    const char *mem = imp_member_name(I, n, x, "embedding");
    if (!mem)
        return DPC_ENOMEM;
    char *decl = imp_member_line(I, imp_printf(I, "%s = Embedding(%lld, %lld)", mem, (long long)X->c->shape[0],
                                           (long long)X->c->shape[1]), x);
    int u;
    const char *e = imp_ref(I, ix, &u);
    if (!decl || !e)
        return DPC_ENOMEM;
    sdim d[DPC_MAX_RANK];
    int r = V(ix)->rank;
    if (r + 1 > DPC_MAX_RANK)
        return imp_err(I, "rank over %d", DPC_MAX_RANK);
    memcpy(d, V(ix)->d, sizeof(sdim) * (size_t)r);
    d[r] = (sdim){X->c->shape[1], 0};
    if ((s = imp_add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, r + 1, d, u, -1, -1)) != DPC_OK)
        return s;
    return imp_weight(I, mem, "weight", X->c);
}

/* A constant scalar index into a computed tensor: x[:, i]. */
static dpc_status gather_index(imp *I, int x, int ix, int out, int axis) {
    ival *X = V(x);
    if (axis == 0 && batched(X))
        return imp_err(I, "indexing the batch dim is not supported");
    int64_t id = I64(V(ix))[0];
    if (X->d[axis].s && id != 0)
        return imp_err(I, "indexing a run-time dim other than at 0 is not supported");
    if (!X->d[axis].s && (id < -X->d[axis].v || id >= X->d[axis].v))
        return imp_err(I, "index %lld out of range", (long long)id);
    dpc_buf b;
    dpc_buf_init(&b);
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!e)
        return DPC_ENOMEM;
    dpc_buf_printf(&b, "%s[", e);
    for (int i = 0; i < axis; i++)
        dpc_buf_puts(&b, ":, ");
    dpc_buf_printf(&b, "%lld]", (long long)id);
    char *t = dpc_buf_take(&b);
    const char *ex = t ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    sdim d[DPC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < X->rank; i++)
        if (i != axis)
            d[r++] = X->d[i];
    return imp_add_stmt(I, out, NULL, ex, X->kind, r, d, u, -1, -1);
}

dpc_status imp_op_gather(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), ix = imp_in(I, n, 1), out = imp_out(I, n, 0);
    ival *X = V(x);
    if (!X->shaped)
        return imp_err(I, "the input's shape is unknown");
    int axis = 0;
    dpc_status s = imp_axis_norm(I, imp_attr_i(I, n, "axis", 0), X->rank, &axis);
    if (s != DPC_OK)
        return s;
    if (V(ix)->kind == VK_FLOAT)
        return imp_err(I, "float indices");
    if (is_const(I, x) && is_const(I, ix))
        return gather_fold(I, x, ix, out, axis);
    /* an embedding table: Gather(weight, ids) */
    if (is_const(I, x) && !is_const(I, ix) && axis == 0 && X->rank == 2 && X->kind == VK_FLOAT)
        return gather_embedding(I, n, x, ix, out);
    /* a constant index into a computed tensor: x[:, i] */
    if (is_const(I, ix) && V(ix)->c->rank == 0 && !is_const(I, x))
        return gather_index(I, x, ix, out, axis);
    return imp_err(I, "a Gather of this form (computed indices into a computed tensor) is not supported");
}

dpc_status imp_op_concat(imp *I, const Onnx__NodeProto *n) {
    int out = imp_out(I, n, 0);
    int x0 = imp_in(I, n, 0); /* 1 or more inputs (the row's "1+"), each given */
    int axis = 0;
    dpc_status s = imp_axis_norm(I, imp_attr_i(I, n, "axis", 0), V(x0)->rank, &axis);
    if (s != DPC_OK)
        return s;
    bool all = true;
    sdim d[DPC_MAX_RANK];
    memcpy(d, V(x0)->d, sizeof d);
    d[axis] = (sdim){0, 0};
    for (size_t i = 0; i < n->n_input; i++) {
        int v = imp_in(I, n, i);
        if (V(v)->rank != V(x0)->rank)
            return imp_err(I, "inputs of different ranks");
        all &= is_const(I, v);
        for (int k = 0; k < V(v)->rank; k++)
            if (k != axis && (V(v)->d[k].v != V(x0)->d[k].v || V(v)->d[k].s != V(x0)->d[k].s))
                return imp_err(I, "inputs of different shapes");
        if (V(v)->d[axis].s || (d[axis].s && V(v)->d[axis].v))
            return imp_err(I, "concatenation along a run-time dim is not supported");
        d[axis].v += V(v)->d[axis].v;
    }
    if (all) {
        int64_t shape[DPC_MAX_RANK];
        for (int k = 0; k < V(x0)->rank; k++)
            shape[k] = d[k].v;
        dpc_tensor *t = imp_tensor(I, V(x0)->c->dtype, V(x0)->rank, shape);
        if (!t)
            return DPC_ENOMEM;
        int64_t total = dpc_tensor_numel(t);
        bool anysym = false;
        for (size_t i = 0; i < n->n_input; i++)
            anysym |= V(imp_in(I, n, i))->csym != NULL;
        int *sym = anysym ? dpc_calloc((size_t)(total ? total : 1), sizeof *sym) : NULL;
        if (anysym && !sym)
            return imp_oom(I);
        int64_t outer = 1;
        for (int k = 0; k < axis; k++)
            outer = imp_sat_mul(outer, shape[k]);
        size_t es = dpc_dtype_size(t->dtype);
        int64_t pos = 0;
        for (size_t i = 0; i < n->n_input; i++)
            if (V(imp_in(I, n, i))->c->dtype != t->dtype) {
                dpc_free(sym);
                return imp_err(I, "inputs of different types");
            }
        for (int64_t o = 0; total && o < outer; o++) /* an empty result: no loop over a huge outer */
            for (size_t i = 0; i < n->n_input; i++) {
                ival *X = V(imp_in(I, n, i));
                int64_t chunk = dpc_tensor_numel(X->c) / (outer ? outer : 1);
                memcpy((char *)t->data + (size_t)pos * es, (char *)X->c->data + (size_t)(o * chunk) * es,
                       (size_t)chunk * es);
                if (sym && X->csym)
                    memcpy(sym + pos, X->csym + o * chunk, (size_t)chunk * sizeof *sym);
                pos += chunk;
            }
        return imp_set_const(I, out, t, V(x0)->kind, sym);
    }
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_puts(&b, "cat([");
    int *uses = imp_alloc(I, n->n_input * sizeof *uses), nu = 0; /* every reader recorded: the liveness pass */
    for (size_t i = 0; i < n->n_input && uses; i++) {
        int u;
        const char *e = imp_ref(I, imp_in(I, n, i), &u);
        if (!e) {
            dpc_buf_free(&b);
            return I->e->code;
        }
        dpc_buf_printf(&b, "%s%s", i ? ", " : "", e);
        uses[nu++] = u;
    }
    dpc_buf_printf(&b, "], %d)", axis);
    char *t = dpc_buf_take(&b);
    const char *ex = t ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    if (!ex || !uses)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    if (imp_stmt(I, out, NULL, ex, uses, nu) < 0)
        return I->e->code;
    V(out)->kind = V(x0)->kind;
    return imp_set_shape(I, out, V(x0)->rank, d);
}

/* slice_symbolic of a constant x: what forward can make of it at the
 * run-time size, an iota (arange) or a lower-triangular mask (tril). */
static dpc_status slice_sym_const(imp *I, int x, int out, const int *sl, int sym, int nsl, int first, const sdim *d) {
    ival *X = V(x);
    const char *sn = I->syms[sym];
    bool mask2 = X->rank >= 2;
    for (int a = 0; a < X->rank; a++)
        if (a < X->rank - 2 && X->d[a].v != 1)
            mask2 = false;
    for (int a = 0; a < X->rank - 2; a++)
        if (sl[a])
            mask2 = false;
    if (!mask2 || nsl != 1 || X->kind != VK_INT)
        for (int a = 0; a < X->rank && !mask2; a++)
            if (!sl[a] && X->d[a].v != 1)
                return imp_err(I, "slicing a constant to a run-time length is supported for iotas and masks only");
    const char *ex = NULL;
    int64_t k = dpc_tensor_numel(X->c);
    bool xs = false;
    for (int64_t i = 0; X->csym && i < k; i++)
        xs |= X->csym[i] != 0;
    if (nsl == 1 && X->kind == VK_INT && !xs) {
        int64_t v0 = k ? I64(X)[0] : 0;
        for (int64_t i = 0; i < k; i++)
            if (I64(X)[i] != v0 + i)
                return imp_err(I, "slicing an integer constant that is not an iota to a run-time length");
        ex = v0 ? imp_printf(I, "arange(%lld, %lld + %s)", (long long)v0, (long long)v0, sn) : imp_printf(I, "arange(%s)", sn);
        for (int a = 0; a < X->rank && ex; a++)
            if (a != first)
                ex = imp_printf(I, "unsqueeze(%s, %d)", ex, a);
    } else if (mask2 && X->kind != VK_INT) {
        int64_t R = X->c->shape[X->rank - 2], C = X->c->shape[X->rank - 1];
        for (int64_t i = 0; C && i < R; i++) /* (C == 0: an empty constant, no rows to look at) */
            for (int64_t j = 0; j < C; j++) {
                double v = X->c->dtype == DPC_F32 ? F32(X)[i * C + j] : (double)I64(X)[i * C + j];
                if (v != (j <= i ? 1.0 : 0.0))
                    return imp_err(I, "slicing a constant that is not a lower-triangular mask to a run-time size");
            }
        ex = imp_printf(I, "tril(ones(%s, %s, dtype=%s))", sl[X->rank - 2] ? sn : imp_dim(I, X->d[X->rank - 2]),
                        sl[X->rank - 1] ? sn : imp_dim(I, X->d[X->rank - 1]), X->kind == VK_BOOL ? "bool" : "float32");
        for (int a = 0; a < X->rank - 2 && ex; a++)
            ex = imp_printf(I, "unsqueeze(%s, 0)", ex);
    } else
        return imp_err(I, "slicing this constant to a run-time length is not supported");
    return imp_add_stmt(I, out, NULL, ex, X->kind, X->rank, d, -1, -1, -1);
}

/* slice_symbolic of a computed x: x[:, :S] (sl marks the sliced axes, sym
 * their run-time dim, d the result's dims). */
static dpc_status slice_sym_computed(imp *I, int x, int out, const int *sl, int sym, const sdim *d) {
    ival *X = V(x);
    const char *sn = I->syms[sym];
    bool noop = true;
    for (int a = 0; a < X->rank; a++)
        if (sl[a] && (X->d[a].s != sym || X->d[a].v != 1)) {
            noop = false;
            if (a == 0 && batched(X))
                return imp_err(I, "slicing the batch dim is not supported");
            if (X->d[a].s)
                return imp_err(I, "slicing a run-time dim to another is not supported");
        }
    if (noop)
        return imp_alias(I, out, x);
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!e)
        return I->e->code;
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "%s[", e);
    for (int a = 0; a < X->rank; a++)
        dpc_buf_printf(&b, "%s%s%s", a ? ", " : "", sl[a] ? ":" : ":", sl[a] ? sn : "");
    dpc_buf_puts(&b, "]");
    char *t = dpc_buf_take(&b);
    const char *ex = t ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    return imp_add_stmt(I, out, NULL, ex, X->kind, X->rank, d, u, -1, -1);
}

/* A slice whose bounds hold a run-time dim S. Two constants an exporter
 * slices so are rebuilt in forward: an iota (position ids [1, 512] sliced
 * [:, 0:S] -> arange(S)) and a lower-triangular mask (GPT-2's causal bias
 * [1, 1, 1024, 1024] sliced [:, :, 0:S, 0:S] -> tril(ones(S, S))). A
 * computed tensor sliced over all of a run-time dim is unchanged. */
static dpc_status slice_symbolic(imp *I, const Onnx__NodeProto *n, int x, const sdim *st, const sdim *en, int ns,
                                 int ne) {
    ival *X = V(x);
    int out = imp_out(I, n, 0);
    if (ns != ne || X->rank < 1)
        return imp_err(I, "starts and ends differ in length");
    int sv, av;
    if (imp_opt(I, n, 4, &sv)) {
        int64_t sp[DPC_MAX_RANK];
        int nsp;
        dpc_status s2 = imp_const_ints(I, sv, sp, &nsp, DPC_MAX_RANK, "steps");
        if (s2 != DPC_OK)
            return s2;
        for (int i = 0; i < nsp; i++)
            if (sp[i] != 1)
                return imp_err(I, "a slice with run-time bounds and steps other than 1 is not supported");
    }
    int64_t ax[DPC_MAX_RANK];
    int na = ns;
    dpc_status s;
    if (imp_opt(I, n, 3, &av)) {
        if ((s = imp_const_ints(I, av, ax, &na, DPC_MAX_RANK, "axes")) != DPC_OK)
            return s;
        if (na != ns)
            return imp_err(I, "axes and starts differ in length");
    } else
        for (int i = 0; i < ns; i++)
            ax[i] = i;
    /* every sliced axis: [0, S) or [0, big) */
    int sym = 0, sl[DPC_MAX_RANK] = {0};
    for (int i = 0; i < ns; i++) {
        int a = 0;
        if ((s = imp_axis_norm(I, ax[i], X->rank, &a)) != DPC_OK)
            return s;
        if (st[i].s || st[i].v != 0 || !en[i].s || en[i].v != 1 || (sym && sym != en[i].s)) {
            if (!st[i].s && st[i].v == 0 && !en[i].s && en[i].v >= INT64_MAX / 2)
                continue;
            return imp_err(I, "a slice with run-time bounds other than [0:S] is not supported");
        }
        sym = en[i].s;
        sl[a] = 1;
    }
    sdim d[DPC_MAX_RANK];
    memcpy(d, X->d, sizeof d);
    int nsl = 0, first = -1;
    for (int a = 0; a < X->rank; a++)
        if (sl[a]) {
            d[a] = (sdim){1, sym};
            nsl++;
            if (first < 0)
                first = a;
        }
    if (!X->c)
        return slice_sym_computed(I, x, out, sl, sym, d);
    return slice_sym_const(I, x, out, sl, sym, nsl, first, d);
}

/* A Slice of a computed x: x[lo:hi:step, ...] along the touched axes. */
static dpc_status slice_computed(imp *I, int x, int out, const sdim *d, const int64_t *lo, const int64_t *hi,
                                 const int64_t *step, const bool *touched) {
    ival *X = V(x);
    if (touched[0] && batched(X))
        return imp_err(I, "slicing the batch dim is not supported");
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!e)
        return I->e->code;
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "%s[", e);
    for (int i = 0; i < X->rank; i++) {
        if (!touched[i])
            dpc_buf_printf(&b, "%s:", i ? ", " : "");
        else
            dpc_buf_printf(&b, "%s%lld:%lld:%lld", i ? ", " : "", (long long)lo[i], (long long)hi[i],
                           (long long)step[i]);
    }
    dpc_buf_puts(&b, "]");
    char *t = dpc_buf_take(&b);
    const char *ex = t ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    return imp_add_stmt(I, out, NULL, ex, X->kind, X->rank, d, u, -1, -1);
}

/* A Slice of a constant, folded: from lo by step along each touched axis
 * (the others whole), d the result's dims. */
static dpc_status slice_fold(imp *I, int x, int out, const sdim *d, int64_t *lo, int64_t *step, const bool *touched) {
    ival *X = V(x);
    int64_t shape[DPC_MAX_RANK], ist[DPC_MAX_RANK];
    for (int i = 0; i < X->rank; i++) {
        shape[i] = d[i].v;
        if (!touched[i])
            lo[i] = 0, step[i] = 1;
    }
    dpc_tensor *t = imp_tensor(I, X->c->dtype, X->rank, shape);
    if (!t)
        return DPC_ENOMEM;
    imp_strides(X->c->shape, X->rank, ist);
    int64_t total = dpc_tensor_numel(t);
    size_t es = dpc_dtype_size(t->dtype);
    int *cs = X->csym ? dpc_calloc((size_t)(total ? total : 1), sizeof *cs) : NULL;
    if (X->csym && !cs)
        return imp_oom(I);
    for (int64_t o = 0; o < total; o++) {
        int64_t rem = o, src = 0;
        for (int i = X->rank - 1; i >= 0; i--) {
            int64_t c = rem % shape[i];
            rem /= shape[i];
            src += (lo[i] + c * step[i]) * ist[i];
        }
        memcpy((char *)t->data + (size_t)o * es, (char *)X->c->data + (size_t)src * es, es);
        if (cs)
            cs[o] = X->csym[src];
    }
    return imp_set_const(I, out, t, X->kind, cs);
}

dpc_status imp_op_slice(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    int64_t st[DPC_MAX_RANK], en[DPC_MAX_RANK], ax[DPC_MAX_RANK], sp[DPC_MAX_RANK];
    int ns, ne, na, nsp;
    dpc_status s;
    if (I->opset < 10)
        return imp_err(I, "Slice before opset 10 is not supported");
    sdim sst[DPC_MAX_RANK], sen[DPC_MAX_RANK];
    if ((s = imp_const_dims(I, imp_in(I, n, 1), sst, &ns, DPC_MAX_RANK, "starts")) ||
        (s = imp_const_dims(I, imp_in(I, n, 2), sen, &ne, DPC_MAX_RANK, "ends")))
        return s;
    bool symb = false;
    for (int i = 0; i < ns && i < ne; i++) {
        symb |= sst[i].s || sen[i].s;
        st[i] = sst[i].v, en[i] = sen[i].v;
    }
    if (symb)
        return slice_symbolic(I, n, x, sst, sen, ns, ne);
    if (ns != ne)
        return imp_err(I, "starts and ends differ in length");
    int av, sv;
    if (imp_opt(I, n, 3, &av)) {
        if ((s = imp_const_ints(I, av, ax, &na, DPC_MAX_RANK, "axes")))
            return s;
    } else
        for (na = 0; na < ns; na++)
            ax[na] = na;
    if (imp_opt(I, n, 4, &sv)) {
        if ((s = imp_const_ints(I, sv, sp, &nsp, DPC_MAX_RANK, "steps")))
            return s;
    } else
        for (nsp = 0; nsp < ns; nsp++)
            sp[nsp] = 1;
    if (na != ns || nsp != ns)
        return imp_err(I, "axes or steps differ in length");
    int64_t lo[DPC_MAX_RANK], hi[DPC_MAX_RANK], step[DPC_MAX_RANK];
    bool touched[DPC_MAX_RANK] = {0};
    sdim d[DPC_MAX_RANK];
    memcpy(d, X->d, sizeof d);
    for (int i = 0; i < ns; i++) {
        int a = 0;
        if ((s = imp_axis_norm(I, ax[i], X->rank, &a)) != DPC_OK)
            return s;
        if (touched[a])
            return imp_err(I, "an axis given twice");
        if (sp[i] < 1 && (sp[i] == 0 || !X->c || X->d[a].s))
            return imp_err(I, "a step below 1 is not supported");
        int64_t dim = X->d[a].v;
        if (sp[i] < 0) {
            /* a constant read backwards (F.pad's export reverses its pads):
             * starts clamp to [0, dim-1], ends to [-1, dim-1] */
            int64_t b0 = st[i] < 0 ? st[i] + dim : st[i], e0 = en[i] < 0 ? en[i] + dim : en[i];
            b0 = b0 < 0 ? 0 : b0 > dim - 1 ? dim - 1 : b0;
            e0 = e0 < -1 ? -1 : e0 > dim - 1 ? dim - 1 : e0;
            touched[a] = true;
            lo[a] = b0, hi[a] = e0, step[a] = sp[i];
            /* ceil((b0 - e0) / -step) without forming -step or b0 - e0 - step (overflow at huge steps) */
            d[a] = (sdim){b0 > e0 ? (int64_t)((uint64_t)(b0 - e0 - 1) / (0 - (uint64_t)sp[i])) + 1 : 0, 0};
            continue;
        }
        if (X->d[a].s) {
            /* slicing all of a run-time dim is a no-op */
            if (st[i] == 0 && en[i] >= INT64_MAX / 2 && sp[i] == 1)
                continue;
            return imp_err(I, "slicing a run-time dim is not supported (give it with --dim NAME=SIZE)");
        }
        int64_t b0 = st[i] < 0 ? st[i] + dim : st[i], e0 = en[i] < 0 ? en[i] + dim : en[i];
        b0 = b0 < 0 ? 0 : b0 > dim ? dim : b0;
        e0 = e0 < 0 ? 0 : e0 > dim ? dim : e0;
        touched[a] = true;
        lo[a] = b0, hi[a] = e0, step[a] = sp[i];
        d[a] = (sdim){e0 > b0 ? (e0 - b0 - 1) / sp[i] + 1 : 0, 0}; /* ceil, without e0 - b0 + step overflowing */
    }
    if (X->c)
        return slice_fold(I, x, out, d, lo, step, touched);
    return slice_computed(I, x, out, d, lo, hi, step, touched);
}

dpc_status imp_op_split(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0);
    ival *X = V(x);
    int axis = 0;
    dpc_status s = imp_axis_norm(I, imp_attr_i(I, n, "axis", 0), X->rank, &axis);
    if (s != DPC_OK)
        return s;
    if (axis == 0 || X->d[axis].s)
        return imp_err(I, "splitting the batch or a run-time dim is not supported");
    int k = (int)n->n_output;
    if (k < 1 || k > 64)
        return imp_err(I, "1 to 64 outputs expected");
    int64_t sz[64];
    int ns = -1;
    if (I->opset >= 13) {
        int sp;
        if (imp_opt(I, n, 1, &sp) && (s = imp_const_ints(I, sp, sz, &ns, 64, "split")) != DPC_OK)
            return s;
    } else {
        const int64_t *p;
        ns = imp_attr_ints(I, n, "split", &p);
        if (ns > 0)
            memcpy(sz, p, sizeof *sz * (size_t)ns);
    }
    int64_t dim = X->d[axis].v, parts = imp_attr_i(I, n, "num_outputs", 0);
    if (parts && (I->opset < 18 || ns >= 0 || parts != k))
        return imp_err(I, "num_outputs (from opset 18) must equal the outputs, without the split input");
    if (parts) { /* opset 18: parts of ceil(dim / k), the last one smaller */
        int64_t each = (dim + k - 1) / k, last = dim - each * (k - 1);
        if (last <= 0)
            return imp_err(I, "%lld does not split into %d parts of %lld and a smaller last one", (long long)dim, k,
                           (long long)each);
        for (int i = 0; i < k; i++)
            sz[i] = i < k - 1 ? each : last;
        ns = k;
    } else if (ns < 0) {
        if (dim % k)
            return imp_err(I, "%lld does not split into %d equal parts", (long long)dim, k);
        for (int i = 0; i < k; i++)
            sz[i] = dim / k;
        ns = k;
    }
    int64_t tot = 0; /* sizes are checked one by one: their sum must not wrap */
    bool bad = false;
    for (int i = 0; i < ns; i++)
        bad = bad || sz[i] < 0 || __builtin_add_overflow(tot, sz[i], &tot);
    if (bad || ns != k || tot != dim)
        return imp_err(I, "split sizes do not sum to the dim");
    if (X->c)
        return imp_err(I, "a split of a constant is not supported");
    int u;
    const char *e = imp_ref(I, x, &u);
    if (!e)
        return I->e->code;
    /* one statement per output: x[..., a:b] */
    int64_t off = 0;
    for (int i = 0; i < k; i++) {
        int o = imp_out(I, n, (size_t)i); /* every output is required (the row's "1+") */
        dpc_buf b;
        dpc_buf_init(&b);
        dpc_buf_printf(&b, "%s[", e);
        for (int j = 0; j < axis; j++)
            dpc_buf_puts(&b, ":, ");
        dpc_buf_printf(&b, "%lld:%lld]", (long long)off, (long long)(off + sz[i]));
        char *t = dpc_buf_take(&b);
        const char *ex = t ? imp_printf(I, "%s", t) : NULL;
        dpc_free(t);
        sdim d[DPC_MAX_RANK];
        memcpy(d, X->d, sizeof d);
        d[axis] = (sdim){sz[i], 0};
        if ((s = imp_add_stmt(I, o, NULL, ex, X->kind, X->rank, d, u, -1, -1)) != DPC_OK)
            return s;
        off += sz[i];
    }
    return DPC_OK;
}
