#!/usr/bin/python3
"""The CUBIN/PTX a .dpa stores are what `dpc run` loads, on the pretend driver.

  check_dpa_images.py DPC FAKE_CUDA_EXEC_SO MODE

`dpc compile --arch` stores NVRTC images; `dpc run m.dpa --devices cuda:0`
on fake_cuda_exec.so (FAKE_EXEC_CC sets the device's compute capability,
FAKE_EXEC_IMAGES keeps every image the driver is given) must:

  cubin     take the stored CUBIN for the device's sm_XX: the driver gets
            exactly its bytes (a stored CUBIN marked in its ELF padding, the
            checksum fixed up, proves they are not NVRTC's), NVRTC never
            runs (the run's empty kernel cache stays empty), `-v` says
            "kernels: CUBIN sm_90 from <the .dpa>"
  ptx       without a matching CUBIN, the newest stored PTX the device can
            run (compute_80 on a 9.0 device), JIT by the driver
  fallback  an artifact for a newer GPU (sm_90 on an 8.0 device): NVRTC
            compiles for sm_80, as without an artifact
  half      --dtype bf16 / f16: the f32 images are not for this source,
            NVRTC compiles the 16-bit dialect
  tampered  an image byte changed without fixing the checksum: refused
            ("checksum mismatch"), nothing loaded; a dpc.cuda.sha256 that
            names another source (checksum fixed): images ignored, NVRTC;
            DPC_CUDA_DPA_IMAGES unset or 0: images ignored (they are
            machine code: loaded only when the user sets it to 1)
"""
import base64, hashlib, json, os, struct, subprocess, sys, tempfile

dpc, fake, mode = sys.argv[1], sys.argv[2], sys.argv[3]
failures = 0

MODEL = """module Ew(dim: int = 16) {
    norm = LayerNorm(dim)
    forward(x: [N, dim], s: float = 2.0) {
        return softmax(norm(x) * s, -1), amax(x, 1)
    }
}
model = Ew()
"""


def check(name, ok, detail=''):
    global failures
    print('%-64s %s' % (name, 'ok' if ok else 'FAIL ' + str(detail)[:800]))
    failures += not ok


def split(blob):
    n = struct.unpack('<Q', blob[:8])[0]
    return n, blob[8:8 + n], blob[8 + n:]


def meta(blob):
    return json.loads(split(blob)[1])['__metadata__']


def fix_checksum(blob):
    """dpc.checksum as artifact.h defines it"""
    n, h, data = split(blob)
    key = b'"dpc.checksum":"'
    at = 8 + h.index(key) + len(key)
    zeroed = blob[:at] + b'0' * 64 + blob[at + 64:8 + n]
    a = hashlib.sha256(zeroed).hexdigest()
    b = hashlib.sha256(data).hexdigest()
    return blob[:at] + hashlib.sha256((a + b).encode()).hexdigest().encode() + blob[at + 64:]


def replace_meta(blob, key, value, fix=True):
    """the artifact with metadata key set to value (no weights: the header
    is the whole file), checksum fixed up unless fix is False"""
    n, h, data = split(blob)
    assert not data
    j = json.loads(h)
    old = j['__metadata__'][key]
    j['__metadata__'][key] = value
    # the header as dpc writes it: same key order, compact
    nh = json.dumps(j, separators=(',', ':'), ensure_ascii=False).encode()
    out = struct.pack('<Q', len(nh)) + nh
    assert old != value
    return fix_checksum(out) if fix else out


