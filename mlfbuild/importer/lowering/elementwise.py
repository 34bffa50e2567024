"""Element-wise operators of two or three operands beyond ADD, SUB and MUL (binary.py): MAXIMUM,
MINIMUM, SQUARED_DIFFERENCE, PRELU, the comparisons and SELECT_V2 — and the broadcasting every
element-wise kernel of ours shares (`broadcast_loop`, `broadcast_kernel`): a loop over the output's
elements, each operand read through strides that are 0 along its broadcast dimensions (computed at
import), constants as constant arrays, the output written at its own index (which the memory
re-planner proves)."""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import Graph, Operator, Tensor
from .base import (
    REQUANTIZE_FUNCTION,
    Lowered,
    Operand,
    c_clamp,
    refuse,
    require_int8,
    strides_of,
    tensor_at,
)

MAX_BROADCAST_RANK = 6  # TFLite's broadcasting kernels take up to 6 dimensions


def broadcast_loop(shapes: list[tuple[int, ...]], out: tuple[int, ...], element: list[str], out_type: str) -> list[str]:
    """A loop over the output's elements: `x1`, `x2`, ... read from input1_, input2_, ... (each through
    strides that are 0 along its broadcast dimensions, computed at import), `element` computing `out`
    from them, written at the output's own index (an indexed access the memory re-planner proves)."""
    rank = len(out)

    def steps(shape: tuple[int, ...]) -> list[int]:  # per output dimension; 0 where the operand is broadcast
        padded = (1,) * (rank - len(shape)) + tuple(shape)
        return [0 if n == 1 else s for n, s in zip(padded, strides_of(padded))]

    def index(s: list[int] | tuple[int, ...]) -> str:
        return " + ".join(f"i{d} * {s[d]}" for d in range(rank) if s[d] and out[d] > 1) or "0"
    loops = " ".join(f"for (int32_t i{d} = 0; i{d} < {n}; ++i{d})" for d, n in enumerate(out))
    reads = [f"    const int32_t x{k + 1} = input{k + 1}_[{index(steps(shape))}];" for k, shape in enumerate(shapes)]
    return [f"  {loops} {{", *reads, *[f"    {line}" for line in element],
            f"    output_[{index(strides_of(tuple(out)))}] = ({out_type})out;", "  }", "  return 0;"]


def _broadcast_shape(op: Operator, *tensors: Tensor) -> tuple[int, ...]:
    try:
        shape = tuple(np.broadcast_shapes(*(t.shape for t in tensors)))
    except ValueError:
        raise refuse(op, f"{', '.join(t.describe() for t in tensors)} do not broadcast together") from None
    if len(shape) > MAX_BROADCAST_RANK:
        raise refuse(op, f"rank {len(shape)} is more than TFLite's {MAX_BROADCAST_RANK}")
    return shape


def broadcast_kernel(op: Operator, inputs: list[Tensor], y: Tensor, element: list[str], in_types: list[str],
            out_type: str) -> Lowered:
    """Our broadcasting kernel over `inputs` (constants as constant arrays) into `y`."""
    if all(t.is_constant for t in inputs):
        raise refuse(op, "every operand is a constant (the converter folds such operators)")
    if _broadcast_shape(op, *inputs) != tuple(y.shape):
        raise refuse(op, f"the output {y.describe()} is not the broadcast shape of its inputs")
    operands = [Operand(f"{ctype}*", f"input{k}_", constant=np.ascontiguousarray(t.data)) if t.is_constant
                else Operand(f"{ctype}*", f"input{k}_", t.index)
                for k, (t, ctype) in enumerate(zip(inputs, in_types), start=1)]
    operands.append(Operand(f"{out_type}*", "output_", y.index))
    return Lowered(op, "", operands, broadcast_loop([t.shape for t in inputs], tuple(y.shape), element, out_type),
                   kernel=True)


