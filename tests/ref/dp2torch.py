#!/usr/bin/python3
"""dp2torch — an independent PyTorch implementation of the `.dp` model language.

This is the *test reference* for dpc.  It shares no code with the C compiler:
it reads the contract (shared/spec/dsl.md), parses `.dp` files with its own
tokenizer and recursive-descent parser, and builds real `torch.nn` modules:

* every `.dp` module becomes a dynamically created `nn.Module` subclass whose
  class `__name__` is the `.dp` module name, so `repr(model)` prints exactly
  what PyTorch prints for the equivalent hand-written model;
* members are registered in source order, so `state_dict()` keys and the
  order in which PyTorch's default initialisation draws random numbers are
  the same as for a hand-written `__init__`;
* `module X(...) extends Sequential` becomes an `nn.Sequential` subclass
  named X; constants of a module body (`use_res = stride == 1`) are plain
  attributes, a None member (`downsample = downsample` given None) is not
  registered, and `extra_repr = f"..."` is what `extra_repr()` returns;
* module classes as values (`norm_layer: Module = BatchNorm2d`) are
  callables, and `partial(BatchNorm2d, eps=0.001)` is `functools.partial`;
* `forward` interprets the `.dp` statements with torch operations; `if`
  conditions must not be tensors, as dpc requires them known when compiling;
* `model = DataParallel(X())` becomes `torch.nn.DataParallel(X())` (its repr
  is what `dpc print` must reproduce; on the CPU it just calls the module).

Public API::

    model, info = load_model("models/simple.dp")

`info` is a plain JSON-able dict::

    {"path": ..., "entry": "SimpleModel", "data_parallel": True,
     "dp_kwargs": {...},
     "tensor_params": [{"name": "x", "dtype": "f32", "dims": [None, 10],
                        "batch_name": "N"}],
     "scalar_params": [{"name": "scale", "type": "float", "default": 1.0}]}

Errors in a `.dp` file raise `DpError`, whose `str()` is compiler-style:
`file:line:col: error: message`, the source line and a caret.

Command line (handy for debugging)::

    dp2torch.py MODEL.dp            # parse, build, print the info as JSON
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import os
import sys
from collections import namedtuple

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["DpError", "load_model", "load_program", "DpModule", "TENSOR_DTYPES"]


# ===========================================================================
# Source positions and errors
# ===========================================================================

class Source:
    """One `.dp` file: its path (as given) and its lines, for diagnostics."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.text = text
        self.lines = text.split("\n")


Pos = namedtuple("Pos", "src line col")  # line and col are 1-based


class DpError(Exception):
    """A user error in a `.dp` program, reported compiler-style."""

    def __init__(self, pos: Pos | None, msg: str):
        super().__init__(msg)
        self.pos = pos
        self.msg = msg

    def __str__(self) -> str:
        if self.pos is None:
            return f"error: {self.msg}"
        src, line, col = self.pos
        out = f"{src.path}:{line}:{col}: error: {self.msg}"
        if 1 <= line <= len(src.lines):
            text = src.lines[line - 1].rstrip("\r")
            # keep tabs in the caret prefix so the caret lines up in a terminal
            prefix = "".join(c if c == "\t" else " " for c in text[: col - 1])
            out += f"\n{text}\n{prefix}^"
        return out


