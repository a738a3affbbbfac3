/* test_api.c - libdpc's public API, linked against libdpc.so and using only
 * dpc.h. Artifacts, weights and reference outputs are made with the dpc
 * CLI; every result of the API must equal `dpc run`'s, byte for byte.
 *
 *   test_api DPC MODELS_DIR WORK_DIR
 *
 * Covers: load from file and memory; every bad-artifact class (truncation
 * at every length of the header region, wrong magic, every single-byte
 * change of the header, future format and other dpc version); bind from
 * file and memory, a failed bind keeping the previous weights; embedded
 * weights; devices; tuple outputs and keyword scalars with their type and
 * presence checks; int32 index widening; input count, dtype and shape
 * errors; the text calls and their buffer rule; tensors; per-handle and
 * per-thread messages; several threads running different programs. */
#define _POSIX_C_SOURCE 200809L
#include <dpc.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_NOTE() fprintf(stderr, "  (last error: %s)\n", dpc_last_error())
#include "../check.h"

static const char *DPC, *MODELS, *WORK;

static char *path_of(const char *name) {
    static _Thread_local char buf[8][4096];
    static _Thread_local int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", WORK, name);
    return b;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) {
        p[n] = 0;
        *len = (size_t)n;
    }
    return p;
}

static bool same_file(const char *a, const char *b) {
    size_t la, lb;
    unsigned char *pa = slurp(a, &la), *pb = slurp(b, &lb);
    bool same = pa && pb && la == lb && memcmp(pa, pb, la) == 0;
    free(pa);
    free(pb);
    return same;
}

/* Saves t with the API and compares with a file dpc run wrote. */
static bool equals_npy(const dpc_tensor *t, const char *ref) {
    char *tmp = path_of("api_out.npy");
    return t && dpc_tensor_save_npy(t, tmp) == DPC_OK && same_file(tmp, ref);
}

static dpc_tensor *ramp(dpc_dtype dt, int rank, const int64_t *shape, int mod) {
    dpc_tensor *t = NULL;
    if (dpc_tensor_create(dt, rank, shape, NULL, &t) != DPC_OK)
        return NULL;
    for (int64_t i = 0; i < dpc_tensor_numel(t); i++) {
        if (dt == DPC_F32)
            ((float *)dpc_tensor_data(t))[i] = (float)((i * 7919) % 201) / 100.0f - 1.0f;
        else if (dt == DPC_I64)
            ((int64_t *)dpc_tensor_data(t))[i] = (i * 31) % mod;
        else if (dt == DPC_I32)
            ((int32_t *)dpc_tensor_data(t))[i] = (int32_t)((i * 31) % mod);
    }
    return t;
}

/* ---------------------------------------------------------------- setup */

