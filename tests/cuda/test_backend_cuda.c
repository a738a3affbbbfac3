/* test_backend_cuda.c - the CUDA backend's host side, without a GPU.
 *
 *     test_backend_cuda nodriver   DPC_CUDA_DRIVER names a missing library:
 *                                  choosing cuda:0 fails clearly, the model
 *                                  stays usable on the CPU
 *     test_backend_cuda flow       DPC_CUDA_DRIVER is fake_cuda_exec.so
 *                                  (FAKE_EXEC_MODE=ok): NVRTC, module load,
 *                                  every function found, weights uploaded,
 *                                  memory planned (every copy inside an
 *                                  allocation), eager first forward, graph
 *                                  captured on the second and replayed, new
 *                                  plan per batch size, two replicas on one
 *                                  device and one per device, injected
 *                                  failures, nothing leaked at the end
 *     test_backend_cuda sticky     FAKE_EXEC_MODE=sticky: an illegal address
 *                                  ends the backend for good
 *     test_backend_cuda nocapture  FAKE_EXEC_MODE=nocapture: no graphs, step
 *                                  by step every time, same results
 *     test_backend_cuda oom        FAKE_EXEC_MODE=oom: the activation arena
 *                                  cannot be allocated, the message says so
 *     test_backend_cuda gpu MODEL.dp...
 *                                  on a real GPU (exit 77 without one):
 *                                  each model at batch 1, 7 and 64 against
 *                                  the CPU backend (1e-5 relative), the
 *                                  graph replays against the first, eager
 *                                  forward, 2 and 4 replicas on cuda:0
 *                                  against one (1e-6), an embedding index
 *                                  out of range caught by the error flag
 *                                  and the next forward clean again
 *     test_backend_cuda nccl       DPC_NCCL_LIBRARY is fake_nccl.so: on two
 *                                  GPUs the weights go from the host to
 *                                  cuda:0 and by one NCCL broadcast group
 *                                  to cuda:1 (no peer copy); cuda:1's copy
 *                                  equals cuda:0's and the host's; no new
 *                                  broadcast for devices that hold them;
 *                                  communicators destroyed, nothing leaked
 *     test_backend_cuda ncclfail   fake_nccl.so failing in each NCCL call
 *                                  in turn: set_devices and runs fail
 *                                  with the call and NCCL's error named,
 *                                  never run on missing weights, work once
 *                                  NCCL does; nothing leaked
 *     test_backend_cuda cudnn      DPC_CUDNN_LIBRARY is fake_cudnn.so: a
 *                                  conv-only model's convs all through
 *                                  cuDNN (two fused), operands, workspace
 *                                  and stream checked by the fake against
 *                                  the fake driver's allocations, graph
 *                                  capture, no im2col launches; DPC_CUDNN=0
 *                                  falls back to the own steps; auto
 *                                  keeps cuDNN where the own steps cannot
 *                                  be timed (no cuBLASLt); a bad
 *                                  DPC_CUDNN refused; nothing leaked
 *     test_backend_cuda gemm       a model with GEMMs on the fake driver:
 *                                  cuBLASLt cannot start without a real
 *                                  driver, and says so (skips where a real
 *                                  libcuda.so.1 exists)
 *
 * Kernels do not run on the fake driver, so values are only checked in the
 * gpu mode (and by tests/gpu/check_gpu.py against PyTorch). */
#define _GNU_SOURCE
#include "backend_cuda.h"
#include "cudnn_lib.h"
#include "cuda_driver.h"
#include "faults.h"
#include "frontend.h" /* m->front, the graph IR */
#include "kernel.h"   /* the kernel graph */
#include "model.h"
#include "nccl_lib.h"
#include "safetensors.h"
#include "../check.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>



/* Mirrors fake_cuda_exec.c. */
struct fake_exec_stats {
    long launches, eager_launches, graph_launches, captures, modules, functions, bad_copies, bad_launches,
        live_allocs, peer_copies;
    char last_missing[256];
};
static struct fake_exec_stats *fake;

/* Every kind of kernel but GEMMs and convolutions (cuBLASLt needs a real
 * driver): embedding, layer_norm, softmax over the last and a middle axis,
 * log_softmax, elementwise chains with a scalar and broadcasting, permuted
 * views materialised, cat, pooling, sum/mean/amax. */
static const char NO_GEMM[] =
    "module NoGemm(seq: int = 8, dim: int = 16) {\n"
    "    emb = Embedding(50, dim)\n"
    "    norm = LayerNorm(dim)\n"
    "    pool = MaxPool2d(2)\n"
    "    avg = AdaptiveAvgPool2d((1, 1))\n"
    "    forward(ids: i64[N, seq], img: [N, 3, 8, 8], s: float = 2.0) {\n"
    "        x = norm(emb(ids)) * s\n"
    "        p = softmax(x, -1) + log_softmax(x, 1)\n"
    "        t = permute(p, 0, 2, 1)\n"
    "        c = cat([t, t * 2.0], 1)\n"
    "        q = pool(relu(img))\n"
    "        return sum(c, 2), mean(x, 1), amax(q, 1), avg(q)\n"
    "    }\n"
    "}\n"
    "model = NoGemm()\n";

static char tmpdir[64];

