#!/usr/bin/python3
"""Bad input to `dpc run` (checklist cases 1-16 and 30): each gives exit 1
(or 2 for bad usage) with a one-line `dpc: error:` naming the problem, and
leaves no output file behind."""
import json, os, struct, subprocess, sys, tempfile
import numpy as np

dpc, models = sys.argv[1], sys.argv[2]
SIMPLE = os.path.join(models, 'simple.dp')
MULTI = os.path.join(models, 'multi_input.dp')
failures = passed = 0


def st_bytes(tensors, header_override=None, tail=b''):
    hdr, data, off = {}, b'', 0
    for name, arr in tensors.items():
        b = arr.astype('<f4').tobytes()
        hdr[name] = {'dtype': 'F32', 'shape': list(arr.shape), 'data_offsets': [off, off + len(b)]}
        data += b
        off += len(b)
    h = json.dumps(header_override if header_override is not None else hdr).encode()
    h += b' ' * (-len(h) % 8)
    return struct.pack('<Q', len(h)) + h + data + tail


def check(name, args, code, needle, d, out=None):
    global failures, passed
    out = out or os.path.join(d, 'out_%s.npy' % name)
    r = subprocess.run([dpc, 'run'] + args + ['-o', out], capture_output=True, text=True)
    ok = r.returncode == code and needle in r.stderr and not os.path.exists(out)
    ok = ok and 'Traceback' not in r.stderr and 'Sanitizer' not in r.stderr
    print('%-28s %s' % (name, 'ok' if ok else 'FAIL (exit %d) %s' % (r.returncode, r.stderr.strip()[:300])))
    failures += not ok
    passed += ok


