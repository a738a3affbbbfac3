/* ctensor.c - the values of Parameter and buffer members of user modules:
 * the creation expressions that give them their value at construction
 * (zeros, ones, empty, randn, rand, full, arange, tensor, tril, triu and the
 * methods normal_, uniform_, zero_, fill_, view, reshape, expand,
 * unsqueeze, float, long, bool, clone, contiguous, with scalar
 * arithmetic), evaluated here at compile time into a ctensor (compiler.h).
 * One handler per creation function and per method, in the tables
 * CREATE_ROWS and METHOD_ROWS. The members themselves (declaration,
 * state_dict entries) are ctensor_member.c's. */
#include "irbuild.h"

#include <math.h>
#include <string.h>

/* Constants folded element by element (arange, tril, expand of data) stay
 * below this many elements; fills and random draws have no such limit. */
#define CT_MAX_DATA (INT64_C(1) << 23)

typedef struct cx {
    dpc_ctx *c;
    model *m;
    const inst *self;
} cx;

int64_t ctensor_numel(const ctensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

static const char *const CREATORS[] = {"zeros", "ones", "empty", "randn", "rand", "full", "arange", "tensor",
                                       "tril", "triu", "zeros_like", "ones_like"};
static const char *const METHODS[] = {"normal_", "uniform_", "zero_", "fill_", "view", "reshape", "expand",
                                      "unsqueeze", "float", "long", "bool", "clone", "contiguous", "detach"};

static bool in_list(const char *s, const char *const *l, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, l[i]) == 0)
            return true;
    return false;
}

/* Whether n computes a tensor (a creation call, a method on one, or
 * arithmetic with one), as opposed to a scalar argument. */
static bool is_tensor_expr(const node *n) {
    if (n->kind == ND_CALL && n->lhs->kind == ND_NAME)
        return in_list(n->lhs->str, CREATORS, (int)(sizeof CREATORS / sizeof *CREATORS)) ||
               in_list(n->lhs->str, METHODS, (int)(sizeof METHODS / sizeof *METHODS));
    if (n->kind == ND_BINOP)
        return is_tensor_expr(n->lhs) || is_tensor_expr(n->rhs);
    if (n->kind == ND_NEG)
        return is_tensor_expr(n->lhs);
    return false;
}

static bool scalar(cx *x, const node *n, double *out, bool *is_float) {
    val v;
    if (!sema_eval(x->c, x->m, x->self, n, &v))
        return false;
    if (v.kind == V_INT || v.kind == V_BOOL)
        *out = (double)v.i;
    else if (v.kind == V_FLOAT)
        *out = v.f;
    else {
        error_at(x->c, n->at, "expected a number here, got %s", val_kind_name(v.kind));
        return false;
    }
    if (is_float)
        *is_float = v.kind == V_FLOAT;
    return true;
}

static bool int_of(cx *x, const node *n, int64_t *out) {
    val v;
    if (!sema_eval(x->c, x->m, x->self, n, &v))
        return false;
    if (v.kind != V_INT) {
        error_at(x->c, n->at, "expected an int here, got %s", val_kind_name(v.kind));
        return false;
    }
    *out = v.i;
    return true;
}

/* Sizes written as separate ints (zeros(2, 3)) or one tuple or list
 * (zeros((2, 3))), from positional argument `from` on; -1 allowed when
 * neg_ok (view, expand). */
static bool sizes(cx *x, const node *call, int from, int npos, bool neg_ok, int *rank, int64_t *d) {
    int r = 0;
    for (int i = from; i < npos; i++) {
        const arg *a = call->args.items[i];
        val v;
        if (!sema_eval(x->c, x->m, x->self, a->value, &v))
            return false;
        if ((v.kind == V_TUPLE || v.kind == V_LIST) && npos - from == 1) {
            for (int k = 0; k < v.n; k++) {
                if (v.items[k].kind != V_INT) {
                    error_at(x->c, a->value->at, "a size must be an int, got %s", val_kind_name(v.items[k].kind));
                    return false;
                }
                if (r == 8) {
                    error_at(x->c, a->value->at, "a tensor has at most 8 dims");
                    return false;
                }
                d[r++] = v.items[k].i;
            }
            continue;
        }
        if (v.kind != V_INT) {
            error_at(x->c, a->value->at, "a size must be an int, got %s", val_kind_name(v.kind));
            return false;
        }
        if (r == 8) {
            error_at(x->c, a->value->at, "a tensor has at most 8 dims");
            return false;
        }
        d[r++] = v.i;
    }
    for (int i = 0; i < r; i++)
        if (d[i] < (neg_ok ? -1 : 0) || d[i] > DPC_MAX_DIM) {
            error_at(x->c, call->at, "size %lld is out of range", (long long)d[i]);
            return false;
        }
    *rank = r;
    return true;
}

