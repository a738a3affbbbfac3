#!/usr/bin/env python3
"""ONNX import against PyTorch: a zoo original (tests/zoo/zoo_check.py's
weights and inputs) exported with torch.onnx.export, `dpc import`ed, run by
`dpc run`, compared with the original in float64 and float32 (the zoo's
bounds: rel L2 <= 1e-5 against f64, 1e-4 against f32).

  onnx_check.py DPC NAME --work DIR [--opset 14] [--mode eval|preserve]
                [--batch 2] [--devices cpu,cpu] [--direct] [--seq S] [--export-seq 8]

--mode eval: torch.onnx.export's default (BatchNorm folded into Conv);
preserve: do_constant_folding=False, training=TrainingMode.PRESERVE (the
BatchNormalization nodes and state_dict names kept). The export is cached
in DIR (one file per model, opset and mode). --direct also runs the .onnx
file itself (`dpc run MODEL.onnx`, imported in memory)."""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "zoo"))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import zoo_check  # noqa: E402

SKIP = 77


def export(name, opset, mode, path, seq):
    model = zoo_check.original(name)
    kind = zoo_check.ZOO[name][1]
    names = zoo_check.input_names(name)
    inputs = [torch.from_numpy(a) for a in zoo_check.make_inputs(name, 2, seq)]
    dyn = {n: {0: "batch"} for n in names}
    if kind in zoo_check.SEQ_KINDS:
        dyn = {n: {0: "batch", 1: "seq"} for n in names}
    kw = dict(opset_version=opset, input_names=names, output_names=["out"], dynamic_axes=dyn)
    if mode == "preserve":
        kw.update(do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    tmp = path + ".tmp"
    # ViT and nn.TransformerEncoder export only with grad enabled (fast-path attention under no_grad)
    with torch.enable_grad():
        torch.onnx.export(model, tuple(inputs), tmp, **kw)
    os.replace(tmp, path)
    return model


def run(cmd, what, timeout=900):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise zoo_check.Fail(f"{what}: exit {r.returncode}: {' '.join(cmd)}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    print(f"{what}: ok ({time.time() - t0:.1f} s)", flush=True)
    return r


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("dpc")
    ap.add_argument("name")
    ap.add_argument("--work", required=True)
    ap.add_argument("--opset", type=int, default=14)
    ap.add_argument("--mode", choices=["eval", "preserve"], default="eval")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=None, help="the sequence length to run at")
    ap.add_argument("--export-seq", type=int, default=8, help="the sequence length of the export's example (8)")
    ap.add_argument("--devices", default=None)
    ap.add_argument("--direct", action="store_true")
    ap.add_argument("--rtol64", type=float, default=1e-5)
    ap.add_argument("--rtol32", type=float, default=1e-4)
    a = ap.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    stem = os.path.join(a.work, f"{a.name}_op{a.opset}_{a.mode}")
    onnx_path = stem + ".onnx"
    try:
        t0 = time.time()
        if os.path.exists(onnx_path):
            model = zoo_check.original(a.name)
            print(f"export: cached {onnx_path}")
        else:
            model = export(a.name, a.opset, a.mode, onnx_path, a.export_seq if a.seq else None)
            print(f"export: {onnx_path} ({os.path.getsize(onnx_path) / 1e6:.1f} MB, {time.time() - t0:.1f} s)")
        dp, w = stem + ".dp", stem + ".safetensors"
        for p in (dp, w):
            if os.path.exists(p):
                os.unlink(p)
        run([a.dpc, "import", onnx_path, "-o", dp, "--weights-out", w], "dpc import")
        inputs = zoo_check.make_inputs(a.name, a.batch, a.seq)
        in_paths = []
        for i, x in enumerate(inputs):
            p = f"{stem}_in{i}_b{a.batch}.npy"
            np.save(p, x)
            in_paths.append(p)
        refs = zoo_check.References(model)
        r32, r64 = refs(inputs)
        targets = [(dp, ["--weights", w])]
        if a.direct:
            targets.append((onnx_path, []))
        for target, extra in targets:
            outs = [f"{stem}_out{i}.npy" for i in range(len(r64))]
            cmd = [a.dpc, "run", target, *extra]
            for o in outs:
                cmd += ["-o", o]
            for p in in_paths:
                cmd += ["--input", p]
            if a.devices:
                cmd += ["--devices", a.devices]
            run(cmd, f"dpc run {os.path.basename(target)}" + (f" --devices {a.devices}" if a.devices else ""))
            got = [np.load(o) for o in outs]
            for o in outs:
                os.unlink(o)
            errs = zoo_check.compare_outputs(got, r32, r64, a, f"{os.path.basename(target)} batch {a.batch}")
            worst = max(errs)
            print(f"compare {os.path.basename(target)}: {len(errs)} output(s), worst rel L2 {worst[0]:.2e} vs f64, "
                  f"{worst[1]:.2e} vs f32: ok")
    except zoo_check.Fail as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
