"""A writer of .tflite models for tests, built on TFLite's own schema: the FlatBuffers object API that
LiteRT ships as `ai_edge_litert.schema_py_generated` (ModelT, SubGraphT, TensorT, ...), packed by
`flatbuffers.Builder` with the file identifier "TFL3". No byte is laid out by hand.

`GraphBuilder` holds one graph: tensors (dtype, shape, per-tensor or per-channel quantization,
optional constant data), operators (builtin code, inputs, outputs, *OptionsT), inputs and outputs.

    graph = GraphBuilder()
    x = graph.add_input("input", "int8", (1, 8), scale=0.05, zero_point=-3)
    y = graph.add_tensor("output", "int8", (1, 8), scale=0.05, zero_point=-3)
    graph.add_operator("RELU", [x], [y])
    graph.mark_output(y)
    graph.write(tmp_path / "relu.tflite")

The factories (`conv2d_model(rng, **overrides)`, ... ; FACTORIES by operator name) make one-operator
int8 models, `chain_model` small chains, each with random but valid quantization, that is what
TFLite's converter writes for int8 (and what LiteRT's kernels check): per-channel filter scales on
the output-channel dimension (0 for CONV_2D, 3 for DEPTHWISE_CONV_2D) with zero points 0; int32
biases with scale input_scale * filter_scale and zero point 0; the input's scale and zero point
on the output of pools, reshapes, pads, transposes and concatenations; 1/256 and -128 on the output
of SOFTMAX and LOGISTIC. Every parameter a factory draws can be fixed by a keyword of the same name
(an unknown keyword is a TypeError), so a test can pin one case or draw many from a seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3

DTYPES = {"float32": schema.TensorType.FLOAT32, "float16": schema.TensorType.FLOAT16,
          "float64": schema.TensorType.FLOAT64, "int8": schema.TensorType.INT8, "int16": schema.TensorType.INT16,
          "int32": schema.TensorType.INT32, "int64": schema.TensorType.INT64, "uint8": schema.TensorType.UINT8,
          "uint16": schema.TensorType.UINT16, "uint32": schema.TensorType.UINT32,
          "uint64": schema.TensorType.UINT64, "bool": schema.TensorType.BOOL}

ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
PADDINGS = ("SAME", "VALID")

# The operator versions the converter writes for int8 operands (those of the MLPerf Tiny models where
# they have the operator); other operators get version 1.
INT8_VERSIONS = {"CONV_2D": 3, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 4, "AVERAGE_POOL_2D": 2,
                 "MAX_POOL_2D": 2, "SOFTMAX": 2, "ADD": 2, "MUL": 2, "RESHAPE": 1, "SQUEEZE": 1, "PAD": 2,
                 "MEAN": 2, "TRANSPOSE": 2, "CONCATENATION": 2, "QUANTIZE": 1, "DEQUANTIZE": 2,
                 "LOGISTIC": 2, "RELU": 2, "RELU6": 2}
# Builtin codes past 126 live only in OperatorCode.builtin_code; the deprecated int8 field says 127.
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127


def builtin_code(name: str) -> int:
    """'CONV_2D' → its BuiltinOperator value."""
    return getattr(schema.BuiltinOperator, name)


def activation_code(name: str) -> int:
    """'RELU6' → its ActivationFunctionType value."""
    return getattr(schema.ActivationFunctionType, name)


def padding_code(name: str) -> int:
    """'SAME' → its Padding value."""
    return getattr(schema.Padding, name)


# --- the graph ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Quantization:
    """Affine quantization: real = scale * (q - zero_point), per tensor (one scale) or per channel
    along `dimension`."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    dimension: int = 0

    @property
    def per_channel(self) -> bool:
        return len(self.scale) > 1


@dataclass(frozen=True)
class Tensor:
    """A tensor as declared to the builder; `index` is its position in the subgraph."""

    index: int
    name: str
    dtype: str
    shape: tuple[int, ...]
    quantization: Quantization | None = None
    data: np.ndarray | None = None

    @property
    def scale(self) -> float:
        return self.quantization.scale[0]

    @property
    def zero_point(self) -> int:
        return self.quantization.zero_point[0]


@dataclass(frozen=True)
class Operator:
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: object | None
    version: int
    intermediates: tuple[int, ...] = ()


