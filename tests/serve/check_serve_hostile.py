#!/usr/bin/env python3
"""dpc serve against hostile requests (issue 30, items 9 and 11):
check_serve_hostile.py DPC MODELS WORK. One server (models/mlp.dp, forward
x: [N, 784], the default --max-body of 64 MiB) on 127.0.0.1, stopped by
SIGTERM and required to exit 0.

memory   a 73-byte JSON body announcing shape [85598, 784] (268 MB of
         float32, just under what --max-body allows) is a 400 without the
         tensor ever being allocated: 8 at once, the server's peak RSS
         (VmHWM, reset through /proc/PID/clear_refs) grows by under 100 MB;
         the same for the binary extension (binary_data_size announcing
         268 MB, no bytes following)
names    /v2/models/MLP%00 (metadata, ready, infer), MLP%1F and version
         1%00 are refused (400/404 with a KServe error body), never served
         as MLP; an input named "x\\u0000y" is not taken for x
utf8     every error body that echoes a name is valid UTF-8 JSON: a model
         name, a path, an input and a keyword name of two-byte characters
         cut at the echo limit, raw invalid bytes in names and in a
         request id (a 200 then)
"""
import json
import os
import subprocess
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server  # noqa: E402

DPC, MODELS, WORK = sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def vm_hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def reset_hwm(pid):
    """Peak RSS back to the current RSS (proc(5): clear_refs 5)."""
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


