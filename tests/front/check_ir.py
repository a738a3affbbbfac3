#!/usr/bin/python3
"""check_ir.py - sanity of `dpc ir MODEL`: exit 0, nothing on stderr, and the
text has the shape of a graph:

    graph NAME(%0: f32[N, 10], scale: float)
      %0 = input x : f32[N, 10]  # models/x.dp:5
      ...                          one line per node, numbered %0, %1, ... in order
      return %7[, %8]              the last line

Every operand a node or the return uses must be defined on an earlier line.
"""

import re
import subprocess
import sys

HEADER = re.compile(r"^graph [A-Za-z_][A-Za-z0-9_]*\(.*\)$")
NODE = re.compile(r"^  %(\d+) = ([a-z_][a-z0-9_]*)\b(.*)$")
RETURN = re.compile(r"^  return %\d+(, %\d+)*$")
OPERAND = re.compile(r"%(\d+)")


def main():
    if len(sys.argv) != 3:
        print("usage: check_ir.py DPC MODEL.dp")
        return 2
    dpc, model = sys.argv[1], sys.argv[2]
    p = subprocess.run([dpc, "ir", model], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    text = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0 or p.stderr:
        print("dpc ir %s exited %d\n%s" % (model, p.returncode, p.stderr.decode("utf-8", "replace")))
        return 1
    if not text.endswith("\n"):
        print("output does not end with a newline")
        return 1
    lines = text[:-1].split("\n")
    errors = []
    if not HEADER.match(lines[0]):
        errors.append("line 1 is not a 'graph NAME(...)' header: %r" % lines[0])
    if len(lines) < 2 or not RETURN.match(lines[-1]):
        errors.append("last line is not '  return %%i[, ...]': %r" % lines[-1])
    defined = set()
    for i, line in enumerate(lines[1:-1], 2):
        m = NODE.match(line)
        if not m:
            errors.append("line %d is not a node '  %%i = op ...': %r" % (i, line))
            continue
        idx = int(m.group(1))
        if idx != len(defined):
            errors.append("line %d defines %%%d, expected %%%d" % (i, idx, len(defined)))
        # operands: the text before the type annotation " : "
        body = m.group(3).split(" : ")[0]
        for op in OPERAND.findall(body):
            if int(op) not in defined:
                errors.append("line %d uses %%%s before it is defined" % (i, op))
        defined.add(idx)
    if len(lines) >= 2 and RETURN.match(lines[-1]):
        for op in OPERAND.findall(lines[-1]):
            if int(op) not in defined:
                errors.append("return uses undefined %%%s" % op)
    if errors:
        print("dpc ir %s: malformed output" % model)
        for e in errors[:20]:
            print("  " + e)
        print(text)
        return 1
    print("ok: %d nodes" % len(defined))
    return 0


if __name__ == "__main__":
    sys.exit(main())
