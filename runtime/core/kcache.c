/* kcache.c - the content-addressed disk cache for compiled images; see
 * kcache.h for the layout and the rules. */
#include "kcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef DPC_VERSION
#define DPC_VERSION "unknown"
#endif

/* Footer, little-endian, at the end of every entry file:
 *     0  u64  payload length
 *     8  u64  payload checksum
 *    16  char key[64]
 *    80  char kind[32]    NUL-padded
 *   112  char arch[32]    NUL-padded
 *   144  u64  creation time (Unix seconds)
 *   152  u64  checksum of bytes 0..151
 *   160  char magic[16]
 */
#define FOOTER_SIZE 176

#define DIR_CAP 4096
#define PATH_CAP (DIR_CAP + 320) /* dir + "/" + a file name (<= 255) */
static const char FOOTER_MAGIC[16] = "dpc-kcache-v1\n\0";

/* ---- small helpers ---- */

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A fast checksum for detecting damage (not tampering): FNV-style over 8-byte
 * words with an xorshift, then the tail bytes. Each step is a bijection of
 * the state, so any change confined to one word is always detected. */
static uint64_t checksum(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 32;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    h ^= h >> 29;
    return h;
}

static bool valid_key(const char *key) {
    if (!key || strlen(key) != 64)
        return false;
    for (int i = 0; i < 64; i++)
        if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f')))
            return false;
    return true;
}
static bool valid_kind(const char *kind) {
    size_t n = kind ? strlen(kind) : 0;
    if (n < 1 || n > 31)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((kind[i] >= 'a' && kind[i] <= 'z') || (kind[i] >= '0' && kind[i] <= '9') ||
              kind[i] == '-'))
            return false;
    return true;
}
static bool valid_arch(const char *arch) {
    size_t n = arch ? strlen(arch) : 0;
    if (n > 31)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = arch[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

bool dpc_kcache_dir(char *out, size_t n) {
    const char *d = getenv("DPC_CACHE_DIR");
    int w;
    if (d && *d) {
        w = snprintf(out, n, "%s", d);
    } else if ((d = getenv("XDG_CACHE_HOME")) && *d == '/') {
        w = snprintf(out, n, "%s/dpc", d);
    } else if ((d = getenv("HOME")) && *d) {
        w = snprintf(out, n, "%s/.cache/dpc", d);
    } else {
        if (n)
            out[0] = 0;
        return false;
    }
    if (w < 0 || (size_t)w >= n)
        return false;
    /* No trailing slashes, so joined paths look clean. */
    size_t len = (size_t)w;
    while (len > 1 && out[len - 1] == '/')
        out[--len] = 0;
    return true;
}

/* Where a refusal of the directory is noted, for the caller to report
 * (the library itself never prints): the note the calling thread has
 * pushed (a model's, around its compiles), else the thread's own. Nothing
 * here is shared between threads, so one program's refusal is never
 * another's. */
static _Thread_local dpc_kcache_note t_own;
static _Thread_local dpc_kcache_note *t_note;
static _Thread_local bool t_own_taken;

static dpc_status refuse(dpc_err *e, const dpc_err *why) {
    dpc_kcache_note *n = t_note ? t_note : &t_own;
    if (!n->set) {
        memcpy(n->msg, why->msg, sizeof n->msg);
        n->set = true;
    }
    return dpc_errf(e, why->code, "%s", why->msg);
}

dpc_kcache_note *dpc_kcache_note_push(dpc_kcache_note *n) {
    dpc_kcache_note *prev = t_note;
    t_note = n;
    return prev;
}

void dpc_kcache_note_pop(dpc_kcache_note *prev) {
    dpc_kcache_note *cur = t_note, *up = prev ? prev : &t_own;
    if (cur && cur->set && !up->set) {
        memcpy(up->msg, cur->msg, sizeof up->msg);
        up->set = true;
    }
    t_note = prev;
}

bool dpc_kcache_refusal(char *msg, size_t n) {
    if (!t_own.set || t_own_taken)
        return false;
    t_own_taken = true;
    snprintf(msg, n, "%s", t_own.msg);
    return true;
}

/* Refuses a cache directory that someone else could write to: entries are
 * loaded as code. */
static dpc_status check_dir(const char *dir, dpc_err *e) {
    struct stat st;
    dpc_err why;
    if (stat(dir, &st) != 0)
        return dpc_errf(e, DPC_EIO, "kernel cache directory '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        dpc_errf(&why, DPC_EIO, "kernel cache directory '%s' is not a directory", dir);
    else if (st.st_uid != geteuid())
        dpc_errf(&why, DPC_EIO,
                 "kernel cache directory '%s' belongs to another user; refusing to use it "
                 "(set DPC_CACHE_DIR to a directory of your own)",
                 dir);
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        dpc_errf(&why, DPC_EIO,
                 "kernel cache directory '%s' is writable by group or others; refusing to "
                 "use it (chmod go-w it, or set DPC_CACHE_DIR)",
                 dir);
    else
        return DPC_OK;
    return refuse(e, &why);
}

/* mkdir -p, new components 0700. */
static dpc_status make_dir(const char *dir, dpc_err *e) {
    char path[DIR_CAP];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path)
        return dpc_errf(e, DPC_EIO, "kernel cache directory path is empty or too long");
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] == '/' || path[i] == 0) {
            char c = path[i];
            path[i] = 0;
            if (mkdir(path, 0700) != 0 && errno != EEXIST)
                return dpc_errf(e, DPC_EIO, "cannot create kernel cache directory '%s': %s", path,
                                strerror(errno));
            path[i] = c;
        }
    }
    return DPC_OK;
}

