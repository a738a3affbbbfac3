#!/usr/bin/python3
"""check_print.py - `dpc print MODEL` must print exactly what PyTorch prints.

    check_print.py DPC MODEL.dp                  # compare with tests/ref/torch_print.py
    check_print.py DPC MODEL.dp --golden FILE    # compare with a stored text instead

Both outputs are compared byte for byte (final newline included); on a
mismatch a unified diff is printed and the exit status is 1. Exit 77 (CTest
SKIP) when the PyTorch reference cannot run here (torch not installed).
"""

import argparse
import difflib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "ref", "torch_print.py")
SKIP = 77


def run(cmd, timeout=120):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def show_diff(want, got, want_name, got_name):
    w = want.decode("utf-8", "replace").splitlines(keepends=True)
    g = got.decode("utf-8", "replace").splitlines(keepends=True)
    sys.stdout.writelines(difflib.unified_diff(w, g, want_name, got_name))
    if want.rstrip(b"\n") == got.rstrip(b"\n"):
        print("(outputs differ only in trailing newlines: want %r, got %r)" % (want[-2:], got[-2:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dpc")
    ap.add_argument("model")
    ap.add_argument("--golden", help="expected output file instead of the PyTorch reference")
    a = ap.parse_args()

    rc, out, err = run([a.dpc, "print", a.model])
    if rc != 0:
        print("dpc print %s exited %d\n%s" % (a.model, rc, err.decode("utf-8", "replace")))
        return 1
    if err:
        print("dpc print wrote to stderr:\n" + err.decode("utf-8", "replace"))
        return 1

    if a.golden:
        with open(a.golden, "rb") as f:
            want = f.read()
        want_name = a.golden
    else:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("torch is not installed for %s: skipping" % sys.executable)
            return SKIP
        rrc, want, rerr = run([sys.executable, REF, a.model])
        if rrc != 0:
            print("torch_print.py %s exited %d\n%s" % (a.model, rrc, rerr.decode("utf-8", "replace")))
            return 1
        want_name = "torch print(model)"

    if out != want:
        print("dpc print %s differs from %s:" % (a.model, want_name))
        show_diff(want, out, want_name, "dpc print")
        return 1
    print("ok: %d lines identical" % out.count(b"\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
