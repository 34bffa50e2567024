"""Binary element-wise operators: ADD, SUB and MUL, with TFLite's broadcasting and constant operands.

Operands of one shape go to CMSIS-NN's element-wise kernels (constants as constant arrays); others are
a kernel of ours over the output's elements, each operand read through strides that are 0 along its
broadcast dimensions (computed at import), with the arithmetic of TFLite's reference integer kernels
(add.h / sub.h / mul.h: two inputs rescaled to twice the larger scale after a 2^20 shift for ADD and
SUB, one multiplier for MUL)."""

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
    fused_activation_range,
    refuse,
    require_int8,
    strides_of,
    tensor_at,
)

MAX_BROADCAST_RANK = 6  # TFLite's broadcasting kernels take up to 6 dimensions


def _operands(graph: Graph, op: Operator) -> tuple[Tensor, Tensor, Tensor]:
    a, b, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, a, b, y)
    try:
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise refuse(op, f"{a.describe()} and {b.describe()} do not broadcast together") from None
    if shape != y.shape:
        raise refuse(op, f"the output {y.describe()} is not the broadcast shape {list(shape)}")
    if len(shape) > MAX_BROADCAST_RANK:
        raise refuse(op, f"rank {len(shape)} is more than TFLite's {MAX_BROADCAST_RANK}")
    if a.is_constant and b.is_constant:
        raise refuse(op, "both operands are constants (the converter folds such operators)")
    return a, b, y


def _operand(t: Tensor, param: str) -> Operand:
    """A graph tensor, or a constant's values as a constant array of the code."""
    if t.is_constant:
        return Operand("int8_t*", param, constant=np.ascontiguousarray(t.data.astype(np.int8)))
    return Operand("int8_t*", param, t.index)


def _lowered(op: Operator, a: Tensor, b: Tensor, y: Tensor, element: list[str], function: str = "",
             call: str = "") -> Lowered:
    """CMSIS-NN's `call` for operands of one shape; else (or without a call) a loop over the output
    computing `out` from `x1`, `x2`."""
    operands = [_operand(a, "input1_"), _operand(b, "input2_"), Operand("int8_t*", "output_", y.index)]
    same = a.shape == b.shape
    if same and call:
        return Lowered(op, function, operands, bare_call(call), in_place=True)
    return Lowered(op, "", operands, _broadcast_loop(a.shape, b.shape, y.shape, element), kernel=True,
                   in_place=same)


def _broadcast_loop(a: tuple[int, ...], b: tuple[int, ...], out: tuple[int, ...], element: list[str]) -> list[str]:
    rank = len(out)
    def steps(shape: tuple[int, ...]) -> list[int]:  # per output dimension; 0 where the operand is broadcast
        padded = (1,) * (rank - len(shape)) + tuple(shape)
        return [0 if n == 1 else s for n, s in zip(padded, strides_of(padded))]
    sa, sb = steps(a), steps(b)
    loops = " ".join(f"for (int32_t i{d} = 0; i{d} < {n}; ++i{d})" for d, n in enumerate(out))
    index = lambda s: " + ".join(f"i{d} * {s[d]}" for d in range(rank) if s[d]) or "0"  # noqa: E731
    return ["  int8_t* out_ = output_;", f"  {loops} {{", f"    const int32_t x1 = input1_[{index(sa)}];",
            f"    const int32_t x2 = input2_[{index(sb)}];", *[f"    {line}" for line in element],
            "    *out_++ = (int8_t)out;", "  }", "  return 0;"]


def _add_or_sub(graph: Graph, op: Operator) -> Lowered:
    """ADD: `arm_elementwise_add_s8` (operands of one shape), broadcasting: mlfbuild kernel; SUB:
    mlfbuild kernel (TFLite's reference sub: the second input's rescale rounded as a positive product,
    which CMSIS-NN's add with a negated multiplier would round otherwise at ties)."""
    a, b, y = _operands(graph, op)
    p = q.add_parameters(a.quantization.scale, b.quantization.scale, y.quantization.scale)
    lo, hi = fused_activation_range(op, y)
    sign = "-" if op.name == "SUB" else "+"
    shifted = f"* (1 << {p['left_shift']})"
    element = [f"const int32_t s1 = {REQUANTIZE_FUNCTION}((x1 + ({-a.quantization.zero_point})) {shifted}, "
               f"{p['input1_mult']}, {p['input1_shift']});",
               f"const int32_t s2 = {REQUANTIZE_FUNCTION}((x2 + ({-b.quantization.zero_point})) {shifted}, "
               f"{p['input2_mult']}, {p['input2_shift']});",
               f"const int32_t raw = {REQUANTIZE_FUNCTION}(s1 {sign} s2, {p['out_mult']}, {p['out_shift']}) + "
               f"({y.quantization.zero_point});", f"const int32_t out = {c_clamp('raw', lo, hi)};"]
    if op.name == "SUB":
        return _lowered(op, a, b, y, element)
    call = (f"arm_elementwise_add_s8(input1_, input2_, {-a.quantization.zero_point}, {p['input1_mult']}, "
            f"{p['input1_shift']}, {-b.quantization.zero_point}, {p['input2_mult']}, {p['input2_shift']}, "
            f"{p['left_shift']}, output_, {y.quantization.zero_point}, {p['out_mult']}, {p['out_shift']}, "
            f"{lo}, {hi}, {int(np.prod(y.shape))})")
    return _lowered(op, a, b, y, element, "arm_elementwise_add_s8", call)


def _mul(graph: Graph, op: Operator) -> Lowered:
    """`arm_elementwise_mul_s8` (operands of one shape); broadcasting: mlfbuild kernel, TFLite's
    reference mul arithmetic."""
    a, b, y = _operands(graph, op)
    multiplier, shift = q.mul_multiplier(a.quantization.scale, b.quantization.scale, y.quantization.scale)
    lo, hi = fused_activation_range(op, y)
    element = [f"const int32_t raw = {REQUANTIZE_FUNCTION}((x1 + ({-a.quantization.zero_point})) * "
               f"(x2 + ({-b.quantization.zero_point})), {multiplier}, {shift}) + ({y.quantization.zero_point});",
               f"const int32_t out = {c_clamp('raw', lo, hi)};"]
    call = (f"arm_elementwise_mul_s8(input1_, input2_, {-a.quantization.zero_point}, {-b.quantization.zero_point}, "
            f"output_, {y.quantization.zero_point}, {multiplier}, {shift}, {lo}, {hi}, {int(np.prod(y.shape))})")
    return _lowered(op, a, b, y, element, "arm_elementwise_mul_s8", call)


RULES = {
    "ADD": _add_or_sub,
    "SUB": _add_or_sub,
    "MUL": _mul,
}
