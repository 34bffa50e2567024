"""The files of an MLF in TVM 0.18's own layout for a lowered model: what TVM writes for an AOT
executor with the C interface, the unpacked API, one static workspace pool (USMP) and linked
constants — so the reader, the build and every later stage take it as they take TVM's.

    codegen/host/include/tvmgen_<mod>.h   inputs/outputs structs, tvmgen_<mod>_run, sizes
    codegen/host/src/<mod>_lib0.c         constants pool (.rodata.tvm), workspace pool, run()
    codegen/host/src/<mod>_lib1.c         __tvm_main__: the operator calls in order
    codegen/host/src/<mod>_lib2.c         one function per operator, calling CMSIS-NN
    metadata.json                         version 7, memory summary of this very code
    src/<mod>.tflite                      the model it was made from
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field

import numpy as np

from ..mlf.csource import names_word
from ..project.memory_plan import Buffer, MemoryPlan, align, floor_bytes, plan_memory
from .lowering import BAND_FUNCTION, C_HELPERS, Lowered
from .patches import apply_stage, fold_pads, stage_candidates
from .tflite import Graph

# How requantisations round: "tflite", as TFLite's reference kernels (its fully connected layers
# round once, its convolutions twice) — bit-exact; "cmsis-nn", CMSIS-NN's default build everywhere
# (what TFLM with CMSIS-NN computes; its fully connected layers may differ from TFLite by an LSB).
TFLITE_ROUNDING, CMSIS_NN_ROUNDING = "tflite", "cmsis-nn"
ROUNDINGS = (TFLITE_ROUNDING, CMSIS_NN_ROUNDING)
ALIGNMENT = 16  # TVM's pools and constants are 16-byte aligned
_CTYPES = {"int8": "int8_t", "int32": "int32_t", "uint8": "uint8_t", "int16": "int16_t", "float32": "float"}
IO_DTYPES = tuple(_CTYPES)  # the element types a graph input or output can have in TVM's C interface
# ...and those a constant array can have (bool as the one byte TFLite stores)
_CONSTANT_CTYPES = {**_CTYPES, "int64": "int64_t", "bool": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t"}


@dataclass(frozen=True)
class Provenance:
    """What made the MLF: recorded in metadata.json under `mlfbuild_import`."""

    tool: str
    model_file: str
    model_sha256: str
    rounding: str = "tflite"  # ROUNDINGS
    memory: str = "floor"  # MEMORY_PLANS
    kernels: str = "generated"  # kernels.KERNEL_CHOICES

    def to_json(self) -> dict:
        return {"tool": self.tool, "model": self.model_file, "sha256": self.model_sha256,
                "model_path": "src/model.tflite"}


@dataclass
class Layout:
    """Where each tensor's bytes are: a graph input/output variable or an offset in the pool."""

    storage: dict[int, int]  # tensor → the tensor whose bytes it uses (itself unless an alias)
    plan: MemoryPlan
    io_names: dict[int, str]  # graph input/output tensor → C name
    # tensor → its first byte within its storage's buffer, where not the first (a row-band overlap)
    offsets: dict[int, int] = field(default_factory=dict)
    io_in_pool: bool = False  # the graph's inputs and outputs are tensors of the pool (--memory min)
    # with the min plan, tensor → the tensor whose pointer it uses: the same bytes (an alias, an
    # in-place result), one region to the build's reading of the pool
    same_bytes: dict[int, int] = field(default_factory=dict)

    def pool_offset(self, tensor: int) -> int:
        """Where `tensor`'s first byte is in the pool."""
        root = self.storage.get(tensor, tensor)
        return self.plan.offsets[f"sid_{root}"] + self.offsets.get(tensor, 0)

    def place(self, tensor: int) -> str:
        if self.io_in_pool:  # a pointer per tensor (carves)
            return f"sid_{self.same_bytes.get(tensor, tensor)}_let"
        root = self.storage.get(tensor, tensor)
        if root in self.io_names:
            return f"{self.io_names[root]}_buffer_var"
        offset = self.offsets.get(tensor, 0)
        return f"(void*)((uint8_t*)sid_{root}_let + {offset})" if offset else f"sid_{root}_let"

    def carves(self) -> list[tuple[str, int]]:
        """The main's pointers into the pool: one per buffer; with the min plan one per tensor, so that
        each tensor is a region of its own life to the build's reading of the pool (a merged buffer
        is busy only in parts at each call)."""
        if not self.io_in_pool:
            return [(f"{b.name}_let", self.plan.offsets[b.name]) for b in self.plan.buffers]
        placed = {b.name for b in self.plan.buffers}
        return [(f"sid_{tensor}_let", self.pool_offset(tensor)) for tensor in sorted(self.storage)
                if f"sid_{self.storage[tensor]}" in placed and self.same_bytes.get(tensor, tensor) == tensor]


# Memory plans: "floor", every operator writes a tensor of its own (in-place element-wise operators
# and aliases aside) — the liveness floor, the inputs and outputs the application's buffers; "min", a
# convolution may also write its output over its dying input, row by row through a one-row band
# (Lowered.bands), where that lowers the pool, and the inputs and outputs are tensors of the pool
# (TVM's use_workspace_io): an input's bytes are reused once its last reader is done, an output is
# live from its producer to the end.
FLOOR_MEMORY, MIN_MEMORY = "floor", "min"
MEMORY_PLANS = (FLOOR_MEMORY, MIN_MEMORY)
_MAX_BAND_TRIALS = 512  # each candidate overlap is tried with a whole plan: bounded for huge graphs


