/* nn_container.c - the modules that hold modules: Sequential, ModuleList,
 * DataParallel. One row each (irbuild.h's `builtin`), after its
 * functions. A Sequential's forward calls its children through
 * builder.call_module: the walk (irbuild.c) is above the module rows. */
#include "irbuild.h"

#include <string.h>

static void add_child(dpc_ctx *c, inst *in, const char *name, inst *mod) {
    inst_child *ch = arena_alloc(&c->arena, sizeof *ch);
    ch->name = name;
    ch->mod = mod;
    vec_push(&c->arena, &in->children, ch);
}

/* ------------------------------------------------------- Sequential */

/* Sequential(*modules) keeps its modules as children, named 0, 1, ...;
 * Sequential({name: module, ...}) (PyTorch's OrderedDict) names them. */
static bool sequential_varargs(dpc_ctx *c, inst *in, const bound_arg *args, int nargs) {
    if (nargs == 1 && !args[0].name && args[0].v.kind == V_DICT) {
        const val *d = &args[0].v;
        for (int i = 0; i < d->n; i++) {
            if (d->items[i].kind != V_MODULE) {
                error_at(c, args[0].at, "Sequential expects modules, got %s for '%s'", val_kind_name(d->items[i].kind),
                         d->keys[i]);
                continue;
            }
            if (strcmp(d->keys[i], "forward") == 0 || !d->keys[i][0] || strchr(d->keys[i], '.')) {
                error_at(c, args[0].at, "'%s' cannot name a module (empty, 'forward' or with a '.')", d->keys[i]);
                continue;
            }
            add_child(c, in, d->keys[i], d->items[i].mod);
        }
        return true;
    }
    for (int i = 0; i < nargs; i++) {
        if (args[i].name) {
            error_at(c, args[i].name_at, "%s() takes no keyword argument '%s'", in->type_name, args[i].name);
            continue;
        }
        if (args[i].v.kind != V_MODULE) {
            error_at(c, args[i].at, "Sequential expects modules, got %s", val_kind_name(args[i].v.kind));
            continue;
        }
        add_child(c, in, arena_printf(&c->arena, "%d", in->children.len), args[i].v.mod);
    }
    return true;
}

/* Its modules one after another, the value in *cur. */
static DPC_NOINLINE bool call_sequential(builder *b, inst *m, sv *cur, loc at) {
    /* the call's bits in the arena: this frame recurses through nested Sequentials */
    fargs *one = arena_alloc(&b->c->arena, sizeof *one + sizeof(sv) + sizeof(char *) + 2 * sizeof(loc));
    sv *next = (sv *)(one + 1);
    one->n = 1;
    one->v = cur;
    one->names = (const char **)(next + 1);
    one->at = (loc *)(one->names + 1);
    one->kw_at = one->at + 1;
    one->at[0] = one->kw_at[0] = at;
    for (int i = 0; i < m->children.len; i++) {
        inst_child *ch = m->children.items[i];
        if (!b->call_module(b, ch->mod, one, at, next))
            return false;
        *cur = *next;
    }
    return true;
}

bool nn_sequential_call(builder *b, inst *m, const fargs *a, loc at, sv *out) {
    if (!builtin_one_arg(b, m, a, at))
        return false;
    *out = a->v[0];
    return call_sequential(b, m, out, at);
}

const builtin nn_sequential = {"Sequential", 0, {{0}}, .varargs = sequential_varargs, .call = nn_sequential_call};

/* ------------------------------------------------------- ModuleList */

static void modulelist_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    (void)arg_at;
    if (in->args[0].kind != V_NONE)
        for (int i = 0; i < in->args[0].n; i++)
            add_child(c, in, arena_printf(&c->arena, "%d", i), in->args[0].items[i].mod);
}

static bool modulelist_call(builder *b, inst *m, const fargs *a, loc at, sv *out) {
    (void)m, (void)a, (void)out;
    error_at(b->c, at, "a ModuleList is not callable; iterate over it with 'for' or index it");
    return false;
}

/* repr.c prints it (runs of equal modules folded) */
const builtin nn_modulelist = {
    "ModuleList", 1, {{"modules", 'l', "None"}}, .init = modulelist_init, .call = modulelist_call,
};

/* ----------------------------------------------------- DataParallel */

static void dataparallel_init(dpc_ctx *c, inst *in, const loc *arg_at) {
    add_child(c, in, "module", in->args[0].mod);
    NEED(inst_int(in, 3) == 0, 3, "only dim=0 is supported for DataParallel");
}

/* no lower: "DataParallel cannot be called" (sema.c allows it only around
 * the model) */
const builtin nn_dataparallel = {
    "DataParallel", 4,
    {{"module", 'm', NULL}, {"device_ids", 'L', "None"}, {"output_device", 'n', "None"}, {"dim", 'i', "0"}},
    .init = dataparallel_init,
};
