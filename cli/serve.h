/* serve.h - `dpc serve` (cli/serve.c): the KServe v2 HTTP server. */
#ifndef DPC_CLI_SERVE_H
#define DPC_CLI_SERVE_H

/* argv holds the arguments after "serve"; returns the exit status. */
int dpc_cmd_serve(int argc, char **argv);

#endif
