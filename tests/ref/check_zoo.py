#!/usr/bin/python3
"""check_zoo.py - the reference itself against torchvision, on models/zoo/.

    check_zoo.py ZOO_DIR [NAME ...]        # default: every ZOO_DIR/*.dp

For each `NAME.dp`, dp2torch builds the model and torchvision.models.NAME()
builds PyTorch's own; they must have the same print(model), the same
state_dict keys and shapes in the same order, and, with torchvision's
weights loaded into the dp2torch model, the same float64 output for one
random [1, 3, 224, 224] input (max abs difference <= 1e-9).

This checks dp2torch's reading of the constructs the zoo uses (if in
forward, `is not None`, Module parameters, `downsample = downsample`, None
members, namespaces) against PyTorch itself, independently of dpc.
Exit 77 (CTest SKIP) without torchvision.
"""

import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
SKIP = 77
# zoo models that are no torchvision.models function (HuggingFace ones: tests/ref/check_hf_ref.py)
NOT_TORCHVISION = {"bert", "gpt2"}


def _vit_small():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                             hidden_dim=64, mlp_dim=128, num_classes=10)


# name -> (constructor, input size) for zoo models torchvision builds under another name
SPECIAL = {"vit_small": (_vit_small, 32)}


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"{e}: skipping")
        return SKIP
    import dp2torch
    import torch_print

    torch_print.install_modulelist_repr()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    zoo = argv[0]
    names = argv[1:] or sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(zoo, "*.dp")))
    bad = 0
    for name in names:
        size = 224
        if name in SPECIAL:
            make, size = SPECIAL[name]
        elif hasattr(torchvision.models, name):
            make = getattr(torchvision.models, name)
        elif name in NOT_TORCHVISION:
            print(f"{name}: not a torchvision model (skipped)")
            continue
        else:
            print(f"{name}: torchvision has no such model")
            bad += 1
            continue
        torch.manual_seed(0)
        ours = dp2torch.unwrap(dp2torch.load_model(os.path.join(zoo, name + ".dp"))[0])
        theirs = make()
        problems = []
        if repr(ours) != repr(theirs):
            problems.append("print(model) differs")
        ko = [(k, tuple(v.shape)) for k, v in ours.state_dict().items()]
        kt = [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
        if ko != kt:
            diff = next((a, b) for a, b in zip(ko + [None] * len(kt), kt + [None] * len(ko)) if a != b)
            problems.append(f"state_dict differs: first {diff[0]} vs torchvision {diff[1]}")
        else:
            # BatchNorm statistics randomised so that they matter
            sd = theirs.state_dict()
            for k, v in sd.items():
                if k.endswith("running_mean"):
                    v.normal_(0, 0.1)
                elif k.endswith("running_var"):
                    v.uniform_(0.5, 1.5)
            theirs.load_state_dict(sd)
            ours.load_state_dict(sd)
            ours.double().eval()
            theirs.double().eval()
            x = torch.randn(1, 3, size, size, dtype=torch.float64)
            with torch.no_grad():
                err = float((ours(x) - theirs(x)).abs().max())
            if not err <= 1e-9:
                problems.append(f"outputs differ by {err:.3g}")
        print(f"{name}: " + ("; ".join(problems) if problems else "ok (print, state_dict, output)"))
        bad += bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
