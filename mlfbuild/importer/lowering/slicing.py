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
    operands = [Operand(f"{ctype}*", f"input{i}_", constant=np.ascontiguousarray(t.data)) if t.is_constant
                else Operand(f"{ctype}*", f"input{i}_", t.index) for i, t in enumerate(sources)]
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


def _nhwc_block(op: Operator, x: Tensor, y: Tensor) -> tuple[int, ...]:
    if len(x.shape) != 4 or len(y.shape) != 4:
        raise refuse(op, f"{x.describe()} and {y.describe()} must be 4-D (NHWC)")
    return tuple(x.shape)


def _depth_to_space(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: a strided copy (TFLite's DepthToSpace / SpaceToDepth, NHWC, one block size)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    n, h, w, c = _nhwc_block(op, x, y)
    b = op.options.get("block_size", 0)
    ctype = _element_type(op, x, y)
    if b < 1:
        raise refuse(op, f"block size {b}")
    if op.name == "DEPTH_TO_SPACE":
        if c % (b * b):
            raise refuse(op, f"{c} channels are not a multiple of {b}×{b}")
        oc = c // (b * b)
        _check_shape(op, y, (n, h * b, w * b, oc))
        oh, ow = h * b, w * b
        loops = [(n, h * w * c, oh * ow * oc), (h, w * c, b * ow * oc), (b, b * oc, ow * oc), (w, c, b * oc),
                 (b, oc, oc), (oc, 1, 1)]
    else:
        if h % b or w % b:
            raise refuse(op, f"{x.describe()} is not a whole number of {b}×{b} blocks")
        oh, ow, oc = h // b, w // b, c * b * b
        _check_shape(op, y, (n, oh, ow, oc))
        loops = [(n, h * w * c, oh * ow * oc), (oh, b * w * c, ow * oc), (b, w * c, b * c), (ow, b * c, oc),
                 (b, c, c), (c, 1, 1)]
    return _copy_step(op, [x], [y], ctype, affine_copy("input0_", "output0_", loops))


def _batch_space(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: per block position, a strided copy of the rows and columns inside the image
    (TFLite's SpaceToBatchND: the padding is the output's zero point; BatchToSpaceND: crops), NHWC."""
    x, block_tensor, pads_tensor = (tensor_at(graph, op, i) for i in range(3))
    y = tensor_at(graph, op, 0, output=True)
    n, h, w, c = _nhwc_block(op, x, y)
    ctype = _element_type(op, x, y)
    block, pads = _ints(op, block_tensor), _ints(op, pads_tensor)
    if len(block) != 2 or len(pads) != 4 or min(block) < 1 or min(pads) < 0:
        raise refuse(op, f"block {block} and paddings/crops {pads} (2-D blocks of an NHWC tensor only)")
    (bh, bw), (top, bottom, left, right) = block, pads
    space_to_batch = op.name == "SPACE_TO_BATCH_ND"
    if space_to_batch:
        if (h + top + bottom) % bh or (w + left + right) % bw:
            raise refuse(op, f"the padded {h}×{w} is not a whole number of {bh}×{bw} blocks")
        batch, rows, cols, (sh, sw) = n, (h + top + bottom) // bh, (w + left + right) // bw, (h, w)
        _check_shape(op, y, (n * bh * bw, rows, cols, c))
        if y.quantization is None and ctype != "float":
            raise refuse(op, f"the output {y.describe()} has no quantization to pad with")
    else:
        if n % (bh * bw):
            raise refuse(op, f"batch {n} is not a multiple of the {bh}×{bw} block")
        batch, rows, cols, (sh, sw) = n // (bh * bw), h, w, (h * bh - top - bottom, w * bw - left - right)
        _check_shape(op, y, (batch, sh, sw, c))
    body = []
    if space_to_batch:
        pad = y.quantization.zero_point if y.quantization else 0
        body.append(f"  for (int32_t i = 0; i < {int(np.prod(y.shape))}; ++i) output0_[i] = ({ctype}){pad};")
    for i in range(bh):
        for j in range(bw):
            # rows r of the batch image whose space row r*bh + i - top lies inside the space image
            r0, r1 = max(0, -(-(top - i) // bh)), min(rows - 1, (sh - 1 + top - i) // bh)
            c0, c1 = max(0, -(-(left - j) // bw)), min(cols - 1, (sw - 1 + left - j) // bw)
            if r1 < r0 or c1 < c0:
                continue
            block_base = (i * bw + j) * batch * rows * cols * c + r0 * cols * c + c0 * c
            space_base = (r0 * bh + i - top) * sw * c + (c0 * bw + j - left) * c
            batch_side = [(batch, rows * cols * c), (r1 - r0 + 1, cols * c), (c1 - c0 + 1, c), (c, 1)]
            space_side = [(batch, sh * sw * c), (r1 - r0 + 1, bh * sw * c), (c1 - c0 + 1, bw * c), (c, 1)]
            if space_to_batch:
                loops = [(k, si, bo) for (k, si), (_, bo) in zip(space_side, batch_side)]
                body += affine_copy("input0_", "output0_", loops, space_base, block_base)
            else:
                loops = [(k, bi, so) for (k, bi), (_, so) in zip(batch_side, space_side)]
                body += affine_copy("input0_", "output0_", loops, block_base, space_base)
    return _copy_step(op, [x], [y], ctype, body)


def _mirrored(i: int, size: int, offset: int) -> int:
    """The input index output position i (relative to the first element) reads: mirrored about the
    edge (REFLECT: offset 1, the edge element not repeated; SYMMETRIC: offset 0)."""
    if i < 0:
        return -i - 1 + offset
    if i >= size:
        return 2 * size - 1 - offset - i
    return i


def _mirror_pad(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: each output element read through one index table per dimension, computed at
    import (TFLite's MirrorPad, REFLECT or SYMMETRIC)."""
    x, pads_tensor, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    ctype = _element_type(op, x, y)
    pads = _ints(op, pads_tensor)
    rank = len(x.shape)
    mode = op.options.get("mode", 0)  # MirrorPadMode: 0 REFLECT, 1 SYMMETRIC
    if len(pads) != 2 * rank or min(pads, default=0) < 0 or mode not in (0, 1):
        raise refuse(op, f"paddings {pads} (mode {mode}) do not fit {x.describe()}")
    offset = 1 if mode == 0 else 0  # REFLECT leaves the edge element out
    tables = []
    for d, size in enumerate(x.shape):
        before, after = pads[2 * d], pads[2 * d + 1]
        if max(before, after) > size - offset:
            raise refuse(op, f"padding {before}, {after} of a dimension of {size} is more than {op.name} reflects")
        index = [_mirrored(o - before, size, offset) for o in range(size + before + after)]
        tables.append(np.array(index, np.int32) * strides_of(tuple(x.shape))[d])
    _check_shape(op, y, tuple(len(t) for t in tables))
    nest = "".join(f"for (int32_t i{d} = 0; i{d} < {len(t)}; ++i{d}) " for d, t in enumerate(tables))
    read = " + ".join(f"table{d}_[i{d}]" for d in range(rank)) or "0"
    body = [f"  {ctype}* out = output0_;", f"  {nest}*out++ = input0_[{read}];", "  return 0;"]
    operands = [Operand(f"{ctype}*", "input0_", x.index)]
    operands += [Operand("int32_t*", f"table{d}_", constant=t) for d, t in enumerate(tables)]
    operands.append(Operand(f"{ctype}*", "output0_", y.index))
    return Lowered(op, "", operands, body, kernel=True)


def _gather(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: per index, a copy of the slice it names (TFLite's Gather; indices constant or
    int32/int64 tensors, an index out of range fails the inference as TFLite's kernel fails)."""
    x, indices, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    ctype = _element_type(op, x, y)
    if op.options.get("batch_dims", 0):
        raise refuse(op, "batch_dims other than 0 are not supported")
    if indices.dtype not in ("int32", "int64"):
        raise refuse(op, f"indices {indices.describe()} are not int32 or int64")
    axis = _axis(op, op.options.get("axis", 0), len(x.shape))
    _check_shape(op, y, tuple(x.shape[:axis]) + tuple(indices.shape) + tuple(x.shape[axis + 1:]))
    outer, size = int(np.prod(x.shape[:axis])), x.shape[axis]
    inner, count = int(np.prod(x.shape[axis + 1:])), int(np.prod(indices.shape))
    if indices.is_constant:
        values = [int(v) for v in indices.data.reshape(-1)]
        if any(not 0 <= v < size for v in values):
            raise refuse(op, f"an index of {indices.describe()} is outside 0..{size - 1}")
        body = []
        for k, v in enumerate(values):
            body += affine_copy("input0_", "output0_", [(outer, size * inner, count * inner), (inner, 1, 1)],
                                v * inner, k * inner)
        return _copy_step(op, [x], [y], ctype, body)
    itype = "int32_t" if indices.dtype == "int32" else "int64_t"
    body = [f"  for (int32_t k = 0; k < {count}; ++k) {{", f"    const {itype} v = indices_[k];",
            f"    if (v < 0 || v >= {size}) return -1;",
            f"    for (int32_t o = 0; o < {outer}; ++o) for (int32_t i = 0; i < {inner}; ++i)",
            f"      output0_[(o * {count} + k) * {inner} + i] = input0_[(o * {size} + (int32_t)v) * {inner} + i];",
            "  }", "  return 0;"]
    operands = [Operand(f"{ctype}*", "input0_", x.index), Operand(f"{itype}*", "indices_", indices.index),
                Operand(f"{ctype}*", "output0_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


RULES = {
    "DEPTH_TO_SPACE": _depth_to_space,
    "SPACE_TO_DEPTH": _depth_to_space,
    "SPACE_TO_BATCH_ND": _batch_space,
    "BATCH_TO_SPACE_ND": _batch_space,
    "MIRROR_PAD": _mirror_pad,
    "GATHER": _gather,
    "SLICE": _slice,
    "STRIDED_SLICE": _strided_slice,
    "TILE": _tile,
    "PACK": _pack,
    "UNPACK": _unpack,
    "SPLIT": _split,
    "SPLIT_V": _split,
}
