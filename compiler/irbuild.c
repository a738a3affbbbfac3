/* irbuild.c - builds the graph IR by interpreting forward symbolically.
 *
 * The root module's forward is run with symbolic tensors: each tensor
 * operation appends one IR node, its shape inferred on the spot (NumPy
 * broadcasting, PyTorch's shape rules, the batch dim kept symbolic). A call
 * of a user module inlines its forward; `for blk in layers` unrolls. Shape
 * errors name both shapes, as `fc1 expects [N, 80], got [N, 320]`. */
#include "irbuild.h"

#include <stdio.h>
#include <string.h>

static bool eval(builder *b, frame *f, const node *n, sv *out);
static bool exec_block(builder *b, frame *f, const vec *body);

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

bool builtin_one_arg(builder *b, inst *m, const fargs *a, loc at) {
    if (a->n != 1) {
        error_at(b->c, at, "%s takes one tensor argument, got %d argument%s", who(m), a->n,
                 a->n == 1 ? "" : "s");
        return false;
    }
    if (a->names[0] && strcmp(a->names[0], "input") != 0) {
        error_at(b->c, a->kw_at[0], "%s (%s) has no forward argument '%s'; pass its input positionally or as 'input='",
                 who(m), m->type_name, a->names[0]);
        return false;
    }
    return true;
}

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

static sv *lookup(frame *f, const char *name) {
    for (int i = f->locals.len - 1; i >= 0; i--) {
        binding *bd = f->locals.items[i];
        if (strcmp(bd->name, name) == 0)
            return &bd->v;
    }
    return NULL;
}

static void bind(builder *b, frame *f, const char *name, const sv *v) {
    sv *old = lookup(f, name);
    if (old) {
        *old = *v;
        return;
    }
    binding *bd = arena_alloc(&b->c->arena, sizeof *bd);
    bd->name = name;
    bd->v = *v;
    vec_push(&b->c->arena, &f->locals, bd);
}

/* Checks a tensor argument against a declared [N, 10]-style type, binding
 * dim names that are not constructor parameters (the batch name). */
static DPC_NOINLINE bool check_param_shape(builder *b, inst *m, const param *p, const ir_node *x, vec *dimnames,
                                           loc at) {
    bool ok = x->sh.rank == p->dims.len;
    shape want = x->sh;
    want.rank = p->dims.len;
    for (int i = 0; i < p->dims.len && i < IR_MAX_RANK; i++) {
        const node *dn = p->dims.items[i];
        bool is_ctor = false;
        if (dn->kind == ND_NAME)
            for (int k = 0; k < m->np; k++)
                is_ctor |= strcmp(m->pnames[k], dn->str) == 0;
        if (dn->kind == ND_NAME && !is_ctor) {
            if (i >= x->sh.rank)
                continue;
            /* a named dim: equal to every other use of the same name */
            for (int k = 0; k + 1 < dimnames->len; k += 2)
                if (strcmp(dimnames->items[k], dn->str) == 0) {
                    const dim *prev = dimnames->items[k + 1];
                    if (prev->k != x->sh.d[i].k || prev->sym != x->sh.d[i].sym) {
                        if (!prev->sym && !x->sh.d[i].sym && i > 0) {
                            char gs[256];
                            shape_str(&x->sh, b->batch, gs, sizeof gs);
                            error_at(b->c, at, "%s: dim '%s' is %lld from an earlier parameter, but '%s' is %s",
                                     who(m), dn->str, (long long)prev->k, p->name, gs);
                            return false;
                        }
                        ok = false;
                    }
                }
            vec_push(&b->c->arena, dimnames, (void *)dn->str);
            vec_push(&b->c->arena, dimnames, (void *)&x->sh.d[i]);
            want.d[i] = x->sh.d[i];
            continue;
        }
        val v;
        if (!sema_eval(b->c, b->m, m, dn, &v))
            return false;
        if (v.kind != V_INT) {
            error_at(b->c, dn->at, "a dimension must be an int");
            return false;
        }
        want.d[i] = (dim){v.i, false};
        if (i < x->sh.rank && (x->sh.d[i].sym || x->sh.d[i].k != v.i))
            ok = false;
    }
    if (!ok) {
        char ws[256], gs[256];
        /* print the declared dims by name where they were named */
        size_t pos = 0;
        pos += (size_t)snprintf(ws, sizeof ws, "[");
        for (int i = 0; i < p->dims.len && pos < sizeof ws; i++) {
            const node *dn = p->dims.items[i];
            if (dn->kind == ND_NAME && i < want.rank && want.d[i].sym)
                pos += (size_t)snprintf(ws + pos, sizeof ws - pos, "%s%s", i ? ", " : "", dn->str);
            else if (i < want.rank) {
                char one[64];
                shape s1 = {1, {want.d[i]}};
                shape_str(&s1, b->batch, one, sizeof one);
                one[strlen(one) - 1] = 0;
                pos += (size_t)snprintf(ws + pos, sizeof ws - pos, "%s%s", i ? ", " : "", one + 1);
            }
        }
        if (pos < sizeof ws)
            snprintf(ws + pos, sizeof ws - pos, "]");
        shape_str(&x->sh, b->batch, gs, sizeof gs);
        error_at(b->c, at, "%s expects %s for '%s', got %s", who(m), ws, p->name, gs);
        return false;
    }
    return true;
}

