/* onnx_import.c - ONNX graph -> .dp source + weights (onnx.h).
 *
 * The nodes are imported in file order (ONNX requires a topological one: a
 * name used before it is defined is an error, which also rules out
 * cycles). Each node's row in the op table (onnx_ops.c) either folds it
 * (all inputs constant: shape plumbing) or adds a statement to forward,
 * maybe with a member and its weights. Patterns that an exporter
 * decomposed (Erf-GELU, LayerNorm before opset 17, x*sigmoid(x), MatMul +
 * Add) are recognised by the row of their last node, which reads straight
 * from the pattern's input; statements nothing reads any more are dropped
 * at the end (a reverse liveness pass from the graph outputs), with their
 * members and weights.
 *
 * This file is the driver: the model read, the graph inputs, each node
 * checked against its row and imported, the .dp and weights written. Every
 * identifier in the .dp is made by onnx_text.c (imp_ident: ONNX names are
 * sanitised to [A-Za-z0-9_], never pasted); ONNX strings reach the text
 * only in comments, through emit_comment_text (compiler/escape.c). */
#include "onnx_imp.h"

#include "emit.h"

#include <libgen.h>
#include <stdio.h>
#include <string.h>

static dpc_status import_node(imp *I, int k) {
    const Onnx__NodeProto *n = I->g->node[k];
    const imp_op *op = imp_claim_node(I, k);
    if (!op)
        return I->e->code;
    I->cur = k;
    dpc_status s;
    if ((s = imp_check_node(I, n, op)) != DPC_OK) /* its attributes and arity (onnx_ops.c) */
        return s;
    if ((s = imp_load_inputs(I, n)) != DPC_OK)
        return s;
    for (size_t i = 0; i < n->n_input; i++) {
        if (!n->input[i][0])
            continue;
        int v = imp_find(I, n->input[i]);
        char nm[260];
        imp_comment(nm, sizeof nm, n->input[i]);
        if (v < 0)
            return imp_err(I, "input '%s' is not defined before this node (the graph must be in topological order)",
                           nm);
        if (!I->v[v].c && !I->v[v].var && I->v[v].merged < 0 && !I->v[v].deferred && !I->v[v].region)
            return imp_err(I, "input '%s' is an output that dpc does not compute (of node %d)", nm, I->v[v].node);
    }
    for (size_t i = 0; i < n->n_output; i++)
        if (n->output[i][0] && imp_new_value(I, n->output[i]) < 0)
            return I->e->code ? I->e->code : DPC_EUSER;
    I->bad_attr = I->bad_float = NULL;
    I->bad_access[0] = 0;
    s = I->claim[k] ? imp_mha_node(I, n) : op->fn(I, n);
    if (I->bad_access[0]) /* whatever the op made of the placeholder, the node is refused */
        return imp_err(I, "internal: %s", I->bad_access);
    if (s == DPC_OK && I->bad_attr) {
        char an[260];
        imp_comment(an, sizeof an, I->bad_attr);
        return imp_err(I, "attribute %s has a type or size this op does not take", an);
    }
    if (s == DPC_OK && I->bad_float) {
        /* refused, not written: a bare nan/inf in the .dp would be a name (a graph input's) */
        char an[260];
        imp_comment(an, sizeof an, I->bad_float);
        return imp_err(I, "attribute %s is NaN or infinite (dpc takes finite float attributes only)", an);
    }
    if (s == DPC_OK)
        imp_release(I, k);
    return s;
}

/* The value kind of a graph input's element type (float32; int64 and
 * int32 as integers), or the refusal. */
