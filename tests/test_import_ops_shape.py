"""Operators that move bytes against LiteRT's reference kernels, with the cases random draws rarely reach
listed: PADV2 with extreme values, rank-5 PAD, rank-6 TRANSPOSE, int16 everywhere, negative axes; and
what stays refused (concatenation across quantizations, rank-6 PAD)."""

from __future__ import annotations

import numpy as np
import pytest
import tflitecases  # noqa: F401 - registers the cases
from ai_edge_litert import schema_py_generated as schema
from test_import_operators import _assert_refused, check_against_litert
from tflitewriter import GraphBuilder, bundle_model

_MINE = ["PADV2", "PADV2/int16", "PAD/int16", "PAD/rank5", "TRANSPOSE/int16", "TRANSPOSE/rank6", "RESHAPE/int16",
         "SQUEEZE/int16", "CONCATENATION/int16", "PADV2/float32", "TRANSPOSE/float32", "CONCATENATION/float32"]
RARE = [
    ("PADV2", {"input_shape": (1, 3, 3, 2), "value": -128}),
    ("PADV2", {"input_shape": (1, 3, 3, 2), "value": 127}),
    ("PADV2/int16", {"input_shape": (1, 2, 3, 2), "value": -32768}),
    ("PADV2/int16", {"input_shape": (1, 2, 3, 2), "value": 32767}),
    ("PAD/int16", {"input_shape": (4,), "paddings": [[0, 5]]}),
    ("PAD/rank5", {"input_shape": (2, 1, 3, 2, 2), "paddings": [[1, 0], [0, 2], [1, 1], [0, 0], [2, 1]]}),
    ("PAD", {"input_shape": (1, 2, 2, 1), "paddings": [[0, 0], [0, 0], [0, 0], [0, 0]]}),
    ("TRANSPOSE/rank6", {"input_shape": (2, 1, 3, 2, 2, 3), "perm": [5, 3, 1, 0, 4, 2]}),
    ("TRANSPOSE/rank6", {"input_shape": (2, 3, 1, 2, 3), "perm": [4, 0, 3, 1, 2]}),
    ("TRANSPOSE/int16", {"input_shape": (3, 5), "perm": [1, 0]}),
    ("CONCATENATION/int16", {"input_shape": (2, 3, 4), "axis": -1, "operands": 3}),
    ("CONCATENATION/int16", {"input_shape": (2, 3, 4), "axis": 0, "operands": 2}),
    ("RESHAPE/int16", {"input_shape": (2, 3, 4), "new_shape": (4, 6)}),
    ("SQUEEZE/int16", {"input_shape": (1, 4, 1, 3)}),
]


@pytest.mark.cross
def test_rare_shape_cases_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(37), RARE).write(tmp_path / "shape.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


@pytest.mark.cross
def test_random_shape_cases_equal_litert(cmsis_nn, tmp_path):
    cases = [(name, {}) for name in _MINE for _ in range(3)]
    model = bundle_model(np.random.default_rng(38), cases).write(tmp_path / "shape.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("seed", range(4))
def test_many_shape_cases_equal_litert(seed, cmsis_nn, tmp_path):
    cases = [(name, {}) for name in _MINE for _ in range(6)]
    model = bundle_model(np.random.default_rng(100 + seed), cases).write(tmp_path / "shape.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4, seed=seed)


def _concatenation(dtype: str, scales: tuple[float, float]) -> GraphBuilder:
    graph = GraphBuilder()
    a = graph.add_input("a", dtype, (1, 4), scale=scales[0], zero_point=0)
    b = graph.add_input("b", dtype, (1, 4), scale=scales[1], zero_point=0)
    y = graph.add_tensor("y", dtype, (1, 8), scale=scales[0], zero_point=0)
    graph.add_operator("CONCATENATION", [a, b], [y], schema.ConcatenationOptionsT(axis=1, fusedActivationFunction=0))
    graph.mark_output(y)
    return graph


def _pad6() -> GraphBuilder:
    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (1, 1, 1, 1, 2, 2), scale=0.05, zero_point=0)
    y = graph.add_tensor("y", "int8", (1, 1, 1, 1, 2, 4), scale=0.05, zero_point=0)
    paddings = graph.add_constant("paddings", np.array([[0, 0]] * 5 + [[1, 1]], np.int32))
    graph.add_operator("PAD", [x, paddings], [y], schema.PadOptionsT())
    graph.mark_output(y)
    return graph


@pytest.mark.parametrize("graph, said", [
    (_concatenation("int8", (0.05, 0.1)), "every input and the output must share one quantization"),
    (_concatenation("int16", (1e-3, 2e-3)), "every input and the output must share one quantization"),
    (_pad6(), "rank 6 is over 5"),
])
def test_unsupported_shape_parameters_are_refused_in_one_line(graph, said, tmp_path):
    _assert_refused(graph.write(tmp_path / "m.tflite"), said, tmp_path)
