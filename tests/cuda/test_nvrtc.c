/* test_nvrtc.c - NVRTC compilation, ptxas validation and the kernel cache.
 * Needs no GPU: NVRTC and ptxas run on any machine with the toolkit. */
#define _GNU_SOURCE
#include "kcache.h"
#include "nvrtc_compile.h"
#include "ptxas.h"

#include "kernels.h"
#include "../check.h"

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


static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static bool have_ptxas;
static char cache_dir[256];

/* ---- compiling the representative kernels ---- */

static void compile_kernel(const char *src, const char *name, const char *entry) {
    const char *archs[] = {"compute_80", "compute_90", "sm_80", "sm_90"};
    for (int a = 0; a < 4; a++) {
        dpc_buf img, log;
        dpc_buf_init(&img);
        dpc_buf_init(&log);
        dpc_err e = {0};
        double t0 = now_ms();
        dpc_status s = dpc_nvrtc_compile(src, name, archs[a], NULL, 0, &img, &log, &e);
        double ms = now_ms() - t0;
        CHECK(s == DPC_OK, "%s for %s: %s", name, archs[a], e.msg);
        if (s == DPC_OK) {
            printf("  %-14s %-10s %6zu bytes  %6.1f ms\n", name, archs[a], img.len, ms);
            CHECK(img.len > 0 && img.data[img.len] == 0, "image not NUL-terminated");
            if (dpc_nvrtc_arch_is_ptx(archs[a])) {
                char want[64];
                snprintf(want, sizeof want, ".target sm_%s", archs[a] + 8);
                CHECK(strstr(img.data, want), "%s: PTX lacks '%s'", name, want);
                snprintf(want, sizeof want, ".entry %s(", entry);
                CHECK(strstr(img.data, want), "%s: PTX lacks '%s'", name, want);
                CHECK(strlen(img.data) == img.len, "PTX length counts the NUL");
                if (have_ptxas) {
                    dpc_buf plog;
                    dpc_buf_init(&plog);
                    s = dpc_ptxas_check(img.data, img.len, archs[a], &plog, &e);
                    CHECK(s == DPC_OK, "ptxas %s %s: %s", name, archs[a], e.msg);
                    dpc_buf_free(&plog);
                }
            } else {
                CHECK(img.len > 4 && memcmp(img.data, "\177ELF", 4) == 0,
                      "%s: CUBIN is not an ELF file", name);
            }
        }
        dpc_buf_free(&img);
        dpc_buf_free(&log);
    }
}

static void test_compile(void) {
    int major, minor;
    dpc_nvrtc_version(&major, &minor);
    printf("NVRTC %d.%d\n", major, minor);
    CHECK(major >= 12, "NVRTC %d.%d is too old", major, minor);
    compile_kernel(KERNEL_GELU_F4, "fused_gelu_f4.cu", "fused_gelu_f4");
    compile_kernel(KERNEL_SOFTMAX, "softmax_rows.cu", "softmax_rows");
    compile_kernel(KERNEL_BF16, "scale_add_bf16.cu", "scale_add_bf16");
}

/* ---- errors ---- */

