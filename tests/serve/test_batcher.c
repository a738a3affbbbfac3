/* test_batcher.c - the dynamic batcher of dpc.h without HTTP, against
 * libdpc.so and dpc.h only. References are dpc_program_run on each
 * request alone, made before the batcher owns the program.
 *
 *   stacking   requests of 1, 2, 3 and 5 rows run as one batch of 11 rows
 *              (delay long enough for all to arrive); each gets its rows
 *   scalars    requests with scale 1 and scale 2 interleaved: never in one
 *              batch; each answer equals its own unbatched run
 *   max_batch  10 single-row requests under max_batch 4: no batch over 4
 *              rows; a request of 6 rows runs alone
 *   refused    wrong count, shape, dtype, keyword: DPC_EUSER at submit
 *   index      an out-of-range embedding index in one request of a batch
 *              fails that request only (transformer.dp)
 *   queue      max_queue 4: the 5th waiting request is DPC_EBUSY; close
 *              drains the 4; submit after close is DPC_EBUSY
 *   fault      DPC_FAULT_REPLICA/KERNEL/BATCH=1: the first batch fails
 *              (DPC_EDEVICE, "injected failure"), the next succeeds
 *   stats      counters and histograms add up */
#define _POSIX_C_SOURCE 200809L
#include "dpc.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_NOTE() fprintf(stderr, "  (last error: %s)\n", dpc_last_error())
#include "../check.h"

static const char *DPC, *MODELS, *WORK;

static dpc_program *load(const char *model, const char *devices) {
    char dpa[4096];
    snprintf(dpa, sizeof dpa, "%s/%s.dpa", WORK, model);
    dpc_program *p = NULL;
    if (dpc_program_load(dpa, &p) != DPC_OK || dpc_program_set_devices(p, devices) != DPC_OK) {
        fprintf(stderr, "cannot load %s: %s\n", dpa, dpc_last_error());
        exit(1);
    }
    return p;
}

/* x: rows x 10 of a seeded sequence */
static dpc_tensor *rows10(int64_t rows, unsigned seed) {
    int64_t shape[2] = {rows, 10};
    float *d = malloc(sizeof(float) * (size_t)(rows * 10 + 1));
    unsigned s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < rows * 10; i++) {
        s = s * 1103515245u + 12345u;
        d[i] = (float)((s >> 9) % 2000) / 1000.0f - 1.0f;
    }
    dpc_tensor *t = NULL;
    dpc_tensor_create(DPC_F32, 2, shape, d, &t);
    free(d);
    return t;
}

/* one forward alone: the reference */
static dpc_tensor *ref_run(dpc_program *p, const dpc_tensor *x, double scale, int with_kw) {
    const char *names[1] = {"scale"};
    dpc_tensor *out[1] = {0};
    dpc_status s = dpc_program_run(p, &x, 1, names, &scale, with_kw, out, 1);
    if (s != DPC_OK) {
        fprintf(stderr, "reference run failed: %s\n", dpc_program_error(p));
        exit(1);
    }
    return out[0];
}

static int close_to(const dpc_tensor *a, const dpc_tensor *b) {
    if (!a || !b || dpc_tensor_rank(a) != dpc_tensor_rank(b) || dpc_tensor_numel(a) != dpc_tensor_numel(b))
        return 0;
    for (int i = 0; i < dpc_tensor_rank(a); i++)
        if (dpc_tensor_dim(a, i) != dpc_tensor_dim(b, i))
            return 0;
    const float *x = dpc_tensor_data((dpc_tensor *)a), *y = dpc_tensor_data((dpc_tensor *)b);
    for (int64_t i = 0; i < dpc_tensor_numel(a); i++)
        if (fabsf(x[i] - y[i]) > 1e-5f * (1.0f + fabsf(y[i])))
            return 0;
    return 1;
}

