/* onnx_ops.c - the importer's op table: one row per ONNX op type (the
 * opsets it covers, the attributes it reads, its function). A function
 * folds its node when the inputs are constants (shape plumbing) or adds a
 * forward statement; the recognisers of decomposed modules (Erf-GELU,
 * LayerNorm, SiLU, MatMul + Add) sit in the row of the pattern's last
 * node. Adding an op: write its function and add its row (docs/onnx.md). */
#include "onnx_imp.h"

#include "emit.h"
#include "onnx_ops_extra.h"
#include "onnx_ops_nn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define V(i) imp_val(I, (i)) /* never outside the values (onnx_imp.h) */

/* ------------------------------------------------------------- helpers */

static const char *member_name(imp *I, const Onnx__NodeProto *n, int w, const char *fallback);
static char *member_line(imp *I, const char *decl, int w);
const char *imp_member_name(imp *I, const Onnx__NodeProto *n, int w, const char *fallback) {
    return member_name(I, n, w, fallback);
}
char *imp_member_line(imp *I, const char *decl, int w) { return decl ? member_line(I, decl, w) : NULL; }

static bool is_const(imp *I, int v) { return v >= 0 && V(v)->c; }

/* Whether a value's dim 0 is the batch N (a tensor made in forward, an
 * arange(S) say, has none). */
static bool batched(const ival *x) { return x->rank > 0 && x->d[0].s == 1 && x->d[0].v == 1; }