static dpc_status input_kind(imp *I, const Onnx__TypeProto__Tensor *tt, const char *nm, int *kind) {
    int et = tt->has_elem_type ? tt->elem_type : 0;
    if (et == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        *kind = VK_FLOAT;
    else if (et == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || et == ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
        *kind = VK_INT;
    else
        return imp_err(I, "graph input '%s': element type %d is not supported (float32, int64, int32 are)", nm, et);
    return DPC_OK;
}

/* The symbol of the run-time dim named param in *sid: the one of that
 * name, or a new one (I->syms[sid] its identifier, [sid + DPC_MAX_RANK]
 * the name as written). */
static dpc_status dim_symbol(imp *I, const char *param, int *sid) {
    *sid = 0;
    for (int s = 2; s < I->nsyms; s++)
        if (strcmp(I->syms[s + DPC_MAX_RANK], param) == 0)
            *sid = s;
    if (!*sid) {
        if (I->nsyms >= 2 + DPC_MAX_RANK)
            return imp_err(I, "more than %d symbolic dims", DPC_MAX_RANK);
        *sid = I->nsyms++;
        const char *id = imp_ident(I, param, "S");
        if (!id)
            return DPC_ENOMEM;
        /* a run-time dim reads best in upper case: "seq" stays as written, sanitised */
        I->syms[*sid] = (char *)id;
        I->syms[*sid + DPC_MAX_RANK] = (char *)imp_printf(I, "%s", param);
    }
    return DPC_OK;
}

static dpc_status read_inputs(imp *I, const dpc_onnx_import_opts *o, dpc_buf *sig) {
    const Onnx__GraphProto *g = I->g;
    int nin = 0;
    const char *first0_param = NULL; /* how the first input's dim 0 is written */
    int64_t first0_value = 0;
    I->syms[1] = "N";
    I->nsyms = 2;
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        int f = imp_find(I, vi->name);
        if (f >= 0 && I->v[f].init >= 0 && I->v[f].node < 0 && !I->v[f].var)
            continue; /* an initializer also listed as input (IR < 4): a constant */
        char nm[260];
        imp_comment(nm, sizeof nm, vi->name);
        if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type ||
            !vi->type->tensor_type->shape)
            return imp_err(I, "graph input '%s' is not a tensor of known rank", nm);
        const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
        int kind = VK_FLOAT;
        if (input_kind(I, tt, nm, &kind) != DPC_OK)
            return I->e->code;
        const Onnx__TensorShapeProto *sh = tt->shape;
        if (sh->n_dim < 1 || sh->n_dim > DPC_MAX_RANK)
            return imp_err(I, "graph input '%s' has rank %zu (dpc takes 1 to %d, the first dim the batch)", nm,
                           sh->n_dim, DPC_MAX_RANK);
        int v = imp_new_value(I, vi->name);
        if (v < 0)
            return I->e->code;
        ival *x = &I->v[v];
        x->kind = kind;
        x->var = imp_ident(I, vi->name, "input");
        if (!x->var)
            return DPC_ENOMEM;
        sdim d[DPC_MAX_RANK];
        dpc_buf_printf(sig, "%s%s: %s[", nin ? ", " : "", x->var, kind == VK_INT ? "i64" : "");
        for (size_t k = 0; k < sh->n_dim; k++) {
            const Onnx__TensorShapeProto__Dimension *dm = sh->dim[k];
            const char *param = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dm->dim_param
                                                                                                      : NULL;
            bool has_val = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            /* dim 0 of the first input is the batch, whatever the file says; of
             * a later input, when written as the first input's is (else that
             * input has no batch dim: a table, a bias, a second operand) */
            bool same0 = nin == 0 || (param && first0_param && strcmp(param, first0_param) == 0) ||
                         (has_val && first0_value && dm->dim_value == first0_value);
            if (k == 0 && nin == 0) {
                first0_param = param;
                first0_value = has_val ? dm->dim_value : 0;
            }
            if (k == 0 && same0) {
                d[0] = (sdim){1, 1}; /* the batch, whatever the file says */
                dpc_buf_puts(sig, "N");
                continue;
            }
            if (param)
                for (int f = 0; f < o->ndims; f++)
                    if (strcmp(o->dims[f].name, param) == 0)
                        has_val = true;
            if (has_val) {
                int64_t val = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? dm->dim_value : 0;
                for (int f = 0; param && f < o->ndims; f++)
                    if (strcmp(o->dims[f].name, param) == 0)
                        val = o->dims[f].value;
                if (val < 1 || val > 2147483647)
                    return imp_err(I, "graph input '%s': dim %zu is %lld", nm, k, (long long)val);
                d[k] = (sdim){val, 0};
                dpc_buf_printf(sig, "%s%lld", k ? ", " : "", (long long)val);
                continue;
            }
            if (!param || !*param)
                return imp_err(I, "graph input '%s': dim %zu has neither a size nor a name", nm, k);
            int sid;
            dpc_status s = dim_symbol(I, param, &sid);
            if (s != DPC_OK)
                return s;
            d[k] = (sdim){1, sid};
            dpc_buf_printf(sig, "%s%s", k ? ", " : "", I->syms[sid]);
        }
        dpc_buf_puts(sig, "]");
        dpc_status s = imp_set_shape(I, v, (int)sh->n_dim, d);
        if (s != DPC_OK)
            return s;
        nin++;
    }
    if (!nin)
        return imp_err(I, "the graph has no inputs besides its initializers");
    return DPC_OK;
}

