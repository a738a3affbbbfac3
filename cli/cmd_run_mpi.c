/* cmd_run_mpi.c - `dpc run`'s MPI mode (under mpirun): each rank's share
 * of the batch, its stderr captured until the ranks agree, then the gather
 * and rank 0's report and outputs. Apart from cli/cmd_run.c because a plain
 * run never enters it; the collectives themselves are cli/mpi_run.c. */
#include "cli.h"
#include "mpi_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- dpc run under mpirun (cli/mpi_run.h) ------------------------------
 * Every rank runs cmd_run up to the forward on its share of the batch. Until
 * the ranks agree on how that went, what a rank would print goes to a
 * temporary file instead of stderr: then only rank 0 speaks, either the
 * lowest failing rank's text with its error lines naming that rank, or its
 * own warnings, and alone writes the gathered outputs. */

/* MPI mode: `--mpi`, or started by a launcher with more than one process.
 * A plain run leaves MPI alone (fast start, clean sanitizer runs). */
int cli_mpi_begin(const cli_opts *o, cli_mpi *x) {
    memset(x, 0, sizeof *x);
    x->saved_stderr = -1;
    int n = dpc_mpi_env_size();
    if (!o->mpi && (n == 0 || n == 1))
        return 0;
    dpc_err e;
    if (!dpc_mpi_built()) {
        if (!o->mpi && n < 0) /* PMIx alone does not say there are several: run whole */
            return 0;
        if (dpc_mpi_env_rank() > 0) /* rank 0 says it for all */
            return 1;
        dpc_status s = dpc_mpi_init(&x->mpi, &e);
        if (o->mpi)
            dpc_err_prefix(&e, "--mpi: ");
        else
            dpc_err_prefix(&e, "started by an MPI launcher as %d processes (run it without mpirun), but ", n);
        return cli_fail(s, &e);
    }
    dpc_status s = dpc_mpi_init(&x->mpi, &e);
    if (s != DPC_OK)
        return cli_fail(s, &e);
    x->on = true;
    fflush(stderr);
    x->capture = tmpfile(); /* without one every rank speaks for itself: noisier, still correct */
    x->saved_stderr = x->capture ? dup(STDERR_FILENO) : -1;
    if (x->saved_stderr >= 0)
        dup2(fileno(x->capture), STDERR_FILENO);
    return 0;
}

/* Puts stderr back and returns what was written to it meanwhile. */
static char *capture_end(cli_mpi *x, size_t *len) {
    *len = 0;
    if (x->saved_stderr < 0) {
        if (x->capture)
            fclose(x->capture);
        x->capture = NULL;
        return NULL;
    }
    fflush(stderr);
    dup2(x->saved_stderr, STDERR_FILENO);
    close(x->saved_stderr);
    x->saved_stderr = -1;
    long n = ftell(x->capture);
    char *t = n > 0 ? malloc((size_t)n + 1) : NULL;
    rewind(x->capture);
    if (t) {
        *len = fread(t, 1, (size_t)n, x->capture);
        t[*len] = 0;
    }
    fclose(x->capture);
    x->capture = NULL;
    return t;
}

/* The forward: the whole batch, or under MPI this rank's share (none on an
 * idle rank). */
dpc_status cli_run_forward(const cli_opts *o, cli_mpi *x, dpc_model *m, dpc_tensor **in, const double *scalars,
                              dpc_tensor **out, dpc_err *e) {
    if (!x->on)
        return dpc_model_run(m, (const dpc_tensor *const *)in, o->ninputs, scalars, out, e);
    const char *names[CLI_MAX_IO];
    dpc_tensor views[CLI_MAX_IO];
    const dpc_tensor *vp[CLI_MAX_IO];
    bool whole[CLI_MAX_IO];
    for (int i = 0; i < o->ninputs; i++) {
        names[i] = dpc_model_gsig(m)->inputs[i].name, vp[i] = &views[i];
        whole[i] = dpc_sig_input_whole(&dpc_model_gsig(m)->inputs[i]);
    }
    dpc_status s =
        dpc_mpi_take_share(&x->mpi, (const dpc_tensor *const *)in, o->ninputs, names, whole, views, &x->share, e);
    if (s != DPC_OK || !x->share.works)
        return s;
    double t0 = dpc_now_s();
    s = dpc_model_run(m, vp, o->ninputs, scalars, out, e);
    x->seconds = dpc_now_s() - t0;
    return s;
}