static void setup(void) {
    const char *models[] = {"simple", "imports", "mlp", "activations", "transformer", "multi_input"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        const char *m = models[i];
        sh("'%s' init '%s/%s.dp' -o '%s/%s.st' --seed %zu", DPC, MODELS, m, WORK, m, i + 1);
        sh("'%s' compile '%s/%s.dp' -o '%s/%s.dpa'", DPC, MODELS, m, WORK, m);
        sh("'%s' compile '%s/%s.dp' -o '%s/%s_w.dpa' --weights '%s/%s.st'", DPC, MODELS, m, WORK, m, WORK, m);
    }
    /* inputs, written with the API, and the CLI's outputs for them */
    int64_t s10[2] = {3, 10}, s784[2] = {5, 784}, s16[2] = {4, 16}, s5[2] = {3, 5}, sid[2] = {2, 8};
    struct {
        const char *name;
        dpc_dtype dt;
        const int64_t *shape;
        int mod;
    } ins[] = {{"x10.npy", DPC_F32, s10, 0},  {"x784.npy", DPC_F32, s784, 0}, {"x16.npy", DPC_F32, s16, 0},
               {"x5.npy", DPC_F32, s5, 0},    {"ids.npy", DPC_I64, sid, 100},  {"pos.npy", DPC_I64, sid, 8},
               {"ids32.npy", DPC_I32, sid, 100}};
    for (size_t i = 0; i < sizeof ins / sizeof *ins; i++) {
        dpc_tensor *t = ramp(ins[i].dt, 2, ins[i].shape, ins[i].mod);
        if (!t || dpc_tensor_save_npy(t, path_of(ins[i].name)) != DPC_OK) {
            fprintf(stderr, "cannot write %s: %s\n", ins[i].name, dpc_last_error());
            exit(1);
        }
        dpc_tensor_free(t);
    }
    sh("cd '%s' && '%s' run '%s/simple.dp' --weights simple.st --input x10.npy -o ref_simple.npy", WORK, DPC, MODELS);
    sh("cd '%s' && '%s' run '%s/simple.dp' --weights simple.st --input x10.npy -o ref_simple2.npy --devices cpu,cpu",
       WORK, DPC, MODELS);
    sh("cd '%s' && '%s' run '%s/simple.dp' --weights simple.st --input x10.npy -o ref_simple3.npy --devices cpu,cpu,cpu",
       WORK, DPC, MODELS);
    sh("cd '%s' && '%s' run '%s/imports.dp' --weights imports.st --input x10.npy --kw gain=2.5 -o ref_imp0.npy "
       "-o ref_imp1.npy",
       WORK, DPC, MODELS);
    sh("cd '%s' && '%s' run '%s/mlp.dp' --weights mlp.st --input x784.npy -o ref_mlp.npy", WORK, DPC, MODELS);
    sh("cd '%s' && '%s' run '%s/activations.dp' --weights activations.st --input x16.npy --kw shift=-0.25 --kw reps=3 "
       "--kw verbose=true -o ref_act0.npy -o ref_act1.npy",
       WORK, DPC, MODELS);
    sh("cd '%s' && '%s' run '%s/transformer.dp' --weights transformer.st --input ids.npy --input pos.npy -o ref_tr0.npy -o ref_tr1.npy",
       WORK, DPC, MODELS);
    sh("'%s' print '%s/imports.dp' > '%s/print_imports.txt'", DPC, MODELS, WORK);
    /* a model with a required scalar */
    FILE *f = fopen(path_of("req.dp"), "w");
    fputs("module Req {\n    fc = Linear(4, 2)\n    forward(x: [N, 4], k: int) {\n        return fc(x) * k\n    }\n}\n"
          "model = Req()\n",
          f);
    fclose(f);
    sh("'%s' init '%s' -o '%s' && '%s' compile '%s' -o '%s' --weights '%s'", DPC, path_of("req.dp"),
       path_of("req.st"), DPC, path_of("req.dp"), path_of("req.dpa"), path_of("req.st"));
}

/* ---------------------------------------------------------------- tests */

static void test_library(void) {
    CHECK(strcmp(dpc_version(), "") != 0);
    CHECK(dpc_artifact_format() == 3);
    CHECK(strcmp(dpc_status_name(DPC_EUSER), "user error") == 0 && strcmp(dpc_status_name(DPC_OK), "ok") == 0);
}

