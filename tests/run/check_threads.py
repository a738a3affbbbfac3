#!/usr/bin/python3
"""check_threads.py DPC - the non-GEMM kernels split over a replica's threads.

threads/threads.dp holds one kernel of every kind the C dialect splits
(elementwise chains flat and nested, softmax, log_softmax, layer_norm, sum,
mean, amax, pooling, a permute copy, a cat, a fused attention), each above the size from which
it is split. `dpc run` at 1, 2 and 3 threads a replica (DPC_GEMM_THREADS)
and with two replicas must give the same bytes (the split is over
independent rows and elements, never a reduction), and match the same
forward in PyTorch float64.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "threads", "threads.dp")


def reference(x, y):
    a = (torch.tanh(x) * torch.sigmoid(x) + F.gelu(x) - torch.exp(-x.abs()) + F.silu(x) * torch.erf(x)
         + torch.log(x.abs() + 1.0))
    b = a + y
    s = torch.softmax(b, -1)
    lsm = torch.log_softmax(b, 1)
    n = F.layer_norm(b, [64])
    r = b.sum(2) + lsm.mean(2) + n.amax(2)
    c = torch.cat([F.max_pool2d(b, 3, 2, 1), F.avg_pool2d(s, 2)], 1)
    t = torch.softmax(torch.matmul(b, x.transpose(-1, -2)) * 0.125 + y, -1)
    return [s + lsm + n, r, b.permute(0, 2, 3, 1), c, torch.matmul(t, x)]


def main():
    dpc = sys.argv[1]
    failures = []
    rng = np.random.default_rng(13)
    x = (rng.standard_normal((2, 16, 64, 64)) * 3).astype(np.float32)
    y = rng.standard_normal((2, 16, 1, 64)).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        np.save(os.path.join(d, "x.npy"), x)
        np.save(os.path.join(d, "y.npy"), y)
        runs = {}
        for name, threads, devices in [("1", "1", "cpu"), ("2", "2", "cpu"), ("3", "3", "cpu"), ("2x2", "2", "cpu,cpu")]:
            outs = [os.path.join(d, "%s_%d.npy" % (name, i)) for i in range(5)]
            cmd = [dpc, "run", MODEL, "--input", os.path.join(d, "x.npy"), "--input", os.path.join(d, "y.npy"),
                   "--devices", devices]
            for o in outs:
                cmd += ["-o", o]
            env = dict(os.environ, DPC_GEMM_THREADS=threads)
            p = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if p.returncode != 0:
                failures.append("%s: rc %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
                continue
            runs[name] = [np.load(o) for o in outs]
        want = reference(torch.from_numpy(x).double(), torch.from_numpy(y).double())
        for name, got in runs.items():
            for i, (g, w) in enumerate(zip(got, want)):
                w = w.numpy()
                if g.shape != w.shape:
                    failures.append("%s threads, output %d: shape %s, want %s" % (name, i, g.shape, w.shape))
                    continue
                err = float(np.max(np.abs(g - w) / (1.0 + np.abs(w))))
                if not err <= 1e-4:
                    failures.append("%s threads, output %d: error %.3g against PyTorch float64" % (name, i, err))
                if name != "1" and "1" in runs and not np.array_equal(g, runs["1"][i]):
                    diff = int(np.sum(g != runs["1"][i]))
                    failures.append("%s threads, output %d: %d elements differ from the 1-thread run" % (name, i, diff))
    for f in failures:
        print("FAIL", f)
    print("check_threads: %d runs, %s" % (len(runs), "all checks passed" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
