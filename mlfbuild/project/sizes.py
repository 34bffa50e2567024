"""Every size the generated C declares, bounded by the board before a file is written.

Two verdicts: a size the board cannot even address is impossible (InvalidInputError, exit 3: beyond
2**32 bytes on a 32-bit core); a size it can address but does not have is over budget
(OverBudgetError, exit 5: one buffer larger than the board's RAM or flash, or the bytes every build
of the model certainly takes — constants in flash, planned pools and io buffers in RAM — beyond the
board's region; the linker judges the rest). The host has no memory map: its firmware's static data must stay below 2 GiB (x86-64's small
code model, and the firmware's tensor table counts bytes in 32 bits). Shapes go into int32_t
arrays, so every dimension must fit one. The generated C itself is capped too, so that a huge graph
fails here in seconds rather than in the compiler after minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..boards import Board
from ..errors import InvalidInputError, OverBudgetError
from ..mlf.model import Module
from .lowering import Lowered

DEFAULT_MAX_CODE_BYTES = 64 * 1024 * 1024
HOST_STATIC_BYTES = 2**31
INT32_MAX = 2**31 - 1
INITIALIZER_CHARS_PER_BYTE = 6  # "0x12, " per weight byte in a C array initializer


@dataclass(frozen=True)
class Bounds:
    board: str
    address_bits: int
    ram: int
    flash: int

    @classmethod
    def of(cls, board: Board) -> "Bounds":
        if board.is_host or board.memory is None:
            return cls(board.name, 64, HOST_STATIC_BYTES, HOST_STATIC_BYTES)
        return cls(board.name, 32, board.memory.ram.length, board.memory.flash.length)

    def check(self, what: str, nbytes: int, region: str) -> None:
        """`what` takes `nbytes` of `region` ("ram" or "flash")."""
        self.check_addressable(what, nbytes)
        have = self.ram if region == "ram" else self.flash
        if nbytes > have:
            kind = "static data limit" if self.address_bits == 64 else region.upper()
            raise OverBudgetError(f"the firmware does not fit the board: {what} needs {nbytes} bytes, "
                                  f"{self.board} has {have} bytes of {kind}",
                                  table=_one_buffer_table(what, nbytes, region, have))

    def check_total(self, region: str, what: str, parts: list[tuple[str, str, int]]) -> None:
        """`parts` ([(module, what, bytes)]) all take `region` ("flash" or "ram") of a board with a memory
        map: their sum beyond it is refused, with the figures (the host has no such regions)."""
        needed = sum(nbytes for _, _, nbytes in parts)
        have = self.flash if region == "flash" else self.ram
        if self.address_bits == 64 or needed <= have:
            return
        module, largest, nbytes = max(parts, key=lambda part: part[2])
        raise OverBudgetError(f"the firmware does not fit the board: {region} {needed:,} B > {have:,} B by "
                              f"{needed - have:,} B ({self.board}), refused before compiling: {what} alone need "
                              f"that much (largest: {module}'s {largest}, {nbytes:,} B)",
                              table=_total_table(region, self.board, have, parts))

    def check_addressable(self, what: str, nbytes: int) -> None:
        """A figure the firmware does not allocate as such, but that no honest MLF could state."""
        if nbytes >= 2**self.address_bits:
            raise InvalidInputError(f"{what}: {nbytes} bytes is impossible on {self.board} "
                                    f"(a {self.address_bits}-bit address space)")

    def check_shape(self, what: str, shape: tuple[int, ...] | None) -> None:
        if shape and max(shape) > INT32_MAX:
            raise InvalidInputError(f"{what}: dimension {max(shape)} is impossible on {self.board} "
                                    f"(the firmware's shapes are int32)")


def _one_buffer_table(what: str, nbytes: int, region: str, have: int) -> str:
    """The size table of a refusal made before linking: the one buffer against the board's region."""
    rows = [("region", "board has", "needed by one buffer"), (region, f"{have:,} B", f"{nbytes:,} B ({what})")]
    width = max(len(row[0]) for row in rows), max(len(row[1]) for row in rows)
    return "\n".join(f"{a:<{width[0]}}  {b:>{width[1]}}  {c}" for a, b, c in rows)


