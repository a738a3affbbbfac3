#!/usr/bin/python3
"""zoo_check — the zoo of models/zoo/*.dp (shared/spec/models.md) against the PyTorch originals.

    zoo_check.py check DPC NAME [--model models/zoo/NAME.dp] [--checks print,run]
                 [--batches 1,3,8] [--seqs 13,64] [--devices cpu] [--dp-devices cpu,cpu]
                 [--rtol64 1e-5] [--rtol32 1e-4] [--keep DIR]
    zoo_check.py seqs DPC ZOO_MULTI_RUN bert|gpt2 [--seqs 13,64,13] [--batch 2]
    zoo_check.py selftest [NAME ...] [--no-forward] [--harness]
    zoo_check.py list
    zoo_check.py print NAME [--no-wrap]            # the expected `dpc print` text
    zoo_check.py prepare NAME -o DIR [--batch B] [--seq S]
                                                   # weights, inputs, expected outputs, print text

`check` builds the original (torchvision.models.NAME() with default
arguments and weights=None; torchvision's VisionTransformer with the
vit_small arguments; tests/ref/hf_models.py for bert and gpt2) after
torch.manual_seed(seed), in eval mode, makes its weights non-trivial (see
test_weights), then:

* print: `dpc print MODEL.dp` must be byte for byte print(model), wrapped in
  `DataParallel(\n  (module): …\n)` when the file's entry line is
  `model = DataParallel(...)` (as torch.nn.DataParallel prints), with the
  PyTorch 2.x ModuleList compression of tests/ref/torch_print.py; a unified
  diff is shown on failure;
* run: the original's state_dict (every key, num_batches_tracked and
  BERT's embeddings.position_ids included) is saved as safetensors
  (tests/ref/st.py) and, for every batch (and sequence length for bert and
  gpt2), `dpc run MODEL.dp --weights W --input X.npy … --devices D -o Y.npy …`
  must give the original's outputs within --rtol64 relative L2 of PyTorch in
  float64 and --rtol32 of PyTorch in float32; the same run over --dp-devices
  (cpu,cpu) must agree with them too, and with the one-device run within
  1e-6 (dataparallel.md, "Same answer").

Inputs (.npy): images float32 [N, 3, 224, 224] (vit_small [N, 3, 32, 32]),
standard normal; bert input_ids, attention_mask (1 = keep; random zeros, the
first token always kept, at least one zero per row when S > 1) and
token_type_ids (0 then 1 from a random split point), all int64 [N, S], passed
in that order; gpt2 input_ids int64 [N, S].  Outputs: one -o per returned
tensor (bert: last_hidden_state, pooler_output).

`seqs` (bert, gpt2): `dpc compile` once, then tests/zoo/zoo_multi_run.c loads
the .dpa and binds the weights once through the public C API and runs every
S of --seqs in that order in one process (default 13, 64, 13; each run with
inputs of its own, so a repeated S must compute on its new inputs), every
output against the original as for `check`.

Exit status: 0 all checks passed, 1 a check failed (a message says which),
2 bad usage, 77 (CTest SKIP) when the model file does not exist.

`selftest` checks the PyTorch side alone, with no dpc: for each original,
for bert and gpt2 the record of the real transformers 4.30.2 in
tests/ref/hf_golden.json (print, state_dict, outputs), the expected print text (wrapper, 2.x compression for the ModuleLists of
bert and gpt2, unchanged text for the torchvision models), the safetensors
round trip (same keys, shapes, dtypes and bytes as state_dict(), loading
strictly into a freshly built original, identical outputs), non-trivial
weights, finite and input-dependent outputs, and PyTorch's own float32
error against float64 well inside the bounds dpc must meet.  `--harness`
also runs `check` end to end against tests/zoo/fake_dpc.py (a stand-in dpc
written with PyTorch), once as is (must pass) and once with a planted
print and a planted numeric fault (each must fail).
"""

from __future__ import annotations

import argparse
import copy
import difflib
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.normpath(os.path.join(HERE, "..", "ref"))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, REF)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import st  # noqa: E402
import torch_print  # noqa: E402
import hf_golden  # noqa: E402
import hf_models  # noqa: E402
from compare import rel_l2  # noqa: E402

SKIP = 77


# ---------------------------------------------------------------------------
# The zoo: how each original is built and what it takes
# ---------------------------------------------------------------------------

def _tv(name):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None)
    return build


def _vit_small():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                             hidden_dim=64, mlp_dim=128, num_classes=10)


