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
* `forward` interprets the `.dp` statements with torch operations;
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
# kinds: "name", "int", "float", "str", "op", "nl" (statement end), "eof"

KEYWORDS = {"module", "forward", "import", "for", "in", "return",
            "true", "false", "True", "False", "None"}
# Longest first, so that "//" wins over "/" and "**" over "*".
OPERATORS = ["...", "//", "**", "+", "-", "*", "/", "@", "=", ",", ":",
             "(", ")", "[", "]", "{", "}", ";", "."]


def tokenize(src: Source) -> list[Token]:
    """Split a source file into tokens.

    Newlines end statements ("nl" tokens) except inside () and [].  `;` is
    also a statement end.  Comments run from `#` to the end of the line.
    """
    text = src.text
    toks: list[Token] = []
    i, line, col = 0, 1, 1
    depth = 0  # nesting of () and []; newlines inside are whitespace
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
                if op in "([":
                    depth += 1
                elif op in ")]":
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
Call = _node("Call", "func args kwargs")      # kwargs: list of (name, expr, pos)
Index = _node("Index", "value index")
# indexing and shapes (x[:, 0, None], x.shape): items are expressions, Slice or EllipsisItem
Subscript = _node("Subscript", "value items")
Slice = _node("Slice", "start stop step")    # each None when left out
EllipsisItem = _node("EllipsisItem", "")
Attr = _node("Attr", "value name")
# statements
Assign = _node("Assign", "targets value")     # targets: list of (name, pos)
For = _node("For", "var iter body")
Return = _node("Return", "values")
# declarations
Param = _node("Param", "name type default")   # ctor param / scalar forward param
TensorParam = _node("TensorParam", "name dtype dims")
Member = _node("Member", "name value")
Forward = _node("Forward", "params body")
ModuleDef = _node("ModuleDef", "name params members forward")
Import = _node("Import", "path")
ModelLine = _node("ModelLine", "value")

