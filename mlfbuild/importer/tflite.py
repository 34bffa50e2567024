"""A .tflite model's first subgraph as plain data: tensors (with constant data and quantization),
operators (with their builtin options), inputs and outputs — read by a bounded parse.

Field ids are TFLite's schema.fbs (tensorflow/compiler/mlir/lite/schema/schema.fbs); tests check each
against the schema's generated code. Every count has a limit and every offset is checked
(flatbuffer.py), so a damaged or hostile file ends in one InvalidInputError, never a hang.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from .flatbuffer import Buffer, Malformed, Table

MAX_TENSORS = 1 << 16
MAX_OPERATORS = 1 << 14
MAX_OPERANDS = 64  # inputs or outputs of one operator (CONCATENATION has the most)
MAX_RANK = 8
MAX_BUFFER_BYTES = 1 << 30

# TensorType (schema.fbs) → numpy dtype name, for the element types an MLF can hold.
TENSOR_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16",
                9: "int8", 10: "float64", 12: "uint64", 15: "uint32", 16: "uint16"}

# BuiltinOperator codes (schema.fbs) of the operators mlfbuild knows by name.
OPERATOR_NAMES = {0: "ADD", 1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D",
                  6: "DEQUANTIZE", 9: "FULLY_CONNECTED", 14: "LOGISTIC", 17: "MAX_POOL_2D", 18: "MUL",
                  19: "RELU", 21: "RELU6", 22: "RESHAPE", 25: "SOFTMAX", 34: "PAD", 39: "TRANSPOSE", 40: "MEAN",
                  43: "SQUEEZE", 60: "PADV2", 114: "QUANTIZE"}

# Builtin options tables: (union type, [(option, field id, struct format, default)]).
_I32, _BYTE, _BOOL, _F32 = "<i", "<b", "<?", "<f"
PADDING = {0: "SAME", 1: "VALID"}
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
_CONV = [("padding", 0, _BYTE, 0), ("stride_w", 1, _I32, 0), ("stride_h", 2, _I32, 0),
         ("activation", 3, _BYTE, 0), ("dilation_w", 4, _I32, 1), ("dilation_h", 5, _I32, 1)]
_DEPTHWISE = [("padding", 0, _BYTE, 0), ("stride_w", 1, _I32, 0), ("stride_h", 2, _I32, 0),
              ("depth_multiplier", 3, _I32, 0), ("activation", 4, _BYTE, 0), ("dilation_w", 5, _I32, 1),
              ("dilation_h", 6, _I32, 1)]
_POOL = [("padding", 0, _BYTE, 0), ("stride_w", 1, _I32, 0), ("stride_h", 2, _I32, 0),
         ("filter_w", 3, _I32, 0), ("filter_h", 4, _I32, 0), ("activation", 5, _BYTE, 0)]
_FULLY_CONNECTED = [("activation", 0, _BYTE, 0), ("weights_format", 1, _BYTE, 0), ("keep_num_dims", 2, _BOOL, False),
                    ("asymmetric_quantize_inputs", 3, _BOOL, False)]
_ACTIVATION_ONLY = [("activation", 0, _BYTE, 0)]
OPTIONS = {
    "CONV_2D": (1, _CONV),
    "DEPTHWISE_CONV_2D": (2, _DEPTHWISE),
    "AVERAGE_POOL_2D": (5, _POOL),
    "MAX_POOL_2D": (5, _POOL),
    "FULLY_CONNECTED": (8, _FULLY_CONNECTED),
    "SOFTMAX": (9, [("beta", 0, _F32, 0.0)]),
    "CONCATENATION": (10, [("axis", 0, _I32, 0), ("activation", 1, _BYTE, 0)]),
    "ADD": (11, [("activation", 0, _BYTE, 0), ("pot_scale_int16", 1, _BOOL, True)]),
    "MUL": (21, _ACTIVATION_ONLY),
    "MEAN": (27, [("keep_dims", 0, _BOOL, False)]),
}
_VECTOR_OPTIONS = {"SQUEEZE": (30, "squeeze_dims")}


@dataclass(frozen=True)
class Quantization:
    """Affine quantization: real = scale × (q − zero_point), per tensor or per channel along `axis`.
    Scales are the file's float32 values (as Python floats, exactly)."""

    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return len(self.scales) > 1

    @property
    def scale(self) -> float:
        return self.scales[0]

    @property
    def zero_point(self) -> int:
        return self.zero_points[0] if self.zero_points else 0


@dataclass(frozen=True)
class Tensor:
    index: int
    name: str
    dtype: str
    shape: tuple[int, ...]
    quantization: Quantization | None
    data: np.ndarray | None = field(default=None, compare=False)  # constants only, in `shape`

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    def describe(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}] '{self.name}'"


@dataclass(frozen=True)
class Operator:
    index: int
    name: str  # OPERATOR_NAMES value, or "BUILTIN_<code>" / "CUSTOM '<name>'" for the others
    inputs: tuple[int, ...]  # -1: an optional input left out
    outputs: tuple[int, ...]
    options: dict[str, Any]


