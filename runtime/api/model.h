/* model.h - a compiled model ready to run: front end + kernels + weights +
 * backend + device list. The CLI and libdpc both sit on this. */
#ifndef DPC_MODEL_H
#define DPC_MODEL_H

#include "backend.h"
#include "dataparallel.h"
#include "dpc_compile.h"
#include "kcache.h"
#include "safetensors.h"

/* One specialisation of a model with run-time dims (dpc_model.specs): the
 * unit compiled for these values, its backend and replicas. */
typedef struct dpc_spec {
    int64_t values[DPC_MAX_RTDIMS];
    dpc_unit *unit;
    dpc_backend *be;
    kprec be_prec;
    dpc_replica *rep[DPC_MAX_DEVICES];
    int ndev;
    uint64_t used; /* the LRU clock at its last run */
} dpc_spec;

/* The default bound of the specialisation cache (DPC_SPEC_CACHE). */
#define DPC_SPEC_CACHE_DEFAULT 16

typedef struct dpc_model {
    /* the compilation, owned; for a model with run-time dims (gunit set)
     * the unit of the latest specialisation run (owned by specs), gunit
     * before the first */
    dpc_unit *unit;
    const dpc_signature *sig;   /* forward's signature, the unit's */
    dpc_front *front;           /* the unit's front end, opaque: for tests (frontend.h); the runtime reads the unit */
    float **params;        /* per model.params index (f32), owned */
    dpc_backend *be;
    kprec prec, be_prec;   /* float storage asked for (dpc_model_set_precision), and the backend's */
    dpc_device devs[DPC_MAX_DEVICES];
    int ndev;
    dpc_replica *rep[DPC_MAX_DEVICES];
    dpc_pool *pool;
    int fail_replica, fail_kernel; /* fault injection, -1 none */
    dpc_dp_report last;
    struct dpc_cu_images *images; /* a verified .dpa's CUBIN/PTX (dpc_artifact_instantiate), owned; NULL none */
    dpc_kcache_note kcache;       /* a refused kernel cache directory, met by this model's compiles */
    /* Run-time dims (`ids: i64[N, S]`): the unbound unit (owned) and its
     * signature (the inputs with their run-time dims, the state_dict), and
     * the specialisations compiled from its sources, at most maxspecs
     * (DPC_SPEC_CACHE, default DPC_SPEC_CACHE_DEFAULT), the least recently
     * run evicted first. Every specialisation reads the same host weights
     * (params). devs/ndev above are then those of the current one; want
     * the device list asked for. NULL gunit: a model without run-time dims. */
    dpc_unit *gunit;
    const dpc_signature *gsig;
    dpc_spec *specs;
    int nspecs, maxspecs, cur;
    uint64_t clock;
    long spec_compiles, spec_evictions; /* counts, for tests */
    dpc_device want[DPC_MAX_DEVICES];
    int nwant;
} dpc_model;

/* The signature that holds the model's inputs and state_dict: gsig for a
 * model with run-time dims, else sig. */
static inline const dpc_signature *dpc_model_gsig(const dpc_model *m) { return m->gunit ? m->gsig : m->sig; }
/* Checks the inputs, then selects (compiling on first use) the
 * specialisation for their run-time dims and makes it current (m->unit,
 * m->sig; its backend is made at its first run); DPC_OK with
 * nothing to do for a model without run-time dims. Inputs that disagree on
 * a run-time dim are refused, naming both. dpc_model_run calls it; the CLI
 * to learn the outputs of a run before it. */
dpc_status dpc_model_select(dpc_model *m, const dpc_tensor *const *inputs, int ninputs, dpc_err *e);

/* Compiles path up to kernels; diagnostics rendered into diags. A model
 * with run-time dims is compiled per value when it runs. */
dpc_status dpc_model_compile(const char *path, dpc_model **out, dpc_buf *diags, dpc_err *e);
/* A model of a unit compiled to DPC_STAGE_FUSED, which it takes (freed
 * with the model, or here on failure). */
