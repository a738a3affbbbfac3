#!/usr/bin/env python3
"""The importer's arity check (issue 30, items 1 and 8): every row of the op
table declares the inputs and outputs it takes (`dpc import --list-ops`,
columns 4 and 5), checked before the op runs.

  arity_check.py DPC IMPORT_BATCH WORKDIR [--quick] [--write-seeds DIR] [-v]

(a) For every op of the table, at its first opset and at each opset its
    arity changes, a node made by a recipe (a valid one where dpc supports
    the op's form) is mutated: its last input or output dropped, an empty
    "" name at each position, one input or output too many. Each model must
    import, or be refused cleanly: exit 1, one `dpc: error:` line naming
    the node (or, once every node imported, a graph output), no crash or
    sanitizer report; they are imported in one process (onnx_import_batch,
    tests/onnx/import_batch.c: dpc's start-up is most of a tiny import's
    time, more so under a sanitizer). A mutation that breaks the row's
    arity must get exactly its message ("takes 1 input, got 0", "input 1
    (of 3) is required but empty"). The rows are also checked against
    python3-onnx's schemas (onnx.defs) where it has the opset: the same
    maximum counts, no required position ONNX leaves optional. The
    unmutated recipes must import (the control that the checks can pass),
    and so must the mutations that leave them valid (an optional input or
    output left out: Clip's min, Conv's bias, Slice's steps, Resize's roi,
    Dropout's mask...).
(b) The Relu with no output (the issue's 82-byte model; it aborted with
    "double free or corruption"), by import, run and compile.
(c) Concat of 10 and of 12 computed tensors, and Sum, Mean, Max, Min of 9
    to 40, run against NumPy (a statement recorded at most 8 readers: the
    9th was dropped, and the .dp failed with "unknown name 't9'").
(d) 10,000 initializers and a Relu with an empty output (it segfaulted in
    import, run, compile and serve), and the same with a missing input.
--quick tests one opset per op in (a) (the latest arity): fewer runs under
a sanitizer."""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
    return cond


def model_of(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="arity_check.py")
    m.ir_version = 7
    return m


def vi(name, shape, dt=F):
    return helper.make_tensor_value_info(name, dt, shape)


def run(cmd, timeout=120):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def refusal_problem(r, outs, node=None):
    """None when r is a clean refusal (naming `node` when given), else what is wrong"""
    if r is None:
        return "timeout"
    err = r.stderr.strip()
    if "Sanitizer" in r.stderr or "runtime error:" in r.stderr:
        return "sanitizer: " + err[-600:]
    if r.returncode != 1:
        return "exit %d: %s" % (r.returncode, err[-300:])
    if not err.startswith("dpc: error: ") or "\n" in err:
        return "not one clean line: %r" % err[:300]
    if "internal" in err:
        return "an internal error: " + err
    if node and node not in err and ": graph output '" not in err:
        return "does not name the node: " + err
    left = [o for o in outs if os.path.lexists(o)]
    return "output left behind: %s" % left if left else None


# ---------------------------------------------------------------- the table

def arity_at(spec, opset):
    """(lo, hi) of a row's spec at an opset; hi None: unbounded, all required"""
    def rng(t):
        if t.endswith("+"):
            return int(t[:-1]), None
        a, _, b = t.partition("-")
        return int(a), int(b or a)
    parts = spec.split(", ")
    lo, hi = rng(parts[0])
    for p in parts[1:]:
        k, _, t = p.partition(": ")
        if opset >= int(k):
            lo, hi = rng(t)
    return lo, hi


def change_points(spec):
    return [int(p.partition(": ")[0]) for p in spec.split(", ")[1:]]


def list_ops(dpc):
    r = subprocess.run([dpc, "import", "--list-ops"], capture_output=True, text=True, check=True)
    ops = {}
    for line in r.stdout.splitlines():
        f = line.split("\t")
        ops[f[0]] = (int(f[1]), int(f[2]), f[3], f[4])
    return ops


