/* backend_cpu.c - the CPU backend: compiles the C dialect of the kernels
 * with the host compiler into a shared object, caches it on disk (keyed by
 * the source, the compiler and its version, the flags, the CPU and dpc's
 * version), loads it with dlopen, plans each replica's memory once per
 * batch size, and runs forwards with no allocation. GEMMs go to OpenBLAS
 * (or oneDNN, chosen at build time, see docs/performance.md). */
#include "backend.h"
#include "kcache.h"
#include "memplan.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef DPC_USE_DNNL
#include <dnnl.h>
#include <omp.h>
#else
#include <cblas.h>
void openblas_set_num_threads(int);
#endif

extern char **environ;

/* Must match the struct emitted by emit_c.c. */
typedef struct dpc_kctx {
    void **buf;
    int64_t N;
    const float *scalars;
    void (*sgemm)(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float *c, int64_t ldc);
    int fail_at;
    int64_t bad_index, bad_limit;
} dpc_kctx;

typedef int (*forward_fn)(dpc_kctx *);

typedef struct cpu_backend {
    dpc_backend be;
    const kgraph *kg;
    float *const *params;
    void *so;
    forward_fn forward;
} cpu_backend;

struct dpc_replica {
    int64_t planned_N; /* -1: not planned yet */
    void *arena;
    size_t arena_bytes;
    void **buf;
    size_t *offset;
};

/* GEMM threads: the most a replica may use (its share of the cores), and
 * the count last given to the library. Small products run on one thread:
 * waking a second one costs more than it saves (measured, bench/). */
static _Atomic int gemm_threads_max = 1; /* shared by every model in the process */
static _Thread_local int gemm_threads_now = -1;
#define GEMM_PARALLEL_MIN (1 << 22) /* multiply-adds */

static void set_threads(int t) {
    if (t == gemm_threads_now)
        return;
    gemm_threads_now = t;
#ifdef DPC_USE_DNNL
    omp_set_num_threads(t);
#else
    openblas_set_num_threads(t);
#endif
}

static void sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float *c, int64_t ldc) {
    if (m <= 0 || n <= 0)
        return;
    set_threads((double)m * (double)n * (double)k < GEMM_PARALLEL_MIN ? 1 : gemm_threads_max);
    if (k <= 0) {
        for (int64_t i = 0; i < m; i++)
            memset(c + i * ldc, 0, sizeof(float) * (size_t)n);
        return;
    }
#ifdef DPC_USE_DNNL
    dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
#else
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                1.0f, a, (int)lda, b, (int)ldb, 0.0f, c, (int)ldc);
#endif
}

void dpc_cpu_set_gemm_threads(int n) { gemm_threads_max = n < 1 ? 1 : n; }

char *dpc_cpu_source(const kgraph *kg) {
    dpc_buf b;
    dpc_buf_init(&b);
    emit_c(kg, &b);
    return dpc_buf_take(&b);
}

/* ------------------------------------------------------- compiling */

static const char *cc_path(void) {
    const char *cc = getenv("CC");
    return cc && *cc ? cc : "cc";
}

static const char *const CFLAGS[] = {"-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-w"};

static int run_argv(char *const *argv, const char *log_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* "gcc (Debian 12.2.0-14) 12.2.0" + the CPU model: both change the code.
 * Found once per process. */
static char toolchain[512];
static void find_toolchain(void) {
    char *id = toolchain;
    {
        char tmpl[] = "/tmp/dpc-ccv-XXXXXX";
        int fd = mkstemp(tmpl);
        if (fd >= 0) {
            close(fd);
            char *argv[] = {(char *)cc_path(), "--version", NULL};
            run_argv(argv, tmpl);
            FILE *f = fopen(tmpl, "r");
            if (f) {
                if (!fgets(id, 200, f))
                    id[0] = 0;
                fclose(f);
            }
            unlink(tmpl);
        }
        FILE *c = fopen("/proc/cpuinfo", "r");
        char line[256];
        while (c && fgets(line, sizeof line, c))
            if (strncmp(line, "model name", 10) == 0) {
                strncat(id, line, sizeof toolchain - strlen(id) - 1);
                break;
            }
        if (c)
            fclose(c);
        if (!id[0])
            snprintf(id, sizeof toolchain, "unknown");
    }
}

static void toolchain_id(char *out, size_t n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, find_toolchain);
    snprintf(out, n, "%s", toolchain);
}

