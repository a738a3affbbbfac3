/* compile.c - the compile API (dpc_compile.h): the front end, fusion, the
 * signature and the texts behind one entry point, with the one
 * out-of-memory catch around fusion. */
#include "dpc_compile.h"

#include "fold_bn.h"
#include "frontend.h"
#include "kernel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dpc_unit {
    dpc_front *front;
    dpc_stage stage;
    kgraph kg;         /* DPC_STAGE_FUSED */
    dpc_signature sig;
};

/* ------------------------------------------------------------ signature */

static dpc_sig_tensor sig_tensor(dpc_front *f, const ir_node *n, bool input) {
    dpc_sig_tensor t = {.name = n->name, .rank = n->sh.rank, .line = n->at.line};
    t.dtype = n->dt == IR_I64 ? DPC_I64 : n->dt == IR_I32 ? DPC_I32 : DPC_F32;
    t.dtype_name = ir_dtype_name(n->dt);
    for (int d = 0; d < n->sh.rank; d++)
        t.dim[d] = (dpc_sig_dim){n->sh.d[d].k, n->sh.d[d].sym, 0};
    for (int i = 0; input && i < f->g.rtuses.len; i++) {
        const ir_rtuse *r = f->g.rtuses.items[i];
        if (r->input == n->input_index)
            t.dim[r->dim].rt = r->rt + 1;
    }
    char sh[512];
    shape_str(&n->sh, f->g.batch_name, sh, sizeof sh);
    if (f->g.deferred && input) { /* unbound run-time dims by name: "[N, S]" */
        size_t pos = (size_t)snprintf(sh, sizeof sh, "[");
        for (int d = 0; d < n->sh.rank && pos < sizeof sh; d++) {
            shape one = {1, {n->sh.d[d]}};
            char os[64];
            shape_str(&one, f->g.batch_name, os, sizeof os);
            os[strlen(os) - 1] = 0;
            const ir_rtdim *r = t.dim[d].rt ? f->g.rtdims.items[t.dim[d].rt - 1] : NULL;
            pos += (size_t)snprintf(sh + pos, sizeof sh - pos, "%s%s", d ? ", " : "",
                                    r && !r->value ? r->name : os + 1);
        }
        if (pos < sizeof sh)
            snprintf(sh + pos, sizeof sh - pos, "]");
    }
    t.shape = arena_strdup(&f->ctx.arena, sh);
    t.file = n->at.file ? n->at.file->path : NULL;
    return t;
}

/* Rows of the smallest embedding that reads input p, 0 when none does. */
static int64_t input_limit(const ir_graph *g, const ir_node *p) {
    int64_t limit = 0;
    for (int j = 0; j < g->nodes.len; j++) {
        const ir_node *x = g->nodes.items[j];
        if (x->op != OP_EMBEDDING || x->in[0] != p->id)
            continue;
        const ir_node *w = g->nodes.items[x->in[1]];
        if (limit == 0 || w->sh.d[0].k < limit)
            limit = w->sh.d[0].k;
    }
    return limit;
}

