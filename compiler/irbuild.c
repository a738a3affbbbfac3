/* irbuild.c - builds the graph IR by interpreting forward symbolically.
 *
 * The root module's forward is run with symbolic tensors: each tensor
 * operation appends one IR node, its shape inferred on the spot (NumPy
 * broadcasting, PyTorch's shape rules, the batch dim kept symbolic). A call
 * of a user module inlines its forward; `for blk in layers` unrolls. Shape
 * errors name both shapes, as `fc1 expects [N, 80], got [N, 320]`.
 *
 * This file is the walk itself: module calls, expressions and statements,
 * which recurse into one another. What they call without recursing lives
 * below it: binding arguments (irbuild_args.c), operators on evaluated
 * values (irbuild_values.c); the entry, ir_build, is irbuild_entry.c. */
#include "irbuild.h"

#include <stdio.h>
#include <string.h>

static bool eval(builder *b, frame *f, const node *n, sv *out);

/* One more level of recursion (an expression, a statement, a module call):
 * false, reported once, past DPC_MAX_EVAL_NEST levels in all. */
static bool enter(builder *b, loc at) {
    if (b->nest >= DPC_MAX_EVAL_NEST) {
        if (!b->nest_error)
            error_at(b->c, at, "module calls and expressions nested too deeply (limit %d levels in all)",
                     DPC_MAX_EVAL_NEST);
        b->nest_error = true;
        return false;
    }
    b->nest++;
    return true;
}

/* -------------------------------------------------- module calls */

static bool one_tensor_arg(builder *b, inst *m, const fargs *a, loc at) {
    if (!builtin_one_arg(b, m, a, at))
        return false;
    const sv *args = a->v;
    if (args[0].k != SV_TENSOR) {
        error_at(b->c, at, "%s expects a tensor, got %s", who(m), sv_kind_name(&args[0]));
        return false;
    }
    if (!builtin_row(m->bi)->any_dtype && args[0].t->dt != IR_F32) {
        error_at(b->c, at, "%s expects a float tensor, got an integer tensor", who(m));
        return false;
    }
    return true;
}

/* A builtin module's forward: its row's call, or its lowering of one
 * tensor input. */
static DPC_NOINLINE bool call_builtin(builder *b, inst *m, const fargs *a, loc at, sv *out) {
    const builtin *row = builtin_row(m->bi);
    if (row->call)
        return row->call(b, m, a, at, out);
    if (!one_tensor_arg(b, m, a, at))
        return false;
    if (!row->lower) {
        error_at(b->c, at, "%s cannot be called", m->type_name);
        return false;
    }
    ir_node *r = row->lower(b, m, a->v[0].t, at);
    if (!r || !check_size(b, r, at, who(m)))
        return false;
    out->k = SV_TENSOR;
    out->t = r;
    return true;
}

static DPC_NOINLINE bool call_user(builder *b, inst *m, const fargs *a, loc at, sv *out) {
    const module_def *d = m->def;
    if (!d->has_forward && d->base) {
        /* a Sequential subclass: its entries in order */
        return nn_sequential_call(b, m, a, at, out);
    }
    if (!d->has_forward) {
        error_at(b->c, at, "module '%s' has no forward", d->name);
        return false;
    }
    if (b->depth >= MAX_CALL_DEPTH) {
        error_at(b->c, at, "module calls nested too deeply (limit %d)", MAX_CALL_DEPTH);
        return false;
    }
    frame f = {.self = m};
    if (!bind_forward(b, m, &f, a, at))
        return false;
    b->depth++;
    bool ok = exec_block(b, &f, &d->body);
    b->depth--;
    if (!ok)
        return false;
    if (!f.returned) {
        error_at(b->c, d->forward_at, "forward of '%s' does not return a value", d->name);
        return false;
    }
    *out = f.ret;
    return true;
}

bool call_module(builder *b, inst *mod, const fargs *a, loc call_at, sv *out) {
    if (!enter(b, call_at))
        return false;
    /* a builtin's subclass (module LayerNorm2d extends LayerNorm) runs its own forward */
    bool user = mod->bi == BI_NONE || (mod->def && mod->def->has_forward);
    bool ok = user ? call_user(b, mod, a, call_at, out) : call_builtin(b, mod, a, call_at, out);
    b->nest--;
    return ok;
}

/* ------------------------------------------------------ expressions */

