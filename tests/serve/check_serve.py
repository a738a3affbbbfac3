#!/usr/bin/env python3
"""dpc serve over HTTP (KServe v2): check_serve.py DPC MODELS WORK PART,
PART one of protocol, batching, faults. Every server listens on 127.0.0.1
on a port it chose (--port 0), is stopped by SIGTERM and must exit 0;
every request loop is bounded in count, every request has a timeout.
References are `dpc run` on the same inputs.

protocol  health, server and model metadata, config; infer in JSON and in
          binary (inputs and outputs), FP16/INT32/BOOL inputs, output
          selection and ids, for simple, multi_input, kwargs (scalars as
          parameters), transformer (INT64 ids, two outputs) and cnn;
          256 keep-alive connections open at once, each used twice
batching  64 concurrent single-row requests: batches of more than one
          row in /metrics, every answer equal to the unbatched one, on
          --devices cpu and cpu,cpu; scale 1 and scale 2 requests at once
          are never mixed
faults    malformed JSON, over --max-body (announced and chunked), unknown
          model / input / output / path, wrong dtype / shape / element
          count, bad binary sizes, an index out of range (400, batch-mates
          unharmed), a client vanishing mid-body, queue overflow (503),
          DPC_FAULT_* (500, then served), SIGTERM with requests in flight
          (answered, exit 0)
sequence  a tiny BERT (models/zoo/bert.dp, run-time S): metadata lists the
          outputs before any run with -1 for N and S; infer at S=5 and 7;
          one-row requests of both S at once batch within one S only
"""
import json
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, dpc_run, metric, raw_http  # noqa: E402

