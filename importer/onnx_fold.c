/* onnx_fold.c - the importer's constants: the one budget every tensor it
 * makes counts against, the initializers (integer ones converted to int64
 * only when a node reads them), and the freeing of constants that nothing
 * reads any more.
 *
 * Why: folding is where a small file asks for much. A few hundred bytes
 * of ConstantOfShape, a broadcast of two constants, Tile, Expand or
 * Gather can ask for gigabytes, and each folded constant used to be kept
 * to the end; an unused INT8 initializer was widened to int64 (8 times
 * its bytes) although no node read it. Now what the importer makes is
 * bounded by the file (IMP_FOLD_BASE + IMP_FOLD_PER per element of the
 * model's own tensors, never refunded, so time is bounded too), and a
 * constant whose last reader was a folding node is freed as soon as that
 * reader is imported. A constant a computing node read (a Parameter, a
 * weight, a literal, or one a pattern may look back at) is kept. */
#include "onnx_imp.h"

#include "emit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- budget */

void imp_budget_grant(imp *I, int64_t numel) {
    int64_t add;
    if (numel < 0 || !dpc_mul_i64(numel, IMP_FOLD_PER, &add) || I->budget > INT64_MAX - add)
        I->budget = INT64_MAX;
    else
        I->budget += add;
}

dpc_status imp_budget_charge(imp *I, int64_t numel) {
    int64_t room = I->budget - I->folded;
    if (numel > room) {
        char n[32];
        if (numel == INT64_MAX)
            snprintf(n, sizeof n, "more than 2^63");
        else
            snprintf(n, sizeof n, "%lld", (long long)numel);
        return imp_err(I, "folding this node would make %s elements; dpc folds at most %lld per import (2^26, and %d "
                          "for each element of the model's own tensors), and has made %lld",
                       n, (long long)I->budget, IMP_FOLD_PER, (long long)I->folded);
    }
    I->folded += numel;
    return DPC_OK;
}

/* ----------------------------------------------------------- the slots */

/* Takes t (owned from now on) into a new slot of I->tensors: its index,
 * or -1 when out of memory (t freed). */
static int keep(imp *I, dpc_tensor *t) {
    if (I->nt + 1 > I->capt || I->nt + 1 > I->captslot) {
        int nc = I->capt > I->captslot ? I->capt : I->captslot;
        nc = nc ? nc * 2 : 64;
        dpc_tensor **nt = dpc_realloc(I->tensors, (size_t)nc * sizeof *nt);
        if (nt)
            I->tensors = nt, I->capt = nc;
        struct imp_tslot *ns = nt ? dpc_realloc(I->tslot, (size_t)nc * sizeof *ns) : NULL;
        if (!ns) {
            dpc_tensor_free(t);
            imp_oom(I);
            return -1;
        }
        memset(ns + I->captslot, 0, (size_t)(nc - I->captslot) * sizeof *ns);
        I->tslot = ns, I->captslot = nc;
    }
    I->tensors[I->nt] = t;
    I->tslot[I->nt] = (struct imp_tslot){0, false};
    return I->nt++;
}

dpc_tensor *imp_tensor(imp *I, dpc_dtype dt, int rank, const int64_t *shape) {
    /* the element count, overflow-safe: saturated, 0 when a dim is 0 */
    int64_t numel = 1;
    bool zero = false, over = false;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0) {
            imp_err(I, "a tensor of a negative dim (%lld)", (long long)shape[i]);
            return NULL;
        }
        zero |= shape[i] == 0;
        over = over || !dpc_mul_i64(numel, shape[i], &numel);
    }
    numel = zero ? 0 : over ? INT64_MAX : numel;
    if (imp_budget_charge(I, numel) != DPC_OK)
        return NULL;
    dpc_tensor *t;
    if (dpc_tensor_new(dt, rank, shape, &t, I->e) != DPC_OK) {
        if (I->e->code == DPC_ENOMEM)
            I->oom = true;
        else
            imp_err(I, "%s", I->e->msg);
        return NULL;
    }
    return keep(I, t) < 0 ? NULL : t;
}

/* ---------------------------------------------------------- initializers */

static void init_what(imp *I, const Onnx__TensorProto *t, char *what, size_t n) {
    dpc_buf b;
    dpc_buf_init(&b);
    emit_comment_text(&b, t->name);
    snprintf(what, n, "%s: initializer '%.*s%s'", I->path, 200, b.data ? b.data : "", b.len > 200 ? "..." : "");
    dpc_buf_free(&b);
}

