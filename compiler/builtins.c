/* builtins.c - the torch.nn modules dpc knows: their constructor signatures
 * (PyTorch's argument names, order and defaults), argument checking, the
 * parameters they register in the state_dict, and their extra_repr.
 *
 * Arguments are kept as given (an int stays an int, a tuple a tuple),
 * because PyTorch's repr prints them that way: MaxPool2d(2) prints
 * kernel_size=2 while Conv2d(1, 10, 5) prints kernel_size=(5, 5). */
#include "compiler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Argument kinds: i int, f float (an int is kept as int), b bool, s string,
 * p int or pair, q int/pair/string (conv padding), n int or None,
 * g float or None, t int or tuple of ints (normalized_shape),
 * o int, None or pair of int/None (adaptive output size), l list of modules,
 * m a module, L list of ints or None, * anything (Identity). */
typedef struct argspec {
    const char *name;
    char kind;
    const char *deflt; /* NULL: required; else a literal: 1, 0.5, True, None, 'zeros' */
} argspec;

typedef struct builtin {
    const char *name;
    int nargs;
    argspec args[10];
    bool variadic; /* Sequential(*modules), Identity(*args) */
} builtin;

static const builtin BUILTINS[BI_COUNT] = {
    [BI_LINEAR] = {"Linear", 3, {{"in_features", 'i', NULL}, {"out_features", 'i', NULL}, {"bias", 'b', "True"}}},
    [BI_CONV2D] = {"Conv2d", 9,
                   {{"in_channels", 'i', NULL}, {"out_channels", 'i', NULL}, {"kernel_size", 'p', NULL},
                    {"stride", 'p', "1"}, {"padding", 'q', "0"}, {"dilation", 'p', "1"},
                    {"groups", 'i', "1"}, {"bias", 'b', "True"}, {"padding_mode", 's', "'zeros'"}}},
    [BI_MAXPOOL2D] = {"MaxPool2d", 6,
                      {{"kernel_size", 'p', NULL}, {"stride", 'P', "None"}, {"padding", 'p', "0"},
                       {"dilation", 'p', "1"}, {"return_indices", 'b', "False"}, {"ceil_mode", 'b', "False"}}},
    [BI_AVGPOOL2D] = {"AvgPool2d", 6,
                      {{"kernel_size", 'p', NULL}, {"stride", 'P', "None"}, {"padding", 'p', "0"},
                       {"ceil_mode", 'b', "False"}, {"count_include_pad", 'b', "True"},
                       {"divisor_override", 'n', "None"}}},
    [BI_ADAPTIVEAVGPOOL2D] = {"AdaptiveAvgPool2d", 1, {{"output_size", 'o', NULL}}},
    [BI_BATCHNORM2D] = {"BatchNorm2d", 5,
                        {{"num_features", 'i', NULL}, {"eps", 'f', "1e-05"}, {"momentum", 'g', "0.1"},
                         {"affine", 'b', "True"}, {"track_running_stats", 'b', "True"}}},
    [BI_LAYERNORM] = {"LayerNorm", 4,
                      {{"normalized_shape", 't', NULL}, {"eps", 'f', "1e-05"},
                       {"elementwise_affine", 'b', "True"}, {"bias", 'b', "True"}}},
    [BI_EMBEDDING] = {"Embedding", 7,
                      {{"num_embeddings", 'i', NULL}, {"embedding_dim", 'i', NULL}, {"padding_idx", 'n', "None"},
                       {"max_norm", 'g', "None"}, {"norm_type", 'f', "2.0"},
                       {"scale_grad_by_freq", 'b', "False"}, {"sparse", 'b', "False"}}},
    [BI_DROPOUT] = {"Dropout", 2, {{"p", 'f', "0.5"}, {"inplace", 'b', "False"}}},
    [BI_DROPOUT2D] = {"Dropout2d", 2, {{"p", 'f', "0.5"}, {"inplace", 'b', "False"}}},
    [BI_RELU] = {"ReLU", 1, {{"inplace", 'b', "False"}}},
    [BI_GELU] = {"GELU", 1, {{"approximate", 's', "'none'"}}},
    [BI_SILU] = {"SiLU", 1, {{"inplace", 'b', "False"}}},
    [BI_SIGMOID] = {"Sigmoid", 0, {{0}}},
    [BI_TANH] = {"Tanh", 0, {{0}}},
    [BI_SOFTMAX] = {"Softmax", 1, {{"dim", 'n', "None"}}},
    [BI_LOGSOFTMAX] = {"LogSoftmax", 1, {{"dim", 'n', "None"}}},
    [BI_FLATTEN] = {"Flatten", 2, {{"start_dim", 'i', "1"}, {"end_dim", 'i', "-1"}}},
    [BI_IDENTITY] = {"Identity", 0, {{0}}, true},
    [BI_SEQUENTIAL] = {"Sequential", 0, {{0}}, true},
    [BI_MODULELIST] = {"ModuleList", 1, {{"modules", 'l', "None"}}},
    [BI_DATAPARALLEL] = {"DataParallel", 4,
                         {{"module", 'm', NULL}, {"device_ids", 'L', "None"}, {"output_device", 'n', "None"},
                          {"dim", 'i', "0"}}},
};