def check_module(module: Module, bounds: Bounds, max_code_bytes: int) -> None:
    """What the MLF itself asks for, before lowering builds any C from it."""
    for kind, specs in (("input", module.inputs), ("output", module.outputs)):
        for spec in specs:
            what = f"{module.name}: {kind} {spec.name[:80]!r}"
            bounds.check(what, spec.nbytes, "ram")
            bounds.check_shape(what, spec.shape)
    graph = module.graph
    if graph is not None:  # activations live in RAM, weights where the lowering puts them (checked below)
        weights = {graph.entry_id(nid, 0) for nid in graph.arg_nodes if graph.nodes[nid].name in module.params}
        for eid, entry in enumerate(graph.entries):
            if eid not in weights:
                bounds.check(f"{module.name}: graph entry {eid} ({entry.dtype}{list(entry.shape)[:8]})",
                             entry.nbytes, "ram")
    bounds.check(f"{module.name}: the weights", module.params_bytes, "flash")
    # The pools are sized from the code where it states every size (lowering/base.py), so TVM's own
    # workspace figure is only shown; still, one beyond the address space marks a damaged MLF.
    bounds.check_addressable(f"{module.name}: the metadata's workspace_size_bytes", module.workspace_bytes())
    if module.executor == "graph":
        _check_code_size(f"{module.name}: the weights as C initializers",
                         module.params_bytes * INITIALIZER_CHARS_PER_BYTE, max_code_bytes)


def check_lowered(lowered: list[Lowered], workspace_bytes: int, bounds: Bounds, max_code_bytes: int) -> None:
    """What the lowerings computed from it (arenas, pools, embedded files) and the C they made."""
    for item in lowered:
        for what, nbytes, region in item.buffers:
            bounds.check(f"{item.module.name}: {what}", nbytes, region)
        _check_code_size(f"{item.module.name}: the generated C", len(item.code), max_code_bytes)
    bounds.check("the workspace pool", workspace_bytes, "ram")
    _check_code_size("the generated C of all modules", sum(len(item.code) for item in lowered), max_code_bytes)


def _check_code_size(what: str, nbytes: int, limit: int) -> None:
    if nbytes > limit:
        raise InvalidInputError(f"{what} would be {nbytes} bytes, above the limit of {limit} "
                                "(raise it with --max-code-size)")


# --- what every build of the model certainly takes, summed ---------------------------------------------
#
# Refused here in a second instead of after minutes of compiling; only bytes no build can do without
# are counted (code, the runtime, the stack and figures a lowering may still shrink are not), so a
# model refused here could never have linked.

def certain_constant_bytes(module: Module) -> tuple[int, str]:
    """The flash the module's constants take in any firmware, and what they are: TVM's USMP constant
    pool (one array in .rodata.tvm, the size metadata.json states) or the params file mlfbuild links as
    const arrays (graph executor); 0 where the constants are compiled into the kernels unmeasured."""
    if module.executor == "aot" and module.usmp:
        pool = sum(m.constants_size_bytes for m in module.memory if m.device == 1)
        return pool, "USMP constant pool global_const_workspace"
    if module.executor == "graph" and not module.link_params:
        return module.params_bytes, "weights (params file)"
    return 0, ""


def check_constants_fit(modules: Iterable[Module], bounds: Bounds) -> None:
    """The modules' constants, summed, against the board's flash (before any lowering)."""
    parts = [(module.name, what, nbytes) for module in modules for nbytes, what in [certain_constant_bytes(module)]]
    bounds.check_total("flash", "the constants", [part for part in parts if part[2]])


def check_plan_fits(lowered: list[Lowered], bounds: Bounds, own_io: bool) -> None:
    """After planning: flash as above (or the lowering's flash buffers, the larger), and in RAM the
    workspace pools (a USMP pool's floor: re-planning never goes below it), the modules' arenas and,
    where the firmware's own application holds them (`own_io`), the input and output buffers."""
    flash, ram = [], []
    for item in lowered:
        name = item.module.name
        constants, what = certain_constant_bytes(item.module)
        declared = sum(nbytes for _, nbytes, region in item.buffers if region == "flash")
        flash.append((name, what, constants) if constants >= declared else (name, "constants and tables", declared))
        if item.pool and item.pool.kind == "usmp" and item.pool.floor_bytes:
            ram.append((name, "USMP pool global_workspace at its floor", item.pool.floor_bytes))
        if own_io:      # an application of the user's may define the arena and the io buffers elsewhere
            ram.append((name, "arena", item.arena_bytes))
            ram.append((name, "input and output buffers",  # none of their own when in the pool
                        0 if item.module.io_in_pool else sum(spec.nbytes for spec in item.module.inputs + item.module.outputs)))
    bounds.check_total("flash", "the constants", [part for part in flash if part[2]])
    bounds.check_total("ram", "the planned workspace pools and io buffers", [part for part in ram if part[2]])


def _total_table(region: str, board: str, have: int, parts: list[tuple[str, str, int]]) -> str:
    """The size table of a refusal made before compiling: what is certainly needed against the region."""
    needed = sum(nbytes for _, _, nbytes in parts)
    rows = [(region, "certainly needed", "bytes")] + [(name, what, f"{nbytes:,} B") for name, what, nbytes in parts]
    rows += [("total", "", f"{needed:,} B"), (board, f"has {region}", f"{have:,} B"), ("", "over by", f"{needed - have:,} B")]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:>{widths[2]}}" for a, b, c in rows)
