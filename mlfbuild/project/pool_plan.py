"""TVM's USMP workspace pool re-planned at the liveness floor.

TVM's default USMP algorithm (greedy by size) can place tensors end to end that are never live
together: kws's nine 8,000-byte activations take 72,000 B where at most two are live at any call.
Here the regions proven from the generated C (canalysis/pool.py) go through the planner the graph lowering
uses (memory_plan.py), each live from the first call that uses it to the last; the offsets in the
copied sources are rewritten and the pool is declared at the new size. TVM's layout is kept, and
the reason given, when any region's size or lifetime is not certain, when TVM's own layout overlaps
two regions this reading finds live together (then the reading is not TVM's understanding), or when
the re-plan would not be smaller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..canalysis.cfront import HOST, HeaderSearch, Preprocessor
from ..canalysis.pool import Region, UsmpPool, read_usmp_pool
from .memory_plan import Buffer, MemoryPlan, align, floor_bytes, plan_memory

ALIGNMENT = 16  # TVM's USMP aligns the pool and every region to 16 bytes


@dataclass
class PoolPlan:
    """The module's workspace pool as TVM sized it and as the firmware holds it."""

    kind: str  # "usmp" (TVM's static pool) | "allocator" (TVMBackendAllocWorkspace)
    tvm_bytes: int
    bytes: int  # what the firmware holds
    floor_bytes: int | None  # the most bytes live at once (None: not known with certainty)
    replanned: bool
    reason: str = ""  # why TVM's layout was kept (empty when re-planned)
    sources: dict[str, str] = field(default_factory=dict)  # rewritten sources: path -> text
    plan: MemoryPlan | None = None
    scratch: dict[str, str] = field(default_factory=dict)  # operator -> its CMSIS-NN scratch buffer in the pool (C)
    producer: str = "TVM"  # what laid the pool out (Module.producer)
    live: list[int] = field(default_factory=list)  # bytes of its regions live during each call (where proven)

    def note(self, module: str) -> str:
        if self.kind == "allocator" and self.floor_bytes is None:
            return f"{module}: TVMBackendAllocWorkspace pool {self.bytes:,} B: {self.reason}"
        if self.kind == "allocator":
            return (f"{module}: TVMBackendAllocWorkspace pool {self.bytes:,} B, the peak its allocations reach "
                    f"(TVM's figure {self.tvm_bytes:,} B)")
        if self.replanned:
            inside = f", {len(self.scratch)} of them CMSIS-NN scratch buffers" if self.scratch else ""
            return (f"{module}: USMP workspace pool re-planned: {self.tvm_bytes:,} B -> {self.bytes:,} B "
                    f"(floor {self.floor_bytes:,} B, {len(self.plan.buffers)} regions{inside})")
        return f"{module}: USMP workspace pool kept as {self.producer} laid it out ({self.tvm_bytes:,} B): {self.reason}"

    def to_json(self) -> dict:
        return {"kind": self.kind, "producer": self.producer, "tvm_bytes": self.tvm_bytes, "bytes": self.bytes,
                "floor_bytes": self.floor_bytes, "replanned": self.replanned, "reason": self.reason or None,
                **({"live_bytes": list(self.live)} if self.live else {}),
                "regions": ([{"name": b.name, "size": b.size, "first": b.first, "last": b.last,
                              "offset": self.plan.offsets[b.name]} for b in self.plan.buffers]
                            if self.plan else [])}


