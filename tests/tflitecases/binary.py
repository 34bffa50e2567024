"""LOGICAL_AND, LOGICAL_OR and LOGICAL_NOT cases: bool tensors made in the graph by comparisons
(x > a, x < b; a, b constants), combined, and turned back into int8 by SELECT_V2 (the graph's output),
every operand possibly broadcast; x is the case's only graph input (a bundle's inputs are few)."""

from __future__ import annotations

import numpy as np
from tflitewriter import (Draw, GraphBuilder, _broadcast_shape, _nhwc, _output, _output_shape_of_broadcast,
                          register_cases)


def _same(graph: GraphBuilder, x: int) -> dict:
    return {"scale": graph.tensor(x).scale, "zero_point": graph.tensor(x).zero_point}


def _condition(graph: GraphBuilder, p: Draw, x: int, name: str, op: str) -> int:
    """x op (an operand of x's quantization, x's shape or broadcast to it): a bool tensor."""
    other = graph.add_constant(f"{name}_operand", p.rng.integers(-128, 128, _broadcast_shape(p, graph.tensor(x).shape))
                               .astype(np.int8), **_same(graph, x))
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
        third = graph.add_constant(f"{name}_else", p.rng.integers(-128, 128, graph.tensor(x).shape).astype(np.int8),
                                   **_same(graph, x))
        out_shape = _output_shape_of_broadcast(shape, graph.tensor(third).shape)
        y = _output(graph, name, "int8", out_shape, _same(graph, x))
        graph.add_operator("SELECT_V2", [combined, x, third], [y])
        return y
    return add


_SCALES = (1e-3, 1e-1)
register_cases({op: (_nhwc, add_logical(op), _SCALES, "int8") for op in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT")})


def add_int16(op: str):
    """int16 ADD/SUB/MUL (16x8 models: symmetric, pot_scale_int16 false as the converter writes it), the
    other operand a graph input or a constant, possibly broadcast, a fused activation."""
    from ai_edge_litert import schema_py_generated as schema
    from tflitewriter import ACTIVATIONS, activation_code

    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        scale = graph.tensor(x).scale
        other_scale = scale * p.log_uniform("operand_scale_ratio", 0.25, 4.0)
        shape = _broadcast_shape(p, graph.tensor(x).shape)
        if p("constant_operand", lambda: bool(p.rng.random() < 0.3)):
            other = graph.add_constant(f"{name}_operand", p.rng.integers(-32768, 32768, shape).astype(np.int16),
                                       scale=other_scale, zero_point=0)
        else:
            other = graph.add_input(f"{name}_operand", "int16", shape, scale=other_scale, zero_point=0)
        if op == "MUL":
            out_scale = scale * other_scale * 3000 * p.log_uniform("output_scale_ratio", 0.5, 2.0)
            options = schema.MulOptionsT()
        else:
            out_scale = max(scale, other_scale) * 2 * p.log_uniform("output_scale_ratio", 0.5, 2.0)
            options = (schema.AddOptionsT if op == "ADD" else schema.SubOptionsT)()
            options.potScaleInt16 = False
        options.fusedActivationFunction = activation_code(p.choice("activation", ACTIVATIONS))
        out_shape = _output_shape_of_broadcast(graph.tensor(x).shape, graph.tensor(other).shape)
        y = _output(graph, name, "int16", out_shape, {"scale": out_scale, "zero_point": 0})
        graph.add_operator(op, [x, other], [y], options)
        return y
    return add


register_cases({f"{op}/int16": (_nhwc, add_int16(op), _SCALES, "int16") for op in ("ADD", "SUB", "MUL")})
