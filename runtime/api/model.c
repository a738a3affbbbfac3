/* model.c - a model from source to outputs: compile, bind weights, choose
 * devices, validate inputs, run data-parallel. */
#include "model.h"
#include "backend_cpu.h"
#include "backend_cuda.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

dpc_status dpc_model_from_unit(dpc_unit *u, dpc_model **out, dpc_err *e) {
    *out = NULL;
    dpc_model *m = dpc_calloc(1, sizeof *m);
    if (!m) {
        dpc_unit_free(u);
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    }
    m->fail_replica = m->fail_kernel = -1;
    m->unit = u;
    m->sig = dpc_unit_signature(u);
    m->front = dpc_unit_front(u);
    m->cur = -1;
    if (m->sig->unbound) {
        /* run-time dims: specialised per value as it runs */
        long max = DPC_SPEC_CACHE_DEFAULT;
        bool set;
        dpc_status s = dpc_env_long("DPC_SPEC_CACHE", 1, 4096, &max, &set, e);
        m->gunit = u;
        m->gsig = m->sig;
        m->maxspecs = (int)max;
        m->specs = s == DPC_OK ? dpc_calloc((size_t)max, sizeof *m->specs) : NULL;
        if (s == DPC_OK && !m->specs)
            s = dpc_errf(e, DPC_ENOMEM, "out of memory");
        if (s != DPC_OK) {
            dpc_model_free(m);
            return s;
        }
    }
    *out = m;
    return DPC_OK;
}

dpc_status dpc_model_compile(const char *path, dpc_model **out, dpc_buf *diags, dpc_err *e) {
    *out = NULL;
    dpc_unit *u;
    dpc_compile_opts o = {.path = path, .stage = DPC_STAGE_FUSED, .defer_dims = true};
    dpc_status s = dpc_compile(&o, &u, diags, e);
    return s == DPC_OK ? dpc_model_from_unit(u, out, e) : s;
}

/* ------------------------------------------------- matching a state_dict */

/* A list of items for one message: the first DPC_WEIGHTS_SHOWN are
 * written, the rest only counted (a state_dict of another model can have
 * thousands of keys). */
typedef struct item_list {
    dpc_buf b;
    int n;
    const char *sep;
} item_list;