# name -> (builder, input kind)
ZOO = {
    "resnet18": (_tv("resnet18"), "image224"),
    "resnet50": (_tv("resnet50"), "image224"),
    "mobilenet_v2": (_tv("mobilenet_v2"), "image224"),
    "mobilenet_v3_small": (_tv("mobilenet_v3_small"), "image224"),
    "efficientnet_b0": (_tv("efficientnet_b0"), "image224"),
    "vgg11": (_tv("vgg11"), "image224"),
    "alexnet": (_tv("alexnet"), "image224"),
    "convnext_tiny": (_tv("convnext_tiny"), "image224"),
    "vit_b_16": (_tv("vit_b_16"), "image224"),
    "vit_small": (_vit_small, "image32"),
    "bert": (lambda: hf_models.bert(num_hidden_layers=2), "bert"),
    "gpt2": (lambda: hf_models.gpt2(n_layer=2), "gpt2"),
}
SEQ_KINDS = ("bert", "gpt2")


class Fail(Exception):
    """A check failed; the message says which and why."""


def build(name: str, seed: int = 0) -> nn.Module:
    """The original, built after torch.manual_seed(seed), in eval mode."""
    if name not in ZOO:
        raise KeyError(name)
    torch.manual_seed(seed)
    return ZOO[name][0]().eval()


def calibrate_batchnorm(model: nn.Module, kind: str, seed: int) -> None:
    """Set every BatchNorm's running statistics to those of one random batch
    (4 standard-normal images through the model, only the BatchNorms in
    training mode, cumulative averaging), in place.  Random statistics that
    do not match the activations make the deep depthwise nets (mobilenet,
    efficientnet) lose their input: their default init shrinks activations
    layer after layer (kaiming fan_out of a depthwise conv) and a wrong
    running_var does not undo it, so every image gave the same logits to 1e-9.
    momentum, num_batches_tracked and the mode are restored."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    hw = 224 if kind == "image224" else 32
    x = torch.from_numpy(np.random.default_rng(seed).standard_normal((4, 3, hw, hw)).astype(np.float32))
    saved = [(m.momentum, m.training) for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    with torch.no_grad():
        model(x)
        for m, (momentum, training) in zip(bns, saved):
            m.momentum = momentum
            m.train(training)
            m.num_batches_tracked.zero_()


# With every BatchNorm at unit variance, a deep residual net is close to
# chaotic: float32 rounding grows about 3x per ResNet-50 stage (6.5e-6
# relative at the logits against float64, too close to the 1e-5 that dpc
# must meet).  Trained nets keep their residual branches small; so do these
# test weights, by scaling the branch's last BatchNorm (gamma and beta) by
# RESIDUAL_GAIN, half-way to torchvision's zero_init_residual.
RESIDUAL_GAIN = 0.2


def residual_branch_norms(model: nn.Module) -> list:
    """The BatchNorm that ends each residual branch (added to the identity):
    ResNet's bn2 (BasicBlock) / bn3 (Bottleneck), the last BatchNorm of
    MobileNet v2/v3's InvertedResidual and EfficientNet's MBConv when they
    take the residual connection."""
    from torchvision.models import efficientnet, mobilenetv2, mobilenetv3, resnet
    out = []
    for m in model.modules():
        if isinstance(m, resnet.BasicBlock):
            out.append(m.bn2)
        elif isinstance(m, resnet.Bottleneck):
            out.append(m.bn3)
        elif isinstance(m, mobilenetv2.InvertedResidual) and m.use_res_connect:
            out.append(m.conv[-1])
        elif isinstance(m, (mobilenetv3.InvertedResidual, efficientnet.MBConv)) and m.use_res_connect:
            out.append(m.block[-1][1])
    return out


def test_weights(model: nn.Module, seed: int = 1, kind: str | None = None) -> nn.Module:
    """Make every weight matter, in place (the default inits leave many
    tensors constant, so a wrong kernel could still match):

    * BatchNorm running_mean and running_var: the statistics of one random
      batch (calibrate_batchnorm), so the activations keep their scale;
    * a parameter whose elements are all equal gets:
      `layer_scale` (ConvNeXt, 1e-6) U(0.1, 0.5); zeros of rank >= 2
      (ViT's head weight, class_token) N(0, 1/fan_in); other zeros (biases,
      in_proj_bias, norm biases) N(0, 0.1); any other constant c (norm
      weights, 1) c * (1 + N(0, 0.1));
    * the BatchNorm ending each residual branch scaled by RESIDUAL_GAIN.
    Drawn from a generator seeded with `seed`; integer buffers
    (num_batches_tracked, position_ids) and non-persistent buffers are left
    alone."""
    gen = torch.Generator().manual_seed(seed)

    def randn(shape):
        return torch.randn(shape, generator=gen, dtype=torch.float64)

    calibrate_batchnorm(model, kind or "image224", seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.detach().reshape(-1)
            if flat.numel() == 0 or not bool((flat == flat[0]).all()):
                continue
            c = float(flat[0])
            if name.endswith("layer_scale"):
                new = 0.1 + 0.4 * torch.rand(p.shape, generator=gen, dtype=torch.float64)
            elif c == 0.0 and p.dim() >= 2:
                new = randn(p.shape) / math.sqrt(max(1, p.shape[-1]))
            elif c == 0.0:
                new = 0.1 * randn(p.shape)
            else:
                new = c * (1 + 0.1 * randn(p.shape))
            p.copy_(new)
        for bn in residual_branch_norms(model):
            bn.weight.mul_(RESIDUAL_GAIN)
            bn.bias.mul_(RESIDUAL_GAIN)
    return model


def original(name: str, seed: int = 0) -> nn.Module:
    """build() then test_weights(): the model every check compares with."""
    return test_weights(build(name, seed), seed + 1, ZOO[name][1])


def state_arrays(model: nn.Module) -> dict:
    """state_dict() as {key: np.ndarray}, every key as PyTorch saves it."""
    return {k: v.detach().cpu().contiguous().numpy() for k, v in model.state_dict().items()}


def save_weights(model: nn.Module, path: str) -> dict:
    arrays = state_arrays(model)
    st.save(path, arrays, metadata={"format": "pt"})
    return arrays


# ---------------------------------------------------------------------------
# The expected print text
# ---------------------------------------------------------------------------

_DP_LINE = re.compile(r"^\s*model\s*=\s*DataParallel\s*\(", re.M)


def file_wraps(path: str) -> bool:
    """Does the .dp file's entry line say `model = DataParallel(...)`?"""
    with open(path, encoding="utf-8") as f:
        text = "\n".join(line.split("#", 1)[0] for line in f.read().splitlines())
    return bool(_DP_LINE.search(text))


