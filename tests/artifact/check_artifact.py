#!/usr/bin/python3
"""`dpc compile` artifacts (.dpa) through the CLI.

  check_artifact.py DPC MODELS_DIR

- Round trip: every model below compiled without and with weights; `dpc run`
  on the .dpa (--weights, embedded, embedded overridden by --weights, two
  replicas) gives byte-identical .npy files to `dpc run` on the .dp, tuple
  outputs and keyword scalars included; `dpc print/ir/source` equal on .dp
  and .dpa; `dpc inspect` describes it.
- Layout: a valid safetensors file whose tensors are exactly the weights,
  data section 4096-aligned, sections present, checksum as documented.
- Determinism: compiling twice, or from another directory, gives the same
  bytes.
- Bad artifacts (checklist 22-24): truncated, wrong magic, changed header
  bytes (a dense sample; test_api changes every one), future format, other
  dpc version, edited IR / source with the checksum fixed up, NVRTC failure
  (bad --arch, injected bad source). Each: exit 1 (2 for bad usage), one
  `dpc: error:` line, no output file, existing output untouched.
"""
import hashlib, json, os, shutil, struct, subprocess, sys, tempfile
import numpy as np

dpc, models = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
failures = passed = 0


def check(name, ok, detail=''):
    global failures, passed
    print('%-58s %s' % (name, 'ok' if ok else 'FAIL ' + str(detail)[:600]))
    failures += not ok
    passed += bool(ok)


