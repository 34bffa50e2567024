"""The indexing operators (lowering/indexing.py) in the cases random draws rarely reach — gathers of
whole tensors and of single elements, broadcasts to rank 5, reversals of size-1 axes, cumulative
sums along every axis in both directions — bundled into one model per test and compared bit for bit
with LiteRT's reference kernels; and what stays refused, in one line."""

from __future__ import annotations

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers the cases
from test_import_operators import _assert_refused, check_against_litert
from tflitewriter import CASE_SHAPES, GraphBuilder, bundle_model

INDEXING = sorted(name for name in CASE_SHAPES if CASE_SHAPES[name][1].__module__ == "tflitecases.indexing")

_RARE = [
    ("GATHER_ND", {"input_shape": (2, 3, 4), "depth": 3, "slices": 5}),
    ("GATHER_ND", {"input_shape": (5,), "depth": 1, "indices": [[4], [0], [4]]}),
    ("GATHER_ND/int32", {"input_shape": (3, 4), "depth": 1, "indices": [[2], [2], [0], [1]]}),
    ("BROADCAST_TO", {"input_shape": (1,), "leading": [2, 1, 3, 2], "grown": [3]}),
    ("BROADCAST_TO/int16", {"input_shape": (3, 1, 2), "leading": [2], "grown": [3, 4, 2]}),
    ("BROADCAST_TO", {"input_shape": (2, 3), "leading": [], "grown": [2, 3]}),
    ("REVERSE_V2", {"input_shape": (2, 1, 3), "axis": 1}),
    ("REVERSE_V2/int16", {"input_shape": (4, 5), "axis": -1}),
    ("REVERSE_V2/float32", {"input_shape": (3, 2, 2, 2), "axis": 0}),
    ("SHAPE", {"input_shape": (1, 2, 3, 4)}),
    ("BROADCAST_ARGS", {"input_shape": (1, 3), "other": [4, 2, 1]}),
    *[("CUMSUM/float32", {"input_shape": (2, 3, 4), "axis": a, "exclusive": e, "reverse": r})
      for a in (0, 1, -1) for e in (False, True) for r in (False, True)],
    ("CUMSUM/int32", {"input_shape": (3, 5), "axis": 1, "exclusive": True, "reverse": True}),
    ("CUMSUM/int32", {"input_shape": (6,), "axis": 0, "exclusive": False, "reverse": False}),
]


@pytest.mark.cross
def test_every_indexing_case_on_the_host_equals_litert(cmsis_nn, tmp_path):
    """Several random cases of every indexing kind."""
    cases = [name for name in INDEXING for _ in range(3)]
    model = bundle_model(np.random.default_rng(31), cases).write(tmp_path / "indexing.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host")


@pytest.mark.cross
def test_rare_indexing_parameters_on_the_host_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(32), _RARE).write(tmp_path / "rare.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=6)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("board", ["host", "mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("seed", [33, 34])
def test_indexing_cases_over_many_seeds(board, seed, cmsis_nn, tmp_path):
    cases = [name for name in INDEXING for _ in range(3)] + _RARE
    model = bundle_model(np.random.default_rng(seed), cases).write(tmp_path / "indexing.tflite")
    check_against_litert(model, board, cmsis_nn("v6.0.0"), tmp_path / board, seed=seed, samples=2)