static DPC_NOINLINE void unknown_name(builder *b, frame *f, const char *name, loc at, bool callee) {
    const char *cands[256];
    int n = 0;
    for (int i = 0; i < f->locals.len && n < 200; i++)
        cands[n++] = ((binding *)f->locals.items[i])->name;
    for (int i = 0; i < f->self->children.len && n < 230; i++)
        cands[n++] = ((inst_child *)f->self->children.items[i])->name;
    for (int i = 0; i < f->self->tensors.len && n < 235; i++)
        cands[n++] = ((tmember *)f->self->tensors.items[i])->name;
    for (int i = 0; i < f->self->np && n < 240; i++)
        cands[n++] = f->self->pnames[i];
    if (callee)
        n += dpc_function_names(cands + n, 256 - n);
    const char *near = nearest_name(name, cands, n);
    const char *what = callee ? "unknown function or member" : "unknown name";
    if (near)
        error_at(b->c, at, "%s '%s'; did you mean '%s'?", what, name, near);
    else
        error_at(b->c, at, "%s '%s'", what, name);
}

/* In the forward of a builtin's subclass: the builtin's constructor
 * arguments (eps, normalized_shape) and its parameters (weight, bias; None
 * when it has none) by name, as self.eps and self.weight in PyTorch. */
static bool inherited_name(builder *b, inst *self, const node *n, sv *out) {
    const char *key = self->path[0] ? arena_printf(&b->c->arena, "%s.%s", self->path, n->str) : n->str;
    bool known = strcmp(n->str, "weight") == 0 || strcmp(n->str, "bias") == 0;
    for (int i = 0; i < b->m->params.len; i++)
        if (strcmp(((param_entry *)b->m->params.items[i])->key, key) == 0) {
            out->k = SV_TENSOR;
            out->t = param_node(b, self, n->str, n->at);
            return out->t != NULL;
        }
    if (known) {
        out->k = SV_NONE; /* bias=False: self.bias is None */
        return true;
    }
    const builtin *row = builtin_row(self->bi);
    for (int i = 0; row && i < row->nargs && i < self->nargs; i++)
        if (strcmp(row->args[i].name, n->str) == 0) {
            const val *v = &self->args[i];
            /* LayerNorm keeps normalized_shape as a tuple, as PyTorch does */
            if (self->bi == BI_LAYERNORM && strcmp(n->str, "normalized_shape") == 0 && v->kind == V_INT) {
                val *one = arena_alloc(&b->c->arena, sizeof *one);
                *one = *v;
                val t = {.kind = V_TUPLE, .n = 1, .items = one};
                sv_of_val(&t, out, &b->c->arena);
            } else
                sv_of_val(v, out, &b->c->arena);
            return true;
        }
    return false;
}

/* An int64 or bool buffer read in forward (HuggingFace's position_ids,
 * GPT-2's causal mask): an int64 one in an int64 buffer (as i64 inputs
 * are), a bool one in float32 (0 and 1, as forward carries the bools it
 * computes); now needed in the weights, where an unread one may be
 * missing. */
static void int_buffer(builder *b, ir_node *p, const tmember *t) {
    p->dt = t->ct->dtype == CTD_I64 ? IR_I64 : IR_BOOL;
    ((param_entry *)b->m->params.items[p->param_index])->ignored = false;
}

static DPC_NOINLINE bool resolve_name(builder *b, frame *f, const node *n, sv *out) {
    sv *v = frame_lookup(f, n->str);
    if (v) {
        *out = *v;
        return !v->poison;
    }
    inst *m = find_member(f->self, n->str);
    if (m) {
        out->k = m->bi == BI_MODULELIST ? SV_LIST : SV_MODULE;
        out->mod = m;
        return true;
    }
    for (int i = 0; i < f->self->tensors.len; i++) {
        const tmember *t = f->self->tensors.items[i];
        if (strcmp(t->name, n->str) != 0)
            continue;
        ir_node *p = param_node(b, f->self, t->name, n->at);
        if (!p)
            return false;
        if (t->ct->dtype != CTD_F32)
            int_buffer(b, p, t);
        out->k = SV_TENSOR;
        out->t = p;
        return true;
    }
    for (int i = f->self->np - 1; i >= 0; i--)
        if (strcmp(f->self->pnames[i], n->str) == 0) {
            const val *pv = &f->self->pvals[i];
            if (pv->kind == V_NONE)
                out->k = SV_NONE;
            else if (pv->kind == V_MODULE) {
                out->k = pv->mod->bi == BI_MODULELIST ? SV_LIST : SV_MODULE;
                out->mod = pv->mod;
            } else {
                out->k = SV_NUM;
                out->v = *pv;
            }
            return true;
        }
    if (f->self->bi != BI_NONE && inherited_name(b, f->self, n, out))
        return true;
    if (b->batch && strcmp(n->str, b->batch) == 0) {
        /* the batch size, for reshape(y, N, seq, dim) */
        out->k = SV_BATCH;
        return true;
    }
    if (dtype_named(n->str, out))
        return true;
    unknown_name(b, f, n->str, n->at, false);
    return false;
}

