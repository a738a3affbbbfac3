/* onnx_values.c - the importer's state that every part reads: located
 * errors (imp_err), memory and strings it owns, the values (by ONNX name,
 * the placeholder that stands for a bad look-up), a node's inputs and
 * outputs, shapes, attributes, and how many nodes read each name. The
 * bottom of the importer: it calls nothing else of it. */
#include "onnx_imp.h"

#include "emit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

dpc_status imp_oom(imp *I) {
    I->oom = true;
    return dpc_errf(I->e, DPC_ENOMEM, "out of memory");
}

void imp_comment(char *out, size_t n, const char *s) {
    dpc_buf b;
    dpc_buf_init(&b);
    emit_comment_text(&b, s);
    snprintf(out, n, "%.*s%s", 200, b.data ? b.data : "", b.len > 200 ? "..." : "");
    dpc_buf_free(&b);
}

/* A located error. The importer's own bugs are written "internal: ..." and
 * get DPC_EINTERNAL, not DPC_EUSER: told by our format string, never by the
 * message, which may echo a name from the file (fuzz_onnx aborts on them). */
dpc_status imp_err(imp *I, const char *fmt, ...) {
    char msg[700], nm[260], op[260];
    dpc_status code = strncmp(fmt, "internal: ", 10) == 0 ? DPC_EINTERNAL : DPC_EUSER;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (I->cur >= 0) {
        const Onnx__NodeProto *n = I->g->node[I->cur];
        imp_comment(nm, sizeof nm, n->name && *n->name ? n->name : "");
        imp_comment(op, sizeof op, n->op_type);
        if (n->name && *n->name)
            return dpc_errf(I->e, code, "%s: node '%s' (%s, opset %lld): %s", I->path, nm, op,
                            (long long)I->opset, msg);
        return dpc_errf(I->e, code, "%s: node %d (%s, opset %lld): %s", I->path, I->cur, op,
                        (long long)I->opset, msg);
    }
    return dpc_errf(I->e, code, "%s: %s", I->path, msg);
}

uint64_t imp_hash(const char *s) { return dpc_fnv1a(s, strlen(s), 1469598103934665603ull); }

bool imp_grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap)
        return true;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *q = dpc_realloc(*p, (size_t)nc * elem);
    if (!q)
        return false;
    memset((char *)q + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *p = q, *cap = nc;
    return true;
}

char *imp_printf(imp *I, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    char *s = dpc_buf_take(&b);
    if (!s) {
        imp_oom(I);
        return NULL;
    }
    if (!imp_grow((void **)&I->names, &I->capnames, I->nnames + 1, sizeof *I->names)) {
        dpc_free(s);
        imp_oom(I);
        return NULL;
    }
    I->names[I->nnames++] = s; /* owned through the names list (not all are identifiers) */
    return s;
}

void *imp_alloc(imp *I, size_t n) {
    char *p = dpc_calloc(n ? n : 1, 1);
    if (!p || !imp_grow((void **)&I->names, &I->capnames, I->nnames + 1, sizeof *I->names)) {
        dpc_free(p);
        imp_oom(I);
        return NULL;
    }
    I->names[I->nnames++] = p; /* freed with the strings (a zeroed block is an empty string to them) */
    return p;
}

int imp_find(imp *I, const char *name) {
    if (!I->hcap)
        return -1;
    for (size_t h = imp_hash(name) & (I->hcap - 1);; h = (h + 1) & (I->hcap - 1)) {
        int k = I->hash[h];
        if (!k)
            return -1;
        if (strcmp(I->v[k - 1].name, name) == 0)
            return k - 1;
    }
}

int imp_new_value(imp *I, const char *name) {
    if (imp_find(I, name) >= 0) {
        char nm[260];
        imp_comment(nm, sizeof nm, name);
        imp_err(I, "the value '%s' is defined twice", nm);
        return -1;
    }
    if (!imp_grow((void **)&I->v, &I->capv, I->nv + 1, sizeof *I->v)) {
        imp_oom(I);
        return -1;
    }
    if ((size_t)(I->nv + 1) * 2 > I->hcap) {
        size_t nc = I->hcap ? I->hcap * 2 : 1024;
        int *nh = dpc_calloc(nc, sizeof *nh);
        if (!nh) {
            imp_oom(I);
            return -1;
        }
        for (int i = IMP_PLACEHOLDER + 1; i < I->nv; i++) /* the placeholder has no name */
            for (size_t h = imp_hash(I->v[i].name) & (nc - 1);; h = (h + 1) & (nc - 1))
                if (!nh[h]) {
                    nh[h] = i + 1;
                    break;
                }
        dpc_free(I->hash);
        I->hash = nh, I->hcap = nc;
    }
    int k = I->nv++;
    ival *v = &I->v[k];
    memset(v, 0, sizeof *v);
    v->name = name, v->stmt = -1, v->node = I->cur, v->init = -1, v->merged = -1;
    for (size_t h = imp_hash(name) & (I->hcap - 1);; h = (h + 1) & (I->hcap - 1))
        if (!I->hash[h]) {
            I->hash[h] = k + 1;
            break;
        }
    return k;
}

