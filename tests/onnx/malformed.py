#!/usr/bin/env python3
"""Malformed ONNX files: each must be refused by `dpc import` (and by
`dpc run` / `dpc compile` of the .onnx itself, imported in memory) with
exit 1, one clean line `dpc: error: ...` on stderr, no output file, no
crash, no sanitizer report and no hang.

  malformed.py DPC --work DIR [--write-seeds CORPUS_DIR] [-v]

The files are made here from python3-onnx's helpers and raw bytes:
truncations at many offsets, wrong wire types, huge declared lengths,
dims and counts, raw_data length mismatches, cyclic graphs, dangling and
duplicate names, type mismatches, rank > 8, negative dims, external data
outside the model's directory (../, absolute, a symlink) or missing, an
empty file and files that are not ONNX. Two valid models are run too
(they must import and run): the control that shows the checks can pass.
--write-seeds also writes a few of the files (valid and malformed) as the
seed corpus of the fuzz target fuzz_onnx."""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


def model_of(nodes, inputs, outputs, inits=(), opset=OPSET, name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="malformed.py")
    m.ir_version = 7
    return m


def vi(name, shape, dt=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dt, shape)


def valid_model():
    """x[N,3,8,8] -> Conv(w, b) -> Relu -> + bias2 -> y"""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float32), "b")
    c = numpy_helper.from_array(rng.standard_normal((4, 1, 1)).astype(np.float32), "c")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["h"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "c"], ["y"], name="add")]
    return model_of(nodes, [vi("x", ["N", 3, 8, 8])], [vi("y", ["N", 4, 8, 8])], [w, b, c])


