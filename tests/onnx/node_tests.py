#!/usr/bin/env python3
"""ONNX's own backend test cases (Debian's libonnx-testdata) through dpc.

  node_tests.py DPC DIR [DIR ...] --expect FILE [--jobs 2] [--timeout 60]
                [--only GLOB] [--write-expect FILE] [--markdown FILE] [-v]

Each case directory holds model.onnx and test_data_set_*/{input,output}_*.pb.
For every case and data set the inputs become .npy files, `dpc run
case/model.onnx --input in0.npy ... -o out0.npy ...` runs (the .onnx
imported in memory, weights from its initializers), and each output is
compared with output_k.pb by ONNX's backend-test rule
np.testing.assert_allclose(rtol=1e-3, atol=1e-7) (onnx/backend/test/runner;
a case may need others: TOLERANCE below), the shape exactly.

A case is *claimed* when every node's op type is one the importer lists in
`dpc import --list-ops` at the model's opset. Classes:
  pass        ran, every output within tolerance
  wrong       ran, an output differs or has the wrong shape
  refused     exit 1 with a clean one-line error (a claimed op whose
              attribute, dtype or shape dpc does not take)
  crashed     a signal, an exit status other than 0/1, a sanitizer report,
              a timeout, or a messy error (not one line, partial outputs)
  unsupported an op dpc does not claim, refused with the located error
              ("node 'x' (Op, opset N): ...") - the expected outcome
A case fails the test when
  - it crashed (whatever the list says), or
  - an unclaimed case ran (the op list is wrong) or was refused without a
    located error naming the node, an unclaimed op type and the opset, or
  - a claimed case did not pass and the expectations file does not list it
    with that class, or a listed case now passes (the list must stay true).
The expectations file has lines `case_name class reason...` (# comments).

Prints "N of M <suite> cases pass", the per-class and per-op counts."""
import argparse
import concurrent.futures as cf
import fnmatch
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

RTOL, ATOL = 1e-3, 1e-7
# Cases whose reference needs a looser bound than the default, as ONNX's
# own runner grants some (none needed so far).
TOLERANCE = {}


def list_ops(dpc):
    r = subprocess.run([dpc, "import", "--list-ops"], capture_output=True, text=True, check=True)
    ops = {}
    for line in r.stdout.splitlines():
        f = line.split("\t")
        ops[f[0]] = (int(f[1]), int(f[2]))
    return ops


def model_ops(model):
    opset = 0
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            opset = o.version
    types = []
    for n in model.graph.node:
        d = n.domain if n.domain not in ("", "ai.onnx") else ""
        types.append((d + "." if d else "") + n.op_type)
    return opset, types


def op_key(types):
    u = sorted(set(types))
    if len(u) == 1:
        return u[0]
    return "(several ops)"


def load_pb(path):
    """A TensorProto as an array; None for what is not one (a sequence, an
    optional, a map: dpc takes tensors only)."""
    t = onnx.TensorProto()
    try:
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        if not t.HasField("data_type") or t.data_type == 0:
            return None
        return numpy_helper.to_array(t)
    except Exception:  # noqa: BLE001
        return None


def npy_ok(a):
    return a.dtype in (np.float32, np.float16, np.int64, np.int32)


def run_case(dpc, case, claimed_ops, timeout):
    """Returns (class, detail)."""
    try:
        return run_case1(dpc, case, claimed_ops, timeout)
    except Exception as ex:  # noqa: BLE001 - the harness's own failure: reported, never a pass
        return "crashed", "harness error: %r" % ex


