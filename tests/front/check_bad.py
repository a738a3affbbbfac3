#!/usr/bin/python3
"""check_bad.py - wrong models must fail with exactly the expected diagnostics.

    check_bad.py DPC DIR                 run every case under DIR (not pending/)
    check_bad.py DPC DIR CASE...         run the named cases only
    check_bad.py DPC DIR --list          print the case names (CMake registers one test each)
    check_bad.py DPC DIR --update CASE.. rewrite CASE's .err from dpc's stderr (review the diff!)

A case is run as `DPC ir <file>` and as `DPC print <file>` with DIR (or, for
a generated case, a fresh temporary directory) as the working directory, so
that the file name in the messages is short and stable. It passes when dpc
exits 1, prints nothing on stdout and prints exactly the expected text on
stderr, under both verbs: print checks the whole model as ir does (a forward
that does not compile is not a printable model). In the expected text
`$DIR` stands for the case's directory, fully resolved (for messages that
show an absolute path).

Kinds of case (case names in parentheses):
  NAME.dp + NAME.err           a one-file case (NAME)
  SUB/main.dp + SUB/main.err   a multi-file case: main.dp and the files it
                               imports live in SUB/ (SUB)
  gen/NAME.err                 a generated case: GENERATORS[NAME] writes the
                               input at test time (big or binary inputs are
                               not committed) (gen/NAME)
  SURVIVE[NAME]                a generated case with no pinned text: dpc must
                               exit 1 with a located first diagnostic, never
                               crash, hang or print a sanitizer report
                               (gen/NAME)
  pending/...                  the same kinds, for known compiler problems: the
                               .err holds what dpc *should* print. Skipped
                               unless named (CMake registers them disabled).
"""

import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

TIMEOUT = float(os.environ.get("DPC_TEST_TIMEOUT", "120"))


# ----------------------------------------------------------------- generators
# Each returns the file's bytes, or None for "no file at all".

def module(forward_body, members="    fc = Linear(4, 4)\n", params="x: [N, 4]"):
    return ("module M {\n" + members + "    forward(" + params + ") {\n" + forward_body
            + "    }\n}\nmodel = M()\n").encode("latin-1")


def chain(depth, line, member):
    """L{depth-1} ... L0, each calling the one below in `line` of forward."""
    s = ""
    for i in range(depth):
        inner = member % ("L%d()" % (i - 1)) if i else member % "Linear(4, 4)"
        s += "module L%d {\n    c = %s\n    forward(x: [N, 4]) {\n        %s\n        return x\n    }\n}\n" % (
            i, inner, line)
    return (s + "model = L%d()\n" % (depth - 1)).encode()


def ret(expr):
    return module("        return " + expr + "\n")


