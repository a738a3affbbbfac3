#!/usr/bin/python3
"""`mpirun -np P dpc run ...` end to end (dataparallel.md, "Across processes
and machines"; docs/cli.md, "Several processes").

    check_mpi.py DPC BUILT_WITH_MPI(0|1)

- The rank split is torch.chunk's: tests/dp/models/chunk.dp writes, for
  every row, the size and the first row of the chunk that computed it.
- models/parallel_model.dp, a two-input model with a keyword scalar and a
  tuple output (tests/dp/models/multi.dp), a 0-dim output, a .dpa artifact
  and a device list inside each rank, over 2 and 3 ranks at batches 5, 1
  and 0, give the one-process output (<= 1e-6 relative); parallel_model
  also matches PyTorch (tests/ref/torch_run.py, float64, <= 1e-5).
- `-v` prints the split over ranks on rank 0 only.
- Failures: an injected kernel failure on one rank, on two ranks, a
  missing input file and a wrongly shaped input on one rank, mismatched
  batches everywhere. Every rank exits non-zero (seen through a wrapper
  that records each rank's status), mpirun too, rank 0 prints exactly one
  `dpc: error: rank <r>: ...` line for the lowest failing rank, no output
  file is left, and nothing hangs (every mpirun has a timeout).
Exits 77 (skipped) without mpirun or when dpc was built without MPI.
"""
import os, shutil, subprocess, sys, tempfile
import numpy as np

dpc, built = sys.argv[1], sys.argv[2] == '1'
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DPM = os.path.join(ROOT, 'tests', 'dp', 'models')
PARALLEL = os.path.join(ROOT, 'models', 'parallel_model.dp')
MULTI, CHUNK, SCAL = (os.path.join(DPM, n) for n in ('multi.dp', 'chunk.dp', 'scalar_out.dp'))
MPIRUN = shutil.which('mpirun')
TIMEOUT = 120
passed = failed = 0

if not built or not MPIRUN:
    print('skipped: %s' % ('dpc was built without MPI' if not built else 'no mpirun on PATH'))
    sys.exit(77)

# As root in a container: --allow-run-as-root; --oversubscribe lets 3 ranks
# share 2 cores; vader without CMA (no ptrace rights in containers).
ENV = dict(os.environ, OMPI_MCA_btl_vader_single_copy_mechanism='none')


def ok(name, cond, detail=''):
    global passed, failed
    print('%-52s %s' % (name, 'ok' if cond else 'FAIL ' + detail))
    passed += bool(cond)
    failed += not cond


def mpirun(np_, args, wrap=None, env=None, keep_going=False):
    """Runs dpc under mpirun. keep_going: do not let mpirun kill the other
    ranks when one exits non-zero, so that every rank's status is seen (with
    it mpirun itself then exits 0: the wrapper's records tell)."""
    cmd = [MPIRUN, '--allow-run-as-root', '--oversubscribe', '-np', str(np_)]
    if keep_going:
        cmd += ['--mca', 'orte_abort_on_non_zero_status', '0']
    cmd += ([wrap] if wrap else []) + [dpc, 'run'] + args
    e = dict(ENV)
    e.update(env or {})
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as t:
        return subprocess.CompletedProcess(cmd, 'timeout', t.stdout or '', 'TIMEOUT after %ds' % TIMEOUT)