def plan_layout(graph: Graph, steps: list[Lowered], memory: str = FLOOR_MEMORY) -> Layout:
    """One pool for every tensor that is neither a graph input/output nor a constant, each live from
    the call that writes it to the last call that reads it; aliases share their source's bytes, and an
    element-wise call may write over an input no later call reads (`_work_in_place`). With
    memory="min", convolutions whose input dies there write over it by row bands where the plan
    gets smaller (`_overlap_by_bands`), the graph's inputs and outputs are tensors of the pool
    (`_io_lives`), and buffers are placed by their tensors' own lives (`_plan_pieces`)."""
    names = _io_names(graph)
    in_pool = memory == MIN_MEMORY
    io_names = {} if in_pool else names  # the tensors outside the pool
    calls = [s for s in steps if s.alias_of is None]
    shared = _SharedBytes(calls, _io_lives(graph, calls) if in_pool else {})
    for step in steps:
        if step.alias_of is not None:
            shared.join(step.output, step.alias_of)
    _work_in_place(graph, calls, shared, io_names)
    for step in calls:
        step.band_order = ""
    if in_pool:
        _overlap_by_bands(graph, calls, shared, io_names)
    layout = _layout(graph, calls, shared, io_names, by_pieces=in_pool)
    layout.io_names, layout.io_in_pool = names, in_pool
    if in_pool:
        layout.same_bytes = _same_bytes(graph, layout)
    return layout


def _same_bytes(graph: Graph, layout: Layout) -> dict[int, int]:
    """Tensors at the same bytes of one buffer, each to the first of them."""
    first: dict[tuple[int, int, int], int] = {}
    for tensor in sorted(layout.storage):
        key = (layout.storage[tensor], layout.offsets.get(tensor, 0), graph.tensors[tensor].nbytes)
        first.setdefault(key, tensor)
    return {tensor: first[(layout.storage[tensor], layout.offsets.get(tensor, 0), graph.tensors[tensor].nbytes)]
            for tensor in layout.storage}


def _io_lives(graph: Graph, calls: list[Lowered]) -> dict[int, tuple[int, int]]:
    """The lives of the graph's inputs and outputs held in the pool: an input from the start (the
    application writes it before the run) to its last reader, an output from its producer to the end
    (the application reads it after the run)."""
    end = len(calls) - 1
    lives = {tensor: (0, None) for tensor in graph.inputs}
    lives.update({tensor: (None, end) for tensor in graph.outputs})
    return lives


def _layout(graph: Graph, calls: list[Lowered], shared: "_SharedBytes", io_names: dict[int, str],
            by_pieces: bool = False) -> Layout:
    members = shared.members()
    storage = {tensor: shared.root(tensor) for tensor in members}
    spans = shared.spans(graph)
    offsets = {t: shared.offset(t) - spans[storage[t]][0] for t in members}
    first, last = _lives(calls, storage, shared.pinned)
    buffers = [Buffer(f"sid_{root}", spans[root][1] - spans[root][0] if root in spans else graph.tensors[root].nbytes,
                      first[root], last[root])
               for root in sorted(first) if root not in io_names]
    if by_pieces:
        plan = _plan_pieces(buffers, _pieces(graph, calls, shared, storage, offsets))
    else:
        plan = plan_memory(buffers, ALIGNMENT)
    return Layout(storage, plan, io_names, {t: o for t, o in offsets.items() if o})


@dataclass(frozen=True)
class _Piece:
    """One tensor of a merged buffer: its bytes from the buffer's first, and its calls."""

    start: int
    size: int
    first: int
    last: int


def _pieces(graph: Graph, calls: list[Lowered], shared: "_SharedBytes", storage: dict[int, int],
            offsets: dict[int, int]) -> dict[str, list[_Piece]]:
    """Each buffer's tensors where they lie and while they live: a merged buffer is busy only in parts
    at each call (the input of a chain of overlaps is long dead when its last layer runs)."""
    life = _tensor_lives(calls, shared.pinned)
    found: dict[str, list[_Piece]] = {}
    for tensor, root in storage.items():
        if tensor in life:
            found.setdefault(f"sid_{root}", []).append(_Piece(offsets[tensor], graph.tensors[tensor].nbytes, *life[tensor]))
    return found


def _tensor_lives(calls: list[Lowered], pinned: dict[int, tuple[int | None, int | None]]) -> dict[int, tuple[int, int]]:
    life: dict[int, list[int]] = {}
    for index, step in enumerate(calls):
        for operand in step.operands:
            if operand.tensor is not None:
                life.setdefault(operand.tensor, [index, index])[1] = index
    for tensor, (low, high) in pinned.items():
        if tensor in life:
            life[tensor] = [life[tensor][0] if low is None else min(low, life[tensor][0]),
                            life[tensor][1] if high is None else max(high, life[tensor][1])]
    return {tensor: (first, last) for tensor, (first, last) in life.items()}