SCALAR_TYPES = {"int", "float", "bool"}
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
        self.expect_op("{", "'{' to open the module body")
        members, forward = [], None
        self.skip_newlines()
        while not self.at_op("}"):
            if self.at("eof"):
                self.error(f"'}}' to close module {name.value}")
            t = self.peek()
            if self.at_kw("forward"):
                fwd = self.parse_forward()
                if forward is not None:
                    raise DpError(t.pos, f"module {name.value} has more than one forward")
                forward = fwd
            elif t.kind == "name" and t.value not in KEYWORDS and self.at_op("=", 1):
                self.next()
                self.next()
                members.append(Member(t.pos, t.value, self.parse_expr()))
            else:
                self.error("a member 'name = Module(...)' or 'forward(...) { ... }'")
            self.end_of_statement()
            self.skip_newlines()
        self.next()  # '}'
        return ModuleDef(kw.pos, name.value, params, members, forward)

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
            elif t.kind == "name" and t.value in SCALAR_TYPES:
                self.next()
                default = self.parse_expr() if self.accept_op("=") else None
                params.append(Param(name.pos, name.value, t.value, default))
            else:
                if scalar_only:
                    self.error("a parameter type: int, float or bool")
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
        self.error("a statement (assignment, for or return)")

    def parse_expr_list(self) -> list[Node]:
        values = [self.parse_expr()]
        while self.accept_op(","):
            values.append(self.parse_expr())
        return values

    # ---- expressions ----
    # precedence, lowest first:  + -   <   * / // @   <   unary -   <   **   <   call/index
    def parse_expr(self) -> Node:
        left = self.parse_term()
        while self.at_op("+") or self.at_op("-"):
            op = self.next()
            left = Binary(op.pos, op.value, left, self.parse_term())
        return left

    def parse_term(self) -> Node:
        left = self.parse_unary()
        while any(self.at_op(o) for o in ("*", "/", "//", "@")):
            op = self.next()
            left = Binary(op.pos, op.value, left, self.parse_unary())
        return left

    def parse_unary(self) -> Node:
        if self.at_op("-"):
            op = self.next()
            return Unary(op.pos, "-", self.parse_unary())
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
                e = self.parse_call(e)
            elif self.at_op("["):
                t = self.next()
                items = [self.parse_subscript_item()]
                while self.accept_op(","):
                    items.append(self.parse_subscript_item())
                self.expect_op("]", "']' after the index")
                if len(items) == 1 and not isinstance(items[0], (Slice, EllipsisItem)):
                    e = Index(t.pos, e, items[0])
                else:
                    e = Subscript(t.pos, e, items)
            elif self.at_op("."):
                t = self.next()
                name = self.expect_ident("an attribute name after '.'")
                if isinstance(e, Name) and e.id in ("torch", "nn", "F", "functional"):
                    e = Name(name.pos, name.value)  # namespaces vanish: torch.cat is cat
                elif self.at_op("("):
                    call = self.parse_call(Name(name.pos, name.value))
                    call.args.insert(0, e)  # x.f(a) is f(x, a)
                    e = call
                else:
                    e = Attr(t.pos, e, name.value)
            else:
                return e

    def parse_subscript_item(self) -> Node:
        t = self.peek()
        if self.accept_op("..."):
            return EllipsisItem(t.pos)
        parts = [None]
        if not self.at_op(":"):
            parts[0] = self.parse_expr()
            if not self.at_op(":"):
                return parts[0]
        while len(parts) < 3 and self.accept_op(":"):
            parts.append(None if self.at_op(":") or self.at_op(",") or self.at_op("]") else self.parse_expr())
        parts += [None] * (3 - len(parts))
        return Slice(t.pos, *parts)

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
            else:
                if kwargs:
                    raise DpError(t.pos, "positional argument after keyword argument")
                args.append(self.parse_expr())
            if not self.accept_op(","):
                break
        self.expect_op(")", "',' or ')' in the argument list")
        return Call(func.pos, func, args, kwargs)

    def parse_primary(self) -> Node:
        t = self.peek()
        if t.kind in ("int", "float", "str"):
            self.next()
            return Const(t.pos, t.value)
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
    if isinstance(v, torch.Tensor):
        return "tensor"
    if isinstance(v, nn.Module):
        return f"module {type(v).__name__}"
    return type(v).__name__


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


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
    if op in ("/", "//") and b == 0:
        raise DpError(pos, "division by zero")
    if op == "/":
        if both_int:
            if a % b != 0:
                raise DpError(pos, f"integer division {a} / {b} is not exact (use // to floor)")
            return a // b
        return a / b
    if op == "//":
        return a // b
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
    "softmax": ([("input", REQUIRED), ("dim", REQUIRED)],
                lambda a, p: F.softmax(a["input"], dim=a["dim"]), ("input",)),
    "log_softmax": ([("input", REQUIRED), ("dim", REQUIRED)],
                    lambda a, p: F.log_softmax(a["input"], dim=a["dim"]), ("input",)),
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
    "clamp": ([("input", REQUIRED), ("min", None), ("max", None)],
              lambda a, p: torch.clamp(a["input"], a["min"], a["max"]), ("input",)),
    "clamp_min": ([("input", REQUIRED), ("min", REQUIRED)],
                  lambda a, p: torch.clamp_min(a["input"], a["min"]), ("input",)),
    "clamp_max": ([("input", REQUIRED), ("max", REQUIRED)],
                  lambda a, p: torch.clamp_max(a["input"], a["max"]), ("input",)),
    "erf": ([("input", REQUIRED)], _unary(torch.erf), ()),
    "rsqrt": ([("input", REQUIRED)], _unary(torch.rsqrt), ()),
    "neg": ([("input", REQUIRED)], _unary(torch.neg), ()),
}


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


def _walk_expr(e: Node):
    """Yield every node of an expression tree."""
    yield e
    if isinstance(e, (TupleExpr, ListExpr)):
        for x in e.elts:
            yield from _walk_expr(x)
    elif isinstance(e, ListComp):
        yield from _walk_expr(e.elt)
        for x in e.range_args:
            yield from _walk_expr(x)
    elif isinstance(e, Unary):
        yield from _walk_expr(e.operand)
    elif isinstance(e, Binary):
        yield from _walk_expr(e.left)
        yield from _walk_expr(e.right)
    elif isinstance(e, Call):
        yield from _walk_expr(e.func)
        for x in e.args:
            yield from _walk_expr(x)
        for _, x, _ in e.kwargs:
            yield from _walk_expr(x)
    elif isinstance(e, Index):
        yield from _walk_expr(e.value)
        yield from _walk_expr(e.index)


