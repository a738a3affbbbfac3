#!/usr/bin/env python3
"""The files an .onnx model reads and what dpc leaves on disk (issue 30,
items 2, 6 and 7), on the small models of make_models.py:

- external data naming a FIFO in the model's directory, directly or
  through a symbolic link, is refused at once (a hang is a failure);
- `-o` / `--weights-out` naming a file the model reads (its external data,
  also through a hard link, and the .onnx) is refused for every verb that
  writes, and that file keeps its bytes;
- `dpc compile|run|serve MODEL.onnx` keeps the import in memory: SIGTERM
  or SIGHUP at any moment (here during the import, the kernel compile and
  serve's start-up) leaves $TMPDIR empty, no dpc-onnx-* or dpc-cc-*; even
  SIGKILL leaves no copy of the model; `dpc compile MODEL.onnx` without -o
  writes MODEL.dpa beside the model.

  files_check.py DPC WORKDIR"""
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import numpy as np  # noqa: E402
import onnx  # noqa: E402

sys.path.insert(0, HERE)
import make_models  # noqa: E402

fails = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        fails.append(what)


def dpc(*args, timeout=30, env=None):
    """rc, stderr; a run past timeout is killed and reported as rc None."""
    try:
        r = subprocess.run([DPC, *args], capture_output=True, text=True, timeout=timeout, env=env)
        return r.returncode, r.stderr.strip()
    except subprocess.TimeoutExpired:
        return None, f"still running after {timeout} s (killed)"


def with_location(src, dst, loc):
    m = onnx.load(src, load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = loc
    onnx.save(m, dst)


def fifo_cases(p):
    for n in ("fifo.bin", "fifolink.bin"):
        if os.path.lexists(p(n)):
            os.unlink(p(n))
    os.mkfifo(p("fifo.bin"))
    os.symlink("fifo.bin", p("fifolink.bin"))
    for name in ("fifo", "fifolink"):
        with_location(p("ext_ok.onnx"), p(f"ext_{name}.onnx"), f"{name}.bin")
        for verb in (["import", p(f"ext_{name}.onnx"), "-o", p("fifo_out.dp")],
                     ["run", p(f"ext_{name}.onnx"), "--input", p("x.npy"), "-o", p("fifo_y.npy")]):
            t0 = time.time()
            rc, err = dpc(*verb, timeout=10)
            check(rc == 1 and "external data" in err and "not a readable regular file" in err and
                  not os.path.exists(p("fifo_out.dp")) and not os.path.exists(p("fifo_y.npy")),
                  f"{verb[0]} with external data {name}.bin (a FIFO): refused in {time.time() - t0:.1f} s: {err}")


def restore(p, w):
    """w.bin with its bytes w, and w_hard.bin a hard link to it."""
    for f in ("w.bin", "w_hard.bin"):
        if os.path.lexists(p(f)):
            os.unlink(p(f))
    open(p("w.bin"), "wb").write(w)
    os.link(p("w.bin"), p("w_hard.bin"))


def output_cases(p):
    w = open(p("w.bin"), "rb").read()
    # controls: the model imports and runs, so the refusals below are the outputs'
    for f in ("ctl.dp", "ctl.safetensors", "ctl_y.npy"):
        if os.path.exists(p(f)):
            os.unlink(p(f))
    rc, err = dpc("import", p("ext_ok.onnx"), "-o", p("ctl.dp"))
    check(rc == 0 and os.path.exists(p("ctl.safetensors")), f"control: import ext_ok.onnx {err}")
    rc, err = dpc("run", p("ext_ok.onnx"), "--input", p("x.npy"), "-o", p("ctl_y.npy"))
    check(rc == 0 and os.path.exists(p("ctl_y.npy")), f"control: run ext_ok.onnx {err}")
    ext = p("ext_ok.onnx")
    cases = [("import -o w.bin", ["import", ext, "-o", p("w.bin")]),
             ("import -o w.bin (another spelling)", ["import", ext, "-o", os.path.join(p("."), ".", "w.bin")]),
             ("import -o a hard link to w.bin", ["import", ext, "-o", p("w_hard.bin")]),
             ("import --weights-out w.bin", ["import", ext, "-o", p("o1.dp"), "--weights-out", p("w.bin")]),
             ("import -o ext_ok.onnx", ["import", ext, "-o", ext]),
             ("run -o w.bin", ["run", ext, "--input", p("x.npy"), "-o", p("w.bin")]),
             ("run -o a hard link to w.bin", ["run", ext, "--input", p("x.npy"), "-o", p("w_hard.bin")]),
             ("run -o y.npy -o w.bin", ["run", ext, "--input", p("x.npy"), "-o", p("o2.npy"), "-o", p("w.bin")]),
             ("compile -o w.bin", ["compile", ext, "-o", p("w.bin")]),
             ("init -o w.bin", ["init", ext, "-o", p("w.bin")]),
             ("graph -o w.bin", ["graph", ext, "-o", p("w.bin")])]
    onnx_bytes = open(ext, "rb").read()
    for what, args in cases:
        restore(p, w)  # each case on the original files, even after one failed
        rc, err = dpc(*args)
        check(rc == 2 and "it would be overwritten" in err and open(p("w.bin"), "rb").read() == w and
              open(ext, "rb").read() == onnx_bytes and
              not any(os.path.exists(p(f)) for f in ("o1.dp", "o2.npy", "w.bin.safetensors", "w_hard.bin.safetensors")),
              f"{what}: refused, the model's files unchanged: {err.splitlines()[0] if err else rc}")


def slow_cc(work):
    """A host compiler that takes 3 s, so that the signals below land while
    the kernels compile (a job directory dpc-cc-* exists)."""
    path = os.path.join(work, "slowcc")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nsleep 3\nexec %s \"$@\"\n" % os.environ.get("CC", "cc"))
    os.chmod(path, 0o755)
    return path


