/* ptxas.c - run the toolkit's ptxas on generated PTX (see ptxas.h). */
#include "ptxas.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef DPC_CUDA_BIN
#define DPC_CUDA_BIN "/usr/local/cuda/bin"
#endif

extern char **environ;

/* Keep at most this much of ptxas's output. */
#define MAX_LOG ((size_t)1 << 20)

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

dpc_status dpc_ptxas_check(const char *ptx, size_t len, const char *arch, dpc_buf *log,
                           dpc_err *e) {
    /* "sm_90" / "compute_90" / "sm_90a" -> "sm_90[a]". */
    const char *num = NULL;
    if (arch && strncmp(arch, "sm_", 3) == 0)
        num = arch + 3;
    else if (arch && strncmp(arch, "compute_", 8) == 0)
        num = arch + 8;
    size_t digits = num ? strspn(num, "0123456789") : 0;
    if (!num || digits < 2 || digits > 4 ||
        !(num[digits] == 0 || ((num[digits] == 'a' || num[digits] == 'f') && !num[digits + 1])))
        return dpc_errf(e, DPC_EUSAGE, "ptxas: bad target '%s' (want sm_XX or compute_XX)",
                        arch ? arch : "(null)");
    while (len && ptx[len - 1] == 0) /* a NUL terminator is not PTX */
        len--;
    char archopt[32];
    snprintf(archopt, sizeof archopt, "-arch=sm_%s", num);

    char exe[4096];
    if (!dpc_ptxas_find(exe, sizeof exe))
        return dpc_errf(e, DPC_EIO,
                        DPC_PTXAS_NOT_FOUND " (looked at $DPC_PTXAS, %s/ptxas and PATH)",
                        DPC_CUDA_BIN);

    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    char dir[4096], in[4200], out[4200];
    if (snprintf(dir, sizeof dir, "%s/dpc-ptxas-XXXXXX", tmp) >= (int)sizeof dir)
        return dpc_errf(e, DPC_EIO, "ptxas: TMPDIR is too long");
    if (!mkdtemp(dir))
        return dpc_errf(e, DPC_EIO, "ptxas: cannot create a temporary directory in '%s': %s", tmp,
                        strerror(errno));
    snprintf(in, sizeof in, "%s/kernel.ptx", dir);
    snprintf(out, sizeof out, "%s/kernel.cubin", dir);

    dpc_status s = DPC_OK;
    int pipefd[2] = {-1, -1};
    bool spawned = false, fa_init = false;
    posix_spawn_file_actions_t fa;
    pid_t pid = -1;
    dpc_buf output;
    dpc_buf_init(&output);

    int fd = open(in, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        s = dpc_errf(e, DPC_EIO, "ptxas: cannot write '%s': %s", in, strerror(errno));
        goto cleanup;
    }
    s = write_all(fd, ptx, len);
    if (close(fd) != 0 || s != DPC_OK) {
        s = dpc_errf(e, DPC_EIO, "ptxas: cannot write '%s'", in);
        goto cleanup;
    }

    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        s = dpc_errf(e, DPC_EIO, "ptxas: pipe: %s", strerror(errno));
        goto cleanup;
    }
    if (posix_spawn_file_actions_init(&fa) != 0) {
        s = dpc_errf(e, DPC_ENOMEM, "ptxas: out of memory");
        goto cleanup;
    }
    fa_init = true;
    /* stdin from /dev/null, stdout and stderr into the pipe. */
    if (posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2) != 0) {
        s = dpc_errf(e, DPC_ENOMEM, "ptxas: out of memory");
        goto cleanup;
    }
    char *argv[] = {exe, archopt, "-o", out, in, NULL};
    int rc = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
    if (rc != 0) {
        s = dpc_errf(e, DPC_EIO, "ptxas: cannot run '%s': %s", exe, strerror(rc));
        goto cleanup;
    }
    spawned = true;
    close(pipefd[1]);
    pipefd[1] = -1;

    /* Read everything ptxas says, keeping the first MAX_LOG bytes. */
    char chunk[4096];
    for (;;) {
        ssize_t r = read(pipefd[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (output.len < MAX_LOG)
            dpc_buf_put(&output, chunk, (size_t)r);
    }

cleanup:
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    if (fa_init)
        posix_spawn_file_actions_destroy(&fa);
    if (spawned) {
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (log && output.data)
            dpc_buf_put(log, output.data, output.len);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            s = DPC_OK;
        } else {
            char msg[DPC_ERR_MSG];
            if (WIFEXITED(status))
                snprintf(msg, sizeof msg, "ptxas %s rejected the PTX (exit status %d):", archopt,
                         WEXITSTATUS(status));
            else
                snprintf(msg, sizeof msg, "ptxas %s was killed by signal %d", archopt,
                         WIFSIGNALED(status) ? WTERMSIG(status) : 0);
            if (output.data)
                append_head(msg, sizeof msg, output.data, output.len);
            s = dpc_errf(e, DPC_EDEVICE, "%s", msg);
        }
    }
    dpc_buf_free(&output);
    unlink(in);
    unlink(out);
    rmdir(dir);
    return s;
}