def small_model():
    """x[N,4] -> Relu -> y: a tiny file, truncated at every offset"""
    return model_of([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", ["N", 4])], [vi("y", ["N", 4])])


def ser(m):
    return m.SerializeToString()


# ------------------------------------------------------- raw protobuf bits

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def fields(buf):
    """(start, tag_end, field, wire, value_start, end) of each top-level field"""
    pos, out = 0, []
    while pos < len(buf):
        start = pos
        tag, shift = 0, 0
        while True:
            c = buf[pos]
            pos += 1
            tag |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                break
        tag_end = pos
        wt, fn = tag & 7, tag >> 3
        if wt == 0:
            while buf[pos] & 0x80:
                pos += 1
            pos += 1
            vs = tag_end
        elif wt == 1:
            vs, pos = pos, pos + 8
        elif wt == 5:
            vs, pos = pos, pos + 4
        elif wt == 2:
            ln, shift = 0, 0
            while True:
                c = buf[pos]
                pos += 1
                ln |= (c & 0x7F) << shift
                shift += 7
                if not c & 0x80:
                    break
            vs, pos = pos, pos + ln
        else:
            raise ValueError("wire type %d" % wt)
        out.append((start, tag_end, fn, wt, vs, pos))
    return out


def with_len(buf, field_index, new_len):
    """buf with the declared length of a top-level length-delimited field replaced"""
    f = fields(buf)[field_index]
    start, tag_end, fn, wt, vs, end = f
    assert wt == 2
    return buf[:tag_end] + varint(new_len) + buf[vs:]


def wire_mutants(buf):
    """the tags of the top-level fields and of the graph's fields with each other wire type"""
    out = []
    top = fields(buf)
    for (start, tag_end, fn, wt, vs, end) in top:
        for nwt in (0, 1, 2, 3, 4, 5, 6, 7):
            if nwt != wt:
                out.append(("wire type %d for model field %d" % (nwt, fn),
                            buf[:start] + varint(fn << 3 | nwt) + buf[tag_end:]))
    g = [f for f in top if f[2] == 7][0]
    gbuf = buf[g[4]:g[5]]
    for (start, tag_end, fn, wt, vs, end) in fields(gbuf)[:6]:
        for nwt in (0, 1, 5, 3):
            if nwt != wt:
                ng = gbuf[:start] + varint(fn << 3 | nwt) + gbuf[tag_end:]
                out.append(("wire type %d for graph field %d" % (nwt, fn),
                            buf[:g[1]] + varint(len(ng)) + ng + buf[g[5]:]))
    return out


# ------------------------------------------------------------- the cases

def cases(work):
    """(name, bytes or None, files to place beside it) for each malformed file"""
    out = []

    def add(name, data, extra=None):
        out.append((name, data, extra or {}))

    good = ser(valid_model())
    tiny = ser(small_model())
    add("empty", b"")
    add("text", b"this is not an ONNX model\n")
    add("png", b"\x89PNG\r\n\x1a\n" + bytes(64))
    add("safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}        ")
    add("zeros", bytes(1024))
    add("ones", b"\xff" * 1024)
    add("random", np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    add("field0", b"\x00\x01" + good)
    # truncations: every offset of the tiny model, many of the valid one
    for k in range(1, len(tiny)):
        add("trunc_tiny_%d" % k, tiny[:k])
    step = max(1, len(good) // 60)
    for k in list(range(1, len(good), step)) + [len(good) - 1, len(good) - 2]:
        add("trunc_%d" % k, good[:k])
    for i, (what, data) in enumerate(wire_mutants(good)):
        add("wire_%d" % i, data)
    # huge declared lengths of the graph field
    gi = [i for i, f in enumerate(fields(good)) if f[2] == 7][0]
    for ln in (len(good), 1 << 31, (1 << 63) - 1, (1 << 64) - 1):
        add("graphlen_%d" % ln, with_len(good, gi, ln))
    add("varint_overlong", good + b"\x80" * 11)
    add("tag_no_value", good + b"\x3a")
    # deep nesting: If inside If inside ... (graphs in attributes)
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "b", [], [vi("y", [1])])
    inner = leaf
    for d in range(40):
        n = helper.make_node("If", ["c"], ["y"], then_branch=inner, else_branch=leaf)
        inner = helper.make_graph([n], "b%d" % d, [], [vi("y", [1])])
    deep = model_of(inner.node, [vi("c", [1], TensorProto.BOOL)], [vi("y", [1])])
    add("deep_if", ser(deep))

    def m(nodes, inputs, outputs, inits=(), opset=OPSET):
        return ser(model_of(nodes, inputs, outputs, inits, opset))

    x4 = [vi("x", ["N", 4])]
    y4 = [vi("y", ["N", 4])]
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    # opsets
    mm = small_model()
    del mm.opset_import[:]
    add("no_opset", ser(mm))
    add("opset_0", m(relu, x4, y4, opset=0))
    add("opset_1000", m(relu, x4, y4, opset=1000))
    mm = small_model()
    mm.opset_import.append(helper.make_opsetid("", 13))
    add("opset_twice", ser(mm))
    # graph structure
    mm = small_model()
    mm.ClearField("graph")
    add("no_graph", ser(mm))
    add("no_outputs", m(relu, x4, []))
    add("no_inputs", m([helper.make_node("Relu", ["k"], ["y"])], [], y4,
                       [numpy_helper.from_array(np.ones((2, 4), np.float32), "k")]))
    add("cycle", m([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                    helper.make_node("Relu", ["a"], ["y"])], x4, y4))
    add("self_loop", m([helper.make_node("Add", ["x", "y"], ["y"])], x4, y4))
    add("dangling_input", m([helper.make_node("Add", ["x", "nowhere"], ["y"])], x4, y4))
    add("dangling_output", m(relu, x4, [vi("z", ["N", 4])]))
    add("dup_output", m([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])], x4, y4))
    add("output_is_input", m([helper.make_node("Relu", ["x"], ["x"])], x4, [vi("x", ["N", 4])]))
    add("output_is_init", m([helper.make_node("Relu", ["x"], ["k"])], x4, [vi("k", ["N", 4])],
                            [numpy_helper.from_array(np.ones((2, 4), np.float32), "k")]))
    add("dup_init", m(relu, x4, y4, [numpy_helper.from_array(np.ones(4, np.float32), "k"),
                                     numpy_helper.from_array(np.ones(4, np.float32), "k")]))
    add("dup_input", m(relu, x4 + x4, y4))
    add("empty_input_name", m(relu, [vi("", ["N", 4])], y4))
    add("empty_op_type", m([helper.make_node("", ["x"], ["y"])], x4, y4))
    add("long_op_type", m([helper.make_node("R" * 5000, ["x"], ["y"])], x4, y4))
    add("newline_names", m([helper.make_node("Foo\nBar", ["x"], ["y"], name="n\n\x1b[31mred")], x4, y4))
    add("unknown_domain", m([helper.make_node("Relu", ["x"], ["y"], domain="com.evil")], x4, y4))
    add("unknown_attr", m([helper.make_node("Relu", ["x"], ["y"], bogus=3)], x4, y4))
    # types and shapes
    add("input_string", m(relu, [vi("x", ["N", 4], TensorProto.STRING)], y4))
    add("input_no_shape", m(relu, [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)], y4))
    add("input_rank9", m(relu, [vi("x", ["N"] + [1] * 8)], y4))
    add("input_rank0", m(relu, [vi("x", [])], y4))
    add("input_neg_dim", m(relu, [vi("x", ["N", -3])], y4))
    add("input_huge_dim", m(relu, [vi("x", ["N", 1 << 62])], y4))
    add("input_zero_dim", m(relu, [vi("x", ["N", 0])], y4))
    add("type_mismatch_add", m([helper.make_node("Add", ["x", "i"], ["y"])],
                               x4 + [vi("i", ["N", 4], TensorProto.INT64)], y4))
    add("shape_mismatch_add", m([helper.make_node("Add", ["x", "k"], ["y"])], x4, y4,
                                [numpy_helper.from_array(np.ones(5, np.float32), "k")]))
    add("matmul_mismatch", m([helper.make_node("MatMul", ["x", "k"], ["y"])], x4, y4,
                             [numpy_helper.from_array(np.ones((5, 4), np.float32), "k")]))
    add("conv_w_rank3", m([helper.make_node("Conv", ["x", "w"], ["y"])], [vi("x", ["N", 3, 8, 8])],
                          [vi("y", ["N", 4, 6, 6])], [numpy_helper.from_array(np.ones((4, 3, 3), np.float32), "w")]))
    add("conv_w_channels", m([helper.make_node("Conv", ["x", "w"], ["y"])], [vi("x", ["N", 3, 8, 8])],
                             [vi("y", ["N", 4, 6, 6])],
                             [numpy_helper.from_array(np.ones((4, 5, 3, 3), np.float32), "w")]))
    add("reshape_bad", m([helper.make_node("Reshape", ["x", "s"], ["y"])], x4, y4,
                         [numpy_helper.from_array(np.array([-1, 3], np.int64), "s")]))
    add("output_int", m([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64)], x4,
                        [vi("y", ["N", 4], TensorProto.INT64)]))

    # initializers
    def init_case(name, t, consumer="Add"):
        add(name, m([helper.make_node(consumer, ["x", t.name], ["y"])], x4, y4, [t]))

    def tensor(name, dims, dt=TensorProto.FLOAT, raw=None, floats=None):
        t = TensorProto()
        t.name, t.data_type = name, dt
        t.dims.extend(dims)
        if raw is not None:
            t.raw_data = raw
        if floats is not None:
            t.float_data.extend(floats)
        return t

    init_case("raw_short", tensor("k", [4], raw=bytes(12)))
    init_case("raw_long", tensor("k", [4], raw=bytes(20)))
    init_case("typed_short", tensor("k", [4], floats=[1.0, 2.0]))
    init_case("typed_and_raw", tensor("k", [4], raw=bytes(16), floats=[1, 2, 3, 4]))
    init_case("init_neg_dim", tensor("k", [-4], raw=b""))
    init_case("init_huge_dims", tensor("k", [1 << 31, 1 << 31, 1 << 31], raw=b""))
    init_case("init_overflow", tensor("k", [(1 << 62), (1 << 62)], raw=b""))
    init_case("init_rank9", tensor("k", [1] * 9, raw=bytes(4)))
    init_case("init_string", tensor("k", [1], TensorProto.STRING))
    init_case("init_undefined", tensor("k", [1], 0, raw=bytes(4)))
    init_case("init_dtype_99", tensor("k", [1], 99, raw=bytes(4)))
    init_case("init_bool_2", tensor("k", [4], TensorProto.BOOL, raw=b"\x00\x01\x02\x00"), "Where")
    t = tensor("k", [4])
    t.segment.begin, t.segment.end = 0, 4
    init_case("init_segment", t)

    # external data
    def ext(name, location, files=None, offset=None, length=None):
        t = tensor("k", [4])
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", offset), ("length", length)):
            if v is not None:
                e = t.external_data.add()
                e.key, e.value = k, str(v)
        add(name, m([helper.make_node("Add", ["x", "k"], ["y"])], x4, y4, [t]), files)

    ext("ext_parent", "../outside.bin")
    ext("ext_parent_deep", "sub/../../outside.bin")
    ext("ext_absolute", "/etc/passwd")
    ext("ext_absolute_dev", "/dev/zero")
    ext("ext_missing", "missing.bin")
    ext("ext_empty_location", "")
    ext("ext_dir", ".")
    ext("ext_short", "short.bin", {"short.bin": bytes(8)})
    ext("ext_offset", "data.bin", {"data.bin": bytes(16)}, offset=8)
    ext("ext_offset_huge", "data.bin", {"data.bin": bytes(16)}, offset=1 << 62)
    ext("ext_offset_neg", "data.bin", {"data.bin": bytes(16)}, offset=-1)
    ext("ext_length", "data.bin", {"data.bin": bytes(16)}, length=12)
    ext("ext_symlink", "link.bin", {"link.bin": ("symlink", "../outside.bin")})
    ext("ext_symlink_abs", "link.bin", {"link.bin": ("symlink", "/etc/passwd")})
    ext("ext_backslash", "..\\outside.bin")
    t = tensor("k", [4], raw=bytes(16))
    e = t.external_data.add()
    e.key, e.value = "location", "data.bin"
    add("ext_not_external", m([helper.make_node("Add", ["x", "k"], ["y"])], x4, y4, [t]), {"data.bin": bytes(16)})
    return out


