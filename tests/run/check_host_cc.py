#!/usr/bin/python3
"""The host compiler of the CPU backend (issue 10, items 8 and 13): a
compiler that hangs is stopped after $DPC_CC_TIMEOUT with a clear error; one
that exits 0 with junk (or nothing) is not cached; dpc killed by a signal
while it compiles takes the compiler with it; CC names a missing program or
carries arguments; a refused cache directory is said once. In every case no
dpc-cc-* directory is left in $TMPDIR and no compiler process outlives dpc.

    check_host_cc.py DPC MODELS_DIR
"""
import glob, os, shutil, signal, subprocess, sys, tempfile, time
import numpy as np

dpc, models = sys.argv[1], sys.argv[2]
SIMPLE = os.path.join(models, 'simple.dp')
failures = passed = 0

# A fake compiler: answers --version, records its process ids (itself and
# a child, both must die with it) and its TMPDIR, then does MODE.
FAKE = r'''#!/bin/sh
if [ "$1" = --version ]; then echo "fake-cc 1.0"; exit 0; fi
out=
while [ $# -gt 0 ]; do if [ "$1" = -o ]; then out=$2; fi; shift; done
echo "$TMPDIR" > "%(d)s/fake_tmpdir"
case %(mode)s in
  sleep) sleep 30 & echo $$ $! > "%(d)s/fake_pids.tmp"; mv "%(d)s/fake_pids.tmp" "%(d)s/fake_pids"; wait ;;
  junk) echo 'not a shared object' > "$out" ;;
  nothing) ;;
  noentry) exec %(cc)s -shared -fPIC -x c /dev/null -o "$out" ;;
esac
'''


def check(name, ok, detail=''):
    global failures, passed
    print('%-52s %s' % (name, 'ok' if ok else 'FAIL %s' % str(detail).strip()[:1500]))
    failures += not ok
    passed += ok
    return ok


