/* sema.c - semantic analysis of the module tree: evaluates constructor
 * expressions (integer arithmetic checked for overflow, exact division and
 * division by zero), resolves module names, binds arguments to signatures
 * and instantiates the tree that `dpc print` shows and whose parameters form
 * the state_dict. Forward bodies are handled later, by irbuild.c. */
#include "compiler.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_RANGE 4096
#define MAX_INSTANCES 100000
#define MAX_INST_DEPTH 64

typedef struct env {
    const char **names;
    val *vals;
    int n;
} env;

typedef struct sema {
    dpc_ctx *c;
    model *m;
    int ninst;
    const module_def *stack[MAX_INST_DEPTH];
    int depth;
    int nest;         /* eval levels in progress, through constructions too */
    bool nest_error;  /* DPC_MAX_EVAL_NEST was reported */
    bool consts_only; /* sema_eval: a constant expression, nothing is built */
} sema;

static bool eval(sema *s, const env *e, const node *n, val *out);

static const module_def *find_module(const program *p, const char *name) {
    for (int i = 0; i < p->modules.len; i++) {
        const module_def *d = p->modules.items[i];
        if (strcmp(d->name, name) == 0)
            return d;
    }
    return NULL;
}

static const char *val_kind_name(val_kind k) {
    static const char *n[] = {"None", "int", "float", "bool", "string", "tuple", "list", "module", "module class",
                              "dict"};
    return n[k];
}

/* ------------------------------------------------------ arithmetic */

static bool num(const val *v, double *d) {
    if (v->kind == V_INT || v->kind == V_BOOL)
        *d = (double)v->i;
    else if (v->kind == V_FLOAT)
        *d = v->f;
    else
        return false;
    return true;
}

static bool int_binop(sema *s, int op, int64_t a, int64_t b, loc at, int64_t *r) {
    bool ok = true;
    switch (op) {
    case '+': ok = !__builtin_add_overflow(a, b, r); break;
    case '-': ok = !__builtin_sub_overflow(a, b, r); break;
    case '*': ok = !__builtin_mul_overflow(a, b, r); break;
    case '/':
    case 'f':
    case '%':
        if (b == 0) {
            error_at(s->c, at, "division by zero");
            return false;
        }
        if (a == INT64_MIN && b == -1) {
            ok = false;
            break;
        }
        if (op == '/') {
            if (a % b != 0) {
                error_at(s->c, at, "%lld / %lld is not exact; use // for floor division", (long long)a,
                         (long long)b);
                return false;
            }
            *r = a / b;
        } else {
            int64_t q = a / b, m = a % b;
            if (m != 0 && ((m < 0) != (b < 0))) {
                q -= 1;
                m += b;
            }
            *r = op == 'f' ? q : m;
        }
        break;
    case 'p': {
        if (b < 0) {
            error_at(s->c, at, "negative integer exponent %lld", (long long)b);
            return false;
        }
        /* by squaring: a few steps whatever b is; 0, 1 and -1 never overflow */
        int64_t base = a, acc = 1;
        for (int64_t k = b; k > 0 && ok; k >>= 1) {
            if (k & 1)
                ok = !__builtin_mul_overflow(acc, base, &acc);
            if (ok && k > 1)
                ok = !__builtin_mul_overflow(base, base, &base);
        }
        *r = acc;
        break;
    }
    default:
        error_at(s->c, at, "operator not allowed on integers here");
        return false;
    }
    if (!ok)
        error_at(s->c, at, "integer overflow in %lld %s %lld", (long long)a,
                 op == 'f' ? "//" : op == 'p' ? "**" : (char[]){(char)op, 0}, (long long)b);
    return ok;
}

bool sema_truthy(const val *v) {
    switch (v->kind) {
    case V_NONE: return false;
    case V_INT:
    case V_BOOL: return v->i != 0;
    case V_FLOAT: return v->f != 0;
    case V_STR: return v->s[0] != 0;
    case V_TUPLE:
    case V_LIST:
    case V_DICT: return v->n != 0;
    case V_MODULE:
    case V_CLASS: return true;
    }
    return true;
}

const char *sema_op_text(int op) {
    switch (op) {
    case 'f': return "//";
    case 'p': return "**";
    case OP_EQ: return "==";
    case OP_NE: return "!=";
    case OP_LE: return "<=";
    case OP_GE: return ">=";
    case OP_IS: return "is";
    case OP_ISNOT: return "is not";
    case OP_AND: return "and";
    case OP_OR: return "or";
    case OP_BITAND: return "&";
    case OP_BITOR: return "|";
    }
    static _Thread_local char one[2];
    one[0] = (char)op;
    return one;
}

