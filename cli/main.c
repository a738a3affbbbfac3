/* main.c - the dpc command line (docs/cli.md): the dispatcher from a verb to
 * its cli/cmd_*.c (or cli/serve.c, cli/import.c) and what every verb's run
 * shares (the fatal signals, the kernel cache's refusal said once). The
 * CLI (cli/) is the only code that prints and chooses exit codes: 0
 * success, 1 user error, 2 bad usage. */
#include "cli.h"
#include "hostcc.h"
#include "import.h"
#include "kcache.h"
#include "serve.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* SIGINT, SIGTERM, SIGHUP: kill the host compiler children and remove
 * their temporary directories (the library installs no handler, and only
 * exposes the async-signal-safe cleanup), then die of the same signal. */
static void on_fatal_signal(int sig) {
    dpc_hostcc_abort();
    raise(sig); /* SA_RESETHAND restored the default; delivered on return */
}

static void install_signal_handlers(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old, sa = {.sa_handler = on_fatal_signal, .sa_flags = SA_RESETHAND};
        sigemptyset(&sa.sa_mask);
        /* a signal ignored by whoever started dpc (nohup) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
}

/* A refused kernel cache directory, said once per run. */
static void report_cache_refusal(void) {
    char msg[1024];
    if (dpc_kcache_refusal(msg, sizeof msg))
        fprintf(stderr, "dpc: warning: %s; compiled kernels are not kept\n", msg);
}

int main(int argc, char **argv) {
    if (argc < 2)
        return cli_usage("%s", "missing command");
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(cli_usage_text, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("dpc %s\n", DPC_VERSION);
        return 0;
    }
    struct { const char *name; int (*fn)(int, char **); } cmds[] = {
        {"print", cmd_print}, {"ir", cmd_ir}, {"source", cmd_source}, {"init", cmd_init},
        {"run", cmd_run}, {"graph", cmd_graph}, {"cache", cmd_cache}, {"bench", cmd_bench},
        {"compile", cmd_compile}, {"inspect", cmd_inspect}, {"serve", dpc_cmd_serve}, {"import", cli_import},
    };
    install_signal_handlers();
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        if (!strcmp(cmd, cmds[i].name)) {
            int rc = cmds[i].fn(argc - 2, argv + 2);
            report_cache_refusal();
            return rc;
        }
    return cli_usage("unknown command '%s'", cmd);
}
