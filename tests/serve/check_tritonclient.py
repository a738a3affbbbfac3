#!/usr/bin/env python3
"""A real client: tritonclient[http] from PyPI, in a venv this test creates
(VENV, reused when it already has it), drives `dpc serve` on the zoo's
resnet18 over --devices cpu,cpu: server and model metadata, infer with
JSON and binary tensors; the outputs equal `dpc run` on the same inputs.
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

# the client part runs in the venv's interpreter
client = r'''
import os, sys, numpy as np
sys.path.insert(0, os.path.join(sys.argv[2], "tests", "serve"))
from serve_util import Server, dpc_run
import tritonclient.http as th
DPC, ROOT, WORK = sys.argv[1:4]
model = os.path.join(ROOT, "models", "zoo", "resnet18.dp")
w = os.path.join(WORK, "resnet18.st")
if not os.path.exists(w):
    import subprocess
    subprocess.run([DPC, "init", model, "-o", w, "--seed", "5"], check=True, timeout=600)
x = np.random.default_rng(3).standard_normal((2, 3, 224, 224)).astype(np.float32)
ref = dpc_run(DPC, model, w, [x], WORK, tag="rn18")[0]
srv = Server(DPC, model, ["--weights", w, "--devices", "cpu,cpu", "--max-batch", "4"])
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
