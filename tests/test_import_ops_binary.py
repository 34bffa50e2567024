"""LOGICAL_AND, LOGICAL_OR and LOGICAL_NOT against LiteRT's reference kernels: bool tensors of the
graph made by comparisons, of one shape and broadcast; and what stays refused, in one line."""

from __future__ import annotations

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers the cases
from test_import_operators import _assert_refused, check_against_litert
from tflitewriter import GraphBuilder, bundle_model

RARE = [
    ("LOGICAL_AND", {"input_shape": (1, 4, 4, 8), "broadcast": False}),
    ("LOGICAL_AND", {"input_shape": (1, 3, 5, 4), "broadcast": True}),
    ("LOGICAL_OR", {"input_shape": (1, 4, 4, 8), "broadcast": False}),
    ("LOGICAL_OR", {"input_shape": (2, 3, 2, 5), "broadcast": True}),
    ("LOGICAL_NOT", {"input_shape": (1, 4, 4, 8), "broadcast": False}),
    ("LOGICAL_NOT", {"input_shape": (1, 2, 3, 4), "broadcast": True}),
]
INT16 = [(f"{op}/int16", {"input_shape": shape, "broadcast": broadcast, "constant_operand": constant})
         for op in ("ADD", "SUB", "MUL")
         for shape, broadcast, constant in (((1, 4, 4, 8), False, False), ((1, 4, 4, 8), False, True),
                                            ((1, 3, 5, 4), True, False), ((2, 3, 2, 5), True, True))]


@pytest.mark.exhaustive  # every kind of it also runs in CI: test_every_operator_on_the_host_equals_litert
@pytest.mark.cross
def test_logical_operators_equal_litert(cmsis_nn, tmp_path):
    graph = bundle_model(np.random.default_rng(7), RARE)
    check_against_litert(graph.write(tmp_path / "logical.tflite"), "host", cmsis_nn("v6.0.0"), tmp_path / "host",
                         samples=6)


@pytest.mark.exhaustive  # every kind of it also runs in CI: test_every_operator_on_the_host_equals_litert
@pytest.mark.cross
def test_int16_add_sub_mul_equal_litert(cmsis_nn, tmp_path):
    graph = bundle_model(np.random.default_rng(8), INT16)
    check_against_litert(graph.write(tmp_path / "int16.tflite"), "host", cmsis_nn("v6.0.0"), tmp_path / "host",
                         samples=6)


def _logical_of(b_constant: bool, shape_b=(1, 4), rank5: bool = False) -> GraphBuilder:
    graph = GraphBuilder()
    shape = (1, 2, 1, 3, 4) if rank5 else (1, 4)
    x = graph.add_input("x", "int8", shape, scale=0.1, zero_point=0)
    z = graph.add_input("z", "int8", shape, scale=0.1, zero_point=0)
    a = graph.add_tensor("a", "bool", shape)
    graph.add_operator("GREATER", [x, z], [a])
    if b_constant:
        b = graph.add_constant("b", np.ones(shape_b, dtype=np.bool_))
    else:
        w = graph.add_input("w", "int8", shape_b, scale=0.1, zero_point=0)
        b = graph.add_tensor("b", "bool", shape_b)
        graph.add_operator("LESS", [w, graph.add_input("v", "int8", shape_b, scale=0.1, zero_point=0)], [b])
    c = graph.add_tensor("c", "bool", tuple(np.broadcast_shapes(shape, shape_b)))
    graph.add_operator("LOGICAL_AND", [a, b], [c])
    y = graph.add_tensor("y", "int8", tuple(np.broadcast_shapes(shape, shape_b)), scale=0.1, zero_point=0)
    graph.add_operator("SELECT_V2", [c, x, x], [y])
    graph.mark_output(y)
    return graph


@pytest.mark.parametrize("graph, said", [
    (_logical_of(True), "constant bool operand"),
    (_logical_of(False, shape_b=(1, 1, 1, 1, 4), rank5=True), "broadcasting at rank 5"),
])
def test_unsupported_logical_operands_are_refused_in_one_line(graph, said, tmp_path):
    _assert_refused(graph.write(tmp_path / "m.tflite"), said, tmp_path)


def _int16_of(op: str, zero_point: int = 0, pot: bool = False, out_scale: float = 1e-3) -> GraphBuilder:
    from ai_edge_litert import schema_py_generated as schema

    graph = GraphBuilder()
    x = graph.add_input("x", "int16", (1, 8), scale=1e-3, zero_point=zero_point)
    w = graph.add_input("w", "int16", (1, 8), scale=1e-3, zero_point=0)
    y = graph.add_tensor("y", "int16", (1, 8), scale=out_scale, zero_point=0)
    options = schema.MulOptionsT() if op == "MUL" else (schema.AddOptionsT if op == "ADD" else schema.SubOptionsT)()
    if op != "MUL":
        options.potScaleInt16 = pot
    graph.add_operator(op, [x, w], [y], options)
    graph.mark_output(y)
    return graph


@pytest.mark.parametrize("graph, said", [
    (_int16_of("ADD", pot=True), "pot_scale_int16 (TFLite's power-of-two int16 path) is not supported"),
    (_int16_of("SUB", zero_point=3), "has zero point 3 (int16 is symmetric)"),
    (_int16_of("MUL", out_scale=1e-9), "overflows TFLite's 32-bit arithmetic"),
])
def test_unsupported_int16_parameters_are_refused_in_one_line(graph, said, tmp_path):
    _assert_refused(graph.write(tmp_path / "m.tflite"), said, tmp_path)
