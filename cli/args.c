/* args.c - what every verb of the CLI shares before it starts: the usage
 * text and the two ways a verb fails (bad usage: 2; an error: 1), and the
 * common options (-o, --input, --weights, ... into cli_opts), with the
 * --dtype and --devices values read. Its own file so that cli/main.c is the
 * dispatcher alone and every cli/cmd_*.c, and cli/serve.c, can use these
 * without depending on main.c. */
#include "cli.h"
#include "import.h"
#include "mpi_run.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

const char *const cli_usage_text =
    "usage:\n"
    "  dpc compile MODEL.dp|OLD.dpa [-o MODEL.dpa] [--weights W.safetensors] [--arch sm_90[,sm_80...]]\n"
    "  dpc inspect MODEL.dpa                summary of a compiled artifact\n"
    "  dpc print   MODEL.dp|MODEL.dpa       module tree, exactly as print(model) in PyTorch\n"
    "  dpc ir      MODEL.dp|MODEL.dpa [--stage parsed|fused] [--bind S=16 ...]\n"
    "  dpc graph   MODEL.dp [-o FILE.dot|FILE.svg] [--bind S=16 ...]\n"
    "  dpc source  MODEL.dp|MODEL.dpa [--target cpu|cuda] [--dtype f32|bf16|f16] [--bind S=16 ...]\n"
    "  dpc init    MODEL.dp -o W.safetensors [--seed S]\n"
    "  dpc run     MODEL.dp|MODEL.dpa [--weights W.safetensors] --input X.npy [--input Y.npy ...]\n"
    "              [--kw NAME=VALUE ...] [--devices LIST] [--dtype f32|bf16|f16] [-v] -o OUT.npy [-o OUT2.npy ...]\n"
    "              [--mpi]  (implied under mpirun -np P: each rank runs its share of the batch)\n"
    "  dpc bench   MODEL.dp --batch B [--bind S=16 ...] [--devices LIST] [--dtype f32|bf16|f16] [--weights W] [--iters K] [--json]\n"
    "  dpc serve   MODEL.dp|MODEL.dpa|MODEL.onnx [--weights W] [--devices LIST] [--host H] [--port P] [--max-batch 64]\n"
    "              [--max-delay-us 2000] [--max-queue 1024] [--max-body BYTES] [--dtype f32|bf16|f16]\n"
    "  dpc cache   ls|clear\n"
    "  dpc import  MODEL.onnx -o MODEL.dp [--weights-out W.safetensors] [--dim NAME=SIZE ...] | --list-ops\n"
    "  (MODEL.onnx is accepted wherever MODEL.dp is: imported in memory first; docs/onnx.md)\n";

