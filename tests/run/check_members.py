#!/usr/bin/python3
"""check_members.py DPC - Parameter and buffer members against PyTorch.

members/tensor_members.dp is built here by hand in PyTorch (nn.Parameter,
register_buffer with and without persistent=False), and dpc must agree:
  - the state_dict: keys in PyTorch's order (a module's parameters, then its
    persistent buffers, then its children), shapes and dtypes, as the .dpa
    summary lists them; non-persistent buffers are absent;
  - `dpc print` is print(model) (PyTorch prints no parameters);
  - `dpc init`: constants as the creation expression says (zeros, ones * s,
    arange(...).expand, full), random ones from their distribution
    (normal_(std=0.02), rand * 2 - 1);
  - `dpc run` with those weights equals the PyTorch module loaded with them
    (strict), in float64, at batch 3 and over --devices cpu,cpu.
And members/shared_table.dp: inputs without the batch dim are passed whole
to every replica (over 1, 2 and 3 CPU replicas), and checked in full. And
members/int_buffers.dp: int64 and bool buffers read in forward (a persistent
position_ids, loaded from the weights, here not arange; non-persistent
int64 and bool constants), at two run-time lengths, against PyTorch; the
weights without position_ids, or with one of another shape or dtype, are
refused by name.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
import st  # noqa: E402

MODEL = os.path.join(HERE, "members", "tensor_members.dp")


class Block(nn.Module):
    def __init__(self, dim, layer_scale=0.5):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.layer_scale = nn.Parameter(torch.ones(dim) * layer_scale)
        self.register_buffer("shift", torch.arange(dim).float() / 10, persistent=False)

    def forward(self, x):
        return self.fc(x) * self.layer_scale + self.shift


class Members(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.class_token = nn.Parameter(torch.zeros(1, dim))
        self.blk = Block(dim)
        self.pos = nn.Parameter(torch.empty(1, dim).normal_(std=0.02))
        self.register_buffer("position_ids", torch.arange(16).expand((1, -1)))
        self.register_buffer("mask", torch.tril(torch.ones(dim, dim)), persistent=False)
        self.register_buffer("u", torch.rand(2, dim) * 2 - 1)
        self.register_buffer("scale", torch.full((1, dim), 0.25))

    def forward(self, x):
        return self.blk(x) @ self.mask + self.class_token + self.pos * self.scale


failures = []


def need(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def shared_table(dpc):
    """members/shared_table.dp: inputs without the batch dim go whole to
    every replica (x is split, table and bias are not)."""
    model = os.path.join(HERE, "members", "shared_table.dp")
    with tempfile.TemporaryDirectory() as tmp:
        w = os.path.join(tmp, "w.safetensors")
        need(run(dpc, "init", model, "-o", w).returncode == 0, "shared table: init")
        got = st.load(w)
        r = np.random.default_rng(1)
        x = r.standard_normal((5, 4)).astype(np.float32)
        t = r.standard_normal((4, 3)).astype(np.float32)
        b = r.standard_normal(3).astype(np.float32)
        paths = []
        for name, v in (("x", x), ("t", t), ("b", b)):
            paths.append(os.path.join(tmp, name + ".npy"))
            np.save(paths[-1], v)
        fw, fb = got["fc.weight"].astype(np.float64), got["fc.bias"].astype(np.float64)
        want = (x.astype(np.float64) @ fw.T + fb) @ t.astype(np.float64) + b
        args = [a for p in paths for a in ("--input", p)]
        for devs in ("cpu", "cpu,cpu", "cpu,cpu,cpu"):
            out = os.path.join(tmp, "y.npy")
            p = run(dpc, "run", model, "--weights", w, *args, "--devices", devs, "-o", out)
            ok = p.returncode == 0 and np.allclose(np.load(out), want, rtol=1e-5, atol=1e-5)
            need(ok, f"shared table over {devs}: {p.stderr.strip()}")
        bad = os.path.join(tmp, "t2.npy")
        np.save(bad, np.zeros((5, 3), np.float32))
        p = run(dpc, "run", model, "--weights", w, "--input", paths[0], "--input", bad, "--input", paths[2],
                "-o", os.path.join(tmp, "y.npy"))
        need(p.returncode != 0 and "input 'table' must have shape [4, 3], got [5, 3]" in p.stderr,
             "shared table: a table of the wrong shape is refused: " + p.stderr.strip())


class IntBuffers(nn.Module):
    def __init__(self, dim=8, max_len=12):
        super().__init__()
        self.emb = nn.Embedding(max_len, dim)
        self.register_buffer("position_ids", torch.arange(max_len).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.ones(1, max_len, dtype=torch.int64) * 3, persistent=False)
        self.register_buffer("bias", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)).view(1, max_len, max_len),
                             persistent=False)

    def forward(self, x):
        S = x.shape[1]
        ids = self.position_ids[:, 0:S]
        w = x @ x.transpose(-1, -2)
        w = torch.where(self.bias[:, 0:S, 0:S], w, torch.tensor(-1000.0, dtype=x.dtype))
        y = torch.softmax(w, dim=-1) @ (x + self.emb(ids))
        return y + (ids * 2 + self.token_type_ids[:, 0:S]).unsqueeze(-1).to(x.dtype)


def int_buffers(dpc):
    model = os.path.join(HERE, "members", "int_buffers.dp")
    with tempfile.TemporaryDirectory() as tmp:
        w = os.path.join(tmp, "w.safetensors")
        need(run(dpc, "init", model, "-o", w).returncode == 0, "int buffers: init")
        got = st.load(w)
        need(sorted(got) == ["emb.weight", "position_ids"], f"int buffers: state_dict keys {sorted(got)}")
        # not arange: forward must read the loaded values (PyTorch's rule)
        got["position_ids"] = np.array([[7, 3, 11, 0, 5, 9, 1, 2, 10, 4, 6, 8]], np.int64)
        st.save(w, got)
        ref = IntBuffers().eval()
        ref.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in got.items()}, strict=True)
        ref = ref.double()
        r = np.random.default_rng(2)
        for S in (5, 12):
            x = r.standard_normal((3, S, 8)).astype(np.float32)
            xp, out = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
            np.save(xp, x)
            want = ref(torch.from_numpy(x).double()).detach().numpy()
            p = run(dpc, "run", model, "--weights", w, "--input", xp, "-o", out)
            ok = p.returncode == 0
            err = np.linalg.norm(np.load(out).astype(np.float64) - want) / np.linalg.norm(want) if ok else None
            need(ok and err < 1e-5, f"int buffers at S = {S} equal PyTorch (rel err {err}): {p.stderr.strip()}")
        # the model is compiled per S: position_ids is checked when S is bound,
        # so a missing one, one of another shape or a float one are refused then
        bad = {"missing": None, "shape": np.arange(3, dtype=np.int64).reshape(1, 3),
               "dtype": np.arange(12, dtype=np.float32).reshape(1, 12)}
        for what, v in bad.items():
            w2 = dict(got)
            if v is None:
                del w2["position_ids"]
            else:
                w2["position_ids"] = v
            st.save(w, w2)
            if os.path.exists(out):
                os.remove(out)
            p = run(dpc, "run", model, "--weights", w, "--input", xp, "-o", out)
            need(p.returncode == 1 and "position_ids" in p.stderr and len(p.stderr.strip().splitlines()) == 1
                 and not os.path.exists(out), f"int buffers: position_ids {what} is refused: " + p.stderr.strip())


def main():
    dpc = sys.argv[1]
    ref = Members().eval()
    sd = ref.state_dict()
    with tempfile.TemporaryDirectory() as tmp:
        p = run(dpc, "print", MODEL)
        need(p.returncode == 0 and p.stdout == repr(ref) + "\n", "print equals PyTorch's")
        dpa = os.path.join(tmp, "m.dpa")
        p = run(dpc, "compile", MODEL, "-o", dpa)
        need(p.returncode == 0, "compile: " + p.stderr.strip())
        summary = json.loads(st.read_header(dpa)["__metadata__"]["dpc.summary"])
        entries = summary["parameters"]["entries"]
        need([e["key"] for e in entries] == list(sd.keys()),
             f"state_dict order: {[e['key'] for e in entries]} vs {list(sd.keys())}")
        need([e["shape"] for e in entries] == [list(v.shape) for v in sd.values()], "state_dict shapes")
        need([e["dtype"] for e in entries] == [{torch.float32: "f32", torch.int64: "i64"}[v.dtype]
                                                for v in sd.values()], "state_dict dtypes")
        w = os.path.join(tmp, "w.safetensors")
        p = run(dpc, "init", MODEL, "-o", w, "--seed", "7")
        need(p.returncode == 0, "init: " + p.stderr.strip())
        got = st.load(w)
        need(sorted(got) == sorted(sd), f"init writes the state_dict keys: {sorted(got)}")
        need(np.array_equal(got["class_token"], np.zeros((1, 64), np.float32)), "class_token: zeros")
        need(np.array_equal(got["blk.layer_scale"], np.full(64, 0.5, np.float32)), "layer_scale: ones * 0.5")
        need(got["position_ids"].dtype == np.int64 and
             np.array_equal(got["position_ids"], np.arange(16).reshape(1, 16)), "position_ids: arange, int64")
        need(np.array_equal(got["scale"], np.full((1, 64), 0.25, np.float32)), "scale: full")
        pos = got["pos"].astype(np.float64)
        need(0.01 < pos.std() < 0.03 and abs(pos.mean()) < 0.01, f"pos: normal_(std=0.02), std {pos.std():.4f}")
        u = got["u"]
        need(u.min() >= -1 and u.max() < 1 and u.max() - u.min() > 1, "u: rand * 2 - 1 in [-1, 1)")
        # PyTorch loads the file strictly; the outputs agree
        ref.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in got.items()}, strict=True)
        x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
        xp = os.path.join(tmp, "x.npy")
        np.save(xp, x)
        want = ref.double()(torch.from_numpy(x).double()).detach().numpy()
        for devs in ("cpu", "cpu,cpu"):
            out = os.path.join(tmp, "y.npy")
            p = run(dpc, "run", MODEL, "--weights", w, "--input", xp, "--devices", devs, "-o", out)
            need(p.returncode == 0, f"run on {devs}: " + p.stderr.strip())
            if p.returncode == 0:
                y = np.load(out).astype(np.float64)
                err = np.linalg.norm(y - want) / np.linalg.norm(want)
                need(err < 1e-5, f"run on {devs} equals PyTorch (rel err {err:.2e})")
    shared_table(dpc)
    int_buffers(dpc)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
