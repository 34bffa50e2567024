"""LOGICAL_AND, LOGICAL_OR and LOGICAL_NOT cases: bool tensors made in the graph by comparisons
(x > a, x < b), combined, and turned back into int8 by SELECT_V2 (the graph's output), every operand
possibly broadcast."""

from __future__ import annotations

from tflitewriter import (Draw, GraphBuilder, _broadcast_shape, _nhwc, _output, _output_shape_of_broadcast,
                          register_cases)


def _same(graph: GraphBuilder, x: int) -> dict:
    return {"scale": graph.tensor(x).scale, "zero_point": graph.tensor(x).zero_point}


def _condition(graph: GraphBuilder, p: Draw, x: int, name: str, op: str) -> int:
    """x op (an operand of x's quantization, x's shape or broadcast to it): a bool tensor."""
    other = graph.add_input(f"{name}_operand", "int8", _broadcast_shape(p, graph.tensor(x).shape), **_same(graph, x))
    shape = _output_shape_of_broadcast(graph.tensor(x).shape, graph.tensor(other).shape)
    condition = graph.add_tensor(f"{name}_condition", "bool", shape)
    graph.add_operator(op, [x, other], [condition])
    return condition


def add_logical(op: str):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        conditions = [_condition(graph, p, x, f"{name}_a", "GREATER")]
        if op != "LOGICAL_NOT":
            conditions.append(_condition(graph, p, x, f"{name}_b", "LESS"))
        shape = tuple(graph.tensor(conditions[0]).shape)
        for c in conditions[1:]:
            shape = _output_shape_of_broadcast(shape, graph.tensor(c).shape)
        combined = graph.add_tensor(f"{name}_combined", "bool", shape)
        graph.add_operator(op, conditions, [combined])
        third = graph.add_input(f"{name}_else", "int8", tuple(graph.tensor(x).shape), **_same(graph, x))
        out_shape = _output_shape_of_broadcast(shape, graph.tensor(third).shape)
        y = _output(graph, name, "int8", out_shape, _same(graph, x))
        graph.add_operator("SELECT_V2", [combined, x, third], [y])
        return y
    return add


_SCALES = (1e-3, 1e-1)
register_cases({op: (_nhwc, add_logical(op), _SCALES, "int8") for op in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT")})
