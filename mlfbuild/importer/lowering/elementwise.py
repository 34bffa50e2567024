"""Element-wise operators: CMSIS-NN's add and mul; activations, quantize and dequantize as small kernels."""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import Graph, Operator, Tensor
from .base import (
    REQUANTIZE_FUNCTION,
    Lowered,
    Operand,
    bare_call,
    c_clamp,
    elementwise,
    fused_activation_range,
    refuse,
    require_int8,
    tensor_at,
)


def _binary_operands(graph: Graph, op: Operator) -> tuple[Tensor, Tensor, Tensor]:
    a, b, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, a, b, y)
    if a.shape != b.shape or a.shape != y.shape:
        raise refuse(op, f"broadcasting ({a.describe()} with {b.describe()}) is not supported")
    for t in (a, b):
        if t.is_constant:
            raise refuse(op, f"a constant operand ({t.describe()}) is not supported")
    return a, b, y


def _binary_operand_list(op: Operator) -> list[Operand]:
    return [Operand("int8_t*", "input1_", op.inputs[0]), Operand("int8_t*", "input2_", op.inputs[1]),
            Operand("int8_t*", "output_", op.outputs[0])]


def _add(graph: Graph, op: Operator) -> Lowered:
    a, b, y = _binary_operands(graph, op)
    p = q.add_parameters(a.quantization.scale, b.quantization.scale, y.quantization.scale)
    lo, hi = fused_activation_range(op, y)
    size = int(np.prod(y.shape))
    call = (f"arm_elementwise_add_s8(input1_, input2_, {-a.quantization.zero_point}, {p['input1_mult']}, "
            f"{p['input1_shift']}, {-b.quantization.zero_point}, {p['input2_mult']}, {p['input2_shift']}, "
            f"{p['left_shift']}, output_, {y.quantization.zero_point}, {p['out_mult']}, {p['out_shift']}, "
            f"{lo}, {hi}, {size})")
    return Lowered(op, "arm_elementwise_add_s8", _binary_operand_list(op), bare_call(call), in_place=True)


def _mul(graph: Graph, op: Operator) -> Lowered:
    a, b, y = _binary_operands(graph, op)
    multiplier, shift = q.mul_multiplier(a.quantization.scale, b.quantization.scale, y.quantization.scale)
    lo, hi = fused_activation_range(op, y)
    size = int(np.prod(y.shape))
    call = (f"arm_elementwise_mul_s8(input1_, input2_, {-a.quantization.zero_point}, {-b.quantization.zero_point}, "
            f"output_, {y.quantization.zero_point}, {multiplier}, {shift}, {lo}, {hi}, {size})")
    return Lowered(op, "arm_elementwise_mul_s8", _binary_operand_list(op), bare_call(call), in_place=True)


def _relu_like(graph: Graph, op: Operator, top: float | None) -> Lowered:
    """RELU / RELU6 (TFLite's activations.cc, QuantizedReluX): rescale by input/output (float
    division, then widened), clamp to the quantized 0 and 6."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    require_int8(op, x, y)
    multiplier, shift = q.quantize_multiplier(float(np.float32(x.quantization.scale) / np.float32(y.quantization.scale)))
    zp = y.quantization.zero_point
    lo = max(-128, zp + q.round_half_away(0.0))
    hi = 127 if top is None else min(127, zp + q.round_half_away(float(np.float32(top) / np.float32(y.quantization.scale))))
    expression = [f"const int32_t scaled = {zp} + {REQUANTIZE_FUNCTION}((int32_t)in - ({x.quantization.zero_point}), "
                  f"{multiplier}, {shift});", f"const int8_t out = (int8_t){c_clamp('scaled', lo, hi)};"]
    return elementwise(op, x, y, "int8_t", "int8_t", expression, "")


def _relu(graph: Graph, op: Operator) -> Lowered:
    return _relu_like(graph, op, None)


def _relu6(graph: Graph, op: Operator) -> Lowered:
    return _relu_like(graph, op, 6.0)


def _quantize(graph: Graph, op: Operator) -> Lowered:
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if y.dtype != "int8" or y.quantization is None or y.quantization.per_channel:
        raise refuse(op, f"only quantization to per-tensor int8 is supported, not {y.describe()}")
    zp = y.quantization.zero_point
    if x.dtype == "float32":
        # AffineQuantize: round(value / scale) in double (QuantizationParams.scale is a double) + zero point
        scale = repr(float(y.quantization.scale))
        expression = [f"const int32_t scaled = (int32_t)round((double)in / {scale}) + ({zp});",
                      f"const int8_t out = (int8_t){c_clamp('scaled', -128, 127)};"]
        return elementwise(op, x, y, "float", "int8_t", expression, "")
    require_int8(op, x)
    multiplier, shift = q.quantize_multiplier(float(x.quantization.scale) / float(y.quantization.scale))
    expression = [f"const int32_t scaled = {REQUANTIZE_FUNCTION}((int32_t)in - ({x.quantization.zero_point}), "
                  f"{multiplier}, {shift}) + ({zp});", f"const int8_t out = (int8_t){c_clamp('scaled', -128, 127)};"]
    return elementwise(op, x, y, "int8_t", "int8_t", expression, "")


def _dequantize(graph: Graph, op: Operator) -> Lowered:
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    require_int8(op, x)
    if y.dtype != "float32":
        raise refuse(op, f"only dequantization to float32 is supported, not {y.describe()}")
    scale = repr(float(x.quantization.scale))  # Dequantize: (float)(scale as double × (value − zero point))
    expression = [f"const float out = (float)({scale} * (double)((int32_t)in - ({x.quantization.zero_point})));"]
    return elementwise(op, x, y, "int8_t", "float", expression, "")


def _logistic(graph: Graph, op: Operator) -> Lowered:
    """LOGISTIC: for int8, TFLite's reference kernel looks up a 256-entry table it fills at prepare
    time in float (activations.cc, PopulateLookupTable with 1 / (1 + exp(-x))); the same table is
    computed here, at import, into flash."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    require_int8(op, x, y)
    if y.quantization.zero_point != -128 or y.quantization.scale != float(np.float32(1.0 / 256)):
        raise refuse(op, "an int8 logistic's output must have scale 1/256 and zero point -128 (as TFLite requires)")
    table = q.logistic_table(x.quantization.scale, x.quantization.zero_point, y.quantization.scale,
                             y.quantization.zero_point)
    count = int(np.prod(x.shape))
    body = [f"  for (int32_t i = 0; i < {count}; ++i) output_[i] = table_[(uint8_t)input_[i]];", "  return 0;"]
    operands = [Operand("int8_t*", "input_", x.index), Operand("int8_t*", "table_", constant=table),
                Operand("int8_t*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True, in_place=True)


RULES = {
    "ADD": _add,
    "MUL": _mul,
    "RELU": _relu,
    "RELU6": _relu6,
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "LOGISTIC": _logistic,
}