static bool set_shape(cx *x, ctensor *t, int rank, const int64_t *d, loc at) {
    t->rank = rank;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        t->shape[i] = d[i];
        if (__builtin_mul_overflow(n, d[i] ? d[i] : 1, &n) || n > DPC_MAX_NUMEL) {
            error_at(x->c, at, "the tensor is too large: more than 2^40 elements");
            return false;
        }
    }
    return true;
}

/* The values of t, as data (a fill materialised). */
static bool to_data(cx *x, ctensor *t, loc at, const char *what) {
    if (t->kind == CT_DATA)
        return true;
    if (t->kind != CT_FILL) {
        error_at(x->c, at, "%s needs a constant tensor, not a random one (a value `dpc init` draws)", what);
        return false;
    }
    int64_t n = ctensor_numel(t);
    if (n > CT_MAX_DATA) {
        error_at(x->c, at, "%s folds %lld elements at compile time; the limit is %lld", what, (long long)n,
                 (long long)CT_MAX_DATA);
        return false;
    }
    double *d = arena_alloc(&x->c->arena, sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        d[i] = t->a;
    t->data = d;
    t->kind = CT_DATA;
    return true;
}

static bool parse_dtype(cx *x, const node *n, ctensor_dtype *out) {
    const char *s = n->kind == ND_NAME ? n->str : n->kind == ND_STR ? n->str : NULL;
    if (s && (strcmp(s, "float32") == 0 || strcmp(s, "float") == 0))
        *out = CTD_F32;
    else if (s && (strcmp(s, "int64") == 0 || strcmp(s, "long") == 0))
        *out = CTD_I64;
    else if (s && strcmp(s, "bool") == 0)
        *out = CTD_BOOL;
    else {
        error_at(x->c, n->at, "dtype must be float32, int64 or bool");
        return false;
    }
    return true;
}

static void round_to(ctensor *t) {
    if (t->dtype == CTD_F32 || t->kind != CT_DATA)
        return;
    int64_t n = ctensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        t->data[i] = t->dtype == CTD_BOOL ? (t->data[i] != 0) : trunc(t->data[i]);
}

static void cast(ctensor *t, ctensor_dtype dt) {
    t->dtype = dt;
    if (t->kind == CT_FILL)
        t->a = dt == CTD_BOOL ? (t->a != 0) : dt == CTD_I64 ? trunc(t->a) : t->a;
    round_to(t);
}

static bool eval_t(cx *x, const node *n, ctensor *out);

typedef struct call_args {
    int npos;
    const node *pos[8];
    const node *kw_dtype;
    const arg *kws[8];
    int nkw;
} call_args;

static bool split_args(cx *x, const node *n, call_args *a) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < n->args.len; i++) {
        const arg *g = n->args.items[i];
        if (!g->name) {
            if (a->nkw) {
                error_at(x->c, g->at, "a positional argument follows a keyword argument");
                return false;
            }
            if (a->npos == 8) {
                error_at(x->c, g->at, "too many arguments");
                return false;
            }
            a->pos[a->npos++] = g->value;
        } else if (strcmp(g->name, "dtype") == 0)
            a->kw_dtype = g->value;
        else if (strcmp(g->name, "requires_grad") == 0 || strcmp(g->name, "device") == 0)
            continue; /* no effect on the value */
        else {
            if (a->nkw == 8) {
                error_at(x->c, g->at, "too many arguments");
                return false;
            }
            a->kws[a->nkw++] = g;
        }
    }
    return true;
}

