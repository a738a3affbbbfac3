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
 * Every identifier in the .dp is made here (imp_ident: ONNX names are
 * sanitised to [A-Za-z0-9_], never pasted); ONNX strings reach the text
 * only in comments, through emit_comment_text (compiler/escape.c). */
#include "onnx_imp.h"

#include "emit.h"

#include <ctype.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- errors */

dpc_status imp_oom(imp *I) {
    I->oom = true;
    return dpc_errf(I->e, DPC_ENOMEM, "out of memory");
}

static void comment_into(char *out, size_t n, const char *s) {
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
        comment_into(nm, sizeof nm, n->name && *n->name ? n->name : "");
        comment_into(op, sizeof op, n->op_type);
        if (n->name && *n->name)
            return dpc_errf(I->e, code, "%s: node '%s' (%s, opset %lld): %s", I->path, nm, op,
                            (long long)I->opset, msg);
        return dpc_errf(I->e, code, "%s: node %d (%s, opset %lld): %s", I->path, I->cur, op,
                        (long long)I->opset, msg);
    }
    return dpc_errf(I->e, code, "%s: %s", I->path, msg);
}

/* ---------------------------------------------------------------- values */

static uint64_t hstr(const char *s) { return dpc_fnv1a(s, strlen(s), 1469598103934665603ull); }

int imp_find(imp *I, const char *name) {
    if (!I->hcap)
        return -1;
    for (size_t h = hstr(name) & (I->hcap - 1);; h = (h + 1) & (I->hcap - 1)) {
        int k = I->hash[h];
        if (!k)
            return -1;
        if (strcmp(I->v[k - 1].name, name) == 0)
            return k - 1;
    }
}

