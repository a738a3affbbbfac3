/* ast.c - AST constructors called from the grammar's actions, and the
 * little state the generated scanner and parser read (ps_loc,
 * dp_bad_string, dp_lex_fatal). It is its own file, apart from parse.c,
 * because parse.c calls the parser: what the generated code calls lives
 * below both, so the files form no circle. */
#include "parser_state.h"

#include <string.h>

/* flex's YY_FATAL_ERROR jumps here (set by parse.c before each scan). */
_Thread_local jmp_buf *dp_lex_fatal;

loc ps_loc(parser_state *ps, int line, int col) {
    return (loc){ps->file, line, col};
}

const char dp_bad_string[] = "";
const char dp_splat[] = "*";

static int max_i(int a, int b) { return a > b ? a : b; }

/* Passes recurse over expressions, so an expression's height is bounded
 * (ps_expr). The height (node.depth) is the number of nested evaluations a
 * pass needs: the left operand chain of binary operators (a + b + c ...,
 * the way a flat chain parses) is walked in a loop by the evaluators, so it
 * adds no height; see depth_binop. Nodes record their height as they are
 * built; the check waits for the whole expression, so that the error points
 * at the first place, from the outside in, that is too deep. */
static node *check_depth(parser_state *ps, node *n) {
    (void)ps;
    if (n->depth > 1 << 30)
        n->depth = 1 << 30; /* no overflow, whatever the input */
    return n;
}

static int depth_binop(const node *l, const node *r) {
    return l->kind == ND_BINOP ? max_i(l->depth, 1 + r->depth) : 1 + max_i(l->depth, r->depth);
}

/* The child of n on its deepest path; *free says the step costs no height
 * (the left operand of a binary operator that is itself one). */
static const node *deepest_child(const node *n, bool *free) {
    const node *best = NULL;
    *free = false;
    if (n->kind == ND_BINOP && n->lhs->kind == ND_BINOP && n->lhs->depth >= 1 + n->rhs->depth) {
        *free = true;
        return n->lhs;
    }
#define TRY(x)                                                                                     \
    do {                                                                                           \
        const node *x_ = (x);                                                                      \
        if (x_ && (!best || x_->depth > best->depth))                                              \
            best = x_;                                                                             \
    } while (0)
    switch (n->kind) {
    case ND_BINOP:
    case ND_INDEX:
    case ND_LISTCOMP: TRY(n->lhs); TRY(n->rhs); break;
    case ND_COND:
    case ND_DICTCOMP:
    case ND_SLICE: TRY(n->lhs); TRY(n->rhs); TRY(n->third); break;
    case ND_NEG:
    case ND_NOT:
    case ND_ATTR: TRY(n->lhs); break;
    case ND_SUBSCRIPT:
        TRY(n->lhs);
        for (int i = 0; i < n->args.len; i++)
            TRY((const node *)n->args.items[i]);
        break;
    case ND_CALL:
        TRY(n->lhs);
        for (int i = 0; i < n->args.len; i++)
            TRY(((const arg *)n->args.items[i])->value);
        break;
    case ND_TUPLE:
    case ND_LIST:
    case ND_DICT:
        for (int i = 0; i < n->args.len; i++)
            TRY((const node *)n->args.items[i]);
        break;
    default: break;
    }
#undef TRY
    return best;
}

node *ps_expr(parser_state *ps, node *e) {
    int limit = ps->c->max_depth;
    if (!e || e->depth <= limit || ps->too_deep)
        return e;
    /* walk down the deepest path to the first level past the limit */
    const node *n = e;
    for (int level = 1; level <= limit;) {
        bool free;
        const node *ch = deepest_child(n, &free);
        if (!ch)
            break;
        n = ch;
        if (!free)
            level++;
    }
    error_at(ps->c, n->at, "expression nested too deeply (limit %d)", limit);
    ps->too_deep = true;
    return e;
}

void ps_open_operator(parser_state *ps, loc at) {
    if (++ps->opnest > ps->c->max_depth && !ps->too_deep) {
        error_at(ps->c, at, "expression nested too deeply (limit %d)", ps->c->max_depth);
        ps->too_deep = true;
    }
}

void ps_check_params(parser_state *ps, const vec *params) {
    for (int i = 1; i < params->len; i++) {
        const param *p = params->items[i];
        for (int j = 0; j < i; j++)
            if (strcmp(((const param *)params->items[j])->name, p->name) == 0) {
                error_at(ps->c, p->at, "parameter '%s' is declared twice", p->name);
                break;
            }
    }
}

