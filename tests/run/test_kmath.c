/* test_kmath.c - the C dialect's vectorisable float math (compiler/kmath.h)
 * against the double libm, over the whole float range.
 *
 * Every function runs over: every 127th float bit pattern (34 million inputs,
 * both signs, subnormals, NaNs and infinities included), every float in the
 * windows where an approximation changes branch or the result changes
 * regime (exp's overflow and subnormal edges, tanh at 0.625 and its
 * saturation, erf at 1 and 3.92, gelu near 0 and where its tail is cut
 * to 0, log around 1), and a list of special values
 * with their exact IEEE results. The error is in units in the last place of
 * the correctly rounded float result (the subnormal spacing below 2^-126,
 * inf counted as 2^128); a NaN where the reference is a number, or a number
 * where it is NaN, fails. Each function fails above its documented bound
 * (kmath.h, docs/performance.md). gelu is measured in its own unit
 * (gelu_err).
 *
 * CMake builds this file twice: as the generated kernels are compiled (-O3
 * -march=native, contraction into FMA on, so the loops below run the
 * vectorised code; `-fopt-info-vec` shows them) and as plain scalar code
 * without FMA (-O1 -ffp-contract=off). The meter itself is checked first: a
 * function off by exactly 3 ulp must measure 3, and the bounds must catch it.
 *
 *   test_kmath [--stride K]   (K odd, default 127) */
#include "kmath.h"

#include "../check.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 65536

typedef void (*batch_fn)(const float *in, float *out, int n);
typedef double (*ref_fn)(double);

/* The loops the host compiler vectorises, one per function. */
static void run_exp(const float *in, float *out, int n) {
    for (int i = 0; i < n; i++)
        out[i] = dpc_expf(in[i]);
}
static void run_tanh(const float *in, float *out, int n) {
    for (int i = 0; i < n; i++)
        out[i] = dpc_tanhf(in[i]);
}
static void run_erf(const float *in, float *out, int n) {
    for (int i = 0; i < n; i++)
        out[i] = dpc_erff(in[i]);
}
static void run_gelu(const float *in, float *out, int n) {
    for (int i = 0; i < n; i++)
        out[i] = dpc_geluf(in[i]);
}
static void run_log(const float *in, float *out, int n) {
    for (int i = 0; i < n; i++)
        out[i] = dpc_logf(in[i]);
}
static void run_log1p(const float *in, float *out, int n) {
    for (int i = 0; i < n; i++)
        out[i] = dpc_log1pf(in[i]);
}
/* exp moved 3 ulp away from libm's (correctly rounded here) result: the meter's check */
static void run_off3(const float *in, float *out, int n) {
    for (int i = 0; i < n; i++) {
        float v = (float)exp((double)in[i]);
        if (isfinite(v) && v > 1e-30f && v < 1e30f) {
            uint32_t u;
            memcpy(&u, &v, 4);
            u += (u & 0x7FFFFFu) < 0x7FFFF0u ? 3 : 0; /* within the binade */
            memcpy(&v, &u, 4);
        }
        out[i] = v;
    }
}

typedef double (*err_fn)(float r, double y, float x);

typedef struct fn {
    const char *name;
    batch_fn run;
    ref_fn ref;
    double bound; /* ulp */
    float lo, hi; /* the windows swept float by float */
    float lo2, hi2;
    err_fn err;   /* NULL: ulp_err */
} fn;

/* The distance of r from the exact value y, in ulp of y rounded to float. */
static double ulp_err(float r, double y) {
    if (isnan(y))
        return isnan(r) ? 0.0 : INFINITY;
    if (isnan(r))
        return INFINITY;
    double rv = isinf(r) ? copysign(0x1p128, r) : (double)r;
    double yv = fabs(y) >= 0x1p128 ? copysign(0x1p128, y) : y;
    double a = fabs((double)(float)yv); /* the binade of the rounded result */
    if (a >= 0x1p128 || isinf(a))
        a = 0x1p127;
    double ulp = a < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(a) - 23);
    return fabs(rv - yv) / ulp;
}