/* Keyword `name`, or positional argument i (>= 0), or NULL. */
static const node *kw(const call_args *a, const char *name, int i) {
    for (int k = 0; k < a->nkw; k++)
        if (strcmp(a->kws[k]->name, name) == 0)
            return a->kws[k]->value;
    return i >= 0 && i < a->npos ? a->pos[i] : NULL;
}

static bool no_other_kws(cx *x, const call_args *a, const char *fn, const char *k1, const char *k2) {
    for (int k = 0; k < a->nkw; k++) {
        const char *nm = a->kws[k]->name;
        if ((k1 && strcmp(nm, k1) == 0) || (k2 && strcmp(nm, k2) == 0))
            continue;
        error_at(x->c, a->kws[k]->at, "%s() has no argument '%s' here", fn, nm);
        return false;
    }
    return true;
}

/* zeros, ones, empty (dpc fills 0), randn, rand: (*size, dtype=). */
static bool create_fill(cx *x, const node *n, const char *fn, const call_args *a, bool dtype_given, ctensor *out) {
    int rank = 0;
    int64_t d[8];
    (void)dtype_given;
    if (!no_other_kws(x, a, fn, NULL, NULL) || !sizes(x, n, 0, a->npos, false, &rank, d) ||
        !set_shape(x, out, rank, d, n->at))
        return false;
    if (!strcmp(fn, "randn") || !strcmp(fn, "rand")) {
        if (out->dtype != CTD_F32) {
            error_at(x->c, n->at, "%s() makes float32 values", fn);
            return false;
        }
        out->kind = fn[4] == 'n' ? CT_NORMAL : CT_UNIFORM;
        out->a = 0;
        out->b = 1;
    } else {
        out->kind = CT_FILL;
        out->a = !strcmp(fn, "ones") ? 1 : 0; /* empty: PyTorch leaves it unset; dpc fills 0 */
    }
    return true;
}

/* full(size, fill_value): the dtype of the value unless given. */
static bool create_full(cx *x, const node *n, const char *fn, const call_args *a, bool dtype_given, ctensor *out) {
    int rank = 0;
    int64_t d[8];
    const node *size = kw(a, "size", 0), *fill = kw(a, "fill_value", 1);
    if (!size || !fill || a->npos > 2 || !no_other_kws(x, a, fn, "size", "fill_value")) {
        error_at(x->c, n->at, "full(size, fill_value) takes a size tuple and a value");
        return false;
    }
    val v;
    if (!sema_eval(x->c, x->m, x->self, size, &v))
        return false;
    if (v.kind != V_TUPLE && v.kind != V_LIST) {
        error_at(x->c, size->at, "full() takes its size as a tuple: full((2, 3), v)");
        return false;
    }
    arg one = {NULL, (node *)size, size->at};
    node fake = *n;
    fake.args = (vec){0};
    vec_push(&x->c->arena, &fake.args, &one);
    bool isf = false;
    if (!sizes(x, &fake, 0, 1, false, &rank, d) || !set_shape(x, out, rank, d, n->at) ||
        !scalar(x, fill, &out->a, &isf))
        return false;
    out->kind = CT_FILL;
    if (!dtype_given)
        out->dtype = isf ? CTD_F32 : CTD_I64;
    cast(out, out->dtype);
    return true;
}

/* arange(end), arange(start, end), arange(start, end, step): folded to data. */
static bool create_arange(cx *x, const node *n, const char *fn, const call_args *a, bool dtype_given, ctensor *out) {
    double v[3] = {0, 0, 1};
    bool anyf = false;
    if (a->npos < 1 || a->npos > 3 || !no_other_kws(x, a, fn, NULL, NULL)) {
        error_at(x->c, n->at, "arange takes (end), (start, end) or (start, end, step)");
        return false;
    }
    for (int i = 0; i < a->npos; i++) {
        bool f = false;
        if (!scalar(x, a->pos[i], &v[a->npos == 1 ? 1 : i], &f))
            return false;
        anyf |= f;
    }
    double start = v[0], end = v[1], step = v[2];
    if (step == 0 || (end - start) / step < 0) {
        error_at(x->c, n->at, "arange: the step must go from start towards end");
        return false;
    }
    double cnt = ceil((end - start) / step);
    if (cnt > (double)CT_MAX_DATA) {
        error_at(x->c, n->at, "arange folds %.0f elements at compile time; the limit is %lld", cnt,
                 (long long)CT_MAX_DATA);
        return false;
    }
    int64_t len = (int64_t)cnt;
    if (!set_shape(x, out, 1, &len, n->at))
        return false;
    out->kind = CT_DATA;
    out->data = arena_alloc(&x->c->arena, sizeof(double) * (size_t)(len ? len : 1));
    for (int64_t i = 0; i < len; i++)
        out->data[i] = start + (double)i * step;
    if (!dtype_given)
        out->dtype = anyf ? CTD_F32 : CTD_I64;
    round_to(out);
    return true;
}

