"""Compiling a selector: parse, rewrite, check, analyse reads, transpile to Python.

cel-python 0.5 lacks pieces the DRA environment needs, so this module works around
them instead of patching the library:

- Optional field selection (`x.?name`, `x[?key]`) is not in its grammar. Its lark
  grammar is loaded and extended with two rules, and the new nodes are rewritten into
  calls of internal functions `_?._` / `_[?_]`.
- `cel.bind(v, init, body)` becomes `[init].map(v, body)[0]`, which binds exactly once.
- `optional.of(x)` and `sets.contains(a, b)` become plain global functions.
- Its compiled runner looks functions up by Python module path, which fails for
  functions defined outside celpy, and re-runs `exec` on a shared module namespace
  for every evaluation. The transpiler phases are reused, but function references
  point into draco's own table, and the generated statements are wrapped once into a
  Python function that is then simply called per device.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import celpy
import celpy.celtypes as ct
import lark
from celpy.celparser import CELParser
from celpy.evaluation import (
    Activation,
    CELEvalError,
    Phase1Transpiler,
    Phase2Transpiler,
    Transpiler,
    TranspilerTree,
    celstr,
)
from lark import Token

from operators.cel.library import FUNCTIONS, NAMESPACES, BudgetExceeded
from operators.cel.runtime import MACROS, result

MAX_EXPRESSION_LENGTH = 10 * 1024  # upstream's CELSelectorExpressionMaxLength
MAX_AST_NODES = 20_000
MAX_AST_DEPTH = 600

DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity", "allowMultipleAllocations"})
MACRO_NAMES = frozenset({"all", "exists", "exists_one", "map", "filter"})
# Names the run-time Scope object itself defines; a variable cannot shadow them.
_SCOPE_ATTRIBUTES = frozenset({"resolve_variable", "nested_activation"})

# Rules that only wrap one child; `_core` looks through them.
_PASSTHROUGH = frozenset({
    "expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
    "unary", "member", "primary", "paren_expr",
})

if sys.getrecursionlimit() < 3000:
    sys.setrecursionlimit(3000)


class CompileError(Exception):
    pass


def _build_parser() -> lark.Lark:
    grammar = (Path(celpy.__file__).parent / "cel.lark").read_text()
    original = "member         : member_dot | member_dot_arg | member_index | member_object | primary"
    if original not in grammar:
        raise RuntimeError("unexpected cel-python grammar; cannot add optional selection")
    grammar = grammar.replace(
        original,
        "member         : member_dot | member_dot_arg | member_index | member_object"
        " | member_dot_opt | member_index_opt | primary\n"
        'member_dot_opt : member "." "?" IDENT\n'
        'member_index_opt : member "[" "?" expr "]"',
    )
    return lark.Lark(
        grammar,
        parser="lalr",
        start="expr",
        g_regex_flags=__import__("re").M,
        lexer_callbacks={"IDENT": CELParser.ambiguous_literals},
        propagate_positions=True,
        maybe_placeholders=False,
        priority="invert",
        tree_class=TranspilerTree,
    )


_PARSER = _build_parser()

# Reads: ("driver",), ("allowMultipleAllocations",), ("attribute", "dom/name"),
# ("capacity", "dom/name"), ("attribute-domain", "dom"), ("capacity-domain", "dom").
Read = tuple[str, ...]


@dataclass(frozen=True)
class Compiled:
    program: Callable[[Any], Any]
    reads: frozenset[Read] | None
    source: str


def compile_expression(expression: str) -> Compiled:
    """Raise CompileError with an upstream-like message, or return the program."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CompileError(
            f"expression too long: {len(expression)} characters, the limit is {MAX_EXPRESSION_LENGTH}"
        )
    try:
        tree = cast(TranspilerTree, _PARSER.parse(expression))
    except (lark.exceptions.UnexpectedInput, lark.exceptions.LexError) as ex:
        line = getattr(ex, "line", "?")
        column = getattr(ex, "column", "?")
        detail = str(ex).strip().splitlines()[0] if str(ex).strip() else type(ex).__name__
        raise CompileError(
            f"compilation failed: ERROR: <input>:{line}:{column}: Syntax error: {detail}"
        ) from None
    _check_size(tree)
    _rewrite(tree)
    _Checker().check(tree)
    _check_result_type(tree)
    reads = _analyse_reads(tree)
    try:
        program, source = _transpile(tree)
    except (RecursionError, SyntaxError, MemoryError):
        raise CompileError("compilation failed: expression is nested too deeply") from None
    except CompileError:
        raise
    except Exception as ex:  # a construct the transpiler cannot handle
        raise CompileError(f"compilation failed: unsupported expression ({ex})") from None
    return Compiled(program, reads, source)


