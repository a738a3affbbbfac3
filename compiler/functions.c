/* functions.c - the forward functions (torch.* and F.*): their parameters,
 * binding and lowering. One list serves every pass: the op table's
 * one-to-one elementwise functions (IR_OPS rows with a function name), then
 * FUNCTIONS below. */
#include "irbuild.h"

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

/* One row per forward function that is not a one-to-one elementwise op
 * (those are rows of IR_OPS with a function name: see fn_unary). params
 * NULL: the lowering binds its arguments itself (variadic). */
typedef struct fndef {
    const char *name;
    const char *const *params;
    int np, nrequired;
    fn_lower lower;
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
        error_at(c->b->c, c->at, "reshape() needs a tensor and a shape");
        return NULL;
    }
    for (int i = 0; i < a->n; i++)
        if (a->names[i]) {
            error_at(c->b->c, a->at[i], "reshape() takes no keyword arguments");
            return NULL;
        }
    if (a->v[0].k != SV_TENSOR) {
        error_at(c->b->c, c->at, "reshape() expects a tensor, got %s", sv_kind_name(&a->v[0]));
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

static const char *const P_X[] = {"input"};
static const char *const P_GELU[] = {"input", "approximate"};
static const char *const P_SOFTMAX[] = {"input", "dim"};
static const char *const P_FLAT[] = {"input", "start_dim", "end_dim"};
static const char *const P_T[] = {"input", "dim0", "dim1"};
static const char *const P_MM[] = {"input", "other"};
static const char *const P_CAT[] = {"tensors", "dim"};
static const char *const P_RED[] = {"input", "dim", "keepdim"};
static const char *const P_LN[] = {"input", "normalized_shape", "weight", "bias", "eps"};
static const char *const P_DROP[] = {"input", "p", "training", "inplace"};

/* The forward functions besides the op table's: name, parameters, how
 * many are required, lowering. */
static const fndef FUNCTIONS[] = {
    {"gelu", P_GELU, 2, 1, fn_gelu},
    {"softmax", P_SOFTMAX, 2, 2, fn_softmax},
    {"log_softmax", P_SOFTMAX, 2, 2, fn_softmax},
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
    fcall *c = arena_alloc(&b->c->arena, sizeof *c);
    *c = (fcall){.b = b, .fn = fn, .a = a, .at = at};
    for (int i = 0; i < 8; i++)
        c->sat[i] = at;
    if (d.params && !fbind(b, fn, a, d.params, d.np, d.nrequired, c->s, c->g, c->sat, at))
        return false;
    ir_node *r = d.lower(c);
    if (!r || !check_size(b, r, at, fn))
        return false;
    out->k = SV_TENSOR;
    out->t = r;
    return true;
}
