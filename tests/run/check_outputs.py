#!/usr/bin/python3
"""What dpc does to the files named by -o (docs/cli.md, "Output files"):
a failed run, compile, init or graph leaves every pre-existing file as it
was and no temporary behind; a planted symlink never redirects a write;
streams (/dev/null, a FIFO) are written through, never replaced; a
directory, or an -o that is also the model, the weights, an input or
another -o, is refused.

  check_outputs.py DPC            every case this user can run (root-only
                                  ones are skipped, and say so)
  check_outputs.py DPC --full-fs  the outputs on a full filesystem: a 64 KiB
                                  tmpfs mounted for the test; exit 77 (skip)
                                  unless root and mount works
"""
import os, stat, subprocess, sys, tempfile, threading
import numpy as np

SKIP = 77
dpc = sys.argv[1]
full_fs = '--full-fs' in sys.argv[2:]
root = os.geteuid() == 0
failures = passed = 0

TWO_OUT = '''module TwoOut {
    fc1 = Linear(10, 5)
    fc2 = Linear(10, 5)

    forward(x: [N, 10]) {
        return fc1(x), fc2(x)
    }
}
model = DataParallel(TwoOut())
'''


def report(name, ok, why=''):
    global failures, passed
    print('%-34s %s' % (name, 'ok' if ok else 'FAIL ' + why))
    failures += not ok
    passed += ok


def skip(name, why):
    print('%-34s skipped (%s)' % (name, why))


def dpc_run(*args):
    return subprocess.run([dpc] + list(args), capture_output=True, text=True)


def content(path):
    """The bytes of path, None if it is gone (what a broken dpc may do)."""
    try:
        with open(path, 'rb') as f:
            return f.read()
    except FileNotFoundError:
        return None


def rm(path):
    if os.path.lexists(path):
        os.unlink(path)


def temps(d):
    return [n for n in os.listdir(d) if '.tmp' in n]


def clean_error(r, code=1):
    """Exit code, one `dpc: error:` (or usage) line, no crash."""
    return r.returncode == code and 'dpc:' in r.stderr and 'Sanitizer' not in r.stderr and 'Traceback' not in r.stderr


def setup(d):
    model = os.path.join(d, 'two_out.dp')
    with open(model, 'w') as f:
        f.write(TWO_OUT)
    w = os.path.join(d, 'w.safetensors')
    r = dpc_run('init', model, '-o', w)
    if r.returncode:
        sys.exit('dpc init failed: ' + r.stderr)
    x = os.path.join(d, 'x.npy')
    np.save(x, np.ones((1000, 10), np.float32))  # outputs of 20 KB: 5 pages each
    return model, w, x


def run_args(model, w, x, *outs):
    a = ['run', model, '--weights', w, '--input', x]
    for o in outs:
        a += ['-o', o]
    return a


def outputs_ok(path):
    a = np.load(path)
    return a.shape == (1000, 5)


# ---- cases for every user -------------------------------------------------

def case_graph_planted_tmp(d, model):
    """`graph -o F.svg` used to render into the fixed name F.svg.tmp: a symlink
    planted there made dpc overwrite whatever it pointed at."""
    if subprocess.run(['sh', '-c', 'command -v dot'], capture_output=True).returncode:
        return skip('graph_planted_symlink', 'no Graphviz dot')
    victim, out = os.path.join(d, 'victim'), os.path.join(d, 'g.svg')
    open(victim, 'wb').write(b'victim')
    os.symlink(victim, out + '.tmp')
    r = dpc_run('graph', model, '-o', out)
    ok = r.returncode == 0 and content(victim) == b'victim' and b'<svg' in content(out)
    ok = ok and not os.path.islink(out)
    report('graph_planted_symlink', ok, r.stderr.strip()[:200] + ' victim=%r' % (content(victim) or b'')[:20])
    rm(out + '.tmp')


