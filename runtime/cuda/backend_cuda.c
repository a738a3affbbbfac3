/* backend_cuda.c - the CUDA backend: runs the CUDA dialect of the kernels
 * (emit_cuda.c) on NVIDIA GPUs through the dlopen'ed driver.
 *
 *   prepare      renders the source and the launch plan, loads the driver
 *                (so a machine without one fails here, clearly)
 *   replica_new  on the first replica of a device: its primary context,
 *                NVRTC for the device's architecture (a CUBIN; PTX for the
 *                newest architecture NVRTC knows when it does not know the
 *                device's), through the kernel cache; the module and every
 *                function; the weights, copied once from the host to the
 *                first device; to the others by peer copy where NCCL
 *                cannot be loaded, else they wait for replicas_ready.
 *                Per replica: a stream, a cuBLASLt handle, a small control
 *                block (error flag, scalars), pinned staging memory.
 *   replicas_ready  (every replica of the device list exists) one NCCL
 *                broadcast from the first device to every device waiting
 *                for the weights (nccl_lib.c); a launch on a waiting
 *                device tries it too.
 *   launch       plans memory once per batch size (one cuMemAlloc arena,
 *                liveness reuse by memplan.c, inputs and outputs included),
 *                stages inputs in pinned memory and enqueues: error flag
 *                reset, scalars and inputs to the device, every step of the
 *                plan, outputs and error flag back. The first forward at a
 *                batch size runs step by step; the second captures the
 *                same sequence into a CUDA graph, replayed from then on.
 *   sync         waits for the stream, reports the error flag (an embedding
 *                index out of range, with its .dp line), copies outputs to
 *                the caller's tensors.
 * Every driver, NVRTC and cuBLASLt call is checked and named in the error.
 * A sticky error (illegal address...) poisons the CUDA context: the backend
 * then refuses all further work with the first such message. */
#include "backend_cuda_impl.h"
#include "memplan.h"
#include "nvrtc_compile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- compiling */

static const char *const NVRTC_OPTS[] = {"-lineinfo"};

dpc_status dpc_cuda_compile_image(const char *src, const char *model_name, const char *arch, dpc_buf *image,
                                  bool *hit, dpc_err *e) {
    char unit[256];
    snprintf(unit, sizeof unit, "%s.cu", model_name ? model_name : "model");
    return dpc_nvrtc_compile_cached(src, unit, arch, NVRTC_OPTS, 1, image, NULL, hit, e);
}

/* The NVRTC image for arch, compiled once per backend; *hit says whether
 * it came from the kernel cache. */
static dpc_status image_for(cuda_backend *cb, const char *arch, const dpc_buf **out, bool *hit, dpc_err *e) {
    for (int i = 0; i < cb->nimages; i++)
        if (strcmp(cb->images[i].arch, arch) == 0) {
            *out = &cb->images[i].image;
            *hit = cb->images[i].hit;
            return DPC_OK;
        }
    if (cb->nimages == MAX_IMAGES)
        return dpc_errf(e, DPC_EINTERNAL, "too many GPU architectures in one device list");
    dpc_buf img;
    dpc_buf_init(&img);
    *hit = false;
    dpc_status s = dpc_cuda_compile_image(cb->src, cb->model_name, arch, &img, hit, e);
    if (s != DPC_OK) {
        dpc_buf_free(&img);
        return s;
    }
    snprintf(cb->images[cb->nimages].arch, sizeof cb->images[0].arch, "%s", arch);
    cb->images[cb->nimages].image = img;
    cb->images[cb->nimages].hit = *hit;
    *out = &cb->images[cb->nimages++].image;
    return DPC_OK;
}

/* The compute capability a "compute_YY" PTX target needs (YY as a number),
 * or -1 for a CUBIN or a PTX of a family or architecture-specific target
 * ("compute_90a"), which only its own GPU runs. */
static int ptx_cc(const char *arch) {
    if (strncmp(arch, "compute_", 8) != 0)
        return -1;
    char *end;
    long v = strtol(arch + 8, &end, 10);
    return *end || end == arch + 8 || v <= 0 || v > 10000 ? -1 : (int)v;
}