class GraphBuilder:
    """One subgraph of one model, written with TFLite's schema. Tensor arguments are indices as
    returned by add_tensor/add_constant/add_input; -1 stands for an omitted optional operand."""

    def __init__(self, name: str = "main", description: str = "mlfbuild test model"):
        self.name, self.description = name, description
        self.tensors: list[Tensor] = []
        self.operators: list[Operator] = []
        self.input_indices: list[int] = []
        self.output_indices: list[int] = []
        self.variable_indices: set[int] = set()  # variable tensors (a recurrent layer's state): no buffer

    # tensors

    def add_tensor(self, name: str, dtype: str, shape: Sequence[int], *, scale=None, zero_point=None,
                   quantized_dimension: int = 0, data: np.ndarray | None = None) -> int:
        """A tensor; quantized when `scale` is given (a float, or one per channel along
        `quantized_dimension`; `zero_point` likewise, default 0); constant when `data` is given."""
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r} (one of {sorted(DTYPES)})")
        if any(t.name == name for t in self.tensors):
            raise ValueError(f"a tensor is already called {name!r}")
        shape = tuple(int(d) for d in shape)
        if data is not None:
            data = np.asarray(data, dtype=dtype)
            if data.shape != shape:
                raise ValueError(f"{name}: data of shape {data.shape} for a tensor of shape {shape}")
        quantization = None if scale is None else _quantization(scale, zero_point, quantized_dimension)
        self.tensors.append(Tensor(len(self.tensors), name, dtype, shape, quantization, data))
        return len(self.tensors) - 1

    def add_constant(self, name: str, data: np.ndarray, **quantization) -> int:
        """A constant tensor of `data`'s dtype and shape (quantization keywords as add_tensor)."""
        data = np.asarray(data)
        return self.add_tensor(name, data.dtype.name, data.shape, data=data, **quantization)

    def add_input(self, name: str, dtype: str, shape: Sequence[int], **quantization) -> int:
        """A tensor that is a graph input (in the order of the calls)."""
        index = self.add_tensor(name, dtype, shape, **quantization)
        self.input_indices.append(index)
        return index

    def mark_output(self, *indices: int) -> None:
        """Make tensors graph outputs (in the order of the calls)."""
        self.output_indices.extend(indices)

    def tensor(self, index: int) -> Tensor:
        return self.tensors[index]

    @property
    def inputs(self) -> list[Tensor]:
        return [self.tensors[i] for i in self.input_indices]

    @property
    def outputs(self) -> list[Tensor]:
        return [self.tensors[i] for i in self.output_indices]

    # operators

    def add_operator(self, name: str, inputs: Sequence[int], outputs: Sequence[int], options=None, *,
                     version: int | None = None, intermediates: Sequence[int] = ()) -> None:
        """A builtin operator ('CONV_2D', ...) with its schema options object (Conv2DOptionsT, ...,
        or None); version defaults to the converter's for int8 (INT8_VERSIONS), else 1. Intermediates
        are tensors that carry quantization for the operator's own steps (the integer LSTM's)."""
        builtin_code(name)  # an unknown name fails here, not when packing
        version = version if version is not None else INT8_VERSIONS.get(name, 1)
        self.operators.append(Operator(name, tuple(inputs), tuple(outputs), options, version, tuple(intermediates)))

    # writing

    def to_model(self) -> schema.ModelT:
        """The whole model in the schema's object API, for a test that wants to alter it before packing."""
        # Buffer 0 is the empty sentinel every tensor without data points at, as the converter writes.
        buffers = [schema.BufferT()]
        tensors = []
        for tensor in self.tensors:
            buffer = 0
            if tensor.data is not None:
                buffers.append(schema.BufferT(data=_little_endian_bytes(tensor.data)))
                buffer = len(buffers) - 1
            tensors.append(schema.TensorT(shape=np.array(tensor.shape, np.int32), type=DTYPES[tensor.dtype],
                                          buffer=buffer, name=tensor.name,
                                          quantization=_quantization_t(tensor.quantization),
                                          isVariable=tensor.index in self.variable_indices))
        codes: list[tuple[str, int]] = []
        operators = []
        for op in self.operators:
            if (op.name, op.version) not in codes:
                codes.append((op.name, op.version))
            operators.append(schema.OperatorT(
                opcodeIndex=codes.index((op.name, op.version)), inputs=np.array(op.inputs, np.int32),
                outputs=np.array(op.outputs, np.int32), builtinOptionsType=_options_type(op.options),
                builtinOptions=op.options,
                intermediates=np.array(op.intermediates, np.int32) if op.intermediates else None))
        subgraph = schema.SubGraphT(tensors=tensors, inputs=np.array(self.input_indices, np.int32),
                                    outputs=np.array(self.output_indices, np.int32), operators=operators,
                                    name=self.name)
        return schema.ModelT(version=SCHEMA_VERSION, operatorCodes=[_operator_code(n, v) for n, v in codes],
                             subgraphs=[subgraph], description=self.description, buffers=buffers)

    def to_bytes(self) -> bytes:
        return pack_model(self.to_model())

    def write(self, path: Path) -> Path:
        path = Path(path)
        path.write_bytes(self.to_bytes())
        return path


def pack_model(model: schema.ModelT) -> bytes:
    """A ModelT as the bytes of a .tflite file."""
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def read_model(data: bytes) -> schema.ModelT:
    """The bytes of a (well-formed) .tflite file in the schema's object API."""
    return schema.ModelT.InitFromPackedBuf(bytearray(data), 0)


def _quantization(scale, zero_point, dimension: int) -> Quantization:
    scales = tuple(float(s) for s in np.atleast_1d(scale))
    zero_points = tuple(int(z) for z in np.atleast_1d(0 if zero_point is None else zero_point))
    if len(zero_points) == 1 and len(scales) > 1:
        zero_points *= len(scales)
    if len(zero_points) != len(scales):
        raise ValueError(f"{len(scales)} scales but {len(zero_points)} zero points")
    return Quantization(scales, zero_points, dimension)


def _quantization_t(quantization: Quantization | None) -> schema.QuantizationParametersT | None:
    if quantization is None:
        return None
    return schema.QuantizationParametersT(scale=np.array(quantization.scale, np.float32),
                                          zeroPoint=np.array(quantization.zero_point, np.int64),
                                          quantizedDimension=quantization.dimension)


