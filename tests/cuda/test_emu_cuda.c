/* test_emu_cuda.c - the generated CUDA kernels and launch plan compute the
 * right values, checked without a GPU.
 *
 *     test_emu_cuda [--skip-frontend-errors] MODEL.dp...
 *
 * For each model: the CUDA source of dpc_cuda_program is compiled as C++
 * for the CPU with cuda_emu.h (a fiber per thread of a block, barriers for warp
 * shuffles and __syncthreads) into a shared object; the launch plan is then
 * run exactly as backend_cuda.c runs it (dpc_cu_blocks, dpc_cu_gemm_expand,
 * the memory plan of memplan.c with inputs and outputs in the arena), with
 * a plain-C GEMM in place of cuBLASLt (same row-major contract as
 * cublaslt.h). The outputs must match the CPU backend within 1e-5 relative
 * L2 at batch 1, 3 and 5; the arena starts as NaN so that a read of
 * something never written shows; an embedding index out of range must
 * raise the error flag with the kernel's number. Needs a C++20 compiler
 * ($CXX, else c++); exits 77 without one.
 *
 * With --prec bf16|f16 the 16-bit storage dialect runs the same way:
 * weights and inputs narrowed as backend_cuda.c narrows them, the C GEMM
 * reading and writing 16-bit operands with f32 accumulation as cuBLASLt
 * does, outputs widened; the bound against the f32 CPU backend is then
 * that of the format (see BOUND). */
#define _GNU_SOURCE
#include "backend_cuda.h"
#include "cudnn_lib.h"
#include "memplan.h"
#include "frontend.h" /* m->front, the graph IR */
#include "kernel.h"   /* the kernel graph */
#include "model.h"
#include "safetensors.h"
#include "../check.h"
#include "model_args.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#ifndef EMU_HEADER
#error "EMU_HEADER (the path of cuda_emu.h) must be defined"
#endif


static char tmpdir[64];
static const char *cxx;
static kprec prec = KP_F32; /* --prec */

/* --cudnn all|none|some: the plan's conv steps run as backend_cuda.c runs
 * them with DPC_CUDNN (cudnn_lib.c's dpc_dnn_choose and dpc_dnn_conv_run,
 * through the cuDNN of DPC_CUDNN_LIBRARY: tests/cuda/fake_cudnn.c computes
 * on the emulator's memory), and the convs cuDNN took must be all, none or
 * some (at least one each way, over all models) of them; "all" means
 * those with the same padding before and after. */
static const char *cudnn_expect;
static dpc_dnn *dnn;
static int dnn_mode;
static long conv_steps, conv_symmetric, conv_dnn, conv_fused; /* over every forward */
#define EMU_STREAM ((void *)(uintptr_t)0x5eed0)

/* Relative L2 error allowed against the f32 CPU backend. 16-bit storage
 * rounds every stored value (relative 2^-9 for bf16, 2^-12 for f16) and
 * the roundings of a deep model add up; f32 differs only in the order of
 * summation. */
static double bound(void) { return prec == KP_BF16 ? 2e-2 : prec == KP_F16 ? 3e-3 : 1e-5; }