/* Python's == on constructor values: numbers by value (True == 1), strings
 * by content, tuples and lists item by item, None with None, a module or a
 * class only with itself. */
static bool val_equal(const val *a, const val *b) {
    double x, y;
    if (a->kind == V_INT && b->kind == V_INT)
        return a->i == b->i;
    if (num(a, &x) && num(b, &y))
        return x == y;
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case V_NONE: return true;
    case V_STR: return strcmp(a->s, b->s) == 0;
    case V_MODULE: return a->mod == b->mod;
    case V_CLASS: return strcmp(a->s, b->s) == 0 && a->n == 0 && b->n == 0;
    case V_TUPLE:
    case V_LIST:
        if (a->n != b->n)
            return false;
        for (int i = 0; i < a->n; i++)
            if (!val_equal(&a->items[i], &b->items[i]))
                return false;
        return true;
    default: return false;
    }
}

/* ==, !=, <, <=, >, >=, is, is not, and, or on constructor values (Python's
 * rules: `and`/`or` give one of their operands). Returns -1 when op is not
 * one of them. */
static int compare(dpc_ctx *c, int op, const val *a, const val *b, loc at, val *out) {
    if (op == OP_AND || op == OP_OR) {
        bool t = sema_truthy(a);
        *out = (op == OP_AND) == t ? *b : *a;
        return 1;
    }
    if (op == OP_IS || op == OP_ISNOT) {
        bool same;
        if (a->kind == V_NONE || b->kind == V_NONE)
            same = a->kind == b->kind;
        else if (a->kind == V_MODULE && b->kind == V_MODULE)
            same = a->mod == b->mod;
        else if (a->kind == V_BOOL && b->kind == V_BOOL)
            same = a->i == b->i;
        else if (a->kind == V_CLASS && b->kind == V_CLASS)
            same = strcmp(a->s, b->s) == 0 && a->n == 0 && b->n == 0;
        else {
            error_at(c, at, "'%s' compares with None (or True, False): write '==' for %s and %s", sema_op_text(op),
                     val_kind_name(a->kind), val_kind_name(b->kind));
            return 0;
        }
        *out = (val){.kind = V_BOOL, .i = same == (op == OP_IS)};
        return 1;
    }
    if (op != OP_EQ && op != OP_NE && op != OP_LT && op != OP_GT && op != OP_LE && op != OP_GE)
        return -1;
    int cmp; /* -1, 0, 1; 2 for unordered (NaN) */
    double x, y;
    if (a->kind == V_INT && b->kind == V_INT)
        cmp = a->i < b->i ? -1 : a->i > b->i;
    else if (num(a, &x) && num(b, &y))
        cmp = x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
    else if (a->kind == V_STR && b->kind == V_STR) {
        int r = strcmp(a->s, b->s);
        cmp = r < 0 ? -1 : r > 0;
    } else if (op == OP_EQ || op == OP_NE) {
        bool eq = val_equal(a, b);
        *out = (val){.kind = V_BOOL, .i = eq == (op == OP_EQ)};
        return 1;
    } else {
        error_at(c, at, "cannot compare %s and %s with '%s'", val_kind_name(a->kind), val_kind_name(b->kind),
                 sema_op_text(op));
        return 0;
    }
    bool r = op == OP_EQ ? cmp == 0 : op == OP_NE ? cmp != 0 : op == OP_LT ? cmp == -1 : op == OP_GT ? cmp == 1
           : op == OP_LE ? (cmp == -1 || cmp == 0) : (cmp == 1 || cmp == 0);
    *out = (val){.kind = V_BOOL, .i = r};
    return 1;
}

