"""`mlfbuild import MODEL.tflite`: an int8 TFLite model compiled ahead of time into an MLF whose
operators call CMSIS-NN, in TVM's own layout, so that it flows through the same pipeline as any MLF.

    read (tflite.py) → check → lower each operator (lowering.py) → plan one pool → write (emit.py)

The model is compiled exactly or refused: an operator, type or property outside what lowering.py
covers ends the import with one line naming it (exit 3), and nothing is written.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .. import __version__
from ..errors import InvalidInputError, UsageError
from ..mlf.writer import tar_bytes
from ..untrusted import read_regular
from .emit import FLOOR_MEMORY, IO_DTYPES, MEMORY_PLANS, MIN_MEMORY, ROUNDINGS, TFLITE_ROUNDING, Layout, Provenance, mlf_files
from .kernels import GENERATED_KERNELS, KERNEL_CHOICES, specialise
from .lowering import Lowered, UnsupportedModelError, lower, refusal
from .tflite import Graph, parse_model

MAX_MODEL_BYTES = 1 << 30
MAX_CONSTANT_BYTES = 64 << 20
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass
class ImportResult:
    mlf: Path
    module: str
    steps: list[Lowered]
    layout: Layout
    graph: Graph
    sha256: str
    notes: list[str] = field(default_factory=list)

    @property
    def pool_bytes(self) -> int:
        return self.layout.plan.arena_bytes

    @property
    def io_bytes(self) -> int:
        """The inputs' and outputs' bytes outside the pool (none when the pool holds them)."""
        if self.layout.io_in_pool:
            return 0
        return sum(self.graph.tensors[i].nbytes for i in (*self.graph.inputs, *self.graph.outputs))

    @property
    def floor_bytes(self) -> int:
        return self.layout.plan.floor_bytes

    def to_json(self) -> dict:
        return {"mlf": str(self.mlf), "module": self.module, "model_sha256": self.sha256,
                "operators": [{"index": s.operator.index, "operator": s.operator.name,
                               "call": s.function or ("mlfbuild kernel" if s.kernel else "(shares its input's bytes)"),
                               "note": s.note}
                              for s in self.steps],
                "workspace_bytes": self.pool_bytes, "floor_bytes": self.floor_bytes, "io_bytes": self.io_bytes,
                "io_in_pool": self.layout.io_in_pool}


def is_tflite(path: Path) -> bool:
    """A regular file named .tflite, or holding TFLite's file identifier where FlatBuffers put it."""
    path = Path(path)
    if not path.is_file():
        return False
    if path.suffix.lower() == ".tflite":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(8)[4:8] == b"TFL3"
    except OSError:
        return False


def imported_if_tflite(model: Path, out: Path, ram_bytes: int | None = None) -> Path:
    """A .tflite given where an MLF is expected (build, run, export): imported into `out` first (with
    the floor's memory plan, the faster; with the smallest where the floor's pool and io buffers alone
    exceed the board's `ram_bytes`); an MLF as it is."""
    if not is_tflite(model):
        return model
    result = import_tflite(model, out)
    if ram_bytes is not None and result.pool_bytes + result.io_bytes > ram_bytes:
        result = import_tflite(model, out, memory=MIN_MEMORY)
    return result.mlf


def default_module_name(model: Path) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", model.stem).lower() or "model"
    return name if re.match(r"[A-Za-z_]", name) else f"m_{name}"


def import_tflite(model: Path, out: Path, module: str | None = None, rounding: str = TFLITE_ROUNDING,
                  memory: str = FLOOR_MEMORY, kernels: str = GENERATED_KERNELS) -> ImportResult:
    """Compile `model` into the MLF `out` (written whole or not at all); `rounding`: emit.ROUNDINGS;
    `memory`: emit.MEMORY_PLANS; `kernels`: kernels.KERNEL_CHOICES."""
    module = module or default_module_name(model)
    if rounding not in ROUNDINGS:
        raise UsageError(f"--rounding {rounding!r}: one of {', '.join(ROUNDINGS)}")
    if memory not in MEMORY_PLANS:
        raise UsageError(f"--memory {memory!r}: one of {', '.join(MEMORY_PLANS)}")
    if kernels not in KERNEL_CHOICES:
        raise UsageError(f"--kernels {kernels!r}: one of {', '.join(KERNEL_CHOICES)}")
    if not _MODULE_NAME.match(module):
        raise UsageError(f"--name {module!r}: a module name is a C identifier of at most 63 characters")
    data = read_regular(Path(model), "model", MAX_MODEL_BYTES)
    graph = parse_model(data, str(model))
    steps = specialise(graph, compile_graph(graph, str(model)), kernels, rounding)
    sha256 = hashlib.sha256(data).hexdigest()
    provenance = Provenance(tool=f"mlfbuild {__version__}", model_file=Path(model).name, model_sha256=sha256,
                            rounding=rounding, memory=memory, kernels=kernels)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    files, layout, steps = mlf_files(graph, steps, module, provenance, data, stamp)
    _write_atomically(out, tar_bytes(files))
    return ImportResult(mlf=out, module=module, steps=steps, layout=layout, graph=graph, sha256=sha256,
                        notes=[f"operator {s.operator.index} ({s.operator.name}): {s.note}" for s in steps if s.note])


