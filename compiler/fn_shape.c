/* fn_shape.c - the shape and view functions in forward: reshape/view,
 * flatten, transpose, permute, t, cat, size, dim, unsqueeze, squeeze,
 * expand, expand_as, contiguous, split, chunk. */
#include "functions.h"

#include <string.h>

/* Whether x is computed from the batch size. A walk down the ids (operands
 * have smaller ids), not a recursion: a long `N + 1 + 1 ...` chain is deep. */
static bool uses_batch(builder *b, const ir_node *x) {
    bool *reach = arena_alloc(&b->c->arena, (size_t)x->id + 1);
    reach[x->id] = true;
    for (int id = x->id; id >= 0; id--) {
        const ir_node *n = b->g->nodes.items[id];
        if (!reach[id])
            continue;
        if (n->op == OP_BATCH)
            return true;
        for (int i = 0; i < n->nin; i++)
            reach[n->in[i]] = true;
    }
    return false;
}

static ir_node *fn_reshape(builder *b, ir_node *x, const fargs *a, int first, loc at) {
    /* reshape(x, 2, 3) or reshape(x, [2, 3]) or reshape(x, (2, 3)) */
    const sv *items = a->v + first;
    int n = a->n - first;
    if (n == 1 && (items[0].k == SV_TUPLE || items[0].k == SV_LIST)) {
        n = items[0].n;
        items = items[0].items;
    }
    if (n > IR_MAX_RANK || n < 0) {
        error_at(b->c, at, "reshape: too many dimensions");
        return NULL;
    }
    shape out = {.rank = n};
    int infer = -1;
    int64_t known = 1;
    bool known_sym = false;
    for (int i = 0; i < n; i++) {
        const sv *v = &items[i];
        if (v->k == SV_TENSOR && v->t->sh.rank == 0) {
            loc vat = items == a->v + first ? a->at[first + i] : at;
            if (uses_batch(b, v->t))
                error_at(b->c, vat,
                         "reshape: this size is computed from the batch size '%s', which is known only at run "
                         "time; write %s itself, or -1 for the size to infer",
                         b->batch, b->batch);
            else
                error_at(b->c, vat, "reshape sizes must be known when compiling");
            return NULL;
        }
        if (v->k == SV_BATCH) {
            out.d[i] = (dim){1, true};
            known_sym = true;
            continue;
        }
        int64_t d;
        if (!want_int(b, v, at, "a reshape size", &d))
            return NULL;
        if (d == -1) {
            if (infer >= 0) {
                error_at(b->c, at, "reshape: only one dimension can be inferred (-1)");
                return NULL;
            }
            infer = i;
            continue;
        }
        if (d < 0) {
            error_at(b->c, at, "reshape: invalid size %lld", (long long)d);
            return NULL;
        }
        out.d[i] = (dim){d, false};
        if (!dpc_mul_i64(known, d, &known)) {
            error_at(b->c, at, "reshape: size overflow");
            return NULL;
        }
    }
    bool tsym;
    int64_t total = shape_numel(&x->sh, &tsym);
    if (infer >= 0) {
        if (known == 0 || total % known != 0 || (known_sym && !tsym)) {
            error_at(b->c, at, "shape '%s' is invalid for input of shape %s", shp(b, &out), shp(b, &x->sh));
            return NULL;
        }
        out.d[infer] = (dim){total / known, tsym && !known_sym};
    } else if (total != known || tsym != known_sym) {
        error_at(b->c, at, "shape '%s' is invalid for input of shape %s", shp(b, &out), shp(b, &x->sh));
        return NULL;
    }
    if (!numel_ok(&out)) {
        error_at(b->c, at, "reshape: shape '%s' is too large: more than 2^40 elements", shp(b, &out));
        return NULL;
    }
    return reshape_to(b, x, &out, at, NULL);
}

ir_node *fn_flatten(fcall *c) {
    builder *b = c->b;
    int64_t sd = 0, ed = -1;
    ir_node *x;
    if (c->s[0].k != SV_TENSOR && !want_tensor(b, &c->s[0], c->at, c->fn, &x))
        return NULL;
    x = c->s[0].t;
    if ((c->g[1] && !want_int(b, &c->s[1], c->at, "start_dim", &sd)) ||
        (c->g[2] && !want_int(b, &c->s[2], c->at, "end_dim", &ed)))
        return NULL;
    return flatten(b, x, sd, ed, c->at, NULL);
}

