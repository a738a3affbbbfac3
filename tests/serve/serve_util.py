"""Helpers of the dpc serve tests: start a server on 127.0.0.1 on a free
port (--port 0, the bound port read from its first stdout line), stop it
with SIGTERM, make HTTP requests with a timeout, and compute references
with `dpc run`."""
import http.client
import json
import os
import re
import select
import signal
import struct
import subprocess
import time

import numpy as np

TIMEOUT = 60


class Server:
    def __init__(self, dpc, model, args=(), env=None, start_timeout=240):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen([dpc, "serve", model, "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=e)
        line = b""
        deadline = time.time() + start_timeout
        while b"\n" not in line:
            left = deadline - time.time()
            r, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not r:
                self.proc.kill()
                raise RuntimeError("dpc serve did not start in %d s" % start_timeout)
            ch = os.read(self.proc.stdout.fileno(), 1)
            if not ch:
                err = self.proc.stderr.read().decode(errors="replace")
                raise RuntimeError("dpc serve exited (%s): %s" % (self.proc.wait(), err))
            line += ch
        m = re.search(rb"http://127\.0\.0\.1:(\d+)", line)
        assert m, line
        self.port = int(m.group(1))

    def stop(self, timeout=60):
        """SIGTERM; the exit status and stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -999, "did not stop within %d s" % timeout
        return rc, self.proc.stderr.read().decode(errors="replace")

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)

    def request(self, method, path, body=None, headers=None, conn=None):
        c = conn or self.conn()
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            return r.status, dict(r.getheaders()), data
        finally:
            if conn is None:
                c.close()

    def get_json(self, path):
        st, _, data = self.request("GET", path)
        return st, json.loads(data) if data else None

    def infer(self, name, inputs, params=None, outputs=None, binary_in=False, binary_out=False, conn=None, rid=None):
        """inputs: [(name, array, datatype)]; the status and {output name: array} (or the error body)."""
        req = {"inputs": []}
        if rid is not None:
            req["id"] = rid
        blobs = []
        for n, a, dt in inputs:
            t = {"name": n, "shape": list(a.shape), "datatype": dt}
            if binary_in:
                raw = np.ascontiguousarray(a).tobytes()
                t["parameters"] = {"binary_data_size": len(raw)}
                blobs.append(raw)
            else:
                t["data"] = a.reshape(-1).tolist()
            req["inputs"].append(t)
        if params:
            req["parameters"] = dict(params)
        if outputs is not None:
            req["outputs"] = [{"name": o, "parameters": {"binary_data": binary_out}} for o in outputs]
        elif binary_out:
            req.setdefault("parameters", {})["binary_data_output"] = True
        body = json.dumps(req).encode()
        headers = {"Content-Type": "application/json"}
        if binary_in:
            headers["Inference-Header-Content-Length"] = str(len(body))
            body += b"".join(blobs)
        st, h, data = self.request("POST", "/v2/models/%s/infer" % name, body, headers, conn=conn)
        return st, decode_infer(h, data) if st == 200 else json.loads(data)


def decode_infer(headers, data):
    hl = {k.lower(): v for k, v in headers.items()}.get("inference-header-content-length")
    js = json.loads(data[: int(hl)] if hl else data)
    off = int(hl) if hl else 0
    out = {}
    for o in js["outputs"]:
        dt = {"FP32": np.float32, "INT64": np.int64}[o["datatype"]]
        if "data" in o:
            out[o["name"]] = np.array(o["data"], dtype=dt).reshape(o["shape"])
        else:
            n = o["parameters"]["binary_data_size"]
            out[o["name"]] = np.frombuffer(data[off: off + n], dtype=dt).reshape(o["shape"])
            off += n
    out["_json"] = js
    return out


def dpc_run(dpc, model, weights, inputs, work, kw=(), nout=1, tag="ref"):
    """`dpc run` on numpy inputs; the outputs."""
    args = [dpc, "run", model]
    if weights:
        args += ["--weights", weights]
    for i, a in enumerate(inputs):
        p = os.path.join(work, "%s_in%d.npy" % (tag, i))
        np.save(p, a)
        args += ["--input", p]
    for k in kw:
        args += ["--kw", k]
    outs = [os.path.join(work, "%s_out%d.npy" % (tag, j)) for j in range(nout)]
    for o in outs:
        args += ["-o", o]
    subprocess.run(args, check=True, timeout=600)
    return [np.load(o) for o in outs]


def metric(text, name, labels=None):
    """The value of one Prometheus sample."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"([a-z_]+)(\{[^}]*\})? (\S+)$", line)
        if m and m.group(1) == name and (labels is None or labels in (m.group(2) or "")):
            return float(m.group(3))
    return None


def raw_http(port, data, read=True, timeout=30):
    """Sends bytes on a fresh socket; the status of the reply (or None)."""
    import socket
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return None
        buf = b""
        while b"\r\n" not in buf:
            ch = s.recv(4096)
            if not ch:
                break
            buf += ch
        m = re.match(rb"HTTP/1\.[01] (\d+)", buf)
        return int(m.group(1)) if m else None
    finally:
        s.close()


__all__ = ["Server", "dpc_run", "metric", "raw_http", "decode_infer", "struct"]
