/* irbuild_values.c - the forward's operators on values already evaluated:
 * binary operators (constants folded as the constructor does, tensors as
 * graph nodes, masks and comparisons through functions.c), unary minus,
 * the truth of a condition (known when compiling), and ModuleLists,
 * Sequentials and tuples as sequences (len, an item, x[i]).
 *
 * It is its own file, apart from the walk (irbuild.c) that evaluates the
 * operands, because none of it recurses into an expression. */
#include "irbuild.h"

#include <string.h>

void sv_of_val(const val *v, sv *out, dpc_arena *a) {
    memset(out, 0, sizeof *out);
    if (v->kind == V_NONE)
        out->k = SV_NONE;
    else if (v->kind == V_TUPLE || v->kind == V_LIST) {
        out->k = v->kind == V_TUPLE ? SV_TUPLE : SV_LIST;
        out->n = v->n;
        out->items = arena_alloc(a, sizeof(sv) * (size_t)(v->n + 1));
        for (int i = 0; i < v->n; i++)
            sv_of_val(&v->items[i], &out->items[i], a);
    } else {
        out->k = SV_NUM;
        out->v = *v;
    }
}

/* A value known when compiling (a number, None, a module) as a
 * constructor value; false for tensors and the batch size. */
bool sv_const(const sv *v, val *out) {
    memset(out, 0, sizeof *out);
    if (v->k == SV_NUM)
        *out = v->v;
    else if (v->k == SV_NONE)
        out->kind = V_NONE;
    else if ((v->k == SV_MODULE || v->k == SV_LIST) && v->mod) {
        out->kind = V_MODULE;
        out->mod = v->mod;
    } else
        return false;
    return true;
}

/* The truth of an `if` or `not` in forward: it must be known when
 * compiling (a constructor value, a member or None), since one graph is
 * built for all inputs. */
bool const_truth(builder *b, const frame *f, const node *cond, const sv *v, bool *out) {
    val c;
    loc at = cond->at;
    if (!sv_const(v, &c)) {
        if (v->poison)
            return false;
        /* a forward scalar parameter is a value of the run, not of the compile */
        const param *sp = NULL;
        if (cond->kind == ND_NAME && f->self->def)
            for (int i = 0; i < f->self->def->fparams.len; i++) {
                const param *p = f->self->def->fparams.items[i];
                if (p->kind != PT_TENSOR && strcmp(p->name, cond->str) == 0)
                    sp = p;
            }
        if (sp && v->k == SV_TENSOR && v->t && v->t->sh.rank == 0)
            error_at(b->c, at,
                     "'%s' is a scalar parameter of forward, given when the model runs: a condition in forward "
                     "must be known when compiling (constructor values, dims after the batch, members, None); "
                     "make '%s' a constructor parameter",
                     sp->name, sp->name);
        else
            error_at(b->c, at,
                     "this condition is %s: a condition in forward must be known when compiling "
                     "(constructor values, dims after the batch, members, None), since one graph serves every input",
                     sv_kind_name(v));
        return false;
    }
    *out = sema_truthy(&c);
    return true;
}