static void sig_io(dpc_unit *u) {
    dpc_front *f = u->front;
    dpc_arena *a = &f->ctx.arena;
    dpc_signature *s = &u->sig;
    const ir_graph *g = &f->g;
    s->ninputs = g->inputs.len;
    s->nscalars = g->scalars.len;
    s->noutputs = g->outputs.len;
    dpc_sig_tensor *in = arena_alloc(a, sizeof *in * (size_t)(s->ninputs + 1));
    dpc_sig_tensor *out = arena_alloc(a, sizeof *out * (size_t)(s->noutputs + 1));
    dpc_sig_scalar *sc = arena_alloc(a, sizeof *sc * (size_t)(s->nscalars + 1));
    for (int i = 0; i < s->ninputs; i++) {
        in[i] = sig_tensor(f, g->inputs.items[i], true);
        in[i].limit = input_limit(g, g->inputs.items[i]);
    }
    for (int i = 0; i < s->noutputs; i++) {
        out[i] = sig_tensor(f, g->outputs.items[i], false);
        out[i].name = NULL;
    }
    for (int i = 0; i < s->nscalars; i++) {
        const ir_node *n = g->scalars.items[i];
        const leaf_attr *l = &n->attr.leaf;
        sc[i] = (dpc_sig_scalar){n->name, (dpc_sig_scalar_type)l->type, l->has_default, l->has_default ? l->value : 0};
    }
    dpc_sig_rtdim *rt = arena_alloc(a, sizeof *rt * (size_t)(g->rtdims.len + 1));
    for (int i = 0; i < g->rtdims.len; i++) {
        const ir_rtdim *r = g->rtdims.items[i];
        rt[i] = (dpc_sig_rtdim){r->name, r->value, -1, -1};
    }
    for (int i = g->rtuses.len - 1; i >= 0; i--) { /* the first use wins */
        const ir_rtuse *r = g->rtuses.items[i];
        rt[r->rt].input = r->input;
        rt[r->rt].dim = r->dim;
    }
    s->nrtdims = g->rtdims.len;
    s->rtdims = rt;
    s->unbound = g->deferred;
    s->inputs = in;
    s->outputs = out;
    s->scalars = sc;
    s->model_name = g->model_name;
    s->batch_name = g->batch_name;
}

static void sig_build(dpc_unit *u) {
    dpc_front *f = u->front;
    const vec *ps = &f->m.params;
    dpc_sig_param *p = arena_alloc(&f->ctx.arena, sizeof *p * (size_t)(ps->len + 1));
    for (int i = 0; i < ps->len; i++) {
        const param_entry *e = ps->items[i];
        p[i] = (dpc_sig_param){.key = e->key, .rank = e->rank, .is_int = e->is_int, .ignored = e->ignored,
                                .init = e->init, .fan_in = e->fan_in, .zero_row = -1};
        if (e->init == INIT_NORMAL && e->owner && e->owner->args && e->owner->args[2].kind == V_INT)
            p[i].zero_row = e->owner->args[2].i;
        if (e->ct) {
            static const dpc_sig_value_kind kinds[] = {
                [CT_FILL] = DPC_SIG_FILL, [CT_DATA] = DPC_SIG_DATA, [CT_NORMAL] = DPC_SIG_NORMAL,
                [CT_UNIFORM] = DPC_SIG_UNIFORM};
            p[i].value = (dpc_sig_value){kinds[e->ct->kind], e->ct->a, e->ct->b, e->ct->data};
        }
        p[i].nonpersistent = e->nonpersistent;
        memcpy(p[i].shape, e->shape, sizeof p[i].shape);
    }
    u->sig.params = p;
    u->sig.nparams = ps->len;
    u->sig.wrapper = f->m.wrapper ? f->m.wrapper->type_name : NULL;
    u->sig.file = f->ctx.files.len ? ((const src_file *)f->ctx.files.items[0])->path : NULL;
    if (u->stage >= DPC_STAGE_IR)
        sig_io(u);
    else if (f->m.root)
        u->sig.model_name = f->m.root->type_name;
}

/* ------------------------------------------------------------ compiling */

void dpc_unit_free(dpc_unit *u) {
    if (!u)
        return;
    front_free(u->front);
    free(u);
}

/* Fusion, and the signature: arena exhaustion jumps back here. */
static dpc_status lower(dpc_unit *u, const char *path, dpc_err *e) {
    dpc_front *f = u->front;
    if (setjmp(f->oom))
        return dpc_errf(e, DPC_ENOMEM, "out of memory while lowering '%s'", path);
    /* the one pipeline after the front end: graph passes on a copy of the
     * graph (f->g stays the model as written, for `dpc ir`), then fusion */
    if (u->stage == DPC_STAGE_FUSED && !f->g.deferred)
        fuse_graph(&f->ctx, fold_bn(&f->ctx.arena, &f->g, NULL), &u->kg);
    sig_build(u);
    return DPC_OK;
}