def _plan_pieces(buffers: list[Buffer], pieces: dict[str, list[_Piece]]) -> MemoryPlan:
    """The buffers placed greedily, largest first, each at the lowest aligned offset where none of its
    pieces meets a placed piece live at the same call: two merged buffers may interleave where their
    busy parts do not meet (plan_memory's rectangles would keep them apart)."""
    order = sorted(buffers, key=lambda b: (-align(b.size, ALIGNMENT), -(b.last - b.first), b.first, b.name))
    placed: list[tuple[int, int, int, int]] = []  # (start, end, first, last) in the pool
    offsets: dict[str, int] = {}
    for buffer in order:
        own = pieces.get(buffer.name) or [_Piece(0, buffer.size, buffer.first, buffer.last)]
        candidates = {0}
        for piece in own:
            for start, end, first, last in placed:
                if first <= piece.last and piece.first <= last and end > piece.start:
                    candidates.add(align(end - piece.start, ALIGNMENT))
        offsets[buffer.name] = next(at for at in sorted(candidates) if not any(
            first <= piece.last and piece.first <= last and start < at + piece.start + piece.size
            and at + piece.start < end for piece in own if piece.size for start, end, first, last in placed))
        placed += [(offsets[buffer.name] + p.start, offsets[buffer.name] + p.start + p.size, p.first, p.last)
                   for p in own if p.size]
    arena = max((align(offsets[b.name] + b.size, ALIGNMENT) for b in buffers), default=0)
    return MemoryPlan(tuple(buffers), offsets, arena, floor_bytes(buffers, ALIGNMENT), ALIGNMENT)


class _SharedBytes:
    """Tensors that share bytes, as classes under one root tensor (union-find), each member at a byte
    offset from its root (0 but for row-band overlaps), each class with the last call that reads any
    of its tensors: joins after an in-place move or an alias are seen by every member, whatever the
    order they were made in. `pinned`: tensors live beyond their calls (the pool's inputs and
    outputs), as (first, last) call, None where the calls say."""

    def __init__(self, calls: list[Lowered], pinned: dict[int, tuple[int | None, int | None]] | None = None):
        self._parent: dict[int, int] = {}
        self._offset: dict[int, int] = {}  # member → its offset from its parent
        self._last: dict[int, int] = {}  # root → the last call reading any tensor of its class
        self.pinned = dict(pinned or {})
        for index, step in enumerate(calls):
            for operand in step.operands:
                if operand.tensor is not None:
                    self._last[operand.tensor] = index
        for tensor, (_, last) in self.pinned.items():
            if last is not None and tensor in self._last:
                self._last[tensor] = last

    def root(self, tensor: int) -> int:
        path = []
        while tensor in self._parent:
            path.append(tensor)
            tensor = self._parent[tensor]
        total = 0
        for member in reversed(path):  # path compression: later look-ups take one step
            total += self._offset[member]
            self._offset[member] = total
            self._parent[member] = tensor
        return tensor

    def offset(self, tensor: int) -> int:
        """`tensor`'s first byte from its root's."""
        self.root(tensor)
        return self._offset.get(tensor, 0)

    def join(self, tensor: int, into: int, at: int = 0) -> None:
        """`tensor`'s class takes the bytes of `into`'s class (whose root stays the root), `tensor`
        starting `at` bytes after `into`."""
        a, b = self.root(tensor), self.root(into)
        if a != b:
            shift = self.offset(into) + at - self.offset(tensor)
            self._parent[a] = b
            self._offset[a] = shift
            self._last[b] = max(self._last.get(a, -1), self._last.get(b, -1))

    def last_read(self, tensor: int) -> int:
        return self._last.get(self.root(tensor), -1)

    def members(self) -> set[int]:
        return set(self._parent) | set(self._last)

    def spans(self, graph: Graph) -> dict[int, tuple[int, int]]:
        """root → (first, end) byte of its class's members, from the root's first byte."""
        found: dict[int, tuple[int, int]] = {}
        for tensor in self.members():
            root, start = self.root(tensor), self.offset(tensor)
            low, high = found.get(root, (start, start))
            found[root] = (min(low, start), max(high, start + graph.tensors[tensor].nbytes))
        return found

    def copy(self) -> "_SharedBytes":
        twin = _SharedBytes([], self.pinned)
        twin._parent, twin._offset, twin._last = dict(self._parent), dict(self._offset), dict(self._last)
        return twin