builtin_kind builtin_lookup(const char *name) {
    for (int k = 1; k < BI_COUNT; k++)
        if (BUILTINS[k].name && strcmp(BUILTINS[k].name, name) == 0)
            return (builtin_kind)k;
    return BI_NONE;
}

const char *builtin_name(builtin_kind k) { return k > 0 && k < BI_COUNT ? BUILTINS[k].name : NULL; }

const char *const *builtin_names(int *n) {
    static const char *names[BI_COUNT];
    for (int k = 1; k < BI_COUNT; k++)
        names[k - 1] = BUILTINS[k].name;
    *n = BI_COUNT - 1;
    return names;
}

/* ------------------------------------------------------------ values */

static val literal(dpc_arena *a, const char *lit) {
    val v = {0};
    if (strcmp(lit, "None") == 0)
        v.kind = V_NONE;
    else if (strcmp(lit, "True") == 0 || strcmp(lit, "False") == 0) {
        v.kind = V_BOOL;
        v.i = lit[0] == 'T';
    } else if (lit[0] == '\'') {
        v.kind = V_STR;
        v.s = arena_strndup(a, lit + 1, strlen(lit) - 2);
    } else if (strpbrk(lit, ".e")) {
        v.kind = V_FLOAT;
        v.f = strtod(lit, NULL);
    } else {
        v.kind = V_INT;
        v.i = strtoll(lit, NULL, 10);
    }
    return v;
}

static const char *kind_name(val_kind k) {
    switch (k) {
    case V_NONE: return "None";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_BOOL: return "bool";
    case V_STR: return "string";
    case V_TUPLE: return "tuple";
    case V_LIST: return "list";
    case V_MODULE: return "module";
    case V_CLASS: return "module class";
    case V_DICT: return "dict";
    }
    return "?";
}

static bool is_int_pair(const val *v) {
    return (v->kind == V_TUPLE || v->kind == V_LIST) && v->n == 2 && v->items[0].kind == V_INT &&
           v->items[1].kind == V_INT;
}

/* Does v fit argument kind k? */
static bool kind_ok(char k, const val *v) {
    switch (k) {
    case 'i': return v->kind == V_INT;
    case 'f': return v->kind == V_FLOAT || v->kind == V_INT;
    case 'b': return v->kind == V_BOOL;
    case 's': return v->kind == V_STR;
    case 'p': return v->kind == V_INT || is_int_pair(v);
    case 'P': return v->kind == V_NONE || v->kind == V_INT || is_int_pair(v);
    case 'q': return v->kind == V_INT || is_int_pair(v) || v->kind == V_STR;
    case 'n': return v->kind == V_NONE || v->kind == V_INT;
    case 'g': return v->kind == V_NONE || v->kind == V_FLOAT || v->kind == V_INT;
    case 't':
        if (v->kind == V_INT)
            return true;
        if (v->kind != V_TUPLE && v->kind != V_LIST)
            return false;
        for (int i = 0; i < v->n; i++)
            if (v->items[i].kind != V_INT)
                return false;
        return v->n > 0;
    case 'o':
        if (v->kind == V_INT || v->kind == V_NONE)
            return true;
        if ((v->kind != V_TUPLE && v->kind != V_LIST) || v->n != 2)
            return false;
        for (int i = 0; i < 2; i++)
            if (v->items[i].kind != V_INT && v->items[i].kind != V_NONE)
                return false;
        return true;
    case 'l':
        if (v->kind == V_NONE)
            return true;
        if (v->kind != V_LIST && v->kind != V_TUPLE)
            return false;
        for (int i = 0; i < v->n; i++)
            if (v->items[i].kind != V_MODULE)
                return false;
        return true;
    case 'm': return v->kind == V_MODULE;
    case 'L':
        if (v->kind == V_NONE)
            return true;
        if (v->kind != V_LIST && v->kind != V_TUPLE)
            return false;
        for (int i = 0; i < v->n; i++)
            if (v->items[i].kind != V_INT)
                return false;
        return true;
    }
    return true;
}