/* The placeholder as made: no name, shape, constant or expression. */
static void reset_placeholder(imp *I) {
    ival *p = &I->v[IMP_PLACEHOLDER];
    dpc_free(p->csym);
    memset(p, 0, sizeof *p);
    p->name = "", p->stmt = -1, p->node = -1, p->init = -1, p->merged = -1;
}

/* Value 0, the placeholder: made first, before any name's value; never in
 * the name hash. */
dpc_status imp_add_placeholder(imp *I) {
    if (!imp_grow((void **)&I->v, &I->capv, 1, sizeof *I->v)) /* zeroed */
        return imp_oom(I);
    reset_placeholder(I);
    I->nv = 1;
    return DPC_OK;
}

/* Records the importer's bug `what` (the first of a node) and hands out
 * the placeholder, reset: whatever an earlier bad access wrote is gone. */
static int bad_access(imp *I, const char *what) {
    if (!I->bad_access[0])
        snprintf(I->bad_access, sizeof I->bad_access, "%s", what);
    reset_placeholder(I);
    return IMP_PLACEHOLDER;
}

ival *imp_val(imp *I, int v) {
    if (v >= 0 && v < I->nv)
        return &I->v[v];
    char w[64];
    snprintf(w, sizeof w, "value index %d looked up (of %d)", v, I->nv);
    return &I->v[bad_access(I, w)];
}

dpc_status imp_check_value(imp *I, int v) {
    if (v > IMP_PLACEHOLDER && v < I->nv)
        return DPC_OK;
    char w[64];
    snprintf(w, sizeof w, "value index %d written (of %d)", v, I->nv);
    bad_access(I, w);
    return imp_err(I, "internal: %s", I->bad_access);
}

/* The value of names[k] (a node's inputs or outputs) when given: present
 * ones are defined (import_node checks inputs; outputs are made before the
 * op runs), else the placeholder, recorded. */
static bool io_value(imp *I, char **names, size_t count, size_t k, const char *what, int *v) {
    if (k >= count || !names[k][0])
        return false;
    *v = imp_find(I, names[k]);
    if (*v < 0) {
        char w[64];
        snprintf(w, sizeof w, "%s %zu is not a value", what, k);
        *v = bad_access(I, w);
    }
    return true;
}

int imp_in(imp *I, const Onnx__NodeProto *n, size_t k) {
    int v;
    if (io_value(I, n->input, n->n_input, k, "input", &v))
        return v;
    char w[80];
    snprintf(w, sizeof w, "input %zu (of %zu) read as required, but absent", k, n->n_input);
    return bad_access(I, w);
}

bool imp_opt(imp *I, const Onnx__NodeProto *n, size_t k, int *v) {
    return io_value(I, n->input, n->n_input, k, "input", v);
}

int imp_out(imp *I, const Onnx__NodeProto *n, size_t k) {
    int v;
    if (io_value(I, n->output, n->n_output, k, "output", &v))
        return v;
    char w[80];
    snprintf(w, sizeof w, "output %zu (of %zu) written as required, but absent", k, n->n_output);
    return bad_access(I, w);
}

bool imp_opt_out(imp *I, const Onnx__NodeProto *n, size_t k, int *v) {
    return io_value(I, n->output, n->n_output, k, "output", v);
}

/* imp_tensor, the budget and the constants' lifetime: onnx_fold.c */

int64_t imp_numel(const ival *v) {
    if (v->c)
        return dpc_tensor_numel(v->c);
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++)
        n *= v->d[i].v;
    return n;
}

bool imp_const_scalar(const ival *v, double *x) {
    if (!v->c || dpc_tensor_numel(v->c) != 1 || (v->csym && v->csym[0]))
        return false;
    *x = v->c->dtype == DPC_F32 ? ((float *)v->c->data)[0] : (double)((int64_t *)v->c->data)[0];
    return true;
}

