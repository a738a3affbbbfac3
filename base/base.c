/* base.c - errors, buffers, atomic file writes, Python float formatting and
 * hashing: the plumbing the compiler and the runtime share. */
#include "base.h"
#include "faults.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

dpc_status dpc_errf(dpc_err *e, dpc_status code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

void dpc_err_prefix(dpc_err *e, const char *fmt, ...) {
    if (!e)
        return;
    char pre[256], old[DPC_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t n = strlen(pre);
    if (n >= sizeof e->msg)
        n = sizeof e->msg - 1;
    memcpy(e->msg, pre, n);
    size_t rest = strnlen(old, sizeof old - 1);
    if (rest > sizeof e->msg - 1 - n)
        rest = sizeof e->msg - 1 - n;
    memcpy(e->msg + n, old, rest);
    e->msg[n + rest] = 0;
}

const char *dpc_status_name(dpc_status s) {
    switch (s) {
    case DPC_OK: return "ok";
    case DPC_EUSER: return "user error";
    case DPC_EUSAGE: return "usage error";
    case DPC_ENOMEM: return "out of memory";
    case DPC_EIO: return "i/o error";
    case DPC_EDEVICE: return "device error";
    case DPC_EINTERNAL: return "internal error";
    case DPC_EBUSY: return "busy";
    }
    return "unknown";
}

void *dpc_malloc(size_t n) {
    if (dpc_fault_alloc_should_fail())
        return NULL;
    return malloc(n ? n : 1);
}
void *dpc_calloc(size_t n, size_t size) {
    if (dpc_fault_alloc_should_fail())
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}
void *dpc_realloc(void *p, size_t n) {
    if (dpc_fault_alloc_should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}
char *dpc_strndup(const char *s, size_t n) {
    char *d = dpc_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}
char *dpc_strdup(const char *s) { return dpc_strndup(s, strlen(s)); }
void dpc_free(void *p) { free(p); }

void dpc_buf_init(dpc_buf *b) { memset(b, 0, sizeof *b); }
void dpc_buf_free(dpc_buf *b) {
    free(b->data);
    dpc_buf_init(b);
}
static bool buf_reserve(dpc_buf *b, size_t extra) {
    if (b->oom)
        return false;
    size_t need;
    if (!dpc_add_size(b->len, extra + 1, &need)) {
        b->oom = true;
        return false;
    }
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}
void dpc_buf_put(dpc_buf *b, const void *p, size_t n) {
    if (!buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}
void dpc_buf_puts(dpc_buf *b, const char *s) { dpc_buf_put(b, s, strlen(s)); }
void dpc_buf_vprintf(dpc_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !buf_reserve(b, (size_t)n))
        return;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}
void dpc_buf_printf(dpc_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dpc_buf_vprintf(b, fmt, ap);
    va_end(ap);
}
char *dpc_buf_take(dpc_buf *b) {
    if (b->oom) {
        dpc_buf_free(b);
        return NULL;
    }
    if (!b->data && !buf_reserve(b, 0))
        return NULL;
    char *p = b->data;
    dpc_buf_init(b);
    return p;
}

dpc_status dpc_open_regular(const char *path, int flags, int *fd, uint64_t *size, dpc_err *e) {
    /* O_NONBLOCK so that opening a FIFO never blocks (a FIFO's open waits
     * for a writer); it is refused below, and a regular file's reads ignore
     * the flag. */
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | flags);
    if (*fd < 0)
        return dpc_errf(e, DPC_EUSER, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    dpc_status s = DPC_OK;
    if (fstat(*fd, &st) != 0)
        s = dpc_errf(e, DPC_EUSER, "cannot stat '%s': %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        s = dpc_errf(e, DPC_EUSER, "'%s' is a directory, not a file", path);
    else if (!S_ISREG(st.st_mode))
        s = dpc_errf(e, DPC_EUSER, "'%s' is not a regular file", path);
    if (s != DPC_OK) {
        close(*fd);
        *fd = -1;
        return s;
    }
    *size = (uint64_t)st.st_size;
    return DPC_OK;
}

dpc_status dpc_read_file(const char *path, size_t max_bytes, char **data, size_t *len, dpc_err *e) {
    *data = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    dpc_status s = dpc_open_regular(path, 0, &fd, &size, e);
    if (s != DPC_OK)
        return s;
    if (size > max_bytes) {
        close(fd);
        return dpc_errf(e, DPC_EUSER, "'%s' is too large (%llu bytes, limit %zu)", path, (unsigned long long)size,
                        max_bytes);
    }
    size_t n = (size_t)size;
    char *buf = dpc_malloc(n + 1);
    if (!buf) {
        close(fd);
        return dpc_errf(e, DPC_ENOMEM, "out of memory reading '%s' (%zu bytes)", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int err = errno;
            close(fd);
            free(buf);
            return dpc_errf(e, DPC_EIO, "cannot read '%s': %s", path,
                            r == 0 ? "file shrank while reading" : strerror(err));
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *data = buf;
    *len = n;
    return DPC_OK;
}

/* ---- writing files ---------------------------------------------------------
 * Every file dpc writes goes through dpc_write_files_atomic. An output that
 * is a regular file (or does not exist yet) is staged: written in full to a
 * new temporary file next to it, fsync'ed, and renamed over it only once
 * every output of the call is complete, so a failure leaves each previous
 * file as it was. Character devices and FIFOs (/dev/null, a pipe), and
 * descriptor names such as /dev/stdout, are streams: written through, never
 * replaced. A symbolic link is followed and the file it names replaced
 * atomically, as a careful `>` would; directories, block devices and
 * sockets are refused. */

typedef enum { W_CREATE, W_REPLACE, W_THROUGH } wkind;

typedef struct wtarget {
    const char *path; /* as the caller named it, for messages */
    char *dest;       /* where the data lands: path, or what its link names */
    char *tmp;        /* the staged temporary (W_CREATE, W_REPLACE) */
    wkind kind;
    struct stat old;  /* W_REPLACE: the file being replaced */
} wtarget;

static dpc_status write_err(const char *path, int err, dpc_err *e) {
    return dpc_errf(e, DPC_EIO, "cannot write '%s': %s", path, strerror(err));
}

/* The directory part of path ("." for a bare name); NULL if out of memory. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return !slash ? dpc_strdup(".") : dpc_strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

/* The kernel's fs.protected_symlinks rule, which realpath() does not apply:
 * in a sticky world-writable directory (/tmp) a link is followed only if it
 * belongs to us or to the directory's owner, so that a link someone else
 * planted there cannot aim our output at a file of their choosing. */
static bool link_followable(const char *path, const struct stat *lst) {
    char *dir = dir_of(path);
    struct stat ds;
    bool ok = dir && stat(dir, &ds) == 0;
    free(dir);
    if (!ok)
        return false;
    bool shared = (ds.st_mode & S_ISVTX) && (ds.st_mode & S_IWOTH);
    return !shared || lst->st_uid == geteuid() || lst->st_uid == ds.st_uid;
}

/* /dev/stdout, /dev/fd/N, /proc/self/fd/N: names of a descriptor, whatever
 * it is open on (a pipe, a terminal, a file the shell redirected to). The
 * user means that stream, so it is written through even when it is a
 * regular file. Such a name lies in a /proc/<pid>/fd directory (/dev/fd
 * leads there) or is a link into /proc (/dev/stdout). */
static bool descriptor_alias(const char *path, bool link) {
    char *dir = dir_of(path), *real = dir ? realpath(dir, NULL) : NULL;
    bool in_proc = real && !strncmp(real, "/proc/", 6);
    free(dir);
    free(real);
    if (in_proc || !link)
        return in_proc;
    char to[16];
    ssize_t n = readlink(path, to, sizeof to);
    return n >= 6 && !strncmp(to, "/proc/", 6);
}

/* Where path's data goes, and how (see above). */
static dpc_status resolve_target(const char *path, wtarget *t, dpc_err *e) {
    memset(t, 0, sizeof *t);
    t->path = path;
    struct stat lst, st;
    if (lstat(path, &lst) != 0) { /* a new file; the create reports any other error */
        t->kind = W_CREATE;
        t->dest = dpc_strdup(path);
        return t->dest ? DPC_OK : dpc_errf(e, DPC_ENOMEM, "out of memory");
    }
    bool link = S_ISLNK(lst.st_mode);
    if (link && !link_followable(path, &lst))
        return dpc_errf(e, DPC_EUSER, "'%s' is a symbolic link in a shared directory that belongs to someone "
                        "else: not followed", path);
    if (stat(path, &st) != 0)
        return dpc_errf(e, DPC_EUSER, "'%s' is a symbolic link to nothing that exists (%s)", path, strerror(errno));
    if (S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode))
        return dpc_errf(e, DPC_EUSER, "'%s' is %s: an output must be a regular file, a character device or a FIFO",
                        path, S_ISDIR(st.st_mode) ? "a directory" : S_ISBLK(st.st_mode) ? "a block device" : "a socket");
    if (!S_ISREG(st.st_mode) || descriptor_alias(path, link)) {
        t->kind = W_THROUGH;
        t->dest = dpc_strdup(path);
    } else {
        t->kind = W_REPLACE;
        t->old = st;
        t->dest = link ? realpath(path, NULL) : dpc_strdup(path);
    }
    return t->dest ? DPC_OK : dpc_errf(e, DPC_EIO, "cannot resolve '%s': %s", path, strerror(errno));
}

/* The one way dpc makes a temporary file beside a target: a fresh name,
 * "<dest>.tmp.<digits>" (the kernel cache recognises leftovers by it),
 * created with O_EXCL|O_NOFOLLOW so that nothing planted under that name, a
 * symlink least of all, is ever opened. Mode 0666 is masked by the umask
 * (and a directory's default ACL) as any new file is. -1 with errno on failure. */
static int open_temp_beside(const char *dest, char **tmp) {
    static _Atomic unsigned long seq;
    size_t n = strlen(dest) + 64;
    if (!(*tmp = dpc_malloc(n))) {
        errno = ENOMEM;
        return -1;
    }
    for (int attempt = 0; attempt < 100; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(*tmp, n, "%s.tmp.%ld%09ld%lu", dest, (long)getpid(), (long)ts.tv_nsec, (unsigned long)seq++);
        int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

/* 0 or the errno of the failed write. */
static int write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    for (size_t done = 0; done < len;) {
        ssize_t w = dpc_fault_io_should_fail() ? (errno = ENOSPC, -1) : write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        done += (size_t)w;
    }
    return 0;
}

/* Writes the temporary for t in full and makes it durable. A replaced file
 * keeps its permission bits (and, when we may, its owner) as under `>`. */
static dpc_status stage(wtarget *t, const void *data, size_t len, dpc_err *e) {
    int fd = open_temp_beside(t->dest, &t->tmp);
    if (fd < 0)
        return write_err(t->path, errno, e);
    int err = write_all(fd, data, len);
    if (!err && t->kind == W_REPLACE) {
        if (geteuid() == 0 && fchown(fd, t->old.st_uid, t->old.st_gid) != 0) {
            /* best effort: root's copy keeps its owner where the filesystem allows */
        }
        if (fchmod(fd, t->old.st_mode & 0777) != 0)
            err = errno;
    }
    if (!err && fsync(fd) != 0)
        err = errno;
    if (close(fd) != 0 && !err)
        err = errno;
    return err ? write_err(t->path, err, e) : DPC_OK;
}

/* A stream is opened without O_CREAT, so it never becomes a new file;
 * O_TRUNC matters only for a regular file behind /dev/stdout, as under `>`. */
static dpc_status write_through(const wtarget *t, const void *data, size_t len, dpc_err *e) {
    int fd = open(t->dest, O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return write_err(t->path, errno, e);
    int err = write_all(fd, data, len);
    if (close(fd) != 0 && !err)
        err = errno;
    return err ? write_err(t->path, err, e) : DPC_OK;
}

/* Removes what is still staged and frees every target. */
static void unstage(wtarget *t, int n) {
    for (int i = 0; i < n; i++) {
        if (t[i].tmp)
            unlink(t[i].tmp);
        free(t[i].tmp);
        free(t[i].dest);
    }
    free(t);
}

/* Streams first, because their failure can still be undone by dropping the
 * temporaries; the renames last, one per file, each atomic. */
static dpc_status commit(wtarget *t, int n, const void *const *data, const size_t *lens, dpc_err *e) {
    dpc_status s = DPC_OK;
    for (int i = 0; i < n && s == DPC_OK; i++)
        if (t[i].kind == W_THROUGH)
            s = write_through(&t[i], data[i], lens[i], e);
    int renamed = 0;
    for (int i = 0; i < n && s == DPC_OK; i++) {
        if (!t[i].tmp)
            continue;
        if (rename(t[i].tmp, t[i].dest) != 0) {
            s = write_err(t[i].path, errno, e);
            if (renamed)
                dpc_err_prefix(e, "%d of the other outputs were already replaced: ", renamed);
            break;
        }
        free(t[i].tmp);
        t[i].tmp = NULL;
        renamed++;
    }
    return s;
}

dpc_status dpc_write_files_atomic(int n, const char *const *paths, const void *const *data, const size_t *lens,
                                  dpc_err *e) {
    wtarget *t = dpc_calloc((size_t)(n > 0 ? n : 1), sizeof *t);
    if (!t)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    dpc_status s = DPC_OK;
    for (int i = 0; i < n && s == DPC_OK; i++)
        s = resolve_target(paths[i], &t[i], e);
    for (int i = 0; i < n && s == DPC_OK; i++)
        if (t[i].kind != W_THROUGH)
            s = stage(&t[i], data[i], lens[i], e);
    if (s == DPC_OK)
        s = commit(t, n, data, lens, e);
    unstage(t, n);
    return s;
}

dpc_status dpc_write_file_atomic(const char *path, const void *data, size_t len, dpc_err *e) {
    return dpc_write_files_atomic(1, &path, &data, &len, e);
}

/* A path made absolute and free of ".", ".." and links, for a file that may
 * not exist yet: its directory resolved, its last component kept. */
static char *norm_path(const char *p) {
    char *r = realpath(p, NULL);
    if (r)
        return r;
    char *dir = dir_of(p), *rd = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!rd)
        return dpc_strdup(p);
    const char *slash = strrchr(p, '/'), *base = slash ? slash + 1 : p;
    size_t n = strlen(rd) + strlen(base) + 2;
    char *out = dpc_malloc(n);
    if (out)
        snprintf(out, n, "%s%s%s", rd, strcmp(rd, "/") ? "/" : "", base);
    free(rd);
    return out;
}

bool dpc_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *na = norm_path(a), *nb = norm_path(b);
    bool same = na && nb ? strcmp(na, nb) == 0 : strcmp(a, b) == 0;
    free(na);
    free(nb);
    return same;
}

dpc_status dpc_parse_file(const char *path, dpc_status (*parse)(const void *buf, size_t len, void *out, dpc_err *e),
                          void *out, dpc_err *e) {
    char *data;
    size_t len;
    dpc_status st = dpc_read_file(path, SIZE_MAX / 2, &data, &len, e);
    if (st)
        return st;
    st = parse(data, len, out, e);
    dpc_free(data);
    if (st)
        dpc_err_prefix(e, "%s: ", path);
    return st;
}

dpc_status dpc_write_image(const char *path, dpc_buf *b, dpc_status st, dpc_err *e) {
    if (st) { /* a failed serializer leaves b empty */
        dpc_err_prefix(e, "%s: ", path);
        return st;
    }
    st = dpc_write_file_atomic(path, b->data, b->len, e);
    dpc_buf_free(b);
    return st;
}

/* Python's float repr: the shortest digit string that round-trips, printed
 * in fixed notation when -4 <= exponent < 16 and in scientific notation with
 * a signed two-digit exponent otherwise. */
void dpc_format_pyfloat(double v, char *out, size_t n) {
    if (isnan(v)) {
        snprintf(out, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(out, n, v < 0 ? "-inf" : "inf");
        return;
    }
    if (v == 0) {
        snprintf(out, n, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    char tmp[64];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    /* tmp is [-]d[.ddd]e[+-]XX; collect digits and the exponent. */
    char digits[32];
    int nd = 0, exp10;
    const char *s = tmp;
    bool neg = false;
    if (*s == '-') {
        neg = true;
        s++;
    }
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            digits[nd++] = *s;
    exp10 = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    char body[64];
    int pos = 0;
    if (exp10 < -4 || exp10 >= 16) {
        body[pos++] = digits[0];
        if (nd > 1) {
            body[pos++] = '.';
            for (int i = 1; i < nd; i++)
                body[pos++] = digits[i];
        }
        pos += snprintf(body + pos, sizeof body - (size_t)pos, "e%c%02d", exp10 < 0 ? '-' : '+',
                        exp10 < 0 ? -exp10 : exp10);
    } else if (exp10 < 0) {
        body[pos++] = '0';
        body[pos++] = '.';
        for (int i = 0; i < -exp10 - 1; i++)
            body[pos++] = '0';
        for (int i = 0; i < nd; i++)
            body[pos++] = digits[i];
    } else {
        for (int i = 0; i <= exp10; i++)
            body[pos++] = i < nd ? digits[i] : '0';
        body[pos++] = '.';
        if (nd > exp10 + 1)
            for (int i = exp10 + 1; i < nd; i++)
                body[pos++] = digits[i];
        else
            body[pos++] = '0';
    }
    body[pos] = 0;
    snprintf(out, n, "%s%s", neg ? "-" : "", body);
}

uint64_t dpc_fnv1a(const void *p, size_t n, uint64_t h) {
    const unsigned char *c = p;
    if (!h)
        h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* SHA-256 (FIPS 180-4), used for content-addressed caches. */
static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

void dpc_sha256_hex(const void *data, size_t n, char out[65]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = data;
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        sha256_block(h, p + i);
    unsigned char tail[128] = {0};
    size_t rem = n - i;
    memcpy(tail, p + i, rem);
    tail[rem] = 0x80;
    size_t tl = rem + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int k = 0; k < 8; k++)
        tail[tl - 1 - k] = (unsigned char)(bits >> (8 * k));
    for (size_t k = 0; k < tl; k += 64)
        sha256_block(h, tail + k);
    for (int k = 0; k < 8; k++)
        snprintf(out + 8 * k, 9, "%08x", h[k]);
}

dpc_status dpc_env_long(const char *name, long min, long max, long *out, bool *set, dpc_err *e) {
    const char *v = getenv(name);
    *set = v && *v;
    if (!*set)
        return DPC_OK;
    /* strtol alone would take leading blanks and "+", and "abc" as 0 */
    const char *d = v + (*v == '-');
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*d < '0' || *d > '9' || *end || errno == ERANGE || x < min || x > max)
        return dpc_errf(e, DPC_EUSAGE, "environment variable %s='%.100s' is not an integer from %ld to %ld", name, v,
                        min, max);
    *out = x;
    return DPC_OK;
}

dpc_status dpc_env_flag(const char *name, bool dflt, bool *out, dpc_err *e) {
    static const char *const on[] = {"1", "yes", "on", "true"}, *const off[] = {"0", "no", "off", "false"};
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v)
        return DPC_OK;
    for (int i = 0; i < 4; i++)
        if (strcmp(v, on[i]) == 0 || strcmp(v, off[i]) == 0) {
            *out = strcmp(v, on[i]) == 0;
            return DPC_OK;
        }
    return dpc_errf(e, DPC_EUSAGE, "environment variable %s='%.100s' is not a flag (1, yes, on, true or 0, no, off, false)",
                    name, v);
}

double dpc_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
