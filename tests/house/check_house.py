#!/usr/bin/env python3
"""check_house.py - the limits of docs/internals.md's "House rules", checked.

    check_house.py SOURCE_DIR BUILD_DIR [--list]
    check_house.py --selftest CC

1. No C source (.c/.h, tests and bench included) over 1,000 lines.
2. No function over 100 lines in production code (compiler/, runtime/,
   importer/, cli/, base/): from the first line of its signature to its
   closing brace.
3. No circle among the files of the product: file A depends on file B when
   A's object references a symbol that B's object defines (nm), the way a
   reader follows a call. A circle inside one folder is refused, and so is
   any circle between top-level folders (base < compiler < importer <
   runtime < cli, with grammar/ read as part of the compiler).

--list prints every measurement (longest functions, largest files) instead
of only what breaks a rule. Exit 1 when a rule is broken. --selftest builds
a small tree that breaks each rule once (and one that breaks none) and
checks that the checker says so.
"""
import os
import re
import subprocess
import sys

MAX_FILE = 1000
MAX_FUNC = 100
PRODUCT = ("compiler", "runtime", "importer", "cli", "base", "grammar")
SKIP_DIRS = ("corpus", ".git")


def sources(root):
    for d, subs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        top = rel.split(os.sep)[0]
        if top.startswith("build") or any(s in rel.split(os.sep) for s in SKIP_DIRS):
            subs[:] = []
            continue
        for f in files:
            if f.endswith((".c", ".h", ".y", ".l")):
                yield os.path.normpath(os.path.join(rel, f))


SIG_END = re.compile(r"\)\s*\{\s*$")


def functions(path):
    """(name, first line, length) of each function defined in a C file:
    a line at column 0 ending in ') {' (or a lone '{' after one), its
    signature the column-0 line where it starts, its end the next '}' at
    column 0."""
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        opens = SIG_END.search(ln) or (ln == "{" and i > 0 and lines[i - 1].rstrip().endswith(")"))
        if opens and ln[:1] not in ("#", "/", "*", ""):
            start = i - 1 if ln == "{" else i
            while start > 0 and lines[start][:1] in (" ", "\t"):
                start -= 1
            if lines[start][:1] in (" ", "\t", "#", "/", "*", "") or lines[start].rstrip().endswith((";", "}", "*/")) \
                    and start != i:
                i += 1
                continue
            sig = " ".join(l.strip() for l in lines[start:i + 1])
            if "=" in sig.split("(")[0] or re.match(r"(typedef|struct|enum|union)\b[^(]*\{", sig):
                i += 1
                continue
            m = re.search(r"([A-Za-z_][A-Za-z_0-9]*)\s*\(", sig)
            j = i + 1
            while j < len(lines) and lines[j] != "}":
                j += 1
            out.append((m.group(1) if m else "?", start + 1, j - start + 1))
            i = j
        i += 1
    return out


def symbol_graph(build):
    """{object's source: set of sources it depends on} from nm over the
    product's objects in BUILD (dpc_obj and the CLI)."""
    objs = []
    for d, _, files in os.walk(os.path.join(build, "CMakeFiles")):
        if not (os.sep + "dpc_obj.dir" in d or os.sep + "dpc.dir" in d):
            continue
        objs += [os.path.join(d, f) for f in files if f.endswith(".o")]
    defs, uses = {}, {}
    for o in objs:
        rel = o.split(".dir" + os.sep, 1)[1][:-2]
        if not rel.startswith(PRODUCT):  # flex/bison outputs live in the build tree
            rel = "grammar/" + os.path.basename(rel)
        out = subprocess.run(["nm", "--defined-only", "-g", o], capture_output=True, text=True).stdout
        for l in out.splitlines():
            p = l.split()
            if len(p) == 3:
                defs.setdefault(p[2], rel)
        out = subprocess.run(["nm", "-u", o], capture_output=True, text=True).stdout
        uses[rel] = {l.split()[-1] for l in out.splitlines() if l.strip()}
    return {f: {defs[s] for s in u if s in defs and defs[s] != f} for f, u in uses.items()}


def sccs(graph):
    """Tarjan's strongly connected components with more than one node."""
    index, low, stack, on, res = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop()
                on.discard(w)
                c.append(w)
                if w == v:
                    break
            if len(c) > 1:
                res.append(sorted(c))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return res


