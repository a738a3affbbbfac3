/* hostcc.c - run the host C compiler; see hostcc.h for the rules. */
#include "hostcc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_WORDS 32            /* of $CC */
#define MAX_OUTPUT (64u << 10)  /* of the compiler's output kept */
#define HEAD_LINES 12           /* of it quoted in an error */
#define MAX_JOBS 64             /* compiles at once that dpc_hostcc_abort sees */
#define DIR_CAP 4096

struct dpc_ccjob {
    int slot; /* in g_jobs, or -1 when every slot was taken */
    char dir[DIR_CAP];
};

/* What dpc_hostcc_abort may touch from a signal handler: a fixed table,
 * each entry published with atomics (dir is written before ready is set,
 * and ready is cleared once the directory is removed). */
static struct {
    atomic_int used;  /* slot owned by a job */
    atomic_int ready; /* dir is valid */
    atomic_int pgid;  /* the running compiler's process group, 0: none */
    char dir[DIR_CAP];
} g_jobs[MAX_JOBS];

const char *dpc_hostcc_name(void) {
    const char *cc = getenv("CC");
    return cc && strspn(cc, " \t") < strlen(cc) ? cc : "cc";
}

/* ---- removing a job directory (async-signal-safe) ---- */

/* Unlinks every entry of dir (the compiler's own temporary files included)
 * and dir itself, with system calls only: getdents64 instead of readdir,
 * which allocates. A pass that unlinks while reading may miss entries, so
 * it repeats until rmdir succeeds (or nothing more can be removed). */
static void remove_dir(const char *dir) {
    for (int pass = 0; pass < 4; pass++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return;
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return;
        char buf[4096] __attribute__((aligned(8)));
        ssize_t n;
        int removed = 0;
        while ((n = getdents64(fd, buf, sizeof buf)) > 0)
            for (ssize_t off = 0; off < n;) {
                struct dirent64 *d = (struct dirent64 *)(buf + off);
                if (strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0 &&
                    unlinkat(fd, d->d_name, 0) == 0)
                    removed++;
                off += d->d_reclen;
            }
        close(fd);
        if (!removed && pass > 0)
            break;
    }
    rmdir(dir);
}

void dpc_hostcc_abort(void) {
    for (int i = 0; i < MAX_JOBS; i++) {
        int pg = atomic_load(&g_jobs[i].pgid);
        if (pg > 0)
            kill(-pg, SIGKILL);
        if (atomic_load(&g_jobs[i].ready))
            remove_dir(g_jobs[i].dir);
    }
}

/* ---- jobs ---- */

static int take_slot(const char *dir) {
    for (int i = 0; i < MAX_JOBS; i++) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&g_jobs[i].used, &expect, 1)) {
            snprintf(g_jobs[i].dir, DIR_CAP, "%s", dir);
            atomic_store(&g_jobs[i].ready, 1);
            return i;
        }
    }
    return -1; /* more compiles at once than slots: cleaned on normal paths only */
}

/* The signals the CLI's handler answers with dpc_hostcc_abort: blocked
 * between creating a job directory and publishing it, so that no moment
 * leaves one behind. */
static void block_fatal(sigset_t *old) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

dpc_status dpc_ccjob_begin(dpc_ccjob **out, dpc_err *e) {
    *out = NULL;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    dpc_ccjob *j = dpc_calloc(1, sizeof *j);
    if (!j)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    int w = snprintf(j->dir, sizeof j->dir, "%s/dpc-cc-XXXXXX", tmp);
    if (w < 0 || (size_t)w >= sizeof j->dir) {
        dpc_free(j);
        return dpc_errf(e, DPC_EIO, "TMPDIR is too long");
    }
    sigset_t old;
    block_fatal(&old);
    if (!mkdtemp(j->dir)) {
        int err = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        dpc_free(j);
        return dpc_errf(e, DPC_EIO, "cannot create a temporary directory in '%s': %s", tmp, strerror(err));
    }
    j->slot = take_slot(j->dir);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *out = j;
    return DPC_OK;
}

const char *dpc_ccjob_dir(const dpc_ccjob *j) { return j->dir; }

void dpc_ccjob_end(dpc_ccjob *j) {
    if (!j)
        return;
    /* removed while still published: a signal in between removes it too */
    remove_dir(j->dir);
    if (j->slot >= 0) {
        atomic_store(&g_jobs[j->slot].ready, 0);
        atomic_store(&g_jobs[j->slot].used, 0);
    }
    dpc_free(j);
}

/* ---- the command line and the environment ---- */