static void test_tensors(void) {
    int64_t shape[3] = {2, 3, 4};
    float data[24];
    for (int i = 0; i < 24; i++)
        data[i] = (float)i;
    dpc_tensor *t = NULL;
    CHECK(dpc_tensor_create(DPC_F32, 3, shape, data, &t) == DPC_OK);
    CHECK(dpc_tensor_dtype(t) == DPC_F32 && dpc_tensor_rank(t) == 3 && dpc_tensor_dim(t, 1) == 3);
    CHECK(dpc_tensor_dim(t, 3) == -1 && dpc_tensor_dim(t, -1) == -1);
    CHECK(dpc_tensor_numel(t) == 24 && dpc_tensor_nbytes(t) == 96);
    CHECK(((float *)dpc_tensor_data(t))[23] == 23.0f);
    CHECK(((uintptr_t)dpc_tensor_data(t) & 63) == 0);
    CHECK(dpc_tensor_save_npy(t, path_of("t.npy")) == DPC_OK);
    dpc_tensor *u = NULL;
    CHECK(dpc_tensor_load_npy(path_of("t.npy"), &u) == DPC_OK);
    CHECK(u && dpc_tensor_nbytes(u) == 96 && memcmp(dpc_tensor_data(u), data, 96) == 0);
    size_t len;
    unsigned char *img = slurp(path_of("t.npy"), &len);
    dpc_tensor *v = NULL;
    CHECK(img && dpc_tensor_load_npy_memory(img, len, &v) == DPC_OK && dpc_tensor_numel(v) == 24);
    dpc_tensor_free(v);
    CHECK(dpc_tensor_load_npy_memory(img, len - 1, &v) != DPC_OK && strlen(dpc_last_error()) > 0);
    v = NULL;
    free(img);
    dpc_tensor_free(u);
    dpc_tensor_free(v);
    dpc_tensor_free(t);
    dpc_tensor_free(NULL);
    CHECK(dpc_tensor_create((dpc_dtype)42, 1, shape, NULL, &t) == DPC_EUSAGE && t == NULL);
    int64_t neg = -1;
    CHECK(dpc_tensor_create(DPC_F32, 1, &neg, NULL, &t) != DPC_OK && t == NULL);
    int64_t huge[3] = {1LL << 32, 1LL << 32, 16};
    CHECK(dpc_tensor_create(DPC_F32, 3, huge, NULL, &t) != DPC_OK && t == NULL);
    CHECK(dpc_tensor_create(DPC_F64, 0, NULL, NULL, &t) == DPC_OK && dpc_tensor_numel(t) == 1);
    dpc_tensor_free(t);
    CHECK(strcmp(dpc_dtype_name(DPC_I64), "int64") == 0 && dpc_dtype_size(DPC_BF16) == 2);
    CHECK(dpc_tensor_load_npy(path_of("missing.npy"), &t) != DPC_OK && strstr(dpc_last_error(), "missing.npy"));
    /* bool bytes other than 0 and 1: refused on the way in and on the way out */
    int64_t three = 3;
    unsigned char bits[3] = {0, 1, 1};
    CHECK(dpc_tensor_create(DPC_BOOL, 1, &three, bits, &t) == DPC_OK);
    ((unsigned char *)dpc_tensor_data(t))[1] = 2;
    CHECK(dpc_tensor_save_npy(t, path_of("b.npy")) == DPC_EUSAGE &&
          strstr(dpc_last_error(), "bool array holds byte 0x02 at element 1 (only 0 and 1 are valid)"));
    CHECK(access(path_of("b.npy"), F_OK) != 0);
    dpc_tensor_free(t);
    bits[2] = 0xff;
    CHECK(dpc_tensor_create(DPC_BOOL, 1, &three, bits, &t) == DPC_EUSAGE && t == NULL &&
          strstr(dpc_last_error(), "byte 0xff at element 2"));
}

