/* test_dp.c - unit tests for dataparallel.c (with pool.c under it).
 *
 * A fake replica function stands in for a backend: every output row it
 * writes holds (replica index, global row index), the global row being read
 * back from the input row it was given, so a test sees which replica
 * produced which row and that each view pointed at the right rows. It also
 * records, per replica, the thread, device, slice and scalars it saw.
 * Covered: the torch.chunk table of reference/pytorch-dataparallel.md 2.1,
 * batch 0 and 1, several inputs, scalars, tuple and 0-dim outputs,
 * mismatched batches, failing replicas (fault injection on one replica's
 * thread), gather mismatches, true concurrency, one-device passthrough, the
 * preallocated (zero-copy) and async paths. Device-list parsing and the
 * pool itself are test_dp_pool.c. */
#define _GNU_SOURCE
#include "dataparallel.h"
#include "faults.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../check.h"
#include "dp_check.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the fake replica ---------------------------------------------------- */

enum {
    M_TUPLE = 1 << 0,    /* a second output, float64 [rows, 4] = global*4 + c */
    M_SCALAR = 1 << 1,   /* output 0 is a 0-dim float64 = replica + 0.25 */
    M_BARRIER = 1 << 2,  /* every replica waits until all k have started */
    M_DTYPE = 1 << 3,    /* replica 1 returns int32 instead of int64 */
    M_SHAPE = 1 << 4,    /* replica 1 returns [rows, 3] instead of [rows, 2] */
    M_MIXED = 1 << 5,    /* with M_SCALAR: replica 1 returns shape [1] */
    M_MISSING = 1 << 6,  /* replica 1 leaves output 0 NULL */
    M_PREALLOC = 1 << 7, /* outputs arrive preallocated (out_shape) */
};

#define MAXR 16

typedef struct rec {
    int calls, syncs, order, sync_order;
    pthread_t thread;
    int64_t rows, off;
    dpc_device dev;
    int nscalars;
    double sc[4];
    int bad_input; /* a view did not hold the rows it should */
    const void *in0;
    dpc_tensor *out0;
    const void *out0data;
} rec;

typedef struct fake {
    int mode;
    unsigned fail_alloc, fail_user, fail_sync;
    int k; /* replicas expected, for the barrier */
    atomic_int arrived, seq;
    int barrier_ok[MAXR];
    rec r[MAXR];
} fake;

/* Input 0 is int64 [b, 3] with x[r][c] = r*10 + c; input 1 (if any)
 * float32 [b] = r + 0.5; input 2 (if any) uint8 [b, 2, 2] = (r*4+c) & 255. */
static int check_views(const dpc_replica_io *io) {
    int bad = 0;
    for (int j = 0; j < io->ninputs; j++) {
        const dpc_tensor *v = &io->inputs[j];
        if (v->shape[0] != io->rows)
            bad = 1;
        for (int64_t r = 0; r < v->shape[0] && !bad; r++) {
            int64_t g = io->row_offset + r;
            if (j == 0) {
                const int64_t *x = v->data;
                for (int c = 0; c < 3; c++)
                    bad |= x[r * 3 + c] != g * 10 + c;
            } else if (j == 1) {
                bad |= ((const float *)v->data)[r] != (float)g + 0.5f;
            } else {
                const uint8_t *u = v->data;
                for (int c = 0; c < 4; c++)
                    bad |= u[r * 4 + c] != (uint8_t)((g * 4 + c) & 255);
            }
        }
    }
    return bad;
}

static dpc_status make_out(dpc_replica_io *io, int j, dpc_dtype dt, int rank, const int64_t *shape,
                           dpc_tensor **out, dpc_err *e) {
    if (io->outputs[j]) { /* preallocated: must already have the shape */
        *out = io->outputs[j];
        if ((*out)->dtype != dt || (*out)->rank != rank)
            return dpc_errf(e, DPC_EINTERNAL, "preallocated output %d has the wrong type", j);
        for (int d = 0; d < rank; d++)
            if ((*out)->shape[d] != shape[d])
                return dpc_errf(e, DPC_EINTERNAL, "preallocated output %d has the wrong shape", j);
        return DPC_OK;
    }
    dpc_status st = dpc_tensor_new(dt, rank, shape, out, e);
    if (st == DPC_OK)
        io->outputs[j] = *out;
    return st;
}

