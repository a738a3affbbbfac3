/* irbuild_entry.c - the entry of the IR builder, ir_build: the root
 * module's forward parameters become the graph's inputs (the first names
 * the batch dim; other named dims are run-time dims, bound from
 * dpc_ctx.binds) and scalars, the walk (irbuild.c) runs the body, and what
 * forward returns becomes the graph's outputs.
 *
 * It is its own file because it is the one place that knows the graph's
 * interface (inputs, scalars, run-time dims, outputs); the walk below it
 * only computes. */
#include "irbuild.h"

#include <stdio.h>
#include <string.h>

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
            frame_bind(b, f, r->name, &v);
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

/* A scalar parameter of the root's forward: an OP_SCALAR leaf, bound to its
 * name in f. False when no node could be made. */
static DPC_NOINLINE bool scalar_input(builder *b, frame *f, inst *root, const param *p) {
    sv v = {0};
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
    frame_bind(b, f, p->name, &v);
    return true;
}

/* A tensor parameter of the root's forward: an OP_INPUT leaf of its
 * declared dtype and dims (the first input's first dim names the batch;
 * other named dims are run-time dims), bound to its name in f. Errors are
 * reported and the parameter skipped; false when no node could be made.
 * before: the error count before the first parameter. */
static DPC_NOINLINE bool tensor_input(builder *b, frame *f, inst *root, const param *p, int before) {
    sv v = {0};
    if (p->dims.len == 0 || p->dims.len > IR_MAX_RANK) {
        error_at(b->c, p->at, "input '%s' needs between 1 and %d dims, the first the batch dim", p->name, IR_MAX_RANK);
        return true;
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
            return true;
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
        return true;
    }
    vec_push(b->g->arena, &b->g->inputs, n);
    v.k = SV_TENSOR;
    v.t = n;
    frame_bind(b, f, p->name, &v);
    return true;
}

static DPC_NOINLINE bool root_inputs(builder *b, frame *f) {
    inst *root = b->m->root;
    const module_def *d = root->def;
    int before = b->c->nerrors;
    for (int i = 0; i < d->fparams.len; i++) {
        const param *p = d->fparams.items[i];
        if (p->kind != PT_TENSOR && b->g->scalars.len == DPC_MAX_SCALARS) {
            error_at(b->c, p->at, "forward has more than %d scalar parameters", DPC_MAX_SCALARS);
            return false;
        }
        if (p->kind == PT_TENSOR && b->g->inputs.len == DPC_MAX_IO) {
            error_at(b->c, p->at, "forward has more than %d tensor inputs", DPC_MAX_IO);
            return false;
        }
        if (p->kind != PT_TENSOR ? !scalar_input(b, f, root, p) : !tensor_input(b, f, root, p, before))
            return false;
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
    builder b = {.c = c, .m = m, .g = g, .call_module = call_module};
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
