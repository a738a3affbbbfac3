/* import_batch.c - dpc_onnx_import over many models in one process, for
 * tests/onnx/arity_check.py: hundreds of crafted models checked without
 * paying dpc's start-up (its shared libraries, and a sanitizer's) for
 * each. For each path named, "PATH\t" is printed and flushed before the
 * import, then "ok" or "error\tSTATUS\tMESSAGE" (the message `dpc import`
 * prints after "dpc: error: "), so that a crash shows which model it was.
 * Nothing is written. Exit 0 when each model imported (with its .dp text)
 * or was refused with a one-line DPC_EUSER message, else 1. */
#include "onnx.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        printf("%s\t", argv[i]);
        fflush(stdout);
        dpc_onnx_import_opts o = {.path = argv[i]};
        dpc_onnx_result r;
        dpc_err e = {0};
        dpc_status s = dpc_onnx_import(&o, &r, &e);
        if (s == DPC_OK) {
            int whole = r.dp && strlen(r.dp) == r.dp_len;
            printf("%s\n", whole ? "ok" : "bad\tno .dp text");
            bad |= !whole;
            dpc_onnx_result_free(&r);
        } else {
            bool clean = s == DPC_EUSER && e.msg[0] && !strchr(e.msg, '\n');
            printf("error\t%d\t%s\n", (int)s, clean ? e.msg : "(not one line)");
            bad |= !clean;
        }
        fflush(stdout);
    }
    return bad;
}
