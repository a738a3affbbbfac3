"""kmath_fit.py - derives the polynomial coefficients of compiler/kmath.h:
weighted minimax fits (Lawson's iteratively reweighted least squares) on
Chebyshev points, relative error, printed as floats. Not a test; run it with
/usr/bin/python3 tests/run/kmath_fit.py to reproduce the constants."""
import numpy as np, math
verf = np.vectorize(math.erf); verfc = np.vectorize(math.erfc)
def lawson(xs, basis, target, weight, iters=300):
    A = np.stack([b(xs) for b in basis], 1) * weight[:, None]
    y = target * weight
    w = np.ones(len(xs)) / len(xs)
    for _ in range(iters):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(A * sw[:, None], y * sw, rcond=None)
        r = np.abs(A @ c - y)
        w = w * r; w /= w.sum()
    return c, np.max(np.abs(A @ c - y))
def cheb(a, b, n):
    k = np.arange(n); t = np.cos(np.pi * (k + 0.5) / n)
    return np.sort((a + b) / 2 + (b - a) / 2 * t)
def show(name, c, e):
    print("%s (fit error %.3g): %s" % (name, e, ", ".join("%.9g" % np.float32(v) for v in c)))
L = math.log(2) / 2
x = cheb(-L, L, 4000)
show("exp: e^r = 1 + r + r^2 (c0 + c1 r + ...)", *lawson(x, [lambda x, k=k: x ** (k + 2) for k in range(5)], np.exp(x) - 1 - x, 1 / np.exp(x)))
x = cheb(1e-4, 0.625, 4000)
show("tanh: x + x^3 (c0 + c1 x^2 + ...)", *lawson(x, [lambda x, k=k: x ** (2 * k + 3) for k in range(6)], np.tanh(x) - x, 1 / np.tanh(x)))
x = cheb(1e-4, 1.0, 4000)
show("erf: x + x (c0 + c1 x^2 + ...)", *lawson(x, [lambda x, k=k: x ** (2 * k + 1) for k in range(7)], verf(x) - x, 1 / verf(x)))
t = cheb(0.25, 1.0, 4000); a = 1 / t; ex = verfc(a) * np.exp(a * a)
show("erfc(a) e^(a^2), u = 1/a - 0.625: c0 + c1 u + ...", *lawson(t, [lambda x, k=k: (x - 0.625) ** k for k in range(11)], ex, 1 / ex))
x = cheb(math.sqrt(.5) - 1, math.sqrt(2) - 1, 4000); x = x[np.abs(x) > 1e-5]
show("log1p(f) = f - f^2/2 + f^3 (c0 + c1 f + ...)", *lawson(x, [lambda x, k=k: x ** (k + 3) for k in range(8)], np.log1p(x) - x + x * x / 2, 1 / np.abs(np.log1p(x))))
a = cheb(0.0, 4.5, 3000); t = 1 / (1 + 0.4 * a); ex = verfc(a) * np.exp(a * a) / 2
show("gelu: erfc(a) e^(a^2) / 2, t = 1/(1 + 0.4 a): t (c0 + c1 t + ...), absolute error of h", *lawson(a, [lambda a, k=k: (1 / (1 + 0.4 * a)) ** (k + 1) for k in range(6)], ex, np.exp(-a * a), iters=400))