node *ast_node(parser_state *ps, node_kind k, loc at) {
    node *n = arena_alloc(&ps->c->arena, sizeof *n);
    n->kind = k;
    n->at = at;
    n->depth = 1;
    return n;
}

node *ast_binop(parser_state *ps, int op, node *l, node *r, loc at) {
    node *n = ast_node(ps, ND_BINOP, at);
    n->op = op;
    n->lhs = l;
    n->rhs = r;
    n->depth = depth_binop(l, r);
    return check_depth(ps, n);
}

node *ast_unary(parser_state *ps, node *e, loc at) {
    node *n = ast_node(ps, ND_NEG, at);
    n->lhs = e;
    n->depth = 1 + e->depth;
    return check_depth(ps, n);
}

node *ast_call(parser_state *ps, node *callee, vec args, loc at) {
    int method = 0;
    if (callee->kind == ND_ATTR) {
        /* x.f(a) is f(x, a): the receiver is the first positional argument */
        vec all = {0};
        vec_push(&ps->c->arena, &all, ast_arg(ps, NULL, callee->lhs, callee->lhs->at));
        for (int i = 0; i < args.len; i++)
            vec_push(&ps->c->arena, &all, args.items[i]);
        args = all;
        node *f = ast_node(ps, ND_NAME, callee->at);
        f->str = callee->str;
        callee = f;
        method = 'm';
    }
    node *n = ast_node(ps, ND_CALL, at);
    n->op = method;
    n->lhs = callee;
    n->args = args;
    int d = callee->depth;
    for (int i = 0; i < args.len; i++)
        d = max_i(d, ((arg *)args.items[i])->value->depth);
    n->depth = 1 + d;
    return check_depth(ps, n);
}

node *ast_index(parser_state *ps, node *base, node *idx, loc at) {
    node *n = ast_node(ps, ND_INDEX, at);
    n->lhs = base;
    n->rhs = idx;
    n->depth = 1 + max_i(base->depth, idx->depth);
    return check_depth(ps, n);
}

node *ast_subscript(parser_state *ps, node *base, vec items, loc at) {
    if (items.len == 1) {
        node *only = items.items[0];
        if (only->kind != ND_SLICE && only->kind != ND_ELLIPSIS)
            return ast_index(ps, base, only, at);
    }
    node *n = ast_node(ps, ND_SUBSCRIPT, at);
    n->lhs = base;
    n->args = items;
    int d = base->depth;
    for (int i = 0; i < items.len; i++)
        d = max_i(d, ((node *)items.items[i])->depth);
    n->depth = 1 + d;
    return check_depth(ps, n);
}

node *ast_slice(parser_state *ps, node *start, node *stop, node *step, loc at) {
    node *n = ast_node(ps, ND_SLICE, at);
    n->lhs = start;
    n->rhs = stop;
    n->third = step;
    int d = 0;
    if (start) d = max_i(d, start->depth);
    if (stop) d = max_i(d, stop->depth);
    if (step) d = max_i(d, step->depth);
    n->depth = 1 + d;
    return check_depth(ps, n);
}

/* A name that is a namespace: torch, nn, F, or one reached through them. */
static bool is_namespace(const node *n) {
    if (n->kind != ND_NAME)
        return false;
    if (n->op == 'N')
        return true;
    return strcmp(n->str, "torch") == 0 || strcmp(n->str, "nn") == 0 || strcmp(n->str, "F") == 0;
}

node *ast_attr(parser_state *ps, node *base, const char *name, loc at) {
    if (is_namespace(base)) {
        node *n = ast_node(ps, ND_NAME, at);
        n->str = name;
        if (strcmp(name, "nn") == 0 || strcmp(name, "functional") == 0)
            n->op = 'N';
        return n;
    }
    node *n = ast_node(ps, ND_ATTR, at);
    n->lhs = base;
    n->str = name;
    n->depth = 1 + base->depth;
    return check_depth(ps, n);
}

node *ast_not(parser_state *ps, node *e, loc at) {
    node *n = ast_node(ps, ND_NOT, at);
    n->lhs = e;
    n->depth = 1 + e->depth;
    return check_depth(ps, n);
}

node *ast_cond(parser_state *ps, node *cond, node *then, node *otherwise, loc at) {
    node *n = ast_node(ps, ND_COND, at);
    n->third = cond;
    n->lhs = then;
    n->rhs = otherwise;
    n->depth = 1 + max_i(cond->depth, max_i(then->depth, otherwise->depth));
    return check_depth(ps, n);
}