static dpc_status fake_fn(void *vctx, int i, const dpc_device *dev, dpc_replica_io *io, dpc_err *e) {
    fake *F = vctx;
    rec *R = &F->r[i];
    R->calls++;
    R->order = atomic_fetch_add(&F->seq, 1);
    R->thread = pthread_self();
    R->rows = io->rows;
    R->off = io->row_offset;
    R->dev = *dev;
    R->nscalars = io->nscalars;
    for (int s = 0; s < io->nscalars && s < 4; s++)
        R->sc[s] = io->scalars[s];
    R->in0 = io->ninputs ? io->inputs[0].data : NULL;
    R->bad_input = check_views(io);
    if (F->mode & M_BARRIER) {
        atomic_fetch_add(&F->arrived, 1);
        double deadline = now_s() + 20;
        while (atomic_load(&F->arrived) < F->k && now_s() < deadline)
            sleep_us(100);
        F->barrier_ok[i] = atomic_load(&F->arrived) >= F->k;
    }
    if (F->fail_user >> i & 1)
        return dpc_errf(e, DPC_EUSER, "boom in the model");
    if (F->fail_alloc >> i & 1)
        dpc_fault_arm_alloc(1); /* this thread only: the next allocation fails */
    int64_t rows = io->ninputs ? io->inputs[0].shape[0] : 1;
    const int64_t *x = io->ninputs ? io->inputs[0].data : NULL;
    dpc_tensor *o = NULL;
    dpc_status st;
    if (!(F->mode & M_MISSING && i == 1)) {
        if (F->mode & M_SCALAR) {
            int64_t one = 1;
            bool vec = F->mode & M_MIXED && i == 1;
            st = make_out(io, 0, DPC_F64, vec ? 1 : 0, &one, &o, e);
            if (st)
                return st;
            *(double *)o->data = i + 0.25;
        } else {
            dpc_dtype dt = F->mode & M_DTYPE && i == 1 ? DPC_I32 : DPC_I64;
            int64_t shape[2] = {rows, F->mode & M_SHAPE && i == 1 ? 3 : 2};
            st = make_out(io, 0, dt, 2, shape, &o, e);
            if (st)
                return st;
            if (dt == DPC_I64) {
                int64_t *y = o->data;
                for (int64_t r = 0; r < rows; r++) {
                    y[r * shape[1]] = i;
                    y[r * shape[1] + 1] = x ? x[r * 3] / 10 : -1;
                }
            }
        }
        R->out0 = o;
        R->out0data = o->data;
    }
    if (F->mode & M_TUPLE) {
        int64_t shape[2] = {rows, 4};
        st = make_out(io, 1, DPC_F64, 2, shape, &o, e);
        if (st)
            return st;
        double *y = o->data;
        for (int64_t r = 0; r < rows; r++)
            for (int c = 0; c < 4; c++)
                y[r * 4 + c] = (double)((io->row_offset + r) * 4 + c);
    }
    return DPC_OK;
}

static dpc_status fake_sync(void *vctx, int i, const dpc_device *dev, dpc_replica_io *io, dpc_err *e) {
    fake *F = vctx;
    F->r[i].syncs++;
    F->r[i].sync_order = atomic_fetch_add(&F->seq, 1);
    if (F->fail_sync >> i & 1)
        return dpc_errf(e, DPC_EDEVICE, "an illegal memory access was encountered");
    return DPC_OK;
}

static dpc_status null_fn(void *vctx, int i, const dpc_device *dev, dpc_replica_io *io, dpc_err *e) {
    return DPC_OK;
}

static dpc_status fake_out_shape(void *vctx, int output, int64_t rows, dpc_tensor *spec, dpc_err *e) {
    fake *F = vctx;
    if (rows < 0)
        rows = 1;
    if (output == 0 && F->mode & M_SCALAR) {
        spec->dtype = DPC_F64;
        spec->rank = 0;
    } else {
        spec->dtype = output == 0 ? DPC_I64 : DPC_F64;
        spec->rank = 2;
        spec->shape[0] = rows;
        spec->shape[1] = output == 0 ? 2 : 4;
    }
    return DPC_OK;
}

/* ---- helpers ------------------------------------------------------------- */

static dpc_tensor *make_x(int64_t b) {
    dpc_tensor *t = NULL;
    int64_t shape[2] = {b, 3};
    if (dpc_tensor_new(DPC_I64, 2, shape, &t, NULL))
        abort();
    int64_t *x = t->data;
    for (int64_t r = 0; r < b; r++)
        for (int c = 0; c < 3; c++)
            x[r * 3 + c] = r * 10 + c;
    return t;
}

static dpc_tensor *make_x2(int64_t b) {
    dpc_tensor *t = NULL;
    if (dpc_tensor_new(DPC_F32, 1, &b, &t, NULL))
        abort();
    for (int64_t r = 0; r < b; r++)
        ((float *)t->data)[r] = (float)r + 0.5f;
    return t;
}

static dpc_tensor *make_x3(int64_t b) {
    dpc_tensor *t = NULL;
    int64_t shape[3] = {b, 2, 2};
    if (dpc_tensor_new(DPC_U8, 3, shape, &t, NULL))
        abort();
    for (int64_t r = 0; r < b; r++)
        for (int c = 0; c < 4; c++)
            ((uint8_t *)t->data)[r * 4 + c] = (uint8_t)((r * 4 + c) & 255);
    return t;
}

static dpc_device cpus[MAXR];
static dpc_pool *pool8;

static int expect_replica_of_row(const int64_t *sizes, int k, int64_t row) {
    int64_t acc = 0;
    for (int i = 0; i < k; i++) {
        acc += sizes[i];
        if (row < acc)
            return i;
    }
    return -1;
}

/* Checks output 0 of a forward: [b, 2] with (replica, global row). */
static void check_out0(const dpc_tensor *o, int64_t b, const int64_t *sizes, int k) {
    CHECK(o && o->dtype == DPC_I64 && o->rank == 2 && o->shape[0] == b && o->shape[1] == 2);
    if (!o || o->rank != 2 || o->shape[0] != b)
        return;
    const int64_t *y = o->data;
    int bad = 0;
    for (int64_t r = 0; r < b; r++)
        bad |= y[r * 2] != expect_replica_of_row(sizes, k, r) || y[r * 2 + 1] != r;
    CHECK(!bad);
}

/* ---- tests --------------------------------------------------------------- */

