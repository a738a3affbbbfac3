/* nvrtc_compile.c - NVRTC loaded on first use, compilation of generated
 * kernels, the error message built from its log, and the cached variant on
 * top of kcache. */
#include "nvrtc_compile.h"
#include "cuda_driver.h" /* dpc_dlopen_toolkit */
#include "kcache.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef DPC_CUDA_INCLUDE
#define DPC_CUDA_INCLUDE "/usr/local/cuda/include"
#endif

/* The library, not linked (see dpc_dlopen_toolkit): the full path CMake
 * found, else the soname on the loader's path. */
#ifndef DPC_NVRTC_LIBRARY_FILE
#define DPC_NVRTC_LIBRARY_FILE ""
#endif
#ifndef DPC_NVRTC_SONAME
#define DPC_NVRTC_SONAME "libnvrtc.so.13"
#endif

#define MAX_INCLUDE_DIRS 4
#define MAX_OPTS 64

/* ---- NVRTC, loaded once ---- */

#define DPC_NVRTC_FUNCS(X)                                                                         \
    X(nvrtcCompileProgram)                                                                         \
    X(nvrtcCreateProgram)                                                                          \
    X(nvrtcDestroyProgram)                                                                         \
    X(nvrtcGetCUBIN)                                                                               \
    X(nvrtcGetCUBINSize)                                                                           \
    X(nvrtcGetErrorString)                                                                         \
    X(nvrtcGetNumSupportedArchs)                                                                   \
    X(nvrtcGetPTX)                                                                                 \
    X(nvrtcGetPTXSize)                                                                             \
    X(nvrtcGetProgramLog)                                                                          \
    X(nvrtcGetProgramLogSize)                                                                      \
    X(nvrtcGetSupportedArchs)                                                                      \
    X(nvrtcVersion)

typedef struct nvrtc_api {
#define DPC_NVRTC_FIELD_(name) __typeof__(&name) name;
    DPC_NVRTC_FUNCS(DPC_NVRTC_FIELD_)
#undef DPC_NVRTC_FIELD_
} nvrtc_api;

static pthread_once_t g_nv_once = PTHREAD_ONCE_INIT;
static nvrtc_api g_nv;
static _Atomic(const nvrtc_api *) g_nv_ready; /* &g_nv once loaded */
static char g_nv_msg[DPC_ERR_MSG];

/* NVRTC dlopens libnvrtc-builtins.so.X.Y by soname when it compiles, which
 * the loader finds only on its path; when NVRTC came from a directory off it
 * (the toolkit's lib/), load the builtins beside it first, so NVRTC's
 * dlopen finds them already loaded. A failure is left for NVRTC to report. */
