/* backend_cpu.c - the CPU backend: compiles the C dialect of the kernels
 * with the host compiler into a shared object, caches it on disk (keyed by
 * the source, the compiler and its version, the flags, the CPU and dpc's
 * version), loads it with dlopen, plans each replica's memory once per
 * batch size, and runs forwards with no allocation. GEMMs go to OpenBLAS
 * (or oneDNN, chosen at build time, see docs/performance.md).
 *
 * The prepare kernels (dpc_unit_nprepare: parameters and constants only,
 * folded batch norms) run once, through the generated dpc_prepare, before
 * the first forward after the weights are bound; their BUF_CONST outputs
 * are kept by the backend, shared by every replica as the weights are
 * (CPU replicas read the one host copy), and computed again after
 * weights_changed. */
#include "backend_cpu.h"
#include "conv_dnnl.h"
#include "cpu_env.h"
#include "gemm_rows.h"
#include "linear_dnnl.h"
#include "hostcc.h"
#include "kabi.h"
#include "kcache.h"
#include "memplan.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef DPC_USE_DNNL
#include <dnnl.h>
#include <omp.h>
#else
#include <cblas.h>
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
#endif

/* The kernel ABI: compiler/kabi.h, printed into the generated source by emit_c.c. */
typedef int (*forward_fn)(dpc_cpu_kctx *);

typedef struct cpu_backend {
    dpc_backend be;
    const dpc_unit *u;
    float *const *params;
    void *so;
    forward_fn forward;
    forward_fn prepare;       /* dpc_prepare; NULL when the unit has no prepare kernels */
    _Atomic int gemm_threads; /* the most one GEMM of a replica may use (dpc_cpu_set_gemm_threads) */
#ifdef DPC_USE_DNNL
    dpc_dnnl_convs *convs; /* the convolutions as oneDNN primitives, NULL: none or DPC_CONV=im2col */
    dpc_dnnl_linears *linears; /* small-batch linears with packed weights, NULL: DPC_LINEAR_PACK=0 */
#endif
    /* the prepare kernels' outputs (BUF_CONST), shared by the replicas */
    void *consts;
    void **cbuf;              /* per buffer: parameters and BUF_CONST, for dpc_prepare */
    pthread_mutex_t lock;     /* one replica runs the prepare kernels, the others wait */
    _Atomic bool prepared;    /* consts hold the current weights' values */
    _Atomic long prepare_runs;
} cpu_backend;

struct dpc_replica {
    int64_t planned_N; /* -1: not planned yet */
    void *arena;
    size_t arena_bytes;
    void **buf;
    size_t *offset;
#ifdef DPC_USE_DNNL
    dpc_dnnl_rconvs *convs; /* this replica's primitives, per planned batch size */
    int conv_threads;       /* the threads they were planned for */
    dpc_dnnl_rlinears *linears; /* this replica's linear primitives */
#endif
};

/* GEMM threads: the most the running forward may use (its backend's
 * gemm_threads, its share of the cores, set by cpu_run on the thread that
 * runs it), and the count last given to the library. Small products run on
 * one thread: waking a second one costs more than it saves (measured,
 * bench/). */
static _Thread_local int gemm_threads_max = 1;
static _Thread_local int gemm_threads_now = -1;
#define GEMM_PARALLEL_MIN DPC_CPU_PARALLEL_MIN

static void set_threads(int t) {
    if (t == gemm_threads_now)
        return;
    gemm_threads_now = t;
#ifdef DPC_USE_DNNL
    omp_set_num_threads(t);
#endif
}

#ifndef DPC_USE_DNNL
/* OpenBLAS's thread count is one global of the process, and two threads
 * in its threaded path at once can corrupt each other's results (seen:
 * artifact_api's concurrent programs, batch-5 MLP GEMMs on two threads
 * each): a threaded call runs alone, one-thread calls side by side, each
 * setting the count it wants under the lock. oneDNN's count is OpenMP's,
 * per calling thread, and needs none of this. */
static pthread_rwlock_t blas_lock = PTHREAD_RWLOCK_INITIALIZER;

static void blas_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float *c, int64_t ldc) {
    int t = gemm_threads_now < 1 ? 1 : gemm_threads_now;
    if (t > 1)
        pthread_rwlock_wrlock(&blas_lock);
    else
        pthread_rwlock_rdlock(&blas_lock);
    if (openblas_get_num_threads() != t)
        openblas_set_num_threads(t);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                1.0f, a, (int)lda, b, (int)ldb, 0.0f, c, (int)ldc);
    pthread_rwlock_unlock(&blas_lock);
}
#endif

