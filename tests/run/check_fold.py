#!/usr/bin/env python3
"""check_fold.py DPC FOLD_DIR - the kernel lists of folded batch norms.

Each FOLD_DIR/<name>.kernels names a model (first line: `model PATH`, relative
to the source tree) and lists what `dpc ir --stage fused` must show:
`prepare N` and `forward N` (kernel counts of the two phases, 0 for a model
without prepare kernels), then every forward kernel as `NAME [KIND]`, in
order, and `batch_norm N`, the batch_norm ops left in the forward kernels.
The lists are written by hand from the model: a fold that stops happening
(a batch_norm epilogue back in a conv kernel) or that happens where it must
not (a bn whose input has another use) changes them."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def actual(dpc, model):
    out = subprocess.run([dpc, "ir", "--stage", "fused", model], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("dpc ir failed on %s: %s" % (model, out.stderr))
    lines, phase, got = out.stdout.splitlines(), "forward", {"prepare": 0, "forward": 0}
    kernels, bn = [], 0
    for ln in lines:
        m = re.match(r"^(prepare|forward): (\d+) kernels", ln)
        if m:
            phase = m.group(1)
            got[phase] = int(m.group(2))
            continue
        if ln.startswith(("unfused", "buffers")):
            phase = "done"
        m = re.match(r"^  (k\d+_\w+) \[(\w+)\]", ln)
        if m and phase == "forward":
            kernels.append("%s [%s]" % (m.group(1), m.group(2)))
        if phase == "forward" and re.match(r"^      %\d+ = batch_norm", ln):
            bn += 1
    if not re.search(r"^(prepare|forward): ", out.stdout, re.M):  # no prepare kernels: one phase
        got["forward"] = len(kernels)
    return ["prepare %d" % got["prepare"], "forward %d" % got["forward"]] + kernels + ["batch_norm %d" % bn]


def main():
    dpc, fold = sys.argv[1], sys.argv[2]
    bad = 0
    for name in sorted(os.listdir(fold)):
        if not name.endswith(".kernels"):
            continue
        want = [ln.strip() for ln in open(os.path.join(fold, name)) if ln.strip() and not ln.startswith("#")]
        model = os.path.join(ROOT, want[0].split(None, 1)[1])
        got = actual(dpc, model)
        if got != want[1:]:
            bad += 1
            print("FAIL %s:\n  want %s\n  got  %s" % (name, want[1:], got))
        else:
            print("ok   %s (%s, %s)" % (name, got[0], got[1]))
    sys.exit(1 if bad else 0)


main()
