/* run_model.c - load a model compiled with `dpc compile`, run one batch,
 * print the result. Uses only the public API (dpc.h).
 *
 *   dpc compile models/parallel_model.dp -o pm.dpa --weights w.safetensors
 *   cc run_model.c $(pkg-config --cflags --libs dpc) -o run_model
 *   ./run_model pm.dpa x.npy                 # x.npy: the first input
 *   ./run_model pm.dpa --batch 4             # generated inputs instead
 *
 * Options: --weights W.safetensors (else the weights embedded in the
 * artifact), --devices cpu,cpu, --kw NAME=VALUE, -o OUT.npy (the first
 * output, written as numpy.save would). Every output is printed as
 * "output <i>: <dtype>[dims]" and then its values, one per line (%.9g,
 * enough to round-trip a float32). */
#include <dpc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 16

static int die(const char *what, const char *msg) {
    fprintf(stderr, "run_model: %s: %s\n", what, msg);
    return 1;
}

/* An input the model wants, filled with a fixed pattern: batch rows of
 * a fixed pattern in [-1, 1) (or k mod the last dim, for int64 indices). */
static dpc_tensor *generate(const dpc_program *p, int i, int64_t batch) {
    dpc_dtype dt;
    int rank;
    int64_t shape[DPC_MAX_RANK];
    if (dpc_program_input(p, i, NULL, &dt, &rank, shape) != DPC_OK)
        return NULL;
    for (int d = 0; d < rank; d++)
        if (shape[d] < 0)
            shape[d] = -shape[d] * batch; /* a dim of k * batch */
    dpc_tensor *t;
    if (dpc_tensor_create(dt, rank, shape, NULL, &t) != DPC_OK)
        return NULL;
    int64_t n = dpc_tensor_numel(t), last = rank ? shape[rank - 1] : 1;
    for (int64_t k = 0; k < n; k++) {
        if (dt == DPC_I64)
            ((int64_t *)dpc_tensor_data(t))[k] = last > 0 ? k % last : 0;
        else
            ((float *)dpc_tensor_data(t))[k] = (float)((k * 37 + i * 11) % 101) / 50.5f - 1.0f;
    }
    return t;
}

static void print_tensor(int i, dpc_tensor *t) {
    printf("output %d: %s[", i, dpc_dtype_name(dpc_tensor_dtype(t)));
    for (int d = 0; d < dpc_tensor_rank(t); d++)
        printf("%s%lld", d ? ", " : "", (long long)dpc_tensor_dim(t, d));
    printf("]\n");
    int64_t n = dpc_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) {
        if (dpc_tensor_dtype(t) == DPC_F32)
            printf("%.9g\n", ((const float *)dpc_tensor_data(t))[k]);
        else if (dpc_tensor_dtype(t) == DPC_I64)
            printf("%lld\n", (long long)((const int64_t *)dpc_tensor_data(t))[k]);
    }
}

int main(int argc, char **argv) {
    const char *artifact = NULL, *weights = NULL, *devices = NULL, *out_path = NULL;
    const char *npy[MAX_IO], *kw_names[MAX_IO];
    double kw_values[MAX_IO];
    int nnpy = 0, nkw = 0;
    long batch = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 < argc && !strcmp(a, "--weights"))
            weights = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--devices"))
            devices = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--batch"))
            batch = strtol(argv[++i], NULL, 10);
        else if (i + 1 < argc && !strcmp(a, "-o"))
            out_path = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--kw") && nkw < MAX_IO) {
            char *eq = strchr(argv[++i], '=');
            if (!eq)
                return die("--kw", "needs NAME=VALUE");
            *eq = 0;
            kw_names[nkw] = argv[i];
            kw_values[nkw++] = strtod(eq + 1, NULL);
        } else if (!artifact)
            artifact = a;
        else if (nnpy < MAX_IO)
            npy[nnpy++] = a;
    }
    if (!artifact) {
        fprintf(stderr, "usage: run_model MODEL.dpa [X.npy ...] [--batch B] [--weights W] [--devices LIST] "
                        "[--kw NAME=VALUE] [-o OUT.npy]\n");
        return 2;
    }

    dpc_program *p;
    if (dpc_program_load(artifact, &p) != DPC_OK)
        return die("load", dpc_last_error());
    fprintf(stderr, "run_model: %s (libdpc %s), %d input(s), %d output(s)\n", dpc_program_name(p), dpc_version(),
            dpc_program_num_inputs(p), dpc_program_num_outputs(p));
    int rc = 1;
    int nin = dpc_program_num_inputs(p), nout = dpc_program_num_outputs(p);
    dpc_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
    if (nin > MAX_IO || nout > MAX_IO) {
        die("model", "too many inputs or outputs for this example");
        goto done;
    }
    if (weights && dpc_program_bind_weights(p, weights) != DPC_OK) {
        die("weights", dpc_program_error(p));
        goto done;
    }
    if (devices && dpc_program_set_devices(p, devices) != DPC_OK) {
        die("devices", dpc_program_error(p));
        goto done;
    }
    for (int i = 0; i < nin; i++) {
        if (i < nnpy) {
            if (dpc_tensor_load_npy(npy[i], &in[i]) != DPC_OK) {
                die(npy[i], dpc_last_error());
                goto done;
            }
        } else if (!(in[i] = generate(p, i, batch))) {
            die("input", dpc_last_error());
            goto done;
        }
    }
    if (dpc_program_run(p, (const dpc_tensor *const *)in, nin, kw_names, kw_values, nkw, out, nout) != DPC_OK) {
        die("run", dpc_program_error(p));
        goto done;
    }
    for (int i = 0; i < nout; i++)
        print_tensor(i, out[i]);
    if (out_path && dpc_tensor_save_npy(out[0], out_path) != DPC_OK) {
        die(out_path, dpc_last_error());
        goto done;
    }
    rc = 0;
done:
    for (int i = 0; i < MAX_IO; i++) {
        dpc_tensor_free(in[i]);
        dpc_tensor_free(out[i]);
    }
    dpc_program_free(p);
    return rc;
}