def _suggest(name: str, candidates) -> str:
    """' (did you mean X?)' for the nearest candidate, or ''."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


# ===========================================================================
# Tokenizer
# ===========================================================================

Token = namedtuple("Token", "kind value pos")
# kinds: "name", "int", "float", "str", "fstr" (the raw text of f"..."),
# "op", "nl" (statement end), "eof"

KEYWORDS = {"module", "forward", "import", "for", "in", "return",
            "true", "false", "True", "False", "None",
            "if", "elif", "else", "and", "or", "not", "is", "extends"}
# Longest first, so that "//" wins over "/", "**" over "*", "==" over "=".
OPERATORS = ["...", "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "@", "=", ",", ":",
             "<", ">", "&", "|", "~", ".", "(", ")", "[", "]", "{", "}", ";"]
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


def tokenize(src: Source) -> list[Token]:
    """Split a source file into tokens.

    Newlines end statements ("nl" tokens) except inside (), [] and a dict's
    {}.  A `{` opens a dict (not a block) right after `=`, or inside an open
    bracket right after `(`, `,`, `[` or `:`.  `;` is also a statement end.
    Comments run from `#` to the end of the line.
    """
    text = src.text
    toks: list[Token] = []
    i, line, col = 0, 1, 1
    depth = 0  # open (, [ and dict {; newlines inside are whitespace
    braces: list[bool] = []  # per open '{': True for a dict, False for a block
    n = len(text)

    def pos():
        return Pos(src, line, col)

    while i < n:
        c = text[i]
        if c == "\n":
            if depth == 0:
                toks.append(Token("nl", "\n", pos()))
            i += 1
            line += 1
            col = 1
            continue
        if c in " \t\r\f":
            i += 1
            col += 1
            continue
        if c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        start = pos()
        # f-strings: the text between the quotes, as written ({name} is
        # substituted when the value is built)
        if c == "f" and i + 1 < n and text[i + 1] == '"':
            j = i + 2
            while True:
                if j >= n or text[j] == "\n":
                    raise DpError(start, "unterminated string literal")
                if text[j] == "\\" and j + 1 < n:
                    j += 2
                    continue
                if text[j] == '"':
                    break
                j += 1
            toks.append(Token("fstr", text[i + 2:j], start))
            col += j + 1 - i
            i = j + 1
            continue
        # identifiers and keywords
        if c.isascii() and (c.isalpha() or c == "_"):
            j = i
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            toks.append(Token("name", text[i:j], start))
            col += j - i
            i = j
            continue
        # numbers: 12, 1.0, 1., .5, 1e-5, 2.5E+3
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            j = i
            while j < n and text[j].isdigit():
                j += 1
            is_float = False
            if j < n and text[j] == ".":
                is_float = True
                j += 1
                while j < n and text[j].isdigit():
                    j += 1
            if j < n and text[j] in "eE":
                k = j + 1
                if k < n and text[k] in "+-":
                    k += 1
                if k < n and text[k].isdigit():
                    is_float = True
                    j = k
                    while j < n and text[j].isdigit():
                        j += 1
                else:
                    raise DpError(start, f"malformed exponent in number '{text[i:k]}'")
            if j < n and (text[j].isalnum() or text[j] == "_" or text[j] == "."):
                raise DpError(start, f"invalid number literal '{text[i:j + 1]}'")
            lit = text[i:j]
            toks.append(Token("float" if is_float else "int",
                              float(lit) if is_float else int(lit), start))
            col += j - i
            i = j
            continue
        # strings, double quotes only
        if c == '"':
            j = i + 1
            chars = []
            while True:
                if j >= n or text[j] == "\n":
                    raise DpError(start, "unterminated string literal")
                ch = text[j]
                if ch == '"':
                    break
                if ch == "\\":
                    if j + 1 >= n:
                        raise DpError(start, "unterminated string literal")
                    esc = text[j + 1]
                    table = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}
                    if esc not in table:
                        raise DpError(Pos(src, line, col + (j - i)),
                                      f"unknown escape sequence '\\{esc}'")
                    chars.append(table[esc])
                    j += 2
                    continue
                chars.append(ch)
                j += 1
            toks.append(Token("str", "".join(chars), start))
            col += j + 1 - i
            i = j + 1
            continue
        if c == "'":
            raise DpError(start, "strings use double quotes: \"...\"")
        for op in OPERATORS:
            if text.startswith(op, i):
                if op in ("(", "["):
                    depth += 1
                elif op in (")", "]"):
                    depth = max(0, depth - 1)
                elif op == "{":
                    prev = toks[-1] if toks else None
                    is_dict = prev is not None and prev.kind == "op" and (
                        prev.value == "=" or (depth > 0 and prev.value in ("(", ",", "[", ":")))
                    braces.append(is_dict)
                    depth += is_dict
                elif op == "}":
                    if braces and braces.pop():
                        depth = max(0, depth - 1)
                toks.append(Token("nl" if op == ";" else "op", op, start))
                i += len(op)
                col += len(op)
                break
        else:
            raise DpError(start, f"unexpected character '{c}'")
    toks.append(Token("nl", "\n", Pos(src, line, col)))
    toks.append(Token("eof", None, Pos(src, line, col)))
    return toks


# ===========================================================================
# AST
# ===========================================================================

class Node:
    """Base AST node; every node carries `pos`."""
    _fields: tuple = ()

    def __init__(self, pos, *values):
        self.pos = pos
        for name, v in zip(self._fields, values):
            setattr(self, name, v)

    def __repr__(self):
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({args})"


def _node(name, fields):
    return type(name, (Node,), {"_fields": tuple(fields.split())})


# expressions
Const = _node("Const", "value")              # int, float, bool, str, None
Name = _node("Name", "id")
TupleExpr = _node("TupleExpr", "elts")
ListExpr = _node("ListExpr", "elts")
ListComp = _node("ListComp", "elt var range_args")  # [elt for var in range(args)]
Unary = _node("Unary", "op operand")
Binary = _node("Binary", "op left right")
Starred = _node("Starred", "value")        # f(*xs)
Attr = _node("Attr", "value name")           # finfo(float32).min
Call = _node("Call", "func args kwargs")      # kwargs: list of (name, expr, pos)
Index = _node("Index", "value index")
Not = _node("Not", "operand")
Cond = _node("Cond", "cond then other")      # then if cond else other
FStr = _node("FStr", "text")                 # f"...", the raw text between the quotes
DictExpr = _node("DictExpr", "items")        # items: list of (key expr, value expr)
DictComp = _node("DictComp", "key value var range_args")
Subscript = _node("Subscript", "value items")  # x[1:, ...] (parsed; not part of the language yet)
Slice = _node("Slice", "start stop step")
Ellipsis_ = _node("Ellipsis_", "")
EllipsisItem = Ellipsis_  # the name the indexing code uses
# statements
Assign = _node("Assign", "targets value")     # targets: list of (name, pos)
For = _node("For", "var iter body")
Return = _node("Return", "values")
If = _node("If", "cond body orelse")          # elif: an If alone in orelse
# declarations
Param = _node("Param", "name type default")   # ctor param / scalar forward param
TensorParam = _node("TensorParam", "name dtype dims")
Member = _node("Member", "name value")        # name = value (a member, a constant, extra_repr)
Entry = _node("Entry", "value")               # a bare module: entry of a Sequential subclass
MemberIf = _node("MemberIf", "cond then orelse")  # if in a module body; orelse may hold one MemberIf
Forward = _node("Forward", "params body")
ModuleDef = _node("ModuleDef", "name params members forward base")
Import = _node("Import", "path")
ModelLine = _node("ModelLine", "value")

SCALAR_TYPES = {"int", "float", "bool"}
CTOR_TYPES = {"int", "float", "bool", "str", "Module"}
NAMESPACES = {"torch", "nn", "F"}  # torch.flatten is flatten, nn.Conv2d is Conv2d
# dtype name in `.dp` -> (torch dtype, numpy dtype name, is floating point)
TENSOR_DTYPES = {
    "f16": (torch.float16, "float16", True),
    "bf16": (torch.bfloat16, None, True),
    "f32": (torch.float32, "float32", True),
    "f64": (torch.float64, "float64", True),
    "i32": (torch.int32, "int32", False),
    "i64": (torch.int64, "int64", False),
}


# ===========================================================================
# Parser (recursive descent)
# ===========================================================================

def _describe(tok: Token) -> str:
    if tok.kind == "eof":
        return "end of file"
    if tok.kind == "nl":
        return "end of line" if tok.value == "\n" else "';'"
    if tok.kind == "str":
        return f'string "{tok.value}"'
    if tok.kind == "fstr":
        return f'f-string f"{tok.value}"'
    if tok.kind in ("int", "float"):
        return f"number {tok.value}"
    return f"'{tok.value}'"


class Parser:
    def __init__(self, src: Source):
        self.src = src
        self.toks = tokenize(src)
        self.i = 0

    # ---- token helpers ----
    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Token:
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def at(self, kind: str, value=None, k: int = 0) -> bool:
        t = self.peek(k)
        return t.kind == kind and (value is None or t.value == value)

    def at_op(self, value: str, k: int = 0) -> bool:
        return self.at("op", value, k)

    def at_kw(self, value: str, k: int = 0) -> bool:
        return self.at("name", value, k)

    def accept_op(self, value: str) -> bool:
        if self.at_op(value):
            self.next()
            return True
        return False

    def error(self, expected: str, tok: Token | None = None):
        tok = tok or self.peek()
        raise DpError(tok.pos, f"expected {expected}, got {_describe(tok)}")

    def expect_op(self, value: str, expected: str | None = None) -> Token:
        if not self.at_op(value):
            self.error(expected or f"'{value}'")
        return self.next()

    def expect_ident(self, what: str = "a name") -> Token:
        t = self.peek()
        if t.kind != "name" or t.value in KEYWORDS:
            self.error(what)
        return self.next()

    def skip_newlines(self):
        while self.at("nl"):
            self.next()

    def end_of_statement(self, closers=("}",)):
        """A statement ends at a newline, ';', end of file, or before a closer."""
        if self.at("nl"):
            self.next()
            return
        if self.at("eof") or any(self.at_op(c) for c in closers):
            return
        self.error("end of statement (newline or ';')")

    # ---- file ----
    def parse_file(self) -> list[Node]:
        items = []
        self.skip_newlines()
        while not self.at("eof"):
            t = self.peek()
            if self.at_kw("import"):
                self.next()
                if not self.at("str"):
                    self.error('a file name in double quotes after import')
                items.append(Import(t.pos, self.next().value))
                self.end_of_statement(closers=())
            elif self.at_kw("module"):
                items.append(self.parse_module())
                self.end_of_statement(closers=())
            elif self.at("name", "model") and self.at_op("=", 1):
                self.next()
                self.next()
                items.append(ModelLine(t.pos, self.parse_expr()))
                self.end_of_statement(closers=())
            else:
                self.error("'import', 'module' or 'model = ...'")
            self.skip_newlines()
        return items

    # ---- module ----
    def parse_module(self) -> ModuleDef:
        kw = self.next()  # 'module'
        name = self.expect_ident("a module name after 'module'")
        params = []
        if self.accept_op("("):
            params = self.parse_param_list(scalar_only=True)
        base = None
        if self.at_kw("extends"):
            self.next()
            base = self.expect_ident("a module name after 'extends'")
        self.forward_seen = None
        members = self.parse_body_items(name.value, top=True)
        return ModuleDef(kw.pos, name.value, params, members, self.forward_seen, base)

    def parse_body_items(self, mname: str, top: bool) -> list[Node]:
        """`{ items }` of a module body or of one of its if branches."""
        self.expect_op("{", "'{' to open the module body" if top else "'{' to open the if body")
        items = []
        self.skip_newlines()
        while not self.at_op("}"):
            if self.at("eof"):
                self.error(f"'}}' to close module {mname}")
            t = self.peek()
            if self.at_kw("forward"):
                if not top:
                    raise DpError(t.pos, "forward cannot be inside an if: write the condition in forward")
                fwd = self.parse_forward()
                if self.forward_seen is not None:
                    raise DpError(t.pos, f"module {mname} has more than one forward")
                self.forward_seen = fwd
            elif self.at_kw("if"):
                items.append(self.parse_member_if(mname))
            elif t.kind == "name" and t.value not in KEYWORDS and self.at_op("=", 1):
                self.next()
                self.next()
                items.append(Member(t.pos, t.value, self.parse_expr()))
            else:
                e = self.parse_expr()
                if (isinstance(e, Call) and isinstance(e.func, Name)
                        and e.func.id in ("register_buffer", "register_parameter")):
                    items.append(_register_member(e))
                else:
                    items.append(Entry(t.pos, e))
            self.end_of_statement()
            self.skip_newlines()
        self.next()  # '}'
        return items

    def parse_member_if(self, mname: str) -> Node:
        t = self.next()  # 'if' or 'elif'
        cond = self.parse_expr()
        then = self.parse_body_items(mname, top=False)
        orelse = []
        if self.at_kw("elif"):
            orelse = [self.parse_member_if(mname)]
        elif self.at_kw("else"):
            self.next()
            orelse = self.parse_body_items(mname, top=False)
        return MemberIf(t.pos, cond, then, orelse)

    def parse_param_list(self, scalar_only: bool) -> list[Node]:
        """Parameters after '(' up to and including ')'.

        Constructor parameters are scalars `p: int = 3`.  Forward parameters
        may also be tensors `x: [N, 10]` or `ids: i64[N, seq]`.
        """
        params: list[Node] = []
        while not self.at_op(")"):
            name = self.expect_ident("a parameter name")
            self.expect_op(":", f"':' and a type after parameter '{name.value}'")
            t = self.peek()
            if not scalar_only and self.at_op("["):
                params.append(TensorParam(name.pos, name.value, "f32", self.parse_dims()))
            elif (not scalar_only and t.kind == "name" and t.value in TENSOR_DTYPES
                  and self.at_op("[", 1)):
                self.next()
                params.append(TensorParam(name.pos, name.value, t.value, self.parse_dims()))
            elif t.kind == "name" and t.value in (CTOR_TYPES if scalar_only else SCALAR_TYPES):
                self.next()
                default = self.parse_expr() if self.accept_op("=") else None
                params.append(Param(name.pos, name.value, t.value, default))
            else:
                if scalar_only:
                    self.error("a parameter type: int, float, bool, str or Module")
                self.error("a parameter type: [dims], a dtype such as i64[dims], "
                           "or int, float, bool")
            if not self.accept_op(","):
                break
        self.expect_op(")", "',' or ')' in the parameter list")
        return params

    def parse_dims(self) -> list[Node]:
        self.expect_op("[")
        dims = []
        while not self.at_op("]"):
            dims.append(self.parse_expr())
            if not self.accept_op(","):
                break
        self.expect_op("]", "',' or ']' in the dims")
        if not dims:
            raise DpError(self.toks[self.i - 1].pos, "a tensor parameter needs at least the batch dim")
        return dims

    def parse_forward(self) -> Forward:
        kw = self.next()  # 'forward'
        self.expect_op("(", "'(' after forward")
        params = self.parse_param_list(scalar_only=False)
        body = self.parse_block("forward")
        return Forward(kw.pos, params, body)

    def parse_block(self, what: str) -> list[Node]:
        self.expect_op("{", f"'{{' to open the {what} body")
        body = []
        self.skip_newlines()
        while not self.at_op("}"):
            if self.at("eof"):
                self.error(f"'}}' to close the {what} body")
            body.append(self.parse_statement())
            self.end_of_statement()
            self.skip_newlines()
        self.next()
        return body

    # ---- statements ----
    def parse_statement(self) -> Node:
        t = self.peek()
        if self.at_kw("for"):
            self.next()
            var = self.expect_ident("a loop variable after 'for'")
            if not self.at_kw("in"):
                self.error("'in'")
            self.next()
            it = self.parse_expr()
            return For(t.pos, var.value, it, self.parse_block("for"))
        if self.at_kw("return"):
            self.next()
            return Return(t.pos, self.parse_expr_list())
        if self.at_kw("if"):
            return self.parse_if()
        if t.kind == "name" and t.value not in KEYWORDS and (self.at_op("=", 1) or self.at_op(",", 1)):
            targets = [(t.value, t.pos)]
            self.next()
            while self.accept_op(","):
                nt = self.expect_ident("a name on the left of '='")
                targets.append((nt.value, nt.pos))
            self.expect_op("=", "'=' after the assignment targets")
            value = self.parse_expr_list()
            if isinstance(value, list):
                value = TupleExpr(value[0].pos, value) if len(value) > 1 else value[0]
            return Assign(t.pos, targets, value)
        self.error("a statement (assignment, if, for or return)")

    def parse_if(self) -> Node:
        t = self.next()  # 'if' or 'elif'
        cond = self.parse_expr()
        body = self.parse_block("if")
        orelse = []
        if self.at_kw("elif"):
            orelse = [self.parse_if()]
        elif self.at_kw("else"):
            self.next()
            orelse = self.parse_block("else")
        return If(t.pos, cond, body, orelse)

    def parse_expr_list(self) -> list[Node]:
        values = [self.parse_expr()]
        while self.accept_op(","):
            values.append(self.parse_expr())
        return values

    # ---- expressions ----
    # precedence, lowest first:  a if c else b  <  or  <  and  <  not  <
    # comparisons and is (no chains)  <  |  <  &  <  + -  <  * / // @  <  unary - ~  <  **
    # <  call/index/attribute
    def parse_expr(self) -> Node:
        e = self.parse_or()
        if self.at_kw("if"):
            t = self.next()
            cond = self.parse_or()
            if not self.at_kw("else"):
                self.error("'else' in the conditional expression 'a if c else b'")
            self.next()
            return Cond(t.pos, cond, e, self.parse_expr())
        return e

    def parse_or(self) -> Node:
        left = self.parse_and()
        while self.at_kw("or"):
            op = self.next()
            left = Binary(op.pos, "or", left, self.parse_and())
        return left

    def parse_and(self) -> Node:
        left = self.parse_not()
        while self.at_kw("and"):
            op = self.next()
            left = Binary(op.pos, "and", left, self.parse_not())
        return left

    def parse_not(self) -> Node:
        if self.at_kw("not"):
            op = self.next()
            return Not(op.pos, self.parse_not())
        return self.parse_comparison()

    def _at_comparison(self):
        if any(self.at_op(o) for o in COMPARISONS):
            return True
        return self.at_kw("is")

    def parse_comparison(self) -> Node:
        left = self.parse_bitor()
        if self._at_comparison():
            op = self.next()
            name = op.value
            if name == "is" and self.at_kw("not"):
                self.next()
                name = "is not"
            left = Binary(op.pos, name, left, self.parse_bitor())
            if self._at_comparison():
                raise DpError(self.peek().pos, "comparisons do not chain: write (a < b) and (b < c)")
        return left

    def parse_bitor(self) -> Node:
        left = self.parse_bitand()
        while self.at_op("|"):
            op = self.next()
            left = Binary(op.pos, "|", left, self.parse_bitand())
        return left

    def parse_bitand(self) -> Node:
        left = self.parse_arith()
        while self.at_op("&"):
            op = self.next()
            left = Binary(op.pos, "&", left, self.parse_arith())
        return left

    def parse_arith(self) -> Node:
        left = self.parse_term()
        while self.at_op("+") or self.at_op("-"):
            op = self.next()
            left = Binary(op.pos, op.value, left, self.parse_term())
        return left

    def parse_term(self) -> Node:
        left = self.parse_unary()
        while any(self.at_op(o) for o in ("*", "/", "//", "%", "@")):
            op = self.next()
            left = Binary(op.pos, op.value, left, self.parse_unary())
        return left

    def parse_unary(self) -> Node:
        if self.at_op("-") or self.at_op("~"):
            op = self.next()
            return Unary(op.pos, op.value, self.parse_unary())
        return self.parse_power()

    def parse_power(self) -> Node:
        base = self.parse_postfix()
        if self.at_op("**"):
            op = self.next()
            return Binary(op.pos, "**", base, self.parse_unary())  # right-assoc, like Python
        return base

    def parse_postfix(self) -> Node:
        e = self.parse_primary()
        while True:
            if self.at_op("("):
                if isinstance(e, Attr):  # x.f(a) is f(x, a)
                    call = self.parse_call(Name(e.pos, e.name))
                    call.args.insert(0, e.value)
                    e = call
                else:
                    e = self.parse_call(e)
            elif self.at_op("["):
                t = self.next()
                items = [self.parse_subscript()]
                while self.accept_op(","):
                    items.append(self.parse_subscript())
                self.expect_op("]", "']' after the index")
                if len(items) == 1 and not isinstance(items[0], (Slice, Ellipsis_)):
                    e = Index(t.pos, e, items[0])
                else:
                    e = Subscript(t.pos, e, items)
            elif self.at_op("."):
                self.next()
                a = self.expect_ident("an attribute name after '.'")
                if isinstance(e, Name) and (e.id in NAMESPACES or getattr(e, "ns", False)):
                    e = Name(a.pos, a.value)  # the namespace vanishes
                    e.ns = a.value in ("nn", "functional")
                else:
                    e = Attr(a.pos, e, a.value)
            else:
                return e

    def parse_subscript(self) -> Node:
        """One item of x[...]: an index, `...`, or a slice a:b / a:b:c."""
        t = self.peek()
        if self.accept_op("..."):
            return Ellipsis_(t.pos)
        start = None if self.at_op(":") else self.parse_expr()
        if not self.at_op(":"):
            return start
        colon = self.next()
        ends = ("]", ",", ":")
        stop = None if any(self.at_op(o) for o in ends) else self.parse_expr()
        step = None
        if self.accept_op(":"):
            step = None if self.at_op("]") or self.at_op(",") else self.parse_expr()
        return Slice(colon.pos, start, stop, step)

    def parse_call(self, func: Node) -> Call:
        self.expect_op("(")
        args, kwargs, seen = [], [], set()
        while not self.at_op(")"):
            t = self.peek()
            if t.kind == "name" and t.value not in KEYWORDS and self.at_op("=", 1):
                self.next()
                self.next()
                if t.value in seen:
                    raise DpError(t.pos, f"keyword argument '{t.value}' given twice")
                seen.add(t.value)
                kwargs.append((t.value, self.parse_expr(), t.pos))
            elif self.at_op("*"):  # f(*xs): the items as positional arguments
                star = self.next()
                args.append(Starred(star.pos, self.parse_expr()))
            else:
                if kwargs:
                    raise DpError(t.pos, "positional argument after keyword argument")
                args.append(self.parse_expr())
            if not self.accept_op(","):
                break
        self.expect_op(")", "',' or ')' in the argument list")
        return Call(func.pos, func, args, kwargs)

    def parse_range_call(self, what: str):
        r = self.expect_ident("range(...)")
        if r.value != "range":
            raise DpError(r.pos, f"expected range(...), got '{r.value}'")
        call = self.parse_call(Name(r.pos, "range"))
        if call.kwargs or not 1 <= len(call.args) <= 3:
            raise DpError(r.pos, "range takes 1 to 3 positional integer arguments")
        return call.args

    def parse_primary(self) -> Node:
        t = self.peek()
        if t.kind in ("int", "float", "str"):
            self.next()
            return Const(t.pos, t.value)
        if t.kind == "fstr":
            self.next()
            return FStr(t.pos, t.value)
        if self.at_op("{"):
            # {k: v, ...} or {k: v for i in range(n)}: string keys
            self.next()
            key = self.parse_expr()
            self.expect_op(":", "':' after the dict key")
            value = self.parse_expr()
            if self.at_kw("for"):
                self.next()
                var = self.expect_ident("a loop variable after 'for'")
                if not self.at_kw("in"):
                    self.error("'in'")
                self.next()
                rargs = self.parse_range_call("dict comprehension")
                self.expect_op("}", "'}' to close the dict comprehension")
                return DictComp(t.pos, key, value, var.value, rargs)
            items = [(key, value)]
            while self.accept_op(","):
                if self.at_op("}"):
                    break
                k = self.parse_expr()
                self.expect_op(":", "':' after the dict key")
                items.append((k, self.parse_expr()))
            self.expect_op("}", "',' or '}' in the dict")
            return DictExpr(t.pos, items)
        if t.kind == "name":
            if t.value in ("true", "True"):
                self.next()
                return Const(t.pos, True)
            if t.value in ("false", "False"):
                self.next()
                return Const(t.pos, False)
            if t.value == "None":
                self.next()
                return Const(t.pos, None)
            if t.value in KEYWORDS:
                self.error("an expression")
            self.next()
            return Name(t.pos, t.value)
        if self.at_op("("):
            self.next()
            if self.accept_op(")"):
                return TupleExpr(t.pos, [])
            first = self.parse_expr()
            if self.accept_op(")"):
                return first  # plain parentheses
            self.expect_op(",", "',' or ')'")
            elts = [first]
            while not self.at_op(")"):
                elts.append(self.parse_expr())
                if not self.accept_op(","):
                    break
            self.expect_op(")", "',' or ')' in the tuple")
            return TupleExpr(t.pos, elts)
        if self.at_op("["):
            self.next()
            if self.accept_op("]"):
                return ListExpr(t.pos, [])
            first = self.parse_expr()
            if self.at_kw("for"):
                # [Block(dim) for _ in range(depth)]
                self.next()
                var = self.expect_ident("a loop variable after 'for'")
                if not self.at_kw("in"):
                    self.error("'in'")
                self.next()
                r = self.expect_ident("range(...)")
                if r.value != "range":
                    raise DpError(r.pos, f"expected range(...), got '{r.value}'")
                call = self.parse_call(Name(r.pos, "range"))
                if call.kwargs or not 1 <= len(call.args) <= 3:
                    raise DpError(r.pos, "range takes 1 to 3 positional integer arguments")
                self.expect_op("]", "']' to close the list comprehension")
                return ListComp(t.pos, first, var.value, call.args)
            elts = [first]
            while self.accept_op(","):
                if self.at_op("]"):
                    break
                elts.append(self.parse_expr())
            self.expect_op("]", "',' or ']' in the list")
            return ListExpr(t.pos, elts)
        self.error("an expression")


def _register_member(e: Call) -> Node:
    """register_buffer("name", value, persistent=...) is `name = Buffer(value, ...)`;
    register_parameter("name", Parameter(value)) is `name = Parameter(value)`."""
    what = e.func.id
    if not e.args or not isinstance(e.args[0], Const) or not isinstance(e.args[0].value, str):
        raise DpError(e.pos, f"{what} takes the name as a string first: {what}(\"name\", ...)")
    name = e.args[0].value
    if what == "register_buffer":
        return Member(e.pos, name, Call(e.pos, Name(e.func.pos, "Buffer"), list(e.args[1:]), list(e.kwargs)))
    if len(e.args) != 2 or e.kwargs:
        raise DpError(e.pos, "register_parameter takes a name and a Parameter(...)")
    v = e.args[1]
    if not (isinstance(v, Call) and isinstance(v.func, Name) and v.func.id == "Parameter"):
        raise DpError(v.pos, "register_parameter takes a Parameter(...) value")
    return Member(e.pos, name, v)


def parse_source(src: Source) -> list[Node]:
    return Parser(src).parse_file()


# ===========================================================================
# Scalar arithmetic (constructor arguments, dims, and scalar forward values)
# ===========================================================================

def _type_name(v) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "None"
    if isinstance(v, tuple):
        return "tuple"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "dict"
    if _is_class(v):
        return "module class"
    if isinstance(v, torch.Tensor):
        return "tensor"
    if isinstance(v, nn.Module):
        return f"module {type(v).__name__}"
    return type(v).__name__


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# Python's builtins on constructor values (torchvision's _make_divisible inline).
PY_BUILTINS = {"max": max, "min": min, "abs": abs, "int": int, "float": float, "round": round, "len": len}

def scalar_arith(op: str, a, b, pos: Pos):
    """`a op b` on Python numbers, with the language's integer rules:
    `/` on two ints must divide exactly (result int); `//` floors."""
    if not (_is_num(a) and _is_num(b)):
        raise DpError(pos, f"unsupported operand types for {op}: {_type_name(a)} and {_type_name(b)}")
    both_int = isinstance(a, int) and isinstance(b, int)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "//", "%") and b == 0:
        raise DpError(pos, "division by zero")
    if op == "/":
        if both_int:
            if a % b != 0:
                raise DpError(pos, f"integer division {a} / {b} is not exact (use // to floor)")
            return a // b
        return a / b
    if op == "//":
        return a // b
    if op == "%":
        return a % b  # floors, as //
    if op == "**":
        if a == 0 and b < 0:
            raise DpError(pos, "division by zero")
        return a ** b
    raise DpError(pos, f"operator {op} needs tensors, got {_type_name(a)} and {_type_name(b)}")


# ===========================================================================
# Builtin modules: torch.nn classes, their argument names and defaults
# ===========================================================================

REQUIRED = object()  # marker: argument has no default


def _layer_norm_module(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True):
    # torch 1.13 has no `bias=` (added in 2.1); emulate it: 2.x registers the
    # bias as None, which drops the key from state_dict and is not printed.
    m = nn.LayerNorm(normalized_shape, eps=eps, elementwise_affine=elementwise_affine)
    if elementwise_affine and not bias:
        m.register_parameter("bias", None)
    return m


def _no_return_indices(kw):
    if kw.get("return_indices"):
        raise ValueError("return_indices=True is not supported (forward would return a tuple)")
    return kw


# models.md group 8: torchvision's StochasticDepth and Permute, HF's Conv1D
# (tests/ref/hf_models.py, checked against transformers 4.30.2), imported
# when a model uses them.
def _stochastic_depth(p, mode):
    import torchvision.ops
    return torchvision.ops.StochasticDepth(p, mode)


def _permute(dims):
    import torchvision.ops.misc
    return torchvision.ops.misc.Permute(list(dims))


def _hf_conv1d(nf, nx):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hf_models
    return hf_models.Conv1D(nf, nx)


def _no_return_indices_adaptive(output_size, return_indices=False):
    if return_indices:
        raise ValueError("return_indices=True is not supported (forward would return a tuple)")
    return nn.AdaptiveMaxPool2d(output_size)


def _mha(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
         kdim=None, vdim=None, batch_first=False):
    if add_bias_kv or add_zero_attn:
        raise ValueError("add_bias_kv and add_zero_attn are not supported")
    if kdim not in (None, embed_dim) or vdim not in (None, embed_dim):
        raise ValueError("kdim/vdim different from embed_dim are not supported")
    return nn.MultiheadAttention(embed_dim, num_heads, dropout=dropout, bias=bias,
                                 batch_first=batch_first)


# name -> (factory, [(arg name, default or REQUIRED), ...]).  The lists are
# torch's own positional order, so positional arguments bind as in Python.
BUILTIN_MODULES = {
    "Linear": (nn.Linear, [("in_features", REQUIRED), ("out_features", REQUIRED), ("bias", True)]),
    "Conv2d": (nn.Conv2d, [("in_channels", REQUIRED), ("out_channels", REQUIRED),
                           ("kernel_size", REQUIRED), ("stride", 1), ("padding", 0),
                           ("dilation", 1), ("groups", 1), ("bias", True),
                           ("padding_mode", "zeros")]),
    "Conv1d": (nn.Conv1d, [("in_channels", REQUIRED), ("out_channels", REQUIRED),
                           ("kernel_size", REQUIRED), ("stride", 1), ("padding", 0),
                           ("dilation", 1), ("groups", 1), ("bias", True),
                           ("padding_mode", "zeros")]),
    "MaxPool2d": (lambda **kw: nn.MaxPool2d(**_no_return_indices(kw)),
                  [("kernel_size", REQUIRED), ("stride", None), ("padding", 0), ("dilation", 1),
                   ("return_indices", False), ("ceil_mode", False)]),
    "AvgPool2d": (nn.AvgPool2d, [("kernel_size", REQUIRED), ("stride", None), ("padding", 0),
                                 ("ceil_mode", False), ("count_include_pad", True),
                                 ("divisor_override", None)]),
    "AdaptiveAvgPool2d": (nn.AdaptiveAvgPool2d, [("output_size", REQUIRED)]),
    "BatchNorm2d": (nn.BatchNorm2d, [("num_features", REQUIRED), ("eps", 1e-5), ("momentum", 0.1),
                                     ("affine", True), ("track_running_stats", True)]),
    "LayerNorm": (_layer_norm_module, [("normalized_shape", REQUIRED), ("eps", 1e-5),
                                       ("elementwise_affine", True), ("bias", True)]),
    "Embedding": (nn.Embedding, [("num_embeddings", REQUIRED), ("embedding_dim", REQUIRED),
                                 ("padding_idx", None), ("max_norm", None), ("norm_type", 2.0),
                                 ("scale_grad_by_freq", False), ("sparse", False)]),
    "Dropout": (nn.Dropout, [("p", 0.5), ("inplace", False)]),
    "Dropout2d": (nn.Dropout2d, [("p", 0.5), ("inplace", False)]),
    "ReLU": (nn.ReLU, [("inplace", False)]),
    "GELU": (nn.GELU, [("approximate", "none")]),
    "SiLU": (nn.SiLU, [("inplace", False)]),
    "Sigmoid": (nn.Sigmoid, []),
    "Tanh": (nn.Tanh, []),
    "Softmax": (nn.Softmax, [("dim", None)]),
    "Flatten": (nn.Flatten, [("start_dim", 1), ("end_dim", -1)]),
    # models.md group 8
    "ReLU6": (nn.ReLU6, [("inplace", False)]),
    "Hardtanh": (nn.Hardtanh, [("min_val", -1.0), ("max_val", 1.0), ("inplace", False)]),
    "Hardswish": (nn.Hardswish, [("inplace", False)]),
    "Hardsigmoid": (nn.Hardsigmoid, [("inplace", False)]),
    "LeakyReLU": (nn.LeakyReLU, [("negative_slope", 0.01), ("inplace", False)]),
    "Mish": (nn.Mish, [("inplace", False)]),
    "BatchNorm1d": (nn.BatchNorm1d, [("num_features", REQUIRED), ("eps", 1e-5), ("momentum", 0.1),
                                     ("affine", True), ("track_running_stats", True)]),
    "GroupNorm": (nn.GroupNorm, [("num_groups", REQUIRED), ("num_channels", REQUIRED), ("eps", 1e-5),
                                 ("affine", True)]),
    "AdaptiveMaxPool2d": (_no_return_indices_adaptive, [("output_size", REQUIRED), ("return_indices", False)]),
    "StochasticDepth": (_stochastic_depth, [("p", REQUIRED), ("mode", REQUIRED)]),
    "Permute": (_permute, [("dims", REQUIRED)]),
    "Conv1D": (_hf_conv1d, [("nf", REQUIRED), ("nx", REQUIRED)]),
    "MultiheadAttention": (_mha, [("embed_dim", REQUIRED), ("num_heads", REQUIRED), ("dropout", 0.0),
                                  ("bias", True), ("add_bias_kv", False), ("add_zero_attn", False),
                                  ("kdim", None), ("vdim", None), ("batch_first", False)]),
    "ConvTranspose2d": (nn.ConvTranspose2d, [("in_channels", REQUIRED), ("out_channels", REQUIRED),
                                             ("kernel_size", REQUIRED), ("stride", 1), ("padding", 0),
                                             ("output_padding", 0), ("groups", 1), ("bias", True),
                                             ("dilation", 1), ("padding_mode", "zeros")]),
    "Upsample": (nn.Upsample, [("size", None), ("scale_factor", None), ("mode", "nearest"),
                               ("align_corners", None), ("recompute_scale_factor", None)]),
    # Identity, Sequential and ModuleList take free-form arguments; see _build_builtin.
    "Identity": (nn.Identity, None),
    "Sequential": (nn.Sequential, None),
    "ModuleList": (nn.ModuleList, None),
}


def bind_args(what: str, sig, args, kwargs, pos: Pos) -> dict:
    """Bind positional and keyword arguments to a signature, like Python.

    `args` is a list of values, `kwargs` a list of (name, value, pos).
    """
    names = [n for n, _ in sig]
    if len(args) > len(sig):
        raise DpError(pos, f"{what} takes at most {len(sig)} positional argument"
                           f"{'s' if len(sig) != 1 else ''}, got {len(args)}")
    bound = dict(zip(names, args))
    for name, value, kpos in kwargs:
        if name not in names:
            hint = _suggest(name, names)
            allowed = ", ".join(names) if names else "none"
            raise DpError(kpos, f"{what} has no argument '{name}'{hint}; arguments: {allowed}")
        if name in bound:
            raise DpError(kpos, f"{what} got several values for argument '{name}'")
        bound[name] = value
    for name, default in sig:
        if name not in bound:
            if default is REQUIRED:
                raise DpError(pos, f"{what} is missing required argument '{name}'")
            bound[name] = default
    return bound


# ===========================================================================
# Builtin functions (forward only)
# ===========================================================================

def _as_int_list(what, v, pos):
    if isinstance(v, (list, tuple)):
        out = list(v)
    else:
        out = [v]
    for d in out:
        if not isinstance(d, int) or isinstance(d, bool):
            raise DpError(pos, f"{what} expects integers, got {_type_name(d)}")
    return out


def _dims_arg(what, v, pos):
    """A reduction dim: int, list/tuple of ints, or None (all dims)."""
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        return tuple(_as_int_list(what, v, pos))
    return _as_int_list(what, v, pos)[0]


def _shape_args(what, a, pos):
    """reshape/permute take `dims...` or one list/tuple of dims."""
    rest = a["*"]
    if len(rest) == 1 and isinstance(rest[0], (list, tuple)):
        rest = list(rest[0])
    return _as_int_list(what, rest, pos)


def _unary(fn):
    """A pointwise function that also accepts a Python number."""
    def impl(a, pos):
        x = a["input"]
        if _is_num(x):
            return float(fn(torch.tensor(float(x), dtype=torch.float64)).item())
        return fn(x)
    return impl


def _reduce(fn, what):
    def impl(a, pos):
        x = a["input"]
        dim = _dims_arg(what, a["dim"], pos)
        keepdim = bool(a["keepdim"])
        if dim is None:
            dim = tuple(range(x.dim()))
        return fn(x, dim, keepdim)
    return impl


def _layer_norm(a, pos):
    shape = _as_int_list("layer_norm normalized_shape", a["normalized_shape"], pos)
    return F.layer_norm(a["input"], shape, a["weight"], a["bias"], a["eps"])


def _squeeze(a, pos):
    x, d = a["input"], a["dim"]
    if d is None:
        return torch.squeeze(x)
    for k in sorted((d if isinstance(d, (list, tuple)) else [d]), key=lambda k: k % x.dim(), reverse=True):
        x = torch.squeeze(x, k % a["input"].dim())
    return x


def _cat(a, pos):
    ts = a["tensors"]
    if not isinstance(ts, (list, tuple)) or not ts:
        raise DpError(pos, f"cat expects a non-empty list of tensors, got {_type_name(ts)}")
    return torch.cat(list(ts), dim=a["dim"])


# name -> (signature or None for variadic "(input, dims...)", implementation,
#          names of arguments that must be tensors)
BUILTIN_FUNCTIONS = {
    "relu": ([("input", REQUIRED)], _unary(F.relu), ()),
    "gelu": ([("input", REQUIRED), ("approximate", "none")],
             lambda a, p: (_unary(lambda t: F.gelu(t, approximate=a["approximate"]))(a, p)), ()),
    "silu": ([("input", REQUIRED)], _unary(F.silu), ()),
    "sigmoid": ([("input", REQUIRED)], _unary(torch.sigmoid), ()),
    "tanh": ([("input", REQUIRED)], _unary(torch.tanh), ()),
    "exp": ([("input", REQUIRED)], _unary(torch.exp), ()),
    "log": ([("input", REQUIRED)], _unary(torch.log), ()),
    "sqrt": ([("input", REQUIRED)], _unary(torch.sqrt), ()),
    "abs": ([("input", REQUIRED)], _unary(torch.abs), ()),
    "sin": ([("input", REQUIRED)], _unary(torch.sin), ()),
    # dtype: F.softmax's, the input converted to it first
    "softmax": ([("input", REQUIRED), ("dim", REQUIRED), ("dtype", None)],
                lambda a, p: F.softmax(a["input"], dim=a["dim"], dtype=_dtype_arg(a["dtype"], p)), ("input",)),
    "log_softmax": ([("input", REQUIRED), ("dim", REQUIRED), ("dtype", None)],
                    lambda a, p: F.log_softmax(a["input"], dim=a["dim"], dtype=_dtype_arg(a["dtype"], p)),
                    ("input",)),
    "flatten": ([("input", REQUIRED), ("start_dim", 0), ("end_dim", -1)],
                lambda a, p: torch.flatten(a["input"], a["start_dim"], a["end_dim"]), ("input",)),
    "reshape": (None, lambda a, p: torch.reshape(a["input"], _shape_args("reshape", a, p)), ("input",)),
    "permute": (None, lambda a, p: a["input"].permute(*_shape_args("permute", a, p)), ("input",)),
    "transpose": ([("input", REQUIRED), ("dim0", REQUIRED), ("dim1", REQUIRED)],
                  lambda a, p: torch.transpose(a["input"], a["dim0"], a["dim1"]), ("input",)),
    "matmul": ([("input", REQUIRED), ("other", REQUIRED)],
               lambda a, p: torch.matmul(a["input"], a["other"]), ("input", "other")),
    "cat": ([("tensors", REQUIRED), ("dim", 0)], _cat, ()),
    "mean": ([("input", REQUIRED), ("dim", None), ("keepdim", False)],
             _reduce(lambda x, d, k: torch.mean(x, d, k), "mean"), ("input",)),
    "sum": ([("input", REQUIRED), ("dim", None), ("keepdim", False)],
            _reduce(lambda x, d, k: torch.sum(x, d, k), "sum"), ("input",)),
    "amax": ([("input", REQUIRED), ("dim", None), ("keepdim", False)],
             _reduce(lambda x, d, k: torch.amax(x, d, k), "amax"), ("input",)),
    "layer_norm": ([("input", REQUIRED), ("normalized_shape", REQUIRED), ("weight", None),
                    ("bias", None), ("eps", 1e-5)], _layer_norm, ("input",)),
    "dropout": ([("input", REQUIRED), ("p", 0.5)],
                lambda a, p: F.dropout(a["input"], a["p"], training=False), ("input",)),
    # indexing and shape functions (W1)
    "view": (None, lambda a, p: a["input"].view(_shape_args("view", a, p)), ("input",)),
    "size": ([("input", REQUIRED), ("dim", None)],
             lambda a, p: tuple(int(d) for d in a["input"].size()) if a["dim"] is None
             else int(a["input"].size(a["dim"])), ("input",)),
    "dim": ([("input", REQUIRED)], lambda a, p: a["input"].dim(), ("input",)),
    "unsqueeze": ([("input", REQUIRED), ("dim", REQUIRED)],
                  lambda a, p: torch.unsqueeze(a["input"], a["dim"]), ("input",)),
    "squeeze": ([("input", REQUIRED), ("dim", None)], _squeeze, ("input",)),
    "expand": (None, lambda a, p: a["input"].expand(*_shape_args("expand", a, p)), ("input",)),
    "expand_as": ([("input", REQUIRED), ("other", REQUIRED)],
                  lambda a, p: a["input"].expand_as(a["other"]), ("input", "other")),
    "contiguous": ([("input", REQUIRED)], lambda a, p: a["input"].contiguous(), ("input",)),
    "split": ([("tensor", REQUIRED), ("split_size_or_sections", REQUIRED), ("dim", 0)],
              lambda a, p: tuple(torch.split(a["tensor"], a["split_size_or_sections"], a["dim"])), ("tensor",)),
    "chunk": ([("input", REQUIRED), ("chunks", REQUIRED), ("dim", 0)],
              lambda a, p: tuple(torch.chunk(a["input"], a["chunks"], a["dim"])), ("input",)),
    "t": ([("input", REQUIRED)], lambda a, p: torch.t(a["input"]), ("input",)),
    "adaptive_avg_pool2d": ([("input", REQUIRED), ("output_size", REQUIRED)],
                            lambda a, p: F.adaptive_avg_pool2d(a["input"], a["output_size"]), ("input",)),
    "pow": ([("input", REQUIRED), ("exponent", REQUIRED)],
            lambda a, p: torch.pow(a["input"], a["exponent"]), ()),
    "interpolate": ([("input", REQUIRED), ("size", None), ("scale_factor", None), ("mode", "nearest"),
                     ("align_corners", None), ("recompute_scale_factor", None), ("antialias", False)],
                    lambda a, p: F.interpolate(a["input"], size=a["size"], scale_factor=a["scale_factor"],
                                               mode=a["mode"], align_corners=a["align_corners"],
                                               recompute_scale_factor=a["recompute_scale_factor"],
                                               antialias=a["antialias"]), ("input",)),
    "clamp": ([("input", REQUIRED), ("min", None), ("max", None)],
              lambda a, p: torch.clamp(a["input"], a["min"], a["max"]), ("input",)),
    "clamp_min": ([("input", REQUIRED), ("min", REQUIRED)],
                  lambda a, p: torch.clamp_min(a["input"], a["min"]), ("input",)),
    "clamp_max": ([("input", REQUIRED), ("max", REQUIRED)],
                  lambda a, p: torch.clamp_max(a["input"], a["max"]), ("input",)),
    "erf": ([("input", REQUIRED)], _unary(torch.erf), ()),
    "rsqrt": ([("input", REQUIRED)], _unary(torch.rsqrt), ()),
    "neg": ([("input", REQUIRED)], _unary(torch.neg), ()),
    # models.md group 8 (inplace is dropped: in-place ops would overwrite a value the model reads again)
    "relu6": ([("input", REQUIRED), ("inplace", False)], lambda a, p: F.relu6(a["input"]), ("input",)),
    "hardswish": ([("input", REQUIRED), ("inplace", False)], lambda a, p: F.hardswish(a["input"]), ("input",)),
    "hardsigmoid": ([("input", REQUIRED), ("inplace", False)],
                    lambda a, p: F.hardsigmoid(a["input"]), ("input",)),
    "mish": ([("input", REQUIRED), ("inplace", False)], lambda a, p: F.mish(a["input"]), ("input",)),
    "leaky_relu": ([("input", REQUIRED), ("negative_slope", 0.01), ("inplace", False)],
                   lambda a, p: F.leaky_relu(a["input"], a["negative_slope"]), ("input",)),
    "hardtanh": ([("input", REQUIRED), ("min_val", -1.0), ("max_val", 1.0), ("inplace", False)],
                 lambda a, p: F.hardtanh(a["input"], a["min_val"], a["max_val"]), ("input",)),
    "group_norm": ([("input", REQUIRED), ("num_groups", REQUIRED), ("weight", None), ("bias", None),
                    ("eps", 1e-5)],
                   lambda a, p: F.group_norm(a["input"], a["num_groups"], a["weight"], a["bias"], a["eps"]),
                   ("input",)),
}


# ---- masks, bool, tensors created in forward, attention ------------------
# Written from PyTorch's documented semantics, not from dpc's lowering.

FLOAT = torch.float64  # the compute dtype (torch_run sets it): what float32 means in forward

DTYPE_VALUES = {
    "float32": lambda: FLOAT, "float": lambda: FLOAT,
    "int64": lambda: torch.int64, "long": lambda: torch.int64, "bool": lambda: torch.bool,
}


def _dtype_arg(v, pos, what="dtype"):
    if v is None or isinstance(v, torch.dtype):
        return v
    raise DpError(pos, f"{what} must be a dtype, got {_type_name(v)}")


def _sizes(a, pos):
    dims = a["*"]
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = list(dims[0])
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise DpError(pos, f"sizes must be ints, got {_type_name(d)}")
    return dims


def _float_fn(a, pos):
    x = a["input"]
    if isinstance(x, str):
        return float(x)
    if _is_num(x) or isinstance(x, bool):
        return float(x)
    return x.to(FLOAT)


def _sdpa_reference(a, pos):
    """F.scaled_dot_product_attention of PyTorch 2.x, by hand (1.13 has none)."""
    q, k, v, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    if a["dropout_p"] != 0:
        raise DpError(pos, "dropout_p must be 0")
    scale = a["scale"] if a["scale"] is not None else 1.0 / math.sqrt(q.shape[-1])
    w = torch.matmul(q, k.transpose(-2, -1)) * scale
    L, S = q.shape[-2], k.shape[-2]
    if a["is_causal"]:
        keep = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)
        w = w.masked_fill(~keep, float("-inf"))
    if mask is not None:
        w = w.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else w + mask
    return torch.matmul(torch.softmax(w, dim=-1), v)


def _arange(a, pos):
    dt = _dtype_arg(a.get("dtype"), pos)
    if dt is not None:
        return torch.arange(*a["*"], dtype=dt)
    r = torch.arange(*a["*"])
    return r.to(FLOAT) if r.is_floating_point() else r


def _like_dtype(a, pos):
    return _dtype_arg(a["dtype"], pos) or a["input"].dtype


MASK_FUNCTIONS = {
    "where": ([("condition", REQUIRED), ("input", REQUIRED), ("other", REQUIRED)],
              lambda a, p: torch.where(a["condition"], a["input"], a["other"]) if all(
                  isinstance(a[n], torch.Tensor) for n in ("input", "other")) else torch.where(
                  a["condition"], torch.as_tensor(a["input"], dtype=_where_dtype(a)),
                  torch.as_tensor(a["other"], dtype=_where_dtype(a))), ("condition",)),
    "masked_fill": ([("input", REQUIRED), ("mask", REQUIRED), ("value", REQUIRED)],
                    lambda a, p: a["input"].masked_fill(a["mask"], a["value"]), ("input", "mask")),
    "logical_and": ([("input", REQUIRED), ("other", REQUIRED)],
                    lambda a, p: torch.logical_and(a["input"], a["other"]), ("input", "other")),
    "logical_or": ([("input", REQUIRED), ("other", REQUIRED)],
                   lambda a, p: torch.logical_or(a["input"], a["other"]), ("input", "other")),
    "logical_not": ([("input", REQUIRED)], lambda a, p: torch.logical_not(a["input"]), ("input",)),
    "to": ([("input", REQUIRED), ("dtype", REQUIRED)],
           lambda a, p: a["input"].to(a["dtype"].dtype if isinstance(a["dtype"], torch.Tensor)
                                      else _dtype_arg(a["dtype"], p)), ("input",)),
    "float": ([("input", REQUIRED)], _float_fn, ()),
    "long": ([("input", REQUIRED)], lambda a, p: a["input"].long(), ("input",)),
    "bool": ([("input", REQUIRED)], lambda a, p: a["input"].bool() if isinstance(a["input"], torch.Tensor)
             else bool(a["input"]), ()),
    "int": ([("input", REQUIRED)], lambda a, p: int(a["input"]), ()),
    "type_as": ([("input", REQUIRED), ("other", REQUIRED)],
                lambda a, p: a["input"].type_as(a["other"]), ("input", "other")),
    "finfo": ([("type", REQUIRED)], lambda a, p: torch.finfo(torch.float32), ()),
    "arange": ("creation", lambda a, p: _arange(a, p), ()),
    "ones": ("creation", lambda a, p: torch.ones(_sizes(a, p), dtype=_dtype_arg(a.get("dtype"), p) or FLOAT), ()),
    "zeros": ("creation", lambda a, p: torch.zeros(_sizes(a, p), dtype=_dtype_arg(a.get("dtype"), p) or FLOAT), ()),
    "full": ([("size", REQUIRED), ("fill_value", REQUIRED), ("dtype", None)],
             lambda a, p: torch.full(tuple(a["size"]) if isinstance(a["size"], (tuple, list)) else (a["size"],),
                                     a["fill_value"], dtype=_dtype_arg(a["dtype"], p) or (
                                         FLOAT if isinstance(a["fill_value"], float) else None)), ()),
    "ones_like": ([("input", REQUIRED), ("dtype", None)],
                  lambda a, p: torch.ones_like(a["input"], dtype=_like_dtype(a, p)), ("input",)),
    "zeros_like": ([("input", REQUIRED), ("dtype", None)],
                   lambda a, p: torch.zeros_like(a["input"], dtype=_like_dtype(a, p)), ("input",)),
    "full_like": ([("input", REQUIRED), ("fill_value", REQUIRED), ("dtype", None)],
                  lambda a, p: torch.full_like(a["input"], a["fill_value"], dtype=_like_dtype(a, p)), ("input",)),
    "tril": ([("input", REQUIRED), ("diagonal", 0)], lambda a, p: torch.tril(a["input"], a["diagonal"]), ("input",)),
    "triu": ([("input", REQUIRED), ("diagonal", 0)], lambda a, p: torch.triu(a["input"], a["diagonal"]), ("input",)),
    "scaled_dot_product_attention": (
        [("query", REQUIRED), ("key", REQUIRED), ("value", REQUIRED), ("attn_mask", None), ("dropout_p", 0.0),
         ("is_causal", False), ("scale", None)], _sdpa_reference, ("query", "key", "value")),
}


def _where_dtype(a):
    ts = [a[n] for n in ("input", "other") if isinstance(a[n], torch.Tensor)]
    if ts:
        return ts[0].dtype
    if any(isinstance(a[n], float) for n in ("input", "other")):
        return FLOAT
    return torch.int64


BUILTIN_FUNCTIONS.update(MASK_FUNCTIONS)


# ===========================================================================
# Program: files, imports, module table, static checks
# ===========================================================================

class Program:
    """All modules reachable from one main `.dp` file."""

    def __init__(self, path: str):
        self.modules: dict[str, ModuleDef] = {}
        self.main_modules: list[ModuleDef] = []  # defined in the main file, in order
        self.all_modules: list[ModuleDef] = []   # every definition, in load order
        self.model_line: ModelLine | None = None
        self._loaded: set[str] = set()
        self._load(path, is_main=True, at=None)
        if not self.all_modules:
            raise DpError(None, f"{path}: no module defined")
        for mdef in self.all_modules:
            check_module(self, mdef)

    def _load(self, path: str, is_main: bool, at: Pos | None):
        real = os.path.realpath(path)
        if real in self._loaded:
            return  # each file is loaded once (diamond or circular imports)
        self._loaded.add(real)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise DpError(at, f"cannot read '{path}': {e.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DpError(at, f"'{path}' is not UTF-8 text (byte {e.start})") from None
        src = Source(path, text)
        for item in parse_source(src):
            if isinstance(item, Import):
                target = os.path.join(os.path.dirname(path), item.path)
                self._load(target, is_main=False, at=item.pos)
            elif isinstance(item, ModuleDef):
                if item.name in BUILTIN_MODULES or item.name == "DataParallel":
                    raise DpError(item.pos, f"module {item.name} redefines a builtin module")
                if item.name in self.modules:
                    prev = self.modules[item.name].pos
                    raise DpError(item.pos, f"module {item.name} is already defined at "
                                            f"{prev.src.path}:{prev.line}:{prev.col}")
                self.modules[item.name] = item
                self.all_modules.append(item)
                if is_main:
                    self.main_modules.append(item)
            elif isinstance(item, ModelLine):
                if not is_main:
                    continue  # an imported file's model line is not the entry
                if self.model_line is not None:
                    raise DpError(item.pos, "the model is already defined at line "
                                            f"{self.model_line.pos.line}")
                self.model_line = item

    def entry_expr(self) -> tuple[Node, Pos]:
        """The entry expression: the `model = ...` line, else `Last()`."""
        if self.model_line is not None:
            return self.model_line.value, self.model_line.pos
        last = self.main_modules[-1] if self.main_modules else self.all_modules[-1]
        return Call(last.pos, Name(last.pos, last.name), [], []), last.pos


def _children(e: Node):
    """The sub-expressions of an expression node."""
    if isinstance(e, (TupleExpr, ListExpr)):
        return list(e.elts)
    if isinstance(e, ListComp):
        return [e.elt] + list(e.range_args)
    if isinstance(e, DictComp):
        return [e.key, e.value] + list(e.range_args)
    if isinstance(e, DictExpr):
        return [x for kv in e.items for x in kv]
    if isinstance(e, (Unary, Not)):
        return [e.operand]
    if isinstance(e, Binary):
        return [e.left, e.right]
    if isinstance(e, Cond):
        return [e.cond, e.then, e.other]
    if isinstance(e, Call):
        return [e.func] + list(e.args) + [x for _, x, _ in e.kwargs]
    if isinstance(e, Index):
        return [e.value, e.index]
    if isinstance(e, (Attr, Starred)):
        return [e.value]
    if isinstance(e, Subscript):
        return [e.value] + list(e.items)
    if isinstance(e, Slice):
        return [x for x in (e.start, e.stop, e.step) if x is not None]
    return []


def _walk_expr(e: Node):
    """Yield every node of an expression tree."""
    yield e
    for x in _children(e):
        yield from _walk_expr(x)


def _body_names(items) -> set:
    """Every name a module body assigns (members, constants), in any branch."""
    out = set()
    for it in items:
        if isinstance(it, Member):
            out.add(it.name)
        elif isinstance(it, MemberIf):
            out |= _body_names(it.then) | _body_names(it.orelse)
    return out


def _tensor_member_names(items) -> set:
    """The Parameter / Buffer members: a forward parameter may shadow one."""
    out = set()
    for it in items:
        if (isinstance(it, Member) and isinstance(it.value, Call) and isinstance(it.value.func, Name)
                and it.value.func.id in ("Parameter", "Buffer")):
            out.add(it.name)
        elif isinstance(it, MemberIf):
            out |= _tensor_member_names(it.then) | _tensor_member_names(it.orelse)
    return out


def _ends_with_return(body) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, Return):
        return True
    # an if: whether the branch taken returns is known when building (as dpc)
    return isinstance(last, If)


def check_module(prog: Program, m: ModuleDef):
    """Static checks of one module definition: duplicate names, unknown names.

    What depends on constructor values (a member defined in two taken
    branches, the type of a parameter) is checked while building; runtime
    (shape, type) errors while building and running.
    """
    ctor = {}
    seen_default = False
    for p in m.params:
        if p.name in ctor:
            raise DpError(p.pos, f"duplicate parameter '{p.name}'")
        if p.default is None and seen_default:
            raise DpError(p.pos, f"parameter '{p.name}' without a default follows one with a default")
        seen_default = seen_default or p.default is not None
        ctor[p.name] = p
    if m.base is not None and m.base.value != "Sequential":
        if m.base.value not in BUILTIN_MODULES or m.base.value in ("ModuleList", "Identity"):
            raise DpError(m.base.pos, f"a module can extend only Sequential or a builtin module, "
                                      f"not '{m.base.value}'")
        if m.params:
            raise DpError(m.params[0].pos, f"module {m.name} extends {m.base.value}: it takes "
                                           f"{m.base.value}'s constructor arguments, not its own")
        if m.members:
            raise DpError(m.members[0].pos, f"module {m.name} extends {m.base.value}: its body "
                                            f"is only a forward")
    if m.base is not None and m.base.value == "Sequential" and m.forward is not None:
        raise DpError(m.forward.pos, f"module {m.name} extends Sequential, which runs its entries "
                                     f"in order: it has no forward")
    module_names = set(prog.modules) | set(BUILTIN_MODULES)
    members = _body_names(m.members)  # members and constants
    tensor_members = _tensor_member_names(m.members)
    if m.base is not None and m.base.value != "Sequential":
        members |= _builtin_attr_names(m.base.value)

    def check_items(items):
        for it in items:
            if isinstance(it, Member):
                _check_ctor_expr(it.value, set(ctor) | members, module_names)
            elif isinstance(it, Entry):
                if m.base is None:
                    raise DpError(it.pos, f"a bare module in a module body is an entry of a "
                                          f"Sequential subclass ('module {m.name}(...) extends "
                                          f"Sequential'); here write 'name = ...'")
                _check_ctor_expr(it.value, set(ctor) | members, module_names)
            elif isinstance(it, MemberIf):
                _check_ctor_expr(it.cond, set(ctor) | members, module_names)
                check_items(it.then)
                check_items(it.orelse)
    check_items(m.members)

    f = m.forward
    if f is None:
        return  # a module without forward is fine until someone calls it
    scope = set()          # names defined so far in forward
    batch_names = set()
    free_dims = set()      # x: [N, C, H, W]: C, H and W take the caller's sizes
    known = set(ctor) | members
    seen_default = False
    for p in f.params:
        if p.name in scope:
            raise DpError(p.pos, f"duplicate parameter '{p.name}'")
        if (p.name in members and p.name not in tensor_members) or p.name in ctor:
            raise DpError(p.pos, f"forward parameter '{p.name}' has the name of a "
                                 f"{'member' if p.name in members else 'constructor parameter'}")
        if isinstance(p, TensorParam):
            if seen_default:
                raise DpError(p.pos, f"tensor parameter '{p.name}' follows a parameter with a default")
            b = p.dims[0]
            if not isinstance(b, Name):
                raise DpError(b.pos, "the first dim of a tensor parameter is the batch dim: "
                                     "a fresh name such as N")
            if b.id in ctor or b.id in members:
                raise DpError(b.pos, f"batch dim '{b.id}' must be a fresh name, but it is a "
                                     f"{'constructor parameter' if b.id in ctor else 'member'}")
            batch_names.add(b.id)
            for d in p.dims[1:]:
                if isinstance(d, Name) and d.id not in known:
                    if d.id in batch_names:
                        raise DpError(d.pos, f"unknown name '{d.id}' in dims: the batch name may "
                                             f"only be the first dim")
                    free_dims.add(d.id)
                    continue
                for node in _walk_expr(d):
                    if isinstance(node, Name) and node.id not in known and node.id not in free_dims:
                        extra = (" (the batch name may only be the first dim)"
                                 if node.id in batch_names or node.id == b.id else
                                 _suggest(node.id, known))
                        raise DpError(node.pos, f"unknown name '{node.id}' in dims: dims after "
                                                f"the first are built from literals, constructor "
                                                f"parameters and names of dims{extra}")
                    if isinstance(node, (Call, Index, ListExpr, TupleExpr, ListComp)):
                        raise DpError(node.pos, "a dim is an integer expression")
        else:
            if p.default is None and seen_default:
                raise DpError(p.pos, f"parameter '{p.name}' without a default follows one with a default")
            seen_default = seen_default or p.default is not None
        scope.add(p.name)
    clash = batch_names & scope
    if clash:
        n = sorted(clash)[0]
        raise DpError(f.pos, f"batch name '{n}' is also a parameter name")
    scope |= batch_names | (free_dims - scope)
    # a local may take a member's name (HF: token_type_embeddings = self.token_type_embeddings(ids))
    protected = set(ctor) | batch_names

    def check_expr(e, callee=False):
        """Every name must be defined; builtin functions only as callees."""
        if isinstance(e, (ListComp, DictComp)):
            raise DpError(e.pos, "comprehensions are only allowed in module members")
        if isinstance(e, (FStr, DictExpr)):
            raise DpError(e.pos, f"{'f-strings are' if isinstance(e, FStr) else 'dicts are'} "
                                 f"only allowed in module members")
        if isinstance(e, Name):
            n = e.id
            if n in scope or n in members or n in ctor:
                return
            if n in DTYPE_VALUES and not callee:
                return
            if n in BUILTIN_FUNCTIONS:
                if not callee:
                    raise DpError(e.pos, f"{n} is a function; call it: {n}(...)")
                return
            if n in module_names:
                raise DpError(e.pos, f"{n} is a module type; declare it as a member "
                                     f"(name = {n}(...)) and call the member")
            known_f = scope | set(members) | set(ctor) | set(BUILTIN_FUNCTIONS)
            raise DpError(e.pos, f"unknown name '{n}'{_suggest(n, known_f)}")
        if isinstance(e, Call):
            check_expr(e.func, callee=True)
            for a in e.args:
                check_expr(a)
            for _, a, _ in e.kwargs:
                check_expr(a)
            return
        for x in _children(e):
            check_expr(x)

    def check_body(body):
        for st in body:
            if isinstance(st, Assign):
                check_expr(st.value)
                for name, tpos in st.targets:
                    if name in protected:
                        kind = ("member" if name in members else
                                "constructor parameter" if name in ctor else "batch size")
                        raise DpError(tpos, f"cannot assign to '{name}': it is a {kind}")
                    scope.add(name)
            elif isinstance(st, For):
                check_expr(st.iter)
                if st.var in protected:
                    raise DpError(st.pos, f"loop variable '{st.var}' shadows a member or parameter")
                scope.add(st.var)
                check_body(st.body)
            elif isinstance(st, If):
                check_expr(st.cond)
                check_body(st.body)
                check_body(st.orelse)
            elif isinstance(st, Return):
                for v in st.values:
                    check_expr(v)

    check_body(f.body)
    if not _ends_with_return(f.body):
        raise DpError(f.pos, f"forward of {m.name} must end with a return statement")


def _check_ctor_expr(e: Node, ctor_names: set, module_names: set):
    """Names in a member's constructor expression: constructor parameters,
    constants, comprehension variables, and module names (called, or as
    classes: norm_layer=BatchNorm2d)."""
    def walk(node, bound):
        if isinstance(node, (ListComp, DictComp)):
            for a in node.range_args:
                walk(a, bound)
            inner = bound | {node.var}
            if isinstance(node, ListComp):
                walk(node.elt, inner)
            else:
                walk(node.key, inner)
                walk(node.value, inner)
            return
        if isinstance(node, Call) and isinstance(node.func, Name) and node.func.id in TENSOR_MEMBER_KINDS:
            _check_tensor_expr(node, ctor_names | bound)
            return
        if isinstance(node, Call):
            if isinstance(node.func, Name):
                n = node.func.id
                if n == "DataParallel":
                    raise DpError(node.pos, "DataParallel wraps the entry model only "
                                            "(model = DataParallel(Name(...)))")
                if n not in module_names and n != "partial" and n not in ctor_names and n not in PY_BUILTINS:
                    what = ("a function; members are modules" if n in BUILTIN_FUNCTIONS else
                            "not a module" + _suggest(n, module_names))
                    raise DpError(node.func.pos, f"'{n}' is {what}")
            else:
                raise DpError(node.pos, "a member is built by calling a module by name")
            for a in node.args:
                walk(a, bound)
            for _, a, _ in node.kwargs:
                walk(a, bound)
            return
        if isinstance(node, Name):
            if node.id not in ctor_names and node.id not in bound and node.id not in module_names:
                raise DpError(node.pos, f"unknown name '{node.id}'"
                                        f"{_suggest(node.id, ctor_names | bound)}")
            return
        if isinstance(node, (Index, Subscript)):
            raise DpError(node.pos, "indexing is only allowed in forward")
        if isinstance(node, Attr):
            raise DpError(node.pos, f"'.{node.name}' is only allowed in forward")
        for x in _children(node):
            walk(x, bound)
    walk(e, set())


# ===========================================================================
# Module construction
# ===========================================================================

def _builtin_attr_names(base: str) -> set:
    """What forward of `module X extends <base>` may read: the builtin's
    constructor arguments and its usual attributes (weight, bias, ...)."""
    sig = BUILTIN_MODULES[base][1] or []
    return {n for n, _ in sig} | {"weight", "bias", "running_mean", "running_var", "eps", "momentum",
                                  "normalized_shape", "elementwise_affine", "in_features",
                                  "out_features", "in_channels", "out_channels", "kernel_size",
                                  "stride", "padding", "dilation", "groups", "num_features",
                                  "affine", "padding_mode", "p", "inplace", "num_embeddings",
                                  "embedding_dim", "padding_idx"}


# ---- Parameter / Buffer members (tensors created at construction) ----

TENSOR_MEMBER_KINDS = ("Parameter", "Buffer")
CT_CREATION = {"zeros", "ones", "empty", "randn", "rand", "full", "arange", "tensor",
               "zeros_like", "ones_like", "tril", "triu"}
CT_METHODS = {"normal_", "uniform_", "zero_", "fill_", "view", "reshape", "expand", "unsqueeze",
              "float", "long", "bool", "clone", "contiguous", "detach"}
CT_DTYPES = {"float32": torch.float32, "float": torch.float32, "int64": torch.int64,
             "long": torch.int64, "bool": torch.bool}


class TensorMember:
    """The value of `Parameter(...)` / `Buffer(..., persistent=...)`."""

    def __init__(self, kind, tensor, persistent=True):
        self.kind = kind
        self.tensor = tensor
        self.persistent = persistent


def _check_tensor_expr(e: Node, names: set):
    def walk(node):
        if isinstance(node, Name):
            if node.id not in names and node.id not in CT_DTYPES and node.id not in CT_CREATION:
                raise DpError(node.pos, f"unknown name '{node.id}'{_suggest(node.id, names)}")
            return
        if isinstance(node, Call):
            if isinstance(node.func, Attr):
                walk(node.func.value)
            elif isinstance(node.func, Name):
                if (node.func.id not in CT_CREATION and node.func.id not in TENSOR_MEMBER_KINDS
                        and node.func.id not in CT_METHODS and node.func.id not in PY_BUILTINS):
                    raise DpError(node.func.pos, f"'{node.func.id}' cannot make a Parameter or "
                                                 f"buffer value")
            for a in node.args:
                walk(a)
            for _, a, _ in node.kwargs:
                walk(a)
            return
        if isinstance(node, Attr):
            walk(node.value)
            return
        for x in _children(node):
            walk(x)
    for a in e.args:
        walk(a)
    for _, a, _ in e.kwargs:
        walk(a)


class DpModule(nn.Module):
    """Base class of every `.dp` user module.  A subclass is created per
    `.dp` module definition, named after it, so `repr` shows that name.

    Instance state (plain attributes, not registered children):
      _dp_def          the ModuleDef
      _dp_env          constructor parameter values, then the body's constants
      _dp_sig          forward signature with dims evaluated
      _dp_extra_repr   what `extra_repr = f"..."` gave ('' without one)
    Children live in `self._modules` in member order; a None member is not
    one (PyTorch keeps `self.downsample = None` as a plain attribute).
    Constants (`use_res = stride == 1`) are also plain attributes where the
    name does not shadow an nn.Module attribute.
    """

    def forward(self, *args, **kwargs):
        return _Interpreter(self).call(args, kwargs)

    def extra_repr(self) -> str:
        return self.__dict__.get("_dp_extra_repr", "")


class DpExtends:
    """Mixin of `module X extends <builtin>`: the builtin's state and print,
    the .dp forward."""

    def forward(self, *args, **kwargs):
        return _Interpreter(self).call(args, kwargs)


class DpSequential(nn.Sequential):
    """Base class of `module X(...) extends Sequential { ... }`: an
    nn.Sequential subclass named X whose entries are the bare modules of its
    body ("0", "1", ...) and its named members, in source order."""

    def extra_repr(self) -> str:
        return self.__dict__.get("_dp_extra_repr", "")


class DpClass:
    """A module class as a value (norm_layer: Module = BatchNorm2d).  Calling
    it builds the module, like calling nn.BatchNorm2d; partial(BatchNorm2d,
    eps=0.001) is functools.partial over it."""

    def __init__(self, builder: "Builder", name: str):
        self.builder = builder
        self.name = name

    def __call__(self, *args, **kwargs):
        pos = self.builder.call_pos
        kw = [(k, v, pos) for k, v in kwargs.items()]
        return self.builder.construct_named(self.name, list(args), kw, pos, pos)

    def __repr__(self):
        return self.name


def _is_class(v) -> bool:
    return isinstance(v, DpClass) or (isinstance(v, functools.partial) and _is_class(v.func))


def _coerce_scalar(ptype: str, value, what: str, pos: Pos):
    """Check a scalar against a declared type; ints widen to float."""
    if ptype == "bool":
        if isinstance(value, bool):
            return value
    elif ptype == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif ptype == "float":
        if _is_num(value):
            return float(value)
    elif ptype == "str":
        if isinstance(value, str):
            return value
    elif ptype == "Module":
        if isinstance(value, nn.Module) or _is_class(value) or value is None:
            return value
        ptype = "a module, a module class or None"
    raise DpError(pos, f"{what} expects {ptype}, got {_type_name(value)}"
                       + (f" {value!r}" if _is_num(value) or isinstance(value, bool) else ""))


def compare_values(op: str, a, b, pos: Pos) -> bool:
    """==, !=, <, <=, >, >=, is, is not on values known when building
    (numbers, strings, None, modules, classes; no tensors)."""
    if op in ("is", "is not"):
        if a is None or b is None or (isinstance(a, bool) and isinstance(b, bool)) or \
                (isinstance(a, nn.Module) and isinstance(b, nn.Module)) or (_is_class(a) and _is_class(b)):
            return (a is b) == (op == "is")
        raise DpError(pos, f"'{op}' compares with None (or True, False): write '==' for "
                           f"{_type_name(a)} and {_type_name(b)}")
    nums = _is_num(a) or isinstance(a, bool), _is_num(b) or isinstance(b, bool)
    if op in ("==", "!="):
        if all(nums):
            eq = a == b
        elif type(a) is type(b) and isinstance(a, (str, tuple, type(None))):
            eq = a == b
        else:
            eq = a is b
        return eq == (op == "==")
    if not (all(nums) or (isinstance(a, str) and isinstance(b, str))
            or (isinstance(a, tuple) and isinstance(b, tuple))):
        raise DpError(pos, f"cannot compare {_type_name(a)} and {_type_name(b)} with '{op}'")
    try:
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    except TypeError:
        raise DpError(pos, f"cannot compare {_type_name(a)} and {_type_name(b)} with '{op}'") from None


def format_fstring(e: "FStr", lookup) -> str:
    """f"p={p}": each {name} shown as Python's f-string shows it;
    {{ and }} are braces.  lookup(name) -> (found, value)."""
    text, out, i = e.text, [], 0
    src, line, col = e.pos

    def at(k):
        return Pos(src, line, col + 2 + k)

    while i < len(text):
        c = text[i]
        if text.startswith("{{", i) or text.startswith("}}", i):
            out.append(c)
            i += 2
            continue
        if c == "}":
            raise DpError(at(i), "f-string: a single '}' is not allowed; write '}}' for a brace")
        if c != "{":
            out.append(c)
            i += 1
            continue
        j = text.find("}", i)
        if j < 0:
            raise DpError(at(i), "f-string: '{' without a closing '}'; write '{{' for a brace")
        name = text[i + 1:j]
        if not name.isidentifier() or not name.isascii():
            raise DpError(at(i), f"f-string: '{{{name}}}' is not a name; only {{name}} is supported "
                                 f"(a constructor parameter, a constant or a loop variable)")
        found, v = lookup(name)
        if not found:
            raise DpError(at(i), f"f-string: unknown name '{{{name}}}'")
        if isinstance(v, (nn.Module, list, dict)) or _is_class(v):
            raise DpError(at(i), f"f-string: '{{{name}}}' is a {_type_name(v)}")
        out.append(format(v))
        i = j + 1
    return "".join(out)


def _truth(v, pos: Pos) -> bool:
    if isinstance(v, torch.Tensor):
        raise DpError(pos, "this condition is a tensor: a condition in forward must be known when "
                           "compiling (constructor values, dims after the batch, members, None), "
                           "since one graph serves every input")
    return bool(v)


class Builder:
    """Builds torch modules from a Program, in PyTorch construction order."""

    def __init__(self, prog: Program):
        self.prog = prog
        self.classes: dict[str, type] = {}
        self.stack: list[str] = []
        self.class_values: dict[str, DpClass] = {}
        self.call_pos: Pos | None = None
        self.ext_classes: dict[str, type] = {}

    def class_for(self, mdef: ModuleDef) -> type:
        cls = self.classes.get(mdef.name)
        if cls is None and mdef.base is not None and mdef.base.value != "Sequential":
            cls = self.ext_classes.get(mdef.name)
        if cls is None:
            base = DpSequential if mdef.base is not None else DpModule
            cls = type(mdef.name, (base,), {"__module__": "dp2torch.models",
                                            "__qualname__": mdef.name})
            self.classes[mdef.name] = cls
        return cls

    def class_value(self, name: str) -> DpClass:
        """The one DpClass per module name, so that `a is b` compares names."""
        v = self.class_values.get(name)
        if v is None:
            v = self.class_values[name] = DpClass(self, name)
        return v

    # ---- constructor-time expression evaluation ----
    def _range(self, e, env):
        rargs = [self.ceval(a, env) for a in e.range_args]
        for a, node in zip(rargs, e.range_args):
            if not isinstance(a, int) or isinstance(a, bool):
                raise DpError(node.pos, f"range expects integers, got {_type_name(a)}")
        return range(*rargs)

    def _dict_key(self, kn, env, seen):
        k = self.ceval(kn, env)
        if not isinstance(k, str):
            raise DpError(kn.pos, f"a dict key must be a string, got {_type_name(k)}")
        if k in seen:
            raise DpError(kn.pos, f"key '{k}' is given twice")
        return k

    def ceval(self, e: Node, env: dict):
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Name):
            if e.id in env:
                return env[e.id]
            if e.id in BUILTIN_MODULES or e.id in self.prog.modules:
                return self.class_value(e.id)  # a module named, not called: a class
            raise DpError(e.pos, f"unknown name '{e.id}'{_suggest(e.id, env)}")
        if isinstance(e, TupleExpr):
            return tuple(self.ceval(x, env) for x in e.elts)
        if isinstance(e, ListExpr):
            return [self.ceval(x, env) for x in e.elts]
        if isinstance(e, ListComp):
            return [self.ceval(e.elt, {**env, e.var: i}) for i in self._range(e, env)]
        if isinstance(e, DictComp):
            out = {}
            for i in self._range(e, env):
                inner = {**env, e.var: i}
                k = self._dict_key(e.key, inner, out)
                out[k] = self.ceval(e.value, inner)
            return out
        if isinstance(e, DictExpr):
            out = {}
            for kn, vn in e.items:
                k = self._dict_key(kn, env, out)
                out[k] = self.ceval(vn, env)
            return out
        if isinstance(e, FStr):
            return format_fstring(e, lambda n: (n in env, env.get(n)))
        if isinstance(e, Unary):
            v = self.ceval(e.operand, env)
            if not _is_num(v):
                raise DpError(e.pos, f"bad operand type for unary -: {_type_name(v)}")
            return -v
        if isinstance(e, Not):
            return not self.ceval(e.operand, env)
        if isinstance(e, Cond):
            return self.ceval(e.then if self.ceval(e.cond, env) else e.other, env)
        if isinstance(e, Binary):
            left = self.ceval(e.left, env)
            if e.op == "and":
                return self.ceval(e.right, env) if left else left
            if e.op == "or":
                return left if left else self.ceval(e.right, env)
            right = self.ceval(e.right, env)
            if e.op in COMPARISONS or e.op in ("is", "is not"):
                return compare_values(e.op, left, right, e.pos)
            if e.op == "+" and type(left) is type(right) and isinstance(left, (list, tuple)):
                return left + right  # [a] + [b]
            return scalar_arith(e.op, left, right, e.pos)
        if (isinstance(e, Call) and isinstance(e.func, Name) and e.func.id in TENSOR_MEMBER_KINDS
                and e.func.id not in env):
            return self._tensor_member(e, env)
        if isinstance(e, Call):
            if (isinstance(e.func, Name) and e.func.id in PY_BUILTINS and e.func.id not in env
                    and e.func.id not in BUILTIN_MODULES and e.func.id not in self.prog.modules):
                return PY_BUILTINS[e.func.id](*self._cargs(e.args, env))
            return self.construct(e, env)
        if isinstance(e, (Index, Subscript)):
            raise DpError(e.pos, "indexing is only allowed in forward")
        if isinstance(e, Attr):
            raise DpError(e.pos, f"'.{e.name}' is only allowed in forward")
        raise DpError(e.pos, "this expression is not allowed in constructor arguments")

    def _tensor_member(self, e: Call, env: dict) -> TensorMember:
        kind = e.func.id
        if len(e.args) != 1:
            raise DpError(e.pos, f"{kind} takes one tensor value")
        kw = {}
        for k, v, p in e.kwargs:
            ok = ("requires_grad",) if kind == "Parameter" else ("persistent",)
            if k not in ok:
                raise DpError(p, f"{kind} has no argument '{k}'")
            kw[k] = self.ceval(v, env)
        t = self.tensor_value(e.args[0], env)
        if not isinstance(t, torch.Tensor):
            raise DpError(e.args[0].pos, f"{kind} needs a tensor, got {_type_name(t)}")
        if kind == "Parameter":
            if not t.is_floating_point():
                raise DpError(e.args[0].pos, "only float tensors can require gradients")
            return TensorMember(kind, t)
        persistent = kw.get("persistent", True)
        if not isinstance(persistent, bool):
            raise DpError(e.pos, "persistent= is True or False")
        return TensorMember(kind, t, persistent)

    def tensor_value(self, e: Node, env: dict):
        """A Parameter/Buffer creation expression, evaluated with torch."""
        if isinstance(e, Name) and e.id in CT_DTYPES and e.id not in env:
            return CT_DTYPES[e.id]
        if isinstance(e, Binary) and e.op in ("+", "-", "*", "/"):
            a, b = self.tensor_value(e.left, env), self.tensor_value(e.right, env)
            if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
                return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                        "/": lambda: a / b}[e.op]()
            return scalar_arith(e.op, a, b, e.pos)
        if isinstance(e, Unary) and e.op == "-":
            v = self.tensor_value(e.operand, env)
            return -v
        if isinstance(e, TupleExpr):
            return tuple(self.tensor_value(x, env) for x in e.elts)
        if isinstance(e, ListExpr):
            return [self.tensor_value(x, env) for x in e.elts]
        if isinstance(e, Call):
            args = [self.tensor_value(a, env) for a in e.args]
            kw = {k: self.tensor_value(v, env) for k, v, _ in e.kwargs}
            try:
                if (isinstance(e.func, Name) and e.func.id in CT_METHODS and e.func.id not in env
                        and args and isinstance(args[0], torch.Tensor)):
                    obj, args = args[0], args[1:]
                    m = e.func.id
                    if m in ("view", "reshape", "expand") and len(args) == 1 and isinstance(args[0], (list, tuple)):
                        args = list(args[0])
                    return getattr(obj, m)(*args, **kw)
                if isinstance(e.func, Name) and e.func.id in CT_CREATION and e.func.id not in env:
                    n = e.func.id
                    if n in ("zeros", "ones", "empty", "randn", "rand"):
                        sizes = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
                        t = getattr(torch, n)(*sizes, dtype=kw.pop("dtype", None) or torch.float32)
                        if n == "empty":
                            t.zero_()
                        return t
                    if n == "full":
                        size = args[0] if isinstance(args[0], (list, tuple)) else (args[0],)
                        return torch.full(tuple(size), args[1], dtype=kw.pop("dtype", None) or torch.float32)
                    if n == "arange":
                        return torch.arange(*args, **kw)
                    if n == "tensor":
                        d = kw.pop("dtype", None)
                        if d is None and isinstance(args[0], float) or (
                                isinstance(args[0], (list, tuple)) and any(isinstance(x, float) for x in args[0])):
                            d = torch.float32
                        return torch.tensor(args[0], dtype=d)
                    return getattr(torch, n)(*args, **kw)
            except DpError:
                raise
            except Exception as ex:
                raise DpError(e.pos, f"{_first_line(ex)}") from None
            if isinstance(e.func, Name) and e.func.id in PY_BUILTINS and not any(
                    isinstance(a, torch.Tensor) for a in args):
                return self.ceval(e, env)
            raise DpError(e.pos, "this call is not allowed in a Parameter or buffer value")
        return self.ceval(e, env)

    def _cargs(self, nodes, env):
        """Positional constructor arguments, `*xs` spread."""
        out = []
        for a in nodes:
            if isinstance(a, Starred):
                v = self.ceval(a.value, env)
                if not isinstance(v, (list, tuple)):
                    raise DpError(a.pos, f"'*' spreads a list or tuple, got {_type_name(v)}")
                out.extend(v)
            else:
                out.append(self.ceval(a, env))
        return out

    def construct(self, call: Call, env: dict):
        if not isinstance(call.func, Name):
            raise DpError(call.pos, "a module is constructed by name: Name(args...)")
        name = call.func.id
        args = self._cargs(call.args, env)
        kwargs = [(k, self.ceval(v, env), p) for k, v, p in call.kwargs]
        if name == "partial" and name not in env:
            if not args or not _is_class(args[0]):
                raise DpError(call.pos, "partial() takes a module class first, as in "
                                        "partial(BatchNorm2d, eps=0.001)")
            return functools.partial(args[0], *args[1:], **{k: v for k, v, _ in kwargs})
        if name in env:
            cls = env[name]
            if not _is_class(cls):
                raise DpError(call.func.pos, f"'{name}' is {_type_name(cls)}, not a module class")
            saved, self.call_pos = self.call_pos, call.func.pos
            try:
                return cls(*args, **{k: v for k, v, _ in kwargs})
            finally:
                self.call_pos = saved
        return self.construct_named(name, args, kwargs, call.pos, call.func.pos)

    def construct_named(self, name, args, kwargs, pos, name_pos) -> nn.Module:
        if name in BUILTIN_MODULES:
            return self._build_builtin(name, args, kwargs, pos)
        if name in self.prog.modules:
            return self.instantiate(self.prog.modules[name], args, kwargs, pos)
        raise DpError(name_pos, f"unknown module '{name}'"
                                f"{_suggest(name, set(BUILTIN_MODULES) | set(self.prog.modules))}")

    def _build_builtin(self, name, args, kwargs, pos) -> nn.Module:
        factory, sig = BUILTIN_MODULES[name]
        try:
            if name == "Identity":
                return nn.Identity()  # like torch, ignores any arguments
            if name == "Sequential":
                if kwargs:
                    raise DpError(kwargs[0][2], "Sequential takes modules as positional arguments")
                if len(args) == 1 and isinstance(args[0], dict):
                    # Sequential(OrderedDict(...)): named entries (dpc does not take these yet)
                    from collections import OrderedDict
                    for k, a in args[0].items():
                        if not isinstance(a, nn.Module):
                            raise DpError(pos, f"Sequential entry '{k}' is a {_type_name(a)}, not a module")
                    return nn.Sequential(OrderedDict(args[0]))
                for i, a in enumerate(args):
                    if not isinstance(a, nn.Module):
                        raise DpError(pos, f"Sequential argument {i} is a {_type_name(a)}, not a module")
                return nn.Sequential(*args)
            if name == "ModuleList":
                b = bind_args("ModuleList", [("modules", None)], args, kwargs, pos)
                mods = b["modules"] or []
                if not isinstance(mods, (list, tuple)):
                    raise DpError(pos, f"ModuleList expects a list of modules, got {_type_name(mods)}")
                for i, a in enumerate(mods):
                    if not isinstance(a, nn.Module):
                        raise DpError(pos, f"ModuleList entry {i} is a {_type_name(a)}, not a module")
                return nn.ModuleList(mods)
            bound = bind_args(name, sig, args, kwargs, pos)
            for k, v in bound.items():
                if isinstance(v, nn.Module) or _is_class(v) or (isinstance(v, (list, tuple))
                                                and any(isinstance(x, nn.Module) for x in v)):
                    raise DpError(pos, f"{name} argument '{k}' cannot be a module")
                if isinstance(v, dict):
                    raise DpError(pos, f"{name} argument '{k}' cannot be a dict")
            return factory(**bound)
        except DpError:
            raise
        except Exception as ex:  # torch's own argument validation
            raise DpError(pos, f"{name}: {ex}") from None

    def instantiate(self, mdef: ModuleDef, args, kwargs, pos) -> DpModule:
        if mdef.name in self.stack:
            chain = " -> ".join(self.stack + [mdef.name])
            raise DpError(pos, f"module {mdef.name} contains itself: {chain}")
        # Defaults are evaluated per call, seeing the parameters before them
        # (b: int = a + 1); a parameter of any type may be None.
        if mdef.base is not None and mdef.base.value != "Sequential":
            return self._instantiate_ext(mdef, args, kwargs, pos)
        names = [p.name for p in mdef.params]
        given = bind_args(mdef.name, [(n, None) for n in names], args, kwargs, pos)
        present = {n for n in names[:len(args)]} | {k for k, _, _ in kwargs}
        env = {}
        for p in mdef.params:
            if p.name in present:
                v = given[p.name]
            elif p.default is not None:
                v = self.ceval(p.default, dict(env))
            else:
                raise DpError(pos, f"{mdef.name} is missing required argument '{p.name}'")
            if v is not None:
                v = _coerce_scalar(p.type, v, f"{mdef.name} parameter '{p.name}'",
                                   pos if p.name in present else p.default.pos)
            env[p.name] = v
        if mdef.base is not None and mdef.base.value != "Sequential":
            return self._instantiate_ext(mdef, args, kwargs, pos)
        self.stack.append(mdef.name)
        try:
            inst = self.class_for(mdef)()
            inst._dp_def = mdef
            inst._dp_env = env
            inst._dp_extra_repr = ""
            state = {"entries": 0, "defined": set()}
            self._body(inst, mdef, mdef.members, env, set(names), state)
            inst._dp_sig = self._forward_sig(mdef, env)
        finally:
            self.stack.pop()
        return inst

    def _instantiate_ext(self, mdef: ModuleDef, args, kwargs, pos):
        """`module X extends LayerNorm { forward ... }`: the builtin built with
        its own constructor, as an instance of a subclass named X."""
        inst = self._build_builtin(mdef.base.value, args, kwargs, pos)
        base_cls = type(inst)
        key = (mdef.name, base_cls)
        cls = self.ext_classes.get(key)
        if cls is None:
            cls = type(mdef.name, (DpExtends, base_cls), {"__module__": "dp2torch.models",
                                                         "__qualname__": mdef.name})
            self.ext_classes[key] = cls
        inst.__class__ = cls
        env = {k: v for k, v in inst.__dict__.items() if not k.startswith("_") and k != "training"}
        inst._dp_def = mdef
        inst._dp_env = env
        inst._dp_sig = self._forward_sig(mdef, env)
        return inst

    def _body(self, inst, mdef, items, env, params, state):
        """The members, constants and entries of a module body, in source
        order, taking the branches of `if` the constructor values pick."""
        for it in items:
            if isinstance(it, MemberIf):
                branch = it.then if self.ceval(it.cond, env) else it.orelse
                self._body(inst, mdef, branch, env, params, state)
            elif isinstance(it, Entry):
                if mdef.base is None:
                    raise DpError(it.pos, f"a bare module in a module body is an entry of a "
                                          f"Sequential subclass; here write 'name = ...'")
                v = self.ceval(it.value, env)
                if not isinstance(v, nn.Module):
                    raise DpError(it.pos, f"an entry of Sequential subclass '{mdef.name}' must be a "
                                          f"module, got {_type_name(v)}")
                inst._modules[str(state["entries"])] = v
                state["entries"] += 1
            else:
                self._member(inst, mdef, it, env, params, state)

    def _member(self, inst, mdef, mem, env, params, state):
        if mem.name in state["defined"]:
            raise DpError(mem.pos, f"member '{mem.name}' is defined twice in module {mdef.name}")
        state["defined"].add(mem.name)
        is_param = mem.name in params
        # members and constructor parameters are two namespaces (self.x and x):
        # a member may take a parameter's name (self.dropout = nn.Dropout(dropout))
        value = self.ceval(mem.value, env)
        if mem.name == "extra_repr":
            if not isinstance(value, str):
                raise DpError(mem.value.pos, f"extra_repr must be a string, got {_type_name(value)}")
            inst._dp_extra_repr = value
            return
        if isinstance(value, list):  # [Block(d) for _ in range(n)] / [A(), B()]
            for i, v in enumerate(value):
                if not isinstance(v, nn.Module):
                    raise DpError(mem.value.pos, f"entry {i} of member '{mem.name}' is a "
                                                 f"{_type_name(v)}, not a module")
            value = nn.ModuleList(value)
        if isinstance(value, TensorMember):
            if value.kind == "Parameter":
                inst._parameters[mem.name] = nn.Parameter(value.tensor)
            else:
                inst._buffers[mem.name] = value.tensor
                if not value.persistent:
                    inst._non_persistent_buffers_set.add(mem.name)
            return
        if isinstance(value, nn.Module):
            # Bypass add_module's attribute check: a member may be called
            # `eval` or `float` without shadowing nn.Module methods.
            inst._modules[mem.name] = value
            return
        if is_param and isinstance(mem.value, Name) and mem.value.id == mem.name:
            return  # `downsample = downsample` with None, a number or a class: already in env
        # a constant: visible to later members and to forward, and a plain
        # attribute as `self.use_res = ...` makes it (unless that would
        # shadow an nn.Module attribute)
        env[mem.name] = value
        if not hasattr(type(inst), mem.name) and mem.name not in inst.__dict__:
            inst.__dict__[mem.name] = value

    def _forward_sig(self, mdef: ModuleDef, env: dict) -> list[dict] | None:
        if mdef.forward is None:
            return None
        out = []
        for p in mdef.forward.params:
            if isinstance(p, TensorParam):
                dims = []
                for d in p.dims[1:]:
                    if isinstance(d, Name) and d.id not in env:
                        dims.append(("free", d.id, d.pos))  # takes the caller's size
                        continue
                    v = self.ceval(d, env)
                    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                        raise DpError(d.pos, f"a dim must be a non-negative integer, got {v!r}")
                    dims.append(v)
                out.append({"kind": "tensor", "name": p.name, "dtype": p.dtype,
                            "batch_name": p.dims[0].id, "dims": [None] + dims, "pos": p.pos})
            else:
                default = REQUIRED
                if p.default is not None:
                    default = _coerce_scalar(p.type, self.ceval(p.default, {}),
                                             f"default of '{p.name}'", p.default.pos)
                out.append({"kind": "scalar", "name": p.name, "type": p.type,
                            "default": default, "pos": p.pos})
        return out

    def build_entry(self):
        expr, pos = self.prog.entry_expr()
        dp_kwargs = None
        if isinstance(expr, Call) and isinstance(expr.func, Name) and expr.func.id == "DataParallel":
            if len(expr.args) != 1:
                raise DpError(expr.pos, "DataParallel takes one module: DataParallel(Name(...))")
            sig = [("module", REQUIRED), ("device_ids", None), ("output_device", None), ("dim", 0)]
            inner_expr = expr.args[0]
            kw = [(k, self.ceval(v, {}), p) for k, v, p in expr.kwargs]
            dp_kwargs = bind_args("DataParallel", sig, [None], kw, expr.pos)
            del dp_kwargs["module"]
            _check_dp_kwargs(dp_kwargs, expr.pos)
            expr = inner_expr
        if not (isinstance(expr, Call) and isinstance(expr.func, Name)
                and expr.func.id in self.prog.modules):
            raise DpError(expr.pos, "the model is a user module: model = Name(...) "
                                    "or model = DataParallel(Name(...))")
        inner = self.construct(expr, {})
        if getattr(inner, "_dp_sig", None) is None:
            raise DpError(expr.pos, f"module {expr.func.id} has no forward")
        # a dim named freely at the entry (input_ids: i64[N, S]) is a run-time
        # dim: it takes the size of the input given (info shows it by name)
        if dp_kwargs is None:
            return inner, inner, None
        return _make_data_parallel(inner), inner, dp_kwargs


def _check_dp_kwargs(kw: dict, pos: Pos):
    ids = kw["device_ids"]
    if ids is not None:
        if not isinstance(ids, (list, tuple)) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise DpError(pos, "DataParallel device_ids must be a list of integers")
        kw["device_ids"] = list(ids)
    od = kw["output_device"]
    if od is not None and (not isinstance(od, int) or isinstance(od, bool)):
        raise DpError(pos, "DataParallel output_device must be an integer")
    if not isinstance(kw["dim"], int) or isinstance(kw["dim"], bool):
        raise DpError(pos, "DataParallel dim must be an integer")


def _make_data_parallel(module: nn.Module) -> nn.DataParallel:
    """`torch.nn.DataParallel(module)` that stays on the CPU.

    With no accelerator DataParallel just holds the module (device_ids=[]);
    we force that path even where CUDA exists, so the reference never moves
    weights to a GPU.  The device arguments do not affect repr or results.
    """
    import torch.nn.parallel.data_parallel  # noqa: F401  (ensure the submodule is loaded)
    # `torch.nn.parallel.data_parallel` the attribute is a function of the
    # same name, so fetch the submodule itself from sys.modules.
    dpmod = sys.modules["torch.nn.parallel.data_parallel"]
    saved = dpmod._get_available_device_type
    dpmod._get_available_device_type = lambda: None
    try:
        return nn.DataParallel(module)
    finally:
        dpmod._get_available_device_type = saved


# ===========================================================================
# Forward interpreter
# ===========================================================================

class _ReturnSignal(Exception):
    def __init__(self, value):
        self.value = value


def _shape_str(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


class _Interpreter:
    """Runs one call of a user module's forward."""

    def __init__(self, module: DpModule):
        self.m = module
        self.mdef: ModuleDef = module._dp_def
        self.env = module._dp_env
        self.locals: dict = {}
        self.free: dict = {}  # sizes of the dims named freely by the parameters

    # ---- argument binding and shape checks ----
    def call(self, args, kwargs):
        sig = self.m._dp_sig
        name = self.mdef.name
        if sig is None:
            raise DpError(self.mdef.pos, f"module {name} has no forward")
        fpos = self.mdef.forward.pos
        if len(args) > len(sig):
            raise DpError(fpos, f"{name} forward takes {len(sig)} arguments, got {len(args)}")
        bound = dict(zip((p["name"] for p in sig), args))
        for k, v in kwargs.items():
            if k not in (p["name"] for p in sig):
                raise DpError(fpos, f"{name} forward has no parameter '{k}'"
                                    f"{_suggest(k, [p['name'] for p in sig])}")
            if k in bound:
                raise DpError(fpos, f"{name} forward got several values for '{k}'")
            bound[k] = v
        batch: dict[str, tuple[int, str]] = {}
        for p in sig:
            if p["name"] not in bound:
                if p["kind"] == "tensor" or p["default"] is REQUIRED:
                    raise DpError(fpos, f"{name} forward is missing argument '{p['name']}'")
                self.locals[p["name"]] = p["default"]
                continue
            v = bound[p["name"]]
            if p["kind"] == "scalar":
                self.locals[p["name"]] = _coerce_scalar(p["type"], v, f"{name} parameter "
                                                        f"'{p['name']}'", p["pos"])
                continue
            self.locals[p["name"]] = self._check_tensor(p, v, batch)
        for bname, (size, _) in batch.items():
            self.locals[bname] = size
        for dname, size in self.free.items():
            self.locals.setdefault(dname, size)
        try:
            self.exec_body(self.mdef.forward.body)
        except _ReturnSignal as r:
            return r.value
        raise DpError(fpos, f"forward of {name} ended without return")

    def _check_tensor(self, p, v, batch):
        name = self.mdef.name
        if not isinstance(v, torch.Tensor):
            raise DpError(p["pos"], f"{name} parameter '{p['name']}' expects a tensor, "
                                    f"got {_type_name(v)}")
        want_float = TENSOR_DTYPES[p["dtype"]][2]
        if want_float != v.is_floating_point():
            raise DpError(p["pos"], f"{name} parameter '{p['name']}' expects {p['dtype']} "
                                    f"values, got {str(v.dtype).replace('torch.', '')}")
        dims = list(p["dims"])
        bname = p["batch_name"]
        # a dim named freely (x: [N, C, H, W]) takes the caller's size, the
        # same for every use of the name; it is an int in the body
        for k, d in enumerate(dims):
            if isinstance(d, tuple) and k < v.dim():
                size = self.free.setdefault(d[1], int(v.shape[k]))
                dims[k] = size
        shown = [bname] + [d[1] if isinstance(d, tuple) else d for d in p["dims"][1:]]
        if v.dim() != len(dims) or any(d is not None and d != s for d, s in zip(dims, v.shape)):
            raise DpError(p["pos"], f"{name} parameter '{p['name']}' expects {_shape_str(shown)}, "
                                    f"got {_shape_str(list(v.shape))}")
        b = v.shape[0]
        if bname in batch and batch[bname][0] != b:
            other_size, other = batch[bname]
            raise DpError(p["pos"], f"batch dim {bname} is {other_size} for '{other}' but {b} "
                                    f"for '{p['name']}'")
        batch.setdefault(bname, (b, p["name"]))
        return v

    # ---- statements ----
    def exec_body(self, body):
        for st in body:
            if isinstance(st, Assign):
                value = self.eval(st.value)
                if len(st.targets) == 1:
                    self.locals[st.targets[0][0]] = value
                else:
                    if not isinstance(value, tuple):
                        raise DpError(st.pos, f"cannot unpack a {_type_name(value)} into "
                                              f"{len(st.targets)} names")
                    if len(value) != len(st.targets):
                        raise DpError(st.pos, f"cannot unpack {len(value)} values into "
                                              f"{len(st.targets)} names")
                    for (n, _), v in zip(st.targets, value):
                        self.locals[n] = v
            elif isinstance(st, For):
                it = self.eval(st.iter)
                if not isinstance(it, (nn.ModuleList, nn.Sequential)):
                    raise DpError(st.iter.pos, f"for iterates over a ModuleList or Sequential, "
                                               f"got {_type_name(it)}")
                for child in it:
                    self.locals[st.var] = child
                    self.exec_body(st.body)
            elif isinstance(st, If):
                taken = _truth(self.eval(st.cond), st.cond.pos)
                self.exec_body(st.body if taken else st.orelse)
            elif isinstance(st, Return):
                vals = [self.eval(v) for v in st.values]
                raise _ReturnSignal(vals[0] if len(vals) == 1 else tuple(vals))

    # ---- expressions ----
    def lookup(self, node: Name):
        n = node.id
        if n in self.locals:
            return self.locals[n]
        if n in self.m._modules:
            return self.m._modules[n]
        if n in self.m._parameters:
            return self.m._parameters[n]
        if n in self.m._buffers:
            return self.m._buffers[n]
        if n in self.env:
            return self.env[n]
        if n in DTYPE_VALUES:
            return DTYPE_VALUES[n]()
        raise DpError(node.pos, f"unknown name '{n}'")

    def eval(self, e: Node):
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Name):
            return self.lookup(e)
        if isinstance(e, TupleExpr):
            return tuple(self.eval(x) for x in e.elts)
        if isinstance(e, ListExpr):
            return [self.eval(x) for x in e.elts]
        if isinstance(e, Attr):
            v = self.eval(e.value)
            if isinstance(v, torch.finfo) and e.name in ("min", "max", "eps", "tiny"):
                return float(getattr(v, e.name))
            if isinstance(v, torch.Tensor) and e.name == "shape":
                return tuple(int(d) for d in v.shape)
            if isinstance(v, torch.Tensor) and e.name == "ndim":
                return v.dim()
            raise DpError(e.pos, f"no attribute '{e.name}' on {_type_name(v)}")
        if isinstance(e, Unary) and e.op == "~":
            v = self.eval(e.operand)
            if isinstance(v, torch.Tensor) and v.dtype == torch.bool:
                return ~v
            raise DpError(e.pos, f"~ needs a bool tensor, got {_type_name(v)}")
        if isinstance(e, Unary):
            v = self.eval(e.operand)
            if isinstance(v, torch.Tensor) or _is_num(v):
                return -v
            raise DpError(e.pos, f"bad operand type for unary -: {_type_name(v)}")
        if isinstance(e, Not):
            return not _truth(self.eval(e.operand), e.operand.pos)
        if isinstance(e, Cond):
            return self.eval(e.then if _truth(self.eval(e.cond), e.cond.pos) else e.other)
        if isinstance(e, Binary):
            if e.op in ("and", "or"):
                left = self.eval(e.left)
                self._no_tensor(e, left)
                if bool(left) == (e.op == "or"):
                    return left  # short-circuit, as Python
                right = self.eval(e.right)
                self._no_tensor(e, right)
                return right
            left, right = self.eval(e.left), self.eval(e.right)
            if e.op in ("is", "is not") and (left is None or right is None):
                return (left is right) == (e.op == "is")  # a tensor is never None
            if e.op in COMPARISONS and (isinstance(left, torch.Tensor) or isinstance(right, torch.Tensor)):
                return self.binary(e, left, right)  # a bool mask
            if e.op in COMPARISONS or e.op in ("is", "is not"):
                self._no_tensor(e, left)
                self._no_tensor(e, right)
                return compare_values(e.op, left, right, e.pos)
            return self.binary(e, left, right)
        if isinstance(e, Index):
            return self.index(e)
        if isinstance(e, Call):
            return self.call_expr(e)
        if isinstance(e, Subscript):
            return self.subscript(e)
        if isinstance(e, (Slice, Ellipsis_)):
            raise DpError(e.pos, "a slice is only allowed inside [...]")
        raise DpError(e.pos, "unsupported expression")

    @staticmethod
    def _no_tensor(e, v):
        if isinstance(v, torch.Tensor):
            raise DpError(e.pos, f"'{e.op}' is given a tensor: comparisons, 'and', 'or' and 'is' "
                                 f"take values known when compiling (constructor values, dims after "
                                 f"the batch, members, None), not tensors")

    def binary(self, e: Binary, a, b):
        ta, tb = isinstance(a, torch.Tensor), isinstance(b, torch.Tensor)
        if isinstance(a, tuple) and isinstance(b, tuple) and e.op == "+":
            return a + b  # x.size()[:-1] + (heads, d)
        if e.op in ("==", "!=", "<", "<=", ">", ">=", "&", "|"):
            if not (ta or tb):
                raise DpError(e.pos, f"{e.op} on two numbers is not a tensor operation")
            if e.op in ("&", "|"):
                if not all(isinstance(v, bool) or (isinstance(v, torch.Tensor) and v.dtype == torch.bool)
                           for v in (a, b)):
                    raise DpError(e.pos, f"{e.op} applies to bool tensors")
                return a & b if e.op == "&" else a | b
            ops = {"==": torch.eq, "!=": torch.ne, "<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge}
            return ops[e.op](a, b) if ta else ops[e.op](torch.as_tensor(a, dtype=b.dtype), b)
        if not (ta or tb):
            return scalar_arith(e.op, a, b, e.pos)
        if (ta and a.dtype == torch.bool) or (tb and b.dtype == torch.bool):
            raise DpError(e.pos, f"{e.op} on a bool tensor: convert it first")
        for v in (a, b):
            if not (isinstance(v, torch.Tensor) or _is_num(v)):
                raise DpError(e.pos, f"unsupported operand types for {e.op}: "
                                     f"{_type_name(a)} and {_type_name(b)}")
        try:
            if e.op == "+":
                return a + b
            if e.op == "-":
                return a - b
            if e.op == "*":
                return a * b
            if e.op == "/":
                return a / b
            if e.op == "//":
                return torch.div(a, b, rounding_mode="floor") if ta else \
                    torch.div(torch.as_tensor(a, dtype=b.dtype), b, rounding_mode="floor")
            if e.op == "**":
                return a ** b
            if e.op == "@":
                if not (ta and tb):
                    raise DpError(e.pos, f"@ needs two tensors, got {_type_name(a)} and {_type_name(b)}")
                return torch.matmul(a, b)
        except DpError:
            raise
        except Exception as ex:
            sa = _shape_str(list(a.shape)) if ta else repr(a)
            sb = _shape_str(list(b.shape)) if tb else repr(b)
            raise DpError(e.pos, f"{e.op} cannot combine {sa} and {sb}: {_first_line(ex)}") from None
        raise DpError(e.pos, f"unknown operator {e.op}")

    def subscript(self, e: Subscript):
        v = self.eval(e.value)
        items = []
        for it in e.items:
            if isinstance(it, EllipsisItem):
                items.append(Ellipsis)
            elif isinstance(it, Slice):
                parts = [None if p is None else self.eval(p) for p in (it.start, it.stop, it.step)]
                for p in parts:
                    if p is not None and (not isinstance(p, int) or isinstance(p, bool)):
                        raise DpError(it.pos, f"a slice bound is an integer, got {_type_name(p)}")
                items.append(slice(*parts))
            else:
                items.append(self.eval(it))
        if isinstance(v, tuple):
            if len(items) != 1 or not isinstance(items[0], slice):
                raise DpError(e.pos, "a tuple takes one index or one slice")
            return v[items[0]]
        if not isinstance(v, torch.Tensor):
            raise DpError(e.pos, f"cannot slice a {_type_name(v)}")
        try:
            return v[tuple(items)]
        except Exception as ex:
            raise DpError(e.pos, f"indexing: {_first_line(ex)}") from None

    def index(self, e: Index):
        v = self.eval(e.value)
        i = self.eval(e.index)
        if isinstance(v, torch.Tensor) and (i is None or (isinstance(i, int) and not isinstance(i, bool))):
            try:
                return v[i]
            except Exception as ex:
                raise DpError(e.pos, f"indexing: {_first_line(ex)}") from None
        if not isinstance(i, int) or isinstance(i, bool):
            raise DpError(e.index.pos, f"an index is an integer, got {_type_name(i)}")
        if isinstance(v, (nn.ModuleList, nn.Sequential, tuple)):
            n = len(v)
            if not -n <= i < n:
                raise DpError(e.index.pos, f"index {i} out of range for {_type_name(v)} of length {n}")
            return v[i]
        if isinstance(v, torch.Tensor):
            raise DpError(e.pos, "tensor indexing is not part of the language")
        raise DpError(e.pos, f"cannot index a {_type_name(v)}")

    def _fargs(self, nodes):
        """Positional forward arguments, `*xs` spread."""
        out = []
        for a in nodes:
            if isinstance(a, Starred):
                v = self.eval(a.value)
                if not isinstance(v, (list, tuple)):
                    raise DpError(a.pos, f"'*' spreads a tuple or list, got {_type_name(v)}")
                out.extend(v)
            else:
                out.append(self.eval(a))
        return out

    def call_expr(self, e: Call):
        f = e.func
        # A builtin function, unless a local/member/parameter has that name.
        if (isinstance(f, Name) and f.id in BUILTIN_FUNCTIONS and f.id not in self.locals
                and f.id not in self.m._modules and f.id not in self.env
                and f.id not in self.m._parameters and f.id not in self.m._buffers):
            return self.call_builtin(e, f.id)
        callee = self.eval(f)
        label = _callee_label(f)
        if callee is None:
            raise DpError(e.pos, f"'{label}' is None, not a module")
        if _is_class(callee):
            raise DpError(e.pos, f"'{label}' is a module class: modules are created as members "
                                 f"('{label} = ...(...)')")
        if not isinstance(callee, nn.Module):
            raise DpError(e.pos, f"'{label}' is a {_type_name(callee)}, not callable")
        if isinstance(callee, nn.ModuleList):
            raise DpError(e.pos, f"'{label}' is a ModuleList; iterate it with for or call "
                                 f"an entry: {label}[0](x)")
        args = self._fargs(e.args)
        kwargs = {k: self.eval(v) for k, v, _ in e.kwargs}
        if isinstance(callee, (DpModule, DpExtends)):
            return callee(*args, **kwargs)
        if isinstance(callee, nn.MultiheadAttention):
            # forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
            # average_attn_weights=True) -> (attn_output, weights or None); the masks (bool or
            # float tensors) go to PyTorch as they are
            # (under grad, so torch 1.13 takes the general path: its fused fast path, the same math,
            # fails for bias=False)
            try:
                with torch.enable_grad():
                    r = callee(*args, **kwargs)
                return tuple(t.detach() if isinstance(t, torch.Tensor) else t for t in r)
            except Exception as ex:
                raise DpError(e.pos, f"{label}: {_first_line(ex)}") from None
        # builtin torch.nn module: exactly one tensor input, no keywords
        if kwargs or len(args) != 1:
            raise DpError(e.pos, f"'{label}' ({type(callee).__name__}) takes one tensor argument")
        x = args[0]
        if not isinstance(x, torch.Tensor):
            raise DpError(e.pos, f"'{label}' ({type(callee).__name__}) expects a tensor, "
                                 f"got {_type_name(x)}")
        _precheck_builtin(label, callee, x, e.pos)
        try:
            return callee(x)
        except DpError:
            raise
        except Exception as ex:
            raise DpError(e.pos, f"{label}: {_first_line(ex)}") from None

    def call_builtin(self, e: Call, name: str):
        sig, impl, tensor_args = BUILTIN_FUNCTIONS[name]
        args = self._fargs(e.args)
        kwargs = [(k, self.eval(v), p) for k, v, p in e.kwargs]
        if sig == "creation":  # arange / ones / zeros: (sizes..., dtype=)
            bound = {"*": args}
            for k, v, p in kwargs:
                if k != "dtype":
                    raise DpError(p, f"{name} takes sizes and dtype=, not '{k}'")
                bound["dtype"] = v
            try:
                return impl(bound, e.pos)
            except DpError:
                raise
            except Exception as ex:
                raise DpError(e.pos, f"{name}: {_first_line(ex)}") from None
        if sig is None:  # reshape / permute: (input, dims...)
            if kwargs:
                raise DpError(kwargs[0][2], f"{name} takes positional arguments: {name}(x, dims...)")
            if not args:
                raise DpError(e.pos, f"{name} is missing its input")
            bound = {"input": args[0], "*": args[1:]}
            if not bound["*"]:
                raise DpError(e.pos, f"{name} needs the target dims: {name}(x, d0, d1, ...)")
        else:
            bound = bind_args(name, sig, args, kwargs, e.pos)
        for t in tensor_args:
            if not isinstance(bound[t], torch.Tensor):
                raise DpError(e.pos, f"{name} argument '{t}' must be a tensor, got "
                                     f"{_type_name(bound[t])}")
        try:
            return impl(bound, e.pos)
        except DpError:
            raise
        except Exception as ex:
            raise DpError(e.pos, f"{name}: {_first_line(ex)}") from None


def _first_line(ex: Exception) -> str:
    s = str(ex).strip().split("\n")[0]
    return s or type(ex).__name__


def _callee_label(f: Node) -> str:
    if isinstance(f, Name):
        return f.id
    if isinstance(f, Index) and isinstance(f.value, Name) and isinstance(f.index, Const):
        return f"{f.value.id}[{f.index.value}]"
    return "callee"


def _precheck_builtin(label: str, m: nn.Module, x: torch.Tensor, pos: Pos):
    """Shape checks with the contract's wording (`fc1 expects [..., 80], got [2, 320]`)."""
    got = _shape_str(list(x.shape))

    def fail(expect):
        raise DpError(pos, f"{label} expects {expect}, got {got}")

    if isinstance(m, nn.Linear):
        if x.dim() < 1 or x.shape[-1] != m.in_features:
            fail(f"[..., {m.in_features}]")
    elif isinstance(m, nn.Conv2d):
        if x.dim() != 4 or x.shape[1] != m.in_channels:
            fail(f"[N, {m.in_channels}, H, W]")
    elif isinstance(m, nn.Conv1d):
        if x.dim() != 3 or x.shape[1] != m.in_channels:
            fail(f"[N, {m.in_channels}, L]")
    elif isinstance(m, nn.ConvTranspose2d):
        if x.dim() != 4 or x.shape[1] != m.in_channels:
            fail(f"[N, {m.in_channels}, H, W]")
    elif isinstance(m, nn.BatchNorm2d):
        if x.dim() != 4 or x.shape[1] != m.num_features:
            fail(f"[N, {m.num_features}, H, W]")
    elif isinstance(m, nn.BatchNorm1d):
        if x.dim() not in (2, 3) or x.shape[1] != m.num_features:
            fail(f"[N, {m.num_features}, L]")
    elif isinstance(m, nn.GroupNorm):
        if x.dim() < 2 or x.shape[1] != m.num_channels:
            fail(f"[N, {m.num_channels}, ...]")
    elif isinstance(m, nn.LayerNorm):
        ns = list(m.normalized_shape)
        if x.dim() < len(ns) or list(x.shape[x.dim() - len(ns):]) != ns:
            fail("[..., " + ", ".join(map(str, ns)) + "]")
    elif isinstance(m, nn.Embedding):
        if x.is_floating_point():
            raise DpError(pos, f"{label} expects integer indices, got {str(x.dtype).replace('torch.', '')}")
    elif isinstance(m, (nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)):
        if x.dim() not in (3, 4):
            fail("[N, C, H, W]")


# ===========================================================================
# Public entry points
# ===========================================================================

def load_program(path: str) -> Program:
    """Parse `path` and everything it imports; run the static checks."""
    return Program(path)


def load_model(path: str):
    """Build the entry model of a `.dp` file.

    Returns (torch_module, info).  torch_module is `nn.DataParallel(X)` when
    the file says `model = DataParallel(X(...))`, else the `X` instance.
    Parameters are initialised by PyTorch's default init from the global RNG
    (call torch.manual_seed first for reproducible weights).  The module is
    in training mode, as any fresh nn.Module; call .eval() to run it.
    """
    prog = load_program(path)
    model, inner, dp_kwargs = Builder(prog).build_entry()
    info = {
        "path": path,
        "entry": inner._dp_def.name,
        "data_parallel": dp_kwargs is not None,
        "dp_kwargs": dp_kwargs or {},
        "tensor_params": [{"name": p["name"], "dtype": p["dtype"],
                           "dims": [d[1] if isinstance(d, tuple) else d for d in p["dims"]],
                           "batch_name": p["batch_name"]}
                          for p in inner._dp_sig if p["kind"] == "tensor"],
        "scalar_params": [{"name": p["name"], "type": p["type"],
                           "default": None if p["default"] is REQUIRED else p["default"],
                           "required": p["default"] is REQUIRED}
                          for p in inner._dp_sig if p["kind"] == "scalar"],
    }
    return model, info


def unwrap(model: nn.Module) -> nn.Module:
    """The user module inside a DataParallel wrapper (or the model itself)."""
    return model.module if isinstance(model, nn.DataParallel) else model


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Parse and build a .dp model with PyTorch; "
                                             "print its forward signature as JSON.")
    ap.add_argument("model", help="MODEL.dp")
    a = ap.parse_args(argv)
    try:
        _, info = load_model(a.model)
    except DpError as e:
        print(e, file=sys.stderr)
        return 1
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
