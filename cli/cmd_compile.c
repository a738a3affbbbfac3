/* cmd_compile.c - .dpa artifacts: `dpc compile` (a model, its weights and
 * kernels for the --arch list into one file) and `dpc inspect` (what an
 * artifact holds). Loading an artifact for the other verbs is cli/load.c. */
#include "cli.h"
#include "import.h"
#include "nvrtc_compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_compile(int argc, char **argv) {
    cli_opts o;
    int rc = cli_parse_opts(argc, argv, &o, "owa");
    if (rc)
        return rc;
    if (o.nout > 1)
        return cli_usage("%s", "compile writes one artifact: give -o once");
    char def[4096];
    const char *out = o.nout ? o.out[0] : NULL;
    if (!out) {
        size_t n = strlen(o.model);
        if (n > 3 && strcmp(o.model + n - 3, ".dp") == 0)
            snprintf(def, sizeof def, "%.*s.dpa", (int)(n - 3), o.model);
        else
            snprintf(def, sizeof def, "%s.dpa", o.model);
        out = def;
    }
    if ((rc = cli_check_outputs(&o, &out, 1)))
        return rc;
    char archbuf[1024];
    const char *archs[DPC_ARTIFACT_MAX_ARCHS];
    int narchs = 0;
    if (o.arch) {
        if (strlen(o.arch) >= sizeof archbuf)
            return cli_usage("%s", "--arch list too long");
        snprintf(archbuf, sizeof archbuf, "%s", o.arch);
        for (char *p = archbuf;;) {
            char *q = strchr(p, ',');
            if (q)
                *q = 0;
            if (!dpc_nvrtc_arch_valid(p))
                return cli_usage("bad --arch '%s' (expected sm_XX or compute_XX, e.g. sm_90)", p);
            if (narchs == DPC_ARTIFACT_MAX_ARCHS)
                return cli_usage("%s", "too many --arch entries");
            archs[narchs++] = p;
            if (!q)
                break;
            p = q + 1;
        }
    }
    dpc_artifact_opts ao = {.weights = o.weights, .archs = archs, .narchs = narchs,
                            .cuda_suffix = getenv("DPC_FAULT_CUDA_SOURCE")};
    dpc_safetensors *imported = cli_onnx_artifact(o.model, !o.weights, &ao); /* MODEL.onnx: embeds its weights */
    dpc_buf img, diags, warn;
    dpc_buf_init(&diags);
    dpc_buf_init(&warn);
    dpc_err e;
    dpc_status s = dpc_artifact_build(o.model, &ao, &img, &diags, &warn, &e);
    if (imported)
        dpc_st_free(imported);
    if (warn.len)
        fprintf(stderr, "dpc: warning: %s\n", warn.data);
    dpc_buf_free(&warn);
    if (s == DPC_OK)
        s = dpc_write_file_atomic(out, img.data, img.len, &e);
    dpc_buf_free(&img);
    if (s != DPC_OK && diags.len) {
        fputs(diags.data, stderr);
        dpc_buf_free(&diags);
        return 1;
    }
    dpc_buf_free(&diags);
    return s == DPC_OK ? 0 : cli_fail(s, &e);
}

int cmd_inspect(int argc, char **argv) {
    cli_opts o;
    int rc = cli_parse_opts(argc, argv, &o, "");
    if (rc)
        return rc;
    if (!dpc_artifact_path(o.model))
        return cli_usage("inspect takes a compiled artifact (.dpa), got '%s'",
                           cli_onnx_original() ? cli_onnx_original() : o.model);
    dpc_model *m;
    if ((rc = cli_load_dpa(o.model, &m)))
        return rc;
    dpc_buf out;
    dpc_buf_init(&out);
    dpc_artifact_describe(cli_dpa(), m, &out);
    dpc_model_free(m);
    return cli_emit(&out);
}
