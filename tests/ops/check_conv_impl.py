#!/usr/bin/python3
"""The CPU backend's oneDNN convolutions take oneDNN's fast paths (the
default layout, auto: NHWC with AVX-512, else mostly nChw8c): run one forward of a model with DNNL_VERBOSE=1 and
require every convolution to be a JIT/brgemm kernel of the machine's ISA
(not `ref`, not `gemm`, which is im2col inside oneDNN), and, when asked,
depthwise and 1x1 ones among them. With --max-reorders K, the activations
must stay NHWC between convs: one forward (`dpc run`, batch 3, an input of
CxHxW per image) reorders at most K activations to or from NCHW.

    check_conv_impl.py DPC MODEL.dp [--expect dw,1x1,wino,dwfuse,blocked8,dpcwino,dpcstem,dpcfc,dpcmb] [--batch B] [--layout L]
                       [--max-reorders K [--max-any-reorders J] --input CxHxW [--outputs M]]

--expect wino: some conv runs oneDNN's Winograd kernel (3x3 stride-1 convs
of 32+ channels try it first, runtime/cpu/conv_dnnl.c; only on a CPU with
AVX-512, where oneDNN has one); without AVX-512, dpcwino instead.
--expect dpcwino: some convs run dpc's own Winograd kernel (blocked layout,
no AVX-512: runtime/cpu/conv_wino.c), seen as fewer oneDNN convolutions in
the forward than with DPC_CONV_WINO=0.
--expect dpcstem: some conv of few input channels runs dpc's direct kernel
(runtime/cpu/conv_stem.c: blocked layout, no AVX-512, where oneDNN offers
only gemm:jit), seen as fewer oneDNN convolutions than with DPC_CONV_STEM=0.
--expect dpcfc: some conv of one pixel (a squeeze-excitation's fc convs)
runs dpc's kernel (runtime/cpu/conv_fc.c: blocked layout, no AVX-512), and
no oneDNN convolution of one pixel is left (`ih1oh1` with `iw1ow1`); seen
too as fewer oneDNN convolutions than with DPC_CONV_FC=0.
--expect dpcmb: some 1x1 conv and the depthwise conv after it run dpc's
kernel (runtime/cpu/conv_mb.c: blocked layout, no AVX-512; by default the
pairs with SiLU or sigmoid), seen as fewer oneDNN convolutions than with
DPC_CONV_MB=0.
--expect dwfuse: some 1x1 conv runs with the depthwise conv after it as
oneDNN's dw post-op (`+dw:` in its post-ops; from batch 8, so with --batch 8:
runtime/cpu/conv_dnnl.c, dw_fits). --batch: the batch of the DNNL_VERBOSE
forward (default 1).
--expect blocked8: some conv computes in oneDNN's nChw8c layout (`aBcd8b`:
the AVX2 kernels' own, which DPC_CONV_LAYOUT=auto picks without AVX-512 for
models with few NHWC readers).
--layout L: DPC_CONV_LAYOUT for both runs (default: unset, i.e. auto).
--max-any-reorders J: the convs' results stay in their primitives' own
layout between convs (opaque, conv_dnnl.c): at most J activation reorders
of any kind in the forward (NHWC <-> blocked counted too).
"""
import collections
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
from isa import avx512  # noqa: E402


