"""What every lowering shares: tensor descriptors, the packed-call plumbing and the workspace sizing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from jinja2 import Environment

from ...mlf.model import Module, TensorSpec

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
    """The C for one module and what the firmware must provide for it."""

    module: Module
    symbol: str  # the mlf_model_t this code defines
    code: str
    workspace_bytes: int = 0  # TVMBackendAllocWorkspace pool the module needs (0: none)
    notes: list[str] = field(default_factory=list)
    buffers: list[tuple[str, int, str]] = field(default_factory=list)  # (what, bytes, "ram"|"flash") it declares


class Lowering:
    template = ""

    def applies(self, module: Module) -> bool:
        raise NotImplementedError

    def lower(self, module: Module, root: Path, env: Environment) -> Lowered:
        raise NotImplementedError

    def render(self, env: Environment, **context) -> str:
        return env.get_template(f"lowering/{self.template}").render(**context)


_ALLOC_CALL = re.compile(r"TVMBackendAllocWorkspace\(\s*\d+\s*,\s*[^,]+,\s*\(uint64_t\)\s*(\d+)")


def allocation_sites(module: Module, root: Path) -> list[int]:
    """Byte counts of the TVMBackendAllocWorkspace calls in the generated C (0 where the size is not
    a literal); object files are opaque, so they count as a generous number of unknown calls."""
    sizes: list[int] = []
    for rel in module.sources:
        text = (root / rel).read_text(errors="replace")
        literal = [int(n) for n in _ALLOC_CALL.findall(text)]
        sizes += literal + [0] * (text.count("TVMBackendAllocWorkspace(") - len(literal))
    if any("TVMBackendAllocWorkspace" in o.undefined for o in module.objects):
        sizes += [0] * 32
    return sizes


def workspace_with_slack(bytes_needed: int, module: Module, root: Path) -> int:
    """The pool behind TVMBackendAllocWorkspace: what TVM planned (or, where it planned nothing, the
    sum of the literal allocation sizes) plus one alignment unit per call site."""
    sites = allocation_sites(module, root)
    if not sites:
        return 0
    needed = bytes_needed or sum(sites)
    return _align(needed + WORKSPACE_ALIGNMENT * len(sites))


def _align(value: int, to: int = WORKSPACE_ALIGNMENT) -> int:
    return (value + to - 1) // to * to
