/* onnx_ops_common.c - what the op families (onnx_ops_*.c) share: making a
 * value a constant or an alias, reading a constant operand as dims, ints or
 * an axis, adding a statement, copying and indexing constant tensors
 * (broadcast source, strides), broadcasting two shapes, naming members after
 * initializers or node scopes, and the transpose of a 2-D weight. It is its
 * own file so that every family depends on it and it on none of them. */
#include "onnx_ops_common.h"

#include "emit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes v the constant t (kind, with per-element symbols csym, owned). */
dpc_status imp_set_const(imp *I, int v, dpc_tensor *t, int kind, int *csym) {
    if (imp_check_value(I, v) != DPC_OK || !t) {
        dpc_free(csym);
        return t ? I->e->code : imp_err(I, "internal: a constant without its tensor");
    }
    ival *x = V(v);
    x->c = t, x->kind = kind, x->csym = csym;
    imp_const_own(I, v); /* freed once nothing reads it (onnx_fold.c) */
    sdim d[DPC_MAX_RANK];
    for (int i = 0; i < t->rank; i++)
        d[i] = (sdim){t->shape[i], 0};
    return imp_set_shape(I, v, t->rank, d);
}

/* The int constant v as a list of sdims (a shape operand). */
dpc_status imp_const_dims(imp *I, int v, sdim *d, int *n, int max, const char *what) {
    if (!is_const(I, v) || V(v)->kind == VK_FLOAT)
        return imp_err(I, "%s must be a constant integer tensor (computed shapes are not supported)", what);
    int64_t k = dpc_tensor_numel(V(v)->c);
    if (V(v)->c->rank > 1 || k > max)
        return imp_err(I, "%s has %lld values (at most %d)", what, (long long)k, max);
    for (int64_t i = 0; i < k; i++)
        d[i] = (sdim){I64(V(v))[i], V(v)->csym ? V(v)->csym[i] : 0};
    *n = (int)k;
    return DPC_OK;
}

dpc_status imp_const_ints(imp *I, int v, int64_t *d, int *n, int max, const char *what) {
    sdim s[64];
    dpc_status st = imp_const_dims(I, v, s, n, max > 64 ? 64 : max, what);
    if (st != DPC_OK)
        return st;
    for (int i = 0; i < *n; i++) {
        if (s[i].s)
            return imp_err(I, "%s depends on a run-time dim (give it with --dim NAME=SIZE)", what);
        d[i] = s[i].v;
    }
    return DPC_OK;
}

dpc_status imp_axis_norm(imp *I, int64_t a, int rank, int *out) {
    if (a < -rank || a >= rank)
        return imp_err(I, "axis %lld out of range for rank %d", (long long)a, rank);
    *out = (int)(a < 0 ? a + rank : a);
    return DPC_OK;
}

/* Adds a statement out = expr reading the given values (-1 entries skipped). */
dpc_status imp_add_stmt(imp *I, int out, const char *member, const char *expr, int kind, int rank, const sdim *d,
                       int u0, int u1, int u2) {
    int uses[3] = {u0, u1, u2};
    return imp_stmt_value(I, out, member, expr, kind, rank, d, uses, 3);
}

dpc_status imp_broadcast(imp *I, const ival *a, const ival *b, int *rank, sdim *d) {
    if (!a->shaped || !b->shaped)
        return imp_err(I, "an input of unknown shape");
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        sdim x = ia >= 0 ? a->d[ia] : (sdim){1, 0}, y = ib >= 0 ? b->d[ib] : (sdim){1, 0};
        if (x.s == 0 && x.v == 1)
            d[i] = y;
        else if ((y.s == 0 && y.v == 1) || (x.s == y.s && x.v == y.v))
            d[i] = x;
        else
            return imp_err(I, "inputs of shapes that do not broadcast (dim %d: %s vs %s)", i, imp_dim(I, x),
                           imp_dim(I, y));
    }
    *rank = r;
    return DPC_OK;
}

dpc_tensor *imp_copy_tensor(imp *I, const dpc_tensor *src, int rank, const int64_t *shape) {
    dpc_tensor *t = imp_tensor(I, src->dtype, rank, shape);
    if (t && t->nbytes == src->nbytes)
        memcpy(t->data, src->data, src->nbytes);
    return t;
}

int *imp_copy_sym(imp *I, const ival *x) {
    if (!x->csym)
        return NULL;
    int64_t k = dpc_tensor_numel(x->c);
    int *s = dpc_malloc((size_t)(k ? k : 1) * sizeof *s);
    if (s)
        memcpy(s, x->csym, (size_t)k * sizeof *s);
    else
        imp_oom(I);
    return s;
}

/* Alias: out is in (Identity, Dropout, a Cast to the same kind). */
dpc_status imp_alias(imp *I, int out, int in) {
    if (imp_check_value(I, out) != DPC_OK || imp_check_value(I, in) != DPC_OK)
        return I->e->code;
    ival *o = V(out), *x = V(in);
    o->kind = x->kind, o->c = x->c, o->var = x->var, o->stmt = x->stmt;
    imp_const_share(I, out, in); /* the tensor is freed when neither reads any more */
    o->csym = imp_copy_sym(I, x);
    if (x->csym && !o->csym)
        return DPC_ENOMEM;
    return imp_set_shape(I, out, x->rank, x->d);
}

/* a * b for dims (>= 0), saturated: the products of an empty constant's
 * other dims may pass int64 (its loops then run 0 times) */