/* Makes v the constant t (kind, with per-element symbols csym, owned). */
static dpc_status set_const(imp *I, int v, dpc_tensor *t, int kind, int *csym) {
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

static int64_t *I64(const ival *x) { return (int64_t *)x->c->data; }
static float *F32(const ival *x) { return (float *)x->c->data; }

/* The int constant v as a list of sdims (a shape operand). */
static dpc_status const_dims(imp *I, int v, sdim *d, int *n, int max, const char *what) {
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

static dpc_status const_ints(imp *I, int v, int64_t *d, int *n, int max, const char *what) {
    sdim s[64];
    dpc_status st = const_dims(I, v, s, n, max > 64 ? 64 : max, what);
    if (st != DPC_OK)
        return st;
    for (int i = 0; i < *n; i++) {
        if (s[i].s)
            return imp_err(I, "%s depends on a run-time dim (give it with --dim NAME=SIZE)", what);
        d[i] = s[i].v;
    }
    return DPC_OK;
}

static dpc_status axis_norm(imp *I, int64_t a, int rank, int *out) {
    if (a < -rank || a >= rank)
        return imp_err(I, "axis %lld out of range for rank %d", (long long)a, rank);
    *out = (int)(a < 0 ? a + rank : a);
    return DPC_OK;
}

/* Adds a statement out = expr reading the given values (-1 entries skipped). */
static dpc_status add_stmt(imp *I, int out, const char *member, const char *expr, int kind, int rank, const sdim *d,
                       int u0, int u1, int u2) {
    int uses[3] = {u0, u1, u2};
    return imp_stmt_value(I, out, member, expr, kind, rank, d, uses, 3);
}

static const char *ref(imp *I, int v, int *u) { return imp_ref(I, v, u); }

/* a member name after the initializer of the main weight ("layer1.0.conv1.weight"
 * -> layer1_0_conv1), else after the node ("Conv_12") */
static const char *member_name(imp *I, const Onnx__NodeProto *n, int w, const char *fallback) {
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

/* " # weight: NAME" for the member line (escaped). */
static char *member_line(imp *I, const char *decl, int w) {
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

static dpc_tensor *copy_tensor(imp *I, const dpc_tensor *src, int rank, const int64_t *shape) {
    dpc_tensor *t = imp_tensor(I, src->dtype, rank, shape);
    if (t && t->nbytes == src->nbytes)
        memcpy(t->data, src->data, src->nbytes);
    return t;
}

static int *copy_sym(imp *I, const ival *x) {
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
static dpc_status alias(imp *I, int out, int in) {
    if (imp_check_value(I, out) != DPC_OK || imp_check_value(I, in) != DPC_OK)
        return I->e->code;
    ival *o = V(out), *x = V(in);
    o->kind = x->kind, o->c = x->c, o->var = x->var, o->stmt = x->stmt;
    imp_const_share(I, out, in); /* the tensor is freed when neither reads any more */
    o->csym = copy_sym(I, x);
    if (x->csym && !o->csym)
        return DPC_ENOMEM;
    return imp_set_shape(I, out, x->rank, x->d);
}

/* ------------------------------------------------- constants and shapes */

static dpc_status op_constant(imp *I, const Onnx__NodeProto *n) {
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
        return set_const(I, out, k, k->dtype == DPC_F32 ? VK_FLOAT : isb ? VK_BOOL : VK_INT, NULL);
    }
    if (strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_floats") == 0) {
        bool one = a->name[11] == 0;
        int64_t k = one ? 1 : (int64_t)a->n_floats;
        imp_budget_grant(I, k);
        if (!(t = imp_tensor(I, DPC_F32, one ? 0 : 1, &k)))
            return I->e->code;
        for (int64_t i = 0; i < k; i++)
            ((float *)t->data)[i] = one ? a->f : a->floats[i];
        return set_const(I, out, t, VK_FLOAT, NULL);
    }
    if (strcmp(a->name, "value_int") == 0 || strcmp(a->name, "value_ints") == 0) {
        bool one = a->name[9] == 0;
        int64_t k = one ? 1 : (int64_t)a->n_ints;
        imp_budget_grant(I, k);
        if (!(t = imp_tensor(I, DPC_I64, one ? 0 : 1, &k)))
            return I->e->code;
        for (int64_t i = 0; i < k; i++)
            ((int64_t *)t->data)[i] = one ? a->i : a->ints[i];
        return set_const(I, out, t, VK_INT, NULL);
    }
    return imp_err(I, "a Constant of attribute %s is not supported", a->name[0] ? "sparse or string" : "?");
}

static dpc_status op_shape(imp *I, const Onnx__NodeProto *n) {
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
    return set_const(I, out, t, VK_INT, sym);
}

static dpc_status op_constant_of_shape(imp *I, const Onnx__NodeProto *n) {
    int64_t d[DPC_MAX_RANK];
    int r;
    dpc_status s = const_ints(I, imp_in(I, n, 0), d, &r, DPC_MAX_RANK, "the shape");
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
    return set_const(I, imp_out(I, n, 0), t, dt == DPC_F32 ? VK_FLOAT : isb ? VK_BOOL : VK_INT, NULL);
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

static dpc_status op_range(imp *I, const Onnx__NodeProto *n) {
    double st, lim, dl;
    int a = imp_in(I, n, 0), b = imp_in(I, n, 1), c = imp_in(I, n, 2);
    if (a >= 0 && b >= 0 && c >= 0 && imp_const_scalar(V(a), &st) && imp_const_scalar(V(c), &dl) && st == 0 &&
        dl == 1 && is_const(I, b) && V(b)->csym && V(b)->csym[0] && V(b)->c->rank == 0) {
        /* arange(S): a run-time length */
        sdim len = {I64(V(b))[0], V(b)->csym[0]};
        return add_stmt(I, imp_out(I, n, 0), NULL, imp_printf(I, "arange(%s)", imp_dim(I, len)), VK_INT, 1, &len, -1, -1, -1);
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
    return set_const(I, imp_out(I, n, 0), t, fl ? VK_FLOAT : VK_INT, NULL);
}

/* a * b for dims (>= 0), saturated: the products of an empty constant's
 * other dims may pass int64 (its loops then run 0 times) */
static int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* strides of a shape */
static void strides(const int64_t *shape, int r, int64_t *st) {
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--)
        st[i] = s, s = sat_mul(s, shape[i]);
}

/* broadcasting source index of output linear index o */
static int64_t bsrc(int64_t o, const int64_t *oshape, int orank, const int64_t *ishape, int irank) {
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

static dpc_status op_gather(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), ix = imp_in(I, n, 1), out = imp_out(I, n, 0);
    ival *X = V(x);
    if (!X->shaped)
        return imp_err(I, "the input's shape is unknown");
    int axis = 0;
    dpc_status s = axis_norm(I, imp_attr_i(I, n, "axis", 0), X->rank, &axis);
    if (s != DPC_OK)
        return s;
    if (V(ix)->kind == VK_FLOAT)
        return imp_err(I, "float indices");
    if (is_const(I, x) && is_const(I, ix)) {
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
            outer = sat_mul(outer, X->c->shape[i]);
        for (int i = axis + 1; i < X->rank; i++)
            inner = sat_mul(inner, X->c->shape[i]);
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
        return set_const(I, out, t, X->kind, sym);
    }
    /* an embedding table: Gather(weight, ids) */
    if (is_const(I, x) && !is_const(I, ix) && axis == 0 && X->rank == 2 && X->kind == VK_FLOAT) {
        const char *mem = member_name(I, n, x, "embedding");
        if (!mem)
            return DPC_ENOMEM;
        char *decl = member_line(I, imp_printf(I, "%s = Embedding(%lld, %lld)", mem, (long long)X->c->shape[0],
                                               (long long)X->c->shape[1]), x);
        int u;
        const char *e = ref(I, ix, &u);
        if (!decl || !e)
            return DPC_ENOMEM;
        sdim d[DPC_MAX_RANK];
        int r = V(ix)->rank;
        if (r + 1 > DPC_MAX_RANK)
            return imp_err(I, "rank over %d", DPC_MAX_RANK);
        memcpy(d, V(ix)->d, sizeof(sdim) * (size_t)r);
        d[r] = (sdim){X->c->shape[1], 0};
        if ((s = add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, r + 1, d, u, -1, -1)) != DPC_OK)
            return s;
        return imp_weight(I, mem, "weight", X->c);
    }
    /* a constant index into a computed tensor: x[:, i] */
    if (is_const(I, ix) && V(ix)->c->rank == 0 && !is_const(I, x)) {
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
        const char *e = ref(I, x, &u);
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
        return add_stmt(I, out, NULL, ex, X->kind, r, d, u, -1, -1);
    }
    return imp_err(I, "a Gather of this form (computed indices into a computed tensor) is not supported");
}

static dpc_status op_unsqueeze(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    int64_t ax[DPC_MAX_RANK];
    int na;
    dpc_status s;
    if (I->opset >= 13) {
        if ((s = const_ints(I, imp_in(I, n, 1), ax, &na, DPC_MAX_RANK, "axes")) != DPC_OK)
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
        if ((s = axis_norm(I, ax[i], r, &a)) != DPC_OK)
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
        dpc_tensor *t = copy_tensor(I, X->c, r, shape);
        if (!t)
            return DPC_ENOMEM;
        return set_const(I, out, t, X->kind, copy_sym(I, X));
    }
    int u;
    const char *e = ref(I, x, &u);
    for (int i = 0; i < r && e; i++)
        if (ins[i])
            e = imp_printf(I, "unsqueeze(%s, %d)", e, i);
    return add_stmt(I, out, NULL, e, X->kind, r, d, u, -1, -1);
}

static dpc_status op_squeeze(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    int64_t ax[DPC_MAX_RANK];
    int na = -1;
    dpc_status s;
    if (I->opset >= 13) {
        int av;
        if (imp_opt(I, n, 1, &av) && (s = const_ints(I, av, ax, &na, DPC_MAX_RANK, "axes")) != DPC_OK)
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
            if ((s = axis_norm(I, ax[i], X->rank, &a)) != DPC_OK)
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
        dpc_tensor *t = copy_tensor(I, X->c, r, shape);
        if (!t)
            return DPC_ENOMEM;
        return set_const(I, out, t, X->kind, copy_sym(I, X));
    }
    if (rm[0] && batched(X))
        return imp_err(I, "squeezing the batch dim is not supported");
    int u;
    const char *e = ref(I, x, &u);
    for (int i = X->rank - 1; i >= 0 && e; i--)
        if (rm[i])
            e = imp_printf(I, "squeeze(%s, %d)", e, i);
    return add_stmt(I, out, NULL, e, X->kind, r, d, u, -1, -1);
}

static dpc_status op_concat(imp *I, const Onnx__NodeProto *n) {
    int out = imp_out(I, n, 0);
    int x0 = imp_in(I, n, 0); /* 1 or more inputs (the row's "1+"), each given */
    int axis = 0;
    dpc_status s = axis_norm(I, imp_attr_i(I, n, "axis", 0), V(x0)->rank, &axis);
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
            outer = sat_mul(outer, shape[k]);
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
        return set_const(I, out, t, V(x0)->kind, sym);
    }
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_puts(&b, "cat([");
    int *uses = imp_alloc(I, n->n_input * sizeof *uses), nu = 0; /* every reader recorded: the liveness pass */
    for (size_t i = 0; i < n->n_input && uses; i++) {
        int u;
        const char *e = ref(I, imp_in(I, n, i), &u);
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
    const char *e = ref(I, x, &u);
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
    return add_stmt(I, out, NULL, ex, V(x)->kind, r, d, u, -1, -1);
}

static dpc_status const_reshape(imp *I, int out, int x, const sdim *d, int r) {
    int64_t shape[DPC_MAX_RANK];
    for (int i = 0; i < r; i++) {
        if (d[i].s)
            return imp_err(I, "a constant reshaped to a run-time dim");
        shape[i] = d[i].v;
    }
    dpc_tensor *t = copy_tensor(I, V(x)->c, r, shape);
    if (!t || t->nbytes != V(x)->c->nbytes)
        return t ? imp_err(I, "reshape of a constant to a different size") : DPC_ENOMEM;
    return set_const(I, out, t, V(x)->kind, copy_sym(I, V(x)));
}

static dpc_status op_reshape(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    sdim want[DPC_MAX_RANK], d[DPC_MAX_RANK];
    int r;
    dpc_status s = const_dims(I, imp_in(I, n, 1), want, &r, DPC_MAX_RANK, "the shape");
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
        return alias(I, out, X->merged);
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

static dpc_status op_flatten(imp *I, const Onnx__NodeProto *n) {
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
    const char *e = ref(I, x, &u);
    /* a rank-1 input: [N] -> [N, 1] (flatten's start dim 1 would be out of range) */
    return add_stmt(I, out, NULL, e ? imp_printf(I, X->rank == 1 ? "unsqueeze(%s, 1)" : "flatten(%s, 1)", e) : NULL,
                    X->kind, 2, d, u, -1, -1);
}

static dpc_status op_transpose(imp *I, const Onnx__NodeProto *n) {
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
        strides(X->c->shape, r, ist);
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
        return set_const(I, out, t, X->kind, NULL);
    }
    int u;
    const char *e = ref(I, x, &u);
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "permute(%s", e ? e : "");
    for (int i = 0; i < r; i++)
        dpc_buf_printf(&b, ", %lld", (long long)perm[i]);
    dpc_buf_puts(&b, ")");
    char *t = dpc_buf_take(&b);
    const char *ex = t && e ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    return add_stmt(I, out, NULL, ex, X->kind, r, d, u, -1, -1);
}

/* Identity, Dropout: Dropout's mask output (optional) is never computed, so
 * a node reading it is refused where it reads it. */
static dpc_status op_identity(imp *I, const Onnx__NodeProto *n) {
    int tm;
    if (strcmp(n->op_type, "Dropout") == 0 && imp_opt(I, n, 2, &tm)) {
        double t;
        if (!imp_const_scalar(V(tm), &t) || t != 0)
            return imp_err(I, "training_mode must be a constant false");
    }
    return alias(I, imp_out(I, n, 0), imp_in(I, n, 0));
}

static dpc_status op_cast(imp *I, const Onnx__NodeProto *n) {
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
        return alias(I, out, x);
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
        return set_const(I, out, t, kind, NULL);
    }
    int u;
    const char *e = ref(I, x, &u);
    const char *m = kind == VK_FLOAT ? "float" : kind == VK_BOOL ? "bool" : "long";
    return add_stmt(I, out, NULL, e ? imp_printf(I, "%s.%s()", e, m) : NULL, kind, X->rank, X->d, u, -1, -1);
}

/* ------------------------------------------------------- elementwise ops */

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

static bool near(double a, double b) { return fabs(a - b) <= 1e-6 * fabs(b) + 1e-12; }

static int producer_of(imp *I, int v, const char *op) {
    if (v < 0 || V(v)->node < 0)
        return -1;
    const Onnx__NodeProto *p = I->g->node[V(v)->node];
    return strcmp(p->op_type, op) == 0 ? V(v)->node : -1;
}

static dpc_status op_unary(imp *I, const Onnx__NodeProto *n) {
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
        return set_const(I, out, t, kind, NULL);
    }
    if (X->kind != VK_FLOAT && kind != VK_BOOL && strcmp(n->op_type, "Neg") != 0 && strcmp(n->op_type, "Abs") != 0)
        return imp_err(I, "on an integer tensor (dpc computes it in float only)");
    int uu;
    const char *e = ref(I, x, &uu);
    if (!e)
        return I->e->code;
    const char *ex = u->fn ? imp_printf(I, "%s(%s)", u->fn, e) : imp_printf(I, "1.0 / %s", e);
    return add_stmt(I, out, NULL, ex, kind, X->rank, X->d, uu, -1, -1);
}

static dpc_status op_act(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    if (X->kind != VK_FLOAT || X->c)
        return imp_err(I, "on a constant or a non-float tensor");
    int u;
    const char *e = ref(I, x, &u), *ex;
    if (!e)
        return I->e->code;
    if (strcmp(n->op_type, "HardSigmoid") == 0) {
        double a = imp_attr_f(I, n, "alpha", 0.2), b = imp_attr_f(I, n, "beta", 0.5);
        if (near(a, 1.0 / 6) && b == 0.5)
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
        dpc_status s = axis_norm(I, imp_attr_i(I, n, "axis", I->opset >= 13 ? -1 : 1), X->rank, &axis);
        if (s != DPC_OK)
            return s;
        if (I->opset < 13 && axis != X->rank - 1)
            return imp_err(I, "a Softmax before opset 13 over axis %d (not the last) flattens: not supported", axis);
        if (axis == 0)
            return imp_err(I, "a softmax over the batch dim is not supported");
        ex = imp_printf(I, "%s(%s, %d)", n->op_type[0] == 'L' ? "log_softmax" : "softmax", e, axis);
    } else
        return imp_err(I, "internal: no activation");
    return add_stmt(I, out, NULL, ex, VK_FLOAT, X->rank, X->d, u, -1, -1);
}

/* Clip(x, min, max) (attributes before opset 11) */
static dpc_status op_clip(imp *I, const Onnx__NodeProto *n) {
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
    const char *e = ref(I, x, &u), *ex;
    if (!e)
        return I->e->code;
    if (has_lo && has_hi && lo == 0 && hi == 6)
        ex = imp_printf(I, "relu6(%s)", e);
    else if (!has_lo && !has_hi)
        return alias(I, out, x);
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
    return add_stmt(I, out, NULL, ex, VK_FLOAT, X->rank, X->d, u, -1, -1);
}

/* -------------------------------------------------------- binary ops */

static bool cmp_op(const char *op) {
    return !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") || !strcmp(op, "LessOrEqual") ||
           !strcmp(op, "GreaterOrEqual") || !strcmp(op, "And") || !strcmp(op, "Or");
}

/* a ** b in int64 (a negative b truncates 1 / a ** -b toward 0, as C's
 * cast of pow did); false when it overflows or divides by 0 */
static bool ipow(int64_t a, int64_t b, int64_t *r) {
    if (b < 0) {
        if (a == 0)
            return false;
        *r = a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
        return true;
    }
    int64_t acc = 1, base = a;
    while (b) { /* a squaring that overflows with bits left means the result does */
        if ((b & 1) && __builtin_mul_overflow(acc, base, &acc))
            return false;
        b >>= 1;
        if (b && __builtin_mul_overflow(base, base, &base))
            return false;
    }
    *r = acc;
    return true;
}

/* Integer folding, exact: int64 as ONNX defines it, false where C's
 * arithmetic would be undefined (overflow) or a division is by 0. */
static bool fold2i(const char *op, int64_t a, int64_t b, int64_t *r) {
    switch (op[0]) {
    case 'A':
        if (op[1] == 'd')
            return !__builtin_add_overflow(a, b, r);
        *r = a != 0 && b != 0;
        return true;
    case 'S': return !__builtin_sub_overflow(a, b, r);
    case 'M':
        if (op[1] == 'u')
            return !__builtin_mul_overflow(a, b, r);
        *r = op[1] == 'a' ? (a > b ? a : b) : (a < b ? a : b);
        return true;
    case 'D':
        if (b == 0 || (a == INT64_MIN && b == -1))
            return false;
        *r = a / b;
        return true;
    case 'P': return ipow(a, b, r);
    case 'E': *r = a == b; return true;
    case 'O': *r = a != 0 || b != 0; return true;
    case 'L': *r = op[4] == 'O' ? a <= b : a < b; return true;
    case 'G': *r = op[7] == 'O' ? a >= b : a > b; return true;
    }
    return false;
}

/* One element of an integer fold where a run-time dim's symbol is
 * involved (sa, sb: x = x*S): 0 done, 1 overflow, 2 not foldable. */
static int fold_sym_i(const char *op, int64_t x, int64_t y, int sa, int sb, int64_t *v, int *sv) {
    *sv = 0;
    if ((!strcmp(op, "Add") || !strcmp(op, "Sub")) && sa && sa == sb) { /* a*S +- b*S */
        if (op[0] == 'A' ? __builtin_add_overflow(x, y, v) : __builtin_sub_overflow(x, y, v))
            return 1;
        *sv = *v != 0 ? sa : 0;
    } else if (!strcmp(op, "Mul") && (!sa || !sb)) {
        if (__builtin_mul_overflow(x, y, v))
            return 1;
        *sv = sa ? sa : sb;
    } else if (!strcmp(op, "Div") && sa && !sb && y != 0 && !(x == INT64_MIN && y == -1) && x % y == 0)
        *v = x / y, *sv = sa;
    else if (!strcmp(op, "Equal") && sa && sa == sb)
        *v = x == y;
    else if (!strcmp(op, "Equal") && (sa || sb) && ((sa ? y : x) == -1 || (sa ? y : x) == 0))
        *v = 0; /* a run-time dim is never -1 or 0 (torch's reshape plumbing compares with -1) */
    else
        return 2;
    return 0;
}

/* One element of an integer fold into t[o] (and cs[o]); the located error
 * when it overflows or cannot be folded. */
static dpc_status fold_elem_i(imp *I, const char *op, int64_t x, int64_t y, int sa, int sb, dpc_tensor *t, int *cs,
                              int64_t o) {
    int64_t v = 0;
    int sv = 0, r = !sa && !sb ? (fold2i(op, x, y, &v) ? 0 : 1) : fold_sym_i(op, x, y, sa, sb, &v, &sv);
    if (r == 1)
        return imp_err(I, "folding %s of the integers %lld and %lld overflows int64 (or divides by 0)", op,
                       (long long)x, (long long)y);
    if (r == 2)
        return imp_err(I, "arithmetic on a run-time dim that dpc cannot fold (give it with --dim NAME=SIZE)");
    ((int64_t *)t->data)[o] = v;
    if (cs)
        cs[o] = sv;
    return DPC_OK;
}

static double fold2(const char *op, double a, double b) {
    switch (op[0]) {
    case 'A': return op[1] == 'd' ? a + b : (a != 0 && b != 0);
    case 'S': return a - b;
    case 'M': return op[1] == 'u' ? a * b : op[1] == 'a' ? (a > b ? a : b) : (a < b ? a : b);
    case 'D': return a / b;
    case 'P': return pow(a, b);
    case 'E': return a == b;
    case 'O': return a != 0 || b != 0;
    case 'L': return op[4] == 'O' ? a <= b : a < b;
    case 'G': return op[7] == 'O' ? a >= b : a > b;
    }
    return 0;
}

static dpc_status fold_binary(imp *I, const Onnx__NodeProto *n, int a, int b, int out) {
    ival *A = V(a), *B = V(b);
    int r;
    sdim d[DPC_MAX_RANK];
    dpc_status s = imp_broadcast(I, A, B, &r, d);
    if (s != DPC_OK)
        return s;
    int64_t shape[DPC_MAX_RANK];
    for (int i = 0; i < r; i++)
        shape[i] = d[i].v;
    bool cmp = cmp_op(n->op_type), isint = A->kind != VK_FLOAT && B->kind != VK_FLOAT;
    int kind = cmp ? VK_BOOL : isint ? VK_INT : VK_FLOAT;
    dpc_tensor *t = imp_tensor(I, kind == VK_FLOAT ? DPC_F32 : DPC_I64, r, shape);
    if (!t)
        return DPC_ENOMEM;
    int64_t total = dpc_tensor_numel(t);
    bool sym = A->csym || B->csym;
    int *cs = sym ? dpc_calloc((size_t)(total ? total : 1), sizeof *cs) : NULL;
    if (sym && !cs)
        return imp_oom(I);
    for (int64_t o = 0; o < total; o++) {
        int64_t ia = bsrc(o, shape, r, A->c->shape, A->c->rank), ib = bsrc(o, shape, r, B->c->shape, B->c->rank);
        int sa = A->csym ? A->csym[ia] : 0, sb = B->csym ? B->csym[ib] : 0;
        if (isint) { /* exact, in int64: through double it loses bits past 2^53 and converts out of range */
            if ((s = fold_elem_i(I, n->op_type, I64(A)[ia], I64(B)[ib], sa, sb, t, cs, o)) != DPC_OK) {
                dpc_free(cs);
                return s;
            }
            continue;
        }
        double x = A->c->dtype == DPC_F32 ? F32(A)[ia] : (double)I64(A)[ia];
        double y = B->c->dtype == DPC_F32 ? F32(B)[ib] : (double)I64(B)[ib];
        double v;
        int sv = 0;
        if (!sa && !sb)
            v = fold2(n->op_type, x, y);
        else if ((!strcmp(n->op_type, "Add") || !strcmp(n->op_type, "Sub")) && sa && sa == sb) {
            v = n->op_type[0] == 'A' ? x + y : x - y; /* a*S +- b*S */
            sv = v != 0 ? sa : 0;
        } else if (!strcmp(n->op_type, "Mul") && (!sa || !sb))
            v = x * y, sv = sa ? sa : sb;
        else if (!strcmp(n->op_type, "Div") && sa && !sb && y != 0 && fmod(x, y) == 0)
            v = x / y, sv = sa;
        else if (!strcmp(n->op_type, "Equal") && sa && sa == sb)
            v = x == y;
        else if (!strcmp(n->op_type, "Equal") && (sa || sb) && ((sa ? y : x) == -1 || (sa ? y : x) == 0))
            v = 0; /* a run-time dim is never -1 or 0 (torch's reshape plumbing compares with -1) */
        else {
            dpc_free(cs);
            return imp_err(I, "arithmetic on a run-time dim that dpc cannot fold (give it with --dim NAME=SIZE)");
        }
        if (kind == VK_FLOAT)
            ((float *)t->data)[o] = (float)v;
        else /* a comparison of floats: 0 or 1 */
            ((int64_t *)t->data)[o] = v != 0;
        if (cs)
            cs[o] = sv;
    }
    return set_const(I, out, t, kind, cs);
}

/* Erf-GELU: Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5), in either operand order */
static int match_gelu(imp *I, int a, int b) {
    double h;
    if (!imp_const_scalar(V(b), &h) || !near(h, 0.5))
        return -1;
    int m = producer_of(I, a, "Mul");
    if (m < 0)
        return -1;
    const Onnx__NodeProto *M = I->g->node[m];
    for (int side = 0; side < 2; side++) {
        int x = imp_in(I, M, (size_t)side), ad = imp_in(I, M, (size_t)(1 - side));
        int an = producer_of(I, ad, "Add");
        if (an < 0 || x < 0)
            continue;
        const Onnx__NodeProto *A = I->g->node[an];
        for (int s2 = 0; s2 < 2; s2++) {
            double one;
            int er = imp_in(I, A, (size_t)s2), c1 = imp_in(I, A, (size_t)(1 - s2));
            int en = producer_of(I, er, "Erf");
            if (en < 0 || c1 < 0 || !imp_const_scalar(V(c1), &one) || one != 1)
                continue;
            int dn = producer_of(I, imp_in(I, I->g->node[en], 0), "Div");
            if (dn < 0)
                continue;
            const Onnx__NodeProto *D = I->g->node[dn];
            double c;
            if (imp_in(I, D, 0) == x && imp_const_scalar(V(imp_in(I, D, 1)), &c) && near(c, sqrt(2.0)))
                return x;
        }
    }
    return -1;
}

/* LayerNorm before opset 17: Add(Mul(Div(Sub(x, mean(x)), Sqrt(Add(mean(Pow(Sub, 2)), eps))), gamma), beta) */
static int match_layernorm(imp *I, int a, int beta, int *gamma, double *eps) {
    if (!is_const(I, beta) || V(beta)->c->rank != 1 || V(beta)->kind != VK_FLOAT)
        return -1;
    int mu = producer_of(I, a, "Mul");
    if (mu < 0)
        return -1;
    const Onnx__NodeProto *M = I->g->node[mu];
    for (int side = 0; side < 2; side++) {
        int dv = imp_in(I, M, (size_t)side), g = imp_in(I, M, (size_t)(1 - side));
        int dn = producer_of(I, dv, "Div");
        if (dn < 0 || !is_const(I, g) || V(g)->c->rank != 1 || V(g)->kind != VK_FLOAT)
            continue;
        const Onnx__NodeProto *D = I->g->node[dn];
        int sub = imp_in(I, D, 0), sq = imp_in(I, D, 1);
        int sn = producer_of(I, sub, "Sub"), qn = producer_of(I, sq, "Sqrt");
        if (sn < 0 || qn < 0)
            continue;
        const Onnx__NodeProto *S = I->g->node[sn];
        int x = imp_in(I, S, 0), rm = producer_of(I, imp_in(I, S, 1), "ReduceMean");
        if (rm < 0 || imp_in(I, I->g->node[rm], 0) != x)
            continue;
        int ae = producer_of(I, imp_in(I, I->g->node[qn], 0), "Add");
        if (ae < 0)
            continue;
        const Onnx__NodeProto *AE = I->g->node[ae];
        double e;
        int rm2 = producer_of(I, imp_in(I, AE, 0), "ReduceMean");
        if (rm2 < 0 || !imp_const_scalar(V(imp_in(I, AE, 1)), &e))
            continue;
        int pw = producer_of(I, imp_in(I, I->g->node[rm2], 0), "Pow");
        double two;
        if (pw < 0 || imp_in(I, I->g->node[pw], 0) != sub || !imp_const_scalar(V(imp_in(I, I->g->node[pw], 1)), &two) ||
            two != 2)
            continue;
        /* both means over the last axis only */
        const Onnx__NodeProto *rms[2] = {I->g->node[rm], I->g->node[rm2]};
        bool ok = true;
        for (int k = 0; k < 2; k++) {
            const int64_t *ax;
            int na = imp_attr_ints(I, rms[k], "axes", &ax);
            ok &= na == 1 && (ax[0] == -1 || ax[0] == V(x)->rank - 1) && imp_attr_i(I, rms[k], "keepdims", 1) == 1;
        }
        int64_t D0 = V(x)->rank ? V(x)->d[V(x)->rank - 1].v : 0;
        if (!ok || V(x)->d[V(x)->rank - 1].s || V(g)->c->shape[0] != D0 || V(beta)->c->shape[0] != D0)
            continue;
        *gamma = g, *eps = e;
        return x;
    }
    return -1;
}

static dpc_status layernorm_stmt(imp *I, const Onnx__NodeProto *n, int out, int x, int gamma, int beta, double eps) {
    int64_t D = V(x)->d[V(x)->rank - 1].v;
    const char *mem = member_name(I, n, gamma, "norm");
    const char *es = imp_f32(I, eps);
    int u;
    const char *e = ref(I, x, &u);
    if (!mem || !e || !es)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    char *decl = member_line(I, imp_printf(I, "%s = LayerNorm(%lld, eps=%s%s)", mem, (long long)D, es,
                                           beta < 0 ? ", bias=False" : ""), gamma);
    dpc_status s = add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, V(x)->rank, V(x)->d, u, -1, -1);
    if (s == DPC_OK)
        s = imp_weight(I, mem, "weight", V(gamma)->c);
    if (s == DPC_OK && beta >= 0)
        s = imp_weight(I, mem, "bias", V(beta)->c);
    return s;
}