bool sema_arith(dpc_ctx *c, int op, const val *a, const val *b, loc at, val *out) {
    sema s = {.c = c};
    memset(out, 0, sizeof *out);
    int k = compare(c, op, a, b, at, out);
    if (k >= 0)
        return k == 1;
    if (op == '+' && a->kind == b->kind && (a->kind == V_LIST || a->kind == V_TUPLE)) {
        /* [a] + [b], (1, 2) + (3,): concatenation */
        *out = (val){.kind = a->kind, .n = a->n + b->n};
        out->items = arena_alloc(&c->arena, sizeof(val) * (size_t)(out->n ? out->n : 1));
        memcpy(out->items, a->items, sizeof(val) * (size_t)a->n);
        memcpy(out->items + a->n, b->items, sizeof(val) * (size_t)b->n);
        return true;
    }
    if (a->kind == V_INT && b->kind == V_INT) {
        out->kind = V_INT;
        return int_binop(&s, op, a->i, b->i, at, &out->i);
    }
    double x, y;
    if (!num(a, &x) || !num(b, &y) || op == '@') {
        error_at(c, at, "cannot apply '%s' to %s and %s here", sema_op_text(op), val_kind_name(a->kind),
                 val_kind_name(b->kind));
        return false;
    }
    out->kind = V_FLOAT;
    switch (op) {
    case '+': out->f = x + y; break;
    case '-': out->f = x - y; break;
    case '*': out->f = x * y; break;
    case 'p': out->f = pow(x, y); break;
    case '/':
    case 'f':
    case '%':
        if (y == 0) {
            error_at(c, at, "division by zero");
            return false;
        }
        out->f = op == '/' ? x / y : op == 'f' ? floor(x / y) : x - floor(x / y) * y;
        break;
    }
    return true;
}

