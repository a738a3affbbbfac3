/* index.c - indexing and shapes in forward: x[0, 1:5:2, None, ...] on
 * tensors (one OP_SLICE view, read through strides), slices of tuples
 * (x.size()[:-1]), x.shape / x.ndim, and the views the shape functions
 * make (expand). The batch dim is only ever taken whole: DataParallel
 * splits it, so a replica's slice of it would not be the model's. */
#include "irbuild.h"

#include <string.h>

/* A tuple of the dims of x: ints, the batch dim as the batch size. */
bool shape_tuple(builder *b, const ir_node *x, loc at, sv *out) {
    out->k = SV_TUPLE;
    out->n = x->sh.rank;
    out->items = arena_alloc(&b->c->arena, sizeof(sv) * (size_t)(x->sh.rank + 1));
    for (int i = 0; i < x->sh.rank; i++) {
        const dim *d = &x->sh.d[i];
        if (d->sym && d->k != 1) {
            error_at(b->c, at, "dimension %d of %s is a multiple of the batch size '%s', known only at run time", i,
                     shp(b, &x->sh), b->batch);
            return false;
        }
        if (d->sym)
            out->items[i] = (sv){.k = SV_BATCH};
        else
            out->items[i] = (sv){.k = SV_NUM, .v = {.kind = V_INT, .i = d->k}};
    }
    return true;
}

bool attr_value(builder *b, const sv *base, const char *name, loc at, sv *out) {
    if (base->k == SV_TENSOR) {
        if (strcmp(name, "shape") == 0)
            return shape_tuple(b, base->t, at, out);
        if (strcmp(name, "ndim") == 0) {
            *out = (sv){.k = SV_NUM, .v = {.kind = V_INT, .i = base->t->sh.rank}};
            return true;
        }
        error_at(b->c, at, "tensors have no attribute '%s' in forward (shape and ndim are supported)", name);
        return false;
    }
    if (!base->poison)
        error_at(b->c, at, "%s has no attribute '%s'", sv_kind_name(base), name);
    return false;
}

/* An optional int of a slice: false after a diagnostic. */
static bool slice_int(builder *b, const ixitem *it, int k, int64_t *out, bool *given) {
    *given = it->has[k] && it->v[k].k != SV_NONE;
    if (!*given)
        return true;
    static const char *const what[] = {"a slice start", "a slice stop", "a slice step"};
    return want_int(b, &it->v[k], it->at, what[k], out);
}

/* Python's slice.indices for a length len (step != 0): start and the
 * number of elements. */
static void slice_indices(int64_t len, bool hs, int64_t start, bool he, int64_t stop, int64_t step, int64_t *first,
                          int64_t *count) {
    if (step > 0) {
        start = !hs ? 0 : start < 0 ? (start + len < 0 ? 0 : start + len) : (start > len ? len : start);
        stop = !he ? len : stop < 0 ? (stop + len < 0 ? 0 : stop + len) : (stop > len ? len : stop);
        *count = stop > start ? (stop - start + step - 1) / step : 0;
    } else {
        start = !hs ? len - 1 : start < 0 ? (start + len < 0 ? -1 : start + len) : (start >= len ? len - 1 : start);
        stop = !he ? -1 : stop < 0 ? (stop + len < 0 ? -1 : stop + len) : (stop >= len ? len - 1 : stop);
        *count = start > stop ? (start - stop - step - 1) / -step : 0;
    }
    *first = start;
}

