"""Reductions: REDUCE_MAX and REDUCE_MIN (int8 and int16), and MEAN on 16x8 (int16) tensors, over random
axes (some negative) with or without keep_dims; SUM of float32 (LiteRT's reference kernel gets the
quantized SUMs wrong: test_import_ops_types holds those to its builtin kernel); REDUCE_ALL of a bool
tensor made by a comparison (mostly true, so that some reductions hold), turned back into int8 by
SELECT_V2; resampling: RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR (int8 and int16, align_corners or
half_pixel_centers or neither); ARG_MAX and ARG_MIN (int8 in, int32 out) along a random axis."""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from tflitewriter import Draw, GraphBuilder, _any_rank, _output, _requantized, _same_quantization, register_cases


def _small_nhwc(p: Draw) -> tuple[int, ...]:
    return (p.integer("batch", 1, 2), p.integer("height", 1, 6), p.integer("width", 1, 6), p.integer("channels", 1, 3))


def _reducer(op: str, same_quantization: bool):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        tensor = graph.tensor(x)
        shape = tensor.shape

        def draw_axes() -> list[int]:
            count = int(p.rng.integers(1, len(shape) + 1))
            chosen = p.rng.choice(len(shape), size=count, replace=False)
            return sorted(int(a) - (len(shape) if p.rng.random() < 0.3 else 0) for a in chosen)  # some negative
        axes = p("axes", draw_axes)
        keep_dims = p("keep_dims", lambda: bool(p.rng.random() < 0.5))
        reduced = {a % len(shape) for a in axes}
        out_shape = tuple(1 if i in reduced else d for i, d in enumerate(shape) if keep_dims or i not in reduced)
        axes_index = graph.add_constant(f"{name}/axes", np.array(axes, np.int32))
        if tensor.dtype == "float32":
            quantization = None
        elif same_quantization:
            quantization = _same_quantization(graph, x)
        elif tensor.dtype == "int16":
            quantization = {"scale": tensor.scale * p.log_uniform("output_scale_ratio", 0.5, 2.0), "zero_point": 0}
        else:
            quantization = _requantized(p, graph, x)
        y = _output(graph, name, tensor.dtype, out_shape, quantization)
        graph.add_operator(op, [x, axes_index], [y], schema.ReducerOptionsT(keepDims=keep_dims))
        return y
    return add


def _reduce_all(graph: GraphBuilder, p: Draw, x: int, name: str = "reduce_all") -> int:
    """x > a constant of mostly low values (a bool tensor, true nine times in ten or so), REDUCE_ALL over
    random axes, then SELECT_V2 between two int8 constants of x's quantization."""
    tensor = graph.tensor(x)
    same = {"scale": tensor.scale, "zero_point": tensor.zero_point}
    bounds = graph.add_constant(f"{name}/bounds", p.rng.integers(-128, -100, tensor.shape).astype(np.int8), **same)
    condition = graph.add_tensor(f"{name}/condition", "bool", tensor.shape)
    graph.add_operator("GREATER", [x, bounds], [condition])
    rank = len(tensor.shape)
    axes = p("axes", lambda: sorted(int(a) - (rank if p.rng.random() < 0.3 else 0) for a in p.rng.choice(
        rank, size=int(p.rng.integers(1, rank + 1)), replace=False)))  # some negative
    keep_dims = p("keep_dims", lambda: bool(p.rng.random() < 0.5))
    reduced_axes = {a % rank for a in axes}
    out_shape = tuple(1 if i in reduced_axes else d for i, d in enumerate(tensor.shape)
                      if keep_dims or i not in reduced_axes)
    reduced = graph.add_tensor(f"{name}/all", "bool", out_shape)
    graph.add_operator("REDUCE_ALL", [condition, graph.add_constant(f"{name}/axes", np.array(axes, np.int32))],
                       [reduced], schema.ReducerOptionsT(keepDims=keep_dims))
    when_true, when_false = (graph.add_constant(f"{name}/{k}", np.full(out_shape, v, np.int8), **same)
                             for k, v in (("true", 100), ("false", -100)))
    y = _output(graph, name, "int8", out_shape, same)
    graph.add_operator("SELECT_V2", [reduced, when_true, when_false], [y])
    return y


def _arg(op: str, output_dtype: str):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        shape = graph.tensor(x).shape
        axis = p("axis", lambda: int(p.rng.integers(-len(shape), len(shape))))
        axis_index = graph.add_constant(f"{name}/axis", np.array([axis], np.int32))
        out_shape = tuple(d for i, d in enumerate(shape) if i != axis % len(shape))
        y = _output(graph, name, output_dtype, out_shape, None)
        options = (schema.ArgMaxOptionsT if op == "ARG_MAX" else schema.ArgMinOptionsT)()
        options.outputType = {"int32": schema.TensorType.INT32, "int64": schema.TensorType.INT64}[output_dtype]
        graph.add_operator(op, [x, axis_index], [y], options)
        return y
    return add


def _resizer(op: str):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        tensor = graph.tensor(x)
        batch, _, _, channels = tensor.shape
        size = [p.integer("out_height", 1, 9), p.integer("out_width", 1, 9)]
        mode = p.choice("mode", ("plain", "align_corners", "half_pixel_centers"))
        size_index = graph.add_constant(f"{name}/size", np.array(size, np.int32))
        y = _output(graph, name, tensor.dtype, (batch, *size, channels), _same_quantization(graph, x))
        flags = {"alignCorners": mode == "align_corners", "halfPixelCenters": mode == "half_pixel_centers"}
        options = (schema.ResizeBilinearOptionsT if op == "RESIZE_BILINEAR" else schema.ResizeNearestNeighborOptionsT)()
        options.alignCorners, options.halfPixelCenters = flags["alignCorners"], flags["halfPixelCenters"]
        graph.add_operator(op, [x, size_index], [y], options)
        return y
    return add


_SCALES = (1e-3, 1e-1)
register_cases({
    "REDUCE_MAX": (_any_rank, _reducer("REDUCE_MAX", True), _SCALES, "int8"),
    "REDUCE_MIN": (_any_rank, _reducer("REDUCE_MIN", True), _SCALES, "int8"),
    "REDUCE_MAX/int16": (_any_rank, _reducer("REDUCE_MAX", True), _SCALES, "int16"),
    "REDUCE_MIN/int16": (_any_rank, _reducer("REDUCE_MIN", True), _SCALES, "int16"),
    "MEAN/int16": (_any_rank, _reducer("MEAN", False), _SCALES, "int16"),
    "REDUCE_ALL": (_any_rank, _reduce_all, _SCALES, "int8"),
    "SUM/float32": (_any_rank, _reducer("SUM", True), _SCALES, "float32"),
    "ARG_MAX": (_any_rank, _arg("ARG_MAX", "int32"), _SCALES, "int8"),
    "ARG_MIN": (_any_rank, _arg("ARG_MIN", "int32"), _SCALES, "int8"),
    "RESIZE_NEAREST_NEIGHBOR": (_small_nhwc, _resizer("RESIZE_NEAREST_NEIGHBOR"), _SCALES, "int8"),
    "RESIZE_NEAREST_NEIGHBOR/int16": (_small_nhwc, _resizer("RESIZE_NEAREST_NEIGHBOR"), _SCALES, "int16"),
    "RESIZE_BILINEAR": (_small_nhwc, _resizer("RESIZE_BILINEAR"), _SCALES, "int8"),
    "RESIZE_BILINEAR/int16": (_small_nhwc, _resizer("RESIZE_BILINEAR"), _SCALES, "int16"),
})