/* Linear's statement: y = lin(x) with W [out, in] (already transposed) and bias b or -1 */
static dpc_status linear_stmt(imp *I, const Onnx__NodeProto *n, int out, int x, dpc_tensor *W, int wv, int b) {
    if (V(x)->merged >= 0) {
        /* Linear(reshape(x, -1, K)) = reshape(Linear(x), -1, M): computed on x, the result merged again */
        char nm[32];
        snprintf(nm, sizeof nm, "\x01merged%d", I->nv);
        const char *vn = imp_printf(I, "%s", nm);
        int y = vn ? imp_new_value(I, vn) : -1;
        if (y < 0)
            return I->e->code ? I->e->code : DPC_ENOMEM;
        dpc_status s = linear_stmt(I, n, y, V(x)->merged, W, wv, b);
        if (s != DPC_OK)
            return s;
        V(out)->merged = y;
        V(out)->kind = VK_FLOAT;
        sdim m[2] = {{1, 0}, {W->shape[0], 0}};
        return imp_set_shape(I, out, 2, m);
    }
    ival *X = V(x);
    int64_t in = W->shape[1], o = W->shape[0];
    if (!X->shaped || X->rank < 2 || X->d[X->rank - 1].s || X->d[X->rank - 1].v != in)
        return imp_err(I, "the input's last dim is not %lld", (long long)in);
    const char *mem = member_name(I, n, wv, "linear");
    int u;
    const char *e = ref(I, x, &u);
    if (!mem || !e)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    char *decl = member_line(I, imp_printf(I, "%s = Linear(%lld, %lld%s)", mem, (long long)in, (long long)o,
                                           b < 0 ? ", bias=False" : ""), wv);
    sdim d[DPC_MAX_RANK];
    memcpy(d, X->d, sizeof d);
    d[X->rank - 1] = (sdim){o, 0};
    dpc_status s = add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, X->rank, d, u, -1, -1);
    if (s == DPC_OK)
        s = imp_weight(I, mem, "weight", W);
    if (s == DPC_OK && b >= 0)
        s = imp_weight(I, mem, "bias", V(b)->c);
    return s;
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