static dpc_status compile_so(const char *src, const char *key, char *so_path, size_t n, dpc_err *e) {
    char dir[] = "/tmp/dpc-cc-XXXXXX";
    if (!mkdtemp(dir))
        return dpc_errf(e, DPC_EIO, "cannot create a temporary directory: %s", strerror(errno));
    char cpath[64], opath[64], lpath[64];
    snprintf(cpath, sizeof cpath, "%s/k.c", dir);
    snprintf(opath, sizeof opath, "%s/k.so", dir);
    snprintf(lpath, sizeof lpath, "%s/log", dir);
    dpc_status s = dpc_write_file_atomic(cpath, src, strlen(src), e);
    if (s == DPC_OK) {
        char *argv[16];
        int k = 0;
        argv[k++] = (char *)cc_path();
        for (size_t i = 0; i < sizeof CFLAGS / sizeof *CFLAGS; i++)
            argv[k++] = (char *)CFLAGS[i];
        argv[k++] = "-o";
        argv[k++] = opath;
        argv[k++] = cpath;
        argv[k++] = "-lm";
        argv[k] = NULL;
        int rc = run_argv(argv, lpath);
        if (rc != 0) {
            char *log = NULL;
            size_t len = 0;
            dpc_err e2;
            dpc_read_file(lpath, 1 << 20, &log, &len, &e2);
            s = dpc_errf(e, DPC_EDEVICE, "the C compiler '%s' failed (%d) on the generated kernels: %.600s", cc_path(),
                         rc, log ? log : "");
            free(log);
        } else {
            char *so = NULL;
            size_t len = 0;
            s = dpc_read_file(opath, 1u << 30, &so, &len, e);
            if (s == DPC_OK)
                s = dpc_kcache_put(key, "cpu-so", "x86_64", so, len, e);
            free(so);
            if (s == DPC_OK && !dpc_kcache_path(key, "cpu-so", so_path, n))
                s = dpc_errf(e, DPC_EIO, "the kernel cache lost a fresh entry");
            if (s != DPC_OK) {
                /* an unwritable cache: load the object from the temp dir */
                snprintf(so_path, n, "%s", opath);
                s = DPC_OK;
                unlink(cpath);
                unlink(lpath);
                return s; /* the temp dir stays until the process ends; small */
            }
        }
    }
    unlink(cpath);
    unlink(opath);
    unlink(lpath);
    rmdir(dir);
    return s;
}

static dpc_status cpu_prepare(dpc_backend *be, const kgraph *kg, dpc_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    char *src = dpc_cpu_source(kg);
    if (!src)
        return dpc_errf(e, DPC_ENOMEM, "out of memory rendering kernels");
    char tool[512], opts[256] = "", key[65], so_path[4096];
    toolchain_id(tool, sizeof tool);
    for (size_t i = 0; i < sizeof CFLAGS / sizeof *CFLAGS; i++) {
        strcat(opts, CFLAGS[i]);
        strcat(opts, " ");
    }
    dpc_kcache_key("cpu-so", "x86_64", tool, opts, src, strlen(src), key);
    dpc_status s = DPC_OK;
    if (!dpc_kcache_path(key, "cpu-so", so_path, sizeof so_path))
        s = compile_so(src, key, so_path, sizeof so_path, e);
    free(src);
    if (s != DPC_OK)
        return s;
    cb->so = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!cb->so)
        return dpc_errf(e, DPC_EDEVICE, "cannot load compiled kernels '%s': %s", so_path, dlerror());
    cb->forward = (forward_fn)dlsym(cb->so, "dpc_forward");
    if (!cb->forward)
        return dpc_errf(e, DPC_EDEVICE, "compiled kernels lack dpc_forward");
    return DPC_OK;
}

/* ---------------------------------------------------- memory plan */

/* Offsets from the shared planner (memplan.c); inputs and outputs stay in
 * the caller's tensors. */
