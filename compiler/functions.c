/* functions.c - the forward functions (torch.* and F.*): their parameters,
 * binding and lowering. One list serves every pass: the op table's
 * one-to-one elementwise functions (IR_OPS rows with a function name), then
 * FUNCTIONS below. */
#include "irbuild.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Binds call arguments to a function signature "x,dim,keepdim=False". The
 * defaults are given as sv values by the caller; slot_at (if not NULL) gets
 * where each given value is. Returns false on error. */
static bool fbind(builder *b, const char *fn, const fargs *a, const char *const *pnames, int np, int nrequired,
                  sv *slots, bool *given, loc *slot_at, loc at) {
    int pos = 0;
    for (int i = 0; i < a->n; i++) {
        int slot = -1;
        if (!a->names[i])
            slot = pos < np ? pos++ : -2;
        else
            for (int k = 0; k < np; k++)
                if (strcmp(pnames[k], a->names[i]) == 0)
                    slot = k;
        if (slot == -2) {
            error_at(b->c, a->at[i], "%s() takes at most %d argument%s, got %d", fn, np, np == 1 ? "" : "s", a->n);
            return false;
        }
        if (slot < 0) {
            const char *near = nearest_name(a->names[i], pnames, np);
            error_at(b->c, a->kw_at[i], "%s() has no argument '%s'%s%s%s", fn, a->names[i],
                     near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
            return false;
        }
        if (given[slot]) {
            error_at(b->c, a->kw_at[i], "%s() got argument '%s' twice", fn, pnames[slot]);
            return false;
        }
        slots[slot] = a->v[i];
        given[slot] = true;
        if (slot_at)
            slot_at[slot] = a->at[i];
    }
    for (int k = 0; k < nrequired; k++)
        if (!given[k]) {
            error_at(b->c, at, "%s() missing required argument '%s'", fn, pnames[k]);
            return false;
        }
    return true;
}

static bool dims_list(builder *b, const sv *v, loc at, const char *what, int64_t *out, int *n) {
    for (int i = 0; (v->k == SV_TUPLE || v->k == SV_LIST) && i < v->n; i++)
        if (v->items[i].k == SV_BATCH) {
            error_at(b->c, at, "%s cannot contain the batch size '%s'", what, b->batch);
            return false;
        }
    if (v->k == SV_NUM || v->k == SV_BATCH) {
        *n = 1;
        return want_int(b, v, at, what, out);
    }
    if (v->k != SV_TUPLE && v->k != SV_LIST) {
        error_at(b->c, at, "%s must be an int or a list of ints, got %s", what, sv_kind_name(v));
        return false;
    }
    if (v->n > IR_MAX_RANK) {
        error_at(b->c, at, "%s: too many dimensions", what);
        return false;
    }
    *n = v->n;
    for (int i = 0; i < v->n; i++)
        if (!want_int(b, &v->items[i], at, what, &out[i]))
            return false;
    return true;
}

/* Whether x is computed from the batch size. A walk down the ids (operands
 * have smaller ids), not a recursion: a long `N + 1 + 1 ...` chain is deep. */
static bool uses_batch(builder *b, const ir_node *x) {
    bool *reach = arena_alloc(&b->c->arena, (size_t)x->id + 1);
    reach[x->id] = true;
    for (int id = x->id; id >= 0; id--) {
        const ir_node *n = b->g->nodes.items[id];
        if (!reach[id])
            continue;
        if (n->op == OP_BATCH)
            return true;
        for (int i = 0; i < n->nin; i++)
            reach[n->in[i]] = true;
    }
    return false;
}

static ir_node *fn_reshape(builder *b, ir_node *x, const fargs *a, int first, loc at) {
    /* reshape(x, 2, 3) or reshape(x, [2, 3]) or reshape(x, (2, 3)) */
    const sv *items = a->v + first;
    int n = a->n - first;
    if (n == 1 && (items[0].k == SV_TUPLE || items[0].k == SV_LIST)) {
        n = items[0].n;
        items = items[0].items;
    }
    if (n > IR_MAX_RANK || n < 0) {
        error_at(b->c, at, "reshape: too many dimensions");
        return NULL;
    }
    shape out = {.rank = n};
    int infer = -1;
    int64_t known = 1;
    bool known_sym = false;
    for (int i = 0; i < n; i++) {
        const sv *v = &items[i];
        if (v->k == SV_TENSOR && v->t->sh.rank == 0) {
            loc vat = items == a->v + first ? a->at[first + i] : at;
            if (uses_batch(b, v->t))
                error_at(b->c, vat,
                         "reshape: this size is computed from the batch size '%s', which is known only at run "
                         "time; write %s itself, or -1 for the size to infer",
                         b->batch, b->batch);
            else
                error_at(b->c, vat, "reshape sizes must be known when compiling");
            return NULL;
        }
        if (v->k == SV_BATCH) {
            out.d[i] = (dim){1, true};
            known_sym = true;
            continue;
        }
        int64_t d;
        if (!want_int(b, v, at, "a reshape size", &d))
            return NULL;
        if (d == -1) {
            if (infer >= 0) {
                error_at(b->c, at, "reshape: only one dimension can be inferred (-1)");
                return NULL;
            }
            infer = i;
            continue;
        }
        if (d < 0) {
            error_at(b->c, at, "reshape: invalid size %lld", (long long)d);
            return NULL;
        }
        out.d[i] = (dim){d, false};
        if (!dpc_mul_i64(known, d, &known)) {
            error_at(b->c, at, "reshape: size overflow");
            return NULL;
        }
    }
    bool tsym;
    int64_t total = shape_numel(&x->sh, &tsym);
    if (infer >= 0) {
        if (known == 0 || total % known != 0 || (known_sym && !tsym)) {
            error_at(b->c, at, "shape '%s' is invalid for input of shape %s", shp(b, &out), shp(b, &x->sh));
            return NULL;
        }
        out.d[infer] = (dim){total / known, tsym && !known_sym};
    } else if (total != known || tsym != known_sym) {
        error_at(b->c, at, "shape '%s' is invalid for input of shape %s", shp(b, &out), shp(b, &x->sh));
        return NULL;
    }
    if (!numel_ok(&out)) {
        error_at(b->c, at, "reshape: shape '%s' is too large: more than 2^40 elements", shp(b, &out));
        return NULL;
    }
    return reshape_to(b, x, &out, at, NULL);
}

/* A call of a forward function: its arguments bound to the function's
 * parameters (s[i] given when g[i], written at sat[i]). */
typedef struct fcall {
    builder *b;
    const char *fn;
    const fargs *a;
    loc at;
    sv s[8];
    bool g[8];
    loc sat[8];
} fcall;

/* The lowering of one function: the value, or NULL after a diagnostic. */
typedef ir_node *(*fn_lower)(fcall *c);
/* A function whose value is not one tensor (size(), split()): false after
 * a diagnostic. */
typedef bool (*fn_call)(fcall *c, sv *out);

/* One row per forward function that is not a one-to-one elementwise op
 * (those are rows of IR_OPS with a function name: see fn_unary). params
 * NULL: the lowering binds its arguments itself (variadic). */
typedef struct fndef {
    const char *name;
    const char *const *params;
    int np, nrequired;
    fn_lower lower;
    fn_call call; /* instead of lower */
} fndef;

static ir_node *fn_unary(fcall *c) {
    ir_node *x;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    return unary(c->b, ir_op_of_function(c->fn), x, c->at, NULL);
}

static ir_node *fn_gelu(fcall *c) {
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

static ir_node *fn_flatten(fcall *c) {
    builder *b = c->b;
    int64_t sd = 0, ed = -1;
    ir_node *x;
    if (c->s[0].k != SV_TENSOR && !want_tensor(b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    x = c->s[0].t;
    if ((c->g[1] && !want_int(b, &c->s[1], c->at, "start_dim", &sd)) ||
        (c->g[2] && !want_int(b, &c->s[2], c->at, "end_dim", &ed)))
        return NULL;
    return flatten(b, x, sd, ed, c->at, NULL);
}

static ir_node *fn_reshape_call(fcall *c) {
    const fargs *a = c->a;
    if (a->n < 2) {
        error_at(c->b->c, c->at, "%s() needs a tensor and a shape", c->fn);
        return NULL;
    }
    for (int i = 0; i < a->n; i++)
        if (a->names[i]) {
            error_at(c->b->c, a->at[i], "%s() takes no keyword arguments", c->fn);
            return NULL;
        }
    if (a->v[0].k != SV_TENSOR) {
        error_at(c->b->c, c->at, "%s() expects a tensor, got %s", c->fn, sv_kind_name(&a->v[0]));
        return NULL;
    }
    return fn_reshape(c->b, a->v[0].t, a, 1, c->at);
}

static ir_node *fn_transpose(fcall *c) {
    builder *b = c->b;
    int64_t d0, d1;
    int n0, n1;
    if (c->s[0].k != SV_TENSOR) {
        error_at(b->c, c->sat[0], "transpose() expects a tensor, got %s", sv_kind_name(&c->s[0]));
        return NULL;
    }
    ir_node *x = c->s[0].t;
    if (!want_int(b, &c->s[1], c->at, "dim0", &d0) || !want_int(b, &c->s[2], c->at, "dim1", &d1) ||
        !norm_dim(b, d0, x->sh.rank, c->at, &n0) || !norm_dim(b, d1, x->sh.rank, c->at, &n1))
        return NULL;
    int perm[IR_MAX_RANK];
    for (int i = 0; i < x->sh.rank; i++)
        perm[i] = i;
    perm[n0] = n1;
    perm[n1] = n0;
    return permute(b, x, perm, c->at);
}

/* permute's dims: a tuple or list, or the arguments after the tensor. */
static bool permute_dims(fcall *c, int64_t *dims, int *nd) {
    const fargs *a = c->a;
    *nd = 0;
    if (a->n == 2 && (a->v[1].k == SV_TUPLE || a->v[1].k == SV_LIST))
        return dims_list(c->b, &a->v[1], c->at, "permute dims", dims, nd);
    if (a->n - 1 > IR_MAX_RANK) {
        error_at(c->b->c, c->at, "permute(): too many dims");
        return false;
    }
    for (int i = 1; i < a->n; i++)
        if (!want_int(c->b, &a->v[i], a->at[i], "a permute dim", &dims[(*nd)++]))
            return false;
    return true;
}

static ir_node *fn_permute(fcall *c) {
    builder *b = c->b;
    if (c->a->n < 1 || c->a->v[0].k != SV_TENSOR) {
        error_at(b->c, c->at, "permute() expects a tensor and dims");
        return NULL;
    }
    ir_node *x = c->a->v[0].t;
    int64_t dims[IR_MAX_RANK];
    int nd;
    if (!permute_dims(c, dims, &nd))
        return NULL;
    if (nd != x->sh.rank) {
        error_at(b->c, c->at, "permute(): number of dims don't match (%d given for a %d-D tensor)", nd, x->sh.rank);
        return NULL;
    }
    int perm[IR_MAX_RANK], seen[IR_MAX_RANK] = {0};
    for (int i = 0; i < nd; i++) {
        if (!norm_dim(b, dims[i], x->sh.rank, c->at, &perm[i]))
            return NULL;
        if (seen[perm[i]]++) {
            error_at(b->c, c->at, "permute(): repeated dim %d", perm[i]);
            return NULL;
        }
    }
    return permute(b, x, perm, c->at);
}

static ir_node *fn_matmul(fcall *c) {
    ir_node *x, *y;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x) || !want_tensor(c->b, &c->s[1], c->at, c->fn, &y))
        return NULL;
    return matmul(c->b, x, y, c->at);
}

static ir_node *fn_cat(fcall *c) {
    int64_t d = 0;
    if (c->g[1] && !want_int(c->b, &c->s[1], c->at, "dim", &d))
        return NULL;
    return cat(c->b, &c->s[0], d, c->at);
}

static ir_node *fn_reduce(fcall *c) {
    builder *b = c->b;
    ir_node *x;
    if (!want_tensor(b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    int64_t dims[IR_MAX_RANK];
    int nd = 0;
    bool keep = false;
    if (c->g[2]) {
        if (c->s[2].k != SV_NUM || c->s[2].v.kind != V_BOOL) {
            error_at(b->c, c->at, "keepdim must be a bool");
            return NULL;
        }
        keep = c->s[2].v.i;
    }
    if (!c->g[1] || c->s[1].k == SV_NONE) {
        nd = x->sh.rank; /* all dims */
        for (int i = 0; i < nd; i++)
            dims[i] = i;
    } else if (!dims_list(b, &c->s[1], c->at, "dim", dims, &nd))
        return NULL;
    ir_op op = c->fn[0] == 'm' ? OP_MEAN : c->fn[0] == 's' ? OP_SUM : OP_AMAX;
    return nd == 0 ? x : reduce(b, op, x, dims, nd, keep, c->at);
}

static ir_node *fn_layer_norm(fcall *c) {
    builder *b = c->b;
    ir_node *x;
    if (!want_tensor(b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    int64_t ns[IR_MAX_RANK];
    int nd;
    double eps = 1e-5;
    if (!dims_list(b, &c->s[1], c->sat[1], "normalized_shape", ns, &nd))
        return NULL;
    if (c->g[4] && !num_of(&c->s[4], &eps)) {
        error_at(b->c, c->at, "eps must be a number");
        return NULL;
    }
    ir_node *w = NULL, *bias = NULL;
    if (c->g[2] && c->s[2].k != SV_NONE && !want_tensor(b, &c->s[2], c->at, "weight", &w))
        return NULL;
    if (c->g[3] && c->s[3].k != SV_NONE && !want_tensor(b, &c->s[3], c->at, "bias", &bias))
        return NULL;
    return layernorm(b, x, ns, nd, w, bias, eps, c->at, NULL, "layer_norm");
}

static ir_node *fn_dropout(fcall *c) {
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

static bool num_arg(fcall *c, int i, const char *what, double *out) {
    if (!c->g[i])
        return true;
    if (!num_of(&c->s[i], out) || c->s[i].v.kind == V_BOOL) {
        error_at(c->b->c, c->sat[i], "%s(): %s must be a number, got %s", c->fn, what, sv_kind_name(&c->s[i]));
        return false;
    }
    return true;
}

static bool inplace_arg(fcall *c, int i) {
    if (c->g[i] && (c->s[i].k != SV_NUM || c->s[i].v.kind != V_BOOL)) {
        error_at(c->b->c, c->sat[i], "%s(): inplace must be a bool", c->fn);
        return false;
    }
    return true;
}

static ir_node *fn_act8(fcall *c) {
    ir_node *x;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x) || !inplace_arg(c, 1))
        return NULL;
    ir_op op = strcmp(c->fn, "relu6") == 0       ? OP_RELU6
               : strcmp(c->fn, "hardswish") == 0 ? OP_HARDSWISH
               : strcmp(c->fn, "hardsigmoid") == 0 ? OP_HARDSIGMOID
                                                   : OP_MISH;
    return unary(c->b, op, x, c->at, NULL);
}

static ir_node *fn_leaky_relu(fcall *c) {
    ir_node *x;
    double slope = 0.01;
    if (!want_tensor(c->b, &c->s[0], c->at, c->fn, &x) || !num_arg(c, 1, "negative_slope", &slope) ||
        !inplace_arg(c, 2))
        return NULL;
    return nn_leaky_relu_of(c->b, x, slope, c->at, NULL);
}

static ir_node *fn_hardtanh(fcall *c) {
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

static ir_node *fn_group_norm(fcall *c) {
    builder *b = c->b;
    ir_node *x, *w = NULL, *bias = NULL;
    int64_t g;
    double eps = 1e-5;
    if (!want_tensor(b, &c->s[0], c->at, c->fn, &x) || !want_int(b, &c->s[1], c->sat[1], "num_groups", &g) ||
        !num_arg(c, 4, "eps", &eps))
        return NULL;
    if (c->g[2] && c->s[2].k != SV_NONE && !want_tensor(b, &c->s[2], c->sat[2], "weight", &w))
        return NULL;
    if (c->g[3] && c->s[3].k != SV_NONE && !want_tensor(b, &c->s[3], c->sat[3], "bias", &bias))
        return NULL;
    return nn_group_norm_of(b, x, g, w, bias, eps, c->at, NULL, "group_norm");
}

static const char *const P_ACT8[] = {"input", "inplace"};
static const char *const P_LEAKY[] = {"input", "negative_slope", "inplace"};
static const char *const P_HARDTANH[] = {"input", "min_val", "max_val", "inplace"};
static const char *const P_GN[] = {"input", "num_groups", "weight", "bias", "eps"};


/* ------------------------------------------ masks, bool, created tensors
 * bool and i64 values computed in forward are carried in float: a bool is
 * 0 or 1, an i64 an exact integer below 2^24 (checked where it is made). */

#define IOTA_EXACT 16777216.0 /* 2^24: integers a float carries exactly */

static const struct {
    const char *name;
    ir_dtype dt;
} DTYPE_NAMES[] = {{"float32", IR_F32}, {"float", IR_F32}, {"int64", IR_I64}, {"long", IR_I64}, {"bool", IR_BOOL}};

bool dtype_named(const char *name, sv *out) {
    for (size_t i = 0; i < sizeof DTYPE_NAMES / sizeof *DTYPE_NAMES; i++)
        if (strcmp(DTYPE_NAMES[i].name, name) == 0) {
            memset(out, 0, sizeof *out);
            out->k = SV_DTYPE;
            out->v.kind = V_INT;
            out->v.i = DTYPE_NAMES[i].dt;
            return true;
        }
    return false;
}

static const char *dt_word(ir_dtype t) { return t == IR_BOOL ? "bool" : t == IR_I64 ? "int64" : "float32"; }

/* The dtype of an operand: a tensor's, or a Python number's own kind. */
static ir_dtype sv_dtype(const sv *v) {
    if (v->k == SV_TENSOR)
        return v->t->dt;
    if (v->k == SV_NUM && v->v.kind == V_FLOAT)
        return IR_F32;
    if (v->k == SV_NUM && v->v.kind == V_BOOL)
        return IR_BOOL;
    return IR_I64; /* ints, the batch size */
}

/* PyTorch's promotion of two operands: a Python number only lifts the kind
 * (bool < int64 < float), never a tensor's width. */
static ir_dtype promote(const sv *l, const sv *r) {
    ir_dtype a = sv_dtype(l), b = sv_dtype(r);
    if (a == IR_F32 || b == IR_F32)
        return IR_F32;
    if (a == IR_I64 || b == IR_I64)
        return IR_I64;
    return IR_BOOL;
}

ir_dtype arith_dtype(const sv *l, const sv *r, ir_op op) {
    ir_dtype t = promote(l, r);
    return op == OP_DIV ? IR_F32 : t;
}

/* An elementwise node of op over x, y, z (NULL: absent), broadcast, of dtype dt. */
static ir_node *ew3(builder *b, ir_op op, ir_node *x, ir_node *y, ir_node *z, ir_dtype dt, loc at, const char *what) {
    shape s = x->sh, t;
    if (y) {
        if (!broadcast(b, &s, &y->sh, at, what, &t))
            return NULL;
        s = t;
    }
    if (z) {
        if (!broadcast(b, &s, &z->sh, at, what, &t))
            return NULL;
        s = t;
    }
    ir_node *n = mk_op(b, op, at, NULL, x, y, z);
    if (!n)
        return NULL;
    n->sh = s;
    n->dt = dt;
    return check_size(b, n, at, what) ? n : NULL;
}

/* A rank-0 or shaped constant of dtype dt. */
static ir_node *full_node(builder *b, const shape *s, double v, ir_dtype dt, loc at) {
    ir_node *n = mk(b, OP_CONST, at, NULL);
    if (!n)
        return NULL;
    n->attr.leaf.value = v;
    n->sh = *s;
    n->dt = dt;
    return n;
}

static ir_node *iota_node(builder *b, const shape *s, int axis, double start, double step, ir_dtype dt, loc at) {
    ir_node *n = mk(b, OP_IOTA, at, NULL);
    if (!n)
        return NULL;
    n->attr.leaf.value = start;
    n->attr.leaf.step = step;
    n->attr.leaf.axis = axis;
    n->sh = *s;
    n->dt = dt;
    return n;
}

/* A value as a tensor of dtype `like` when it is a number (where's
 * scalars), else the tensor itself. */
static ir_node *operand_of(builder *b, const sv *v, ir_dtype dt, loc at, const char *what) {
    double d;
    if (v->k == SV_TENSOR)
        return v->t;
    if (v->k == SV_BATCH || num_of(v, &d)) {
        ir_node *n = as_tensor(b, v, at, what);
        if (n && n->op == OP_CONST)
            n->dt = dt;
        return n;
    }
    error_at(b->c, at, "%s expects a tensor or a number, got %s", what, sv_kind_name(v));
    return NULL;
}

static ir_node *to_bool_node(builder *b, ir_node *x, loc at, const char *what) {
    return x->dt == IR_BOOL ? x : ew3(b, OP_TO_BOOL, x, NULL, NULL, IR_BOOL, at, what);
}

bool mask_binop(builder *b, int op, const sv *l, const sv *r, loc at, loc lat, loc rat, sv *out) {
    static const struct {
        int op;
        ir_op ir;
        const char *text;
    } CMP[] = {{OP_EQ, OP_CMP_EQ, "'=='"}, {OP_NE, OP_CMP_NE, "'!='"}, {OP_LT, OP_CMP_LT, "'<'"},
               {OP_LE, OP_CMP_LE, "'<='"}, {OP_GT, OP_CMP_GT, "'>'"},  {OP_GE, OP_CMP_GE, "'>='"},
               {OP_BITAND, OP_LOGICAL_AND, "'&'"}, {OP_BITOR, OP_LOGICAL_OR, "'|'"},
               {OP_INVERT, OP_LOGICAL_NOT, "'~'"}};
    int row = -1;
    for (int i = 0; i < (int)(sizeof CMP / sizeof *CMP); i++)
        if (CMP[i].op == op)
            row = i;
    if (row < 0 || (l->k != SV_TENSOR && r->k != SV_TENSOR))
        return false;
    memset(out, 0, sizeof *out);
    out->k = SV_NONE;
    const char *what = CMP[row].text;
    bool logic = op == OP_BITAND || op == OP_BITOR || op == OP_INVERT;
    if (logic) {
        const sv *bad = sv_dtype(l) != IR_BOOL ? l : sv_dtype(r) != IR_BOOL ? r : NULL;
        if (bad) {
            error_at(b->c, bad == l ? lat : rat, "%s applies to bool tensors (masks), got %s%s%s", what,
                     bad->k == SV_TENSOR ? "a " : sv_kind_name(bad), bad->k == SV_TENSOR ? dt_word(bad->t->dt) : "",
                     bad->k == SV_TENSOR ? " tensor; compare it first (x > 0) or use .bool()" : "");
            return true;
        }
    }
    ir_node *x = operand_of(b, l, sv_dtype(l), lat, what), *y = op == OP_INVERT ? NULL : operand_of(b, r, sv_dtype(r), rat, what);
    if (!x || (op != OP_INVERT && !y))
        return true;
    ir_node *n = ew3(b, CMP[row].ir, x, y, NULL, IR_BOOL, at, what);
    if (n) {
        out->k = SV_TENSOR;
        out->t = n;
    }
    return true;
}

bool finfo_value(builder *b, const sv *dt, const char *field, loc at, sv *out) {
    if (!dt || dt->k != SV_DTYPE || dt->v.i != IR_F32) {
        error_at(b->c, at, "finfo() takes float32 (the one float dtype dpc computes in)");
        return false;
    }
    static const struct {
        const char *name;
        double v;
    } F[] = {{"min", -3.4028234663852886e+38}, {"max", 3.4028234663852886e+38},
             {"eps", 1.1920928955078125e-07},  {"tiny", 1.1754943508222875e-38}};
    for (size_t i = 0; i < sizeof F / sizeof *F; i++)
        if (strcmp(F[i].name, field) == 0) {
            memset(out, 0, sizeof *out);
            out->k = SV_NUM;
            out->v = (val){.kind = V_FLOAT, .f = F[i].v};
            return true;
        }
    error_at(b->c, at, "finfo has min, max, eps and tiny, not '%s'", field);
    return false;
}

/* A dtype argument: SV_DTYPE, or a tensor's dtype when `tensor_ok`. */
static bool want_dtype(builder *b, const sv *v, loc at, const char *what, bool tensor_ok, ir_dtype *out) {
    if (v->k == SV_DTYPE) {
        *out = (ir_dtype)v->v.i;
        return true;
    }
    if (tensor_ok && v->k == SV_TENSOR) {
        *out = v->t->dt;
        return true;
    }
    error_at(b->c, at, "%s must be a dtype (float32, int64, bool), got %s", what, sv_kind_name(v));
    return false;
}

/* x converted to dtype t (no node when it already has it). */
static ir_node *convert(builder *b, ir_node *x, ir_dtype t, loc at, const char *what) {
    if (x->dt == t)
        return x;
    ir_op op = t == IR_BOOL ? OP_TO_BOOL : t == IR_I64 ? OP_TO_LONG : OP_TO_FLOAT;
    if (t == IR_I64 && x->dt == IR_BOOL)
        op = OP_TO_FLOAT; /* 0 and 1 are already integers */
    return ew3(b, op, x, NULL, NULL, t, at, what);
}

static ir_node *want_any_tensor(fcall *c, int i) {
    if (c->s[i].k != SV_TENSOR) {
        error_at(c->b->c, c->sat[i], "%s() expects a tensor, got %s", c->fn, sv_kind_name(&c->s[i]));
        return NULL;
    }
    return c->s[i].t;
}

static ir_node *fn_to(fcall *c) {
    ir_node *x = want_any_tensor(c, 0);
    ir_dtype t;
    if (!x)
        return NULL;
    if (!c->g[1]) {
        error_at(c->b->c, c->at, "to() needs a dtype (to(float32)) or a tensor");
        return NULL;
    }
    if (!want_dtype(c->b, &c->s[1], c->sat[1], "to()'s dtype", true, &t))
        return NULL;
    return convert(c->b, x, t, c->at, "to()");
}

static ir_node *fn_cast(fcall *c) { /* float(x), long(x), bool(x) on a tensor */
    ir_node *x = want_any_tensor(c, 0);
    if (!x)
        return NULL;
    ir_dtype t = c->fn[0] == 'f' ? IR_F32 : c->fn[0] == 'l' ? IR_I64 : IR_BOOL;
    return convert(c->b, x, t, c->at, c->fn);
}

/* softmax(input, dim, dtype=None), log_softmax too: with a dtype, input is
 * converted to it first, as F.softmax does (softmax(ids, -1,
 * dtype=float32) of an int64 tensor). float32 only: dpc computes in it. */
static ir_node *fn_softmax_dtype(fcall *c) {
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

static ir_node *fn_type_as(fcall *c) {
    ir_node *x = want_any_tensor(c, 0), *y = x ? want_any_tensor(c, 1) : NULL;
    return y ? convert(c->b, x, y->dt, c->at, "type_as()") : NULL;
}

static ir_node *fn_logical(fcall *c) {
    ir_node *x = want_any_tensor(c, 0);
    if (!x || !(x = to_bool_node(c->b, x, c->at, c->fn)))
        return NULL;
    if (c->fn[8] == 'n') /* logical_not */
        return ew3(c->b, OP_LOGICAL_NOT, x, NULL, NULL, IR_BOOL, c->at, c->fn);
    ir_node *y = want_any_tensor(c, 1);
    if (!y || !(y = to_bool_node(c->b, y, c->at, c->fn)))
        return NULL;
    return ew3(c->b, c->fn[8] == 'a' ? OP_LOGICAL_AND : OP_LOGICAL_OR, x, y, NULL, IR_BOOL, c->at, c->fn);
}

static bool want_mask(fcall *c, int i, ir_node **out) {
    ir_node *m = want_any_tensor(c, i);
    if (!m)
        return false;
    if (m->dt != IR_BOOL) {
        error_at(c->b->c, c->sat[i], "%s() expects a bool mask, got a %s tensor (compare it, or use .bool())", c->fn,
                 dt_word(m->dt));
        return false;
    }
    *out = m;
    return true;
}

static ir_node *fn_where(fcall *c) {
    ir_node *cond;
    if (!want_mask(c, 0, &cond))
        return NULL;
    ir_dtype t = promote(&c->s[1], &c->s[2]);
    ir_node *x = operand_of(c->b, &c->s[1], t, c->sat[1], "where()");
    ir_node *y = x ? operand_of(c->b, &c->s[2], t, c->sat[2], "where()") : NULL;
    if (!y || !(x = convert(c->b, x, t, c->at, "where()")) || !(y = convert(c->b, y, t, c->at, "where()")))
        return NULL;
    return ew3(c->b, OP_WHERE, cond, x, y, t, c->at, "where()");
}

static ir_node *fn_masked_fill(fcall *c) {
    ir_node *x = want_any_tensor(c, 0), *m;
    if (!x || !want_mask(c, 1, &m))
        return NULL;
    const sv *v = &c->s[2];
    if (v->k == SV_TENSOR && v->t->sh.rank != 0) {
        error_at(c->b->c, c->sat[2], "masked_fill only supports a 0-dimensional value tensor, but got tensor with %d dimension(s)",
                 v->t->sh.rank);
        return NULL;
    }
    ir_node *val = operand_of(c->b, v, x->dt, c->sat[2], "masked_fill()");
    if (!val || !(val = convert(c->b, val, x->dt, c->at, "masked_fill()")))
        return NULL;
    ir_node *n = ew3(c->b, OP_WHERE, m, val, x, x->dt, c->at, "masked_fill()");
    if (n && !shape_eq(&n->sh, &x->sh)) {
        error_at(c->b->c, c->at, "masked_fill(): the mask %s does not broadcast to the input %s", shp(c->b, &m->sh),
                 shp(c->b, &x->sh));
        return NULL;
    }
    return n;
}

/* The sizes of a creation function: ints (dims bound from inputs are ints),
 * the batch size, or one tuple or list of them. */
static bool create_shape(fcall *c, const sv *items, int n, shape *out) {
    if (n == 1 && (items[0].k == SV_TUPLE || items[0].k == SV_LIST)) {
        n = items[0].n;
        items = items[0].items;
    }
    if (n > IR_MAX_RANK) {
        error_at(c->b->c, c->at, "%s(): too many dimensions", c->fn);
        return false;
    }
    out->rank = n;
    for (int i = 0; i < n; i++) {
        if (items[i].k == SV_BATCH) {
            out->d[i] = (dim){1, true};
            continue;
        }
        if (items[i].k == SV_TENSOR) {
            error_at(c->b->c, c->at, "%s(): sizes must be known when compiling (ints, or dims named in forward's "
                                     "parameters), not a tensor", c->fn);
            return false;
        }
        int64_t d;
        if (!want_int(c->b, &items[i], c->at, "a size", &d))
            return false;
        if (d < 0) {
            error_at(c->b->c, c->at, "%s(): negative dimension %lld", c->fn, (long long)d);
            return false;
        }
        out->d[i] = (dim){d, false};
    }
    if (!numel_ok(out)) {
        error_at(c->b->c, c->at, "%s(): the shape %s is too large: more than 2^40 elements", c->fn, shp(c->b, out));
        return false;
    }
    return true;
}

/* The keyword arguments of a variadic creation function: dtype (and for
 * the others, none); sizes are the positional ones. */
static bool create_kwargs(fcall *c, int *npos, ir_dtype *dt, bool *has_dt) {
    const fargs *a = c->a;
    *npos = 0;
    *has_dt = false;
    for (int i = 0; i < a->n; i++) {
        if (!a->names[i]) {
            if (*npos != i) {
                error_at(c->b->c, a->at[i], "%s(): positional argument after a keyword", c->fn);
                return false;
            }
            (*npos)++;
        } else if (strcmp(a->names[i], "dtype") == 0) {
            if (a->v[i].k != SV_NONE && !want_dtype(c->b, &a->v[i], a->at[i], "dtype", false, dt))
                return false;
            *has_dt = a->v[i].k != SV_NONE;
        } else if (strcmp(a->names[i], "size") != 0 && strcmp(a->names[i], "device") != 0 &&
                   strcmp(a->names[i], "requires_grad") != 0) {
            error_at(c->b->c, a->kw_at[i], "%s() has no argument '%s'", c->fn, a->names[i]);
            return false;
        }
    }
    return true;
}

static ir_node *fn_ones_zeros(fcall *c) { /* ones(*size, dtype=None), zeros(...) */
    int npos;
    ir_dtype dt = IR_F32;
    bool has;
    shape s;
    if (!create_kwargs(c, &npos, &dt, &has))
        return NULL;
    const sv *items = c->a->v;
    for (int i = 0; i < c->a->n; i++)
        if (c->a->names[i] && strcmp(c->a->names[i], "size") == 0) {
            items = &c->a->v[i];
            npos = 1;
        }
    if (!create_shape(c, items, npos, &s))
        return NULL;
    return full_node(c->b, &s, c->fn[0] == 'o' ? 1 : 0, dt, c->at);
}

static bool fill_number(fcall *c, const sv *v, loc at, double *out) {
    if (!num_of(v, out)) {
        error_at(c->b->c, at, "%s(): fill_value must be a number known when compiling, got %s", c->fn, sv_kind_name(v));
        return false;
    }
    return true;
}

static ir_node *fn_full(fcall *c) { /* full(size, fill_value, dtype=None) */
    shape s;
    double v;
    ir_dtype dt = sv_dtype(&c->s[1]);
    if (!create_shape(c, &c->s[0], 1, &s) || !fill_number(c, &c->s[1], c->sat[1], &v) ||
        (c->g[2] && c->s[2].k != SV_NONE && !want_dtype(c->b, &c->s[2], c->sat[2], "dtype", false, &dt)))
        return NULL;
    return full_node(c->b, &s, dt == IR_BOOL ? v != 0 : dt == IR_I64 ? trunc(v) : v, dt, c->at);
}

static ir_node *fn_like(fcall *c) { /* ones_like(input, dtype=None), zeros_like, full_like(input, fill_value, dtype) */
    ir_node *x = want_any_tensor(c, 0);
    if (!x)
        return NULL;
    bool full = c->fn[0] == 'f';
    int di = full ? 2 : 1;
    double v = c->fn[0] == 'o' ? 1 : 0;
    ir_dtype dt = x->dt;
    if ((full && !fill_number(c, &c->s[1], c->sat[1], &v)) ||
        (c->g[di] && c->s[di].k != SV_NONE && !want_dtype(c->b, &c->s[di], c->sat[di], "dtype", false, &dt)))
        return NULL;
    return full_node(c->b, &x->sh, dt == IR_BOOL ? v != 0 : dt == IR_I64 ? trunc(v) : v, dt, c->at);
}

static ir_node *fn_arange(fcall *c) { /* arange(end), arange(start, end, step=1), dtype= */
    const fargs *a = c->a;
    int npos;
    ir_dtype dt = IR_I64;
    bool has_dt;
    if (!create_kwargs(c, &npos, &dt, &has_dt))
        return NULL;
    if (npos < 1 || npos > 3) {
        error_at(c->b->c, c->at, "arange() takes end, or start, end and step (%d given)", npos);
        return NULL;
    }
    sv v[3] = {{.k = SV_NUM, .v = {.kind = V_INT, .i = 0}}, {0}, {.k = SV_NUM, .v = {.kind = V_INT, .i = 1}}};
    loc at[3] = {c->at, c->at, c->at};
    if (npos == 1) {
        v[1] = a->v[0];
        at[1] = a->at[0];
    } else
        for (int i = 0; i < npos; i++) {
            v[i] = a->v[i];
            at[i] = a->at[i];
        }
    if (v[0].k == SV_NUM && v[0].v.i == 0 && v[1].k == SV_BATCH && v[2].k == SV_NUM && v[2].v.kind == V_INT &&
        v[2].v.i == 1) { /* arange(N): the batch's indices */
        shape s = {1, {{1, true}}};
        return iota_node(c->b, &s, 0, 0, 1, has_dt ? dt : IR_I64, c->at);
    }
    double d[3];
    bool all_int = true;
    static const char *const names[] = {"start", "end", "step"};
    for (int i = 0; i < 3; i++) {
        if (!num_of(&v[i], &d[i]) || v[i].v.kind == V_STR) {
            error_at(c->b->c, at[i], "arange(): %s must be a number known when compiling, got %s", names[i],
                     v[i].k == SV_BATCH ? "the batch size (only arange(N) takes it)" : sv_kind_name(&v[i]));
            return NULL;
        }
        all_int &= v[i].v.kind != V_FLOAT;
    }
    if (!has_dt)
        dt = all_int ? IR_I64 : IR_F32;
    if (d[2] == 0) {
        error_at(c->b->c, at[2], "arange(): step must be nonzero");
        return NULL;
    }
    if ((d[2] > 0 && d[1] < d[0]) || (d[2] < 0 && d[1] > d[0])) {
        error_at(c->b->c, c->at, "arange(): upper bound and larger bound inconsistent with step sign");
        return NULL;
    }
    if (dt == IR_BOOL) {
        error_at(c->b->c, c->at, "arange() does not make bool tensors");
        return NULL;
    }
    if (dt == IR_I64 && (d[0] != trunc(d[0]) || d[2] != trunc(d[2]))) {
        error_at(c->b->c, at[d[0] != trunc(d[0]) ? 0 : 2],
                 "arange(): %s %g is not an integer, but the dtype is int64 (write dtype=float32, or integer bounds)",
                 d[0] != trunc(d[0]) ? "start" : "step", d[0] != trunc(d[0]) ? d[0] : d[2]);
        return NULL;
    }
    double len = ceil((d[1] - d[0]) / d[2]);
    if (len > (double)DPC_MAX_NUMEL) {
        error_at(c->b->c, c->at, "arange(): %g elements are too many", len);
        return NULL;
    }
    double last = d[0] + d[2] * (len - 1);
    if (dt == IR_I64 && len > 0 && (fabs(d[0]) > IOTA_EXACT || fabs(last) > IOTA_EXACT)) {
        error_at(c->b->c, c->at, "arange(): int64 values up to %.0f do not fit: dpc carries integers computed in "
                                 "forward in float32, exact below 2^24", fmax(fabs(d[0]), fabs(last)));
        return NULL;
    }
    shape s = {1, {{(int64_t)len, false}}};
    return iota_node(c->b, &s, 0, d[0], d[2], dt, c->at);
}

/* tril/triu of the last two dims: keep where col - row <= k (tril) or >= k. */
static ir_node *tri(builder *b, ir_node *x, int64_t k, bool lower, loc at, const char *what) {
    if (x->sh.rank < 2) {
        error_at(b->c, at, "%s: input tensor must have at least 2 dimensions, got %s", what, shp(b, &x->sh));
        return NULL;
    }
    dim R = x->sh.d[x->sh.rank - 2], C = x->sh.d[x->sh.rank - 1];
    shape rs = {2, {R, {1, false}}}, cs = {2, {{1, false}, C}}, ks = {0};
    ir_node *rows = iota_node(b, &rs, 0, 0, 1, IR_I64, at), *cols = iota_node(b, &cs, 1, 0, 1, IR_I64, at);
    ir_node *kk = full_node(b, &ks, (double)k, IR_I64, at), *zero = full_node(b, &ks, 0, x->dt, at);
    if (!rows || !cols || !kk || !zero)
        return NULL;
    ir_node *diff = ew3(b, OP_SUB, cols, rows, NULL, IR_I64, at, what);
    ir_node *keep = diff ? ew3(b, lower ? OP_CMP_LE : OP_CMP_GE, diff, kk, NULL, IR_BOOL, at, what) : NULL;
    return keep ? ew3(b, OP_WHERE, keep, x, zero, x->dt, at, what) : NULL;
}

static ir_node *fn_tri(fcall *c) { /* tril(input, diagonal=0), triu */
    ir_node *x = want_any_tensor(c, 0);
    int64_t k = 0;
    if (!x || (c->g[1] && !want_int(c->b, &c->s[1], c->sat[1], "diagonal", &k)))
        return NULL;
    return tri(c->b, x, k, c->fn[3] == 'l', c->at, c->fn);
}

/* scaled_dot_product_attention(query, key, value, attn_mask=None,
 * dropout_p=0.0, is_causal=False, scale=None), PyTorch 2's: softmax(q k^T *
 * scale + mask) v, a bool mask keeping where True, is_causal keeping the
 * lower triangle. Lowered to matmul, softmax, where. */
static ir_node *fn_sdpa(fcall *c) {
    builder *b = c->b;
    ir_node *q, *k, *v;
    const char *what = "scaled_dot_product_attention()";
    if (!want_tensor(b, &c->s[0], c->sat[0], what, &q) || !want_tensor(b, &c->s[1], c->sat[1], what, &k) ||
        !want_tensor(b, &c->s[2], c->sat[2], what, &v))
        return NULL;
    if (q->sh.rank < 2 || k->sh.rank < 2 || v->sh.rank < 2) {
        error_at(b->c, c->at, "%s: query, key and value need at least 2 dimensions", what);
        return NULL;
    }
    dim E = q->sh.d[q->sh.rank - 1];
    if (!shape_eq(&(shape){1, {E}}, &(shape){1, {k->sh.d[k->sh.rank - 1]}}) ||
        !shape_eq(&(shape){1, {k->sh.d[k->sh.rank - 2]}}, &(shape){1, {v->sh.d[v->sh.rank - 2]}})) {
        error_at(b->c, c->at, "%s: query %s, key %s and value %s do not fit (query and key share the last dim, key "
                 "and value the one before)", what, shp(b, &q->sh), shp(b, &k->sh), shp(b, &v->sh));
        return NULL;
    }
    if (E.sym) {
        error_at(b->c, c->at, "%s: the embedding dim depends on the batch size", what);
        return NULL;
    }
    double p = 0, scale = 1.0 / sqrt((double)E.k);
    if (c->g[4] && (!num_of(&c->s[4], &p) || p != 0)) {
        error_at(b->c, c->sat[4], "%s: dropout_p must be 0 (dpc runs inference; PyTorch applies it in eval mode too)",
                 what);
        return NULL;
    }
    bool causal = false;
    if (c->g[5]) {
        if (c->s[5].k != SV_NUM || c->s[5].v.kind != V_BOOL) {
            error_at(b->c, c->sat[5], "%s: is_causal must be a bool known when compiling", what);
            return NULL;
        }
        causal = c->s[5].v.i;
    }
    if (c->g[6] && c->s[6].k != SV_NONE && !num_of(&c->s[6], &scale)) {
        error_at(b->c, c->sat[6], "%s: scale must be a number or None", what);
        return NULL;
    }
    ir_node *mask = NULL;
    if (c->g[3] && c->s[3].k != SV_NONE) {
        if (c->s[3].k != SV_TENSOR) {
            error_at(b->c, c->sat[3], "%s: attn_mask must be a tensor or None, got %s", what, sv_kind_name(&c->s[3]));
            return NULL;
        }
        mask = c->s[3].t;
        if (mask->dt == IR_I64) {
            error_at(b->c, c->sat[3], "%s: attn_mask must be bool or float, got an int64 tensor", what);
            return NULL;
        }
        if (causal) {
            error_at(b->c, c->sat[3], "%s: attn_mask and is_causal cannot both be set", what);
            return NULL;
        }
    }
    int perm[IR_MAX_RANK];
    for (int i = 0; i < k->sh.rank; i++)
        perm[i] = i;
    perm[k->sh.rank - 2] = k->sh.rank - 1;
    perm[k->sh.rank - 1] = k->sh.rank - 2;
    ir_node *kt = permute(b, k, perm, c->at);
    ir_node *w = kt ? matmul(b, q, kt, c->at) : NULL;
    shape s0 = {0};
    ir_node *sc = w ? full_node(b, &s0, scale, IR_F32, c->at) : NULL;
    if (!sc || !(w = ew3(b, OP_MUL, w, sc, NULL, IR_F32, c->at, what)))
        return NULL;
    ir_node *ninf = NULL;
    if (causal || (mask && mask->dt == IR_BOOL))
        if (!(ninf = full_node(b, &s0, -INFINITY, IR_F32, c->at)))
            return NULL;
    if (causal) {
        shape ls = {2, {w->sh.d[w->sh.rank - 2], w->sh.d[w->sh.rank - 1]}};
        ir_node *one = full_node(b, &ls, 1, IR_BOOL, c->at);
        if (!one || !(mask = tri(b, one, 0, true, c->at, what)))
            return NULL;
    }
    if (mask) {
        shape ws = w->sh;
        w = mask->dt == IR_BOOL ? ew3(b, OP_WHERE, mask, w, ninf, IR_F32, c->at, what)
                                : ew3(b, OP_ADD, w, mask, NULL, IR_F32, c->at, what);
        if (w && !shape_eq(&w->sh, &ws)) {
            error_at(b->c, c->sat[3], "%s: attn_mask %s does not broadcast to the attention weights %s", what,
                     shp(b, &mask->sh), shp(b, &ws));
            return NULL;
        }
        if (!w)
            return NULL;
    }
    ir_node *a = softmax(b, OP_SOFTMAX, w, -1, c->at, NULL);
    return a ? matmul(b, a, v, c->at) : NULL;
}

/* float("-inf"), float(2), int(2.5), bool(0): numbers, not tensors. */
static bool number_cast(builder *b, const char *fn, const fargs *a, loc at, sv *out) {
    bool f = strcmp(fn, "float") == 0, i = strcmp(fn, "int") == 0, bo = strcmp(fn, "bool") == 0;
    if (!(f || i || bo) || a->n != 1 || a->names[0] || a->v[0].k != SV_NUM)
        return false;
    const val *v = &a->v[0].v;
    double d = 0;
    memset(out, 0, sizeof *out);
    out->k = SV_NUM;
    if (v->kind == V_STR) {
        const char *s = v->s;
        bool neg = *s == '-';
        s += *s == '-' || *s == '+';
        if (f && (strcmp(s, "inf") == 0 || strcmp(s, "infinity") == 0))
            d = neg ? -INFINITY : INFINITY;
        else if (f && strcmp(s, "nan") == 0)
            d = NAN;
        else {
            error_at(b->c, at, "%s() of a string takes \"inf\", \"-inf\" or \"nan\"", fn);
            out->k = SV_NONE;
            out->poison = true;
            return true;
        }
        out->v = (val){.kind = V_FLOAT, .f = d};
        return true;
    }
    num_of(&a->v[0], &d);
    if (f)
        out->v = (val){.kind = V_FLOAT, .f = d};
    else if (i)
        out->v = (val){.kind = V_INT, .i = (int64_t)trunc(d)};
    else
        out->v = (val){.kind = V_BOOL, .i = d != 0};
    return true;
}

/* ------------------------------ indexing and shape functions (W1) */

static bool tensor_arg(fcall *c, int i, ir_node **x) {
    if (c->s[i].k != SV_TENSOR) {
        if (!c->s[i].poison)
            error_at(c->b->c, c->sat[i], "%s() expects a tensor, got %s", c->fn, sv_kind_name(&c->s[i]));
        return false;
    }
    *x = c->s[i].t;
    return true;
}

/* x.size() is x.shape; x.size(d) one dim of it. */
static bool fn_size(fcall *c, sv *out) {
    ir_node *x;
    sv all;
    if (!tensor_arg(c, 0, &x) || !shape_tuple(c->b, x, c->at, &all))
        return false;
    if (!c->g[1] || c->s[1].k == SV_NONE) {
        *out = all;
        return true;
    }
    int64_t d;
    int nd;
    if (!want_int(c->b, &c->s[1], c->sat[1], "dim", &d) || !norm_dim(c->b, d, x->sh.rank, c->sat[1], &nd))
        return false;
    if (x->sh.rank == 0) {
        error_at(c->b->c, c->at, "size(): a 0-dim tensor has no dims");
        return false;
    }
    *out = all.items[nd];
    return true;
}

static bool fn_dim(fcall *c, sv *out) {
    ir_node *x;
    if (!tensor_arg(c, 0, &x))
        return false;
    *out = (sv){.k = SV_NUM, .v = {.kind = V_INT, .i = x->sh.rank}};
    return true;
}

static ir_node *fn_unsqueeze(fcall *c) {
    ir_node *x;
    int64_t d;
    int nd;
    if (!tensor_arg(c, 0, &x) || !want_int(c->b, &c->s[1], c->sat[1], "dim", &d) ||
        !norm_dim(c->b, d, x->sh.rank + 1, c->sat[1], &nd))
        return NULL;
    if (x->sh.rank == IR_MAX_RANK) {
        error_at(c->b->c, c->at, "unsqueeze(): more than %d dims", IR_MAX_RANK);
        return NULL;
    }
    shape s = {.rank = x->sh.rank + 1};
    for (int i = 0, k = 0; i < s.rank; i++)
        s.d[i] = i == nd ? (dim){1, false} : x->sh.d[k++];
    return reshape_to(c->b, x, &s, c->at, NULL);
}

/* squeeze(x): every dim of size 1 goes (never the batch dim: its size is
 * known only at run time); squeeze(x, d): dim d if its size is 1. */
static ir_node *fn_squeeze(fcall *c) {
    ir_node *x;
    if (!tensor_arg(c, 0, &x))
        return NULL;
    bool drop[IR_MAX_RANK] = {0};
    if (!c->g[1] || c->s[1].k == SV_NONE) {
        for (int i = 0; i < x->sh.rank; i++)
            drop[i] = true;
    } else {
        int64_t dims[IR_MAX_RANK];
        int n;
        if (!dims_list(c->b, &c->s[1], c->sat[1], "dim", dims, &n))
            return NULL;
        for (int i = 0; i < n; i++) {
            int d;
            if (!norm_dim(c->b, dims[i], x->sh.rank, c->sat[1], &d))
                return NULL;
            drop[d] = true;
        }
    }
    shape s = {0};
    for (int i = 0; i < x->sh.rank; i++)
        if (!drop[i] || x->sh.d[i].sym || x->sh.d[i].k != 1)
            s.d[s.rank++] = x->sh.d[i];
    return reshape_to(c->b, x, &s, c->at, NULL);
}

/* The target of expand(x, sizes): -1 keeps a dim, the batch size makes (or
 * keeps) the batch dim; only dims of size 1 grow; new dims lead. */
static ir_node *expand_sizes(fcall *c, ir_node *x, const sv *items, int n, loc at) {
    builder *b = c->b;
    if (n > IR_MAX_RANK) {
        error_at(b->c, at, "expand(): more than %d dims", IR_MAX_RANK);
        return NULL;
    }
    if (n < x->sh.rank) {
        error_at(b->c, at,
                 "expand(): the number of sizes provided (%d) must be greater or equal to the number of dimensions "
                 "in the tensor (%d)",
                 n, x->sh.rank);
        return NULL;
    }
    shape to = {.rank = n};
    int lead = n - x->sh.rank, nsym = 0;
    for (int j = 0; j < n; j++) {
        const dim *xd = j >= lead ? &x->sh.d[j - lead] : NULL;
        const sv *v = &items[j];
        int64_t k = 0;
        if (v->k == SV_BATCH) {
            if (xd && !(xd->sym && xd->k == 1) && !(!xd->sym && xd->k == 1)) {
                error_at(b->c, at, "expand(): dim %d of %s has size %lld and cannot be expanded to the batch size '%s'",
                         j - lead, shp(b, &x->sh), (long long)xd->k, b->batch);
                return NULL;
            }
            to.d[j] = (dim){1, true};
        } else {
            if (!want_int(b, v, at, "an expand size", &k))
                return NULL;
            if (k == -1 && !xd) {
                error_at(b->c, at, "expand(): the expanded size of the tensor (-1) isn't allowed in a leading, "
                                   "non-existing dimension %d", j);
                return NULL;
            }
            if (k < -1) {
                error_at(b->c, at, "expand(): invalid size %lld", (long long)k);
                return NULL;
            }
            if (k == -1)
                to.d[j] = *xd;
            else if (xd && (xd->sym || (xd->k != 1 && xd->k != k))) {
                error_at(b->c, at,
                         "expand(): the expanded size of the tensor (%lld) must match the existing size (%s) at "
                         "non-singleton dimension %d (tensor sizes %s)",
                         (long long)k, xd->sym ? b->batch : arena_printf(&b->c->arena, "%lld", (long long)xd->k),
                         j, shp(b, &x->sh));
                return NULL;
            } else
                to.d[j] = (dim){k, false};
        }
        nsym += to.d[j].sym;
    }
    if (nsym > 1) {
        error_at(b->c, at, "expand(): only one dim can be the batch size");
        return NULL;
    }
    if (!numel_ok(&to)) {
        error_at(b->c, at, "expand(): the result %s is too large: more than 2^40 elements", shp(b, &to));
        return NULL;
    }
    return expand_to(b, x, &to, at);
}

static ir_node *fn_expand(fcall *c) {
    const fargs *a = c->a;
    for (int i = 0; i < a->n; i++)
        if (a->names[i]) {
            error_at(c->b->c, a->kw_at[i], "expand() takes no keyword arguments");
            return NULL;
        }
    if (a->n < 1 || a->v[0].k != SV_TENSOR) {
        error_at(c->b->c, c->at, "expand() expects a tensor and sizes");
        return NULL;
    }
    const sv *items = a->v + 1;
    int n = a->n - 1;
    if (n == 1 && (items[0].k == SV_TUPLE || items[0].k == SV_LIST)) {
        n = items[0].n;
        items = items[0].items;
    }
    return expand_sizes(c, a->v[0].t, items, n, c->at);
}

static ir_node *fn_expand_as(fcall *c) {
    ir_node *x, *y;
    sv to;
    if (!tensor_arg(c, 0, &x) || !tensor_arg(c, 1, &y) || !shape_tuple(c->b, y, c->sat[1], &to))
        return NULL;
    return expand_sizes(c, x, to.items, to.n, c->at);
}

static ir_node *fn_contiguous(fcall *c) {
    ir_node *x;
    return tensor_arg(c, 0, &x) ? x : NULL; /* views are materialised where an op needs it */
}

/* split and chunk: pieces of x along d, of the given sizes. */
static bool pieces(fcall *c, ir_node *x, int d, const int64_t *sizes, int n, sv *out) {
    out->k = SV_TUPLE;
    out->n = n;
    out->items = arena_alloc(&c->b->c->arena, sizeof(sv) * (size_t)(n + 1));
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        ir_node *p = narrow(c->b, x, d, at, sizes[i], c->at);
        if (!p)
            return false;
        out->items[i] = (sv){.k = SV_TENSOR, .t = p};
        at += sizes[i];
    }
    return true;
}

#define MAX_PIECES 4096

static bool split_dim(fcall *c, ir_node *x, int slot, int *d) {
    int64_t dd = 0;
    if (c->g[slot] && !want_int(c->b, &c->s[slot], c->sat[slot], "dim", &dd))
        return false;
    if (x->sh.rank == 0) {
        error_at(c->b->c, c->at, "%s() expects at least a 1-dimensional tensor", c->fn);
        return false;
    }
    if (!norm_dim(c->b, dd, x->sh.rank, c->sat[slot], d))
        return false;
    if (x->sh.d[*d].sym) {
        error_at(c->b->c, c->at, "%s() along the batch dim (dim %d) is not supported: DataParallel splits it across replicas",
                 c->fn, *d);
        return false;
    }
    return true;
}

/* split(x, size or [sizes], dim=0) */
static bool fn_split(fcall *c, sv *out) {
    builder *b = c->b;
    ir_node *x;
    int d;
    if (!tensor_arg(c, 0, &x) || !split_dim(c, x, 2, &d))
        return false;
    int64_t len = x->sh.d[d].k, *sizes;
    int n = 0;
    const sv *s = &c->s[1];
    if (s->k == SV_TUPLE || s->k == SV_LIST) {
        if (s->n > MAX_PIECES) {
            error_at(b->c, c->sat[1], "split(): more than %d pieces", MAX_PIECES);
            return false;
        }
        sizes = arena_alloc(&b->c->arena, sizeof(int64_t) * (size_t)(s->n + 1));
        int64_t sum = 0;
        for (int i = 0; i < s->n; i++) {
            if (!want_int(b, &s->items[i], c->sat[1], "a split size", &sizes[i]))
                return false;
            if (sizes[i] < 0) {
                error_at(b->c, c->sat[1], "split(): split_sizes cannot be negative, got %lld", (long long)sizes[i]);
                return false;
            }
            sum += sizes[i];
        }
        n = s->n;
        if (sum != len) {
            error_at(b->c, c->sat[1],
                     "split_with_sizes expects split_sizes to sum exactly to %lld (input tensor's size at dimension %d), "
                     "but they sum to %lld",
                     (long long)len, d, (long long)sum);
            return false;
        }
    } else {
        int64_t k;
        if (!want_int(b, s, c->sat[1], "split_size", &k))
            return false;
        if (k <= 0 && !(k == 0 && len == 0)) {
            error_at(b->c, c->sat[1], "split(): split_size must be positive, got %lld", (long long)k);
            return false;
        }
        int64_t cnt = k ? (len + k - 1) / k : 1;
        if (cnt < 1)
            cnt = 1;
        if (cnt > MAX_PIECES) {
            error_at(b->c, c->sat[1], "split(): more than %d pieces", MAX_PIECES);
            return false;
        }
        n = (int)cnt;
        sizes = arena_alloc(&b->c->arena, sizeof(int64_t) * (size_t)(n + 1));
        for (int i = 0; i < n; i++)
            sizes[i] = len - (int64_t)i * k < k ? len - (int64_t)i * k : k;
    }
    return pieces(c, x, d, sizes, n, out);
}

/* chunk(x, chunks, dim=0): pieces of ceil(len / chunks), maybe fewer. */
static bool fn_chunk(fcall *c, sv *out) {
    builder *b = c->b;
    ir_node *x;
    int d;
    int64_t k;
    if (!tensor_arg(c, 0, &x) || !want_int(b, &c->s[1], c->sat[1], "chunks", &k) || !split_dim(c, x, 2, &d))
        return false;
    if (k <= 0) {
        error_at(b->c, c->sat[1], "chunk expects `chunks` to be greater than 0, got: %lld", (long long)k);
        return false;
    }
    if (k > MAX_PIECES) {
        error_at(b->c, c->sat[1], "chunk(): more than %d pieces", MAX_PIECES);
        return false;
    }
    int64_t len = x->sh.d[d].k, size = (len + k - 1) / k;
    int n = size ? (int)((len + size - 1) / size) : (int)k;
    int64_t *sizes = arena_alloc(&b->c->arena, sizeof(int64_t) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        sizes[i] = len - i * size < size ? len - i * size : size;
    return pieces(c, x, d, sizes, n, out);
}

static ir_node *fn_t(fcall *c) {
    ir_node *x;
    if (!tensor_arg(c, 0, &x))
        return NULL;
    if (x->sh.rank > 2) {
        error_at(c->b->c, c->at, "t() expects a tensor with <= 2 dimensions, but self is %dD", x->sh.rank);
        return NULL;
    }
    int perm[2] = {1, 0};
    return x->sh.rank < 2 ? x : permute(c->b, x, perm, c->at);
}

static ir_node *fn_adaptive_avg_pool2d(fcall *c) {
    builder *b = c->b;
    ir_node *x;
    if (!want_tensor(b, &c->s[0], c->sat[0], c->fn, &x))
        return NULL;
    if (x->sh.rank != 4) {
        error_at(b->c, c->at, "adaptive_avg_pool2d() expects a 4-D input [N, C, H, W], got %s", shp(b, &x->sh));
        return NULL;
    }
    const sv *o = &c->s[1];
    sv two[2] = {*o, *o};
    const sv *e = two;
    if (o->k == SV_TUPLE || o->k == SV_LIST) {
        if (o->n != 2) {
            error_at(b->c, c->sat[1], "adaptive_avg_pool2d(): output_size must be an int or a pair");
            return NULL;
        }
        e = o->items;
    }
    ir_node *n = mk_op(b, OP_ADAPTIVE_AVGPOOL2D, c->at, NULL, x, NULL, NULL);
    if (!n)
        return NULL;
    n->sh = x->sh;
    for (int i = 0; i < 2; i++) {
        int64_t k;
        if (e[i].k == SV_NONE)
            continue;
        if (!want_int(b, &e[i], c->sat[1], "output_size", &k))
            return NULL;
        if (k <= 0) {
            error_at(b->c, c->sat[1], "adaptive_avg_pool2d(): output_size must be positive, got %lld", (long long)k);
            return NULL;
        }
        n->sh.d[2 + i] = (dim){k, false};
    }
    return n;
}

/* One of size / scale_factor: an int or number repeated, or a pair. */
static bool interp_pair(fcall *c, int i, bool ints, double *out) {
    const sv *v = &c->s[i];
    const char *what = i == 1 ? "size" : "scale_factor";
    int n = v->k == SV_TUPLE || v->k == SV_LIST ? v->n : 1;
    if (n != 2 && n != 1) {
        error_at(c->b->c, c->sat[i], "interpolate(): %s shape must match input shape: the input has 2 spatial dims, "
                 "%s has %d", what, what, n);
        return false;
    }
    for (int j = 0; j < 2; j++) {
        const sv *e = n == 1 ? (v->k == SV_TUPLE || v->k == SV_LIST ? &v->items[0] : v) : &v->items[j];
        if (ints) {
            int64_t k;
            if (!want_int(c->b, e, c->sat[i], what, &k))
                return false;
            out[j] = (double)k;
        } else if (!num_of(e, &out[j]) || e->k != SV_NUM) {
            error_at(c->b->c, c->sat[i], "interpolate(): %s must be a number or a pair of numbers", what);
            return false;
        }
        if (out[j] <= 0) {
            error_at(c->b->c, c->sat[i], "interpolate(): %s must be positive", what);
            return false;
        }
    }
    return true;
}

/* F.interpolate(input, size, scale_factor, mode, align_corners,
 * recompute_scale_factor, antialias): Upsample's lowering (nn_conv.c). */
static ir_node *fn_interpolate(fcall *c) {
    builder *b = c->b;
    ir_node *x;
    if (!want_tensor(b, &c->s[0], c->sat[0], c->fn, &x))
        return NULL;
    const char *mode = "nearest";
    if (c->g[3] && c->s[3].k != SV_NONE) {
        if (c->s[3].k != SV_NUM || c->s[3].v.kind != V_STR) {
            error_at(b->c, c->sat[3], "interpolate(): mode must be a string");
            return NULL;
        }
        mode = c->s[3].v.s;
    }
    bool flag[2] = {false, false}, given[2] = {false, false};
    for (int i = 0; i < 2; i++) {
        const sv *v = &c->s[4 + i];
        if (!c->g[4 + i] || v->k == SV_NONE)
            continue;
        if (v->k != SV_NUM || v->v.kind != V_BOOL) {
            error_at(b->c, c->sat[4 + i], "interpolate(): %s must be a bool or None",
                     i ? "recompute_scale_factor" : "align_corners");
            return NULL;
        }
        given[i] = true;
        flag[i] = v->v.i != 0;
    }
    if (c->g[6] && !(c->s[6].k == SV_NUM && c->s[6].v.kind == V_BOOL && !c->s[6].v.i)) {
        error_at(b->c, c->sat[6], "interpolate(): antialias=True is not supported");
        return NULL;
    }
    bool has_size = c->g[1] && c->s[1].k != SV_NONE, has_scale = c->g[2] && c->s[2].k != SV_NONE;
    int arg = 0;
    const char *msg = nn_interpolate_check(mode, has_size, has_scale, given[0], given[1] ? flag[1] : -1, &arg);
    if (msg) {
        loc at = arg == 0 ? c->at : arg == 4 ? c->sat[5] : arg == 3 ? c->sat[4] : c->sat[arg == 1 ? 2 : 3];
        char fmt[256];
        snprintf(fmt, sizeof fmt, "interpolate(): %s", msg);
        error_at(b->c, at, fmt, mode);
        return NULL;
    }
    double v[2];
    if (!interp_pair(c, has_size ? 1 : 2, has_size, v))
        return NULL;
    int64_t size[2] = {(int64_t)v[0], (int64_t)v[1]};
    return nn_interpolate_of(b, x, strcmp(mode, "bilinear") == 0, has_size ? size : NULL, has_size ? NULL : v, flag[0],
                             flag[1], c->at, NULL, "interpolate()");
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

static ir_node *fn_pow(fcall *c) { return binary_of(c, OP_POW, &c->s[0], c->sat[0], &c->s[1], c->sat[1]); }

/* clamp(x, min, max) = min(max(x, min), max), as PyTorch (NaN stays NaN). */
static ir_node *fn_clamp(fcall *c) {
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

static const char *const P_SIZE[] = {"input", "dim"};
static const char *const P_SPLIT[] = {"tensor", "split_size_or_sections", "dim"};
static const char *const P_CHUNK[] = {"input", "chunks", "dim"};
static const char *const P_AS[] = {"input", "other"};
static const char *const P_AAP[] = {"input", "output_size"};
static const char *const P_POW[] = {"input", "exponent"};
static const char *const P_CLAMP[] = {"input", "min", "max"};
static const char *const P_CMIN[] = {"input", "min"};
static const char *const P_CMAX[] = {"input", "max"};
static const char *const P_INTERP[] = {"input", "size", "scale_factor", "mode", "align_corners",
                                       "recompute_scale_factor", "antialias"};

static const char *const P_X[] = {"input"};
static const char *const P_GELU[] = {"input", "approximate"};
static const char *const P_SOFTMAX[] = {"input", "dim", "dtype"};
static const char *const P_FLAT[] = {"input", "start_dim", "end_dim"};
static const char *const P_T[] = {"input", "dim0", "dim1"};
static const char *const P_MM[] = {"input", "other"};
static const char *const P_CAT[] = {"tensors", "dim"};
static const char *const P_RED[] = {"input", "dim", "keepdim"};
static const char *const P_LN[] = {"input", "normalized_shape", "weight", "bias", "eps"};
static const char *const P_DROP[] = {"input", "p", "training", "inplace"};
static const char *const P_TO[] = {"input", "dtype", "non_blocking", "copy"};
static const char *const P_TYPE_AS[] = {"input", "other"};
static const char *const P_LOGIC[] = {"input", "other"};
static const char *const P_WHERE[] = {"condition", "input", "other"};
static const char *const P_MFILL[] = {"input", "mask", "value"};
static const char *const P_FULL[] = {"size", "fill_value", "dtype"};
static const char *const P_LIKE[] = {"input", "dtype"};
static const char *const P_FULL_LIKE[] = {"input", "fill_value", "dtype"};
static const char *const P_TRI[] = {"input", "diagonal"};
static const char *const P_SDPA[] = {"query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"};

/* The forward functions besides the op table's: name, parameters, how
 * many are required, lowering. */
static const fndef FUNCTIONS[] = {
    {"gelu", P_GELU, 2, 1, fn_gelu},
    {"softmax", P_SOFTMAX, 3, 2, fn_softmax_dtype},
    {"log_softmax", P_SOFTMAX, 3, 2, fn_softmax_dtype},
    {"flatten", P_FLAT, 3, 1, fn_flatten},
    {"reshape", NULL, 0, 0, fn_reshape_call},
    {"transpose", P_T, 3, 3, fn_transpose},
    {"permute", NULL, 0, 0, fn_permute},
    {"matmul", P_MM, 2, 2, fn_matmul},
    {"cat", P_CAT, 2, 1, fn_cat},
    {"mean", P_RED, 3, 1, fn_reduce},
    {"sum", P_RED, 3, 1, fn_reduce},
    {"amax", P_RED, 3, 1, fn_reduce},
    {"layer_norm", P_LN, 5, 2, fn_layer_norm},
    {"dropout", P_DROP, 4, 1, fn_dropout},
    /* models.md group 8 */
    {"relu6", P_ACT8, 2, 1, fn_act8},
    {"hardswish", P_ACT8, 2, 1, fn_act8},
    {"hardsigmoid", P_ACT8, 2, 1, fn_act8},
    {"mish", P_ACT8, 2, 1, fn_act8},
    {"leaky_relu", P_LEAKY, 3, 1, fn_leaky_relu},
    {"hardtanh", P_HARDTANH, 4, 1, fn_hardtanh},
    {"group_norm", P_GN, 5, 2, fn_group_norm},
    /* masks, bool, created tensors, attention */
    {"to", P_TO, 4, 1, fn_to},
    {"float", P_X, 1, 1, fn_cast},
    {"long", P_X, 1, 1, fn_cast},
    {"bool", P_X, 1, 1, fn_cast},
    {"type_as", P_TYPE_AS, 2, 2, fn_type_as},
    {"logical_and", P_LOGIC, 2, 2, fn_logical},
    {"logical_or", P_LOGIC, 2, 2, fn_logical},
    {"logical_not", P_X, 1, 1, fn_logical},
    {"where", P_WHERE, 3, 3, fn_where},
    {"masked_fill", P_MFILL, 3, 3, fn_masked_fill},
    {"arange", NULL, 0, 0, fn_arange},
    {"ones", NULL, 0, 0, fn_ones_zeros},
    {"zeros", NULL, 0, 0, fn_ones_zeros},
    {"full", P_FULL, 3, 2, fn_full},
    {"ones_like", P_LIKE, 2, 1, fn_like},
    {"zeros_like", P_LIKE, 2, 1, fn_like},
    {"full_like", P_FULL_LIKE, 3, 2, fn_like},
    {"tril", P_TRI, 2, 1, fn_tri},
    {"triu", P_TRI, 2, 1, fn_tri},
    {"scaled_dot_product_attention", P_SDPA, 7, 3, fn_sdpa},
    /* indexing and shape functions (W1) */
    {"view", NULL, 0, 0, fn_reshape_call},
    {"size", P_SIZE, 2, 1, NULL, fn_size},
    {"dim", P_X, 1, 1, NULL, fn_dim},
    {"unsqueeze", P_SIZE, 2, 2, fn_unsqueeze},
    {"squeeze", P_SIZE, 2, 1, fn_squeeze},
    {"expand", NULL, 0, 0, fn_expand},
    {"expand_as", P_AS, 2, 2, fn_expand_as},
    {"contiguous", P_X, 1, 1, fn_contiguous},
    {"split", P_SPLIT, 3, 2, NULL, fn_split},
    {"chunk", P_CHUNK, 3, 2, NULL, fn_chunk},
    {"t", P_X, 1, 1, fn_t},
    {"adaptive_avg_pool2d", P_AAP, 2, 2, fn_adaptive_avg_pool2d},
    {"pow", P_POW, 2, 2, fn_pow},
    {"clamp", P_CLAMP, 3, 1, fn_clamp},
    {"clamp_min", P_CMIN, 2, 2, fn_clamp},
    {"clamp_max", P_CMAX, 2, 2, fn_clamp},
    {"interpolate", P_INTERP, 7, 1, fn_interpolate},
};
#define NFUNCTIONS ((int)(sizeof FUNCTIONS / sizeof *FUNCTIONS))

/* The row of a forward function: an op table row (one-to-one elementwise,
 * bound as f(input)) or one of FUNCTIONS; false if `name` is neither. */
static bool function_row(const char *name, fndef *out) {
    if (ir_op_of_function(name) != OP_COUNT) {
        *out = (fndef){name, P_X, 1, 1, fn_unary};
        return true;
    }
    for (int i = 0; i < NFUNCTIONS; i++)
        if (strcmp(FUNCTIONS[i].name, name) == 0) {
            *out = FUNCTIONS[i];
            return true;
        }
    return false;
}

bool dpc_is_function(const char *name) {
    fndef d;
    return function_row(name, &d);
}

int dpc_function_names(const char **out, int max) {
    int n = 0;
    for (int i = 0; i < OP_COUNT && n < max; i++)
        if (ir_opdef_of((ir_op)i)->fn)
            out[n++] = ir_opdef_of((ir_op)i)->fn;
    for (int i = 0; i < NFUNCTIONS && n < max; i++)
        out[n++] = FUNCTIONS[i].name;
    return n;
}

DPC_NOINLINE bool call_function(builder *b, const char *fn, const fargs *a, loc at, sv *out) {
    fndef d;
    if (!function_row(fn, &d))
        return false; /* caller reports unknown names */
    if (number_cast(b, fn, a, at, out))
        return !out->poison;
    fcall *c = arena_alloc(&b->c->arena, sizeof *c);
    *c = (fcall){.b = b, .fn = fn, .a = a, .at = at};
    for (int i = 0; i < 8; i++)
        c->sat[i] = at;
    if (d.params && !fbind(b, fn, a, d.params, d.np, d.nrequired, c->s, c->g, c->sat, at))
        return false;
    if (d.call)
        return d.call(c, out);
    ir_node *r = d.lower(c);
    if (!r || !check_size(b, r, at, fn))
        return false;
    out->k = SV_TENSOR;
    out->t = r;
    return true;
}
