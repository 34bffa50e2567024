"""Operators that copy parts of tensors, whatever their element type: SLICE, STRIDED_SLICE, TILE,
PACK, UNPACK, SPLIT and SPLIT_V. Each is one or more strided copies whose loop counts and strides are
computed at import (`affine_copy`): the bytes TFLite's reference kernels copy, in their order."""

from __future__ import annotations

import numpy as np

from ..tflite import Graph, Operator, Tensor
from .base import Lowered, Operand, constant_data, refuse, strides_of, tensor_at

CTYPES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int32_t", "float32": "float",
          "bool": "uint8_t"}
MAX_RANK = 6


def affine_copy(src: str, dst: str, loops: list[tuple[int, int, int]], src_base: int = 0,
                dst_base: int = 0) -> list[str]:
    """C copying dst[dst_base + Σ i_k·out_k] = src[src_base + Σ i_k·in_k] for every i_k < count_k of
    `loops` [(count, in stride, out stride)], outermost first."""
    if any(count == 0 for count, _, _ in loops):
        return []

    def offset(base: int, which: int) -> str:
        terms = [str(base)] if base else []
        terms += [f"i{k} * {loop[which]}" for k, loop in enumerate(loops) if loop[which]]
        return " + ".join(terms) or "0"
    nest = "".join(f"for (int32_t i{k} = 0; i{k} < {count}; ++i{k}) " for k, (count, _, _) in enumerate(loops))
    return [f"  {nest}{dst}[{offset(dst_base, 2)}] = {src}[{offset(src_base, 1)}];"]


def _element_type(op: Operator, *tensors: Tensor) -> str:
    dtype = tensors[0].dtype
    if dtype not in CTYPES or any(t.dtype != dtype for t in tensors):
        raise refuse(op, f"{', '.join(t.describe() for t in tensors)}: one element type of "
                         f"{', '.join(CTYPES)} is needed")
    if any(len(t.shape) > MAX_RANK for t in tensors):
        raise refuse(op, f"rank over {MAX_RANK}")
    return CTYPES[dtype]


def _ints(op: Operator, t: Tensor) -> list[int]:
    if t.dtype not in ("int32", "int64"):
        raise refuse(op, f"{t.describe()} must be an int32 or int64 constant")
    return [int(v) for v in constant_data(op, t, t.dtype).reshape(-1)]


def _copy_step(op: Operator, sources: list[Tensor], targets: list[Tensor], ctype: str, body: list[str],
               note: str = "") -> Lowered:
    operands = [Operand(f"{ctype}*", f"input{i}_", t.index) for i, t in enumerate(sources)]
    operands += [Operand(f"{ctype}*", f"output{i}_", t.index) for i, t in enumerate(targets)]
    return Lowered(op, "", operands, body + ["  return 0;"], note, kernel=True)


def _check_shape(op: Operator, y: Tensor, shape: tuple[int, ...]) -> None:
    if tuple(y.shape) != tuple(shape):
        raise refuse(op, f"the output {y.describe()} is not the expected shape {list(shape)}")


def _slice_copy(op: Operator, x: Tensor, y: Tensor, starts: list[int], counts: list[int], steps: list[int],
                kept: list[bool]) -> Lowered:
    ctype = _element_type(op, x, y)
    in_strides = strides_of(tuple(x.shape))
    out_shape = [c for c, k in zip(counts, kept) if k]
    _check_shape(op, y, tuple(out_shape))
    out_strides = iter(strides_of(tuple(out_shape)))
    loops = [(c, s * st, next(out_strides) if k else 0) for c, s, st, k in zip(counts, steps, in_strides, kept)]
    base = sum(b * s for b, s in zip(starts, in_strides))
    return _copy_step(op, [x], [y], ctype, affine_copy("input0_", "output0_", loops, base))