static void test_errors(void) {
    dpc_buf img, log;
    dpc_buf_init(&img);
    dpc_buf_init(&log);
    dpc_err e = {0};

    /* A compile error: the message names the .dp file and line. */
    dpc_status s = dpc_nvrtc_compile(KERNEL_BAD, "fused_7.cu", "sm_90", NULL, 0, &img, &log, &e);
    CHECK(s == DPC_EDEVICE, "bad kernel gave %d", (int)s);
    printf("bad kernel message:\n%s\n", e.msg);
    CHECK(strstr(e.msg, "models/x.dp(7)"), "message lacks models/x.dp(7)");
    CHECK(strstr(e.msg, "identifier \"y\" is undefined"), "message lacks the error text");
    CHECK(strstr(e.msg, "fused_7.cu") && strstr(e.msg, "sm_90"), "message lacks name/arch");
    CHECK(strstr(e.msg, "NVRTC_ERROR_COMPILATION"), "message lacks the NVRTC result");
    CHECK(log.len > 0 && strstr(log.data, "models/x.dp(7)"), "log lacks the error");
    CHECK(img.len == 0, "failed compile produced an image");

    /* Warnings before the error do not push it out of the message. */
    dpc_buf_free(&log);
    s = dpc_nvrtc_compile(KERNEL_WARN_THEN_BAD, "w.cu", "compute_90", NULL, 0, &img, &log, &e);
    CHECK(s == DPC_EDEVICE, "warn+bad kernel gave %d", (int)s);
    printf("warning-then-error message:\n%s\nfull log:\n%s\n", e.msg, log.data ? log.data : "");
    CHECK(strstr(e.msg, "models/w.dp(9)") && strstr(e.msg, "undefined_name"),
          "message lacks the error on w.dp line 9");
    CHECK(!strstr(e.msg, "unused_variable"), "message carries the warning");

    /* A long run of errors is cut on a line boundary and marked. */
    dpc_buf many;
    dpc_buf_init(&many);
    dpc_buf_puts(&many, "extern \"C\" __global__ void k(float *x) {\n");
    for (int i = 0; i < 60; i++)
        dpc_buf_printf(&many, "#line %d \"models/many.dp\"\n  x[%d] = undefined_%d;\n", i + 1, i, i);
    dpc_buf_puts(&many, "}\n");
    s = dpc_nvrtc_compile(many.data, "many.cu", "sm_90", NULL, 0, &img, NULL, &e);
    CHECK(s == DPC_EDEVICE, "many errors gave %d", (int)s);
    CHECK(strstr(e.msg, "models/many.dp(1)"), "first error missing");
    CHECK(strlen(e.msg) < DPC_ERR_MSG - 1 && strstr(e.msg, "\n..."),
          "long message not cut cleanly: %zu", strlen(e.msg));
    dpc_buf_free(&many);

    /* A bad option: NVRTC's own complaint reaches the message. */
    const char *opt[] = {"--no-such-option"};
    s = dpc_nvrtc_compile(KERNEL_SOFTMAX, "opt.cu", "sm_90", opt, 1, &img, NULL, &e);
    CHECK(s == DPC_EDEVICE, "bad option gave %d", (int)s);
    printf("bad option message:\n%s\n", e.msg);
    CHECK(strstr(e.msg, "NVRTC_ERROR_INVALID_OPTION"), "bad option message: %s", e.msg);

    /* Bad targets are usage errors, before NVRTC runs. */
    const char *bad_arch[] = {"sm90", "sm_", "sm_9", "compute_90x", "", "sm_90;rm"};
    for (int i = 0; i < 6; i++) {
        s = dpc_nvrtc_compile(KERNEL_SOFTMAX, "a.cu", bad_arch[i], NULL, 0, &img, NULL, &e);
        CHECK(s == DPC_EUSAGE, "arch '%s' gave %d", bad_arch[i], (int)s);
    }
    s = dpc_nvrtc_compile(KERNEL_SOFTMAX, "a.cu", NULL, NULL, 0, &img, NULL, &e);
    CHECK(s == DPC_EUSAGE, "NULL arch gave %d", (int)s);
    CHECK(dpc_nvrtc_arch_valid("sm_90a") && dpc_nvrtc_arch_valid("compute_100") &&
              dpc_nvrtc_arch_valid("sm_100f"),
          "valid archs refused");
    dpc_buf_free(&img);
    dpc_buf_free(&log);

    /* ptxas rejects broken PTX with its log in the message. */
    if (have_ptxas) {
        const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry k()\n{\n\tbogus.instruction %r1;\n\tret;\n}\n";
        dpc_buf plog;
        dpc_buf_init(&plog);
        s = dpc_ptxas_check(ptx, strlen(ptx), "sm_90", &plog, &e);
        CHECK(s == DPC_EDEVICE, "bad PTX gave %d", (int)s);
        printf("bad PTX message:\n%s\n", e.msg);
        CHECK(strstr(e.msg, "ptxas -arch=sm_90 rejected"), "ptxas message: %s", e.msg);
        CHECK(plog.len > 0, "no ptxas log");
        dpc_buf_free(&plog);
        s = dpc_ptxas_check(ptx, strlen(ptx), "sm90", NULL, &e);
        CHECK(s == DPC_EUSAGE, "ptxas bad arch gave %d", (int)s);
    }
    /* No ptxas at all: the distinct message a test turns into a skip. */
    setenv("DPC_PTXAS", "/nonexistent/ptxas", 1);
    s = dpc_ptxas_check(".version 8.0\n", 13, "sm_90", NULL, &e);
    CHECK(s != DPC_OK && strncmp(e.msg, DPC_PTXAS_NOT_FOUND, strlen(DPC_PTXAS_NOT_FOUND)) == 0,
          "missing ptxas: %s", e.msg);
    /* A ptxas that hangs runs under the host compiler's rules (hostcc.h):
     * killed, its process group with it, at DPC_CC_TIMEOUT. */
    char hang[] = "/tmp/dpc-ptxas-hang-XXXXXX";
    int fd = mkstemp(hang);
    const char *script = "#!/bin/sh\nsleep 30\n";
    bool made = fd >= 0 && write(fd, script, strlen(script)) == (ssize_t)strlen(script) && fchmod(fd, 0700) == 0;
    if (fd >= 0)
        close(fd);
    CHECK(made, "cannot write %s", hang);
    if (made) {
        setenv("DPC_PTXAS", hang, 1);
        setenv("DPC_CC_TIMEOUT", "1", 1);
        double t0 = dpc_now_s();
        s = dpc_ptxas_check(".version 8.0\n", 13, "sm_90", NULL, &e);
        double took = dpc_now_s() - t0;
        CHECK(s == DPC_EDEVICE && strstr(e.msg, "did not finish within 1 s") && took < 10,
              "hanging ptxas: %d after %.1f s: %s", (int)s, took, e.msg);
        unsetenv("DPC_CC_TIMEOUT");
    }
    unlink(hang);
    unsetenv("DPC_PTXAS");
}