# -- structure helpers -------------------------------------------------------------


def _trees(node: Any) -> Iterator[Any]:
    return (c for c in node.children if isinstance(c, lark.Tree))


def _core(node: Any) -> Any:
    while (
        isinstance(node, lark.Tree)
        and node.data in _PASSTHROUGH
        and len(node.children) == 1
        and isinstance(node.children[0], lark.Tree)
    ):
        node = node.children[0]
    return node


def _ident_name(node: Any) -> str | None:
    core = _core(node)
    if isinstance(core, lark.Tree) and core.data == "ident":
        return str(core.children[0])
    return None


def _string_literal(node: Any) -> str | None:
    core = _core(node)
    if isinstance(core, lark.Tree) and core.data == "literal":
        token = core.children[0]
        if isinstance(token, Token) and token.type in ("STRING_LIT", "MLSTRING_LIT"):
            return str(celstr(token))
    return None


def _args(node: Any, index: int) -> list[Any]:
    if len(node.children) > index and isinstance(node.children[index], lark.Tree):
        exprlist: Any = node.children[index]
        return list(exprlist.children)
    return []


def _check_size(tree: TranspilerTree) -> None:
    count = 0
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_AST_NODES:
            raise CompileError(f"expression too complex: more than {MAX_AST_NODES} syntax nodes")
        if depth > MAX_AST_DEPTH:
            raise CompileError("expression too complex: nested too deeply")
        stack.extend((c, depth + 1) for c in _trees(node))


def _new(data: str, children: list[Any], like: Any) -> TranspilerTree:
    return TranspilerTree(data, children, like.meta)


def _string_node(text: str, like: Any) -> TranspilerTree:
    return _new("literal", [Token("STRING_LIT", '"' + text + '"')], like)


# -- rewriting ---------------------------------------------------------------------


