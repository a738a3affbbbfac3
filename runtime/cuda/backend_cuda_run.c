/* backend_cuda_run.c - the CUDA backend's forward (backend_cuda.c has the
 * rest): the memory plan once per batch size, the plan's steps (kernel
 * launches and cuBLASLt GEMMs) enqueued or replayed from a CUDA graph, the
 * error flag and outputs read back; the step benchmarks. */
#include "backend_cuda_impl.h"
#include "faults.h"
#include "memplan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- memory plan */

/* Bytes of buffer b at batch N: on the device (floats as cb->prec), and in
 * the caller's tensors (f32). */
static size_t dev_bytes(const cuda_backend *cb, const kbuf *b, int64_t N) {
    return (size_t)(b->sym ? b->elems * N : b->elems) * (size_t)kbuf_esize(b, cb->prec);
}
static size_t host_bytes(const kbuf *b, int64_t N) { return (size_t)(b->sym ? b->elems * N : b->elems) * (size_t)b->esize; }

/* Tensor data into the staging area, narrowed to 16 bits when floats are
 * stored so; and back. */
static void stage_in(const cuda_backend *cb, const kbuf *b, void *dst, const void *src, int64_t N) {
    if (kbuf_esize(b, cb->prec) == b->esize)
        memcpy(dst, src, host_bytes(b, N));
    else
        dpc_f32_narrow(src, dst, host_bytes(b, N) / 4, dpc_cub_half_dtype(cb->prec));
}
static void stage_out(const cuda_backend *cb, const kbuf *b, void *dst, const void *src, int64_t N) {
    if (kbuf_esize(b, cb->prec) == b->esize)
        memcpy(dst, src, host_bytes(b, N));
    else
        dpc_f32_widen(src, dst, host_bytes(b, N) / 4, dpc_cub_half_dtype(cb->prec));
}

static dpc_status plan_convs(cuda_backend *cb, dpc_replica *r, int64_t N, dpc_err *e);
static dpc_status run_steps(cuda_backend *cb, dpc_replica *r, int from, int to, int64_t N, bool capturing,
                            dpc_err *e);

static dpc_status plan(cuda_backend *cb, dpc_replica *r, int64_t N, dpc_err *e) {
    const dpc_unit *u = cb->u;
    size_t total = 0;
    dpc_status s = dpc_memplan(u, N, cb->prec, true, r->offset, &total, e);
    if (s != DPC_OK)
        return s;
    if (r->graph) {
        dpc_cuda()->cuGraphExecDestroy(r->graph);
        r->graph = NULL;
    }
    r->planned_N = -1;
    r->graph_failed = false;
    r->runs_at_N = 0;
    if (total > r->arena_bytes) {
        if (r->arena)
            CK_TRY(cuMemFree(r->arena));
        r->arena = 0;
        r->arena_bytes = 0;
        s = CK(cuMemAlloc(&r->arena, total));
        if (s != DPC_OK) {
            dpc_err_prefix(e, "activations of batch %lld (%zu bytes): ", (long long)N, total);
            return s;
        }
        r->arena_bytes = total;
    }
    size_t host = HOST_IO;
    for (int i = 0; i < dpc_unit_nbufs(u); i++) {
        const kbuf *b = dpc_unit_buf(u, i);
        if (b->kind == BUF_PARAM || b->kind == BUF_CONST)
            r->ptr[i] = r->dev->weights + cb->param_off[i];
        else
            r->ptr[i] = r->arena + r->offset[i];
        if (b->kind == BUF_INPUT || b->kind == BUF_OUTPUT) {
            r->host_off[i] = host;
            host += dpc_memplan_bytes(b, N, cb->prec);
        }
    }
    if (host > r->host_bytes) {
        if (r->host)
            CK_TRY(cuMemFreeHost(r->host));
        r->host = NULL;
        r->host_bytes = 0;
        s = CK(cuMemAllocHost(&r->host, host));
        if (s != DPC_OK) {
            dpc_err_prefix(e, "pinned staging of %zu bytes: ", host);
            return s;
        }
        r->host_bytes = host;
    }
    r->planned_N = N;
    r->stats.arena_bytes = r->arena_bytes;
    return plan_convs(cb, r, N, e);
}

/* ---------------------------------------------------------- one forward */

