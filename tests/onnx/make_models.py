#!/usr/bin/env python3
"""Small ONNX models built with onnx.helper (python3-onnx), for the CLI
tests and as seeds of the reader's fuzz corpus (tests/corpus/onnx):

  make_models.py OUTDIR

cnn.onnx     Conv(pads 1) Relu BatchNormalization Clip(0,6) MaxPool HardSwish
             GlobalAveragePool Flatten Gemm, batch dim symbolic
plumb.onnx   x: [batch, seq, 8]: Shape/Gather/Unsqueeze/Concat into a Reshape,
             MatMul+Add (Linear), the opset-14 LayerNorm decomposition, Erf GELU,
             x*sigmoid(x), Softmax
badop.onnx   a node of an op type dpc does not support (Col2Im)
badattr.onnx a Conv with auto_pad=SAME_LOWER
dangling.onnx a node reading a name nothing defines
ext_*.onnx   cnn.onnx with conv.weight as external data: ext_ok.onnx (w.bin beside
             it), ext_dotdot.onnx (../w.bin), ext_abs.onnx (an absolute path),
             ext_link.onnx (a link out of the directory), ext_short.onnx (a
             length that does not match)
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def model(nodes, inputs, outputs, inits, opset=14):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_models")
    m.ir_version = 8
    return m


def cnn(rng):
    f = np.float32
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], name="conv", pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("BatchNormalization", ["r", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["b"], name="bn", epsilon=1e-5),
        helper.make_node("Clip", ["b", "zero", "six"], ["k"], name="relu6"),
        helper.make_node("MaxPool", ["k"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("HardSwish", ["p"], ["h"], name="hs"),
        helper.make_node("GlobalAveragePool", ["h"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["fl"], name="flat", axis=1),
        helper.make_node("Gemm", ["fl", "fc.weight", "fc.bias"], ["y"], name="fc", transB=1),
    ]
    inits = [init("conv.weight", rng.standard_normal((4, 3, 3, 3)).astype(f) * 0.3),
             init("conv.bias", rng.standard_normal(4).astype(f) * 0.1),
             init("bn.weight", (1 + 0.1 * rng.standard_normal(4)).astype(f)),
             init("bn.bias", (0.1 * rng.standard_normal(4)).astype(f)),
             init("bn.running_mean", (0.1 * rng.standard_normal(4)).astype(f)),
             init("bn.running_var", (1 + 0.1 * rng.random(4)).astype(f)),
             init("zero", np.array(0, f)), init("six", np.array(6, f)),
             init("fc.weight", rng.standard_normal((2, 4)).astype(f) * 0.5),
             init("fc.bias", rng.standard_normal(2).astype(f) * 0.1)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])
    return model(nodes, [x], [y], inits)


def plumb(rng):
    f = np.float32
    D = 8
    c = lambda name, v: helper.make_node("Constant", [], [name], name=name + "_c",
                                         value=numpy_helper.from_array(np.asarray(v)))
    nodes = [
        c("k1", np.array(1, np.int64)), c("k0", np.array(0, np.int64)), c("ax0", np.array([0], np.int64)),
        c("d8", np.array([D], np.int64)), c("two", np.array(2.0, f)), c("eps", np.array(1e-5, f)),
        c("sqrt2", np.array(1.4142135381698608, f)), c("one", np.array(1.0, f)), c("half", np.array(0.5, f)),
        helper.make_node("Shape", ["x"], ["sh"], name="shape"),
        helper.make_node("Gather", ["sh", "k0"], ["n"], name="g0", axis=0),
        helper.make_node("Gather", ["sh", "k1"], ["s"], name="g1", axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"], name="u0"),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"], name="u1"),
        helper.make_node("Concat", ["n1", "s1", "d8"], ["shape3"], name="cat", axis=0),
        helper.make_node("MatMul", ["x", "lin.w"], ["mm"], name="lin_mm"),
        helper.make_node("Add", ["mm", "lin.b"], ["l"], name="lin_add"),
        helper.make_node("Reshape", ["l", "shape3"], ["l3"], name="reshape"),
        # LayerNorm, decomposed as torch.onnx exports it before opset 17
        helper.make_node("ReduceMean", ["l3"], ["mu"], name="ln_mean", axes=[-1]),
        helper.make_node("Sub", ["l3", "mu"], ["dd"], name="ln_sub"),
        helper.make_node("Pow", ["dd", "two"], ["sq"], name="ln_pow"),
        helper.make_node("ReduceMean", ["sq"], ["var"], name="ln_var", axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"], name="ln_add_eps"),
        helper.make_node("Sqrt", ["ve"], ["sd"], name="ln_sqrt"),
        helper.make_node("Div", ["dd", "sd"], ["nz"], name="ln_div"),
        helper.make_node("Mul", ["nz", "ln.weight"], ["sc"], name="ln_mul"),
        helper.make_node("Add", ["sc", "ln.bias"], ["ln"], name="ln_add"),
        # GELU through Erf
        helper.make_node("Div", ["ln", "sqrt2"], ["gd"], name="gelu_div"),
        helper.make_node("Erf", ["gd"], ["ge"], name="gelu_erf"),
        helper.make_node("Add", ["ge", "one"], ["ga"], name="gelu_add"),
        helper.make_node("Mul", ["ln", "ga"], ["gm"], name="gelu_mul"),
        helper.make_node("Mul", ["gm", "half"], ["gl"], name="gelu_half"),
        helper.make_node("Sigmoid", ["gl"], ["sg"], name="silu_sig"),
        helper.make_node("Mul", ["gl", "sg"], ["si"], name="silu_mul"),
        helper.make_node("Softmax", ["si"], ["y"], name="softmax", axis=-1),
    ]
    inits = [init("lin.w", rng.standard_normal((D, D)).astype(f) * 0.4),
             init("lin.b", rng.standard_normal(D).astype(f) * 0.1),
             init("ln.weight", (1 + 0.1 * rng.standard_normal(D)).astype(f)),
             init("ln.bias", (0.1 * rng.standard_normal(D)).astype(f))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", D])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", D])
    return model(nodes, [x], [y], inits)


def one_node(node, opset=14):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [init("w", np.ones((3, 3, 3, 3), np.float32))] if node.op_type == "Conv" else []
    return model([node], [x], [y], inits, opset)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    save(cnn(rng), os.path.join(out, "cnn.onnx"))
    save(plumb(rng), os.path.join(out, "plumb.onnx"))
    save(one_node(helper.make_node("Col2Im", ["x", "x", "x"], ["y"], name="c2i")), os.path.join(out, "badop.onnx"))
    save(one_node(helper.make_node("Conv", ["x", "w"], ["y"], name="Conv_12", auto_pad="SAME_LOWER")),
         os.path.join(out, "badattr.onnx"))
    save(one_node(helper.make_node("Relu", ["nowhere"], ["y"], name="r")), os.path.join(out, "dangling.onnx"))
    external(out)
    save(nested(40), os.path.join(out, "deep.onnx"))
    return 0


def nested(depth):
    """If nodes nested in their then_branch, depth deep (past the reader's bound of 32)."""
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    leaf = helper.make_graph([helper.make_node("Constant", [], ["y"], value_float=1.0)], "leaf", [], [y])
    g = leaf
    for i in range(depth):
        node = helper.make_node("If", ["c"], ["y"], name=f"if{i}", then_branch=g, else_branch=leaf)
        g = helper.make_graph([node], f"g{i}", [], [y])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, ["batch"])
    return model(list(g.node), [c], [y], [])


