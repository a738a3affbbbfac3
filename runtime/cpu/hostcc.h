/* hostcc.h - running the host C compiler (the CPU backend's kernels), and
 * under the same rules the other tools dpc runs (ptxas, dpc_ccjob_exec).
 *
 *  - The compiler is $CC split on blanks into words (CC="ccache gcc -O2"),
 *    default "cc", executed directly: never through a shell, so no quoting.
 *  - Each compile has a private directory $TMPDIR/dpc-cc-XXXXXX (TMPDIR
 *    default /tmp), mode 0700, which is also the compiler's TMPDIR, so its
 *    own temporary files go there too. The directory and everything in it
 *    are removed on every path out (dpc_ccjob_end, dpc_hostcc_abort).
 *  - The compiler runs in its own process group with stdin /dev/null and
 *    its output captured. It is killed (the whole group) when it outlives
 *    $DPC_CC_TIMEOUT seconds (default 300), when dpc_hostcc_abort is called,
 *    and, through PR_SET_PDEATHSIG, when the thread that started it dies
 *    (dpc killed with SIGKILL). */
#ifndef DPC_HOSTCC_H
#define DPC_HOSTCC_H

#include "base.h"

#define DPC_CC_TIMEOUT_DEFAULT 300 /* seconds */

typedef struct dpc_ccjob dpc_ccjob;

/* $CC as the user wrote it, or "cc": for messages and cache keys. */
const char *dpc_hostcc_name(void);

/* A new job with its private directory. */
dpc_status dpc_ccjob_begin(dpc_ccjob **out, dpc_err *e);
/* The job's directory (absolute when TMPDIR is). */
const char *dpc_ccjob_dir(const dpc_ccjob *j);
/* Runs the compiler's words followed by args (NULL-terminated). Exit status
 * 0 is DPC_OK; a compiler that cannot be started, fails, is killed or runs
 * out of time is DPC_EDEVICE (or DPC_EUSAGE for a bad CC or
 * DPC_CC_TIMEOUT), the message naming it and quoting the first lines of
 * its output. output, if not NULL, receives what it printed (the first
 * 64 KiB); exit_status, if not NULL, its exit status when it ran to its end
 * in time, else -1. j may be NULL (no directory: `cc --version`). */
dpc_status dpc_ccjob_run(dpc_ccjob *j, const char *const *args, dpc_buf *output, int *exit_status, dpc_err *e);
/* The runner of dpc_ccjob_run for another program (ptxas.c): argv[0] is a
 * path (or a name looked up on PATH) and argv is NULL-terminated; kind
 * names it in messages ("ptxas": "ptxas '/usr/bin/ptxas' did not finish
 * within 300 s"). The same rules: no shell, its own process group killed
 * at $DPC_CC_TIMEOUT, by dpc_hostcc_abort and with the thread that started
 * it, stdin /dev/null, TMPDIR the job's directory. A nonzero exit status is
 * DPC_EDEVICE with *exit_status set and the output kept. */
dpc_status dpc_ccjob_exec(dpc_ccjob *j, const char *kind, char *const *argv, dpc_buf *output, int *exit_status,
                          dpc_err *e);
/* Removes the job's directory with every file in it, and frees j (NULL is
 * fine). */
void dpc_ccjob_end(dpc_ccjob *j);

/* Async-signal-safe: kills the process group of every compiler running now
 * and removes every job directory. For the handler of SIGINT, SIGTERM or
 * SIGHUP of a program that is about to end (the CLI's; the library installs
 * none): the compiles in flight fail. */
void dpc_hostcc_abort(void);

#endif