static void test_chunk_table(void) {
    static const struct {
        int64_t b;
        int n, k;
        int64_t sizes[8];
    } T[] = {
        {5, 4, 3, {2, 2, 1}},
        {7, 3, 3, {3, 3, 1}},
        {1, 2, 1, {1}},
        {0, 3, 1, {0}}, /* torch.chunk: 3 empty pieces; dpc: one 0-row replica */
        {8, 3, 3, {3, 3, 2}},
        {10, 4, 4, {3, 3, 3, 1}},
        {9, 4, 3, {3, 3, 3}},
        {3, 4, 3, {1, 1, 1}},
        {2, 4, 2, {1, 1}},
        {6, 4, 3, {2, 2, 2}},
        {4, 4, 4, {1, 1, 1, 1}},
        {36, 7, 6, {6, 6, 6, 6, 6, 6}},
        {17, 8, 6, {3, 3, 3, 3, 3, 2}},
        {100, 8, 8, {13, 13, 13, 13, 13, 13, 13, 9}},
        {2, 3, 2, {1, 1}},
        {1, 1, 1, {1}},
        {1, 4, 1, {1}},
        {0, 1, 1, {0}},
    };
    for (size_t t = 0; t < sizeof T / sizeof T[0]; t++) {
        int64_t sizes[8] = {0}, offs[8] = {0};
        int k = dpc_chunk_sizes(T[t].b, T[t].n, sizes, offs);
        CHECK(k == T[t].k);
        int64_t acc = 0;
        for (int i = 0; i < T[t].k; i++) {
            CHECK(sizes[i] == T[t].sizes[i]);
            CHECK(offs[i] == acc);
            acc += T[t].sizes[i];
        }
        CHECK(dpc_chunk_sizes(T[t].b, T[t].n, NULL, NULL) == T[t].k);

        /* The same split end to end: rows land where the table says. */
        int n = T[t].n;
        fake F = {0};
        dpc_tensor *x = make_x(T[t].b);
        const dpc_tensor *in[1] = {x};
        dpc_tensor *out[1] = {NULL};
        dpc_dp_report rep;
        dpc_err e = {0};
        dpc_status st = dpc_dp_forward(pool8, cpus, n, fake_fn, &F, in, 1, NULL, NULL, 0, 1, out, &rep, &e);
        CHECK(st == DPC_OK);
        if (st)
            fprintf(stderr, "  b=%lld n=%d: %s\n", (long long)T[t].b, n, e.msg);
        check_out0(out[0], T[t].b, T[t].sizes, T[t].k);
        CHECK(rep.nreplicas == T[t].k && rep.ndevices == n && rep.batch == T[t].b && rep.scattered == (n > 1));
        for (int i = 0; i < n; i++) {
            CHECK(F.r[i].calls == (i < T[t].k));
            if (i < T[t].k) {
                CHECK(F.r[i].rows == T[t].sizes[i] && F.r[i].off == offs[i] && !F.r[i].bad_input);
                CHECK(rep.replica[i].rows == T[t].sizes[i] && rep.replica[i].row_offset == offs[i]);
                CHECK(rep.replica[i].status == DPC_OK && rep.replica[i].seconds >= 0);
            }
        }
        CHECK(rep.nwarnings == 0);
        dpc_tensor_free(out[0]);
        dpc_tensor_free(x);
    }
    CHECK(dpc_chunk_sizes(-1, 2, NULL, NULL) == 0);
    CHECK(dpc_chunk_sizes(5, 0, NULL, NULL) == 0);
    /* Huge batches do not overflow. */
    int64_t s[3];
    CHECK(dpc_chunk_sizes(INT64_MAX, 3, s, NULL) == 3 && s[0] == INT64_MAX / 3 + 1 &&
          s[2] == INT64_MAX - 2 * s[0]);
}

