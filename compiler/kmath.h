/* kmath.h - the C dialect's float transcendentals: exp, tanh, erf, gelu,
 * log and log1p as static inline functions without branches, so that GCC at -O3
 * -march=native vectorises the fused loops that call them (libm's expf,
 * tanhf, erff are scalar calls, which keep a loop scalar). Portable C: no
 * intrinsics, any ISA; the selects (`c ? a : b`) become blends. The kernels
 * are compiled with -fno-trapping-math (backend_cpu.c): with FP operations
 * that may trap, GCC 12 does not if-convert a select whose arms it has
 * sunk or threaded into branches, and the loop stays scalar.
 *
 * The text between the ">>> kmath" and "<<< kmath" markers is printed, byte
 * for byte, into every generated C source (cmake/kmath_text.cmake makes it
 * DPC_KMATH_TEXT; emit_c.c prints it after the ABI). tests/run/test_kmath.c
 * includes this file and checks every function against the double libm
 * over a sweep of the whole float range and the special values.
 *
 * Maximum error against the correctly rounded result (test_kmath measures
 * it; docs/performance.md has the table), for every float input:
 *   dpc_expf 1.5 ulp, dpc_tanhf 2 ulp, dpc_erff 2 ulp, dpc_logf 2 ulp,
 *   dpc_log1pf 3 ulp (measured: 1.02, 1.33, 1.32, 1.20, 2.61), and
 *   dpc_geluf 3 units of ulp(gelu(x)) + |x| 2^-24 (the rounding of 1 + erf
 *   in PyTorch's own float form; test_kmath's gelu_err),
 * with IEEE results at the edges: NaN in, NaN out; exp overflows to +inf
 * (x > 88.72) and underflows through the subnormals to 0 (x < -103.97);
 * tanh and erf reach exactly +-1 (|x| > 9.01, |x| > 3.92); log(0) = -inf,
 * log(x < 0) = NaN, log(+inf) = +inf, subnormal inputs exact.
 * The polynomials are minimax fits (tests/run/kmath_fit.py prints them). */
#ifndef DPC_KMATH_H
#define DPC_KMATH_H
#include <math.h>
#include <stdint.h>

/* >>> kmath */
/* Vectorisable float math (compiler/kmath.h: error bounds, tests). */
static inline float dpc_km_f(uint32_t u) {
    union { uint32_t u; float f; } v = {.u = u};
    return v.f;
}
static inline uint32_t dpc_km_u(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    return v.u;
}
/* 2^n for an integer-valued n in [-126, 127], from its bits: n + 1.5*2^23
 * holds n in its low mantissa bits (unsigned arithmetic: no UB on NaN). */
static inline float dpc_km_pow2(float n) {
    return dpc_km_f((dpc_km_u(n + 12582912.0f) - 0x4B400000u + 127u) << 23);
}
/* n = round(x / ln 2), and e^r for r = x - n ln 2 */
static inline float dpc_km_exp_n(float x) { return (x * 1.44269504f + 12582912.0f) - 12582912.0f; }
static inline float dpc_km_exp_r(float x, float n) {
    const float r = (x - n * 0.693145751953125f) - n * 1.42860677e-06f;
    float p = 0.00138146128f;
    p = p * r + 0.00836871006f;
    p = p * r + 0.041668389f;
    p = p * r + 0.166665211f;
    p = p * r + 0.49999994f;
    return (p * r) * r + r + 1.0f;
}
/* e^x = 2^n e^r, n = round(x / ln 2), |r| <= ln(2)/2 (ln 2 in two parts,
 * n * hi exact); 2^n applied in two halves so that the subnormal results
 * round once and 2^128 * e^r overflows to inf. NaN passes the clamps. */
static inline float dpc_expf(float x) {
    const float xc = (x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x));
    const float n = dpc_km_exp_n(xc);
    const float p = dpc_km_exp_r(xc, n);
    const float h = (n * 0.5f + 12582912.0f) - 12582912.0f;
    return (p * dpc_km_pow2(h)) * dpc_km_pow2(n - h);
}
/* |x| < 0.625: x + x^3 P(x^2); above: 1 - 2 / (e^(2|x|) + 1), |x| capped
 * at 9.5 where tanh is 1.0f. Computed for |x|, the sign copied last (-0). */
static inline float dpc_tanhf(float x) {
    const float a = fabsf(x), s = a * a;
    float p = 0.00214296207f;
    p = p * s - 0.0081773987f;
    p = p * s + 0.0217007026f;
    p = p * s - 0.0539467633f;
    p = p * s + 0.133332059f;
    p = p * s - 0.333333313f;
    const float small = a + (a * s) * p;
    const float e = dpc_expf(2.0f * (a > 9.5f ? 9.5f : a));
    return copysignf((a < 0.625f ? small : 1.0f - 2.0f / (e + 1.0f)), x);
}
/* |x| < 1: x + x P(x^2) (P small: its rounding stays small); above: 1 - e^(-a^2) Q(1/a - 0.625), Q fits
 * erfc(a) e^(a^2) on a in [1, 4]; erf(4) is 1.0f. */