dpc_status dpc_compile(const dpc_compile_opts *o, dpc_unit **out, dpc_buf *diags, dpc_err *e) {
    *out = NULL;
    dpc_unit *u = calloc(1, sizeof *u);
    if (!u)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    u->stage = o->stage;
    front_stage fs = o->stage == DPC_STAGE_TREE ? FRONT_TREE : FRONT_IR;
    if (o->nbinds < 0 || o->nbinds > DPC_MAX_RTDIMS || (o->nbinds && !o->binds)) {
        free(u);
        return dpc_errf(e, DPC_EUSAGE, "at most %d run-time dim binds", DPC_MAX_RTDIMS);
    }
    dpc_status s = front_run_opts(o, fs, &u->front, diags, e);
    if (s == DPC_OK)
        s = lower(u, o->path, e);
    if (s != DPC_OK) {
        dpc_unit_free(u);
        return s;
    }
    *out = u;
    return DPC_OK;
}

/* ------------------------------------------------------- specialising */

/* "a/./b/../c" as "a/c": how the imports of a unit are matched, whatever
 * their spelling (on disk, realpath matched them). */
static void norm_path(const char *p, char *out, size_t n) {
    const char *comp[256];
    size_t len[256];
    int nc = 0;
    bool abs = p[0] == '/';
    while (*p) {
        size_t l = strcspn(p, "/");
        if (l == 0 || (l == 1 && p[0] == '.'))
            ;
        else if (l == 2 && p[0] == '.' && p[1] == '.' && nc > 0 && !(len[nc - 1] == 2 && comp[nc - 1][0] == '.'))
            nc--;
        else if (nc < 256)
            comp[nc] = p, len[nc++] = l;
        p += l + (p[l] == '/');
    }
    size_t pos = 0;
    if (abs && pos + 1 < n)
        out[pos++] = '/';
    for (int i = 0; i < nc && pos + len[i] + 2 < n; i++) {
        if (i)
            out[pos++] = '/';
        memcpy(out + pos, comp[i], len[i]);
        pos += len[i];
    }
    out[pos < n ? pos : n - 1] = 0;
}

/* dpc_compile_opts.read_import over the files a unit read. */
static bool unit_import(void *ud, const char *path, char *real, size_t real_n, const char **text, size_t *len) {
    const dpc_unit *u = ud;
    char want[4096], have[4096];
    norm_path(path, want, sizeof want);
    for (int i = 1; i < dpc_unit_nfiles(u); i++) {
        const char *name = dpc_unit_file(u, i, text, len);
        norm_path(name, have, sizeof have);
        if (strcmp(have, want) == 0) {
            snprintf(real, real_n, "%s%s", want[0] == '/' ? "" : "/", want);
            return true;
        }
    }
    return false;
}

dpc_status dpc_unit_specialise(const dpc_unit *u, const int64_t *values, dpc_stage stage, dpc_unit **out,
                               dpc_buf *diags, dpc_err *e) {
    const dpc_signature *sig = &u->sig;
    dpc_dim_bind binds[DPC_MAX_RTDIMS];
    for (int i = 0; i < sig->nrtdims && i < DPC_MAX_RTDIMS; i++)
        binds[i] = (dpc_dim_bind){sig->rtdims[i].name, values[i]};
    const char *text;
    size_t len;
    const char *root = dpc_unit_file(u, 0, &text, &len);
    dpc_compile_opts o = {.path = root, .text = text, .len = len, .read_import = unit_import,
                          .import_ud = (void *)u, .stage = stage, .binds = binds, .nbinds = sig->nrtdims};
    return dpc_compile(&o, out, diags, e);
}

dpc_status dpc_dim_bind_parse(const char *text, char *buf, size_t bufn, dpc_dim_bind *b, dpc_err *e) {
    const char *eq = strchr(text, '=');
    size_t l = eq ? (size_t)(eq - text) : 0;
    if (!eq || l == 0 || l + 1 > bufn)
        return dpc_errf(e, DPC_EUSAGE, "--bind needs NAME=VALUE, got '%.100s'", text);
    memcpy(buf, text, l);
    buf[l] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (errno || *end || !eq[1] || v < 1 || v > DPC_MAX_DIM)
        return dpc_errf(e, DPC_EUSAGE, "--bind %s: the value must be an integer between 1 and %lld, got '%.100s'",
                        buf, (long long)DPC_MAX_DIM, eq + 1);
    b->name = buf;
    b->value = v;
    return DPC_OK;
}

