/* check.h - the checks of dpc's C tests. CHECK records a failure with its
 * file, line, condition and a printf-style explanation, and goes on, so
 * that one run reports every failing check; finish turns the count into
 * the exit status. SKIP is CTest's SKIP_RETURN_CODE: a test that cannot
 * run on this machine (no GPU, no C++ compiler) says so instead of
 * passing. */
#ifndef DPC_TEST_CHECK_H
#define DPC_TEST_CHECK_H

#include <stdio.h>

#define SKIP 77

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* 0 when every check passed, else 1 (after saying how many failed). */
static inline int finish(const char *what) {
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", what, failures);
        return 1;
    }
    printf("%s: all checks passed\n", what);
    return 0;
}

#endif
