"""Copies of parts of tensors: SLICE, STRIDED_SLICE (masks, negative strides, offset), TILE, PACK,
UNPACK, SPLIT, SPLIT_V, and EXPAND_DIMS (a view); int8, and int16 for some."""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from tflitewriter import Draw, GraphBuilder, _any_rank, _nhwc, _output, _same_quantization, register_cases


def _out(graph: GraphBuilder, x: int, name: str, shape) -> int:
    return _output(graph, name, graph.tensor(x).dtype, tuple(shape), _same_quantization(graph, x))


def add_slice(graph: GraphBuilder, p: Draw, x: int, name: str = "slice") -> int:
    shape = graph.tensor(x).shape
    begin = [int(p.rng.integers(0, d)) for d in shape]
    size = [int(p.rng.integers(1, d - b + 1)) if p.rng.random() < 0.8 else -1 for d, b in zip(shape, begin)]
    out = [d - b if s == -1 else s for d, b, s in zip(shape, begin, size)]
    y = _out(graph, x, name, out)
    graph.add_operator("SLICE", [x, graph.add_constant(f"{name}/begin", np.array(begin, np.int32)),
                                 graph.add_constant(f"{name}/size", np.array(size, np.int32))], [y],
                       schema.SliceOptionsT())
    return y


def _strided_output(shape, begin, end, strides, begin_mask, end_mask, shrink) -> list[int]:
    out = []
    for axis, size in enumerate(shape):
        b = slice(None if begin_mask >> axis & 1 else begin[axis], None if end_mask >> axis & 1 else end[axis],
                  strides[axis])
        count = len(range(size)[b])
        if shrink >> axis & 1:
            continue
        out.append(count)
    return out


def add_strided_slice(graph: GraphBuilder, p: Draw, x: int, name: str = "strided_slice") -> int:
    shape = graph.tensor(x).shape
    rank = len(shape)
    strides = [int(p.rng.choice([1, 1, 2, 3, -1, -2])) for _ in shape]
    begin = [int(p.rng.integers(-d, d)) for d in shape]
    end = [int(p.rng.integers(-d - 1, d + 2)) for d in shape]
    begin_mask, end_mask = int(p.rng.integers(0, 1 << rank)), int(p.rng.integers(0, 1 << rank))
    shrink = 0
    for axis, d in enumerate(shape):  # shrink an axis whose begin names an element
        if p.rng.random() < 0.25 and not begin_mask >> axis & 1:
            shrink |= 1 << axis
            strides[axis] = 1
    for axis, size in enumerate(shape):  # an axis sliced empty is taken whole (models hold no empty tensors)
        if not shrink >> axis & 1 and not len(range(size)[slice(begin[axis], end[axis], strides[axis])]):
            begin_mask, end_mask = begin_mask | 1 << axis, end_mask | 1 << axis
    out = _strided_output(shape, begin, end, strides, begin_mask, end_mask, shrink)
    y = _out(graph, x, name, out)
    graph.add_operator("STRIDED_SLICE", [x, graph.add_constant(f"{name}/begin", np.array(begin, np.int32)),
                                         graph.add_constant(f"{name}/end", np.array(end, np.int32)),
                                         graph.add_constant(f"{name}/strides", np.array(strides, np.int32))], [y],
                       schema.StridedSliceOptionsT(beginMask=begin_mask, endMask=end_mask, shrinkAxisMask=shrink))
    return y


def add_tile(graph: GraphBuilder, p: Draw, x: int, name: str = "tile") -> int:
    shape = graph.tensor(x).shape
    multiples = [int(p.rng.integers(1, 4)) for _ in shape]
    y = _out(graph, x, name, [d * m for d, m in zip(shape, multiples)])
    graph.add_operator("TILE", [x, graph.add_constant(f"{name}/multiples", np.array(multiples, np.int32))], [y],
                       schema.TileOptionsT())
    return y


def add_pack(graph: GraphBuilder, p: Draw, x: int, name: str = "pack") -> int:
    tensor = graph.tensor(x)
    count = p.integer("count", 1, 3)
    others = [graph.add_input(f"{name}_in{i}", tensor.dtype, tensor.shape, **_same_quantization(graph, x))
              for i in range(count)]
    axis = p.integer("axis", -len(tensor.shape) - 1, len(tensor.shape))
    shape = list(tensor.shape)
    shape.insert(axis % (len(shape) + 1), count + 1)
    y = _out(graph, x, name, shape)
    graph.add_operator("PACK", [x, *others], [y], schema.PackOptionsT(valuesCount=count + 1, axis=axis))
    return y


