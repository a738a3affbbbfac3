/* zoo_multi_run.c - one process, one loaded program, several forwards:
 * the zoo's sequence models at several sequence lengths in turn
 * (shared/spec/models.md, "Sequence models run at any S ... a length seen
 * for the first time is compiled then and cached"), through libdpc's public
 * API only (dpc.h).
 *
 *   zoo_multi_run MODEL.dpa WEIGHTS.safetensors DIR NIN NOUT TAG [TAG ...]
 *
 * Loads MODEL.dpa, binds WEIGHTS once, then for each TAG in order reads
 * DIR/TAG_in0.npy .. DIR/TAG_in{NIN-1}.npy, runs forward and writes
 * DIR/TAG_out0.npy .. DIR/TAG_out{NOUT-1}.npy (zoo_check.py `seqs` compares
 * them with the PyTorch original). Checked here too: every run-time dim of
 * the signature reports 0, the outputs the program describes after a run
 * have the shapes of the tensors it returned, and each returned tensor's
 * dims follow the run's own inputs (dim 1 of output j equals dim 1 of
 * input 0: [N, S, ...] for bert and gpt2).
 *
 * Exit status: 0 every run succeeded and every check held, 1 otherwise, 2
 * bad usage. */
#define _POSIX_C_SOURCE 200809L
#include <dpc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_NOTE() fprintf(stderr, "  (last error: %s)\n", dpc_last_error())
#include "../check.h"

enum { MAX_IO = 16 };

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: zoo_multi_run MODEL.dpa WEIGHTS.safetensors DIR NIN NOUT TAG [TAG ...]\n");
        return 2;
    }
    const char *dir = argv[3];
    int nin = atoi(argv[4]), nout = atoi(argv[5]);
    if (nin < 1 || nin > MAX_IO || nout < 1 || nout > MAX_IO) {
        fprintf(stderr, "zoo_multi_run: NIN and NOUT must be 1..%d\n", MAX_IO);
        return 2;
    }
    dpc_program *p = NULL;
    if (dpc_program_load(argv[1], &p) != DPC_OK) {
        fprintf(stderr, "zoo_multi_run: load %s: %s\n", argv[1], dpc_last_error());
        return 1;
    }
    if (dpc_program_bind_weights(p, argv[2]) != DPC_OK) {
        fprintf(stderr, "zoo_multi_run: weights %s: %s\n", argv[2], dpc_program_error(p));
        dpc_program_free(p);
        return 1;
    }
    CHECK(dpc_program_num_inputs(p) == nin);
    int rtdims = 0;
    for (int i = 0; i < nin; i++) {
        int rank = 0;
        int64_t shape[DPC_MAX_RANK];
        CHECK(dpc_program_input(p, i, NULL, NULL, &rank, shape) == DPC_OK);
        for (int d = 0; d < rank; d++)
            if (dpc_program_input_rtdim(p, i, d)) {
                CHECK(shape[d] == 0);
                rtdims++;
            }
    }
    CHECK(rtdims >= 1); /* the point of the test: the entry names S */

    for (int a = 6; a < argc && failures == 0; a++) {
        const char *tag = argv[a];
        dpc_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
        char path[4096];
        int ok = 1;
        for (int i = 0; i < nin && ok; i++) {
            snprintf(path, sizeof path, "%s/%s_in%d.npy", dir, tag, i);
            if (dpc_tensor_load_npy(path, &in[i]) != DPC_OK) {
                fprintf(stderr, "zoo_multi_run: %s: %s\n", path, dpc_last_error());
                ok = 0;
                failures++;
            }
        }
        if (ok) {
            dpc_status st = dpc_program_run(p, (const dpc_tensor *const *)in, nin, NULL, NULL, 0, out, nout);
            if (st != DPC_OK) {
                fprintf(stderr, "zoo_multi_run: run %s: %s\n", tag, dpc_program_error(p));
                failures++;
            } else {
                CHECK(dpc_program_num_outputs(p) == nout);
                int64_t s = dpc_tensor_dim(in[0], 1);
                for (int j = 0; j < nout; j++) {
                    int rank = 0;
                    int64_t shape[DPC_MAX_RANK];
                    CHECK(dpc_program_output(p, j, NULL, &rank, shape) == DPC_OK);
                    CHECK(rank == dpc_tensor_rank(out[j]));
                    for (int d = 1; d < rank && d < DPC_MAX_RANK; d++)
                        CHECK(shape[d] == dpc_tensor_dim(out[j], d));
                    if (dpc_tensor_rank(out[j]) == 3)
                        CHECK(dpc_tensor_dim(out[j], 1) == s);
                    snprintf(path, sizeof path, "%s/%s_out%d.npy", dir, tag, j);
                    CHECK(dpc_tensor_save_npy(out[j], path) == DPC_OK);
                }
                printf("zoo_multi_run: %s: S = %lld, %d output(s) written\n", tag, (long long)s, nout);
                fflush(stdout);
            }
        }
        for (int i = 0; i < MAX_IO; i++) {
            dpc_tensor_free(in[i]);
            dpc_tensor_free(out[i]);
        }
    }
    dpc_program_free(p);
    if (failures)
        fprintf(stderr, "zoo_multi_run: %d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
