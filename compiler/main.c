/* main.c - the dpc command line (see docs/cli.md). The only place that
 * prints and chooses exit codes: 0 success, 1 user error, 2 bad usage. */
#include "frontend.h"

#include <stdio.h>
#include <string.h>

static int usage(void) {
    fprintf(stderr, "usage: dpc <compile|print|ir|graph|source|init|run|bench|inspect|cache> ...\n"
                    "       dpc help   for details\n");
    return 2;
}

static int cmd_front(int argc, char **argv, bool ir) {
    if (argc != 1)
        return usage();
    dpc_front *f;
    dpc_buf diags;
    dpc_err e;
    dpc_buf_init(&diags);
    dpc_status s = front_run(argv[0], NULL, 0, ir ? FRONT_IR : FRONT_TREE, &f, &diags, &e);
    if (s != DPC_OK) {
        if (diags.len)
            fputs(diags.data, stderr);
        else
            fprintf(stderr, "dpc: error: %s\n", e.msg);
        dpc_buf_free(&diags);
        return s == DPC_EUSER ? 1 : 1;
    }
    dpc_buf out;
    dpc_buf_init(&out);
    if (ir)
        ir_print(&f->g, &out);
    else
        repr_model(&f->m, &out);
    fputs(out.data, stdout);
    dpc_buf_free(&out);
    front_free(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return usage();
    if (strcmp(argv[1], "print") == 0)
        return cmd_front(argc - 2, argv + 2, false);
    if (strcmp(argv[1], "ir") == 0)
        return cmd_front(argc - 2, argv + 2, true);
    return usage();
}
