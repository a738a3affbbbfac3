#!/usr/bin/python3
"""The CPU backend's oneDNN convolutions can take oneDNN's fast paths
(DPC_CONV_LAYOUT=blocked): run one
forward of a model with DNNL_VERBOSE=1 and require every convolution to be a
JIT/brgemm kernel of the machine's ISA (not `ref`, not `gemm`, which is
im2col inside oneDNN), and, when asked, depthwise and 1x1 ones among them.

    check_conv_impl.py DPC MODEL.dp [--expect dw,1x1]
"""
import os
import subprocess
import sys


def main() -> int:
    dpc, model = sys.argv[1], sys.argv[2]
    expect = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[3] == "--expect" else []
    # the layout with oneDNN's own kernels (the default, plain NCHW, runs gemm:jit)
    env = dict(os.environ, DNNL_VERBOSE="1", OMP_NUM_THREADS="1", DPC_CONV_LAYOUT="blocked")
    env.pop("DPC_CONV", None)
    r = subprocess.run([dpc, "bench", model, "--batch", "1", "--iters", "1"], env=env, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        print("dpc failed:", r.stdout[-2000:], r.stderr[-2000:])
        return 1
    convs = [l.split(",") for l in r.stdout.splitlines() if l.startswith("onednn_verbose,exec,cpu,convolution")]
    if not convs:
        print("no oneDNN convolution ran (expected every conv through oneDNN)")
        return 1
    bad = [c for c in convs if "ref" in c[4] or "gemm" in c[4]]
    for c in bad[:10]:
        print("slow implementation:", c[4], c[6], c[-2])
    # wei_f32 of a depthwise conv is 5-D with group blocking; brdgmm_dw / jit_dw name it
    have = {"dw": any("dw" in c[4] for c in convs), "1x1": any("1x1" in c[4] for c in convs)}
    missing = [k for k in expect if not have.get(k)]
    for k in missing:
        print("no %s convolution took a %s kernel" % (k, k))
    impls = sorted(set(c[4] for c in convs))
    print("%d convolutions: %s" % (len(convs), ", ".join(impls)))
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