def _maximum_minimum(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: the larger (smaller) stored value, broadcasting (TFLite's MaximumMinimum compares
    the quantized values as they are, so both inputs and the output share one quantization)."""
    a, b, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, a, b, y)
    if not a.quantization == b.quantization == y.quantization:
        raise refuse(op, "the inputs and the output must share one quantization")
    better = ">" if op.name == "MAXIMUM" else "<"
    return broadcast_kernel(op, [a, b], y, [f"const int32_t out = x1 {better} x2 ? x1 : x2;"], ["int8_t"] * 2, "int8_t")


def _squared_difference(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 (x1 − x2)², both rescaled to twice the larger scale after a 2^7 shift, as
    TFLite's reference squared_difference (multipliers from doubles), broadcasting."""
    a, b, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, a, b, y)
    left = 7
    twice = 2.0 * max(float(a.quantization.scale), float(b.quantization.scale))
    m1, s1 = q.quantize_multiplier(float(a.quantization.scale) / twice)
    m2, s2 = q.quantize_multiplier(float(b.quantization.scale) / twice)
    # (1 << 14) * output scale is a float product in TFLite's prepare, widened to double for the division
    mo, so = q.quantize_multiplier(twice * twice / float(np.float32(1 << left * 2) * np.float32(y.quantization.scale)))
    za, zb, zy = -a.quantization.zero_point, -b.quantization.zero_point, y.quantization.zero_point
    element = [f"const int32_t d1 = {REQUANTIZE_FUNCTION}((x1 + ({za})) * {1 << left}, {m1}, {s1});",
               f"const int32_t d2 = {REQUANTIZE_FUNCTION}((x2 + ({zb})) * {1 << left}, {m2}, {s2});",
               f"const int32_t raw = {REQUANTIZE_FUNCTION}((d1 - d2) * (d1 - d2), {mo}, {so}) + ({zy});",
               f"const int32_t out = {c_clamp('raw', -128, 127)};"]
    return broadcast_kernel(op, [a, b], y, element, ["int8_t"] * 2, "int8_t")


def _prelu(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 x ≥ 0 rescaled by input/output, x < 0 times alpha rescaled by input × alpha
    / output (TFLite's reference Prelu, its multipliers from doubles), alpha broadcast."""
    x, alpha, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, x, alpha, y)
    m1, s1 = q.quantize_multiplier(float(x.quantization.scale) / float(y.quantization.scale))
    m2, s2 = q.quantize_multiplier(float(x.quantization.scale) * float(alpha.quantization.scale)
                                   / float(y.quantization.scale))
    element = [f"const int32_t v = x1 + ({-x.quantization.zero_point});",
               f"const int32_t raw = (v >= 0 ? {REQUANTIZE_FUNCTION}(v, {m1}, {s1}) : "
               f"{REQUANTIZE_FUNCTION}(v * (x2 + ({-alpha.quantization.zero_point})), {m2}, {s2})) + "
               f"({y.quantization.zero_point});", f"const int32_t out = {c_clamp('raw', -128, 127)};"]
    return broadcast_kernel(op, [x, alpha], y, element, ["int8_t"] * 2, "int8_t")


_COMPARISONS = {"EQUAL": "==", "NOT_EQUAL": "!=", "LESS": "<", "LESS_EQUAL": "<=", "GREATER": ">",
                "GREATER_EQUAL": ">="}
COMPARISON_LEFT_SHIFT = 8  # TFLite's comparisons.cc scales quantized inputs by 2^8 before rescaling


def _comparison(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 inputs each rescaled by its own scale after a 2^8 shift, compared (TFLite's
    ComparisonWithScaling), a bool output, broadcasting."""
    a, b, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, a, b)
    if y.dtype != "bool":
        raise refuse(op, f"the output {y.describe()} is not bool")
    scaled = []
    for k, t in enumerate((a, b), start=1):
        if not t.quantization.scale < 1.0:
            raise refuse(op, f"{t.describe()}'s scale {t.quantization.scale} is not below 1 (as TFLite requires)")
        m, s = q.quantize_multiplier(float(t.quantization.scale))
        scaled.append(f"const int32_t s{k} = {REQUANTIZE_FUNCTION}((x{k} + ({-t.quantization.zero_point})) * "
                      f"{1 << COMPARISON_LEFT_SHIFT}, {m}, {s});")
    element = scaled + [f"const int32_t out = s1 {_COMPARISONS[op.name]} s2;"]
    return broadcast_kernel(op, [a, b], y, element, ["int8_t"] * 2, "uint8_t")


def _select(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: the element of x where the condition holds, else of y (TFLite's Select, values
    as they are: x, y and the output share one quantization), broadcasting all three."""
    condition, a, b = (tensor_at(graph, op, i) for i in range(3))
    y = tensor_at(graph, op, 0, output=True)
    if condition.dtype != "bool":
        raise refuse(op, f"the condition {condition.describe()} is not bool")
    require_int8(op, a, b, y)
    if not a.quantization == b.quantization == y.quantization:
        raise refuse(op, "both values and the output must share one quantization")
    return broadcast_kernel(op, [condition, a, b], y, ["const int32_t out = x1 ? x2 : x3;"], ["uint8_t", "int8_t", "int8_t"],
                   "int8_t")


RULES = {
    "MAXIMUM": _maximum_minimum,
    "MINIMUM": _maximum_minimum,
    "SQUARED_DIFFERENCE": _squared_difference,
    "PRELU": _prelu,
    **{name: _comparison for name in _COMPARISONS},
    "SELECT_V2": _select,
}
