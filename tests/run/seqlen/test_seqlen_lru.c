/* test_seqlen_lru.c - the cache of specialisations of a model with a
 * run-time dim (runtime/api/model.h): the model is compiled once and run
 * at every S given, in that order, in one process; after each run it
 * prints "S compiles evictions cached" and writes DIR/lru0_S.npy and
 * DIR/lru1_S.npy, which check_seqlen.py compares with PyTorch (so a value
 * evicted and compiled again must still be right). $DPC_SPEC_CACHE bounds
 * the cache.
 *
 *   test_seqlen_lru MODEL.dp W.safetensors DIR S [S ...] */
#include "model.h"
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>

static int die(const char *what, const dpc_err *e) {
    fprintf(stderr, "%s: %s\n", what, e->msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: test_seqlen_lru MODEL.dp W.safetensors DIR S [S ...]\n");
        return 2;
    }
    dpc_err e;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_model *m;
    dpc_safetensors *st;
    if (dpc_model_compile(argv[1], &m, &diags, &e) != DPC_OK)
        return die("compile", &e);
    if (!m->gunit || m->maxspecs < 1)
        return die("not a model with run-time dims", &e);
    if (dpc_st_read(argv[2], &st, &e) != DPC_OK || dpc_model_bind(m, st, NULL, &e) != DPC_OK)
        return die("weights", &e);
    for (int a = 4; a < argc; a++) {
        long s = strtol(argv[a], NULL, 10);
        char path[4096];
        dpc_tensor *in[2], *out[2] = {0};
        const char *what[2] = {"ids", "bias"};
        for (int i = 0; i < 2; i++) {
            snprintf(path, sizeof path, "%s/%s_%ld.npy", argv[3], what[i], s);
            if (dpc_npy_read(path, &in[i], &e) != DPC_OK)
                return die(path, &e);
        }
        if (dpc_model_run(m, (const dpc_tensor *const *)in, 2, NULL, out, &e) != DPC_OK)
            return die("run", &e);
        printf("%ld %ld %ld %d\n", s, m->spec_compiles, m->spec_evictions, m->nspecs);
        for (int j = 0; j < 2; j++) {
            snprintf(path, sizeof path, "%s/lru%d_%ld.npy", argv[3], j, s);
            if (dpc_npy_write(path, out[j], &e) != DPC_OK)
                return die(path, &e);
            dpc_tensor_free(out[j]);
        }
        dpc_tensor_free(in[0]);
        dpc_tensor_free(in[1]);
    }
    dpc_model_free(m);
    dpc_st_free(st);
    return 0;
}