/* The stored images d may take, best first: the CUBIN for exactly its
 * architecture, then the PTX for the newest compute capability at most its
 * own. None unless the images were compiled from this run's source. */
static int stored_candidates(const cuda_backend *cb, const cu_dev *d, const dpc_cu_image *out[2]) {
    const dpc_cu_images *st = cb->stored;
    if (!st || strcmp(st->sha256, cb->src_sha256) != 0)
        return 0;
    int n = 0, cc = d->info.cc_major * 10 + d->info.cc_minor, best = -1;
    const dpc_cu_image *ptx = NULL;
    for (int i = 0; i < st->n; i++) {
        int need = ptx_cc(st->img[i].arch);
        if (strcmp(st->img[i].arch, d->info.arch) == 0)
            out[n++] = &st->img[i];
        else if (need > best && need <= cc) {
            best = need;
            ptx = &st->img[i];
        }
    }
    if (ptx)
        out[n++] = ptx;
    return n;
}

/* d->how, for `dpc run -v`: a report line, which may be cut short. */
static void set_how(cu_dev *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_how(cu_dev *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->how, sizeof d->how, fmt, ap);
    va_end(ap);
}

/* Loads a stored image (stored_candidates) into d. False when there is
 * none or the driver refuses each (why says so): NVRTC then compiles as
 * without an artifact. A sticky error is an error. */
static bool load_stored(cuda_backend *cb, cu_dev *d, char *why, size_t nwhy, dpc_status *s, dpc_err *e) {
    const dpc_cu_image *c[2];
    int n = stored_candidates(cb, d, c);
    *s = DPC_OK;
    for (int i = 0; i < n; i++) {
        CUresult r = dpc_cuda()->cuModuleLoadDataEx(&d->mod, c[i]->data, 0, NULL, NULL);
        bool ptx = dpc_nvrtc_arch_is_ptx(c[i]->arch);
        if (r == CUDA_SUCCESS) {
            snprintf(d->target, sizeof d->target, "%s", c[i]->arch);
            set_how(d, "%s %s from %s%s", ptx ? "PTX" : "CUBIN", c[i]->arch, cb->stored->from,
                    ptx ? ", JIT by driver" : "");
            return true;
        }
        d->mod = NULL;
        if (dpc_cuda_is_sticky(r)) {
            *s = dpc_cub_check(cb, r, "cuModuleLoadDataEx", e);
            return false;
        }
        snprintf(why, nwhy, " (%s's %s refused: %s)", cb->stored->from, c[i]->arch, dpc_cuda_error_name(r));
    }
    return false;
}

/* The image for dev, and loads it: a stored one when the model came from
 * an artifact that holds one for this GPU and this source (load_stored);
 * else NVRTC, through the kernel cache: a CUBIN for the device's own
 * architecture; when NVRTC does not know that architecture, or the driver
 * refuses the CUBIN, PTX for the newest architecture NVRTC knows that the
 * device can run, which the driver compiles. */
static dpc_status load_module(cuda_backend *cb, cu_dev *d, dpc_err *e) {
    char why[320] = "";
    dpc_status s;
    if (load_stored(cb, d, why, sizeof why, &s, e) || s != DPC_OK)
        return s;
    const dpc_buf *img = NULL;
    bool hit = false;
    snprintf(d->target, sizeof d->target, "%s", d->info.arch);
    s = image_for(cb, d->target, &img, &hit, e);
    bool fallback = s != DPC_OK && strstr(e->msg, "NVRTC_ERROR_INVALID_OPTION") != NULL;
    if (s == DPC_OK) {
        CUresult r = dpc_cuda()->cuModuleLoadDataEx(&d->mod, img->data, 0, NULL, NULL);
        if (r == CUDA_SUCCESS) {
            set_how(d, "NVRTC %s%s%s", d->target, hit ? " (kernel cache)" : "", why);
            return DPC_OK;
        }
        s = dpc_cub_check(cb, r, "cuModuleLoadDataEx", e);
        fallback = r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE ||
                   r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    }
    if (!fallback)
        return s;
    int cc = d->info.cc_major * 10 + d->info.cc_minor, ptx = dpc_nvrtc_newest_arch(cc);
    if (ptx == 0) {
        dpc_err_prefix(e, "no NVRTC target for %s (compute capability %d.%d): ", d->info.name, d->info.cc_major,
                       d->info.cc_minor);
        return s;
    }
    snprintf(d->target, sizeof d->target, "compute_%d", ptx);
    if ((s = image_for(cb, d->target, &img, &hit, e)) != DPC_OK)
        return s;
    s = CK(cuModuleLoadDataEx(&d->mod, img->data, 0, NULL, NULL));
    if (s != DPC_OK)
        dpc_err_prefix(e, "loading PTX for %s on %s: ", d->target, d->info.name);
    else
        set_how(d, "NVRTC PTX %s%s, JIT by driver%s", d->target, hit ? " (kernel cache)" : "",
                 why);
    return s;
}

