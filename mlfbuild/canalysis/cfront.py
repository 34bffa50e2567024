"""C sources to syntax trees: the build's own preprocessor, then pycparser.

The generated C is preprocessed as the compiler would see it: by the compiler the build uses (for a
Cortex-M board the cross compiler with the board's -mcpu/-mfpu/-mfloat-abi, so that its feature
macros and its own headers, <arm_acle.h> for TVM's DSP micro-kernels, are the ones the code sees;
for the host board the host's gcc), with the MLF's headers, mlfbuild's TVM runtime headers, the
CMSIS-NN headers where the code includes them, and pycparser's stand-ins for the C library's headers
(they declare the same names; the analysis never reads a C library's code). GNU attributes, keywords
and asm statements, which pycparser does not parse and which do not change what the code does with
the pool, are removed by the preprocessor; the compiler's builtins (ACLE intrinsics expand to
`__builtin_arm_*` calls) stay calls of functions the code does not define. Anything else that does not
parse is an error naming the file and line: the caller keeps what TVM decided rather than guess.
"""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pycparser
import pycparser_fake_libc
from pycparser import c_ast

from ..errors import BuildError
from ..resources import data_dir
from ..toolchain import first_error, run_compiler
from .ctype import parse_int

PREPROCESS_SECONDS = 10  # the generated C preprocesses in milliseconds; an include of a FIFO waits forever
PREPROCESS_MEMORY = 512 * 2**20  # an include of /dev/zero grows without end
# Spellings pycparser does not read that change nothing about memory: attributes (alignment,
# sections, visibility), GNU keywords for inline/restrict, and the extension marker; MLF_POOL_ANALYSIS
# gives the generated MVE kernels' stand-ins for <arm_mve.h> (importer/mve_kernels.py), which pycparser
# cannot read: each names the bytes its instruction loads or stores.
_GNU_SPELLINGS = ("-D__attribute__(x)=", "-D__extension__=", "-D__restrict=", "-D__restrict__=",
                  "-D__inline=inline", "-D__inline__=inline", "-D__volatile__=volatile", "-D__asm__(...)=",
                  "-D__asm(...)=", "-DMLF_POOL_ANALYSIS")


@dataclass(frozen=True)
class Preprocessor:
    """The compiler that reads the code as the build will compile it: its name (None: the host's gcc)
    and the board's CPU flags. A cross compiler keeps its own headers (arm_acle.h, arm_mve.h) on the
    include path, behind pycparser's stand-ins for the C library's."""

    compiler: str | None = None
    flags: tuple[str, ...] = ()

    def describe(self) -> str:
        return " ".join((self.compiler or "gcc", *self.flags))


HOST = Preprocessor()


class HeaderSearch(tuple):
    """The include folders the analyses take (a tuple of Paths) and the preprocessor that reads the
    code with them."""

    preprocessor: Preprocessor

    def __new__(cls, folders=(), preprocessor: Preprocessor = HOST):
        search = super().__new__(cls, folders)
        search.preprocessor = preprocessor
        return search


# A brace list of numeric literals only (a weight table): every token starts with a digit, a sign or a
# point, so no name can be inside. Such lists are read as `{0}` (with their line breaks kept, so lines
# stay where they were): parsing 300,000 numbers is slow, and only the build-time preparation of
# constants reads them, through `ParsedFile.numbers`.
_NUMBER = (r"[-+]?+(?:0[xX][0-9a-fA-F]++|[0-9]++(?:\.[0-9]*+)?+(?:[eE][-+]?+[0-9]++)?+|\.[0-9]++(?:[eE][-+]?+[0-9]++)?+)"
           r"[uUlLfF]*+")  # possessive throughout: a list that does not close fails in one pass
_NUMBER_LIST = re.compile(r"\{\s*+" + _NUMBER + r"(?:\s*+,\s*+" + _NUMBER + r"){16,}+\s*+,?+\s*+\}")


class CFrontError(Exception):
    """The C could not be read into a syntax tree; the message says which file and why."""


@dataclass(frozen=True)
class ParsedFile:
    path: str  # as the caller named it (the MLF-relative path)
    text: str  # the source as given
    tree: c_ast.FileAST
    # The brace lists of numbers read as `{0}`, as written, by where the tree places that `0`:
    # (file, line, column), the file as the tree's coordinates name it.
    lists: dict[tuple[str, int, int], str] = field(default_factory=dict)

    def numbers(self, init: c_ast.InitList) -> list[int | float] | None:
        """The literals of an initialiser the front end read as `{0}` (None: it was not one of those)."""
        if len(init.exprs) != 1 or init.exprs[0].coord is None:
            return None
        coord = init.exprs[0].coord
        text = self.lists.get((coord.file, coord.line, coord.column))
        if text is None:
            return None
        items = [item.strip() for item in text.strip()[1:-1].split(",")]
        return [literal_value(item) for item in items if item]


def runtime_include_dir() -> Path:
    """mlfbuild's copy of TVM's runtime headers (c_runtime_api.h, c_backend_api.h, dlpack)."""
    return data_dir("crt") / "include"


