/* ast.c - AST constructors called from the grammar's actions. */
#include "parser_state.h"

#include <string.h>

loc ps_loc(parser_state *ps, int line, int col) {
    return (loc){ps->file, line, col};
}

static int max_i(int a, int b) { return a > b ? a : b; }

/* Passes recurse over expressions, so their height is bounded here, where
 * they are built; the error is reported once per file. */
static node *check_depth(parser_state *ps, node *n) {
    if (n->depth > ps->c->max_depth && !ps->too_deep) {
        error_at(ps->c, n->at, "expression nested too deeply (limit %d)", ps->c->max_depth);
        ps->too_deep = true;
    }
    return n;
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
    n->depth = 1 + max_i(l->depth, r->depth);
    return check_depth(ps, n);
}

node *ast_unary(parser_state *ps, node *e, loc at) {
    node *n = ast_node(ps, ND_NEG, at);
    n->lhs = e;
    n->depth = 1 + e->depth;
    return check_depth(ps, n);
}

node *ast_call(parser_state *ps, node *callee, vec args, loc at) {
    node *n = ast_node(ps, ND_CALL, at);
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
    else {
        static const char *const types[] = {"int", "float", "bool"};
        const char *near = nearest_name(type, types, 3);
        if (near)
            error_at(ps->c, type_at, "unknown type '%s'; did you mean '%s'?", type, near);
        else
            error_at(ps->c, type_at,
                     "unknown type '%s' (expected int, float, bool or a tensor type like [N, 10])",
                     type);
        p->kind = PT_INT;
    }
    return p;
}
