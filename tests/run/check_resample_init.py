#!/usr/bin/env python3
"""ConvTranspose2d and Upsample against torch.nn (models.md item 8):

  - `dpc init` writes the state_dict PyTorch's modules have (keys, order,
    shapes: the weight [in, out / groups, kh, kw]), with PyTorch's default
    init: every weight and bias uniform in +-1/sqrt(fan_in), fan_in as
    torch.nn.init._calculate_fan_in_and_fan_out computes it for the
    transposed layout (weight.size(1) * kh * kw), which this test asks torch
    for rather than restating;
  - PyTorch loads that file strictly, and `dpc run` with it equals the
    PyTorch model (float64) within 1e-5 relative L2.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import st  # noqa: E402

SRC = """
module R {
    a = ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
    b = ConvTranspose2d(8, 6, (4, 2), stride=2, groups=2, dilation=(1, 2))
    c = ConvTranspose2d(6, 64, 1, bias=false)
    up = Upsample(scale_factor=2, mode="bilinear")
    forward(x: [N, 16, 5, 4]) { return c(up(b(a(x)))) }
}
model = R()
"""


class R(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.b = nn.ConvTranspose2d(8, 6, (4, 2), stride=2, groups=2, dilation=(1, 2))
        self.c = nn.ConvTranspose2d(6, 64, 1, bias=False)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear")

    def forward(self, x):
        return self.c(self.up(self.b(self.a(x))))


FAILS = []


def need(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def main():
    dpc = sys.argv[1]
    ref = R().eval()
    sd = ref.state_dict()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "r.dp")
        with open(model, "w") as f:
            f.write(SRC)
        p = run(dpc, "print", model)
        need(p.returncode == 0 and p.stdout == repr(ref) + "\n", "print equals PyTorch's:\n" + p.stdout)
        w = os.path.join(tmp, "w.safetensors")
        p = run(dpc, "init", model, "-o", w, "--seed", "3")
        need(p.returncode == 0, "init: " + p.stderr.strip())
        got = st.load(w)
        need(list(got) == list(sd) or sorted(got) == sorted(sd), f"init writes the state_dict keys: {list(got)}")
        for k, v in sd.items():
            need(k in got and list(got[k].shape) == list(v.shape), f"{k}: shape {list(v.shape)}")
        for name in ("a", "b", "c"):
            m = getattr(ref, name)
            fan_in, _ = nn.init._calculate_fan_in_and_fan_out(m.weight)
            bound = 1.0 / np.sqrt(fan_in)
            for leaf in ("weight", "bias"):
                key = f"{name}.{leaf}"
                if key not in got:
                    continue
                a = np.abs(got[key].astype(np.float64))
                # a uniform sample of n values reaches within ~bound/n of the bound
                need(a.max() <= bound * (1 + 1e-6) and a.max() > bound * (1 - 8.0 / a.size) - 1e-3 * bound,
                     f"{key}: uniform in +-1/sqrt({fan_in}) = {bound:.5f} (max |x| {a.max():.5f})")
        ref.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in got.items()}, strict=True)
        x = np.random.default_rng(0).standard_normal((3, 16, 5, 4)).astype(np.float32)
        xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
        np.save(xp, x)
        p = run(dpc, "run", model, "--weights", w, "--input", xp, "-o", yp)
        need(p.returncode == 0, "run: " + p.stderr.strip())
        if p.returncode == 0:
            with torch.no_grad():
                want = ref.double()(torch.from_numpy(x).double()).numpy()
            y = np.load(yp).astype(np.float64)
            err = np.linalg.norm(y - want) / np.linalg.norm(want) if y.shape == want.shape else np.inf
            need(err <= 1e-5, f"run equals PyTorch: shape {y.shape} vs {want.shape}, rel L2 {err:.2e}")
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
