#!/usr/bin/python3
"""`dpc run --devices ...` end to end (issue 4 / dataparallel.md).

- The chunk table of reference section 2.1, read back from a model whose
  outputs reveal the split (tests/dp/models/chunk.dp: each row gets the size
  and the first row index of the chunk it was computed in).
- Several inputs, a keyword scalar and a tuple output over 1..4 replicas give
  the one-replica result (<= 1e-6 relative; the GEMM library may block
  differently per chunk size).
- Batch 0, a batch smaller than the device count, mismatched batches, and a
  failing replica (fault injection) with its message and no output files.
- DPC_FAULT_* and DPC_GEMM_THREADS that are not valid integers: exit 2
  naming the variable, no output files.
"""
import os, re, subprocess, sys, tempfile
import numpy as np

dpc = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
CHUNK = os.path.join(HERE, 'models', 'chunk.dp')
MULTI = os.path.join(HERE, 'models', 'multi.dp')
TABLE = [(5, 4, [2, 2, 1]), (7, 3, [3, 3, 1]), (1, 2, [1]), (8, 3, [3, 3, 2]), (10, 4, [3, 3, 3, 1]),
         (9, 4, [3, 3, 3]), (3, 4, [1, 1, 1]), (2, 4, [1, 1]), (6, 4, [2, 2, 2]), (4, 4, [1, 1, 1, 1]),
         (36, 7, [6] * 6), (17, 8, [3, 3, 3, 3, 3, 2]), (100, 8, [13] * 7 + [9])]
passed = failed = 0


def ok(name, cond, detail=''):
    global passed, failed
    print('%-40s %s' % (name, 'ok' if cond else 'FAIL ' + detail))
    passed += bool(cond)
    failed += not cond


def first_forward_kernel(model):
    """The index of the forward's first kernel: the prepare phase's kernels
    (run once per load, never under DPC_FAULT_KERNEL) come first."""
    out = subprocess.run([dpc, 'ir', model, '--stage', 'fused'], capture_output=True, text=True).stdout
    m = re.search(r'^prepare: (\d+) kernels', out, re.M)
    return str(int(m.group(1)) if m else 0)