static void test_signature_and_text(void) {
    dpc_program *p = NULL;
    CHECK(dpc_program_load(path_of("imports.dpa"), &p) == DPC_OK);
    if (!p)
        return;
    CHECK(strcmp(dpc_program_name(p), "Composite") == 0);
    CHECK(dpc_program_num_inputs(p) == 1 && dpc_program_num_outputs(p) == 2 && dpc_program_num_scalars(p) == 1);
    CHECK(!dpc_program_has_embedded_weights(p));
    const char *name;
    dpc_dtype dt;
    int rank;
    int64_t shape[8];
    CHECK(dpc_program_input(p, 0, &name, &dt, &rank, shape) == DPC_OK);
    CHECK(!strcmp(name, "x") && dt == DPC_F32 && rank == 2 && shape[0] == -1 && shape[1] == 10);
    CHECK(dpc_program_output(p, 1, &dt, &rank, shape) == DPC_OK && rank == 2 && shape[1] == 10);
    CHECK(dpc_program_input(p, 1, NULL, NULL, NULL, NULL) == DPC_EUSAGE && strstr(dpc_program_error(p), "out of range"));
    dpc_scalar_type st;
    int has;
    double dv;
    CHECK(dpc_program_scalar(p, 0, &name, &st, &has, &dv) == DPC_OK);
    CHECK(!strcmp(name, "gain") && st == DPC_SCALAR_FLOAT && has && dv == 1.5);
    CHECK(strcmp(dpc_program_error(p), "") == 0); /* cleared by the successful call */

    /* print: snprintf rule, and equal to `dpc print` */
    size_t len = 0, rlen;
    CHECK(dpc_program_print(p, NULL, 0, &len) == DPC_OK && len > 10);
    char small[8];
    CHECK(dpc_program_print(p, small, sizeof small, &len) == DPC_OK && strlen(small) == 7);
    char *buf = malloc(len + 1);
    size_t len2;
    CHECK(dpc_program_print(p, buf, len + 1, &len2) == DPC_OK && len2 == len && strlen(buf) == len);
    char *ref = (char *)slurp(path_of("print_imports.txt"), &rlen);
    CHECK(ref && rlen == len && memcmp(ref, buf, len) == 0);
    CHECK(dpc_program_print(p, NULL, 5, &len) == DPC_EUSAGE);
    free(ref);
    free(buf);
    char big[1 << 16];
    CHECK(dpc_program_ir(p, 0, big, sizeof big, &len) == DPC_OK && strstr(big, "graph Composite(") && len < sizeof big);
    CHECK(dpc_program_ir(p, 1, big, sizeof big, &len) == DPC_OK && strstr(big, "kernels of Composite"));
    CHECK(dpc_program_source(p, "cpu", big, sizeof big, &len) == DPC_OK && strstr(big, "dpc_forward"));
    CHECK(dpc_program_source(p, "cuda", NULL, 0, &len) == DPC_OK && len > 0);
    CHECK(dpc_program_source(p, "tpu", big, sizeof big, &len) == DPC_EUSAGE && strstr(dpc_program_error(p), "tpu"));
    CHECK(dpc_program_describe(p, big, sizeof big, &len) == DPC_OK && strstr(big, "lib/blocks.dp") &&
          strstr(big, "gain: float = 1.5"));

    /* run without weights: refused, names the remedy */
    int64_t s10[2] = {3, 10};
    dpc_tensor *x = ramp(DPC_F32, 2, s10, 0), *out[2] = {0};
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&x, 1, NULL, NULL, 0, out, 2) == DPC_EUSER);
    CHECK(strstr(dpc_program_error(p), "no weights") && out[0] == NULL);

    /* bind from a file; tuple outputs and a keyword scalar equal dpc run */
    CHECK(dpc_program_bind_weights(p, path_of("imports.st")) == DPC_OK);
    dpc_tensor *in = NULL;
    CHECK(dpc_tensor_load_npy(path_of("x10.npy"), &in) == DPC_OK);
    const char *kn[] = {"gain"};
    double kv[] = {2.5};
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, kn, kv, 1, out, 2) == DPC_OK);
    CHECK(equals_npy(out[0], path_of("ref_imp0.npy")));
    CHECK(equals_npy(out[1], path_of("ref_imp1.npy")));
    dpc_tensor_free(out[0]);
    dpc_tensor_free(out[1]);
    out[0] = out[1] = NULL;

    /* a failed bind keeps the weights bound before */
    CHECK(dpc_program_bind_weights_memory(p, "not safetensors", 15) == DPC_EUSER);
    CHECK(strlen(dpc_program_error(p)) > 0);
    CHECK(dpc_program_bind_weights(p, path_of("simple.st")) == DPC_EUSER);
    CHECK(strstr(dpc_program_error(p), "missing") != NULL);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, kn, kv, 1, out, 2) == DPC_OK);
    CHECK(equals_npy(out[0], path_of("ref_imp0.npy")));
    dpc_tensor_free(out[0]);
    dpc_tensor_free(out[1]);
    out[0] = out[1] = NULL;

    /* bind from memory */
    size_t wl;
    unsigned char *w = slurp(path_of("imports.st"), &wl);
    CHECK(w && dpc_program_bind_weights_memory(p, w, wl) == DPC_OK);
    free(w);

    /* keyword and argument errors */
    const char *bad_kn[] = {"gian"};
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, bad_kn, kv, 1, out, 2) == DPC_EUSER);
    CHECK(strstr(dpc_program_error(p), "gian") && out[0] == NULL && out[1] == NULL);
    const char *twice[] = {"gain", "gain"};
    double tv[] = {1, 2};
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, twice, tv, 2, out, 2) == DPC_EUSER);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, NULL, NULL, 0, out, 1) == DPC_EUSAGE);
    CHECK(strstr(dpc_program_error(p), "returns 2"));
    CHECK(dpc_program_run(p, NULL, 0, NULL, NULL, 0, out, 2) == DPC_EUSAGE);
    int64_t s9[2] = {3, 9};
    dpc_tensor *x9 = ramp(DPC_F32, 2, s9, 0);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&x9, 1, NULL, NULL, 0, out, 2) == DPC_EUSER);
    CHECK(strstr(dpc_program_error(p), "[N, 10]") && strstr(dpc_program_error(p), "[3, 9]"));
    dpc_tensor *xi = ramp(DPC_I64, 2, s10, 5);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&xi, 1, NULL, NULL, 0, out, 2) == DPC_EUSER);
    CHECK(strstr(dpc_program_error(p), "float32"));
    CHECK(dpc_program_set_devices(p, "cpu,,cpu") == DPC_EUSAGE && strlen(dpc_program_error(p)) > 0);
    CHECK(strcmp(dpc_last_error(), dpc_program_error(p)) == 0);
    dpc_tensor_free(x9);
    dpc_tensor_free(xi);
    dpc_tensor_free(x);
    dpc_tensor_free(in);
    dpc_program_free(p);
}

