/* sema_expr.c - the interpreter of constructor expressions: names in
 * scope, arithmetic (sema_values.c), f-strings, dicts, list and dict
 * comprehensions over range(n), Python's scalar builtins, partial(), and
 * calls, which build modules through sema.construct (sema.c); sema_eval, a
 * constant expression in a module's scope (dims, reshape sizes, defaults),
 * for the passes after instantiation.
 *
 * It is its own file, below the module tree (sema.c), because ctensor.c
 * and the IR builder evaluate constant expressions with it: building
 * modules, which needs them, is reached only through the construct hook
 * that sema_instantiate sets. */
#include "sema.h"

#include <string.h>

#define MAX_RANGE 4096

const module_def *find_module(const program *p, const char *name) {
    for (int i = 0; i < p->modules.len; i++) {
        const module_def *d = p->modules.items[i];
        if (strcmp(d->name, name) == 0)
            return d;
    }
    return NULL;
}

typedef struct sema_cx {
    sema *s;
    const env *e;
} sema_cx;

static bool sema_chain_eval(void *cx, const node *n, void *out) {
    return eval(((sema_cx *)cx)->s, ((sema_cx *)cx)->e, n, out);
}

static bool sema_chain_apply(void *cx, const node *op, void *acc, const void *r) {
    val t;
    if (!sema_arith(((sema_cx *)cx)->s->c, op->op, acc, r, op->at, &t))
        return false;
    *(val *)acc = t;
    return true;
}

static bool sema_chain_skip(void *cx, const node *op, const void *acc) {
    (void)cx;
    return sema_truthy(acc) == (op->op == OP_OR);
}

static DPC_NOINLINE bool eval_binop(sema *s, const env *e, const node *n, val *out) {
    sema_cx cx = {s, e};
    return eval_binop_chain(&s->c->arena, n, &cx, sizeof *out, sema_chain_eval, sema_chain_apply, sema_chain_skip,
                            out);
}

bool sema_eval(dpc_ctx *c, model *m, const inst *self, const node *n, val *out) {
    sema s = {.c = c, .m = m, .consts_only = true};
    env e = {self ? self->pnames : NULL, self ? self->pvals : NULL, self ? self->np : 0};
    return eval(&s, &e, n, out);
}

DPC_NOINLINE bool eval_args(sema *s, const env *e, const node *call, bound_arg **out, int *n) {
    int k = call->args.len, cap = k, m = 0;
    bound_arg *b = arena_alloc(&s->c->arena, sizeof *b * (size_t)(k ? k : 1));
    bool ok = true;
    for (int i = 0; i < k; i++) {
        const arg *a = call->args.items[i];
        val v;
        if (!eval(s, e, a->value, &v)) {
            ok = false;
            continue;
        }
        if (a->name != dp_splat) {
            b[m++] = (bound_arg){a->name, v, a->value->at, a->at};
            continue;
        }
        /* *xs: the items, as positional arguments */
        if (v.kind != V_LIST && v.kind != V_TUPLE) {
            error_at(s->c, a->at, "'*' spreads a list or tuple, got %s", val_kind_name(v.kind));
            ok = false;
            continue;
        }
        if (m + v.n + (k - i) > cap) {
            cap = m + v.n + (k - i);
            bound_arg *nb = arena_alloc(&s->c->arena, sizeof *nb * (size_t)cap);
            memcpy(nb, b, sizeof *nb * (size_t)m);
            b = nb;
        }
        for (int j = 0; j < v.n; j++)
            b[m++] = (bound_arg){NULL, v.items[j], a->value->at, a->at};
    }
    *out = b;
    *n = m;
    return ok;
}

/* Whether an f-string can show v as Python would: numbers, bools, None,
 * strings, and tuples of them (a module or a class prints as its whole
 * PyTorch repr there, which is not what an extra_repr line wants). */
static bool fstr_showable(const val *v) {
    if (v->kind == V_MODULE || v->kind == V_CLASS || v->kind == V_LIST || v->kind == V_DICT)
        return false;
    if (v->kind == V_TUPLE)
        for (int i = 0; i < v->n; i++)
            if (!fstr_showable(&v->items[i]) || v->items[i].kind == V_STR)
                return false;
    return true;
}

/* f"...": each {name} is the value of a name in scope (a constructor
 * parameter, a constant, a loop variable) as Python's f-string shows it;
 * {{ and }} are braces. Errors point at the brace: the text between the
 * quotes is the source's, so offsets are columns. */