static void test_inputs_scalars_tuple(void) {
    /* Three inputs of different dtypes and ranks, two scalars, two outputs. */
    int64_t b = 7;
    dpc_tensor *x = make_x(b), *x2 = make_x2(b), *x3 = make_x3(b);
    const dpc_tensor *in[3] = {x, x2, x3};
    double sc[2] = {1.5, -3.0};
    dpc_tensor *out[2] = {(dpc_tensor *)1, (dpc_tensor *)1};
    fake F = {.mode = M_TUPLE};
    dpc_dp_report rep;
    dpc_err e = {0};
    dpc_status st = dpc_dp_forward(pool8, cpus, 3, fake_fn, &F, in, 3, NULL, sc, 2, 2, out, &rep, &e);
    CHECK(st == DPC_OK);
    int64_t sizes[3] = {3, 3, 1};
    check_out0(out[0], b, sizes, 3);
    CHECK(out[1] && out[1]->dtype == DPC_F64 && out[1]->rank == 2 && out[1]->shape[0] == b &&
          out[1]->shape[1] == 4);
    if (out[1]) {
        int bad = 0;
        for (int64_t i = 0; i < b * 4; i++)
            bad |= ((double *)out[1]->data)[i] != (double)i;
        CHECK(!bad);
    }
    for (int i = 0; i < 3; i++) {
        CHECK(F.r[i].calls == 1 && !F.r[i].bad_input);
        CHECK(F.r[i].nscalars == 2 && F.r[i].sc[0] == 1.5 && F.r[i].sc[1] == -3.0);
    }
    /* Views are zero-copy: replica i's view starts at its rows of x. */
    CHECK(F.r[0].in0 == x->data);
    CHECK(F.r[1].in0 == (char *)x->data + 3 * 3 * sizeof(int64_t));
    CHECK(F.r[2].in0 == (char *)x->data + 6 * 3 * sizeof(int64_t));
    dpc_tensor_free(out[0]);
    dpc_tensor_free(out[1]);

    /* Scalars never create replicas: no tensor input gives one replica. */
    fake G = {0};
    dpc_tensor *o1[1];
    st = dpc_dp_forward(pool8, cpus, 4, fake_fn, &G, NULL, 0, NULL, sc, 2, 1, o1, &rep, &e);
    CHECK(st == DPC_OK && rep.nreplicas == 1 && rep.batch == -1);
    CHECK(G.r[0].calls == 1 && G.r[1].calls == 0 && G.r[0].rows == -1 && G.r[0].nscalars == 2);
    CHECK(o1[0] && o1[0]->rank == 2 && o1[0]->shape[0] == 1);
    dpc_tensor_free(o1[0]);

    /* Batch 1 over 2 devices: one replica, device 1 idle. */
    fake H = {.mode = M_TUPLE};
    dpc_tensor *x1 = make_x(1);
    const dpc_tensor *in1[1] = {x1};
    st = dpc_dp_forward(pool8, cpus, 2, fake_fn, &H, in1, 1, NULL, sc, 1, 2, out, &rep, &e);
    CHECK(st == DPC_OK && rep.nreplicas == 1 && H.r[0].calls == 1 && H.r[1].calls == 0);
    CHECK(out[0] && out[0]->shape[0] == 1 && out[1] && out[1]->shape[0] == 1);
    dpc_tensor_free(out[0]);
    dpc_tensor_free(out[1]);

    /* Batch 0: batch-0 outputs. */
    fake Z = {.mode = M_TUPLE};
    dpc_tensor *x0 = make_x(0), *x20 = make_x2(0);
    const dpc_tensor *in0[2] = {x0, x20};
    st = dpc_dp_forward(pool8, cpus, 3, fake_fn, &Z, in0, 2, NULL, NULL, 0, 2, out, &rep, &e);
    CHECK(st == DPC_OK && rep.nreplicas == 1 && rep.batch == 0 && Z.r[0].rows == 0);
    CHECK(out[0] && out[0]->rank == 2 && out[0]->shape[0] == 0 && out[0]->shape[1] == 2 && out[0]->nbytes == 0);
    CHECK(out[1] && out[1]->shape[0] == 0 && out[1]->shape[1] == 4);
    dpc_tensor_free(out[0]);
    dpc_tensor_free(out[1]);

    dpc_tensor_free(x);
    dpc_tensor_free(x2);
    dpc_tensor_free(x3);
    dpc_tensor_free(x1);
    dpc_tensor_free(x0);
    dpc_tensor_free(x20);
}

static void test_scalar_outputs(void) {
    dpc_tensor *x = make_x(7);
    const dpc_tensor *in[1] = {x};
    dpc_tensor *out[2];
    dpc_dp_report rep;
    dpc_err e = {0};
    fake F = {.mode = M_SCALAR | M_TUPLE};
    dpc_status st = dpc_dp_forward(pool8, cpus, 3, fake_fn, &F, in, 1, NULL, NULL, 0, 2, out, &rep, &e);
    CHECK(st == DPC_OK);
    CHECK(out[0] && out[0]->dtype == DPC_F64 && out[0]->rank == 1 && out[0]->shape[0] == 3);
    if (out[0])
        CHECK(((double *)out[0]->data)[0] == 0.25 && ((double *)out[0]->data)[1] == 1.25 &&
              ((double *)out[0]->data)[2] == 2.25);
    CHECK(rep.nwarnings == 1 && strstr(rep.warnings[0], "output 0") && strstr(rep.warnings[0], "3 values"));
    CHECK(out[1] && out[1]->shape[0] == 7);
    dpc_tensor_free(out[0]);
    dpc_tensor_free(out[1]);

    /* k = 1 on several devices still gathers: shape [1] and the warning. */
    dpc_tensor *x1 = make_x(1);
    const dpc_tensor *in1[1] = {x1};
    fake G = {.mode = M_SCALAR};
    st = dpc_dp_forward(pool8, cpus, 2, fake_fn, &G, in1, 1, NULL, NULL, 0, 1, out, &rep, &e);
    CHECK(st == DPC_OK && out[0] && out[0]->rank == 1 && out[0]->shape[0] == 1 && rep.nwarnings == 1 &&
          strstr(rep.warnings[0], "1 value,"));
    dpc_tensor_free(out[0]);

    /* One device: no gather, the 0-dim output stays 0-dim, no warning. */
    fake H = {.mode = M_SCALAR};
    st = dpc_dp_forward(pool8, cpus, 1, fake_fn, &H, in, 1, NULL, NULL, 0, 1, out, &rep, &e);
    CHECK(st == DPC_OK && out[0] && out[0]->rank == 0 && rep.nwarnings == 0 && !rep.scattered);
    CHECK(out[0] == H.r[0].out0); /* passed through, not copied */
    dpc_tensor_free(out[0]);

    /* A NULL report is fine. */
    fake I = {.mode = M_SCALAR};
    st = dpc_dp_forward(pool8, cpus, 3, fake_fn, &I, in, 1, NULL, NULL, 0, 1, out, NULL, &e);
    CHECK(st == DPC_OK && out[0] && out[0]->shape[0] == 3);
    dpc_tensor_free(out[0]);
    dpc_tensor_free(x);
    dpc_tensor_free(x1);
}

