#!/usr/bin/python3
"""torch_init — PyTorch's default initialisation of a `.dp` model, as safetensors.

    torch_init.py MODEL.dp -o W.safetensors [--seed S] [--random-stats]
                  [--random-affine] [--dp-prefix]

* `torch.manual_seed(S)` (default 0), then the model is built; modules draw
  from the global generator in construction order (member order), exactly
  as a hand-written PyTorch model would.
* The file holds the *unwrapped* module's state_dict keys (`fc1.weight`,
  `bn.running_mean`, ...); `--dp-prefix` writes the keys a DataParallel
  model saves instead (`module.fc1.weight`).  Float tensors are F32;
  `num_batches_tracked` is an I64 scalar (shape []).
* `--random-stats` gives every BatchNorm a non-trivial running_mean
  (N(0, 0.5)) and running_var (U(0.5, 2.0)), so eval-mode BN is really
  tested.  `--random-affine` replaces the ones/zeros weight and bias of
  BatchNorm, LayerNorm and GroupNorm with 1 + N(0, 0.2) and N(0, 0.2).  Both draw from
  a generator seeded with S after construction, so the default-init values
  are unchanged by either flag.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import dp2torch  # noqa: E402
import st  # noqa: E402


def init_state(path: str, seed: int = 0, random_stats: bool = False,
               random_affine: bool = False, dp_prefix: bool = False) -> dict:
    """Build the model with torch's default init; return {key: np.ndarray}."""
    torch.manual_seed(seed)
    model, info = dp2torch.load_model(path)
    inner = dp2torch.unwrap(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in inner.modules():
            if random_stats and isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)) and m.running_mean is not None:
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.5)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) * 1.5 + 0.5)
            if random_affine and isinstance(m, (nn.BatchNorm2d, nn.LayerNorm, nn.BatchNorm1d, nn.GroupNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=gen))
                if getattr(m, "bias", None) is not None:
                    m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=gen))
    prefix = "module." if dp_prefix and info["data_parallel"] else ""
    return {prefix + k: v.detach().cpu().contiguous().numpy()
            for k, v in inner.state_dict().items()}


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Write PyTorch's default init of a .dp model "
                                             "as safetensors.")
    ap.add_argument("model", help="MODEL.dp")
    ap.add_argument("-o", "--output", required=True, help="W.safetensors")
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed (default 0)")
    ap.add_argument("--random-stats", action="store_true",
                    help="random BatchNorm running_mean/running_var")
    ap.add_argument("--random-affine", action="store_true",
                    help="random BatchNorm/LayerNorm weight and bias")
    ap.add_argument("--dp-prefix", action="store_true",
                    help="keys with the 'module.' prefix of a DataParallel state_dict")
    a = ap.parse_args(argv)
    try:
        tensors = init_state(a.model, a.seed, a.random_stats, a.random_affine, a.dp_prefix)
    except dp2torch.DpError as e:
        print(e, file=sys.stderr)
        return 1
    try:
        st.save(a.output, tensors, metadata={"format": "pt"})
    except OSError as e:
        print(f"torch_init.py: error: cannot write {a.output}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
