#!/usr/bin/python3
"""zoo_bench — dpc against PyTorch eager, ONNX Runtime and OpenVINO on the zoo.

    /usr/bin/python3 bench/zoo_bench.py [--models resnet18,alexnet,...] [--batches 1,8,64]
        [--threads 1,all] [--seq 128] [--engines dpc,torch,ort,ov] [--toys]
        [--budget 1.0] [--rounds 1] [--json OUT] [--md OUT.md] [--quick] [--dpc build/dpc]
    /usr/bin/python3 bench/zoo_bench.py --from-json OUT     # the Markdown table of a run

For every model of models/zoo/*.dp (or --models), every batch and every
thread setting ("1" and "all" = the CPUs this process may use), one run
times, on the same weights and the same inputs:

* dpc: `dpc bench MODEL.dp --batch B --weights W --json` (in-process
  forwards; compile and weight loading excluded). With one thread:
  DPC_GEMM_THREADS=1. With all cores, two configurations: one replica whose
  GEMMs use every core (DPC_GEMM_THREADS=N) and N replicas of one thread each
  (`--devices cpu,...,cpu`, batch split across them; only when B >= N). The
  table shows the faster and says which ("1x2": 1 replica x 2 threads,
  "2x1": 2 replicas x 1 thread); the JSON keeps both.
* PyTorch eager: Debian's torch (1.13) with torchvision (0.14) and
  tests/ref/hf_models.py, eval, no_grad; OMP_NUM_THREADS,
  OPENBLAS_NUM_THREADS and MKL_NUM_THREADS set before torch is imported,
  then torch.set_num_threads.
* ONNX Runtime and OpenVINO, from PyPI, installed by this script into a venv
  of its own (bench/.venv, git-ignored, created with --system-site-packages
  so Debian's torch and numpy stay the ones imported), on the model exported
  with torch.onnx.export (opset 17, else 14, else 13; dynamic batch).
  ORT: intra_op_num_threads = threads, inter_op_num_threads = 1,
  ORT_ENABLE_ALL, sequential. OpenVINO: CPU, INFERENCE_NUM_THREADS =
  threads, INFERENCE_PRECISION_HINT f32 (it would pick bf16 on a CPU with
  AMX/AVX512-BF16), PERFORMANCE_HINT LATENCY, one stream, the model
  reshaped to the static batch before compiling.

The originals and their weights are tests/zoo/zoo_check.py's (original():
test weights with calibrated BatchNorm statistics; make_inputs(): the same
inputs as the zoo check); bert and gpt2 are the zoo's two-layer models at
sequence length --seq. Weights (safetensors), the ONNX file and the inputs
are made once per model in bench/.cache/ (git-ignored) and reused while
the sources that make them are unchanged.

Each engine times a forward after a warm-up (one forward, a second one
unless the first took over a quarter of the budget), then repeats for
--budget seconds (default 1.0, --quick 0.25) and at least 3 times; the
median is reported. dpc's repeat count (--iters) is chosen the same way
from the fastest peer's time (dpc bench warms up for up to 3 forwards or
one second).

Printed per row: each engine's median in µs, the ratio fastest-peer/dpc
(> 1: dpc is faster), dpc's GFLOP/s (FLOPs from dpc bench's JSON) and its
fraction of the measured peak (bench/peak.c, built and run here: the
per-core FMA peak for one thread, the all-cores peak for all). The header
names the CPU model and the ISA peak.c measured. --json writes everything,
--md the table in Markdown (as docs/performance.md keeps it).

--quick: a development run: alexnet, mobilenet_v2, resnet18 at batch 1
and 8 (unless --models/--batches say otherwise) with the short budget.
--toys adds models/mlp.dp and models/parallel_model.dp (batches 1, 64, 256).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ZOO_DIR = os.path.join(ROOT, "models", "zoo")
VENV = os.path.join(HERE, ".venv")
CACHE = os.path.join(HERE, ".cache")
SYS_PY = "/usr/bin/python3"

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "vgg11", "alexnet",
          "convnext_tiny", "vit_b_16", "vit_small", "bert", "gpt2"]
TOYS = {"mlp": os.path.join(ROOT, "models", "mlp.dp"),
        "parallel_model": os.path.join(ROOT, "models", "parallel_model.dp")}
TOY_BATCHES = [1, 64, 256]
SEQ_MODELS = ("bert", "gpt2")
PEERS = ("torch", "ort", "ov")
LABEL = {"dpc": "dpc", "torch": "PyTorch", "ort": "ORT", "ov": "OpenVINO"}
OPSETS = (17, 14, 13)
ARTEFACTS = 1  # bump when what _prepare makes changes (the cache is also keyed on the sources it uses)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ncpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def thread_env(threads: int) -> dict:
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    return env


# ---------------------------------------------------------------------------
# The machine: CPU model, ISA, measured peak
# ---------------------------------------------------------------------------

def cpu_info() -> dict:
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k == "model name" and model in ("", platform.machine(), platform.processor()):
                    model = v.strip()
                elif k == "flags" and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    isa = [f for f in ("avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                       "amx_bf16", "amx_tile", "avx2", "fma", "avx_vnni") if f in flags]
    return {"model": model, "isa_flags": isa}


def measure_peak(work: str) -> dict:
    exe = os.path.join(work, "peak")
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Werror", "-pthread", "-o", exe, os.path.join(HERE, "peak.c")],
                   check=True)
    r = subprocess.run([exe, str(ncpus())], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


# ---------------------------------------------------------------------------
# The venv with ONNX Runtime and OpenVINO
# ---------------------------------------------------------------------------

def venv_python() -> str:
    return os.path.join(VENV, "bin", "python")


def ensure_venv() -> str:
    """bench/.venv with onnxruntime and openvino (numpy pinned to the
    system's, so that Debian's torch keeps the numpy it was built for)."""
    py = venv_python()
    probe = "import onnxruntime, openvino, torch, numpy; print(onnxruntime.__version__, openvino.__version__)"
    if os.path.exists(py) and subprocess.run([py, "-c", probe], capture_output=True).returncode == 0:
        return py
    log(f"zoo_bench: setting up {VENV} (onnxruntime, openvino from PyPI)")
    subprocess.run([SYS_PY, "-m", "venv", "--system-site-packages", VENV], check=True)
    import numpy
    constraints = os.path.join(VENV, "constraints.txt")
    with open(constraints, "w") as f:
        f.write(f"numpy=={numpy.__version__}\n")
    subprocess.run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q", "-c", constraints,
                    "onnxruntime", "openvino"], check=True)
    subprocess.run([py, "-c", probe], check=True)
    return py


# ---------------------------------------------------------------------------
# Artefacts: weights, ONNX, inputs (made once in bench/.cache/NAME)
# ---------------------------------------------------------------------------

def artefact_key(name: str, seq: int) -> str:
    """What the artefacts of name depend on: the sources that build the
    original and its inputs, and the sequence length."""
    h = hashlib.sha256()
    h.update(str(ARTEFACTS).encode())
    srcs = [os.path.join(ROOT, "tests", "ref", "dp2torch.py"), TOYS[name]] if name in TOYS else \
        [os.path.join(ROOT, "tests", "zoo", "zoo_check.py"), os.path.join(ROOT, "tests", "ref", "hf_models.py")]
    for p in srcs:
        if os.path.exists(p):
            with open(p, "rb") as f:
                h.update(f.read())
    h.update(json.dumps([name, seq if name in SEQ_MODELS else None]).encode())
    return h.hexdigest()[:16]


def model_dir(name: str) -> str:
    return os.path.join(CACHE, name)


def read_stamp(d: str) -> dict:
    """d's stamp.json, its paths taken as names inside d: the cache may have
    been made under another checkout (a worktree's bench/.cache is often a
    link to the main one's), and the paths written then point there."""
    with open(os.path.join(d, "stamp.json")) as f:
        stamp = json.load(f)
    here = lambda p: os.path.join(d, os.path.basename(p))
    stamp["inputs"] = {b: [here(p) for p in ps] for b, ps in stamp["inputs"].items()}
    for k in ("weights", "onnx"):
        if stamp.get(k):
            stamp[k] = here(stamp[k])
    return stamp


def prepare(name: str, batches: list, seq: int, want_onnx: bool) -> dict:
    """The cached artefacts of name, made by a `_prepare` subprocess when
    missing or stale (the inputs of a batch not made before: those alone).
    Returns the stamp (paths, opset or export error)."""
    d = model_dir(name)
    stamp_path = os.path.join(d, "stamp.json")
    key = artefact_key(name, seq)
    try:
        stamp = read_stamp(d)
        if stamp.get("key") == key and (stamp.get("onnx") or stamp.get("onnx_error") or not want_onnx):
            missing = [b for b in batches if str(b) not in stamp["inputs"]]
            if missing:
                cmd = [SYS_PY, os.path.abspath(__file__), "_prepare", name, "--batches", ",".join(map(str, missing)),
                       "--seq", str(seq), "--work", d, "--inputs-only"]
                r = subprocess.run(cmd, env=thread_env(ncpus()), capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(f"making the inputs of {name} failed:\n{r.stderr[-3000:]}")
                stamp["inputs"].update(json.loads(r.stdout)["inputs"])
                with open(stamp_path, "w") as f:
                    json.dump(stamp, f, indent=1)
            return stamp
    except (OSError, ValueError, KeyError):
        pass
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    log(f"zoo_bench: {name}: making weights, inputs" + (" and ONNX" if want_onnx else "") + f" in {d}")
    cmd = [SYS_PY, os.path.abspath(__file__), "_prepare", name, "--batches", ",".join(map(str, batches)),
           "--seq", str(seq), "--work", d] + ([] if want_onnx else ["--no-onnx"])
    r = subprocess.run(cmd, env=thread_env(ncpus()), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"preparing {name} failed:\n{r.stderr[-3000:]}")
    stamp = json.loads(r.stdout)
    stamp["key"] = key
    with open(stamp_path, "w") as f:
        json.dump(stamp, f, indent=1)
    return stamp


def build_original(name: str):
    """(torch model in eval mode with the bench's weights, input names)."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
    if name in TOYS:
        import dp2torch
        m, info = dp2torch.load_model(TOYS[name])
        return dp2torch.unwrap(m).eval(), info
    import zoo_check
    return zoo_check.original(name).eval(), None


def toy_inputs(info: dict, batch: int, seed: int = 0) -> list:
    import numpy as np
    rng = np.random.default_rng([seed, batch])
    out = []
    for p in info["tensor_params"]:
        shape = [batch if d is None else d for d in p["dims"]]
        out.append(rng.integers(0, 2, size=shape).astype(np.int64) if p["dtype"] == "i64"
                   else rng.standard_normal(shape).astype(np.float32))
    return out


def cmd_prepare(a) -> int:
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
    out = {"inputs": {}}
    if a.inputs_only:
        model, info = (None, None) if a.name not in TOYS else build_original(a.name)
    else:
        model, info = build_original(a.name)
        import st
        out["weights"] = os.path.join(a.work, "weights.safetensors")
        st.save(out["weights"], {k: v.detach().cpu().contiguous().numpy() for k, v in model.state_dict().items()},
                metadata={"format": "pt"})
    if info is None:
        import zoo_check
        names = zoo_check.input_names(a.name)
    else:
        names = [p["name"] for p in info["tensor_params"]]
    seq = a.seq if a.name in SEQ_MODELS else None
    for b in a.batches:
        xs = toy_inputs(info, b) if info is not None else zoo_check.make_inputs(a.name, b, seq)
        paths = []
        for nm, arr in zip(names, xs):
            p = os.path.join(a.work, f"in_b{b}_{nm}.npy")
            np.save(p, arr, allow_pickle=False)
            paths.append(p)
        out["inputs"][str(b)] = paths
    out["input_names"] = names
    if not a.no_onnx and not a.inputs_only:
        xs = [torch.from_numpy(x) for x in
              (toy_inputs(info, 2) if info is not None else zoo_check.make_inputs(a.name, 2, seq))]
        with torch.no_grad():
            y = model(*xs)
        nout = len(y) if isinstance(y, (tuple, list)) else 1
        onames = [f"y{i}" for i in range(nout)]
        dyn = {n: {0: "N"} for n in names + onames}
        path = os.path.join(a.work, "model.onnx")
        errors = []
        for opset in OPSETS:
            # grad stays enabled: under no_grad nn.MultiheadAttention (ViT) takes its fast path,
            # aten::_native_multi_head_attention, which the exporter lacks
            try:
                torch.onnx.export(model, tuple(xs), path, opset_version=opset, input_names=names,
                                  output_names=onames, dynamic_axes=dyn, do_constant_folding=True)
                out["onnx"], out["opset"] = path, opset
                break
            except Exception as e:  # an op the exporter lacks at this opset: try the next
                errors.append(f"opset {opset}: {type(e).__name__}: {str(e)[:300]}")
        if "onnx" not in out:
            out["onnx_error"] = "; ".join(errors)
    print(json.dumps(out))
    return 0


# ---------------------------------------------------------------------------
# Workers: one process per (engine, model, threads), every batch inside
# ---------------------------------------------------------------------------

def time_fn(fn, budget: float) -> dict:
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    if first < budget / 4:
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < budget and len(times) < 100000):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"median_us": times[len(times) // 2] * 1e6, "min_us": times[0] * 1e6, "iters": len(times)}


def load_inputs(stamp: dict, batch: int) -> list:
    import numpy as np
    return [np.load(p, allow_pickle=False) for p in stamp["inputs"][str(batch)]]


def worker_torch(a, stamp: dict) -> dict:
    import torch
    torch.set_num_threads(a.threads)
    sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
    import st
    if a.name in TOYS:
        model, _ = build_original(a.name)
    else:
        sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
        import zoo_check
        model = zoo_check.build(a.name)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in st.load(stamp["weights"]).items()}, strict=True)
    model.eval()
    res = {"version": torch.__version__, "threads": torch.get_num_threads()}
    with torch.no_grad():
        for b in a.batches:
            xs = [torch.from_numpy(x) for x in load_inputs(stamp, b)]
            res[str(b)] = time_fn(lambda: model(*xs), a.budget)
    return res


def worker_ort(a, stamp: dict) -> dict:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(stamp["onnx"], so, providers=["CPUExecutionProvider"])
    res = {"version": ort.__version__}
    for b in a.batches:
        feeds = dict(zip(stamp["input_names"], load_inputs(stamp, b)))
        res[str(b)] = time_fn(lambda: sess.run(None, feeds), a.budget)
    return res


def worker_ov(a, stamp: dict) -> dict:
    import openvino as ov
    core = ov.Core()
    res = {"version": ov.__version__}
    for b in a.batches:
        xs = load_inputs(stamp, b)
        model = core.read_model(stamp["onnx"])
        model.reshape({inp.get_any_name(): ov.PartialShape(list(x.shape)) for inp, x in zip(model.inputs, xs)})
        compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": a.threads,
                                                     "INFERENCE_PRECISION_HINT": "f32",
                                                     "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1})
        req = compiled.create_infer_request()
        for i, x in enumerate(xs):
            req.set_input_tensor(i, ov.Tensor(x))
        res[str(b)] = time_fn(req.infer, a.budget)
        del req, compiled
    return res


def cmd_worker(a) -> int:
    stamp = read_stamp(model_dir(a.name))
    fn = {"torch": worker_torch, "ort": worker_ort, "ov": worker_ov}[a.engine]
    print(json.dumps(fn(a, stamp)))
    return 0


def run_worker(engine: str, name: str, threads: int, batches: list, seq: int, budget: float) -> dict:
    py = SYS_PY if engine == "torch" else venv_python()
    cmd = [py, os.path.abspath(__file__), "_worker", engine, name, "--threads", str(threads),
           "--batches", ",".join(map(str, batches)), "--seq", str(seq), "--budget", str(budget)]
    r = subprocess.run(cmd, env=thread_env(threads), capture_output=True, text=True)
    if r.returncode != 0:
        tail = r.stderr.strip().splitlines()[-1:] or ["exit %d" % r.returncode]
        log(f"zoo_bench: {engine} on {name} ({threads} threads) failed: {tail[0][:300]}")
        return {"error": r.stderr[-2000:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------
# dpc
# ---------------------------------------------------------------------------

def dpc_bench(a, name: str, dp: str, stamp: dict, batch: int, threads: int, replicas: int, est_us) -> dict:
    cmd = [a.dpc, "bench", dp, "--batch", str(batch), "--weights", stamp["weights"], "--json"]
    if name in SEQ_MODELS:
        cmd += ["--bind", f"S={a.seq}"]
    if replicas > 1:
        cmd += ["--devices", ",".join(["cpu"] * replicas)]
    if est_us:
        cmd += ["--iters", str(int(max(3, min(100000, a.budget * 1e6 / est_us))))]
    env = thread_env(threads * replicas)
    env["DPC_GEMM_THREADS"] = str(threads)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        log(f"zoo_bench: dpc bench {name} batch {batch} ({replicas}x{threads}) failed: {r.stderr.strip()[-300:]}")
        return {"error": r.stderr[-2000:]}
    d = json.loads(r.stdout)
    d["config"] = f"{replicas}x{threads}"
    return d


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

def fastest_round(prev, r: dict, bs: list) -> dict:
    """A peer's worker result r merged into its earlier rounds' (prev): per
    batch, the round with the lower median."""
    if not prev or "error" in prev:
        return r
    if "error" in r:
        return prev
    out = dict(prev)
    for b in map(str, bs):
        if "median_us" in r.get(b, {}) and r[b]["median_us"] < out.get(b, {}).get("median_us", float("inf")):
            out[b] = r[b]
    return out


def fmt_us(r) -> str:
    if not r:
        return "-"
    if "error" in r:
        return "err"
    us = r["median_us"]
    return f"{us:.0f}" if us >= 100 else f"{us:.1f}"


def markdown(res: dict) -> str:
    """The rows as a Markdown table, with the header's machine line."""
    cols = [p for p in PEERS if p in res["engines"]]
    pk = res["peak"]
    out = [f"{res['cpu']['model']}, {res['cores']} cores, ISA {pk['isa']} ({', '.join(res['cpu']['isa_flags'])}); "
           f"measured FMA peak {pk['fma_gflops_per_core']:.1f} GFLOP/s one core, {pk['fma_gflops_all_cores']:.1f} "
           f"all cores; {res['date']}" + (" (--quick)" if res["quick"] else "") +
           "; versions: " + ", ".join(f"{LABEL[k]} {v.split('-')[0]}" for k, v in sorted(res["versions"].items())), "",
           "| model | batch | threads | dpc µs | cfg | " + " | ".join(f"{LABEL[c]} µs" for c in cols) +
           " | fastest peer / dpc | dpc GFLOP/s | of peak |",
           "|---|---|---|---|---|" + "---|" * len(cols) + "---|---|---|"]
    for r in res["rows"]:
        d = r.get("dpc", {})
        ratio = f"{r['ratio']:.2f} ({LABEL[r['fastest_peer']]})" if "ratio" in r else "-"
        gf = f"{d['gflops']:.1f} | {100 * r['of_peak']:.0f}%" if "gflops" in d else "- | -"
        out.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {fmt_us(d)} | {d.get('config', '-')} | " +
                   " | ".join(fmt_us(r.get(c)) for c in cols) + f" | {ratio} | {gf} |")
    return "\n".join(out) + "\n"


def int_list(s: str) -> list:
    try:
        out = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{s}'")
    if not out or any(x < 1 for x in out):
        raise argparse.ArgumentTypeError(f"expected positive integers, got '{s}'")
    return out


def thread_list(s: str) -> list:
    out = []
    for x in s.split(","):
        x = x.strip()
        n = ncpus() if x == "all" else int(x) if x.isdigit() and int(x) > 0 else None
        if n is None:
            raise argparse.ArgumentTypeError(f"threads are positive integers or 'all', got '{x}'")
        if n not in out:
            out.append(n)
    return out


def main_run(a) -> int:
    engines = [e for e in a.engines.split(",") if e]
    bad = [e for e in engines if e not in ("dpc",) + PEERS]
    if bad:
        log(f"zoo_bench: error: unknown engine(s) {bad} (dpc, torch, ort, ov)")
        return 2
    if "dpc" in engines and not (os.path.isfile(a.dpc) and os.access(a.dpc, os.X_OK)):
        log(f"zoo_bench: error: {a.dpc} is not an executable (build first, or --dpc PATH)")
        return 2
    if a.rounds < 1:
        log(f"zoo_bench: error: --rounds {a.rounds} is not a positive count")
        return 2
    names = a.models.split(",") if a.models else (["alexnet", "mobilenet_v2", "resnet18"] if a.quick else MODELS)
    unknown = [n for n in names if n not in MODELS and n not in TOYS]
    if unknown:
        log(f"zoo_bench: error: unknown model(s) {unknown} (zoo: {', '.join(MODELS)}; toys: {', '.join(TOYS)})")
        return 2
    if a.toys:
        names += [t for t in TOYS if t not in names]
    batches = a.batches or ([1, 8] if a.quick else [1, 8, 64])
    budget = a.budget or (0.25 if a.quick else 1.0)
    a.budget = budget
    ncore = ncpus()
    os.makedirs(CACHE, exist_ok=True)
    if any(e in engines for e in ("ort", "ov")):
        try:
            ensure_venv()
        except (subprocess.CalledProcessError, OSError) as e:
            log(f"zoo_bench: cannot set up {VENV} ({e}): ONNX Runtime and OpenVINO left out")
            engines = [x for x in engines if x not in ("ort", "ov")]
    cpu = cpu_info()
    peak = measure_peak(CACHE)
    res = {"date": time.strftime("%Y-%m-%d %H:%M"), "quick": bool(a.quick), "cpu": cpu, "peak": peak,
           "cores": ncore, "seq": a.seq, "budget_s": budget, "rounds": a.rounds, "engines": engines, "rows": [], "versions": {}}
    hdr = (f"CPU: {cpu['model']}, {ncore} cores available; ISA {peak['isa']} ({', '.join(cpu['isa_flags'])})\n"
           f"measured peak (bench/peak.c, {peak['isa']} FMA): {peak['fma_gflops_per_core']:.1f} GFLOP/s one core, "
           f"{peak['fma_gflops_all_cores']:.1f} all {peak['threads']} cores; copy {peak['copy_gbytes_per_s']:.1f} GB/s\n"
           f"bert/gpt2 at S={a.seq}; median µs over >= {budget:g} s (>= 3 forwards), fastest of {a.rounds} round(s); dpc config RxT = "
           f"R replicas x T GEMM threads")
    print(hdr, flush=True)
    cols = ["dpc"] + [p for p in PEERS if p in engines]
    head = f"{'model':18s} {'batch':>5s} {'thr':>3s} " + " ".join(f"{LABEL[c] + ' us':>11s}" for c in cols) + \
        f" {'cfg':>4s} {'peer/dpc':>12s} {'GFLOP/s':>8s} {'of peak':>7s}"
    printed_head = False
    for name in names:
        dp = TOYS.get(name) or os.path.join(ZOO_DIR, name + ".dp")
        bs = TOY_BATCHES if name in TOYS else batches
        if not os.path.exists(dp):
            log(f"zoo_bench: {dp} does not exist: skipped")
            continue
        try:
            stamp = prepare(name, bs, a.seq, any(e in engines for e in ("ort", "ov")))
        except RuntimeError as e:
            log(f"zoo_bench: {e}")
            continue
        if stamp.get("onnx_error"):
            log(f"zoo_bench: {name}: torch.onnx.export failed: {stamp['onnx_error'][:500]}")
        for threads in a.threads:
            # --rounds N: every engine timed N times, alternated (peers, then
            # dpc, again), each keeping its fastest round: a slow minute of a
            # shared machine then biases no engine more than another
            peers, dpc_runs = {}, {b: [] for b in bs}
            for _ in range(a.rounds):
                for p in PEERS:
                    if p not in engines:
                        continue
                    if p != "torch" and not stamp.get("onnx"):
                        peers[p] = {"error": "no ONNX export"}
                        continue
                    r = run_worker(p, name, threads, bs, a.seq, budget)
                    peers[p] = fastest_round(peers.get(p), r, bs)
                    if "version" in r:
                        res["versions"][p] = r["version"]
                for b in bs if "dpc" in engines else []:
                    ok = [peers[p][str(b)]["median_us"] for p in peers if "median_us" in peers[p].get(str(b), {})]
                    est = min(ok) if ok else None
                    dpc_runs[b].append(dpc_bench(a, name, dp, stamp, b, threads, 1, est))
                    if threads > 1 and b >= threads:
                        dpc_runs[b].append(dpc_bench(a, name, dp, stamp, b, 1, threads, est))
            for b in bs:
                row = {"model": name, "batch": b, "threads": threads}
                for p, r in peers.items():
                    row[p] = r.get(str(b), {"error": r.get("error", "missing")})
                ok = [(row[p]["median_us"], p) for p in peers if "median_us" in row[p]]
                if "dpc" in engines:
                    configs = dpc_runs[b]
                    row["dpc_configs"] = configs
                    good = [c for c in configs if "median_us" in c]
                    row["dpc"] = min(good, key=lambda c: c["median_us"]) if good else configs[0]
                d = row.get("dpc", {})
                pk = (peak["fma_gflops_per_core"] if threads == 1 else peak["fma_gflops_all_cores"]
                      if threads == peak["threads"] else peak["fma_gflops_per_core"] * threads)
                if "median_us" in d and ok:
                    best_us, best_p = min(ok)
                    row["fastest_peer"], row["ratio"] = best_p, best_us / d["median_us"]
                if "gflops" in d:
                    row["of_peak"] = d["gflops"] / pk
                res["rows"].append(row)
                if not printed_head:
                    print(head + "\n" + "-" * len(head), flush=True)
                    printed_head = True
                ratio = f"{row['ratio']:.2f} {LABEL[row['fastest_peer']]}" if "ratio" in row else "-"
                print(f"{name:18s} {b:5d} {threads:3d} " + " ".join(f"{fmt_us(row.get(c)):>11s}" for c in cols) +
                      f" {d.get('config', '-'):>4s} {ratio:>12s} " +
                      (f"{d['gflops']:8.1f} {100 * row['of_peak']:6.0f}%" if "gflops" in d else f"{'-':>8s} {'-':>7s}"),
                      flush=True)
        if a.json:  # after every model, so that an interrupted run keeps what it measured
            with open(a.json, "w") as f:
                json.dump(res, f, indent=1)
        if a.md:
            with open(a.md, "w") as f:
                f.write(markdown(res))
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["_prepare"], ["_worker"]):
        ap = argparse.ArgumentParser(prog="zoo_bench " + argv[0])
        if argv[0] == "_worker":
            ap.add_argument("engine", choices=PEERS)
        ap.add_argument("name")
        ap.add_argument("--batches", type=int_list, required=True)
        ap.add_argument("--seq", type=int, default=128)
        ap.add_argument("--threads", type=int, default=1)
        ap.add_argument("--budget", type=float, default=1.0)
        ap.add_argument("--work")
        ap.add_argument("--no-onnx", action="store_true")
        ap.add_argument("--inputs-only", action="store_true")
        a = ap.parse_args(argv[1:])
        return cmd_prepare(a) if argv[0] == "_prepare" else cmd_worker(a)
    ap = argparse.ArgumentParser(description="dpc vs PyTorch eager, ONNX Runtime and OpenVINO on the model zoo "
                                 "(see the module docstring and docs/performance.md).")
    ap.add_argument("--models", help=f"comma-separated (default: all of {', '.join(MODELS)})")
    ap.add_argument("--batches", type=int_list, help="default 1,8,64 (--quick: 1,8)")
    ap.add_argument("--threads", type=thread_list, default=thread_list("1,all"),
                    help="comma-separated counts or 'all' (default 1,all)")
    ap.add_argument("--seq", type=int, default=128, help="bert/gpt2 sequence length (default 128)")
    ap.add_argument("--engines", default="dpc,torch,ort,ov", help="subset of dpc,torch,ort,ov")
    ap.add_argument("--toys", action="store_true", help="also models/mlp.dp and models/parallel_model.dp")
    ap.add_argument("--budget", type=float, default=None, help="seconds of repeats per time (default 1.0)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every engine this many times, alternated, keeping each one's fastest (default 1)")
    ap.add_argument("--quick", action="store_true", help="development run: 3 small models, batches 1,8, 0.25 s")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--md", help="write the table as Markdown here (for docs/performance.md)")
    ap.add_argument("--from-json", metavar="JSON", help="print the Markdown table of an earlier run's JSON and exit")
    ap.add_argument("--dpc", default=os.path.join(ROOT, "build", "dpc"))
    a = ap.parse_args(argv)
    if a.from_json:
        with open(a.from_json) as f:
            sys.stdout.write(markdown(json.load(f)))
        return 0
    if not 1 <= a.seq <= 512:
        ap.error("--seq must be 1..512 (bert's position table)")
    return main_run(a)


if __name__ == "__main__":
    sys.exit(main())
