/* test_dp_pool.c - unit tests for the parts of runtime/dp that run no
 * forward: the worker pool on its own (sizes, every task run once on its
 * own thread, nesting runs inline, concurrent callers), device-list
 * parsing and naming, and the threads each CPU replica gets. Apart from
 * test_dp.c, whose fake replica and forwards these do not need. */
#define _GNU_SOURCE
#include "dataparallel.h"
#include "faults.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../check.h"
#include "dp_check.h"

static void test_devices(void) {
    dpc_device d[8];
    int n = -1;
    dpc_err e = {0};
    char name[DPC_DEVICE_NAME_MAX];
    CHECK(dpc_parse_devices("cpu", d, 8, &n, &e) == DPC_OK && n == 1 && d[0].kind == DPC_DEV_CPU);
    CHECK(dpc_parse_devices("cpu,cpu,cpu", d, 8, &n, &e) == DPC_OK && n == 3 && d[2].kind == DPC_DEV_CPU);
    CHECK(dpc_parse_devices("cuda:0,cuda:1", d, 8, &n, &e) == DPC_OK && n == 2 && d[0].kind == DPC_DEV_CUDA &&
          d[0].index == 0 && d[1].index == 1);
    CHECK(dpc_parse_devices("cuda", d, 8, &n, &e) == DPC_OK && n == 1 && d[0].kind == DPC_DEV_CUDA &&
          d[0].index == 0);
    CHECK(dpc_parse_devices(" cpu , cuda:12,cuda:0,cuda:0 ", d, 8, &n, &e) == DPC_OK && n == 4 &&
          d[1].index == 12 && d[3].kind == DPC_DEV_CUDA);
    CHECK(dpc_parse_devices("cuda:1023", d, 8, &n, &e) == DPC_OK && d[0].index == 1023);
    dpc_device_name(&d[0], name, sizeof name);
    CHECK(!strcmp(name, "cuda:1023"));
    dpc_device c = {DPC_DEV_CPU, 0};
    dpc_device_name(&c, name, sizeof name);
    CHECK(!strcmp(name, "cpu"));

    static const struct {
        const char *list, *sub;
    } bad[] = {
        {"", "empty device list"},
        {"  ", "empty device list"},
        {"cpu,", "entry 2 is empty"},
        {",cpu", "entry 1 is empty"},
        {"cpu,,cpu", "device list 'cpu,,cpu': entry 2 is empty"},
        {"cpu, ,cpu", "entry 2 is empty"},
        {"gpu", "entry 1 'gpu' is not a device (expected 'cpu', 'cuda' or 'cuda:<index>')"},
        {"CPU", "'CPU' is not a device"},
        {"cuda0", "'cuda0' is not a device"},
        {"cpu,cuda:x", "entry 2 'cuda:x' has a device index that is not a number"},
        {"cuda:1x", "not a number"},
        {"cuda:", "'cuda:' has no device index"},
        {"cuda:-1", "'cuda:-1' has a negative device index"},
        {"cuda:+1", "not a number"},
        {"cuda: 1", "not a number"},
        {"cuda:1024", "too large"},
        {"cuda:99999999999999999999999", "too large"},
        {"cpu:0", "'cpu:0' takes no index"},
        {"cpu\ncpu", "'cpu\\ncpu' is not a device"},
    };
    for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
        n = -1;
        dpc_status st = dpc_parse_devices(bad[t].list, d, 8, &n, &e);
        CHECK_ERR(st, e, DPC_EUSAGE, bad[t].sub);
        CHECK(n == 0);
    }
    CHECK_ERR(dpc_parse_devices("cpu,cpu,cpu", d, 2, &n, &e), e, DPC_EUSAGE, "more than 2 entries");
    CHECK(dpc_parse_devices(NULL, d, 2, &n, &e) == DPC_EUSAGE);
}

static void test_threads_per_replica(void) {
    CHECK(dpc_dp_threads_per_replica(16, 3) == 5);
    CHECK(dpc_dp_threads_per_replica(16, 4) == 4);
    CHECK(dpc_dp_threads_per_replica(2, 4) == 1);
    CHECK(dpc_dp_threads_per_replica(8, 1) == 8);
    CHECK(dpc_dp_threads_per_replica(8, 0) == 8);
    CHECK(dpc_dp_threads_per_replica(0, 1) == dpc_cpu_count());
    CHECK(dpc_cpu_count() >= 1);
}

/* ---- the pool on its own ------------------------------------------------- */

typedef struct ptest {
    pthread_t thread[64];
    int ran[64];
    atomic_long sum;
    dpc_pool *pool;
    int nested_ok;
} ptest;

