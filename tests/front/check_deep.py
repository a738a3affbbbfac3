#!/usr/bin/python3
"""check_deep.py - nesting just under the limits compiles with a small stack.

    check_deep.py DPC [STACK_KB]        (default 1024)

The front end bounds nesting (brackets and expression height: 200, module
instances: 64, and all levels of evaluation together, through module calls
and constructions: 600, DPC_MAX_EVAL_NEST in compiler.h) so that its
recursive passes (parser actions, constant evaluation, IR building,
printing) stay shallow. This generates models that go right up to those
limits, but not past them, and runs `dpc print` and `dpc ir` on each under
`ulimit -s STACK_KB` (through sh -c): each must exit 0 with output on stdout
and nothing on stderr. A stack overflow shows up as a SIGSEGV. The limits
leave room: every case fits in about 0.3 MiB, even under ASan at -O0.
"""

import os
import shutil
import subprocess
import sys
import tempfile


def model(expr, members="    fc = Linear(4, 4)\n", params="x: [N, 4]"):
    return ("module M {\n" + members + "    forward(" + params + ") {\n        return " + expr
            + "\n    }\n}\nmodel = DataParallel(M())\n")


def chain(depth, line, member):
    """L{depth-1} ... L0, each calling the one below from `line`, with the
    expression wrapped so that the levels add up to just under the limit in
    all (DPC_MAX_EVAL_NEST): the deepest recursion the passes allow."""
    s = ""
    for i in range(depth):
        inner = member % ("L%d()" % (i - 1)) if i else member % "Linear(4, 4)"
        s += "module L%d {\n    c = %s\n    forward(x: [N, 4]) {\n        %s\n        return x\n    }\n}\n" % (
            i, inner, line)
    return s + "model = DataParallel(L%d())\n" % (depth - 1)


def user_chain(depth):
    """L{depth-1} contains L{depth-2} ... contains L0 contains a Linear."""
    s = ""
    for i in range(depth):
        inner = "    c = L%d()\n" % (i - 1) if i else "    c = Linear(4, 4)\n"
        s += "module L%d {\n%s    forward(x: [N, 4]) { return c(x) }\n}\n" % (i, inner)
    return s + "model = DataParallel(L%d())\n" % (depth - 1)


# The two braces of `module M {` and `forward(...) {` count towards the
# bracket limit of 200, so an expression may open 198 more.
CASES = {
    "parens_190": model("(" * 190 + "fc(x)" + ")" * 190),
    "parens_197": model("(" * 197 + "fc(x)" + ")" * 197),             # 2 + 197 + fc( = 200
    "calls_197": model("relu(" * 197 + "fc(x)" + ")" * 197),          # 200 brackets, 198 nested calls
    "plus_200": model(" + ".join(["x"] * 200)),                        # a left-deep chain of height 200
    "neg_199": model("-" * 199 + "x"),
    "mixed": model("(" * 99 + " + ".join(["x"] * 100) + ")" * 99),
    "sequential_190": model("s(x)", members="    s = " + "Sequential(" * 190 + "ReLU()" + ")" * 190 + "\n"),
    "dims_190": model("x * 2.0", members="", params="x: [N, " + "(" * 190 + "4" + ")" * 190 + "]"),
    "ctor_190": model("fc(x)", members="    fc = Linear(4, " + "(" * 190 + "4" + ")" * 190 + ")\n"),
    "ctor_chain_190": model("fc(x)", members="    fc = Linear(4, " + " * ".join(["1"] * 190) + " * 4)\n"),
    "list_190": model("cat(" + "[" * 1 + ", ".join(["x"] * 190) + "]" + ", 1)"),
    "user_modules_64": user_chain(64),
    "modulelist_4096": model("x", members="    l = [Linear(4, 4) for _ in range(4096)]\n"),
    # a flat chain is a loop, not a recursion: any length compiles
    "plus_100000": model(" + ".join(["x"] * 100000)),
    "pow_198": model("x * " + " ** ".join(["1"] * 199)),
    # 64 nested modules, each adding 9 levels: about 600 in all
    "calls_64x6": chain(64, "x = " + "relu(" * 6 + "c(x)" + ")" * 6, "%s"),
    "arith_64x6": chain(64, "x = " + "x * (" * 6 + "c(x)" + ")" * 6, "%s"),
    "neg_64x6": chain(64, "x = " + "-" * 6 + "c(x)", "%s"),
    "sequential_64x6": chain(64, "x = c(x)", "Sequential(" * 6 + "%s" + ")" * 6),
    "for_64x6": chain(64, "for b in c { " * 6 + "x = b(x)" + " }" * 6, "[%s]"),
}


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    dpc = os.path.abspath(sys.argv[1])
    stack_kb = int(sys.argv[2]) if len(sys.argv) == 3 else 1024
    tmp = tempfile.mkdtemp(prefix="dpc_deep_")
    failed = 0
    try:
        for name, text in CASES.items():
            path = os.path.join(tmp, name + ".dp")
            with open(path, "w") as f:
                f.write(text)
            for verb in ("print", "ir"):
                cmd = ["sh", "-c", 'ulimit -s %d && exec "$0" "$1" "$2"' % stack_kb, dpc, verb, name + ".dp"]
                try:
                    p = subprocess.run(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
                except subprocess.TimeoutExpired:
                    print("FAIL %s %s: timed out" % (verb, name))
                    failed += 1
                    continue
                err = p.stderr.decode("utf-8", "replace")
                if p.returncode != 0 or err or not p.stdout:
                    how = ("killed by signal %d" % -p.returncode) if p.returncode < 0 else ("exit %d" % p.returncode)
                    print("FAIL %s %s under ulimit -s %d: %s\n  %s" % (verb, name, stack_kb, how,
                                                                      err[:2000].replace("\n", "\n  ")))
                    failed += 1
                else:
                    print("ok   %s %s (%d lines)" % (verb, name, p.stdout.count(b"\n")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d of %d runs passed" % (2 * len(CASES) - failed, 2 * len(CASES)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
