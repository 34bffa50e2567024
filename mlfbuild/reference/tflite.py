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

import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInputError
from ..untrusted import read_regular

FILE_IDENTIFIER = b"TFL3"
MAX_MODEL_BYTES = 1 << 30  # FlatBuffers address at most 2 GiB; no MLPerf Tiny model is near 1 GiB
MAX_TENSORS = 1 << 20

# TensorType values of schema.fbs, for the element types an MLF can have.
TENSOR_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16",
                9: "int8", 10: "float64", 12: "uint64", 15: "uint32", 16: "uint16"}


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


class _Malformed(ValueError):
    pass


class _Buffer:
    """Bounds-checked reads of FlatBuffer primitives."""

    def __init__(self, data: bytes):
        self.data = data

    def check(self, at: int, size: int) -> None:
        if at < 0 or at + size > len(self.data):
            raise _Malformed(f"offset {at} is outside the file")

    def unpack(self, fmt: str, at: int):
        self.check(at, struct.calcsize(fmt))
        return struct.unpack_from(fmt, self.data, at)[0]

    def table(self, at: int) -> "_Table":
        vtable = at - self.unpack("<i", at)
        vtable_bytes = self.unpack("<H", vtable)
        if vtable_bytes < 4 or vtable_bytes % 2:
            raise _Malformed(f"vtable at {vtable} is {vtable_bytes} bytes")
        self.check(vtable, vtable_bytes)
        return _Table(self, at, vtable, vtable_bytes)

    def indirect(self, at: int) -> int:
        return at + self.unpack("<I", at)

    def vector(self, at: int, limit: int) -> tuple[int, int]:
        """(first element's offset, length) of the vector referenced at `at`."""
        start = self.indirect(at)
        length = self.unpack("<I", start)
        if length > limit:
            raise _Malformed(f"a vector of {length} entries (at most {limit} expected)")
        return start + 4, length


@dataclass
class _Table:
    buf: _Buffer
    at: int
    vtable: int
    vtable_bytes: int

    def field(self, index: int) -> int | None:
        """Absolute offset of field `index`, None when absent."""
        slot = 4 + 2 * index
        if slot + 2 > self.vtable_bytes:
            return None
        offset = self.buf.unpack("<H", self.vtable + slot)
        return self.at + offset if offset else None

    def scalar(self, index: int, fmt: str, default):
        at = self.field(index)
        return default if at is None else self.buf.unpack(fmt, at)

    def table(self, index: int) -> "_Table | None":
        at = self.field(index)
        return None if at is None else self.buf.table(self.buf.indirect(at))

    def vector(self, index: int, fmt: str, limit: int = MAX_TENSORS) -> list:
        at = self.field(index)
        if at is None:
            return []
        start, length = self.buf.vector(at, limit)
        size = struct.calcsize(fmt)
        self.buf.check(start, length * size)
        return [self.buf.unpack(fmt, start + i * size) for i in range(length)]

    def tables(self, index: int, limit: int = MAX_TENSORS) -> list["_Table"]:
        at = self.field(index)
        if at is None:
            return []
        start, length = self.buf.vector(at, limit)
        return [self.buf.table(self.buf.indirect(start + 4 * i)) for i in range(length)]

    def string(self, index: int) -> str:
        at = self.field(index)
        if at is None:
            return ""
        start, length = self.buf.vector(at, 4096)
        raw = self.buf.data[start:start + length]
        if len(raw) != length:
            raise _Malformed("a string runs past the end of the file")
        return raw.decode("utf-8", errors="replace")


def parse_tflite(data: bytes, path: str = "model.tflite") -> TfliteModel:
    """The first subgraph's inputs and outputs; InvalidInputError naming the file for anything else."""
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise InvalidInputError(f"{path}: not a TFLite model (no {FILE_IDENTIFIER.decode()} file identifier)")
    try:
        buf = _Buffer(data)
        subgraphs = buf.table(buf.indirect(0)).tables(2, limit=1 << 16)
        if not subgraphs:
            raise _Malformed("it has no subgraph")
        graph = subgraphs[0]
        tensors = graph.tables(0)
        inputs = tuple(_tensor(tensors, i) for i in graph.vector(1, "<i"))
        outputs = tuple(_tensor(tensors, i) for i in graph.vector(2, "<i"))
    except _Malformed as exc:
        raise InvalidInputError(f"{path}: not a readable TFLite model ({exc})") from None
    if not inputs or not outputs:
        raise InvalidInputError(f"{path}: the model's graph has no {'inputs' if not inputs else 'outputs'}")
    return TfliteModel(path=path, inputs=inputs, outputs=outputs)


def _tensor(tensors: list[_Table], index: int) -> TensorInfo:
    if not 0 <= index < len(tensors):
        raise _Malformed(f"graph tensor {index} does not exist ({len(tensors)} tensors)")
    tensor = tensors[index]
    name = tensor.string(3) or f"tensor{index}"
    code = tensor.scalar(1, "<b", 0)
    if code not in TENSOR_TYPES:
        raise _Malformed(f"tensor '{name}' has an element type (TensorType {code}) an MLF cannot hold")
    shape = tuple(tensor.vector(0, "<i", limit=16))
    if any(d < 0 for d in shape):
        raise _Malformed(f"tensor '{name}' has a dynamic shape {list(shape)}")
    scale = zero_point = None
    quantization = tensor.table(4)
    if quantization is not None:
        scales, zero_points = quantization.vector(2, "<f"), quantization.vector(3, "<q")
        if len(scales) == 1:
            scale, zero_point = float(scales[0]), int(zero_points[0]) if zero_points else 0
    return TensorInfo(name=name, dtype=TENSOR_TYPES[code], shape=shape, scale=scale, zero_point=zero_point)


def read_tflite(path: Path) -> TfliteModel:
    """Read and check a .tflite file (see parse_tflite); a FIFO or device is refused, not read."""
    return parse_tflite(read_regular(Path(path), "model", MAX_MODEL_BYTES), str(path))


def tensor_quantization(path: Path) -> dict[str, tuple[float, int]]:
    """Tensor name → (scale, zero point) of every quantized graph input and output of a .tflite."""
    return read_tflite(path).quantization()