/* tuple[a:b:c] (Python's rules, negative steps too). */
static bool tuple_slice(builder *b, const sv *base, const ixitem *items, int n, loc at, sv *out) {
    if (n != 1 || items[0].kind != 's') {
        error_at(b->c, at, "a tuple takes one index or one slice");
        return false;
    }
    int64_t st = 0, sp = 0, step = 1, first, count;
    bool hs, he, hp;
    if (!slice_int(b, &items[0], 0, &st, &hs) || !slice_int(b, &items[0], 1, &sp, &he) ||
        !slice_int(b, &items[0], 2, &step, &hp))
        return false;
    if (step == 0) {
        error_at(b->c, items[0].at, "slice step cannot be zero");
        return false;
    }
    slice_indices(base->n, hs, st, he, sp, step, &first, &count);
    out->k = SV_TUPLE;
    out->n = (int)count;
    out->items = arena_alloc(&b->c->arena, sizeof(sv) * (size_t)(count + 1));
    for (int64_t i = 0; i < count; i++)
        out->items[i] = base->items[first + i * step];
    return true;
}

static const char *ordinal_dim(builder *b, int i) { return arena_printf(&b->c->arena, "dimension %d", i); }

/* One plain index of dim `in` of x (it->kind 'i'): the dim is dropped. */
static bool index_dim(builder *b, const ir_node *x, const ixitem *it, int in, view_attr *v) {
    const dim *d = &x->sh.d[in];
    int64_t k;
    if (!want_int(b, &it->v[0], it->at, "an index", &k))
        return false;
    if (d->sym) {
        error_at(b->c, it->at,
                 "indexing the batch dim (dim %d) is not supported: DataParallel splits it across "
                 "replicas; index the other dims and keep ':' for it",
                 in);
        return false;
    }
    if (k < -d->k || k >= d->k) {
        error_at(b->c, it->at, "index %lld is out of bounds for %s with size %lld", (long long)k,
                 ordinal_dim(b, in), (long long)d->k);
        return false;
    }
    v->start[in] = k < 0 ? k + d->k : k;
    v->step[in] = 0;
    return true;
}

/* One slice of dim `in` of x: its output dim appended to out, *ident
 * cleared unless it takes the whole dim. False after a diagnostic, or with
 * *full set when out has no room left. */
static bool slice_dim(builder *b, const ir_node *x, const ixitem *it, int in, view_attr *v, shape *out, bool *ident,
                      bool *full) {
    const dim *d = &x->sh.d[in];
    int64_t st = 0, sp = 0, step = 1;
    bool hs, he, hp;
    if (!slice_int(b, it, 0, &st, &hs) || !slice_int(b, it, 1, &sp, &he) || !slice_int(b, it, 2, &step, &hp))
        return false;
    if (hp && step == 0) {
        error_at(b->c, it->at, "slice step cannot be zero");
        return false;
    }
    if (step < 0) {
        error_at(b->c, it->at, "step must be greater than zero (PyTorch has no negative slice steps)");
        return false;
    }
    if (d->sym) {
        if ((hs && st != 0) || he || step != 1) {
            error_at(b->c, it->at,
                     "slicing the batch dim (dim %d) is not supported: DataParallel splits it across replicas, "
                     "so only ':' can take it",
                     in);
            return false;
        }
        v->step[in] = 1;
        v->src[out->rank] = in;
        out->d[out->rank++] = *d;
        return true;
    }
    int64_t first, count;
    slice_indices(d->k, hs, st, he, sp, step, &first, &count);
    if (count == 0)
        first = 0;
    if (out->rank == IR_MAX_RANK) {
        *full = true;
        return false;
    }
    v->start[in] = first;
    v->step[in] = step;
    v->src[out->rank] = in;
    out->d[out->rank++] = (dim){count, false};
    *ident &= first == 0 && count == d->k;
    return true;
}