/* Element i of a float buffer stored as prec, and a store into it. */
static float ldf(const void *p, int64_t i) {
    if (prec == KP_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return prec == KP_BF16 ? dpc_bf16_to_f32(h) : dpc_f16_to_f32(h);
}
static void stf(void *p, int64_t i, float v) {
    if (prec == KP_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = prec == KP_BF16 ? dpc_f32_to_bf16(v) : dpc_f32_to_f16(v);
}

/* Layout of dpc_kctx and dpc_kerr in the generated PRELUDE. */
typedef struct kerr {
    int kernel, pad;
    long long index, limit;
} kerr;
typedef struct kctx {
    const float *scalars;
    kerr *err;
    long long N, g;
} kctx;

typedef void (*emu_fn)(void **args, const void *ctx, unsigned grid);

/* ---- the emulated module ---- */

static void *build_module(const char *path, const char *src, const dpc_cu_plan *plan) {
    dpc_buf b;
    dpc_buf_init(&b);
    dpc_buf_printf(&b, "#include \"%s\"\n", EMU_HEADER);
    /* <cstdint> has its own int64_t */
    const char *td = strstr(src, "typedef long long int64_t;");
    if (td) {
        dpc_buf_put(&b, src, (size_t)(td - src));
        dpc_buf_puts(&b, td + strlen("typedef long long int64_t;"));
    } else
        dpc_buf_puts(&b, src);
    dpc_buf_puts(&b, "\n/* test_emu_cuda: one entry point per kernel */\n");
    for (int i = 0; i < plan->nsteps; i++) {
        const dpc_cu_step *s = &plan->steps[i];
        if (s->kind != DPC_CU_LAUNCH)
            continue;
        char name[512];
        snprintf(name, sizeof name, "%s%s", s->u.launch.fn, s->u.launch.suffix);
        bool dup = false;
        for (int j = 0; j < i; j++)
            if (plan->steps[j].kind == DPC_CU_LAUNCH) {
                char other[512];
                snprintf(other, sizeof other, "%s%s", plan->steps[j].u.launch.fn, plan->steps[j].u.launch.suffix);
                dup |= strcmp(name, other) == 0;
            }
        if (dup)
            continue;
        dpc_buf_printf(&b,
                       "extern \"C\" void emu_%s(void **a, const void *ctx, unsigned grid) {\n"
                       "    dpc_kctx c;\n    memcpy(&c, ctx, sizeof c);\n"
                       "    emu_launch(grid, %d, [&] { %s(",
                       name, DPC_CU_BLOCK, name);
        for (int j = 0; j < s->u.launch.nbufs; j++)
            dpc_buf_printf(&b, "emu_ptr{a[%d]}, ", j);
        dpc_buf_puts(&b, "c); });\n}\n");
    }
    char cpp[128], so[128], log[128];
    snprintf(cpp, sizeof cpp, "%s/k.cpp", tmpdir);
    snprintf(so, sizeof so, "%s/k%d.so", tmpdir, rand());
    snprintf(log, sizeof log, "%s/cxx.log", tmpdir);
    FILE *f = fopen(cpp, "w");
    if (!f || !b.data) {
        CHECK(false, "%s: cannot write %s", path, cpp);
        dpc_buf_free(&b);
        return NULL;
    }
    fputs(b.data, f);
    fclose(f);
    dpc_buf_free(&b);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -std=c++20 -O1 -g0 -w -shared -fPIC -pthread -o %s %s > %s 2>&1", cxx, so, cpp, log);
    int rc = system(cmd);
    if (rc != 0) {
        char *msg = NULL;
        size_t len = 0;
        dpc_err e;
        dpc_read_file(log, 1 << 20, &msg, &len, &e);
        CHECK(false, "%s: the emulated kernels do not compile as C++:\n%.3000s", path, msg ? msg : "");
        free(msg);
        return NULL;
    }
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "%s: dlopen: %s", path, dlerror());
    unlink(so);
    unlink(cpp);
    unlink(log);
    return h;
}

/* ---- GEMM as cublaslt.h defines it, in double ---- */

typedef struct gemm_args {
    const dpc_cu_gemm *g;
    char **ptr;
} gemm_args;

static dpc_status cpu_gemm(void *arg, const dpc_cu_gemm_call *c) {
    gemm_args *x = arg;
    const dpc_cu_gemm *g = x->g;
    const void *A = x->ptr[g->a], *B = x->ptr[g->b], *bias = g->bias >= 0 ? x->ptr[g->bias] : NULL;
    void *C = x->ptr[g->c];
    for (int64_t b = 0; b < (c->batch > 1 ? c->batch : 1); b++) {
        int64_t a0 = c->offA + b * c->strideA, b0 = c->offB + b * c->strideB, c0 = c->offC + b * c->strideC;
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t n = 0; n < c->N; n++) {
                double acc = 0;
                for (int64_t k = 0; k < c->K; k++)
                    acc += (double)ldf(A, a0 + m * c->lda + k) *
                           ldf(B, b0 + (g->transB ? n * c->ldb + k : k * c->ldb + n));
                if (g->epilogue >= 1)
                    acc += ldf(bias, n);
                if (g->epilogue == 2 && acc < 0)
                    acc = 0;
                if (g->epilogue == 3)
                    acc = 0.5 * acc * (1 + tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)));
                stf(C, c0 + m * c->ldc + n, (float)acc);
            }
    }
    return DPC_OK;
}

