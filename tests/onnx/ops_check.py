#!/usr/bin/env python3
"""Pad, Resize/Upsample, ConvTranspose, InstanceNormalization (and
GroupNorm's export) through `dpc run MODEL.onnx`, two ways:

  1. ONNX's own node cases of these ops with their parameter inputs (pads,
     scales, sizes, weights, scale/B) made initializers, as exporters write
     them (the node tests give them as graph inputs, which dpc refuses):
     each output against the case's output_*.pb by ONNX's rule
     (rtol 1e-3, atol 1e-7), or the located refusal listed below.
  2. Small PyTorch modules exported by torch.onnx.export (batch dim
     dynamic, run at batch 2) against PyTorch.
  3. Relu, LeakyRelu, HardSigmoid, Clip, HardSwish, Elu, Celu, Sigmoid on
     NaN, +inf and -inf against ONNX's reference formulas (NaN stays NaN).

  ops_check.py DPC WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

NODE = "/usr/share/libonnx-testdata/data/node"
fails = []

# case -> None (must pass) or the refusal's text
NODE_CASES = {
    "test_constant_pad": None,
    "test_convtranspose": None, "test_convtranspose_autopad_same": None, "test_convtranspose_dilations": None,
    "test_convtranspose_kernel_shape": None, "test_convtranspose_output_shape": None, "test_convtranspose_pad": None,
    "test_convtranspose_pads": None, "test_convtranspose_with_kernel": None,
    "test_convtranspose_1d": "only 2-D transposed convolutions",
    "test_instancenorm_epsilon": None, "test_instancenorm_example": None,
    "test_resize_upsample_scales_nearest": None, "test_resize_downsample_scales_nearest": None,
    "test_resize_upsample_sizes_nearest": None,
    "test_resize_upsample_scales_linear": None, "test_resize_upsample_scales_linear_align_corners": None,
    "test_resize_downsample_scales_linear": None,
    "test_resize_downsample_scales_linear_align_corners": "align_corners with a scale that does not give a whole",
    "test_resize_downsample_sizes_linear_pytorch_half_pixel": "pytorch_half_pixel to an output size of 1",
    "test_resize_downsample_sizes_nearest": "picks other source pixels than dpc's nearest",
    "test_resize_upsample_sizes_nearest_ceil_half_pixel": "picks other source pixels than dpc's nearest",
    "test_resize_upsample_scales_cubic": "mode=cubic is not supported",
    "test_resize_tf_crop_and_resize": "coordinate_transformation_mode=tf_crop_and_resize is not supported",
    "test_upsample_nearest": None,
}


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        fails.append(what)


def dpc(*args):
    return subprocess.run([DPC, *args], capture_output=True, text=True, timeout=600)


def run(model, xs, work, name):
    ins = []
    for k, x in enumerate(xs):
        ins += ["--input", os.path.join(work, f"{name}_in{k}.npy")]
        np.save(ins[-1], x)
    out = os.path.join(work, f"{name}_out.npy")
    if os.path.exists(out):
        os.unlink(out)
    r = dpc("run", model, *ins, "-o", out)
    return (np.load(out) if r.returncode == 0 else None), r


def node_cases(work):
    if not os.path.isdir(NODE):
        print(f"{NODE}: not installed; node cases skipped")
        return
    for case, refusal in NODE_CASES.items():
        d = os.path.join(NODE, case)
        m = onnx.load(os.path.join(d, "model.onnx"))
        given = {t.name for t in m.graph.initializer}
        ins = [i for i in m.graph.input if i.name not in given]
        sets = sorted(s for s in os.listdir(d) if s.startswith("test_data_set_"))
        for s in sets:
            ds = os.path.join(d, s)
            arrs = [numpy_helper.to_array(onnx.load_tensor(os.path.join(ds, f"input_{k}.pb"))) for k in range(len(ins))]
            want = numpy_helper.to_array(onnx.load_tensor(os.path.join(ds, "output_0.pb")))
            v = onnx.ModelProto()
            v.CopyFrom(m)
            for k in range(1, len(ins)):
                v.graph.initializer.append(numpy_helper.from_array(arrs[k], ins[k].name))
            del v.graph.input[1:]
            path = os.path.join(work, case + ".onnx")
            onnx.save(v, path)
            got, r = run(path, arrs[:1], work, case)
            if refusal is None:
                ok = got is not None and got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-7)
                check(ok, f"{case}/{s} (parameters as initializers) against ONNX's output: "
                          f"{r.stderr.strip() if got is None else (got.shape, want.shape)}")
            else:
                lines = r.stderr.strip().splitlines()
                check(r.returncode == 1 and len(lines) == 1 and refusal in lines[0],
                      f"{case} refused: {r.stderr.strip()}")


def torch_cases(work):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)

    class Fn(nn.Module):
        def __init__(self, f):
            super().__init__()
            self.f = f

        def forward(self, x):
            return self.f(x)

    cases = [
        ("pad_constant", Fn(lambda x: F.pad(x, (1, 2, 0, 3), value=0.5)), (3, 5, 6), 14),
        ("pad_reflect", nn.ReflectionPad2d((2, 1, 1, 3)), (3, 5, 6), 14),
        ("pad_replicate", nn.ReplicationPad2d((1, 2, 2, 0)), (3, 5, 6), 14),
        ("pad_constant_op10", nn.ConstantPad2d((1, 0, 2, 1), -1.5), (3, 5, 6), 10),
        ("upsample_nearest2", nn.Upsample(scale_factor=2, mode="nearest"), (3, 5, 6), 14),
        ("upsample_nearest_size", nn.Upsample(size=(7, 9), mode="nearest"), (3, 5, 6), 14),
        ("upsample_nearest_op10", nn.Upsample(scale_factor=2, mode="nearest"), (3, 5, 6), 10),
        ("upsample_bilinear", nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), (3, 5, 6), 14),
        ("upsample_bilinear_ac", nn.Upsample(size=(9, 4), mode="bilinear", align_corners=True), (3, 5, 6), 14),
        ("convtranspose", nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), (4, 5, 6), 14),
        ("convtranspose_dil", nn.ConvTranspose2d(4, 3, (2, 3), stride=(1, 2), dilation=2, bias=False), (4, 5, 6),
         14),
        ("instancenorm", nn.InstanceNorm2d(4, affine=True, eps=1e-3), (4, 5, 6), 14),
        ("groupnorm", nn.GroupNorm(2, 6), (6, 5, 6), 14),
    ]
    for name, mod, shape, opset in cases:
        mod.eval()
        for p in mod.parameters():
            with torch.no_grad():
                p.add_(0.3 * torch.randn_like(p))
        x1 = torch.randn(1, *shape)
        path = os.path.join(work, name + ".onnx")
        torch.onnx.export(mod, (x1,), path, opset_version=opset, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        x = torch.randn(2, *shape)
        with torch.no_grad():
            want = mod(x).numpy()
        got, r = run(path, [x.numpy()], work, name)
        ok = got is not None and got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)
        err = r.stderr.strip() if got is None else (got.shape, want.shape,
                                                    float(np.abs(got - want).max()) if got.shape == want.shape else "")
        check(ok, f"{name} (opset {opset}, {', '.join(sorted({n.op_type for n in onnx.load(path).graph.node}))}) "
                  f"against PyTorch: {err}")


def nonfinite_cases(work):
    """Activations on NaN, +inf and -inf, against the formulas of ONNX's
    reference implementations (onnx/backend/test/case/node, numpy): NaN at
    the same places, the infinities and the bounds exactly (relu(NaN) =
    NaN, Clip(0, 6) of +inf is 6, HardSigmoid of -inf is 0)."""
    from onnx import TensorProto, helper
    f = np.float32
    x = np.array([[np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -1.5, 7.0, -7.0, 0.2, 3.0, -3.0]] * 2, f)
    x[1] = x[1, ::-1]

    def clip(v, lo, hi):
        return np.clip(v, lo, hi)
    cases = [  # op, attributes, constant inputs after x, opset, reference
        ("Relu", {}, [], 14, lambda v: np.maximum(v, 0)),
        ("LeakyRelu", {"alpha": 0.1}, [], 14, lambda v: clip(v, 0, np.inf) + clip(v, -np.inf, 0) * f(0.1)),
        ("LeakyRelu", {"alpha": 0.0}, [], 14, lambda v: clip(v, 0, np.inf) + clip(v, -np.inf, 0) * f(0.0)),
        ("HardSigmoid", {}, [], 14, lambda v: clip(v * f(0.2) + f(0.5), 0, 1)),
        ("HardSigmoid", {"alpha": 1 / 6}, [], 14, lambda v: clip(v * f(1 / 6) + f(0.5), 0, 1)),
        ("Clip", {}, [0.0, 6.0], 13, lambda v: clip(v, 0, 6)),
        ("Clip", {"min": -0.5, "max": 0.5}, [], 6, lambda v: clip(v, -0.5, 0.5)),
        ("HardSwish", {}, [], 14, lambda v: v * clip(v * f(1 / 6) + f(0.5), 0, 1)),
        ("Elu", {"alpha": 0.7}, [], 14, lambda v: clip(v, 0, np.inf) + (np.exp(clip(v, -np.inf, 0)) - 1) * f(0.7)),
        ("Celu", {"alpha": 2.0}, [], 14,
         lambda v: np.maximum(0, v) + np.minimum(0, f(2.0) * (np.exp(v / f(2.0)) - 1))),
        ("Sigmoid", {}, [], 14, lambda v: 1 / (1 + np.exp(-v))),
    ]
    for i, (op, attrs, consts, opset, ref) in enumerate(cases):
        names = ["x"] + [f"c{k}" for k in range(len(consts))]
        inits = [helper.make_tensor(f"c{k}", TensorProto.FLOAT, [], [c]) for k, c in enumerate(consts)]
        g = helper.make_graph([helper.make_node(op, names, ["y"], name="act", **attrs)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        path = os.path.join(work, f"nonfinite{i}.onnx")
        onnx.save(m, path)
        with np.errstate(invalid="ignore", over="ignore"):
            want = ref(x.astype(np.float64)).astype(f)
        got, r = run(path, [x], work, f"nonfinite{i}")
        same = got is not None and got.shape == want.shape and np.array_equal(np.isnan(got), np.isnan(want)) and \
            np.array_equal(np.isinf(got), np.isinf(want)) and np.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
        what = r.stderr.strip() if got is None else "" if same else f"got {got[0].tolist()}, want {want[0].tolist()}"
        check(same, f"{op} {attrs or ''}{' ' + str(consts) if consts else ''} (opset {opset}) on NaN and +-inf: {what}")


def main():
    global DPC
    DPC, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    node_cases(work)
    torch_cases(work)
    nonfinite_cases(work)
    print(f"{len(fails)} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
