/* api.c - libdpc's public API (dpc.h) over the runtime: artifacts
 * (artifact.h), models (model.h), tensors and .npy files.
 *
 * A dpc_program holds the verified artifact, a model compiled from its
 * sources at load (`sig`: never changes, so the signature, the names it
 * hands out and the text calls need no lock and stay valid as long as the
 * program), and the model that runs (`m`, with weights bound). Binding
 * always works on a fresh model (compiled again from the artifact, which
 * takes milliseconds) that replaces `m` only when everything succeeded, so
 * a failed bind leaves the program as it was. Devices are recorded and
 * applied once weights are bound (the backend that runs replicas exists
 * only from then on). */
#include "artifact.h"
#include "hostcc.h"
#include "npy.h"

#include "dpc.h"
#include "api_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dpc.h repeats these for users; inside the library they come from base.h
 * and tensor.h. They must agree. */
_Static_assert(DPC_OK == 0 && DPC_EUSER == 1 && DPC_EUSAGE == 2 && DPC_ENOMEM == 3 && DPC_EIO == 4 &&
                   DPC_EDEVICE == 5 && DPC_EINTERNAL == 6 && DPC_EBUSY == 7,
               "dpc.h and base.h disagree on dpc_status");
_Static_assert(DPC_F32 == 0 && DPC_F64 == 1 && DPC_F16 == 2 && DPC_BF16 == 3 && DPC_I64 == 4 && DPC_I32 == 5 &&
                   DPC_I8 == 6 && DPC_U8 == 7 && DPC_BOOL == 8 && DPC_I16 == 9 && DPC_NUM_DTYPES == 10,
               "dpc.h and tensor.h disagree on dpc_dtype");
_Static_assert(DPC_MAX_RANK == 8, "dpc.h and tensor.h disagree on DPC_MAX_RANK");

#define MAX_SCALARS DPC_MAX_SCALARS /* no forward has more (irbuild.c) */
#define MAX_INPUTS DPC_MAX_IO

struct dpc_program {
    pthread_mutex_t lock;
    dpc_artifact *art;
    dpc_model *sig; /* compiled from art at load; read-only afterwards */
    dpc_model *m;   /* the model that runs, weights bound; NULL before the first bind */
    bool bound;
    bool kcache_told; /* the model's kernel cache refusal is in a warning already */
    dpc_device devs[DPC_MAX_DEVICES];
    int ndev;
    bool devs_pending; /* devs (and prec) not applied to m yet */
    kprec prec;        /* float storage on CUDA devices */
    int fault_replica, fault_kernel; /* dpc_program_set_fault; -1: none */
    /* dpc_program_outputs_any: worked out at its first call (any_n >= 0) */
    int any_n;
    dpc_status any_status;
    struct any_out {
        dpc_dtype dtype;
        int rank;
        int64_t shape[DPC_MAX_RANK];
    } any[DPC_MAX_IO];
    char err[DPC_ERR_MSG];
    char warn[DPC_ERR_MSG];
};

static _Thread_local char tl_err[DPC_ERR_MSG];

/* Records a failure (thread and handle) and returns its status. */
static dpc_status fail(dpc_program *p, dpc_status s, const char *msg) {
    snprintf(tl_err, sizeof tl_err, "%s", msg);
    if (p)
        snprintf(p->err, sizeof p->err, "%s", msg);
    return s;
}