GENERATORS = {
    # a NUL byte in the middle of a line: reported with its position, and the
    # rest of the file is still read (a naive scanner stops at NUL: silent success)
    "nul_byte": lambda: module("        y = fc(x)\0 + 1\n        return y\n"),
    # NUL then garbage at the end of an otherwise valid file
    "nul_then_garbage": lambda: ret("fc(x)") + b"\0garbage here\n",
    # a 0xFF byte in code
    "byte_ff": lambda: module("        y = fc(x) \xff\n        return y\n"),
    # a UTF-16 byte-order mark before valid text (bison maps a negative char to EOF)
    "bom_ff_fe": lambda: b"\xff\xfe" + ret("fc(x)"),
    # 10^5 nested parentheses, brackets, calls, braces
    "deep_parens": lambda: ret("(" * 100000 + "x" + ")" * 100000),
    "deep_brackets": lambda: ret("cat(" + "[" * 100000 + "x" + "]" * 100000 + ", 0)"),
    "deep_calls": lambda: ret("relu(" * 100000 + "x" + ")" * 100000),
    "deep_braces": lambda: b"module M {\n    forward(x: [N, 4]) " + b"{" * 100000 + b"}" * 100000 + b"\n}\n",
    # 201 parentheses: the first past the limit (2 braces + 199 parens > 200)
    "parens_over_limit": lambda: ret("(" * 199 + "x" + ")" * 199),
    # a 10^5-line forward with an error on the last line: line counting
    "long_file": lambda: module("        x = fc(x)\n" * 100000 + "        return fc(y)\n"),
    # 100 errors: the first 50 are shown, then a summary
    "many_errors": lambda: ("module M {\n    fc = Linear(4, 4)\n"
                            + "".join("    f%d = Linaer(4, 4)\n" % i for i in range(100))
                            + "    forward(x: [N, 4]) { return fc(x) }\n}\n").encode(),
    # CRLF line ends and no final newline
    "crlf": lambda: (b"module M {\r\n    fc = Linear(4, 4)\r\n    forward(x: [N, 4]) {\r\n"
                     b"        return fc(x) +\r\n    }\r\n}"),
    # 10^5 unary minus signs: they nest without brackets; the error is at
    # the 201st, not a parser "memory exhausted" (a flat chain of 10^5 `+`
    # compiles: check_deep.py)
    "neg_chain": lambda: ret("-" * 100000 + "x"),
    # 10^5 right-associative `**`: the same, at the 201st `**`
    "pow_chain": lambda: ret("x * " + " ** ".join(["2"] * 100000)),
    # a file that is not there: a diagnostic without a location, said the
    # way the CLI says errors
    "missing_file": lambda: None,
    # 64 nested modules whose forwards nest 7 calls deep around the call of
    # the next: past the limit of 600 levels in all (DPC_MAX_EVAL_NEST), a
    # clean error rather than a deep recursion (check_deep.py: 6 deep is fine)
    "eval_nest": lambda: chain(64, "x = " + "relu(" * 7 + "c(x)" + ")" * 7, "%s"),
    # the same while building the modules: Sequentials 10 deep in each
    "ctor_nest": lambda: chain(64, "x = c(x)", "Sequential(" * 10 + "%s" + ")" * 10),
    # forward interface counts past DPC_MAX_SCALARS (1024) and DPC_MAX_IO (64),
    # the sizes of the runtime's arrays: located at the first one too many
    "too_many_scalars": lambda: module("        return fc(x)\n",
                                       params="x: [N, 4],\n" + ",\n".join("        s%d: float" % i for i in range(1025))),
    "too_many_inputs": lambda: module("        return fc(x0)\n",
                                      params=",\n".join("        x%d: [N, 4]" % i for i in range(65))),
    "too_many_outputs": lambda: ret(", ".join(["x"] * 65)),
    # --- survival only (see SURVIVE) ---
    # a 1 MB identifier (an unknown name)
    "long_ident": lambda: ret("fc(" + "a" * 1000000 + ")"),
    # a 1 MB string
    "long_string": lambda: module("        return x\n", members='    act = GELU(approximate="' + "x" * 1000000 + '")\n'),
    # --- pending: proposed texts for problems reported to the lead ---
}

# Generated cases checked for survival only, not against a pinned text.
SURVIVE = {"long_ident", "long_string"}

LOCATED = re.compile(r"^[^:\n]+\.dp:\d+:\d+: error: \S")
SANITIZER = re.compile(r"Sanitizer|runtime error:|AddressSanitizer|LeakSanitizer")


# --------------------------------------------------------------------- cases

class Case:
    def __init__(self, name, workdir=None, rel=None, err=None, gen=None, survive=False):
        self.name = name          # e.g. "div_zero", "import_cycle", "gen/nul_byte"
        self.workdir = workdir    # where dpc runs (None: a temp dir, for generated cases)
        self.rel = rel            # the file given to dpc, relative to workdir
        self.err = err            # the expected-stderr file (None for survival cases)
        self.gen = gen            # generator name
        self.survive = survive


def find_cases(root, pending=False):
    cases = {}
    base = os.path.join(root, "pending") if pending else root
    prefix = "pending/" if pending else ""
    if not os.path.isdir(base):
        return cases
    for entry in sorted(os.listdir(base)):
        path = os.path.join(base, entry)
        if entry.endswith(".err") and os.path.isfile(path):
            stem = entry[:-4]
            if os.path.isfile(os.path.join(base, stem + ".dp")):
                cases[prefix + stem] = Case(prefix + stem, base, stem + ".dp", path)
        elif os.path.isdir(path) and entry == "gen":
            for g in sorted(os.listdir(path)):
                if g.endswith(".err"):
                    stem = g[:-4]
                    cases[prefix + "gen/" + stem] = Case(prefix + "gen/" + stem, None, stem + ".dp",
                                                          os.path.join(path, g), gen=stem)
        elif os.path.isdir(path) and entry != "pending":
            if os.path.isfile(os.path.join(path, "main.err")) and os.path.isfile(os.path.join(path, "main.dp")):
                cases[prefix + entry] = Case(prefix + entry, base, entry + "/main.dp",
                                             os.path.join(path, "main.err"))
    if not pending:
        for s in sorted(SURVIVE):
            if "gen/" + s not in cases:
                cases["gen/" + s] = Case("gen/" + s, None, s + ".dp", None, gen=s, survive=True)
    return cases