static const char *binop_text(const char *op) {
    return !strcmp(op, "Add") ? "+" : !strcmp(op, "Sub") ? "-" : !strcmp(op, "Mul") ? "*" : !strcmp(op, "Div") ? "/"
         : !strcmp(op, "Pow") ? "**" : !strcmp(op, "Equal") ? "==" : !strcmp(op, "Less") ? "<"
         : !strcmp(op, "Greater") ? ">" : !strcmp(op, "LessOrEqual") ? "<=" : !strcmp(op, "GreaterOrEqual") ? ">="
         : !strcmp(op, "And") ? "&" : !strcmp(op, "Or") ? "|" : NULL;
}

static dpc_status op_binary(imp *I, const Onnx__NodeProto *n) {
    int a = imp_in(I, n, 0), b = imp_in(I, n, 1), out = imp_out(I, n, 0);
    /* ONNX types both operands T (Pow alone has T and T1): a float and an
     * integer tensor is an invalid model, not a promotion */
    if (strcmp(n->op_type, "Pow") != 0 && V(a)->kind != V(b)->kind)
        return imp_err(I, "operands of different element types (%s and %s)", V(a)->kind == VK_FLOAT ? "float" : V(a)->kind == VK_INT ? "integer" : "bool",
                       V(b)->kind == VK_FLOAT ? "float" : V(b)->kind == VK_INT ? "integer" : "bool");
    if (is_const(I, a) && is_const(I, b))
        return fold_binary(I, n, a, b, out);
    const char *op = n->op_type;
    if (!strcmp(op, "Mul")) {
        for (int side = 0; side < 2; side++) {
            int p = side ? b : a, q = side ? a : b;
            int x = match_gelu(I, p, q);
            if (x >= 0) {
                int u;
                const char *e = ref(I, x, &u);
                return add_stmt(I, out, NULL, e ? imp_printf(I, "gelu(%s)", e) : NULL, VK_FLOAT, V(x)->rank, V(x)->d, u,
                            -1, -1);
            }
            int sg = producer_of(I, p, "Sigmoid");
            if (sg >= 0 && imp_in(I, I->g->node[sg], 0) == q) {
                int u;
                const char *e = ref(I, q, &u);
                return add_stmt(I, out, NULL, e ? imp_printf(I, "silu(%s)", e) : NULL, VK_FLOAT, V(q)->rank, V(q)->d, u,
                            -1, -1);
            }
        }
    }
    if (!strcmp(op, "Add")) {
        for (int side = 0; side < 2; side++) {
            int p = side ? b : a, q = side ? a : b;
            int gamma;
            double eps;
            int x = match_layernorm(I, p, q, &gamma, &eps);
            if (x >= 0)
                return layernorm_stmt(I, n, out, x, gamma, q, eps);
            /* MatMul(x, W) + b -> Linear */
            int mm = producer_of(I, p, "MatMul");
            if (mm >= 0 && is_const(I, q) && V(q)->kind == VK_FLOAT && V(q)->c->rank == 1) {
                const Onnx__NodeProto *M = I->g->node[mm];
                int x2 = imp_in(I, M, 0), w = imp_in(I, M, 1);
                if (!is_const(I, x2) && is_const(I, w) && V(w)->c->rank == 2 && V(w)->kind == VK_FLOAT &&
                    V(w)->c->shape[1] == V(q)->c->shape[0]) {
                    dpc_tensor *W = imp_transposed(I, V(w)->c);
                    if (!W)
                        return DPC_ENOMEM;
                    return linear_stmt(I, n, out, x2, W, w, q);
                }
            }
        }
    }
    int r;
    sdim d[DPC_MAX_RANK];
    dpc_status s = imp_broadcast(I, V(a), V(b), &r, d);
    if (s != DPC_OK)
        return s;
    const char *sym = binop_text(op);
    bool cmp = cmp_op(op);
    int kind = cmp ? VK_BOOL : (V(a)->kind == VK_FLOAT || V(b)->kind == VK_FLOAT) ? VK_FLOAT : VK_INT;
    if ((!strcmp(op, "And") || !strcmp(op, "Or")) && (V(a)->kind != VK_BOOL || V(b)->kind != VK_BOOL))
        return imp_err(I, "on non-bool tensors");
    int ua, ub;
    const char *ea = ref(I, a, &ua), *eb = ea ? ref(I, b, &ub) : NULL;
    if (!ea || !eb)
        return I->e->code;
    const char *ex;
    if (!strcmp(op, "Max") || !strcmp(op, "Min"))
        ex = imp_printf(I, "where(%s %s %s, %s, %s)", ea, op[1] == 'a' ? ">=" : "<=", eb, ea, eb);
    else
        ex = imp_printf(I, "%s %s %s", ea, sym, eb);
    if (!strcmp(op, "Div") && kind == VK_INT)
        return imp_err(I, "integer division of computed tensors is not supported");
    /* parenthesise: each operand is a name, a literal or a call */
    return add_stmt(I, out, NULL, ex, kind, r, d, ua, ub, -1);
}