static void launch_name(const dpc_cu_launch *l, char *out, size_t n) { snprintf(out, n, "%s%s", l->fn, l->suffix); }

/* ---------------------------------------------------------- devices */

/* True when d's weights are to come by NCCL broadcast: another GPU holds
 * them and NCCL loads. A collective over every GPU of the device list needs
 * them all to exist, so the copy waits for dpc_cub_replicas_ready (or the
 * first launch on d). Without NCCL the reason is kept for `dpc run -v`. */
static bool defer_to_nccl(cuda_backend *cb, cu_dev *d) {
    bool held = false;
    for (int i = 0; i < cb->ndevs; i++)
        held |= cb->devs[i] != d && cb->devs[i]->weights && !atomic_load(&cb->devs[i]->weights_pending);
    if (!held)
        return false;
    dpc_err why;
    if (dpc_nccl_load(&why) != DPC_OK) {
        snprintf(cb->winfo.how, sizeof cb->winfo.how, "peer copy (%.960s)", why.msg);
        return false;
    }
    atomic_store(&d->weights_pending, true);
    return true;
}

static dpc_status upload_weights(cuda_backend *cb, cu_dev *d, dpc_err *e) {
    const dpc_unit *u = cb->u;
    if (cb->weight_bytes == 0)
        return DPC_OK;
    dpc_status s = CK(cuMemAlloc(&d->weights, cb->weight_bytes));
    atomic_store(&d->prepared, false); /* new weights: the prepare steps run again */
    if (s != DPC_OK) {
        dpc_err_prefix(e, "weights of %zu bytes on cuda:%d: ", cb->weight_bytes, d->ordinal);
        return s;
    }
    /* another device already holds them: an NCCL broadcast once every
     * replica exists (broadcast_weights), else a peer copy (NVLink where
     * present) */
    if (defer_to_nccl(cb, d))
        return DPC_OK;
    for (int i = 0; i < cb->ndevs; i++) {
        cu_dev *src = cb->devs[i];
        if (src == d || !src->weights || atomic_load(&src->weights_pending))
            continue;
        s = CK(cuMemcpyPeerAsync(d->weights, d->ctx, src->weights, src->ctx, cb->weight_bytes, NULL));
        if (s == DPC_OK)
            s = CK(cuCtxSynchronize());
        if (s != DPC_OK)
            dpc_err_prefix(e, "copying the weights from cuda:%d to cuda:%d: ", src->ordinal, d->ordinal);
        cb->winfo.peer_copies += s == DPC_OK;
        cb->winfo.gpus += s == DPC_OK;
        return s;
    }
    cb->winfo.gpus = 1; /* the first GPU: from the host */
    for (int i = 0; s == DPC_OK && i < dpc_unit_nbufs(u); i++) {
        const kbuf *b = dpc_unit_buf(u, i);
        if (b->kind != BUF_PARAM || b->elems <= 0)
            continue;
        const float *p = cb->params ? cb->params[b->index] : NULL;
        if (!p)
            return dpc_errf(e, DPC_EINTERNAL, "parameter %s is not bound to weights", b->what ? b->what : "?");
        if (cb->prec == KP_F32 || b->esize == 8) { /* (an int64 buffer: never narrowed) */
            s = CK(cuMemcpyHtoD(d->weights + cb->param_off[i], p, (size_t)b->elems * (size_t)b->esize));
            continue;
        }
        /* 16-bit storage: narrowed on the host, once per model and device */
        uint16_t *h = malloc((size_t)b->elems * 2);
        if (!h)
            return dpc_errf(e, DPC_ENOMEM, "out of memory narrowing parameter %s", b->what ? b->what : "?");
        dpc_f32_narrow(p, h, (size_t)b->elems, dpc_cub_half_dtype(cb->prec));
        s = CK(cuMemcpyHtoD(d->weights + cb->param_off[i], h, (size_t)b->elems * 2));
        free(h);
    }
    return s;
}