/* $CC's words then args, into words[] (pointing into buf or args). */
static dpc_status make_argv(const char *const *args, char *buf, size_t bufn, char **words, dpc_err *e) {
    const char *cc = dpc_hostcc_name();
    if (strlen(cc) >= bufn)
        return dpc_errf(e, DPC_EUSAGE, "CC is too long (%zu bytes)", strlen(cc));
    snprintf(buf, bufn, "%s", cc);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
        if (n == MAX_WORDS)
            return dpc_errf(e, DPC_EUSAGE, "CC has more than %d words: '%s'", MAX_WORDS, cc);
        words[n++] = t;
    }
    for (; *args; args++) {
        if (n == MAX_WORDS * 2)
            return dpc_errf(e, DPC_EINTERNAL, "host compiler: too many arguments");
        words[n++] = (char *)*args;
    }
    words[n] = NULL;
    return DPC_OK;
}

/* environ with TMPDIR set to dir (the compiler's temporary files then go
 * where they are removed); environ itself when dir is NULL. */
static char **child_env(const char *dir, char *tmpdir_var, size_t n) {
    if (!dir)
        return environ;
    size_t count = 0;
    while (environ[count])
        count++;
    char **env = dpc_calloc(count + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < count; i++)
        if (strncmp(environ[i], "TMPDIR=", 7) != 0)
            env[k++] = environ[i];
    snprintf(tmpdir_var, n, "TMPDIR=%s", dir);
    env[k] = tmpdir_var;
    return env;
}

static dpc_status cc_timeout(int *secs, dpc_err *e) {
    long t = DPC_CC_TIMEOUT_DEFAULT;
    bool set;
    dpc_status s = dpc_env_long("DPC_CC_TIMEOUT", 1, INT_MAX / 1000, &t, &set, e);
    *secs = (int)t;
    return s;
}

/* ---- running ---- */

/* In the child, between fork and exec: system calls only. Its own process
 * group (so that the whole compiler - driver, cc1, as, ld - is killed
 * together), killed when the parent thread dies, no blocked signals. An
 * exec failure is reported through errfd as errno. */
static void child(char *const *argv, char *const *envp, pid_t parent, int outfd, int errfd) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127); /* the parent died before prctl */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int nul = open("/dev/null", O_RDONLY);
    if (nul < 0 || dup2(nul, 0) < 0 || dup2(outfd, 1) < 0 || dup2(outfd, 2) < 0)
        _exit(127);
    execvpe(argv[0], argv, envp);
    int err = errno;
    ssize_t w = write(errfd, &err, sizeof err);
    (void)w;
    _exit(127);
}

/* Reads the compiler's output until EOF or the deadline; false when the
 * deadline passed first. */
static bool read_output(int fd, double deadline, dpc_buf *out) {
    char chunk[4096];
    for (;;) {
        double left = deadline - dpc_now_s();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno != EINTR)
            return true; /* cannot happen with a valid fd; the wait decides */
        if (r <= 0)
            continue;
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return true;
        if (out->len < MAX_OUTPUT)
            dpc_buf_put(out, chunk, (size_t)n);
    }
}

/* Waits for pid until the deadline; false when it passed. */
static bool wait_child(pid_t pid, double deadline, int *status) {
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return true;
        if (dpc_now_s() >= deadline)
            return false;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
}

/* Up to HEAD_LINES lines of the compiler's output, indented, for a message. */
static void output_head(const dpc_buf *out, char *head, size_t n) {
    head[0] = 0;
    if (!out->data || !out->len)
        return;
    size_t end = 0;
    for (int lines = 0; end < out->len && lines < HEAD_LINES; lines++) {
        const char *nl = memchr(out->data + end, '\n', out->len - end);
        end = nl ? (size_t)(nl - out->data) + 1 : out->len;
    }
    snprintf(head, n, ":\n%.*s", (int)end, out->data);
    size_t len = strlen(head);
    while (len && head[len - 1] == '\n')
        head[--len] = 0;
}

/* What runs, in messages: "host compiler 'cc'", "ptxas '/usr/.../ptxas'". */
typedef struct tool {
    const char *kind, *name;
} tool;

static dpc_status report(const tool *t, int status, const dpc_buf *out, dpc_err *e) {
    char head[DPC_ERR_MSG];
    output_head(out, head, sizeof head);
    if (WIFEXITED(status))
        return dpc_errf(e, DPC_EDEVICE, "%s '%s' failed (exit status %d)%s", t->kind, t->name, WEXITSTATUS(status),
                        head);
    return dpc_errf(e, DPC_EDEVICE, "%s '%s' was killed by signal %d%s", t->kind, t->name,
                    WIFSIGNALED(status) ? WTERMSIG(status) : 0, head);
}

/* Starts argv; *pid on success. An exec failure (no such file, not
 * executable) is an error naming the program and the reason. */
