"""The USMP workspace pool of an AOT module with the C interface, read from TVM's generated C.

With USMP on, TVM declares one static pool (`static uint8_t global_workspace[N];` in <mod>_lib0.c).
The AOT main carves every intermediate tensor out of it (`void* sid_7_let =
(&(global_workspace_1_var[64000]));`) and passes those regions to the operators in call order; each
operator carves its own internal buffers out of the pool it is handed (`void* pad_temp_let =
(&(global_workspace_5_var[72192]));`). This module reads the regions, the calls that use each, and
every region's size where the code states it — CMSIS-NN calls describe their tensors
(`cmsis_nn_dims output_dims = {1,25,5,64};` before `&output_dims, output_`). Where the code does
not state a size, or uses the pool in a way not read here, the answer says why; nothing is guessed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .extents import ELEMENT_BYTES, pointer_extent

POOL = "global_workspace"
_DECLARATION = re.compile(r"\bstatic\s+uint8_t\s+global_workspace\[(\d+)\]\s*;")
_FUNCTION = re.compile(r"^(?:TVM_DLL\s+)?int32_t\s+(\w+)\s*\(([^;{)]*)\)\s*\{[ \t]*$", re.M)
_CARVE = re.compile(r"void\*\s*(\w+)\s*=\s*\(&\((\w+)\[(\d+)\]\)\);")
_CALLEE = re.compile(r"\b(\w+)\s*\(")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_DIMS = re.compile(r"cmsis_nn_dims\s+(\w+)\s*=\s*\{\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\}\s*;")
_ARM_CALL = re.compile(r"\b(arm_\w+)\s*\(([^;]*)\)\s*;")
# CMSIS-NN functions whose tensors have no cmsis_nn_dims: (argument index of the tensor, the
# argument indices whose product is its element count), from their prototypes in arm_nnfunctions.h:
# arm_softmax_s8(input, num_rows, row_size, mult, shift, diff_min, output).
_UNDESCRIBED = {"arm_softmax_s8": {0: (1, 2), 6: (1, 2)}, "arm_softmax_u8": {0: (1, 2), 6: (1, 2)},
                "arm_softmax_s16": {0: (1, 2), 6: (1, 2)}}


@dataclass(frozen=True)
class Site:
    """Where one offset literal (or the pool's length) is written: a character span of a source."""

    path: str
    start: int
    end: int


@dataclass
class Region:
    """Bytes of the pool used from call `first` to call `last` (both included, counted from 0)."""

    name: str  # sid_7_let (the main's), or <operator>:<variable> (an operator's own)
    offset: int  # where TVM put it
    first: int
    last: int
    sites: list[Site]
    size: int | None = None
    unknown: str = ""  # why the size is not known (empty when it is)


@dataclass
class UsmpPool:
    declaration: Site  # the N of `global_workspace[N]`
    tvm_bytes: int
    regions: list[Region] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # the operators the main calls, in order
    operators: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # handed the pool: (its parameter, first, last step)
    problem: str = ""  # why the regions could not be read (empty when they were)


@dataclass
class _Function:
    name: str
    path: str
    body: str
    body_start: int  # offset of the body in its source
    params: list[tuple[str, str]]  # (C type, name)


def read_usmp_pool(sources: dict[str, str], module_name: str) -> UsmpPool | None:
    """The module's pool and its regions; None when the code declares no USMP pool."""
    declared = [(path, m) for path, text in sources.items() for m in _DECLARATION.finditer(text)]
    if not declared:
        return None
    path, match = declared[0]
    pool = UsmpPool(Site(path, match.start(1), match.end(1)), int(match.group(1)))
    if len(declared) > 1:
        return _refuse(pool, f"{len(declared)} declarations of {POOL}")
    functions = _functions(sources)
    main = functions.get(f"tvmgen_{module_name}___tvm_main__")
    if main is None:
        return _refuse(pool, f"no AOT main tvmgen_{module_name}___tvm_main__ with the pool as an argument "
                             "(the packed interface hands it over in a DLTensor, which is not read)")
    pool_param = _pool_parameter(sources, module_name, main)
    if pool_param is None:
        return _refuse(pool, f"tvmgen_{module_name}_run does not hand {POOL} to the AOT main as a plain pointer")
    try:
        _read_main(pool, main, pool_param, functions)
    except _Unreadable as exc:
        return _refuse(pool, str(exc))
    return pool


class _Unreadable(Exception):
    pass


def _refuse(pool: UsmpPool, why: str) -> UsmpPool:
    pool.problem = why
    pool.regions = []
    return pool


def _functions(sources: dict[str, str]) -> dict[str, _Function]:
    found = {}
    for path, text in sources.items():
        for match in _FUNCTION.finditer(text):
            end = text.find("\n}", match.end())
            end = len(text) if end < 0 else end
            params = []
            for part in match.group(2).split(","):
                words = part.replace("*", " * ").split()
                if words and _IDENTIFIER.fullmatch(words[-1]):  # a name; else none (TVM's code always names them)
                    params.append((" ".join(words[:-1]), words[-1]))
                else:
                    params.append((" ".join(words), ""))
            found[match.group(1)] = _Function(match.group(1), path, text[match.end():end], match.end(), params)
    return found


def _pool_parameter(sources: dict[str, str], module_name: str, main: _Function) -> str | None:
    """The main's parameter that tvmgen_<mod>_run binds to `&global_workspace`."""
    run = re.compile(r"\btvmgen_" + re.escape(module_name) + r"___tvm_main__\s*\(([^;{]*)\)\s*;")
    for text in sources.values():
        for match in run.finditer(text):
            args = _split_args(match.group(1))
            hits = [i for i, arg in enumerate(args) if re.search(r"&\s*" + POOL + r"\b", arg)]
            if len(hits) == 1 and hits[0] < len(main.params):
                return main.params[hits[0]][1] or None
    return None


def _split_args(text: str) -> list[str]:
    args, depth, current = [], 0, []
    for char in text:
        if char == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        depth += char == "("
        depth -= char == ")"
        current.append(char)
    if "".join(current).strip():
        args.append("".join(current).strip())
    return args


def _bare(arg: str) -> str:
    """`(int8_t*)sid_7_let` or `sid_7_let` -> `sid_7_let`."""
    match = re.fullmatch(r"(?:\(\s*[\w\s*]+\)\s*)?(\w+)", arg.strip())
    return match.group(1) if match else arg.strip()


def _read_main(pool: UsmpPool, main: _Function, pool_param: str, functions: dict[str, _Function]) -> None:
    regions: dict[str, Region] = {}
    position = 0  # steps: the top-level statements of the operators, in the order they run
    for line_start, line in _lines(main.body):
        carve = _CARVE.search(line)
        if carve and carve.group(2) == pool_param:
            start = main.body_start + line_start + carve.start(3)
            regions[carve.group(1)] = Region(carve.group(1), int(carve.group(3)), -1, -1,
                                             [Site(main.path, start, start + len(carve.group(3)))])
            continue
        used = [name for name in (pool_param, *regions) if re.search(rf"\b{re.escape(name)}\b", line)]
        calls = _calls(line, functions)
        if re.match(r"\s*(for|while|do|switch)\b", line):
            raise _Unreadable(f"the AOT main is not straight-line code ({line.strip()[:60]!r})")
        if not calls:
            if used:
                raise _Unreadable(f"the AOT main uses {used[0]} outside an operator call ({line.strip()[:60]!r})")
            continue
        if len(calls) > 1:
            raise _Unreadable(f"more than one operator call on one line of the AOT main ({line.strip()[:60]!r})")
        callee = functions[calls[0][0]]
        pool.calls.append(callee.name)
        _read_call(pool, regions, position, callee, [_bare(a) for a in _split_args(calls[0][1])], pool_param)
        position += len(_statements(callee.body)) or 1
    pool.regions = [r for r in regions.values() if r.first >= 0] + pool.regions


def _calls(line: str, functions: dict[str, _Function]) -> list[tuple[str, str]]:
    """(function, argument text) of each call of a defined function on one line."""
    found = []
    for match in _CALLEE.finditer(line):
        if match.group(1) not in functions:
            continue
        depth, end = 1, match.end()
        while end < len(line) and depth:
            depth += {"(": 1, ")": -1}.get(line[end], 0)
            end += 1
        if depth:
            raise _Unreadable(f"a call of {match.group(1)} spans lines in the AOT main")
        found.append((match.group(1), line[match.end():end - 1]))
    return found


def _lines(body: str):
    start = 0
    for line in body.split("\n"):
        yield start, line
        start += len(line) + 1


def _read_call(pool: UsmpPool, regions: dict[str, Region], base: int, callee: _Function, args: list[str],
               pool_param: str) -> None:
    if len(args) != len(callee.params):
        raise _Unreadable(f"{callee.name} is called with {len(args)} arguments but takes {len(callee.params)}")
    for (ctype, param), arg in zip(callee.params, args):
        if arg == pool_param:
            _read_operator_regions(pool, base, callee, param)
        elif arg in regions:
            region = regions[arg]
            size, why = _tensor_bytes(callee, param, ctype)
            first, last = _steps_using(callee, param, base)
            region.first = first if region.first < 0 else min(region.first, first)
            region.last = max(region.last, last)
            if size is None:
                region.unknown = region.unknown or why
            elif not region.unknown:
                region.size = max(region.size or 0, size)
    for region in regions.values():
        if region.unknown:
            region.size = None


def _read_operator_regions(pool: UsmpPool, base: int, callee: _Function, pool_param: str) -> None:
    whole = (base, base + max(len(_statements(callee.body)), 1) - 1)
    _, first_step, _ = pool.operators.get(callee.name, (pool_param, whole[0], whole[1]))
    pool.operators[callee.name] = (pool_param, first_step, whole[1])
    carves = [m for m in _CARVE.finditer(callee.body) if m.group(2) == pool_param]
    if len(re.findall(rf"\b{re.escape(pool_param)}\b", callee.body)) != len(carves):
        raise _Unreadable(f"{callee.name} uses its pool argument other than to carve regions out of it")
    for carve in carves:
        name = f"{callee.name}:{carve.group(1)}"
        first, last = _steps_using(callee, carve.group(1), base)
        known = next((r for r in pool.regions if r.name == name), None)
        if known is not None:  # the same operator called again: its regions live across both calls
            known.last = last
            continue
        start = callee.body_start + carve.start(3)
        size, why = _tensor_bytes(callee, carve.group(1), None, carved=True)
        pool.regions.append(Region(name, int(carve.group(3)), first, last, [Site(callee.path, start, start + len(carve.group(3)))],
                                   size=size, unknown=why))


def _statements(body: str) -> list[tuple[int, int]]:
    """(first line, last line) of each top-level statement of a function body: a line, or a loop or
    `if` with everything up to its closing brace. They run once each, in this order."""
    spans, depth, start = [], 0, 0
    for index, line in enumerate(body.split("\n")):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if depth == 0:
            start = index
        depth += text.count("{") - text.count("}")
        if depth <= 0:
            spans.append((start, index))
            depth = 0
    return spans


def _steps_using(function: _Function, name: str, base: int) -> tuple[int, int]:
    """The steps (base + top-level statement) during which `function` needs what `name` points to: from
    the first statement that indexes it to the last, where the operator is plain C whose only use of
    the name is indexing (mlf/extents.py proves that when it sizes the region); else the whole call
    (a CMSIS-NN call reads a buffer through a struct that names it lines before)."""
    statements = _statements(function.body)
    whole = (base, base + max(len(statements), 1) - 1)
    if _ARM_CALL.search(function.body) or "cmsis_nn_context" in function.body:
        return whole
    lines = function.body.split("\n")
    carve = re.compile(rf"void\*\s*{re.escape(name)}\s*=")
    using = [i for i, (low, high) in enumerate(statements)
             if any(re.search(rf"\b{re.escape(name)}\b", lines[n]) and not carve.search(lines[n]) for n in range(low, high + 1))]
    return (base + using[0], base + using[-1]) if using else whole


def _tensor_bytes(function: _Function, name: str, ctype: str | None, carved: bool = False) -> tuple[int | None, str]:
    """Bytes the operator touches through pointer `name`, where its CMSIS-NN calls state them: a
    tensor's cmsis_nn_dims, or a scratch buffer's `cmsis_nn_context ctx = {name, bytes};`."""
    element = ELEMENT_BYTES.get((ctype or "").replace("*", "").strip())
    mentions = len(re.findall(rf"\b{re.escape(name)}\b", function.body)) - carved
    contexts = [int(m.group(1)) for m in re.finditer(rf"cmsis_nn_context\s+\w+\s*=\s*\{{\s*{re.escape(name)}\s*,\s*(\d+)\s*\}}\s*;",
                                                   function.body)]
    if contexts:
        if len(contexts) != mentions:
            return None, f"{function.name} uses the scratch buffer {name} outside its cmsis_nn_context"
        return max(contexts), ""
    dims = {m.group(1): math.prod(int(m.group(i)) for i in range(2, 6)) for m in _DIMS.finditer(function.body)}
    sizes, described = [], 0
    for call in _ARM_CALL.finditer(function.body):
        args = _split_args(call.group(2))
        for index, arg in enumerate(args):
            if _bare(arg) != name:
                continue
            described += 1
            count = _element_count(call.group(1), args, index, dims)
            if count is None:
                return None, f"argument {index} of {call.group(1)} in {function.name} has no stated size"
            sizes.append(count)
    if not sizes:
        size, why = pointer_extent(function.body, name, (ctype or "").replace("*", "").strip() or None)
        return size, (f"{function.name} (plain C): {why}" if size is None else "")
    if described != mentions:
        return None, f"{function.name} uses {name} outside its CMSIS-NN calls"
    if element is None:
        return None, f"the element type of {name} in {function.name} is not known"
    return max(sizes) * element, ""


def _element_count(function: str, args: list[str], index: int, dims: dict[str, int]) -> int | None:
    previous = args[index - 1].strip() if index else ""
    if previous.startswith("&") and previous[1:].strip() in dims:
        return dims[previous[1:].strip()]
    factors = _UNDESCRIBED.get(function, {}).get(index)
    if factors and all(re.fullmatch(r"\d+", args[i].strip()) for i in factors):
        return math.prod(int(args[i]) for i in factors)
    return None