static void sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float *c, int64_t ldc) {
    if (m <= 0 || n <= 0)
        return;
#ifdef DPC_USE_DNNL
    /* from a kernel's parallel loop (the attention's GEMM form, emit_c.c):
     * oneDNN runs it on the calling thread, and the count set inside the
     * region would not outlive it (gemm_threads_now would go stale) */
    if (!omp_in_parallel())
#endif
        set_threads((double)m * (double)n * (double)k < GEMM_PARALLEL_MIN ? 1 : gemm_threads_max);
    if (k <= 0) {
        for (int64_t i = 0; i < m; i++)
            memset(c + i * ldc, 0, sizeof(float) * (size_t)n);
        return;
    }
#ifdef DPC_USE_DNNL
    if (dpc_gemm_rows_fits(ta, tb, m)) { /* batch 1-4 linears: read B once (gemm_rows.c) */
        dpc_gemm_rows(m, n, k, a, lda, b, ldb, c, ldc, omp_in_parallel() ? 1 : gemm_threads_now);
        return;
    }
    dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
#else
    blas_sgemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
#endif
}

static dpc_status cpu_run(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e);

void dpc_cpu_set_gemm_threads(dpc_backend *be, int n) {
    if (be && be->run == cpu_run)
        ((cpu_backend *)be)->gemm_threads = n < 1 ? 1 : n;
}

int dpc_cpu_gemm_threads(const dpc_backend *be) {
    return be && be->run == cpu_run ? ((const cpu_backend *)be)->gemm_threads : 0;
}

char *dpc_cpu_source(const dpc_unit *u) {
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_unit_source(u, DPC_DIALECT_C, KP_F32, &b);
    return dpc_buf_take(&b);
}

/* ------------------------------------------------------- compiling */

/* The host compiler is run by hostcc.c: $CC in words, no shell, a private
 * temporary directory, a time limit, killed with dpc. */
/* -fopenmp: the large non-GEMM loops split over the replica's threads
 * (emit_c.c); -fno-trapping-math: without it GCC 12 leaves loops whose
 * selects it has turned into branches scalar (compiler/kmath.h). */
static const char *const CFLAGS[] = {"-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno",
                                     "-fno-trapping-math", "-fopenmp", "-w"};

/* "gcc (Debian 12.2.0-14) 12.2.0" + $CC as written + the CPU model: each
 * changes the code. Found once per process. A compiler that cannot be run
 * or hangs on --version is an error kept for every prepare; one that
 * merely rejects --version is identified by $CC alone. */
static char toolchain[512];
static dpc_status toolchain_status = DPC_OK;
static dpc_err toolchain_err;
static void find_toolchain(void) {
    const char *args[] = {"--version", NULL};
    dpc_buf out;
    dpc_buf_init(&out);
    int rc;
    dpc_status s = dpc_ccjob_run(NULL, args, &out, &rc, &toolchain_err);
    if (s != DPC_OK && rc < 0)
        toolchain_status = s;
    int len = s == DPC_OK && out.data ? (int)strcspn(out.data, "\n") : 0;
    snprintf(toolchain, sizeof toolchain, "%.*s\n%.100s\n", len > 200 ? 200 : len, len ? out.data : "",
             dpc_hostcc_name());
    dpc_buf_free(&out);
    FILE *c = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (c && fgets(line, sizeof line, c))
        if (strncmp(line, "model name", 10) == 0) {
            strncat(toolchain, line, sizeof toolchain - strlen(toolchain) - 1);
            break;
        }
    if (c)
        fclose(c);
}

static dpc_status toolchain_id(char *out, size_t n, dpc_err *e) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, find_toolchain);
    snprintf(out, n, "%s", toolchain);
    if (toolchain_status != DPC_OK)
        return dpc_errf(e, toolchain_status, "%s", toolchain_err.msg);
    return DPC_OK;
}

/* Loads the kernels at path after checking that it is a shared object at
 * all (a compiler can exit 0 and leave nothing, or junk) and that it has
 * the entry point. */