/* ---- the kernel cache ---- */

static int count_files(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.' &&
            (!suffix || (strlen(de->d_name) > strlen(suffix) &&
                         strcmp(de->d_name + strlen(de->d_name) - strlen(suffix), suffix) == 0)))
            n++;
    if (d)
        closedir(d);
    return n;
}

static void corrupt_file(const char *path, long offset, bool truncate_it) {
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
    if (fd < 0)
        return;
    if (truncate_it) {
        CHECK(ftruncate(fd, offset) == 0, "truncate");
    } else {
        unsigned char c;
        CHECK(pread(fd, &c, 1, offset) == 1, "pread");
        c ^= 0x5a;
        CHECK(pwrite(fd, &c, 1, offset) == 1, "pwrite");
    }
    close(fd);
}

static void test_dir_resolution(void) {
    char dir[512];
    const char *saved_home = getenv("HOME");
    char home[512];
    snprintf(home, sizeof home, "%s", saved_home ? saved_home : "");
    setenv("DPC_CACHE_DIR", "/x/dpc-cache/", 1);
    setenv("XDG_CACHE_HOME", "/y/xdg", 1);
    setenv("HOME", "/z/home", 1);
    CHECK(dpc_kcache_dir(dir, sizeof dir) && strcmp(dir, "/x/dpc-cache") == 0, "got %s", dir);
    unsetenv("DPC_CACHE_DIR");
    CHECK(dpc_kcache_dir(dir, sizeof dir) && strcmp(dir, "/y/xdg/dpc") == 0, "got %s", dir);
    unsetenv("XDG_CACHE_HOME");
    CHECK(dpc_kcache_dir(dir, sizeof dir) && strcmp(dir, "/z/home/.cache/dpc") == 0, "got %s",
          dir);
    unsetenv("HOME");
    CHECK(!dpc_kcache_dir(dir, sizeof dir), "no HOME still gave %s", dir);
    char tiny[8];
    setenv("HOME", "/z/home", 1);
    CHECK(!dpc_kcache_dir(tiny, sizeof tiny), "tiny buffer accepted");
    if (saved_home)
        setenv("HOME", home, 1);
    else
        unsetenv("HOME");
    setenv("DPC_CACHE_DIR", cache_dir, 1);
}