def alive(pid):
    """True while pid exists and is not a zombie waiting to be reaped."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def gone(pids, within=3.0):
    end = time.time() + within
    while any(alive(p) for p in pids) and time.time() < end:
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


def default_signals():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


class Case:
    """A fresh TMPDIR and cache directory for one run of dpc."""

    def __init__(self, root, name, cache_mode=None):
        self.d = os.path.join(root, name)
        self.tmp = os.path.join(self.d, 'tmp')
        self.cache = os.path.join(self.d, 'cache')
        os.makedirs(self.tmp)
        if cache_mode is not None:
            os.mkdir(self.cache)
            os.chmod(self.cache, cache_mode)

    def fake(self, mode):
        path = os.path.join(self.d, 'fake-cc')
        cc = shutil.which('cc') or 'gcc'
        open(path, 'w').write(FAKE % {'d': self.d, 'mode': mode, 'cc': cc})
        os.chmod(path, 0o755)
        return path

    def env(self, cc=None, **extra):
        env = dict(os.environ, TMPDIR=self.tmp, DPC_CACHE_DIR=self.cache, **extra)
        if cc is not None:
            env['CC'] = cc
        return env

    def leftovers(self):
        return glob.glob(os.path.join(self.tmp, 'dpc-cc-*'))

    def entries(self):
        return os.listdir(self.cache) if os.path.isdir(self.cache) else []

    def fake_pids(self):
        try:
            return [int(p) for p in open(os.path.join(self.d, 'fake_pids')).read().split()]
        except (OSError, ValueError):
            return []


def run_args(d, out):
    return [dpc, 'run', SIMPLE, '--weights', os.path.join(d, 'w.st'), '--input', os.path.join(d, 'x.npy'), '-o', out]


def run(case, env, timeout=60):
    out = os.path.join(case.d, 'y.npy')
    p = subprocess.Popen(run_args(ROOT, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=default_signals)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        err = 'dpc still running after %d s; killed. %s' % (timeout, err)
    return p.returncode, err, out


def kill_fakes(case):
    for pid in case.fake_pids():  # what an old dpc leaves behind
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_timeout(root):
    c = Case(root, 'timeout')
    t0 = time.time()
    rc, err, _ = run(c, c.env(c.fake('sleep'), DPC_CC_TIMEOUT='2'), timeout=25)
    took = time.time() - t0
    check('hanging compiler: stopped after DPC_CC_TIMEOUT=2',
          rc == 1 and "did not finish within 2 s" in err and "host compiler '%s'" % c.fake('sleep') in err
          and took < 15, 'exit %s after %.1f s: %s' % (rc, took, err))
    check('hanging compiler: no process left', c.fake_pids() and gone(c.fake_pids()), c.fake_pids())
    check('hanging compiler: no dpc-cc-* left in TMPDIR', not c.leftovers(), c.leftovers())
    kill_fakes(c)
    c2 = Case(root, 'bad_timeout')
    rc, err, _ = run(c2, c2.env(DPC_CC_TIMEOUT='abc'))
    check('DPC_CC_TIMEOUT=abc: refused', rc != 0 and 'DPC_CC_TIMEOUT' in err, err)


def test_junk(root):
    for mode, needle in (('junk', 'not a shared object'), ('nothing', 'missing'), ('noentry', 'dpc_forward')):
        c = Case(root, 'junk_' + mode)
        rc, err, out = run(c, c.env(c.fake(mode)))
        check('compiler exits 0, output %s: clear error' % mode,
              rc == 1 and 'exited 0 but gave no usable kernels' in err and needle in err and not os.path.exists(out),
              'exit %s: %s' % (rc, err))
        check('compiler exits 0, output %s: nothing cached' % mode, not c.entries(), c.entries())
        check('compiler exits 0, output %s: no dpc-cc-* left' % mode, not c.leftovers(), c.leftovers())


def test_signal(root, sig):
    c = Case(root, 'signal_%d' % sig)
    out = os.path.join(c.d, 'y.npy')
    p = subprocess.Popen(run_args(ROOT, out), env=c.env(c.fake('sleep')), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    end = time.time() + 30
    while not c.fake_pids() and time.time() < end and p.poll() is None:
        time.sleep(0.05)
    pids = c.fake_pids()
    tmpdir = open(os.path.join(c.d, 'fake_tmpdir')).read().strip() if pids else ''
    name = signal.Signals(sig).name
    check('%s: the compiler runs in a dpc-cc-* dir of TMPDIR' % name,
          pids and os.path.dirname(tmpdir) == c.tmp and os.path.basename(tmpdir).startswith('dpc-cc-'),
          'pids %s, TMPDIR of the compiler %r' % (pids, tmpdir))
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    check('%s during compilation: dpc dies of it' % name, p.returncode == -sig, 'exit %s: %s' % (p.returncode, err))
    check('%s during compilation: no compiler process left' % name, pids and gone(pids), pids)
    check('%s during compilation: no dpc-cc-* left in TMPDIR' % name, not c.leftovers(), c.leftovers())
    kill_fakes(c)


def test_sigkill(root):
    """SIGKILL cannot be handled: PR_SET_PDEATHSIG kills the compiler
    process itself (its own children and directory may outlive dpc)."""
    c = Case(root, 'sigkill')
    p = subprocess.Popen(run_args(ROOT, os.path.join(c.d, 'y.npy')), env=c.env(c.fake('sleep')),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=default_signals)
    end = time.time() + 30
    while not c.fake_pids() and time.time() < end and p.poll() is None:
        time.sleep(0.05)
    pids = c.fake_pids()
    p.kill()
    p.wait()
    check('SIGKILL during compilation: the compiler dies with dpc', pids and gone(pids[:1]), pids)
    kill_fakes(c)


def test_cc_words(root):
    c = Case(root, 'nonexistent')
    rc, err, out = run(c, c.env('/nonexistent'))
    check('CC=/nonexistent: says why',
          rc == 1 and "cannot run host compiler '/nonexistent': No such file or directory" in err
          and 'failed (-1)' not in err, 'exit %s: %s' % (rc, err))
    check('CC=/nonexistent: no dpc-cc-* left', not c.leftovers(), c.leftovers())
    ref = Case(root, 'default_cc')
    rc0, err0, out0 = run(ref, ref.env())
    gcc = shutil.which('gcc') or shutil.which('cc')
    c = Case(root, 'cc_words')
    rc, err, out = run(c, c.env('%s -O2' % gcc))
    same = rc == 0 and rc0 == 0 and np.allclose(np.load(out), np.load(out0), rtol=1e-6, atol=1e-6)
    check('CC="gcc -O2": runs simple.dp, same result', same, 'exit %s/%s: %s %s' % (rc, rc0, err0, err))
    check('CC="gcc -O2": cached, no dpc-cc-* left', len(c.entries()) == 1 and not c.leftovers(),
          (c.entries(), c.leftovers()))


def test_refused_cache(root):
    cases = [('mode 0777', 0o777, None)]
    if os.geteuid() == 0:
        cases.append(('owned by uid 65534', 0o700, 65534))
    for label, mode, uid in cases:
        c = Case(root, 'refused_%o_%s' % (mode, uid), cache_mode=mode)
        if uid is not None:
            os.chown(c.cache, uid, -1)
        rc, err, out = run(c, c.env())
        warnings = [l for l in err.splitlines() if 'kernel cache directory' in l]
        check('cache dir %s: the run works' % label, rc == 0 and os.path.exists(out), 'exit %s: %s' % (rc, err))
        check('cache dir %s: one warning line on stderr' % label,
              len(warnings) == 1 and warnings[0].startswith('dpc: warning:') and 'refusing' in warnings[0], err)
        check('cache dir %s: nothing cached, no dpc-cc-* left' % label, not c.entries() and not c.leftovers(),
              (c.entries(), c.leftovers()))


with tempfile.TemporaryDirectory() as ROOT:
    r = subprocess.run([dpc, 'init', SIMPLE, '-o', os.path.join(ROOT, 'w.st')], capture_output=True, text=True)
    if not check('dpc init simple.dp', r.returncode == 0, r.stderr):
        sys.exit(1)
    np.save(os.path.join(ROOT, 'x.npy'), np.random.RandomState(0).randn(3, 10).astype(np.float32))
    test_timeout(ROOT)
    test_junk(ROOT)
    test_signal(ROOT, signal.SIGTERM)
    test_signal(ROOT, signal.SIGINT)
    test_signal(ROOT, signal.SIGHUP)
    test_sigkill(ROOT)
    test_cc_words(ROOT)
    test_refused_cache(ROOT)
print('%d passed, %d failed' % (passed, failures))
sys.exit(1 if failures else 0)