static const char *kind_expect(char k) {
    switch (k) {
    case 'i': return "an int";
    case 'f': return "a number";
    case 'b': return "a bool (True or False)";
    case 's': return "a string";
    case 'p': return "an int or a pair of ints";
    case 'P': return "an int, a pair of ints or None";
    case 'q': return "an int, a pair of ints or a string";
    case 'n': return "an int or None";
    case 'g': return "a number or None";
    case 't': return "an int or a tuple of ints";
    case 'o': return "an int, None or a pair";
    case 'l': return "a list of modules";
    case 'm': return "a module";
    case 'L': return "a list of ints or None";
    }
    return "a value";
}


static void pair_of(const val *v, int64_t out[2]) {
    if (v->kind == V_INT)
        out[0] = out[1] = v->i;
    else {
        out[0] = v->items[0].i;
        out[1] = v->items[1].i;
    }
}

int64_t inst_int(const inst *in, int i) { return in->args[i].i; }
bool inst_bool(const inst *in, int i) { return in->args[i].i != 0; }
double inst_float(const inst *in, int i) {
    return in->args[i].kind == V_INT ? (double)in->args[i].i : in->args[i].f;
}
void inst_pair(const inst *in, int i, int64_t out[2]) { pair_of(&in->args[i], out); }

/* Module-specific checks, after binding; `at` points at the whole call. */
static bool check_values(dpc_ctx *c, inst *in, const loc *arg_at) {
    int before = c->nerrors;
#define NEED(cond, i, ...)                                                                       \
    do {                                                                                         \
        if (!(cond))                                                                             \
            error_at(c, arg_at[i], __VA_ARGS__);                                                 \
    } while (0)
    switch (in->bi) {
    case BI_LINEAR:
        NEED(inst_int(in, 0) >= 0, 0, "in_features must be non-negative, got %lld", (long long)inst_int(in, 0));
        NEED(inst_int(in, 1) >= 0, 1, "out_features must be non-negative, got %lld", (long long)inst_int(in, 1));
        break;
    case BI_CONV2D: {
        int64_t k[2], s[2], d[2];
        inst_pair(in, 2, k), inst_pair(in, 3, s), inst_pair(in, 5, d);
        NEED(inst_int(in, 0) > 0, 0, "in_channels must be positive, got %lld", (long long)inst_int(in, 0));
        NEED(inst_int(in, 1) > 0, 1, "out_channels must be positive, got %lld", (long long)inst_int(in, 1));
        NEED(k[0] > 0 && k[1] > 0, 2, "kernel_size must be positive");
        NEED(s[0] > 0 && s[1] > 0, 3, "stride must be positive");
        NEED(d[0] > 0 && d[1] > 0, 5, "dilation must be positive");
        int64_t g = inst_int(in, 6);
        NEED(g > 0, 6, "groups must be positive, got %lld", (long long)g);
        if (g > 0) {
            NEED(inst_int(in, 0) % g == 0, 0, "in_channels (%lld) must be divisible by groups (%lld)",
                 (long long)inst_int(in, 0), (long long)g);
            NEED(inst_int(in, 1) % g == 0, 1, "out_channels (%lld) must be divisible by groups (%lld)",
                 (long long)inst_int(in, 1), (long long)g);
        }
        const val *p = &in->args[4];
        if (p->kind == V_STR) {
            NEED(strcmp(p->s, "same") == 0 || strcmp(p->s, "valid") == 0, 4,
                 "padding must be 'same', 'valid' or numbers, got '%s'", p->s);
            NEED(strcmp(p->s, "same") != 0 || (s[0] == 1 && s[1] == 1), 4,
                 "padding='same' is not supported for strided convolutions");
        } else {
            int64_t pp[2];
            pair_of(p, pp);
            NEED(pp[0] >= 0 && pp[1] >= 0, 4, "padding must be non-negative");
        }
        NEED(strcmp(in->args[8].s, "zeros") == 0, 8,
             "padding_mode '%s' is not supported (only 'zeros')", in->args[8].s);
        break;
    }
    case BI_MAXPOOL2D:
    case BI_AVGPOOL2D: {
        int64_t k[2], p[2];
        inst_pair(in, 0, k), inst_pair(in, 2, p);
        NEED(k[0] > 0 && k[1] > 0, 0, "kernel_size must be positive");
        if (in->args[1].kind != V_NONE) {
            int64_t s[2];
            inst_pair(in, 1, s);
            NEED(s[0] > 0 && s[1] > 0, 1, "stride must be positive");
        }
        NEED(p[0] >= 0 && p[1] >= 0 && 2 * p[0] <= k[0] && 2 * p[1] <= k[1], 2,
             "pad should be at most half of kernel size");
        if (in->bi == BI_MAXPOOL2D) {
            int64_t d[2];
            inst_pair(in, 3, d);
            NEED(d[0] > 0 && d[1] > 0, 3, "dilation must be positive");
            NEED(!inst_bool(in, 4), 4, "return_indices=True is not supported");
        } else
            NEED(in->args[5].kind == V_NONE || in->args[5].i != 0, 5, "divisor_override must not be 0");
        break;
    }
    case BI_ADAPTIVEAVGPOOL2D: {
        const val *o = &in->args[0];
        if (o->kind == V_INT)
            NEED(o->i > 0, 0, "output_size must be positive");
        else if (o->kind != V_NONE)
            for (int i = 0; i < 2; i++)
                NEED(o->items[i].kind == V_NONE || o->items[i].i > 0, 0, "output_size must be positive");
        break;
    }
    case BI_BATCHNORM2D:
        NEED(inst_int(in, 0) > 0, 0, "num_features must be positive, got %lld", (long long)inst_int(in, 0));
        NEED(inst_float(in, 1) >= 0, 1, "eps must be non-negative");
        break;
    case BI_LAYERNORM: {
        const val *t = &in->args[0];
        NEED(t->kind == V_INT || t->n <= 8, 0, "normalized_shape has %d dims (limit 8)", t->n);
        if (t->kind == V_INT)
            NEED(t->i > 0, 0, "normalized_shape must be positive");
        else
            for (int i = 0; i < t->n; i++)
                NEED(t->items[i].i > 0, 0, "normalized_shape must be positive");
        NEED(inst_float(in, 1) >= 0, 1, "eps must be non-negative");
        break;
    }
    case BI_EMBEDDING: {
        int64_t n = inst_int(in, 0);
        NEED(n > 0, 0, "num_embeddings must be positive, got %lld", (long long)n);
        NEED(inst_int(in, 1) > 0, 1, "embedding_dim must be positive, got %lld", (long long)inst_int(in, 1));
        if (in->args[2].kind == V_INT) {
            int64_t p = in->args[2].i;
            NEED(p < n && p >= -n, 2, "padding_idx must be within num_embeddings");
            if (p < 0)
                in->args[2].i = n + p; /* PyTorch normalises it at construction */
        }
        NEED(in->args[3].kind == V_NONE, 3, "max_norm is not supported (it renormalises weights in place)");
        break;
    }
    case BI_DROPOUT:
    case BI_DROPOUT2D: {
        double p = inst_float(in, 0);
        char num[64];
        dpc_format_pyfloat(p, num, sizeof num); /* as Python prints it: nan, not -nan */
        NEED(p >= 0 && p <= 1, 0, "dropout probability has to be between 0 and 1, but got %s", num);
        break;
    }
    case BI_GELU:
        NEED(strcmp(in->args[0].s, "none") == 0 || strcmp(in->args[0].s, "tanh") == 0, 0,
             "approximate must be 'none' or 'tanh', got '%s'", in->args[0].s);
        break;
    case BI_DATAPARALLEL:
        NEED(inst_int(in, 3) == 0, 3, "only dim=0 is supported for DataParallel");
        break;
    default:
        break;
    }
#undef NEED
    return c->nerrors == before;
}