dpc_status dpc_model_from_unit(dpc_unit *u, dpc_model **out, dpc_err *e);
/* Matches a state_dict against the parameter table of sig: every parameter
 * and buffer present (also as "module.<key>"), with its shape and a float
 * dtype (integer buffers that forward ignores are exempt). picks[i]
 * receives the tensor of parameter i (NULL if absent and ignored). All
 * problems go in one message, each kind (missing, wrong, unexpected)
 * listing its first DPC_WEIGHTS_SHOWN and a count of the rest; on success
 * the unexpected keys, listed the same way, are appended to extra (may be
 * NULL). The one rule for weights: dpc run and the artifact's embedded
 * weights both use it. */
#define DPC_WEIGHTS_SHOWN 10
dpc_status dpc_weights_match(const dpc_signature *sig, const dpc_safetensors *st, const dpc_st_tensor **picks,
                             dpc_buf *extra, dpc_err *e);
/* Checks the weights (dpc_weights_match) and keeps f32 copies. Extra keys
 * are reported in warnings. */
dpc_status dpc_model_bind(dpc_model *m, const dpc_safetensors *st, dpc_buf *warnings, dpc_err *e);
dpc_status dpc_model_set_devices(dpc_model *m, const dpc_device *devs, int n, dpc_err *e);
/* Float storage on CUDA devices (--dtype): KP_F32 (the default), KP_BF16 or
 * KP_F16, arithmetic and GEMM accumulation in f32 either way. Takes effect
 * at the next dpc_model_set_devices; a CPU device list with 16-bit storage
 * is refused there, since the CPU backend computes in f32 only. */
void dpc_model_set_precision(dpc_model *m, kprec prec);
/* Test fault injection from the environment (docs/cli.md): with
 * DPC_FAULT_REPLICA=R and DPC_FAULT_KERNEL=K, kernel K of replica R fails.
 * Both or neither, each a valid index (dpc_env_long): otherwise an error. */
dpc_status dpc_model_faults_from_env(dpc_model *m, dpc_err *e);
/* int32 tensors given for i64 (index) inputs, widened: wide[i] is the
 * widened copy of in[i] (the caller frees it), or NULL where in[i] is used
 * as it is. The one widening, for dpc run and dpc_program_run. */
dpc_status dpc_model_widen_inputs(const dpc_model *m, const dpc_tensor *const *in, int n, dpc_tensor **wide,
                                  dpc_err *e);
/* Checks the inputs against forward's declaration and runs. scalars are in
 * forward order (defaults filled by dpc_model_scalar_defaults). */
dpc_status dpc_model_run(dpc_model *m, const dpc_tensor *const *inputs, int ninputs, const double *scalars,
                         dpc_tensor **outputs, dpc_err *e);
void dpc_model_free(dpc_model *m);

/* A new tensor for forward input i at batch n: its dtype (f32, or i64 for
 * indices) and shape with the batch dim times n and its run-time dims
 * rt[] (signature.rtdims order; NULL: their bound values); the data is
 * zero. */
dpc_status dpc_model_input_new(const dpc_model *m, int i, int64_t n, const int64_t *rt, dpc_tensor **out,
                               dpc_err *e);
/* For an index input i: the rows of the smallest embedding that reads it
 * (ids must stay below), or 0 when no embedding reads it. */
int64_t dpc_model_input_limit(const dpc_model *m, int i);

/* dpc init: PyTorch's default initialisation, seeded, as safetensors. */
dpc_status dpc_model_init_weights(const dpc_model *m, uint64_t seed, const char *path, dpc_err *e);
/* The same initial weights bound to m in memory, as dpc_model_bind would
 * bind them from that file (benchmarks and tests without a weights file). */
dpc_status dpc_model_bind_init(dpc_model *m, uint64_t seed, dpc_err *e);

#endif