static dpc_status launch_kernel(cuda_backend *cb, dpc_replica *r, int i, int64_t N, dpc_err *e) {
    const dpc_cu_launch *l = &cb->plan.steps[i].u.launch;
    int64_t blocks = dpc_cu_blocks(l, N, r->dev->info.sm_count);
    if (blocks <= 0)
        return DPC_OK;
    if (blocks > 0x7fffffffLL)
        return dpc_errf(e, DPC_EUSER, "kernel %s%s: %lld blocks are more than one launch can take", l->fn, l->suffix,
                        (long long)blocks);
    CUdeviceptr ptrs[DPC_CU_MAX_PARAMS];
    void *args[DPC_CU_MAX_PARAMS + 1];
    for (int j = 0; j < l->nbufs; j++) {
        ptrs[j] = r->ptr[l->bufs[j]];
        args[j] = &ptrs[j];
    }
    dpc_cu_kctx ctx = {.scalars = r->ctl + CTL_SCALARS, .err = r->ctl, .N = N, .g = l->g};
    args[l->nbufs] = &ctx;
    if (dpc_fault_kernel_should_fail())
        return dpc_errf(e, DPC_EDEVICE, "cuLaunchKernel failed: injected fault");
    dpc_status s = CK(cuLaunchKernel(r->dev->fn[i], (unsigned)blocks, 1, 1, DPC_CU_BLOCK, 1, 1, 0, r->stream, args, NULL));
    r->stats.kernel_launches++;
    return s;
}

dpc_status dpc_cu_gemm_expand(const dpc_cu_gemm *g, int64_t N,
                              dpc_status (*fn)(void *ctx, const dpc_cu_gemm_call *c), void *ctx) {
    dpc_cu_gemm_call c = {0};
    c.M = dpc_cu_dim_eval(g->M, N);
    c.N = dpc_cu_dim_eval(g->N, N);
    c.K = dpc_cu_dim_eval(g->K, N);
    c.lda = dpc_cu_dim_eval(g->lda, N);
    c.ldb = dpc_cu_dim_eval(g->ldb, N);
    c.ldc = dpc_cu_dim_eval(g->ldc, N);
    c.batch = dpc_cu_dim_eval(g->batch, N);
    c.strideA = dpc_cu_dim_eval(g->strideA, N);
    c.strideB = dpc_cu_dim_eval(g->strideB, N);
    c.strideC = dpc_cu_dim_eval(g->strideC, N);
    if (c.M <= 0 || c.N <= 0 || c.batch <= 0)
        return DPC_OK;
    int64_t count[DPC_CU_MAX_LOOPS], total = 1;
    for (int j = 0; j < g->nloops; j++) {
        count[j] = dpc_cu_dim_eval(g->loop[j].count, N);
        total *= count[j];
    }
    for (int64_t it = 0; it < total; it++) {
        int64_t rem = it;
        c.offA = dpc_cu_dim_eval(g->offA, N);
        c.offB = dpc_cu_dim_eval(g->offB, N);
        c.offC = dpc_cu_dim_eval(g->offC, N);
        for (int j = g->nloops - 1; j >= 0; j--) {
            int64_t i = rem % count[j];
            rem /= count[j];
            c.offA += i * dpc_cu_dim_eval(g->loop[j].sA, N);
            c.offB += i * dpc_cu_dim_eval(g->loop[j].sB, N);
            c.offC += i * dpc_cu_dim_eval(g->loop[j].sC, N);
        }
        dpc_status s = fn(ctx, &c);
        if (s != DPC_OK)
            return s;
    }
    return DPC_OK;
}

typedef struct gemm_ctx {
    cuda_backend *cb;
    dpc_replica *r;
    const dpc_cu_gemm *g;
    dpc_err *e;
} gemm_ctx;

