/* npy_tool.c - drives the .npy and safetensors readers and writers from the
 * command line, for check_numpy.py:
 *   npy_tool copy IN.npy OUT.npy [IN OUT ...]     read, then write (several
 *        pairs per run: dpc_obj links CUDA libraries that are slow to load)
 *   npy_tool st-copy IN.safetensors OUT.safetensors
 *   npy_tool convert IN OUT DTYPE                 DTYPE as NumPy names it;
 *        IN/OUT are .npy, or .safetensors holding one tensor (written as "x")
 *   npy_tool info IN.npy                          prints "dtype [shape]"
 * Errors: "npy_tool: error: MESSAGE" on stderr, exit 1; bad usage exit 2. */
#include "npy.h"
#include "safetensors.h"

#include <stdio.h>
#include <string.h>

static int fail(const dpc_err *e) {
    fprintf(stderr, "npy_tool: error: %s\n", e->msg);
    return 1;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* One tensor from a .npy, or the single tensor of a .safetensors file. */
static dpc_status load_one(const char *path, dpc_tensor **out, dpc_err *e) {
    if (!ends_with(path, ".safetensors"))
        return dpc_npy_read(path, out, e);
    dpc_safetensors *st;
    dpc_status s = dpc_st_read(path, &st, e);
    if (s)
        return s;
    if (st->n != 1) {
        dpc_st_free(st);
        return dpc_errf(e, DPC_EUSAGE, "%s: expected exactly one tensor", path);
    }
    const dpc_st_tensor *x = &st->t[0];
    s = dpc_tensor_new(x->dtype, x->rank, x->shape, out, e);
    if (!s)
        memcpy((*out)->data, x->data, x->nbytes);
    dpc_st_free(st);
    return s;
}

static dpc_status save_one(const char *path, const dpc_tensor *t, dpc_err *e) {
    if (!ends_with(path, ".safetensors"))
        return dpc_npy_write(path, t, e);
    dpc_st_tensor x = {.name = "x", .dtype = t->dtype, .rank = t->rank, .data = t->data, .nbytes = t->nbytes};
    memcpy(x.shape, t->shape, sizeof x.shape);
    return dpc_st_write(path, &x, 1, NULL, NULL, 0, e);
}

static int cmd_convert(const char *in, const char *out, const char *dtname) {
    dpc_err e = {0};
    int to = -1;
    for (int d = 0; d < DPC_NUM_DTYPES; d++)
        if (!strcmp(dpc_dtype_name((dpc_dtype)d), dtname))
            to = d;
    if (to < 0) {
        fprintf(stderr, "npy_tool: unknown dtype %s\n", dtname);
        return 2;
    }
    dpc_tensor *t = NULL, *u = NULL;
    if (load_one(in, &t, &e) || dpc_tensor_convert(t, (dpc_dtype)to, &u, &e) || save_one(out, u, &e)) {
        dpc_tensor_free(t);
        dpc_tensor_free(u);
        return fail(&e);
    }
    dpc_tensor_free(t);
    dpc_tensor_free(u);
    return 0;
}

static int cmd_copy(int n, char **pairs) {
    int rc = 0;
    for (int i = 0; i + 1 < n; i += 2) {
        dpc_err e = {0};
        dpc_tensor *t;
        if (dpc_npy_read(pairs[i], &t, &e)) {
            rc = fail(&e);
            continue;
        }
        if (dpc_npy_write(pairs[i + 1], t, &e))
            rc = fail(&e);
        dpc_tensor_free(t);
    }
    return rc;
}

static int cmd_st_copy(const char *in, const char *out) {
    dpc_err e = {0};
    dpc_safetensors *st;
    if (dpc_st_read(in, &st, &e))
        return fail(&e);
    dpc_status s = dpc_st_write(out, st->t, st->n, (const char *const *)st->meta_keys,
                                (const char *const *)st->meta_vals, st->nmeta, &e);
    dpc_st_free(st);
    return s ? fail(&e) : 0;
}

static int cmd_info(const char *in) {
    dpc_err e = {0};
    dpc_tensor *t;
    if (dpc_npy_read(in, &t, &e))
        return fail(&e);
    char s[200];
    dpc_shape_str(t->rank, t->shape, s, sizeof s);
    printf("%s %s\n", dpc_dtype_name(t->dtype), s);
    dpc_tensor_free(t);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && argc % 2 == 0 && !strcmp(argv[1], "copy"))
        return cmd_copy(argc - 2, argv + 2);
    if (argc == 4 && !strcmp(argv[1], "st-copy"))
        return cmd_st_copy(argv[2], argv[3]);
    if (argc == 5 && !strcmp(argv[1], "convert"))
        return cmd_convert(argv[2], argv[3], argv[4]);
    if (argc == 3 && !strcmp(argv[1], "info"))
        return cmd_info(argv[2]);
    fprintf(stderr, "usage: npy_tool copy IN.npy OUT.npy [IN OUT...] | st-copy IN OUT | convert IN OUT DTYPE | info IN.npy\n");
    return 2;
}
