/* builtins.c - the table of torch.nn modules dpc knows (one row each,
 * defined beside its functions in nn_*.c and listed in DPC_MODULES) and
 * what goes through the rows: binding constructor arguments to the row's
 * signature (PyTorch's argument names, order and defaults), the size
 * limits on them, and the dispatch of the rows' parameter and repr hooks.
 * The helpers the rows themselves call (arguments, state_dict entries,
 * printing values) are nn_helpers.c's, below this table.
 *
 * Arguments are kept as given (an int stays an int, a tuple a tuple),
 * because PyTorch's repr prints them that way: MaxPool2d(2) prints
 * kernel_size=2 while Conv2d(1, 10, 5) prints kernel_size=(5, 5). */
#include "irbuild.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const builtin *const BUILTINS[] = {
    NULL, /* BI_NONE: a user module */
#define X(e, id) &nn_##id,
    DPC_MODULES(X)
#undef X
};
_Static_assert(sizeof BUILTINS / sizeof BUILTINS[0] == BI_COUNT, "one row per builtin module");

const builtin *builtin_row(builtin_kind k) { return k > 0 && k < BI_COUNT ? BUILTINS[k] : NULL; }

builtin_kind builtin_lookup(const char *name) {
    for (int k = 1; k < BI_COUNT; k++)
        if (strcmp(BUILTINS[k]->name, name) == 0)
            return (builtin_kind)k;
    return BI_NONE;
}

const char *builtin_name(builtin_kind k) { return k > 0 && k < BI_COUNT ? BUILTINS[k]->name : NULL; }

const char *const *builtin_names(int *n) {
    static const char *names[BI_COUNT];
    for (int k = 1; k < BI_COUNT; k++)
        names[k - 1] = BUILTINS[k]->name;
    *n = BI_COUNT - 1;
    return names;
}

/* ----------------------------------------------------------- binding */

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

static bool is_int_tuple(const val *v, int n) {
    if ((v->kind != V_TUPLE && v->kind != V_LIST) || v->n != n)
        return false;
    for (int i = 0; i < n; i++)
        if (v->items[i].kind != V_INT)
            return false;
    return true;
}

static bool is_int_pair(const val *v) { return is_int_tuple(v, 2); }

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
    case 'u': return v->kind == V_INT || is_int_tuple(v, 1);
    case 'U': return v->kind == V_INT || is_int_tuple(v, 1) || v->kind == V_STR;
    case 'n': return v->kind == V_NONE || v->kind == V_INT;
    case 'g': return v->kind == V_NONE || v->kind == V_FLOAT || v->kind == V_INT;
    case 'B': return v->kind == V_NONE || v->kind == V_BOOL;
    case 'r':
        if (v->kind == V_NONE || v->kind == V_FLOAT || v->kind == V_INT)
            return true;
        if ((v->kind != V_TUPLE && v->kind != V_LIST) || v->n == 0)
            return false;
        for (int i = 0; i < v->n; i++)
            if (v->items[i].kind != V_FLOAT && v->items[i].kind != V_INT)
                return false;
        return true;
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
    case 'u': return "an int or a tuple of one int";
    case 'U': return "an int, a tuple of one int or a string";
    case 'n': return "an int or None";
    case 'g': return "a number or None";
    case 'B': return "a bool or None";
    case 'r': return "a number, a tuple of numbers or None";
    case 't': return "an int or a tuple of ints";
    case 'o': return "an int, None or a pair";
    case 'l': return "a list of modules";
    case 'm': return "a module";
    case 'L': return "a list of ints or None";
    }
    return "a value";
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
    const builtin *b = BUILTINS[in->bi];
    dpc_arena *a = &c->arena;
    in->type_name = b->name;
    if (b->varargs)
        return b->varargs(c, in, args, nargs);
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
                const char *cands[BUILTIN_MAX_ARGS];
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
                     kind_expect(b->args[slot].kind), val_kind_name(args[i].v.kind));
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
    if (b->init)
        b->init(c, in, arg_at);
    return c->nerrors == before;
}

/* ------------------------------------------- the rows' hooks, dispatched */

void builtin_params(dpc_ctx *c, model *m, inst *in) {
    const builtin *b = builtin_row(in->bi);
    if (b && b->params)
        b->params(c, m, in);
}

void builtin_extra_repr(const inst *in, dpc_buf *out) {
    const builtin *b = builtin_row(in->bi);
    if (b && b->repr)
        b->repr(in, out);
}