def expected_print(model: nn.Module, wrap: bool = True) -> str:
    """print(model) as PyTorch 2.x prints it (ModuleList runs compressed),
    inside torch.nn.DataParallel's repr when wrap; no trailing newline."""
    saved = nn.ModuleList.__repr__
    torch_print.install_modulelist_repr()
    try:
        return repr(nn.DataParallel(model)) if wrap else repr(model)
    finally:
        nn.ModuleList.__repr__ = saved


def print_diff(expected: str, got: str, label: str) -> str:
    lines = list(difflib.unified_diff(expected.splitlines(True), got.splitlines(True),
                                      "expected (PyTorch)", label, n=2))
    if len(lines) > 200:
        lines = lines[:200] + [f"... ({len(lines) - 200} more diff lines)\n"]
    return "".join(lines)


# ---------------------------------------------------------------------------
# Inputs and reference outputs
# ---------------------------------------------------------------------------

def input_names(name: str) -> list:
    kind = ZOO[name][1]
    return {"bert": ["input_ids", "attention_mask", "token_type_ids"],
            "gpt2": ["input_ids"]}.get(kind, ["x"])


def make_inputs(name: str, batch: int, seq: int | None = None, seed: int = 0) -> list:
    """[np.ndarray, ...] in forward order (see the module docstring)."""
    kind = ZOO[name][1]
    rng = np.random.default_rng([seed, batch, seq or 0, sorted(ZOO).index(name)])
    if kind in ("image224", "image32"):
        hw = 224 if kind == "image224" else 32
        return [rng.standard_normal((batch, 3, hw, hw)).astype(np.float32)]
    if seq is None:
        raise ValueError(f"{name} needs a sequence length")
    if kind == "gpt2":
        return [rng.integers(0, 50257, size=(batch, seq)).astype(np.int64)]
    ids = rng.integers(0, 30522, size=(batch, seq)).astype(np.int64)
    mask = (rng.random((batch, seq)) >= 0.2).astype(np.int64)
    mask[:, 0] = 1
    if seq > 1:
        for i in range(batch):
            if mask[i].all():
                mask[i, 1 + int(rng.integers(0, seq - 1))] = 0
    split = rng.integers(1, seq + 1, size=batch)
    tt = (np.arange(seq)[None, :] >= split[:, None]).astype(np.int64)
    return [ids, mask, tt]


