"""The constant tensors TVM's generated C hands its operators, with their bytes, from the syntax tree.

TVM links the weights into the code as `const` data with initialisers: with USMP, one
`static const struct global_const_workspace {...} global_const_workspace = {.constant_0_let = {...}}`
whose address tvmgen_<mod>_run passes to the AOT main, which carves each constant out at a literal
offset (`void* constant_0_let = (&(global_const_workspace_0_var[81920]));`) and hands it to an
operator; without USMP, one `static const int8_t constant_0[2560] = {...};` per constant, passed by
name. Here each operator parameter that receives the same constant address at every call is bound to
it, and the bytes at that address are rebuilt from the initialisers. Anything else (a pointer that is
reassigned, computed, or bound differently by two callers; a struct layout that does not match the
offsets the code carves) binds nothing: the build then keeps the code's run-time preparation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from pycparser import c_ast

from .cfront import ParsedFile, literal_value
from .ctype import CType, TypeTable, parse_int

_ALIGNED = re.compile(r"__attribute__\s*\(\(([^()]|\([^()]*\))*\baligned\s*\(\s*(\d+)\s*\)")


@dataclass(frozen=True)
class ConstantBytes:
    """`data` are the bytes of the read-only global `symbol` from `offset` on."""

    symbol: str
    offset: int
    data: bytes

    def array(self, dtype: str, count: int) -> np.ndarray | None:
        """`count` elements of `dtype` at the start (None: the constant is shorter)."""
        wanted = np.dtype(dtype).newbyteorder("<")
        if count < 0 or count * wanted.itemsize > len(self.data):
            return None
        return np.frombuffer(self.data, dtype=wanted, count=count).astype(dtype)


def operator_constants(files: list[ParsedFile]) -> dict[tuple[str, str], ConstantBytes]:
    """(function, parameter) -> the constant bytes that parameter receives at every call of the function."""
    globals_ = _constant_globals(files)
    functions = {node.decl.name: node for parsed in files for node in parsed.tree.ext
                 if isinstance(node, c_ast.FuncDef)}
    bindings: dict[tuple[str, str], tuple[str, int] | None] = {}
    # Parameters are bound through callers before callees: repeat until nothing changes (a call chain
    # of depth d needs d passes; TVM's is run -> main -> operator).
    for _ in range(8):
        before = dict(bindings)
        for name, node in functions.items():
            for call in _calls(node):
                callee = functions.get(call.name.name) if isinstance(call.name, c_ast.ID) else None
                if callee is None:
                    continue
                names = _parameter_names(callee)
                for index, argument in enumerate(call.args.exprs if call.args else []):
                    if index >= len(names):
                        break
                    target = _address(argument, node, name, bindings, globals_)
                    key = (callee.decl.name, names[index])
                    bindings[key] = target if bindings.get(key, target) == target else None
        if bindings == before:
            break
    found = {}
    for key, target in bindings.items():
        pieces = globals_.get(target[0]) if target is not None else None
        if pieces is not None and target[1] in pieces:  # the start of an array, or of a pool's member
            found[key] = ConstantBytes(target[0], target[1], pieces[target[1]])
    return found


def _calls(function: c_ast.FuncDef) -> list[c_ast.FuncCall]:
    found = []

    class Visitor(c_ast.NodeVisitor):
        def visit_FuncCall(self, node):
            found.append(node)
            self.generic_visit(node)

    Visitor().visit(function.body)
    return found


def _parameter_names(function: c_ast.FuncDef) -> list[str]:
    params = function.decl.type.args.params if function.decl.type.args else []
    return [p.name or "" for p in params if isinstance(p, c_ast.Decl)]


def _address(node: c_ast.Node, function: c_ast.FuncDef, name: str, bindings, globals_) -> tuple[str, int] | None:
    """The constant global and byte offset an argument expression points at, if it is one."""
    if isinstance(node, c_ast.Cast):
        return _address(node.expr, function, name, bindings, globals_)
    if isinstance(node, c_ast.UnaryOp) and node.op == "&":
        inner = node.expr
        if isinstance(inner, c_ast.ID) and inner.name in globals_ and not _local(function, inner.name):
            return inner.name, 0
        if isinstance(inner, c_ast.ArrayRef) and isinstance(inner.subscript, c_ast.Constant):
            base = _address(inner.name, function, name, bindings, globals_)
            index = parse_int(inner.subscript.value)
            step = _byte_step(inner.name, function)
            if base is not None and index is not None and step is not None:
                return base[0], base[1] + index * step
        return None
    if isinstance(node, c_ast.ID):
        local = _local(function, node.name)
        if local is None:
            if node.name in _parameter_names(function):
                return bindings.get((name, node.name))
            return (node.name, 0) if node.name in globals_ else None
        if local.init is None or _assigned(function, node.name):
            return None
        return _address(local.init, function, name, bindings, globals_)
    return None


def _byte_step(node: c_ast.Node, function: c_ast.FuncDef) -> int | None:
    """Bytes one index step moves through a pool pointer parameter (`uint8_t* global_const_workspace_0_var`)."""
    if not isinstance(node, c_ast.ID):
        return None
    params = function.decl.type.args.params if function.decl.type.args else []
    for param in params:
        if isinstance(param, c_ast.Decl) and param.name == node.name and isinstance(param.type, c_ast.PtrDecl):
            words = getattr(param.type.type.type, "names", [])
            if [w for w in words if w != "const"] in (["uint8_t"], ["int8_t"], ["char"], ["unsigned", "char"]):
                return 1
    return None


def _local(function: c_ast.FuncDef, variable: str) -> c_ast.Decl | None:
    for item in function.body.block_items or []:
        if isinstance(item, c_ast.Decl) and item.name == variable:
            return item
    return None


def _assigned(function: c_ast.FuncDef, variable: str) -> bool:
    """Whether the function writes the variable after declaring it, or takes its address."""
    hit = []

    class Visitor(c_ast.NodeVisitor):
        def visit_Assignment(self, node):
            if isinstance(node.lvalue, c_ast.ID) and node.lvalue.name == variable:
                hit.append(node)
            self.generic_visit(node)

        def visit_UnaryOp(self, node):
            if node.op in ("&", "++", "--", "p++", "p--") and isinstance(node.expr, c_ast.ID) and \
                    node.expr.name == variable:
                hit.append(node)
            self.generic_visit(node)

    Visitor().visit(function.body)
    return bool(hit)


# --- the bytes of the constant globals ----------------------------------------------------------------

def _constant_globals(files: list[ParsedFile]) -> dict[str, dict[int, bytes] | None]:
    """Every file-scope `const` array or struct with an initialiser: the bytes of each array in it, by
    its offset (None: not rebuilt)."""
    found: dict[str, dict[int, bytes] | None] = {}
    for parsed in files:
        types = TypeTable(parsed.tree)
        for node in parsed.tree.ext:
            if isinstance(node, c_ast.Decl) and node.name and "const" in (node.quals or []) and \
                    isinstance(node.init, c_ast.InitList) and not isinstance(node.type, c_ast.FuncDecl):
                found[node.name] = None if node.name in found else _pieces_of(node, parsed, types)
    return found


def _pieces_of(decl: c_ast.Decl, parsed: ParsedFile, types: TypeTable) -> dict[int, bytes] | None:
    ctype = types.resolve(decl.type)
    if ctype.kind == "array":
        data = _array_bytes(ctype, decl.init, parsed)
        return None if data is None else {0: data}
    if ctype.kind == "struct" and isinstance(decl.type, c_ast.TypeDecl) and isinstance(decl.type.type, c_ast.Struct):
        return _struct_pieces(decl.type.type, types, decl.init, parsed)
    return None


def _array_bytes(ctype: CType, init: c_ast.InitList, parsed: ParsedFile) -> bytes | None:
    """An integer or float array's bytes, little-endian as on every target mlfbuild builds for."""
    element = ctype.pointee
    if element is None or element.kind not in ("int", "float") or element.size not in (1, 2, 4, 8) or \
            ctype.size is None:
        return None
    values = parsed.numbers(init)
    if values is None:
        values = [_number(e) for e in init.exprs]
    if any(v is None for v in values) or len(values) * element.size > ctype.size:
        return None
    if element.kind == "float":
        return np.array(values, dtype=f"<f{element.size}").tobytes().ljust(ctype.size, b"\0")
    dtype = np.dtype(f"<{'i' if element.signed else 'u'}{element.size}")
    if any(not isinstance(v, int) for v in values) or \
            (values and (min(values) < np.iinfo(dtype).min or max(values) > np.iinfo(dtype).max)):
        return None
    return np.array(values, dtype=dtype).tobytes().ljust(ctype.size, b"\0")  # C zero-fills the rest


