#!/usr/bin/python3
"""The seams of issue 10 through `dpc`, against PyTorch (float64):

  batch    inputs sharing the batch name with different sizes (1000 and 1
           rows): a clear error naming both, exit 1, no output, on one
           device and on two (item 9)
  chain    fused chains of 210 and 600 elementwise ops with a side input
           read at the end (item 10), on one device and two
  scalars  70 forward scalars, each given with --kw (item 11)
  outputs  a forward returning its input, and one returning a tensor twice:
           `dpc compile` then `dpc run x.dpa` match `dpc run x.dp` and
           PyTorch (item 12)

    check_seams.py DPC CASE
"""
import os, subprocess, sys, tempfile
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, '..', 'ref')
MODELS = os.path.join(HERE, 'models')
PY = '/usr/bin/python3'
dpc, case = sys.argv[1], sys.argv[2]
failures = 0


def ok(name, good, why=''):
    global failures
    print('%-44s %s' % (name, 'ok' if good else 'FAIL ' + why))
    failures += not good


def run(cmd, code=0):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if code is not None and r.returncode != code:
        ok(' '.join(os.path.basename(c) for c in cmd[:3]), False,
           'exit %d, wanted %d: %s%s' % (r.returncode, code, r.stdout[-2000:], r.stderr[-2000:]))
    return r


def torch_ref(d, model, w, inputs, kw=()):
    out = os.path.join(d, 'ref_' + os.path.basename(model))
    os.makedirs(out, exist_ok=True)
    run([PY, os.path.join(REF, 'torch_run.py'), model, '--weights', w, '--out-dir', out] +
        sum((['--input', p] for p in inputs), []) + sum((['--kw', k] for k in kw), []))
    return [np.load(os.path.join(out, f)) for f in sorted(os.listdir(out)) if f.endswith('.npy')]


def dpc_run(d, model, inputs, n, extra=(), tag='y'):
    outs = [os.path.join(d, '%s%d.npy' % (tag, i)) for i in range(n)]
    run([dpc, 'run', model] + list(extra) + sum((['--input', p] for p in inputs), []) +
        sum((['-o', o] for o in outs), []))
    return [np.load(o) if os.path.exists(o) else None for o in outs]


def close(name, got, want, rtol=1e-5):
    for i, (g, w) in enumerate(zip(got, want)):
        if g is None or g.shape != w.shape:
            ok('%s output %d' % (name, i), False, 'shape %s, wanted %s' % (None if g is None else g.shape, w.shape))
            continue
        err = np.linalg.norm((g - w).ravel()) / max(np.linalg.norm(w.ravel()), 1e-30)
        ok('%s output %d' % (name, i), err <= rtol, 'relative L2 error %.3g' % err)
    ok('%s output count' % name, len(got) == len(want), '%d, wanted %d' % (len(got), len(want)))


def init(d, model):
    w = os.path.join(d, os.path.basename(model) + '.st')
    run([PY, os.path.join(REF, 'torch_init.py'), model, '-o', w, '--seed', '1'])
    return w


def case_batch(d):
    multi = os.path.join(HERE, '..', '..', 'models', 'multi_input.dp')
    w = init(d, multi)
    a, b = os.path.join(d, 'a.npy'), os.path.join(d, 'b.npy')
    np.save(a, np.ones((1000, 5), np.float32))
    np.save(b, np.ones((1, 5), np.float32))
    for devs in ('cpu', 'cpu,cpu'):
        out = os.path.join(d, 'out.npy')
        r = run([dpc, 'run', multi, '--weights', w, '--input', a, '--input', b, '--devices', devs, '-o', out], None)
        msg = "input 'x2' has batch 1 but 'x1' has batch 1000"
        ok('batches 1000 and 1 on %s' % devs, r.returncode == 1 and msg in r.stderr and not os.path.exists(out),
           'exit %d: %s' % (r.returncode, r.stderr.strip()[:300]))
        ok('... one error line on %s' % devs, r.stderr.count('dpc: error:') == 1 and 'Sanitizer' not in r.stderr,
           r.stderr[:300])


def case_chain(d):
    for n in (70, 200):
        model = os.path.join(MODELS, 'chain%d.dp' % n)
        w = init(d, model)
        x, y = os.path.join(d, 'x.npy'), os.path.join(d, 'yin.npy')
        rng = np.random.default_rng(n)
        np.save(x, rng.standard_normal((5, 8)).astype(np.float32))
        np.save(y, rng.standard_normal((5, 8)).astype(np.float32))
        want = torch_ref(d, model, w, [x, y])
        close('chain%d' % n, dpc_run(d, model, [x, y], 1, ['--weights', w]), want)
        close('chain%d on cpu,cpu' % n, dpc_run(d, model, [x, y], 1, ['--weights', w, '--devices', 'cpu,cpu']), want)


def case_scalars(d):
    model = os.path.join(MODELS, 'scalars70.dp')
    w = init(d, model)
    x = os.path.join(d, 'x.npy')
    np.save(x, np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32))
    # the last values weigh most: y = y * 0.5 + s_i
    kw = ['s%d=%g' % (i, (i % 7) - 3 + 0.25 * i) for i in range(70)]
    want = torch_ref(d, model, w, [x], kw)
    got = dpc_run(d, model, [x], 1, ['--weights', w] + sum((['--kw', k] for k in kw), []))
    close('70 scalars', got, want)
    got2 = dpc_run(d, model, [x], 1, ['--weights', w, '--devices', 'cpu,cpu'] + sum((['--kw', k] for k in kw), []),
                   tag='z')
    close('70 scalars on cpu,cpu', got2, want)


def case_outputs(d):
    for name, nout in (('return_input', 2), ('return_twice', 3)):
        model = os.path.join(MODELS, name + '.dp')
        w = init(d, model)
        x = os.path.join(d, 'x.npy')
        np.save(x, np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32))
        want = torch_ref(d, model, w, [x])
        from_dp = dpc_run(d, model, [x], nout, ['--weights', w], tag='dp')
        close(name + '.dp', from_dp, want)
        dpa = os.path.join(d, name + '.dpa')
        r = run([dpc, 'compile', model, '--weights', w, '-o', dpa])
        ok(name + ': dpc compile', r.returncode == 0 and os.path.exists(dpa), r.stderr.strip()[:300])
        if os.path.exists(dpa):
            from_dpa = dpc_run(d, dpa, [x], nout, tag='dpa')
            close(name + '.dpa', from_dpa, want)
            ok(name + ': .dpa and .dp agree bitwise',
               all(a is not None and np.array_equal(a, b) for a, b in zip(from_dpa, from_dp)))


CASES = {'batch': case_batch, 'chain': case_chain, 'scalars': case_scalars, 'outputs': case_outputs}
with tempfile.TemporaryDirectory() as d:
    CASES[case](d)
print('FAILED' if failures else 'all ok')
sys.exit(1 if failures else 0)
