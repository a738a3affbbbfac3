#!/usr/bin/env python3
"""What a crafted ONNX file may cost dpc's importer, and what its strings
may change (issue 30, items 3, 4, 5 and 11): each case must be refused
with a clear line naming the node, or import (and compute the ONNX
answer), within a bounded time and peak memory.

  budget_check.py DPC WORKDIR [--write-seeds CORPUS_DIR] [-v]

  names       16k initializers whose names share their first 48 bytes (the
              identifier's cut): imported in seconds (a suffix probed from
              2 each time took 94 s)
  fold_*      each folding op asked for more than the import's budget of
              folded elements (2^26 + 4 per element of the model's own
              tensors): broadcasting two ConstantOfShape, Tile, Gather,
              Concat, Where, Expand, ConstantOfShape and Range nodes adding
              up, copies (Unsqueeze) adding up: refused by node, before
              allocating; of four 2^26-element int64 ConstantOfShape nodes
              (2 GiB before) the second is refused, under 768 MiB; Concat
              and Gather of an empty [2^40, 1, 0] constant import at once
              (they looped over its 2^40 outer rows)
  free        four unused 64 MiB constants: each freed when made, so the
              peak stays near one
  int8        a 64 MiB INT8 initializer no node reads: not widened to int64
              (763 MiB before)
  attr_*      NaN and infinite float attributes, with graph inputs named
              nan and inf: refused by node (a bare nan in the .dp read the
              input); a finite attribute and a NaN constant beside an input
              named nan compute ONNX's answer
  int_*       int64 folding that overflows (Add, Mul, Neg, Pow, Div by 0,
              Range's limit - start) refused by node; int64 Range and
              arithmetic past 2^53 computed exactly (through double they
              were undefined behaviour or wrong)

Peak memory is the child's ru_maxrss (os.wait4); under ASan its quarantine
is turned off for the child so that freed memory is given back."""
import argparse
import os
import signal
import subprocess
import sys
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)
MIB = 1024 * 1024


def model_of(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="budget_check.py")
    m.ir_version = 8
    return m


def vi(name, shape, dt=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dt, shape)


def i64(name, vals):
    return numpy_helper.from_array(np.array(vals, dtype=np.int64), name)


def cos(out, shape_name, value=None, name=None):
    """ConstantOfShape(shape_name) -> out (value: a one-element TensorProto)"""
    kw = {"value": value} if value is not None else {}
    return helper.make_node("ConstantOfShape", [shape_name], [out], name=name or out, **kw)


def relu_model(extra_nodes, inits, opset=13):
    """x[N,4] -> Relu -> y, beside the nodes under test (their results unread)"""
    return model_of([helper.make_node("Relu", ["x"], ["y"], name="relu")] + extra_nodes, [vi("x", ["N", 4])],
                    [vi("y", ["N", 4])], inits, opset)


FLOAT1 = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])
INT1 = helper.make_tensor("v", TensorProto.INT64, [1], [7])
BOOL1 = helper.make_tensor("v", TensorProto.BOOL, [1], [True])


# ------------------------------------------------------------- running dpc

class Run:
    def __init__(self, rc, err, secs, rss_mib):
        self.rc, self.err, self.secs, self.rss = rc, err, secs, rss_mib


def is_asan(dpc):
    with open(dpc, "rb") as f:
        return b"__asan_init" in f.read()


# dpc is started by this small launcher, not by the test itself: a child
# forked from a big process counts that process's pages in its ru_maxrss
LAUNCH = """import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, st, ru = os.wait4(pid, 0)
sys.stdout.write("%d %d\\n" % (ru.ru_maxrss, os.waitstatus_to_exitcode(st)))
"""


def run(dpc, args, timeout):
    """dpc ARGS: exit code (-SIG when killed, None on time-out), stderr,
    seconds and dpc's own peak RSS in MiB"""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0").lstrip(":")
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-S", "-c", LAUNCH, dpc] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return Run(None, err.decode("utf-8", "replace"), time.monotonic() - t0, 0.0)
    secs = time.monotonic() - t0
    try:
        rss_kib, rc = (int(w) for w in out.decode().split())
    except ValueError:
        return Run(-999, err.decode("utf-8", "replace") + out.decode("utf-8", "replace"), secs, 0.0)
    return Run(rc, err.decode("utf-8", "replace"), secs, rss_kib / 1024.0)


