"""Element-wise operators: CMSIS-NN's add and mul; activations, quantize and dequantize as small kernels."""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import Graph, Operator, Tensor
from . import unary
from .base import (
    REQUANTIZE_FUNCTION,
    Lowered,
    Operand,
    bare_call,
    c_clamp,
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


def _relu(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8/int16 rescaled to the output (TFLite's QuantizedReluX), clamped below at the quantized 0."""
    return unary.relu_x(graph, op, 0.0, None)


def _relu6(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8/int16 rescaled to the output (TFLite's QuantizedReluX), clamped to the quantized 0 and 6."""
    return unary.relu_x(graph, op, 0.0, 6.0)


def _quantize(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: float32 → int8/int16 (TFLite's AffineQuantize, in float), or a requantization between int8 and int16 (TFLite's Requantize)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if y.dtype not in ("int8", "int16") or y.quantization is None or y.quantization.per_channel:
        raise refuse(op, f"only quantization to per-tensor int8 or int16 is supported, not {y.describe()}")
    unary.quantized(op, y)
    zp, (qmin, qmax) = y.quantization.zero_point, unary.LIMITS[y.dtype]
    ctype = unary.CTYPES[y.dtype]
    if x.dtype == "float32":
        # AffineQuantize: roundf(value / (float)scale) + zero point, clamped (the integer part clamped
        # before the conversion: the same result, and no out-of-range float to int conversion in C)
        scale = repr(float(y.quantization.scale))
        expression = [f"const float rounded = roundf(in / {scale}f);",
                      f"const {ctype} out = rounded != rounded ? ({ctype})({zp}) : (rounded < {float(qmin - zp)!r}f ? {qmin} : "
                      f"(rounded > {float(qmax - zp)!r}f ? {qmax} : ({ctype})((int32_t)rounded + ({zp}))));"]
        return unary.loop(op, x, y, expression, in_place=False)
    unary.quantized(op, x)
    multiplier, shift = q.quantize_multiplier(float(x.quantization.scale) / float(y.quantization.scale))
    unary.check_requantize(op, 1 << (8 if x.dtype == "int8" else 16), shift)
    expression = [f"const int32_t scaled = {REQUANTIZE_FUNCTION}((int32_t)in - ({x.quantization.zero_point}), "
                  f"{multiplier}, {shift}) + ({zp});", f"const {ctype} out = ({ctype}){c_clamp('scaled', qmin, qmax)};"]
    return unary.loop(op, x, y, expression)


def _dequantize(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8/int16 → float32 (TFLite's Dequantize)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    unary.quantized(op, x)
    if y.dtype != "float32":
        raise refuse(op, f"only dequantization to float32 is supported, not {y.describe()}")
    scale = repr(float(x.quantization.scale))  # Dequantize: (float)(scale as double × (value − zero point))
    expression = [f"const float out = (float)({scale} * (double)((int32_t)in - ({x.quantization.zero_point})));"]
    return unary.loop(op, x, y, expression, in_place=False)


def _logistic(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 through TFLite's 256-entry table (1 / (1 + expf(−x)), filled at import); int16 by TFLite's interpolated sigmoid table.

    TFLite's reference kernel fills the int8 table at prepare time in float (PopulateLookupTable);
    the same table is computed here, at import, into flash. int16: lowering/unary.py."""
    x = tensor_at(graph, op, 0)
    if x.dtype == "int16":
        return unary.logistic_int16(graph, op)
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
