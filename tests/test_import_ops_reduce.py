"""Reductions against LiteRT's reference kernels, with the cases random draws rarely reach listed:
MEAN over H and W keeping dims (global average pooling as the converter writes it; LiteRT's
QuantizedMeanOrSum, not the older requantise-then-divide), one quantization in and out, large counts
where the folded multiplier's precision shows, negative axes, every axis."""

from __future__ import annotations

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers the reductions' cases
from test_import_operators import check_against_litert
from tflitewriter import bundle_model

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
    ("REDUCE_MAX", {"input_shape": _NHWC, "axes": [1, 2], "keep_dims": True}),
    ("REDUCE_MIN", {"input_shape": (2, 3, 4), "axes": [0, 2], "keep_dims": False}),
    ("MEAN/int16", {"input_shape": (1, 7, 7, 4), "axes": [1, 2], "keep_dims": True}),
]


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