/* Rank 0 repeats the failing rank's text, its error lines naming it. */
static void print_rank_error(int rank, const char *text) {
    bool said = false;
    const char *tag = "dpc: error: ";
    for (const char *p = text ? text : ""; *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (!strncmp(p, tag, strlen(tag))) {
            fprintf(stderr, "dpc: error: rank %d: %.*s\n", rank, len - (int)strlen(tag), p + strlen(tag));
            said = true;
        } else
            fprintf(stderr, "%.*s\n", len, p);
        p += len + (nl != NULL);
    }
    if (!said)
        fprintf(stderr, "dpc: error: rank %d failed\n", rank);
}

static void print_mpi_split(const cli_mpi *x, const dpc_mpi_rank_report *all) {
    const dpc_mpi_share *sh = &x->share;
    int n = x->mpi.size;
    fprintf(stderr, "dpc: batch %lld over %d MPI rank%s, %d working%s\n", (long long)sh->batch, n, n == 1 ? "" : "s",
            sh->k, sh->scattered ? "" : " (no scatter)");
    for (int r = 0; r < n; r++) {
        const dpc_mpi_rank_report *p = &all[r];
        if (!p->works)
            fprintf(stderr, "dpc:   rank %d on %s: idle\n", r, p->host);
        else
            fprintf(stderr, "dpc:   rank %d on %s (%s): rows [%lld, %lld) in %.3f ms\n", r, p->host, p->devices,
                    (long long)p->offset, (long long)(p->offset + (p->rows < 0 ? 0 : p->rows)), p->seconds * 1e3);
    }
}


/* After the ranks agreed that all went well: the gather, and rank 0 writes.
 * Rank 0's verdict on the write reaches every rank. */
static int mpi_gather_write(const cli_opts *o, cli_mpi *x, dpc_tensor **out) {
    dpc_mpi_rank_report me = {.works = x->share.works, .offset = x->share.offset, .rows = x->share.rows,
                              .seconds = x->seconds}, *all = NULL;
    gethostname(me.host, sizeof me.host - 1);
    snprintf(me.devices, sizeof me.devices, "%s", o->devices ? o->devices : "cpu");
    dpc_tensor *g[CLI_MAX_IO] = {0};
    dpc_err e;
    int nzero = 0;
    bool root = x->mpi.rank == 0;
    dpc_status s = dpc_mpi_gather(&x->mpi, &x->share, out, o->nout, g, &nzero, &me, &all, &e);
    if (s != DPC_OK)
        return root ? cli_fail(s, &e) : 1;
    if (root && nzero && x->share.scattered)
        fprintf(stderr, "dpc: warning: %d 0-dim output%s gathered as a vector of one value per rank (%d), as "
                        "PyTorch's DataParallel does\n", nzero, nzero == 1 ? "" : "s", x->share.k);
    if (root && o->verbose)
        print_mpi_split(x, all);
    if (root)
        s = cli_write_outputs(o, g, &e);
    for (int j = 0; j < CLI_MAX_IO; j++)
        dpc_tensor_free(g[j]);
    free(all);
    int rc = s == DPC_OK ? 0 : root ? cli_fail(s, &e) : 1;
    return dpc_mpi_bcast_status(&x->mpi, s) == DPC_OK ? rc : (rc ? rc : 1);
}

/* Ends MPI mode: every rank brings its exit status so far (rc), the ranks
 * agree, and either all fail (rank 0 reports the lowest failing rank) or
 * the outputs are gathered. MPI is finalised on every path. */
int cli_mpi_complete(const cli_opts *o, cli_mpi *x, int rc, dpc_tensor **out) {
    size_t len;
    char *text = capture_end(x, &len), *fail_text = NULL;
    int fail_rank, fail_rc;
    dpc_err e;
    bool root = x->mpi.rank == 0;
    dpc_status s = dpc_mpi_agree(&x->mpi, rc, text, len, &fail_rank, &fail_rc, &fail_text, &e);
    if (s != DPC_OK) {
        rc = cli_fail(s, &e);
    } else if (fail_rank >= 0) {
        if (root)
            print_rank_error(fail_rank, fail_text);
        rc = root ? fail_rc : rc ? rc : 1;
    } else {
        if (root && text)
            fputs(text, stderr); /* its warnings; the other ranks' are the same */
        rc = mpi_gather_write(o, x, out);
    }
    free(text);
    free(fail_text);
    fflush(stderr);
    dpc_mpi_finalize(&x->mpi);
    return rc;
}
