#!/usr/bin/python3
"""No binary of dpc loads libraries from the current directory (issue 10,
item 3).

    check_rpath.py elf BUILD_DIR CMAKE   every ELF file of the build tree, and
                                         of `cmake --install` into a temporary
                                         prefix, has RPATH/RUNPATH entries that
                                         are absolute or start with $ORIGIN
    check_rpath.py plant DPC MODEL       a libdnnl.so.2 (and libcjson.so.1)
                                         planted in the cwd, whose constructor
                                         writes a marker, is not loaded by
                                         `dpc print MODEL`
"""
import os, re, shutil, subprocess, sys, tempfile

failures = 0


def check(name, ok, detail=''):
    global failures
    print('%-60s %s' % (name, 'ok' if ok else 'FAIL %s' % str(detail)[:2000]))
    failures += not ok
    return ok


def is_elf(path):
    try:
        with open(path, 'rb') as f:
            return f.read(4) == b'\x7fELF'
    except OSError:
        return False


def bad_entries(path):
    """The RPATH/RUNPATH entries of path that can name a relative place."""
    r = subprocess.run(['readelf', '-d', path], capture_output=True, text=True)
    bad = []
    for m in re.finditer(r'\((?:RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[(.*)\]', r.stdout):
        for entry in m.group(1).split(':'):
            if not (entry.startswith('/') or entry.startswith('$ORIGIN') or entry.startswith('${ORIGIN}')):
                bad.append(repr(entry))
    return bad


def elf_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != 'CMakeFiles']  # CMake's own probes
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p) and is_elf(p):
                yield p


def check_tree(label, root):
    files = list(elf_files(root))
    bad = {os.path.relpath(p, root): b for p in files for b in [bad_entries(p)] if b}
    check('%s: %d ELF files, no empty or relative RPATH/RUNPATH entry' % (label, len(files)),
          len(files) > 0 and not bad, bad)
    return files


def elf_mode(build, cmake):
    files = check_tree('build tree', build)
    names = {os.path.basename(p) for p in files}
    check('build tree holds dpc, libdpc.so and test programs',
          'dpc' in names and any(n.startswith('libdpc.so') for n in names) and len(names) > 5, sorted(names))
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([cmake, '--install', build, '--prefix', d], capture_output=True, text=True)
        check("cmake --install into a temporary prefix", r.returncode == 0, r.stderr)
        if r.returncode == 0:
            check_tree('install tree', d)


PLANT = r'''
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) { (void)write(fd, "loaded\n", 7); close(fd); }
}
'''


def plant_mode(dpc, model):
    cc = shutil.which('cc') or shutil.which('gcc')
    with tempfile.TemporaryDirectory() as d:
        marker = os.path.join(d, 'MARKER')
        src = os.path.join(d, 'plant.c')
        open(src, 'w').write(PLANT)
        for lib in ('libdnnl.so.2', 'libcjson.so.1'):
            r = subprocess.run([cc, '-shared', '-fPIC', '-DMARKER="%s"' % marker, src, '-o', os.path.join(d, lib)],
                               capture_output=True, text=True)
            if not check('planted %s built' % lib, r.returncode == 0, r.stderr):
                return
        env = dict(os.environ)
        env.pop('LD_LIBRARY_PATH', None)
        r = subprocess.run([os.path.abspath(dpc), 'print', os.path.abspath(model)], cwd=d, env=env,
                           capture_output=True, text=True, timeout=120)
        check('dpc print in a cwd with planted libraries: not loaded', not os.path.exists(marker),
              'the planted library ran its constructor')
        check('dpc print still works there', r.returncode == 0 and r.stdout.strip(), r.stderr)


if __name__ == '__main__':
    if len(sys.argv) != 4 or sys.argv[1] not in ('elf', 'plant'):
        sys.exit(__doc__)
    (elf_mode if sys.argv[1] == 'elf' else plant_mode)(sys.argv[2], sys.argv[3])
    print('%s' % ('FAILED' if failures else 'all passed'))
    sys.exit(1 if failures else 0)
