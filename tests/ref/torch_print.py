#!/usr/bin/python3
"""torch_print — print(model) for a `.dp` model, as PyTorch 2.x prints it.

    torch_print.py MODEL.dp

The installed torch is 1.13, whose `ModuleList` uses the generic repr (one
`(i): ...` line per entry).  PyTorch 2.x (PR #90452, "Better __repr__ for
ModuleList") compresses runs of consecutive entries whose reprs are equal:
`(0-2): 3 x Block(`.  `install_modulelist_repr()` replaces
`nn.ModuleList.__repr__` with a faithful copy of the 2.x algorithm; every
other module's repr is torch's own.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch.nn as nn  # noqa: E402

import dp2torch  # noqa: E402


def _addindent(s_: str, num_spaces: int) -> str:
    """torch.nn.modules.container's private _addindent: indent every line
    after the first (blank lines included, as in 1.13 and the 2.x copy)."""
    s = s_.split("\n")
    if len(s) == 1:
        return s_
    first = s.pop(0)
    s = [(num_spaces * " ") + line for line in s]
    return first + "\n" + "\n".join(s)


def modulelist_repr_2x(self: nn.ModuleList) -> str:
    """PyTorch 2.x ModuleList.__repr__ (torch/nn/modules/container.py).

    1. repr every entry; 2. group *consecutive* entries with identical repr
    strings; 3. a run of one prints `(i): <repr>`, a longer run
    `(i-j): <count> x <repr>`; 4. each line goes through addindent(2);
    5. an empty list prints `ModuleList()`; extra_repr is ignored.
    """
    list_of_reprs = [repr(item) for item in self]
    if len(list_of_reprs) == 0:
        return self._get_name() + "()"

    start_end_indices = [[0, 0]]
    repeated_blocks = [list_of_reprs[0]]
    for i, r in enumerate(list_of_reprs[1:], 1):
        if r == repeated_blocks[-1]:
            start_end_indices[-1][1] += 1
            continue
        start_end_indices.append([i, i])
        repeated_blocks.append(r)

    lines = []
    main_str = self._get_name() + "("
    for (start_id, end_id), b in zip(start_end_indices, repeated_blocks):
        local_repr = f"({start_id}): {b}"
        if start_id != end_id:
            n = end_id - start_id + 1
            local_repr = f"({start_id}-{end_id}): {n} x {b}"
        local_repr = _addindent(local_repr, 2)
        lines.append(local_repr)

    main_str += "\n  " + "\n  ".join(lines) + "\n"
    main_str += ")"
    return main_str


def install_modulelist_repr() -> None:
    """Make nn.ModuleList print as in PyTorch 2.x (idempotent)."""
    nn.ModuleList.__repr__ = modulelist_repr_2x


def model_repr(path: str) -> str:
    """repr(model) for a .dp file, with the 2.x ModuleList rule."""
    install_modulelist_repr()
    model, _ = dp2torch.load_model(path)
    return repr(model)


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Print a .dp model as PyTorch 2.x print(model) does.")
    ap.add_argument("model", help="MODEL.dp")
    a = ap.parse_args(argv)
    try:
        text = model_repr(a.model)
    except dp2torch.DpError as e:
        print(e, file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
