"""The CMSIS-NN calls that take a scratch buffer, read from the syntax tree of TVM's generated C.

TVM's cmsis-nn code generator writes, inside each operator function, a `cmsis_nn_context` with the
buffer it sized (`{NULL,0}` for none), the call's constant parameter structs, and one
`arm_cmsis_nn_status status = <kernel>(&context, ...);`. What the scratch plan needs of each call —
its kernel, its arguments, the constant structs they point to, the context's buffer and size — is
taken from the tree; the text of the context and of the call's line is located from the parser's
line and column (and checked), because that is what the scratch plan rewrites.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pycparser import c_ast, c_generator

from .cfront import CFrontError, ParsedFile, parse_sources
from .cmsis_nn_model import CONTEXT_TYPE
from .ctype import TypeTable, parse_int

_NULL_BUFFERS = ("NULL", "0", "(void *) 0", "((void *) 0)")


@dataclass(frozen=True)
class CmsisNnCall:
    """One CMSIS-NN call as TVM's cmsis-nn codegen writes it: inside an operator function, a context,
    constant parameter structs, then `arm_cmsis_nn_status status = <kernel>(&context, ...);`."""

    function: str  # the generated operator function holding the call
    kernel: str  # the CMSIS-NN function called
    arguments: tuple[str, ...]  # the call's argument expressions (C, from the syntax tree)
    context: str  # the context as written (`cmsis_nn_context context= {NULL,0}`), which the plan replaces
    buffer: str  # its buffer expression (0 for none)
    scratch_bytes: int  # its size (0 for none)
    constants: tuple[str, ...]  # declarations of the call's constant structs, in order (C, from the syntax tree)
    call: str  # the status line as written, before which the plan inserts its checks
    parameters: tuple[str, ...] = ()  # the operator function's parameter names
    # The constant structs' values by variable: {field: int, or {field: int} for a nested struct}
    values: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, hash=False)


def cmsis_nn_call_sites(sources: dict[str, str], include_dirs: tuple[Path, ...] = ()) -> list[tuple[str, CmsisNnCall]] | None:
    """Every context-taking CMSIS-NN call in the files, in order; None when the code cannot be read
    with the library's headers or a call is not in the shape TVM writes (then nothing about the calls
    is certain, and the code's own buffers are used as written)."""
    try:
        files = parse_sources(sources, include_dirs)
    except CFrontError:
        return None
    found = []
    for parsed in files:
        for node in parsed.tree.ext:
            if not isinstance(node, c_ast.FuncDef) or node.coord is None or node.coord.file != parsed.path:
                continue
            call = _call_in(node, parsed)
            if call is False:
                return None
            if call is not None:
                found.append((parsed.path, call))
    return found


def _call_in(function: c_ast.FuncDef, parsed: ParsedFile) -> CmsisNnCall | None | bool:
    """The function's one context-taking call (None: it has none; False: not in TVM's shape)."""
    items = function.body.block_items or []
    contexts = [i for i, item in enumerate(items) if isinstance(item, c_ast.Decl) and _type_name(item) == CONTEXT_TYPE]
    calls = [i for i, item in enumerate(items) if _status_call(item) is not None]
    if not contexts and not calls:
        return None
    if len(contexts) != 1 or len(calls) != 1 or contexts[0] > calls[0]:
        return False
    context, status = items[contexts[0]], items[calls[0]]
    call = _status_call(status)
    arguments = call.args.exprs if call.args else []
    if not arguments or not _address_of(arguments[0], context.name):
        return False
    init = context.init
    if not isinstance(init, c_ast.InitList) or len(init.exprs) != 2 or not isinstance(init.exprs[1], c_ast.Constant):
        return False
    size = parse_int(init.exprs[1].value)
    context_text, status_text = _text_of(parsed, context), _line_of(parsed, status)
    if size is None or context_text is None or status_text is None:
        return False
    generate = c_generator.CGenerator()
    buffer = generate.visit(init.exprs[0])
    params = function.decl.type.args.params if function.decl.type.args else []
    return CmsisNnCall(function=function.decl.name, kernel=call.name.name,
                       arguments=tuple(generate.visit(a) for a in arguments), context=context_text,
                       buffer=buffer, scratch_bytes=0 if buffer in _NULL_BUFFERS else size,
                       constants=_constants(items[:calls[0]], generate), call=status_text,
                       parameters=tuple(p.name or "" for p in params if isinstance(p, c_ast.Decl)),
                       values=_struct_values(items[:calls[0]], _types(parsed)))