static void test_one_device(void) {
    /* fn runs on the caller, on the caller's tensors... */
    dpc_tensor *x = make_x(5), *x2 = make_x2(5), *x3 = make_x2(3);
    const dpc_tensor *in[2] = {x, x2};
    dpc_tensor *out[1];
    dpc_dp_report rep;
    dpc_err e = {0};
    /* ... once their batches agree: they share the batch name (issue 10 item 9) */
    const dpc_tensor *bad[2] = {x, x3};
    fake B = {0};
    dpc_status st = dpc_dp_forward(pool8, cpus, 1, fake_fn, &B, bad, 2, NULL, NULL, 0, 1, out, &rep, &e);
    CHECK_ERR(st, e, DPC_EUSER, "input 1 has batch 3 but input 0 has batch 5");
    CHECK(B.r[0].calls == 0 && out[0] == NULL);
    dpc_tensor_free(x3);
    fake F = {0};
    st = dpc_dp_forward(pool8, cpus, 1, fake_fn, &F, in, 2, NULL, NULL, 0, 1, out, &rep, &e);
    CHECK(st == DPC_OK && F.r[0].calls == 1 && pthread_equal(F.r[0].thread, pthread_self()));
    CHECK(F.r[0].in0 == x->data && F.r[0].rows == 5 && out[0] == F.r[0].out0);
    CHECK(rep.nreplicas == 1 && !rep.scattered && rep.batch == 5);
    dpc_tensor_free(out[0]);

    /* A 0-dim input is fine with one device... */
    dpc_tensor *s = NULL;
    dpc_tensor_new(DPC_F32, 0, NULL, &s, NULL);
    const dpc_tensor *ins[2] = {x, s};
    fake G = {0};
    st = dpc_dp_forward(NULL, cpus, 1, fake_fn, &G, ins, 2, NULL, NULL, 0, 1, out, NULL, &e);
    CHECK(st == DPC_OK);
    dpc_tensor_free(out[0]);
    /* ... but cannot be split across several. */
    const char *names[2] = {"x", "scale"};
    st = dpc_dp_forward(pool8, cpus, 2, fake_fn, &G, ins, 2, names, NULL, 0, 1, out, NULL, &e);
    CHECK_ERR(st, e, DPC_EUSER, "input 'scale' is 0-dim");
    CHECK(out[0] == NULL);

    /* Errors with one device are not prefixed. */
    fake H = {.fail_user = 1};
    st = dpc_dp_forward(pool8, cpus, 1, fake_fn, &H, in, 1, NULL, NULL, 0, 1, out, NULL, &e);
    CHECK(st == DPC_EUSER && !strcmp(e.msg, "boom in the model") && out[0] == NULL);
    dpc_tensor_free(s);
    dpc_tensor_free(x);
    dpc_tensor_free(x2);
}

static void test_mismatched_batch(void) {
    dpc_tensor *x1 = make_x(5), *x2 = make_x2(3);
    const dpc_tensor *in[2] = {x1, x2};
    const char *names[2] = {"x1", "x2"};
    dpc_tensor *out[1] = {(dpc_tensor *)1};
    dpc_err e = {0};
    fake F = {0};
    dpc_status st = dpc_dp_forward(pool8, cpus, 2, fake_fn, &F, in, 2, names, NULL, 0, 1, out, NULL, &e);
    CHECK_ERR(st, e, DPC_EUSER, "input 'x2' has batch 3 but 'x1' has batch 5");
    CHECK(!strcmp(e.msg, "input 'x2' has batch 3 but 'x1' has batch 5"));
    CHECK(out[0] == NULL && F.r[0].calls == 0 && F.r[1].calls == 0);
    st = dpc_dp_forward(pool8, cpus, 4, fake_fn, &F, in, 2, NULL, NULL, 0, 1, out, NULL, &e);
    CHECK_ERR(st, e, DPC_EUSER, "input 1 has batch 3 but input 0 has batch 5");
    /* Names are quoted safely. */
    const char *odd[2] = {"x1", "a'b\n"};
    st = dpc_dp_forward(pool8, cpus, 2, fake_fn, &F, in, 2, odd, NULL, 0, 1, out, NULL, &e);
    CHECK_ERR(st, e, DPC_EUSER, "input 'a\\'b\\n' has batch 3");
    dpc_tensor_free(x1);
    dpc_tensor_free(x2);
}

static void test_failing_replica(void) {
    dpc_tensor *x = make_x(8);
    const dpc_tensor *in[1] = {x};
    dpc_tensor *out[2] = {(dpc_tensor *)1, (dpc_tensor *)1};
    dpc_dp_report rep;
    dpc_err e = {0};

    /* An allocation fails on replica 2's thread only. */
    fake F = {.mode = M_TUPLE, .fail_alloc = 1u << 2};
    dpc_status st = dpc_dp_forward(pool8, cpus, 4, fake_fn, &F, in, 1, NULL, NULL, 0, 2, out, &rep, &e);
    CHECK_ERR(st, e, DPC_ENOMEM, "replica 2 on device cpu: out of memory");
    CHECK(!strncmp(e.msg, "replica 2 on device cpu: ", 25) && e.code == DPC_ENOMEM);
    CHECK(out[0] == NULL && out[1] == NULL);
    for (int i = 0; i < 4; i++)
        CHECK(F.r[i].calls == 1); /* everybody ran and was joined */
    CHECK(rep.replica[2].status == DPC_ENOMEM && rep.replica[0].status == DPC_OK &&
          rep.replica[3].status == DPC_OK);

    /* Several failures: the lowest-numbered one is reported. */
    fake G = {.fail_alloc = 1u << 3, .fail_user = 1u << 1};
    st = dpc_dp_forward(pool8, cpus, 4, fake_fn, &G, in, 1, NULL, NULL, 0, 1, out, NULL, &e);
    CHECK_ERR(st, e, DPC_EUSER, "replica 1 on device cpu: boom in the model");
    CHECK(out[0] == NULL);

    /* Device names in the prefix (the fake ignores the device kind). */
    dpc_device cu[2] = {{DPC_DEV_CUDA, 0}, {DPC_DEV_CUDA, 1}};
    fake H = {.fail_user = 1u << 1};
    st = dpc_dp_forward(pool8, cu, 2, fake_fn, &H, in, 1, NULL, NULL, 0, 1, out, NULL, &e);
    CHECK(st == DPC_EUSER && !strcmp(e.msg, "replica 1 on device cuda:1: boom in the model"));

    /* The failure is per forward: the next one on the same pool is fine. */
    fake I = {0};
    st = dpc_dp_forward(pool8, cpus, 4, fake_fn, &I, in, 1, NULL, NULL, 0, 1, out, NULL, &e);
    CHECK(st == DPC_OK);
    int64_t sizes[4] = {2, 2, 2, 2};
    check_out0(out[0], 8, sizes, 4);
    dpc_tensor_free(out[0]);

    /* Without a pool, the same discipline. */
    fake J = {.fail_user = (1u << 0) | (1u << 3)};
    st = dpc_dp_forward(NULL, cpus, 4, fake_fn, &J, in, 1, NULL, NULL, 0, 1, out, NULL, &e);
    CHECK_ERR(st, e, DPC_EUSER, "replica 0 on device cpu: boom");
    CHECK(J.r[1].calls == 1 && J.r[3].calls == 1);
    dpc_tensor_free(x);
}