static cu_dev *find_dev(cuda_backend *cb, int ordinal) {
    for (int i = 0; i < cb->ndevs; i++)
        if (cb->devs[i]->ordinal == ordinal)
            return cb->devs[i];
    return NULL;
}

static void dev_free(cuda_backend *cb, cu_dev *d) {
    if (!d)
        return;
    const dpc_cuda_api *cu = dpc_cuda();
    if (cu && d->ctx && cu->cuCtxSetCurrent(d->ctx) == CUDA_SUCCESS) {
        if (d->mod)
            cu->cuModuleUnload(d->mod);
        if (d->weights)
            cu->cuMemFree(d->weights);
    }
    free(d->fn);
    free(d);
}

static dpc_status dev_get(cuda_backend *cb, int ordinal, cu_dev **out, dpc_err *e) {
    cu_dev *d = find_dev(cb, ordinal);
    if (d) {
        *out = d;
        return dpc_cuda_context(ordinal, &d->ctx, e);
    }
    if (cb->ndevs == DPC_MAX_DEVICES)
        return dpc_errf(e, DPC_EUSAGE, "too many CUDA devices");
    d = dpc_calloc(1, sizeof *d);
    if (!d)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    d->ordinal = ordinal;
    d->fn = dpc_calloc((size_t)cb->plan.nsteps + 1, sizeof(CUfunction));
    dpc_status s = d->fn ? DPC_OK : dpc_errf(e, DPC_ENOMEM, "out of memory");
    if (s == DPC_OK)
        s = dpc_cuda_device_info(ordinal, &d->info, e);
    if (s == DPC_OK)
        s = dpc_cuda_context(ordinal, &d->ctx, e);
    if (s == DPC_OK)
        s = load_module(cb, d, e);
    for (int i = 0; s == DPC_OK && i < cb->plan.nsteps; i++) {
        const dpc_cu_step *st = &cb->plan.steps[i];
        if (st->kind != DPC_CU_LAUNCH)
            continue;
        char name[512];
        launch_name(&st->u.launch, name, sizeof name);
        for (int j = 0; j < i && !d->fn[i]; j++) /* im2col: one function, a launch per group */
            if (cb->plan.steps[j].kind == DPC_CU_LAUNCH && d->fn[j]) {
                char other[512];
                launch_name(&cb->plan.steps[j].u.launch, other, sizeof other);
                if (strcmp(name, other) == 0)
                    d->fn[i] = d->fn[j];
            }
        if (!d->fn[i] && (s = CK(cuModuleGetFunction(&d->fn[i], d->mod, name))) != DPC_OK)
            dpc_err_prefix(e, "kernel %s: ", name);
    }
    if (s == DPC_OK)
        s = upload_weights(cb, d, e);
    if (s != DPC_OK) {
        dpc_err_prefix(e, "cuda:%d: ", ordinal);
        dev_free(cb, d);
        return s;
    }
    cb->devs[cb->ndevs++] = d;
    *out = d;
    return DPC_OK;
}

/* ---------------------------------------------------------- weights across GPUs */

/* One NCCL group from a GPU holding the weights (the first of the device
 * list, on the first call) to every GPU waiting for them. Called with
 * cb->lock held. After a failure the GPUs keep waiting, so no replica runs
 * without its weights, and the next launch on one of them tries again. */
