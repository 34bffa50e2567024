"""The USMP workspace pool of an AOT module with the C interface, proven from TVM's generated C.

With USMP on, TVM declares one static pool (`static uint8_t global_workspace[N];`), which
tvmgen_<mod>_run hands to the AOT main; the main carves every intermediate tensor out of it at a
literal offset and passes the regions to the operators, which carve their own buffers the same way.
The interpreter (interpreter.py) runs the module from tvmgen_<mod>_run and finds every region, the
bytes any access of it reaches and the steps that touch it. Each region can then be moved by
rewriting its offset literal. When anything is not proven, the answer is TVM's layout and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pycparser import c_ast

from .cfront import CFrontError, ParsedFile, parse_sources
from .ctype import parse_int
from .interpreter import Interpreter, NotProven

POOL = "global_workspace"


@dataclass(frozen=True)
class Site:
    """Where one offset literal (or the pool's length) is written: a character span of a source."""

    path: str
    start: int
    end: int


@dataclass
class Region:
    """Bytes [offset, offset + size) of the pool, used from step `first` to step `last` (both included)."""

    name: str  # sid_7_let (the main's), or <operator>:<variable> (an operator's own)
    offset: int  # where TVM put it
    first: int
    last: int
    sites: list[Site]
    size: int


@dataclass
class UsmpPool:
    declaration: Site | None  # the N of `global_workspace[N]`
    tvm_bytes: int
    regions: list[Region] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # the operators the main calls, in order
    call_spans: list[tuple[str, int, int]] = field(default_factory=list)  # each call: (operator, first, last step)
    operators: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # handed the pool: (its parameter, first, last step)
    untouched: list[Site] = field(default_factory=list)  # offsets of regions carved but never read or written
    # offsets the module's map functions (tvmgen_<mod>_map_inputs/_outputs: inputs and outputs in the pool)
    # hand the application: regions there cannot move
    mapped: list[Site] = field(default_factory=list)
    problem: str = ""  # why nothing about the regions is certain (empty when everything is proven)


def read_usmp_pool(sources: dict[str, str], module_name: str, include_dirs: tuple[Path, ...] = ()) -> UsmpPool | None:
    """The module's pool and its regions; None when the code declares no USMP pool."""
    if not any(POOL in text for text in sources.values()):
        return None
    try:
        files = parse_sources(sources, include_dirs)
    except CFrontError as exc:
        return UsmpPool(None, 0, problem=f"the generated C cannot be read: {exc}")
    declarations = [(parsed, node) for parsed in files for node in parsed.tree.ext
                    if isinstance(node, c_ast.Decl) and node.name == POOL]
    if not declarations:
        return None
    parsed, declaration = declarations[0]
    length = _array_length(declaration)
    pool = UsmpPool(None, length or 0)
    try:
        if len(declarations) > 1:
            raise NotProven(f"{len(declarations)} declarations of {POOL}")
        if length is None or "static" not in (declaration.storage or []):
            raise NotProven(f"{POOL} is not a static array of a literal length")
        pool.declaration = _site(parsed, declaration.type.dim)
        run = f"tvmgen_{module_name}_run"
        maps = {f"tvmgen_{module_name}_map_inputs", f"tvmgen_{module_name}_map_outputs"}
        _only_used_in(files, parsed, run, maps)
        pool.mapped = _mapped_offsets(parsed, maps)
        analysis = Interpreter(files, POOL, f"tvmgen_{module_name}___tvm_main__").run(run)
        by_path = {f.path: f for f in files}
        for carve in analysis.carves.values():
            if carve.first is None:
                continue  # carved but never touched: it needs no bytes
            path, line, column, text = carve.site
            pool.regions.append(Region(carve.name, carve.offset, carve.first, carve.last,
                                       [_literal_site(by_path[path], line, column, text)], carve.end))
        pool.untouched = [_literal_site(by_path[c.site[0]], *c.site[1:]) for c in analysis.carves.values()
                          if c.first is None]
        pool.calls = analysis.calls
        pool.call_spans = analysis.call_spans
        pool.operators = {name: (op.parameter, op.first, op.last) for name, op in analysis.operators.items()}
    except NotProven as exc:
        pool.problem = str(exc)
        pool.regions = []
    return pool


def _only_used_in(files: list[ParsedFile], home: ParsedFile, function: str, maps: set[str]) -> None:
    """The pool's name appears nowhere but in `function` (and the map functions of `maps`, which hand
    the application its inputs and outputs), in the file that declares it: every pointer into the pool
    then starts where the interpreter starts, or is handed to the application."""
    for parsed in files:
        for node in parsed.tree.ext:
            inside = isinstance(node, c_ast.FuncDef) and node.decl.name in {function} | maps and parsed is home
            for use in _identifiers(node, POOL):
                if not inside:
                    where = f"{use.coord.file}:{use.coord.line}" if use.coord else parsed.path
                    raise NotProven(f"{POOL} is used outside {function} ({where})")


def _mapped_offsets(home: ParsedFile, maps: set[str]) -> list[Site]:
    """The literal offsets of `&global_workspace[N]` in the map functions, the pool's only use there."""
    sites = []
    for node in home.tree.ext:
        if not (isinstance(node, c_ast.FuncDef) and node.decl.name in maps):
            continue
        for use in _pool_references(node):
            if not (isinstance(use, c_ast.ArrayRef) and isinstance(use.subscript, c_ast.Constant)):
                raise NotProven(f"{node.decl.name} uses {POOL} other than as &{POOL}[literal offset]")
            sites.append(_site(home, use.subscript))
    return sites


def _pool_references(node: c_ast.Node, parent: c_ast.Node | None = None):
    """Each use of the pool's name, as the node around it (the array reference)."""
    if isinstance(node, c_ast.ID) and node.name == POOL:
        yield parent
    for _, child in node.children():
        yield from _pool_references(child, node)


def _identifiers(node: c_ast.Node, name: str):
    if isinstance(node, c_ast.ID) and node.name == name:
        yield node
    for _, child in node.children():
        yield from _identifiers(child, name)


def _array_length(declaration: c_ast.Decl) -> int | None:
    kind = declaration.type
    if isinstance(kind, c_ast.ArrayDecl) and isinstance(kind.dim, c_ast.Constant):
        return parse_int(kind.dim.value)
    return None


def _site(parsed: ParsedFile, constant: c_ast.Constant) -> Site:
    return _literal_site(parsed, constant.coord.line, constant.coord.column or 0, constant.value)


def _literal_site(parsed: ParsedFile, line: int, column: int, text: str) -> Site:
    """The characters of a literal in the source as given, found from the parser's line and column."""
    lines = parsed.text.split("\n")
    if not 1 <= line <= len(lines) or column < 1:
        raise NotProven(f"{parsed.path}:{line}: the literal {text} is not where the parser says")
    start = sum(len(earlier) + 1 for earlier in lines[:line - 1]) + column - 1
    if parsed.text[start:start + len(text)] != text:
        raise NotProven(f"{parsed.path}:{line}: the literal {text} is not where the parser says (a macro?)")
    return Site(parsed.path, start, start + len(text))