static dpc_status op_where(imp *I, const Onnx__NodeProto *n) {
    int c = imp_in(I, n, 0), a = imp_in(I, n, 1), b = imp_in(I, n, 2), out = imp_out(I, n, 0);
    int r1, r;
    sdim d1[DPC_MAX_RANK], d[DPC_MAX_RANK];
    dpc_status s = imp_broadcast(I, V(c), V(a), &r1, d1);
    if (s != DPC_OK)
        return s;
    ival T = {.shaped = true, .rank = r1};
    memcpy(T.d, d1, sizeof d1);
    if ((s = imp_broadcast(I, &T, V(b), &r, d)) != DPC_OK)
        return s;
    if (is_const(I, c) && is_const(I, a) && is_const(I, b)) {
        int64_t shape[DPC_MAX_RANK];
        for (int i = 0; i < r; i++)
            shape[i] = d[i].v;
        ival *A = V(a), *B = V(b), *C = V(c);
        if (A->c->dtype != B->c->dtype)
            return imp_err(I, "branches of different types");
        dpc_tensor *t = imp_tensor(I, A->c->dtype, r, shape);
        if (!t)
            return DPC_ENOMEM;
        int64_t total = dpc_tensor_numel(t);
        bool sym = A->csym || B->csym;
        int *cs = sym ? dpc_calloc((size_t)(total ? total : 1), sizeof *cs) : NULL;
        if (sym && !cs)
            return imp_oom(I);
        size_t es = dpc_dtype_size(t->dtype);
        for (int64_t o = 0; o < total; o++) {
            int64_t ic = bsrc(o, shape, r, C->c->shape, C->c->rank);
            const ival *S = I64(C)[ic] ? A : B;
            if (C->csym && C->csym[ic]) {
                dpc_free(cs);
                return imp_err(I, "a condition on a run-time dim");
            }
            int64_t is = bsrc(o, shape, r, S->c->shape, S->c->rank);
            memcpy((char *)t->data + (size_t)o * es, (char *)S->c->data + (size_t)is * es, es);
            if (cs)
                cs[o] = S->csym ? S->csym[is] : 0;
        }
        return set_const(I, out, t, A->kind, cs);
    }
    int uc, ua, ub;
    const char *ec = ref(I, c, &uc), *ea = ec ? ref(I, a, &ua) : NULL, *eb = ea ? ref(I, b, &ub) : NULL;
    if (!eb)
        return I->e->code;
    if (V(c)->kind != VK_BOOL)
        return imp_err(I, "a condition that is not bool");
    int kind = V(a)->kind == VK_FLOAT || V(b)->kind == VK_FLOAT ? VK_FLOAT : V(a)->kind;
    return add_stmt(I, out, NULL, imp_printf(I, "where(%s, %s, %s)", ec, ea, eb), kind, r, d, uc, ua, ub);
}

static dpc_status op_expand(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    sdim want[DPC_MAX_RANK], d[DPC_MAX_RANK];
    int r;
    dpc_status s = const_dims(I, imp_in(I, n, 1), want, &r, DPC_MAX_RANK, "the shape");
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
            int64_t is = bsrc(o, shape, rr, X->c->shape, X->c->rank);
            memcpy((char *)t->data + (size_t)o * es, (char *)X->c->data + (size_t)is * es, es);
            if (cs)
                cs[o] = X->csym[is];
        }
        return set_const(I, out, t, X->kind, cs);
    }
    int u;
    const char *e = ref(I, x, &u);
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "expand(%s", e ? e : "");
    for (int i = 0; i < rr; i++)
        dpc_buf_printf(&b, ", %s", imp_dim(I, d[i]));
    dpc_buf_puts(&b, ")");
    char *t = dpc_buf_take(&b);
    const char *ex = t && e ? imp_printf(I, "%s", t) : NULL;
    dpc_free(t);
    return add_stmt(I, out, NULL, ex, V(x)->kind, rr, d, u, -1, -1);
}

/* --------------------------------------------------------- modules */

static dpc_status pads2(imp *I, const Onnx__NodeProto *n, int64_t *ph, int64_t *pw) {
    const char *ap = imp_attr_s(I, n, "auto_pad", "NOTSET");
    if (!ap)
        return I->e->code;
    if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0) {
        dpc_buf b;
        dpc_buf_init(&b);
        emit_comment_text(&b, ap);
        dpc_status s = imp_err(I, "attribute auto_pad=%s is not supported", b.data ? b.data : "?");
        dpc_buf_free(&b);
        return s;
    }
    const int64_t *p;
    int np = imp_attr_ints(I, n, "pads", &p);
    *ph = *pw = 0;
    if (np < 0 || strcmp(ap, "VALID") == 0)
        return DPC_OK;
    if (np != 4)
        return imp_err(I, "pads has %d values (4 expected for 2-D)", np);
    if (p[0] != p[2] || p[1] != p[3])
        return imp_err(I, "asymmetric pads (%lld, %lld, %lld, %lld) are not supported", (long long)p[0],
                       (long long)p[1], (long long)p[2], (long long)p[3]);
    if (p[0] < 0 || p[1] < 0 || p[0] > 1 << 20 || p[1] > 1 << 20)
        return imp_err(I, "pads out of range");
    *ph = p[0], *pw = p[1];
    return DPC_OK;
}

static dpc_status pair_attr(imp *I, const Onnx__NodeProto *n, const char *name, int64_t dflt, int64_t *h, int64_t *w) {
    const int64_t *p;
    int k = imp_attr_ints(I, n, name, &p);
    *h = *w = dflt;
    if (k < 0)
        return DPC_OK;
    if (k != 2)
        return imp_err(I, "%s has %d values (2 expected for 2-D)", name, k);
    if (p[0] < 1 || p[1] < 1 || p[0] > 1 << 20 || p[1] > 1 << 20)
        return imp_err(I, "%s out of range", name);
    *h = p[0], *w = p[1];
    return DPC_OK;
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t dil, bool ceil_mode) {
    int64_t eff = dil * (k - 1) + 1, num = in + 2 * p - eff;
    if (num < 0)
        return -1;
    int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p)
        o--;
    return o;
}

static dpc_status op_conv(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), w = imp_in(I, n, 1), b, out = imp_out(I, n, 0);
    if (!imp_opt(I, n, 2, &b))
        b = -1; /* no bias */
    ival *X = V(x);
    if (!is_const(I, w) || (b >= 0 && !is_const(I, b)))
        return imp_err(I, "weights that are not initializers are not supported");
    dpc_tensor *W = V(w)->c;
    if (X->rank != 4 || W->rank != 4)
        return imp_err(I, "only 2-D convolutions (rank-4 input and weight) are supported, got rank %d", X->rank);
    if (X->c)
        return imp_err(I, "a convolution of a constant");
    int64_t kh, kw, sh, sw, dh, dw, ph, pw, grp = imp_attr_i(I, n, "group", 1);
    dpc_status s;
    if ((s = pair_attr(I, n, "strides", 1, &sh, &sw)) || (s = pair_attr(I, n, "dilations", 1, &dh, &dw)) ||
        (s = pair_attr(I, n, "kernel_shape", 0, &kh, &kw)) || (s = pads2(I, n, &ph, &pw)))
        return s;
    if (kh && (kh != W->shape[2] || kw != W->shape[3]))
        return imp_err(I, "kernel_shape differs from the weight's");
    kh = W->shape[2], kw = W->shape[3];
    int64_t cin = X->d[1].v, cout = W->shape[0];
    if (X->d[1].s || X->d[2].s || X->d[3].s)
        return imp_err(I, "channels and spatial dims must be fixed (give --dim NAME=SIZE)");
    if (grp < 1 || cin % grp || cout % grp || W->shape[1] * grp != cin)
        return imp_err(I, "group %lld does not fit %lld input channels and a weight of %lld", (long long)grp,
                       (long long)cin, (long long)W->shape[1]);
    if (b >= 0 && (V(b)->c->rank != 1 || V(b)->c->shape[0] != cout))
        return imp_err(I, "a bias of the wrong shape");
    int64_t ho = out_size(X->d[2].v, kh, sh, ph, dh, false), wo = out_size(X->d[3].v, kw, sw, pw, dw, false);
    if (ho < 1 || wo < 1)
        return imp_err(I, "the kernel is larger than the padded input");
    const char *mem = member_name(I, n, w, "conv");
    if (!mem)
        return DPC_ENOMEM;
    dpc_buf db;
    dpc_buf_init(&db);
    dpc_buf_printf(&db, "%s = Conv2d(%lld, %lld, kernel_size=(%lld, %lld), stride=(%lld, %lld)", mem, (long long)cin,
                   (long long)cout, (long long)kh, (long long)kw, (long long)sh, (long long)sw);
    if (ph || pw)
        dpc_buf_printf(&db, ", padding=(%lld, %lld)", (long long)ph, (long long)pw);
    if (dh != 1 || dw != 1)
        dpc_buf_printf(&db, ", dilation=(%lld, %lld)", (long long)dh, (long long)dw);
    if (grp != 1)
        dpc_buf_printf(&db, ", groups=%lld", (long long)grp);
    if (b < 0)
        dpc_buf_puts(&db, ", bias=False");
    dpc_buf_puts(&db, ")");
    char *dt = dpc_buf_take(&db);
    char *decl = dt ? member_line(I, dt, w) : NULL;
    dpc_free(dt);
    int u;
    const char *e = ref(I, x, &u);
    if (!decl || !e)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    sdim d[4] = {X->d[0], {cout, 0}, {ho, 0}, {wo, 0}};
    if ((s = add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, 4, d, u, -1, -1)) != DPC_OK)
        return s;
    if ((s = imp_weight(I, mem, "weight", W)) != DPC_OK)
        return s;
    return b >= 0 ? imp_weight(I, mem, "bias", V(b)->c) : DPC_OK;
}

