#!/usr/bin/python3
"""check_replicas.py DPC MODEL.dp [--batch B] [--bound X]

The documented bound between CPU replica counts (docs/cli.md, *Replicas
and rounding*): MODEL at batch B (64) with dpc's initial weights and random
inputs, run on --devices cpu, cpu,cpu, cpu,cpu,cpu and cpu,cpu,cpu,cpu;
for every output, max |y_k - y_1| <= X * max(1, max |y_1|) with X = 1e-6,
the contract of shared/spec/dataparallel.md (measured: 1.2e-7 at most, see
the docs). Shapes must be equal and every value finite. Prints the measured
differences, so a change in the bound shows in the test log.
"""
import argparse, os, re, subprocess, sys, tempfile
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, '..', 'ref')
PY = '/usr/bin/python3'
LISTS = ['cpu', 'cpu,cpu', 'cpu,cpu,cpu', 'cpu,cpu,cpu,cpu']


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write('FAILED: %s\n%s%s' % (' '.join(cmd), r.stdout, r.stderr))
        sys.exit(1)
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dpc')
    ap.add_argument('model')
    ap.add_argument('--batch', default='64')
    ap.add_argument('--bound', type=float, default=1e-6)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        w = os.path.join(d, 'w.safetensors')
        run([a.dpc, 'init', a.model, '-o', w, '--seed', '1'])
        ind = os.path.join(d, 'in')
        out = run([PY, os.path.join(REF, 'make_inputs.py'), a.model, '--batch', a.batch, '--seed', '7', '-o', ind])
        iargs = sum((['--input', p] for p in out.split() if p.endswith('.npy')), [])
        results = []
        for devs in LISTS:
            results.append(outputs_of(a, d, w, iargs, devs))
        failed = False
        for devs, outs in zip(LISTS[1:], results[1:]):
            for j, (y1, yk) in enumerate(zip(results[0], outs)):
                if y1.shape != yk.shape or not np.all(np.isfinite(yk)):
                    print('FAIL %s output %d: shape %s vs %s, or not finite' % (devs, j, yk.shape, y1.shape))
                    failed = True
                    continue
                diff = float(np.max(np.abs(yk.astype(np.float64) - y1))) if y1.size else 0.0
                scale = max(1.0, float(np.max(np.abs(y1))) if y1.size else 0.0)
                ok = diff <= a.bound * scale
                print('%s %-16s output %d: max|diff| %.3g (bound %.3g)' % ('ok  ' if ok else 'FAIL', devs, j, diff,
                                                                           a.bound * scale))
                failed |= not ok
        return 1 if failed else 0


def outputs_of(a, d, w, iargs, devs, k=1):
    """The outputs of one run (with one -o first: dpc says how many it returns)."""
    paths = [os.path.join(d, '%d_%d.npy' % (devs.count(',') + 1, j)) for j in range(k)]
    r = subprocess.run([a.dpc, 'run', a.model, '--weights', w, '--devices', devs] + iargs +
                       sum((['-o', p] for p in paths), []), capture_output=True, text=True)
    m = re.search(r' returns (\d+) tensors? but', r.stderr)
    if r.returncode == 2 and m and k == 1:
        return outputs_of(a, d, w, iargs, devs, int(m.group(1)))
    if r.returncode != 0:
        sys.stderr.write('FAILED: dpc run %s --devices %s\n%s' % (a.model, devs, r.stderr))
        sys.exit(1)
    return [np.load(p) for p in paths]


if __name__ == '__main__':
    sys.exit(main())