def schema_check(ops):
    """dpc's counts against ONNX's schemas, at the opsets both know"""
    top = onnx.defs.onnx_opset_version()
    n = 0
    for op, (lo_set, hi_set, ins, outs) in ops.items():
        for k in sorted({lo_set, *change_points(ins), *change_points(outs)}):
            if k > min(hi_set, top) or k < lo_set:
                continue
            try:
                s = onnx.defs.get_schema(op, k)
            except Exception:  # noqa: BLE001 (an op newer than this onnx)
                continue
            n += 1
            for what, spec, smin, smax in (("inputs", ins, s.min_input, s.max_input),
                                           ("outputs", outs, s.min_output, s.max_output)):
                lo, hi = arity_at(spec, k)
                big = smax >= 2 ** 31 - 1
                check((hi is None) == big and (big or hi == smax) and lo <= smin,
                      "%s at opset %d: dpc's %s %r, ONNX's %d to %s" % (op, k, what, spec, smin,
                                                                        "any" if big else smax))
    return n


# ------------------------------------------------------------------ recipes

X4 = ("X", ["N", 3, 4, 5])


def c(name, a, dt=None):
    return numpy_helper.from_array(np.asarray(a, dtype=dt or np.float32), name)


def i64(name, a):
    return c(name, a, np.int64)


def recipe(op, k):
    """(inputs, outputs, attrs, graph inputs, initializers, nodes before): a
    node of `op` at opset k, valid where dpc supports the form"""
    ins, outs, at, gin, ini, pre = ["X"], ["y"], {}, [X4], [], []
    W5 = [c("W", np.linspace(0.5, 1.5, 5))]
    cmp = [helper.make_node("Greater", ["X", "Z"], ["b"], name="pre_b")], [c("Z", 0.0)]
    unary = {"Abs", "Erf", "Exp", "Log", "Neg", "Reciprocal", "Relu", "Sigmoid", "Sin", "Sqrt", "Tanh", "HardSwish",
             "Sign", "Softplus", "Softsign", "Celu", "Elu", "Selu", "Gelu", "Mish", "ThresholdedRelu", "Shrink",
             "HardSigmoid", "LeakyRelu", "Identity", "GlobalAveragePool", "GlobalMaxPool", "Shape"}
    if op in unary:
        pass
    elif op in ("Softmax", "LogSoftmax"):
        at = {"axis": 3}
    elif op == "Cast":
        at = {"to": F}
    elif op == "Flatten":
        at = {"axis": 1}
    elif op == "Transpose":
        at = {"perm": [0, 2, 1, 3]}
    elif op in ("AveragePool", "MaxPool"):
        at = {"kernel_shape": [2, 2]}
    elif op in ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual",
                "PRelu"):
        ins, ini = ["X", "W"], W5
    elif op in ("And", "Or"):
        (pre, ini), ins = cmp, ["b", "b"]
    elif op == "Not":
        (pre, ini), ins = cmp, ["b"]
    elif op == "Where":
        (pre, ini), ins = cmp, ["b", "X", "W"]
        ini = ini + W5
    elif op == "MatMul":
        ins, ini = ["X", "M"], [c("M", np.ones((5, 6)))]
    elif op == "Gemm":
        ins, gin, ini = ["A", "B", "C"], [("A", ["N", 5])], [c("B", np.ones((5, 6))), c("C", np.arange(6))]
    elif op in ("Conv", "ConvTranspose"):
        w = (2, 3, 3, 3) if op == "Conv" else (3, 2, 3, 3)
        ins, ini, at = ["X", "Wc", "Bc"], [c("Wc", np.full(w, 0.1)), c("Bc", [0.5, -0.5])], {"pads": [1, 1, 1, 1]}
    elif op == "BatchNormalization":
        ins = ["X", "s", "bb", "m", "v"]
        ini = [c("s", [1, 2, 3]), c("bb", [0, 1, 0]), c("m", [0.1, 0.2, 0.3]), c("v", [1, 2, 3])]
    elif op in ("InstanceNormalization", "GroupNormalization"):
        ins, ini = ["X", "s", "bb"], [c("s", [1, 2, 3]), c("bb", [0, 1, 0])]
        at = {"num_groups": 3} if op == "GroupNormalization" else {}
    elif op == "LayerNormalization":
        ins, ini = ["X", "s", "bb"], [c("s", np.ones(5)), c("bb", np.zeros(5))]
    elif op == "Concat":
        ins, at = ["X", "X", "X"], {"axis": 1}
    elif op in ("Sum", "Mean", "Max", "Min"):
        ins, ini = ["X", "X", "W"], W5
    elif op == "Constant":
        ins, at = [], {"value": c("v", [1.0, 2.0])}
    elif op == "ConstantOfShape":
        ins, ini = ["sh"], [i64("sh", [5])]
    elif op == "Range":
        ins, ini = ["r0", "r1", "r2"], [c("r0", 0.0), c("r1", 5.0), c("r2", 1.0)]
    elif op == "Expand":
        ins, ini = ["X", "sh"], [i64("sh", [1, 1, 1, 1])]
    elif op == "Gather":
        ins, ini, at = ["X", "ix"], [i64("ix", 1)], {"axis": 1}
    elif op == "Reshape":
        ins, ini = ["X", "sh"], [i64("sh", [0, 3, 20])]
    elif op == "Slice":
        ins = ["X", "st", "en", "ax", "sp"]
        ini = [i64("st", [0]), i64("en", [2]), i64("ax", [1]), i64("sp", [1])]
    elif op == "Split":
        outs, at = ["y", "y2"], {"axis": 1}
        if k >= 13:
            ins, ini = ["X", "sp"], [i64("sp", [1, 2])]
        else:
            at["split"] = [1, 2]
    elif op == "Squeeze":
        gin = [("X", ["N", 1, 4])]
        ins, ini, at = (["X", "ax"], [i64("ax", [1])], {}) if k >= 13 else (["X"], [], {"axes": [1]})
    elif op == "Unsqueeze":
        ins, ini, at = (["X", "ax"], [i64("ax", [1])], {}) if k >= 13 else (["X"], [], {"axes": [1]})
    elif op == "Pad":
        if k < 11:
            at = {"pads": [0, 0, 1, 1, 0, 0, 1, 1]}
        elif k < 18:
            ins, ini = ["X", "pd", "cv"], [i64("pd", [0, 0, 1, 1, 0, 0, 1, 1]), c("cv", 0.5)]
        else:
            ins, ini = ["X", "pd", "cv", "ax"], [i64("pd", [1, 1, 1, 1]), c("cv", 0.5), i64("ax", [2, 3])]
    elif op == "Resize":
        sc = c("sc", [1, 1, 2, 2])
        ins, ini = (["X", "sc"], [sc]) if k < 11 else (["X", "roi", "sc"], [c("roi", np.zeros(0)), sc])
    elif op == "Upsample":
        ins, ini, at = (["X", "sc"], [c("sc", [1, 1, 2, 2])], {}) if k >= 9 else \
            (["X"], [], {"scales": [1.0, 1.0, 2.0, 2.0]})
    elif op == "Clip":
        ins, ini, at = (["X", "lo", "hi"], [c("lo", 0.0), c("hi", 6.0)], {}) if k >= 11 else \
            (["X"], [], {"min": 0.0, "max": 6.0})
    elif op.startswith("Reduce"):
        at = {"keepdims": 1}
        if k >= (13 if op == "ReduceSum" else 18):
            ins, ini = ["X", "ax"], [i64("ax", [2])]
        else:
            at["axes"] = [2]
    elif op == "Tile":
        ins, ini = ["X", "rp"], [i64("rp", [1, 1, 2, 1])]
    elif op == "Dropout":
        outs = ["y", "mask"]
        if k >= 12:
            ins, ini = ["X", "ratio", "tm"], [c("ratio", 0.5), c("tm", False, np.bool_)]
    else:
        return None
    return ins, outs, at, gin, ini, pre