def run_case1(dpc, case, claimed_ops, timeout):
    name = os.path.basename(case)
    try:
        model = onnx.load(os.path.join(case, "model.onnx"))
    except Exception as ex:  # noqa: BLE001 - the package's own file
        return "crashed", "onnx cannot load the case: %s" % ex
    opset, types = model_ops(model)
    unclaimed = [t for t in types if t not in claimed_ops or not (claimed_ops[t][0] <= opset <= claimed_ops[t][1])]
    inits = {i.name for i in model.graph.initializer}
    ninputs = len([i for i in model.graph.input if i.name not in inits])
    noutputs = len(model.graph.output)
    sets = sorted(glob.glob(os.path.join(case, "test_data_set_*")))
    if not sets:
        return "crashed", "no test_data_set"
    work = tempfile.mkdtemp(prefix="dpc-node-")
    try:
        for ds in sets:
            ins = [load_pb(os.path.join(ds, "input_%d.pb" % k)) for k in range(ninputs)
                   if os.path.exists(os.path.join(ds, "input_%d.pb" % k))]
            outs = [load_pb(os.path.join(ds, "output_%d.pb" % k)) for k in range(noutputs)]
            if any(o is None for o in outs):
                outs = [o if o is not None else np.zeros(0) for o in outs]
            args = [dpc, "run", os.path.join(case, "model.onnx")]
            bad_input = None
            for k, a in enumerate(ins):
                p = os.path.join(work, "in%d.npy" % k)
                if a is None or not npy_ok(a):
                    bad_input = "non-tensor" if a is None else a.dtype
                    # still run, with zeros of that shape: the importer must refuse the model itself
                    a = np.zeros(a.shape if a is not None else (1,), np.float32 if a is None or a.dtype.kind in "fcUSOb" else np.int64)
                np.save(p, np.ascontiguousarray(a))
                args += ["--input", p]
            opaths = [os.path.join(work, "out%d.npy" % k) for k in range(noutputs)]
            for p in opaths:
                args += ["-o", p]
            env = dict(os.environ, TMPDIR=work)
            try:
                r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
            except subprocess.TimeoutExpired:
                return "crashed", "timeout after %ds" % timeout
            err = r.stderr.strip()
            if r.returncode not in (0, 1) or "Sanitizer" in r.stderr or "runtime error:" in r.stderr:
                return "crashed", "exit %d: %s" % (r.returncode, err[-300:])
            if r.returncode == 1:
                left = [p for p in opaths if os.path.exists(p)]
                if left or "\n" in err or not err.startswith("dpc: error: "):
                    return "crashed", "a messy error (%s): %s" % ("outputs left" if left else "not one line", err[:300])
                if unclaimed:
                    m = re.search(r"node (?:'[^']*'|\d+) \(([^,]+), opset (\d+)\)", err)
                    # an opset outside the importer's range is the model's error, not a node's
                    whole = re.search(r"opset %d of the default domain is not supported|"
                                      r"imports the default opset not at all" % opset, err)
                    if whole:
                        return "unsupported", err
                    if not m or m.group(1) not in unclaimed or int(m.group(2)) != opset:
                        return "crashed", "unclaimed op %s refused without the located error: %s" % (
                            ",".join(sorted(set(unclaimed))), err)
                    return "unsupported", err
                return "refused", err
            if unclaimed:
                return "crashed", "ran although op %s is not claimed" % ",".join(sorted(set(unclaimed)))
            if bad_input is not None:
                return "crashed", "ran with an input of type %s that dpc does not take" % bad_input
            rtol, atol = TOLERANCE.get(name, (RTOL, ATOL))
            for k, (p, want) in enumerate(zip(opaths, outs)):
                got = np.load(p)
                if got.shape != want.shape:
                    return "wrong", "%s: output %d has shape %s, want %s" % (os.path.basename(ds), k, got.shape,
                                                                             want.shape)
                if want.dtype == np.bool_ or want.dtype.kind in "iu":
                    ok = np.array_equal(got.astype(np.float64), want.astype(np.float64))
                    if not ok:
                        return "wrong", "%s: output %d differs" % (os.path.basename(ds), k)
                    continue
                try:
                    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                               atol=atol)
                except AssertionError:
                    d = np.abs(got.astype(np.float64) - want.astype(np.float64))
                    return "wrong", "%s: output %d differs, max abs error %.3g" % (os.path.basename(ds), k,
                                                                                   float(np.nanmax(d)) if d.size else 0)
            for p in opaths:
                os.unlink(p)
        return "pass", ""
    finally:
        shutil.rmtree(work, ignore_errors=True)


