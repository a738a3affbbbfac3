/* fuzz_onnx.c - libFuzzer target for the ONNX reader and the importer.
 * Any input must either import or fail with a one-line message (DPC_EUSER
 * or DPC_ENOMEM, never an internal error); an import's .dp text must be
 * exactly dp_len bytes, end with the entry line, and hold no control
 * characters but newlines, and its weights must survive the safetensors
 * writer and reader. The input is first parsed from memory
 * (dpc_onnx_parse), then written to model.onnx in a private directory and
 * imported from there (external data resolve inside that directory,
 * which holds nothing else). */
#define _GNU_SOURCE
#include "onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64], g_path[96];

static void cleanup(void) {
    if (g_path[0])
        unlink(g_path);
    if (g_dir[0])
        rmdir(g_dir);
}

static void one_line(const dpc_err *e) {
    if (!e->msg[0] || strchr(e->msg, '\n'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dpc_err e = {0};
    struct Onnx__ModelProto *m;
    dpc_status s = dpc_onnx_parse(data, size, "fuzz.onnx", &m, &e);
    if (s != DPC_OK)
        one_line(&e);
    else
        dpc_onnx_model_free(m);
    if (!g_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/fuzz_onnx-XXXXXX", tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
        if (!mkdtemp(g_dir))
            abort();
        snprintf(g_path, sizeof g_path, "%s/model.onnx", g_dir);
        atexit(cleanup);
    }
    FILE *f = fopen(g_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    dpc_onnx_import_opts o = {.path = g_path};
    dpc_onnx_result r;
    memset(&e, 0, sizeof e);
    s = dpc_onnx_import(&o, &r, &e);
    if (s != DPC_OK) {
        one_line(&e);
        /* DPC_EINTERNAL included: the importer's own bug, refused (a look-up
         * the arity check should have ruled out gets a placeholder value, not
         * memory outside the array, so only the status tells) */
        if (s != DPC_EUSER && s != DPC_ENOMEM && s != DPC_EIO)
            abort();
        return 0;
    }
    if (!r.dp || strlen(r.dp) != r.dp_len || r.dp_len < 16 || strcmp(r.dp + r.dp_len - 16, "model = Model()\n"))
        abort();
    for (size_t i = 0; i < r.dp_len; i++)
        if ((unsigned char)r.dp[i] < 0x20 && r.dp[i] != '\n')
            abort();
    dpc_safetensors *st;
    if (dpc_onnx_result_weights(&r, &st, &e) != DPC_OK)
        abort();
    if (st->n != r.nweights)
        abort();
    dpc_st_free(st);
    dpc_onnx_result_free(&r);
    return 0;
}