ir_node *fn_reshape_call(fcall *c) {
    const fargs *a = c->a;
    if (a->n < 2) {
        error_at(c->b->c, c->at, "%s() needs a tensor and a shape", c->fn);
        return NULL;
    }
    for (int i = 0; i < a->n; i++)
        if (a->names[i]) {
            error_at(c->b->c, a->at[i], "%s() takes no keyword arguments", c->fn);
            return NULL;
        }
    if (a->v[0].k != SV_TENSOR) {
        error_at(c->b->c, c->at, "%s() expects a tensor, got %s", c->fn, sv_kind_name(&a->v[0]));
        return NULL;
    }
    return fn_reshape(c->b, a->v[0].t, a, 1, c->at);
}

ir_node *fn_transpose(fcall *c) {
    builder *b = c->b;
    int64_t d0, d1;
    int n0, n1;
    if (c->s[0].k != SV_TENSOR) {
        error_at(b->c, c->sat[0], "transpose() expects a tensor, got %s", sv_kind_name(&c->s[0]));
        return NULL;
    }
    ir_node *x = c->s[0].t;
    if (!want_int(b, &c->s[1], c->at, "dim0", &d0) || !want_int(b, &c->s[2], c->at, "dim1", &d1) ||
        !norm_dim(b, d0, x->sh.rank, c->at, &n0) || !norm_dim(b, d1, x->sh.rank, c->at, &n1))
        return NULL;
    int perm[IR_MAX_RANK];
    for (int i = 0; i < x->sh.rank; i++)
        perm[i] = i;
    perm[n0] = n1;
    perm[n1] = n0;
    return permute(b, x, perm, c->at);
}

/* permute's dims: a tuple or list, or the arguments after the tensor. */
static bool permute_dims(fcall *c, int64_t *dims, int *nd) {
    const fargs *a = c->a;
    *nd = 0;
    if (a->n == 2 && (a->v[1].k == SV_TUPLE || a->v[1].k == SV_LIST))
        return dims_list(c->b, &a->v[1], c->at, "permute dims", dims, nd);
    if (a->n - 1 > IR_MAX_RANK) {
        error_at(c->b->c, c->at, "permute(): too many dims");
        return false;
    }
    for (int i = 1; i < a->n; i++)
        if (!want_int(c->b, &a->v[i], a->at[i], "a permute dim", &dims[(*nd)++]))
            return false;
    return true;
}

ir_node *fn_permute(fcall *c) {
    builder *b = c->b;
    if (c->a->n < 1 || c->a->v[0].k != SV_TENSOR) {
        error_at(b->c, c->at, "permute() expects a tensor and dims");
        return NULL;
    }
    ir_node *x = c->a->v[0].t;
    int64_t dims[IR_MAX_RANK];
    int nd;
    if (!permute_dims(c, dims, &nd))
        return NULL;
    if (nd != x->sh.rank) {
        error_at(b->c, c->at, "permute(): number of dims don't match (%d given for a %d-D tensor)", nd, x->sh.rank);
        return NULL;
    }
    int perm[IR_MAX_RANK], seen[IR_MAX_RANK] = {0};
    for (int i = 0; i < nd; i++) {
        if (!norm_dim(b, dims[i], x->sh.rank, c->at, &perm[i]))
            return NULL;
        if (seen[perm[i]]++) {
            error_at(b->c, c->at, "permute(): repeated dim %d", perm[i]);
            return NULL;
        }
    }
    return permute(b, x, perm, c->at);
}

ir_node *fn_cat(fcall *c) {
    int64_t d = 0;
    if (c->g[1] && !want_int(c->b, &c->s[1], c->at, "dim", &d))
        return NULL;
    return cat(c->b, &c->s[0], d, c->at);
}