def run(args, cwd=None, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([dpc] + args, capture_output=True, cwd=cwd, env=e)


def clean_error(r, code=1):
    """exit code, one `dpc: error:` line (warnings aside), no crash report"""
    err = r.stderr.decode(errors='replace')
    lines = [l for l in err.splitlines() if not l.startswith('dpc: warning:')]
    return (r.returncode == code and len(lines) >= 1 and lines[0].startswith('dpc: ') and
            'Sanitizer' not in err and 'runtime error' not in err), err.strip()


def split(blob):
    n = struct.unpack('<Q', blob[:8])[0]
    return n, blob[8:8 + n], blob[8 + n:]


def header(blob):
    n, h, _ = split(blob)
    return json.loads(h)


def checksum(blob):
    """dpc.checksum as artifact.h defines it"""
    n, h, data = split(blob)
    key = b'"dpc.checksum":"'
    assert h.count(key) == 1
    at = 8 + h.index(key) + len(key)
    zeroed = blob[:at] + b'0' * 64 + blob[at + 64:8 + n]
    a = hashlib.sha256(zeroed).hexdigest()
    b = hashlib.sha256(data).hexdigest()
    return at, hashlib.sha256((a + b).encode()).hexdigest().encode()


def fix_checksum(blob):
    at, s = checksum(blob)
    return blob[:at] + s + blob[at + 64:]


def edit(blob, old, new, fix=True):
    """same-length edit of the raw header (JSON-escaped text)"""
    assert len(old) == len(new) and blob.count(old) >= 1, old
    i = blob.index(old)
    out = blob[:i] + new + blob[i + len(old):]
    return fix_checksum(out) if fix else out


def with_meta(blob, change):
    """the artifact with change(metadata) applied: the header rewritten
    (keys sorted, padded to 8 as the writer pads it) and the checksum fixed"""
    n, h, data = split(blob)
    hdr = json.loads(h)
    change(hdr['__metadata__'])
    hdr['__metadata__'] = dict(sorted(hdr['__metadata__'].items()))
    t = json.dumps(hdr, separators=(',', ':'), ensure_ascii=False).encode()
    t += b' ' * (-(8 + len(t)) % 8)
    return fix_checksum(struct.pack('<Q', len(t)) + t + data)


def inputs_for(summary, d, batch=3, seed=0):
    rng = np.random.RandomState(seed)
    paths = []
    for inp in summary['inputs']:
        shape = []
        for s in inp['shape']:
            if isinstance(s, int):
                shape.append(s)
            else:
                shape.append(batch * (int(s.split('*')[0]) if '*' in s else 1))
        if inp['dtype'] == 'i64':
            a = rng.randint(0, 4, size=shape).astype(np.int64)
        else:
            a = rng.randn(*shape).astype(np.float32)
        p = os.path.join(d, 'in_%s_%d.npy' % (inp['name'], seed))
        np.save(p, a)
        paths.append(p)
    kw = []
    for s in summary['scalars']:
        kw += ['--kw', '%s=%s' % (s['name'], {'float': '0.75', 'int': '3', 'bool': 'true'}[s['type']])]
    return paths, kw


ROUND_TRIP = ['simple', 'imports', 'multi_input', 'kwargs', 'activations', 'parallel_model', 'transformer']

with tempfile.TemporaryDirectory() as d:
    P = lambda n: os.path.join(d, n)

    # ---------------------------------------------------------- round trip
    for m in ROUND_TRIP:
        src = os.path.join(models, m + '.dp')
        w = P(m + '.st')
        r = run(['init', src, '-o', w, '--seed', '7'])
        check('%s: init' % m, r.returncode == 0, r.stderr)
        plain, emb = P(m + '.dpa'), P(m + '_w.dpa')
        r1 = run(['compile', src, '-o', plain])
        r2 = run(['compile', src, '-o', emb, '--weights', w])
        check('%s: compile without and with weights' % m, r1.returncode == 0 and r2.returncode == 0,
              r1.stderr + r2.stderr)
        if r1.returncode or r2.returncode:
            continue
        summary = json.loads(header(open(plain, 'rb').read())['__metadata__']['dpc.summary'])
        ins, kw = inputs_for(summary, d)
        nout = len(summary['outputs'])
        I = sum([['--input', p] for p in ins], [])

        def outs(tag):
            return [P('%s_%s_%d.npy' % (m, tag, i)) for i in range(nout)]

        def run_to(tag, model, extra):
            o = outs(tag)
            r = run(['run', model] + I + kw + extra + sum([['-o', p] for p in o], []))
            return r, o

        rr, ref = run_to('ref', src, ['--weights', w])
        rr2, ref2 = run_to('ref2', src, ['--weights', w, '--devices', 'cpu,cpu'])
        check('%s: dpc run on the .dp' % m, rr.returncode == 0 and rr2.returncode == 0, rr.stderr + rr2.stderr)
        for tag, model, extra, want in [('plain', plain, ['--weights', w], ref), ('emb', emb, [], ref),
                                        ('override', emb, ['--weights', w], ref),
                                        ('cpu,cpu', emb, ['--devices', 'cpu,cpu'], ref2)]:
            r, o = run_to(tag.replace(',', '_'), model, extra)
            same = r.returncode == 0 and all(open(a, 'rb').read() == open(b, 'rb').read()
                                             for a, b in zip(o, want))
            check('%s: run %s == run .dp (byte-identical, %d output%s)' % (m, tag, nout, 's' * (nout > 1)),
                  same, r.stderr)
        # print / ir / source: the same text from the model's directory
        for verb in (['print'], ['ir'], ['ir', '--stage', 'fused'], ['source'], ['source', '--target', 'cuda']):
            a = run(verb + [m + '.dp'], cwd=models)
            b = run(verb + [plain], cwd=models)
            check('%s: %s .dpa == .dp' % (m, ' '.join(verb)), a.returncode == 0 and a.stdout == b.stdout,
                  b.stderr)
        r = run(['inspect', emb])
        out = r.stdout.decode()
        check('%s: inspect' % m, r.returncode == 0 and summary['model'] in out and 'weights:       embedded' in out
              and 'inputs:' in out and 'kernels:' in out and 'dpc version:' in out, out + r.stderr.decode())
        # the artifact is a safetensors file holding exactly the weights
        blob, wblob = open(emb, 'rb').read(), open(w, 'rb').read()
        n, h, data = split(blob)
        hj, wj = json.loads(h), header(wblob)
        wn = split(wblob)[0]
        same = (8 + n) % 4096 == 0 and set(hj) - {'__metadata__'} == set(wj) - {'__metadata__'}
        for k, v in hj.items():
            if k == '__metadata__' or not same:
                continue
            b0, b1 = v['data_offsets']
            w0, w1 = wj[k]['data_offsets']
            same = same and v['dtype'] == wj[k]['dtype'] and v['shape'] == wj[k]['shape'] and \
                data[b0:b1] == wblob[8 + wn + w0:8 + wn + w1]
        check('%s: embedded weights are the state_dict, data 4096-aligned' % m, same)
        meta = hj['__metadata__']
        need = {'dpc.format', 'dpc.version', 'dpc.model', 'dpc.root', 'dpc.ir', 'dpc.schedule', 'dpc.gen.c',
                'dpc.gen.cuda', 'dpc.arch', 'dpc.summary', 'dpc.checksum', 'dpc.src/' + m + '.dp'}
        check('%s: sections and checksum' % m, need <= set(meta) and meta['dpc.root'] == m + '.dp' and
              checksum(blob)[1].decode() == meta['dpc.checksum'])

    # imports: every file stored by its relative name
    meta = header(open(P('imports.dpa'), 'rb').read())['__metadata__']
    check('imports: sources stored by relative name',
          sorted(k for k in meta if k.startswith('dpc.src/')) ==
          ['dpc.src/imports.dp', 'dpc.src/lib/blocks.dp', 'dpc.src/lib/norms.dp'] and
          meta['dpc.src/lib/norms.dp'] == open(os.path.join(models, 'lib', 'norms.dp')).read())

    # -------------------------------------------------------- determinism
    pm = os.path.join(models, 'parallel_model.dp')
    a, b, c = P('det_a.dpa'), P('det_b.dpa'), P('det_c.dpa')
    ra = run(['compile', pm, '-o', a, '--weights', P('parallel_model.st'), '--arch', 'sm_90,sm_80'])
    rb = run(['compile', pm, '-o', b, '--weights', P('parallel_model.st'), '--arch', 'sm_80,sm_90,sm_80'])
    rc = run(['compile', os.path.relpath(pm, d), '-o', c, '--weights', 'parallel_model.st', '--arch', 'sm_80,sm_90'],
             cwd=d)
    blob = open(a, 'rb').read() if ra.returncode == 0 else b''
    check('determinism: compile twice (and from elsewhere) -> same bytes',
          ra.returncode == rb.returncode == rc.returncode == 0 and blob == open(b, 'rb').read() ==
          open(c, 'rb').read(), ra.stderr + rb.stderr + rc.stderr)
    meta = header(blob)['__metadata__'] if blob else {}
    check('--arch sm_80,sm_90: CUBIN and PTX for both, no GPU needed',
          meta.get('dpc.arch') == 'sm_80,sm_90' and
          {'dpc.cubin.sm_80', 'dpc.cubin.sm_90', 'dpc.ptx.compute_80', 'dpc.ptx.compute_90'} <= set(meta) and
          meta['dpc.ptx.compute_90'].lstrip().startswith('//'))
    r = run(['inspect', a])
    check('inspect lists the architectures', r.returncode == 0 and b'sm_90 (CUBIN' in r.stdout and
          b'compute_80 (PTX' in r.stdout, r.stdout + r.stderr)
    shutil.copy(os.path.join(models, 'simple.dp'), P('copy.dp'))
    r = run(['compile', P('copy.dp')])
    check('without -o: MODEL.dpa next to MODEL.dp', r.returncode == 0 and os.path.exists(P('copy.dpa')), r.stderr)

    # ------------------------------------------------------ bad artifacts
    sb = open(P('simple.dpa'), 'rb').read()
    sw = open(P('simple_w.dpa'), 'rb').read()
    X = ['--input', P('in_x_0.npy')]
    W = ['--weights', P('simple.st')]

    def refused(name, blob, needle='', verbs=('inspect', 'run'), code=1):
        bad = P('bad.dpa')
        open(bad, 'wb').write(blob)
        ok, detail = True, ''
        for verb in verbs:
            out = P('bad_out.npy')
            if os.path.exists(out):
                os.unlink(out)
            args = [verb, bad] + (X + W + ['-o', out] if verb == 'run' else [])
            r = run(args)
            good, err = clean_error(r, code)
            good = good and needle in err and not os.path.exists(out)
            if not good:
                ok, detail = False, '%s: exit %d: %s' % (verb, r.returncode, err)
        check(name, ok, detail)
        return ok

    n = split(sb)[0]
    for cut in (0, 7, 8, 9, 100, n // 2, 8 + n - 1):
        refused('truncated to %d bytes' % cut, sb[:cut], 'dpc: error:')
    wn = split(sw)[0]
    for cut in (8 + wn - 1, 8 + wn + 1, len(sw) - 1):
        refused('weights artifact truncated to %d of %d bytes' % (cut, len(sw)), sw[:cut], 'dpc: error:')
    refused('wrong magic (ELF)', b'\x7fELF\x02\x01\x01\x00' + sb[8:], 'dpc artifact')
    refused('wrong magic (no JSON header)', sb[:8] + b'PK' + sb[10:], 'not a dpc artifact')
    refused('wrong magic (npy)', open(P('in_x_0.npy'), 'rb').read(), 'not a dpc artifact')
    refused('a weights file named .dpa', open(P('simple.st'), 'rb').read(), 'not a dpc artifact')
    # changed bytes through the CLI: the first 64 header bytes, then every
    # 131st, the checksum digits and the padding (each run starts a process;
    # test_api changes every header byte in one process)
    at = checksum(sb)[0]
    positions = sorted(set(list(range(min(64, 8 + n))) + list(range(64, 8 + n, 131)) + list(range(at, at + 64, 5)) +
                       list(range(8 + n - 16, 8 + n))))
    bad_flips = []
    for i in positions:
        blob = bytearray(sb)
        blob[i] ^= 0x20 if i % 2 else 0xff
        open(P('flip.dpa'), 'wb').write(blob)
        r = run(['inspect', P('flip.dpa')])
        good, err = clean_error(r)
        if not good or r.stdout:
            bad_flips.append((i, r.returncode, err[:200]))
    check('%d single-byte header changes: each refused cleanly' % len(positions), not bad_flips, bad_flips[:3])
    # a change of the content only: the checksum names itself
    refused('IR edited, checksum not fixed', edit(sb, b'graph SimpleModel(', b'graph SimpleMudel(', fix=False),
            'checksum mismatch')
    refused('future format version', edit(sb, b'"dpc.format":"3"', b'"dpc.format":"4"'),
            'artifact written by dpc 0.1.0 (format 4); this dpc')
    refused('older format version', edit(sb, b'"dpc.format":"3"', b'"dpc.format":"1"'),
            'in format 1, older than the format 3 this dpc')
    refused('future format version (checksum not fixed)', edit(sb, b'"dpc.format":"3"', b'"dpc.format":"9"', False),
            '(format 9)')
    ver = header(sb)['__metadata__']['dpc.version'].encode()
    other = bytes([ver[0] ^ 1]) + ver[1:]
    refused('another dpc version', edit(sb, b'"dpc.version":"' + ver, b'"dpc.version":"' + other),
            'artifact written by dpc ' + other.decode())
    # recovery: `dpc compile OLD.dpa` rebuilds from the sources it carries
    old_blob = edit(sw, b'"dpc.version":"' + ver, b'"dpc.version":"' + other)
    open(P('old.dpa'), 'wb').write(old_blob)
    r = run(['compile', P('old.dpa'), '-o', P('rebuilt.dpa')])
    check('dpc compile OLD.dpa (other dpc version) rebuilds it', r.returncode == 0 and
          open(P('rebuilt.dpa'), 'rb').read() == sw, r.stderr)
    r = run(['compile', P('simple_w.dpa'), '-o', P('same.dpa')])
    check('dpc compile X.dpa with the same dpc: the same bytes', r.returncode == 0 and
          open(P('same.dpa'), 'rb').read() == sw, r.stderr)
    r = run(['compile', P('simple_w.dpa'), '-o', P('arch.dpa'), '--arch', 'sm_80'])
    meta = header(open(P('arch.dpa'), 'rb').read())['__metadata__'] if r.returncode == 0 else {}
    check('dpc compile X.dpa --arch sm_80: weights kept, images added', meta.get('dpc.arch') == 'sm_80' and
          'dpc.cubin.sm_80' in meta and set(header(open(P('arch.dpa'), 'rb').read())) == set(header(sw)), r.stderr)
    open(P('future.dpa'), 'wb').write(edit(sb, b'"dpc.format":"3"', b'"dpc.format":"4"'))
    r = run(['compile', P('future.dpa'), '-o', P('nope.dpa')])
    good, err = clean_error(r)
    check('dpc compile FUTURE.dpa: refused', good and '(format 4)' in err and not os.path.exists(P('nope.dpa')), err)
    ir = header(sb)['__metadata__']['dpc.ir']
    line = [l for l in ir.splitlines() if '= linear' in l][0]
    shp = line.split(' : ')[1].split()[0]                     # f32[N, 5]
    bad_shape = shp[:-2] + chr(ord(shp[-2]) ^ 1) + ']'        # f32[N, 4]
    refused('IR shape edited (checksum fixed)', edit(sb, (line.split(' : ')[0] + ' : ' + shp).encode(),
                                                     (line.split(' : ')[0] + ' : ' + bad_shape).encode()),
            'its IR does not match its sources')
    refused('IR type edited (checksum fixed)', edit(sb, (' : ' + shp).encode(), (' : i64' + shp[3:]).encode()),
            'its IR does not match its sources')
    ops = line.split('= linear ')[1].split(' : ')[0]           # %0, %1, %2
    swapped = ', '.join([ops.split(', ')[1], ops.split(', ')[0]] + ops.split(', ')[2:])
    refused('IR operands swapped (checksum fixed)', edit(sb, ('linear ' + ops).encode(), ('linear ' + swapped).encode()),
            'its IR does not match its sources')
    refused('source edited, IR not (checksum fixed)', edit(sb, b'Linear(10, 5)', b'Linear(10, 4)'),
            'does not match its sources')
    refused('summary edited (checksum fixed)', edit(sb, b'"dtype\\":\\"f32\\"', b'"dtype\\":\\"i64\\"'),
            'summary does not match')
    refused('unknown section (checksum fixed)', edit(sb, b'"dpc.schedule"', b'"dpc.schedulX"'),
            'damaged artifact')
    # stored sources are held to the rules of .dp files (dpc_source_rule):
    # 16 MiB, and nothing outside the model's directory
    open(P('same.dpa'), 'wb').write(with_meta(sb, lambda m: None))
    r = run(['print', P('same.dpa')])
    check('header rewritten, nothing changed: still loads', r.returncode == 0, r.stderr)
    SRC = 'dpc.src/simple.dp'
    EVIL = 'module Evil {\n    forward(x: [N, 10]) {\n        return x\n    }\n}\n'

    def grow(m):
        m[SRC] += '#' + 'x' * (16 << 20) + '\n'   # a trailing comment: the IR stays the same
    refused('stored source over 16 MiB', with_meta(sb, grow),
            "source 'simple.dp' is larger than the 16 MiB (16777216 bytes) a .dp file may have")

    def outside(m):
        m['dpc.src/../evil.dp'] = EVIL
    refused('stored source named ../evil.dp', with_meta(sb, outside), "source '../evil.dp' leaves the model's directory")

    def outside_imported(m):
        outside(m)
        m[SRC] += 'import "../evil.dp"\n'
    refused('stored source ../evil.dp, imported', with_meta(sb, outside_imported),
            "source '../evil.dp' leaves the model's directory")

    def absolute(m):
        m['dpc.src//tmp/evil.dp'] = EVIL
    refused('stored source named /tmp/evil.dp', with_meta(sb, absolute), "source '/tmp/evil.dp' is an absolute path")

    def escaping_import(m):
        m['dpc.src/lib/evil.dp'] = EVIL
        m[SRC] += 'import "lib/../../simple.dp"\n'
    refused('import escaping the stored sources', with_meta(sb, escaping_import),
            "import 'lib/../../simple.dp' leaves the model's directory")
    r = run(['run', P('simple.dpa')] + X + ['-o', P('nw.npy')])
    good, err = clean_error(r)
    check('run without weights, none embedded: exit 1', good and 'no embedded weights' in err
          and not os.path.exists(P('nw.npy')), err)
    r = run(['inspect', os.path.join(models, 'simple.dp')])
    check('inspect on a .dp: usage error', clean_error(r, 2)[0], r.stderr)

    # ------------------------------------------------- compile-time failures
    simple = os.path.join(models, 'simple.dp')
    keep = P('keep.dpa')
    open(keep, 'wb').write(b'previous contents')

    def compile_fails(name, args, needle, code=1, env=None):
        r = run(['compile', simple, '-o', keep] + args, env=env)
        good, err = clean_error(r, code)
        check(name, good and needle in err and open(keep, 'rb').read() == b'previous contents' and
              not [f for f in os.listdir(d) if f.startswith('keep.dpa') and f != 'keep.dpa'], err)

    compile_fails('NVRTC failure: --arch sm_999', ['--arch', 'sm_90,sm_999'], 'NVRTC')
    compile_fails('NVRTC failure: injected bad CUDA source', ['--arch', 'sm_90'], 'NVRTC_ERROR_COMPILATION',
                  env={'DPC_FAULT_CUDA_SOURCE': '\n#error injected fault\n'})
    compile_fails('malformed --arch: usage error', ['--arch', '90'], "bad --arch '90'", code=2)
    np.save(P('dummy.npy'), np.zeros(3, np.float32))
    compile_fails('weights that do not match', ['--weights', P('multi_input.st')], 'missing fc.weight')
    compile_fails('weights not safetensors', ['--weights', P('dummy.npy')], 'dpc: error:')
    bad_dp = P('bad.dp')
    open(bad_dp, 'w').write('module M {\n    fc = Linear(10, \n}\nmodel = M()\n')
    r = run(['compile', bad_dp, '-o', keep])
    check('model with a syntax error: compiler diagnostics, exit 1',
          r.returncode == 1 and b'bad.dp:' in r.stderr and open(keep, 'rb').read() == b'previous contents',
          r.stderr)
    # extra keys: a warning, not stored
    extra = P('extra.st')
    blob = open(P('simple.st'), 'rb').read()
    n0, h0, data0 = split(blob)
    hj = json.loads(h0)
    hj['unused.weight'] = {'dtype': 'F32', 'shape': [1], 'data_offsets': [len(data0), len(data0) + 4]}
    hb = json.dumps(hj).encode()
    hb += b' ' * (-len(hb) % 8)
    open(extra, 'wb').write(struct.pack('<Q', len(hb)) + hb + data0 + b'\0\0\0\0')
    r = run(['compile', simple, '-o', P('extra.dpa'), '--weights', extra])
    tensors = set(header(open(P('extra.dpa'), 'rb').read())) - {'__metadata__'} if r.returncode == 0 else set()
    check('extra weight keys: warning, not stored', r.returncode == 0 and b'warning' in r.stderr and
          b'unused.weight' in r.stderr and tensors == {'fc.weight', 'fc.bias'}, r.stderr)

print('%d passed, %d failed' % (passed, failures))
sys.exit(1 if failures else 0)