/* gelu(x) = x Phi(x) in units of ulp(gelu(x)) + |x| 2^-24: PyTorch's
 * 0.5 x (1 + erf(x / sqrt 2)) rounds 1 + erf to 2^-24 itself, so that is
 * the absolute error its own float form has in Phi (the negative tail,
 * where 1 + erf cancels, is held to it, not to ulp of the tiny result). */
static double gelu_ref(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double gelu_err(float r, double y, float x) {
    if (isnan(y) || isnan(r) || isinf(x))
        return ulp_err(r, y);
    double a = fabs((double)(float)y), ulp = a < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(a) - 23);
    return fabs((double)r - y) / (ulp + fabs((double)x) * 0x1p-24);
}

typedef struct worst {
    double err;
    float x, r;
    double y;
    long long n;
} worst;

static void measure(const fn *f, const float *in, float *out, int n, worst *w) {
    f->run(in, out, n);
    for (int i = 0; i < n; i++) {
        double y = f->ref((double)in[i]);
        double e = f->err ? f->err(out[i], y, in[i]) : ulp_err(out[i], y);
        if (e > w->err) {
            w->err = e;
            w->x = in[i];
            w->r = out[i];
            w->y = y;
        }
    }
    w->n += n;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Every float in [lo, hi] (same sign), in chunks. */
static void sweep_window(const fn *f, float lo, float hi, float *in, float *out, worst *w) {
    if (!(lo < hi))
        return;
    int n = 0;
    for (float x = lo; x <= hi; x = nextafterf(x, INFINITY)) {
        in[n++] = x;
        if (n == CHUNK) {
            measure(f, in, out, n, w);
            n = 0;
        }
    }
    if (n)
        measure(f, in, out, n, w);
}

static worst sweep(const fn *f, uint32_t stride, float *in, float *out) {
    worst w = {0};
    int n = 0;
    for (uint64_t b = 0; b < (1ull << 32); b += stride) {
        in[n++] = from_bits((uint32_t)b);
        if (n == CHUNK) {
            measure(f, in, out, n, &w);
            n = 0;
        }
    }
    if (n)
        measure(f, in, out, n, &w);
    sweep_window(f, f->lo, f->hi, in, out, &w);
    sweep_window(f, -f->hi, -f->lo, in, out, &w);
    sweep_window(f, f->lo2, f->hi2, in, out, &w);
    sweep_window(f, -f->hi2, -f->lo2, in, out, &w);
    return w;
}

/* Special values and their exact results. */
typedef struct special {
    batch_fn run;
    const char *name;
    float x, want; /* want NaN: any NaN */
} special;

static void check_specials(void) {
    const float inf = INFINITY, nan = NAN, tiny = 0x1p-149f;
    const special s[] = {
        {run_exp, "exp", nan, nan},       {run_exp, "exp", inf, inf},         {run_exp, "exp", -inf, 0.0f},
        {run_exp, "exp", 0.0f, 1.0f},     {run_exp, "exp", -0.0f, 1.0f},      {run_exp, "exp", tiny, 1.0f},
        {run_exp, "exp", 88.8f, inf},     {run_exp, "exp", 1e30f, inf},       {run_exp, "exp", -104.0f, 0.0f},
        {run_exp, "exp", -1e30f, 0.0f},   {run_exp, "exp", FLT_MAX, inf},     {run_exp, "exp", -FLT_MAX, 0.0f},
        {run_tanh, "tanh", nan, nan},     {run_tanh, "tanh", inf, 1.0f},      {run_tanh, "tanh", -inf, -1.0f},
        {run_tanh, "tanh", 0.0f, 0.0f},   {run_tanh, "tanh", tiny, tiny},     {run_tanh, "tanh", 10.0f, 1.0f},
        {run_tanh, "tanh", -50.0f, -1.0f}, {run_tanh, "tanh", FLT_MAX, 1.0f}, {run_erf, "erf", nan, nan},
        {run_erf, "erf", inf, 1.0f},      {run_erf, "erf", -inf, -1.0f},      {run_erf, "erf", 0.0f, 0.0f},
        {run_erf, "erf", 4.0f, 1.0f},     {run_erf, "erf", -1e20f, -1.0f},    {run_log, "log", nan, nan},
        {run_log, "log", inf, inf},       {run_log, "log", -inf, nan},        {run_log, "log", 0.0f, -inf},
        {run_log, "log", -0.0f, -inf},    {run_log, "log", -1.0f, nan},       {run_log, "log", 1.0f, 0.0f},
        {run_log, "log", -tiny, nan},     {run_log1p, "log1p", nan, nan},     {run_log1p, "log1p", inf, inf},
        {run_log1p, "log1p", -1.0f, -inf}, {run_log1p, "log1p", -2.0f, nan},  {run_log1p, "log1p", 0.0f, 0.0f},
        {run_log1p, "log1p", tiny, tiny}, {run_log1p, "log1p", -inf, nan},    {run_gelu, "gelu", nan, nan},
        {run_gelu, "gelu", inf, inf},     {run_gelu, "gelu", -inf, nan},      {run_gelu, "gelu", 0.0f, 0.0f},
        {run_gelu, "gelu", -0.0f, -0.0f}, {run_gelu, "gelu", -7.0f, -0.0f},   {run_gelu, "gelu", -1e30f, -0.0f},
        {run_gelu, "gelu", 1e30f, 1e30f},
    };
    for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
        float got;
        s[i].run(&s[i].x, &got, 1);
        int ok = isnan(s[i].want) ? isnan(got) : got == s[i].want && signbit(got) == signbit(s[i].want);
        CHECK(ok, "%s(%a) = %a, want %a", s[i].name, (double)s[i].x, (double)got, (double)s[i].want);
    }
    /* the sign of zero: tanh(-0) and erf(-0) are -0 */
    float z = -0.0f, r;
    run_tanh(&z, &r, 1);
    CHECK(r == 0.0f && signbit(r), "tanh(-0) = %a", (double)r);
    run_erf(&z, &r, 1);
    CHECK(r == 0.0f && signbit(r), "erf(-0) = %a", (double)r);
}