static dpc_status op_batchnorm(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    int p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = imp_in(I, n, (size_t)i + 1);
        if (!is_const(I, p[i]) || V(p[i])->kind != VK_FLOAT || V(p[i])->c->rank != 1)
            return imp_err(I, "scale, bias, mean and var must be 1-D float initializers");
    }
    if (imp_attr_i(I, n, "training_mode", 0) != 0)
        return imp_err(I, "training_mode=1 is not supported");
    for (size_t k = 1; k < n->n_output; k++) {
        int o;
        if (imp_opt_out(I, n, k, &o))
            return imp_err(I, "the running statistics outputs (training) are not supported");
    }
    ival *X = V(x);
    if (X->rank != 4 && X->rank != 3 && X->rank != 2)
        return imp_err(I, "an input of rank %d", X->rank);
    int64_t C = X->d[1].v;
    if (X->d[1].s)
        return imp_err(I, "a run-time channel dim");
    for (int i = 0; i < 4; i++)
        if (V(p[i])->c->shape[0] != C)
            return imp_err(I, "parameters of %lld entries for %lld channels", (long long)V(p[i])->c->shape[0],
                           (long long)C);
    double eps = imp_attr_f(I, n, "epsilon", 1e-5);
    const char *es = imp_f32(I, eps);
    const char *mem = member_name(I, n, p[0], "bn");
    int u;
    const char *e = ref(I, x, &u);
    if (!mem || !e)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    char *decl = member_line(I, imp_printf(I, "%s = BatchNorm%dd(%lld, eps=%s)", mem, X->rank == 4 ? 2 : 1,
                                           (long long)C, es), p[0]);
    dpc_status s = add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, X->rank, X->d, u, -1, -1);
    static const char *keys[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4 && s == DPC_OK; i++)
        s = imp_weight(I, mem, keys[i], V(p[i])->c);
    return s;
}

static dpc_status op_pool(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    if (X->rank != 4 || X->c)
        return imp_err(I, "only 2-D pooling of a computed rank-4 tensor is supported");
    if (X->d[1].s || X->d[2].s || X->d[3].s)
        return imp_err(I, "channels and spatial dims must be fixed");
    bool mx = n->op_type[0] == 'M';
    int ix;
    if (imp_opt_out(I, n, 1, &ix))
        return imp_err(I, "the Indices output is not supported");
    int64_t kh, kw, sh, sw, dh = 1, dw = 1, ph, pw;
    dpc_status s;
    if ((s = pair_attr(I, n, "kernel_shape", 0, &kh, &kw)) || (s = pair_attr(I, n, "strides", 1, &sh, &sw)) ||
        (s = pads2(I, n, &ph, &pw)) || (s = pair_attr(I, n, "dilations", 1, &dh, &dw)))
        return s;
    if (!mx && (dh != 1 || dw != 1)) /* (AveragePool's from opset 19) */
        return imp_err(I, "a dilated AveragePool is not supported (PyTorch's AvgPool2d has no dilation)");
    if (!kh)
        return imp_err(I, "kernel_shape is required");
    if (mx && imp_attr_i(I, n, "storage_order", 0) != 0)
        return imp_err(I, "storage_order=1 is not supported");
    bool ceil_mode = imp_attr_i(I, n, "ceil_mode", 0) != 0;
    if (2 * ph > kh || 2 * pw > kw)
        return imp_err(I, "padding larger than half the kernel (PyTorch's pooling refuses it)");
    int64_t ho = out_size(X->d[2].v, kh, sh, ph, dh, ceil_mode), wo = out_size(X->d[3].v, kw, sw, pw, dw, ceil_mode);
    if (ho < 1 || wo < 1)
        return imp_err(I, "the window is larger than the padded input");
    const char *mem = member_name(I, n, -1, mx ? "maxpool" : "avgpool");
    if (!mem)
        return DPC_ENOMEM;
    const char *decl;
    if (mx)
        decl = imp_printf(I, "%s = MaxPool2d(kernel_size=(%lld, %lld), stride=(%lld, %lld), padding=(%lld, %lld), "
                             "dilation=(%lld, %lld), ceil_mode=%s)", mem, (long long)kh, (long long)kw, (long long)sh,
                          (long long)sw, (long long)ph, (long long)pw, (long long)dh, (long long)dw,
                          ceil_mode ? "True" : "False");
    else
        decl = imp_printf(I, "%s = AvgPool2d(kernel_size=(%lld, %lld), stride=(%lld, %lld), padding=(%lld, %lld), "
                             "ceil_mode=%s, count_include_pad=%s)", mem, (long long)kh, (long long)kw, (long long)sh,
                          (long long)sw, (long long)ph, (long long)pw, ceil_mode ? "True" : "False",
                          imp_attr_i(I, n, "count_include_pad", 0) ? "True" : "False");
    int u;
    const char *e = ref(I, x, &u);
    if (!decl || !e)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    sdim d[4] = {X->d[0], X->d[1], {ho, 0}, {wo, 0}};
    return add_stmt(I, out, decl, imp_printf(I, "%s(%s)", mem, e), VK_FLOAT, 4, d, u, -1, -1);
}

static dpc_status op_global_pool(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    if (X->rank != 4 || X->c)
        return imp_err(I, "only a computed rank-4 input is supported");
    int u;
    const char *e = ref(I, x, &u), *ex;
    if (!e)
        return I->e->code;
    if (n->op_type[6] == 'A')
        ex = imp_printf(I, "adaptive_avg_pool2d(%s, 1)", e);
    else
        ex = imp_printf(I, "amax(amax(%s, 3, keepdim=True), 2, keepdim=True)", e);
    sdim d[4] = {X->d[0], X->d[1], {1, 0}, {1, 0}};
    return add_stmt(I, out, NULL, ex, VK_FLOAT, 4, d, u, -1, -1);
}

static dpc_status op_gemm(imp *I, const Onnx__NodeProto *n) {
    int a = imp_in(I, n, 0), b = imp_in(I, n, 1), c, out = imp_out(I, n, 0);
    if (!imp_opt(I, n, 2, &c))
        c = -1; /* no C: a Linear without bias */
    if (imp_attr_f(I, n, "alpha", 1) != 1 || imp_attr_f(I, n, "beta", 1) != 1)
        return imp_err(I, "alpha or beta other than 1 is not supported");
    if (imp_attr_i(I, n, "transA", 0))
        return imp_err(I, "transA=1 is not supported");
    if (!is_const(I, b) || V(b)->c->rank != 2 || V(b)->kind != VK_FLOAT || (c >= 0 && !is_const(I, c)))
        return imp_err(I, "B (and C) must be float initializers");
    if (V(a)->rank != 2 || V(a)->c)
        return imp_err(I, "A must be a computed 2-D tensor");
    if (V(a)->merged >= 0 && V(a)->d[1].v != (imp_attr_i(I, n, "transB", 0) ? V(b)->c->shape[1] : V(b)->c->shape[0]))
        return imp_err(I, "inner dims differ");
    dpc_tensor *W = imp_attr_i(I, n, "transB", 0) ? V(b)->c : imp_transposed(I, V(b)->c);
    if (!W)
        return DPC_ENOMEM;
    int bias = -1;
    if (c >= 0) {
        const dpc_tensor *C = V(c)->c;
        int64_t k = dpc_tensor_numel(C);
        if (k != W->shape[0] || (C->rank == 2 && C->shape[0] != 1) || C->rank > 2)
            return imp_err(I, "C must be a vector of the output size");
        if (C->rank != 1) {
            int64_t sh = k;
            dpc_tensor *t = copy_tensor(I, C, 1, &sh);
            if (!t)
                return DPC_ENOMEM;
            int nv = imp_new_value(I, imp_printf(I, "%s (as a vector)", V(c)->name));
            if (nv < 0)
                return I->e->code;
            V(nv)->c = t, V(nv)->kind = VK_FLOAT;
            bias = nv;
        } else
            bias = c;
    }
    return linear_stmt(I, n, out, a, W, b, bias);
}