/* x.size() is x.shape; x.size(d) one dim of it. */
bool fn_size(fcall *c, sv *out) {
    ir_node *x;
    sv all;
    if (!tensor_arg(c, 0, &x) || !shape_tuple(c->b, x, c->at, &all))
        return false;
    if (!c->g[1] || c->s[1].k == SV_NONE) {
        *out = all;
        return true;
    }
    int64_t d;
    int nd;
    if (!want_int(c->b, &c->s[1], c->sat[1], "dim", &d) || !norm_dim(c->b, d, x->sh.rank, c->sat[1], &nd))
        return false;
    if (x->sh.rank == 0) {
        error_at(c->b->c, c->at, "size(): a 0-dim tensor has no dims");
        return false;
    }
    *out = all.items[nd];
    return true;
}

bool fn_dim(fcall *c, sv *out) {
    ir_node *x;
    if (!tensor_arg(c, 0, &x))
        return false;
    *out = (sv){.k = SV_NUM, .v = {.kind = V_INT, .i = x->sh.rank}};
    return true;
}

ir_node *fn_unsqueeze(fcall *c) {
    ir_node *x;
    int64_t d;
    int nd;
    if (!tensor_arg(c, 0, &x) || !want_int(c->b, &c->s[1], c->sat[1], "dim", &d) ||
        !norm_dim(c->b, d, x->sh.rank + 1, c->sat[1], &nd))
        return NULL;
    if (x->sh.rank == IR_MAX_RANK) {
        error_at(c->b->c, c->at, "unsqueeze(): more than %d dims", IR_MAX_RANK);
        return NULL;
    }
    shape s = {.rank = x->sh.rank + 1};
    for (int i = 0, k = 0; i < s.rank; i++)
        s.d[i] = i == nd ? (dim){1, false} : x->sh.d[k++];
    return reshape_to(c->b, x, &s, c->at, NULL);
}

/* squeeze(x): every dim of size 1 goes (never the batch dim: its size is
 * known only at run time); squeeze(x, d): dim d if its size is 1. */
ir_node *fn_squeeze(fcall *c) {
    ir_node *x;
    if (!tensor_arg(c, 0, &x))
        return NULL;
    bool drop[IR_MAX_RANK] = {0};
    if (!c->g[1] || c->s[1].k == SV_NONE) {
        for (int i = 0; i < x->sh.rank; i++)
            drop[i] = true;
    } else {
        int64_t dims[IR_MAX_RANK];
        int n;
        if (!dims_list(c->b, &c->s[1], c->sat[1], "dim", dims, &n))
            return NULL;
        for (int i = 0; i < n; i++) {
            int d;
            if (!norm_dim(c->b, dims[i], x->sh.rank, c->sat[1], &d))
                return NULL;
            drop[d] = true;
        }
    }
    shape s = {0};
    for (int i = 0; i < x->sh.rank; i++)
        if (!drop[i] || x->sh.d[i].sym || x->sh.d[i].k != 1)
            s.d[s.rank++] = x->sh.d[i];
    return reshape_to(c->b, x, &s, c->at, NULL);
}

/* The target of expand(x, sizes): -1 keeps a dim, the batch size makes (or
 * keeps) the batch dim; only dims of size 1 grow; new dims lead. */