def top(f):
    t = f.split("/")[0]
    return "compiler" if t == "grammar" else t


def selftest(cc):
    """A tree with a file of 1,001 lines, a function of 101 lines, a circle
    between two files of compiler/ and one between base/ and compiler/ must
    give four problems; the same tree mended, none."""
    import tempfile
    fails = 0
    with tempfile.TemporaryDirectory() as t:
        def tree(broken):
            root = os.path.join(t, "broken" if broken else "mended")
            files = {
                "compiler/a.c": "int b(void);\nint a(void) {\n    return %s;\n}\n" % ("b()" if broken else "1"),
                "compiler/b.c": "int a(void);\nint b(void) {\n    return a();\n}\n",
                "compiler/c.c": "int base_x(void);\nint c(void) {\n    return base_x();\n}\n",
                "base/x.c": "int c(void);\nint base_x(void) {\n    return %s;\n}\n" % ("c()" if broken else "2"),
                "compiler/long.c": "int long_fn(int v) {\n" + "    v++;\n" * (99 if broken else 98) + "}\n",
                "compiler/big.h": "/* */\n" * (1001 if broken else 1000),
            }
            for rel, text in files.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "w").write(text)
                if rel.endswith(".c"):
                    obj = os.path.join(root, "build", "CMakeFiles", "dpc_obj.dir", rel + ".o")
                    os.makedirs(os.path.dirname(obj), exist_ok=True)
                    subprocess.run([cc, "-c", "-o", obj, path], check=True)
            r = subprocess.run([sys.executable, __file__, root, os.path.join(root, "build")],
                               capture_output=True, text=True)
            return r.returncode, r.stdout
        rc, out = tree(True)
        want = ["file over 1000 lines: compiler/big.h", "function over 100 lines: long_fn",
                "circle among files: compiler/a.c <-> compiler/b.c",
                "circle among files: base/x.c <-> compiler/c.c",
                "circle among top-level folders: base <-> compiler"]
        for w in want:
            if w not in out:
                print("selftest: the broken tree should report: " + w)
                fails += 1
        if rc != 1:
            print(f"selftest: the broken tree should exit 1, got {rc}")
            fails += 1
        rc, out = tree(False)
        if rc != 0:
            print("selftest: the mended tree should pass, got:\n" + out)
            fails += 1
    print("selftest: " + ("ok" if not fails else f"{fails} failure(s)"))
    return 1 if fails else 0


def main():
    if sys.argv[1] == "--selftest":
        return selftest(sys.argv[2])
    root, build = sys.argv[1], sys.argv[2]
    listing = "--list" in sys.argv
    bad = 0
    files, funcs = [], []
    for f in sorted(sources(root)):
        n = open(os.path.join(root, f), encoding="utf-8", errors="replace").read().count("\n")
        files.append((n, f))
        if f.startswith(PRODUCT) and f.endswith(".c"):
            funcs += [(ln, f, name, at) for name, at, ln in functions(os.path.join(root, f))]
    for n, f in sorted(files, reverse=True):
        if n > MAX_FILE:
            print(f"file over {MAX_FILE} lines: {f} ({n})")
            bad += 1
        elif listing and n > 700:
            print(f"  file {f}: {n}")
    for ln, f, name, at in sorted(funcs, reverse=True):
        if ln > MAX_FUNC:
            print(f"function over {MAX_FUNC} lines: {name} ({f}:{at}, {ln})")
            bad += 1
        elif listing and ln > 80:
            print(f"  function {name} ({f}:{at}): {ln}")
    g = symbol_graph(build)
    if not g:
        print(f"no objects of dpc_obj/dpc under {build}: build it first")
        return 1
    for c in sccs(g):
        print("circle among files: " + " <-> ".join(c))
        for a in c:
            print("    " + a + " -> " + ", ".join(sorted(b for b in g[a] if b in c)))
        bad += 1
    tg = {}
    for a, bs in g.items():
        for b in bs:
            if top(a) != top(b):
                tg.setdefault(top(a), set()).add(top(b))
    for c in sccs(tg):
        print("circle among top-level folders: " + " <-> ".join(c))
        for a, bs in sorted(g.items()):
            for b in sorted(bs):
                if top(a) in c and top(b) in c and top(a) != top(b):
                    print(f"    {a} -> {b}")
        bad += 1
    print(f"{len(files)} files, {len(funcs)} functions, {len(g)} objects: {bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
