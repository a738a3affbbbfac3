#!/usr/bin/python3
"""make_inputs — random inputs for a `.dp` model's forward.

    make_inputs.py MODEL.dp --batch B [--seed S] -o DIR [--int-high H]

Writes DIR/x0.npy, DIR/x1.npy, ... one per tensor parameter of the entry
forward, in order, and prints their paths one per line.

* Float params (f32, the default): standard normal, float32 (f16/f64
  params get float16/float64).  Shape: the declared dims with B for the
  batch dim.
* Integer params (i64, i32): uniform in [0, vocab).  vocab is found by
  running the model once and seeing which Embedding receives the parameter
  unchanged (the smallest one if several do); `--int-high H` gives the bound
  when no Embedding does, and overrides the detection when given.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import dp2torch  # noqa: E402


def embedding_vocab(model: nn.Module, info: dict) -> dict:
    """{param name: num_embeddings} for integer params fed straight into an
    Embedding.  Found by a probe forward with zeros, watching which tensor
    object each Embedding receives."""
    inner = dp2torch.unwrap(model)
    probes, by_id = [], {}
    for p in info["tensor_params"]:
        dt = dp2torch.TENSOR_DTYPES[p["dtype"]][0]
        shape = [1] + p["dims"][1:]
        t = torch.zeros(shape, dtype=dt if dt != torch.int32 else torch.int64)
        probes.append(t)
        by_id[id(t)] = p["name"]
    found: dict = {}

    def hook(mod, inputs):
        if inputs and id(inputs[0]) in by_id:
            name = by_id[id(inputs[0])]
            found[name] = min(found.get(name, mod.num_embeddings), mod.num_embeddings)

    handles = [m.register_forward_pre_hook(hook) for m in inner.modules()
               if isinstance(m, nn.Embedding)]
    try:
        inner.eval()
        kwargs = {p["name"]: (0 if p["type"] == "int" else 0.0 if p["type"] == "float" else False)
                  for p in info["scalar_params"] if p["required"]}
        with torch.no_grad():
            inner(*probes, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return found


def make_inputs(path: str, batch: int, seed: int, int_high: int | None = None) -> list:
    """Return [(param name, np.ndarray), ...] in forward order."""
    torch.manual_seed(0)
    model, info = dp2torch.load_model(path)
    rng = np.random.default_rng(seed)
    int_params = [p for p in info["tensor_params"] if not dp2torch.TENSOR_DTYPES[p["dtype"]][2]]
    vocab = {}
    if int_params and int_high is None:
        vocab = embedding_vocab(model, info)
    out = []
    for p in info["tensor_params"]:
        shape = [batch] + p["dims"][1:]
        _, npname, is_float = dp2torch.TENSOR_DTYPES[p["dtype"]]
        if is_float:
            arr = rng.standard_normal(shape).astype(npname or "float32")
        else:
            high = int_high if int_high is not None else vocab.get(p["name"])
            if high is None:
                raise ValueError(f"cannot tell the index range of '{p['name']}' "
                                 f"(no Embedding takes it directly); pass --int-high")
            arr = rng.integers(0, high, size=shape).astype(npname)
        out.append((p["name"], arr))
    return out


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Write random inputs for a .dp model.")
    ap.add_argument("model", help="MODEL.dp")
    ap.add_argument("--batch", type=int, required=True, help="batch size B")
    ap.add_argument("--seed", type=int, default=0, help="numpy seed (default 0)")
    ap.add_argument("-o", "--outdir", required=True, help="output directory")
    ap.add_argument("--int-high", type=int, default=None,
                    help="exclusive upper bound for integer inputs")
    a = ap.parse_args(argv)
    if a.batch < 0:
        ap.error("--batch must be >= 0")
    try:
        arrays = make_inputs(a.model, a.batch, a.seed, a.int_high)
    except dp2torch.DpError as e:
        print(e, file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"make_inputs.py: error: {e}", file=sys.stderr)
        return 1
    os.makedirs(a.outdir, exist_ok=True)
    for i, (_, arr) in enumerate(arrays):
        path = os.path.join(a.outdir, f"x{i}.npy")
        np.save(path, arr, allow_pickle=False)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