def forward(model: nn.Module, inputs: list, dtype=torch.float32) -> list:
    """The model's outputs as a list of float64 arrays, computed in dtype
    (the model is converted in place; float inputs are cast)."""
    model.to(dtype)
    ts = [torch.from_numpy(a).to(dtype) if a.dtype.kind == "f" else torch.from_numpy(a) for a in inputs]
    with torch.no_grad():
        out = model(*ts)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o.detach().to(torch.float64).numpy() for o in outs]


class References:
    """float32 and float64 forwards of one original (a float64 copy is
    made once)."""

    def __init__(self, model: nn.Module):
        self.m32 = model.float()
        self.m64 = None

    def __call__(self, inputs: list) -> tuple:
        if self.m64 is None:
            self.m64 = copy.deepcopy(self.m32).double()
        return forward(self.m32, inputs, torch.float32), forward(self.m64, inputs, torch.float64)


# ---------------------------------------------------------------------------
# check: dpc against the original
# ---------------------------------------------------------------------------

def run_cmd(cmd: list, timeout: float, what: str) -> subprocess.CompletedProcess:
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Fail(f"{what}: timed out after {timeout:.0f} s: {' '.join(cmd)}")
    except OSError as e:
        raise Fail(f"{what}: cannot run {cmd[0]}: {e}")
    if r.returncode != 0:
        raise Fail(f"{what}: exit {r.returncode} after {time.time() - t0:.1f} s: {' '.join(cmd)}\n"
                   f"{r.stdout[-4000:]}{r.stderr[-4000:]}")
    return r


def check_print(a, model: nn.Module) -> None:
    wrap = file_wraps(a.model) if a.wrap == "auto" else a.wrap == "yes"
    want = expected_print(model, wrap) + "\n"
    r = run_cmd([a.dpc, "print", a.model], a.timeout, "dpc print")
    if r.stdout != want:
        raise Fail(f"print: `dpc print {a.model}` differs from PyTorch's print(model)"
                   f"{' inside DataParallel' if wrap else ''}:\n" +
                   print_diff(want, r.stdout, "dpc print"))
    print(f"print: ok ({len(want.splitlines())} lines, byte for byte"
          f"{', DataParallel wrapper' if wrap else ''})", flush=True)


def compare_outputs(got: list, ref32: list, ref64: list, a, label: str) -> list:
    if len(got) != len(ref64):
        raise Fail(f"{label}: {len(got)} outputs, the original returns {len(ref64)}")
    errs = []
    for i, (y, r32, r64) in enumerate(zip(got, ref32, ref64)):
        if tuple(y.shape) != tuple(r64.shape):
            raise Fail(f"{label}: output {i} has shape {list(y.shape)}, the original {list(r64.shape)}")
        if not np.isfinite(y).all():
            raise Fail(f"{label}: output {i} has {int((~np.isfinite(y)).sum())} non-finite values")
        e64, e32 = rel_l2(y, r64), rel_l2(y, r32)
        errs.append((e64, e32))
        if not (e64 <= a.rtol64 and e32 <= a.rtol32):
            d = np.abs(y.astype(np.float64) - r64)
            worst = np.unravel_index(int(np.argmax(d)), d.shape)
            raise Fail(f"{label}: output {i} {list(y.shape)}: rel L2 {e64:.3e} against float64 (bound "
                       f"{a.rtol64:.0e}), {e32:.3e} against float32 (bound {a.rtol32:.0e}); worst element "
                       f"{list(map(int, worst))}: dpc {float(y[worst]):.9g}, PyTorch {float(r64[worst]):.9g}")
    return errs