static DPC_NOINLINE bool eval_fstr(sema *s, const env *e, const node *n, val *out) {
    dpc_buf b;
    dpc_buf_init(&b);
    bool ok = true;
    for (const char *p = n->str; *p && ok; p++) {
        loc at = n->at;
        at.col += 2 + (int)(p - n->str); /* past f" */
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            dpc_buf_put(&b, p++, 1);
            continue;
        }
        if (*p == '}') {
            error_at(s->c, at, "f-string: a single '}' is not allowed; write '}}' for a brace");
            ok = false;
            break;
        }
        if (*p != '{') {
            dpc_buf_put(&b, p, 1);
            continue;
        }
        const char *end = strchr(p, '}');
        if (!end) {
            error_at(s->c, at, "f-string: '{' without a closing '}'; write '{{' for a brace");
            ok = false;
            break;
        }
        char *name = arena_strndup(&s->c->arena, p + 1, (size_t)(end - p - 1));
        bool ident = name[0] && !(name[0] >= '0' && name[0] <= '9');
        for (const char *q = name; *q; q++)
            ident &= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_';
        if (!ident) {
            error_at(s->c, at,
                     "f-string: '{%s}' is not a name; only {name} is supported (a constructor parameter, "
                     "a constant or a loop variable)", name);
            ok = false;
            break;
        }
        int k = -1;
        for (int i = e->n - 1; i >= 0 && k < 0; i--)
            if (strcmp(e->names[i], name) == 0)
                k = i;
        if (k < 0) {
            const char *near = nearest_name(name, e->names, e->n);
            error_at(s->c, at, "f-string: unknown name '{%s}'%s%s%s", name, near ? "; did you mean '" : "",
                     near ? near : "", near ? "'?" : "");
            ok = false;
            break;
        }
        if (!fstr_showable(&e->vals[k])) {
            error_at(s->c, at,
                     "f-string: '{%s}' is %s; an f-string shows numbers, bools, None, strings and tuples of numbers",
                     name, e->vals[k].kind == V_MODULE ? "a module" : e->vals[k].kind == V_CLASS ? "a module class"
                     : e->vals[k].kind == V_LIST ? "a list" : e->vals[k].kind == V_DICT ? "a dict"
                     : "a tuple of strings or modules");
            ok = false;
            break;
        }
        repr_value(&e->vals[k], &b);
        p = end;
    }
    if (ok) {
        out->kind = V_STR;
        out->s = arena_strndup(&s->c->arena, b.data ? b.data : "", b.len);
    }
    dpc_buf_free(&b);
    return ok;
}

/* {k: v, ...} with string keys: Sequential's named entries (an OrderedDict in PyTorch). */
static DPC_NOINLINE bool eval_dict(sema *s, const env *e, const node *n, val *out) {
    int k = n->args.len / 2;
    *out = (val){.kind = V_DICT, .n = k};
    out->items = arena_alloc(&s->c->arena, sizeof(val) * (size_t)(k ? k : 1));
    out->keys = arena_alloc(&s->c->arena, sizeof(char *) * (size_t)(k ? k : 1));
    for (int i = 0; i < k; i++) {
        val key;
        const node *kn = n->args.items[2 * i];
        if (!eval(s, e, kn, &key) || !eval(s, e, n->args.items[2 * i + 1], &out->items[i]))
            return false;
        if (key.kind != V_STR) {
            error_at(s->c, kn->at, "a dict key must be a string, got %s", val_kind_name(key.kind));
            return false;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(out->keys[j], key.s) == 0) {
                error_at(s->c, kn->at, "key '%s' is given twice", key.s);
                return false;
            }
        out->keys[i] = key.s;
    }
    return true;
}

const val *lookup_env(const env *e, const char *name) {
    for (int i = e->n - 1; i >= 0; i--)
        if (strcmp(e->names[i], name) == 0)
            return &e->vals[i];
    return NULL;
}

static DPC_NOINLINE bool eval_scalar_fn(sema *s, const env *e, const node *n, val *out) {
    const char *fn = n->lhs->str;
    int k = n->args.len;
    val *a = arena_alloc(&s->c->arena, sizeof(val) * (size_t)(k ? k : 1));
    for (int i = 0; i < k; i++) {
        const arg *ag = n->args.items[i];
        if (ag->name) {
            error_at(s->c, ag->at, "%s() takes no keyword arguments", fn);
            return false;
        }
        if (!eval(s, e, ag->value, &a[i]))
            return false;
    }
    return sema_scalar_fn(s, fn, a, k, n->at, out);
}

