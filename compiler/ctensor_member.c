/* ctensor_member.c - the Parameter and buffer members of user modules:
 * recognising one in a module body (`Parameter(...)`, `Buffer(...,
 * persistent=...)`, `register_buffer("name", ...)`,
 * `register_parameter("name", Parameter(...))`), adding it to its module,
 * and the state_dict entries they make (PyTorch's order: a module's
 * Parameters, then its persistent buffers, then its children;
 * non-persistent buffers are not in the state_dict and are filled by the
 * runtime from their constant value).
 *
 * It is its own file, above ctensor.c, which evaluates the values
 * (ctensor_eval): this is where a member's declaration is read. */
#include "irbuild.h"

#include <string.h>

static bool callee_is(const node *n, const char *name) {
    return n->kind == ND_CALL && n->lhs->kind == ND_NAME && strcmp(n->lhs->str, name) == 0 && n->op != 'm';
}

/* Parameter(data, requires_grad=True) or Buffer(data, persistent=True) */
static bool member_value(dpc_ctx *c, model *m, inst *in, const node *v, tmember *t) {
    bool param = callee_is(v, "Parameter");
    const char *fn = param ? "Parameter" : "Buffer";
    const node *data = NULL, *pers = NULL;
    for (int i = 0; i < v->args.len; i++) {
        const arg *g = v->args.items[i];
        if (!g->name && !data)
            data = g->value;
        else if (g->name && strcmp(g->name, "data") == 0 && !data)
            data = g->value;
        else if (g->name && !param && strcmp(g->name, "persistent") == 0)
            pers = g->value;
        else if (g->name && param && strcmp(g->name, "requires_grad") == 0)
            continue;
        else {
            error_at(c, g->at, "%s takes %s", fn,
                     param ? "(data, requires_grad=True)" : "(data, persistent=True)");
            return false;
        }
    }
    if (!data) {
        error_at(c, v->at, "%s needs its value: %s(zeros(...)) or another tensor created at construction", fn, fn);
        return false;
    }
    t->is_param = param;
    t->persistent = true;
    t->at = v->at;
    if (pers) {
        val pv;
        if (!sema_eval(c, m, in, pers, &pv))
            return false;
        if (pv.kind != V_BOOL) {
            error_at(c, pers->at, "persistent must be True or False, got %s", val_kind_name(pv.kind));
            return false;
        }
        t->persistent = pv.i != 0;
    }
    t->ct = arena_alloc(&c->arena, sizeof *t->ct);
    if (!ctensor_eval(c, m, in, data, t->ct))
        return false;
    if (param && t->ct->dtype != CTD_F32) {
        error_at(c, data->at, "a Parameter must be a float tensor (only float tensors can require gradients), got %s",
                 t->ct->dtype == CTD_I64 ? "int64" : "bool");
        return false;
    }
    if (!t->persistent && (t->ct->kind == CT_NORMAL || t->ct->kind == CT_UNIFORM)) {
        error_at(c, data->at,
                 "a non-persistent buffer is not in the state_dict, so its value must be constant, not random");
        return false;
    }
    if (t->persistent && t->ct->dtype == CTD_BOOL) {
        error_at(c, data->at, "a persistent bool buffer is not supported; make it persistent=False");
        return false;
    }
    return true;
}

static bool name_taken(const inst *in, const char *name) {
    for (int i = 0; i < in->children.len; i++)
        if (strcmp(((inst_child *)in->children.items[i])->name, name) == 0)
            return true;
    for (int i = 0; i < in->tensors.len; i++)
        if (strcmp(((tmember *)in->tensors.items[i])->name, name) == 0)
            return true;
    return false;
}

bool ctensor_member(dpc_ctx *c, model *m, inst *in, const char *name, const node *value, loc at) {
    tmember *t = arena_alloc(&c->arena, sizeof *t);
    if (!name) {
        bool rb = callee_is(value, "register_buffer"), rp = callee_is(value, "register_parameter");
        if (!rb && !rp)
            return false;
        const char *fn = rb ? "register_buffer" : "register_parameter";
        const node *nm = NULL, *tv = NULL, *pers = NULL;
        for (int i = 0; i < value->args.len; i++) {
            const arg *g = value->args.items[i];
            if (!g->name && !nm)
                nm = g->value;
            else if (!g->name && !tv)
                tv = g->value;
            else if (g->name && strcmp(g->name, "name") == 0)
                nm = g->value;
            else if (g->name && strcmp(g->name, rb ? "tensor" : "param") == 0)
                tv = g->value;
            else if (rb && g->name && strcmp(g->name, "persistent") == 0)
                pers = g->value;
            else {
                error_at(c, g->at, "%s takes %s", fn, rb ? "(name, tensor, persistent=True)" : "(name, param)");
                return true;
            }
        }
        if (!nm || nm->kind != ND_STR || !tv) {
            error_at(c, value->at, "%s takes %s", fn,
                     rb ? "(\"name\", tensor, persistent=True)" : "(\"name\", Parameter(...))");
            return true;
        }
        name = nm->str;
        if (rp && !callee_is(tv, "Parameter")) {
            error_at(c, tv->at, "register_parameter takes a Parameter(...)");
            return true;
        }
        if (rb) {
            /* the same as name = Buffer(tensor, persistent=...) */
            node *call = arena_alloc(&c->arena, sizeof *call);
            node *callee = arena_alloc(&c->arena, sizeof *callee);
            *callee = (node){.kind = ND_NAME, .at = value->at, .str = "Buffer"};
            *call = (node){.kind = ND_CALL, .at = value->at, .lhs = callee};
            arg *a0 = arena_alloc(&c->arena, sizeof *a0);
            *a0 = (arg){NULL, (node *)tv, tv->at};
            vec_push(&c->arena, &call->args, a0);
            if (pers) {
                arg *a1 = arena_alloc(&c->arena, sizeof *a1);
                *a1 = (arg){"persistent", (node *)pers, pers->at};
                vec_push(&c->arena, &call->args, a1);
            }
            tv = call;
        }
        value = tv;
    } else if (!callee_is(value, "Parameter") && !callee_is(value, "Buffer"))
        return false;
    if (name_taken(in, name)) {
        error_at(c, at, "member '%s' is defined twice in module '%s'", name, in->def ? in->def->name : in->type_name);
        return true;
    }
    if (strcmp(name, "forward") == 0) {
        error_at(c, at, "'forward' cannot be a member name");
        return true;
    }
    t->name = name;
    if (member_value(c, m, in, value, t))
        vec_push(&c->arena, &in->tensors, t);
    return true;
}

static void add_entry(dpc_ctx *c, model *m, inst *in, const tmember *t) {
    param_entry *p = arena_alloc(&c->arena, sizeof *p);
    p->key = in->path[0] ? arena_printf(&c->arena, "%s.%s", in->path, t->name) : t->name;
    p->rank = t->ct->rank;
    memcpy(p->shape, t->ct->shape, sizeof(int64_t) * (size_t)t->ct->rank);
    p->init = INIT_TENSOR;
    p->owner = in;
    p->ct = t->ct;
    p->is_int = t->ct->dtype == CTD_I64;
    /* integer buffers are kept in the state_dict; forward reads float ones */
    p->ignored = p->is_int;
    p->nonpersistent = !t->persistent;
    vec_push(&c->arena, &m->params, p);
}

void ctensor_add_params(dpc_ctx *c, model *m, inst *in) {
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < in->tensors.len; i++) {
            const tmember *t = in->tensors.items[i];
            int which = t->is_param ? 0 : t->persistent ? 1 : 2;
            if (which == pass)
                add_entry(c, m, in, t);
        }
}
