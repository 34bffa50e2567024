"""The normalised model description every later stage sees, whatever MLF version produced it.

Plain frozen value objects: the reader fills them, nothing downstream mutates them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .dtypes import dtype_nbytes
from .graph import Graph
from .params import Param


def c_identifier(name: str) -> str:
    """TVM's sanitisation of tensor names for C (every non-alphanumeric char becomes '_')."""
    return re.sub(r"[^0-9A-Za-z]", "_", name)


@dataclass(frozen=True)
class Target:
    """One TVM target string, e.g. 'c -keys=cpu -mcpu=cortex-m4' → kind 'c' and its attributes."""

    raw: str
    kind: str
    attrs: dict[str, str]

    @classmethod
    def parse(cls, raw: str) -> "Target":
        tokens = raw.split()
        kind = tokens[0] if tokens else ""
        attrs: dict[str, str] = {}
        for token in tokens[1:]:
            key, _, value = token.lstrip("-").partition("=")
            attrs[key] = value if value else "1"
        return cls(raw=raw.strip(), kind=kind, attrs=attrs)

    def flag(self, key: str) -> bool | None:
        """Boolean target attribute (v5 keeps executor options here), None when absent."""
        if key not in self.attrs:
            return None
        return self.attrs[key] not in ("0", "false", "False")


@dataclass(frozen=True)
class TensorSpec:
    name: str  # the model's own name
    dtype: str
    shape: tuple[int, ...] | None
    nbytes: int
    c_field: str = ""  # its field in the C structs, when not c_identifier(name) (mlfbuild import's)

    @property
    def c_name(self) -> str:
        return self.c_field or c_identifier(self.name)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "c_name": self.c_name, "dtype": self.dtype,
                "shape": list(self.shape) if self.shape is not None else None, "size_bytes": self.nbytes}


def spec_from_shape(name: str, dtype: str, shape: tuple[int, ...], c_field: str = "") -> TensorSpec:
    count = 1
    for dim in shape:
        count *= dim
    return TensorSpec(name=name, dtype=dtype, shape=shape, nbytes=count * dtype_nbytes(dtype), c_field=c_field)


@dataclass(frozen=True)
class MainMemory:
    """One `memory.functions.main` entry: what TVM predicted per device."""

    device: int
    workspace_size_bytes: int
    constants_size_bytes: int
    io_size_bytes: int

    def to_json(self) -> dict[str, int]:
        return {"device": self.device, "workspace_size_bytes": self.workspace_size_bytes,
                "constants_size_bytes": self.constants_size_bytes, "io_size_bytes": self.io_size_bytes}


@dataclass(frozen=True)
class OperatorFunction:
    name: str
    workspace_size_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"function_name": self.name, "workspace_size_bytes": self.workspace_size_bytes}


@dataclass(frozen=True)
class ObjectFile:
    """An LLVM-produced `.o` shipped in codegen/host/lib, with the ABI facts a board must match."""

    path: str
    machine: str  # e.g. EM_ARM
    cpu: str | None  # Tag_CPU_name, e.g. cortex-m4
    float_abi: str  # soft | softfp | hard
    has_fpu_code: bool
    symbols: frozenset[str] = field(default=frozenset(), compare=False, repr=False)  # defined globals
    undefined: frozenset[str] = field(default=frozenset(), compare=False, repr=False)  # needed from elsewhere

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "machine": self.machine, "cpu": self.cpu,
                "float_abi": self.float_abi, "fpu_code": self.has_fpu_code}


@dataclass(frozen=True)
class CmsisNnAssumptions:
    """What a module's CMSIS-NN calls assume of the library. TVM sizes each call's scratch buffer for
    the library paths of one core; `{NULL,0}` everywhere means paths that need none (no DSP, no MVE)."""

    sources: tuple[str, ...]  # generated files that include arm_nnfunctions.h
    functions: tuple[str, ...]  # the CMSIS-NN functions they call
    mcpu: str | None  # -mcpu of the cmsis-nn target, else of the C target
    mattr: str | None  # -mattr of that target (e.g. +nomve)
    target_kind: str | None  # the target both came from: cmsis-nn | c | None
    scratch_bytes: tuple[int, ...]  # per cmsis_nn_context, in order; 0 for {NULL,0}

    @property
    def generic(self) -> bool:
        """No call passes a scratch buffer: the code was generated for a core without DSP or MVE."""
        return not any(self.scratch_bytes)

    def to_json(self) -> dict[str, Any]:
        return {"sources": list(self.sources), "functions": list(self.functions), "mcpu": self.mcpu,
                "mattr": self.mattr, "target": self.target_kind, "scratch_bytes": list(self.scratch_bytes),
                "generic": self.generic}


