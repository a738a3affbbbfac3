"""clex.py - the code of a C or CUDA C source with its comments and literals
blanked out, for checking that text from a user's file appears only there.

This follows translation phases 1-3 as far as they matter here: line splices
(backslash-newline) are joined first, because a splice can carry a comment's
text onto the next line, then comments, string literals and character
literals are replaced by one space each. Trigraphs are not replaced: GCC and
NVRTC leave them off in the modes dpc uses, and dpc's escapers never pass a
`?` through anyway."""

import re


def code_only(src: str) -> str:
    s = src.replace("\\\r\n", "").replace("\\\n", "")
    out = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if s.startswith("/*", i):
            j = s.find("*/", i + 2)
            if j < 0:
                raise ValueError("unterminated comment at offset %d" % i)
            out.append(" ")
            i = j + 2
        elif s.startswith("//", i):
            j = s.find("\n", i)
            out.append(" ")
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and s[j] != c:
                if s[j] == "\n":
                    raise ValueError("newline in a literal at offset %d" % i)
                j += 2 if s[j] == "\\" else 1
            if j >= n:
                raise ValueError("unterminated literal at offset %d" % i)
            out.append(" ")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def identifiers(src: str):
    """The identifier-like tokens of the code outside comments and literals."""
    return set(IDENT.findall(code_only(src)))


def leaks(src: str, marker: str):
    """Lines of the code (comments and literals blanked) that contain marker."""
    return [ln for ln in code_only(src).splitlines() if marker in ln]
