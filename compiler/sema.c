/* sema.c - semantic analysis of the module tree: resolves module names,
 * binds arguments to signatures and instantiates the tree that `dpc print`
 * shows and whose parameters form the state_dict: user modules' members in
 * source order (= PyTorch's registration order), the branches of `if`,
 * Sequential subclasses, builtins' subclasses, tensor members (ctensor.c).
 * Constructor expressions are evaluated by sema_expr.c, which comes back
 * here, through sema.construct, for a call that builds a module. Forward
 * bodies are handled later, by irbuild.c. */
#include "sema.h"

#include <stdio.h>
#include <string.h>

#define MAX_INSTANCES 100000

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

/* A call that builds a module (eval_call in sema_expr.c, through
 * sema.construct): a builtin, a user module, a builtin's subclass, or a
 * module class held by a name (partial or a Module parameter). */
static DPC_NOINLINE bool construct(sema *s, const env *e, const node *n, val *out) {
    const char *name = n->lhs->str;
    bound_arg *args = NULL;
    int nargs = 0;
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
    sema s = {.c = c, .m = m, .construct = construct};
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
