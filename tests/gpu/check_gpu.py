#!/usr/bin/env python3
"""GPU differential test of `dpc run` on one model (label gpu).

For each batch size (default 1, 7 and 64): PyTorch's initial weights (batch
norm statistics randomised), random inputs, then
  * PyTorch in float64 on the CPU (tests/ref/torch_run.py): the reference;
  * `dpc run --devices cpu`: the CPU backend;
  * `dpc run --devices cuda:0`: the CUDA backend, TF32 off;
  * `dpc run --devices cuda:0,cuda:0` and `cuda:0,cuda:0,cuda:0,cuda:0`:
    two and four replicas on the one GPU.
cuda:0 must match PyTorch and the CPU backend within --rtol (relative L2,
default 1e-5); the replicas must match one replica within 1e-6 (GEMMs of a
different row count may take another cuBLASLt algorithm, so not bitwise).
Reduced precision, each against PyTorch with its own bound (relative L2;
docs/cuda.md):
  * DPC_CUDA_TF32=1 (TF32 tensor cores in GEMMs)              1e-2
  * --dtype f16 (16-bit storage, f32 arithmetic)              3e-3
  * --dtype bf16, and bf16 on two replicas                     2e-2
A model with integer inputs is also run with an index out of range: exit 1
and the embedding's message.

Exits 77 (CTest's skip) when there is no CUDA driver or no GPU.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, '..', 'ref')
SKIP = 77


def have_gpu():
    try:
        cu = ctypes.CDLL(os.environ.get('DPC_CUDA_DRIVER') or 'libcuda.so.1')
    except OSError:
        return False
    n = ctypes.c_int(0)
    return cu.cuInit(0) == 0 and cu.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0


def run(cmd, env=None, ok=True):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if ok and r.returncode != 0:
        sys.stderr.write('FAILED (%d): %s\n%s%s' % (r.returncode, ' '.join(cmd), r.stdout, r.stderr))
        sys.exit(1)
    return r


def rel(a, b):
    import numpy as np
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    m = np.isfinite(a) & np.isfinite(b)
    return float(np.linalg.norm((a - b)[m]) / max(np.linalg.norm(b[m]), 1e-300))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dpc')
    ap.add_argument('model')
    ap.add_argument('--batches', default='1,7,64')
    ap.add_argument('--rtol', type=float, default=1e-5)
    ap.add_argument('--python', default=sys.executable)
    ap.add_argument('--selftest-cpu', action='store_true',
                    help='check this script without a GPU: every cuda:0 runs on the cpu instead')
    a = ap.parse_args()
    dev = (lambda s: s.replace('cuda:0', 'cpu')) if a.selftest_cpu else (lambda s: s)
    if not a.selftest_cpu and not have_gpu():
        print('no CUDA driver or no GPU: skipped')
        return SKIP
    global np
    import numpy as np  # after the GPU check: a skip needs nothing
    env = dict(os.environ)
    env.pop('DPC_CUDA_TF32', None)  # f32 GEMMs, no TF32
    py = a.python
    failures = []
    with tempfile.TemporaryDirectory() as d:
        w = os.path.join(d, 'w.safetensors')
        run([py, os.path.join(REF, 'torch_init.py'), a.model, '-o', w, '--seed', '1', '--random-stats'])
        for b in a.batches.split(','):
            ind = os.path.join(d, 'in%s' % b)
            out = run([py, os.path.join(REF, 'make_inputs.py'), a.model, '--batch', b, '--seed', b, '-o', ind])
            inputs = [p for p in out.stdout.split() if p.endswith('.npy')]
            iargs = sum((['--input', p] for p in inputs), [])
            refd = os.path.join(d, 'ref%s' % b)
            os.makedirs(refd)
            run([py, os.path.join(REF, 'torch_run.py'), a.model, '--weights', w] + iargs + ['--out-dir', refd])
            refs = sorted(f for f in os.listdir(refd) if f.endswith('.npy'))
            got = {}
            runs = [('cpu', 'cpu', [], env), ('cuda:0', 'cuda:0', [], env),
                    ('cuda:0,cuda:0', 'cuda:0,cuda:0', [], env),
                    ('cuda:0,cuda:0,cuda:0,cuda:0', 'cuda:0,cuda:0,cuda:0,cuda:0', [], env)]
            if not a.selftest_cpu:
                runs += [('tf32', 'cuda:0', [], dict(env, DPC_CUDA_TF32='1')),
                         ('f16', 'cuda:0', ['--dtype', 'f16'], env),
                         ('bf16', 'cuda:0', ['--dtype', 'bf16'], env),
                         ('bf16 x2', 'cuda:0,cuda:0', ['--dtype', 'bf16'], env)]
            for key, devs, extra, renv in runs:
                tag = key.replace(':', '').replace(',', '_').replace(' ', '_')
                outs = [os.path.join(d, 'y%s_%s_%d.npy' % (b, tag, i)) for i in range(len(refs))]
                run([a.dpc, 'run', a.model, '--weights', w, '--devices', dev(devs)] + extra + iargs +
                    sum((['-o', o] for o in outs), []), env=renv)
                got[key] = [np.load(o) for o in outs]
            for i, r in enumerate(refs):
                ref = np.load(os.path.join(refd, r))
                g1 = got['cuda:0'][i]
                checks = [('cuda:0 vs PyTorch', g1, ref, a.rtol),
                          ('cuda:0 vs cpu', g1, got['cpu'][i], a.rtol),
                          ('2 replicas vs 1', got['cuda:0,cuda:0'][i], g1, 1e-6),
                          ('4 replicas vs 1', got['cuda:0,cuda:0,cuda:0,cuda:0'][i], g1, 1e-6)]
                if not a.selftest_cpu:
                    checks += [('tf32 vs PyTorch', got['tf32'][i], ref, 1e-2),
                               ('f16 vs PyTorch', got['f16'][i], ref, 3e-3),
                               ('bf16 vs PyTorch', got['bf16'][i], ref, 2e-2),
                               ('bf16 x2 vs PyTorch', got['bf16 x2'][i], ref, 2e-2)]
                for what, x, y, tol in checks:
                    if x.shape != y.shape:
                        failures.append('batch %s output %d: %s: shape %s vs %s' % (b, i, what, x.shape, y.shape))
                        continue
                    bad_nonfinite = (np.isfinite(x) != np.isfinite(y)).any()
                    e = rel(x, y)
                    status = 'ok' if e <= tol and not bad_nonfinite else 'FAIL'
                    print('batch %3s output %d  %-18s rel_l2 %.2e (<= %.0e) %s' % (b, i, what, e, tol, status))
                    if status != 'ok':
                        failures.append('batch %s output %d: %s: %.3e' % (b, i, what, e))
        # an embedding index out of range: the device error flag
        out = run([py, os.path.join(REF, 'make_inputs.py'), a.model, '--batch', '3', '--seed', '3', '-o',
                   os.path.join(d, 'bad')])
        inputs = [p for p in out.stdout.split() if p.endswith('.npy')]
        ints = [p for p in inputs if np.load(p).dtype.kind in 'iu']
        if ints:
            x = np.load(ints[0])
            x.flat[x.size // 2] = 1 << 20
            np.save(ints[0], x)
            outs = sum((['-o', os.path.join(d, 'bad%d.npy' % i)] for i in range(len(refs))), [])
            r = run([a.dpc, 'run', a.model, '--weights', w, '--devices', dev('cuda:0')] +
                    sum((['--input', p] for p in inputs), []) + outs, env=env, ok=False)
            msg = r.stderr.strip()
            print('bad index: exit %d: %s' % (r.returncode, msg))
            if r.returncode != 1 or 'out of range for embedding' not in msg or '1048576' not in msg:
                failures.append('an index out of range gave exit %d: %s' % (r.returncode, msg))
    if failures:
        print('FAILED:\n  ' + '\n  '.join(failures))
        return 1
    print('%s: ok' % os.path.basename(a.model))
    return 0


if __name__ == '__main__':
    sys.exit(main())
