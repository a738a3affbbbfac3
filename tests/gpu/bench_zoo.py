#!/usr/bin/env python3
"""The zoo (models/zoo/*.dp) on the GPU: dpc against PyTorch eager, same GPU.

    bench_zoo.py DPC [--out DIR] [--deadline SECONDS] [--models a,b] [--batches 1,8,64] [--seq 128]

For each model and batch: `DPC bench MODEL.dp --batch B --devices cuda:0
--json` (whole dpc_model_run calls: inputs copied in, forward, outputs
copied out, synchronised; dpc's initial weights) and PyTorch eager on
cuda:0 (tests/zoo/zoo_check.py's original, eval, no_grad, TF32 off; the
zoo check's inputs), timed the same way: host tensors in, outputs back on
the host, wall clock, median after warm-ups. The PyTorch forward alone on
device-resident inputs (CUDA events) is reported too. bert and gpt2 run at
sequence length --seq. Each conv model is timed again with DPC_CUDNN=0
(the own im2col + cuBLASLt convolutions: the "no-cuDNN us" column and
row["dpc_nocudnn"]) unless --no-cudnn-ab; --cudnn sets DPC_CUDNN for the
dpc column (auto: cuDNN or the own kernels per conv, whichever times
faster). Models go in order until --deadline seconds have
passed (the rows done are kept). Writes DIR/zoo.json and prints a table.
Exits 77 when neither dpc nor PyTorch sees a GPU, 1 when dpc failed on a
row (the table says why), else 0.
"""
import argparse
import json
import os
import subprocess
import sys
import time

T0 = time.time()
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "vgg11", "alexnet",
          "convnext_tiny", "vit_b_16", "vit_small", "bert", "gpt2"]
SEQ_MODELS = ("bert", "gpt2")


def dpc_row(a, name, batch, left, cudnn=None):
    env = dict(os.environ)
    if cudnn is not None:
        env["DPC_CUDNN"] = cudnn
    cmd = [a.dpc, "bench", os.path.join(ROOT, "models", "zoo", name + ".dp"), "--batch", str(batch),
           "--devices", "cuda:0", "--json"]
    if name in SEQ_MODELS:
        cmd += ["--bind", f"S={a.seq}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=max(10.0, left), env=env)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1][:300]}
    return json.loads(r.stdout)


def torch_rows(torch, zoo_check, name, batches, seq, budget=0.3):
    """{batch: {...}} for PyTorch on cuda:0, or {batch: {'error': ...}}."""
    dev = torch.device("cuda:0")
    out = {}
    try:
        model = zoo_check.build(name).to(dev).eval()
    except Exception as e:  # a missing torchvision, say
        return {b: {"error": f"{type(e).__name__}: {e}"[:300]} for b in batches}
    for b in batches:
        host = [torch.from_numpy(x) for x in zoo_check.make_inputs(name, b, seq if name in SEQ_MODELS else None)]
        devx = [x.to(dev) for x in host]

        def whole():
            ys = model(*[x.to(dev) for x in host])
            ys = ys if isinstance(ys, (tuple, list)) else [ys]
            return [y.cpu() for y in ys]

        with torch.no_grad():
            for _ in range(3):
                whole()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            whole()
            one = time.perf_counter() - t0
            iters = int(min(200, max(5, budget / max(one, 1e-6))))
            ts = []
            for _ in range(iters):
                t0 = time.perf_counter()
                whole()
                ts.append(time.perf_counter() - t0)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            dts = []
            for _ in range(iters):
                s.record()
                model(*devx)
                e.record()
                e.synchronize()
                dts.append(s.elapsed_time(e) * 1e3)
        ts.sort()
        dts.sort()
        out[b] = {"median_us": ts[len(ts) // 2] * 1e6, "device_us": dts[len(dts) // 2], "iters": iters}
    del model
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dpc")
    ap.add_argument("--out", default=os.environ.get("OUT") or ".")
    ap.add_argument("--deadline", type=float, default=150)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--cudnn", default=None, help="DPC_CUDNN for the dpc column: 0, 1 or auto (default: as set)")
    ap.add_argument("--no-cudnn-ab", dest="cudnn_ab", action="store_false",
                    help="do not time each conv model again with DPC_CUDNN=0")
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",") if x]
    torch = zoo_check = None
    why = ""
    try:
        import torch
        if not torch.cuda.is_available():
            why, torch = "torch sees no GPU", None
        else:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
            import zoo_check
    except ImportError as e:
        why, torch = f"no PyTorch side ({e})", None
    if why:
        print(f"bench_zoo: {why}")
    os.environ.pop("DPC_CUDA_TF32", None)
    rows, dpc_ok = [], False
    print(f"{'model':18s} {'batch':>5s} {'dpc us':>10s} {'torch us':>10s} {'torch/dpc':>9s} "
          f"{'torch dev us':>12s} {'dpc GFLOP/s':>11s} {'no-cuDNN us':>11s}", flush=True)
    for name in a.models.split(","):
        if time.time() - T0 > a.deadline:
            print(f"bench_zoo: deadline reached before {name}", flush=True)
            break
        t = torch_rows(torch, zoo_check, name, batches, a.seq) if torch else {}
        for b in batches:
            d = dpc_row(a, name, b, a.deadline - (time.time() - T0) + 30, a.cudnn)
            own = {}
            if a.cudnn_ab and name not in SEQ_MODELS and time.time() - T0 < a.deadline:
                # the same row with the own im2col + cuBLASLt convolutions
                own = dpc_row(a, name, b, a.deadline - (time.time() - T0) + 30, "0")
            dpc_ok = dpc_ok or "median_us" in d
            p = t.get(b, {"error": why or "not run"})
            row = {"model": name, "batch": b, "dpc": d, "torch": p}
            if own:
                row["dpc_nocudnn"] = own
            if "median_us" in d and "median_us" in p:
                row["ratio"] = p["median_us"] / d["median_us"]
            rows.append(row)

            def us(r, k="median_us"):
                return f"{r[k]:.0f}" if k in r else "err"
            print(f"{name:18s} {b:5d} {us(d):>10s} {us(p):>10s} "
                  f"{(('%.2f' % row['ratio']) if 'ratio' in row else '-'):>9s} {us(p, 'device_us'):>12s} "
                  f"{(('%.1f' % d['gflops']) if 'gflops' in d else '-'):>11s} {us(own) if own else '-':>11s}",
                  flush=True)
            if "error" in d:
                print(f"  dpc: {d['error']}", flush=True)
        with open(os.path.join(a.out, "zoo.json"), "w") as f:
            json.dump({"seq": a.seq, "rows": rows}, f, indent=1)
    if not dpc_ok and torch is None:
        print("bench_zoo: no GPU for dpc or PyTorch: skipped")
        return 77
    failed = [f"{r['model']}/{r['batch']}" for r in rows if "error" in r["dpc"]]
    if failed:  # a GPU is there (dpc or PyTorch used it), so a dpc error is a failure
        print(f"bench_zoo: dpc failed on {len(failed)} row(s): {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