static void preload_builtins(void *lib) {
    char dir[4096], path[4200];
    int major = 0, minor = 0;
    if (dlinfo(lib, RTLD_DI_ORIGIN, dir) != 0 || g_nv.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
        return;
    snprintf(path, sizeof path, "%s/libnvrtc-builtins.so.%d.%d", dir, major, minor);
    if (access(path, F_OK) == 0)
        (void)dlopen(path, RTLD_NOW | RTLD_LOCAL); /* for the life of the process, like NVRTC */
}

static void nvrtc_load_once(void) {
    void *lib = dpc_dlopen_toolkit("NVRTC", "DPC_NVRTC_LIBRARY", DPC_NVRTC_LIBRARY_FILE, DPC_NVRTC_SONAME,
                                   g_nv_msg, sizeof g_nv_msg);
    if (!lib)
        return;
#define DPC_NVRTC_RESOLVE_(name)                                                                   \
    {                                                                                              \
        void *p_ = dlsym(lib, #name);                                                              \
        if (!p_) {                                                                                 \
            snprintf(g_nv_msg, sizeof g_nv_msg, "NVRTC %s lacks %s (set DPC_NVRTC_LIBRARY to a libnvrtc)",   \
                     DPC_NVRTC_SONAME, #name);                                                     \
            return;                                                                                \
        }                                                                                          \
        memcpy(&g_nv.name, &p_, sizeof p_);                                                        \
    }
    DPC_NVRTC_FUNCS(DPC_NVRTC_RESOLVE_)
#undef DPC_NVRTC_RESOLVE_
    preload_builtins(lib);
    atomic_store_explicit(&g_nv_ready, &g_nv, memory_order_release);
}

/* The table, loading it on first use; NULL if NVRTC cannot be loaded. */
static const nvrtc_api *nvrtc(void) {
    pthread_once(&g_nv_once, nvrtc_load_once);
    return atomic_load_explicit(&g_nv_ready, memory_order_acquire);
}

dpc_status dpc_nvrtc_load(dpc_err *e) {
    return nvrtc() ? DPC_OK : dpc_errf(e, DPC_EDEVICE, "%s", g_nv_msg);
}

const char *dpc_nvrtc_result_name(int result) {
    /* nvrtcGetErrorString returns the enumerator's name ("NVRTC_SUCCESS"). */
    const nvrtc_api *nv = atomic_load_explicit(&g_nv_ready, memory_order_acquire);
    const char *s = nv ? nv->nvrtcGetErrorString((nvrtcResult)result) : NULL;
    return s ? s : "NVRTC_ERROR_UNKNOWN";
}

void dpc_nvrtc_version(int *major, int *minor) {
    *major = *minor = 0;
    const nvrtc_api *nv = nvrtc();
    if (nv)
        nv->nvrtcVersion(major, minor);
}

int dpc_nvrtc_newest_arch(int at_most) {
    const nvrtc_api *nv = nvrtc();
    int n = 0, best = 0, archs[256];
    if (!nv || nv->nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256 ||
        nv->nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS)
        return 0;
    for (int i = 0; i < n; i++)
        if (archs[i] <= at_most && archs[i] > best)
            best = archs[i];
    return best;
}

bool dpc_nvrtc_arch_valid(const char *arch) {
    const char *p;
    if (!arch)
        return false;
    if (strncmp(arch, "sm_", 3) == 0)
        p = arch + 3;
    else if (strncmp(arch, "compute_", 8) == 0)
        p = arch + 8;
    else
        return false;
    size_t digits = strspn(p, "0123456789");
    if (digits < 2 || digits > 4)
        return false;
    p += digits;
    if (*p == 'a' || *p == 'f')
        p++;
    return *p == 0;
}

bool dpc_nvrtc_arch_is_ptx(const char *arch) { return arch && strncmp(arch, "compute_", 8) == 0; }

/* ---- the toolkit's include directory, found once ---- */

static pthread_once_t g_inc_once = PTHREAD_ONCE_INIT;
static char g_inc_opt[MAX_INCLUDE_DIRS][4100];
static int g_ninc;

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void add_include(const char *dir, size_t n) {
    char path[4096];
    if (n == 0 || n >= sizeof path || g_ninc == MAX_INCLUDE_DIRS)
        return;
    memcpy(path, dir, n);
    path[n] = 0;
    if (!is_dir(path))
        return;
    for (int i = 0; i < g_ninc; i++)
        if (strcmp(g_inc_opt[i] + 2, path) == 0)
            return;
    snprintf(g_inc_opt[g_ninc++], sizeof g_inc_opt[0], "-I%s", path);
}

/* cuda_fp16.h and cuda_bf16.h live in the toolkit, not inside NVRTC: use the
 * directory CMake found (a ';'-separated list), else $CUDA_HOME or
 * $CUDA_PATH, else /usr/local/cuda. */
static void find_includes(void) {
    const char *list = DPC_CUDA_INCLUDE;
    while (*list) {
        size_t n = strcspn(list, ";");
        add_include(list, n);
        list += n;
        if (*list == ';')
            list++;
    }
    if (g_ninc)
        return;
    const char *envs[] = {"CUDA_HOME", "CUDA_PATH"};
    for (int i = 0; i < 2; i++) {
        const char *h = getenv(envs[i]);
        char p[4096];
        if (h && *h && snprintf(p, sizeof p, "%s/include", h) < (int)sizeof p)
            add_include(p, strlen(p));
    }
    if (!g_ninc)
        add_include("/usr/local/cuda/include", strlen("/usr/local/cuda/include"));
}

/* The full option list: standard options, then the caller's. */
typedef struct opts {
    const char *v[MAX_OPTS];
    int n;
    char arch[48];
} opts;

static dpc_status build_opts(opts *o, const char *arch, const char *const *extra, int nextra,
                             dpc_err *e) {
    pthread_once(&g_inc_once, find_includes);
    o->n = 0;
    if (nextra < 0 || nextra > MAX_OPTS - 4 - g_ninc)
        return dpc_errf(e, DPC_EUSAGE, "NVRTC: %d extra options (at most %d)", nextra,
                        MAX_OPTS - 4 - g_ninc);
    snprintf(o->arch, sizeof o->arch, "-arch=%s", arch);
    o->v[o->n++] = o->arch;
    o->v[o->n++] = "-std=c++17";
    o->v[o->n++] = "-default-device";
    for (int i = 0; i < g_ninc; i++)
        o->v[o->n++] = g_inc_opt[i];
    for (int i = 0; i < nextra; i++) {
        if (!extra[i])
            return dpc_errf(e, DPC_EUSAGE, "NVRTC: extra option %d is NULL", i);
        o->v[o->n++] = extra[i];
    }
    return DPC_OK;
}

/* ---- the error message: the first errors of the log ---- */

/* A diagnostic's first line: "file(line): error: ..." and friends. */
static bool is_header(const char *line, size_t n) {
    for (size_t i = 0; i + 2 < n; i++)
        if (line[i] == ')' && line[i + 1] == ':' && line[i + 2] == ' ')
            return true;
    return n >= 6 && (strncmp(line, "nvrtc:", 6) == 0 || strncmp(line, "error:", 6) == 0);
}

static bool is_error_header(const char *line, size_t n) {
    if (!is_header(line, n))
        return false;
    for (size_t i = 0; i + 5 <= n; i++)
        if (memcmp(line + i, "error", 5) == 0)
            return true;
    return false;
}

/* Appends to msg (capacity cap, NUL-terminated) whole diagnostic blocks for
 * errors, in log order, while they fit; falls back to the first lines of the
 * log when it holds no recognisable error. */
static void summarize_log(const char *log, char *msg, size_t cap) {
    size_t used = strlen(msg);
    const char *p = log;
    bool in_error = false, any = false, truncated = false;
    for (int pass = 0; pass < 2 && !any; pass++) {
        p = log;
        in_error = false;
        while (*p) {
            size_t n = strcspn(p, "\n");
            while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
                n--;
            size_t adv = strcspn(p, "\n");
            bool header = is_header(p, n);
            if (pass == 0) {
                if (header)
                    in_error = is_error_header(p, n);
                else if (n == 0)
                    in_error = false;
            } else {
                in_error = n > 0; /* no error found: take the log as it comes */
            }
            if (in_error) {
                if (used + n + 2 < cap && !truncated) {
                    msg[used++] = '\n';
                    memcpy(msg + used, p, n);
                    used += n;
                    msg[used] = 0;
                    any = true;
                } else {
                    truncated = true;
                }
            }
            p += adv;
            if (*p == '\n')
                p++;
        }
    }
    if (truncated && used + 5 < cap) {
        memcpy(msg + used, "\n...", 5);
    }
}

/* ---- compile ---- */

static dpc_status nvrtc_fail(nvrtcResult r, const char *what, dpc_err *e) {
    return dpc_errf(e, r == NVRTC_ERROR_OUT_OF_MEMORY ? DPC_ENOMEM : DPC_EDEVICE, "%s failed: %s",
                    what, dpc_nvrtc_result_name(r));
}

static dpc_status compile_with(const opts *o, const char *src, const char *name,
                               const char *arch, dpc_buf *out_image, dpc_buf *out_log,
                               dpc_err *e) {
    const nvrtc_api *nv = nvrtc(); /* loaded by begin() */
    nvrtcProgram prog;
    nvrtcResult r = nv->nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return nvrtc_fail(r, "nvrtcCreateProgram", e);

    dpc_status s = DPC_OK;
    nvrtcResult cr = nv->nvrtcCompileProgram(prog, o->n, o->v);

    /* The log, warnings included, whatever the outcome. */
    size_t log_size = 0;
    char *log = NULL;
    if (nv->nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 0) {
        log = dpc_malloc(log_size + 1);
        if (log && nv->nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)
            log[log_size] = 0;
        else if (log)
            log[0] = 0;
    }
    if (out_log && log)
        dpc_buf_puts(out_log, log);

    if (cr != NVRTC_SUCCESS) {
        char msg[DPC_ERR_MSG];
        snprintf(msg, sizeof msg, "NVRTC could not compile '%s' for %s: %s", name, arch,
                 dpc_nvrtc_result_name(cr));
        if (log)
            summarize_log(log, msg, sizeof msg);
        s = dpc_errf(e, cr == NVRTC_ERROR_OUT_OF_MEMORY ? DPC_ENOMEM : DPC_EDEVICE, "%s", msg);
        goto done;
    }

    bool ptx = dpc_nvrtc_arch_is_ptx(arch);
    size_t size = 0;
    r = ptx ? nv->nvrtcGetPTXSize(prog, &size) : nv->nvrtcGetCUBINSize(prog, &size);
    if (r != NVRTC_SUCCESS) {
        s = nvrtc_fail(r, ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize", e);
        goto done;
    }
    if (size == 0) {
        s = dpc_errf(e, DPC_EDEVICE, "NVRTC produced an empty %s for '%s' (%s)",
                     ptx ? "PTX" : "CUBIN", name, arch);
        goto done;
    }
    char *img = dpc_malloc(size + 1);
    if (!img) {
        s = dpc_errf(e, DPC_ENOMEM, "out of memory for a %zu-byte kernel image", size);
        goto done;
    }
    r = ptx ? nv->nvrtcGetPTX(prog, img) : nv->nvrtcGetCUBIN(prog, img);
    if (r != NVRTC_SUCCESS) {
        dpc_free(img);
        s = nvrtc_fail(r, ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN", e);
        goto done;
    }
    /* The PTX size counts its NUL terminator; keep len to the text. */
    if (ptx && img[size - 1] == 0)
        size--;
    img[size] = 0;
    dpc_buf_free(out_image);
    out_image->data = img;
    out_image->len = size;
    out_image->cap = size + 1;

done:
    dpc_free(log);
    nv->nvrtcDestroyProgram(&prog);
    if (s == DPC_OK && out_log && out_log->oom)
        s = dpc_errf(e, DPC_ENOMEM, "out of memory keeping the NVRTC log");
    return s;
}

static dpc_status check_args(const char *src, const char *name, const char *arch, dpc_err *e) {
    if (!src || !name)
        return dpc_errf(e, DPC_EUSAGE, "NVRTC: no source or no name");
    if (!dpc_nvrtc_arch_valid(arch))
        return dpc_errf(e, DPC_EUSAGE,
                        "NVRTC: bad target '%s' (want sm_XX for a CUBIN or compute_XX for PTX)",
                        arch ? arch : "(null)");
    return DPC_OK;
}

/* The arguments checked, then the options. */
static dpc_status begin(opts *o, const char *src, const char *name, const char *arch, const char *const *extra_opts,
                        int nopts, dpc_err *e) {
    dpc_status s = check_args(src, name, arch, e);
    if (s == DPC_OK)
        s = dpc_nvrtc_load(e);
    return s == DPC_OK ? build_opts(o, arch, extra_opts, nopts, e) : s;
}

dpc_status dpc_nvrtc_compile(const char *src, const char *name, const char *arch,
                             const char *const *extra_opts, int nopts, dpc_buf *out_image,
                             dpc_buf *out_log, dpc_err *e) {
    opts o;
    dpc_status s = begin(&o, src, name, arch, extra_opts, nopts, e);
    return s == DPC_OK ? compile_with(&o, src, name, arch, out_image, out_log, e) : s;
}

dpc_status dpc_nvrtc_compile_cached(const char *src, const char *name, const char *arch,
                                    const char *const *extra_opts, int nopts, dpc_buf *out_image,
                                    dpc_buf *out_log, bool *hit, dpc_err *e) {
    if (hit)
        *hit = false;
    opts o;
    dpc_status s = begin(&o, src, name, arch, extra_opts, nopts, e);
    if (s != DPC_OK)
        return s;

    /* Key: the program name and every option, one per line, plus the rest. */
    dpc_buf optstr;
    dpc_buf_init(&optstr);
    dpc_buf_printf(&optstr, "name=%s\n", name);
    for (int i = 0; i < o.n; i++)
        dpc_buf_printf(&optstr, "%s\n", o.v[i]);
    if (optstr.oom) {
        dpc_buf_free(&optstr);
        return dpc_errf(e, DPC_ENOMEM, "out of memory building a kernel cache key");
    }
    int major, minor;
    dpc_nvrtc_version(&major, &minor);
    char toolchain[32], key[65];
    snprintf(toolchain, sizeof toolchain, "nvrtc %d.%d", major, minor);
    const char *kind = dpc_nvrtc_arch_is_ptx(arch) ? "ptx" : "cubin";
    dpc_kcache_key(kind, arch, toolchain, optstr.data, src, strlen(src), key);
    dpc_buf_free(&optstr);

    if (dpc_kcache_get(key, kind, out_image)) {
        if (hit)
            *hit = true;
        if (out_log && out_log->data) {
            out_log->len = 0;
            out_log->data[0] = 0;
        }
        return DPC_OK;
    }
    s = compile_with(&o, src, name, arch, out_image, out_log, e);
    if (s != DPC_OK)
        return s;
    /* A cache that cannot be written costs the next run a compile, nothing
     * more: ignore the failure. */
    dpc_kcache_put(key, kind, arch, out_image->data, out_image->len, NULL);
    return DPC_OK;
}