def mutations(ins, outs):
    """(tag, inputs, outputs)"""
    yield "base", ins, outs
    for side, names in (("in", ins), ("out", outs)):
        def put(v):
            return (v, outs) if side == "in" else (ins, v)
        if names:
            yield ("%s_drop" % side,) + put(names[:-1])
        for k in range(len(names)):
            yield ("%s_empty%d" % (side, k),) + put(names[:k] + [""] + names[k + 1:])
        yield ("%s_extra" % side,) + put(names + ["X" if side == "in" else "extra_out"])


def expected(spec_in, spec_out, k, ins, outs):
    """the arity message a mutation must get, or None when its counts fit"""
    for what, spec, names in (("input", spec_in, ins), ("output", spec_out, outs)):
        lo, hi = arity_at(spec, k)
        if len(names) < lo or (hi is not None and len(names) > hi):
            takes = ("%d or more %ss" % (lo, what) if hi is None else "no %ss" % what if hi == 0 else
                     "%d %s%s" % (lo, what, "" if lo == 1 else "s") if lo == hi else "%d to %d %ss" % (lo, hi, what))
            return "takes %s, got %d" % (takes, len(names))
        for j, nm in enumerate(names):
            if not nm and (j < lo or hi is None):
                return "%s %d (of %d) is required but empty" % (what, j, len(names))
    return None