static dpc_status load_kernels(const char *path, void **so, forward_fn *fwd, forward_fn *prep, dpc_err *e) {
    unsigned char magic[4] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, magic, sizeof magic) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof magic || memcmp(magic, "\177ELF", 4) != 0)
        return dpc_errf(e, DPC_EDEVICE, "'%s' is %s, not a shared object", path,
                        fd < 0 ? "missing" : got <= 0 ? "empty" : "something else");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return dpc_errf(e, DPC_EDEVICE, "cannot load compiled kernels '%s': %s", path, dlerror());
    forward_fn f = (forward_fn)dlsym(h, "dpc_forward");
    if (!f) {
        dlclose(h);
        return dpc_errf(e, DPC_EDEVICE, "compiled kernels '%s' lack dpc_forward", path);
    }
    /* The kernels' OpenMP runtime stays loaded when they are unloaded: its
     * worker threads outlive the object (oneDNN's build has it loaded
     * anyway; with OpenBLAS the kernels bring it). */
    static const char *const omp_libs[] = {"libgomp.so.1", "libomp.so"};
    for (size_t i = 0; i < sizeof omp_libs / sizeof *omp_libs; i++)
        (void)dlopen(omp_libs[i], RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    *so = h;
    *fwd = f;
    *prep = (forward_fn)dlsym(h, "dpc_prepare"); /* only where there are prepare kernels */
    return DPC_OK;
}