static void ptask(void *arg, int t) {
    ptest *P = arg;
    P->thread[t] = pthread_self();
    P->ran[t]++;
    atomic_fetch_add(&P->sum, t + 1);
}

static void inner_task(void *arg, int t) {
    int *v = arg;
    v[t] = t + 100;
}

static void nesting_task(void *arg, int t) {
    ptest *P = arg;
    int v[3] = {0};
    dpc_pool_run(P->pool, 3, inner_task, v); /* runs inline, no deadlock */
    if (v[0] == 100 && v[1] == 101 && v[2] == 102)
        P->ran[t] = 1;
}

typedef struct hammer {
    dpc_pool *pool;
    int iters;
    long bad;
} hammer;

static void *hammer_main(void *arg) {
    hammer *H = arg;
    for (int i = 0; i < H->iters; i++) {
        ptest P;
        memset(&P, 0, sizeof P);
        dpc_pool_run(H->pool, 5, ptask, &P);
        if (atomic_load(&P.sum) != 15)
            H->bad++;
    }
    return NULL;
}

static void test_pool(void) {
    dpc_pool *p = NULL;
    dpc_err e = {0};
    CHECK_ERR(dpc_pool_create(0, &p, &e), e, DPC_EUSAGE, "1 to");
    CHECK(p == NULL);
    CHECK(dpc_pool_create(DPC_POOL_MAX_THREADS + 1, &p, &e) == DPC_EUSAGE);
    dpc_fault_arm_alloc(1);
    CHECK_ERR(dpc_pool_create(4, &p, &e), e, DPC_ENOMEM, "out of memory");
    dpc_fault_arm_alloc(0);

    /* One thread: everything inline, in order. */
    CHECK(dpc_pool_create(1, &p, &e) == DPC_OK && dpc_pool_threads(p) == 1);
    ptest P;
    memset(&P, 0, sizeof P);
    dpc_pool_run(p, 5, ptask, &P);
    for (int t = 0; t < 5; t++)
        CHECK(P.ran[t] == 1 && pthread_equal(P.thread[t], pthread_self()));
    dpc_pool_destroy(p);

    /* Placement: task t on participant t % N, the caller being 0. */
    CHECK(dpc_pool_create(3, &p, &e) == DPC_OK);
    memset(&P, 0, sizeof P);
    dpc_pool_run(p, 7, ptask, &P);
    CHECK(atomic_load(&P.sum) == 28);
    for (int t = 0; t < 7; t++) {
        CHECK(P.ran[t] == 1);
        CHECK(pthread_equal(P.thread[t], P.thread[t % 3]));
    }
    CHECK(pthread_equal(P.thread[0], pthread_self()) && !pthread_equal(P.thread[1], P.thread[2]) &&
          !pthread_equal(P.thread[1], pthread_self()));
    /* One task: no thread hop. Zero tasks: nothing. */
    memset(&P, 0, sizeof P);
    dpc_pool_run(p, 1, ptask, &P);
    CHECK(P.ran[0] == 1 && pthread_equal(P.thread[0], pthread_self()));
    dpc_pool_run(p, 0, ptask, &P);
    dpc_pool_run(p, -3, ptask, &P);
    CHECK(atomic_load(&P.sum) == 1);
    /* Nested runs on the same pool run inline. */
    memset(&P, 0, sizeof P);
    P.pool = p;
    dpc_pool_run(p, 3, nesting_task, &P);
    CHECK(P.ran[0] && P.ran[1] && P.ran[2]);
    /* Many quick runs, and runs after the workers have gone to sleep. */
    long bad = 0;
    for (int i = 0; i < 3000; i++) {
        memset(&P, 0, sizeof P);
        dpc_pool_run(p, 1 + i % 4, ptask, &P);
        int nt = 1 + i % 4;
        if (atomic_load(&P.sum) != nt * (nt + 1) / 2)
            bad++;
        if (i % 500 == 0)
            sleep_us(1000);
    }
    CHECK(bad == 0);
    dpc_pool_destroy(p);

    /* Several threads sharing one pool: runs are serialised. */
    CHECK(dpc_pool_create(4, &p, &e) == DPC_OK);
    hammer H[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        H[i] = (hammer){p, 300, 0};
        pthread_create(&th[i], NULL, hammer_main, &H[i]);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECK(H[i].bad == 0);
    }
    dpc_pool_destroy(p);
    dpc_pool_destroy(NULL);

    /* Create and destroy without ever running. */
    CHECK(dpc_pool_create(8, &p, &e) == DPC_OK);
    dpc_pool_destroy(p);
}

int main(void) {
    test_pool();
    test_devices();
    test_threads_per_replica();
    printf("dp_pool: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
