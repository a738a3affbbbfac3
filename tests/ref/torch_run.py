#!/usr/bin/python3
"""torch_run — run a `.dp` model's forward with PyTorch (the reference result).

    torch_run.py MODEL.dp --weights W.safetensors
                 --input X.npy [--input Y.npy ...]     # tensor params, in forward order
                 [--kw NAME=VALUE ...]                 # scalar params
                 -o OUT.npy [-o OUT2.npy ...]          # one per returned tensor
                 [--out-dir DIR]                       # or: DIR/y0.npy, DIR/y1.npy, ...
                 [--dtype float64|float32] [--keep-f64]

* Weights: safetensors with state_dict keys; a `module.` prefix (saved from
  a DataParallel model) is accepted.  Every parameter and buffer must be
  present with the right shape, except `num_batches_tracked`, which is
  optional and ignored.  Unknown keys are an error.
* The model runs in eval mode under torch.no_grad(), on the CPU, without the
  DataParallel wrapper (on the CPU, DataParallel just calls the module).
* Compute dtype: float64 by default (weights and float inputs are cast),
  float32 with `--dtype float32`.  Integer inputs stay int64.
* Outputs are written as float32 .npy unless `--keep-f64`; integer outputs
  as int64.  Files are written only once everything succeeded.

Exit status: 0 ok, 1 user error (bad model, bad file, shape mismatch), 2 usage.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import dp2torch  # noqa: E402
import st  # noqa: E402

# Dropout2d on non-4D inputs warns even in eval mode (values are unaffected);
# parallel_model.dp applies it to a 2-D tensor, exactly like the original.
warnings.filterwarnings("ignore", message="dropout2d: Received a")


class RunError(Exception):
    """A user error outside the .dp file (weights, inputs, options)."""


def load_weights(inner: torch.nn.Module, tensors: dict) -> None:
    """Copy {key: np.ndarray} into the module's parameters and buffers."""
    state = inner.state_dict()
    given = {}
    for k, v in tensors.items():
        name = k
        if k not in state and k.startswith("module.") and k[len("module."):] in state:
            name = k[len("module."):]
        if name in given:
            raise RunError(f"weights: '{k}' given twice (with and without 'module.')")
        if name not in state:
            raise RunError(f"weights: unexpected key '{k}'" + dp2torch._suggest(name, state))
        given[name] = v
    missing = [k for k in state if k not in given and not k.endswith("num_batches_tracked")]
    if missing:
        raise RunError(f"weights: missing key '{missing[0]}'"
                       + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""))
    with torch.no_grad():
        for name, arr in given.items():
            if name.endswith("num_batches_tracked"):
                continue  # accepted and ignored
            dst = state[name]
            if tuple(arr.shape) != tuple(dst.shape):
                raise RunError(f"weights: '{name}' has shape {list(arr.shape)}, "
                               f"the model expects {list(dst.shape)}")
            dst.copy_(torch.from_numpy(np.ascontiguousarray(arr)))


def parse_kw(items: list[str], scalar_params: list[dict]) -> dict:
    types = {p["name"]: p["type"] for p in scalar_params}
    out = {}
    for item in items:
        if "=" not in item:
            raise RunError(f"--kw expects NAME=VALUE, got '{item}'")
        name, text = item.split("=", 1)
        if name not in types:
            raise RunError(f"--kw: the forward has no scalar parameter '{name}'"
                           + dp2torch._suggest(name, types))
        t = types[name]
        try:
            if t == "int":
                out[name] = int(text)
            elif t == "float":
                out[name] = float(text)
            else:
                low = text.lower()
                if low not in ("true", "false", "1", "0"):
                    raise ValueError
                out[name] = low in ("true", "1")
        except ValueError:
            raise RunError(f"--kw {name}: '{text}' is not a valid {t}") from None
    return out


def load_inputs(paths: list[str], tensor_params: list[dict], dtype: torch.dtype) -> list:
    if len(paths) != len(tensor_params):
        names = ", ".join(p["name"] for p in tensor_params)
        raise RunError(f"the forward takes {len(tensor_params)} tensor input(s) ({names}), "
                       f"got {len(paths)} --input")
    out = []
    for path, p in zip(paths, tensor_params):
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise RunError(f"cannot read input '{path}': {e}") from None
        is_float = dp2torch.TENSOR_DTYPES[p["dtype"]][2]
        if is_float:
            if arr.dtype.kind != "f":
                raise RunError(f"input '{path}' for '{p['name']}' has dtype {arr.dtype}; "
                               f"expected floating point ({p['dtype']})")
            out.append(torch.from_numpy(np.ascontiguousarray(arr)).to(dtype))
        else:
            if arr.dtype.kind not in "iu":
                raise RunError(f"input '{path}' for '{p['name']}' has dtype {arr.dtype}; "
                               f"expected integers ({p['dtype']})")
            out.append(torch.from_numpy(np.ascontiguousarray(arr).astype(np.int64)))
    batches = {(t.shape[0] if t.dim() else None) for t in out}
    if len(batches) > 1:
        desc = ", ".join(f"'{p['name']}' {t.shape[0] if t.dim() else '(0-dim)'}"
                         for p, t in zip(tensor_params, out))
        raise RunError(f"inputs have different batch sizes: {desc}")
    return out