@dataclass(frozen=True)
class Graph:
    tensors: tuple[Tensor, ...]
    operators: tuple[Operator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    subgraph_count: int


def parse_model(data: bytes, path: str = "model.tflite") -> Graph:
    """The model's first subgraph; InvalidInputError naming `path` for a file that is not a readable
    TFLite model."""
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise InvalidInputError(f"{path}: not a TFLite model (no TFL3 file identifier)")
    try:
        return _read(Buffer(data))
    except Malformed as exc:
        raise InvalidInputError(f"{path}: not a readable TFLite model ({exc})") from None


def _read(buf: Buffer) -> Graph:
    model = buf.root()
    codes = [_operator_name(code) for code in model.tables(1, MAX_OPERATORS)]
    subgraphs = model.tables(2, 1 << 10)
    if not subgraphs:
        raise Malformed("it has no subgraph")
    buffers = model.tables(4, MAX_TENSORS + 1)
    graph = subgraphs[0]
    tensors = tuple(_tensor(buf, i, table, buffers) for i, table in enumerate(graph.tables(0, MAX_TENSORS)))
    operators = tuple(_operator(i, table, codes, len(tensors)) for i, table in enumerate(graph.tables(3, MAX_OPERATORS)))
    inputs = tuple(_tensor_index(i, len(tensors)) for i in graph.vector(1, _I32, MAX_TENSORS))
    outputs = tuple(_tensor_index(i, len(tensors)) for i in graph.vector(2, _I32, MAX_TENSORS))
    return Graph(tensors=tensors, operators=operators, inputs=inputs, outputs=outputs, subgraph_count=len(subgraphs))


def _operator_name(code: Table) -> str:
    builtin = max(code.scalar(0, _BYTE, 0), code.scalar(3, _I32, 0))  # deprecated_builtin_code, builtin_code
    if builtin == 32:  # BuiltinOperator.CUSTOM
        return f"CUSTOM '{code.string(1, 256)}'"
    return OPERATOR_NAMES.get(builtin, f"BUILTIN_{builtin}")


def _tensor_index(index: int, count: int) -> int:
    if not 0 <= index < count:
        raise Malformed(f"tensor {index} does not exist ({count} tensors)")
    return index


def _tensor(buf: Buffer, index: int, table: Table, buffers: list[Table]) -> Tensor:
    name = table.string(3) or f"tensor{index}"
    code = table.scalar(1, _BYTE, 0)
    if code not in TENSOR_TYPES:
        raise Malformed(f"tensor {index} '{name[:60]}' has element type {code}, which an MLF cannot hold")
    dtype = TENSOR_TYPES[code]
    shape = tuple(table.vector(0, _I32, MAX_RANK))
    if any(d < 0 for d in shape):
        raise Malformed(f"tensor {index} '{name[:60]}' has a dynamic shape {list(shape)}")
    tensor = Tensor(index, name, dtype, shape, _quantization(table.table(4), name))
    if tensor.nbytes > MAX_BUFFER_BYTES:
        raise Malformed(f"tensor {index} '{name[:60]}' would hold {tensor.nbytes} bytes")
    raw = _buffer_bytes(buf, table.scalar(2, "<I", 0), buffers)
    if not raw:
        return tensor
    if len(raw) != tensor.nbytes:
        raise Malformed(f"constant tensor {index} '{name[:60]}' has {len(raw)} bytes of data for "
                        f"{dtype}{list(shape)} ({tensor.nbytes} bytes)")
    data = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape).astype(dtype)
    return Tensor(index, name, dtype, shape, tensor.quantization, data)


def _buffer_bytes(buf: Buffer, index: int, buffers: list[Table]) -> bytes:
    """Buffer `index`'s bytes: inline data, or (models over 2 GiB) an offset and size into the file."""
    if index == 0 and not buffers:
        return b""
    if index >= len(buffers):
        raise Malformed(f"buffer {index} does not exist ({len(buffers)} buffers)")
    table = buffers[index]
    data = table.bytes(0, MAX_BUFFER_BYTES)
    offset, size = table.scalar(1, "<Q", 0), table.scalar(2, "<Q", 0)
    if data or offset <= 1:
        return data
    buf.check(offset, size)
    return bytes(buf.data[offset:offset + size])


def _quantization(table: Table | None, name: str) -> Quantization | None:
    if table is None:
        return None
    scales = table.vector(2, _F32, MAX_TENSORS)
    zero_points = table.vector(3, "<q", MAX_TENSORS)
    if not scales:
        return None
    if not all(math.isfinite(v) and v >= 0 for v in scales):
        raise Malformed(f"tensor '{name[:60]}' has a scale that is negative or not a number")
    if zero_points and len(zero_points) != len(scales):
        raise Malformed(f"tensor '{name[:60]}' has {len(scales)} scales and {len(zero_points)} zero points")
    return Quantization(scales=tuple(float(s) for s in scales), zero_points=tuple(int(z) for z in zero_points),
                        axis=table.scalar(6, _I32, 0))


def _operator(index: int, table: Table, codes: list[str], tensor_count: int) -> Operator:
    opcode = table.scalar(0, "<I", 0)
    if opcode >= len(codes):
        raise Malformed(f"operator {index} names operator code {opcode} ({len(codes)} codes)")
    name = codes[opcode]
    operands = []
    for field_id in (1, 2):
        values = table.vector(field_id, _I32, MAX_OPERANDS)
        for value in values:
            if value != -1:
                _tensor_index(value, tensor_count)
        operands.append(tuple(values))
    return Operator(index, name, operands[0], operands[1], _options(name, table))


def _options(name: str, table: Table) -> dict[str, Any]:
    kind = table.scalar(3, "<B", 0)  # builtin_options_type
    if name in OPTIONS:
        expected, fields = OPTIONS[name]
        options = table.table(4) if kind == expected else None
        return {key: (options.scalar(fid, fmt, default) if options else default) for key, fid, fmt, default in fields}
    if name in _VECTOR_OPTIONS:
        expected, key = _VECTOR_OPTIONS[name]
        options = table.table(4) if kind == expected else None
        return {key: tuple(options.vector(0, _I32, MAX_RANK)) if options else ()}
    return {}