def _lives(calls: list[Lowered], storage: dict[int, int],
           pinned: dict[int, tuple[int | None, int | None]]) -> tuple[dict[int, int], dict[int, int]]:
    """For each storage root, the first and last call that touches it (or a pinned tensor of it lives)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for index, step in enumerate(calls):
        for operand in step.operands:
            if operand.tensor is not None:
                root = storage.get(operand.tensor, operand.tensor)
                first.setdefault(root, index)
                last[root] = index
    for tensor, (low, high) in pinned.items():
        root = storage.get(tensor, tensor)
        if root in first:
            first[root] = min(first[root], low) if low is not None else first[root]
            last[root] = max(last[root], high) if high is not None else last[root]
    return first, last


def _work_in_place(graph: Graph, calls: list[Lowered], shared: _SharedBytes, io_names: dict[int, str]) -> None:
    """An element-wise call writes its output over an input of the same size that no later call
    reads, through any tensor sharing its bytes (TFLite's in-place element-wise operators): the two
    share one buffer. One pass over the calls."""
    for index, step in enumerate(calls):
        if not step.in_place or step.output in io_names:
            continue
        out = graph.tensors[step.output]
        for operand in step.operands:
            if operand.tensor is None or operand.tensor == step.output:
                continue
            root = shared.root(operand.tensor)
            if root not in io_names and shared.last_read(root) == index and graph.tensors[root].nbytes == out.nbytes:
                shared.join(step.output, root)
                break


def _overlap_by_bands(graph: Graph, calls: list[Lowered], shared: _SharedBytes, io_names: dict[int, str]) -> None:
    """A convolution computes its output one row at a time into a band and copies each row to its
    place once no later row reads the input bytes there (Lowered.bands), top to bottom or bottom to
    top: its output may overlap its input, in the input's buffer, when the input dies at the call.
    Each overlap takes the order whose placement grows the merged buffer least (alternating orders
    keep a chain of equal layers in place). A merged buffer lives as long as all its tensors, so one
    overlap alone may not pay (a chain pays once every layer of it overlaps): every overlap possible
    is made, then each is undone in turn where the plan gets no bigger without it (a call per row
    costs a little time), and the result is kept only if smaller than no overlap at all."""
    candidates = [index for index, step in enumerate(calls) if step.bands is not None and step.output not in io_names]
    chosen = _band_joins(graph, calls, shared, io_names, set(candidates[:_MAX_BAND_TRIALS]))
    best = _arena(graph, calls, shared, io_names, set(chosen))
    for index in sorted(chosen):
        fewer = _band_joins(graph, calls, shared, io_names, set(chosen) - {index})
        arena = _arena(graph, calls, shared, io_names, set(fewer))
        if arena <= best:
            chosen, best = fewer, arena
    if best >= _arena(graph, calls, shared, io_names, set()):
        chosen = {}
    final = _apply_band_joins(graph, calls, shared, io_names, set(chosen))
    shared.__dict__.update(final.__dict__)
    for index, step in enumerate(calls):
        step.band_order = chosen.get(index, "")


def _band_joins(graph: Graph, calls: list[Lowered], shared: _SharedBytes, io_names: dict[int, str],
                wanted: set[int]) -> dict[int, str]:
    """The calls of `wanted` whose output can overlap its input (in call order, after the earlier
    ones), each with its row order."""
    made: dict[int, str] = {}
    _apply_band_joins(graph, calls, shared, io_names, wanted, made)
    return made


def _apply_band_joins(graph: Graph, calls: list[Lowered], shared: _SharedBytes, io_names: dict[int, str],
                      wanted: set[int], made: dict[int, str] | None = None) -> _SharedBytes:
    joined = shared.copy()
    for index in sorted(wanted):
        step = calls[index]
        source = step.operands[0].tensor
        root = joined.root(source)
        if root in io_names or joined.last_read(root) != index or joined.root(step.output) == root:
            continue
        low, high = joined.spans(graph)[root]
        start, size = joined.offset(source), graph.tensors[step.output].nbytes
        placements = {order: at for order, at, body in (("down", start - step.bands.reserve, step.bands.body),
                                                         ("up", start - step.bands.allow, step.bands.reverse_body)) if body}
        order = min(placements, key=lambda o: (max(high, placements[o] + size) - min(low, placements[o]), o))
        joined.join(step.output, source, placements[order] - start)
        if made is not None:
            made[index] = order
    _nest_one_call_tensors(graph, calls, joined, io_names)
    return joined


def _nest_one_call_tensors(graph: Graph, calls: list[Lowered], shared: _SharedBytes, io_names: dict[int, str]) -> None:
    """A merged buffer spans what its tensors need over its whole life, and is idle in parts at each
    call: a tensor of its own whose life lies within a merged buffer's (a patch stage's stripe buffers,
    a tensor written after the merged buffer's large members died) takes bytes no member uses while
    it lives, where it fits, largest first."""
    life: dict[int, list[int]] = {}
    for index, step in enumerate(calls):
        for operand in step.operands:
            if operand.tensor is not None:
                life.setdefault(operand.tensor, [index, index])[1] = index
    for tensor, (low, high) in shared.pinned.items():
        if tensor in life:
            life[tensor] = [life[tensor][0] if low is None else min(low, life[tensor][0]),
                            life[tensor][1] if high is None else max(high, life[tensor][1])]
    members: dict[int, list[int]] = {}
    for tensor in shared.members():
        members.setdefault(shared.root(tensor), []).append(tensor)
    alone = sorted((t for t in life if t not in io_names and shared.root(t) == t and len(members.get(t, [t])) == 1),
                   key=lambda t: (-graph.tensors[t].nbytes, t))
    spans = shared.spans(graph)
    for tensor in alone:
        (first, last), size = life[tensor], graph.tensors[tensor].nbytes
        for root, tensors in members.items():
            if root == tensor or root in io_names or len(tensors) < 2:
                continue
            lives = [life[m] for m in tensors if m in life]
            if not lives or not (min(l[0] for l in lives) <= first and last <= max(l[1] for l in lives)):
                continue
            busy = sorted((shared.offset(m), shared.offset(m) + graph.tensors[m].nbytes) for m in tensors
                          if m in life and life[m][0] <= last and first <= life[m][1])
            at = _gap(spans[root], busy, size)
            if at is not None:
                shared.join(tensor, root, at - shared.offset(root))
                tensors.append(tensor)
                break


def _gap(span: tuple[int, int], busy: list[tuple[int, int]], size: int) -> int | None:
    """The first 16-byte-aligned offset in `span` where `size` bytes meet none of `busy`."""
    at = span[0] + (-span[0]) % ALIGNMENT
    for low, high in busy + [(span[1], span[1])]:
        if at + size <= low:
            return at
        at = max(at, high + (-high) % ALIGNMENT)
    return None


def _arena(graph: Graph, calls: list[Lowered], shared: _SharedBytes, io_names: dict[int, str], joins: set[int]) -> int:
    return _layout(graph, calls, _apply_band_joins(graph, calls, shared, io_names, joins), io_names,
                   by_pieces=True).plan.arena_bytes


def _with_patched_stage(graph: Graph, steps: list[Lowered]) -> tuple[Graph, list[Lowered]]:
    """The model with its leading convolutions run stripe by stripe (patches.py) where that gives the
    smallest pool of every choice tried, row bands after it included; else as it is."""
    best = (plan_layout(graph, steps, MIN_MEMORY).plan.arena_bytes, graph, steps)
    for stage in stage_candidates(graph, steps, _io_names(graph)):
        staged_graph, staged_steps = apply_stage(graph, steps, stage)
        arena = plan_layout(staged_graph, staged_steps, MIN_MEMORY).plan.arena_bytes
        if arena < best[0]:
            best = (arena, staged_graph, staged_steps)
    return best[1], best[2]


def _io_names(graph: Graph) -> dict[int, str]:
    io = graph.inputs + graph.outputs
    return dict(zip(io, unique_c_identifiers([graph.tensors[index].name for index in io])))


# Words a struct field cannot be: the header is included from C and C++ alike.
_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
    compl complex concept const consteval constexpr constinit const_cast continue co_await co_return co_yield
    decltype default delete do double dynamic_cast else enum explicit export extern false float for friend goto
    if imaginary inline int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private
    protected public register reinterpret_cast requires restrict return short signed sizeof static
    static_assert static_cast struct switch template this thread_local throw true try typedef typeid typename
    typeof union unsigned using virtual void volatile wchar_t while xor xor_eq""".split())


