/* cli.h - what the CLI's verbs share: the usage text and errors, the common
 * options (cli/args.c), the outputs (cli/outputs.c), the model a verb
 * works on (cli/load.c) and the verbs themselves (cli/cmd_*.c), which
 * cli/main.c dispatches to. */
#ifndef DPC_CLI_H
#define DPC_CLI_H

#include "artifact.h"
#include "model.h"
#include "mpi_run.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_MAX_IO DPC_MAX_IO /* -o and --input: no forward has more (irbuild.c) */

/* ---- usage and errors (cli/args.c) */

/* The usage text of every verb (`dpc help`). */
extern const char *const cli_usage_text;
/* Prints "dpc: " + fmt (with arg) and the usage text to stderr; returns 2,
 * the exit status of bad usage. */
int cli_usage_error(const char *usage, const char *fmt, const char *arg);
/* cli_usage_error with dpc's whole usage text. */
int cli_usage(const char *fmt, const char *arg);
/* Prints e; returns the exit status of s (2 for DPC_EUSAGE, else 1). */
int cli_fail(dpc_status s, const dpc_err *e);

/* ---- the options (cli/args.c) */

/* Options common to the verbs: one positional model path and flags. */
typedef struct cli_opts {
    const char *model;
    const char *out[CLI_MAX_IO];
    int nout;
    const char *inputs[CLI_MAX_IO];
    int ninputs;
    const char *kw[DPC_MAX_SCALARS];
    int nkw;
    const char *bind[DPC_MAX_RTDIMS]; /* --bind S=16 */
    int nbind;
    const char *weights, *devices, *stage, *target, *seed, *arch, *batch, *iters, *dtype;
    bool verbose, json, mpi;
} cli_opts;

/* argv (after the verb) into o; allowed lists the keys of the options the
 * verb takes (VALUE_OPTS). A MODEL.onnx is imported in memory. 0 or the
 * exit status. */
int cli_parse_opts(int argc, char **argv, cli_opts *o, const char *allowed);
/* --dtype f32|bf16|f16: how the CUDA backend stores floats. */
int cli_dtype_opt(const cli_opts *o, kprec *p);
/* --devices LIST, or the CPU alone. Returns 0 or the exit status. */
int cli_devices_opt(const cli_opts *o, dpc_device *devs, int *ndev);

/* ---- outputs (cli/outputs.c) */

/* Refuses an output that is a file the command reads or another output. */
int cli_check_outputs(const cli_opts *o, const char *const *outs, int nout);
/* Writes b to standard output and frees it; 0 or 1. */
int cli_emit(dpc_buf *b);
/* Every output as .npy to o->out, all or none. */
dpc_status cli_write_outputs(const cli_opts *o, dpc_tensor **out, dpc_err *e);

/* ---- the model a verb works on (cli/load.c) */

/* The unit of path (.dp or .dpa) compiled up to stage, run-time dims deferred. */
int cli_front(const char *path, dpc_stage st, dpc_unit **u);
/* The values --bind gives g's run-time dims, in signature order. */
int cli_bind_values(const cli_opts *o, const dpc_signature *g, int64_t *values);
/* The unit with a graph up to stage, specialised to the --bind values. */
int cli_graph_unit(const cli_opts *o, dpc_stage st, dpc_unit **u);
/* The model of path (.dp compiled, or .dpa read). */
int cli_compile_model(const char *path, dpc_model **m);
/* Reads and verifies an artifact (kept: cli_dpa); the model comes from its sources. */
int cli_load_dpa(const char *path, dpc_model **m);
/* The artifact this process loaded, or NULL. */
const dpc_artifact *cli_dpa(void);
/* The weights embedded in the loaded artifact. */
dpc_status cli_dpa_weights(dpc_safetensors **st, dpc_err *e);

/* ---- dpc run under mpirun (cli/cmd_run_mpi.c) */

typedef struct cli_mpi {
    bool on;
    dpc_mpi mpi;
    int saved_stderr; /* fd 2 while it points at the capture file */
    FILE *capture;
    dpc_mpi_share share;
    double seconds; /* this rank's forward */
} cli_mpi;

/* Starts MPI mode when asked or launched so; 0 or the exit status. */
int cli_mpi_begin(const cli_opts *o, cli_mpi *x);
/* The forward: the whole batch, or under MPI this rank's share. */
dpc_status cli_run_forward(const cli_opts *o, cli_mpi *x, dpc_model *m, dpc_tensor **in, const double *scalars,
                           dpc_tensor **out, dpc_err *e);
/* Ends MPI mode (agree, gather, rank 0 writes); returns the exit status. */
int cli_mpi_complete(const cli_opts *o, cli_mpi *x, int rc, dpc_tensor **out);

/* ---- the verbs: argv holds the arguments after the verb; each returns the exit status */

int cmd_print(int argc, char **argv);   /* cli/cmd_show.c */
int cmd_ir(int argc, char **argv);      /* cli/cmd_show.c */
int cmd_source(int argc, char **argv);  /* cli/cmd_show.c */
int cmd_graph(int argc, char **argv);   /* cli/cmd_show.c */
int cmd_compile(int argc, char **argv); /* cli/cmd_compile.c */
int cmd_inspect(int argc, char **argv); /* cli/cmd_compile.c */
int cmd_init(int argc, char **argv);    /* cli/cmd_init.c */
int cmd_run(int argc, char **argv);     /* cli/cmd_run.c */
int cmd_bench(int argc, char **argv);   /* cli/cmd_run.c */
int cmd_cache(int argc, char **argv);   /* cli/cmd_cache.c */

#endif