int64_t imp_sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* strides of a shape */
void imp_strides(const int64_t *shape, int r, int64_t *st) {
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--)
        st[i] = s, s = imp_sat_mul(s, shape[i]);
}

/* broadcasting source index of output linear index o */
int64_t imp_bsrc(int64_t o, const int64_t *oshape, int orank, const int64_t *ishape, int irank) {
    int64_t idx = 0, mul = 1;
    for (int i = orank - 1; i >= 0; i--) {
        int64_t c = o % oshape[i];
        o /= oshape[i];
        int k = i - (orank - irank);
        if (k >= 0) {
            if (ishape[k] != 1)
                idx += c * mul;
            mul *= ishape[k];
        }
    }
    return idx;
}

/* a member name after the initializer of the main weight ("layer1.0.conv1.weight"
 * -> layer1_0_conv1), else after the node ("Conv_12") */
const char *imp_member_name(imp *I, const Onnx__NodeProto *n, int w, const char *fallback) {
    char base[300] = "";
    if (w >= 0 && V(w)->init >= 0) {
        const char *nm = V(w)->name;
        size_t L = strlen(nm);
        bool plain = L < 200;
        for (size_t i = 0; i < L && plain; i++)
            plain = (nm[i] >= 'a' && nm[i] <= 'z') || (nm[i] >= 'A' && nm[i] <= 'Z') || (nm[i] >= '0' && nm[i] <= '9') ||
                    nm[i] == '_' || nm[i] == '.';
        if (plain && strncmp(nm, "onnx", 4) != 0) {
            snprintf(base, sizeof base, "%s", nm);
            size_t b = strlen(base);
            if (b > 7 && strcmp(base + b - 7, ".weight") == 0)
                base[b - 7] = 0;
        }
    }
    if (!*base && n->name && n->name[0] == '/' && strlen(n->name) < 200) {
        /* a scope "/layer2/layer2.0/downsample/downsample.0/Conv": the module
         * path layer2.0.downsample.0 (a component extending the one before
         * replaces it), the op's own last component dropped */
        char comp[16][200];
        int nc = 0;
        for (const char *p = n->name + 1; *p && nc < 16;) {
            const char *q = strchr(p, '/');
            size_t L = q ? (size_t)(q - p) : strlen(p);
            snprintf(comp[nc++], sizeof comp[0], "%.*s", (int)L, p);
            if (!q)
                break;
            p = q + 1;
        }
        size_t pos = 0, last = 0;
        for (int i = 0; i + 1 < nc; i++) {
            size_t pl = strlen(comp[i > 0 ? i - 1 : 0]);
            if (i > 0 && strncmp(comp[i], comp[i - 1], pl) == 0 && comp[i][pl] == '.')
                pos = last; /* replaces the previous component */
            last = pos;
            pos += (size_t)snprintf(base + pos, sizeof base - pos, "%s%s", pos ? "." : "", comp[i]);
            if (pos >= sizeof base)
                break;
        }
        if (nc == 1)
            snprintf(base, sizeof base, "%s", comp[0]);
    }
    if (!*base && n->name && *n->name && strlen(n->name) < 200)
        snprintf(base, sizeof base, "%s", n->name);
    return imp_ident(I, base, fallback);
}

/* " # weight: NAME" for the member line (escaped); NULL for a NULL decl
 * (an allocation that failed). */
char *imp_member_line(imp *I, const char *decl, int w) {
    if (!decl)
        return NULL;
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_puts(&b, decl);
    if (w >= 0 && V(w)->init >= 0) {
        dpc_buf_puts(&b, "  # from ");
        emit_comment_text(&b, V(w)->name);
    }
    char *s = dpc_buf_take(&b);
    char *r = s ? imp_printf(I, "%s", s) : NULL;
    dpc_free(s);
    return r;
}

/* W^T of a constant [in, out] matrix (a Linear's weight is [out, in]) */
dpc_tensor *imp_transposed(imp *I, const dpc_tensor *w) {
    int64_t sh[2] = {w->shape[1], w->shape[0]};
    dpc_tensor *t = imp_tensor(I, DPC_F32, 2, sh);
    if (!t)
        return NULL;
    for (int64_t i = 0; i < sh[0]; i++)
        for (int64_t j = 0; j < sh[1]; j++)
            ((float *)t->data)[i * sh[1] + j] = ((float *)w->data)[j * sh[0] + i];
    return t;
}

/* A fresh value for an intermediate statement or partial result of this
 * node: "\x01" TAG "NV", a name no ONNX file can give (it starts with
 * \x01). */
int imp_tmp_value(imp *I, const char *tag) {
    char nm[40];
    snprintf(nm, sizeof nm, "\x01%s%d", tag, I->nv);
    const char *s = imp_printf(I, "%s", nm);
    return s ? imp_new_value(I, s) : -1;
}

/* an attribute string for an error message (escaped) */
dpc_status imp_bad_string(imp *I, const char *what, const char *s) {
    dpc_buf b;
    dpc_buf_init(&b);
    emit_comment_text(&b, s);
    dpc_status st = imp_err(I, "%s=%s is not supported", what, b.data ? b.data : "?");
    dpc_buf_free(&b);
    return st;
}

/* the float tensor input 0 (a constant becomes a Parameter through imp_ref) */
const char *imp_float_in(imp *I, const Onnx__NodeProto *n, int *x, int *u) {
    *x = imp_in(I, n, 0);
    if (V(*x)->kind != VK_FLOAT || !V(*x)->shaped) {
        imp_err(I, "on a non-float tensor (dpc computes this op in float32 only)");
        return NULL;
    }
    return imp_ref(I, *x, u);
}