/* Whether name is a constructor value of m (a parameter or body constant). */
static bool sema_eval_has(const inst *m, const char *name) {
    for (int k = 0; k < m->np; k++)
        if (strcmp(m->pnames[k], name) == 0)
            return true;
    return false;
}

/* Binds a call's arguments to a user module's forward parameters, in f. */
static DPC_NOINLINE bool bind_forward(builder *b, inst *m, frame *f, const fargs *a, loc at) {
    const module_def *d = m->def;
    int np = d->fparams.len, pos = 0, before = b->c->nerrors;
    bool *set = arena_alloc(&b->c->arena, (size_t)(np ? np : 1));
    const char **pnames = arena_alloc(&b->c->arena, sizeof(char *) * (size_t)(np ? np : 1));
    for (int k = 0; k < np; k++)
        pnames[k] = ((param *)d->fparams.items[k])->name;
    vec dimnames = {0};
    const sv *args = a->v;
    for (int i = 0; i < a->n; i++) {
        int slot = -1;
        if (!a->names[i]) {
            if (pos >= np) {
                error_at(b->c, a->at[i], "%s takes %d argument%s, got %d", who(m), np, np == 1 ? "" : "s", a->n);
                return false;
            }
            slot = pos++;
        } else
            for (int k = 0; k < np; k++)
                if (strcmp(pnames[k], a->names[i]) == 0)
                    slot = k;
        if (slot < 0) {
            const char *near = nearest_name(a->names[i], pnames, np);
            error_at(b->c, a->kw_at[i], "forward of %s has no parameter '%s'%s%s%s", d->name, a->names[i],
                     near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
            continue;
        }
        if (set[slot]) {
            error_at(b->c, a->kw_at[i], "parameter '%s' given twice", pnames[slot]);
            continue;
        }
        const param *p = d->fparams.items[slot];
        set[slot] = true;
        if (p->kind == PT_TENSOR) {
            if (args[i].k != SV_TENSOR) {
                error_at(b->c, a->at[i], "%s expects a tensor for '%s', got %s", who(m), p->name, sv_kind_name(&args[i]));
                continue;
            }
            if (check_param_shape(b, m, p, args[i].t, &dimnames, a->at[i]))
                bind(b, f, p->name, &args[i]);
        } else {
            if (args[i].k != SV_NUM && !(args[i].k == SV_TENSOR && args[i].t->sh.rank == 0)) {
                error_at(b->c, a->at[i], "%s expects a number for '%s', got %s", who(m), p->name, sv_kind_name(&args[i]));
                continue;
            }
            bind(b, f, p->name, &args[i]);
        }
    }
    for (int k = 0; k < np; k++) {
        const param *p = d->fparams.items[k];
        if (set[k])
            continue;
        if (p->kind == PT_TENSOR || !p->deflt) {
            error_at(b->c, at, "%s: missing argument '%s'", who(m), p->name);
            continue;
        }
        sv v = {.k = SV_NUM};
        if (!sema_eval(b->c, b->m, m, p->deflt, &v.v) || !sema_scalar_default(b->c, p, &v.v, p->deflt->at))
            continue;
        bind(b, f, p->name, &v);
    }
    /* the dims the parameters named (x: [N, C, H, W]) are values in the
     * body: C, H and W as ints, the batch dim as the batch size */
    for (int k = 0; k + 1 < dimnames.len; k += 2) {
        const char *name = dimnames.items[k];
        const dim *d = dimnames.items[k + 1];
        if (lookup(f, name) || (b->batch && strcmp(name, b->batch) == 0))
            continue;
        if (!d->sym) {
            sv v = {.k = SV_NUM, .v = {.kind = V_INT, .i = d->k}};
            bind(b, f, name, &v);
        } else if (d->k == 1) {
            sv v = {.k = SV_BATCH};
            bind(b, f, name, &v);
        }
    }
    return b->c->nerrors == before;
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

static inst *find_member(inst *self, const char *name) {
    for (int i = 0; i < self->children.len; i++) {
        inst_child *ch = self->children.items[i];
        if (strcmp(ch->name, name) == 0)
            return ch->mod;
    }
    return NULL;
}

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

static void sv_of_val(const val *v, sv *out, dpc_arena *a) {
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
    sv *v = lookup(f, n->str);
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
    sv *local = lookup(f, callee->str);
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

/* f(*xs): the items of a tuple or list as positional arguments. */
static DPC_NOINLINE bool spread_args(builder *b, const node *n, fargs *a) {
    int extra = 0;
    for (int i = 0; i < a->n; i++)
        if (a->names[i] == dp_splat) {
            if (a->v[i].k != SV_TUPLE && a->v[i].k != SV_LIST) {
                error_at(b->c, a->kw_at[i], "'*' spreads a tuple or list, got %s", sv_kind_name(&a->v[i]));
                return false;
            }
            extra += a->v[i].n - 1;
        }
    if (extra == 0 && a->n == n->args.len) {
        bool any = false;
        for (int i = 0; i < a->n; i++)
            any |= a->names[i] == dp_splat;
        if (!any)
            return true;
    }
    int m = a->n + extra;
    fargs o = {0, arena_alloc(&b->c->arena, sizeof(sv) * (size_t)(m + 1)),
               arena_alloc(&b->c->arena, sizeof(char *) * (size_t)(m + 1)),
               arena_alloc(&b->c->arena, sizeof(loc) * (size_t)(m + 1)),
               arena_alloc(&b->c->arena, sizeof(loc) * (size_t)(m + 1))};
    for (int i = 0; i < a->n; i++) {
        if (a->names[i] != dp_splat) {
            o.v[o.n] = a->v[i];
            o.names[o.n] = a->names[i];
            o.at[o.n] = a->at[i];
            o.kw_at[o.n++] = a->kw_at[i];
            continue;
        }
        for (int j = 0; j < a->v[i].n; j++) {
            o.v[o.n] = a->v[i].items[j];
            o.names[o.n] = NULL;
            o.at[o.n] = a->at[i];
            o.kw_at[o.n++] = a->at[i];
        }
    }
    *a = o;
    return true;
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

/* A value known when compiling (a number, None, a module) as a
 * constructor value; false for tensors and the batch size. */
static bool sv_const(const sv *v, val *out) {
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
static bool const_truth(builder *b, const frame *f, const node *cond, const sv *v, bool *out) {
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
static DPC_NOINLINE bool binop_values(builder *b, const node *n, const sv *l, const sv *r, sv *out) {
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

/* The chain walk is sema.c's (eval_binop_chain), shared with constructor
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

static DPC_NOINLINE bool neg_value(builder *b, const node *n, const sv *v, sv *out) {
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
static int seq_len(const sv *v) {
    if (v->k == SV_TUPLE)
        return v->n;
    if ((v->k == SV_LIST || v->k == SV_MODULE) && v->mod &&
        (v->mod->bi == BI_MODULELIST || v->mod->bi == BI_SEQUENTIAL ||
         (v->mod->bi == BI_NONE && v->mod->def && v->mod->def->base)))
        return v->mod->children.len;
    return -1;
}

/* Entry i of a sequence (seq_len(v) > i). */
static sv seq_item(const sv *v, int64_t i) {
    if (v->k == SV_TUPLE)
        return v->items[i];
    inst *m = ((inst_child *)v->mod->children.items[i])->mod;
    return (sv){.k = m->bi == BI_MODULELIST ? SV_LIST : SV_MODULE, .mod = m};
}

static DPC_NOINLINE bool index_value(builder *b, const node *n, const sv *base, const sv *idx, sv *out) {
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
        bind(b, f, s->targets.items[i], &bad);
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
        bind(b, f, s->targets.items[0], v);
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
        bind(b, f, s->targets.items[i], &v->items[i]);
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
        !lookup(f, "range") && !find_member(f->self, "range")) {
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
        bind(b, f, s->targets.items[0], &mv);
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

static bool exec_block(builder *b, frame *f, const vec *body) {
    bool ok = true;
    for (int i = 0; i < body->len && !f->returned; i++)
        ok &= exec_stmt(b, f, body->items[i]);
    return ok;
}

/* ------------------------------------------------------------ entry */

static ir_dtype parse_dtype(builder *b, const param *p) {
    if (strcmp(p->dtype, "f32") == 0 || strcmp(p->dtype, "float32") == 0)
        return IR_F32;
    if (strcmp(p->dtype, "i64") == 0 || strcmp(p->dtype, "int64") == 0)
        return IR_I64;
    error_at(b->c, p->dtype_at, "unsupported tensor dtype '%s' (use f32 or i64)", p->dtype);
    return IR_F32;
}

/* Dim k of input `input` names a run-time dim (neither the batch nor a
 * constructor value: `ids: i64[N, S]`): its value in this compilation
 * (dpc_ctx.binds), 0 while unbound; each use is recorded for the
 * signature. */
static DPC_NOINLINE bool runtime_dim(builder *b, const node *dn, int input, int k, int64_t *value) {
    ir_graph *g = b->g;
    int rt = -1;
    for (int i = 0; i < g->rtdims.len; i++)
        if (strcmp(((ir_rtdim *)g->rtdims.items[i])->name, dn->str) == 0)
            rt = i;
    if (rt < 0) {
        if (g->rtdims.len == DPC_MAX_RTDIMS) {
            error_at(b->c, dn->at, "the entry names more than %d run-time dims", DPC_MAX_RTDIMS);
            return false;
        }
        ir_rtdim *d = arena_alloc(g->arena, sizeof *d);
        *d = (ir_rtdim){.name = dn->str, .at = dn->at};
        for (int i = 0; i < b->c->nbinds; i++)
            if (strcmp(b->c->binds[i].name, dn->str) == 0)
                d->value = b->c->binds[i].value;
        rt = g->rtdims.len;
        vec_push(g->arena, &g->rtdims, d);
    }
    ir_rtuse *u = arena_alloc(g->arena, sizeof *u);
    *u = (ir_rtuse){rt, input, k};
    vec_push(g->arena, &g->rtuses, u);
    *value = ((ir_rtdim *)g->rtdims.items[rt])->value;
    return true;
}

/* After the inputs: every bind names a run-time dim and has a valid value;
 * the bound ones are ints in forward's body (S in reshape(N, S, -1)); an
 * unbound one is an error unless the compilation stops here (defer_dims). */
static DPC_NOINLINE void runtime_dims_done(builder *b, frame *f, const module_def *d) {
    ir_graph *g = b->g;
    char names[256] = "";
    for (int i = 0; i < g->rtdims.len; i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", i ? ", " : "", ((ir_rtdim *)g->rtdims.items[i])->name);
    }
    for (int i = 0; i < b->c->nbinds; i++) {
        const dpc_dim_bind *bd = &b->c->binds[i];
        bool found = false;
        for (int k = 0; k < g->rtdims.len; k++)
            found |= strcmp(((ir_rtdim *)g->rtdims.items[k])->name, bd->name) == 0;
        for (int k = 0; k < i; k++)
            if (strcmp(b->c->binds[k].name, bd->name) == 0)
                error_at(b->c, d->forward_at, "run-time dim '%s' bound twice", bd->name);
        if (!found)
            error_at(b->c, d->forward_at, "cannot bind '%s': the entry of %s has no run-time dim of that name (%s%s)",
                     bd->name, d->name, g->rtdims.len ? "its run-time dims: " : "it has none", names);
        else if (bd->value < 1 || bd->value > DPC_MAX_DIM)
            error_at(b->c, d->forward_at, "run-time dim %s = %lld: a value must be between 1 and %lld", bd->name,
                     (long long)bd->value, (long long)DPC_MAX_DIM);
    }
    for (int i = 0; i < g->rtdims.len; i++) {
        const ir_rtdim *r = g->rtdims.items[i];
        if (r->value > 0) {
            sv v = {.k = SV_NUM, .v = {.kind = V_INT, .i = r->value}};
            bind(b, f, r->name, &v);
        } else if (b->c->defer_dims)
            g->deferred = true;
        else
            error_at(b->c, r->at,
                     "dim '%s' is a run-time dim (neither the batch name '%s' nor a constructor value): the graph "
                     "is built for one value of it; give one (dpc ir --bind %s=16), or run the model, which binds "
                     "it from the input",
                     r->name, b->batch, r->name);
    }
}

static DPC_NOINLINE bool root_inputs(builder *b, frame *f) {
    inst *root = b->m->root;
    const module_def *d = root->def;
    int before = b->c->nerrors;
    for (int i = 0; i < d->fparams.len; i++) {
        const param *p = d->fparams.items[i];
        sv v = {0};
        if (p->kind != PT_TENSOR && b->g->scalars.len == DPC_MAX_SCALARS) {
            error_at(b->c, p->at, "forward has more than %d scalar parameters", DPC_MAX_SCALARS);
            return false;
        }
        if (p->kind == PT_TENSOR && b->g->inputs.len == DPC_MAX_IO) {
            error_at(b->c, p->at, "forward has more than %d tensor inputs", DPC_MAX_IO);
            return false;
        }
        if (p->kind != PT_TENSOR) {
            ir_node *n = mk(b, OP_SCALAR, p->at, "");
            if (!n)
                return false;
            n->name = p->name;
            /* scalars reach kernels as floats, as a Python number does in
             * PyTorch arithmetic; the declared type checks --kw values */
            n->dt = IR_F32;
            n->attr.leaf.type = p->kind == PT_FLOAT ? 0 : p->kind == PT_INT ? 1 : 2;
            n->input_index = b->g->scalars.len;
            if (p->deflt) {
                val dv;
                if (sema_eval(b->c, b->m, root, p->deflt, &dv) && sema_scalar_default(b->c, p, &dv, p->deflt->at)) {
                    n->attr.leaf.value = dv.kind == V_FLOAT ? dv.f : (double)dv.i;
                    n->attr.leaf.has_default = true;
                }
            }
            vec_push(b->g->arena, &b->g->scalars, n);
            v.k = SV_TENSOR;
            v.t = n;
            bind(b, f, p->name, &v);
            continue;
        }
        if (p->dims.len == 0 || p->dims.len > IR_MAX_RANK) {
            error_at(b->c, p->at, "input '%s' needs between 1 and %d dims, the first the batch dim", p->name, IR_MAX_RANK);
            continue;
        }
        const node *first = p->dims.items[0];
        bool is_ctor = false;
        if (first->kind == ND_NAME)
            for (int k = 0; k < root->np; k++)
                is_ctor |= strcmp(root->pnames[k], first->str) == 0;
        /* the first tensor input names the batch; a later one whose first
         * dim is not the batch name has no batch dim (a shared table or
         * mask): it goes whole to every replica */
        bool batched = true;
        if (!b->batch) {
            if (first->kind != ND_NAME || is_ctor) {
                error_at(b->c, first->at, "the first dim of input '%s' must be the batch name (like N)", p->name);
                continue;
            }
            b->batch = first->str;
        } else
            batched = first->kind == ND_NAME && strcmp(b->batch, first->str) == 0;
        ir_node *n = mk(b, OP_INPUT, p->at, "");
        if (!n)
            return false;
        n->name = p->name;
        n->dt = parse_dtype(b, p);
        n->input_index = b->g->inputs.len;
        n->sh.rank = p->dims.len;
        if (batched)
            n->sh.d[0] = (dim){1, true};
        for (int k = batched ? 1 : 0; k < p->dims.len; k++) {
            const node *dn = p->dims.items[k];
            val dv;
            if (dn->kind == ND_NAME && strcmp(dn->str, b->batch) == 0) {
                error_at(b->c, dn->at, "only the first dim can be the batch dim");
                continue;
            }
            if (dn->kind == ND_NAME && !sema_eval_has(root, dn->str)) {
                int64_t value;
                if (runtime_dim(b, dn, n->input_index, k, &value))
                    n->sh.d[k] = (dim){value, false};
                continue;
            }
            if (!sema_eval(b->c, b->m, root, dn, &dv))
                continue;
            if (dv.kind != V_INT || dv.i < 0) {
                error_at(b->c, dn->at, "a dimension must be a non-negative int");
                continue;
            }
            if (dv.i > DPC_MAX_DIM) {
                error_at(b->c, dn->at, "dimension %lld of input '%s' is too large (limit %lld)", (long long)dv.i,
                         p->name, (long long)DPC_MAX_DIM);
                continue;
            }
            n->sh.d[k] = (dim){dv.i, false};
        }
        if (b->c->nerrors == before && !numel_ok(&n->sh)) {
            error_at(b->c, p->at, "input '%s' is too large: %s has more than 2^40 elements per sample", p->name,
                     shp(b, &n->sh));
            continue;
        }
        vec_push(b->g->arena, &b->g->inputs, n);
        v.k = SV_TENSOR;
        v.t = n;
        bind(b, f, p->name, &v);
    }
    if (b->g->inputs.len == 0 && b->c->nerrors == before)
        error_at(b->c, d->forward_at, "forward of '%s' needs at least one tensor input", d->name);
    if (b->c->nerrors == before)
        runtime_dims_done(b, f, d);
    return b->c->nerrors == before;
}

static bool collect_outputs(builder *b, const sv *r, loc at) {
    if (r->k == SV_TENSOR) {
        if (b->g->outputs.len == DPC_MAX_IO) {
            error_at(b->c, at, "forward returns more than %d tensors", DPC_MAX_IO);
            return false;
        }
        if (r->t->dt == IR_BOOL || (r->t->dt == IR_I64 && r->t->op != OP_INPUT)) {
            error_at(b->c, at, "forward returns a%s %s tensor %s: outputs are float32; convert it with .float()",
                     r->t->dt == IR_I64 ? "n" : "", r->t->dt == IR_BOOL ? "bool" : "int64", shp(b, &r->t->sh));
            return false;
        }
        vec_push(b->g->arena, &b->g->outputs, r->t);
        r->t->uses++;
        return true;
    }
    if (r->k == SV_TUPLE) {
        for (int i = 0; i < r->n; i++)
            if (!collect_outputs(b, &r->items[i], at))
                return false;
        return true;
    }
    error_at(b->c, at, "forward must return tensors, not %s", sv_kind_name(r));
    return false;
}

bool ir_build(dpc_ctx *c, model *m, ir_graph *g) {
    builder b = {.c = c, .m = m, .g = g};
    inst *root = m->root;
    if (root->bi != BI_NONE) {
        error_at(c, root->at, "the model must be a user module with a forward, not %s", root->type_name);
        return false;
    }
    if (!root->def->has_forward) {
        error_at(c, root->def->at, "module '%s' has no forward", root->def->name);
        return false;
    }
    g->model_name = root->type_name;
    g->file = root->def->at.file ? root->def->at.file->path : "";
    b.param_nodes = arena_alloc(&c->arena, sizeof(ir_node *) * (size_t)(m->params.len + 1));
    frame f = {.self = root};
    if (!root_inputs(&b, &f))
        return false;
    g->batch_name = b.batch;
    if (g->deferred) /* a run-time dim without a value: the inputs are all there is */
        return c->nerrors == 0;
    b.depth = 1;
    if (!exec_block(&b, &f, &root->def->body))
        return false;
    if (!f.returned) {
        error_at(c, root->def->forward_at, "forward of '%s' does not return a value", root->def->name);
        return false;
    }
    if (!collect_outputs(&b, &f.ret, root->def->forward_at))
        return false;
    for (int i = 0; i < m->params.len; i++)
        if (!b.param_nodes[i])
            ((param_entry *)m->params.items[i])->ignored = true;
    return c->nerrors == 0;
}