def check_run(a, model: nn.Module, work: str) -> None:
    wpath = os.path.join(work, f"{a.name}.safetensors")
    t0 = time.time()
    arrays = save_weights(model, wpath)
    print(f"weights: {len(arrays)} tensors, {os.path.getsize(wpath) / 1e6:.1f} MB ({time.time() - t0:.1f} s)",
          flush=True)
    refs = References(model)
    seqs = a.seqs if ZOO[a.name][1] in SEQ_KINDS else [None]
    for s in seqs:
        for b in a.batches:
            tag = f"b{b}" + (f"_s{s}" if s is not None else "")
            inputs = make_inputs(a.name, b, s, a.seed)
            ipaths = []
            for nm, arr in zip(input_names(a.name), inputs):
                p = os.path.join(work, f"{tag}_{nm}.npy")
                np.save(p, arr, allow_pickle=False)
                ipaths.append(p)
            t0 = time.time()
            ref32, ref64 = refs(inputs)
            t_ref = time.time() - t0
            iargs = sum((["--input", p] for p in ipaths), [])
            runs = [("one device", a.devices)]
            if a.dp_devices:
                runs.append((f"--devices {a.dp_devices}", a.dp_devices))
            first = None
            for label, devs in runs:
                outs = [os.path.join(work, f"{tag}_{devs.replace(',', '_').replace(':', '')}_y{i}.npy")
                        for i in range(len(ref64))]
                cmd = [a.dpc, "run", a.model, "--weights", wpath] + iargs
                if devs:
                    cmd += ["--devices", devs]
                cmd += sum((["-o", o] for o in outs), [])
                t0 = time.time()
                run_cmd(cmd, a.timeout, f"dpc run ({tag}, {label})")
                t_run = time.time() - t0
                got = [np.load(o, allow_pickle=False) for o in outs]
                where = f"run {tag} ({label})"
                errs = compare_outputs(got, ref32, ref64, a, where)
                if first is None:
                    first = got
                else:
                    for i, (y0, y1) in enumerate(zip(first, got)):
                        e = rel_l2(y1, y0)
                        if not e <= 1e-6:
                            raise Fail(f"{where}: output {i} differs from the one-device run by "
                                       f"{e:.3e} relative L2 (bound 1e-6)")
                print(f"{where}: ok, rel L2 " + ", ".join(f"{e64:.2e} (f64) {e32:.2e} (f32)" for e64, e32 in errs) +
                      f"; dpc {t_run:.1f} s, PyTorch {t_ref:.1f} s", flush=True)
                t_ref = 0.0


def cmd_check(a) -> int:
    if a.name not in ZOO:
        print(f"zoo_check: error: unknown zoo model '{a.name}' (known: {', '.join(ZOO)})", file=sys.stderr)
        return 2
    a.model = a.model or os.path.join(ROOT, "models", "zoo", a.name + ".dp")
    if not os.path.exists(a.model):
        print(f"zoo_check: {a.model} does not exist: skipped")
        return SKIP
    if not (os.path.isfile(a.dpc) and os.access(a.dpc, os.X_OK)):
        print(f"zoo_check: error: {a.dpc} is not an executable file", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    checks = [c for c in a.checks.split(",") if c]
    t0 = time.time()
    model = original(a.name, a.seed)
    print(f"{a.name}: original built ({sum(p.numel() for p in model.parameters())} parameters, "
          f"{time.time() - t0:.1f} s); model file {a.model}", flush=True)
    work = a.keep or tempfile.mkdtemp(prefix=f"zoo_{a.name}_")
    os.makedirs(work, exist_ok=True)
    try:
        if "print" in checks:
            check_print(a, model)
        if "run" in checks:
            check_run(a, model, work)
    except Fail as e:
        print(f"FAIL {a.name}: {e}")
        return 1
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"PASS {a.name}: {', '.join(checks)} ({time.time() - t0:.0f} s)")
    return 0


# ---------------------------------------------------------------------------
# seqs: several sequence lengths in one process
# ---------------------------------------------------------------------------

def cmd_seqs(a) -> int:
    """bert/gpt2: `dpc compile` once, then one process (zoo_multi_run, the
    public C API) binds the original's weights once and runs every S of
    --seqs in that order (a repeated S with new inputs: the cached
    specialisation must compute on them); every output against PyTorch."""
    if a.name not in ZOO or ZOO[a.name][1] not in SEQ_KINDS:
        print(f"zoo_check: error: seqs takes a sequence model ({', '.join(n for n in ZOO if ZOO[n][1] in SEQ_KINDS)})",
              file=sys.stderr)
        return 2
    a.model = a.model or os.path.join(ROOT, "models", "zoo", a.name + ".dp")
    if not os.path.exists(a.model):
        print(f"zoo_check: {a.model} does not exist: skipped")
        return SKIP
    for exe in (a.dpc, a.driver):
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            print(f"zoo_check: error: {exe} is not an executable file", file=sys.stderr)
            return 2
    torch.set_num_threads(a.threads)
    t0 = time.time()
    model = original(a.name, a.seed)
    work = a.keep or tempfile.mkdtemp(prefix=f"zoo_seqs_{a.name}_")
    os.makedirs(work, exist_ok=True)
    try:
        wpath = os.path.join(work, f"{a.name}.safetensors")
        save_weights(model, wpath)
        dpa = os.path.join(work, f"{a.name}.dpa")
        run_cmd([a.dpc, "compile", a.model, "-o", dpa], a.timeout, "dpc compile")
        refs = References(model)
        tags, want = [], []
        for k, s in enumerate(a.seqs):
            tag = f"r{k}_s{s}"
            # a new seed per run: a repeated S gets new inputs
            inputs = make_inputs(a.name, a.batch, s, a.seed + k)
            for i, arr in enumerate(inputs):
                np.save(os.path.join(work, f"{tag}_in{i}.npy"), arr, allow_pickle=False)
            tags.append(tag)
            want.append(refs(inputs))
        nout = len(want[0][1])
        t1 = time.time()
        r = run_cmd([a.driver, dpa, wpath, work, str(len(input_names(a.name))), str(nout)] + tags,
                    a.timeout, "zoo_multi_run")
        sys.stdout.write(r.stdout)
        t_run = time.time() - t1
        for tag, s, (ref32, ref64) in zip(tags, a.seqs, want):
            got = [np.load(os.path.join(work, f"{tag}_out{j}.npy"), allow_pickle=False) for j in range(nout)]
            errs = compare_outputs(got, ref32, ref64, a, f"{tag} (batch {a.batch}, S = {s})")
            print(f"{tag} (batch {a.batch}, S = {s}): ok, rel L2 " +
                  ", ".join(f"{e64:.2e} (f64) {e32:.2e} (f32)" for e64, e32 in errs), flush=True)
    except Fail as e:
        print(f"FAIL {a.name}: {e}")
        return 1
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"PASS {a.name}: S = {', '.join(map(str, a.seqs))} in one process "
          f"(driver {t_run:.1f} s, total {time.time() - t0:.0f} s)")
    return 0