static char *write_model(const char *text) {
    static char path[128];
    snprintf(path, sizeof path, "%s/m.dp", tmpdir);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

/* Compiles path and binds PyTorch-style initial weights. */
static dpc_model *load(const char *path) {
    dpc_model *m = NULL;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_err e = {0};
    dpc_status s = dpc_model_compile(path, &m, &diags, &e);
    CHECK(s == DPC_OK, "compile %s: %s\n%s", path, e.msg, diags.data ? diags.data : "");
    dpc_buf_free(&diags);
    if (s != DPC_OK)
        return NULL;
    s = dpc_model_bind_init(m, 1, &e);
    CHECK(s == DPC_OK, "initial weights: %s", e.msg);
    if (s != DPC_OK) {
        dpc_model_free(m);
        return NULL;
    }
    return m;
}

/* Inputs for NoGemm at batch n: ids in range (or one out of range). */
typedef struct inputs {
    dpc_tensor *t[2];
} inputs;

static void make_inputs(inputs *in, int64_t n, bool bad_id) {
    dpc_err e;
    int64_t s0[2] = {n, 8}, s1[4] = {n, 3, 8, 8};
    dpc_tensor_new(DPC_I64, 2, s0, &in->t[0], &e);
    dpc_tensor_new(DPC_F32, 4, s1, &in->t[1], &e);
    int64_t *ids = in->t[0]->data;
    for (int64_t i = 0; i < n * 8; i++)
        ids[i] = (i * 7) % 50;
    if (bad_id && n > 0)
        ids[3] = 50;
    float *x = in->t[1]->data;
    for (int64_t i = 0; i < n * 192; i++)
        x[i] = (float)((i % 13) - 6) * 0.25f;
}

static void free_inputs(inputs *in) {
    dpc_tensor_free(in->t[0]);
    dpc_tensor_free(in->t[1]);
}

static dpc_status run(dpc_model *m, int64_t n, bool bad_id, dpc_err *e) {
    inputs in;
    make_inputs(&in, n, bad_id);
    double scalars[1] = {2.0};
    dpc_tensor *out[4] = {0};
    dpc_status s = dpc_model_run(m, (const dpc_tensor *const *)in.t, 2, scalars, out, e);
    if (s == DPC_OK) {
        CHECK(out[0] && out[0]->rank == 2 && out[0]->shape[0] == n && out[0]->shape[1] == 32, "output 0 shape");
        CHECK(out[1] && out[1]->rank == 2 && out[1]->shape[0] == n && out[1]->shape[1] == 16, "output 1 shape");
        CHECK(out[2] && out[2]->rank == 3 && out[2]->shape[0] == n, "output 2 shape");
        CHECK(out[3] && out[3]->rank == 4 && out[3]->shape[0] == n && out[3]->shape[1] == 3, "output 3 shape");
    }
    for (int i = 0; i < 4; i++)
        dpc_tensor_free(out[i]);
    free_inputs(&in);
    return s;
}

static bool set_devices(dpc_model *m, const char *list, dpc_err *e) {
    dpc_device devs[8];
    int n = 0;
    dpc_status s = dpc_parse_devices(list, devs, 8, &n, e);
    if (s == DPC_OK)
        s = dpc_model_set_devices(m, devs, n, e);
    return s == DPC_OK;
}

static int launches_per_forward(const dpc_model *m) {
    char *src = NULL;
    dpc_cu_plan plan;
    dpc_err e;
    if (dpc_unit_cuda_program(m->unit, KP_F32, &src, &plan, &e) != DPC_OK)
        return -1;
    int n = 0;
    for (int i = 0; i < plan.nsteps; i++)
        n += plan.steps[i].kind == DPC_CU_LAUNCH;
    free(src);
    dpc_cu_plan_free(&plan);
    return n;
}

static bool open_fake(void) {
    const char *lib = getenv("DPC_CUDA_DRIVER");
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (!h)
        h = lib ? dlopen(lib, RTLD_NOW) : NULL;
    fake = h ? dlsym(h, "fake_exec_stats") : NULL;
    CHECK(fake != NULL, "DPC_CUDA_DRIVER=%s is not fake_cuda_exec", lib ? lib : "(unset)");
    return fake != NULL;
}

static dpc_cuda_weights_info weights_info(const dpc_model *m) {
    dpc_cuda_weights_info w = {0};
    CHECK(dpc_cuda_weights(m->be, &w), "not the CUDA backend");
    return w;
}

/* ---- modes ---- */

/* load() binds dpc_model_bind_init's weights: they must be those `dpc
 * init` writes, bound from the file (m has them, path is its model). */
static void check_bind_init(const dpc_model *m, const char *path) {
    dpc_model *f = NULL;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_err e = {0};
    char w[128];
    snprintf(w, sizeof w, "%s/w.safetensors", tmpdir);
    dpc_safetensors *st = NULL;
    dpc_status s = dpc_model_compile(path, &f, &diags, &e);
    if (s == DPC_OK)
        s = dpc_model_init_weights(f, 1, w, &e);
    if (s == DPC_OK)
        s = dpc_st_read(w, &st, &e);
    if (s == DPC_OK)
        s = dpc_model_bind(f, st, NULL, &e);
    CHECK(s == DPC_OK, "weights through a file: %s", e.msg);
    const vec *ps = &m->front->m.params;
    for (int i = 0; s == DPC_OK && i < ps->len; i++) {
        const param_entry *p = ps->items[i];
        int64_t n = 1;
        for (int d = 0; d < p->rank; d++)
            n *= p->shape[d];
        CHECK(!m->params[i] == !f->params[i] &&
                  (!m->params[i] || memcmp(m->params[i], f->params[i], (size_t)n * 4) == 0),
              "parameter %s differs between dpc_model_bind_init and the file", p->key);
    }
    dpc_st_free(st);
    unlink(w);
    dpc_buf_free(&diags);
    dpc_model_free(f);
}

static int main_nodriver(void) {
    const char *path = write_model(NO_GEMM);
    dpc_model *m = load(path);
    if (!m)
        return finish("nodriver");
    check_bind_init(m, path);
    dpc_err e = {0};
    CHECK(!set_devices(m, "cuda:0", &e), "cuda:0 accepted without a driver");
    printf("cuda:0 without a driver: %s\n", e.msg);
    CHECK(e.code == DPC_EDEVICE && strstr(e.msg, "no CUDA driver"), "message: %s", e.msg);
    CHECK(!set_devices(m, "cpu,cuda:0", &e) && e.code == DPC_EUSER && strstr(e.msg, "mixes"), "mixed: %s", e.msg);
    /* the model still runs on the CPU */
    CHECK(run(m, 3, false, &e) == DPC_OK, "CPU run after a failed switch: %s", e.msg);
    CHECK(strcmp(m->be->name, "cpu") == 0, "backend %s", m->be->name);
    dpc_model_free(m);
    return finish("nodriver");
}

static int main_flow(void) {
    if (!open_fake())
        return finish("flow");
    dpc_model *m = load(write_model(NO_GEMM));
    if (!m)
        return finish("flow");
    int per = launches_per_forward(m);
    CHECK(per > 10, "launches per forward %d", per);
    dpc_err e = {0};
    long live0 = fake->live_allocs;
    CHECK(set_devices(m, "cuda:0", &e), "cuda:0: %s", e.msg);
    CHECK(strcmp(m->be->name, "cuda") == 0, "backend %s", m->be->name);
    CHECK(fake->modules == 1, "modules %ld", fake->modules);
    CHECK(fake->functions == per, "functions %ld of %d (missing: %s)", fake->functions, per, fake->last_missing);
    dpc_cuda_stats st;
    /* first forward: step by step */
    CHECK(run(m, 4, false, &e) == DPC_OK, "run 1: %s", e.msg);
    CHECK(dpc_cuda_replica_stats(m->be, m->rep[0], &st), "stats");
    size_t arena_f32 = st.arena_bytes; /* at batch 4 */
    CHECK(st.forwards == 1 && st.graph_launches == 0 && st.kernel_launches == per, "run 1: %ld %ld %ld", st.forwards,
          st.graph_launches, st.kernel_launches);
    CHECK(fake->eager_launches == per && fake->launches == per, "eager %ld, run %ld", fake->eager_launches,
          fake->launches);
    /* second: captured and replayed; third: replayed */
    CHECK(run(m, 4, false, &e) == DPC_OK, "run 2: %s", e.msg);
    CHECK(run(m, 4, false, &e) == DPC_OK, "run 3: %s", e.msg);
    dpc_cuda_replica_stats(m->be, m->rep[0], &st);
    CHECK(st.graphs_built == 1 && st.graph_launches == 2 && st.forwards == 3, "graphs %ld, replays %ld",
          st.graphs_built, st.graph_launches);
    CHECK(fake->captures == 1 && fake->graph_launches == 2 && fake->eager_launches == per &&
              fake->launches == 3 * per,
          "captures %ld, graph launches %ld, eager %ld, run %ld", fake->captures, fake->graph_launches,
          fake->eager_launches, fake->launches);
    /* a new batch size: a new plan, eager again, then a new graph */
    CHECK(run(m, 64, false, &e) == DPC_OK, "batch 64: %s", e.msg);
    CHECK(run(m, 64, false, &e) == DPC_OK, "batch 64 again: %s", e.msg);
    CHECK(run(m, 1, false, &e) == DPC_OK, "batch 1: %s", e.msg);
    CHECK(run(m, 0, false, &e) == DPC_OK, "batch 0: %s", e.msg);
    dpc_cuda_replica_stats(m->be, m->rep[0], &st);
    CHECK(st.graphs_built == 2 && st.arena_bytes > 0, "graphs %ld arena %zu", st.graphs_built, st.arena_bytes);
    /* injected failures: a kernel index (as the CPU backend), then the 3rd launch */
    m->fail_replica = 0;
    m->fail_kernel = 2;
    CHECK(run(m, 4, false, &e) == DPC_EDEVICE && strstr(e.msg, "injected failure in kernel k2_"), "fail_at: %s",
          e.msg);
    m->fail_replica = m->fail_kernel = -1;
    CHECK(run(m, 5, false, &e) == DPC_OK, "after fail_at: %s", e.msg); /* new size: eager */
    dpc_fault_arm_kernel(3);
    dpc_status s = run(m, 6, false, &e);
    dpc_fault_arm_kernel(0);
    printf("injected launch fault: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "injected fault") && strstr(e.msg, "kernel k"), "launch fault: %s", e.msg);
    CHECK(run(m, 6, false, &e) == DPC_OK, "after a launch fault: %s", e.msg);
    /* two replicas on one device, then one per device */
    long peer0 = fake->peer_copies;
    CHECK(set_devices(m, "cuda:0,cuda:0", &e), "cuda:0,cuda:0: %s", e.msg);
    CHECK(run(m, 7, false, &e) == DPC_OK, "two replicas: %s", e.msg);
    CHECK(run(m, 7, false, &e) == DPC_OK, "two replicas again: %s", e.msg);
    CHECK(fake->modules == 1, "a second module for the same device: %ld", fake->modules);
    CHECK(set_devices(m, "cuda:0,cuda:1,cuda:0,cuda:1", &e), "4 replicas on 2 devices: %s", e.msg);
    CHECK(fake->modules == 2 && fake->peer_copies == peer0 + 1, "modules %ld, peer copies %ld", fake->modules,
          fake->peer_copies - peer0);
    /* DPC_NCCL_LIBRARY names a missing file: the peer copy, and why */
    dpc_cuda_weights_info w = weights_info(m);
    printf("weights: %s\n", w.how);
    CHECK(strncmp(w.how, "peer copy (NCCL not found (", 27) == 0 && w.peer_copies == 1 && w.nccl_groups == 0 &&
              w.gpus == 2,
          "info: '%s', %d peer copies, %d groups, %d GPUs", w.how, w.peer_copies, w.nccl_groups, w.gpus);
    CHECK(run(m, 9, false, &e) == DPC_OK, "4 replicas: %s", e.msg);
    CHECK(run(m, 2, false, &e) == DPC_OK, "4 devices, batch 2: %s", e.msg);
    CHECK(!set_devices(m, "cuda:5", &e) && strstr(e.msg, "no CUDA device 5"), "cuda:5: %s", e.msg);
    /* 16-bit storage: a new backend whose copies and arena hold 2-byte
     * floats (the i64 ids stay 8 bytes); every copy still within its
     * allocation; refused on the CPU */
    dpc_model_set_precision(m, KP_BF16);
    CHECK(set_devices(m, "cuda:0", &e), "bf16 on cuda:0: %s", e.msg);
    CHECK(run(m, 4, false, &e) == DPC_OK && run(m, 4, false, &e) == DPC_OK, "bf16 runs: %s", e.msg);
    CHECK(dpc_cuda_replica_stats(m->be, m->rep[0], &st), "bf16 stats");
    CHECK(st.arena_bytes < arena_f32 && st.arena_bytes * 3 > arena_f32, "bf16 arena %zu bytes, f32 %zu",
          st.arena_bytes, arena_f32);
    CHECK(!set_devices(m, "cpu", &e) && strstr(e.msg, "bf16 storage needs CUDA devices"), "bf16 on cpu: %s", e.msg);
    dpc_model_set_precision(m, KP_F32);
    CHECK(set_devices(m, "cpu", &e), "back to cpu: %s", e.msg);
    CHECK(run(m, 3, false, &e) == DPC_OK, "cpu: %s", e.msg);
    CHECK(fake->bad_copies == 0 && fake->bad_launches == 0, "bad copies %ld, bad launches %ld", fake->bad_copies,
          fake->bad_launches);
    dpc_model_free(m);
    CHECK(fake->live_allocs == live0, "%ld allocations leaked", fake->live_allocs - live0);
    CHECK(fake->modules == 0, "%ld modules leaked", fake->modules);
    return finish("flow");
}

static int main_sticky(void) {
    if (!open_fake())
        return finish("sticky");
    dpc_model *m = load(write_model(NO_GEMM));
    if (!m)
        return finish("sticky");
    dpc_err e = {0};
    CHECK(set_devices(m, "cuda:0", &e), "cuda:0: %s", e.msg);
    dpc_status s = run(m, 4, false, &e);
    printf("sticky: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "CUDA_ERROR_ILLEGAL_ADDRESS") && strstr(e.msg, "sticky"), "first: %s",
          e.msg);
    s = run(m, 4, false, &e);
    printf("after: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "stopped after a sticky error"), "second: %s", e.msg);
    CHECK(!set_devices(m, "cuda:0,cuda:0", &e) && strstr(e.msg, "stopped after a sticky error"), "new replicas: %s",
          e.msg);
    dpc_model_free(m);
    return finish("sticky");
}

static int main_nocapture(void) {
    if (!open_fake())
        return finish("nocapture");
    dpc_model *m = load(write_model(NO_GEMM));
    if (!m)
        return finish("nocapture");
    dpc_err e = {0};
    CHECK(set_devices(m, "cuda:0", &e), "cuda:0: %s", e.msg);
    for (int i = 0; i < 3; i++)
        CHECK(run(m, 4, false, &e) == DPC_OK, "run %d: %s", i, e.msg);
    dpc_cuda_stats st;
    dpc_cuda_replica_stats(m->be, m->rep[0], &st);
    int per = launches_per_forward(m);
    CHECK(st.graphs_built == 0 && st.graph_launches == 0 && st.kernel_launches == 3 * per, "graphs %ld, launches %ld",
          st.graphs_built, st.kernel_launches);
    dpc_model_free(m);
    return finish("nocapture");
}

static int main_oom(void) {
    if (!open_fake())
        return finish("oom");
    dpc_model *m = load(write_model(NO_GEMM));
    if (!m)
        return finish("oom");
    dpc_err e = {0};
    CHECK(set_devices(m, "cuda:0", &e), "cuda:0: %s", e.msg);
    CHECK(run(m, 2, false, &e) == DPC_OK, "small batch: %s", e.msg);
    dpc_status s = run(m, 4096, false, &e);
    printf("oom: %s\n", e.msg);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, "CUDA_ERROR_OUT_OF_MEMORY") && strstr(e.msg, "batch 4096"), "oom: %s",
          e.msg);
    CHECK(run(m, 2, false, &e) == DPC_OK, "small batch after: %s", e.msg);
    dpc_model_free(m);
    return finish("oom");
}

/* ---- weights across GPUs by NCCL (fake_nccl.c) ---- */

/* Mirrors fake_nccl.c. */
struct fake_nccl_stats {
    long comms_live, inits, groups, broadcasts, aborts, bad_calls;
    char last_bad[256];
    int last_nranks;
    int last_devs[8];
    uintptr_t last_bufs[8];
    size_t last_bytes;
};

static struct fake_nccl_stats *open_fake_nccl(void) {
    const char *lib = getenv("DPC_NCCL_LIBRARY");
    void *h = lib ? dlopen(lib, RTLD_NOW) : NULL; /* the library dpc loads: same handle */
    struct fake_nccl_stats *st = h ? dlsym(h, "fake_nccl_stats") : NULL;
    CHECK(st != NULL, "DPC_NCCL_LIBRARY=%s is not fake_nccl", lib ? lib : "(unset)");
    return st;
}

/* The last broadcast: every rank's buffer equals the root's, and the root's
 * starts with the model's first parameter as the host holds it (f32). */
static void check_broadcast_copy(const dpc_model *m, const struct fake_nccl_stats *nc) {
    CHECK(nc->last_nranks == 2 && nc->last_devs[0] == 0 && nc->last_devs[1] == 1, "ranks %d: cuda:%d -> cuda:%d",
          nc->last_nranks, nc->last_devs[0], nc->last_devs[1]);
    const char *root = (const char *)nc->last_bufs[0];
    for (int i = 1; i < nc->last_nranks && i < 8; i++)
        CHECK(memcmp(root, (const char *)nc->last_bufs[i], nc->last_bytes) == 0, "rank %d differs from the root", i);
    for (int i = 0; i < dpc_unit_kgraph(m->unit)->bufs.len; i++) {
        const kbuf *b = dpc_unit_kgraph(m->unit)->bufs.items[i];
        if (b->kind != BUF_PARAM || b->elems <= 0)
            continue;
        CHECK((size_t)b->elems * 4 <= nc->last_bytes && memcmp(root, m->params[b->index], (size_t)b->elems * 4) == 0,
              "the broadcast weights are not the host's (%s)", b->what ? b->what : "?");
        break;
    }
}

static int main_nccl(void) {
    struct fake_nccl_stats *nc = open_fake_nccl();
    if (!open_fake() || !nc)
        return finish("nccl");
    dpc_model *m = load(write_model(NO_GEMM));
    if (!m)
        return finish("nccl");
    dpc_err e = {0};
    long live0 = fake->live_allocs, peer0 = fake->peer_copies;
    CHECK(set_devices(m, "cuda:0", &e), "cuda:0: %s", e.msg);
    CHECK(nc->inits == 0 && weights_info(m).how[0] == 0, "one GPU: %ld inits, how '%s'", nc->inits,
          weights_info(m).how);
    CHECK(run(m, 3, false, &e) == DPC_OK, "cuda:0: %s", e.msg);
    CHECK(set_devices(m, "cuda:0,cuda:1,cuda:0,cuda:1", &e), "4 replicas on 2 GPUs: %s", e.msg);
    dpc_cuda_weights_info w = weights_info(m);
    printf("weights: %s\n", w.how);
    CHECK(nc->inits == 1 && nc->groups == 1 && nc->broadcasts == 2, "inits %ld, groups %ld, broadcasts %ld",
          nc->inits, nc->groups, nc->broadcasts);
    CHECK(fake->peer_copies == peer0, "%ld peer copies", fake->peer_copies - peer0);
    CHECK(strcmp(w.how, "NCCL broadcast to 2 GPUs") == 0 && w.gpus == 2 && w.nccl_groups == 1 && w.peer_copies == 0,
          "info: '%s', %d GPUs, %d groups, %d peer copies", w.how, w.gpus, w.nccl_groups, w.peer_copies);
    CHECK(nc->comms_live == 0 && nc->aborts == 0 && nc->bad_calls == 0, "comms %ld, aborts %ld, bad %ld: %s",
          nc->comms_live, nc->aborts, nc->bad_calls, nc->last_bad);
    check_broadcast_copy(m, nc);
    /* kernels do not run on the fake driver: values are checked on GPUs */
    CHECK(run(m, 9, false, &e) == DPC_OK, "4 replicas: %s", e.msg);
    CHECK(run(m, 9, false, &e) == DPC_OK, "4 replicas again: %s", e.msg);
    CHECK(run(m, 2, false, &e) == DPC_OK, "batch 2: %s", e.msg);
    /* both GPUs hold the weights: no second broadcast */
    CHECK(set_devices(m, "cuda:1,cuda:0", &e), "cuda:1,cuda:0: %s", e.msg);
    CHECK(run(m, 4, false, &e) == DPC_OK, "cuda:1,cuda:0: %s", e.msg);
    CHECK(nc->groups == 1 && nc->inits == 1, "groups %ld", nc->groups);
    CHECK(fake->bad_copies == 0 && fake->bad_launches == 0, "bad copies %ld, bad launches %ld", fake->bad_copies,
          fake->bad_launches);
    dpc_model_free(m);
    CHECK(fake->live_allocs == live0, "%ld allocations leaked", fake->live_allocs - live0);
    CHECK(nc->comms_live == 0, "%ld communicators leaked", nc->comms_live);
    return finish("nccl");
}

/* One NCCL call fails: named, no replica runs without weights, the next
 * run retries the broadcast once NCCL works again, nothing leaks. */
static void nccl_fail_once(struct fake_nccl_stats *nc, const char *fn, const char *expect) {
    dpc_model *m = load(write_model(NO_GEMM));
    if (!m)
        return;
    dpc_err e = {0};
    long live0 = fake->live_allocs, groups0 = nc->groups, peer0 = fake->peer_copies;
    setenv("FAKE_NCCL_FAIL", fn, 1);
    bool ok = set_devices(m, "cuda:0,cuda:1", &e);
    printf("%s fails: %s\n", fn, e.msg);
    CHECK(!ok && e.code == DPC_EDEVICE && strstr(e.msg, expect) && strstr(e.msg, "broadcasting the weights"),
          "%s: %s", fn, e.msg);
    dpc_status s = run(m, 4, false, &e);
    CHECK(s == DPC_EDEVICE && strstr(e.msg, expect), "%s: a run without weights on cuda:1: %s", fn, e.msg);
    CHECK(nc->comms_live == 0, "%s: %ld communicators left", fn, nc->comms_live);
    unsetenv("FAKE_NCCL_FAIL");
    CHECK(run(m, 4, false, &e) == DPC_OK, "%s: once NCCL works: %s", fn, e.msg);
    /* an asynchronous error comes after the group ran: it ran at both failed tries */
    long groups = strcmp(fn, "async") == 0 ? 3 : 1;
    CHECK(nc->groups == groups0 + groups && fake->peer_copies == peer0, "%s: groups %ld, peer copies %ld", fn,
          nc->groups - groups0, fake->peer_copies - peer0);
    check_broadcast_copy(m, nc);
    dpc_model_free(m);
    CHECK(fake->live_allocs == live0, "%s: %ld allocations leaked", fn, fake->live_allocs - live0);
    CHECK(nc->comms_live == 0, "%s: %ld communicators leaked", fn, nc->comms_live);
}

static int main_ncclfail(void) {
    struct fake_nccl_stats *nc = open_fake_nccl();
    if (!open_fake() || !nc)
        return finish("ncclfail");
    nccl_fail_once(nc, "ncclCommInitAll", "ncclCommInitAll failed: ncclUnhandledCudaError (1): unhandled cuda error");
    nccl_fail_once(nc, "ncclGroupStart", "ncclGroupStart failed: ncclUnhandledCudaError (1)");
    nccl_fail_once(nc, "ncclBroadcast", "ncclBroadcast failed: ncclUnhandledCudaError (1): unhandled cuda error");
    nccl_fail_once(nc, "ncclGroupEnd", "ncclGroupEnd failed: ncclUnhandledCudaError (1)");
    nccl_fail_once(nc, "async", "ncclCommGetAsyncError) ncclBroadcast failed: ncclRemoteError (6)");
    CHECK(nc->bad_calls == 0, "%ld calls refused by the fake: %s", nc->bad_calls, nc->last_bad);
    return finish("ncclfail");
}

static int main_gemm(const char *model) {
    void *real = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (real) {
        printf("a real CUDA driver is installed: cuBLASLt would use it, skipped\n");
        return SKIP;
    }
    if (!open_fake())
        return finish("gemm");
    dpc_model *m = load(model);
    if (!m)
        return finish("gemm");
    dpc_err e = {0};
    bool ok = set_devices(m, "cuda:0", &e);
    printf("GEMM model on the fake driver: %s\n", ok ? "accepted" : e.msg);
    CHECK(!ok && e.code != DPC_OK && strstr(e.msg, "cublasLt") && strstr(e.msg, "cuda:0"), "message: %s", e.msg);
    dpc_model_free(m);
    return finish("gemm");
}


/* ---- on a real GPU ---- */

/* Inputs for any model at batch n: floats in [-1, 1), integer ids below
 * the smallest embedding that reads them. */
static int model_inputs(const dpc_model *m, int64_t n, dpc_tensor **t, bool bad_id) {
    const ir_graph *g = &m->front->g;
    dpc_err e;
    for (int i = 0; i < g->inputs.len; i++) {
        if (dpc_model_input_new(m, i, n, NULL, &t[i], &e) != DPC_OK)
            return -1;
        int64_t cnt = dpc_tensor_numel(t[i]);
        if (t[i]->dtype == DPC_I64) {
            int64_t vocab = dpc_model_input_limit(m, i) ? dpc_model_input_limit(m, i) : 2;
            int64_t *v = t[i]->data;
            for (int64_t k = 0; k < cnt; k++)
                v[k] = (k * 2654435761LL) % vocab;
            if (bad_id && cnt > 0)
                v[cnt / 2] = vocab + 1000;
        } else {
            float *v = t[i]->data;
            uint64_t x = 88172645463325252ULL + (uint64_t)i;
            for (int64_t k = 0; k < cnt; k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                v[k] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            }
        }
    }
    return g->inputs.len;
}

static double rel_l2(const dpc_tensor *a, const dpc_tensor *b) {
    int64_t n = dpc_tensor_numel(a);
    const float *x = a->data, *y = b->data;
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) {
            if (isfinite(x[i]) != isfinite(y[i]))
                return INFINITY;
            continue;
        }
        num += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        den += (double)y[i] * y[i];
    }
    /* a tiny output (a sum that nearly cancels) is measured against an RMS
     * of 0.05, so that float rounding of O(1) terms is not an error */
    double floor = 5e-2 * sqrt((double)n);
    return sqrt(num) / (sqrt(den) > floor ? sqrt(den) : floor);
}