def error_body(data):
    """The error message of a KServe error body, or None when the body is
    not valid UTF-8 JSON of that form."""
    try:
        err = json.loads(data.decode("utf-8"))["error"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None
    return err if isinstance(err, str) and err else None


def at_once(srv, n, path, body, headers):
    """n POSTs in parallel; their (status, data)."""
    res = [None] * n

    def one(i):
        try:
            st, _, data = srv.request("POST", path, body, headers)
            res[i] = (st, data)
        except Exception as e:  # a dropped connection counts as a failure
            res[i] = (None, repr(e).encode())

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return res


def memory(srv):
    pid = srv.proc.pid
    infer = "/v2/models/MLP/infer"
    body = b'{"inputs":[{"name":"x","shape":[85598,784],"datatype":"FP32","data":[]}]}'
    head = (b'{"inputs":[{"name":"x","shape":[85598,784],"datatype":"FP32",'
            b'"parameters":{"binary_data_size":268435328}}]}')
    for what, data, hdr in [("JSON", body, {}),
                            ("binary", head, {"Inference-Header-Content-Length": str(len(head))})]:
        reset_hwm(pid)
        before = vm_hwm(pid)
        res = at_once(srv, 8, infer, data, dict(hdr, **{"Content-Type": "application/json"}))
        grew = vm_hwm(pid) - before
        print("%s: %d-byte body announcing [85598, 784], 8 at once: peak RSS +%.1f MB" % (what, len(data), grew / 1e6),
              flush=True)
        for st, d in res:
            check(st == 400 and error_body(d), "%s announcing 268 MB: %s %r" % (what, st, d[:200]))
        check(grew < 100e6, "%s: 8 bodies announcing 268 MB each grew the server's peak RSS by %.0f MB"
              % (what, grew / 1e6))


def names(srv):
    st, _, _ = srv.request("GET", "/v2/models/MLP")
    check(st == 200, "plain metadata: %s" % st)
    x = np.linspace(-1, 1, 784, dtype=np.float32)
    good = json.dumps({"inputs": [{"name": "x", "shape": [1, 784], "datatype": "FP32", "data": x.tolist()}]})
    for method, path, body in [("GET", "/v2/models/MLP%00", None), ("GET", "/v2/models/MLP%00/ready", None),
                               ("GET", "/v2/models/MLP%00/versions/1", None), ("GET", "/v2/models/MLP%1F", None),
                               ("GET", "/v2/models/MLP/versions/1%00", None),
                               ("GET", "/v2/models/MLP/versions/1%00/ready", None),
                               ("POST", "/v2/models/MLP%00/infer", good.encode()),
                               ("POST", "/v2/models/MLP%7F/infer", good.encode())]:
        st, _, data = srv.request(method, path, body)
        check(st in (400, 404) and error_body(data), "%s %s: %s %r" % (method, path, st, data[:200]))
    nul = good.replace('"name": "x"', '"name": "x\\u0000y"').encode()
    st, _, data = srv.request("POST", "/v2/models/MLP/infer", nul)
    check(st == 400 and error_body(data), "input named x\\u0000y: %s %r" % (st, data[:200]))


def utf8(srv):
    e2 = "%C3%A9"  # U+00E9, two bytes
    x = [0.25] * 784
    cases = [("GET", "/v2/models/a" + e2 * 150, None, 400),
             ("GET", "/v2/models/MLP/versions/a" + e2 * 80, None, 400),
             ("GET", "/v3/a" + e2 * 150, None, 404),
             ("GET", "/v2/models/MLP/ab" + e2 * 150, None, 404),
             ("GET", "/v2/models/%FF%FEa%C3", None, 400)]
    for method, path, body, want in cases:
        st, _, data = srv.request(method, path, body)
        check(st == want and error_body(data), "%s %s...: %s, body not UTF-8 JSON: %r" % (method, path[:40], st,
                                                                                       data[-80:]))
    long_name = "a" + "\u00e9" * 80
    bodies = [json.dumps({"inputs": [{"name": long_name, "shape": [1, 784], "datatype": "FP32", "data": x}]},
                         ensure_ascii=False).encode(),
              json.dumps({"inputs": [{"name": "x", "shape": [1, 784], "datatype": "FP32", "data": x}],
                          "parameters": {long_name: 1}}, ensure_ascii=False).encode(),
              b'{"inputs":[{"name":"\xff\xfeq\xc3","shape":[1,784],"datatype":"FP32","data":[]}]}',
              json.dumps({"inputs": [{"name": "x", "shape": [1, 784], "datatype": "FP32", "data": x}],
                          "outputs": [{"name": "output0\udce9"}]}, ensure_ascii=False).encode("utf-8", "surrogateescape")]
    for body in bodies:
        st, _, data = srv.request("POST", "/v2/models/MLP/infer", body)
        check(st == 400 and error_body(data), "error echoing a name of %r...: %s, body not UTF-8 JSON: %r"
              % (body[:50], st, data[-80:]))
    ok = json.dumps({"id": "ID", "inputs": [{"name": "x", "shape": [1, 784], "datatype": "FP32", "data": x}]})
    st, _, data = srv.request("POST", "/v2/models/MLP/infer", ok.encode().replace(b"ID", b"r\xff\xc3"))
    try:
        js = json.loads(data.decode("utf-8"))
        good = st == 200 and js["id"].startswith("r") and len(js["outputs"][0]["data"]) == 10
    except (UnicodeDecodeError, ValueError, KeyError):
        good = False
    check(good, "an id of invalid UTF-8: %s, answer not UTF-8 JSON: %r" % (st, data[:120]))


def main():
    m = os.path.join(MODELS, "mlp.dp")
    w = os.path.join(WORK, "mlp.st")
    if not os.path.exists(w):
        subprocess.run([DPC, "init", m, "-o", w, "--seed", "3"], check=True, timeout=300)
    srv = Server(DPC, m, ["--weights", w, "--max-batch", "8"])
    try:
        memory(srv)
        names(srv)
        utf8(srv)
        st, _, _ = srv.request("GET", "/v2/health/ready")
        check(st == 200, "ready after the hostile requests: %s" % st)
    finally:
        rc, err = srv.stop()
        check(rc == 0, "exit status %s after SIGTERM: %s" % (rc, err[-2000:]))
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    print("ok")


main()