/* tensor(number) or tensor([numbers]). */
static bool create_tensor(cx *x, const node *n, const char *fn, const call_args *a, bool dtype_given, ctensor *out) {
    if (a->npos != 1 || !no_other_kws(x, a, fn, NULL, NULL)) {
        error_at(x->c, n->at, "tensor() takes one value: a number or a list of numbers");
        return false;
    }
    val v;
    if (!sema_eval(x->c, x->m, x->self, a->pos[0], &v))
        return false;
    bool anyf = v.kind == V_FLOAT, anyb = v.kind == V_BOOL;
    if (v.kind == V_INT || v.kind == V_FLOAT || v.kind == V_BOOL) {
        out->rank = 0;
        out->kind = CT_FILL;
        out->a = v.kind == V_FLOAT ? v.f : (double)v.i;
    } else if (v.kind == V_LIST || v.kind == V_TUPLE) {
        int64_t len = v.n;
        set_shape(x, out, 1, &len, n->at);
        out->kind = CT_DATA;
        out->data = arena_alloc(&x->c->arena, sizeof(double) * (size_t)(len ? len : 1));
        anyb = len > 0;
        for (int i = 0; i < v.n; i++) {
            const val *e = &v.items[i];
            if (e->kind != V_INT && e->kind != V_FLOAT && e->kind != V_BOOL) {
                error_at(x->c, a->pos[0]->at, "tensor() takes numbers, got %s", val_kind_name(e->kind));
                return false;
            }
            anyf |= e->kind == V_FLOAT;
            anyb &= e->kind == V_BOOL;
            out->data[i] = e->kind == V_FLOAT ? e->f : (double)e->i;
        }
    } else {
        error_at(x->c, a->pos[0]->at, "tensor() takes a number or a list of numbers, got %s",
                 val_kind_name(v.kind));
        return false;
    }
    if (!dtype_given)
        out->dtype = anyf ? CTD_F32 : anyb ? CTD_BOOL : CTD_I64;
    cast(out, out->dtype);
    return true;
}

/* zeros_like(t), ones_like(t). */
static bool create_like(cx *x, const node *n, const char *fn, const call_args *a, bool dtype_given, ctensor *out) {
    if (a->npos != 1 || !eval_t(x, a->pos[0], out))
        return false;
    ctensor_dtype dt = dtype_given ? out->dtype : out->dtype;
    out->kind = CT_FILL;
    out->a = fn[0] == 'o';
    out->data = NULL;
    cast(out, dt);
    return true;
}

/* tril(input, diagonal=0), triu(...): folded to data. */
static bool create_tri(cx *x, const node *n, const char *fn, const call_args *a, bool dtype_given, ctensor *out) {
    const node *diag = kw(a, "diagonal", 1);
    if (a->npos < 1 || a->npos > 2 || !no_other_kws(x, a, fn, "diagonal", NULL)) {
        error_at(x->c, n->at, "%s(input, diagonal=0)", fn);
        return false;
    }
    int64_t k = 0;
    if ((diag && !int_of(x, diag, &k)) || !eval_t(x, a->pos[0], out))
        return false;
    if (out->rank < 2) {
        error_at(x->c, n->at, "%s needs a tensor of at least 2 dims", fn);
        return false;
    }
    if (!to_data(x, out, n->at, fn))
        return false;
    int64_t rows = out->shape[out->rank - 2], cols = out->shape[out->rank - 1], numel = ctensor_numel(out);
    for (int64_t i = 0; i < numel; i++) {
        int64_t c = i % cols, r = (i / cols) % rows;
        bool keep = fn[3] == 'l' ? c - r <= k : c - r >= k;
        if (!keep)
            out->data[i] = 0;
    }
    return true;
}