def plan_usmp_pool(sources: dict[str, str], module_name: str, scratch: dict[str, int] | None = None,
                   include_dirs: tuple[Path, ...] = (), tvm_bytes: int = 0, producer: str = "TVM") -> PoolPlan | None:
    """The re-planned pool of one AOT module (None: the code declares no USMP pool). `scratch`: bytes of
    scratch buffer per operator (the CMSIS-NN calls mlfbuild gives one), each a region of the pool live
    during its operator's call; operators not handed the pool are left out (PoolPlan.scratch says which
    got one). `include_dirs`: where the code's headers are (the MLF's, CMSIS-NN's); `tvm_bytes`: TVM's
    figure for the pool, reported where the code cannot be read; `producer`: what wrote the code
    (Module.producer), as the reasons name it."""
    pool = read_usmp_pool(sources, module_name, include_dirs)
    if pool is None:
        return None
    kept = _reason_to_keep(pool, producer)
    if kept:
        length = pool.tvm_bytes or tvm_bytes
        return PoolPlan("usmp", length, length, None, False, kept, producer=producer)
    buffers = [Buffer(r.name, r.size or 0, r.first, r.last) for r in pool.regions]
    placed = {function: nbytes for function, nbytes in (scratch or {}).items() if function in pool.operators and nbytes}
    buffers += [Buffer(f"{function}:scratch", nbytes, *pool.operators[function][1:]) for function, nbytes in placed.items()]
    if pool.mapped:  # its inputs and outputs where the application was told: the layout as it is
        live = _live_in_layout(pool)
        return PoolPlan("usmp", pool.tvm_bytes, pool.tvm_bytes, max(live, default=0), False,
                        f"its inputs and outputs are in the pool, at the offsets tvmgen_{module_name}_map_inputs and "
                        "_map_outputs give the application", producer=producer, live=live)
    floor = floor_bytes(buffers, ALIGNMENT)
    live = _live_per_call(buffers, pool)
    overlap = _overlap_in_tvm_layout(pool.regions)
    if overlap:
        return PoolPlan("usmp", pool.tvm_bytes, pool.tvm_bytes, floor, False,
                        f"{producer}'s layout overlaps {overlap[0]} and {overlap[1]}, which this reading finds live "
                        "at the same call", producer=producer)
    plan = plan_memory(buffers, ALIGNMENT)
    if plan.arena_bytes >= pool.tvm_bytes:
        return PoolPlan("usmp", pool.tvm_bytes, pool.tvm_bytes, floor, False,
                        f"{producer}'s layout is already as small as the re-plan ({plan.arena_bytes:,} B)", plan=None,
                        producer=producer, live=live)
    buffer = {function: f"(void*)(&({pool.operators[function][0]}[{plan.offsets[f'{function}:scratch']}]))"
              for function in placed}
    return PoolPlan("usmp", pool.tvm_bytes, plan.arena_bytes, floor, True, "",
                    _rewrite(sources, pool, plan), plan, buffer, producer=producer, live=live)


def _live_per_call(buffers: list[Buffer], pool: UsmpPool) -> list[int]:
    """The bytes of the pool's regions live during each operator call, in the order of the calls:
    the memory over the inference."""
    calls = sorted((first, last) for _, first, last in pool.operators.values())
    return [sum(align(b.size, ALIGNMENT) for b in buffers if b.first <= last and first <= b.last)
            for first, last in calls]


def _live_in_layout(pool: UsmpPool) -> list[int]:
    """The bytes of the pool live during each operator call as the code lays them out: the union of
    the regions live then (regions may share bytes, a layer written over its dying input)."""
    calls = sorted((first, last) for _, first, last in pool.operators.values())
    live = []
    for first, last in calls:
        spans = sorted((r.offset, r.offset + (r.size or 0)) for r in pool.regions if r.first <= last and first <= r.last)
        total, reach = 0, 0
        for low, high in spans:
            total += max(0, high - max(low, reach))
            reach = max(reach, high)
        live.append(total)
    return live


def header_dirs(root: Path, cmsis_nn: Path | None = None, cmsis_core: Path | None = None,
                preprocessor: Preprocessor = HOST) -> HeaderSearch:
    """Where a module's C finds its headers: the MLF's interface headers, and CMSIS-NN's (with the
    CMSIS-Core headers a tree may need) when the build has a CMSIS-NN tree; read by `preprocessor`,
    the build's compiler."""
    dirs = [root / "codegen" / "host" / "include"]
    if cmsis_nn is not None:
        dirs.append(cmsis_nn / "Include")
    if cmsis_core is not None:
        dirs.append(cmsis_core)
    return HeaderSearch(dirs, preprocessor)


def _reason_to_keep(pool: UsmpPool, producer: str) -> str:
    if pool.problem:
        return f"not proven: {pool.problem}"
    beyond = [r for r in pool.regions if r.offset + (r.size or 0) > pool.tvm_bytes]
    if beyond:
        return f"{beyond[0].name} reaches beyond {producer}'s pool as read"
    if not pool.regions:
        return "no regions of the pool are used"
    return ""


def _overlap_in_tvm_layout(regions: list[Region]) -> tuple[str, str] | None:
    """Two regions live at one call whose bytes TVM overlapped (TVM knows something not read here)."""
    for index, a in enumerate(regions):
        for b in regions[index + 1:]:
            live = a.first <= b.last and b.first <= a.last
            if live and a.size and b.size and a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                return a.name, b.name
    return None


def _rewrite(sources: dict[str, str], pool: UsmpPool, plan: MemoryPlan) -> dict[str, str]:
    edits: dict[str, list[tuple[int, int, str]]] = {}
    declaration = pool.declaration
    edits.setdefault(declaration.path, []).append((declaration.start, declaration.end, str(plan.arena_bytes)))
    for region in pool.regions:
        for site in region.sites:
            edits.setdefault(site.path, []).append((site.start, site.end, str(plan.offsets[region.name])))
    for site in pool.untouched:  # never read or written: any offset inside the pool will do
        edits.setdefault(site.path, []).append((site.start, site.end, "0"))
    rewritten = {}
    for path, changes in edits.items():
        text = sources[path]
        for start, end, value in sorted(changes, reverse=True):
            text = text[:start] + value + text[end:]
        rewritten[path] = text
    return rewritten
