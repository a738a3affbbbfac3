/* fuzz_dpa.c - libFuzzer target for the .dpa loader (artifact.h): any input
 * must either load and verify, or fail with a one-line message; a loaded
 * artifact must describe itself. Replayed over tests/artifact/corpus by
 * replay_dpa (CTest); with -DDPC_FUZZ=ON and clang it is also the libFuzzer
 * binary fuzz_dpa (tests/fuzz/CMakeLists.txt's dpc_fuzz_target). */
#include "artifact.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dpc_err e = {0};
    dpc_artifact *a;
    if (dpc_artifact_parse(data, size, "fuzz.dpa", &a, &e) != DPC_OK) {
        if (!e.msg[0] || strchr(e.msg, '\n'))
            abort();
        return 0;
    }
    dpc_model *m;
    if (dpc_artifact_instantiate(a, &m, &e) == DPC_OK) {
        dpc_buf b;
        dpc_buf_init(&b);
        dpc_artifact_describe(a, m, &b);
        if (!b.oom && b.len == 0)
            abort();
        dpc_buf_free(&b);
        dpc_model_free(m);
    } else if (!e.msg[0]) {
        abort();
    }
    dpc_artifact_free(a);
    return 0;
}
