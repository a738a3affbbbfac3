#!/usr/bin/python3
"""`cmake --install` into a temporary prefix, then use libdpc as a user would.

  check_install.py --cmake CMAKE --build BUILD_DIR --source SOURCE_DIR --dpc DPC [--sanitize KIND]

- The prefix holds bin/dpc, include/dpc.h, libdpc.so (+ soname links),
  libdpc.a, pkgconfig/dpc.pc and the CMake package; libdpc.so exports exactly
  the functions declared in dpc.h, and docs/c-api.md documents each.
- docs/examples/run_model.c is built with `pkg-config --cflags --libs dpc`
  and nothing else (-std=c11 -Wall -Wextra -Wpedantic -Werror), and its
  output (.npy bytes and printed values) equals `dpc run` on the same model:
  parallel_model compiled with --arch sm_90 (no GPU needed) with embedded
  weights, and without (--weights), on one and two CPU replicas; a model
  with two outputs and a keyword scalar; generated inputs.
- dpc.h compiles as C99 and as C++.
- The CMake package: a project with find_package(dpc) builds the example
  against dpc::dpc and dpc::dpc_static; the static library through
  `pkg-config --static`; the prefix still works after being moved.
Skipped (77) in sanitizer builds: the installed libraries would need the
sanitizer runtimes preloaded into the example.
"""
import argparse, glob, json, os, re, shutil, subprocess, sys, tempfile
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument('--cmake', required=True)
ap.add_argument('--build', required=True)
ap.add_argument('--source', required=True)
ap.add_argument('--dpc', required=True)
ap.add_argument('--sanitize', default='')
A = ap.parse_args()
if A.sanitize not in ('', 'OFF', 'FALSE', '0'):
    print('skipped: sanitizer build (%s)' % A.sanitize)
    sys.exit(77)

CC = os.environ.get('CC', 'cc')
SRC = os.path.abspath(A.source)
EXAMPLE = os.path.join(SRC, 'docs', 'examples', 'run_model.c')
failures = passed = 0


def check(name, ok, detail=''):
    global failures, passed
    print('%-62s %s' % (name, 'ok' if ok else 'FAIL ' + str(detail)[-1500:]))
    failures += not ok
    passed += bool(ok)
    return ok