/* Every int in a builtin's arguments is a size, an index or a dim: at most
 * DPC_MAX_DIM either way, so that the shape arithmetic cannot overflow. */
static bool int_in_range(const val *v) {
    if (v->kind == V_INT)
        return v->i <= DPC_MAX_DIM && v->i >= -DPC_MAX_DIM;
    if (v->kind == V_TUPLE || v->kind == V_LIST)
        for (int i = 0; i < v->n; i++)
            if (!int_in_range(&v->items[i]))
                return false;
    return true;
}

static bool check_ranges(dpc_ctx *c, const builtin *b, const inst *in, const loc *arg_at) {
    bool ok = true;
    for (int j = 0; j < b->nargs; j++) {
        const val *v = &in->args[j];
        if (v->kind == V_MODULE || int_in_range(v))
            continue;
        const val *bad = v;
        for (int i = 0; v->kind != V_INT && i < v->n; i++)
            if (!int_in_range(&v->items[i]))
                bad = &v->items[i];
        if (bad->kind == V_INT)
            error_at(c, arg_at[j], "%s() argument '%s' is too %s: %lld (limit %s%lld)", b->name, b->args[j].name,
                     bad->i > 0 ? "large" : "small", (long long)bad->i, bad->i > 0 ? "" : "-",
                     (long long)DPC_MAX_DIM);
        else
            error_at(c, arg_at[j], "%s() argument '%s' is out of range (limit %lld)", b->name, b->args[j].name,
                     (long long)DPC_MAX_DIM);
        ok = false;
    }
    return ok;
}