typedef struct outs {
    int n;
    dpc_tensor *t[DPC_MAX_IO];
} outs;

static void outs_free(outs *o) {
    for (int i = 0; i < o->n; i++)
        dpc_tensor_free(o->t[i]);
    o->n = 0;
}

static dpc_status run_model(dpc_model *m, int64_t n, bool bad_id, outs *o, dpc_err *e) {
    const ir_graph *g = &m->front->g;
    dpc_tensor *in[DPC_MAX_IO] = {0};
    double scalars[DPC_MAX_SCALARS];
    for (int i = 0; i < g->scalars.len; i++)
        scalars[i] = ((const ir_node *)g->scalars.items[i])->attr.leaf.value;
    int nin = model_inputs(m, n, in, bad_id);
    o->n = g->outputs.len;
    memset(o->t, 0, sizeof o->t);
    dpc_status s = nin < 0 ? dpc_errf(e, DPC_ENOMEM, "inputs") :
        dpc_model_run(m, (const dpc_tensor *const *)in, nin, scalars, o->t, e);
    for (int i = 0; i < DPC_MAX_IO; i++)
        dpc_tensor_free(in[i]);
    if (s != DPC_OK)
        o->n = 0;
    return s;
}

static void compare(const char *what, const outs *a, const outs *b, double tol) {
    CHECK(a->n == b->n, "%s: %d vs %d outputs", what, a->n, b->n);
    for (int i = 0; i < a->n && i < b->n; i++) {
        bool same_shape = a->t[i]->rank == b->t[i]->rank && a->t[i]->nbytes == b->t[i]->nbytes;
        CHECK(same_shape, "%s: output %d shapes differ", what, i);
        if (!same_shape)
            continue;
        double r = rel_l2(a->t[i], b->t[i]);
        printf("    %-28s output %d  rel_l2 %.2e (<= %.0e)%s\n", what, i, r, tol, r <= tol ? "" : "  FAIL");
        CHECK(r <= tol, "%s: output %d: rel_l2 %.3e > %.0e", what, i, r, tol);
    }
}

