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

# Every BuiltinOperator code of schema.fbs by its TFLite name (tests check the table against the
# schema's generated code), so that any operator is named as TFLite names it.
OPERATOR_NAMES = {
    0: "ADD", 1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D", 5: "DEPTH_TO_SPACE",
    6: "DEQUANTIZE", 7: "EMBEDDING_LOOKUP", 8: "FLOOR", 9: "FULLY_CONNECTED", 10: "HASHTABLE_LOOKUP",
    11: "L2_NORMALIZATION", 12: "L2_POOL_2D", 13: "LOCAL_RESPONSE_NORMALIZATION", 14: "LOGISTIC",
    15: "LSH_PROJECTION", 16: "LSTM", 17: "MAX_POOL_2D", 18: "MUL", 19: "RELU", 20: "RELU_N1_TO_1", 21: "RELU6",
    22: "RESHAPE", 23: "RESIZE_BILINEAR", 24: "RNN", 25: "SOFTMAX", 26: "SPACE_TO_DEPTH", 27: "SVDF", 28: "TANH",
    29: "CONCAT_EMBEDDINGS", 30: "SKIP_GRAM", 31: "CALL", 32: "CUSTOM", 33: "EMBEDDING_LOOKUP_SPARSE", 34: "PAD",
    35: "UNIDIRECTIONAL_SEQUENCE_RNN", 36: "GATHER", 37: "BATCH_TO_SPACE_ND", 38: "SPACE_TO_BATCH_ND",
    39: "TRANSPOSE", 40: "MEAN", 41: "SUB", 42: "DIV", 43: "SQUEEZE", 44: "UNIDIRECTIONAL_SEQUENCE_LSTM",
    45: "STRIDED_SLICE", 46: "BIDIRECTIONAL_SEQUENCE_RNN", 47: "EXP", 48: "TOPK_V2", 49: "SPLIT", 50: "LOG_SOFTMAX",
    51: "DELEGATE", 52: "BIDIRECTIONAL_SEQUENCE_LSTM", 53: "CAST", 54: "PRELU", 55: "MAXIMUM", 56: "ARG_MAX",
    57: "MINIMUM", 58: "LESS", 59: "NEG", 60: "PADV2", 61: "GREATER", 62: "GREATER_EQUAL", 63: "LESS_EQUAL",
    64: "SELECT", 65: "SLICE", 66: "SIN", 67: "TRANSPOSE_CONV", 68: "SPARSE_TO_DENSE", 69: "TILE",
    70: "EXPAND_DIMS", 71: "EQUAL", 72: "NOT_EQUAL", 73: "LOG", 74: "SUM", 75: "SQRT", 76: "RSQRT", 77: "SHAPE",
    78: "POW", 79: "ARG_MIN", 80: "FAKE_QUANT", 81: "REDUCE_PROD", 82: "REDUCE_MAX", 83: "PACK", 84: "LOGICAL_OR",
    85: "ONE_HOT", 86: "LOGICAL_AND", 87: "LOGICAL_NOT", 88: "UNPACK", 89: "REDUCE_MIN", 90: "FLOOR_DIV",
    91: "REDUCE_ANY", 92: "SQUARE", 93: "ZEROS_LIKE", 94: "FILL", 95: "FLOOR_MOD", 96: "RANGE",
    97: "RESIZE_NEAREST_NEIGHBOR", 98: "LEAKY_RELU", 99: "SQUARED_DIFFERENCE", 100: "MIRROR_PAD", 101: "ABS",
    102: "SPLIT_V", 103: "UNIQUE", 104: "CEIL", 105: "REVERSE_V2", 106: "ADD_N", 107: "GATHER_ND", 108: "COS",
    109: "WHERE", 110: "RANK", 111: "ELU", 112: "REVERSE_SEQUENCE", 113: "MATRIX_DIAG", 114: "QUANTIZE",
    115: "MATRIX_SET_DIAG", 116: "ROUND", 117: "HARD_SWISH", 118: "IF", 119: "WHILE", 120: "NON_MAX_SUPPRESSION_V4",
    121: "NON_MAX_SUPPRESSION_V5", 122: "SCATTER_ND", 123: "SELECT_V2", 124: "DENSIFY", 125: "SEGMENT_SUM",
    126: "BATCH_MATMUL", 127: "PLACEHOLDER_FOR_GREATER_OP_CODES", 128: "CUMSUM", 129: "CALL_ONCE",
    130: "BROADCAST_TO", 131: "RFFT2D", 132: "CONV_3D", 133: "IMAG", 134: "REAL", 135: "COMPLEX_ABS",
    136: "HASHTABLE", 137: "HASHTABLE_FIND", 138: "HASHTABLE_IMPORT", 139: "HASHTABLE_SIZE", 140: "REDUCE_ALL",
    141: "CONV_3D_TRANSPOSE", 142: "VAR_HANDLE", 143: "READ_VARIABLE", 144: "ASSIGN_VARIABLE",
    145: "BROADCAST_ARGS", 146: "RANDOM_STANDARD_NORMAL", 147: "BUCKETIZE", 148: "RANDOM_UNIFORM",
    149: "MULTINOMIAL", 150: "GELU", 151: "DYNAMIC_UPDATE_SLICE", 152: "RELU_0_TO_1", 153: "UNSORTED_SEGMENT_PROD",
    154: "UNSORTED_SEGMENT_MAX", 155: "UNSORTED_SEGMENT_SUM", 156: "ATAN2", 157: "UNSORTED_SEGMENT_MIN",
    158: "SIGN", 159: "BITCAST", 160: "BITWISE_XOR", 161: "RIGHT_SHIFT", 162: "STABLEHLO_LOGISTIC",
    163: "STABLEHLO_ADD", 164: "STABLEHLO_DIVIDE", 165: "STABLEHLO_MULTIPLY", 166: "STABLEHLO_MAXIMUM",
    167: "STABLEHLO_RESHAPE", 168: "STABLEHLO_CLAMP", 169: "STABLEHLO_CONCATENATE",
    170: "STABLEHLO_BROADCAST_IN_DIM", 171: "STABLEHLO_CONVOLUTION", 172: "STABLEHLO_SLICE",
    173: "STABLEHLO_CUSTOM_CALL", 174: "STABLEHLO_REDUCE", 175: "STABLEHLO_ABS", 176: "STABLEHLO_AND",
    177: "STABLEHLO_COSINE", 178: "STABLEHLO_EXPONENTIAL", 179: "STABLEHLO_FLOOR", 180: "STABLEHLO_LOG",
    181: "STABLEHLO_MINIMUM", 182: "STABLEHLO_NEGATE", 183: "STABLEHLO_OR", 184: "STABLEHLO_POWER",
    185: "STABLEHLO_REMAINDER", 186: "STABLEHLO_RSQRT", 187: "STABLEHLO_SELECT", 188: "STABLEHLO_SUBTRACT",
    189: "STABLEHLO_TANH", 190: "STABLEHLO_SCATTER", 191: "STABLEHLO_COMPARE", 192: "STABLEHLO_CONVERT",
    193: "STABLEHLO_DYNAMIC_SLICE", 194: "STABLEHLO_DYNAMIC_UPDATE_SLICE", 195: "STABLEHLO_PAD",
    196: "STABLEHLO_IOTA", 197: "STABLEHLO_DOT_GENERAL", 198: "STABLEHLO_REDUCE_WINDOW", 199: "STABLEHLO_SORT",
    200: "STABLEHLO_WHILE", 201: "STABLEHLO_GATHER", 202: "STABLEHLO_TRANSPOSE", 203: "DILATE",
    204: "STABLEHLO_RNG_BIT_GENERATOR", 205: "REDUCE_WINDOW", 206: "STABLEHLO_COMPOSITE",
    207: "STABLEHLO_SHIFT_LEFT", 208: "STABLEHLO_CBRT", 209: "STABLEHLO_CASE",
}