static void test_keys(void) {
    char k1[65], k2[65];
    dpc_kcache_key("cubin", "sm_90", "nvrtc 13.0", "-O3", "abc", 3, k1);
    dpc_kcache_key("cubin", "sm_90", "nvrtc 13.0", "-O3", "abc", 3, k2);
    CHECK(strcmp(k1, k2) == 0 && strlen(k1) == 64, "key not deterministic");
    const char *variants[][5] = {
        {"ptx", "sm_90", "nvrtc 13.0", "-O3", "abc"},   {"cubin", "sm_80", "nvrtc 13.0", "-O3", "abc"},
        {"cubin", "sm_90", "nvrtc 12.9", "-O3", "abc"}, {"cubin", "sm_90", "nvrtc 13.0", "-O2", "abc"},
        {"cubin", "sm_90", "nvrtc 13.0", "-O3", "abd"}, {"cubin", "sm_90", "nvrtc 13.0", "-O3a", "bc"},
    };
    for (int i = 0; i < 6; i++) {
        dpc_kcache_key(variants[i][0], variants[i][1], variants[i][2], variants[i][3],
                       variants[i][4], strlen(variants[i][4]), k2);
        CHECK(strcmp(k1, k2) != 0, "variant %d has the same key", i);
    }
}

static void test_cache(void) {
    dpc_err e = {0};
    long removed = -1;
    CHECK(dpc_kcache_clear(&removed, &e) == DPC_OK && removed == 0, "clear of empty cache");

    /* First compile misses, second hits, faster, with the same image. */
    dpc_buf a, b, log;
    dpc_buf_init(&a);
    dpc_buf_init(&b);
    dpc_buf_init(&log);
    bool hit = true;
    double t0 = now_ms();
    dpc_status s = dpc_nvrtc_compile_cached(KERNEL_SOFTMAX, "softmax_rows.cu", "sm_90", NULL, 0,
                                            &a, &log, &hit, &e);
    double t_miss = now_ms() - t0;
    CHECK(s == DPC_OK && !hit, "first compile: %s hit=%d", e.msg, hit);
    t0 = now_ms();
    s = dpc_nvrtc_compile_cached(KERNEL_SOFTMAX, "softmax_rows.cu", "sm_90", NULL, 0, &b, &log,
                                 &hit, &e);
    double t_hit = now_ms() - t0;
    printf("cache: miss %.2f ms, hit %.3f ms\n", t_miss, t_hit);
    CHECK(s == DPC_OK && hit, "second compile: %s hit=%d", e.msg, hit);
    CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0, "cached image differs");
    CHECK(b.data && b.data[b.len] == 0, "cached image not NUL-terminated");
    CHECK(t_hit * 4 < t_miss, "hit (%.3f ms) not faster than miss (%.2f ms)", t_hit, t_miss);
    CHECK(log.len == 0, "log not empty on a hit");
    CHECK(count_files(cache_dir, ".cubin") == 1, "expected one .cubin entry");

    /* A different option, arch or kind is a different entry. */
    const char *fast[] = {"--use_fast_math"};
    s = dpc_nvrtc_compile_cached(KERNEL_SOFTMAX, "softmax_rows.cu", "sm_90", fast, 1, &b, NULL,
                                 &hit, &e);
    CHECK(s == DPC_OK && !hit, "fast-math variant hit the plain entry");
    s = dpc_nvrtc_compile_cached(KERNEL_SOFTMAX, "softmax_rows.cu", "compute_90", NULL, 0, &b, NULL,
                                 &hit, &e);
    CHECK(s == DPC_OK && !hit && strstr(b.data, ".entry softmax_rows"), "PTX entry: %s", e.msg);
    s = dpc_nvrtc_compile_cached(KERNEL_SOFTMAX, "softmax_rows.cu", "compute_90", NULL, 0, &b, NULL,
                                 &hit, &e);
    CHECK(s == DPC_OK && hit && strlen(b.data) == b.len, "cached PTX: %s", e.msg);

    /* The listing: one line per entry with size, kind, arch, age. */
    dpc_buf list;
    dpc_buf_init(&list);
    CHECK(dpc_kcache_list(&list, &e) == DPC_OK, "list: %s", e.msg);
    printf("cache listing:\n%s", list.data ? list.data : "");
    int lines = 0;
    for (size_t i = 0; i < list.len; i++)
        lines += list.data[i] == '\n';
    CHECK(lines == 3, "listing has %d lines", lines);
    CHECK(list.data && strstr(list.data, " cubin sm_90 ") && strstr(list.data, " ptx compute_90 "),
          "listing lacks kind/arch");
    dpc_buf_free(&list);

    /* Corruption: a flipped byte, a truncated file, a damaged footer. Each is
     * a miss that recompiles and replaces the entry. */
    s = dpc_nvrtc_compile_cached(KERNEL_GELU_F4, "gelu.cu", "sm_80", NULL, 0, &a, NULL, &hit, &e);
    CHECK(s == DPC_OK && !hit, "gelu first: %s", e.msg);
    char path[1024];
    struct stat st;
    /* find the sm_80 entry: the only one whose listing line says sm_80 */
    char key[65];
    {
        dpc_buf l;
        dpc_buf_init(&l);
        dpc_kcache_list(&l, &e);
        const char *p = l.data ? strstr(l.data, " cubin sm_80 ") : NULL;
        while (p && p > l.data && p[-1] != '\n')
            p--;
        CHECK(p != NULL, "sm_80 entry not listed");
        if (p)
            memcpy(key, p, 64);
        key[64] = 0;
        dpc_buf_free(&l);
    }
    snprintf(path, sizeof path, "%s/%s.cubin", cache_dir, key);
    CHECK(stat(path, &st) == 0, "no file %s", path);
    long size = (long)st.st_size;
    struct {
        long offset;
        bool truncate_it;
        const char *what;
    } damage[] = {
        {size / 2, false, "flipped payload byte"},
        {10, true, "truncated to 10 bytes"},
        {0, true, "empty file"},
        {size - 3, false, "damaged magic"},
        {size - 60, false, "damaged footer"},
        {size - 176 - 1, true, "payload shortened by one byte"},
    };
    for (int i = 0; i < 6; i++) {
        corrupt_file(path, damage[i].offset, damage[i].truncate_it);
        if (i % 2 == 0) { /* a plain lookup misses and removes the entry */
            CHECK(!dpc_kcache_get(key, "cubin", &b), "%s: still a hit", damage[i].what);
            CHECK(stat(path, &st) != 0, "%s: corrupt entry kept", damage[i].what);
        }
        s = dpc_nvrtc_compile_cached(KERNEL_GELU_F4, "gelu.cu", "sm_80", NULL, 0, &b, NULL, &hit,
                                     &e);
        CHECK(s == DPC_OK && !hit, "%s: not a miss (hit=%d) %s", damage[i].what, hit, e.msg);
        CHECK(b.len == a.len && memcmp(a.data, b.data, a.len) == 0, "%s: wrong image",
              damage[i].what);
        s = dpc_nvrtc_compile_cached(KERNEL_GELU_F4, "gelu.cu", "sm_80", NULL, 0, &b, NULL, &hit,
                                     &e);
        CHECK(s == DPC_OK && hit, "%s: entry not replaced", damage[i].what);
        CHECK(stat(path, &st) == 0 && st.st_size == size, "%s: replaced entry has size %ld",
              damage[i].what, (long)st.st_size);
    }
    /* A corrupt entry shows as such in the listing. */
    corrupt_file(path, size - 3, false);
    dpc_buf_init(&list);
    dpc_kcache_list(&list, &e);
    CHECK(list.data && strstr(list.data, " corrupt\n"), "corrupt entry not flagged:\n%s",
          list.data ? list.data : "");
    dpc_buf_free(&list);

    /* The generic interface (the CPU backend caches .so files). */
    char k[65];
    const char so[] = "\177ELF pretend shared object";
    dpc_kcache_key("cpu-so", "x86_64", "gcc 12.2.0", "-O3 -march=native", "void f(){}", 10, k);
    CHECK(!dpc_kcache_get(k, "cpu-so", &b), "hit before put");
    CHECK(!dpc_kcache_path(k, "cpu-so", path, sizeof path), "path before put");
    CHECK(dpc_kcache_put(k, "cpu-so", "x86_64", so, sizeof so, &e) == DPC_OK, "put: %s", e.msg);
    CHECK(dpc_kcache_get(k, "cpu-so", &b) && b.len == sizeof so && memcmp(b.data, so, b.len) == 0,
          "get after put");
    CHECK(!dpc_kcache_get(k, "cubin", &b), "kind is part of the entry");
    CHECK(dpc_kcache_path(k, "cpu-so", path, sizeof path) && strstr(path, ".cpu-so"), "path: %s",
          path);
    /* The payload sits at offset 0 (so a .so can be dlopen'ed in place). */
    {
        char head[sizeof so];
        int fd = open(path, O_RDONLY);
        CHECK(fd >= 0 && read(fd, head, sizeof head) == (ssize_t)sizeof head &&
                  memcmp(head, so, sizeof so) == 0,
              "payload not at offset 0");
        if (fd >= 0)
            close(fd);
    }
    CHECK(dpc_kcache_put(k, "cpu-so", "x86_64", "", 0, &e) == DPC_OK, "empty put: %s", e.msg);
    CHECK(dpc_kcache_get(k, "cpu-so", &b) && b.len == 0 && b.data && b.data[0] == 0, "empty get");
    CHECK(dpc_kcache_put("not-a-key", "cpu-so", "", "x", 1, &e) == DPC_EUSAGE, "bad key accepted");
    CHECK(dpc_kcache_put(k, "../x", "", "x", 1, &e) == DPC_EUSAGE, "bad kind accepted");
    CHECK(dpc_kcache_put(k, "cubin", "sm 90", "x", 1, &e) == DPC_EUSAGE, "bad arch accepted");
    CHECK(!dpc_kcache_get("../../etc/passwd", "cubin", &b), "bad key looked up");

    /* A directory others can write to is refused. */
    chmod(cache_dir, 0770);
    CHECK(!dpc_kcache_get(k, "cpu-so", &b), "group-writable cache used for get");
    s = dpc_kcache_put(k, "cpu-so", "x86_64", so, sizeof so, &e);
    CHECK(s == DPC_EIO && strstr(e.msg, "writable by group or others"), "put: %d %s", (int)s,
          e.msg);
    s = dpc_nvrtc_compile_cached(KERNEL_SOFTMAX, "softmax_rows.cu", "sm_90", NULL, 0, &b, NULL,
                                 &hit, &e);
    CHECK(s == DPC_OK && !hit, "unusable cache must not fail the compile: %s", e.msg);
    chmod(cache_dir, 0700);

    /* A fresh directory is created, 0700. */
    char sub[512];
    snprintf(sub, sizeof sub, "%s/new/nested", cache_dir);
    setenv("DPC_CACHE_DIR", sub, 1);
    CHECK(dpc_kcache_put(k, "cpu-so", "x86_64", so, sizeof so, &e) == DPC_OK, "nested put: %s",
          e.msg);
    CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700, "nested dir mode %o",
          (unsigned)st.st_mode & 0777);
    removed = 0;
    CHECK(dpc_kcache_clear(&removed, &e) == DPC_OK && removed == 1, "nested clear %ld", removed);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/new", cache_dir);
    rmdir(sub);
    setenv("DPC_CACHE_DIR", cache_dir, 1);

    /* clear removes entries and stale temporaries, nothing else. */
    char other[600];
    snprintf(other, sizeof other, "%s/README", cache_dir);
    FILE *f = fopen(other, "w");
    if (f) {
        fputs("not ours\n", f);
        fclose(f);
    }
    snprintf(other, sizeof other, "%s/%s.cubin.tmp.12345", cache_dir, key);
    f = fopen(other, "w");
    if (f)
        fclose(f);
    int before = count_files(cache_dir, NULL);
    removed = 0;
    CHECK(dpc_kcache_clear(&removed, &e) == DPC_OK, "clear: %s", e.msg);
    printf("clear removed %ld of %d files\n", removed, before);
    CHECK(removed == before - 1, "clear removed %ld of %d", removed, before);
    CHECK(count_files(cache_dir, NULL) == 1, "clear left %d files", count_files(cache_dir, NULL));
    snprintf(other, sizeof other, "%s/README", cache_dir);
    unlink(other);
    dpc_buf_init(&list);
    CHECK(dpc_kcache_list(&list, &e) == DPC_OK && list.len == 0, "list after clear");
    dpc_buf_free(&list);

    dpc_buf_free(&a);
    dpc_buf_free(&b);
    dpc_buf_free(&log);
}

