"""Reductions against LiteRT's reference kernels, with the cases random draws rarely reach listed:
MEAN over H and W keeping dims (global average pooling as the converter writes it; LiteRT's
QuantizedMeanOrSum, not the older requantise-then-divide), one quantization in and out, large counts
where the folded multiplier's precision shows, negative axes, every axis."""

from __future__ import annotations

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers the reductions' cases
from ai_edge_litert import schema_py_generated as schema
from test_import_operators import _assert_refused, check_against_litert
from tflitewriter import GraphBuilder, bundle_model

_NHWC = (1, 7, 7, 8)
RARE = [
    ("MEAN", {"input_shape": (1, 7, 7, 16), "axes": [1, 2], "keep_dims": True}),
    ("MEAN", {"input_shape": (1, 14, 14, 4), "axes": [1, 2], "keep_dims": True}),
    ("MEAN", {"input_shape": (1, 7, 7, 16), "axes": [1, 2], "keep_dims": False}),
    ("MEAN", {"input_shape": (2, 5, 3, 4), "axes": [2, 1], "keep_dims": True}),
    ("MEAN", {"input_shape": _NHWC, "axes": [1, 2], "keep_dims": True, "output_scale_ratio": 1.0,
              "output_zero_point_shift": 0}),  # one quantization in and out
    ("MEAN", {"input_shape": _NHWC, "axes": [-1], "keep_dims": False}),
    ("MEAN", {"input_shape": _NHWC, "axes": [0, 1, 2, 3], "keep_dims": True}),
    ("MEAN", {"input_shape": (1, 33, 31, 2), "axes": [1, 2], "keep_dims": True}),  # 1,023 elements per mean
    ("MEAN", {"input_shape": (1, 64, 64, 1), "axes": [1, 2], "keep_dims": False}),  # 4,096: the fold at its limit
    ("MEAN", {"input_shape": (3, 4), "axes": [0], "keep_dims": False}),
    ("MEAN", {"input_shape": _NHWC, "axes": [1], "keep_dims": True}),
    ("MEAN", {"input_shape": _NHWC, "axes": [2], "keep_dims": True}),
    ("MEAN", {"input_shape": _NHWC, "axes": [3], "keep_dims": True}),
    ("MEAN", {"input_shape": _NHWC, "axes": [-3, -2], "keep_dims": True}),
    ("MEAN", {"input_shape": (1, 14, 14, 4), "axes": [1, 2], "keep_dims": False, "output_scale_ratio": 1.0,
              "output_zero_point_shift": 0}),
    ("MEAN", {"input_shape": (1, 7, 7, 16), "axes": [1, 2], "keep_dims": True, "output_scale_ratio": 1.0,
              "output_zero_point_shift": 5}),  # one scale, another zero point
    ("MEAN", {"input_shape": _NHWC, "axes": [0, 1, 2, 3], "keep_dims": False}),
    ("REDUCE_MAX", {"input_shape": _NHWC, "axes": [1, 2], "keep_dims": True}),
    ("REDUCE_MIN", {"input_shape": (2, 3, 4), "axes": [0, 2], "keep_dims": False}),
    ("MEAN/int16", {"input_shape": (1, 7, 7, 4), "axes": [1, 2], "keep_dims": True}),
    ("MEAN/int16", {"input_shape": (1, 14, 14, 2), "axes": [1, 2], "keep_dims": False}),
    ("MEAN/int16", {"input_shape": (1, 7, 7, 4), "axes": [1, 2], "keep_dims": True, "output_scale_ratio": 1.0}),
    ("MEAN/int16", {"input_shape": (2, 3, 5), "axes": [-1], "keep_dims": False}),
]