static dpc_status start(const tool *t, char *const *argv, char *const *envp, int slot, int outfd, pid_t *pid,
                        dpc_err *e) {
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0)
        return dpc_errf(e, DPC_EIO, "%s: pipe: %s", t->kind, strerror(errno));
    pid_t parent = getpid();
    pid_t p = fork();
    if (p == 0)
        child(argv, envp, parent, outfd, ep[1]);
    close(ep[1]);
    if (p < 0) {
        close(ep[0]);
        return dpc_errf(e, DPC_EIO, "cannot run %s '%s': fork: %s", t->kind, t->name, strerror(errno));
    }
    setpgid(p, p); /* also here, so the group exists before it is published */
    if (slot >= 0)
        atomic_store(&g_jobs[slot].pgid, p);
    int err = 0;
    ssize_t r;
    while ((r = read(ep[0], &err, sizeof err)) < 0 && errno == EINTR)
        ;
    close(ep[0]);
    if (r == (ssize_t)sizeof err) {
        int st;
        while (waitpid(p, &st, 0) < 0 && errno == EINTR)
            ;
        if (slot >= 0)
            atomic_store(&g_jobs[slot].pgid, 0);
        return dpc_errf(e, DPC_EDEVICE, "cannot run %s '%s': %s", t->kind, argv[0], strerror(err));
    }
    *pid = p;
    return DPC_OK;
}

/* Collects the started program: its output, then its exit, both within
 * the time limit; past it the whole process group is killed. */
static dpc_status finish(const tool *t, pid_t pid, int slot, int outfd, int limit, dpc_buf *out, int *exit_status,
                         dpc_err *e) {
    double deadline = dpc_now_s() + limit;
    int status = 0;
    bool in_time = read_output(outfd, deadline, out) && wait_child(pid, deadline, &status);
    if (!in_time) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL); /* in case it never made its group */
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    if (slot >= 0)
        atomic_store(&g_jobs[slot].pgid, 0);
    if (!in_time)
        return dpc_errf(e, DPC_EDEVICE, "%s '%s' did not finish within %d s (set DPC_CC_TIMEOUT to allow more)",
                        t->kind, t->name, limit);
    if (WIFEXITED(status))
        *exit_status = WEXITSTATUS(status);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return DPC_OK;
    return report(t, status, out, e);
}

/* argv under the rules of hostcc.h, within limit seconds. */
static dpc_status run_argv(dpc_ccjob *j, const tool *t, char *const *argv, int limit, dpc_buf *output,
                           int *exit_status, dpc_err *e) {
    int ignored;
    if (!exit_status)
        exit_status = &ignored;
    *exit_status = -1;
    char tmpdir_var[DIR_CAP + 8];
    dpc_status s = DPC_OK;
    char **envp = child_env(j ? j->dir : NULL, tmpdir_var, sizeof tmpdir_var);
    int op[2];
    if (!envp)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    if (pipe2(op, O_CLOEXEC) != 0) {
        s = dpc_errf(e, DPC_EIO, "%s: pipe: %s", t->kind, strerror(errno));
    } else {
        int slot = j ? j->slot : -1;
        pid_t pid = -1;
        dpc_buf out;
        dpc_buf_init(&out);
        s = start(t, argv, envp, slot, op[1], &pid, e);
        close(op[1]);
        if (s == DPC_OK)
            s = finish(t, pid, slot, op[0], limit, &out, exit_status, e);
        close(op[0]);
        if (output && out.len)
            dpc_buf_put(output, out.data, out.len);
        dpc_buf_free(&out);
    }
    if (envp != environ)
        dpc_free(envp);
    return s;
}

dpc_status dpc_ccjob_run(dpc_ccjob *j, const char *const *args, dpc_buf *output, int *exit_status, dpc_err *e) {
    int limit;
    char buf[DIR_CAP];
    char *argv[MAX_WORDS * 2 + 1];
    if (exit_status)
        *exit_status = -1;
    dpc_status s = cc_timeout(&limit, e);
    if (s == DPC_OK)
        s = make_argv(args, buf, sizeof buf, argv, e);
    if (s != DPC_OK)
        return s;
    tool t = {"host compiler", dpc_hostcc_name()};
    return run_argv(j, &t, argv, limit, output, exit_status, e);
}

dpc_status dpc_ccjob_exec(dpc_ccjob *j, const char *kind, char *const *argv, dpc_buf *output, int *exit_status,
                          dpc_err *e) {
    int limit;
    if (exit_status)
        *exit_status = -1;
    dpc_status s = cc_timeout(&limit, e);
    if (s != DPC_OK)
        return s;
    tool t = {kind, argv[0]};
    return run_argv(j, &t, argv, limit, output, exit_status, e);
}
