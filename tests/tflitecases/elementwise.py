"""Binary element-wise cases beyond tflitewriter's ADD and MUL (which broadcast their second operand,
a graph input or a constant): SUB, and ADD/MUL with the broadcast operand first."""

from __future__ import annotations

from ai_edge_litert import schema_py_generated as schema

from tflitewriter import (ACTIVATIONS, _TYPICAL_INPUT, Draw, GraphBuilder, _nhwc, _output,
                          _output_shape_of_broadcast, _second_operand, _zero_point, activation_code, register_cases)

_OPTIONS = {"ADD": schema.AddOptionsT, "SUB": schema.SubOptionsT, "MUL": schema.MulOptionsT}


def _binary(op: str, swapped: bool):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        x_scale = graph.tensor(x).scale
        if op == "MUL":
            other = _second_operand(graph, p, x, name, p.log_uniform("operand_scale", 1e-3, 1e-1))
            out_scale = x_scale * graph.tensor(other).scale * _TYPICAL_INPUT * _TYPICAL_INPUT / 64
        else:
            other = _second_operand(graph, p, x, name, x_scale * p.log_uniform("operand_scale_ratio", 0.25, 4.0))
            out_scale = max(x_scale, graph.tensor(other).scale) * 2
        out_scale *= p.log_uniform("output_scale_ratio", 0.5, 2.0)
        activation = p.choice("activation", ACTIVATIONS)
        shape = _output_shape_of_broadcast(graph.tensor(x).shape, graph.tensor(other).shape)
        y = _output(graph, name, "int8", shape, {"scale": out_scale, "zero_point": _zero_point(p, "output_zero_point")})
        inputs = [other, x] if swapped else [x, other]
        graph.add_operator(op, inputs, [y], _OPTIONS[op](fusedActivationFunction=activation_code(activation)))
        return y
    return add


_SCALES = (1e-3, 1e-1)
register_cases({
    "SUB": (_nhwc, _binary("SUB", False), _SCALES, "int8"),
    "SUB/swapped": (_nhwc, _binary("SUB", True), _SCALES, "int8"),
    "ADD/swapped": (_nhwc, _binary("ADD", True), _SCALES, "int8"),
    "MUL/swapped": (_nhwc, _binary("MUL", True), _SCALES, "int8"),
})