static void test_gather_mismatch(void) {
    dpc_tensor *x = make_x(6);
    const dpc_tensor *in[1] = {x};
    dpc_tensor *out[2];
    dpc_err e = {0};
    static const struct {
        int mode;
        const char *sub;
    } T[] = {
        {M_DTYPE | M_TUPLE, "cannot gather output 0: replica 0 returned int64 [2, 2] but replica 1 on device cpu "
                            "returned int32 [2, 2]"},
        {M_SHAPE, "replica 1 on device cpu returned int64 [2, 3]"},
        {M_SCALAR | M_MIXED, "replica 0 returned float64 [] but replica 1"},
        {M_MISSING | M_TUPLE, "replica 1 on device cpu returned no output 0"},
    };
    for (size_t t = 0; t < sizeof T / sizeof T[0]; t++) {
        fake F = {.mode = T[t].mode};
        out[0] = out[1] = (dpc_tensor *)1;
        dpc_status st = dpc_dp_forward(pool8, cpus, 3, fake_fn, &F, in, 1, NULL, NULL, 0,
                                       T[t].mode & M_TUPLE ? 2 : 1, out, NULL, &e);
        CHECK_ERR(st, e, DPC_EINTERNAL, T[t].sub);
        CHECK(out[0] == NULL && (!(T[t].mode & M_TUPLE) || out[1] == NULL));
    }
    /* One device, no output: an internal error too. */
    out[0] = (dpc_tensor *)1;
    dpc_status st = dpc_dp_forward(pool8, cpus, 1, null_fn, NULL, in, 1, NULL, NULL, 0, 1, out, NULL, &e);
    CHECK_ERR(st, e, DPC_EINTERNAL, "the model returned no output 0");
    CHECK(out[0] == NULL);
    dpc_tensor_free(x);
}

static void test_concurrency(void) {
    /* Every replica waits until all have started: this only completes if
     * they really run at the same time, each on its own thread. */
    for (int n = 2; n <= 8; n++) {
        dpc_tensor *x = make_x(n * 2);
        const dpc_tensor *in[1] = {x};
        dpc_tensor *out[1];
        dpc_err e = {0};
        fake F = {.mode = M_BARRIER, .k = n};
        dpc_status st = dpc_dp_forward(pool8, cpus, n, fake_fn, &F, in, 1, NULL, NULL, 0, 1, out, NULL, &e);
        CHECK(st == DPC_OK);
        for (int i = 0; i < n; i++) {
            CHECK(F.barrier_ok[i]);
            for (int j = 0; j < i; j++)
                CHECK(!pthread_equal(F.r[i].thread, F.r[j].thread));
        }
        CHECK(pthread_equal(F.r[0].thread, pthread_self())); /* replica 0 on the caller */
        dpc_tensor_free(out[0]);
        dpc_tensor_free(x);
    }
    /* Replica i stays on the same thread from one forward to the next. */
    dpc_tensor *x = make_x(4);
    const dpc_tensor *in[1] = {x};
    dpc_tensor *out[1];
    fake A = {0}, B = {0};
    dpc_dp_forward(pool8, cpus, 4, fake_fn, &A, in, 1, NULL, NULL, 0, 1, out, NULL, NULL);
    dpc_tensor_free(out[0]);
    sleep_us(2000); /* let the workers go to sleep */
    dpc_dp_forward(pool8, cpus, 4, fake_fn, &B, in, 1, NULL, NULL, 0, 1, out, NULL, NULL);
    dpc_tensor_free(out[0]);
    for (int i = 0; i < 4; i++)
        CHECK(pthread_equal(A.r[i].thread, B.r[i].thread));

    /* A pool smaller than the replica count still gives the right answer. */
    dpc_pool *p2 = NULL;
    CHECK(dpc_pool_create(2, &p2, NULL) == DPC_OK);
    fake C = {.mode = M_TUPLE};
    dpc_tensor *x7 = make_x(7);
    const dpc_tensor *in7[1] = {x7};
    dpc_tensor *o2[2];
    CHECK(dpc_dp_forward(p2, cpus, 4, fake_fn, &C, in7, 1, NULL, NULL, 0, 2, o2, NULL, NULL) == DPC_OK);
    int64_t sizes[4] = {2, 2, 2, 1};
    check_out0(o2[0], 7, sizes, 4);
    CHECK(pthread_equal(C.r[0].thread, C.r[2].thread) && pthread_equal(C.r[1].thread, C.r[3].thread) &&
          !pthread_equal(C.r[0].thread, C.r[1].thread));
    dpc_tensor_free(o2[0]);
    dpc_tensor_free(o2[1]);
    dpc_pool_destroy(p2);
    dpc_tensor_free(x7);
    dpc_tensor_free(x);
}

