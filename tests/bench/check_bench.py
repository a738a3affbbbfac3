#!/usr/bin/python3
"""Checks of bench/ (see CMakeLists.txt here).

    check_bench.py peak PEAK_BINARY
    check_bench.py scripts
"""
import importlib.util
import json
import os
import py_compile
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
fails = []


def need(cond, msg):
    if not cond:
        fails.append(msg)
        print("FAIL " + msg)
    return cond


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def run_peak(exe, *args):
    r = subprocess.run([exe, "--quick", *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def check_peak(exe):
    flags = cpu_flags()
    rc, out, err = run_peak(exe, "1")
    if not need(rc == 0, f"peak 1: exit {rc}: {err}"):
        return
    d = json.loads(out)
    for k in ("isa", "vector_bits", "fma_gflops_per_core", "threads", "fma_gflops_all_cores", "copy_gbytes_per_s"):
        need(k in d, f"peak: no '{k}' in {out.strip()}")
    need(d.get("threads") == 1, f"peak 1: threads {d.get('threads')}, want 1")
    need(d.get("fma_gflops_per_core", 0) > 0 and d.get("fma_gflops_all_cores", 0) > 0, f"peak: no FLOPs in {out}")
    if flags is not None and os.uname().machine == "x86_64":
        want = "avx512f" if "avx512f" in flags else "avx2+fma" if {"avx2", "fma"} <= flags else "sse2"
        need(d.get("isa") == want, f"peak picked {d.get('isa')}, the CPU's widest is {want}")
        need(d.get("vector_bits") == {"avx512f": 512, "avx2+fma": 256, "sse2": 128}[want],
             f"peak: vector_bits {d.get('vector_bits')} for {want}")
        order = ["avx512f", "avx2+fma", "sse2"]
        for isa in order[order.index(want):]:
            rc, out, err = run_peak(exe, "--isa", isa, "1")
            need(rc == 0 and json.loads(out)["isa"] == isa, f"peak --isa {isa}: exit {rc}, {out.strip()} {err.strip()}")
        for isa in order[:order.index(want)]:
            rc, out, err = run_peak(exe, "--isa", isa, "1")
            need(rc == 2 and "cannot run" in err, f"peak --isa {isa} on a CPU without it: exit {rc}, {err.strip()}")
    rc, out, err = run_peak(exe, "--isa", "nosuch")
    need(rc == 2, f"peak --isa nosuch: exit {rc}, want 2")
    for bad in ("0", "x", "2x", "1 2"):
        rc, out, err = run_peak(exe, *bad.split())
        need(rc == 2 and "usage" in err, f"peak {bad}: exit {rc}, want 2 with the usage")
    rc, out, err = run_peak(exe, "2")
    need(rc == 0 and json.loads(out).get("threads") == 2, f"peak 2: exit {rc}, {out.strip()}")


def check_scripts():
    for p in ("bench/zoo_bench.py", "tests/gpu/bench_zoo.py"):
        try:
            py_compile.compile(os.path.join(ROOT, p), cfile=os.path.join(tempfile.mkdtemp(), "x.pyc"), doraise=True)
        except py_compile.PyCompileError as e:
            need(False, f"{p}: {e}")
    r = subprocess.run(["bash", "-n", os.path.join(ROOT, "tests", "gpu", "run.sh")], capture_output=True, text=True)
    need(r.returncode == 0, f"bash -n tests/gpu/run.sh: {r.stderr}")
    zb = os.path.join(ROOT, "bench", "zoo_bench.py")
    fake_dpc = sys.executable  # an executable file, never run: every case fails before
    for args, text in ((["--models", "nosuch"], "unknown model"), (["--engines", "dpc,tvm"], "unknown engine"),
                       (["--batches", "0"], "positive"), (["--threads", "1,many"], "threads"),
                       (["--seq", "0"], "--seq"), (["--rounds", "0"], "--rounds"),
                       (["--dpc", "/nonexistent/dpc"], "not an executable")):
        r = subprocess.run([sys.executable, zb, "--dpc", fake_dpc] + args, capture_output=True, text=True, timeout=60)
        need(r.returncode == 2 and text in r.stderr, f"zoo_bench {' '.join(args)}: exit {r.returncode}, "
             f"stderr {r.stderr.strip()[-200:]!r} (want 2 and '{text}')")

    # --rounds keeps, per batch, each peer's fastest round, and a failed
    # round never hides a good one
    spec = importlib.util.spec_from_file_location("zoo_bench", zb)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a = {"1": {"median_us": 10.0}, "8": {"median_us": 80.0}}
    b = {"1": {"median_us": 12.0}, "8": {"median_us": 70.0}}
    got = mod.fastest_round(a, b, [1, 8])
    need(got["1"]["median_us"] == 10.0 and got["8"]["median_us"] == 70.0, f"fastest_round(a, b): {got}")
    need(mod.fastest_round({"error": "x"}, b, [1, 8]) == b and mod.fastest_round(a, {"error": "x"}, [1, 8]) == a,
         "fastest_round with a failed round")


if __name__ == "__main__":
    if sys.argv[1:2] == ["peak"] and len(sys.argv) == 3:
        check_peak(sys.argv[2])
    elif sys.argv[1:] == ["scripts"]:
        check_scripts()
    else:
        print(__doc__)
        sys.exit(2)
    print(f"{'FAIL' if fails else 'ok'}: {len(fails)} failure(s)")
    sys.exit(1 if fails else 0)
