"""Identity copies in TVM's generated C: operator functions whose whole work is `dst[i] = src[i]` for
every i < N, each once, element by element (TVM lowers a RESHAPE so: ad's 640 bytes take ~2,800
instructions on a Cortex-M4). They are found from the syntax tree and replaced by memcpy.

The criterion, every part checked: the function's body is one nest of `for` loops with literal
bounds and unit steps, then `return 0;`; the innermost body declares integer locals from the loop
variables and literals, then makes exactly one assignment `dst[e1] = src[e2]` where dst and src are two
distinct pointer parameters to the same exact-width element type. The iteration space (at most
MAX_ITERATIONS) is enumerated here, each index evaluated as the C does (a value outside its type's
range, a negative operand of / % << >>, anything else unknown: not an identity copy): e1 == e2 at
every iteration and the indices are 0..N-1, each once.

memcpy does what the loop does only where the two buffers do not overlap (with dst above src and
overlapping, the forward loop repeats bytes, which memmove would not). Which buffers an operator is
handed is decided by its callers, and an exported library's caller is the user's code, so the
replacement tests it where it runs: disjoint buffers take memcpy, anything else TVM's loop as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pycparser import c_ast

from .cfront import CFrontError, ParsedFile, parse_sources
from .ctype import parse_int

MAX_ITERATIONS = 1 << 20  # larger nests are left as TVM wrote them (enumerating them costs build time)
_ELEMENT_BYTES = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4,
                  "int64_t": 8, "uint64_t": 8, "float": 4, "double": 8}
_INDEX_RANGES = {"int32_t": (-2**31, 2**31 - 1), "int": (-2**31, 2**31 - 1), "int64_t": (-2**63, 2**63 - 1)}
_IDENTIFIER = re.compile(r"(?<![A-Za-z0-9_.])[A-Za-z_][A-Za-z0-9_]*")  # not a literal's suffix (16u, 0x10)


class _NotACopy(Exception):
    """The function is not an identity copy (the message says why; kept for debugging)."""


@dataclass(frozen=True)
class IdentityCopy:
    """An operator function that copies `count` elements from `source` to `destination` unchanged."""

    path: str  # the generated C file (MLF-relative)
    function: str
    destination: str  # parameter names
    source: str
    element: str  # the C element type
    count: int
    loop: str  # the loop nest as written in the file, which the replacement keeps for overlapping buffers
    head: str = ""  # the file's text from the function's first line to the loop: where the loop is

    @property
    def nbytes(self) -> int:
        return self.count * _ELEMENT_BYTES[self.element]

    @property
    def reason(self) -> str:
        return (f"{self.destination}[i] = {self.source}[i] for every i < {self.count}, each once "
                f"({self.element}, {self.nbytes:,} B)")

    def replacement(self) -> str:
        """The loop nest's replacement: memcpy when the buffers are disjoint, the loop as written when not.
        (An object of n bytes ends at most at the top of the address space, so `p + n` does not wrap.)"""
        dst, src, n = self.destination, self.source, f"{self.nbytes}u"
        return (f"/* mlfbuild: an identity copy of {self.nbytes} B ({self.reason.split(' (')[0]}): memcpy where "
                f"the buffers are disjoint, TVM's loop otherwise */\n"
                f"  if ((uintptr_t){dst} + {n} <= (uintptr_t){src} || (uintptr_t){src} + {n} <= (uintptr_t){dst}) {{\n"
                f"    (void)memcpy({dst}, {src}, {n});\n"
                f"  }} else {self.loop}")

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "kind": "identity_copy", "replacement": "memcpy",
                "destination": self.destination, "source": self.source, "element": self.element,
                "elements": self.count, "bytes": self.nbytes, "reason": self.reason}

    def describe(self) -> str:
        return f"{self.function}: TVM's element-wise copy loop -> memcpy ({self.reason})"


HEADERS = "#include <stdint.h>  /* mlfbuild: uintptr_t and memcpy for the identity copies below */\n#include <string.h>\n"


def identity_copies(sources: dict[str, str], include_dirs: tuple[Path, ...] = ()) -> list[IdentityCopy]:
    """Every identity copy among the files' functions (none when the C cannot be read: TVM's code stays)."""
    try:
        files = parse_sources(sources, include_dirs)
    except CFrontError:
        return []
    found = []
    for parsed in files:
        for node in parsed.tree.ext:
            if isinstance(node, c_ast.FuncDef) and node.coord is not None and node.coord.file == parsed.path:
                try:
                    found.append(_identity_copy(node, parsed))
                except _NotACopy:
                    continue
    return found


def rewrite(text: str, copies: list[IdentityCopy]) -> tuple[str, list[IdentityCopy]]:
    """`text` with each copy's loop nest replaced, and the headers the replacements need included
    first; and the copies replaced (a loop not found exactly once, as written, is left alone)."""
    done = []
    for copy in copies:  # two functions may hold the same loop: each is found after its own head
        if text.count(copy.head + copy.loop) == 1:
            text = text.replace(copy.head + copy.loop, copy.head + copy.replacement())
            done.append(copy)
    return (HEADERS + text if done else text), done


# --- the criterion ---------------------------------------------------------------------------------

def _identity_copy(function: c_ast.FuncDef, parsed: ParsedFile) -> IdentityCopy:
    pointers = _pointer_parameters(function)
    items = function.body.block_items or []
    if len(items) != 2 or not isinstance(items[0], c_ast.For) or not _returns_zero(items[1]):
        raise _NotACopy("not one loop nest and `return 0;`")
    loops, locals_, assignment = _nest(items[0])
    destination, target = _array_ref(assignment.lvalue)
    source, value = _array_ref(assignment.rvalue)
    if destination == source or destination not in pointers or source not in pointers:
        raise _NotACopy("not between two distinct pointer parameters")
    (element, writable), (element_src, _) = pointers[destination], pointers[source]
    if element != element_src or element not in _ELEMENT_BYTES or not writable:
        raise _NotACopy("not the same exact-width element type, or the destination is const")
    names = [name for name, _, _ in loops] + [name for name, _, _ in locals_]
    if len(set(names)) != len(names) or set(names) & set(pointers):
        raise _NotACopy("a name declared twice")
    count = _indices_are_identity(loops, locals_, target, value)
    start, loop = _loop_text(items[0], parsed)
    line = function.coord.line if function.coord else 0
    head_start = sum(len(text) + 1 for text in parsed.text.split("\n")[:line - 1])
    head = parsed.text[head_start:start]
    if line < 1 or function.decl.name not in head:
        raise _NotACopy("the function's definition is not where the parser says")
    return IdentityCopy(parsed.path, function.decl.name, destination, source, element, count, loop, head)


def _pointer_parameters(function: c_ast.FuncDef) -> dict[str, tuple[str, bool]]:
    """name -> (element type, writable) of the parameters that are pointers to a plain named type."""
    found = {}
    args = function.decl.type.args
    for param in (args.params if args else []):
        kind = getattr(param, "type", None)
        if isinstance(kind, c_ast.PtrDecl) and isinstance(kind.type, c_ast.TypeDecl) \
                and isinstance(kind.type.type, c_ast.IdentifierType) and len(kind.type.type.names) == 1 \
                and "volatile" not in kind.type.quals and "volatile" not in kind.quals:
            found[param.name] = (kind.type.type.names[0], "const" not in kind.type.quals)
    return found


def _returns_zero(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.Return) and isinstance(node.expr, c_ast.Constant) and parse_int(node.expr.value) == 0


def _nest(loop: c_ast.For):
    """[(variable, first, end)] outermost first, [(local, type, initialiser)], the one assignment."""
    loops = []
    node: c_ast.Node = loop
    while isinstance(node, c_ast.For):
        loops.append(_bounds(node))
        body = node.stmt
        items = (body.block_items or []) if isinstance(body, c_ast.Compound) else [body]
        if len(items) == 1 and isinstance(items[0], c_ast.For):
            node = items[0]
            continue
        *declarations, last = items if items else [None]
        locals_ = [_integer_local(d) for d in declarations]
        if not isinstance(last, c_ast.Assignment) or last.op != "=":
            raise _NotACopy("the innermost body is not declarations and one assignment")
        return loops, locals_, last
    raise _NotACopy("not a loop")


def _bounds(loop: c_ast.For) -> tuple[str, int, int]:
    """A loop `for (T v = a; v < b; ++v)` (or <=, v++, v += 1) as (v, a, b exclusive)."""
    init = loop.init
    if not (isinstance(init, c_ast.DeclList) and len(init.decls) == 1):
        raise _NotACopy("the loop does not declare its variable")
    name, ctype, first = _integer_local(init.decls[0])
    first = _literal(first)
    cond, step = loop.cond, loop.next
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", "<=") and _is_id(cond.left, name)):
        raise _NotACopy("the loop's condition is not `v < literal`")
    end = _literal(cond.right) + (1 if cond.op == "<=" else 0)
    unit = (isinstance(step, c_ast.UnaryOp) and step.op in ("++", "p++") and _is_id(step.expr, name)) or (
        isinstance(step, c_ast.Assignment) and step.op == "+=" and _is_id(step.lvalue, name)
        and _literal(step.rvalue) == 1)
    low, high = _INDEX_RANGES[ctype]
    if not unit or not (low <= first and end - 1 <= high):
        raise _NotACopy("the loop does not step by one within its type")
    return name, first, end


def _integer_local(node: c_ast.Node) -> tuple[str, str, c_ast.Node]:
    kind = getattr(node, "type", None)
    if not (isinstance(node, c_ast.Decl) and isinstance(kind, c_ast.TypeDecl) and isinstance(kind.type, c_ast.IdentifierType)
            and len(kind.type.names) == 1 and kind.type.names[0] in _INDEX_RANGES and node.init is not None
            and not node.storage and "volatile" not in kind.quals):
        raise _NotACopy("not an initialised integer local")
    return node.name, kind.type.names[0], node.init


def _literal(node: c_ast.Node) -> int:
    value = parse_int(node.value) if isinstance(node, c_ast.Constant) and node.type.endswith("int") else None
    if value is None:
        raise _NotACopy("not an integer literal")
    return value


def _is_id(node: c_ast.Node, name: str) -> bool:
    return isinstance(node, c_ast.ID) and node.name == name


def _array_ref(node: c_ast.Node) -> tuple[str, c_ast.Node]:
    if not (isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ID)):
        raise _NotACopy("not `pointer[index]`")
    return node.name.name, node.subscript


# --- the iteration space ---------------------------------------------------------------------------

def _indices_are_identity(loops, locals_, target: c_ast.Node, value: c_ast.Node) -> int:
    """The number of iterations, when at each one the two indices are equal and together they are
    0..N-1 each once (_NotACopy otherwise)."""
    counts = [end - first for _, first, end in loops]
    total = int(np.prod(counts, dtype=np.int64)) if all(c > 0 for c in counts) else 0
    if total == 0 or total > MAX_ITERATIONS:
        raise _NotACopy("no iterations, or more than are enumerated")
    grids = np.meshgrid(*[np.arange(first, end, dtype=np.int64) for _, first, end in loops], indexing="ij")
    env = {name: grid.reshape(-1) for (name, _, _), grid in zip(loops, grids)}
    for name, ctype, init in locals_:
        env[name] = _checked(_evaluate(init, env), ctype)
    written, read = _checked(_evaluate(target, env), "int64_t"), _checked(_evaluate(value, env), "int64_t")
    written, read = np.broadcast_to(written, (total,)), np.broadcast_to(read, (total,))
    if not np.array_equal(written, read) or not np.array_equal(np.sort(written), np.arange(total)):
        raise _NotACopy("the indices differ, or do not cover 0..N-1 once each")
    return total


def _evaluate(node: c_ast.Node, env: dict[str, np.ndarray]) -> np.ndarray:
    """An integer expression over every iteration at once, as the C computes it in int32 (a value that
    would leave int32, where the C's would be undefined or wrap, is not followed)."""
    if isinstance(node, c_ast.Constant):
        return np.int64(_literal(node))
    if isinstance(node, c_ast.ID):
        if node.name not in env:
            raise _NotACopy(f"{node.name} is not a loop variable or local")
        return env[node.name]
    if isinstance(node, c_ast.Cast) and isinstance(node.to_type.type, c_ast.TypeDecl) \
            and isinstance(node.to_type.type.type, c_ast.IdentifierType) and len(node.to_type.type.type.names) == 1 \
            and node.to_type.type.type.names[0] in _INDEX_RANGES:
        return _checked(_evaluate(node.expr, env), node.to_type.type.type.names[0])
    if isinstance(node, c_ast.BinaryOp):
        left, right = _evaluate(node.left, env), _evaluate(node.right, env)
        if node.op in ("+", "-", "*"):
            return _checked({"+": np.add, "-": np.subtract, "*": np.multiply}[node.op](left, right), "int32_t")
        if node.op in ("/", "%", "<<", ">>"):
            if np.any(left < 0) or np.any(right < 0) or (node.op in ("/", "%") and np.any(right == 0)) \
                    or (node.op in ("<<", ">>") and np.any(right > 30)):
                raise _NotACopy("an operand C would treat differently")  # negative: truncation, not floor
            operation = {"/": np.floor_divide, "%": np.remainder, "<<": np.left_shift, ">>": np.right_shift}[node.op]
            return _checked(operation(left, right), "int32_t")
    raise _NotACopy("an index expression beyond + - * / % << >>")


def _checked(values: np.ndarray, ctype: str) -> np.ndarray:
    low, high = _INDEX_RANGES[ctype]
    if np.any(values < low) or np.any(values > high):
        raise _NotACopy("an index leaves its type's range")
    return values


# --- the loop as written ----------------------------------------------------------------------------

def _loop_text(loop: c_ast.For, parsed: ParsedFile) -> tuple[int, str]:
    """Where the loop nest starts in the file as given, and its characters: from its `for` to the brace
    that closes its body. Held to the tree: the same identifiers, so no macro stands between the text
    and the tree."""
    coord = loop.coord
    if coord is None or coord.file != parsed.path:
        raise _NotACopy("the loop is not in the file itself")
    lines = parsed.text.split("\n")
    if not 1 <= coord.line <= len(lines) or not coord.column:
        raise _NotACopy("the loop is not where the parser says")
    start = sum(len(line) + 1 for line in lines[:coord.line - 1]) + coord.column - 1
    if not parsed.text.startswith("for", start):
        raise _NotACopy("the loop is not where the parser says")
    end = _closing_brace(parsed.text, start)
    text = parsed.text[start:end]
    if set(_IDENTIFIER.findall(text)) != _tree_identifiers(loop):
        raise _NotACopy("the loop's text is not what the tree says (a macro?)")
    return start, text


def _closing_brace(text: str, start: int) -> int:
    """Just past the `}` closing the first `{` after `start`; comments, strings and characters skipped."""
    depth, index, opened = 0, start, False
    while index < len(text):
        char = text[index]
        if text.startswith("//", index):
            index = text.find("\n", index)
            index = len(text) if index < 0 else index
        elif text.startswith("/*", index):
            close = text.find("*/", index + 2)
            if close < 0:
                break
            index = close + 2
            continue
        elif char in "\"'":
            index += 1
            while index < len(text) and text[index] != char:
                index += 2 if text[index] == "\\" else 1
        elif char == "{":
            depth, opened = depth + 1, True
        elif char == "}":
            depth -= 1
            if opened and depth == 0:
                return index + 1
        elif char == ";" and not opened and depth == 0 and text[start:index].count("(") == text[start:index].count(")"):
            raise _NotACopy("the loop's body has no braces")
        index += 1
    raise _NotACopy("the loop's body does not close")


def _tree_identifiers(node: c_ast.Node) -> set[str]:
    """Every name the loop's tree spells: variables, declared names, type names and keywords."""
    names = {"for"}
    if isinstance(node, c_ast.ID):
        names.add(node.name)
    elif isinstance(node, c_ast.Decl) and node.name:
        names.add(node.name)
        names.update(getattr(node, "quals", []) or [])
    elif isinstance(node, c_ast.IdentifierType):
        names.update(node.names)
    elif isinstance(node, c_ast.TypeDecl):
        names.update(node.quals or [])
    for _, child in node.children():
        names |= _tree_identifiers(child)
    return names