dpc_status dpc_compile_file(const char *path, dpc_stage stage, dpc_unit **out, dpc_buf *diags, dpc_err *e) {
    dpc_compile_opts o = {.path = path, .stage = stage};
    return dpc_compile(&o, out, diags, e);
}

dpc_stage dpc_unit_stage(const dpc_unit *u) { return u->stage; }
const dpc_signature *dpc_unit_signature(const dpc_unit *u) { return &u->sig; }
const kgraph *dpc_unit_kgraph(const dpc_unit *u) { return u->stage == DPC_STAGE_FUSED ? &u->kg : NULL; }
dpc_front *dpc_unit_front(const dpc_unit *u) { return u->front; }
int dpc_unit_nkernels(const dpc_unit *u) { return u->stage == DPC_STAGE_FUSED ? u->kg.kernels.len : 0; }
int dpc_unit_nprepare(const dpc_unit *u) { return u->stage == DPC_STAGE_FUSED ? u->kg.nprepare : 0; }

_Static_assert(KK_RESAMPLE + 1 == DPC_KERNEL_KINDS, "DPC_KERNEL_KINDS is the number of kernel kinds");
const char *dpc_kernel_kind_name(int kind_index) { return kkind_name((kkind)kind_index); }
int dpc_unit_nnodes(const dpc_unit *u) { return u->front->g.nodes.len; }
double dpc_unit_flops(const dpc_unit *u, int64_t N) { return kgraph_flops(&u->kg, N); }

void dpc_unit_kernel(const dpc_unit *u, int k, dpc_kernel_info *out) {
    const kernel *kr = u->kg.kernels.items[k];
    const ir_node *n = kr->root ? kr->root : kr->out;
    *out = (dpc_kernel_info){.name = kr->name, .kind = kkind_name(kr->kind), .kind_index = (int)kr->kind,
                             .line = n->at.line};
    out->file = n->at.file ? n->at.file->path : "?";
    out->scope = n->scope ? n->scope : "";
}

int dpc_unit_nbufs(const dpc_unit *u) { return u->stage == DPC_STAGE_FUSED ? u->kg.bufs.len : 0; }
const kbuf *dpc_unit_buf(const dpc_unit *u, int id) { return u->kg.bufs.items[id]; }

int dpc_unit_nconvs(const dpc_unit *u) {
    int n = 0;
    for (int i = 0; i < dpc_unit_nkernels(u); i++)
        n += ((const kernel *)u->kg.kernels.items[i])->kind == KK_CONV;
    return n;
}

void dpc_unit_conv(const dpc_unit *u, int i, dpc_conv_desc *out) {
    int sum;
    *out = (dpc_conv_desc){.kernel = -1};
    for (int k = 0; k < dpc_unit_nkernels(u); k++) {
        const kernel *kr = u->kg.kernels.items[k];
        if (kr->kind == KK_CONV && i-- == 0) {
            conv_describe(&u->kg, kr, out, &sum);
            conv_keep_marks(&u->kg, kr, out, sum);
            return;
        }
    }
}

dpc_status dpc_unit_cuda_program(const dpc_unit *u, kprec prec, char **source, dpc_cu_plan *plan, dpc_err *e) {
    if (u->stage != DPC_STAGE_FUSED || u->sig.unbound)
        return dpc_errf(e, DPC_EINTERNAL, "the unit was not compiled to kernels");
    return dpc_cuda_program(&u->kg, prec, source, plan, e);
}

int dpc_unit_nfiles(const dpc_unit *u) { return u->front->ctx.files.len; }

const char *dpc_unit_file(const dpc_unit *u, int i, const char **text, size_t *len) {
    const src_file *f = u->front->ctx.files.items[i];
    if (text)
        *text = f->text;
    if (len)
        *len = f->len;
    return f->path;
}

/* ---------------------------------------------------------------- texts */

void dpc_unit_print(const dpc_unit *u, dpc_buf *out) { repr_model(&u->front->m, out); }