static void free_imp(imp *I) {
    for (int i = 0; i < I->nt; i++)
        dpc_tensor_free(I->tensors[i]);
    dpc_free(I->tensors);
    for (int i = 0; i < I->nnames; i++)
        dpc_free(I->names[i]);
    dpc_free(I->names);
    dpc_free(I->idset);
    dpc_free(I->sfx);
    dpc_free(I->tslot);
    dpc_free(I->uses);
    for (int i = 0; i < I->nst; i++) {
        dpc_free(I->st[i].line);
        dpc_free(I->st[i].member);
        dpc_free(I->st[i].uses);
    }
    dpc_free(I->st);
    for (int i = 0; i < I->nv; i++)
        dpc_free(I->v[i].csym);
    dpc_free(I->v);
    dpc_free(I->hash);
    dpc_free(I->w);
    dpc_free(I->claim);
    dpc_free(I->mha);
    dpc_onnx_model_free(I->m);
}

void dpc_onnx_result_free(dpc_onnx_result *r) {
    if (!r)
        return;
    dpc_free(r->dp);
    for (size_t i = 0; i < r->nweights; i++) {
        dpc_free(r->weights[i].name);
        dpc_free(r->weights[i].data);
    }
    dpc_free(r->weights);
    dpc_onnx_files_free(r->files, r->nfiles);
    memset(r, 0, sizeof *r);
}

dpc_status dpc_onnx_result_weights(const dpc_onnx_result *r, dpc_safetensors **out, dpc_err *e) {
    dpc_buf img;
    dpc_status s = dpc_st_serialize(r->weights, r->nweights, NULL, NULL, 0, &img, e);
    if (s == DPC_OK)
        s = dpc_st_parse(img.data, img.len, out, e);
    dpc_buf_free(&img);
    return s;
}

static dpc_status finish(imp *I, dpc_buf *sig, dpc_onnx_result *out) {
    const Onnx__GraphProto *g = I->g;
    I->cur = -1;
    int outs[64], nout = 0;
    if (g->n_output > 64)
        return imp_err(I, "more than 64 graph outputs");
    for (size_t i = 0; i < g->n_output; i++) {
        int v = imp_find(I, g->output[i]->name);
        char nm[260];
        imp_comment(nm, sizeof nm, g->output[i]->name);
        if (v < 0)
            return imp_err(I, "graph output '%s' is not computed by any node", nm);
        if (!I->v[v].var)
            return imp_err(I, "graph output '%s' is a constant or an input: not supported", nm);
        if (I->v[v].kind != VK_FLOAT)
            return imp_err(I, "graph output '%s' is not a float tensor (dpc returns float tensors only)", nm);
        outs[nout++] = v;
    }
    for (int i = 0; i < nout; i++)
        if (I->v[outs[i]].stmt >= 0)
            I->st[I->v[outs[i]].stmt].live = true;
    for (int k = I->nst - 1; k >= 0; k--)
        if (I->st[k].live)
            for (int u = 0; u < I->st[k].nuses; u++)
                if (I->v[I->st[k].uses[u]].stmt >= 0)
                    I->st[I->v[I->st[k].uses[u]].stmt].live = true;
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_puts(&b, "# Imported by `dpc import` from ");
    char *pc = dpc_strdup(I->path);
    emit_comment_text(&b, pc ? basename(pc) : "?");
    dpc_free(pc);
    dpc_buf_printf(&b, " (opset %lld", (long long)I->opset);
    if (I->m->producer_name && *I->m->producer_name) {
        dpc_buf_puts(&b, ", producer ");
        emit_comment_text(&b, I->m->producer_name);
        if (I->m->producer_version && *I->m->producer_version) {
            dpc_buf_puts(&b, " ");
            emit_comment_text(&b, I->m->producer_version);
        }
    }
    dpc_buf_printf(&b, ", %zu nodes).\n", g->n_node);
    dpc_buf_puts(&b, "# Each statement names the ONNX node and op it comes from; members are named after\n"
                     "# the initializers (or nodes), and their state_dict keys are the weights written.\n");
    dpc_buf_puts(&b, "module Model {\n");
    for (int k = 0; k < I->nst; k++)
        if (I->st[k].live && I->st[k].member)
            dpc_buf_printf(&b, "    %s\n", I->st[k].member);
    dpc_buf_printf(&b, "\n    forward(%s) {\n", sig->data ? sig->data : "");
    for (int k = 0; k < I->nst; k++)
        if (I->st[k].live && I->st[k].line)
            dpc_buf_puts(&b, I->st[k].line);
    dpc_buf_puts(&b, "        return ");
    for (int i = 0; i < nout; i++)
        dpc_buf_printf(&b, "%s%s", i ? ", " : "", I->v[outs[i]].var);
    dpc_buf_puts(&b, "\n    }\n}\nmodel = Model()\n");
    if (b.oom) {
        dpc_buf_free(&b);
        return imp_oom(I);
    }
    out->dp_len = b.len;
    out->dp = dpc_buf_take(&b);
    /* the live weights, copied out */
    int nw = 0;
    for (int k = 0; k < I->nst; k++)
        if (I->st[k].live)
            nw += I->st[k].wcount;
    out->weights = dpc_calloc(nw ? (size_t)nw : 1, sizeof *out->weights);
    if (!out->weights || !out->dp)
        return imp_oom(I);
    for (int k = 0; k < I->nst; k++) {
        if (!I->st[k].live)
            continue;
        for (int j = I->st[k].wfirst; j < I->st[k].wfirst + I->st[k].wcount; j++) {
            dpc_st_tensor *t = &out->weights[out->nweights];
            const dpc_tensor *src = I->w[j].t;
            t->name = dpc_strdup(I->w[j].key);
            t->dtype = src->dtype;
            t->rank = src->rank;
            memcpy(t->shape, src->shape, sizeof t->shape);
            t->nbytes = src->nbytes;
            t->data = dpc_malloc(src->nbytes ? src->nbytes : 1);
            if (!t->name || !t->data) {
                dpc_free(t->name);
                dpc_free(t->data);
                return imp_oom(I);
            }
            memcpy(t->data, src->data, src->nbytes);
            out->nweights++;
        }
    }
    return DPC_OK;
}

