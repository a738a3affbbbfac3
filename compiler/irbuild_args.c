/* irbuild_args.c - the arguments of a call in forward, bound before the
 * call runs: a builtin module's one `input`, a user module's forward
 * parameters (their declared [N, C, H, W] shapes checked, the dims they name
 * bound as values), f(*xs) spread into positional arguments; and the
 * frame's local variables they are bound into. (A builtin module's one
 * `input` is nn_helpers.c's builtin_one_arg.)
 *
 * It is its own file, below the forward walk (irbuild.c), because none of
 * it recurses into the walk: it evaluates only constant expressions, the
 * declared dims and defaults (sema_eval). */
#include "irbuild.h"

#include <stdio.h>
#include <string.h>

sv *frame_lookup(frame *f, const char *name) {
    for (int i = f->locals.len - 1; i >= 0; i--) {
        binding *bd = f->locals.items[i];
        if (strcmp(bd->name, name) == 0)
            return &bd->v;
    }
    return NULL;
}

void frame_bind(builder *b, frame *f, const char *name, const sv *v) {
    sv *old = frame_lookup(f, name);
    if (old) {
        *old = *v;
        return;
    }
    binding *bd = arena_alloc(&b->c->arena, sizeof *bd);
    bd->name = name;
    bd->v = *v;
    vec_push(&b->c->arena, &f->locals, bd);
}

inst *find_member(inst *self, const char *name) {
    for (int i = 0; i < self->children.len; i++) {
        inst_child *ch = self->children.items[i];
        if (strcmp(ch->name, name) == 0)
            return ch->mod;
    }
    return NULL;
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
bool sema_eval_has(const inst *m, const char *name) {
    for (int k = 0; k < m->np; k++)
        if (strcmp(m->pnames[k], name) == 0)
            return true;
    return false;
}

/* Binds a call's arguments to a user module's forward parameters, in f. */
DPC_NOINLINE bool bind_forward(builder *b, inst *m, frame *f, const fargs *a, loc at) {
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
                frame_bind(b, f, p->name, &args[i]);
        } else {
            if (args[i].k != SV_NUM && !(args[i].k == SV_TENSOR && args[i].t->sh.rank == 0)) {
                error_at(b->c, a->at[i], "%s expects a number for '%s', got %s", who(m), p->name, sv_kind_name(&args[i]));
                continue;
            }
            frame_bind(b, f, p->name, &args[i]);
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
        frame_bind(b, f, p->name, &v);
    }
    /* the dims the parameters named (x: [N, C, H, W]) are values in the
     * body: C, H and W as ints, the batch dim as the batch size */
    for (int k = 0; k + 1 < dimnames.len; k += 2) {
        const char *name = dimnames.items[k];
        const dim *d = dimnames.items[k + 1];
        if (frame_lookup(f, name) || (b->batch && strcmp(name, b->batch) == 0))
            continue;
        if (!d->sym) {
            sv v = {.k = SV_NUM, .v = {.kind = V_INT, .i = d->k}};
            frame_bind(b, f, name, &v);
        } else if (d->k == 1) {
            sv v = {.k = SV_BATCH};
            frame_bind(b, f, name, &v);
        }
    }
    return b->c->nerrors == before;
}

/* f(*xs): the items of a tuple or list as positional arguments. */
DPC_NOINLINE bool spread_args(builder *b, const node *n, fargs *a) {
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