/* x[items] on a tensor: one OP_SLICE (or x itself when it takes all). */
static ir_node *tensor_subscript(builder *b, ir_node *x, const ixitem *items, int n, loc at) {
    int consumed = 0, ell = -1;
    for (int i = 0; i < n; i++) {
        if (items[i].kind == 'e') {
            if (ell >= 0) {
                error_at(b->c, items[i].at, "an index can only have a single ellipsis ('...')");
                return NULL;
            }
            ell = i;
        } else if (items[i].kind != 'n')
            consumed++;
    }
    int rank = x->sh.rank;
    if (consumed > rank) {
        error_at(b->c, at, "too many indices for tensor of dimension %d (%d given)", rank, consumed);
        return NULL;
    }
    view_attr va = {.rank_in = rank}, *v = &va;
    shape out = {0};
    bool ident = true;
    int in = 0;
    for (int i = 0; i <= n; i++) {
        /* the dims the ellipsis stands for (or the trailing ones): whole */
        if (i == n || i == ell) {
            int upto = i == ell ? in + (rank - consumed) : rank;
            for (; in < upto; in++) {
                if (out.rank == IR_MAX_RANK)
                    goto too_many;
                v->step[in] = 1;
                v->src[out.rank] = in;
                out.d[out.rank++] = x->sh.d[in];
            }
            continue;
        }
        const ixitem *it = &items[i];
        if (it->kind == 'n') {
            if (out.rank == IR_MAX_RANK)
                goto too_many;
            v->src[out.rank] = -1;
            out.d[out.rank++] = (dim){1, false};
            ident = false;
            continue;
        }
        if (it->kind == 'i') {
            if (!index_dim(b, x, it, in, v))
                return NULL;
            in++;
            ident = false;
            continue;
        }
        bool full = false;
        if (!slice_dim(b, x, it, in, v, &out, &ident, &full)) {
            if (full)
                goto too_many;
            return NULL;
        }
        in++;
    }
    if (ident) /* x[:], x[...] */
        return x;
    ir_node *r = mk_op(b, OP_SLICE, at, NULL, x, NULL, NULL);
    if (!r)
        return NULL;
    r->attr.view = va;
    r->sh = out;
    r->dt = x->dt;
    return r;
too_many:
    error_at(b->c, at, "the result of indexing %s has more than %d dims", shp(b, &x->sh), IR_MAX_RANK);
    return NULL;
}

bool subscript_value(builder *b, const sv *base, const ixitem *items, int n, loc at, sv *out) {
    if (base->k == SV_TUPLE)
        return tuple_slice(b, base, items, n, at, out);
    if (base->k != SV_TENSOR) {
        if (!base->poison)
            error_at(b->c, at, "%s cannot be sliced", sv_kind_name(base));
        return false;
    }
    ir_node *r = tensor_subscript(b, base->t, items, n, at);
    if (!r)
        return false;
    out->k = SV_TENSOR;
    out->t = r;
    return true;
}

/* x read as `to` (expand): dims of 1 are repeated (stride 0), new leading
 * dims too; the sizes were checked by the caller. */
ir_node *expand_to(builder *b, ir_node *x, const shape *to, loc at) {
    if (shape_eq(&x->sh, to))
        return x;
    ir_node *r = mk_op(b, OP_EXPAND, at, NULL, x, NULL, NULL);
    if (!r)
        return NULL;
    r->sh = *to;
    r->dt = x->dt;
    r->attr.view.rank_in = x->sh.rank;
    int lead = to->rank - x->sh.rank;
    for (int j = 0; j < to->rank; j++) {
        r->attr.view.src[j] = j < lead ? -1 : j - lead;
        if (j >= lead)
            r->attr.view.step[j - lead] = 1;
    }
    return r;
}

/* A slice of x along dim d (start, count), for split and chunk. */
ir_node *narrow(builder *b, ir_node *x, int d, int64_t start, int64_t count, loc at) {
    if (start == 0 && count == x->sh.d[d].k)
        return x;
    ir_node *r = mk_op(b, OP_SLICE, at, NULL, x, NULL, NULL);
    if (!r)
        return NULL;
    r->sh = x->sh;
    r->sh.d[d].k = count;
    r->dt = x->dt;
    view_attr *v = &r->attr.view;
    v->rank_in = x->sh.rank;
    for (int i = 0; i < x->sh.rank; i++) {
        v->step[i] = 1;
        v->src[i] = i;
    }
    v->start[d] = start;
    return r;
}