def parse_sources(sources: dict[str, str], include_dirs: list[Path] | tuple[Path, ...] = ()) -> list[ParsedFile]:
    """Every source preprocessed and parsed; CFrontError on the first that cannot be. One build asks
    for the same module several times (its pool, its allocations, its CMSIS-NN calls): the trees of
    the last few are kept (nothing changes a tree once parsed), and so is a failure: code whose
    preprocessing timed out (an include of a FIFO) costs the time limit once, not once per analysis."""
    preprocessor = getattr(include_dirs, "preprocessor", HOST)
    key = (tuple(sorted(sources.items())), tuple(str(d) for d in include_dirs), preprocessor)
    if key not in _PARSED:
        try:
            _PARSED[key] = _parse_all(sources, include_dirs, preprocessor)
        except CFrontError as exc:
            _PARSED[key] = exc
        while len(_PARSED) > _KEEP:
            del _PARSED[next(iter(_PARSED))]
    parsed = _PARSED[key]
    if isinstance(parsed, CFrontError):
        raise CFrontError(str(parsed))
    return parsed


_PARSED: dict[tuple, list[ParsedFile] | CFrontError] = {}
_KEEP = 4


def _parse_all(sources: dict[str, str], include_dirs, preprocessor: Preprocessor) -> list[ParsedFile]:
    command = _preprocessor_command(preprocessor)
    with tempfile.TemporaryDirectory(prefix="mlfbuild-c-") as scratch:
        root = Path(scratch)
        parsed = []
        for path, text in sorted(sources.items()):
            tree, lists = _parse_one(command, root, path, text, include_dirs)
            parsed.append(ParsedFile(path, text, tree, lists))
        return parsed


@functools.lru_cache(maxsize=8)
def _preprocessor_command(preprocessor: Preprocessor) -> tuple[str, ...]:
    """The compiler and the flags that make it read the code as the build does, its own headers last."""
    if preprocessor.compiler is None:
        compiler = shutil.which("gcc") or shutil.which("cc")
        if compiler is None:
            raise CFrontError("no host C preprocessor (gcc) to read the generated C with")
        return (compiler,)
    compiler = shutil.which(preprocessor.compiler)
    if compiler is None:
        raise CFrontError(f"no {preprocessor.compiler} to read the generated C with, as the build compiles it")
    try:
        done = run_compiler([compiler, *preprocessor.flags, "-print-file-name=include"],
                            memory=PREPROCESS_MEMORY, timeout=PREPROCESS_SECONDS)
    except BuildError as exc:
        raise CFrontError(f"{preprocessor.compiler} did not say where its headers are: {exc}") from None
    own_headers = done.stdout.strip()
    if done.returncode != 0 or not Path(own_headers).is_dir():
        raise CFrontError(f"{preprocessor.compiler} did not say where its headers are (arm_acle.h)")
    return (compiler, *preprocessor.flags, "-isystem", own_headers)


def _parse_one(command: tuple[str, ...], root: Path, path: str, text: str, include_dirs) -> tuple[c_ast.FileAST, dict]:
    name = Path(path).name
    source = root / f"{len(list(root.iterdir()))}" / name
    source.parent.mkdir()
    source.write_text(text, errors="surrogateescape")
    flags = ["-E", "-std=gnu11", "-nostdinc", "-I", pycparser_fake_libc.directory, "-I", str(runtime_include_dir()),
             *(arg for folder in include_dirs for arg in ("-I", str(folder))), *_GNU_SPELLINGS, str(source)]
    try:  # under the build's own limits: its own process group, no stdin, bounded time and memory
        done = run_compiler([*command, *flags], memory=PREPROCESS_MEMORY, timeout=PREPROCESS_SECONDS)
    except BuildError as exc:
        raise CFrontError(f"{path}: cannot preprocess: {exc}") from None
    if done.returncode != 0:
        first = first_error(done.stderr, PREPROCESS_MEMORY)
        raise CFrontError(f"{path}: cannot preprocess: {first.replace(str(source), path)}")
    output = done.stdout.replace(str(source), path)
    lists = _number_lists(output)
    try:
        text = _NUMBER_LIST.sub(lambda m: "{0}" + "\n" * m.group(0).count("\n"), output)
        return pycparser.CParser().parse(text, path), lists
    except Exception as exc:  # pycparser raises ParseError, and plain errors on input it was not made for
        raise CFrontError(f"{path}: cannot parse: {str(exc).replace(str(source), path)[:200]}") from None


_LINE_MARKER = re.compile(r'^# (\d+) "([^"]*)"', re.M)


def _number_lists(output: str) -> dict[tuple[str, int, int], str]:
    """Each number list of the preprocessor's output by where its `{0}` stand-in puts the `0`: the
    source file and line the preprocessor's line markers say, the column just after the brace."""
    markers = [(m.start(), m.end(), m.group(2), int(m.group(1))) for m in _LINE_MARKER.finditer(output)]
    found = {}
    index = -1
    for match in _NUMBER_LIST.finditer(output):
        while index + 1 < len(markers) and markers[index + 1][0] < match.start():
            index += 1
        if index < 0:
            continue
        _, marker_end, file, line = markers[index]
        line += output.count("\n", marker_end, match.start()) - 1  # the marker names the line after its own
        column = match.start() - output.rfind("\n", 0, match.start())
        found[(file, line, column + 1)] = match.group(0)
    return found


def literal_value(text: str) -> int | float:
    """A C numeric literal of a weight table, with its sign."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    value = parse_int(body)
    if value is not None:
        return sign * value
    body = body.rstrip("fFlL")
    return sign * (float.fromhex(body) if body.lower().startswith("0x") else float(body))