static dpc_status op_matmul(imp *I, const Onnx__NodeProto *n) {
    int a = imp_in(I, n, 0), b = imp_in(I, n, 1), out = imp_out(I, n, 0);
    if (is_const(I, b) && !is_const(I, a) && V(b)->c->rank == 2 && V(b)->kind == VK_FLOAT) {
        /* read only by an Add of a bias: that Add makes the Linear (op_binary) */
        int first;
        if (out >= 0 && imp_uses(I, n->output[0], &first) == 1 && first >= 0 &&
            !strcmp(I->g->node[first]->op_type, "Add") && I->g->node[first]->n_input == 2) {
            const Onnx__NodeProto *A = I->g->node[first];
            const char *other = strcmp(A->input[0], n->output[0]) == 0 ? A->input[1] : A->input[0];
            int bv = imp_find(I, other);
            if (bv >= 0 && is_const(I, bv) && V(bv)->kind == VK_FLOAT && V(bv)->c->rank == 1 &&
                V(bv)->c->shape[0] == V(b)->c->shape[1] && V(a)->merged < 0 && V(a)->shaped && V(a)->rank >= 2) {
                V(out)->deferred = true;
                V(out)->kind = VK_FLOAT;
                sdim d[DPC_MAX_RANK];
                memcpy(d, V(a)->d, sizeof d);
                d[V(a)->rank - 1] = (sdim){V(b)->c->shape[1], 0};
                return imp_set_shape(I, out, V(a)->rank, d);
            }
        }
        dpc_tensor *W = imp_transposed(I, V(b)->c);
        if (!W)
            return DPC_ENOMEM;
        return linear_stmt(I, n, out, a, W, b, -1);
    }
    ival *A = V(a), *B = V(b);
    if (A->rank < 2 || B->rank < 2)
        return imp_err(I, "1-D operands are not supported");
    if (A->d[A->rank - 1].v != B->d[B->rank - 2].v || A->d[A->rank - 1].s != B->d[B->rank - 2].s)
        return imp_err(I, "inner dims differ");
    ival As = *A, Bs = *B;
    As.rank -= 2, Bs.rank -= 2;
    int r;
    sdim d[DPC_MAX_RANK];
    dpc_status s = imp_broadcast(I, &As, &Bs, &r, d);
    if (s != DPC_OK)
        return s;
    d[r] = A->d[A->rank - 2], d[r + 1] = B->d[B->rank - 1];
    int ua, ub;
    const char *ea = ref(I, a, &ua), *eb = ea ? ref(I, b, &ub) : NULL;
    if (!eb)
        return I->e->code;
    return add_stmt(I, out, NULL, imp_printf(I, "%s @ %s", ea, eb), VK_FLOAT, r + 2, d, ua, ub, -1);
}

static dpc_status op_layernorm(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), g = imp_in(I, n, 1), b, out = imp_out(I, n, 0), o;
    if (!imp_opt(I, n, 2, &b))
        b = -1; /* no bias: layernorm_stmt's bias=False */
    ival *X = V(x);
    int axis = 0;
    dpc_status s = axis_norm(I, imp_attr_i(I, n, "axis", -1), X->rank, &axis);
    if (s != DPC_OK)
        return s;
    if (axis != X->rank - 1)
        return imp_err(I, "normalising over more than the last axis is not supported");
    if (imp_opt_out(I, n, 1, &o) || imp_opt_out(I, n, 2, &o))
        return imp_err(I, "the Mean and InvStdDev outputs are not supported");
    if (imp_attr_i(I, n, "stash_type", 1) != 1)
        return imp_err(I, "stash_type other than float is not supported");
    int64_t D = X->d[axis].v;
    if (!is_const(I, g) || V(g)->c->rank != 1 || V(g)->c->shape[0] != D || (b >= 0 && (!is_const(I, b) ||
        V(b)->c->rank != 1 || V(b)->c->shape[0] != D)))
        return imp_err(I, "scale and bias must be 1-D initializers of the last dim's size");
    return layernorm_stmt(I, n, out, x, g, b, imp_attr_f(I, n, "epsilon", 1e-5));
}

/* A reduction's axes into ax (*na of them; -1 for none given): the
 * attribute `axes`, or from ReduceSum's opset 13 and every other Reduce*'s
 * opset 18 on the constant input 1. */
dpc_status imp_reduce_axes(imp *I, const Onnx__NodeProto *n, int64_t *ax, int *na) {
    int from = !strcmp(n->op_type, "ReduceSum") ? 13 : 18; /* the opset axes became an input */
    if (I->opset >= from) {
        *na = -1;
        if (imp_attr(n, "axes"))
            return imp_err(I, "axes is an input from opset %d", from);
        int av;
        return imp_opt(I, n, 1, &av) ? const_ints(I, av, ax, na, DPC_MAX_RANK, "axes") : DPC_OK;
    }
    const int64_t *a;
    *na = imp_attr_ints(I, n, "axes", &a);
    if (*na > DPC_MAX_RANK)
        return imp_err(I, "too many axes");
    if (*na > 0)
        memcpy(ax, a, sizeof *ax * (size_t)*na);
    return DPC_OK;
}

static dpc_status op_reduce(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    int64_t ax[DPC_MAX_RANK];
    int na;
    dpc_status s = imp_reduce_axes(I, n, ax, &na);
    if (s != DPC_OK)
        return s;
    if (na <= 0) {
        if (imp_attr_i(I, n, "noop_with_empty_axes", 0))
            return alias(I, out, x);
        return imp_err(I, "a reduction over every dim (the batch too) is not supported");
    }
    bool keep = imp_attr_i(I, n, "keepdims", 1) != 0, red[DPC_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int a = 0;
        if ((s = axis_norm(I, ax[i], X->rank, &a)) != DPC_OK)
            return s;
        if (a == 0)
            return imp_err(I, "a reduction over the batch dim is not supported");
        red[a] = true;
    }
    if (X->c)
        return imp_err(I, "a reduction of a constant is not supported");
    const char *fn = !strcmp(n->op_type, "ReduceMean") ? "mean" : !strcmp(n->op_type, "ReduceSum") ? "sum" : "amax";
    int u;
    const char *e = ref(I, x, &u);
    sdim d[DPC_MAX_RANK];
    int r = 0;
    e = imp_reduce_text(I, fn, e, X, red, keep, d, &r);
    return add_stmt(I, out, NULL, e, VK_FLOAT, r, d, u, -1, -1);
}

const char *imp_reduce_text(imp *I, const char *fn, const char *e, const ival *X, const bool *red, bool keep,
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
        dpc_status s2 = const_ints(I, sv, sp, &nsp, DPC_MAX_RANK, "steps");
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
        if ((s = const_ints(I, av, ax, &na, DPC_MAX_RANK, "axes")) != DPC_OK)
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
        if ((s = axis_norm(I, ax[i], X->rank, &a)) != DPC_OK)
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
    const char *sn = I->syms[sym];
    if (!X->c) {
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
            return alias(I, out, x);
        int u;
        const char *e = ref(I, x, &u);
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
        return add_stmt(I, out, NULL, ex, X->kind, X->rank, d, u, -1, -1);
    }
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
    return add_stmt(I, out, NULL, ex, X->kind, X->rank, d, -1, -1, -1);
}

static dpc_status op_slice(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0), out = imp_out(I, n, 0);
    ival *X = V(x);
    int64_t st[DPC_MAX_RANK], en[DPC_MAX_RANK], ax[DPC_MAX_RANK], sp[DPC_MAX_RANK];
    int ns, ne, na, nsp;
    dpc_status s;
    if (I->opset < 10)
        return imp_err(I, "Slice before opset 10 is not supported");
    sdim sst[DPC_MAX_RANK], sen[DPC_MAX_RANK];
    if ((s = const_dims(I, imp_in(I, n, 1), sst, &ns, DPC_MAX_RANK, "starts")) ||
        (s = const_dims(I, imp_in(I, n, 2), sen, &ne, DPC_MAX_RANK, "ends")))
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
        if ((s = const_ints(I, av, ax, &na, DPC_MAX_RANK, "axes")))
            return s;
    } else
        for (na = 0; na < ns; na++)
            ax[na] = na;
    if (imp_opt(I, n, 4, &sv)) {
        if ((s = const_ints(I, sv, sp, &nsp, DPC_MAX_RANK, "steps")))
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
        if ((s = axis_norm(I, ax[i], X->rank, &a)) != DPC_OK)
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
    if (X->c) {
        int64_t shape[DPC_MAX_RANK], ist[DPC_MAX_RANK];
        for (int i = 0; i < X->rank; i++) {
            shape[i] = d[i].v;
            if (!touched[i])
                lo[i] = 0, step[i] = 1;
        }
        dpc_tensor *t = imp_tensor(I, X->c->dtype, X->rank, shape);
        if (!t)
            return DPC_ENOMEM;
        strides(X->c->shape, X->rank, ist);
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
        return set_const(I, out, t, X->kind, cs);
    }
    if (touched[0] && batched(X))
        return imp_err(I, "slicing the batch dim is not supported");
    int u;
    const char *e = ref(I, x, &u);
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
    return add_stmt(I, out, NULL, ex, X->kind, X->rank, d, u, -1, -1);
}

static dpc_status op_split(imp *I, const Onnx__NodeProto *n) {
    int x = imp_in(I, n, 0);
    ival *X = V(x);
    int axis = 0;
    dpc_status s = axis_norm(I, imp_attr_i(I, n, "axis", 0), X->rank, &axis);
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
        if (imp_opt(I, n, 1, &sp) && (s = const_ints(I, sp, sz, &ns, 64, "split")) != DPC_OK)
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
    const char *e = ref(I, x, &u);
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
        if ((s = add_stmt(I, o, NULL, ex, X->kind, X->rank, d, u, -1, -1)) != DPC_OK)
            return s;
        off += sz[i];
    }
    return DPC_OK;
}