with tempfile.TemporaryDirectory() as d:
    P = lambda n: os.path.join(d, n)
    w = {'fc.weight': np.ones((5, 10)), 'fc.bias': np.zeros(5)}
    open(P('good.st'), 'wb').write(st_bytes(w))
    np.save(P('x.npy'), np.ones((3, 10), np.float32))
    X = ['--input', P('x.npy')]
    cases = [
        ('empty_weights', b'', 'too small'),
        ('7_byte_weights', b'\0' * 7, 'too small'),
        ('huge_header_len', struct.pack('<Q', 2**64 - 1) + b'{}', 'header'),
        ('header_past_eof', struct.pack('<Q', 1000) + b'{}', 'header'),
        ('not_json', struct.pack('<Q', 8) + b'notjson!', 'JSON'),
        ('deep_json', struct.pack('<Q', 100000) + b'[' * 100000, ''),
        ('trailing_bytes', st_bytes(w, tail=b'xxxx'), ''),
        ('bad_dtype', st_bytes(w, {'fc.weight': {'dtype': 'F128', 'shape': [5, 10], 'data_offsets': [0, 200]}}), 'F128'),
        ('overflow_shape', st_bytes({}, {'a': {'dtype': 'F32', 'shape': [2**32, 2**32, 16], 'data_offsets': [0, 0]}}), ''),
    ]
    for name, data, needle in cases:
        open(P(name), 'wb').write(data)
        check(name, [SIMPLE, '--weights', P(name)] + X, 1, needle, d)
    open(P('wrong_shape.st'), 'wb').write(st_bytes({'fc.weight': np.ones((5, 11)), 'fc.bias': np.zeros(5)}))
    check('wrong_shape', [SIMPLE, '--weights', P('wrong_shape.st')] + X, 1, 'fc.weight is [5, 11], the model needs [5, 10]', d)
    open(P('missing.st'), 'wb').write(st_bytes({'fc.weight': np.ones((5, 10))}))
    check('missing_key', [SIMPLE, '--weights', P('missing.st')] + X, 1, 'missing fc.bias', d)
    # every kind of mismatch named: the first 10 of each and a count of the rest
    junk = {'junk%02d' % i: np.zeros(1) for i in range(13)}
    open(P('missing_extra.st'), 'wb').write(st_bytes(dict({'fc.weight': np.ones((5, 10))}, **junk)))
    check('missing_and_unexpected', [SIMPLE, '--weights', P('missing_extra.st')] + X, 1,
          'weights do not match the model: missing fc.bias; unexpected: junk00, junk01, junk02, junk03, junk04, '
          'junk05, junk06, junk07, junk08, junk09 (and 3 more)\n', d)
    open(P('other.st'), 'wb').write(st_bytes({'other': np.zeros(1)}))
    check('many_missing', [os.path.join(models, 'resnet.dp'), '--weights', P('other.st')] + X, 1,
          'missing stem.0.weight, stem.1.weight, stem.1.bias, stem.1.running_mean, stem.1.running_var, '
          'layer1.0.conv1.weight, layer1.0.bn1.weight, layer1.0.bn1.bias, layer1.0.bn1.running_mean, '
          'layer1.0.bn1.running_var (and 87 more); unexpected: other\n', d)
    open(P('bad.npy'), 'wb').write(b'\x93NUMPX' + b'\0' * 100)
    check('npy_bad_magic', [SIMPLE, '--weights', P('good.st'), '--input', P('bad.npy')], 1, 'dpc: error:', d)
    np.save(P('obj.npy'), np.array([{'a': 1}], dtype=object), allow_pickle=True)
    check('npy_pickle', [SIMPLE, '--weights', P('good.st'), '--input', P('obj.npy')], 1, 'dpc: error:', d)
    np.save(P('f64.npy'), np.ones((3, 10)))
    check('npy_float64_input', [SIMPLE, '--weights', P('good.st'), '--input', P('f64.npy')], 1, 'must be float32', d)
    np.save(P('x9.npy'), np.ones((3, 9), np.float32))
    check('npy_wrong_shape', [SIMPLE, '--weights', P('good.st'), '--input', P('x9.npy')], 1, "input 'x' must have shape [N, 10], got [3, 9]", d)
    np.save(P('a5.npy'), np.ones((5, 5), np.float32))
    np.save(P('a3.npy'), np.ones((3, 5), np.float32))
    wm = {'fc1.weight': np.ones((3, 5)), 'fc1.bias': np.zeros(3), 'fc2.weight': np.ones((2, 3)), 'fc2.bias': np.zeros(2)}
    open(P('multi.st'), 'wb').write(st_bytes(wm))
    check('mismatched_batch', [MULTI, '--weights', P('multi.st'), '--input', P('a5.npy'), '--input', P('a3.npy'),
                               '--devices', 'cpu,cpu'], 1, 'batch', d)
    check('missing_output_dir', [SIMPLE, '--weights', P('good.st')] + X, 1, 'dpc: error:', d, out=P('nodir/y.npy'))
    check('too_many_outputs', [SIMPLE, '--weights', P('good.st')] + X + ['-o', P('extra.npy')], 2, 'returns 1 tensor', d)
    check('bad_devices', [SIMPLE, '--weights', P('good.st'), '--devices', 'cpu,,cpu'] + X, 2, 'dpc: error:', d)
    # -o equal to an input: refused, the input untouched (tests/run/check_outputs.py has the other clashes)
    np.save(P('same.npy'), np.ones((3, 10), np.float32))
    r = subprocess.run([dpc, 'run', SIMPLE, '--weights', P('good.st'), '--input', P('same.npy'), '-o', P('same.npy')],
                       capture_output=True, text=True)
    ok = r.returncode == 2 and 'is an input' in r.stderr and np.load(P('same.npy')).shape == (3, 10)
    print('%-28s %s' % ('output_equals_input', 'ok' if ok else 'FAIL ' + r.stderr))
    failures += not ok
    passed += ok
    # --weights is needed only by a model with parameters or buffers (.dp or .dpa)
    check('weights_needed', [SIMPLE] + X, 2, 'SimpleModel has parameters or buffers (2 state_dict entries): '
          'give --weights W.safetensors', d)
    open(P('noparam.dp'), 'w').write('module M {\n    forward(x: [N, 10]) {\n        return relu(x)\n    }\n}\n'
                                     'model = M()\n')
    subprocess.run([dpc, 'compile', P('noparam.dp'), '-o', P('noparam.dpa')], check=True)
    np.save(P('xs.npy'), np.linspace(-1, 1, 30, dtype=np.float32).reshape(3, 10))
    for m in ('noparam.dp', 'noparam.dpa'):
        r = subprocess.run([dpc, 'run', P(m), '--input', P('xs.npy'), '-o', P('y_' + m + '.npy')],
                           capture_output=True, text=True)
        ok = r.returncode == 0 and r.stderr == '' and np.array_equal(
            np.load(P('y_' + m + '.npy')), np.maximum(np.load(P('xs.npy')), 0))
        print('%-28s %s' % ('no_weights_' + m, 'ok' if ok else 'FAIL (exit %d) %s' % (r.returncode, r.stderr)))
        failures += not ok
        passed += ok
    # batch 0: empty outputs (above, run_<model>), but a reduction over the batch is refused, not zeros
    open(P('reduce.dp'), 'w').write('module M {\n    forward(x: [N, 10]) {\n        return relu(x), mean(x, 0)\n'
                                    '    }\n}\nmodel = M()\n')
    np.save(P('x0.npy'), np.ones((0, 10), np.float32))
    check('batch0_reduction', [P('reduce.dp'), '--input', P('x0.npy'), '-o', P('r1.npy')], 1,
          'batch 0: output 2 of M (%s:3) has no batch dim N, so it is not empty' % P('reduce.dp'), d)
print('%d passed, %d failed' % (passed, failures))
sys.exit(1 if failures else 0)
