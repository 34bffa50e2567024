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
    return Lowered(op, "", operands, broadcast_loop([a.shape, b.shape], y.shape, element, "int8_t"), kernel=True,
                   in_place=same)


def broadcast_loop(shapes: list[tuple[int, ...]], out: tuple[int, ...], element: list[str], out_type: str) -> list[str]:
    """A loop over the output's elements: `x1`, `x2`, ... read from input1_, input2_, ... (each through
    strides that are 0 along its broadcast dimensions), `element` computing `out` from them."""
    rank = len(out)

    def steps(shape: tuple[int, ...]) -> list[int]:  # per output dimension; 0 where the operand is broadcast
        padded = (1,) * (rank - len(shape)) + tuple(shape)
        return [0 if n == 1 else s for n, s in zip(padded, strides_of(padded))]

    def index(s: list[int]) -> str:
        return " + ".join(f"i{d} * {s[d]}" for d in range(rank) if s[d]) or "0"
    loops = " ".join(f"for (int32_t i{d} = 0; i{d} < {n}; ++i{d})" for d, n in enumerate(out))
    reads = [f"    const int32_t x{k + 1} = input{k + 1}_[{index(steps(shape))}];" for k, shape in enumerate(shapes)]
    return [f"  {out_type}* out_ = output_;", f"  {loops} {{", *reads, *[f"    {line}" for line in element],
            f"    *out_++ = ({out_type})out;", "  }", "  return 0;"]


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


def _broadcast_shape(op: Operator, *tensors: Tensor) -> tuple[int, ...]:
    try:
        shape = tuple(np.broadcast_shapes(*(t.shape for t in tensors)))
    except ValueError:
        raise refuse(op, f"{', '.join(t.describe() for t in tensors)} do not broadcast together") from None
    if len(shape) > MAX_BROADCAST_RANK:
        raise refuse(op, f"rank {len(shape)} is more than TFLite's {MAX_BROADCAST_RANK}")
    return shape


def _kernel(op: Operator, inputs: list[Tensor], y: Tensor, element: list[str], in_types: list[str],
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
    return _kernel(op, [a, b], y, [f"const int32_t out = x1 {better} x2 ? x1 : x2;"], ["int8_t"] * 2, "int8_t")


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
    return _kernel(op, [a, b], y, element, ["int8_t"] * 2, "int8_t")


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
    return _kernel(op, [x, alpha], y, element, ["int8_t"] * 2, "int8_t")


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
    return _kernel(op, [a, b], y, element, ["int8_t"] * 2, "uint8_t")


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
    return _kernel(op, [condition, a, b], y, ["const int32_t out = x1 ? x2 : x3;"], ["uint8_t", "int8_t", "int8_t"],
                   "int8_t")


RULES = {
    "MAXIMUM": _maximum_minimum,
    "MINIMUM": _maximum_minimum,
    "SQUARED_DIFFERENCE": _squared_difference,
    "PRELU": _prelu,
    **{name: _comparison for name in _COMPARISONS},
    "SELECT_V2": _select,
    "ADD": _add_or_sub,
    "SUB": _add_or_sub,
    "MUL": _mul,
}
