#!/usr/bin/env python3
"""`dpc import` and .onnx models on the command line, on the small models of
make_models.py: results against the same network computed by PyTorch from
the initializers, `dpc print/run MODEL.onnx` equal to the imported .dp, and
the errors (located, exit 1, no output file left behind).

  cli_check.py DPC WORKDIR"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import load, numpy_helper  # noqa: E402

sys.path.insert(0, HERE)
import make_models  # noqa: E402

fails = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        fails.append(what)


def dpc(*args):
    return subprocess.run([DPC, *args], capture_output=True, text=True, timeout=600)


def inits(path):
    return {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in load(path).graph.initializer}


def ref_cnn(w, x):
    y = F.conv2d(x, w["conv.weight"], w["conv.bias"], padding=1).relu()
    y = F.batch_norm(y, w["bn.running_mean"], w["bn.running_var"], w["bn.weight"], w["bn.bias"], eps=1e-5)
    y = F.hardswish(F.max_pool2d(y.clamp(0, 6), 2, 2))
    return F.linear(y.mean((2, 3)), w["fc.weight"], w["fc.bias"])


def ref_plumb(w, x):
    y = x @ w["lin.w"] + w["lin.b"]
    y = F.gelu(F.layer_norm(y, [8], w["ln.weight"], w["ln.bias"], 1e-5))
    return F.softmax(F.silu(y), -1)


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def main():
    global DPC
    DPC, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    sys.argv = ["make_models.py", work]
    make_models.main()
    p = lambda n: os.path.join(work, n)

    r = dpc("import", "--list-ops")
    ops = [l.split("\t")[0] for l in r.stdout.splitlines()]
    check(r.returncode == 0 and {"Conv", "Gemm", "MatMul", "Reshape", "Shape"} <= set(ops) and ops == sorted(ops),
          f"--list-ops lists the op table, sorted ({len(ops)} ops)")

    rng = np.random.default_rng(1)
    cases = [("cnn", ref_cnn, [rng.standard_normal((3, 3, 8, 8)).astype(np.float32)]),
             ("plumb", ref_plumb, [rng.standard_normal((2, 5, 8)).astype(np.float32)])]
    for name, ref, xs in cases:
        for f in (p(name + ".dp"), p(name + ".safetensors")):
            if os.path.exists(f):
                os.unlink(f)
        r = dpc("import", p(name + ".onnx"), "-o", p(name + ".dp"))
        check(r.returncode == 0 and os.path.exists(p(name + ".safetensors")), f"import {name}: {r.stderr.strip()}")
        want = ref(inits(p(name + ".onnx")), *[torch.from_numpy(x) for x in xs]).numpy()
        np.save(p(name + "_x.npy"), xs[0])
        for target, extra in ((p(name + ".dp"), ["--weights", p(name + ".safetensors")]), (p(name + ".onnx"), [])):
            out = p(name + "_y.npy")
            r = dpc("run", target, *extra, "--input", p(name + "_x.npy"), "-o", out)
            got = np.load(out) if r.returncode == 0 else None
            check(got is not None and got.shape == want.shape and rel(got, want) < 1e-5,
                  f"run {os.path.basename(target)} against PyTorch: "
                  f"{rel(got, want) if got is not None and got.shape == want.shape else r.stderr.strip()}")
        a, b = dpc("print", p(name + ".dp")), dpc("print", p(name + ".onnx"))
        check(a.returncode == 0 and a.stdout == b.stdout, f"print {name}.onnx is print {name}.dp")

    # dpc serve takes the .onnx too: one request, the answer of `dpc run`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
    from serve_util import Server
    srv = Server(DPC, p("cnn.onnx"))
    try:
        x = np.load(p("cnn_x.npy"))
        st, out = srv.infer("Model", [("x", x, "FP32")])
        check(st == 200 and np.array_equal(out["output0"], np.load(p("cnn_y.npy"))),
              f"dpc serve cnn.onnx answers as dpc run: {st} {out if st != 200 else ''}")
    finally:
        rc, err = srv.stop()
        check(rc == 0, f"dpc serve cnn.onnx stops on SIGTERM: {rc} {err.strip()}")

    # external data: read beside the model, never outside its directory
    r = dpc("run", p("ext_ok.onnx"), "--input", p("cnn_x.npy"), "-o", p("ext_y.npy"))
    check(r.returncode == 0 and np.array_equal(np.load(p("ext_y.npy")), np.load(p("cnn_y.npy"))),
          f"external data beside the model: same result as raw_data {r.stderr.strip()}")
    for name, msg in (("dotdot", "leaves the model's directory"), ("abs", "must be a relative path"),
                      ("link", "resolves outside the model's directory"), ("short", "external data length")):
        r = dpc("import", p(f"ext_{name}.onnx"), "-o", p("ext_out.dp"))
        check(r.returncode == 1 and msg in r.stderr and not os.path.exists(p("ext_out.dp")),
              f"external data {name}: {r.stderr.strip()}")

    # --dim fixes a symbolic dim
    r = dpc("import", p("plumb.onnx"), "-o", p("plumb5.dp"), "--dim", "seq=5")
    check(r.returncode == 0 and "forward(x: [N, 5, 8])" in open(p("plumb5.dp")).read(), "--dim seq=5")
    r = dpc("import", p("plumb.onnx"), "-o", p("nodim.dp"), "--dim", "nosuch=5")
    check(r.returncode == 2 and not os.path.exists(p("nodim.dp")), "--dim of an unknown name: usage error")

    # errors: one line, located, exit 1, nothing written
    open(p("trunc.onnx"), "wb").write(open(p("cnn.onnx"), "rb").read()[:700])
    open(p("junk.onnx"), "wb").write(b"\xff" * 64)
    errs = [("badop", "node 'c2i' (Col2Im, opset 14): op type not supported"),
            ("badattr", "node 'Conv_12' (Conv, opset 14): attribute auto_pad=SAME_LOWER is not supported"),
            ("dangling", "node 'r' (Relu, opset 14): input 'nowhere' is not defined"),
            ("trunc", "trunc.onnx: "), ("junk", "junk.onnx: "), ("deep", "nested more than 32 deep")]
    for name, msg in errs:
        out = p(name + "_out.dp")
        r = dpc("import", p(name + ".onnx"), "-o", out)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(lines) == 1 and lines[0].startswith("dpc: error: ") and msg in lines[0] and
              not os.path.exists(out) and not os.path.exists(p(name + "_out.safetensors")),
              f"import {name}: {r.stderr.strip()}")
        r = dpc("print", p(name + ".onnx"))
        check(r.returncode == 1 and msg in r.stderr and not r.stdout, f"print {name}.onnx fails the same way")
    print(f"{len(fails)} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