static dpc_status plan(cpu_backend *cb, dpc_replica *r, int64_t N, dpc_err *e) {
    const kgraph *kg = cb->kg;
    int nb = kg->bufs.len;
    size_t total = 0;
    dpc_status s = dpc_memplan(kg, N, KP_F32, false, r->offset, &total, e);
    if (s != DPC_OK)
        return s;
    /* an arena even for 0 bytes (batch 0): buffer pointers are offsets into
     * it, and NULL + 0 is undefined */
    if (total > r->arena_bytes || !r->arena) {
        free(r->arena);
        r->arena = dpc_aligned_alloc(total ? total : 64);
        if (!r->arena) {
            r->arena_bytes = 0;
            r->planned_N = -1;
            return dpc_errf(e, DPC_ENOMEM, "out of memory: the forward needs %zu bytes of activations", total);
        }
        r->arena_bytes = total;
    }
    for (int i = 0; i < nb; i++) {
        const kbuf *b = kg->bufs.items[i];
        if (b->kind == BUF_TEMP || b->kind == BUF_SCRATCH)
            r->buf[i] = (char *)r->arena + r->offset[i];
        else if (b->kind == BUF_PARAM)
            r->buf[i] = cb->params[b->index];
    }
    r->planned_N = N;
    return DPC_OK;
}

static dpc_status cpu_replica_new(dpc_backend *be, int device_index, dpc_replica **out, dpc_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    (void)device_index;
    dpc_replica *r = dpc_calloc(1, sizeof *r);
    int nb = cb->kg->bufs.len;
    if (r) {
        r->buf = dpc_calloc((size_t)nb + 1, sizeof(void *));
        r->offset = dpc_calloc((size_t)nb + 1, sizeof(size_t));
    }
    if (!r || !r->buf || !r->offset) {
        if (r) {
            free(r->buf);
            free(r->offset);
        }
        free(r);
        return dpc_errf(e, DPC_ENOMEM, "out of memory creating a replica");
    }
    r->planned_N = -1;
    *out = r;
    return DPC_OK;
}

static void cpu_replica_free(dpc_backend *be, dpc_replica *r) {
    (void)be;
    if (!r)
        return;
    free(r->arena);
    free(r->buf);
    free(r->offset);
    free(r);
}

static dpc_status cpu_run(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    const kgraph *kg = cb->kg;
    if (r->planned_N != a->N) {
        dpc_status s = plan(cb, r, a->N, e);
        if (s != DPC_OK)
            return s;
    }
    /* inputs and outputs are the caller's memory: no copies */
    for (int i = 0; i < kg->bufs.len; i++) {
        const kbuf *b = kg->bufs.items[i];
        if (b->kind == BUF_INPUT)
            r->buf[i] = a->inputs[b->index].data;
        else if (b->kind == BUF_OUTPUT)
            r->buf[i] = a->outputs[b->index]->data;
    }
    if (a->N == 0)
        return DPC_OK;
    dpc_kctx ctx = {.buf = r->buf, .N = a->N, .scalars = a->scalars, .sgemm = sgemm, .fail_at = a->fail_at};
    int rc = cb->forward(&ctx);
    if (rc < 0) {
        const kernel *k = kg->kernels.items[-rc - 1];
        return dpc_errf(e, DPC_EDEVICE, "injected failure in kernel %s", k->name);
    }
    if (rc > 0) {
        const kernel *k = kg->kernels.items[rc - 1];
        const ir_node *n = k->root ? k->root : k->out;
        return dpc_errf(e, DPC_EUSER, "%s:%d: index %lld is out of range for embedding %s with %lld rows",
                        n->at.file ? n->at.file->path : "?", n->at.line, (long long)ctx.bad_index,
                        n->scope ? n->scope : "", (long long)ctx.bad_limit);
    }
    return DPC_OK;
}

static void cpu_destroy(dpc_backend *be) {
    cpu_backend *cb = (cpu_backend *)be;
    if (cb->so)
        dlclose(cb->so);
    free(cb);
}

dpc_status dpc_backend_cpu_new(const kgraph *kg, float *const *params, dpc_backend **out, dpc_err *e) {
    cpu_backend *cb = dpc_calloc(1, sizeof *cb);
    if (!cb)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    cb->be = (dpc_backend){"cpu", cpu_prepare, cpu_replica_new, cpu_run, cpu_replica_free, cpu_destroy};
    cb->kg = kg;
    cb->params = params;
    *out = &cb->be;
    return DPC_OK;
}