static dpc_status broadcast_weights(cuda_backend *cb, dpc_err *e) {
    cu_dev *grp[DPC_MAX_DEVICES] = {NULL};
    int n = 1;
    for (int i = 0; i < cb->ndevs; i++) {
        cu_dev *d = cb->devs[i];
        if (atomic_load(&d->weights_pending))
            grp[n++] = d;
        else if (d->weights && !grp[0])
            grp[0] = d;
    }
    if (n == 1)
        return DPC_OK;
    if (!grp[0])
        return dpc_errf(e, DPC_EINTERNAL, "GPUs wait for the weights, but no GPU holds them");
    int ord[DPC_MAX_DEVICES] = {0}; /* all n set below; -O1 cannot see that n > 0 */
    CUcontext ctx[DPC_MAX_DEVICES] = {0};
    CUdeviceptr buf[DPC_MAX_DEVICES] = {0};
    char to[256] = "";
    for (int i = 0; i < n; i++) {
        ord[i] = grp[i]->ordinal;
        ctx[i] = grp[i]->ctx;
        buf[i] = grp[i]->weights;
        if (i > 0)
            snprintf(to + strlen(to), sizeof to - strlen(to), "%scuda:%d", i > 1 ? "," : "", ord[i]);
    }
    dpc_status s = dpc_nccl_broadcast(n, ord, ctx, buf, cb->weight_bytes, e);
    if (s != DPC_OK) {
        dpc_err_prefix(e, "broadcasting the weights from cuda:%d to %s by NCCL: ", ord[0], to);
        return s;
    }
    for (int i = 1; i < n; i++)
        atomic_store(&grp[i]->weights_pending, false);
    cb->winfo.nccl_groups++;
    cb->winfo.gpus += n - 1;
    snprintf(cb->winfo.how, sizeof cb->winfo.how, "NCCL broadcast to %d GPUs", n);
    return DPC_OK;
}

/* backend.h's replicas_ready: every replica of the device list exists, so
 * the GPUs that wait for weights get them in one collective. */
dpc_status dpc_cub_replicas_ready(dpc_backend *be, dpc_err *e) {
    cuda_backend *cb = (cuda_backend *)be;
    dpc_status s;
    if (dpc_cub_is_dead(cb, e, &s))
        return s;
    pthread_mutex_lock(&cb->lock);
    s = broadcast_weights(cb, e);
    pthread_mutex_unlock(&cb->lock);
    return s;
}

/* ---------------------------------------------------------- backend */

static dpc_status cuda_prepare(dpc_backend *be, const dpc_unit *u, dpc_err *e) {
    cuda_backend *cb = (cuda_backend *)be;
    if (cb->src)
        return DPC_OK;
    dpc_status s = dpc_cuda_load(e);
    if (s != DPC_OK)
        return s;
    s = dpc_unit_cuda_program(u, cb->prec, &cb->src, &cb->plan, e);
    if (s != DPC_OK)
        return s;
    cb->model_name = dpc_unit_signature(u)->model_name;
    if (cb->stored)
        dpc_sha256_hex(cb->src, strlen(cb->src), cb->src_sha256);
    /* a GEMM of a conv's fallback needs cuBLASLt only where cuDNN does not
     * take that conv: its handle is then made when the memory is planned */
    for (int i = 0, conv_end = 0; i < cb->plan.nsteps; i++) {
        const dpc_cu_step *st = &cb->plan.steps[i];
        bool conv_gemm = st->kind == DPC_CU_GEMM && i < conv_end;
        cb->has_gemm |= st->kind == DPC_CU_GEMM && !conv_gemm;
        cb->has_conv_gemm |= conv_gemm;
        if (st->kind == DPC_CU_CONV && i >= cb->plan.nprepare) {
            cb->has_conv = true;
            conv_end = i + 1 + st->u.conv.nfallback;
        }
    }
    cb->param_off = dpc_calloc((size_t)dpc_unit_nbufs(u) + 1, sizeof(size_t));
    if (!cb->param_off)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    size_t off = 0;
    /* the prepare kernels' outputs (BUF_CONST) follow the parameters in each
     * device's weights: they live as long as the weights, computed there once
     * (backend_cuda_run.c, prepare_device) */
    for (int i = 0; i < dpc_unit_nbufs(u); i++) {
        const kbuf *b = dpc_unit_buf(u, i);
        if (b->kind != BUF_PARAM && b->kind != BUF_CONST)
            continue;
        cb->param_off[i] = off;
        off += dpc_memplan_bytes(b, 1, cb->prec);
    }
    cb->weight_bytes = off;
    return DPC_OK;
}

