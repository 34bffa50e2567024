"""ADD, SUB and MUL against LiteRT's reference kernels with the broadcasting shapes models hold
listed: squeeze-excite's [1,H,W,C] × [1,1,1,C], a scalar, a row, both operands broadcast, a
constant on either side, rank 5."""

from __future__ import annotations

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers the element-wise cases
from test_import_operators import check_against_litert
from tflitewriter import GraphBuilder, bundle_model

RARE = [
    ("MUL", {"input_shape": (1, 4, 4, 8), "broadcast": False, "constant_operand": False}),
    ("ADD", {"input_shape": (1, 4, 4, 8), "broadcast": False, "constant_operand": True}),
    ("SUB", {"input_shape": (1, 4, 4, 8), "broadcast": False, "constant_operand": False}),
    ("MUL/swapped", {"input_shape": (1, 5, 3, 6), "broadcast": True, "constant_operand": False}),
    ("ADD/swapped", {"input_shape": (2, 3, 4, 5), "broadcast": True, "constant_operand": True}),
    ("SUB/swapped", {"input_shape": (1, 2, 3, 4), "broadcast": True, "constant_operand": True}),
]


def _squeeze_excite_like(graph: GraphBuilder, rng: np.random.Generator, op: str, a_shape, b_shape, constant: bool):
    """x [a_shape] op s [b_shape]: the shapes written out, the operand a graph input or a constant."""
    x = graph.add_input(f"x{len(graph.operators)}", "int8", a_shape, scale=0.02, zero_point=-5)
    if constant:
        s = graph.add_constant(f"s{len(graph.operators)}", rng.integers(-128, 128, b_shape).astype(np.int8),
                               scale=0.01, zero_point=3)
    else:
        s = graph.add_input(f"s{len(graph.operators)}", "int8", b_shape, scale=0.01, zero_point=3)
    shape = tuple(np.broadcast_shapes(a_shape, b_shape))
    y = graph.add_tensor(f"y{len(graph.operators)}", "int8", shape, scale=0.03 if op != "MUL" else 0.002, zero_point=7)
    graph.add_operator(op, [x, s], [y])
    graph.mark_output(y)


SHAPES = [((1, 4, 4, 16), (1, 1, 1, 16)), ((1, 4, 4, 16), (16,)), ((1, 4, 4, 16), (1,)), ((1, 4, 1, 3), (1, 1, 5, 1)),
          ((2, 1, 3, 1, 2), (1, 4, 1, 5, 1)), ((3, 1), (1, 4))]


@pytest.mark.cross
def test_broadcasting_shapes_equal_litert(cmsis_nn, tmp_path):
    rng = np.random.default_rng(5)
    graph = bundle_model(rng, RARE)
    for op in ("ADD", "SUB", "MUL"):
        for index, (a, b) in enumerate(SHAPES):
            _squeeze_excite_like(graph, rng, op, a, b, constant=index % 2 == 0)
    check_against_litert(graph.write(tmp_path / "broadcast.tflite"), "host", cmsis_nn("v6.0.0"), tmp_path / "host",
                         samples=6)