static void test_embedded_devices_memory(void) {
    /* embedded weights, from memory, on one and on two replicas */
    size_t len;
    unsigned char *img = slurp(path_of("simple_w.dpa"), &len);
    dpc_program *p = NULL;
    CHECK(img && dpc_program_load_memory(img, len, "simple_w.dpa", &p) == DPC_OK);
    free(img);
    if (!p)
        return;
    CHECK(dpc_program_has_embedded_weights(p));
    dpc_tensor *in = NULL, *out = NULL;
    CHECK(dpc_tensor_load_npy(path_of("x10.npy"), &in) == DPC_OK);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, NULL, NULL, 0, &out, 1) == DPC_OK);
    CHECK(equals_npy(out, path_of("ref_simple.npy")));
    dpc_tensor_free(out);
    out = NULL;
    CHECK(dpc_program_set_devices(p, "cpu,cpu") == DPC_OK);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, NULL, NULL, 0, &out, 1) == DPC_OK);
    CHECK(equals_npy(out, path_of("ref_simple2.npy")));
    dpc_tensor_free(out);
    out = NULL;
    /* 16-bit storage is a CUDA option: refused at the run on CPU devices,
     * which then still work in f32; an unknown dtype at once */
    CHECK(dpc_program_set_dtype(p, "f8") == DPC_EUSAGE && strstr(dpc_program_error(p), "unknown dtype 'f8'"));
    CHECK(dpc_program_set_dtype(p, "bf16") == DPC_OK);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, NULL, NULL, 0, &out, 1) == DPC_EUSER && !out);
    CHECK(strstr(dpc_program_error(p), "bf16 storage needs CUDA devices"));
    CHECK(dpc_program_set_dtype(p, "float32") == DPC_OK);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, NULL, NULL, 0, &out, 1) == DPC_OK);
    CHECK(equals_npy(out, path_of("ref_simple2.npy")));
    dpc_tensor_free(out);
    out = NULL;
    /* devices chosen before weights are bound apply at the first run */
    dpc_program *q = NULL;
    CHECK(dpc_program_load(path_of("simple.dpa"), &q) == DPC_OK);
    CHECK(dpc_program_set_devices(q, "cpu,cpu,cpu") == DPC_OK);
    CHECK(dpc_program_bind_weights(q, path_of("simple.st")) == DPC_OK);
    CHECK(dpc_program_run(q, (const dpc_tensor *const *)&in, 1, NULL, NULL, 0, &out, 1) == DPC_OK);
    CHECK(equals_npy(out, path_of("ref_simple3.npy")));
    dpc_tensor_free(out);
    dpc_program_free(q);
    dpc_tensor_free(in);
    dpc_program_free(p);

    /* int, bool and float keywords; a required scalar */
    CHECK(dpc_program_load(path_of("activations_w.dpa"), &p) == DPC_OK);
    CHECK(dpc_tensor_load_npy(path_of("x16.npy"), &in) == DPC_OK);
    const char *kn[] = {"reps", "verbose", "shift"};
    double kv[] = {3, 1, -0.25};
    dpc_tensor *two[2] = {0};
    CHECK(dpc_program_num_outputs(p) == 2);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, kn, kv, 3, two, 2) == DPC_OK);
    CHECK(equals_npy(two[0], path_of("ref_act0.npy")));
    CHECK(equals_npy(two[1], path_of("ref_act1.npy")));
    dpc_tensor_free(two[0]);
    dpc_tensor_free(two[1]);
    two[0] = two[1] = NULL;
    double bad_int[] = {2.5, 1, 0};
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, kn, bad_int, 3, two, 2) == DPC_EUSER);
    CHECK(strstr(dpc_program_error(p), "reps") && strstr(dpc_program_error(p), "int"));
    double bad_bool[] = {2, 7, 0};
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, kn, bad_bool, 3, two, 2) == DPC_EUSER);
    CHECK(strstr(dpc_program_error(p), "bool"));
    dpc_tensor_free(in);
    dpc_program_free(p);
    CHECK(dpc_program_load(path_of("req.dpa"), &p) == DPC_OK);
    int64_t s4[2] = {2, 4};
    in = ramp(DPC_F32, 2, s4, 0);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, NULL, NULL, 0, &out, 1) == DPC_EUSER);
    CHECK(strstr(dpc_program_error(p), "'k'"));
    const char *kk[] = {"k"};
    double k3[] = {3};
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)&in, 1, kk, k3, 1, &out, 1) == DPC_OK && out);
    dpc_tensor_free(out);
    dpc_tensor_free(in);
    dpc_program_free(p);

    /* int64 indices, and int32 ones widened */
    CHECK(dpc_program_load(path_of("transformer_w.dpa"), &p) == DPC_OK);
    dpc_tensor *ids, *ids32, *pos, *o = NULL;
    CHECK(dpc_tensor_load_npy(path_of("ids.npy"), &ids) == DPC_OK);
    CHECK(dpc_tensor_load_npy(path_of("ids32.npy"), &ids32) == DPC_OK);
    CHECK(dpc_tensor_load_npy(path_of("pos.npy"), &pos) == DPC_OK);
    dpc_tensor *a[2] = {ids, pos}, *b[2] = {ids32, pos}, *o2[2] = {0};
    (void)o;
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)a, 2, NULL, NULL, 0, o2, 2) == DPC_OK);
    CHECK(equals_npy(o2[0], path_of("ref_tr0.npy")) && equals_npy(o2[1], path_of("ref_tr1.npy")));
    dpc_tensor_free(o2[0]);
    dpc_tensor_free(o2[1]);
    CHECK(dpc_program_run(p, (const dpc_tensor *const *)b, 2, NULL, NULL, 0, o2, 2) == DPC_OK);
    CHECK(equals_npy(o2[0], path_of("ref_tr0.npy")) && equals_npy(o2[1], path_of("ref_tr1.npy")));
    dpc_tensor_free(o2[0]);
    dpc_tensor_free(o2[1]);
    dpc_tensor_free(ids);
    dpc_tensor_free(ids32);
    dpc_tensor_free(pos);
    dpc_program_free(p);
}