static void gpu_model(const char *path) {
    printf("%s\n", path);
    dpc_model *m = load(path);
    if (!m)
        return;
    dpc_err e = {0};
    bool ints = false;
    for (int i = 0; i < m->front->g.inputs.len; i++)
        ints |= ((const ir_node *)m->front->g.inputs.items[i])->dt == IR_I64;
    int64_t batches[8] = {1, 7, 64};
    int nbatch = 3;
    const char *env = getenv("DPC_GPU_BATCHES"); /* "7" under compute-sanitizer */
    if (env && *env) {
        nbatch = 0;
        for (const char *p = env; *p && nbatch < 8;) {
            batches[nbatch++] = strtoll(p, NULL, 10);
            p += strcspn(p, ",");
            p += *p == ',';
        }
    }
    for (int bi = 0; bi < nbatch; bi++) {
        int64_t n = batches[bi];
        printf("  batch %lld\n", (long long)n);
        outs cpu = {0}, g1 = {0}, g2 = {0}, g3 = {0}, rep = {0};
        CHECK(set_devices(m, "cpu", &e), "cpu: %s", e.msg);
        CHECK(run_model(m, n, false, &cpu, &e) == DPC_OK, "cpu run: %s", e.msg);
        CHECK(set_devices(m, "cuda:0", &e), "cuda:0: %s", e.msg);
        CHECK(run_model(m, n, false, &g1, &e) == DPC_OK, "cuda:0 run 1: %s", e.msg);
        CHECK(run_model(m, n, false, &g2, &e) == DPC_OK, "cuda:0 run 2: %s", e.msg);
        CHECK(run_model(m, n, false, &g3, &e) == DPC_OK, "cuda:0 run 3: %s", e.msg);
        dpc_cuda_stats st = {0};
        dpc_cuda_replica_stats(m->be, m->rep[0], &st);
        printf("    forwards %ld, graphs %ld, replays %ld, launches %ld, GEMMs %ld, arena %zu bytes\n", st.forwards,
               st.graphs_built, st.graph_launches, st.kernel_launches, st.gemms, st.arena_bytes);
        if (st.convs_cudnn + st.convs_fallback)
            printf("    convs: %d through cuDNN (%d fused), %d own kernels; %ld cuDNN calls (DPC_CUDNN=%s)\n",
                   st.convs_cudnn, st.convs_fused, st.convs_fallback, st.cudnn_calls,
                   getenv("DPC_CUDNN") ? getenv("DPC_CUDNN") : "1");
        const char *graphs = getenv("DPC_CUDA_GRAPHS");
        if (!graphs || strcmp(graphs, "0") != 0)
            CHECK(st.graph_launches == 2, "graph replays %ld", st.graph_launches);
        compare("cuda:0 vs cpu", &g1, &cpu, 1e-5);
        compare("graph capture vs eager", &g2, &g1, 1e-6);
        compare("graph replay vs eager", &g3, &g1, 1e-6);
        const char *lists[] = {"cuda:0,cuda:0", "cuda:0,cuda:0,cuda:0,cuda:0"};
        for (int l = 0; l < 2; l++) {
            CHECK(set_devices(m, lists[l], &e), "%s: %s", lists[l], e.msg);
            for (int k = 0; k < 2; k++) {
                CHECK(run_model(m, n, false, &rep, &e) == DPC_OK, "%s: %s", lists[l], e.msg);
                compare(l ? "4 replicas vs 1" : "2 replicas vs 1", &rep, &g1, 1e-6);
                outs_free(&rep);
            }
        }
        if (ints && bi == (nbatch > 1 ? 1 : 0)) {
            CHECK(set_devices(m, "cuda:0", &e), "cuda:0: %s", e.msg);
            dpc_status s = run_model(m, n, true, &rep, &e);
            printf("    bad index: %s\n", e.msg);
            CHECK(s == DPC_EUSER && strstr(e.msg, "out of range for embedding"), "bad index: %s", e.msg);
            outs_free(&rep);
            CHECK(run_model(m, n, false, &rep, &e) == DPC_OK, "after a bad index: %s", e.msg);
            compare("after a bad index", &rep, &g1, 1e-6);
            outs_free(&rep);
        }
        outs_free(&cpu);
        outs_free(&g1);
        outs_free(&g2);
        outs_free(&g3);
    }
    dpc_model_free(m);
}

