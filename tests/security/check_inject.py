#!/usr/bin/python3
"""check_inject.py - no text from a .dp or .dpa reaches generated source
outside a comment or a string literal (issue 10, item 1).

  check_inject.py DPC CASE [--cc CC]

CASE is one of
  path        every byte 0x00-0xff inside an import path shaped to close
              the comment it lands in: "d*/" BYTE "injmark" BYTE "/*x/lib.dp"
  rootpath    the same shape as the path of the model file itself
  module      every byte inside the name of the model and of a module it uses
  member      every byte inside a member name (the scope of its ops)
  param       every byte inside a forward parameter name
  regression  the import "a*/ int injected_marker; /*b.dp"
  dpa         a model whose import path holds a statement that creates a
              file, through dpc compile and dpc run x.dpa: the file must
              not appear

For each byte, dpc either refuses the model cleanly (exit 1, a message, no
signal, no sanitizer report) or `dpc source` for the CPU and the CUDA target
succeeds, the marker appears in neither outside comments and literals
(clex.py), and the CPU source passes `CC -fsyntax-only` (path cases)."""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clex  # noqa: E402

MARK = "injmark"

LIB = (
    "module Blk {\n"
    "    fc = Linear(4, 4)\n"
    "    ln = LayerNorm(4)\n"
    "    forward(x: [N, 4]) { return relu(ln(fc(x))) * 0.5 }\n"
    "}\n"
)

failures = []


def fail(what):
    failures.append(what)
    print("FAIL:", what)


def run(cmd, cwd=None, env=None):
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def clean_error(label, r):
    err = r.stderr.decode("utf-8", "replace")
    if r.returncode != 1 or not err.strip():
        fail("%s: exit %d (want 0, or 1 with a message): %s" % (label, r.returncode, err[-300:]))
    elif "Sanitizer" in err or "runtime error" in err:
        fail("%s: sanitizer report: %s" % (label, err[-300:]))