static dpc_status write_source(const char *path, const char *src, dpc_err *e) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    size_t n = strlen(src), done = 0;
    while (fd >= 0 && done < n) {
        ssize_t w = write(fd, src + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    int err = fd < 0 ? errno : done < n ? EIO : 0;
    if (fd >= 0 && close(fd) != 0 && !err)
        err = errno;
    return err ? dpc_errf(e, DPC_EIO, "cannot write '%s': %s", path, strerror(err)) : DPC_OK;
}

/* Stores the checked object in the cache for later runs. Best effort: this
 * run uses the object already loaded, and a refused cache directory is
 * reported by kcache (dpc_kcache_refusal), not here. */
static void cache_put(const char *key, const char *path) {
    char *so = NULL;
    size_t len = 0;
    if (dpc_read_file(path, DPC_KCACHE_MAX_ENTRY, &so, &len, NULL) == DPC_OK)
        dpc_kcache_put(key, "cpu-so", "x86_64", so, len, NULL);
    free(so);
}

/* Compiles src in a private directory, loads the result from there (so a
 * refused cache needs no directory left behind), caches it, and removes the
 * directory on every path. */
static dpc_status compile_so(const char *src, const char *key, void **so, forward_fn *fwd, forward_fn *prep,
                             dpc_err *e) {
    dpc_ccjob *job;
    dpc_status s = dpc_ccjob_begin(&job, e);
    if (s != DPC_OK)
        return s;
    char cpath[4200], opath[4200];
    snprintf(cpath, sizeof cpath, "%s/k.c", dpc_ccjob_dir(job));
    snprintf(opath, sizeof opath, "%s/k.so", dpc_ccjob_dir(job));
    s = write_source(cpath, src, e);
    if (s == DPC_OK) {
        const char *args[sizeof CFLAGS / sizeof *CFLAGS + 5];
        size_t k = 0;
        for (size_t i = 0; i < sizeof CFLAGS / sizeof *CFLAGS; i++)
            args[k++] = CFLAGS[i];
        args[k++] = "-o";
        args[k++] = opath;
        args[k++] = cpath;
        args[k++] = "-lm";
        args[k] = NULL;
        s = dpc_ccjob_run(job, args, NULL, NULL, e);
        if (s != DPC_OK)
            dpc_err_prefix(e, "compiling the generated kernels: ");
    }
    if (s == DPC_OK) {
        s = load_kernels(opath, so, fwd, prep, e);
        if (s != DPC_OK)
            dpc_err_prefix(e, "host compiler '%s' exited 0 but gave no usable kernels: ", dpc_hostcc_name());
    }
    if (s == DPC_OK)
        cache_put(key, opath);
    dpc_ccjob_end(job);
    return s;
}

/* ---------------------------------------------------- prepare kernels */

/* The BUF_CONST buffers, in one block for the backend's lifetime (their
 * sizes do not depend on the batch). */
static dpc_status consts_alloc(cpu_backend *cb, dpc_err *e) {
    const dpc_unit *u = cb->u;
    int nb = dpc_unit_nbufs(u);
    size_t total = 0;
    int nconst = 0;
    for (int i = 0; i < nb; i++)
        if (dpc_unit_buf(u, i)->kind == BUF_CONST) {
            total += dpc_memplan_bytes(dpc_unit_buf(u, i), 1, KP_F32);
            nconst++;
        }
    if (!nconst)
        return DPC_OK;
    free(cb->consts);
    free(cb->cbuf);
    cb->consts = dpc_aligned_alloc(total ? total : 64); /* empty buffers still point somewhere */
    cb->cbuf = dpc_calloc((size_t)nb + 1, sizeof(void *));
    if (!cb->consts || !cb->cbuf)
        return dpc_errf(e, DPC_ENOMEM, "out of memory: the prepare kernels need %zu bytes", total);
    size_t off = 0;
    for (int i = 0; i < nb; i++) {
        const kbuf *b = dpc_unit_buf(u, i);
        if (b->kind != BUF_CONST)
            continue;
        cb->cbuf[i] = (char *)cb->consts + off;
        off += dpc_memplan_bytes(b, 1, KP_F32);
    }
    return DPC_OK;
}

/* Runs dpc_prepare unless the current weights' values are there: once per
 * load for all replicas, the first to arrive doing it. */
static dpc_status run_prepare(cpu_backend *cb, int fail_at, dpc_err *e) {
    if (!cb->prepare || atomic_load_explicit(&cb->prepared, memory_order_acquire))
        return DPC_OK;
    pthread_mutex_lock(&cb->lock);
    dpc_status s = DPC_OK;
    if (!atomic_load_explicit(&cb->prepared, memory_order_relaxed)) {
        const dpc_unit *u = cb->u;
        for (int i = 0; i < dpc_unit_nbufs(u); i++) {
            const kbuf *b = dpc_unit_buf(u, i);
            if (b->kind == BUF_PARAM)
                cb->cbuf[i] = cb->params[b->index];
        }
        dpc_cpu_kctx ctx = {.buf = cb->cbuf, .N = 1, .sgemm = sgemm, .fail_at = fail_at};
        gemm_threads_max = cb->gemm_threads;
        int rc = cb->prepare(&ctx);
        dpc_kernel_info k;
        if (rc != 0) {
            dpc_unit_kernel(u, (rc < 0 ? -rc : rc) - 1, &k);
            s = rc < 0 ? dpc_errf(e, DPC_EDEVICE, "injected failure in kernel %s", k.name)
                       : dpc_errf(e, DPC_EINTERNAL, "prepare kernel %s failed", k.name);
        } else {
            atomic_fetch_add(&cb->prepare_runs, 1);
#ifdef DPC_USE_DNNL
            dpc_dnnl_consts_changed(cb->convs);
            dpc_dnnl_linears_changed(cb->linears);
#endif
            atomic_store_explicit(&cb->prepared, true, memory_order_release);
        }
    }
    pthread_mutex_unlock(&cb->lock);
    return s;
}

/* A new bind: the prepare kernels run again, and the convolutions' kept
 * weight layouts are reordered again from the new parameters. */
static void cpu_weights_changed(dpc_backend *be) {
    cpu_backend *cb = (cpu_backend *)be;
    atomic_store(&cb->prepared, false);
#ifdef DPC_USE_DNNL
    dpc_dnnl_params_changed(cb->convs);
    /* the copies of parameters (a Conv1D's [in, out] weight): made again
     * even when no prepare kernel runs to say so */
    dpc_dnnl_linears_changed(cb->linears);
#endif
}

long dpc_cpu_prepare_runs(const dpc_backend *be) {
    return be && be->run == cpu_run ? atomic_load(&((const cpu_backend *)be)->prepare_runs) : -1;
}

static dpc_status cpu_prepare(dpc_backend *be, const dpc_unit *u, dpc_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    char tool[512], opts[256] = "", key[65], so_path[4096];
    dpc_status s = toolchain_id(tool, sizeof tool, e);
    if (s != DPC_OK)
        return s;
    char *src = dpc_cpu_source(u);
    if (!src)
        return dpc_errf(e, DPC_ENOMEM, "out of memory rendering kernels");
    for (size_t i = 0; i < sizeof CFLAGS / sizeof *CFLAGS; i++) {
        strcat(opts, CFLAGS[i]);
        strcat(opts, " ");
    }
    dpc_kcache_key("cpu-so", "x86_64", tool, opts, src, strlen(src), key);
    /* A cached entry that does not load (written by an older dpc that
     * cached whatever the compiler left) is compiled again and replaced. */
    if (!dpc_kcache_path(key, "cpu-so", so_path, sizeof so_path) ||
        load_kernels(so_path, &cb->so, &cb->forward, &cb->prepare, NULL) != DPC_OK)
        s = compile_so(src, key, &cb->so, &cb->forward, &cb->prepare, e);
    free(src);
    if (s != DPC_OK)
        return s;
    if (dpc_unit_nprepare(u) > 0 && !cb->prepare)
        return dpc_errf(e, DPC_EDEVICE, "the compiled kernels lack dpc_prepare");
    return consts_alloc(cb, e);
}

/* ---------------------------------------------------- memory plan */

/* Offsets from the shared planner (memplan.c); inputs and outputs stay in
 * the caller's tensors. */
static dpc_status plan(cpu_backend *cb, dpc_replica *r, int64_t N, dpc_err *e) {
    const dpc_unit *u = cb->u;
    int nb = dpc_unit_nbufs(u);
    size_t total = 0;
    dpc_status s = dpc_memplan(u, N, KP_F32, false, r->offset, &total, e);
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
        const kbuf *b = dpc_unit_buf(u, i);
        if (b->kind == BUF_TEMP || b->kind == BUF_SCRATCH)
            r->buf[i] = (char *)r->arena + r->offset[i];
    }
#ifdef DPC_USE_DNNL
    r->conv_threads = cb->gemm_threads;
    s = dpc_dnnl_plan(cb->convs, &r->convs, N, r->conv_threads, e);
    if (s != DPC_OK) {
        r->planned_N = -1;
        return s;
    }
#endif
    r->planned_N = N;
    return DPC_OK;
}