/* ---- inputs ---- */

/* The model file's `#@ nonfinite` and `#@ env NAME=VALUE` header lines
 * (tests/ops/gen_cases.py): NaN, +inf and -inf among the float inputs,
 * and the CPU backend's environment while the model is tested (the conv
 * path whose NaN the reference keeps: oneDNN's relu maps NaN to 0). */
#define MAX_ENV 4
static bool nonfinite;
static char env_name[MAX_ENV][64];
static int nenv;

static void read_header(const char *path) {
    nonfinite = false;
    nenv = 0;
    FILE *f = fopen(path, "r");
    char line[256];
    while (f && fgets(line, sizeof line, f) && line[0] == '#') {
        line[strcspn(line, "\r\n")] = 0;
        nonfinite |= strcmp(line, "#@ nonfinite") == 0;
        char *eq = strncmp(line, "#@ env ", 7) == 0 ? strchr(line + 7, '=') : NULL;
        size_t len = eq ? (size_t)(eq - (line + 7)) : 0;
        if (eq && nenv < MAX_ENV && len < sizeof env_name[0]) {
            memcpy(env_name[nenv], line + 7, len);
            env_name[nenv][len] = 0;
            setenv(env_name[nenv++], eq + 1, 1);
        }
    }
    if (f)
        fclose(f);
}

static void clear_header(void) {
    for (int i = 0; i < nenv; i++)
        unsetenv(env_name[i]);
    nenv = 0;
}

/* NaN, +inf, -inf in place of min(3, max(1, size / 4)) elements of each
 * even sample of the n of v, the odd ones finite (as check_ops.py's
 * add_nonfinite, other places). */
static void add_nonfinite(float *v, int64_t cnt, int64_t n, uint64_t x) {
    int64_t size = n > 0 ? cnt / n : 0, k = size / 4 < 1 ? 1 : size / 4 > 3 ? 3 : size / 4;
    const float kinds[3] = {NAN, INFINITY, -INFINITY};
    for (int64_t s = 0; size > 0 && s < n; s += 2)
        for (int64_t j = 0; j < k && j < size; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            v[s * size + (int64_t)(x % (uint64_t)size)] = kinds[(s / 2 + j) % 3];
        }
}

static int make_inputs(const dpc_model *m, int64_t n, dpc_tensor **t, int bad) {
    const ir_graph *g = &m->front->g;
    dpc_err e;
    for (int i = 0; i < g->inputs.len; i++) {
        if (dpc_model_input_new(m, i, n, NULL, &t[i], &e) != DPC_OK)
            return -1;
        int64_t cnt = dpc_tensor_numel(t[i]);
        if (t[i]->dtype == DPC_I64) {
            int64_t vocab = dpc_model_input_limit(m, i) ? dpc_model_input_limit(m, i) : 2, *v = t[i]->data;
            for (int64_t k = 0; k < cnt; k++)
                v[k] = (k * 2654435761LL + n) % vocab;
            if (bad && cnt > 0)
                v[cnt / 2] = vocab + 7;
        } else {
            float *v = t[i]->data;
            uint64_t x = 88172645463325252ULL + (uint64_t)(i * 31 + n);
            for (int64_t k = 0; k < cnt; k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                v[k] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            }
            if (nonfinite)
                add_nonfinite(v, cnt, n, x);
        }
    }
    return g->inputs.len;
}

/* ---- one emulated forward ---- */

typedef struct emu_model {
    const kgraph *kg;
    dpc_cu_plan plan;
    emu_fn *fn; /* per step */
    char **param; /* per buffer: aligned copies of the weights, and the prepare kernels' outputs */
    bool prepared; /* the plan's prepare steps ran (once, as the backend runs them) */
} emu_model;

/* Runs the plan at batch n; outputs[j] receive the output buffers. Returns
 * the error flag's kernel (0 none), -1 on failure. */