class Checker:
    def __init__(self, dpc, work, verbose):
        self.dpc, self.work, self.verbose = dpc, work, verbose
        self.failures, self.count = [], 0
        # dpc's peak importing a tiny model (its shared libraries alone are
        # about 250 MiB resident here): the bounds are above it
        r = run(dpc, ["import", self.save("tiny", relu_model([], [])), "-o", self.path("tiny.dp")], 60)
        if r.rc != 0:
            raise SystemExit(f"dpc import of a tiny model failed: {r.err}")
        self.base = r.rss
        if verbose:
            print(f"  baseline: {self.base:.0f} MiB", flush=True)

    def path(self, name):
        return os.path.join(self.work, name)

    def save(self, name, m):
        p = self.path(name + ".onnx")
        with open(p, "wb") as f:
            f.write(m.SerializeToString())
        return p

    def fail(self, name, why):
        self.failures.append(f"{name}: {why}")
        print(f"FAIL {name}: {why}", flush=True)

    def note(self, name, r):
        self.count += 1
        if self.verbose:
            line = r.err.strip().splitlines()[-1] if r.err.strip() else ""
            print(f"  {name}: rc {r.rc}, {r.secs:.2f} s, {r.rss:.0f} MiB  {line[:200]}", flush=True)

    def imported(self, name, m, timeout=60, max_rss=None, max_secs=None):
        """dpc import must succeed (within max_secs, max_rss MiB)"""
        p = self.save(name, m)
        out = self.path(name + ".dp")
        r = run(self.dpc, ["import", p, "-o", out], timeout)
        self.note(name, r)
        if r.rc != 0:
            return self.fail(name, f"import exit {r.rc} after {r.secs:.1f} s: {r.err.strip()[-300:]}")
        if max_secs is not None and r.secs > max_secs:
            return self.fail(name, f"import took {r.secs:.1f} s (at most {max_secs})")
        if max_rss is not None and r.rss - self.base > max_rss:
            return self.fail(name, f"import peaked {r.rss - self.base:.0f} MiB above the baseline (at most {max_rss})")
        return r

    def refused(self, name, m, node, words, timeout=60, max_rss=None):
        """dpc import must exit 1, one line naming node and holding each of words, writing nothing"""
        p = self.save(name, m)
        out = self.path(name + ".dp")
        if os.path.exists(out):
            os.remove(out)
        r = run(self.dpc, ["import", p, "-o", out], timeout)
        self.note(name, r)
        lines = r.err.strip().splitlines()
        if r.rc != 1:
            return self.fail(name, f"exit {r.rc} (1 expected) after {r.secs:.1f} s: {r.err.strip()[-300:]}")
        if len(lines) != 1 or not lines[0].startswith("dpc: error: "):
            return self.fail(name, f"not one error line: {r.err[-400:]!r}")
        if f"node '{node}'" not in lines[0] or any(w not in lines[0] for w in words):
            return self.fail(name, f"the error does not name node '{node}' and say {words}: {lines[0]}")
        if os.path.exists(out):
            return self.fail(name, "an output was written")
        if max_rss is not None and r.rss - self.base > max_rss:
            return self.fail(name, f"peaked {r.rss - self.base:.0f} MiB above the baseline (at most {max_rss})")
        return r

    def computed(self, name, m, inputs, expect):
        """dpc run of the .onnx: each output equal to expect (NaN where NaN)"""
        p = self.save(name, m)
        args = ["run", p]
        for i, x in enumerate(inputs):
            xp = self.path(f"{name}_x{i}.npy")
            np.save(xp, x)
            args += ["--input", xp]
        outs = [self.path(f"{name}_y{i}.npy") for i in range(len(expect))]
        for o in outs:
            args += ["-o", o]
            if os.path.exists(o):
                os.remove(o)
        r = run(self.dpc, args, 300)
        self.note(name, r)
        if r.rc != 0:
            return self.fail(name, f"run exit {r.rc}: {r.err.strip()[-300:]}")
        for o, e in zip(outs, expect):
            y = np.load(o)
            if y.shape != e.shape or not np.allclose(y, e, rtol=1e-6, atol=0, equal_nan=True) or \
                    not np.array_equal(np.isnan(y), np.isnan(e)):
                return self.fail(name, f"{os.path.basename(o)} = {y.ravel()[:6]}, ONNX gives {e.ravel()[:6]}")
        return r


# ------------------------------------------------------------------ cases

def names_model(n=16384):
    """x[N,1] + w_0 + w_1 + ...: n initializers whose names share 48 bytes"""
    base = "p" * 48
    inits, nodes, prev = [], [], "x"
    for i in range(n):
        w = f"{base}.{i}"
        inits.append(numpy_helper.from_array(np.full((1,), 1.0, np.float32), w))
        nodes.append(helper.make_node("Add", [prev, w], [f"s{i}"], name=f"a{i}"))
        prev = f"s{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    return model_of(nodes, [vi("x", ["N", 1])], [vi("y", ["N", 1])], inits)


