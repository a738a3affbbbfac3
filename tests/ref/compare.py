#!/usr/bin/python3
"""compare — relative L2 error between two .npy arrays.

    compare.py A.npy B.npy [--rtol-l2 1e-5] [--show 5]

B is the reference.  err = ||a - b||_2 / max(||b||_2, tiny), computed in
float64.  Shapes must match exactly (dtypes may differ).  Non-finite values
must sit at the same positions with the same value (nan with nan, +inf with
+inf) and are then left out of the norm.

Exit 0 when err <= bound (prints nothing), 1 otherwise (prints the error
and the worst elements), 2 on bad usage or unreadable files.
"""

from __future__ import annotations

import sys

import numpy as np

TINY = np.finfo(np.float64).tiny


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    """||a-b|| / max(||b||, tiny) over the positions where both are finite."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    mask = np.isfinite(a) & np.isfinite(b)
    diff = np.linalg.norm((a - b)[mask])
    return float(diff / max(np.linalg.norm(b[mask]), TINY))


def compare(a: np.ndarray, b: np.ndarray, bound: float, show: int = 5) -> tuple[bool, str]:
    """Return (ok, report)."""
    if a.shape != b.shape:
        return False, f"shape mismatch: {list(a.shape)} vs {list(b.shape)}"
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    fa, fb = np.isfinite(a64), np.isfinite(b64)
    same_nonfinite = (~fa & ~fb) & ((np.isnan(a64) & np.isnan(b64)) | (a64 == b64))
    bad_nonfinite = (~fa | ~fb) & ~same_nonfinite
    if bad_nonfinite.any():
        idx = [tuple(int(i) for i in ix) for ix in np.argwhere(bad_nonfinite)[:show]]
        lines = [f"non-finite mismatch at {bad_nonfinite.sum()} element(s)"]
        lines += [f"  {ix}: a={a64[ix]!r} b={b64[ix]!r}" for ix in idx]
        return False, "\n".join(lines)
    err = rel_l2(a64, b64)
    if err <= bound:
        return True, f"rel_l2 = {err:.3e} <= {bound:.1e}"
    absdiff = np.where(fa & fb, np.abs(a64 - b64), 0.0)
    flat = np.argsort(absdiff, axis=None)[::-1][:show]
    lines = [f"rel_l2 = {err:.3e} > {bound:.1e} (shape {list(a.shape)}, "
             f"max abs diff {absdiff.max() if absdiff.size else 0.0:.3e})",
             "worst elements:"]
    for f in flat:
        ix = np.unravel_index(f, a.shape) if a.ndim else ()
        ix = tuple(int(i) for i in ix)
        lines.append(f"  {list(ix)}: a={a64[ix]:.9g} b={b64[ix]:.9g} |diff|={absdiff[ix]:.3e}")
    return False, "\n".join(lines)


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Relative L2 error of A against reference B.")
    ap.add_argument("a", help="A.npy (result under test)")
    ap.add_argument("b", help="B.npy (reference)")
    ap.add_argument("--rtol-l2", type=float, default=1e-5, help="bound (default 1e-5)")
    ap.add_argument("--show", type=int, default=5, help="worst elements to print")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the error on success too")
    a = ap.parse_args(argv)
    try:
        xa = np.load(a.a, allow_pickle=False)
        xb = np.load(a.b, allow_pickle=False)
    except (OSError, ValueError) as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return 2
    ok, report = compare(xa, xb, a.rtol_l2, a.show)
    if not ok:
        print(f"{a.a} vs {a.b}: {report}")
        return 1
    if a.verbose:
        print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