typedef bool (*create_fn)(cx *x, const node *n, const char *fn, const call_args *a, bool dtype_given, ctensor *out);

/* The creation functions (CREATORS), one handler each; tril and triu are the rest. */
static const struct {
    const char *name;
    create_fn fn;
} CREATE_ROWS[] = {
    {"zeros", create_fill}, {"ones", create_fill}, {"empty", create_fill}, {"randn", create_fill},
    {"rand", create_fill},  {"full", create_full}, {"arange", create_arange}, {"tensor", create_tensor},
    {"zeros_like", create_like}, {"ones_like", create_like},
};

static bool creation(cx *x, const node *n, const char *fn, ctensor *out) {
    call_args a;
    if (!split_args(x, n, &a))
        return false;
    memset(out, 0, sizeof *out);
    out->dtype = CTD_F32;
    bool dtype_given = a.kw_dtype != NULL;
    if (dtype_given && !parse_dtype(x, a.kw_dtype, &out->dtype))
        return false;
    for (size_t i = 0; i < sizeof CREATE_ROWS / sizeof *CREATE_ROWS; i++)
        if (!strcmp(fn, CREATE_ROWS[i].name))
            return CREATE_ROWS[i].fn(x, n, fn, &a, dtype_given, out);
    return create_tri(x, n, fn, &a, dtype_given, out);
}

/* t.normal_(mean=0, std=1), t.uniform_(a=0, b=1): a random draw. */
static bool method_fill_random(cx *x, const node *n, const char *fn, const call_args *a, ctensor *out) {
    bool nrm = fn[0] == 'n';
    const node *p0 = kw(a, nrm ? "mean" : "a", 1), *p1 = kw(a, nrm ? "std" : "b", 2);
    if (a->npos > 3 || !no_other_kws(x, a, fn, nrm ? "mean" : "a", nrm ? "std" : "b"))
        return false;
    double v0 = 0, v1 = 1;
    if ((p0 && !scalar(x, p0, &v0, NULL)) || (p1 && !scalar(x, p1, &v1, NULL)))
        return false;
    if (out->dtype != CTD_F32) {
        error_at(x->c, n->at, "%s fills float32 tensors", fn);
        return false;
    }
    if (nrm && v1 < 0) {
        error_at(x->c, n->at, "normal_ expects std >= 0.0, got %g", v1);
        return false;
    }
    out->kind = nrm ? CT_NORMAL : CT_UNIFORM;
    out->a = v0;
    out->b = v1;
    out->data = NULL;
    return true;
}

/* t.zero_(), t.fill_(value). */
static bool method_fill(cx *x, const node *n, const char *fn, const call_args *a, ctensor *out) {
    double v = 0;
    if (fn[0] == 'f' && (a->npos != 2 || !scalar(x, a->pos[1], &v, NULL)))
        return a->npos == 2 ? false : (error_at(x->c, n->at, "fill_(value) takes one value"), false);
    out->kind = CT_FILL;
    out->a = v;
    out->data = NULL;
    cast(out, out->dtype);
    return true;
}

/* t.float(), t.long(), t.bool(). */
static bool method_cast(cx *x, const node *n, const char *fn, const call_args *a, ctensor *out) {
    (void)x; (void)n; (void)a;
    cast(out, fn[0] == 'f' ? CTD_F32 : fn[0] == 'l' ? CTD_I64 : CTD_BOOL);
    return true;
}

/* t.unsqueeze(dim). */
static bool method_unsqueeze(cx *x, const node *n, const char *fn, const call_args *a, ctensor *out) {
    (void)fn;
    int64_t d;
    if (a->npos != 2 || !int_of(x, a->pos[1], &d))
        return a->npos == 2 ? false : (error_at(x->c, n->at, "unsqueeze(dim) takes one dim"), false);
    if (d < 0)
        d += out->rank + 1;
    if (d < 0 || d > out->rank || out->rank == 8) {
        error_at(x->c, a->pos[1]->at, "unsqueeze: dim out of range");
        return false;
    }
    for (int i = out->rank; i > d; i--)
        out->shape[i] = out->shape[i - 1];
    out->shape[d] = 1;
    out->rank++;
    return true;
}

