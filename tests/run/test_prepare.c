/* test_prepare.c - the prepare phase of the CPU backend runs once per load.
 *
 *     test_prepare MODEL.dp
 *
 * MODEL has batch norms folded into convolutions (compiler/fold_bn.c), so
 * its unit has prepare kernels (kernels 0 .. nprepare-1). Kernel 0 is made
 * to fail (fault injection, as DPC_FAULT_KERNEL does): a forward that ran
 * the prepare kernels again would fail. So after the first forward every
 * forward must succeed with the same outputs; after the weights are bound
 * again the next forward must fail (the prepare kernels run again), and
 * without the fault it must give the new weights' outputs; binding the
 * first weights again gives the first outputs back. Binding again keeps
 * the backend, and its outputs are those of a fresh load of the new
 * weights (oneDNN's kept weight layouts reordered again, conv_dnnl.h).
 * Two replicas on the same backend share the one prepared copy.
 *
 *     test_prepare MODEL.dp B
 *
 * runs the forwards at batch B and the two replicas at 2B (default 3 and
 * 4): a linear from 5 rows runs as a oneDNN matmul whose packed weights
 * must be packed again after a bind too (linear_dnnl.h).
 *
 *     test_prepare MODEL.dp B noprep
 *
 * MODEL has no prepare kernel (a Conv1D's weight is used as it is): the
 * same binds and outputs, without the fault and the prepare counts: the
 * runtime's copies of parameters are made again after a bind although no
 * prepare kernel runs (backend_cpu.c, cpu_weights_changed). */
#include "../check.h"
#include "backend_cpu.h"
#include "model.h"

#include <stdlib.h>
#include <string.h>

#define MAXO 16

typedef struct outs {
    int n;
    dpc_tensor *t[MAXO];
} outs;

static void outs_free(outs *o) {
    for (int i = 0; i < o->n; i++)
        dpc_tensor_free(o->t[i]);
    memset(o, 0, sizeof *o);
}

static dpc_status forward(dpc_model *m, int64_t n, outs *o, dpc_err *e) {
    const dpc_signature *sig = dpc_unit_signature(m->unit);
    dpc_tensor *in[MAXO] = {0};
    dpc_status s = DPC_OK;
    for (int i = 0; s == DPC_OK && i < sig->ninputs && i < MAXO; i++) {
        s = dpc_model_input_new(m, i, n, NULL, &in[i], e);
        float *f = s == DPC_OK ? in[i]->data : NULL;
        for (size_t k = 0; f && k < in[i]->nbytes / 4; k++)
            f[k] = (float)((k * 7919 + (size_t)i * 104729) % 1000) / 500.0f - 1.0f;
    }
    memset(o, 0, sizeof *o);
    o->n = sig->noutputs < MAXO ? sig->noutputs : MAXO;
    if (s == DPC_OK && (sig->ninputs > MAXO || sig->noutputs > MAXO))
        s = dpc_errf(e, DPC_EUSAGE, "test_prepare takes at most %d inputs and outputs", MAXO);
    if (s == DPC_OK)
        s = dpc_model_run(m, (const dpc_tensor *const *)in, sig->ninputs, NULL, o->t, e);
    for (int i = 0; i < MAXO; i++)
        dpc_tensor_free(in[i]);
    return s;
}

static bool same(const outs *a, const outs *b) {
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (!a->t[i] || !b->t[i] || a->t[i]->nbytes != b->t[i]->nbytes ||
            memcmp(a->t[i]->data, b->t[i]->data, a->t[i]->nbytes) != 0)
            return false;
    return true;
}

