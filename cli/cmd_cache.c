/* cmd_cache.c - `dpc cache ls|clear`: the compiled kernels kept on disk
 * (runtime/core/kcache.c). */
#include "cli.h"
#include "kcache.h"

#include <stdio.h>
#include <string.h>

int cmd_cache(int argc, char **argv) {
    dpc_err e;
    if (argc != 1)
        return cli_usage("%s", "cache needs ls or clear");
    if (strcmp(argv[0], "ls") == 0) {
        dpc_buf b;
        dpc_buf_init(&b);
        dpc_status s = dpc_kcache_list(&b, &e);
        if (s != DPC_OK)
            return cli_fail(s, &e);
        return cli_emit(&b);
    }
    if (strcmp(argv[0], "clear") == 0) {
        long n = 0;
        dpc_status s = dpc_kcache_clear(&n, &e);
        if (s != DPC_OK)
            return cli_fail(s, &e);
        printf("removed %ld cached file%s\n", n, n == 1 ? "" : "s");
        return 0;
    }
    return cli_usage("unknown cache command '%s' (ls or clear)", argv[0]);
}