static int emu_forward(emu_model *em, const dpc_model *m, int64_t n, dpc_tensor *const *in, const double *scalars,
                       float **outputs, kerr *flag) {
    const kgraph *kg = em->kg;
    int nb = kg->bufs.len;
    size_t *off = calloc((size_t)nb + 1, sizeof(size_t)), total = 0;
    char **ptr = calloc((size_t)nb + 1, sizeof(char *));
    dpc_err e;
    if (dpc_memplan(m->unit, n, prec, true, off, &total, &e) != DPC_OK) {
        CHECK(false, "memplan: %s", e.msg);
        free(off);
        free(ptr);
        return -1;
    }
    char *arena = aligned_alloc(DPC_MEMPLAN_ALIGN, total + DPC_MEMPLAN_ALIGN);
    memset(arena, 0xff, total + DPC_MEMPLAN_ALIGN); /* NaN: reading what was never written shows */
    for (int i = 0; i < nb; i++) {
        const kbuf *b = kg->bufs.items[i];
        ptr[i] = b->kind == BUF_PARAM || b->kind == BUF_CONST ? em->param[i] : arena + off[i];
        if (b->kind == BUF_INPUT) {
            int64_t cnt = b->sym ? b->elems * n : b->elems;
            if (kbuf_esize(b, prec) == b->esize)
                memcpy(ptr[i], in[b->index]->data, (size_t)cnt * (size_t)b->esize);
            else
                dpc_f32_narrow(in[b->index]->data, (uint16_t *)ptr[i], (size_t)cnt, prec == KP_BF16 ? DPC_BF16 : DPC_F16);
        }
    }
    float sc[DPC_MAX_SCALARS] = {0};
    for (int i = 0; i < m->front->g.scalars.len; i++)
        sc[i] = (float)scalars[i];
    memset(flag, 0, sizeof *flag);
    for (int i = em->prepared ? em->plan.nprepare : 0; i < em->plan.nsteps; i++) {
        const dpc_cu_step *s = &em->plan.steps[i];
        if (s->kind == DPC_CU_CONV) {
            const dpc_cu_conv *cv = &s->u.conv;
            int how = DPC_DNN_OWN;
            size_t need = 0;
            dpc_err why = {0};
            if (dnn && dnn_mode && i >= em->plan.nprepare)
                how = dpc_dnn_choose(dnn, cv, n, prec, false, (size_t)256 << 20, &need, &why);
            conv_steps++;
            /* cuDNN pads both sides alike: a plan padding more after than before
             * (padding="same", even kernel) is not a cuDNN convolution */
            conv_symmetric += (cv->H + 2 * cv->ph - cv->dh * (cv->kh - 1) - 1) / cv->sh + 1 == cv->Ho &&
                              (cv->W + 2 * cv->pw - cv->dw * (cv->kw - 1) - 1) / cv->sw + 1 == cv->Wo;
            if (how == DPC_DNN_OWN)
                continue; /* the im2col and GEMM steps that follow */
            dpc_dnn_conv d;
            dpc_dnn_conv_of(cv, n, prec, false, how == DPC_DNN_FUSED, &d);
            void *ws = need ? malloc(need) : NULL;
            bool fused = how == DPC_DNN_FUSED;
            dpc_status cs = dpc_dnn_conv_run(dnn, &d, ptr[cv->x], ptr[cv->w], fused && cv->bias >= 0 ? ptr[cv->bias] : NULL,
                                             fused && cv->z >= 0 ? ptr[cv->z] : NULL, ptr[fused ? cv->out : cv->y], ws,
                                             need, EMU_STREAM, &why);
            free(ws);
            CHECK(cs == DPC_OK, "cuDNN conv step %d: %s", i, why.msg);
            conv_dnn++;
            conv_fused += d.bias;
            i += cv->nfallback + fused;
            continue;
        }
        if (s->kind == DPC_CU_GEMM) {
            gemm_args ga = {&s->u.gemm, ptr};
            dpc_cu_gemm_expand(&s->u.gemm, n, cpu_gemm, &ga);
            continue;
        }
        const dpc_cu_launch *l = &s->u.launch;
        int64_t blocks = dpc_cu_blocks(l, n, 132);
        if (blocks <= 0)
            continue;
        if (l->grid == DPC_CU_ELEMS && blocks > 3)
            blocks = 3; /* grid-stride: fewer threads to start, same result */
        void *args[DPC_CU_MAX_PARAMS];
        for (int j = 0; j < l->nbufs; j++)
            args[j] = ptr[l->bufs[j]];
        kctx c = {sc, flag, n, l->g};
        em->fn[i](args, &c, (unsigned)blocks);
    }
    em->prepared = true;
    for (int i = 0; i < nb; i++) {
        const kbuf *b = kg->bufs.items[i];
        if (b->kind == BUF_OUTPUT) {
            int64_t cnt = b->sym ? b->elems * n : b->elems;
            outputs[b->index] = malloc((size_t)cnt * 4 + 4);
            for (int64_t k = 0; k < cnt; k++)
                outputs[b->index][k] = ldf(ptr[i], k);
        }
    }
    free(arena);
    free(off);
    free(ptr);
    return flag->kernel;
}