def case_graph_no_dot(d, model):
    """Without Graphviz, `graph -o F.svg` used to exit 0 (render_svg returned
    success after failing to start dot) and print nothing useful; and its
    input went through a fixed /tmp/dpc-graph-* name. Now: exit 1, a clean
    message, no F.svg, and nothing left in TMPDIR by either run."""
    out, tmp = os.path.join(d, 'nodot.svg'), os.path.join(d, 'graph_tmp')
    os.mkdir(tmp)
    env = dict(os.environ, PATH=os.path.join(d, 'empty-path'), TMPDIR=tmp)
    r = subprocess.run([dpc, 'graph', model, '-o', out], capture_output=True, text=True, env=env)
    ok = clean_error(r) and 'Graphviz' in r.stderr and content(out) is None and not os.listdir(tmp)
    report('graph_without_dot', ok, 'rc=%d %s' % (r.returncode, r.stderr.strip()[:200]))
    rm(out)
    os.rmdir(tmp)


def case_run_planted_tmp(d, model, w, x):
    """`run` used to write OUT.tmp.<pid> with O_CREAT|O_TRUNC: a symlink planted
    at the name followed. The pid is known when dpc is exec'ed by a shell
    that first sleeps; the symlink is planted in that window."""
    victim, out = os.path.join(d, 'victim2'), os.path.join(d, 'planted.npy')
    open(victim, 'wb').write(b'victim')
    cmd = 'sleep 0.5; exec "$0" "$@"'
    p = subprocess.Popen(['sh', '-c', cmd, dpc] + run_args(model, w, x, out, out + '2'),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    planted = ['%s.tmp.%d' % (o, p.pid) for o in (out, out + '2')]
    for link in planted:
        os.symlink(victim, link)
    _, err = p.communicate()
    ok = p.returncode == 0 and content(victim) == b'victim' and not os.path.islink(out) and outputs_ok(out)
    report('run_planted_symlink', ok, err.strip()[:200] + ' victim=%r' % (content(victim) or b'')[:20])
    for p in planted + [out, out + '2']:
        rm(p)


def case_second_output_fails(d, model, w, x):
    """The second -o cannot be written (no such directory): the first output's
    previous content must survive (it used to be unlinked)."""
    first = os.path.join(d, 'keep.npy')
    open(first, 'wb').write(b'old content')
    r = dpc_run(*run_args(model, w, x, first, os.path.join(d, 'nodir', 'b.npy')))
    ok = clean_error(r) and 'nodir/b.npy' in r.stderr and content(first) == b'old content' and not temps(d)
    report('second_output_fails', ok, r.stderr.strip()[:200])
    rm(first)


def case_symlink_output(d, model, w, x):
    """-o LINK, LINK a symlink to a regular file: the file it names is
    replaced (atomically), the link stays a link."""
    target, link = os.path.join(d, 'target.npy'), os.path.join(d, 'link.npy')
    open(target, 'wb').write(b'old')
    os.symlink('target.npy', link)
    r = dpc_run(*run_args(model, w, x, link, os.path.join(d, 'other.npy')))
    ok = r.returncode == 0 and os.path.islink(link) and outputs_ok(target) and not temps(d)
    report('symlink_output_followed', ok, r.stderr.strip()[:200])
    for p in (target, link, os.path.join(d, 'other.npy')):
        rm(p)


def case_dangling_symlink(d, model, w, x):
    link, first = os.path.join(d, 'dangling.npy'), os.path.join(d, 'first.npy')
    os.symlink('nothing-here', link)
    open(first, 'wb').write(b'old')
    r = dpc_run(*run_args(model, w, x, first, link))
    ok = clean_error(r) and 'symbolic link to nothing' in r.stderr and os.path.islink(link)
    ok = ok and content(first) == b'old' and not os.path.exists(os.path.join(d, 'nothing-here'))
    report('dangling_symlink_refused', ok, r.stderr.strip()[:200])
    rm(link)
    rm(first)


def case_fifo(d, model, w, x):
    """A FIFO is written through (a reader gets the .npy) and stays a FIFO."""
    fifo, other = os.path.join(d, 'fifo'), os.path.join(d, 'other.npy')
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(content(fifo)), daemon=True)
    reader.start()
    r = dpc_run(*run_args(model, w, x, fifo, other))
    if reader.is_alive():  # dpc never opened it: let the reader go
        with open(fifo, 'wb'):
            pass
    reader.join(5)
    ok = r.returncode == 0 and stat.S_ISFIFO(os.lstat(fifo).st_mode) and got and got[0][:6] == b'\x93NUMPY'
    report('fifo_written_through', ok, r.stderr.strip()[:200])
    rm(fifo)
    rm(other)