static bool set_devices(dpc_model *m, const char *list, dpc_err *e) {
    dpc_device devs[8];
    int n = 0;
    dpc_status s = dpc_parse_devices(list, devs, 8, &n, e);
    if (s == DPC_OK)
        s = dpc_model_set_devices(m, devs, n, e);
    return s == DPC_OK;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4 || (argc == 4 && strcmp(argv[3], "noprep") != 0)) {
        fprintf(stderr, "usage: test_prepare MODEL.dp [BATCH [noprep]]\n");
        return 2;
    }
    const bool prep = argc < 4;
    const int64_t nb = argc >= 3 ? atoi(argv[2]) : 3, nb2 = argc >= 3 ? 2 * nb : 4;
    if (nb < 1) {
        fprintf(stderr, "test_prepare: bad batch %s\n", argv[2]);
        return 2;
    }
    dpc_model *m = NULL;
    dpc_buf diags;
    dpc_buf_init(&diags);
    dpc_err e = {0};
    dpc_status s = dpc_model_compile(argv[1], &m, &diags, &e);
    CHECK(s == DPC_OK, "%s does not compile: %s\n%s", argv[1], e.msg, diags.data ? diags.data : "");
    dpc_buf_free(&diags);
    if (s != DPC_OK)
        return finish("test_prepare");
    int np = dpc_unit_nprepare(m->unit);
    CHECK(prep ? np > 0 && np < dpc_unit_nkernels(m->unit) : np == 0, "%s: %d prepare kernels of %d", argv[1], np,
          dpc_unit_nkernels(m->unit));
    CHECK(dpc_model_bind_init(m, 1, &e) == DPC_OK, "bind: %s", e.msg);
    CHECK(set_devices(m, "cpu", &e), "cpu: %s", e.msg);

    outs a, a2, b, c;
    CHECK(forward(m, nb, &a, &e) == DPC_OK, "forward 1: %s", e.msg);
    CHECK(!prep || dpc_cpu_prepare_runs(m->be) == 1, "after forward 1: prepare ran %ld times",
          dpc_cpu_prepare_runs(m->be));
    /* the prepare kernels do not run again: their first one failing changes nothing */
    m->fail_replica = prep ? 0 : -1;
    m->fail_kernel = prep ? 0 : -1;
    for (int i = 0; i < 3; i++) {
        CHECK(forward(m, nb, &a2, &e) == DPC_OK, "forward %d with prepare kernel 0 failing: %s", i + 2, e.msg);
        CHECK(same(&a, &a2), "forward %d: outputs differ from forward 1", i + 2);
        outs_free(&a2);
    }
    CHECK(!prep || dpc_cpu_prepare_runs(m->be) == 1, "after 4 forwards: prepare ran %ld times",
          dpc_cpu_prepare_runs(m->be));
    /* new weights: the prepare kernels run again (and fail, as injected) */
    const dpc_backend *be1 = m->be;
    CHECK(dpc_model_bind_init(m, 2, &e) == DPC_OK, "bind again: %s", e.msg);
    CHECK(m->be == be1, "binding again made a new backend");
    if (prep) {
        s = forward(m, nb, &b, &e);
        CHECK(s == DPC_EDEVICE && strstr(e.msg, "injected failure in kernel k0_"),
              "the first forward after binding again did not run the prepare kernels (%d: %s)", (int)s, e.msg);
        outs_free(&b);
    }
    m->fail_replica = m->fail_kernel = -1;
    CHECK(forward(m, nb, &b, &e) == DPC_OK, "forward with the new weights: %s", e.msg);
    CHECK(!same(&a, &b), "the new weights give the old outputs: the folded weights are stale");
    CHECK(!prep || dpc_cpu_prepare_runs(m->be) == 2, "after binding again: prepare ran %ld times",
          dpc_cpu_prepare_runs(m->be));
    /* the same weights loaded afresh: the same outputs (none stale) */
    dpc_model *m2 = NULL;
    dpc_buf_init(&diags);
    CHECK(dpc_model_compile(argv[1], &m2, &diags, &e) == DPC_OK, "compile again: %s", e.msg);
    dpc_buf_free(&diags);
    outs b2 = {0};
    CHECK(m2 && dpc_model_bind_init(m2, 2, &e) == DPC_OK && set_devices(m2, "cpu", &e), "fresh load: %s", e.msg);
    CHECK(m2 && forward(m2, nb, &b2, &e) == DPC_OK, "forward of the fresh load: %s", e.msg);
    CHECK(same(&b, &b2), "the weights bound again give other outputs than a fresh load of them: stale weights");
    outs_free(&b2);
    if (m2)
        dpc_model_free(m2);
    /* the first weights again: the first outputs */
    CHECK(dpc_model_bind_init(m, 1, &e) == DPC_OK, "bind the first weights: %s", e.msg);
    CHECK(forward(m, nb, &c, &e) == DPC_OK, "forward with the first weights: %s", e.msg);
    CHECK(same(&a, &c), "the first weights bound again do not give the first outputs");
    outs_free(&c);
    /* two replicas of the same backend share the prepared values */
    CHECK(forward(m, nb2, &c, &e) == DPC_OK, "batch %lld: %s", (long long)nb2, e.msg);
    long runs = dpc_cpu_prepare_runs(m->be);
    CHECK(set_devices(m, "cpu,cpu", &e), "cpu,cpu: %s", e.msg);
    outs d;
    CHECK(forward(m, nb2, &d, &e) == DPC_OK, "batch %lld on two replicas: %s", (long long)nb2, e.msg);
    CHECK(dpc_cpu_prepare_runs(m->be) == runs, "two replicas: prepare ran %ld times, was %ld",
          dpc_cpu_prepare_runs(m->be), runs);
    for (int i = 0; i < c.n && i < d.n; i++) {
        const float *x = c.t[i]->data, *y = d.t[i]->data;
        double num = 0, den = 0;
        for (size_t k = 0; k < c.t[i]->nbytes / 4; k++) {
            num += ((double)x[k] - y[k]) * ((double)x[k] - y[k]);
            den += (double)x[k] * x[k];
        }
        CHECK(num <= 1e-12 * (den + 1e-30), "output %d: two replicas differ from one (%g)", i, num / (den + 1e-30));
    }
    outs_free(&a);
    outs_free(&b);
    outs_free(&c);
    outs_free(&d);
    dpc_model_free(m);
    return finish("test_prepare");
}
