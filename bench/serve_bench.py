#!/usr/bin/env python3
"""serve_bench.py - `dpc serve` under load: throughput and p50/p99 latency
against the number of concurrent clients, for --devices cpu and cpu,cpu,
with dynamic batching on (the default --max-batch 64, --max-delay-us 2000)
and off (--max-batch 1), against the same model's in-process `dpc bench`
throughput at the batch size the server actually ran (its mean rows per
batch, from /metrics): the server's overhead as a ratio.

The load is this script's own: one Python thread per client, each with its
own keep-alive http.client connection, sending one-row requests in Triton's
binary tensor extension (the body is a short JSON header and the raw
float32 bytes; the output comes back binary as well), so JSON encoding
costs nothing measurable. Every request body is built once. Each client
sends requests back to back (closed loop) until the point's time is up,
after a warm-up request of its own that is not counted. Bounded: a
point lasts --seconds (plus one request's latency), every request has a
timeout, every thread is joined with a timeout.

The clients run on the same machine as the server and take CPU from it:
the table gives the client process's CPU time per request (its threads'
user + system) so that the share is visible; on a small machine the
numbers at 64 clients are the server's and the clients' together.

Two overheads, because a shared machine's load drifts between processes:
  - from the same run (robust to drift): the batcher's own times per
    request from /metrics (queue wait, the forward of its batch); mean
    latency minus both is what HTTP, the copies and the client cost; and
    "forward busy", the share of the wall time in which the model ran
    (1.0: the server adds no gap between batches);
  - `dpc bench --batch B` (another process, right after the point, B the
    point's mean rows per batch rounded): server req/s over its img/s.

Usage (from the repository root, after a build):
  python3 bench/serve_bench.py [--dpc build/dpc] [--model models/zoo/resnet18.dp]
      [--weights W.safetensors] [--devices cpu cpu,cpu] [--clients 1 8 64]
      [--seconds 20] [--bench-iters 5] [--json out.json]
Without --weights, `dpc init` writes initial ones into the work directory.
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "serve"))
from serve_util import Server, metric  # noqa: E402


def load_avg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def body_for(name, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    raw = x.tobytes()
    hdr = json.dumps({"inputs": [{"name": name, "shape": list(shape), "datatype": "FP32",
                                  "parameters": {"binary_data_size": len(raw)}}],
                      "outputs": [{"name": "output0", "parameters": {"binary_data": True}}]}).encode()
    return hdr + raw, len(hdr)


def point(srv, model_name, body, hlen, clients, seconds, timeout=600):
    """One measurement: `clients` closed-loop clients for `seconds`."""
    path = "/v2/models/%s/infer" % model_name
    headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(hlen)}
    lat = [[] for _ in range(clients)]
    errors = [0] * clients
    start = threading.Barrier(clients + 1)
    go = threading.Event()
    state = {"deadline": 0.0}

    def one(conn):
        conn.request("POST", path, body, headers)
        r = conn.getresponse()
        data = r.read()
        return r.status == 200 and len(data) > 0

    def client(k):
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
        try:
            one(conn)  # warm-up, not counted
        except Exception:  # noqa: BLE001
            errors[k] += 1
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
        try:
            start.wait(timeout)
        except threading.BrokenBarrierError:
            return
        go.wait(timeout)
        while time.perf_counter() < state["deadline"]:
            t0 = time.perf_counter()
            try:
                ok = one(conn)
            except Exception:  # noqa: BLE001
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
            t1 = time.perf_counter()
            if ok:
                lat[k].append(t1 - t0)
            else:
                errors[k] += 1
        conn.close()

    ts = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    for t in ts:
        t.start()
    start.wait(timeout)  # every client warmed up
    m0 = srv.request("GET", "/metrics")[2].decode()
    load0 = load_avg()
    c0 = time.process_time()
    t0 = time.perf_counter()
    state["deadline"] = t0 + seconds
    go.set()
    for t in ts:
        t.join(seconds + timeout)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    m1 = srv.request("GET", "/metrics")[2].decode()
    alive = sum(t.is_alive() for t in ts)
    all_lat = np.array(sorted(x for l_ in lat for x in l_))
    n = len(all_lat)
    def d(name):
        return metric(m1, name) - metric(m0, name)
    batches, rows = d("dpc_batch_size_count"), d("dpc_batch_size_sum")
    served = d("dpc_compute_seconds_count")
    # the batcher's own times, per request: waiting in the queue, and the
    # forward of its batch; the rest of a request's latency is HTTP, the
    # copies in and out and the client
    q_ms = d("dpc_queue_seconds_sum") * 1e3 / served if served else 0.0
    f_ms = d("dpc_compute_seconds_sum") * 1e3 / served if served else 0.0
    mean_batch = rows / batches if batches else 0.0
    # seconds the worker ran batches (each once); in-process throughput at
    # these batches, same run
    fwd_s = d("dpc_batch_seconds_total")
    return {
        "clients": clients, "requests": n, "errors": sum(errors), "hung_threads": alive, "seconds": wall,
        "throughput": n / wall if wall > 0 else 0.0,
        "p50_ms": float(np.percentile(all_lat, 50) * 1e3) if n else None,
        "p99_ms": float(np.percentile(all_lat, 99) * 1e3) if n else None,
        "batches": int(batches), "mean_batch": mean_batch,
        "mean_ms": float(all_lat.mean() * 1e3) if n else None, "queue_ms": q_ms, "forward_ms": f_ms,
        "forward_busy": fwd_s / wall if wall > 0 else 0.0,
        "inbatcher_throughput": rows / fwd_s if fwd_s else 0.0,
        "client_cpu_ms_per_request": cpu * 1e3 / n if n else None,
        "load_before": load0, "load_after": load_avg(),
    }


def dpc_bench(dpc, model, weights, devices, batch, iters, env):
    r = subprocess.run([dpc, "bench", model, "--batch", str(batch), "--weights", weights, "--devices", devices,
                        "--iters", str(iters), "--json"], capture_output=True, text=True, timeout=1800, env=env)
    if r.returncode != 0:
        sys.exit("dpc bench failed: " + r.stderr)
    js = json.loads(r.stdout.strip().splitlines()[-1])
    return batch / (js["median_us"] * 1e-6)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dpc", default=os.path.join(ROOT, "build", "dpc"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "zoo", "resnet18.dp"))
    ap.add_argument("--weights")
    ap.add_argument("--devices", nargs="+", default=["cpu", "cpu,cpu"])
    ap.add_argument("--clients", nargs="+", type=int, default=[1, 8, 64])
    ap.add_argument("--modes", nargs="+", default=["on", "off"], help="batching on (defaults) and off (--max-batch 1)")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds per point (20)")
    ap.add_argument("--bench-iters", type=int, default=5, help="--iters of the in-process dpc bench (5)")
    ap.add_argument("--json", help="write every number here")
    a = ap.parse_args()
    if max(a.clients) > 256 or a.seconds > 600:
        sys.exit("at most 256 clients and 600 s per point")
    work = tempfile.mkdtemp(prefix="serve_bench_")
    env = dict(os.environ)
    w = a.weights
    if not w:
        w = os.path.join(work, "weights.safetensors")
        subprocess.run([a.dpc, "init", a.model, "-o", w, "--seed", "1"], check=True, timeout=600)
    with open("/proc/cpuinfo") as f:
        cpu_model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    info = {"model": os.path.relpath(a.model, ROOT), "cpu": cpu_model, "cores": os.cpu_count(),
            "seconds_per_point": a.seconds, "points": []}
    print("# %s on %s, %d cores; load average at start %.2f" % (info["model"], cpu_model, os.cpu_count(),
                                                                 load_avg()), flush=True)
    print("| devices | batching | clients | req/s | p50 ms | p99 ms | rows/batch | mean ms = queue + forward + rest "
          "| forward busy | dpc bench img/s (batch) | server / dpc bench | client CPU ms/req | load |", flush=True)
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for devs in a.devices:
        for mode in a.modes:
            args = ["--weights", w, "--devices", devs]
            if mode == "off":
                args += ["--max-batch", "1"]
            srv = Server(a.dpc, a.model, args, start_timeout=1800)
            try:
                # the model's name: the label of its metrics
                text = srv.request("GET", "/metrics")[2].decode()
                name = text.split('model="', 1)[1].split('"', 1)[0]
                st, md = srv.get_json("/v2/models/" + name)
                shape = [1 if d < 0 else d for d in md["inputs"][0]["shape"]]
                body, hlen = body_for(md["inputs"][0]["name"], shape)
                for c in a.clients:
                    p = point(srv, name, body, hlen, c, a.seconds)
                    # the in-process throughput at the batch size the server ran, right after
                    b = max(1, int(round(p["mean_batch"])))
                    p["bench_batch"] = b
                    p["bench_throughput"] = dpc_bench(a.dpc, a.model, w, devs, b, a.bench_iters, env)
                    p["ratio"] = p["throughput"] / p["bench_throughput"]
                    p.update(devices=devs, batching=mode)
                    info["points"].append(p)
                    rest = (p["mean_ms"] or 0) - p["queue_ms"] - p["forward_ms"]
                    print("| %s | %s | %d | %.2f | %.0f | %.0f | %.1f | %.0f = %.0f + %.0f + %.0f | %.0f%% | %.2f (%d) "
                          "| %.2f | %.1f | %.1f-%.1f |%s" % (
                              devs, mode, c, p["throughput"], p["p50_ms"] or 0, p["p99_ms"] or 0, p["mean_batch"],
                              p["mean_ms"] or 0, p["queue_ms"], p["forward_ms"], rest, 100 * p["forward_busy"],
                              p["bench_throughput"], b, p["ratio"], p["client_cpu_ms_per_request"] or 0,
                        p["load_before"], p["load_after"],
                        " errors %d, hung %d" % (p["errors"], p["hung_threads"])
                        if p["errors"] or p["hung_threads"] else ""), flush=True)
            finally:
                rc, err = srv.stop(timeout=600)
                if rc != 0:
                    print("server exit %s: %s" % (rc, err[-500:]), file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
