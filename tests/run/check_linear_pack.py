#!/usr/bin/python3
"""check_linear_pack.py DPC - a linear's GEMM from 5 to 64 rows as a oneDNN
matmul with packed weights (runtime/cpu/linear_dnnl.c).

rows/rows.dp at batch 5, 17 and 64 (the matmul) and 65 (dnnl_sgemm), at
one and two threads a replica, must match PyTorch float64. That the matmul
ran: at 5-64 rows the output differs in some bits from the same forward
with it switched off (DPC_LINEAR_PACK=0: dnnl_sgemm sums in another
order); at 65 it is the same bytes (the switch changes nothing there).
Only on the oneDNN build (OpenBLAS builds call cblas_sgemm throughout).
The matmul is oneDNN's brgemm one, an AVX-512 kernel: without AVX-512 it
declines, and from 5 rows the linears run dnnl_sgemm against a padded copy
of W^T (linear_dnnl.h), which sums in sgemm's order, so the bytes say
nothing there: the values are checked, and test_linear_dnnl shows which
path ran.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "rows", "rows.dp")
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
import st  # noqa: E402
from isa import avx512  # noqa: E402


def main():
    dpc = sys.argv[1]
    matmul = avx512()
    if not matmul:
        print("no AVX-512: no packed matmul; the values only (test_linear_dnnl: the padded sgemm)")
    rng = np.random.default_rng(4)
    w = {"fc1.weight": rng.standard_normal((2063, 2051)).astype(np.float32) / 45,
         "fc1.bias": rng.standard_normal(2063).astype(np.float32),
         "fc2.weight": rng.standard_normal((37, 2063)).astype(np.float32) / 45,
         "fc2.bias": rng.standard_normal(37).astype(np.float32)}
    t = {k: torch.from_numpy(v).double() for k, v in w.items()}
    failures, runs = [], 0
    with tempfile.TemporaryDirectory() as d:
        wp = os.path.join(d, "w.safetensors")
        st.save(wp, w)

        def run(x, threads, rows):
            xp, yp = os.path.join(d, "x.npy"), os.path.join(d, "y.npy")
            np.save(xp, x)
            env = dict(os.environ, DPC_GEMM_THREADS=threads, OMP_NUM_THREADS=threads)
            env.pop("DPC_LINEAR_PACK", None)
            if not rows:
                env["DPC_LINEAR_PACK"] = "0"
            p = subprocess.run([dpc, "run", MODEL, "--weights", wp, "--input", xp, "-o", yp], env=env,
                               capture_output=True, text=True)
            if p.returncode != 0:
                failures.append("batch %d, %s threads: rc %d: %s" % (len(x), threads, p.returncode, p.stderr.strip()))
                return None
            return np.load(yp)

        for batch in (5, 17, 64, 65):
            x = rng.standard_normal((batch, 2051)).astype(np.float32)
            xt = torch.from_numpy(x).double()
            want = torch.relu(xt @ t["fc1.weight"].T + t["fc1.bias"]) @ t["fc2.weight"].T + t["fc2.bias"]
            want = want.numpy()
            off = run(x, "1", False)
            for threads in ("1", "2"):
                got = run(x, threads, True)
                runs += 1
                if got is None or off is None:
                    continue
                err = float(np.max(np.abs(got - want) / (1.0 + np.abs(want))))
                if not err <= 1e-4:
                    failures.append("batch %d, %s threads: error %.3g against PyTorch float64" % (batch, threads, err))
                same = np.array_equal(got, off)
                if not matmul:
                    continue
                if batch <= 64 and same:
                    failures.append("batch %d, %s threads: the same bytes as DPC_LINEAR_PACK=0 (the matmul did not run?)"
                                    % (batch, threads))
                if batch > 64 and threads == "1" and not same:
                    failures.append("batch %d: DPC_LINEAR_PACK=0 changed the output (the matmul ran past its rows?)"
                                    % batch)
    for f in failures:
        print("FAIL", f)
    print("check_linear_pack: %d runs, %s" % (runs, "all checks passed" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