static dpc_status failf(dpc_program *p, dpc_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static dpc_status failf(dpc_program *p, dpc_status s, const char *fmt, ...) {
    char msg[DPC_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(p, s, msg);
}

static dpc_status done(dpc_program *p, dpc_status s, const dpc_err *e) {
    return s == DPC_OK ? DPC_OK : fail(p, s, e->msg);
}

/* Calls on a program: lock it and clear its last error. The lock is not
 * part of the program's observable state, hence the casts on const. */
static dpc_program *enter(const dpc_program *cp) {
    dpc_program *p = (dpc_program *)cp;
    pthread_mutex_lock(&p->lock);
    p->err[0] = 0;
    return p;
}
static dpc_status leave(dpc_program *p, dpc_status s) {
    pthread_mutex_unlock(&p->lock);
    return s;
}

/* ------------------------------------------------------------ library */

const char *dpc_version(void) { return DPC_VERSION; }
int dpc_artifact_format(void) { return DPC_ARTIFACT_FORMAT; }
const char *dpc_last_error(void) { return tl_err; }
void dpc_set_last_error(const char *msg) { snprintf(tl_err, sizeof tl_err, "%s", msg ? msg : ""); }

void dpc_abort_compilers(void) { dpc_hostcc_abort(); }

/* ------------------------------------------------------------ programs */

static dpc_status load(dpc_artifact *a, dpc_program **out) {
    dpc_err e;
    dpc_program *p = dpc_calloc(1, sizeof *p);
    if (!p) {
        dpc_artifact_free(a);
        return fail(NULL, DPC_ENOMEM, "out of memory");
    }
    dpc_status s = dpc_artifact_instantiate(a, &p->sig, &e);
    if (s != DPC_OK) {
        dpc_artifact_free(a);
        dpc_free(p);
        return done(NULL, s, &e);
    }
    pthread_mutex_init(&p->lock, NULL);
    p->art = a;
    p->devs[0] = (dpc_device){DPC_DEV_CPU, 0};
    p->ndev = 1;
    p->devs_pending = true;
    p->fault_replica = p->fault_kernel = -1;
    p->any_n = -1;
    *out = p;
    return DPC_OK;
}

dpc_status dpc_program_load(const char *path, dpc_program **out) {
    if (!out)
        return fail(NULL, DPC_EUSAGE, "dpc_program_load: out is NULL");
    *out = NULL;
    if (!path)
        return fail(NULL, DPC_EUSAGE, "dpc_program_load: path is NULL");
    dpc_err e;
    dpc_artifact *a;
    dpc_status s = dpc_artifact_read(path, &a, &e);
    return s == DPC_OK ? load(a, out) : done(NULL, s, &e);
}

dpc_status dpc_program_load_memory(const void *data, size_t len, const char *name, dpc_program **out) {
    if (!out)
        return fail(NULL, DPC_EUSAGE, "dpc_program_load_memory: out is NULL");
    *out = NULL;
    if (!data && len)
        return fail(NULL, DPC_EUSAGE, "dpc_program_load_memory: data is NULL");
    dpc_err e;
    dpc_artifact *a;
    dpc_status s = dpc_artifact_parse(data ? data : "", len, name ? name : "<memory>", &a, &e);
    return s == DPC_OK ? load(a, out) : done(NULL, s, &e);
}

void dpc_program_free(dpc_program *p) {
    if (!p)
        return;
    dpc_model_free(p->m);
    dpc_model_free(p->sig);
    dpc_artifact_free(p->art);
    pthread_mutex_destroy(&p->lock);
    dpc_free(p);
}

const char *dpc_program_error(const dpc_program *p) { return p ? p->err : "no program (NULL)"; }
const char *dpc_program_warning(const dpc_program *p) { return p ? p->warn : ""; }

int dpc_program_has_embedded_weights(const dpc_program *p) { return p && dpc_artifact_has_weights(p->art); }

/* Binds st into a fresh model that replaces p->m on success. */
static dpc_status bind(dpc_program *p, const dpc_safetensors *st, dpc_err *e) {
    dpc_model *m;
    dpc_status s = dpc_artifact_instantiate(p->art, &m, e);
    if (s != DPC_OK)
        return s;
    dpc_buf warn;
    dpc_buf_init(&warn);
    s = dpc_model_bind(m, st, &warn, e);
    if (s == DPC_OK) {
        snprintf(p->warn, sizeof p->warn, "%s", warn.data ? warn.data : "");
        dpc_model_free(p->m);
        p->m = m;
        p->bound = true;
        p->devs_pending = true;
    } else {
        dpc_model_free(m);
    }
    dpc_buf_free(&warn);
    return s;
}

static dpc_status bind_image(dpc_program *p, const void *data, size_t len, const char *name) {
    dpc_err e;
    dpc_safetensors *st;
    dpc_status s = dpc_st_parse(data, len, &st, &e);
    if (s != DPC_OK) {
        dpc_err_prefix(&e, "%s: ", name);
        return done(p, s, &e);
    }
    p->warn[0] = 0;
    s = bind(p, st, &e);
    dpc_st_free(st);
    return done(p, s, &e);
}

dpc_status dpc_program_bind_weights(dpc_program *cp, const char *path) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_bind_weights: program is NULL");
    dpc_program *p = enter(cp);
    if (!path)
        return leave(p, fail(p, DPC_EUSAGE, "dpc_program_bind_weights: path is NULL"));
    dpc_err e;
    char *data;
    size_t len;
    dpc_status s = dpc_read_file(path, SIZE_MAX / 2, &data, &len, &e);
    if (s != DPC_OK)
        return leave(p, done(p, s, &e));
    s = bind_image(p, data, len, path);
    dpc_free(data);
    return leave(p, s);
}

dpc_status dpc_program_bind_weights_memory(dpc_program *cp, const void *data, size_t len) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_bind_weights_memory: program is NULL");
    dpc_program *p = enter(cp);
    if (!data && len)
        return leave(p, fail(p, DPC_EUSAGE, "dpc_program_bind_weights_memory: data is NULL"));
    return leave(p, bind_image(p, data ? data : "", len, "<memory>"));
}