/* partial(Module, args...): a class with arguments bound, as functools.partial. */
static DPC_NOINLINE bool eval_partial(sema *s, const env *e, const node *n, val *out) {
    bound_arg *args = NULL;
    int nargs = 0;
    if (!eval_args(s, e, n, &args, &nargs))
        return false;
    if (nargs < 1 || args[0].name || args[0].v.kind != V_CLASS) {
        error_at(s->c, n->at, "partial() takes a module class first, as in partial(BatchNorm2d, eps=0.001)");
        return false;
    }
    const val *base = &args[0].v;
    int k = base->n + nargs - 1;
    *out = (val){.kind = V_CLASS, .s = base->s, .n = k};
    out->items = arena_alloc(&s->c->arena, sizeof(val) * (size_t)(k ? k : 1));
    out->keys = arena_alloc(&s->c->arena, sizeof(char *) * (size_t)(k ? k : 1));
    for (int i = 0; i < base->n; i++) {
        out->items[i] = base->items[i];
        out->keys[i] = base->keys[i];
    }
    for (int i = 1; i < nargs; i++) {
        out->items[base->n + i - 1] = args[i].v;
        out->keys[base->n + i - 1] = args[i].name;
    }
    return true;
}

static DPC_NOINLINE bool eval_call(sema *s, const env *e, const node *n, val *out) {
    if (s->consts_only) {
        error_at(s->c, n->at, "a constant integer expression is needed here, not a call");
        return false;
    }
    if (n->lhs->kind != ND_NAME) {
        error_at(s->c, n->at, "only modules can be called here");
        return false;
    }
    const char *name = n->lhs->str;
    if (strcmp(name, "range") == 0) {
        error_at(s->c, n->at, "range() is only allowed in a list comprehension");
        return false;
    }
    if (strcmp(name, "partial") == 0)
        return eval_partial(s, e, n, out);
    if (!lookup_env(e, name) && is_scalar_fn(name))
        return eval_scalar_fn(s, e, n, out);
    return s->construct(s, e, n, out);
}

static DPC_NOINLINE bool eval_listcomp(sema *s, const env *e, const node *n, val *out) {
    const node *it = n->rhs;
    if (it->kind != ND_CALL || it->lhs->kind != ND_NAME || strcmp(it->lhs->str, "range") != 0 ||
        it->args.len != 1 || ((arg *)it->args.items[0])->name) {
        error_at(s->c, it->at, "a list comprehension must iterate over range(n)");
        return false;
    }
    val cnt;
    if (!eval(s, e, ((arg *)it->args.items[0])->value, &cnt))
        return false;
    if (cnt.kind != V_INT || cnt.i < 0) {
        error_at(s->c, it->at, "range() needs a non-negative int");
        return false;
    }
    if (cnt.i > MAX_RANGE) {
        error_at(s->c, it->at, "range(%lld) is too large (limit %d)", (long long)cnt.i, MAX_RANGE);
        return false;
    }
    env inner = *e;
    inner.names = arena_alloc(&s->c->arena, sizeof(char *) * (size_t)(e->n + 1));
    inner.vals = arena_alloc(&s->c->arena, sizeof(val) * (size_t)(e->n + 1));
    memcpy(inner.names, e->names, sizeof(char *) * (size_t)e->n);
    memcpy(inner.vals, e->vals, sizeof(val) * (size_t)e->n);
    inner.names[e->n] = n->str;
    inner.n = e->n + 1;
    bool dict = n->kind == ND_DICTCOMP;
    out->kind = dict ? V_DICT : V_LIST;
    out->n = (int)cnt.i;
    out->items = arena_alloc(&s->c->arena, sizeof(val) * (size_t)(cnt.i ? cnt.i : 1));
    out->keys = dict ? arena_alloc(&s->c->arena, sizeof(char *) * (size_t)(cnt.i ? cnt.i : 1)) : NULL;
    for (int64_t i = 0; i < cnt.i; i++) {
        inner.vals[e->n] = (val){.kind = V_INT, .i = i};
        if (!dict) {
            if (!eval(s, &inner, n->lhs, &out->items[i]))
                return false;
            continue;
        }
        val key;
        if (!eval(s, &inner, n->lhs, &key) || !eval(s, &inner, n->third, &out->items[i]))
            return false;
        if (key.kind != V_STR) {
            error_at(s->c, n->lhs->at, "a dict key must be a string, got %s", val_kind_name(key.kind));
            return false;
        }
        for (int64_t j = 0; j < i; j++)
            if (strcmp(out->keys[j], key.s) == 0) {
                error_at(s->c, n->lhs->at, "key '%s' is given twice", key.s);
                return false;
            }
        out->keys[i] = key.s;
    }
    return true;
}

static bool eval_node(sema *s, const env *e, const node *n, val *out);

/* Every level of evaluation goes through here, constructions included, so
 * the nesting is bounded in all (DPC_MAX_EVAL_NEST). */