void dpc_unit_ir(const dpc_unit *u, bool fused, dpc_buf *out) {
    if (fused) {
        if (u->stage == DPC_STAGE_FUSED && !u->sig.unbound)
            fuse_print(&u->kg, out);
    } else if (u->stage >= DPC_STAGE_IR && !u->sig.unbound)
        ir_print(&u->front->g, out);
}

void dpc_unit_dot(const dpc_unit *u, dpc_buf *out) {
    if (u->stage == DPC_STAGE_FUSED && !u->sig.unbound)
        kgraph_dot(&u->kg, out);
}

void dpc_kgraph_source(const kgraph *kg, dpc_dialect d, kprec prec, dpc_buf *out) {
    if (d == DPC_DIALECT_CUDA)
        emit_cuda(kg, prec, out);
    else
        emit_c(kg, out);
}

void dpc_unit_source(const dpc_unit *u, dpc_dialect d, kprec prec, dpc_buf *out) {
    if (u->stage == DPC_STAGE_FUSED && !u->sig.unbound)
        dpc_kgraph_source(&u->kg, d, prec, out);
}

/* ------------------------------------------------- scalar keyword values */

static dpc_status scalar_check(const dpc_sig_scalar *sc, double v, dpc_err *e) {
    if (sc->type == DPC_SIG_BOOL && v != 0 && v != 1)
        return dpc_errf(e, DPC_EUSER, "'%s' is a bool, got %g (use 0 or 1)", sc->name, v);
    if (sc->type == DPC_SIG_INT && (v != v || v != (double)(long long)v))
        return dpc_errf(e, DPC_EUSER, "'%s' is an int, got %g", sc->name, v);
    return DPC_OK;
}

int dpc_sig_scalar_index(const dpc_signature *s, const char *name) {
    for (int i = 0; i < s->nscalars; i++)
        if (strcmp(s->scalars[i].name, name) == 0)
            return i;
    return -1;
}

dpc_status dpc_sig_scalars(const dpc_signature *s, const char *const *names, const double *values, int n,
                           double *out, dpc_err *e) {
    if (s->nscalars > DPC_MAX_SCALARS)
        return dpc_errf(e, DPC_EUSER, "%s has more than %d scalar parameters", s->model_name, DPC_MAX_SCALARS);
    if (n < 0 || (n > 0 && (!names || !values)))
        return dpc_errf(e, DPC_EUSAGE, "keyword names or values missing");
    bool given[DPC_MAX_SCALARS] = {0};
    for (int i = 0; i < s->nscalars; i++)
        out[i] = s->scalars[i].def;
    for (int k = 0; k < n; k++) {
        int idx = names[k] ? dpc_sig_scalar_index(s, names[k]) : -1;
        if (idx < 0)
            return dpc_errf(e, DPC_EUSER, "forward of %s has no scalar parameter '%.100s'", s->model_name,
                            names[k] ? names[k] : "(null)");
        if (given[idx])
            return dpc_errf(e, DPC_EUSER, "scalar parameter '%s' given twice", names[k]);
        dpc_status st = scalar_check(&s->scalars[idx], values[k], e);
        if (st != DPC_OK)
            return st;
        out[idx] = values[k];
        given[idx] = true;
    }
    for (int i = 0; i < s->nscalars; i++)
        if (!given[i] && !s->scalars[i].has_default)
            return dpc_errf(e, DPC_EUSER, "forward of %s needs the scalar parameter '%s'", s->model_name,
                            s->scalars[i].name);
    return DPC_OK;
}

dpc_status dpc_sig_scalar_parse(const dpc_sig_scalar *sc, const char *v, double *out, dpc_err *e) {
    if (sc->type == DPC_SIG_BOOL) {
        if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1"))
            *out = 1;
        else if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0"))
            *out = 0;
        else
            return dpc_errf(e, DPC_EUSER, "'%s' is a bool, got '%s'", sc->name, v);
        return DPC_OK;
    }
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || *end || !*v || (sc->type == DPC_SIG_INT && d != (double)(long long)d))
        return dpc_errf(e, DPC_EUSER, "'%s' is %s, got '%s'", sc->name, sc->type == DPC_SIG_INT ? "an int" : "a float",
                        v);
    *out = d;
    return DPC_OK;
}