dpc_status dpc_onnx_import(const dpc_onnx_import_opts *o, dpc_onnx_result *out, dpc_err *e) {
    memset(out, 0, sizeof *out);
    imp I = {.path = o->path, .e = e, .cur = -1};
    char *dircopy = dpc_strdup(o->path);
    if (!dircopy)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    I.dir = dirname(dircopy);
    dpc_buf sig;
    dpc_buf_init(&sig);
    dpc_status s = o->image ? dpc_onnx_parse(o->image, o->len, o->path, &I.m, e) : dpc_onnx_read(o->path, &I.m, e);
    if (s != DPC_OK)
        goto done;
    I.g = I.m->graph;
    I.opset = dpc_onnx_opset(I.m);
    if ((s = imp_add_placeholder(&I)) != DPC_OK)
        goto done;
    for (int f = 0; f < o->ndims; f++) {
        bool found = false;
        for (size_t i = 0; i < I.g->n_input; i++) {
            const Onnx__TypeProto *tp = I.g->input[i]->type;
            if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type->shape)
                continue;
            for (size_t k = 0; k < tp->tensor_type->shape->n_dim; k++) {
                const Onnx__TensorShapeProto__Dimension *dm = tp->tensor_type->shape->dim[k];
                found |= dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                         strcmp(dm->dim_param, o->dims[f].name) == 0;
            }
        }
        if (!found) {
            s = dpc_errf(e, DPC_EUSAGE, "--dim %.200s: no graph input has a dim of that name", o->dims[f].name);
            goto done;
        }
    }
    for (size_t k = 0; k < I.g->n_node; k++)
        if (!imp_claim_node(&I, (int)k)) {
            s = e->code;
            goto done;
        }
    /* initializers: constants (onnx_fold.c) */
    if ((s = imp_load_initializers(&I)) != DPC_OK)
        goto done;
    if ((s = read_inputs(&I, o, &sig)) != DPC_OK || (s = imp_count_uses(&I)) != DPC_OK)
        goto done;
    if (!(I.claim = dpc_calloc(I.g->n_node ? I.g->n_node : 1, sizeof *I.claim))) {
        s = imp_oom(&I);
        goto done;
    }
    for (size_t k = 0; k < I.g->n_node; k++)
        if ((s = import_node(&I, (int)k)) != DPC_OK)
            goto done;
    s = finish(&I, &sig, out);
    if (s == DPC_OK) /* for the CLI: no output may replace one of them */
        s = dpc_onnx_model_files(I.m, o->path, I.dir, &out->files, &out->nfiles, e);
done:
    if (s != DPC_OK)
        dpc_onnx_result_free(out);
    dpc_buf_free(&sig);
    free_imp(&I);
    dpc_free(dircopy);
    return s;
}
