/* nvrtc_compile.h - compile generated CUDA C++ to a CUBIN or PTX image with NVRTC.
 *
 * (Not named nvrtc.h: runtime/ is on the include path of every dpc file, and
 * a header of that name would hide the toolkit's <nvrtc.h>.)
 *
 * NVRTC needs no GPU, so everything here runs (and is tested) on CPU-only
 * machines. Errors carry the start of the NVRTC log; a '#line N "model.dp"'
 * directive in the source makes NVRTC name the model's file and line:
 *
 *     NVRTC could not compile 'fused_3' for sm_90: NVRTC_ERROR_COMPILATION
 *     models/x.dp(7): error: identifier "y" is undefined
 *       x[i] = y;
 *              ^
 */
#ifndef DPC_NVRTC_COMPILE_H
#define DPC_NVRTC_COMPILE_H

#include "base.h"

/* Compiles src (NUL-terminated CUDA C++) named name (used in the log when no
 * #line overrides it). arch "sm_90" (or "sm_90a") gives a CUBIN for exactly
 * that GPU, "compute_90" gives PTX (NUL-terminated in out_image; len excludes
 * the NUL). Standard options: -arch, -std=c++17, -default-device, and -I the
 * toolkit's include directory (cuda_fp16.h, cuda_bf16.h); fast math is off
 * (accuracy) unless extra_opts asks for it. out_log (may be NULL) receives the
 * whole NVRTC log, warnings included, on success and on failure.
 * Fails with DPC_EUSAGE for a malformed arch, DPC_EDEVICE when NVRTC refuses
 * the program (message: first error lines of the log), DPC_ENOMEM. */
dpc_status dpc_nvrtc_compile(const char *src, const char *name, const char *arch,
                             const char *const *extra_opts, int nopts, dpc_buf *out_image,
                             dpc_buf *out_log, dpc_err *e);

/* Same, through the kernel cache (kcache.h): the key covers the source,
 * name, NVRTC version, every option, arch and dpc version. *hit (may be NULL)
 * says whether the image came from the cache. A cache that cannot be written
 * is not an error: the compiled image is still returned. out_log is empty on
 * a hit. */
dpc_status dpc_nvrtc_compile_cached(const char *src, const char *name, const char *arch,
                                    const char *const *extra_opts, int nopts, dpc_buf *out_image,
                                    dpc_buf *out_log, bool *hit, dpc_err *e);

/* NVRTC is not linked: it is dlopen'ed on first use (by the calls below
 * that need it), once per process, thread-safe: $DPC_NVRTC_LIBRARY, else
 * the libnvrtc.so.13 of the toolkit dpc was built with, else libnvrtc.so.13
 * on the loader's path. Loads it now; fails with DPC_EDEVICE and "NVRTC
 * could not be loaded (<path>): <why> (set DPC_NVRTC_LIBRARY to its path)".
 * dpc_nvrtc_compile and dpc_nvrtc_compile_cached fail the same way. */
dpc_status dpc_nvrtc_load(dpc_err *e);

/* NVRTC's version, e.g. 13 and 0; 0 and 0 if it cannot be loaded. */
void dpc_nvrtc_version(int *major, int *minor);

/* The newest compute capability NVRTC can target at or below at_most (90 for
 * compute_90); 0 if none, or if NVRTC cannot be loaded. */
int dpc_nvrtc_newest_arch(int at_most);

/* True for "compute_XX" (PTX), false for "sm_XX" (CUBIN). */
bool dpc_nvrtc_arch_is_ptx(const char *arch);

/* True if arch is "sm_<digits>[a|f]" or "compute_<digits>[a|f]". */
bool dpc_nvrtc_arch_valid(const char *arch);

/* The NVRTC result code's name ("NVRTC_ERROR_COMPILATION"). */
const char *dpc_nvrtc_result_name(int result);

#endif