/* Forwards from several threads at once, sharing the pool. */
typedef struct fwd_thread {
    int n, iters, bad;
} fwd_thread;

static void *fwd_main(void *arg) {
    fwd_thread *T = arg;
    dpc_tensor *x = make_x(9);
    const dpc_tensor *in[1] = {x};
    int64_t sizes[8];
    int k = dpc_chunk_sizes(9, T->n, sizes, NULL);
    for (int it = 0; it < T->iters; it++) {
        fake F = {.mode = M_TUPLE};
        dpc_tensor *out[2] = {NULL, NULL};
        if (dpc_dp_forward(pool8, cpus, T->n, fake_fn, &F, in, 1, NULL, NULL, 0, 2, out, NULL, NULL))
            T->bad++;
        const int64_t *y = out[0] ? out[0]->data : NULL;
        for (int64_t r = 0; y && r < 9; r++)
            T->bad += y[r * 2] != expect_replica_of_row(sizes, k, r) || y[r * 2 + 1] != r;
        dpc_tensor_free(out[0]);
        dpc_tensor_free(out[1]);
    }
    dpc_tensor_free(x);
    return NULL;
}

static void test_concurrent_forwards(void) {
    fwd_thread T[3] = {{2, 200, 0}, {3, 200, 0}, {4, 200, 0}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, fwd_main, &T[i]);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECK(T[i].bad == 0);
    }
}

static void test_prealloc(void) {
    dpc_tensor *x = make_x(7);
    const dpc_tensor *in[1] = {x};
    dpc_tensor *out[2];
    dpc_dp_report rep;
    dpc_err e = {0};
    dpc_dp_opts opts = {.out_shape = fake_out_shape};
    fake F = {.mode = M_TUPLE | M_PREALLOC};
    dpc_status st =
        dpc_dp_forward_ex(pool8, cpus, 4, fake_fn, &F, in, 1, NULL, 0, 2, out, &opts, &rep, &e);
    CHECK(st == DPC_OK);
    int64_t sizes[4] = {2, 2, 2, 1};
    check_out0(out[0], 7, sizes, 4);
    CHECK(out[1] && out[1]->shape[0] == 7);
    if (out[0]) /* written in place: replica 1's piece is inside out[0] */
        CHECK(F.r[1].out0data == (char *)out[0]->data + 2 * 2 * sizeof(int64_t));
    dpc_tensor_free(out[0]);
    dpc_tensor_free(out[1]);

    fake G = {.mode = M_SCALAR};
    st = dpc_dp_forward_ex(pool8, cpus, 3, fake_fn, &G, in, 1, NULL, 0, 1, out, &opts, &rep, &e);
    CHECK(st == DPC_OK && out[0] && out[0]->rank == 1 && out[0]->shape[0] == 3 && rep.nwarnings == 1);
    if (out[0])
        CHECK(((double *)out[0]->data)[2] == 2.25);
    dpc_tensor_free(out[0]);

    fake H = {0}; /* one device: fn writes straight into the result */
    st = dpc_dp_forward_ex(pool8, cpus, 1, fake_fn, &H, in, 1, NULL, 0, 1, out, &opts, &rep, &e);
    CHECK(st == DPC_OK && out[0] == H.r[0].out0);
    int64_t all[1] = {7};
    check_out0(out[0], 7, all, 1);
    dpc_tensor_free(out[0]);

    /* A failing replica frees the preallocated outputs. */
    fake I = {.mode = M_TUPLE, .fail_user = 1u << 2};
    st = dpc_dp_forward_ex(pool8, cpus, 4, fake_fn, &I, in, 1, NULL, 0, 2, out, &opts, &rep, &e);
    CHECK_ERR(st, e, DPC_EUSER, "replica 2 on device cpu: boom");
    CHECK(out[0] == NULL && out[1] == NULL);
    dpc_tensor_free(x);
}

