"""What a .tflite model says about its graph's inputs and outputs: names, dtypes, shapes and
quantization — read by a bounded parse of the FlatBuffer, without LiteRT.

A .tflite is untrusted input and LiteRT's own loader can crash the process on a hostile file, so this
reader checks every offset against the buffer before following it; a file it cannot read is refused
with one line before LiteRT ever sees it.

Layout facts (FlatBuffers' binary format and TFLite's schema.fbs, tensorflow/compiler/mlir/lite/schema):
a buffer starts with the root table's uoffset (4 bytes) and the file identifier "TFL3"; a table starts
with an soffset back to its vtable; a vtable is uint16 [vtable bytes, table bytes, field offsets...];
vectors and strings are a uint32 length then the elements. Field ids used: Model.subgraphs = 2;
SubGraph.tensors = 0, .inputs = 1, .outputs = 2; Tensor.shape = 0, .type = 1, .name = 3,
.quantization = 4; QuantizationParameters.scale = 2, .zero_point = 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInputError
from ..importer.flatbuffer import Buffer, Malformed, Table
from ..untrusted import read_regular

FILE_IDENTIFIER = b"TFL3"
MAX_MODEL_BYTES = 1 << 30  # FlatBuffers address at most 2 GiB; no MLPerf Tiny model is near 1 GiB
MAX_TENSORS = 1 << 20

# TensorType values of schema.fbs, for the element types an MLF can have.
TENSOR_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16",
                9: "int8", 10: "float64", 12: "uint64", 15: "uint32", 16: "uint16"}
# The element types TFLite quantizes a graph's inputs and outputs in; on any other, a scale of 0 is
# TFLite's own mark of a tensor that is not quantized (LiteRT reports its quantization as (0.0, 0)).
QUANTIZED_TYPES = ("int8", "uint8", "int16")


@dataclass(frozen=True)
class TensorInfo:
    """One graph input or output. `scale`/`zero_point` are None for a tensor that is not quantized
    (or quantized per channel, which no graph input or output of a TFLite model is)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    scale: float | None = None
    zero_point: int | None = None

    @property
    def quantized(self) -> bool:
        return self.scale is not None

    def describe(self) -> str:
        """'int8[1,49,10,1]'"""
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"

    def to_json(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "scale": self.scale,
                "zero_point": self.zero_point}


@dataclass(frozen=True)
class TfliteModel:
    path: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]

    def quantization(self) -> dict[str, tuple[float, int]]:
        """Tensor name → (scale, zero point) of every quantized input and output."""
        return {t.name: (t.scale, t.zero_point) for t in self.inputs + self.outputs if t.quantized}


def parse_tflite(data: bytes, path: str = "model.tflite") -> TfliteModel:
    """The first subgraph's inputs and outputs; InvalidInputError naming the file for anything else."""
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise InvalidInputError(f"{path}: not a TFLite model (no {FILE_IDENTIFIER.decode()} file identifier)")
    try:
        buf = Buffer(data)
        subgraphs = buf.root().tables(2, limit=1 << 16)
        if not subgraphs:
            raise Malformed("it has no subgraph")
        graph = subgraphs[0]
        tensors = graph.tables(0, MAX_TENSORS)
        inputs = tuple(_tensor(tensors, i) for i in graph.vector(1, "<i", MAX_TENSORS))
        outputs = tuple(_tensor(tensors, i) for i in graph.vector(2, "<i", MAX_TENSORS))
    except Malformed as exc:
        raise InvalidInputError(f"{path}: not a readable TFLite model ({exc})") from None
    if not inputs or not outputs:
        raise InvalidInputError(f"{path}: the model's graph has no {'inputs' if not inputs else 'outputs'}")
    _check_scales(path, inputs, outputs)
    return TfliteModel(path=path, inputs=inputs, outputs=outputs)


def _check_scales(path: str, inputs: tuple[TensorInfo, ...], outputs: tuple[TensorInfo, ...]) -> None:
    """An integer input or output of scale 0 stands for no real value at all: LiteRT's kernels divide by
    it or make every value 0, so such a model cannot be the reference of anything."""
    for kind, tensors in (("input", inputs), ("output", outputs)):
        for tensor in tensors:
            if tensor.scale == 0.0:
                raise InvalidInputError(f"{path}: graph {kind} '{tensor.name[:60]}' ({tensor.describe()}) has scale 0; "
                                        f"a quantized {tensor.dtype} tensor needs a positive scale")


def _tensor(tensors: list[Table], index: int) -> TensorInfo:
    if not 0 <= index < len(tensors):
        raise Malformed(f"graph tensor {index} does not exist ({len(tensors)} tensors)")
    tensor = tensors[index]
    name = tensor.string(3) or f"tensor{index}"
    code = tensor.scalar(1, "<b", 0)
    if code not in TENSOR_TYPES:
        raise Malformed(f"tensor '{name}' has an element type (TensorType {code}) an MLF cannot hold")
    shape = tuple(tensor.vector(0, "<i", limit=16))
    if any(d < 0 for d in shape):
        raise Malformed(f"tensor '{name}' has a dynamic shape {list(shape)}")
    scale = zero_point = None
    quantization = tensor.table(4)
    if quantization is not None:
        scales, zero_points = quantization.vector(2, "<f", MAX_TENSORS), quantization.vector(3, "<q", MAX_TENSORS)
        if not all(math.isfinite(v) and v >= 0 for v in scales):
            raise Malformed(f"tensor '{name}' has a scale that is negative or not a number")
        if len(scales) == 1 and (scales[0] != 0.0 or TENSOR_TYPES[code] in QUANTIZED_TYPES):
            scale, zero_point = float(scales[0]), int(zero_points[0]) if zero_points else 0
    return TensorInfo(name=name, dtype=TENSOR_TYPES[code], shape=shape, scale=scale, zero_point=zero_point)


def read_tflite(path: Path) -> TfliteModel:
    """Read and check a .tflite file (see parse_tflite); a FIFO or device is refused, not read."""
    return parse_tflite(read_regular(Path(path), "model", MAX_MODEL_BYTES), str(path))


def tensor_quantization(path: Path) -> dict[str, tuple[float, int]]:
    """Tensor name → (scale, zero point) of every quantized graph input and output of a .tflite."""
    return read_tflite(path).quantization()