/* Relative L2 error; a tiny output (as a sum that nearly cancels) is
 * measured against an RMS of 0.05 instead, so that float rounding of O(1)
 * terms does not count as an error. */
static double rel_l2(const float *x, const float *y, int64_t n, int64_t *bad) {
    double num = 0, den = 0;
    *bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) {
            if (isnan(x[i]) != isnan(y[i]) || (isinf(x[i]) && x[i] != y[i]))
                (*bad)++;
            continue;
        }
        num += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        den += (double)y[i] * y[i];
    }
    double floor = 5e-2 * sqrt((double)n); /* an RMS of 0.05 */
    return sqrt(num) / (sqrt(den) > floor ? sqrt(den) : floor);
}

static bool skip_frontend_errors;

/* PyTorch's init leaves norm biases 0 and scales 1, batch-norm statistics
 * 0 and 1: every parameter gets noise, so that each one matters (variances
 * stay positive). */
static void perturb_weights(dpc_model *m) {
    const vec *params = &m->front->m.params;
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < params->len; i++) {
        const param_entry *p = params->items[i];
        if (!m->params[i] || p->is_int || p->ignored)
            continue;
        int64_t n = 1;
        for (int d = 0; d < p->rank; d++)
            n *= p->shape[d];
        size_t kl = strlen(p->key);
        bool var = kl >= 11 && strcmp(p->key + kl - 11, "running_var") == 0;
        for (int64_t k = 0; k < n; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            float r = (float)((double)(x >> 11) / 9007199254740992.0); /* [0, 1) */
            m->params[i][k] = var ? 0.5f + r : m->params[i][k] + 0.2f * (r - 0.5f);
        }
    }
}

