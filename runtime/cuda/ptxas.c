/* ptxas.c - run the toolkit's ptxas on generated PTX (see ptxas.h). */
#include "ptxas.h"
#include "hostcc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef DPC_CUDA_BIN
#define DPC_CUDA_BIN "/usr/local/cuda/bin"
#endif

static bool is_exec(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

bool dpc_ptxas_find(char *path, size_t n) {
    const char *env = getenv("DPC_PTXAS");
    if (env && *env) {
        if (is_exec(env) && snprintf(path, n, "%s", env) < (int)n)
            return true;
        goto none; /* an explicit choice that does not work is not overridden */
    }
    if (snprintf(path, n, "%s/ptxas", DPC_CUDA_BIN) < (int)n && is_exec(path))
        return true;
    const char *p = getenv("PATH");
    while (p && *p) {
        size_t len = strcspn(p, ":");
        if (len > 0 && snprintf(path, n, "%.*s/ptxas", (int)len, p) < (int)n && is_exec(path))
            return true;
        p += len;
        if (*p == ':')
            p++;
    }
none:
    if (n)
        path[0] = 0;
    return false;
}

static dpc_status write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return DPC_EIO;
        p += w;
        n -= (size_t)w;
    }
    return DPC_OK;
}

/* Copies the first lines of ptxas's output into the message. */
static void append_head(char *msg, size_t cap, const char *log, size_t len) {
    size_t used = strlen(msg);
    for (size_t i = 0; i < len && used + 2 < cap;) {
        size_t n = 0;
        while (i + n < len && log[i + n] != '\n')
            n++;
        if (n && used + n + 2 < cap) {
            msg[used++] = '\n';
            memcpy(msg + used, log + i, n);
            used += n;
            msg[used] = 0;
        } else if (n) {
            break;
        }
        i += n + 1;
    }
}

/* "sm_90" / "compute_90" / "sm_90a" -> "-arch=sm_90[a]"; false for anything else. */
static bool arch_option(const char *arch, char *opt, size_t n) {
    const char *num = NULL;
    if (arch && strncmp(arch, "sm_", 3) == 0)
        num = arch + 3;
    else if (arch && strncmp(arch, "compute_", 8) == 0)
        num = arch + 8;
    size_t digits = num ? strspn(num, "0123456789") : 0;
    if (!num || digits < 2 || digits > 4 ||
        !(num[digits] == 0 || ((num[digits] == 'a' || num[digits] == 'f') && !num[digits + 1])))
        return false;
    snprintf(opt, n, "-arch=sm_%s", num);
    return true;
}

/* The PTX into dir/kernel.ptx (in, the path). */
static dpc_status write_ptx(const char *dir, const char *ptx, size_t len, char *in, size_t n, dpc_err *e) {
    if (snprintf(in, n, "%s/kernel.ptx", dir) >= (int)n)
        return dpc_errf(e, DPC_EIO, "ptxas: TMPDIR is too long");
    int fd = open(in, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return dpc_errf(e, DPC_EIO, "ptxas: cannot write '%s': %s", in, strerror(errno));
    dpc_status s = write_all(fd, ptx, len);
    if (close(fd) != 0 || s != DPC_OK)
        return dpc_errf(e, DPC_EIO, "ptxas: cannot write '%s'", in);
    return DPC_OK;
}

dpc_status dpc_ptxas_check(const char *ptx, size_t len, const char *arch, dpc_buf *log, dpc_err *e) {
    char archopt[32];
    if (!arch_option(arch, archopt, sizeof archopt))
        return dpc_errf(e, DPC_EUSAGE, "ptxas: bad target '%s' (want sm_XX or compute_XX)", arch ? arch : "(null)");
    while (len && ptx[len - 1] == 0) /* a NUL terminator is not PTX */
        len--;
    char exe[4096];
    if (!dpc_ptxas_find(exe, sizeof exe))
        return dpc_errf(e, DPC_EIO, DPC_PTXAS_NOT_FOUND " (looked at $DPC_PTXAS, %s/ptxas and PATH)", DPC_CUDA_BIN);
    /* a private directory, removed on every path out (and by
     * dpc_hostcc_abort), and the host compiler's runner (hostcc.h): no
     * shell, its own process group, a time limit */
    dpc_ccjob *job;
    dpc_status s = dpc_ccjob_begin(&job, e);
    if (s != DPC_OK) {
        dpc_err_prefix(e, "ptxas: ");
        return s;
    }
    char in[4200], out[4200];
    s = write_ptx(dpc_ccjob_dir(job), ptx, len, in, sizeof in, e);
    snprintf(out, sizeof out, "%s/kernel.cubin", dpc_ccjob_dir(job));
    dpc_buf output;
    dpc_buf_init(&output);
    int status = -1;
    if (s == DPC_OK) {
        char *argv[] = {exe, archopt, "-o", out, in, NULL};
        s = dpc_ccjob_exec(job, "ptxas", argv, &output, &status, e);
        if (log && output.data)
            dpc_buf_put(log, output.data, output.len);
    }
    if (s != DPC_OK && status > 0) { /* it ran and said no: its own words */
        char msg[DPC_ERR_MSG];
        snprintf(msg, sizeof msg, "ptxas %s rejected the PTX (exit status %d):", archopt, status);
        if (output.data)
            append_head(msg, sizeof msg, output.data, output.len);
        s = dpc_errf(e, DPC_EDEVICE, "%s", msg);
    }
    dpc_buf_free(&output);
    dpc_ccjob_end(job);
    return s;
}