def sh(cmd, env=None, cwd=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(cmd, shell=True, capture_output=True, env=e, cwd=cwd)
    return r.returncode, r.stdout.decode(errors='replace'), r.stderr.decode(errors='replace')


def values(text):
    """'output i: dtype[dims]' headers and values printed by run_model"""
    outs = []
    for line in text.splitlines():
        if line.startswith('output '):
            outs.append([])
        elif outs:
            outs[-1].append(line)
    return outs


def printed_like(ref_paths, text):
    outs = values(text)
    if len(outs) != len(ref_paths):
        return False
    for vals, p in zip(outs, ref_paths):
        a = np.load(p)
        want = ['%.9g' % float(v) if a.dtype == np.float32 else '%d' % v for v in a.ravel()]
        if vals != want:
            return False
    return True


with tempfile.TemporaryDirectory() as d:
    prefix = os.path.join(d, 'prefix')
    rc, out, err = sh('"%s" --install "%s" --prefix "%s"' % (A.cmake, A.build, prefix))
    if not check('cmake --install into a temporary prefix', rc == 0, err):
        sys.exit(1)
    pcs = glob.glob(os.path.join(prefix, '**', 'pkgconfig', 'dpc.pc'), recursive=True)
    libdir = os.path.dirname(os.path.dirname(pcs[0])) if pcs else ''
    files = ['bin/dpc', 'include/dpc.h']
    ok = len(pcs) == 1 and all(os.path.exists(os.path.join(prefix, f)) for f in files)
    for f in ('libdpc.so', 'libdpc.a', 'cmake/dpc/dpcConfig.cmake', 'cmake/dpc/dpcConfigVersion.cmake'):
        ok = ok and os.path.exists(os.path.join(libdir, f))
    ok = ok and bool(glob.glob(os.path.join(libdir, 'libdpc.so.*')))
    check('installed: dpc, dpc.h, libdpc.so/.a, dpc.pc, CMake package', ok, sorted(
        os.path.relpath(os.path.join(r, f), prefix) for r, _, fs in os.walk(prefix) for f in fs))
    env = {'PKG_CONFIG_PATH': os.path.dirname(pcs[0]) if pcs else '', 'LD_LIBRARY_PATH': libdir}

    # ---- exports and documentation
    header = open(os.path.join(prefix, 'include', 'dpc.h')).read()
    declared = set(re.findall(r'DPC_API [^;(#\n]*[ *](dpc_[a-z0-9_]+)\(', header))
    rc, out, err = sh('nm -D --defined-only "%s"' % os.path.join(libdir, 'libdpc.so'))
    exported = set(l.split()[-1].split('@')[0] for l in out.splitlines() if l.split() and l.split()[1] in 'TtDdBbVWR')
    exported = {s for s in exported if not s.startswith('_')}
    check('libdpc.so exports exactly the %d functions of dpc.h' % len(declared),
          rc == 0 and len(declared) > 30 and exported == declared,
          'extra %s missing %s' % (sorted(exported - declared)[:10], sorted(declared - exported)[:10]))
    doc = open(os.path.join(SRC, 'docs', 'c-api.md')).read()
    undocumented = sorted(f for f in declared if f not in doc)
    check('docs/c-api.md documents every function', not undocumented, undocumented)

    # ---- the example, built with pkg-config alone
    ex = os.path.join(d, 'run_model')
    rc, out, err = sh('%s -std=c11 -Wall -Wextra -Wpedantic -Werror "%s" $(pkg-config --cflags --libs dpc) -o "%s"'
                      % (CC, EXAMPLE, ex), env)
    check('example built with `pkg-config --cflags --libs dpc` alone', rc == 0, err)
    rc1, _, err1 = sh('printf "#include <dpc.h>\\n" | %s -std=c99 -Wall -Wpedantic -Werror -fsyntax-only -x c - '
                      '$(pkg-config --cflags dpc)' % CC, env)
    cxx = shutil.which('c++') or shutil.which('g++')
    rc2, _, err2 = (0, '', '') if not cxx else sh(
        'printf "#include <dpc.h>\\n" | %s -Wall -Werror -fsyntax-only -x c++ - $(pkg-config --cflags dpc)' % cxx,
        env)
    check('dpc.h compiles as C99 and as C++', rc1 == 0 and rc2 == 0, err1 + err2)

    # ---- models, with the installed dpc
    dpc = os.path.join(prefix, 'bin', 'dpc')
    models = os.path.join(SRC, 'models')
    P = lambda n: os.path.join(d, n)
    steps = [
        '"%s" init "%s/parallel_model.dp" -o pm.st --seed 3' % (dpc, models),
        '"%s" compile "%s/parallel_model.dp" -o pm.dpa --arch sm_90' % (dpc, models),
        '"%s" compile "%s/parallel_model.dp" -o pm_w.dpa --arch sm_90 --weights pm.st' % (dpc, models),
        '"%s" init "%s/imports.dp" -o imp.st --seed 4' % (dpc, models),
        '"%s" compile "%s/imports.dp" -o imp_w.dpa --weights imp.st' % (dpc, models),
    ]
    for s in steps:
        rc, out, err = sh(s, env, cwd=d)
        check('installed dpc:' + s.split('"')[2].split('-o')[0] + '-o' + s.split('-o')[1], rc == 0, err)
    rng = np.random.RandomState(1)
    np.save(P('x.npy'), rng.randn(7, 1, 17, 17).astype(np.float32))
    np.save(P('x10.npy'), rng.randn(5, 10).astype(np.float32))
    rc, out, err = sh('"%s" inspect pm_w.dpa' % dpc, env, cwd=d)
    check('dpc inspect pm_w.dpa (sm_90 CUBIN, embedded weights)', rc == 0 and 'sm_90 (CUBIN' in out and
          'weights:       embedded' in out and 'ParallelModel' in out, out + err)

    def compare(name, ex_args, run_args, nout=1):
        refs = [P('ref%d.npy' % i) for i in range(nout)]
        for p in refs + [P('ex.npy')]:
            if os.path.exists(p):
                os.unlink(p)
        rc, out, err = sh('"%s" run %s %s' % (dpc, run_args, ' '.join('-o ' + r for r in refs)), env, cwd=d)
        if not check(name + ': dpc run', rc == 0, err):
            return
        rc, out, err = sh('"%s" %s -o ex.npy' % (ex, ex_args), env, cwd=d)
        same = rc == 0 and open(P('ex.npy'), 'rb').read() == open(refs[0], 'rb').read()
        check(name + ': example == dpc run (bytes and printed values)', same and printed_like(refs, out),
              'exit %d: %s' % (rc, err))

    compare('pm_w.dpa, embedded weights', 'pm_w.dpa x.npy', 'pm_w.dpa --input x.npy')
    compare('pm_w.dpa vs the .dp', 'pm_w.dpa x.npy', '"%s/parallel_model.dp" --weights pm.st --input x.npy' % models)
    compare('pm.dpa + --weights, 2 replicas', 'pm.dpa x.npy --weights pm.st --devices cpu,cpu',
            'pm.dpa --weights pm.st --input x.npy --devices cpu,cpu')
    compare('imports: tuple output, keyword scalar', 'imp_w.dpa x10.npy --kw gain=2.5',
            'imp_w.dpa --input x10.npy --kw gain=2.5', nout=2)
    rc, out, err = sh('"%s" pm_w.dpa --batch 3' % ex, env, cwd=d)
    check('example with generated inputs', rc == 0 and out.startswith('output 0: float32[3, 10]') and
          len(values(out)[0]) == 30, out[:200] + err)
    blob = bytearray(open(P('pm_w.dpa'), 'rb').read())
    blob[200] ^= 0xff
    open(P('broken.dpa'), 'wb').write(blob)
    rc, out, err = sh('"%s" broken.dpa x.npy' % ex, env, cwd=d)
    check('example on a corrupted artifact: the library says why', rc == 1 and 'run_model: load: ' in err and
          'broken.dpa' in err and not out, err)

    # ---- static, through pkg-config --static
    exs = P('run_model_static')
    rc, out, err = sh('%s -std=c11 "%s" $(pkg-config --cflags dpc) "%s/libdpc.a" '
                      '$(pkg-config --static --libs dpc | sed "s/-ldpc//") -o "%s"' % (CC, EXAMPLE, libdir, exs), env)
    if check('static link through pkg-config --static', rc == 0, err):
        rc, out, err = sh('"%s" imp_w.dpa x10.npy --kw gain=2.5 -o static.npy && cmp static.npy ref0.npy' % exs,
                          {}, cwd=d)
        check('static example == dpc run', rc == 0, err)

    # ---- the CMake package
    proj = P('consumer')
    os.mkdir(proj)
    shutil.copy(EXAMPLE, proj)
    open(os.path.join(proj, 'CMakeLists.txt'), 'w').write(
        'cmake_minimum_required(VERSION 3.20)\nproject(consumer C)\n'
        'find_package(dpc 0.1 REQUIRED)\n'
        'add_executable(ex_shared run_model.c)\ntarget_link_libraries(ex_shared PRIVATE dpc::dpc)\n'
        'add_executable(ex_static run_model.c)\ntarget_link_libraries(ex_static PRIVATE dpc::dpc_static)\n')
    rc, out, err = sh('"%s" -S "%s" -B "%s/b" -DCMAKE_PREFIX_PATH="%s" && "%s" --build "%s/b"' %
                      (A.cmake, proj, proj, prefix, A.cmake, proj), {})
    if check('find_package(dpc): dpc::dpc and dpc::dpc_static build', rc == 0, out[-800:] + err):
        rc1, _, err1 = sh('"%s/b/ex_shared" imp_w.dpa x10.npy --kw gain=2.5 -o cs.npy && cmp cs.npy ref0.npy' % proj,
                          {}, cwd=d)
        rc2, _, err2 = sh('"%s/b/ex_static" imp_w.dpa x10.npy --kw gain=2.5 -o cst.npy && cmp cst.npy ref0.npy' %
                          proj, {}, cwd=d)
        check('CMake-built examples (shared, static) == dpc run', rc1 == 0 and rc2 == 0, err1 + err2)

    # ---- relocation: the .pc and the CMake package find the moved prefix
    moved = P('moved')
    shutil.move(prefix, moved)
    menv = {'PKG_CONFIG_PATH': os.path.dirname(pcs[0]).replace(prefix, moved),
            'LD_LIBRARY_PATH': libdir.replace(prefix, moved)}
    rc, out, err = sh('%s -std=c11 "%s" $(pkg-config --cflags --libs dpc) -o ex_moved && ./ex_moved imp_w.dpa x10.npy '
                      '--kw gain=2.5 -o mv.npy && cmp mv.npy ref0.npy' % (CC, EXAMPLE), menv, cwd=d)
    check('moved prefix: pkg-config build and run still work', rc == 0, err)

print('%d passed, %d failed' % (passed, failures))
sys.exit(1 if failures else 0)