def _post_order(tree: TranspilerTree) -> list[TranspilerTree]:
    order: list[TranspilerTree] = []
    stack: list[tuple[TranspilerTree, bool]] = [(tree, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in _trees(node))
    return order


def _rewrite(tree: TranspilerTree) -> None:
    for node in _post_order(tree):
        if node.data == "member_dot_opt":
            member, name = node.children
            node.data = "member_dot_arg"
            node.children = [member, Token("IDENT", "_?._"),
                             _new("exprlist", [_string_node(str(name), node)], node)]
        elif node.data == "member_index_opt":
            member, key = node.children
            node.data = "member_dot_arg"
            node.children = [member, Token("IDENT", "_[?_]"), _new("exprlist", [key], node)]
        elif node.data == "member_dot_arg":
            _rewrite_namespace_call(node)


def _rewrite_namespace_call(node: TranspilerTree) -> None:
    namespace = _ident_name(node.children[0])
    method = str(node.children[1])
    if namespace == "cel" and method == "bind":
        args = _args(node, 2)
        if len(args) != 3 or _ident_name(args[0]) is None:
            raise CompileError("compilation failed: cel.bind() needs a name, a value and an expression")
        var, init, body = args
        listed = _new("member", [_new("primary", [_new("list_lit", [_new("exprlist", [init], node)], node)], node)], node)
        mapped = _new("member_dot_arg", [listed, Token("IDENT", "map"),
                                         _new("exprlist", [var, body], node)], node)
        node.data = "member_index"
        node.children = [_new("member", [mapped], node),
                         _new("literal", [Token("INT_LIT", "0")], node)]
    elif namespace in NAMESPACES:
        call: list[Any] = [Token("IDENT", f"{namespace}.{method}")]
        if len(node.children) > 2:
            call.append(node.children[2])
        node.data = "primary"
        node.children = [_new("ident_arg", call, node)]


# -- checking ---------------------------------------------------------------------


class _Checker:
    """Compile-time errors upstream's type checker would report for a dynamic device."""

    def check(self, tree: TranspilerTree) -> None:
        self._visit(tree, frozenset())

    def _visit(self, node: Any, bound: frozenset[str]) -> None:
        if not isinstance(node, lark.Tree):
            return
        kind = node.data
        if kind in ("ident", "dot_ident"):
            name = str(node.children[0])
            if name not in bound and name != "device":
                raise CompileError(f"compilation failed: undeclared reference to '{name}'")
            return
        if kind in ("ident_arg", "dot_ident_arg"):
            name = str(node.children[0])
            args = _args(node, 1)
            if name == "has":
                if len(args) != 1 or not (
                    isinstance(_core(args[0]), lark.Tree) and _core(args[0]).data == "member_dot"
                ):
                    raise CompileError("compilation failed: invalid argument to has() macro")
            elif name not in FUNCTIONS:
                raise CompileError(f"compilation failed: undeclared reference to '{name}'")
        elif kind == "member_dot":
            member, field = node.children
            if _ident_name(member) == "device" and "device" not in bound and str(field) not in DEVICE_FIELDS:
                raise CompileError(f"compilation failed: undefined field '{field}'")
        elif kind == "member_dot_arg":
            name = str(node.children[1])
            args = _args(node, 2)
            if name in MACRO_NAMES:
                var = _ident_name(args[0]) if args else None
                if len(args) != 2 or var is None:
                    raise CompileError(
                        f"compilation failed: {name}() needs a variable name and an expression"
                    )
                if var.startswith("_") or var in _SCOPE_ATTRIBUTES:
                    raise CompileError(f"compilation failed: reserved variable name '{var}'")
                self._visit(node.children[0], bound)
                self._visit(args[1], bound | {var})
                return
            if name not in FUNCTIONS:
                raise CompileError(f"compilation failed: undeclared reference to '{name}'")
        elif kind == "member_object":
            raise CompileError("compilation failed: message construction is not supported")
        for child in _trees(node):
            self._visit(child, bound)


_LITERAL_TYPES = {
    "INT_LIT": "int", "UINT_LIT": "uint", "FLOAT_LIT": "double", "STRING_LIT": "string",
    "MLSTRING_LIT": "string", "BYTES_LIT": "bytes", "NULL_LIT": "null_type",
}


def _check_result_type(tree: TranspilerTree) -> None:
    core = _core(tree)
    found: str | None = None
    if core.data == "literal":
        found = _LITERAL_TYPES.get(core.children[0].type)
    elif core.data == "list_lit":
        found = "list(dyn)"
    elif core.data == "map_lit":
        found = "map(dyn, dyn)"
    if found:
        raise CompileError(
            f"compilation failed: must evaluate to bool or the unknown type, not {found}"
        )


# -- reads ------------------------------------------------------------------------


class _Dynamic(Exception):
    pass


def _analyse_reads(tree: TranspilerTree) -> frozenset[Read] | None:
    reads: set[Read] = set()
    try:
        _collect(tree, frozenset(), reads)
    except _Dynamic:
        return None
    return frozenset(reads)


def _ref(node: Any, bound: frozenset[str]) -> Read | None:
    """What part of the device `node` denotes, if it is a plain path into it."""
    core = _core(node)
    if not isinstance(core, lark.Tree):
        return None
    if core.data == "ident":
        return ("device",) if str(core.children[0]) == "device" and "device" not in bound else None
    key: str | None
    if core.data == "member_dot":
        key = str(core.children[1])
    elif core.data == "member_index":
        key = _string_literal(core.children[1])
    elif core.data == "member_dot_arg" and str(core.children[1]) in ("_?._", "_[?_]"):
        args = _args(core, 2)
        key = _string_literal(args[0]) if len(args) == 1 else None
    else:
        return None
    if key is None:
        return None
    base = _ref(core.children[0], bound)
    if base == ("device",):
        return {"driver": ("driver",), "allowMultipleAllocations": ("allowMultipleAllocations",),
                "attributes": ("attributes",), "capacity": ("capacity",)}.get(key)
    if base == ("attributes",):
        return ("attribute-domain", key)
    if base == ("capacity",):
        return ("capacity-domain", key)
    if base is not None and base[0] == "attribute-domain":
        return ("attribute", f"{base[1]}/{key}")
    if base is not None and base[0] == "capacity-domain":
        return ("capacity", f"{base[1]}/{key}")
    return None


def _collect(node: Any, bound: frozenset[str], reads: set[Read]) -> None:
    if not isinstance(node, lark.Tree):
        return
    ref = _ref(node, bound)
    if ref is not None:
        if ref in (("device",), ("attributes",), ("capacity",)):
            raise _Dynamic()
        reads.add(ref)
        return
    if node.data == "member_dot_arg" and str(node.children[1]) in MACRO_NAMES:
        args = _args(node, 2)
        var = _ident_name(args[0]) if args else None
        _collect(node.children[0], bound, reads)
        if len(args) == 2 and var is not None:
            _collect(args[1], bound | {var}, reads)
        return
    for child in _trees(node):
        _collect(child, bound, reads)


# -- transpiling -------------------------------------------------------------------


class _Phase1(Phase1Transpiler):
    """cel-python's first phase, with functions resolved through draco's table."""

    def func_name(self, label: str) -> str:
        return f"__F[{label!r}]"

    def member_dot(self, tree: TranspilerTree) -> None:
        member, field = tree.children
        tree.transpiled = f"__F['_._']({cast(TranspilerTree, member).transpiled}, {str(field)!r})"

    def member_dot_arg(self, tree: TranspilerTree) -> None:
        name = str(tree.children[1])
        if name in ("min", "reduce"):  # list functions here, macros in cel-python
            member = cast(TranspilerTree, tree.children[0]).transpiled
            extra = ""
            if len(tree.children) == 3:
                extra = ", " + cast(TranspilerTree, tree.children[2]).transpiled
            tree.transpiled = f"__F[{name!r}]({member}{extra})"
            return
        super().member_dot_arg(tree)


_GLOBALS: dict[str, Any] = {
    "__builtins__": {"isinstance": isinstance},
    "__F": FUNCTIONS,
    "CELEvalError": CELEvalError,
    "None": None,
    "celpy": SimpleNamespace(
        celtypes=ct,
        evaluation=SimpleNamespace(result=result, **{f"macro_{k}": v for k, v in MACROS.items()}),
    ),
}


def _transpile(tree: TranspilerTree) -> tuple[Callable[[Any], Any], str]:
    facade = Transpiler(ast=tree, activation=Activation())
    _Phase1(facade).visit(tree)
    phase2 = Phase2Transpiler(facade)
    phase2.visit(tree)
    statements = "\n".join(phase2.statements(tree)).splitlines()
    body = ["    " + line for line in statements if line.strip()]
    source = "\n".join(["def __program(base_activation):", *body, "    return CEL"])
    namespace: dict[str, Any] = dict(_GLOBALS)
    exec(compile(source, "<cel>", "exec"), namespace)  # noqa: S102 - generated from the AST
    return cast(Callable[[Any], Any], namespace["__program"]), source


__all__ = ["BudgetExceeded", "CompileError", "Compiled", "compile_expression", "Read"]