def check_source(label, text, marker, cc, syntax):
    try:
        bad = clex.leaks(text, marker)
    except ValueError as e:
        fail("%s: generated source does not lex: %s" % (label, e))
        return
    if bad:
        fail("%s: %r outside comments and literals: %s" % (label, marker, bad[0][:200]))
    if syntax and cc:
        r = subprocess.run([cc, "-fsyntax-only", "-w", "-x", "c", "-"], input=text.encode(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if r.returncode != 0:
            fail("%s: %s -fsyntax-only: %s" % (label, cc, r.stderr.decode("utf-8", "replace")[-300:]))


def check_model(dpc, model, label, marker, cc, syntax, cwd=None):
    """dpc source for both targets: a clean refusal, or clean source."""
    r = run([dpc, "source", model, "--target", "cpu"], cwd=cwd)
    if r.returncode != 0:  # refused by the front end, which both targets share
        clean_error(label, r)
        return False
    check_source(label + " cpu", r.stdout.decode("latin-1"), marker, cc, syntax)
    r = run([dpc, "source", model, "--target", "cuda"], cwd=cwd)
    if r.returncode != 0:
        fail("%s: the CPU target accepts what the CUDA target refuses: %s" % (label, r.stderr[-300:]))
        return True
    check_source(label + " cuda", r.stdout.decode("latin-1"), marker, cc, False)
    return True


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def hostile(b):
    """The path shape for byte b: a comment closed, the byte and the marker,
    a comment opened again."""
    return b"d*/" + bytes([b]) + MARK.encode() + bytes([b]) + b"/*x/lib.dp"


def case_path(dpc, tmp, cc):
    accepted = 0
    for b in range(256):
        d = os.path.join(tmp, "p%02x" % b)
        rel = hostile(b)
        if b != 0:
            write(os.fsencode(d) + b"/" + rel, LIB.encode())
        model = (b'import "' + rel + b'"\nmodule M {\n    blk = Blk()\n'
                 b"    forward(x: [N, 4]) { return blk(x) + 1.5 }\n}\nmodel = M()\n")
        write(os.path.join(d, "m.dp"), model)
        accepted += check_model(dpc, os.path.join(d, "m.dp"), "import path byte 0x%02x" % b, MARK, cc, True)
    return accepted


def case_rootpath(dpc, tmp, cc):
    accepted = 0
    for b in range(1, 256):  # a path holds no NUL: 0x00 is the path case's
        path = os.fsencode(os.path.join(tmp, "r%02x" % b)) + b"/" + hostile(b)[:-len(b"lib.dp")] + b"m.dp"
        write(path, (LIB + "model = Blk()\n").encode())
        accepted += check_model(dpc, path, "model path byte 0x%02x" % b, MARK, cc, True)
    return accepted


def sweep_text(dpc, tmp, cc, what, make):
    """A model text per byte, from make(name) with name holding the byte."""
    accepted = 0
    for b in range(256):
        name = b"Q" + bytes([b]) + MARK.encode()
        path = os.path.join(tmp, "%s%02x.dp" % (what, b))
        write(path, make(name))
        accepted += check_model(dpc, path, "%s byte 0x%02x" % (what, b), MARK, cc, False)
    return accepted


def case_module(dpc, tmp, cc):
    def used(name):  # a module the model uses, and the model itself
        return (b"module " + name + b" {\n    fc = Linear(4, 4)\n    forward(x: [N, 4]) { return fc(x) }\n}\n"
                b"module " + name + b"Top {\n    m = " + name + b"()\n"
                b"    forward(x: [N, 4]) { return relu(m(x)) }\n}\nmodel = " + name + b"Top()\n")
    return sweep_text(dpc, tmp, cc, "module", used)


def case_member(dpc, tmp, cc):
    def member(name):
        return (b"module M {\n    " + name + b" = Linear(4, 4)\n    n" + name + b" = LayerNorm(4)\n"
                b"    forward(x: [N, 4]) { return n" + name + b"(relu(" + name + b"(x))) }\n}\nmodel = M()\n")
    return sweep_text(dpc, tmp, cc, "member", member)


def case_param(dpc, tmp, cc):
    def param(name):
        return (b"module M {\n    fc = Linear(4, 4)\n    forward(" + name + b": [N, 4], s" + name +
                b": float = 2.0) { return fc(" + name + b") * s" + name + b" }\n}\nmodel = M()\n")
    return sweep_text(dpc, tmp, cc, "param", param)


def case_regression(dpc, tmp, cc):
    rel = b"a*/ int injected_marker; /*b.dp"
    write(os.fsencode(tmp) + b"/" + rel, LIB.encode())
    write(os.path.join(tmp, "m.dp"), b'import "' + rel + b'"\nmodule M {\n    blk = Blk()\n'
          b"    forward(x: [N, 4]) { return blk(x) }\n}\nmodel = M()\n")
    n = check_model(dpc, os.path.join(tmp, "m.dp"), "regression", "injected_marker", cc, True)
    if not n:
        fail("regression: the model does not compile")
    return n


def case_dpa(dpc, tmp, cc):
    import numpy as np
    # the injected statement runs `touch pwned` in dpc's working directory
    cmd = ",".join(str(c) for c in b"touch pwned") + ",0"
    rel = b"a*/ {int system(const char *); char c[]={" + cmd.encode() + b"}; system(c);} /*b.dp"
    src = os.path.join(tmp, "src")
    write(os.fsencode(src) + b"/" + rel, LIB.encode())
    write(os.path.join(src, "m.dp"), b'import "' + rel + b'"\nmodule M {\n    blk = Blk()\n'
          b"    forward(x: [N, 4]) { return blk(x) }\n}\nmodel = M()\n")
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    env = dict(os.environ, DPC_CACHE_DIR=tempfile.mkdtemp(dir=tmp))
    np.save(os.path.join(work, "x.npy"), np.ones((3, 4), np.float32))
    steps = [
        [dpc, "init", os.path.join(src, "m.dp"), "-o", "w.safetensors"],
        [dpc, "compile", os.path.join(src, "m.dp"), "--weights", "w.safetensors", "-o", "x.dpa"],
        [dpc, "run", "x.dpa", "--input", "x.npy", "-o", "y.npy"],
        [dpc, "run", os.path.join(src, "m.dp"), "--weights", "w.safetensors", "--input", "x.npy", "-o", "z.npy"],
    ]
    for cmdline in steps:
        r = run(cmdline, cwd=work, env=env)
        if r.returncode != 0:
            fail("%s: exit %d: %s" % (" ".join(cmdline[1:3]), r.returncode, r.stderr.decode("utf-8", "replace")))
            return 0
        if os.path.exists(os.path.join(work, "pwned")):
            fail("%s ran the code in the import path" % " ".join(cmdline[1:3]))
            return 0
    check_model(dpc, "x.dpa", "dpa", "system", cc, True, cwd=work)
    return 1


CASES = {"path": case_path, "rootpath": case_rootpath, "module": case_module, "member": case_member,
         "param": case_param, "regression": case_regression, "dpa": case_dpa}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dpc")
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dpc-inject-") as tmp:
        accepted = CASES[a.case](os.path.abspath(a.dpc), tmp, a.cc)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok: %s, %d model(s) compiled, the rest refused cleanly" % (a.case, accepted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