/* Binds evaluated call arguments to the builtin's signature. */
bool builtin_bind_values(dpc_ctx *c, inst *in, const bound_arg *args, int nargs, loc at) {
    const builtin *b = &BUILTINS[in->bi];
    dpc_arena *a = &c->arena;
    in->type_name = b->name;
    if (b->variadic) {
        /* Sequential(*modules) keeps its modules as children; Identity(*args,
         * **kwargs) ignores its arguments, keywords included, as PyTorch's */
        for (int i = 0; i < nargs; i++) {
            if (args[i].name && in->bi != BI_IDENTITY) {
                error_at(c, args[i].name_at, "%s() takes no keyword argument '%s'", b->name, args[i].name);
                continue;
            }
            if (in->bi == BI_SEQUENTIAL) {
                if (args[i].v.kind != V_MODULE) {
                    error_at(c, args[i].at, "Sequential expects modules, got %s", kind_name(args[i].v.kind));
                    continue;
                }
                inst_child *ch = arena_alloc(a, sizeof *ch);
                ch->name = arena_printf(a, "%d", in->children.len);
                ch->mod = args[i].v.mod;
                vec_push(a, &in->children, ch);
            }
        }
        return true;
    }
    in->nargs = b->nargs;
    in->args = arena_alloc(a, sizeof(val) * (size_t)(b->nargs ? b->nargs : 1));
    loc *arg_at = arena_alloc(a, sizeof(loc) * (size_t)(b->nargs ? b->nargs : 1));
    bool *set = arena_alloc(a, sizeof(bool) * (size_t)(b->nargs ? b->nargs : 1));
    int before = c->nerrors, pos = 0;
    for (int i = 0; i < nargs; i++) {
        int slot = -1;
        if (!args[i].name) {
            if (pos >= b->nargs) {
                error_at(c, args[i].at, "%s() takes at most %d argument%s, got %d", b->name, b->nargs,
                         b->nargs == 1 ? "" : "s", nargs);
                break;
            }
            slot = pos++;
        } else {
            for (int j = 0; j < b->nargs; j++)
                if (strcmp(b->args[j].name, args[i].name) == 0)
                    slot = j;
            if (slot < 0) {
                const char *cands[10];
                for (int j = 0; j < b->nargs; j++)
                    cands[j] = b->args[j].name;
                const char *near = nearest_name(args[i].name, cands, b->nargs);
                if (near)
                    error_at(c, args[i].name_at, "%s() has no argument '%s'; did you mean '%s'?", b->name,
                             args[i].name, near);
                else
                    error_at(c, args[i].name_at, "%s() has no argument '%s'", b->name, args[i].name);
                continue;
            }
            if (set[slot]) {
                error_at(c, args[i].name_at, "%s() got argument '%s' twice", b->name, args[i].name);
                continue;
            }
        }
        if (!kind_ok(b->args[slot].kind, &args[i].v)) {
            error_at(c, args[i].at, "%s() argument '%s' must be %s, got %s", b->name, b->args[slot].name,
                     kind_expect(b->args[slot].kind), kind_name(args[i].v.kind));
            continue;
        }
        in->args[slot] = args[i].v;
        arg_at[slot] = args[i].at;
        set[slot] = true;
    }
    for (int j = 0; j < b->nargs; j++) {
        if (set[j])
            continue;
        arg_at[j] = at;
        if (!b->args[j].deflt) {
            if (c->nerrors == before)
                error_at(c, at, "%s() missing required argument '%s'", b->name, b->args[j].name);
            continue;
        }
        in->args[j] = literal(a, b->args[j].deflt);
    }
    if (c->nerrors != before || !check_ranges(c, b, in, arg_at))
        return false;
    /* stride=None means "same as kernel_size", in the form it was given */
    if ((in->bi == BI_MAXPOOL2D || in->bi == BI_AVGPOOL2D) && in->args[1].kind == V_NONE)
        in->args[1] = in->args[0];
    if (in->bi == BI_MODULELIST && in->args[0].kind != V_NONE)
        for (int i = 0; i < in->args[0].n; i++) {
            inst_child *ch = arena_alloc(a, sizeof *ch);
            ch->name = arena_printf(a, "%d", i);
            ch->mod = in->args[0].items[i].mod;
            vec_push(a, &in->children, ch);
        }
    if (in->bi == BI_DATAPARALLEL) {
        inst_child *ch = arena_alloc(a, sizeof *ch);
        ch->name = "module";
        ch->mod = in->args[0].mod;
        vec_push(a, &in->children, ch);
    }
    return check_values(c, in, arg_at);
}

