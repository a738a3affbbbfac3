/* fuzz_safetensors.c - libFuzzer target for the safetensors reader. Any
 * input must either parse or fail with a one-line message; a parsed file
 * must be found tensor by tensor, and survive writing and reading back
 * unchanged. */
#include "safetensors.h"

#include <stdlib.h>
#include <string.h>

static bool same_tensor(const dpc_st_tensor *a, const dpc_st_tensor *b) {
    return !strcmp(a->name, b->name) && a->dtype == b->dtype && a->rank == b->rank && a->nbytes == b->nbytes &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) && !memcmp(a->data, b->data, a->nbytes);
}

static void roundtrip(const dpc_safetensors *st) {
    dpc_err e = {0};
    dpc_buf b;
    dpc_safetensors *u;
    if (dpc_st_serialize(st->t, st->n, (const char *const *)st->meta_keys, (const char *const *)st->meta_vals,
                         st->nmeta, &b, &e) ||
        dpc_st_parse(b.data, b.len, &u, &e))
        abort();
    if (u->n != st->n || u->nmeta != st->nmeta)
        abort();
    for (size_t i = 0; i < st->n; i++)
        if (!same_tensor(&u->t[i], &st->t[i]) || dpc_st_find(st, st->t[i].name) != &st->t[i])
            abort();
    for (size_t i = 0; i < st->nmeta; i++)
        if (strcmp(u->meta_keys[i], st->meta_keys[i]) || strcmp(u->meta_vals[i], st->meta_vals[i]))
            abort();
    dpc_st_free(u);
    dpc_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dpc_err e = {0};
    dpc_safetensors *st;
    dpc_status s = dpc_st_parse(data, size, &st, &e);
    if (s) {
        if (!e.msg[0] || strchr(e.msg, '\n'))
            abort();
        return 0;
    }
    roundtrip(st);
    dpc_st_free(st);
    return 0;
}