/* Where a call's callee resolves to: a module, a builtin function, or an
 * error (reported). */
static DPC_NOINLINE bool call_named(builder *b, frame *f, const node *n, const fargs *a, sv *out) {
    const node *callee = n->lhs;
    sv *local = frame_lookup(f, callee->str);
    inst *mod = NULL;
    if (local && local->k == SV_MODULE)
        mod = local->mod;
    else if (!local)
        mod = find_member(f->self, callee->str);
    if (mod)
        return call_module(b, mod, a, n->at, out);
    if (local) {
        if (!local->poison)
            error_at(b->c, callee->at, "'%s' is %s, not a module", callee->str, sv_kind_name(local));
        return false;
    }
    if (dpc_is_function(callee->str)) {
        int before = b->c->nerrors;
        if (call_function(b, callee->str, a, n->at, out))
            return true;
        if (b->c->nerrors == before)
            error_at(b->c, n->at, "internal error: %s() failed without a diagnostic; please report this",
                     callee->str);
        return false;
    }
    if (strcmp(callee->str, "range") == 0) {
        error_at(b->c, callee->at, "range() is only allowed in a list comprehension member");
        return false;
    }
    if (builtin_lookup(callee->str)) {
        error_at(b->c, callee->at, "modules are created as members, not in forward: add 'x = %s(...)' to the module",
                 callee->str);
        return false;
    }
    for (int i = f->self->np - 1; i >= 0; i--)
        if (strcmp(f->self->pnames[i], callee->str) == 0) {
            const val *v = &f->self->pvals[i];
            if (v->kind == V_MODULE)
                return call_module(b, v->mod, a, n->at, out);
            if (v->kind == V_CLASS) {
                error_at(b->c, callee->at, "'%s' is the class %s: modules are created as members ('%s = %s(...)')",
                         callee->str, v->s, callee->str, v->s);
                return false;
            }
            error_at(b->c, callee->at, "'%s' is %s, not a module", callee->str,
                     v->kind == V_NONE ? "None" : v->kind == V_INT ? "an int" : v->kind == V_FLOAT ? "a float"
                     : v->kind == V_BOOL ? "a bool" : v->kind == V_STR ? "a string" : "a constant");
            if (v->kind == V_NONE)
                note_at(b->c, callee->at, "write 'if %s is not None { ... }' around the call", callee->str);
            return false;
        }
    unknown_name(b, f, callee->str, callee->at, true);
    return false;
}

static DPC_NOINLINE bool eval_call(builder *b, frame *f, const node *n, sv *out) {
    int na = n->args.len;
    fargs a = {na, arena_alloc(&b->c->arena, sizeof(sv) * (size_t)(na + 1)),
               arena_alloc(&b->c->arena, sizeof(char *) * (size_t)(na + 1)),
               arena_alloc(&b->c->arena, sizeof(loc) * (size_t)(na + 1)),
               arena_alloc(&b->c->arena, sizeof(loc) * (size_t)(na + 1))};
    for (int i = 0; i < na; i++) {
        const arg *ag = n->args.items[i];
        a.names[i] = ag->name;
        a.at[i] = ag->value->at;
        a.kw_at[i] = ag->at;
        if (!eval(b, f, ag->value, &a.v[i]))
            return false;
    }
    if (!spread_args(b, n, &a))
        return false;
    if (n->lhs->kind == ND_NAME)
        return call_named(b, f, n, &a, out);
    sv *c = arena_alloc(&b->c->arena, sizeof *c);
    if (!eval(b, f, n->lhs, c))
        return false;
    if (c->k != SV_MODULE) {
        error_at(b->c, n->lhs->at, "%s is not callable", sv_kind_name(c));
        return false;
    }
    return call_module(b, c->mod, &a, n->at, out);
}

