"""Operators that move bytes without arithmetic, any element type: reshapes (no code), pads, transposes,
concatenations."""

from __future__ import annotations

import numpy as np

from ..tflite import ACTIVATIONS, Graph, Operator, Tensor
from .base import (
    Bands,
    Lowered,
    Operand,
    constant_data,
    refuse,
    same_quantization,
    strides_of,
    tensor_at,
)
from .slicing import CTYPES, MAX_RANK, affine_copy


def _reshape(graph: Graph, op: Operator) -> Lowered:
    """nothing: the output is the input's bytes (a copy where the output is a graph output)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if x.dtype != y.dtype or x.nbytes != y.nbytes:
        raise refuse(op, f"{x.describe()} cannot be viewed as {y.describe()}")
    same_quantization(op, x, y)
    if x.is_constant:
        raise refuse(op, f"a reshape of the constant {x.describe()} is not supported")
    if y.index in graph.outputs:  # a graph output has its own bytes (the application's)
        ctype = CTYPES.get(x.dtype)
        if ctype is None:
            raise refuse(op, f"a {x.dtype} graph output is not supported")
        body = [f"  memcpy(output_, input_, {y.nbytes});", "  return 0;"]
        return Lowered(op, "", [Operand(f"{ctype}*", "input_", x.index), Operand(f"{ctype}*", "output_", y.index)],
                       body, kernel=True)
    return Lowered(op, "", alias_of=x.index)


def _element(op: Operator, *tensors: Tensor) -> str:
    """The C element type shared by `tensors`; quantized ones need per-tensor quantization (int16: zero
    point 0, as TFLite's int16 kernels require), one quantization for all (TFLite's Prepare checks it)."""
    ctype = CTYPES.get(tensors[0].dtype)
    if ctype is None or any(t.dtype != tensors[0].dtype for t in tensors):
        raise refuse(op, f"{', '.join(t.describe() for t in tensors)}: one element type of "
                         f"{', '.join(CTYPES)} is needed")
    if any(len(t.shape) > MAX_RANK for t in tensors):
        raise refuse(op, f"rank over {MAX_RANK}")
    if tensors[0].dtype in ("int8", "int16", "uint8"):  # (TFLite's uint8 concatenation would requantize)
        for t in tensors:
            q = t.quantization
            if q is None or q.per_channel or not q.scale > 0:
                raise refuse(op, f"tensor {t.describe()} has no per-tensor quantization")
            if t.dtype == "int16" and q.zero_point != 0:
                raise refuse(op, f"int16 tensor {t.describe()} has a zero point other than 0")
        same_quantization(op, *tensors)
    return ctype


def _pad(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: the padding value (PAD: zero point; PADV2: given) everywhere, the input copied in; rank ≤ 5.
    TFLite's Pad, any element type."""
    x, paddings, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    ctype = _element(op, x, y)
    if len(x.shape) > 5:
        raise refuse(op, f"rank {len(x.shape)} is over 5 (TFLite's Pad)")
    if paddings.dtype not in ("int32", "int64"):
        raise refuse(op, f"the paddings {paddings.describe()} must be an int32 or int64 constant")
    pads = constant_data(op, paddings, paddings.dtype).astype(np.int64).reshape(-1, 2)
    if pads.shape[0] != len(x.shape) or (pads < 0).any():
        raise refuse(op, "the paddings must be one non-negative (before, after) pair per dimension")
    value: int | float = y.quantization.zero_point if y.quantization is not None else 0
    if op.name == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        v = graph.tensors[op.inputs[2]]
        if v.dtype != x.dtype or int(np.prod(v.shape)) != 1:
            raise refuse(op, f"the padding value {v.describe()} must be one {x.dtype} constant")
        if x.dtype in ("int8", "int16", "uint8"):
            same_quantization(op, v, y)
        value = constant_data(op, v, v.dtype).reshape(-1)[0].item()
    if tuple(int(d + a + b) for d, (a, b) in zip(x.shape, pads)) != y.shape:
        raise refuse(op, f"the output {y.describe()} is not the padded input")
    if ctype == "float":
        if not np.isfinite(value):
            raise refuse(op, f"the padding value {value} is not finite")
        literal = f"{float(np.float32(value))!r}f"
    else:
        literal = str(int(value))
    in_strides, out_strides = strides_of(tuple(x.shape)), strides_of(tuple(y.shape))
    offset = sum(int(a) * s for (a, _), s in zip(pads, out_strides))
    total = int(np.prod(y.shape))
    body = [f"  for (int32_t i = 0; i < {total}; ++i) output0_[i] = {literal};"]
    body += affine_copy("input0_", "output0_", [(d, si, so) for d, si, so in zip(x.shape, in_strides, out_strides)],
                        dst_base=offset)
    operands = [Operand(f"{ctype}*", "input0_", x.index), Operand(f"{ctype}*", "output0_", y.index)]
    return Lowered(op, "", operands, body + ["  return 0;"], kernel=True, bands=_pad_bands(x, y, pads, literal))


