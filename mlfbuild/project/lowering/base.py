"""What every lowering shares: tensor descriptors, the packed-call plumbing and the workspace sizing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from jinja2 import Environment

from ...canalysis.allocator import allocation_call_sizes, allocation_peaks
from ...canalysis.copies import IdentityCopy
from ...mlf.model import Module, TensorSpec
from ..pool_plan import PoolPlan

# DLPack type codes (dlpack.h: kDLInt=0, kDLUInt=1, kDLFloat=2); TVM encodes bool as uint1.
_DTYPE_CODES = {"int": 0, "uint": 1, "float": 2}
# Every TVMBackendAllocWorkspace call is rounded up to this alignment by crt/src/backend.c.
WORKSPACE_ALIGNMENT = 16


def dl_dtype(dtype: str) -> tuple[int, int]:
    if dtype == "bool":
        return 1, 1
    match = re.fullmatch(r"(int|uint|float)(\d+)", dtype)
    if not match:
        raise ValueError(f"unsupported dtype {dtype}")
    return _DTYPE_CODES[match.group(1)], int(match.group(2))


@dataclass
class CTensor:
    """A tensor as the generated C sees it: where its bytes live and how to describe it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    data: str  # C expression of the data pointer (void*)

    @property
    def code(self) -> int:
        return dl_dtype(self.dtype)[0]

    @property
    def bits(self) -> int:
        return dl_dtype(self.dtype)[1]


def shape_of(spec: TensorSpec) -> tuple[int, ...]:
    if spec.shape is not None:
        return spec.shape
    return (spec.nbytes // max(dl_dtype(spec.dtype)[1] // 8, 1),)


@dataclass
class Lowered:
    """The model library's C for one module: `code` defines `tvmgen_<mod>_run(&inputs, &outputs)` (the
    AOT C interface) unless the MLF's own code does, and the module's arena; `interface_header` is the
    tvmgen_<mod>.h declaring it when the MLF brings none."""

    module: Module
    symbol: str  # kept for the lowerings' callers: the module's prefix (mlf_<mod>)
    code: str  # "" when the MLF's own code is all the library needs
    workspace_bytes: int = 0  # TVMBackendAllocWorkspace pool the module needs (0: none), inside its arena
    interface_header: str | None = None  # generated tvmgen_<mod>.h (None: the MLF's own)
    entry_rename: str | None = None  # the name the MLF's own tvmgen_<mod>_run is compiled under (ours wraps it)
    notes: list[str] = field(default_factory=list)
    buffers: list[tuple[str, int, str]] = field(default_factory=list)  # (what, bytes, "ram"|"flash") it declares
    memory_plan: dict | None = None  # the arena plan, when the lowering made one (MemoryPlan.to_json())
    planned_scratch: bool = False  # operators take their scratch from regions of the planned arena
    pool: PoolPlan | None = None  # the module's workspace pool: TVM's size, the firmware's, the floor
    copies: list[IdentityCopy] = field(default_factory=list)  # TVM's copy loops the model's code runs as memcpy

    @property
    def arena_bytes(self) -> int:
        """RAM of the module's arena (mlf_<mod>_arena): the planned tensors, then the workspace pool."""
        planned = self.memory_plan["arena_bytes"] if self.memory_plan else 0
        return arena_pool_offset(planned) + self.workspace_bytes if self.workspace_bytes else planned


def arena_pool_offset(planned_bytes: int) -> int:
    """Where the workspace pool starts in a module's arena: after the planned tensors, aligned."""
    return _align(planned_bytes)


class Lowering:
    template = ""

    def applies(self, module: Module) -> bool:
        raise NotImplementedError

    def lower(self, module: Module, root: Path, env: Environment, include_dirs: tuple[Path, ...] = ()) -> Lowered:
        """`include_dirs`: where the module's C finds its headers, for the analyses that read it."""
        raise NotImplementedError

    def render(self, env: Environment, **context) -> str:
        return env.get_template(f"lowering/{self.template}").render(**context)

    @staticmethod
    def interface_header(env: Environment, module: Module, what: str) -> str:
        """tvmgen_<mod>.h for a module whose MLF brings none: TVM's AOT C interface, same shape."""
        return env.get_template("lowering/tvmgen.h.j2").render(m=module, what=what)


def module_sources(module: Module, root: Path) -> dict[str, str]:
    """The module's generated C files, by their path inside the MLF."""
    return {rel: (root / rel).read_text(errors="surrogateescape") for rel in module.sources}


def allocation_sites(module: Module, root: Path, include_dirs: tuple[Path, ...] = ()) -> list[int]:
    """Byte counts of the TVMBackendAllocWorkspace calls in the generated C (0 where the size is not
    a literal); object files are opaque, so they count as a generous number of unknown calls."""
    sizes = allocation_call_sizes(module_sources(module, root), include_dirs)
    if any("TVMBackendAllocWorkspace" in o.undefined for o in module.objects):
        sizes += [0] * 32
    return sizes


def workspace_with_slack(bytes_needed: int, module: Module, root: Path, include_dirs: tuple[Path, ...] = ()) -> int:
    """The pool behind TVMBackendAllocWorkspace: what TVM planned (or, where it planned nothing, the
    sum of the literal allocation sizes) plus one alignment unit per call site."""
    sites = allocation_sites(module, root, include_dirs)
    if not sites:
        return 0
    needed = bytes_needed or sum(sites)
    return _align(needed + WORKSPACE_ALIGNMENT * len(sites))


def allocator_pool(module: Module, root: Path, include_dirs: tuple[Path, ...] = ()) -> tuple[int, PoolPlan | None]:
    """The TVMBackendAllocWorkspace pool of a module (bytes, and what the reports show of it): the
    exact peak its allocations reach where the analysis proves it on every path (a stack allocator
    needs no more), else TVM's figure plus slack. With USMP, TVM's figure is its static pool, not this one."""
    if not allocation_sites(module, root, include_dirs):
        return 0, None
    tvm_bytes = 0 if module.usmp else module.workspace_bytes()
    scratch, why = operator_scratch(module, root, include_dirs)
    if scratch is not None:
        peak = max(scratch.values(), default=0)
        return peak, PoolPlan("allocator", tvm_bytes, peak, peak, False)
    pool = workspace_with_slack(tvm_bytes, module, root, include_dirs)
    return pool, PoolPlan("allocator", tvm_bytes, pool, None, False,
                          f"the peak of its allocations is not proven ({why}): TVM's figure plus 16 B per "
                          "allocation site")


def operator_scratch(module: Module, root: Path, include_dirs: tuple[Path, ...] = ()) -> tuple[dict[str, int] | None, str]:
    """({function: most bytes it holds from TVMBackendAllocWorkspace at once, its callees' on top}, "")
    proven from the generated C (canalysis/allocator.py), or (None, why not): object code allocates
    where nothing can be read."""
    if any("TVMBackendAllocWorkspace" in o.undefined for o in module.objects):
        return None, "object code allocates"
    return allocation_peaks(module_sources(module, root), include_dirs)


def _align(value: int, to: int = WORKSPACE_ALIGNMENT) -> int:
    return (value + to - 1) // to * to