static ir_node *expand_sizes(fcall *c, ir_node *x, const sv *items, int n, loc at) {
    builder *b = c->b;
    if (n > IR_MAX_RANK) {
        error_at(b->c, at, "expand(): more than %d dims", IR_MAX_RANK);
        return NULL;
    }
    if (n < x->sh.rank) {
        error_at(b->c, at,
                 "expand(): the number of sizes provided (%d) must be greater or equal to the number of dimensions "
                 "in the tensor (%d)",
                 n, x->sh.rank);
        return NULL;
    }
    shape to = {.rank = n};
    int lead = n - x->sh.rank, nsym = 0;
    for (int j = 0; j < n; j++) {
        const dim *xd = j >= lead ? &x->sh.d[j - lead] : NULL;
        const sv *v = &items[j];
        int64_t k = 0;
        if (v->k == SV_BATCH) {
            if (xd && !(xd->sym && xd->k == 1) && !(!xd->sym && xd->k == 1)) {
                error_at(b->c, at, "expand(): dim %d of %s has size %lld and cannot be expanded to the batch size '%s'",
                         j - lead, shp(b, &x->sh), (long long)xd->k, b->batch);
                return NULL;
            }
            to.d[j] = (dim){1, true};
        } else {
            if (!want_int(b, v, at, "an expand size", &k))
                return NULL;
            if (k == -1 && !xd) {
                error_at(b->c, at, "expand(): the expanded size of the tensor (-1) isn't allowed in a leading, "
                                   "non-existing dimension %d", j);
                return NULL;
            }
            if (k < -1) {
                error_at(b->c, at, "expand(): invalid size %lld", (long long)k);
                return NULL;
            }
            if (k == -1)
                to.d[j] = *xd;
            else if (xd && (xd->sym || (xd->k != 1 && xd->k != k))) {
                error_at(b->c, at,
                         "expand(): the expanded size of the tensor (%lld) must match the existing size (%s) at "
                         "non-singleton dimension %d (tensor sizes %s)",
                         (long long)k, xd->sym ? b->batch : arena_printf(&b->c->arena, "%lld", (long long)xd->k),
                         j, shp(b, &x->sh));
                return NULL;
            } else
                to.d[j] = (dim){k, false};
        }
        nsym += to.d[j].sym;
    }
    if (nsym > 1) {
        error_at(b->c, at, "expand(): only one dim can be the batch size");
        return NULL;
    }
    if (!numel_ok(&to)) {
        error_at(b->c, at, "expand(): the result %s is too large: more than 2^40 elements", shp(b, &to));
        return NULL;
    }
    return expand_to(b, x, &to, at);
}

ir_node *fn_expand(fcall *c) {
    const fargs *a = c->a;
    for (int i = 0; i < a->n; i++)
        if (a->names[i]) {
            error_at(c->b->c, a->kw_at[i], "expand() takes no keyword arguments");
            return NULL;
        }
    if (a->n < 1 || a->v[0].k != SV_TENSOR) {
        error_at(c->b->c, c->at, "expand() expects a tensor and sizes");
        return NULL;
    }
    const sv *items = a->v + 1;
    int n = a->n - 1;
    if (n == 1 && (items[0].k == SV_TUPLE || items[0].k == SV_LIST)) {
        n = items[0].n;
        items = items[0].items;
    }
    return expand_sizes(c, a->v[0].t, items, n, c->at);
}

ir_node *fn_expand_as(fcall *c) {
    ir_node *x, *y;
    sv to;
    if (!tensor_arg(c, 0, &x) || !tensor_arg(c, 1, &y) || !shape_tuple(c->b, y, c->sat[1], &to))
        return NULL;
    return expand_sizes(c, x, to.items, to.n, c->at);
}

ir_node *fn_contiguous(fcall *c) {
    ir_node *x;
    return tensor_arg(c, 0, &x) ? x : NULL; /* views are materialised where an op needs it */
}

/* split and chunk: pieces of x along d, of the given sizes. */
static bool pieces(fcall *c, ir_node *x, int d, const int64_t *sizes, int n, sv *out) {
    out->k = SV_TUPLE;
    out->n = n;
    out->items = arena_alloc(&c->b->c->arena, sizeof(sv) * (size_t)(n + 1));
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        ir_node *p = narrow(c->b, x, d, at, sizes[i], c->at);
        if (!p)
            return false;
        out->items[i] = (sv){.k = SV_TENSOR, .t = p};
        at += sizes[i];
    }
    return true;
}

#define MAX_PIECES 4096

static bool split_dim(fcall *c, ir_node *x, int slot, int *d) {
    int64_t dd = 0;
    if (c->g[slot] && !want_int(c->b, &c->s[slot], c->sat[slot], "dim", &dd))
        return false;
    if (x->sh.rank == 0) {
        error_at(c->b->c, c->at, "%s() expects at least a 1-dimensional tensor", c->fn);
        return false;
    }
    if (!norm_dim(c->b, dd, x->sh.rank, c->sat[slot], d))
        return false;
    if (x->sh.d[*d].sym) {
        error_at(c->b->c, c->at, "%s() along the batch dim (dim %d) is not supported: DataParallel splits it across replicas",
                 c->fn, *d);
        return false;
    }
    return true;
}

