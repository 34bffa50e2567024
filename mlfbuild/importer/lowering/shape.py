"""Operators that move bytes without arithmetic: reshapes (no code), pads, transposes, concatenations."""

from __future__ import annotations

import numpy as np

from ..tflite import ACTIVATIONS, Graph, Operator
from .base import (
    Lowered,
    Operand,
    as_4d,
    constant_data,
    io_operands,
    refuse,
    require_int8,
    same_quantization,
    strides_of,
    tensor_at,
)


def _reshape(graph: Graph, op: Operator) -> Lowered:
    """nothing: the output is the input's bytes (a copy where the output is a graph output)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if x.dtype != y.dtype or x.nbytes != y.nbytes:
        raise refuse(op, f"{x.describe()} cannot be viewed as {y.describe()}")
    same_quantization(op, x, y)
    if x.is_constant:
        raise refuse(op, f"a reshape of the constant {x.describe()} is not supported")
    if y.index in graph.outputs:  # a graph output has its own bytes (the application's)
        body = [f"  memcpy(output_, input_, {y.nbytes});", "  return 0;"]
        return Lowered(op, "", list(io_operands(graph, op)), body, kernel=True)
    return Lowered(op, "", alias_of=x.index)


def _pad(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: constant padding with the zero point (PAD) or the given value (PADV2), rank ≤ 4."""
    x, paddings, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, x, y)
    same_quantization(op, x, y)
    pads = constant_data(op, paddings, paddings.dtype).astype(np.int64).reshape(-1, 2)
    if pads.shape[0] != len(x.shape) or (pads < 0).any():
        raise refuse(op, "the paddings must be one non-negative (before, after) pair per dimension")
    value = y.quantization.zero_point
    if op.name == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        value = int(constant_data(op, graph.tensors[op.inputs[2]], "int8").reshape(-1)[0])
    if tuple(int(d + a + b) for d, (a, b) in zip(x.shape, pads)) != y.shape:
        raise refuse(op, f"the output {y.describe()} is not the padded input")
    src, dst = as_4d(op, x.shape), as_4d(op, y.shape)
    before = (0,) * (4 - len(x.shape)) + tuple(int(a) for a, _ in pads)
    out_strides = strides_of(dst)
    offset = sum(b * s for b, s in zip(before, out_strides))
    body = [f"  memset(output_, {value}, {int(np.prod(dst))});",
            f"  for (int32_t a = 0; a < {src[0]}; ++a)", f"    for (int32_t b = 0; b < {src[1]}; ++b)",
            f"      for (int32_t c = 0; c < {src[2]}; ++c)",
            f"        memcpy(output_ + {offset} + a * {out_strides[0]} + b * {out_strides[1]} + c * {out_strides[2]}, "
            f"input_ + ((a * {src[1]} + b) * {src[2]} + c) * {src[3]}, {src[3]});", "  return 0;"]
    return Lowered(op, "", list(io_operands(graph, op)), body, kernel=True)


def _transpose(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: any permutation, rank ≤ 4."""
    x, perm_tensor, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, x, y)
    same_quantization(op, x, y)
    perm = [int(v) for v in constant_data(op, perm_tensor, perm_tensor.dtype).reshape(-1)]
    if sorted(perm) != list(range(len(x.shape))) or tuple(x.shape[p] for p in perm) != y.shape:
        raise refuse(op, f"permutation {perm} does not turn {x.describe()} into {y.describe()}")
    shift = 4 - len(perm)
    perm4 = list(range(shift)) + [p + shift for p in perm]
    out4, in_strides = as_4d(op, y.shape), strides_of(as_4d(op, x.shape))
    strides = [in_strides[p] for p in perm4]  # input stride of each output dimension
    body = ["  int8_t* out = output_;", f"  for (int32_t a = 0; a < {out4[0]}; ++a)",
            f"    for (int32_t b = 0; b < {out4[1]}; ++b)", f"      for (int32_t c = 0; c < {out4[2]}; ++c)",
            f"        for (int32_t d = 0; d < {out4[3]}; ++d)",
            f"          *out++ = input_[a * {strides[0]} + b * {strides[1]} + c * {strides[2]} + d * {strides[3]}];",
            "  return 0;"]
    return Lowered(op, "", list(io_operands(graph, op)), body, kernel=True)


def _concatenation(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: copies along any axis; every input of the output's quantization (as TFLite requires
    for int8)."""
    inputs = [tensor_at(graph, op, i) for i in range(len(op.inputs))]
    y = tensor_at(graph, op, 0, output=True)
    require_int8(op, y, *inputs)
    same_quantization(op, y, *inputs)
    if ACTIVATIONS.get(op.options.get("activation", 0)) != "NONE":
        raise refuse(op, "a fused activation on CONCATENATION is not supported")
    axis = op.options["axis"] % max(len(y.shape), 1)
    outer = int(np.prod(y.shape[:axis]))
    widths = [int(np.prod(t.shape[axis:])) for t in inputs]
    if sum(widths) * outer != int(np.prod(y.shape)) or any(t.shape[:axis] != y.shape[:axis] for t in inputs):
        raise refuse(op, "the inputs do not concatenate into the output")
    operands, lines, position = [], [f"  for (int32_t o = 0; o < {outer}; ++o) {{"], 0
    for i, (tensor, width) in enumerate(zip(inputs, widths)):
        operands.append(Operand("int8_t*", f"input{i}_", tensor.index))
        lines.append(f"    memcpy(output_ + o * {sum(widths)} + {position}, input{i}_ + o * {width}, {width});")
        position += width
    operands.append(Operand("int8_t*", "output_", y.index))
    return Lowered(op, "", operands, lines + ["  }", "  return 0;"], kernel=True)


RULES = {
    "RESHAPE": _reshape,
    "SQUEEZE": _reshape,
    "EXPAND_DIMS": _reshape,
    "PAD": _pad,
    "PADV2": _pad,
    "TRANSPOSE": _transpose,
    "CONCATENATION": _concatenation,
}