with tempfile.TemporaryDirectory() as d:
    P = lambda n: os.path.join(d, n)
    with open(P('m.dp'), 'w') as f:
        f.write(MODEL)
    env = dict(os.environ, DPC_CACHE_DIR=P('compile_cache'))

    def sh(args, extra=None):
        e = dict(env)
        e.update(extra or {})
        return subprocess.run([dpc] + args, capture_output=True, env=e)

    def compile_dpa(arch, name):
        r = sh(['compile', P('m.dp'), '-o', P(name), '--arch', arch])
        assert r.returncode == 0, r.stderr.decode()
        return open(P(name), 'rb').read()

    r = sh(['init', P('m.dp'), '-o', P('w.st')])
    assert r.returncode == 0, r.stderr
    import numpy as np
    np.save(P('x.npy'), np.ones((3, 16), np.float32))
    runs = [0]

    def run(dpa, cc, extra_args=(), extra_env=None):
        """dpc run on the fake driver, in a fresh kernel cache: (result,
        the images the driver got, files NVRTC left in the cache)"""
        runs[0] += 1
        imgs, cache = P('imgs%d' % runs[0]), P('run_cache%d' % runs[0])
        os.mkdir(imgs)
        e = {'DPC_CUDA_DRIVER': fake, 'FAKE_EXEC_CC': str(cc), 'FAKE_EXEC_IMAGES': imgs, 'DPC_CACHE_DIR': cache,
             'DPC_NCCL_LIBRARY': '/nonexistent/dpc-test/libnccl.so.2',
             'DPC_CUDA_DPA_IMAGES': '1'}  # the user trusts this artifact's images
        e.update(extra_env or {})
        r = sh(['run', dpa, '--weights', P('w.st'), '--input', P('x.npy'), '--devices', 'cuda:0', '-v',
                '-o', P('y.npy'), '-o', P('z.npy')] + list(extra_args), e)
        got = [open(os.path.join(imgs, f), 'rb').read() for f in sorted(os.listdir(imgs))]
        cached = [f for _, _, fs in os.walk(cache) for f in fs] if os.path.isdir(cache) else []
        return r, got, cached

    def kernels_line(r):
        for l in r.stderr.decode(errors='replace').splitlines():
            if l.startswith('dpc: kernels: '):
                return l[len('dpc: kernels: '):]
        return None

    def cubin_of(blob, arch):
        return base64.b64decode(meta(blob)['dpc.cubin.' + arch])

    if mode == 'cubin':
        blob = compile_dpa('sm_90', 'a.dpa')
        r, got, cached = run(P('a.dpa'), 90)
        check('sm_90 .dpa on a 9.0 GPU: runs', r.returncode == 0, r.stderr)
        check('  -v: kernels: CUBIN sm_90 from the .dpa', kernels_line(r) == 'CUBIN sm_90 from ' + P('a.dpa'),
              r.stderr)
        check('  the driver got the stored CUBIN', got == [cubin_of(blob, 'sm_90')], ([len(g) for g in got], len(cubin_of(blob, 'sm_90'))))
        check('  NVRTC did not run (the kernel cache stayed empty)', cached == [], cached)
        # a CUBIN NVRTC would not make: a byte of the ELF identification padding
        cub = bytearray(cubin_of(blob, 'sm_90'))
        assert cub[:4] == b'\x7fELF' and cub[15] == 0
        cub[15] = 0x5a
        with open(P('marked.dpa'), 'wb') as f:
            f.write(replace_meta(blob, 'dpc.cubin.sm_90', base64.b64encode(bytes(cub)).decode()))
        r, got, cached = run(P('marked.dpa'), 90)
        check('marked stored CUBIN: runs', r.returncode == 0, r.stderr)
        check('  the driver got the marked bytes, not an NVRTC image', got == [bytes(cub)], [len(g) for g in got])
        check('  NVRTC did not run', cached == [], cached)
    elif mode == 'ptx':
        blob = compile_dpa('sm_80', 'a.dpa')
        ptx = meta(blob)['dpc.ptx.compute_80'] + '\n// marked: from the .dpa\n'
        with open(P('marked.dpa'), 'wb') as f:
            f.write(replace_meta(blob, 'dpc.ptx.compute_80', ptx))
        r, got, cached = run(P('marked.dpa'), 90)
        check('sm_80 .dpa on a 9.0 GPU: runs', r.returncode == 0, r.stderr)
        check('  -v: kernels: PTX compute_80 from the .dpa, JIT by driver',
              kernels_line(r) == 'PTX compute_80 from %s, JIT by driver' % P('marked.dpa'), r.stderr)
        check('  the driver got the stored PTX', got == [ptx.encode()], [g[:40] for g in got])
        check('  NVRTC did not run', cached == [], cached)
    elif mode == 'fallback':
        blob = compile_dpa('sm_90', 'a.dpa')
        r, got, cached = run(P('a.dpa'), 80)
        stored = [cubin_of(blob, 'sm_90'), meta(blob)['dpc.ptx.compute_90'].encode()]
        check('sm_90 .dpa on an 8.0 GPU: runs', r.returncode == 0, r.stderr)
        check('  -v: kernels: NVRTC sm_80', kernels_line(r) == 'NVRTC sm_80', r.stderr)
        check('  the driver got an NVRTC image', len(got) == 1 and got[0] not in stored and got[0][:4] == b'\x7fELF')
        check('  NVRTC ran (its CUBIN is in the kernel cache)', len(cached) >= 1, cached)
    elif mode == 'half':
        blob = compile_dpa('sm_90', 'a.dpa')
        for prec in ('bf16', 'f16'):
            r, got, cached = run(P('a.dpa'), 90, ['--dtype', prec])
            check('--dtype %s, sm_90 .dpa on a 9.0 GPU: runs' % prec, r.returncode == 0, r.stderr)
            check('  -v: kernels: NVRTC sm_90', kernels_line(r) == 'NVRTC sm_90', r.stderr)
            check('  the f32 CUBIN is not loaded', len(got) == 1 and got[0] != cubin_of(blob, 'sm_90'))
            check('  NVRTC ran', len(cached) >= 1, cached)
    elif mode == 'tampered':
        blob = compile_dpa('sm_90', 'a.dpa')
        b64 = meta(blob)['dpc.cubin.sm_90']
        flipped = b64[:40] + ('B' if b64[40] != 'B' else 'C') + b64[41:]
        with open(P('flipped.dpa'), 'wb') as f:
            f.write(replace_meta(blob, 'dpc.cubin.sm_90', flipped, fix=False))
        r, got, cached = run(P('flipped.dpa'), 90)
        err = r.stderr.decode(errors='replace')
        check('CUBIN byte changed, checksum not fixed: refused', r.returncode == 1 and 'checksum mismatch' in err, err)
        check('  nothing loaded, nothing written', got == [] and not os.path.exists(P('y.npy')))
        other = hashlib.sha256(b'some other source').hexdigest()
        with open(P('othersrc.dpa'), 'wb') as f:
            f.write(replace_meta(blob, 'dpc.cuda.sha256', other))
        r, got, cached = run(P('othersrc.dpa'), 90)
        check('dpc.cuda.sha256 of another source (checksum fixed): runs', r.returncode == 0, r.stderr)
        check('  images ignored: NVRTC sm_90', kernels_line(r) == 'NVRTC sm_90', r.stderr)
        check('  NVRTC ran', len(cached) >= 1, cached)
        for v in ('0', ''):  # '' is unset: stored machine code is opt-in
            r, got, cached = run(P('a.dpa'), 90, extra_env={'DPC_CUDA_DPA_IMAGES': v})
            check('DPC_CUDA_DPA_IMAGES=%r: images ignored, NVRTC' % v,
                  r.returncode == 0 and kernels_line(r) == 'NVRTC sm_90', r.stderr)
            check('  NVRTC ran', len(cached) >= 1, cached)
    else:
        sys.exit('unknown mode ' + mode)

print('check_dpa_images %s: %s' % (mode, 'FAILED' if failures else 'ok'))
sys.exit(1 if failures else 0)