def _struct_pieces(struct: c_ast.Struct, types: TypeTable, init: c_ast.InitList,
                   parsed: ParsedFile) -> dict[int, bytes] | None:
    """TVM's constant pool: integer arrays, each at the next offset its alignment allows (the
    `aligned(N)` its declaration line states, which the preprocessor drops before the tree is built).
    Only designated initialisers; a member without one is zeros."""
    lines = parsed.text.split("\n")
    layout, offset = {}, 0
    for member in struct.decls or []:
        ctype = types.resolve(member.type)
        if ctype.kind != "array" or ctype.size is None or ctype.pointee is None or not member.name or \
                member.coord is None or member.coord.file != parsed.path:
            return None
        stated = _ALIGNED.search(lines[member.coord.line - 1]) if member.coord.line <= len(lines) else None
        alignment = max(int(stated.group(2)) if stated else 1, ctype.pointee.size or 1)
        offset = -(-offset // alignment) * alignment
        layout[member.name] = (offset, ctype)
        offset += ctype.size
    pieces = {start: bytes(ctype.size) for start, ctype in layout.values()}
    for item in init.exprs:
        if not (isinstance(item, c_ast.NamedInitializer) and len(item.name) == 1 and
                isinstance(item.name[0], c_ast.ID) and item.name[0].name in layout and
                isinstance(item.expr, c_ast.InitList)):
            return None
        start, ctype = layout[item.name[0].name]
        member = _array_bytes(ctype, item.expr, parsed)
        if member is None:
            del pieces[start]  # not rebuilt: nothing binds to it
        else:
            pieces[start] = member
    return pieces


def _number(node: c_ast.Node) -> int | float | None:
    sign = 1
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
        sign, node = (-1 if node.op == "-" else 1), node.expr
    if not isinstance(node, c_ast.Constant):
        return None
    try:
        return sign * literal_value(node.value)
    except ValueError:
        return None
