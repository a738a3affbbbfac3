/* dp_check.h - what the data-parallel tests (test_dp.c, test_dp_pool.c)
 * share: CHECK_ERR (a status and a substring of its message) and
 * sleep_us. */
#ifndef DPC_TEST_DP_CHECK_H
#define DPC_TEST_DP_CHECK_H

#include <string.h>
#include <time.h>

#define CHECK_ERR(st, err, code, sub)                                                                        \
    do {                                                                                                     \
        checks++;                                                                                            \
        if ((st) != (code) || !strstr((err).msg, (sub))) {                                                   \
            failures++;                                                                                      \
            fprintf(stderr, "%s:%d: expected %s containing \"%s\", got %s: \"%s\"\n", __FILE__, __LINE__,   \
                    dpc_status_name(code), (sub), dpc_status_name(st), (err).msg);                           \
        }                                                                                                    \
    } while (0)

static inline void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

#endif
