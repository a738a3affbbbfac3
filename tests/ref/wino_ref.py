#!/usr/bin/python3
"""wino_ref.py - the reference of runtime/cpu/conv_wino.c: Winograd F(4x4, 3x3)
and F(2x2, 3x3) in NumPy, step by step, against a direct convolution.

    wino_ref.py

The three matrices are Lavin and Gray's (F(4,3): points 0, +-1, +-2,
infinity; F(2,3): 0, +-1, infinity). For an input block d (6x6, or 4x4)
and weights g (3x3), the 4x4 (2x2) outputs are

    Y = A^T [ (G g G^T) * (B^T d B) ] A     (* elementwise)

summed over the input channels, which turns the elementwise products of the
36 positions into 36 GEMMs over the channels (phase 2 of conv_wino.c). The
checks: in float64 the algorithm is the convolution (to 1e-12), and in
float32 its relative L2 error is about 1e-6 a layer for F(4,3), some 10x a
direct float32 convolution's, and about 1.5x for F(2,3); the bound asserted
is 5e-6. Exit status 0 or 1."""
import sys

import numpy as np

BT = np.array([[4, 0, -5, 0, 1, 0],
               [0, -4, -4, 1, 1, 0],
               [0, 4, -4, -1, 1, 0],
               [0, -2, -1, 2, 1, 0],
               [0, 2, -1, -2, 1, 0],
               [0, 4, 0, -5, 0, 1]], np.float64)
G = np.array([[1 / 4, 0, 0],
              [-1 / 6, -1 / 6, -1 / 6],
              [-1 / 6, 1 / 6, -1 / 6],
              [1 / 24, 1 / 12, 1 / 6],
              [1 / 24, -1 / 12, 1 / 6],
              [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 1, 1, 0],
               [0, 1, -1, 2, -2, 0],
               [0, 1, 1, 4, 4, 0],
               [0, 1, -1, 8, -8, 1]], np.float64)
# F(2x2, 3x3)
BT2 = np.array([[1, 0, -1, 0],
                [0, 1, 1, 0],
                [0, -1, 1, 0],
                [0, 1, 0, -1]], np.float64)
G2 = np.array([[1, 0, 0],
               [0.5, 0.5, 0.5],
               [0.5, -0.5, 0.5],
               [0, 0, 1]], np.float64)
AT2 = np.array([[1, 1, 1, 0],
                [0, 1, -1, -1]], np.float64)
MATRICES = {4: (BT, G, AT), 2: (BT2, G2, AT2)}


def direct(x, w, pad=1):
    """A 3x3 stride-1 convolution of x [C, H, W] by w [Co, C, 3, 3]."""
    C, H, W = x.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    Ho, Wo = H + 2 * pad - 2, W + 2 * pad - 2
    y = np.zeros((w.shape[0], Ho, Wo), x.dtype)
    for i in range(3):
        for j in range(3):
            y += np.einsum("oc,chw->ohw", w[:, :, i, j], xp[:, i:i + Ho, j:j + Wo])
    return y


def winograd(x, w, dt, pad=1, m=4):
    """The same through F(m x m, 3x3), m = 4 or 2, computed in dtype dt (the
    weights' transform in float64 and rounded once, as conv_wino.c does)."""
    bt, g, at = MATRICES[m]
    C, H, W = x.shape
    Ho, Wo = H + 2 * pad - 2, W + 2 * pad - 2
    th, tw = (Ho + m - 1) // m, (Wo + m - 1) // m
    xp = np.zeros((C, th * m + 2, tw * m + 2), dt)  # zeros past the edges
    xp[:, pad:pad + H, pad:pad + W] = x
    U = np.einsum("ik,ockl,jl->ijoc", g, w.astype(np.float64), g).astype(dt)   # once per weights
    bt, at = bt.astype(dt), at.astype(dt)
    y = np.zeros((w.shape[0], th * m, tw * m), dt)
    for a in range(th):
        for b in range(tw):
            d = xp[:, a * m:a * m + m + 2, b * m:b * m + m + 2]
            V = np.einsum("ik,ckl,jl->ijc", bt, d, bt)                # phase 1
            M = np.einsum("ijoc,ijc->ijo", U, V)                      # phase 2: (m+2)^2 GEMMs over c
            y[:, a * m:a * m + m, b * m:b * m + m] = np.einsum("ki,ijo,lj->okl", at, M, at)  # phase 3
    return y[:, :Ho, :Wo]


def main() -> int:
    rng = np.random.default_rng(0)
    ok = True
    for C, H, pad, m in [(16, 17, 1, 4), (32, 14, 1, 4), (8, 11, 0, 4), (32, 7, 1, 2), (16, 9, 0, 2)]:
        x = np.maximum(rng.standard_normal((C, H, H + 2)), 0)
        w = rng.standard_normal((C, C, 3, 3)) / np.sqrt(9 * C)
        ref = direct(x, w, pad)
        rel = lambda y: float(np.linalg.norm(y - ref) / np.linalg.norm(ref))  # noqa: E731
        e64 = rel(winograd(x, w, np.float64, pad, m))
        e32 = rel(winograd(x.astype(np.float32), w.astype(np.float32), np.float32, pad, m))
        d32 = rel(direct(x.astype(np.float32), w.astype(np.float32), pad))
        print("C %d, %dx%d, pad %d: F(%d,3) float64 %.1e, float32 %.1e; direct float32 %.1e" %
              (C, H, H + 2, pad, m, e64, e32, d32))
        ok = ok and e64 < 1e-12 and e32 < 5e-6
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
