/* cmd_run.c - the verbs that run forward: `dpc run` (inputs from .npy
 * files, outputs to .npy, data-parallel over --devices; its MPI mode is
 * cli/cmd_run_mpi.c) and `dpc bench` (timed forwards on random inputs). */
#include "cli.h"
#include "backend_cuda.h"
#include "nccl_lib.h"
#include "import.h"
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --kw NAME=VALUE against forward's scalar parameters: each VALUE read as
 * its scalar's type, then the library's one rule (dpc_sig_scalars). */
static int parse_kw(const dpc_model *m, const cli_opts *o, double *scalars) {
    const dpc_signature *g = m->sig;
    char *names[DPC_MAX_SCALARS];
    double values[DPC_MAX_SCALARS];
    dpc_err e;
    dpc_status s = DPC_OK;
    int n = 0, rc = 0;
    for (; n < o->nkw && s == DPC_OK; n++) {
        const char *eq = strchr(o->kw[n], '=');
        if (!eq) {
            rc = cli_usage("--kw needs NAME=VALUE, got '%s'", o->kw[n]);
            break;
        }
        names[n] = dpc_strndup(o->kw[n], (size_t)(eq - o->kw[n]));
        if (!names[n]) {
            s = dpc_errf(&e, DPC_ENOMEM, "out of memory");
            break;
        }
        int idx = dpc_sig_scalar_index(g, names[n]);
        values[n] = 0; /* an unknown name: dpc_sig_scalars names it */
        if (idx >= 0)
            s = dpc_sig_scalar_parse(&g->scalars[idx], eq + 1, &values[n], &e);
    }
    if (!rc && s == DPC_OK)
        s = dpc_sig_scalars(g, (const char *const *)names, values, n, scalars, &e);
    for (int k = 0; k < n; k++)
        dpc_free(names[k]);
    return rc ? rc : s == DPC_OK ? 0 : cli_fail(s, &e);
}

/* What run and bench hold until they return. */
void cli_free_run(dpc_tensor **in, dpc_tensor **out, dpc_safetensors *st, dpc_model *m) {
    for (int i = 0; i < CLI_MAX_IO; i++) {
        dpc_tensor_free(in[i]);
        dpc_tensor_free(out[i]);
    }
    if (st)
        dpc_st_free(st);
    dpc_model_free(m);
}

/* The state_dict entries a model needs: its parameters and buffers, less
 * those forward ignores (num_batches_tracked). */
static int needed_weights(const dpc_model *m) {
    int n = 0;
    for (int i = 0; i < m->sig->nparams; i++)
        n += !m->sig->params[i].ignored && !m->sig->params[i].nonpersistent;
    return n;
}

/* The weights for run: --weights; else an imported .onnx's initializers;
 * else those embedded in the .dpa; else none (*st NULL) for a model that
 * needs none. */
static dpc_status run_weights(const cli_opts *o, const dpc_model *m, dpc_safetensors **st, dpc_err *e) {
    *st = NULL;
    if (o->weights)
        return dpc_st_read(o->weights, st, e);
    if ((*st = cli_onnx_take_weights()))
        return DPC_OK;
    int n = needed_weights(m);
    if (cli_dpa() && (n || dpc_artifact_has_weights(cli_dpa())))
        return cli_dpa_weights(st, e); /* its message says to give --weights */
    if (n)
        return dpc_errf(e, DPC_EUSAGE,
                        "%s has parameters or buffers (%d state_dict entr%s): give --weights W.safetensors (`dpc "
                        "init %s -o W.safetensors` writes initial ones)",
                        m->sig->model_name, n, n == 1 ? "y" : "ies", o->model);
    return DPC_OK;
}

/* int32 index inputs widened in place (dpc_model_widen_inputs). */
static dpc_status widen_inputs(const dpc_model *m, dpc_tensor **in, int n, dpc_err *e) {
    dpc_tensor *wide[CLI_MAX_IO];
    dpc_status s = dpc_model_widen_inputs(m, (const dpc_tensor *const *)in, n, wide, e);
    for (int i = 0; i < n; i++)
        if (wide[i]) {
            dpc_tensor_free(in[i]);
            in[i] = wide[i];
        }
    return s;
}

/* The -o count against what forward returns: false when they agree, else
 * the error is printed (bad usage). */
static bool wrong_outputs(const char *model, int noutputs, int nout) {
    if (nout == noutputs)
        return false;
    fprintf(stderr, "dpc: error: %s returns %d tensor%s but %d -o option%s given\n", model, noutputs,
            noutputs == 1 ? "" : "s", nout, nout == 1 ? " was" : "s were");
    return true;
}