# ---------------------------------------------------------------------------
# selftest: the PyTorch side alone
# ---------------------------------------------------------------------------

def selftest_model(name: str, do_forward: bool, work: str) -> list:
    """Return a list of failure messages (empty: passed)."""
    bad = []

    def need(cond, msg):
        if not cond:
            bad.append(f"{name}: {msg}")
        return cond

    t0 = time.time()
    model = build(name)
    t_build = time.time() - t0
    cls = type(model).__name__
    plain = repr(model)
    text = expected_print(model, wrap=True)
    unwrapped = expected_print(model, wrap=False)
    need(text == "DataParallel(\n  (module): " + unwrapped.replace("\n", "\n  ") + "\n)",
         "the DataParallel wrapper is not torch.nn.DataParallel's (module) child")
    need(unwrapped.startswith(cls + "(\n"), f"the text does not start with {cls}(")
    if "ModuleList" not in plain:
        need(unwrapped == plain, "the 2.x ModuleList rule changed a text without ModuleList")
    if ZOO[name][1] in SEQ_KINDS:
        golden = hf_golden.load()
        if need(golden is not None, f"{hf_golden.PATH} is missing (tests/ref/check_hf_ref.py writes it)"):
            for b in hf_golden.compare(name, build(name), golden["models"][name]):
                need(False, f"against the record of transformers {golden['transformers']}: {b}")
        block = "BertLayer" if name == "bert" else "GPT2Block"
        need(f"(0-1): 2 x {block}(" in text and "(1): " + block not in text,
             f"ModuleList of two {block} not compressed as PyTorch 2.x does")
    else:
        need("ModuleList" not in plain, "unexpected ModuleList (the 2.x rule would change its text)")
    need(text.endswith("\n  )\n)"), "text does not end as DataParallel(...) does")

    test_weights(model, 1, ZOO[name][1])
    sd = model.state_dict()
    const = [k for k, v in sd.items() if v.is_floating_point() and v.numel() > 1 and
             bool((v.reshape(-1) == v.reshape(-1)[0]).all())]
    need(not const, f"constant float tensors left after test_weights: {const[:5]}")
    path = os.path.join(work, name + ".safetensors")
    t0 = time.time()
    save_weights(model, path)
    t_save = time.time() - t0
    back = st.load(path)
    need(sorted(back) == sorted(sd), f"safetensors keys differ: {sorted(set(back) ^ set(sd))[:5]}")
    for k, v in sd.items():
        if k in back:
            arr = v.contiguous().numpy()
            if not need(back[k].shape == arr.shape and back[k].dtype == arr.dtype and
                        back[k].tobytes() == arr.tobytes(), f"{k}: saved {back[k].dtype}{list(back[k].shape)} "
                        f"!= {arr.dtype}{list(arr.shape)} or different bytes"):
                break
    fresh = build(name, seed=12345)
    try:
        fresh.load_state_dict({k: torch.from_numpy(v) for k, v in back.items()}, strict=True)
    except RuntimeError as e:
        need(False, f"the saved weights do not load strictly into a fresh original: {e}")
    os.unlink(path)

    msg = f"{name:20s} {cls:18s} build {t_build:5.2f} s, save {t_save:5.2f} s, {len(sd):4d} tensors"
    if do_forward:
        seq = 13 if ZOO[name][1] in SEQ_KINDS else None
        inputs = make_inputs(name, 2, seq)
        refs = References(model)
        t0 = time.time()
        y32, y64 = refs(inputs)
        t_fwd = time.time() - t0
        yf = forward(fresh, inputs, torch.float32)
        for i, (a32, a64, af) in enumerate(zip(y32, y64, yf)):
            need(np.isfinite(a64).all() and np.linalg.norm(a64) > 0, f"output {i} not finite or zero")
            need(np.array_equal(a32, af), f"output {i}: the reloaded weights give different outputs")
            e = rel_l2(a32, a64)
            need(e <= 1e-6, f"output {i}: PyTorch float32 vs float64 {e:.2e}: too close to dpc's bounds")
            d = rel_l2(a64[1], a64[0])
            need(d > 1e-3, f"output {i}: samples 0 and 1 give the same output (rel {d:.1e}): input ignored?")
            msg += f"; out{i} {list(a64.shape)} f32-vs-f64 {e:.1e}, sample 1 vs 0 {d:.1e}"
        msg += f" (fwd {t_fwd:.1f} s)"
    print(("ok   " if not bad else "FAIL ") + msg, flush=True)
    return bad