/* ---------------------------------------------------------- the table */

#define ACT "alpha beta"
const imp_op imp_ops[] = {
    {"Abs", 6, 0, "1", "1", "", op_unary, NULL},
    {"Add", 7, 0, "2", "1", "", op_binary, "MatMul + Add -> Linear; the end of a decomposed LayerNorm -> LayerNorm"},
    {"And", 7, 0, "2", "1", "", op_binary, NULL},
    {"AveragePool", 7, 0, "1", "1", "kernel_shape strides pads auto_pad ceil_mode count_include_pad dilations", op_pool,
     "2-D, symmetric pads, not dilated"},
    {"BatchNormalization", 7, 0, "5", "1-5, 14: 1-3", "epsilon momentum training_mode spatial", op_batchnorm,
     "-> BatchNorm2d/1d"},
    {"Cast", 6, 0, "1", "1", "to saturate", op_cast, "float32, bool, int64; int32/16/8 and uint8 of floats, bools and constants"},
    {"Celu", 12, 0, "1", "1", "alpha", imp_op_act_extra, NULL},
    {"Clip", 6, 0, "1, 11: 1-3", "1", "min max", op_clip, "Clip(0, 6) -> relu6"},
    {"Concat", 4, 0, "1+", "1", "axis", op_concat, NULL},
    {"Constant", 9, 0, "0", "1", "value value_float value_floats value_int value_ints", op_constant, NULL},
    {"ConstantOfShape", 9, 0, "1", "1", "value", op_constant_of_shape, "constant shapes"},
    {"Conv", 1, 0, "2-3", "1", "kernel_shape strides pads dilations group auto_pad", op_conv, "2-D, symmetric pads -> Conv2d"},
    {"ConvTranspose", 1, 0, "2-3", "1", "auto_pad dilations group kernel_shape output_padding output_shape pads strides",
     imp_op_convtranspose, "2-D -> ConvTranspose2d; asymmetric pads cropped"},
    {"Div", 7, 0, "2", "1", "", op_binary, NULL},
    {"Dropout", 7, 0, "1, 12: 1-3", "1-2", "ratio seed", op_identity, "identity (inference)"},
    {"Elu", 6, 0, "1", "1", "alpha", imp_op_act_extra, NULL},
    {"Equal", 7, 0, "2", "1", "", op_binary, NULL},
    {"Erf", 9, 0, "1", "1", "", op_unary, "x * (1 + erf(x / sqrt 2)) * 0.5 -> gelu"},
    {"Exp", 6, 0, "1", "1", "", op_unary, NULL},
    {"Expand", 8, 0, "2", "1", "", op_expand, NULL},
    {"Flatten", 1, 0, "1", "1", "axis", op_flatten, "axis 1"},
    {"Gather", 1, 0, "2", "1", "axis", op_gather, "constants; Gather(table, ids) -> Embedding; a constant index"},
    {"Gelu", 20, 0, "1", "1", "approximate", imp_op_act_extra, "-> gelu (none, tanh)"},
    {"Gemm", 7, 0, "3, 11: 2-3", "1", "alpha beta transA transB", op_gemm, "-> Linear"},
    {"GlobalAveragePool", 1, 0, "1", "1", "", op_global_pool, NULL},
    {"GlobalMaxPool", 1, 0, "1", "1", "", op_global_pool, NULL},
    {"Greater", 7, 0, "2", "1", "", op_binary, NULL},
    {"GreaterOrEqual", 12, 0, "2", "1", "", op_binary, NULL},
    {"GroupNormalization", 18, 0, "3", "1", "epsilon num_groups stash_type", imp_op_groupnorm,
     "-> GroupNorm (18: a scale and bias a group, 21: a channel)"},
    {"HardSigmoid", 6, 0, "1", "1", ACT, op_act, NULL},
    {"HardSwish", 14, 0, "1", "1", "", op_unary, NULL},
    {"Identity", 1, 0, "1", "1", "", op_identity, NULL},
    {"InstanceNormalization", 6, 0, "3", "1", "epsilon", imp_op_instancenorm, "-> GroupNorm(C, C)"},
    {"LayerNormalization", 17, 0, "2-3", "1-3", "axis epsilon stash_type", op_layernorm, "-> LayerNorm"},
    {"LeakyRelu", 6, 0, "1", "1", "alpha", op_act, NULL},
    {"Less", 7, 0, "2", "1", "", op_binary, NULL},
    {"LessOrEqual", 12, 0, "2", "1", "", op_binary, NULL},
    {"Log", 6, 0, "1", "1", "", op_unary, NULL},
    {"LogSoftmax", 1, 0, "1", "1", "axis", op_act, NULL},
    {"MatMul", 1, 0, "2", "1", "", op_matmul, "a constant 2-D right operand -> Linear"},
    {"Max", 8, 0, "1+", "1", "", imp_op_variadic, "NaN propagates"},
    {"MaxPool", 8, 0, "1", "1-2", "kernel_shape strides pads dilations auto_pad ceil_mode storage_order", op_pool, "2-D"},
    {"Mean", 8, 0, "1+", "1", "", imp_op_variadic, NULL},
    {"Min", 8, 0, "1+", "1", "", imp_op_variadic, "NaN propagates"},
    {"Mish", 18, 0, "1", "1", "", imp_op_act_extra, NULL},
    {"Mul", 7, 0, "2", "1", "", op_binary, "x * sigmoid(x) -> silu; the end of an Erf GELU -> gelu"},
    {"Neg", 6, 0, "1", "1", "", op_unary, NULL},
    {"Not", 1, 0, "1", "1", "", op_unary, NULL},
    {"Or", 7, 0, "2", "1", "", op_binary, NULL},
    {"PRelu", 7, 0, "2", "1", "", imp_op_prelu, "slope broadcast to x"},
    {"Pad", 2, 0, "1, 11: 2-3, 18: 2-4", "1", "mode pads value", imp_op_pad, "constant, reflect, edge (not wrap); constant pads and axes, not of the batch dim"},
    {"Pow", 7, 0, "2", "1", "", op_binary, NULL},
    {"Range", 11, 0, "3", "1", "", op_range, "constant bounds"},
    {"Reciprocal", 6, 0, "1", "1", "", op_unary, NULL},
    {"ReduceL1", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"ReduceL2", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"ReduceLogSum", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"ReduceLogSumExp", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"ReduceMax", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", op_reduce, "not over the batch dim"},
    {"ReduceMean", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", op_reduce, "not over the batch dim"},
    {"ReduceMin", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"ReduceSum", 1, 0, "1, 13: 1-2", "1", "axes keepdims noop_with_empty_axes", op_reduce, "not over the batch dim"},
    {"ReduceSumSquare", 1, 0, "1, 18: 1-2", "1", "axes keepdims noop_with_empty_axes", imp_op_reduce_extra, "not over the batch dim"},
    {"Relu", 6, 0, "1", "1", "", op_unary, NULL},
    {"Reshape", 5, 0, "2", "1", "allowzero", op_reshape, "a constant shape (run-time dims folded); the batch dim kept"},
    {"Resize", 10, 0, "2, 11: 1-4", "1",
     "coordinate_transformation_mode cubic_coeff_a exclude_outside extrapolation_value mode nearest_mode antialias axes "
     "keep_aspect_ratio_policy",
     imp_op_resize, "rank 4, H and W: nearest where its pixels are dpc's, linear half_pixel/align_corners"},
    {"Selu", 6, 0, "1", "1", "alpha gamma", imp_op_act_extra, NULL},
    {"Shape", 1, 0, "1", "1", "start end", op_shape, "folded"},
    {"Shrink", 9, 0, "1", "1", "lambd bias", imp_op_act_extra, NULL},
    {"Sigmoid", 6, 0, "1", "1", "", op_unary, NULL},
    {"Sign", 9, 0, "1", "1", "", imp_op_act_extra, "float"},
    {"Sin", 7, 0, "1", "1", "", op_unary, NULL},
    {"Slice", 10, 0, "3-5", "1", "", op_slice, "constant bounds, steps >= 1, not on the batch dim"},
    {"Softmax", 1, 0, "1", "1", "axis", op_act, NULL},
    {"Softplus", 1, 0, "1", "1", "", imp_op_act_extra, NULL},
    {"Softsign", 1, 0, "1", "1", "", imp_op_act_extra, NULL},
    {"Split", 2, 0, "1, 13: 1-2", "1+", "axis split num_outputs", op_split, "not along the batch dim"},
    {"Sqrt", 6, 0, "1", "1", "", op_unary, NULL},
    {"Squeeze", 1, 0, "1, 13: 1-2", "1", "axes", op_squeeze, NULL},
    {"Sub", 7, 0, "2", "1", "", op_binary, NULL},
    {"Sum", 8, 0, "1+", "1", "", imp_op_variadic, NULL},
    {"Tanh", 6, 0, "1", "1", "", op_unary, NULL},
    {"ThresholdedRelu", 10, 0, "1", "1", "alpha", imp_op_act_extra, NULL},
    {"Tile", 6, 0, "2", "1", "", imp_op_tile, "constant repeats, not of the batch dim"},
    {"Transpose", 1, 0, "1", "1", "perm", op_transpose,
     "the batch dim stays first; nn.MultiheadAttention's export -> MultiheadAttention"},
    {"Unsqueeze", 1, 0, "1, 13: 2", "1", "axes", op_unsqueeze, NULL},
    {"Upsample", 7, 9, "1, 9: 2", "1", "mode scales", imp_op_resize, "as Resize (asymmetric)"},
    {"Where", 9, 0, "3", "1", "", op_where, NULL},
};
const int imp_nops = (int)(sizeof imp_ops / sizeof *imp_ops);