@pytest.mark.exhaustive  # every kind of it also runs in CI: test_every_operator_on_the_host_equals_litert
@pytest.mark.cross
def test_rare_reductions_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(48), RARE).write(tmp_path / "reduce.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=8)


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("seed", range(6))
def test_many_mean_cases_equal_litert(seed, cmsis_nn, tmp_path):
    cases = [("MEAN", {}) for _ in range(20)] + [("MEAN", {"input_shape": (1, 7, 7, 8), "axes": [1, 2],
                                                          "keep_dims": True}) for _ in range(10)]
    model = bundle_model(np.random.default_rng(seed), cases).write(tmp_path / "mean.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=8, seed=seed)


# Resampling: every mode, upsampling and downsampling, sizes where TFLite's float (nearest) and 10-bit
# (bilinear) positions round differently, one-pixel sides, extremes of the values.
RESIZE = [
    (op + kind, {"input_shape": shape, "out_height": oh, "out_width": ow, "mode": mode})
    for op in ("RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR")
    for kind in ("", "/int16")
    for shape, oh, ow in (((1, 3, 5, 2), 7, 9), ((2, 7, 6, 1), 3, 4), ((1, 1, 4, 3), 5, 1), ((1, 5, 5, 1), 13, 2))
    for mode in ("plain", "align_corners", "half_pixel_centers")
]


@pytest.mark.cross
def test_rare_resizes_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(49), RESIZE).write(tmp_path / "resize.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=8)


# ARG_MAX and ARG_MIN: long axes (equal extremes certain: the first index wins), every axis of a 4-D
# tensor, negative axes, rank 1, an axis of one element.
ARGS = [
    (op, {"input_shape": shape, "axis": axis})
    for op in ("ARG_MAX", "ARG_MIN")
    for shape, axis in (((300,), 0), ((2, 260), -1), ((3, 200, 2), 1), ((2, 3, 4, 5), 0), ((2, 3, 4, 5), 1),
                        ((2, 3, 4, 5), 2), ((2, 3, 4, 5), 3), ((2, 3, 4, 5), -3), ((4, 1, 3), 1))
]


@pytest.mark.cross
def test_rare_arg_max_and_min_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(50), ARGS).write(tmp_path / "arg.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=8)


def _one(op: str, in_dtype: str = "int8", out_dtype: str = "int32", operand=None, out_shape=(2, 4)) -> GraphBuilder:
    graph = GraphBuilder()
    x = graph.add_input("x", in_dtype, (2, 3, 4), scale=0.05, zero_point=0)
    second = graph.add_constant("axis", np.array([1] if operand is None else operand, np.int32))
    if op.startswith("ARG"):
        options = (schema.ArgMaxOptionsT if op == "ARG_MAX" else schema.ArgMinOptionsT)()
        options.outputType = {"int32": schema.TensorType.INT32, "int64": schema.TensorType.INT64}[out_dtype]
        y = graph.add_tensor("y", out_dtype, out_shape)
    else:
        options = schema.ReducerOptionsT(keepDims=False)
        y = graph.add_tensor("y", in_dtype, out_shape, scale=0.05, zero_point=0)
    graph.add_operator(op, [x, second], [y], options)
    graph.mark_output(y)
    return graph


def _resize(op: str, size, out_shape, align: bool = False, half: bool = False, out_scale: float = 0.05) -> GraphBuilder:
    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (1, 3, 4, 2), scale=0.05, zero_point=0)
    second = graph.add_constant("size", np.array(size, np.int32))
    y = graph.add_tensor("y", "int8", out_shape, scale=out_scale, zero_point=0)
    options = (schema.ResizeBilinearOptionsT if op == "RESIZE_BILINEAR" else schema.ResizeNearestNeighborOptionsT)()
    options.alignCorners, options.halfPixelCenters = align, half
    graph.add_operator(op, [x, second], [y], options)
    graph.mark_output(y)
    return graph


@pytest.mark.parametrize("graph, said", [
    (_one("ARG_MAX", "int16"), "only int8 inputs are supported for ARG_MAX"),
    (_one("ARG_MAX", operand=[1, 2]), "is not one axis of a rank-3 tensor"),
    (_one("ARG_MIN", operand=[3]), "is not one axis of a rank-3 tensor"),
    (_one("REDUCE_PROD"), "REDUCE_PROD"),
    (_resize("RESIZE_BILINEAR", [6, 8], (1, 6, 8, 2), out_scale=0.1), "share one quantization"),
    (_resize("RESIZE_NEAREST_NEIGHBOR", [6, 8], (1, 6, 8, 2), align=True, half=True), "align_corners and half_pixel"),
    (_resize("RESIZE_NEAREST_NEIGHBOR", [6, 8], (1, 5, 8, 2)), "resized to [6, 8]"),
    (_resize("RESIZE_BILINEAR", [0, 8], (1, 0, 8, 2)), "is not two positive integers"),
])
def test_unsupported_reductions_and_resizes_are_refused_in_one_line(graph, said, tmp_path):
    _assert_refused(graph.write(tmp_path / "m.tflite"), said, tmp_path)


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("seed", range(6))
def test_many_resize_and_arg_cases_equal_litert(seed, cmsis_nn, tmp_path):
    kinds = ("RESIZE_NEAREST_NEIGHBOR", "RESIZE_NEAREST_NEIGHBOR/int16", "RESIZE_BILINEAR", "RESIZE_BILINEAR/int16",
             "ARG_MAX", "ARG_MIN", "REDUCE_MAX/int16", "REDUCE_MIN/int16")
    model = bundle_model(np.random.default_rng(seed), [k for k in kinds for _ in range(6)]).write(tmp_path / "r.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=8, seed=seed)