static void test_model(const char *path) {
    dpc_model *m = NULL;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_err e = {0};
    dpc_status s = dpc_model_compile(path, &m, &diags, &e);
    dpc_buf_free(&diags);
    if (s != DPC_OK) {
        if (!skip_frontend_errors)
            CHECK(false, "%s does not compile: %s", path, e.msg);
        else
            printf("%s: the front end refuses it, skipped\n", path);
        return;
    }
    s = dpc_model_bind_init(m, 3, &e);
    if (s == DPC_OK)
        perturb_weights(m);
    dpc_device cpu = {DPC_DEV_CPU, 0};
    if (s == DPC_OK)
        s = dpc_model_set_devices(m, &cpu, 1, &e);
    CHECK(s == DPC_OK, "%s: weights and CPU backend: %s", path, e.msg);
    emu_model em = {.kg = dpc_unit_kgraph(m->unit)};
    char *src = NULL;
    if (s == DPC_OK) {
        s = dpc_unit_cuda_program(m->unit, prec, &src, &em.plan, &e);
        CHECK(s == DPC_OK, "%s: %s", path, e.msg);
    }
    void *h = s == DPC_OK ? build_module(path, src, &em.plan) : NULL;
    free(src);
    if (!h) {
        dpc_cu_plan_free(&em.plan);
        dpc_model_free(m);
        return;
    }
    int nb = dpc_unit_kgraph(m->unit)->bufs.len;
    em.fn = calloc((size_t)em.plan.nsteps + 1, sizeof(emu_fn));
    em.param = calloc((size_t)nb + 1, sizeof(char *));
    for (int i = 0; i < em.plan.nsteps; i++) {
        const dpc_cu_step *st2 = &em.plan.steps[i];
        if (st2->kind != DPC_CU_LAUNCH)
            continue;
        char name[600];
        snprintf(name, sizeof name, "emu_%s%s", st2->u.launch.fn, st2->u.launch.suffix);
        *(void **)&em.fn[i] = dlsym(h, name);
        CHECK(em.fn[i] != NULL, "%s: %s missing", path, name);
    }
    for (int i = 0; i < nb; i++) {
        const kbuf *b = dpc_unit_kgraph(m->unit)->bufs.items[i];
        if (b->kind != BUF_PARAM && b->kind != BUF_CONST)
            continue;
        size_t bytes = dpc_memplan_bytes(b, 1, prec);
        em.param[i] = aligned_alloc(DPC_MEMPLAN_ALIGN, bytes ? bytes : DPC_MEMPLAN_ALIGN);
        if (b->kind == BUF_CONST) { /* written by the prepare steps */
            memset(em.param[i], 0xff, bytes ? bytes : DPC_MEMPLAN_ALIGN);
            continue;
        }
        if (prec == KP_F32 || b->esize == 8) /* (an int64 buffer: never narrowed, as backend_cuda.c) */
            memcpy(em.param[i], m->params[b->index], (size_t)b->elems * (size_t)b->esize);
        else
            dpc_f32_narrow(m->params[b->index], (uint16_t *)em.param[i], (size_t)b->elems,
                           prec == KP_BF16 ? DPC_BF16 : DPC_F16);
    }
    bool complete = true;
    for (int i = 0; i < em.plan.nsteps; i++)
        complete &= em.plan.steps[i].kind != DPC_CU_LAUNCH || em.fn[i];
    const ir_graph *g = &m->front->g;
    double scalars[DPC_MAX_SCALARS];
    for (int i = 0; i < g->scalars.len; i++)
        scalars[i] = ((const ir_node *)g->scalars.items[i])->attr.leaf.value;
    bool ints = false;
    for (int i = 0; i < g->inputs.len; i++)
        ints |= ((const ir_node *)g->inputs.items[i])->dt == IR_I64;
    const int64_t batches[] = {1, 3, 5};
    double worst = 0;
    for (int bi = 0; complete && bi < 3; bi++) {
        int64_t n = batches[bi];
        dpc_tensor *in[DPC_MAX_IO] = {0}, *ref[DPC_MAX_IO] = {0};
        float *got[DPC_MAX_IO] = {0};
        int nin = make_inputs(m, n, in, 0);
        s = dpc_model_run(m, (const dpc_tensor *const *)in, nin, scalars, ref, &e);
        CHECK(s == DPC_OK, "%s: CPU run at batch %lld: %s", path, (long long)n, e.msg);
        kerr flag;
        int rc = s == DPC_OK ? emu_forward(&em, m, n, in, scalars, got, &flag) : -1;
        CHECK(rc == 0, "%s: batch %lld: error flag %d", path, (long long)n, rc);
        for (int o = 0; rc == 0 && o < g->outputs.len; o++) {
            int64_t bad, cnt = dpc_tensor_numel(ref[o]);
            double r = rel_l2(got[o], ref[o]->data, cnt, &bad);
            if (r > worst)
                worst = r;
            CHECK(r <= bound() && bad == 0, "%s: batch %lld output %d: rel_l2 %.3e (bound %.0e), %lld non-finite mismatches",
                  path, (long long)n, o, r, bound(), (long long)bad);
        }
        for (int i = 0; i < 64; i++) {
            dpc_tensor_free(in[i]);
            dpc_tensor_free(ref[i]);
            free(got[i]);
        }
    }
    if (complete && ints) { /* an index out of range raises the flag */
        dpc_tensor *in[DPC_MAX_IO] = {0};
        float *got[64] = {0};
        int nin = make_inputs(m, 3, in, 1);
        (void)nin;
        kerr flag;
        int rc = emu_forward(&em, m, 3, in, scalars, got, &flag);
        bool embed = rc > 0 && rc <= dpc_unit_kgraph(m->unit)->kernels.len &&
                     ((const kernel *)dpc_unit_kgraph(m->unit)->kernels.items[rc - 1])->kind == KK_EMBED;
        CHECK(embed && flag.index >= flag.limit, "%s: bad index: flag %d index %lld limit %lld", path, rc,
              flag.index, flag.limit);
        for (int i = 0; i < 64; i++) {
            dpc_tensor_free(in[i]);
            free(got[i]);
        }
    }
    printf("%s: %d steps emulated at batch 1, 3, 5 (%s storage); worst rel_l2 against the CPU backend %.2e\n", path,
           em.plan.nsteps, kprec_name(prec), worst);
    for (int i = 0; i < nb; i++)
        free(em.param[i]);
    free(em.param);
    free(em.fn);
    dlclose(h);
    dpc_cu_plan_free(&em.plan);
    dpc_model_free(m);
}