VERBS = ("ir", "print")


def run_case(dpc, case, verb):
    """Runs one case as `dpc VERB`; returns (rc, stdout, stderr, workdir_real)."""
    tmp = None
    try:
        if case.gen is not None:
            if case.gen not in GENERATORS:
                raise KeyError("no generator for %s" % case.gen)
            tmp = tempfile.mkdtemp(prefix="dpc_bad_")
            data = GENERATORS[case.gen]()
            if data is not None:
                with open(os.path.join(tmp, case.rel), "wb") as f:
                    f.write(data)
            workdir = tmp
        else:
            workdir = case.workdir
        p = subprocess.run([os.path.abspath(dpc), verb, case.rel], cwd=workdir, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIMEOUT)
        return p.returncode, p.stdout, p.stderr, os.path.realpath(workdir)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def normalise(stderr, workdir_real):
    text = stderr.decode("utf-8", "surrogateescape")
    return text.replace(workdir_real, "$DIR")


def check(dpc, case, update=False):
    """Returns a list of problems under every verb (empty: pass)."""
    problems = []
    for verb in VERBS:
        problems += ["dpc %s: %s" % (verb, p) for p in check_verb(dpc, case, verb, update and verb == "ir")]
    return problems


def check_verb(dpc, case, verb, update=False):
    """Returns a list of problems (empty: pass)."""
    try:
        rc, out, err, wd = run_case(dpc, case, verb)
    except subprocess.TimeoutExpired:
        return ["timed out after %g s (hang?)" % TIMEOUT]
    except (KeyError, OSError, TypeError, ValueError) as e:
        return ["cannot run the case: %s" % e]
    got = normalise(err, wd)
    problems = []
    if rc < 0:
        problems.append("killed by signal %d (crash)" % -rc)
    elif rc != 1:
        problems.append("exit status %d, expected 1" % rc)
    if out:
        problems.append("wrote to stdout (%d bytes): %r" % (len(out), out[:200]))
    if SANITIZER.search(got):
        problems.append("sanitizer report on stderr")
    if case.survive:
        first = got.split("\n", 1)[0]
        if not LOCATED.match(first):
            problems.append("first line is not 'FILE.dp:LINE:COL: error: ...': %r" % first[:200])
        if len(err) > 64 * 1024:
            problems.append("stderr is %d bytes (a flood)" % len(err))
        if problems:
            problems.append("stderr was:\n" + got[:4000])
        return problems
    if update:
        with open(case.err, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
            f.write(got)
        return problems
    with open(case.err, encoding="utf-8", errors="surrogateescape", newline="") as f:
        want = f.read()
    if got != want:
        diff = difflib.unified_diff(want.splitlines(keepends=True), got.splitlines(keepends=True),
                                    "expected (%s)" % os.path.relpath(case.err), "dpc stderr")
        problems.append("stderr differs:\n" + "".join(diff))
    return problems


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = {a for a in argv[1:] if a.startswith("--")}
    if len(args) < 2:
        print(__doc__)
        return 2
    dpc, root = args[0], os.path.abspath(args[1])
    names = args[2:]
    cases = find_cases(root)
    pending = find_cases(root, pending=True)
    if "--list" in flags:
        for n in cases:
            print(n)
        if "--pending" in flags:
            for n in pending:
                print(n)
        return 0
    everything = dict(cases, **pending)
    if names:
        unknown = [n for n in names if n not in everything]
        if unknown:
            print("unknown case(s): %s" % ", ".join(unknown))
            return 2
        todo = [everything[n] for n in names]
    else:
        todo = list(cases.values()) + (list(pending.values()) if "--pending" in flags else [])
    failed = 0
    for case in todo:
        problems = check(dpc, case, update="--update" in flags)
        if problems:
            failed += 1
            print("FAIL %s" % case.name)
            for p in problems:
                print("  " + p.replace("\n", "\n  "))
        else:
            print("ok   %s" % case.name)
    print("%d of %d cases passed" % (len(todo) - failed, len(todo)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
