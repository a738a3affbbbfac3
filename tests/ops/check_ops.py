#!/usr/bin/python3
"""check_ops — per-op differential tests of `dpc run` against PyTorch (float64).

    check_ops.py DPC TARGET... [--batches 1,2,5] [--devices cpu,cpu] [--rtol 1e-5]
                 [--jobs J] [--pending] [--keep DIR] [-v]

TARGET is `all` (every family under tests/ops/cases), a family name or
directory (`conv`, tests/ops/cases/conv) or one `.dp` file.

For each case (see gen_cases.py for the `#@` header directives):

* weights: tests/ref/torch_init.py's PyTorch default init (seed 1) with
  --random-stats and --random-affine, so BatchNorm statistics and the
  BatchNorm/LayerNorm affine parameters matter;
* for each batch size: inputs from tests/ref/make_inputs.py (seed = batch);
  outputs from `dpc run` and from tests/ref/torch_run.py in float64; every
  output must pass compare.py's test (shape equal, non-finite values at the
  same places, relative L2 error <= --rtol);
* unless the case is `#@ single-device`, `dpc run --devices cpu,cpu` must
  match the one-device result within 1e-6 relative L2;
* a `#@ nonfinite` case has NaN, +inf and -inf among its float inputs
  (add_nonfinite), so that PyTorch's NaN and infinities are checked too;
  `#@ env NAME=VALUE` lines are `dpc run`'s environment.

The reference scripts are imported and called in-process (the same functions
their command lines call), so torch is imported once; `dpc` runs as a
subprocess.

Expected failures: tests/ops/pending.txt lists `family/case  reason` for
cases that fail because of a known, reported dpc bug.  They still run: a
pending case that fails is reported as XFAIL and does not fail the test; one
that passes is XPASS, which fails the test (remove its line from
pending.txt).  `--pending` runs only the pending cases and requires them to
pass (the DISABLED CTest ops_pending).

Exit status: 0 all passed, 1 some case failed, 2 usage.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.normpath(os.path.join(HERE, "..", "ref"))
CASES = os.path.join(HERE, "cases")
PENDING = os.path.join(HERE, "pending.txt")
sys.path.insert(0, REF)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import compare  # noqa: E402
import make_inputs  # noqa: E402
import st  # noqa: E402
import torch_init  # noqa: E402
import torch_run  # noqa: E402

warnings.filterwarnings("ignore", category=UserWarning)  # torch's deprecation/perf notes
torch.set_num_threads(1)

# torch_init/make_inputs/torch_run reseed torch's global generator and build
# models that draw from it; one lock keeps them deterministic across threads.
TORCH_LOCK = threading.Lock()
DP_RTOL = 1e-6


class CaseFailure(Exception):
    """A case failed; `mismatch` is true for a wrong value (not a dpc error)."""

    def __init__(self, msg, mismatch=False):
        super().__init__(msg)
        self.mismatch = mismatch


def perturb(arr: np.ndarray) -> np.ndarray:
    """A small, dense change (about 1e-3 relative): each element plus 1e-3
    times its neighbour, plus 1e-3 times the mean magnitude. Non-finite
    elements (#@ nonfinite) stay as they are and add nothing to the others."""
    flat = arr.astype(np.float64).ravel()
    fin = np.isfinite(flat)
    scale = float(np.mean(np.abs(flat[fin]))) if fin.any() else 0.0
    out = flat + 1e-3 * np.where(np.roll(fin, 1), np.roll(flat, 1), 0.0) + 1e-3 * (scale or 1.0)
    out = np.where(fin, out, flat)
    return out.reshape(arr.shape).astype(arr.dtype)


def add_nonfinite(arr: np.ndarray, seed: int) -> np.ndarray:
    """arr with NaN, +inf and -inf in place of a few elements of the even
    samples (dim 0): min(3, max(1, size // 4)) of them at positions drawn
    with seed, the kind cycling from the sample's index (a sample of 12
    elements or more holds all three kinds). The odd samples stay finite,
    so that an output all of whose elements a special reaches (a global
    pool of a small image, a broadcast one-element operand) still has
    values that a perturbed input changes (--mutate)."""
    out = np.array(arr, copy=True)
    if out.dtype.kind != "f" or out.ndim == 0 or out.size == 0:
        return out
    rng = np.random.default_rng(seed)
    kinds = (np.nan, np.inf, -np.inf)
    for n in range(0, out.shape[0], 2):
        flat = out[n].reshape(-1)
        k = min(3, max(1, flat.size // 4), flat.size)
        for j, p in enumerate(rng.choice(flat.size, size=k, replace=False)):
            flat[p] = kinds[(n // 2 + j) % 3]
        out[n] = flat.reshape(out[n].shape)
    return out


def parse_header(path: str) -> dict:
    meta = {"kw": [], "single_device": None, "nonfinite": False, "env": {}}
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                if line.strip():
                    break
                continue
            if line.startswith("#@ kw "):
                meta["kw"].append(line[len("#@ kw "):].strip())
            elif line.startswith("#@ single-device"):
                meta["single_device"] = line[len("#@ single-device"):].strip() or "yes"
            elif line.strip() == "#@ nonfinite":
                meta["nonfinite"] = True
            elif line.startswith("#@ env "):
                name, _, value = line[len("#@ env "):].strip().partition("=")
                meta["env"][name] = value
    return meta


def load_pending() -> dict:
    out = {}
    if os.path.exists(PENDING):
        with open(PENDING) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    name, _, reason = line.partition(" ")
                    out[name] = reason.strip()
    return out


def case_name(path: str) -> str:
    p = os.path.abspath(path)
    return "%s/%s" % (os.path.basename(os.path.dirname(p)), os.path.splitext(os.path.basename(p))[0])


def collect(targets: list[str]) -> list[str]:
    paths = []
    for t in targets:
        if t == "all":
            for fam in sorted(os.listdir(CASES)):
                d = os.path.join(CASES, fam)
                if os.path.isdir(d):
                    paths += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".dp")]
        elif t.endswith(".dp"):
            paths.append(t)
        else:
            d = t if os.path.isdir(t) else os.path.join(CASES, t)
            if not os.path.isdir(d):
                raise SystemExit("check_ops.py: no case directory or family '%s'" % t)
            paths += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".dp")]
    if not paths:
        raise SystemExit("check_ops.py: no cases found")
    return paths


def dpc_run(dpc, model, w, inputs, kw, outs, devices=None, timeout=300, env=None):
    cmd = [dpc, "run", model, "--weights", w]
    for p in inputs:
        cmd += ["--input", p]
    for k in kw:
        cmd += ["--kw", k]
    if devices:
        cmd += ["--devices", devices]
    for o in outs:
        cmd += ["-o", o]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired:
        raise CaseFailure("timed out after %ds: %s" % (timeout, " ".join(cmd)))
    shown = " ".join(["%s=%s" % kv for kv in (env or {}).items()] + cmd)
    if r.returncode != 0:
        msg = (r.stderr.strip() or r.stdout.strip() or "(no message)")
        raise CaseFailure("dpc failed (exit %d): %s\n  command: %s" % (
            r.returncode, msg.replace("\n", "\n  "), shown))
    return shown.split(" ")


def output_label(path: str, i: int) -> str:
    """The `# output i: ...` comment of a case, to name the failing variant."""
    tag = "# output %d: " % i
    with open(path) as f:
        for line in f:
            s = line.strip()
            if s.startswith(tag):
                return s[len(tag):]
    return ""


def run_case(path: str, a, workdir: str) -> list[str]:
    """Run one case; return log lines.  Raises CaseFailure."""
    meta = parse_header(path)
    name = case_name(path)
    d = os.path.join(workdir, name.replace("/", "__"))
    os.makedirs(d, exist_ok=True)
    log = []
    killed, nout = set(), 0
    w = os.path.join(d, "w.safetensors")
    with TORCH_LOCK:
        try:
            tensors = torch_init.init_state(path, seed=1, random_stats=True, random_affine=True)
        except Exception as e:  # noqa: BLE001
            raise CaseFailure("reference cannot build the model: %s" % e)
        st.save(w, tensors, metadata={"format": "pt"})
    wd = w
    if a.mutate == "dpc-inputs":
        # dpc sees slightly wrong weights and inputs; the comparison must notice
        wd = os.path.join(d, "w-mutated.safetensors")
        st.save(wd, {k: perturb(v) if v.dtype.kind == "f" else v for k, v in tensors.items()},
                metadata={"format": "pt"})
    for b in a.batches:
        bdir = os.path.join(d, "b%d" % b)
        os.makedirs(bdir, exist_ok=True)
        with TORCH_LOCK:
            arrays = make_inputs.make_inputs(path, b, b)
            inputs = []
            for i, (_, arr) in enumerate(arrays):
                ip = os.path.join(bdir, "x%d.npy" % i)
                if meta["nonfinite"]:
                    arr = add_nonfinite(arr, 1000 * b + i)
                np.save(ip, arr, allow_pickle=False)
                inputs.append(ip)
            refs = torch_run.run(path, w, inputs, meta["kw"], torch.float64)
        dinputs = inputs
        if a.mutate == "dpc-inputs":
            dinputs = []
            for i, ip in enumerate(inputs):
                arr = np.load(ip)
                mp = os.path.join(bdir, "x%d-mutated.npy" % i)
                np.save(mp, perturb(arr) if arr.dtype.kind == "f" else arr)
                dinputs.append(mp)
        elif a.mutate == "ref":
            # one reference element off by 1e-4 of the output's norm
            refs = [np.ascontiguousarray(ref) for ref in refs]
            for ref in refs:
                flat = ref.reshape(-1)
                fin = np.flatnonzero(np.isfinite(flat))
                if fin.size:
                    flat[fin[fin.size // 2]] += 1e-4 * max(np.linalg.norm(flat[fin]), 1e-30)
        nout = len(refs)
        outs = [os.path.join(bdir, "y%d.npy" % i) for i in range(len(refs))]
        cmd = dpc_run(a.dpc, path, wd, dinputs, meta["kw"], outs, env=meta["env"])
        worst = 0.0
        for i, (o, ref) in enumerate(zip(outs, refs)):
            got = np.load(o, allow_pickle=False)
            with np.errstate(invalid="ignore"):
                ok, report = compare.compare(got, ref, a.rtol)
            if a.mutate:
                if not ok:
                    killed.add(i)
                continue
            if not ok:
                np.save(os.path.join(bdir, "ref%d.npy" % i), ref)
                lab = output_label(path, i)
                raise CaseFailure("batch %d, output %d%s: %s\n  command: %s" % (
                    b, i, " (%s)" % lab if lab else "", report, " ".join(cmd)), mismatch=True)
            if got.shape == ref.shape and got.size:
                with np.errstate(invalid="ignore"):
                    worst = max(worst, compare.rel_l2(got, ref))
        line = "batch %d: %d output(s), worst rel_l2 %.2e" % (b, len(refs), worst)
        if a.devices and not meta["single_device"] and not a.mutate:
            outs2 = [o[:-4] + ".dp.npy" for o in outs]
            cmd2 = dpc_run(a.dpc, path, w, inputs, meta["kw"], outs2, devices=a.devices, env=meta["env"])
            worst_dp = 0.0
            for i, (o, o2) in enumerate(zip(outs, outs2)):
                x, y = np.load(o), np.load(o2)
                if x.shape != y.shape:
                    raise CaseFailure("batch %d, output %d: --devices %s gives shape %s, one device %s"
                                      "\n  command: %s" % (b, i, a.devices, list(y.shape), list(x.shape),
                                                           " ".join(cmd2)), mismatch=True)
                with np.errstate(invalid="ignore"):
                    ok, report = compare.compare(y, x, DP_RTOL)
                if not ok:
                    raise CaseFailure("batch %d, output %d: --devices %s vs one device: %s\n  command: %s"
                                      % (b, i, a.devices, report, " ".join(cmd2)), mismatch=True)
                if x.size:
                    with np.errstate(invalid="ignore"):
                        worst_dp = max(worst_dp, compare.rel_l2(y, x))
            line += ", --devices %s vs 1: %.2e" % (a.devices, worst_dp)
        log.append(line)
    if a.mutate:
        alive = [i for i in range(nout) if i not in killed]
        if alive:
            raise CaseFailure("output(s) %s did not notice the mutation" % ", ".join(
                "%d%s" % (i, " (%s)" % output_label(path, i) if output_label(path, i) else "")
                for i in alive))
        raise CaseFailure("all %d output(s) noticed the mutation" % nout, mismatch=True)
    return log


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Per-op differential tests of dpc against PyTorch.")
    ap.add_argument("dpc")
    ap.add_argument("targets", nargs="+", help="all, a family, a case directory or a .dp file")
    ap.add_argument("--batches", default="1,2,5")
    ap.add_argument("--devices", default="cpu,cpu", help="'' to skip the data-parallel check")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--jobs", "-j", type=int, default=1)
    ap.add_argument("--pending", action="store_true",
                    help="run only the cases of pending.txt and require them to pass")
    ap.add_argument("--keep", help="keep weights, inputs and outputs under this directory")
    ap.add_argument("--mutate", choices=["dpc-inputs", "ref"],
                    help="self-test of the suite: give dpc slightly perturbed weights and inputs "
                         "(dpc-inputs), or corrupt one reference value per output (ref); every "
                         "case must then FAIL with a value mismatch, and the run succeeds only if "
                         "all do (pending cases are skipped)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    a.batches = [int(x) for x in a.batches.split(",") if x]
    if not os.access(a.dpc, os.X_OK):
        ap.error("dpc binary '%s' is not executable" % a.dpc)
    a.dpc = os.path.abspath(a.dpc)
    pending = load_pending()
    paths = collect(a.targets)
    if a.pending:
        paths = [p for p in paths if case_name(p) in pending]
        if not paths:
            print("no pending cases in the selection")
            return 0
    if a.mutate:
        paths = [p for p in paths if case_name(p) not in pending]
    workdir = a.keep or tempfile.mkdtemp(prefix="dpc-ops-")
    os.makedirs(workdir, exist_ok=True)
    t0 = time.time()
    results = {}

    def one(p):
        t = time.time()
        try:
            log = run_case(p, a, workdir)
            return p, None, log, time.time() - t
        except CaseFailure as e:
            return p, e, [], time.time() - t
        except Exception as e:  # noqa: BLE001  (a reference error is a failure too)
            return p, CaseFailure("%s: %s" % (type(e).__name__, e)), [], time.time() - t

    if a.mutate:
        survived = []
        try:
            with cf.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
                for p, err, log, dt in ex.map(one, paths):
                    name = case_name(p)
                    if err is not None and err.mismatch:
                        print("killed   %s: %s" % (name, str(err).split("\n")[0][:200]), flush=True)
                    else:
                        survived.append(name)
                        print("SURVIVED %s: %s" % (name, str(err)[:600]), flush=True)
        finally:
            if not a.keep:
                shutil.rmtree(workdir, ignore_errors=True)
        print("--mutate %s: %d case(s), %d killed, %d survived in %.1fs"
              % (a.mutate, len(paths), len(paths) - len(survived), len(survived), time.time() - t0))
        return 1 if survived else 0

    try:
        with cf.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
            for p, err, log, dt in ex.map(one, paths):
                name = case_name(p)
                err = None if err is None else str(err)
                results[name] = err
                is_pending = name in pending and not a.pending
                if err is None:
                    status = "XPASS" if is_pending else "ok"
                else:
                    status = "XFAIL" if is_pending else "FAIL"
                print("%-5s %s (%.1fs)" % (status, name, dt), flush=True)
                if a.verbose or status in ("FAIL", "XPASS"):
                    for line in log:
                        print("      " + line)
                if err is not None and (status == "FAIL" or a.verbose):
                    print("      " + err.replace("\n", "\n      "))
                if status == "XFAIL":
                    print("      pending: %s" % pending[name])
                    if a.verbose is False:
                        print("      " + err.split("\n")[0][:300])
                if status == "XPASS":
                    print("      listed in tests/ops/pending.txt (%s) but passes now: remove it "
                          "from the list" % pending[name])
    finally:
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    failed = [n for n, e in results.items() if e is not None and (a.pending or n not in pending)]
    xpass = [n for n, e in results.items() if e is None and n in pending and not a.pending]
    xfail = [n for n, e in results.items() if e is not None and n in pending and not a.pending]
    print("%d case(s): %d passed, %d failed, %d expected failure(s), %d unexpected pass(es) in %.1fs"
          % (len(results), len(results) - len(failed) - len(xfail) - len(xpass), len(failed),
             len(xfail), len(xpass), time.time() - t0))
    return 1 if failed or xpass else 0


if __name__ == "__main__":
    sys.exit(main())