static void list_add(item_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void list_add(item_list *l, const char *fmt, ...) {
    if (l->n++ >= DPC_WEIGHTS_SHOWN)
        return;
    if (l->n > 1)
        dpc_buf_puts(&l->b, l->sep);
    va_list ap;
    va_start(ap, fmt);
    dpc_buf_vprintf(&l->b, fmt, ap);
    va_end(ap);
}

/* The items, then " (and N more)" for those not written. */
static const char *list_end(item_list *l) {
    if (l->n > DPC_WEIGHTS_SHOWN)
        dpc_buf_printf(&l->b, " (and %d more)", l->n - DPC_WEIGHTS_SHOWN);
    return l->b.data ? l->b.data : "";
}

static bool shape_matches(const dpc_sig_param *p, const dpc_st_tensor *t) {
    if (p->rank != t->rank)
        return false;
    for (int i = 0; i < p->rank; i++)
        if (p->shape[i] != t->shape[i])
            return false;
    return true;
}

static bool float_dtype(dpc_dtype t) { return t == DPC_F32 || t == DPC_F64 || t == DPC_F16 || t == DPC_BF16; }
static bool int_dtype(dpc_dtype t) { return t == DPC_I64 || t == DPC_I32; }

/* The tensor for parameter p: its key, or "module.<key>" as a state_dict
 * saved from DataParallel has it. */
static const dpc_st_tensor *find_param(const dpc_safetensors *st, const dpc_sig_param *p) {
    const dpc_st_tensor *t = dpc_st_find(st, p->key);
    if (!t) {
        char pre[1024];
        snprintf(pre, sizeof pre, "module.%s", p->key);
        t = dpc_st_find(st, pre);
    }
    return t;
}

/* Checks p's tensor t; a problem is added to wrong. */
static void check_param(const dpc_sig_param *p, const dpc_st_tensor *t, item_list *wrong) {
    if (!shape_matches(p, t)) {
        char want[128], got[128];
        dpc_shape_str(p->rank, p->shape, want, sizeof want);
        dpc_shape_str(t->rank, t->shape, got, sizeof got);
        list_add(wrong, "%s is %s, the model needs %s", p->key, got, want);
    } else if (p->is_int ? !int_dtype(t->dtype) : !float_dtype(t->dtype)) {
        list_add(wrong, "%s has dtype %s, the model needs %s", p->key, dpc_dtype_name(t->dtype),
                 p->is_int ? "an integer" : "a float");
    }
}

static dpc_status mismatch(item_list *missing, item_list *wrong, item_list *extra, dpc_err *e) {
    const char *ms = list_end(missing), *ws = list_end(wrong), *xs = list_end(extra);
    bool m = missing->n, w = wrong->n, x = extra->n;
    return dpc_errf(e, DPC_EUSER, "weights do not match the model%s%s%s%s%s%s", m ? ": missing " : "", ms,
                    w ? (m ? "; wrong: " : ": wrong: ") : "", ws, x ? "; unexpected: " : "", xs);
}

dpc_status dpc_weights_match(const dpc_signature *sig, const dpc_safetensors *st, const dpc_st_tensor **picks,
                             dpc_buf *extra, dpc_err *e) {
    bool *used = dpc_calloc(st->n + 1, 1);
    if (!used)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    item_list missing = {.sep = ", "}, wrong = {.sep = "; "}, unexpected = {.sep = ", "};
    for (int i = 0; i < sig->nparams; i++) {
        const dpc_sig_param *p = &sig->params[i];
        if (p->nonpersistent) { /* not in the state_dict: its value is the model's own */
            picks[i] = NULL;
            continue;
        }
        const dpc_st_tensor *t = picks[i] = find_param(st, p);
        if (t)
            used[t - st->t] = true;
        if (!t && !p->ignored)
            list_add(&missing, "%s", p->key);
        else if (t && !p->ignored)
            check_param(p, t, &wrong);
    }
    for (size_t j = 0; j < st->n; j++)
        if (!used[j])
            list_add(&unexpected, "%s", st->t[j].name);
    dpc_free(used);
    dpc_status s = DPC_OK;
    if (missing.n || wrong.n)
        s = mismatch(&missing, &wrong, &unexpected, e);
    else if (missing.b.oom || wrong.b.oom || unexpected.b.oom)
        s = dpc_errf(e, DPC_ENOMEM, "out of memory");
    else if (extra && unexpected.n)
        dpc_buf_puts(extra, list_end(&unexpected));
    dpc_buf_free(&missing.b);
    dpc_buf_free(&wrong.b);
    dpc_buf_free(&unexpected.b);
    return s == DPC_OK && extra && extra->oom ? dpc_errf(e, DPC_ENOMEM, "out of memory") : s;
}

/* ---------------------------------------------------------- binding */

/* A non-persistent buffer's value (a constant of the model, never in the
 * weights), as f32. */
static dpc_status constant_f32(const dpc_sig_param *p, float **out, dpc_err *e) {
    size_t count = 1;
    for (int k = 0; k < p->rank; k++)
        count *= (size_t)p->shape[k];
    float *f = dpc_calloc(count + 1, sizeof(float));
    if (!f)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    for (size_t k = 0; k < count; k++)
        f[k] = (float)(p->value.kind == DPC_SIG_DATA ? p->value.data[k] : p->value.a);
    *out = f;
    return DPC_OK;
}

/* An int64 buffer (HuggingFace's position_ids), as int64: from the
 * weights' I64 or I32 tensor t, or a non-persistent one's constant value
 * (t NULL). Where forward reads it, its kernel buffer is 8 bytes an
 * element, read as int64_t (fuse.c, plan_buffers): the float pointer it is
 * kept in is never read as floats. */
static dpc_status int_param(const dpc_sig_param *p, const dpc_st_tensor *t, float **out, dpc_err *e) {
    size_t count = 1;
    for (int k = 0; k < p->rank; k++)
        count *= (size_t)p->shape[k];
    int64_t *v = dpc_calloc(count + 1, sizeof *v);
    if (!v)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    for (size_t k = 0; k < count; k++) {
        if (!t)
            v[k] = (int64_t)(p->value.kind == DPC_SIG_DATA ? p->value.data[k] : p->value.a);
        else if (t->dtype == DPC_I64)
            memcpy(&v[k], (const char *)t->data + k * 8, 8); /* (safetensors' data need not be aligned) */
        else {
            int32_t w;
            memcpy(&w, (const char *)t->data + k * 4, 4);
            v[k] = w;
        }
    }
    *out = (float *)(void *)v;
    return DPC_OK;
}

/* f32 copies of the picked tensors, each replacing the parameter's old one
 * (int64 ones for the integer buffers: int_param, every one that is an
 * integer tensor of its shape, since a model compiled per run-time dim
 * knows which ones forward reads only when specialised; dpc_weights_match
 * checked only those it reads, so the others are checked here, and one
 * that does not fit stays unbound: check_devices refuses it if read); the
 * non-persistent buffers forward reads, from their constant values. */
static dpc_status keep_f32(dpc_model *m, const dpc_st_tensor **picks, dpc_err *e) {
    const dpc_signature *sig = dpc_model_gsig(m);
    for (int i = 0; i < sig->nparams; i++) {
        const dpc_sig_param *sp = &sig->params[i];
        const dpc_st_tensor *t = picks[i];
        if (sp->is_int) {
            if (sp->nonpersistent && m->params[i])
                continue; /* its constant, made at an earlier bind */
            free(m->params[i]); /* (not an earlier weights' values) */
            m->params[i] = NULL;
            if (!sp->nonpersistent && !(t && int_dtype(t->dtype) && shape_matches(sp, t)))
                continue;
            dpc_status s = int_param(sp, sp->nonpersistent ? NULL : t, &m->params[i], e);
            if (s != DPC_OK)
                return s;
            continue;
        }
        if (sp->nonpersistent && !sp->ignored && !m->params[i]) {
            dpc_status s = constant_f32(sp, &m->params[i], e);
            if (s != DPC_OK)
                return s;
            continue;
        }
        if (!t || sp->ignored)
            continue;
        dpc_tensor src = {.dtype = t->dtype, .rank = t->rank, .data = t->data, .nbytes = t->nbytes};
        memcpy(src.shape, t->shape, sizeof src.shape);
        dpc_tensor *f32;
        dpc_status s = dpc_tensor_convert(&src, DPC_F32, &f32, e);
        if (s != DPC_OK)
            return s;
        free(m->params[i]);
        m->params[i] = f32->data;
        f32->data = NULL;
        dpc_tensor_free(f32);
    }
    return DPC_OK;
}

/* The CUDA backend holds device copies of the old weights: rebuild it. */
static dpc_status rebuild_backend(dpc_model *m, dpc_err *e) {
    dpc_device devs[DPC_MAX_DEVICES];
    int n = m->ndev;
    memcpy(devs, m->devs, sizeof(dpc_device) * (size_t)n);
    for (int i = 0; i < m->ndev; i++)
        m->be->replica_free(m->be, m->rep[i]);
    m->ndev = 0;
    m->be->destroy(m->be);
    m->be = NULL;
    return dpc_model_set_devices(m, devs, n, e);
}

/* Every specialisation's backend and replicas freed (new weights, new
 * devices): they are made again at their next run. */
static void drop_backends(dpc_model *m) {
    for (int k = 0; k < m->nspecs; k++) {
        dpc_spec *sp = &m->specs[k];
        if (sp->be) {
            for (int i = 0; i < sp->ndev; i++)
                sp->be->replica_free(sp->be, sp->rep[i]);
            sp->be->destroy(sp->be);
        }
        sp->be = NULL;
        sp->ndev = 0;
    }
    m->be = NULL;
    m->ndev = 0;
}

dpc_status dpc_model_bind(dpc_model *m, const dpc_safetensors *st, dpc_buf *warnings, dpc_err *e) {
    const dpc_signature *gsig = dpc_model_gsig(m);
    int nparams = gsig->nparams;
    if (!m->params)
        m->params = dpc_calloc((size_t)nparams + 1, sizeof(float *));
    const dpc_st_tensor **picks = dpc_calloc((size_t)nparams + 1, sizeof *picks);
    dpc_buf extra;
    dpc_buf_init(&extra);
    dpc_status s = !m->params || !picks ? dpc_errf(e, DPC_ENOMEM, "out of memory")
                                        : dpc_weights_match(gsig, st, picks, &extra, e);
    if (s == DPC_OK)
        s = keep_f32(m, picks, e);
    if (s == DPC_OK && extra.len && warnings)
        dpc_buf_printf(warnings, "unexpected keys in the weights, ignored: %s", extra.data);
    free(picks);
    dpc_buf_free(&extra);
    if (s != DPC_OK)
        return s;
    /* the backend is created with the devices (dpc_model_set_devices, or
     * the CPU by default at the first run): a CUDA run needs no C compiler */
    /* the CPU backends read params, and compute again what they computed
     * from them once (the prepare kernels) and, for oneDNN convolutions,
     * their weights reordered; the others hold copies */
    for (int k = 0; k < m->nspecs; k++)
        if (m->specs[k].be && m->specs[k].be->weights_changed)
            m->specs[k].be->weights_changed(m->specs[k].be);
    if (m->be && m->be->weights_changed)
        m->be->weights_changed(m->be);
    if (m->gunit) {
        bool copies = false;
        for (int k = 0; k < m->nspecs; k++)
            copies |= m->specs[k].be && strcmp(m->specs[k].be->name, "cpu") != 0;
        if (copies)
            drop_backends(m);
        return DPC_OK;
    }
    if (m->be && strcmp(m->be->name, "cpu") != 0 && m->ndev > 0)
        return rebuild_backend(m, e);
    return DPC_OK;
}

void dpc_model_set_precision(dpc_model *m, kprec prec) { m->prec = prec; }

static dpc_status check_devices(const dpc_model *m, const dpc_device *devs, int n, int *ncudap, dpc_err *e) {
    int ncuda = 0;
    for (int i = 0; i < n; i++)
        ncuda += devs[i].kind == DPC_DEV_CUDA;
    *ncudap = ncuda;
    if (ncuda && ncuda != n)
        return dpc_errf(e, DPC_EUSER, "the device list mixes cpu and cuda devices; use one kind");
    if (!ncuda && m->prec != KP_F32)
        return dpc_errf(e, DPC_EUSER, "%s storage needs CUDA devices (--devices cuda:0...): the CPU backend computes in f32",
                        kprec_name(m->prec));
    if (!m->params)
        return dpc_errf(e, DPC_EUSAGE, "bind the weights (dpc_model_bind) before choosing devices");
    /* a model compiled per run-time dim learns which integer buffers its
     * forward reads (position_ids) only when specialised: they may have
     * been missing from weights bound before */
    for (int i = 0; i < m->sig->nparams; i++)
        if (!m->sig->params[i].ignored && !m->params[i])
            return dpc_errf(e, DPC_EUSER,
                            "the weights have no usable %s (missing, or not an integer tensor of its shape), "
                            "which %s's forward reads",
                            m->sig->params[i].key, m->sig->model_name);
    return DPC_OK;
}

/* The backend and replicas of m->unit for devs. */
static dpc_status set_devices(dpc_model *m, const dpc_device *devs, int n, dpc_err *e) {
    int ncuda;
    dpc_status cs = check_devices(m, devs, n, &ncuda, e);
    if (cs != DPC_OK)
        return cs;
    /* replicas share the cores: each replica's GEMMs get its share, unless
     * DPC_GEMM_THREADS says otherwise */
    long threads = dpc_dp_threads_per_replica(0, n);
    bool set;
    dpc_status st = dpc_env_long("DPC_GEMM_THREADS", 1, 4096, &threads, &set, e);
    if (st != DPC_OK)
        return st;
    for (int i = 0; i < m->ndev; i++)
        m->be->replica_free(m->be, m->rep[i]);
    m->ndev = 0;
    /* the backend follows the device kind: a new one replaces the old only
     * once it is ready, so a failed switch leaves the model as it was */
    const char *want = ncuda ? "cuda" : "cpu";
    if (!m->be || strcmp(m->be->name, want) != 0 || m->be_prec != m->prec) {
        dpc_backend *be = NULL;
        dpc_status s = ncuda ? dpc_backend_cuda_new(m->unit, m->params, m->prec, &be, e)
                             : dpc_backend_cpu_new(m->unit, m->params, &be, e);
        if (s == DPC_OK && ncuda)
            dpc_backend_cuda_offer_images(be, m->images); /* used only if compiled from be's own source */
        if (s == DPC_OK)
            s = be->prepare(be, m->unit, e);
        if (s != DPC_OK) {
            if (be)
                be->destroy(be);
            return s;
        }
        if (m->be)
            m->be->destroy(m->be);
        m->be = be;
        m->be_prec = m->prec;
    }
    for (int i = 0; i < n; i++) {
        dpc_status s = m->be->replica_new(m->be, devs[i].index, &m->rep[i], e);
        if (s != DPC_OK)
            return s;
        m->devs[i] = devs[i];
        m->ndev = i + 1;
    }
    if (!m->pool && n > 1) {
        dpc_status s = dpc_pool_create(n, &m->pool, e);
        if (s != DPC_OK)
            return s;
    }
    /* e.g. the CUDA backend's weight broadcast: one collective over every GPU */
    if (m->be->replicas_ready) {
        dpc_status s = m->be->replicas_ready(m->be, e);
        if (s != DPC_OK)
            return s;
    }
    if (!ncuda)
        dpc_cpu_set_gemm_threads(m->be, (int)threads);
    return DPC_OK;
}

/* The backend compiles here (prepare, and each GPU's first replica): a
 * refused kernel cache is noted in the model's own note. */
dpc_status dpc_model_set_devices(dpc_model *m, const dpc_device *devs, int n, dpc_err *e) {
    if (m->gunit) {
        /* run-time dims: each specialisation makes its backend for these
         * devices at its next run */
        int ncuda;
        dpc_status s = check_devices(m, devs, n, &ncuda, e);
        if (s != DPC_OK)
            return s;
        if (n < 1 || n > DPC_MAX_DEVICES)
            return dpc_errf(e, DPC_EUSAGE, "between 1 and %d devices", DPC_MAX_DEVICES);
        drop_backends(m);
        memcpy(m->want, devs, sizeof *devs * (size_t)n);
        m->nwant = n;
        if (!m->pool && n > 1 && (s = dpc_pool_create(n, &m->pool, e)) != DPC_OK)
            return s;
        return DPC_OK;
    }
    dpc_kcache_note *prev = dpc_kcache_note_push(&m->kcache);
    dpc_status s = set_devices(m, devs, n, e);
    dpc_kcache_note_pop(prev);
    return s;
}

/* ------------------------------------------------- run-time dims */

/* The values of the run-time dims in these inputs (shapes checked against
 * gsig): every input dim naming one must agree. */
static dpc_status rt_values(const dpc_model *m, const dpc_tensor *const *in, int n, int64_t *values, dpc_err *e) {
    const dpc_signature *g = m->gsig;
    int from_in[DPC_MAX_RTDIMS], from_dim[DPC_MAX_RTDIMS];
    for (int r = 0; r < g->nrtdims; r++)
        values[r] = -1;
    for (int i = 0; i < n && i < g->ninputs; i++)
        for (int d = 0; d < g->inputs[i].rank && d < in[i]->rank; d++) {
            int r = g->inputs[i].dim[d].rt - 1;
            if (r < 0)
                continue;
            int64_t v = in[i]->shape[d];
            if (values[r] < 0) {
                values[r] = v, from_in[r] = i, from_dim[r] = d;
                continue;
            }
            if (v != values[r])
                return dpc_errf(e, DPC_EUSER,
                                "inputs disagree on the run-time dim %s: input '%s' has %s = %lld (dim %d) but "
                                "input '%s' has %s = %lld (dim %d)",
                                g->rtdims[r].name, g->inputs[from_in[r]].name, g->rtdims[r].name,
                                (long long)values[r], from_dim[r], g->inputs[i].name, g->rtdims[r].name,
                                (long long)v, d);
        }
    for (int r = 0; r < g->nrtdims; r++)
        if (values[r] < 1)
            return dpc_errf(e, DPC_EUSER, "input '%s' has %s = %lld (dim %d): a run-time dim must be at least 1",
                            g->inputs[from_in[r]].name, g->rtdims[r].name, (long long)values[r], from_dim[r]);
    return DPC_OK;
}

static void spec_free(dpc_spec *sp) {
    if (sp->be) {
        for (int i = 0; i < sp->ndev; i++)
            sp->be->replica_free(sp->be, sp->rep[i]);
        sp->be->destroy(sp->be);
    }
    dpc_unit_free(sp->unit);
    memset(sp, 0, sizeof *sp);
}

/* The specialisation for values: found, or compiled from the unbound
 * unit's sources into a free slot (the least recently run one evicted
 * when all are taken). */
static dpc_status spec_find(dpc_model *m, const int64_t *values, int *out, dpc_err *e) {
    const dpc_signature *g = m->gsig;
    for (int k = 0; k < m->nspecs; k++)
        if (!memcmp(m->specs[k].values, values, sizeof(int64_t) * (size_t)g->nrtdims)) {
            *out = k;
            return DPC_OK;
        }
    dpc_unit *u;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_status s = dpc_unit_specialise(m->gunit, values, DPC_STAGE_FUSED, &u, &diags, e);
    if (s != DPC_OK) {
        char at[256] = "", msg[DPC_ERR_MSG];
        for (int r = 0; r < g->nrtdims; r++)
            snprintf(at + strlen(at), sizeof at - strlen(at), "%s%s = %lld", r ? ", " : "", g->rtdims[r].name,
                     (long long)values[r]);
        snprintf(msg, sizeof msg, "%s", diags.len ? diags.data : e->msg);
        msg[strcspn(msg, "\n")] = 0;
        dpc_buf_free(&diags);
        return s == DPC_ENOMEM ? s : dpc_errf(e, s, "%s does not compile at %s: %s", g->model_name, at, msg);
    }
    dpc_buf_free(&diags);
    int k = m->nspecs;
    if (k == m->maxspecs) { /* evict the least recently run */
        k = 0;
        for (int j = 1; j < m->nspecs; j++)
            if (m->specs[j].used < m->specs[k].used)
                k = j;
        if (k == m->cur) {
            m->unit = m->gunit, m->sig = m->gsig, m->be = NULL, m->ndev = 0, m->cur = -1;
        }
        spec_free(&m->specs[k]);
        m->spec_evictions++;
    } else
        m->nspecs++;
    m->specs[k].unit = u;
    memcpy(m->specs[k].values, values, sizeof(int64_t) * (size_t)g->nrtdims);
    m->spec_compiles++;
    *out = k;
    return DPC_OK;
}

static dpc_status check_inputs(const dpc_model *m, const dpc_tensor *const *in, int n, dpc_err *e);

dpc_status dpc_model_select(dpc_model *m, const dpc_tensor *const *in, int n, dpc_err *e) {
    if (!m->gunit)
        return DPC_OK;
    int64_t values[DPC_MAX_RTDIMS];
    int k;
    dpc_status s = check_inputs(m, in, n, e);
    if (s == DPC_OK)
        s = rt_values(m, in, n, values, e);
    if (s == DPC_OK)
        s = spec_find(m, values, &k, e);
    if (s != DPC_OK)
        return s;
    if (m->cur >= 0 && m->cur != k) { /* the current one's state goes back to its slot */
        dpc_spec *old = &m->specs[m->cur];
        old->be = m->be, old->be_prec = m->be_prec, old->ndev = m->ndev;
        memcpy(old->rep, m->rep, sizeof m->rep);
    }
    dpc_spec *sp = &m->specs[k];
    m->cur = k;
    sp->used = ++m->clock;
    m->unit = sp->unit;
    m->sig = dpc_unit_signature(sp->unit);
    m->be = sp->be, m->be_prec = sp->be_prec, m->ndev = sp->ndev;
    memcpy(m->rep, sp->rep, sizeof m->rep);
    return DPC_OK;
}

/* The current specialisation's backend and replicas, made for the devices
 * asked for (the CPU by default) at its first run. */
static dpc_status spec_backend(dpc_model *m, dpc_err *e) {
    dpc_status s = DPC_OK;
    dpc_spec *sp = &m->specs[m->cur];
    if (!m->be || m->ndev == 0) {
        dpc_device cpu = {DPC_DEV_CPU, 0};
        dpc_device devs[DPC_MAX_DEVICES];
        int nd = m->nwant ? m->nwant : 1;
        memcpy(devs, m->nwant ? m->want : &cpu, sizeof *devs * (size_t)nd);
        dpc_kcache_note *prev = dpc_kcache_note_push(&m->kcache);
        s = set_devices(m, devs, nd, e);
        dpc_kcache_note_pop(prev);
        sp->be = m->be, sp->be_prec = m->be_prec, sp->ndev = m->ndev;
        memcpy(sp->rep, m->rep, sizeof m->rep);
    }
    return s;
}

dpc_status dpc_model_faults_from_env(dpc_model *m, dpc_err *e) {
    long r = -1, k = -1;
    bool rset, kset;
    int nk = dpc_unit_nkernels(m->unit);
    dpc_status s = dpc_env_long("DPC_FAULT_REPLICA", 0, DPC_MAX_DEVICES - 1, &r, &rset, e);
    if (s == DPC_OK)
        s = dpc_env_long("DPC_FAULT_KERNEL", 0, nk > 0 ? nk - 1 : 0, &k, &kset, e);
    if (s != DPC_OK)
        return s;
    if (rset != kset) /* one alone would silently inject nothing */
        return dpc_errf(e, DPC_EUSAGE, "environment variable %s is set but %s is not: fault injection needs both",
                        rset ? "DPC_FAULT_REPLICA" : "DPC_FAULT_KERNEL", rset ? "DPC_FAULT_KERNEL" : "DPC_FAULT_REPLICA");
    m->fail_replica = (int)r;
    m->fail_kernel = (int)k;
    return DPC_OK;
}

typedef struct run_ctx {
    dpc_model *m;
    float scalars[DPC_MAX_SCALARS]; /* irbuild.c allows no more */
} run_ctx;

static dpc_status out_shape(void *ctx, int output, int64_t rows, dpc_tensor *spec, dpc_err *e) {
    run_ctx *rc = ctx;
    const dpc_sig_tensor *o = &rc->m->sig->outputs[output];
    spec->dtype = DPC_F32;
    spec->rank = o->rank;
    for (int i = 0; i < o->rank; i++)
        spec->shape[i] = o->dim[i].batch ? o->dim[i].k * (rows < 0 ? 0 : rows) : o->dim[i].k;
    (void)e;
    return DPC_OK;
}

static dpc_run_args run_args(const run_ctx *rc, int r, const dpc_replica_io *io) {
    const dpc_model *m = rc->m;
    return (dpc_run_args){.N = io->rows < 0 ? 0 : io->rows, .inputs = io->inputs, .scalars = rc->scalars,
                          .outputs = io->outputs, .fail_at = r == m->fail_replica ? m->fail_kernel : -1};
}

/* CPU replicas run here, each on its pool thread. GPU replicas are only
 * launched here, all from the calling thread, and finished in replica_sync:
 * no thread per device. */
static dpc_status replica(void *ctx, int r, const dpc_device *dev, dpc_replica_io *io, dpc_err *e) {
    run_ctx *rc = ctx;
    dpc_model *m = rc->m;
    dpc_run_args a = run_args(rc, r, io);
    if (dev->kind == DPC_DEV_CUDA && m->be->launch)
        return m->be->launch(m->be, m->rep[r], &a, e);
    return m->be->run(m->be, m->rep[r], &a, e);
}

static dpc_status replica_sync(void *ctx, int r, const dpc_device *dev, dpc_replica_io *io, dpc_err *e) {
    run_ctx *rc = ctx;
    dpc_model *m = rc->m;
    dpc_run_args a = run_args(rc, r, io);
    (void)dev;
    return m->be->sync(m->be, m->rep[r], &a, e);
}

static dpc_status check_inputs(const dpc_model *m, const dpc_tensor *const *in, int n, dpc_err *e) {
    const dpc_signature *g = dpc_model_gsig(m);
    if (n != g->ninputs)
        return dpc_errf(e, DPC_EUSER, "%s takes %d tensor input%s, got %d", g->model_name, g->ninputs,
                        g->ninputs == 1 ? "" : "s", n);
    for (int i = 0; i < n; i++) {
        const dpc_sig_tensor *p = &g->inputs[i];
        const dpc_tensor *t = in[i];
        dpc_dtype want = p->dtype == DPC_I64 ? DPC_I64 : DPC_F32;
        if (t->dtype != want)
            return dpc_errf(e, DPC_EUSER, "input '%s' must be %s, got %s", p->name, dpc_dtype_name(want),
                            dpc_dtype_name(t->dtype));
        bool ok = t->rank == p->rank;
        /* dim 0 is the batch, any size; an input without it has every dim fixed */
        for (int k = dpc_sig_input_whole(p) ? 0 : 1; ok && k < t->rank; k++)
            ok = t->shape[k] == p->dim[k].k || (m->gunit && p->dim[k].rt); /* a run-time dim: any size */
        if (!ok) {
            char got[256];
            dpc_shape_str(t->rank, t->shape, got, sizeof got);
            return dpc_errf(e, DPC_EUSER, "input '%s' must have shape %s, got %s", p->name, p->shape, got);
        }
    }
    return DPC_OK;
}

dpc_status dpc_model_widen_inputs(const dpc_model *m, const dpc_tensor *const *in, int n, dpc_tensor **wide,
                                  dpc_err *e) {
    for (int i = 0; i < n; i++)
        wide[i] = NULL;
    for (int i = 0; i < n && i < m->sig->ninputs; i++)
        if (m->sig->inputs[i].dtype == DPC_I64 && in[i]->dtype == DPC_I32) {
            dpc_status s = dpc_tensor_convert(in[i], DPC_I64, &wide[i], e);
            if (s != DPC_OK)
                return s;
        }
    return DPC_OK;
}

/* Batch 0 (inputs checked: the batch is dim 0 of each): as in PyTorch every
 * output with the batch dim is empty, so there is nothing to compute. An
 * output without it (a reduction over the batch) would be the reduction of
 * nothing: 0 for sum but nan for mean and an error for amax in PyTorch;
 * refused rather than answered with zeros. */
static dpc_status check_empty_batch(const dpc_model *m, const dpc_tensor *const *in, int n, dpc_err *e) {
    if (n == 0 || in[0]->rank == 0 || in[0]->shape[0] != 0)
        return DPC_OK;
    const dpc_signature *g = m->sig;
    for (int j = 0; j < g->noutputs; j++) {
        const dpc_sig_tensor *o = &g->outputs[j];
        bool batched = false;
        for (int d = 0; d < o->rank; d++)
            batched = batched || o->dim[d].batch;
        if (!batched)
            return dpc_errf(e, DPC_EUSER,
                            "batch 0: output %d of %s (%s:%d) has no batch dim %s, so it is not empty; a "
                            "reduction over an empty batch is not computed (give at least one row)",
                            j + 1, g->model_name, o->file ? o->file : "?", o->line, g->batch_name);
    }
    return DPC_OK;
}

dpc_status dpc_model_run(dpc_model *m, const dpc_tensor *const *inputs, int ninputs, const double *scalars,
                         dpc_tensor **outputs, dpc_err *e) {
    dpc_status s = check_inputs(m, inputs, ninputs, e);
    if (s == DPC_OK)
        s = dpc_model_select(m, inputs, ninputs, e);
    if (s == DPC_OK && m->gunit)
        s = spec_backend(m, e);
    if (s == DPC_OK)
        s = check_empty_batch(m, inputs, ninputs, e);
    if (s != DPC_OK)
        return s;
    if (m->ndev == 0) {
        dpc_device cpu = {DPC_DEV_CPU, 0};
        if ((s = dpc_model_set_devices(m, &cpu, 1, e)) != DPC_OK)
            return s;
    }
    const dpc_signature *g = m->sig;
    run_ctx rc = {.m = m};
    for (int i = 0; i < g->nscalars; i++)
        rc.scalars[i] = (float)scalars[i];
    const char *names[DPC_MAX_IO];
    bool whole[DPC_MAX_IO];
    for (int i = 0; i < g->ninputs; i++) {
        names[i] = g->inputs[i].name;
        whole[i] = dpc_sig_input_whole(&g->inputs[i]);
    }
    dpc_dp_opts opts = {.input_names = names, .out_shape = out_shape, .whole = whole};
    if (m->be->launch && m->be->sync) {
        opts.async_kinds = 1u << DPC_DEV_CUDA;
        opts.sync = replica_sync;
    }
    return dpc_dp_forward_ex(m->pool, m->devs, m->ndev, replica, &rc, inputs, ninputs, scalars, g->nscalars,
                             g->noutputs, outputs, &opts, &m->last, e);
}

void dpc_model_free(dpc_model *m) {
    if (!m)
        return;
    if (m->gunit) { /* the current backend is its specialisation's */
        if (m->cur >= 0) {
            dpc_spec *sp = &m->specs[m->cur];
            sp->be = m->be, sp->ndev = m->ndev;
            memcpy(sp->rep, m->rep, sizeof m->rep);
        }
        for (int k = 0; k < m->nspecs; k++)
            spec_free(&m->specs[k]);
        m->be = NULL;
        m->ndev = 0;
        m->unit = m->gunit;
        m->sig = m->gsig;
    }
    if (m->be) {
        for (int i = 0; i < m->ndev; i++)
            m->be->replica_free(m->be, m->rep[i]);
        m->be->destroy(m->be);
    }
    if (m->pool)
        dpc_pool_destroy(m->pool);
    if (m->params && m->sig)
        for (int i = 0; i < dpc_model_gsig(m)->nparams; i++)
            free(m->params[i]);
    free(m->params);
    free(m->specs);
    dpc_cu_images_free(m->images);
    dpc_unit_free(m->unit);
    free(m);
}

dpc_status dpc_model_input_new(const dpc_model *m, int i, int64_t n, const int64_t *rt, dpc_tensor **out,
                               dpc_err *e) {
    const dpc_sig_tensor *p = &dpc_model_gsig(m)->inputs[i];
    int64_t shape[DPC_MAX_RANK];
    for (int d = 0; d < p->rank; d++)
        shape[d] = p->dim[d].batch ? p->dim[d].k * n : rt && p->dim[d].rt ? rt[p->dim[d].rt - 1] : p->dim[d].k;
    return dpc_tensor_new(p->dtype == DPC_I64 ? DPC_I64 : DPC_F32, p->rank, shape, out, e);
}

int64_t dpc_model_input_limit(const dpc_model *m, int i) {
    /* an unbound unit has no graph: the limit of the current specialisation */
    return m->gunit && m->cur < 0 ? 0 : m->sig->inputs[i].limit;
}