# ops whose output the recipe's graph cannot return (a constant, a bool, an
# input passed through): their unmutated node must import, the graph then
# being refused at its output
NOT_RETURNED = {"Constant", "ConstantOfShape", "Shape", "Range", "Not", "And", "Or", "Equal", "Greater", "Less",
                "GreaterOrEqual", "LessOrEqual", "Cast", "Identity", "Dropout"}


# mutations that leave the recipe valid (an optional position left out, a
# variadic op given one input fewer or more): they must import, the op
# handling the absence
MUST_IMPORT = set("""Clip_11_in_drop Clip_11_in_empty1 Clip_11_in_empty2 Concat_7_in_drop Concat_7_in_extra
Conv_7_in_drop Conv_7_in_empty2 ConvTranspose_7_in_drop ConvTranspose_7_in_empty2 Dropout_7_out_drop
Dropout_7_out_empty1 Dropout_12_in_drop Dropout_12_in_empty1 Dropout_12_in_empty2 Dropout_12_out_drop
Dropout_12_out_empty1 Gemm_11_in_drop Gemm_11_in_empty2 LayerNormalization_17_in_drop
LayerNormalization_17_in_empty2 Max_8_in_drop Max_8_in_extra Mean_8_in_drop Mean_8_in_extra Min_8_in_drop
Min_8_in_extra Pad_11_in_drop Pad_11_in_empty2 Pad_18_in_empty2 Resize_11_in_empty1 Slice_10_in_drop
Slice_10_in_empty4 Squeeze_13_in_drop Squeeze_13_in_empty1 Sum_8_in_drop Sum_8_in_extra""".split())


def op_cases(ops, work, quick):
    """(path, node tag, expected message or None, must import) for part (a)"""
    cases = []
    for op, (lo_set, hi_set, si, so) in sorted(ops.items()):
        points = sorted({max(lo_set, 7), *change_points(si), *change_points(so)})
        points = [k for k in points if max(lo_set, 7) <= k <= hi_set]
        if quick:
            points = points[-1:]
        for k in points:
            rc = recipe(op, k)
            if not check(rc is not None, "%s: no recipe in arity_check.py" % op):
                continue
            ins, outs, at, gin, ini, pre = rc
            for tag, mi, mo in mutations(ins, outs):
                node = helper.make_node(op, mi, mo, name="n_" + op, **at)
                m = model_of(pre + [node], [vi(n, s) for n, s in gin], [vi("y", None)], ini, opset=k)
                d = os.path.join(work, "a_%s_%d_%s" % (op, k, tag))
                os.makedirs(d)
                p = os.path.join(d, "m.onnx")
                onnx.save(m, p)
                cases.append((p, "node 'n_%s' (%s, opset %d)" % (op, op, k), expected(si, so, k, mi, mo),
                              tag == "base" or "%s_%d_%s" % (op, k, tag) in MUST_IMPORT))
    made = {os.path.basename(os.path.dirname(c[0]))[2:] for c in cases}
    check(quick or MUST_IMPORT <= made, "MUST_IMPORT names cases not made: %s" % sorted(MUST_IMPORT - made))
    return cases


def import_batch(batch, paths):
    """{path: (status, message)} from onnx_import_batch, status "ok", "error"
    or what killed it; a model that crashes the process is recorded and the
    rest imported by a new one"""
    res, todo = {}, list(paths)
    while todo:
        r = run([batch] + todo, timeout=900)
        lines = r.stdout.split("\n") if r else []
        for ln in lines:
            f = ln.split("\t")
            if len(f) >= 2 and f[0] in todo and f[1] in ("ok", "bad", "error"):
                res[f[0]] = (f[1], f[3] if f[1] == "error" and len(f) > 3 else "\t".join(f[2:]))
        done = [p for p in todo if p in res]
        if len(done) == len(todo):
            # a leak (or any sanitizer report) shows at exit, after the last line
            check(r.returncode in (0, 1) and "Sanitizer" not in r.stderr,
                  "onnx_import_batch: exit %d: %s" % (r.returncode, r.stderr.strip()[-800:]))
            break
        crashed = todo[len(done)] if r else todo[0]
        tail = (r.stderr.strip()[-600:] if r else "timeout")
        res[crashed] = ("crash", "exit %s: %s" % (r.returncode if r else "-", tail))
        todo = todo[len(done) + 1:]
    return res