def run(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([dpc, 'run'] + args, capture_output=True, text=True, env=e)


with tempfile.TemporaryDirectory() as d:
    P = lambda n: os.path.join(d, n)
    subprocess.run([dpc, 'init', CHUNK, '-o', P('c.st')], check=True)
    for b, n, sizes in TABLE:
        np.save(P('x.npy'), np.arange(b, dtype=np.float32).reshape(b, 1))
        r = run([CHUNK, '--weights', P('c.st'), '--input', P('x.npy'), '--devices', ','.join(['cpu'] * n),
                 '-o', P('size.npy'), '-o', P('first.npy')])
        if r.returncode != 0:
            ok('chunk %d over %d' % (b, n), False, r.stderr)
            continue
        size, first = np.load(P('size.npy')).ravel(), np.load(P('first.npy')).ravel()
        got, i, ok_first = [], 0, True
        while i < b:
            got.append(int(size[i]))
            ok_first &= bool(first[i] == i)
            i += max(int(size[i]), 1)
        ok('chunk %d over %d -> %s' % (b, n, sizes), got == sizes and ok_first, 'got %s' % got)
    # batch 0 gives batch-0 outputs
    np.save(P('x0.npy'), np.zeros((0, 1), np.float32))
    r = run([CHUNK, '--weights', P('c.st'), '--input', P('x0.npy'), '--devices', 'cpu,cpu,cpu', '-o', P('s0.npy'),
             '-o', P('f0.npy')])
    ok('batch 0 over 3 devices', r.returncode == 0 and np.load(P('s0.npy')).shape == (0, 1), r.stderr)

    # 0-dim outputs: a vector of length k, with a warning
    SCAL = os.path.join(HERE, 'models', 'scalar_out.dp')
    subprocess.run([dpc, 'init', SCAL, '-o', P('s.st')], check=True)
    np.save(P('x5.npy'), np.ones((5, 3), np.float32))
    r = run([SCAL, '--weights', P('s.st'), '--input', P('x5.npy'), '--devices', 'cpu,cpu,cpu,cpu', '-o', P('sc.npy')])
    ok('0-dim output over 3 replicas', r.returncode == 0 and 'warning' in r.stderr and
       np.load(P('sc.npy')).tolist() == [6.0, 6.0, 3.0], r.stderr)
    r = run([SCAL, '--weights', P('s.st'), '--input', P('x5.npy'), '-o', P('sc1.npy')])
    ok('0-dim output on one device', r.returncode == 0 and np.load(P('sc1.npy')).shape == (), r.stderr)

    subprocess.run([dpc, 'init', MULTI, '-o', P('m.st'), '--seed', '3'], check=True)
    rng = np.random.default_rng(0)
    for b in [1, 2, 7, 64]:
        np.save(P('a.npy'), rng.standard_normal((b, 4)).astype(np.float32))
        np.save(P('b.npy'), rng.standard_normal((b, 2, 4)).astype(np.float32))
        outs = []
        for n in [1, 2, 3, 4]:
            r = run([MULTI, '--weights', P('m.st'), '--input', P('a.npy'), '--input', P('b.npy'), '--kw', 'scale=0.5',
                     '--devices', ','.join(['cpu'] * n), '-o', P('h%d.npy' % n), '-o', P('r%d.npy' % n)])
            if r.returncode != 0:
                ok('multi batch %d on %d replicas' % (b, n), False, r.stderr)
                continue
            outs.append((np.load(P('h%d.npy' % n)), np.load(P('r%d.npy' % n))))
        same = all(o[k].shape == outs[0][k].shape and
                   np.linalg.norm(o[k] - outs[0][k]) <= 1e-6 * max(np.linalg.norm(outs[0][k]), 1e-30)
                   for o in outs for k in range(2))
        ok('multi batch %d: 1..4 replicas agree' % b, len(outs) == 4 and same)
    # mismatched batches: an error naming both, no output
    np.save(P('a5.npy'), np.zeros((5, 4), np.float32))
    np.save(P('b3.npy'), np.zeros((3, 2, 4), np.float32))
    r = run([MULTI, '--weights', P('m.st'), '--input', P('a5.npy'), '--input', P('b3.npy'), '--devices', 'cpu,cpu',
             '-o', P('bad1.npy'), '-o', P('bad2.npy')])
    ok('mismatched batches', r.returncode == 1 and "'b'" in r.stderr and "'a'" in r.stderr and
       not os.path.exists(P('bad1.npy')), r.stderr)
    # a failing replica: the lowest-numbered one is reported, nothing written
    r = run([MULTI, '--weights', P('m.st'), '--input', P('a.npy'), '--input', P('b.npy'), '--devices', 'cpu,cpu,cpu',
             '-o', P('f1.npy'), '-o', P('f2.npy')], env={'DPC_FAULT_REPLICA': '1', 'DPC_FAULT_KERNEL': first_forward_kernel(MULTI)})
    ok('failing replica 1', r.returncode != 0 and 'replica 1 on device cpu' in r.stderr and
       not os.path.exists(P('f1.npy')) and not os.path.exists(P('f2.npy')), r.stderr)
    # DPC_* integer variables are parsed strictly: "abc" is an error, not replica 0
    bad_env = [({'DPC_FAULT_REPLICA': 'abc', 'DPC_FAULT_KERNEL': '0'},
                "DPC_FAULT_REPLICA='abc' is not an integer from 0 to"),
               ({'DPC_FAULT_REPLICA': '0', 'DPC_FAULT_KERNEL': '1x'}, "DPC_FAULT_KERNEL='1x' is not an integer"),
               ({'DPC_FAULT_REPLICA': '0', 'DPC_FAULT_KERNEL': '100000'}, "DPC_FAULT_KERNEL='100000' is not an integer"),
               ({'DPC_FAULT_REPLICA': '1'}, 'DPC_FAULT_REPLICA is set but DPC_FAULT_KERNEL is not'),
               ({'DPC_GEMM_THREADS': 'four'}, "DPC_GEMM_THREADS='four' is not an integer from 1 to 4096"),
               # and so are the CPU convolution switches (read even for a model without convs)
               ({'DPC_CONV': 'onednn'}, "DPC_CONV='onednn' is not dnnl or im2col"),
               ({'DPC_CONV_LAYOUT': 'NHWC'}, "DPC_CONV_LAYOUT='NHWC' is not auto, nhwc, blocked or plain"),
               ({'DPC_CONV_WINO': '2'}, "DPC_CONV_WINO='2'"),
               ({'DPC_CONV_KEEP': 'never'}, "DPC_CONV_KEEP='never'"),
               ({'DPC_CONV_STEM': 'maybe'}, "DPC_CONV_STEM='maybe'"),
               ({'DPC_CONV_FC': 'yes please'}, "DPC_CONV_FC='yes please'"),
               ({'DPC_CONV_MB': 'sometimes'}, "DPC_CONV_MB='sometimes'"),
               ({'DPC_GEMM_ROWS': 'off!'}, "DPC_GEMM_ROWS='off!'"),
               ({'DPC_LINEAR_PACK': 'never'}, "DPC_LINEAR_PACK='never'")]
    for env, needle in bad_env:
        r = run([MULTI, '--weights', P('m.st'), '--input', P('a.npy'), '--input', P('b.npy'), '--devices', 'cpu,cpu',
                 '-o', P('e1.npy'), '-o', P('e2.npy')], env=env)
        ok('env %s' % ' '.join('%s=%s' % kv for kv in sorted(env.items())), r.returncode == 2 and
           'dpc: error: environment variable ' + needle in r.stderr and not os.path.exists(P('e1.npy')), 'exit %d: %s' % (r.returncode, r.stderr))
print('%d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