/* ---- cuDNN on the fake driver ---- */

/* Convolutions only (no GEMM outside them, so no cuBLASLt while cuDNN
 * takes every conv): bias + ReLU fused, a depthwise conv unfused (its chain
 * is relu6), a 1x1 conv with a residual add and ReLU fused. */
static const char CONV_ONLY[] =
    "module ConvOnly {\n"
    "    c1 = Conv2d(3, 8, 3, padding=1)\n"
    "    bn1 = BatchNorm2d(8)\n"
    "    dw = Conv2d(8, 8, 3, padding=1, groups=8, bias=false)\n"
    "    c2 = Conv2d(8, 8, 1)\n"
    "    pool = AdaptiveAvgPool2d((1, 1))\n"
    "    forward(x: [N, 3, 8, 8]) {\n"
    "        h = relu(bn1(c1(x)))\n"
    "        d = relu6(dw(h))\n"
    "        return pool(relu(c2(d) + h))\n"
    "    }\n"
    "}\n"
    "model = ConvOnly()\n";

/* Mirrors fake_cudnn.c. */
struct fake_cudnn_stats {
    long handles_live, convs, fused, grouped, bad_calls, tf32;
    char last_bad[256];
};

static int main_cudnn(void) {
    const char *lib = getenv("DPC_CUDNN_LIBRARY");
    void *h = lib ? dlopen(lib, RTLD_NOW) : NULL;
    struct fake_cudnn_stats *fc = h ? dlsym(h, "fake_cudnn_stats") : NULL;
    CHECK(fc != NULL, "DPC_CUDNN_LIBRARY=%s is not fake_cudnn", lib ? lib : "(unset)");
    if (!open_fake() || !fc)
        return finish("cudnn");
    long live0 = fake->live_allocs;
    dpc_model *m = load(write_model(CONV_ONLY));
    if (!m)
        return finish("cudnn");
    int per = launches_per_forward(m);
    dpc_err e = {0};
    CHECK(set_devices(m, "cuda:0", &e), "cuda:0: %s", e.msg);
    outs o = {0};
    dpc_cuda_stats st = {0};
    for (int i = 0; i < 3; i++) { /* eager, captured, replayed */
        CHECK(run_model(m, 4, false, &o, &e) == DPC_OK, "run %d: %s", i + 1, e.msg);
        CHECK(o.n == 1 && o.t[0] && o.t[0]->shape[0] == 4 && o.t[0]->shape[1] == 8, "output shape");
        outs_free(&o);
    }
    CHECK(dpc_cuda_replica_stats(m->be, m->rep[0], &st), "stats");
    printf("convs: %d through cuDNN (%d fused), %d own; %ld cuDNN calls, %ld kernel launches (%d per forward "
           "without cuDNN)\n",
           st.convs_cudnn, st.convs_fused, st.convs_fallback, st.cudnn_calls, st.kernel_launches, per);
    CHECK(st.convs_cudnn == 3 && st.convs_fused == 2 && st.convs_fallback == 0, "convs %d fused %d own %d",
          st.convs_cudnn, st.convs_fused, st.convs_fallback);
    CHECK(st.graphs_built == 1 && st.graph_launches == 2 && st.cudnn_calls == 6, "graphs %ld replays %ld cudnn %ld",
          st.graphs_built, st.graph_launches, st.cudnn_calls);
    /* eager and captured: no im2col launches, no epilogue for the two fused
     * convs; the prepare launches once */
    int nprep = 0, nim2col = 0;
    {
        char *src = NULL;
        dpc_cu_plan plan;
        if (dpc_unit_cuda_program(m->unit, KP_F32, &src, &plan, &e) == DPC_OK) {
            for (int i = 0; i < plan.nsteps; i++)
                if (plan.steps[i].kind == DPC_CU_LAUNCH) {
                    nprep += i < plan.nprepare;
                    nim2col += strcmp(plan.steps[i].u.launch.suffix, "_im2col") == 0;
                }
            free(src);
            dpc_cu_plan_free(&plan);
        }
    }
    long want = nprep + 2L * (per - nprep - nim2col - 2);
    CHECK(nim2col == 10 && st.kernel_launches == want, "kernel launches %ld, expected %ld (%d im2col)",
          st.kernel_launches, want, nim2col);
    CHECK(fc->convs + fc->fused == 6 && fc->fused == 4, "the fake ran %ld convs, %ld fused", fc->convs, fc->fused);
    CHECK(run_model(m, 7, false, &o, &e) == DPC_OK, "batch 7: %s", e.msg); /* a new plan, new descriptors */
    outs_free(&o);
    CHECK(fc->bad_calls == 0 && fc->tf32 == 0, "the fake refused %ld calls (%s); %ld with TF32", fc->bad_calls,
          fc->last_bad, fc->tf32);
    CHECK(fake->bad_copies == 0 && fake->bad_launches == 0, "bad copies %ld, bad launches %ld", fake->bad_copies,
          fake->bad_launches);
    /* DPC_CUDNN=0: the convs' own steps, which need cuBLASLt (no real driver here) */
    setenv("DPC_CUDNN", "0", 1);
    CHECK(set_devices(m, "cpu", &e) && set_devices(m, "cuda:0", &e), "cuda:0 again: %s", e.msg);
    dpc_status s = run_model(m, 4, false, &o, &e);
    outs_free(&o);
    CHECK(s != DPC_OK && strstr(e.msg, "without cuDNN (DPC_CUDNN=0)") && strstr(e.msg, "cublasLt"),
          "DPC_CUDNN=0: %s", e.msg);
    /* auto: the own steps cannot be timed without cuBLASLt, so cuDNN stays */
    setenv("DPC_CUDNN", "auto", 1);
    CHECK(set_devices(m, "cpu", &e) && set_devices(m, "cuda:0", &e), "auto: %s", e.msg);
    CHECK(run_model(m, 4, false, &o, &e) == DPC_OK, "auto: %s", e.msg);
    outs_free(&o);
    CHECK(dpc_cuda_replica_stats(m->be, m->rep[0], &st) && st.convs_cudnn == 3 && st.cudnn_calls == 3,
          "auto: %d convs through cuDNN, %ld calls", st.convs_cudnn, st.cudnn_calls);
    setenv("DPC_CUDNN", "sometimes", 1);
    CHECK(set_devices(m, "cpu", &e), "cpu: %s", e.msg);
    CHECK(!set_devices(m, "cuda:0", &e) && strstr(e.msg, "DPC_CUDNN='sometimes' is not 0, 1 or auto"),
          "bad DPC_CUDNN: %s", e.msg);
    unsetenv("DPC_CUDNN");
    dpc_model_free(m);
    CHECK(fc->handles_live == 0, "%ld cuDNN handles leaked", fc->handles_live);
    CHECK(fake->live_allocs == live0, "%ld allocations leaked", fake->live_allocs - live0);
    return finish("cudnn");
}