def part_a(batch, ops, work, quick, verbose):
    cases = op_cases(ops, work, quick)
    res = import_batch(batch, [c[0] for c in cases])
    for p, node, want, must in cases:
        st, msg = res.get(p, ("missing", ""))
        op = node.split("(")[1].split(",")[0]
        why = None
        if st in ("crash", "missing", "bad"):
            why = "%s: %s" % (st, msg)
        elif st == "ok":
            why = None if want is None else "imported, expected %r" % want
        elif want is not None:
            line = "%s: %s: %s" % (p, node, want)
            why = None if msg == line else "expected %r, got %r" % (line, msg)
        elif "internal" in msg:
            why = "an internal error: " + msg
        elif must and not (": graph output 'y' " in msg and op in NOT_RETURNED):
            why = "a valid node (the recipe%s) does not import: %s" % ("" if p.endswith("_base/m.onnx") else
                                                                       ", an optional position left out", msg)
        elif node not in msg and ": graph output '" not in msg:
            why = "the refusal does not name the node: " + msg
        if why:
            fails.append("%s: %s" % (os.path.basename(os.path.dirname(p)), why))
        if verbose:
            print("%-48s %s" % (os.path.basename(os.path.dirname(p)), why or msg or st))
    return len(cases)


# ------------------------------------------------------------ parts b, c, d

def relu_noout():
    return model_of([helper.make_node("Relu", ["x"], [], name="r")], [vi("x", ["N", 4])], [vi("y", ["N", 4])])


def many_inits(node):
    inits = [c("w%05d" % i, [float(i)]) for i in range(10000)]
    return model_of([node], [vi("x", ["N", 4])], [vi("y", ["N", 4])], inits)


def refused_everywhere(dpc, work, name, model, node, want):
    d = os.path.join(work, name)
    os.makedirs(d)
    p = os.path.join(d, "m.onnx")
    onnx.save(model, p)
    np.save(os.path.join(d, "x.npy"), np.ones((2, 4), np.float32))
    line = "dpc: error: %s: %s: %s" % (p, node, want)
    verbs = {"import": ["-o", os.path.join(d, "o.dp")],
             "run": ["--input", os.path.join(d, "x.npy"), "-o", os.path.join(d, "y.npy")],
             "compile": ["-o", os.path.join(d, "o.dpa")],
             "serve": ["--port", "0"]}
    for verb, args in verbs.items():
        r = run([dpc, verb, p, *args], timeout=60)
        outs = [a for a in args if a.startswith(d) and not a.endswith("x.npy")]
        why = refusal_problem(r, outs, node) or (None if r.stderr.strip() == line else
                                                 "expected %r, got %r" % (line, r.stderr.strip()))
        check(why is None, "%s: dpc %s: %s" % (name, verb, why))
    return p


def run_against(dpc, work, name, x, nodes, inits, refs):
    """dpc run of a graph of input x and outputs refs [(name, array)] against them"""
    d = os.path.join(work, name)
    os.makedirs(d)
    p = os.path.join(d, "m.onnx")
    onnx.save(model_of(nodes, [vi("x", ["N", 3])], [vi(n, None) for n, _ in refs], inits), p)
    np.save(os.path.join(d, "x.npy"), x)
    ys = [os.path.join(d, n + ".npy") for n, _ in refs]
    r = run([dpc, "run", p, "--input", os.path.join(d, "x.npy")] + [a for y in ys for a in ("-o", y)], timeout=600)
    if not check(r is not None and r.returncode == 0, "%s: dpc run: %s" % (name, r.stderr.strip() if r else "timeout")):
        return
    for (n, ref), y in zip(refs, ys):
        got = np.load(y)
        check(got.shape == ref.shape and np.allclose(got, ref, rtol=1e-6, atol=1e-5, equal_nan=True),
              "%s: %s differs from NumPy: %s vs %s" % (name, n, got.ravel()[:8], ref.ravel()[:8]))