@dataclass(frozen=True)
class Module:
    """One model (or operator) inside the MLF; a multi-module MLF has several."""

    name: str
    style: str  # full-model | operator
    executor: str | None  # aot | graph | None (operator)
    interface_api: str | None  # c | packed | None
    unpacked_api: bool | None
    usmp: bool
    link_params: bool | None
    system_lib: bool
    targets: tuple[Target, ...]
    sources: tuple[str, ...]  # paths relative to the MLF root
    objects: tuple[ObjectFile, ...]
    header: str | None
    graph_path: str | None
    params_path: str | None
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    memory: tuple[MainMemory, ...]
    operators: tuple[OperatorFunction, ...]
    graph: Graph | None = field(default=None, compare=False, repr=False)
    params: dict[str, Param] = field(default_factory=dict, compare=False, repr=False)
    entry_function: str | None = None  # AOT: tvmgen_<mod>_run; operator: the TIR function name
    defects: tuple[str, ...] = ()  # producer defects that make this module unbuildable as exported
    system_headers: tuple[str, ...] = ()  # `#include <...>` of the generated C, e.g. arm_acle.h (ACLE intrinsics)
    cmsis_nn: CmsisNnAssumptions | None = None  # None: the code does not call CMSIS-NN
    # CMSIS-NN functions whose requantisation must round once, as TFLite's reference kernel for them
    # does (mlfbuild's own MLFs of .tflite models state it; TVM's never do)
    single_rounding: tuple[str, ...] = ()
    imported_from: dict[str, Any] | None = field(default=None, compare=False)  # `mlfbuild import` provenance
    # the inputs and outputs are tensors of the module's own workspace pool (TVM's use_workspace_io with
    # the pool inside the module: tvmgen_<mod>_map_inputs(void)/_map_outputs(void) give their bytes)
    io_in_pool: bool = False

    @property
    def prefix(self) -> str:
        return f"tvmgen_{self.name}"

    @property
    def producer(self) -> str:
        """What wrote the module's code, as messages name it."""
        return "mlfbuild's importer" if self.imported_from else "TVM"

    @property
    def target_cpu(self) -> str | None:
        """The -mcpu TVM generated this module's code for (None: a generic target)."""
        return next((t.attrs["mcpu"] for t in self.targets if t.attrs.get("mcpu")), None)

    @property
    def params_bytes(self) -> int:
        return sum(len(p.data) for p in self.params.values())

    def workspace_bytes(self, device: int = 1) -> int:
        return max((m.workspace_size_bytes for m in self.memory if m.device == device), default=0)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "style": self.style,
            "executor": self.executor,
            "interface_api": self.interface_api,
            "unpacked_api": self.unpacked_api,
            "usmp": self.usmp,
            "io_in_pool": self.io_in_pool,
            "link_params": self.link_params,
            "system_lib": self.system_lib,
            "entry_function": self.entry_function,
            "defects": list(self.defects),
            "system_headers": list(self.system_headers),
            "cmsis_nn": self.cmsis_nn.to_json() if self.cmsis_nn else None,
            "single_rounding": list(self.single_rounding),
            "imported_from": self.imported_from,
            "targets": [t.raw for t in self.targets],
            "target_kinds": sorted({t.kind for t in self.targets}),
            "sources": list(self.sources),
            "objects": [o.to_json() for o in self.objects],
            "header": self.header,
            "graph": self.graph_path,
            "params": {"path": self.params_path, "count": len(self.params), "bytes": self.params_bytes},
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "memory": {"main": [m.to_json() for m in self.memory],
                       "operator_functions": [o.to_json() for o in self.operators]},
        }


@dataclass(frozen=True)
class BundledRuntime:
    """TVM's standalone CRT that AOT exports carry under runtime/ (v0.9+)."""

    path: str
    version: str | None
    build_system: str  # cmake | make | none
    templates: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "version": self.version, "build_system": self.build_system,
                "templates": list(self.templates)}


@dataclass(frozen=True)
class ModelLibrary:
    root: Path  # the unpacked MLF folder
    version: int
    style: str
    modules: tuple[Module, ...]
    runtime: BundledRuntime | None
    sha256: str
    warnings: tuple[str, ...] = ()

    def module(self, name: str) -> Module:
        for module in self.modules:
            if module.name == name:
                return module
        raise KeyError(name)

    def carried_model(self, module: Module) -> Path | None:
        """The .tflite an MLF made by `mlfbuild import` carries for `module` (metadata.json's
        mlfbuild_import.model_path): a regular file inside the MLF, or None."""
        relative = (module.imported_from or {}).get("model_path")
        if not relative:
            return None
        root = self.root.resolve()
        path = (root / relative).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            return None
        return path

    def to_json(self) -> dict[str, Any]:
        return {
            "mlf_version": self.version,
            "style": self.style,
            "sha256": self.sha256,
            "modules": [m.to_json() for m in self.modules],
            "runtime": self.runtime.to_json() if self.runtime else None,
            "warnings": list(self.warnings),
        }