/* The weights (run_weights) bound to m, their warnings printed. */
static dpc_status run_bind(const cli_opts *o, dpc_model *m, dpc_safetensors **st, dpc_err *e) {
    dpc_status s = run_weights(o, m, st, e);
    if (s != DPC_OK)
        return s;
    dpc_safetensors none = {0}; /* the empty state_dict of a model without parameters */
    dpc_buf warn;
    dpc_buf_init(&warn);
    s = dpc_model_bind(m, *st ? *st : &none, &warn, e);
    if (warn.len)
        fprintf(stderr, "dpc: warning: %s\n", warn.data);
    dpc_buf_free(&warn);
    return s;
}

/* The --input files, int32 index inputs widened. */
static dpc_status read_inputs(const cli_opts *o, const dpc_model *m, dpc_tensor **in, dpc_err *e) {
    dpc_status s;
    for (int i = 0; i < o->ninputs; i++)
        if ((s = dpc_npy_read(o->inputs[i], &in[i], e)) != DPC_OK)
            return s;
    return widen_inputs(m, in, o->ninputs, e);
}

/* -v: how the batch was split over the replicas, and how the GPUs got
 * their weights and kernels. */
static void print_split(const dpc_model *m) {
    fprintf(stderr, "dpc: batch %lld over %d device%s, %d replica%s%s\n", (long long)m->last.batch, m->last.ndevices,
            m->last.ndevices == 1 ? "" : "s", m->last.nreplicas, m->last.nreplicas == 1 ? "" : "s",
            m->last.scattered ? "" : " (no scatter)");
    for (int r = 0; r < m->last.nreplicas; r++) {
        char nm[32];
        dpc_device_name(&m->last.replica[r].device, nm, sizeof nm);
        fprintf(stderr, "dpc:   replica %d on %s: rows [%lld, %lld) in %.3f ms\n", r, nm,
                (long long)m->last.replica[r].row_offset,
                (long long)(m->last.replica[r].row_offset + m->last.replica[r].rows), m->last.replica[r].seconds * 1e3);
    }
    dpc_cuda_weights_info wi; /* how further GPUs got the weights: NCCL, or peer copy and why */
    if (dpc_cuda_weights(m->be, &wi) && wi.how[0])
        fprintf(stderr, "dpc: weights: %s\n", wi.how);
    char kh[1024]; /* a .dpa's CUBIN/PTX, or NVRTC */
    if (dpc_cuda_kernels(m->be, kh, sizeof kh))
        fprintf(stderr, "dpc: kernels: %s\n", kh);
}

