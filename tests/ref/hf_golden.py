#!/usr/bin/python3
"""hf_golden — a record of the real transformers models, to check hf_models.py without the library.

tests/ref/check_hf_ref.py (which has transformers, in a venv) records, for
BertModel(BertConfig(num_hidden_layers=2)) and GPT2Model(GPT2Config(n_layer=2)):

* the print text with PyTorch 2.x's ModuleList compression;
* every state_dict key with its shape and dtype, in order; every buffer name;
* output fingerprints on deterministic weights (`fill`, no random numbers)
  and inputs (`inputs`): for each output, its shape, sum, L2 norm and 16
  values at fixed positions, computed in float64.

into hf_golden.json; `compare(name, model, record)` lists the differences
of a model from the record (tests/zoo/zoo_check.py selftest runs it on
hf_models in CI).  Values are compared within 1e-9 relative (float64; other
BLAS builds may round differently).
"""

from __future__ import annotations

import json
import math
import os

import torch

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_golden.json")
SEQ = 7
BATCH = 2


def fill(model) -> None:
    """Deterministic weights, no random generator: tensor j of the sorted
    float state_dict keys gets, for element i, 0.05 * sqrt(12) * (h - 0.5)
    with h = frac(sin(12.9898 * i + 78.233 * j) * 43758.5453) (uniform-like,
    std 0.05), LayerNorm weights 1 + that."""
    sd = model.state_dict()
    keys = sorted(k for k, v in sd.items() if v.is_floating_point())
    with torch.no_grad():
        for j, k in enumerate(keys):
            v = sd[k]
            i = torch.arange(v.numel(), dtype=torch.float64)
            h = torch.frac(torch.abs(torch.sin(12.9898 * i + 78.233 * (j + 1)) * 43758.5453))
            val = 0.05 * math.sqrt(12.0) * (h - 0.5)
            if ("LayerNorm" in k or ".ln_" in k or k.startswith("ln_")) and k.endswith("weight"):
                val = 1 + val
            v.copy_(val.reshape(v.shape).to(v.dtype))


def inputs(name: str) -> list:
    i = torch.arange(BATCH * SEQ).reshape(BATCH, SEQ)
    vocab = 30522 if name == "bert" else 50257
    ids = (i * 7919 + 13) % vocab
    if name != "bert":
        return [ids]
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ - 2:] = 0
    mask[0, 3] = 0
    tt = (torch.arange(SEQ)[None, :] >= torch.tensor([[4], [2]])).long()
    return [ids, mask, tt]


def _fingerprint(t: torch.Tensor) -> dict:
    flat = t.detach().to(torch.float64).reshape(-1)
    idx = [int(round(k * (flat.numel() - 1) / 15)) for k in range(16)]
    return {"shape": list(t.shape), "sum": float(flat.sum()), "l2": float(flat.norm()),
            "at": idx, "values": [float(flat[k]) for k in idx]}


def _state(model) -> dict:
    return {"state_dict": [[k, list(v.shape), str(v.dtype)] for k, v in model.state_dict().items()],
            "buffers": [n for n, _ in model.named_buffers()]}


def _text(model) -> str:
    import torch.nn as nn
    import torch_print
    saved = nn.ModuleList.__repr__
    torch_print.install_modulelist_repr()
    try:
        return repr(model)
    finally:
        nn.ModuleList.__repr__ = saved


def record(name: str, model, run) -> dict:
    """run(model, *inputs) -> [tensors]."""
    m = model.double()
    fill(m)
    with torch.no_grad():
        outs = run(m, *inputs(name))
    model.float()
    return {"print": _text(model), **_state(model), "outputs": [_fingerprint(o) for o in outs]}


def compare(name: str, model, rec: dict, rtol: float = 1e-9) -> list:
    """Differences of an hf_models model (forward returning a tensor or a
    tuple) from the record; [] when it matches."""
    bad = []
    if _text(model) != rec["print"]:
        bad.append("print text differs from the library's")
    st = _state(model)
    if st["state_dict"] != rec["state_dict"]:
        bad.append("state_dict keys/shapes/dtypes differ from the library's")
    if st["buffers"] != rec["buffers"]:
        bad.append(f"buffers {st['buffers']} != the library's {rec['buffers']}")
    m = model.double()
    fill(m)
    with torch.no_grad():
        out = m(*inputs(name))
    model.float()
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != len(rec["outputs"]):
        return bad + [f"{len(outs)} outputs, the library returns {len(rec['outputs'])}"]
    for n, (o, r) in enumerate(zip(outs, rec["outputs"])):
        f = _fingerprint(o)
        if f["shape"] != r["shape"]:
            bad.append(f"output {n}: shape {f['shape']} != {r['shape']}")
            continue
        scale = max(abs(x) for x in r["values"] + [r["l2"]])
        for key in ("sum", "l2"):
            if not math.isclose(f[key], r[key], rel_tol=rtol, abs_tol=rtol * scale):
                bad.append(f"output {n}: {key} {f[key]!r} != the library's {r[key]!r}")
        diffs = [abs(a - b) for a, b in zip(f["values"], r["values"])]
        if max(diffs) > rtol * scale:
            bad.append(f"output {n}: sampled values differ by up to {max(diffs):.3e}")
    return bad


def load() -> dict | None:
    if not os.path.exists(PATH):
        return None
    with open(PATH, encoding="utf-8") as f:
        return json.load(f)


def save(golden: dict) -> None:
    with open(PATH, "w", encoding="utf-8") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