def case_descriptor_name(d, model, w, x):
    """-o /dev/fd/1 with stdout redirected to a file: that file (the open
    descriptor) receives the output; the name is not resolved and replaced."""
    log, other = os.path.join(d, 'stdout.npy'), os.path.join(d, 'other.npy')
    with open(log, 'wb') as f:
        ino = os.fstat(f.fileno()).st_ino
        r = subprocess.run([dpc] + run_args(model, w, x, '/dev/fd/1', other), stdout=f, stderr=subprocess.PIPE,
                           text=True)
    ok = r.returncode == 0 and os.stat(log).st_ino == ino and outputs_ok(log)
    report('descriptor_name_written_through', ok, r.stderr.strip()[:200])
    rm(log)
    rm(other)


def case_devices(d, model, w, x):
    """-o on a character device writes through it. As root a private copy of
    /dev/null (mknod 1,3) is tried first; only if that one survives is the
    real /dev/null used, so that a broken dpc cannot replace the system's."""
    if not root:
        return skip('dev_null_stays_a_device', 'not root')
    mine = os.path.join(d, 'null')
    try:
        os.mknod(mine, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as e:
        return skip('dev_null_stays_a_device', 'mknod: %s' % e)
    other = os.path.join(d, 'other.npy')
    r = dpc_run(*run_args(model, w, x, mine, other))
    ok = r.returncode == 0 and stat.S_ISCHR(os.lstat(mine).st_mode)
    rm(other)
    if ok:
        r = dpc_run(*run_args(model, w, x, '/dev/null', '/dev/null'))  # the same stream twice is fine
        ok = r.returncode == 0 and stat.S_ISCHR(os.lstat('/dev/null').st_mode)
    report('dev_null_stays_a_device', ok, r.stderr.strip()[:200])
    rm(mine)


def case_directory(d, model, w, x):
    sub = os.path.join(d, 'adir')
    os.mkdir(sub)
    first = os.path.join(d, 'first.npy')
    open(first, 'wb').write(b'old')
    r = dpc_run(*run_args(model, w, x, first, sub))
    ok = clean_error(r) and "'%s' is a directory" % sub in r.stderr and os.path.isdir(sub) and not os.listdir(sub)
    ok = ok and content(first) == b'old' and not temps(d)
    report('directory_refused', ok, r.stderr.strip()[:200])
    for verb in (['graph', model, '-o', sub], ['init', model, '-o', sub], ['compile', model, '-o', sub]):
        r = dpc_run(*verb)
        ok = clean_error(r) and 'is a directory' in r.stderr and os.path.isdir(sub) and not temps(d)
        report('directory_refused_' + verb[0], ok, r.stderr.strip()[:200])
    os.rmdir(sub)
    rm(first)


def case_clashes(d, model, w, x):
    """-o naming a file the command reads, or another -o: refused (exit 2)
    before anything is written, whatever the spelling."""
    before = {p: content(p) for p in (model, w, x)}
    out = os.path.join(d, 'out.npy')
    dot = lambda p: os.path.join(os.path.dirname(p), '.', os.path.basename(p))
    cases = [
        ('clash_run_input', run_args(model, w, x, x, out), 'is an input'),
        ('clash_run_weights', run_args(model, w, x, out, dot(w)), 'is the weights'),
        ('clash_run_model', run_args(model, w, x, model, out), 'is the model'),
        ('clash_run_twice', run_args(model, w, x, out, dot(out)), 'is another output'),
        ('clash_init_model', ['init', model, '-o', dot(model)], 'is the model'),
        ('clash_graph_model', ['graph', model, '-o', model], 'is the model'),
        ('clash_compile_weights', ['compile', model, '--weights', w, '-o', w], 'is the weights'),
    ]
    for name, args, needle in cases:
        r = dpc_run(*args)
        ok = clean_error(r, 2) and needle in r.stderr and not os.path.exists(out)
        ok = ok and all(content(p) == b for p, b in before.items())
        report(name, ok, 'exit %d %s' % (r.returncode, r.stderr.strip()[:200]))


def case_shared_dir_link(d, model, w, x):
    """A symlink someone else planted in a sticky world-writable directory
    (/tmp) is not followed: the file it points at stays as it was."""
    if not root:
        return skip('shared_dir_planted_link', 'not root')
    shared = os.path.join(d, 'shared')
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    victim, link = os.path.join(d, 'victim3'), os.path.join(shared, 'out.npy')
    open(victim, 'wb').write(b'victim')
    os.symlink(victim, link)
    os.lchown(link, 4242, 4242)
    r = dpc_run(*run_args(model, w, x, link, os.path.join(d, 'o2.npy')))
    ok = clean_error(r) and 'not followed' in r.stderr and content(victim) == b'victim' and os.path.islink(link)
    report('shared_dir_planted_link', ok, 'exit %d %s' % (r.returncode, r.stderr.strip()[:200]))


# ---- the full filesystem (root: a tmpfs mounted for the test) --------------

def fill(mnt, leave_pages):
    """Fills mnt, then frees leave_pages pages."""
    filler = os.path.join(mnt, 'filler')
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while os.write(fd, b'\0' * 4096) > 0:
            pass
    except OSError:
        pass
    os.close(fd)
    size = os.path.getsize(filler) // 4096 * 4096
    os.truncate(filler, max(0, size - leave_pages * 4096))


def case_full_fs(d, mnt, model, w, x):
    """run's second output does not fit: both previous outputs keep their
    content, no temporary is left, the error names the file and the cause.
    Then compile, init and graph on a full filesystem alike."""
    a, b = os.path.join(mnt, 'a.npy'), os.path.join(mnt, 'b.npy')
    open(a, 'wb').write(b'old a')
    open(b, 'wb').write(b'old b')
    fill(mnt, 6)  # one 5-page output fits, two do not
    r = dpc_run(*run_args(model, w, x, a, b))
    ok = clean_error(r) and 'No space left on device' in r.stderr and 'b.npy' in r.stderr
    ok = ok and content(a) == b'old a' and content(b) == b'old b' and not temps(mnt)
    report('full_fs_run_second_output', ok, 'exit %d %s; a=%r b=%r temps=%s' % (
        r.returncode, r.stderr.strip()[:200], content(a), content(b), temps(mnt)))
    fill(mnt, 0)
    verbs = [('compile', 'm.dpa', ['compile', model, '--weights', w, '-o']),
             ('init', 'w.safetensors', ['init', model, '-o']),
             ('graph_dot', 'g.dot', ['graph', model, '-o']),
             ('graph_svg', 'g.svg', ['graph', model, '-o'])]
    for name, fn, args in verbs:
        out = os.path.join(mnt, fn)
        rm(os.path.join(mnt, 'filler'))
        open(out, 'wb').write(b'old ' + name.encode())
        fill(mnt, 0)
        r = dpc_run(*(args + [out]))
        ok = clean_error(r) and content(out) == b'old ' + name.encode() and not temps(mnt)
        report('full_fs_' + name, ok, 'exit %d %s temps=%s' % (r.returncode, r.stderr.strip()[:200], temps(mnt)))


def main():
    with tempfile.TemporaryDirectory() as d:
        model, w, x = setup(d)
        if full_fs:
            if not root:
                print('skipped: the full-filesystem test mounts a tmpfs, which needs root')
                return SKIP
            mnt = os.path.join(d, 'mnt')
            os.mkdir(mnt)
            if subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mnt]).returncode:
                print('skipped: cannot mount a tmpfs here')
                return SKIP
            try:
                case_full_fs(d, mnt, model, w, x)
            finally:
                subprocess.run(['umount', mnt])
        else:
            case_graph_planted_tmp(d, model)
            case_graph_no_dot(d, model)
            case_run_planted_tmp(d, model, w, x)
            case_second_output_fails(d, model, w, x)
            case_symlink_output(d, model, w, x)
            case_dangling_symlink(d, model, w, x)
            case_fifo(d, model, w, x)
            case_descriptor_name(d, model, w, x)
            case_devices(d, model, w, x)
            case_directory(d, model, w, x)
            case_clashes(d, model, w, x)
            case_shared_dir_link(d, model, w, x)
    print('%d passed, %d failed' % (passed, failures))
    return 1 if failures else 0


sys.exit(main())