static dpc_status gemm_call(void *arg, const dpc_cu_gemm_call *c) {
    gemm_ctx *x = arg;
    const dpc_cu_gemm *g = x->g;
    dpc_replica *r = x->r;
    if (c->batch > 0x7fffffff)
        return dpc_errf(x->e, DPC_EUSER, "a batch of %lld GEMMs is more than cuBLASLt takes", (long long)c->batch);
    dpc_lt_gemm_desc d = {0};
    d.M = c->M;
    d.N = c->N;
    d.K = c->K;
    d.transB = g->transB;
    d.lda = c->lda;
    d.ldb = c->ldb;
    d.ldc = c->ldc;
    d.batch = (int32_t)c->batch;
    d.strideA = c->strideA;
    d.strideB = c->strideB;
    d.strideC = c->strideC;
    d.dtype = x->cb->prec == KP_BF16 ? DPC_LT_BF16 : x->cb->prec == KP_F16 ? DPC_LT_F16 : DPC_LT_F32;
    d.epilogue = (dpc_lt_epilogue)g->epilogue;
    d.tf32 = x->cb->tf32;
    CUdeviceptr bias = g->bias >= 0 ? r->ptr[g->bias] : 0;
    CUdeviceptr es = (CUdeviceptr)kbuf_esize(dpc_unit_buf(x->cb->u, g->a), x->cb->prec); /* A, B, C alike: floats */
    r->stats.gemms++;
    return dpc_lt_gemm(r->lt, &d, (const void *)(uintptr_t)(r->ptr[g->a] + (CUdeviceptr)c->offA * es),
                       (const void *)(uintptr_t)(r->ptr[g->b] + (CUdeviceptr)c->offB * es), (const void *)(uintptr_t)bias,
                       (void *)(uintptr_t)(r->ptr[g->c] + (CUdeviceptr)c->offC * es), (void *)r->stream, x->e);
}

static dpc_status run_gemm(cuda_backend *cb, dpc_replica *r, int i, int64_t N, dpc_err *e) {
    gemm_ctx x = {cb, r, &cb->plan.steps[i].u.gemm, e};
    return dpc_cu_gemm_expand(x.g, N, gemm_call, &x);
}

/* ---------------------------------------------------------- convolutions through cuDNN */

#define DNN_MAX_WORKSPACE ((size_t)256 << 20)

/* How conv step i runs at batch N (CONV_*). */
static int conv_how(const dpc_replica *r, int i, int64_t N) {
    return r->conv_how && r->dnn && r->planned_N == N ? r->conv_how[i] : CONV_FALLBACK;
}

/* The steps after conv step st that cuDNN replaces. */
static int conv_skip(const dpc_cu_step *st, int how) {
    return how == CONV_FALLBACK ? 0 : st->u.conv.nfallback + (how == CONV_FUSED);
}

static void *dev_ptr(const dpc_replica *r, int buf) { return buf >= 0 ? (void *)(uintptr_t)r->ptr[buf] : NULL; }

static dpc_status run_conv(cuda_backend *cb, dpc_replica *r, int i, int64_t N, int how, dpc_err *e) {
    const dpc_cu_conv *cv = &cb->plan.steps[i].u.conv;
    bool fused = how == CONV_FUSED;
    dpc_dnn_conv d;
    dpc_dnn_conv_of(cv, N, cb->prec, cb->tf32, fused, &d);
    r->stats.cudnn_calls++;
    return dpc_dnn_conv_run(r->dnn, &d, dev_ptr(r, cv->x), dev_ptr(r, cv->w), fused ? dev_ptr(r, cv->bias) : NULL,
                            fused ? dev_ptr(r, cv->z) : NULL, dev_ptr(r, fused ? cv->out : cv->y),
                            (void *)(uintptr_t)r->dnn_ws, r->dnn_ws_bytes, (void *)r->stream, e);
}

static void fell_back(dpc_replica *r, const char *why) {
    if (!r->dnn_why[0])
        snprintf(r->dnn_why, sizeof r->dnn_why, "%s", why);
}

/* Milliseconds of the best of three runs (after one warm-up) of conv step
 * i as `how` says: cuDNN, or its fallback steps (and the epilogue that the
 * fused call replaces). Negative when cuDNN failed (why in e). */
static double time_conv(cuda_backend *cb, dpc_replica *r, int i, int64_t N, int how, bool lib, CUevent ev[2],
                        dpc_err *e) {
    const dpc_cu_step *st = &cb->plan.steps[i];
    double best = -1;
    for (int it = 0; it < 4; it++) {
        dpc_status s = CK(cuEventRecord(ev[0], r->stream));
        if (s == DPC_OK)
            s = lib ? run_conv(cb, r, i, N, how, e) : run_steps(cb, r, i + 1, i + 1 + conv_skip(st, how), N, false, e);
        if (s == DPC_OK)
            s = CK(cuEventRecord(ev[1], r->stream));
        if (s == DPC_OK)
            s = CK(cuEventSynchronize(ev[1]));
        float ms = 0;
        if (s == DPC_OK)
            s = CK(cuEventElapsedTime(&ms, ev[0], ev[1]));
        if (s != DPC_OK) {
            dpc_cuda()->cuStreamSynchronize(r->stream);
            return -1;
        }
        if (it > 0 && (best < 0 || ms < best))
            best = ms;
    }
    return best;
}

