/* model_args.h - the options of the per-model CUDA tests (test_emit_cuda,
 * test_emu_cuda):  [--skip-frontend-errors] [--prec f32|bf16|f16] MODEL.dp...
 * (kernel.h's kprec_parse reads the precision). */
#ifndef DPC_TEST_MODEL_ARGS_H
#define DPC_TEST_MODEL_ARGS_H

#include "kernel.h"

#include <stdio.h>
#include <string.h>

/* The index of the first model in argv, or -1 after saying what is wrong. */
static inline int model_args(const char *prog, int argc, char **argv, bool *skip_frontend_errors, kprec *prec) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--skip-frontend-errors") == 0)
            *skip_frontend_errors = true;
        else if (strcmp(argv[i], "--prec") == 0 && i + 1 < argc && kprec_parse(argv[i + 1], prec))
            i++;
        else {
            fprintf(stderr, "%s: bad option %s (--skip-frontend-errors, --prec f32|bf16|f16)\n", prog, argv[i]);
            return -1;
        }
    }
    return i;
}

#endif