def external(out):
    """conv.weight of cnn.onnx moved to a file (the same bytes as raw_data)."""
    from onnx import TensorProto as TP
    rng = np.random.default_rng(0)
    base = cnn(rng)
    w = next(t for t in base.graph.initializer if t.name == "conv.weight")
    raw = numpy_helper.to_array(w).astype("<f4").tobytes()
    open(os.path.join(out, "w.bin"), "wb").write(b"\0" * 16 + raw)
    outside = os.path.join(os.path.dirname(os.path.abspath(out)), "outside_w.bin")
    open(outside, "wb").write(b"\0" * 16 + raw)
    link = os.path.join(out, "link.bin")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(outside, link)
    for name, loc, length in (("ok", "w.bin", len(raw)), ("dotdot", "../outside_w.bin", len(raw)),
                              ("abs", outside, len(raw)), ("link", "link.bin", len(raw)),
                              ("short", "w.bin", len(raw) - 4)):
        m = cnn(np.random.default_rng(0))
        t = next(t for t in m.graph.initializer if t.name == "conv.weight")
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.data_location = TP.EXTERNAL
        for k, v in (("location", loc), ("offset", "16"), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        save(m, os.path.join(out, f"ext_{name}.onnx"))


if __name__ == "__main__":
    sys.exit(main())