/* DPC_CUDNN=auto: each conv cuDNN takes is timed both ways on this
 * replica's buffers (what they hold does not matter) and keeps the faster. */
static dpc_status time_convs(cuda_backend *cb, dpc_replica *r, int64_t N, dpc_err *e) {
    CUevent ev[2] = {NULL, NULL};
    dpc_cuda_stats keep = r->stats;
    dpc_err why = {0};
    if (cb->has_conv_gemm && !r->lt && dpc_lt_create(&r->lt, (void *)r->stream, &why) != DPC_OK) {
        fell_back(r, "DPC_CUDNN=auto could not time the own convolutions (no cuBLASLt)");
        return DPC_OK; /* cuDNN where it took the conv */
    }
    dpc_status s = CK(cuEventCreate(&ev[0], CU_EVENT_DEFAULT));
    if (s == DPC_OK)
        s = CK(cuEventCreate(&ev[1], CU_EVENT_DEFAULT));
    for (int i = cb->plan.nprepare; s == DPC_OK && i < cb->plan.nsteps; i++) {
        int how = r->conv_how[i];
        if (cb->plan.steps[i].kind != DPC_CU_CONV || how == CONV_FALLBACK)
            continue;
        double lib = time_conv(cb, r, i, N, how, true, ev, &why);
        if (lib < 0 && atomic_load(&cb->dead))
            s = dpc_errf(e, DPC_EDEVICE, "%s", why.msg);
        double own = s == DPC_OK && lib >= 0 ? time_conv(cb, r, i, N, how, false, ev, e) : 0;
        if (own < 0)
            s = e->code != DPC_OK ? e->code : DPC_EDEVICE;
        if (lib < 0)
            fell_back(r, why.msg);
        else if (own <= lib)
            fell_back(r, "DPC_CUDNN=auto timed the own kernels faster");
        if (lib < 0 || own <= lib)
            r->conv_how[i] = CONV_FALLBACK;
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            dpc_cuda()->cuEventDestroy(ev[i]);
    r->stats = keep; /* the timing runs are no forwards */
    return s;
}

/* After the memory plan at N: which conv steps cuDNN runs (fused where the
 * plan allows, else into the GEMM layout), its handle and workspace. A conv
 * cuDNN cannot run falls back to the plan's own steps, never fails. */
static dpc_status plan_convs(cuda_backend *cb, dpc_replica *r, int64_t N, dpc_err *e) {
    int n = cb->plan.nsteps;
    r->stats.convs_cudnn = r->stats.convs_fused = r->stats.convs_fallback = 0;
    if (!cb->has_conv)
        return DPC_OK;
    if (!r->conv_how && !(r->conv_how = dpc_calloc((size_t)n + 1, 1)))
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    memset(r->conv_how, CONV_FALLBACK, (size_t)n);
    dpc_err why = {0};
    if (cb->cudnn == 0)
        fell_back(r, "DPC_CUDNN=0");
    else if (!r->dnn && !r->dnn_why[0] && dpc_dnn_create(&r->dnn, (void *)r->stream, &why) != DPC_OK)
        fell_back(r, why.msg);
    size_t ws = 0;
    for (int i = cb->plan.nprepare; r->dnn && cb->cudnn && i < n; i++) {
        const dpc_cu_conv *cv = &cb->plan.steps[i].u.conv;
        if (cb->plan.steps[i].kind != DPC_CU_CONV)
            continue;
        size_t need = 0;
        r->conv_how[i] = (uint8_t)dpc_dnn_choose(r->dnn, cv, N, cb->prec, cb->tf32, DNN_MAX_WORKSPACE, &need, &why);
        if (r->conv_how[i] == CONV_FALLBACK)
            fell_back(r, why.msg);
        ws = need > ws ? need : ws;
    }
    if (ws > r->dnn_ws_bytes) {
        if (r->dnn_ws)
            CK_TRY(cuMemFree(r->dnn_ws));
        r->dnn_ws = 0;
        r->dnn_ws_bytes = 0;
        dpc_status s = CK(cuMemAlloc(&r->dnn_ws, ws));
        if (s != DPC_OK) { /* without cuDNN's workspace the own steps run */
            if (atomic_load(&cb->dead))
                return s;
            fell_back(r, e->msg);
            r->dnn_ws = 0;
            memset(r->conv_how, CONV_FALLBACK, (size_t)n);
        } else
            r->dnn_ws_bytes = ws;
    }
    if (cb->cudnn == 2 && r->dnn) {
        dpc_status s = time_convs(cb, r, N, e);
        if (s != DPC_OK)
            return s;
    }
    for (int i = cb->plan.nprepare; i < n; i++)
        if (cb->plan.steps[i].kind == DPC_CU_CONV) {
            r->stats.convs_cudnn += r->conv_how[i] != CONV_FALLBACK;
            r->stats.convs_fused += r->conv_how[i] == CONV_FUSED;
            r->stats.convs_fallback += r->conv_how[i] == CONV_FALLBACK;
        }
    /* the own steps of a conv cuDNN does not take may need cuBLASLt */
    if (r->stats.convs_fallback && cb->has_conv_gemm && !r->lt) {
        dpc_status s = dpc_lt_create(&r->lt, (void *)r->stream, e);
        if (s != DPC_OK) {
            dpc_err_prefix(e, "convolutions without cuDNN (%.200s): ", r->dnn_why);
            return s;
        }
    }
    return DPC_OK;
}

/* The plan's steps from..to-1, in order. */
static dpc_status run_steps(cuda_backend *cb, dpc_replica *r, int from, int to, int64_t N, bool capturing,
                            dpc_err *e) {
    dpc_status s = DPC_OK;
    for (int i = from; s == DPC_OK && i < to; i++) {
        const dpc_cu_step *st = &cb->plan.steps[i];
        if (st->kind == DPC_CU_CONV) {
            int how = conv_how(r, i, N);
            if (how == CONV_FALLBACK)
                continue; /* the im2col and GEMM steps that follow */
            s = run_conv(cb, r, i, N, how, e);
            i += conv_skip(st, how);
        } else
            s = st->kind == DPC_CU_LAUNCH ? launch_kernel(cb, r, i, N, e) : run_gemm(cb, r, i, N, e);
        if (s == DPC_OK && cb->sync_each && !capturing)
            s = CK(cuStreamSynchronize(r->stream));
        if (s != DPC_OK)
            dpc_err_prefix(e, "kernel %s: ", dpc_cub_kname(cb, st->kernel));
    }
    return s;
}

/* A forward's steps: all but the prepare steps. */
static dpc_status enqueue_steps(cuda_backend *cb, dpc_replica *r, int64_t N, bool capturing, dpc_err *e) {
    return run_steps(cb, r, cb->plan.nprepare, cb->plan.nsteps, N, capturing, e);
}

/* The prepare steps (the kernels over parameters and constants only), once
 * per device and weights: the first replica there runs them on its stream
 * and waits; their outputs live in the device's weights block. */
static dpc_status prepare_device(cuda_backend *cb, dpc_replica *r, dpc_err *e) {
    if (!cb->plan.nprepare || atomic_load(&r->dev->prepared))
        return DPC_OK;
    pthread_mutex_lock(&cb->lock);
    dpc_status s = DPC_OK;
    if (!atomic_load(&r->dev->prepared)) {
        s = run_steps(cb, r, 0, cb->plan.nprepare, 1, false, e);
        if (s == DPC_OK)
            s = CK(cuStreamSynchronize(r->stream));
        if (s == DPC_OK)
            atomic_store(&r->dev->prepared, true);
        else
            dpc_err_prefix(e, "preparing the weights: ");
    }
    pthread_mutex_unlock(&cb->lock);
    return s;
}

/* Everything one forward puts on the stream, graph-capturable: control
 * block, inputs in, the plan, outputs and error flag out. */
static dpc_status enqueue(cuda_backend *cb, dpc_replica *r, int64_t N, bool capturing, dpc_err *e) {
    const dpc_unit *u = cb->u;
    char *host = r->host;
    dpc_status s = CK(cuMemsetD8Async(r->ctl, 0, sizeof(dpc_cu_kerr), r->stream));
    size_t nscalars = (size_t)dpc_unit_signature(u)->nscalars; /* at most MAX_SCALARS */
    if (s == DPC_OK && nscalars)
        s = CK(cuMemcpyHtoDAsync(r->ctl + CTL_SCALARS, host + CTL_SCALARS, nscalars * sizeof(float), r->stream));
    for (int i = 0; s == DPC_OK && i < dpc_unit_nbufs(u); i++) {
        const kbuf *b = dpc_unit_buf(u, i);
        if (b->kind == BUF_INPUT && dev_bytes(cb, b, N))
            s = CK(cuMemcpyHtoDAsync(r->ptr[i], host + r->host_off[i], dev_bytes(cb, b, N), r->stream));
    }
    if (s == DPC_OK)
        s = enqueue_steps(cb, r, N, capturing, e);
    for (int i = 0; s == DPC_OK && i < dpc_unit_nbufs(u); i++) {
        const kbuf *b = dpc_unit_buf(u, i);
        if (b->kind == BUF_OUTPUT && dev_bytes(cb, b, N))
            s = CK(cuMemcpyDtoHAsync(host + r->host_off[i], r->ptr[i], dev_bytes(cb, b, N), r->stream));
    }
    if (s == DPC_OK)
        s = CK(cuMemcpyDtoHAsync(host, r->ctl, sizeof(dpc_cu_kerr), r->stream));
    return s;
}

/* Captures enqueue into a graph. False (with the reason in e) when the
 * driver refuses; the caller then runs step by step. */
static bool capture(cuda_backend *cb, dpc_replica *r, int64_t N, dpc_err *e) {
    const dpc_cuda_api *cu = dpc_cuda();
    if (CK(cuStreamBeginCapture(r->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)) != DPC_OK)
        return false;
    long kl = r->stats.kernel_launches, gm = r->stats.gemms, dn = r->stats.cudnn_calls;
    dpc_status s = enqueue(cb, r, N, true, e);
    CUgraph graph = NULL;
    CUresult er = cu->cuStreamEndCapture(r->stream, &graph);
    if (s == DPC_OK)
        s = dpc_cub_check(cb, er, "cuStreamEndCapture", e);
    if (s == DPC_OK)
        s = CK(cuGraphInstantiate(&r->graph, graph, 0));
    if (graph)
        cu->cuGraphDestroy(graph);
    if (s != DPC_OK) {
        r->graph = NULL;
        r->stats.kernel_launches = kl;
        r->stats.gemms = gm;
        r->stats.cudnn_calls = dn;
        return false;
    }
    r->stats.graphs_built++;
    return true;
}

dpc_status dpc_cub_launch(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e) {
    cuda_backend *cb = (cuda_backend *)be;
    const dpc_unit *u = cb->u;
    dpc_status s;
    if (dpc_cub_is_dead(cb, e, &s))
        return s;
    if (r->pending)
        return dpc_errf(e, DPC_EINTERNAL, "CUDA replica launched twice without a sync");
    if (a->fail_at >= 0 && a->fail_at < dpc_unit_nkernels(u))
        return dpc_errf(e, DPC_EDEVICE, "injected failure in kernel %s", dpc_cub_kname(cb, a->fail_at));
    r->pending_N = a->N;
    if (a->N == 0) {
        r->pending = true;
        return DPC_OK;
    }
    /* replicas made without replicas_ready (or after it failed) */
    if (atomic_load(&r->dev->weights_pending) && (s = be->replicas_ready(be, e)) != DPC_OK)
        return s;
    if ((s = CK(cuCtxSetCurrent(r->dev->ctx))) != DPC_OK)
        return s;
    if (r->planned_N != a->N && (s = plan(cb, r, a->N, e)) != DPC_OK)
        return s;
    if ((s = prepare_device(cb, r, e)) != DPC_OK)
        return s;
    /* stage the inputs and scalars in pinned memory */
    char *host = r->host;
    memset(host, 0, HOST_IO);
    for (int i = 0; i < dpc_unit_signature(u)->nscalars; i++)
        ((float *)(host + CTL_SCALARS))[i] = a->scalars ? a->scalars[i] : 0.0f;
    for (int i = 0; i < dpc_unit_nbufs(u); i++) {
        const kbuf *b = dpc_unit_buf(u, i);
        if (b->kind != BUF_INPUT)
            continue;
        const dpc_tensor *t = &a->inputs[b->index];
        size_t want = host_bytes(b, a->N);
        if (t->nbytes != want)
            return dpc_errf(e, DPC_EINTERNAL, "input %d has %zu bytes, the plan expects %zu", b->index,
                            (size_t)t->nbytes, want);
        if (want)
            stage_in(cb, b, host + r->host_off[i], t->data, a->N);
    }
    r->stats.forwards++;
    if (cb->graphs && r->graph) {
        s = CK(cuGraphLaunch(r->graph, r->stream));
        r->stats.graph_launches += s == DPC_OK;
    } else if (cb->graphs && !r->graph_failed && r->runs_at_N > 0) {
        dpc_err why;
        if (capture(cb, r, a->N, &why)) {
            s = CK(cuGraphLaunch(r->graph, r->stream));
            r->stats.graph_launches += s == DPC_OK;
        } else {
            if (atomic_load(&cb->dead))
                return dpc_errf(e, DPC_EDEVICE, "%s", why.msg);
            r->graph_failed = true; /* e.g. a driver that cannot capture: step by step */
            s = enqueue(cb, r, a->N, false, e);
        }
    } else {
        s = enqueue(cb, r, a->N, false, e);
    }
    if (s != DPC_OK) {
        dpc_cuda()->cuStreamSynchronize(r->stream); /* nothing may still write to the staging */
        return s;
    }
    r->runs_at_N++;
    r->pending = true;
    return DPC_OK;
}

dpc_status dpc_cub_sync(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e) {
    cuda_backend *cb = (cuda_backend *)be;
    const dpc_unit *u = cb->u;
    if (!r->pending)
        return dpc_errf(e, DPC_EINTERNAL, "CUDA replica synced without a launch");
    r->pending = false;
    if (r->pending_N == 0)
        return DPC_OK;
    dpc_status s = CK(cuCtxSetCurrent(r->dev->ctx));
    if (s == DPC_OK)
        s = CK(cuStreamSynchronize(r->stream));
    if (s != DPC_OK)
        return s;
    const dpc_cu_kerr *ke = r->host;
    if (ke->kernel > 0 && ke->kernel <= dpc_unit_nkernels(u)) {
        dpc_kernel_info k;
        dpc_unit_kernel(u, ke->kernel - 1, &k);
        return dpc_errf(e, DPC_EUSER, "%s:%d: index %lld is out of range for embedding %s with %lld rows", k.file,
                        k.line, ke->index, k.scope, ke->limit);
    }
    if (ke->kernel != 0)
        return dpc_errf(e, DPC_EINTERNAL, "the error flag holds an unknown kernel %d", ke->kernel);
    for (int i = 0; i < dpc_unit_nbufs(u); i++) {
        const kbuf *b = dpc_unit_buf(u, i);
        if (b->kind != BUF_OUTPUT)
            continue;
        dpc_tensor *t = a->outputs[b->index];
        size_t want = host_bytes(b, r->pending_N);
        if (!t || t->nbytes != want)
            return dpc_errf(e, DPC_EINTERNAL, "output %d has %zu bytes, the plan gives %zu", b->index,
                            t ? (size_t)t->nbytes : 0, want);
        if (want)
            stage_out(cb, b, t->data, (char *)r->host + r->host_off[i], r->pending_N);
    }
    return DPC_OK;
}

dpc_status dpc_cub_run(dpc_backend *be, dpc_replica *r, const dpc_run_args *a, dpc_err *e) {
    dpc_status s = dpc_cub_launch(be, r, a, e);
    if (s != DPC_OK)
        return s;
    return dpc_cub_sync(be, r, a, e);
}

/* ---------------------------------------------------------- benchmarks */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

dpc_status dpc_cuda_bench_steps(dpc_backend *be, dpc_replica *r, int64_t N, bool graph, int warm, int iters,
                                dpc_cuda_bench *out, dpc_err *e) {
    cuda_backend *cb = (cuda_backend *)be;
    const dpc_cuda_api *cu = dpc_cuda();
    memset(out, 0, sizeof *out);
    dpc_status s;
    if (strcmp(be->name, "cuda") != 0)
        return dpc_errf(e, DPC_EUSAGE, "not a CUDA replica");
    if (dpc_cub_is_dead(cb, e, &s))
        return s;
    if (iters < 1 || iters > 100000 || warm < 0 || N < 1)
        return dpc_errf(e, DPC_EUSAGE, "bad benchmark arguments");
    if ((s = CK(cuCtxSetCurrent(r->dev->ctx))) != DPC_OK)
        return s;
    if (r->planned_N != N && (s = plan(cb, r, N, e)) != DPC_OK)
        return s;
    if ((s = prepare_device(cb, r, e)) != DPC_OK)
        return s;
    CUgraphExec exec = NULL;
    if (graph) {
        if ((s = CK(cuStreamBeginCapture(r->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))) != DPC_OK)
            return s;
        s = enqueue_steps(cb, r, N, true, e);
        CUgraph gr = NULL;
        CUresult er = cu->cuStreamEndCapture(r->stream, &gr);
        if (s == DPC_OK)
            s = dpc_cub_check(cb, er, "cuStreamEndCapture", e);
        if (s == DPC_OK)
            s = CK(cuGraphInstantiate(&exec, gr, 0));
        if (gr)
            cu->cuGraphDestroy(gr);
        if (s != DPC_OK)
            return s;
    }
    double *ms = dpc_calloc((size_t)iters, sizeof(double));
    CUevent ev[2] = {NULL, NULL};
    s = ms ? DPC_OK : dpc_errf(e, DPC_ENOMEM, "out of memory");
    if (s == DPC_OK)
        s = CK(cuEventCreate(&ev[0], CU_EVENT_DEFAULT));
    if (s == DPC_OK)
        s = CK(cuEventCreate(&ev[1], CU_EVENT_DEFAULT));
    double host = 0;
    long kl = r->stats.kernel_launches, gm = r->stats.gemms, dn = r->stats.cudnn_calls;
    for (int it = 0; s == DPC_OK && it < warm + iters; it++) {
        if ((s = CK(cuEventRecord(ev[0], r->stream))) != DPC_OK)
            break;
        double t0 = 1e6 * dpc_now_s();
        s = graph ? CK(cuGraphLaunch(exec, r->stream)) : enqueue_steps(cb, r, N, false, e);
        double t1 = 1e6 * dpc_now_s();
        if (s == DPC_OK)
            s = CK(cuEventRecord(ev[1], r->stream));
        if (s == DPC_OK)
            s = CK(cuEventSynchronize(ev[1]));
        float t = 0;
        if (s == DPC_OK)
            s = CK(cuEventElapsedTime(&t, ev[0], ev[1]));
        if (it == warm) {
            out->kernels_per_forward = (int)(r->stats.kernel_launches - kl);
            out->gemms_per_forward = (int)(r->stats.gemms - gm);
            out->cudnn_per_forward = (int)(r->stats.cudnn_calls - dn);
        }
        kl = r->stats.kernel_launches;
        gm = r->stats.gemms;
        dn = r->stats.cudnn_calls;
        if (it >= warm) {
            ms[it - warm] = t;
            host += t1 - t0;
        }
    }
    if (s == DPC_OK) {
        qsort(ms, (size_t)iters, sizeof(double), cmp_double);
        out->ms_median = ms[iters / 2];
        out->ms_p10 = ms[iters / 10];
        out->ms_p90 = ms[iters - 1 - iters / 10];
        out->host_us = host / iters;
        out->iters = iters;
        if (graph) { /* a replay launches nothing itself: count the steps */
            for (int i = cb->plan.nprepare; i < cb->plan.nsteps; i++) {
                const dpc_cu_step *st = &cb->plan.steps[i];
                if (st->kind == DPC_CU_CONV) {
                    int how = conv_how(r, i, N);
                    out->cudnn_per_forward += how != CONV_FALLBACK;
                    i += conv_skip(st, how);
                } else
                    st->kind == DPC_CU_LAUNCH ? out->kernels_per_forward++ : out->gemms_per_forward++;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cu->cuEventDestroy(ev[i]);
    if (exec)
        cu->cuGraphExecDestroy(exec);
    free(ms);
    return s;
}

bool dpc_cuda_replica_stats(const dpc_backend *be, const dpc_replica *r, dpc_cuda_stats *out) {
    if (!be || !r || strcmp(be->name, "cuda") != 0)
        return false;
    *out = r->stats;
    return true;
}