def place(work, i, name, data, extra):
    d = os.path.join(work, "%03d_%s" % (i, name), "model")
    os.makedirs(d)
    with open(os.path.join(work, "%03d_%s" % (i, name), "outside.bin"), "wb") as f:
        f.write(bytes(16))
    for fn, content in extra.items():
        p = os.path.join(d, fn)
        if isinstance(content, tuple):
            os.symlink(content[1], p)
        else:
            with open(p, "wb") as f:
                f.write(content)
    p = os.path.join(d, "m.onnx")
    with open(p, "wb") as f:
        f.write(data)
    return d, p


def run(cmd, timeout):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return r


def check_refused(r, outs):
    """None when r is a clean refusal, else what is wrong"""
    if r is None:
        return "timeout"
    err = r.stderr.strip()
    if "Sanitizer" in r.stderr or "runtime error:" in r.stderr:
        return "sanitizer: " + err[-400:]
    if r.returncode != 1:
        return "exit %d: %s" % (r.returncode, err[-300:])
    if not err.startswith("dpc: error: ") or "\n" in err or "\x1b" in err:
        return "not one clean line: %r" % err[:300]
    left = [o for o in outs if os.path.lexists(o)]
    if left:
        return "output left behind: %s" % left
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dpc")
    ap.add_argument("--work", required=True)
    ap.add_argument("--write-seeds")
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    dpc = os.path.abspath(a.dpc)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    fails = []
    # the controls: valid models import and run
    for name, mdl, shape in (("valid", valid_model(), (2, 3, 8, 8)), ("small", small_model(), (3, 4))):
        d = os.path.join(a.work, "control_" + name)
        os.makedirs(d)
        p = os.path.join(d, "m.onnx")
        onnx.save(mdl, p)
        r = run([dpc, "import", p, "-o", os.path.join(d, "m.dp")], a.timeout)
        if r is None or r.returncode != 0:
            fails.append("control %s: import failed: %s" % (name, r and r.stderr.strip()))
            continue
        x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
        np.save(os.path.join(d, "x.npy"), x)
        r = run([dpc, "run", p, "--input", os.path.join(d, "x.npy"), "-o", os.path.join(d, "y.npy")], a.timeout)
        if r is None or r.returncode != 0 or not os.path.exists(os.path.join(d, "y.npy")):
            fails.append("control %s: run failed: %s" % (name, r and r.stderr.strip()))
    cs = cases(a.work)
    for i, (name, data, extra) in enumerate(cs):
        d, p = place(a.work, i, name, data, extra)
        outs = [os.path.join(d, "out.dp"), os.path.join(d, "out.safetensors")]
        r = run([dpc, "import", p, "-o", outs[0]], a.timeout)
        why = check_refused(r, outs)
        # the in-memory import of the other verbs: all but the truncations (the same reader)
        if why is None and not name.startswith(("trunc", "wire_")):
            o2 = [os.path.join(d, "out.dpa")]
            r = run([dpc, "compile", p, "-o", o2[0]], a.timeout)
            why = check_refused(r, o2)
            if why:
                why = "dpc compile: " + why
        if why:
            fails.append("%s: %s" % (name, why))
        if a.v:
            print("%-28s %s" % (name, why or (r.stderr.strip()[:150] if r else "")))
    if a.write_seeds:
        os.makedirs(a.write_seeds, exist_ok=True)
        seeds = {"valid.onnx": ser(valid_model()), "small.onnx": ser(small_model())}
        keep = ("cycle", "dup_output", "raw_short", "init_overflow", "deep_if", "ext_parent", "wire_3",
                "graphlen_2147483648", "input_rank9", "newline_names", "type_mismatch_add", "trunc_40")
        for name, data, extra in cs:
            if name in keep:
                seeds[name + ".onnx"] = data
        for fn, data in seeds.items():
            with open(os.path.join(a.write_seeds, fn), "wb") as f:
                f.write(data)
    print("%d malformed ONNX files, %d refused cleanly; 2 valid controls" % (len(cs), len(cs) - len(
        [f for f in fails if not f.startswith("control")])))
    if fails:
        print("FAILED:")
        for f in fails:
            print("  " + f)
        return 1
    shutil.rmtree(a.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