static void test_stacking(void) {
    dpc_program *p = load("kwargs", "cpu,cpu");
    static const int64_t sizes[4] = {1, 2, 3, 5};
    dpc_tensor *x[4], *ref[4];
    for (int i = 0; i < 4; i++) {
        x[i] = rows10(sizes[i], (unsigned)i + 1);
        ref[i] = ref_run(p, x[i], 1.0, 0);
    }
    dpc_batcher_opts o = {.max_batch = 64, .max_delay_us = 2000000};
    dpc_batcher *b = NULL;
    CHECK(dpc_batcher_new(p, &o, &b) == DPC_OK, "new");
    dpc_request *r[4] = {0};
    for (int i = 0; i < 4; i++)
        CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&x[i], 1, NULL, NULL, 0, NULL, NULL, &r[i]) == DPC_OK,
              "submit %d", i);
    dpc_batcher_close(b); /* runs what is queued now: one batch */
    for (int i = 0; i < 4; i++) {
        CHECK(r[i] && dpc_request_wait(r[i]) == DPC_OK, "request %d: %s", i, r[i] ? dpc_request_error(r[i]) : "");
        CHECK(dpc_request_batch_rows(r[i]) == 11, "request %d ran in a batch of %lld rows", i,
              (long long)dpc_request_batch_rows(r[i]));
        CHECK(dpc_request_num_outputs(r[i]) == 1 && dpc_tensor_dim(dpc_request_output(r[i], 0), 0) == sizes[i],
              "request %d output rows", i);
        CHECK(close_to(dpc_request_output(r[i], 0), ref[i]), "request %d differs from its unbatched run", i);
        dpc_request_free(r[i]);
    }
    dpc_batcher_stats st;
    dpc_batcher_get_stats(b, &st);
    CHECK(st.requests == 4 && st.succeeded == 4 && st.failed == 0 && st.batches == 1 && st.batch_rows_sum == 11,
          "stats: %llu requests %llu ok %llu batches %llu rows", (unsigned long long)st.requests,
          (unsigned long long)st.succeeded, (unsigned long long)st.batches, (unsigned long long)st.batch_rows_sum);
    /* one batch: its forward counted once, the time each of its requests carries */
    CHECK(st.batch_seconds_sum > 0 && fabs(st.compute_seconds_sum - 4 * st.batch_seconds_sum) < 1e-6,
          "batch seconds %g, compute seconds of its 4 requests %g", st.batch_seconds_sum, st.compute_seconds_sum);
    /* 11 rows: the bucket le 16 (index 4) */
    CHECK(st.batch_rows[4] == 1 && dpc_batcher_bucket(1, 4) == 16.0, "batch size histogram");
    uint64_t q = 0;
    for (int i = 0; i < DPC_BATCHER_TIME_BUCKETS; i++)
        q += st.queue_seconds[i];
    CHECK(q == 4 && isinf(dpc_batcher_bucket(0, DPC_BATCHER_TIME_BUCKETS - 1)), "queue latency histogram");
    dpc_batcher_free(b);
    for (int i = 0; i < 4; i++)
        dpc_tensor_free(x[i]), dpc_tensor_free(ref[i]);
    dpc_program_free(p);
}