static dpc_status cpu_replica_new(dpc_backend *be, int device_index, dpc_replica **out, dpc_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    (void)device_index;
    dpc_replica *r = dpc_calloc(1, sizeof *r);
    int nb = dpc_unit_nbufs(cb->u);
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
#ifdef DPC_USE_DNNL
    dpc_dnnl_rconvs_free(r->convs);
    dpc_dnnl_rlinears_free(r->linears);
#endif
    free(r);
}

/* One forward's context: the ABI's, then what the runtime's callbacks need
 * (ctx->conv receives the dpc_cpu_kctx that starts it). */
typedef struct cpu_call {
    dpc_cpu_kctx ctx;
    dpc_backend *be;
    dpc_replica *r;
    dpc_err *e;
    bool lib_failed; /* a conv or linear callback failed (e holds why) */
} cpu_call;

#ifdef DPC_USE_DNNL
static int conv_call(dpc_cpu_kctx *ctx, int i, const float *x, const float *w, const float *bias, const float *sum,
                     float *y) {
    cpu_call *c = (cpu_call *)ctx;
    int rc = dpc_dnnl_run(c->r->convs, i, x, w, bias, sum, y, c->e);
    c->lib_failed |= rc < 0;
    return rc;
}

/* A linear's GEMM with its weights packed (linear_dnnl.c), on the threads
 * sgemm would give it; declined inside a kernel's parallel loop. */
static int linear_call(dpc_cpu_kctx *ctx, int wt_buf, int64_t m, int64_t n, int64_t k, const float *a,
                       const float *wt, float *y) {
    cpu_call *c = (cpu_call *)ctx;
    if (omp_in_parallel())
        return 1;
    set_threads((double)m * (double)n * (double)k < GEMM_PARALLEL_MIN ? 1 : gemm_threads_max);
    int rc = dpc_dnnl_linear(((cpu_backend *)c->be)->linears, &c->r->linears, wt_buf, m, n, k, a, wt, y,
                             gemm_threads_now, c->e);
    c->lib_failed |= rc < 0;
    return rc;
}

static int kept_call(dpc_cpu_kctx *ctx, int i) { return dpc_dnnl_kept(((cpu_call *)ctx)->r->convs, i); }
#endif

