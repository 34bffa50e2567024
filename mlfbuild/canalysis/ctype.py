"""C types as the analysis needs them: is it an integer (and its range), a pointer (and the size of
what it points to), a struct (and its field names), or something else.

Sizes are the largest the type has on the targets mlfbuild builds for (Cortex-M and the 64-bit host):
a pointer's element size only ever widens what an access may touch, never narrows it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from .intervals import Interval

_INTEGERS = {  # base type words (sorted) -> (bytes, signed)
    ("char",): (1, True), ("char", "signed"): (1, True), ("char", "unsigned"): (1, False), ("_Bool",): (1, False),
    ("short",): (2, True), ("int", "short"): (2, True), ("short", "signed"): (2, True), ("short", "unsigned"): (2, False),
    ("int", "short", "unsigned"): (2, False), ("int", "short", "signed"): (2, True),
    ("int",): (4, True), ("signed",): (4, True), ("int", "signed"): (4, True), ("unsigned",): (4, False),
    ("int", "unsigned"): (4, False), ("long",): (8, True), ("int", "long"): (8, True), ("long", "unsigned"): (8, False),
    ("int", "long", "unsigned"): (8, False), ("long", "signed"): (8, True), ("long", "long"): (8, True),
    ("int", "long", "long"): (8, True), ("long", "long", "unsigned"): (8, False),
    ("int", "long", "long", "unsigned"): (8, False), ("long", "long", "signed"): (8, True),
}
# The C standard's exact-width types are what their names say on every target; pycparser's stand-in
# headers declare them all as int, so they are known here by name before any typedef is looked up.
_STANDARD = {"int8_t": (1, True), "uint8_t": (1, False), "int16_t": (2, True), "uint16_t": (2, False),
             "int32_t": (4, True), "uint32_t": (4, False), "int64_t": (8, True), "uint64_t": (8, False),
             "intptr_t": (8, True), "uintptr_t": (8, False), "size_t": (8, False), "ptrdiff_t": (8, True),
             "bool": (1, False)}
_FLOATS = {("float",): 4, ("double",): 8, ("double", "long"): 16}
POINTER_BYTES = 8


@dataclass(frozen=True)
class CType:
    kind: str  # int | float | pointer | struct | array | void | function | other
    size: int | None = None  # bytes (None: not known)
    signed: bool = True
    pointee: "CType | None" = None  # pointer and array element
    struct: str = ""  # struct or typedef name of a struct
    fields: tuple[str, ...] = ()  # a struct's field names in order
    field_types: tuple["CType", ...] = ()

    @property
    def element_bytes(self) -> int | None:
        """Bytes one step of a pointer of this type moves (void* moves 1, as GNU C does)."""
        if self.pointee is None:
            return None
        if self.pointee.kind == "void":
            return 1
        return self.pointee.size

    @property
    def range(self) -> Interval | None:
        if self.kind != "int" or self.size is None:
            return None
        bits = self.size * 8
        return Interval(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if self.signed else Interval(0, 2**bits - 1)


OTHER_TYPE = CType("other")
INT = CType("int", 4, True)


class TypeTable:
    """Typedefs and struct definitions of one translation unit."""

    def __init__(self, tree: c_ast.FileAST):
        self.typedefs: dict[str, c_ast.Node] = {}
        self.structs: dict[str, c_ast.Struct] = {}
        for node in tree.ext:
            if isinstance(node, c_ast.Typedef):
                self.typedefs[node.name] = node.type
            self._collect_structs(node)

    def _collect_structs(self, node: c_ast.Node) -> None:
        if isinstance(node, c_ast.Struct) and node.name and node.decls is not None:
            self.structs[node.name] = node
        for _, child in node.children():
            self._collect_structs(child)

    def resolve(self, node: c_ast.Node, depth: int = 0) -> CType:
        if depth > 32:
            return OTHER_TYPE
        if isinstance(node, (c_ast.Typename, c_ast.Decl)):
            return self.resolve(node.type, depth + 1)
        if isinstance(node, c_ast.PtrDecl):
            return CType("pointer", POINTER_BYTES, False, pointee=self.resolve(node.type, depth + 1))
        if isinstance(node, c_ast.ArrayDecl):
            element = self.resolve(node.type, depth + 1)
            count = _literal(node.dim)
            size = element.size * count if element.size is not None and count is not None else None
            return CType("array", size, pointee=element)
        if isinstance(node, c_ast.FuncDecl):
            return CType("function")
        if isinstance(node, c_ast.TypeDecl):
            return self.resolve(node.type, depth + 1)
        if isinstance(node, c_ast.IdentifierType):
            words = tuple(sorted(w for w in node.names if w not in ("const", "volatile")))
            if words in _INTEGERS:
                size, signed = _INTEGERS[words]
                return CType("int", size, signed)
            if words in _FLOATS:
                return CType("float", _FLOATS[words])
            if words == ("void",):
                return CType("void")
            if len(words) == 1 and words[0] in _STANDARD:
                size, signed = _STANDARD[words[0]]
                return CType("int", size, signed)
            if len(words) == 1 and words[0] in self.typedefs:
                resolved = self.resolve(self.typedefs[words[0]], depth + 1)
                if resolved.kind == "struct" and not resolved.struct:
                    return CType("struct", resolved.size, struct=words[0], fields=resolved.fields,
                                 field_types=resolved.field_types)
                return resolved
            return OTHER_TYPE
        if isinstance(node, c_ast.Struct):
            struct = node if node.decls is not None else self.structs.get(node.name or "")
            if struct is None or struct.decls is None:
                return CType("struct", struct=node.name or "")
            types = tuple(self.resolve(d.type, depth + 1) for d in struct.decls)
            return CType("struct", struct=node.name or "", fields=tuple(d.name or "" for d in struct.decls),
                         field_types=types)
        if isinstance(node, c_ast.Enum):
            return INT
        return OTHER_TYPE


def size_range(ctype: CType) -> Interval | None:
    """What `sizeof` of this type is on the targets mlfbuild builds for (None: not known): integers of
    at most 4 bytes, float and double are the same everywhere; 8-byte integers (long is 4 bytes on
    Cortex-M) and pointers are 4 or 8 bytes."""
    if ctype.size is None:
        return None
    if (ctype.kind == "int" and ctype.size <= 4) or (ctype.kind == "float" and ctype.size in (4, 8)):
        return Interval(ctype.size, ctype.size)
    if (ctype.kind == "int" and ctype.size == 8) or ctype.kind == "pointer":
        return Interval(4, 8)
    return None


def _literal(node) -> int | None:
    if isinstance(node, c_ast.Constant) and node.type in ("int", "unsigned int", "long int", "unsigned long int"):
        return parse_int(node.value)
    return None


def parse_int(text: str) -> int | None:
    """The value of a C integer literal (decimal, hex, octal, binary; any suffix), or None."""
    body = text.rstrip("uUlL")
    try:
        if body.lower().startswith(("0x", "0b")):
            return int(body, 0)
        if len(body) > 1 and body.startswith("0"):
            return int(body, 8)
        return int(body, 10)
    except ValueError:
        return None
