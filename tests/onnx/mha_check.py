#!/usr/bin/env python3
"""nn.MultiheadAttention's ONNX export (importer/onnx_mha.c) against PyTorch:

  mha_check.py DPC WORKDIR
  mha_check.py --write-seed PATH    # a small export (E 8, 2 heads) for tests/corpus/onnx

Each model is exported by torch.onnx.export (torch 1.13, opset 14, grad
enabled so that the attention is not the fused fast path), imported by
`dpc import`, run by `dpc run` at batch 3 (exported at batch 2, the batch
axis dynamic) and compared with the model in float64 (rel L2 <= 1e-5) and
float32 (<= 1e-4):

  tel       nn.TransformerEncoderLayer(32, 4, 64, batch_first=True): the
            pattern with its residual, LayerNorms and feed-forward around
  nobias    nn.MultiheadAttention(32, 4, bias=False, batch_first=True)
  weights   the same with bias and need_weights=True (the weights output unused)

and each of these must be refused with a located error (exit 1, one line
`dpc: error: ...: node '...' (Op, opset 14): ...` containing the text
given, no output file):

  mask      an attn_mask (causal): not the pattern, so the batch-merging
            reshape is refused as before
  seq       a run-time sequence length (dynamic axis 1): the export's L * N
            cannot be folded
  scale     the pattern with its scale constant changed (Div by 5, not
            sqrt(8)): the claimed node's check fails
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

E, H, L = 32, 4, 5


class Attn(torch.nn.Module):
    def __init__(self, bias=True, need_weights=False, mask=False, e=E, h=H):
        super().__init__()
        self.m = torch.nn.MultiheadAttention(e, h, bias=bias, batch_first=True)
        self.need_weights = need_weights
        # a float causal mask (an initializer; L fixed)
        self.register_buffer("causal", torch.triu(torch.full((L, L), float("-inf")), 1) if mask else None)

    def forward(self, x):
        return self.m(x, x, x, need_weights=self.need_weights, attn_mask=self.causal)[0]


def build(name):
    torch.manual_seed(7)
    if name == "tel":
        m = torch.nn.TransformerEncoderLayer(E, H, 64, dropout=0.0, batch_first=True)
    elif name == "nobias":
        m = Attn(bias=False)
    elif name == "weights":
        m = Attn(need_weights=True)
    elif name == "mask":
        m = Attn(mask=True)
    else:
        m = Attn()
    with torch.no_grad():  # non-trivial biases (PyTorch initialises them to 0)
        for k, p in m.named_parameters():
            if k.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.3)
    return m.eval()


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def rel(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / max(np.linalg.norm(b), 1e-30))


def export(m, path, seq_dynamic=False):
    x = torch.randn(2, L, E)
    dyn = {"x": {0: "batch", 1: "seq"} if seq_dynamic else {0: "batch"}}
    with torch.enable_grad():
        torch.onnx.export(m, (x,), path, opset_version=14, input_names=["x"], output_names=["y"],
                          dynamic_axes=dyn)


def tamper_scale(path):
    """the Div of q by sqrt(head dim): its constant 5 instead of sqrt(8)"""
    mp = onnx.load(path)
    g = mp.graph
    consts = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    for n in g.node:
        if n.op_type == "Div" and "Transpose_1_output" in n.input[0] and n.input[1] in consts:
            c = consts[n.input[1]]
            for a in c.attribute:
                if a.name == "value":
                    a.t.CopyFrom(numpy_helper.from_array(np.array(5.0, np.float32)))
            onnx.save(mp, path)
            return
    fail("tamper: no Div of q by a Constant in the export")


def main():
    if sys.argv[1] == "--write-seed":
        torch.manual_seed(7)
        with torch.enable_grad():
            torch.onnx.export(Attn(e=8, h=2).eval(), (torch.randn(2, 3, 8),), sys.argv[2], opset_version=14,
                              input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}})
        return
    dpc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    for name in ("tel", "nobias", "weights"):
        m = build(name)
        p = os.path.join(work, name)
        export(m, p + ".onnx")
        for f in (p + ".dp", p + ".safetensors"):
            if os.path.exists(f):
                os.unlink(f)
        r = subprocess.run([dpc, "import", p + ".onnx", "-o", p + ".dp"], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"{name}: import: {r.stderr.strip()}")
        if "MultiheadAttention(" not in open(p + ".dp").read():
            fail(f"{name}: the .dp has no MultiheadAttention member")
        x = np.random.default_rng(3).standard_normal((3, L, E)).astype(np.float32)
        np.save(p + "_x.npy", x)
        r = subprocess.run([dpc, "run", p + ".dp", "--weights", p + ".safetensors", "--input", p + "_x.npy",
                            "-o", p + "_y.npy"], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"{name}: run: {r.stderr.strip()}")
        got = np.load(p + "_y.npy")
        with torch.enable_grad():  # not the fused fast path (which fails without biases in torch 1.13)
            r32 = m(torch.from_numpy(x)).detach().numpy()
            r64 = m.double()(torch.from_numpy(x).double()).detach().numpy()
        if got.shape != r64.shape:
            fail(f"{name}: shape {got.shape}, expected {r64.shape}")
        e64, e32 = rel(got, r64), rel(got, r32)
        print(f"{name}: rel L2 {e64:.2e} vs f64, {e32:.2e} vs f32")
        if not (e64 <= 1e-5 and e32 <= 1e-4):
            fail(f"{name}: outside the bounds (1e-5 vs f64, 1e-4 vs f32)")
    for name, msg in (("mask", "a reshape that merges the batch dim"),
                      ("seq", "arithmetic on a run-time dim"),
                      ("scale", "in nn.MultiheadAttention's export: q must be scaled by 1 / sqrt(E / heads)")):
        p = os.path.join(work, name)
        export(build(name), p + ".onnx", seq_dynamic=name == "seq")
        if name == "scale":
            tamper_scale(p + ".onnx")
        for f in (p + ".dp", p + ".safetensors"):
            if os.path.exists(f):
                os.unlink(f)
        r = subprocess.run([dpc, "import", p + ".onnx", "-o", p + ".dp"], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        if (r.returncode != 1 or len(lines) != 1 or not lines[0].startswith("dpc: error: ") or "node '" not in lines[0]
                or msg not in lines[0] or os.path.exists(p + ".dp") or os.path.exists(p + ".safetensors")):
            fail(f"{name}: expected a located one-line error containing '{msg}' and no output; got exit "
                 f"{r.returncode}: {r.stderr.strip()}")
        print(f"{name}: refused: {lines[0]}")
    print("ok")


if __name__ == "__main__":
    main()