def _pad_bands(x: Tensor, y: Tensor, pads: np.ndarray, literal: str) -> Bands | None:
    """PAD of an image's rows and columns (NHWC, one batch) bottom row first, each input row moved to
    its place (memmove) before its padding is written: its output may start up to the top padding's
    bytes before its input, over it — each row's move then lands after every input row not yet moved."""
    if len(x.shape) != 4 or x.shape[0] != 1 or pads[0].any() or pads[3].any():
        return None
    (_, height, width, channels), (_, out_h, out_w, _) = x.shape, y.shape
    (top, _), (left, right) = (int(v) for v in pads[1]), (int(v) for v in pads[2])
    size = np.dtype(x.dtype).itemsize
    in_row, out_row = width * channels, out_w * channels
    fill = f"for (int32_t i = 0; i < {out_row}; ++i) output0_[r * {out_row} + i] = {literal};"
    body = [f"  for (int32_t r = {out_h - 1}; r >= {top + height}; --r) {fill}",
            f"  for (int32_t r = {top + height - 1}; r >= {top}; --r) {{",
            f"    memmove(&output0_[r * {out_row} + {left * channels}], &input0_[(r - {top}) * {in_row}], {in_row * size});",
            f"    for (int32_t i = 0; i < {left * channels}; ++i) output0_[r * {out_row} + i] = {literal};",
            f"    for (int32_t i = 0; i < {right * channels}; ++i) output0_[r * {out_row} + {(left + width) * channels} + i] "
            f"= {literal};",
            "  }",
            f"  for (int32_t r = {top - 1}; r >= 0; --r) {fill}",
            "  return 0;"]
    return Bands(reserve=0, allow=top * out_row * size // 16 * 16, functions=[], body=[], reverse_body=body)


def _transpose(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: any permutation, rank ≤ 6, any element type (one strided copy)."""
    x, perm_tensor, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    ctype = _element(op, x, y)
    if perm_tensor.dtype not in ("int32", "int64"):
        raise refuse(op, f"the permutation {perm_tensor.describe()} must be an int32 or int64 constant")
    perm = [int(v) for v in constant_data(op, perm_tensor, perm_tensor.dtype).reshape(-1)]
    if sorted(perm) != list(range(len(x.shape))) or tuple(x.shape[p] for p in perm) != y.shape:
        raise refuse(op, f"permutation {perm} does not turn {x.describe()} into {y.describe()}")
    in_strides, out_strides = strides_of(tuple(x.shape)), strides_of(tuple(y.shape))
    loops = [(y.shape[k], in_strides[p], out_strides[k]) for k, p in enumerate(perm)]
    operands = [Operand(f"{ctype}*", "input0_", x.index), Operand(f"{ctype}*", "output0_", y.index)]
    return Lowered(op, "", operands, affine_copy("input0_", "output0_", loops) + ["  return 0;"], kernel=True)


def _concatenation(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: copies along any axis, any element type, inputs of the output's quantization.
    (LiteRT requires it for int8; int16 inputs of another quantization stay refused.)"""
    inputs = [tensor_at(graph, op, i) for i in range(len(op.inputs))]
    y = tensor_at(graph, op, 0, output=True)
    ctype = _element(op, y, *inputs)
    if ACTIVATIONS.get(op.options.get("activation", 0)) != "NONE":
        raise refuse(op, "a fused activation on CONCATENATION is not supported")
    axis = op.options["axis"] % max(len(y.shape), 1)
    outer = int(np.prod(y.shape[:axis]))
    widths = [int(np.prod(t.shape[axis:])) for t in inputs]
    if sum(widths) * outer != int(np.prod(y.shape)) or any(t.shape[:axis] != y.shape[:axis] for t in inputs) \
            or any(len(t.shape) != len(y.shape) or t.shape[axis + 1:] != y.shape[axis + 1:] for t in inputs):
        raise refuse(op, "the inputs do not concatenate into the output")
    operands, body, position = [], [], 0
    for i, (tensor, width) in enumerate(zip(inputs, widths)):
        operands.append(Operand(f"{ctype}*", f"input{i}_", tensor.index))
        body += affine_copy(f"input{i}_", "output_", [(outer, width, sum(widths)), (width, 1, 1)], dst_base=position)
        position += width
    operands.append(Operand(f"{ctype}*", "output_", y.index))
    return Lowered(op, "", operands, body + ["  return 0;"], kernel=True)


RULES = {
    "RESHAPE": _reshape,
    "SQUEEZE": _reshape,
    "EXPAND_DIMS": _reshape,
    "PAD": _pad,
    "PADV2": _pad,
    "TRANSPOSE": _transpose,
    "CONCATENATION": _concatenation,
}