typedef struct build_cx {
    builder *b;
    frame *f;
} build_cx;

static bool build_chain_eval(void *cx, const node *n, void *out) {
    return eval(((build_cx *)cx)->b, ((build_cx *)cx)->f, n, out);
}

static bool build_chain_apply(void *cx, const node *op, void *acc, const void *r) {
    sv t;
    if (!binop_values(((build_cx *)cx)->b, op, acc, r, &t))
        return false;
    *(sv *)acc = t;
    return true;
}

/* The chain walk is sema_values.c's (eval_binop_chain), shared with constructor
 * arithmetic; only the values and the operators on them differ. */
static bool build_chain_skip(void *cx, const node *op, const void *acc) {
    (void)cx;
    val c;
    return sv_const(acc, &c) && sema_truthy(&c) == (op->op == OP_OR);
}

static DPC_NOINLINE bool eval_binop(builder *b, frame *f, const node *n, sv *out) {
    build_cx cx = {b, f};
    return eval_binop_chain(&b->c->arena, n, &cx, sizeof *out, build_chain_eval, build_chain_apply, build_chain_skip,
                            out);
}

static DPC_NOINLINE bool eval_index(builder *b, frame *f, const node *n, sv *out) {
    sv *bi = arena_alloc(&b->c->arena, 2 * sizeof *bi);
    if (!eval(b, f, n->lhs, &bi[0]) || !eval(b, f, n->rhs, &bi[1]))
        return false;
    if (bi[0].k == SV_TENSOR) { /* x[i], x[None] */
        ixitem *it = arena_alloc(&b->c->arena, sizeof *it);
        *it = (ixitem){.kind = bi[1].k == SV_NONE ? 'n' : 'i', .v = {bi[1]}, .has = {true}, .at = n->rhs->at};
        return subscript_value(b, &bi[0], it, 1, n->at, out);
    }
    return index_value(b, n, &bi[0], &bi[1], out);
}

/* base[a, b:c, None, ...]: the items evaluated, then index.c. */
static DPC_NOINLINE bool eval_subscript(builder *b, frame *f, const node *n, sv *out) {
    sv *base = arena_alloc(&b->c->arena, sizeof *base);
    int ni = n->args.len;
    ixitem *items = arena_alloc(&b->c->arena, sizeof(ixitem) * (size_t)(ni + 1));
    if (!eval(b, f, n->lhs, base))
        return false;
    for (int i = 0; i < ni; i++) {
        const node *e = n->args.items[i];
        ixitem *it = &items[i];
        it->at = e->at;
        if (e->kind == ND_ELLIPSIS)
            it->kind = 'e';
        else if (e->kind == ND_SLICE) {
            it->kind = 's';
            const node *parts[3] = {e->lhs, e->rhs, e->third};
            for (int k = 0; k < 3; k++)
                if (parts[k] && !(it->has[k] = true, eval(b, f, parts[k], &it->v[k])))
                    return false;
        } else {
            if (!eval(b, f, e, &it->v[0]))
                return false;
            it->has[0] = true;
            it->kind = it->v[0].k == SV_NONE ? 'n' : 'i';
        }
    }
    return subscript_value(b, base, items, ni, n->at, out);
}

static DPC_NOINLINE bool eval_attr(builder *b, frame *f, const node *n, sv *out) {
    sv *base = arena_alloc(&b->c->arena, sizeof *base);
    if (!eval(b, f, n->lhs, base))
        return false;
    return attr_value(b, base, n->str, n->at, out);
}

static DPC_NOINLINE bool eval_seq(builder *b, frame *f, const node *n, sv *out) {
    out->n = n->args.len;
    out->items = arena_alloc(&b->c->arena, sizeof(sv) * (size_t)(out->n + 1));
    for (int i = 0; i < out->n; i++)
        if (!eval(b, f, n->args.items[i], &out->items[i]))
            return false;
    /* a tuple, or a list: a plain sequence in forward (cat's argument) */
    out->k = n->kind == ND_TUPLE ? SV_TUPLE : SV_LIST;
    out->mod = NULL;
    return true;
}