def check_module(prog: Program, m: ModuleDef):
    """Static checks of one module definition: duplicate names, unknown names.

    Runtime (shape, type) errors are found while building and running.
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
    members = {}
    module_names = set(prog.modules) | set(BUILTIN_MODULES)
    for mem in m.members:
        if mem.name in members:
            raise DpError(mem.pos, f"duplicate member '{mem.name}' in module {m.name}")
        if mem.name in ctor:
            raise DpError(mem.pos, f"member '{mem.name}' has the name of a constructor parameter")
        members[mem.name] = mem
        _check_ctor_expr(mem.value, set(ctor), module_names)

    f = m.forward
    if f is None:
        return  # a module without forward is fine until someone calls it
    scope = set()          # names defined so far in forward
    batch_names = set()
    seen_default = False
    for p in f.params:
        if p.name in scope:
            raise DpError(p.pos, f"duplicate parameter '{p.name}'")
        if p.name in members or p.name in ctor:
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
                for node in _walk_expr(d):
                    if isinstance(node, Name) and node.id not in ctor:
                        extra = (" (the batch name may only be the first dim)"
                                 if node.id in batch_names or node.id == b.id else
                                 _suggest(node.id, ctor))
                        raise DpError(node.pos, f"unknown name '{node.id}' in dims: dims after "
                                                f"the first are built from literals and "
                                                f"constructor parameters{extra}")
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
    scope |= batch_names
    protected = set(members) | set(ctor) | batch_names

    def check_expr(e, callee=False):
        """Every name must be defined; builtin functions only as callees."""
        if isinstance(e, ListComp):
            raise DpError(e.pos, "list comprehensions build members, not forward values")
        if isinstance(e, Name):
            n = e.id
            if n in scope or n in members or n in ctor:
                return
            if n in BUILTIN_FUNCTIONS:
                if not callee:
                    raise DpError(e.pos, f"{n} is a function; call it: {n}(...)")
                return
            if n in module_names:
                raise DpError(e.pos, f"{n} is a module type; declare it as a member "
                                     f"(name = {n}(...)) and call the member")
            known = scope | set(members) | set(ctor) | set(BUILTIN_FUNCTIONS)
            raise DpError(e.pos, f"unknown name '{n}'{_suggest(n, known)}")
        if isinstance(e, Call):
            check_expr(e.func, callee=True)
            for a in e.args:
                check_expr(a)
            for _, a, _ in e.kwargs:
                check_expr(a)
        elif isinstance(e, (TupleExpr, ListExpr)):
            for x in e.elts:
                check_expr(x)
        elif isinstance(e, Unary):
            check_expr(e.operand)
        elif isinstance(e, Binary):
            check_expr(e.left)
            check_expr(e.right)
        elif isinstance(e, Index):
            check_expr(e.value)
            check_expr(e.index)
        elif isinstance(e, Subscript):
            check_expr(e.value)
            for it in e.items:
                for part in ((it.start, it.stop, it.step) if isinstance(it, Slice) else
                             () if isinstance(it, EllipsisItem) else (it,)):
                    if part is not None:
                        check_expr(part)
        elif isinstance(e, Attr):
            check_expr(e.value)

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
            elif isinstance(st, Return):
                for v in st.values:
                    check_expr(v)

    check_body(f.body)
    if not f.body or not isinstance(f.body[-1], Return):
        raise DpError(f.pos, f"forward of {m.name} must end with a return statement")


def _check_ctor_expr(e: Node, ctor_names: set, module_names: set):
    """Names in a member's constructor expression: constructor parameters,
    comprehension variables, and module names in call position."""
    def walk(node, bound):
        if isinstance(node, ListComp):
            for a in node.range_args:
                walk(a, bound)
            walk(node.elt, bound | {node.var})
            return
        if isinstance(node, Call):
            if isinstance(node.func, Name):
                n = node.func.id
                if n == "DataParallel":
                    raise DpError(node.pos, "DataParallel wraps the entry model only "
                                            "(model = DataParallel(Name(...)))")
                if n not in module_names:
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
            if node.id not in ctor_names and node.id not in bound:
                if node.id in module_names:
                    raise DpError(node.pos, f"{node.id} is a module; call it: {node.id}(...)")
                raise DpError(node.pos, f"unknown name '{node.id}'"
                                        f"{_suggest(node.id, ctor_names | bound)}")
            return
        if isinstance(node, Index):
            raise DpError(node.pos, "indexing is not allowed in constructor arguments")
        if isinstance(node, (TupleExpr, ListExpr)):
            for x in node.elts:
                walk(x, bound)
        elif isinstance(node, Unary):
            walk(node.operand, bound)
        elif isinstance(node, Binary):
            walk(node.left, bound)
            walk(node.right, bound)
    walk(e, set())


# ===========================================================================
# Module construction
# ===========================================================================

class DpModule(nn.Module):
    """Base class of every `.dp` user module.  A subclass is created per
    `.dp` module definition, named after it, so `repr` shows that name.

    Instance state (plain attributes, not registered children):
      _dp_def   the ModuleDef
      _dp_env   constructor parameter values
      _dp_sig   forward signature with dims evaluated
    Children live in `self._modules` in member order.
    """

    def forward(self, *args, **kwargs):
        return _Interpreter(self).call(args, kwargs)


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
    raise DpError(pos, f"{what} expects {ptype}, got {_type_name(value)}"
                       + (f" {value!r}" if _is_num(value) or isinstance(value, bool) else ""))


class Builder:
    """Builds torch modules from a Program, in PyTorch construction order."""

    def __init__(self, prog: Program):
        self.prog = prog
        self.classes: dict[str, type] = {}
        self.stack: list[str] = []

    def class_for(self, mdef: ModuleDef) -> type:
        cls = self.classes.get(mdef.name)
        if cls is None:
            cls = type(mdef.name, (DpModule,), {"__module__": "dp2torch.models",
                                               "__qualname__": mdef.name})
            self.classes[mdef.name] = cls
        return cls

    # ---- constructor-time expression evaluation ----
    def ceval(self, e: Node, env: dict):
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Name):
            if e.id in env:
                return env[e.id]
            raise DpError(e.pos, f"unknown name '{e.id}'{_suggest(e.id, env)}")
        if isinstance(e, TupleExpr):
            return tuple(self.ceval(x, env) for x in e.elts)
        if isinstance(e, ListExpr):
            return [self.ceval(x, env) for x in e.elts]
        if isinstance(e, ListComp):
            rargs = [self.ceval(a, env) for a in e.range_args]
            for a, node in zip(rargs, e.range_args):
                if not isinstance(a, int) or isinstance(a, bool):
                    raise DpError(node.pos, f"range expects integers, got {_type_name(a)}")
            out = []
            for i in range(*rargs):
                out.append(self.ceval(e.elt, {**env, e.var: i}))
            return out
        if isinstance(e, Unary):
            v = self.ceval(e.operand, env)
            if not _is_num(v):
                raise DpError(e.pos, f"bad operand type for unary -: {_type_name(v)}")
            return -v
        if isinstance(e, Binary):
            return scalar_arith(e.op, self.ceval(e.left, env), self.ceval(e.right, env), e.pos)
        if isinstance(e, Call):
            return self.construct(e, env)
        raise DpError(e.pos, "this expression is not allowed in constructor arguments")

    def construct(self, call: Call, env: dict) -> nn.Module:
        if not isinstance(call.func, Name):
            raise DpError(call.pos, "a module is constructed by name: Name(args...)")
        name = call.func.id
        args = [self.ceval(a, env) for a in call.args]
        kwargs = [(k, self.ceval(v, env), p) for k, v, p in call.kwargs]
        if name in BUILTIN_MODULES:
            return self._build_builtin(name, args, kwargs, call.pos)
        if name in self.prog.modules:
            return self.instantiate(self.prog.modules[name], args, kwargs, call.pos)
        raise DpError(call.func.pos, f"unknown module '{name}'"
                                     f"{_suggest(name, set(BUILTIN_MODULES) | set(self.prog.modules))}")

    def _build_builtin(self, name, args, kwargs, pos) -> nn.Module:
        factory, sig = BUILTIN_MODULES[name]
        try:
            if name == "Identity":
                return nn.Identity()  # like torch, ignores any arguments
            if name == "Sequential":
                if kwargs:
                    raise DpError(kwargs[0][2], "Sequential takes modules as positional arguments")
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
                if isinstance(v, nn.Module) or (isinstance(v, (list, tuple))
                                                and any(isinstance(x, nn.Module) for x in v)):
                    raise DpError(pos, f"{name} argument '{k}' cannot be a module")
            return factory(**bound)
        except DpError:
            raise
        except Exception as ex:  # torch's own argument validation
            raise DpError(pos, f"{name}: {ex}") from None

    def instantiate(self, mdef: ModuleDef, args, kwargs, pos) -> DpModule:
        if mdef.name in self.stack:
            chain = " -> ".join(self.stack + [mdef.name])
            raise DpError(pos, f"module {mdef.name} contains itself: {chain}")
        sig = []
        for p in mdef.params:
            default = REQUIRED
            if p.default is not None:
                default = self.ceval(p.default, {})  # defaults see no other parameter
            sig.append((p.name, default))
        bound = bind_args(mdef.name, sig, args, kwargs, pos)
        env = {}
        for p in mdef.params:
            env[p.name] = _coerce_scalar(p.type, bound[p.name],
                                         f"{mdef.name} parameter '{p.name}'", pos)
        self.stack.append(mdef.name)
        try:
            inst = self.class_for(mdef)()
            inst._dp_def = mdef
            inst._dp_env = env
            for mem in mdef.members:
                value = self.ceval(mem.value, env)
                if isinstance(value, list):  # [Block(d) for _ in range(n)] / [A(), B()]
                    for i, v in enumerate(value):
                        if not isinstance(v, nn.Module):
                            raise DpError(mem.value.pos, f"entry {i} of member '{mem.name}' is a "
                                                         f"{_type_name(v)}, not a module")
                    value = nn.ModuleList(value)
                if not isinstance(value, nn.Module):
                    raise DpError(mem.value.pos, f"member '{mem.name}' must be a module, "
                                                 f"got {_type_name(value)}")
                # Bypass add_module's attribute check: a member may be called
                # `eval` or `float` without shadowing nn.Module methods.
                inst._modules[mem.name] = value
            inst._dp_sig = self._forward_sig(mdef, env)
        finally:
            self.stack.pop()
        return inst

    def _forward_sig(self, mdef: ModuleDef, env: dict) -> list[dict] | None:
        if mdef.forward is None:
            return None
        out = []
        for p in mdef.forward.params:
            if isinstance(p, TensorParam):
                dims = []
                for d in p.dims[1:]:
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
        if inner._dp_sig is None:
            raise DpError(expr.pos, f"module {expr.func.id} has no forward")
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
        dims = p["dims"]
        bname = p["batch_name"]
        shown = [bname] + dims[1:]
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
        if n in self.env:
            return self.env[n]
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
        if isinstance(e, Unary):
            v = self.eval(e.operand)
            if isinstance(v, torch.Tensor) or _is_num(v):
                return -v
            raise DpError(e.pos, f"bad operand type for unary -: {_type_name(v)}")
        if isinstance(e, Binary):
            return self.binary(e, self.eval(e.left), self.eval(e.right))
        if isinstance(e, Index):
            return self.index(e)
        if isinstance(e, Subscript):
            return self.subscript(e)
        if isinstance(e, Attr):
            v = self.eval(e.value)
            if isinstance(v, torch.Tensor) and e.name == "shape":
                return tuple(int(d) for d in v.shape)
            if isinstance(v, torch.Tensor) and e.name == "ndim":
                return v.dim()
            raise DpError(e.pos, f"a {_type_name(v)} has no attribute '{e.name}'")
        if isinstance(e, Call):
            return self.call_expr(e)
        raise DpError(e.pos, "unsupported expression")

    def binary(self, e: Binary, a, b):
        ta, tb = isinstance(a, torch.Tensor), isinstance(b, torch.Tensor)
        if isinstance(a, tuple) and isinstance(b, tuple) and e.op == "+":
            return a + b  # x.size()[:-1] + (heads, d)
        if not (ta or tb):
            return scalar_arith(e.op, a, b, e.pos)
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

    def call_expr(self, e: Call):
        f = e.func
        # A builtin function, unless a local/member/parameter has that name.
        if (isinstance(f, Name) and f.id in BUILTIN_FUNCTIONS and f.id not in self.locals
                and f.id not in self.m._modules and f.id not in self.env):
            return self.call_builtin(e, f.id)
        callee = self.eval(f)
        label = _callee_label(f)
        if not isinstance(callee, nn.Module):
            raise DpError(e.pos, f"'{label}' is a {_type_name(callee)}, not callable")
        if isinstance(callee, nn.ModuleList):
            raise DpError(e.pos, f"'{label}' is a ModuleList; iterate it with for or call "
                                 f"an entry: {label}[0](x)")
        args = [self.eval(a) for a in e.args]
        kwargs = {k: self.eval(v) for k, v, _ in e.kwargs}
        if isinstance(callee, DpModule):
            return callee(*args, **kwargs)
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
        args = [self.eval(a) for a in e.args]
        kwargs = [(k, self.eval(v), p) for k, v, p in e.kwargs]
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
    elif isinstance(m, nn.BatchNorm2d):
        if x.dim() != 4 or x.shape[1] != m.num_features:
            fail(f"[N, {m.num_features}, H, W]")
    elif isinstance(m, nn.LayerNorm):
        ns = list(m.normalized_shape)
        if x.dim() < len(ns) or list(x.shape[x.dim() - len(ns):]) != ns:
            fail("[..., " + ", ".join(map(str, ns)) + "]")
    elif isinstance(m, nn.Embedding):
        if x.is_floating_point():
            raise DpError(pos, f"{label} expects integer indices, got {str(x.dtype).replace('torch.', '')}")
    elif isinstance(m, (nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d)):
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
        "tensor_params": [{"name": p["name"], "dtype": p["dtype"], "dims": list(p["dims"]),
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