/* t.view(*sizes), t.reshape(*sizes): one size may be -1. */
static bool method_view(cx *x, const node *n, const char *fn, const call_args *a, ctensor *out) {
    int rank;
    int64_t d[8];
    if (!sizes(x, n, 1, a->npos, true, &rank, d))
        return false;
    int64_t numel = ctensor_numel(out);
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < rank; i++) {
        if (d[i] == -1) {
            if (infer >= 0) {
                error_at(x->c, n->at, "%s: only one dim can be -1", fn);
                return false;
            }
            infer = i;
        } else
            known *= d[i];
    }
    if (infer >= 0 && known > 0 && numel % known == 0)
        d[infer] = numel / known;
    int64_t got = 1;
    for (int i = 0; i < rank; i++)
        got *= d[i];
    if (got != numel || (infer >= 0 && known == 0)) {
        error_at(x->c, n->at, "%s: shape is invalid for a tensor of %lld elements", fn, (long long)numel);
        return false;
    }
    return set_shape(x, out, rank, d, n->at);
}

/* t.expand(*sizes): a constant stays one, data is repeated (within CT_MAX_DATA). */
static bool method_expand(cx *x, const node *n, const char *fn, const call_args *a, ctensor *out) {
    (void)fn;
    int rank;
    int64_t d[8];
    if (!sizes(x, n, 1, a->npos, true, &rank, d))
        return false;
    if (rank < out->rank) {
        error_at(x->c, n->at, "expand: %d sizes for a tensor of %d dims", rank, out->rank);
        return false;
    }
    ctensor src = *out;
    int off = rank - src.rank;
    for (int i = 0; i < rank; i++) {
        int64_t have = i >= off ? src.shape[i - off] : 1;
        if (d[i] == -1) {
            if (i < off) {
                error_at(x->c, n->at, "expand: -1 is not allowed for a new leading dim");
                return false;
            }
            d[i] = have;
        } else if (have != d[i] && have != 1) {
            error_at(x->c, n->at, "expand: size %lld does not match %lld at dim %d", (long long)d[i],
                     (long long)have, i);
            return false;
        }
    }
    if (!set_shape(x, out, rank, d, n->at))
        return false;
    if (src.kind == CT_FILL)
        return true;
    if (src.kind != CT_DATA) {
        error_at(x->c, n->at, "expand of a random tensor would repeat its values; draw the full shape instead");
        return false;
    }
    int64_t total = ctensor_numel(out);
    if (total > CT_MAX_DATA) {
        error_at(x->c, n->at, "expand folds %lld elements at compile time; the limit is %lld", (long long)total,
                 (long long)CT_MAX_DATA);
        return false;
    }
    double *dd = arena_alloc(&x->c->arena, sizeof(double) * (size_t)(total ? total : 1));
    for (int64_t i = 0; i < total; i++) {
        int64_t rem = i, si = 0, stride = 1;
        for (int k = rank - 1; k >= 0; k--) {
            int64_t idx = rem % d[k];
            rem /= d[k];
            if (k >= off) {
                int64_t sd = src.shape[k - off];
                si += (sd == 1 ? 0 : idx) * stride;
                stride *= sd;
            }
        }
        dd[i] = src.data[si];
    }
    out->data = dd;
    return true;
}

typedef bool (*method_fn)(cx *x, const node *n, const char *fn, const call_args *a, ctensor *out);

/* The tensor methods (METHODS), one handler each; expand is the rest. */
static const struct {
    const char *name;
    method_fn fn;
} METHOD_ROWS[] = {
    {"normal_", method_fill_random}, {"uniform_", method_fill_random}, {"zero_", method_fill},
    {"fill_", method_fill},          {"float", method_cast},          {"long", method_cast},
    {"bool", method_cast},           {"unsqueeze", method_unsqueeze}, {"view", method_view},
    {"reshape", method_view},
};