dpc_status dpc_program_set_devices(dpc_program *cp, const char *devices) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_set_devices: program is NULL");
    dpc_program *p = enter(cp);
    if (!devices)
        return leave(p, fail(p, DPC_EUSAGE, "dpc_program_set_devices: devices is NULL"));
    dpc_err e;
    dpc_device devs[DPC_MAX_DEVICES];
    int n;
    dpc_status s = dpc_parse_devices(devices, devs, DPC_MAX_DEVICES, &n, &e);
    if (s != DPC_OK)
        return leave(p, done(p, s, &e));
    if (p->bound && (s = dpc_model_set_devices(p->m, devs, n, &e)) != DPC_OK) {
        p->devs_pending = true; /* the old list is gone: apply it again before the next run */
        return leave(p, done(p, s, &e));
    }
    memcpy(p->devs, devs, sizeof *devs * (size_t)n);
    p->ndev = n;
    p->devs_pending = !p->bound;
    return leave(p, DPC_OK);
}

dpc_status dpc_program_set_dtype(dpc_program *cp, const char *dtype) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_set_dtype: program is NULL");
    dpc_program *p = enter(cp);
    kprec prec;
    if (!kprec_parse(dtype, &prec))
        return leave(p, failf(p, DPC_EUSAGE, "dpc_program_set_dtype: unknown dtype '%.40s' (f32, bf16 or f16)",
                              dtype ? dtype : "(null)"));
    if (prec != p->prec) {
        p->prec = prec;
        p->devs_pending = true; /* checked against the devices and applied at the next run */
    }
    return leave(p, DPC_OK);
}

/* ------------------------------------------------- forward's signature */

/* The signature of the inputs, scalars and state_dict; outputs are the
 * current specialisation's for a model with run-time dims. */
static const dpc_signature *signature(const dpc_program *p) { return dpc_model_gsig(p->sig); }
/* The unit whose graph, outputs and sources the program shows: the
 * artifact's, or for a model with run-time dims that of the latest run. */
static const dpc_unit *shown_unit(const dpc_program *p) {
    return p->m && p->m->gunit && p->m->cur >= 0 ? p->m->unit : p->sig->unit;
}