static inline float dpc_erff(float x) {
    const float a = fabsf(x), s = x * x;
    float p = 7.85389129e-05f;
    p = p * s - 0.00080102036f;
    p = p * s + 0.00518832915f;
    p = p * s - 0.0268538129f;
    p = p * s + 0.112835854f;
    p = p * s - 0.37612626f;
    p = p * s + 0.128379166f;
    const float small = x + x * p;
    const float ac = (a < 1.0f ? 1.0f : (a > 4.0f ? 4.0f : a));
    const float u = 1.0f / ac - 0.625f;
    float q = -0.0367454328f;
    q = q * u + 0.0259324126f;
    q = q * u + 0.00581221795f;
    q = q * u - 0.0268952455f;
    q = q * u + 0.043075256f;
    q = q * u - 0.0469456762f;
    q = q * u + 0.0233378652f;
    q = q * u + 0.0437670425f;
    q = q * u - 0.172394902f;
    q = q * u + 0.382283777f;
    q = q * u + 0.305952996f;
    const float large = copysignf(1.0f - dpc_expf(-(ac * ac)) * q, x);
    return (a < 1.0f ? small : large);
}
/* gelu(x) = x Phi(x), Phi(x) = 1 - h (x >= 0) or h (x < 0), h = erfc(a) / 2
 * at a = |x| / sqrt(2): h = e^(-a^2) t P(t), t = 1 / (1 + 0.4 a), P fitting
 * erfc(a) e^(a^2) / 2 on a in [0, 4.5] in absolute error (1.4e-8), which is
 * what x Phi(x) needs: 0.5 x (1 + erf) rounds 1 + erf to 2^-24 as well. One
 * division and one exponential (e^(-a^2) in [e^-20.25, 1]: no clamp, 2^n in
 * one step), where 0.5 x (1 + dpc_erff) computes both of erf's branches.
 * h is 0 above a = 4.5 (erfc(4.5) / 2 < 1e-10): gelu(-inf) is NaN, as
 * PyTorch's, and gelu(-0) is -0. */
static inline float dpc_geluf(float x) {
    const float a = fabsf(x) * 0.707106781f, ac = (a > 4.5f ? 4.5f : a), y = -(ac * ac);
    const float n = dpc_km_exp_n(y), e = dpc_km_exp_r(y, n) * dpc_km_pow2(n);
    const float t = 1.0f / (1.0f + 0.4f * ac);
    float q = -0.100129895f;
    q = q * t + 0.35457477f;
    q = q * t - 0.185455769f;
    q = q * t + 0.234138533f;
    q = q * t + 0.0809111968f;
    q = q * t + 0.115961142f;
    const float h = (a > 4.5f ? 0.0f : e * t * q);
    return x * (x < 0.0f ? h : 1.0f - h);
}
/* x = 2^e m, m in [sqrt(1/2), sqrt(2)): log x = e ln 2 + log1p(m - 1),
 * subnormals scaled by 2^23 first; m - 1 is exact. */
static inline float dpc_logf(float x) {
    const int sub = x < 1.17549435e-38f;
    const uint32_t b = dpc_km_u(sub ? x * 8388608.0f : x);
    float e = (float)(int32_t)(b >> 23) - (sub ? 150.0f : 127.0f);
    float m = dpc_km_f((b & 0x007FFFFFu) | 0x3F800000u);
    const int big = m > 1.41421356f;
    m = big ? m * 0.5f : m;
    e = big ? e + 1.0f : e;
    const float f = m - 1.0f, f2 = f * f;
    float p = -0.0763449669f;
    p = p * f + 0.127615765f;
    p = p * f - 0.131601825f;
    p = p * f + 0.142017573f;
    p = p * f - 0.166233569f;
    p = p * f + 0.200012267f;
    p = p * f - 0.250008196f;
    p = p * f + 0.333333313f;
    const float l = e * 0.693145751953125f + ((f - 0.5f * f2) + (f2 * f * p + e * 1.42860677e-06f));
    float r = x < 0.0f ? NAN : l;
    r = x == 0.0f ? -INFINITY : r;
    r = x == INFINITY ? x : r;
    return x != x ? x : r;
}
/* log(1 + x) = log(w) x / (w - 1), w = 1 + x rounded: the quotient corrects
 * the rounding of w (exact where w is 1). */
static inline float dpc_log1pf(float x) {
    const float w = 1.0f + x;
    const float r = (w == 1.0f ? x : dpc_logf(w) * (x / (w - 1.0f)));
    return (x == INFINITY ? x : r);
}
/* <<< kmath */

#endif