def _little_endian_bytes(data: np.ndarray) -> np.ndarray:
    return np.frombuffer(np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<")).tobytes(), np.uint8)


def _options_type(options) -> int:
    """The BuiltinOptions union tag of an options object: Conv2DOptionsT → BuiltinOptions.Conv2DOptions."""
    if options is None:
        return schema.BuiltinOptions.NONE
    return getattr(schema.BuiltinOptions, type(options).__name__.removesuffix("T"))


def _operator_code(name: str, version: int) -> schema.OperatorCodeT:
    code = builtin_code(name)
    return schema.OperatorCodeT(deprecatedBuiltinCode=min(code, _PLACEHOLDER_FOR_GREATER_OP_CODES),
                                builtinCode=code, version=version)


# --- random but valid parameters ------------------------------------------------------------------------------

class Draw:
    """The parameters of one random case: each is the caller's override when given, else drawn."""

    def __init__(self, rng: np.random.Generator, overrides: dict):
        self.rng, self.overrides = rng, dict(overrides)

    def __call__(self, name: str, draw: Callable[[], object]):
        return self.overrides.pop(name) if name in self.overrides else draw()

    def log_uniform(self, name: str, low: float, high: float) -> float:
        return self(name, lambda: float(math.exp(self.rng.uniform(math.log(low), math.log(high)))))

    def integer(self, name: str, low: int, high: int) -> int:
        """Inclusive of both ends."""
        return self(name, lambda: int(self.rng.integers(low, high + 1)))

    def choice(self, name: str, options: Sequence):
        return self(name, lambda: options[int(self.rng.integers(len(options)))])

    def finish(self) -> None:
        if self.overrides:
            raise TypeError(f"unknown parameters: {', '.join(sorted(self.overrides))}")


def _zero_point(p: Draw, name: str, spread: int = 100) -> int:
    return p.integer(name, -spread, spread)


def _weights(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    """int8 weights as the converter's symmetric quantization makes them: in [-127, 127]."""
    return rng.integers(-127, 128, size=tuple(shape)).astype(np.int8)


# A zero-point-centred int8 input value is up to ±255 and typically ~±100: the typical size of
# products that accumulate, to place output scales where outputs span their range without saturating.
_TYPICAL_INPUT = 100.0
_TYPICAL_WEIGHT = 73.0


def _accumulator_std(input_scale: float, filter_scales: np.ndarray, fan_in: int) -> float:
    """Typical real size of a dot product of `fan_in` random inputs and weights."""
    return input_scale * float(np.mean(filter_scales)) * _TYPICAL_INPUT * _TYPICAL_WEIGHT * math.sqrt(fan_in)


def _bias(rng: np.random.Generator, accumulator_std: float, bias_scales: np.ndarray) -> np.ndarray:
    real = rng.normal(0.0, accumulator_std, size=bias_scales.shape)
    limit = np.iinfo(np.int32).max
    return np.clip(np.round(real / bias_scales), -limit, limit).astype(np.int32)


def _output_size(size: int, kernel: int, stride: int, dilation: int, padding: str) -> int:
    """TFLite's output extent along one spatial axis (tensorflow/lite/kernels/padding.h)."""
    effective = (kernel - 1) * dilation + 1
    if padding == "SAME":
        return (size + stride - 1) // stride
    return (size - effective + stride) // stride


def _spatial(p: Draw, height: int, width: int, max_kernel: int = 4, max_dilation: int = 2):
    """(kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, padding) for which VALID
    padding still leaves at least one output."""
    padding = p.choice("padding", PADDINGS)
    kernel_h = p.integer("kernel_h", 1, max(1, min(max_kernel, height if padding == "VALID" else max_kernel)))
    kernel_w = p.integer("kernel_w", 1, max(1, min(max_kernel, width if padding == "VALID" else max_kernel)))

    def dilation(name: str, size: int, kernel: int) -> int:
        room = max_dilation if kernel == 1 or padding == "SAME" else (size - 1) // (kernel - 1)
        return p.integer(name, 1, max(1, min(max_dilation, room)))
    dilation_h = dilation("dilation_h", height, kernel_h) if max_dilation > 1 else 1
    dilation_w = dilation("dilation_w", width, kernel_w) if max_dilation > 1 else 1
    stride_h, stride_w = p.integer("stride_h", 1, 3), p.integer("stride_w", 1, 3)
    return kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, padding


def _same_quantization(graph: GraphBuilder, x: int) -> dict:
    tensor = graph.tensor(x)
    return {"scale": tensor.scale, "zero_point": tensor.zero_point}


def _requantized(p: Draw, graph: GraphBuilder, x: int) -> dict:
    """A random output quantization near the input's (zero point within 32 of it)."""
    source = graph.tensor(x)
    zero_point = min(127, max(-128, source.zero_point + p.integer("output_zero_point_shift", -32, 32)))
    return {"scale": source.scale * p.log_uniform("output_scale_ratio", 0.5, 2.0),
            "zero_point": p("output_zero_point", lambda: zero_point)}


def _output(graph: GraphBuilder, name: str, dtype: str, shape, quantization: dict | None) -> int:
    return graph.add_tensor(name, dtype, shape, **(quantization or {}))


# --- operators: each adds one to `graph` after tensor `x` and returns its output tensor -----------------------

def add_conv2d(graph: GraphBuilder, p: Draw, x: int, name: str = "conv2d") -> int:
    batch, height, width, channels = graph.tensor(x).shape
    out_channels = p.integer("out_channels", 1, 8)
    kh, kw, sh, sw, dh, dw, padding = _spatial(p, height, width)
    activation = p.choice("activation", ACTIVATIONS)
    input_scale = graph.tensor(x).scale
    filter_scales = np.array([p.log_uniform("filter_scale", 1e-3, 2e-2) for _ in range(out_channels)])
    filter_index = graph.add_constant(f"{name}/filter", _weights(p.rng, (out_channels, kh, kw, channels)),
                                      scale=filter_scales, zero_point=0, quantized_dimension=0)
    std = _accumulator_std(input_scale, filter_scales, kh * kw * channels)
    bias_scales = input_scale * filter_scales
    bias_index = graph.add_constant(f"{name}/bias", _bias(p.rng, std, bias_scales), scale=bias_scales,
                                    zero_point=0)
    out_shape = (batch, _output_size(height, kh, sh, dh, padding), _output_size(width, kw, sw, dw, padding),
                 out_channels)
    y = _output(graph, name, "int8", out_shape, {"scale": std / 32 * p.log_uniform("output_scale_ratio", 0.5, 2),
                                                 "zero_point": _zero_point(p, "output_zero_point")})
    graph.add_operator("CONV_2D", [x, filter_index, bias_index], [y], schema.Conv2DOptionsT(
        padding=padding_code(padding), strideW=sw, strideH=sh, fusedActivationFunction=activation_code(activation),
        dilationWFactor=dw, dilationHFactor=dh))
    return y


def add_depthwise_conv2d(graph: GraphBuilder, p: Draw, x: int, name: str = "depthwise_conv2d") -> int:
    batch, height, width, channels = graph.tensor(x).shape
    multiplier = p.integer("depth_multiplier", 1, 3)
    out_channels = channels * multiplier
    kh, kw, sh, sw, dh, dw, padding = _spatial(p, height, width)
    activation = p.choice("activation", ACTIVATIONS)
    input_scale = graph.tensor(x).scale
    filter_scales = np.array([p.log_uniform("filter_scale", 1e-3, 2e-2) for _ in range(out_channels)])
    filter_index = graph.add_constant(f"{name}/filter", _weights(p.rng, (1, kh, kw, out_channels)),
                                      scale=filter_scales, zero_point=0, quantized_dimension=3)
    std = _accumulator_std(input_scale, filter_scales, kh * kw)
    bias_scales = input_scale * filter_scales
    bias_index = graph.add_constant(f"{name}/bias", _bias(p.rng, std, bias_scales), scale=bias_scales,
                                    zero_point=0)
    out_shape = (batch, _output_size(height, kh, sh, dh, padding), _output_size(width, kw, sw, dw, padding),
                 out_channels)
    y = _output(graph, name, "int8", out_shape, {"scale": std / 32 * p.log_uniform("output_scale_ratio", 0.5, 2),
                                                 "zero_point": _zero_point(p, "output_zero_point")})
    graph.add_operator("DEPTHWISE_CONV_2D", [x, filter_index, bias_index], [y], schema.DepthwiseConv2DOptionsT(
        padding=padding_code(padding), strideW=sw, strideH=sh, depthMultiplier=multiplier,
        fusedActivationFunction=activation_code(activation), dilationWFactor=dw, dilationHFactor=dh))
    return y


def add_fully_connected(graph: GraphBuilder, p: Draw, x: int, name: str = "fully_connected") -> int:
    """Per-tensor weights [units, depth] on the input's last dimension; keep_num_dims false, so the
    output is [elements / depth, units]."""
    shape = graph.tensor(x).shape
    depth, units = shape[-1], p.integer("units", 1, 16)
    activation = p.choice("activation", ACTIVATIONS)
    input_scale = graph.tensor(x).scale
    filter_scale = p.log_uniform("filter_scale", 1e-3, 2e-2)
    filter_index = graph.add_constant(f"{name}/weights", _weights(p.rng, (units, depth)), scale=filter_scale,
                                      zero_point=0)
    std = _accumulator_std(input_scale, np.array([filter_scale]), depth)
    bias_index = -1
    if p("bias", lambda: True):
        bias_scales = np.full(units, input_scale * filter_scale)
        bias_index = graph.add_constant(f"{name}/bias", _bias(p.rng, std, bias_scales),
                                        scale=input_scale * filter_scale, zero_point=0)
    out_shape = (math.prod(shape) // depth, units)
    y = _output(graph, name, "int8", out_shape, {"scale": std / 32 * p.log_uniform("output_scale_ratio", 0.5, 2),
                                                 "zero_point": _zero_point(p, "output_zero_point")})
    graph.add_operator("FULLY_CONNECTED", [x, filter_index, bias_index], [y], schema.FullyConnectedOptionsT(
        fusedActivationFunction=activation_code(activation), keepNumDims=False))
    return y


def _add_pool(op: str, graph: GraphBuilder, p: Draw, x: int, name: str) -> int:
    batch, height, width, channels = graph.tensor(x).shape
    kh, kw, sh, sw, _, _, padding = _spatial(p, height, width, max_dilation=1)
    activation = p.choice("activation", ACTIVATIONS)
    out_shape = (batch, _output_size(height, kh, sh, 1, padding), _output_size(width, kw, sw, 1, padding), channels)
    y = _output(graph, name, "int8", out_shape, _same_quantization(graph, x))
    graph.add_operator(op, [x], [y], schema.Pool2DOptionsT(
        padding=padding_code(padding), strideW=sw, strideH=sh, filterWidth=kw, filterHeight=kh,
        fusedActivationFunction=activation_code(activation)))
    return y


def add_average_pool2d(graph: GraphBuilder, p: Draw, x: int, name: str = "average_pool2d") -> int:
    return _add_pool("AVERAGE_POOL_2D", graph, p, x, name)


def add_max_pool2d(graph: GraphBuilder, p: Draw, x: int, name: str = "max_pool2d") -> int:
    return _add_pool("MAX_POOL_2D", graph, p, x, name)


def add_softmax(graph: GraphBuilder, p: Draw, x: int, name: str = "softmax") -> int:
    y = _output(graph, name, "int8", graph.tensor(x).shape, {"scale": 1 / 256, "zero_point": -128})
    graph.add_operator("SOFTMAX", [x], [y], schema.SoftmaxOptionsT(beta=p("beta", lambda: 1.0)))
    return y


def add_logistic(graph: GraphBuilder, p: Draw, x: int, name: str = "logistic") -> int:
    y = _output(graph, name, "int8", graph.tensor(x).shape, {"scale": 1 / 256, "zero_point": -128})
    graph.add_operator("LOGISTIC", [x], [y])
    return y


def add_relu(graph: GraphBuilder, p: Draw, x: int, name: str = "relu") -> int:
    y = _output(graph, name, "int8", graph.tensor(x).shape, _requantized(p, graph, x))
    graph.add_operator("RELU", [x], [y])
    return y


def add_relu6(graph: GraphBuilder, p: Draw, x: int, name: str = "relu6") -> int:
    y = _output(graph, name, "int8", graph.tensor(x).shape, _requantized(p, graph, x))
    graph.add_operator("RELU6", [x], [y])
    return y


def _broadcast_shape(p: Draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """`shape`, or (when `broadcast`) `shape` with some dimensions 1 and possibly fewer leading ones."""
    if not p("broadcast", lambda: bool(p.rng.random() < 0.3)):
        return shape
    ones = p.rng.random(len(shape)) < 0.5
    other = tuple(1 if one else d for one, d in zip(ones, shape))
    return other[int(p.rng.integers(0, len(shape))):] or (1,)


def _second_operand(graph: GraphBuilder, p: Draw, x: int, name: str, scale: float) -> int:
    """The other operand of ADD/MUL: another graph input, or a constant when `constant_operand`."""
    shape = _broadcast_shape(p, graph.tensor(x).shape)
    quantization = {"scale": scale, "zero_point": _zero_point(p, "operand_zero_point")}
    if p("constant_operand", lambda: bool(p.rng.random() < 0.25)):
        return graph.add_constant(f"{name}/operand", p.rng.integers(-128, 128, shape).astype(np.int8), **quantization)
    return graph.add_input(f"{name}/operand", "int8", shape, **quantization)


def _output_shape_of_broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(a, b))


def add_add(graph: GraphBuilder, p: Draw, x: int, name: str = "add") -> int:
    x_scale = graph.tensor(x).scale
    other = _second_operand(graph, p, x, name, x_scale * p.log_uniform("operand_scale_ratio", 0.25, 4.0))
    activation = p.choice("activation", ACTIVATIONS)
    out_scale = max(x_scale, graph.tensor(other).scale) * 2 * p.log_uniform("output_scale_ratio", 0.5, 2.0)
    shape = _output_shape_of_broadcast(graph.tensor(x).shape, graph.tensor(other).shape)
    y = _output(graph, name, "int8", shape, {"scale": out_scale, "zero_point": _zero_point(p, "output_zero_point")})
    graph.add_operator("ADD", [x, other], [y], schema.AddOptionsT(fusedActivationFunction=activation_code(activation)))
    return y


def add_mul(graph: GraphBuilder, p: Draw, x: int, name: str = "mul") -> int:
    x_scale = graph.tensor(x).scale
    other = _second_operand(graph, p, x, name, p.log_uniform("operand_scale", 1e-3, 1e-1))
    activation = p.choice("activation", ACTIVATIONS)
    out_scale = (x_scale * graph.tensor(other).scale * _TYPICAL_INPUT * _TYPICAL_INPUT / 64
                 * p.log_uniform("output_scale_ratio", 0.5, 2.0))
    shape = _output_shape_of_broadcast(graph.tensor(x).shape, graph.tensor(other).shape)
    y = _output(graph, name, "int8", shape, {"scale": out_scale, "zero_point": _zero_point(p, "output_zero_point")})
    graph.add_operator("MUL", [x, other], [y], schema.MulOptionsT(fusedActivationFunction=activation_code(activation)))
    return y


def _random_factorization(rng: np.random.Generator, total: int, rank: int) -> tuple[int, ...]:
    dims = [1] * rank
    n, factor = total, 2
    while n > 1:
        while n % factor == 0:
            dims[int(rng.integers(rank))] *= factor
            n //= factor
        factor += 1
    return tuple(dims)


def add_reshape(graph: GraphBuilder, p: Draw, x: int, name: str = "reshape") -> int:
    """The new shape both as the constant shape operand and in ReshapeOptions, as the converter writes."""
    total = math.prod(graph.tensor(x).shape)
    new_shape = tuple(p("new_shape", lambda: _random_factorization(p.rng, total, int(p.rng.integers(1, 5)))))
    shape_index = graph.add_constant(f"{name}/shape", np.array(new_shape, np.int32))
    y = _output(graph, name, "int8", new_shape, _same_quantization(graph, x))
    graph.add_operator("RESHAPE", [x, shape_index], [y], schema.ReshapeOptionsT(newShape=list(new_shape)))
    return y


def add_squeeze(graph: GraphBuilder, p: Draw, x: int, name: str = "squeeze") -> int:
    """Removes `squeeze_dims` (default: a random non-empty subset of the size-1 dimensions, or all of
    them as an empty list says)."""
    shape = graph.tensor(x).shape
    ones = [i for i, d in enumerate(shape) if d == 1]

    def draw() -> list[int]:
        if not ones or p.rng.random() < 0.25:
            return []
        return sorted(int(i) for i in p.rng.choice(ones, size=int(p.rng.integers(1, len(ones) + 1)), replace=False))
    dims = list(p("squeeze_dims", draw))
    removed = {d % len(shape) for d in dims} if dims else set(ones)
    out_shape = tuple(d for i, d in enumerate(shape) if i not in removed)
    y = _output(graph, name, "int8", out_shape, _same_quantization(graph, x))
    graph.add_operator("SQUEEZE", [x], [y], schema.SqueezeOptionsT(squeezeDims=dims))
    return y


def add_pad(graph: GraphBuilder, p: Draw, x: int, name: str = "pad") -> int:
    """Pads with the zero point (real 0), before and after each dimension."""
    shape = graph.tensor(x).shape
    paddings = np.asarray(p("paddings", lambda: p.rng.integers(0, 3, size=(len(shape), 2))), np.int32)
    paddings_index = graph.add_constant(f"{name}/paddings", paddings)
    out_shape = tuple(d + int(before) + int(after) for d, (before, after) in zip(shape, paddings))
    y = _output(graph, name, "int8", out_shape, _same_quantization(graph, x))
    graph.add_operator("PAD", [x, paddings_index], [y], schema.PadOptionsT())
    return y


def add_mean(graph: GraphBuilder, p: Draw, x: int, name: str = "mean") -> int:
    shape = graph.tensor(x).shape

    def draw_axes() -> list[int]:
        count = int(p.rng.integers(1, len(shape) + 1))
        return sorted(int(a) for a in p.rng.choice(len(shape), size=count, replace=False))
    axes = p("axes", draw_axes)
    keep_dims = p("keep_dims", lambda: bool(p.rng.random() < 0.5))
    reduced = {a % len(shape) for a in axes}
    out_shape = tuple(1 if i in reduced else d for i, d in enumerate(shape) if keep_dims or i not in reduced)
    axes_index = graph.add_constant(f"{name}/axes", np.array(axes, np.int32))
    y = _output(graph, name, "int8", out_shape, _requantized(p, graph, x))
    graph.add_operator("MEAN", [x, axes_index], [y], schema.ReducerOptionsT(keepDims=keep_dims))
    return y


def add_transpose(graph: GraphBuilder, p: Draw, x: int, name: str = "transpose") -> int:
    shape = graph.tensor(x).shape
    perm = tuple(int(a) for a in p("perm", lambda: p.rng.permutation(len(shape))))
    perm_index = graph.add_constant(f"{name}/perm", np.array(perm, np.int32))
    y = _output(graph, name, "int8", tuple(shape[a] for a in perm), _same_quantization(graph, x))
    graph.add_operator("TRANSPOSE", [x, perm_index], [y], schema.TransposeOptionsT())
    return y


def add_concatenation(graph: GraphBuilder, p: Draw, x: int, name: str = "concatenation") -> int:
    """`x` and `operands - 1` more graph inputs, along `axis`; int8 inputs share the output's
    quantization (LiteRT requires it, the converter writes it)."""
    shape = graph.tensor(x).shape
    axis = p.integer("axis", 0, len(shape) - 1)
    count = p.integer("operands", 2, 3)
    quantization = _same_quantization(graph, x)
    parts = [x]
    for i in range(1, count):
        part_shape = tuple(int(p.rng.integers(1, 5)) if a == axis % len(shape) else d for a, d in enumerate(shape))
        parts.append(graph.add_input(f"{name}/operand{i}", "int8", part_shape, **quantization))
    out_shape = tuple(sum(graph.tensor(t).shape[a] for t in parts) if a == axis % len(shape) else d
                      for a, d in enumerate(shape))
    y = _output(graph, name, "int8", out_shape, quantization)
    graph.add_operator("CONCATENATION", parts, [y], schema.ConcatenationOptionsT(axis=axis, fusedActivationFunction=0))
    return y


def add_quantize(graph: GraphBuilder, p: Draw, x: int, name: str = "quantize") -> int:
    """float32 → int8, or int8 → int8 with another scale and zero point (a requantization)."""
    source = graph.tensor(x)
    if source.dtype == "int8":
        quantization = _requantized(p, graph, x)
    else:
        quantization = {"scale": p.log_uniform("output_scale", 1e-2, 1e-1),
                        "zero_point": _zero_point(p, "output_zero_point")}
    y = _output(graph, name, "int8", source.shape, quantization)
    graph.add_operator("QUANTIZE", [x], [y], schema.QuantizeOptionsT(),
                       version=2 if source.dtype == "int8" else None)
    return y


def add_dequantize(graph: GraphBuilder, p: Draw, x: int, name: str = "dequantize") -> int:
    y = _output(graph, name, "float32", graph.tensor(x).shape, None)
    graph.add_operator("DEQUANTIZE", [x], [y], schema.DequantizeOptionsT())
    return y


# --- models ----------------------------------------------------------------------------------------------------

def _nhwc(p: Draw) -> tuple[int, ...]:
    return (p.integer("batch", 1, 2), p.integer("height", 1, 10), p.integer("width", 1, 10),
            p.integer("channels", 1, 8))


def _features(p: Draw) -> tuple[int, ...]:
    return (p.integer("batch", 1, 3), p.integer("depth", 1, 32))


def _any_rank(p: Draw) -> tuple[int, ...]:
    return tuple(int(d) for d in p.rng.integers(1, 6, size=int(p.rng.integers(1, 5))))


def _with_ones(p: Draw) -> tuple[int, ...]:
    """A shape of rank 2-4 with at least one dimension of 1 (something for SQUEEZE to remove)."""
    shape = [int(d) for d in p.rng.integers(1, 6, size=int(p.rng.integers(2, 5)))]
    shape[int(p.rng.integers(len(shape)))] = 1
    return tuple(shape)


def _single(rng: np.random.Generator, overrides: dict, shape: Callable[[Draw], tuple[int, ...]],
            add: Callable[[GraphBuilder, Draw, int], int], input_scale: tuple[float, float] = (1e-3, 1e-1),
            dtype: str = "int8") -> GraphBuilder:
    """A graph of one operator on one graph input (`input_shape`, `input_scale`, `input_zero_point`
    override that input's draws)."""
    p = Draw(rng, overrides)
    graph = GraphBuilder()
    graph.mark_output(_add_case(graph, p, shape, add, input_scale, dtype, "input", None))
    p.finish()
    return graph


def _add_case(graph: GraphBuilder, p: Draw, shape, add, input_scale, dtype: str, input_name: str,
              name: str | None) -> int:
    """One graph input and one operator on it; the operator's output."""
    dtype = p("input_dtype", lambda: dtype)
    input_shape = tuple(p("input_shape", lambda: shape(p)))
    quantization = {}
    if dtype == "int8":
        quantization = {"scale": p.log_uniform("input_scale", *input_scale),
                        "zero_point": p.integer("input_zero_point", -128, 127)}
    elif dtype == "int16":  # 16x8 activations are quantized symmetrically, as the converter does
        quantization = {"scale": p.log_uniform("input_scale", *input_scale) / 256, "zero_point": 0}
    x = graph.add_input(input_name, dtype, input_shape, **quantization)
    return add(graph, p, x) if name is None else add(graph, p, x, name=name)


def bundle_model(rng: np.random.Generator, cases: Sequence) -> GraphBuilder:
    """Many one-operator cases side by side in one graph (input `in<k>`, output of operator `case<k>`),
    so that one build and one run check them all. Each entry is an operator's name or (name, overrides)."""
    graph = GraphBuilder()
    for k, case in enumerate(cases):
        op, overrides = (case, {}) if isinstance(case, str) else (case[0], dict(case[1]))
        shape, add, input_scale, dtype = CASE_SHAPES[op]
        p = Draw(rng, overrides)
        graph.mark_output(_add_case(graph, p, shape, add, input_scale, dtype, f"in{k}", f"case{k}"))
        p.finish()
    return graph


def conv2d_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _nhwc, add_conv2d)


def depthwise_conv2d_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _nhwc, add_depthwise_conv2d)


def fully_connected_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _features, add_fully_connected)