int cmd_run(int argc, char **argv) {
    cli_opts o;
    int rc = cli_parse_opts(argc, argv, &o, "oiwkdbDM");
    if (rc)
        return rc;
    kprec prec;
    if ((rc = cli_dtype_opt(&o, &prec)))
        return rc;
    if (o.nout == 0)
        return cli_usage("%s", "run needs -o OUT.npy for each returned tensor");
    if ((rc = cli_check_outputs(&o, o.out, o.nout)))
        return rc;
    cli_mpi x; /* from here on, under MPI every path ends in mpi_complete */
    if ((rc = cli_mpi_begin(&o, &x)))
        return rc;
    dpc_device devs[DPC_MAX_DEVICES];
    int ndev;
    dpc_err e;
    dpc_model *m = NULL;
    dpc_tensor *in[CLI_MAX_IO] = {0}, *out[CLI_MAX_IO] = {0};
    dpc_safetensors *st = NULL;
    double scalars[DPC_MAX_SCALARS];
    dpc_status s = DPC_OK;
    if ((rc = cli_devices_opt(&o, devs, &ndev)) || (rc = cli_compile_model(o.model, &m)))
        goto done;
    const dpc_signature *g = m->sig;
    rc = 1;
    if (!g->unbound && wrong_outputs(g->model_name, g->noutputs, o.nout)) { /* run-time dims: known once the inputs are read */
        rc = 2;
        goto done;
    }
    if (o.ninputs != g->ninputs) {
        fprintf(stderr, "dpc: error: forward of %s takes %d tensor input%s but %d --input given\n", g->model_name,
                g->ninputs, g->ninputs == 1 ? "" : "s", o.ninputs);
        rc = 2;
        goto done;
    }
    if (parse_kw(m, &o, scalars))
        goto done;
    if ((s = run_bind(&o, m, &st, &e)) != DPC_OK || (s = read_inputs(&o, m, in, &e)) != DPC_OK)
        goto failed;
    dpc_model_set_precision(m, prec);
    if ((s = dpc_model_set_devices(m, devs, ndev, &e)) != DPC_OK)
        goto failed;
    if ((s = dpc_model_faults_from_env(m, &e)) != DPC_OK)
        goto failed;
    if (g->unbound) { /* the specialisation for these inputs' run-time dims says what forward returns */
        if ((s = dpc_model_select(m, (const dpc_tensor *const *)in, o.ninputs, &e)) != DPC_OK)
            goto failed;
        if (wrong_outputs(g->model_name, m->sig->noutputs, o.nout)) {
            rc = 2;
            goto done;
        }
    }
    if ((s = cli_run_forward(&o, &x, m, in, scalars, out, &e)) != DPC_OK)
        goto failed;
    for (int w = 0; w < m->last.nwarnings && w < DPC_DP_MAX_WARNINGS; w++)
        fprintf(stderr, "dpc: warning: %s\n", m->last.warnings[w]);
    if (o.verbose && !x.on)
        print_split(m);
    rc = 0;
    if (!x.on && (s = cli_write_outputs(&o, out, &e)) != DPC_OK) /* under MPI rank 0 writes after the gather */
        goto failed;
    goto done;
failed:
    rc = cli_fail(s, &e);
done:
    if (x.on)
        rc = cli_mpi_complete(&o, &x, rc, out);
    cli_free_run(in, out, st, m);
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --batch and --iters; 0 or the exit status. */
static int bench_args(const cli_opts *o, long long *batch, long *iters) {
    char *end;
    *batch = o->batch ? strtoll(o->batch, &end, 10) : -1;
    if (!o->batch || *end || *batch < 0 || *batch > (1 << 24))
        return cli_usage("%s", "bench needs --batch B (0 <= B <= 16777216)");
    *iters = o->iters ? strtol(o->iters, &end, 10) : 0;
    if (o->iters && (*end || *iters <= 0 || *iters > 1000000))
        return cli_usage("--iters needs a positive count, got '%s'", o->iters);
    return 0;
}

/* The weights bench binds: --weights; else an imported .onnx's
 * initializers; else dpc init's (seed 0). */
static dpc_status bench_weights(const cli_opts *o, dpc_model *m, dpc_safetensors **st, dpc_err *e) {
    dpc_status s;
    if (!o->weights && (*st = cli_onnx_take_weights())) /* an imported .onnx's initializers */
        s = dpc_model_bind(m, *st, NULL, e);
    else if (!o->weights)
        s = dpc_model_bind_init(m, 0, e); /* dpc init's weights, seed 0 */
    else if ((s = dpc_st_read(o->weights, st, e)) == DPC_OK)
        s = dpc_model_bind(m, *st, NULL, e);
    return s;
}

/* Inputs of batch rows (run-time dims rt) of g, forward's signature before
 * any specialisation, filled the same way every time: floats in [-1, 1),
 * indices below each input's limit. */
static dpc_status bench_inputs(dpc_model *m, const dpc_signature *g, long long batch, const int64_t *rt,
                               dpc_tensor **in, dpc_err *e) {
    dpc_status s;
    uint64_t rng = 88172645463325252ull;
    for (int i = 0; i < g->ninputs; i++) {
        if ((s = dpc_model_input_new(m, i, batch, g->nrtdims ? rt : NULL, &in[i], e)) != DPC_OK)
            return s;
        if (i == g->ninputs - 1 && (s = dpc_model_select(m, (const dpc_tensor *const *)in, g->ninputs, e)) != DPC_OK)
            return s; /* a specialisation's index limits are known once it is compiled */
    }
    for (int i = 0; i < g->ninputs; i++) {
        const dpc_sig_tensor *p = &g->inputs[i];
        int64_t limit = dpc_model_input_limit(m, i) ? dpc_model_input_limit(m, i) : 1;
        int64_t cnt = dpc_tensor_numel(in[i]);
        for (int64_t k = 0; k < cnt; k++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            if (p->dtype == DPC_I64)
                ((int64_t *)in[i]->data)[k] = (int64_t)(rng % (uint64_t)limit);
            else
                ((float *)in[i]->data)[k] = (float)((double)(rng >> 11) * 0x1.0p-53 * 2.0 - 1.0);
        }
    }
    return DPC_OK;
}

/* The timed forwards: --iters of them, or without it as many as a second
 * holds (at least 11), after the warm-up; *times (for the caller to free)
 * holds their durations, sorted, *ntimes their count. */
static dpc_status bench_time(dpc_model *m, const dpc_signature *g, dpc_tensor **in, const double *scalars, long iters,
                             double **times, long *ntimes, dpc_err *e) {
    dpc_tensor *out[CLI_MAX_IO] = {0};
    /* warm-up: 3 forwards, or fewer once they have taken a second (a
     * batch-64 ViT-B/16 forward takes seconds) */
    int warm = 3;
    long n = iters ? iters : 100000;
    *times = calloc((size_t)n, sizeof(double));
    long done = 0;
    double t_start = dpc_now_s();
    for (long it = -warm; it < n; it++) {
        double t0 = dpc_now_s();
        dpc_status s = dpc_model_run(m, (const dpc_tensor *const *)in, g->ninputs, scalars, out, e);
        double t1 = dpc_now_s();
        for (int j = 0; j < CLI_MAX_IO; j++) {
            dpc_tensor_free(out[j]);
            out[j] = NULL;
        }
        if (s != DPC_OK)
            return s;
        if (it < -1 && t1 - t_start > 1.0)
            it = -1; /* the warm-up ends here */
        if (it >= 0)
            (*times)[done++] = t1 - t0;
        if (!iters && it >= 10 && t1 - t_start > 1.0)
            break;
    }
    qsort(*times, (size_t)done, sizeof(double), cmp_double);
    *ntimes = done;
    return DPC_OK;
}

/* One line (or --json): the median and best times and the GFLOP/s. */
static void bench_report(const cli_opts *o, const dpc_model *m, const dpc_signature *g, long long batch,
                         const dpc_device *devs, int ndev, const double *times, long done) {
    double med = times[done / 2], best = times[0];
    double flops = dpc_unit_flops(m->unit, batch);
    char devname[256] = "";
    for (int i = 0; i < ndev; i++) {
        char d[32];
        dpc_device_name(&devs[i], d, sizeof d);
        snprintf(devname + strlen(devname), sizeof devname - strlen(devname), "%s%s", i ? "," : "", d);
    }
    if (o->json)
        printf("{\"model\": \"%s\", \"batch\": %lld, \"devices\": \"%s\", \"iters\": %ld, \"median_us\": %.3f, "
               "\"min_us\": %.3f, \"flops\": %.0f, \"gflops\": %.3f}\n",
               g->model_name, batch, devname, done, med * 1e6, best * 1e6, flops, med > 0 ? flops / med * 1e-9 : 0);
    else
        printf("%s batch %lld on %s: median %.1f us, min %.1f us over %ld forwards; %.3g GFLOP/forward, %.1f GFLOP/s\n",
               g->model_name, batch, devname, med * 1e6, best * 1e6, done, flops * 1e-9,
               med > 0 ? flops / med * 1e-9 : 0);
}

/* Times forwards in this process: compile and weight loading are not
 * counted, the memory plan is made by the warm-up runs. */
int cmd_bench(int argc, char **argv) {
    cli_opts o;
    int rc = cli_parse_opts(argc, argv, &o, "bdwnDB");
    if (rc)
        return rc;
    kprec prec;
    long long batch = 0;
    long iters = 0;
    if ((rc = cli_dtype_opt(&o, &prec)) || (rc = bench_args(&o, &batch, &iters)))
        return rc;
    dpc_device devs[DPC_MAX_DEVICES];
    int ndev;
    dpc_err e;
    dpc_status s;
    if ((rc = cli_devices_opt(&o, devs, &ndev)))
        return rc;
    dpc_model *m;
    if ((rc = cli_compile_model(o.model, &m)))
        return rc;
    const dpc_signature *g = m->sig;
    dpc_tensor *in[CLI_MAX_IO] = {0}, *out[CLI_MAX_IO] = {0};
    dpc_safetensors *st = NULL;
    double scalars[DPC_MAX_SCALARS] = {0}, *times = NULL;
    long ntimes = 0;
    int64_t rt[DPC_MAX_RTDIMS]; /* the run-time dims of the inputs: --bind */
    if ((g->unbound || o.nbind) && (rc = cli_bind_values(&o, g, rt))) {
        dpc_model_free(m);
        return rc;
    }
    if ((s = bench_weights(&o, m, &st, &e)) != DPC_OK)
        goto failed;
    for (int i = 0; i < g->nscalars; i++)
        scalars[i] = g->scalars[i].def;
    if ((s = bench_inputs(m, g, batch, rt, in, &e)) != DPC_OK)
        goto failed;
    dpc_model_set_precision(m, prec);
    if ((s = dpc_model_set_devices(m, devs, ndev, &e)) != DPC_OK)
        goto failed;
    if ((s = bench_time(m, g, in, scalars, iters, &times, &ntimes, &e)) != DPC_OK)
        goto failed;
    bench_report(&o, m, g, batch, devs, ndev, times, ntimes);
    rc = 0;
    goto done;
failed:
    rc = cli_fail(s, &e);
done:
    free(times);
    cli_free_run(in, out, st, m);
    return rc;
}