/* Every load failure: NULL handle, message naming the problem. */
static bool refused(const void *img, size_t len, const char *needle) {
    dpc_program *p = (dpc_program *)1;
    dpc_status s = dpc_program_load_memory(img, len, "bad.dpa", &p);
    bool ok = s != DPC_OK && p == NULL && strlen(dpc_last_error()) > 0 &&
              (!needle || strstr(dpc_last_error(), needle) != NULL);
    if (!ok)
        fprintf(stderr, "  not refused as expected (len %zu, want '%s'): %s\n", len, needle ? needle : "",
                s == DPC_OK ? "loaded" : dpc_last_error());
    if (s == DPC_OK)
        dpc_program_free(p);
    return ok;
}

static void test_bad_artifacts(void) {
    size_t len, wlen;
    unsigned char *img = slurp(path_of("simple.dpa"), &len);
    unsigned char *wimg = slurp(path_of("simple_w.dpa"), &wlen);
    if (!img || !wimg) {
        CHECK(!"cannot read the artifacts");
        return;
    }
    uint64_t hl = 0, whl = 0;
    for (int i = 7; i >= 0; i--) {
        hl = hl << 8 | img[i];
        whl = whl << 8 | wimg[i];
    }
    CHECK(8 + hl == len);               /* no weights: the file ends with the header */
    CHECK((8 + whl) % 4096 == 0);        /* weights: data section page-aligned */
    dpc_program *p = NULL;
    CHECK(dpc_program_load(path_of("nope.dpa"), &p) != DPC_OK && p == NULL && strstr(dpc_last_error(), "nope.dpa"));
    CHECK(dpc_program_load_memory(NULL, 0, NULL, &p) != DPC_OK && p == NULL);

    /* truncation: every length up to the end of the header, then a sample */
    int bad = 0;
    for (size_t n = 0; n < len; n++)
        bad += !refused(img, n, NULL);
    for (size_t n = 0; n < wlen; n += (n < 8 + whl ? 1 : 97))
        bad += !refused(wimg, n, NULL);
    CHECK(bad == 0);
    /* wrong magic */
    unsigned char *copy = malloc(wlen);
    memcpy(copy, img, len);
    memcpy(copy, "\x7f" "ELF\2\1\1\0\0", 9);
    CHECK(refused(copy, len, "not a dpc artifact"));
    memcpy(copy, img, len);
    copy[8] = '[';
    CHECK(refused(copy, len, "not a dpc artifact"));
    size_t wl;
    unsigned char *weights = slurp(path_of("simple.st"), &wl);
    CHECK(weights && refused(weights, wl, "not a dpc artifact"));
    free(weights);
    /* every single-byte change of the header (XOR 0xff and, a second pass,
     * +1: a space becomes '!', a digit the next one) */
    bad = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < len; i++) {
            memcpy(copy, img, len);
            copy[i] = pass ? (unsigned char)(copy[i] + 1) : (unsigned char)(copy[i] ^ 0xff);
            bad += !refused(copy, len, NULL);
        }
    /* and of the weights artifact: its header and a sample of its data */
    for (size_t i = 0; i < wlen; i += (i < 8 + whl ? 1 : 13)) {
        memcpy(copy, wimg, wlen);
        copy[i] ^= 0x01;
        bad += !refused(copy, wlen, NULL);
    }
    CHECK(bad == 0);
    /* the checksum names itself when only content changed */
    memcpy(copy, img, len);
    char *ir = strstr((char *)copy + 8, "\"dpc.ir\":\"graph");
    CHECK(ir != NULL);
    if (ir) {
        ir[12] = 'G';
        CHECK(refused(copy, len, "checksum mismatch"));
    }
    /* a future format and another dpc version: the version message */
    memcpy(copy, img, len);
    char *fmt = strstr((char *)copy + 8, "\"dpc.format\":\"3\"");
    CHECK(fmt != NULL);
    if (fmt) {
        fmt[14] = '7';
        CHECK(refused(copy, len, "(format 7); this dpc"));
        CHECK(strstr(dpc_last_error(), "recompile it with `dpc compile`") != NULL);
        fmt[14] = '1'; /* an older format: its own message */
        CHECK(refused(copy, len, "in format 1, older than the format 3 this dpc"));
    }
    memcpy(copy, img, len);
    char *ver = strstr((char *)copy + 8, "\"dpc.version\":\"");
    CHECK(ver != NULL);
    if (ver) {
        ver[15] = '9';
        CHECK(refused(copy, len, "artifact written by dpc 9"));
    }
    free(copy);
    free(img);
    free(wimg);
}