bool imp_concrete(const ival *v) {
    if (!v->shaped)
        return false;
    for (int i = 0; i < v->rank; i++)
        if (v->d[i].s)
            return false;
    return true;
}

dpc_status imp_set_shape(imp *I, int v, int rank, const sdim *d) {
    if (imp_check_value(I, v) != DPC_OK)
        return I->e->code;
    if (rank < 0 || rank > DPC_MAX_RANK)
        return imp_err(I, "a result of rank %d (dpc allows at most %d)", rank, DPC_MAX_RANK);
    I->v[v].shaped = true;
    I->v[v].rank = rank;
    for (int i = 0; i < rank; i++) {
        if (d[i].v < 0 || d[i].v > DPC_ONNX_MAX_DIM)
            return imp_err(I, "a result dim of %lld", (long long)d[i].v);
        I->v[v].d[i] = d[i];
    }
    return DPC_OK;
}

const Onnx__AttributeProto *imp_attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

int64_t imp_attr_i(imp *I, const Onnx__NodeProto *n, const char *name, int64_t dflt) {
    const Onnx__AttributeProto *a = imp_attr(n, name);
    if (a && (!a->has_i || (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)))
        I->bad_attr = a->name;
    return a && a->has_i ? a->i : dflt;
}

double imp_attr_f(imp *I, const Onnx__NodeProto *n, const char *name, double dflt) {
    const Onnx__AttributeProto *a = imp_attr(n, name);
    if (a && (!a->has_f || (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)))
        I->bad_attr = a->name;
    if (a && a->has_f && !isfinite(a->f))
        I->bad_float = a->name; /* the node is refused (import_node) */
    return a && a->has_f ? a->f : dflt;
}

int imp_attr_ints(imp *I, const Onnx__NodeProto *n, const char *name, const int64_t **vals) {
    const Onnx__AttributeProto *a = imp_attr(n, name);
    if (!a)
        return -1;
    if ((a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) || a->n_floats || a->n_strings ||
        a->n_ints > 64) {
        I->bad_attr = a->name;
        return -1;
    }
    *vals = a->ints;
    return (int)a->n_ints;
}

const char *imp_attr_s(imp *I, const Onnx__NodeProto *n, const char *name, const char *dflt) {
    const Onnx__AttributeProto *a = imp_attr(n, name);
    if (!a || !a->has_s)
        return dflt;
    /* bytes: copy to a string (a NUL inside would end it: refuse) */
    if (memchr(a->s.data, 0, a->s.len) || a->s.len > 256) {
        imp_err(I, "attribute %s is not a short string", name);
        return NULL;
    }
    char *s = imp_printf(I, "%.*s", (int)a->s.len, (const char *)a->s.data);
    return s;
}

dpc_status imp_count_uses(imp *I) {
    const Onnx__GraphProto *g = I->g;
    size_t n = g->n_output;
    for (size_t k = 0; k < g->n_node; k++)
        n += g->node[k]->n_input;
    size_t cap = 64;
    while (cap < 2 * n + 2)
        cap *= 2;
    I->uses = dpc_calloc(cap, sizeof *I->uses);
    if (!I->uses)
        return imp_oom(I);
    I->ucap = cap;
    for (size_t k = 0; k <= g->n_node; k++) {
        size_t ni = k < g->n_node ? g->node[k]->n_input : g->n_output;
        for (size_t i = 0; i < ni; i++) {
            const char *nm = k < g->n_node ? g->node[k]->input[i] : g->output[i]->name;
            if (!nm[0])
                continue;
            size_t h = imp_hash(nm) & (cap - 1);
            while (I->uses[h].name && strcmp(I->uses[h].name, nm) != 0)
                h = (h + 1) & (cap - 1);
            if (!I->uses[h].name)
                I->uses[h].name = nm, I->uses[h].first = k < g->n_node ? (int)k : -1;
            I->uses[h].count++;
        }
    }
    return DPC_OK;
}

int imp_uses(imp *I, const char *name, int *first) {
    *first = -1;
    if (!I->ucap)
        return 0;
    for (size_t h = imp_hash(name) & (I->ucap - 1); I->uses[h].name; h = (h + 1) & (I->ucap - 1))
        if (strcmp(I->uses[h].name, name) == 0) {
            *first = I->uses[h].first;
            return I->uses[h].count;
        }
    return 0;
}
