#!/usr/bin/python3
"""time_originals — what the PyTorch side of each zoo check costs on this machine.

    OPENBLAS_NUM_THREADS=2 time_originals.py [NAME ...] [--threads 2] [--batches 1,3,8] [--seqs 16,64]

Per original: build (torch.manual_seed + constructor), test_weights + save of
the state_dict as safetensors, the float64 copy, then forwards per batch
(and sequence length for bert/gpt2) in float32 and float64, after one
untimed warm-up forward at batch 1; the minimum of --repeat
forwards is shown.  Prints a Markdown table (seconds).
Set OPENBLAS_NUM_THREADS before starting: Debian's torch runs its GEMMs in
OpenBLAS, which torch.set_num_threads does not bound.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import zoo_check as zc  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="1,3,8")
    ap.add_argument("--seqs", default="16,64")
    ap.add_argument("--repeat", type=int, default=2, help="timed forwards per case; the minimum is shown")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    batches = [int(b) for b in a.batches.split(",")]
    seqs = [int(s) for s in a.seqs.split(",")]
    names = a.names or list(zc.ZOO)
    print(f"torch {torch.__version__}, set_num_threads({a.threads}), "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    cols = [f"b{b}" for b in batches]
    print("| model | params | build | weights+save (MB) | " +
          " | ".join(f"f32 {c}" for c in cols) + " | " + " | ".join(f"f64 {c}" for c in cols) + " |")
    print("|---" * (4 + 2 * len(cols)) + "|")
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            t0 = time.time()
            model = zc.build(name)
            t_build = time.time() - t0
            t0 = time.time()
            zc.test_weights(model, 1, zc.ZOO[name][1])
            path = os.path.join(d, "w.safetensors")
            zc.save_weights(model, path)
            t_save = time.time() - t0
            mb = os.path.getsize(path) / 1e6
            os.unlink(path)
            m64 = copy.deepcopy(model).double()
            nparams = sum(p.numel() for p in model.parameters())
            for s in (seqs if zc.ZOO[name][1] in zc.SEQ_KINDS else [None]):
                row = {}
                for dt, m in ((torch.float32, model), (torch.float64, m64)):
                    zc.forward(m, zc.make_inputs(name, 1, s), dt)  # warm-up
                    for b in batches:
                        inputs = zc.make_inputs(name, b, s)
                        best = float("inf")
                        for _ in range(a.repeat):
                            t0 = time.time()
                            zc.forward(m, inputs, dt)
                            best = min(best, time.time() - t0)
                        row[(dt, b)] = best
                label = name + (f" S={s}" if s is not None else "")
                print(f"| {label} | {nparams / 1e6:.1f} M | {t_build:.2f} | {t_save:.2f} ({mb:.0f}) | " +
                      " | ".join(f"{row[(torch.float32, b)]:.2f}" for b in batches) + " | " +
                      " | ".join(f"{row[(torch.float64, b)]:.2f}" for b in batches) + " |", flush=True)
            del model, m64
    return 0


if __name__ == "__main__":
    sys.exit(main())