static dpc_status cpu_run(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    const dpc_unit *u = cb->u;
    bool replan = r->planned_N != a->N;
#ifdef DPC_USE_DNNL
    replan |= cb->convs && r->conv_threads != cb->gemm_threads;
#endif
    if (replan) {
        dpc_status s = plan(cb, r, a->N, e);
        if (s != DPC_OK)
            return s;
    }
    /* inputs and outputs are the caller's memory: no copies; the weights
     * are read where they are now (binding again replaces them) */
    for (int i = 0; i < dpc_unit_nbufs(u); i++) {
        const kbuf *b = dpc_unit_buf(u, i);
        if (b->kind == BUF_INPUT)
            r->buf[i] = a->inputs[b->index].data;
        else if (b->kind == BUF_OUTPUT)
            r->buf[i] = a->outputs[b->index]->data;
        else if (b->kind == BUF_PARAM)
            r->buf[i] = cb->params[b->index];
        else if (b->kind == BUF_CONST)
            r->buf[i] = cb->cbuf[i];
    }
    if (a->N == 0)
        return DPC_OK;
    dpc_status ps = run_prepare(cb, a->fail_at, e);
    if (ps != DPC_OK)
        return ps;
    cpu_call call = {.ctx = {.buf = r->buf, .N = a->N, .scalars = a->scalars, .sgemm = sgemm, .fail_at = a->fail_at,
                             .threads = cb->gemm_threads},
                     .be = be, .r = r, .e = e};
#ifdef DPC_USE_DNNL
    if (cb->convs) {
        call.ctx.conv = conv_call;
        call.ctx.kept = kept_call;
    }
    if (cb->linears)
        call.ctx.linear = linear_call;
#endif
    gemm_threads_max = cb->gemm_threads;
    int rc = cb->forward(&call.ctx);
    dpc_kernel_info k;
    if (call.lib_failed) {
        dpc_unit_kernel(u, rc - 1, &k);
        dpc_err_prefix(e, "%s:%d: kernel %s: ", k.file, k.line, k.name);
        return DPC_EDEVICE;
    }
    if (rc < 0) {
        dpc_unit_kernel(u, -rc - 1, &k);
        return dpc_errf(e, DPC_EDEVICE, "injected failure in kernel %s", k.name);
    }
    if (rc > 0) {
        dpc_unit_kernel(u, rc - 1, &k);
        return dpc_errf(e, DPC_EUSER, "%s:%d: index %lld is out of range for embedding %s with %lld rows", k.file,
                        k.line, (long long)call.ctx.bad_index, k.scope, (long long)call.ctx.bad_limit);
    }
    return DPC_OK;
}

static void cpu_destroy(dpc_backend *be) {
    cpu_backend *cb = (cpu_backend *)be;
    if (cb->so)
        dlclose(cb->so);
#ifdef DPC_USE_DNNL
    dpc_dnnl_convs_free(cb->convs);
    dpc_dnnl_linears_free(cb->linears);
#endif
    pthread_mutex_destroy(&cb->lock);
    free(cb->consts);
    free(cb->cbuf);
    free(cb);
}

dpc_status dpc_backend_cpu_new(const dpc_unit *u, float *const *params, dpc_backend **out, dpc_err *e) {
    cpu_backend *cb = dpc_calloc(1, sizeof *cb);
    if (!cb)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    cb->be = (dpc_backend){"cpu", cpu_prepare, cpu_replica_new, cpu_run, cpu_replica_free, cpu_destroy,
                           .weights_changed = cpu_weights_changed};
    pthread_mutex_init(&cb->lock, NULL);
    cb->u = u;
    cb->params = params;
    cb->gemm_threads = 1;
    /* read in every build: without oneDNN the switches steer nothing, but
     * a typo in one is still an error (cpu_env.h) */
    dpc_conv_env env;
    bool pack = true;
    dpc_status s = dpc_gemm_rows_init(e);
    if (s == DPC_OK)
        s = dpc_conv_env_read(&env, e);
    if (s == DPC_OK)
        s = dpc_env_flag("DPC_LINEAR_PACK", true, &pack, e);
#ifdef DPC_USE_DNNL
    if (s == DPC_OK)
        s = dpc_dnnl_convs_new(u, params, &env, set_threads, &cb->convs, e);
    if (s == DPC_OK)
        s = dpc_dnnl_linears_new(dpc_unit_nbufs(u), pack, &cb->linears, e);
#else
    (void)pack;
#endif
    if (s != DPC_OK) {
#ifdef DPC_USE_DNNL
        dpc_dnnl_convs_free(cb->convs);
#endif
        pthread_mutex_destroy(&cb->lock);
        free(cb);
        return s;
    }
    *out = &cb->be;
    return DPC_OK;
}