/* Threads hammering one key: every hit must be the whole payload. */
#define T_THREADS 4
#define T_ROUNDS 25
#define T_BYTES (256 * 1024)

static char g_tkey[65];
static unsigned char *g_payload;
static int g_bad_hits;
static pthread_mutex_t g_bad_lock = PTHREAD_MUTEX_INITIALIZER;

static void *hammer(void *arg) {
    (void)arg;
    dpc_buf b;
    dpc_buf_init(&b);
    for (int i = 0; i < T_ROUNDS; i++) {
        dpc_err e;
        dpc_kcache_put(g_tkey, "ptx", "compute_90", g_payload, T_BYTES, &e);
        if (dpc_kcache_get(g_tkey, "ptx", &b) &&
            (b.len != T_BYTES || memcmp(b.data, g_payload, T_BYTES) != 0)) {
            pthread_mutex_lock(&g_bad_lock);
            g_bad_hits++;
            pthread_mutex_unlock(&g_bad_lock);
        }
    }
    dpc_buf_free(&b);
    return NULL;
}

static void test_concurrency(void) {
    g_payload = malloc(T_BYTES);
    for (int i = 0; i < T_BYTES; i++)
        g_payload[i] = (unsigned char)(i * 131 + 7);
    dpc_kcache_key("ptx", "compute_90", "test", "", "concurrency", 11, g_tkey);
    pthread_t t[T_THREADS];
    for (int i = 0; i < T_THREADS; i++)
        pthread_create(&t[i], NULL, hammer, NULL);
    for (int i = 0; i < T_THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(g_bad_hits == 0, "%d torn reads", g_bad_hits);
    dpc_buf b;
    dpc_buf_init(&b);
    CHECK(dpc_kcache_get(g_tkey, "ptx", &b) && b.len == T_BYTES, "final entry");
    dpc_buf_free(&b);
    free(g_payload);
    long removed;
    dpc_err e;
    dpc_kcache_clear(&removed, &e);
}

int main(void) {
    char ptxas[4096];
    have_ptxas = dpc_ptxas_find(ptxas, sizeof ptxas);
    if (have_ptxas)
        printf("ptxas: %s\n", ptxas);
    else
        printf("ptxas not found: PTX is not assembled in this run\n");

    const char *tmp = getenv("TMPDIR");
    snprintf(cache_dir, sizeof cache_dir, "%s/dpc-kcache-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("DPC_CACHE_DIR", cache_dir, 1);

    test_compile();
    test_errors();
    test_dir_resolution();
    test_keys();
    test_cache();
    test_concurrency();

    rmdir(cache_dir);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all NVRTC and cache checks passed\n");
    return 0;
}
