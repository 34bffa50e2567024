"""Random cases of the unary element-wise operators and activations (mlfbuild/importer/lowering/unary.py,
and the int16 kinds of elementwise.py's RELU, RELU6, LOGISTIC, QUANTIZE, DEQUANTIZE): the output
quantization each gets is what TFLite's converter writes, or what TFLite's kernels take."""

from __future__ import annotations

import math

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from tflitewriter import (
    DTYPES,
    Draw,
    GraphBuilder,
    _random_factorization,
    _output,
    _requantized,
    register_cases,
)

_SCALES, _LOGITS = (1e-3, 1e-1), (1e-2, 1e-1)


def _small(p: Draw) -> tuple[int, ...]:
    """A shape of rank 1-4 with at most 40 elements: many cases fit one bundle on a small board."""
    total = int(p.rng.integers(1, 41))
    return _random_factorization(p.rng, total, int(p.rng.integers(1, 5)))


def _symmetric16(p: Draw, graph: GraphBuilder, x: int) -> dict:
    """An int16 output near the input's scale, zero point 0 (16x8 activations are symmetric)."""
    return {"scale": graph.tensor(x).scale * p.log_uniform("output_scale_ratio", 0.5, 2.0), "zero_point": 0}


def _near(p: Draw, graph: GraphBuilder, x: int) -> dict:
    """int8: a random quantization near the input's; int16: symmetric, near the input's scale."""
    return _symmetric16(p, graph, x) if graph.tensor(x).dtype == "int16" else _requantized(p, graph, x)


def _same_type(graph: GraphBuilder, x: int) -> str:
    return graph.tensor(x).dtype


def add_tanh(graph: GraphBuilder, p: Draw, x: int, name: str = "tanh") -> int:
    """int8: scale 1/128, zero point 0; int16: 1/32768, 0 (what the converter writes)."""
    dtype = _same_type(graph, x)
    quantization = {"scale": 1 / 128, "zero_point": 0} if dtype == "int8" else {"scale": 1 / 32768, "zero_point": 0}
    y = _output(graph, name, dtype, graph.tensor(x).shape, quantization)
    graph.add_operator("TANH", [x], [y])
    return y


def add_logistic16(graph: GraphBuilder, p: Draw, x: int, name: str = "logistic") -> int:
    y = _output(graph, name, "int16", graph.tensor(x).shape, {"scale": 1 / 32768, "zero_point": 0})
    graph.add_operator("LOGISTIC", [x], [y])
    return y


def _add_simple(op: str, output: str = "near"):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        y = _output(graph, name, _same_type(graph, x), graph.tensor(x).shape, _near(p, graph, x))
        graph.add_operator(op, [x], [y])
        return y
    add.__name__ = f"add_{op.lower()}"
    return add


add_relu = _add_simple("RELU")
add_relu6 = _add_simple("RELU6")
add_relu_n1_to_1 = _add_simple("RELU_N1_TO_1")
add_relu_0_to_1 = _add_simple("RELU_0_TO_1")


def add_log(graph: GraphBuilder, p: Draw, x: int, name: str = "log") -> int:
    """The output's scale spans log of the input's range (values <= 0 give the output's minimum)."""
    source = graph.tensor(x)
    top = max(source.scale * (127 - source.zero_point), 1e-3)
    span = abs(math.log(top)) + abs(math.log(source.scale)) + 1.0
    y = _output(graph, name, "int8", source.shape,
                {"scale": p("output_scale", lambda: span / 255 * float(p.rng.uniform(0.8, 1.5))),
                 "zero_point": p.integer("output_zero_point", -20, 60)})
    graph.add_operator("LOG", [x], [y])
    return y


def add_leaky_relu(graph: GraphBuilder, p: Draw, x: int, name: str = "leaky_relu") -> int:
    alpha = p("alpha", lambda: float(p.rng.uniform(0.01, 0.5)))
    y = _output(graph, name, _same_type(graph, x), graph.tensor(x).shape, _near(p, graph, x))
    graph.add_operator("LEAKY_RELU", [x], [y], schema.LeakyReluOptionsT(alpha=alpha))
    return y


def add_hard_swish(graph: GraphBuilder, p: Draw, x: int, name: str = "hard_swish") -> int:
    y = _output(graph, name, "int8", graph.tensor(x).shape, _requantized(p, graph, x))
    graph.add_operator("HARD_SWISH", [x], [y])
    return y


def add_exp(graph: GraphBuilder, p: Draw, x: int, name: str = "exp") -> int:
    """The output's scale spans exp of the input's largest value."""
    source = graph.tensor(x)
    top = source.scale * (127 - source.zero_point)
    scale = p("output_scale", lambda: max(2.718 ** min(top, 20.0), 1.0) / 255 * float(p.rng.uniform(0.8, 1.5)))
    y = _output(graph, name, "int8", source.shape, {"scale": scale, "zero_point": p.integer("output_zero_point", -128, -100)})
    graph.add_operator("EXP", [x], [y])
    return y


