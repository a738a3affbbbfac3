/* cli.h - what the CLI's verbs share (defined in cli/main.c). */
#ifndef DPC_CLI_H
#define DPC_CLI_H

/* Prints "dpc: " + fmt (with arg) and the usage text to stderr; returns 2,
 * the exit status of bad usage. */
int cli_usage_error(const char *usage, const char *fmt, const char *arg);

#endif
