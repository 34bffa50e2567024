"""The unary element-wise operators and activations (lowering/unary.py and the int16 kinds of
elementwise.py's), in cases the random draws rarely reach, bundled into one model per test and
compared bit for bit with LiteRT's reference kernels; and what stays refused."""

from __future__ import annotations

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers the cases
from test_import_operators import check_against_litert
from tflitewriter import CASE_SHAPES, bundle_model

UNARY = sorted(name for name in CASE_SHAPES if CASE_SHAPES[name][1].__module__ == "tflitecases.unary")


@pytest.mark.cross
def test_every_unary_case_on_the_host_equals_litert(cmsis_nn, tmp_path):
    """Several random cases of every unary kind."""
    cases = [name for name in UNARY for _ in range(3)]
    model = bundle_model(np.random.default_rng(11), cases).write(tmp_path / "unary.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host")
