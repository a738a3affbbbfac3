/* ptxas.h - assemble generated PTX with the toolkit's ptxas, to prove on a
 * machine without a GPU that the PTX NVRTC produced is valid for a target.
 * ptxas runs under the host compiler's rules (hostcc.h, dpc_ccjob_exec): no
 * shell, its own process group, killed after $DPC_CC_TIMEOUT seconds (300)
 * or by dpc_hostcc_abort, on a file in a private temporary directory that
 * is removed on every path out. */
#ifndef DPC_PTXAS_H
#define DPC_PTXAS_H

#include "base.h"

/* Message prefix of the failure when no ptxas can be found, so that a test
 * can turn it into a skip. */
#define DPC_PTXAS_NOT_FOUND "ptxas not found"

/* Finds ptxas: $DPC_PTXAS, else DPC_CUDA_BIN/ptxas (the toolkit CMake found),
 * else the first ptxas on PATH. False (and path "") when there is none. */
bool dpc_ptxas_find(char *path, size_t n);

/* Runs `ptxas -arch=sm_XX` on the PTX (len bytes, NUL not required). arch is
 * "sm_90" or "compute_90" (both mean sm_90). The combined output of ptxas
 * goes to log (may be NULL). Fails with DPC_EDEVICE and the first lines of
 * the log when ptxas rejects the PTX, DPC_EIO with a message starting
 * DPC_PTXAS_NOT_FOUND when there is no ptxas, DPC_EUSAGE for a bad arch. */
dpc_status dpc_ptxas_check(const char *ptx, size_t len, const char *arch, dpc_buf *log,
                           dpc_err *e);

#endif
