/* fuzz_onnx.c - libFuzzer target for the ONNX reader and importer. Any
 * input must either import or fail with a one-line message; an imported
 * model's .dp must be NUL-terminated text and its weights must serialise
 * (unique, valid names). External data resolve in a directory that does
 * not exist, so they fail cleanly. */
#include "onnx.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dpc_err e = {0};
    dpc_onnx_import_opts o = {.path = "/nonexistent-dir/fuzz.onnx", .image = data, .len = size};
    dpc_onnx_result r;
    dpc_status s = dpc_onnx_import(&o, &r, &e);
    if (s) {
        if (!e.msg[0] || strchr(e.msg, '\n'))
            abort();
        return 0;
    }
    if (!r.dp || strlen(r.dp) != r.dp_len)
        abort();
    dpc_buf b;
    if (dpc_st_serialize(r.weights, r.nweights, NULL, NULL, 0, &b, &e))
        abort();
    dpc_buf_free(&b);
    dpc_onnx_result_free(&r);
    return 0;
}
