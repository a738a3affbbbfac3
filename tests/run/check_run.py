#!/usr/bin/python3
"""Differential test of `dpc run` against PyTorch (float64) on one model.

For each batch size: dpc init writes weights, make_inputs.py writes random
inputs, `dpc run` and tests/ref/torch_run.py compute the outputs, and
compare.py checks the relative L2 error (<= 1e-5). With --devices, the same
run over several CPU replicas must match one replica within 1e-6 relative
(not bitwise: the GEMM library blocks differently for other row counts and
thread counts; dpc's own kernels are batch-invariant).
"""
import argparse, contextlib, io, os, subprocess, sys, tempfile
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, '..', 'ref')
sys.path.insert(0, REF)
# The reference scripts run in this process through their main(argv): torch
# is imported once per test rather than once per step (9 imports of 2.6 s
# CPU each were most of a run_<model> test). Each script seeds torch itself,
# so the values are those of running it alone.
import compare  # noqa: E402
import make_inputs  # noqa: E402
import torch_init  # noqa: E402
import torch_run  # noqa: E402


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write('FAILED: %s\n%s%s' % (' '.join(cmd), r.stdout, r.stderr))
        sys.exit(1)
    return r


def ref(module, argv):
    """module.main(argv) in this process; its standard output, or exit 1
    with what it said."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            rc = module.main(argv)
        except SystemExit as e:  # argparse
            rc = e.code
    if rc:
        sys.stderr.write('FAILED: %s.py %s\n%s' % (module.__name__, ' '.join(argv), out.getvalue()))
        sys.exit(1)
    return out.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dpc')
    ap.add_argument('model')
    ap.add_argument('--batches', default='1,3,64')
    ap.add_argument('--devices', default='cpu,cpu,cpu')
    ap.add_argument('--rtol', default='1e-5')
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        w = os.path.join(d, 'w.safetensors')
        # PyTorch's own init (BatchNorm statistics randomised so they matter)
        ref(torch_init, [a.model, '-o', w, '--seed', '1', '--random-stats'])
        for b in a.batches.split(','):
            ind = os.path.join(d, 'in%s' % b)
            out = ref(make_inputs, [a.model, '--batch', b, '--seed', b, '-o', ind])
            inputs = [p for p in out.split() if p.endswith('.npy')]
            iargs = sum((['--input', p] for p in inputs), [])
            refd = os.path.join(d, 'ref%s' % b)
            os.makedirs(refd)
            ref(torch_run, [a.model, '--weights', w] + iargs + ['--out-dir', refd])
            refs = sorted(f for f in os.listdir(refd) if f.endswith('.npy'))
            outs = [os.path.join(d, 'y%s_%d.npy' % (b, i)) for i in range(len(refs))]
            run([a.dpc, 'run', a.model, '--weights', w] + iargs + sum((['-o', o] for o in outs), []))
            for o, r in zip(outs, refs):
                ref(compare, [o, os.path.join(refd, r), '--rtol-l2', a.rtol])
            if a.devices:
                outs2 = [o + '.dp.npy' for o in outs]
                run([a.dpc, 'run', a.model, '--weights', w, '--devices', a.devices] + iargs +
                    sum((['-o', o] for o in outs2), []))
                for o, o2 in zip(outs, outs2):
                    x, y = np.load(o), np.load(o2)
                    err = np.linalg.norm((x - y).ravel()) / max(np.linalg.norm(y.ravel()), 1e-30)
                    if x.shape != y.shape or not err <= 1e-6:
                        print('replicas %s differ from one device for %s at batch %s' % (a.devices, o, b))
                        sys.exit(1)
            print('batch %s: ok (%d output%s)' % (b, len(outs), '' if len(outs) == 1 else 's'))


if __name__ == '__main__':
    main()