def read_expect(path):
    exp = {}
    if not path or not os.path.exists(path):
        return exp
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[1] not in ("wrong", "refused"):
                sys.exit("%s:%d: want `case wrong|refused reason`" % (path, ln))
            exp[parts[0]] = (parts[1], parts[2])
    return exp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dpc")
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--expect")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--only", default="*")
    ap.add_argument("--shard", default="1/1", help="K/N: every N-th case from the K-th")
    ap.add_argument("--suite", default=None)
    ap.add_argument("--write-expect")
    ap.add_argument("--markdown")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    t0 = time.time()
    claimed = list_ops(a.dpc)
    exp = read_expect(a.expect)
    cases = []
    for d in a.dirs:
        if not os.path.isdir(d):
            print("%s: not installed (Debian's libonnx-testdata); skipped" % d)
            return 77
        for c in sorted(os.listdir(d)):
            p = os.path.join(d, c)
            if fnmatch.fnmatch(c, a.only) and os.path.exists(os.path.join(p, "model.onnx")):
                cases.append(p)
    shk, nsh = (int(x) for x in a.shard.split("/"))
    cases = cases[shk - 1::nsh]
    suite = a.suite or "+".join(os.path.basename(d.rstrip("/")) for d in a.dirs)
    results = {}
    with cf.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = {ex.submit(run_case, a.dpc, c, claimed, a.timeout): c for c in cases}
        for f in cf.as_completed(futs):
            results[futs[f]] = f.result()
    fails = []
    per_op = {}
    counts = {}
    for c in cases:
        name = os.path.basename(c)
        cls, detail = results[c]
        counts[cls] = counts.get(cls, 0) + 1
        _, types = model_ops(onnx.load(os.path.join(c, "model.onnx"), load_external_data=False))
        k = op_key(types)
        po = per_op.setdefault(k, [0, 0])
        po[1] += 1
        po[0] += cls == "pass"
        if a.v:
            print("%-60s %-11s %s" % (name, cls, detail[:200]))
        if cls == "crashed":
            fails.append("%s: %s" % (name, detail))
        elif cls in ("wrong", "refused"):
            if name not in exp:
                fails.append("%s: %s, not listed in the expectations: %s" % (name, cls, detail))
            elif exp[name][0] != cls:
                fails.append("%s: %s, but listed as %s: %s" % (name, cls, exp[name][0], detail))
        elif cls == "pass" and name in exp:
            fails.append("%s: passes now; remove it from the expectations file" % name)
        elif cls == "unsupported" and name in exp:
            fails.append("%s: its op is not claimed; remove it from the expectations file" % name)
    if a.only == "*" and nsh == 1:
        every = {c for d in a.dirs for c in os.listdir(d)}
        for n in exp:
            if n not in every and not any(os.path.isdir(os.path.join(os.path.dirname(d.rstrip("/")), s, n))
                                          for d in a.dirs for s in ("node", "pytorch-converted", "pytorch-operator")):
                fails.append("%s: listed in the expectations but no such case" % n)
    npass = counts.get("pass", 0)
    line = "%d of %d %s cases pass" % (npass, len(cases), suite + ("" if nsh == 1 else " (shard %d/%d)" % (shk, nsh)))
    print(line)
    print("  " + ", ".join("%s %d" % (k, counts.get(k, 0)) for k in ("pass", "wrong", "refused", "unsupported",
                                                                       "crashed")))
    claimed_cases = [c for c in cases if results[c][0] != "unsupported"]
    print("  cases of claimed ops: %d, of which %d pass" % (len(claimed_cases),
                                                             sum(results[c][0] == "pass" for c in claimed_cases)))
    print("  per op (pass/cases), ops with a passing case:")
    row = []
    for k in sorted(per_op):
        if per_op[k][0]:
            row.append("%s %d/%d" % (k, per_op[k][0], per_op[k][1]))
    for i in range(0, len(row), 6):
        print("    " + ", ".join(row[i:i + 6]))
    print("  %.0f s, %d jobs" % (time.time() - t0, a.jobs))
    if a.write_expect:
        with open(a.write_expect, "w") as f:
            for c in cases:
                cls, detail = results[c]
                if cls in ("wrong", "refused"):
                    why = detail.replace("dpc: error: ", "").replace(c + "/model.onnx: ", "")
                    why = re.sub(r"^.*?/model\.onnx: ", "", why)
                    f.write("%s %s %s\n" % (os.path.basename(c), cls, why[:240]))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("%s (%s).\n\n" % (line, ", ".join("%s %d" % (k, counts.get(k, 0)) for k in
                                                      ("pass", "wrong", "refused", "unsupported", "crashed"))))
            f.write("| op | pass / cases |\n| --- | --- |\n")
            for k in sorted(per_op):
                if k != "(several ops)" and per_op[k][0] or (k in claimed and per_op[k][1]):
                    f.write("| %s | %d / %d |\n" % (k, per_op[k][0], per_op[k][1]))
    if fails:
        print("FAILED: %d case(s):" % len(fails))
        for x in fails:
            print("  " + x)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