def many_readers(dpc, work):
    """Concat of 10 and 12 computed tensors (each a statement's reader), and
    Sum, Mean, Max, Min of 9 to 40, against NumPy"""
    nodes, inits = [], []
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    x[1, 2] = np.nan  # Max and Min propagate it (np.maximum / np.minimum)
    t = []
    for i in range(12):  # t_i = x * (i + 1) - i: twelve computed tensors
        inits += [c("k%d" % i, float(i + 1)), c("o%d" % i, float(i))]
        nodes += [helper.make_node("Mul", ["x", "k%d" % i], ["m%d" % i], name="mul%d" % i),
                  helper.make_node("Sub", ["m%d" % i, "o%d" % i], ["t%d" % i], name="sub%d" % i)]
        t.append(x * np.float32(i + 1) - np.float32(i))
    for model, cases in (("readers_concat", (("cat10", "Concat", 10, np.concatenate(t[:10], 1)),
                                             ("cat12", "Concat", 12, np.concatenate(t, 1)))),
                         ("readers_variadic", (("sum10", "Sum", 10, sum(t[1:10], t[0])),
                                               ("mean11", "Mean", 11, sum(t[1:11], t[0]) / np.float32(11)),
                                               ("max12", "Max", 12, np.maximum.reduce(t)),
                                               ("min9", "Min", 9, np.minimum.reduce(t[:9])),
                                               # each Max step reads its operand 3 times: linear text, not 3^40
                                               ("max40", "Max", 40, np.maximum.reduce([t[i % 12] for i in range(40)])),
                                               ("sum40", "Sum", 40, sum([t[i % 12] for i in range(1, 40)], t[0]))))):
        extra = []
        for name, op, k, ref in cases:
            at = {"axis": 1} if op == "Concat" else {}
            extra.append(helper.make_node(op, ["t%d" % (i % 12) for i in range(k)], [name], name=name, **at))
        run_against(dpc, work, model, x, nodes + extra, inits, [(n, ref.astype(np.float32)) for n, _, _, ref in cases])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dpc")
    ap.add_argument("batch", help="onnx_import_batch (tests/onnx/import_batch.c)")
    ap.add_argument("work")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--write-seeds", help="write three of the models here (the fuzz corpus, tests/corpus/onnx)")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    dpc = os.path.abspath(a.dpc)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    ops = list_ops(dpc)
    check(all(len(v[2]) and len(v[3]) for v in ops.values()), "--list-ops gives each op's inputs and outputs")
    nschema = schema_check(ops)
    na = part_a(os.path.abspath(a.batch), ops, a.work, a.quick, a.v)
    relu = "node 'r' (Relu, opset 13)"
    seeds = {"arity_relu_noout.onnx": refused_everywhere(dpc, a.work, "relu_noout", relu_noout(), relu,
                                                         "takes 1 output, got 0")}
    refused_everywhere(dpc, a.work, "inits_emptyout", many_inits(helper.make_node("Relu", ["x"], [""], name="r")),
                       relu, "output 0 (of 1) is required but empty")
    refused_everywhere(dpc, a.work, "inits_noin", many_inits(helper.make_node("Add", ["x"], ["y"], name="a")),
                       "node 'a' (Add, opset 13)", "takes 2 inputs, got 1")
    m = model_of([helper.make_node("Slice", ["x", "", "e"], ["y"], name="s")], [vi("x", ["N", 4])], [vi("y", None)],
                 [i64("e", [2])])
    seeds["arity_slice_emptyin.onnx"] = refused_everywhere(dpc, a.work, "slice_emptyin", m,
                                                           "node 's' (Slice, opset 13)",
                                                           "input 1 (of 3) is required but empty")
    many_readers(dpc, a.work)
    seeds["arity_concat10.onnx"] = os.path.join(a.work, "readers_concat", "m.onnx")
    if a.write_seeds:
        for fn, p in seeds.items():
            shutil.copyfile(p, os.path.join(a.write_seeds, fn))
    print("%d ops: %d rows checked against ONNX's schemas; %d arity mutations imported or refused as required; "
          "the Relu without output, 10,000 initializers, Concat/Sum/Mean/Max/Min of 9 to 40 computed tensors"
          % (len(ops), nschema, na))
    if fails:
        print("FAILED (%d):" % len(fails))
        for f in fails:
            print("  " + f)
        return 1
    shutil.rmtree(a.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