def compile_graph(graph: Graph, where: str) -> list[Lowered]:
    """Every operator lowered, in the model's order; the first thing not supported is refused."""
    if graph.subgraph_count != 1:
        raise UnsupportedModelError(f"{where}: the model has {graph.subgraph_count} subgraphs; "
                                    "only single-subgraph models are supported")
    if not graph.inputs or not graph.outputs:
        raise InvalidInputError(f"{where}: the model's graph has no {'inputs' if not graph.inputs else 'outputs'}")
    if not graph.operators:
        raise UnsupportedModelError(f"{where}: the model has no operators")
    refused = next((r for r in map(refusal, graph.operators) if r is not None), None)
    if refused is not None:  # named before any check of the graph: what a user must change first
        raise refused.at(where)
    _check_io(graph, where)
    written = set(graph.inputs)
    steps = []
    for op in graph.operators:
        for index in op.inputs:
            tensor = graph.tensors[index] if index >= 0 else None
            if tensor is not None and not (tensor.is_constant or tensor.is_variable) and index not in written:
                raise InvalidInputError(f"{where}: operator {op.index} ({op.name}) reads tensor {index} "
                                        f"'{tensor.name[:60]}' before any operator writes it")
        _check_scales(graph, op, where)
        try:
            with np.errstate(over="raise", divide="raise", invalid="raise"):  # FloatingPointError, not a warning
                step = lower(graph, op)
        except UnsupportedModelError as exc:
            raise exc.at(where) from None
        except (ArithmeticError, ValueError, IndexError) as exc:
            # The file's parameters are untrusted: arithmetic they break is a refusal, never a traceback
            raise UnsupportedModelError(f"{where}: operator {op.index} ({op.name}): its parameters are outside "
                                        f"what mlfbuild can compute with ({type(exc).__name__}: {exc})", op) from None
        constant = next((o.tensor for o in step.operands if o.tensor is not None and graph.tensors[o.tensor].is_constant),
                        None)
        if constant is not None:  # an operand the kernel reads as an activation: nothing would write it
            raise UnsupportedModelError(f"{where}: operator {op.index} ({op.name}): a constant operand "
                                        f"({graph.tensors[constant].describe()}) is not supported there", op)
        steps.append(step)
        written.update(op.outputs)
    constants = sum(o.constant.nbytes for s in steps for o in s.operands if o.constant is not None)
    if constants > MAX_CONSTANT_BYTES:
        raise UnsupportedModelError(f"{where}: {constants:,} bytes of weights; more than the "
                                    f"{MAX_CONSTANT_BYTES >> 20} MiB any microcontroller's flash holds")
    missing = [i for i in graph.outputs if i not in written]
    if missing:
        raise InvalidInputError(f"{where}: graph output '{graph.tensors[missing[0]].name[:60]}' is never written")
    return steps


# Integer tensors' scales any real model has: beyond them requantisation overflows or saturates in
# ways the kernels' arithmetic does not follow TFLite through (a fully connected layer's input of scale
# 3e38 gave outputs LiteRT does not, a fused RELU6 into 1e-40 overflowed).
SCALE_RANGE = (1e-15, 1e15)
_SCALED_TYPES = ("int8", "uint8", "int16")


def _check_scales(graph: Graph, op, where: str) -> None:
    """An operator's integer inputs and outputs of a scale outside SCALE_RANGE are refused, naming the tensor."""
    low, high = SCALE_RANGE
    for index in (*op.inputs, *op.outputs):
        tensor = graph.tensors[index] if index >= 0 else None
        if tensor is None or tensor.dtype not in _SCALED_TYPES or tensor.quantization is None:
            continue
        extreme = next((s for s in tensor.quantization.scales if s and not low <= s <= high), None)
        if extreme is not None:
            raise UnsupportedModelError(f"{where}: operator {op.index} ({op.name}): tensor {tensor.describe()} has "
                                        f"scale {extreme}, outside 1e-15..1e15", op)


def _check_io(graph: Graph, where: str) -> None:
    for index in graph.inputs + graph.outputs:
        tensor = graph.tensors[index]
        if tensor.dtype not in IO_DTYPES:
            raise UnsupportedModelError(f"{where}: graph input/output {tensor.describe()} is {tensor.dtype}; "
                                        f"inputs and outputs are one of {', '.join(IO_DTYPES)}")
        if tensor.is_constant:
            raise UnsupportedModelError(f"{where}: graph input/output {tensor.describe()} is a constant")
    if len(set(graph.inputs + graph.outputs)) != len(graph.inputs + graph.outputs):
        raise UnsupportedModelError(f"{where}: a tensor is both a graph input and output (or listed twice)")


def _write_atomically(out: Path, data: bytes) -> None:
    out = Path(out)
    temporary = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, out)
    finally:
        temporary.unlink(missing_ok=True)