def selftest_harness(work: str) -> list:
    """check end to end with tests/zoo/fake_dpc.py on vit_small (and bert's
    print): must pass as is, fail with each planted fault."""
    bad = []
    fake = os.path.join(HERE, "fake_dpc.py")
    zoo = os.path.join(work, "zoo")
    os.makedirs(zoo, exist_ok=True)
    with open(os.path.join(zoo, "vit_small.dp"), "w") as f:
        f.write("# stand-in for the harness self-test\nmodel = DataParallel(VisionTransformer())\n")
    with open(os.path.join(zoo, "bert.dp"), "w") as f:
        f.write("# stand-in; no DataParallel line\n# model = DataParallel(BertModel())\nmodel = BertModel()\n")
    cases = [("vit_small", ["--batches", "1,3"], None, 0),
             ("vit_small", ["--batches", "1", "--checks", "print"], "print", 1),
             ("vit_small", ["--batches", "3", "--checks", "run"], "run", 1),
             ("vit_small", ["--batches", "3", "--checks", "run"], "replicas", 1),
             ("bert", ["--checks", "print"], None, 0)]
    for name, extra, fault, want in cases:
        env = dict(os.environ)
        env.pop("FAKE_DPC_FAULT", None)
        if fault:
            env["FAKE_DPC_FAULT"] = fault
        cmd = [sys.executable, os.path.abspath(__file__), "check", fake, name,
               "--model", os.path.join(zoo, name + ".dp")] + extra
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        what = f"harness: check {name} {' '.join(extra)}" + (f" with a planted {fault} fault" if fault else "")
        ok = r.returncode == want and (want == 0 or "FAIL" in r.stdout)
        print(("ok   " if ok else "FAIL ") + f"{what}: exit {r.returncode} (want {want})", flush=True)
        if fault == "print" and ok:
            ok = "+++ dpc print" in r.stdout
            if not ok:
                print("FAIL harness: no unified diff shown for the print fault")
        if not ok:
            bad.append(what)
            sys.stdout.write(r.stdout[-3000:] + r.stderr[-3000:])
    return bad