const char *dpc_program_name(const dpc_program *p) { return p ? signature(p)->model_name : ""; }
int dpc_program_num_inputs(const dpc_program *p) { return p ? signature(p)->ninputs : 0; }
int dpc_program_num_scalars(const dpc_program *p) { return p ? signature(p)->nscalars : 0; }
int dpc_program_num_outputs(const dpc_program *p) { return p ? dpc_unit_signature(shown_unit(p))->noutputs : 0; }

const char *dpc_program_input_rtdim(const dpc_program *p, int i, int d) {
    if (!p || i < 0 || i >= signature(p)->ninputs || d < 0 || d >= signature(p)->inputs[i].rank)
        return NULL;
    int r = signature(p)->inputs[i].dim[d].rt;
    return r ? signature(p)->rtdims[r - 1].name : NULL;
}

static void tensor_shape(const dpc_sig_tensor *t, int *rank, int64_t *shape) {
    if (rank)
        *rank = t->rank;
    for (int i = 0; shape && i < t->rank; i++)
        shape[i] = t->dim[i].batch ? -t->dim[i].k : t->dim[i].k;
}

dpc_status dpc_program_input(const dpc_program *cp, int i, const char **name, dpc_dtype *dtype, int *rank,
                             int64_t *shape) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_input: program is NULL");
    dpc_program *p = enter(cp);
    const dpc_signature *g = signature(p);
    if (i < 0 || i >= g->ninputs)
        return leave(p, failf(p, DPC_EUSAGE, "input %d out of range: %s has %d", i, g->model_name, g->ninputs));
    const dpc_sig_tensor *t = &g->inputs[i]; /* a run-time dim is 0 (dpc_program_input_rtdim) */
    if (name)
        *name = t->name;
    if (dtype)
        *dtype = t->dtype;
    tensor_shape(t, rank, shape);
    return leave(p, DPC_OK);
}

dpc_status dpc_program_output(const dpc_program *cp, int i, dpc_dtype *dtype, int *rank, int64_t *shape) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_output: program is NULL");
    dpc_program *p = enter(cp);
    const dpc_signature *g = dpc_unit_signature(shown_unit(p));
    if (i < 0 || i >= g->noutputs)
        return leave(p, failf(p, DPC_EUSAGE, "output %d out of range: %s returns %d", i, g->model_name,
                              g->noutputs));
    const dpc_sig_tensor *t = &g->outputs[i];
    if (dtype)
        *dtype = t->dtype;
    tensor_shape(t, rank, shape);
    return leave(p, DPC_OK);
}

/* The outputs at every value of the run-time dims: forward's graph built
 * (DPC_STAGE_IR: shapes, no kernels) with all run-time dims at a and then
 * at b; a dim that differs between the two is a run-time dim's (0). Pairs
 * are tried until one builds at both values (a model may constrain its
 * dims, e.g. to a table's rows or to a multiple of the heads). */