static bool float_dt(int dt) {
    return dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
           dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

dpc_status imp_load_initializers(imp *I) {
    I->budget = IMP_FOLD_BASE;
    for (size_t i = 0; i < I->g->n_initializer; i++) {
        const Onnx__TensorProto *t = I->g->initializer[i];
        char what[400];
        init_what(I, t, what, sizeof what);
        bool fl = float_dt(t->has_data_type ? t->data_type : 0), isb = false;
        dpc_tensor *c = NULL; /* integers: checked now, converted when read (imp_load_inputs) */
        dpc_status s = dpc_onnx_tensor(t, I->dir, what, fl ? &c : NULL, &isb, I->e);
        if (s != DPC_OK)
            return s;
        int slot = c ? keep(I, c) : -1;
        if (c && slot < 0)
            return DPC_ENOMEM;
        int v = imp_new_value(I, t->name);
        if (v < 0)
            return I->e->code ? I->e->code : DPC_EUSER;
        ival *x = &I->v[v];
        x->c = c, x->init = (int)i, x->lazy = !fl;
        x->kind = fl ? VK_FLOAT : isb ? VK_BOOL : VK_INT;
        if (c)
            x->cslot = slot + 1, I->tslot[slot].refs = 1;
        sdim d[DPC_MAX_RANK];
        int64_t numel = 1;
        for (size_t k = 0; k < t->n_dims; k++) { /* checked by dpc_onnx_tensor: <= 2^40 each and in all */
            d[k] = (sdim){t->dims[k], 0};
            numel *= t->dims[k];
        }
        imp_budget_grant(I, numel);
        if ((s = imp_set_shape(I, v, (int)t->n_dims, d)) != DPC_OK)
            return s;
    }
    return DPC_OK;
}

dpc_status imp_load_inputs(imp *I, const Onnx__NodeProto *n) {
    for (size_t i = 0; i < n->n_input; i++) {
        int v = n->input[i][0] ? imp_find(I, n->input[i]) : -1;
        if (v < 0 || !I->v[v].lazy)
            continue;
        const Onnx__TensorProto *t = I->g->initializer[I->v[v].init];
        char what[400];
        init_what(I, t, what, sizeof what);
        dpc_tensor *c;
        dpc_status s = dpc_onnx_tensor(t, I->dir, what, &c, NULL, I->e);
        if (s != DPC_OK)
            return s;
        int slot = keep(I, c);
        if (slot < 0)
            return DPC_ENOMEM;
        ival *x = &I->v[v];
        x->c = c, x->cslot = slot + 1, x->lazy = false;
        I->tslot[slot].refs = 1;
    }
    return DPC_OK;
}

/* ------------------------------------------------------------- lifetime */

void imp_const_own(imp *I, int v) {
    ival *x = &I->v[v];
    if (!x->c || x->cslot)
        return;
    /* made by this node's op, so among the last few slots; else untracked (kept) */
    for (int i = I->nt - 1; i >= 0 && i >= I->nt - 16; i--)
        if (I->tensors[i] == x->c) {
            x->cslot = i + 1;
            I->tslot[i].refs++;
            return;
        }
}

void imp_const_share(imp *I, int to, int from) {
    ival *t = &I->v[to], *f = &I->v[from];
    if (f->cslot && t->c == f->c && !t->cslot) {
        t->cslot = f->cslot;
        I->tslot[f->cslot - 1].refs++;
    }
}

/* readers of v not yet imported (counted from the uses table when first asked) */
static int *left(imp *I, int v) {
    ival *x = &I->v[v];
    if (!x->counted) {
        int first;
        x->left = imp_uses(I, x->name, &first);
        x->counted = true;
    }
    return &x->left;
}

/* v reads no more: its constant goes, unless a computing node read the
 * tensor (pinned) */
static void drop(imp *I, int v) {
    ival *x = &I->v[v];
    if (!x->cslot || I->tslot[x->cslot - 1].pinned)
        return;
    int s = x->cslot - 1;
    x->cslot = 0, x->c = NULL;
    dpc_free(x->csym);
    x->csym = NULL;
    if (--I->tslot[s].refs == 0) {
        dpc_tensor_free(I->tensors[s]);
        I->tensors[s] = NULL;
    }
}

/* Whether node k only folded: every output it has is a constant (no
 * statement, no pattern, no MultiheadAttention region). */
static bool folded_node(imp *I, int k) {
    if (I->claim && I->claim[k])
        return false;
    const Onnx__NodeProto *n = I->g->node[k];
    for (size_t i = 0; i < n->n_output; i++) {
        if (!n->output[i][0])
            continue;
        int v = imp_find(I, n->output[i]);
        if (v < 0)
            return false;
        const ival *x = &I->v[v];
        if (!x->c || x->var || x->deferred || x->merged >= 0 || x->region)
            return false;
    }
    return true;
}

void imp_release(imp *I, int k) {
    const Onnx__NodeProto *n = I->g->node[k];
    bool folds = folded_node(I, k);
    for (size_t i = 0; i < n->n_input; i++) {
        int v = n->input[i][0] ? imp_find(I, n->input[i]) : -1;
        if (v < 0)
            continue;
        if (!folds && I->v[v].cslot)
            I->tslot[I->v[v].cslot - 1].pinned = true;
        int *l = left(I, v);
        if (*l > 0 && --*l == 0)
            drop(I, v);
    }
    for (size_t i = 0; i < n->n_output; i++) { /* what nothing reads goes at once */
        int v = n->output[i][0] ? imp_find(I, n->output[i]) : -1;
        if (v >= 0 && *left(I, v) == 0)
            drop(I, v);
    }
}

bool imp_i64_of(double v, int64_t *out) {
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
        return false;
    *out = (int64_t)v;
    return true;
}