def cmd_selftest(a) -> int:
    names = a.names or list(ZOO)
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        print(f"zoo_check: error: unknown zoo model(s) {unknown}", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    bad = []
    work = tempfile.mkdtemp(prefix="zoo_selftest_")
    try:
        for n in names:
            bad += selftest_model(n, not a.no_forward, work)
        if a.harness:
            bad += selftest_harness(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if bad:
        print(f"zoo_check selftest: {len(bad)} failure(s):\n  " + "\n  ".join(bad))
        return 1
    print(f"zoo_check selftest: {len(names)} original(s) ok" + (", harness ok" if a.harness else ""))
    return 0


# ---------------------------------------------------------------------------
# Helpers for developers
# ---------------------------------------------------------------------------

def cmd_prepare(a) -> int:
    """Everything a C developer needs to debug one model by hand."""
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    model = original(a.name, a.seed)
    with open(os.path.join(a.out, "print.txt"), "w") as f:
        f.write(expected_print(model, True) + "\n")
    with open(os.path.join(a.out, "print_unwrapped.txt"), "w") as f:
        f.write(expected_print(model, False) + "\n")
    save_weights(model, os.path.join(a.out, "weights.safetensors"))
    seq = a.seq if ZOO[a.name][1] in SEQ_KINDS else None
    inputs = make_inputs(a.name, a.batch, seq, a.seed)
    for nm, arr in zip(input_names(a.name), inputs):
        np.save(os.path.join(a.out, nm + ".npy"), arr, allow_pickle=False)
    y32, y64 = References(model)(inputs)
    for i, (r32, r64) in enumerate(zip(y32, y64)):
        np.save(os.path.join(a.out, f"ref{i}_f32.npy"), r32.astype(np.float32), allow_pickle=False)
        np.save(os.path.join(a.out, f"ref{i}_f64.npy"), r64, allow_pickle=False)
    for f in sorted(os.listdir(a.out)):
        print(os.path.join(a.out, f))
    return 0


def int_list(s: str) -> list:
    try:
        out = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{s}'")
    if not out or any(x < 0 for x in out):
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got '{s}'")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Zoo models (models/zoo/*.dp) against their PyTorch originals.")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="dpc print / dpc run against the original")
    c.add_argument("dpc", help="the dpc binary")
    c.add_argument("name", help="zoo name (see `list`)")
    c.add_argument("--model", help="the .dp file (default models/zoo/NAME.dp)")
    c.add_argument("--checks", default="print,run", help="print, run or both (default print,run)")
    c.add_argument("--batches", type=int_list, default=[1, 3, 8], help="default 1,3,8")
    c.add_argument("--seqs", type=int_list, default=[13, 64], help="bert/gpt2 sequence lengths (default 13,64)")
    c.add_argument("--devices", default="cpu", help="the one-device run (default cpu)")
    c.add_argument("--dp-devices", default="cpu,cpu", help="the replicated run ('' to skip; default cpu,cpu)")
    c.add_argument("--rtol64", type=float, default=1e-5, help="rel L2 against float64 PyTorch (1e-5)")
    c.add_argument("--rtol32", type=float, default=1e-4, help="rel L2 against float32 PyTorch (1e-4)")
    c.add_argument("--wrap", choices=["auto", "yes", "no"], default="auto",
                   help="DataParallel wrapper in the expected print (auto: as the file's model line says)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--timeout", type=float, default=1800, help="seconds per dpc command (default 1800)")
    c.add_argument("--keep", help="keep weights, inputs and outputs in this directory")
    q = sub.add_parser("seqs", help="bert/gpt2 at several sequence lengths in one process (zoo_multi_run)")
    q.add_argument("dpc", help="the dpc binary (for dpc compile)")
    q.add_argument("driver", help="the zoo_multi_run binary")
    q.add_argument("name")
    q.add_argument("--model", help="the .dp file (default models/zoo/NAME.dp)")
    q.add_argument("--seqs", type=int_list, default=[13, 64, 13], help="in this order (default 13,64,13)")
    q.add_argument("--batch", type=int, default=2, help="default 2")
    q.add_argument("--rtol64", type=float, default=1e-5)
    q.add_argument("--rtol32", type=float, default=1e-4)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--timeout", type=float, default=1800)
    q.add_argument("--keep", help="keep weights, inputs and outputs in this directory")
    s = sub.add_parser("selftest", help="the PyTorch side alone (no dpc)")
    s.add_argument("names", nargs="*", help="zoo names (default all)")
    s.add_argument("--no-forward", action="store_true", help="skip the forward checks")
    s.add_argument("--harness", action="store_true", help="also run `check` against fake_dpc.py")
    sub.add_parser("list", help="the zoo names")
    p = sub.add_parser("print", help="the expected dpc print text")
    p.add_argument("name")
    p.add_argument("--no-wrap", action="store_true", help="without the DataParallel wrapper")
    r = sub.add_parser("prepare", help="weights, inputs, reference outputs and print text in a directory")
    r.add_argument("name")
    r.add_argument("-o", "--out", required=True)
    r.add_argument("--batch", type=int, default=2)
    r.add_argument("--seq", type=int, default=13)
    r.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.cmd in ("print", "prepare") and a.name not in ZOO:
        ap.error(f"unknown zoo model '{a.name}' (known: {', '.join(ZOO)})")
    if a.cmd == "check":
        return cmd_check(a)
    if a.cmd == "selftest":
        return cmd_selftest(a)
    if a.cmd == "seqs":
        return cmd_seqs(a)
    if a.cmd == "list":
        print("\n".join(f"{n}\t{k}" for n, (_, k) in ZOO.items()))
        return 0
    if a.cmd == "print":
        print(expected_print(build(a.name), not a.no_wrap))
        return 0
    return cmd_prepare(a)


if __name__ == "__main__":
    sys.exit(main())