static bool eval_node(builder *b, frame *f, const node *n, sv *out) {
    switch (n->kind) {
    case ND_INT: out->k = SV_NUM; out->v = (val){.kind = V_INT, .i = n->ival}; return true;
    case ND_FLOAT: out->k = SV_NUM; out->v = (val){.kind = V_FLOAT, .f = n->fval}; return true;
    case ND_BOOL: out->k = SV_NUM; out->v = (val){.kind = V_BOOL, .i = n->ival}; return true;
    case ND_STR: out->k = SV_NUM; out->v = (val){.kind = V_STR, .s = n->str}; return true;
    case ND_NONE: out->k = SV_NONE; return true;
    case ND_NAME: return resolve_name(b, f, n, out);
    case ND_NEG: {
        sv *v = arena_alloc(&b->c->arena, sizeof *v);
        return eval(b, f, n->lhs, v) && neg_value(b, n, v, out);
    }
    case ND_BINOP: return eval_binop(b, f, n, out);
    case ND_NOT: {
        sv *v = arena_alloc(&b->c->arena, sizeof *v);
        bool t;
        if (n->op == OP_INVERT)
            return eval(b, f, n->lhs, v) && mask_binop(b, OP_INVERT, v, v, n->at, n->lhs->at, n->lhs->at, out) &&
                   out->k == SV_TENSOR;
        if (!eval(b, f, n->lhs, v) || !const_truth(b, f, n->lhs, v, &t))
            return false;
        out->k = SV_NUM;
        out->v = (val){.kind = V_BOOL, .i = !t};
        return true;
    }
    case ND_COND: {
        sv *v = arena_alloc(&b->c->arena, sizeof *v);
        bool t;
        if (!eval(b, f, n->third, v) || !const_truth(b, f, n->third, v, &t))
            return false;
        return eval(b, f, t ? n->lhs : n->rhs, out);
    }
    case ND_CALL: return eval_call(b, f, n, out);
    case ND_INDEX: return eval_index(b, f, n, out);
    case ND_ATTR:
        if (n->lhs->kind == ND_CALL && n->lhs->lhs->kind == ND_NAME && strcmp(n->lhs->lhs->str, "finfo") == 0) {
            sv *v = arena_alloc(&b->c->arena, sizeof *v);
            return eval(b, f, n->lhs->args.len == 1 ? ((const arg *)n->lhs->args.items[0])->value : n->lhs, v) &&
                   finfo_value(b, n->lhs->args.len == 1 ? v : NULL, n->str, n->at, out);
        }
        return eval_attr(b, f, n, out);
    case ND_SUBSCRIPT: return eval_subscript(b, f, n, out);
    case ND_SLICE:
    case ND_ELLIPSIS:
        error_at(b->c, n->at, "a slice is only allowed inside [...]");
        return false;
    case ND_TUPLE:
    case ND_LIST: return eval_seq(b, f, n, out);
    case ND_LISTCOMP:
    case ND_DICTCOMP:
        error_at(b->c, n->at, "comprehensions are only allowed in module members");
        return false;
    case ND_FSTR:
    case ND_DICT:
        error_at(b->c, n->at, "%s only allowed in module members", n->kind == ND_FSTR ? "f-strings are" : "dicts are");
        return false;
    }
    return false;
}

/* Every level of expression evaluation goes through here: the nesting is
 * counted in all, through module calls (enter). Temporaries live in the
 * arena, not in these recursive frames, to keep the stack small. */
static bool eval(builder *b, frame *f, const node *n, sv *out) {
    memset(out, 0, sizeof *out);
    if (!enter(b, n->at))
        return false;
    bool ok = eval_node(b, f, n, out);
    b->nest--;
    return ok;
}

/* ------------------------------------------------------- statements */

/* Binds every name a failed statement (or a loop body that did not run)
 * would have assigned to a poison value: using one reports nothing more. */
static void poison_targets(builder *b, frame *f, const stmt *s) {
    static const sv bad = {.poison = true};
    if (!s)
        return;
    for (int i = 0; i < s->targets.len; i++) /* assigned names, or the loop variable */
        frame_bind(b, f, s->targets.items[i], &bad);
    if (s->kind == ST_FOR || s->kind == ST_IF)
        for (int i = 0; i < s->body.len; i++)
            poison_targets(b, f, s->body.items[i]);
    if (s->kind == ST_IF)
        for (int i = 0; i < s->orelse.len; i++)
            poison_targets(b, f, s->orelse.items[i]);
}