int main(int argc, char **argv) {
    uint32_t stride = 127;
    if (argc == 3 && strcmp(argv[1], "--stride") == 0)
        stride = (uint32_t)strtoul(argv[2], NULL, 10) | 1u;
    float *in = malloc(sizeof(float) * CHUNK), *out = malloc(sizeof(float) * CHUNK);
    if (!in || !out)
        return 1;
    /* the meter: exactly 3 ulp measured as 3, and over a bound of 2 */
    {
        fn off = {"exp+3ulp", run_off3, exp, 2.0, 1.0f, 1.001f, 0, 0};
        worst w = sweep(&off, 100003, in, out);
        CHECK(w.err >= 2.5 && w.err <= 3.5, "a result 3 ulp off measures %.3f ulp", w.err);
    }
    /* the windows, each under a million floats: exp's overflow edge and its
     * subnormal results; tanh's branch and saturation; erf's branch and
     * saturation; log around 1 and the subnormal inputs; log1p near 0 */
    const fn fns[] = {
        {"dpc_expf", run_exp, exp, 1.5, 88.0f, 89.0f, -0x1.9f8p+6f, -0x1.9c8p+6f},
        {"dpc_tanhf", run_tanh, tanh, 2.0, 0.6f, 0.65f, 8.9f, 9.6f},
        {"dpc_erff", run_erf, erf, 2.0, 0.98f, 1.02f, 3.9f, 4.01f},
        {"dpc_geluf", run_gelu, gelu_ref, 3.0, 0.0018f, 0.0019f, 6.36f, 6.37f, gelu_err},
        {"dpc_logf", run_log, log, 2.0, 0.99f, 1.01f, 0x1p-149f, 0x1p-145f},
        {"dpc_log1pf", run_log1p, log1p, 3.0, 0.001f, 0.0012f, -0.0012f, -0.001f},
    };
    for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
        worst w = sweep(&fns[i], stride, in, out);
        printf("%-11s max %.3f ulp (bound %.1f) at x = %a: got %a, exact %a; %lld inputs\n", fns[i].name, w.err,
               fns[i].bound, (double)w.x, (double)w.r, w.y, w.n);
        CHECK(w.err <= fns[i].bound, "%s: %.3f ulp at %a (got %a, exact %a), over its bound of %.1f", fns[i].name,
              w.err, (double)w.x, (double)w.r, w.y, fns[i].bound);
    }
    check_specials();
    free(in);
    free(out);
    return finish("kmath");
}
