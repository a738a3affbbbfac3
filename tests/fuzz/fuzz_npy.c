/* fuzz_npy.c - libFuzzer target for the .npy reader. Any input must either
 * parse or fail with a one-line message; a parsed tensor must survive
 * writing and reading back unchanged, and float tensors go through every
 * float conversion (exercising the rounding code on arbitrary bits). */
#include "npy.h"

#include <stdlib.h>
#include <string.h>

static void check_error(dpc_status s, const dpc_err *e) {
    if (s == DPC_OK || !e->msg[0] || strchr(e->msg, '\n'))
        abort();
}

static void roundtrip(const dpc_tensor *t) {
    dpc_err e = {0};
    dpc_buf b;
    dpc_tensor *u;
    if (dpc_npy_serialize(t, &b, &e) || dpc_npy_parse(b.data, b.len, &u, &e))
        abort();
    if (u->dtype != t->dtype || u->rank != t->rank || u->nbytes != t->nbytes ||
        memcmp(u->shape, t->shape, sizeof t->shape) || memcmp(u->data, t->data, t->nbytes))
        abort();
    dpc_tensor_free(u);
    dpc_buf_free(&b);
}

static void conversions(const dpc_tensor *t) {
    static const dpc_dtype fl[] = {DPC_F32, DPC_F64, DPC_F16, DPC_BF16};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        dpc_err e = {0};
        dpc_tensor *u;
        dpc_status s = dpc_tensor_convert(t, fl[i], &u, &e);
        bool is_float = t->dtype == DPC_F32 || t->dtype == DPC_F64 || t->dtype == DPC_F16;
        if (s == DPC_OK)
            dpc_tensor_free(u);
        else if (is_float || s != DPC_EUSAGE)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dpc_err e = {0};
    dpc_tensor *t;
    dpc_status s = dpc_npy_parse(data, size, &t, &e);
    if (s) {
        check_error(s, &e);
        return 0;
    }
    roundtrip(t);
    conversions(t);
    dpc_tensor_free(t);
    return 0;
}