int cli_usage_error(const char *usage, const char *fmt, const char *arg) {
    fprintf(stderr, "dpc: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    return 2;
}

int cli_usage(const char *fmt, const char *arg) {
    return cli_usage_error(cli_usage_text, fmt, arg);
}

int cli_fail(dpc_status s, const dpc_err *e) {
    fprintf(stderr, "dpc: error: %s\n", e->msg);
    return s == DPC_EUSAGE ? 2 : 1;
}

/* The options that take a value: their spellings, the key a verb's
 * `allowed` string lists, and where a single value goes (NULL for the
 * repeatable -o, --input and --kw). */
typedef struct opt_spec {
    const char *name, *alias;
    char key;
    size_t slot; /* offsetof(cli_opts, field), or 0 for a repeatable option */
} opt_spec;

static const opt_spec VALUE_OPTS[] = {
    {"-o", "--output", 'o', 0},
    {"--input", "-i", 'i', 0},
    {"--kw", NULL, 'k', 0},
    {"--bind", NULL, 'B', 0},
    {"--weights", "-w", 'w', offsetof(cli_opts, weights)},
    {"--devices", NULL, 'd', offsetof(cli_opts, devices)},
    {"--stage", NULL, 's', offsetof(cli_opts, stage)},
    {"--target", NULL, 't', offsetof(cli_opts, target)},
    {"--seed", NULL, 'S', offsetof(cli_opts, seed)},
    {"--arch", NULL, 'a', offsetof(cli_opts, arch)},
    {"--batch", NULL, 'b', offsetof(cli_opts, batch)},
    {"--iters", NULL, 'n', offsetof(cli_opts, iters)},
    {"--dtype", NULL, 'D', offsetof(cli_opts, dtype)},
};

static const opt_spec *value_opt(const char *a) {
    for (size_t i = 0; i < sizeof VALUE_OPTS / sizeof VALUE_OPTS[0]; i++)
        if (strcmp(a, VALUE_OPTS[i].name) == 0 || (VALUE_OPTS[i].alias && strcmp(a, VALUE_OPTS[i].alias) == 0))
            return &VALUE_OPTS[i];
    return NULL;
}

/* Stores the value of option a (spec sp): once, or appended for -o, --input, --kw, --bind. */
static int store_opt(cli_opts *o, const opt_spec *sp, const char *a, const char *v) {
    if (sp->slot) {
        *(const char **)((char *)o + sp->slot) = v;
        return 0;
    }
    int *n = sp->key == 'o' ? &o->nout : sp->key == 'i' ? &o->ninputs : sp->key == 'B' ? &o->nbind : &o->nkw;
    const char **arr = sp->key == 'o' ? o->out : sp->key == 'i' ? o->inputs : sp->key == 'B' ? o->bind : o->kw;
    if (*n >= (sp->key == 'k' ? DPC_MAX_SCALARS : sp->key == 'B' ? DPC_MAX_RTDIMS : CLI_MAX_IO))
        return cli_usage("too many '%s' options", a);
    arr[(*n)++] = v;
    return 0;
}

int cli_parse_opts(int argc, char **argv, cli_opts *o, const char *allowed) {
    memset(o, 0, sizeof *o);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const opt_spec *sp = value_opt(a);
        if (sp) {
            if (!strchr(allowed, sp->key))
                return cli_usage("option '%s' does not apply to this command", a);
            if (i + 1 >= argc)
                return cli_usage("option '%s' needs a value", a);
            int rc = store_opt(o, sp, a, argv[++i]);
            if (rc)
                return rc;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            o->verbose = true;
        } else if (strcmp(a, "--mpi") == 0) {
            if (!strchr(allowed, 'M'))
                return cli_usage("option '%s' does not apply to this command", a);
            o->mpi = true;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage("unknown option '%s'", a);
        } else if (o->model) {
            return cli_usage("unexpected argument '%s'", a);
        } else {
            o->model = a;
        }
    }
    if (!o->model)
        return cli_usage("%s", "missing the model file");
    return cli_onnx_stage(&o->model); /* MODEL.onnx: imported in memory first (cli/import.c) */
}

/* --dtype f32|bf16|f16: how the CUDA backend stores floats. */
int cli_dtype_opt(const cli_opts *o, kprec *p) {
    const char *d = o->dtype ? o->dtype : "f32";
    if (!kprec_parse(d, p))
        return cli_usage("unknown dtype '%s' (f32, bf16 or f16)", d);
    return 0;
}

/* The device list with every "cuda:local" entry made "cuda:<this
 * process's rank on its machine>" (0 outside MPI), so that one command line
 * gives each rank its own GPU. False if it does not fit. */
static bool expand_local(const char *list, char *out, size_t n) {
    size_t len = 0;
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t el = end ? (size_t)(end - p) : strlen(p);
        const char *s = p, *t = p + el;
        while (s < t && (*s == ' ' || *s == '\t'))
            s++;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        int w = (size_t)(t - s) == 10 && !memcmp(s, "cuda:local", 10)
                    ? snprintf(out + len, n - len, "cuda:%d%s", dpc_mpi_env_local_rank(), end ? "," : "")
                    : snprintf(out + len, n - len, "%.*s%s", (int)el, p, end ? "," : "");
        if (w < 0 || (size_t)w >= n - len)
            return false;
        len += (size_t)w;
        if (!end)
            return true;
        p = end + 1;
    }
}

/* --devices LIST, or the CPU alone. Returns 0 or the exit status. */
int cli_devices_opt(const cli_opts *o, dpc_device *devs, int *ndev) {
    dpc_err e;
    *ndev = 1;
    devs[0] = (dpc_device){DPC_DEV_CPU, 0};
    if (!o->devices)
        return 0;
    char list[4096];
    if (!expand_local(o->devices, list, sizeof list))
        return cli_usage("%s", "--devices list too long");
    dpc_status s = dpc_parse_devices(list, devs, DPC_MAX_DEVICES, ndev, &e);
    return s == DPC_OK ? 0 : cli_fail(s, &e);
}
