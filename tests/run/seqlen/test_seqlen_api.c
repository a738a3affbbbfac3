/* test_seqlen_api.c - a program with a run-time dim through libdpc's
 * public API (dpc.h only): one process runs the .dpa at every S given, in
 * that order (repeats too), reading DIR/ids_S.npy and DIR/bias_S.npy and
 * writing DIR/api0_S.npy and DIR/api1_S.npy, which check_seqlen.py
 * compares with PyTorch. Also: the signature names S and reports it as 0,
 * there are no outputs before the first run, inputs disagreeing on S are
 * refused naming both, and a wrong number of output slots is refused
 * once the inputs chose the value.
 *
 *   test_seqlen_api MODEL.dpa DIR S [S ...] */
#define _POSIX_C_SOURCE 200809L
#include <dpc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_NOTE() fprintf(stderr, "  (last error: %s)\n", dpc_last_error())
#include "../../check.h"

static dpc_tensor *load(const char *dir, const char *what, long s) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_%ld.npy", dir, what, s);
    dpc_tensor *t = NULL;
    if (dpc_tensor_load_npy(path, &t) != DPC_OK) {
        fprintf(stderr, "cannot load %s: %s\n", path, dpc_last_error());
        exit(1);
    }
    return t;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: test_seqlen_api MODEL.dpa DIR S [S ...]\n");
        return 2;
    }
    const char *dir = argv[2];
    dpc_program *p;
    if (dpc_program_load(argv[1], &p) != DPC_OK) {
        fprintf(stderr, "load: %s\n", dpc_last_error());
        return 1;
    }
    const char *name;
    int rank;
    int64_t shape[DPC_MAX_RANK];
    CHECK(dpc_program_input(p, 0, &name, NULL, &rank, shape) == DPC_OK);
    CHECK(rank == 2 && shape[0] == -1 && shape[1] == 0);
    CHECK(dpc_program_input_rtdim(p, 0, 1) && strcmp(dpc_program_input_rtdim(p, 0, 1), "S") == 0);
    CHECK(dpc_program_input_rtdim(p, 0, 0) == NULL);
    CHECK(dpc_program_input_rtdim(p, 1, 0) && strcmp(dpc_program_input_rtdim(p, 1, 0), "S") == 0);
    CHECK(dpc_program_input_rtdim(p, 1, 1) == NULL);
    CHECK(dpc_program_num_outputs(p) == 0); /* known once a run chose S */

    for (int a = 3; a < argc; a++) {
        long s = strtol(argv[a], NULL, 10);
        dpc_tensor *in[2] = {load(dir, "ids", s), load(dir, "bias", s)}, *out[2] = {0};
        dpc_status st = dpc_program_run(p, (const dpc_tensor *const *)in, 2, NULL, NULL, 0, out, 2);
        CHECK(st == DPC_OK);
        if (st == DPC_OK) {
            CHECK(dpc_program_num_outputs(p) == 2);
            CHECK(dpc_program_output(p, 1, NULL, &rank, shape) == DPC_OK && rank == 2 && shape[1] == 16 * s);
            for (int j = 0; j < 2; j++) {
                char path[4096];
                snprintf(path, sizeof path, "%s/api%d_%ld.npy", dir, j, s);
                CHECK(dpc_tensor_save_npy(out[j], path) == DPC_OK);
            }
        }
        dpc_tensor_free(out[0]);
        dpc_tensor_free(out[1]);
        dpc_tensor_free(in[0]);
        dpc_tensor_free(in[1]);
    }

    /* ids at the first S, bias at the second: refused, naming both */
    long s0 = strtol(argv[3], NULL, 10), s1 = argc > 4 ? strtol(argv[4], NULL, 10) : s0;
    if (s0 != s1) {
        dpc_tensor *in[2] = {load(dir, "ids", s0), load(dir, "bias", s1)}, *out[2] = {0};
        CHECK(dpc_program_run(p, (const dpc_tensor *const *)in, 2, NULL, NULL, 0, out, 2) == DPC_EUSER);
        char want[256];
        snprintf(want, sizeof want,
                 "inputs disagree on the run-time dim S: input 'ids' has S = %ld (dim 1) but input 'bias' has S = "
                 "%ld (dim 0)",
                 s0, s1);
        CHECK(strstr(dpc_program_error(p), want) != NULL);
        CHECK(out[0] == NULL && out[1] == NULL);
        dpc_tensor_free(in[0]);
        dpc_tensor_free(in[1]);
    }
    /* one output slot for two outputs: refused once S is known */
    {
        dpc_tensor *in[2] = {load(dir, "ids", s0), load(dir, "bias", s0)}, *out[1] = {0};
        CHECK(dpc_program_run(p, (const dpc_tensor *const *)in, 2, NULL, NULL, 0, out, 1) == DPC_EUSAGE);
        CHECK(strstr(dpc_program_error(p), "returns 2 tensors, dpc_program_run was given 1 output slot") != NULL);
        dpc_tensor_free(in[0]);
        dpc_tensor_free(in[1]);
    }
    dpc_program_free(p);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("test_seqlen_api: ok\n");
    return failures ? 1 : 0;
}