/* The toolkit's real cuDNN loads without a GPU (every entry point dpc
 * declares resolves, the version is 8.0 or newer); without a GPU making a
 * handle fails with cuDNN's status named. Skipped where it is absent. */
static int main_cudnnreal(void) {
    dpc_err e = {0};
    if (dpc_dnn_load(&e) != DPC_OK) {
        printf("%s: skipped\n", e.msg);
        CHECK(strstr(e.msg, "cuDNN not found"), "a cuDNN that does not load: %s", e.msg);
        return failures ? finish("cudnnreal") : SKIP;
    }
    printf("cuDNN %zu from %s\n", dpc_dnn_version(), dpc_dnn_path());
    CHECK(dpc_dnn_version() >= 8000, "version %zu", dpc_dnn_version());
    if (dpc_cuda_device_count() == 0) {
        dpc_dnn *d = NULL;
        dpc_status s = dpc_dnn_create(&d, NULL, &e);
        printf("without a GPU: %s\n", s == DPC_OK ? "a handle" : e.msg);
        CHECK(s != DPC_OK && strstr(e.msg, "cudnnCreate failed: CUDNN_STATUS_"), "cudnnCreate: %s", e.msg);
        dpc_dnn_destroy(d);
    }
    return finish("cudnnreal");
}