static bool method(cx *x, const node *n, const char *fn, ctensor *out) {
    call_args a;
    if (!split_args(x, n, &a))
        return false;
    if (a.npos < 1) {
        error_at(x->c, n->at, "%s is a tensor method: write t.%s(...)", fn, fn);
        return false;
    }
    if (!eval_t(x, a.pos[0], out))
        return false;
    if (!strcmp(fn, "clone") || !strcmp(fn, "contiguous") || !strcmp(fn, "detach"))
        return true;
    for (size_t i = 0; i < sizeof METHOD_ROWS / sizeof *METHOD_ROWS; i++)
        if (!strcmp(fn, METHOD_ROWS[i].name))
            return METHOD_ROWS[i].fn(x, n, fn, &a, out);
    return method_expand(x, n, fn, &a, out);
}

static bool arith(cx *x, const node *n, ctensor *out) {
    int op = n->op;
    if (op != '*' && op != '/' && op != '+' && op != '-') {
        error_at(x->c, n->at, "a Parameter or buffer value takes only + - * / with a number");
        return false;
    }
    bool lt = is_tensor_expr(n->lhs), rt = is_tensor_expr(n->rhs);
    if (lt && rt) {
        error_at(x->c, n->at, "arithmetic between two tensors is not supported in a Parameter or buffer value");
        return false;
    }
    double k;
    bool kf = false;
    if (!eval_t(x, lt ? n->lhs : n->rhs, out) || !scalar(x, lt ? n->rhs : n->lhs, &k, &kf))
        return false;
    /* x op k, or k op x */
    bool rev = !lt;
    if ((op == '/' && !rev && k == 0) || (op == '/' && rev)) {
        if (rev) {
            error_at(x->c, n->at, "a number divided by a tensor is not supported in a Parameter or buffer value");
            return false;
        }
        error_at(x->c, n->at, "division by zero");
        return false;
    }
    if (op == '/' || kf)
        out->dtype = CTD_F32;
    else if (out->dtype == CTD_BOOL)
        out->dtype = CTD_I64;
    double mul = op == '*' ? k : op == '/' ? 1.0 / k : op == '-' && rev ? -1 : 1;
    double add = op == '+' ? k : op == '-' ? (rev ? k : -k) : 0;
    if (out->kind == CT_FILL)
        out->a = out->a * mul + add;
    else if (out->kind == CT_DATA) {
        int64_t nn = ctensor_numel(out);
        double *d = arena_alloc(&x->c->arena, sizeof(double) * (size_t)(nn ? nn : 1));
        for (int64_t i = 0; i < nn; i++)
            d[i] = op == '/' ? out->data[i] / k : out->data[i] * mul + add;
        out->data = d;
    } else if (out->kind == CT_NORMAL) {
        out->a = out->a * mul + add;
        out->b = out->b * fabs(mul);
    } else {
        double lo = out->a * mul + add, hi = out->b * mul + add;
        out->a = lo < hi ? lo : hi;
        out->b = lo < hi ? hi : lo;
    }
    round_to(out);
    return true;
}

static bool eval_t(cx *x, const node *n, ctensor *out) {
    if (n->kind == ND_CALL && n->lhs->kind == ND_NAME) {
        const char *fn = n->lhs->str;
        if (in_list(fn, CREATORS, (int)(sizeof CREATORS / sizeof *CREATORS)))
            return creation(x, n, fn, out);
        if (in_list(fn, METHODS, (int)(sizeof METHODS / sizeof *METHODS)))
            return method(x, n, fn, out);
    }
    if (n->kind == ND_BINOP)
        return arith(x, n, out);
    if (n->kind == ND_NEG) {
        node neg = {.kind = ND_BINOP, .at = n->at, .op = '*', .lhs = n->lhs};
        node m1 = {.kind = ND_INT, .at = n->at, .ival = -1};
        neg.rhs = &m1;
        return arith(x, &neg, out);
    }
    error_at(x->c, n->at,
             "a Parameter or buffer value is a tensor created at construction: zeros(...), ones(...), empty(...), "
             "randn(...), rand(...), full(...), arange(...), tensor(...), tril(...), triu(...), and their methods");
    return false;
}

bool ctensor_eval(dpc_ctx *c, model *m, const inst *self, const node *n, ctensor *out) {
    cx x = {c, m, self};
    memset(out, 0, sizeof *out);
    return eval_t(&x, n, out);
}