bool eval(sema *s, const env *e, const node *n, val *out) {
    if (s->nest >= DPC_MAX_EVAL_NEST) {
        memset(out, 0, sizeof *out);
        if (!s->nest_error)
            error_at(s->c, n->at, "modules and expressions nested too deeply (limit %d levels in all)",
                     DPC_MAX_EVAL_NEST);
        s->nest_error = true;
        return false;
    }
    s->nest++;
    bool ok = eval_node(s, e, n, out);
    s->nest--;
    return ok;
}

static DPC_NOINLINE bool eval_neg(sema *s, const env *e, const node *n, val *out) {
    val v;
    if (!eval(s, e, n->lhs, &v))
        return false;
    if (v.kind == V_INT) {
        if (v.i == INT64_MIN) {
            error_at(s->c, n->at, "integer overflow");
            return false;
        }
        out->kind = V_INT;
        out->i = -v.i;
        return true;
    }
    if (v.kind == V_FLOAT) {
        out->kind = V_FLOAT;
        out->f = -v.f;
        return true;
    }
    error_at(s->c, n->at, "cannot negate %s", val_kind_name(v.kind));
    return false;
}

static DPC_NOINLINE bool unknown_name(sema *s, const env *e, const node *n) {
    const char *near = nearest_name(n->str, e->names, e->n);
    if (near)
        error_at(s->c, n->at, "unknown name '%s'; did you mean '%s'?", n->str, near);
    else if (builtin_lookup(n->str) || find_module(&s->m->prog, n->str))
        error_at(s->c, n->at, "module '%s' must be called: '%s(...)'", n->str, n->str);
    else
        error_at(s->c, n->at, "unknown name '%s'", n->str);
    return false;
}

static bool eval_node(sema *s, const env *e, const node *n, val *out) {
    memset(out, 0, sizeof *out);
    switch (n->kind) {
    case ND_INT: out->kind = V_INT; out->i = n->ival; return true;
    case ND_FLOAT: out->kind = V_FLOAT; out->f = n->fval; return true;
    case ND_BOOL: out->kind = V_BOOL; out->i = n->ival; return true;
    case ND_STR: out->kind = V_STR; out->s = n->str; return true;
    case ND_NONE: out->kind = V_NONE; return true;
    case ND_NAME:
        for (int i = e->n - 1; i >= 0; i--)
            if (strcmp(e->names[i], n->str) == 0) {
                *out = e->vals[i];
                return true;
            }
        if (!s->consts_only && (builtin_lookup(n->str) || find_module(&s->m->prog, n->str))) {
            /* a module named, not called: a class (norm_layer=BatchNorm2d) */
            out->kind = V_CLASS;
            out->s = n->str;
            return true;
        }
        return unknown_name(s, e, n);
    case ND_NEG: return eval_neg(s, e, n, out);
    case ND_NOT: {
        val v;
        if (!eval(s, e, n->lhs, &v))
            return false;
        if (n->op == OP_INVERT) {
            error_at(s->c, n->at, "'~' applies to bool tensors in forward; write 'not' for a constructor value");
            return false;
        }
        *out = (val){.kind = V_BOOL, .i = !sema_truthy(&v)};
        return true;
    }
    case ND_COND: {
        val c;
        if (!eval(s, e, n->third, &c))
            return false;
        return eval(s, e, sema_truthy(&c) ? n->lhs : n->rhs, out);
    }
    case ND_BINOP: return eval_binop(s, e, n, out);
    case ND_CALL: return eval_call(s, e, n, out);
    case ND_TUPLE:
    case ND_LIST: {
        out->kind = n->kind == ND_TUPLE ? V_TUPLE : V_LIST;
        out->n = n->args.len;
        out->items = arena_alloc(&s->c->arena, sizeof(val) * (size_t)(out->n ? out->n : 1));
        bool ok = true;
        for (int i = 0; i < out->n; i++)
            ok &= eval(s, e, n->args.items[i], &out->items[i]);
        return ok;
    }
    case ND_LISTCOMP:
    case ND_DICTCOMP: return eval_listcomp(s, e, n, out);
    case ND_FSTR: return eval_fstr(s, e, n, out);
    case ND_DICT: return eval_dict(s, e, n, out);
    case ND_INDEX:
    case ND_SUBSCRIPT:
        error_at(s->c, n->at, "indexing is only allowed in forward");
        return false;
    case ND_ATTR:
        error_at(s->c, n->at, "'.%s' is only allowed in forward", n->str);
        return false;
    case ND_SLICE:
    case ND_ELLIPSIS:
        error_at(s->c, n->at, "a slice is only allowed inside [...]");
        return false;
    }
    return false;
}