/* ----------------------------------------------------- parameters */

static void add_param(dpc_ctx *c, model *m, inst *in, const char *leaf, int rank, const int64_t *shape,
                      int init, double fan_in) {
    param_entry *p = arena_alloc(&c->arena, sizeof *p);
    p->key = in->path[0] ? arena_printf(&c->arena, "%s.%s", in->path, leaf) : leaf;
    p->rank = rank;
    for (int i = 0; i < rank; i++)
        p->shape[i] = shape[i];
    p->init = init;
    p->fan_in = fan_in;
    p->owner = in;
    if (init == INIT_COUNTER) {
        p->is_int = true;
        p->ignored = true;
    }
    vec_push(&c->arena, &m->params, p);
}

void builtin_params(dpc_ctx *c, model *m, inst *in) {
    switch (in->bi) {
    case BI_LINEAR: {
        int64_t w[2] = {inst_int(in, 1), inst_int(in, 0)};
        add_param(c, m, in, "weight", 2, w, INIT_KAIMING, (double)w[1]);
        if (inst_bool(in, 2))
            add_param(c, m, in, "bias", 1, w, INIT_BIAS, (double)w[1]);
        break;
    }
    case BI_CONV2D: {
        int64_t k[2];
        inst_pair(in, 2, k);
        int64_t w[4] = {inst_int(in, 1), inst_int(in, 0) / inst_int(in, 6), k[0], k[1]};
        double fan_in = (double)w[1] * (double)k[0] * (double)k[1];
        add_param(c, m, in, "weight", 4, w, INIT_KAIMING, fan_in);
        if (inst_bool(in, 7))
            add_param(c, m, in, "bias", 1, w, INIT_BIAS, fan_in);
        break;
    }
    case BI_BATCHNORM2D: {
        int64_t n[1] = {inst_int(in, 0)};
        if (inst_bool(in, 3)) {
            add_param(c, m, in, "weight", 1, n, INIT_ONES, 0);
            add_param(c, m, in, "bias", 1, n, INIT_ZEROS, 0);
        }
        if (inst_bool(in, 4)) {
            add_param(c, m, in, "running_mean", 1, n, INIT_ZEROS, 0);
            add_param(c, m, in, "running_var", 1, n, INIT_ONES, 0);
            add_param(c, m, in, "num_batches_tracked", 0, n, INIT_COUNTER, 0);
        }
        break;
    }
    case BI_LAYERNORM: {
        const val *t = &in->args[0];
        int64_t s[8];
        int r = t->kind == V_INT ? 1 : t->n;
        if (r > 8)
            r = 8;
        for (int i = 0; i < r; i++)
            s[i] = t->kind == V_INT ? t->i : t->items[i].i;
        if (inst_bool(in, 2)) {
            add_param(c, m, in, "weight", r, s, INIT_ONES, 0);
            if (inst_bool(in, 3))
                add_param(c, m, in, "bias", r, s, INIT_ZEROS, 0);
        }
        break;
    }
    case BI_EMBEDDING: {
        int64_t w[2] = {inst_int(in, 0), inst_int(in, 1)};
        add_param(c, m, in, "weight", 2, w, INIT_NORMAL, 0);
        break;
    }
    default:
        break;
    }
}