/* split(x, size or [sizes], dim=0) */
bool fn_split(fcall *c, sv *out) {
    builder *b = c->b;
    ir_node *x;
    int d;
    if (!tensor_arg(c, 0, &x) || !split_dim(c, x, 2, &d))
        return false;
    int64_t len = x->sh.d[d].k, *sizes;
    int n = 0;
    const sv *s = &c->s[1];
    if (s->k == SV_TUPLE || s->k == SV_LIST) {
        if (s->n > MAX_PIECES) {
            error_at(b->c, c->sat[1], "split(): more than %d pieces", MAX_PIECES);
            return false;
        }
        sizes = arena_alloc(&b->c->arena, sizeof(int64_t) * (size_t)(s->n + 1));
        int64_t sum = 0;
        for (int i = 0; i < s->n; i++) {
            if (!want_int(b, &s->items[i], c->sat[1], "a split size", &sizes[i]))
                return false;
            if (sizes[i] < 0) {
                error_at(b->c, c->sat[1], "split(): split_sizes cannot be negative, got %lld", (long long)sizes[i]);
                return false;
            }
            sum += sizes[i];
        }
        n = s->n;
        if (sum != len) {
            error_at(b->c, c->sat[1],
                     "split_with_sizes expects split_sizes to sum exactly to %lld (input tensor's size at dimension %d), "
                     "but they sum to %lld",
                     (long long)len, d, (long long)sum);
            return false;
        }
    } else {
        int64_t k;
        if (!want_int(b, s, c->sat[1], "split_size", &k))
            return false;
        if (k <= 0 && !(k == 0 && len == 0)) {
            error_at(b->c, c->sat[1], "split(): split_size must be positive, got %lld", (long long)k);
            return false;
        }
        int64_t cnt = k ? (len + k - 1) / k : 1;
        if (cnt < 1)
            cnt = 1;
        if (cnt > MAX_PIECES) {
            error_at(b->c, c->sat[1], "split(): more than %d pieces", MAX_PIECES);
            return false;
        }
        n = (int)cnt;
        sizes = arena_alloc(&b->c->arena, sizeof(int64_t) * (size_t)(n + 1));
        for (int i = 0; i < n; i++)
            sizes[i] = len - (int64_t)i * k < k ? len - (int64_t)i * k : k;
    }
    return pieces(c, x, d, sizes, n, out);
}

/* chunk(x, chunks, dim=0): pieces of ceil(len / chunks), maybe fewer. */
bool fn_chunk(fcall *c, sv *out) {
    builder *b = c->b;
    ir_node *x;
    int d;
    int64_t k;
    if (!tensor_arg(c, 0, &x) || !want_int(b, &c->s[1], c->sat[1], "chunks", &k) || !split_dim(c, x, 2, &d))
        return false;
    if (k <= 0) {
        error_at(b->c, c->sat[1], "chunk expects `chunks` to be greater than 0, got: %lld", (long long)k);
        return false;
    }
    if (k > MAX_PIECES) {
        error_at(b->c, c->sat[1], "chunk(): more than %d pieces", MAX_PIECES);
        return false;
    }
    int64_t len = x->sh.d[d].k, size = (len + k - 1) / k;
    int n = size ? (int)((len + size - 1) / size) : (int)k;
    int64_t *sizes = arena_alloc(&b->c->arena, sizeof(int64_t) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        sizes[i] = len - i * size < size ? len - i * size : size;
    return pieces(c, x, d, sizes, n, out);
}

ir_node *fn_t(fcall *c) {
    ir_node *x;
    if (!tensor_arg(c, 0, &x))
        return NULL;
    if (x->sh.rank > 2) {
        error_at(c->b->c, c->at, "t() expects a tensor with <= 2 dimensions, but self is %dD", x->sh.rank);
        return NULL;
    }
    int perm[2] = {1, 0};
    return x->sh.rank < 2 ? x : permute(c->b, x, perm, c->at);
}
