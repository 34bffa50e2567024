"""Element-wise operators: CMSIS-NN's add and mul (the activations, QUANTIZE and DEQUANTIZE: unary.py)."""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import Graph, Operator, Tensor
from .base import (
    Lowered,
    Operand,
    bare_call,
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


RULES = {
    "ADD": _add,
    "MUL": _mul,
}