static void replica_release(cuda_backend *cb, dpc_replica *r) {
    const dpc_cuda_api *cu = dpc_cuda();
    if (cu && r->dev && r->dev->ctx && cu->cuCtxSetCurrent(r->dev->ctx) == CUDA_SUCCESS) {
        if (r->stream)
            cu->cuStreamSynchronize(r->stream);
        if (r->graph)
            cu->cuGraphExecDestroy(r->graph);
        dpc_lt_destroy(r->lt);
        dpc_dnn_destroy(r->dnn);
        if (r->dnn_ws)
            cu->cuMemFree(r->dnn_ws);
        if (r->arena)
            cu->cuMemFree(r->arena);
        if (r->ctl)
            cu->cuMemFree(r->ctl);
        if (r->host)
            cu->cuMemFreeHost(r->host);
        if (r->stream)
            cu->cuStreamDestroy(r->stream);
    }
    free(r->offset);
    free(r->ptr);
    free(r->host_off);
    free(r->conv_how);
    free(r);
    (void)cb;
}

static dpc_status cuda_replica_new(dpc_backend *be, int ordinal, dpc_replica **out, dpc_err *e) {
    cuda_backend *cb = (cuda_backend *)be;
    *out = NULL;
    dpc_status s;
    if (dpc_cub_is_dead(cb, e, &s))
        return s;
    if (!cb->src)
        return dpc_errf(e, DPC_EINTERNAL, "the CUDA backend was not prepared");
    pthread_mutex_lock(&cb->lock);
    cu_dev *d = NULL;
    s = dev_get(cb, ordinal, &d, e);
    pthread_mutex_unlock(&cb->lock);
    if (s != DPC_OK)
        return s;
    dpc_replica *r = dpc_calloc(1, sizeof *r);
    int nb = dpc_unit_nbufs(cb->u);
    if (r) {
        r->offset = dpc_calloc((size_t)nb + 1, sizeof(size_t));
        r->ptr = dpc_calloc((size_t)nb + 1, sizeof(CUdeviceptr));
        r->host_off = dpc_calloc((size_t)nb + 1, sizeof(size_t));
    }
    if (!r || !r->offset || !r->ptr || !r->host_off) {
        if (r) {
            free(r->offset);
            free(r->ptr);
            free(r->host_off);
        }
        free(r);
        return dpc_errf(e, DPC_ENOMEM, "out of memory creating a replica");
    }
    r->cb = cb;
    r->dev = d;
    r->planned_N = -1;
    s = CK(cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING));
    if (s == DPC_OK)
        s = CK(cuMemAlloc(&r->ctl, CTL_BYTES));
    if (s == DPC_OK && cb->has_gemm)
        s = dpc_lt_create(&r->lt, (void *)r->stream, e);
    if (s != DPC_OK) {
        dpc_err_prefix(e, "cuda:%d: ", ordinal);
        replica_release(cb, r);
        return s;
    }
    *out = r;
    return DPC_OK;
}

static void cuda_replica_free(dpc_backend *be, dpc_replica *r) {
    if (r)
        replica_release((cuda_backend *)be, r);
}

static void cuda_destroy(dpc_backend *be) {
    cuda_backend *cb = (cuda_backend *)be;
    for (int i = 0; i < cb->ndevs; i++)
        dev_free(cb, cb->devs[i]);
    for (int i = 0; i < cb->nimages; i++)
        dpc_buf_free(&cb->images[i].image);
    free(cb->src);
    free(cb->param_off);
    dpc_cu_plan_free(&cb->plan);
    pthread_mutex_destroy(&cb->lock);
    free(cb);
}