static bool grow(void **p, int *cap, int need, size_t elem) {
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

int imp_new_value(imp *I, const char *name) {
    if (imp_find(I, name) >= 0) {
        char nm[260];
        comment_into(nm, sizeof nm, name);
        imp_err(I, "the value '%s' is defined twice", nm);
        return -1;
    }
    if (!grow((void **)&I->v, &I->capv, I->nv + 1, sizeof *I->v)) {
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
            for (size_t h = hstr(I->v[i].name) & (nc - 1);; h = (h + 1) & (nc - 1))
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
    for (size_t h = hstr(name) & (I->hcap - 1);; h = (h + 1) & (I->hcap - 1))
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
static dpc_status add_placeholder(imp *I) {
    if (!grow((void **)&I->v, &I->capv, 1, sizeof *I->v)) /* zeroed */
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

dpc_status imp_broadcast(imp *I, const ival *a, const ival *b, int *rank, sdim *d) {
    if (!a->shaped || !b->shaped)
        return imp_err(I, "an input of unknown shape");
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        sdim x = ia >= 0 ? a->d[ia] : (sdim){1, 0}, y = ib >= 0 ? b->d[ib] : (sdim){1, 0};
        if (x.s == 0 && x.v == 1)
            d[i] = y;
        else if ((y.s == 0 && y.v == 1) || (x.s == y.s && x.v == y.v))
            d[i] = x;
        else
            return imp_err(I, "inputs of shapes that do not broadcast (dim %d: %s vs %s)", i, imp_dim(I, x),
                           imp_dim(I, y));
    }
    *rank = r;
    return DPC_OK;
}

/* ------------------------------------------------------------ attributes */

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

/* ----------------------------------------------------------------- names */

static const char *const reserved[] = {
    "module", "forward", "import", "for", "in", "return", "if", "elif", "else", "and", "or", "not", "is",
    "extends", "true", "false", "True", "False", "None", "model", "range", "partial", "torch", "nn", "F",
    "self", "N", "Model", "float", "int", "bool", "str", "f32", "i64", "float32", "int64", "long", "finfo",
    /* builtin functions and modules a member could shadow */
    "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "sin", "erf", "rsqrt", "neg",
    "clamp", "clamp_min", "clamp_max", "softmax", "log_softmax", "flatten", "reshape", "transpose", "permute",
    "cat", "view", "unsqueeze", "squeeze", "expand", "expand_as", "contiguous", "split", "chunk", "t",
    "adaptive_avg_pool2d", "interpolate", "matmul", "mean", "sum", "amax", "layer_norm", "dropout", "relu6",
    "hardswish", "hardsigmoid", "mish", "leaky_relu", "hardtanh", "group_norm", "to", "type_as", "logical_and",
    "logical_or", "logical_not", "where", "masked_fill", "arange", "ones", "zeros", "full", "ones_like",
    "zeros_like", "full_like", "tril", "triu", "scaled_dot_product_attention", "size", "dim", "pow",
    "Parameter", "Buffer", "register_buffer", "register_parameter", "empty", "randn", "rand", "tensor",
    "Sequential", "ModuleList", "DataParallel", "max", "min", "input",
};

static bool taken(imp *I, const char *s) {
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (strcmp(reserved[i], s) == 0)
            return true;
    if (!I->idcap)
        return false;
    for (size_t h = hstr(s) & (I->idcap - 1); I->idset[h]; h = (h + 1) & (I->idcap - 1))
        if (strcmp(I->idset[h], s) == 0)
            return true;
    return false;
}

/* Records an identifier (made by imp_printf, so owned by the names list). */
static const char *claim(imp *I, const char *id) {
    if (!id)
        return NULL;
    if ((I->nid + 1) * 2 > I->idcap) {
        size_t nc = I->idcap ? I->idcap * 2 : 1024;
        const char **ns = dpc_calloc(nc, sizeof *ns);
        if (!ns) {
            imp_oom(I);
            return NULL;
        }
        for (size_t i = 0; i < I->idcap; i++)
            if (I->idset[i]) {
                size_t h = hstr(I->idset[i]) & (nc - 1);
                while (ns[h])
                    h = (h + 1) & (nc - 1);
                ns[h] = I->idset[i];
            }
        dpc_free(I->idset);
        I->idset = ns, I->idcap = nc;
    }
    size_t h = hstr(id) & (I->idcap - 1);
    while (I->idset[h])
        h = (h + 1) & (I->idcap - 1);
    I->idset[h] = id;
    I->nid++;
    return id;
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
    if (!grow((void **)&I->names, &I->capnames, I->nnames + 1, sizeof *I->names)) {
        dpc_free(s);
        imp_oom(I);
        return NULL;
    }
    I->names[I->nnames++] = s; /* owned through the names list (not all are identifiers) */
    return s;
}

void *imp_alloc(imp *I, size_t n) {
    char *p = dpc_calloc(n ? n : 1, 1);
    if (!p || !grow((void **)&I->names, &I->capnames, I->nnames + 1, sizeof *I->names)) {
        dpc_free(p);
        imp_oom(I);
        return NULL;
    }
    I->names[I->nnames++] = p; /* freed with the strings (a zeroed block is an empty string to them) */
    return p;
}

/* The entry of base in the suffix map (made with next = 2 when new; open
 * addressing, grown at half full), NULL when out of memory. */
static struct imp_sfx *next_suffix(imp *I, const char *base) {
    if ((I->nsfx + 1) * 2 > I->sfxcap) {
        size_t nc = I->sfxcap ? I->sfxcap * 2 : 256;
        struct imp_sfx *ns = dpc_calloc(nc, sizeof *ns);
        if (!ns) {
            imp_oom(I);
            return NULL;
        }
        for (size_t i = 0; i < I->sfxcap; i++)
            if (I->sfx[i].base) {
                size_t h = hstr(I->sfx[i].base) & (nc - 1);
                while (ns[h].base)
                    h = (h + 1) & (nc - 1);
                ns[h] = I->sfx[i];
            }
        dpc_free(I->sfx);
        I->sfx = ns, I->sfxcap = nc;
    }
    size_t h = hstr(base) & (I->sfxcap - 1);
    for (; I->sfx[h].base; h = (h + 1) & (I->sfxcap - 1))
        if (strcmp(I->sfx[h].base, base) == 0)
            return &I->sfx[h];
    const char *copy = imp_printf(I, "%s", base);
    if (!copy)
        return NULL;
    I->sfx[h].base = copy, I->sfx[h].next = 2;
    I->nsfx++;
    return &I->sfx[h];
}

/* Whether s is a name the list holds as an identifier: only idents are
 * checked by taken(); other strings there never look like identifiers
 * (they hold a space, a bracket or a quote), except plain numbers, which
 * cannot be identifiers anyway. */
const char *imp_ident(imp *I, const char *base, const char *fallback) {
    char b[72];
    size_t n = 0;
    const char *src = base && *base ? base : fallback;
    for (const char *p = src; *p && n < 48; p++) {
        char c = *p;
        b[n++] = isalnum((unsigned char)c) ? c : '_';
    }
    b[n] = 0;
    /* collapse leading/trailing underscores from punctuation ("/conv1/Conv" -> "conv1_Conv") */
    char *s = b;
    while (*s == '_' && s[1])
        s++;
    size_t L = strlen(s);
    while (L > 1 && s[L - 1] == '_')
        s[--L] = 0;
    char c0[80];
    if (!*s || isdigit((unsigned char)s[0]))
        snprintf(c0, sizeof c0, "%s%s", fallback && isalpha((unsigned char)fallback[0]) ? "v" : "v", s);
    else
        snprintf(c0, sizeof c0, "%s", s);
    if (!taken(I, c0))
        return claim(I, imp_printf(I, "%s", c0));
    /* c0_2, c0_3, ...: from the suffix after the last one handed out for
     * c0, so that many names cut to the same 48 bytes stay linear */
    struct imp_sfx *e = next_suffix(I, c0);
    if (!e)
        return NULL;
    for (int k = e->next;; k++) {
        char t[96];
        snprintf(t, sizeof t, "%s_%d", c0, k);
        if (!taken(I, t)) {
            e->next = k + 1;
            return claim(I, imp_printf(I, "%s", t));
        }
    }
}

const char *imp_tmp(imp *I) {
    for (;;) {
        char t[32];
        snprintf(t, sizeof t, "t%d", ++I->tmpn);
        if (!taken(I, t))
            return claim(I, imp_printf(I, "%s", t));
    }
}

const char *imp_dim(imp *I, sdim d) {
    if (!d.s)
        return imp_printf(I, "%lld", (long long)d.v);
    if (d.v == 1)
        return I->syms[d.s];
    return imp_printf(I, "%s * %lld", I->syms[d.s], (long long)d.v);
}

const char *imp_f32(imp *I, double v) {
    /* a call no name can capture: the bare word nan or inf would be read
     * as a graph input of that name */
    if (isnan(v))
        return "float(\"nan\")";
    if (isinf(v) || isinf((float)v))
        return v < 0 ? "float(\"-inf\")" : "float(\"inf\")";
    char b[64];
    float f = (float)v;
    for (int p = 1; p <= 9; p++) {
        snprintf(b, sizeof b, "%.*g", p, (double)f);
        if ((float)strtod(b, NULL) == f)
            break;
    }
    /* as Python writes it: a point or an exponent, so that it reads as a float */
    double d = strtod(b, NULL);
    dpc_format_pyfloat(d, b, sizeof b);
    return imp_printf(I, "%s", b);
}

static const char *float_lit(imp *I, double x) {
    if (isnan(x))
        return "float(\"nan\")";
    if (isinf(x))
        return x < 0 ? "float(\"-inf\")" : "float(\"inf\")";
    const char *b = imp_f32(I, x);
    return b && x < 0 ? imp_printf(I, "(%s)", b) : b;
}

static dpc_status count_uses(imp *I) {
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
            size_t h = hstr(nm) & (cap - 1);
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
    for (size_t h = hstr(name) & (I->ucap - 1); I->uses[h].name; h = (h + 1) & (I->ucap - 1))
        if (strcmp(I->uses[h].name, name) == 0) {
            *first = I->uses[h].first;
            return I->uses[h].count;
        }
    return 0;
}

/* A float constant tensor as a Parameter member (the weight under the
 * initializer's name when it is one). */
static int materialise(imp *I, int v) {
    ival *x = &I->v[v];
    if (x->kind != VK_FLOAT) {
        imp_err(I, "an integer or bool constant tensor used as a computed value is not supported");
        return -1;
    }
    const char *name = imp_ident(I, x->init >= 0 ? x->name : NULL, "const");
    if (!name)
        return -1;
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "%s = Parameter(zeros(", name);
    for (int i = 0; i < x->c->rank; i++)
        dpc_buf_printf(&b, "%s%lld", i ? ", " : "", (long long)x->c->shape[i]);
    if (x->c->rank == 0)
        dpc_buf_puts(&b, "()");
    dpc_buf_puts(&b, "))  # ");
    emit_comment_text(&b, x->name);
    char *mem = dpc_buf_take(&b);
    if (!mem) {
        imp_oom(I);
        return -1;
    }
    if (!grow((void **)&I->st, &I->capst, I->nst + 1, sizeof *I->st)) {
        dpc_free(mem);
        imp_oom(I);
        return -1;
    }
    istmt *s = &I->st[I->nst];
    memset(s, 0, sizeof *s);
    s->member = mem;
    s->wfirst = I->nw;
    int k = I->nst++;
    if (imp_weight(I, name, NULL, x->c) != DPC_OK)
        return -1;
    x->var = name;
    x->stmt = k;
    return 0;
}

const char *imp_ref(imp *I, int v, int *vi) {
    *vi = -1;
    if (imp_check_value(I, v) != DPC_OK)
        return NULL;
    ival *x = &I->v[v];
    if (x->var) {
        *vi = v;
        return x->var;
    }
    if (x->merged >= 0) {
        imp_err(I, "an input that merges the batch dim with another dim (a Reshape to [-1, %lld]) is read only by "
                   "a Linear (MatMul/Gemm) and the Reshape back: not supported here", (long long)x->d[1].v);
        return NULL;
    }
    if (!x->c) {
        imp_err(I, "internal: a value without expression");
        return NULL;
    }
    if (dpc_tensor_numel(x->c) == 1 && x->c->rank == 0) {
        if (x->csym && x->csym[0])
            return imp_dim(I, (sdim){((int64_t *)x->c->data)[0], x->csym[0]});
        if (x->kind == VK_FLOAT)
            return float_lit(I, ((float *)x->c->data)[0]);
        int64_t iv = ((int64_t *)x->c->data)[0];
        return iv < 0 ? imp_printf(I, "(%lld)", (long long)iv) : imp_printf(I, "%lld", (long long)iv);
    }
    if (materialise(I, v) != 0)
        return NULL;
    *vi = v;
    return x->var;
}

/* ------------------------------------------------------------ statements */

int imp_stmt(imp *I, int out, const char *member, const char *expr, const int *uses, int nuses) {
    if (imp_check_value(I, out) != DPC_OK)
        return -1;
    int nu = 0; /* -1 entries (a literal operand) are skipped; the placeholder is no use either */
    for (int i = 0; i < nuses; i++) {
        if (uses[i] >= I->nv) {
            imp_check_value(I, uses[i]);
            return -1;
        }
        nu += uses[i] > IMP_PLACEHOLDER;
    }
    if (!grow((void **)&I->st, &I->capst, I->nst + 1, sizeof *I->st)) {
        imp_oom(I);
        return -1;
    }
    const Onnx__NodeProto *n = I->g->node[I->cur];
    const char *var = imp_tmp(I);
    if (!var)
        return -1;
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_puts(&b, "        # ");
    emit_comment_text(&b, n->name && *n->name ? n->name : "(unnamed)");
    dpc_buf_puts(&b, " (");
    emit_comment_text(&b, n->op_type);
    dpc_buf_printf(&b, ")\n        %s = %s\n", var, expr);
    char *line = dpc_buf_take(&b);
    char *mem = member ? dpc_strdup(member) : NULL;
    int *us = nu ? dpc_malloc((size_t)nu * sizeof *us) : NULL;
    if (!line || (member && !mem) || (nu && !us)) {
        dpc_free(line);
        dpc_free(mem);
        dpc_free(us);
        imp_oom(I);
        return -1;
    }
    istmt *s = &I->st[I->nst];
    memset(s, 0, sizeof *s);
    s->line = line, s->member = mem, s->uses = us;
    for (int i = 0; i < nuses; i++)
        if (uses[i] > IMP_PLACEHOLDER)
            s->uses[s->nuses++] = uses[i];
    s->wfirst = I->nw;
    I->v[out].var = var;
    I->v[out].stmt = I->nst;
    return I->nst++;
}

dpc_status imp_stmt_value(imp *I, int out, const char *member, const char *expr, int kind, int rank, const sdim *d,
                          const int *uses, int nuses) {
    if (!expr || imp_stmt(I, out, member, expr, uses, nuses) < 0)
        return I->e->code ? I->e->code : DPC_ENOMEM;
    I->v[out].kind = kind;
    return imp_set_shape(I, out, rank, d);
}

dpc_status imp_weight(imp *I, const char *member, const char *suffix, dpc_tensor *t) {
    if (!I->nst || !t)
        return imp_err(I, "internal: a weight without its statement or tensor");
    if (!grow((void **)&I->w, &I->capw, I->nw + 1, sizeof *I->w))
        return imp_oom(I);
    char *key = suffix ? imp_printf(I, "%s.%s", member, suffix) : imp_printf(I, "%s", member);
    if (!key)
        return DPC_ENOMEM;
    I->w[I->nw].key = key;
    I->w[I->nw].t = t;
    I->nw++;
    I->st[I->nst - 1].wcount = I->nw - I->st[I->nst - 1].wfirst;
    return DPC_OK;
}

/* ------------------------------------------------------------ the import */

static const imp_op *find_op(const char *name) {
    for (int i = 0; i < imp_nops; i++)
        if (strcmp(imp_ops[i].name, name) == 0)
            return &imp_ops[i];
    return NULL;
}

int dpc_onnx_nops(void) { return imp_nops; }

const char *dpc_onnx_op_name(int i, int *min_opset, int *max_opset, const char **note) {
    if (i < 0 || i >= imp_nops)
        return NULL;
    if (min_opset)
        *min_opset = imp_ops[i].min_opset;
    if (max_opset)
        *max_opset = imp_ops[i].max_opset;
    if (note)
        *note = imp_ops[i].note;
    return imp_ops[i].name;
}

bool dpc_onnx_op_arity(int i, const char **ins, const char **outs) {
    if (i < 0 || i >= imp_nops)
        return false;
    *ins = imp_ops[i].ins, *outs = imp_ops[i].outs;
    return true;
}

/* "2-3" at *p: lo and hi (-1 for "2+": unbounded, every position required) */
static bool arity_range(const char **p, int *lo, int *hi) {
    char *e;
    long a = strtol(*p, &e, 10), b = a;
    if (e == *p || a < 0 || a > 64)
        return false;
    if (*e == '-') {
        const char *q = e + 1;
        b = strtol(q, &e, 10);
        if (e == q || b < a || b > 64)
            return false;
    } else if (*e == '+') {
        b = -1;
        e++;
    }
    *lo = (int)a, *hi = (int)b, *p = e;
    return true;
}

/* A row's arity (imp_op.ins/outs) at this opset; false when the spec is
 * malformed (the table's bug). */
static bool arity_at(const char *spec, int64_t opset, int *lo, int *hi) {
    const char *p = spec;
    if (!p || !arity_range(&p, lo, hi))
        return false;
    while (*p) {
        char *e;
        if (p[0] != ',' || p[1] != ' ')
            return false;
        long from = strtol(p + 2, &e, 10);
        if (e == p + 2 || e[0] != ':' || e[1] != ' ')
            return false;
        p = e + 2;
        int a, b;
        if (!arity_range(&p, &a, &b))
            return false;
        if (opset >= from)
            *lo = a, *hi = b;
    }
    return true;
}

/* The node's input or output count against its row, and no "" at a
 * required position: "takes 1 input, got 0", "input 1 (of 3) is required
 * but empty". */
static dpc_status check_arity(imp *I, const Onnx__NodeProto *n, const imp_op *op, bool outs) {
    const char *what = outs ? "output" : "input";
    size_t got = outs ? n->n_output : n->n_input;
    char **names = outs ? n->output : n->input;
    int lo, hi;
    if (!arity_at(outs ? op->outs : op->ins, I->opset, &lo, &hi))
        return imp_err(I, "internal: the op table's %s count of %s is malformed", what, op->name);
    if (got < (size_t)lo || (hi >= 0 && got > (size_t)hi)) {
        char takes[64];
        if (hi < 0)
            snprintf(takes, sizeof takes, "%d or more %ss", lo, what);
        else if (hi == 0)
            snprintf(takes, sizeof takes, "no %ss", what);
        else if (lo == hi)
            snprintf(takes, sizeof takes, "%d %s%s", lo, what, lo == 1 ? "" : "s");
        else
            snprintf(takes, sizeof takes, "%d to %d %ss", lo, hi, what);
        return imp_err(I, "takes %s, got %zu", takes, got);
    }
    for (size_t k = 0; k < got; k++)
        if (!names[k][0] && (k < (size_t)lo || hi < 0))
            return imp_err(I, "%s %zu (of %zu) is required but empty", what, k, got);
    return DPC_OK;
}

static bool attr_listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        while (*p == ' ')
            p++;
        const char *q = strchr(p, ' ');
        size_t L = q ? (size_t)(q - p) : strlen(p);
        if (L == n && strncmp(p, name, n) == 0)
            return true;
        if (!q)
            break;
        p = q + 1;
    }
    return false;
}

