"""Reductions over axes: MEAN and SUM by TFLite's QuantizedMeanOrSum, REDUCE_MAX and REDUCE_MIN,
REDUCE_ALL of bool tensors; ARG_MAX and ARG_MIN along one axis.

A SUM whose output is quantized otherwise than its input stays refused: TFLM rescales the int8/int16
sum by QuantizedMeanOrSum's integer arithmetic (as MEAN, without the 1/count), and no LiteRT kernel
computes that — its reference kernel reads a quantized SUM's tensors as uint8 whatever their type,
and its builtin kernel rescales in float (round(sum × scale + bias), TFLite's former arithmetic), a
step away from TFLM's at times. With one quantization for both, the rescale is by one, exact in both
arithmetics: compiled, and held to LiteRT's builtin kernel. REDUCE_ANY and REDUCE_PROD stay
refused: TFLM does not run them."""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import Graph, Operator, Tensor
from .base import REQUANTIZE_FUNCTION, Lowered, Operand, as_4d, c_clamp, constant_data, refuse, strides_of, tensor_at
from .unary import CTYPES, LIMITS, check_requantize, quantized


def _reduction(graph: Graph, op: Operator) -> tuple[Tensor, Tensor, tuple[int, ...], list[bool], int]:
    """(input, output, the input as 4-D, which of those dimensions are reduced, elements per output)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    quantized(op, x)
    quantized(op, y, (x.dtype,))
    return (x, y, *_geometry(graph, op, x, y))


def _geometry(graph: Graph, op: Operator, x: Tensor, y: Tensor) -> tuple[tuple[int, ...], list[bool], int]:
    """(the input as 4-D, which of those dimensions are reduced, elements per output) of the constant axes."""
    axes_tensor = tensor_at(graph, op, 1)
    rank = len(x.shape)
    if axes_tensor.dtype not in ("int32", "int64"):
        raise refuse(op, f"the axes {axes_tensor.describe()} are not int32 or int64")
    raw = [int(a) for a in constant_data(op, axes_tensor, axes_tensor.dtype).reshape(-1)]
    if any(not -rank <= a < rank for a in raw):
        raise refuse(op, f"axes {raw} are outside a rank-{rank} tensor")
    axes = sorted({int(a) % rank for a in raw}) if rank else []
    shape = as_4d(op, x.shape)
    reduced = [False] * (4 - rank) + [i in axes for i in range(rank)]
    count = int(np.prod([d for d, r in zip(shape, reduced) if r]))
    kept = tuple(1 if r else d for d, r in zip(shape, reduced))
    if int(np.prod(kept)) != int(np.prod(y.shape)) or count == 0:
        raise refuse(op, f"the output {y.describe()} is not {x.describe()} reduced over axes {axes}")
    return shape, reduced, count


def _loops(x: Tensor, y: Tensor, shape, reduced, start: str, accumulate: str, finish: list[str],
           ctype: str = "int32_t") -> list[str]:
    """For each output element (in order), `accumulate` every input element `v` it reduces into `acc`
    (starting at `start`; both of `ctype`), the reduced elements in the input's order; then `finish`
    computes `out`."""
    strides = strides_of(shape)
    outer = [f"for (int32_t o{d} = 0; o{d} < {1 if r else n}; ++o{d})" for d, (n, r) in enumerate(zip(shape, reduced))]
    inner = [f"for (int32_t r{d} = 0; r{d} < {n if r else 1}; ++r{d})" for d, (n, r) in enumerate(zip(shape, reduced))]
    index = " + ".join(f"(o{d} + r{d}) * {strides[d]}" for d in range(4))
    kept = strides_of(tuple(1 if r else n for n, r in zip(shape, reduced)))
    out = " + ".join(f"o{d} * {kept[d]}" for d in range(4))  # an index the pool analysis bounds
    return ["  " + " ".join(outer) + " {", f"    {ctype} acc = {start};",
            "    " + " ".join(inner) + " {", f"      const {ctype} v = input_[{index}];", f"      {accumulate}",
            "    }", *[f"    {line}".replace("*out++", f"output_[{out}]") for line in finish], "  }", "  return 0;"]


def _operands(x: Tensor, y: Tensor) -> list[Operand]:
    return [Operand(f"{CTYPES[x.dtype]}*", "input_", x.index), Operand(f"{CTYPES[y.dtype]}*", "output_", y.index)]


def _mean(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: TFLite's QuantizedMeanOrSum on every path — the zero-point-corrected int32 sum
    requantised by input/output scale with 1/count folded into the multiplier."""
    x, y, shape, reduced, count = _reduction(graph, op)
    multiplier, shift = q.quantize_multiplier(float(x.quantization.scale) / float(y.quantization.scale))
    fold = min(count.bit_length() - 1, 32, 31 + shift)
    multiplier, shift = int((multiplier << fold) // count), shift - fold
    lo, hi = LIMITS[y.dtype]
    finish = [f"acc = {REQUANTIZE_FUNCTION}(acc - ({x.quantization.zero_point}) * {count}, {multiplier}, {shift}) "
              f"+ ({y.quantization.zero_point});", f"*out++ = ({CTYPES[y.dtype]}){c_clamp('acc', lo, hi)};"]
    body = _loops(x, y, shape, reduced, "0", "acc += v;", finish)
    return Lowered(op, "", _operands(x, y), body, kernel=True)


def _sum(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: float32 summed from 0 in the input's order (TFLM's ReduceGeneric); int8/int16 by TFLite's QuantizedMeanOrSum where input and output share one quantization (the exact sum, clamped); a rescaling int8/int16 SUM refused (no LiteRT kernel computes TFLM's integer rescale)."""
    if tensor_at(graph, op, 0).dtype == "float32":
        return _float_sum(graph, op)
    x, y, shape, reduced, count = _reduction(graph, op)
    if x.quantization != y.quantization:
        raise refuse(op, "a SUM that rescales (its output quantized otherwise than its input) is not compiled: "
                         "TFLM's integer rescale, which no LiteRT kernel computes (its reference reads a quantized "
                         "SUM's tensors as uint8; its builtin one rescales in float, a step off at times)")
    multiplier, shift = q.quantize_multiplier(1.0)  # TFLite's rescale by one: exact
    lo, hi = LIMITS[x.dtype]
    zero_point = x.quantization.zero_point
    check_requantize(op, count * max(hi - zero_point, zero_point - lo), shift)
    finish = [f"acc = {REQUANTIZE_FUNCTION}(acc - ({zero_point}) * {count}, {multiplier}, {shift}) + ({zero_point});",
              f"*out++ = ({CTYPES[y.dtype]}){c_clamp('acc', lo, hi)};"]
    body = _loops(x, y, shape, reduced, "0", "acc += v;", finish)
    return Lowered(op, "", _operands(x, y), body, kernel=True)


def _float_sum(graph: Graph, op: Operator) -> Lowered:
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if y.dtype != "float32":
        raise refuse(op, f"the output {y.describe()} is not float32 as its input is")
    if x.is_constant:
        raise refuse(op, f"the constant input {x.describe()} is not supported (the converter folds it)")
    shape, reduced, _ = _geometry(graph, op, x, y)
    body = _loops(x, y, shape, reduced, "0.0f", "acc += v;", ["*out++ = acc;"], ctype="float")
    return Lowered(op, "", _operands(x, y), body, kernel=True)


def _max_or_min(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: the largest (smallest) element, input and output of one quantization (as TFLite
    requires)."""
    x, y, shape, reduced, _ = _reduction(graph, op)
    if x.quantization != y.quantization:
        raise refuse(op, "the input and the output must share one quantization (as TFLite requires)")
    lo, hi = LIMITS[x.dtype]
    better = ">" if op.name == "REDUCE_MAX" else "<"
    body = _loops(x, y, shape, reduced, str(lo if op.name == "REDUCE_MAX" else hi),
                  f"if (v {better} acc) acc = v;", [f"*out++ = ({CTYPES[y.dtype]})acc;"])
    return Lowered(op, "", _operands(x, y), body, kernel=True)