def _unpack(graph: GraphBuilder, p: Draw, x: int, name: str, outputs: list[tuple[int, ...]], op: str, options,
            extra: list[int]) -> int:
    """The operator with several outputs; all but the first are marked graph outputs here."""
    ys = [_out(graph, x, f"{name}_out{i}", shape) for i, shape in enumerate(outputs)]
    graph.add_operator(op, extra + [x] if op == "SPLIT" else [x] + extra, ys, options)
    graph.mark_output(*ys[1:])
    return ys[0]


def add_unpack(graph: GraphBuilder, p: Draw, x: int, name: str = "unpack") -> int:
    shape = graph.tensor(x).shape
    axis = p.integer("axis", -len(shape), len(shape) - 1)
    part = tuple(d for i, d in enumerate(shape) if i != axis % len(shape))
    return _unpack(graph, p, x, name, [part] * shape[axis], "UNPACK",
                   schema.UnpackOptionsT(num=shape[axis], axis=axis), [])


def add_split(graph: GraphBuilder, p: Draw, x: int, name: str = "split") -> int:
    shape = graph.tensor(x).shape
    axis = p.integer("axis", -len(shape), len(shape) - 1)
    size = shape[axis]
    parts = int(p.rng.choice([n for n in range(1, size + 1) if size % n == 0]))
    part = tuple(d // parts if i == axis % len(shape) else d for i, d in enumerate(shape))
    axis_index = graph.add_constant(f"{name}/axis", np.array([axis], np.int32))
    return _unpack(graph, p, x, name, [part] * parts, "SPLIT", schema.SplitOptionsT(numSplits=parts), [axis_index])


def add_split_v(graph: GraphBuilder, p: Draw, x: int, name: str = "split_v") -> int:
    shape = graph.tensor(x).shape
    axis = p.integer("axis", -len(shape), len(shape) - 1)
    size = shape[axis]
    cuts = sorted(int(c) for c in p.rng.choice(np.arange(1, size), size=min(size - 1, int(p.rng.integers(0, 3))),
                                               replace=False)) if size > 1 else []
    widths = [b - a for a, b in zip([0] + cuts, cuts + [size])]
    given = list(widths)
    if len(given) > 1 and p.rng.random() < 0.5:
        given[int(p.rng.integers(len(given)))] = -1
    outputs = [tuple(w if i == axis % len(shape) else d for i, d in enumerate(shape)) for w in widths]
    extra = [graph.add_constant(f"{name}/sizes", np.array(given, np.int32)),
             graph.add_constant(f"{name}/axis", np.array([axis], np.int32))]
    return _unpack(graph, p, x, name, outputs, "SPLIT_V", schema.SplitVOptionsT(numSplits=len(widths)), extra)


def add_expand_dims(graph: GraphBuilder, p: Draw, x: int, name: str = "expand_dims") -> int:
    shape = list(graph.tensor(x).shape)
    axis = p.integer("axis", -len(shape) - 1, len(shape))
    shape.insert(axis % (len(shape) + 1), 1)
    y = _out(graph, x, name, shape)
    graph.add_operator("EXPAND_DIMS", [x, graph.add_constant(f"{name}/axis", np.array([axis], np.int32))], [y],
                       schema.ExpandDimsOptionsT())
    return y


_SCALES = (1e-3, 1e-1)
register_cases({
    "SLICE": (_any_rank, add_slice, _SCALES, "int8"),
    "SLICE/int16": (_any_rank, add_slice, _SCALES, "int16"),
    "STRIDED_SLICE": (_nhwc, add_strided_slice, _SCALES, "int8"),
    "STRIDED_SLICE/rank": (_any_rank, add_strided_slice, _SCALES, "int8"),
    "TILE": (_any_rank, add_tile, _SCALES, "int8"),
    "PACK": (_any_rank, add_pack, _SCALES, "int8"),
    "UNPACK": (_any_rank, add_unpack, _SCALES, "int8"),
    "SPLIT": (_nhwc, add_split, _SCALES, "int8"),
    "SPLIT_V": (_nhwc, add_split_v, _SCALES, "int16"),
    "EXPAND_DIMS": (_any_rank, add_expand_dims, _SCALES, "int8"),
})


def add_depth_to_space(graph: GraphBuilder, p: Draw, x: int, name: str = "depth_to_space") -> int:
    n, h, w, c = graph.tensor(x).shape
    b = p.integer("block", 1, 3)
    # the input's channels are a multiple of b*b: widen them with a PACK-free trick, a TILE along C
    tiled = _out(graph, x, f"{name}_tiled", (n, h, w, c * b * b))
    graph.add_operator("TILE", [x, graph.add_constant(f"{name}_multiples", np.array([1, 1, 1, b * b], np.int32))],
                       [tiled], schema.TileOptionsT())
    y = _out(graph, x, name, (n, h * b, w * b, c))
    graph.add_operator("DEPTH_TO_SPACE", [tiled], [y], schema.DepthToSpaceOptionsT(blockSize=b))
    return y


def add_space_to_depth(graph: GraphBuilder, p: Draw, x: int, name: str = "space_to_depth") -> int:
    n, h, w, c = graph.tensor(x).shape
    b = int(p.rng.choice([d for d in range(1, 4) if h % d == 0 and w % d == 0]))
    y = _out(graph, x, name, (n, h // b, w // b, c * b * b))
    graph.add_operator("SPACE_TO_DEPTH", [x], [y], schema.SpaceToDepthOptionsT(blockSize=b))
    return y


def add_space_to_batch(graph: GraphBuilder, p: Draw, x: int, name: str = "space_to_batch") -> int:
    n, h, w, c = graph.tensor(x).shape
    bh, bw = p.integer("block_h", 1, 3), p.integer("block_w", 1, 3)
    top, left = p.integer("pad_top", 0, 2), p.integer("pad_left", 0, 2)
    bottom, right = (-(h + top)) % bh + bh * p.integer("extra_h", 0, 1), (-(w + left)) % bw
    y = _out(graph, x, name, (n * bh * bw, (h + top + bottom) // bh, (w + left + right) // bw, c))
    graph.add_operator("SPACE_TO_BATCH_ND", [x, graph.add_constant(f"{name}_block", np.array([bh, bw], np.int32)),
                                             graph.add_constant(f"{name}_pads", np.array([[top, bottom], [left, right]],
                                                                                         np.int32))], [y],
                       schema.SpaceToBatchNDOptionsT())
    return y


def add_batch_to_space(graph: GraphBuilder, p: Draw, x: int, name: str = "batch_to_space") -> int:
    n, h, w, c = graph.tensor(x).shape
    divisors = [(bh, bw) for bh in range(1, 4) for bw in range(1, 3) if n % (bh * bw) == 0]
    bh, bw = divisors[int(p.rng.integers(len(divisors)))]
    top, bottom = p.integer("crop_top", 0, min(1, h * bh - 1)), 0
    left, right = 0, p.integer("crop_right", 0, min(1, w * bw - 1))
    y = _out(graph, x, name, (n // (bh * bw), h * bh - top - bottom, w * bw - left - right, c))
    graph.add_operator("BATCH_TO_SPACE_ND", [x, graph.add_constant(f"{name}_block", np.array([bh, bw], np.int32)),
                                             graph.add_constant(f"{name}_crops", np.array([[top, bottom], [left, right]],
                                                                                          np.int32))], [y],
                       schema.BatchToSpaceNDOptionsT())
    return y


def add_mirror_pad(graph: GraphBuilder, p: Draw, x: int, name: str = "mirror_pad") -> int:
    shape = graph.tensor(x).shape
    mode = p.integer("mode", 0, 1)
    pads = [[int(p.rng.integers(0, d - (1 - mode) + 1)) for _ in range(2)] for d in shape]
    y = _out(graph, x, name, [d + a + b for d, (a, b) in zip(shape, pads)])
    graph.add_operator("MIRROR_PAD", [x, graph.add_constant(f"{name}_pads", np.array(pads, np.int32))], [y],
                       schema.MirrorPadOptionsT(mode=mode))
    return y


def add_gather(graph: GraphBuilder, p: Draw, x: int, name: str = "gather") -> int:
    shape = graph.tensor(x).shape
    axis = p.integer("axis", -len(shape), len(shape) - 1)
    size = shape[axis]
    indices_shape = tuple(int(d) for d in p.rng.integers(1, 4, size=p.integer("indices_rank", 1, 2)))
    values = p.rng.integers(0, size, size=indices_shape).astype(np.int32)
    if p("constant_indices", lambda: bool(p.rng.random() < 0.5)):
        indices = graph.add_constant(f"{name}_indices", values)
    else:  # a graph input the tests fill with random int32: kept in range by a FLOOR_MOD-free trick is not
        indices = graph.add_constant(f"{name}_indices", values)  # possible, so indices stay constant here
    a = axis % len(shape)
    y = _out(graph, x, name, tuple(shape[:a]) + indices_shape + tuple(shape[a + 1:]))
    graph.add_operator("GATHER", [x, indices], [y], schema.GatherOptionsT(axis=axis))
    return y


register_cases({
    "DEPTH_TO_SPACE": (_nhwc, add_depth_to_space, _SCALES, "int8"),
    "SPACE_TO_DEPTH": (_nhwc, add_space_to_depth, _SCALES, "int8"),
    "SPACE_TO_BATCH_ND": (_nhwc, add_space_to_batch, _SCALES, "int8"),
    "BATCH_TO_SPACE_ND": (_nhwc, add_batch_to_space, _SCALES, "int8"),
    "MIRROR_PAD": (_any_rank, add_mirror_pad, _SCALES, "int8"),
    "GATHER": (_any_rank, add_gather, _SCALES, "int8"),
})