/* l op r, both evaluated. */
DPC_NOINLINE bool binop_values(builder *b, const node *n, const sv *l, const sv *r, sv *out) {
    memset(out, 0, sizeof *out);
    val lc, rc;
    if (sv_const(l, &lc) && sv_const(r, &rc)) {
        out->k = SV_NUM;
        return sema_arith(b->c, n->op, &lc, &rc, n->at, &out->v);
    }
    if ((n->op == OP_IS || n->op == OP_ISNOT) && (l->k == SV_NONE || r->k == SV_NONE)) {
        /* a tensor (or the batch size) is never None */
        out->k = SV_NUM;
        out->v = (val){.kind = V_BOOL, .i = n->op == OP_ISNOT};
        return true;
    }
    if (l->k == SV_TUPLE && r->k == SV_TUPLE && n->op == '+') { /* x.size()[:-1] + (heads, d) */
        out->k = SV_TUPLE;
        out->n = l->n + r->n;
        out->items = arena_alloc(&b->c->arena, sizeof(sv) * (size_t)(out->n + 1));
        memcpy(out->items, l->items, sizeof(sv) * (size_t)l->n);
        memcpy(out->items + l->n, r->items, sizeof(sv) * (size_t)r->n);
        return true;
    }
    if (n->op == '@') {
        ir_node *x, *y;
        if (!want_tensor(b, l, n->at, "'@'", &x) || !want_tensor(b, r, n->at, "'@'", &y))
            return false;
        out->t = matmul(b, x, y, n->at);
        out->k = SV_TENSOR;
        return out->t != NULL && check_size(b, out->t, n->at, "'@'");
    }
    if (mask_binop(b, n->op, l, r, n->at, n->lhs->at, n->rhs->at, out))
        return out->k == SV_TENSOR;
    ir_op op = n->op == '+' ? OP_ADD : n->op == '-' ? OP_SUB : n->op == '*' ? OP_MUL : n->op == '/' ? OP_DIV
             : n->op == 'p' ? OP_POW : OP_COUNT;
    if (op == OP_COUNT) {
        bool logic = n->op == OP_EQ || n->op == OP_NE || n->op == OP_LT || n->op == OP_GT || n->op == OP_LE ||
                     n->op == OP_GE || n->op == OP_IS || n->op == OP_ISNOT || n->op == OP_AND || n->op == OP_OR;
        if (logic)
            error_at(b->c, n->at,
                     "'%s' is given %s: comparisons, 'and', 'or' and 'is' take values known when compiling "
                     "(constructor values, dims after the batch, members, None), not tensors or the batch size",
                     sema_op_text(n->op), sv_kind_name(sv_const(l, &lc) ? r : l));
        else
            error_at(b->c, n->at, "operator '%s' is not supported on tensors (only +, -, *, / and @ are)",
                     sema_op_text(n->op));
        return false;
    }
    ir_node *x = as_tensor(b, l, n->lhs->at, "arithmetic"), *y = as_tensor(b, r, n->rhs->at, "arithmetic");
    if (!x || !y)
        return false;
    if (x->dt == IR_BOOL || y->dt == IR_BOOL) {
        error_at(b->c, n->at,
                 "arithmetic on a bool tensor: convert it first (.float(), .long(), .to(float32)); masks combine "
                 "with &, |, ~");
        return false;
    }
    out->t = elementwise(b, op, x, y, n->at, NULL);
    out->k = SV_TENSOR;
    if (out->t)
        out->t->dt = arith_dtype(l, r, op);
    return out->t != NULL && check_size(b, out->t, n->at, "arithmetic");
}

DPC_NOINLINE bool neg_value(builder *b, const node *n, const sv *v, sv *out) {
    if (v->k == SV_NUM) {
        val zero = {.kind = V_INT, .i = 0};
        out->k = SV_NUM;
        return sema_arith(b->c, '-', &zero, &v->v, n->at, &out->v);
    }
    ir_node *x;
    if (v->k == SV_BATCH)
        x = batch_value(b, n->at);
    else if (v->k == SV_TENSOR && v->t->dt == IR_BOOL) { /* PyTorch refuses it too */
        error_at(b->c, n->at, "unary '-' on a bool tensor: invert a mask with ~ or logical_not()");
        return false;
    } else if (v->k == SV_TENSOR && v->t->dt == IR_I64)
        x = v->t; /* an int64 result: exact, as the values it negates */
    else if (!want_tensor(b, v, n->at, "unary '-'", &x))
        return false;
    out->k = SV_TENSOR;
    out->t = unary(b, OP_NEG, x, n->at, NULL);
    if (out->t && x->dt == IR_I64)
        out->t->dt = IR_I64;
    return out->t != NULL;
}

/* A ModuleList, a Sequential (a subclass too: `extends Sequential`) or a
 * tuple as a sequence: its length, or -1. */
int seq_len(const sv *v) {
    if (v->k == SV_TUPLE)
        return v->n;
    if ((v->k == SV_LIST || v->k == SV_MODULE) && v->mod &&
        (v->mod->bi == BI_MODULELIST || v->mod->bi == BI_SEQUENTIAL ||
         (v->mod->bi == BI_NONE && v->mod->def && v->mod->def->base)))
        return v->mod->children.len;
    return -1;
}

/* Entry i of a sequence (seq_len(v) > i). */
sv seq_item(const sv *v, int64_t i) {
    if (v->k == SV_TUPLE)
        return v->items[i];
    inst *m = ((inst_child *)v->mod->children.items[i])->mod;
    return (sv){.k = m->bi == BI_MODULELIST ? SV_LIST : SV_MODULE, .mod = m};
}

DPC_NOINLINE bool index_value(builder *b, const node *n, const sv *base, const sv *idx, sv *out) {
    int len = seq_len(base);
    if (len < 0) {
        error_at(b->c, n->at, "only ModuleLists, Sequentials and tuples can be indexed, not %s", sv_kind_name(base));
        return false;
    }
    int64_t i;
    if (!want_int(b, idx, n->rhs->at, "an index", &i))
        return false;
    if (i < -len || i >= len) {
        error_at(b->c, n->rhs->at, "index %lld is out of range (length %d)", (long long)i, len);
        return false;
    }
    *out = seq_item(base, i < 0 ? i + len : i);
    return true;
}