def unique_c_identifiers(names: list[str]) -> list[str]:
    """Each graph input/output name as a C identifier of its own: TVM's sanitisation (every character
    but a letter, digit or '_' becomes '_'), 't_' before a leading digit (or for an empty name), '_'
    after a C/C++ keyword; then names equal ignoring case — the header's SIZE macros are upper case —
    get '_1', '_2', ... in order, a name already a valid identifier keeping its own."""
    bases = []
    for name in names:
        base = re.sub(r"[^0-9A-Za-z_]", "_", name)
        if not base or base[0].isdigit():
            base = f"t_{base}"
        bases.append(f"{base}_" if base in _KEYWORDS else base)
    reserved = {b.lower() for b, n in zip(bases, names) if b == n}  # names already fine keep themselves
    every_base = {b.lower() for b in bases}
    chosen: list[str] = []
    claimed: set[str] = set()
    for base, name in zip(bases, names):
        key = base.lower()
        if key not in claimed and (base == name or key not in reserved):
            chosen.append(base)
        else:  # the first suffix neither claimed nor another name's own
            chosen.append(next(f"{base}_{n}" for n in itertools.count(1)
                               if f"{base}_{n}".lower() not in claimed | every_base))
        claimed.add(chosen[-1].lower())
    return chosen


def mlf_files(graph: Graph, steps: list[Lowered], module: str, provenance: Provenance, model_bytes: bytes,
              export_datetime: str) -> tuple[dict[str, bytes], Layout, list[Lowered]]:
    if provenance.memory == MIN_MEMORY:
        steps = fold_pads(graph, steps, _io_names(graph))
        graph, steps = _with_patched_stage(graph, steps)
    layout = plan_layout(graph, steps, provenance.memory)
    calls = [s for s in steps if s.alias_of is None]
    constants = _constants(calls)
    inputs = [(layout.io_names[i], graph.tensors[i]) for i in graph.inputs]
    outputs = [(layout.io_names[i], graph.tensors[i]) for i in graph.outputs]
    mapped = ({i: layout.pool_offset(i) for i in graph.inputs + graph.outputs} if layout.io_in_pool else None)
    const_bytes = _const_pool_bytes(constants)
    files = {
        f"codegen/host/include/tvmgen_{module}.h": _header(module, inputs, outputs, layout.plan.arena_bytes,
                                                           layout.io_in_pool),
        f"codegen/host/src/{module}_lib0.c": _lib0(module, constants, layout.plan.arena_bytes, inputs, outputs,
                                                   mapped and [mapped[i] for i in graph.inputs + graph.outputs]),
        f"codegen/host/src/{module}_lib1.c": _lib1(module, calls, constants, layout, inputs, outputs),
        f"codegen/host/src/{module}_lib2.c": _lib2(module, calls, inputs, outputs, layout.io_in_pool),
        "src/model.tflite": model_bytes,
    }
    files = {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
    meta = _metadata(module, calls, inputs, outputs, layout.plan.arena_bytes, const_bytes, provenance, export_datetime,
                     layout.io_in_pool)
    files["metadata.json"] = json.dumps(meta, indent=2, sort_keys=True).encode()
    return files, layout, steps


# --- constants -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Constant:
    name: str
    array: np.ndarray
    offset: int


def _constants(calls: list[Lowered]) -> dict[int, Constant]:
    """id(operand) → its constant, laid out in one pool in call order, each 16-byte aligned."""
    placed: dict[int, Constant] = {}
    offset = 0
    for step in calls:
        for operand in step.operands:
            if operand.constant is not None:
                placed[id(operand)] = Constant(f"constant_{len(placed)}_let", operand.constant, offset)
                offset = align(offset + operand.constant.nbytes, ALIGNMENT)
    return placed


def _const_pool_bytes(constants: dict[int, Constant]) -> int:
    return max((align(c.offset + c.array.nbytes, ALIGNMENT) for c in constants.values()), default=0)


def _c_literal(value) -> str:
    """A constant's element as C writes it: integers as they are, floats exactly (hexadecimal)."""
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if value != value:
            return '__builtin_nanf("")'
        if value in (float("inf"), float("-inf")):
            return "__builtin_inff()" if value > 0 else "-__builtin_inff()"
        return value.hex()
    return str(int(value))


def _values(array: np.ndarray) -> str:
    flat = [_c_literal(v) for v in array.reshape(-1)]
    rows = [", ".join(flat[i:i + 24]) for i in range(0, len(flat), 24)]
    return ",\n    ".join(rows)


# --- C files ---------------------------------------------------------------------------------------

_EXTERN_C_OPEN = '#ifdef __cplusplus\nextern "C" {\n#endif\n'
_EXTERN_C_CLOSE = "#ifdef __cplusplus\n}\n#endif\n"


def _header(module: str, inputs, outputs, workspace: int, io_in_pool: bool = False) -> str:
    upper = module.upper()
    lines = [f"#ifndef TVMGEN_{upper}_H_", f"#define TVMGEN_{upper}_H_", "#include <stdint.h>", "", _EXTERN_C_OPEN]
    for kind, tensors in (("Input", inputs), ("Output", outputs)):
        for name, tensor in tensors:
            lines += [f"/*!\n * \\brief {kind} tensor {name} size (in bytes) for TVM module \"{module}\" \n */",
                      f"#define TVMGEN_{upper}_{name.upper()}_SIZE {tensor.nbytes}"]
    for kind, tensors in (("inputs", inputs), ("outputs", outputs)):
        lines += [f"/*!\n * \\brief {kind.capitalize()[:-1]} tensor pointers for TVM module \"{module}\" \n */",
                  f"struct tvmgen_{module}_{kind} {{"] + [f"  void* {name};" for name, _ in tensors] + ["};", ""]
    if io_in_pool:  # TVM's use_workspace_io: the pool is the module's own, so no pool argument
        for kind in ("inputs", "outputs"):
            lines += [f"/*!\n * \\brief Maps I/O inside the workspace pools for TVM module \"{module}\"\n"
                      f" * \\return I/O tensor struct for the module \n */",
                      f"struct tvmgen_{module}_{kind} tvmgen_{module}_map_{kind}(void);", ""]
    lines += [f"/*!\n * \\brief entrypoint function for TVM module \"{module}\"\n"
              " * \\param inputs Input tensors for the module \n * \\param outputs Output tensors for the module \n */",
              f"int32_t tvmgen_{module}_run(\n  struct tvmgen_{module}_inputs* inputs,\n"
              f"  struct tvmgen_{module}_outputs* outputs\n);",
              f"/*!\n * \\brief Workspace size for TVM module \"{module}\" \n */",
              f"#define TVMGEN_{upper}_WORKSPACE_SIZE {workspace}", "", _EXTERN_C_CLOSE,
              f"#endif // TVMGEN_{upper}_H_", ""]
    return "\n".join(lines)


def _main_parameters(inputs, outputs) -> str:
    tensors = [f"{_CTYPES[t.dtype]}* {name}_buffer_var" for name, t in inputs + outputs]
    return ", ".join(tensors + ["uint8_t* global_const_workspace_0_var", "uint8_t* global_workspace_1_var"])


def _lib0(module: str, constants: dict[int, Constant], workspace: int, inputs, outputs,
          io_offsets: list[int] | None = None) -> str:
    fields = [f"  {_CONSTANT_CTYPES[str(c.array.dtype)]} {c.name}[{c.array.size}] __attribute__((aligned(16)));"
              f" // {c.array.nbytes} bytes, aligned offset: {c.offset}" for c in constants.values()]
    values = [f"  .{c.name} = {{\n    {_values(c.array)}\n  }}," for c in constants.values()]
    arguments = [f"inputs->{name}" for name, _ in inputs] + [f"outputs->{name}" for name, _ in outputs]
    lines = ['#include "tvm/runtime/c_runtime_api.h"', _EXTERN_C_OPEN]
    if constants:
        lines += ['__attribute__((section(".rodata.tvm"), ))', "static const struct global_const_workspace {",
                  *fields, "} global_const_workspace = {", *values,
                  f"}};// of total size {_const_pool_bytes(constants)} bytes"]
    else:
        lines += ["static const uint8_t global_const_workspace[16] __attribute__((aligned(16))) = {0};"]
    lines += ['__attribute__((section(".bss.noinit.tvm"), aligned(16)))',
              f"static uint8_t global_workspace[{max(workspace, ALIGNMENT)}];",
              f"#include <tvmgen_{module}.h>",
              f"TVM_DLL int32_t tvmgen_{module}___tvm_main__({_main_parameters(inputs, outputs)});",
              f"int32_t tvmgen_{module}_run(struct tvmgen_{module}_inputs* inputs,struct tvmgen_{module}_outputs* outputs) "
              f"{{return tvmgen_{module}___tvm_main__({','.join(arguments)},((uint8_t*)&global_const_workspace),"
              "((uint8_t*)&global_workspace));", "}"]
    if io_offsets is not None:
        lines += _map_functions(module, inputs, outputs, io_offsets)
    lines += [_EXTERN_C_CLOSE, ";"]
    return "\n".join(lines) + "\n"


def _map_functions(module: str, inputs, outputs, io_offsets: list[int]) -> list[str]:
    """tvmgen_<mod>_map_inputs/_outputs: where in the pool the application writes each input before a
    run and reads each output after it."""
    offsets = iter(io_offsets)
    lines = []
    for kind, tensors in (("inputs", inputs), ("outputs", outputs)):
        fields = [f".{name} = &global_workspace[{next(offsets)}]" for name, _ in tensors]
        lines += [f"struct tvmgen_{module}_{kind} tvmgen_{module}_map_{kind}(void) {{",
                  f"  struct tvmgen_{module}_{kind} mapped = {{{', '.join(fields)}}};", "  return mapped;", "}"]
    return lines


def _function_name(module: str, index: int) -> str:
    return f"tvmgen_{module}_cmsis_nn_main_{index}"


def _lib1(module: str, calls: list[Lowered], constants: dict[int, Constant], layout: Layout, inputs, outputs) -> str:
    lines = ["// tvm target: c -keys=arm_cpu,cpu", "#define TVM_EXPORTS", '#include "tvm/runtime/c_runtime_api.h"',
             '#include "tvm/runtime/c_backend_api.h"', "#include <stdbool.h>", _EXTERN_C_OPEN]
    for index, step in enumerate(calls):
        lines.append(f"TVM_DLL int32_t {_function_name(module, index)}({_prototype(step)});")
    copies = _io_copies(module, inputs, outputs) if layout.io_in_pool else {"input": [], "output": []}
    for name, tensor, function in copies["input"] + copies["output"]:
        lines.append(f"TVM_DLL int32_t {function}({_copy_prototype(tensor)});")
    lines.append(f"TVM_DLL int32_t tvmgen_{module}___tvm_main__({_main_parameters(inputs, outputs)}) {{")
    for constant in constants.values():
        lines.append(f"  void* {constant.name} = (&(global_const_workspace_0_var[{constant.offset}]));")
    for name, offset in layout.carves():
        lines.append(f"  void* {name} = (&(global_workspace_1_var[{offset}]));")
    tensor_of = {name: index for index, name in layout.io_names.items()}
    pool_args = "global_const_workspace_0_var, global_workspace_1_var"
    for name, _, function in copies["input"]:  # the application's input into the pool
        lines.append(f"  if ({function}({name}_buffer_var, {layout.place(tensor_of[name])}, {pool_args}) != 0 ) return -1;")
    for index, step in enumerate(calls):
        arguments = [constants[id(o)].name if o.constant is not None else layout.place(o.tensor) for o in step.operands]
        arguments += ["global_const_workspace_0_var", "global_workspace_1_var"]
        lines.append(f"  if ({_function_name(module, index)}({', '.join(arguments)}) != 0 ) return -1;")
    for name, _, function in copies["output"]:  # the pool's output out to the application
        lines.append(f"  if ({function}({layout.place(tensor_of[name])}, {name}_buffer_var, {pool_args}) != 0 ) return -1;")
    lines += ["  return 0;", "}", "", _EXTERN_C_CLOSE, ";"]
    return "\n".join(lines) + "\n"


def _io_copies(module: str, inputs, outputs) -> dict[str, list[tuple[str, object, str]]]:
    """Each input's and output's copy function, for an application that runs the model on buffers of
    its own: (C name, tensor, function)."""
    return {kind: [(name, tensor, f"tvmgen_{module}_copy_{kind}_{i}") for i, (name, tensor) in enumerate(tensors)]
            for kind, tensors in (("input", inputs), ("output", outputs))}


def _copy_prototype(tensor) -> str:
    ctype = _CTYPES[tensor.dtype]
    return f"{ctype}* source_, {ctype}* target_, uint8_t* global_const_workspace_var, uint8_t* global_workspace_var"


def _copy_functions(module: str, inputs, outputs) -> list[str]:
    """A copy of the application's buffer into the pool before the run (an output: out of it after);
    where the application handed the pool's own bytes (tvmgen_<mod>_map_inputs/_outputs) it moves
    them onto themselves, unchanged (memmove, unconditional: the build proves the pool's regions from
    this code, which compares no pointers)."""
    lines = []
    copies = _io_copies(module, inputs, outputs)
    for name, tensor, function in copies["input"] + copies["output"]:
        lines += [f"/* {name}: between the application's buffer and the pool */",
                  f"TVM_DLL int32_t {function}({_copy_prototype(tensor)}) {{",
                  "  (void)global_const_workspace_var;", "  (void)global_workspace_var;",
                  f"  memmove(target_, source_, {tensor.nbytes});", "  return 0;", "}", ""]
    return lines


def _prototype(step: Lowered) -> str:
    params = [f"{o.ctype} {o.param}" for o in step.operands]
    return ", ".join(params + ["uint8_t* global_const_workspace_var", "uint8_t* global_workspace_var"])


def _helpers_called(calls: list[Lowered]) -> list[str]:
    """The C helpers (lowering.C_HELPERS) a body names, and those they name in turn, each once, in
    C_HELPERS' order (each after those it calls), before the functions."""
    text = "\n".join(line for step in calls for line in
                      (step.band_body if step.band_order else step.body) + _functions(step))
    named: set[str] = set()
    while True:
        found = {name for name in C_HELPERS if name not in named and names_word(text, name)}
        if not found:
            break
        named |= found
        text = "\n".join(C_HELPERS[name] for name in found)
    return [f"{code}\n" for name, code in C_HELPERS.items() if name in named]


def _functions(step: Lowered) -> list[str]:
    return step.functions + (step.bands.functions if step.band_order else [])


def _lib2(module: str, calls: list[Lowered], inputs=(), outputs=(), io_in_pool: bool = False) -> str:
    lines = ["// tvm target: cmsis-nn ", "#define TVM_EXPORTS", '#include "tvm/runtime/c_runtime_api.h"',
             '#include "tvm/runtime/c_backend_api.h"', "#include <math.h>", "#include <stdbool.h>",
             "#include <stddef.h>", "#include <string.h>"]
    if any(step.function for step in calls):  # a model of our kernels alone needs no CMSIS-NN tree
        lines += ["#include <arm_nnfunctions.h>", "#include <arm_nn_types.h>", "#include <arm_nn_math_types.h>"]
    lines += [_EXTERN_C_OPEN]
    lines += _helpers_called(calls)
    for index, step in enumerate(calls):
        op = step.operator
        how = f" — {step.note}" if step.note else (" — mlfbuild's kernel, TFLite's reference semantics" if step.kernel else "")
        lines.append(f"/* TFLite operator {op.index}: {op.name}{how} */")
        name = _function_name(module, index)
        # the calls each band or stripe makes, one function each (TVM's shape: one call per function)
        lines += [line.replace(BAND_FUNCTION, name) for line in _functions(step)]
        lines.append(f"TVM_DLL int32_t {name}({_prototype(step)}) {{")
        lines += ["  (void)global_const_workspace_var;", "  (void)global_workspace_var;"]
        lines += [line.replace(BAND_FUNCTION, name) for line in (step.band_body if step.band_order else step.body)]
        lines += ["}", ""]
    if io_in_pool:
        lines += _copy_functions(module, inputs, outputs)
    lines += [_EXTERN_C_CLOSE, ";"]
    return "\n".join(lines) + "\n"


# --- metadata --------------------------------------------------------------------------------------

def _single_rounding(calls: list[Lowered], rounding: str) -> list[str]:
    """TFLite's reference FULLY_CONNECTED rounds its requantisation once (an int64 multiply and one
    rounding shift) where its convolutions round twice, as CMSIS-NN's default build does everywhere:
    the build compiles CMSIS-NN's fully connected kernel to round once for this MLF."""
    if rounding != TFLITE_ROUNDING:
        return []
    return ["arm_fully_connected_s8"] if any(c.function == "arm_fully_connected_s8" for c in calls) else []


def _metadata(module: str, calls: list[Lowered], inputs, outputs, workspace: int, constants: int,
              provenance: Provenance, export_datetime: str, io_in_pool: bool = False) -> dict:
    def tensors(items) -> dict:
        # keyed by the model's own names, as TVM keeps them (a name the model repeats: by its C name),
        # each with its field in the header's structs
        keyed: dict[str, dict] = {}
        for c_name, t in items:
            keyed[c_name if t.name in keyed else t.name] = {"dtype": t.dtype, "size": t.nbytes,
                                                            "shape": list(t.shape), "c_name": c_name}
        return keyed

    main = {"constants_size_bytes": constants, "device": 1, "inputs": tensors(inputs), "outputs": tensors(outputs),
            # inputs and outputs in the workspace pool take no bytes of their own
            "io_size_bytes": 0 if io_in_pool else sum(t.nbytes for _, t in inputs + outputs),
            "workspace_size_bytes": workspace}
    functions = [_function_name(module, i) for i in range(len(calls))]
    if io_in_pool:
        copies = _io_copies(module, inputs, outputs)
        functions += [function for _, _, function in copies["input"] + copies["output"]]
    operators = [{"function_name": name, "workspace": [{"device": 1, "workspace_size_bytes": 0}]} for name in functions]
    return {"modules": {module: {
        "executors": ["aot"], "export_datetime": export_datetime,
        "memory": {"functions": {"main": [main], "operator_functions": operators}},
        "mlfbuild_import": dict(provenance.to_json(), rounding=provenance.rounding, memory=provenance.memory,
                                kernels=provenance.kernels,
                                single_rounding=_single_rounding(calls, provenance.rounding),
                                **({"io": "workspace pool"} if io_in_pool else {})),
        "model_name": module, "style": "full-model", "target": ["c -keys=arm_cpu,cpu"]}},
        "version": 7}