bool dpc_cuda_weights(const dpc_backend *be, dpc_cuda_weights_info *out) {
    if (!be || strcmp(be->name, "cuda") != 0)
        return false;
    cuda_backend *cb = (cuda_backend *)(uintptr_t)be;
    pthread_mutex_lock(&cb->lock);
    *out = cb->winfo;
    pthread_mutex_unlock(&cb->lock);
    return true;
}

void dpc_backend_cuda_offer_images(dpc_backend *be, const dpc_cu_images *im) {
    if (!be || strcmp(be->name, "cuda") != 0)
        return;
    cuda_backend *cb = (cuda_backend *)be;
    cb->stored = cb->use_stored && im && im->n > 0 ? im : NULL;
}

void dpc_cu_images_free(dpc_cu_images *im) {
    if (!im)
        return;
    for (int i = 0; i < im->n; i++)
        free(im->img[i].data);
    free(im->img);
    free(im);
}

bool dpc_cuda_kernels(const dpc_backend *be, char *out, size_t n) {
    if (!be || strcmp(be->name, "cuda") != 0 || n == 0)
        return false;
    cuda_backend *cb = (cuda_backend *)(uintptr_t)be;
    pthread_mutex_lock(&cb->lock);
    bool same = true;
    int loaded = 0;
    for (int i = 0; i < cb->ndevs; i++) {
        loaded += cb->devs[i]->mod != NULL;
        same &= strcmp(cb->devs[i]->how, cb->devs[0]->how) == 0;
    }
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; loaded && i < (same ? 1 : cb->ndevs); i++) {
        int w = same ? snprintf(out + len, n - len, "%s", cb->devs[i]->how)
                     : snprintf(out + len, n - len, "%scuda:%d %s", i ? "; " : "", cb->devs[i]->ordinal,
                                cb->devs[i]->how);
        len += w > 0 ? (size_t)w : 0;
        if (len >= n)
            break;
    }
    pthread_mutex_unlock(&cb->lock);
    return loaded > 0;
}

dpc_status dpc_backend_cuda_new(const dpc_unit *u, float *const *params, kprec prec, dpc_backend **out, dpc_err *e) {
    *out = NULL;
    bool tf32, graphs, sync_each, use_stored;
    dpc_status s = dpc_env_flag("DPC_CUDA_TF32", false, &tf32, e);
    if (s == DPC_OK)
        s = dpc_env_flag("DPC_CUDA_GRAPHS", true, &graphs, e);
    if (s == DPC_OK)
        s = dpc_env_flag("DPC_CUDA_SYNC", false, &sync_each, e);
    /* A stored CUBIN/PTX is machine code from the artifact's author, which
     * its checksum cannot vouch for: used only when the user says so. */
    if (s == DPC_OK)
        s = dpc_env_flag("DPC_CUDA_DPA_IMAGES", false, &use_stored, e);
    int cudnn = 1;
    if (s == DPC_OK)
        s = dpc_dnn_mode(&cudnn, e);
    if (s != DPC_OK)
        return s;
    cuda_backend *cb = dpc_calloc(1, sizeof *cb);
    if (!cb)
        return dpc_errf(e, DPC_ENOMEM, "out of memory");
    cb->be = (dpc_backend){"cuda",           cuda_prepare, cuda_replica_new, dpc_cub_run, cuda_replica_free,
                           cuda_destroy,     dpc_cub_launch,  dpc_cub_sync};
    cb->be.replicas_ready = dpc_cub_replicas_ready;
    cb->u = u;
    cb->params = params;
    cb->prec = prec;
    cb->tf32 = tf32;
    cb->graphs = graphs;
    cb->sync_each = sync_each;
    cb->use_stored = use_stored;
    cb->cudnn = cudnn;
    pthread_mutex_init(&cb->lock, NULL);
    *out = &cb->be;
    return DPC_OK;
}