def average_pool2d_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _nhwc, add_average_pool2d)


def max_pool2d_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _nhwc, add_max_pool2d)


def softmax_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    """Input scales of 0.01-0.1 put logits in ±13, where softmax is neither flat nor one-hot."""
    return _single(rng, overrides, _features, add_softmax, input_scale=(1e-2, 1e-1))


def logistic_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _any_rank, add_logistic, input_scale=(1e-2, 1e-1))


def add_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _nhwc, add_add)


def mul_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _nhwc, add_mul)


def reshape_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _any_rank, add_reshape)


def squeeze_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _with_ones, add_squeeze)


def pad_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _nhwc, add_pad)


def mean_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _nhwc, add_mean)


def transpose_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _any_rank, add_transpose)


def concatenation_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _any_rank, add_concatenation)


def quantize_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    """float32 → int8; with input_dtype="int8", an int8 → int8 requantization."""
    return _single(rng, overrides, _any_rank, add_quantize, dtype="float32")


def dequantize_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _any_rank, add_dequantize)


def relu_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _any_rank, add_relu)


def relu6_model(rng: np.random.Generator, **overrides) -> GraphBuilder:
    return _single(rng, overrides, _any_rank, add_relu6)


_SCALES, _LOGITS = (1e-3, 1e-1), (1e-2, 1e-1)
# Per operator: (input shape, the operator's adder, input scale range, input dtype), as its factory draws them.
CASE_SHAPES: dict[str, tuple] = {
    "CONV_2D": (_nhwc, add_conv2d, _SCALES, "int8"), "DEPTHWISE_CONV_2D": (_nhwc, add_depthwise_conv2d, _SCALES, "int8"),
    "FULLY_CONNECTED": (_features, add_fully_connected, _SCALES, "int8"),
    "AVERAGE_POOL_2D": (_nhwc, add_average_pool2d, _SCALES, "int8"),
    "MAX_POOL_2D": (_nhwc, add_max_pool2d, _SCALES, "int8"), "SOFTMAX": (_features, add_softmax, _LOGITS, "int8"),
    "LOGISTIC": (_any_rank, add_logistic, _LOGITS, "int8"), "ADD": (_nhwc, add_add, _SCALES, "int8"),
    "MUL": (_nhwc, add_mul, _SCALES, "int8"), "RESHAPE": (_any_rank, add_reshape, _SCALES, "int8"),
    "SQUEEZE": (_with_ones, add_squeeze, _SCALES, "int8"), "PAD": (_nhwc, add_pad, _SCALES, "int8"),
    "MEAN": (_nhwc, add_mean, _SCALES, "int8"), "TRANSPOSE": (_any_rank, add_transpose, _SCALES, "int8"),
    "CONCATENATION": (_any_rank, add_concatenation, _SCALES, "int8"),
    "QUANTIZE": (_any_rank, add_quantize, _SCALES, "float32"), "DEQUANTIZE": (_any_rank, add_dequantize, _SCALES, "int8"),
    "RELU": (_any_rank, add_relu, _SCALES, "int8"), "RELU6": (_any_rank, add_relu6, _SCALES, "int8"),
}