def main() -> int:
    dpc, model = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    expect = args[args.index("--expect") + 1].split(",") if "--expect" in args else []
    batch = args[args.index("--batch") + 1] if "--batch" in args else "1"
    max_reorders = int(args[args.index("--max-reorders") + 1]) if "--max-reorders" in args else None
    max_any = int(args[args.index("--max-any-reorders") + 1]) if "--max-any-reorders" in args else None
    nout = int(args[args.index("--outputs") + 1]) if "--outputs" in args else 1
    # the default layout (auto: NHWC with AVX-512, else mostly nChw8c) unless --layout,
    # with oneDNN's own kernels (plain NCHW runs gemm:jit)
    env = dict(os.environ, DNNL_VERBOSE="1", OMP_NUM_THREADS="1")
    for k in ("DPC_CONV", "DPC_CONV_LAYOUT", "DPC_CONV_KEEP", "DPC_CONV_DW", "DPC_CONV_WINO", "DPC_CONV_STEM", "DPC_CONV_FC"):
        env.pop(k, None)
    if "--layout" in args:
        env["DPC_CONV_LAYOUT"] = args[args.index("--layout") + 1]
    if "wino" in expect and not avx512():
        expect[expect.index("wino")] = "dpcwino"  # oneDNN's Winograd kernels are AVX-512 ones
        print("no AVX-512: dpc's Winograd expected instead of oneDNN's")

    def verbose_convs(extra: dict):
        r = subprocess.run([dpc, "bench", model, "--batch", batch, "--iters", "1"], env=dict(env, **extra),
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print("dpc failed:", r.stdout[-2000:], r.stderr[-2000:])
            return None
        return r.stdout.splitlines()

    lines = verbose_convs({})
    if lines is None:
        return 1
    bad_reorders = False
    if max_reorders is not None:
        # one forward (dpc run) at batch 3: the activations' reorders are the
        # 4-D ones whose first dim is the batch (the weights' is Cout)
        import numpy as np
        with tempfile.TemporaryDirectory() as tmp:
            w, x, y = (os.path.join(tmp, f) for f in ("w.safetensors", "x.npy", "y.npy"))
            shape = [3] + [int(v) for v in args[args.index("--input") + 1].split("x")]
            np.save(x, np.random.default_rng(0).standard_normal(shape).astype(np.float32))
            q = subprocess.run([dpc, "init", model, "-o", w], capture_output=True, text=True, timeout=600)
            if q.returncode == 0:
                outs = sum((["-o", "%s%d.npy" % (y, i)] for i in range(nout)), [])
                q = subprocess.run([dpc, "run", model, "--weights", w, "--input", x] + outs, env=env,
                                   capture_output=True, text=True, timeout=600)
            if q.returncode != 0:
                print("dpc failed:", q.stdout[-2000:], q.stderr[-2000:])
                return 1
        # the ones to or from NCHW (`abcd`) break the chain; a Winograd
        # conv's reorders between NHWC and its blocked layout do not
        rows = [l.split(",") for l in q.stdout.splitlines() if l.startswith("onednn_verbose,exec,cpu,reorder")]
        per = sum(len(d) == 4 and d[0] == "3" and "blocked:abcd:" in r[6]
                  for r, d in ((r, r[-2].split("x")) for r in rows))
        print("%d activation reorders to or from NCHW in a forward (at most %d expected)" % (per, max_reorders))
        bad_reorders = per > max_reorders
        if max_any is not None:
            acts = sum(len(d) == 4 and d[0] == "3" for d in (r[-2].split("x") for r in rows))
            print("%d activation reorders of any layout in a forward (at most %d expected)" % (acts, max_any))
            bad_reorders = bad_reorders or acts > max_any
    convs = [l.split(",") for l in lines if l.startswith("onednn_verbose,exec,cpu,convolution")]

    def per_forward(rows) -> float:
        # `dpc bench --iters 1` runs 2 to 4 forwards (its warm-up stops once
        # it has taken a second, as it may on a loaded machine): the calls
        # of the run over its forwards, the fewest calls of any one conv
        # (implementation and shape; a model has one it calls once)
        keys = collections.Counter((r[4], r[-2]) for r in rows)
        return len(rows) / min(keys.values()) if keys else 0.0

    own = {}
    for kind, var, what in (("dpcwino", "DPC_CONV_WINO", "Winograd"), ("dpcstem", "DPC_CONV_STEM", "stem kernel"),
                            ("dpcfc", "DPC_CONV_FC", "one-pixel kernel"),
                            ("dpcmb", "DPC_CONV_MB", "1x1 + depthwise kernel")):
        if kind in expect:
            off = verbose_convs({var: "0"})
            if off is None:
                return 1
            off_convs = [l.split(",") for l in off if l.startswith("onednn_verbose,exec,cpu,convolution")]
            own[kind] = per_forward(off_convs) - per_forward(convs)
            print("%g convolution calls a forward ran dpc's %s (oneDNN's with %s=0)" % (own[kind], what, var))
    if not convs:
        print("no oneDNN convolution ran (expected every conv through oneDNN)")
        return 1
    bad = [c for c in convs if "ref" in c[4] or "gemm" in c[4]]
    for c in bad[:10]:
        print("slow implementation:", c[4], c[6], c[-2])
    # wei_f32 of a depthwise conv is 5-D with group blocking; brdgmm_dw / jit_dw name it
    have = {"dw": any("dw" in c[4] for c in convs), "1x1": any("1x1" in c[4] for c in convs),
            "wino": any("wino" in c[4] for c in convs), "dwfuse": any("+dw:" in ",".join(c) for c in convs),
            "blocked8": any("dst_f32::blocked:aBcd8b:" in c[6] for c in convs), "dpcwino": own.get("dpcwino", 0) > 0,
            "dpcstem": own.get("dpcstem", 0) > 0, "dpcmb": own.get("dpcmb", 0) > 0,
            "dpcfc": own.get("dpcfc", 0) > 0 and not any("ih1oh1" in c[-2] and "iw1ow1" in c[-2] for c in convs)}
    missing = [k for k in expect if not have.get(k)]
    for k in missing:
        print("no %s convolution took a %s kernel" % (k, k))
    impls = sorted(set(c[4] for c in convs))
    print("%d convolutions: %s" % (len(convs), ", ".join(impls)))
    return 1 if bad or missing or bad_reorders else 0


if __name__ == "__main__":
    sys.exit(main())