static DPC_NOINLINE bool exec_assign(builder *b, frame *f, const stmt *s) {
    sv *v = arena_alloc(&b->c->arena, sizeof *v);
    if (!eval(b, f, s->values.items[0], v)) {
        poison_targets(b, f, s);
        return false;
    }
    if (s->targets.len == 1) {
        frame_bind(b, f, s->targets.items[0], v);
        return true;
    }
    if (v->k != SV_TUPLE || v->n != s->targets.len) {
        if (v->k == SV_TUPLE)
            error_at(b->c, s->at, "cannot unpack %d value%s into %d names", v->n, v->n == 1 ? "" : "s",
                     s->targets.len);
        else
            error_at(b->c, s->at, "cannot unpack %s into %d names", sv_kind_name(v), s->targets.len);
        poison_targets(b, f, s);
        return false;
    }
    for (int i = 0; i < v->n; i++)
        frame_bind(b, f, s->targets.items[i], &v->items[i]);
    return true;
}

static DPC_NOINLINE bool exec_return(builder *b, frame *f, const stmt *s) {
    if (s->values.len == 1) {
        if (!eval(b, f, s->values.items[0], &f->ret))
            return false;
    } else {
        f->ret.k = SV_TUPLE;
        f->ret.n = s->values.len;
        f->ret.items = arena_alloc(&b->c->arena, sizeof(sv) * (size_t)s->values.len);
        for (int i = 0; i < s->values.len; i++)
            if (!eval(b, f, s->values.items[i], &f->ret.items[i]))
                return false;
    }
    f->returned = true;
    return true;
}

/* The iterable of a for loop (reported when it is not one), or NULL. */
static DPC_NOINLINE bool for_iterable(builder *b, frame *f, const node *iter, sv *it) {
    if (iter->kind == ND_CALL && iter->lhs->kind == ND_NAME && strcmp(iter->lhs->str, "range") == 0 &&
        !frame_lookup(f, "range") && !find_member(f->self, "range")) {
        error_at(b->c, iter->at,
                 "'for' in forward iterates over a ModuleList or a Sequential; range() loops are not "
                 "supported in forward (build the modules with a list comprehension member)");
        return false;
    }
    if (!eval(b, f, iter, it))
        return false;
    if (it->k == SV_TUPLE || seq_len(it) < 0) {
        error_at(b->c, iter->at, "'for' iterates over a ModuleList or a Sequential, not %s", sv_kind_name(it));
        return false;
    }
    return true;
}

static DPC_NOINLINE bool exec_for(builder *b, frame *f, const stmt *s) {
    sv *it = arena_alloc(&b->c->arena, sizeof *it);
    if (!for_iterable(b, f, s->values.items[0], it)) {
        poison_targets(b, f, s);
        return false;
    }
    for (int i = 0, n = seq_len(it); i < n && !f->returned; i++) {
        sv mv = seq_item(it, i);
        frame_bind(b, f, s->targets.items[0], &mv);
        if (!exec_block(b, f, &s->body)) {
            poison_targets(b, f, s);
            return false;
        }
    }
    return true;
}

/* The branch the condition picks, known when compiling; the other is not
 * built (as PyTorch runs one of them). */
static bool exec_if(builder *b, frame *f, const stmt *s) {
    sv *v = arena_alloc(&b->c->arena, sizeof *v);
    bool t;
    if (!eval(b, f, s->values.items[0], v) || !const_truth(b, f, s->values.items[0], v, &t)) {
        poison_targets(b, f, s);
        return false;
    }
    if (!exec_block(b, f, t ? &s->body : &s->orelse)) {
        poison_targets(b, f, s);
        return false;
    }
    return true;
}

static bool exec_stmt(builder *b, frame *f, const stmt *s) {
    if (!enter(b, s->at))
        return false;
    bool ok = false;
    switch (s->kind) {
    case ST_ASSIGN: ok = exec_assign(b, f, s); break;
    case ST_RETURN: ok = exec_return(b, f, s); break;
    case ST_FOR: ok = exec_for(b, f, s); break;
    case ST_IF: ok = exec_if(b, f, s); break;
    }
    b->nest--;
    return ok;
}

bool exec_block(builder *b, frame *f, const vec *body) {
    bool ok = true;
    for (int i = 0; i < body->len && !f->returned; i++)
        ok &= exec_stmt(b, f, body->items[i]);
    return ok;
}