def _status_call(item: c_ast.Node) -> c_ast.FuncCall | None:
    """`arm_cmsis_nn_status status = arm_<kernel>(...);`."""
    if isinstance(item, c_ast.Decl) and isinstance(item.init, c_ast.FuncCall) and \
            isinstance(item.init.name, c_ast.ID) and item.init.name.name.startswith("arm_"):
        return item.init
    return None


def _type_name(decl: c_ast.Decl) -> str:
    kind = decl.type
    if isinstance(kind, c_ast.TypeDecl) and isinstance(kind.type, c_ast.IdentifierType):
        return " ".join(kind.type.names)
    return ""


def _address_of(node: c_ast.Node, name: str) -> bool:
    return isinstance(node, c_ast.UnaryOp) and node.op == "&" and isinstance(node.expr, c_ast.ID) and \
        node.expr.name == name


def _constants(items: list, generate: c_generator.CGenerator) -> tuple[str, ...]:
    """The struct declarations whose initialisers hold only integers and earlier such structs."""
    known: set[str] = set()
    kept = []
    for item in items:
        if not (isinstance(item, c_ast.Decl) and _type_name(item).startswith("cmsis_nn_") and
                _type_name(item) != CONTEXT_TYPE and isinstance(item.init, c_ast.InitList)):
            continue
        if all(_constant_item(e, known) for e in item.init.exprs):
            known.add(item.name)
            kept.append(generate.visit(item) + ";")
    return tuple(kept)


def _types(parsed: ParsedFile) -> TypeTable:
    if parsed.path not in _TYPE_TABLES or _TYPE_TABLES[parsed.path][0] is not parsed.tree:
        _TYPE_TABLES[parsed.path] = (parsed.tree, TypeTable(parsed.tree))
    return _TYPE_TABLES[parsed.path][1]


_TYPE_TABLES: dict[str, tuple[c_ast.FileAST, TypeTable]] = {}


def _struct_values(items: list, types: TypeTable) -> dict[str, dict[str, Any]]:
    """The integer fields of the constant struct locals (`cmsis_nn_dims filter_dims = {1,10,4,64};`), by
    the field names of the library's own typedefs; nested structs by their variables' values."""
    found: dict[str, dict[str, Any]] = {}
    for item in items:
        if not (isinstance(item, c_ast.Decl) and _type_name(item).startswith("cmsis_nn_") and
                isinstance(item.init, c_ast.InitList)):
            continue
        ctype = types.resolve(item.type)
        if ctype.kind != "struct" or len(item.init.exprs) != len(ctype.fields):
            continue
        value = {}
        for name, expr in zip(ctype.fields, item.init.exprs):
            if isinstance(expr, c_ast.ID) and expr.name in found:
                value[name] = found[expr.name]
            else:
                number = _integer(expr)
                if number is None:
                    break
                value[name] = number
        else:
            found[item.name] = value
    return found


def _integer(node: c_ast.Node) -> int | None:
    if isinstance(node, c_ast.Constant):
        return parse_int(node.value)
    if isinstance(node, c_ast.UnaryOp) and node.op == "-" and isinstance(node.expr, c_ast.Constant):
        value = parse_int(node.expr.value)
        return None if value is None else -value
    return None


def _constant_item(node: c_ast.Node, known: set[str]) -> bool:
    if isinstance(node, c_ast.Constant):
        return True
    if isinstance(node, c_ast.UnaryOp) and node.op == "-" and isinstance(node.expr, c_ast.Constant):
        return True
    return isinstance(node, c_ast.ID) and node.name in known


def _line_of(parsed: ParsedFile, node: c_ast.Node) -> str | None:
    """The source line a statement is written on, when it is the whole line."""
    lines = parsed.text.split("\n")
    if node.coord is None or not 1 <= node.coord.line <= len(lines):
        return None
    text = lines[node.coord.line - 1].strip()
    return text if text.endswith(";") else None


def _text_of(parsed: ParsedFile, decl: c_ast.Decl) -> str | None:
    """`cmsis_nn_context context= {NULL,0}` as written: from the declaration's line, up to the brace
    that closes its initialiser."""
    line = _line_of(parsed, decl)
    if line is None or not line.startswith(CONTEXT_TYPE):
        return None
    end = line.find("}")
    return line[:end + 1] if end > 0 else None