static dpc_status outputs_any(dpc_program *p) {
    const dpc_signature *g = signature(p);
    if (!p->sig->gunit) {
        const dpc_signature *o = dpc_unit_signature(p->sig->unit);
        p->any_n = o->noutputs;
        for (int i = 0; i < o->noutputs && i < DPC_MAX_IO; i++) {
            p->any[i].dtype = o->outputs[i].dtype;
            tensor_shape(&o->outputs[i], &p->any[i].rank, p->any[i].shape);
        }
        return p->any_status = DPC_OK;
    }
    static const int64_t pairs[][2] = {{7, 11}, {8, 16}, {2, 3}, {16, 32}, {64, 128}, {1, 2}};
    dpc_err e;
    dpc_status s = DPC_EUSER;
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        dpc_unit *u[2] = {NULL, NULL};
        for (int j = 0; j < 2; j++) {
            int64_t values[DPC_MAX_RTDIMS];
            for (int r = 0; r < g->nrtdims; r++)
                values[r] = pairs[k][j];
            s = dpc_unit_specialise(p->sig->gunit, values, DPC_STAGE_IR, &u[j], NULL, &e);
            if (s != DPC_OK)
                break;
        }
        const dpc_signature *a = u[0] ? dpc_unit_signature(u[0]) : NULL;
        const dpc_signature *b = u[1] ? dpc_unit_signature(u[1]) : NULL;
        bool same = s == DPC_OK && a->noutputs == b->noutputs && a->noutputs <= DPC_MAX_IO;
        for (int i = 0; same && i < a->noutputs; i++)
            same = a->outputs[i].rank == b->outputs[i].rank && a->outputs[i].dtype == b->outputs[i].dtype;
        if (same) {
            p->any_n = a->noutputs;
            for (int i = 0; i < a->noutputs; i++) {
                struct any_out *o = &p->any[i];
                int64_t sb[DPC_MAX_RANK];
                o->dtype = a->outputs[i].dtype;
                tensor_shape(&a->outputs[i], &o->rank, o->shape);
                tensor_shape(&b->outputs[i], NULL, sb);
                for (int d = 0; d < o->rank; d++)
                    if (o->shape[d] != sb[d])
                        o->shape[d] = 0;
            }
        }
        dpc_unit_free(u[0]);
        dpc_unit_free(u[1]);
        if (s == DPC_ENOMEM)
            return p->any_status = failf(p, s, "out of memory");
        if (same)
            return p->any_status = DPC_OK;
    }
    p->any_n = 0;
    return p->any_status = failf(p, DPC_EUSER, "%s: the outputs of forward could not be worked out without a run",
                                 g->model_name);
}

dpc_status dpc_program_outputs_any(const dpc_program *cp, int *noutputs) {
    if (!cp || !noutputs)
        return fail(NULL, DPC_EUSAGE, "dpc_program_outputs_any: program or noutputs is NULL");
    dpc_program *p = enter(cp);
    dpc_status s = p->any_n >= 0 ? p->any_status : outputs_any(p);
    if (s != DPC_OK && !p->err[0])
        failf(p, s, "%s: the outputs of forward could not be worked out without a run", signature(p)->model_name);
    *noutputs = s == DPC_OK ? p->any_n : 0;
    return leave(p, s);
}

dpc_status dpc_program_output_any(const dpc_program *cp, int i, dpc_dtype *dtype, int *rank, int64_t *shape) {
    int n;
    dpc_status s = dpc_program_outputs_any(cp, &n);
    if (s != DPC_OK)
        return s;
    dpc_program *p = enter(cp);
    if (i < 0 || i >= n)
        return leave(p, failf(p, DPC_EUSAGE, "output %d out of range: %s returns %d", i, signature(p)->model_name, n));
    if (dtype)
        *dtype = p->any[i].dtype;
    if (rank)
        *rank = p->any[i].rank;
    for (int d = 0; shape && d < p->any[i].rank; d++)
        shape[d] = p->any[i].shape[d];
    return leave(p, DPC_OK);
}

dpc_status dpc_program_scalar(const dpc_program *cp, int i, const char **name, dpc_scalar_type *type,
                              int *has_default, double *default_value) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_scalar: program is NULL");
    dpc_program *p = enter(cp);
    const dpc_signature *g = signature(p);
    if (i < 0 || i >= g->nscalars)
        return leave(p, failf(p, DPC_EUSAGE, "scalar %d out of range: %s has %d", i, g->model_name, g->nscalars));
    const dpc_sig_scalar *sc = &g->scalars[i];
    if (name)
        *name = sc->name;
    if (type)
        *type = (dpc_scalar_type)sc->type;
    if (has_default)
        *has_default = sc->has_default;
    if (default_value)
        *default_value = sc->def;
    return leave(p, DPC_OK);
}

/* ----------------------------------------------------------------- run */