# Builtin options tables: operator → (BuiltinOptions union type, [(option, field id, format, default)]),
# from schema.fbs (tests check them against its generated code). Options are named as the schema
# names them, but for fused_activation_function (activation), dilation_{w,h}factor (dilation_{w,h})
# and filter_{width,height} (filter_{w,h}).
_I32, _BYTE, _BOOL, _F32, _VECTOR = "<i", "<b", "<?", "<f", "vector"
PADDING = {0: "SAME", 1: "VALID"}
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
OPTIONS = {
    "CONV_2D": (1, [("padding", 0, _BYTE, 0), ("stride_w", 1, _I32, 0), ("stride_h", 2, _I32, 0),
        ("activation", 3, _BYTE, 0), ("dilation_w", 4, _I32, 1), ("dilation_h", 5, _I32, 1),
        ("quantized_bias_type", 6, _BYTE, 0)]),
    "DEPTHWISE_CONV_2D": (2, [("padding", 0, _BYTE, 0), ("stride_w", 1, _I32, 0), ("stride_h", 2, _I32, 0),
        ("depth_multiplier", 3, _I32, 0), ("activation", 4, _BYTE, 0), ("dilation_w", 5, _I32, 1),
        ("dilation_h", 6, _I32, 1)]),
    "AVERAGE_POOL_2D": (5, [("padding", 0, _BYTE, 0), ("stride_w", 1, _I32, 0), ("stride_h", 2, _I32, 0),
        ("filter_w", 3, _I32, 0), ("filter_h", 4, _I32, 0), ("activation", 5, _BYTE, 0)]),
    "MAX_POOL_2D": (5, [("padding", 0, _BYTE, 0), ("stride_w", 1, _I32, 0), ("stride_h", 2, _I32, 0),
        ("filter_w", 3, _I32, 0), ("filter_h", 4, _I32, 0), ("activation", 5, _BYTE, 0)]),
    "L2_POOL_2D": (5, [("padding", 0, _BYTE, 0), ("stride_w", 1, _I32, 0), ("stride_h", 2, _I32, 0),
        ("filter_w", 3, _I32, 0), ("filter_h", 4, _I32, 0), ("activation", 5, _BYTE, 0)]),
    "FULLY_CONNECTED": (8, [("activation", 0, _BYTE, 0), ("weights_format", 1, _BYTE, 0),
        ("keep_num_dims", 2, _BOOL, False), ("asymmetric_quantize_inputs", 3, _BOOL, False),
        ("quantized_bias_type", 4, _BYTE, 0)]),
    "SOFTMAX": (9, [("beta", 0, _F32, 0.0)]),
    "CONCATENATION": (10, [("axis", 0, _I32, 0), ("activation", 1, _BYTE, 0)]),
    "ADD": (11, [("activation", 0, _BYTE, 0), ("pot_scale_int16", 1, _BOOL, True)]),
    "SUB": (28, [("activation", 0, _BYTE, 0), ("pot_scale_int16", 1, _BOOL, True)]),
    "MUL": (21, [("activation", 0, _BYTE, 0)]),
    "DIV": (29, [("activation", 0, _BYTE, 0)]),
    "MEAN": (27, [("keep_dims", 0, _BOOL, False)]),
    "SUM": (27, [("keep_dims", 0, _BOOL, False)]),
    "REDUCE_MAX": (27, [("keep_dims", 0, _BOOL, False)]),
    "REDUCE_MIN": (27, [("keep_dims", 0, _BOOL, False)]),
    "REDUCE_PROD": (27, [("keep_dims", 0, _BOOL, False)]),
    "SQUEEZE": (30, [("squeeze_dims", 0, _VECTOR, ())]),
    "RESHAPE": (17, [("new_shape", 0, _VECTOR, ())]),
    "L2_NORMALIZATION": (12, [("activation", 0, _BYTE, 0)]),
    "LEAKY_RELU": (75, [("alpha", 0, _F32, 0.0)]),
    "SPLIT": (35, [("num_splits", 0, _I32, 0)]),
    "SPLIT_V": (79, [("num_splits", 0, _I32, 0)]),
    "STRIDED_SLICE": (32, [("begin_mask", 0, _I32, 0), ("end_mask", 1, _I32, 0), ("ellipsis_mask", 2, _I32, 0),
        ("new_axis_mask", 3, _I32, 0), ("shrink_axis_mask", 4, _I32, 0), ("offset", 5, _BOOL, False)]),
    "PACK": (59, [("values_count", 0, _I32, 0), ("axis", 1, _I32, 0)]),
    "UNPACK": (64, [("num", 0, _I32, 0), ("axis", 1, _I32, 0)]),
    "GATHER": (23, [("axis", 0, _I32, 0), ("batch_dims", 1, _I32, 0)]),
    "ARG_MAX": (40, [("output_type", 0, _BYTE, 0)]),
    "ARG_MIN": (57, [("output_type", 0, _BYTE, 0)]),
    "RESIZE_BILINEAR": (15, [("align_corners", 2, _BOOL, False), ("half_pixel_centers", 3, _BOOL, False)]),
    "RESIZE_NEAREST_NEIGHBOR": (74, [("align_corners", 0, _BOOL, False), ("half_pixel_centers", 1, _BOOL, False)]),
    "DEPTH_TO_SPACE": (94, [("block_size", 0, _I32, 0)]),
    "SPACE_TO_DEPTH": (19, [("block_size", 0, _I32, 0)]),
    "MIRROR_PAD": (77, [("mode", 0, _BYTE, 0)]),
    "TRANSPOSE_CONV": (49, [("padding", 0, _BYTE, 0), ("stride_w", 1, _I32, 0), ("stride_h", 2, _I32, 0),
        ("activation", 3, _BYTE, 0), ("quantized_bias_type", 4, _BYTE, 0)]),
    "BATCH_MATMUL": (101, [("adj_x", 0, _BOOL, False), ("adj_y", 1, _BOOL, False),
        ("asymmetric_quantize_inputs", 2, _BOOL, False)]),
    "SVDF": (6, [("rank", 0, _I32, 0), ("activation", 1, _BYTE, 0), ("asymmetric_quantize_inputs", 2, _BOOL, False)]),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (71, [("activation", 0, _BYTE, 0), ("cell_clip", 1, _F32, 0.0),
        ("proj_clip", 2, _F32, 0.0), ("time_major", 3, _BOOL, False),
        ("asymmetric_quantize_inputs", 4, _BOOL, False), ("diagonal_recurrent_tensors", 5, _BOOL, False)]),
    "CAST": (37, [("in_data_type", 0, _BYTE, 0), ("out_data_type", 1, _BYTE, 0)]),
    "SQUARED_DIFFERENCE": (76, []),
    "CONV_3D": (106, [("padding", 0, _BYTE, 0), ("stride_d", 1, _I32, 0), ("stride_w", 2, _I32, 0),
        ("stride_h", 3, _I32, 0), ("activation", 4, _BYTE, 0), ("dilation_dfactor", 5, _I32, 1),
        ("dilation_w", 6, _I32, 1), ("dilation_h", 7, _I32, 1)]),
    "CUMSUM": (102, [("exclusive", 0, _BOOL, False), ("reverse", 1, _BOOL, False)]),
}


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
    is_variable: bool = False  # state an operator keeps from one inference to the next (LSTM, SVDF)

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
    # Tensors that only carry quantization for the operator's own steps (the integer LSTM's gates)
    intermediates: tuple[int, ...] = ()


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
    tensor = Tensor(index, name, dtype, shape, _quantization(table.table(4), name),
                    is_variable=table.scalar(5, _BOOL, False))
    _check_channels(tensor)
    if tensor.nbytes > MAX_BUFFER_BYTES:
        raise Malformed(f"tensor {index} '{name[:60]}' would hold {tensor.nbytes} bytes")
    raw = _buffer_bytes(buf, table.scalar(2, "<I", 0), buffers)
    if not raw:
        return tensor
    if len(raw) != tensor.nbytes:
        raise Malformed(f"constant tensor {index} '{name[:60]}' has {len(raw)} bytes of data for "
                        f"{dtype}{list(shape)} ({tensor.nbytes} bytes)")
    data = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape).astype(dtype)
    return Tensor(index, name, dtype, shape, tensor.quantization, data, tensor.is_variable)


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