/* --------------------------------------------------------- printing */

void repr_value(const val *v, dpc_buf *out) {
    char num[64];
    switch (v->kind) {
    case V_NONE: dpc_buf_puts(out, "None"); break;
    case V_INT: dpc_buf_printf(out, "%lld", (long long)v->i); break;
    case V_BOOL: dpc_buf_puts(out, v->i ? "True" : "False"); break;
    case V_FLOAT:
        dpc_format_pyfloat(v->f, num, sizeof num);
        dpc_buf_puts(out, num);
        break;
    case V_STR: dpc_buf_puts(out, v->s); break;
    case V_TUPLE:
    case V_LIST:
        dpc_buf_puts(out, v->kind == V_TUPLE ? "(" : "[");
        for (int i = 0; i < v->n; i++) {
            if (i)
                dpc_buf_puts(out, ", ");
            repr_value(&v->items[i], out);
        }
        if (v->kind == V_TUPLE && v->n == 1)
            dpc_buf_puts(out, ",");
        dpc_buf_puts(out, v->kind == V_TUPLE ? ")" : "]");
        break;
    case V_MODULE: dpc_buf_puts(out, v->mod->type_name); break;
    case V_CLASS: dpc_buf_puts(out, v->s); break;
    case V_DICT:
        dpc_buf_puts(out, "{");
        for (int i = 0; i < v->n; i++) {
            dpc_buf_printf(out, "%s'%s': ", i ? ", " : "", v->keys[i]);
            repr_value(&v->items[i], out);
        }
        dpc_buf_puts(out, "}");
        break;
    }
}

/* _pair(): ints and lists print as tuples */
static void repr_pair(const val *v, dpc_buf *out) {
    int64_t p[2];
    pair_of(v, p);
    dpc_buf_printf(out, "(%lld, %lld)", (long long)p[0], (long long)p[1]);
}

static bool pair_is(const val *v, int64_t x) {
    int64_t p[2];
    pair_of(v, p);
    return p[0] == x && p[1] == x;
}