static int main_gpu(int argc, char **argv) {
    if (dpc_cuda_device_count() == 0) {
        printf("no CUDA device: skipped\n");
        return SKIP;
    }
    for (int i = 0; i < argc; i++)
        gpu_model(argv[i]);
    return finish("gpu");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_backend_cuda nodriver|flow|sticky|nocapture|oom|nccl|ncclfail|gemm [MODEL.dp]\n");
        return 2;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dpc-bcuda-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    const char *mode = argv[1];
    int rc;
    if (strcmp(mode, "nodriver") == 0)
        rc = main_nodriver();
    else if (strcmp(mode, "flow") == 0)
        rc = main_flow();
    else if (strcmp(mode, "sticky") == 0)
        rc = main_sticky();
    else if (strcmp(mode, "nocapture") == 0)
        rc = main_nocapture();
    else if (strcmp(mode, "oom") == 0)
        rc = main_oom();
    else if (strcmp(mode, "nccl") == 0)
        rc = main_nccl();
    else if (strcmp(mode, "ncclfail") == 0)
        rc = main_ncclfail();
    else if (strcmp(mode, "gpu") == 0)
        rc = main_gpu(argc - 2, argv + 2);
    else if (strcmp(mode, "cudnn") == 0)
        rc = main_cudnn();
    else if (strcmp(mode, "cudnnreal") == 0)
        rc = main_cudnnreal();
    else if (strcmp(mode, "gemm") == 0 && argc > 2)
        rc = main_gemm(argv[2]);
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        rc = 2;
    }
    char p[128];
    snprintf(p, sizeof p, "%s/m.dp", tmpdir);
    unlink(p);
    snprintf(p, sizeof p, "%s/w.safetensors", tmpdir);
    unlink(p);
    rmdir(tmpdir);
    return rc;
}