static void test_scalars(void) {
    dpc_program *p = load("kwargs", "cpu");
    enum { N = 6 };
    dpc_tensor *x[N], *ref[N];
    double scale[N];
    for (int i = 0; i < N; i++) {
        scale[i] = i % 2 ? 2.0 : 1.0;
        x[i] = rows10(1 + i % 3, (unsigned)i + 10);
        ref[i] = ref_run(p, x[i], scale[i], 1);
    }
    dpc_batcher_opts o = {.max_batch = 64, .max_delay_us = 2000000};
    dpc_batcher *b = NULL;
    CHECK(dpc_batcher_new(p, &o, &b) == DPC_OK, "new");
    dpc_request *r[N] = {0};
    const char *names[1] = {"scale"};
    int64_t rows_of[2] = {0, 0};
    for (int i = 0; i < N; i++) {
        CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&x[i], 1, names, &scale[i], 1, NULL, NULL, &r[i]) ==
                  DPC_OK,
              "submit %d", i);
        rows_of[i % 2] += dpc_tensor_dim(x[i], 0);
    }
    dpc_batcher_close(b);
    for (int i = 0; i < N; i++) {
        CHECK(r[i] && dpc_request_wait(r[i]) == DPC_OK, "request %d", i);
        CHECK(dpc_request_batch_rows(r[i]) == rows_of[i % 2], "request %d (scale %g) in a batch of %lld rows, want %lld",
              i, scale[i], (long long)dpc_request_batch_rows(r[i]), (long long)rows_of[i % 2]);
        CHECK(close_to(dpc_request_output(r[i], 0), ref[i]), "request %d (scale %g) differs", i, scale[i]);
        dpc_request_free(r[i]);
        dpc_tensor_free(x[i]), dpc_tensor_free(ref[i]);
    }
    dpc_batcher_free(b);
    dpc_program_free(p);
}

static void test_max_batch(void) {
    dpc_program *p = load("simple", "cpu,cpu");
    dpc_tensor *one = rows10(1, 3), *six = rows10(6, 4);
    dpc_batcher_opts o = {.max_batch = 4, .max_delay_us = 50000};
    dpc_batcher *b = NULL;
    CHECK(dpc_batcher_new(p, &o, &b) == DPC_OK, "new");
    dpc_request *r[11] = {0};
    for (int i = 0; i < 10; i++)
        CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&one, 1, NULL, NULL, 0, NULL, NULL, &r[i]) == DPC_OK,
              "submit %d", i);
    CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&six, 1, NULL, NULL, 0, NULL, NULL, &r[10]) == DPC_OK,
          "submit 6 rows");
    for (int i = 0; i < 11; i++) {
        CHECK(dpc_request_wait(r[i]) == DPC_OK, "request %d", i);
        int64_t br = dpc_request_batch_rows(r[i]);
        if (i < 10)
            CHECK(br >= 1 && br <= 4, "request %d in a batch of %lld rows (max 4)", i, (long long)br);
        else
            CHECK(br == 6, "the 6-row request ran in %lld rows, not alone", (long long)br);
        dpc_request_free(r[i]);
    }
    dpc_batcher_stats st;
    dpc_batcher_get_stats(b, &st);
    CHECK(st.batch_rows_sum == 16 && st.batches >= 4, "%llu batches, %llu rows", (unsigned long long)st.batches,
          (unsigned long long)st.batch_rows_sum);
    dpc_batcher_free(b);
    dpc_tensor_free(one), dpc_tensor_free(six);
    dpc_program_free(p);
}

static void test_refused(void) {
    dpc_program *p = load("kwargs", "cpu");
    dpc_batcher *b = NULL;
    CHECK(dpc_batcher_new(p, NULL, &b) == DPC_OK, "new with defaults");
    dpc_request *r = NULL;
    dpc_tensor *x = rows10(2, 5), *bad = NULL, *i64 = NULL;
    int64_t shape[2] = {2, 9};
    dpc_tensor_create(DPC_F32, 2, shape, NULL, &bad);
    shape[1] = 10;
    dpc_tensor_create(DPC_I64, 2, shape, NULL, &i64);
    CHECK(dpc_batcher_submit(b, NULL, 0, NULL, NULL, 0, NULL, NULL, &r) == DPC_EUSER && !r, "no input");
    CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&bad, 1, NULL, NULL, 0, NULL, NULL, &r) == DPC_EUSER &&
              strstr(dpc_last_error(), "must have shape [N, 10], got [2, 9]"),
          "shape");
    CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&i64, 1, NULL, NULL, 0, NULL, NULL, &r) == DPC_EUSER &&
              strstr(dpc_last_error(), "must be float32"),
          "dtype");
    const char *kw[1] = {"scal"};
    double v = 1;
    CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&x, 1, kw, &v, 1, NULL, NULL, &r) == DPC_EUSER &&
              strstr(dpc_last_error(), "unknown keyword 'scal'"),
          "keyword");
    double inf = INFINITY;
    kw[0] = "scale";
    CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&x, 1, kw, &inf, 1, NULL, NULL, &r) == DPC_EUSER,
          "infinite scale");
    dpc_batcher_stats st;
    dpc_batcher_get_stats(b, &st);
    CHECK(st.rejected == 5 && st.requests == 0, "rejected %llu", (unsigned long long)st.rejected);
    dpc_batcher_free(b);
    dpc_tensor_free(x), dpc_tensor_free(bad), dpc_tensor_free(i64);
    dpc_program_free(p);
}