DPC, MODELS, WORK, PART = sys.argv[1:5]
os.makedirs(WORK, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def close(a, b, tol=1e-6):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.allclose(a, b, rtol=tol, atol=tol)


def weights(model):
    w = os.path.join(WORK, os.path.basename(model) + ".st")
    if not os.path.exists(w):
        subprocess.run([DPC, "init", model, "-o", w, "--seed", "3"], check=True, timeout=300)
    return w


def model_path(name):
    return os.path.join(MODELS, name + ".dp")


def stop_ok(srv, what):
    rc, err = srv.stop()
    check(rc == 0, "%s: exit status %s after SIGTERM: %s" % (what, rc, err[-2000:]))


rng = np.random.default_rng(7)


# ---------------------------------------------------------------- protocol

def protocol():
    m = model_path("simple")
    w = weights(m)
    srv = Server(DPC, m, ["--weights", w])
    try:
        check(srv.request("GET", "/v2/health/live")[0] == 200, "live")
        check(srv.request("GET", "/v2/health/ready")[0] == 200, "ready")
        st, js = srv.get_json("/v2")
        check(st == 200 and js["name"] == "dpc" and "binary_tensor_data" in js["extensions"], "server metadata %s" % js)
        for path in ("/v2/models/SimpleModel", "/v2/models/SimpleModel/versions/1"):
            st, js = srv.get_json(path)
            check(st == 200 and js["name"] == "SimpleModel" and js["inputs"] ==
                  [{"name": "x", "datatype": "FP32", "shape": [-1, 10]}] and
                  js["outputs"] == [{"name": "output0", "datatype": "FP32", "shape": [-1, 5]}],
                  "model metadata %s: %s" % (path, js))
        check(srv.request("GET", "/v2/models/SimpleModel/ready")[0] == 200, "model ready")
        check(srv.request("GET", "/v2/models/SimpleModel/versions/1/ready")[0] == 200, "model version ready")
        check(srv.get_json("/v2/models/SimpleModel/config")[0] == 200, "config")
        x = rng.standard_normal((3, 10)).astype(np.float32)
        ref = dpc_run(DPC, m, w, [x], WORK, tag="simple")[0]
        st, out = srv.infer("SimpleModel", [("x", x, "FP32")], rid="req-7")
        check(st == 200 and close(out["output0"], ref) and out["_json"]["id"] == "req-7" and
              out["_json"]["model_name"] == "SimpleModel", "simple JSON: %s" % (out if st != 200 else ""))
        # JSON floats printed with 9 digits: the same float32 bits as dpc run
        check(st == 200 and np.array_equal(out["output0"], ref), "simple JSON not bitwise equal to dpc run")
        st, out = srv.infer("SimpleModel", [("x", x, "FP32")], binary_in=True, binary_out=True)
        check(st == 200 and np.array_equal(out["output0"], ref), "simple binary in and out")
        st, out = srv.infer("SimpleModel", [("x", x, "FP32")], binary_in=True, outputs=["output0"])
        check(st == 200 and np.array_equal(out["output0"], ref), "simple binary in, JSON out")
        x16 = x.astype(np.float16)
        ref16 = dpc_run(DPC, m, w, [x16.astype(np.float32)], WORK, tag="simple16")[0]
        for b in (False, True):
            st, out = srv.infer("SimpleModel", [("x", x16, "FP16")], binary_in=b)
            check(st == 200 and np.array_equal(out["output0"], ref16), "FP16 input (binary %s)" % b)
        xb = (x > 0)
        refb = dpc_run(DPC, m, w, [xb.astype(np.float32)], WORK, tag="simpleb")[0]
        st, out = srv.infer("SimpleModel", [("x", xb, "BOOL")], binary_in=True)
        check(st == 200 and np.array_equal(out["output0"], refb), "BOOL input")
        # batch 0
        st, out = srv.infer("SimpleModel", [("x", np.zeros((0, 10), np.float32), "FP32")])
        check(st == 200 and out["output0"].shape == (0, 5), "batch 0: %s" % (out,))
        # 256 keep-alive connections open at once, each used twice
        conns = [srv.conn() for _ in range(256)]
        ok = 0
        for c in conns:
            ok += srv.request("GET", "/v2/health/live", conn=c)[0] == 200
        results = [None] * len(conns)

        def use(i):
            results[i] = srv.infer("SimpleModel", [("x", x[:1], "FP32")], conn=conns[i])[0]
        ts = [threading.Thread(target=use, args=(i,)) for i in range(len(conns))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        check(ok == 256 and all(r == 200 for r in results), "256 keep-alive connections: %d live, %d infer ok" %
              (ok, sum(r == 200 for r in results)))
        for c in conns:
            c.close()
    finally:
        stop_ok(srv, "simple")

    m = model_path("multi_input")
    w = weights(m)
    srv = Server(DPC, m, ["--weights", w, "--devices", "cpu,cpu"])
    try:
        x1 = rng.standard_normal((5, 5)).astype(np.float32)
        x2 = rng.standard_normal((5, 5)).astype(np.float32)
        ref = dpc_run(DPC, m, w, [x1, x2], WORK, tag="multi")[0]
        st, js = srv.get_json("/v2/models/MultiInputModel")
        check(st == 200 and [i["name"] for i in js["inputs"]] == ["x1", "x2"], "multi_input metadata")
        for b in (False, True):  # inputs in either order
            st, out = srv.infer("MultiInputModel", [("x2", x2, "FP32"), ("x1", x1, "FP32")], binary_in=b,
                                binary_out=b)
            check(st == 200 and close(out["output0"], ref), "multi_input (binary %s)" % b)
    finally:
        stop_ok(srv, "multi_input")

    m = model_path("kwargs")
    w = weights(m)
    srv = Server(DPC, m, ["--weights", w])
    try:
        x = rng.standard_normal((4, 10)).astype(np.float32)
        ref1 = dpc_run(DPC, m, w, [x], WORK, tag="kw1")[0]
        ref2 = dpc_run(DPC, m, w, [x], WORK, kw=["scale=2.5"], tag="kw2")[0]
        st, out = srv.infer("KwargsModel", [("x", x, "FP32")])
        check(st == 200 and np.array_equal(out["output0"], ref1), "kwargs default scale")
        st, out = srv.infer("KwargsModel", [("x", x, "FP32")], params={"scale": 2.5})
        check(st == 200 and np.array_equal(out["output0"], ref2), "kwargs scale 2.5")
        st, js = srv.get_json("/v2/models/KwargsModel")
        check(js.get("parameters", {}).get("scale", {}).get("type") == "float", "kwargs metadata parameters")
    finally:
        stop_ok(srv, "kwargs")

    m = model_path("transformer")
    w = weights(m)
    srv = Server(DPC, m, ["--weights", w])
    try:
        ids = rng.integers(0, 100, (3, 8)).astype(np.int64)
        pos = np.tile(np.arange(8, dtype=np.int64), (3, 1))
        ref = dpc_run(DPC, m, w, [ids, pos], WORK, nout=2, tag="tfm")
        st, out = srv.infer("Transformer", [("ids", ids, "INT64"), ("pos", pos, "INT64")])
        check(st == 200 and close(out["output0"], ref[0]) and close(out["output1"], ref[1]), "transformer INT64")
        st, out = srv.infer("Transformer", [("ids", ids.astype(np.int32), "INT32"), ("pos", pos.astype(np.int32),
                                                                                     "INT32")], binary_in=True,
                            outputs=["output1"])
        check(st == 200 and close(out["output1"], ref[1]) and "output0" not in out, "transformer INT32, output1 only")
    finally:
        stop_ok(srv, "transformer")

    m = model_path("cnn")
    w = weights(m)
    srv = Server(DPC, m, ["--weights", w, "--devices", "cpu,cpu", "--max-batch", "8"])
    try:
        x = rng.standard_normal((3, 3, 16, 16)).astype(np.float32)
        ref = dpc_run(DPC, m, w, [x], WORK, tag="cnn")[0]
        name = re.search(r"DataParallel\((\w+)\(", open(m).read()).group(1)
        st, js = srv.get_json("/v2/models/" + name)
        check(st == 200 and js["inputs"][0]["shape"] == [-1, 3, 16, 16], "cnn metadata %s" % js)
        for b in (False, True):
            st, out = srv.infer(name, [("x", x, "FP32")], binary_in=b, binary_out=b)
            check(st == 200 and close(out["output0"], ref, 1e-5), "cnn (binary %s)" % b)
    finally:
        stop_ok(srv, "cnn")


# ---------------------------------------------------------------- batching

def concurrent(srv, name, reqs, nthreads=64):
    """Sends reqs [(array, params)] from nthreads threads at once; statuses and outputs."""
    res = [None] * len(reqs)
    barrier = threading.Barrier(nthreads)

    def work(k):
        barrier.wait(30)
        for i in range(k, len(reqs), nthreads):
            res[i] = srv.infer(name, [("x", reqs[i][0], "FP32")], params=reqs[i][1])
    ts = [threading.Thread(target=work, args=(k,)) for k in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return res


def batching():
    m = model_path("kwargs")
    w = weights(m)
    rows = [rng.standard_normal((1, 10)).astype(np.float32) for _ in range(64)]
    for devs in ("cpu", "cpu,cpu"):
        srv = Server(DPC, m, ["--weights", w, "--devices", devs, "--max-batch", "64", "--max-delay-us", "20000"])
        try:
            # unbatched answers: one request at a time
            alone = {}
            for i, x in enumerate(rows[:16]):
                for sc in (1.0, 2.0):
                    st, out = srv.infer("KwargsModel", [("x", x, "FP32")], params={"scale": sc})
                    check(st == 200, "sequential request %d" % i)
                    alone[i, sc] = out["output0"]
            before = srv.request("GET", "/metrics")[2].decode()
            b1 = metric(before, "dpc_batch_size_bucket", 'le="1"')
            n1 = metric(before, "dpc_batch_size_count")
            check(b1 == n1, "%s: sequential requests ran in batches of one (%s of %s)" % (devs, b1, n1))
            res = concurrent(srv, "KwargsModel", [(x, {"scale": 1.0}) for x in rows])
            check(all(r and r[0] == 200 for r in res), "%s: 64 concurrent requests all answered" % devs)
            for i, r in enumerate(res):
                if r and r[0] == 200 and i < 16:
                    check(close(r[1]["output0"], alone[i, 1.0]), "%s: request %d differs from its unbatched answer"
                          % (devs, i))
            after = srv.request("GET", "/metrics")[2].decode()
            b1a = metric(after, "dpc_batch_size_bucket", 'le="1"')
            na = metric(after, "dpc_batch_size_count")
            s = metric(after, "dpc_batch_size_sum")
            print("%s: 64 concurrent requests in %d batches (%d of one row), %d rows" %
                  (devs, na - n1, b1a - b1, s - metric(before, "dpc_batch_size_sum")), flush=True)
            check(na - n1 < 64 and (na - n1) - (b1a - b1) > 0, "%s: no batch of more than one row" % devs)
            # scale 1 and scale 2 at once: never mixed (a mix would give one of them the other's scale)
            mixed = [(rows[i % 16], {"scale": 1.0 + (i % 2)}) for i in range(64)]
            res = concurrent(srv, "KwargsModel", mixed)
            for i, r in enumerate(res):
                sc = 1.0 + (i % 2)
                check(r and r[0] == 200 and close(r[1]["output0"], alone[i % 16, sc]),
                      "%s: request %d (scale %g) differs from its unbatched answer" % (devs, i, sc))
            text = srv.request("GET", "/metrics")[2].decode()
            check(metric(text, "dpc_request_failures_total") == 0, "failures counted")
            check(metric(text, "dpc_queue_seconds_count") == metric(text, "dpc_request_success_total"),
                  "queue latency histogram counts every request")
        finally:
            stop_ok(srv, "batching " + devs)


# ------------------------------------------------------------------ faults

def faults():
    m = model_path("simple")
    w = weights(m)
    x = rng.standard_normal((2, 10)).astype(np.float32)
    ref = dpc_run(DPC, m, w, [x], WORK, tag="fault")[0]
    srv = Server(DPC, m, ["--weights", w, "--max-body", "65536"])
    try:
        def post(body, headers=None, path="/v2/models/SimpleModel/infer"):
            st, _, data = srv.request("POST", path, body, headers)
            try:
                err = json.loads(data).get("error", "")
            except ValueError:
                err = None
            return st, err

        good = {"inputs": [{"name": "x", "shape": [2, 10], "datatype": "FP32", "data": x.reshape(-1).tolist()}]}

        def variant(**kv):
            r = json.loads(json.dumps(good))
            r["inputs"][0].update(kv)
            return json.dumps(r).encode()

        cases = [
            ("malformed JSON", b'{"inputs": [', None, 400),
            ("not an object", b'[1, 2]', None, 400),
            ("no inputs", b'{}', None, 400),
            ("empty body", b'', None, 400),
            ("unknown input", variant(name="y"), None, 400),
            ("wrong dtype", variant(datatype="INT64"), None, 400),
            ("unknown dtype", variant(datatype="FP64"), None, 400),
            ("wrong shape", variant(shape=[2, 9], data=[0.0] * 18), None, 400),
            ("element count", variant(data=[0.0] * 19), None, 400),
            ("non-number data", variant(data=["a"] * 20), None, 400),
            ("negative dim", variant(shape=[-2, 10]), None, 400),
            ("huge shape", variant(shape=[1 << 40, 10]), None, 400),
            ("unknown parameter", json.dumps(dict(good, parameters={"scale": 2})).encode(), None, 400),
            ("unknown output", json.dumps(dict(good, outputs=[{"name": "output1"}])).encode(), None, 400),
            ("binary size mismatch", json.dumps({"inputs": [{"name": "x", "shape": [2, 10], "datatype": "FP32",
                                                            "parameters": {"binary_data_size": 79}}]}).encode() +
             b"\0" * 79, {"Inference-Header-Content-Length": None}, 400),
            ("bad header length", json.dumps(good).encode(), {"Inference-Header-Content-Length": "99999"}, 400),
            ("trailing bytes", json.dumps(good).encode() + b"xx", {"Inference-Header-Content-Length": None}, 400),
        ]
        for what, body, hdr, want in cases:
            if hdr and hdr.get("Inference-Header-Content-Length", "") is None:
                hdr = {"Inference-Header-Content-Length": str(body.index(b"}]}") + 3 if b"}]}" in body
                                                              else len(body) - 2)}
            st, err = post(body, hdr)
            check(st == want and isinstance(err, str) and err, "%s: %s %r" % (what, st, err))
        st, err = post(json.dumps(good).encode(), path="/v2/models/Other/infer")
        check(st == 400 and "unknown model" in err, "unknown model: %s %s" % (st, err))
        check(srv.request("GET", "/v2/models/Other")[0] == 400, "unknown model metadata")
        check(srv.request("GET", "/v3/foo")[0] == 404, "unknown path")
        check(srv.request("GET", "/v2/models/SimpleModel/infer")[0] == 405, "GET infer")
        # over --max-body: announced by Content-Length, and chunked
        big = json.dumps({"inputs": [{"name": "x", "shape": [2000, 10], "datatype": "FP32",
                                      "data": [0.5] * 20000}]}).encode()
        st, err = post(big)
        check(st == 400 and "over the limit" in err, "announced oversized body: %s %s" % (st, err))
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(big[i:i + 8192]), big[i:i + 8192]) for i in range(0, len(big), 8192))
        st = raw_http(srv.port, b"POST /v2/models/SimpleModel/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunks + b"0\r\n\r\n")
        check(st == 400, "chunked oversized body: %s" % st)
        # a client that vanishes mid-body, ten times
        for _ in range(10):
            raw_http(srv.port, b"POST /v2/models/SimpleModel/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n"
                     b"\r\n{\"inputs\": [", read=False)
        st, out = srv.infer("SimpleModel", [("x", x, "FP32")])
        check(st == 200 and np.array_equal(out["output0"], ref), "served after errors and vanished clients")
        text = srv.request("GET", "/metrics")[2].decode()
        check(metric(text, "dpc_http_responses_total", 'code="400"') >= len(cases), "400s counted")
    finally:
        stop_ok(srv, "faults")

    # an index out of range fails its request alone, batch-mates are answered
    m = model_path("transformer")
    wt = weights(m)
    srv = Server(DPC, m, ["--weights", wt, "--max-delay-us", "300000"])
    try:
        ids = rng.integers(0, 100, (1, 8)).astype(np.int64)
        pos = np.arange(8, dtype=np.int64)[None]
        bad = ids.copy()
        bad[0, 3] = 1000
        res = [None] * 6

        def one(i):
            res[i] = srv.infer("Transformer", [("ids", bad if i == 2 else ids, "INT64"), ("pos", pos, "INT64")])
        ts = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        check(res[2] and res[2][0] == 400 and "out of range" in res[2][1]["error"], "bad index: %s" % (res[2],))
        check(all(res[i] and res[i][0] == 200 for i in range(6) if i != 2), "batch-mates of a bad index")
    finally:
        stop_ok(srv, "bad index")

    # queue overflow: 2 may wait (for 3 s), the others are refused at once
    srv = Server(DPC, model_path("simple"), ["--weights", w, "--max-queue", "2", "--max-delay-us", "3000000"])
    try:
        res = [None] * 8

        def one(i):
            res[i] = srv.infer("SimpleModel", [("x", x, "FP32")])
        ts = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        codes = sorted(r[0] for r in res if r)
        check(codes.count(503) >= 1 and codes.count(200) >= 1 and set(codes) <= {200, 503},
              "queue overflow: %s" % codes)
        check(all(close(r[1]["output0"], ref) for r in res if r and r[0] == 200), "answers under overflow")
        text = srv.request("GET", "/metrics")[2].decode()
        check(metric(text, "dpc_requests_busy_total") == codes.count(503), "503s counted")
    finally:
        stop_ok(srv, "queue overflow")

    # a kernel failure in the first batch: 500, then served
    # kernel 1 is the forward's GEMM (kernel 0 transposes the weight once, in the prepare phase)
    srv = Server(DPC, model_path("simple"), ["--weights", w, "--devices", "cpu,cpu"],
                 env={"DPC_FAULT_REPLICA": "0", "DPC_FAULT_KERNEL": "1", "DPC_FAULT_BATCH": "1"})
    try:
        st, out = srv.infer("SimpleModel", [("x", x, "FP32")])
        check(st == 500 and "injected failure" in out.get("error", ""), "injected fault: %s %s" % (st, out))
        for _ in range(3):
            st, out = srv.infer("SimpleModel", [("x", x, "FP32")])
            check(st == 200 and close(out["output0"], ref), "served after the fault: %s" % st)
        text = srv.request("GET", "/metrics")[2].decode()
        check(metric(text, "dpc_request_failures_total") == 1 and metric(text, "dpc_batch_failures_total") == 1,
              "fault counted")
    finally:
        stop_ok(srv, "fault injection")

    # SIGTERM with requests in flight: they are answered, exit 0
    srv = Server(DPC, model_path("simple"), ["--weights", w, "--max-delay-us", "1500000"])
    res = [None] * 6

    def one(i):
        try:
            res[i] = srv.infer("SimpleModel", [("x", x, "FP32")])
        except Exception as e:  # noqa: BLE001
            res[i] = (str(e), None)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    deadline = time.time() + 10
    while time.time() < deadline:
        q = metric(srv.request("GET", "/metrics")[2].decode(), "dpc_queue_depth")
        if q == 6:
            break
        time.sleep(0.02)
    t0 = time.time()
    rc, err = srv.stop()
    for t in ts:
        t.join(60)
    check(rc == 0, "SIGTERM in flight: exit %s: %s" % (rc, err[-1000:]))
    check(all(r and r[0] == 200 and close(r[1]["output0"], ref) for r in res),
          "in-flight requests answered at SIGTERM: %s" % [r[0] if r else None for r in res])
    check(time.time() - t0 < 10, "drain took %.1f s" % (time.time() - t0))


# ---------------------------------------------------------------- sequence

def tiny_bert():
    """The zoo's BERT (models/zoo/bert.dp) in a tiny config, written into
    WORK (an imported file may not name a model, so the text is copied with
    its model line changed): S of `input_ids: i64[N, S]` is a run-time dim."""
    src = open(os.path.join(MODELS, "zoo", "bert.dp")).read()
    line = "model = BertModel()\n"
    check(line in src, "bert.dp names its model as expected")
    m = os.path.join(WORK, "tiny_bert.dp")
    with open(m, "w") as f:
        f.write(src.replace(line, "model = BertModel(vocab_size=100, hidden_size=32, num_hidden_layers=1, "
                                  "num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)\n"))
    return m


def sequence():
    m = tiny_bert()
    w = weights(m)

    def feed(S, n):
        ids = rng.integers(1, 100, (n, S)).astype(np.int64)
        mask = np.ones((n, S), np.int64)
        mask[:, S - 1] = 0
        return [ids, mask, np.zeros((n, S), np.int64)]
    names = ("input_ids", "attention_mask", "token_type_ids")
    feeds = {S: feed(S, 8) for S in (5, 7)}
    refs = {S: dpc_run(DPC, m, w, feeds[S], WORK, nout=2, tag="bert%d" % S) for S in feeds}
    srv = Server(DPC, m, ["--weights", w, "--max-batch", "16", "--max-delay-us", "50000"])
    try:
        # outputs listed before any run, -1 for N and for S (KServe's dynamic dims)
        st, js = srv.get_json("/v2/models/BertModel")
        check(st == 200 and [i["shape"] for i in js["inputs"]] == [[-1, -1]] * 3 and
              js["outputs"] == [{"name": "output0", "datatype": "FP32", "shape": [-1, -1, 32]},
                                {"name": "output1", "datatype": "FP32", "shape": [-1, 32]}],
              "bert metadata before a run: %s" % js)
        for S, b in ((5, False), (7, True)):
            st, out = srv.infer("BertModel", [(n, a, "INT64") for n, a in zip(names, feeds[S])],
                                binary_in=b, binary_out=b)
            check(st == 200 and close(out["output0"], refs[S][0], 1e-5) and close(out["output1"], refs[S][1], 1e-5),
                  "bert S=%d (binary %s)" % (S, b))
        # one-row requests of S=5 and S=7 at once: batched, never mixed
        # (stacking them is impossible; a mix would fail or answer wrongly)
        before = srv.request("GET", "/metrics")[2].decode()
        reqs = [(S, i) for i in range(8) for S in (5, 7)]
        res = [None] * len(reqs)
        barrier = threading.Barrier(len(reqs))

        def one(k):
            S, i = reqs[k]
            barrier.wait(30)
            res[k] = srv.infer("BertModel", [(n, a[i:i + 1], "INT64") for n, a in zip(names, feeds[S])])
        ts = [threading.Thread(target=one, args=(k,)) for k in range(len(reqs))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        for k, (S, i) in enumerate(reqs):
            r = res[k]
            check(r and r[0] == 200 and close(r[1]["output0"], refs[S][0][i:i + 1], 1e-5) and
                  close(r[1]["output1"], refs[S][1][i:i + 1], 1e-5),
                  "bert S=%d row %d differs from its unbatched answer: %s" % (S, i, r and r[0]))
        after = srv.request("GET", "/metrics")[2].decode()
        nb = metric(after, "dpc_batch_size_count") - metric(before, "dpc_batch_size_count")
        rows = metric(after, "dpc_batch_size_sum") - metric(before, "dpc_batch_size_sum")
        print("bert: 16 one-row requests of S=5 and S=7 in %d batches, %d rows" % (nb, rows), flush=True)
        check(rows == 16 and 2 <= nb < 16, "bert: batches formed only within one S (%d batches)" % nb)
    finally:
        stop_ok(srv, "bert")


{"protocol": protocol, "batching": batching, "faults": faults, "sequence": sequence}[PART]()
if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("ok")