def run1(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([dpc, 'run'] + args, capture_output=True, text=True, env=e, timeout=TIMEOUT)


def close(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and \
        np.linalg.norm((a - b).astype(np.float64)) <= 1e-6 * max(np.linalg.norm(b.astype(np.float64)), 1e-30)


def errors(stderr):
    return [l for l in stderr.splitlines() if l.startswith('dpc: error:')]


with tempfile.TemporaryDirectory() as d:
    P = lambda n: os.path.join(d, n)
    # Per-rank tweaks for the failure cases, and each rank's exit status.
    WRAP = P('wrap.sh')
    with open(WRAP, 'w') as f:
        f.write('#!/bin/sh\n'
                'r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}\n'
                'case " $FAULT_RANKS " in *" $r "*) export DPC_FAULT_REPLICA=0 DPC_FAULT_KERNEL=0;; esac\n'
                'for a; do shift; if [ "$r" = "$SWAP_RANK" ] && [ "$a" = "$SWAP_FROM" ]; then a=$SWAP_TO; fi; '
                'set -- "$@" "$a"; done\n'
                '"$@"\nrc=$?\necho $rc > "$STATUS_DIR/rank$r"\nexit $rc\n')
    os.chmod(WRAP, 0o755)
    for m, st in [(PARALLEL, 'p.st'), (MULTI, 'm.st'), (CHUNK, 'c.st'), (SCAL, 's.st')]:
        subprocess.run([dpc, 'init', m, '-o', P(st), '--seed', '1'], check=True)
    rng = np.random.default_rng(0)

    # ---- the split over ranks is torch.chunk's ----
    for b, n, sizes in [(5, 3, [2, 2, 1]), (5, 2, [3, 2]), (1, 3, [1]), (4, 3, [2, 2]), (7, 3, [3, 3, 1])]:
        np.save(P('x.npy'), np.arange(b, dtype=np.float32).reshape(b, 1))
        r = mpirun(n, [CHUNK, '--weights', P('c.st'), '--input', P('x.npy'), '-o', P('size.npy'), '-o', P('first.npy')])
        if r.returncode != 0:
            ok('chunk %d over %d ranks' % (b, n), False, r.stderr)
            continue
        size, first = np.load(P('size.npy')).ravel(), np.load(P('first.npy')).ravel()
        got, i, firsts = [], 0, True
        while i < b:
            got.append(int(size[i]))
            firsts &= bool(first[i] == i)
            i += max(int(size[i]), 1)
        ok('chunk %d over %d ranks -> %s' % (b, n, sizes), got == sizes and firsts, 'got %s' % got)

    # ---- same output as one process ----
    for b in [5, 1, 0]:
        np.save(P('x%d.npy' % b), rng.standard_normal((b, 1, 17, 17)).astype(np.float32))
        np.save(P('a%d.npy' % b), rng.standard_normal((b, 4)).astype(np.float32))
        np.save(P('b%d.npy' % b), rng.standard_normal((b, 2, 4)).astype(np.float32))
        pa = [PARALLEL, '--weights', P('p.st'), '--input', P('x%d.npy' % b)]
        ma = [MULTI, '--weights', P('m.st'), '--input', P('a%d.npy' % b), '--input', P('b%d.npy' % b),
              '--kw', 'scale=0.5']
        r = run1(pa + ['-o', P('p1.npy')])
        r2 = run1(ma + ['-o', P('h1.npy'), '-o', P('r1.npy')])
        if r.returncode or r2.returncode:
            ok('one-process reference at batch %d' % b, False, r.stderr + r2.stderr)
            continue
        for n in [2, 3]:
            r = mpirun(n, pa + ['-o', P('pn.npy')])
            ok('parallel_model batch %d over %d ranks' % (b, n),
               r.returncode == 0 and close(np.load(P('pn.npy')), np.load(P('p1.npy'))), r.stderr)
            r = mpirun(n, ma + ['-o', P('hn.npy'), '-o', P('rn.npy')])
            ok('multi (2 inputs, kw, tuple) batch %d over %d ranks' % (b, n),
               r.returncode == 0 and close(np.load(P('hn.npy')), np.load(P('h1.npy'))) and
               close(np.load(P('rn.npy')), np.load(P('r1.npy'))), r.stderr)
        # two CPU replicas inside each rank
        r = mpirun(2, pa + ['--devices', 'cpu,cpu', '-o', P('pd.npy')])
        ok('batch %d over 2 ranks x cpu,cpu' % b,
           r.returncode == 0 and close(np.load(P('pd.npy')), np.load(P('p1.npy'))), r.stderr)
        if b == 5:
            r = subprocess.run([sys.executable, os.path.join(ROOT, 'tests', 'ref', 'torch_run.py'), PARALLEL,
                                '--weights', P('p.st'), '--input', P('x5.npy'), '-o', P('pt.npy')],
                               capture_output=True, text=True, timeout=600)
            if r.returncode == 0:
                y, t = np.load(P('pn.npy')).astype(np.float64), np.load(P('pt.npy')).astype(np.float64)
                ok('parallel_model over 3 ranks matches PyTorch', y.shape == t.shape and
                   np.abs(y - t).max() <= 1e-5 * max(np.abs(t).max(), 1.0), 'max diff %g' % np.abs(y - t).max())
            else:
                print('(PyTorch comparison not run: %s)' % r.stderr.strip().splitlines()[-1:])

    # ---- a .dpa artifact with its weights embedded ----
    subprocess.run([dpc, 'compile', PARALLEL, '--weights', P('p.st'), '-o', P('p.dpa')], check=True)
    r = mpirun(3, [P('p.dpa'), '--input', P('x5.npy'), '-o', P('pa.npy')])
    r1 = run1([P('p.dpa'), '--input', P('x5.npy'), '-o', P('pa1.npy')])
    ok('.dpa over 3 ranks', r.returncode == 0 and r1.returncode == 0 and
       close(np.load(P('pa.npy')), np.load(P('pa1.npy'))), r.stderr + r1.stderr)

    # ---- 0-dim outputs: one value per working rank, with a warning ----
    np.save(P('o5.npy'), np.ones((5, 3), np.float32))
    r = mpirun(3, [SCAL, '--weights', P('s.st'), '--input', P('o5.npy'), '-o', P('sc.npy')])
    ok('0-dim output over 3 ranks', r.returncode == 0 and r.stderr.count('dpc: warning:') == 1 and
       np.load(P('sc.npy')).tolist() == [6.0, 6.0, 3.0], r.stderr)

    # ---- -v: the split, on rank 0 only ----
    r = mpirun(3, [PARALLEL, '--weights', P('p.st'), '--input', P('x1.npy'), '-v', '-o', P('v.npy')])
    ok('-v over 3 ranks at batch 1', r.returncode == 0 and r.stderr.count('dpc: batch 1 over 3 MPI ranks, 1 working') == 1
       and 'rank 0 on' in r.stderr and 'rows [0, 1)' in r.stderr and r.stderr.count(': idle') == 2, r.stderr)

    # ---- failures ----
    def failure(name, n, args, outs, want_rank, want_text, env):
        """Once with mpirun's own abort (its status must be non-zero), once
        letting every rank finish (each must exit non-zero)."""
        sd = P('status')
        for keep in (False, True):
            shutil.rmtree(sd, ignore_errors=True)
            os.mkdir(sd)
            r = mpirun(n, args + sum((['-o', P(o)] for o in outs), []), wrap=WRAP,
                       env=dict(env, STATUS_DIR=sd), keep_going=keep)
            errs = errors(r.stderr)
            good = r.returncode != 'timeout' and len(errs) == 1 and \
                errs[0].startswith('dpc: error: rank %d: ' % want_rank) and want_text in errs[0] and \
                not any(os.path.exists(P(o)) for o in outs)
            if keep:
                st = [open(os.path.join(sd, 'rank%d' % i)).read().strip() if os.path.exists(
                    os.path.join(sd, 'rank%d' % i)) else 'none' for i in range(n)]
                good = good and all(s not in ('0', 'none') for s in st)
                ok(name + ' (every rank fails)', good, 'statuses %s; %s' % (st, r.stderr))
            else:
                ok(name, good and r.returncode != 0, 'rc %s; %s' % (r.returncode, r.stderr))

    pa = [PARALLEL, '--weights', P('p.st'), '--input', P('x5.npy')]
    failure('injected failure on rank 1 of 3', 3, pa, ['f.npy'], 1, 'injected failure', {'FAULT_RANKS': '1'})
    failure('injected failures on ranks 2 and 1', 3, pa, ['f.npy'], 1, 'injected failure', {'FAULT_RANKS': '2 1'})
    failure('injected failure on rank 0 of 2', 2, pa, ['f.npy'], 0, 'injected failure', {'FAULT_RANKS': '0'})
    failure('missing input on rank 2 of 3', 3, pa, ['f.npy'], 2, 'missing.npy',
            {'SWAP_RANK': '2', 'SWAP_FROM': P('x5.npy'), 'SWAP_TO': P('missing.npy')})
    np.save(P('wrong.npy'), np.zeros((5, 1, 16, 17), np.float32))
    failure('wrongly shaped input on rank 1 of 2', 2, pa, ['f.npy'], 1, "input 'x' must have shape",
            {'SWAP_RANK': '1', 'SWAP_FROM': P('x5.npy'), 'SWAP_TO': P('wrong.npy')})
    failure('mismatched batches (every rank)', 3, [MULTI, '--weights', P('m.st'), '--input', P('a5.npy'),
            '--input', P('b1.npy')], ['f1.npy', 'f2.npy'], 0, "input 'b' has batch 1 but 'a' has batch 5", {})

print('%d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