/* The op of node k as the table has it at this opset, or NULL after a
 * located error. Run over every node before anything else is looked at,
 * so that an op dpc does not claim is the error, whatever else the model
 * holds (an input type, a rank) that dpc would also refuse. */
static const imp_op *claim_node(imp *I, int k) {
    const Onnx__NodeProto *n = I->g->node[k];
    I->cur = k;
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0) {
        char d[260];
        comment_into(d, sizeof d, n->domain);
        imp_err(I, "ops of domain '%s' are not supported", d);
        return NULL;
    }
    const imp_op *op = find_op(n->op_type);
    if (!op) {
        imp_err(I, "op type not supported (`dpc import --list-ops` lists the supported ones)");
        return NULL;
    }
    if (I->opset < op->min_opset || (op->max_opset && I->opset > op->max_opset)) {
        imp_err(I, "this op is supported at opsets %d to %d only", op->min_opset,
                op->max_opset ? op->max_opset : DPC_ONNX_MAX_OPSET);
        return NULL;
    }
    I->cur = -1;
    return op;
}

static dpc_status import_node(imp *I, int k) {
    const Onnx__NodeProto *n = I->g->node[k];
    const imp_op *op = claim_node(I, k);
    if (!op)
        return I->e->code;
    I->cur = k;
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (a->ref_attr_name && *a->ref_attr_name)
            return imp_err(I, "attribute references are not supported");
        if (!attr_listed(op->attrs, a->name)) {
            char an[260];
            comment_into(an, sizeof an, a->name);
            return imp_err(I, "attribute %s is not supported", an);
        }
    }
    dpc_status s;
    if ((s = check_arity(I, n, op, false)) != DPC_OK || (s = check_arity(I, n, op, true)) != DPC_OK)
        return s;
    if ((s = imp_load_inputs(I, n)) != DPC_OK)
        return s;
    for (size_t i = 0; i < n->n_input; i++) {
        if (!n->input[i][0])
            continue;
        int v = imp_find(I, n->input[i]);
        char nm[260];
        comment_into(nm, sizeof nm, n->input[i]);
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
        comment_into(an, sizeof an, I->bad_attr);
        return imp_err(I, "attribute %s has a type or size this op does not take", an);
    }
    if (s == DPC_OK && I->bad_float) {
        /* refused, not written: a bare nan/inf in the .dp would be a name (a graph input's) */
        char an[260];
        comment_into(an, sizeof an, I->bad_float);
        return imp_err(I, "attribute %s is NaN or infinite (dpc takes finite float attributes only)", an);
    }
    if (s == DPC_OK)
        imp_release(I, k);
    return s;
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
        comment_into(nm, sizeof nm, vi->name);
        if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type ||
            !vi->type->tensor_type->shape)
            return imp_err(I, "graph input '%s' is not a tensor of known rank", nm);
        const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
        int et = tt->has_elem_type ? tt->elem_type : 0;
        int kind;
        if (et == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
            kind = VK_FLOAT;
        else if (et == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || et == ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
            kind = VK_INT;
        else
            return imp_err(I, "graph input '%s': element type %d is not supported (float32, int64, int32 are)", nm, et);
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
            int sid = 0;
            for (int s = 2; s < I->nsyms; s++)
                if (strcmp(I->syms[s + DPC_MAX_RANK], param) == 0)
                    sid = s;
            if (!sid) {
                if (I->nsyms >= 2 + DPC_MAX_RANK)
                    return imp_err(I, "more than %d symbolic dims", DPC_MAX_RANK);
                sid = I->nsyms++;
                const char *id = imp_ident(I, param, "S");
                if (!id)
                    return DPC_ENOMEM;
                /* a run-time dim reads best in upper case: "seq" stays as written, sanitised */
                I->syms[sid] = (char *)id;
                I->syms[sid + DPC_MAX_RANK] = (char *)imp_printf(I, "%s", param);
            }
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
        comment_into(nm, sizeof nm, g->output[i]->name);
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
    if ((s = add_placeholder(&I)) != DPC_OK)
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
        if (!claim_node(&I, (int)k)) {
            s = e->code;
            goto done;
        }
    /* initializers: constants (onnx_fold.c) */
    if ((s = imp_load_initializers(&I)) != DPC_OK)
        goto done;
    if ((s = read_inputs(&I, o, &sig)) != DPC_OK || (s = count_uses(&I)) != DPC_OK)
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