static bool entry_path(const char *key, const char *kind, char *path, size_t n) {
    char dir[DIR_CAP];
    if (!dpc_kcache_dir(dir, sizeof dir))
        return false;
    int w = snprintf(path, n, "%s/%s.%s", dir, key, kind);
    return w > 0 && (size_t)w < n;
}

/* Checks a whole entry file in memory; on success *payload_len is set. */
static bool verify(const unsigned char *file, size_t size, const char *key, const char *kind,
                   size_t *payload_len) {
    if (size < FOOTER_SIZE)
        return false;
    const unsigned char *f = file + size - FOOTER_SIZE;
    if (memcmp(f + 160, FOOTER_MAGIC, 16) != 0)
        return false;
    if (get_u64(f + 152) != checksum(f, 152))
        return false;
    uint64_t len = get_u64(f);
    if (len != size - FOOTER_SIZE)
        return false;
    if (memcmp(f + 16, key, 64) != 0)
        return false;
    char k[33];
    memcpy(k, f + 80, 32);
    k[32] = 0;
    if (strcmp(k, kind) != 0)
        return false;
    if (get_u64(f + 8) != checksum(file, (size_t)len))
        return false;
    *payload_len = (size_t)len;
    return true;
}

/* Reads and checks <key>.<kind>; a corrupt entry is removed. On success the
 * returned buffer (malloc'ed, size+1 bytes) holds the whole file. */
static unsigned char *load_entry(const char *key, const char *kind, char *path, size_t pathn,
                                 size_t *payload_len) {
    if (!valid_key(key) || !valid_kind(kind) || !entry_path(key, kind, path, pathn))
        return NULL;
    char dir[DIR_CAP];
    if (!dpc_kcache_dir(dir, sizeof dir) || check_dir(dir, NULL) != DPC_OK)
        return NULL;
    char *data;
    size_t size;
    if (dpc_read_file(path, DPC_KCACHE_MAX_ENTRY + FOOTER_SIZE, &data, &size, NULL) != DPC_OK)
        return NULL;
    if (!verify((const unsigned char *)data, size, key, kind, payload_len)) {
        unlink(path); /* the next put replaces it */
        dpc_free(data);
        return NULL;
    }
    return (unsigned char *)data;
}

bool dpc_kcache_get(const char *key, const char *kind, dpc_buf *out) {
    char path[PATH_CAP];
    size_t len;
    unsigned char *data = load_entry(key, kind, path, sizeof path, &len);
    if (!data)
        return false;
    /* Hand the file buffer over instead of copying it: the footer's first
     * byte becomes the NUL terminator. */
    dpc_buf_free(out);
    data[len] = 0;
    out->data = (char *)data;
    out->len = len;
    out->cap = len + FOOTER_SIZE + 1;
    return true;
}

bool dpc_kcache_path(const char *key, const char *kind, char *path, size_t n) {
    size_t len;
    unsigned char *data = load_entry(key, kind, path, n, &len);
    if (!data)
        return false;
    dpc_free(data);
    return true;
}

