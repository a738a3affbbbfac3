#!/usr/bin/python3
"""gen_cases — write the per-op differential test models of tests/ops/.

    gen_cases.py [-o DIR] [--verify] [--check]

Writes DIR/<family>/<case>.dp (default DIR: tests/ops/cases next to this
script), a handful of small models per op family, every builtin module and
every builtin function of shared/spec/dsl.md in several variants.  Shapes
and arguments are drawn from a random.Random seeded per family, so the
output is deterministic: the cases are committed, and `--check` (run by
CTest as ops_gen_uptodate) regenerates them into a temporary directory and
fails if they differ from the committed ones.

Most cases hold several ops (one forward input and one output each), so that
one compile covers many variants.  Each case starts with a header:

    # <family>/<case>: what it covers
    #@ kw NAME=VALUE          (optional, repeatable) a `dpc run --kw` value
    #@ single-device REASON   (optional) skip the --devices cpu,cpu check: the
                              model mixes samples (a reduction or a cat over the
                              batch dim, the batch name as a number, ...), so a
                              per-replica result legitimately differs
    #@ nonfinite              (optional) check_ops.py puts NaN, +inf and -inf
                              among the float inputs (a few per sample), and the
                              outputs must have them where PyTorch has them
    #@ env NAME=VALUE         (optional, repeatable) `dpc run`'s environment for
                              the case (the conv path whose NaN the case checks)

`--verify` builds every generated model with the PyTorch reference
(tests/ref/dp2torch.py) and runs it at batch 2, so an invalid draw (e.g. a
pool window PyTorch rejects) is caught when generating.  Conv and pool draws
are validated against torch while drawing and redrawn when torch rejects them.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import random
import shutil
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "ref")
DEFAULT_OUT = os.path.join(HERE, "cases")

_torch = None


def torch():
    """torch, imported lazily (only the conv/pool draws and --verify need it)."""
    global _torch
    if _torch is None:
        import torch as t
        t.set_num_threads(1)
        _torch = t
    return _torch


# ---------------------------------------------------------------------------
# Rendering helpers
# ---------------------------------------------------------------------------

def r(v) -> str:
    """A Python value as `.dp` source."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "None"
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, tuple):
        return "(" + ", ".join(r(x) for x in v) + ")"
    if isinstance(v, list):
        return "[" + ", ".join(r(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def call(name: str, pos=(), kw=None) -> str:
    parts = [r(p) for p in pos] + ["%s=%s" % (k, r(v)) for k, v in (kw or {}).items()]
    return "%s(%s)" % (name, ", ".join(parts))


def shape(dims) -> str:
    return "[" + ", ".join(["N"] + [str(d) for d in dims]) + "]"


class Case:
    """One generated `.dp` model."""

    def __init__(self, family: str, name: str, doc: str):
        self.family, self.name, self.doc = family, name, doc
        self.members: list[str] = []
        self.params: list[str] = []
        self.body: list[str] = []
        self.rets: list[str] = []
        self.kw: list[str] = []
        self.single_device: str | None = None
        self.nonfinite = False    # NaN and +-inf among the inputs (check_ops.py)
        self.env: list[str] = []  # NAME=VALUE for dpc run
        self.ctor = ""            # constructor parameter list of the entry module
        self.model_args = ""      # arguments on the model line
        self.extra = ""           # extra module definitions placed before the entry
        self.dataparallel = True
        self._n: dict[str, int] = {}

    def fresh(self, prefix: str) -> str:
        self._n[prefix] = self._n.get(prefix, 0) + 1
        return "%s%d" % (prefix, self._n[prefix])

    def inp(self, dims, dtype: str = "", name: str | None = None) -> str:
        name = name or self.fresh("x")
        self.params.append("%s: %s%s" % (name, dtype, shape(dims)))
        return name

    def member(self, ctor: str, prefix: str = "m") -> str:
        name = self.fresh(prefix)
        self.members.append("%s = %s" % (name, ctor))
        return name

    def let(self, expr: str, prefix: str = "h") -> str:
        name = self.fresh(prefix)
        self.body.append("%s = %s" % (name, expr))
        return name

    def ret(self, expr: str, comment: str = ""):
        self.rets.append((expr, comment))

    def text(self) -> str:
        cls = "".join(p.capitalize() for p in (self.family + "_" + self.name).replace("-", "_").split("_"))
        cls = "".join(c for c in cls if c.isalnum())
        out = ["# %s/%s: %s" % (self.family, self.name, self.doc.strip().split("\n")[0])]
        for line in self.doc.strip().split("\n")[1:]:
            out.append("# " + line.strip())
        out.append("# generated by tests/ops/gen_cases.py; edit the generator, not this file")
        for k in self.kw:
            out.append("#@ kw " + k)
        if self.single_device:
            out.append("#@ single-device " + self.single_device)
        if self.nonfinite:
            out.append("#@ nonfinite")
        for e in self.env:
            out.append("#@ env " + e)
        out.append("")
        if self.extra:
            out.append(self.extra.strip("\n"))
            out.append("")
        out.append("module %s%s {" % (cls, "(%s)" % self.ctor if self.ctor else ""))
        for m in self.members:
            out.append("    " + m)
        if self.members:
            out.append("")
        out.append("    forward(%s) {" % ", ".join(self.params))
        for b in self.body:
            out.append("        " + b)
        assert self.rets, self.name
        for i, (e, cm) in enumerate(self.rets):
            if cm and len(self.rets) > 1:
                out.append("        # output %d: %s" % (i, cm))
            elif cm:
                out.append("        # %s" % cm)
        out.append("        return " + ", ".join(e for e, _ in self.rets))
        out.append("    }")
        out.append("}")
        if self.dataparallel:
            out.append("model = DataParallel(%s(%s))" % (cls, self.model_args))
        else:
            out.append("model = %s(%s)" % (cls, self.model_args))
        return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# conv: Conv2d
# ---------------------------------------------------------------------------

CONV_ARGS = ["in_channels", "out_channels", "kernel_size", "stride", "padding",
             "dilation", "groups", "bias"]


def _valid_conv(kw, cin, H, W) -> bool:
    t = torch()
    try:
        m = t.nn.Conv2d(**kw)
        y = m(t.zeros(1, cin, H, W))
        return y.numel() > 0
    except Exception:
        return False


def _pair(R, lo, hi, tuple_p):
    a = R.randint(lo, hi)
    if R.random() < tuple_p:
        return (a, R.randint(lo, hi))
    return a


def draw_conv(R, kind):
    """(ctor text, cin, H, W, description) for a Conv2d variant."""
    for _ in range(1000):
        g = 1
        cin, cout = R.randint(1, 4), R.randint(1, 5)
        H, W = R.randint(4, 10), R.randint(4, 10)
        kw = {}
        if kind == "basic":
            kw["kernel_size"] = R.randint(1, 5)
        elif kind == "stride_pad":
            kw["kernel_size"] = R.randint(2, 5)
            kw["stride"] = R.randint(2, 3)
            kw["padding"] = R.randint(1, 3)
        elif kind == "tuple":
            kw["kernel_size"] = (R.randint(1, 4), R.randint(1, 5))
            kw["stride"] = (R.randint(1, 3), R.randint(1, 3))
            kw["padding"] = (R.randint(0, 2), R.randint(0, 2))
            if R.random() < 0.5:
                kw["dilation"] = (R.randint(1, 2), R.randint(1, 3))
        elif kind == "dilation":
            kw["kernel_size"] = R.randint(2, 3)
            kw["dilation"] = R.randint(2, 3)
            kw["padding"] = R.randint(0, 2)
        elif kind == "groups":
            g = R.choice([2, 3])
            cin, cout = g * R.randint(1, 2), g * R.randint(1, 3)
            kw["kernel_size"] = R.randint(1, 3)
            kw["groups"] = g
            kw["padding"] = R.randint(0, 1)
        elif kind == "depthwise":
            cin = R.randint(2, 4)
            cout = cin * R.randint(1, 2)
            kw["kernel_size"] = 3
            kw["padding"] = 1
            kw["groups"] = cin
        elif kind == "nobias":
            kw["kernel_size"] = R.randint(1, 4)
            kw["stride"] = R.randint(1, 2)
            kw["bias"] = False
        elif kind == "same":
            kw["kernel_size"] = R.choice([R.randint(1, 5), (R.randint(1, 4), R.randint(1, 5))])
            kw["padding"] = "same"
            if R.random() < 0.5:
                kw["dilation"] = R.randint(1, 2)
        elif kind == "valid":
            kw["kernel_size"] = R.randint(1, 4)
            kw["padding"] = "valid"
        elif kind == "positional":
            k = R.randint(1, 3)
            g = R.choice([1, 2])
            cin, cout = g * R.randint(1, 2), g * R.randint(1, 2)
            kw.update(kernel_size=k, stride=R.randint(1, 2), padding=R.randint(0, 1),
                      dilation=R.randint(1, 2), groups=g, bias=R.random() < 0.5)
        elif kind == "full":  # the kernel covers the whole input: 1x1 output
            kw["kernel_size"] = (H, W)
        elif kind == "row":   # a 1 x k kernel on a tall-thin input
            H = R.randint(1, 3)
            kw["kernel_size"] = (1, R.randint(2, 4))
            kw["stride"] = (1, 2)
        else:
            raise ValueError(kind)
        full = dict(in_channels=cin, out_channels=cout, **kw)
        if not _valid_conv(full, cin, H, W):
            continue
        if kind == "positional":
            txt = call("Conv2d", [full[a] for a in CONV_ARGS])
        else:
            pos = [cin, cout]
            rest = dict(kw)
            if R.random() < 0.5:
                pos.append(rest.pop("kernel_size"))
            txt = call("Conv2d", pos, rest)
        return txt, cin, H, W
    raise RuntimeError("no valid conv for " + kind)


def _valid_conv1d(kw, cin, L) -> bool:
    t = torch()
    try:
        m = t.nn.Conv1d(**kw)
        y = m(t.zeros(1, cin, L))
        return y.numel() > 0
    except Exception:
        return False


def draw_conv1d(R, kind):
    """(ctor text, cin, L) for a Conv1d variant."""
    for _ in range(1000):
        cin, cout, L = R.randint(1, 4), R.randint(1, 5), R.randint(4, 16)
        kw = {"kernel_size": R.randint(1, 5)}
        if kind == "stride_pad":
            kw.update(stride=R.randint(2, 3), padding=R.randint(1, 3))
        elif kind == "dilation":
            kw.update(dilation=R.randint(2, 3), padding=R.randint(0, 2))
        elif kind == "groups":
            g = R.choice([2, 3])
            cin, cout = g * R.randint(1, 2), g * R.randint(1, 3)
            kw.update(groups=g, padding=R.randint(0, 1))
        elif kind == "depthwise":
            cin = R.randint(2, 4)
            cout = cin * R.randint(1, 2)
            kw.update(kernel_size=3, padding=1, groups=cin, bias=False)
        elif kind == "same":
            kw.update(padding="same", dilation=R.randint(1, 2))
        elif kind == "valid":
            kw.update(padding="valid", stride=R.randint(1, 2))
        elif kind == "tuple":  # 1-tuples, as _single accepts them
            kw.update(kernel_size=(R.randint(1, 4),), stride=(R.randint(1, 2),), padding=(R.randint(0, 2),))
        elif kind != "basic":
            raise ValueError(kind)
        full = dict(in_channels=cin, out_channels=cout, **kw)
        if not _valid_conv1d(full, cin, L):
            continue
        pos = [cin, cout]
        rest = dict(kw)
        if R.random() < 0.5:
            pos.append(rest.pop("kernel_size"))
        return call("Conv1d", pos, rest), cin, L
    raise RuntimeError("no valid conv1d for " + kind)


def gen_conv1d(R):
    """Conv1d cases (input [N, C, L]), drawn after the Conv2d ones so that
    those stay as they were."""
    kinds = ["basic", "stride_pad", "dilation", "groups", "depthwise", "same", "valid", "tuple"]
    cases = []
    order = kinds * 2
    R.shuffle(order)
    per = 4
    for i in range(0, len(order), per):
        chunk = order[i:i + per]
        c = Case("conv", "conv1d_%d" % (i // per), "Conv1d variants: " + ", ".join(chunk))
        for kind in chunk:
            txt, cin, L = draw_conv1d(R, kind)
            m = c.member(txt, "conv")
            c.ret("%s(%s)" % (m, c.inp([cin, L])), kind)
        cases.append(c)
    c = Case("conv", "conv1d_stack", "Conv1d feeding Conv1d through relu, an even kernel with "
                                     "padding=\"same\" (the extra column after), and a head")
    c.members += ["a = Conv1d(3, 8, 5, stride=2, padding=2)",
                  "b = Conv1d(8, 8, 4, padding=\"same\", groups=4, bias=false)",
                  "fc = Linear(8 * 10, 6)"]
    c.params.append("x: [N, 3, 20]")
    c.body.append("y = relu(b(relu(a(x))))")
    c.ret("fc(flatten(y, 1))", "conv1d -> conv1d -> linear")
    c.ret("y", "the conv1d stack")
    cases.append(c)
    return cases


def gen_conv(R):
    kinds = ["basic", "stride_pad", "tuple", "dilation", "groups", "depthwise", "nobias",
             "same", "valid", "positional", "full", "row"]
    cases = []
    order = kinds * 2
    R.shuffle(order)
    per = 4
    for i in range(0, len(order), per):
        chunk = order[i:i + per]
        c = Case("conv", "conv%d" % (i // per), "Conv2d variants: " + ", ".join(chunk))
        for kind in chunk:
            txt, cin, H, W = draw_conv(R, kind)
            m = c.member(txt, "conv")
            x = c.inp([cin, H, W])
            c.ret("%s(%s)" % (m, x), kind)
        cases.append(c)
    # a conv stack: conv output feeding another conv, with a channel-changing 1x1
    c = Case("conv", "stack", "Conv2d feeding Conv2d: stride 2 then 1x1 then padded dilated conv")
    c.members += ["a = Conv2d(3, 6, 3, stride=2, padding=1)",
                  "b = Conv2d(6, 4, 1, bias=false)",
                  "d = Conv2d(4, 5, (3, 2), padding=(2, 1), dilation=(2, 1))"]
    c.params.append("x: [N, 3, 11, 9]")
    c.body.append("y = b(a(x))")
    c.ret("d(y)")
    c.ret("y")
    cases.append(c)

    c = Case("conv", "edges", "Conv2d edge cases: padding=\"same\" with even kernels (asymmetric "
                              "padding) and with dilation, stride larger than the kernel, depthwise "
                              "with groups = in = out, padding larger than the kernel")
    specs = [
        ("Conv2d(2, 3, 3, padding=\"same\", dilation=2)", [2, 7, 6], "same, dilation 2"),
        ("Conv2d(2, 2, (1, 5), padding=\"same\", bias=false)", [2, 5, 8], "same, (1, 5) kernel"),
        ("Conv2d(3, 3, (3, 1), padding=\"same\", dilation=(2, 3), groups=3)", [3, 6, 6],
         "same, dilated, depthwise"),
        ("Conv2d(2, 4, 2, stride=3)", [2, 9, 8], "stride > kernel"),
        ("Conv2d(4, 4, 3, padding=1, groups=4, bias=false)", [4, 5, 5], "depthwise in = out"),
        ("Conv2d(1, 2, 2, padding=3)", [1, 3, 4], "padding > kernel"),
    ]
    for ctor, dims, doc in specs:
        m = c.member(ctor, "conv")
        c.ret("%s(%s)" % (m, c.inp(dims)), doc)
    cases.append(c)

    c = Case("conv", "same_even", "padding=\"same\" with an even effective kernel: PyTorch pads "
                                  "the extra row/column at the bottom/right")
    specs = [
        ("Conv2d(2, 3, 4, padding=\"same\")", [2, 7, 6], "even kernel"),
        ("Conv2d(2, 2, (2, 5), padding=\"same\", bias=false)", [2, 5, 8], "(2, 5) kernel"),
        ("Conv2d(1, 2, 2, padding=\"same\", dilation=3)", [1, 8, 7], "even kernel, dilation 3"),
        ("Conv2d(3, 3, (3, 2), padding=\"same\", dilation=(2, 1), groups=3)", [3, 6, 6],
         "odd x even, dilated, depthwise"),
    ]
    for ctor, dims, doc in specs:
        m = c.member(ctor, "conv")
        c.ret("%s(%s)" % (m, c.inp(dims)), doc)
    cases.append(c)
    return (cases + gen_conv1d(R) + gen_conv_post() + gen_conv_keep() + gen_conv_keep_nhwc() + gen_conv_keep_convnext()
            + gen_conv_wino() + gen_conv_stem() + gen_conv_fc())


def gen_conv_post():
    """Conv2d epilogues that the CPU backend's oneDNN convolution computes as
    post-ops (runtime/cpu/conv_dnnl.c): each activation, clamps, a residual
    sum (before and after an activation), depthwise and 1x1 convs; and chains
    that stop the post-ops (batch norm, a product, a strided residual, a
    conv output read twice), whose rest the generated C computes."""
    c = Case("conv", "postops", "Conv2d + fused activation / residual: relu, relu6, hardswish, silu, "
                                "sigmoid, tanh, gelu (erf, tanh), clamp; residual sum then relu; "
                                "depthwise and 1x1; chains the post-ops cannot take")
    acts = [("relu", "relu(%s)"), ("relu6", "relu6(%s)"), ("hardswish", "hardswish(%s)"), ("silu", "silu(%s)"),
            ("sigmoid", "sigmoid(%s)"), ("tanh", "tanh(%s)"), ("gelu", "gelu(%s)"),
            ("gelu tanh", "gelu(%s, approximate=\"tanh\")"), ("clamp", "clamp(%s, min=-0.7, max=0.9)"),
            ("clamp_min", "clamp_min(%s, 0.2)"), ("clamp_max", "clamp_max(%s, -0.3)"),
            ("clamp, min > max", "clamp(%s, min=0.5, max=-0.5)")]
    x = c.inp([8, 9, 11])
    y = c.inp([8, 9, 9])
    c.body.append("big = %s * 8" % x)
    for i, (what, e) in enumerate(acts):
        m = c.member("Conv2d(8, 6, 3, padding=1)" if i % 2 == 0 else "Conv2d(8, 5, 3, stride=2, bias=false)", "conv")
        if "min > max" in what:  # a constant (all max) times the conv, so a perturbed input shows
            c.ret("%s * %s(big)" % (e % ("%s(big)" % m), m), "conv -> " + what + ", times the conv")
        else:
            c.ret(e % ("%s(big)" % m), "conv -> " + what)
    m = c.member("Conv2d(8, 8, 3, padding=1)", "conv")
    c.ret("relu(%s(%s) + %s)" % (m, x, x), "conv + residual -> relu")
    m = c.member("Conv2d(8, 8, 1, bias=false)", "conv")
    c.ret("%s + silu(%s(%s))" % (x, m, x), "1x1 conv -> silu + residual")
    m = c.member("Conv2d(8, 8, 3, padding=1, groups=8)", "conv")
    c.ret("relu6(%s(big))" % m, "depthwise conv -> relu6")
    m = c.member("Conv2d(8, 16, 3, stride=2, padding=1, groups=8, bias=false)", "conv")
    c.ret("hardswish(%s(big))" % m, "depthwise multiplier 2, stride 2 -> hardswish")
    m = c.member("Conv2d(8, 4, 2, padding=\"same\", dilation=2)", "conv")
    c.ret("tanh(%s(%s))" % (m, x), "dilated, padding same, even kernel -> tanh")
    m, bn = c.member("Conv2d(8, 6, 3, padding=1, bias=false)", "conv"), c.member("BatchNorm2d(6)", "bn")
    c.ret("relu(%s(%s(%s)))" % (bn, m, x), "conv -> batch norm -> relu: no post-op")
    m = c.member("Conv2d(8, 6, 3, padding=1)", "conv")
    c.ret("relu(%s(%s)) * 2 + 1" % (m, x), "conv -> relu, then a product and an add in the C")
    m = c.member("Conv2d(8, 8, 3, padding=1)", "conv")
    c.ret("%s(%s) + transpose(%s, 2, 3)" % (m, y, y), "a strided residual: not a sum post-op")
    m = c.member("Conv2d(8, 8, 3, padding=1)", "conv")
    c.body.append("h = %s(%s)" % (m, x))
    c.ret("relu(h) + h", "a conv output read twice")
    a, b = c.member("Conv2d(8, 12, 1)", "conv"), c.member("Conv2d(12, 8, 3, padding=1, groups=4)", "conv")
    c.ret("relu(%s(relu6(%s(%s))) + %s)" % (b, a, x, x), "1x1 -> relu6 -> grouped 3x3 + residual -> relu")
    return [c, gen_conv_post_nonfinite()]


def gen_conv_post_nonfinite():
    """The epilogues of gen_conv_post on inputs holding NaN and +-inf, through
    the generated C's im2col conv (DPC_CONV=im2col): NaN and the infinities
    where PyTorch has them. oneDNN's relu and clip post-ops map NaN to 0 (the
    clip's lower bound), and a Winograd transform spreads a NaN over its
    tile: those paths are not NaN-exact (docs/performance.md)."""
    c = Case("conv", "postops_nonfinite", "Conv2d + activation / residual / pool / Linear + relu on inputs "
                                          "holding NaN, +inf and -inf, through the im2col conv")
    c.nonfinite = True
    c.env.append("DPC_CONV=im2col")
    x = c.inp([4, 7, 9])
    acts = [("relu", "relu(%s)"), ("relu6", "relu6(%s)"), ("hardswish", "hardswish(%s)"), ("silu", "silu(%s)"),
            ("sigmoid", "sigmoid(%s)"), ("tanh", "tanh(%s)"), ("gelu", "gelu(%s)"), ("hardsigmoid", "hardsigmoid(%s)"),
            ("clamp", "clamp(%s, min=-0.7, max=0.9)"), ("hardtanh", "hardtanh(%s)"),
            ("leaky_relu", "leaky_relu(%s, 0.1)")]
    for i, (what, e) in enumerate(acts):
        m = c.member("Conv2d(4, 3, 3, padding=1)" if i % 2 == 0 else "Conv2d(4, 5, 1, bias=false)", "conv")
        c.ret(e % ("%s(%s)" % (m, x)), "conv -> " + what)
    m = c.member("Conv2d(4, 4, 3, padding=1)", "conv")
    c.ret("relu(%s(%s) + %s)" % (m, x, x), "conv + residual -> relu")
    m = c.member("Conv2d(4, 4, 3, padding=1, groups=4)", "conv")
    c.ret("relu6(%s(%s))" % (m, x), "depthwise conv -> relu6")
    m, p = c.member("Conv2d(4, 6, 3, padding=1)", "conv"), c.member("MaxPool2d(2)", "pool")
    c.ret("%s(relu(%s(%s)))" % (p, m, x), "conv -> relu -> max pool")
    m = c.member("Linear(9, 5)", "lin")
    c.ret("relu(%s(%s))" % (m, x), "Linear -> relu")
    return c


def gen_conv_keep():
    """Conv2d chains whose activations the CPU backend keeps in oneDNN's
    layout (NHWC) between convs (runtime/cpu/conv_dnnl.c), and chains where
    it must not: a conv output also read by a pool, by elementwise C, or
    returned; residual operands kept and not; depthwise -> 1x1 with channel
    counts not multiples of 16; folded batch norms (weights from the
    prepare phase)."""
    c = Case("conv", "keep", "Conv2d chains between oneDNN convs: kept layouts and the readers that "
                             "stop them (pool, elementwise, graph output), residuals in either layout")
    x = c.inp([8, 10, 9])
    m = [c.member("Conv2d(8, 8, 3, padding=1)", "conv") for _ in range(4)]
    h = c.let("relu(%s(%s))" % (m[0], x))
    h2 = c.let("relu6(%s(%s))" % (m[1], h))
    c.ret("%s(%s)" % (m[2], h2), "conv -> conv -> conv, the middle results kept")
    c.ret("relu(%s(%s) + %s)" % (m[3], h, h), "one kept result as the source and the residual")
    # read by a pool, by elementwise C, returned: never kept
    a, b = c.member("Conv2d(8, 6, 3, padding=1)", "conv"), c.member("Conv2d(6, 6, 1)", "conv")
    p = c.let("relu(%s(%s))" % (a, x))
    c.ret("%s(%s)" % (b, p), "conv output read by a conv ...")
    c.ret("%s(%s)" % (c.member("MaxPool2d(2)", "pool"), p), "... and by a pool")
    a, b = c.member("Conv2d(8, 6, 3, padding=1)", "conv"), c.member("Conv2d(6, 5, 3, padding=1)", "conv")
    q = c.let("hardswish(%s(%s))" % (a, x))
    c.ret("%s(%s) * 2" % (b, q), "conv output read by a conv ...")
    c.ret("%s * %s" % (q, q), "... and by an elementwise kernel")
    a, b = c.member("Conv2d(8, 7, 3, padding=1)", "conv"), c.member("Conv2d(7, 7, 3, padding=1)", "conv")
    r = c.let("silu(%s(%s))" % (a, x))
    c.ret("%s(%s)" % (b, r), "conv output read by a conv ...")
    c.ret(r, "... and returned")
    # residuals: a kept source with a plain residual, a plain source with a kept residual
    a, b, d = (c.member("Conv2d(8, 8, 3, padding=1)", "conv") for _ in range(3))
    k = c.let("relu(%s(%s))" % (a, x))
    plain = c.let("%s * 0.5 + 1" % x)
    s = c.let("relu(%s(%s) + %s)" % (b, k, plain))
    c.ret("tanh(%s(%s) + %s(%s))" % (d, x, d, s), "kept source + NCHW residual, NCHW source + kept residual")
    # a branch: one kept result read by two convs, one the other's residual
    a, b, d = (c.member("Conv2d(8, 8, 3, padding=1)", "conv") for _ in range(3))
    e = c.member("Conv2d(8, 8, 1)", "conv")
    k = c.let("relu(%s(%s))" % (a, x))
    u = c.let("%s(%s)" % (b, k))
    c.ret("%s(%s) + %s(%s)" % (e, u, d, k), "a kept result read by two convs, one the other's residual")
    # depthwise -> 1x1 with channel counts not multiples of 16, folded batch norms
    y = c.inp([20, 13, 11])
    dw1, bn1 = c.member("Conv2d(20, 20, 3, padding=1, groups=20, bias=false)", "conv"), c.member("BatchNorm2d(20)", "bn")
    pw1, bn2 = c.member("Conv2d(20, 12, 1, bias=false)", "conv"), c.member("BatchNorm2d(12)", "bn")
    dw2 = c.member("Conv2d(12, 24, 3, stride=2, padding=1, groups=12)", "conv")
    pw2 = c.member("Conv2d(24, 20, 1)", "conv")
    t = c.let("relu6(%s(%s(%s)))" % (bn1, dw1, y))
    t = c.let("%s(%s(%s))" % (bn2, pw1, t))
    t = c.let("hardswish(%s(%s))" % (dw2, t))
    c.ret("%s(%s)" % (pw2, t), "depthwise -> 1x1 -> depthwise x2 stride 2 -> 1x1, 20/12/24 channels, "
                               "batch norms folded")
    return [c]


def gen_conv_wino():
    """3x3 stride-1 convs that dpc's own Winograd kernel takes in the
    blocked layout without AVX-512 (runtime/cpu/conv_wino.c: channels a
    multiple of 8, 16+ output tiles of 4x4 an image): output sizes not a
    multiple of 4, padding 0, 1 and 2, 16 and 24 output channels (a last
    panel of 8), with and without bias, ReLU, ReLU6 (clip), a residual
    before the activation, chains kept between Winograd convs and the
    direct ones, a result a pool reads, folded batch norms, 7x7 outputs
    (F(2x2, 3x3)); and convs it must leave to oneDNN (SiLU after, 12
    channels, 5x5 outputs)."""
    c = Case("conv", "wino", "3x3 stride-1 convs for dpc's Winograd: odd sizes, paddings 0/1/2, 16/24 channels, "
                             "residual, relu/relu6, chains, pools, folded batch norms, and the ones it declines")
    x = c.inp([8, 17, 19])
    a = c.member("Conv2d(8, 16, 3, padding=1)", "conv")
    b = c.member("Conv2d(16, 24, 3, padding=1, bias=false)", "conv")
    bn = c.member("BatchNorm2d(24)", "bn")
    d = c.member("Conv2d(24, 24, 3, padding=1)", "conv")
    h = c.let("relu(%s(%s))" % (a, x))
    k = c.let("relu6(%s(%s(%s)))" % (bn, b, h))
    c.ret("relu(%s(%s) + %s)" % (d, k, k), "8 -> 16 -> 24 -> 24 channels, kept between them, bn folded, "
                                            "relu6, residual + relu")
    v = c.member("Conv2d(8, 16, 3)", "conv")
    p2 = c.member("Conv2d(16, 8, 3, padding=2)", "conv")
    u = c.let("%s(%s)" % (v, x))
    c.ret("%s(%s)" % (p2, u), "padding 0 (15x17) then padding 2 (17x19), no activation")
    pool = c.member("MaxPool2d(2)", "pool")
    q = c.let("relu(%s(%s))" % (c.member("Conv2d(8, 16, 3, padding=1)", "conv"), x))
    c.ret("%s(%s)" % (pool, q), "a Winograd result a pool reads")
    c.ret("silu(%s(%s))" % (c.member("Conv2d(8, 16, 3, padding=1)", "conv"), x), "SiLU after: oneDNN's")
    c.ret("%s(%s)" % (c.member("Conv2d(8, 12, 3, padding=1)", "conv"), x), "12 output channels: oneDNN's")
    y = c.inp([16, 7, 7])
    c.ret("relu(%s(%s))" % (c.member("Conv2d(16, 16, 3, padding=1)", "conv"), y),
          "7x7: 4 tiles of 4x4, 16 of 2x2: F(2x2, 3x3)")
    z = c.inp([16, 5, 5])
    c.ret("relu(%s(%s))" % (c.member("Conv2d(16, 16, 3, padding=1)", "conv"), z), "5x5: 9 tiles of 2x2, oneDNN's")
    return [c]


def gen_conv_stem():
    """Convs of few input channels that dpc's direct kernel takes in the
    blocked layout without AVX-512 (runtime/cpu/conv_stem.c: 1-4 channels
    in, a multiple of 16 out, where oneDNN offers gemm:jit, AlexNet's
    11x11 stride 4, or the 3x3 stride-2 stems): their post-ops (ReLU,
    ReLU6, SiLU, hardswish, folded batch norms), widths of 6k + r columns,
    one input channel, a result the next conv reads in the blocked layout;
    and one it leaves to oneDNN (24 output channels)."""
    c = Case("conv", "stem", "stems for dpc's direct kernel: 11x11 stride 4, 3x3 stride 2, relu/relu6/silu/"
                             "hardswish, folded batch norms, 1 channel, a conv after, and one it declines")
    x = c.inp([3, 47, 45])
    a = c.member("Conv2d(3, 32, 11, stride=4, padding=2)", "conv")
    c.ret("relu(%s(%s))" % (a, x), "AlexNet's stem in small: 11x11 stride 4 (11x10 out), relu")
    b = c.member("Conv2d(3, 16, 3, stride=2, padding=1, bias=false)", "conv")
    bn = c.member("BatchNorm2d(16)", "bn")
    n = c.member("Conv2d(16, 16, 3, padding=1)", "conv")
    h = c.let("silu(%s(%s(%s)))" % (bn, b, x))
    c.ret("relu(%s(%s))" % (n, h), "EfficientNet's: 3x3 stride 2, batch norm folded, SiLU, then a conv reading it")
    c.ret("hardswish(%s(%s))" % (c.member("Conv2d(3, 16, 3, stride=2, padding=1)", "conv"), x),
          "MobileNet v3's: hardswish")
    y = c.inp([1, 20, 13])
    c.ret("relu6(%s(%s))" % (c.member("Conv2d(1, 16, 3, stride=2)", "conv"), y), "one channel, no padding, relu6")
    c.ret("relu(%s(%s))" % (c.member("Conv2d(3, 24, 3, stride=2, padding=1)", "conv"), x),
          "24 output channels: oneDNN's")
    return [c]


def gen_conv_fc():
    """Convs of one pixel that dpc's kernel takes in the blocked layout
    without AVX-512 (runtime/cpu/conv_fc.c: a matrix-vector product per
    image, panels of 32 output channels): panel tails of 8k and of 8k + r
    channels (40, 36, 70, 1), input channels not a multiple of 8, no bias,
    its post-ops (ReLU, SiLU, hardswish, sigmoid, a residual), an input
    that is one pixel already, and a grouped one it leaves to oneDNN."""
    c = Case("conv", "fc", "convs of one pixel for dpc's kernel: squeeze-excitation fc convs, panel tails, "
                           "post-ops, a residual, a grouped one it declines")
    x = c.inp([24, 6, 5])
    gp = c.member("AdaptiveAvgPool2d(1)", "pool")
    p = c.let("%s(relu(%s(%s)))" % (gp, c.member("Conv2d(24, 40, 3, padding=1)", "conv"), x))
    f1, f2 = c.member("Conv2d(40, 36, 1)", "conv"), c.member("Conv2d(36, 40, 1, bias=false)", "conv")
    c.ret("sigmoid(%s(silu(%s(%s))))" % (f2, f1, p), "pooled 40 -> 36 (a tail of 4) -> 40, SiLU, sigmoid")
    r = c.member("Conv2d(40, 40, 1)", "conv")
    c.ret("relu(%s(%s) + %s)" % (r, p, p), "40 -> 40 with the pooled values as a residual, relu")
    y = c.inp([3, 1, 1])
    c.ret("hardswish(%s(%s))" % (c.member("Conv2d(3, 70, 1)", "conv"), y),
          "an input of one pixel, 3 -> 70 (two panels and a tail of 6), hardswish")
    c.ret("%s(%s)" % (c.member("Conv2d(40, 1, 1)", "conv"), p), "one output channel")
    c.ret("%s(%s)" % (c.member("Conv2d(40, 8, 1, groups=4)", "conv"), p), "grouped: oneDNN's")
    return [c]


def gen_conv_keep_nhwc():
    """The kernels with an NHWC loop (compiler/conv_post.c, "NHWC readers")
    between kept convs: squeeze-excitation (global average pool, fc convs,
    x * scale in either operand order), max and average pools (padding,
    dilation, ceil mode, count_include_pad, divisor_override, adaptive),
    a pool's result as a conv's source and residual, an elementwise chain
    after a pool, a global pool ending the chain; and readers that must
    stop it (a full-shape operand that is not the source)."""
    c = Case("conv", "keep_nhwc", "kept NHWC convs read by pools and elementwise kernels: squeeze-excitation, "
                                  "max/avg/adaptive pools between convs, chains that must stop")
    x = c.inp([16, 12, 10])
    dw = c.member("Conv2d(16, 16, 3, padding=1, groups=16)", "conv")
    fc1, fc2 = c.member("Conv2d(16, 4, 1)", "conv"), c.member("Conv2d(4, 16, 1)", "conv")
    gp = c.member("AdaptiveAvgPool2d(1)", "pool")
    pw = c.member("Conv2d(16, 8, 1)", "conv")
    h = c.let("silu(%s(%s))" % (dw, x))
    sc = c.let("sigmoid(%s(silu(%s(%s(%s)))))" % (fc2, fc1, gp, h))
    c.ret("%s(%s * %s)" % (pw, h, sc), "squeeze-excitation: dw conv -> global pool -> fc convs -> x * scale -> 1x1")
    dw2 = c.member("Conv2d(16, 16, 5, stride=2, padding=2, groups=16)", "conv")
    f1, f2 = c.member("Conv2d(16, 8, 1)", "conv"), c.member("Conv2d(8, 16, 1)", "conv")
    pw2 = c.member("Conv2d(16, 12, 1)", "conv")
    g = c.let("hardswish(%s(%s))" % (dw2, x))
    s2 = c.let("hardsigmoid(%s(relu(%s(%s(%s)))))" % (f2, f1, gp, g))
    c.ret("%s(%s * %s)" % (pw2, s2, g), "the same with hardsigmoid, scale * x, stride 2")
    # pools between convs
    a = c.member("Conv2d(16, 8, 3, padding=1)", "conv")
    mp = c.member("MaxPool2d(3, stride=2, padding=1)", "pool")
    b, d = c.member("Conv2d(8, 8, 3, padding=1)", "conv"), c.member("Conv2d(8, 8, 3, padding=1)", "conv")
    p = c.let("%s(relu(%s(%s)))" % (mp, a, x))
    c.ret("relu(%s(relu(%s(%s))) + %s)" % (d, b, p, p), "conv -> max pool -> conv -> conv + the pool's result")
    a = c.member("Conv2d(16, 8, 3, padding=1)", "conv")
    b = c.member("Conv2d(8, 6, 1)", "conv")
    mp = c.member("MaxPool2d(3, stride=2, dilation=2, ceil_mode=true)", "pool")
    c.ret("%s(%s(tanh(%s(%s))))" % (b, mp, a, x), "max pool, dilation 2, ceil mode, between convs")
    a = c.member("Conv2d(16, 8, 3, padding=1)", "conv")
    b = c.member("Conv2d(8, 6, 3, padding=1)", "conv")
    ap = c.member("AvgPool2d(3, stride=2, padding=1)", "pool")
    c.ret("%s(%s(%s(%s)))" % (b, ap, a, x), "avg pool with padding (count_include_pad) between convs")
    a = c.member("Conv2d(16, 8, 3, padding=1)", "conv")
    b = c.member("Conv2d(8, 6, 1)", "conv")
    ap = c.member("AvgPool2d(2, ceil_mode=true, count_include_pad=false)", "pool")
    c.ret("%s(%s(relu(%s(%s))) * 0.5 + 1)" % (b, ap, a, x), "avg pool (ceil mode, count_include_pad false), "
                                                            "then an elementwise chain, then a conv")
    a = c.member("Conv2d(16, 8, 3, padding=1)", "conv")
    b = c.member("Conv2d(8, 6, 1)", "conv")
    ap = c.member("AvgPool2d(3, stride=1, padding=1, divisor_override=5)", "pool")
    ad = c.member("AdaptiveAvgPool2d((5, 3))", "pool")
    c.ret("%s(%s(%s(relu6(%s(%s)))))" % (b, ad, ap, a, x), "avg pool with divisor_override, then an adaptive "
                                                          "pool 12x10 -> 5x3, between convs")
    a = c.member("Conv2d(16, 8, 3, padding=1)", "conv")
    c.ret("%s(relu(%s(%s)))" % (gp, a, x), "a global pool of a conv, returned")
    a, b = c.member("Conv2d(16, 8, 3, padding=1)", "conv"), c.member("Conv2d(16, 8, 3, padding=1)", "conv")
    e = c.member("Conv2d(8, 8, 1)", "conv")
    c.ret("%s(relu(%s(%s)) * %s(%s))" % (e, a, x, b, x), "x * y of two convs' results, then a conv: not kept")
    # ConvNeXt: depthwise 7x7 -> permute to channels-last -> LayerNorm -> Linear -> permute back + residual
    dwc, ln = c.member("Conv2d(16, 16, 7, padding=3, groups=16)", "conv"), c.member("LayerNorm(16)", "ln")
    lin = c.member("Linear(16, 16)", "fc")
    t = c.let("%s(%s(permute(%s(%s), 0, 2, 3, 1)))" % (lin, ln, dwc, x))
    c.ret("permute(%s, 0, 3, 1, 2) + %s" % (t, x), "ConvNeXt block: depthwise 7x7 -> permute -> LayerNorm -> "
                                                  "Linear -> permute back + residual")
    st = c.member("Conv2d(16, 8, 2, stride=2)", "conv")
    c.ret("permute(%s(%s), 0, 2, 3, 1)" % (st, x), "a conv's result permuted to channels-last, returned")
    return [c]


def gen_conv_keep_convnext():
    """A ConvNeXt stage whose residual stream stays NHWC (conv_post.c,
    conv_cl_view): a 2x2 stride-2 conv, then two blocks (depthwise 7x7 ->
    permute -> LayerNorm -> Linear -> GELU -> Linear -> permute back, times
    a layer scale, plus the block's input), read by a 1x1 conv, a global
    pool and a permute to channels-last with a LayerNorm (the next
    downsampling's); ops_conv_dnnl_impl_keep_convnext checks that only the
    input is reordered."""
    c = Case("conv", "keep_convnext", "a ConvNeXt stage kept NHWC: conv -> two blocks with layer scale and "
                                      "residual -> conv, global pool, channels-last LayerNorm")
    x = c.inp([16, 12, 10])
    ds = c.member("Conv2d(16, 16, 2, stride=2)", "conv")
    r = c.let("%s(%s)" % (ds, x))
    for _ in range(2):
        dw = c.member("Conv2d(16, 16, 7, padding=3, groups=16)", "conv")
        ln, l1, l2 = c.member("LayerNorm(16, eps=1e-6)", "ln"), c.member("Linear(16, 64)", "fc"), c.member("Linear(64, 16)", "fc")
        ls = c.member("Parameter(empty(16, 1, 1).normal_(std=1.0))", "ls")
        t = c.let("%s(gelu(%s(%s(permute(%s(%s), 0, 2, 3, 1)))))" % (l2, l1, ln, dw, r))
        r = c.let("%s * permute(%s, 0, 3, 1, 2) + %s" % (ls, t, r))
    pw, gp, ln = c.member("Conv2d(16, 8, 1)", "conv"), c.member("AdaptiveAvgPool2d(1)", "pool"), c.member("LayerNorm(16)", "ln")
    c.ret("%s(%s)" % (pw, r), "a 1x1 conv of the stage's output")
    c.ret("%s(%s)" % (gp, r), "its global pool")
    c.ret("%s(permute(%s, 0, 2, 3, 1))" % (ln, r), "channels-last LayerNorm of it")
    return [c]


# ---------------------------------------------------------------------------
# pool: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d
# ---------------------------------------------------------------------------

def _valid_pool(cls, kw, C, H, W) -> bool:
    t = torch()
    try:
        m = getattr(t.nn, cls)(**kw)
        y = m(t.zeros(1, C, H, W))
        return y.numel() > 0
    except Exception:
        return False


POOL_ARGS = {
    "MaxPool2d": ["kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode"],
    "AvgPool2d": ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                  "divisor_override"],
}


def draw_pool(R, cls, kind):
    for _ in range(2000):
        C, H, W = R.randint(1, 3), R.randint(3, 11), R.randint(3, 11)
        kw = {}
        if cls == "AdaptiveAvgPool2d":
            if kind == "int":
                kw["output_size"] = R.randint(1, 6)
            elif kind == "tuple":
                kw["output_size"] = (R.randint(1, 6), R.randint(1, 6))
            elif kind == "none_h":
                kw["output_size"] = (None, R.randint(1, 5))
            elif kind == "none_w":
                kw["output_size"] = (R.randint(1, 5), None)
            elif kind == "larger":   # more output cells than input: overlapping windows
                kw["output_size"] = (H + R.randint(1, 3), W + R.randint(0, 2))
            elif kind == "nondiv":
                h = R.randint(2, 5)
                H = h * R.randint(1, 2) + R.randint(1, h - 1)
                kw["output_size"] = (h, R.randint(2, 4))
            elif kind == "one":
                kw["output_size"] = (1, 1)
            else:
                raise ValueError(kind)
            if not _valid_pool(cls, kw, C, H, W):
                continue
            ctor = call(cls, [kw["output_size"]]) if R.random() < 0.5 else call(cls, [], kw)
            return ctor, C, H, W
        k = _pair(R, 2, 4, 0.3) if R.random() < 0.9 else 1
        kw["kernel_size"] = k
        if kind == "default":
            pass
        elif kind == "stride":
            kw["stride"] = _pair(R, 1, 3, 0.3)
        elif kind == "padding":
            kw["stride"] = _pair(R, 1, 3, 0.3)
            kw["padding"] = _pair(R, 0, 2, 0.3)
        elif kind == "dilation":
            kw["stride"] = R.randint(1, 2)
            kw["dilation"] = _pair(R, 1, 3, 0.5)
            kw["padding"] = R.randint(0, 1)
        elif kind == "ceil":
            kw["stride"] = _pair(R, 2, 3, 0.3)
            kw["padding"] = _pair(R, 0, 1, 0.3)
            kw["ceil_mode"] = True
        elif kind == "nopad_count":
            kw["stride"] = _pair(R, 1, 2, 0.3)
            kw["padding"] = _pair(R, 1, 2, 0.3)
            kw["count_include_pad"] = False
        elif kind == "ceil_count":
            kw["stride"] = _pair(R, 2, 3, 0.3)
            kw["padding"] = _pair(R, 0, 1, 0.3)
            kw["ceil_mode"] = True
            kw["count_include_pad"] = R.random() < 0.5
        elif kind == "divisor":
            kw["stride"] = _pair(R, 1, 2, 0.3)
            kw["padding"] = R.randint(0, 1)
            kw["divisor_override"] = R.randint(1, 7)
            kw["ceil_mode"] = R.random() < 0.5
        elif kind == "positional":
            names = POOL_ARGS[cls]
            kw["stride"] = R.randint(1, 3)
            kw["padding"] = R.randint(0, 1)
            if cls == "MaxPool2d":
                kw["dilation"] = R.randint(1, 2)
                kw["return_indices"] = False
                kw["ceil_mode"] = R.random() < 0.5
            else:
                kw["ceil_mode"] = R.random() < 0.5
                kw["count_include_pad"] = R.random() < 0.5
        else:
            raise ValueError(kind)
        if not _valid_pool(cls, kw, C, H, W):
            continue
        if kind == "positional":
            names = POOL_ARGS[cls]
            n = max(i for i, a in enumerate(names) if a in kw) + 1
            ctor = call(cls, [kw[a] for a in names[:n]])
        else:
            pos = []
            rest = dict(kw)
            if R.random() < 0.6:
                pos.append(rest.pop("kernel_size"))
            ctor = call(cls, pos, rest)
        return ctor, C, H, W
    raise RuntimeError("no valid pool %s %s" % (cls, kind))


def gen_pool(R):
    cases = []
    groups = [
        ("max0", "MaxPool2d", ["default", "stride", "padding", "dilation", "ceil"]),
        ("max1", "MaxPool2d", ["padding", "dilation", "ceil", "ceil", "positional"]),
        ("max2", "MaxPool2d", ["stride", "ceil", "dilation", "positional", "padding"]),
        ("avg0", "AvgPool2d", ["default", "stride", "padding", "nopad_count", "ceil"]),
        ("avg1", "AvgPool2d", ["ceil_count", "ceil_count", "divisor", "divisor", "positional"]),
        ("avg2", "AvgPool2d", ["nopad_count", "ceil_count", "divisor", "positional", "padding"]),
        ("adaptive0", "AdaptiveAvgPool2d", ["int", "tuple", "none_h", "none_w", "larger"]),
        ("adaptive1", "AdaptiveAvgPool2d", ["nondiv", "nondiv", "one", "tuple", "larger"]),
    ]
    for name, cls, kinds in groups:
        c = Case("pool", name, "%s variants: %s" % (cls, ", ".join(kinds)))
        for kind in kinds:
            ctor, C, H, W = draw_pool(R, cls, kind)
            m = c.member(ctor, "pool")
            x = c.inp([C, H, W])
            # max pooling of -x as well: padding must act as -inf, not 0
            c.ret("%s(%s)" % (m, x), kind)
        c.nonfinite = True  # a NaN in a max pool's window wins, as in PyTorch
        cases.append(c)
    # pooling a negative-only input: -inf padding for max, zero padding counted for avg
    c = Case("pool", "negative", "pooling strictly negative inputs: MaxPool2d padding is -inf, "
                                 "AvgPool2d padding counts as 0 (or not, count_include_pad=false)")
    c.members += ["mp = MaxPool2d(3, stride=2, padding=1)",
                  "mpc = MaxPool2d(2, padding=1, ceil_mode=true)",
                  "ap = AvgPool2d(3, stride=2, padding=1)",
                  "apn = AvgPool2d(3, stride=2, padding=1, count_include_pad=false, ceil_mode=true)"]
    c.params.append("x: [N, 2, 7, 6]")
    c.body.append("neg = -abs(x) - 1")
    for m in ("mp", "mpc", "ap", "apn"):
        c.ret("%s(neg)" % m)
    c.nonfinite = True
    cases.append(c)

    c = Case("pool", "ceil_edges", "ceil_mode edge cases: a last window that would start in the "
                                   "padding is dropped; partial last windows and their divisors "
                                   "with and without count_include_pad and divisor_override")
    specs = [
        ("MaxPool2d(2, stride=3, padding=1, ceil_mode=true)", [2, 4, 7], "last window dropped"),
        ("MaxPool2d(2, stride=2, ceil_mode=true)", [1, 5, 5], "partial last window"),
        ("MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=true)", [1, 8, 6], "dilated, ceil"),
        ("AvgPool2d(2, stride=3, padding=1, ceil_mode=true)", [2, 4, 7], "avg, last window dropped"),
        ("AvgPool2d(3, stride=2, padding=1, ceil_mode=true)", [1, 6, 6],
         "avg, window past the padded edge, count_include_pad"),
        ("AvgPool2d(3, stride=2, padding=1, ceil_mode=true, count_include_pad=false)", [1, 6, 6],
         "same, count_include_pad=false"),
        ("AvgPool2d(3, stride=2, padding=1, ceil_mode=true, divisor_override=2)", [1, 6, 6],
         "same, divisor_override"),
        ("AvgPool2d((2, 3), stride=(2, 2), padding=(1, 1), ceil_mode=true)", [2, 5, 6], "tuples"),
    ]
    for ctor, dims, doc in specs:
        m = c.member(ctor, "pool")
        c.ret("%s(%s)" % (m, c.inp(dims)), doc)
    c.nonfinite = True
    cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# norm: BatchNorm2d, LayerNorm, layer_norm
# ---------------------------------------------------------------------------

def gen_norm(R):
    cases = []
    c = Case("norm", "batchnorm", "BatchNorm2d (running statistics, random via --random-stats): "
                                  "defaults, eps, momentum, affine=false, positional eps, C=1")
    variants = [
        ("BatchNorm2d(%d)", "default"),
        ("BatchNorm2d(%d, eps=1e-3, momentum=0.01)", "eps, momentum"),
        ("BatchNorm2d(%d, affine=false)", "affine=false"),
        ("BatchNorm2d(%d, 1e-4)", "positional eps"),
        ("BatchNorm2d(num_features=%d, eps=0.1, momentum=None)", "keywords, momentum=None"),
    ]
    for fmt, doc in variants:
        C = R.randint(2, 6)
        m = c.member(fmt % C, "bn")
        x = c.inp([C, R.randint(1, 5), R.randint(1, 5)])
        c.ret("%s(%s)" % (m, x), doc)
    m = c.member("BatchNorm2d(1)", "bn")
    x = c.inp([1, 3, 4])
    c.ret("%s(%s)" % (m, x), "C=1")
    cases.append(c)

    c = Case("norm", "batchnorm_batchstats",
             "BatchNorm2d(track_running_stats=false): eval mode uses the current batch's statistics")
    c.single_device = "batch statistics are per replica under DataParallel"
    c.members += ["bn = BatchNorm2d(3, track_running_stats=false)",
                  "bn2 = BatchNorm2d(2, affine=false, track_running_stats=false)"]
    c.params += ["x: [N, 3, 4, 5]", "y: [N, 2, 3, 3]"]
    c.ret("bn(x)")
    c.ret("bn2(y * 2 + 1)")
    cases.append(c)

    c = Case("norm", "layernorm", "LayerNorm: int and tuple normalized_shape over 1, 2, 3 trailing "
                                  "dims, eps, elementwise_affine=false, positional arguments")
    a, b, d = R.randint(2, 5), R.randint(2, 5), R.randint(2, 7)
    specs = [
        ("LayerNorm(%d)" % d, [a, d], "int, 2-D input"),
        ("LayerNorm((%d,))" % d, [a, b, d], "1-tuple, 3-D input"),
        ("LayerNorm((%d, %d))" % (b, d), [a, b, d], "2 dims"),
        ("LayerNorm((%d, %d, %d), eps=1e-3)" % (a, b, d), [a, b, d], "3 dims, eps"),
        ("LayerNorm(%d, elementwise_affine=false)" % d, [b, d], "no affine"),
        ("LayerNorm((%d, %d), 1e-6, false)" % (b, d), [a, b, d], "positional eps and affine"),
        ("LayerNorm(normalized_shape=%d, eps=0.5)" % d, [d], "keyword, large eps"),
    ]
    for ctor, dims, doc in specs:
        m = c.member(ctor, "ln")
        x = c.inp(dims)
        c.ret("%s(%s)" % (m, x), doc)
    cases.append(c)

    c = Case("norm", "layer_norm_fn", "layer_norm function: [dims] over 1 and 2 trailing dims, "
                                      "None weight/bias, eps positional and keyword, offset inputs")
    a, b, d = R.randint(2, 5), R.randint(2, 5), R.randint(3, 8)
    x = c.inp([a, b, d])
    c.ret("layer_norm(%s, [%d])" % (x, d), "defaults")
    c.ret("layer_norm(%s, [%d, %d], None, None, 1e-3)" % (x, b, d), "2 dims, positional eps")
    c.ret("layer_norm(%s, [%d], eps=0.25)" % (x, d), "keyword eps")
    c.ret("layer_norm(%s * 3 + 20, [%d])" % (x, d), "mean far from 0 (variance by cancellation "
                                                    "would lose digits)")
    m = c.member("LayerNorm(%d)" % d, "ln")
    c.ret("%s(%s * 3 + 20)" % (m, x), "LayerNorm module, same offset input")
    cases.append(c)

    c = Case("norm", "layer_norm_affine", "layer_norm function with tensor weight and bias "
                                          "(built from other inputs by a batch mean)")
    c.single_device = "weight and bias are batch means, which are per replica"
    a, d = R.randint(2, 5), R.randint(2, 6)
    x = c.inp([a, d])
    w = c.inp([d])
    bb = c.inp([a, d])
    c.body.append("wt = mean(%s, 0) + 1" % w)
    c.body.append("bs = mean(%s, 0)" % bb)
    c.ret("layer_norm(%s, [%d], wt, None)" % (x, d), "weight only")
    c.ret("layer_norm(%s, [%d], None, amax(%s, 0))" % (x, d, w), "bias only")
    c.ret("layer_norm(%s, [%d, %d], bs, bs, 1e-5)" % (x, a, d), "2-D weight and bias")
    c.ret("layer_norm(%s, [%d], weight=wt, bias=amax(%s, 0), eps=1e-4)" % (x, d, w), "keywords")
    cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# elementwise: + - * / with broadcasting, scalars, unary functions
# ---------------------------------------------------------------------------

OPS = ["+", "-", "*", "/"]


def _operand(R, op, name):
    """The right operand of op; / gets a denominator bounded away from 0."""
    return "(abs(%s) + 0.5)" % name if op == "/" else name


def gen_elementwise(R):
    cases = []
    # every broadcast pattern of a rank-3 (batch + 2) and rank-4 operand pair
    for ci, rank in enumerate([2, 3, 3]):
        c = Case("elementwise", "broadcast%d" % ci,
                 "binary + - * / with NumPy broadcasting: size-1 dims on either side, both sides")
        seen = set()
        for _ in range(7):
            dims = [R.randint(2, 5) for _ in range(rank)]
            while True:
                ma = tuple(R.random() < 0.3 for _ in range(rank))
                mb = tuple(R.random() < 0.4 for _ in range(rank))
                if (ma, mb) not in seen:
                    break
            seen.add((ma, mb))
            da = [1 if m else d for m, d in zip(ma, dims)]
            db = [1 if m else d for m, d in zip(mb, dims)]
            op = R.choice(OPS)
            a, b = c.inp(da), c.inp(db)
            if R.random() < 0.5:
                c.ret("%s %s %s" % (a, op, _operand(R, op, b)), "%s %s %s" % (shape(da), op, shape(db)))
            else:
                c.ret("%s %s %s" % (b, op, _operand(R, op, a)), "%s %s %s" % (shape(db), op, shape(da)))
        c.nonfinite = True
        cases.append(c)

    c = Case("elementwise", "broadcast_rank",
             "broadcasting operands of different rank (missing leading dims): the batch dim is "
             "moved inward with permute, combined with a lower-rank tensor, and moved back")
    a, b, d = R.randint(2, 4), R.randint(2, 4), R.randint(2, 5)
    x = c.inp([a, d])
    y = c.inp([d])
    z = c.inp([a, b, d])
    w = c.inp([b, 1])
    c.ret("permute(permute(%s, 1, 0, 2) + %s, 1, 0, 2)" % (x, y), "[a, N, d] + [N, d]")
    c.ret("permute(%s - permute(%s, 1, 0, 2), 1, 0, 2)" % (y, x), "[N, d] - [a, N, d]")
    c.ret("permute(permute(%s, 1, 0, 2, 3) * %s, 1, 0, 2, 3)" % (z, w), "[a, N, b, d] * [N, b, 1]")
    c.ret("permute(%s / (abs(permute(%s, 2, 0, 1, 3)) + 1), 1, 2, 0, 3)" % (x, z),
          "[N, a, d] / [b, N, a, d]")
    c.ret("transpose(transpose(%s, 0, 1) + %s, 0, 1)" % (x, y), "transpose-based [a, N, d] + [N, d]")
    c.nonfinite = True
    cases.append(c)

    c = Case("elementwise", "broadcast_nobatch",
             "broadcasting against tensors without the batch dim (batch means), rank-0 tensors "
             "(a sum of a 1-D tensor), and [1, ...] tensors")
    c.single_device = "operands are batch reductions, which are per replica"
    a, d = R.randint(2, 4), R.randint(2, 5)
    x = c.inp([a, d])
    v = c.inp([d])
    u = c.inp([])
    c.body.append("m = mean(%s, 0)" % x)          # [a, d]
    c.body.append("row = mean(%s, 0)" % v)        # [d]
    c.body.append("s0 = sum(%s, 0)" % u)          # []
    c.body.append("k = mean(%s, 0, keepdim=true)" % x)   # [1, a, d]
    c.ret("%s + row" % x, "[N, a, d] + [d]")
    c.ret("m - %s" % x, "[a, d] - [N, a, d]")
    c.ret("%s * s0" % x, "[N, a, d] * []")
    c.ret("s0 / (abs(%s) + 1)" % x, "[] / [N, a, d]")
    c.ret("%s - k" % x, "[N, a, d] - [1, a, d]")
    c.ret("s0 * s0 + s0", "rank-0 result")
    c.ret("row * %s" % v, "[d] * [N, d]")
    c.ret("%s + 2 * s0" % u, "[N] + scalar * []")
    cases.append(c)

    c = Case("elementwise", "scalars",
             "tensor-scalar arithmetic: literals on either side, forward scalar parameters passed "
             "with --kw (float and int), constructor parameters, a float parameter left at its default")
    c.ctor = "p: float = 0.25, q: int = 3"
    c.model_args = "q=2"
    a, d = R.randint(2, 4), R.randint(2, 5)
    c.params += ["x: [N, %d, %d]" % (a, d)]
    c.params += ["s: float = 1.0", "k: int = 1", "t: float = -0.5"]
    c.kw += ["s=%s" % repr(round(R.uniform(-3, 3), 3)), "k=%d" % R.randint(2, 5)]
    c.ret("x * 0.5", "tensor * literal")
    c.ret("0.5 * x - 1", "literal * tensor - literal")
    c.ret("1 - x", "literal - tensor")
    c.ret("2 / (abs(x) + 1)", "literal / tensor")
    c.ret("x / 4", "tensor / int literal")
    c.ret("x * s + k", "kw float and kw int")
    c.ret("(x - t) * (s * 2 - 1)", "scalar arithmetic on parameters; t at its default")
    c.ret("x * p + q", "constructor float and int parameters")
    c.ret("x - -1.5", "minus a negative literal")
    c.ret("(x + .5) * 1e-3", "float literal forms")
    c.ret("k / (abs(x) + 1)", "int parameter / tensor")
    c.nonfinite = True
    cases.append(c)

    c = Case("elementwise", "batch_scalar", "the batch name used as a scalar operand")
    c.single_device = "N is the batch size of the replica under DataParallel"
    c.params.append("x: [N, 3]")
    c.ret("x * N")
    c.ret("x / N + N")
    cases.append(c)

    c = Case("elementwise", "unary",
             "unary minus and exp, log, sqrt, abs (positive inputs where needed), nested, and "
             "precedence and associativity of - / * with unary minus")
    a, d = R.randint(2, 4), R.randint(2, 6)
    c.params += ["x: [N, %d, %d]" % (a, d), "y: [N, %d, %d]" % (a, d), "z: [N, 1, %d]" % d]
    c.ret("-x", "unary minus")
    c.ret("exp(x)")
    c.ret("log(abs(x) + 0.1)")
    c.ret("sqrt(abs(x))")
    c.ret("abs(x)")
    c.ret("exp(-abs(y)) * sqrt(x * x + 1)", "nested")
    c.ret("log(exp(x) + exp(y))", "log-sum-exp by hand")
    c.ret("x - y - z", "left-assoc -")
    c.ret("x / (abs(y) + 1) / (abs(z) + 2)", "left-assoc /")
    c.ret("-x * y + -z", "unary minus binds tighter")
    c.ret("--x - -(-y)", "double negation")
    c.nonfinite = True
    cases.append(c)

    c = Case("elementwise", "nonfinite", "log of 0 is -inf and of negatives NaN; sqrt of negatives NaN")
    c.params.append("x: [N, 3, 5]")
    c.ret("log(relu(x))", "-inf where x <= 0")
    c.ret("sqrt(x)", "NaN where x < 0")
    c.ret("log(x)", "NaN where x < 0")
    cases.append(c)

    # fixed shapes (no draws from R)
    c = Case("elementwise", "specials", "every elementwise op and activation chain, amax and softmax on inputs "
             "holding NaN, +inf and -inf (#@ nonfinite): NaN and the infinities where PyTorch has them (relu(NaN) = NaN, "
             "relu6(inf) = 6, hardsigmoid(-inf) = 0, leaky_relu(-inf) = -inf, hardtanh(inf) = max_val)")
    c.nonfinite = True
    c.params += ["x: [N, 4, 6]", "y: [N, 1, 6]"]
    for e in ("-x", "relu(x)", "relu6(x)", "hardswish(x)", "hardsigmoid(x)", "gelu(x)",
              "gelu(x, approximate=\"tanh\")", "silu(x)", "sigmoid(x)", "tanh(x)", "exp(x)", "log(x)", "sqrt(x)",
              "abs(x)", "sin(x)", "mish(x)", "erf(x)", "rsqrt(x)", "leaky_relu(x)", "leaky_relu(x, 0.0)",
              "leaky_relu(x, -2.0)", "hardtanh(x)", "hardtanh(x, -0.5, 2.0)", "clamp(x, min=-0.5, max=0.5)",
              "clamp_min(x, 0.1)", "clamp_max(x, -0.1)", "clamp(x, min=y)", "clamp(x, max=y)", "x + y", "x - y",
              "x * y", "x / y", "pow(x, y)", "x ** 2", "x ** 3", "2 ** x", "where(x > y, x, y)",
              "(x > 0.5).float() * x", "((x != x).float() + (x == y).float()) * y", "masked_fill(x, y < 0, -1.0)",
              "amax(x, -1)", "amax(x, 1)", "softmax(x, -1)"):
        c.ret(e, e)
    for m, e in (("relu_m", "ReLU()"), ("relu6_m", "ReLU6()"), ("ht_m", "Hardtanh(-2.0, 0.5)"),
                 ("lrelu_m", "LeakyReLU(0.2)"), ("hsig_m", "Hardsigmoid()"), ("hsw_m", "Hardswish()")):
        c.members.append("%s = %s" % (m, e))
        c.ret("%s(x)" % m, e)
    cases.append(c)

    # fixed shapes (no draws from R), so the cases above stay as they were
    c = Case("elementwise", "sin", "sin (torch.sin): alone, in a fused chain, of larger arguments, as a module's "
             "epilogue and broadcasting")
    c.params += ["x: [N, 3, 5]", "y: [N, 1, 5]"]
    lin = c.member("Linear(5, 5)", "lin")
    c.ret("sin(x)")
    c.ret("sin(x * 4) + sin(-x)", "larger and negative arguments")
    c.ret("sin(sin(x) * y) - exp(sin(y))", "chained with other elementwise ops")
    c.ret("sin(%s(x))" % lin, "the epilogue of a GEMM")
    c.ret("sin(input=y) * x", "keyword argument; broadcast")
    c.nonfinite = True
    cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# matmul: matmul, @, Linear
# ---------------------------------------------------------------------------

def gen_matmul(R):
    cases = []
    M, K, P = R.randint(2, 5), R.randint(2, 6), R.randint(2, 5)
    c = Case("matmul", "batched", "batched matmul [N, M, K] @ [N, K, P] by @ and matmul(), keyword "
                                  "arguments, transposed operands, K = 1, M = 1, P = 1")
    a = c.inp([M, K])
    b = c.inp([K, P])
    bt = c.inp([P, K])
    c.ret("%s @ %s" % (a, b), "@")
    c.ret("matmul(%s, %s)" % (a, b), "matmul")
    c.ret("matmul(input=%s, other=transpose(%s, 1, 2))" % (a, bt), "keywords, transposed rhs")
    c.ret("transpose(%s, -1, -2) @ %s" % (c.inp([K, M]), b), "transposed lhs")
    c.ret("%s @ %s" % (c.inp([M, 1]), c.inp([1, P])), "K = 1: outer product")
    c.ret("%s @ %s" % (c.inp([1, K]), c.inp([K, P])), "M = 1")
    c.ret("%s @ %s" % (c.inp([M, K]), c.inp([K, 1])), "P = 1")
    c.ret("%s @ %s @ %s" % (a, b, c.inp([P, 2])), "chained, left-assoc")
    cases.append(c)

    c = Case("matmul", "broadcast", "matmul with broadcast batch dims: [N, B, M, K] @ [N, 1, K, P], "
                                    "[N, 1, M, K] @ [N, B, K, P], and rank 5")
    B = R.randint(2, 3)
    c.ret("%s @ %s" % (c.inp([B, M, K]), c.inp([1, K, P])), "[N,B,M,K] @ [N,1,K,P]")
    c.ret("%s @ %s" % (c.inp([1, M, K]), c.inp([B, K, P])), "[N,1,M,K] @ [N,B,K,P]")
    c.ret("matmul(%s, %s)" % (c.inp([2, 1, M, K]), c.inp([1, B, K, P])), "[N,2,1,M,K] @ [N,1,B,K,P]")
    cases.append(c)

    c = Case("matmul", "rankmix", "matmul of operands of different rank (missing leading dims), "
                                  "the batch dim moved inward with permute and moved back")
    x4 = c.inp([B, M, K])
    y3 = c.inp([K, P])
    c.ret("permute(permute(%s, 1, 0, 2, 3) @ %s, 1, 0, 2, 3)" % (x4, y3), "[B,N,M,K] @ [N,K,P]")
    x3 = c.inp([M, K])
    y4 = c.inp([B, K, P])
    c.ret("permute(matmul(%s, permute(%s, 1, 0, 2, 3)), 1, 0, 2, 3)" % (x3, y4), "[N,M,K] @ [B,N,K,P]")
    v = c.inp([K])
    c.ret("%s @ reshape(%s, N, %d, 1)" % (x3, v, K), "matrix-vector as [N,M,K] @ [N,K,1]")
    c.ret("reshape(%s, N, 1, %d) @ permute(%s, 0, 2, 1)" % (v, K, c.inp([P, K])),
          "vector-matrix as [N,1,K] @ [N,K,P]")
    cases.append(c)

    c = Case("matmul", "vectors", "1-D operands as in torch.matmul: 3-D @ 1-D, 1-D @ 3-D, 2-D @ 1-D, "
                                  "1-D @ 2-D (the 1-D vector is a batch mean)")
    c.single_device = "the vector operand is a batch mean"
    Bm = c.inp([K])
    C3 = c.inp([M, K])
    D3 = c.inp([K, P])
    c.body.append("w = mean(%s, 0)" % Bm)                 # [K]
    c.ret("%s @ w" % C3, "3-D @ 1-D")
    c.ret("w @ %s" % D3, "1-D @ 3-D")
    c.ret("%s @ w" % Bm, "2-D @ 1-D, per row")
    c.ret("%s @ mean(%s, 0)" % (Bm, D3), "2-D @ 2-D, per row")
    cases.append(c)

    c = Case("matmul", "batch_cols", "matmul whose right operand has the batch dim as its column "
                                     "dim: 1-D @ [K, N], [M, K] @ [K, N], [1, K] @ [K, N]")
    c.single_device = "the left operand is a batch mean"
    Bm = c.inp([K])
    C3 = c.inp([M, K])
    c.body.append("w = mean(%s, 0)" % Bm)                 # [K]
    c.ret("w @ transpose(%s, 0, 1)" % Bm, "1-D @ 2-D [K, N] -> [N]")
    c.ret("mean(%s, 0) @ transpose(%s, 0, 1)" % (C3, Bm), "2-D @ 2-D [M, K] @ [K, N] -> [M, N]")
    c.ret("reshape(w, 1, %d) @ transpose(%s, 0, 1)" % (K, Bm), "[1, K] @ [K, N]")
    cases.append(c)

    c = Case("matmul", "batch_contract", "matmul contracting over the batch dim: 1-D @ 1-D (rank-0), "
                                         "1-D @ 2-D, 2-D @ 1-D, 2-D @ 2-D")
    c.single_device = "the product sums over the batch dim"
    u, v = c.inp([]), c.inp([])
    A = c.inp([P])
    Bm = c.inp([K])
    c.ret("%s @ %s" % (u, v), "1-D @ 1-D: rank-0")
    c.ret("matmul(%s, %s)" % (u, A), "1-D @ 2-D")
    c.ret("transpose(%s, 0, 1) @ %s" % (A, v), "2-D @ 1-D")
    c.ret("transpose(%s, 0, 1) @ %s" % (A, Bm), "2-D @ 2-D: [P, N] @ [N, K]")
    cases.append(c)

    c = Case("matmul", "matrices", "2-D operands as in torch.matmul: 3-D @ 2-D, 2-D @ 3-D, 4-D @ 2-D, "
                                   "2-D @ 2-D (matrices from batch means)")
    c.single_device = "2-D operands are batch means"
    C3 = c.inp([M, K])
    D3 = c.inp([K, P])
    E4 = c.inp([2, M, K])
    c.body.append("wkp = mean(%s, 0)" % D3)     # [K, P]
    c.body.append("wmk = mean(%s, 0)" % C3)     # [M, K]
    c.ret("%s @ wkp" % C3, "3-D @ 2-D")
    c.ret("wmk @ %s" % D3, "2-D @ 3-D")
    c.ret("%s @ wkp" % E4, "4-D @ 2-D")
    c.ret("wmk @ wkp", "2-D @ 2-D")
    c.ret("matmul(wmk, %s)" % c.inp([2, K, P]), "2-D @ 4-D")
    cases.append(c)

    c = Case("matmul", "linear", "Linear: bias and bias=false (keyword and positional), inputs of "
                                 "rank 2, 3, 4, in_features or out_features 1")
    i, o = R.randint(2, 7), R.randint(2, 7)
    specs = [
        ("Linear(%d, %d)" % (i, o), [i], "2-D"),
        ("Linear(%d, %d, bias=false)" % (i, o), [3, i], "3-D, no bias"),
        ("Linear(%d, %d, false)" % (i, o), [2, 3, i], "4-D, positional bias=false"),
        ("Linear(in_features=%d, out_features=%d)" % (i, o), [2, i], "keywords"),
        ("Linear(1, %d)" % o, [4, 1], "in_features 1"),
        ("Linear(%d, 1)" % i, [i], "out_features 1"),
        ("Linear(%d, %d)" % (i * 8, o), [i * 8], "wider"),
    ]
    for ctor, dims, doc in specs:
        m = c.member(ctor, "fc")
        c.ret("%s(%s)" % (m, c.inp(dims)), doc)
    cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# reduce: mean, sum, amax
# ---------------------------------------------------------------------------

def gen_reduce(R):
    cases = []
    for ci, rank in enumerate([1, 2, 3]):
        dims = [R.randint(2, 5) for _ in range(rank)]
        c = Case("reduce", "rank%d" % (rank + 1),
                 "mean / sum / amax of a rank-%d input over every non-batch dim, positive and "
                 "negative, keepdim true/false, positional and keyword forms" % (rank + 1))
        x = c.inp(dims)
        for d in range(1, rank + 1):
            for neg in (False, True):
                dd = d - (rank + 1) if neg else d
                op = R.choice(["mean", "sum", "amax"])
                keep = R.random() < 0.5
                style = R.randint(0, 3)
                if style == 0:
                    e = "%s(%s, %d)" % (op, x, dd) if not keep else "%s(%s, %d, true)" % (op, x, dd)
                elif style == 1:
                    e = "%s(%s, dim=%d, keepdim=%s)" % (op, x, dd, r(keep))
                elif style == 2:
                    e = "%s(%s, %d, keepdim=%s)" % (op, x, dd, r(keep))
                else:
                    e = "%s(input=%s, dim=%d, keepdim=%s)" % (op, x, dd, r(keep))
                c.ret(e, "%s dim %d keepdim %s" % (op, dd, keep))
        cases.append(c)

    c = Case("reduce", "all_ops", "each of mean, sum, amax over the last and a middle dim, "
                                  "broadcast back with keepdim, chained reductions, size-1 dims")
    a, b, d = R.randint(2, 4), R.randint(2, 4), R.randint(2, 6)
    x = c.inp([a, b, d])
    for op in ("mean", "sum", "amax"):
        c.ret("%s - %s(%s, -1, keepdim=true)" % (x, op, x), "%s broadcast back" % op)
        c.ret("%s(%s(%s, 2), 1)" % (op, op, x), "%s chained" % op)
    y = c.inp([1, d, 1])
    c.ret("sum(%s, 1)" % y, "size-1 dim, no keepdim")
    c.ret("amax(%s, -1, true)" % y, "size-1 dim, keepdim")
    c.ret("amax(-abs(%s), 2)" % x, "amax of negatives")
    c.ret("mean(%s, 1) * sum(%s, 1)" % (x, x), "two reductions combined")
    cases.append(c)

    c = Case("reduce", "batchdim", "mean / sum / amax over the batch dim (0 and negative), "
                                   "keepdim true/false")
    c.single_device = "a reduction over the batch dim is per replica under DataParallel"
    x = c.inp([3, 4])
    c.ret("mean(%s, 0)" % x)
    c.ret("sum(%s, -3, keepdim=true)" % x)
    c.ret("amax(%s, 0, true)" % x)
    c.ret("amax(%s, dim=-3)" % x)
    v = c.inp([])
    c.ret("sum(%s, 0)" % v, "1-D to rank-0")
    c.ret("mean(%s, -1, keepdim=true)" % v, "1-D keepdim")
    c.ret("sum(permute(%s, 1, 2, 0), -1)" % x, "the batch dim moved last")
    c.ret("amax(transpose(%s, 0, 1), 1, true)" % x, "the batch dim moved inward")
    cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# shape: flatten, Flatten, reshape, transpose, permute, cat
# ---------------------------------------------------------------------------

def gen_shape(R):
    cases = []
    a, b, d = R.randint(2, 4), R.randint(2, 4), R.randint(2, 5)
    c = Case("shape", "flatten", "flatten function and Flatten module over various ranges "
                                 "(positive, negative, keyword), on contiguous and transposed inputs")
    x = c.inp([a, b, d])
    c.members += ["fl = Flatten()", "fl2 = Flatten(2)", "fl12 = Flatten(1, 2)",
                  "flneg = Flatten(start_dim=-3, end_dim=-2)"]
    c.ret("flatten(%s, 1)" % x)
    c.ret("flatten(%s, 1, 2)" % x)
    c.ret("flatten(%s, -2)" % x)
    c.ret("flatten(%s, start_dim=2, end_dim=-1)" % x)
    c.ret("flatten(%s, 1, -2)" % x)
    c.ret("flatten(transpose(%s, 1, 3), 1) + 0" % x, "of a transposed input")
    c.ret("flatten(%s, 2, 2)" % x, "a single-dim range: no change")
    c.ret("fl(%s)" % x, "Flatten()")
    c.ret("fl2(%s)" % x, "Flatten(2)")
    c.ret("fl12(permute(%s, 0, 2, 1, 3))" % x, "Flatten(1, 2) of a permuted input")
    c.ret("flneg(%s)" % x, "Flatten(-3, -2)")
    cases.append(c)

    c = Case("shape", "reshape", "reshape with -1, with the batch name, list form, to more and "
                                 "fewer dims, of non-contiguous (transposed) inputs")
    x = c.inp([a, b, d])
    c.ret("reshape(%s, N, -1)" % x)
    c.ret("reshape(%s, N, %d, %d)" % (x, a * b, d))
    c.ret("reshape(%s, [N, -1, %d])" % (x, a))
    c.ret("reshape(%s, N, %d, 1, %d, 1)" % (x, a, b * d))
    c.ret("reshape(transpose(%s, 1, 3), N, -1)" % x, "of a transposed input")
    c.ret("reshape(permute(%s, 0, 3, 1, 2), N, %d, %d)" % (x, d * a, b), "of a permuted input")
    c.ret("reshape(%s, N, %d, %d, %d) * 2" % (x, d, b, a), "reinterpretation, then elementwise")
    cases.append(c)

    c = Case("shape", "batchmix", "shape ops whose result does not keep the batch dim first: "
                                  "flatten from dim 0 (the default), reshape(x, -1, k), "
                                  "transpose/permute moving the batch dim, cat over dim 0")
    c.single_device = "the output's first dim is not the batch dim (or mixes samples)"
    x = c.inp([a, b])
    y = c.inp([a, b])
    c.ret("flatten(%s)" % x, "flatten default start_dim 0")
    c.ret("flatten(%s, 0, 1)" % x)
    c.ret("reshape(%s, -1, %d)" % (x, b))
    c.ret("reshape(%s, -1)" % x)
    c.ret("transpose(%s, 0, 2)" % x)
    c.ret("permute(%s, 2, 0, 1)" % x)
    c.ret("cat([%s, %s])" % (x, y), "cat default dim 0")
    c.ret("cat([%s, %s, %s], 0)" % (x, y, x), "cat dim 0")
    c.ret("cat([%s, %s], dim=-3)" % (x, y), "cat dim -3 (the batch)")
    cases.append(c)

    c = Case("shape", "transpose", "transpose over every pair of non-batch dims, negative dims, "
                                   "a dim with itself; results combined elementwise")
    dims = [R.randint(2, 4) for _ in range(3)]
    x = c.inp(dims)
    pairs = [(1, 2), (1, 3), (2, 3), (-1, -2), (3, -3), (-2, 1), (2, 2)]
    for p0, p1 in pairs:
        c.ret("transpose(%s, %d, %d)" % (x, p0, p1))
    y = c.inp([dims[1], dims[0], dims[2]])
    c.ret("transpose(%s, 1, 2) + %s" % (x, y), "transposed + contiguous")
    c.ret("transpose(transpose(%s, 1, 3), 3, 1) - %s" % (x, x), "round trip (zeros) ... plus")
    c.rets.pop()
    c.ret("transpose(transpose(%s, 1, 3), 3, 1) * 3" % x, "round trip")
    cases.append(c)

    c = Case("shape", "permute", "permute with random orders of the non-batch dims, negative "
                                 "indices, list form; fed to elementwise and reductions")
    dims = [R.randint(2, 4) for _ in range(4)]
    x = c.inp(dims)
    for i in range(6):
        order = list(range(1, 5))
        R.shuffle(order)
        order = [0] + order
        txt = [str(o - 5) if R.random() < 0.4 else str(o) for o in order]
        if i == 2:
            c.ret("permute(%s, [%s])" % (x, ", ".join(txt)), "list form")
        elif i == 3:
            c.ret("sum(permute(%s, %s), -1)" % (x, ", ".join(txt)), "then a reduction")
        elif i == 4:
            c.ret("permute(%s, %s) + 1" % (x, ", ".join(txt)), "then elementwise")
        else:
            c.ret("permute(%s, %s)" % (x, ", ".join(txt)))
    c.ret("permute(%s, 0, 1, 2, 3, 4)" % x, "identity permutation")
    cases.append(c)

    c = Case("shape", "cat", "cat over dims 1, 2, 3, -1, -2 of two and three tensors of different "
                             "sizes along the cat dim, keyword dim, a tensor with itself, transposed inputs")
    a, b, d = R.randint(1, 3), R.randint(2, 4), R.randint(2, 4)
    xa = c.inp([a, b, d])
    xb = c.inp([a + 1, b, d])
    yb = c.inp([a, b + 2, d])
    zc = c.inp([a, b, 1])
    c.ret("cat([%s, %s], 1)" % (xa, xb), "dim 1")
    c.ret("cat([%s, %s, %s], dim=1)" % (xb, xa, xb), "three tensors, keyword")
    c.ret("cat([%s, %s], 2)" % (xa, yb), "dim 2")
    c.ret("cat([%s, %s], -2)" % (yb, xa), "dim -2")
    c.ret("cat([%s, %s, %s], -1)" % (xa, zc, xa), "dim -1")
    c.ret("cat([%s, %s], 3)" % (xa, xa), "with itself")
    c.ret("cat([transpose(%s, 1, 2), %s], 1)" % (yb, c.inp([b, a, d])),
          "of a transposed input")
    c.ret("cat([%s], 1)" % xa, "a single tensor")
    c.ret("cat([%s + 1, %s * 2], 1) - 1" % (xa, xb), "elementwise in and out")
    cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# activation: ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, functions, dropout,
# Identity, Sequential, ModuleList
# ---------------------------------------------------------------------------

def gen_activation(R):
    cases = []
    a, d = R.randint(2, 4), R.randint(3, 7)
    c = Case("activation", "modules", "ReLU, GELU (none, tanh), SiLU, Sigmoid, Tanh modules, "
                                      "inplace=true, on inputs scaled to reach the tails")
    c.members += ["relu = ReLU()", "relu_ip = ReLU(inplace=true)", "gelu = GELU()",
                  "gelu_n = GELU(approximate=\"none\")", "gelu_t = GELU(approximate=\"tanh\")",
                  "silu = SiLU()", "sig = Sigmoid()", "tanh_m = Tanh()", "silu_ip = SiLU(true)"]
    x = c.inp([a, d])
    c.body.append("big = %s * 6" % x)
    for m in ("relu", "gelu", "gelu_n", "gelu_t", "silu", "sig", "tanh_m"):
        c.ret("%s(big)" % m, m)
    # in PyTorch an in-place activation overwrites its input: give it a value read nowhere else
    c.ret("relu_ip(%s * 6)" % x, "ReLU(inplace=true) on a fresh value")
    c.ret("silu_ip(%s * 6)" % x, "SiLU(true) on a fresh value")
    c.nonfinite = True
    cases.append(c)

    c = Case("activation", "functions", "relu, gelu (default, approximate keyword and positional "
                                        "\"tanh\"), silu, sigmoid, tanh functions")
    x = c.inp([a, d])
    c.body.append("big = %s * 6" % x)
    for e in ("relu(big)", "gelu(big)", "gelu(big, approximate=\"tanh\")", "gelu(big, \"tanh\")",
              "gelu(big, approximate=\"none\")", "silu(big)", "sigmoid(big)", "tanh(big)",
              "sigmoid(-big) + tanh(big * 0.5)"):
        c.ret(e)
    c.nonfinite = True
    cases.append(c)

    dims = [R.randint(2, 5) for _ in range(3)]
    c = Case("activation", "softmax", "Softmax module and softmax / log_softmax functions over every "
                                      "non-batch dim, positive and negative, of rank 2-4 inputs; "
                                      "Softmax() with no dim (dim 1 for 2-D and 4-D)")
    x2 = c.inp(dims[:1])
    x3 = c.inp(dims[:2])
    x4 = c.inp(dims)
    for x, rank in ((x2, 2), (x3, 3), (x4, 4)):
        for dd in range(1, rank):
            neg = dd - rank
            m = c.member("Softmax(dim=%d)" % (dd if R.random() < 0.5 else neg), "sm")
            c.ret("%s(%s)" % (m, x))
            c.ret("softmax(%s, %d)" % (x, neg if R.random() < 0.5 else dd))
            c.ret("log_softmax(%s, dim=%d)" % (x, neg if R.random() < 0.5 else dd))
    m = c.member("Softmax()", "sm")
    c.ret("%s(%s)" % (m, x2), "Softmax() on 2-D: dim 1")
    c.ret("%s(%s)" % (m, x4), "Softmax() on 4-D: dim 1")
    m = c.member("Softmax(1)", "sm")
    c.ret("%s(%s)" % (m, x3), "positional dim")
    cases.append(c)

    c = Case("activation", "softmax_range", "softmax and log_softmax of large-magnitude inputs "
                                            "(stability: the max must be subtracted)")
    x = c.inp([3, 6])
    c.ret("softmax(%s * 40, -1)" % x)
    c.ret("log_softmax(%s * 40, -1)" % x)
    c.ret("softmax(%s * 40 + 100, 1)" % x)
    c.ret("log_softmax(%s * 40 - 100, 2)" % x)
    cases.append(c)

    c = Case("activation", "softmax_batch", "softmax / log_softmax over the batch dim (0 and negative), "
                                            "and Softmax() on a 3-D input (PyTorch picks dim 0)")
    c.single_device = "softmax over the batch dim mixes samples"
    x3 = c.inp([3, 4])
    x2 = c.inp([5])
    c.members.append("sm = Softmax()")
    c.ret("softmax(%s, 0)" % x3)
    c.ret("log_softmax(%s, -2)" % x2)
    c.ret("sm(%s)" % x3, "Softmax() on 3-D: dim 0")
    c.ret("softmax(transpose(%s, 0, 1), 1)" % x2, "the batch dim moved last")
    c.ret("log_softmax(permute(%s, 1, 2, 0), -1)" % x3, "the batch dim moved last")
    cases.append(c)

    c = Case("activation", "dropout_identity", "Dropout, Dropout2d (2-D and 4-D inputs), dropout "
                                               "function (default p, p=0, p=1.0) and Identity with "
                                               "ignored arguments are identities at inference")
    c.members += ["d0 = Dropout()", "d1 = Dropout(0.2)", "d2 = Dropout(p=0, inplace=true)",
                  "dd = Dropout2d()", "dd2 = Dropout2d(p=0.3)", "idn = Identity()",
                  "idn2 = Identity(3)"]
    x = c.inp([3, 4, 5])
    y = c.inp([6])
    c.ret("d0(%s)" % x)
    c.ret("d1(%s) + 1" % x)
    c.ret("d2(%s)" % y)
    c.ret("dd(%s)" % x, "Dropout2d on 4-D")
    c.ret("dd2(%s)" % y, "Dropout2d on 2-D")
    c.ret("idn(%s)" % x)
    c.ret("idn2(%s) * 2" % y)
    c.ret("dropout(%s)" % x)
    c.ret("dropout(%s, 0.0)" % y)
    c.ret("dropout(%s, p=1.0)" % x, "p=1 is still the identity in eval")
    c.ret("%s" % y, "an input returned unchanged")
    cases.append(c)

    c = Case("activation", "identity_kwargs", "Identity accepts and ignores any arguments, "
                                              "keywords included (docs/language.md section 9)")
    c.members += ["idn = Identity(54, unused=true)", "idn2 = Identity(in_features=3)"]
    c.params.append("x: [N, 4]")
    c.ret("idn(x) + idn2(x)")
    cases.append(c)

    c = Case("activation", "containers", "Sequential (builtins, nested, indexed with positive and "
                                         "negative indices, iterated with for), ModuleList from a "
                                         "comprehension and from a list, user modules inside")
    c.extra = ("module Block(dim: int) {\n"
               "    fc = Linear(dim, dim)\n"
               "    act = GELU(approximate=\"tanh\")\n"
               "    forward(x: [N, dim]) { return act(fc(x)) + x }\n"
               "}")
    c.members += ["mlp = Sequential(Linear(5, 8), ReLU(), Linear(8, 5))",
                  "nest = Sequential(Sequential(SiLU(), Identity()), GELU(approximate=\"tanh\"), Dropout(0.1))",
                  "blocks = [Block(5) for _ in range(3)]",
                  "mixed = ModuleList([Linear(5, 5), Tanh(), Linear(5, 5)])",
                  "seqb = Sequential(Block(5), Block(5))"]
    c.params.append("x: [N, 5]")
    c.ret("mlp(x)")
    c.ret("nest(x)")
    c.body.append("h = x")
    c.body.append("for blk in blocks { h = blk(h) }")
    c.ret("h", "ModuleList for loop")
    c.body.append("g = x")
    c.body.append("for m in mixed {\n            g = m(g)\n            g = g * 0.5\n        }")
    c.ret("g", "multi-statement loop body")
    c.ret("blocks[-1](mixed[1](x))", "ModuleList entries")
    c.ret("seqb(x)", "Sequential of user modules")
    cases.append(c)

    c = Case("activation", "sequential_iter", "a Sequential iterated with for and indexed with "
                                              "positive and negative indices (docs/language.md "
                                              "sections 7.2 and 10)")
    c.extra = ("module Block(dim: int) {\n"
               "    fc = Linear(dim, dim)\n"
               "    forward(x: [N, dim]) { return relu(fc(x)) + x }\n"
               "}")
    c.members += ["mlp = Sequential(Linear(5, 8), ReLU(), Linear(8, 5))",
                  "seqb = Sequential(Block(5), Block(5))"]
    c.params.append("x: [N, 5]")
    c.ret("mlp[-1](mlp[1](mlp[0](x)))", "indexed entries")
    c.body.append("s = x")
    c.body.append("for blk in seqb { s = blk(s) }")
    c.ret("seqb(x) + s", "Sequential called and iterated")
    cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# embedding
# ---------------------------------------------------------------------------

def gen_embedding(R):
    cases = []
    V, D = R.randint(5, 20), R.randint(2, 6)
    c = Case("embedding", "basic", "Embedding on i64 indices of rank 1, 2 and 3, padding_idx "
                                   "(positive and negative), then a reduction and a Linear")
    c.members += ["emb = Embedding(%d, %d)" % (V, D),
                  "embp = Embedding(%d, %d, padding_idx=0)" % (V, D + 1),
                  "embn = Embedding(num_embeddings=%d, embedding_dim=%d, padding_idx=-1)" % (V, D),
                  "fc = Linear(%d, 3)" % D]
    c.params += ["ids: i64[N, 6]", "one: i64[N]", "grid: i64[N, 2, 3]"]
    c.ret("emb(ids)", "[N, 6] -> [N, 6, D]")
    c.ret("emb(one)", "[N] -> [N, D]")
    c.ret("emb(grid)", "rank 3")
    c.ret("embp(ids)", "padding_idx 0")
    c.ret("embn(grid)", "padding_idx -1")
    c.ret("fc(mean(emb(ids), 1))", "mean over the sequence, then Linear")
    c.ret("emb(ids) + embn(ids)", "two tables, one index tensor")
    cases.append(c)

    c = Case("embedding", "tokens", "a token + position embedding sum followed by LayerNorm, as in a "
                                    "transformer; indices fed to two tables of different sizes")
    c.members += ["tok = Embedding(%d, 8)" % (V + 7), "pos = Embedding(%d, 8)" % V,
                  "ln = LayerNorm(8)"]
    c.params += ["ids: i64[N, 5]"]
    c.ret("ln(tok(ids) + pos(ids))")
    c.ret("softmax(tok(ids) @ transpose(pos(ids), 1, 2), -1)")
    cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# mask: comparisons, bool masks, where/masked_fill, dtype conversion, tensors
# created in forward (arange, ones, full, tril), scaled_dot_product_attention
# ---------------------------------------------------------------------------

def gen_mask(R):
    cases = []
    S, D = R.randint(3, 7), R.randint(2, 5)
    c = Case("mask", "compare", "comparisons of tensors and numbers to bool, & | ~, logical_*, "
                                "where and masked_fill (bool results returned as float times an input, so a "
                                "perturbed input shows)")
    x, y = c.inp([S, D]), c.inp([S, D])
    c.ret("(%s > %s).float() * %s" % (x, y, x), "tensor > tensor")
    c.ret("(%s <= 0.25).float() * %s" % (x, y), "tensor <= number")
    c.ret("((%s == %s).float() + (%s != %s).float()) * %s" % (x, x, x, y, y), "== and !=")
    c.ret("((%s > 0) & (%s < 0.5) | ~(%s >= -0.3)).float() * %s" % (x, y, y, x), "& | ~")
    c.ret("(logical_and(%s > 0, logical_not(%s < 0)).float() + logical_or(%s > 1, %s < -1).float()) * %s"
          % (x, y, x, y, y), "logical_and / _or / _not")
    c.ret("where(%s > %s, %s, %s)" % (x, y, x, y), "where of two tensors")
    c.ret("where(%s > 0, %s, -1.0)" % (y, x), "where with a scalar")
    c.ret("masked_fill(%s, %s < 0, -1.0)" % (x, y), "masked_fill")
    c.ret("softmax(masked_fill(%s, %s < 0, float(\"-inf\")), -1)" % (x, y), "masked_fill -inf then softmax")
    c.nonfinite = True
    cases.append(c)

    c = Case("mask", "create", "tensors created in forward: arange, ones, zeros, full, *_like, tril, triu, "
                               "and dtype conversions; they broadcast against the batch")
    x = c.inp([S, S])
    c.ret("%s + arange(%d).float()" % (x, S), "arange(end)")
    c.ret("%s * arange(1, %d, 2).float()" % (x, 2 * S), "arange(start, end, step)")
    c.ret("%s + arange(0.5, %g, 0.5, dtype=float32)" % (x, 0.5 * (S + 1)), "float arange")
    c.ret("%s * ones(%d, %d) + zeros(%d)" % (x, S, S, S), "ones, zeros")
    c.ret("%s + full((%d, %d), 2.5)" % (x, S, S), "full")
    c.ret("%s * ones_like(%s) + zeros_like(%s) + full_like(%s, 0.5)" % (x, x, x, x), "*_like")
    c.ret("tril(%s)" % x, "tril")
    c.ret("triu(%s, 1) + tril(%s, -1)" % (x, x), "triu/tril diagonal")
    c.ret("where(tril(ones(%d, %d, dtype=bool)), %s, -1.0)" % (S, S, x), "causal mask (GPT-2)")
    c.ret("softmax(%s + (1.0 - (%s > 0).to(float32)) * finfo(float32).min, -1)" % (x, x),
          "extended attention mask (BERT), added before a softmax")
    c.ret("%s.long().float() + %s.bool().float() + %s.type_as(%s)" % (x, x, (x + " > 0").join("()"), x),
          "long(), bool(), type_as")
    cases.append(c)

    H, L, E = R.randint(1, 3), R.randint(2, 6), R.randint(2, 8)
    c = Case("mask", "attention", "scaled_dot_product_attention (PyTorch 2 semantics; the reference is "
                                  "written by hand): plain, causal, bool and float masks, scale")
    c.single_device = None
    q, k, v = c.inp([H, L, E]), c.inp([H, L + 1, E]), c.inp([H, L + 1, E + 1])
    m = c.inp([H, L, L + 1])
    c.ret("scaled_dot_product_attention(%s, %s, %s)" % (q, k, v), "plain")
    c.ret("scaled_dot_product_attention(%s, %s, %s, is_causal=True)" % (q, q, q), "causal")
    c.ret("scaled_dot_product_attention(%s, %s, %s, attn_mask=%s > -0.5)" % (q, k, v, m), "bool mask")
    c.ret("scaled_dot_product_attention(%s, %s, %s, %s, scale=0.3)" % (q, k, v, m), "float mask, scale")
    cases.append(c)
    return (cases + gen_mha_masks(random.Random(zlib.crc32(b"mask/mha_masks"))) +
            gen_int_neg_softmax_dtype(random.Random(zlib.crc32(b"mask/int_neg_softmax_dtype"))))


def gen_int_neg_softmax_dtype(R):
    """Unary minus on int64 tensors (an int64 result, used as indices and in
    arithmetic) and softmax / log_softmax's dtype argument (F.softmax's: the
    input converted first, so an int64 tensor takes a softmax)."""
    V, D, S = R.randint(6, 12), R.randint(2, 5), R.randint(3, 6)
    c = Case("mask", "int_neg_softmax_dtype", "unary '-' on int64 tensors and softmax(x, dim, dtype=float32) "
                                              "(outputs times a float input or through an Embedding, so a "
                                              "perturbed input shows)")
    c.members.append("emb = Embedding(%d, %d)" % (V, D))
    c.params += ["ids: i64[N, %d]" % S]
    x = c.inp([S])
    c.ret("emb(ids)", "the Embedding that gives the inputs their range")
    c.ret("emb(-ids + %d)" % (V - 1), "-ids as indices")
    c.ret("%s * (-ids).float() + (-(-ids)).float()" % x, "-ids to float, twice negated")
    c.ret("%s * -ids" % x, "float * -int64 promotes to float")
    c.ret("softmax(ids, -1, dtype=float32) * %s" % x, "softmax of an int64 tensor with dtype=float32")
    c.ret("log_softmax(-ids, dim=1, dtype=float) + %s" % x, "log_softmax of -ids, dtype=float")
    c.ret("%s.softmax(-1, dtype=float32) + softmax(%s, 1, dtype=None)" % (x, x), "the method form, dtype=None")
    return [c]


def gen_mha_masks(R):
    """MultiheadAttention's attn_mask and key_padding_mask (PyTorch 1.13, eval):
    bool (True masked out) and float (added) masks, 2-D [L, S] and 3-D
    [N*heads, L, S] attn_mask, [N, S] key_padding_mask, their combinations,
    with the weights (averaged or per head) and without. Key 0 is never
    masked, so no row is fully masked (PyTorch gives NaN there)."""
    h = R.choice([2, 4])
    E = h * R.randint(2, 4)
    L, S = R.randint(2, 6), R.randint(2, 7)
    c = Case("mask", "mha_masks", "MultiheadAttention's attn_mask (bool or float, [L, S] or [N*heads, L, S]) and "
                                  "key_padding_mask ([N, S], bool or float), alone and together, need_weights and "
                                  "average_attn_weights, batch_first true and false, against "
                                  "torch.nn.MultiheadAttention (its general path)")
    c.members += ["a = MultiheadAttention(%d, %d, batch_first=true)" % (E, h),
                  "t = MultiheadAttention(%d, %d)" % (E, h),
                  "am = Parameter(empty(%d, %d).normal_(std=1.0))" % (L, S)]
    x, y, kp, a3 = c.inp([L, E]), c.inp([S, E]), c.inp([S]), c.inp([h, L, S])
    c.body.append("keep0 = arange(%d) > 0" % S)
    c.body.append("kb = (%s > 0.6) & keep0" % kp)
    c.body.append("kf = relu(%s - 0.6) * keep0.float()" % kp)
    c.body.append("cm = triu(ones(%d, %d, dtype=bool), 1)" % (L, S))
    c.body.append("o1, w1 = a(%s, %s, %s, attn_mask=cm)" % (x, y, y))
    c.body.append("o2, w2 = a(%s, %s, %s, key_padding_mask=kb)" % (x, y, y))
    c.body.append("o3, w3 = a(%s, %s, %s, kb, true, cm, false)" % (x, y, y))
    c.body.append("o4, w4 = a(query=%s, key=%s, value=%s, attn_mask=am, key_padding_mask=kb)" % (x, y, y))
    c.body.append("o5, _ = a(%s, %s, %s, attn_mask=flatten(%s, 0, 1), need_weights=false)" % (x, y, y, a3))
    c.body.append("o6, w6 = a(%s, %s, %s, key_padding_mask=%s, average_attn_weights=false)" % (x, y, y, kp))
    c.body.append("o7, w7 = a(%s, %s, %s, key_padding_mask=kf, attn_mask=cm)" % (x, y, y))
    c.body.append("o8, w8 = t(permute(%s, 1, 0, 2), permute(%s, 1, 0, 2), permute(%s, 1, 0, 2), "
                  "attn_mask=flatten(%s > 0.3, 0, 1) & keep0, key_padding_mask=kb)" % (x, y, y, a3))
    c.body.append("o9, w9 = a(%s, %s, %s, attn_mask=triu(full((%d, %d), float(\"-inf\")), 1))" % (x, y, y, L, S))
    c.ret("o1", "bool attn_mask [L, S] (causal-like)")
    c.ret("w1", "its head-averaged weights")
    c.ret("o2", "bool key_padding_mask [N, S]")
    c.ret("w2", "its weights")
    c.ret("w3", "bool key_padding_mask and bool attn_mask, per-head weights (positional arguments)")
    c.ret("o4", "float attn_mask [L, S] with a bool key_padding_mask")
    c.ret("w4", "its weights")
    c.ret("o5", "float attn_mask [N*heads, L, S], need_weights=false")
    c.ret("o6", "float key_padding_mask, added")
    c.ret("w6", "its per-head weights")
    c.ret("o7", "bool attn_mask with a float key_padding_mask (masked where it is not 0)")
    c.ret("w7", "its weights")
    c.ret("permute(o8, 1, 0, 2)", "batch_first=false, bool attn_mask [N*heads, L, S] and key_padding_mask")
    c.ret("w8", "its weights")
    c.ret("o9", "float attn_mask with -inf above the diagonal (the usual causal float mask)")
    c.ret("w9", "its weights")
    return [c]


# ---------------------------------------------------------------------------
# attention: the fused attention kernel (KK_ATTN, compiler/attn.c) on the
# forms that lower to it, at sizes that are not multiples of its blocks
# (32 queries x 64 keys in C, 16 x 32 in CUDA)
# ---------------------------------------------------------------------------

def _sdpa_plain_and_masked(c, H, L, S, E, Ev, mask, label):
    """Two outputs of case c: scaled_dot_product_attention of q [H, L, E],
    k [H, S, E], v [H, S, Ev], plain and with mask (a format of the mask
    input [H, L, S]) as its fourth argument."""
    q, k, v = c.inp([H, L, E]), c.inp([H, S, E]), c.inp([H, S, Ev])
    m = c.inp([H, L, S])
    c.ret("scaled_dot_product_attention(%s, %s, %s)" % (q, k, v), "plain")
    c.ret("scaled_dot_product_attention(%s, %s, %s, %s)" % (q, k, v, mask % m), label)


def _not_multiple(R, lo, hi, *blocks):
    while True:
        v = R.randint(lo, hi)
        if all(v % b for b in blocks):
            return v


def gen_attention(R):
    cases = []
    H, L, S = R.randint(1, 3), _not_multiple(R, 33, 80, 16, 32), _not_multiple(R, 65, 140, 32, 64)
    E, Ev = R.randint(3, 24), R.randint(3, 24)
    c = Case("attention", "sdpa", "scaled_dot_product_attention with L, S past one block: plain, causal "
                                  "(L == S), bool and float masks, scale")
    c.single_device = None
    q, k, v = c.inp([H, L, E]), c.inp([H, S, E]), c.inp([H, S, Ev])
    qs = c.inp([H, S, E])
    m = c.inp([H, L, S])
    c.ret("scaled_dot_product_attention(%s, %s, %s)" % (q, k, v), "plain")
    c.ret("scaled_dot_product_attention(%s, %s, %s, is_causal=True)" % (qs, k, v), "causal")
    c.ret("scaled_dot_product_attention(%s, %s, %s, attn_mask=%s > -0.5)" % (q, k, v, m), "bool mask")
    c.ret("scaled_dot_product_attention(%s, %s, %s, %s, scale=0.3)" % (q, k, v, m), "float mask, scale")
    cases.append(c)

    h, d = R.randint(2, 4), R.randint(4, 20)
    S = _not_multiple(R, 40, 100, 16, 32)
    c = Case("attention", "handwritten", "attention as BERT and GPT-2 write it: [N, S, h*d] split into heads "
                                         "by view and permute, q @ k.transpose(-1, -2), scale, the additive "
                                         "mask [N, 1, 1, S] or the causal where, softmax, @ v, permute back")
    c.single_device = None
    c.extra = """module Heads(h: int, d: int) {
    forward(x: [N, S, D], y: [N, S, D], z: [N, S, D], mask: [N, 1, 1, S], causal: bool) {
        q = x.view(x.size()[:-1] + (h, d)).permute(0, 2, 1, 3)
        k = y.view(y.size()[:-1] + (h, d)).permute(0, 2, 1, 3)
        v = z.view(z.size()[:-1] + (h, d)).permute(0, 2, 1, 3)
        s = torch.matmul(q, k.transpose(-1, -2))
        s = s / d ** 0.5
        if causal {
            s = torch.where(tril(ones(S, S, dtype=bool)).view(1, 1, S, S), s, torch.finfo(float32).min)
        } else {
            s = s + mask
        }
        p = nn.functional.softmax(s, dim=-1)
        o = torch.matmul(p, v)
        o = o.permute(0, 2, 1, 3).contiguous()
        return o.view(o.size()[:-2] + (h * d,))
    }
}"""
    c.members.append("heads = Heads(%d, %d)" % (h, d))
    x, y, z = c.inp([S, h * d]), c.inp([S, h * d]), c.inp([S, h * d])
    mk = c.inp([1, 1, S])
    c.let("(1.0 - (%s > 0).to(float32)) * torch.finfo(float32).min" % mk, "m")
    c.ret("heads(%s, %s, %s, m1, false)" % (x, y, z), "BERT: additive mask")
    c.ret("heads(%s, %s, %s, m1, true)" % (x, y, z), "GPT-2: causal where")
    cases.append(c)

    hh = R.choice([2, 4])
    Em = hh * R.randint(3, 8)
    Lm = _not_multiple(R, 33, 70, 16, 32)
    c = Case("attention", "mha", "MultiheadAttention (batch_first, need_weights=false) as ViT calls it, with "
                                 "a sequence past one block, against torch.nn.MultiheadAttention")
    c.single_device = None
    c.members.append("att = MultiheadAttention(%d, %d, batch_first=true)" % (Em, hh))
    x = c.inp([Lm, Em])
    c.body.append("o, _ = att(%s, %s, %s, need_weights=false)" % (x, x, x))
    c.ret("o", "self-attention")
    cases.append(c)

    c = Case("attention", "wide", "a head dim past the fused kernel's limit (128): the unfused path; and "
                                  "one at the limit")
    c.single_device = None
    Lw = R.randint(5, 40)
    q, k = c.inp([1, Lw, 130]), c.inp([1, Lw + 3, 130])
    q2, k2 = c.inp([1, Lw, 128]), c.inp([1, Lw + 3, 128])
    c.ret("scaled_dot_product_attention(%s, %s, %s)" % (q, k, k), "E = 130")
    c.ret("scaled_dot_product_attention(%s, %s, %s)" % (q2, k2, k2), "E = 128")
    cases.append(c)

    # drawn last so the cases above keep their draws
    H, L, S = R.randint(1, 3), _not_multiple(R, 17, 47, 4, 16), _not_multiple(R, 17, 47, 16)
    E, Ev = R.randint(3, 5), _not_multiple(R, 17, 30, 16)
    c = Case("attention", "short", "scaled_dot_product_attention with 16 < S <= 64 keys, not a multiple of 16, "
                                   "and a small head (the C kernel's one-key-block form, ViT's 17 tokens): plain, "
                                   "causal (L == S), bool and float masks; Ev past 16 (two output lane blocks)")
    c.single_device = None
    q, k, v = c.inp([H, L, E]), c.inp([H, S, E]), c.inp([H, S, Ev])
    qs = c.inp([H, S, E])
    m = c.inp([H, L, S])
    c.ret("scaled_dot_product_attention(%s, %s, %s)" % (q, k, v), "plain")
    c.ret("scaled_dot_product_attention(%s, %s, %s, is_causal=True)" % (qs, k, v), "causal")
    c.ret("scaled_dot_product_attention(%s, %s, %s, attn_mask=%s > -0.5)" % (q, k, v, m), "bool mask")
    c.ret("scaled_dot_product_attention(%s, %s, %s, %s, scale=0.3)" % (q, k, v, m), "float mask, scale")
    cases.append(c)

    L, S = R.randint(129, 250), _not_multiple(R, 17, 31, 16)
    c = Case("attention", "short_blocks", "the one-key-block form with L past one query block (128): "
                                          "L * S * E under the GEMM form's bound")
    c.single_device = None
    _sdpa_plain_and_masked(c, 1, L, S, 2, R.randint(3, 20), "attn_mask=%s > -0.5", "bool mask")
    cases.append(c)

    # drawn last so the cases above keep their draws
    L, S = R.randint(5, 20), _not_multiple(R, 65, 100, 16)
    c = Case("attention", "tiled", "more than 64 keys (not a multiple of 16) with L * S * E under the GEMM "
                                   "form's bound: the C kernel's tiled online-softmax form, several key blocks")
    c.single_device = None
    _sdpa_plain_and_masked(c, 2, L, S, 3, R.randint(3, 20), "%s", "float mask")
    cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# fusion: chains the fuser merges
# ---------------------------------------------------------------------------

def gen_fusion(R):
    cases = []
    d = R.randint(4, 9)
    c = Case("fusion", "residual", "Linear -> ReLU -> add residual, GELU MLP with residual and "
                                   "LayerNorm, a value with several consumers, intermediate results "
                                   "also returned")
    c.members += ["fc = Linear(%d, %d)" % (d, d), "fc1 = Linear(%d, %d)" % (d, 2 * d),
                  "fc2 = Linear(%d, %d)" % (2 * d, d), "ln = LayerNorm(%d)" % d,
                  "fcb = Linear(%d, %d, bias=false)" % (d, d)]
    c.params.append("x: [N, 3, %d]" % d)
    c.body.append("h = relu(fc(x))")
    c.body.append("r = x + h")
    c.body.append("m = ln(r + fc2(gelu(fc1(r))))")
    c.ret("r", "linear -> relu -> residual add")
    c.ret("m", "transformer MLP block")
    c.ret("h * 2 - m", "fan-out of h")
    c.ret("relu(fcb(x)) + fcb(x) * sigmoid(x)", "bias-free linear used twice")
    cases.append(c)

    c = Case("fusion", "conv_bn_relu", "Conv2d -> BatchNorm2d -> ReLU chains, with bias=false, a "
                                       "residual shortcut (1x1 conv + BN), pooling and a head")
    c.members += ["conv1 = Conv2d(3, 6, 3, padding=1, bias=false)", "bn1 = BatchNorm2d(6)",
                  "conv2 = Conv2d(6, 6, 3, padding=1)", "bn2 = BatchNorm2d(6, eps=1e-3)",
                  "sc = Sequential(Conv2d(3, 6, 1, stride=1, bias=false), BatchNorm2d(6))",
                  "pool = AdaptiveAvgPool2d((1, 1))", "head = Linear(6, 4)",
                  "conv3 = Conv2d(6, 4, 3, stride=2, padding=1)", "bn3 = BatchNorm2d(4, affine=false)",
                  "mp = MaxPool2d(2)"]
    c.params.append("x: [N, 3, 8, 8]")
    c.body.append("y = relu(bn1(conv1(x)))")
    c.body.append("y = relu(bn2(conv2(y)) + sc(x))")
    c.ret("head(flatten(pool(y), 1))", "head")
    c.ret("y", "block output")
    c.ret("mp(relu(bn3(conv3(y))))", "conv -> bn(affine=false) -> relu -> maxpool")
    cases.append(c)

    # batch norm folded into the layer before it (compiler/fold_bn.c), and
    # where it must not be; no draws from R, so later cases stay as they were
    c = Case("fusion", "fold_bn", "BatchNorm folded into the conv2d / conv1d / linear before it "
                                  "(random running statistics and affine, eps from 1e-4 to 0.1)")
    c.members += ["c1 = Conv2d(3, 8, 3, padding=1)", "b1 = BatchNorm2d(8, eps=0.1)",
                  "c2 = Conv2d(8, 8, 3, padding=1, groups=8, bias=false)", "b2 = BatchNorm2d(8, eps=1e-3)",
                  "c3 = Conv2d(8, 4, 1, stride=2, bias=false)", "b3 = BatchNorm2d(4, affine=false)",
                  "d1 = Conv1d(3, 5, 3, padding=1)", "e1 = BatchNorm1d(5, eps=1e-2)",
                  "f1 = Linear(12, 6)", "g1 = BatchNorm1d(6, eps=1e-4)"]
    c.params += ["x: [N, 3, 8, 8]", "s: [N, 3, 10]", "v: [N, 12]"]
    c.body.append("y = relu(b1(c1(x)))")
    c.ret("b2(c2(y))", "depthwise conv (bias=false) -> bn")
    c.ret("b3(c3(y))", "1x1 stride-2 conv (bias=false) -> bn(affine=false)")
    c.ret("e1(d1(s))", "conv1d -> BatchNorm1d")
    c.ret("relu(g1(f1(v)))", "linear -> BatchNorm1d -> relu")
    cases.append(c)

    c = Case("fusion", "fold_bn_not", "BatchNorm that must not be folded: its input has a second use, "
                                      "it comes before the conv, batch statistics, a linear over the last dim")
    c.single_device = "batch statistics are per replica under DataParallel"
    c.members += ["c1 = Conv2d(3, 4, 3, padding=1)", "b1 = BatchNorm2d(4)",
                  "b2 = BatchNorm2d(3, eps=1e-2)", "c2 = Conv2d(3, 4, 3)",
                  "c3 = Conv2d(3, 4, 3)", "b3 = BatchNorm2d(4, track_running_stats=false)",
                  "f1 = Linear(6, 5)", "g1 = BatchNorm1d(4)"]
    c.params += ["x: [N, 3, 6, 6]", "t: [N, 4, 6]"]
    c.body.append("h = c1(x)")
    c.ret("b1(h) + h", "conv -> bn, the conv's output used again")
    c.ret("c2(b2(x))", "bn before the conv")
    c.ret("b3(c3(x))", "conv -> bn with batch statistics")
    c.ret("g1(f1(t))", "linear on [N, 4, 6] -> BatchNorm1d(4): channels are not the linear's outputs")
    cases.append(c)

    c = Case("fusion", "chains", "long elementwise chains with operands broadcast in different ways, "
                                 "unary functions in between, and a kw scalar")
    c.kw.append("alpha=%s" % repr(round(R.uniform(0.2, 2.0), 3)))
    a, b, e = R.randint(2, 4), R.randint(2, 4), R.randint(2, 5)
    c.params += ["x: [N, %d, %d, %d]" % (a, b, e), "y: [N, 1, %d, 1]" % b, "z: [N, %d, 1, %d]" % (a, e),
                 "w: [N, 1, 1, %d]" % e, "alpha: float = 1.0"]
    c.ret("((x * y) + z) / (abs(w) + 1) - alpha", "broadcast chain")
    c.ret("tanh(exp(-abs(x * z)) * y + sigmoid(w)) * alpha", "unary chain")
    c.ret("relu(x - y) * silu(z) + gelu(w) - x", "activations in a chain")
    c.ret("sqrt(x * x + y * y + 1) * log(abs(z) + 1)", "sqrt, log in a chain")
    c.nonfinite = True
    cases.append(c)

    c = Case("fusion", "permute_consumers", "a permute/transpose feeding elementwise ops (layout change "
                                            "inside a fused kernel) and the same permute feeding matmul "
                                            "and Linear; reductions feeding elementwise")
    a, b, d = R.randint(2, 4), R.randint(3, 5), R.randint(2, 5)
    c.members.append("fc = Linear(%d, 3)" % a)
    c.params += ["x: [N, %d, %d, %d]" % (a, b, d), "y: [N, %d, %d, %d]" % (b, d, a),
                 "q: [N, 1, %d, %d]" % (d, a)]
    c.body.append("p = permute(x, 0, 2, 3, 1)")             # [N, b, d, a]
    c.ret("p + y", "permute -> add")
    c.ret("relu(p) * y + 1", "permute -> relu -> mul")
    c.ret("permute(x, 0, 2, 3, 1) @ transpose(q, 2, 3)", "permute -> matmul ([N,b,d,a] @ [N,1,a,d])")
    c.ret("fc(p)", "permute -> Linear")
    c.ret("transpose(x, -1, -3) - mean(transpose(x, -1, -3), -1, keepdim=true)",
          "transpose -> reduction -> broadcast subtract")
    c.ret("exp(x - amax(x, 1, true)) / sum(exp(x - amax(x, 1, true)), 1, true)",
          "softmax written out over dim 1")
    cases.append(c)

    c = Case("fusion", "attention", "multi-head attention with reshape/transpose/permute, scaled "
                                    "@ products, softmax, output projection, residual and LayerNorm")
    c.extra = ("module Attention(dim: int, heads: int, seq: int) {\n"
               "    q_proj = Linear(dim, dim)\n"
               "    k_proj = Linear(dim, dim)\n"
               "    v_proj = Linear(dim, dim)\n"
               "    out = Linear(dim, dim)\n"
               "    forward(x: [N, seq, dim], scale: float = 1.0) {\n"
               "        q = transpose(reshape(q_proj(x), N, seq, heads, dim / heads), 1, 2)\n"
               "        k = permute(reshape(k_proj(x), N, seq, heads, dim / heads), 0, 2, 3, 1)\n"
               "        v = transpose(reshape(v_proj(x), N, seq, heads, dim / heads), 1, 2)\n"
               "        att = softmax(q @ k * scale, -1)\n"
               "        return out(reshape(transpose(matmul(att, v), 1, 2), N, seq, dim))\n"
               "    }\n"
               "}")
    c.ctor = "dim: int = 12, heads: int = 3, seq: int = 5"
    c.members += ["attn = Attention(dim, heads, seq)", "ln = LayerNorm(dim)"]
    c.params += ["x: [N, seq, dim]"]
    c.ret("ln(x + attn(x, scale=0.5))")
    cases.append(c)

    c = Case("fusion", "cnn", "a small CNN: conv -> relu -> maxpool twice, avgpool, flatten, Linear "
                              "-> dropout -> Linear, log_softmax")
    c.members += ["c1 = Conv2d(1, 4, 3)", "c2 = Conv2d(4, 8, 3, padding=1)",
                  "p = MaxPool2d(2)", "ap = AvgPool2d(2, stride=1)",
                  "f1 = Linear(8 * 2 * 2, 16)", "drop = Dropout(0.25)", "f2 = Linear(16, 10)"]
    c.params.append("x: [N, 1, 14, 14]")
    c.body += ["h = p(relu(c1(x)))", "h = p(relu(c2(h)))", "h = ap(h)",
               "h = drop(relu(f1(flatten(h, 1))))"]
    c.ret("log_softmax(f2(h), -1)")
    cases.append(c)

    # diamonds: a value read by several elementwise ops of one kernel (it
    # stays a register value there), and diamonds the fuser must undo
    # because one use lands in another kernel; no draws from R
    c = Case("fusion", "diamond", "a value read by several ops of one fused chain: HF's written-out tanh "
                                  "GELU after a Linear, x * sigmoid(x) after a bias-free matmul, the "
                                  "pre-ReLU value read after the ReLU, diamonds with a use outside the chain")
    c.members += ["fc1 = Linear(6, 10)", "fc2 = Linear(10, 6)", "fc3 = Linear(6, 6)", "fc4 = Linear(6, 6)",
                  "fc5 = Linear(6, 6)", "c1 = Conv2d(3, 4, 3, padding=1)"]
    c.params += ["x: [N, 5, 6]", "y: [N, 3, 6, 6]"]
    c.body.append("h = fc1(x)")
    c.body.append("g = 0.5 * h * (1.0 + tanh((2.0 / 3.141592653589793) ** 0.5 * (h + 0.044715 * pow(h, 3.0))))")
    c.body.append("m = x @ transpose(x, 1, 2)")
    c.body.append("a = fc3(x)")
    c.body.append("b = fc5(x)")
    c.body.append("e = x * 2.0 + 1.0")
    c.body.append("cv = c1(y)")
    c.ret("fc2(g)", "Linear -> tanh GELU written out -> Linear")
    c.ret("m * sigmoid(m)", "bias-free matmul -> x * sigmoid(x)")
    c.ret("relu(b) * b + b", "the pre-ReLU value read after the ReLU")
    c.ret("relu(fc4(x)) + a * tanh(a) - a ** 2", "a diamond whose value is also read by another kernel's chain")
    c.ret("e * tanh(e) - e / (abs(e) + 1.0)", "an elementwise-only diamond")
    c.ret("cv * sigmoid(cv)", "conv -> x * sigmoid(x)")
    cases.append(c)
    return cases


def gen_large():
    """{family: Case}: one case per family with larger, odd sizes (blocking, vector
    remainders, GEMM paths that tiny shapes never reach)."""
    out = {}
    c = Case("conv", "large", "larger Conv2d: many channels, odd spatial sizes, strided, grouped")
    c.members += ["c1 = Conv2d(16, 24, 3, padding=1)", "c2 = Conv2d(24, 40, 5, stride=2, padding=2, groups=8)",
                  "c3 = Conv2d(13, 7, (1, 7), padding=(0, 3))"]
    c.params += ["x: [N, 16, 23, 19]", "y: [N, 13, 9, 33]"]
    c.ret("c2(relu(c1(x)))")
    c.ret("c3(y)")
    out["conv"] = c
    c = Case("pool", "large", "larger pools: odd sizes, many channels")
    c.members += ["mp = MaxPool2d(3, stride=2, padding=1, ceil_mode=true)", "ap = AvgPool2d(5, stride=3, padding=2)",
                  "aap = AdaptiveAvgPool2d((7, 5))"]
    c.params += ["x: [N, 17, 31, 29]"]
    c.ret("mp(x)")
    c.ret("ap(x)")
    c.ret("aap(x)")
    out["pool"] = c
    c = Case("norm", "large", "larger BatchNorm2d and LayerNorm (257 and 2 x 129 features)")
    c.members += ["bn = BatchNorm2d(33)", "ln = LayerNorm(257)", "ln2 = LayerNorm((2, 129), elementwise_affine=false)"]
    c.params += ["x: [N, 33, 9, 11]", "y: [N, 3, 257]", "z: [N, 2, 129]"]
    c.ret("bn(x)")
    c.ret("ln(y)")
    c.ret("ln2(z)")
    out["norm"] = c
    c = Case("elementwise", "large", "larger broadcast elementwise chains (odd sizes)")
    c.params += ["x: [N, 37, 129]", "y: [N, 1, 129]", "z: [N, 37, 1]"]
    c.ret("(x - y) * z + exp(-abs(x)) / (abs(y) + 1)")
    c.ret("permute(permute(x, 0, 2, 1) * transpose(z, 1, 2), 0, 2, 1) - y")
    out["elementwise"] = c
    c = Case("matmul", "large", "larger matmul and Linear: odd M, K, P around GEMM block sizes")
    c.members += ["fc = Linear(67, 129)", "fc2 = Linear(129, 33, bias=false)"]
    c.params += ["a: [N, 33, 65]", "b: [N, 65, 17]", "x: [N, 3, 67]", "q: [N, 4, 31, 16]", "k: [N, 4, 31, 16]"]
    c.ret("a @ b")
    c.ret("fc2(gelu(fc(x)))")
    c.ret("softmax(q @ transpose(k, -1, -2) * 0.25, -1) @ k")
    out["matmul"] = c
    c = Case("reduce", "large", "larger reductions: 1000-long last dim, a long middle dim")
    c.params += ["x: [N, 3, 1000]", "y: [N, 257, 5]"]
    c.ret("sum(x, -1)")
    c.ret("mean(x, 2, keepdim=true)")
    c.ret("amax(x, -1)")
    c.ret("sum(y, 1)")
    c.ret("mean(y, 1)")
    c.ret("amax(y, -2, true)")
    out["reduce"] = c
    c = Case("shape", "large", "larger transposes, permutes, cat and reshape")
    c.params += ["x: [N, 37, 65]", "y: [N, 5, 33, 17]", "z: [N, 21, 65]"]
    c.ret("transpose(x, 1, 2) * 1")
    c.ret("permute(y, 0, 3, 1, 2) + 0")
    c.ret("cat([x, z], 1)")
    c.ret("reshape(transpose(y, 1, 3), N, -1)")
    out["shape"] = c
    c = Case("activation", "large", "larger softmax / log_softmax rows (300 and 1025) and activations")
    c.params += ["x: [N, 4, 300]", "y: [N, 1025]"]
    c.ret("softmax(x * 3, -1)")
    c.ret("log_softmax(y * 3, 1)")
    c.ret("softmax(x, 1)")
    c.ret("gelu(y) + silu(y) + tanh(y) + sigmoid(y)")
    out["activation"] = c
    c = Case("embedding", "large", "a larger Embedding table (1000 x 67) and a long index sequence")
    c.members += ["emb = Embedding(1000, 67, padding_idx=3)"]
    c.params += ["ids: i64[N, 129]"]
    c.ret("emb(ids)")
    out["embedding"] = c
    return out


# ---------------------------------------------------------------------------
# models.md group 8: the builtin modules and functions added for the zoo,
# each family's cases drawn from their own seed so the older cases stay
# as they were
# ---------------------------------------------------------------------------

def gen_activation8(R):
    cases = []
    a, d = R.randint(2, 4), R.randint(3, 7)
    lo = round(R.uniform(-3, -0.5), 3)
    hi = round(R.uniform(0.5, 3), 3)
    slope = round(R.uniform(0.05, 0.5), 3)
    c = Case("activation", "group8_modules", "ReLU6, Hardtanh (default, floats, ints), Hardswish, "
                                             "Hardsigmoid, LeakyReLU (default, slope), Mish, StochasticDepth, "
                                             "Permute modules, inplace=true on fresh values, on inputs scaled "
                                             "to reach every clamp and Mish's softplus threshold")
    c.members += ["relu6 = ReLU6()", "relu6_ip = ReLU6(inplace=true)", "ht = Hardtanh()",
                  "ht_f = Hardtanh(%r, %r)" % (lo, hi), "ht_i = Hardtanh(min_val=-2, max_val=3, inplace=true)",
                  "hsw = Hardswish()", "hsw_ip = Hardswish(true)", "hsig = Hardsigmoid()",
                  "lrelu = LeakyReLU()", "lrelu_s = LeakyReLU(negative_slope=%r)" % slope,
                  "lrelu_ip = LeakyReLU(%r, true)" % slope, "mish = Mish()", "mish_ip = Mish(inplace=true)",
                  "sd = StochasticDepth(0.2, \"row\")", "sd_b = StochasticDepth(p=1.0, mode=\"batch\")",
                  "perm = Permute([0, 2, 1])", "perm4 = Permute((0, 3, 1, 2))"]
    x = c.inp([a, d])
    x4 = c.inp([R.randint(2, 3), R.randint(2, 4), R.randint(2, 5)])
    c.body.append("big = %s * 6" % x)
    for m in ("relu6", "ht", "ht_f", "hsw", "hsig", "lrelu", "lrelu_s", "mish"):
        c.ret("%s(big)" % m, m)
    c.ret("mish(%s * 30)" % x, "Mish past the softplus threshold (20)")
    for m in ("relu6_ip", "ht_i", "hsw_ip", "lrelu_ip", "mish_ip"):
        c.ret("%s(%s * 6)" % (m, x), m + " on a fresh value")
    c.ret("sd(%s) + sd_b(%s)" % (x, x), "StochasticDepth is the identity in eval")
    c.ret("perm(big)", "Permute([0, 2, 1])")
    c.ret("perm4(%s)" % x4, "Permute((0, 3, 1, 2))")
    c.nonfinite = True
    cases.append(c)

    c = Case("activation", "group8_functions", "relu6, hardswish, hardsigmoid, mish (inplace keyword), "
                                               "leaky_relu (default, positional and keyword slope), hardtanh "
                                               "(default, positional, keywords) functions")
    x = c.inp([a, d])
    c.body.append("big = %s * 6" % x)
    for e in ("relu6(big)", "relu6(%s * 6, inplace=true)" % x, "hardswish(big)", "hardsigmoid(big)",
              "mish(big)", "mish(%s * 30)" % x, "leaky_relu(big)", "leaky_relu(big, %r)" % slope,
              "leaky_relu(big, negative_slope=1.5)", "hardtanh(big)", "hardtanh(big, %r, %r)" % (lo, hi),
              "hardtanh(big, max_val=2.5, min_val=-0.5)", "hardswish(-big) + hardsigmoid(big * 0.5)"):
        c.ret(e)
    c.nonfinite = True
    cases.append(c)
    return cases


def gen_norm8(R):
    cases = []
    C = 2 * R.randint(1, 3)
    H, W, L = R.randint(2, 5), R.randint(2, 5), R.randint(3, 7)
    c = Case("norm", "group8_groupnorm", "GroupNorm on [N, C, H, W], [N, C, L] and [N, C] (1, C/2 and C "
                                         "groups; more than one value per group, as PyTorch requires at batch 1), affine=false, eps; the group_norm function with and "
                                         "without eps")
    c.members += ["gn = GroupNorm(2, %d)" % C, "gn1 = GroupNorm(1, %d, eps=1e-3)" % C,
                  "gnc = GroupNorm(%d, %d, affine=false)" % (C, C), "gn3 = GroupNorm(%d, %d)" % (C // 2, C),
                  "gn2 = GroupNorm(num_groups=%d, num_channels=%d, eps=0.1)" % (C // 2, C)]
    x4 = c.inp([C, H, W])
    x3 = c.inp([C, L])
    x2 = c.inp([C])
    for m, x in (("gn", x4), ("gn1", x4), ("gnc", x4), ("gn3", x3), ("gn2", x2), ("gn", x3)):
        c.ret("%s(%s)" % (m, x), m)
    c.ret("group_norm(%s, 2)" % x4, "group_norm function")
    c.ret("group_norm(%s * 3 + 1, %d, eps=1e-2)" % (x3, C), "group_norm function, eps")
    cases.append(c)

    c = Case("norm", "group8_batchnorm1d", "BatchNorm1d (running statistics) on [N, C] and [N, C, L]: "
                                           "defaults, eps, affine=false")
    C = R.randint(2, 5)
    c.members += ["bn = BatchNorm1d(%d)" % C, "bn_e = BatchNorm1d(%d, eps=1e-3, momentum=0.01)" % C,
                  "bn_a = BatchNorm1d(%d, affine=false)" % C]
    x2 = c.inp([C])
    x3 = c.inp([C, R.randint(2, 6)])
    for m in ("bn", "bn_e", "bn_a"):
        c.ret("%s(%s)" % (m, x2), m + " on [N, C]")
        c.ret("%s(%s)" % (m, x3), m + " on [N, C, L]")
    cases.append(c)

    c = Case("norm", "group8_batchnorm1d_batchstats", "BatchNorm1d(track_running_stats=false): the "
                                                      "batch's statistics in eval, on [N, C, L] (on [N, C] "
                                                      "PyTorch rejects batch 1)")
    c.single_device = "batch statistics mix samples"
    c.members += ["bn = BatchNorm1d(%d, track_running_stats=false)" % C]
    x3 = c.inp([C, R.randint(2, 6)])
    c.ret("bn(%s)" % x3)
    cases.append(c)
    return cases


def gen_pool8(R):
    c = Case("pool", "group8_adaptive_max", "AdaptiveMaxPool2d: int, pair, None entries, output sizes "
                                            "that do not divide the input (overlapping windows), larger than "
                                            "the input, 1")
    Cc, H, W = R.randint(1, 3), R.randint(5, 9), R.randint(5, 9)
    x = c.inp([Cc, H, W])
    for o in (1, R.randint(2, 4), (R.randint(2, 4), R.randint(2, 5)), (None, 3), (2, None), (H + 2, W),
              (H, W)):
        m = c.member(call("AdaptiveMaxPool2d", [o]), "amp")
        c.ret("%s(%s)" % (m, x), "output_size=%r" % (o,))
    m = c.member("AdaptiveMaxPool2d(output_size=3, return_indices=false)", "amp")
    c.ret("%s(-%s)" % (m, x), "keywords, negative input")
    c.nonfinite = True
    return [c]


def gen_matmul8(R):
    c = Case("matmul", "group8_hfconv1d", "HuggingFace Conv1D(nf, nx): weight [nx, nf], x @ W + b over the "
                                          "last dim, on [N, nx], [N, S, nx] and [N, A, S, nx]")
    nf, nx = R.randint(2, 9), R.randint(2, 9)
    m = c.member("Conv1D(%d, %d)" % (nf, nx), "conv")
    m2 = c.member("Conv1D(nx=%d, nf=%d)" % (nf, nx), "conv")
    c.ret("%s(%s)" % (m, c.inp([nx])), "[N, nx]")
    c.ret("%s(%s)" % (m, c.inp([R.randint(2, 5), nx])), "[N, S, nx]")
    c.ret("%s(%s)" % (m, c.inp([2, R.randint(2, 5), nx])), "[N, A, S, nx]")
    c.ret("%s(%s)" % (m2, c.inp([R.randint(2, 4), nf])), "keywords: weight [nf, nx]")
    cases = [c]

    h = R.choice([1, 2, 4])
    E = h * R.randint(2, 4)
    L, S = R.randint(2, 6), R.randint(2, 7)
    c = Case("matmul", "group8_mha", "MultiheadAttention against torch.nn.MultiheadAttention: self-attention "
                                     "with batch_first=true and need_weights=false (ViT's call), cross-attention "
                                     "with batch_first=false ([L, N, E]) and the head-averaged weights, "
                                     "bias=false with per-head weights, keywords")
    c.extra = """module SelfBlock(dim: int, heads: int) {
    ln = LayerNorm(dim)
    self_attention = MultiheadAttention(dim, heads, dropout=0.0, batch_first=true)
    forward(x: [N, %d, dim]) {
        h = ln(x)
        h, _ = self_attention(query=h, key=h, value=h, need_weights=false)
        return h + x
    }
}""" % L
    c.members += ["blk = SelfBlock(%d, %d)" % (E, h), "cross = MultiheadAttention(%d, %d)" % (E, h),
                  "nob = MultiheadAttention(%d, %d, bias=false, batch_first=true)" % (E, h)]
    x = c.inp([L, E])
    y = c.inp([S, E])
    c.body.append("o, w = cross(permute(%s, 1, 0, 2), permute(%s, 1, 0, 2), permute(%s, 1, 0, 2))" % (x, y, y))
    c.body.append("p, pw = nob(%s, %s, %s * 2, average_attn_weights=false)" % (x, y, y))
    c.ret("blk(%s)" % x, "self-attention block, batch_first=true")
    c.ret("permute(o, 1, 0, 2)", "cross-attention, batch_first=false")
    c.ret("w", "head-averaged weights [N, L, S]")
    c.ret("p", "bias=false")
    c.ret("pw", "per-head weights [N, h, L, S]")
    cases.append(c)
    return cases


GROUP8 = {"activation": gen_activation8, "norm": gen_norm8, "pool": gen_pool8, "matmul": gen_matmul8}


# ---------------------------------------------------------------------------
# resample: ConvTranspose2d, Upsample (nearest, bilinear) and F.interpolate
# ---------------------------------------------------------------------------

def _valid_convt(kw, cin, H, W) -> bool:
    t = torch()
    try:
        m = t.nn.ConvTranspose2d(**kw)
        with t.no_grad():
            m(t.zeros(1, cin, H, W))
        return True
    except Exception:  # noqa: BLE001
        return False


def draw_convt(R, kind):
    """(ctor text, cin, H, W) for a ConvTranspose2d variant that PyTorch accepts."""
    names = ["in_channels", "out_channels", "kernel_size", "stride", "padding", "output_padding",
             "groups", "bias", "dilation"]
    for _ in range(200):
        g = R.choice([1, 1, 2, 3]) if kind in ("groups", "full") else 1
        cin, cout = g * R.randint(1, 3), g * R.randint(1, 3)
        if kind == "depthwise":
            g = cin = cout = R.randint(2, 4)
        k = _pair(R, 1, 4, kind in ("tuple", "full"))
        s = _pair(R, 1, 3, kind in ("tuple", "full")) if kind != "basic" else 1
        d = _pair(R, 1, 3, kind in ("tuple", "full")) if kind in ("dilation", "full") else 1
        p = _pair(R, 0, 2, kind in ("tuple", "full")) if kind != "basic" else 0
        sp, dp = (s, s) if isinstance(s, int) else s, (d, d) if isinstance(d, int) else d
        op = 0
        if kind in ("output_padding", "full", "dilation"):
            op = tuple(R.randint(0, max(sp[i], dp[i]) - 1) for i in range(2))
            if op[0] == op[1] and R.random() < 0.5:
                op = op[0]
        kw = {"in_channels": cin, "out_channels": cout, "kernel_size": k, "stride": s, "padding": p,
              "output_padding": op, "groups": g, "bias": kind != "nobias" and R.random() < 0.8,
              "dilation": d}
        H, W = R.randint(1, 7), R.randint(1, 7)
        if not _valid_convt(kw, cin, H, W):
            continue
        npos = R.randint(2, 4) if kind == "positional" else 3
        pos = [kw[n] for n in names[:npos]]
        deflt = {"stride": 1, "padding": 0, "output_padding": 0, "groups": 1, "bias": True, "dilation": 1}
        rest = {n: kw[n] for n in names[npos:] if n not in deflt or kw[n] != deflt[n] or R.random() < 0.2}
        return call("ConvTranspose2d", pos, rest), cin, H, W
    raise RuntimeError("no valid conv_transpose for " + kind)


def _upsample_variant(R, i):
    """Upsample / interpolate arguments: size or scale_factor (int, float, pair; up and down),
    nearest or bilinear, align_corners, recompute_scale_factor."""
    mode = "nearest" if i % 2 == 0 else "bilinear"
    kw = {}
    form = R.choice(["size_int", "size_pair", "scale_int", "scale_float", "scale_pair"])
    if form == "size_int":
        kw["size"] = R.randint(1, 11)
    elif form == "size_pair":
        kw["size"] = (R.randint(1, 11), R.randint(1, 11))
    elif form == "scale_int":
        kw["scale_factor"] = R.choice([1, 2, 3])
    elif form == "scale_float":
        kw["scale_factor"] = R.choice([0.5, 1.5, 1.7, 2.5, 0.75, 2.0, 1.3])
    else:
        kw["scale_factor"] = (R.choice([1.5, 2.0, 3.0, 0.6]), R.choice([1.0, 2.0, 1.25, 2.7]))
    if mode != "nearest" or R.random() < 0.3:
        kw["mode"] = mode
    if mode == "bilinear" and R.random() < 0.7:
        kw["align_corners"] = R.random() < 0.5
    if "scale_factor" in kw and R.random() < 0.3:
        kw["recompute_scale_factor"] = R.random() < 0.5
    return kw


def _draw_upsample(R, i, lo=1):
    """(kwargs, [C, H, W]) that F.interpolate accepts, with a non-empty output."""
    t = torch()
    import warnings
    for _ in range(200):
        kw = _upsample_variant(R, i)
        dims = [R.randint(1, 3), R.randint(lo, 6), R.randint(lo, 6)]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = t.nn.functional.interpolate(t.zeros([1] + dims), **kw)
            if y.numel() > 0:
                return kw, dims
        except Exception:  # noqa: BLE001
            pass
    raise RuntimeError("no valid upsample")


def gen_resample(R):
    cases = []
    kinds = ["basic", "stride_pad", "tuple", "dilation", "groups", "depthwise", "nobias",
             "output_padding", "positional", "full", "full", "output_padding"]
    order = kinds * 2
    R.shuffle(order)
    per = 4
    for i in range(0, len(order), per):
        chunk = order[i:i + per]
        c = Case("resample", "convt%d" % (i // per), "ConvTranspose2d variants: " + ", ".join(chunk))
        for kind in chunk:
            txt, cin, H, W = draw_convt(R, kind)
            m = c.member(txt, "ct")
            c.ret("%s(%s)" % (m, c.inp([cin, H, W])), kind)
        cases.append(c)

    c = Case("resample", "convt_fused", "ConvTranspose2d with fused epilogues (BatchNorm + ReLU as in "
                                        "DCGAN, a residual add, tanh) and fed by / feeding Conv2d")
    c.members += ["a = ConvTranspose2d(6, 4, 4, stride=2, padding=1, bias=false)",
                  "bn = BatchNorm2d(4)",
                  "b = ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)",
                  "d = Conv2d(3, 3, 3, padding=1)",
                  "e = ConvTranspose2d(3, 3, 1)"]
    c.params.append("x: [N, 6, 4, 5]")
    c.body += ["y = relu(bn(a(x)))", "z = b(y)"]
    c.ret("tanh(e(d(z)) + z)", "convT -> conv -> 1x1 convT + residual -> tanh")
    c.ret("y", "convT -> batchnorm -> relu")
    cases.append(c)

    for j in range(3):
        c = Case("resample", "upsample%d" % j, "Upsample: nearest and bilinear, size (int, pair) or "
                                               "scale_factor (int, float, pair; up and down), align_corners, "
                                               "recompute_scale_factor")
        for i in range(6):
            kw, dims = _draw_upsample(R, i)
            m = c.member(call("Upsample", (), kw), "up")
            x = c.inp(dims)
            c.ret("%s(%s)" % (m, x), ", ".join("%s=%r" % kv for kv in kw.items()))
        cases.append(c)

    c = Case("resample", "interpolate", "F.interpolate as a function: positional and keyword forms, "
                                        "the chain after it fused")
    for i in range(6):
        kw, dims = _draw_upsample(R, i + 1, 2)
        x = c.inp(dims)
        c.ret("interpolate(%s, %s)" % (x, ", ".join("%s=%s" % (k, r(v)) for k, v in kw.items())),
              ", ".join("%s=%r" % kv for kv in kw.items()))
    x = c.inp([2, 3, 4])
    c.ret("relu(interpolate(%s, (5, 7), None, \"bilinear\", true)) * 2.0" % x, "positional, relu and mul fused")
    c.ret("interpolate(%s, scale_factor=2) - 1.0" % x, "nearest x2, sub fused")
    cases.append(c)

    c = Case("resample", "edges", "edge cases: nearest with a scale_factor whose 1/s differs from in/out "
                                  "(PyTorch uses 1/s), recomputed; bilinear to one row/column with "
                                  "align_corners; a stride larger than the kernel (outputs only the bias "
                                  "reaches); output_padding below the dilation but not the stride")
    specs = [
        ("Upsample(scale_factor=1.7)", [2, 5, 7], "nearest 1.7: scales 1/1.7, not 5/8"),
        ("Upsample(scale_factor=1.7, recompute_scale_factor=true)", [2, 5, 7], "nearest 1.7 recomputed"),
        ("Upsample(scale_factor=1.7, mode=\"bilinear\")", [2, 5, 7], "bilinear 1.7"),
        ("Upsample(size=(1, 4), mode=\"bilinear\", align_corners=true)", [2, 5, 7], "bilinear to 1 row"),
        ("Upsample(scale_factor=0.5, mode=\"bilinear\", align_corners=true)", [1, 6, 7], "bilinear down 0.5"),
        ("ConvTranspose2d(2, 3, 1, stride=3)", [2, 3, 4], "stride 3 > kernel 1: gaps hold the bias"),
        ("ConvTranspose2d(2, 2, 3, stride=1, padding=2, output_padding=1, dilation=2)", [2, 4, 5],
         "output_padding 1 < dilation 2, stride 1"),
        ("ConvTranspose2d(3, 6, (2, 3), stride=(2, 1), padding=(1, 0), groups=3, bias=false)", [3, 3, 3],
         "groups 3, uneven"),
    ]
    for ctor, dims, doc in specs:
        m = c.member(ctor, "m")
        c.ret("%s(%s)" % (m, c.inp(dims)), doc)
    cases.append(c)

    c = Case("resample", "decoder", "a small U-Net style decoder: upsample, cat with a skip "
                                    "connection, conv, transposed conv")
    c.members += ["enc = Conv2d(3, 4, 3, stride=2, padding=1)",
                  "up = Upsample(scale_factor=2, mode=\"bilinear\", align_corners=false)",
                  "fuse = Conv2d(7, 4, 3, padding=1)",
                  "out = ConvTranspose2d(4, 2, 2, stride=2)"]
    c.params.append("x: [N, 3, 8, 6]")
    c.body += ["e = relu(enc(x))", "u = cat([up(e), x], 1)", "f = relu(fuse(u))"]
    c.ret("out(f)", "decoder output")
    c.ret("interpolate(f, size=(5, 3))", "nearest downsample of the features")
    cases.append(c)
    return cases


# ---------------------------------------------------------------------------
# index: tensor indexing and slicing, x.shape / size(), the shape functions
# (view, unsqueeze, squeeze, expand, split, chunk, ...); pointwise: pow and
# **, clamp, erf, rsqrt, neg, adaptive_avg_pool2d as a function
# ---------------------------------------------------------------------------

def _rand_slice(R, n):
    """A random Python slice of a dim of size n, as text: bounds negative,
    omitted or past the end."""
    def bound():
        r = R.random()
        if r < 0.25:
            return ""
        if r < 0.45:
            return str(-R.randint(1, n + 2))
        return str(R.randint(0, n + 2))
    while True:  # non-empty (the CUDA emulator's comparison needs elements)
        a, b = bound(), bound()
        step = R.choice(["", "", "1", "2", "3"])
        sl = slice(int(a) if a else None, int(b) if b else None, int(step) if step else None)
        if len(range(n)[sl]):
            return "%s:%s%s" % (a, b, (":" + step) if step else "")


def gen_index(R):
    cases = []
    c = Case("index", "slice", "x[...] on tensors: integer indices (negative too), slices with "
                               "negative, omitted and out-of-range bounds and steps, '...', None, mixes")
    d1, d2, d3 = R.randint(3, 6), R.randint(3, 6), R.randint(2, 5)
    x = c.inp([d1, d2, d3])
    c.ret("%s[:, 0]" % x, "index dim 1")
    c.ret("%s[:, -1, %d]" % (x, R.randint(-d3, d3 - 1)), "two indices, negative")
    c.ret("%s[..., %d]" % (x, R.randint(0, d3 - 1)), "ellipsis, index the last dim")
    c.ret("%s[:, None]" % x, "None after the batch dim")
    c.ret("%s[:, :, None, :, None]" % x, "two Nones")
    c.ret("%s[None]" % x, "None first (the batch dim moves)")
    c.rets.pop()  # a None first moves the batch dim: DataParallel gathers on dim 0
    for _ in range(4):
        c.ret("%s[:, %s, %s]" % (x, _rand_slice(R, d1), _rand_slice(R, d2)), "random slices")
    c.ret("%s[:, 1:, ::2]" % x, "start only, step only")
    c.ret("%s[..., 1:]" % x, "ellipsis then a slice")
    c.ret("%s[:, 1, ..., None]" % x, "index, ellipsis, None")
    c.ret("%s[:]" % x, "the whole tensor")
    c.ret("%s[:, 1:3][:, :, 1]" % x, "a slice of a slice")
    c.ret("%s[:, ::2] * 2 + 1" % x, "then elementwise")
    c.ret("%s[:, 1] + %s[:, 0]" % (x, x), "two views added")
    c.ret("sum(%s[:, ::2, 1:], -1)" % x, "then a reduction (materialised)")
    c.ret("permute(%s[:, 1:], 0, 3, 1, 2)" % x, "a permuted slice")
    c.ret("permute(%s, 0, 2, 3, 1)[:, 1:, ::2]" % x, "a slice of a permuted tensor")
    c.ret("permute(%s, 0, 3, 2, 1)[:, :, 1][:, ::2, 1:] + 1" % x, "slices of slices of a permuted tensor, elementwise")
    c.ret("reshape(%s[:, :, 1:], N, -1)" % x, "reshape of a slice")
    c.ret("cat([%s[:, 0:1], %s[:, -1:]], 1)" % (x, x), "cat of slices")
    lin = c.member("Linear(%d, 4)" % d3)
    c.ret("%s(%s[:, 1])" % (lin, x), "Linear of an indexed tensor (ViT's x[:, 0])")
    c.ret("%s(%s)[:, -1]" % (lin, x), "index a Linear's output")
    cases.append(c)

    c = Case("index", "shape", "x.shape and x.size(): tuple unpacking, the batch size in reshape and "
                               "view, size()[:-1] + (heads, d) (HF's transpose_for_scores), ndim, dim(), "
                               "method forms of permute/transpose/flatten/t/contiguous/unsqueeze/squeeze")
    s, h, dh = R.randint(2, 5), R.randint(2, 3), R.randint(2, 4)
    x = c.inp([s, h * dh])
    y = c.inp([R.randint(2, 4), R.randint(2, 4), R.randint(2, 4)])
    c.body.append("n, l, e = %s.shape" % x)
    c.body.append("a, b, cc, dd = %s.size()" % y)
    c.body.append("t4 = %s.view(%s.size()[:-1] + (%d, %d))" % (x, x, h, dh))
    c.ret("t4.permute(0, 2, 1, 3)", "transpose_for_scores")
    c.ret("%s.reshape(n, l * e)" % x, "reshape with the batch size and ints of the shape")
    c.ret("%s.view(n, -1, %s.size(-1) * %s.shape[1])" % (y, y, y), "view with -1, size(-1), shape[1]")
    c.ret("%s.transpose(-1, -2) * (%s.dim() + %s.ndim)" % (x, x, y), "transpose with negative dims, dim(), ndim")
    c.ret("%s.flatten(1)" % y, "flatten method form")
    c.ret("%s.permute(0, -1, 1, -2).contiguous()" % y, "permute with negative dims, contiguous")
    c.ret("%s.unsqueeze(1)" % x, "unsqueeze")
    c.ret("%s.unsqueeze(-1) + 1" % x, "unsqueeze -1")
    c.ret("%s[:, None].squeeze(1)" % x, "squeeze a dim of 1")
    c.ret("%s.squeeze(-1)" % x, "squeeze a dim that is not 1 (no change)")
    c.ret("%s[:, 0:1, :, 0:1].squeeze(-1).squeeze(1)" % y, "squeeze twice")
    c.ret("%s[:, 0].t()" % y, "t()")
    c.rets.pop()  # t() of [N, k] moves the batch dim
    c.ret("%s[:, 0, 0, 0:1] * t4[:, 0, 0]" % y, "broadcast of views")
    cases.append(c)

    c = Case("index", "expand", "expand with -1, the batch size (given or -1), sizes of 1 kept; "
                                "expand_as; ViT's class token: expand(n, -1, -1) then cat")
    d = R.randint(2, 5)
    x = c.inp([R.randint(2, 4), d])
    z = c.inp([1, d])
    c.body.append("n = %s.shape[0]" % x)
    c.ret("%s.expand(n, 3, -1)" % z, "a dim of 1 grows")
    c.ret("%s.expand(-1, %s.size(1), %d)" % (z, x, d), "-1 keeps the batch dim")
    c.ret("%s[:, :, None].expand(n, -1, -1, 3)" % x, "None then expand")
    c.rets.pop()
    c.ret("%s[:, :, None].expand(n, -1, 3, -1)" % x, "None then expand")
    c.ret("%s.expand_as(%s)" % (z, x), "expand_as")
    c.ret("%s.expand(n, 4, %d) * 2 - %s[:, 0:1]" % (z, d, x), "then elementwise with broadcasting")
    c.ret("cat([%s, %s], dim=1)" % (z, x), "cat of a class token and tokens")
    c.ret("sum(%s.expand(-1, 5, -1), 1)" % z, "reduce an expanded tensor")
    c.ret("%s[:, 0].expand(n, %d)" % (x, d), "expand to the same shape")
    cases.append(c)

    c = Case("index", "expand_lead", "expand with new leading dims, the batch size among them")
    c.single_device = "the output's first dim is not the batch dim"
    d = R.randint(2, 5)
    x = c.inp([d])
    c.body.append("n = %s.shape[0]" % x)
    c.ret("%s.expand(3, n, -1)" % x, "new leading dim before the batch")
    c.ret("%s[:, None].expand(2, -1, 4, -1)" % x, "new dim, batch kept, a dim of 1 grows")
    cases.append(c)

    c = Case("index", "split", "split by a size (even and uneven), by sizes, chunk (even, uneven, "
                               "fewer pieces than asked), keyword and negative dims, tuple unpacking, "
                               "GPT-2's q, k, v = c_attn(x).split(n, dim=2)")
    e = R.randint(2, 4)
    x = c.inp([R.randint(2, 4), 3 * e])
    w = c.inp([7, 2])
    qkv = c.member("Linear(%d, %d)" % (3 * e, 3 * e))
    c.body.append("q, k, v = %s(%s).split(%d, dim=2)" % (qkv, x, e))
    c.ret("q * k + v", "q, k, v from a Linear")
    c.body.append("p0, p1, p2 = %s.split(3, 1)" % w)
    c.ret("p0", "split 7 by 3: first")
    c.ret("p2", "split 7 by 3: the last piece is smaller")
    c.body.append("r0, r1 = %s.split([5, 2], dim=-2)" % w)
    c.ret("r0 + 1", "split by sizes")
    c.ret("r1", "split by sizes, second")
    c.body.append("u0, u1, u2 = chunk(%s, 3, 1)" % w)
    c.ret("u1 - u0", "chunk 7 in 3 (3, 3, 1)")
    c.ret("u2", "chunk: the last piece")
    c.body.append("v0, v1 = %s.chunk(2, dim=-1)" % x)
    c.ret("v0[:, :, 0:1] * v1", "chunk of the last dim in 2")
    c.body.append("f0, f1, f2 = chunk(%s[:, 0:6], 4, 1)" % w)
    c.ret("f2 - f0", "chunk 6 in 4 gives 3 pieces of 2")
    c.ret("cat(%s.split(1, 2), 2)" % w, "split into ones, cat back")
    cases.append(c)
    return cases


def gen_pointwise(R):
    cases = []
    c = Case("pointwise", "pow", "x ** p and pow(): squares, square roots, integer and negative powers, "
                                 "a number to a tensor power, tensor ** tensor")
    dims = [R.randint(2, 4), R.randint(2, 5)]
    x = c.inp(dims)
    y = c.inp(dims)
    c.ret("%s ** 2" % x, "** 2")
    c.ret("(abs(%s) + 0.1) ** 0.5" % x, "** 0.5")
    c.ret("%s ** 3" % x, "** 3")
    c.ret("(abs(%s) + 0.5) ** -1.5" % x, "negative power")
    c.ret("2 ** %s" % x, "number ** tensor")
    c.ret("pow(abs(%s) + 0.5, %s)" % (x, y), "pow(tensor, tensor)")
    c.ret("pow(%s, 2) + %s.pow(3)" % (x, y), "pow function and method")
    c.ret("%s ** 2 ** 0.5" % (x,), "right associative (x ** (2 ** 0.5))")
    c.rets.pop()
    c.nonfinite = True
    cases.append(c)

    c = Case("pointwise", "clamp", "clamp with min, max, both (min > max too), tensor bounds, "
                                   "clamp_min, clamp_max; erf, rsqrt, neg")
    dims = [R.randint(2, 4), R.randint(2, 5)]
    x = c.inp(dims)
    y = c.inp(dims)
    c.ret("clamp(%s, min=-0.5)" % x, "min only")
    c.ret("clamp(%s, max=0.25)" % x, "max only")
    c.ret("clamp(%s, -0.3, 0.6)" % x, "both, positional")
    c.ret("%s.clamp(min=0.5, max=-0.5) * %s" % (x, x), "min > max: all max (times the input, so a perturbed input shows)")
    c.ret("clamp(%s, min=%s)" % (x, y), "a tensor bound")
    c.ret("clamp_min(%s, 0.1) + %s.clamp_max(-0.1)" % (x, y), "clamp_min, clamp_max")
    c.ret("erf(%s * 2)" % x, "erf")
    c.ret("rsqrt(abs(%s) + 0.2)" % x, "rsqrt")
    c.ret("neg(%s) + %s.neg()" % (x, y), "neg")
    c.nonfinite = True
    cases.append(c)

    c = Case("pointwise", "adaptive_avg_pool2d", "adaptive_avg_pool2d as a function: int, pair and None "
                                                 "output sizes, larger than the input too")
    x = c.inp([R.randint(1, 3), R.randint(4, 7), R.randint(4, 7)])
    c.ret("adaptive_avg_pool2d(%s, 1)" % x, "global")
    c.ret("adaptive_avg_pool2d(%s, (2, 3))" % x, "a pair")
    c.ret("adaptive_avg_pool2d(%s, (None, 2))" % x, "None keeps a dim")
    c.ret("adaptive_avg_pool2d(%s, output_size=9)" % x, "larger than the input")
    c.nonfinite = True
    cases.append(c)
    return cases


def _with_large(fam, fn):
    def gen(R):
        cases = fn(R)
        big = gen_large().get(fam)
        g8 = GROUP8[fam](random.Random(zlib.crc32((fam + "/group8").encode()))) if fam in GROUP8 else []
        return cases + ([big] if big else []) + g8
    return gen


FAMILIES = {
    "conv": gen_conv,
    "pool": gen_pool,
    "norm": gen_norm,
    "elementwise": gen_elementwise,
    "matmul": gen_matmul,
    "reduce": gen_reduce,
    "shape": gen_shape,
    "activation": gen_activation,
    "embedding": gen_embedding,
    "fusion": gen_fusion,
    "mask": gen_mask,
    "index": gen_index,
    "pointwise": gen_pointwise,
    "attention": gen_attention,
    "resample": gen_resample,
}


def generate(outdir: str) -> list[str]:
    paths = []
    for fam, fn in FAMILIES.items():
        fn = _with_large(fam, fn)
        R = random.Random(zlib.crc32(fam.encode()))
        fdir = os.path.join(outdir, fam)
        os.makedirs(fdir, exist_ok=True)
        for c in fn(R):
            p = os.path.join(fdir, c.name + ".dp")
            with open(p, "w") as f:
                f.write(c.text())
            paths.append(p)
    return paths


def verify(paths: list[str]) -> int:
    """Run every model once with the PyTorch reference (batch 2)."""
    sys.path.insert(0, REF)
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning)
    import numpy as np  # noqa: F401
    import make_inputs
    import torch_init
    import torch_run
    import st
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for p in paths:
            try:
                w = os.path.join(d, "w.safetensors")
                st.save(w, torch_init.init_state(p, 1, True, True), metadata={"format": "pt"})
                arrs = make_inputs.make_inputs(p, 2, 2)
                ins = []
                for i, (_, a) in enumerate(arrs):
                    ip = os.path.join(d, "x%d.npy" % i)
                    np.save(ip, a)
                    ins.append(ip)
                outs = torch_run.run(p, w, ins, [])
                print("ok   %s (%d outputs)" % (os.path.relpath(p, HERE), len(outs)))
            except Exception as e:  # noqa: BLE001
                bad += 1
                print("FAIL %s: %s" % (os.path.relpath(p, HERE), e))
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--outdir", default=DEFAULT_OUT)
    ap.add_argument("--verify", action="store_true", help="run each model with the reference")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary directory and compare with --outdir")
    a = ap.parse_args(argv)
    if a.check:
        with tempfile.TemporaryDirectory() as d:
            paths = generate(d)
            diffs = []
            want = {os.path.relpath(p, d) for p in paths}
            have = set()
            for root, _, files in os.walk(a.outdir):
                for f in files:
                    if f.endswith(".dp"):
                        have.add(os.path.relpath(os.path.join(root, f), a.outdir))
            for rel in sorted(want | have):
                if rel not in have:
                    diffs.append("missing: " + rel)
                elif rel not in want:
                    diffs.append("stale (not generated): " + rel)
                elif not filecmp.cmp(os.path.join(d, rel), os.path.join(a.outdir, rel), shallow=False):
                    diffs.append("differs: " + rel)
            if diffs:
                print("tests/ops cases are out of date; run tests/ops/gen_cases.py\n  " + "\n  ".join(diffs))
                return 1
            print("%d cases up to date" % len(want))
            return 0
    if os.path.isdir(a.outdir):
        for fam in FAMILIES:
            shutil.rmtree(os.path.join(a.outdir, fam), ignore_errors=True)
    paths = generate(a.outdir)
    print("wrote %d cases under %s" % (len(paths), a.outdir))
    if a.verify:
        return 1 if verify(paths) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