static dpc_status scalars_from_kw(dpc_program *p, const char *const *names, const double *values, int nkw,
                                  double *out) {
    if (nkw < 0 || (nkw > 0 && (!names || !values)))
        return fail(p, DPC_EUSAGE, "dpc_program_run: keyword names or values missing");
    dpc_err e;
    return done(p, dpc_sig_scalars(signature(p), names, values, nkw, out, &e), &e);
}

/* Weights bound (the embedded ones by default) and devices applied. */
static dpc_status ready(dpc_program *p) {
    dpc_err e;
    dpc_status s;
    if (!p->bound) {
        /* a model without parameters needs none: it binds the empty set */
        if (!dpc_artifact_has_weights(p->art) && signature(p)->nparams > 0)
            return failf(p, DPC_EUSER,
                         "%s: no weights: the artifact embeds none; call dpc_program_bind_weights first",
                         p->art->name);
        if ((s = bind(p, p->art->st, &e)) != DPC_OK)
            return done(p, s, &e);
    }
    if (p->devs_pending) {
        dpc_model_set_precision(p->m, p->prec);
        if ((s = dpc_model_set_devices(p->m, p->devs, p->ndev, &e)) != DPC_OK)
            return done(p, s, &e);
        p->devs_pending = false;
    }
    return DPC_OK;
}

dpc_status dpc_program_run(dpc_program *cp, const dpc_tensor *const *inputs, int ninputs,
                           const char *const *kw_names, const double *kw_values, int nkw, dpc_tensor **outputs,
                           int noutputs) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_run: program is NULL");
    dpc_program *p = enter(cp);
    const dpc_signature *g = signature(p);
    /* run-time dims: the outputs are known once the inputs chose the specialisation */
    if (!g->unbound && (noutputs != g->noutputs || (noutputs && !outputs)))
        return leave(p, failf(p, DPC_EUSAGE, "%s returns %d tensor%s, dpc_program_run was given %d output slot%s",
                              g->model_name, g->noutputs, g->noutputs == 1 ? "" : "s", noutputs,
                              noutputs == 1 ? "" : "s"));
    for (int i = 0; i < noutputs; i++)
        outputs[i] = NULL;
    if (ninputs != g->ninputs || (ninputs && !inputs))
        return leave(p, failf(p, DPC_EUSAGE, "forward of %s takes %d tensor input%s, got %d", g->model_name,
                              g->ninputs, g->ninputs == 1 ? "" : "s", ninputs));
    for (int i = 0; i < ninputs; i++)
        if (!inputs[i])
            return leave(p, failf(p, DPC_EUSAGE, "input %d is NULL", i));
    double scalars[MAX_SCALARS];
    dpc_status s = scalars_from_kw(p, kw_names, kw_values, nkw, scalars);
    if (s != DPC_OK || (s = ready(p)) != DPC_OK)
        return leave(p, s);
    /* int32 indices are widened, as `dpc run` does */
    dpc_tensor *wide[MAX_INPUTS] = {0};
    const dpc_tensor *in[MAX_INPUTS];
    if (ninputs > MAX_INPUTS)
        return leave(p, failf(p, DPC_EUSER, "too many inputs (%d)", ninputs));
    dpc_err e;
    s = dpc_model_widen_inputs(p->m, inputs, ninputs, wide, &e);
    for (int i = 0; i < ninputs; i++)
        in[i] = wide[i] ? wide[i] : inputs[i];
    if (s == DPC_OK && g->unbound && (s = dpc_model_select(p->m, in, ninputs, &e)) == DPC_OK &&
        (noutputs != p->m->sig->noutputs || (noutputs && !outputs))) {
        for (int i = 0; i < ninputs; i++)
            dpc_tensor_free(wide[i]);
        return leave(p, failf(p, DPC_EUSAGE, "%s returns %d tensor%s, dpc_program_run was given %d output slot%s",
                              g->model_name, p->m->sig->noutputs, p->m->sig->noutputs == 1 ? "" : "s", noutputs,
                              noutputs == 1 ? "" : "s"));
    }
    if (s == DPC_OK) {
        p->m->fail_replica = p->fault_replica;
        p->m->fail_kernel = p->fault_kernel;
        s = dpc_model_run(p->m, in, ninputs, scalars, outputs, &e);
    }
    for (int i = 0; i < ninputs; i++)
        dpc_tensor_free(wide[i]);
    if (s != DPC_OK) {
        for (int i = 0; i < noutputs; i++) {
            dpc_tensor_free(outputs[i]);
            outputs[i] = NULL;
        }
        return leave(p, done(p, s, &e));
    }
    p->warn[0] = 0;
    for (int w = 0; w < p->m->last.nwarnings && w < DPC_DP_MAX_WARNINGS; w++) {
        size_t l = strlen(p->warn);
        snprintf(p->warn + l, sizeof p->warn - l, "%s%s", l ? "; " : "", p->m->last.warnings[w]);
    }
    /* this program's kernel cache refusal (its own note, kcache.h), once */
    if (p->m->kcache.set && !p->kcache_told) {
        size_t l = strlen(p->warn);
        snprintf(p->warn + l, sizeof p->warn - l, "%s%.400s; compiled kernels are not kept", l ? "; " : "",
                 p->m->kcache.msg);
        p->kcache_told = true;
    }
    return leave(p, DPC_OK);
}