int main(int argc, char **argv) {
    cxx = getenv("CXX") && *getenv("CXX") ? getenv("CXX") : "c++";
    char probe[300];
    snprintf(probe, sizeof probe, "%s --version > /dev/null 2>&1", cxx);
    if (system(probe) != 0) {
        printf("no C++ compiler (%s): skipped\n", cxx);
        return SKIP;
    }
    if (argc > 2 && strcmp(argv[1], "--cudnn") == 0) {
        cudnn_expect = argv[2];
        argv[2] = argv[0];
        argv += 2;
        argc -= 2;
        if (strcmp(cudnn_expect, "all") && strcmp(cudnn_expect, "none") && strcmp(cudnn_expect, "some")) {
            fprintf(stderr, "test_emu_cuda: --cudnn all|none|some\n");
            return 2;
        }
        dpc_err e = {0};
        if (dpc_dnn_mode(&dnn_mode, &e) != DPC_OK) {
            fprintf(stderr, "test_emu_cuda: %s\n", e.msg);
            return 2;
        }
        if (dnn_mode && dpc_dnn_load(&e) == DPC_OK && dpc_dnn_create(&dnn, EMU_STREAM, &e) == DPC_OK)
            printf("cuDNN %zu from %s\n", dpc_dnn_version(), dpc_dnn_path());
        else
            printf("no cuDNN: %s\n", dnn_mode ? e.msg : "DPC_CUDNN=0");
    }
    int first = model_args("test_emu_cuda", argc, argv, &skip_frontend_errors, &prec);
    if (first < 0)
        return 2;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dpc-emu-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    for (int i = first; i < argc; i++) {
        read_header(argv[i]);
        test_model(argv[i]);
        clear_header();
    }
    rmdir(tmpdir);
    if (cudnn_expect) {
        printf("conv steps: %ld, through cuDNN %ld (%ld fused), own kernels %ld\n", conv_steps, conv_dnn, conv_fused,
               conv_steps - conv_dnn);
        CHECK(conv_steps > 0, "no conv steps ran");
        if (strcmp(cudnn_expect, "all") == 0)
            CHECK(conv_dnn == conv_symmetric && conv_fused > 0,
                  "cuDNN took %ld of %ld convs (%ld fused), expected all %ld with symmetric padding", conv_dnn,
                  conv_steps, conv_fused, conv_symmetric);
        else if (strcmp(cudnn_expect, "none") == 0)
            CHECK(conv_dnn == 0, "cuDNN took %ld of %ld convs, expected none", conv_dnn, conv_steps);
        else
            CHECK(conv_dnn > 0 && conv_dnn < conv_steps, "cuDNN took %ld of %ld convs, expected some", conv_dnn,
                  conv_steps);
        const char *lib = getenv("DPC_CUDNN_LIBRARY");
        void *h = dnn && lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
        const struct {
            long handles_live, convs, fused, grouped, bad_calls, tf32;
            char last_bad[256];
        } *fs = h ? dlsym(h, "fake_cudnn_stats") : NULL;
        if (fs) {
            CHECK(fs->bad_calls == 0, "the fake cuDNN refused %ld calls: %s", fs->bad_calls, fs->last_bad);
            CHECK(fs->tf32 == 0, "%ld f32 convolutions ran with TF32", fs->tf32);
            CHECK(fs->convs + fs->fused == conv_dnn && fs->fused == conv_fused,
                  "the fake computed %ld + %ld fused convs, the test ran %ld (%ld fused)", fs->convs, fs->fused,
                  conv_dnn, conv_fused);
        }
        dpc_dnn_destroy(dnn);
        if (fs)
            CHECK(fs->handles_live == 0, "%ld cuDNN handles leaked", fs->handles_live);
        if (h)
            dlclose(h);
    }
    if (failures) {
        fprintf(stderr, "test_emu_cuda: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_emu_cuda: %d model(s), all checks passed\n", argc - first);
    return 0;
}