FACTORIES: dict[str, Callable[..., GraphBuilder]] = {
    "CONV_2D": conv2d_model, "DEPTHWISE_CONV_2D": depthwise_conv2d_model, "FULLY_CONNECTED": fully_connected_model,
    "AVERAGE_POOL_2D": average_pool2d_model, "MAX_POOL_2D": max_pool2d_model, "SOFTMAX": softmax_model,
    "ADD": add_model, "MUL": mul_model, "RESHAPE": reshape_model, "SQUEEZE": squeeze_model, "PAD": pad_model,
    "MEAN": mean_model, "TRANSPOSE": transpose_model, "CONCATENATION": concatenation_model,
    "QUANTIZE": quantize_model, "DEQUANTIZE": dequantize_model, "LOGISTIC": logistic_model, "RELU": relu_model,
    "RELU6": relu6_model,
}

ADDERS: dict[str, Callable[..., int]] = {
    "CONV_2D": add_conv2d, "DEPTHWISE_CONV_2D": add_depthwise_conv2d, "FULLY_CONNECTED": add_fully_connected,
    "AVERAGE_POOL_2D": add_average_pool2d, "MAX_POOL_2D": add_max_pool2d, "SOFTMAX": add_softmax, "ADD": add_add,
    "MUL": add_mul, "RESHAPE": add_reshape, "SQUEEZE": add_squeeze, "PAD": add_pad, "MEAN": add_mean,
    "TRANSPOSE": add_transpose, "CONCATENATION": add_concatenation, "QUANTIZE": add_quantize,
    "DEQUANTIZE": add_dequantize, "LOGISTIC": add_logistic, "RELU": add_relu, "RELU6": add_relu6,
}