def _check_channels(tensor: Tensor) -> None:
    """Per-channel quantization has one scale per index of its dimension, as LiteRT checks on loading
    (a filter with fewer scales than output channels was read past its list). A dimension the tensor
    lacks is let pass, as TFLM lets it: person_detect's biases say dimension 3 of their one."""
    q = tensor.quantization
    if q is None or not q.per_channel or not 0 <= q.axis < len(tensor.shape):
        return
    if len(q.scales) != tensor.shape[q.axis]:
        raise Malformed(f"tensor {tensor.index} '{tensor.name[:60]}' has {len(q.scales)} scales for the "
                        f"{tensor.shape[q.axis]} channels of its dimension {q.axis}")


def _operator(index: int, table: Table, codes: list[str], tensor_count: int) -> Operator:
    opcode = table.scalar(0, "<I", 0)
    if opcode >= len(codes):
        raise Malformed(f"operator {index} names operator code {opcode} ({len(codes)} codes)")
    name = codes[opcode]
    operands = []
    for field_id in (1, 2, 8):  # inputs, outputs, intermediates
        values = table.vector(field_id, _I32, MAX_OPERANDS)
        for value in values:
            if value != -1:
                _tensor_index(value, tensor_count)
        operands.append(tuple(values))
    return Operator(index, name, operands[0], operands[1], _options(name, table), operands[2])


def _options(name: str, table: Table) -> dict[str, Any]:
    if name not in OPTIONS:
        return {}
    expected, fields = OPTIONS[name]
    options = table.table(4) if table.scalar(3, "<B", 0) == expected else None  # builtin_options_type
    values: dict[str, Any] = {}
    for key, field_id, fmt, default in fields:
        if options is None:
            values[key] = default
        elif fmt == _VECTOR:
            values[key] = tuple(options.vector(field_id, _I32, MAX_RANK))
        else:
            values[key] = options.scalar(field_id, fmt, default)
    return values