static void test_async(void) {
    /* Marking the CPU kind async exercises the launch-then-sync path a CUDA
     * backend will use: fn on the caller thread, in order, then sync. */
    dpc_tensor *x = make_x(8);
    const dpc_tensor *in[1] = {x};
    dpc_tensor *out[1];
    dpc_err e = {0};
    dpc_dp_opts opts = {.async_kinds = 1u << DPC_DEV_CPU, .sync = fake_sync};
    fake F = {0};
    dpc_status st = dpc_dp_forward_ex(pool8, cpus, 4, fake_fn, &F, in, 1, NULL, 0, 1, out, &opts, NULL, &e);
    CHECK(st == DPC_OK);
    int64_t sizes[4] = {2, 2, 2, 2};
    check_out0(out[0], 8, sizes, 4);
    for (int i = 0; i < 4; i++) {
        CHECK(F.r[i].calls == 1 && F.r[i].syncs == 1 && pthread_equal(F.r[i].thread, pthread_self()));
        CHECK(F.r[i].order == i && F.r[i].sync_order == 4 + i);
    }
    dpc_tensor_free(out[0]);

    /* A failed launch: the others are still synced, that one is not. */
    fake G = {.fail_user = 1u << 1, .fail_sync = 1u << 3};
    st = dpc_dp_forward_ex(pool8, cpus, 4, fake_fn, &G, in, 1, NULL, 0, 1, out, &opts, NULL, &e);
    CHECK_ERR(st, e, DPC_EUSER, "replica 1 on device cpu: boom");
    CHECK(G.r[0].syncs == 1 && G.r[1].syncs == 0 && G.r[2].syncs == 1 && G.r[3].syncs == 1 && !out[0]);
    fake H = {.fail_sync = 1u << 3};
    st = dpc_dp_forward_ex(pool8, cpus, 4, fake_fn, &H, in, 1, NULL, 0, 1, out, &opts, NULL, &e);
    CHECK(st == DPC_EDEVICE && !strcmp(e.msg, "replica 3 on device cpu: an illegal memory access was encountered"));

    /* Mixed: async CUDA replicas on the caller, CPU ones on the pool. */
    dpc_device mix[3] = {{DPC_DEV_CUDA, 0}, {DPC_DEV_CPU, 0}, {DPC_DEV_CUDA, 1}};
    dpc_dp_opts o2 = {.async_kinds = 1u << DPC_DEV_CUDA, .sync = fake_sync};
    fake M = {0};
    st = dpc_dp_forward_ex(pool8, mix, 3, fake_fn, &M, in, 1, NULL, 0, 1, out, &o2, NULL, &e);
    CHECK(st == DPC_OK && M.r[0].syncs == 1 && M.r[1].syncs == 0 && M.r[2].syncs == 1);
    CHECK(pthread_equal(M.r[2].thread, pthread_self()) && !pthread_equal(M.r[1].thread, pthread_self()));
    dpc_tensor_free(out[0]);

    dpc_dp_opts bad = {.async_kinds = 1u << DPC_DEV_CUDA};
    st = dpc_dp_forward_ex(pool8, mix, 3, fake_fn, &M, in, 1, NULL, 0, 1, out, &bad, NULL, &e);
    CHECK_ERR(st, e, DPC_EUSAGE, "sync");
    dpc_tensor_free(x);
}

static void test_usage_errors(void) {
    dpc_tensor *x = make_x(4);
    const dpc_tensor *in[1] = {x};
    dpc_tensor *out[1];
    dpc_err e = {0};
    fake F = {0};
    CHECK(dpc_dp_forward(pool8, cpus, 0, fake_fn, &F, in, 1, NULL, NULL, 0, 1, out, NULL, &e) == DPC_EUSAGE);
    CHECK(dpc_dp_forward(pool8, cpus, DPC_MAX_DEVICES + 1, fake_fn, &F, in, 1, NULL, NULL, 0, 1, out, NULL,
                         &e) == DPC_EUSAGE);
    CHECK(dpc_dp_forward(pool8, cpus, 2, NULL, &F, in, 1, NULL, NULL, 0, 1, out, NULL, &e) == DPC_EUSAGE);
    const dpc_tensor *nul[1] = {NULL};
    CHECK(dpc_dp_forward(pool8, cpus, 2, fake_fn, &F, nul, 1, NULL, NULL, 0, 1, out, NULL, &e) == DPC_EUSAGE);
    dpc_device badd[2] = {{7, 0}, {DPC_DEV_CPU, 0}};
    CHECK(dpc_dp_forward(pool8, badd, 2, fake_fn, &F, in, 1, NULL, NULL, 0, 1, out, NULL, &e) == DPC_EUSAGE);
    /* A tensor whose data is shorter than its shape says. */
    dpc_tensor lie = *x;
    lie.nbytes = 8;
    const dpc_tensor *inl[1] = {&lie};
    CHECK(dpc_dp_forward(pool8, cpus, 2, fake_fn, &F, inl, 1, NULL, NULL, 0, 1, out, NULL, &e) == DPC_EUSAGE);
    for (int i = 0; i < 4; i++)
        CHECK(F.r[i].calls == 0);
    /* Out of memory in dpc_dp_forward itself (caller's thread). */
    dpc_fault_arm_alloc(1);
    CHECK_ERR(dpc_dp_forward(pool8, cpus, 2, fake_fn, &F, in, 1, NULL, NULL, 0, 1, out, NULL, &e), e,
              DPC_ENOMEM, "out of memory preparing 2 replicas");
    /* ... and in the gather: the caller's allocations are the block, then
     * replica 0's tensor (struct and data), then the result. */
    fake G = {0};
    dpc_fault_arm_alloc(4);
    dpc_status st = dpc_dp_forward(pool8, cpus, 2, fake_fn, &G, in, 1, NULL, NULL, 0, 1, out, NULL, &e);
    dpc_fault_arm_alloc(0);
    CHECK_ERR(st, e, DPC_ENOMEM, "out of memory allocating 64 bytes for a int64 tensor of shape [4, 2]");
    CHECK(out[0] == NULL);
    dpc_tensor_free(x);
}

int main(void) {
    for (int i = 0; i < MAXR; i++)
        cpus[i] = (dpc_device){DPC_DEV_CPU, 0};
    dpc_err e = {0};
    if (dpc_pool_create(8, &pool8, &e)) {
        fprintf(stderr, "cannot create the pool: %s\n", e.msg);
        return 1;
    }
    test_chunk_table();
    test_inputs_scalars_tuple();
    test_scalar_outputs();
    test_one_device();
    test_mismatched_batch();
    test_failing_replica();
    test_gather_mismatch();
    test_concurrency();
    test_concurrent_forwards();
    test_prealloc();
    test_async();
    test_usage_errors();
    dpc_pool_destroy(pool8);
    printf("dp: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
