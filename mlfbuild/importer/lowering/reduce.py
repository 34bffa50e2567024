"""Reductions over axes."""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import Graph, Operator
from .base import (
    REQUANTIZE_FUNCTION,
    Lowered,
    as_4d,
    c_clamp,
    constant_data,
    io_operands,
    refuse,
    require_int8,
    strides_of,
    tensor_at,
)


def _mean(graph: Graph, op: Operator) -> Lowered:
    """MEAN as LiteRT's reduce.cc dispatches it for int8: keep_dims over H and W of a 4-D tensor →
    reference_integer_ops::Mean (requantise the zero-point-corrected sum, then divide rounding half
    away); else, with one quantization in and out → reference_ops::Mean (the raw sum divided,
    truncating); else → QuantizedMeanOrSum (the rescale's multiplier takes 1/count in, up to 2^32)."""
    x, axes_tensor, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, x, y)
    rank = len(x.shape)
    axes = sorted({int(a) % rank for a in constant_data(op, axes_tensor, "int32").reshape(-1)} if rank else set())
    shape = as_4d(op, x.shape)
    reduced = [False] * (4 - rank) + [i in axes for i in range(rank)]
    count = int(np.prod([d for d, r in zip(shape, reduced) if r]))
    kept = tuple(1 if r else d for d, r in zip(shape, reduced))
    if int(np.prod(kept)) != int(np.prod(y.shape)) or count == 0:
        raise refuse(op, f"the output {y.describe()} is not the mean of {x.describe()} over axes {axes}")
    in_zp, out_zp = x.quantization.zero_point, y.quantization.zero_point
    if op.options.get("keep_dims") and rank == 4 and axes == [1, 2]:
        multiplier, shift = q.quantize_multiplier(float(x.quantization.scale) / float(y.quantization.scale))
        accumulate = f"(int32_t)input_[i] - ({in_zp})"
        finish = [f"sum = {REQUANTIZE_FUNCTION}(sum, {multiplier}, {shift});",
                  f"sum = (sum > 0 ? sum + {count // 2} : sum - {count // 2}) / {count} + ({out_zp});",
                  f"*out++ = (int8_t){c_clamp('sum', -128, 127)};"]
    elif x.quantization == y.quantization:
        accumulate = "(int32_t)input_[i]"
        finish = [f"*out++ = (int8_t)(sum / {count});"]
    else:  # QuantizedMeanOrSum: the input/output rescale with 1/count folded into its multiplier
        multiplier, shift = q.quantize_multiplier(float(x.quantization.scale) / float(y.quantization.scale))
        fold = min(count.bit_length() - 1, 32, 31 + shift)
        multiplier, shift = int((multiplier << fold) // count), shift - fold
        accumulate = "(int32_t)input_[i]"
        finish = [f"sum = {REQUANTIZE_FUNCTION}(sum - ({in_zp}) * {count}, {multiplier}, {shift}) + ({out_zp});",
                  f"*out++ = (int8_t){c_clamp('sum', -128, 127)};"]
    strides = strides_of(shape)
    outer = [f"for (int32_t o{d} = 0; o{d} < {1 if r else n}; ++o{d})" for d, (n, r) in enumerate(zip(shape, reduced))]
    inner = [f"for (int32_t r{d} = 0; r{d} < {n if r else 1}; ++r{d})" for d, (n, r) in enumerate(zip(shape, reduced))]
    index = " + ".join(f"(o{d} + r{d}) * {strides[d]}" for d in range(4))
    body = ["  int8_t* out = output_;", "  " + " ".join(outer) + " {", "    int32_t sum = 0;",
            "    " + " ".join(inner) + " {", f"      const int32_t i = {index};", f"      sum += {accumulate};",
            "    }", *[f"    {line}" for line in finish], "  }", "  return 0;"]
    return Lowered(op, "", list(io_operands(graph, op)), body, kernel=True)


RULES = {
    "MEAN": _mean,
}