def _slice(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: a strided copy (TFLite's Slice: begin, size, -1 to the end)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    begin, size = _ints(op, tensor_at(graph, op, 1)), _ints(op, tensor_at(graph, op, 2))
    if len(begin) != len(x.shape) or len(size) != len(x.shape):
        raise refuse(op, "begin and size need one value per dimension")
    counts = [d - b if s == -1 else s for d, b, s in zip(x.shape, begin, size)]
    if any(b < 0 or c < 0 or b + c > d for b, c, d in zip(begin, counts, x.shape)):
        raise refuse(op, f"begin {begin} and size {size} leave {x.describe()}")
    return _slice_copy(op, x, y, begin, counts, [1] * len(begin), [True] * len(begin))


def _start(begin: int, stride: int, size: int, masked: bool) -> int:
    """TFLite's StartForAxis (strided_slice_logic.h)."""
    start = (-(1 << 40) if stride > 0 else 1 << 40) if masked else begin
    start = start + size if start < 0 else start
    return min(max(start, 0), size) if stride > 0 else min(max(start, -1), size - 1)


def _stop(end: int, stride: int, size: int, masked: bool, shrink: bool, start: int) -> int:
    """TFLite's StopForAxis."""
    if shrink:
        return start + 1
    stop = ((1 << 40) if stride > 0 else -(1 << 40)) if masked else end
    stop = stop + size if stop < 0 else stop
    return min(max(stop, 0), size) if stride > 0 else min(max(stop, -1), size - 1)


def _strided_slice(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: a strided copy (TFLite's StridedSlice: begin, end and strides, negative ones too,
    begin/end/shrink-axis masks and offset)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    begin, end, strides = (_ints(op, tensor_at(graph, op, i)) for i in (1, 2, 3))
    o = op.options
    if o.get("ellipsis_mask") or o.get("new_axis_mask"):
        raise refuse(op, "ellipsis and new-axis masks are not supported")
    rank = len(x.shape)
    if not len(begin) == len(end) == len(strides) <= rank or 0 in strides:
        raise refuse(op, f"begin {begin}, end {end} and strides {strides} do not fit {x.describe()}")
    pad = rank - len(begin)  # dimensions not named are taken whole
    begin, end, strides = begin + [0] * pad, end + [0] * pad, strides + [1] * pad
    begin_mask = o.get("begin_mask", 0) | (((1 << pad) - 1) << (rank - pad))
    end_mask = o.get("end_mask", 0) | (((1 << pad) - 1) << (rank - pad))
    if o.get("offset"):
        end = [b + e for b, e in zip(begin, end)]
    starts, counts, kept = [], [], []
    for axis, size in enumerate(x.shape):
        shrink = bool(o.get("shrink_axis_mask", 0) >> axis & 1)
        start = _start(begin[axis], strides[axis], size, bool(begin_mask >> axis & 1))
        stop = _stop(end[axis], strides[axis], size, bool(end_mask >> axis & 1), shrink, start)
        step = strides[axis]
        count = max(0, -(-(stop - start) // step)) if step > 0 else max(0, -(-(start - stop) // -step))
        starts.append(start)
        counts.append(count)
        kept.append(not shrink)
    return _slice_copy(op, x, y, starts, counts, strides, kept)


def _tile(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: the input copied once per tile (TFLite's Tile)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    multiples = _ints(op, tensor_at(graph, op, 1))
    if len(multiples) != len(x.shape) or any(m < 0 for m in multiples):
        raise refuse(op, f"multiples {multiples} do not fit {x.describe()}")
    ctype = _element_type(op, x, y)
    _check_shape(op, y, tuple(d * m for d, m in zip(x.shape, multiples)))
    in_strides, out_strides = strides_of(tuple(x.shape)), strides_of(tuple(y.shape))
    tiles = [(m, 0, d * s) for m, d, s in zip(multiples, x.shape, out_strides)]
    within = [(d, si, so) for d, si, so in zip(x.shape, in_strides, out_strides)]
    return _copy_step(op, [x], [y], ctype, affine_copy("input0_", "output0_", tiles + within))


def _axis(op: Operator, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise refuse(op, f"axis {axis} is outside rank {rank}")
    return axis % rank


def _pieces(op: Operator, whole: Tensor, parts: list[Tensor], axis: int, widths: list[int], into_whole: bool,
            stacked: bool) -> Lowered:
    """Parts laid side by side along `axis` of `whole` (each `widths[i]` wide there; `stacked`: the
    parts lack that dimension): PACK copies them in, UNPACK and SPLIT copy them out."""
    ctype = _element_type(op, whole, *parts)
    outer = int(np.prod(whole.shape[:axis]))
    inner = int(np.prod(whole.shape[axis + 1:]))
    row = whole.shape[axis] * inner
    if sum(widths) != whole.shape[axis]:
        raise refuse(op, f"the parts' widths {widths} do not make {whole.describe()}'s dimension {axis}")
    body, position = [], 0
    for index, (part, width) in enumerate(zip(parts, widths)):
        expected = whole.shape[:axis] + (() if stacked else (width,)) + whole.shape[axis + 1:]
        if tuple(part.shape) != tuple(expected):
            raise refuse(op, f"{part.describe()} is not a part of {whole.describe()} along axis {axis}")
        if into_whole:
            loops = [(outer, width * inner, row), (width * inner, 1, 1)]
            body += affine_copy(f"input{index}_", "output0_", loops, 0, position * inner)
        else:
            loops = [(outer, row, width * inner), (width * inner, 1, 1)]
            body += affine_copy("input0_", f"output{index}_", loops, position * inner, 0)
        position += width
    sources, targets = (parts, [whole]) if into_whole else ([whole], parts)
    return _copy_step(op, sources, targets, ctype, body)


def _pack(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: each input copied into its place along the new axis (TFLite's Pack)."""
    parts = [tensor_at(graph, op, i) for i in range(len(op.inputs))]
    y = tensor_at(graph, op, 0, output=True)
    axis = _axis(op, op.options.get("axis", 0), len(y.shape))
    return _pieces(op, y, parts, axis, [1] * len(parts), into_whole=True, stacked=True)


def _unpack(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: each slice along the axis copied out (TFLite's Unpack)."""
    x = tensor_at(graph, op, 0)
    parts = [tensor_at(graph, op, i, output=True) for i in range(len(op.outputs))]
    axis = _axis(op, op.options.get("axis", 0), len(x.shape))
    return _pieces(op, x, parts, axis, [1] * len(parts), into_whole=False, stacked=True)


def _split(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: equal pieces along the axis copied out (TFLite's Split; SPLIT_V: given sizes, one -1)."""
    if op.name == "SPLIT":
        axis_tensor, x = tensor_at(graph, op, 0), tensor_at(graph, op, 1)
    else:
        x, sizes_tensor, axis_tensor = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 2)
    axis_values = _ints(op, axis_tensor)
    if len(axis_values) != 1:
        raise refuse(op, "the axis must be one constant")
    axis = _axis(op, axis_values[0], len(x.shape))
    parts = [tensor_at(graph, op, i, output=True) for i in range(len(op.outputs))]
    if op.name == "SPLIT":
        if x.shape[axis] % len(parts):
            raise refuse(op, f"{x.describe()} does not split into {len(parts)} equal parts along axis {axis}")
        widths = [x.shape[axis] // len(parts)] * len(parts)
    else:
        widths = _ints(op, sizes_tensor)
        if widths.count(-1) > 1 or len(widths) != len(parts):
            raise refuse(op, f"size_splits {widths} do not name {len(parts)} parts (one -1 at most)")
        if -1 in widths:
            widths[widths.index(-1)] = x.shape[axis] - (sum(widths) + 1)
    return _pieces(op, x, parts, axis, widths, into_whole=False, stacked=False)


RULES = {
    "SLICE": _slice,
    "STRIDED_SLICE": _strided_slice,
    "TILE": _tile,
    "PACK": _pack,
    "UNPACK": _unpack,
    "SPLIT": _split,
    "SPLIT_V": _split,
}
