#!/usr/bin/python3
"""What changed in ONNX's default domain from opset 18 to 21, imported:

  opsets_check.py DPC WORKDIR
  opsets_check.py --write-seed PATH   # one small opset-21 model for tests/corpus/onnx

Debian's onnx (1.12) and torch (1.13) stop at opset 17, so each model is
written here node by node (onnx.helper, which does not check a node
against its schema) at the opset named, run by `dpc run MODEL.onnx` at
batch 3 (the batch dim of the input symbolic) and compared in float64
with NumPy or PyTorch (rel L2 <= 1e-5):

  reduce_mean_18   ReduceMean, axes an input (18), keepdims
  reduce_l2_18     ReduceL2 (importer/onnx_ops_reduce.c), negative axis
  reduce_max_20    ReduceMax over two axes, keepdims=0
  reduce_noop_18   ReduceMean without axes, noop_with_empty_axes=1
  split_18         Split by num_outputs (18) into 3, 3 and 2
  pad_axes_18      Pad's axes input (18), given out of order
  resize_axes_18   Resize with axes=[2, 3] and two scales (18), linear
  avgpool_19       AveragePool with dilations=[1, 1] (the attribute of 19)
  gelu_20          Gelu (20), approximate none and tanh
  mish_18          Mish (18)
  groupnorm_18     GroupNormalization (18): a scale and bias a group
  groupnorm_21     GroupNormalization (21): a scale and bias a channel
  misc_21          Transpose, Unsqueeze, Squeeze, Flatten, Reshape, Cast at 21
  seed_21          the fuzz seed (--write-seed): several of these in one model

and each refusal below exits 1 with one located line containing the text
given and writes no output:

  opset_22, pad_wrap_19, resize_antialias_18, resize_symmetric_19,
  avgpool_dilated_19, reduce_axes_attr_18, groupnorm_18_per_channel,
  split_uneven_18
"""
import os
import subprocess
import sys

import numpy as np
import torch
from onnx import TensorProto, helper, numpy_helper

N = 3
failures = []