def add_quantize16(graph: GraphBuilder, p: Draw, x: int, name: str = "quantize") -> int:
    """float32 → int16 (symmetric), int8 → int16 or int16 → int8/int16 (a requantization)."""
    source = graph.tensor(x)
    out = p.choice("output_dtype", ("int8", "int16")) if source.dtype == "int16" else p("output_dtype", lambda: "int16")
    if source.dtype == "float32":
        quantization = {"scale": p.log_uniform("output_scale", 1e-4, 1e-3), "zero_point": 0}
    elif out == "int16":
        quantization = {"scale": source.scale * p.log_uniform("output_scale_ratio", 1 / 300, 2.0), "zero_point": 0}
    else:
        quantization = {"scale": source.scale * p.log_uniform("output_scale_ratio", 100, 300),
                        "zero_point": p.integer("output_zero_point", -20, 20)}
    y = _output(graph, name, out, source.shape, quantization)
    graph.add_operator("QUANTIZE", [x], [y], schema.QuantizeOptionsT())
    return y


def add_dequantize(graph: GraphBuilder, p: Draw, x: int, name: str = "dequantize") -> int:
    y = _output(graph, name, "float32", graph.tensor(x).shape, None)
    graph.add_operator("DEQUANTIZE", [x], [y], schema.DequantizeOptionsT())
    return y


def add_abs(graph: GraphBuilder, p: Draw, x: int, name: str = "abs") -> int:
    """int8/int16: a random output quantization near the input's (the same one when `same_scale`)."""
    source = graph.tensor(x)
    quantization = None
    if source.dtype in ("int8", "int16"):
        same = p("same_scale", lambda: bool(p.rng.random() < 0.3))
        quantization = {"scale": source.scale, "zero_point": source.zero_point} if same else _near(p, graph, x)
    y = _output(graph, name, source.dtype, source.shape, quantization)
    graph.add_operator("ABS", [x], [y])
    return y


def add_neg(graph: GraphBuilder, p: Draw, x: int, name: str = "neg") -> int:
    source = graph.tensor(x)
    quantization = {"scale": source.scale, "zero_point": source.zero_point} if source.quantization else None
    y = _output(graph, name, source.dtype, source.shape, quantization)
    graph.add_operator("NEG", [x], [y])
    return y


def add_cast(graph: GraphBuilder, p: Draw, x: int, name: str = "cast") -> int:
    """To another of int8, int16, int32, float32 (`output_dtype`)."""
    source = graph.tensor(x)
    out = p.choice("output_dtype", [t for t in ("int8", "int16", "int32", "float32") if t != source.dtype])
    y = _output(graph, name, out, source.shape, None)
    options = schema.CastOptionsT(inDataType=DTYPES[source.dtype], outDataType=DTYPES[out])
    graph.add_operator("CAST", [x], [y], options)
    return y


def add_floor(graph: GraphBuilder, p: Draw, x: int, name: str = "floor") -> int:
    y = _output(graph, name, "float32", graph.tensor(x).shape, None)
    graph.add_operator("FLOOR", [x], [y])
    return y


def add_sqrt(graph: GraphBuilder, p: Draw, x: int, name: str = "sqrt") -> int:
    """Of |x| (float32; TFLite's SQRT of a negative is NaN)."""
    source = graph.tensor(x)
    magnitude = _output(graph, f"{name}/abs", "float32", source.shape, None)
    graph.add_operator("ABS", [x], [magnitude])
    y = _output(graph, name, "float32", source.shape, None)
    graph.add_operator("SQRT", [magnitude], [y])
    return y


def add_zeros_like(graph: GraphBuilder, p: Draw, x: int, name: str = "zeros_like") -> int:
    source = graph.tensor(x)
    quantization = {"scale": source.scale, "zero_point": source.zero_point} if source.quantization else None
    y = _output(graph, name, source.dtype, source.shape, quantization)
    graph.add_operator("ZEROS_LIKE", [x], [y])
    return y


def _scalar(p: Draw) -> tuple[int, ...]:
    return ()


def add_fill(graph: GraphBuilder, p: Draw, x: int, name: str = "fill") -> int:
    """`x` (a scalar graph input) as the value; the dims a constant of a random shape."""
    source = graph.tensor(x)
    shape = tuple(p("shape", lambda: _small(p)))
    dims = graph.add_constant(f"{name}/dims", np.array(shape, np.int32))
    quantization = {"scale": source.scale, "zero_point": source.zero_point} if source.quantization else None
    y = _output(graph, name, source.dtype, shape, quantization)
    graph.add_operator("FILL", [dims, x], [y], schema.FillOptionsT())
    return y