def register_cases(cases: dict[str, tuple]) -> None:
    """Add operators' cases (name → (input shape, adder, input scale range, input dtype), as
    CASE_SHAPES holds them) from a module of tests/tflitecases/; a name may be registered once.
    Another kind of case of the same operator is named "OPERATOR/kind" ("ADD/int16"); its adder
    writes OPERATOR."""
    for name, case in cases.items():
        if name in CASE_SHAPES:
            raise ValueError(f"{name}: cases registered twice")
        CASE_SHAPES[name] = case
        ADDERS[name] = case[1]


# A keyword-spotting network in miniature: the operators of MLPerf Tiny's kws model, in its order.
KWS_CHAIN = ("CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D", "AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED", "SOFTMAX")
# A residual block behind a float interface, as the image-classification models have it.
RESIDUAL_CHAIN = ("QUANTIZE", ("CONV_2D", {"padding": "SAME", "stride_h": 1, "stride_w": 1}), "ADD", "RELU",
                  "MAX_POOL_2D", ("MEAN", {"axes": [1, 2], "keep_dims": False}), "FULLY_CONNECTED", "DEQUANTIZE")


def chain_model(rng: np.random.Generator, ops: Sequence = KWS_CHAIN, **overrides) -> GraphBuilder:
    """`ops` one after the other on a 4-D NHWC input (float32 when the chain starts with QUANTIZE).
    Each entry is an operator's name or (name, overrides of its draws); `overrides` here are the
    input's (`input_shape`, `input_scale`, `input_zero_point`, `input_dtype`). An operator that needs
    more operands (ADD, MUL, CONCATENATION) takes them as further graph inputs or constants."""
    specs = [(op, {}) if isinstance(op, str) else (op[0], dict(op[1])) for op in ops]
    p = Draw(rng, overrides)
    graph = GraphBuilder()
    dtype = p("input_dtype", lambda: "float32" if specs and specs[0][0] == "QUANTIZE" else "int8")
    shape = tuple(p("input_shape", lambda: (1, p.integer("height", 4, 10), p.integer("width", 4, 10),
                                            p.integer("channels", 1, 4))))
    quantization = {}
    if dtype == "int8":
        quantization = {"scale": p.log_uniform("input_scale", 1e-2, 1e-1),
                        "zero_point": p.integer("input_zero_point", -128, 127)}
    x = graph.add_input("input", dtype, shape, **quantization)
    p.finish()
    for position, (op, op_overrides) in enumerate(specs):
        draw = Draw(rng, op_overrides)
        x = ADDERS[op](graph, draw, x, name=f"{op.lower()}_{position}")
        draw.finish()
    graph.mark_output(x)
    return graph
