"""Facts read from the generated C (where metadata.json is silent): interface structs, packed
metadata tables and which functions are declared versus defined."""

from __future__ import annotations

import re

from ..errors import GeneratedCodeError

_DLTYPE_CODES = {0: "int", 1: "uint", 2: "float"}


def struct_fields(header: str, struct_name: str) -> list[str] | None:
    """Field names of `struct <struct_name> { void* a; void* b; }` in a TVM interface header."""
    match = re.search(r"struct\s+" + re.escape(struct_name) + r"\s*\{([^}]*)\}", header)
    if not match:
        return None
    return re.findall(r"void\s*\*\s*([A-Za-z_][A-Za-z0-9_]*)\s*;", match.group(1))


def packed_metadata_tensors(source: str, kind: str) -> list[tuple[str, tuple[int, ...], str]]:
    """Tensors of `kTvmgenMetadata_<kind>` (inputs/outputs) in an AOT packed-interface metadata file."""
    shapes: dict[int, tuple[int, ...]] = {}
    for m in re.finditer(r"kTvmgenMetadata_" + kind + r"_(\d+)_shape\[\d+\]\s*=\s*\{([^}]*)\}", source):
        shapes[int(m.group(1))] = tuple(int(v) for v in re.findall(r"(-?\d+)L", m.group(2)))
    table = re.search(r"TVMTensorInfo\s+kTvmgenMetadata_" + kind + r"\[\d+\]\s*=\s*\{(.*?)\n\};", source, re.S)
    if not table:
        return []
    tensors = []
    for index, m in enumerate(re.finditer(r'"([^"]*)"\s*/\* name\*/.*?\{(\d+),\s*(\d+),\s*(\d+)\}', table.group(1), re.S)):
        code, bits = int(m.group(2)), int(m.group(3))
        dtype = "bool" if (code, bits) == (1, 1) else f"{_DLTYPE_CODES.get(code, 'unknown')}{bits}"
        tensors.append((m.group(1), shapes.get(index, ()), dtype))
    return tensors


# After a function's name: its parameter list and body (a prototype ends in ';', a definition in '{')
_DEFINITION = r"\s*\([^;{)]*(?:\([^)]*\)[^;{)]*)*\)\s*\{"
_DEFINITION_TAIL = re.compile(_DEFINITION)
_CALL_TAIL = re.compile(r"\s*\(")
_NOTHING = re.compile("")


def defined_functions(source: str) -> set[str]:
    """Names of functions with a body in this C file."""
    return set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)" + _DEFINITION, source))


# One name's facts are found by a plain search for the name, then the pattern after it: a regex that
# starts at a word boundary scans megabytes of constants for seconds, before a build may refuse them.

def defines_function(source: str, name: str) -> bool:
    """Whether this C file gives function `name` a body."""
    return _name_followed_by(source, name, _DEFINITION_TAIL)


def calls_function(source: str, name: str) -> bool:
    """Whether `name(` occurs in this C file (a call, a prototype or the definition)."""
    return _name_followed_by(source, name, _CALL_TAIL)


def names_word(source: str, name: str) -> bool:
    """Whether identifier `name` occurs in this C file as a whole word."""
    return _name_followed_by(source, name, _NOTHING)


def _name_followed_by(source: str, name: str, tail: re.Pattern) -> bool:
    start = source.find(name)
    while start >= 0:
        end = start + len(name)
        if not _word_char_at(source, start - 1) and not _word_char_at(source, end) and tail.match(source, end):
            return True
        start = source.find(name, end)
    return False


def _word_char_at(source: str, index: int) -> bool:
    return 0 <= index < len(source) and (source[index].isalnum() or source[index] == "_")


def packed_arg_count(source: str, function: str) -> int | None:
    """How many TVMValue arguments a packed `function` unpacks (`argN = ((TVMValue*)args)[N]`)."""
    body = re.search(re.escape(function) + r"\s*\([^)]*\)\s*\{(.*?)\n\}", source, re.S)
    if not body:
        return None
    indices = {int(i) for i in re.findall(r"\(\(TVMValue\*\)args\)\[(\d+)\]", body.group(1))}
    return max(indices) + 1 if indices else None


# `#include <name>` or `#include "name"`: the bracket and the name.
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*([<\"])([^<>\"\s]+)[>\"]", re.M)


def system_includes(source: str) -> set[str]:
    """Headers included with angle brackets (`#include <arm_acle.h>`): the toolchain's and libraries'."""
    return {name for bracket, name in _include_directives(source) if bracket == "<"}


def includes(source: str, header: str) -> bool:
    """Whether the file includes `header`, with either kind of bracket."""
    return any(name == header for _, name in _include_directives(source))


def _include_directives(source: str) -> list[tuple[str, str]]:
    """(bracket, name) of every `#include`, read on the lines that say `include` alone (the pattern
    over every line of megabytes of constants took a tenth of a second a file)."""
    found = []
    start = source.find("include")
    while start >= 0:
        line_start = source.rfind("\n", 0, start) + 1
        line_end = source.find("\n", start)
        line_end = len(source) if line_end < 0 else line_end
        found += _INCLUDE.findall(source, line_start, line_end)
        start = source.find("include", line_end)
    return found


# --- CMSIS-NN calls (TVM's cmsis-nn codegen) -----------------------------------------------------

# TVM writes `cmsis_nn_context context= {<buffer>,<size>};` before every call that takes a context.
_CONTEXT = re.compile(r"\bcmsis_nn_context[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]*=[ \t]*\{([^{};\n]*)\}")
_CONTEXT_SIZE = re.compile(r"[0-9]{1,10}")
_NULL_BUFFERS = ("NULL", "0", "(void*)0", "((void*)0)")


def cmsis_nn_calls(source: str) -> set[str]:
    """CMSIS-NN functions a generated file calls (the library prefixes them all with arm_)."""
    return set(re.findall(r"\b(arm_[A-Za-z0-9_]+)[ \t]*\(", source))


def cmsis_nn_scratch_sizes(source: str, where: str) -> list[int]:
    """Bytes of scratch buffer each CMSIS-NN context passes, in order; 0 for TVM's `{NULL,0}`."""
    sizes = []
    for match in _CONTEXT.finditer(source):
        parts = [part.strip() for part in match.group(1).split(",")]
        if len(parts) != 2 or not _CONTEXT_SIZE.fullmatch(parts[1]):
            shown = " ".join(match.group(0).split())[:80]
            raise GeneratedCodeError(f"{where}: cannot read the CMSIS-NN scratch buffer of {shown!r} "
                                     "(TVM writes {NULL,0} or {<buffer>,<bytes>})")
        sizes.append(0 if parts[0].replace(" ", "") in _NULL_BUFFERS else int(parts[1]))
    return sizes
