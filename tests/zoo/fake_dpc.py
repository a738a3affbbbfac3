#!/usr/bin/python3
"""fake_dpc — a stand-in `dpc` for zoo models, written with PyTorch, to test zoo_check.py itself.

    fake_dpc.py print MODEL.dp
    fake_dpc.py run MODEL.dp --weights W.safetensors --input X.npy [--input …]
                [--devices LIST] -o OUT.npy [-o …]

The zoo name is the file's base name (models/zoo/resnet18.dp -> resnet18);
the file's contents only decide the DataParallel wrapper, as for dpc.
`run` builds the original, loads W strictly (every key, no renaming),
scatters the batch over the device list with torch.chunk rules, runs the
pieces in float32 and concatenates the outputs.

FAKE_DPC_FAULT plants one fault, to check that zoo_check catches it:
`print` (one character of the text changed), `run` (output 0 scaled by
1 + 1e-3), `replicas` (with more than one device, the last replica's output
scaled by 1 + 1e-3).
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import zoo_check  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="fake_dpc")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("print")
    p.add_argument("model")
    r = sub.add_parser("run")
    r.add_argument("model")
    r.add_argument("--weights", required=True)
    r.add_argument("--input", action="append", default=[])
    r.add_argument("--devices", default="cpu")
    r.add_argument("-o", dest="outputs", action="append", default=[])
    a = ap.parse_args(argv)
    fault = os.environ.get("FAKE_DPC_FAULT", "")
    name = os.path.splitext(os.path.basename(a.model))[0]
    if name not in zoo_check.ZOO:
        print(f"dpc: error: {a.model}: not a zoo model", file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    model = zoo_check.build(name, seed=999)
    if a.cmd == "print":
        text = zoo_check.expected_print(model, zoo_check.file_wraps(a.model))
        if fault == "print":
            i = text.index("(") + 1
            text = text[:i] + "X" + text[i + 1:]
        print(text)
        return 0
    weights = zoo_check.st.load(a.weights)
    try:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    except RuntimeError as e:
        print(f"dpc: error: {a.weights}: {e}", file=sys.stderr)
        return 1
    inputs = [torch.from_numpy(np.load(p, allow_pickle=False)) for p in a.input]
    devs = [d for d in a.devices.split(",") if d]
    pieces = list(zip(*[torch.chunk(t, len(devs), dim=0) for t in inputs]))
    results = []
    with torch.no_grad():
        for k, piece in enumerate(pieces):
            out = model(*piece)
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            if fault == "replicas" and len(pieces) > 1 and k == len(pieces) - 1:
                outs = [o * (1 + 1e-3) for o in outs]
            results.append(outs)
    outs = [torch.cat([res[i] for res in results], 0) for i in range(len(results[0]))]
    if fault == "run":
        outs[0] = outs[0] * (1 + 1e-3)
    if len(outs) != len(a.outputs):
        print(f"dpc: error: the model returns {len(outs)} tensors, {len(a.outputs)} -o given", file=sys.stderr)
        return 2
    for o, path in zip(outs, a.outputs):
        np.save(path, o.numpy().astype(np.float32), allow_pickle=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