static dpc_tensor *ids(int64_t rows, int64_t bad_at, int64_t value) {
    int64_t shape[2] = {rows, 8};
    dpc_tensor *t = NULL;
    dpc_tensor_create(DPC_I64, 2, shape, NULL, &t);
    int64_t *d = dpc_tensor_data(t);
    for (int64_t i = 0; i < rows * 8; i++)
        d[i] = i % 8;
    if (bad_at >= 0)
        d[bad_at] = value;
    return t;
}

static void test_index(void) {
    dpc_program *p = load("transformer", "cpu");
    dpc_batcher_opts o = {.max_batch = 64, .max_delay_us = 2000000};
    dpc_batcher *b = NULL;
    CHECK(dpc_batcher_new(p, &o, &b) == DPC_OK, "new");
    dpc_tensor *ok_ids = ids(2, -1, 0), *bad_ids = ids(1, 3, 1000), *pos = ids(2, -1, 0), *pos1 = ids(1, -1, 0);
    const dpc_tensor *a[2] = {ok_ids, pos}, *c[2] = {bad_ids, pos1};
    dpc_request *r[3] = {0};
    CHECK(dpc_batcher_submit(b, a, 2, NULL, NULL, 0, NULL, NULL, &r[0]) == DPC_OK, "submit 0");
    CHECK(dpc_batcher_submit(b, c, 2, NULL, NULL, 0, NULL, NULL, &r[1]) == DPC_OK, "submit bad");
    CHECK(dpc_batcher_submit(b, a, 2, NULL, NULL, 0, NULL, NULL, &r[2]) == DPC_OK, "submit 2");
    dpc_batcher_close(b);
    CHECK(dpc_request_wait(r[0]) == DPC_OK && dpc_request_wait(r[2]) == DPC_OK, "batch-mates of a bad request");
    CHECK(dpc_request_num_outputs(r[0]) == 2 && dpc_tensor_dim(dpc_request_output(r[0], 0), 0) == 2, "outputs");
    CHECK(dpc_request_wait(r[1]) == DPC_EUSER && strstr(dpc_request_error(r[1]), "out of range"), "bad: %s",
          dpc_request_error(r[1]));
    for (int i = 0; i < 3; i++)
        dpc_request_free(r[i]);
    dpc_batcher_free(b);
    dpc_tensor_free(ok_ids), dpc_tensor_free(bad_ids), dpc_tensor_free(pos), dpc_tensor_free(pos1);
    dpc_program_free(p);
}

static int done_calls;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static void on_done(dpc_request *r, void *user) {
    (void)user;
    pthread_mutex_lock(&done_lock);
    done_calls++;
    pthread_mutex_unlock(&done_lock);
    dpc_request_free(r);
}

