/* init.c - `dpc init`: PyTorch's default parameter initialisation (Linear
 * and Conv2d: kaiming_uniform_(a=sqrt(5)), so U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) for weight and bias; BatchNorm and LayerNorm: ones and
 * zeros; Embedding: N(0, 1) with the padding row zeroed; Parameter and
 * buffer members as their creation expression says), seeded and
 * reproducible. The random stream is dpc's own (xoshiro256**), not
 * PyTorch's MT19937: the distributions match, the values do not. */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next(rng *r) {
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return res;
}

static double uniform01(rng *r) { return (double)(next(r) >> 11) * 0x1.0p-53; }

static double normal01(rng *r) {
    double u1 = uniform01(r), u2 = uniform01(r);
    return sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2);
}

/* A Parameter/Buffer member, as its creation expression says: a constant
 * (f32 or i64), or drawn from N(a, b^2) or U(a, b). */
static void fill_tensor(const dpc_sig_param *p, rng *r, void *data, size_t count) {
    const dpc_sig_value *v = &p->value;
    for (size_t k = 0; k < count; k++) {
        double x = v->kind == DPC_SIG_DATA     ? v->data[k]
                   : v->kind == DPC_SIG_NORMAL  ? v->a + v->b * normal01(r)
                   : v->kind == DPC_SIG_UNIFORM ? v->a + (v->b - v->a) * uniform01(r)
                                                : v->a;
        if (p->is_int)
            ((int64_t *)data)[k] = (int64_t)x;
        else
            ((float *)data)[k] = (float)x;
    }
}

/* The initial value of every parameter, as tensors named by their
 * state_dict keys (*ts, *n; free with free_tensors). */
static dpc_status init_tensors(const dpc_model *m, uint64_t seed, dpc_st_tensor **out, int *nout, dpc_err *e) {
    const dpc_signature *sig = dpc_model_gsig(m);
    rng r;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r.s[i] = splitmix(&x);
    dpc_st_tensor *ts = dpc_calloc((size_t)sig->nparams + 1, sizeof *ts);
    *out = ts;
    *nout = 0;
    if (!ts)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    dpc_status s = DPC_OK;
    int n = 0;
    for (int i = 0; i < sig->nparams && s == DPC_OK; i++) {
        const dpc_sig_param *p = &sig->params[i];
        if (p->nonpersistent)
            continue; /* not in the state_dict */
        dpc_st_tensor *t = &ts[n++];
        t->name = (char *)p->key;
        t->rank = p->rank;
        memcpy(t->shape, p->shape, sizeof(int64_t) * (size_t)p->rank);
        size_t count = 1;
        for (int k = 0; k < p->rank; k++)
            count *= (size_t)p->shape[k];
        t->dtype = p->is_int ? DPC_I64 : DPC_F32;
        t->nbytes = count * (p->is_int ? 8 : 4);
        t->data = dpc_calloc(count + 1, p->is_int ? 8 : 4);
        if (!t->data) {
            s = dpc_errf(e, DPC_ENOMEM, "out of memory");
            break;
        }
        float *f = t->data;
        if (p->init == INIT_TENSOR) {
            fill_tensor(p, &r, t->data, count);
            continue;
        }
        double bound = p->fan_in > 0 ? 1.0 / sqrt(p->fan_in) : 0.0;
        for (size_t k = 0; k < count && !p->is_int; k++) {
            switch (p->init) {
            case INIT_KAIMING:
            case INIT_BIAS: f[k] = (float)((2.0 * uniform01(&r) - 1.0) * bound); break;
            case INIT_ONES: f[k] = 1.0f; break;
            case INIT_ZEROS: f[k] = 0.0f; break;
            case INIT_NORMAL:
            case INIT_NORMAL_STD: {
                double u1 = uniform01(&r), u2 = uniform01(&r);
                double sd = p->init == INIT_NORMAL_STD ? p->fan_in : 1.0;
                f[k] = (float)(sd * sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2));
                break;
            }
            }
        }
        if (p->init == INIT_NORMAL && p->zero_row >= 0) {
            int64_t row = p->zero_row, dim = p->shape[1];
            memset(f + row * dim, 0, sizeof(float) * (size_t)dim);
        }
    }
    *out = ts;
    *nout = n;
    return s;
}

static void free_tensors(dpc_st_tensor *ts, int n) {
    for (int i = 0; i < n; i++)
        free(ts[i].data);
    free(ts);
}

dpc_status dpc_model_init_weights(const dpc_model *m, uint64_t seed, const char *path, dpc_err *e) {
    dpc_st_tensor *ts = NULL;
    int n = 0;
    dpc_status s = init_tensors(m, seed, &ts, &n, e);
    if (s == DPC_OK)
        s = dpc_st_write(path, ts, (size_t)n, NULL, NULL, 0, e);
    free_tensors(ts, n);
    return s;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const dpc_st_tensor *)a)->name, ((const dpc_st_tensor *)b)->name);
}

dpc_status dpc_model_bind_init(dpc_model *m, uint64_t seed, dpc_err *e) {
    dpc_st_tensor *ts = NULL;
    int n = 0;
    dpc_status s = init_tensors(m, seed, &ts, &n, e);
    if (s == DPC_OK) {
        /* sorted by name, as a safetensors file reads back (dpc_st_find) */
        if (n > 1)
            qsort(ts, (size_t)n, sizeof *ts, cmp_tensor_name);
        dpc_safetensors st = {.t = ts, .n = (size_t)n};
        s = dpc_model_bind(m, &st, NULL, e);
    }
    free_tensors(ts, n);
    return s;
}
