#!/usr/bin/env python3
"""The per-op differential tests of tests/ops on the GPU (label gpu).

    check_ops_gpu.py DPC FAMILY [check_ops.py options]

Runs tests/ops/check_ops.py with dpc wrapped by dpc_cuda.sh, so every case
runs on cuda:0 (and its data-parallel check on two replicas of cuda:0)
against PyTorch in float64 within 1e-5. Exits 77 without a GPU.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_gpu import have_gpu  # noqa: E402


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    if not have_gpu():
        print('no CUDA driver or no GPU: skipped')
        return 77
    os.environ['DPC_REAL'] = os.path.abspath(sys.argv[1])
    os.environ.pop('DPC_CUDA_TF32', None)
    check = os.path.join(HERE, '..', 'ops', 'check_ops.py')
    args = [sys.executable, check, os.path.join(HERE, 'dpc_cuda.sh')] + sys.argv[2:]
    os.execv(sys.executable, args)


if __name__ == '__main__':
    sys.exit(main())