def big_model(path, layers=6, width=1024):
    """Gemm + Relu layers, 4 MB of weights each: `dpc compile` of it takes
    about a second (import, artifact, fsync), long enough to be signalled."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits += [numpy_helper.from_array((rng.standard_normal((width, width)) * 0.01).astype(np.float32),
                                          f"l{i}.weight"),
                  numpy_helper.from_array(np.zeros(width, np.float32), f"l{i}.bias")]
        nodes += [helper.make_node("Gemm", [prev, f"l{i}.weight", f"l{i}.bias"], [f"g{i}"], name=f"fc{i}", transB=1),
                  helper.make_node("Relu", [f"g{i}"], [f"r{i}"], name=f"relu{i}")]
        prev = f"r{i}"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.save(m, path)


def kill_cases(p, work):
    cc = slow_cc(work)
    big_model(p("big.onnx"))
    verbs = {"compile": ["compile", p("big.onnx"), "-o", p("k.dpa")],
             "run": ["run", p("cnn.onnx"), "--input", p("x.npy"), "-o", p("k.npy")],
             "serve": ["serve", p("cnn.onnx"), "--port", "0"]}
    # dpc starts in ~0.1-0.2 s; compile (no host compiler without --arch)
    # then takes ~1 s on big.onnx, run and serve spend 3 s in slowcc after
    # the import of cnn.onnx
    delays = {"compile": (0.05, 0.3, 0.6), "run": (0.05, 0.4, 1.0), "serve": (0.05, 0.4, 1.0)}
    n = 0
    for verb, args in verbs.items():
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGKILL):
            for d in delays[verb] if sig != signal.SIGKILL else delays[verb][1:2]:
                tmp, cache = os.path.join(work, f"tmp{n}"), os.path.join(work, f"cache{n}")
                n += 1
                for x in (tmp, cache):
                    shutil.rmtree(x, ignore_errors=True)
                    os.makedirs(x)
                env = dict(os.environ, TMPDIR=tmp, DPC_CACHE_DIR=cache, CC=cc)
                proc = subprocess.Popen([DPC, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
                time.sleep(d)
                running = proc.poll() is None
                if running:
                    proc.send_signal(sig)
                try:
                    rc = proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    rc = proc.wait()
                    check(False, f"{verb}: {sig.name} after {d} s: did not end within 30 s")
                left = sorted(os.listdir(tmp))
                if sig == signal.SIGKILL:  # nothing can clean up: at least no copy of the model
                    left = [f for f in left if f.startswith("dpc-onnx")]
                state = f"signalled while running, rc {rc}" if running else f"had ended (rc {rc})"
                check(not left, f"{verb} {os.path.basename(args[1])}, {sig.name} after {d} s ({state}): $TMPDIR holds {left}")
    for f in ("cnn.dpa",):
        if os.path.exists(p(f)):
            os.unlink(p(f))
    tmp = os.path.join(work, "tmp_default")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    rc, err = dpc("compile", p("cnn.onnx"), env=dict(os.environ, TMPDIR=tmp))
    check(rc == 0 and os.path.exists(p("cnn.dpa")) and not os.listdir(tmp),
          f"compile cnn.onnx without -o: cnn.dpa beside it, $TMPDIR empty ({os.listdir(tmp)}) {err}")


def main():
    global DPC
    DPC, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    sys.argv = ["make_models.py", work]
    make_models.main()
    p = lambda n: os.path.join(work, n)
    np.save(p("x.npy"), np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32))
    fifo_cases(p)
    output_cases(p)
    kill_cases(p, work)
    print(f"{len(fails)} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
