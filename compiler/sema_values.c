/* sema_values.c - constructor values and the operators on them: integer
 * arithmetic checked for overflow (exact division, division by zero),
 * Python's comparisons, truth and builtins (max, min, abs, int, float,
 * round, len), the check of a scalar parameter's value, and the one walk
 * of a chain of binary operators that both interpreters use (sema_expr.c
 * on values, irbuild.c on forward values).
 *
 * It is its own file because nothing here evaluates an expression: it sits
 * below both interpreters. */
#include "sema.h"

#include <math.h>
#include <string.h>

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
bool param_accepts(const param *p, const val *v) {
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

/* Python's builtins on constructor values: max, min, abs, int, float, round, len. */
bool is_scalar_fn(const char *name) {
    static const char *const fns[] = {"max", "min", "abs", "int", "float", "round", "len"};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (strcmp(fns[i], name) == 0)
            return true;
    return false;
}

/* Python's builtins on constructor values, applied to the k values a
 * (evaluated by sema_expr.c's eval_scalar_fn); at: the call. */
bool sema_scalar_fn(sema *s, const char *fn, val *a, int k, loc at, val *out) {
    bool minmax = strcmp(fn, "max") == 0 || strcmp(fn, "min") == 0;
    if (minmax && k == 1 && (a[0].kind == V_TUPLE || a[0].kind == V_LIST)) {
        k = a[0].n;
        a = a[0].items;
    }
    if (minmax ? k < 1 : k != 1) {
        error_at(s->c, at, "%s() takes %s", fn, minmax ? "one or more numbers" : "one argument");
        return false;
    }
    if (strcmp(fn, "len") == 0) {
        if (a[0].kind != V_TUPLE && a[0].kind != V_LIST && a[0].kind != V_DICT && a[0].kind != V_STR) {
            error_at(s->c, at, "len() of %s", val_kind_name(a[0].kind));
            return false;
        }
        *out = (val){.kind = V_INT, .i = a[0].kind == V_STR ? (int64_t)strlen(a[0].s) : a[0].n};
        return true;
    }
    double x[64];
    bool all_int = true;
    if (k > 64) {
        error_at(s->c, at, "%s() of more than 64 values", fn);
        return false;
    }
    for (int i = 0; i < k; i++) {
        if (!num(&a[i], &x[i])) {
            error_at(s->c, at, "%s() takes numbers, got %s", fn, val_kind_name(a[i].kind));
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
            error_at(s->c, at, "integer overflow");
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
        error_at(s->c, at, "%s() of %g does not fit an int", fn, x[0]);
        return false;
    }
    *out = (val){.kind = V_INT, .i = (int64_t)r};
    return true;
}