def check_names(c):
    r = c.imported("names", names_model(), timeout=120, max_secs=15)
    if r:
        with open(c.path("names.dp")) as f:
            dp = f.read()
        want = "p" * 48 + "_16384 = Parameter"
        if want not in dp:
            c.fail("names", f"no member {want!r} in the .dp")


def fold_cases():
    """(name, model, node refused): each folding op over the budget"""
    E14 = [2**14]
    out = []
    # binary: [2^14, 1] + [1, 2^14] -> 2^28
    out.append(("fold_broadcast", relu_model(
        [cos("a", "sa", FLOAT1), cos("b", "sb", FLOAT1), helper.make_node("Add", ["a", "b"], ["c"], name="bcast")],
        [i64("sa", [2**14, 1]), i64("sb", [1, 2**14])]), "bcast"))
    # Tile: 2^20 x 64
    out.append(("fold_tile", relu_model(
        [cos("a", "sa", FLOAT1), helper.make_node("Tile", ["a", "rep"], ["c"], name="tile")],
        [i64("sa", [2**20]), i64("rep", [64])]), "tile"))
    # Gather: a [1, 2^14] row gathered 2^14 times
    out.append(("fold_gather", relu_model(
        [cos("a", "sa", FLOAT1), cos("ix", "si", helper.make_tensor("v", TensorProto.INT64, [1], [0])),
         helper.make_node("Gather", ["a", "ix"], ["c"], name="gather", axis=0)],
        [i64("sa", [1, 2**14]), i64("si", E14)]), "gather"))
    # Concat: 64 copies of 2^21
    out.append(("fold_concat", relu_model(
        [cos("a", "sa", FLOAT1), helper.make_node("Concat", ["a"] * 64, ["c"], name="concat", axis=0)],
        [i64("sa", [2**21])]), "concat"))
    # Where: a [2^14, 1] condition, a [1, 2^14] branch
    out.append(("fold_where", relu_model(
        [cos("k", "sk", BOOL1), cos("a", "sa", FLOAT1),
         helper.make_node("Where", ["k", "a", "z"], ["c"], name="where")],
        [i64("sk", [2**14, 1]), i64("sa", [1, 2**14]),
         numpy_helper.from_array(np.array(0.0, np.float32), "z")]), "where"))
    # Expand: a scalar to [2^14, 2^14]
    out.append(("fold_expand", relu_model(
        [helper.make_node("Expand", ["one", "sh"], ["c"], name="expand")],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one"), i64("sh", [2**14, 2**14])]), "expand"))
    # (ConstantOfShape nodes adding up: fold_four, check_fold)
    # Range: five of 2^24 (each at the per-node cap)
    out.append(("fold_range", relu_model(
        [helper.make_node("Range", ["r0", "rl", "r1"], [f"g{i}"], name=f"g{i}") for i in range(5)],
        [i64("r0", 0), i64("rl", 2**24), i64("r1", 1)], opset=13), "g4"))
    # copies add up: a 2^24 constant unsqueezed again and again
    out.append(("fold_copies", relu_model(
        [cos("u0", "s", FLOAT1)] +
        [helper.make_node("Unsqueeze", [f"u{i}", "ax"], [f"u{i + 1}"], name=f"u{i + 1}") for i in range(5)],
        [i64("s", [2**24]), i64("ax", [0])]), "u4"))
    return out


def check_fold(c):
    for name, m, node in fold_cases():
        c.refused(name, m, node, ["folding this node would make", "elements; dpc folds at most"], timeout=60)
    # the case: four 2^26-element int64 constants in a few hundred bytes
    m = relu_model([cos(f"k{i}", "s", INT1) for i in range(4)], [i64("s", [2**13, 2**13])])
    if len(m.SerializeToString()) > 400:
        c.fail("fold_four", "the model is not small")
    c.refused("fold_four", m, "k1", ["folds at most"], max_rss=768)
    # empty constants of a huge dim: the result is empty, so no loop over 2^40 outer rows
    e = helper.make_tensor("e", TensorProto.FLOAT, [2**40, 1, 0], vals=b"", raw=True)
    for op, kw in [("Concat", {"axis": 2}), ("Gather", {"axis": 1})]:
        ins = ["e", "e"] if op == "Concat" else ["e", "i0"]
        c.imported(f"fold_empty_{op}", relu_model([helper.make_node(op, ins, ["c"], name="op", **kw)],
                                                  [e, i64("i0", [0])]), timeout=60, max_secs=10)


def check_free(c):
    """four unused 2^23 int64 constants (64 MiB each), within the budget:
    each freed as soon as it is made (kept, they peaked 230 MiB above)"""
    m = relu_model([cos(f"k{i}", "s", INT1) for i in range(4)], [i64("s", [2**23])])
    c.imported("free", m, max_rss=160)


def check_int8(c):
    """a 64 MiB INT8 initializer that no node reads"""
    big = numpy_helper.from_array(np.ones(64 * MIB, np.int8), "unused")
    m = relu_model([], [big])
    c.imported("int8", m, max_rss=256)


ATTRS = [  # (op, attributes, input named so, opset)
    ("HardSigmoid", {"alpha": float("nan"), "beta": 0.5}, "nan", 13),
    ("HardSigmoid", {"alpha": 0.2, "beta": float("inf")}, "inf", 13),
    ("LeakyRelu", {"alpha": float("nan")}, "nan", 13),
    ("Elu", {"alpha": float("inf")}, "inf", 13),
    ("Selu", {"gamma": float("-inf")}, "inf", 13),
    ("Celu", {"alpha": float("nan")}, "nan", 13),
    ("ThresholdedRelu", {"alpha": float("nan")}, "nan", 13),
    ("Shrink", {"lambd": float("inf")}, "inf", 13),
]


def attr_model(op, attrs, other, opset):
    """x -> op(attrs) -> h; y = h + other (a graph input named nan or inf)"""
    nodes = [helper.make_node(op, ["x"], ["h"], name="act", **attrs),
             helper.make_node("Add", ["h", other], ["y"], name="add")]
    return model_of(nodes, [vi("x", ["N", 4]), vi(other, ["N", 4])], [vi("y", ["N", 4])], opset=opset)


def check_attrs(c):
    for op, attrs, other, opset in ATTRS:
        c.refused(f"attr_{op}_{other}", attr_model(op, attrs, other, opset), "act", ["NaN or infinite"])
    # LayerNormalization's epsilon (opset 17)
    ln = model_of([helper.make_node("LayerNormalization", ["x", "g", "b"], ["h"], name="act", epsilon=float("inf")),
                   helper.make_node("Add", ["h", "inf"], ["y"], name="add")],
                  [vi("x", ["N", 4]), vi("inf", ["N", 4])], [vi("y", ["N", 4])],
                  [numpy_helper.from_array(np.ones(4, np.float32), "g"),
                   numpy_helper.from_array(np.zeros(4, np.float32), "b")], opset=17)
    c.refused("attr_layernorm_inf", ln, "act", ["NaN or infinite"])
    # finite attributes beside an input named nan, and a NaN constant: ONNX's answer
    x = np.array([[-3.0, -0.5, 0.5, 3.0], [1.0, 2.0, -2.0, 0.0]], np.float32)
    other = np.full((2, 4), 10.0, np.float32)
    nodes = [helper.make_node("HardSigmoid", ["x"], ["h"], name="act", alpha=0.3, beta=0.4),
             helper.make_node("Add", ["h", "nan"], ["y"], name="add"),
             helper.make_node("Mul", ["x", "c"], ["z"], name="mulnan")]
    m = model_of(nodes, [vi("x", ["N", 4]), vi("nan", ["N", 4])], [vi("y", ["N", 4]), vi("z", ["N", 4])],
                 [numpy_helper.from_array(np.array(float("nan"), np.float32), "c")])
    y = np.clip(np.float32(0.3) * x + np.float32(0.4), 0, 1) + other
    c.computed("attr_finite", m, [x, other], [y.astype(np.float32), np.full((2, 4), np.nan, np.float32)])


def int_fold_model(op, a, b, node="op"):
    """an int64 fold of a and b, its result cast and added to x"""
    ins = ["a"] + (["b"] if b is not None else [])
    inits = [i64("a", a)] + ([i64("b", b)] if b is not None else [])
    nodes = [helper.make_node(op, ins, ["r"], name=node),
             helper.make_node("Cast", ["r"], ["rf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "rf"], ["y"], name="add")]
    return model_of(nodes, [vi("x", ["N", 1])], [vi("y", ["N", 1])], inits)


def range_span_model():
    """Range(INT64_MIN, INT64_MAX, INT64_MAX): limit - start overflows"""
    return model_of([helper.make_node("Range", ["a", "b", "d"], ["r"], name="range"),
                     helper.make_node("Cast", ["r"], ["rf"], name="cast", to=TensorProto.FLOAT),
                     helper.make_node("Add", ["x", "rf"], ["y"], name="add")],
                    [vi("x", ["N", 3])], [vi("y", ["N", 3])],
                    [i64("a", I64_MIN), i64("b", I64_MAX), i64("d", I64_MAX)])


def check_ints(c):
    for op, a, b in [("Add", [I64_MAX], [1]), ("Sub", [I64_MIN], [1]), ("Mul", [2**62], [4]), ("Neg", [I64_MIN], None),
                     ("Abs", [I64_MIN], None), ("Pow", [2], [63]), ("Div", [7], [0]), ("Div", [I64_MIN], [-1])]:
        c.refused(f"int_{op}_{a[0]}", int_fold_model(op, a, b), "op", ["overflows int64"])
    c.refused("int_range_span", range_span_model(), "range", ["overflows int64"])
    # Split's sizes whose sum wraps (signed overflow: UBSan aborted)
    for name, sizes, opset, words in [("split_sum_wraps", [I64_MAX, I64_MAX, 6], 13, ["do not sum"])]:
        ins = ["x"] + (["sp"] if opset >= 13 else [])
        kw = {} if opset >= 13 else {"split": sizes}
        outs = ["o%d" % i for i in range(3)]
        m = model_of([helper.make_node("Split", ins, outs, name="split", axis=1, **kw)],
                     [vi("x", ["N", 4])], [vi(o, ["N", 1]) for o in outs],
                     [i64("sp", sizes)] if opset >= 13 else [], opset)
        c.refused(name, m, "split", words)
    # exact: Range(2^63 - 101, 0, -2^62) = [2^63 - 101, 2^62 - 101]; (2^53 + 1) - 2^53 = 1;
    # an INT8 initializer read by a node, converted then
    s = I64_MAX - 100
    nodes = [helper.make_node("Range", ["a", "b", "d"], ["r"], name="range"),
             helper.make_node("Sub", ["p", "q"], ["one"], name="sub"),
             helper.make_node("Concat", ["r", "one"], ["v"], name="cat", axis=0),
             helper.make_node("Cast", ["v"], ["vf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Cast", ["w8"], ["wf"], name="cast8", to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "vf"], ["y0"], name="add"),
             helper.make_node("Add", ["y0", "wf"], ["y"], name="add8")]
    m = model_of(nodes, [vi("x", ["N", 3])], [vi("y", ["N", 3])],
                 [i64("a", s), i64("b", 0), i64("d", -(2**62)), i64("p", [2**53 + 1]), i64("q", [2**53]),
                  numpy_helper.from_array(np.array([-128, 5, 127], np.int8), "w8")])
    x = np.zeros((2, 3), np.float32)
    want = np.array([float(np.float32(s)) - 128, float(np.float32(s - 2**62)) + 5, 1 + 127], np.float32)
    c.computed("int_exact", m, [x], [x + want])


def write_seeds(corpus):
    """the fuzz target's seeds (tests/corpus/onnx): small files that reach
    the budget, the attribute refusal and Range's overflow check"""
    os.makedirs(corpus, exist_ok=True)
    folds = {n: m for n, m, _ in fold_cases()}
    seeds = {"fold_broadcast": folds["fold_broadcast"],
             "attr_nan_capture": attr_model(*ATTRS[0]), "range_overflow": range_span_model()}
    for name, m in seeds.items():
        with open(os.path.join(corpus, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dpc")
    ap.add_argument("work")
    ap.add_argument("--write-seeds")
    ap.add_argument("--only", help="run the groups whose name starts so (names, fold, free, int8, attr, int)")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    if a.write_seeds:
        write_seeds(a.write_seeds)
        return 0
    os.makedirs(a.work, exist_ok=True)
    c = Checker(os.path.abspath(a.dpc), a.work, a.v)
    t0 = time.monotonic()
    groups = [("names", check_names), ("fold", check_fold), ("free", check_free), ("int8", check_int8),
              ("attr", check_attrs), ("int", check_ints)]
    for gname, fn in groups:
        if a.only and not gname.startswith(a.only):
            continue
        t1 = time.monotonic()
        fn(c)
        print(f"{gname}: {time.monotonic() - t1:.1f} s", flush=True)
    print(f"{c.count} cases, {len(c.failures)} failed, {time.monotonic() - t0:.1f} s"
          f"{' (ASan build)' if is_asan(c.dpc) else ''}")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