void dpc_program_set_fault(dpc_program *cp, int replica, int kernel) {
    dpc_program *p = enter(cp);
    p->fault_replica = replica;
    p->fault_kernel = kernel;
    leave(p, DPC_OK);
}

/* ---------------------------------------------------------------- text */

static dpc_status put_text(dpc_program *p, dpc_buf *b, char *buf, size_t cap, size_t *len) {
    if (b->oom) {
        dpc_buf_free(b);
        return fail(p, DPC_ENOMEM, "out of memory");
    }
    const char *t = b->data ? b->data : "";
    if (len)
        *len = b->len;
    if (buf && cap) {
        size_t n = b->len < cap - 1 ? b->len : cap - 1;
        memcpy(buf, t, n);
        buf[n] = 0;
    }
    dpc_buf_free(b);
    return DPC_OK;
}

static dpc_status text_args(dpc_program *p, const char *fn, char *buf, size_t cap) {
    if (!buf && cap)
        return failf(p, DPC_EUSAGE, "%s: buf is NULL but cap is %zu", fn, cap);
    return DPC_OK;
}

dpc_status dpc_program_print(const dpc_program *cp, char *buf, size_t cap, size_t *len) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_print: program is NULL");
    dpc_program *p = enter(cp);
    dpc_status s = text_args(p, "dpc_program_print", buf, cap);
    if (s != DPC_OK)
        return leave(p, s);
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_unit_print(p->sig->unit, &b);
    return leave(p, put_text(p, &b, buf, cap, len));
}

dpc_status dpc_program_ir(const dpc_program *cp, int fused, char *buf, size_t cap, size_t *len) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_ir: program is NULL");
    dpc_program *p = enter(cp);
    dpc_status s = text_args(p, "dpc_program_ir", buf, cap);
    if (s != DPC_OK)
        return leave(p, s);
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_unit_ir(shown_unit(p), fused, &b);
    return leave(p, put_text(p, &b, buf, cap, len));
}

dpc_status dpc_program_source(const dpc_program *cp, const char *target, char *buf, size_t cap, size_t *len) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_source: program is NULL");
    dpc_program *p = enter(cp);
    dpc_status s = text_args(p, "dpc_program_source", buf, cap);
    if (s != DPC_OK)
        return leave(p, s);
    bool cuda = target && strcmp(target, "cuda") == 0;
    if (!cuda && !(target && strcmp(target, "cpu") == 0))
        return leave(p, failf(p, DPC_EUSAGE, "unknown target '%.40s' (cpu or cuda)", target ? target : "(null)"));
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_unit_source(shown_unit(p), cuda ? DPC_DIALECT_CUDA : DPC_DIALECT_C, KP_F32, &b);
    return leave(p, put_text(p, &b, buf, cap, len));
}

