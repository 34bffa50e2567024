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


def _second(graph: GraphBuilder, p: Draw, x: int, name: str, **quantization) -> int:
    """Another operand of x's shape or broadcast to it: a graph input or a constant."""
    from tflitewriter import _broadcast_shape
    import numpy as np

    shape = _broadcast_shape(p, graph.tensor(x).shape)
    if p("constant_operand", lambda: bool(p.rng.random() < 0.25)):
        return graph.add_constant(f"{name}_operand", p.rng.integers(-128, 128, shape).astype(np.int8), **quantization)
    return graph.add_input(f"{name}_operand", "int8", shape, **quantization)


def _same(graph: GraphBuilder, x: int) -> dict:
    return {"scale": graph.tensor(x).scale, "zero_point": graph.tensor(x).zero_point}


def add_maximum_minimum(op: str):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        other = _second(graph, p, x, name, **_same(graph, x))
        shape = _output_shape_of_broadcast(graph.tensor(x).shape, graph.tensor(other).shape)
        y = _output(graph, name, "int8", shape, _same(graph, x))
        graph.add_operator(op, [x, other], [y])
        return y
    return add


def add_squared_difference(graph: GraphBuilder, p: Draw, x: int, name: str = "squared_difference") -> int:
    scale = graph.tensor(x).scale
    other = _second(graph, p, x, name, scale=scale * p.log_uniform("operand_scale_ratio", 0.5, 2.0),
                    zero_point=_zero_point(p, "operand_zero_point"))
    shape = _output_shape_of_broadcast(graph.tensor(x).shape, graph.tensor(other).shape)
    out_scale = (scale * 100) ** 2 / 100 * p.log_uniform("output_scale_ratio", 0.5, 2.0)
    y = _output(graph, name, "int8", shape, {"scale": out_scale, "zero_point": _zero_point(p, "output_zero_point")})
    graph.add_operator("SQUARED_DIFFERENCE", [x, other], [y])
    return y


def add_prelu(graph: GraphBuilder, p: Draw, x: int, name: str = "prelu") -> int:
    import numpy as np

    shape = graph.tensor(x).shape
    alpha_shape = p.choice("alpha_shape", ((shape[-1],), (1, 1, shape[-1]) if len(shape) >= 3 else (shape[-1],)))
    alpha = graph.add_constant(f"{name}_alpha", p.rng.integers(-128, 128, alpha_shape).astype(np.int8),
                               scale=p.log_uniform("alpha_scale", 1e-3, 1e-2), zero_point=_zero_point(p, "alpha_zero_point"))
    y = _output(graph, name, "int8", shape, {"scale": graph.tensor(x).scale * p.log_uniform("output_scale_ratio", 0.5, 2.0),
                                             "zero_point": _zero_point(p, "output_zero_point")})
    graph.add_operator("PRELU", [x, alpha], [y])
    return y


def add_comparison_and_select(op: str):
    """x op other → a bool condition → SELECT_V2(condition, x, a third operand): an int8 output."""
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        other = _second(graph, p, x, f"{name}_b", scale=graph.tensor(x).scale * p.log_uniform("operand_scale_ratio", 0.5, 2.0),
                        zero_point=_zero_point(p, "operand_zero_point"))
        shape = _output_shape_of_broadcast(graph.tensor(x).shape, graph.tensor(other).shape)
        condition = graph.add_tensor(f"{name}_condition", "bool", shape)
        graph.add_operator(op, [x, other], [condition])
        third = _second(graph, p, x, f"{name}_c", **_same(graph, x))
        out_shape = _output_shape_of_broadcast(shape, graph.tensor(third).shape)
        y = _output(graph, name, "int8", out_shape, _same(graph, x))
        graph.add_operator("SELECT_V2", [condition, x, third], [y])
        return y
    return add


register_cases({
    "MAXIMUM": (_nhwc, add_maximum_minimum("MAXIMUM"), _SCALES, "int8"),
    "MINIMUM": (_nhwc, add_maximum_minimum("MINIMUM"), _SCALES, "int8"),
    "SQUARED_DIFFERENCE": (_nhwc, add_squared_difference, _SCALES, "int8"),
    "PRELU": (_nhwc, add_prelu, _SCALES, "int8"),
    **{f"{op}/select": (_nhwc, add_comparison_and_select(op), _SCALES, "int8")
       for op in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")},
    "SELECT_V2": (_nhwc, add_comparison_and_select("GREATER"), _SCALES, "int8"),
})
