#!/usr/bin/env python3
"""A real client: tritonclient[http] from PyPI, in a venv this test creates
(VENV, reused when it already has it), drives `dpc serve` on the zoo's
resnet18 over --devices cpu,cpu with torchvision's resnet18 weights (the
zoo's test weights): server and model metadata, infer with JSON and binary
tensors, four concurrent one-row requests (batched: /metrics); the outputs
equal `dpc run` on the same inputs and torchvision's within the zoo's
bounds (rel L2 1e-5 against float64 PyTorch).
check_tritonclient.py DPC ROOT WORK VENV. Exits 77 (skipped) only when
PyPI cannot be reached to install tritonclient."""
import os
import socket
import subprocess
import sys

DPC, ROOT, WORK, VENV = sys.argv[1:5]
os.makedirs(WORK, exist_ok=True)
py = os.path.join(VENV, "bin", "python")


def have():
    return os.path.exists(py) and subprocess.run([py, "-c", "import tritonclient.http"],
                                                 capture_output=True).returncode == 0


if not have():
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", VENV], check=True, timeout=300)
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "tritonclient[http]"],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        try:
            socket.create_connection(("pypi.org", 443), timeout=10).close()
            reachable = True
        except OSError:
            reachable = False
        if not reachable:
            print("SKIP: PyPI cannot be reached to install tritonclient[http]")
            sys.exit(77)
        print(r.stdout, r.stderr)
        sys.exit("pip install tritonclient[http] failed with PyPI reachable")
    if not have():
        sys.exit("tritonclient installed but cannot be imported")

# PyTorch's side, in this (the system's) interpreter: torchvision's resnet18
# with the zoo's test weights (tests/zoo/zoo_check.py: BatchNorm statistics
# of a real batch, no constant tensors), saved as safetensors for the
# server, and its outputs in float64 and float32 on the test input
W = os.path.join(WORK, "resnet18_tv.safetensors")
X = os.path.join(WORK, "rn18_x.npy")
R64, R32 = os.path.join(WORK, "rn18_torch64.npy"), os.path.join(WORK, "rn18_torch32.npy")
if not all(os.path.exists(p) for p in (W, X, R64, R32)):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
    sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
    import numpy as np
    import zoo_check
    tv = zoo_check.original("resnet18")
    zoo_check.save_weights(tv, W)
    x = np.random.default_rng(3).standard_normal((4, 3, 224, 224)).astype(np.float32)
    r32, r64 = zoo_check.References(tv)([x])
    np.save(X, x)
    np.save(R32, r32[0])
    np.save(R64, r64[0])

# the client part runs in the venv's interpreter
client = r'''
import os, sys, numpy as np
sys.path.insert(0, os.path.join(sys.argv[2], "tests", "serve"))
from serve_util import Server, dpc_run, metric
import tritonclient.http as th
DPC, ROOT, WORK = sys.argv[1:4]
model = os.path.join(ROOT, "models", "zoo", "resnet18.dp")
w = os.path.join(WORK, "resnet18_tv.safetensors")
x4 = np.load(os.path.join(WORK, "rn18_x.npy"))
t64, t32 = np.load(os.path.join(WORK, "rn18_torch64.npy")), np.load(os.path.join(WORK, "rn18_torch32.npy"))
ref4 = dpc_run(DPC, model, w, [x4], WORK, tag="rn18")[0]
x, ref = x4[:2], ref4[:2]


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def pytorch_ok(y, rows, what):
    """y against torchvision's resnet18 on the same weights: rel L2 1e-5
    against float64, 1e-4 against float32 (the zoo's bounds)"""
    e64, e32 = rel_l2(y, t64[rows]), rel_l2(y, t32[rows])
    print("%s: rel L2 %.2e against PyTorch float64, %.2e against float32" % (what, e64, e32), flush=True)
    if not (e64 <= 1e-5 and e32 <= 1e-4):
        bad.append("%s: rel L2 %.3e against PyTorch float64, %.3e against float32" % (what, e64, e32))


srv = Server(DPC, model, ["--weights", w, "--devices", "cpu,cpu", "--max-batch", "4", "--max-delay-us", "300000"])
bad = []
try:
    c = th.InferenceServerClient("127.0.0.1:%d" % srv.port, connection_timeout=60, network_timeout=120)
    if not (c.is_server_live() and c.is_server_ready() and c.is_model_ready("ResNet")):
        bad.append("health")
    md = c.get_model_metadata("ResNet")
    if md["inputs"][0]["name"] != "x" or md["inputs"][0]["shape"] != [-1, 3, 224, 224] or md["outputs"][0]["name"] != "output0":
        bad.append("metadata %s" % md)
    if c.get_server_metadata()["name"] != "dpc":
        bad.append("server metadata")
    for binary in (False, True):
        i = th.InferInput("x", list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=binary)
        o = th.InferRequestedOutput("output0", binary_data=binary)
        r = c.infer("ResNet", [i], outputs=[o])
        y = r.as_numpy("output0")
        if y is None or y.shape != ref.shape or not np.allclose(y, ref, rtol=1e-5, atol=1e-5):
            bad.append("infer (binary %s): max diff %s" % (binary, None if y is None else np.abs(y - ref).max()))
        else:
            pytorch_ok(y, slice(0, 2), "infer (binary %s)" % binary)
    # four one-row requests at once (the client's own concurrency): batched
    # over the two replicas, as /metrics shows; each row PyTorch's
    def count(name):
        return metric(srv.request("GET", "/metrics")[2].decode(), name)
    n0 = count("dpc_batch_size_count")
    c4 = th.InferenceServerClient("127.0.0.1:%d" % srv.port, concurrency=4, connection_timeout=60, network_timeout=120)
    pend = []
    for k in range(4):
        i = th.InferInput("x", [1, 3, 224, 224], "FP32")
        i.set_data_from_numpy(x4[k:k + 1], binary_data=True)
        pend.append(c4.async_infer("ResNet", [i], outputs=[th.InferRequestedOutput("output0", binary_data=True)]))
    for k, p in enumerate(pend):
        y = p.get_result(timeout=300).as_numpy("output0")
        if y is None or not np.allclose(y, ref4[k:k + 1], rtol=1e-5, atol=1e-5):
            bad.append("one-row request %d differs from dpc run" % k)
        else:
            pytorch_ok(y, slice(k, k + 1), "one-row request %d" % k)
    c4.close()
    nb = count("dpc_batch_size_count") - n0
    print("4 concurrent one-row requests in %d batch(es)" % nb, flush=True)
    if not 1 <= nb < 4:
        bad.append("4 concurrent one-row requests ran in %d batches: not batched" % nb)
    try:
        c.infer("ResNet", [th.InferInput("y", [1], "FP32")])
        bad.append("unknown input accepted")
    except th.InferenceServerException as e:
        if "unknown input" not in str(e):
            bad.append("unknown input: %s" % e)
    c.close()
finally:
    rc, err = srv.stop()
    if rc != 0:
        bad.append("exit %s: %s" % (rc, err[-1000:]))
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
'''
sys.exit(subprocess.run([py, "-c", client, DPC, ROOT, WORK], timeout=1200).returncode)