dpc_status dpc_kcache_put(const char *key, const char *kind, const char *arch, const void *data,
                          size_t len, dpc_err *e) {
    if (!arch)
        arch = "";
    if (!valid_key(key))
        return dpc_errf(e, DPC_EUSAGE, "kernel cache: malformed key '%s'", key ? key : "(null)");
    if (!valid_kind(kind))
        return dpc_errf(e, DPC_EUSAGE, "kernel cache: malformed kind '%s'", kind ? kind : "(null)");
    if (!valid_arch(arch))
        return dpc_errf(e, DPC_EUSAGE, "kernel cache: malformed arch '%s'", arch);
    if (len > DPC_KCACHE_MAX_ENTRY)
        return dpc_errf(e, DPC_EUSAGE, "kernel cache: entry of %zu bytes is too large", len);
    char dir[DIR_CAP], path[PATH_CAP];
    if (!dpc_kcache_dir(dir, sizeof dir))
        return dpc_errf(e, DPC_EIO,
                        "kernel cache: no directory (set DPC_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    dpc_status s = make_dir(dir, e);
    if (s == DPC_OK)
        s = check_dir(dir, e);
    if (s != DPC_OK)
        return s;
    if (!entry_path(key, kind, path, sizeof path))
        return dpc_errf(e, DPC_EIO, "kernel cache: path too long under '%s'", dir);

    unsigned char *file = dpc_malloc(len + FOOTER_SIZE);
    if (!file)
        return dpc_errf(e, DPC_ENOMEM, "kernel cache: out of memory (%zu bytes)", len);
    if (len)
        memcpy(file, data, len);
    unsigned char *f = file + len;
    memset(f, 0, FOOTER_SIZE);
    put_u64(f, len);
    put_u64(f + 8, checksum(data, len));
    memcpy(f + 16, key, 64);
    memcpy(f + 80, kind, strlen(kind));
    memcpy(f + 112, arch, strlen(arch));
    put_u64(f + 144, (uint64_t)time(NULL));
    put_u64(f + 152, checksum(f, 152));
    memcpy(f + 160, FOOTER_MAGIC, 16);

    /* each put has a temporary file of its own: threads need no lock */
    s = dpc_write_file_atomic(path, file, len + FOOTER_SIZE, e);
    dpc_free(file);
    if (s != DPC_OK)
        dpc_err_prefix(e, "kernel cache: ");
    return s;
}

/* Hashing the fields length-prefixed: "<len>:<bytes>\n" each. */
static void key_field(dpc_buf *b, const void *p, size_t n) {
    dpc_buf_printf(b, "%zu:", n);
    dpc_buf_put(b, p, n);
    dpc_buf_put(b, "\n", 1);
}

void dpc_kcache_key(const char *kind, const char *arch, const char *toolchain,
                    const char *options, const void *source, size_t source_len, char key[65]) {
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_puts(&b, "dpc-kcache-key-v1\n");
    key_field(&b, DPC_VERSION, strlen(DPC_VERSION));
    key_field(&b, kind ? kind : "", kind ? strlen(kind) : 0);
    key_field(&b, arch ? arch : "", arch ? strlen(arch) : 0);
    key_field(&b, toolchain ? toolchain : "", toolchain ? strlen(toolchain) : 0);
    key_field(&b, options ? options : "", options ? strlen(options) : 0);
    key_field(&b, source, source_len);
    if (b.oom) {
        /* Out of memory: a key nobody else produces, so the caller simply
         * misses (and its put stores under a key no lookup finds). */
        dpc_buf_free(&b);
        snprintf(key, 65, "%064x", 0);
        return;
    }
    dpc_sha256_hex(b.data, b.len, key);
    dpc_buf_free(&b);
}

/* ---- listing and clearing ---- */

/* "<64 hex>.<kind>" -> true, with *kind pointing into name. */
static bool entry_name(const char *name, const char **kind) {
    if (strlen(name) < 66 || name[64] != '.')
        return false;
    char key[65];
    memcpy(key, name, 64);
    key[64] = 0;
    if (!valid_key(key) || !valid_kind(name + 65))
        return false;
    *kind = name + 65;
    return true;
}

/* "<64 hex>.<kind>.tmp.<digits>": left by an interrupted write. */
static bool temp_name(const char *name) {
    const char *t = strstr(name, ".tmp.");
    if (!t || strlen(name) < 66 || name[64] != '.')
        return false;
    char head[128];
    size_t hn = (size_t)(t - name);
    if (hn >= sizeof head)
        return false;
    memcpy(head, name, hn);
    head[hn] = 0;
    const char *kind;
    if (!entry_name(head, &kind))
        return false;
    const char *d = t + 5;
    if (!*d)
        return false;
    for (; *d; d++)
        if (*d < '0' || *d > '9')
            return false;
    return true;
}

static void format_age(long long secs, char *out, size_t n) {
    if (secs < 0)
        secs = 0;
    if (secs < 120)
        snprintf(out, n, "%llds", secs);
    else if (secs < 2 * 3600)
        snprintf(out, n, "%lldm", secs / 60);
    else if (secs < 2 * 86400)
        snprintf(out, n, "%lldh", secs / 3600);
    else
        snprintf(out, n, "%lldd", secs / 86400);
}

/* Describes one entry by its footer (and size), without reading it all. */
static void describe(const char *dir, const char *name, const char *kind, dpc_buf *line) {
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    unsigned char f[FOOTER_SIZE];
    bool ok = false;
    long long size = -1;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        size = (long long)st.st_size;
        if (st.st_size >= FOOTER_SIZE &&
            pread(fd, f, FOOTER_SIZE, st.st_size - FOOTER_SIZE) == FOOTER_SIZE &&
            memcmp(f + 160, FOOTER_MAGIC, 16) == 0 && get_u64(f + 152) == checksum(f, 152) &&
            get_u64(f) == (uint64_t)(st.st_size - FOOTER_SIZE) && memcmp(f + 16, name, 64) == 0) {
            char k[33];
            memcpy(k, f + 80, 32);
            k[32] = 0;
            ok = strcmp(k, kind) == 0;
        }
    }
    if (fd >= 0)
        close(fd);
    if (!ok) {
        dpc_buf_printf(line, "%.64s %lld corrupt\n", name, size);
        return;
    }
    char arch[33], age[32];
    memcpy(arch, f + 112, 32);
    arch[32] = 0;
    format_age((long long)time(NULL) - (long long)get_u64(f + 144), age, sizeof age);
    dpc_buf_printf(line, "%.64s %lld %s %s %s\n", name, (long long)get_u64(f), kind,
                   arch[0] ? arch : "-", age);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The cache directory (dir) opened for reading; *d NULL when there is none
 * (no directory configured, or not created yet). */
static dpc_status open_dir(char dir[DIR_CAP], DIR **d, const char *verb, dpc_err *e) {
    *d = NULL;
    if (!dpc_kcache_dir(dir, DIR_CAP))
        return DPC_OK;
    *d = opendir(dir);
    if (!*d && errno != ENOENT)
        return dpc_errf(e, DPC_EIO, "cannot %s kernel cache '%s': %s", verb, dir, strerror(errno));
    return DPC_OK;
}

dpc_status dpc_kcache_list(dpc_buf *report, dpc_err *e) {
    char dir[DIR_CAP];
    DIR *d;
    dpc_status s0 = open_dir(dir, &d, "list", e);
    if (!d)
        return s0;
    char **lines = NULL;
    size_t n = 0, cap = 0;
    dpc_status s = DPC_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *kind;
        if (!entry_name(de->d_name, &kind))
            continue;
        dpc_buf line;
        dpc_buf_init(&line);
        describe(dir, de->d_name, kind, &line);
        char *text = dpc_buf_take(&line);
        if (text && n == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            char **grown = dpc_realloc(lines, ncap * sizeof *lines);
            if (!grown) {
                dpc_free(text);
                text = NULL;
            } else {
                lines = grown;
                cap = ncap;
            }
        }
        if (!text) {
            s = dpc_errf(e, DPC_ENOMEM, "out of memory listing the kernel cache");
            break;
        }
        lines[n++] = text;
    }
    closedir(d);
    if (s == DPC_OK) {
        if (n > 1)
            qsort(lines, n, sizeof *lines, cmp_str);
        for (size_t i = 0; i < n; i++)
            dpc_buf_puts(report, lines[i]);
    }
    for (size_t i = 0; i < n; i++)
        dpc_free(lines[i]);
    dpc_free(lines);
    if (s == DPC_OK && report->oom)
        s = dpc_errf(e, DPC_ENOMEM, "out of memory listing the kernel cache");
    return s;
}

dpc_status dpc_kcache_clear(long *removed, dpc_err *e) {
    *removed = 0;
    char dir[DIR_CAP];
    DIR *d;
    dpc_status s = open_dir(dir, &d, "open", e);
    if (!d)
        return s;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *kind;
        if (!entry_name(de->d_name, &kind) && !temp_name(de->d_name))
            continue;
        char path[PATH_CAP];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlink(path) == 0)
            (*removed)++;
        else if (errno != ENOENT && s == DPC_OK)
            s = dpc_errf(e, DPC_EIO, "cannot remove '%s': %s", path, strerror(errno));
    }
    closedir(d);
    return s;
}
