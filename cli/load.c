/* load.c - the model a verb works on: a .dp source compiled up to the stage
 * the verb needs (its diagnostics printed), a .dpa artifact read and
 * verified (kept for its embedded weights and `dpc inspect`), an imported
 * .onnx's .dp text from memory, and run-time dims bound with --bind. */
#include "cli.h"
#include "import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- .dpa artifacts: read once per process and kept */

static dpc_artifact *g_dpa; /* the artifact this process loaded */

static void free_dpa(void) { dpc_artifact_free(g_dpa); }

const dpc_artifact *cli_dpa(void) { return g_dpa; }

/* Reads and verifies an artifact; the model comes from its stored sources. */
int cli_load_dpa(const char *path, dpc_model **m) {
    static bool registered;
    dpc_err e;
    if (!registered)
        registered = atexit(free_dpa) == 0;
    dpc_artifact_free(g_dpa);
    g_dpa = NULL;
    dpc_status s = dpc_artifact_read(path, &g_dpa, &e);
    if (s == DPC_OK)
        s = dpc_artifact_instantiate(g_dpa, m, &e);
    return s == DPC_OK ? 0 : cli_fail(s, &e);
}

static int unit_dpa(const char *path, dpc_unit **u) {
    dpc_model *m;
    int rc = cli_load_dpa(path, &m);
    if (rc)
        return rc;
    *u = m->unit; /* the model is unbound: nothing else to keep */
    m->unit = m->gunit = NULL;
    m->sig = m->gsig = NULL;
    m->front = NULL;
    dpc_model_free(m);
    return 0;
}

/* run without --weights: the weights embedded in the artifact */
dpc_status cli_dpa_weights(dpc_safetensors **st, dpc_err *e) {
    return dpc_artifact_take_weights(g_dpa, st, e);
}

/* ---- .dp sources */

/* Prints a failed compile's diagnostics (or its error) and frees them;
 * true when s is a failure. */
static bool compile_failed(dpc_status s, dpc_buf *diags, const dpc_err *e) {
    if (s != DPC_OK) {
        if (diags->len)
            fputs(diags->data, stderr);
        else
            fprintf(stderr, "dpc: error: %s\n", e->msg);
    }
    dpc_buf_free(diags);
    return s != DPC_OK;
}

/* The model of path (a .dp source or a .dpa) compiled up to stage; a model
 * with run-time dims (`ids: i64[N, S]`) stops after its inputs
 * (dpc_compile_opts.defer_dims): see cli_graph_unit. */
int cli_front(const char *path, dpc_stage st, dpc_unit **u) {
    if (dpc_artifact_path(path))
        return unit_dpa(path, u);
    dpc_buf diags;
    dpc_err e;
    dpc_buf_init(&diags);
    dpc_compile_opts co = {.path = path, .stage = st, .defer_dims = true};
    cli_onnx_source(path, &co.text, &co.len); /* an imported .onnx: its .dp, in memory */
    dpc_status s = dpc_compile(&co, u, &diags, &e);
    if (compile_failed(s, &diags, &e))
        return s == DPC_EUSAGE ? 2 : 1;
    return 0;
}

/* The values --bind gives u's run-time dims, in signature order: each one
 * must be given (where the unit is unbound) and name one of them. */
int cli_bind_values(const cli_opts *o, const dpc_signature *g, int64_t *values) {
    char names[DPC_MAX_RTDIMS][128], msg[1024];
    dpc_dim_bind b[DPC_MAX_RTDIMS];
    dpc_err e;
    for (int i = 0; i < o->nbind; i++) {
        dpc_status s = dpc_dim_bind_parse(o->bind[i], names[i], sizeof names[i], &b[i], &e);
        if (s != DPC_OK)
            return cli_usage("%s", e.msg);
        bool found = false;
        for (int r = 0; r < g->nrtdims; r++)
            found |= strcmp(g->rtdims[r].name, b[i].name) == 0;
        if (!found) {
            size_t pos = 0;
            msg[0] = 0;
            for (int r = 0; r < g->nrtdims && pos < sizeof msg; r++)
                pos += (size_t)snprintf(msg + pos, sizeof msg - pos, "%s%s", r ? ", " : "", g->rtdims[r].name);
            fprintf(stderr, "dpc: error: --bind %s: forward of %s has no run-time dim '%s' (%s%s)\n", o->bind[i],
                    g->model_name, b[i].name, g->nrtdims ? "its run-time dims: " : "it has none", msg);
            return 1;
        }
    }
    for (int r = 0; r < g->nrtdims; r++) {
        values[r] = g->rtdims[r].value;
        for (int i = 0; i < o->nbind; i++)
            if (strcmp(b[i].name, g->rtdims[r].name) == 0)
                values[r] = b[i].value;
        if (values[r] == 0) {
            const dpc_sig_rtdim *d = &g->rtdims[r];
            fprintf(stderr,
                    "dpc: error: %s has the run-time dim %s (dim %d of input '%s'), bound from the input when it runs; "
                    "its graph is built for one value: give it with --bind %s=VALUE (e.g. --bind %s=16)\n",
                    g->model_name, d->name, d->dim, g->inputs[d->input].name, d->name, d->name);
            return 1;
        }
    }
    return 0;
}

/* The unit of path with a graph up to stage (ir, source, graph): a model
 * with run-time dims specialised to the --bind values. */
int cli_graph_unit(const cli_opts *o, dpc_stage st, dpc_unit **u) {
    int rc = cli_front(o->model, st, u);
    if (rc)
        return rc;
    const dpc_signature *g = dpc_unit_signature(*u);
    int64_t values[DPC_MAX_RTDIMS];
    if (!g->unbound && !o->nbind)
        return 0;
    if ((rc = cli_bind_values(o, g, values))) {
        dpc_unit_free(*u);
        return rc;
    }
    dpc_unit *spec;
    dpc_buf diags;
    dpc_err e;
    dpc_buf_init(&diags);
    dpc_status s = dpc_unit_specialise(*u, values, st, &spec, &diags, &e);
    dpc_unit_free(*u);
    *u = NULL;
    if (compile_failed(s, &diags, &e))
        return s == DPC_EUSAGE ? 2 : 1;
    *u = spec;
    return 0;
}

int cli_compile_model(const char *path, dpc_model **m) {
    if (dpc_artifact_path(path))
        return cli_load_dpa(path, m);
    dpc_unit *u;
    if (cli_front(path, DPC_STAGE_FUSED, &u))
        return 1;
    dpc_err e;
    dpc_status s = dpc_model_from_unit(u, m, &e);
    return s == DPC_OK ? 0 : cli_fail(s, &e);
}
