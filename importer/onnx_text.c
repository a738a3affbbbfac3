/* onnx_text.c - the .dp text the ops write: identifiers (every one made
 * here, imp_ident: ONNX names are sanitised to [A-Za-z0-9_], never pasted;
 * ONNX strings reach the text only in comments, through emit_comment_text),
 * temporaries, dims and float literals, the expression of a value (a float
 * constant becomes a Parameter member), and the statements of forward with
 * their members and weights. */
#include "onnx_imp.h"

#include "emit.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    for (size_t h = imp_hash(s) & (I->idcap - 1); I->idset[h]; h = (h + 1) & (I->idcap - 1))
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
                size_t h = imp_hash(I->idset[i]) & (nc - 1);
                while (ns[h])
                    h = (h + 1) & (nc - 1);
                ns[h] = I->idset[i];
            }
        dpc_free(I->idset);
        I->idset = ns, I->idcap = nc;
    }
    size_t h = imp_hash(id) & (I->idcap - 1);
    while (I->idset[h])
        h = (h + 1) & (I->idcap - 1);
    I->idset[h] = id;
    I->nid++;
    return id;
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
                size_t h = imp_hash(I->sfx[i].base) & (nc - 1);
                while (ns[h].base)
                    h = (h + 1) & (nc - 1);
                ns[h] = I->sfx[i];
            }
        dpc_free(I->sfx);
        I->sfx = ns, I->sfxcap = nc;
    }
    size_t h = imp_hash(base) & (I->sfxcap - 1);
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
    if (!imp_grow((void **)&I->st, &I->capst, I->nst + 1, sizeof *I->st)) {
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
    if (!imp_grow((void **)&I->st, &I->capst, I->nst + 1, sizeof *I->st)) {
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
    if (!imp_grow((void **)&I->w, &I->capw, I->nw + 1, sizeof *I->w))
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