bool eval_binop_chain(dpc_arena *arena, const node *n, void *cx, size_t size, chain_eval ev, chain_apply ap,
                      chain_skip sk, void *out) {
    int len = 0;
    for (const node *p = n; p->kind == ND_BINOP; p = p->lhs)
        len++;
    const node **spine = arena_alloc(arena, sizeof *spine * (size_t)(len ? len : 1));
    const node *leaf = n;
    for (int i = 0; i < len; i++, leaf = leaf->lhs)
        spine[i] = leaf;
    size_t slot = (size + 15) & ~(size_t)15; /* both slots aligned as the arena's */
    char *acc = arena_alloc(arena, 2 * slot), *r = acc + slot;
    bool ok = ev(cx, leaf, acc);
    for (int i = len - 1; i >= 0; i--) {
        if (ok && (spine[i]->op == OP_AND || spine[i]->op == OP_OR) && sk(cx, spine[i], acc))
            continue; /* short-circuit: acc is the result, the right side is not evaluated */
        bool ok_r = ev(cx, spine[i]->rhs, r); /* both sides, for their errors */
        ok = ok && ok_r && ap(cx, spine[i], acc, r);
    }
    if (ok)
        memcpy(out, acc, size);
    return ok;
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

static const char *ptype_text(ptype_kind k) {
    switch (k) {
    case PT_INT: return "an int";
    case PT_FLOAT: return "a float";
    case PT_BOOL: return "a bool";
    case PT_STR: return "a string";
    case PT_MODULE: return "a module, a module class or None";
    case PT_TENSOR: break;
    }
    return "a tensor";
}

/* A constructor parameter's value (an int given for a float already widened). */
static bool param_accepts(const param *p, const val *v) {
    switch (p->kind) {
    case PT_INT: return v->kind == V_INT;
    case PT_FLOAT: return v->kind == V_FLOAT;
    case PT_BOOL: return v->kind == V_BOOL;
    case PT_STR: return v->kind == V_STR;
    case PT_MODULE: return v->kind == V_MODULE || v->kind == V_CLASS || v->kind == V_NONE;
    case PT_TENSOR: break;
    }
    return false;
}

bool sema_scalar_default(dpc_ctx *c, const param *p, val *v, loc at) {
    if (p->kind == PT_FLOAT && v->kind == V_INT) {
        v->kind = V_FLOAT;
        v->f = (double)v->i;
    }
    if (param_accepts(p, v))
        return true;
    error_at(c, at, "the default of '%s' must be %s, got %s", p->name, ptype_text(p->kind), val_kind_name(v->kind));
    return false;
}

bool sema_eval(dpc_ctx *c, model *m, const inst *self, const node *n, val *out) {
    sema s = {.c = c, .m = m, .consts_only = true};
    env e = {self ? self->pnames : NULL, self ? self->pvals : NULL, self ? self->np : 0};
    return eval(&s, &e, n, out);
}

/* --------------------------------------------------- instantiation */

static inst *new_inst(sema *s, builtin_kind bi, const char *type, loc at) {
    if (++s->ninst > MAX_INSTANCES) {
        if (s->ninst == MAX_INSTANCES + 1)
            error_at(s->c, at, "too many module instances (limit %d)", MAX_INSTANCES);
        return NULL;
    }
    inst *in = arena_alloc(&s->c->arena, sizeof *in);
    in->bi = bi;
    in->type_name = type;
    in->at = at;
    return in;
}

static DPC_NOINLINE bool eval_args(sema *s, const env *e, const node *call, bound_arg **out, int *n) {
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

static bool add_member(sema *s, inst *in, const char *name, val *v, loc at);
static void module_body(sema *s, inst *in, env *e, const vec *items);

/* Binds a user module's constructor parameters, then evaluates its members
 * in source order (= PyTorch's registration order). */
static inst *instantiate_user(sema *s, const module_def *d, const bound_arg *args, int nargs, loc at) {
    dpc_ctx *c = s->c;
    for (int i = 0; i < s->depth; i++)
        if (s->stack[i] == d) {
            error_at(c, at, "module '%s' contains itself", d->name);
            return NULL;
        }
    if (s->depth >= MAX_INST_DEPTH) {
        error_at(c, at, "modules nested too deeply (limit %d)", MAX_INST_DEPTH);
        return NULL;
    }
    inst *in = new_inst(s, BI_NONE, d->name, at);
    if (!in)
        return NULL;
    in->def = d;
    int np = d->params.len, before = c->nerrors, pos = 0;
    in->np = np;
    in->pnames = arena_alloc(&c->arena, sizeof(char *) * (size_t)(np ? np : 1));
    in->pvals = arena_alloc(&c->arena, sizeof(val) * (size_t)(np ? np : 1));
    bool *set = arena_alloc(&c->arena, (size_t)(np ? np : 1));
    for (int i = 0; i < np; i++)
        in->pnames[i] = ((param *)d->params.items[i])->name;
    for (int i = 0; i < nargs; i++) {
        int slot = -1;
        if (!args[i].name) {
            if (pos >= np) {
                error_at(c, args[i].at, "%s() takes %d argument%s, got %d", d->name, np, np == 1 ? "" : "s",
                         nargs);
                break;
            }
            slot = pos++;
        } else {
            for (int j = 0; j < np; j++)
                if (strcmp(in->pnames[j], args[i].name) == 0)
                    slot = j;
            if (slot < 0) {
                const char *near = nearest_name(args[i].name, in->pnames, np);
                error_at(c, args[i].name_at, "%s() has no parameter '%s'%s%s%s", d->name, args[i].name,
                         near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
                continue;
            }
            if (set[slot]) {
                error_at(c, args[i].name_at, "%s() got parameter '%s' twice", d->name, args[i].name);
                continue;
            }
        }
        const param *p = d->params.items[slot];
        val v = args[i].v;
        if (p->kind == PT_FLOAT && v.kind == V_INT) {
            v.kind = V_FLOAT;
            v.f = (double)v.i;
        }
        if (!param_accepts(p, &v) && v.kind != V_NONE) {
            static const char *const tn[] = {"int", "float", "bool", "a tensor", "str",
                                             "Module (a module, a module class or None)"};
            error_at(c, args[i].at, "%s() parameter '%s' is %s, got %s", d->name, p->name, tn[p->kind],
                     val_kind_name(v.kind));
            continue;
        }
        in->pvals[slot] = v;
        set[slot] = true;
    }
    env e = {in->pnames, in->pvals, 0};
    for (int j = 0; j < np; j++) {
        const param *p = d->params.items[j];
        if (!set[j]) {
            if (!p->deflt) {
                if (c->nerrors == before)
                    error_at(c, at, "%s() missing required parameter '%s'", d->name, p->name);
                continue;
            }
            e.n = j; /* a default may use the parameters before it */
            if (!eval(s, &e, p->deflt, &in->pvals[j]))
                continue;
            /* a constructor parameter may default to None (Optional[int] = None) */
            if (in->pvals[j].kind != V_NONE)
                sema_scalar_default(c, p, &in->pvals[j], p->deflt->at);
        }
    }
    if (c->nerrors != before)
        return NULL;
    e.n = np;
    s->stack[s->depth++] = d;
    module_body(s, in, &e, &d->members);
    s->depth--;
    return in;
}

static int count_assigns(const vec *items) {
    int n = 0;
    for (int i = 0; i < items->len; i++) {
        const member *mb = items->items[i];
        n += mb->kind == MB_ASSIGN;
        if (mb->kind == MB_IF)
            n += count_assigns(&mb->then_items) + count_assigns(&mb->else_items);
    }
    return n;
}

/* `extra_repr = f"p={p}, mode={mode}"`: the line PyTorch's extra_repr
 * returns, shown in the module's print. */
static void set_extra_repr(sema *s, inst *in, const val *v, loc at) {
    if (v->kind != V_STR) {
        error_at(s->c, at, "extra_repr must be a string, got %s", val_kind_name(v->kind));
        return;
    }
    in->extra_repr = v->s;
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

/* Whether name is already a member or constant of in (params excluded:
 * their index is below nparams). */
static bool defined_here(const inst *in, int nparams, const char *name) {
    for (int i = 0; i < in->children.len; i++)
        if (strcmp(((inst_child *)in->children.items[i])->name, name) == 0)
            return true;
    for (int i = nparams; i < in->np; i++)
        if (strcmp(in->pnames[i], name) == 0)
            return true;
    for (int i = 0; i < in->tensors.len; i++)
        if (strcmp(((tmember *)in->tensors.items[i])->name, name) == 0)
            return true;
    return false;
}

static void body_assign(sema *s, inst *in, env *e, const member *mb, int nparams) {
    dpc_ctx *c = s->c;
    const module_def *d = in->def;
    if (defined_here(in, nparams, mb->name)) {
        error_at(c, mb->at, "member '%s' is defined twice in module '%s'", mb->name, d->name);
        return;
    }
    /* `layer_scale = Parameter(ones(dim, 1, 1) * layer_scale)`: a tensor
     * member may take a constructor parameter's name, as self.layer_scale
     * does in PyTorch; forward reads the member */
    if (ctensor_member(c, s->m, in, mb->name, mb->value, mb->at))
        return;
    int pi = -1;
    for (int j = 0; j < nparams; j++)
        if (strcmp(in->pnames[j], mb->name) == 0)
            pi = j;
    /* a member may have a parameter's name, as in `self.downsample =
     * downsample` or `self.dropout = nn.Dropout(dropout)`: members and
     * parameters are two namespaces (self.x and x); forward sees the
     * member, the constructor expressions the parameter */
    val v;
    if (!eval(s, e, mb->value, &v))
        return;
    if (strcmp(mb->name, "extra_repr") == 0) {
        set_extra_repr(s, in, &v, mb->value->at);
        return;
    }
    if (v.kind == V_MODULE || v.kind == V_LIST) {
        add_member(s, in, mb->name, &v, mb->value->at);
        return;
    }
    if (pi >= 0 && mb->value->kind == ND_NAME && strcmp(mb->value->str, mb->name) == 0)
        return; /* `stride = stride`: the parameter is already visible */
    /* a constant: visible to the members after it and to forward */
    in->pnames[in->np] = mb->name;
    in->pvals[in->np] = v;
    in->np++;
    e->n = in->np;
}

static void body_items(sema *s, inst *in, env *e, const vec *items, int nparams, int *entries) {
    dpc_ctx *c = s->c;
    for (int i = 0; i < items->len; i++) {
        const member *mb = items->items[i];
        if (mb->kind == MB_ASSIGN)
            body_assign(s, in, e, mb, nparams);
        else if (mb->kind == MB_IF) {
            val cond;
            if (eval(s, e, mb->value, &cond))
                body_items(s, in, e, sema_truthy(&cond) ? &mb->then_items : &mb->else_items, nparams, entries);
        } else if (mb->kind == MB_ENTRY) {
            if (ctensor_member(c, s->m, in, NULL, mb->value, mb->at))
                continue; /* register_buffer("name", ...) */
            if (!in->def->base) {
                error_at(c, mb->at,
                         "a bare module in a module body is an entry of a Sequential subclass "
                         "('module %s(...) extends Sequential'); here write 'name = ...'",
                         in->def->name);
                continue;
            }
            val v;
            if (!eval(s, e, mb->value, &v))
                continue;
            if (v.kind != V_MODULE) {
                error_at(c, mb->at, "an entry of Sequential subclass '%s' must be a module, got %s", in->def->name,
                         val_kind_name(v.kind));
                continue;
            }
            const char *name = arena_printf(&c->arena, "%d", (*entries)++);
            add_member(s, in, name, &v, mb->value->at);
        }
    }
}

/* The members and constants of a user module, in source order, the
 * branches of `if` taken as the constructor values say. */
static void module_body(sema *s, inst *in, env *e, const vec *items) {
    const module_def *d = in->def;
    if (d->base && strcmp(d->base, "Sequential") != 0)
        return; /* a builtin's subclass: instantiate_subclass */
    if (d->base && d->has_forward) {
        error_at(s->c, d->forward_at,
                 "module '%s' extends Sequential, which runs its entries in order: it has no forward", d->name);
        return;
    }
    int nparams = in->np, extra = count_assigns(items), entries = 0;
    const char **names = arena_alloc(&s->c->arena, sizeof(char *) * (size_t)(nparams + extra + 1));
    val *vals = arena_alloc(&s->c->arena, sizeof(val) * (size_t)(nparams + extra + 1));
    memcpy(names, in->pnames, sizeof(char *) * (size_t)nparams);
    memcpy(vals, in->pvals, sizeof(val) * (size_t)nparams);
    in->pnames = names;
    in->pvals = vals;
    e->names = names;
    e->vals = vals;
    body_items(s, in, e, items, nparams, &entries);
}

static bool add_member(sema *s, inst *in, const char *name, val *v, loc at) {
    inst *child = NULL;
    if (v->kind == V_MODULE)
        child = v->mod;
    else if (v->kind == V_LIST) {
        /* a list of modules becomes a ModuleList */
        bound_arg a = {NULL, *v, at};
        child = new_inst(s, BI_MODULELIST, "ModuleList", at);
        if (!child || !builtin_bind_values(s->c, child, &a, 1, at))
            return false;
    } else if (v->kind == V_CLASS) {
        error_at(s->c, at, "member '%s' is the class %s, not a module: call it, '%s(...)'", name, v->s, v->s);
        return false;
    } else {
        error_at(s->c, at, "member '%s' must be a module, got %s", name, val_kind_name(v->kind));
        return false;
    }
    if (strcmp(name, "forward") == 0) {
        error_at(s->c, at, "'forward' cannot be a member name");
        return false;
    }
    inst_child *ch = arena_alloc(&s->c->arena, sizeof *ch);
    ch->name = name;
    ch->mod = child;
    vec_push(&s->c->arena, &in->children, ch);
    return true;
}

static DPC_NOINLINE void unknown_callee(sema *s, const env *e, const node *callee) {
    const char *name = callee->str;
    if (dpc_is_function(name)) { /* the same list forward resolves calls with */
        error_at(s->c, callee->at, "'%s' is a function and can only be used in forward; members are modules", name);
        return;
    }
    const program *p = &s->m->prog;
    int nb, n = 0;
    const char *const *bn = builtin_names(&nb);
    const char **cands = arena_alloc(&s->c->arena, sizeof(char *) * (size_t)(nb + p->modules.len + 1));
    for (int i = 0; i < nb; i++)
        cands[n++] = bn[i];
    for (int i = 0; i < p->modules.len; i++)
        cands[n++] = ((module_def *)p->modules.items[i])->name;
    const char *near = nearest_name(name, cands, n);
    if (near)
        error_at(s->c, callee->at, "unknown module '%s'; did you mean '%s'?", name, near);
    else
        error_at(s->c, callee->at, "unknown module '%s'", name);
    (void)e;
}

static const val *lookup_env(const env *e, const char *name) {
    for (int i = e->n - 1; i >= 0; i--)
        if (strcmp(e->names[i], name) == 0)
            return &e->vals[i];
    return NULL;
}

/* Python's builtins on constructor values: max, min, abs, int, float, round, len. */
static bool is_scalar_fn(const char *name) {
    static const char *const fns[] = {"max", "min", "abs", "int", "float", "round", "len"};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (strcmp(fns[i], name) == 0)
            return true;
    return false;
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
    bool minmax = strcmp(fn, "max") == 0 || strcmp(fn, "min") == 0;
    if (minmax && k == 1 && (a[0].kind == V_TUPLE || a[0].kind == V_LIST)) {
        k = a[0].n;
        a = a[0].items;
    }
    if (minmax ? k < 1 : k != 1) {
        error_at(s->c, n->at, "%s() takes %s", fn, minmax ? "one or more numbers" : "one argument");
        return false;
    }
    if (strcmp(fn, "len") == 0) {
        if (a[0].kind != V_TUPLE && a[0].kind != V_LIST && a[0].kind != V_DICT && a[0].kind != V_STR) {
            error_at(s->c, n->at, "len() of %s", val_kind_name(a[0].kind));
            return false;
        }
        *out = (val){.kind = V_INT, .i = a[0].kind == V_STR ? (int64_t)strlen(a[0].s) : a[0].n};
        return true;
    }
    double x[64];
    bool all_int = true;
    if (k > 64) {
        error_at(s->c, n->at, "%s() of more than 64 values", fn);
        return false;
    }
    for (int i = 0; i < k; i++) {
        if (!num(&a[i], &x[i])) {
            error_at(s->c, n->at, "%s() takes numbers, got %s", fn, val_kind_name(a[i].kind));
            return false;
        }
        all_int &= a[i].kind != V_FLOAT;
    }
    if (minmax) {
        int best = 0;
        for (int i = 1; i < k; i++)
            if (fn[1] == 'a' ? x[i] > x[best] : x[i] < x[best])
                best = i;
        *out = a[best];
        return true;
    }
    if (strcmp(fn, "abs") == 0) {
        *out = a[0];
        if (out->kind == V_FLOAT)
            out->f = fabs(out->f);
        else if (out->i == INT64_MIN) {
            error_at(s->c, n->at, "integer overflow");
            return false;
        } else
            out->i = out->i < 0 ? -out->i : out->i;
        return true;
    }
    if (strcmp(fn, "float") == 0) {
        *out = (val){.kind = V_FLOAT, .f = x[0]};
        return true;
    }
    /* int() truncates toward zero; round() rounds half to even, as Python */
    double r = strcmp(fn, "int") == 0 ? trunc(x[0]) : nearbyint(x[0]);
    if (all_int) {
        *out = (val){.kind = V_INT, .i = a[0].i};
        return true;
    }
    if (!(r > -9.2e18 && r < 9.2e18)) {
        error_at(s->c, n->at, "%s() of %g does not fit an int", fn, x[0]);
        return false;
    }
    *out = (val){.kind = V_INT, .i = (int64_t)r};
    return true;
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

/* The arguments of a call of a partial class: its bound positionals first,
 * then the call's positionals, then its bound keywords that the call does
 * not give again, then the call's keywords (functools.partial's order). */
static bound_arg *with_bound(sema *s, const val *cls, bound_arg *args, int *nargs, loc at) {
    bound_arg *all = arena_alloc(&s->c->arena, sizeof *all * (size_t)(cls->n + *nargs + 1));
    int k = 0;
    for (int i = 0; i < cls->n; i++)
        if (!cls->keys[i])
            all[k++] = (bound_arg){.v = cls->items[i], .at = at, .name_at = at};
    for (int i = 0; i < *nargs; i++)
        if (!args[i].name)
            all[k++] = args[i];
    for (int i = 0; i < cls->n; i++) {
        if (!cls->keys[i])
            continue;
        bool given = false;
        for (int j = 0; j < *nargs; j++)
            given |= args[j].name && strcmp(args[j].name, cls->keys[i]) == 0;
        if (!given)
            all[k++] = (bound_arg){.name = cls->keys[i], .v = cls->items[i], .at = at, .name_at = at};
    }
    for (int i = 0; i < *nargs; i++)
        if (args[i].name)
            all[k++] = args[i];
    *nargs = k;
    return all;
}

/* `module LayerNorm2d extends LayerNorm { forward(...) {...} }`: the builtin
 * itself (its constructor, parameters and print) under the subclass's name,
 * with the subclass's forward, which reads the builtin's arguments and
 * parameters by name (eps, normalized_shape, weight, bias). */
static DPC_NOINLINE bool instantiate_subclass(sema *s, const module_def *d, const bound_arg *args, int nargs,
                                              const node *n, val *out) {
    builtin_kind bi = builtin_lookup(d->base);
    if (!bi || bi == BI_MODULELIST || bi == BI_DATAPARALLEL) {
        int nb;
        const char *const *names = builtin_names(&nb);
        const char *near = bi ? NULL : nearest_name(d->base, names, nb);
        error_at(s->c, d->base_at, "a module can extend Sequential or a builtin module such as LayerNorm, not '%s'%s%s%s",
                 d->base, near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
        return false;
    }
    if (d->params.len || d->members.len) {
        const loc at = d->params.len ? ((param *)d->params.items[0])->at : ((member *)d->members.items[0])->at;
        error_at(s->c, at, "module '%s' extends %s: it takes %s's constructor and has no parameters or members of its own",
                 d->name, d->base, d->base);
        return false;
    }
    if (!d->has_forward) {
        error_at(s->c, d->at, "module '%s' extends %s but has no forward (without one it is just %s)", d->name, d->base,
                 d->base);
        return false;
    }
    inst *in = new_inst(s, bi, d->name, n->lhs->at);
    if (!in)
        return false;
    in->def = d;
    if (!builtin_bind_values(s->c, in, args, nargs, n->lhs->at))
        return false;
    in->type_name = d->name; /* binding names it after the builtin; it prints as the subclass */
    out->kind = V_MODULE;
    out->mod = in;
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
    bound_arg *args = NULL;
    int nargs = 0;
    if (strcmp(name, "range") == 0) {
        error_at(s->c, n->at, "range() is only allowed in a list comprehension");
        return false;
    }
    if (strcmp(name, "partial") == 0)
        return eval_partial(s, e, n, out);
    if (!lookup_env(e, name) && is_scalar_fn(name))
        return eval_scalar_fn(s, e, n, out);
    const val *cls = lookup_env(e, name);
    if (cls && cls->kind != V_CLASS) {
        error_at(s->c, n->lhs->at, "'%s' is %s, not a module class", name, val_kind_name(cls->kind));
        if (cls->kind == V_NONE)
            note_at(s->c, n->lhs->at, "write 'if %s is not None { ... }' around the use", name);
        return false;
    }
    if (cls)
        name = cls->s;
    builtin_kind bi = builtin_lookup(name);
    const module_def *d = bi ? NULL : find_module(&s->m->prog, name);
    if (!bi && !d) {
        unknown_callee(s, e, n->lhs);
        return false;
    }
    if (!eval_args(s, e, n, &args, &nargs))
        return false;
    if (cls && cls->n)
        args = with_bound(s, cls, args, &nargs, n->lhs->at);
    inst *in;
    if (!bi && d->base && strcmp(d->base, "Sequential") != 0)
        return instantiate_subclass(s, d, args, nargs, n, out);
    if (bi) {
        in = new_inst(s, bi, builtin_name(bi), n->lhs->at);
        if (!in || !builtin_bind_values(s->c, in, args, nargs, n->lhs->at))
            return false;
        if (bi == BI_DATAPARALLEL && s->depth > 0) {
            error_at(s->c, n->at, "DataParallel may only wrap the model, on the 'model = ...' line");
            return false;
        }
    } else {
        in = instantiate_user(s, d, args, nargs, n->lhs->at);
        if (!in)
            return false;
    }
    out->kind = V_MODULE;
    out->mod = in;
    return true;
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
static bool eval(sema *s, const env *e, const node *n, val *out) {
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

/* --------------------------------------------------------- the tree */

static void assign_paths(sema *s, inst *in, const char *path) {
    in->path = path;
    builtin_params(s->c, s->m, in);
    ctensor_add_params(s->c, s->m, in);
    for (int i = 0; i < in->children.len; i++) {
        inst_child *ch = in->children.items[i];
        const char *p = path[0] ? arena_printf(&s->c->arena, "%s.%s", path, ch->name) : ch->name;
        assign_paths(s, ch->mod, p);
    }
}

/* Every parameter within DPC_MAX_NUMEL elements, all of them within
 * DPC_MAX_PARAM_BYTES bytes (the builtins' size arguments are at most
 * DPC_MAX_DIM each, but a weight multiplies several). */
static DPC_NOINLINE void check_param_sizes(dpc_ctx *c, model *m) {
    int64_t total = 0;
    for (int i = 0; i < m->params.len; i++) {
        const param_entry *p = m->params.items[i];
        int64_t n = 1;
        bool big = false;
        char dims[256];
        size_t pos = 0;
        for (int k = 0; k < p->rank; k++) {
            big |= __builtin_mul_overflow(n, p->shape[k] > 0 ? p->shape[k] : 1, &n) || n > DPC_MAX_NUMEL;
            pos += (size_t)snprintf(dims + pos, sizeof dims - pos, "%s%lld", k ? ", " : "", (long long)p->shape[k]);
            if (pos >= sizeof dims)
                pos = sizeof dims - 1;
        }
        if (big) {
            error_at(c, p->owner->at, "parameter %s [%s] is too large: more than 2^40 elements", p->key, dims);
            return;
        }
        total += n * (p->is_int ? 8 : 4);
        if (total > DPC_MAX_PARAM_BYTES) {
            error_at(c, p->owner->at, "the parameters are too large: more than 2^40 bytes (1 TiB) in all, reached at %s",
                     p->key);
            return;
        }
    }
}

bool sema_instantiate(dpc_ctx *c, model *m) {
    sema s = {.c = c, .m = m};
    program *p = &m->prog;
    val v;
    env e = {0};
    if (p->model) {
        if (!eval(&s, &e, p->model, &v))
            return false;
        if (v.kind != V_MODULE) {
            error_at(c, p->model_at, "the model must be a module, got %s", val_kind_name(v.kind));
            return false;
        }
    } else {
        /* no `model = ...`: the last module defined, built with its defaults */
        const module_def *d = p->modules.items[p->modules.len - 1];
        inst *in = instantiate_user(&s, d, NULL, 0, d->at);
        if (!in)
            return false;
        v.kind = V_MODULE;
        v.mod = in;
    }
    inst *top = v.mod;
    if (top->bi == BI_DATAPARALLEL) {
        m->wrapper = top;
        m->root = top->args[0].mod;
        if (m->root->bi == BI_DATAPARALLEL) {
            error_at(c, m->root->at, "nested DataParallel is not supported");
            return false;
        }
    } else
        m->root = top;
    assign_paths(&s, m->root, "");
    check_param_sizes(c, m);
    return c->nerrors == 0;
}
