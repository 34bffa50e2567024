"""TVM's workspace allocator (TVMBackendAllocWorkspace without USMP), proven from the generated C.

crt/src/backend.c serves the calls from one buffer as a stack: each block rounded up to 16 bytes,
each free the block on top. The interpreter (interpreter.py) runs every function of the module with
the allocator's stack as part of its state, so the peak it finds holds on every path: a size without
a bound, a free that is not of the last block, or paths that meet holding different blocks make the
answer "not known", and the caller falls back to TVM's figure with slack.
"""

from __future__ import annotations

from pathlib import Path

from pycparser import c_ast

from .cfront import CFrontError, ParsedFile, parse_sources
from .ctype import parse_int
from .interpreter import ALLOCATE, Interpreter, NotProven


def allocation_peaks(sources: dict[str, str], include_dirs: tuple[Path, ...] = ()) -> tuple[dict[str, int] | None, str]:
    """({function: most bytes held at once while it runs}, "") or (None, why not known)."""
    try:
        files = parse_sources(sources, include_dirs)
    except CFrontError as exc:
        return None, f"the generated C cannot be read: {exc}"
    interpreter = Interpreter(files, pool_name=None, main_name="")
    peaks = {}
    try:
        for name in sorted(interpreter.functions):
            peaks[name] = interpreter.allocation_peak_of(name)
    except NotProven as exc:
        return None, str(exc)
    return peaks, ""


def allocation_call_sizes(sources: dict[str, str], include_dirs: tuple[Path, ...] = ()) -> list[int]:
    """The byte count of every TVMBackendAllocWorkspace call in the code (0 where it is not a literal)."""
    try:
        files = parse_sources(sources, include_dirs)
    except CFrontError:
        return [0] * sum(text.count(ALLOCATE) for text in sources.values())
    return [_literal_size(call) for parsed in files for call in _calls(parsed.tree, ALLOCATE)]


def _calls(node: c_ast.Node, name: str):
    if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) and node.name.name == name:
        yield node
    for _, child in node.children():
        yield from _calls(child, name)


def _literal_size(call: c_ast.FuncCall) -> int:
    args = call.args.exprs if call.args else []
    size = args[2] if len(args) > 2 else None
    while isinstance(size, c_ast.Cast):
        size = size.expr
    value = parse_int(size.value) if isinstance(size, c_ast.Constant) else None
    return value or 0


__all__ = ["allocation_peaks", "allocation_call_sizes", "ParsedFile"]