def _reduce_all(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: bool (one byte, 0 or 1) AND over the axes, from true (TFLM's REDUCE_ALL)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    for t in (x, y):
        if t.dtype != "bool":
            raise refuse(op, f"{t.describe()} is not bool (TFLite's REDUCE_ALL reduces bool tensors)")
    if x.is_constant:
        raise refuse(op, f"the constant input {x.describe()} is not supported (the converter folds it)")
    shape, reduced, _ = _geometry(graph, op, x, y)
    body = _loops(x, y, shape, reduced, "1", "acc = acc && v;", ["*out++ = (uint8_t)acc;"])
    operands = [Operand("uint8_t*", "input_", x.index), Operand("uint8_t*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


def _arg_max_or_min(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: TFLite's reference ArgMinMax — along the constant axis, the index of the first
    largest (smallest) element (a later one must be strictly greater, or less), int8 in, int32 out."""
    x, axis_tensor, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    if x.dtype != "int8":  # LiteRT's ARG_MAX and ARG_MIN take no int16
        raise refuse(op, f"tensor {x.describe()} is {x.dtype}; only int8 inputs are supported for {op.name}")
    quantized(op, x, ("int8",))
    if y.dtype != "int32":  # int64: no graph output of that type, nor an operator mlfbuild compiles, takes it
        raise refuse(op, f"the output {y.describe()} is {y.dtype}; only int32 indices are supported")
    if axis_tensor.dtype not in ("int32", "int64"):
        raise refuse(op, f"the axis {axis_tensor.describe()} is not int32 or int64")
    values = [int(a) for a in constant_data(op, axis_tensor, axis_tensor.dtype).reshape(-1)]
    rank = len(x.shape)
    if len(values) != 1 or not -rank <= values[0] < rank:
        raise refuse(op, f"the axis {values} is not one axis of a rank-{rank} tensor")
    axis = values[0] % rank
    outer, size, inner = (int(np.prod(x.shape[:axis])), int(x.shape[axis]), int(np.prod(x.shape[axis + 1:])))
    if tuple(y.shape) != tuple(x.shape[:axis]) + tuple(x.shape[axis + 1:]) or size == 0:
        raise refuse(op, f"the output {y.describe()} is not {x.describe()} without axis {axis}")
    if outer * size * inner >= 2 ** 31:
        raise refuse(op, f"tensor {x.describe()} is too large for 32-bit indices")
    better = ">" if op.name == "ARG_MAX" else "<"
    ctype = "int32_t"
    body = [f"  for (int32_t o = 0; o < {outer}; ++o)",
            f"    for (int32_t n = 0; n < {inner}; ++n) {{",
            f"      int32_t best = input_[o * {size * inner} + n];",
            "      int32_t at = 0;",
            f"      for (int32_t i = 1; i < {size}; ++i) {{",
            f"        const int32_t v = input_[(o * {size} + i) * {inner} + n];",
            f"        if (v {better} best) {{",
            "          best = v;",
            "          at = i;",
            "        }",
            "      }",
            f"      output_[o * {inner} + n] = ({ctype})at;",
            "    }",
            "  return 0;"]
    operands = [Operand(f"{CTYPES[x.dtype]}*", "input_", x.index), Operand(f"{ctype}*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


RULES = {
    "ARG_MAX": _arg_max_or_min,
    "ARG_MIN": _arg_max_or_min,
    "MEAN": _mean,
    "REDUCE_ALL": _reduce_all,
    "REDUCE_MAX": _max_or_min,
    "REDUCE_MIN": _max_or_min,
    "SUM": _sum,
}