def run(model_path: str, weights: str, inputs: list[str], kw: list[str],
        dtype: torch.dtype = torch.float64) -> list[np.ndarray]:
    """Run the model; return its outputs as numpy arrays in compute dtype."""
    torch.manual_seed(0)
    dp2torch.FLOAT = dtype  # what float32 / float name in forward (to(float32), ones(...))
    model, info = dp2torch.load_model(model_path)
    inner = dp2torch.unwrap(model)
    inner.to(dtype)  # first, so weights are cast from the file's dtype directly
    try:
        tensors = st.load(weights)
    except (OSError, st.SafetensorsError) as e:
        raise RunError(f"cannot read weights '{weights}': {e}") from None
    load_weights(inner, tensors)
    inner.eval()
    args = load_inputs(inputs, info["tensor_params"], dtype)
    kwargs = parse_kw(kw, info["scalar_params"])
    missing = [p["name"] for p in info["scalar_params"] if p["required"] and p["name"] not in kwargs]
    if missing:
        raise RunError(f"scalar parameter '{missing[0]}' has no default; pass --kw {missing[0]}=...")
    with torch.no_grad():
        result = inner(*args, **kwargs)
    results = list(result) if isinstance(result, tuple) else [result]
    out = []
    for r in results:
        if isinstance(r, torch.Tensor):
            out.append(r.detach().cpu().numpy())
        elif dp2torch._is_num(r) or isinstance(r, bool):
            out.append(np.array(r))
        else:
            raise RunError(f"forward returned a {dp2torch._type_name(r)}, not a tensor")
    return out


def write_outputs(arrays: list[np.ndarray], paths: list[str], keep_f64: bool) -> None:
    """Write every output, or none (temporary files renamed at the end)."""
    if len(arrays) != len(paths):
        raise RunError(f"the forward returns {len(arrays)} tensor(s) but {len(paths)} -o "
                       f"file(s) were given")
    temps = []
    try:
        for arr, path in zip(arrays, paths):
            if arr.dtype.kind == "f" and not keep_f64:
                arr = arr.astype(np.float32)
            elif arr.dtype.kind in "iu":
                arr = arr.astype(np.int64)
            d = os.path.dirname(os.path.abspath(path))
            fd, tmp = tempfile.mkstemp(prefix=".out-", suffix=".npy", dir=d)
            temps.append(tmp)
            with os.fdopen(fd, "wb") as f:
                np.save(f, np.ascontiguousarray(arr), allow_pickle=False)
        for tmp, path in zip(temps, paths):
            os.replace(tmp, path)
        temps = []
    except OSError as e:
        raise RunError(f"cannot write output: {e}") from None
    finally:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Run a .dp model's forward with PyTorch.")
    ap.add_argument("model", help="MODEL.dp")
    ap.add_argument("--weights", required=True, help="W.safetensors")
    ap.add_argument("--input", action="append", default=[], help="X.npy, one per tensor param")
    ap.add_argument("--kw", action="append", default=[], help="NAME=VALUE for a scalar param")
    ap.add_argument("-o", "--output", action="append", default=[],
                    help="OUT.npy, one per returned tensor")
    ap.add_argument("--out-dir", help="write the outputs as DIR/y0.npy, DIR/y1.npy, ... "
                                      "(instead of -o) and print their paths")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                    help="compute dtype (default float64)")
    ap.add_argument("--keep-f64", action="store_true",
                    help="write float outputs in the compute dtype instead of float32")
    a = ap.parse_args(argv)
    if bool(a.output) == bool(a.out_dir):
        ap.error("give either -o OUT.npy (one per output) or --out-dir DIR")
    dtype = torch.float64 if a.dtype == "float64" else torch.float32
    try:
        arrays = run(a.model, a.weights, a.input, a.kw, dtype)
        paths = a.output
        if a.out_dir:
            os.makedirs(a.out_dir, exist_ok=True)
            paths = [os.path.join(a.out_dir, f"y{i}.npy") for i in range(len(arrays))]
        write_outputs(arrays, paths, a.keep_f64)
        if a.out_dir:
            print("\n".join(paths))
    except dp2torch.DpError as e:
        print(e, file=sys.stderr)
        return 1
    except RunError as e:
        print(f"torch_run.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
