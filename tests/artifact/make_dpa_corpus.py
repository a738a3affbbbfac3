#!/usr/bin/python3
"""Writes the seed corpus of the .dpa fuzz target (fuzz_dpa.c, replayed by
replay_dpa): valid artifacts that load and verify with this dpc, and
deliberately bad ones, each refused at a different check.

  valid   simple.dpa, simple_w.dpa (weights embedded), imports.dpa
  bad     flipped.dpa (one byte of the IR changed: checksum mismatch),
          future_format.dpa (a format newer than this dpc's),
          old_format.dpa (format 1, before dpc.cuda.sha256),
          truncated.dpa (cut inside the header),
          weights_only.dpa (a safetensors file without dpc.format; kept
          as it is, it depends on no dpc version)

Valid seeds embed the dpc version, the IR and the generated source, so a
change of any of them makes them stale (they then fail verification and the
fuzzer starts from refusals only). Regenerate after such a change:

    /usr/bin/python3 tests/artifact/make_dpa_corpus.py build/dpc models

--check (CTest artifact_corpus) only checks that the valid seeds verify
(`dpc inspect`) and the bad ones are refused, writing nothing.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')
VALID = ['simple.dpa', 'simple_w.dpa', 'imports.dpa']
BAD = ['flipped.dpa', 'future_format.dpa', 'old_format.dpa', 'truncated.dpa', 'weights_only.dpa']


def run(dpc, *args):
    return subprocess.run([dpc] + list(args), capture_output=True, text=True)


def header_format(blob):
    n = struct.unpack('<Q', blob[:8])[0]
    return json.loads(blob[8:8 + n])['__metadata__']['dpc.format']


def write(dpc, models):
    with tempfile.TemporaryDirectory() as tmp:
        w = os.path.join(tmp, 'simple.st')
        for args in (['init', os.path.join(models, 'simple.dp'), '-o', w, '--seed', '1'],
                     ['compile', os.path.join(models, 'simple.dp'), '-o', os.path.join(HERE, 'simple.dpa')],
                     ['compile', os.path.join(models, 'simple.dp'), '-o', os.path.join(HERE, 'simple_w.dpa'),
                      '--weights', w],
                     ['compile', os.path.join(models, 'imports.dp'), '-o', os.path.join(HERE, 'imports.dpa')]):
            r = run(dpc, *args)
            if r.returncode:
                sys.exit('dpc %s: %s' % (' '.join(args), r.stderr))
    simple = open(os.path.join(HERE, 'simple.dpa'), 'rb').read()
    fmt = header_format(simple).encode()
    key = b'"dpc.format":"' + fmt + b'"'
    assert simple.count(key) == 1
    at = simple.index(b'graph SimpleModel(')
    flipped = bytearray(simple)
    flipped[at + 6] ^= 0x20  # 'S' -> 's': the checksum no longer matches
    outs = {
        'flipped.dpa': bytes(flipped),
        'future_format.dpa': simple.replace(key, b'"dpc.format":"' + str(int(fmt) + 1).encode() + b'"'),
        'old_format.dpa': simple.replace(key, b'"dpc.format":"1"'),
        'truncated.dpa': simple[:3000],
    }
    for name, blob in outs.items():
        open(os.path.join(HERE, name), 'wb').write(blob)
    stale = os.path.join(HERE, 'format2.dpa')  # the future format of format 1, now old_format.dpa's job
    if os.path.exists(stale):
        os.remove(stale)


def check(dpc):
    bad = []
    for name in VALID:
        r = run(dpc, 'inspect', os.path.join(HERE, name))
        if r.returncode:
            bad.append('%s does not verify (regenerate: tests/artifact/make_dpa_corpus.py): %s' %
                       (name, r.stderr.strip()))
    for name in BAD:
        r = run(dpc, 'inspect', os.path.join(HERE, name))
        if r.returncode == 0 or not r.stderr.startswith('dpc: error: ') or r.stderr.count('\n') != 1:
            bad.append('%s: not refused with one line: rc %d %r' % (name, r.returncode, r.stderr[:200]))
    for b in bad:
        print('FAIL', b)
    print('%d seeds: %d valid, %d bad, %d problems' % (len(VALID) + len(BAD), len(VALID), len(BAD), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--check':
        sys.exit(check(sys.argv[2]))
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    write(sys.argv[1], sys.argv[2])