dpc_status dpc_program_describe(const dpc_program *cp, char *buf, size_t cap, size_t *len) {
    if (!cp)
        return fail(NULL, DPC_EUSAGE, "dpc_program_describe: program is NULL");
    dpc_program *p = enter(cp);
    dpc_status s = text_args(p, "dpc_program_describe", buf, cap);
    if (s != DPC_OK)
        return leave(p, s);
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_artifact_describe(p->art, p->sig, &b);
    return leave(p, put_text(p, &b, buf, cap, len));
}

/* ------------------------------------------------------------- tensors */

dpc_status dpc_tensor_create(dpc_dtype dtype, int rank, const int64_t *shape, const void *data, dpc_tensor **out) {
    if (!out)
        return fail(NULL, DPC_EUSAGE, "dpc_tensor_create: out is NULL");
    *out = NULL;
    if ((unsigned)dtype >= DPC_NUM_DTYPES)
        return failf(NULL, DPC_EUSAGE, "dpc_tensor_create: unknown dtype %d", (int)dtype);
    if (rank > 0 && !shape)
        return fail(NULL, DPC_EUSAGE, "dpc_tensor_create: shape is NULL");
    dpc_err e;
    dpc_tensor *t;
    dpc_status s = dpc_tensor_new(dtype, rank, shape, &t, &e);
    if (s != DPC_OK)
        return done(NULL, s, &e);
    if (data && t->nbytes)
        memcpy(t->data, data, t->nbytes);
    size_t bad;
    if (dtype == DPC_BOOL && t->nbytes && !dpc_bool_valid(t->data, t->nbytes, &bad)) {
        unsigned byte = ((const unsigned char *)t->data)[bad];
        dpc_tensor_free(t);
        return failf(NULL, DPC_EUSAGE, "dpc_tensor_create: bool data holds byte 0x%02x at element %zu (only 0 and 1 are valid)",
                     byte, bad);
    }
    *out = t;
    return DPC_OK;
}

dpc_status dpc_tensor_load_npy(const char *path, dpc_tensor **out) {
    if (!out || !path)
        return fail(NULL, DPC_EUSAGE, "dpc_tensor_load_npy: path or out is NULL");
    dpc_err e;
    dpc_status s = dpc_npy_read(path, out, &e);
    return done(NULL, s, &e);
}

dpc_status dpc_tensor_load_npy_memory(const void *data, size_t len, dpc_tensor **out) {
    if (!out || (!data && len))
        return fail(NULL, DPC_EUSAGE, "dpc_tensor_load_npy_memory: data or out is NULL");
    dpc_err e;
    dpc_status s = dpc_npy_parse(data ? data : "", len, out, &e);
    return done(NULL, s, &e);
}

dpc_status dpc_tensor_save_npy(const dpc_tensor *t, const char *path) {
    if (!t || !path)
        return fail(NULL, DPC_EUSAGE, "dpc_tensor_save_npy: tensor or path is NULL");
    dpc_err e;
    dpc_status s = dpc_npy_write(path, t, &e);
    return done(NULL, s, &e);
}

dpc_dtype dpc_tensor_dtype(const dpc_tensor *t) { return t->dtype; }
int dpc_tensor_rank(const dpc_tensor *t) { return t->rank; }
int64_t dpc_tensor_dim(const dpc_tensor *t, int i) { return i >= 0 && i < t->rank ? t->shape[i] : -1; }
size_t dpc_tensor_nbytes(const dpc_tensor *t) { return t->nbytes; }
void *dpc_tensor_data(dpc_tensor *t) { return t->data; }
