/* import.c - `dpc import MODEL.onnx -o MODEL.dp [--weights-out W.safetensors]
 * [--dim NAME=SIZE ...] [--list-ops]`, and the one function every other
 * verb calls on its model path: an .onnx file is imported in memory and
 * staged as a .dp plus its weights in a private temporary directory,
 * removed when the process exits. */
#include "import.h"

#include "onnx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(const char *msg, const char *arg) {
    fprintf(stderr, "dpc: error: ");
    fprintf(stderr, msg, arg);
    fprintf(stderr, "\nusage: dpc import MODEL.onnx -o MODEL.dp [--weights-out W.safetensors] [--dim NAME=SIZE ...]\n"
                    "       dpc import --list-ops\n");
    return 2;
}

static int fail(dpc_status s, const dpc_err *e) {
    fprintf(stderr, "dpc: error: %s\n", e->msg);
    return s == DPC_EUSAGE ? 2 : 1;
}

static int parse_dim(const char *a, dpc_onnx_dim *d, char *buf, size_t n) {
    const char *eq = strchr(a, '=');
    if (!eq || eq == a || (size_t)(eq - a) >= n)
        return usage("--dim takes NAME=SIZE, got '%s'", a);
    memcpy(buf, a, (size_t)(eq - a));
    buf[eq - a] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (errno || end == eq + 1 || *end || v < 1 || v > 2147483647)
        return usage("--dim SIZE must be an integer from 1 to 2147483647, got '%s'", a);
    d->name = buf;
    d->value = v;
    return 0;
}

/* The weights file beside out: MODEL.dp -> MODEL.safetensors. */
static void default_weights(const char *out, char *buf, size_t n) {
    size_t L = strlen(out);
    if (L > 3 && strcmp(out + L - 3, ".dp") == 0)
        snprintf(buf, n, "%.*s.safetensors", (int)(L - 3), out);
    else
        snprintf(buf, n, "%s.safetensors", out);
}

static int list_ops(void) {
    for (int i = 0; i < dpc_onnx_nops(); i++) {
        int lo, hi;
        const char *note;
        const char *name = dpc_onnx_op_name(i, &lo, &hi, &note);
        printf("%s\t%d\t%d\t%s\n", name, lo < DPC_ONNX_MIN_OPSET ? DPC_ONNX_MIN_OPSET : lo,
               hi ? hi : DPC_ONNX_MAX_OPSET, note ? note : "");
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

int cli_import(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *wout = NULL;
    dpc_onnx_dim dims[DPC_ONNX_MAX_DIMS];
    char dimbuf[DPC_ONNX_MAX_DIMS][256];
    int ndims = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--list-ops"))
            return list_ops();
        bool val = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--weights-out") || !strcmp(a, "--dim");
        if (val && i + 1 >= argc)
            return usage("option '%s' needs a value", a);
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (out)
                return usage("%s", "give -o once");
            out = argv[++i];
        } else if (!strcmp(a, "--weights-out")) {
            if (wout)
                return usage("%s", "give --weights-out once");
            wout = argv[++i];
        } else if (!strcmp(a, "--dim")) {
            if (ndims == DPC_ONNX_MAX_DIMS)
                return usage("too many --dim options (at most %s)", "8");
            int rc = parse_dim(argv[++i], &dims[ndims], dimbuf[ndims], sizeof dimbuf[ndims]);
            if (rc)
                return rc;
            ndims++;
        } else if (a[0] == '-' && a[1])
            return usage("unknown option '%s'", a);
        else if (model)
            return usage("unexpected argument '%s'", a);
        else
            model = a;
    }
    if (!model)
        return usage("%s", "missing the model file");
    if (!out)
        return usage("%s", "import needs -o MODEL.dp");
    char wdef[4096];
    if (!wout) {
        default_weights(out, wdef, sizeof wdef);
        wout = wdef;
    }
    if (dpc_same_file(out, model) || dpc_same_file(wout, model) || dpc_same_file(out, wout))
        return usage("%s", "the outputs must differ from each other and from the model");
    dpc_onnx_import_opts io = {.path = model, .dims = dims, .ndims = ndims};
    dpc_onnx_result r;
    dpc_err e;
    dpc_status s = dpc_onnx_import(&io, &r, &e);
    if (s != DPC_OK)
        return fail(s, &e);
    dpc_buf img;
    s = dpc_st_serialize(r.weights, r.nweights, NULL, NULL, 0, &img, &e);
    if (s == DPC_OK) {
        const char *paths[2] = {out, wout};
        const void *data[2] = {r.dp, img.data};
        size_t lens[2] = {r.dp_len, img.len};
        s = dpc_write_files_atomic(2, paths, data, lens, &e); /* both or neither */
        dpc_buf_free(&img);
    }
    dpc_onnx_result_free(&r);
    return s == DPC_OK ? 0 : fail(s, &e);
}

/* ---- .onnx wherever a .dp is accepted ---- */

static char g_dir[4096], g_dp[4200], g_w[4200], g_orig[4096];

static void cleanup(void) {
    if (g_dp[0])
        unlink(g_dp);
    if (g_w[0])
        unlink(g_w);
    if (g_dir[0])
        rmdir(g_dir);
}

const char *cli_onnx_original(void) { return g_orig[0] ? g_orig : NULL; }

int cli_onnx_stage(const char **model, const char **weights) {
    if (!dpc_onnx_path(*model))
        return 0;
    if (g_dir[0]) {
        fprintf(stderr, "dpc: error: one ONNX model per command\n");
        return 1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/dpc-onnx-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "dpc: error: cannot create a temporary directory in %s: %s\n", tmp && *tmp ? tmp : "/tmp",
                strerror(errno));
        g_dir[0] = 0;
        return 1;
    }
    atexit(cleanup);
    snprintf(g_orig, sizeof g_orig, "%s", *model);
    dpc_onnx_import_opts io = {.path = *model};
    dpc_onnx_result r;
    dpc_err e;
    dpc_status s = dpc_onnx_import(&io, &r, &e);
    if (s != DPC_OK)
        return fail(s, &e);
    /* the model's own name, so that messages and `dpc print` read well */
    const char *base = strrchr(*model, '/');
    base = base ? base + 1 : *model;
    size_t L = strlen(base);
    snprintf(g_dp, sizeof g_dp, "%s/%.*s.dp", g_dir, (int)(L > 5 ? L - 5 : L), base);
    snprintf(g_w, sizeof g_w, "%s/weights.safetensors", g_dir);
    dpc_buf img;
    s = dpc_st_serialize(r.weights, r.nweights, NULL, NULL, 0, &img, &e);
    if (s == DPC_OK) {
        const char *paths[2] = {g_dp, g_w};
        const void *data[2] = {r.dp, img.data};
        size_t lens[2] = {r.dp_len, img.len};
        s = dpc_write_files_atomic(2, paths, data, lens, &e);
        dpc_buf_free(&img);
    }
    dpc_onnx_result_free(&r);
    if (s != DPC_OK)
        return fail(s, &e);
    *model = g_dp;
    if (!*weights)
        *weights = g_w;
    return 0;
}