static void test_queue(void) {
    dpc_program *p = load("simple", "cpu");
    dpc_batcher_opts o = {.max_batch = 64, .max_delay_us = 10000000, .max_queue = 4};
    dpc_batcher *b = NULL;
    CHECK(dpc_batcher_new(p, &o, &b) == DPC_OK, "new");
    dpc_tensor *x = rows10(1, 7);
    dpc_request *r = NULL;
    for (int i = 0; i < 4; i++)
        CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&x, 1, NULL, NULL, 0, on_done, NULL, &r) == DPC_OK,
              "submit %d", i);
    CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&x, 1, NULL, NULL, 0, on_done, NULL, &r) == DPC_EBUSY &&
              !r && strstr(dpc_last_error(), "queue is full"),
          "the 5th");
    dpc_batcher_close(b);
    CHECK(done_calls == 4, "%d callbacks after close", done_calls);
    CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&x, 1, NULL, NULL, 0, NULL, NULL, &r) == DPC_EBUSY,
          "after close");
    dpc_batcher_stats st;
    dpc_batcher_get_stats(b, &st);
    CHECK(st.busy == 2 && st.succeeded == 4 && st.batches == 1 && st.queue_depth == 0, "stats");
    dpc_batcher_free(b);
    dpc_tensor_free(x);
    dpc_program_free(p);
}

static void test_fault(void) {
    dpc_program *p = load("simple", "cpu,cpu");
    setenv("DPC_FAULT_REPLICA", "0", 1);
    setenv("DPC_FAULT_KERNEL", "1", 1); /* the forward's GEMM: kernel 0 is the prepare phase's */
    setenv("DPC_FAULT_BATCH", "1", 1);
    dpc_batcher_opts o = {.max_batch = 8, .max_delay_us = 0};
    dpc_batcher *b = NULL;
    CHECK(dpc_batcher_new(p, &o, &b) == DPC_OK, "new (warm-up never faults)");
    unsetenv("DPC_FAULT_REPLICA"), unsetenv("DPC_FAULT_KERNEL"), unsetenv("DPC_FAULT_BATCH");
    dpc_tensor *x = rows10(4, 8);
    dpc_request *r = NULL;
    CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&x, 1, NULL, NULL, 0, NULL, NULL, &r) == DPC_OK, "1");
    CHECK(dpc_request_wait(r) == DPC_EDEVICE && strstr(dpc_request_error(r), "injected failure"), "first: %s",
          dpc_request_error(r));
    CHECK(dpc_request_output(r, 0) == NULL, "no output on failure");
    dpc_request_free(r);
    CHECK(dpc_batcher_submit(b, (const dpc_tensor *const *)&x, 1, NULL, NULL, 0, NULL, NULL, &r) == DPC_OK, "2");
    CHECK(dpc_request_wait(r) == DPC_OK, "second: %s", dpc_request_error(r));
    dpc_request_free(r);
    dpc_batcher_stats st;
    dpc_batcher_get_stats(b, &st);
    CHECK(st.failed == 1 && st.succeeded == 1 && st.batch_failures == 1, "stats");
    dpc_batcher_free(b);
    /* a fault variable alone is an error, never silently nothing */
    setenv("DPC_FAULT_BATCH", "1", 1);
    CHECK(dpc_batcher_new(p, &o, &b) == DPC_EUSAGE && !b, "DPC_FAULT_BATCH alone");
    unsetenv("DPC_FAULT_BATCH");
    dpc_tensor_free(x);
    dpc_program_free(p);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_batcher DPC MODELS WORK\n");
        return 2;
    }
    DPC = argv[1], MODELS = argv[2], WORK = argv[3];
    static const char *models[] = {"simple", "kwargs", "transformer"};
    for (int i = 0; i < 3; i++) {
        sh("'%s' init '%s/%s.dp' -o '%s/%s.st' --seed %d", DPC, MODELS, models[i], WORK, models[i], i + 1);
        sh("'%s' compile '%s/%s.dp' -o '%s/%s.dpa' --weights '%s/%s.st'", DPC, MODELS, models[i], WORK, models[i],
           WORK, models[i]);
    }
    test_stacking();
    test_scalars();
    test_max_batch();
    test_refused();
    test_index();
    test_queue();
    test_fault();
    return finish("test_batcher");
}
