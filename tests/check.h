/* check.h - the checks of dpc's C tests, in one place.
 *
 *   CHECK(cond)                  records a failure with file, line and cond
 *   CHECK(cond, fmt, args...)    ... and a printf-style explanation
 *
 * and goes on, so that one run reports every failing check; finish turns
 * the count into the exit status. A test of the public API defines
 * CHECK_NOTE before including this header to say more on each failure
 * (test drivers of libdpc print dpc_last_error()). SKIP is CTest's
 * SKIP_RETURN_CODE: a test that cannot run on this machine (no GPU, no C++
 * compiler) says so instead of passing. */
#ifndef DPC_TEST_CHECK_H
#define DPC_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define SKIP 77

static int checks, failures;

#ifndef CHECK_NOTE
#define CHECK_NOTE() ((void)0)
#endif

/* CHECK with one argument or with a message: the argument count picks
 * CHECK_BARE_ or CHECK_MSG_ (up to 15 message arguments). */
#define CHECK(...)                                                                                 \
    CHECK_PICK_(__VA_ARGS__, CHECK_MSG_, CHECK_MSG_, CHECK_MSG_, CHECK_MSG_, CHECK_MSG_, CHECK_MSG_, \
                CHECK_MSG_, CHECK_MSG_, CHECK_MSG_, CHECK_MSG_, CHECK_MSG_, CHECK_MSG_, CHECK_MSG_,  \
                CHECK_MSG_, CHECK_MSG_, CHECK_MSG_, CHECK_BARE_, CHECK_NONE_)(__VA_ARGS__)
#define CHECK_PICK_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, m, ...) m

#define CHECK_BARE_(cond)                                                                          \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                        \
            CHECK_NOTE();                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define CHECK_MSG_(cond, ...)                                                                      \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            CHECK_NOTE();                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* 0 when every check passed, else 1 (after saying how many failed). */
static inline int finish(const char *what) {
    if (failures) {
        fprintf(stderr, "%s: %d of %d check(s) failed\n", what, failures, checks);
        return 1;
    }
    printf("%s: all %d checks passed\n", what, checks);
    return 0;
}

/* Runs a set-up command (printf-style) through the shell; the test stops
 * with status 1 when it fails, since nothing after it could be trusted. */
static inline void sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) {
        fprintf(stderr, "setup command failed: %s\n", cmd);
        exit(1);
    }
}

#endif