def add_rsqrt(graph: GraphBuilder, p: Draw, x: int, name: str = "rsqrt") -> int:
    """After a requantization to zero point -128 (TFLite's int8 RSQRT fails on values below the
    input's zero point); the output scale spans 1/sqrt of the smallest positive input."""
    source = graph.tensor(x)
    scale = p.log_uniform("rsqrt_input_scale", 1e-3, 1e-1)
    positive = _output(graph, f"{name}/positive", "int8", source.shape, {"scale": scale, "zero_point": -128})
    graph.add_operator("QUANTIZE", [x], [positive], schema.QuantizeOptionsT(), version=2)
    top = scale ** -0.5
    y = _output(graph, name, "int8", source.shape,
                {"scale": p("output_scale", lambda: top / 255 * float(p.rng.uniform(0.5, 1.5))),
                 "zero_point": p.integer("output_zero_point", -128, -100)})
    graph.add_operator("RSQRT", [positive], [y])
    return y


def add_l2_normalization(graph: GraphBuilder, p: Draw, x: int, name: str = "l2_normalization") -> int:
    """Output scale 1/128 and zero point 0, as TFLite requires."""
    y = _output(graph, name, "int8", graph.tensor(x).shape, {"scale": 1 / 128, "zero_point": 0})
    graph.add_operator("L2_NORMALIZATION", [x], [y], schema.L2NormOptionsT(fusedActivationFunction=0))
    return y


def add_log_softmax(graph: GraphBuilder, p: Draw, x: int, name: str = "log_softmax") -> int:
    """Output scale 16/256 and zero point 127, as TFLite requires."""
    y = _output(graph, name, "int8", graph.tensor(x).shape, {"scale": 16 / 256, "zero_point": 127})
    graph.add_operator("LOG_SOFTMAX", [x], [y], schema.LogSoftmaxOptionsT())
    return y


register_cases({
    "TANH": (_small, add_tanh, _LOGITS, "int8"),
    "TANH/int16": (_small, add_tanh, _LOGITS, "int16"),
    "LOGISTIC/int16": (_small, add_logistic16, _LOGITS, "int16"),
    "RELU/int16": (_small, add_relu, _SCALES, "int16"),
    "RELU6/int16": (_small, add_relu6, _LOGITS, "int16"),
    "RELU_N1_TO_1": (_small, add_relu_n1_to_1, _SCALES, "int8"),
    "RELU_0_TO_1": (_small, add_relu_0_to_1, _SCALES, "int8"),
    "LOG": (_small, add_log, _LOGITS, "int8"),
    "LEAKY_RELU": (_small, add_leaky_relu, _SCALES, "int8"),
    "LEAKY_RELU/int16": (_small, add_leaky_relu, _SCALES, "int16"),
    "HARD_SWISH": (_small, add_hard_swish, _LOGITS, "int8"),
    "EXP": (_small, add_exp, _LOGITS, "int8"),
    "QUANTIZE/int16": (_small, add_quantize16, _SCALES, "float32"),
    "QUANTIZE/int8_to_int16": (_small, add_quantize16, _SCALES, "int8"),
    "QUANTIZE/int16_to_int8": (_small, add_quantize16, _SCALES, "int16"),
    "DEQUANTIZE/int16": (_small, add_dequantize, _SCALES, "int16"),
    "ABS": (_small, add_abs, _SCALES, "int8"),
    "ABS/int16": (_small, add_abs, _SCALES, "int16"),
    "ABS/float32": (_small, add_abs, _SCALES, "float32"),
    "NEG": (_small, add_neg, _SCALES, "int8"),
    "NEG/int16": (_small, add_neg, _SCALES, "int16"),
    "NEG/float32": (_small, add_neg, _SCALES, "float32"),
    "CAST": (_small, add_cast, _SCALES, "int8"),
    "CAST/int16": (_small, add_cast, _SCALES, "int16"),
    "CAST/int32": (_small, add_cast, _SCALES, "int32"),
    "CAST/float32": (_small, add_cast, _SCALES, "float32"),
    "FLOOR": (_small, add_floor, _SCALES, "float32"),
    "SQRT": (_small, add_sqrt, _SCALES, "float32"),
    "ZEROS_LIKE": (_small, add_zeros_like, _SCALES, "int32"),
    "FILL": (_scalar, add_fill, _SCALES, "int8"),
    "FILL/float32": (_scalar, add_fill, _SCALES, "float32"),
    "RSQRT": (_small, add_rsqrt, _SCALES, "int8"),
    "L2_NORMALIZATION": (_small, add_l2_normalization, _SCALES, "int8"),
    "LOG_SOFTMAX": (_small, add_log_softmax, _LOGITS, "int8"),
})