/* Several threads, each running its own program. */
typedef struct job {
    const char *dpa, *input, *ref;
    int iters, bad;
} job;

static void *worker(void *arg) {
    job *j = arg;
    dpc_program *p = NULL;
    if (dpc_program_load(path_of(j->dpa), &p) != DPC_OK) {
        fprintf(stderr, "thread on %s: load: %s\n", j->dpa, dpc_last_error());
        j->bad++;
        return NULL;
    }
    dpc_tensor *in = NULL, *out = NULL;
    if (dpc_tensor_load_npy(path_of(j->input), &in) != DPC_OK) {
        j->bad++;
        dpc_program_free(p);
        return NULL;
    }
    size_t rl;
    unsigned char *ref = slurp(path_of(j->ref), &rl);
    dpc_tensor *r = NULL;
    if (!ref || dpc_tensor_load_npy_memory(ref, rl, &r) != DPC_OK)
        j->bad++;
    for (int i = 0; i < j->iters && r; i++) {
        if (dpc_program_run(p, (const dpc_tensor *const *)&in, 1, NULL, NULL, 0, &out, 1) != DPC_OK) {
            fprintf(stderr, "thread on %s, run %d: %s\n", j->dpa, i, dpc_program_error(p));
            j->bad++;
        } else if (dpc_tensor_nbytes(out) != dpc_tensor_nbytes(r) ||
                   memcmp(dpc_tensor_data(out), dpc_tensor_data(r), dpc_tensor_nbytes(r)) != 0) {
            fprintf(stderr, "thread on %s, run %d: the output differs from %s\n", j->dpa, i, j->ref);
            j->bad++;
        }
        dpc_tensor_free(out);
        out = NULL;
    }
    free(ref);
    dpc_tensor_free(r);
    dpc_tensor_free(in);
    dpc_program_free(p);
    return NULL;
}

static void test_threads(void) {
    job jobs[4] = {{"simple_w.dpa", "x10.npy", "ref_simple.npy", 20, 0},
                   {"mlp_w.dpa", "x784.npy", "ref_mlp.npy", 10, 0},
                   {"simple_w.dpa", "x10.npy", "ref_simple.npy", 20, 0},
                   {"mlp_w.dpa", "x784.npy", "ref_mlp.npy", 10, 0}};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++)
        CHECK(jobs[i].bad == 0);
}

/* Inputs sharing the batch name with different sizes: refused on one device
 * as on two, naming both (issue 10 item 9; one device used to read past b). */