def need(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def model(nodes, xshape, outs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", [vi("x", ["N"] + list(xshape))], [vi(o, None) for o in outs],
                          [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="opsets_check.py")


def i64(*v):
    return np.array(v, np.int64)


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def run(dpc, work, name, m, x, nout=1):
    path = os.path.join(work, name + ".onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    xp = os.path.join(work, name + "_x.npy")
    np.save(xp, x)
    outs = [os.path.join(work, f"{name}_y{i}.npy") for i in range(nout)]
    for o in outs:
        if os.path.exists(o):
            os.remove(o)
    args = [dpc, "run", path, "--input", xp]
    for o in outs:
        args += ["-o", o]
    p = subprocess.run(args, capture_output=True, text=True)
    return p, outs


def check(dpc, work, name, m, xshape, want_fn, nout=1):
    x = np.random.default_rng(len(name)).standard_normal([N] + list(xshape)).astype(np.float32)
    p, outs = run(dpc, work, name, m, x, nout)
    if p.returncode != 0:
        need(False, f"{name}: dpc run: {p.stderr.strip()}")
        return
    wants = want_fn(x.astype(np.float64))
    wants = wants if isinstance(wants, tuple) else (wants,)
    for i, (o, w) in enumerate(zip(outs, wants)):
        y = np.load(o).astype(np.float64)
        ok = y.shape == w.shape and rel(y, w) <= 1e-5
        need(ok, f"{name} output {i}: shape {y.shape} vs {w.shape}" + (f", rel L2 {rel(y, w):.2e}" if y.shape == w.shape else ""))


def refuse(dpc, work, name, m, xshape, text):
    x = np.zeros([N] + list(xshape), np.float32)
    p, outs = run(dpc, work, name, m, x)
    lines = p.stderr.strip().splitlines()
    ok = p.returncode == 1 and len(lines) == 1 and text in p.stderr and not os.path.exists(outs[0])
    need(ok, f"{name} refused with '{text}': rc {p.returncode}: {p.stderr.strip()}")


def t(x):
    return torch.from_numpy(x)


def groupnorm_ref(x, G, scale, bias, eps, per_group):
    n, c = x.shape[:2]
    xg = x.reshape(n, G, -1)
    mu, var = xg.mean(-1, keepdims=True), xg.var(-1, keepdims=True)
    y = ((xg - mu) / np.sqrt(var + eps)).reshape(x.shape)
    if per_group:
        scale, bias = np.repeat(scale, c // G), np.repeat(bias, c // G)
    sh = (1, c) + (1,) * (x.ndim - 2)
    return y * scale.reshape(sh) + bias.reshape(sh)


def seed():
    """GroupNormalization, Pad and Resize with axes, Split by num_outputs,
    Gelu and ReduceMean with an axes input, at opset 21, in one model."""
    mk = helper.make_node
    r = np.random.default_rng(3)
    nodes = [mk("GroupNormalization", ["x", "s", "b"], ["g"], num_groups=2),
             mk("Pad", ["g", "p", "", "pa"], ["pd"]),
             mk("Resize", ["pd", "", "sc"], ["rs"], mode="nearest", axes=[2, 3]),
             mk("Split", ["rs"], ["a", "c"], axis=1, num_outputs=2),
             mk("Gelu", ["a"], ["ge"], approximate="tanh"),
             mk("ReduceMean", ["ge", "ra"], ["y"], keepdims=1)]
    return model(nodes, [4, 3, 3], ["y"],
                 [("s", r.standard_normal(4).astype(np.float32)), ("b", r.standard_normal(4).astype(np.float32)),
                  ("p", i64(1, 1, 1, 1)), ("pa", i64(2, 3)), ("sc", np.array([2.0, 2.0], np.float32)),
                  ("ra", i64(-1))], opset=21)


def seed_ref(x):
    inits = {i.name: numpy_helper.to_array(i) for i in seed().graph.initializer}
    g = torch.nn.functional.group_norm(t(x), 2, t(inits["s"]).double(), t(inits["b"]).double(), 1e-5)
    pd = torch.nn.functional.pad(g, (1, 1, 1, 1))
    rs = pd.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
    return torch.nn.functional.gelu(rs[:, 0:2], approximate="tanh").mean(dim=-1, keepdim=True).numpy()


def main():
    if sys.argv[1] == "--write-seed":
        with open(sys.argv[2], "wb") as f:
            f.write(seed().SerializeToString())
        return 0
    dpc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    mk = helper.make_node
    X4 = [4, 5, 6]

    check(dpc, work, "reduce_mean_18", model([mk("ReduceMean", ["x", "ax"], ["y"], keepdims=1)], X4, ["y"],
                                             [("ax", i64(2))]), X4, lambda x: x.mean(axis=2, keepdims=True))
    check(dpc, work, "reduce_l2_18", model([mk("ReduceL2", ["x", "ax"], ["y"], keepdims=0)], X4, ["y"],
                                           [("ax", i64(-1))]), X4, lambda x: np.sqrt((x * x).sum(axis=-1)))
    check(dpc, work, "reduce_max_20", model([mk("ReduceMax", ["x", "ax"], ["y"], keepdims=0)], X4, ["y"],
                                            [("ax", i64(1, 3))], opset=20), X4, lambda x: x.max(axis=(1, 3)))
    check(dpc, work, "reduce_noop_18", model([mk("ReduceMean", ["x"], ["y"], noop_with_empty_axes=1)], X4, ["y"]),
          X4, lambda x: x)
    check(dpc, work, "split_18", model([mk("Split", ["x"], ["a", "b", "c"], axis=2, num_outputs=3)], [4, 8], ["a", "b", "c"]),
          [4, 8], lambda x: (x[:, :, 0:3], x[:, :, 3:6], x[:, :, 6:8]), nout=3)
    check(dpc, work, "pad_axes_18",
          model([mk("Pad", ["x", "p", "v", "ax"], ["y"])], X4, ["y"],
                [("p", i64(2, 1, 3, 0)), ("v", np.array(0.5, np.float32)), ("ax", i64(-1, 2))]),
          X4, lambda x: np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 3)), constant_values=0.5))
    check(dpc, work, "resize_axes_18",
          model([mk("Resize", ["x", "", "s"], ["y"], mode="linear", axes=[2, 3])], X4, ["y"],
                [("s", np.array([2.0, 2.0], np.float32))]),
          X4, lambda x: torch.nn.functional.interpolate(t(x), scale_factor=2.0, mode="bilinear",
                                                        align_corners=False).numpy())
    check(dpc, work, "avgpool_19",
          model([mk("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], dilations=[1, 1])], X4, ["y"],
                opset=19),
          X4, lambda x: torch.nn.functional.avg_pool2d(t(x), 3, 1, 1, count_include_pad=False).numpy())
    for ap in ("none", "tanh"):
        check(dpc, work, f"gelu_20_{ap}", model([mk("Gelu", ["x"], ["y"], approximate=ap)], X4, ["y"], opset=20), X4,
              lambda x, ap=ap: torch.nn.functional.gelu(t(x), approximate=ap).numpy())
    check(dpc, work, "mish_18", model([mk("Mish", ["x"], ["y"])], X4, ["y"]), X4,
          lambda x: torch.nn.functional.mish(t(x)).numpy())
    r = np.random.default_rng(5)
    sg, bg = r.standard_normal(2).astype(np.float32), r.standard_normal(2).astype(np.float32)
    check(dpc, work, "groupnorm_18",
          model([mk("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-5)], X4, ["y"],
                [("s", sg), ("b", bg)]),
          X4, lambda x: groupnorm_ref(x, 2, sg.astype(np.float64), bg.astype(np.float64), 1e-5, True))
    sc, bc = r.standard_normal(4).astype(np.float32), r.standard_normal(4).astype(np.float32)
    check(dpc, work, "groupnorm_21",
          model([mk("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-3)], X4, ["y"],
                [("s", sc), ("b", bc)], opset=21),
          X4, lambda x: torch.nn.functional.group_norm(t(x), 2, t(sc).double(), t(bc).double(), 1e-3).numpy())
    check(dpc, work, "misc_21",
          model([mk("Transpose", ["x"], ["a"], perm=[0, 2, 1, 3]), mk("Unsqueeze", ["a", "u"], ["b"]),
                 mk("Squeeze", ["b", "u"], ["c"]), mk("Flatten", ["c"], ["d"], axis=1),
                 mk("Reshape", ["d", "r"], ["e"]), mk("Cast", ["e"], ["y"], to=TensorProto.FLOAT)], X4, ["y"],
                [("u", i64(1)), ("r", i64(0, 20, 6))], opset=21),
          X4, lambda x: x.transpose(0, 2, 1, 3).reshape(N, 20, 6))

    check(dpc, work, "seed_21", seed(), [4, 3, 3], lambda x: seed_ref(x))
    relu = [mk("Relu", ["x"], ["y"])]
    refuse(dpc, work, "opset_22", model(relu, X4, ["y"], opset=22), X4, "opset 22 of the default domain is not supported")
    refuse(dpc, work, "pad_wrap_19",
           model([mk("Pad", ["x", "p"], ["y"], mode="wrap")], X4, ["y"], [("p", i64(0, 0, 1, 0, 0, 0, 1, 0))], opset=19),
           X4, "wrap")
    refuse(dpc, work, "resize_antialias_18",
           model([mk("Resize", ["x", "", "s"], ["y"], mode="linear", antialias=1)], X4, ["y"],
                 [("s", np.array([1, 1, 0.5, 0.5], np.float32))]), X4, "antialias=1 when downscaling")
    refuse(dpc, work, "resize_symmetric_19",
           model([mk("Resize", ["x", "", "s"], ["y"], mode="linear", coordinate_transformation_mode="half_pixel_symmetric")],
                 X4, ["y"], [("s", np.array([1, 1, 2, 2], np.float32))], opset=19), X4, "half_pixel_symmetric")
    refuse(dpc, work, "avgpool_dilated_19",
           model([mk("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2])], X4, ["y"], opset=19), X4,
           "a dilated AveragePool is not supported")
    refuse(dpc, work, "reduce_axes_attr_18", model([mk("ReduceMean", ["x"], ["y"], axes=[2])], X4, ["y"]), X4,
           "axes is an input from opset 18")
    refuse(dpc, work, "groupnorm_18_per_channel",
           model([mk("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)], X4, ["y"], [("s", sc), ("b", bc)]),
           X4, "(2 expected at opset 18)")
    refuse(dpc, work, "split_uneven_18",
           model([mk("Split", ["x"], ["a", "b", "c", "d"], axis=2, num_outputs=4)], [4, 5], ["a", "b", "c", "d"]),
           [4, 5], "5 does not split into 4 parts")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
