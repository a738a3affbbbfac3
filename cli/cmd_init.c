/* cmd_init.c - `dpc init`: a model's initial weights (PyTorch's default
 * initialisation, seeded) written as a safetensors state_dict. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>

int cmd_init(int argc, char **argv) {
    cli_opts o;
    int rc = cli_parse_opts(argc, argv, &o, "oS");
    if (rc)
        return rc;
    if (o.nout != 1)
        return cli_usage("%s", "init needs exactly one -o W.safetensors");
    if ((rc = cli_check_outputs(&o, o.out, o.nout)))
        return rc;
    uint64_t seed = 0;
    if (o.seed) {
        char *end;
        errno = 0;
        seed = strtoull(o.seed, &end, 10);
        if (errno || *end || !*o.seed)
            return cli_usage("--seed needs a non-negative integer, got '%s'", o.seed);
    }
    dpc_model *m;
    if ((rc = cli_compile_model(o.model, &m)))
        return rc;
    dpc_err e;
    dpc_status s = dpc_model_init_weights(m, seed, o.out[0], &e);
    dpc_model_free(m);
    return s == DPC_OK ? 0 : cli_fail(s, &e);
}