static void test_batch_mismatch(void) {
    dpc_program *p = NULL;
    CHECK(dpc_program_load(path_of("multi_input_w.dpa"), &p) == DPC_OK);
    int64_t sa[2] = {1000, 5}, sb[2] = {1, 5};
    dpc_tensor *in[2] = {ramp(DPC_F32, 2, sa, 0), ramp(DPC_F32, 2, sb, 0)};
    const char *devs[] = {"cpu", "cpu,cpu"};
    for (int d = 0; d < 2 && p; d++) {
        dpc_tensor *out[1] = {(dpc_tensor *)1};
        CHECK(dpc_program_set_devices(p, devs[d]) == DPC_OK);
        CHECK(dpc_program_run(p, (const dpc_tensor *const *)in, 2, NULL, NULL, 0, out, 1) == DPC_EUSER);
        CHECK(strstr(dpc_program_error(p), "input 'x2' has batch 1 but 'x1' has batch 1000") != NULL);
        CHECK(out[0] == NULL);
    }
    dpc_tensor_free(in[0]);
    dpc_tensor_free(in[1]);
    dpc_program_free(p);
}

/* A model without parameters runs without weights (none bound, none embedded). */
static void test_no_parameters(void) {
    FILE *f = fopen(path_of("noparam.dp"), "w");
    fputs("module NoParam {\n    forward(x: [N, 4]) {\n        return relu(x) * 2\n    }\n}\nmodel = NoParam()\n", f);
    fclose(f);
    sh("'%s' compile '%s' -o '%s'", DPC, path_of("noparam.dp"), path_of("noparam.dpa"));
    dpc_program *p = NULL;
    CHECK(dpc_program_load(path_of("noparam.dpa"), &p) == DPC_OK);
    CHECK(p && !dpc_program_has_embedded_weights(p));
    int64_t s4[2] = {3, 4};
    dpc_tensor *in[1] = {ramp(DPC_F32, 2, s4, 0)};
    dpc_tensor *out[1] = {NULL};
    CHECK(p && dpc_program_run(p, (const dpc_tensor *const *)in, 1, NULL, NULL, 0, out, 1) == DPC_OK);
    if (out[0]) {
        const float *x = dpc_tensor_data(in[0]), *y = dpc_tensor_data(out[0]);
        bool same = true;
        for (int i = 0; i < 12; i++)
            same &= y[i] == (x[i] > 0 ? x[i] * 2 : 0.0f);
        CHECK(same);
    }
    if (p && !out[0])
        fprintf(stderr, "noparam: %s\n", dpc_program_error(p));
    dpc_tensor_free(in[0]);
    dpc_tensor_free(out[0]);
    dpc_program_free(p);
}

/* A refused kernel cache directory is each program's own warning (kcache.h:
 * no process-wide state): two programs in one process both hear of it. */
static void test_kcache_refusal(void) {
    char *dir = path_of("open_cache");
    sh("mkdir -p '%s' && chmod 0777 '%s'", dir, dir);
    const char *old = getenv("DPC_CACHE_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("DPC_CACHE_DIR", dir, 1);
    int64_t s10[2] = {3, 10};
    dpc_tensor *in[1] = {ramp(DPC_F32, 2, s10, 0)};
    for (int k = 0; k < 2; k++) {
        dpc_program *p = NULL;
        dpc_tensor *out[1] = {NULL};
        CHECK(dpc_program_load(path_of("simple_w.dpa"), &p) == DPC_OK);
        CHECK(p && dpc_program_run(p, (const dpc_tensor *const *)in, 1, NULL, NULL, 0, out, 1) == DPC_OK);
        const char *w = p ? dpc_program_warning(p) : "";
        CHECK(strstr(w, "kernel cache directory") && strstr(w, "compiled kernels are not kept"));
        if (!strstr(w, "compiled kernels are not kept"))
            fprintf(stderr, "program %d: warning '%s'\n", k, w);
        dpc_tensor_free(out[0]);
        dpc_program_free(p);
    }
    dpc_tensor_free(in[0]);
    if (saved)
        setenv("DPC_CACHE_DIR", saved, 1);
    else
        unsetenv("DPC_CACHE_DIR");
    free(saved);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_api DPC MODELS_DIR WORK_DIR\n");
        return 2;
    }
    DPC = argv[1];
    MODELS = argv[2];
    WORK = argv[3];
    setup();
    test_library();
    test_tensors();
    test_signature_and_text();
    test_embedded_devices_memory();
    test_bad_artifacts();
    test_threads();
    test_batch_mismatch();
    test_no_parameters();
    test_kcache_refusal();
    printf("test_api: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