node *ast_seq(parser_state *ps, node_kind k, vec items, loc at) {
    node *n = ast_node(ps, k, at);
    n->args = items;
    int d = 0;
    for (int i = 0; i < items.len; i++)
        d = max_i(d, ((node *)items.items[i])->depth);
    n->depth = 1 + d;
    return check_depth(ps, n);
}

node *ast_listcomp(parser_state *ps, node *elem, const char *var, node *iter, loc at) {
    node *n = ast_node(ps, ND_LISTCOMP, at);
    n->lhs = elem;
    n->rhs = iter;
    n->str = var;
    n->depth = 1 + max_i(elem->depth, iter->depth);
    return check_depth(ps, n);
}

node *ast_dictcomp(parser_state *ps, node *key, node *value, const char *var, node *iter, loc at) {
    node *n = ast_node(ps, ND_DICTCOMP, at);
    n->lhs = key;
    n->third = value;
    n->rhs = iter;
    n->str = var;
    n->depth = 1 + max_i(max_i(key->depth, value->depth), iter->depth);
    return check_depth(ps, n);
}

arg *ast_arg(parser_state *ps, const char *name, node *value, loc at) {
    arg *a = arena_alloc(&ps->c->arena, sizeof *a);
    a->name = name;
    a->value = value;
    a->at = at;
    return a;
}

stmt *ps_stmt(parser_state *ps, stmt_kind k, loc at) {
    stmt *s = arena_alloc(&ps->c->arena, sizeof *s);
    s->kind = k;
    s->at = at;
    return s;
}

member *ps_member(parser_state *ps, member_kind k, const char *name, loc at, node *value) {
    member *m = arena_alloc(&ps->c->arena, sizeof *m);
    m->kind = k;
    m->name = name;
    m->at = at;
    m->value = value;
    return m;
}

/* A forward inside an `if` of the body: reported, and dropped. */
static void no_nested_forward(parser_state *ps, const vec *items) {
    for (int i = 0; i < items->len; i++) {
        member *m = items->items[i];
        if (m->kind == MB_FORWARD)
            error_at(ps->c, m->at, "forward cannot be inside an if: write the condition in forward");
        else if (m->kind == MB_IF) {
            no_nested_forward(ps, &m->then_items);
            no_nested_forward(ps, &m->else_items);
        }
    }
}

module_def *ps_module(parser_state *ps, const char *name, loc at, vec params, const char *base,
                      loc base_at, const vec *items) {
    module_def *d = arena_alloc(&ps->c->arena, sizeof *d);
    d->name = name;
    d->at = at;
    d->params = params;
    d->base = base;
    d->base_at = base_at;
    for (int i = 0; items && i < items->len; i++) {
        member *m = items->items[i];
        if (m->kind != MB_FORWARD) {
            if (m->kind == MB_IF) {
                no_nested_forward(ps, &m->then_items);
                no_nested_forward(ps, &m->else_items);
            }
            vec_push(&ps->c->arena, &d->members, m);
            continue;
        }
        if (d->has_forward) {
            error_at(ps->c, m->at, "module '%s' has two forward methods", name);
            continue;
        }
        d->has_forward = true;
        d->forward_at = m->forward->forward_at;
        d->fparams = m->forward->fparams;
        d->body = m->forward->body;
    }
    return d;
}

param *ps_param(parser_state *ps, const char *name, loc at, const char *type, loc type_at,
                const vec *dims, node *deflt) {
    param *p = arena_alloc(&ps->c->arena, sizeof *p);
    p->name = name;
    p->at = at;
    p->deflt = deflt;
    p->dtype_at = type_at;
    if (dims) {
        p->kind = PT_TENSOR;
        p->dims = *dims;
        p->dtype = type ? type : "f32";
        if (deflt)
            error_at(ps->c, deflt->at, "tensor parameter '%s' cannot have a default", name);
        return p;
    }
    if (strcmp(type, "int") == 0)
        p->kind = PT_INT;
    else if (strcmp(type, "float") == 0)
        p->kind = PT_FLOAT;
    else if (strcmp(type, "bool") == 0)
        p->kind = PT_BOOL;
    else if (strcmp(type, "str") == 0)
        p->kind = PT_STR;
    else if (strcmp(type, "Module") == 0)
        p->kind = PT_MODULE;
    else {
        static const char *const types[] = {"int", "float", "bool", "str", "Module"};
        const char *near = nearest_name(type, types, 5);
        if (near)
            error_at(ps->c, type_at, "unknown type '%s'; did you mean '%s'?", type, near);
        else
            error_at(ps->c, type_at,
                     "unknown type '%s' (expected int, float, bool, str, Module or a tensor type like [N, 10])",
                     type);
        p->kind = PT_INT;
    }
    return p;
}