static void repr_conv(const inst *in, dpc_buf *out) {
    dpc_buf_printf(out, "%lld, %lld, kernel_size=", (long long)inst_int(in, 0), (long long)inst_int(in, 1));
    repr_pair(&in->args[2], out);
    dpc_buf_puts(out, ", stride=");
    repr_pair(&in->args[3], out);
    const val *p = &in->args[4];
    if (p->kind == V_STR) {
        dpc_buf_printf(out, ", padding=%s", p->s);
    } else if (!pair_is(p, 0)) {
        dpc_buf_puts(out, ", padding=");
        repr_pair(p, out);
    }
    if (!pair_is(&in->args[5], 1)) {
        dpc_buf_puts(out, ", dilation=");
        repr_pair(&in->args[5], out);
    }
    if (inst_int(in, 6) != 1)
        dpc_buf_printf(out, ", groups=%lld", (long long)inst_int(in, 6));
    if (!inst_bool(in, 7))
        dpc_buf_puts(out, ", bias=False");
    if (strcmp(in->args[8].s, "zeros") != 0)
        dpc_buf_printf(out, ", padding_mode=%s", in->args[8].s);
}

static void kv(dpc_buf *out, const char *sep, const char *k, const val *v) {
    dpc_buf_printf(out, "%s%s=", sep, k);
    repr_value(v, out);
}

void builtin_extra_repr(const inst *in, dpc_buf *out) {
    const val *a = in->args;
    switch (in->bi) {
    case BI_LINEAR:
        dpc_buf_printf(out, "in_features=%lld, out_features=%lld, bias=%s", (long long)a[0].i,
                       (long long)a[1].i, a[2].i ? "True" : "False");
        break;
    case BI_CONV2D: repr_conv(in, out); break;
    case BI_MAXPOOL2D:
        kv(out, "", "kernel_size", &a[0]);
        kv(out, ", ", "stride", &a[1]);
        kv(out, ", ", "padding", &a[2]);
        kv(out, ", ", "dilation", &a[3]);
        kv(out, ", ", "ceil_mode", &a[5]);
        break;
    case BI_AVGPOOL2D:
        kv(out, "", "kernel_size", &a[0]);
        kv(out, ", ", "stride", &a[1]);
        kv(out, ", ", "padding", &a[2]);
        break;
    case BI_ADAPTIVEAVGPOOL2D: kv(out, "", "output_size", &a[0]); break;
    case BI_BATCHNORM2D:
        dpc_buf_printf(out, "%lld", (long long)a[0].i);
        kv(out, ", ", "eps", &a[1]);
        kv(out, ", ", "momentum", &a[2]);
        kv(out, ", ", "affine", &a[3]);
        kv(out, ", ", "track_running_stats", &a[4]);
        break;
    case BI_LAYERNORM: {
        val t = a[0];
        if (t.kind == V_INT) {
            val one = t;
            t.kind = V_TUPLE;
            t.n = 1;
            t.items = &one;
            repr_value(&t, out);
        } else {
            t.kind = V_TUPLE;
            repr_value(&t, out);
        }
        kv(out, ", ", "eps", &a[1]);
        kv(out, ", ", "elementwise_affine", &a[2]);
        break;
    }
    case BI_EMBEDDING:
        dpc_buf_printf(out, "%lld, %lld", (long long)a[0].i, (long long)a[1].i);
        if (a[2].kind != V_NONE)
            kv(out, ", ", "padding_idx", &a[2]);
        if (a[3].kind != V_NONE)
            kv(out, ", ", "max_norm", &a[3]);
        if (inst_float(in, 4) != 2.0)
            kv(out, ", ", "norm_type", &a[4]);
        if (a[5].i)
            kv(out, ", ", "scale_grad_by_freq", &a[5]);
        if (a[6].i)
            dpc_buf_puts(out, ", sparse=True");
        break;
    case BI_DROPOUT:
    case BI_DROPOUT2D:
        kv(out, "", "p", &a[0]);
        kv(out, ", ", "inplace", &a[1]);
        break;
    case BI_RELU:
    case BI_SILU:
        if (a[0].i)
            dpc_buf_puts(out, "inplace=True");
        break;
    case BI_GELU: dpc_buf_printf(out, "approximate='%s'", a[0].s); break;
    case BI_SOFTMAX:
    case BI_LOGSOFTMAX: kv(out, "", "dim", &a[0]); break;
    case BI_FLATTEN:
        kv(out, "", "start_dim", &a[0]);
        kv(out, ", ", "end_dim", &a[1]);
        break;
    default: break;
    }
}
